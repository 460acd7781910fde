//! An eventfd used as a doorbell: any thread rings it to wake a thread that
//! sleeps in epoll.

use super::cvt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd takes no pointers; the result is a fresh descriptor we own.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        Ok(EventFd {
            // SAFETY: `fd` was just created and is owned by no one else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    pub fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64. A full counter (EAGAIN) means
        // the bell is already ringing, which is all we want.
        unsafe {
            libc::write(self.fd.as_raw_fd(), &one as *const u64 as *const _, 8);
        }
    }

    /// Resets the counter so level-triggered epoll stops reporting it.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64; EAGAIN (already empty) is fine.
        unsafe {
            libc::read(self.fd.as_raw_fd(), &mut v as *mut u64 as *mut _, 8);
        }
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
