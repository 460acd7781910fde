//! Partitioned communication (MPI 4.0): `MPI_Psend_init` / `MPI_Precv_init`
//! make a persistent request of `partitions` × `count` elements; after
//! `MPI_Start` the sender marks partitions ready (`MPI_Pready`,
//! `_range`, `_list`) and the receiver asks which have arrived
//! (`MPI_Parrived`). Here the message goes as one: the send starts once
//! every partition is ready, and a partition has arrived when the whole
//! message has (which the standard allows: it promises no earlier
//! arrival). The request is an external one (`Op::External`) that the
//! message's own send or receive completes (`Engine::attach`), so
//! `MPI_Wait`, `MPI_Test` and `MPI_Request_free` treat it as any other.

use super::{array, mpi, mpi_fn, put, ret, typed};
use crate::api::consts::{err, COMM_WORLD};
use crate::api::error::{fail, MpiResult};
use crate::api::{p2p, Mpi, Op, ReqId, SendMode};
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

/// What a partitioned request moves, kept to make its operation at each
/// start (an operation is used once).
struct Partitioned {
    send: bool,
    buf: usize,
    count: i64,
    dtype: c_int,
    peer: c_int,
    tag: c_int,
    comm: c_int,
    /// The tag the message travels under (`wire_tag`).
    wire_tag: i32,
    /// Partitions marked ready since the last start (send side).
    ready: Vec<bool>,
}

/// Which pairs a partitioned request is one of: its side (send), its
/// communicator's context, its peer and its tag.
type PairKey = (bool, u32, c_int, c_int);

/// Partitioned requests made so far by key: the ordinal of the next one.
static ORDINALS: Mutex<Option<HashMap<PairKey, u32>>> = Mutex::new(None);

/// The tag of the `ordinal`-th partitioned message with `tag` between two
/// processes, on the collective context above every tag the collectives
/// use (below 2^30): exact for tags below 2^20 and the first 512 pairs of
/// one tag; beyond, a hash in a range of its own.
fn wire_tag(tag: c_int, ordinal: u32) -> i32 {
    let x = if (0..1 << 20).contains(&tag) && ordinal < 1 << 9 {
        ordinal << 20 | tag as u32
    } else {
        let h = (tag as u32 ^ ordinal.wrapping_mul(0x9e37_79b9)).wrapping_mul(0x85eb_ca6b);
        (1 << 29) | (h >> 3)
    };
    ((1 << 30) | x) as i32
}

static TABLE: Mutex<Option<HashMap<ReqId, Partitioned>>> = Mutex::new(None);

fn table() -> MutexGuard<'static, Option<HashMap<ReqId, Partitioned>>> {
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

impl Partitioned {
    /// The whole message's send or receive, on the communicator's
    /// collective context under the wire tag.
    fn op(&self, m: &Mpi) -> MpiResult<Op> {
        // SAFETY: the program keeps the buffer valid while the request
        // exists (the standard's rule for persistent requests).
        let tb = unsafe { typed(m, self.buf as *const c_void, self.count, self.dtype)? };
        let op = if self.send {
            p2p::send_op(m, tb, self.peer, self.tag, self.comm, SendMode::Standard)?
        } else {
            p2p::recv_op(m, tb, self.peer, self.tag, self.comm)?
        };
        let context = m.tables().comm_ref(self.comm)?.coll_context();
        let tag = self.wire_tag;
        Ok(match op {
            Op::Send {
                dest,
                src,
                mode,
                layout,
                ..
            } => Op::Send {
                dest,
                src,
                context,
                tag,
                mode,
                layout,
            },
            Op::Recv {
                src: Some(src),
                layout,
                ..
            } => Op::Recv {
                src: Some(src),
                tag: Some(tag),
                context,
                layout,
            },
            other => other,
        })
    }

    /// Starts the message as the request's part, which reports the
    /// program's tag (not the wire's; none for MPI_PROC_NULL).
    fn attach(&self, m: &Mpi, id: ReqId) -> MpiResult<()> {
        let op = self.op(m)?;
        let shown = (self.peer != crate::api::consts::PROC_NULL).then_some(self.tag);
        m.engine.attach(id, op, shown);
        Ok(())
    }
}

/// `MPI_Psend_init` and `MPI_Precv_init`.
#[allow(clippy::too_many_arguments)]
fn init(
    send: bool,
    buf: *const c_void,
    partitions: c_int,
    count: i64,
    dtype: c_int,
    peer: c_int,
    tag: c_int,
    comm: c_int,
    info: c_int,
    req: *mut c_int,
) -> MpiResult<()> {
    let m = mpi()?;
    if partitions < 1 {
        return fail(err::ARG, format!("{partitions} partitions: at least 1"));
    }
    let total = count
        .checked_mul(i64::from(partitions))
        .filter(|&t| count >= 0 && t <= i64::from(c_int::MAX) * 1024)
        .ok_or_else(|| {
            crate::api::error::MpiError::new(
                err::COUNT,
                format!("{partitions} partitions of {count}"),
            )
        })?;
    crate::api::info::get_or_empty(info)?;
    let mut p = Partitioned {
        send,
        buf: buf as usize,
        count: total,
        dtype,
        peer,
        tag,
        comm,
        wire_tag: 0,
        ready: vec![false; partitions as usize],
    };
    if !send && (peer == crate::api::consts::ANY_SOURCE || tag == crate::api::consts::ANY_TAG) {
        return fail(
            err::ARG,
            "a partitioned receive names its source and tag (no wildcards)",
        );
    }
    // Every argument is checked now, as MPI_Send_init's are.
    p.op(m)?;
    let context = m.tables().comm_ref(comm)?.context;
    let mut o = ORDINALS.lock().unwrap_or_else(|p| p.into_inner());
    let next = o
        .get_or_insert_with(HashMap::new)
        .entry((send, context, peer, tag))
        .or_insert(0);
    p.wire_tag = wire_tag(tag, *next);
    *next += 1;
    drop(o);
    let id = p2p::create_persistent(m, crate::api::Op::External, comm);
    table().get_or_insert_with(HashMap::new).insert(id, p);
    // SAFETY: caller's out-pointer.
    unsafe { put(req, super::request::handle(id)) }
}

mpi_fn!(fn MPI_Psend_init / PMPI_Psend_init(buf: *const c_void, partitions: c_int, count: i64, dt: c_int, dest: c_int,
        tag: c_int, comm: c_int, info: c_int, req: *mut c_int) {
    ret("MPI_Psend_init", comm, init(true, buf, partitions, count, dt, dest, tag, comm, info, req))
});

mpi_fn!(fn MPI_Precv_init / PMPI_Precv_init(buf: *mut c_void, partitions: c_int, count: i64, dt: c_int, source: c_int,
        tag: c_int, comm: c_int, info: c_int, req: *mut c_int) {
    ret("MPI_Precv_init", comm, init(false, buf, partitions, count, dt, source, tag, comm, info, req))
});

/// `MPI_Start` of a request: `None` if it is not a partitioned one, else
/// whether it was inactive and is now started (a receive posted at once;
/// a send when its partitions are ready).
pub fn start(m: &Mpi, id: ReqId) -> Option<MpiResult<bool>> {
    let mut t = table();
    let p = t.as_mut()?.get_mut(&id)?;
    if !m.engine.start(id) {
        return Some(Ok(false));
    }
    p.ready.iter_mut().for_each(|r| *r = false);
    if p.send {
        return Some(Ok(true));
    }
    Some(p.attach(m, id).map(|()| true))
}

/// The request is freed: its entry goes.
pub fn forget(id: ReqId) {
    if let Some(t) = table().as_mut() {
        t.remove(&id);
    }
}

/// Marks `parts` of request `h` ready; the send starts with the last.
fn ready(name: &str, h: c_int, parts: impl IntoIterator<Item = c_int>) -> c_int {
    let r = (|| -> MpiResult<()> {
        let m = mpi()?;
        let id = super::request::id_of(m, h)?;
        let mut t = table();
        let Some(p) = t.as_mut().and_then(|t| t.get_mut(&id)).filter(|p| p.send) else {
            return fail(
                err::REQUEST,
                format!("request {h} is not a partitioned send"),
            );
        };
        if matches!(m.engine.state(id), crate::api::ReqState::Inactive) {
            return fail(
                err::REQUEST,
                format!("request {h} is not started (MPI_Start first)"),
            );
        }
        for k in parts {
            let slot = usize::try_from(k).ok().and_then(|k| p.ready.get_mut(k));
            let Some(slot) = slot else {
                return fail(err::ARG, format!("partition {k} of {}", p.ready.len()));
            };
            *slot = true;
        }
        if p.ready.iter().all(|&r| r) {
            p.attach(m, id)?;
            m.engine.background();
        }
        Ok(())
    })();
    ret(name, COMM_WORLD, r)
}

mpi_fn!(fn MPI_Pready / PMPI_Pready(partition: c_int, req: c_int) {
    ready("MPI_Pready", req, [partition])
});

mpi_fn!(fn MPI_Pready_range / PMPI_Pready_range(low: c_int, high: c_int, req: c_int) {
    if low > high {
        return ret("MPI_Pready_range", COMM_WORLD, fail(err::ARG, format!("partitions {low} to {high}")));
    }
    ready("MPI_Pready_range", req, low..=high)
});

mpi_fn!(fn MPI_Pready_list / PMPI_Pready_list(n: c_int, partitions: *const c_int, req: c_int) {
    // SAFETY: caller's array of n partitions.
    match super::count(n).and_then(|n| unsafe { array(partitions, n) }) {
        Ok(list) => ready("MPI_Pready_list", req, list.iter().copied()),
        Err(e) => ret("MPI_Pready_list", COMM_WORLD, Err(e)),
    }
});

mpi_fn!(fn MPI_Parrived / PMPI_Parrived(req: c_int, partition: c_int, flag: *mut c_int) {
    let r = mpi().and_then(|m| {
        let id = super::request::id_of(m, req)?;
        let parts = match table().as_ref().and_then(|t| t.get(&id)) {
            Some(p) if !p.send => p.ready.len(),
            _ => return fail(err::REQUEST, format!("request {req} is not a partitioned receive")),
        };
        if usize::try_from(partition).map_or(true, |k| k >= parts) {
            return fail(err::ARG, format!("partition {partition} of {parts}"));
        }
        m.engine.poke();
        let arrived = match m.engine.state(id) {
            crate::api::ReqState::Inactive => true,
            _ => m.engine.peek(id).is_some(),
        };
        // SAFETY: caller's out-pointer.
        unsafe { put(flag, c_int::from(arrived)) }
    });
    ret("MPI_Parrived", COMM_WORLD, r)
});
