//! Probes, matched probes (`MPI_Mprobe` / `MPI_Mrecv`) and what a status
//! counts.

use super::p2p::finish_recv;
use super::request::handle;
use super::{get, mpi, mpi_fn, put, put_status, ret, typed, CStatus};
use crate::api::consts::UNDEFINED;
use crate::api::error::MpiResult;
use crate::api::p2p;
use crate::api::Mpi;
use std::os::raw::{c_int, c_void};

mpi_fn!(fn MPI_Iprobe / PMPI_Iprobe(src: c_int, tag: c_int, comm: c_int, flag: *mut c_int, status: *mut CStatus) {
    let r = mpi().and_then(|m| {
        let found = match p2p::probe_args(m, src, tag, comm)? {
            None => Some(p2p::proc_null_status()),
            Some((ctx, s, t)) => m.engine.iprobe(ctx, s, t),
        };
        if let Some(e) = found.as_ref().and_then(|st| st.error.as_ref()) {
            return Err(crate::api::error::request_error(e));
        }
        // SAFETY: caller's pointers.
        unsafe {
            put(flag, found.is_some() as c_int)?;
            if let Some(st) = found {
                put_status(status, &st);
            }
        }
        Ok(())
    });
    ret("MPI_Iprobe", comm, r)
});

mpi_fn!(fn MPI_Probe / PMPI_Probe(src: c_int, tag: c_int, comm: c_int, status: *mut CStatus) {
    let r = mpi().and_then(|m| {
        let st = match p2p::probe_args(m, src, tag, comm)? {
            None => p2p::proc_null_status(),
            Some((ctx, s, t)) => m.engine.probe(ctx, s, t),
        };
        if let Some(e) = &st.error {
            return Err(crate::api::error::request_error(e));
        }
        // SAFETY: caller's status pointer or NULL.
        unsafe { put_status(status, &st) };
        Ok(())
    });
    ret("MPI_Probe", comm, r)
});

fn count_in(m: &Mpi, st: &CStatus, dt: c_int, elements: bool) -> MpiResult<c_int> {
    Ok(i32::try_from(large_count_in(m, st, dt, elements)?).unwrap_or(UNDEFINED))
}

/// The count of a status in elements of `dt`, as an `MPI_Count`.
pub(super) fn large_count_in(m: &Mpi, st: &CStatus, dt: c_int, elements: bool) -> MpiResult<i64> {
    let t = m.tables().any_dtype(dt)?;
    let bytes = st.bytes() as usize;
    let n = if elements {
        t.elements_in(bytes)
    } else if t.size == 0 {
        0
    } else if !bytes.is_multiple_of(t.size) {
        UNDEFINED as i64
    } else {
        (bytes / t.size) as i64
    };
    Ok(n)
}

mpi_fn!(fn MPI_Get_count_c / PMPI_Get_count_c(status: *const CStatus, dt: c_int, count: *mut i64) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's pointers.
        let st = unsafe { get(status)? };
        // SAFETY: caller's pointer, checked for NULL by get/put.
        unsafe { put(count, large_count_in(m, &st, dt, false)?) }
    });
    ret("MPI_Get_count_c", crate::api::consts::COMM_WORLD, r)
});

mpi_fn!(fn MPI_Get_elements_c / PMPI_Get_elements_c(status: *const CStatus, dt: c_int, count: *mut i64) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's pointers.
        let st = unsafe { get(status)? };
        // SAFETY: caller's pointer, checked for NULL by get/put.
        unsafe { put(count, large_count_in(m, &st, dt, true)?) }
    });
    ret("MPI_Get_elements_c", crate::api::consts::COMM_WORLD, r)
});

mpi_fn!(fn MPI_Get_count / PMPI_Get_count(status: *const CStatus, dt: c_int, count: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's pointers.
        let st = unsafe { get(status)? };
        // SAFETY: caller's pointer, checked for NULL by get/put.
        unsafe { put(count, count_in(m, &st, dt, false)?) }
    });
    ret("MPI_Get_count", crate::api::consts::COMM_WORLD, r)
});

mpi_fn!(fn MPI_Get_elements / PMPI_Get_elements(status: *const CStatus, dt: c_int, count: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's pointers.
        let st = unsafe { get(status)? };
        // SAFETY: caller's pointer, checked for NULL by get/put.
        unsafe { put(count, count_in(m, &st, dt, true)?) }
    });
    ret("MPI_Get_elements", crate::api::consts::COMM_WORLD, r)
});

mpi_fn!(fn MPI_Mprobe / PMPI_Mprobe(src: c_int, tag: c_int, comm: c_int, message: *mut c_int, status: *mut CStatus) {
    let r = mpi().and_then(|m| {
        let (h, st) = p2p::mprobe(m, src, tag, comm, true)?.expect("a blocking probe finds a message");
        // SAFETY: caller's out-pointers.
        unsafe {
            put(message, h)?;
            put_status(status, &st);
        }
        Ok(())
    });
    ret("MPI_Mprobe", comm, r)
});

mpi_fn!(fn MPI_Improbe / PMPI_Improbe(src: c_int, tag: c_int, comm: c_int, flag: *mut c_int, message: *mut c_int, status: *mut CStatus) {
    let r = mpi().and_then(|m| {
        let got = p2p::mprobe(m, src, tag, comm, false)?;
        // SAFETY: caller's out-pointers.
        unsafe {
            put(flag, got.is_some() as c_int)?;
            if let Some((h, st)) = got {
                put(message, h)?;
                put_status(status, &st);
            }
        }
        Ok(())
    });
    ret("MPI_Improbe", comm, r)
});

mpi_fn!(fn MPI_Mrecv / PMPI_Mrecv(buf: *mut c_void, n: c_int, dt: c_int, message: *mut c_int, status: *mut CStatus) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's in/out pointer; the buffer stays valid for this
        // blocking call.
        let id = unsafe { p2p::mrecv(m, typed(m, buf, n, dt)?, get(message)?)? };
        // SAFETY: as above.
        unsafe { put(message, p2p::MESSAGE_NULL)? };
        // SAFETY: caller's status pointer or NULL.
        unsafe { finish_recv(m, id, status) }
    });
    ret("MPI_Mrecv", crate::api::consts::COMM_WORLD, r)
});

mpi_fn!(fn MPI_Imrecv / PMPI_Imrecv(buf: *mut c_void, n: c_int, dt: c_int, message: *mut c_int, req: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's in/out pointer; the buffer stays valid until the
        // request completes.
        let id = unsafe { p2p::mrecv(m, typed(m, buf, n, dt)?, get(message)?)? };
        // SAFETY: caller's out-pointers.
        unsafe {
            put(message, p2p::MESSAGE_NULL)?;
            put(req, handle(id))
        }
    });
    ret("MPI_Imrecv", crate::api::consts::COMM_WORLD, r)
});
