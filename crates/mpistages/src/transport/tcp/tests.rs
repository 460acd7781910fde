//! Tests of the TCP transport.

use super::*;
use crate::transport::frame::flags;
use crate::transport::Payload;
use std::io::Read;

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

/// Rank 0 of `ranks`, over TCP only.
fn transport(ranks: usize) -> (Tcp, Arc<Epoll>) {
    let tcp = Links {
        tcp: true,
        shm: false,
        udp: false,
    };
    transport_as(0, ranks, tcp)
}

pub(super) fn transport_as(me: usize, ranks: usize, links: Links) -> (Tcp, Arc<Epoll>) {
    let ep = Arc::new(Epoll::new().unwrap());
    let cfg = TcpConfig {
        me,
        ranks,
        key: KEY.to_vec(),
        generation: 0,
        eager_limit: 1024,
        fragment_size: 8192,
        bind: "127.0.0.1:0".parse().unwrap(),
        congestion: String::new(),
        links,
        shm_ring: crate::transport::shm::DEFAULT_RING,
    };
    (Tcp::new(cfg, ep.clone()).unwrap(), ep)
}

/// One round: waits up to `ms` for readiness and handles what came.
pub(super) fn pump(t: &mut Tcp, ep: &Epoll, out: &mut Vec<Event>, ms: i32) {
    let mut evs = Vec::new();
    ep.wait(&mut evs, ms).unwrap();
    for ev in evs {
        t.handle(ev, out);
    }
}

/// Handles readiness events until `done` says so (or a deadline passes).
fn drive(t: &mut Tcp, ep: &Epoll, out: &mut Vec<Event>, done: impl Fn(&[Event]) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done(out) {
        assert!(
            std::time::Instant::now() < deadline,
            "no progress; events so far: {out:?}"
        );
        pump(t, ep, out, 50);
    }
}

/// Writes bytes one at a time and lets the transport read after each,
/// so every parser state sees partial input.
fn trickle(t: &mut Tcp, ep: &Epoll, out: &mut Vec<Event>, s: &mut TcpStream, bytes: &[u8]) {
    for b in bytes {
        s.write_all(&[*b]).unwrap();
        pump(t, ep, out, 1);
    }
}

#[test]
fn frames_in_pieces_rendezvous_data_then_a_malformed_header() {
    let (mut t, ep) = transport(2);
    let mut peer = join(&mut t, &ep, 1);

    // An eager frame, byte by byte.
    let payload: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    let mut h = Header::new(Kind::Eager);
    h.src = 1;
    h.tag = 9;
    h.len = payload.len() as u32;
    h.flags = flags::SYNC;
    let mut out = Vec::new();
    trickle(&mut t, &ep, &mut out, &mut peer, &h.encode());
    trickle(&mut t, &ep, &mut out, &mut peer, &payload);
    drive(&mut t, &ep, &mut out, |o| {
        o.iter().any(|e| matches!(e, Event::Frame { .. }))
    });
    match &out[0] {
        Event::Frame {
            peer: 1,
            hdr,
            payload: p,
        } => {
            assert_eq!((hdr.tag, hdr.flags), (9, flags::SYNC));
            assert_eq!(p, &payload);
        }
        other => panic!("unexpected {other:?}"),
    }

    // Rendezvous data into a registered buffer: two fragments, one of
    // them large enough to be read directly, one trickled.
    let mut target = vec![0u8; 10_000];
    // SAFETY: (test) `target` outlives the transfer, which completes below.
    let raw = unsafe { RawBuf::new(target.as_mut_ptr(), target.len()) };
    t.expect_data(1, 77, raw, 10_000);
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
    out.clear();
    for (seq, off, chunk, slow) in [(1, 0usize, 6000usize, false), (2, 6000, 4000, true)] {
        let mut d = Header::new(Kind::Data);
        d.seq = seq;
        d.src = 1;
        d.rdv = 77;
        d.aux = off as u64;
        d.len = chunk as u32;
        let mut bytes = d.encode().to_vec();
        bytes.extend_from_slice(&data[off..off + chunk]);
        if slow {
            trickle(&mut t, &ep, &mut out, &mut peer, &bytes);
        } else {
            peer.write_all(&bytes).unwrap();
        }
    }
    drive(&mut t, &ep, &mut out, |o| {
        o.iter().any(|e| matches!(e, Event::DataDone { .. }))
    });
    assert!(matches!(out[0], Event::DataDone { peer: 1, rid: 77 }));
    assert_eq!(target, data);

    // Garbage where a header should be: the connection is dropped and
    // the peer reported broken (it may be alive: it must be failed).
    peer.write_all(&[0xAB; 56]).unwrap();
    out.clear();
    drive(&mut t, &ep, &mut out, |o| {
        o.iter().any(|e| matches!(e, Event::PeerLost { .. }))
    });
    match &out[0] {
        Event::PeerLost {
            peer: 1,
            reason,
            broken: true,
        } => {
            assert!(reason.contains("malformed"), "{reason}")
        }
        other => panic!("unexpected {other:?}"),
    }
    let mut e = Vec::new();
    let f = OutFrame::new(&Header::new(Kind::Ack), Payload::None, None);
    assert!(matches!(
        t.send(1, f, Class::Urgent, &mut e),
        Err(TransportError::PeerGone(1))
    ));
}

/// Frames carry their number on the connection: a lost or repeated frame
/// (here the same ACK twice) drops the peer as broken, and frames written
/// by the transport are numbered from 0 after the hello.
#[test]
fn a_frame_out_of_sequence_breaks_the_connection() {
    let (mut t, ep) = transport(2);
    let mut peer = join(&mut t, &ep, 1);
    let mut out = Vec::new();
    for seq in 0..3 {
        let f = OutFrame::new(&Header::new(Kind::Ack), Payload::None, None);
        t.send(1, f, Class::Urgent, &mut out).unwrap();
        let mut b = [0u8; HEADER_LEN];
        peer.read_exact(&mut b).unwrap();
        let h = Header::decode(&b, &t.limits).unwrap();
        assert_eq!(h.seq, seq);
    }
    let mut ack = Header::new(Kind::Ack);
    ack.src = 1;
    peer.write_all(&ack.encode()).unwrap();
    drive(&mut t, &ep, &mut out, |o| {
        o.iter().any(|e| matches!(e, Event::Frame { .. }))
    });
    peer.write_all(&ack.encode()).unwrap();
    out.clear();
    drive(&mut t, &ep, &mut out, |o| {
        o.iter().any(|e| matches!(e, Event::PeerLost { .. }))
    });
    match &out[0] {
        Event::PeerLost {
            peer: 1,
            reason,
            broken: true,
        } => assert!(
            reason.contains("out of sequence: expected 1, got 0"),
            "{reason}"
        ),
        other => panic!("unexpected {other:?}"),
    }
}

/// Connects as rank `src` and waits until the transport has taken the
/// connection.
fn join(t: &mut Tcp, ep: &Epoll, src: u32) -> TcpStream {
    let mut s = TcpStream::connect(t.local_addr().unwrap()).unwrap();
    s.set_nodelay(true).unwrap();
    let mut hello = Header::new(Kind::Hello);
    hello.src = src;
    hello.len = KEY.len() as u32;
    s.write_all(&hello.encode()).unwrap();
    s.write_all(KEY).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !t.live.contains(&(src as usize)) {
        assert!(std::time::Instant::now() < deadline, "handshake not taken");
        pump(t, ep, &mut Vec::new(), 50);
    }
    s
}

#[test]
fn a_spinning_reader_reads_few_connections_directly() {
    let (mut t, ep) = transport(4);
    let mut one = join(&mut t, &ep, 1);
    let mut h = Header::new(Kind::Eager);
    h.src = 1;
    h.tag = 5;
    h.len = 3;
    one.write_all(&h.encode()).unwrap();
    one.write_all(b"abc").unwrap();
    // No epoll at all: the frame comes in through poll_reads alone.
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while out.is_empty() {
        assert!(std::time::Instant::now() < deadline, "frame never read");
        assert!(t.poll_reads(&mut out, &mut crate::transport::Ordinary));
    }
    assert!(
        matches!(&out[0], Event::Frame { peer: 1, hdr, payload } if hdr.tag == 5 && payload == b"abc"),
        "{out:?}"
    );

    // A closed connection is noticed and leaves the live set.
    drop(one);
    out.clear();
    while out.is_empty() {
        assert!(std::time::Instant::now() < deadline, "loss never seen");
        assert!(t.poll_reads(&mut out, &mut crate::transport::Ordinary));
    }
    assert!(matches!(out[0], Event::PeerLost { peer: 1, .. }), "{out:?}");
    assert!(t.live.is_empty());

    // With more connections than that, epoll is cheaper: declined.
    let _two = join(&mut t, &ep, 2);
    let _three = join(&mut t, &ep, 3);
    assert!(t.poll_reads(&mut out, &mut crate::transport::Ordinary));
    let _one = join(&mut t, &ep, 1);
    assert!(!t.poll_reads(&mut out, &mut crate::transport::Ordinary));
}

/// Writing to a peer that closed its end (a killed rank) loses that
/// peer; it must never raise SIGPIPE in a C program.
#[test]
fn a_write_to_a_closed_peer_loses_it_without_a_signal() {
    if !crate::sys::socket::in_child_with_default_sigpipe(
        "transport::tcp::tests::a_write_to_a_closed_peer_loses_it_without_a_signal",
    ) {
        return;
    }
    let (mut t, ep) = transport(2);
    let peer = join(&mut t, &ep, 1);
    drop(peer);
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    // The first writes may still be taken by the kernel; a later one
    // meets the peer's reset.
    loop {
        assert!(std::time::Instant::now() < deadline, "loss never seen");
        let mut h = Header::new(Kind::Eager);
        h.len = 4096;
        let f = OutFrame::new(&h, Payload::Owned(vec![7; 4096]), None);
        if t.send(1, f, Class::Urgent, &mut out).is_err()
            || out.iter().any(|e| matches!(e, Event::PeerLost { .. }))
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Sends a hello as `src` at `generation` with the right key.
fn hello(t: &Tcp, src: u32, generation: u32) -> TcpStream {
    let mut s = TcpStream::connect(t.local_addr().unwrap()).unwrap();
    let mut h = Header::new(Kind::Hello);
    h.src = src;
    h.generation = generation;
    h.len = KEY.len() as u32;
    s.write_all(&h.encode()).unwrap();
    s.write_all(KEY).unwrap();
    s
}

/// A second connection that claims a connected rank (with the job key)
/// is refused; a newer process of that rank (a replacement) is taken.
#[test]
fn a_second_connection_claiming_a_connected_rank_is_refused() {
    let (mut t, ep) = transport(3);
    let mut real = join(&mut t, &ep, 1);
    let mut fake = hello(&t, 1, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    fake.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut out = Vec::new();
    loop {
        assert!(std::time::Instant::now() < deadline, "never refused");
        pump(&mut t, &ep, &mut out, 20);
        if matches!(fake.read(&mut [0u8; 1]), Ok(0)) {
            break;
        }
    }
    assert!(out.is_empty(), "{out:?}");
    // The real connection still carries frames.
    let mut h = Header::new(Kind::Eager);
    h.src = 1;
    h.tag = 3;
    real.write_all(&h.encode()).unwrap();
    drive(&mut t, &ep, &mut out, |o| {
        o.iter().any(|e| matches!(e, Event::Frame { peer: 1, .. }))
    });
    // A replacement of rank 1 (generation 1) takes its place.
    let _new = hello(&t, 1, 1);
    while t.peers[1].conn_generation != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "replacement not taken"
        );
        pump(&mut t, &ep, &mut out, 20);
    }
}

/// After a failure notice named rank 1 at generation 1, a hello of its
/// dead process (generation 0, still in the listen queue) is refused:
/// taken, its end would mark rank 1 lost and fail the sends meant for
/// the replacement (a hang of stages::no_stale_message_after_recovery).
#[test]
fn a_dead_process_connection_read_after_the_notice_is_refused() {
    let (mut t, ep) = transport(3);
    t.forget_peers(&[1], 1);
    let mut dead = hello(&t, 1, 0);
    dead.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    while !matches!(dead.read(&mut [0u8; 1]), Ok(0)) {
        assert!(std::time::Instant::now() < deadline, "never refused");
        pump(&mut t, &ep, &mut out, 20);
    }
    drop(dead);
    assert!(out.is_empty() && !t.peers[1].lost && t.peers[1].stream.is_none());
    let _replacement = hello(&t, 1, 1);
    while t.peers[1].stream.is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "replacement not taken"
        );
        pump(&mut t, &ep, &mut out, 20);
    }
    assert_eq!(t.peers[1].conn_generation, 1);
}

/// A replacement's connection starts clean: a frame half written to the
/// dead process it replaces (its socket full) is not finished on the new
/// connection, where it would be garbage, and numbering starts at 0.
#[test]
fn a_replacement_gets_no_tail_of_the_dead_process_frames() {
    let (mut t, ep) = transport(2);
    let _dead = join(&mut t, &ep, 1);
    let mut out = Vec::new();
    // 8 MiB that the dead process never reads: the kernel takes part.
    let mut h = Header::new(Kind::Eager);
    h.len = 8 << 20;
    let f = OutFrame::new(&h, Payload::Owned(vec![1; 8 << 20]), None);
    t.send(1, f, Class::Bulk, &mut out).unwrap();
    assert!(t.peers[1].woff > 0, "the frame went out whole");
    let mut new = hello(&t, 1, 1);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while t.peers[1].conn_generation != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "replacement not taken"
        );
        pump(&mut t, &ep, &mut out, 20);
    }
    let f = OutFrame::new(&Header::new(Kind::Ack), Payload::None, None);
    t.send(1, f, Class::Urgent, &mut out).unwrap();
    let mut b = [0u8; HEADER_LEN];
    new.read_exact(&mut b).unwrap();
    let got = Header::decode(&b, &t.limits).expect("a clean header");
    assert_eq!((got.kind, got.seq), (Kind::Ack, 0));
}

/// A halt drops the frames waiting behind the one partly written, which
/// already had their sequence numbers: the next frame takes the first of
/// them, so the peer (alive: a survivor) sees no gap and no broken stream.
#[test]
fn a_halt_leaves_no_gap_in_the_sequence() {
    let (mut t, ep) = transport(2);
    let mut peer = join(&mut t, &ep, 1);
    let mut out = Vec::new();
    let mut h = Header::new(Kind::Eager);
    h.len = 8 << 20;
    let big = OutFrame::new(&h, Payload::Owned(vec![1; 8 << 20]), None);
    t.send(1, big, Class::Bulk, &mut out).unwrap();
    assert!(t.peers[1].woff > 0, "the frame went out whole");
    for _ in 0..3 {
        let f = OutFrame::new(&Header::new(Kind::Ack), Payload::None, None);
        t.send(1, f, Class::Urgent, &mut out).unwrap();
    }
    // The socket is full: the acks join the wire list behind the big frame.
    t.flush(1, &mut out);
    assert_eq!(t.peers[1].wire.len(), 4);
    t.halt(1);
    let f = OutFrame::new(&Header::new(Kind::Ack), Payload::None, None);
    t.send(1, f, Class::Urgent, &mut out).unwrap();
    // The peer reads the big frame whole, then the ack sent after the halt.
    let reader = std::thread::spawn(move || {
        let mut b = vec![0u8; HEADER_LEN + (8 << 20)];
        peer.read_exact(&mut b).unwrap();
        let mut n = [0u8; HEADER_LEN];
        peer.read_exact(&mut n).unwrap();
        n
    });
    while !reader.is_finished() {
        pump(&mut t, &ep, &mut out, 20);
    }
    let next = reader.join().unwrap();
    let got = Header::decode(&next, &t.limits).expect("a clean header");
    assert_eq!((got.kind, got.seq), (Kind::Ack, 1));
}

/// Registers `buf` as where rank 1's transfer `rid` lands (all of it).
fn expect_into(t: &mut Tcp, rid: u64, buf: &mut [u8]) {
    // SAFETY: (test) every such buffer outlives the transport's use of it.
    let raw = unsafe { RawBuf::new(buf.as_mut_ptr(), buf.len()) };
    t.expect_data(1, rid, raw, buf.len() as u64);
}

/// `buf` holds `byte` before `upto` and nothing (zeros) from there on.
fn written_up_to(buf: &[u8], upto: usize, byte: u8) -> bool {
    buf[..upto].iter().all(|&b| b == byte) && buf[upto..].iter().all(|&b| b == 0)
}

/// A DATA frame of generation 0 is half read when the job rolls back; in
/// generation 1 a new transfer gets the same id (the request slab starts
/// again). The rest of the old frame, and a whole old frame after it, must
/// not land in the new transfer nor count for it: the new one completes
/// with exactly its own bytes. (Seen in a loop of tests/c/bulk.c: a receive
/// after a rollback completed 256 KiB short, its tail old bytes or zeros.)
#[test]
fn old_frames_of_a_reused_transfer_id_are_dropped_after_a_rollback() {
    let (mut t, ep) = transport(2);
    let mut peer = join(&mut t, &ep, 1);
    let mut out = Vec::new();
    let n = 8_000usize;
    let mut old_target = vec![0u8; n];
    expect_into(&mut t, 5, &mut old_target);
    let data_frame = |seq: u64, generation: u32, off: usize, bytes: &[u8]| {
        let mut d = Header::new(Kind::Data);
        (d.seq, d.src, d.rdv, d.generation) = (seq, 1, 5, generation);
        d.aux = off as u64;
        d.len = bytes.len() as u32;
        let mut v = d.encode().to_vec();
        v.extend_from_slice(bytes);
        v
    };
    // Half of an old frame (generation 0) of 6000 bytes of 0xEE.
    let old = data_frame(0, 0, 0, &[0xEE; 6000]);
    trickle(&mut t, &ep, &mut out, &mut peer, &old[..HEADER_LEN + 3000]);
    // The rollback, and the new transfer with the same id.
    t.halt(1);
    t.cleanup(1);
    let mut target = vec![0u8; n];
    expect_into(&mut t, 5, &mut target);
    // The rest of the old frame, a whole old one, then the new data.
    trickle(&mut t, &ep, &mut out, &mut peer, &old[HEADER_LEN + 3000..]);
    let old2 = data_frame(1, 0, 6000, &[0xEE; 2000]);
    let new_data: Vec<u8> = (0..n).map(|i| (i * 13) as u8).collect();
    let mut bytes = old2;
    bytes.extend(data_frame(2, 1, 0, &new_data[..5000]));
    peer.write_all(&bytes).unwrap();
    pump(&mut t, &ep, &mut out, 50);
    pump(&mut t, &ep, &mut out, 50);
    assert!(
        !out.iter().any(|e| matches!(e, Event::DataDone { .. })),
        "completed with 5000 of {n} bytes of its own: {out:?}"
    );
    peer.write_all(&data_frame(3, 1, 5000, &new_data[5000..]))
        .unwrap();
    drive(&mut t, &ep, &mut out, |o| {
        o.iter().any(|e| matches!(e, Event::DataDone { .. }))
    });
    assert_eq!(target, new_data);
    // What came before the halt was written; nothing after it.
    assert!(
        written_up_to(&old_target, 3000, 0xEE),
        "a halted transfer's buffer was written"
    );
}

/// A transfer under way when this rank halts: the rest of its frames still
/// comes (the sender wrote them before it heard of the failure) and is read
/// past, but the transfer is never reported done: its request failed, and
/// a completion would make it look whole with its tail never written.
/// (Seen in a loop of tests/c/bulk.c: a survivor's MPI_Waitall returned
/// success with the last bytes of a 16 MiB receive unwritten.)
#[test]
fn a_transfer_halted_midway_is_never_reported_done() {
    let (mut t, ep) = transport(2);
    let mut peer = join(&mut t, &ep, 1);
    let mut out = Vec::new();
    let n = 6_000usize;
    let mut target = vec![0u8; n];
    expect_into(&mut t, 5, &mut target);
    let mut d = Header::new(Kind::Data);
    (d.src, d.rdv, d.len) = (1, 5, n as u32);
    let mut frame = d.encode().to_vec();
    frame.extend_from_slice(&[0xAB; 6000]);
    trickle(
        &mut t,
        &ep,
        &mut out,
        &mut peer,
        &frame[..HEADER_LEN + 2000],
    );
    t.halt(1);
    trickle(
        &mut t,
        &ep,
        &mut out,
        &mut peer,
        &frame[HEADER_LEN + 2000..],
    );
    // The stream goes on: a frame after it is read as usual.
    let mut ack = Header::new(Kind::Ack);
    (ack.seq, ack.src) = (1, 1);
    peer.write_all(&ack.encode()).unwrap();
    drive(&mut t, &ep, &mut out, |o| {
        o.iter().any(|e| matches!(e, Event::Frame { .. }))
    });
    assert!(
        !out.iter().any(|e| matches!(e, Event::DataDone { .. })),
        "a halted transfer was reported done: {out:?}"
    );
    assert!(written_up_to(&target, 2000, 0xAB), "written after the halt");
}

/// The UDP socket shares the TCP listener's port. With the port left to
/// the kernel, a UDP socket already there is no error (another port is
/// found, as when a UDP connection's ephemeral socket took the number the
/// kernel gave the listener: seen once in CI, "Address already in use" in
/// MPI_Init); with a port asked for, it is one.
#[test]
fn the_udp_socket_takes_the_listeners_port_or_the_pair_moves() {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let (l, u) = bind_listeners(any, true).unwrap();
    let port = l.local_addr().unwrap().port();
    assert_eq!(u.unwrap().local_addr().unwrap().port(), port);
    // Hold UDP sockets on many ports the kernel may hand out next.
    let held: Vec<UdpSocket> = (0..64).filter_map(|_| UdpSocket::bind(any).ok()).collect();
    for _ in 0..16 {
        let (l, u) = bind_listeners(any, true).unwrap();
        assert_eq!(u.unwrap().local_addr().unwrap(), l.local_addr().unwrap());
    }
    let taken = held[0].local_addr().unwrap();
    let err = bind_listeners(taken, true).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    let (_, none) = bind_listeners(any, false).unwrap();
    assert!(none.is_none());
}
