//! Shared memory between two ranks of one host: a connection made of two
//! byte rings (`ring.rs`), one per direction, in anonymous memory (memfd)
//! that each side creates for what it sends and passes to the other over
//! a Unix socket. The socket stays as the pair's doorbell (a byte wakes a
//! sleeping side) and as its liveness: when a process ends, however it
//! ends, its end of the socket closes, and the memory goes with the last
//! process that maps it. Nothing has a name in a file system, so nothing
//! is left behind.
//!
//! A rank listens on an abstract Unix address derived from the job key's
//! hash, its rank and its TCP port (`address`); only processes in the same
//! network namespace can reach it, which is what "the same host" means
//! here. The port makes the address the process's own, not the rank's: a
//! replacement starts while its dead predecessor may still hold its
//! sockets (a death is seen before the kernel's teardown), and a peer
//! that reached the old address then would wait on a process that never
//! answers. The
//! hello that follows is the TCP transport's (job key, rank, generation),
//! so a stranger who connects is refused as over TCP.

pub mod ring;

use crate::sys::fdpass;
use ring::Ring;
use std::io::{self, IoSlice, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};

/// Data bytes of each ring (per direction, per pair of ranks on a host)
/// when a few ranks share the host.
pub const DEFAULT_RING: usize = 256 << 10;
/// The least a default ring shrinks to on a crowded host.
const SMALL_RING: usize = 64 << 10;
/// Ring memory one rank keeps, at most, by default: its rings to every
/// other rank of the host, both directions.
const RING_BUDGET: usize = 8 << 20;

/// The default ring for `local` ranks on a host: 256 KiB while each rank's
/// rings stay within 8 MiB, then smaller, down to 64 KiB (the smaller ones'
/// pages come in as bytes pass them, `Mapped::map`); large messages go by
/// single copy and need no large ring.
pub fn default_ring(local: usize) -> usize {
    let per_ring = RING_BUDGET / (2 * local.saturating_sub(1).max(1));
    // The largest power of two within it.
    let pow2 = per_ring.checked_ilog2().map_or(0, |b| 1 << b);
    pow2.clamp(SMALL_RING, DEFAULT_RING)
}
const MIN_RING: usize = 4 << 10;
const MAX_RING: usize = 64 << 20;

/// The abstract Unix address of the process of rank `rank` of the job
/// with key `key` that listens on TCP port `port` of this host.
pub fn address(key: &[u8], rank: usize, port: u16) -> io::Result<SocketAddr> {
    // FNV-1a of the key: the name must not reveal the key itself.
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in key {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    SocketAddr::from_abstract_name(format!("mpistages-{h:016x}-{rank}-{port}").as_bytes())
}

/// Listens at this rank's address (non-blocking).
pub fn listen(key: &[u8], rank: usize, port: u16) -> io::Result<UnixListener> {
    let l = UnixListener::bind_addr(&address(key, rank, port)?)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// A value at a fixed address of this process, for peers to check that
/// they can read its memory (`ring::Ring::set_probe`).
static PROBE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn probe() -> (u64, u64) {
    use std::sync::atomic::Ordering;
    if PROBE.load(Ordering::Relaxed) == 0 {
        let mut v = [0u8; 8];
        let _ = crate::sys::process::random_bytes(&mut v);
        let _ = PROBE.compare_exchange(
            0,
            u64::from_le_bytes(v) | 1,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
    (&PROBE as *const _ as u64, PROBE.load(Ordering::Acquire))
}

/// Whether large messages may be copied straight from the sender's memory
/// (`MPISTAGES_SHM_CMA=0` turns it off).
fn cma_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var("MPISTAGES_SHM_CMA").map_or(true, |v| v != "0"))
}

/// A ring in its own mapping (kept alive with it).
struct Mapped {
    _map: memmap2::MmapMut,
    ring: Ring,
}

impl Mapped {
    /// A new ring of `cap` bytes, and the descriptor to give the peer.
    fn create(cap: usize) -> io::Result<(Mapped, std::fs::File)> {
        let file = fdpass::memfd("mpistages-ring", ring::region_len(cap) as u64)?;
        let m = Mapped::map(&file, cap)?;
        let (addr, value) = probe();
        m.ring.set_probe(addr, value);
        Ok((m, file))
    }

    /// Maps the peer's ring; its size must be one a ring can have.
    fn open(fd: OwnedFd) -> io::Result<Mapped> {
        let file = std::fs::File::from(fd);
        let len = file.metadata()?.len() as usize;
        let cap = len.saturating_sub(ring::region_len(0));
        if !(MIN_RING..=MAX_RING).contains(&cap) || !cap.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("peer's ring has {len} bytes"),
            ));
        }
        Mapped::map(&file, cap)
    }

    fn map(file: &std::fs::File, cap: usize) -> io::Result<Mapped> {
        // Full-size rings (few ranks on the host, each ring carrying much)
        // are populated at once: their memory is in use from the start,
        // not growing as the cursor first passes each page, which a long
        // job sees as a leak (the soak test did). Smaller ones, on crowded
        // hosts, fill as bytes pass: a pair that exchanges a few small
        // messages touches one page, and populating both ends of every
        // ring was a tenth of a 1024-rank job's start (perf, this machine).
        let mut options = memmap2::MmapOptions::new();
        options.len(ring::region_len(cap));
        if cap >= DEFAULT_RING {
            options.populate();
        }
        // SAFETY: a memfd is shared only with the one peer, which follows
        // the ring protocol (atomics for the counters, each data byte owned
        // by one side at a time); a broken peer yields wrong bytes that the
        // frame layer rejects, and the mapping's size never changes (the
        // file's length was set before it was shared).
        let mut map = unsafe { options.map_mut(file)? };
        // SAFETY: the mapping is page aligned, region_len(cap) long, and
        // lives in `Mapped` as long as the Ring.
        let ring = unsafe { Ring::new(map.as_mut_ptr(), cap) };
        Ok(Mapped { _map: map, ring })
    }
}

fn broken(e: ring::Broken) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.0)
}

/// One side of a shared-memory connection.
pub struct ShmConn {
    sock: UnixStream,
    /// The ring this side writes (created here).
    tx: Option<Mapped>,
    /// The ring this side reads (the peer's, received over the socket).
    rx: Option<Mapped>,
    /// A descriptor that came with the hello, before the ring is set up.
    received: Option<OwnedFd>,
    /// Reads come from the socket itself (the hello) until `established`.
    handshaking: bool,
    /// The socket reported something (a doorbell, the peer's ring, or its
    /// end): look at it the next time the ring is empty.
    check_socket: bool,
    peer_closed: bool,
    /// The peer's process, as this PID namespace names it (0: not here).
    peer_pid: i32,
    /// This side can read the peer's memory (cross-memory attach).
    reads_peer: bool,
}

impl ShmConn {
    /// Connects to rank `rank`'s address and sends `hello` with this
    /// side's ring. The peer's ring comes back later (`read` takes it).
    pub fn connect(
        key: &[u8],
        rank: usize,
        port: u16,
        hello: &[u8],
        cap: usize,
    ) -> io::Result<ShmConn> {
        let sock = UnixStream::connect_addr(&address(key, rank, port)?)?;
        let (tx, file) = Mapped::create(cap)?;
        let sent = fdpass::send_with_fd(sock.as_raw_fd(), hello, file.as_raw_fd())?;
        // The socket is blocking here: the rest of a long hello follows.
        std::io::Write::write_all(
            &mut crate::sys::socket::NoSignal::new(&sock),
            &hello[sent..],
        )?;
        sock.set_nonblocking(true)?;
        Ok(ShmConn {
            peer_pid: fdpass::peer_pid(&sock).unwrap_or(0),
            sock,
            tx: Some(tx),
            rx: None,
            received: None,
            handshaking: false,
            check_socket: true,
            peer_closed: false,
            reads_peer: false,
        })
    }

    /// A connection just accepted: its hello is read from the socket.
    pub fn accepted(sock: UnixStream) -> io::Result<ShmConn> {
        sock.set_nonblocking(true)?;
        Ok(ShmConn {
            peer_pid: fdpass::peer_pid(&sock).unwrap_or(0),
            sock,
            tx: None,
            rx: None,
            received: None,
            handshaking: true,
            check_socket: true,
            peer_closed: false,
            reads_peer: false,
        })
    }

    /// The hello was accepted: map the peer's ring, and send ours.
    pub fn established(&mut self, cap: usize) -> io::Result<()> {
        let fd = self.received.take().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "no ring came with the hello")
        })?;
        self.adopt_rx(Mapped::open(fd)?);
        let (tx, file) = Mapped::create(cap)?;
        self.sock.set_nonblocking(false)?;
        let sent = fdpass::send_with_fd(self.sock.as_raw_fd(), b"R", file.as_raw_fd());
        self.sock.set_nonblocking(true)?;
        match sent {
            // The peer has closed its end already: it connected at its
            // first message, sent what it had and finished (or died)
            // before this side came to its hello. What it wrote is read
            // all the same, then its end.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ) => {}
            r => {
                r?;
            }
        }
        self.tx = Some(tx);
        self.handshaking = false;
        Ok(())
    }

    /// Takes the peer's ring, and finds out whether this side can read
    /// the peer's memory (then it says so in the ring).
    fn adopt_rx(&mut self, rx: Mapped) {
        if cma_allowed() && self.peer_pid > 0 {
            let (addr, value) = rx.ring.probe();
            let mut got = [0u8; 8];
            if crate::sys::cma::read_from(self.peer_pid, addr, &mut got).ok() == Some(8)
                && u64::from_le_bytes(got) == value
            {
                self.reads_peer = true;
                rx.ring.set_reader_cma();
                log::debug!(
                    "mpistages: shared memory: single-copy reads from process {}",
                    self.peer_pid
                );
            }
        }
        self.rx = Some(rx);
    }

    /// The peer can copy straight from this process's memory.
    pub fn peer_reads_me(&self) -> bool {
        self.tx.as_ref().is_some_and(|t| t.ring.reader_cma())
    }

    /// This side halted for the failure announced at `generation`: the
    /// peer must not trust what it copies from memory that frames of older
    /// generations referred to (the program may have freed it).
    pub fn set_halted(&self, generation: u32) {
        if let Some(tx) = &self.tx {
            tx.ring.set_halted(generation);
        }
    }

    /// Copies `out.len()` bytes from address `addr` of the peer, referred
    /// to by a frame of `generation`. An error when the copy fails, or when
    /// the peer halted for a newer failure (what was copied may be memory
    /// its program freed and reused since).
    pub fn read_peer_memory(&self, addr: u64, out: &mut [u8], generation: u32) -> io::Result<()> {
        if !self.reads_peer {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "no cross-memory attach",
            ));
        }
        let n = crate::sys::cma::read_from(self.peer_pid, addr, out)?;
        if n != out.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "short cross-memory read",
            ));
        }
        let halted = self.rx.as_ref().map_or(0, |rx| rx.ring.halted());
        if halted > generation {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                format!("the peer halted for the failure of generation {halted}"),
            ));
        }
        Ok(())
    }

    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// The socket is readable (epoll said so).
    pub fn on_event(&mut self) {
        self.check_socket = true;
    }

    /// A byte on the socket wakes the peer (one already waiting there
    /// does as well, so a full socket buffer is fine).
    fn ring_bell(&self) {
        let _ = crate::sys::socket::NoSignal::new(&self.sock).send_dontwait(&[0]);
    }

    /// Reads what the socket holds: doorbells, the peer's ring, its end.
    fn drain_socket(&mut self) -> io::Result<()> {
        let mut buf = [0u8; 64];
        loop {
            match fdpass::recv_with_fd(self.sock.as_raw_fd(), &mut buf) {
                Ok((0, _)) => {
                    self.peer_closed = true;
                    return Ok(());
                }
                Ok((_, fd)) => {
                    if let Some(fd) = fd {
                        if self.rx.is_some() {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                "a second ring from the peer",
                            ));
                        }
                        self.adopt_rx(Mapped::open(fd)?);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // A peer that ends with doorbells unread resets the socket:
                // an end like any other. Its last bytes may have reached
                // the ring after the caller looked at it: it looks again.
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    self.peer_closed = true;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether `read` may find something: bytes in the peer's ring, a
    /// doorbell or the end on the socket, or the handshake under way. A
    /// spinning waiter looks here first: two loads, not a read.
    pub fn readable(&self) -> bool {
        if self.handshaking || self.check_socket || self.peer_closed {
            return true;
        }
        // A broken ring is readable: `read` reports it.
        self.rx
            .as_ref()
            .is_some_and(|rx| rx.ring.has_bytes().unwrap_or(true))
    }

    /// Bytes from the peer: its ring's, or during the handshake the
    /// socket's. `WouldBlock` when there are none yet; `Ok(0)` once the
    /// peer is gone and everything it wrote was read.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.handshaking {
            let (n, fd) = fdpass::recv_with_fd(self.sock.as_raw_fd(), buf)?;
            if fd.is_some() {
                self.received = fd;
            }
            return Ok(n);
        }
        loop {
            if let Some(rx) = &self.rx {
                let (n, bell) = rx.ring.read(buf).map_err(broken)?;
                if bell {
                    self.ring_bell();
                }
                if n > 0 {
                    return Ok(n);
                }
            }
            if self.peer_closed {
                return Ok(0);
            }
            if !self.check_socket {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.check_socket = false;
            self.drain_socket()?;
            // Look at the ring once more: the doorbell came for its bytes.
        }
    }

    /// Copies the `out.len()` bytes `at` bytes ahead in the peer's ring
    /// without taking them (false: not all there yet, or no ring). With
    /// `skip`, a frame is taken straight from the ring into where it
    /// belongs (matching in place).
    pub fn peek(&self, at: usize, out: &mut [u8]) -> io::Result<bool> {
        match &self.rx {
            Some(rx) if !self.handshaking => rx.ring.peek(at, out).map_err(broken),
            _ => Ok(false),
        }
    }

    /// Takes `n` bytes looked at with `peek`.
    pub fn skip(&mut self, n: usize) -> io::Result<()> {
        let Some(rx) = &self.rx else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no ring to skip in",
            ));
        };
        if rx.ring.skip(n).map_err(broken)? {
            self.ring_bell();
        }
        Ok(())
    }

    /// Copies as much of `bufs` into the ring as fits; `WouldBlock` when
    /// none does (the peer rings the doorbell once it makes room).
    pub fn write_vectored(&mut self, bufs: &[IoSlice]) -> io::Result<usize> {
        let Some(tx) = &self.tx else {
            return Err(io::ErrorKind::WouldBlock.into());
        };
        for _ in 0..2 {
            let (n, bell) = tx.ring.write(bufs).map_err(broken)?;
            if bell {
                self.ring_bell();
            }
            if n > 0 {
                return Ok(n);
            }
            if tx.ring.want_room().map_err(broken)? {
                break;
            }
        }
        Err(io::ErrorKind::WouldBlock.into())
    }

    /// Copies all of `bufs` into the ring if it has room for them now;
    /// false (nothing written) otherwise.
    pub fn write_whole(&mut self, bufs: &[IoSlice]) -> io::Result<bool> {
        let Some(tx) = &self.tx else {
            return Ok(false);
        };
        match tx.ring.write_whole(bufs).map_err(broken)? {
            Some(bell) => {
                if bell {
                    self.ring_bell();
                }
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// About to sleep: asks the peer for a doorbell when bytes come.
    /// False when bytes are there already.
    pub fn want_data(&mut self) -> bool {
        match &self.rx {
            Some(rx) => rx.ring.want_data().unwrap_or(false),
            None => true,
        }
    }

    /// About to sleep with bytes still to send: asks the peer for a
    /// doorbell when it makes room. False when there is room now (then
    /// writing, not sleeping, is what to do).
    pub fn want_room(&mut self) -> bool {
        match &self.tx {
            Some(tx) => tx.ring.want_room().unwrap_or(false),
            None => true,
        }
    }

    pub fn shutdown_write(&self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Write);
    }
}

impl Read for ShmConn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        ShmConn::read(self, buf)
    }
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
