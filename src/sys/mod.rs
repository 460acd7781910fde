//! Thin, single-purpose wrappers around the Linux facilities the engine and the
//! runtime use (epoll, eventfd, process control). Every `unsafe` system call in
//! the crate outside the ABI boundary and the shared-memory transport lives
//! here, each with the reason it is sound. Nothing here knows about MPI.

pub mod epoll;
pub mod eventfd;
pub mod process;
pub mod socket;
pub mod timerfd;

use std::io;

/// Turns a `-1` return of a libc call into the thread's `errno` as an error.
pub(crate) fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// As `cvt`, for calls that return a byte count.
pub(crate) fn cvt_size(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// Compares secrets (job keys) in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Chooses a socket's TCP congestion control algorithm by name.
pub fn set_tcp_congestion(fd: std::os::fd::RawFd, name: &str) -> io::Result<()> {
    // SAFETY: passes a pointer to the name's bytes and their exact length.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr() as *const libc::c_void,
            name.len() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Takes an advisory lock on an open file without waiting (`flock`):
/// shared (readers) or exclusive (a writer about to reuse the file). False
/// when another open file holds a conflicting lock. The lock goes with the
/// last descriptor of this open file.
pub fn try_lock(fd: std::os::fd::RawFd, exclusive: bool) -> io::Result<bool> {
    let how = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    };
    // SAFETY: flock takes and returns only integers.
    match cvt(unsafe { libc::flock(fd, how | libc::LOCK_NB) }) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Turns direct I/O (`O_DIRECT`: transfers between the caller's memory
/// and the device, bypassing the page cache) on or off for an open file.
/// Fails with `EINVAL` on file systems that do not support it.
pub fn set_direct_io(fd: std::os::fd::RawFd, on: bool) -> io::Result<()> {
    // SAFETY: fcntl with F_GETFL/F_SETFL takes and returns only integers.
    let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    let flags = if on {
        flags | libc::O_DIRECT
    } else {
        flags & !libc::O_DIRECT
    };
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) })?;
    Ok(())
}
