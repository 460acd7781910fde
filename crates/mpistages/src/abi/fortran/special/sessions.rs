//! Fortran bindings of MPI 4.0's calls that name a process set or take a
//! string tag (CHARACTER arguments), and of the session error handler
//! constructor.

use super::super::{set, str_out};
use super::c_string;
use crate::abi::comm::*;
use crate::abi::errors::HandlerFn;
use crate::abi::session::*;
use crate::api::consts::err;
use crate::api::session::MAX_PSET_NAME_LEN;
use std::ffi::CString;
use std::os::raw::{c_char, c_int};

twin!(mpi_session_get_nth_pset_ / pmpi_session_get_nth_pset_ (p; session: *const c_int, info: *const c_int, n: *const c_int,
        pset_len: *mut c_int, pset_name: *mut c_char, ierror: *mut c_int, name_len: usize) {
    let mut tmp = [0u8; MAX_PSET_NAME_LEN];
    let mut len = tmp.len() as c_int;
    // SAFETY: the caller's INTEGERs; `tmp` holds `len` bytes.
    let rc = unsafe { pick!(p, MPI_Session_get_nth_pset)(*session, *info, *n, &mut len, tmp.as_mut_ptr() as *mut c_char) };
    // SAFETY: the caller's PSET_LEN (INOUT) and CHARACTER(LEN=name_len).
    unsafe {
        if rc == err::SUCCESS {
            // A PSET_LEN of 0 asks for the length only; it is the name's
            // (C's counts the NUL too).
            if *pset_len != 0 {
                let end = tmp.iter().position(|&b| b == 0).unwrap_or(tmp.len());
                str_out(&tmp[..end], pset_name, name_len);
            }
            *pset_len = len - 1;
        }
        set(ierror, rc)
    }
});

twin!(mpi_session_get_pset_info_ / pmpi_session_get_pset_info_ (p; session: *const c_int, pset_name: *const c_char,
        info: *mut c_int, ierror: *mut c_int, name_len: usize) {
    // SAFETY: the caller's INTEGER.
    let s = unsafe { *session };
    // SAFETY: a NUL-terminated string that lives through the call.
    with_strings!(ierror, [pset_name: name_len], |n: CString| unsafe { pick!(p, MPI_Session_get_pset_info)(s, n.as_ptr(), info) })
});

twin!(mpi_group_from_session_pset_ / pmpi_group_from_session_pset_ (p; session: *const c_int, pset_name: *const c_char,
        newgroup: *mut c_int, ierror: *mut c_int, name_len: usize) {
    // SAFETY: the caller's INTEGER.
    let s = unsafe { *session };
    // SAFETY: a NUL-terminated string that lives through the call.
    with_strings!(ierror, [pset_name: name_len], |n: CString| unsafe { pick!(p, MPI_Group_from_session_pset)(s, n.as_ptr(), newgroup) })
});

type FortranHandler = unsafe extern "C" fn(*mut c_int, *mut c_int);

twin!(mpi_session_create_errhandler_ / pmpi_session_create_errhandler_ (p; f: Option<FortranHandler>, eh: *mut c_int, ierror: *mut c_int) {
    // SAFETY: the same two pointer arguments; the handler ignores the rest.
    let f: Option<HandlerFn> = f.map(|f| unsafe { std::mem::transmute::<FortranHandler, HandlerFn>(f) });
    // SAFETY: the caller's INTEGERs.
    unsafe { set(ierror, pick!(p, MPI_Session_create_errhandler)(f, eh)) }
});

twin!(mpi_comm_create_from_group_ / pmpi_comm_create_from_group_ (p; group: *const c_int, stringtag: *const c_char,
        info: *const c_int, errhandler: *const c_int, newcomm: *mut c_int, ierror: *mut c_int, tag_len: usize) {
    // SAFETY: the caller's INTEGERs.
    let (g, i, e) = unsafe { (*group, *info, *errhandler) };
    // SAFETY: a NUL-terminated string that lives through the call.
    with_strings!(ierror, [stringtag: tag_len], |t: CString| unsafe { pick!(p, MPI_Comm_create_from_group)(g, t.as_ptr(), i, e, newcomm) })
});

twin!(mpi_intercomm_create_from_groups_ / pmpi_intercomm_create_from_groups_ (p; local_group: *const c_int,
        local_leader: *const c_int, remote_group: *const c_int, remote_leader: *const c_int, stringtag: *const c_char,
        info: *const c_int, errhandler: *const c_int, newintercomm: *mut c_int, ierror: *mut c_int, tag_len: usize) {
    // SAFETY: the caller's INTEGERs.
    let (lg, ll, rg, rl, i, e) = unsafe { (*local_group, *local_leader, *remote_group, *remote_leader, *info, *errhandler) };
    // SAFETY: a NUL-terminated string that lives through the call.
    with_strings!(ierror, [stringtag: tag_len], |t: CString| unsafe {
        pick!(p, MPI_Intercomm_create_from_groups)(lg, ll, rg, rl, t.as_ptr(), i, e, newintercomm)
    })
});
