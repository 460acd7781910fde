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
use crate::api::{p2p, Mpi, ReqId, SendMode};
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
    /// Partitions marked ready since the last start (send side).
    ready: Vec<bool>,
}

static TABLE: Mutex<Option<HashMap<ReqId, Partitioned>>> = Mutex::new(None);

fn table() -> MutexGuard<'static, Option<HashMap<ReqId, Partitioned>>> {
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

impl Partitioned {
    /// The whole message's send or receive.
    fn op(&self, m: &Mpi) -> MpiResult<crate::api::Op> {
        // SAFETY: the program keeps the buffer valid while the request
        // exists (the standard's rule for persistent requests).
        let tb = unsafe { typed(m, self.buf as *const c_void, self.count, self.dtype)? };
        if self.send {
            p2p::send_op(m, tb, self.peer, self.tag, self.comm, SendMode::Standard)
        } else {
            p2p::recv_op(m, tb, self.peer, self.tag, self.comm)
        }
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
    let p = Partitioned {
        send,
        buf: buf as usize,
        count: total,
        dtype,
        peer,
        tag,
        comm,
        ready: vec![false; partitions as usize],
    };
    // Every argument is checked now, as MPI_Send_init's are.
    p.op(m)?;
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
    Some(p.op(m).map(|op| {
        m.engine.attach(id, op);
        true
    }))
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
            let op = p.op(m)?;
            m.engine.attach(id, op);
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
