//! The protocol without sockets: two `Core`s joined by an in-memory
//! transport that the test drives frame by frame, so every interleaving of
//! a failure notice with the frames of a message in flight can be tried.

use super::req::Req;
use super::request::{Data, Op, ReqError, ReqId, SendMode, Status};
use super::state::Core;
use super::Src;
use crate::control::proto::{ToController, ToRank};
use crate::sys::epoll;
use crate::transport::frame::{Header, Kind, Limits, HEADER_LEN};
use crate::transport::{Class, Event, OutFrame, RawBuf, Transport, TransportError};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

/// A frame on its way: from, to, header, payload.
type Frame = (usize, usize, [u8; HEADER_LEN], Vec<u8>);
/// Where a rank's rendezvous data goes: receiver id → (buffer, total, got).
type Targets = Arc<Mutex<HashMap<u64, (RawBuf, u64, u64)>>>;

struct MemTransport {
    me: usize,
    wire: Arc<Mutex<VecDeque<Frame>>>,
    targets: Targets,
    gone: HashSet<usize>,
    eager: usize,
    fragment: usize,
}

impl Transport for MemTransport {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn eager_limit(&self) -> usize {
        self.eager
    }
    fn fragment_size(&self) -> usize {
        self.fragment
    }
    fn send(
        &mut self,
        peer: usize,
        frame: OutFrame,
        _class: Class,
        out: &mut Vec<Event>,
    ) -> Result<(), TransportError> {
        if self.gone.contains(&peer) {
            return Err(TransportError::PeerGone(peer));
        }
        let payload = frame.payload.bytes().to_vec();
        self.wire
            .lock()
            .unwrap()
            .push_back((self.me, peer, frame.header, payload));
        if let Some(token) = frame.token {
            out.push(Event::Sent { token });
        }
        Ok(())
    }
    fn expect_data(&mut self, _peer: usize, rid: u64, target: RawBuf, total: u64) {
        self.targets.lock().unwrap().insert(rid, (target, total, 0));
    }
    fn handle(&mut self, _ev: epoll::Event, _out: &mut Vec<Event>) {}
    fn has_backlog(&self) -> bool {
        false
    }
    fn close_all(&mut self) {}
    fn halt(&mut self, _generation: u32) {
        // As the TCP transport: user memory is let go of at once, and the
        // rest of a transfer is read past (and counted, so its end is
        // still seen).
        for (buf, _, _) in self.targets.lock().unwrap().values_mut() {
            *buf = RawBuf::empty();
        }
    }
    fn cleanup(&mut self, _generation: u32) {
        self.targets.lock().unwrap().clear();
    }
    fn forget_peers(&mut self, _failed: &[usize], _generation: u32) {}
}

/// Two ranks and the wire between them.
struct Pair {
    cores: Vec<Core>,
    wire: Arc<Mutex<VecDeque<Frame>>>,
    targets: Vec<Targets>,
}

impl Pair {
    fn new(eager: usize, fragment: usize, recovery: bool) -> Pair {
        let wire = Arc::new(Mutex::new(VecDeque::new()));
        let targets: Vec<Targets> = (0..2).map(|_| Targets::default()).collect();
        let cores = (0..2)
            .map(|me| {
                let t = MemTransport {
                    me,
                    wire: wire.clone(),
                    targets: targets[me].clone(),
                    gone: HashSet::new(),
                    eager,
                    fragment,
                };
                Core::new(me, 0, false, Some(Box::new(t)), recovery)
            })
            .collect();
        Pair {
            cores,
            wire,
            targets,
        }
    }

    fn post(&mut self, rank: usize, op: Op) -> ReqId {
        let c = &mut self.cores[rank];
        let id = c.alloc(Req::new(op, false));
        c.start(id);
        id
    }

    fn in_flight(&self) -> usize {
        self.wire.lock().unwrap().len()
    }

    /// Delivers the oldest frame on the wire; false if there is none.
    fn deliver_one(&mut self) -> bool {
        let Some((from, to, header, payload)) = self.wire.lock().unwrap().pop_front() else {
            return false;
        };
        let limits = Limits {
            max_payload: u32::MAX,
            ranks: 2,
        };
        let hdr = Header::decode(&header, &limits).expect("the engine writes valid headers");
        let core = &mut self.cores[to];
        if hdr.kind == Kind::Data {
            // What the TCP transport does: straight into the target, and
            // DataDone when the last byte is in.
            let mut targets = self.targets[to].lock().unwrap();
            let Some((buf, total, got)) = targets.get_mut(&hdr.rdv) else {
                return true; // let go of (halted): the bytes are dropped
            };
            buf.write_at(hdr.aux as usize, &payload);
            *got += payload.len() as u64;
            if *got == *total {
                targets.remove(&hdr.rdv);
                drop(targets);
                core.events.push(Event::DataDone {
                    peer: from,
                    rid: hdr.rdv,
                });
            }
        } else {
            core.events.push(Event::Frame {
                peer: from,
                hdr,
                payload,
            });
        }
        core.process_events();
        true
    }

    fn deliver_all(&mut self) -> usize {
        let mut n = 0;
        while self.deliver_one() {
            n += 1;
        }
        n
    }

    fn take(&mut self, rank: usize, id: ReqId) -> Option<Status> {
        self.cores[rank].take(id)
    }

    /// mpiexec announces that `failed` died: generation 1, epoch 0.
    fn announce_failure(&mut self, rank: usize, failed: u32) {
        self.cores[rank].on_notice(ToRank::Failure {
            generation: 1,
            epoch: 0,
            failed: vec![failed],
        });
    }
}

fn raw(v: &mut [u8]) -> RawBuf {
    // SAFETY: (test) every buffer outlives the pair it is used with, and
    // the test reads it only after its request completed or was halted.
    unsafe { RawBuf::new(v.as_mut_ptr(), v.len()) }
}

fn send(to: usize, tag: i32, data: &mut [u8], mode: SendMode) -> Op {
    Op::Send {
        dest: Some(to),
        src: (1 - to) as u32,
        context: 0,
        tag,
        mode,
        layout: Data::Bytes(raw(data)),
    }
}

fn recv(from: u32, tag: i32, buf: &mut [u8]) -> Op {
    Op::Recv {
        src: Some(Src::Rank(from)),
        tag: Some(tag),
        context: 0,
        layout: Data::Bytes(raw(buf)),
    }
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + 3) as u8).collect()
}

#[test]
fn an_eager_message_matches_a_receive_posted_before_or_after() {
    let mut p = Pair::new(64, 16, false);
    let mut data = pattern(40);
    let (mut early, mut late) = (vec![0u8; 40], vec![0u8; 40]);
    let r1 = p.post(1, recv(0, 5, &mut early));
    let s1 = p.post(0, send(1, 5, &mut data, SendMode::Standard));
    let s2 = p.post(0, send(1, 6, &mut data, SendMode::Standard));
    assert_eq!(p.deliver_all(), 2, "one EAGER frame each");
    let st = p.take(1, r1).expect("delivered");
    assert_eq!((st.source, st.tag, st.bytes, st.error), (0, 5, 40, None));
    assert_eq!(early, data);
    // The second waits in the unexpected queue for its receive.
    let r2 = p.post(1, recv(0, 6, &mut late));
    assert_eq!(p.take(1, r2).map(|s| s.bytes), Some(40));
    assert_eq!(late, data);
    assert!(p.take(0, s1).is_some() && p.take(0, s2).is_some());
}

#[test]
fn a_rendezvous_moves_the_data_in_fragments_after_the_cts() {
    let mut p = Pair::new(64, 300, false);
    let mut data = pattern(1000);
    let mut buf = vec![0u8; 1000];
    let s = p.post(0, send(1, 1, &mut data, SendMode::Standard));
    assert_eq!(p.in_flight(), 1, "an RTS only");
    assert!(p.deliver_one());
    assert!(p.take(0, s).is_none());
    let r = p.post(1, recv(0, 1, &mut buf));
    assert_eq!(p.in_flight(), 1, "the CTS");
    assert!(p.deliver_one());
    assert_eq!(p.in_flight(), 4, "1000 bytes in fragments of 300");
    assert_eq!(p.deliver_all(), 4);
    assert_eq!(p.take(1, r).map(|s| s.bytes), Some(1000));
    assert_eq!(buf, data);
    assert!(p.take(0, s).is_some_and(|s| s.error.is_none()));
}

#[test]
fn a_synchronous_send_completes_only_when_matched() {
    let mut p = Pair::new(64, 16, false);
    let mut data = pattern(8);
    let mut buf = vec![0u8; 8];
    let s = p.post(0, send(1, 2, &mut data, SendMode::Sync));
    p.deliver_all();
    assert!(p.take(0, s).is_none(), "no receive yet");
    let r = p.post(1, recv(0, 2, &mut buf));
    assert_eq!(p.deliver_all(), 1, "the ACK");
    assert!(p.take(0, s).is_some());
    assert_eq!(p.take(1, r).map(|s| s.bytes), Some(8));
}

#[test]
fn a_longer_message_is_truncated_not_overrun() {
    let mut p = Pair::new(64, 300, false);
    let mut data = pattern(500);
    let mut buf = vec![0u8; 100];
    let r = p.post(1, recv(0, 3, &mut buf));
    p.post(0, send(1, 3, &mut data, SendMode::Standard));
    p.deliver_all();
    let st = p.take(1, r).unwrap();
    assert_eq!((st.bytes, st.error), (100, Some(ReqError::Truncate)));
    assert_eq!(buf[..], data[..100]);
}

/// A failure notice reaching both ranks after any number of the frames of
/// a rendezvous (RTS, CTS, three DATA fragments): the send completes once
/// the CTS has let it hand every byte to the transport, the receive once
/// the last fragment is in; before that, each fails with `Halted`. Frames
/// still on the wire then change nothing, and each rank tells mpiexec it
/// halted.
#[test]
fn a_failure_notice_at_every_point_of_a_rendezvous() {
    let total = 2 + 3;
    for before in 0..=total {
        let mut p = Pair::new(64, 100, true);
        let mut data = pattern(300);
        let mut buf = vec![0u8; 300];
        let r = p.post(1, recv(0, 9, &mut buf));
        let s = p.post(0, send(1, 9, &mut data, SendMode::Standard));
        for _ in 0..before {
            assert!(p.deliver_one());
        }
        p.announce_failure(0, 2);
        p.announce_failure(1, 2);
        let rest = p.deliver_all();
        assert!(before + rest <= total, "{before}: nothing new is sent");
        let (rs, ss) = (p.take(1, r).unwrap(), p.take(0, s).unwrap());
        let sent = before >= 2;
        assert_eq!(
            ss.error,
            (!sent).then_some(ReqError::Halted),
            "{before}: send"
        );
        if before == total {
            assert_eq!((rs.error, rs.bytes), (None, 300), "{before}");
            assert_eq!(buf, data);
        } else {
            assert_eq!(rs.error, Some(ReqError::Halted), "{before}: receive");
        }
        for c in &mut p.cores {
            assert!(c.halted());
            assert_eq!(c.outbox, vec![ToController::Halted { generation: 1 }]);
        }
    }
}

/// After the rollback to the failure's generation, frames of the old one
/// (sent before the failure, delivered after) are never matched.
#[test]
fn frames_of_an_older_generation_are_fenced_off() {
    let mut p = Pair::new(64, 100, true);
    let mut data = pattern(16);
    let mut buf = vec![0u8; 16];
    p.post(0, send(1, 4, &mut data, SendMode::Standard));
    for rank in 0..2 {
        p.announce_failure(rank, 0);
        p.cores[rank].cleanup(1);
        p.cores[rank].on_notice(ToRank::Resume {
            generation: 1,
            agreed: None,
            joined: Vec::new(),
        });
        assert!(!p.cores[rank].halted());
    }
    p.deliver_all();
    let r = p.post(1, recv(0, 4, &mut buf));
    p.deliver_all();
    assert!(p.take(1, r).is_none(), "the old message is gone");
    assert_eq!(buf, vec![0u8; 16]);
}

#[test]
fn a_lost_peer_fails_requests_only_without_recovery() {
    for recovery in [false, true] {
        let mut p = Pair::new(64, 100, recovery);
        let mut data = pattern(1000);
        let s = p.post(0, send(1, 1, &mut data, SendMode::Standard));
        p.cores[0].events.push(Event::PeerLost {
            peer: 1,
            reason: "closed".into(),
            broken: false,
        });
        p.cores[0].process_events();
        let st = p.take(0, s);
        if recovery {
            // mpiexec's notice halts it: an error now could not be rolled
            // back from.
            assert!(st.is_none());
        } else {
            assert_eq!(st.unwrap().error, Some(ReqError::PeerLost(1)));
        }
    }
}

#[test]
fn a_peer_that_breaks_the_protocol_is_reported_to_mpiexec() {
    let mut p = Pair::new(64, 100, true);
    p.cores[1].events.push(Event::PeerLost {
        peer: 0,
        reason: "garbage".into(),
        broken: true,
    });
    p.cores[1].process_events();
    assert_eq!(
        p.cores[1].outbox,
        vec![ToController::PeerBroken {
            rank: 0,
            reason: "garbage".into()
        }]
    );
}

#[test]
fn a_cts_for_an_unknown_request_is_a_protocol_error_not_a_panic() {
    let mut p = Pair::new(64, 100, false);
    let mut cts = Header::new(Kind::Cts);
    cts.rdv = ReqId {
        index: 7,
        serial: 3,
    }
    .to_wire();
    p.cores[0].events.push(Event::Frame {
        peer: 1,
        hdr: cts,
        payload: Vec::new(),
    });
    p.cores[0].process_events();
    assert_eq!(p.in_flight(), 0, "nothing is sent for it");
}

/// A send of the library's own (a window agent's reply) that completed
/// before its thread took it is no pending request of the application;
/// one the application posted is. (Under reinit the survivor's checkpoint
/// was refused for an agent's reply caught between the two.)
#[test]
fn an_internal_request_is_not_the_applications_pending_one() {
    let mut p = Pair::new(64, 16, false);
    let mut data = pattern(8);
    let mut r = Req::new(send(1, 5, &mut data, SendMode::Standard), false);
    r.internal = true;
    let internal = p.cores[0].alloc(r);
    p.cores[0].start(internal);
    assert!(
        p.cores[0].is_done(internal),
        "an eager send completes at once"
    );
    assert_eq!(p.cores[0].pending_requests(), 0);
    assert!(p.cores[0].pending_summary().is_empty());
    let own = p.post(0, send(1, 6, &mut data, SendMode::Standard));
    assert_eq!(p.cores[0].pending_requests(), 1);
    assert_eq!(
        p.cores[0].pending_summary(),
        vec!["a send to world rank 1 (context 0, tag 6), complete, not waited for".to_string()]
    );
    assert!(p.take(0, own).is_some() && p.take(0, internal).is_some());
    assert_eq!(p.cores[0].pending_requests(), 0);
}

/// The outlook read without the lock follows the core through a failure,
/// the cleanup of a new generation and the resume (with recovery), and
/// through a revocation and a lost peer (without): calm only when nothing
/// could refuse a collective, the generation the core's.
#[test]
fn the_outlook_follows_halts_failures_and_revocations() {
    use std::sync::atomic::Ordering::Acquire;
    let calm = |c: &Core| c.outlook.calm.load(Acquire);
    let generation = |c: &Core| c.outlook.generation.load(Acquire);
    let mut p = Pair::new(64, 100, true);
    assert!(calm(&p.cores[0]) && generation(&p.cores[0]) == 0);
    p.announce_failure(0, 1);
    assert!(!calm(&p.cores[0]), "halted");
    p.cores[0].cleanup(1);
    assert_eq!(generation(&p.cores[0]), 1);
    assert!(!calm(&p.cores[0]), "not resumed yet");
    p.cores[0].on_notice(ToRank::Resume {
        generation: 1,
        agreed: None,
        joined: Vec::new(),
    });
    assert!(calm(&p.cores[0]), "resumed");

    let mut q = Pair::new(64, 100, false);
    q.cores[0].on_notice(ToRank::Revoked { context: 8 });
    assert!(!calm(&q.cores[0]), "a revoked communicator");
    assert!(calm(&q.cores[1]));
    q.cores[1].on_peer_lost(0);
    assert!(!calm(&q.cores[1]), "a lost peer");
}
