//! A reliable, ordered byte stream over datagrams that may be lost,
//! duplicated or reordered: the state machine of one side of a UDP
//! connection, without sockets or clocks of its own (the caller passes
//! `now` and moves the packets), so it is tested on a simulated network.
//!
//! Bytes written are cut into segments of at most `mss` bytes, numbered by
//! their offset in the stream. The receiver acknowledges cumulatively
//! (every byte below `ack` arrived) with up to four selective ranges of
//! what arrived beyond. Losses are found by time, as RACK does (RFC 8985):
//! every transmission is numbered, and a segment is lost once a segment
//! sent after it was delivered and the round trip of that one (plus a
//! quarter of the least round trip, for reordering) has passed since it
//! was sent — which also finds a lost retransmission. A segment at the
//! tail, with nothing after it to be delivered, is found by a probe (TLP):
//! after two round trips without an acknowledgement the last segment goes
//! again (or new data), and its acknowledgement shows what is missing. The
//! retransmission timeout (from the measured round trip, Jacobson/Karels,
//! doubled on each expiry) is the last resort: everything in flight is
//! lost. Acknowledgements ride on data going the other way; a packet of
//! its own acknowledges every second data packet at once, and a lone one
//! after `ack_delay` or when the owner is about to sleep (`flush_ack`) — a
//! ping-pong then sends no packet but its data. The sender keeps in the
//! network (sent, neither acknowledged nor known lost) at most its
//! congestion window (Reno-like: from 16 segments, doubled per round trip
//! up to a threshold, then one segment more per window; halved once per
//! round trip with losses, back to 2 segments on a timeout; at most
//! `window`), and no more than the receiver says it has room for. A side
//! that hears nothing
//! for `dead_after` declares the peer dead; an idle side sends a ping
//! every `keepalive`, so silence means a dead peer or a cut link.
//!
//! Packet (little-endian):
//!
//! ```text
//! 0 magic u16 "MU"  2 kind u8  3 n_sack u8  4 conn u64  12 seq u64
//! 20 ack u64  28 room u32  32 len u32  36 sack [start u64, end u64] x 4
//! 100 len bytes of data (DATA only)
//! ```
//! The header has room for four selective ranges whether or not they are
//! used (`n_sack` says how many are), so that data always begins at the
//! same offset: a packet is received into two pieces, its header and the
//! receiving buffer's free room (`inbox.rs`), and sent from two or three,
//! its header and the send buffer's bytes, without being assembled.
//! `conn` names the connection (chosen by the side that opened it): packets
//! of another connection — an earlier process of the peer — are dropped.

use super::inbox::Inbox;
use super::outbox::{Outbox, MAX_PIECES};
use crate::transport::RawBuf;
use std::collections::{BTreeMap, VecDeque};
use std::io::IoSlice;
use std::time::{Duration, Instant};

const MAGIC: u16 = 0x554D;
const MAX_SACK: usize = 4;
/// In a DATA packet's kind: acknowledge at once (it completes a send).
const ACK_NOW: u8 = 0x80;
/// Bytes before a packet's data.
pub const HEADER: usize = 36 + 16 * MAX_SACK;
/// The most data bytes a packet may carry (what fits in a datagram).
pub const MAX_DATA: usize = 65_507 - HEADER;

/// A packet to send: its header, then `len` bytes of the stream from
/// offset `seq` (`Reliable::slices` gives them, until the next packet
/// from the peer is taken in).
pub struct Packet {
    pub head: [u8; HEADER],
    seq: u64,
    len: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PacketKind {
    Data = 1,
    Ack = 2,
    Ping = 3,
    Fin = 4,
}

#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Largest data bytes in one packet.
    pub mss: usize,
    /// Most bytes in flight (sent, not acknowledged).
    pub window: usize,
    /// Most bytes this side holds for its reader (its advertised room).
    pub recv_buffer: usize,
    pub keepalive: Duration,
    pub dead_after: Duration,
    pub min_rto: Duration,
    pub max_rto: Duration,
    /// Longest wait for data to carry the acknowledgement of a lone packet.
    pub ack_delay: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            mss: 8192,
            window: 4 << 20,
            recv_buffer: 8 << 20,
            keepalive: Duration::from_millis(250),
            dead_after: Duration::from_secs(10),
            min_rto: Duration::from_millis(5),
            max_rto: Duration::from_secs(1),
            ack_delay: Duration::from_micros(200),
        }
    }
}

/// What loss recovery did on a connection (for the debug log and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Segments sent again, in all.
    pub resent: u64,
    /// Losses found by a later delivery (RACK).
    pub detected: u64,
    /// Tail probes.
    pub probes: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
}

/// What went wrong with a connection.
#[derive(Debug, PartialEq, Eq)]
pub enum StreamError {
    /// Nothing heard from the peer for `dead_after`.
    Dead,
    /// A packet of this connection broke the rules.
    Malformed(String),
}

struct Segment {
    len: usize,
    /// When it was last sent, and that transmission's number.
    sent_at: Instant,
    xmit: u64,
    /// Sent more than once: no round-trip sample from it (Karn).
    resent: bool,
    sacked: bool,
    /// Known lost, waiting in `resend`.
    lost: bool,
}

pub struct Reliable {
    cfg: Config,
    conn: u64,
    // Sending: `sbuf` holds the stream from `snd_una` on (in flight, then
    // not yet sent); `snd_nxt` is the offset of the first unsent byte.
    sbuf: Outbox,
    /// Tokens of marks whose bytes were all acknowledged (`take_completed`).
    completed: Vec<u64>,
    snd_una: u64,
    snd_nxt: u64,
    flight: BTreeMap<u64, Segment>,
    /// Segments to send again, by start offset.
    resend: VecDeque<u64>,
    /// Bytes of `flight` selectively acknowledged, and known lost.
    sacked_bytes: u64,
    lost_bytes: u64,
    /// Transmissions so far (numbers each one).
    xmits: u64,
    /// The delivered transmission sent last: its number and round trip.
    rack: Option<(u64, Duration)>,
    /// The end of the highest range the peer reported received: what
    /// lies beyond is unknown (it reports its lowest ranges only).
    sack_top: u64,
    /// Losses were found after a segment was sent at this time: the
    /// earliest another must be declared lost (reordering window).
    reo_deadline: Option<Instant>,
    /// A round trip with losses lasts until this byte is acknowledged;
    /// segments in flight when it began, the transmission count then, and
    /// losses found during it.
    recovery_until: Option<u64>,
    episode_segments: u64,
    episode_xmits: u64,
    episode_lost: u64,
    /// Last time data was sent, and whether a tail probe went since.
    last_data_sent: Instant,
    probe_sent: bool,
    probe_due: bool,
    stats: Stats,
    peer_room: u64,
    /// Congestion window and slow-start threshold, in bytes.
    cwnd: u64,
    ssthresh: u64,
    srtt: Option<Duration>,
    rttvar: Duration,
    min_rtt: Option<Duration>,
    rto: Duration,
    fin_queued: bool,
    fin_sent: bool,
    // Receiving.
    rcv_nxt: u64,
    /// Bytes in order, waiting for the reader.
    inbox: Inbox,
    ooo: BTreeMap<u64, Vec<u8>>,
    ooo_bytes: usize,
    peer_fin: Option<u64>,
    /// An acknowledgement must go now (every second data packet, data
    /// out of order, a duplicate, a ping, the end of the stream).
    ack_due: bool,
    /// A data packet is not acknowledged yet: by this time at the latest.
    ack_by: Option<Instant>,
    // Liveness.
    heard: Instant,
    /// When `on_timeout` last ran: it runs at least every `keepalive`, so
    /// a much longer gap means this process was not running (stopped,
    /// or the whole machine paused), not that the peer was silent.
    ticked: Instant,
    last_sent: Instant,
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl Reliable {
    pub fn new(cfg: Config, conn: u64, now: Instant) -> Reliable {
        Reliable {
            rto: cfg.min_rto.max(Duration::from_millis(50)).min(cfg.max_rto),
            cfg,
            conn,
            sbuf: Outbox::new(),
            completed: Vec::new(),
            snd_una: 0,
            snd_nxt: 0,
            flight: BTreeMap::new(),
            resend: VecDeque::new(),
            sacked_bytes: 0,
            lost_bytes: 0,
            xmits: 0,
            rack: None,
            sack_top: 0,
            reo_deadline: None,
            recovery_until: None,
            episode_segments: 0,
            episode_xmits: 0,
            episode_lost: 0,
            last_data_sent: now,
            probe_sent: false,
            probe_due: false,
            stats: Stats::default(),
            peer_room: cfg.recv_buffer as u64,
            cwnd: 16 * cfg.mss as u64,
            ssthresh: cfg.window as u64,
            srtt: None,
            rttvar: Duration::ZERO,
            min_rtt: None,
            fin_queued: false,
            fin_sent: false,
            rcv_nxt: 0,
            inbox: Inbox::new(),
            ooo: BTreeMap::new(),
            ooo_bytes: 0,
            peer_fin: None,
            ack_due: false,
            ack_by: None,
            heard: now,
            ticked: now,
            last_sent: now,
        }
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    pub fn conn(&self) -> u64 {
        self.conn
    }

    /// The connection a packet belongs to, if it is one of ours at all.
    pub fn conn_of(packet: &[u8]) -> Option<u64> {
        (packet.len() >= HEADER && u16::from_le_bytes([packet[0], packet[1]]) == MAGIC)
            .then(|| word(packet, 4))
    }

    /// Takes as much of `bufs` as the send buffer has room for (a window
    /// beyond what is in flight); 0 when it is full.
    pub fn write(&mut self, bufs: &[IoSlice]) -> usize {
        let room = (2 * self.cfg.window).saturating_sub(self.sbuf.len());
        let mut took = 0;
        for b in bufs {
            let n = b.len().min(room - took);
            self.sbuf.copy_in(&b[..n]);
            took += n;
            if took == room {
                break;
            }
        }
        took
    }

    /// Takes as much of `buf` as the send buffer has room for (as `write`)
    /// by reference, not copied: the memory must stay untouched until a
    /// `mark` placed after it is in `take_completed`, or `own_lent`.
    pub fn lend(&mut self, buf: RawBuf) -> usize {
        let room = (2 * self.cfg.window).saturating_sub(self.sbuf.len());
        let n = buf.len().min(room);
        self.sbuf.lend(buf.sub(0, n).expect("within the buffer"));
        n
    }

    /// Bytes lent and not yet acknowledged.
    pub fn lent(&self) -> usize {
        self.sbuf.lent()
    }

    /// `token` is in `take_completed` once every byte written so far but
    /// the last `after` is acknowledged; the packet that carries the last
    /// of them asks the peer to acknowledge at once.
    pub fn mark(&mut self, token: u64, after: usize) {
        self.sbuf.mark(token, after);
    }

    /// Tokens of marks now acknowledged.
    pub fn take_completed(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.completed)
    }

    /// The sends whose bytes are lent failed: the bytes are copied (the
    /// stream still delivers them) and the marks dropped.
    pub fn own_lent(&mut self) {
        self.sbuf.own_all();
    }

    /// The owner is about to sleep: an acknowledgement that waits for
    /// data to carry it goes now (`poll_transmit`).
    pub fn flush_ack(&mut self) {
        if self.ack_by.is_some() {
            self.ack_due = true;
        }
    }

    /// An acknowledgement is owed (sent at the latest by `flush_ack`).
    pub fn ack_owed(&self) -> bool {
        self.ack_due || self.ack_by.is_some()
    }

    /// Bytes that arrived in order; `None` once the peer closed and all
    /// were read (end of stream), `Some(0)` when none are there yet.
    pub fn read(&mut self, out: &mut [u8]) -> Option<usize> {
        if self.inbox.is_empty() && self.peer_fin == Some(self.rcv_nxt) && !out.is_empty() {
            return None;
        }
        let had_room = self.room();
        let n = self.inbox.read(out);
        // A reader that frees much room tells the sender at once.
        if had_room < self.cfg.recv_buffer / 2 && self.room() >= self.cfg.recv_buffer / 2 {
            self.ack_due = true;
        }
        Some(n)
    }

    /// Bytes (or the end of the stream) wait for the reader.
    pub fn readable(&self) -> bool {
        !self.inbox.is_empty() || self.peer_fin == Some(self.rcv_nxt)
    }

    /// Everything written has been acknowledged.
    pub fn all_acked(&self) -> bool {
        self.sbuf.is_empty()
    }

    /// No more bytes will be written: the peer reads the end of the stream
    /// after the last one.
    pub fn close(&mut self) {
        self.fin_queued = true;
    }

    fn room(&self) -> usize {
        self.cfg
            .recv_buffer
            .saturating_sub(self.inbox.len() + self.ooo_bytes)
    }

    fn packet(&self, kind: PacketKind, seq: u64, len: usize, sack: &[(u64, u64)]) -> Packet {
        let mut head = [0u8; HEADER];
        head[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        head[2] = kind as u8;
        if kind == PacketKind::Data && self.sbuf.marked_within(seq, seq + len as u64) {
            head[2] |= ACK_NOW;
        }
        head[3] = sack.len() as u8;
        head[4..12].copy_from_slice(&self.conn.to_le_bytes());
        head[12..20].copy_from_slice(&seq.to_le_bytes());
        head[20..28].copy_from_slice(&self.rcv_nxt.to_le_bytes());
        head[28..32].copy_from_slice(&(self.room().min(u32::MAX as usize) as u32).to_le_bytes());
        head[32..36].copy_from_slice(&(len as u32).to_le_bytes());
        for (i, (s, e)) in sack.iter().enumerate() {
            head[36 + 16 * i..44 + 16 * i].copy_from_slice(&s.to_le_bytes());
            head[44 + 16 * i..52 + 16 * i].copy_from_slice(&e.to_le_bytes());
        }
        Packet { head, seq, len }
    }

    /// The pieces of `p` to send: its header and its data (pieces of the
    /// send buffer; unused ones empty).
    pub fn slices<'a>(&'a self, p: &'a Packet) -> [IoSlice<'a>; 1 + MAX_PIECES] {
        let mut out = [IoSlice::new(&[]); 1 + MAX_PIECES];
        out[0] = IoSlice::new(&p.head);
        if p.len > 0 {
            self.sbuf.slices(p.seq, p.len, &mut out[1..]);
        }
        out
    }

    /// Ranges that arrived beyond `rcv_nxt`, merged, lowest first.
    /// (No allocation while nothing arrived out of order.)
    fn sack_ranges(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (&s, d) in &self.ooo {
            let e = s + d.len() as u64;
            if let Some(last) = out.last_mut() {
                if s <= last.1 {
                    last.1 = last.1.max(e);
                    continue;
                }
            }
            if out.len() == MAX_SACK {
                break;
            }
            out.push((s, e));
        }
        out
    }

    fn data_packet(&self, seq: u64, len: usize) -> Packet {
        self.packet(PacketKind::Data, seq, len, &self.sack_ranges())
    }

    /// The next packet to send now, if any: retransmissions first, then
    /// new data within the windows, then a pending acknowledgement, the
    /// end of the stream, or a keepalive.
    pub fn next_packet(&mut self, now: Instant) -> Option<Packet> {
        let p = self.choose_packet(now)?;
        self.last_sent = now;
        // Every packet carries the acknowledgement.
        self.ack_due = false;
        self.ack_by = None;
        Some(p)
    }

    /// `next_packet`, as one piece of memory.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let p = self.next_packet(now)?;
        Some(self.bytes(&p))
    }

    /// Packet `p` in one piece of memory.
    pub fn bytes(&self, p: &Packet) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER + p.len);
        for s in self.slices(p) {
            v.extend_from_slice(&s);
        }
        v
    }

    fn choose_packet(&mut self, now: Instant) -> Option<Packet> {
        let mss = self.cfg.mss as u64;
        let outstanding = self.snd_nxt - self.snd_una;
        let pipe = outstanding - self.sacked_bytes - self.lost_bytes;
        let cwnd = self.cwnd.min(self.cfg.window as u64);
        if pipe < cwnd {
            while let Some(seq) = self.resend.pop_front() {
                if self.flight.get(&seq).is_some_and(|s| s.lost) {
                    return Some(self.resend_segment(seq, now));
                }
            }
        }
        let unsent = self.snd_una + self.sbuf.len() as u64 - self.snd_nxt;
        let peer = self.peer_room.max(mss);
        let probe = std::mem::take(&mut self.probe_due);
        if unsent > 0 && outstanding < peer && (pipe < cwnd || probe) {
            let seq = self.snd_nxt;
            let len = unsent.min(mss).min(peer - outstanding) as usize;
            let len = self.sbuf.fits(seq, len);
            let xmit = self.next_xmit();
            self.flight.insert(
                seq,
                Segment {
                    len,
                    sent_at: now,
                    xmit,
                    resent: false,
                    sacked: false,
                    lost: false,
                },
            );
            self.snd_nxt += len as u64;
            self.last_data_sent = now;
            return Some(self.data_packet(seq, len));
        }
        if probe {
            // No new data to probe with: the last segment not known to
            // have arrived goes again.
            let last = self.flight.iter().rev().find(|(_, s)| !s.sacked);
            if let Some(seq) = last.map(|(&k, _)| k) {
                return Some(self.resend_segment(seq, now));
            }
        }
        if self.fin_queued && !self.fin_sent && self.all_acked() {
            self.fin_sent = true;
            return Some(self.packet(PacketKind::Fin, self.snd_nxt, 0, &[]));
        }
        if self.ack_due || self.ack_by.is_some_and(|t| now >= t) {
            let sack = self.sack_ranges();
            return Some(self.packet(PacketKind::Ack, self.snd_nxt, 0, &sack));
        }
        if now.duration_since(self.last_sent) >= self.cfg.keepalive {
            return Some(self.packet(PacketKind::Ping, self.snd_nxt, 0, &[]));
        }
        None
    }

    /// A packet from the peer (of any connection: others are dropped).
    pub fn on_packet(&mut self, p: &[u8], now: Instant) -> Result<(), StreamError> {
        let (Some(head), Some(body)) = (p.first_chunk::<HEADER>(), p.get(HEADER..)) else {
            return Err(StreamError::Malformed("not a packet of ours".into()));
        };
        if body.len() > MAX_DATA {
            return Err(StreamError::Malformed("packet length".into()));
        }
        self.rx_space()[..body.len()].copy_from_slice(body);
        self.on_received(head, body.len(), 0, now)
    }

    /// The packet whose header is `head` carries the next bytes of the
    /// stream and none wait before them: its data may go straight to the
    /// reader (`on_received`'s `direct`).
    pub fn continues_at_reader(&self, head: &[u8; HEADER]) -> bool {
        head[2] & !ACK_NOW == PacketKind::Data as u8
            && Reliable::conn_of(head) == Some(self.conn)
            && word(head, 12) == self.rcv_nxt
            && self.inbox.is_empty()
    }

    /// Where the data of the next packet from the peer is to be received
    /// (`MAX_DATA` bytes; then `on_received` says how many came).
    pub fn rx_space(&mut self) -> &mut [u8] {
        self.inbox.space(MAX_DATA)
    }

    /// A packet arrived whose header is `head` and whose `got` bytes of
    /// data are at the start of `rx_space` — but for the first `direct`,
    /// which the reader already has (only when `continues_at_reader` said
    /// so; 0 otherwise).
    pub fn on_received(
        &mut self,
        head: &[u8; HEADER],
        got: usize,
        direct: usize,
        now: Instant,
    ) -> Result<(), StreamError> {
        let bad = |why: &str| Err(StreamError::Malformed(why.to_string()));
        let Some(conn) = Reliable::conn_of(head) else {
            return bad("not a packet of ours");
        };
        if conn != self.conn {
            return Ok(());
        }
        let n_sack = head[3] as usize;
        let len = u32::from_le_bytes(head[32..36].try_into().expect("4 bytes")) as usize;
        if n_sack > MAX_SACK || got != len || len > self.cfg.mss.max(65536) {
            return bad("packet length");
        }
        let kind = match head[2] & !ACK_NOW {
            1 => PacketKind::Data,
            2 => PacketKind::Ack,
            3 => PacketKind::Ping,
            4 => PacketKind::Fin,
            k => return bad(&format!("packet kind {k}")),
        };
        if kind != PacketKind::Data && len != 0 {
            return bad("data in a control packet");
        }
        debug_assert!(direct == 0 || (direct <= len && self.continues_at_reader(head)));
        self.heard = now;
        let (seq, ack) = (word(head, 12), word(head, 20));
        let room = u32::from_le_bytes(head[28..32].try_into().expect("4 bytes")) as u64;
        let mut sack = [(0, 0); MAX_SACK];
        for (i, r) in sack.iter_mut().enumerate().take(n_sack) {
            *r = (word(head, 36 + 16 * i), word(head, 44 + 16 * i));
        }
        self.on_ack(ack, room, &sack[..n_sack], now)?;
        match kind {
            PacketKind::Data => {
                self.on_data(seq, len, direct, now);
                // It completes a send: the sender waits for this.
                if head[2] & ACK_NOW != 0 {
                    self.ack_due = true;
                }
            }
            PacketKind::Fin => {
                if self.peer_fin.is_none_or(|f| f == seq) {
                    self.peer_fin = Some(seq);
                } else {
                    return bad("end of stream moved");
                }
                self.ack_due = true;
            }
            PacketKind::Ack => {}
            // Answered so that the peer hears from us.
            PacketKind::Ping => self.ack_due = true,
        }
        Ok(())
    }

    /// `len` bytes of the stream from offset `seq` arrived: the first
    /// `direct` at the reader, the rest in `rx_space`.
    fn on_data(&mut self, seq: u64, len: usize, direct: usize, now: Instant) {
        let end = seq + len as u64;
        // A second unacknowledged packet, or anything but the next bytes,
        // is acknowledged at once; a lone in-order one may wait.
        if self.ack_by.is_some() || seq != self.rcv_nxt {
            self.ack_due = true;
        } else {
            self.ack_by = Some(now + self.cfg.ack_delay);
        }
        if end <= self.rcv_nxt || len == 0 {
            return; // a duplicate
        }
        if seq > self.rcv_nxt {
            // Beyond the hole: kept if there is room (else the sender sends
            // it again later).
            if !self.ooo.contains_key(&seq) && len <= self.room() {
                self.ooo_bytes += len;
                self.ooo.insert(seq, self.inbox.landed(len).to_vec());
            }
            return;
        }
        if self.inbox.len() >= self.cfg.recv_buffer {
            return; // no room: the sender tries again after its timeout
        }
        // In order: the bytes stay where they landed.
        if direct > 0 {
            self.inbox.commit(0, len - direct);
        } else {
            self.inbox.commit((self.rcv_nxt - seq) as usize, len);
        }
        self.rcv_nxt = end;
        // What waited beyond the hole follows, if it is contiguous now.
        while let Some((&s, _)) = self.ooo.first_key_value() {
            if s > self.rcv_nxt {
                break;
            }
            let (s, d) = self.ooo.pop_first().expect("just seen");
            self.ooo_bytes -= d.len();
            let e = s + d.len() as u64;
            if e > self.rcv_nxt {
                self.inbox.push(&d[(self.rcv_nxt - s) as usize..]);
                self.rcv_nxt = e;
            }
        }
    }
}

#[path = "reliable_loss.rs"]
mod loss;
#[cfg(test)]
#[path = "reliable_tests.rs"]
mod tests;
