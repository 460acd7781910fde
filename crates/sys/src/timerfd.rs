//! A one-shot monotonic timer as a file descriptor, for epoll.

use super::cvt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

pub struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    pub fn new() -> io::Result<TimerFd> {
        // SAFETY: timerfd_create takes no pointers; the result is a fresh
        // descriptor that we own.
        let fd = cvt(unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
            )
        })?;
        Ok(TimerFd {
            // SAFETY: `fd` was just created and is owned by no one else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// (Re)arms the timer to fire once after `after`.
    pub fn arm(&self, after: Duration) {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                // A zero value would disarm the timer: fire after 1 ns instead.
                tv_nsec: (after.subsec_nanos() as libc::c_long).max(1),
            },
        };
        // SAFETY: `spec` is a valid itimerspec; the old value is not wanted.
        unsafe {
            libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut());
        }
    }

    /// Clears an expiry so level-triggered epoll stops reporting it;
    /// returns whether the timer had fired.
    pub fn drain(&self) -> bool {
        let mut n: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64; EAGAIN (not fired)
        // leaves it 0.
        let r = unsafe { libc::read(self.fd.as_raw_fd(), &mut n as *mut u64 as *mut _, 8) };
        r == 8 && n > 0
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
