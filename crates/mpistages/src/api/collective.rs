//! Collectives on a communicator: the byte-level algorithms of `crate::coll`
//! run on the communicator's members and collective context, with their
//! errors as MPI errors. `src/abi` stages user buffers and datatypes onto
//! these.

use super::error::MpiResult;
use super::{Comm, Mpi};
use crate::coll;
use crate::transport::RawBuf;
pub use coll::{Reducer, Reduction};

pub fn barrier(m: &Mpi, c: &Comm) -> MpiResult<()> {
    Ok(coll::barrier(&c.team(m))?)
}

pub fn bcast(m: &Mpi, c: &Comm, root: usize, buf: RawBuf) -> MpiResult<()> {
    Ok(coll::bcast(&c.team(m), root, buf)?)
}

pub fn reduce(
    m: &Mpi,
    c: &Comm,
    root: usize,
    send: RawBuf,
    recv: RawBuf,
    r: &Reduction,
) -> MpiResult<()> {
    Ok(coll::reduce(&c.team(m), root, send, recv, r)?)
}

pub fn allreduce(m: &Mpi, c: &Comm, send: RawBuf, recv: RawBuf, r: &Reduction) -> MpiResult<()> {
    Ok(coll::allreduce(&c.team(m), send, recv, r)?)
}

pub fn scan(
    m: &Mpi,
    c: &Comm,
    send: RawBuf,
    recv: RawBuf,
    r: &Reduction,
    exclusive: bool,
) -> MpiResult<()> {
    Ok(coll::scan(&c.team(m), send, recv, r, exclusive)?)
}

pub fn gather(m: &Mpi, c: &Comm, root: usize, send: RawBuf, recv: RawBuf) -> MpiResult<()> {
    Ok(coll::gather(&c.team(m), root, send, recv)?)
}

pub fn scatter(m: &Mpi, c: &Comm, root: usize, send: RawBuf, recv: RawBuf) -> MpiResult<()> {
    Ok(coll::scatter(&c.team(m), root, send, recv)?)
}

/// Blocks of `lens[i]` bytes at `offs[i]` of `recv` (at the root) from
/// rank i.
pub fn gatherv(
    m: &Mpi,
    c: &Comm,
    root: usize,
    send: RawBuf,
    recv: RawBuf,
    offs: &[usize],
    lens: &[usize],
) -> MpiResult<()> {
    Ok(coll::gatherv(&c.team(m), root, send, recv, offs, lens)?)
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
    Ok(coll::scatterv(&c.team(m), root, send, recv, offs, lens)?)
}

pub fn allgatherv(
    m: &Mpi,
    c: &Comm,
    send: RawBuf,
    recv: RawBuf,
    offs: &[usize],
    lens: &[usize],
) -> MpiResult<()> {
    Ok(coll::allgatherv(&c.team(m), send, recv, offs, lens)?)
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
    Ok(coll::alltoallv(
        &c.team(m),
        send,
        recv,
        soffs,
        slens,
        roffs,
        rlens,
    )?)
}

/// Tags of a neighbourhood collective's messages, added to the thread's
/// collective tag: in a Cartesian topology a message sent to the positive
/// neighbour of a dimension and one sent to the negative neighbour must
/// stay apart when both are the same process (a periodic dimension of 1
/// or 2), so the receiver takes each from its side.
const TO_PLUS: i32 = 1 << 30;

/// The tag of the message to out-neighbour `k`, and the one expected from
/// in-neighbour `k`.
pub fn neighbor_tags(topo: &super::topo::Topology, k: usize) -> (i32, i32) {
    let base = coll::current_tag();
    match topo {
        super::topo::Topology::Cart { .. } if k % 2 == 1 => (base | TO_PLUS, base),
        super::topo::Topology::Cart { .. } => (base, base | TO_PLUS),
        _ => (base, base),
    }
}

/// One message of a neighbourhood collective: a peer's rank in the
/// communicator (`MPI_PROC_NULL` for none), its tag, and the bytes.
pub struct Part {
    pub rank: i32,
    pub tag: i32,
    pub buf: RawBuf,
}

/// Sends and receives the parts of a neighbourhood collective on the
/// communicator's collective context, and waits for all of them.
pub fn neighbor_exchange(m: &Mpi, c: &Comm, sends: &[Part], recvs: &[Part]) -> MpiResult<()> {
    use crate::progress::request::Bytes;
    use crate::progress::{Op, SendMode, Src};
    let mut ids = Vec::new();
    for p in recvs.iter().filter(|p| p.rank >= 0) {
        ids.push(m.engine.post(Op::Recv {
            src: Some(Src::Rank(p.rank as u32)),
            tag: Some(p.tag),
            context: c.coll_context(),
            layout: Box::new(Bytes(p.buf)),
        }));
    }
    for p in sends.iter().filter(|p| p.rank >= 0) {
        ids.push(m.engine.post(Op::Send {
            dest: Some(c.peer_world(p.rank as usize)),
            src: c.rank as u32,
            context: c.coll_context(),
            tag: p.tag,
            mode: SendMode::Standard,
            layout: Box::new(Bytes(p.buf)),
        }));
    }
    let mut first = None;
    for id in ids {
        let st = m.engine.wait(id);
        if let (None, Some(e)) = (&first, st.error) {
            first = Some(super::error::request_error(&e));
        }
    }
    first.map_or(Ok(()), Err)
}
