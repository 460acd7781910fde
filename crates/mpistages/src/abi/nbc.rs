//! Non-blocking collectives (`MPI_I*`): each runs its blocking twin's body
//! on the communicator's worker thread (`api::nbc`), its errors captured
//! for the request (`abi::capture`) and raised where the program waits.

use super::coll::*;
use super::neighbor::*;
use super::reduce::*;
use super::{capture, mpi, mpi_fn, put, ret};
use crate::api::error::MpiResult;
use crate::api::Pin;
use std::os::raw::{c_int, c_long, c_void};

/// The arguments of a collective, moved to the worker thread. The program
/// keeps the buffers and arrays valid until the request completes, as
/// MPI requires.
struct Args<T>(T);
// SAFETY: only raw pointers and integers of a call cross; the standard
// forbids the program to touch the memory they point to until the request
// completes, and the worker is the only one using them meanwhile.
unsafe impl<T> Send for Args<T> {}
// SAFETY: as for Send: a persistent collective's worker reads the
// arguments, never at the same time as another thread.
unsafe impl<T> Sync for Args<T> {}
impl<T: Copy> Args<T> {
    fn get(&self) -> T {
        self.0
    }
}

/// The handles a collective's arguments name, pinned until it ends (the
/// program may free them meanwhile).
fn start(
    c: c_int,
    req: *mut c_int,
    pins: Vec<(Pin, c_int)>,
    job: crate::api::nbc::Job,
) -> MpiResult<()> {
    let m = mpi()?;
    let cm = m.tables().comm(c)?;
    let mut pins = pins;
    pins.push((Pin::Comm, c));
    let id = crate::api::nbc::start(m, c, cm.coll_context(), pins, job);
    // SAFETY: caller's out-pointer.
    unsafe { put(req, super::request::handle(id)) }
}

/// The datatypes of an all-to-all-w's type arrays (send types unless in
/// place), to pin. Unreadable arrays pin nothing: the collective's body
/// then reports them.
fn w_pins(
    c: c_int,
    sbuf: *const c_void,
    stypes: *const c_int,
    rtypes: *const c_int,
    neighbors: bool,
) -> Vec<(Pin, c_int)> {
    let Ok(m) = mpi() else { return Vec::new() };
    let (nin, nout) = if neighbors {
        match crate::api::comm::topology(m, c) {
            Ok((cm, t)) => {
                let (i, o) = t.neighbors(cm.rank);
                (i.len(), o.len())
            }
            Err(_) => return Vec::new(),
        }
    } else {
        match m.tables().comm(c) {
            Ok(cm) => (cm.size(), cm.size()),
            Err(_) => return Vec::new(),
        }
    };
    let mut v = Vec::new();
    // SAFETY: the standard's arrays of out-degree (send) and in-degree
    // (receive) datatypes, or comm-size ones.
    unsafe {
        if !super::coll::is_in_place(sbuf) {
            v.extend(
                super::array(stypes, nout)
                    .unwrap_or(&[])
                    .iter()
                    .map(|&t| (Pin::Type, t)),
            );
        }
        v.extend(
            super::array(rtypes, nin)
                .unwrap_or(&[])
                .iter()
                .map(|&t| (Pin::Type, t)),
        );
    }
    v
}

/// Copies of a call's count, displacement and datatype arrays, taken when
/// it is made. Open MPI and MPICH read them at the call, and programs count
/// on it: mpi4py's large-count fallbacks free their converted arrays as
/// soon as `MPI_Ialltoallv`/`MPI_Alltoallv_init` returns, and the worker
/// then read freed memory.
#[derive(Default)]
struct Kept(Vec<Box<dyn std::any::Any + Send + Sync>>);

impl Kept {
    /// A pointer to a copy of the `n` elements at `p`; `p` itself when
    /// there is nothing to copy (`n` is 0 or `p` NULL: the body ignores or
    /// reports it).
    ///
    /// # Safety
    /// `p` points to `n` readable elements when `n > 0` and it is not NULL.
    unsafe fn keep<T: Copy + Send + Sync + 'static>(&mut self, p: *const T, n: usize) -> *const T {
        if n == 0 || p.is_null() {
            return p;
        }
        // SAFETY: by the caller's contract.
        let copy: Box<[T]> = unsafe { std::slice::from_raw_parts(p, n) }.into();
        let q = copy.as_ptr();
        self.0.push(Box::new(copy));
        q
    }
}

/// How many elements the arrays of a collective on `c` have: one per peer
/// (the remote group's size on an inter-communicator). 0 for an invalid
/// handle, whose call then fails in the body.
pub(super) fn peers(c: c_int) -> usize {
    let Ok(m) = mpi() else { return 0 };
    m.tables().comm(c).map(|cm| cm.peers().size()).unwrap_or(0)
}

/// One per member of the local group (`MPI_Reduce_scatter`'s counts).
pub(super) fn members(c: c_int) -> usize {
    let Ok(m) = mpi() else { return 0 };
    m.tables().comm(c).map(|cm| cm.size()).unwrap_or(0)
}

/// Arrays significant only at the root (`MPI_Gatherv`'s receive side,
/// `MPI_Scatterv`'s send side): elsewhere they may be anything, and are
/// left unread.
pub(super) fn at_root(c: c_int, root: c_int) -> usize {
    let Ok(m) = mpi() else { return 0 };
    match m.tables().comm(c) {
        Ok(cm) if cm.is_inter() && root == crate::api::consts::ROOT => cm.peers().size(),
        Ok(cm) if !cm.is_inter() && root >= 0 && root as usize == cm.rank => cm.size(),
        _ => 0,
    }
}

/// Send-side arrays, ignored when the call is in place.
pub(super) fn unless_in_place(sbuf: *const c_void, c: c_int) -> usize {
    if super::coll::is_in_place(sbuf) {
        0
    } else {
        peers(c)
    }
}

/// A neighbourhood collective's in-degree (`incoming`) or out-degree.
pub(super) fn degree(c: c_int, incoming: bool) -> usize {
    let Ok(m) = mpi() else { return 0 };
    match crate::api::comm::topology(m, c) {
        Ok((cm, t)) => {
            let (i, o) = t.neighbors(cm.rank);
            if incoming {
                i.len()
            } else {
                o.len()
            }
        }
        Err(_) => 0,
    }
}

/// The persistent twin (`MPI_*_init`): the same work, run at each start.
fn init(
    c: c_int,
    info: c_int,
    req: *mut c_int,
    pins: Vec<(Pin, c_int)>,
    job: std::sync::Arc<dyn Fn() -> MpiResult<()> + Send + Sync>,
) -> MpiResult<()> {
    let m = mpi()?;
    let cm = m.tables().comm(c)?;
    crate::api::info::get_or_empty(info)?;
    let mut pins = pins;
    pins.push((Pin::Comm, c));
    let id = crate::api::nbc::init(m, c, cm.coll_context(), pins, job);
    // SAFETY: caller's out-pointer.
    unsafe { put(req, super::request::handle(id)) }
}

macro_rules! persistent {
    ($( $name:ident / $pname:ident => $body:ident ( $($a:ident : $t:ty),* ) on $c:ident pin $pins:expr $(, keep $($k:ident : $n:expr),+)? ; )*) => {$(
        mpi_fn!(fn $name / $pname ($($a: $t,)* info: c_int, req: *mut c_int) {
            let pins = $pins;
            #[allow(unused_mut)] // collectives without arrays keep nothing
            let mut kept = Kept::default();
            // SAFETY: the program's arrays of the lengths the standard gives.
            $($( let $k = unsafe { kept.keep($k, $n) }; )+)?
            let args = Args(($($a,)*));
            let job: std::sync::Arc<dyn Fn() -> MpiResult<()> + Send + Sync> = std::sync::Arc::new(move || {
                let _arrays = &kept;
                let ($($a,)*) = args.get();
                // SAFETY: the arguments of the program's call, valid until
                // its request is freed.
                capture(|| unsafe { $body($($a),*) })
            });
            ret(stringify!($name), $c, init($c, info, req, pins, job))
        });
    )*};
}

macro_rules! nonblocking {
    ($( $name:ident / $pname:ident => $body:ident ( $($a:ident : $t:ty),* ) on $c:ident pin $pins:expr $(, keep $($k:ident : $n:expr),+)? ; )*) => {$(
        mpi_fn!(fn $name / $pname ($($a: $t,)* req: *mut c_int) {
            let pins = $pins;
            #[allow(unused_mut)] // collectives without arrays keep nothing
            let mut kept = Kept::default();
            // SAFETY: the program's arrays of the lengths the standard gives.
            $($( let $k = unsafe { kept.keep($k, $n) }; )+)?
            let args = Args(($($a,)*));
            let job: crate::api::nbc::Job = Box::new(move || {
                let _arrays = &kept;
                let ($($a,)*) = args.get();
                // SAFETY: the arguments of the program's call, valid until
                // its request completes.
                capture(|| unsafe { $body($($a),*) })
            });
            ret(stringify!($name), $c, start($c, req, pins, job))
        });
    )*};
}

nonblocking! {
    MPI_Ibarrier / PMPI_Ibarrier => PMPI_Barrier(c: c_int) on c pin vec![];
    MPI_Ibcast / PMPI_Ibcast => PMPI_Bcast(buf: *mut c_void, n: c_int, dt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, dt)];
    MPI_Igather / PMPI_Igather => PMPI_Gather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Igatherv / PMPI_Igatherv => PMPI_Gatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)], keep rcounts: at_root(c, root), displs: at_root(c, root);
    MPI_Iscatter / PMPI_Iscatter => PMPI_Scatter(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Iscatterv / PMPI_Iscatterv => PMPI_Scatterv(sbuf: *const c_void, scounts: *const c_int, displs: *const c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)], keep scounts: at_root(c, root), displs: at_root(c, root);
    MPI_Iallgather / PMPI_Iallgather => PMPI_Allgather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Iallgatherv / PMPI_Iallgatherv => PMPI_Allgatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)], keep rcounts: peers(c), displs: peers(c);
    MPI_Ialltoall / PMPI_Ialltoall => PMPI_Alltoall(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Ialltoallv / PMPI_Ialltoallv => PMPI_Alltoallv(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)], keep scounts: unless_in_place(sbuf, c), sdispls: unless_in_place(sbuf, c), rcounts: peers(c), rdispls: peers(c);
    MPI_Ialltoallw / PMPI_Ialltoallw => PMPI_Alltoallw(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, stypes: *const c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtypes: *const c_int, c: c_int) on c pin w_pins(c, sbuf, stypes, rtypes, false), keep scounts: unless_in_place(sbuf, c), sdispls: unless_in_place(sbuf, c), stypes: unless_in_place(sbuf, c), rcounts: peers(c), rdispls: peers(c), rtypes: peers(c);
    MPI_Ireduce / PMPI_Ireduce => PMPI_Reduce(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Iallreduce / PMPI_Iallreduce => PMPI_Allreduce(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Ireduce_scatter / PMPI_Ireduce_scatter => PMPI_Reduce_scatter(sbuf: *const c_void, rbuf: *mut c_void, rcounts: *const c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)], keep rcounts: members(c);
    MPI_Ireduce_scatter_block / PMPI_Ireduce_scatter_block => PMPI_Reduce_scatter_block(sbuf: *const c_void, rbuf: *mut c_void, rn: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Iscan / PMPI_Iscan => PMPI_Scan(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Iexscan / PMPI_Iexscan => PMPI_Exscan(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Ineighbor_allgather / PMPI_Ineighbor_allgather => PMPI_Neighbor_allgather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Ineighbor_allgatherv / PMPI_Ineighbor_allgatherv => PMPI_Neighbor_allgatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)], keep rcounts: degree(c, true), displs: degree(c, true);
    MPI_Ineighbor_alltoall / PMPI_Ineighbor_alltoall => PMPI_Neighbor_alltoall(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Ineighbor_alltoallv / PMPI_Ineighbor_alltoallv => PMPI_Neighbor_alltoallv(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)], keep scounts: degree(c, false), sdispls: degree(c, false), rcounts: degree(c, true), rdispls: degree(c, true);
    MPI_Ineighbor_alltoallw / PMPI_Ineighbor_alltoallw => PMPI_Neighbor_alltoallw(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_long, stypes: *const c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_long, rtypes: *const c_int, c: c_int) on c pin w_pins(c, sbuf, stypes, rtypes, true), keep scounts: degree(c, false), sdispls: degree(c, false), stypes: degree(c, false), rcounts: degree(c, true), rdispls: degree(c, true), rtypes: degree(c, true);
}

persistent! {
    MPI_Barrier_init / PMPI_Barrier_init => PMPI_Barrier(c: c_int) on c pin vec![];
    MPI_Bcast_init / PMPI_Bcast_init => PMPI_Bcast(buf: *mut c_void, n: c_int, dt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, dt)];
    MPI_Gather_init / PMPI_Gather_init => PMPI_Gather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Gatherv_init / PMPI_Gatherv_init => PMPI_Gatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)], keep rcounts: at_root(c, root), displs: at_root(c, root);
    MPI_Scatter_init / PMPI_Scatter_init => PMPI_Scatter(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Scatterv_init / PMPI_Scatterv_init => PMPI_Scatterv(sbuf: *const c_void, scounts: *const c_int, displs: *const c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)], keep scounts: at_root(c, root), displs: at_root(c, root);
    MPI_Allgather_init / PMPI_Allgather_init => PMPI_Allgather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Allgatherv_init / PMPI_Allgatherv_init => PMPI_Allgatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)], keep rcounts: peers(c), displs: peers(c);
    MPI_Alltoall_init / PMPI_Alltoall_init => PMPI_Alltoall(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Alltoallv_init / PMPI_Alltoallv_init => PMPI_Alltoallv(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)], keep scounts: unless_in_place(sbuf, c), sdispls: unless_in_place(sbuf, c), rcounts: peers(c), rdispls: peers(c);
    MPI_Alltoallw_init / PMPI_Alltoallw_init => PMPI_Alltoallw(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, stypes: *const c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtypes: *const c_int, c: c_int) on c pin w_pins(c, sbuf, stypes, rtypes, false), keep scounts: unless_in_place(sbuf, c), sdispls: unless_in_place(sbuf, c), stypes: unless_in_place(sbuf, c), rcounts: peers(c), rdispls: peers(c), rtypes: peers(c);
    MPI_Reduce_init / PMPI_Reduce_init => PMPI_Reduce(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Allreduce_init / PMPI_Allreduce_init => PMPI_Allreduce(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Reduce_scatter_init / PMPI_Reduce_scatter_init => PMPI_Reduce_scatter(sbuf: *const c_void, rbuf: *mut c_void, rcounts: *const c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)], keep rcounts: members(c);
    MPI_Reduce_scatter_block_init / PMPI_Reduce_scatter_block_init => PMPI_Reduce_scatter_block(sbuf: *const c_void, rbuf: *mut c_void, rn: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Scan_init / PMPI_Scan_init => PMPI_Scan(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Exscan_init / PMPI_Exscan_init => PMPI_Exscan(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Neighbor_allgather_init / PMPI_Neighbor_allgather_init => PMPI_Neighbor_allgather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Neighbor_allgatherv_init / PMPI_Neighbor_allgatherv_init => PMPI_Neighbor_allgatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)], keep rcounts: degree(c, true), displs: degree(c, true);
    MPI_Neighbor_alltoall_init / PMPI_Neighbor_alltoall_init => PMPI_Neighbor_alltoall(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Neighbor_alltoallv_init / PMPI_Neighbor_alltoallv_init => PMPI_Neighbor_alltoallv(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)], keep scounts: degree(c, false), sdispls: degree(c, false), rcounts: degree(c, true), rdispls: degree(c, true);
    MPI_Neighbor_alltoallw_init / PMPI_Neighbor_alltoallw_init => PMPI_Neighbor_alltoallw(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_long, stypes: *const c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_long, rtypes: *const c_int, c: c_int) on c pin w_pins(c, sbuf, stypes, rtypes, true), keep scounts: degree(c, false), sdispls: degree(c, false), stypes: degree(c, false), rcounts: degree(c, true), rdispls: degree(c, true), rtypes: degree(c, true);
}
