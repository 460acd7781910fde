//! Collectives, built as schedules (`schedule.rs`, pure data) of our own
//! point-to-point messages on the communicator's collective context, run by
//! `exec.rs`. The functions here move bytes; `api::collective` maps user
//! buffers and datatypes onto them. Owns: algorithms and their choice by
//! size. Must not touch: transports, matching internals.

pub mod exec;
pub mod schedule;

use crate::api::error::MpiResult;
use crate::api::{Comm, Mpi};
use crate::transport::RawBuf;
pub use exec::Reducer;

fn sched_run(
    m: &Mpi,
    c: &Comm,
    s: schedule::Schedule,
    send: RawBuf,
    recv: RawBuf,
    red: Option<&Reduction>,
) -> MpiResult<()> {
    exec::run(m, c, &s, send, recv, red)
}

pub fn barrier(m: &Mpi, c: &Comm) -> MpiResult<()> {
    sched_run(
        m,
        c,
        schedule::barrier(c.rank, c.size()),
        RawBuf::empty(),
        RawBuf::empty(),
        None,
    )
}

/// From this many bytes on (and more than two ranks), Bcast scatters and
/// rings instead of using the binomial tree.
const SCATTER_RING_BCAST_MIN: usize = 256 << 10;

pub fn bcast(m: &Mpi, c: &Comm, root: usize, buf: RawBuf) -> MpiResult<()> {
    let n = c.size();
    if n > 2 && buf.len() >= SCATTER_RING_BCAST_MIN {
        let s = schedule::bcast_scatter_ring(c.rank, n, root, buf.len());
        return sched_run(m, c, s, RawBuf::empty(), buf, None);
    }
    sched_run(
        m,
        c,
        schedule::bcast(c.rank, c.size(), root, buf.len()),
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

/// From this many bytes on, a commutative allreduce uses the ring.
const RING_ALLREDUCE_MIN: usize = 64 << 10;

pub fn reduce(
    m: &Mpi,
    c: &Comm,
    root: usize,
    send: RawBuf,
    recv: RawBuf,
    r: &Reduction,
) -> MpiResult<()> {
    let s = schedule::reduce(c.rank, c.size(), root, r.count, r.elem);
    sched_run(m, c, s, send, recv, Some(r))
}

pub fn allreduce(m: &Mpi, c: &Comm, send: RawBuf, recv: RawBuf, r: &Reduction) -> MpiResult<()> {
    let n = c.size();
    let ring = r.commutative && n > 2 && r.count >= n && r.count * r.elem >= RING_ALLREDUCE_MIN;
    let s = if ring {
        schedule::ring_allreduce(c.rank, n, r.count, r.elem)
    } else {
        schedule::allreduce(c.rank, n, r.count, r.elem)
    };
    sched_run(m, c, s, send, recv, Some(r))
}

pub fn scan(
    m: &Mpi,
    c: &Comm,
    send: RawBuf,
    recv: RawBuf,
    r: &Reduction,
    exclusive: bool,
) -> MpiResult<()> {
    let s = schedule::scan(c.rank, c.size(), r.count, r.elem, exclusive);
    sched_run(m, c, s, send, recv, Some(r))
}

pub fn gather(m: &Mpi, c: &Comm, root: usize, send: RawBuf, recv: RawBuf) -> MpiResult<()> {
    sched_run(
        m,
        c,
        schedule::gather(c.rank, c.size(), root, send.len()),
        send,
        recv,
        None,
    )
}

pub fn scatter(m: &Mpi, c: &Comm, root: usize, send: RawBuf, recv: RawBuf) -> MpiResult<()> {
    sched_run(
        m,
        c,
        schedule::scatter(c.rank, c.size(), root, recv.len()),
        send,
        recv,
        None,
    )
}

pub fn gatherv(
    m: &Mpi,
    c: &Comm,
    root: usize,
    send: RawBuf,
    recv: RawBuf,
    offs: &[usize],
    lens: &[usize],
) -> MpiResult<()> {
    sched_run(
        m,
        c,
        schedule::gatherv(c.rank, c.size(), root, offs, lens, send.len()),
        send,
        recv,
        None,
    )
}

pub fn scatterv(
    m: &Mpi,
    c: &Comm,
    root: usize,
    send: RawBuf,
    recv: RawBuf,
    offs: &[usize],
    lens: &[usize],
) -> MpiResult<()> {
    sched_run(
        m,
        c,
        schedule::scatterv(c.rank, c.size(), root, offs, lens, recv.len()),
        send,
        recv,
        None,
    )
}

pub fn allgatherv(
    m: &Mpi,
    c: &Comm,
    send: RawBuf,
    recv: RawBuf,
    offs: &[usize],
    lens: &[usize],
) -> MpiResult<()> {
    sched_run(
        m,
        c,
        schedule::allgatherv(c.rank, c.size(), offs, lens),
        send,
        recv,
        None,
    )
}

#[allow(clippy::too_many_arguments)]
pub fn alltoallv(
    m: &Mpi,
    c: &Comm,
    send: RawBuf,
    recv: RawBuf,
    soffs: &[usize],
    slens: &[usize],
    roffs: &[usize],
    rlens: &[usize],
) -> MpiResult<()> {
    sched_run(
        m,
        c,
        schedule::alltoallv(c.rank, c.size(), soffs, slens, roffs, rlens),
        send,
        recv,
        None,
    )
}

/// Agreement on a number: the maximum over the communicator (used for new
/// context ids).
pub fn max_u32(m: &Mpi, c: &Comm, v: u32) -> MpiResult<u32> {
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
        m,
        c,
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
