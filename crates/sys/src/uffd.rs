//! Write-protection of memory with userfaultfd: a range registered here
//! can be write-protected in one call (`protect`), after which the first
//! write to each of its pages stops the writing thread and queues a fault
//! (`next_fault`) until the page is unprotected (which wakes it). This is
//! how a snapshot of memory is taken without copying it while its owner
//! waits (QEMU's and CRIU's live snapshots): protect, copy in the
//! background, and copy first what a writer asks for.
//!
//! The kernel gives a userfaultfd that also handles faults taken inside
//! system calls (a `read()` or a cross-memory copy into protected memory)
//! only to privileged processes, to those allowed by
//! `vm.unprivileged_userfaultfd = 1`, or through `/dev/userfaultfd` when
//! its permissions let the user open it. A descriptor limited to faults
//! from user space would make such system calls fail with `EFAULT`, so
//! none is asked for: `Uffd::new` fails instead and the caller copies.

use super::cvt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// From <linux/userfaultfd.h> (x86_64 and aarch64 share them); the libc
// crate does not export them.
const UFFD_API: u64 = 0xaa;
const UFFD_FEATURE_PAGEFAULT_FLAG_WP: u64 = 1 << 0;
/// Pages never touched are protected too (Linux 6.4); without it, they
/// must be populated before they are protected.
const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
const UFFD_PAGEFAULT_FLAG_WP: u64 = 1 << 1;
/// Bit of `_UFFDIO_WRITEPROTECT` in a registration's `ioctls`.
const IOCTL_WRITEPROTECT: u64 = 1 << 6;
const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
const UFFDIO_UNREGISTER: libc::c_ulong = 0x8010_aa01;
const UFFDIO_WAKE: libc::c_ulong = 0x8010_aa02;
const UFFDIO_WRITEPROTECT: libc::c_ulong = 0xc018_aa06;
const USERFAULTFD_IOC_NEW: libc::c_ulong = 0xaa00;
const MADV_POPULATE_WRITE: libc::c_int = 23;

#[repr(C)]
#[derive(Default)]
struct Range {
    start: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Api {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
struct Register {
    range: Range,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
struct WriteProtect {
    range: Range,
    mode: u64,
}

/// `struct uffd_msg` (32 bytes): the event, then for a page fault its
/// flags and address.
#[repr(C)]
#[derive(Default)]
struct Msg {
    event: u8,
    _reserved: [u8; 7],
    flags: u64,
    address: u64,
    _rest: u64,
}

pub struct Uffd {
    fd: OwnedFd,
    unpopulated: bool,
}

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf takes no pointers.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

impl Uffd {
    /// A non-blocking userfaultfd that reports write-protect faults, also
    /// those taken in system calls; an error says why there is none.
    pub fn new() -> io::Result<Uffd> {
        // A kernel that does not know a feature refuses the handshake, and
        // the descriptor with it: a new one for the plainer request.
        match Self::handshake(UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_UNPOPULATED) {
            Ok(fd) => Ok(Uffd {
                fd,
                unpopulated: true,
            }),
            Err(_) => Ok(Uffd {
                fd: Self::handshake(UFFD_FEATURE_PAGEFAULT_FLAG_WP)?,
                unpopulated: false,
            }),
        }
    }

    fn handshake(features: u64) -> io::Result<OwnedFd> {
        let fd = Self::open()?;
        let mut api = Api {
            api: UFFD_API,
            features,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_API reads and writes the `Api` on our stack.
        cvt(unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API, &mut api) })?;
        if api.features & features != features {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel's userfaultfd has no write-protection",
            ));
        }
        Ok(fd)
    }

    /// Whether pages never touched are protected as well; if not, a range
    /// must be populated (`populate`) before it is protected.
    pub fn protects_unpopulated(&self) -> bool {
        self.unpopulated
    }

    fn open() -> io::Result<OwnedFd> {
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: the system call takes only flags; a non-negative result
        // is a new descriptor that we own.
        let direct = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        if direct >= 0 {
            // SAFETY: just returned by the kernel, owned by no one else.
            return Ok(unsafe { OwnedFd::from_raw_fd(direct as libc::c_int) });
        }
        let refused = io::Error::last_os_error();
        let dev = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/userfaultfd")
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "userfaultfd: {refused} (vm.unprivileged_userfaultfd is 0), \
                         and /dev/userfaultfd: {e}"
                    ),
                )
            })?;
        // SAFETY: USERFAULTFD_IOC_NEW takes the flags as its argument and
        // returns a new descriptor that we own.
        let fd = cvt(unsafe { libc::ioctl(dev.as_raw_fd(), USERFAULTFD_IOC_NEW, flags) })?;
        // SAFETY: as above.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Registers `len` bytes at `addr` (page-aligned) for write-protection.
    /// Fails for memory the kernel cannot protect this way (not anonymous
    /// private memory on older kernels, or already registered).
    pub fn register(&self, addr: usize, len: usize) -> io::Result<()> {
        let mut r = Register {
            range: Range {
                start: addr as u64,
                len: len as u64,
            },
            mode: UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_REGISTER reads and writes the `Register` on our
        // stack; the range is only an address for the kernel to check.
        cvt(unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_REGISTER, &mut r) })?;
        if r.ioctls & IOCTL_WRITEPROTECT == 0 {
            let _ = self.unregister(addr, len);
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this memory cannot be write-protected",
            ));
        }
        Ok(())
    }

    pub fn unregister(&self, addr: usize, len: usize) -> io::Result<()> {
        let r = Range {
            start: addr as u64,
            len: len as u64,
        };
        // SAFETY: UFFDIO_UNREGISTER reads the `Range` on our stack.
        cvt(unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_UNREGISTER, &r) })?;
        Ok(())
    }

    /// Makes every page of the range present and writable
    /// (`MADV_POPULATE_WRITE`, Linux 5.14), as the program's first writes
    /// would.
    pub fn populate(addr: usize, len: usize) -> io::Result<()> {
        // SAFETY: madvise only changes how the range is backed; a range
        // that is not mapped is an error (ENOMEM), not undefined behaviour.
        cvt(unsafe { libc::madvise(addr as *mut libc::c_void, len, MADV_POPULATE_WRITE) })?;
        Ok(())
    }

    /// Write-protects (`on`) or unprotects a registered range; unprotecting
    /// wakes the threads stopped on its pages.
    pub fn protect(&self, addr: usize, len: usize, on: bool) -> io::Result<()> {
        let mut w = WriteProtect {
            range: Range {
                start: addr as u64,
                len: len as u64,
            },
            mode: if on { UFFDIO_WRITEPROTECT_MODE_WP } else { 0 },
        };
        // SAFETY: UFFDIO_WRITEPROTECT reads the struct on our stack.
        cvt(unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_WRITEPROTECT, &mut w) })?;
        Ok(())
    }

    /// Wakes the threads stopped on `len` bytes at `addr` (a fault on a
    /// page another thread unprotected meanwhile).
    pub fn wake(&self, addr: usize, len: usize) -> io::Result<()> {
        let r = Range {
            start: addr as u64,
            len: len as u64,
        };
        // SAFETY: UFFDIO_WAKE reads the `Range` on our stack.
        cvt(unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_WAKE, &r) })?;
        Ok(())
    }

    /// The address of the next write-protect fault, waiting at most
    /// `timeout_ms` (-1: no limit); `None` when none came (or another
    /// event did), or when `bell` (a descriptor the caller makes readable
    /// to stop the wait, e.g. an eventfd; -1 for none) is readable.
    pub fn next_fault(&self, bell: RawFd, timeout_ms: i32) -> io::Result<Option<usize>> {
        let mut p = [self.fd.as_raw_fd(), bell].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: two pollfds on our stack.
        if cvt(unsafe { libc::poll(p.as_mut_ptr(), 2, timeout_ms) })? == 0
            || p[0].revents & libc::POLLIN == 0
        {
            return Ok(None);
        }
        let mut m = Msg::default();
        // SAFETY: reads at most size_of::<Msg>() bytes into `m`, a plain
        // struct of integers (any bytes are a valid value).
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                &mut m as *mut Msg as *mut libc::c_void,
                std::mem::size_of::<Msg>(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        let fault = n as usize == std::mem::size_of::<Msg>()
            && m.event == UFFD_EVENT_PAGEFAULT
            && m.flags & UFFD_PAGEFAULT_FLAG_WP != 0;
        Ok(fault.then_some(m.address as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Anonymous private memory of `pages` pages, touched.
    fn pages(pages: usize) -> (usize, usize) {
        let len = pages * page_size();
        // SAFETY: a fresh private anonymous mapping; nothing else uses it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: the mapping is ours, `len` bytes long.
        unsafe { std::ptr::write_bytes(p as *mut u8, 7, len) };
        (p as usize, len)
    }

    #[test]
    fn a_write_to_a_protected_page_waits_until_it_is_unprotected() {
        let uffd = match Uffd::new() {
            Ok(u) => u,
            Err(e) => {
                println!("SKIPPED: no userfaultfd write-protection here: {e}");
                return;
            }
        };
        let (addr, len) = pages(4);
        uffd.register(addr, len).unwrap();
        uffd.protect(addr, len, true).unwrap();
        let page = page_size();
        let wrote = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: the mapping lives until the end of the test.
                unsafe { *((addr + 2 * page + 5) as *mut u8) = 9 };
                wrote.store(true, Ordering::SeqCst);
            });
            let at = loop {
                if let Some(at) = uffd.next_fault(-1, 5000).unwrap() {
                    break at;
                }
            };
            assert_eq!(at & !(page - 1), addr + 2 * page, "the page written");
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!wrote.load(Ordering::SeqCst), "the writer waits");
            // SAFETY: reading the mapping while the writer is stopped.
            assert_eq!(unsafe { *((addr + 2 * page + 5) as *const u8) }, 7);
            uffd.protect(addr + 2 * page, page, false).unwrap();
        });
        assert!(wrote.load(Ordering::SeqCst));
        // SAFETY: as above.
        assert_eq!(unsafe { *((addr + 2 * page + 5) as *const u8) }, 9);
        uffd.protect(addr, len, false).unwrap();
        uffd.unregister(addr, len).unwrap();
        // SAFETY: our mapping, unmapped once.
        unsafe { libc::munmap(addr as *mut libc::c_void, len) };
    }
}
