//! The engine's state, behind the engine's lock: the request table, the
//! matcher, the transport, and what mpiexec announced (failure notices,
//! halt and cleanup). The protocol's reactions are in `protocol.rs`; who
//! holds the lock and who waits is `engine.rs` and `wait.rs`.

use super::matcher::{Matcher, Src, TagSel};
use super::req::{Msg, Req, State};
use super::request::{Op, ReqError, ReqId, Status};
use super::slab::Slab;
use crate::control::client::{Client, ControlReader};
use crate::control::proto::{ToController, ToRank};
use crate::sys::epoll::{self, Epoll};
use crate::sys::eventfd::EventFd;
use crate::transport::{Event, Transport};
use std::sync::Arc;

pub(super) const TOKEN_BELL: u64 = u64::MAX;
/// The control connection to `mpiexec` (failure notices).
pub(super) const TOKEN_CONTROL: u64 = u64::MAX - 1;

/// What `mpiexec` announced about failures and recoveries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Notices {
    /// Newest failure generation announced.
    pub failed: u32,
    /// The epoch to roll back to for that failure.
    pub epoch: u64,
    /// The ranks whose failure that notice announced (for messages).
    pub failed_ranks: Vec<u32>,
    /// Newest generation at which the job resumed.
    pub resumed: u32,
    /// The epoch mpiexec saw every rank hold at that resume, if it did.
    pub agreed: Option<u64>,
    /// Newest epoch every rank completed.
    pub committed: u64,
    /// Newest epoch every rank has on its pfs level.
    pub durable: Option<u64>,
    /// The control connection is gone (mpiexec ended).
    pub orphaned: bool,
    /// mpiexec's answer to this process's `MPI_Comm_spawn`, not yet taken:
    /// (first id, count, error).
    pub spawned: Option<(u32, u32, String)>,
    /// mpiexec's answer to this process's name-service request, not yet
    /// taken: (port, error).
    pub named: Option<(String, String)>,
    /// mpiexec ended `MPI_Finalize`'s barrier: the least durable epoch
    /// of the world's ranks (0: none).
    pub finalized: Option<u64>,
}

pub struct Core {
    pub(super) me: usize,
    pub(super) generation: u32,
    pub(super) control: Option<(ControlReader, Arc<Client>)>,
    /// The epoll sets watching the control connection.
    pub(super) control_sets: Vec<Arc<Epoll>>,
    pub(super) notices: Notices,
    /// Failures are announced by mpiexec (a recovery mode): a lost peer is
    /// not an error until the announcement halts everything.
    pub(super) recovery: bool,
    /// Messages for mpiexec, sent by `flush_outbox`.
    pub(super) outbox: Vec<ToController>,
    /// Without recovery: peers whose connection ended. A receive from one
    /// of them fails instead of waiting for a message that cannot come.
    pub(super) lost: std::collections::HashSet<u32>,
    pub(super) transport: Option<Box<dyn Transport>>,
    pub(super) matcher: Matcher<ReqId, Msg>,
    pub(super) requests: Slab<Req>,
    pub(super) events: Vec<Event>,
    pub(super) spare_events: Vec<Event>,
    /// Counts request completions and unexpected arrivals: anything a
    /// waiting thread may be waiting for. Waiters are woken when it moves.
    pub(super) changes: u64,
    /// A user thread blocked in a wait is polling the transports itself.
    pub(super) polling: bool,
    /// Counts the times a user thread became the poller: the progress
    /// thread stays parked while it keeps moving.
    pub(super) user_polls: u64,
    /// `user_polls` when work was last handed back: the hand-off stands only
    /// if no user thread has polled since (a Waitall goes on waiting).
    pub(super) handoff_polls: u64,
    /// The hand-off timer is running (re-arming costs a system call, and a
    /// VM exit on virtual machines).
    pub(super) handoff_armed: bool,
    /// The progress thread stands aside while a user thread polls.
    pub(super) progress_parked: bool,
    /// Started, not yet completed requests that may move more than an eager
    /// message (rendezvous): only these need the progress thread while the
    /// application computes; small messages just wait in socket buffers.
    pub(super) bulk_active: usize,
    pub(super) waiters: usize,
    pub(super) shutdown: bool,
    /// Joined requests: parts left, the part whose status it reports, and
    /// the status so far.
    pub(super) joins: std::collections::HashMap<ReqId, Join>,
    /// Messages taken from the unexpected queue by a matched probe
    /// (`MPI_Mprobe`), by handle, until a receive takes them.
    pub(super) claimed: std::collections::HashMap<u64, (u32, i32, Msg)>,
    pub(super) next_claim: u64,
    /// Communicators' members, failures the job goes on after, revoked
    /// communicators, agreements (`ulfm.rs`).
    pub(super) ulfm: super::ulfm::Ulfm,
    /// Run first thing in every halt, before any request fails (layers
    /// above stop what may write into the program's memory: windows).
    pub(super) halt_hooks: Vec<Box<dyn Fn() + Send>>,
    /// What readers outside the lock may know (`refresh_outlook`).
    pub(super) outlook: Arc<Outlook>,
}

/// A copy of two facts of the engine's state, for the calls of every
/// collective in shared memory, which would otherwise take the lock to
/// learn them: the generation, and whether nothing (a halt, a failure, a
/// lost peer, a revoked communicator) can refuse a collective. Written
/// under the lock wherever those change (`Core::refresh_outlook`); read
/// without it, a value is one the lock could have given a moment before.
#[derive(Default)]
pub struct Outlook {
    pub(super) generation: std::sync::atomic::AtomicU32,
    pub(super) calm: std::sync::atomic::AtomicBool,
    /// Counts the refreshes, each rung (`futex::ring_private`): a thread
    /// asleep in a collective in shared memory sleeps on it too, so a
    /// failure, a halt or a revocation wakes it at once.
    pub(super) bell: std::sync::atomic::AtomicU32,
}

pub(super) struct Join {
    pub(super) left: usize,
    pub(super) report: ReqId,
    pub(super) status: Status,
    /// The tag the joined request reports, if not its part's (a
    /// partitioned message travels under a tag of its own).
    pub(super) shown_tag: Option<i32>,
}

impl Core {
    /// The state of rank `me` at `generation` (a replacement is halted
    /// until the job resumes), with no control connection yet.
    pub(super) fn new(
        me: usize,
        generation: u32,
        replacement: bool,
        transport: Option<Box<dyn Transport>>,
        recovery: bool,
    ) -> Core {
        Core {
            recovery,
            outbox: Vec::new(),
            lost: Default::default(),
            me,
            generation,
            control: None,
            control_sets: Vec::new(),
            notices: Notices {
                resumed: if replacement {
                    generation.saturating_sub(1)
                } else {
                    generation
                },
                failed: generation,
                ..Notices::default()
            },
            transport,
            matcher: Matcher::default(),
            requests: Slab::new(),
            events: Vec::new(),
            spare_events: Vec::new(),
            changes: 0,
            polling: false,
            user_polls: 0,
            handoff_polls: 0,
            handoff_armed: false,
            progress_parked: false,
            bulk_active: 0,
            waiters: 0,
            shutdown: false,
            joins: Default::default(),
            claimed: Default::default(),
            next_claim: 1,
            ulfm: Default::default(),
            halt_hooks: Vec::new(),
            outlook: Default::default(),
        }
        .with_outlook()
    }

    fn with_outlook(self) -> Core {
        self.refresh_outlook();
        self
    }

    /// Brings `outlook` up to date; called wherever the generation, the
    /// notices, the dead, the lost or the revoked change.
    pub(super) fn refresh_outlook(&self) {
        use std::sync::atomic::Ordering::Release;
        let calm = !self.halted() && (self.failure_free() || self.recovery);
        self.outlook.generation.store(self.generation, Release);
        self.outlook.calm.store(calm, Release);
        self.outlook.bell.fetch_add(1, Release);
        crate::sys::futex::ring_private(&self.outlook.bell);
    }

    pub(super) fn req(&self, id: ReqId) -> Option<&Req> {
        self.requests.get(id)
    }

    pub(super) fn req_mut(&mut self, id: ReqId) -> Option<&mut Req> {
        self.requests.get_mut(id)
    }

    pub(super) fn alloc(&mut self, req: Req) -> ReqId {
        self.requests.insert(req)
    }

    pub(super) fn release(&mut self, id: ReqId) {
        self.requests.discard(id);
    }

    /// Reads the transport's sockets directly (see `Transport::poll_reads`)
    /// and handles what came in; false if the transport declined.
    pub(super) fn poll_reads(&mut self) -> bool {
        let done = self
            .read_in_place(|t, events, place| t.poll_reads(events, place))
            .unwrap_or(false);
        self.process_events();
        done
    }

    /// Reads every connection once without epoll (`Transport::read_all`).
    pub(super) fn read_all(&mut self) {
        self.read_in_place(|t, events, place| t.read_all(events, place));
        self.process_events();
    }

    /// About to sleep in epoll: false if the transport holds bytes that
    /// epoll would not report (shared memory).
    pub(super) fn prepare_sleep(&mut self) -> bool {
        self.transport.as_mut().is_none_or(|t| t.prepare_sleep())
    }

    pub(super) fn handle(&mut self, evs: &[epoll::Event], bell: &EventFd) {
        self.expire_doomed();
        for ev in evs {
            if ev.token == TOKEN_BELL {
                bell.drain();
            } else if ev.token == TOKEN_CONTROL {
                self.on_control(bell);
            } else if let Some(t) = self.transport.as_mut() {
                t.handle(*ev, &mut self.events);
            }
        }
        // Shared memory has no events of its own while its reader is awake.
        self.read_in_place(|t, events, place| t.poll_memory(events, place));
        self.process_events();
    }

    /// Reads failure notices from mpiexec.
    pub(super) fn on_control(&mut self, bell: &EventFd) {
        let Some((reader, _)) = self.control.as_mut() else {
            return;
        };
        let mut msgs = Vec::new();
        if reader.read(&mut msgs).is_err() {
            // mpiexec is gone: the job is over (PDEATHSIG ends this process
            // soon); stop watching the socket.
            self.notices.orphaned = true;
            let fd = reader.fd();
            for set in &self.control_sets {
                let _ = set.delete(fd);
            }
            self.control = None;
            self.changes += 1;
            return;
        }
        let mut wake = false;
        for m in msgs {
            wake |= self.on_notice(m);
        }
        self.flush_outbox();
        if wake {
            // A user thread may be asleep in the main epoll set (the
            // progress thread read the socket): wake it.
            bell.ring();
        }
    }

    /// Sends what the protocol has for mpiexec (nothing leaves without a
    /// control connection: a job of one process, or a test).
    pub(super) fn flush_outbox(&mut self) {
        if self.outbox.is_empty() {
            return;
        }
        match &self.control {
            Some((_, client)) => {
                for msg in self.outbox.drain(..) {
                    let _ = client.send(&msg);
                }
            }
            None if self.recovery => {}
            None => self.outbox.clear(),
        }
    }

    /// What a notice from mpiexec changes; true if a waiting thread must
    /// look (a failure halted communication, or the job resumed).
    pub(super) fn on_notice(&mut self, notice: ToRank) -> bool {
        match notice {
            ToRank::Failure {
                generation,
                epoch,
                failed,
            } if generation > self.notices.failed => {
                log::debug!(
                    "mpistages: rank {}: failure of {failed:?} announced: generation {generation}, epoch {epoch}; halting",
                    self.me
                );
                self.notices.failed = generation;
                self.notices.epoch = epoch;
                if let Some(t) = self.transport.as_mut() {
                    let failed: Vec<usize> = failed.iter().map(|&r| r as usize).collect();
                    t.forget_peers(&failed, generation);
                }
                self.notices.failed_ranks = failed;
                self.refresh_outlook();
                self.halt();
                self.outbox.push(ToController::Halted { generation });
                true
            }
            ToRank::Resume {
                generation,
                agreed,
                joined,
            } => {
                log::debug!(
                    "mpistages: rank {}: the job resumes at generation {generation} (agreed epoch {agreed:?}, new processes {joined:?})",
                    self.me
                );
                if let Some(t) = self.transport.as_mut() {
                    for (r, born, addr) in joined {
                        match addr.parse() {
                            Ok(a) if r as usize != self.me => t.learn_address(r as usize, born, a),
                            Ok(_) => {}
                            Err(_) => log::warn!("mpistages: bad address '{addr}' for rank {r}"),
                        }
                    }
                }
                if generation >= self.notices.resumed {
                    self.notices.resumed = generation;
                    self.notices.agreed = agreed;
                    self.refresh_outlook();
                }
                self.changes += 1;
                true
            }
            ToRank::ProcFailed { ranks } => {
                log::debug!("mpistages: rank {}: ranks {ranks:?} failed", self.me);
                self.on_proc_failed(&ranks);
                true
            }
            ToRank::Revoked { context } => {
                self.on_revoked(context);
                true
            }
            ToRank::Agreed {
                context,
                seq,
                flag,
                failed,
                unacked,
                proposal,
            } => {
                let a = super::ulfm::Agreed {
                    flag,
                    failed,
                    unacked,
                    proposal,
                };
                self.on_agreed(context, seq, a);
                true
            }
            ToRank::Spawned {
                first,
                count,
                error,
            } => {
                self.notices.spawned = Some((first, count, error));
                self.changes += 1;
                true
            }
            ToRank::Named { port, error } => {
                self.notices.named = Some((port, error));
                self.changes += 1;
                true
            }
            ToRank::Finalized { durable } => {
                self.notices.finalized = Some(durable);
                self.changes += 1;
                true
            }
            ToRank::Committed { epoch, durable } => {
                self.notices.committed = self.notices.committed.max(epoch);
                // Not a maximum: a recovery starts the count again.
                self.notices.durable = durable;
                false
            }
            _ => false,
        }
    }

    /// Communication is stopped: a failure was announced and this rank has
    /// not rolled back yet, or it is waiting for the job to resume.
    pub fn halted(&self) -> bool {
        self.notices.failed > self.generation || self.notices.resumed < self.generation
    }

    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// The ranks named by the newest failure notice.
    pub fn failed_ranks(&self) -> Vec<u32> {
        self.notices.failed_ranks.clone()
    }

    /// Stages `halt`: every active request fails with `Halted` (the
    /// application sees MPIX_TRY_RELOAD) and the transport lets go of user
    /// memory.
    pub(super) fn halt(&mut self) {
        for hook in &self.halt_hooks {
            hook();
        }
        if let Some(t) = self.transport.as_mut() {
            t.halt(self.notices.failed);
        }
        let active = self
            .requests
            .ids_where(|r| matches!(r.state, State::Active(_)));
        for id in active {
            self.fail(id, ReqError::Halted);
        }
        self.changes += 1;
    }

    /// Stages `cleanup` at the start of a rollback to `generation`: queues
    /// are emptied, one-shot requests are gone, persistent requests are
    /// inactive, and only messages of `generation` are accepted from now on.
    pub fn cleanup(&mut self, generation: u32) {
        self.halt();
        self.matcher.clear();
        self.joins.clear();
        self.claimed.clear();
        self.requests.retain(|r| {
            let keep = r.persistent && !r.freed;
            if keep {
                r.state = State::Inactive;
                r.packed = None;
                r.bulk = false;
            }
            keep
        });
        self.bulk_active = 0;
        if let Some(t) = self.transport.as_mut() {
            t.cleanup(generation);
        }
        self.generation = generation;
        self.refresh_outlook();
        self.changes += 1;
    }

    /// The application's requests that are started or completed but not
    /// yet waited for. (A window agent's reply is not one: it may be
    /// between its completion and its agent's wait at any moment.)
    pub fn pending_requests(&self) -> usize {
        self.pending().count()
    }

    fn pending(&self) -> impl Iterator<Item = &Req> {
        self.requests
            .iter()
            .map(|(_, r)| r)
            .filter(|r| !r.internal && !matches!(r.state, State::Inactive))
    }

    /// What the pending requests are, for a message: "a receive (context
    /// C, tag T)", "a send to world rank R (context C, tag T)", "a
    /// non-blocking collective", each with its state.
    pub fn pending_summary(&self) -> Vec<String> {
        self.pending()
            .map(|r| {
                let what = match &r.op {
                    Op::Send {
                        dest, context, tag, ..
                    } => match dest {
                        Some(d) => {
                            format!("a send to world rank {d} (context {context}, tag {tag})")
                        }
                        None => format!("a send to MPI_PROC_NULL (context {context}, tag {tag})"),
                    },
                    Op::Recv { context, tag, .. } => match tag {
                        Some(t) => format!("a receive (context {context}, tag {t})"),
                        None => format!("a receive (context {context}, any tag)"),
                    },
                    Op::External => "a non-blocking collective".to_string(),
                };
                let state = match &r.state {
                    State::Active(_) => "in progress",
                    _ => "complete, not waited for",
                };
                format!("{what}, {state}")
            })
            .collect()
    }

    // ---- queries of the request table (the engine's intent-level
    // operations below are built from these) ----

    pub(super) fn done_among(&self, ids: &[ReqId]) -> Vec<usize> {
        (0..ids.len()).filter(|&i| self.is_done(ids[i])).collect()
    }

    /// Started and not complete.
    pub(super) fn is_running(&self, id: ReqId) -> bool {
        matches!(
            self.req(id),
            Some(Req {
                state: State::Active(_),
                ..
            })
        )
    }

    pub fn is_done(&self, id: ReqId) -> bool {
        matches!(
            self.req(id),
            Some(Req {
                state: State::Done(_),
                ..
            })
        )
    }

    pub fn is_inactive(&self, id: ReqId) -> bool {
        matches!(
            self.req(id),
            Some(Req {
                state: State::Inactive,
                ..
            })
        )
    }

    pub fn exists(&self, id: ReqId) -> bool {
        self.req(id).is_some()
    }

    /// The request in slot `index`, if any.
    pub fn id_at(&self, index: u32) -> Option<ReqId> {
        self.requests.id_at(index)
    }

    /// Takes the status of a completed request: a non-persistent request is
    /// released, a persistent one becomes inactive.
    pub fn take(&mut self, id: ReqId) -> Option<Status> {
        let r = self.req_mut(id)?;
        if !matches!(r.state, State::Done(_)) {
            return None;
        }
        let State::Done(st) = std::mem::replace(&mut r.state, State::Inactive) else {
            unreachable!("checked just above")
        };
        if !r.persistent {
            self.release(id);
        }
        Some(st)
    }
}

impl Core {
    /// A matched probe: takes the message `probe` would see out of the
    /// queue, under a handle for `receive_claimed`.
    pub(super) fn claim(&mut self, ctx: u32, src: Src, tag: TagSel) -> Option<(u64, Status)> {
        let st = self.probe(ctx, src, tag)?;
        if st.error.is_some() {
            return Some((0, st));
        }
        // The claim handle only stands in the matcher for this call: the
        // message is there (probe saw it), so post matches it at once.
        let (s, t, msg) = self
            .matcher
            .post(
                ctx,
                src,
                tag,
                ReqId {
                    index: u32::MAX,
                    serial: 0,
                },
            )
            .expect("the probed message matches");
        let h = self.next_claim;
        self.next_claim += 1;
        self.claimed.insert(h, (s, t, msg));
        Some((h, st))
    }

    pub(super) fn probe(&self, ctx: u32, src: Src, tag: TagSel) -> Option<Status> {
        if self.halted() {
            let mut st = Status::empty();
            st.error = Some(ReqError::Halted);
            return Some(st);
        }
        let (s, t, m) = self.matcher.peek(ctx, src, tag)?;
        Some(Status {
            source: s as i32,
            tag: t,
            bytes: m.len,
            cancelled: false,
            error: None,
        })
    }
}
