//! Collectives on inter-communicators, on bytes: each group works among
//! itself (a team of the local group), and the groups' rank-0 processes
//! (the leaders) move the data between the groups. Roots follow the
//! standard: in the root's group the root passes `MPI_ROOT` and the others
//! `MPI_PROC_NULL`; the other group passes the root's rank.
//!
//! Tags on the inter-communicator's collective context, each based on the
//! thread's collective tag: the union of both groups uses the tag itself
//! (`comm::union_team`), a group among itself sets `LOCAL`, and the
//! leaders' messages set `BETWEEN`. The groups are disjoint, so the two
//! groups' local teams never meet.

use super::collective::{neighbor_exchange, Part};
use super::consts::{err, PROC_NULL, ROOT};
use super::error::{fail, MpiResult};
use super::{Comm, Mpi};
use crate::coll::{self, Reduction, Team};
use crate::transport::RawBuf;

const LOCAL: i32 = 1 << 27;
const BETWEEN: i32 = 1 << 26;

/// What this process is in a rooted collective.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    /// The root (`MPI_ROOT`).
    Root,
    /// In the root's group, not the root (`MPI_PROC_NULL`).
    Idle,
    /// In the other group; the root is this rank of the remote group.
    Other(usize),
}

pub fn role(c: &Comm, root: i32) -> MpiResult<Role> {
    match root {
        ROOT => Ok(Role::Root),
        PROC_NULL => Ok(Role::Idle),
        r if r >= 0 && (r as usize) < c.peers().size() => Ok(Role::Other(r as usize)),
        r => fail(
            err::ROOT,
            format!("root {r} is not MPI_ROOT, MPI_PROC_NULL or a rank of the remote group"),
        ),
    }
}

fn local_team<'a>(m: &'a Mpi, c: &'a Comm) -> Team<'a> {
    Team {
        engine: &m.engine,
        members: &c.group.members,
        rank: c.rank,
        context: c.coll_context(),
        tag: coll::current_tag() | LOCAL,
        wire: None,
    }
}

fn between() -> i32 {
    coll::current_tag() | BETWEEN
}

/// Sends `send` to remote rank `to` and/or receives `recv` from remote
/// rank `from` (`None` for no such half).
fn swap(
    m: &Mpi,
    c: &Comm,
    to: Option<(usize, RawBuf)>,
    from: Option<(usize, RawBuf)>,
) -> MpiResult<()> {
    let part = |(rank, buf): (usize, RawBuf)| Part {
        rank: rank as i32,
        tag: between(),
        buf,
    };
    let sends: Vec<Part> = to.into_iter().map(part).collect();
    let recvs: Vec<Part> = from.into_iter().map(part).collect();
    neighbor_exchange(m, c, &sends, &recvs)
}

pub fn barrier(m: &Mpi, c: &Comm) -> MpiResult<()> {
    let u = super::comm::union_team(m, c);
    Ok(coll::barrier(&u.as_team(m))?)
}

pub fn bcast(m: &Mpi, c: &Comm, role: Role, buf: RawBuf) -> MpiResult<()> {
    match role {
        Role::Root => swap(m, c, Some((0, buf)), None),
        Role::Idle => Ok(()),
        Role::Other(root) => {
            if c.rank == 0 {
                swap(m, c, None, Some((root, buf)))?;
            }
            Ok(coll::bcast(&local_team(m, c), 0, buf)?)
        }
    }
}

/// Gathers this group's blocks (of any lengths) at its leader, in rank
/// order; returns the concatenation there (empty elsewhere).
fn gather_local(m: &Mpi, c: &Comm, send: RawBuf) -> MpiResult<Vec<u8>> {
    let team = local_team(m, c);
    let n = c.size();
    let mut mine = (send.len() as u64).to_le_bytes();
    let leader = c.rank == 0;
    let mut lens8 = vec![0u8; if leader { 8 * n } else { 0 }];
    // SAFETY: the buffers outlive the blocking collectives.
    let (lb, ab) = unsafe {
        (
            RawBuf::new(mine.as_mut_ptr(), 8),
            RawBuf::new(lens8.as_mut_ptr(), lens8.len()),
        )
    };
    coll::gather(&team, 0, lb, ab)?;
    let lens: Vec<usize> = lens8
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8")) as usize)
        .collect();
    let offs = offsets(&lens);
    let mut all = vec![0u8; lens.iter().sum()];
    // SAFETY: as above.
    let out = unsafe { RawBuf::new(all.as_mut_ptr(), all.len()) };
    coll::gatherv(&team, 0, send, out, &offs, &lens)?;
    Ok(all)
}

pub fn offsets(lens: &[usize]) -> Vec<usize> {
    lens.iter()
        .scan(0, |a, &l| {
            let o = *a;
            *a += l;
            Some(o)
        })
        .collect()
}

/// Gather(v): the root receives the other group's blocks (`recv`, packed
/// in rank order, as long as the root's counts say).
pub fn gather(m: &Mpi, c: &Comm, role: Role, send: RawBuf, recv: RawBuf) -> MpiResult<()> {
    match role {
        Role::Root => swap(m, c, None, Some((0, recv))),
        Role::Idle => Ok(()),
        Role::Other(root) => {
            let mut all = gather_local(m, c, send)?;
            if c.rank == 0 {
                // SAFETY: `all` outlives the blocking exchange.
                let b = unsafe { RawBuf::new(all.as_mut_ptr(), all.len()) };
                swap(m, c, Some((root, b)), None)?;
            }
            Ok(())
        }
    }
}

/// Scatter(v): the root sends the other group's blocks (`send`, packed in
/// rank order), and tells their lengths first.
pub fn scatter(
    m: &Mpi,
    c: &Comm,
    role: Role,
    send: RawBuf,
    lens: &[usize],
    recv: RawBuf,
) -> MpiResult<()> {
    match role {
        Role::Root => {
            let mut l8: Vec<u8> = lens
                .iter()
                .flat_map(|&l| (l as u64).to_le_bytes())
                .collect();
            // SAFETY: `l8` outlives the blocking exchange.
            let lb = unsafe { RawBuf::new(l8.as_mut_ptr(), l8.len()) };
            swap(m, c, Some((0, lb)), None)?;
            swap(m, c, Some((0, send)), None)
        }
        Role::Idle => Ok(()),
        Role::Other(root) => {
            let n = c.size();
            let mut l8 = vec![0u8; 8 * n];
            let mut all = Vec::new();
            let mut lens = Vec::new();
            if c.rank == 0 {
                // SAFETY: `l8` outlives the blocking exchange.
                let lb = unsafe { RawBuf::new(l8.as_mut_ptr(), l8.len()) };
                swap(m, c, None, Some((root, lb)))?;
                lens = l8
                    .chunks_exact(8)
                    .map(|b| u64::from_le_bytes(b.try_into().expect("8")) as usize)
                    .collect();
                all.resize(lens.iter().sum(), 0u8);
                // SAFETY: `all` outlives the blocking exchange.
                let ab = unsafe { RawBuf::new(all.as_mut_ptr(), all.len()) };
                swap(m, c, None, Some((root, ab)))?;
            }
            // SAFETY: `all` outlives the blocking collective.
            let ab = unsafe { RawBuf::new(all.as_mut_ptr(), all.len()) };
            let offs = offsets(&lens);
            Ok(coll::scatterv(
                &local_team(m, c),
                0,
                ab,
                recv,
                &offs,
                &lens,
            )?)
        }
    }
}

/// Allgather(v): `recv` receives the remote group's blocks, packed in rank
/// order (`total` bytes, known from this process's counts).
pub fn allgather(m: &Mpi, c: &Comm, send: RawBuf, recv: RawBuf) -> MpiResult<()> {
    let mut mine = gather_local(m, c, send)?;
    if c.rank == 0 {
        // SAFETY: `mine` outlives the blocking exchange.
        let b = unsafe { RawBuf::new(mine.as_mut_ptr(), mine.len()) };
        swap(m, c, Some((0, b)), Some((0, recv)))?;
    }
    Ok(coll::bcast(&local_team(m, c), 0, recv)?)
}

/// Allreduce: every process gets the reduction of the other group's data.
pub fn allreduce(m: &Mpi, c: &Comm, send: RawBuf, recv: RawBuf, r: &Reduction) -> MpiResult<()> {
    let mut mine = vec![0u8; if c.rank == 0 { send.len() } else { 0 }];
    // SAFETY: `mine` outlives the blocking collectives.
    let mb = unsafe { RawBuf::new(mine.as_mut_ptr(), mine.len()) };
    coll::reduce(&local_team(m, c), 0, send, mb, r)?;
    if c.rank == 0 {
        swap(m, c, Some((0, mb)), Some((0, recv)))?;
    }
    Ok(coll::bcast(&local_team(m, c), 0, recv)?)
}

/// Reduce: the root gets the reduction of the other group's data.
pub fn reduce(
    m: &Mpi,
    c: &Comm,
    role: Role,
    send: RawBuf,
    recv: RawBuf,
    r: &Reduction,
) -> MpiResult<()> {
    match role {
        Role::Root => swap(m, c, None, Some((0, recv))),
        Role::Idle => Ok(()),
        Role::Other(root) => {
            let mut mine = vec![0u8; if c.rank == 0 { send.len() } else { 0 }];
            // SAFETY: `mine` outlives the blocking calls.
            let mb = unsafe { RawBuf::new(mine.as_mut_ptr(), mine.len()) };
            coll::reduce(&local_team(m, c), 0, send, mb, r)?;
            if c.rank == 0 {
                swap(m, c, Some((root, mb)), None)?;
            }
            Ok(())
        }
    }
}

/// Reduce-scatter: the reduction of the other group's data, scattered in
/// this group by `lens` (bytes per local rank).
pub fn reduce_scatter(
    m: &Mpi,
    c: &Comm,
    send: RawBuf,
    recv: RawBuf,
    lens: &[usize],
    r: &Reduction,
) -> MpiResult<()> {
    let total = send.len();
    let mut mine = vec![0u8; if c.rank == 0 { total } else { 0 }];
    let mut theirs = vec![0u8; if c.rank == 0 { total } else { 0 }];
    // SAFETY: both vectors outlive the blocking calls.
    let (mb, tb) = unsafe {
        (
            RawBuf::new(mine.as_mut_ptr(), mine.len()),
            RawBuf::new(theirs.as_mut_ptr(), theirs.len()),
        )
    };
    coll::reduce(&local_team(m, c), 0, send, mb, r)?;
    if c.rank == 0 {
        swap(m, c, Some((0, mb)), Some((0, tb)))?;
    }
    let (offs, lens) = if c.rank == 0 {
        (offsets(lens), lens.to_vec())
    } else {
        (Vec::new(), Vec::new())
    };
    Ok(coll::scatterv(
        &local_team(m, c),
        0,
        tb,
        recv,
        &offs,
        &lens,
    )?)
}

/// All-to-all: block j of `sends` to remote rank j, block j of `recvs`
/// from it.
pub fn alltoall(m: &Mpi, c: &Comm, sends: &[RawBuf], recvs: &[RawBuf]) -> MpiResult<()> {
    let part = |(j, b): (usize, &RawBuf)| Part {
        rank: j as i32,
        tag: between(),
        buf: *b,
    };
    let s: Vec<Part> = sends.iter().enumerate().map(part).collect();
    let r: Vec<Part> = recvs.iter().enumerate().map(part).collect();
    neighbor_exchange(m, c, &s, &r)
}
