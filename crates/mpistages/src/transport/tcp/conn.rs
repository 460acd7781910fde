//! A connection to one peer, as the framing above it sees it: a byte
//! stream that reads and writes without blocking. Over TCP it is the
//! socket; with a peer on this host it is shared memory (`shm::ShmConn`:
//! two rings, and a Unix socket for doorbells and liveness).

use crate::sys::epoll;
use crate::sys::socket::NoSignal;
use crate::transport::shm::ShmConn;
use crate::transport::udp::UdpConn;
use std::io::{self, IoSlice, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};

pub enum Conn {
    Tcp(TcpStream),
    Shm(Box<ShmConn>),
    Udp(Box<UdpConn>),
}

impl Conn {
    pub fn fd(&self) -> RawFd {
        match self {
            Conn::Tcp(s) => s.as_raw_fd(),
            Conn::Shm(c) => c.fd(),
            Conn::Udp(c) => c.fd(),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Conn::Tcp(_) => "tcp",
            Conn::Shm(_) => "shm",
            Conn::Udp(_) => "udp",
        }
    }

    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Shm(c) => c.read(buf),
            Conn::Udp(c) => c.read(buf),
        }
    }

    pub fn write_vectored(&mut self, bufs: &[IoSlice]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => NoSignal::new(s).write_vectored(bufs),
            Conn::Shm(c) => c.write_vectored(bufs),
            Conn::Udp(c) => c.write_vectored(bufs),
        }
    }

    /// `write_vectored`; over UDP the pieces with a `lend` are taken by
    /// reference (`UdpConn::write_lending`), elsewhere copied as the rest.
    pub fn write_lending(
        &mut self,
        bufs: &[IoSlice],
        lend: &[Option<crate::transport::RawBuf>],
    ) -> io::Result<usize> {
        match self {
            Conn::Udp(c) => c.write_lending(bufs, lend),
            _ => self.write_vectored(bufs),
        }
    }

    /// Sends what `write_lending` took (UDP; the others sent it then).
    pub fn send_written(&mut self) {
        if let Conn::Udp(c) = self {
            c.send_written();
        }
    }

    /// `token` is reported once the peer acknowledged every byte written
    /// but the last `after` (UDP with lent bytes; see `write_lending`).
    pub fn mark(&mut self, token: u64, after: usize) {
        if let Conn::Udp(c) = self {
            c.mark(token, after);
        }
    }

    /// Bytes lent and not yet acknowledged: a send whose data went by
    /// reference completes only once the peer has it (`mark`).
    pub fn lent(&self) -> usize {
        match self {
            Conn::Udp(c) => c.lent(),
            _ => 0,
        }
    }

    /// Tokens of marks now acknowledged.
    pub fn take_completed(&mut self) -> Vec<u64> {
        match self {
            Conn::Udp(c) => c.take_completed(),
            _ => Vec::new(),
        }
    }

    /// A large message's data may be lent to the connection rather than
    /// copied (UDP: its stream keeps what it may send again).
    pub fn lends(&self) -> bool {
        matches!(self, Conn::Udp(_))
    }

    /// Writes all of `bufs` at once or nothing (false): only shared memory
    /// can promise that without writing (its room is known); a socket
    /// says false.
    pub fn write_whole(&mut self, bufs: &[IoSlice]) -> io::Result<bool> {
        match self {
            Conn::Shm(c) => c.write_whole(bufs),
            Conn::Tcp(_) | Conn::Udp(_) => Ok(false),
        }
    }

    /// What to ask epoll for while frames wait for room: writability of
    /// the socket; for shared memory nothing more (the peer's doorbell
    /// makes the socket readable once it took bytes).
    pub fn write_interest(&self) -> u32 {
        match self {
            Conn::Tcp(_) => epoll::WRITABLE,
            // Room comes with the peer's doorbell or acknowledgements.
            Conn::Shm(_) | Conn::Udp(_) => 0,
        }
    }

    /// epoll reported the descriptor.
    pub fn on_event(&mut self) {
        if let Conn::Shm(c) = self {
            c.on_event();
        }
    }

    /// About to sleep in epoll (with frames still queued if `backlog`):
    /// false when shared memory holds bytes to read, or room for the
    /// frames, that epoll would not report.
    pub fn may_sleep(&mut self, backlog: bool) -> bool {
        match self {
            Conn::Tcp(_) => true,
            Conn::Udp(c) => c.before_sleep(),
            Conn::Shm(c) => c.want_data() && (!backlog || c.want_room()),
        }
    }

    /// The peer copies large data straight from this process's memory.
    pub fn by_reference(&self) -> bool {
        matches!(self, Conn::Shm(c) if c.peer_reads_me())
    }

    /// Copies bytes the peer referred to (a DATA_REF) from its memory.
    pub fn read_referenced(&self, addr: u64, out: &mut [u8], generation: u32) -> io::Result<()> {
        match self {
            Conn::Shm(c) => c.read_peer_memory(addr, out, generation),
            Conn::Tcp(_) | Conn::Udp(_) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a data reference between hosts",
            )),
        }
    }

    /// This process halted for the failure announced at `generation`.
    pub fn set_halted(&mut self, generation: u32) {
        match self {
            Conn::Shm(c) => c.set_halted(generation),
            Conn::Udp(c) => c.own_lent(),
            Conn::Tcp(_) => {}
        }
    }

    pub fn shutdown_write(&mut self) {
        match self {
            Conn::Tcp(s) => {
                let _ = s.shutdown(std::net::Shutdown::Write);
            }
            Conn::Shm(c) => c.shutdown_write(),
            Conn::Udp(c) => c.shutdown_write(),
        }
    }

    /// Connections whose bytes are looked at without an epoll event
    /// (shared memory) and hold some now, and UDP ones holding received
    /// bytes.
    pub fn polled(&self) -> bool {
        match self {
            Conn::Tcp(_) => false,
            Conn::Shm(c) => c.readable(),
            Conn::Udp(c) => c.buffered(),
        }
    }

    /// Shared memory: frames waiting for room are written again at each
    /// poll (no epoll event says the peer made room).
    pub fn is_memory(&self) -> bool {
        matches!(self, Conn::Shm(_))
    }

    pub fn udp(&mut self) -> Option<&mut UdpConn> {
        match self {
            Conn::Udp(c) => Some(c),
            _ => None,
        }
    }
}
