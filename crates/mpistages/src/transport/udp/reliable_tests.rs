//! Two ends of a stream over a simulated network that loses, duplicates,
//! reorders and delays packets with a seeded generator; the clock is the
//! simulation's. Every byte is checked.

use super::*;

/// xorshift64*: reproducible faults from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

struct Net {
    rng: Rng,
    loss: f64,
    dup: f64,
    reorder: f64,
    /// (delivery time, to side, packet)
    wire: Vec<(Instant, usize, Vec<u8>)>,
    sent: usize,
}

const DELAY: Duration = Duration::from_micros(50);

impl Net {
    fn new(seed: u64, loss: f64, dup: f64, reorder: f64) -> Net {
        Net {
            rng: Rng(seed | 1),
            loss,
            dup,
            reorder,
            wire: Vec::new(),
            sent: 0,
        }
    }

    fn send(&mut self, to: usize, p: Vec<u8>, now: Instant) {
        self.sent += 1;
        if self.rng.chance(self.loss) {
            return;
        }
        let late = if self.rng.chance(self.reorder) {
            DELAY * 20
        } else {
            DELAY
        };
        if self.rng.chance(self.dup) {
            self.wire.push((now + DELAY * 3, to, p.clone()));
        }
        self.wire.push((now + late, to, p));
    }

    fn due(&mut self, now: Instant) -> Vec<(usize, Vec<u8>)> {
        let (due, later): (Vec<_>, Vec<_>) = self.wire.drain(..).partition(|w| w.0 <= now);
        self.wire = later;
        due.into_iter().map(|(_, to, p)| (to, p)).collect()
    }
}

fn pattern(side: usize, i: usize) -> u8 {
    (i.wrapping_mul(2654435761) >> 13) as u8 ^ side as u8
}

/// Sends `n` bytes each way at once and checks them; returns the
/// simulated time it took and the packets sent.
fn exchange(cfg: Config, net: &mut Net, n: usize) -> (Duration, usize) {
    let (t, sent, _) = exchange_stats(cfg, net, n);
    (t, sent)
}

/// `exchange`, with what loss recovery did on each side.
fn exchange_stats(cfg: Config, net: &mut Net, n: usize) -> (Duration, usize, [Stats; 2]) {
    let start = Instant::now();
    let mut now = start;
    let mut ends = [Reliable::new(cfg, 42, now), Reliable::new(cfg, 42, now)];
    let mut written = [0usize; 2];
    let mut got = [0usize; 2];
    let mut buf = vec![0u8; 100_000];
    let mut step = 0u64;
    while got != [n, n] {
        step += 1;
        assert!(step < 5_000_000, "stuck: got {got:?} of {n}");
        for side in 0..2 {
            // Writes of varied sizes.
            if written[side] < n {
                let k = ((step as usize * 7919) % 30_000 + 1).min(n - written[side]);
                let chunk: Vec<u8> = (written[side]..written[side] + k)
                    .map(|i| pattern(side, i))
                    .collect();
                written[side] += ends[side].write(&[IoSlice::new(&chunk)]);
            }
            while let Some(p) = ends[side].poll_transmit(now) {
                net.send(1 - side, p, now);
            }
            if now >= ends[side].next_timeout() {
                ends[side].on_timeout(now).expect("peer declared dead");
            }
        }
        for (to, p) in net.due(now) {
            ends[to].on_packet(&p, now).expect("a well-formed packet");
        }
        for side in 0..2 {
            // Side `side` reads what the other one sent.
            let from = 1 - side;
            let k = ends[side].read(&mut buf).expect("not closed");
            for (j, &b) in buf[..k].iter().enumerate() {
                assert_eq!(b, pattern(from, got[side] + j), "byte {}", got[side] + j);
            }
            got[side] += k;
        }
        now += Duration::from_micros(10);
    }
    (now - start, net.sent, [ends[0].stats(), ends[1].stats()])
}

fn small_cfg() -> Config {
    Config {
        mss: 1400,
        window: 256 << 10,
        recv_buffer: 512 << 10,
        ..Config::default()
    }
}

#[test]
fn a_clean_network_delivers_every_byte_in_order() {
    let mut net = Net::new(1, 0.0, 0.0, 0.0);
    exchange(small_cfg(), &mut net, 2 << 20);
}

#[test]
fn loss_duplication_and_reordering_change_nothing_but_time() {
    let (clean, _) = exchange(small_cfg(), &mut Net::new(6, 0.0, 0.0, 0.0), 1 << 20);
    println!("no faults: {clean:?}");
    for (seed, loss, dup, reorder) in [
        (7, 0.01, 0.0, 0.0),
        (8, 0.05, 0.01, 0.02),
        (9, 0.10, 0.05, 0.10),
        (10, 0.0, 0.3, 0.3),
    ] {
        let mut net = Net::new(seed, loss, dup, reorder);
        let (t, sent) = exchange(small_cfg(), &mut net, 1 << 20);
        println!("loss {loss} dup {dup} reorder {reorder}: {t:?}, {sent} packets");
    }
}

/// Simulated time, so no noise: with 5% of the packets lost the stream
/// keeps at least a third of its lossless rate (each loss found by a
/// later delivery or a tail probe, not by the retransmission timeout),
/// whatever the seed.
#[test]
fn five_percent_loss_keeps_a_third_of_the_rate() {
    let n = 4 << 20;
    let (clean, _) = exchange(small_cfg(), &mut Net::new(6, 0.0, 0.0, 0.0), n);
    for seed in [1, 3, 5, 7, 9] {
        let (t, sent, st) = exchange_stats(small_cfg(), &mut Net::new(seed, 0.05, 0.0, 0.0), n);
        let rate = clean.as_secs_f64() / t.as_secs_f64();
        println!(
            "seed {seed}: {t:?} ({sent} packets) against {clean:?}: {rate:.2} of the rate; {st:?}"
        );
        assert!(
            rate >= 0.34,
            "seed {seed}: {t:?} against {clean:?} lossless"
        );
    }
}

#[test]
fn a_silent_peer_is_dead_after_the_timeout_and_not_before() {
    let cfg = small_cfg();
    let t0 = Instant::now();
    let mut a = Reliable::new(cfg, 1, t0);
    let mut now = t0;
    // Keepalives go out while nothing comes back.
    let mut pings = 0;
    while now < t0 + cfg.dead_after - Duration::from_millis(1) {
        if let Some(p) = a.poll_transmit(now) {
            assert_eq!(p[2], PacketKind::Ping as u8);
            pings += 1;
        }
        assert_eq!(a.on_timeout(now), Ok(()));
        now += Duration::from_millis(10);
    }
    assert!(pings >= 7, "{pings} keepalives in 2 s");
    now = t0 + cfg.dead_after;
    assert_eq!(a.on_timeout(now), Err(StreamError::Dead));
}

#[test]
fn the_end_of_the_stream_comes_after_the_last_byte() {
    let mut now = Instant::now();
    let (mut a, mut b) = (
        Reliable::new(small_cfg(), 5, now),
        Reliable::new(small_cfg(), 5, now),
    );
    a.write(&[IoSlice::new(b"last words")]);
    a.close();
    for _ in 0..4 {
        // A lone data packet's acknowledgement waits `ack_delay`; the end
        // of the stream goes once everything before it is acknowledged.
        now += small_cfg().ack_delay;
        while let Some(p) = a.poll_transmit(now) {
            b.on_packet(&p, now).unwrap();
        }
        while let Some(p) = b.poll_transmit(now) {
            a.on_packet(&p, now).unwrap();
        }
    }
    let mut buf = [0u8; 32];
    assert_eq!(b.read(&mut buf), Some(10));
    assert_eq!(&buf[..10], b"last words");
    assert_eq!(b.read(&mut buf), None);
}

#[test]
fn other_connections_and_malformed_packets() {
    let now = Instant::now();
    let (mut a, mut b) = (
        Reliable::new(small_cfg(), 5, now),
        Reliable::new(small_cfg(), 6, now),
    );
    a.write(&[IoSlice::new(b"hello")]);
    let p = a.poll_transmit(now).unwrap();
    // A packet of another connection (an earlier process): dropped.
    assert_eq!(b.on_packet(&p, now), Ok(()));
    assert_eq!(b.read(&mut [0u8; 8]), Some(0));
    let mut c = Reliable::new(small_cfg(), 5, now);
    for bad in [
        &p[..10],
        &p[..p.len() - 1],
        &[&p[..], &[0u8][..]].concat()[..],
    ] {
        assert!(
            matches!(c.on_packet(bad, now), Err(StreamError::Malformed(_))),
            "{bad:?}"
        );
    }
    let mut wrong_kind = p.clone();
    wrong_kind[2] = 9;
    assert!(c.on_packet(&wrong_kind, now).is_err());
    // An acknowledgement of bytes never sent.
    let mut ack = Reliable::new(small_cfg(), 5, now);
    ack.rcv_nxt = 1000;
    ack.ack_due = true;
    let forged = ack.poll_transmit(now).unwrap();
    assert!(c.on_packet(&forged, now).is_err());
    assert_eq!(c.on_packet(&p, now), Ok(()));
    let mut buf = [0u8; 8];
    assert_eq!(c.read(&mut buf), Some(5));
}

#[test]
fn a_reader_that_does_not_read_holds_the_sender_back() {
    let now = Instant::now();
    let cfg = Config {
        recv_buffer: 64 << 10,
        ..small_cfg()
    };
    let (mut a, mut b) = (Reliable::new(cfg, 5, now), Reliable::new(cfg, 5, now));
    let data = vec![1u8; 1 << 20];
    let mut t = now;
    for _ in 0..2000 {
        a.write(&[IoSlice::new(&data)]);
        while let Some(p) = a.poll_transmit(t) {
            b.on_packet(&p, t).unwrap();
        }
        while let Some(p) = b.poll_transmit(t) {
            a.on_packet(&p, t).unwrap();
        }
        let _ = a.on_timeout(t);
        t += Duration::from_millis(1);
    }
    assert!(
        b.inbox.len() <= (64 << 10) + cfg.mss,
        "{} held",
        b.inbox.len()
    );
    assert!(a.sbuf.len() <= 2 * cfg.window);
}

#[test]
fn acknowledgements_ride_on_data_or_wait_a_little() {
    let cfg = small_cfg();
    let t0 = Instant::now();
    let (mut a, mut b) = (Reliable::new(cfg, 5, t0), Reliable::new(cfg, 5, t0));
    // A ping-pong: each reply carries the acknowledgement, no packet of its own.
    for round in 0..3 {
        a.write(&[IoSlice::new(b"ping")]);
        let p = a.poll_transmit(t0).unwrap();
        b.on_packet(&p, t0).unwrap();
        assert!(b.ack_owed(), "round {round}");
        assert!(b.poll_transmit(t0).is_none(), "a lone ack waits for data");
        assert_eq!(b.next_timeout(), t0 + cfg.ack_delay);
        b.write(&[IoSlice::new(b"pong")]);
        let p = b.poll_transmit(t0).unwrap();
        assert_eq!(p[2], PacketKind::Data as u8);
        a.on_packet(&p, t0).unwrap();
        assert!(!b.ack_owed());
        assert_eq!(a.snd_una, a.snd_nxt, "the pong acknowledged the ping");
        a.flush_ack();
        assert_eq!(a.poll_transmit(t0).unwrap()[2], PacketKind::Ack as u8);
    }
    // Nothing to carry it: the acknowledgement goes after `ack_delay`.
    a.write(&[IoSlice::new(b"one")]);
    b.on_packet(&a.poll_transmit(t0).unwrap(), t0).unwrap();
    assert!(b.poll_transmit(t0 + cfg.ack_delay / 2).is_none());
    let ack = b.poll_transmit(t0 + cfg.ack_delay).unwrap();
    assert_eq!(ack[2], PacketKind::Ack as u8);
    // A second unacknowledged packet is acknowledged at once.
    a.on_packet(&ack, t0).unwrap();
    a.write(&[IoSlice::new(b"two"), IoSlice::new(&[7u8; 2000])]);
    b.on_packet(&a.poll_transmit(t0).unwrap(), t0).unwrap();
    assert!(b.poll_transmit(t0).is_none());
    b.on_packet(&a.poll_transmit(t0).unwrap(), t0).unwrap();
    assert_eq!(b.poll_transmit(t0).unwrap()[2], PacketKind::Ack as u8);
}

/// A lone message whose only packet is lost (nothing after it to show the
/// gap) is sent again by a tail probe about two round trips later, not
/// after the retransmission timeout.
#[test]
fn a_lost_tail_is_found_by_a_probe_not_by_the_timeout() {
    let cfg = small_cfg();
    let rtt = Duration::from_micros(20);
    let mut now = Instant::now();
    let (mut a, mut b) = (Reliable::new(cfg, 5, now), Reliable::new(cfg, 5, now));
    // Ping-pongs measure the round trip.
    for _ in 0..20 {
        a.write(&[IoSlice::new(b"ping")]);
        let p = a.poll_transmit(now).unwrap();
        now += rtt / 2;
        b.on_packet(&p, now).unwrap();
        b.write(&[IoSlice::new(b"pong")]);
        let p = b.poll_transmit(now).unwrap();
        now += rtt / 2;
        a.on_packet(&p, now).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(b.read(&mut buf), Some(4));
        assert_eq!(a.read(&mut buf), Some(4));
    }
    a.write(&[IoSlice::new(b"lost")]);
    let sent = now;
    assert!(
        a.poll_transmit(now).is_some(),
        "the packet the network loses"
    );
    assert!(a.poll_transmit(now).is_none());
    // Time passes until the probe.
    now = a.next_timeout();
    a.on_timeout(now).unwrap();
    let probe = a.poll_transmit(now).expect("a probe");
    let waited = now - sent;
    assert!(
        waited < cfg.min_rto,
        "probe after {waited:?}, the timeout is {:?}",
        cfg.min_rto
    );
    b.on_packet(&probe, now).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(b.read(&mut buf), Some(4));
    assert_eq!(&buf[..4], b"lost");
    let st = a.stats();
    assert_eq!((st.probes, st.timeouts, st.resent), (1, 0, 1), "{st:?}");
}

/// Side 0 sends frames of a copied head and a lent body (a mark after
/// each) over a lossy network; side 1 reads. A mark comes back only once
/// side 1 has every byte before it, and the body is then scribbled over,
/// as a sender whose send completed may: a later retransmission that read
/// it would show in the bytes checked.
#[test]
fn lent_bytes_are_read_until_acknowledged_and_only_then_given_back() {
    const FRAMES: usize = 40;
    const BODY: usize = 9_000;
    let cfg = small_cfg();
    let mut net = Net::new(11, 0.05, 0.01, 0.02);
    let mut now = Instant::now();
    let mut ends = [Reliable::new(cfg, 7, now), Reliable::new(cfg, 7, now)];
    let mut memory: Vec<u8> = (0..FRAMES * BODY).map(|i| pattern(0, i)).collect();
    // SAFETY: `memory` outlives both ends; it is written only where a
    // mark came back (that body is no longer read) or not at all.
    let lent = unsafe { RawBuf::new(memory.as_mut_ptr(), memory.len()) };
    let mut want = Vec::new();
    let mut marks = Vec::new();
    let mut written = 0;
    for f in 0..FRAMES {
        let head = [f as u8; 20];
        assert_eq!(ends[0].write(&[IoSlice::new(&head)]), head.len());
        let body = lent.sub(f * BODY, BODY).unwrap();
        assert_eq!(ends[0].lend(body), BODY);
        ends[0].mark(f as u64, 0);
        want.extend_from_slice(&head);
        want.extend_from_slice(body.as_slice());
        written += head.len() + BODY;
        marks.push(written);
    }
    assert_eq!(ends[0].lent(), FRAMES * BODY);
    let mut got = Vec::new();
    let mut back = Vec::new();
    let mut buf = vec![0u8; 50_000];
    for step in 0.. {
        assert!(
            step < 2_000_000,
            "stuck: {} of {} bytes",
            got.len(),
            want.len()
        );
        for (side, end) in ends.iter_mut().enumerate() {
            while let Some(p) = end.poll_transmit(now) {
                net.send(1 - side, p, now);
            }
            if now >= end.next_timeout() {
                end.on_timeout(now).expect("alive");
            }
        }
        for (to, p) in net.due(now) {
            ends[to].on_packet(&p, now).expect("a well-formed packet");
        }
        let k = ends[1].read(&mut buf).expect("open");
        got.extend_from_slice(&buf[..k]);
        for token in ends[0].take_completed() {
            let f = token as usize;
            assert_eq!(f, back.len(), "marks come back in order");
            assert!(
                got.len() >= marks[f],
                "mark {f} back before its bytes arrived"
            );
            memory[f * BODY..(f + 1) * BODY].fill(0xEE);
            back.push(token);
        }
        if back.len() == FRAMES && got.len() == want.len() {
            break;
        }
        now += Duration::from_micros(10);
    }
    assert_eq!(got, want);
    assert_eq!(ends[0].lent(), 0);
    assert!(
        ends[0].stats().resent > 0,
        "the network lost nothing: no test"
    );
}

/// The packet that completes a mark is acknowledged at once; a lone
/// packet without one waits for data to carry its acknowledgement.
#[test]
fn the_packet_that_completes_a_send_is_acknowledged_at_once() {
    let now = Instant::now();
    for marked in [false, true] {
        let mut a = Reliable::new(small_cfg(), 3, now);
        let mut b = Reliable::new(small_cfg(), 3, now);
        let mut memory = vec![5u8; 100];
        // SAFETY: `memory` outlives `a` and is not written.
        let lent = unsafe { RawBuf::new(memory.as_mut_ptr(), memory.len()) };
        a.lend(lent);
        if marked {
            a.mark(1, 0);
        }
        let p = a.poll_transmit(now).expect("data");
        b.on_packet(&p, now).unwrap();
        let ack = b.poll_transmit(now);
        assert_eq!(ack.is_some(), marked, "marked: {marked}");
        if let Some(ack) = ack {
            a.on_packet(&ack, now).unwrap();
            assert_eq!(a.take_completed(), vec![1]);
        }
    }
}
