//! The MPI Stages extensions (ExaMPI's names, signatures and values).

use super::{mpi, mpi_fn, put, ret};
use crate::api::consts::{err, COMM_WORLD};
use crate::api::error::{fail, MpiResult};
use crate::api::mpix::{DeserializeFn, Handler, SerializeFn};
use crate::api::usermem::TypedBuf;
use crate::api::{mpix, protect};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

mpi_fn!(fn MPIX_Checkpoint_write / PMPIX_Checkpoint_write() {
    ret("MPIX_Checkpoint_write", COMM_WORLD, mpi().and_then(mpix::checkpoint_write))
});

mpi_fn!(fn MPIX_Checkpoint_read / PMPIX_Checkpoint_read() {
    ret("MPIX_Checkpoint_read", COMM_WORLD, mpi().and_then(mpix::checkpoint_read))
});

mpi_fn!(fn MPIX_Checkpoint_needed / PMPIX_Checkpoint_needed(flag: *mut c_int) {
    let r = mpi().and_then(|m| {
        let needed = mpix::checkpoint_needed(m)?;
        // SAFETY: caller's out-pointer (NULL is refused).
        unsafe { put(flag, c_int::from(needed)) }
    });
    ret("MPIX_Checkpoint_needed", COMM_WORLD, r)
});

mpi_fn!(fn MPIX_Get_fault_epoch / PMPIX_Get_fault_epoch(epoch: *mut c_int) {
    let r = mpi().and_then(|m| {
        let e = mpix::fault_epoch(m);
        let e = c_int::try_from(e).or_else(|_| fail(err::INTERN, "the fault epoch does not fit an int"))?;
        // SAFETY: caller's out-pointer (NULL is refused).
        unsafe { put(epoch, e) }
    });
    ret("MPIX_Get_fault_epoch", COMM_WORLD, r)
});

mpi_fn!(fn MPIX_Get_recovery_mode / PMPIX_Get_recovery_mode(mode: *mut c_int) {
    let r = mpi().and_then(|m| {
        use crate::api::RecoveryMode as R;
        let v = match m.mode {
            R::None => 0,
            R::Stages => 1,
            R::Reinit => 2,
            R::Cpr => 3,
            R::Ulfm => 4,
        };
        // SAFETY: caller's out-pointer (NULL is refused).
        unsafe { put(mode, v) }
    });
    ret("MPIX_Get_recovery_mode", COMM_WORLD, r)
});

mpi_fn!(fn MPIX_Serialize_handles / PMPIX_Serialize_handles() {
    ret("MPIX_Serialize_handles", COMM_WORLD, mpi().and_then(mpix::serialize_handles))
});

mpi_fn!(fn MPIX_Deserialize_handles / PMPIX_Deserialize_handles() {
    ret("MPIX_Deserialize_handles", COMM_WORLD, mpi().and_then(mpix::deserialize_handles))
});

mpi_fn!(fn MPIX_Serialize_handler_register / PMPIX_Serialize_handler_register(handler: Option<SerializeFn>) {
    let r = mpi().and_then(|m| match handler {
        Some(h) => {
            mpix::register_serializer(m, Handler::C(h));
            Ok(())
        }
        None => fail(err::ARG, "the serialize handler is NULL"),
    });
    ret("MPIX_Serialize_handler_register", COMM_WORLD, r)
});

mpi_fn!(fn MPIX_Deserialize_handler_register / PMPIX_Deserialize_handler_register(handler: Option<DeserializeFn>) {
    let r = mpi().and_then(|m| match handler {
        Some(h) => {
            mpix::register_deserializer(m, Handler::C(h));
            Ok(())
        }
        None => fail(err::ARG, "the deserialize handler is NULL"),
    });
    ret("MPIX_Deserialize_handler_register", COMM_WORLD, r)
});

mpi_fn!(fn MPIX_Protect / PMPIX_Protect(id: c_int, ptr: *mut c_void, count: i64, datatype: c_int) {
    let r = mpi().and_then(|m| {
        let n = usize::try_from(count).or_else(|_| fail(err::COUNT, format!("count {count} is negative")))?;
        let t = m.tables().dtype(datatype)?;
        if ptr.is_null() && n > 0 && t.size > 0 && t.true_lb == 0 {
            return fail(err::BUFFER, "the region is NULL but the count is not 0");
        }
        if n.checked_mul(t.size).is_none_or(|b| b > isize::MAX as usize) {
            return fail(err::COUNT, format!("{count} elements of {} do not fit in memory", t.name));
        }
        // SAFETY: MPIX_Protect's contract (mpi.h): the region stays valid
        // until it is unprotected or MPI is finalized.
        let buf = unsafe { TypedBuf::new(ptr as *mut u8, n, t) };
        protect::protect(m, id, buf)
    });
    ret("MPIX_Protect", COMM_WORLD, r)
});

mpi_fn!(fn MPIX_Unprotect / PMPIX_Unprotect(id: c_int) {
    ret("MPIX_Unprotect", COMM_WORLD, mpi().and_then(|m| protect::unprotect(m, id)))
});

mpi_fn!(fn MPIX_Checkpoint_restore / PMPIX_Checkpoint_restore() {
    ret("MPIX_Checkpoint_restore", COMM_WORLD, mpi().and_then(protect::restore))
});

/// A C string argument as UTF-8.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn c_str<'a>(p: *const c_char, what: &str) -> MpiResult<&'a str> {
    if p.is_null() {
        return fail(err::ARG, format!("{what} is NULL"));
    }
    // SAFETY: the caller passes a NUL-terminated string.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .or_else(|_| fail(err::ARG, format!("{what} is not valid UTF-8")))
}

/// Copies `path` with its NUL into the caller's `out` of `cap` bytes.
///
/// # Safety
/// `out` is NULL or valid for `cap` bytes of writes.
unsafe fn put_path(path: &std::path::Path, out: *mut c_char, cap: c_int) -> MpiResult<()> {
    use std::os::unix::ffi::OsStrExt;
    let b = path.as_os_str().as_bytes();
    if out.is_null() {
        return fail(err::ARG, "the path buffer is NULL");
    }
    if cap < 0 || (cap as usize) < b.len() + 1 {
        return fail(
            err::ARG,
            format!(
                "the path buffer of {cap} bytes is too small for '{}' ({} bytes with its NUL)",
                path.display(),
                b.len() + 1
            ),
        );
    }
    // SAFETY: `out` holds at least b.len() + 1 bytes (checked above).
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr() as *const c_char, out, b.len());
        *out.add(b.len()) = 0;
    }
    Ok(())
}

/// Route and locate: a file name in, a path out.
///
/// # Safety
/// As `c_str` for `name` and `put_path` for `path`.
unsafe fn name_to_path(
    name: *const c_char,
    path: *mut c_char,
    pathlen: c_int,
    f: fn(&crate::api::Mpi, &str) -> MpiResult<std::path::PathBuf>,
) -> MpiResult<()> {
    let m = mpi()?;
    // SAFETY: C string and output buffer as mpi.h documents them.
    let n = unsafe { c_str(name, "the file name") }?;
    let p = f(m, n)?;
    // SAFETY: as above.
    unsafe { put_path(&p, path, pathlen) }
}

mpi_fn!(fn MPIX_Checkpoint_route / PMPIX_Checkpoint_route(name: *const c_char, path: *mut c_char, pathlen: c_int) {
    // SAFETY: the caller's arguments, as mpi.h documents them.
    ret("MPIX_Checkpoint_route", COMM_WORLD, unsafe { name_to_path(name, path, pathlen, protect::route) })
});

mpi_fn!(fn MPIX_Checkpoint_locate / PMPIX_Checkpoint_locate(name: *const c_char, path: *mut c_char, pathlen: c_int) {
    // SAFETY: the caller's arguments, as mpi.h documents them.
    ret("MPIX_Checkpoint_locate", COMM_WORLD, unsafe { name_to_path(name, path, pathlen, protect::locate) })
});

/// `MPIX_Reinit`'s first step (csrc/reinit.c): the state its restart point
/// first sees, and whether the jump is armed.
///
/// # Safety
/// `state` and `armed` are NULL (a NULL restart point was passed: the
/// error is reported) or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mpistages_reinit_start(state: *mut c_int, armed: *mut c_int) -> c_int {
    let r = mpi().and_then(|m| {
        if state.is_null() || armed.is_null() {
            return fail(err::ARG, "MPIX_Reinit: the restart point is NULL");
        }
        let (s, a) = crate::api::reinit::start(m);
        // SAFETY: both are non-null and writable (the caller's contract).
        unsafe {
            put(state, s)?;
            put(armed, a as c_int)
        }
    });
    ret("MPIX_Reinit", COMM_WORLD, r)
}

/// `MPIX_Reinit` after the jump back: the reset of this rank's MPI state.
#[no_mangle]
pub extern "C" fn mpistages_reinit_reset() -> c_int {
    ret(
        "MPIX_Reinit",
        COMM_WORLD,
        mpi().and_then(crate::api::reinit::reset),
    )
}
