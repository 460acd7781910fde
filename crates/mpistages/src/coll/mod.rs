//! Collectives, built as schedules (`schedule.rs`, pure data) of our own
//! point-to-point messages on the communicator's collective context, run by
//! `exec.rs`. The functions here move bytes; `api::collective` maps user
//! buffers and datatypes onto them. Owns: algorithms and their choice by
//! size. Must not touch: transports, matching internals.

pub mod exec;
pub mod schedule;
pub mod shm;
pub mod single_copy;

use crate::transport::RawBuf;
pub use exec::{CollError, CollResult, Reducer, Team};

thread_local! {
    /// The tag the collectives of this thread use (see `with_tag`).
    static TAG: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// Runs `f` with this thread's collectives tagged `tag` instead of 0: a
/// non-blocking collective runs on a worker thread as the blocking one
/// does, under a tag of its own, so that it never matches the messages of
/// another collective of the same communicator running at the same time.
pub fn with_tag<T>(tag: i32, f: impl FnOnce() -> T) -> T {
    let before = TAG.replace(tag);
    let v = f();
    TAG.set(before);
    v
}

/// The tag of this thread's collectives.
pub fn current_tag() -> i32 {
    TAG.get()
}

fn sched_run(
    t: &Team,
    s: schedule::Schedule,
    send: RawBuf,
    recv: RawBuf,
    red: Option<&Reduction>,
) -> CollResult<()> {
    exec::run(t, &s, send, recv, red)
}

pub fn barrier(t: &Team) -> CollResult<()> {
    sched_run(
        t,
        schedule::barrier(t.rank, t.size()),
        RawBuf::empty(),
        RawBuf::empty(),
        None,
    )
}

/// A barrier of more members than a shared-memory segment serves goes by
/// groups (`barrier_grouped`): each member's group is `group[r]` (its
/// host), the same at every member.
pub fn barrier_grouped(t: &Team, group: &[usize]) -> CollResult<()> {
    sched_run(
        t,
        schedule::barrier_grouped(t.rank, group),
        RawBuf::empty(),
        RawBuf::empty(),
        None,
    )
}

/// From this many bytes on (and more than two ranks), Bcast scatters and
/// rings instead of using the binomial tree.
const SCATTER_RING_BCAST_MIN: usize = 256 << 10;

pub fn bcast(t: &Team, root: usize, buf: RawBuf) -> CollResult<()> {
    let n = t.size();
    if n > 2 && buf.len() >= SCATTER_RING_BCAST_MIN {
        let s = schedule::bcast_scatter_ring(t.rank, n, root, buf.len());
        return sched_run(t, s, RawBuf::empty(), buf, None);
    }
    sched_run(
        t,
        schedule::bcast(t.rank, t.size(), root, buf.len()),
        RawBuf::empty(),
        buf,
        None,
    )
}

/// What a reduction combines: `count` elements of `elem` bytes with `op`.
pub struct Reduction<'a> {
    pub count: usize,
    pub elem: usize,
    pub op: &'a Reducer,
    /// The op may combine operands in any order (enables ring algorithms).
    pub commutative: bool,
}

/// From this many bytes on, a commutative allreduce uses the ring (at two
/// ranks too: each reduces half the vector instead of all of it —
/// 1 MiB of doubles 347 -> 270-294 us, Open MPI 226-246).
const RING_ALLREDUCE_MIN: usize = 64 << 10;

pub fn reduce(t: &Team, root: usize, send: RawBuf, recv: RawBuf, r: &Reduction) -> CollResult<()> {
    let s = schedule::reduce(t.rank, t.size(), root, r.count, r.elem);
    sched_run(t, s, send, recv, Some(r))
}

pub fn allreduce(t: &Team, send: RawBuf, recv: RawBuf, r: &Reduction) -> CollResult<()> {
    let n = t.size();
    let ring = r.commutative && n >= 2 && r.count >= n && r.count * r.elem >= RING_ALLREDUCE_MIN;
    let s = if ring {
        schedule::ring_allreduce(t.rank, n, r.count, r.elem)
    } else {
        schedule::allreduce(t.rank, n, r.count, r.elem)
    };
    sched_run(t, s, send, recv, Some(r))
}

pub fn scan(
    t: &Team,
    send: RawBuf,
    recv: RawBuf,
    r: &Reduction,
    exclusive: bool,
) -> CollResult<()> {
    let s = schedule::scan(t.rank, t.size(), r.count, r.elem, exclusive);
    sched_run(t, s, send, recv, Some(r))
}

pub fn gather(t: &Team, root: usize, send: RawBuf, recv: RawBuf) -> CollResult<()> {
    sched_run(
        t,
        schedule::gather(t.rank, t.size(), root, send.len()),
        send,
        recv,
        None,
    )
}

pub fn scatter(t: &Team, root: usize, send: RawBuf, recv: RawBuf) -> CollResult<()> {
    sched_run(
        t,
        schedule::scatter(t.rank, t.size(), root, recv.len()),
        send,
        recv,
        None,
    )
}

pub fn gatherv(
    t: &Team,
    root: usize,
    send: RawBuf,
    recv: RawBuf,
    offs: &[usize],
    lens: &[usize],
) -> CollResult<()> {
    sched_run(
        t,
        schedule::gatherv(t.rank, t.size(), root, offs, lens, send.len()),
        send,
        recv,
        None,
    )
}

pub fn scatterv(
    t: &Team,
    root: usize,
    send: RawBuf,
    recv: RawBuf,
    offs: &[usize],
    lens: &[usize],
) -> CollResult<()> {
    sched_run(
        t,
        schedule::scatterv(t.rank, t.size(), root, offs, lens, recv.len()),
        send,
        recv,
        None,
    )
}

pub fn allgatherv(
    t: &Team,
    send: RawBuf,
    recv: RawBuf,
    offs: &[usize],
    lens: &[usize],
) -> CollResult<()> {
    sched_run(
        t,
        schedule::allgatherv(t.rank, t.size(), offs, lens),
        send,
        recv,
        None,
    )
}

#[allow(clippy::too_many_arguments)]
pub fn alltoallv(
    t: &Team,
    send: RawBuf,
    recv: RawBuf,
    soffs: &[usize],
    slens: &[usize],
    roffs: &[usize],
    rlens: &[usize],
) -> CollResult<()> {
    sched_run(
        t,
        schedule::alltoallv(t.rank, t.size(), soffs, slens, roffs, rlens),
        send,
        recv,
        None,
    )
}

/// Agreement on a number: the maximum over the communicator (used for new
/// context ids).
pub fn max_u32(t: &Team, v: u32) -> CollResult<u32> {
    let mut inp = v.to_le_bytes();
    let mut out = [0u8; 4];
    let red: &Reducer = &|src: &[u8], dst: &mut [u8], _| {
        let a = u32::from_le_bytes([src[0], src[1], src[2], src[3]]);
        let b = u32::from_le_bytes([dst[0], dst[1], dst[2], dst[3]]);
        dst.copy_from_slice(&a.max(b).to_le_bytes());
    };
    // SAFETY: both arrays live on this stack frame until the blocking call returns.
    let (s, r) = unsafe {
        (
            RawBuf::new(inp.as_mut_ptr(), 4),
            RawBuf::new(out.as_mut_ptr(), 4),
        )
    };
    allreduce(
        t,
        s,
        r,
        &Reduction {
            count: 1,
            elem: 4,
            op: red,
            commutative: true,
        },
    )?;
    Ok(u32::from_le_bytes(out))
}
