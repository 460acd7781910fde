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
//! exclusive lock, when the origin combines itself.
//!
//! Files of this module: `win.rs` (objects and table), `lock.rs` (the
//! passive-target lock at the agent, a pure state machine), `hostlock.rs`
//! (the lock in shared memory and the gate of cross-memory writes),
//! `wire.rs` (requests), `target.rs` (requests applied to memory),
//! `agent.rs` (the thread), `gate.rs` (what a failure's halt closes),
//! `shm.rs` (the segments of shared windows and of the lock page).

pub mod agent;
pub mod gate;
pub mod hostlock;
pub mod lock;
pub mod shm;
pub mod target;
pub mod win;
pub mod wire;

use super::comm;
use super::consts::{err, op};
use super::datatype::Datatype;
use super::error::{fail, request_error, MpiError, MpiResult};
use super::info::Info;
use super::usermem::TypedBuf;
use super::Mpi;
use crate::coll;
use crate::progress::request::{Bytes, Owned};
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
        }
    } else {
        win::fixed(base, size, disp_unit)
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
        layout: Box::new(Owned(wire::encode(w.comm.context, &req, data))),
    }))
}

/// Posts the receive of a reply from `rank` on `tag` into `into`.
fn expect(m: &Mpi, w: &Win, rank: usize, tag: i32, into: Box<dyn Layout>) -> ReqId {
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

/// `MPI_Put` (`user` for `MPI_Rput`: the request returned completes when
/// the data has left, as the standard has it).
pub fn put(
    m: &Mpi,
    w: &mut Win,
    origin: &TypedBuf,
    at: &At,
    user: bool,
) -> MpiResult<Option<ReqId>> {
    let Some((rank, place)) = w.place(at)? else {
        return Ok(None);
    };
    same_size(origin, &place)?;
    if let Some(d) = w.direct(rank, &place) {
        // A contiguous origin is copied from where it is.
        let written = match origin.contiguous() {
            Some(run) => d.write(run.as_slice()),
            None => d.write(&origin.pack()),
        };
        match written {
            Ok(()) => return Ok(None),
            Err(e) => w.cma_failed(e),
        }
    }
    let id = send(m, w, rank, Request::Put(place), &origin.pack())?;
    Ok(Some(w.sent(rank, id, user)))
}

fn same_size(origin: &TypedBuf, place: &Place) -> MpiResult<()> {
    let target = place.count as usize * place.dtype.size;
    if origin.bytes() != target {
        return fail(
            err::TYPE,
            format!(
                "the origin has {} bytes and the target {target}",
                origin.bytes()
            ),
        );
    }
    Ok(())
}

/// `MPI_Get` (and `MPI_Rget`, whose request is the reply's receive).
pub fn get(
    m: &Mpi,
    w: &mut Win,
    origin: TypedBuf,
    at: &At,
    user: bool,
) -> MpiResult<Option<ReqId>> {
    let Some((rank, place)) = w.place(at)? else {
        return Ok(None);
    };
    same_size(&origin, &place)?;
    if let Some(d) = w.direct(rank, &place) {
        match d.read(origin.bytes()) {
            Ok(data) => {
                origin.unpack(&data);
                return Ok(None);
            }
            Err(e) => w.cma_failed(e),
        }
    }
    let reply = w.reply_tag();
    let bytes = origin.bytes();
    let id = expect(m, w, rank, reply, Box::new(origin));
    let sent = send(m, w, rank, Request::Get { at: place, reply }, &[])?;
    w.replied(rank, sent, id, bytes, user);
    Ok(Some(id))
}

/// The predefined type an accumulate's elements are of, and checks of
/// the operation against it.
fn element(origin: &Datatype, target: &Datatype, o: i32) -> MpiResult<Datatype> {
    let elem = if let Some(p) = predefined_of(origin) {
        p
    } else {
        let basic = origin.uniform_basic().ok_or_else(|| {
            MpiError::new(
                err::TYPE,
                "an accumulate's origin type must be made of one predefined type",
            )
        })?;
        Datatype::of_basic(basic).ok_or_else(|| {
            MpiError::new(err::TYPE, "no predefined type for the origin's elements")
        })?
    };
    if target.size > 0 && !target.predefined && target.uniform_basic() != elem.uniform_basic() {
        return fail(
            err::TYPE,
            "origin and target types of an accumulate differ in their elements",
        );
    }
    if o != op::REPLACE && o != op::NO_OP {
        super::op::check(&super::op::OpDef::Predefined(o), &elem)?;
    }
    Ok(elem)
}

/// The one predefined type a derived type is built from (through the
/// types of its constructors), if there is one.
fn predefined_of(t: &Datatype) -> Option<Datatype> {
    if t.predefined {
        return Some(t.clone());
    }
    let mut leaf: Option<Datatype> = None;
    for (_, sub) in &t.envelope.as_ref()?.types {
        let l = predefined_of(sub)?;
        match &leaf {
            Some(x) if x.name != l.name => return None,
            _ => leaf = Some(l),
        }
    }
    leaf
}

fn check_op(o: i32) -> MpiResult<()> {
    if !(op::MAX..=op::NO_OP).contains(&o) {
        return fail(err::OP, "accumulates take predefined operations only");
    }
    Ok(())
}

/// `MPI_Accumulate` (and `MPI_Raccumulate`).
pub fn accumulate(
    m: &Mpi,
    w: &mut Win,
    origin: &TypedBuf,
    at: &At,
    o: i32,
    user: bool,
) -> MpiResult<Option<ReqId>> {
    check_op(o)?;
    let Some((rank, place)) = w.place(at)? else {
        return Ok(None);
    };
    same_size(origin, &place)?;
    if origin.bytes() == 0 {
        // Nothing to combine: no element type to check either.
        return Ok(None);
    }
    let elem = element(&origin.dtype, &place.dtype, o)?;
    let data = origin.pack();
    if let Some(d) = w.direct_exclusive(rank, &place) {
        if combine_direct(w, &d, &elem, o, &data, data.len())?.is_some() {
            return Ok(None);
        }
    }
    let req = Request::Accumulate {
        at: place,
        elem,
        op: o,
    };
    let id = send(m, w, rank, req, &data)?;
    Ok(Some(w.sent(rank, id, user)))
}

/// `MPI_Get_accumulate` (`origin` is `None` for `MPI_NO_OP`), also
/// `MPI_Fetch_and_op` and `MPI_Rget_accumulate`.
pub fn get_accumulate(
    m: &Mpi,
    w: &mut Win,
    origin: Option<&TypedBuf>,
    result: TypedBuf,
    at: &At,
    o: i32,
    user: bool,
) -> MpiResult<Option<ReqId>> {
    check_op(o)?;
    let Some((rank, place)) = w.place(at)? else {
        return Ok(None);
    };
    same_size(&result, &place)?;
    if result.bytes() == 0 {
        return Ok(None);
    }
    let data = match origin {
        Some(b) if o != op::NO_OP => {
            same_size(b, &place)?;
            b.pack()
        }
        _ => Vec::new(),
    };
    let elem = element(&result.dtype, &place.dtype, o)?;
    let bytes = result.bytes();
    if let Some(d) = w.direct_exclusive(rank, &place) {
        if let Some(old) = combine_direct(w, &d, &elem, o, &data, bytes)? {
            result.unpack(&old);
            return Ok(None);
        }
    }
    let reply = w.reply_tag();
    let id = expect(m, w, rank, reply, Box::new(result));
    let req = Request::GetAccumulate {
        at: place,
        elem,
        op: o,
        reply,
    };
    let sent = send(m, w, rank, req, &data)?;
    w.replied(rank, sent, id, bytes, user);
    Ok(Some(id))
}

/// `MPI_Compare_and_swap`: one element of a predefined type.
pub fn compare_and_swap(
    m: &Mpi,
    w: &mut Win,
    new: &TypedBuf,
    compare: &TypedBuf,
    result: TypedBuf,
    at: &At,
) -> MpiResult<()> {
    let Some((rank, place)) = w.place(at)? else {
        return Ok(());
    };
    if !place.dtype.predefined {
        return fail(err::TYPE, "compare-and-swap takes a predefined type");
    }
    let mut data = new.pack();
    data.extend_from_slice(&compare.pack());
    let bytes = result.bytes();
    let reply = w.reply_tag();
    let id = expect(m, w, rank, reply, Box::new(result));
    let sent = send(
        m,
        w,
        rank,
        Request::CompareAndSwap { at: place, reply },
        &data,
    )?;
    w.replied(rank, sent, id, bytes, false);
    Ok(())
}

/// Waits for what is outstanding to `rank` here (local completion: the
/// data has left, the replies are in).
fn complete_local(m: &Mpi, w: &mut Win, rank: usize) -> MpiResult<()> {
    let mut first = Ok(());
    for p in std::mem::take(&mut w.pending[rank]) {
        let r = match p {
            Pending::Ours(id) => check(m.engine.wait(id)).map(|_| ()),
            Pending::Users(id) => {
                m.engine.wait_done(id);
                Ok(())
            }
            Pending::Reply { id, bytes, users } => {
                let st = if users {
                    m.engine.wait_done(id);
                    m.engine.peek(id)
                } else {
                    Some(m.engine.wait(id))
                };
                match st.map(check) {
                    Some(Ok(st)) if st.bytes != bytes => fail(
                        err::RMA_RANGE,
                        format!("rank {rank} answered {} of {bytes} bytes: the access is outside its window", st.bytes),
                    ),
                    Some(Err(e)) => Err(e),
                    _ => Ok(()),
                }
            }
        };
        first = first.and(r);
    }
    first
}

/// Flushes to `rank`: local completion, then a round trip through its
/// agent for requests that have no reply of their own.
fn flush_one(m: &Mpi, w: &mut Win, rank: usize) -> MpiResult<()> {
    let local = complete_local(m, w, rank);
    if !w.unflushed.remove(&rank) {
        return local;
    }
    let code = round_trip(m, w, rank, |reply| Request::Flush { reply })?;
    local?;
    agent_error(rank, code)
}

/// Sends a request that the agent answers with an error code; returns it.
fn round_trip(
    m: &Mpi,
    w: &mut Win,
    rank: usize,
    req: impl FnOnce(i32) -> Request,
) -> MpiResult<i32> {
    let reply = w.reply_tag();
    let mut code = [0u8; 4];
    // SAFETY: `code` outlives the receive, waited for below.
    let raw = unsafe { RawBuf::new(code.as_mut_ptr(), 4) };
    let id = expect(m, w, rank, reply, Box::new(Bytes(raw)));
    let sent = send(m, w, rank, req(reply), &[]);
    let got = m.engine.wait(id);
    check(m.engine.wait(sent?))?;
    check(got)?;
    Ok(i32::from_le_bytes(code))
}

fn agent_error(rank: usize, code: i32) -> MpiResult<()> {
    if code != 0 {
        return fail(code, format!("an operation at rank {rank} failed"));
    }
    Ok(())
}

fn flush_all(m: &Mpi, w: &mut Win) -> MpiResult<()> {
    let mut first = Ok(());
    for r in 0..w.comm.size() {
        first = first.and(flush_one(m, w, r));
    }
    first
}

/// `MPI_Win_flush` (`rank` `None`: `_all`) and `MPI_Win_flush_local`.
pub fn flush(m: &Mpi, w: &mut Win, rank: Option<i32>, local: bool) -> MpiResult<()> {
    let ranks: Vec<usize> = match rank {
        Some(r) => w.target_rank(r)?.into_iter().collect(),
        None => (0..w.comm.size()).collect(),
    };
    let mut first = Ok(());
    for r in ranks {
        first = first.and(if local {
            complete_local(m, w, r)
        } else {
            flush_one(m, w, r)
        });
    }
    first
}

/// `MPI_Win_fence`: everyone's operations complete everywhere.
pub fn fence(m: &Mpi, w: &mut Win, a: i32) -> MpiResult<()> {
    check_assert(a)?;
    let mine = flush_all(m, w);
    coll::barrier(&w.comm.team(m))?;
    mine
}

/// `MPI_Win_lock` (`MPI_MODE_NOCHECK`: no other origin locks it now, so
/// nothing is asked).
pub fn lock(m: &Mpi, w: &mut Win, kind: i32, rank: i32, a: i32) -> MpiResult<()> {
    check_assert(a)?;
    let exclusive = match kind {
        LOCK_EXCLUSIVE => true,
        LOCK_SHARED => false,
        k => {
            return fail(
                err::LOCKTYPE,
                format!("lock type {k} is neither MPI_LOCK_EXCLUSIVE nor MPI_LOCK_SHARED"),
            )
        }
    };
    let Some(r) = w.target_rank(rank)? else {
        return Ok(());
    };
    if w.locked.contains_key(&r) {
        return fail(err::RMA_SYNC, format!("rank {r} is locked already"));
    }
    if a & assert::NOCHECK == 0 && w.on_host.is_some() {
        host_lock(m, w, r, exclusive)?;
    } else if a & assert::NOCHECK == 0 {
        let reply = w.reply_tag();
        let id = expect(m, w, r, reply, Box::new(Bytes(RawBuf::empty())));
        let sent = send(m, w, r, Request::Lock { exclusive, reply }, &[]);
        let got = m.engine.wait(id);
        check(m.engine.wait(sent?))?;
        check(got)?;
    }
    w.locked.insert(
        r,
        win::Held {
            asked: a & assert::NOCHECK == 0,
            exclusive,
        },
    );
    Ok(())
}

/// Takes target `r`'s lock in the window's page on this host, waiting
/// as long as it is held; a halted job or a dead target ends the wait,
/// and dead members' locks are released on their behalf (ULFM).
fn host_lock(m: &Mpi, w: &Win, r: usize, exclusive: bool) -> MpiResult<()> {
    let locks = &w.on_host.as_ref().expect("on host").locks;
    hostlock::acquire(locks, r, w.comm.rank, exclusive, || {
        if m.engine.halted() {
            return Some(hostlock::Interrupt::Halted);
        }
        let dead = m.engine.failed_members(w.comm.context);
        if dead.is_empty() {
            return None;
        }
        let dead: Vec<usize> = dead.iter().map(|&p| p as usize).collect();
        ranks_of(w, &dead).ok().map(hostlock::Interrupt::Dead)
    })
}

/// `MPI_Win_unlock`: the origin's operations complete at the target, then
/// the lock goes.
pub fn unlock(m: &Mpi, w: &mut Win, rank: i32) -> MpiResult<()> {
    let Some(r) = w.target_rank(rank)? else {
        return Ok(());
    };
    let Some(win::Held { asked, .. }) = w.locked.remove(&r) else {
        return fail(err::RMA_SYNC, format!("rank {r} is not locked"));
    };
    if w.on_host.is_some() {
        // Operations done by the agent complete first (a flush), then the
        // lock word is released.
        let flushed = flush_one(m, w, r);
        if asked {
            let me = w.comm.rank;
            w.on_host
                .as_ref()
                .expect("on host")
                .locks
                .slot(r)
                .unlock(me);
        }
        return flushed;
    }
    let local = complete_local(m, w, r);
    w.unflushed.remove(&r);
    // A lock taken with MPI_MODE_NOCHECK was never asked for: a flush
    // completes its operations.
    let code = round_trip(m, w, r, |reply| {
        if asked {
            Request::Unlock { reply }
        } else {
            Request::Flush { reply }
        }
    })?;
    local?;
    agent_error(r, code)
}

/// `MPI_Win_lock_all` / `unlock_all`: a shared lock on every member.
pub fn lock_all(m: &Mpi, w: &mut Win, a: i32) -> MpiResult<()> {
    for r in 0..w.comm.size() {
        lock(m, w, LOCK_SHARED, r as i32, a)?;
    }
    Ok(())
}

pub fn unlock_all(m: &Mpi, w: &mut Win) -> MpiResult<()> {
    let mut first = Ok(());
    for r in w.locked.keys().copied().collect::<Vec<_>>() {
        first = first.and(unlock(m, w, r as i32));
    }
    first
}

/// Ranks in the window's group of the world ranks of `members`.
pub fn ranks_of(w: &Win, members: &[usize]) -> MpiResult<Vec<usize>> {
    members
        .iter()
        .map(|&p| {
            w.comm
                .group
                .members
                .iter()
                .position(|&x| x == p)
                .ok_or_else(|| {
                    MpiError::new(err::GROUP, "the group has a process outside the window")
                })
        })
        .collect()
}

fn notice(m: &Mpi, w: &Win, rank: usize, tag: i32) -> MpiResult<()> {
    let id = m.engine.post(Op::Send {
        dest: Some(w.comm.peer_world(rank)),
        src: w.comm.rank as u32,
        context: w.comm.context,
        tag,
        mode: SendMode::Standard,
        layout: Box::new(Owned(Vec::new())),
    });
    check(m.engine.wait(id)).map(|_| ())
}

fn await_notice(m: &Mpi, w: &Win, rank: usize, tag: i32) -> MpiResult<()> {
    let id = expect(m, w, rank, tag, Box::new(Bytes(RawBuf::empty())));
    check(m.engine.wait(id)).map(|_| ())
}

/// `MPI_Win_post`: this member's window is exposed to `group`'s origins.
pub fn post(m: &Mpi, w: &mut Win, group: Vec<usize>, a: i32) -> MpiResult<()> {
    check_assert(a)?;
    if w.exposure.is_some() {
        return fail(err::RMA_SYNC, "an exposure epoch is open already");
    }
    for &r in &group {
        notice(m, w, r, wire::POST)?;
    }
    w.exposure = Some(group);
    Ok(())
}

/// `MPI_Win_start`: an access epoch to `group`'s targets, once each has
/// posted.
pub fn start(m: &Mpi, w: &mut Win, group: Vec<usize>, a: i32) -> MpiResult<()> {
    check_assert(a)?;
    if w.access.is_some() {
        return fail(err::RMA_SYNC, "an access epoch is open already");
    }
    if a & assert::NOCHECK == 0 {
        for &r in &group {
            await_notice(m, w, r, wire::POST)?;
        }
    }
    w.access = Some(group);
    Ok(())
}

/// `MPI_Win_complete`: the epoch's operations complete at their targets,
/// which hear that this origin is done.
pub fn complete(m: &Mpi, w: &mut Win) -> MpiResult<()> {
    let Some(group) = w.access.take() else {
        return fail(err::RMA_SYNC, "MPI_Win_complete without MPI_Win_start");
    };
    let mut first = Ok(());
    for &r in &group {
        first = first.and(flush_one(m, w, r));
        notice(m, w, r, wire::COMPLETE)?;
    }
    first
}

/// `MPI_Win_wait` (`block`) and `MPI_Win_test`: whether every origin of
/// the exposure epoch has completed (the epoch then ends).
pub fn wait(m: &Mpi, w: &mut Win, block: bool) -> MpiResult<bool> {
    let Some(group) = w.exposure.clone() else {
        return fail(
            err::RMA_SYNC,
            "no exposure epoch to wait for (MPI_Win_post)",
        );
    };
    if !block {
        let ready = group.iter().all(|&r| {
            m.engine
                .iprobe(w.comm.context, Src::Rank(r as u32), Some(wire::COMPLETE))
                .is_some()
        });
        if !ready {
            return Ok(false);
        }
    }
    for &r in &group {
        await_notice(m, w, r, wire::COMPLETE)?;
    }
    w.exposure = None;
    Ok(true)
}
