//! The engine: request table, protocols and the progress loop.
//!
//! Protocols, per message of `len` packed bytes to a remote process:
//! - `len <= eager_limit`: one EAGER frame; a synchronous send sets SYNC and
//!   completes when the receiver's ACK arrives (sent when it matches).
//! - otherwise rendezvous: RTS (with `len`) → the receiver matches it and
//!   answers CTS naming its request → the sender streams DATA fragments,
//!   which the transport reads straight into the posted buffer.
//!
//! Messages to oneself are copied at send time and delivered through the
//! matcher like any other, so ordering and wildcards work the same way.

use super::matcher::{Matcher, Src, TagSel};
use super::request::{Op, ReqError, ReqId, SendMode, Status};
use crate::control::client::{Client, ControlReader};
use crate::control::proto::{ToController, ToRank};
use crate::sys::epoll::{self, Epoll};
use crate::sys::eventfd::EventFd;
use crate::sys::timerfd::TimerFd;
use crate::transport::frame::{flags, Header, Kind};
use crate::transport::{Class, Event, OutFrame, Payload, RawBuf, Transport};
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const TOKEN_BELL: u64 = u64::MAX;
/// The control connection to `mpiexec` (failure notices).
const TOKEN_CONTROL: u64 = u64::MAX - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    /// A progress thread advances communication at all times.
    Thread,
    /// The waiting user thread advances communication.
    Poll,
}

pub struct EngineConfig {
    /// A waiting thread polls this long before it sleeps.
    pub spin: Duration,
    /// A polling thread gives its core away between rounds (`sched_yield`):
    /// on an oversubscribed machine the process it waits for may need it.
    pub spin_yield: bool,
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
}

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
}

/// A message the matcher holds until a receive takes it.
struct Msg {
    /// World rank of the sender.
    from: usize,
    len: usize,
    /// The sender's request to acknowledge on match (synchronous eager send).
    sync: Option<u64>,
    body: Body,
}

enum Body {
    Eager(Vec<u8>),
    /// Rendezvous: the data waits at the sender's request.
    Rts {
        sender: u64,
    },
}

enum Phase {
    Send {
        /// Every byte handed to the transport (or copied, for oneself).
        out: bool,
        /// The receiver matched (always true unless synchronous eager).
        acked: bool,
        /// Rendezvous: waiting for the receiver's CTS.
        want_cts: bool,
    },
    RecvPosted,
    RecvData {
        status: Status,
        staging: Option<Vec<u8>>,
    },
}

enum State {
    Inactive,
    Active(Phase),
    Done(Status),
}

struct Req {
    op: Op,
    persistent: bool,
    /// Counted in `Core::bulk_active` while active.
    bulk: bool,
    /// `MPI_Request_free` was called: release the slot on completion.
    freed: bool,
    state: State,
    /// Packed copy of non-contiguous send data, alive until completion.
    packed: Option<Vec<u8>>,
}

struct Slot {
    serial: u32,
    req: Option<Req>,
}

struct Core {
    me: usize,
    generation: u32,
    epoch: u32,
    control: Option<(ControlReader, Arc<Client>)>,
    /// The epoll sets watching the control connection.
    control_sets: Vec<Arc<Epoll>>,
    pub notices: Notices,
    transport: Option<Box<dyn Transport>>,
    matcher: Matcher<ReqId, Msg>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    events: Vec<Event>,
    spare_events: Vec<Event>,
    /// Counts request completions and unexpected arrivals: anything a
    /// waiting thread may be waiting for. Waiters are woken when it moves.
    changes: u64,
    /// A user thread blocked in a wait is polling the transports itself.
    polling: bool,
    /// Counts the times a user thread became the poller: the progress
    /// thread stays parked while it keeps moving.
    user_polls: u64,
    /// `user_polls` when work was last handed back: the hand-off stands only
    /// if no user thread has polled since (a Waitall goes on waiting).
    handoff_polls: u64,
    /// The hand-off timer is running (re-arming costs a system call, and a
    /// VM exit on virtual machines).
    handoff_armed: bool,
    /// The progress thread stands aside while a user thread polls.
    progress_parked: bool,
    /// Started, not yet completed requests that may move more than an eager
    /// message (rendezvous): only these need the progress thread while the
    /// application computes; small messages just wait in socket buffers.
    bulk_active: usize,
    waiters: usize,
    shutdown: bool,
}

/// Who advances communication: a user thread blocked in a wait polls the
/// transports itself (no thread hand-off on the latency path); whenever no
/// user thread waits, the progress thread does (strong progress while the
/// application computes). In `poll` mode there is no progress thread.
pub struct Engine {
    core: Mutex<Core>,
    cond: Condvar,
    /// Transport sockets and `bell`.
    main: Arc<Epoll>,
    /// The progress thread's set while it drives: `main` itself and `wake`.
    outer: Epoll,
    /// The progress thread's set while a user thread polls: `wake` only.
    standby: Arc<Epoll>,
    /// Wakes a user thread sleeping in `main`.
    bell: EventFd,
    /// Wakes the progress thread (shutdown).
    wake: EventFd,
    /// Hands in-flight work back to a parked progress thread if the
    /// application has not come back to wait by the time it fires.
    handoff: TimerFd,
    /// How long a waiting thread polls without sleeping.
    spin: Duration,
    spin_yield: bool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// A parked progress thread still looks this often whether it is needed,
/// so unexpected traffic is drained even if nobody hands work back.
const STANDBY_MS: i32 = 20;
/// How long a returning user thread may leave in-flight bulk transfers to itself
/// before the progress thread takes them over. Short against any transfer
/// worth overlapping, long against a Start/Isend immediately followed by a
/// Wait (where waking the progress thread would only cost latency).
const HANDOFF_DELAY: Duration = Duration::from_micros(100);
/// A spinning waiter that reads sockets directly still asks epoll once in
/// this many rounds, for what reads do not see: new connections, failure
/// notices.
const EPOLL_EVERY: u32 = 32;
const TOKEN_MAIN: u64 = 1;
const TOKEN_WAKE: u64 = 2;

impl Core {
    fn req(&self, id: ReqId) -> Option<&Req> {
        let s = self.slots.get(id.index as usize)?;
        if s.serial != id.serial {
            return None;
        }
        s.req.as_ref()
    }

    fn req_mut(&mut self, id: ReqId) -> Option<&mut Req> {
        let s = self.slots.get_mut(id.index as usize)?;
        if s.serial != id.serial {
            return None;
        }
        s.req.as_mut()
    }

    fn alloc(&mut self, req: Req) -> ReqId {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    serial: 0,
                    req: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.serial = slot.serial.wrapping_add(1);
        slot.req = Some(req);
        ReqId {
            index,
            serial: slot.serial,
        }
    }

    fn release(&mut self, id: ReqId) {
        if let Some(s) = self.slots.get_mut(id.index as usize) {
            if s.serial == id.serial && s.req.take().is_some() {
                self.free.push(id.index);
            }
        }
    }

    fn finish(&mut self, id: ReqId, status: Status) {
        let Some(r) = self.req_mut(id) else { return };
        if matches!(r.state, State::Done(_)) {
            return;
        }
        r.packed = None;
        r.state = State::Done(status);
        let freed = r.freed;
        if std::mem::take(&mut r.bulk) {
            self.bulk_active -= 1;
        }
        self.changes += 1;
        if freed {
            self.release(id);
        }
    }

    fn header(&self, kind: Kind) -> Header {
        let mut h = Header::new(kind);
        h.generation = self.generation;
        h.epoch = self.epoch;
        h
    }

    fn transmit(&mut self, peer: usize, frame: OutFrame, class: Class) -> Result<(), ReqError> {
        let t = self.transport.as_mut().ok_or(ReqError::PeerLost(peer))?;
        t.send(peer, frame, class, &mut self.events)
            .map_err(|_| ReqError::PeerLost(peer))
    }

    /// Activates an inactive request.
    fn start(&mut self, id: ReqId) {
        let me = self.me;
        let eager_limit = self
            .transport
            .as_ref()
            .map_or(usize::MAX, |t| t.eager_limit());
        if self.halted() {
            return self.fail(id, ReqError::Halted);
        }
        let Some(r) = self.req_mut(id) else { return };
        let len = match &r.op {
            Op::Send { layout, .. } | Op::Recv { layout, .. } => layout.packed_len(),
        };
        if len > eager_limit {
            r.bulk = true;
            self.bulk_active += 1;
        }
        let r = self.req_mut(id).expect("checked just above");
        match &r.op {
            Op::Send { dest: None, .. } => self.finish(id, Status::empty()),
            Op::Send { dest: Some(d), .. } if *d == me => self.start_local_send(id),
            Op::Send { .. } => self.start_remote_send(id),
            Op::Recv { src: None, .. } => {
                let mut st = Status::empty();
                st.source = super::request::PROC_NULL;
                self.finish(id, st)
            }
            Op::Recv {
                src: Some(src),
                tag,
                context,
                ..
            } => {
                let (src, tag, ctx) = (*src, *tag, *context);
                r.state = State::Active(Phase::RecvPosted);
                if let Some((s, t, msg)) = self.matcher.post(ctx, src, tag, id) {
                    self.deliver(id, s, t, msg);
                }
            }
        }
        self.process_events();
    }

    fn start_local_send(&mut self, id: ReqId) {
        let me = self.me;
        let r = self.req_mut(id).expect("caller checked");
        let Op::Send {
            src,
            context,
            tag,
            mode,
            layout,
            ..
        } = &r.op
        else {
            return;
        };
        let data = match layout.contiguous() {
            Some(b) => b.as_slice().to_vec(),
            None => layout.pack(),
        };
        let sync = *mode == SendMode::Sync;
        let (src, ctx, tag) = (*src, *context, *tag);
        r.state = State::Active(Phase::Send {
            out: true,
            acked: !sync,
            want_cts: false,
        });
        let msg = Msg {
            from: me,
            len: data.len(),
            sync: sync.then(|| id.to_wire()),
            body: Body::Eager(data),
        };
        self.arrive(ctx, src, tag, msg);
        self.check_send_done(id);
    }

    fn start_remote_send(&mut self, id: ReqId) {
        let eager_limit = self
            .transport
            .as_ref()
            .map_or(usize::MAX, |t| t.eager_limit());
        let mut hdr = self.header(Kind::Eager);
        let r = self.req_mut(id).expect("caller checked");
        let Op::Send {
            dest: Some(dest),
            src,
            context,
            tag,
            mode,
            layout,
        } = &r.op
        else {
            return;
        };
        let dest = *dest;
        let len = layout.packed_len();
        let data = match layout.contiguous() {
            Some(b) => b,
            None => {
                let v = r.packed.insert(layout.pack());
                // SAFETY: the Vec lives in the request until it completes and
                // is not touched meanwhile; only the transport reads it.
                unsafe { RawBuf::new(v.as_mut_ptr(), v.len()) }
            }
        };
        let sync = *mode == SendMode::Sync;
        hdr.context = *context;
        hdr.src = *src;
        hdr.tag = *tag;
        hdr.rdv = id.to_wire();
        if sync {
            hdr.flags |= flags::SYNC;
        }
        let frame = if len <= eager_limit {
            hdr.len = len as u32;
            r.state = State::Active(Phase::Send {
                out: false,
                acked: !sync,
                want_cts: false,
            });
            let payload = if len == 0 {
                Payload::None
            } else {
                Payload::Borrowed(data)
            };
            OutFrame::new(&hdr, payload, Some(id.to_wire()))
        } else {
            hdr.kind = Kind::Rts;
            hdr.aux = len as u64;
            r.state = State::Active(Phase::Send {
                out: false,
                acked: true,
                want_cts: true,
            });
            OutFrame::new(&hdr, Payload::None, None)
        };
        if let Err(e) = self.transmit(dest, frame, Class::Urgent) {
            self.unsent(id, e);
        }
    }

    /// A frame could not be handed to a lost peer. With recovery on, the
    /// request stays pending: mpiexec announces the failure and the halt
    /// fails it with `Halted`, which the application can roll back from.
    fn unsent(&mut self, id: ReqId, e: ReqError) {
        if self.control.is_none() {
            self.fail(id, e);
        }
    }

    fn fail(&mut self, id: ReqId, e: ReqError) {
        let mut st = Status::empty();
        st.error = Some(e);
        self.finish(id, st);
    }

    fn check_send_done(&mut self, id: ReqId) {
        let Some(r) = self.req(id) else { return };
        if let State::Active(Phase::Send {
            out: true,
            acked: true,
            want_cts: false,
        }) = r.state
        {
            self.finish(id, Status::empty());
        }
    }

    fn arrive(&mut self, ctx: u32, src: u32, tag: i32, msg: Msg) {
        match self.matcher.arrive(ctx, src, tag, msg) {
            Some((id, msg)) => self.deliver(id, src, tag, msg),
            // A probe may be waiting for exactly this message.
            None => self.changes += 1,
        }
    }

    /// A posted receive matched a message.
    fn deliver(&mut self, id: ReqId, src: u32, tag: i32, msg: Msg) {
        if let Some(sender) = msg.sync {
            self.acknowledge(msg.from, sender);
        }
        let Some(r) = self.req_mut(id) else { return };
        let Op::Recv { layout, .. } = &r.op else {
            return;
        };
        let cap = layout.packed_len();
        let n = msg.len.min(cap);
        let status = Status {
            source: src as i32,
            tag,
            bytes: n,
            cancelled: false,
            error: (msg.len > cap).then_some(ReqError::Truncate),
        };
        match msg.body {
            Body::Eager(data) => {
                match layout.contiguous() {
                    Some(b) => {
                        b.write_at(0, &data[..n]);
                    }
                    None => layout.unpack(&data[..n]),
                }
                self.finish(id, status);
            }
            Body::Rts { sender } => {
                let mut staging = None;
                let target = match layout.contiguous() {
                    Some(b) => b.sub(0, n).expect("n <= capacity"),
                    None => {
                        let v = staging.insert(vec![0u8; n]);
                        // SAFETY: the staging Vec moves into the request below
                        // (moving a Vec does not move its heap buffer) and
                        // stays there until the transfer completes.
                        unsafe { RawBuf::new(v.as_mut_ptr(), n) }
                    }
                };
                r.state = State::Active(Phase::RecvData { status, staging });
                let mut cts = self.header(Kind::Cts);
                cts.rdv = sender;
                cts.aux = id.to_wire();
                if let Some(t) = self.transport.as_mut() {
                    t.expect_data(msg.from, id.to_wire(), target, msg.len as u64);
                }
                if let Err(e) = self.transmit(
                    msg.from,
                    OutFrame::new(&cts, Payload::None, None),
                    Class::Urgent,
                ) {
                    self.unsent(id, e);
                }
            }
        }
    }

    fn acknowledge(&mut self, to: usize, sender: u64) {
        if to == self.me {
            let id = ReqId::from_wire(sender);
            if let Some(Req {
                state: State::Active(Phase::Send { acked, .. }),
                ..
            }) = self.req_mut(id)
            {
                *acked = true;
            }
            self.check_send_done(id);
            return;
        }
        let mut ack = self.header(Kind::Ack);
        ack.rdv = sender;
        // A lost peer is reported through its own event; nothing to do here.
        let _ = self.transmit(to, OutFrame::new(&ack, Payload::None, None), Class::Urgent);
    }

    /// The receiver is ready for a rendezvous send: stream the data.
    fn on_cts(&mut self, peer: usize, sender: ReqId, receiver: u64) -> Result<(), String> {
        let hdr = self.header(Kind::Data);
        let frag = self
            .transport
            .as_ref()
            .map_or(1 << 20, |t| t.fragment_size());
        let Some(r) = self.req_mut(sender) else {
            return Err("CTS for an unknown request".into());
        };
        let (
            Op::Send {
                dest: Some(dest),
                layout,
                ..
            },
            State::Active(Phase::Send { want_cts, .. }),
        ) = (&r.op, &mut r.state)
        else {
            return Err("CTS for a request that is not a send".into());
        };
        if *dest != peer || !*want_cts {
            return Err("CTS from the wrong peer or for a send not waiting for one".into());
        }
        *want_cts = false;
        let data = match (&mut r.packed, layout.contiguous()) {
            (Some(v), _) => {
                // SAFETY: as in start_remote_send: the Vec lives until completion.
                unsafe { RawBuf::new(v.as_mut_ptr(), v.len()) }
            }
            (None, Some(b)) => b,
            (None, None) => return Err("send data vanished".into()),
        };
        let len = data.len();
        let mut off = 0;
        while off < len {
            let n = frag.min(len - off);
            let mut h = hdr;
            h.rdv = receiver;
            h.aux = off as u64;
            h.len = n as u32;
            let last = off + n == len;
            let frame = OutFrame::new(
                &h,
                Payload::Borrowed(data.sub(off, n).expect("in bounds")),
                last.then(|| sender.to_wire()),
            );
            if let Err(e) = self.transmit(peer, frame, Class::Bulk) {
                self.unsent(sender, e);
                return Ok(());
            }
            off += n;
        }
        Ok(())
    }

    fn on_frame(&mut self, peer: usize, hdr: Header, payload: Vec<u8>) -> Result<(), String> {
        if hdr.generation != self.generation || self.notices.failed > self.generation {
            // A message of another generation, or one that arrives after a
            // failure was announced: fenced off. (Frames of the current
            // generation that arrive before this rank heard the job resume
            // are kept: the sender has heard it already.)
            return Ok(());
        }
        let sync = (hdr.flags & flags::SYNC != 0).then_some(hdr.rdv);
        match hdr.kind {
            Kind::Eager => {
                let msg = Msg {
                    from: peer,
                    len: payload.len(),
                    sync,
                    body: Body::Eager(payload),
                };
                self.arrive(hdr.context, hdr.src, hdr.tag, msg);
            }
            Kind::Rts => {
                let msg = Msg {
                    from: peer,
                    len: hdr.aux as usize,
                    sync: None,
                    body: Body::Rts { sender: hdr.rdv },
                };
                self.arrive(hdr.context, hdr.src, hdr.tag, msg);
            }
            Kind::Cts => self.on_cts(peer, ReqId::from_wire(hdr.rdv), hdr.aux)?,
            Kind::Ack => {
                let id = ReqId::from_wire(hdr.rdv);
                match self.req_mut(id) {
                    Some(Req {
                        op: Op::Send { dest: Some(d), .. },
                        state: State::Active(Phase::Send { acked, .. }),
                        ..
                    }) if *d == peer => *acked = true,
                    _ => return Err("ACK for an unknown send".into()),
                }
                self.check_send_done(id);
            }
            Kind::Data | Kind::Hello | Kind::Control => {}
        }
        Ok(())
    }

    fn on_data_done(&mut self, rid: u64) {
        let id = ReqId::from_wire(rid);
        let Some(r) = self.req_mut(id) else { return };
        let State::Active(Phase::RecvData { status, staging }) =
            std::mem::replace(&mut r.state, State::Inactive)
        else {
            return;
        };
        if let (Some(bytes), Op::Recv { layout, .. }) = (staging, &r.op) {
            layout.unpack(&bytes);
        }
        self.finish(id, status);
    }

    /// A peer's stream broke the protocol. Its process may well be alive
    /// and waiting on us, so waiting for a failure notice could hang the
    /// job: mpiexec is told, and ends that rank as failed.
    fn on_peer_broken(&mut self, peer: usize, reason: &str) {
        log::error!(
            "mpistages: rank {}: the connection of rank {peer} broke the protocol ({reason}); reporting rank {peer} as failed",
            self.me
        );
        if let Some((_, client)) = &self.control {
            let _ = client.send(&ToController::PeerBroken {
                rank: peer as u32,
                reason: reason.to_string(),
            });
        }
    }

    fn on_peer_lost(&mut self, peer: usize) {
        if self.control.is_some() {
            // Recovery is on: mpiexec announces the failure to everyone and
            // the requests are halted then; failing them now would hand the
            // application an error it cannot roll back from.
            return;
        }
        let mut failed = Vec::new();
        for (i, s) in self.slots.iter().enumerate() {
            let Some(r) = &s.req else { continue };
            let involved = match (&r.op, &r.state) {
                (Op::Send { dest: Some(d), .. }, State::Active(_)) => *d == peer,
                (Op::Recv { .. }, State::Active(Phase::RecvData { .. })) => true,
                _ => false,
            };
            if involved {
                failed.push(ReqId {
                    index: i as u32,
                    serial: s.serial,
                });
            }
        }
        for id in failed {
            self.fail(id, ReqError::PeerLost(peer));
        }
    }

    /// Handles what the transport reported until nothing is left.
    fn process_events(&mut self) {
        // Swap between two vectors so neither is reallocated per message:
        // handling an event may queue new ones into `self.events`.
        let mut batch = std::mem::take(&mut self.spare_events);
        while !self.events.is_empty() {
            std::mem::swap(&mut batch, &mut self.events);
            for ev in batch.drain(..) {
                match ev {
                    Event::Sent { token } => {
                        let id = ReqId::from_wire(token);
                        if let Some(Req {
                            state: State::Active(Phase::Send { out, .. }),
                            ..
                        }) = self.req_mut(id)
                        {
                            *out = true;
                        }
                        self.check_send_done(id);
                    }
                    Event::Frame { peer, hdr, payload } => {
                        if let Err(why) = self.on_frame(peer, hdr, payload) {
                            log::error!(
                                "mpistages: rank {}: protocol error from rank {peer}: {why}",
                                self.me
                            );
                        }
                    }
                    Event::DataDone { rid, .. } => self.on_data_done(rid),
                    Event::PeerLost {
                        peer,
                        reason,
                        broken,
                    } => {
                        if broken {
                            self.on_peer_broken(peer, &reason);
                        }
                        self.on_peer_lost(peer)
                    }
                }
            }
        }
        self.spare_events = batch;
    }

    /// Reads the transport's sockets directly (see `Transport::poll_reads`)
    /// and handles what came in; false if the transport declined.
    fn poll_reads(&mut self) -> bool {
        let Some(t) = self.transport.as_mut() else {
            return false;
        };
        if !t.poll_reads(&mut self.events) {
            return false;
        }
        self.process_events();
        true
    }

    fn handle(&mut self, evs: &[epoll::Event], bell: &EventFd) {
        for ev in evs {
            if ev.token == TOKEN_BELL {
                bell.drain();
            } else if ev.token == TOKEN_CONTROL {
                self.on_control(bell);
            } else if let Some(t) = self.transport.as_mut() {
                t.handle(*ev, &mut self.events);
            }
        }
        self.process_events();
    }

    /// Reads failure notices from mpiexec.
    fn on_control(&mut self, bell: &EventFd) {
        let Some((reader, client)) = self.control.as_mut() else {
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
        let client = client.clone();
        for m in msgs {
            match m {
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
                    self.halt();
                    bell.ring();
                    let _ = client.send(&ToController::Halted { generation });
                }
                ToRank::Resume { generation, agreed } => {
                    log::debug!(
                        "mpistages: rank {}: the job resumes at generation {generation} (agreed epoch {agreed:?})",
                        self.me
                    );
                    if generation >= self.notices.resumed {
                        self.notices.resumed = generation;
                        self.notices.agreed = agreed;
                    }
                    self.changes += 1;
                    // A user thread may be asleep in the main epoll set
                    // (the progress thread read the socket): wake it.
                    bell.ring();
                }
                ToRank::Committed { epoch, durable } => {
                    self.notices.committed = self.notices.committed.max(epoch);
                    // Not a maximum: a recovery starts the count again.
                    self.notices.durable = durable;
                }
                _ => {}
            }
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
    fn halt(&mut self) {
        if let Some(t) = self.transport.as_mut() {
            t.halt();
        }
        let active: Vec<ReqId> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                matches!(
                    s.req,
                    Some(Req {
                        state: State::Active(_),
                        ..
                    })
                )
            })
            .map(|(i, s)| ReqId {
                index: i as u32,
                serial: s.serial,
            })
            .collect();
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
        for i in 0..self.slots.len() {
            let s = &mut self.slots[i];
            match &mut s.req {
                Some(r) if r.persistent && !r.freed => {
                    r.state = State::Inactive;
                    r.packed = None;
                    r.bulk = false;
                }
                Some(_) => {
                    s.req = None;
                    self.free.push(i as u32);
                }
                None => {}
            }
        }
        self.bulk_active = 0;
        if let Some(t) = self.transport.as_mut() {
            t.cleanup(generation);
        }
        self.generation = generation;
        self.changes += 1;
    }

    /// Requests that are started or completed but not yet waited for.
    pub fn pending_requests(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| match &s.req {
                Some(r) => !matches!(r.state, State::Inactive),
                None => false,
            })
            .count()
    }

    // ---- queries of the request table (the engine's intent-level
    // operations below are built from these) ----

    fn done_among(&self, ids: &[ReqId]) -> Vec<usize> {
        (0..ids.len()).filter(|&i| self.is_done(ids[i])).collect()
    }

    /// Started and not complete.
    fn is_running(&self, id: ReqId) -> bool {
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
        let s = self.slots.get(index as usize)?;
        s.req.as_ref().map(|_| ReqId {
            index,
            serial: s.serial,
        })
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
        let notices = Notices {
            resumed: if cfg.replacement {
                cfg.generation.saturating_sub(1)
            } else {
                cfg.generation
            },
            failed: cfg.generation,
            ..Notices::default()
        };
        let core = Core {
            me: cfg.me,
            generation: cfg.generation,
            epoch: 0,
            control: cfg.control,
            control_sets: vec![cfg.epoll.clone(), standby.clone()],
            notices,
            transport: cfg.transport,
            matcher: Matcher::default(),
            slots: Vec::new(),
            free: Vec::new(),
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
        };
        let engine = Arc::new(Engine {
            core: Mutex::new(core),
            cond: Condvar::new(),
            main: cfg.epoll,
            outer,
            standby,
            bell,
            wake,
            handoff,
            spin: cfg.spin,
            spin_yield: cfg.spin_yield,
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

    fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock()
    }

    /// The progress thread drives communication unless user threads are
    /// busy waiting (and so polling) themselves: then it parks, looking
    /// again when the hand-off timer fires, on shutdown, or every
    /// `STANDBY_MS`.
    fn progress_loop(&self) {
        let mut evs = Vec::with_capacity(64);
        let mut parked = false;
        let mut seen = 0;
        loop {
            self.lock().progress_parked = parked;
            evs.clear();
            let r = if parked {
                self.standby.wait(&mut evs, STANDBY_MS)
            } else {
                self.outer.wait(&mut evs, -1)
            };
            if r.is_err() {
                std::thread::sleep(Duration::from_millis(1));
            }
            let mut core = self.lock();
            if core.shutdown {
                return;
            }
            self.wake.drain();
            let handed_back = self.handoff.drain();
            if handed_back {
                core.handoff_armed = false;
            }
            let users_busy = core.polling
                || if handed_back {
                    core.user_polls != core.handoff_polls
                } else {
                    core.user_polls != seen
                };
            seen = core.user_polls;
            parked = users_busy;
            if parked {
                // Failure notices cannot wait for the user thread.
                if evs.iter().any(|e| e.token == TOKEN_WAKE) {
                    let before = core.changes;
                    core.on_control(&self.bell);
                    self.after(&core, before, false);
                }
                continue;
            }
            evs.clear();
            let _ = self.main.wait(&mut evs, 0);
            let before = core.changes;
            core.handle(&evs, &self.bell);
            self.after(&core, before, false);
            // Hand the lock straight to a user thread waiting for it: this
            // thread would otherwise take it back at once for the next chunk
            // of a bulk transfer and starve the application's MPI calls.
            MutexGuard::unlock_fair(core);
        }
    }

    /// Wakes whoever must see changes that just happened.
    fn after(&self, core: &Core, before: u64, from_user: bool) {
        if core.changes == before {
            return;
        }
        if core.waiters > 0 {
            self.cond.notify_all();
        }
        if from_user && core.polling {
            self.bell.ring();
        }
    }

    /// Called when a user thread returns to the application: requests still
    /// in flight must be advanced by the progress thread from now on (after
    /// `HANDOFF_DELAY`, in case the application comes right back to wait).
    pub fn background(&self) {
        let mut core = self.lock();
        if core.progress_parked && !core.polling && core.bulk_active > 0 {
            core.handoff_polls = core.user_polls;
            if !core.handoff_armed {
                core.handoff_armed = true;
                self.handoff.arm(HANDOFF_DELAY);
            }
        }
    }

    /// Advances communication once without blocking, unless another thread
    /// is polling already (used by the test family and probes, which must
    /// make progress on their own in poll mode).
    pub fn poke(&self) {
        let mut core = self.lock();
        if core.polling {
            return;
        }
        let mut evs = Vec::new();
        let _ = self.main.wait(&mut evs, 0);
        let before = core.changes;
        core.handle(&evs, &self.bell);
        self.after(&core, before, false);
    }

    /// Runs `f` under the engine lock, then wakes waiters if it completed
    /// anything.
    fn with<T>(&self, f: impl FnOnce(&mut Core) -> T) -> T {
        let mut core = self.lock();
        let before = core.changes;
        let v = f(&mut core);
        self.after(&core, before, true);
        v
    }

    /// Blocks until `f` returns `Some`. One waiting thread at a time polls
    /// the transports (spinning for `spin` first, then sleeping in epoll);
    /// others sleep on the condition variable.
    fn wait_until<T>(&self, mut f: impl FnMut(&mut Core) -> Option<T>) -> T {
        let mut core = self.lock();
        let mut evs = Vec::new();
        let mut spin_until: Option<Instant> = None;
        let mut spins: u32 = 0;
        loop {
            let before = core.changes;
            let v = f(&mut core);
            self.after(&core, before, true);
            if let Some(v) = v {
                drop(core);
                self.background();
                return v;
            }
            if !core.polling {
                let deadline = *spin_until.get_or_insert_with(|| Instant::now() + self.spin);
                let spinning = Instant::now() < deadline;
                if spinning && self.spin_yield {
                    MutexGuard::unlocked(&mut core, std::thread::yield_now);
                    if core.polling {
                        continue;
                    }
                }
                spins = spins.wrapping_add(1);
                if spinning && !spins.is_multiple_of(EPOLL_EVERY) {
                    let before = core.changes;
                    if core.poll_reads() {
                        core.user_polls += 1;
                        self.after(&core, before, false);
                        // Let other threads at the engine between rounds.
                        MutexGuard::bump(&mut core);
                        continue;
                    }
                }
                core.polling = true;
                core.user_polls += 1;
                drop(core);
                let timeout = if spinning { 0 } else { -1 };
                evs.clear();
                let _ = self.main.wait(&mut evs, timeout);
                core = self.lock();
                core.polling = false;
                core.handle(&evs, &self.bell);
                // Another waiting thread may now take over polling.
                if core.waiters > 0 {
                    self.cond.notify_all();
                }
            } else {
                core.waiters += 1;
                self.cond.wait(&mut core);
                core.waiters -= 1;
            }
        }
    }

    pub fn create(&self, op: Op, persistent: bool) -> ReqId {
        self.with(|c| {
            c.alloc(Req {
                op,
                persistent,
                bulk: false,
                freed: false,
                state: State::Inactive,
                packed: None,
            })
        })
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
            let id = c.alloc(Req {
                op,
                persistent: false,
                bulk: false,
                freed: false,
                state: State::Inactive,
                packed: None,
            });
            c.start(id);
            id
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
        self.with(|c| match c.req(id) {
            None => ReqState::Gone,
            Some(r) if matches!(r.state, State::Inactive) => ReqState::Inactive,
            Some(r) => ReqState::Live {
                persistent: r.persistent,
            },
        })
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
    pub fn halted(&self) -> bool {
        self.with(|c| c.halted())
    }

    /// The generation this rank communicates in (failures survived).
    pub fn generation(&self) -> u32 {
        self.with(|c| c.generation())
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

    /// A replacement learns the epoch it restores from its environment
    /// rather than from a notice.
    pub fn set_restore_epoch(&self, epoch: u64) {
        self.with(|c| c.notices.epoch = epoch)
    }

    /// Requests started or complete but not yet waited for.
    pub fn pending_requests(&self) -> usize {
        self.with(|c| c.pending_requests())
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

impl Core {
    fn probe(&self, ctx: u32, src: Src, tag: TagSel) -> Option<Status> {
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
