//! C bindings of the ULFM interface (`<mpi-ext.h>`; `api::ulfm`).

use super::comm::new_comm;
use super::{mpi, mpi_fn, put, ret};
use crate::api::consts::GROUP_NULL;
use crate::api::{comm, ulfm};
use std::os::raw::c_int;

mpi_fn!(fn MPIX_Comm_revoke / PMPIX_Comm_revoke(c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        ulfm::revoke(m, &cm)
    });
    ret("MPIX_Comm_revoke", c, r)
});

mpi_fn!(fn MPIX_Comm_is_revoked / PMPIX_Comm_is_revoked(c: c_int, flag: *mut c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        let revoked = ulfm::is_revoked(m, &cm);
        // SAFETY: caller's out-pointer (NULL is refused).
        unsafe { put(flag, revoked as c_int) }
    });
    ret("MPIX_Comm_is_revoked", c, r)
});

mpi_fn!(fn MPIX_Comm_agree / PMPIX_Comm_agree(c: c_int, flag: *mut c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        // SAFETY: caller's in/out pointer (NULL is refused).
        let mut f = unsafe { super::get(flag) }?;
        let agreed = ulfm::agree(m, &cm, &mut f);
        // The flag is agreed on also when a failure is reported.
        // SAFETY: as above.
        unsafe { put(flag, f) }?;
        agreed
    });
    ret("MPIX_Comm_agree", c, r)
});

mpi_fn!(fn MPIX_Comm_shrink / PMPIX_Comm_shrink(c: c_int, out: *mut c_int) {
    new_comm("MPIX_Comm_shrink", c, out, |m| {
        let cm = m.tables().comm(c)?;
        let shrunk = ulfm::shrink(m, &cm)?;
        Ok(comm::register(m, c, shrunk))
    })
});

/// A group of failed members into `g` (MPI_GROUP_NULL on an error).
fn failed_group(name: &str, c: c_int, g: *mut c_int, acked_only: bool) -> c_int {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        let grp = ulfm::failed_group(m, &cm, acked_only);
        let h = m.tables().add_group(grp);
        // SAFETY: caller's out-pointer (NULL is refused).
        unsafe { put(g, h) }
    });
    if r.is_err() && !g.is_null() {
        // SAFETY: caller's out-pointer: no group was made.
        unsafe { g.write(GROUP_NULL) };
    }
    ret(name, c, r)
}

mpi_fn!(fn MPIX_Comm_get_failed / PMPIX_Comm_get_failed(c: c_int, g: *mut c_int) {
    failed_group("MPIX_Comm_get_failed", c, g, false)
});

mpi_fn!(fn MPIX_Comm_failure_get_acked / PMPIX_Comm_failure_get_acked(c: c_int, g: *mut c_int) {
    failed_group("MPIX_Comm_failure_get_acked", c, g, true)
});

mpi_fn!(fn MPIX_Comm_ack_failed / PMPIX_Comm_ack_failed(c: c_int, n: c_int, acked: *mut c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        let n = usize::try_from(n).map_err(|_| {
            crate::api::error::MpiError::new(
                crate::api::consts::err::ARG,
                format!("num_to_ack {n} is negative"),
            )
        })?;
        let a = ulfm::ack(m, &cm, n);
        // SAFETY: caller's out-pointer (NULL is refused).
        unsafe { put(acked, a as c_int) }
    });
    ret("MPIX_Comm_ack_failed", c, r)
});

mpi_fn!(fn MPIX_Comm_failure_ack / PMPIX_Comm_failure_ack(c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        ulfm::ack(m, &cm, usize::MAX);
        Ok(())
    });
    ret("MPIX_Comm_failure_ack", c, r)
});

/// A pointer the program keeps valid until its request completes.
struct Out(*mut c_int);
// SAFETY: the program keeps the pointer valid until the request completes
// and does not touch what it points to before; only the worker writes it.
unsafe impl Send for Out {}

mpi_fn!(fn MPIX_Comm_iagree / PMPIX_Comm_iagree(c: c_int, flag: *mut c_int, req: *mut c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        // SAFETY: caller's in/out pointer (NULL is refused).
        let f = unsafe { super::get(flag) }?;
        let pending = ulfm::start(m, &cm, f as u32, 0)?;
        let dest = Out(flag);
        let job: crate::api::nbc::Job = Box::new(move || {
            let dest = dest;
            let mut f = f;
            let agreed = ulfm::finish(m, pending).and_then(|a| ulfm::agreed_flag(a, &mut f));
            // SAFETY: checked non-NULL; valid until completion (see Out).
            unsafe { dest.0.write(f) };
            agreed
        });
        let id = crate::api::nbc::start(m, c, cm.coll_context(), vec![(crate::api::Pin::Comm, c)], job);
        // SAFETY: caller's out-pointer.
        unsafe { put(req, super::request::handle(id)) }
    });
    ret("MPIX_Comm_iagree", c, r)
});

mpi_fn!(fn MPIX_Comm_ishrink / PMPIX_Comm_ishrink(c: c_int, out: *mut c_int, req: *mut c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if out.is_null() {
            return crate::api::error::fail(crate::api::consts::err::ARG, "newcomm is NULL");
        }
        let pending = ulfm::start_shrink(m, &cm)?;
        let coll = cm.coll_context();
        let dest = Out(out);
        let job: crate::api::nbc::Job = Box::new(move || {
            let dest = dest;
            let made = ulfm::finish(m, pending).and_then(|a| ulfm::shrunk(m, &cm, a));
            let h = made.map(|s| comm::register(m, c, s));
            // SAFETY: checked non-NULL; valid until completion (see Out).
            unsafe { dest.0.write(*h.as_ref().unwrap_or(&crate::api::consts::COMM_NULL)) };
            h.map(|_| ())
        });
        let id = crate::api::nbc::start(m, c, coll, vec![(crate::api::Pin::Comm, c)], job);
        // SAFETY: caller's out-pointer.
        unsafe { put(req, super::request::handle(id)) }
    });
    ret("MPIX_Comm_ishrink", c, r)
});
