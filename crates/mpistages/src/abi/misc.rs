//! Smaller calls: request and status queries and setters, local
//! reductions, memory allocation.

use super::{get, mpi, mpi_fn, put, put_status, ret, typed, CStatus, NO_OBJECT};
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
    ret("MPI_Request_get_status", NO_OBJECT, r)
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
    ret("MPI_Status_set_cancelled", NO_OBJECT, r)
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
    ret("MPI_Status_set_elements", NO_OBJECT, set_elements(status, dt, n as i64))
});

mpi_fn!(fn MPI_Status_set_elements_x / PMPI_Status_set_elements_x(status: *mut CStatus, dt: c_int, n: c_longlong) {
    ret("MPI_Status_set_elements_x", NO_OBJECT, set_elements(status, dt, n))
});

mpi_fn!(fn MPI_Get_elements_x / PMPI_Get_elements_x(status: *const CStatus, dt: c_int, n: *mut c_longlong) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's pointers.
        let st = unsafe { get(status)? };
        // Basic elements, as MPI_Get_elements counts them (HDF5 checks a
        // write's length this way, with a type of many bytes).
        let v = super::probe::large_count_in(m, &st, dt, true)?;
        // SAFETY: as above.
        unsafe { put(n, v as c_longlong) }
    });
    ret("MPI_Get_elements_x", NO_OBJECT, r)
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
    ret("MPI_Reduce_local", NO_OBJECT, r)
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
    ret("MPI_Alloc_mem", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Free_mem / PMPI_Free_mem(base: *mut c_void) {
    // SAFETY: memory from MPI_Alloc_mem (malloc), or NULL.
    unsafe { libc::free(base) };
    err::SUCCESS
});

/// `int query(void *extra_state, MPI_Status *status)`.
pub type QueryFn = unsafe extern "C" fn(*mut c_void, *mut CStatus) -> c_int;
/// `int free(void *extra_state)`.
pub type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `int cancel(void *extra_state, int complete)`.
pub type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// Generalized requests (`MPI_Grequest_start`): their callbacks, by
/// request. The request is an external one of the engine, completed by
/// `MPI_Grequest_complete`.
struct Greq {
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    extra: usize,
    /// `MPI_Grequest_complete` ran; the entry stays until the status is
    /// taken or the request freed, for `MPI_Cancel`, which tells the
    /// cancel function.
    completed: bool,
    /// `MPI_Request_free` before completion: free runs at completion.
    freed: bool,
    /// The callbacks are Fortran subroutines: `QUERY(EXTRA, STATUS, IERROR)`
    /// and `FREE(EXTRA, IERROR)`, all by reference.
    fortran: bool,
}

type FortranQuery = unsafe extern "C" fn(*const isize, *mut CStatus, *mut c_int);
type FortranFree = unsafe extern "C" fn(*const isize, *mut c_int);
type FortranCancel = unsafe extern "C" fn(*const isize, *const c_int, *mut c_int);

/// `MPI_Grequest_start` for C (`fortran` false) and Fortran callbacks.
pub fn grequest_start(
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    extra: usize,
    fortran: bool,
) -> MpiResult<c_int> {
    let m = mpi()?;
    let id = crate::api::p2p::post(m, crate::api::Op::External, COMM_WORLD);
    let mut t = greqs();
    GREQS_HELD.fetch_add(1, std::sync::atomic::Ordering::Release);
    t.push((
        id,
        Greq {
            query,
            free,
            cancel,
            extra,
            completed: false,
            freed: false,
            fortran,
        },
    ));
    Ok(super::request::handle(id))
}

static GREQS: std::sync::Mutex<Vec<(crate::api::ReqId, Greq)>> = std::sync::Mutex::new(Vec::new());
/// How many entries `GREQS` holds, changed under its lock: every freed or
/// cancelled request asks whether it is a generalized one, and a program
/// without any then pays a load instead of a lock (two atomic operations,
/// ~6% of a message-rate loop's time).
static GREQS_HELD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn greqs() -> std::sync::MutexGuard<'static, Vec<(crate::api::ReqId, Greq)>> {
    GREQS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether any generalized request is held. A program that hands a
/// request's handle to another thread synchronizes doing so, which orders
/// the count's change (made before the handle existed) before this load.
pub(super) fn greqs_held() -> bool {
    GREQS_HELD.load(std::sync::atomic::Ordering::Acquire) > 0
}

/// Takes entry `i` out of the held list `t` (the list's lock held).
fn greq_remove(t: &mut Vec<(crate::api::ReqId, Greq)>, i: usize) -> Greq {
    GREQS_HELD.fetch_sub(1, std::sync::atomic::Ordering::Release);
    t.swap_remove(i).1
}

/// `MPI_Cancel` of a request: `None` if it is not a generalized request,
/// else what its cancel function returned (called with whether
/// `MPI_Grequest_complete` ran, as the standard asks).
pub fn grequest_cancel(id: crate::api::ReqId) -> Option<c_int> {
    if !greqs_held() {
        return None;
    }
    let (cancel, extra, completed, fortran) = {
        let t = greqs();
        let g = &t.iter().find(|(r, _)| *r == id)?.1;
        (g.cancel, g.extra, g.completed, g.fortran)
    };
    let Some(f) = cancel else {
        return Some(err::SUCCESS);
    };
    let done = c_int::from(completed);
    if fortran {
        let (x, mut e) = (extra as isize, 0);
        // SAFETY: a Fortran subroutine registered as such, given locals by
        // reference.
        unsafe { std::mem::transmute::<CancelFn, FortranCancel>(f)(&x, &done, &mut e) };
        Some(e)
    } else {
        // SAFETY: the program's callback with its own extra state.
        Some(unsafe { f(extra as *mut c_void, done) })
    }
}

mpi_fn!(fn MPI_Grequest_start / PMPI_Grequest_start(query: Option<QueryFn>, free: Option<FreeFn>, cancel: Option<CancelFn>, extra: *mut c_void, req: *mut c_int) {
    // SAFETY: caller's out-pointer.
    let r = grequest_start(query, free, cancel, extra as usize, false).and_then(|h| unsafe { put(req, h) });
    ret("MPI_Grequest_start", NO_OBJECT, r)
});

// The query function gives the status now, and the free function runs:
// after completion nothing of the request but its status is needed.
impl Greq {
    /// The query function: the request's status, or its error code.
    fn query(&self, cs: &mut CStatus) -> c_int {
        let Some(q) = self.query else {
            return err::SUCCESS;
        };
        if self.fortran {
            let (x, mut e) = (self.extra as isize, 0);
            // SAFETY: a Fortran subroutine registered as such (transmuted
            // back to its own signature), given locals by reference.
            unsafe { std::mem::transmute::<QueryFn, FortranQuery>(q)(&x, cs, &mut e) };
            e
        } else {
            // SAFETY: the program's callback, its extra state and a status
            // of ours.
            unsafe { q(self.extra as *mut c_void, cs) }
        }
    }

    /// The free function; its error code.
    fn free(&self) -> c_int {
        let Some(f) = self.free else {
            return err::SUCCESS;
        };
        if self.fortran {
            let (x, mut e) = (self.extra as isize, 0);
            // SAFETY: as in `query`.
            unsafe { std::mem::transmute::<FreeFn, FortranFree>(f)(&x, &mut e) };
            e
        } else {
            // SAFETY: the program's callback with its own extra state.
            unsafe { f(self.extra as *mut c_void) }
        }
    }
}

/// A request's status is being taken (wait, test: `st` given) or the
/// program frees it: `false` if it is not a generalized request. For a
/// completed one the query function fills `st` and the free function runs
/// now, as the standard says (the program may release the extra state
/// there, which a cancel until then still uses); the first error either
/// returns goes into `st`, or is returned as an `Err` when freeing.
/// A generalized request freed before it completes is marked, and its free
/// function runs at `MPI_Grequest_complete`.
pub fn grequest_release(id: crate::api::ReqId, st: Option<&mut Status>) -> Option<c_int> {
    if !greqs_held() {
        return None;
    }
    let g = {
        let mut t = greqs();
        let i = t.iter().position(|(r, _)| *r == id)?;
        if !t[i].1.completed {
            t[i].1.freed = true;
            return Some(err::SUCCESS);
        }
        greq_remove(&mut t, i)
    };
    let q = match st {
        Some(st) => {
            let mut cs = CStatus {
                source: crate::api::consts::ANY_SOURCE,
                tag: crate::api::consts::ANY_TAG,
                ..CStatus::default()
            };
            let q = g.query(&mut cs);
            st.source = cs.source;
            st.tag = cs.tag;
            st.bytes = cs.bytes() as usize;
            st.cancelled = cs.count_hi_and_cancelled & 1 != 0;
            q
        }
        None => err::SUCCESS,
    };
    let f = g.free();
    Some(if q != err::SUCCESS { q } else { f })
}

// The query and free functions run when the program takes the status.
mpi_fn!(fn MPI_Grequest_complete / PMPI_Grequest_complete(req: c_int) {
    let r = mpi().and_then(|m| {
        let id = super::request::id_of(m, req)?;
        let freed = {
            let mut t = greqs();
            let Some(i) = t.iter().position(|(r, _)| *r == id) else {
                return fail(err::REQUEST, format!("request {req} is not a generalized request"));
            };
            let g = &mut t[i].1;
            if g.completed {
                return fail(err::REQUEST, format!("generalized request {req} is already complete"));
            }
            g.completed = true;
            let freed = g.freed;
            freed.then(|| greq_remove(&mut t, i))
        };
        // Freed by the program before: nobody takes the status.
        if let Some(g) = freed {
            let rc = g.free();
            if rc != err::SUCCESS {
                log::warn!("mpistages: the free function of a freed generalized request returned {rc}");
            }
        }
        m.engine.complete(id, Status::empty());
        Ok(())
    });
    ret("MPI_Grequest_complete", NO_OBJECT, r)
});

/// The handle conversions between C and Fortran: the handles are the same
/// integers in both languages.
macro_rules! same_handle {
    ($($c2f:ident / $f2c:ident),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $c2f(h: c_int) -> c_int {
            h
        }
        #[no_mangle]
        pub extern "C" fn $f2c(h: c_int) -> c_int {
            h
        }
    )*};
}

same_handle!(
    MPI_Comm_c2f / MPI_Comm_f2c,
    PMPI_Comm_c2f / PMPI_Comm_f2c,
    MPI_Type_c2f / MPI_Type_f2c,
    PMPI_Type_c2f / PMPI_Type_f2c,
    MPI_Group_c2f / MPI_Group_f2c,
    PMPI_Group_c2f / PMPI_Group_f2c,
    MPI_Request_c2f / MPI_Request_f2c,
    PMPI_Request_c2f / PMPI_Request_f2c,
    MPI_Op_c2f / MPI_Op_f2c,
    PMPI_Op_c2f / PMPI_Op_f2c,
    MPI_Info_c2f / MPI_Info_f2c,
    PMPI_Info_c2f / PMPI_Info_f2c,
    MPI_Errhandler_c2f / MPI_Errhandler_f2c,
    PMPI_Errhandler_c2f / PMPI_Errhandler_f2c,
    MPI_Message_c2f / MPI_Message_f2c,
    PMPI_Message_c2f / PMPI_Message_f2c,
    MPI_File_c2f / MPI_File_f2c,
    PMPI_File_c2f / PMPI_File_f2c,
    MPI_Session_c2f / MPI_Session_f2c,
    PMPI_Win_c2f / PMPI_Win_f2c,
    MPI_Win_c2f / MPI_Win_f2c,
    PMPI_Session_c2f / PMPI_Session_f2c,
);

/// # Safety
/// Both pointers valid for an `MPI_Status` (5 ints in both languages).
#[no_mangle]
pub unsafe extern "C" fn MPI_Status_c2f(c: *const CStatus, f: *mut c_int) -> c_int {
    if c.is_null() || f.is_null() {
        return err::ARG;
    }
    // SAFETY: the contract above; the layouts are the same 5 ints.
    unsafe { std::ptr::copy_nonoverlapping(c as *const c_int, f, 5) };
    err::SUCCESS
}

/// # Safety
/// Both pointers valid for an `MPI_Status` (5 ints in both languages).
#[no_mangle]
pub unsafe extern "C" fn MPI_Status_f2c(f: *const c_int, c: *mut CStatus) -> c_int {
    if c.is_null() || f.is_null() {
        return err::ARG;
    }
    // SAFETY: as for MPI_Status_c2f.
    unsafe { std::ptr::copy_nonoverlapping(f, c as *mut c_int, 5) };
    err::SUCCESS
}

/// `MPI_Aint_add` and `MPI_Aint_diff` (MPI 3.1): address arithmetic,
/// which on this platform's flat addresses is integer arithmetic
/// (wrapping, as pointer arithmetic past the address space has no
/// meaning to check).
#[no_mangle]
pub extern "C" fn MPI_Aint_add(base: isize, disp: isize) -> isize {
    base.wrapping_add(disp)
}
#[no_mangle]
pub extern "C" fn PMPI_Aint_add(base: isize, disp: isize) -> isize {
    base.wrapping_add(disp)
}
#[no_mangle]
pub extern "C" fn MPI_Aint_diff(a: isize, b: isize) -> isize {
    a.wrapping_sub(b)
}
#[no_mangle]
pub extern "C" fn PMPI_Aint_diff(a: isize, b: isize) -> isize {
    a.wrapping_sub(b)
}
