//! Writes to sockets that never raise `SIGPIPE`. A write to a peer that has
//! gone away would otherwise deliver `SIGPIPE`, whose default action kills
//! the process: in a rank that is the application's process, so a peer's
//! failure would become this rank's. `send`/`sendmsg` with `MSG_NOSIGNAL`
//! report `EPIPE` instead, without touching the application's signal
//! dispositions.

use super::cvt_size;
use std::io::{self, IoSlice, Write};
use std::os::fd::{AsRawFd, RawFd};

/// An `io::Write` over a connected stream socket (TCP or Unix) whose
/// writes use `MSG_NOSIGNAL`. It borrows the socket; reads go elsewhere.
pub struct NoSignal(RawFd);

impl NoSignal {
    pub fn new(socket: &impl AsRawFd) -> NoSignal {
        NoSignal(socket.as_raw_fd())
    }

    /// One `send` that never blocks, whatever the socket's mode (a
    /// doorbell: when the buffer is full, the bytes in it wake the peer).
    pub fn send_dontwait(&self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: the pointer and length describe `buf`, which outlives the
        // call; `send` only reads from it.
        cvt_size(unsafe {
            libc::send(
                self.0,
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        })
    }
}

/// Writes all of `bytes` to a socket that may be non-blocking (one whose
/// reads an event loop does), waiting while its buffer is full, for at
/// most `within`; false when the peer is gone or took nothing that long
/// (a partial message may then be on the wire: the connection is as good
/// as lost).
pub fn send_whole(socket: &impl AsRawFd, bytes: &[u8], within: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    let mut w = NoSignal::new(socket);
    let mut off = 0;
    while off < bytes.len() {
        match w.write(&bytes[off..]) {
            Ok(0) => return false,
            Ok(n) => off += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() > deadline {
                    return false;
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

impl Write for NoSignal {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: the pointer and length describe `buf`, which outlives the
        // call; `send` only reads from it.
        cvt_size(unsafe {
            libc::send(
                self.0,
                buf.as_ptr() as *const libc::c_void,
                buf.len(),
                libc::MSG_NOSIGNAL,
            )
        })
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` (std
        // guarantees it on Unix); the header points at `bufs`, which
        // outlives the call, and names no address or control data.
        // `sendmsg` only reads the slices.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = bufs.len().min(libc::UIO_MAXIOV as usize) as _;
        // SAFETY: see above.
        cvt_size(unsafe { libc::sendmsg(self.0, &msg, libc::MSG_NOSIGNAL) })
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Receives one datagram on a connected socket into up to three pieces,
/// in order, without waiting. Returns the bytes received and whether the
/// datagram was longer than all pieces (the rest is lost).
pub fn recv_parts(fd: RawFd, parts: &mut [&mut [u8]]) -> io::Result<(usize, bool)> {
    assert!(parts.len() <= 3, "at most three pieces");
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; 3];
    for (v, p) in iov.iter_mut().zip(parts.iter_mut()) {
        v.iov_base = p.as_mut_ptr() as *mut libc::c_void;
        v.iov_len = p.len();
    }
    // SAFETY: the header points at `iov`, whose first `parts.len()`
    // entries describe the pieces (valid for writes of their lengths,
    // borrowed mutably for the call), and names no address or control
    // data; all else is zero.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = parts.len() as _;
    // SAFETY: see above; `recvmsg` writes at most each iovec's length.
    let n = cvt_size(unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) })?;
    Ok((n, msg.msg_flags & libc::MSG_TRUNC != 0))
}

/// For tests of code that writes to sockets: Rust programs ignore
/// SIGPIPE, C programs (our users) do not. Called at the start of test
/// `path`, it runs that test again in a child process of the test binary
/// with the default action restored (where a SIGPIPE kills the child),
/// asserts that the child passed, and returns false; in the child it
/// returns true and the test goes on.
#[doc(hidden)]
pub fn in_child_with_default_sigpipe(path: &str) -> bool {
    const CHILD: &str = "MPISTAGES_TEST_SIGPIPE_CHILD";
    if std::env::var_os(CHILD).is_some() {
        // SAFETY: restores a default disposition; no handler is installed.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        return true;
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", path, "--test-threads", "1", "--quiet"])
        .env(CHILD, "1")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{path} in a child process: {status:?}");
    false
}

/// This machine's address toward `peer`: the source address of the route
/// the kernel would take (a UDP socket is connected; no packet is sent).
pub fn address_toward(peer: std::net::IpAddr) -> std::io::Result<std::net::IpAddr> {
    let any: std::net::IpAddr = if peer.is_ipv6() {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    };
    let s = std::net::UdpSocket::bind((any, 0))?;
    s.connect((peer, 9))?;
    Ok(s.local_addr()?.ip())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_write_to_a_closed_peer_is_an_error_not_a_signal() {
        if !in_child_with_default_sigpipe(
            "socket::tests::a_write_to_a_closed_peer_is_an_error_not_a_signal",
        ) {
            return;
        }
        for vectored in [false, true] {
            let (a, b) = UnixStream::pair().unwrap();
            drop(b);
            let mut w = NoSignal::new(&a);
            let err = if vectored {
                w.write_vectored(&[IoSlice::new(b"ab"), IoSlice::new(b"cd")])
            } else {
                w.write(b"abcd")
            }
            .unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EPIPE));
        }
    }
}
