//! The API layer's error: an MPI error class plus a sentence for the user.
//! `src/abi` turns it into a return code or runs the error handler.

use super::consts::err;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpiError {
    pub class: i32,
    pub detail: String,
}

pub type MpiResult<T> = Result<T, MpiError>;

impl MpiError {
    pub fn new(class: i32, detail: impl Into<String>) -> MpiError {
        MpiError {
            class,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for MpiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", class_name(self.class), self.detail)
    }
}

/// The error of a failed request: its MPI class and what happened.
pub fn request_error(e: &crate::progress::ReqError) -> MpiError {
    use crate::progress::ReqError;
    match e {
        ReqError::Truncate => MpiError::new(err::TRUNCATE, "message truncated"),
        ReqError::PeerLost(p) => MpiError::new(
            err::PROC_FAILED,
            format!("world rank {p}, which this operation involves, has failed"),
        ),
        ReqError::Halted => MpiError::new(err::TRY_RELOAD, "a process failed"),
        ReqError::ProcFailedPending => MpiError::new(
            err::PROC_FAILED_PENDING,
            "a process of the communicator failed and the failure is not acknowledged (MPIX_Comm_failure_ack): a receive from MPI_ANY_SOURCE cannot wait",
        ),
        ReqError::Revoked => MpiError::new(err::REVOKED, "the communicator was revoked"),
        ReqError::Failed { class, detail } => MpiError::new(*class, detail.clone()),
    }
}

impl From<crate::coll::CollError> for MpiError {
    fn from(e: crate::coll::CollError) -> MpiError {
        match e {
            crate::coll::CollError::Request(r) => request_error(&r),
            crate::coll::CollError::Internal(why) => MpiError::new(err::INTERN, why),
        }
    }
}

/// What went wrong in the Stages layer, as the error of the MPI call
/// `call`.
pub fn stages_error(call: &str, e: crate::stages::StagesError) -> MpiError {
    use crate::stages::StagesError as E;
    let class = match &e {
        E::Config(_) | E::BadName(_) | E::UnknownFile(_) => err::ARG,
        E::Io { error, .. } if error.raw_os_error() == Some(libc::ENOSPC) => err::NO_SPACE,
        E::Io { .. } => err::IO,
        E::Missing(_) | E::Malformed(_) | E::Control { .. } => err::OTHER,
    };
    MpiError::new(class, format!("{call}: {e}"))
}

/// Shorthand for `Err(MpiError::new(class, detail))`.
pub fn fail<T>(class: i32, detail: impl Into<String>) -> MpiResult<T> {
    Err(MpiError::new(class, detail))
}

pub fn class_name(class: i32) -> &'static str {
    match class {
        err::SUCCESS => "MPI_SUCCESS",
        err::BUFFER => "MPI_ERR_BUFFER",
        err::COUNT => "MPI_ERR_COUNT",
        err::TYPE => "MPI_ERR_TYPE",
        err::TAG => "MPI_ERR_TAG",
        err::COMM => "MPI_ERR_COMM",
        err::RANK => "MPI_ERR_RANK",
        err::REQUEST => "MPI_ERR_REQUEST",
        err::ROOT => "MPI_ERR_ROOT",
        err::GROUP => "MPI_ERR_GROUP",
        err::OP => "MPI_ERR_OP",
        err::TOPOLOGY => "MPI_ERR_TOPOLOGY",
        err::DIMS => "MPI_ERR_DIMS",
        err::ARG => "MPI_ERR_ARG",
        err::UNKNOWN => "MPI_ERR_UNKNOWN",
        err::TRUNCATE => "MPI_ERR_TRUNCATE",
        err::OTHER => "MPI_ERR_OTHER",
        err::INTERN => "MPI_ERR_INTERN",
        err::IN_STATUS => "MPI_ERR_IN_STATUS",
        err::PENDING => "MPI_ERR_PENDING",
        err::KEYVAL => "MPI_ERR_KEYVAL",
        err::NO_MEM => "MPI_ERR_NO_MEM",
        err::IO => "MPI_ERR_IO",
        err::NO_SPACE => "MPI_ERR_NO_SPACE",
        err::ERRHANDLER => "MPI_ERR_ERRHANDLER",
        err::PROC_FAILED => "MPI_ERR_PROC_FAILED",
        err::PROC_FAILED_PENDING => "MPI_ERR_PROC_FAILED_PENDING",
        err::REVOKED => "MPI_ERR_REVOKED",
        err::SESSION => "MPI_ERR_SESSION",
        err::PROC_ABORTED => "MPI_ERR_PROC_ABORTED",
        err::VALUE_TOO_LARGE => "MPI_ERR_VALUE_TOO_LARGE",
        err::INFO => "MPI_ERR_INFO",
        err::INFO_KEY => "MPI_ERR_INFO_KEY",
        err::INFO_VALUE => "MPI_ERR_INFO_VALUE",
        err::INFO_NOKEY => "MPI_ERR_INFO_NOKEY",
        err::NAME => "MPI_ERR_NAME",
        err::NOT_SAME => "MPI_ERR_NOT_SAME",
        err::SPAWN => "MPI_ERR_SPAWN",
        err::PORT => "MPI_ERR_PORT",
        err::SERVICE => "MPI_ERR_SERVICE",
        err::UNSUPPORTED_OPERATION => "MPI_ERR_UNSUPPORTED_OPERATION",
        err::WIN => "MPI_ERR_WIN",
        err::BASE => "MPI_ERR_BASE",
        err::LOCKTYPE => "MPI_ERR_LOCKTYPE",
        err::RMA_CONFLICT => "MPI_ERR_RMA_CONFLICT",
        err::RMA_SYNC => "MPI_ERR_RMA_SYNC",
        err::DISP => "MPI_ERR_DISP",
        err::ASSERT => "MPI_ERR_ASSERT",
        err::RMA_RANGE => "MPI_ERR_RMA_RANGE",
        err::RMA_ATTACH => "MPI_ERR_RMA_ATTACH",
        err::RMA_SHARED => "MPI_ERR_RMA_SHARED",
        err::RMA_FLAVOR => "MPI_ERR_RMA_FLAVOR",
        err::SIZE => "MPI_ERR_SIZE",
        err::AMODE => "MPI_ERR_AMODE",
        err::BAD_FILE => "MPI_ERR_BAD_FILE",
        err::CONVERSION => "MPI_ERR_CONVERSION",
        err::DUP_DATAREP => "MPI_ERR_DUP_DATAREP",
        err::FILE_EXISTS => "MPI_ERR_FILE_EXISTS",
        err::FILE_IN_USE => "MPI_ERR_FILE_IN_USE",
        err::FILE => "MPI_ERR_FILE",
        err::NO_SUCH_FILE => "MPI_ERR_NO_SUCH_FILE",
        err::ACCESS => "MPI_ERR_ACCESS",
        err::QUOTA => "MPI_ERR_QUOTA",
        err::READ_ONLY => "MPI_ERR_READ_ONLY",
        err::UNSUPPORTED_DATAREP => "MPI_ERR_UNSUPPORTED_DATAREP",
        err::TRY_RELOAD => "MPIX_TRY_RELOAD",
        _ => "MPI_ERR_UNKNOWN",
    }
}

/// The text `MPI_Error_string` gives for a class.
pub fn class_text(class: i32) -> &'static str {
    match class {
        err::SUCCESS => "no error",
        err::BUFFER => "invalid buffer pointer",
        err::COUNT => "invalid count argument",
        err::TYPE => "invalid datatype",
        err::TAG => "invalid tag",
        err::COMM => "invalid communicator",
        err::RANK => "invalid rank",
        err::REQUEST => "invalid request",
        err::ROOT => "invalid root",
        err::GROUP => "invalid group",
        err::OP => "invalid reduction operation",
        err::TOPOLOGY => "invalid topology",
        err::DIMS => "invalid dimension argument",
        err::ARG => "invalid argument",
        err::UNKNOWN => "unknown error",
        err::TRUNCATE => "message truncated: the receive buffer is too small",
        err::OTHER => "other error",
        err::INTERN => "internal error",
        err::IN_STATUS => "error code is in the status",
        err::PENDING => "pending request",
        err::KEYVAL => "invalid attribute key",
        err::NO_MEM => "out of memory",
        err::IO => "input/output error (of a checkpoint level)",
        err::NO_SPACE => "no space left on the device",
        err::ERRHANDLER => "invalid error handler",
        err::PROC_FAILED => "a process in the communicator has failed",
        err::PROC_FAILED_PENDING => "a potential sender of a wildcard receive has failed and the failure is not acknowledged",
        err::REVOKED => "the communicator was revoked",
        err::SESSION => "invalid session",
        err::PROC_ABORTED => "a process of the operation has aborted",
        err::VALUE_TOO_LARGE => "a value is too large to be returned in the argument given",
        err::INFO => "invalid info object",
        err::INFO_KEY => "info key too long or empty",
        err::INFO_VALUE => "info value too long or empty",
        err::INFO_NOKEY => "info key not set",
        err::NAME => "invalid service name",
        err::NOT_SAME => "collective arguments differ between processes",
        err::SPAWN => "processes could not be spawned",
        err::PORT => "invalid port name",
        err::SERVICE => "invalid service name (publish or unpublish)",
        err::UNSUPPORTED_OPERATION => "operation not supported",
        err::WIN => "invalid window",
        err::BASE => "invalid base address",
        err::LOCKTYPE => "invalid lock type",
        err::RMA_CONFLICT => "conflicting accesses to a window",
        err::RMA_SYNC => "RMA call outside its synchronization",
        err::DISP => "invalid displacement",
        err::ASSERT => "invalid assertion",
        err::RMA_RANGE => "access outside the target window",
        err::RMA_ATTACH => "memory cannot be attached",
        err::RMA_SHARED => "memory cannot be shared",
        err::RMA_FLAVOR => "wrong window flavor",
        err::SIZE => "invalid size",
        err::AMODE => "invalid file access mode",
        err::BAD_FILE => "invalid file name",
        err::CONVERSION => "data conversion failed",
        err::DUP_DATAREP => "data representation already defined",
        err::FILE_EXISTS => "file exists",
        err::FILE_IN_USE => "file in use",
        err::FILE => "invalid file handle",
        err::NO_SUCH_FILE => "no such file",
        err::ACCESS => "permission denied",
        err::QUOTA => "quota exceeded",
        err::READ_ONLY => "read-only file or file system",
        err::UNSUPPORTED_DATAREP => "unsupported data representation",
        err::TRY_RELOAD => "a process failed: roll back and reload the last checkpoint",
        _ => "unknown error class",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::StagesError;
    use std::io;

    #[test]
    fn stages_errors_get_their_class_once() {
        let class = |e| stages_error("MPIX_x", e).class;
        assert_eq!(class(StagesError::Config("x".into())), err::ARG);
        assert_eq!(class(StagesError::BadName("a/b".into())), err::ARG);
        assert_eq!(class(StagesError::UnknownFile("f".into())), err::ARG);
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        let io = |error| StagesError::Io {
            what: "writing f".into(),
            error,
        };
        assert_eq!(class(io(full)), err::NO_SPACE);
        assert_eq!(
            class(io(io::Error::from(io::ErrorKind::PermissionDenied))),
            err::IO
        );
        assert_eq!(class(StagesError::Missing("none".into())), err::OTHER);
        let e = stages_error(
            "MPIX_Checkpoint_locate",
            StagesError::Malformed("bad".into()),
        );
        assert_eq!(
            (e.class, e.detail.as_str()),
            (err::OTHER, "MPIX_Checkpoint_locate: bad")
        );
    }
}
