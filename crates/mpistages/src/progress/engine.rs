//! The engine's face: `Engine` holds its state (`state::Core`) behind one
//! lock, and offers intent-level operations — post, start, wait, take,
//! cancel, probe, halt and rollback queries — that run under it. The
//! protocol is `protocol.rs`, the wait policy `wait.rs`.

use super::matcher::{Src, TagSel};
use super::req::{Phase, Req, State};
use super::request::{Op, ReqError, ReqId, Status};
use super::spin::SpinBudget;
use super::state::{Core, TOKEN_BELL, TOKEN_CONTROL};
use crate::control::client::{Client, ControlReader};
use crate::sys::epoll::{self, Epoll};
use crate::sys::eventfd::EventFd;
use crate::sys::timerfd::TimerFd;
use crate::transport::Transport;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    /// A progress thread advances communication at all times.
    Thread,
    /// The waiting user thread advances communication.
    Poll,
}

pub struct EngineConfig {
    /// A waiting thread polls this long before it sleeps, at first ...
    pub spin: Duration,
    /// ... and up to this long when recent waits needed it (`spin.rs`).
    pub spin_max: Duration,
    /// A polling thread gives its core away between rounds (`sched_yield`):
    /// on an oversubscribed machine the process it waits for may need it.
    pub spin_yield: bool,
    /// How often a parked progress thread looks whether it is needed
    /// (`STANDBY`, or longer on a crowded host).
    pub standby: Duration,
    pub me: usize,
    pub size: usize,
    pub generation: u32,
    pub mode: ProgressMode,
    pub epoll: Arc<Epoll>,
    /// `None` for a job of one process.
    pub transport: Option<Box<dyn Transport>>,
    /// Failure notices from `mpiexec` arrive here (`--recovery stages`).
    pub control: Option<(ControlReader, Arc<Client>)>,
    /// A replacement process: halted until the job resumes.
    pub replacement: bool,
    /// `--recovery ulfm`: the job goes on after a failure and what
    /// involves the dead process fails (no halt for a recovery).
    pub ulfm: bool,
}

/// Who advances communication: a user thread blocked in a wait polls the
/// transports itself (no thread hand-off on the latency path); whenever no
/// user thread waits, the progress thread does (strong progress while the
/// application computes). In `poll` mode there is no progress thread.
pub struct Engine {
    pub(super) core: Mutex<Core>,
    pub(super) cond: Condvar,
    /// Transport sockets and `bell`.
    pub(super) main: Arc<Epoll>,
    /// The progress thread's set while it drives: `main` itself and `wake`.
    pub(super) outer: Epoll,
    /// The progress thread's set while a user thread polls: `wake` only.
    pub(super) standby: Arc<Epoll>,
    /// Wakes a user thread sleeping in `main`.
    pub(super) bell: EventFd,
    /// Wakes the progress thread (shutdown).
    pub(super) wake: EventFd,
    /// Hands in-flight work back to a parked progress thread if the
    /// application has not come back to wait by the time it fires.
    pub(super) handoff: TimerFd,
    /// How long a waiting thread polls without sleeping.
    pub(super) spin: SpinBudget,
    pub(super) spin_yield: bool,
    pub(super) standby_ms: i32,
    /// `ProgressMode::Thread`.
    pub(super) threaded: bool,
    pub(super) thread: Mutex<Option<JoinHandle<()>>>,
    /// The core's outlook, read without its lock (`state::Outlook`).
    pub(super) outlook: Arc<super::state::Outlook>,
}

/// A parked progress thread still looks this often whether it is needed,
/// so unexpected traffic is drained even if nobody hands work back (where
/// ranks outnumber cores, less often: `EngineConfig::standby`).
pub const STANDBY: Duration = Duration::from_millis(20);
/// How long a returning user thread may leave in-flight bulk transfers to itself
/// before the progress thread takes them over. Short against any transfer
/// worth overlapping, long against a Start/Isend immediately followed by a
/// Wait (where waking the progress thread would only cost latency).
pub(super) const HANDOFF_DELAY: Duration = Duration::from_micros(100);
/// A spinning waiter that reads sockets directly still asks epoll once in
/// this many rounds, for what reads do not see: new connections, failure
/// notices.
pub(super) const EPOLL_EVERY: u32 = 32;
pub(super) const TOKEN_MAIN: u64 = 1;
pub(super) const TOKEN_WAKE: u64 = 2;

impl Engine {
    pub fn new(cfg: EngineConfig) -> std::io::Result<Arc<Engine>> {
        let bell = EventFd::new()?;
        let wake = EventFd::new()?;
        cfg.epoll
            .add(bell.as_raw_fd(), epoll::READABLE, TOKEN_BELL)?;
        let outer = Epoll::new()?;
        outer.add(cfg.epoll.as_raw_fd(), epoll::READABLE, TOKEN_MAIN)?;
        outer.add(wake.as_raw_fd(), epoll::READABLE, TOKEN_WAKE)?;
        let handoff = TimerFd::new()?;
        let standby = Arc::new(Epoll::new()?);
        standby.add(wake.as_raw_fd(), epoll::READABLE, TOKEN_WAKE)?;
        standby.add(handoff.as_raw_fd(), epoll::READABLE, TOKEN_WAKE)?;
        if let Some((reader, _)) = &cfg.control {
            cfg.epoll.add(reader.fd(), epoll::READABLE, TOKEN_CONTROL)?;
            // A parked progress thread must see failure notices too.
            standby.add(reader.fd(), epoll::READABLE, TOKEN_WAKE)?;
        }
        let mut core = Core::new(
            cfg.me,
            cfg.generation,
            cfg.replacement,
            cfg.transport,
            cfg.control.is_some() && !cfg.ulfm,
        );
        core.control = cfg.control;
        core.control_sets = vec![cfg.epoll.clone(), standby.clone()];
        let outlook = core.outlook.clone();
        let engine = Arc::new(Engine {
            outlook,
            core: Mutex::new(core),
            cond: Condvar::new(),
            main: cfg.epoll,
            outer,
            standby,
            bell,
            wake,
            handoff,
            spin: SpinBudget::new(cfg.spin, cfg.spin_max),
            threaded: cfg.mode == ProgressMode::Thread,
            spin_yield: cfg.spin_yield,
            standby_ms: cfg.standby.as_millis().clamp(1, i32::MAX as u128) as i32,
            thread: Mutex::new(None),
        });
        if cfg.mode == ProgressMode::Thread {
            let e = engine.clone();
            let h = std::thread::Builder::new()
                .name("mpistages-progress".into())
                .spawn(move || e.progress_loop())?;
            *engine.thread.lock() = Some(h);
        }
        Ok(engine)
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock()
    }

    /// An inactive request for `op`, owned by `owner` (`Req::owner`).
    pub fn create(&self, op: Op, persistent: bool, owner: i32) -> ReqId {
        self.with(|c| c.alloc(Req::new(op, persistent).owned_by(owner)))
    }

    /// Starts an inactive request. Returns false if it is not inactive.
    pub fn start(&self, id: ReqId) -> bool {
        self.with(|c| {
            if !c.is_inactive(id) {
                return false;
            }
            c.start(id);
            true
        })
    }

    /// Creates and starts a one-shot request.
    pub fn post(&self, op: Op) -> ReqId {
        self.with(|c| {
            let id = c.alloc(Req::new(op, false));
            c.start(id);
            id
        })
    }

    /// As `post`, for a request of the library's own threads (a window
    /// agent's reply), which the application does not hold: a checkpoint
    /// does not count it as pending (`Core::pending_requests`).
    pub fn post_internal(&self, op: Op) -> ReqId {
        self.with(|c| {
            let mut r = Req::new(op, false);
            r.internal = true;
            let id = c.alloc(r);
            c.start(id);
            id
        })
    }

    /// Posts `ops` and returns one request that completes when all of them
    /// have, with the status of `ops[report]` (or the first error): the
    /// parts go by themselves (`MPI_Isendrecv`: a send and a receive).
    pub fn join(&self, ops: Vec<Op>, report: usize, owner: i32) -> ReqId {
        self.with(|c| {
            let parent = c.alloc(Req::new(Op::External, false).owned_by(owner));
            c.start(parent);
            c.start_parts(parent, ops, report, None);
            parent
        })
    }

    /// A completed request's status, left in place (`MPI_Request_get_status`).
    pub fn peek(&self, id: ReqId) -> Option<Status> {
        self.with(|c| match c.req(id) {
            Some(Req {
                state: State::Done(st),
                ..
            }) => Some(st.clone()),
            _ => None,
        })
    }

    /// Completes an `Op::External` request with `status`; nothing happens
    /// if it is done already (a halt failed it) or gone (a rollback).
    pub fn complete(&self, id: ReqId, status: Status) {
        self.with(|c| {
            if matches!(
                c.req(id),
                Some(Req {
                    op: Op::External,
                    ..
                })
            ) {
                c.finish(id, status)
            }
        })
    }

    /// Waits for a request and takes its status.
    pub fn wait(&self, id: ReqId) -> Status {
        self.wait_until(|c| {
            if !c.exists(id) || c.is_inactive(id) {
                return Some(Status::empty());
            }
            c.take(id)
        })
    }

    /// Waits for all of `ids` and takes their statuses, in order (one
    /// wait for a collective's round, not one per request).
    pub fn wait_all(&self, ids: &[ReqId]) -> Vec<Status> {
        self.wait_until(|c| {
            if ids.iter().any(|&id| c.is_running(id)) {
                return None;
            }
            Some(
                ids.iter()
                    .map(|&id| c.take(id).unwrap_or_else(Status::empty))
                    .collect(),
            )
        })
    }

    /// `wait`, except that a wildcard receive blocked by a failure not
    /// acknowledged (ULFM) comes back as `None` and stays posted.
    pub fn wait_unless_blocked(&self, id: ReqId) -> Option<Status> {
        self.wait_until(|c| {
            if !c.exists(id) || c.is_inactive(id) {
                return Some(Some(Status::empty()));
            }
            match c.take(id) {
                Some(st) => Some(Some(st)),
                None => c.wildcard_blocked(id).then_some(None),
            }
        })
    }

    /// `wait_done`, except that it returns false (not done) for a wildcard
    /// receive blocked by a failure not acknowledged (ULFM).
    pub fn wait_done_unless_blocked(&self, id: ReqId) -> bool {
        self.wait_until(|c| {
            if !c.exists(id) || !c.is_running(id) {
                Some(true)
            } else {
                c.wildcard_blocked(id).then_some(false)
            }
        })
    }

    /// Blocks until one of `ids` is complete (`Ok` with the positions of
    /// those that are) or, none being complete, some are wildcard receives
    /// blocked by a failure not acknowledged (`Err` with their positions).
    pub fn wait_some_unless_blocked(&self, ids: &[ReqId]) -> Result<Vec<usize>, Vec<usize>> {
        self.wait_until(|c| {
            let done = c.done_among(ids);
            if !done.is_empty() {
                return Some(Ok(done));
            }
            let blocked = c.blocked_among(ids);
            (!blocked.is_empty()).then_some(Err(blocked))
        })
    }

    /// The positions in `ids` of wildcard receives blocked by a failure.
    pub fn blocked_among(&self, ids: &[ReqId]) -> Vec<usize> {
        self.with(|c| c.blocked_among(ids))
    }

    /// `MPI_Request_free`: an active request completes on its own, then goes.
    pub fn free(&self, id: ReqId) {
        self.with(|c| {
            let Some(r) = c.req_mut(id) else { return };
            if matches!(r.state, State::Active(_)) {
                r.freed = true;
            } else {
                c.release(id);
            }
        })
    }

    /// Cancels a receive that has not matched yet.
    pub fn cancel(&self, id: ReqId) {
        self.with(|c| {
            let Some(Req {
                op: Op::Recv { context, .. },
                state: State::Active(Phase::RecvPosted),
                ..
            }) = c.req(id)
            else {
                return;
            };
            let ctx = *context;
            if c.matcher.cancel(ctx, id) {
                let mut st = Status::empty();
                st.cancelled = true;
                c.finish(id, st);
            }
        })
    }

    /// Looks for a message a receive with these arguments would match.
    pub fn iprobe(&self, ctx: u32, src: Src, tag: TagSel) -> Option<Status> {
        self.poke();
        self.with(|c| c.probe(ctx, src, tag))
    }

    pub fn probe(&self, ctx: u32, src: Src, tag: TagSel) -> Status {
        self.wait_until(|c| c.probe(ctx, src, tag))
    }

    /// `MPI_Improbe`: a message taken out of the queue (its handle and
    /// status), if there is one; handle 0 with an error status on a halt.
    pub fn iclaim(&self, ctx: u32, src: Src, tag: TagSel) -> Option<(u64, Status)> {
        self.poke();
        self.with(|c| c.claim(ctx, src, tag))
    }

    /// `MPI_Mprobe`: waits for a message and takes it out of the queue.
    pub fn claim(&self, ctx: u32, src: Src, tag: TagSel) -> (u64, Status) {
        self.wait_until(|c| c.claim(ctx, src, tag))
    }

    /// `MPI_Mrecv`: a receive (`op`, an `Op::Recv`) of a claimed message.
    /// `None` if there is no such message (received already, or dropped by
    /// a rollback).
    pub fn receive_claimed(&self, handle: u64, op: Op) -> Option<ReqId> {
        self.with(|c| {
            let (s, t, msg) = c.claimed.remove(&handle)?;
            let id = c.alloc(Req::new(op, false));
            if let Some(r) = c.req_mut(id) {
                r.state = State::Active(Phase::RecvPosted);
            }
            c.deliver(id, s, t, msg);
            c.process_events();
            Some(id)
        })
    }

    /// Waits until every queued frame is written, stops the progress thread
    /// and closes all connections.
    pub fn shutdown(&self) {
        self.wait_until(|c| {
            let busy = c.transport.as_ref().is_some_and(|t| t.has_backlog());
            (!busy).then_some(())
        });
        self.with(|c| c.shutdown = true);
        self.wake.ring();
        let handle = self.thread.lock().take();
        if let Some(h) = handle {
            let _ = h.join();
        }
        self.with(|c| {
            if let Some(t) = c.transport.as_mut() {
                t.close_all();
            }
        });
    }
}

/// What a request's id names right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReqState {
    /// Freed, completed and taken, or never there.
    Gone,
    /// A persistent request that is not started.
    Inactive,
    /// Started (and perhaps complete, its status not taken yet).
    Live { persistent: bool },
}

/// How `MPI_Finalize`'s barrier at mpiexec ended for this process.
#[derive(Debug, PartialEq)]
pub enum FinalizeEnd {
    /// Every rank of the world came: the least of their durable epochs.
    Done { durable: u64 },
    /// A failure notice came first.
    Halted,
    /// `mpiexec` is gone.
    Orphaned,
}

/// How waiting for the job to resume after a failure ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// Every rank is ready: the job runs again at `generation` from
    /// `epoch`; `agreed` is the epoch of the copy every rank holds.
    Resumed {
        generation: u32,
        epoch: u64,
        agreed: Option<u64>,
    },
    /// Another failure was announced meanwhile: roll back again.
    FailedAgain,
    /// `mpiexec` is gone.
    Orphaned,
}

/// Intent-level queries and waits: what the API layer asks of requests and
/// of the failure notices. No caller outside the engine sees its tables.
impl Engine {
    /// The request in slot `index` (what a user's handle names), if any.
    pub fn id_at(&self, index: u32) -> Option<ReqId> {
        self.with(|c| c.id_at(index))
    }

    pub fn state(&self, id: ReqId) -> ReqState {
        self.with(|c| super::handles::state_of(c, id))
    }

    /// Takes the status of a completed request (a one-shot request is
    /// released, a persistent one becomes inactive); `None` while it runs.
    pub fn take(&self, id: ReqId) -> Option<Status> {
        self.with(|c| c.take(id))
    }

    /// Blocks until the request is complete (its status stays to be taken).
    pub fn wait_done(&self, id: ReqId) {
        self.wait_until(|c| (!c.exists(id) || !c.is_running(id)).then_some(()))
    }

    /// The positions in `ids` of the requests that are complete now.
    pub fn done_among(&self, ids: &[ReqId]) -> Vec<usize> {
        self.with(|c| c.done_among(ids))
    }

    /// Blocks until at least one of `ids` is complete; their positions.
    pub fn wait_some(&self, ids: &[ReqId]) -> Vec<usize> {
        self.wait_until(|c| {
            let done = c.done_among(ids);
            (!done.is_empty()).then_some(done)
        })
    }

    /// Which of `ids` still exist (buffered sends not yet delivered).
    pub fn existing(&self, ids: &[ReqId]) -> Vec<bool> {
        self.with(|c| ids.iter().map(|&id| c.exists(id)).collect())
    }

    /// Blocks until none of `ids` exists any more.
    pub fn wait_gone(&self, ids: &[ReqId]) {
        self.wait_until(|c| ids.iter().all(|&id| !c.exists(id)).then_some(()))
    }

    /// See `Core::halted`.
    /// Has `hook` run first thing in every halt (a failure's, or a
    /// rollback's clean-up), before any request fails, with the engine
    /// locked: it must not call the engine.
    pub fn on_halt(&self, hook: Box<dyn Fn() + Send>) {
        self.lock().halt_hooks.push(hook);
    }

    pub fn halted(&self) -> bool {
        self.with(|c| c.halted())
    }

    /// See `Core::team_refused`.
    pub fn team_refused(&self, ctx: u32, members: &[usize]) -> Option<ReqError> {
        if self.outlook.calm.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        self.lock().team_refused(ctx, members)
    }

    /// The word a thread asleep in shared memory also sleeps on, and its
    /// value now: it changes whenever anything that could refuse a
    /// collective does (see `state::Outlook`).
    pub fn refusal_bell(&self) -> (&std::sync::atomic::AtomicU32, u32) {
        let bell = &self.outlook.bell;
        (bell, bell.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Whether a progress thread advances communication while the user's
    /// threads sleep (else a sleeping waiter must advance it itself).
    pub fn has_progress_thread(&self) -> bool {
        self.threaded
    }

    /// How long a waiting thread polls before it sleeps now, and whether
    /// it yields its core between polls (ranks outnumber cores).
    pub fn spin_policy(&self) -> (Duration, bool) {
        (self.spin.budget(), self.spin_yield)
    }

    /// The generation this rank communicates in (failures survived).
    pub fn generation(&self) -> u32 {
        self.outlook
            .generation
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// The ranks named by the newest failure notice.
    pub fn failed_ranks(&self) -> Vec<u32> {
        self.with(|c| c.failed_ranks())
    }

    /// The newest epoch `mpiexec` announced as committed by every rank, and
    /// the newest it announced as durable.
    pub fn committed(&self) -> (u64, Option<u64>) {
        self.with(|c| (c.notices.committed, c.notices.durable))
    }

    /// Waits, at most `within`, until mpiexec announces `epoch` (or a
    /// newer one) committed; says whether it did. Polls without blocking
    /// and sleeps between polls (fault injection only: not a hot path).
    pub fn wait_committed(&self, epoch: u64, within: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + within;
        loop {
            if self.committed().0 >= epoch {
                return true;
            }
            if std::time::Instant::now() >= until {
                return false;
            }
            self.poke();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Registers the context pair of a communicator with its members.
    pub fn register_context(&self, ctx: u32, members: super::ulfm::Members) {
        self.with(|c| c.register_context(ctx, members))
    }

    /// The dead members of the communicator of `ctx` (world ranks, in the
    /// order their deaths were announced).
    pub fn failed_members(&self, ctx: u32) -> Vec<u32> {
        self.with(|c| c.failed_members(ctx))
    }

    /// Acknowledges the first `n` failures on the communicator of `ctx`;
    /// returns how many are acknowledged there.
    pub fn ack_failures(&self, ctx: u32, n: usize) -> usize {
        self.with(|c| c.ack(ctx, n))
    }

    pub fn acked_failures(&self, ctx: u32) -> usize {
        self.with(|c| c.acked(ctx))
    }

    /// Revokes the communicator of `ctx` here (what is pending on it fails).
    pub fn revoke(&self, ctx: u32) {
        self.with(|c| c.on_revoked(ctx))
    }

    pub fn is_revoked(&self, ctx: u32) -> bool {
        self.with(|c| c.is_revoked(ctx))
    }

    /// The number of the next agreement on the communicator of `ctx`.
    pub fn next_agreement(&self, ctx: u32) -> u32 {
        self.with(|c| c.next_agreement(ctx))
    }

    /// Waits for mpiexec's answer to this process's `MPI_Comm_spawn`:
    /// (first id, count, error); `None` when mpiexec is gone.
    pub fn wait_spawned(&self) -> Option<(u32, u32, String)> {
        self.wait_until(|c| match c.notices.spawned.take() {
            Some(a) => Some(Some(a)),
            None => c.notices.orphaned.then_some(None),
        })
    }

    /// Waits for mpiexec's answer to this process's name-service request:
    /// (port, error); `None` when mpiexec is gone.
    pub fn wait_named(&self) -> Option<(String, String)> {
        self.wait_until(|c| match c.notices.named.take() {
            Some(a) => Some(Some(a)),
            None => c.notices.orphaned.then_some(None),
        })
    }

    /// Waits for the end of `MPI_Finalize`'s barrier at mpiexec.
    pub fn wait_finalized(&self) -> FinalizeEnd {
        self.wait_until(|c| match c.notices.finalized {
            Some(d) => Some(FinalizeEnd::Done { durable: d }),
            None if c.halted() => Some(FinalizeEnd::Halted),
            None => c.notices.orphaned.then_some(FinalizeEnd::Orphaned),
        })
    }

    /// Waits for mpiexec's answer to agreement `seq` on `ctx`; `None` when
    /// mpiexec is gone.
    pub fn wait_agreed(&self, ctx: u32, seq: u32) -> Option<super::ulfm::Agreed> {
        self.wait_until(|c| match c.take_agreed(ctx, seq) {
            Some(a) => Some(Some(a)),
            None => c.notices.orphaned.then_some(None),
        })
    }

    /// A replacement learns the epoch it restores from its environment
    /// rather than from a notice.
    pub fn set_restore_epoch(&self, epoch: u64) {
        self.with(|c| c.notices.epoch = epoch)
    }

    /// Requests started or complete but not yet waited for.
    pub fn pending_requests(&self) -> usize {
        self.with(|c| c.pending_requests())
    }

    /// The pending requests, described (`Core::pending_summary`).
    pub fn pending_summary(&self) -> Vec<String> {
        self.with(|c| c.pending_summary())
    }

    /// Blocks until `mpiexec` says the job resumes, or fails again, or is
    /// gone (the notices after this rank said it is ready).
    pub fn wait_resume(&self) -> Resume {
        self.wait_until(|c| {
            let n = &c.notices;
            if n.failed > c.generation() {
                Some(Resume::FailedAgain)
            } else if n.resumed >= c.generation() {
                Some(Resume::Resumed {
                    generation: c.generation(),
                    epoch: n.epoch,
                    agreed: n.agreed,
                })
            } else if n.orphaned {
                Some(Resume::Orphaned)
            } else {
                None
            }
        })
    }

    /// One round of a Stages rejoin: if a failure newer than this rank's
    /// generation was announced, roll the engine back to it (`cleanup`).
    /// Returns the generation now, and the epoch the notices say to restore.
    pub fn roll_back_to_newest_failure(&self) -> (u32, u64) {
        self.with(|c| {
            let g = c.notices.failed.max(c.generation());
            if g > c.generation() {
                c.cleanup(g);
            }
            (g, c.notices.epoch)
        })
    }
}
