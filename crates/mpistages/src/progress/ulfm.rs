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
use super::protocol::{Phase, Req, State};
use super::request::{Op, ReqError, ReqId};
use super::state::Core;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The world ranks of one communicator.
#[derive(Clone, Debug)]
pub struct Members {
    /// Point-to-point rank → world rank (the remote group of an
    /// inter-communicator).
    pub peers: Arc<[u32]>,
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

    /// World rank of point-to-point rank `src` on context `ctx`, if known.
    fn world_of(&self, ctx: u32, src: u32) -> Option<u32> {
        let m = self.ulfm.contexts.get(&base(ctx))?;
        m.peers.get(src as usize).copied()
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

    /// Why `op` cannot start, if a revocation or a failure forbids it
    /// whatever has arrived: a revoked communicator, a send to a dead
    /// process, a collective's message on a communicator with one.
    pub(super) fn refused(&self, op: &Op) -> Option<ReqError> {
        if self.ulfm.revoked.is_empty() && self.lost.is_empty() {
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
        if let Some(d) = dest.filter(|&d| self.dead(d as u32)) {
            return Some(ReqError::PeerLost(d));
        }
        if collective(ctx) {
            return self
                .dead_member(ctx)
                .map(|d| ReqError::PeerLost(d as usize));
        }
        None
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
        if self.lost.is_empty() {
            return None;
        }
        match src {
            // Unregistered contexts (a test's): ranks are world ranks.
            Src::Rank(s) => {
                let w = self.world_of(ctx, s).unwrap_or(s);
                self.dead(w).then_some(ReqError::PeerLost(w as usize))
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

    /// How the death of world rank `peer` ends the active request `r`, if
    /// it does. `announced`: mpiexec said so (else only the connection
    /// ended: only what goes to or comes from `peer` fails).
    pub(super) fn ended_by(&self, r: &Req, peer: u32, announced: bool) -> Option<ReqError> {
        let lost = Some(ReqError::PeerLost(peer as usize));
        let (ctx, from) = match (&r.op, &r.state) {
            (Op::Send { dest, context, .. }, State::Active(_)) => {
                if *dest == Some(peer as usize) {
                    return lost;
                }
                (*context, None)
            }
            (Op::Recv { src, context, .. }, State::Active(Phase::RecvPosted)) => {
                (*context, src.as_ref())
            }
            (Op::Recv { context, .. }, State::Active(Phase::RecvData { status, .. })) => {
                // A rendezvous under way: from the sender it matched.
                if self.world_of(*context, status.source as u32) == Some(peer) {
                    return lost;
                }
                (*context, None)
            }
            _ => return None,
        };
        if let Some(Src::Rank(s)) = from {
            // Unregistered contexts (a test's): ranks are world ranks.
            if self.world_of(ctx, *s).unwrap_or(*s) == peer {
                return lost;
            }
        }
        let member = self
            .ulfm
            .contexts
            .get(&base(ctx))
            .is_some_and(|m| m.all.contains(&peer));
        if !announced || !member {
            return None;
        }
        // A wildcard receive stays posted (`wildcard_blocked`).
        collective(ctx).then_some(ReqError::PeerLost(peer as usize))
    }

    /// World rank `r` is dead (announced, or its connection ended).
    pub(super) fn note_dead(&mut self, r: u32) {
        if self.ulfm.dead_set.insert(r) {
            self.ulfm.dead.push(r);
        }
    }

    /// mpiexec announced deaths: what involves them fails.
    pub(super) fn on_proc_failed(&mut self, ranks: &[u32]) {
        for &r in ranks {
            self.note_dead(r);
            self.lost.insert(r);
            let ended: Vec<(ReqId, ReqError)> = self
                .requests
                .iter()
                .filter_map(|(id, q)| self.ended_by(q, r, true).map(|e| (id, e)))
                .collect();
            self.fail_all(ended);
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
