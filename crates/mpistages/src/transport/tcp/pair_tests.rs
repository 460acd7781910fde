//! Tests of a pair of ranks that connect at their first frame: both ends
//! at once, and frames written at once into shared memory beside queued
//! ones.

use super::tests::{pump, transport_as};
use super::*;
use crate::transport::Payload;

/// Ranks 0 and 1 of a job of two (TCP, and shared memory if `shm`), each
/// knowing the other's address, not yet connected.
fn addressed_pair(shm: bool) -> ((Tcp, Arc<Epoll>), (Tcp, Arc<Epoll>)) {
    addressed_pair_over(Links {
        tcp: true,
        shm,
        udp: false,
    })
}

fn addressed_pair_over(links: Links) -> ((Tcp, Arc<Epoll>), (Tcp, Arc<Epoll>)) {
    let (mut a, ea) = transport_as(0, 2, links);
    let (mut b, eb) = transport_as(1, 2, links);
    a.set_address(1, b.local_addr().unwrap());
    b.set_address(0, a.local_addr().unwrap());
    ((a, ea), (b, eb))
}

fn send_eager(t: &mut Tcp, peer: usize, tag: i32, out: &mut Vec<Event>) {
    let mut h = Header::new(Kind::Eager);
    h.src = t.cfg.me as u32;
    h.tag = tag;
    h.len = 4;
    let frame = OutFrame::new(&h, Payload::Owned(tag.to_le_bytes().to_vec()), None);
    t.send(peer, frame, Class::Urgent, out).unwrap();
}

/// The tags of the frames among `events`, in order.
fn tags(events: &[Event]) -> Vec<i32> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Frame { hdr, payload, .. } => {
                assert_eq!(payload, &hdr.tag.to_le_bytes());
                Some(hdr.tag)
            }
            _ => None,
        })
        .collect()
}

/// Both ends of a pair open its connection at their first frame, at the
/// same moment: each keeps sending on its own and reads both, so every
/// frame arrives, in order, over TCP and over shared memory; and when one
/// side ends, the end of the connection it sent nothing on does not cut
/// off the frames still to be read on the other.
#[test]
fn a_pair_that_connects_from_both_ends_at_once_loses_no_frame() {
    for shm in [false, true] {
        let ((mut a, ea), (mut b, eb)) = addressed_pair(shm);
        let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
        // Both send before either looks at its listener.
        for tag in 0..3 {
            send_eager(&mut a, 1, tag, &mut got_a);
            send_eager(&mut b, 0, tag, &mut got_b);
        }
        assert!(a.peers[1].initiated && b.peers[0].initiated);
        let turn = |t: &mut Tcp, ep: &Epoll, out: &mut Vec<Event>| {
            pump(t, ep, out, 2);
            t.poll_memory(out, &mut crate::transport::Ordinary);
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while tags(&got_a).len() < 3 || tags(&got_b).len() < 3 {
            assert!(std::time::Instant::now() < deadline, "{got_a:?} {got_b:?}");
            turn(&mut a, &ea, &mut got_a);
            turn(&mut b, &eb, &mut got_b);
        }
        assert!(a.peers[1].inbound.is_some() && b.peers[0].inbound.is_some());
        // More frames both ways, then b ends: a reads all of them before
        // it hears of the end.
        for tag in 3..6 {
            send_eager(&mut a, 1, tag, &mut got_a);
            send_eager(&mut b, 0, tag, &mut got_b);
        }
        b.close_all();
        while !got_a.iter().any(|e| matches!(e, Event::PeerLost { .. })) {
            assert!(std::time::Instant::now() < deadline, "shm {shm}: {got_a:?}");
            turn(&mut a, &ea, &mut got_a);
        }
        assert_eq!(tags(&got_a), (0..6).collect::<Vec<_>>(), "shm {shm}");
        assert!(
            matches!(got_a.last(), Some(Event::PeerLost { peer: 1, .. })),
            "shm {shm}: {got_a:?}"
        );
        assert_eq!(tags(&got_b)[..3], [0, 1, 2], "shm {shm}");
    }
}

/// `send_now` writes a frame whole into an idle shared-memory ring, or
/// gives it back: when the ring is full, and while frames queued before
/// it wait, even once the reader has made room (it would overtake them).
#[test]
fn a_frame_sent_now_never_overtakes_queued_ones() {
    let ((mut a, ea), (mut b, eb)) = addressed_pair(true);
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    let frame = |tag: i32| {
        let mut h = Header::new(Kind::Eager);
        h.tag = tag;
        h.len = 4;
        OutFrame::new(&h, Payload::Owned(tag.to_le_bytes().to_vec()), None)
    };
    let turn = |t: &mut Tcp, ep: &Epoll, out: &mut Vec<Event>| {
        pump(t, ep, out, 2);
        t.poll_memory(out, &mut crate::transport::Ordinary);
    };
    // No connection yet: given back.
    assert!(a.send_now(1, frame(0)).is_err());
    send_eager(&mut a, 1, 0, &mut got_a);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while tags(&got_b).is_empty() || a.peers[1].stream.as_ref().is_none_or(|c| c.kind() != "shm") {
        assert!(std::time::Instant::now() < deadline, "{got_b:?}");
        turn(&mut b, &eb, &mut got_b);
        turn(&mut a, &ea, &mut got_a);
    }
    // Straight into the ring until it is full.
    let mut tag = 1;
    while a.send_now(1, frame(tag)).is_ok() {
        tag += 1;
        assert!(tag < 1 << 20, "the ring never filled");
    }
    // That one and the next wait in the queue; the reader makes room.
    a.send(1, frame(tag), Class::Urgent, &mut got_a).unwrap();
    a.send(1, frame(tag + 1), Class::Urgent, &mut got_a)
        .unwrap();
    assert!(a.has_backlog());
    turn(&mut b, &eb, &mut got_b);
    assert!(
        a.send_now(1, frame(tag + 2)).is_err(),
        "overtook queued frames"
    );
    a.send(1, frame(tag + 2), Class::Urgent, &mut got_a)
        .unwrap();
    while tags(&got_b).len() < (tag + 3) as usize {
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {}",
            tags(&got_b).len(),
            tag + 3
        );
        turn(&mut a, &ea, &mut got_a);
        turn(&mut b, &eb, &mut got_b);
    }
    assert_eq!(tags(&got_b), (0..tag + 3).collect::<Vec<_>>());
}

/// Takes eager frames whose tag is even into its own buffers.
struct EvenTags {
    bufs: Vec<Vec<u8>>,
}

impl crate::transport::Placement for EvenTags {
    fn place(&mut self, _peer: usize, hdr: &Header) -> Option<(u64, RawBuf)> {
        if hdr.tag % 2 != 0 {
            return None;
        }
        self.bufs.push(vec![0u8; 16]);
        let b = self.bufs.last_mut().expect("just pushed");
        // SAFETY: the Vec lives in `self.bufs`, not resized while the
        // transport writes into it during this poll.
        Some((hdr.tag as u64, unsafe {
            RawBuf::new(b.as_mut_ptr(), b.len())
        }))
    }
}

/// Matching in place over shared memory: frames a `Placement` takes are
/// copied into its buffers and reported as `Placed`, in order; the first
/// one it declines, and everything after it in that read, comes the
/// ordinary way (a later message must not be matched before it).
#[test]
fn frames_are_placed_in_order_until_one_is_declined() {
    let ((mut a, ea), (mut b, eb)) = addressed_pair(true);
    let mut out = Vec::new();
    for tag in [0, 2, 3, 4] {
        send_eager(&mut a, 1, tag, &mut out);
    }
    let mut place = EvenTags { bufs: Vec::new() };
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while got.len() < 4 {
        assert!(std::time::Instant::now() < deadline, "{got:?}");
        pump(&mut a, &ea, &mut out, 2);
        pump(&mut b, &eb, &mut got, 2);
        b.poll_memory(&mut got, &mut place);
        got.retain(|e| matches!(e, Event::Frame { .. } | Event::Placed { .. }));
    }
    let placed: Vec<u64> = got
        .iter()
        .filter_map(|e| match e {
            Event::Placed { token, len, .. } => {
                assert_eq!(*len, 4);
                Some(*token)
            }
            _ => None,
        })
        .collect();
    assert_eq!(placed, [0, 2], "{got:?}");
    assert_eq!(tags(&got), [3, 4]);
    assert_eq!(&place.bufs[1][..4], &2i32.to_le_bytes());
}

/// Over UDP a large DATA frame's bytes are lent to the connection, not
/// copied: its token is reported once the peer acknowledged them (not when
/// written), and write interest is then off, or the next frame would wait
/// for an event that UDP never gives (seen: a 64 KiB message after 1 MiB
/// ones waited 125 ms for a keepalive). A halt copies what is still lent:
/// the sender's memory may then change, the peer still gets the bytes as
/// they were, and the token never comes.
#[test]
fn data_lent_to_udp_completes_when_acknowledged_and_a_halt_copies_it() {
    const N: usize = 1 << 20;
    for halt in [false, true] {
        let udp = Links {
            tcp: true,
            shm: false,
            udp: true,
        };
        let ((mut a, ea), (mut b, eb)) = addressed_pair_over(udp);
        // Frames as large as the message (the limit of a frame's payload).
        b.limits.max_payload = N as u32;
        let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
        send_eager(&mut a, 1, 1, &mut got_a);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while tags(&got_b).is_empty() {
            assert!(std::time::Instant::now() < deadline, "not connected");
            pump(&mut a, &ea, &mut got_a, 1);
            pump(&mut b, &eb, &mut got_b, 1);
        }
        assert_eq!(a.peers[1].stream.as_ref().map(Conn::kind), Some("udp"));
        let mut target = vec![0u8; N];
        // SAFETY: (test) `target` outlives the transfer.
        let raw = unsafe { RawBuf::new(target.as_mut_ptr(), N) };
        b.expect_data(0, 33, raw, N as u64);
        let mut data: Vec<u8> = (0..N).map(|i| (i * 13 / 7) as u8).collect();
        let want = data.clone();
        // SAFETY: (test) `data` outlives the transfer; it is written only
        // after the halt, which stops every read of it.
        let lent = unsafe { RawBuf::new(data.as_mut_ptr(), N) };
        let mut d = Header::new(Kind::Data);
        (d.src, d.rdv, d.len) = (0, 33, N as u32);
        let frame = OutFrame::new(&d, Payload::Borrowed(lent), Some(9));
        a.send(1, frame, Class::Bulk, &mut got_a).unwrap();
        let sent = |evs: &[Event]| evs.iter().any(|e| matches!(e, Event::Sent { token: 9 }));
        assert!(!sent(&got_a), "reported sent before the peer had the bytes");
        if halt {
            a.halt(1);
            data.fill(0xEE);
        }
        while !b.peers[0].targets.is_empty() || (!halt && !sent(&got_a)) {
            assert!(
                std::time::Instant::now() < deadline,
                "halt {halt}: {got_a:?} {got_b:?} {:?}",
                b.peers[0]
                    .targets
                    .values()
                    .map(|t| t.got)
                    .collect::<Vec<_>>()
            );
            // The sender polls as a waiting rank does (epoll only while
            // frames wait to be written).
            if !a.poll_reads(&mut got_a, &mut crate::transport::Ordinary) {
                pump(&mut a, &ea, &mut got_a, 1);
            }
            pump(&mut b, &eb, &mut got_b, 1);
        }
        assert!(got_b
            .iter()
            .any(|e| matches!(e, Event::DataDone { rid: 33, .. })));
        assert!(target == want, "halt {halt}: the bytes changed on the way");
        assert_eq!(sent(&got_a), !halt, "halt {halt}");
        assert!(
            !a.peers[1].want_write,
            "write interest left on with nothing to write"
        );
    }
}
