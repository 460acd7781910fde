//! Collectives on a communicator: the byte-level algorithms of `crate::coll`
//! run on the communicator's members and collective context, with their
//! errors as MPI errors. `src/abi` stages user buffers and datatypes onto
//! these.

use super::error::MpiResult;
use super::{Comm, Mpi};
use crate::coll;
use crate::transport::RawBuf;
pub use coll::{Reducer, Reduction};
/// The most bytes a member moves in a collective of `n` members through
/// shared memory (reductions: `coll::shm::REDUCE_MAX`).
pub fn shm_capacity(n: usize) -> usize {
    coll::shm::capacity(n)
}
use parking_lot::Mutex;
use std::sync::Arc;

/// A communicator's segment for small collectives in shared memory
/// (`coll::shm`), per generation: a recovery starts every member on a
/// fresh one. `None`: its members are not all on one host, or making the
/// segment failed somewhere (every member learns it: the steps agree).
struct ShmEntry {
    context: u32,
    generation: u32,
    members: Vec<usize>,
    seg: Option<Arc<coll::shm::Segment>>,
}

static SHM: Mutex<Vec<ShmEntry>> = Mutex::new(Vec::new());

/// Whether small collectives may go through shared memory
/// (`MPISTAGES_SHM_COLL=0` turns it off; the same for the whole job).
fn shm_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var("MPISTAGES_SHM_COLL").map_or(true, |v| v != "0"))
}

/// The shared-memory segment of `c`'s small collectives, made by its
/// members together at the first one that could use it (a collective
/// call: every member decides alike from what they all see). An error
/// making it (a member failed) is the caller's: running the collective by
/// messages after a handshake that failed half-way would meet the
/// handshake's leftover messages.
fn shm(m: &Mpi, c: &Comm) -> MpiResult<Option<Arc<coll::shm::Segment>>> {
    if c.is_inter() || !coll::shm::fits(c.size()) || coll::current_tag() != 0 || !shm_allowed() {
        return Ok(None);
    }
    let generation = m.engine.generation();
    let members = &c.group.members;
    if let Some(e) = SHM.lock().iter().find(|e| e.context == c.context) {
        if e.generation == generation && e.members == *members {
            return Ok(e.seg.clone());
        }
    }
    let seg = make_shm(m, c)?.map(Arc::new);
    let mut all = SHM.lock();
    all.retain(|e| e.context != c.context);
    all.push(ShmEntry {
        context: c.context,
        generation,
        members: members.clone(),
        seg: seg.clone(),
    });
    Ok(seg)
}

/// From this many bytes per member on, the collectives of one host's
/// members copy from each other's memory (`coll::single_copy`) where the
/// kernel allows it; below, messages do better (their rounds are short).
const COPIED_MIN: usize = 64 << 10;

/// Broadcasts up to this many bytes go through the segment's data regions,
/// larger ones are copied from the root.
const BCAST_SHM_MAX: usize = 16 << 10;

/// Below this many bytes per member an allgather copies from the others'
/// memory (above, by messages: see `allgatherv`).
const ALLGATHER_COPIED_MAX: usize = 1 << 20;

/// Whether large collectives may copy between members' memory
/// (`MPISTAGES_CMA_COLL=0` turns it off; the same for the whole job).
fn copies_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var("MPISTAGES_CMA_COLL").map_or(true, |v| v != "0"))
}

/// The segment through which `c`'s members exchange the addresses of a
/// large collective, when they may copy from each other (the callers
/// decide by sizes every member sees alike; `single_copy` answers alike).
fn copy_segment(m: &Mpi, c: &Comm) -> MpiResult<Option<Arc<coll::shm::Segment>>> {
    if !copies_allowed() {
        return Ok(None);
    }
    match shm(m, c)? {
        Some(s) if s.single_copy(&c.team(m))? => Ok(Some(s)),
        _ => Ok(None),
    }
}

/// `copy_segment` when a collective moves at least `min` of `bytes`.
fn copied(
    m: &Mpi,
    c: &Comm,
    bytes: usize,
    min: usize,
) -> MpiResult<Option<Arc<coll::shm::Segment>>> {
    if bytes < min {
        return Ok(None);
    }
    copy_segment(m, c)
}

fn make_shm(m: &Mpi, c: &Comm) -> MpiResult<Option<coll::shm::Segment>> {
    let team = c.team(m);
    let hosts = super::comm::host_indices(&team)?;
    if hosts.iter().any(|&h| h != hosts[0]) {
        return Ok(None);
    }
    let n = c.size();
    let sizes: Vec<(usize, usize)> = (0..n)
        .map(|r| (if r == 0 { coll::shm::segment_len(n) } else { 0 }, 1))
        .collect();
    // A segment no member could make, open or map is agreed by all
    // (`map` ends each step with an agreement): then messages it is.
    let seg = match super::rma::shm::map(&team, &hosts, &sizes) {
        Ok(seg) => seg,
        Err(e) if e.class == super::consts::err::NO_MEM => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(seg
        .map
        .and_then(|map| coll::shm::Segment::new(map, n, c.rank)))
}

/// Forgets the segment of a freed communicator's context.
pub(super) fn forget_shm(context: u32) {
    SHM.lock().retain(|e| e.context != context);
}

/// A collective that moves no bytes at any member ends at once, as Open
/// MPI's and MPICH's do (MPI asks no synchronization of it; IMB's 0-byte
/// rows measured 10-260x theirs), unless the communicator is revoked or
/// has lost a member: then with the error it would have met. Callers
/// decide it from what every member sees alike (counts, not buffers).
fn nothing_to_move(m: &Mpi, c: &Comm) -> MpiResult<()> {
    let t = c.team(m);
    match m.engine.team_refused(t.context, t.members) {
        Some(e) => Err(super::error::request_error(&e)),
        None => Ok(()),
    }
}

pub fn barrier(m: &Mpi, c: &Comm) -> MpiResult<()> {
    if let Some(s) = shm(m, c)? {
        return Ok(s.barrier(&c.team(m))?);
    }
    let team = c.team(m);
    if c.is_inter() || c.size() <= coll::shm::MAX_MEMBERS {
        return Ok(coll::barrier(&team)?);
    }
    // Larger: by hosts as mpiexec placed the job's ranks (fixed at its
    // start, so the same at every member; a spawned process is a group
    // of its own). A barrier of 1024 ranks on this machine took 1.1 ms
    // per rank the first time (connections to 20 partners each) and
    // then 10 wake-ups of every rank each time; by hosts, 2 partners
    // and 2 wake-ups a member on average.
    let placed = super::comm::placement();
    let group: Vec<usize> = team
        .members
        .iter()
        .map(|&w| placed.get(w).copied().unwrap_or(placed.len() + w))
        .collect();
    Ok(coll::barrier_grouped(&team, &group)?)
}

pub fn bcast(m: &Mpi, c: &Comm, root: usize, buf: RawBuf) -> MpiResult<()> {
    if buf.is_empty() {
        return nothing_to_move(m, c);
    }
    // Up to 16 KiB through the segment, from there copied from the root
    // (2 ranks, 32-64 KiB: 6.2 and 11.3 us through the segment, whose two
    // copies do not overlap; 4.7 and 6.9 copied; Open MPI 4.8 and 6.9).
    if buf.len() <= coll::shm::capacity(c.size()).min(BCAST_SHM_MAX) {
        if let Some(s) = shm(m, c)? {
            return Ok(s.bcast(&c.team(m), root, buf)?);
        }
    }
    if let Some(s) = copied(m, c, buf.len(), BCAST_SHM_MAX + 1)? {
        return Ok(s.bcast_copied(&c.team(m), root, buf)?);
    }
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
    if r.count == 0 {
        return nothing_to_move(m, c);
    }
    if send.len() <= coll::shm::REDUCE_MAX {
        if let Some(s) = shm(m, c)? {
            return Ok(s.reduce(&c.team(m), root, send, recv, r)?);
        }
    }
    // Every member combines one block of the vector: at least an element each.
    if r.count >= c.size() {
        if let Some(s) = copied(m, c, r.count * r.elem, COPIED_MIN)? {
            return Ok(s.reduce_copied(&c.team(m), root, send, recv, r)?);
        }
    }
    Ok(coll::reduce(&c.team(m), root, send, recv, r)?)
}

pub fn allreduce(m: &Mpi, c: &Comm, send: RawBuf, recv: RawBuf, r: &Reduction) -> MpiResult<()> {
    if r.count == 0 {
        return nothing_to_move(m, c);
    }
    if send.len() <= coll::shm::REDUCE_MAX {
        if let Some(s) = shm(m, c)? {
            return Ok(s.allreduce(&c.team(m), send, recv, r)?);
        }
    }
    // Every member combines one block of the vector: at least an element each.
    if r.count >= c.size() {
        if let Some(s) = copied(m, c, r.count * r.elem, COPIED_MIN)? {
            return Ok(s.allreduce_copied(&c.team(m), send, recv, r)?);
        }
    }
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
    // Every member's block is as long (matching signatures).
    let block = if c.rank == root {
        recv.len() / c.size()
    } else {
        send.len()
    };
    if block == 0 {
        return nothing_to_move(m, c);
    }
    if block <= coll::shm::capacity(c.size()) {
        if let Some(s) = shm(m, c)? {
            return Ok(s.gather(&c.team(m), root, send, recv)?);
        }
    }
    Ok(coll::gather(&c.team(m), root, send, recv)?)
}

pub fn scatter(m: &Mpi, c: &Comm, root: usize, send: RawBuf, recv: RawBuf) -> MpiResult<()> {
    if recv.is_empty() {
        return nothing_to_move(m, c);
    }
    if recv.len() * c.size() <= coll::shm::capacity(c.size()) {
        if let Some(s) = shm(m, c)? {
            return Ok(s.scatter(&c.team(m), root, send, recv)?);
        }
    }
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
    if lens.iter().all(|&l| l == 0) {
        return nothing_to_move(m, c);
    }
    if lens.iter().all(|&l| l <= coll::shm::capacity(c.size())) {
        if let Some(s) = shm(m, c)? {
            return Ok(s.allgatherv(&c.team(m), send, recv, offs, lens)?);
        }
    }
    // Blocks of 1 MiB and more copied measured slower than by messages
    // (8 ranks: 1.27-1.34x Open MPI's time against 1.06-1.36x).
    let block = lens.iter().sum::<usize>() / c.size().max(1);
    if block < ALLGATHER_COPIED_MAX {
        if let Some(s) = copied(m, c, block, COPIED_MIN)? {
            return Ok(s.allgatherv_copied(&c.team(m), send, recv, offs, lens)?);
        }
    }
    Ok(coll::allgatherv(&c.team(m), send, recv, offs, lens)?)
}

/// Whether an alltoall of `n` members and blocks of `block` bytes copies
/// them from each other's memory: at 2 members from 16 KiB (16-64 KiB:
/// 5.0-10.8 us against 6.3-16.4 through the segment or by messages, Open
/// MPI 6.5-10.8), else from 128 KiB (4 and 8 members, 128-256 KiB: 0.6-0.8
/// of the time by messages; below, the same or worse).
pub fn alltoall_copies(n: usize, block: usize) -> bool {
    (n == 2 && block >= 16 << 10) || block >= 128 << 10
}

/// `MPI_Alltoall` of packed blocks (the same length at every member;
/// `send` is not `recv` when `alltoall_copies`): copied from each other's
/// memory when `alltoall_copies` says so and the kernel allows it, else
/// through shared memory when the communicator has a segment and all of a
/// member's blocks fit in its data region (`coll::shm::capacity`); false:
/// not done, the caller exchanges by messages.
pub fn alltoall_shared(m: &Mpi, c: &Comm, send: RawBuf, recv: RawBuf) -> MpiResult<bool> {
    if send.is_empty() {
        nothing_to_move(m, c)?;
        return Ok(true);
    }
    if alltoall_copies(c.size(), send.len() / c.size().max(1)) {
        if let Some(s) = copy_segment(m, c)? {
            s.alltoall_copied(&c.team(m), send, recv)?;
            return Ok(true);
        }
    }
    if send.len() > coll::shm::capacity(c.size()) {
        return Ok(false);
    }
    match shm(m, c)? {
        Some(s) => {
            s.alltoall(&c.team(m), send, recv)?;
            Ok(true)
        }
        None => Ok(false),
    }
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
    use crate::progress::request::Data;
    use crate::progress::{Op, SendMode, Src};
    let mut ids = Vec::new();
    for p in recvs.iter().filter(|p| p.rank >= 0) {
        ids.push(m.engine.post(Op::Recv {
            src: Some(Src::Rank(p.rank as u32)),
            tag: Some(p.tag),
            context: c.coll_context(),
            layout: Data::Bytes(p.buf),
        }));
    }
    for p in sends.iter().filter(|p| p.rank >= 0) {
        ids.push(m.engine.post(Op::Send {
            dest: Some(c.peer_world(p.rank as usize)),
            src: c.rank as u32,
            context: c.coll_context(),
            tag: p.tag,
            mode: SendMode::Standard,
            layout: Data::Bytes(p.buf),
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
