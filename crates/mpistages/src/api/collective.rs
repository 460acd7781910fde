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
