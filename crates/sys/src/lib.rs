//! Thin, single-purpose wrappers around the Linux facilities the engine and the
//! runtime use (epoll, eventfd, process control). Every `unsafe` system call in
//! the crate outside the ABI boundary and the shared-memory transport lives
//! here, each with the reason it is sound. Nothing here knows about MPI.
//!
//! A crate of its own, shared by the library (as `mpistages::sys`) and the
//! launcher; it depends on nothing of either.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod cma;
pub mod epoll;
pub mod eventfd;
pub mod fdpass;
pub mod file;
pub mod futex;
pub mod liveness;
pub mod pages;
pub mod process;
pub mod socket;
pub mod spawn;
pub mod timerfd;
pub mod uffd;

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

/// Asks for `bytes` of kernel buffer each way on a socket (the forcing
/// variant first, which root may use beyond the system's maximum).
/// Gives the allocator's free pages back to the kernel (every arena's,
/// not only the top of the heap). After a recovery the buffers of the
/// connections to the dead process are free but stay resident: beside two
/// CPU hogs, a survivor's resident memory climbed to new high-water marks
/// (136 KB, then 64 KB) while its live heap stayed flat (heaptrack: a mean
/// of 680 KB in every quarter of a 40-recovery soak).
pub fn give_back_free_memory() {
    // SAFETY: malloc_trim only walks glibc's own arenas under their locks
    // and takes no pointer from us.
    unsafe {
        libc::malloc_trim(0);
    }
}

pub fn set_socket_buffers(fd: std::os::fd::RawFd, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        for opt in [force, plain] {
            // SAFETY: passes a pointer to a live c_int and its size.
            let r = unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    opt,
                    &v as *const libc::c_int as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if r == 0 {
                break;
            }
        }
    }
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

/// Releases this open file's `flock`. Closing the descriptor is not
/// enough when another process shares the open file: a child that the
/// application (or a test) forks holds a copy of every descriptor until it
/// execs, and with it the lock, so a reader would find the file still
/// being written.
pub fn unlock(fd: std::os::fd::RawFd) {
    // SAFETY: flock takes and returns only integers.
    unsafe {
        libc::flock(fd, libc::LOCK_UN);
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

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    /// A copy of the descriptor (as a forked child holds until it execs)
    /// keeps an `flock` after the writer closed its own; `unlock` releases
    /// it for every copy. (A reused checkpoint file stayed locked this way
    /// while a test spawned a process, and a reader was refused.)
    #[test]
    fn unlock_releases_the_lock_for_every_copy_of_the_file() {
        let dir = std::env::temp_dir().join(format!("sys-unlock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for explicit in [false, true] {
            // A file each: a process that another test forks meanwhile
            // may hold a copy of the first one's locked descriptor until
            // it execs (seen in CI: the second lock was refused).
            let path = dir.join(format!("f-{explicit}"));
            let w = std::fs::File::create(&path).unwrap();
            assert!(super::try_lock(w.as_raw_fd(), true).unwrap());
            let copy = w.try_clone().unwrap();
            if explicit {
                super::unlock(w.as_raw_fd());
            }
            drop(w);
            let r = std::fs::File::open(&path).unwrap();
            assert_eq!(super::try_lock(r.as_raw_fd(), false).unwrap(), explicit);
            drop(copy);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
