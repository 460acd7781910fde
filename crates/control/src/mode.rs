//! How a job reacts to a failed rank (`mpiexec --recovery`, handed to the
//! ranks as `MPISTAGES_RECOVERY`).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryMode {
    /// The job ends (as in any MPI).
    None,
    /// The failed rank is replaced; every rank rolls back to the last
    /// checkpoint inside its main loop (MPI Stages).
    Stages,
    /// The failed rank is replaced; every rank restarts at `MPIX_Reinit`.
    Reinit,
    /// Every rank is relaunched and reads the last checkpoint.
    Cpr,
}

impl RecoveryMode {
    pub const ALL: [RecoveryMode; 4] = [
        RecoveryMode::None,
        RecoveryMode::Stages,
        RecoveryMode::Reinit,
        RecoveryMode::Cpr,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RecoveryMode::None => "none",
            RecoveryMode::Stages => "stages",
            RecoveryMode::Reinit => "reinit",
            RecoveryMode::Cpr => "cpr",
        }
    }

    /// The mode named `name`; the error lists the names there are.
    pub fn parse(name: &str) -> Result<RecoveryMode, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| format!("'{name}': expected none, stages, reinit or cpr"))
    }

    /// The failed rank alone is replaced (the others live on).
    pub fn replaces_rank(self) -> bool {
        matches!(self, RecoveryMode::Stages | RecoveryMode::Reinit)
    }

    /// Failures are announced by mpiexec (not fatal to the other ranks):
    /// every mode but `none`.
    pub fn announced(self) -> bool {
        self != RecoveryMode::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for m in RecoveryMode::ALL {
            assert_eq!(RecoveryMode::parse(m.name()), Ok(m));
        }
        assert!(RecoveryMode::parse("ulfm")
            .unwrap_err()
            .contains("expected none"));
    }
}
