//! What can go wrong in the Stages layer. `api::error` gives each kind its
//! MPI error class once; the text says what happened and where.

use std::fmt;
use std::io;

#[derive(Debug)]
pub enum StagesError {
    /// The checkpoint configuration (`MPISTAGES_CKPT`) does not parse.
    Config(String),
    /// A name given to `MPIX_Checkpoint_route` or `_locate` is not a plain
    /// file name.
    BadName(String),
    /// The fault epoch holds no routed file of that name.
    UnknownFile(String),
    /// A file or directory of this rank could not be read or written.
    Io { what: String, error: io::Error },
    /// What was asked for is not there: no fault epoch yet, no valid copy
    /// of it, no such file or no MPI state in it.
    Missing(String),
    /// Saved data does not check out (a copy from the partner, the MPI
    /// state).
    Malformed(String),
    /// `mpiexec` could not be told (the control connection is gone).
    Control { what: String, error: io::Error },
}

impl StagesError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> StagesError {
        let what = what.into();
        move |error| StagesError::Io { what, error }
    }
}

impl fmt::Display for StagesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StagesError::Config(why) => write!(f, "MPISTAGES_CKPT: {why}"),
            StagesError::BadName(why)
            | StagesError::UnknownFile(why)
            | StagesError::Missing(why)
            | StagesError::Malformed(why) => f.write_str(why),
            StagesError::Io { what, error } | StagesError::Control { what, error } => {
                write!(f, "{what}: {error}")
            }
        }
    }
}

impl std::error::Error for StagesError {}
