//! Smaller calls: request and status queries and setters, local
//! reductions, memory allocation.

use super::{get, mpi, mpi_fn, put, put_status, ret, typed, CStatus};
use crate::api::consts::{err, COMM_WORLD, REQUEST_NULL};
use crate::api::error::{fail, MpiResult};
use crate::api::Status;
use std::os::raw::{c_int, c_long, c_longlong, c_void};

mpi_fn!(fn MPI_Request_get_status / PMPI_Request_get_status(req: c_int, flag: *mut c_int, status: *mut CStatus) {
    let r = mpi().and_then(|m| {
        m.engine.poke();
        let st = if req == REQUEST_NULL {
            Some(Status::empty())
        } else {
            let id = super::request::id_of(m, req)?;
            match m.engine.state(id) {
                crate::api::ReqState::Inactive => Some(Status::empty()),
                _ => m.engine.peek(id),
            }
        };
        // SAFETY: caller's out-pointers.
        unsafe {
            put(flag, st.is_some() as c_int)?;
            if let Some(st) = st {
                put_status(status, &st);
            }
        }
        Ok(())
    });
    ret("MPI_Request_get_status", COMM_WORLD, r)
});

/// # Safety
/// `status` is NULL or a writable `MPI_Status`.
unsafe fn edit(status: *mut CStatus, f: impl FnOnce(&mut CStatus)) -> MpiResult<()> {
    if status.is_null() {
        return fail(err::ARG, "the status is NULL (MPI_STATUS_IGNORE)");
    }
    // SAFETY: non-null and writable by this function's contract.
    f(unsafe { &mut *status });
    Ok(())
}

mpi_fn!(fn MPI_Status_set_cancelled / PMPI_Status_set_cancelled(status: *mut CStatus, flag: c_int) {
    // SAFETY: caller's status.
    let r = unsafe { edit(status, |s| s.count_hi_and_cancelled = (s.count_hi_and_cancelled & !1) | (flag != 0) as c_int) };
    ret("MPI_Status_set_cancelled", COMM_WORLD, r)
});

fn set_elements(status: *mut CStatus, dt: c_int, n: i64) -> MpiResult<()> {
    let m = mpi()?;
    if n < 0 {
        return fail(err::COUNT, format!("count {n} is negative"));
    }
    let size = m.tables().any_dtype(dt)?.size as u64;
    let bytes = (n as u64).saturating_mul(size);
    // SAFETY: caller's status.
    unsafe {
        edit(status, |s| {
            s.count_lo = bytes as u32 as c_int;
            s.count_hi_and_cancelled =
                (((bytes >> 32) as c_int) << 1) | (s.count_hi_and_cancelled & 1);
        })
    }
}

mpi_fn!(fn MPI_Status_set_elements / PMPI_Status_set_elements(status: *mut CStatus, dt: c_int, n: c_int) {
    ret("MPI_Status_set_elements", COMM_WORLD, set_elements(status, dt, n as i64))
});

mpi_fn!(fn MPI_Status_set_elements_x / PMPI_Status_set_elements_x(status: *mut CStatus, dt: c_int, n: c_longlong) {
    ret("MPI_Status_set_elements_x", COMM_WORLD, set_elements(status, dt, n))
});

mpi_fn!(fn MPI_Get_elements_x / PMPI_Get_elements_x(status: *const CStatus, dt: c_int, n: *mut c_longlong) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's pointers.
        let st = unsafe { get(status)? };
        let size = m.tables().dtype(dt)?.size as u64;
        let v = st.bytes().checked_div(size).unwrap_or(0) as c_longlong;
        // SAFETY: as above.
        unsafe { put(n, v) }
    });
    ret("MPI_Get_elements_x", COMM_WORLD, r)
});

mpi_fn!(fn MPI_Reduce_local / PMPI_Reduce_local(inbuf: *const c_void, inoutbuf: *mut c_void, n: c_int, dt: c_int, o: c_int) {
    let r = mpi().and_then(|m| {
        let (red, _) = super::reduce::reducer(m, o, dt)?;
        // SAFETY: the caller's buffers of n elements.
        let (a, b) = unsafe { (typed(m, inbuf, n, dt)?, typed(m, inoutbuf, n, dt)?) };
        let src = super::coll::Stage::layout(a, true)?;
        let dst = super::coll::Stage::layout(b, true)?;
        // SAFETY: `dst` is the staged in/out buffer, not aliased by `src`
        // (MPI forbids the two buffers to overlap).
        red(src.raw.as_slice(), unsafe { dst.raw.as_mut_slice() }, n as usize);
        dst.store();
        Ok(())
    });
    ret("MPI_Reduce_local", COMM_WORLD, r)
});

mpi_fn!(fn MPI_Alloc_mem / PMPI_Alloc_mem(size: c_long, info: c_int, base: *mut c_void) {
    let r = (|| {
        crate::api::info::get_or_empty(info)?;
        if size < 0 {
            return fail(err::SIZE, format!("size {size} is negative"));
        }
        // SAFETY: malloc of a positive size (1 for 0, so the pointer is unique).
        let p = unsafe { libc::malloc((size as usize).max(1)) };
        if p.is_null() {
            return fail(err::NO_MEM, format!("no memory for {size} bytes"));
        }
        // SAFETY: `base` is a `void **` by the standard's signature.
        unsafe { put(base as *mut *mut c_void, p) }
    })();
    ret("MPI_Alloc_mem", COMM_WORLD, r)
});

mpi_fn!(fn MPI_Free_mem / PMPI_Free_mem(base: *mut c_void) {
    // SAFETY: memory from MPI_Alloc_mem (malloc), or NULL.
    unsafe { libc::free(base) };
    err::SUCCESS
});
