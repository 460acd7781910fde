//! Anonymous shared memory and passing it to another process: a memfd
//! has no name in any file system, so nothing is left behind whatever way
//! the processes end (also `SIGKILL`); it lives while a process holds it.
//! It travels to a peer over a Unix socket as `SCM_RIGHTS`.

use super::{cvt, cvt_size};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A new anonymous file of `size` bytes (zeroed), closed on exec.
pub fn memfd(name: &str, size: u64) -> io::Result<File> {
    let cname = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: `cname` is a valid NUL-terminated string for the call's
    // duration; the flags are plain bits.
    let fd = cvt(unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) })?;
    // SAFETY: memfd_create just returned this descriptor; nothing else owns it.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(size)?;
    Ok(file)
}

/// Sends `data` (at least one byte) with `fd` attached on the Unix stream
/// socket `sock`.
pub fn send_with_fd(sock: RawFd, data: &[u8], fd: RawFd) -> io::Result<usize> {
    assert!(!data.is_empty(), "SCM_RIGHTS needs at least one data byte");
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // Room for one descriptor, aligned as the kernel wants (u64 array).
    let mut space = [0u64; 8];
    // SAFETY: CMSG_SPACE only computes a size.
    let cmsg_len = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    assert!(cmsg_len <= std::mem::size_of_val(&space));
    // SAFETY: msghdr is plain data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = cmsg_len as _;
    // SAFETY: msg_control points at `space`, large enough for one header
    // with one descriptor (asserted above), so the first header exists and
    // its data area holds a RawFd.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut RawFd, fd);
    }
    // SAFETY: every pointer in `msg` points at live locals of this frame
    // (the iovec over `data`, the control buffer) for the call's duration.
    cvt_size(unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) })
}

/// Receives into `buf` from the Unix stream socket `sock`, with the
/// descriptor attached to those bytes if any (others are closed).
pub fn recv_with_fd(sock: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut space = [0u64; 16];
    // SAFETY: msghdr is plain data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&space) as _;
    // SAFETY: the pointers in `msg` point at `buf` and `space`, live and
    // writable for their stated lengths during the call.
    let n = cvt_size(unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) })?;
    let mut got = None;
    // SAFETY: the kernel filled `msg_controllen` bytes of `space` with
    // well-formed control headers; CMSG_FIRSTHDR/NXTHDR walk within them
    // and CMSG_DATA of an SCM_RIGHTS header holds whole descriptors.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg) as *const RawFd;
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    let fd = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)));
                    // Only the first is kept; more would be a confused peer.
                    if got.is_none() {
                        got = Some(fd);
                    }
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n, got))
}

/// The credentials of the peer of a connected Unix socket (as the kernel
/// recorded them at connect).
fn peer_cred(sock: &impl AsRawFd) -> io::Result<libc::ucred> {
    // SAFETY: ucred is plain data; all-zero is a valid value.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are live locals of the sizes given.
    cvt(unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    })?;
    Ok(cred)
}

/// The process id of the peer of a connected Unix socket, as this
/// process's PID namespace sees it (0 when it is not visible here).
pub fn peer_pid(sock: &impl AsRawFd) -> io::Result<i32> {
    peer_cred(sock).map(|c| c.pid)
}

/// Whether the peer of a connected Unix socket runs as this process's
/// user: an abstract socket has no file permissions, so each one a job
/// listens on turns away other users' processes at accept.
pub fn peer_is_same_user(sock: &impl AsRawFd) -> bool {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    peer_cred(sock).is_ok_and(|c| c.uid == me)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_memfd_travels_to_the_other_end_and_is_the_same_memory() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut f = memfd("test", 4096).unwrap();
        f.write_all(b"hello").unwrap();
        send_with_fd(a.as_raw_fd(), b"x", f.as_raw_fd()).unwrap();
        let mut buf = [0u8; 8];
        let (n, fd) = recv_with_fd(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!((n, buf[0]), (1, b'x'));
        let mut g = File::from(fd.expect("a descriptor"));
        let mut s = [0u8; 5];
        g.seek(SeekFrom::Start(0)).unwrap();
        g.read_exact(&mut s).unwrap();
        assert_eq!(&s, b"hello");
        assert_eq!(g.metadata().unwrap().len(), 4096);
        assert_eq!(peer_pid(&a).unwrap(), std::process::id() as i32);
        // Plain bytes carry no descriptor.
        (&a).write_all(b"y").unwrap();
        let (n, fd) = recv_with_fd(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!((n, fd.is_none()), (1, true));
    }
}
