//! Level-triggered epoll. Level triggering keeps the callers simple: an event
//! that one thread did not handle is reported again on the next wait.

use super::cvt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub const READABLE: u32 = libc::EPOLLIN as u32;
pub const WRITABLE: u32 = libc::EPOLLOUT as u32;
pub const HANGUP: u32 = (libc::EPOLLHUP | libc::EPOLLERR | libc::EPOLLRDHUP) as u32;

pub struct Epoll {
    fd: OwnedFd,
}

#[derive(Clone, Copy, Debug)]
pub struct Event {
    pub token: u64,
    pub events: u32,
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes no pointers; a non-negative result is a
        // fresh descriptor that we own from here on.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll {
            // SAFETY: `fd` was just returned by the kernel and is owned by no one else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, interest: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: interest | libc::EPOLLRDHUP as u32,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event on our stack for the duration of the call.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) })?;
        Ok(())
    }

    pub fn add(&self, fd: RawFd, interest: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, interest, token)
    }

    pub fn modify(&self, fd: RawFd, interest: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, interest, token)
    }

    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        // SAFETY: a null event pointer is allowed for EPOLL_CTL_DEL since Linux 2.6.9.
        cvt(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        })?;
        Ok(())
    }

    /// Waits up to `timeout_ms` (-1: forever) and appends ready events to `out`.
    /// An interrupted wait returns with no events.
    pub fn wait(&self, out: &mut Vec<Event>, timeout_ms: i32) -> io::Result<()> {
        const MAX: usize = 64;
        let mut raw = [libc::epoll_event { events: 0, u64: 0 }; MAX];
        // SAFETY: `raw` has room for MAX events and the kernel writes at most MAX.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                raw.as_mut_ptr(),
                MAX as libc::c_int,
                timeout_ms,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(err);
        }
        out.extend(raw[..n as usize].iter().map(|e| Event {
            token: e.u64,
            events: e.events,
        }));
        Ok(())
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
