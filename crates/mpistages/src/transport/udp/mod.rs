//! A connection over UDP: the reliable byte stream of `reliable.rs` moved
//! by one UDP socket per pair of processes, with a seeded fault injector
//! (`MPISTAGES_UDP_FAULTS=loss=0.05,dup=0.01,reorder=0.02,seed=7`: the
//! kernel here has no `netem`) applied to what this side sends.
//!
//! Opening: the connecting side sends its first packets (carrying the
//! transport's hello as the stream's first bytes) from a fresh socket to
//! the peer's listening port (the port number of its TCP listener); the
//! listener makes a socket of its own for the connection, connected to
//! the sender, and answers from it; the connecting side then connects its
//! socket to that address. From there on each side reads only its peer.

mod inbox;
mod outbox;
pub mod reliable;

use crate::sys::socket::NoSignal;
use reliable::{Config, Reliable, StreamError, HEADER};
use std::io::{self, IoSlice, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

/// Packets larger than any frame slice we send, for receiving.
const MAX_PACKET: usize = 65_536;
/// A read for at least this many bytes receives packets straight into the
/// reader's buffer (`UdpConn::receive_direct`).
const DIRECT_MIN: usize = 4 << 10;
/// Data bytes per packet: large on loopback (fewer system calls), within
/// an Ethernet MTU elsewhere (1500 bytes, less the IPv4 and UDP headers
/// and ours).
fn mss_for(peer: &SocketAddr) -> usize {
    if peer.ip().is_loopback() {
        60_000
    } else {
        1500 - 28 - HEADER
    }
}

/// The fault injector's settings (`MPISTAGES_UDP_FAULTS`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Faults {
    pub loss: f64,
    pub dup: f64,
    pub reorder: f64,
    pub seed: u64,
}

impl Faults {
    pub fn parse(s: &str) -> Result<Faults, String> {
        let mut f = Faults {
            seed: 1,
            ..Faults::default()
        };
        for item in s.split(',').filter(|x| !x.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("'{item}' is not NAME=VALUE"))?;
            let p = || -> Result<f64, String> {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| (0.0..=1.0).contains(x))
                    .ok_or_else(|| format!("{k}={v}: a probability from 0 to 1"))
            };
            match k {
                "loss" => f.loss = p()?,
                "dup" => f.dup = p()?,
                "reorder" => f.reorder = p()?,
                "seed" => f.seed = v.parse().map_err(|_| format!("seed={v}: a number"))?,
                _ => return Err(format!("unknown fault '{k}' (loss, dup, reorder, seed)")),
            }
        }
        Ok(f)
    }

    /// From the environment, once per process.
    pub fn from_env() -> Faults {
        static F: std::sync::OnceLock<Faults> = std::sync::OnceLock::new();
        *F.get_or_init(|| {
            let v = std::env::var("MPISTAGES_UDP_FAULTS").unwrap_or_default();
            Faults::parse(&v).unwrap_or_else(|e| {
                log::warn!("mpistages: MPISTAGES_UDP_FAULTS ignored: {e}");
                Faults::default()
            })
        })
    }

    pub fn any(&self) -> bool {
        self.loss > 0.0 || self.dup > 0.0 || self.reorder > 0.0
    }
}

/// xorshift64*: the injector's reproducible choices.
struct Rng(u64);

impl Rng {
    fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545F4914F6CDD1D);
        (x >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

pub struct UdpConn {
    sock: UdpSocket,
    /// Where packets go: the peer's listener until it answers, then the
    /// peer's own socket (connected).
    to: SocketAddr,
    connected: bool,
    stream: Reliable,
    faults: Faults,
    rng: Rng,
    /// A packet held back to be sent after the next one (reordering).
    held: Option<Vec<u8>>,
    failed: Option<String>,
}

/// How long a peer may stay silent (no packet, not even a keepalive)
/// before it is reported to mpiexec as failed: `MPISTAGES_UDP_SILENCE`
/// seconds, 10 by default. A process stopped that long (SIGSTOP, a
/// debugger) is ended for good by mpiexec; a shorter pause is survived
/// (the connection sends again what was lost meanwhile).
pub fn silence_limit() -> std::time::Duration {
    std::env::var("MPISTAGES_UDP_SILENCE")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| (0.5..=1e9).contains(s))
        .map_or(
            std::time::Duration::from_secs(10),
            std::time::Duration::from_secs_f64,
        )
}

impl UdpConn {
    fn new(sock: UdpSocket, to: SocketAddr, conn: u64, connected: bool) -> io::Result<UdpConn> {
        sock.set_nonblocking(true)?;
        crate::sys::set_socket_buffers(sock.as_raw_fd(), 8 << 20);
        let faults = Faults::from_env();
        let cfg = Config {
            mss: mss_for(&to),
            dead_after: silence_limit(),
            ..Config::default()
        };
        Ok(UdpConn {
            sock,
            to,
            connected,
            stream: Reliable::new(cfg, conn, Instant::now()),
            rng: Rng(faults.seed.wrapping_mul(0x9E3779B97F4A7C15) ^ conn | 1),
            faults,
            held: None,
            failed: None,
        })
    }

    /// Opens a connection to the listener at `to` from address `ip`; the
    /// stream starts with `hello`.
    pub fn connect(ip: std::net::IpAddr, to: SocketAddr, hello: &[u8]) -> io::Result<UdpConn> {
        let sock = UdpSocket::bind((ip, 0))?;
        let mut id = [0u8; 8];
        crate::sys::process::random_bytes(&mut id)?;
        let mut c = UdpConn::new(sock, to, u64::from_le_bytes(id), false)?;
        c.stream.write(&[IoSlice::new(hello)]);
        c.transmit();
        Ok(c)
    }

    /// A connection whose first packet `first` came from `from` to our
    /// listener on address `ip`.
    pub fn accepted(ip: std::net::IpAddr, from: SocketAddr, first: &[u8]) -> io::Result<UdpConn> {
        let conn = Reliable::conn_of(first)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not one of our packets"))?;
        let sock = UdpSocket::bind((ip, 0))?;
        sock.connect(from)?;
        let mut c = UdpConn::new(sock, from, conn, true)?;
        c.stream
            .on_packet(first, Instant::now())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e:?}")))?;
        c.transmit();
        Ok(c)
    }

    /// Received bytes wait in the stream (epoll will not say so), or an
    /// acknowledgement waits for data to carry it.
    pub fn buffered(&self) -> bool {
        self.stream.readable() || self.failed.is_some() || self.stream.ack_owed()
    }

    /// About to sleep: what waited to ride on data goes now. True if
    /// nothing is left that epoll would not report.
    pub fn before_sleep(&mut self) -> bool {
        self.stream.flush_ack();
        self.transmit();
        !self.buffered()
    }

    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    fn send_raw(&self, p: &[u8]) {
        // A full socket buffer loses the packet, as the network may: the
        // stream sends it again.
        let _ = if self.connected {
            self.sock.send(p)
        } else {
            self.sock.send_to(p, self.to)
        };
    }

    /// One packet through the fault injector.
    fn send_packet(&mut self, p: Vec<u8>) {
        if !self.faults.any() {
            return self.send_raw(&p);
        }
        if self.rng.chance(self.faults.loss) {
            return;
        }
        if self.rng.chance(self.faults.dup) {
            self.send_raw(&p);
        }
        if self.held.is_none() && self.rng.chance(self.faults.reorder) {
            self.held = Some(p);
            return;
        }
        self.send_raw(&p);
        if let Some(h) = self.held.take() {
            self.send_raw(&h);
        }
    }

    /// Sends what the stream has to send now. A packet held back for
    /// reordering goes out at the end of the burst at the latest: packets
    /// overtake each other in flight, they do not wait for more traffic.
    fn transmit(&mut self) {
        let now = Instant::now();
        while let Some(p) = self.stream.next_packet(now) {
            if self.connected && !self.faults.any() {
                // Header and data go as they lie: no packet is assembled.
                // A full socket buffer loses the packet, as the network
                // may: the stream sends it again.
                let _ = NoSignal::new(&self.sock).write_vectored(&self.stream.slices(&p));
            } else {
                let bytes = self.stream.bytes(&p);
                self.send_packet(bytes);
            }
        }
        if let Some(h) = self.held.take() {
            self.send_raw(&h);
        }
    }

    /// Reads waiting packets into the stream: all of them, or (`enough`)
    /// until the reader has bytes — a reader that comes back while bytes
    /// wait makes no system call, and one that finds none makes the one
    /// that says so.
    fn receive(&mut self, enough: bool) {
        while self.failed.is_none() && !(enough && self.stream.readable()) {
            let got = if self.connected {
                self.receive_in_place()
            } else {
                self.receive_from_anyone()
            };
            match got {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // WouldBlock; or ECONNREFUSED: the peer's socket is gone,
                // which its silence will confirm.
                Err(_) => return,
            }
        }
    }

    /// One packet from the peer: its header apart, its data straight into
    /// the stream's receiving buffer.
    fn receive_in_place(&mut self) -> io::Result<()> {
        let mut head = [0u8; HEADER];
        let (n, truncated) = crate::sys::socket::recv_parts(
            self.sock.as_raw_fd(),
            &mut [&mut head, self.stream.rx_space()],
        )?;
        if n < HEADER || truncated || Reliable::conn_of(&head) != Some(self.stream.conn()) {
            return Ok(()); // a stranger's, or an earlier process's
        }
        if let Err(e) = self
            .stream
            .on_received(&head, n - HEADER, 0, Instant::now())
        {
            self.failed = Some(format!("{e:?}"));
        }
        Ok(())
    }

    /// One packet before the peer's address is known (the opening).
    fn receive_from_anyone(&mut self) -> io::Result<()> {
        let mut buf = vec![0u8; MAX_PACKET];
        let (n, from) = self.sock.recv_from(&mut buf)?;
        if Reliable::conn_of(&buf[..n]) != Some(self.stream.conn()) {
            return Ok(()); // a stranger's, or an earlier process's
        }
        if self.sock.connect(from).is_ok() {
            self.to = from;
            self.connected = true;
        }
        if let Err(e) = self.stream.on_packet(&buf[..n], Instant::now()) {
            self.failed = Some(format!("{e:?}"));
        }
        Ok(())
    }

    /// Packets that continue the stream, received with their data straight
    /// into `out` (the reader's buffer: a copy less), until `out` is full,
    /// none waits, or one arrives out of order (its data then goes where
    /// `receive_in_place` would have put it). How many bytes `out` got.
    fn receive_direct(&mut self, out: &mut [u8]) -> usize {
        let mut filled = 0;
        while filled < out.len() && self.failed.is_none() && !self.stream.readable() {
            let mut head = [0u8; HEADER];
            let dst = &mut out[filled..];
            let got = crate::sys::socket::recv_parts(
                self.sock.as_raw_fd(),
                &mut [&mut head, dst, self.stream.rx_space()],
            );
            let (n, truncated) = match got {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break, // as in `receive`
            };
            if n < HEADER || truncated || Reliable::conn_of(&head) != Some(self.stream.conn()) {
                continue; // a stranger's, or an earlier process's
            }
            let data = n - HEADER;
            let k = data.min(dst.len());
            let direct = if self.stream.continues_at_reader(&head) {
                k
            } else {
                // Early, late or not data: its bytes join those in
                // `rx_space`, where every other packet's are.
                let space = self.stream.rx_space();
                space.copy_within(..data - k, k);
                space[..k].copy_from_slice(&dst[..k]);
                0
            };
            match self.stream.on_received(&head, data, direct, Instant::now()) {
                Ok(()) => filled += direct,
                Err(e) => self.failed = Some(format!("{e:?}")),
            }
            // Acknowledgements owed go now, not after the whole buffer.
            self.transmit();
            // A short packet ends a burst: asking for another would most
            // likely cost a system call that finds none.
            if data < DIRECT_MIN {
                break;
            }
        }
        filled
    }

    pub fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.len() >= DIRECT_MIN && self.connected && !self.stream.readable() {
            let n = self.receive_direct(out);
            if n > 0 {
                return Ok(n);
            }
        }
        self.receive(true);
        self.transmit();
        if let Some(why) = &self.failed {
            return Err(io::Error::new(io::ErrorKind::InvalidData, why.clone()));
        }
        match self.stream.read(out) {
            None => Ok(0),
            Some(0) => Err(io::ErrorKind::WouldBlock.into()),
            Some(n) => Ok(n),
        }
    }

    pub fn write_vectored(&mut self, bufs: &[IoSlice]) -> io::Result<usize> {
        let n = self.stream.write(bufs);
        self.transmit();
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    /// `write_vectored`, but the pieces whose `lend` is `Some` are taken by
    /// reference to that memory (`Reliable::lend`), which must then stay
    /// untouched until a later `mark` comes back from `take_completed`.
    /// Nothing is sent before `send_written`, so that marks placed after
    /// the call flag the packets they end in.
    pub fn write_lending(
        &mut self,
        bufs: &[IoSlice],
        lend: &[Option<crate::transport::RawBuf>],
    ) -> io::Result<usize> {
        let mut n = 0;
        for (b, l) in bufs.iter().zip(lend) {
            let took = match l {
                Some(buf) => self.stream.lend(*buf),
                None => self.stream.write(std::slice::from_ref(b)),
            };
            n += took;
            if took < b.len() {
                break;
            }
        }
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    /// Sends what `write_lending` took.
    pub fn send_written(&mut self) {
        self.transmit();
    }

    /// Bytes lent to the stream and not yet acknowledged.
    pub fn lent(&self) -> usize {
        self.stream.lent()
    }

    /// `token` comes back from `take_completed` once the peer has every
    /// byte written so far but the last `after`.
    pub fn mark(&mut self, token: u64, after: usize) {
        self.stream.mark(token, after);
    }

    pub fn take_completed(&mut self) -> Vec<u64> {
        self.stream.take_completed()
    }

    /// The sends under way failed: nothing lent is read any more (the
    /// bytes are copied) and no mark comes back.
    pub fn own_lent(&mut self) {
        self.stream.own_lent();
    }

    /// When `on_timer` must run next.
    pub fn next_timeout(&self) -> Instant {
        self.stream.next_timeout()
    }

    /// Retransmissions and keepalives; an error once the peer is silent
    /// past the limit (dead, or its link cut).
    pub fn on_timer(&mut self) -> io::Result<()> {
        match self.stream.on_timeout(Instant::now()) {
            Ok(()) => {
                self.transmit();
                Ok(())
            }
            Err(StreamError::Dead) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "nothing heard from it over UDP for {} s",
                    silence_limit().as_secs_f64()
                ),
            )),
            Err(e) => Err(io::Error::new(io::ErrorKind::InvalidData, format!("{e:?}"))),
        }
    }

    /// The end of this side: waits (at most `limit`) until the peer has
    /// acknowledged everything written — nothing else would send it again
    /// once this process is gone, unlike TCP's kernel — then says so.
    pub fn shutdown_write(&mut self) {
        let limit = Instant::now() + std::time::Duration::from_secs(2);
        // Whatever is still lent belongs to sends that will not complete.
        self.stream.own_lent();
        self.stream.close();
        while !self.stream.all_acked() && Instant::now() < limit && self.failed.is_none() {
            self.receive(false);
            if self.stream.on_timeout(Instant::now()).is_err() {
                break;
            }
            self.transmit();
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        self.transmit();
        let st = self.stream.stats();
        log::debug!(
            "mpistages: UDP connection to {} ends: {} segments sent again ({} losses found by later deliveries, {} tail probes, {} timeouts)",
            self.to,
            st.resent,
            st.detected,
            st.probes,
            st.timeouts
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_settings_parse_and_bad_ones_say_why() {
        let f = Faults::parse("loss=0.05,dup=0.01,reorder=0.02,seed=7").unwrap();
        assert_eq!((f.loss, f.dup, f.reorder, f.seed), (0.05, 0.01, 0.02, 7));
        assert!(!Faults::parse("").unwrap().any());
        for bad in ["loss=2", "loss", "drop=0.1", "seed=x"] {
            assert!(Faults::parse(bad).is_err(), "{bad}");
        }
    }
}
