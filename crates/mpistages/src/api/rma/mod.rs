//! One-sided communication (`MPI_Win_*`, `MPI_Put` ...). Every process
//! runs an agent (`agent.rs`) that does what origins ask of its windows'
//! memory (`target.rs`), so a target makes progress without calling MPI.
//! An origin sends one message per operation to the target's agent
//! (`wire.rs`); operations that return data (get, the fetching
//! accumulates, compare-and-swap) first post the receive of the reply.
//! An origin's operations to a target are complete once a flush's answer
//! comes back: the agent does each origin's requests in order, so the
//! answer means all earlier ones are done. Fence, post/start/complete/
//! wait, lock/unlock and the flushes are built from that.
//!
//! When every member of a window is on the origin's host, the origin does
//! more itself: locks are atomics in a page every member maps
//! (`hostlock.rs`); puts and gets are copies, through the mapping of a
//! window in shared memory (`_allocate_shared`, `_allocate`) or by
//! cross-memory copies into the target process (`_create`, once a read of
//! a value each member published checks that its PID names it).
//! Accumulates go to the agent, which makes them atomic, but under an
//! exclusive lock, when the origin combines itself; accumulates of 4- and
//! 8-byte elements are compare-and-swaps (`atomic.rs`), done by the
//! origin itself in a window in shared memory.
//!
//! Files of this module: `win.rs` (objects and table), `lock.rs` (the
//! passive-target lock at the agent, a pure state machine), `hostlock.rs`
//! (the lock in shared memory and the gate of cross-memory writes),
//! `wire.rs` (requests), `target.rs` (requests applied to memory),
//! `agent.rs` (the thread), `gate.rs` (what a failure's halt closes),
//! `shm.rs` (the segments of shared windows and of the lock page), `ops.rs`
//! (put, get, the accumulates) and `sync.rs` (flushes, fence, locks,
//! post/start/complete/wait).

pub mod agent;
pub mod atomic;
pub mod gate;
pub mod hostlock;
pub mod lock;
mod ops;
pub mod shm;
mod sync;
pub mod target;
pub mod win;
pub mod wire;

pub use ops::{accumulate, compare_and_swap, get, get_accumulate, put};
use sync::flush_all;
pub use sync::{
    complete, fence, flush, lock, lock_all, post, ranks_of, start, unlock, unlock_all, wait,
};

use super::comm;
use super::consts::{err, op};
use super::datatype::Datatype;
use super::error::{fail, request_error, MpiError, MpiResult};
use super::info::Info;
use super::usermem::TypedBuf;
use super::Mpi;
use crate::coll;
use crate::progress::request::{Data, Owned};
use crate::progress::{Layout, Op, ReqId, SendMode, Src, Status};
use crate::transport::RawBuf;
use std::sync::{Arc, Mutex};
use win::{Pending, Win};
use wire::{Place, Request};

/// `MPI_LOCK_EXCLUSIVE`, `MPI_LOCK_SHARED` (MPICH's values).
pub const LOCK_EXCLUSIVE: i32 = 234;
pub const LOCK_SHARED: i32 = 235;

/// `MPI_MODE_*` assertions (MPICH's values).
pub mod assert {
    pub const NOCHECK: i32 = 1024;
    pub const NOSTORE: i32 = 2048;
    pub const NOPUT: i32 = 4096;
    pub const NOPRECEDE: i32 = 8192;
    pub const NOSUCCEED: i32 = 16384;
    pub const ALL: i32 = NOCHECK | NOSTORE | NOPUT | NOPRECEDE | NOSUCCEED;
}

fn check_assert(a: i32) -> MpiResult<()> {
    if a & !assert::ALL != 0 {
        return fail(
            err::ASSERT,
            format!("assertion {a:#x} has bits that are no MPI_MODE_*"),
        );
    }
    Ok(())
}

/// How a window's memory comes.
pub enum Memory {
    /// The program's (`MPI_Win_create`).
    Given { base: usize, size: usize },
    /// Ours, `size` bytes (`MPI_Win_allocate`).
    Allocate { size: usize },
    /// Attached later (`MPI_Win_create_dynamic`).
    Dynamic,
    /// `size` bytes of one segment of shared memory that every member
    /// maps (`MPI_Win_allocate_shared`).
    Shared { size: usize },
}

/// Whether origins on one host may reach windows themselves (shared
/// segments, cross-memory copies, locks in shared memory);
/// `MPISTAGES_RMA_DIRECT=0` sends everything through the agents, as
/// between hosts (tests use it to cover that path on one machine).
fn direct_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var("MPISTAGES_RMA_DIRECT").map_or(true, |v| v != "0"))
}

/// Bytes of each member's record at creation: size, displacement unit,
/// base, PID, the nonce's address and value.
const RECORD: usize = 48;

/// Whether a cross-memory read of process `pid` at `addr` finds `value`:
/// the kernel allows the copies and the PID names that member (not
/// another process of another PID namespace).
fn reaches(pid: i32, addr: u64, value: u64) -> bool {
    let mut got = [0u8; 8];
    crate::sys::cma::read_from(pid, addr, &mut got).ok() == Some(8)
        && u64::from_le_bytes(got) == value
}

/// Creates a window over communicator `h` (collective); returns its
/// handle and, for `Allocate`, the base address.
pub fn create(
    m: &'static Mpi,
    h: i32,
    memory: Memory,
    disp_unit: i64,
    info: Info,
) -> MpiResult<(i32, usize)> {
    let disp_unit = usize::try_from(disp_unit)
        .ok()
        .filter(|&d| d > 0)
        .ok_or_else(|| {
            MpiError::new(
                err::DISP,
                format!("displacement unit {disp_unit} is not positive"),
            )
        })?;
    let comm = comm::private_dup(m, h)?;
    if comm.is_inter() {
        return fail(
            err::COMM,
            "a window cannot be created on an inter-communicator",
        );
    }
    let team = comm.team(m);
    let size = match memory {
        Memory::Given { size, .. } | Memory::Allocate { size } | Memory::Shared { size } => size,
        Memory::Dynamic => 0,
    };
    let given_base = match memory {
        Memory::Given { base, .. } => base,
        _ => 0,
    };
    // A value only this process knows, at an address the others read by
    // cross-memory copy to check that the PID names this process (kept
    // until creation has agreed, after everyone checked).
    let nonce = Box::new({
        use std::hash::{BuildHasher, Hasher};
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    });
    let mut mine = Vec::with_capacity(RECORD);
    for v in [
        size as u64,
        disp_unit as u64,
        given_base as u64,
        std::process::id() as u64,
        &*nonce as *const u64 as u64,
        *nonce,
    ] {
        mine.extend_from_slice(&v.to_le_bytes());
    }
    let all = comm::allgather_fixed(&team, &mine)?;
    let u = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8")) as usize;
    let peers: Vec<(usize, usize)> = all
        .chunks_exact(RECORD)
        .map(|b| (u(b, 0), u(b, 8)))
        .collect();
    let hosts = comm::host_indices(&team)?;
    let one_host = hosts.iter().all(|&h| h == hosts[0]) && direct_allowed();
    let mut shared = None;
    let (base, owned, flavor) = match memory {
        Memory::Given { base, .. } => (base, None, win::flavor::CREATE),
        Memory::Allocate { size } if one_host => {
            // On one host the memory is a shared segment, as for
            // MPI_Win_allocate_shared: puts and gets are copies.
            let seg = shm::map(&team, &hosts, &peers)?;
            let base = if size == 0 { 0 } else { seg.bases[comm.rank] };
            shared = Some(seg);
            (base, None, win::flavor::ALLOCATE)
        }
        Memory::Allocate { size } => {
            let mut v = vec![0u128; size.div_ceil(16)];
            let base = if size == 0 {
                0
            } else {
                v.as_mut_ptr() as usize
            };
            (base, Some(v), win::flavor::ALLOCATE)
        }
        Memory::Dynamic => (0, None, win::flavor::DYNAMIC),
        Memory::Shared { .. } => {
            let mut seg = shm::map(&team, &hosts, &peers)?;
            // An empty share has no address (NULL), as MPICH gives it.
            for (b, p) in seg.bases.iter_mut().zip(&peers) {
                if p.0 == 0 {
                    *b = 0;
                }
            }
            let base = seg.bases[comm.rank];
            shared = Some(seg);
            (base, None, win::flavor::SHARED)
        }
    };
    let on_host = if one_host {
        let n = comm.size();
        let seg = shm::map(&team, &hosts, &vec![(hostlock::slot_bytes(n), 1); n])?;
        let map = seg.map.expect("slots are not empty");
        // The program's memory of other processes is reached by
        // cross-memory copies (their process, their base).
        let cma = (flavor == win::flavor::CREATE)
            .then(|| {
                let members: Vec<_> = all.chunks_exact(RECORD).collect();
                members
                    .iter()
                    .all(|b| reaches(u(b, 24) as i32, u(b, 32) as u64, u(b, 40) as u64))
                    .then(|| {
                        members
                            .iter()
                            .map(|b| (u(b, 24) as i32, u(b, 16)))
                            .collect()
                    })
            })
            .flatten();
        Some(win::OnHost {
            locks: Arc::new(hostlock::HostLocks::new(map, n)),
            cma,
        })
    } else {
        None
    };
    let target = Arc::new(if flavor == win::flavor::DYNAMIC {
        target::Target {
            memory: target::Memory::Dynamic(Mutex::new(Vec::new())),
            disp_unit: 1,
            atomic: false,
        }
    } else {
        win::fixed(base, size, disp_unit, shared.is_some())
    });
    let unit = if flavor == win::flavor::DYNAMIC {
        1
    } else {
        disp_unit
    };
    let mut w = Win::new(
        comm.clone(),
        target.clone(),
        flavor,
        base,
        size,
        unit,
        peers,
        win::initial_info(&info),
    );
    w.owned = owned;
    if let Some(h) = on_host.as_ref().filter(|h| h.cma.is_some()) {
        let pids = all.chunks_exact(RECORD).map(|b| u(b, 24) as i32).collect();
        gate::install(m);
        gate::register(comm.context, h.locks.clone(), comm.rank, pids);
    }
    w.on_host = on_host;
    if let Some(seg) = shared {
        w.shared_bases = seg.bases;
        w.mapping = seg.map;
    }
    let id = comm.context;
    let exposed = agent::expose(m, id, comm.clone(), target).map_err(|e| {
        MpiError::new(
            err::NO_MEM,
            format!("no thread for the windows' agent: {e}"),
        )
    });
    // Nobody sends to the window before every member's agent knows it.
    if let Err(e) = super::file::agree(&team, &exposed) {
        agent::withdraw(id);
        gate::forget(id);
        return Err(e);
    }
    Ok((win::add(w), base))
}

/// `MPI_Win_shared_query`: a member's size, displacement unit and base
/// address in this process (`MPI_PROC_NULL`: the first member with
/// memory).
pub fn shared_query(w: &Win, rank: i32) -> MpiResult<(usize, usize, usize)> {
    if w.flavor != win::flavor::SHARED {
        return fail(
            err::RMA_FLAVOR,
            "MPI_Win_shared_query needs a window of MPI_Win_allocate_shared",
        );
    }
    let r = match w.target_rank(rank)? {
        Some(r) => r,
        None => match w.peers.iter().position(|p| p.0 > 0) {
            Some(r) => r,
            None => return Ok((0, w.peers[0].1, 0)),
        },
    };
    Ok((w.peers[r].0, w.peers[r].1, w.shared_bases[r]))
}

/// `MPI_Win_free` (collective): every member's operations complete, the
/// agents end, the memory we allocated goes.
pub fn free(m: &Mpi, h: i32) -> MpiResult<()> {
    let w = win::get(h)?;
    let mut w = win::lock(&w);
    if !w.locked.is_empty() || w.access.is_some() || w.exposure.is_some() {
        return fail(
            err::RMA_SYNC,
            "the window is freed inside an access or exposure epoch",
        );
    }
    // Released here even when a member has failed (ULFM): the program
    // gets the error and a window it can no longer use is gone.
    let flushed = flush_all(m, &mut w);
    let synced = coll::barrier(&w.comm.team(m)).map_err(MpiError::from);
    // Every member has flushed what it sent here: nothing more comes.
    agent::withdraw(w.comm.context);
    gate::forget(w.comm.context);
    w.owned = None;
    w.mapping = None;
    drop(w);
    win::remove(h);
    flushed.and(synced)
}

/// Releases every window of this process without talking to the other
/// members: a rollback, while the engine is halted, which fails every
/// wait of the agent, so it ends; then the memory we allocated goes.
pub fn release_all() {
    agent::stop();
    gate::forget_all();
    for w in win::take_all() {
        let mut w = win::lock(&w);
        w.owned = None;
        w.mapping = None;
    }
}

/// `MPI_Win_attach`: `size` bytes at `base` become reachable in a dynamic
/// window.
pub fn attach(w: &Win, base: usize, size: usize) -> MpiResult<()> {
    let target::Memory::Dynamic(regions) = &w.target.memory else {
        return fail(
            err::RMA_FLAVOR,
            "memory is attached only to a dynamic window",
        );
    };
    if base.checked_add(size).is_none() {
        return fail(err::RMA_ATTACH, "the region wraps around the address space");
    }
    let mut r = regions.lock().unwrap_or_else(|p| p.into_inner());
    if r.iter().any(|&(b, l)| base < b + l && b < base + size) {
        return fail(err::RMA_ATTACH, "the region overlaps one attached already");
    }
    r.push((base, size));
    Ok(())
}

pub fn detach(w: &Win, base: usize) -> MpiResult<()> {
    let target::Memory::Dynamic(regions) = &w.target.memory else {
        return fail(
            err::RMA_FLAVOR,
            "memory is detached only from a dynamic window",
        );
    };
    let mut r = regions.lock().unwrap_or_else(|p| p.into_inner());
    match r.iter().position(|&(b, _)| b == base) {
        Some(i) => {
            r.swap_remove(i);
            Ok(())
        }
        None => fail(err::RMA_ATTACH, format!("no region attached at {base:#x}")),
    }
}

/// The target side of an operation: rank, displacement, count, type.
pub struct At {
    pub rank: i32,
    pub disp: i64,
    pub count: usize,
    pub dtype: Arc<Datatype>,
}

impl Win {
    /// Checks the target, and its range where the origin knows the
    /// target's window; `None` for `MPI_PROC_NULL`.
    fn place(&self, at: &At) -> MpiResult<Option<(usize, Place)>> {
        let Some(rank) = self.target_rank(at.rank)? else {
            return Ok(None);
        };
        let disp = u64::try_from(at.disp).or_else(|_| {
            fail(
                err::DISP,
                format!("target displacement {} is negative", at.disp),
            )
        })?;
        if self.flavor != win::flavor::DYNAMIC && at.count > 0 && at.dtype.size > 0 {
            let (size, unit) = self.peers[rank];
            let (lb, len) = at.dtype.span(at.count);
            let end = (disp as i128) * unit as i128 + lb as i128 + len as i128;
            if end > size as i128 || (disp as i128) * (unit as i128) + (lb as i128) < 0 {
                return fail(
                    err::RMA_RANGE,
                    format!(
                        "{} elements at displacement {disp} of rank {rank} end at byte {end} of its window of {size}",
                        at.count
                    ),
                );
            }
        }
        Ok(Some((
            rank,
            Place {
                disp,
                count: at.count as u64,
                dtype: at.dtype.clone(),
            },
        )))
    }
}

impl Win {
    /// A request without a reply sent to `rank` (a put, an accumulate):
    /// outstanding until the next flush there. `user`: the program holds
    /// it too (`MPI_Rput` ...).
    fn sent(&mut self, rank: usize, id: ReqId, user: bool) -> ReqId {
        self.pending[rank].push(if user {
            Pending::Users(id)
        } else {
            Pending::Ours(id)
        });
        self.unflushed.insert(rank);
        id
    }

    /// In a window in shared memory (`MPI_Win_allocate_shared`, and
    /// `MPI_Win_allocate` on one host), the target's memory `place`
    /// names, mapped here: puts and gets are copies, done at once.
    fn shared_place(&self, rank: usize, place: &Place) -> Option<TypedBuf> {
        if self.shared_bases.is_empty() || place.count == 0 {
            return None;
        }
        let addr = self.shared_bases[rank] + place.disp as usize * self.peers[rank].1;
        let dtype = place.dtype.clone();
        // SAFETY: `place` was checked to lie inside the target's segment
        // (`Win::place`), which this process maps until the window is
        // freed; conflicting accesses are the program's error under MPI's
        // rules, as for any RMA.
        Some(unsafe { TypedBuf::new(addr as *mut u8, place.count as usize, dtype) })
    }
}

/// The target's memory an access names, reached by the origin itself: a
/// window in shared memory mapped here, or the program's memory in
/// another process of this host (cross-memory copies), as packed bytes.
enum Direct {
    Mapped(TypedBuf),
    Remote {
        pid: i32,
        runs: Vec<(u64, usize)>,
        gate: Gate,
    },
}

/// The target's gate (`hostlock`) a cross-memory write passes.
struct Gate {
    locks: Arc<hostlock::HostLocks>,
    target: usize,
    origin: usize,
}

impl Direct {
    fn read(&self, len: usize) -> std::io::Result<Vec<u8>> {
        match self {
            Direct::Mapped(t) => Ok(t.pack()),
            Direct::Remote { pid, runs, .. } => {
                let mut data = vec![0u8; len];
                crate::sys::cma::read_runs(*pid, runs, &mut data)?;
                Ok(data)
            }
        }
    }

    fn write(&self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Direct::Mapped(t) => {
                t.unpack(data);
                Ok(())
            }
            Direct::Remote { pid, runs, gate } => {
                let slot = gate.locks.slot(gate.target);
                if !slot.enter(gate.origin) {
                    return Err(std::io::Error::other(
                        "the target halted for a recovery and left its window",
                    ));
                }
                let written = crate::sys::cma::write_runs(*pid, runs, data);
                slot.leave(gate.origin);
                written
            }
        }
    }
}

impl Win {
    /// The target's memory `place` names, when this origin reaches it
    /// itself (see `Direct`).
    fn direct(&self, rank: usize, place: &Place) -> Option<Direct> {
        if let Some(t) = self.shared_place(rank, place) {
            return Some(Direct::Mapped(t));
        }
        let on_host = self.on_host.as_ref()?;
        let cma = on_host.cma.as_ref()?;
        if place.count == 0 {
            return None;
        }
        let (pid, base) = cma[rank];
        let at = base as i128 + place.disp as i128 * self.peers[rank].1 as i128;
        let runs = place
            .dtype
            .segments(place.count as usize)
            .map(|(off, len)| ((at + off as i128) as u64, len))
            .collect();
        Some(Direct::Remote {
            pid,
            runs,
            gate: Gate {
                locks: on_host.locks.clone(),
                target: rank,
                origin: self.comm.rank,
            },
        })
    }

    /// As `direct`, for read-modify-writes (accumulates): only while this
    /// origin holds an exclusive lock on `rank`, when nobody else may
    /// touch its window, so the agent is not needed for atomicity.
    fn direct_exclusive(&self, rank: usize, place: &Place) -> Option<Direct> {
        let held = self.locked.get(&rank)?;
        if !held.exclusive {
            return None;
        }
        self.direct(rank, place)
    }

    /// A cross-memory copy failed (the kernel refuses them here, the
    /// target is gone, or it closed its gate for a recovery): from now on the agent does this window's copies,
    /// and reports what is wrong.
    fn cma_failed(&mut self, e: std::io::Error) {
        log::debug!("window: cross-memory copies refused ({e}); the agent does them");
        if let Some(h) = self.on_host.as_mut() {
            h.cma = None;
        }
    }

    /// A request with a reply (get, the fetching accumulates) sent to
    /// `rank`: both outstanding until the next flush there, the reply
    /// bringing exactly `bytes`.
    fn replied(&mut self, rank: usize, sent: ReqId, reply: ReqId, bytes: usize, users: bool) {
        self.pending[rank].push(Pending::Ours(sent));
        self.pending[rank].push(Pending::Reply {
            id: reply,
            bytes,
            users,
        });
    }
}

/// Reads, combines and writes back the target's elements at the origin
/// (see `Win::direct_exclusive`); returns their bytes before, or `None`
/// when the direct access failed and the agent must do it.
fn combine_direct(
    w: &mut Win,
    d: &Direct,
    elem: &Datatype,
    o: i32,
    data: &[u8],
    bytes: usize,
) -> MpiResult<Option<Vec<u8>>> {
    let old = match d.read(bytes) {
        Ok(old) => old,
        Err(e) => {
            w.cma_failed(e);
            return Ok(None);
        }
    };
    if let Some(new) = target::combine(elem, o, &old, data)? {
        if let Err(e) = d.write(&new) {
            w.cma_failed(e);
            return Ok(None);
        }
    }
    Ok(Some(old))
}

/// Sends request `req` with `data` to `rank`'s agent; returns the send.
fn send(m: &Mpi, w: &Win, rank: usize, req: Request, data: &[u8]) -> MpiResult<ReqId> {
    Ok(m.engine.post(Op::Send {
        dest: Some(w.comm.peer_world(rank)),
        src: m.rank as u32,
        context: agent::RMA_CONTEXT,
        tag: wire::REQUEST,
        mode: SendMode::Standard,
        layout: Data::of(Owned(wire::encode(w.comm.context, &req, data))),
    }))
}

/// Posts the receive of a reply from `rank` on `tag` into `into`.
fn expect(m: &Mpi, w: &Win, rank: usize, tag: i32, into: Data) -> ReqId {
    m.engine.post(Op::Recv {
        src: Some(Src::Rank(rank as u32)),
        tag: Some(tag),
        context: w.comm.context,
        layout: into,
    })
}

fn check(st: Status) -> MpiResult<Status> {
    match &st.error {
        Some(e) => Err(request_error(e)),
        None => Ok(st),
    }
}
