//! Communicator construction. New context ids are agreed with a max-reduce
//! over the parent, above every id any member uses, so they are free
//! everywhere they are used.

use super::consts::{err, UNDEFINED};
use super::error::{fail, MpiResult};
use super::group::Group;
use super::{Comm, Mpi};
use crate::coll;
use crate::transport::RawBuf;
use std::sync::Arc;

fn new_context(m: &Mpi, parent: &Comm) -> MpiResult<u32> {
    let mine = m.tables().max_context;
    let agreed = coll::max_u32(&parent.team(m), mine)?;
    // Reserve the pair at once so a concurrent creation cannot take it.
    let mut t = m.tables();
    t.max_context = t.max_context.max(agreed + 2);
    Ok(agreed.next_multiple_of(2))
}

fn register(m: &Mpi, parent_handle: i32, c: Comm) -> i32 {
    let mut t = m.tables();
    let eh = t.comms[parent_handle as usize]
        .as_ref()
        .map_or(super::consts::ERRORS_ARE_FATAL, |e| e.errhandler);
    t.add_comm(c, eh)
}

pub fn dup(m: &Mpi, h: i32) -> MpiResult<i32> {
    let parent = m.tables().comm(h)?;
    let context = new_context(m, &parent)?;
    Ok(register(
        m,
        h,
        Comm {
            context,
            group: parent.group.clone(),
            rank: parent.rank,
        },
    ))
}

/// `MPI_Comm_split`: everyone's (color, key) is gathered; each color's
/// members are ordered by key, then by rank in the parent.
pub fn split(m: &Mpi, h: i32, color: i32, key: i32) -> MpiResult<i32> {
    if color < 0 && color != UNDEFINED {
        return fail(
            err::ARG,
            format!("color {color} is negative (use MPI_UNDEFINED to opt out)"),
        );
    }
    let parent = m.tables().comm(h)?;
    let n = parent.size();
    let mut mine = [0u8; 8];
    mine[..4].copy_from_slice(&color.to_le_bytes());
    mine[4..].copy_from_slice(&key.to_le_bytes());
    let mut all = vec![0u8; 8 * n];
    let offs: Vec<usize> = (0..n).map(|r| 8 * r).collect();
    let lens = vec![8; n];
    // SAFETY: both buffers outlive the blocking collective.
    let (s, r) = unsafe {
        (
            RawBuf::new(mine.as_mut_ptr(), 8),
            RawBuf::new(all.as_mut_ptr(), all.len()),
        )
    };
    coll::allgatherv(&parent.team(m), s, r, &offs, &lens)?;
    let context = new_context(m, &parent)?;
    if color == UNDEFINED {
        return Ok(super::consts::COMM_NULL);
    }
    let entry = |r: usize| {
        let b = &all[8 * r..8 * r + 8];
        (
            i32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        )
    };
    let mut members: Vec<usize> = (0..n).filter(|&r| entry(r).0 == color).collect();
    members.sort_by_key(|&r| (entry(r).1, r));
    let rank = members
        .iter()
        .position(|&r| r == parent.rank)
        .expect("this rank has this color");
    let group = Group {
        members: members.iter().map(|&r| parent.world(r)).collect(),
    };
    Ok(register(
        m,
        h,
        Comm {
            context,
            group: Arc::new(group),
            rank,
        },
    ))
}

/// `MPI_Comm_create`: collective over the parent; members of `group` get
/// the new communicator, others `MPI_COMM_NULL`.
pub fn create(m: &Mpi, h: i32, g: i32) -> MpiResult<i32> {
    let (parent, group) = {
        let t = m.tables();
        (t.comm(h)?, t.group(g)?)
    };
    if let Some(w) = group
        .members
        .iter()
        .find(|w| parent.group.rank_of(**w).is_none())
    {
        return fail(
            err::GROUP,
            format!("process {w} of the group is not in the communicator"),
        );
    }
    let context = new_context(m, &parent)?;
    match group.rank_of(parent.world(parent.rank)) {
        None => Ok(super::consts::COMM_NULL),
        Some(rank) => Ok(register(
            m,
            h,
            Comm {
                context,
                group,
                rank,
            },
        )),
    }
}

pub fn free(m: &Mpi, h: i32) -> MpiResult<()> {
    if h == super::consts::COMM_WORLD || h == super::consts::COMM_SELF {
        return fail(
            err::COMM,
            "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed",
        );
    }
    let mut t = m.tables();
    t.comm(h)?;
    t.comms[h as usize] = None;
    Ok(())
}
