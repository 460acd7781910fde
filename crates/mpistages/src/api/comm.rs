//! Communicator construction. New context ids are agreed with a max-reduce
//! over everyone who will use them, above every id any of them uses, so
//! they are free everywhere they are used.

use super::consts::{err, UNDEFINED};
use super::error::{fail, request_error, MpiResult};
use super::group::Group;
use super::topo::{self, Topology};
use super::{Comm, Mpi};
use crate::coll::{self, Team};
use crate::progress::request::{Data, Owned};
use crate::progress::{Op, SendMode, Src};
use crate::transport::RawBuf;
use std::sync::Arc;

/// `MPI_COMM_TYPE_SHARED`.
pub const COMM_TYPE_SHARED: i32 = 1;

/// Tags of collectives run by a subset of a communicator's members on its
/// collective context (the blocking collectives of all members use 0).
const CREATE_GROUP_TAG: i32 = 1 << 24;

fn agree_context(m: &Mpi, team: &Team) -> MpiResult<u32> {
    let mine = m.tables().max_context;
    let agreed = coll::max_u32(team, mine)?;
    Ok(reserve(m, agreed))
}

/// Takes the context pair at or above `agreed` (so a concurrent creation
/// cannot take it too).
pub(super) fn reserve(m: &Mpi, agreed: u32) -> u32 {
    let mut t = m.tables();
    t.max_context = t.max_context.max(agreed + 2);
    agreed.next_multiple_of(2)
}

pub(super) fn new_context(m: &Mpi, parent: &Comm) -> MpiResult<u32> {
    if parent.is_inter() {
        return agree_context(m, &union_team(m, parent).as_team(m));
    }
    agree_context(m, &parent.team(m))
}

/// All members of an inter-communicator's two groups, in an order both
/// sides compute alike (the group holding the lowest world rank first).
pub(super) struct Union {
    members: Vec<usize>,
    rank: usize,
    context: u32,
    /// Whether this process's group comes first.
    local_first: bool,
}

impl Union {
    pub(super) fn as_team<'a>(&'a self, m: &'a Mpi) -> Team<'a> {
        Team {
            engine: &m.engine,
            members: &self.members,
            rank: self.rank,
            context: self.context,
            tag: crate::coll::current_tag(),
            wire: None,
        }
    }
}

pub(super) fn union_team(_m: &Mpi, c: &Comm) -> Union {
    let remote = c.remote.as_ref().expect("an inter-communicator");
    let low = |g: &Group| g.members.iter().copied().min().unwrap_or(usize::MAX);
    let local_first = low(&c.group) < low(remote);
    let (a, b): (&Group, &Group) = if local_first {
        (&c.group, remote)
    } else {
        (remote, &c.group)
    };
    let members: Vec<usize> = a.members.iter().chain(&b.members).copied().collect();
    let rank = if local_first {
        c.rank
    } else {
        remote.size() + c.rank
    };
    Union {
        members,
        rank,
        context: c.coll_context(),
        local_first,
    }
}

/// Tells the engine which world ranks a communicator's context pair
/// names (for what a failure ends: `progress::ulfm`).
pub fn announce(m: &Mpi, c: &Comm) {
    let ids = |v: &[usize]| -> Arc<[u32]> { v.iter().map(|&w| w as u32).collect() };
    let peers = ids(&c.peers().members);
    let (coll, all) = match &c.remote {
        None => (peers.clone(), peers.clone()),
        Some(_) => {
            let u = union_team(m, c);
            let mut all = u.members.clone();
            all.sort_unstable();
            (ids(&u.members), ids(&all))
        }
    };
    m.engine.register_context(
        c.context,
        crate::progress::ulfm::Members { peers, coll, all },
    );
}

/// `announce` for every communicator in the tables (after MPI_Init and
/// after a restore of MPI state).
pub fn announce_all(m: &Mpi) {
    let comms: Vec<Arc<Comm>> = m
        .tables()
        .comms
        .iter()
        .flatten()
        .map(|e| e.comm.clone())
        .collect();
    for c in comms {
        announce(m, &c);
    }
}

/// Adds `c` to the tables with the error handler of `parent_handle`.
pub(crate) fn register(m: &Mpi, parent_handle: i32, c: Comm) -> i32 {
    announce(m, &c);
    let mut t = m.tables();
    let eh = t.comms[parent_handle as usize]
        .as_ref()
        .map_or(super::consts::ERRORS_ARE_FATAL, |e| e.errhandler);
    t.add_comm(c, eh)
}

/// `MPI_Comm_dup`: same groups and topology, a new context.
pub fn dup(m: &Mpi, h: i32) -> MpiResult<i32> {
    let parent = m.tables().comm(h)?;
    let context = new_context(m, &parent)?;
    let mut c = (*parent).clone();
    c.context = context;
    Ok(register(m, h, c))
}

/// A duplicate of `h` with no handle, for the library's own use (an open
/// file's collective steps): context ids are never reused, so its traffic
/// meets nobody else's.
pub fn private_dup(m: &Mpi, h: i32) -> MpiResult<Arc<Comm>> {
    let parent = m.tables().comm(h)?;
    let context = new_context(m, &parent)?;
    let mut c = (*parent).clone();
    c.context = context;
    announce(m, &c);
    Ok(Arc::new(c))
}

/// Gathers one fixed-size record per member of `team`.
pub(super) fn allgather_fixed(team: &Team, mine: &[u8]) -> MpiResult<Vec<u8>> {
    let (n, k) = (team.size(), mine.len());
    let mut all = vec![0u8; n * k];
    let mut mine = mine.to_vec();
    let offs: Vec<usize> = (0..n).map(|r| k * r).collect();
    let lens = vec![k; n];
    // SAFETY: both buffers outlive the blocking collective.
    let (s, r) = unsafe {
        (
            RawBuf::new(mine.as_mut_ptr(), k),
            RawBuf::new(all.as_mut_ptr(), all.len()),
        )
    };
    coll::allgatherv(team, s, r, &offs, &lens)?;
    Ok(all)
}

fn i32_at(b: &[u8], i: usize) -> i32 {
    i32::from_le_bytes(b[4 * i..4 * i + 4].try_into().expect("4 bytes"))
}

/// Splits `parent` by (color, key) gathered from all members: each color's
/// members ordered by key, then by rank in the parent. Returns the new
/// group and this rank in it, or `None` for `MPI_UNDEFINED`.
fn split_members(
    m: &Mpi,
    parent: &Comm,
    color: i32,
    key: i32,
) -> MpiResult<Option<(Group, usize)>> {
    let mut mine = [0u8; 8];
    mine[..4].copy_from_slice(&color.to_le_bytes());
    mine[4..].copy_from_slice(&key.to_le_bytes());
    let all = allgather_fixed(&parent.team(m), &mine)?;
    if color == UNDEFINED {
        return Ok(None);
    }
    let entry = |r: usize| (i32_at(&all, 2 * r), i32_at(&all, 2 * r + 1));
    let mut members: Vec<usize> = (0..parent.size())
        .filter(|&r| entry(r).0 == color)
        .collect();
    members.sort_by_key(|&r| (entry(r).1, r));
    let rank = members
        .iter()
        .position(|&r| r == parent.rank)
        .expect("this rank has this color");
    let group = Group {
        members: members.iter().map(|&r| parent.world(r)).collect(),
    };
    Ok(Some((group, rank)))
}

fn check_color(color: i32) -> MpiResult<()> {
    if color < 0 && color != UNDEFINED {
        return fail(
            err::ARG,
            format!("color {color} is negative (use MPI_UNDEFINED to opt out)"),
        );
    }
    Ok(())
}

fn intra_only(c: &Comm, what: &str) -> MpiResult<()> {
    if c.is_inter() {
        return fail(err::COMM, format!("{what} needs an intra-communicator"));
    }
    Ok(())
}

/// `MPI_Comm_split` and `MPI_Comm_create` of an inter-communicator: every
/// member of both groups learns every (color, key); the new local and
/// remote groups are the members of each side with this rank's color,
/// ordered by key (`MPI_COMM_NULL` if either side has none).
fn split_inter(m: &Mpi, h: i32, ic: &Comm, color: i32, key: i32) -> MpiResult<i32> {
    let u = union_team(m, ic);
    let team = u.as_team(m);
    let mut mine = [0u8; 8];
    mine[..4].copy_from_slice(&color.to_le_bytes());
    mine[4..].copy_from_slice(&key.to_le_bytes());
    let all = allgather_fixed(&team, &mine)?;
    let context = agree_context(m, &team)?;
    let remote = ic.remote.as_ref().expect("an inter-communicator");
    // Union positions of the local and remote groups' members.
    let (local_at, remote_at) = if u.local_first {
        (0, ic.size())
    } else {
        (remote.size(), 0)
    };
    let side = |g: &Group, at: usize| -> Vec<usize> {
        let mut v: Vec<usize> = (0..g.size())
            .filter(|&r| color != UNDEFINED && i32_at(&all, 2 * (at + r)) == color)
            .collect();
        v.sort_by_key(|&r| (i32_at(&all, 2 * (at + r) + 1), r));
        v
    };
    let (mine_side, their_side) = (side(&ic.group, local_at), side(remote, remote_at));
    if mine_side.is_empty() || their_side.is_empty() {
        return Ok(super::consts::COMM_NULL);
    }
    let rank = mine_side
        .iter()
        .position(|&r| r == ic.rank)
        .expect("this rank has its color");
    let group = |g: &Group, v: &[usize]| {
        Arc::new(Group {
            members: v.iter().map(|&r| g.members[r]).collect(),
        })
    };
    let c = Comm {
        remote: Some(group(remote, &their_side)),
        ..Comm::intra(context, group(&ic.group, &mine_side), rank)
    };
    Ok(register(m, h, c))
}

/// `MPI_Comm_split`.
pub fn split(m: &Mpi, h: i32, color: i32, key: i32) -> MpiResult<i32> {
    check_color(color)?;
    let parent = m.tables().comm(h)?;
    if parent.is_inter() {
        return split_inter(m, h, &parent, color, key);
    }
    let split = split_members(m, &parent, color, key)?;
    let context = new_context(m, &parent)?;
    Ok(match split {
        None => super::consts::COMM_NULL,
        Some((g, rank)) => register(m, h, Comm::intra(context, Arc::new(g), rank)),
    })
}

/// `MPI_COMM_TYPE_SHARED`, `MPI_COMM_TYPE_HW_GUIDED`,
/// `MPI_COMM_TYPE_HW_UNGUIDED` (MPI 4.0).
pub const COMM_TYPE_HW_GUIDED: i32 = 2;
pub const COMM_TYPE_HW_UNGUIDED: i32 = 3;

/// The hardware level mpistages knows: the host (its shared memory).
const SHARED_MEMORY: &str = "mpi_shared_memory";
const HW_KEY: &str = "mpi_hw_resource_type";

/// `MPI_Comm_split_type`: `MPI_COMM_TYPE_SHARED` puts the ranks of one
/// host together; `HW_GUIDED` does so when the info asks for
/// `mpi_shared_memory` (any other resource gives `MPI_COMM_NULL`);
/// `HW_UNGUIDED` gives the host's ranks when they are fewer than the
/// communicator's, naming the level in `info`, else `MPI_COMM_NULL`.
pub fn split_type(m: &Mpi, h: i32, kind: i32, key: i32, info: i32) -> MpiResult<i32> {
    let hint = super::info::get_or_empty(info)?;
    // Every member takes part in the same collectives whatever type it
    // passed (MPI_UNDEFINED beside another type is allowed).
    let (host, one_host) = host_color(m, h)?;
    let color = match kind {
        UNDEFINED => UNDEFINED,
        COMM_TYPE_SHARED => host,
        COMM_TYPE_HW_GUIDED if hint.get(HW_KEY)? == Some(SHARED_MEMORY) => host,
        COMM_TYPE_HW_GUIDED => UNDEFINED,
        COMM_TYPE_HW_UNGUIDED if one_host => UNDEFINED,
        COMM_TYPE_HW_UNGUIDED => {
            if info != super::info::INFO_NULL {
                super::info::with(info, |i| i.set(HW_KEY, SHARED_MEMORY))?;
            }
            host
        }
        k => return fail(err::ARG, format!("split type {k} is not known")),
    };
    split(m, h, color, key)
}

/// This process's host as a color (the position of the first member on the
/// same host), and whether all members are on one host. On an
/// inter-communicator both groups learn every host (MPI 4.1), so that a
/// color means the same host on both sides.
fn host_color(m: &Mpi, h: i32) -> MpiResult<(i32, bool)> {
    let parent = m.tables().comm(h)?;
    let union = parent.is_inter().then(|| union_team(m, &parent));
    let team = match &union {
        Some(u) => u.as_team(m),
        None => parent.team(m),
    };
    let host = host_key(team.members[team.rank]);
    let all = allgather_fixed(&team, &host.to_le_bytes())?;
    let keys: Vec<&[u8]> = all.chunks_exact(8).collect();
    let mine = host.to_le_bytes();
    let color = keys
        .iter()
        .position(|k| *k == mine)
        .expect("this rank's own key") as i32;
    Ok((color, keys.iter().all(|k| *k == keys[0])))
}

/// Each member's host as an index: the rank of the first member on the
/// same host (collective).
pub(super) fn host_indices(team: &Team) -> MpiResult<Vec<usize>> {
    let all = allgather_fixed(team, &host_key(team.members[team.rank]).to_le_bytes())?;
    let keys: Vec<&[u8]> = all.chunks_exact(8).collect();
    Ok(keys
        .iter()
        .map(|k| keys.iter().position(|o| o == k).expect("its own key"))
        .collect())
}

/// The host index mpiexec placed each of the job's first ranks on
/// (`RANK_HOSTS`, fixed at its start and the same in every process; empty
/// without mpiexec).
pub(crate) fn placement() -> &'static [usize] {
    static PLACED: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    PLACED.get_or_init(|| {
        std::env::var(crate::control::env::RANK_HOSTS)
            .ok()
            .and_then(|v| v.split(',').map(|h| h.parse().ok()).collect())
            .unwrap_or_default()
    })
}

/// What identifies the host of this process, world rank `rank`: mpiexec's
/// placement when it gives it (hosts may be network namespaces of one
/// machine), else the host name. The rank is the runtime's, not the
/// environment's: a spare that replaced a rank has none in its
/// environment (and counted as a host of its own after a recovery).
fn host_key(rank: usize) -> u64 {
    use std::hash::{Hash, Hasher};
    let rank_hosts = std::env::var(crate::control::env::RANK_HOSTS).ok();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match rank_hosts
        .as_deref()
        .and_then(|hosts| hosts.split(',').nth(rank))
    {
        Some(placed) => ("placed", placed).hash(&mut h),
        None => ("named", crate::sys::process::hostname()).hash(&mut h),
    }
    h.finish()
}

/// `MPI_Comm_create`: collective over the parent; members of `group` get
/// the new communicator, others `MPI_COMM_NULL`.
pub fn create(m: &Mpi, h: i32, g: i32) -> MpiResult<i32> {
    let (parent, group) = {
        let t = m.tables();
        (t.comm(h)?, t.group(g)?)
    };
    check_subset(&parent, &group)?;
    if parent.is_inter() {
        let pos = group.rank_of(parent.world(parent.rank));
        let color = if pos.is_some() { 0 } else { UNDEFINED };
        return split_inter(m, h, &parent, color, pos.map_or(0, |p| p as i32));
    }
    let context = new_context(m, &parent)?;
    match group.rank_of(parent.world(parent.rank)) {
        None => Ok(super::consts::COMM_NULL),
        Some(rank) => Ok(register(m, h, Comm::intra(context, group, rank))),
    }
}

fn check_subset(parent: &Comm, group: &Group) -> MpiResult<()> {
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
    Ok(())
}

/// `MPI_Comm_create_group`: collective over the members of `group` only.
pub fn create_group(m: &Mpi, h: i32, g: i32, tag: i32) -> MpiResult<i32> {
    let (parent, group) = {
        let t = m.tables();
        (t.comm(h)?, t.group(g)?)
    };
    intra_only(&parent, "MPI_Comm_create_group")?;
    super::p2p::check_tag_send(tag)?;
    check_subset(&parent, &group)?;
    let Some(rank) = group.rank_of(parent.world(parent.rank)) else {
        return fail(err::GROUP, "this process is not in the group");
    };
    // The subset talks on the parent's collective context, under a tag of
    // its own, its members named by their parent ranks: another subset's
    // collective there (the same tag, other members) must never match.
    let in_parent: Vec<usize> = group
        .members
        .iter()
        .map(|&w| parent.group.rank_of(w).expect("checked"))
        .collect();
    let team = Team {
        engine: &m.engine,
        members: &group.members,
        rank,
        context: parent.coll_context(),
        tag: CREATE_GROUP_TAG + (tag & 0xFFFF),
        wire: Some(&in_parent),
    };
    let context = agree_context(m, &team)?;
    Ok(register(m, h, Comm::intra(context, group, rank)))
}

pub fn free(m: &Mpi, h: i32) -> MpiResult<()> {
    if h == super::consts::COMM_WORLD || h == super::consts::COMM_SELF {
        return fail(
            err::COMM,
            "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed",
        );
    }
    let mut t = m.tables();
    let context = t.comm(h)?.context;
    t.free_or_defer(super::Pin::Comm, h);
    super::collective::forget_shm(context);
    Ok(())
}

pub(super) fn req_result(st: crate::progress::Status) -> MpiResult<crate::progress::Status> {
    match &st.error {
        Some(e) => Err(request_error(e)),
        None => Ok(st),
    }
}

/// Sends `mine` to `peer` of `c` and receives what `peer` sends, on `c`'s
/// point-to-point context with `tag` (the leaders' step of
/// `MPI_Intercomm_create`).
fn swap_with(m: &Mpi, c: &Comm, peer: usize, tag: i32, mine: Vec<u8>) -> MpiResult<Vec<u8>> {
    let send = m.engine.post(Op::Send {
        dest: Some(c.peer_world(peer)),
        src: c.rank as u32,
        context: c.context,
        tag,
        mode: SendMode::Standard,
        layout: Data::of(Owned(mine)),
    });
    let probed = req_result(m.engine.probe(c.context, Src::Rank(peer as u32), Some(tag)))?;
    let mut theirs = vec![0u8; probed.bytes];
    // SAFETY: `theirs` lives until the receive is waited for below.
    let buf = unsafe { RawBuf::new(theirs.as_mut_ptr(), theirs.len()) };
    let recv = m.engine.post(Op::Recv {
        src: Some(Src::Rank(peer as u32)),
        tag: Some(tag),
        context: c.context,
        layout: Data::Bytes(buf),
    });
    let got = m.engine.wait(recv);
    let sent = m.engine.wait(send);
    req_result(got)?;
    req_result(sent)?;
    Ok(theirs)
}

/// Broadcasts a byte vector of any length from `root` over `team`.
pub(super) fn bcast_vec(team: &Team, root: usize, v: &mut Vec<u8>) -> MpiResult<()> {
    let mut len = (v.len() as u64).to_le_bytes();
    // SAFETY: `len` outlives the blocking call.
    coll::bcast(team, root, unsafe { RawBuf::new(len.as_mut_ptr(), 8) })?;
    v.resize(u64::from_le_bytes(len) as usize, 0);
    // SAFETY: `v` outlives the blocking call.
    coll::bcast(team, root, unsafe { RawBuf::new(v.as_mut_ptr(), v.len()) })?;
    Ok(())
}

pub(super) fn encode_group(ctx: u32, g: &Group) -> Vec<u8> {
    let mut v = ctx.to_le_bytes().to_vec();
    for &w in &g.members {
        v.extend_from_slice(&(w as u32).to_le_bytes());
    }
    v
}

pub(super) fn decode_group(b: &[u8], world: usize) -> MpiResult<(u32, Group)> {
    if b.len() < 4 || !b.len().is_multiple_of(4) {
        return fail(err::INTERN, "malformed inter-communicator group message");
    }
    let words: Vec<u32> = b
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4")))
        .collect();
    if words[1..].iter().any(|&w| w as usize >= world) {
        return fail(
            err::INTERN,
            "inter-communicator group names a process outside the job",
        );
    }
    Ok((
        words[0],
        Group {
            members: words[1..].iter().map(|&w| w as usize).collect(),
        },
    ))
}

/// `MPI_Intercomm_create`: the leaders swap their groups (and their
/// groups' highest context ids) over `peer_comm`, then tell their groups.
pub fn intercomm_create(
    m: &Mpi,
    local: i32,
    local_leader: i32,
    peer: i32,
    remote_leader: i32,
    tag: i32,
) -> MpiResult<i32> {
    let lc = m.tables().comm(local)?;
    intra_only(&lc, "MPI_Intercomm_create's local communicator")?;
    if local_leader < 0 || local_leader as usize >= lc.size() {
        return fail(
            err::RANK,
            format!("local leader {local_leader} is not in the local communicator"),
        );
    }
    let leader = local_leader as usize;
    let team = lc.team(m);
    let mine = coll::max_u32(&team, m.tables().max_context)?;
    let mut msg = Vec::new();
    if lc.rank == leader {
        let pc = m.tables().comm(peer)?;
        if remote_leader < 0 || remote_leader as usize >= pc.peers().size() {
            return fail(
                err::RANK,
                format!("remote leader {remote_leader} is not in the peer communicator"),
            );
        }
        super::p2p::check_tag_send(tag)?;
        msg = swap_with(
            m,
            &pc,
            remote_leader as usize,
            tag,
            encode_group(mine, &lc.group),
        )?;
    }
    bcast_vec(&team, leader, &mut msg)?;
    let (theirs, remote) = decode_group(&msg, m.size)?;
    if remote
        .members
        .iter()
        .any(|w| lc.group.rank_of(*w).is_some())
    {
        return fail(err::ARG, "the two groups of an inter-communicator overlap");
    }
    let context = reserve(m, mine.max(theirs));
    let c = Comm {
        remote: Some(Arc::new(remote)),
        ..Comm::intra(context, lc.group.clone(), lc.rank)
    };
    Ok(register(m, local, c))
}

/// `MPI_Intercomm_merge`: the group that said `high` false comes first
/// (when both said the same, the group with the lowest world rank).
pub fn intercomm_merge(m: &Mpi, h: i32, high: bool) -> MpiResult<i32> {
    let ic = m.tables().comm(h)?;
    if !ic.is_inter() {
        return fail(err::COMM, "MPI_Intercomm_merge needs an inter-communicator");
    }
    let u = union_team(m, &ic);
    let team = u.as_team(m);
    let highs = allgather_fixed(&team, &[high as u8])?;
    let remote = ic.remote.as_ref().expect("checked");
    let (my_high, their_high) = if u.local_first {
        (highs[0], highs[ic.size()])
    } else {
        (highs[remote.size()], highs[0])
    };
    let local_first = match (my_high != 0, their_high != 0) {
        (false, true) => true,
        (true, false) => false,
        _ => u.local_first,
    };
    let context = agree_context(m, &team)?;
    let (a, b) = if local_first {
        (&ic.group, remote)
    } else {
        (remote, &ic.group)
    };
    let members: Vec<usize> = a.members.iter().chain(&b.members).copied().collect();
    let rank = if local_first {
        ic.rank
    } else {
        remote.size() + ic.rank
    };
    Ok(register(
        m,
        h,
        Comm::intra(context, Arc::new(Group { members }), rank),
    ))
}

/// A communicator over the first `n` ranks of `parent` with topology
/// `topo`, or `MPI_COMM_NULL` on the others.
fn with_topology(m: &Mpi, h: i32, parent: &Comm, n: usize, topo: Topology) -> MpiResult<i32> {
    let context = new_context(m, parent)?;
    if parent.rank >= n {
        return Ok(super::consts::COMM_NULL);
    }
    let group = Group {
        members: parent.group.members[..n].to_vec(),
    };
    let c = Comm {
        topo: Some(Arc::new(topo)),
        ..Comm::intra(context, Arc::new(group), parent.rank)
    };
    Ok(register(m, h, c))
}

/// `MPI_Cart_create` (ranks are not reordered).
pub fn cart_create(m: &Mpi, h: i32, dims: &[i32], periods: &[bool]) -> MpiResult<i32> {
    let parent = m.tables().comm(h)?;
    intra_only(&parent, "MPI_Cart_create")?;
    let n = topo::cart_size(dims)?;
    if n > parent.size() {
        return fail(
            err::ARG,
            format!(
                "a grid of {n} processes does not fit a communicator of {}",
                parent.size()
            ),
        );
    }
    let t = Topology::Cart {
        dims: dims.to_vec(),
        periods: periods.to_vec(),
    };
    with_topology(m, h, &parent, n, t)
}

/// `MPI_Graph_create` (ranks are not reordered).
pub fn graph_create(m: &Mpi, h: i32, index: &[i32], edges: &[i32]) -> MpiResult<i32> {
    let parent = m.tables().comm(h)?;
    intra_only(&parent, "MPI_Graph_create")?;
    let n = index.len();
    if n > parent.size() {
        return fail(
            err::ARG,
            format!(
                "a graph of {n} nodes does not fit a communicator of {}",
                parent.size()
            ),
        );
    }
    topo::check_graph(index, edges, n)?;
    let t = Topology::Graph {
        index: index.to_vec(),
        edges: edges.to_vec(),
    };
    with_topology(m, h, &parent, n, t)
}

/// The topology of a communicator (`MPI_ERR_TOPOLOGY` if it has none).
pub fn topology(m: &Mpi, h: i32) -> MpiResult<(Arc<Comm>, Arc<Topology>)> {
    let c = m.tables().comm(h)?;
    match c.topo.clone() {
        Some(t) => Ok((c, t)),
        None => fail(err::TOPOLOGY, "the communicator has no topology"),
    }
}

/// `MPI_Cart_sub`.
pub fn cart_sub(m: &Mpi, h: i32, remain: &[bool]) -> MpiResult<i32> {
    let (c, t) = topology(m, h)?;
    let Topology::Cart { dims, periods } = &*t else {
        return fail(err::TOPOLOGY, "MPI_Cart_sub needs a Cartesian communicator");
    };
    if remain.len() != dims.len() {
        return fail(err::ARG, "remain_dims has the wrong length");
    }
    let (color, key, sd, sp) = topo::cart_sub(dims, periods, c.rank, remain);
    let (g, rank) = split_members(m, &c, color, key)?.expect("every rank has a color");
    let context = new_context(m, &c)?;
    let sub = Comm {
        topo: Some(Arc::new(Topology::Cart {
            dims: sd,
            periods: sp,
        })),
        ..Comm::intra(context, Arc::new(g), rank)
    };
    Ok(register(m, h, sub))
}

/// `MPI_Dist_graph_create_adjacent`: each process gives its own edges.
pub fn dist_graph_adjacent(
    m: &Mpi,
    h: i32,
    sources: (&[i32], Option<&[i32]>),
    dests: (&[i32], Option<&[i32]>),
) -> MpiResult<i32> {
    let parent = m.tables().comm(h)?;
    intra_only(&parent, "MPI_Dist_graph_create_adjacent")?;
    let n = parent.size();
    if let Some(r) = sources
        .0
        .iter()
        .chain(dests.0)
        .find(|&&r| r < 0 || r as usize >= n)
    {
        return fail(
            err::RANK,
            format!("graph neighbour {r} is not in the communicator"),
        );
    }
    let t = Topology::DistGraph {
        sources: sources.0.to_vec(),
        source_weights: sources.1.map(<[i32]>::to_vec),
        dests: dests.0.to_vec(),
        dest_weights: dests.1.map(<[i32]>::to_vec),
    };
    with_topology(m, h, &parent, n, t)
}

/// `MPI_Dist_graph_create`: each process gives any edges (source, dest,
/// weight); every process learns its own by an all-to-all.
pub fn dist_graph(m: &Mpi, h: i32, edges: &[(i32, i32, i32)], weighted: bool) -> MpiResult<i32> {
    let parent = m.tables().comm(h)?;
    intra_only(&parent, "MPI_Dist_graph_create")?;
    let n = parent.size();
    if let Some(e) = edges
        .iter()
        .find(|e| e.0 < 0 || e.0 as usize >= n || e.1 < 0 || e.1 as usize >= n)
    {
        return fail(
            err::RANK,
            format!("graph edge {} -> {} is outside the communicator", e.0, e.1),
        );
    }
    // To each process: the edges that start or end at it, as
    // (source, dest, weight) triples of i32.
    let mut out: Vec<Vec<u8>> = vec![Vec::new(); n];
    for &(s, d, w) in edges {
        let rec: Vec<u8> = [s, d, w].iter().flat_map(|x| x.to_le_bytes()).collect();
        out[s as usize].extend_from_slice(&rec);
        if d != s {
            out[d as usize].extend_from_slice(&rec);
        }
    }
    let team = parent.team(m);
    let counts: Vec<u8> = out
        .iter()
        .flat_map(|v| (v.len() as u64).to_le_bytes())
        .collect();
    let mut inc = vec![0u8; 8 * n];
    let eights: Vec<usize> = (0..n).map(|r| 8 * r).collect();
    let lens8 = vec![8; n];
    let mut counts = counts;
    // SAFETY: the buffers outlive the blocking collectives.
    unsafe {
        coll::alltoallv(
            &team,
            RawBuf::new(counts.as_mut_ptr(), counts.len()),
            RawBuf::new(inc.as_mut_ptr(), inc.len()),
            &eights,
            &lens8,
            &eights,
            &lens8,
        )?;
    }
    let rlens: Vec<usize> = inc
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8")) as usize)
        .collect();
    let slens: Vec<usize> = out.iter().map(Vec::len).collect();
    let offs = |l: &[usize]| -> Vec<usize> {
        l.iter()
            .scan(0, |a, &x| {
                let o = *a;
                *a += x;
                Some(o)
            })
            .collect()
    };
    let (soffs, roffs) = (offs(&slens), offs(&rlens));
    let mut sendb: Vec<u8> = out.concat();
    let mut recvb = vec![0u8; rlens.iter().sum()];
    // SAFETY: as above.
    unsafe {
        coll::alltoallv(
            &team,
            RawBuf::new(sendb.as_mut_ptr(), sendb.len()),
            RawBuf::new(recvb.as_mut_ptr(), recvb.len()),
            &soffs,
            &slens,
            &roffs,
            &rlens,
        )?;
    }
    let me = parent.rank as i32;
    let (mut src, mut sw, mut dst, mut dw) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for rec in recvb.chunks_exact(12) {
        let (s, d, w) = (i32_at(rec, 0), i32_at(rec, 1), i32_at(rec, 2));
        if d == me {
            src.push(s);
            sw.push(w);
        }
        if s == me {
            dst.push(d);
            dw.push(w);
        }
    }
    let t = Topology::DistGraph {
        sources: src,
        source_weights: weighted.then_some(sw),
        dests: dst,
        dest_weights: weighted.then_some(dw),
    };
    with_topology(m, h, &parent, n, t)
}
