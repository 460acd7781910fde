//! What the engine knows of communicators and of failures the job goes on
//! after (`--recovery ulfm`), and what that does to requests:
//! - every communicator's context pair is registered with the world ranks
//!   its point-to-point ranks name and all its members, so a receive from
//!   rank s of a communicator can be told to involve a dead process;
//! - mpiexec announces each death (`ToRank::ProcFailed`) to every rank in
//!   the same order; then what involves the dead process fails with
//!   `PeerLost` (MPIX_ERR_PROC_FAILED): sends to it, receives from it,
//!   every operation on the collective context of a communicator it is
//!   in, and wildcard receives on such a communicator while a failure
//!   there is not acknowledged (reported by waits as pending, and the
//!   receive stays posted: `wildcard_blocked`);
//! - a revoked communicator (`MPIX_Comm_revoke` here or at any member)
//!   fails everything pending and started on it (`Revoked`);
//! - agreements (`MPIX_Comm_agree`, `MPIX_Comm_shrink`) are answered by
//!   mpiexec; the answers wait here for the thread that asked.
//!
//! Without ULFM nothing is announced and only the registry is used (to
//! tell which receives a lost connection ends).

use super::matcher::Src;
use super::req::{Phase, Req, State};
use super::request::{Op, ReqError, ReqId};
use super::state::Core;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a collective operation on a communicator with a dead member
/// may still wait for its messages from live members before it fails. A
/// member that died after its part of the collective leaves the others
/// able to finish (as a duplicate whose agreement it completed); one that
/// died before leaves some of them waiting for members that gave up: those
/// fail when this runs out (no wait after a failure is unbounded).
const GRACE: Duration = Duration::from_millis(500);

/// The world ranks of one communicator.
#[derive(Clone, Debug)]
pub struct Members {
    /// Point-to-point rank → world rank (the remote group of an
    /// inter-communicator).
    pub peers: Arc<[u32]>,
    /// Collective rank → world rank: the group, or for an
    /// inter-communicator both groups in the order its collectives number
    /// them (`api::comm::union_team`).
    pub coll: Arc<[u32]>,
    /// Every member (both groups of an inter-communicator).
    pub all: Arc<[u32]>,
}

/// mpiexec's answer to an agreement (`ToRank::Agreed`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agreed {
    pub flag: u32,
    pub failed: Vec<u32>,
    pub unacked: bool,
    pub proposal: u32,
}

#[derive(Default)]
pub(super) struct Ulfm {
    /// Communicators by the even context of their pair.
    contexts: HashMap<u32, Members>,
    /// Dead world ranks, in the order this process learned of them (from
    /// mpiexec, which tells every rank in one order, or from a connection
    /// that ended first).
    dead: Vec<u32>,
    dead_set: HashSet<u32>,
    /// Revoked communicators (even contexts).
    revoked: HashSet<u32>,
    /// Failures acknowledged per communicator: the first n of its failures.
    acked: HashMap<u32, usize>,
    /// The next agreement number per communicator.
    seq: HashMap<u32, u32>,
    /// Answers not yet taken, by (context, agreement number).
    agreed: HashMap<(u32, u32), Agreed>,
    /// When the collective operations under way on communicators with a
    /// dead member fail, if any are (`GRACE`).
    doomed: Option<Instant>,
}

/// The even context of a communicator's pair.
fn base(ctx: u32) -> u32 {
    ctx & !1
}

/// A collective context (the odd one of a pair).
fn collective(ctx: u32) -> bool {
    ctx & 1 == 1
}

impl Core {
    pub(super) fn register_context(&mut self, ctx: u32, m: Members) {
        self.ulfm.contexts.insert(base(ctx), m);
    }

    /// World rank of the process that sends as `src` on context `ctx`:
    /// `None` if it is no member; `Some(src)` on a context no communicator
    /// registered (a test's: there sources are world ranks).
    fn world_of(&self, ctx: u32, src: u32) -> Option<u32> {
        let Some(m) = self.ulfm.contexts.get(&base(ctx)) else {
            return Some(src);
        };
        let table = if collective(ctx) { &m.coll } else { &m.peers };
        table.get(src as usize).copied()
    }

    fn dead(&self, world: u32) -> bool {
        self.ulfm.dead_set.contains(&world) || self.lost.contains(&world)
    }

    /// The dead members of the communicator of `ctx`, in the order their
    /// deaths were announced (the point-to-point group's).
    pub(super) fn failed_members(&self, ctx: u32) -> Vec<u32> {
        let Some(m) = self.ulfm.contexts.get(&base(ctx)) else {
            return Vec::new();
        };
        self.ulfm
            .dead
            .iter()
            .copied()
            .filter(|d| m.peers.contains(d))
            .collect()
    }

    /// Acknowledges the first `n` failures of the communicator of `ctx`
    /// (never fewer than before); returns how many are acknowledged.
    pub(super) fn ack(&mut self, ctx: u32, n: usize) -> usize {
        let known = self.failed_members(ctx).len();
        let a = self.ulfm.acked.entry(base(ctx)).or_default();
        *a = (*a).max(n.min(known));
        *a
    }

    pub(super) fn acked(&self, ctx: u32) -> usize {
        self.ulfm.acked.get(&base(ctx)).copied().unwrap_or(0)
    }

    fn unacked(&self, ctx: u32) -> bool {
        self.failed_members(ctx).len() > self.acked(ctx)
    }

    pub(super) fn is_revoked(&self, ctx: u32) -> bool {
        self.ulfm.revoked.contains(&base(ctx))
    }

    pub(super) fn next_agreement(&mut self, ctx: u32) -> u32 {
        let s = self.ulfm.seq.entry(base(ctx)).or_default();
        *s += 1;
        *s - 1
    }

    pub(super) fn take_agreed(&mut self, ctx: u32, seq: u32) -> Option<Agreed> {
        self.ulfm.agreed.remove(&(base(ctx), seq))
    }

    pub(super) fn on_agreed(&mut self, ctx: u32, seq: u32, a: Agreed) {
        self.ulfm.agreed.insert((base(ctx), seq), a);
        self.changes += 1;
    }

    /// Why a collective waiting on `members` (world ranks) outside the
    /// engine (in memory the members share) must stop, if anything known
    /// here says so: a halt for recovery, a revoked communicator, a dead or
    /// lost member (with recovery on, only the halt that follows).
    pub(super) fn team_refused(&self, ctx: u32, members: &[usize]) -> Option<ReqError> {
        if self.halted() {
            return Some(ReqError::Halted);
        }
        if self.failure_free() || self.recovery {
            return None;
        }
        if self.is_revoked(ctx) {
            return Some(ReqError::Revoked);
        }
        members
            .iter()
            .find(|&&w| self.dead(w as u32) || self.lost.contains(&(w as u32)))
            .map(|&w| ReqError::PeerLost(w))
    }

    /// No failure, lost peer or revoked communicator is known here.
    pub(super) fn failure_free(&self) -> bool {
        self.ulfm.revoked.is_empty() && self.lost.is_empty() && self.ulfm.dead.is_empty()
    }

    /// Why `op` cannot start, if a revocation or a failure forbids it
    /// whatever has arrived: a revoked communicator, a send to a dead
    /// process, a collective's message on a communicator with one.
    pub(super) fn refused(&self, op: &Op) -> Option<ReqError> {
        if self.failure_free() {
            return None;
        }
        let (ctx, dest) = match op {
            Op::Send { dest, context, .. } => (*context, *dest),
            Op::Recv { context, .. } => (*context, None),
            Op::External => return None,
        };
        if self.is_revoked(ctx) {
            return Some(ReqError::Revoked);
        }
        dest.filter(|&d| self.dead(d as u32))
            .map(ReqError::PeerLost)
    }

    /// A collective's message started on a communicator with a dead
    /// member: it may wait `GRACE` at most (`expire_doomed`).
    pub(super) fn note_started(&mut self, id: ReqId) {
        // (Nothing to look at on the common path: no failure.)
        if self.ulfm.dead.is_empty() || self.ulfm.doomed.is_some() {
            return;
        }
        let ctx = match self.req(id).map(|r| &r.op) {
            Some(Op::Send { context, .. } | Op::Recv { context, .. }) => *context,
            _ => return,
        };
        if collective(ctx) && self.dead_member(ctx).is_some() {
            self.ulfm.doomed = Some(Instant::now() + GRACE);
        }
    }

    /// How long a thread may sleep in epoll: until the collectives under
    /// way on communicators with a dead member fail, else as long as
    /// nothing happens.
    pub(super) fn sleep_timeout(&self) -> i32 {
        self.ulfm.doomed.map_or(-1, |t| {
            let ms = t.saturating_duration_since(Instant::now()).as_millis();
            i32::try_from(ms).unwrap_or(i32::MAX - 1).saturating_add(1)
        })
    }

    /// The active requests a dead process keeps waiting: those that
    /// involve one directly (its connection has not ended yet) and the
    /// collective ones on communicators with a dead member.
    fn doomed_requests(&self) -> Vec<(ReqId, ReqError)> {
        self.requests
            .iter()
            .filter(|(_, q)| matches!(q.state, State::Active(_)))
            .filter_map(|(id, q)| {
                let direct = self.ulfm.dead.iter().find(|&&d| self.involves(q, d));
                let member = match &q.op {
                    Op::Send { context, .. } | Op::Recv { context, .. } if collective(*context) => {
                        self.dead_member(*context)
                    }
                    _ => None,
                };
                direct
                    .copied()
                    .or(member)
                    .map(|d| (id, ReqError::PeerLost(d as usize)))
            })
            .collect()
    }

    /// Fails what a dead process still keeps waiting once `GRACE` ran out
    /// (a connection that never reports its end: a lost host).
    pub(super) fn expire_doomed(&mut self) {
        match self.ulfm.doomed {
            Some(t) if Instant::now() >= t => self.ulfm.doomed = None,
            _ => return,
        }
        let ended = self.doomed_requests();
        if !ended.is_empty() {
            self.fail_all(ended);
            self.changes += 1;
        }
    }

    pub(super) fn blocked_among(&self, ids: &[ReqId]) -> Vec<usize> {
        (0..ids.len())
            .filter(|&i| self.wildcard_blocked(ids[i]))
            .collect()
    }

    /// Why a receive that matched nothing already there cannot wait: its
    /// source is dead, or it takes any source on a communicator with a
    /// failure not acknowledged.
    pub(super) fn refused_unmatched(&self, ctx: u32, src: Src) -> Option<ReqError> {
        if self.lost.is_empty() && self.ulfm.dead.is_empty() {
            return None;
        }
        match src {
            // Unregistered contexts (a test's): ranks are world ranks.
            Src::Rank(s) => {
                let w = self.world_of(ctx, s)?;
                self.gone(w).then_some(ReqError::PeerLost(w as usize))
            }
            // It stays posted: a wait reports the pending failure
            // (`wildcard_blocked`) and may wait again after an ack.
            Src::Any => None,
        }
    }

    /// A wildcard receive still posted on a communicator with a failure
    /// not acknowledged: waits report MPIX_ERR_PROC_FAILED_PENDING for it
    /// and leave it posted (a message may still match it, or the failure
    /// be acknowledged and the wait resumed).
    pub(super) fn wildcard_blocked(&self, id: ReqId) -> bool {
        match self.req(id) {
            Some(Req {
                op:
                    Op::Recv {
                        src: Some(Src::Any),
                        context,
                        ..
                    },
                state: State::Active(Phase::RecvPosted),
                ..
            }) => !self.ulfm.dead.is_empty() && self.unacked(*context),
            _ => false,
        }
    }

    /// A dead member of the communicator of `ctx`, if there is one.
    fn dead_member(&self, ctx: u32) -> Option<u32> {
        let m = self.ulfm.contexts.get(&base(ctx))?;
        m.all.iter().copied().find(|&w| self.dead(w))
    }

    /// Whether the active request `r` sends to or receives from world
    /// rank `peer` (a wildcard receive does not: it stays posted).
    fn involves(&self, r: &Req, peer: u32) -> bool {
        match (&r.op, &r.state) {
            (Op::Send { dest, .. }, State::Active(_)) => *dest == Some(peer as usize),
            (
                Op::Recv {
                    src: Some(Src::Rank(s)),
                    context,
                    ..
                },
                State::Active(Phase::RecvPosted),
            ) => self.world_of(*context, *s) == Some(peer),
            (Op::Recv { context, .. }, State::Active(Phase::RecvData { status, .. })) => {
                // A rendezvous under way: from the sender it matched.
                self.world_of(*context, status.source as u32) == Some(peer)
            }
            _ => false,
        }
    }

    /// The connection to `peer` ended, or it is dead and this process has
    /// none: nothing more can come from it.
    fn gone(&self, peer: u32) -> bool {
        self.lost.contains(&peer)
            || (self.ulfm.dead_set.contains(&peer)
                && !self
                    .transport
                    .as_ref()
                    .is_some_and(|t| t.connected(peer as usize)))
    }

    /// Fails the active requests that send to or receive from `peer`.
    pub(super) fn fail_involving(&mut self, peer: u32) {
        let ended: Vec<(ReqId, ReqError)> = self
            .requests
            .iter()
            .filter(|(_, q)| self.involves(q, peer))
            .map(|(id, _)| (id, ReqError::PeerLost(peer as usize)))
            .collect();
        self.fail_all(ended);
    }

    /// World rank `r` is dead (announced, or its connection ended).
    pub(super) fn note_dead(&mut self, r: u32) {
        if self.ulfm.dead_set.insert(r) {
            self.ulfm.dead.push(r);
            self.refresh_outlook();
        }
    }

    /// mpiexec announced deaths. What goes to a dead process fails now,
    /// and what comes from one once its connection has ended (what it
    /// sent before it died is read first), or at once if it had none.
    /// Collectives on its communicators get `GRACE` to finish.
    pub(super) fn on_proc_failed(&mut self, ranks: &[u32]) {
        for &r in ranks {
            self.note_dead(r);
            if self.gone(r) {
                self.fail_involving(r);
            } else {
                let sends: Vec<(ReqId, ReqError)> = self
                    .requests
                    .iter()
                    .filter(|(_, q)| {
                        matches!((&q.op, &q.state), (Op::Send { dest, .. }, State::Active(_)) if *dest == Some(r as usize))
                    })
                    .map(|(id, _)| (id, ReqError::PeerLost(r as usize)))
                    .collect();
                self.fail_all(sends);
            }
        }
        if self.ulfm.doomed.is_none() && !self.doomed_requests().is_empty() {
            self.ulfm.doomed = Some(Instant::now() + GRACE);
        }
        self.changes += 1;
    }

    /// The communicator of `ctx` is revoked (here, or by another member):
    /// everything pending on it fails.
    pub(super) fn on_revoked(&mut self, ctx: u32) {
        let b = base(ctx);
        if !self.ulfm.revoked.insert(b) {
            return;
        }
        self.refresh_outlook();
        let ended: Vec<(ReqId, ReqError)> = self
            .requests
            .iter()
            .filter(|(_, q)| matches!(q.state, State::Active(_)))
            .filter(|(_, q)| match &q.op {
                Op::Send { context, .. } | Op::Recv { context, .. } => base(*context) == b,
                Op::External => false,
            })
            .map(|(id, _)| (id, ReqError::Revoked))
            .collect();
        self.fail_all(ended);
        self.changes += 1;
    }

    /// Fails each request, taking a posted receive out of the matcher.
    pub(super) fn fail_all(&mut self, ended: Vec<(ReqId, ReqError)>) {
        for (id, e) in ended {
            if let Some(Req {
                op: Op::Recv { context, .. },
                state: State::Active(Phase::RecvPosted),
                ..
            }) = self.req_mut(id)
            {
                let ctx = *context;
                self.matcher.cancel(ctx, id);
            }
            self.fail(id, e);
        }
    }
}
