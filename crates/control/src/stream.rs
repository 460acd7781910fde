//! A control connection: a Unix socket on mpiexec's own host, TCP from
//! another host. `MPISTAGES_CONTROL` names it: a path, or `tcp:ADDR:PORT`.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

pub enum ControlStream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

/// The prefix of a TCP control address in `MPISTAGES_CONTROL`.
pub const TCP_PREFIX: &str = "tcp:";

impl ControlStream {
    /// Connects to the control address `to` (a path or `tcp:ADDR:PORT`).
    pub fn connect(to: &str) -> io::Result<ControlStream> {
        match to.strip_prefix(TCP_PREFIX) {
            Some(addr) => {
                let s = TcpStream::connect(addr)?;
                s.set_nodelay(true)?;
                Ok(ControlStream::Tcp(s))
            }
            None => Ok(ControlStream::Unix(UnixStream::connect(to)?)),
        }
    }

    pub fn try_clone(&self) -> io::Result<ControlStream> {
        Ok(match self {
            ControlStream::Unix(s) => ControlStream::Unix(s.try_clone()?),
            ControlStream::Tcp(s) => ControlStream::Tcp(s.try_clone()?),
        })
    }

    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            ControlStream::Unix(s) => s.set_nonblocking(on),
            ControlStream::Tcp(s) => s.set_nonblocking(on),
        }
    }
}

impl Read for ControlStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            ControlStream::Unix(s) => s.read(buf),
            ControlStream::Tcp(s) => s.read(buf),
        }
    }
}

/// Plain writes: callers that may meet a closed peer write through
/// `mpistages_sys::socket::NoSignal` on the raw descriptor instead.
impl Write for ControlStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            ControlStream::Unix(s) => s.write(buf),
            ControlStream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl AsRawFd for ControlStream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            ControlStream::Unix(s) => s.as_raw_fd(),
            ControlStream::Tcp(s) => s.as_raw_fd(),
        }
    }
}
