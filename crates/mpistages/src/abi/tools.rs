//! The MPI tool information interface (`MPI_T_*`), as far as mpistages
//! has something to say: it exports no control or performance variables
//! and no categories yet, so the counts are 0 and every index is invalid.
//! Tools and libraries that probe the interface (PMPI tools, TAU, Score-P)
//! then find it empty instead of failing to link. Like the standard's, these
//! calls may come before `MPI_Init` and return their error codes without
//! any error handler.

use super::{cstr, mpi_fn};
use crate::api::consts::THREAD_MULTIPLE;
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicI32, Ordering};

/// `MPI_T_ERR_*` (within `MPI_ERR_LASTCODE`; checked against mpi.h).
pub mod t_err {
    pub const NOT_INITIALIZED: i32 = 60;
    pub const INVALID_INDEX: i32 = 62;
    pub const INVALID_HANDLE: i32 = 64;
    pub const INVALID_SESSION: i32 = 67;
    pub const INVALID_NAME: i32 = 73;
    pub const INVALID: i32 = 74;
}

/// `MPI_T_init_thread` calls not yet matched by `MPI_T_finalize`.
static USERS: AtomicI32 = AtomicI32::new(0);
static SESSIONS: AtomicI32 = AtomicI32::new(0);

fn ready() -> Result<(), c_int> {
    if USERS.load(Ordering::Acquire) > 0 {
        Ok(())
    } else {
        Err(t_err::NOT_INITIALIZED)
    }
}

fn code(r: Result<(), c_int>) -> c_int {
    r.err().unwrap_or(0)
}

/// # Safety
/// `p` is NULL or a writable int.
unsafe fn out(p: *mut c_int, v: c_int) -> Result<(), c_int> {
    if p.is_null() {
        return Err(t_err::INVALID);
    }
    // SAFETY: non-null and writable by the contract.
    unsafe { p.write(v) };
    Ok(())
}

mpi_fn!(fn MPI_T_init_thread / PMPI_T_init_thread(_required: c_int, provided: *mut c_int) {
    USERS.fetch_add(1, Ordering::AcqRel);
    // SAFETY: caller's out-pointer.
    code(unsafe { out(provided, THREAD_MULTIPLE) })
});

mpi_fn!(fn MPI_T_finalize / PMPI_T_finalize() {
    let r = USERS.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n > 0).then(|| n - 1));
    code(r.map(|_| ()).map_err(|_| t_err::NOT_INITIALIZED))
});

macro_rules! count_of_nothing {
    ($($name:ident / $pname:ident),* $(,)?) => {$(
        mpi_fn!(fn $name / $pname(num: *mut c_int) {
            // SAFETY: caller's out-pointer.
            code(ready().and_then(|()| unsafe { out(num, 0) }))
        });
    )*};
}

count_of_nothing!(
    MPI_T_cvar_get_num / PMPI_T_cvar_get_num,
    MPI_T_pvar_get_num / PMPI_T_pvar_get_num,
    MPI_T_category_get_num / PMPI_T_category_get_num,
    MPI_T_category_changed / PMPI_T_category_changed,
);

mpi_fn!(fn MPI_T_cvar_get_info / PMPI_T_cvar_get_info(_i: c_int, _name: *mut c_char, _name_len: *mut c_int, _verbosity: *mut c_int, _dt: *mut c_int, _en: *mut c_int, _desc: *mut c_char, _desc_len: *mut c_int, _bind: *mut c_int, _scope: *mut c_int) {
    code(ready().and(Err(t_err::INVALID_INDEX)))
});

mpi_fn!(fn MPI_T_pvar_get_info / PMPI_T_pvar_get_info(_i: c_int, _name: *mut c_char, _name_len: *mut c_int, _verbosity: *mut c_int, _class: *mut c_int, _dt: *mut c_int, _en: *mut c_int, _desc: *mut c_char, _desc_len: *mut c_int, _bind: *mut c_int, _ro: *mut c_int, _cont: *mut c_int, _atomic: *mut c_int) {
    code(ready().and(Err(t_err::INVALID_INDEX)))
});

mpi_fn!(fn MPI_T_category_get_info / PMPI_T_category_get_info(_i: c_int, _name: *mut c_char, _name_len: *mut c_int, _desc: *mut c_char, _desc_len: *mut c_int, _ncvars: *mut c_int, _npvars: *mut c_int, _ncats: *mut c_int) {
    code(ready().and(Err(t_err::INVALID_INDEX)))
});

/// # Safety
/// `name` is NULL or a NUL-terminated string.
unsafe fn no_such_name(name: *const c_char) -> c_int {
    let known = ready().and_then(|()| {
        // SAFETY: forwarded from this function's contract.
        unsafe { cstr(name) }
            .map(|_| ())
            .map_err(|_| t_err::INVALID)
    });
    code(known.and(Err(t_err::INVALID_NAME)))
}

mpi_fn!(fn MPI_T_cvar_get_index / PMPI_T_cvar_get_index(name: *const c_char, _index: *mut c_int) {
    // SAFETY: caller's string.
    unsafe { no_such_name(name) }
});

mpi_fn!(fn MPI_T_pvar_get_index / PMPI_T_pvar_get_index(name: *const c_char, _class: c_int, _index: *mut c_int) {
    // SAFETY: caller's string.
    unsafe { no_such_name(name) }
});

mpi_fn!(fn MPI_T_category_get_index / PMPI_T_category_get_index(name: *const c_char, _index: *mut c_int) {
    // SAFETY: caller's string.
    unsafe { no_such_name(name) }
});

mpi_fn!(fn MPI_T_enum_get_info / PMPI_T_enum_get_info(_e: c_int, _num: *mut c_int, _name: *mut c_char, _name_len: *mut c_int) {
    code(ready().and(Err(t_err::INVALID_HANDLE)))
});

mpi_fn!(fn MPI_T_pvar_session_create / PMPI_T_pvar_session_create(session: *mut c_int) {
    let h = SESSIONS.fetch_add(1, Ordering::Relaxed) + 1;
    // SAFETY: caller's out-pointer.
    code(ready().and_then(|()| unsafe { out(session, h) }))
});

mpi_fn!(fn MPI_T_pvar_session_free / PMPI_T_pvar_session_free(session: *mut c_int) {
    // SAFETY: caller's in/out pointer.
    let valid = matches!(unsafe { session.as_ref() }, Some(&s) if s > 0);
    let r = ready().and(if valid { Ok(()) } else { Err(t_err::INVALID_SESSION) });
    // SAFETY: as above; MPI_T_PVAR_SESSION_NULL is 0.
    code(r.and_then(|()| unsafe { out(session, 0) }))
});

#[cfg(test)]
mod tests {
    use super::t_err;

    #[test]
    fn error_codes_agree_with_mpi_h() {
        let d = crate::api::consts::mpi_h_defines();
        for (name, v) in [
            ("MPI_T_ERR_NOT_INITIALIZED", t_err::NOT_INITIALIZED),
            ("MPI_T_ERR_INVALID_INDEX", t_err::INVALID_INDEX),
            ("MPI_T_ERR_INVALID_HANDLE", t_err::INVALID_HANDLE),
            ("MPI_T_ERR_INVALID_SESSION", t_err::INVALID_SESSION),
            ("MPI_T_ERR_INVALID_NAME", t_err::INVALID_NAME),
            ("MPI_T_ERR_INVALID", t_err::INVALID),
        ] {
            assert_eq!(d.get(name), Some(&(v as i64)), "{name}");
        }
    }
}
