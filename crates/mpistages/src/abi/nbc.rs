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
    ($( $name:ident / $pname:ident => $body:ident ( $($a:ident : $t:ty),* ) on $c:ident pin $pins:expr ; )*) => {$(
        mpi_fn!(fn $name / $pname ($($a: $t,)* info: c_int, req: *mut c_int) {
            let args = Args(($($a,)*));
            let job: std::sync::Arc<dyn Fn() -> MpiResult<()> + Send + Sync> = std::sync::Arc::new(move || {
                let ($($a,)*) = args.get();
                // SAFETY: the arguments of the program's call, valid until
                // its request is freed.
                capture(|| unsafe { $body($($a),*) })
            });
            ret(stringify!($name), $c, init($c, info, req, $pins, job))
        });
    )*};
}

macro_rules! nonblocking {
    ($( $name:ident / $pname:ident => $body:ident ( $($a:ident : $t:ty),* ) on $c:ident pin $pins:expr ; )*) => {$(
        mpi_fn!(fn $name / $pname ($($a: $t,)* req: *mut c_int) {
            let args = Args(($($a,)*));
            let job: crate::api::nbc::Job = Box::new(move || {
                let ($($a,)*) = args.get();
                // SAFETY: the arguments of the program's call, valid until
                // its request completes.
                capture(|| unsafe { $body($($a),*) })
            });
            ret(stringify!($name), $c, start($c, req, $pins, job))
        });
    )*};
}

nonblocking! {
    MPI_Ibarrier / PMPI_Ibarrier => PMPI_Barrier(c: c_int) on c pin vec![];
    MPI_Ibcast / PMPI_Ibcast => PMPI_Bcast(buf: *mut c_void, n: c_int, dt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, dt)];
    MPI_Igather / PMPI_Igather => PMPI_Gather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Igatherv / PMPI_Igatherv => PMPI_Gatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Iscatter / PMPI_Iscatter => PMPI_Scatter(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Iscatterv / PMPI_Iscatterv => PMPI_Scatterv(sbuf: *const c_void, scounts: *const c_int, displs: *const c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Iallgather / PMPI_Iallgather => PMPI_Allgather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Iallgatherv / PMPI_Iallgatherv => PMPI_Allgatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Ialltoall / PMPI_Ialltoall => PMPI_Alltoall(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Ialltoallv / PMPI_Ialltoallv => PMPI_Alltoallv(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Ialltoallw / PMPI_Ialltoallw => PMPI_Alltoallw(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, stypes: *const c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtypes: *const c_int, c: c_int) on c pin w_pins(c, sbuf, stypes, rtypes, false);
    MPI_Ireduce / PMPI_Ireduce => PMPI_Reduce(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Iallreduce / PMPI_Iallreduce => PMPI_Allreduce(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Ireduce_scatter / PMPI_Ireduce_scatter => PMPI_Reduce_scatter(sbuf: *const c_void, rbuf: *mut c_void, rcounts: *const c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Ireduce_scatter_block / PMPI_Ireduce_scatter_block => PMPI_Reduce_scatter_block(sbuf: *const c_void, rbuf: *mut c_void, rn: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Iscan / PMPI_Iscan => PMPI_Scan(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Iexscan / PMPI_Iexscan => PMPI_Exscan(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Ineighbor_allgather / PMPI_Ineighbor_allgather => PMPI_Neighbor_allgather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Ineighbor_allgatherv / PMPI_Ineighbor_allgatherv => PMPI_Neighbor_allgatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Ineighbor_alltoall / PMPI_Ineighbor_alltoall => PMPI_Neighbor_alltoall(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Ineighbor_alltoallv / PMPI_Ineighbor_alltoallv => PMPI_Neighbor_alltoallv(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Ineighbor_alltoallw / PMPI_Ineighbor_alltoallw => PMPI_Neighbor_alltoallw(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_long, stypes: *const c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_long, rtypes: *const c_int, c: c_int) on c pin w_pins(c, sbuf, stypes, rtypes, true);
}

persistent! {
    MPI_Barrier_init / PMPI_Barrier_init => PMPI_Barrier(c: c_int) on c pin vec![];
    MPI_Bcast_init / PMPI_Bcast_init => PMPI_Bcast(buf: *mut c_void, n: c_int, dt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, dt)];
    MPI_Gather_init / PMPI_Gather_init => PMPI_Gather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Gatherv_init / PMPI_Gatherv_init => PMPI_Gatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Scatter_init / PMPI_Scatter_init => PMPI_Scatter(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Scatterv_init / PMPI_Scatterv_init => PMPI_Scatterv(sbuf: *const c_void, scounts: *const c_int, displs: *const c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Allgather_init / PMPI_Allgather_init => PMPI_Allgather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Allgatherv_init / PMPI_Allgatherv_init => PMPI_Allgatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Alltoall_init / PMPI_Alltoall_init => PMPI_Alltoall(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Alltoallv_init / PMPI_Alltoallv_init => PMPI_Alltoallv(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Alltoallw_init / PMPI_Alltoallw_init => PMPI_Alltoallw(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, stypes: *const c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtypes: *const c_int, c: c_int) on c pin w_pins(c, sbuf, stypes, rtypes, false);
    MPI_Reduce_init / PMPI_Reduce_init => PMPI_Reduce(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, root: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Allreduce_init / PMPI_Allreduce_init => PMPI_Allreduce(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Reduce_scatter_init / PMPI_Reduce_scatter_init => PMPI_Reduce_scatter(sbuf: *const c_void, rbuf: *mut c_void, rcounts: *const c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Reduce_scatter_block_init / PMPI_Reduce_scatter_block_init => PMPI_Reduce_scatter_block(sbuf: *const c_void, rbuf: *mut c_void, rn: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Scan_init / PMPI_Scan_init => PMPI_Scan(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Exscan_init / PMPI_Exscan_init => PMPI_Exscan(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) on c pin vec![(Pin::Type, dt), (Pin::Op, o)];
    MPI_Neighbor_allgather_init / PMPI_Neighbor_allgather_init => PMPI_Neighbor_allgather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Neighbor_allgatherv_init / PMPI_Neighbor_allgatherv_init => PMPI_Neighbor_allgatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Neighbor_alltoall_init / PMPI_Neighbor_alltoall_init => PMPI_Neighbor_alltoall(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Neighbor_alltoallv_init / PMPI_Neighbor_alltoallv_init => PMPI_Neighbor_alltoallv(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rt: c_int, c: c_int) on c pin vec![(Pin::Type, st), (Pin::Type, rt)];
    MPI_Neighbor_alltoallw_init / PMPI_Neighbor_alltoallw_init => PMPI_Neighbor_alltoallw(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_long, stypes: *const c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_long, rtypes: *const c_int, c: c_int) on c pin w_pins(c, sbuf, stypes, rtypes, true);
}
