//! Request handles (`MPI_Request` = slot index + 1) and the wait / test
//! families.

use super::{array_mut, mpi, mpi_fn, put, put_status, ret, CStatus};
use crate::api::consts::{err, COMM_WORLD, REQUEST_NULL, UNDEFINED};
use crate::api::error::{fail, MpiResult};
use crate::api::Mpi;
use crate::api::{Found, Waited, NO_OWNER};
use crate::api::{ReqId, ReqState, Status};
use std::os::raw::c_int;

pub fn handle(id: ReqId) -> c_int {
    id.index as c_int + 1
}

pub fn id_of(m: &Mpi, h: c_int) -> MpiResult<ReqId> {
    if h <= 0 {
        return fail(err::REQUEST, format!("invalid request handle {h}"));
    }
    m.engine.id_at((h - 1) as u32).ok_or_else(|| gone(h))
}

fn gone(h: c_int) -> crate::api::error::MpiError {
    crate::api::error::MpiError::new(
        err::REQUEST,
        format!("request {h} does not exist (freed or completed already?)"),
    )
}

/// The communicator whose handler a request's errors go to, from its
/// owner: `MPI_COMM_WORLD` for one made without (a window's).
fn comm_from(owner: i32) -> i32 {
    if owner == NO_OWNER {
        COMM_WORLD
    } else {
        owner
    }
}

/// After a request's status is taken: forget a one-shot request's handle
/// (a generalized request's query and free functions run, their error in
/// the status).
fn retire(id: ReqId, persistent: bool, h: &mut c_int, st: &mut Status) {
    if persistent {
        return;
    }
    match super::misc::grequest_release(id, Some(st)) {
        Some(rc) if rc != err::SUCCESS && st.error.is_none() => {
            st.error = Some(crate::api::ReqError::Failed {
                class: rc,
                detail: format!("a generalized request's query or free function returned {rc}"),
            });
        }
        _ => {}
    }
    *h = REQUEST_NULL;
}

/// A completed request's error, raised on its communicator `comm` (or,
/// for a file's request, its file: `file::request_owner`).
fn status_result(name: &str, comm: i32, st: &Status) -> c_int {
    match &st.error {
        None => err::SUCCESS,
        Some(e) if comm < 0 => {
            super::ret_file(name, -comm, Err(crate::api::error::request_error(e)))
        }
        Some(e) => super::raise(name, comm, crate::api::error::request_error(e)),
    }
}

/// ULFM: a wildcard receive that cannot complete while a failure on its
/// communicator is not acknowledged. The request stays posted: a wait
/// may resume after `MPIX_Comm_failure_ack`.
fn blocked(name: &str, comm: i32) -> c_int {
    let e = crate::api::error::request_error(&crate::api::ReqError::ProcFailedPending);
    super::raise(name, comm, e)
}

/// The status of a request `blocked` reports.
fn blocked_status() -> CStatus {
    let mut st = Status::empty();
    st.error = Some(crate::api::ReqError::ProcFailedPending);
    CStatus::from_status(&st)
}

/// A live request behind a handle: its id, whether persistent, and the
/// communicator its errors go to.
#[derive(Clone, Copy)]
struct Live {
    id: ReqId,
    persistent: bool,
    comm: i32,
}

/// What a handle is right now, for the wait/test family.
enum Slot {
    /// `MPI_REQUEST_NULL` or an inactive persistent request.
    Idle,
    Live(Live),
}

/// A handle's slot from what the engine found there.
fn slot_of(h: c_int, found: Option<Found>) -> MpiResult<Slot> {
    match found {
        Some(Found {
            id,
            state: ReqState::Live { persistent },
            owner,
        }) => Ok(Slot::Live(Live {
            id,
            persistent,
            comm: comm_from(owner),
        })),
        Some(Found {
            state: ReqState::Inactive,
            ..
        }) => Ok(Slot::Idle),
        _ => Err(gone(h)),
    }
}

fn slot(m: &Mpi, h: c_int) -> MpiResult<Slot> {
    if h == REQUEST_NULL {
        return Ok(Slot::Idle);
    }
    if h <= 0 {
        return fail(err::REQUEST, format!("invalid request handle {h}"));
    }
    slot_of(h, m.engine.lookup((h - 1) as u32))
}

mpi_fn!(fn MPI_Wait / PMPI_Wait(req: *mut c_int, status: *mut CStatus) {
    let m = match mpi() { Ok(m) => m, Err(e) => return super::raise("MPI_Wait", COMM_WORLD, e) };
    // SAFETY: caller's request pointer.
    let h = match unsafe { super::get(req) } { Ok(h) => h, Err(e) => return super::raise("MPI_Wait", COMM_WORLD, e) };
    let s = match slot(m, h) { Ok(s) => s, Err(e) => return super::raise("MPI_Wait", COMM_WORLD, e) };
    match s {
        Slot::Idle => {
            // SAFETY: caller's status pointer (or NULL).
            unsafe { put_status(status, &Status::empty()) };
            err::SUCCESS
        }
        Slot::Live(Live { id, persistent, comm }) => {
            crate::api::nbc::run_here(m, id);
            let Some(mut st) = m.engine.wait_unless_blocked(id) else {
                return blocked("MPI_Wait", comm);
            };
            let mut hh = h;
            retire(id, persistent, &mut hh, &mut st);
            // SAFETY: caller's pointers, checked non-null above for req.
            unsafe {
                req.write(hh);
                put_status(status, &st);
            }
            status_result("MPI_Wait", comm, &st)
        }
    }
});

mpi_fn!(fn MPI_Test / PMPI_Test(req: *mut c_int, flag: *mut c_int, status: *mut CStatus) {
    let r = (|| -> MpiResult<c_int> {
        let m = mpi()?;
        // SAFETY: caller's request pointer.
        let h = unsafe { super::get(req)? };
        m.engine.poke();
        let live = match slot(m, h)? {
            Slot::Idle => {
                // SAFETY: caller's pointers.
                unsafe {
                    put(flag, 1)?;
                    put_status(status, &Status::empty());
                }
                return Ok(err::SUCCESS);
            }
            Slot::Live(live) => live,
        };
        let Some(mut st) = m.engine.take(live.id) else {
            // SAFETY: caller's flag pointer.
            unsafe { put(flag, 0)? };
            if !m.engine.blocked_among(&[live.id]).is_empty() {
                return Ok(blocked("MPI_Test", live.comm));
            }
            return Ok(err::SUCCESS);
        };
        let mut hh = h;
        retire(live.id, live.persistent, &mut hh, &mut st);
        // SAFETY: caller's pointers.
        unsafe {
            put(flag, 1)?;
            req.write(hh);
            put_status(status, &st);
        }
        Ok(status_result("MPI_Test", live.comm, &st))
    })();
    match r { Ok(c) => c, Err(e) => super::raise("MPI_Test", COMM_WORLD, e) }
});

/// Shared by the -any/-some variants: takes every completed request among
/// `lives` (handles `hs[i]`), writing statuses; returns the indices
/// completed, each with its request's communicator and status.
fn collect(
    m: &Mpi,
    hs: &mut [c_int],
    mut statuses: Option<&mut [CStatus]>,
    lives: &[(usize, Live)],
) -> Vec<(usize, i32, Status)> {
    let mut done = Vec::new();
    for &(i, live) in lives {
        if let Some(mut st) = m.engine.take(live.id) {
            retire(live.id, live.persistent, &mut hs[i], &mut st);
            if let Some(s) = statuses.as_deref_mut() {
                s[i] = CStatus::from_status(&st);
            }
            done.push((i, live.comm, st));
        }
    }
    done
}

/// Live requests among the handles, each with its position; an invalid
/// handle is an error.
fn live(m: &Mpi, hs: &[c_int]) -> MpiResult<Vec<(usize, Live)>> {
    if let Some(&h) = hs.iter().find(|&&h| h != REQUEST_NULL && h <= 0) {
        return fail(err::REQUEST, format!("invalid request handle {h}"));
    }
    let given = hs
        .iter()
        .filter(|&&h| h != REQUEST_NULL)
        .map(|&h| (h - 1) as u32);
    let mut found = m.engine.lookup_all(given).into_iter();
    let mut v = Vec::new();
    for (i, &h) in hs.iter().enumerate() {
        if h == REQUEST_NULL {
            continue;
        }
        if let Slot::Live(live) = slot_of(h, found.next().flatten())? {
            v.push((i, live));
        }
    }
    Ok(v)
}

/// # Safety
/// `reqs` valid for n handles; `statuses` NULL or valid for n statuses.
unsafe fn statuses_arg<'a>(p: *mut CStatus, n: usize) -> Option<&'a mut [CStatus]> {
    // SAFETY: forwarded contract.
    (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts_mut(p, n) })
}

fn finish_many(name: &str, done: &[(usize, i32, Status)]) -> c_int {
    // A halt is not a per-request error: the whole call says roll back.
    if done
        .iter()
        .any(|(_, _, s)| s.error == Some(crate::api::ReqError::Halted))
    {
        return err::TRY_RELOAD;
    }
    if let Some((_, comm, st)) = done.iter().find(|(_, _, s)| s.error.is_some()) {
        let r = status_result(name, *comm, st);
        return if r == err::SUCCESS { r } else { err::IN_STATUS };
    }
    err::SUCCESS
}

/// `MPI_Waitall` of requests that all end without an error (what a
/// message-rate loop waits for): one hold of the engine's lock, nothing
/// looked up twice. False, with nothing done, when the ordinary path must
/// run: a handle invalid, a generalized request or a queued collective
/// that the waiting thread may have to run, or a request that ends with an
/// error or blocked.
fn wait_all_quick(m: &Mpi, hs: &mut [c_int], mut sts: Option<&mut [CStatus]>) -> bool {
    if super::misc::greqs_held() || crate::api::nbc::any_queued() {
        return false;
    }
    let mut slots = Vec::with_capacity(hs.len());
    for (i, &h) in hs.iter().enumerate() {
        match h {
            REQUEST_NULL => {}
            h if h > 0 => slots.push((i, (h - 1) as u32)),
            _ => return false,
        }
    }
    m.engine.wait_all_quick(&slots, |i, persistent, st| {
        if !persistent {
            hs[i] = REQUEST_NULL;
        }
        if let Some(s) = sts.as_deref_mut() {
            s[i] = CStatus::from_status(&st);
        }
    })
}

mpi_fn!(fn MPI_Waitall / PMPI_Waitall(n: c_int, reqs: *mut c_int, statuses: *mut CStatus) {
    let r = (|| -> MpiResult<c_int> {
        let m = mpi()?;
        let n = super::count(n)?;
        // SAFETY: caller's arrays of n elements.
        let hs = unsafe { array_mut(reqs, n)? };
        // SAFETY: caller's array of n statuses, or NULL.
        let mut sts = unsafe { statuses_arg(statuses, n) };
        if let Some(s) = sts.as_deref_mut() {
            let empty = CStatus::from_status(&Status::empty());
            s.iter_mut().for_each(|x| *x = empty);
        }
        if wait_all_quick(m, hs, sts.as_deref_mut()) {
            return Ok(err::SUCCESS);
        }
        let lives = live(m, hs)?;
        for &(_, live) in &lives {
            crate::api::nbc::run_here(m, live.id);
        }
        let ids: Vec<ReqId> = lives.iter().map(|(_, l)| l.id).collect();
        let mut done = Vec::with_capacity(lives.len());
        let mut stuck = None;
        for (&(i, live), waited) in lives.iter().zip(m.engine.wait_all_unless_blocked(&ids)) {
            match waited {
                Waited::Done(mut st) => {
                    retire(live.id, live.persistent, &mut hs[i], &mut st);
                    if let Some(s) = sts.as_deref_mut() {
                        s[i] = CStatus::from_status(&st);
                    }
                    done.push((i, live.comm, st));
                }
                Waited::Blocked => {
                    if let Some(s) = sts.as_deref_mut() {
                        s[i] = blocked_status();
                    }
                    stuck.get_or_insert(live.comm);
                }
                Waited::Idle => {}
            }
        }
        if let Some(comm) = stuck {
            blocked("MPI_Waitall", comm);
            return Ok(err::IN_STATUS);
        }
        Ok(finish_many("MPI_Waitall", &done))
    })();
    match r { Ok(c) => c, Err(e) => super::raise("MPI_Waitall", COMM_WORLD, e) }
});

mpi_fn!(fn MPI_Testall / PMPI_Testall(n: c_int, reqs: *mut c_int, flag: *mut c_int, statuses: *mut CStatus) {
    let r = (|| -> MpiResult<c_int> {
        let m = mpi()?;
        let n = super::count(n)?;
        // SAFETY: caller's arrays of n elements.
        let hs = unsafe { array_mut(reqs, n)? };
        let lives = live(m, hs)?;
        m.engine.poke();
        let reqs: Vec<ReqId> = lives.iter().map(|(_, l)| l.id).collect();
        let all = m.engine.done_among(&reqs).len() == reqs.len();
        if !all {
            // SAFETY: caller's flag.
            unsafe { put(flag, 0)? };
            if let Some(&k) = m.engine.blocked_among(&reqs).first() {
                return Ok(blocked("MPI_Testall", lives[k].1.comm));
            }
            return Ok(err::SUCCESS);
        }
        // SAFETY: caller's array of n statuses, or NULL.
        let mut sts = unsafe { statuses_arg(statuses, n) };
        if let Some(s) = sts.as_deref_mut() {
            let empty = CStatus::from_status(&Status::empty());
            s.iter_mut().for_each(|x| *x = empty);
        }
        let done = collect(m, hs, sts, &lives);
        // SAFETY: caller's flag.
        unsafe { put(flag, 1)? };
        Ok(finish_many("MPI_Testall", &done))
    })();
    match r { Ok(c) => c, Err(e) => super::raise("MPI_Testall", COMM_WORLD, e) }
});

/// The positions of the complete requests among `reqs`, waiting for one
/// if `block`; `Err` with the positions of wildcard receives blocked by
/// a failure (ULFM) when none is complete.
fn done_or_blocked(m: &Mpi, reqs: &[ReqId], block: bool) -> Result<Vec<usize>, Vec<usize>> {
    if block {
        return m.engine.wait_some_unless_blocked(reqs);
    }
    m.engine.poke();
    let done = m.engine.done_among(reqs);
    if done.is_empty() {
        let stuck = m.engine.blocked_among(reqs);
        if !stuck.is_empty() {
            return Err(stuck);
        }
    }
    Ok(done)
}

/// Waitany / Testany: `block` selects waiting.
///
/// # Safety
/// Pointers as in MPI_Waitany.
unsafe fn any(
    name: &str,
    n: c_int,
    reqs: *mut c_int,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut CStatus,
    block: bool,
) -> c_int {
    let r = (|| -> MpiResult<c_int> {
        let m = mpi()?;
        let n = super::count(n)?;
        // SAFETY: caller's array.
        let hs = unsafe { array_mut(reqs, n)? };
        let lives = live(m, hs)?;
        if lives.is_empty() {
            // SAFETY: caller's pointers.
            unsafe {
                put(index, UNDEFINED)?;
                if !flag.is_null() {
                    flag.write(1)
                }
                put_status(status, &Status::empty());
            }
            return Ok(err::SUCCESS);
        }
        let reqs: Vec<ReqId> = lives.iter().map(|(_, l)| l.id).collect();
        let done = match done_or_blocked(m, &reqs, block) {
            Ok(done) => done,
            Err(stuck) => {
                let (i, live) = lives[stuck[0]];
                // SAFETY: caller's pointers.
                unsafe {
                    put(index, i as c_int)?;
                    if !flag.is_null() {
                        flag.write(0)
                    }
                    if !status.is_null() {
                        status.write(blocked_status());
                    }
                }
                return Ok(blocked(name, live.comm));
            }
        };
        let Some(&k) = done.first() else {
            // SAFETY: caller's pointers.
            unsafe {
                put(index, UNDEFINED)?;
                put(flag, 0)?;
            }
            return Ok(err::SUCCESS);
        };
        let done = collect(m, hs, None, &lives[k..=k]);
        let Some((i, comm, st)) = done.first() else {
            return fail(err::INTERN, "a request complete a moment ago was gone");
        };
        let i = *i;
        // SAFETY: caller's pointers.
        unsafe {
            put(index, i as c_int)?;
            if !flag.is_null() {
                flag.write(1)
            }
            put_status(status, st);
        }
        Ok(status_result(name, *comm, st))
    })();
    match r {
        Ok(c) => c,
        Err(e) => super::raise(name, COMM_WORLD, e),
    }
}

mpi_fn!(fn MPI_Waitany / PMPI_Waitany(n: c_int, reqs: *mut c_int, index: *mut c_int, status: *mut CStatus) {
    // SAFETY: caller's pointers.
    unsafe { any("MPI_Waitany", n, reqs, index, std::ptr::null_mut(), status, true) }
});

mpi_fn!(fn MPI_Testany / PMPI_Testany(n: c_int, reqs: *mut c_int, index: *mut c_int, flag: *mut c_int, status: *mut CStatus) {
    // SAFETY: caller's pointers.
    unsafe { any("MPI_Testany", n, reqs, index, flag, status, false) }
});

/// Waitsome / Testsome.
///
/// # Safety
/// Pointers as in MPI_Waitsome.
unsafe fn some(
    name: &str,
    n: c_int,
    reqs: *mut c_int,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut CStatus,
    block: bool,
) -> c_int {
    let r = (|| -> MpiResult<c_int> {
        let m = mpi()?;
        let n = super::count(n)?;
        // SAFETY: caller's arrays.
        let hs = unsafe { array_mut(reqs, n)? };
        let lives = live(m, hs)?;
        if lives.is_empty() {
            // SAFETY: caller's pointer.
            unsafe { put(outcount, UNDEFINED)? };
            return Ok(err::SUCCESS);
        }
        let reqs: Vec<ReqId> = lives.iter().map(|(_, l)| l.id).collect();
        let done = match done_or_blocked(m, &reqs, block) {
            Ok(done) => done,
            Err(stuck) => {
                // Reported as the requests of the call, each with its
                // error (their handles stay).
                // SAFETY: caller's arrays of n elements.
                unsafe {
                    put(outcount, stuck.len() as c_int)?;
                    let idx = array_mut(indices, stuck.len())?;
                    let mut sts = statuses_arg(statuses, n);
                    for (k, &j) in stuck.iter().enumerate() {
                        idx[k] = lives[j].0 as c_int;
                        if let Some(s) = sts.as_deref_mut() {
                            s[k] = blocked_status();
                        }
                    }
                }
                blocked(name, lives[stuck[0]].1.comm);
                return Ok(err::IN_STATUS);
            }
        };
        let pick: Vec<(usize, Live)> = done.iter().map(|&k| lives[k]).collect();
        let mut tmp = vec![CStatus::default(); n];
        let done = collect(m, hs, Some(&mut tmp), &pick);
        // SAFETY: caller's arrays of n elements.
        unsafe {
            put(outcount, done.len() as c_int)?;
            let idx = array_mut(indices, done.len())?;
            let mut sts = statuses_arg(statuses, n);
            for (k, (i, _, _)) in done.iter().enumerate() {
                idx[k] = *i as c_int;
                if let Some(s) = sts.as_deref_mut() {
                    s[k] = tmp[*i];
                }
            }
        }
        Ok(finish_many(name, &done))
    })();
    match r {
        Ok(c) => c,
        Err(e) => super::raise(name, COMM_WORLD, e),
    }
}

mpi_fn!(fn MPI_Waitsome / PMPI_Waitsome(n: c_int, reqs: *mut c_int, outcount: *mut c_int, indices: *mut c_int, statuses: *mut CStatus) {
    // SAFETY: caller's pointers.
    unsafe { some("MPI_Waitsome", n, reqs, outcount, indices, statuses, true) }
});

mpi_fn!(fn MPI_Testsome / PMPI_Testsome(n: c_int, reqs: *mut c_int, outcount: *mut c_int, indices: *mut c_int, statuses: *mut CStatus) {
    // SAFETY: caller's pointers.
    unsafe { some("MPI_Testsome", n, reqs, outcount, indices, statuses, false) }
});

mpi_fn!(fn MPI_Request_free / PMPI_Request_free(req: *mut c_int) {
    let r = (|| -> MpiResult<()> {
        let m = mpi()?;
        // SAFETY: caller's request pointer.
        let h = unsafe { super::get(req)? };
        let id = id_of(m, h)?;
        m.engine.free(id);
        crate::api::nbc::free_persistent(m, id);
        super::partitioned::forget(id);
        let freed = super::misc::grequest_release(id, None).unwrap_or(err::SUCCESS);
        // SAFETY: as above.
        unsafe { req.write(REQUEST_NULL) };
        if freed != err::SUCCESS {
            return fail(freed, format!("the free function of generalized request {h} returned {freed}"));
        }
        Ok(())
    })();
    ret("MPI_Request_free", COMM_WORLD, r)
});

mpi_fn!(fn MPI_Cancel / PMPI_Cancel(req: *mut c_int) {
    let r = (|| -> MpiResult<()> {
        let m = mpi()?;
        // SAFETY: caller's request pointer.
        let h = unsafe { super::get(req)? };
        let id = id_of(m, h)?;
        // A generalized request is cancelled by its own cancel function.
        if let Some(rc) = super::misc::grequest_cancel(id) {
            if rc != err::SUCCESS {
                return fail(rc, format!("the cancel function of generalized request {h} returned {rc}"));
            }
            return Ok(());
        }
        m.engine.cancel(id);
        Ok(())
    })();
    ret("MPI_Cancel", COMM_WORLD, r)
});

mpi_fn!(fn MPI_Test_cancelled / PMPI_Test_cancelled(status: *const CStatus, flag: *mut c_int) {
    // SAFETY: caller's pointers.
    let r = unsafe { super::get(status).and_then(|s| put(flag, s.count_hi_and_cancelled & 1)) };
    ret("MPI_Test_cancelled", COMM_WORLD, r)
});

/// Starts a persistent request: a collective's goes to its worker.
fn start_one(m: &'static Mpi, h: c_int) -> MpiResult<()> {
    let id = id_of(m, h)?;
    let started = match crate::api::nbc::start_persistent(m, id) {
        Some(s) => s,
        None => match super::partitioned::start(m, id) {
            Some(s) => s?,
            None => m.engine.start(id),
        },
    };
    if !started {
        return fail(
            err::REQUEST,
            format!("request {h} is already active or not persistent"),
        );
    }
    Ok(())
}

mpi_fn!(fn MPI_Start / PMPI_Start(req: *mut c_int) {
    let r = (|| -> MpiResult<()> {
        let m = mpi()?;
        // SAFETY: caller's request pointer.
        let h = unsafe { super::get(req)? };
        start_one(m, h)?;
        m.engine.background();
        Ok(())
    })();
    ret("MPI_Start", COMM_WORLD, r)
});

mpi_fn!(fn MPI_Startall / PMPI_Startall(n: c_int, reqs: *mut c_int) {
    let r = (|| -> MpiResult<()> {
        let m = mpi()?;
        let n = super::count(n)?;
        // SAFETY: caller's array of n handles.
        let hs = unsafe { super::array(reqs, n)? };
        for &h in hs {
            start_one(m, h)?;
        }
        m.engine.background();
        Ok(())
    })();
    ret("MPI_Startall", COMM_WORLD, r)
});
