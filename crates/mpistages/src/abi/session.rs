//! Sessions (MPI 4.0, `api::session`): `MPI_Session_*` and
//! `MPI_Group_from_session_pset`. Errors go to the session's error handler
//! (`MPI_Session_init`'s argument, or `MPI_Session_set_errhandler`'s).

use super::errors::{create_handler, text_of, valid_handler, HandlerFn};
use super::{cstr, get, mpi, mpi_fn, put, put_str, raise_on, NO_OBJECT};
use crate::api::consts::err;
use crate::api::error::{fail, MpiError, MpiResult};
use crate::api::session::{self, MAX_PSET_NAME_LEN, SESSION_NULL};
use crate::api::{group::Group, info};
use std::os::raw::{c_char, c_int};

/// A session call's result as a return code, raised on session `s`'s
/// error handler, or as an error of no object when `s` is not a session
/// (a program that set `MPI_ERRORS_RETURN` on `MPI_COMM_SELF` or
/// `MPI_COMM_WORLD` gets the code back).
fn ret(name: &str, s: c_int, r: MpiResult<()>) -> c_int {
    match (r, session::errhandler(s)) {
        (Ok(()), _) => err::SUCCESS,
        (Err(e), Some(eh)) => raise_on(name, s, eh, e),
        (Err(e), None) => super::raise(name, NO_OBJECT, e),
    }
}

/// A process set's name argument (at most `MPI_MAX_PSET_NAME_LEN`).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn pset_name(p: *const c_char) -> MpiResult<String> {
    // SAFETY: forwarded.
    let name = unsafe { cstr(p)? };
    if name.len() >= MAX_PSET_NAME_LEN {
        return fail(
            err::ARG,
            "the process set name is longer than MPI_MAX_PSET_NAME_LEN",
        );
    }
    Ok(name)
}

mpi_fn!(fn MPI_Session_init / PMPI_Session_init(info: c_int, eh: c_int, out: *mut c_int) {
    let r = (|| {
        if !valid_handler(eh) {
            return fail(err::ARG, format!("invalid error handler {eh}"));
        }
        let h = session::init(&info::get_or_empty(info)?, eh)?;
        // SAFETY: caller's out-pointer.
        unsafe { put(out, h) }
    })();
    match r {
        Ok(()) => err::SUCCESS,
        // The standard raises a failed init on the handler it was given.
        Err(e) if valid_handler(eh) => raise_on("MPI_Session_init", SESSION_NULL, eh, e),
        Err(e) => super::raise("MPI_Session_init", NO_OBJECT, e),
    }
});

mpi_fn!(fn MPI_Session_finalize / PMPI_Session_finalize(s: *mut c_int) {
    // SAFETY: caller's in/out pointer.
    let h = match unsafe { get(s) } {
        Ok(h) => h,
        Err(e) => return ret("MPI_Session_finalize", SESSION_NULL, Err(e)),
    };
    // The handler is looked up before the session is gone.
    let eh = session::errhandler(h);
    // SAFETY: as above.
    match (session::finalize(h).and_then(|()| unsafe { put(s, SESSION_NULL) }), eh) {
        (Ok(()), _) => err::SUCCESS,
        (Err(e), Some(eh)) => raise_on("MPI_Session_finalize", h, eh, e),
        (Err(e), None) => super::raise("MPI_Session_finalize", NO_OBJECT, e),
    }
});

mpi_fn!(fn MPI_Session_get_num_psets / PMPI_Session_get_num_psets(s: c_int, info: c_int, n: *mut c_int) {
    let r = session::valid(s).and_then(|()| {
        info::get_or_empty(info)?;
        // SAFETY: caller's out-pointer.
        unsafe { put(n, session::PSETS.len() as c_int) }
    });
    ret("MPI_Session_get_num_psets", s, r)
});

mpi_fn!(fn MPI_Session_get_nth_pset / PMPI_Session_get_nth_pset(s: c_int, info: c_int, n: c_int, len: *mut c_int, name: *mut c_char) {
    let r = (|| {
        session::valid(s)?;
        info::get_or_empty(info)?;
        let pset = session::nth_pset(n)?;
        // SAFETY: caller's in/out pointer.
        let cap = unsafe { get(len)? };
        // A length of 0 asks for the length (with the NUL) only.
        if cap > 0 {
            let mut written = 0;
            // SAFETY: the caller's buffer holds `cap` bytes.
            unsafe { put_str(pset, name, cap as usize, &mut written)? };
        }
        // SAFETY: as above.
        unsafe { put(len, pset.len() as c_int + 1) }
    })();
    ret("MPI_Session_get_nth_pset", s, r)
});

mpi_fn!(fn MPI_Session_get_info / PMPI_Session_get_info(s: c_int, out: *mut c_int) {
    let r = session::info(s).and_then(|i| {
        // SAFETY: caller's out-pointer.
        unsafe { put(out, info::add(i)) }
    });
    ret("MPI_Session_get_info", s, r)
});

mpi_fn!(fn MPI_Session_get_pset_info / PMPI_Session_get_pset_info(s: c_int, name: *const c_char, out: *mut c_int) {
    let r = (|| {
        session::valid(s)?;
        // SAFETY: caller's string.
        let name = unsafe { pset_name(name)? };
        let i = session::pset_info(mpi()?, &name)?;
        // SAFETY: caller's out-pointer.
        unsafe { put(out, info::add(i)) }
    })();
    ret("MPI_Session_get_pset_info", s, r)
});

mpi_fn!(fn MPI_Group_from_session_pset / PMPI_Group_from_session_pset(s: c_int, name: *const c_char, out: *mut c_int) {
    let r = (|| {
        session::valid(s)?;
        // SAFETY: caller's string.
        let name = unsafe { pset_name(name)? };
        let m = mpi()?;
        let members = session::members(m, &name)?;
        let g = m.tables().add_group(Group { members });
        // SAFETY: caller's out-pointer.
        unsafe { put(out, g) }
    })();
    ret("MPI_Group_from_session_pset", s, r)
});

mpi_fn!(fn MPI_Session_create_errhandler / PMPI_Session_create_errhandler(f: Option<HandlerFn>, out: *mut c_int) {
    ret("MPI_Session_create_errhandler", SESSION_NULL, create_handler(f, out))
});

mpi_fn!(fn MPI_Session_set_errhandler / PMPI_Session_set_errhandler(s: c_int, eh: c_int) {
    let r = if valid_handler(eh) {
        session::set_errhandler(s, eh)
    } else {
        fail(err::ARG, format!("invalid error handler {eh}"))
    };
    ret("MPI_Session_set_errhandler", s, r)
});

mpi_fn!(fn MPI_Session_get_errhandler / PMPI_Session_get_errhandler(s: c_int, eh: *mut c_int) {
    let r = match session::errhandler(s) {
        // SAFETY: caller's out-pointer.
        Some(h) => unsafe { put(eh, h) },
        None => session::valid(s),
    };
    ret("MPI_Session_get_errhandler", s, r)
});

mpi_fn!(fn MPI_Session_call_errhandler / PMPI_Session_call_errhandler(s: c_int, code: c_int) {
    if let Err(e) = session::valid(s) {
        return ret("MPI_Session_call_errhandler", SESSION_NULL, Err(e));
    }
    ret("MPI_Session_call_errhandler", s, Err(MpiError::new(code, text_of(code))));
    err::SUCCESS
});
