//! A process's death seen before the kernel tears it down: a robust,
//! process-shared mutex in one page of a memfd. The watcher (mpiexec)
//! makes the page and passes its descriptor to the child; a thread of the
//! child holds the mutex for the child's life (`hold`). When that thread
//! dies, the kernel marks the mutex's owner dead (`FUTEX_OWNER_DIED`) and
//! wakes a waiter as it lets go of the thread's memory (`exit_mm`): before
//! it frees the address space and closes the process's files, which with
//! GiBs of memory takes 100 ms and more, and before the parent's `SIGCHLD`.
//! A holder that lets go on purpose (`Holder::release`, at the end of its
//! MPI) unlocks it: the watcher then sees a clean end.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const PAGE: usize = 4096;

/// glibc's value of `PTHREAD_MUTEX_ROBUST` (not exported by the libc crate
/// for this target).
const PTHREAD_MUTEX_ROBUST: libc::c_int = 1;

/// How the holder of a page ended, as its watcher saw it.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Its holding thread died (the process was killed, crashed or
    /// exited without releasing).
    Died,
    /// It released the mutex (a clean end).
    Released,
    /// The watcher was asked to stop (the process was reaped first).
    Stopped,
}

/// A shared page holding one robust mutex, mapped in this process.
pub struct Page {
    map: *mut libc::c_void,
    fd: OwnedFd,
}

// SAFETY: the mapping lives as long as the Page and is touched only
// through the pthread mutex functions, which are thread-safe.
unsafe impl Send for Page {}
// SAFETY: as above.
unsafe impl Sync for Page {}

fn mutex(map: *mut libc::c_void) -> *mut libc::pthread_mutex_t {
    map as *mut libc::pthread_mutex_t
}

/// Set to 1 by the holder once it holds the mutex (after the mutex, in
/// the same page): the watcher waits for it before it takes the mutex's
/// state as news.
const HELD_AT: usize = 128;

fn held(map: *mut libc::c_void) -> &'static std::sync::atomic::AtomicU32 {
    const _: () = assert!(std::mem::size_of::<libc::pthread_mutex_t>() <= HELD_AT);
    // SAFETY: the word lies inside the mapped page, 4-byte aligned, and is
    // only ever accessed atomically (here and by the other process).
    unsafe { &*((map as *mut u8).add(HELD_AT) as *const std::sync::atomic::AtomicU32) }
}

/// FUTEX_WAIT on a word of the shared page while it is `val`, for at most
/// `limit`; FUTEX_WAKE when `wake`.
fn futex(word: &std::sync::atomic::AtomicU32, val: u32, limit: Duration, wake: bool) {
    if wake {
        crate::futex::wake(word);
    } else {
        crate::futex::wait(word, val, limit);
    }
}

/// Maps a page of `fd` shared, read and write.
fn map_page(fd: RawFd) -> io::Result<*mut libc::c_void> {
    // SAFETY: a fresh mapping of one page of a descriptor we hold; no
    // existing memory is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p)
}

impl Page {
    /// A new page with an unlocked robust, process-shared mutex.
    pub fn new() -> io::Result<Page> {
        let file = super::fdpass::memfd("mpistages-liveness", PAGE as u64)?;
        let fd = OwnedFd::from(file);
        let map = map_page(fd.as_raw_fd())?;
        let page = Page { map, fd };
        // SAFETY: the attribute object lives on this frame and is
        // initialized before use and destroyed after; the mutex lies in
        // our fresh page, which nothing else uses yet.
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            let r = libc::pthread_mutexattr_init(&mut attr);
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            let mut r = libc::pthread_mutexattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED);
            if r == 0 {
                r = libc::pthread_mutexattr_setrobust(&mut attr, PTHREAD_MUTEX_ROBUST);
            }
            if r == 0 {
                r = libc::pthread_mutex_init(mutex(page.map), &attr);
            }
            libc::pthread_mutexattr_destroy(&mut attr);
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
        }
        Ok(page)
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Waits until a holder took the mutex and then ended, or until
    /// `stop` is set (looked at every `poll`).
    pub fn watch(&self, stop: &AtomicBool, poll: Duration) -> Ended {
        while held(self.map).load(Ordering::Acquire) == 0 {
            if stop.load(Ordering::Acquire) {
                return Ended::Stopped;
            }
            futex(held(self.map), 0, poll, false);
        }
        loop {
            if stop.load(Ordering::Acquire) {
                return Ended::Stopped;
            }
            let mut now: libc::timespec = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: writes into a live timespec.
            unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
            let nanos = now.tv_nsec as u64 + poll.subsec_nanos() as u64;
            let deadline = libc::timespec {
                tv_sec: now.tv_sec
                    + poll.as_secs() as libc::time_t
                    + (nanos / 1_000_000_000) as libc::time_t,
                tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
            };
            // SAFETY: the mutex was initialized in `new` and the page
            // stays mapped while `self` lives.
            let r = unsafe { libc::pthread_mutex_timedlock(mutex(self.map), &deadline) };
            let ended = match r {
                0 => Ended::Released,
                libc::EOWNERDEAD => {
                    // SAFETY: this thread now owns the mutex; marking it
                    // consistent lets it be unlocked normally.
                    unsafe { libc::pthread_mutex_consistent(mutex(self.map)) };
                    Ended::Died
                }
                libc::ETIMEDOUT | libc::EINTR => continue,
                // ENOTRECOVERABLE: a holder died and a watcher before
                // this one did not mark it consistent.
                _ => return Ended::Died,
            };
            // SAFETY: this thread owns the mutex (lock returned 0 or
            // EOWNERDEAD).
            unsafe { libc::pthread_mutex_unlock(mutex(self.map)) };
            return ended;
        }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: unmaps the page `new` mapped; no reference into it
        // outlives `self`.
        unsafe { libc::munmap(self.map, PAGE) };
    }
}

/// In the watched process: a thread that holds the mutex of the page at
/// inherited descriptor `fd` until `release`.
pub struct Holder {
    release: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

/// Takes hold of the page at `fd` (inherited from the watcher), and
/// closes the descriptor. Returns once the mutex is held.
pub fn hold(fd: RawFd) -> io::Result<Holder> {
    // Only a page: the number may be stale (inherited in the environment
    // by a process that did not inherit the descriptor) and name anything.
    let target = std::fs::read_link(format!("/proc/self/fd/{fd}"))?;
    if !target
        .to_string_lossy()
        .starts_with("/memfd:mpistages-liveness")
    {
        return Err(io::Error::other(format!(
            "descriptor {fd} is {}, not a liveness page",
            target.display()
        )));
    }
    // SAFETY: `fd` names the page the watcher passed to this process
    // alone (checked above); from here the OwnedFd owns it (and closes it
    // below).
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let map = map_page(owned.as_raw_fd())?;
    drop(owned);
    let addr = map as usize;
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let (held_tx, held_rx) = std::sync::mpsc::channel::<i32>();
    let thread = std::thread::Builder::new()
        .name("mpistages-alive".into())
        .stack_size(64 << 10)
        .spawn(move || {
            let m = mutex(addr as *mut libc::c_void);
            // SAFETY: the watcher initialized the mutex before this
            // process started; the page stays mapped until this thread
            // unmaps it after unlocking.
            let r = unsafe { libc::pthread_mutex_lock(m) };
            if r == 0 {
                let word = held(addr as *mut libc::c_void);
                word.store(1, Ordering::Release);
                futex(word, 0, Duration::ZERO, true);
            }
            let _ = held_tx.send(r);
            if r != 0 {
                return;
            }
            // Until released, or until the process ends (the sender is
            // dropped with it only on a clean exit path).
            let _ = wait.recv();
            // SAFETY: this thread holds the mutex; the page is unmapped
            // once nothing in this process uses it.
            unsafe {
                libc::pthread_mutex_unlock(m);
                libc::munmap(addr as *mut libc::c_void, PAGE);
            }
        })?;
    match held_rx.recv() {
        Ok(0) => Ok(Holder { release, thread }),
        Ok(r) => Err(io::Error::from_raw_os_error(r)),
        Err(_) => Err(io::Error::other("the liveness thread ended")),
    }
}

impl Holder {
    /// Lets go of the mutex: the watcher sees a clean end.
    pub fn release(self) {
        let _ = self.release.send(());
        let _ = self.thread.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A child that holds the page and is SIGKILLed is seen dead; one that
    /// releases it is seen ending cleanly; a stop ends the watch.
    #[test]
    fn death_release_and_stop() {
        // The child: this test binary, asked to hold the page (see below).
        for (action, want) in [("kill", Ended::Died), ("release", Ended::Released)] {
            let page = Arc::new(Page::new().unwrap());
            let mut cmd = crate::spawn::Command::new(std::env::current_exe().unwrap());
            cmd.args(["--exact", "liveness::tests::holder_child", "--nocapture"])
                .env("LIVENESS_FD", page.fd().to_string())
                .env("LIVENESS_ACTION", action)
                .keep_fd(page.fd());
            let child = cmd.spawn().unwrap();
            // Wait for the child to say it holds the page.
            use std::io::BufRead;
            let mut out = std::io::BufReader::new(child.stdout);
            let mut line = String::new();
            while !line.contains("HOLDING") {
                line.clear();
                assert!(
                    out.read_line(&mut line).unwrap() > 0,
                    "the child ended first"
                );
            }
            if action == "kill" {
                // SAFETY: signals our own child by pid.
                unsafe { libc::kill(child.pid, libc::SIGKILL) };
            }
            let stop = AtomicBool::new(false);
            assert_eq!(page.watch(&stop, Duration::from_millis(50)), want);
            crate::process::wait_for(child.pid);
        }
        let page = Page::new().unwrap();
        let stop = AtomicBool::new(true);
        assert_eq!(page.watch(&stop, Duration::from_millis(10)), Ended::Stopped);
    }

    /// Runs only as the child of `death_release_and_stop`.
    #[test]
    fn holder_child() {
        let Ok(fd) = std::env::var("LIVENESS_FD") else {
            return;
        };
        let h = hold(fd.parse().unwrap()).unwrap();
        println!("HOLDING");
        if std::env::var("LIVENESS_ACTION").as_deref() == Ok("release") {
            h.release();
        } else {
            std::thread::sleep(Duration::from_secs(60));
        }
    }
}
