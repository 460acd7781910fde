//! The stream transport: one connection per pair of processes, over TCP or,
//! with a peer on this host, over shared memory (`conn.rs`). A pair
//! connects at its first message (`Tcp::set_address`), so a job makes
//! only the connections its communication needs; or, where the processes
//! are told to connect at start (`Tcp::connect`), the higher rank connects
//! to the lower one. Two processes that open their connection to each
//! other at the same moment keep both: each sends on the one it opened
//! and reads both (`Peer::inbound`), so no frame is ever in flight on a
//! connection that is dropped. A process that joins later (a replacement)
//! connects to everyone, and its connection replaces the old one. A
//! connection tries
//! shared memory first (when allowed), which succeeds exactly when the
//! peer is on this host, and TCP otherwise. Connections are non-blocking
//! (TCP with `TCP_NODELAY`); frames leave in vectored writes (many frames
//! per system call or ring copy) and arrive through a read buffer, except
//! rendezvous data, which is read straight into the receiver's buffer.

use super::frame::{Header, Kind, Limits, HEADER_LEN, MAX_PAYLOAD};
use super::shm::{self, ShmConn};
use super::udp::UdpConn;
use super::{Class, Event, OutFrame, Payload, Placement, RawBuf, Transport, TransportError};
use crate::sys::epoll::{self, Epoll};
use crate::sys::socket::NoSignal;
use crate::sys::timerfd::TimerFd;
use conn::Conn;
use peers::{Peer, Peers};
// Transfer ids as keys, on every rendezvous fragment: a fast hash.
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::sync::Arc;
use std::time::Duration;

const TOKEN_LISTENER: u64 = 1 << 40;
const TOKEN_SHM_LISTENER: u64 = (1 << 40) + 1;
const TOKEN_UDP_LISTENER: u64 = (1 << 40) + 2;
const TOKEN_UDP_TIMER: u64 = (1 << 40) + 3;
const TOKEN_HANDSHAKE: u64 = 1 << 41;
/// Process ids stay below this (`MPI_Comm_spawn` adds processes).
const MAX_PROCESSES: u32 = 1 << 20;
/// Staging buffer for incoming bytes, and how much one read asks for.
const READ_BUF: usize = 64 << 10;
const STAGING_READ: usize = 16 << 10;
/// A payload with at least this much still to come is read directly into
/// its destination instead of through the staging buffer.
const DIRECT_READ_MIN: usize = 4 << 10;
/// Bytes moved for one peer per call before the engine lock is given back:
/// user threads never wait long behind a bulk transfer, and other peers get
/// their turn (level-triggered epoll brings us back for the rest).
const READ_BUDGET: usize = 512 << 10;
const WRITE_BUDGET: usize = 512 << 10;
const MAX_IOV: usize = 64;
/// A spinning waiter reads the sockets itself, without asking epoll, when a
/// process has at most this many connections (see `poll_reads`).
const POLL_READS_MAX_PEERS: usize = 2;

/// Whether bytes from `p` come through a socket (each look a system call).
fn through_socket(p: &Peer) -> bool {
    p.conns().any(|c| matches!(c, Conn::Tcp(_) | Conn::Udp(_)))
}
/// DATA of at least this many bytes goes by reference between ranks of
/// one host whose memory the peer can read (one copy instead of two).
const BY_REFERENCE_MIN: usize = 32 << 10;
/// A bulk frame's data of at least this many bytes is lent to a UDP
/// connection rather than copied into it (`UdpConn::write_lending`): its
/// send then completes once the peer acknowledged it, a round trip later
/// than a copy would, which only a large piece repays.
const LEND_MIN: usize = 64 << 10;

pub struct TcpConfig {
    pub me: usize,
    pub ranks: usize,
    pub key: Vec<u8>,
    pub generation: u32,
    pub eager_limit: usize,
    pub fragment_size: usize,
    /// Address to listen on (port 0 for any free port).
    pub bind: SocketAddr,
    /// TCP congestion control for our connections ("" = the system's).
    /// Pacing algorithms such as BBR (some kernels' default) throttle one
    /// busy connection between two ranks; measured on loopback, Reno moves
    /// twice the bytes per second.
    pub congestion: String,
    /// Which connections may be made.
    pub links: Links,
    /// Bytes of each shared-memory ring.
    pub shm_ring: usize,
}

/// The kinds of connection a process makes and accepts
/// (`MPISTAGES_TRANSPORT`: `auto` = shm,tcp; or a list of tcp, shm, udp).
/// A connection tries shared memory first, then UDP, then TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Links {
    pub tcp: bool,
    pub shm: bool,
    pub udp: bool,
}

impl Links {
    pub const AUTO: Links = Links {
        tcp: true,
        shm: true,
        udp: false,
    };

    pub fn parse(s: &str) -> Option<Links> {
        if s.is_empty() || s == "auto" {
            return Some(Links::AUTO);
        }
        let mut l = Links {
            tcp: false,
            shm: false,
            udp: false,
        };
        for w in s.split(',') {
            match w {
                "tcp" => l.tcp = true,
                "shm" => l.shm = true,
                "udp" => l.udp = true,
                _ => return None,
            }
        }
        Some(l)
    }
}

struct Target {
    buf: RawBuf,
    total: u64,
    got: u64,
    /// It never completes: bytes of it could not be copied from the
    /// sender's memory (see `take_reference`), or this rank halted while
    /// it was under way.
    spoiled: bool,
}

enum ReadState {
    Header,
    Payload {
        hdr: Header,
        buf: Vec<u8>,
        have: usize,
    },
    /// A DATA frame of `len` bytes for a transfer; `pos` is the next
    /// byte's offset in the message, `end` the frame's last offset + 1.
    Data {
        /// Transfer id and the frame's generation: its target's key.
        key: (u64, u32),
        pos: u64,
        end: u64,
        len: u64,
    },
}

/// A transfer's DATA frames sent by reference and not yet copied. Its
/// token (carried by its last frame) is reported only once all are: until
/// then the sender's buffer must stay untouched, and its request open.
#[derive(Default)]
struct Refs {
    outstanding: usize,
    token: Option<u64>,
}

struct Handshake {
    stream: Conn,
    buf: Vec<u8>,
    /// When it was accepted (the oldest goes first when too many wait).
    since: std::time::Instant,
}

pub struct Tcp {
    cfg: TcpConfig,
    /// Current generation: DATA frames of other generations for transfers
    /// we do not know are stale and dropped, not a protocol error.
    generation: u32,
    limits: Limits,
    epoll: Arc<Epoll>,
    listener: TcpListener,
    /// Where peers on this host connect (with shared memory allowed).
    shm_listener: Option<UnixListener>,
    /// Where peers open UDP connections (the TCP listener's port), the
    /// timer of every UDP connection's retransmissions and keepalives,
    /// and the connections recently opened there (their first packets
    /// may come again).
    udp_listener: Option<UdpSocket>,
    udp_timer: Option<TimerFd>,
    /// When `udp_timer` is set to fire (None: not set).
    udp_armed: Option<std::time::Instant>,
    udp_opened: VecDeque<(SocketAddr, u64)>,
    peers: Peers,
    /// Peers with a connection.
    live: Vec<usize>,
    /// Peers without one that had frames queued (address not known yet):
    /// with `live`, every peer holding state, all a halt touches (at 1024
    /// ranks a halt over every peer was most of a recovery's CPU).
    queued_unconnected: Vec<usize>,
    handshakes: Vec<Option<Handshake>>,
    /// A handshake was closed to stay within the limit (said once).
    handshakes_dropped: bool,
}

/// The TCP listener, and with `udp` the UDP socket on the same port
/// (peers open UDP connections at the address they know). The kernel picks
/// the port (`bind` with port 0) free for TCP only: a UDP socket of
/// another process, such as an ephemeral one of a UDP connection, may hold
/// it. Then another port is tried.
fn bind_listeners(bind: SocketAddr, udp: bool) -> io::Result<(TcpListener, Option<UdpSocket>)> {
    const TRIES: usize = 32;
    for _ in 0..TRIES {
        let listener = TcpListener::bind(bind)?;
        if !udp {
            return Ok((listener, None));
        }
        match UdpSocket::bind(listener.local_addr()?) {
            Ok(u) => return Ok((listener, Some(u))),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse && bind.port() == 0 => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("no port free for both TCP and UDP in {TRIES} tries"),
    ))
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

impl Tcp {
    pub fn new(cfg: TcpConfig, epoll: Arc<Epoll>) -> io::Result<Tcp> {
        let (listener, udp_listener) = bind_listeners(cfg.bind, cfg.links.udp)?;
        listener.set_nonblocking(true)?;
        epoll.add(listener.as_raw_fd(), epoll::READABLE, TOKEN_LISTENER)?;
        // Its own address (see `shm`): a replaced process of this rank may
        // still hold its old one while the kernel tears it down.
        let port = listener.local_addr()?.port();
        let shm_listener = match cfg.links.shm {
            true => match shm::listen(&cfg.key, cfg.me, port) {
                Ok(l) => {
                    epoll.add(l.as_raw_fd(), epoll::READABLE, TOKEN_SHM_LISTENER)?;
                    Some(l)
                }
                Err(e) => {
                    log::debug!("mpistages: rank {}: no shared-memory listener: {e}", cfg.me);
                    None
                }
            },
            false => None,
        };
        let (udp_listener, udp_timer) = match udp_listener {
            Some(u) => {
                u.set_nonblocking(true)?;
                crate::sys::set_socket_buffers(u.as_raw_fd(), 4 << 20);
                epoll.add(u.as_raw_fd(), epoll::READABLE, TOKEN_UDP_LISTENER)?;
                let t = TimerFd::new()?;
                epoll.add(t.as_raw_fd(), epoll::READABLE, TOKEN_UDP_TIMER)?;
                (Some(u), Some(t))
            }
            None => (None, None),
        };
        let limits = Limits {
            max_payload: cfg.eager_limit.max(cfg.fragment_size).max(4096) as u32,
            ranks: cfg.ranks as u32,
        };
        let peers = Peers::new(cfg.ranks);
        Ok(Tcp {
            generation: cfg.generation,
            cfg,
            limits,
            epoll,
            listener,
            shm_listener,
            udp_listener,
            udp_timer,
            udp_armed: None,
            udp_opened: VecDeque::new(),
            peers,
            live: Vec::new(),
            queued_unconnected: Vec::new(),
            handshakes: Vec::new(),
            handshakes_dropped: false,
        })
    }

    /// The generation this process joins the job at (known after the
    /// bootstrap fence), announced in handshakes and frames.
    pub fn set_generation(&mut self, generation: u32) {
        self.cfg.generation = generation;
        self.generation = generation;
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Limits for a HELLO: any id a job may reach.
    fn hello_limits(&self) -> Limits {
        Limits {
            ranks: MAX_PROCESSES,
            ..self.limits
        }
    }
}

impl Transport for Tcp {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn eager_limit(&self) -> usize {
        self.cfg.eager_limit
    }

    fn fragment_size(&self) -> usize {
        self.cfg.fragment_size
    }

    fn send(
        &mut self,
        peer: usize,
        frame: OutFrame,
        class: Class,
        out: &mut Vec<Event>,
    ) -> Result<(), TransportError> {
        // A process that joined later (`MPI_Comm_spawn`) and has not
        // connected yet: its frames wait for it.
        if peer >= self.peers.len() && peer < MAX_PROCESSES as usize {
            self.grow_to(peer + 1);
        }
        let Some(p) = self.peers.get(peer) else {
            return Err(TransportError::PeerGone(peer));
        };
        if p.lost {
            return Err(TransportError::PeerGone(peer));
        }
        if p.stream.is_none() {
            if let Some(addr) = self.peers.known_mut(peer).and_then(|k| k.addr.take()) {
                if let Err(e) = self.connect(peer, addr) {
                    self.lose(peer, format!("connecting to it at {addr}: {e}"), out);
                    return Err(TransportError::PeerGone(peer));
                }
            }
        }
        let p = &mut self.peers[peer];
        if p.stream.is_none() && !self.queued_unconnected.contains(&peer) {
            self.queued_unconnected.push(peer);
        }
        let idle = p.stream.is_some() && !p.want_write && !p.backlog();
        match class {
            Class::Urgent if idle => self.write_now(peer, frame, out),
            Class::Urgent => p.urgent.push_back(frame),
            Class::Bulk => p.bulk.push_back(frame),
        }
        let p = &self.peers[peer];
        if p.stream.is_some() && !p.want_write && p.backlog() {
            self.flush(peer, out);
        }
        self.arm_udp_timer();
        Ok(())
    }

    fn send_now(&mut self, peer: usize, frame: OutFrame) -> Result<(), OutFrame> {
        self.write_whole(peer, frame)
    }

    fn connected(&self, peer: usize) -> bool {
        self.peers
            .get(peer)
            .is_some_and(|p| p.stream.is_some() && !p.lost)
    }

    fn expect_data(&mut self, peer: usize, rid: u64, target: RawBuf, total: u64) {
        // (Data comes only from a peer that sent a request: it is known.)
        let Some(p) = self.peers.get_mut(peer) else {
            return;
        };
        p.targets.insert(
            (rid, self.generation),
            Target {
                buf: target,
                total,
                got: 0,
                spoiled: false,
            },
        );
    }

    fn handle(&mut self, ev: epoll::Event, out: &mut Vec<Event>) {
        match ev.token {
            TOKEN_LISTENER => self.on_accept(out),
            TOKEN_SHM_LISTENER => self.on_accept_shm(out),
            TOKEN_UDP_LISTENER => self.on_accept_udp(out),
            TOKEN_UDP_TIMER => self.on_udp_timer(out),
            t if t >= TOKEN_HANDSHAKE => self.on_handshake((t - TOKEN_HANDSHAKE) as usize, out),
            t if (t as usize) < self.peers.len() => {
                let peer = t as usize;
                self.peers[peer].conns_mut().for_each(Conn::on_event);
                if ev.events & (epoll::READABLE | epoll::HANGUP) != 0 {
                    self.on_readable(peer, out);
                }
                // After the read: over shared memory room to write comes as
                // a doorbell, over UDP as acknowledgements, both read as
                // data (a flush before them found no room, and nothing
                // would have called again until the next keepalive).
                if ev.events & epoll::WRITABLE != 0 || self.peers[peer].want_write {
                    self.flush(peer, out);
                }
            }
            _ => {}
        }
        if ev.token != TOKEN_UDP_TIMER {
            self.arm_udp_timer();
        }
    }

    fn has_backlog(&self) -> bool {
        self.live.iter().any(|&p| self.peers[p].backlog())
    }

    fn poll_reads(&mut self, out: &mut Vec<Event>, place: &mut dyn Placement) -> bool {
        if self.has_backlog() {
            return false;
        }
        // Shared memory costs a few loads to look at: always. Sockets cost
        // a system call each: only a few (else epoll, every few rounds).
        self.poll_memory(out, place);
        let n_socks = self
            .live
            .iter()
            .filter(|&&p| through_socket(&self.peers[p]))
            .count();
        if n_socks > POLL_READS_MAX_PEERS {
            return false;
        }
        let mut socks = [0; POLL_READS_MAX_PEERS];
        let mut n = 0;
        for &p in &self.live {
            if through_socket(&self.peers[p]) {
                socks[n] = p;
                n += 1;
            }
        }
        for &peer in &socks[..n] {
            self.on_readable(peer, out);
        }
        // A UDP read moves retransmission and acknowledgement deadlines.
        if n > 0 {
            self.arm_udp_timer();
        }
        true
    }

    fn read_all(&mut self, out: &mut Vec<Event>, place: &mut dyn Placement) {
        self.poll_memory(out, place);
        let socks: Vec<usize> = self
            .live
            .iter()
            .copied()
            .filter(|&p| through_socket(&self.peers[p]))
            .collect();
        for &peer in &socks {
            // Reading one peer can lose only that one.
            if self.live.contains(&peer) {
                self.on_readable(peer, out);
            }
        }
        if !socks.is_empty() {
            self.arm_udp_timer();
        }
    }

    fn poll_memory(&mut self, out: &mut Vec<Event>, place: &mut dyn Placement) {
        let mut touched = false;
        let mut i = 0;
        while i < self.live.len() {
            let peer = self.live[i];
            let read = self.peers[peer].conns().any(Conn::polled);
            if read {
                touched = true;
                self.place_in_memory(peer, place, out);
                // What matching in place left (often nothing).
                if self.peers[peer].conns().any(Conn::polled) {
                    self.on_readable(peer, out);
                }
            }
            // Frames left by a spent write budget go on after the read,
            // which may have made room: no epoll event says a ring has
            // room, and over UDP room comes with the acknowledgements read.
            if self.live.get(i) == Some(&peer) {
                let p = &self.peers[peer];
                if p.backlog() && (read || p.conns().any(Conn::is_memory)) {
                    touched = true;
                    self.flush(peer, out);
                }
            }
            // Reading one peer can lose only that one (then it left `live`).
            if self.live.get(i) == Some(&peer) {
                i += 1;
            }
        }
        // What was just sent or read may move a retransmission timer.
        if touched {
            self.arm_udp_timer();
        }
    }

    fn prepare_sleep(&mut self) -> bool {
        let mut sleep = true;
        for &peer in &self.live {
            let p = &mut self.peers[peer];
            let backlog = p.backlog();
            if let Some(s) = p.stream.as_mut() {
                sleep &= s.may_sleep(backlog);
            }
            if let Some(s) = p.inbound.as_mut() {
                sleep &= s.may_sleep(false);
            }
        }
        sleep
    }

    fn halt(&mut self, generation: u32) {
        let mut holding = std::mem::take(&mut self.queued_unconnected);
        holding.extend_from_slice(&self.live);
        holding.sort_unstable();
        holding.dedup();
        for q in holding {
            let Some(p) = self.peers.get_mut(q) else {
                continue;
            };
            p.conns_mut().for_each(|s| s.set_halted(generation));
            p.urgent.clear();
            p.bulk.clear();
            // Frames on the wire list have their sequence numbers: those
            // dropped give theirs back, or the peer would see a gap.
            let kept = usize::from(p.woff > 0);
            p.sent_seq -= p.wire.len().saturating_sub(kept) as u64;
            if p.woff > 0 {
                let (mut f, class) = p
                    .wire
                    .pop_front()
                    .expect("woff > 0: a frame is on the wire");
                f.payload = Payload::Owned(f.payload.bytes().to_vec());
                f.token = None;
                p.wire.clear();
                p.wire.push_back((f, class));
            } else {
                p.wire.clear();
            }
            // Transfers under way are read to their end (the stream goes
            // on) but never reported done: their requests failed.
            for t in p.targets.values_mut() {
                t.buf = RawBuf::empty();
                t.spoiled = true;
            }
            p.refs.clear();
        }
    }

    fn learn_address(&mut self, peer: usize, born: u32, addr: std::net::SocketAddr) {
        self.set_born(peer, born);
        if !self.connected(peer) {
            self.set_address(peer, addr);
        }
    }

    fn forget_peers(&mut self, failed: &[usize], generation: u32) {
        for &r in failed {
            let Some(k) = self.peers.known_mut(r) else {
                continue;
            };
            k.min_generation = k.min_generation.max(generation);
            let p = &self.peers[r];
            if p.stream.is_some() && p.conn_generation >= generation {
                continue;
            }
            // Its address was the dead process's: the replacement connects.
            self.peers.known_mut(r).expect("a rank").addr = None;
            self.disconnect(r);
            self.peers[r].lost = false;
        }
    }

    fn cleanup(&mut self, generation: u32) {
        self.generation = generation;
        // Only a connected peer has transfers (its end clears them).
        for &q in &self.live {
            // Transfers of other generations are gone; the rest of a frame
            // of theirs being read is dropped (no target has its key).
            self.peers[q].targets.retain(|&(_, g), _| g == generation);
        }
    }

    fn close_all(&mut self) {
        for (_, p) in self.peers.iter_mut() {
            for mut s in [p.stream.take(), p.inbound.take()].into_iter().flatten() {
                let _ = self.epoll.delete(s.fd());
                s.shutdown_write();
            }
        }
        self.live.clear();
        let _ = self.epoll.delete(self.listener.as_raw_fd());
        if let Some(l) = self.shm_listener.take() {
            let _ = self.epoll.delete(l.as_raw_fd());
        }
    }
}

mod conn;
mod connect;
mod handshake;
#[cfg(test)]
mod pair_tests;
mod peers;
mod read;
#[cfg(test)]
mod tests;
mod udp;
mod write;
