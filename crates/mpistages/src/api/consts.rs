//! Values of the MPI constants and predefined handles. `include/mpi.h`
//! repeats them for C; the test at the bottom checks that the two agree.

pub const ANY_SOURCE: i32 = crate::progress::request::ANY_SOURCE;
pub const PROC_NULL: i32 = crate::progress::request::PROC_NULL;
pub const ROOT: i32 = -3;
pub const ANY_TAG: i32 = crate::progress::request::ANY_TAG;
pub const UNDEFINED: i32 = -32766;
pub const TAG_UB: i32 = i32::MAX;
pub const MAX_PROCESSOR_NAME: i32 = 256;
pub const MAX_ERROR_STRING: i32 = 512;
pub const BSEND_OVERHEAD: i32 = 96;
/// The standard's version this library implements (`MPI_Get_version`).
pub const VERSION: i32 = 4;
pub const SUBVERSION: i32 = 0;

pub const COMM_NULL: i32 = 0;
pub const COMM_WORLD: i32 = 1;
pub const COMM_SELF: i32 = 2;
pub const GROUP_NULL: i32 = 0;
pub const GROUP_EMPTY: i32 = 1;
pub const REQUEST_NULL: i32 = 0;
pub const OP_NULL: i32 = 0;
pub const ERRHANDLER_NULL: i32 = 0;
pub const ERRORS_ARE_FATAL: i32 = 1;
pub const ERRORS_RETURN: i32 = 2;
pub const ERRORS_ABORT: i32 = 3;
pub const DATATYPE_NULL: i32 = 0;

pub const IDENT: i32 = 0;
pub const CONGRUENT: i32 = 1;
pub const SIMILAR: i32 = 2;
pub const UNEQUAL: i32 = 3;

pub const THREAD_SINGLE: i32 = 0;
pub const THREAD_FUNNELED: i32 = 1;
pub const THREAD_SERIALIZED: i32 = 2;
pub const THREAD_MULTIPLE: i32 = 3;

/// Attribute keys (predefined).
pub const KEY_TAG_UB: i32 = 1;
pub const KEY_HOST: i32 = 2;
pub const KEY_IO: i32 = 3;
pub const KEY_WTIME_IS_GLOBAL: i32 = 4;
pub const KEY_UNIVERSE_SIZE: i32 = 5;
pub const KEY_APPNUM: i32 = 6;
pub const KEY_LASTUSEDCODE: i32 = 7;
/// `MPIX_FT` (mpi-ext.h): whether failures are survivable (ULFM).
pub const KEY_FT: i32 = 8;

/// Error classes (the codes we return are the classes themselves).
pub mod err {
    pub const SUCCESS: i32 = 0;
    pub const BUFFER: i32 = 1;
    pub const COUNT: i32 = 2;
    pub const TYPE: i32 = 3;
    pub const TAG: i32 = 4;
    pub const COMM: i32 = 5;
    pub const RANK: i32 = 6;
    pub const REQUEST: i32 = 7;
    pub const ROOT: i32 = 8;
    pub const GROUP: i32 = 9;
    pub const OP: i32 = 10;
    pub const TOPOLOGY: i32 = 11;
    pub const DIMS: i32 = 12;
    pub const ARG: i32 = 13;
    pub const UNKNOWN: i32 = 14;
    pub const TRUNCATE: i32 = 15;
    pub const OTHER: i32 = 16;
    pub const INTERN: i32 = 17;
    pub const IN_STATUS: i32 = 18;
    pub const PENDING: i32 = 19;
    pub const KEYVAL: i32 = 48;
    pub const NO_MEM: i32 = 34;
    pub const IO: i32 = 32;
    pub const NO_SPACE: i32 = 36;
    pub const ERRHANDLER: i32 = 20;
    pub const PROC_FAILED: i32 = 75;
    pub const PROC_FAILED_PENDING: i32 = 76;
    pub const REVOKED: i32 = 77;
    // MPI 4.0's.
    pub const SESSION: i32 = 78;
    pub const PROC_ABORTED: i32 = 79;
    pub const VALUE_TOO_LARGE: i32 = 80;
    pub const INFO: i32 = 28;
    pub const INFO_KEY: i32 = 29;
    pub const INFO_VALUE: i32 = 30;
    pub const INFO_NOKEY: i32 = 31;
    pub const NAME: i32 = 33;
    pub const NOT_SAME: i32 = 35;
    pub const SPAWN: i32 = 42;
    pub const PORT: i32 = 41;
    pub const SERVICE: i32 = 54;
    pub const UNSUPPORTED_OPERATION: i32 = 44;
    pub const WIN: i32 = 45;
    pub const BASE: i32 = 46;
    pub const LOCKTYPE: i32 = 47;
    pub const RMA_CONFLICT: i32 = 49;
    pub const RMA_SYNC: i32 = 50;
    pub const DISP: i32 = 52;
    pub const ASSERT: i32 = 53;
    pub const RMA_RANGE: i32 = 55;
    pub const RMA_ATTACH: i32 = 56;
    pub const RMA_SHARED: i32 = 57;
    pub const RMA_FLAVOR: i32 = 58;
    pub const SIZE: i32 = 51;
    // Files (MPICH's numbers, but ACCESS: 20 is ERRHANDLER here).
    pub const AMODE: i32 = 21;
    pub const BAD_FILE: i32 = 22;
    pub const CONVERSION: i32 = 23;
    pub const DUP_DATAREP: i32 = 24;
    pub const FILE_EXISTS: i32 = 25;
    pub const FILE_IN_USE: i32 = 26;
    pub const FILE: i32 = 27;
    pub const NO_SUCH_FILE: i32 = 37;
    pub const ACCESS: i32 = 38;
    pub const QUOTA: i32 = 39;
    pub const READ_ONLY: i32 = 40;
    pub const UNSUPPORTED_DATAREP: i32 = 43;
    pub const LASTCODE: i32 = 127;
    /// MPI Stages: roll back and reload the last checkpoint.
    pub const TRY_RELOAD: i32 = 101;
}

/// Predefined datatype handles.
pub mod dt {
    pub const CHAR: i32 = 1;
    pub const SIGNED_CHAR: i32 = 2;
    pub const UNSIGNED_CHAR: i32 = 3;
    pub const BYTE: i32 = 4;
    pub const SHORT: i32 = 5;
    pub const UNSIGNED_SHORT: i32 = 6;
    pub const INT: i32 = 7;
    pub const UNSIGNED: i32 = 8;
    pub const LONG: i32 = 9;
    pub const UNSIGNED_LONG: i32 = 10;
    pub const LONG_LONG: i32 = 11;
    pub const UNSIGNED_LONG_LONG: i32 = 12;
    pub const FLOAT: i32 = 13;
    pub const DOUBLE: i32 = 14;
    pub const LONG_DOUBLE: i32 = 15;
    pub const WCHAR: i32 = 16;
    pub const C_BOOL: i32 = 17;
    pub const INT8_T: i32 = 18;
    pub const INT16_T: i32 = 19;
    pub const INT32_T: i32 = 20;
    pub const INT64_T: i32 = 21;
    pub const UINT8_T: i32 = 22;
    pub const UINT16_T: i32 = 23;
    pub const UINT32_T: i32 = 24;
    pub const UINT64_T: i32 = 25;
    pub const AINT: i32 = 26;
    pub const COUNT: i32 = 27;
    pub const OFFSET: i32 = 28;
    pub const C_FLOAT_COMPLEX: i32 = 29;
    pub const C_DOUBLE_COMPLEX: i32 = 30;
    pub const C_LONG_DOUBLE_COMPLEX: i32 = 31;
    pub const PACKED: i32 = 32;
    pub const FLOAT_INT: i32 = 33;
    pub const DOUBLE_INT: i32 = 34;
    pub const LONG_INT: i32 = 35;
    pub const TWO_INT: i32 = 36;
    pub const SHORT_INT: i32 = 37;
    pub const LONG_DOUBLE_INT: i32 = 38;
    pub const CXX_BOOL: i32 = 39;
    // Fortran types, usable from C as well.
    pub const INTEGER: i32 = 40;
    pub const REAL: i32 = 41;
    pub const DOUBLE_PRECISION: i32 = 42;
    pub const COMPLEX: i32 = 43;
    pub const DOUBLE_COMPLEX: i32 = 44;
    pub const LOGICAL: i32 = 45;
    pub const CHARACTER: i32 = 46;
    pub const TWO_REAL: i32 = 47;
    pub const TWO_DOUBLE_PRECISION: i32 = 48;
    pub const TWO_INTEGER: i32 = 49;
    pub const INTEGER1: i32 = 50;
    pub const INTEGER2: i32 = 51;
    pub const INTEGER4: i32 = 52;
    pub const INTEGER8: i32 = 53;
    pub const REAL4: i32 = 54;
    pub const REAL8: i32 = 55;
    pub const COMPLEX8: i32 = 56;
    pub const COMPLEX16: i32 = 57;
    pub const LOGICAL1: i32 = 58;
    pub const LOGICAL4: i32 = 59;
    pub const CXX_FLOAT_COMPLEX: i32 = 60;
    pub const CXX_DOUBLE_COMPLEX: i32 = 61;
    pub const CXX_LONG_DOUBLE_COMPLEX: i32 = 62;
    /// First handle given to derived datatypes.
    pub const FIRST_DERIVED: i32 = 64;
}

/// Predefined reduction operations.
pub mod op {
    pub const MAX: i32 = 1;
    pub const MIN: i32 = 2;
    pub const SUM: i32 = 3;
    pub const PROD: i32 = 4;
    pub const LAND: i32 = 5;
    pub const BAND: i32 = 6;
    pub const LOR: i32 = 7;
    pub const BOR: i32 = 8;
    pub const LXOR: i32 = 9;
    pub const BXOR: i32 = 10;
    pub const MINLOC: i32 = 11;
    pub const MAXLOC: i32 = 12;
    pub const REPLACE: i32 = 13;
    pub const NO_OP: i32 = 14;
    pub const FIRST_USER: i32 = 32;
}

/// Every `#define NAME <integer>` of include/mpi.h (also used by the
/// Fortran header's test).
#[cfg(test)]
pub(crate) fn mpi_h_defines() -> std::collections::HashMap<String, i64> {
    let h = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../include/mpi.h"))
        .expect("include/mpi.h");
    let mut defs = std::collections::HashMap::new();
    for line in h.lines() {
        let mut it = line.split_whitespace();
        if it.next() != Some("#define") {
            continue;
        }
        let (Some(name), Some(val)) = (it.next(), it.next()) else {
            continue;
        };
        let val = val
            .trim_start_matches("((MPI_Datatype)")
            .trim_start_matches("((MPI_Op)");
        let val = val.trim_start_matches('(').trim_end_matches(')');
        if let Ok(v) = val.parse::<i64>() {
            defs.insert(name.to_string(), v);
        }
    }
    defs
}

#[cfg(test)]
mod tests {
    /// Every `#define MPI_X <int>` in mpi.h must match the Rust value.
    #[test]
    fn header_agrees_with_rust() {
        use super::*;
        let defs = mpi_h_defines();
        let expect: &[(&str, i32)] = &[
            ("MPI_ANY_SOURCE", ANY_SOURCE),
            ("MPI_PROC_NULL", PROC_NULL),
            ("MPI_ROOT", ROOT),
            ("MPI_VERSION", VERSION),
            ("MPI_SUBVERSION", SUBVERSION),
            ("MPI_ANY_TAG", ANY_TAG),
            ("MPI_UNDEFINED", UNDEFINED),
            ("MPI_COMM_WORLD", COMM_WORLD),
            ("MPI_COMM_SELF", COMM_SELF),
            ("MPI_COMM_NULL", COMM_NULL),
            ("MPI_GROUP_EMPTY", GROUP_EMPTY),
            ("MPI_ERRORS_ARE_FATAL", ERRORS_ARE_FATAL),
            ("MPI_ERRORS_RETURN", ERRORS_RETURN),
            ("MPI_TAG_UB", KEY_TAG_UB),
            ("MPI_WTIME_IS_GLOBAL", KEY_WTIME_IS_GLOBAL),
            ("MPI_THREAD_MULTIPLE", THREAD_MULTIPLE),
            ("MPI_ERR_TRUNCATE", err::TRUNCATE),
            ("MPI_ERR_RANK", err::RANK),
            ("MPI_ERR_LASTCODE", err::LASTCODE),
            ("MPIX_TRY_RELOAD", err::TRY_RELOAD),
            ("MPI_ERR_IO", err::IO),
            ("MPI_ERR_NO_SPACE", err::NO_SPACE),
            ("MPI_ERR_FILE", err::FILE),
            ("MPI_ERR_ACCESS", err::ACCESS),
            ("MPI_ERR_AMODE", err::AMODE),
            ("MPI_ERR_NO_SUCH_FILE", err::NO_SUCH_FILE),
            ("MPI_ERR_READ_ONLY", err::READ_ONLY),
            ("MPI_MODE_CREATE", crate::api::file::mode::CREATE),
            ("MPI_MODE_SEQUENTIAL", crate::api::file::mode::SEQUENTIAL),
            ("MPI_SEEK_END", crate::api::file::SEEK_END),
            ("MPIX_RECOVERY_CPR", 3),
            ("MPI_DOUBLE", dt::DOUBLE),
            ("MPI_DOUBLE_INT", dt::DOUBLE_INT),
            ("MPI_LONG_DOUBLE_INT", dt::LONG_DOUBLE_INT),
            ("MPI_UINT64_T", dt::UINT64_T),
            ("MPI_SUM", op::SUM),
            ("MPI_MAXLOC", op::MAXLOC),
            ("MPI_MAX_PROCESSOR_NAME", MAX_PROCESSOR_NAME),
        ];
        for (name, v) in expect {
            assert_eq!(defs.get(*name), Some(&(*v as i64)), "{name}");
        }
        assert!(defs.len() > 120, "parsed only {} defines", defs.len());
    }
}
