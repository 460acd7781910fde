//! The ULFM interface (`<mpi-ext.h>`, as Open MPI 5 names it): revoke a
//! communicator, agree on a flag among its live members, shrink it to
//! them, and acknowledge failures. Under `mpiexec --with-ft ulfm` a
//! failure is announced to every rank and the job goes on; the engine
//! fails what involves the dead process (`progress::ulfm`). Agreements
//! are made by mpiexec, which sees every contribution and every death
//! (`src/controller/agreement.rs`); a job without mpiexec (one process)
//! agrees with itself. Under the other modes the calls work too, as
//! Open MPI's do without fault tolerance (a failure ends or rolls back
//! the job before they matter).

use super::comm::reserve;
use super::consts::err;
use super::error::{fail, MpiError, MpiResult};
use super::group::Group;
use super::{Comm, Mpi};
use crate::control::proto::ToController;
use crate::progress::ulfm::Agreed;
use std::sync::Arc;

fn world_ranks(g: &Group) -> impl Iterator<Item = u32> + '_ {
    g.members.iter().map(|&w| w as u32)
}

/// Every member of `c` (both groups of an inter-communicator), in one
/// order for all: the two sides of an inter-communicator name the same
/// agreement.
fn members(c: &Comm) -> Vec<u32> {
    let mut v: Vec<u32> = world_ranks(&c.group).collect();
    if let Some(r) = &c.remote {
        v.extend(world_ranks(r));
        v.sort_unstable();
    }
    v
}

/// `MPIX_Comm_revoke`: what is pending or started on `c` fails with
/// MPIX_ERR_REVOKED here and, through mpiexec, at every other member.
pub fn revoke(m: &Mpi, c: &Comm) -> MpiResult<()> {
    m.engine.revoke(c.context);
    if let Some(client) = &m.client {
        let me = m.rank as u32;
        let others: Vec<u32> = members(c).into_iter().filter(|&w| w != me).collect();
        client
            .send(&ToController::Revoke {
                context: c.context,
                members: others,
            })
            .map_err(|_| gone())?;
    }
    Ok(())
}

pub fn is_revoked(m: &Mpi, c: &Comm) -> bool {
    m.engine.is_revoked(c.context)
}

fn gone() -> MpiError {
    MpiError::new(err::OTHER, "mpiexec is gone; the job is over")
}

/// An agreement under way: its answer is waited for with `finish`.
pub enum Pending {
    /// One process, without mpiexec: it agrees with itself.
    Alone(Agreed),
    Asked {
        context: u32,
        seq: u32,
    },
}

/// Starts an agreement among the live members of `c` on the AND of
/// `flag` (and the largest `proposal`), made by mpiexec. It takes its
/// number on `c` here, on the calling thread, so that the members number
/// their agreements alike even when one is non-blocking.
pub fn start(m: &Mpi, c: &Comm, flag: u32, proposal: u32) -> MpiResult<Pending> {
    let Some(client) = &m.client else {
        return Ok(Pending::Alone(Agreed {
            flag,
            failed: Vec::new(),
            unacked: false,
            proposal,
        }));
    };
    let failed = m.engine.failed_members(c.context);
    let acked = failed[..m.engine.acked_failures(c.context)].to_vec();
    let seq = m.engine.next_agreement(c.context);
    client
        .send(&ToController::Agree {
            context: c.context,
            seq,
            members: members(c),
            flag,
            acked,
            proposal,
        })
        .map_err(|_| gone())?;
    Ok(Pending::Asked {
        context: c.context,
        seq,
    })
}

/// Waits for the answer to an agreement.
pub fn finish(m: &Mpi, p: Pending) -> MpiResult<Agreed> {
    match p {
        Pending::Alone(a) => Ok(a),
        Pending::Asked { context, seq } => m.engine.wait_agreed(context, seq).ok_or_else(gone),
    }
}

fn agreement(m: &Mpi, c: &Comm, flag: u32, proposal: u32) -> MpiResult<Agreed> {
    let p = start(m, c, flag, proposal)?;
    finish(m, p)
}

/// `MPIX_Comm_agree`: `flag` becomes the AND of the live members' flags.
/// MPIX_ERR_PROC_FAILED (at every member alike) when a member died
/// without contributing and not every member had acknowledged it.
pub fn agree(m: &Mpi, c: &Comm, flag: &mut i32) -> MpiResult<()> {
    let a = agreement(m, c, *flag as u32, 0)?;
    agreed_flag(a, flag)
}

/// The flag of an answer, and the error every member raises alike.
pub fn agreed_flag(a: Agreed, flag: &mut i32) -> MpiResult<()> {
    *flag = a.flag as i32;
    if a.unacked {
        return fail(
            err::PROC_FAILED,
            format!(
                "world rank(s) {:?} failed before they contributed to the agreement, and not every member had acknowledged it",
                a.failed
            ),
        );
    }
    Ok(())
}

/// A barrier among the live members of `c` (`MPI_Finalize` under ULFM).
pub fn barrier(m: &Mpi, c: &Comm) -> MpiResult<()> {
    agreement(m, c, 0, 0).map(|_| ())
}

/// `MPIX_Comm_shrink`: a new communicator of the members of `c` that are
/// alive, in their order in `c`, agreed on by all of them (also on a
/// revoked communicator).
pub fn shrink(m: &Mpi, c: &Comm) -> MpiResult<Comm> {
    let p = start_shrink(m, c)?;
    shrunk(m, c, finish(m, p)?)
}

/// The agreement of a shrink.
pub fn start_shrink(m: &Mpi, c: &Comm) -> MpiResult<Pending> {
    if c.is_inter() {
        return fail(
            err::COMM,
            "MPIX_Comm_shrink of an inter-communicator is not supported by mpistages",
        );
    }
    let proposal = m.tables().max_context;
    start(m, c, u32::MAX, proposal)
}

/// The communicator of the live members `a` agreed on.
pub fn shrunk(m: &Mpi, c: &Comm, a: Agreed) -> MpiResult<Comm> {
    let survivors: Vec<usize> = c
        .group
        .members
        .iter()
        .copied()
        .filter(|&w| !a.failed.contains(&(w as u32)))
        .collect();
    let rank = survivors
        .iter()
        .position(|&w| w == m.rank)
        .ok_or_else(|| MpiError::new(err::INTERN, "this rank is not among the survivors"))?;
    let context = reserve(m, a.proposal);
    Ok(Comm::intra(
        context,
        Arc::new(Group { members: survivors }),
        rank,
    ))
}

/// `MPIX_Comm_get_failed` (and `failure_get_acked` with `acked_only`):
/// the failed members of `c` known here, in the order they failed.
pub fn failed_group(m: &Mpi, c: &Comm, acked_only: bool) -> Group {
    let mut failed = m.engine.failed_members(c.context);
    if acked_only {
        failed.truncate(m.engine.acked_failures(c.context));
    }
    Group {
        members: failed.into_iter().map(|w| w as usize).collect(),
    }
}

/// `MPIX_Comm_ack_failed`: acknowledges the first `n` failures of `c`;
/// returns how many are acknowledged.
pub fn ack(m: &Mpi, c: &Comm, n: usize) -> usize {
    m.engine.ack_failures(c.context, n)
}
