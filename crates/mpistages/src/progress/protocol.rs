//! The point-to-point protocol, per message of `len` packed bytes to a
//! remote process:
//! - `len <= eager_limit`: one EAGER frame; a synchronous send sets SYNC and
//!   completes when the receiver's ACK arrives (sent when it matches).
//! - otherwise rendezvous: RTS (with `len`) → the receiver matches it and
//!   answers CTS naming its request → the sender streams DATA fragments,
//!   which the transport reads straight into the posted buffer.
//!
//! Messages to oneself are copied at send time and delivered through the
//! matcher like any other, so ordering and wildcards work the same way.
//!
//! These are `Core`'s reactions to what happens (a request started, a
//! transport event); they touch no socket themselves: frames go to the
//! `Transport`, notices for mpiexec into `Core::outbox`.

use super::req::{Body, Msg, Phase, Req, State};
use super::request::{Op, ReqError, ReqId, SendMode, Status};
use super::state::Core;
use crate::control::proto::ToController;
use crate::transport::frame::{flags, Header, Kind};
use crate::transport::{Class, Event, OutFrame, Payload, RawBuf};

/// A frame that a correct peer would not send (it is logged; the frames
/// themselves were validated by the transport).
#[derive(Debug, PartialEq)]
pub enum ProtocolError {
    CtsUnknown,
    CtsNotASend,
    CtsUnexpected,
    DataVanished,
    AckUnknown,
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProtocolError::CtsUnknown => "CTS for an unknown request",
            ProtocolError::CtsNotASend => "CTS for a request that is not a send",
            ProtocolError::CtsUnexpected => {
                "CTS from the wrong peer or for a send not waiting for one"
            }
            ProtocolError::DataVanished => "send data vanished",
            ProtocolError::AckUnknown => "ACK for an unknown send",
        })
    }
}

/// An EAGER header of `generation` for a message of (context, source, tag).
fn message_header(generation: u32, context: u32, src: u32, tag: i32) -> Header {
    let mut h = Header::new(Kind::Eager);
    h.generation = generation;
    h.context = context;
    h.src = src;
    h.tag = tag;
    h
}

impl Core {
    pub(super) fn finish(&mut self, id: ReqId, status: Status) {
        let Some(r) = self.req_mut(id) else { return };
        if matches!(r.state, State::Done(_)) {
            return;
        }
        let parent = r.part_of.take();
        if let Some(parent) = parent {
            self.part_done(parent, id, &status);
        }
        let Some(r) = self.req_mut(id) else { return };
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

    /// A part of a joined request completed: the joined request completes
    /// with the last, reporting its `report` part's status (or the first
    /// error of any part).
    fn part_done(&mut self, parent: ReqId, part: ReqId, status: &Status) {
        let Some(j) = self.joins.get_mut(&parent) else {
            return;
        };
        if part == j.report {
            let err = j.status.error.take();
            j.status = status.clone();
            j.status.error = err.or(j.status.error.take());
            if let Some(tag) = j.shown_tag {
                j.status.tag = tag;
            }
        } else if j.status.error.is_none() {
            j.status.error = status.error.clone();
        }
        j.left -= 1;
        if j.left == 0 {
            let j = self.joins.remove(&parent).expect("present");
            self.finish(parent, j.status);
        }
    }

    pub(super) fn header(&self, kind: Kind) -> Header {
        let mut h = Header::new(kind);
        h.generation = self.generation;
        h
    }

    pub(super) fn transmit(
        &mut self,
        peer: usize,
        frame: OutFrame,
        class: Class,
    ) -> Result<(), ReqError> {
        let t = self.transport.as_mut().ok_or(ReqError::PeerLost(peer))?;
        t.send(peer, frame, class, &mut self.events)
            .map_err(|_| ReqError::PeerLost(peer))
    }

    /// Activates an inactive request.
    pub(super) fn start(&mut self, id: ReqId) {
        let me = self.me;
        if self.halted() {
            return self.fail(id, ReqError::Halted);
        }
        // (Nothing to look at on the common path, once per message: no
        // failure known.)
        if !self.failure_free() {
            if let Some(e) = self.req(id).and_then(|r| self.refused(&r.op)) {
                return self.fail(id, e);
            }
            self.note_started(id);
        }
        let eager_limit = self
            .transport
            .as_ref()
            .map_or(usize::MAX, |t| t.eager_limit());
        let Some(r) = self.req_mut(id) else { return };
        let len = match &r.op {
            Op::Send { layout, .. } | Op::Recv { layout, .. } => layout.packed_len(),
            Op::External => 0,
        };
        if len > eager_limit {
            r.bulk = true;
            self.bulk_active += 1;
        }
        let r = self.req_mut(id).expect("checked just above");
        match &r.op {
            Op::External => r.state = State::Active(Phase::External),
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
                } else if self.failure_free() {
                    // Posted: nothing more to do (a receive queues no event).
                    return;
                } else if let Some(e) = self.refused_unmatched(ctx, src) {
                    // What a dead peer sent before it ended was matched above.
                    if self.matcher.cancel(ctx, id) {
                        self.fail(id, e);
                    }
                }
            }
        }
        self.process_events();
    }

    pub(super) fn start_local_send(&mut self, id: ReqId) {
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

    pub(super) fn start_remote_send(&mut self, id: ReqId) {
        let eager_limit = self
            .transport
            .as_ref()
            .map_or(usize::MAX, |t| t.eager_limit());
        let generation = self.generation;
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
        let mut hdr = message_header(generation, *context, *src, *tag);
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

    /// A standard send of contiguous data small enough to go eagerly,
    /// written whole into the peer's connection at once (shared memory
    /// with room): it is complete with no request at all. Gives the
    /// operation back when it does not qualify or the connection cannot
    /// take the frame now (then it goes as a request, the ordinary way).
    /// Nothing to do with failures here: any failure, lost peer or revoked
    /// communicator known sends it the ordinary way, which reports it.
    pub(super) fn send_now(&mut self, op: Op) -> Result<(), Op> {
        let Op::Send {
            dest: Some(dest),
            src,
            context,
            tag,
            mode: SendMode::Standard,
            layout,
        } = &op
        else {
            return Err(op);
        };
        let sent = match layout.contiguous() {
            Some(b) => self.send_bytes_now(*dest, *context, *src, *tag, b),
            None => false,
        };
        if sent {
            Ok(())
        } else {
            Err(op)
        }
    }

    /// `send_now` of contiguous `data`: true if written whole at once.
    pub(super) fn send_bytes_now(
        &mut self,
        dest: usize,
        context: u32,
        src: u32,
        tag: i32,
        data: RawBuf,
    ) -> bool {
        if dest == self.me || self.halted() || !self.failure_free() {
            return false;
        }
        let Some(t) = self.transport.as_mut() else {
            return false;
        };
        if data.len() > t.eager_limit() {
            return false;
        }
        let mut hdr = message_header(self.generation, context, src, tag);
        hdr.len = data.len() as u32;
        let payload = if data.is_empty() {
            Payload::None
        } else {
            Payload::Borrowed(data)
        };
        t.send_now(dest, OutFrame::new(&hdr, payload, None)).is_ok()
    }

    /// A frame could not be handed to a lost peer. With recovery on, the
    /// request stays pending: mpiexec announces the failure and the halt
    /// fails it with `Halted`, which the application can roll back from.
    pub(super) fn unsent(&mut self, id: ReqId, e: ReqError) {
        if !self.recovery {
            self.fail(id, e);
        }
    }

    pub(super) fn fail(&mut self, id: ReqId, e: ReqError) {
        let mut st = Status::empty();
        st.error = Some(e);
        self.finish(id, st);
    }

    pub(super) fn check_send_done(&mut self, id: ReqId) {
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

    pub(super) fn arrive(&mut self, ctx: u32, src: u32, tag: i32, msg: Msg) {
        match self.matcher.arrive(ctx, src, tag, msg) {
            Some((id, msg)) => self.deliver(id, src, tag, msg),
            // A probe may be waiting for exactly this message.
            None => self.changes += 1,
        }
    }

    /// A posted receive matched a message.
    pub(super) fn deliver(&mut self, id: ReqId, src: u32, tag: i32, msg: Msg) {
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

    pub(super) fn acknowledge(&mut self, to: usize, sender: u64) {
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
    pub(super) fn on_cts(
        &mut self,
        peer: usize,
        sender: ReqId,
        receiver: u64,
    ) -> Result<(), ProtocolError> {
        let hdr = self.header(Kind::Data);
        let frag = self
            .transport
            .as_ref()
            .map_or(1 << 20, |t| t.fragment_size());
        let Some(r) = self.req_mut(sender) else {
            return Err(ProtocolError::CtsUnknown);
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
            return Err(ProtocolError::CtsNotASend);
        };
        if *dest != peer || !*want_cts {
            return Err(ProtocolError::CtsUnexpected);
        }
        *want_cts = false;
        let data = match (&mut r.packed, layout.contiguous()) {
            (Some(v), _) => {
                // SAFETY: as in start_remote_send: the Vec lives until completion.
                unsafe { RawBuf::new(v.as_mut_ptr(), v.len()) }
            }
            (None, Some(b)) => b,
            (None, None) => return Err(ProtocolError::DataVanished),
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

    pub(super) fn on_frame(
        &mut self,
        peer: usize,
        hdr: Header,
        payload: Vec<u8>,
    ) -> Result<(), ProtocolError> {
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
                    _ => return Err(ProtocolError::AckUnknown),
                }
                self.check_send_done(id);
            }
            // Handled by the transport itself.
            Kind::Data | Kind::DataRef | Kind::RefDone | Kind::Hello | Kind::Control => {}
        }
        Ok(())
    }

    pub(super) fn on_data_done(&mut self, rid: u64) {
        let id = ReqId::from_wire(rid);
        let Some(r) = self.req_mut(id) else { return };
        // Only a receive waiting for its data completes here. A transfer
        // halted for a failure still ends (its last bytes are read past,
        // not stored), and its request, failed with `Halted`, must stay so:
        // turned inactive it would look complete, its buffer short.
        if !matches!(r.state, State::Active(Phase::RecvData { .. })) {
            return;
        }
        let State::Active(Phase::RecvData { status, staging }) =
            std::mem::replace(&mut r.state, State::Inactive)
        else {
            unreachable!("checked just above")
        };
        if let (Some(bytes), Op::Recv { layout, .. }) = (staging, &r.op) {
            layout.unpack(&bytes);
        }
        self.finish(id, status);
    }

    /// A peer's stream broke the protocol, or the peer fell silent. Its
    /// process may well be alive and waiting on us, so waiting for a
    /// failure notice could hang the job: mpiexec is told (in every mode),
    /// and ends that rank as failed.
    pub(super) fn on_peer_broken(&mut self, peer: usize, reason: &str) {
        log::error!(
            "mpistages: rank {}: the connection of rank {peer} failed ({reason}); reporting rank {peer} as failed",
            self.me
        );
        self.outbox.push(ToController::PeerBroken {
            rank: peer as u32,
            reason: reason.to_string(),
        });
    }

    pub(super) fn on_peer_lost(&mut self, peer: usize) {
        if self.recovery {
            // Recovery is on: mpiexec announces the failure to everyone and
            // the requests are halted then; failing them now would hand the
            // application an error it cannot roll back from.
            return;
        }
        self.lost.insert(peer as u32);
        self.refresh_outlook();
        // Known here before mpiexec's notice comes (ULFM: what
        // MPIX_Comm_get_failed shows is what this process knows).
        self.note_dead(peer as u32);
        self.fail_involving(peer as u32);
    }

    /// Handles what the transport reported until nothing is left.
    pub(super) fn process_events(&mut self) {
        if self.events.is_empty() && self.outbox.is_empty() {
            return;
        }
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
                    Event::Placed {
                        token,
                        src,
                        tag,
                        len,
                    } => self.on_placed(token, src, tag, len),
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
        self.flush_outbox();
    }
}
