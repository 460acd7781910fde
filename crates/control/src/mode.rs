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
    /// Nothing is replaced: the survivors hear of the failure and go on,
    /// with the ULFM interface (revoke, agree, shrink) to mend their
    /// communicators (`mpiexec --with-ft ulfm`, as in Open MPI 5).
    Ulfm,
}

impl RecoveryMode {
    pub const ALL: [RecoveryMode; 5] = [
        RecoveryMode::None,
        RecoveryMode::Stages,
        RecoveryMode::Reinit,
        RecoveryMode::Cpr,
        RecoveryMode::Ulfm,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RecoveryMode::None => "none",
            RecoveryMode::Stages => "stages",
            RecoveryMode::Reinit => "reinit",
            RecoveryMode::Cpr => "cpr",
            RecoveryMode::Ulfm => "ulfm",
        }
    }

    /// The mode named `name`; the error lists the names there are.
    pub fn parse(name: &str) -> Result<RecoveryMode, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| format!("'{name}': expected none, stages, reinit, cpr or ulfm"))
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

    /// A failure stops every rank for a recovery (the rollback modes): a
    /// lost peer is no error of its own then, the announcement halts all.
    /// Under `ulfm` (and `none`) a lost peer fails what involves it.
    pub fn halts(self) -> bool {
        matches!(
            self,
            RecoveryMode::Stages | RecoveryMode::Reinit | RecoveryMode::Cpr
        )
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
        assert!(RecoveryMode::parse("ulf")
            .unwrap_err()
            .contains("expected none"));
    }
}
