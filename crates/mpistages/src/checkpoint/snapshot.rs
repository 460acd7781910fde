//! A snapshot of the protected regions without copying them while the
//! program waits: their pages are write-protected (`sys::uffd`), a
//! thread copies them chunk by chunk and unprotects each chunk once it is
//! copied, and a write of the program to a chunk not yet copied stops it
//! until another thread has copied that chunk first (the technique of
//! QEMU's and CRIU's live snapshots). The program waits only for the
//! write-protection of the ranges and for the few bytes at each region's
//! ends that share a page with other memory, which are copied at once.
//!
//! Measured on this 2-core VM (bench/src/snapshot_uffd.c, 128 MiB): the
//! protection takes 0.1-0.4 of one memcpy of the bytes, and a program that
//! writes every page meanwhile stops on a handful of chunks. A fork()ed
//! snapshot (Redis's BGSAVE) was measured too and not taken: every page
//! the program writes afterwards traps once (1.8 us a page here, ~3x the
//! memcpy of it), even after the child is gone.
//!
//! One `Snapshotter` per process; one job at a time (a new snapshot waits
//! for the copy of the previous one).

use crate::sys::cma::read_from;
use crate::sys::eventfd::EventFd;
use crate::sys::pages::PageBuf;
use crate::sys::uffd::{page_size, Uffd};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Bytes copied per chunk: what a write to a chunk not yet copied waits
/// for (about 0.15 ms here), against one fault and one unprotect per chunk.
const CHUNK: usize = 1 << 20;
/// A region whose page-aligned interior is smaller is copied at once.
const MIN_PROTECTED: usize = 16 << 10;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `len` bytes of the program's memory at `src`, to go to `dst` (ours).
struct Chunk {
    src: usize,
    dst: usize,
    len: usize,
    copied: Mutex<bool>,
}

/// One snapshot under way.
pub struct Job {
    /// By address of the program's memory.
    chunks: Vec<Chunk>,
    left: Mutex<usize>,
    done: Condvar,
    /// The copies, handed back once every chunk is in them.
    copies: Mutex<Option<Vec<PageBuf>>>,
    /// Why a chunk could not be copied (its memory was unmapped).
    failed: Mutex<Option<String>>,
}

impl Job {
    /// Copies chunk `i` unless done, then unprotects it (which lets a
    /// writer stopped on it go on).
    fn copy(&self, i: usize, uffd: &Uffd) {
        let c = &self.chunks[i];
        let mut copied = lock(&c.copied);
        if *copied {
            return;
        }
        // SAFETY: `dst` is `len` bytes inside one of the job's copies,
        // which only this chunk's holder writes and nobody reads before
        // the job is done.
        let dst = unsafe { std::slice::from_raw_parts_mut(c.dst as *mut u8, c.len) };
        // The program's bytes are read by the kernel, not dereferenced
        // here: a program that unmaps a protected region before the copy
        // is done (it should `MPIX_Unprotect` it first) makes the snapshot
        // fail, not this thread crash. Write-protected since `take`,
        // nothing changes them while they are read.
        // SAFETY: getpid takes no pointers.
        let pid = unsafe { libc::getpid() };
        match read_from(pid, c.src as u64, dst) {
            Ok(n) if n == c.len => {}
            Ok(n) => self.fail(format!(
                "{} of {} bytes at {:#x} were mapped",
                n, c.len, c.src
            )),
            Err(e) => self.fail(format!("{} bytes at {:#x}: {e}", c.len, c.src)),
        }
        if let Err(e) = uffd.protect(c.src, c.len, false) {
            // Unmapped meanwhile: nothing is left to unprotect.
            log::debug!("mpistages: snapshot: unprotecting {} bytes: {e}", c.len);
        }
        *copied = true;
        drop(copied);
        let mut left = lock(&self.left);
        *left -= 1;
        if *left == 0 {
            self.done.notify_all();
        }
    }

    fn fail(&self, why: String) {
        lock(&self.failed).get_or_insert(why);
    }

    /// The chunk holding address `at`.
    fn chunk_at(&self, at: usize) -> Option<usize> {
        let i = self.chunks.partition_point(|c| c.src + c.len <= at);
        (i < self.chunks.len() && self.chunks[i].src <= at).then_some(i)
    }

    /// Waits until every chunk is copied.
    pub fn wait(&self) {
        let mut left = lock(&self.left);
        while *left > 0 {
            left = self.done.wait(left).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The copies, once every chunk is in them (the first call only), or
    /// why the snapshot failed.
    pub fn take_copies(&self) -> Result<Vec<PageBuf>, String> {
        self.wait();
        let copies = lock(&self.copies).take();
        match lock(&self.failed).clone() {
            Some(why) => Err(why),
            None => copies.ok_or_else(|| "the copies were taken already".into()),
        }
    }
}

struct Shared {
    uffd: Uffd,
    /// The job being copied: faults are looked up there.
    current: Mutex<Option<Arc<Job>>>,
    /// Ranges registered with the userfaultfd (page-aligned).
    registered: Mutex<Vec<(usize, usize)>>,
    stop: std::sync::atomic::AtomicBool,
    /// Rung to stop the fault handler's wait.
    stop_bell: EventFd,
}

pub struct Snapshotter {
    shared: Arc<Shared>,
    to_copier: Mutex<Option<std::sync::mpsc::Sender<Arc<Job>>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Snapshotter {
    /// A snapshotter, or why the kernel gives none (then checkpoints copy).
    pub fn new() -> io::Result<Snapshotter> {
        let shared = Arc::new(Shared {
            uffd: Uffd::new()?,
            current: Mutex::new(None),
            registered: Mutex::new(Vec::new()),
            stop: Default::default(),
            stop_bell: EventFd::new()?,
        });
        let (tx, rx) = std::sync::mpsc::channel::<Arc<Job>>();
        let s = shared.clone();
        let copier = std::thread::Builder::new()
            .name("mpistages-snapshot".into())
            .spawn(move || {
                // Background work: the program's threads come first (a
                // write of theirs that needs a chunk is served by the fault
                // handler, at their priority).
                crate::sys::process::lower_this_thread(10);
                for job in rx {
                    for i in 0..job.chunks.len() {
                        job.copy(i, &s.uffd);
                    }
                }
            })?;
        let s = shared.clone();
        let handler = std::thread::Builder::new()
            .name("mpistages-snapfault".into())
            .spawn(move || handle_faults(&s))?;
        Ok(Snapshotter {
            shared,
            to_copier: Mutex::new(Some(tx)),
            threads: vec![copier, handler],
        })
    }

    /// Takes a snapshot of the regions (`(address, bytes)` of the
    /// program's memory) into `copies` (one buffer per region, each of the
    /// region's length). What can be protected is copied in the background;
    /// the job says when the copies are complete.
    pub fn take(&self, regions: &[(usize, usize)], mut copies: Vec<PageBuf>) -> Arc<Job> {
        assert_eq!(regions.len(), copies.len());
        if let Some(previous) = lock(&self.shared.current).take() {
            previous.wait();
        }
        let page = page_size();
        let mut chunks = Vec::new();
        let mut interiors = Vec::new();
        for (&(src, len), copy) in regions.iter().zip(copies.iter_mut()) {
            assert_eq!(copy.len(), len);
            let dst = copy.as_mut_slice().as_mut_ptr() as usize;
            let first = src.next_multiple_of(page);
            let end = (src + len) / page * page;
            let protected =
                end > first && end - first >= MIN_PROTECTED && self.register(first, end - first);
            let (a, b) = if protected {
                (first, end)
            } else {
                (src + len, src + len)
            };
            // SAFETY: the region's bytes outside [a, b) are read now, while
            // the program waits in this call; `copy` is ours, of `len` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, a - src);
                std::ptr::copy_nonoverlapping(
                    b as *const u8,
                    (dst + (b - src)) as *mut u8,
                    src + len - b,
                );
            }
            if a < b {
                interiors.push((a, b - a));
            }
            let mut at = a;
            while at < b {
                let n = CHUNK.min(b - at);
                chunks.push(Chunk {
                    src: at,
                    dst: dst + (at - src),
                    len: n,
                    copied: Mutex::new(false),
                });
                at += n;
            }
        }
        chunks.sort_by_key(|c| c.src);
        let job = Arc::new(Job {
            left: Mutex::new(chunks.len()),
            chunks,
            done: Condvar::new(),
            copies: Mutex::new(Some(copies)),
            failed: Mutex::new(None),
        });
        if job.chunks.is_empty() {
            return job;
        }
        // The job is where faults are looked up before any page is
        // protected: a write of another thread may come at once.
        *lock(&self.shared.current) = Some(job.clone());
        let uffd = &self.shared.uffd;
        for &(a, len) in &interiors {
            if !self.protect(a, len) {
                // Copied now: nothing protects these bytes from writes.
                for i in (0..job.chunks.len()).filter(|&i| {
                    let c = &job.chunks[i];
                    a <= c.src && c.src < a + len
                }) {
                    job.copy(i, uffd);
                }
            }
        }
        if let Some(tx) = lock(&self.to_copier).as_ref() {
            let _ = tx.send(job.clone());
        }
        job
    }

    /// Write-protects a registered range; false if it could not be.
    fn protect(&self, a: usize, len: usize) -> bool {
        let uffd = &self.shared.uffd;
        let now = || {
            (uffd.protects_unpopulated() || Uffd::populate(a, len).is_ok())
                && uffd.protect(a, len, true).is_ok()
        };
        if now() {
            return true;
        }
        // Registered once, then unmapped and mapped again (a region freed
        // and allocated anew): the new mapping is registered anew.
        lock(&self.shared.registered).retain(|&(r, l)| !(r < a + len && a < r + l));
        self.register(a, len) && now()
    }

    /// Registers the page-aligned range (once): false if the kernel
    /// refuses it (memory it cannot write-protect this way).
    fn register(&self, addr: usize, len: usize) -> bool {
        let mut reg = lock(&self.shared.registered);
        if reg.iter().any(|&(a, l)| a <= addr && addr + len <= a + l) {
            return true;
        }
        match self.shared.uffd.register(addr, len) {
            Ok(()) => {
                reg.push((addr, len));
                true
            }
            Err(e) => {
                log::debug!("mpistages: snapshot: {len} bytes at {addr:#x} copied at once: {e}");
                false
            }
        }
    }

    /// The program lets go of the region at `addr` of `len` bytes
    /// (`MPIX_Unprotect`): a copy of it under way is finished first, and
    /// its pages are no longer registered.
    pub fn forget(&self, addr: usize, len: usize) {
        if let Some(job) = lock(&self.shared.current).as_ref() {
            job.wait();
        }
        let mut reg = lock(&self.shared.registered);
        reg.retain(|&(a, l)| {
            let overlaps = a < addr + len && addr < a + l;
            if overlaps {
                if let Err(e) = self.shared.uffd.unregister(a, l) {
                    log::debug!("mpistages: snapshot: unregistering {l} bytes: {e}");
                }
            }
            !overlaps
        });
    }
}

static SHARED: std::sync::OnceLock<Result<Snapshotter, String>> = std::sync::OnceLock::new();

/// The program no longer protects `len` bytes at `addr`: the snapshot of
/// them under way is finished and they are no longer registered (they may
/// be freed next). Nothing to do before the first snapshot.
pub fn unprotected(addr: usize, len: usize) {
    if let Some(Ok(snap)) = SHARED.get() {
        snap.forget(addr, len);
    }
}

/// The process's snapshotter, made at the first use; or why there is none
/// (`MPISTAGES_SNAPSHOT=copy`, or the kernel's refusal), for the caller to
/// say once: checkpoints then copy while the program waits.
pub fn shared() -> Result<&'static Snapshotter, &'static str> {
    SHARED
        .get_or_init(|| {
            if std::env::var("MPISTAGES_SNAPSHOT").is_ok_and(|v| v == "copy") {
                return Err("MPISTAGES_SNAPSHOT=copy".into());
            }
            Snapshotter::new().map_err(|e| format!("no userfaultfd write-protection: {e}"))
        })
        .as_ref()
        .map_err(String::as_str)
}

impl Drop for Snapshotter {
    fn drop(&mut self) {
        if let Some(job) = lock(&self.shared.current).take() {
            job.wait();
        }
        self.shared
            .stop
            .store(true, std::sync::atomic::Ordering::Release);
        self.shared.stop_bell.ring();
        lock(&self.to_copier).take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The fault handler: copies the chunk a writer stopped on, or wakes it
/// when the chunk was copied (and unprotected) meanwhile.
fn handle_faults(s: &Shared) {
    let page = page_size();
    while !s.stop.load(std::sync::atomic::Ordering::Acquire) {
        // No timeout: an idle process does not wake up for it.
        let at = match s.uffd.next_fault(s.stop_bell.as_raw_fd(), -1) {
            Ok(Some(at)) => at,
            Ok(None) => continue,
            Err(e) => {
                log::warn!("mpistages: snapshot: reading faults: {e}");
                return;
            }
        };
        let job = lock(&s.current).clone();
        match job.as_ref().and_then(|j| j.chunk_at(at).map(|i| (j, i))) {
            Some((job, i)) => job.copy(i, &s.uffd),
            // Not a page of the job: protected by nothing we know of any
            // more; let the writer go on.
            None => {
                let p = at / page * page;
                let _ = s.uffd.protect(p, page, false);
            }
        }
        // The chunk may have been unprotected before this fault was read.
        let _ = s.uffd.wake(at / page * page, page);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn buf(len: usize, at: usize) -> PageBuf {
        PageBuf::new(len, at).unwrap()
    }

    fn snapshotter() -> Option<Snapshotter> {
        match Snapshotter::new() {
            Ok(s) => Some(s),
            Err(e) => {
                println!("SKIPPED: no userfaultfd write-protection here: {e}");
                None
            }
        }
    }

    #[test]
    fn the_snapshot_holds_the_bytes_of_its_moment_while_a_writer_rewrites_them() {
        let Some(snap) = snapshotter() else { return };
        // Unaligned ends: 3 bytes in, 8 MiB + 5 bytes long.
        let mut backing = vec![0u8; (8 << 20) + 4096 * 3];
        let start = backing.as_mut_ptr() as usize;
        let src = start.next_multiple_of(page_size()) + 3;
        let len = (8 << 20) + 5;
        let region = |v: u8| {
            // SAFETY: [src, src + len) lies inside `backing`.
            unsafe { std::ptr::write_bytes(src as *mut u8, v, len) }
        };
        for round in 1..=3u8 {
            region(round);
            let stop = AtomicBool::new(false);
            let job = std::thread::scope(|s| {
                let job = snap.take(&[(src, len)], vec![buf(len, src)]);
                // The program goes on writing, from its first page to its
                // last, over and over, while the copy runs.
                s.spawn(|| {
                    let mut v = 100u8;
                    while !stop.load(Ordering::Relaxed) {
                        region(v);
                        v = v.wrapping_add(1);
                    }
                });
                job.wait();
                stop.store(true, Ordering::Relaxed);
                job
            });
            let copy = job.take_copies().unwrap().pop().unwrap();
            assert!(
                copy.as_slice().iter().all(|&b| b == round),
                "round {round}: bytes of later writes in the snapshot"
            );
            assert!(job.take_copies().is_err(), "handed out once");
        }
        snap.forget(src, len);
        drop(backing);
    }

    #[test]
    fn a_small_region_is_copied_at_once() {
        let Some(snap) = snapshotter() else { return };
        let v: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let at = v.as_ptr() as usize;
        let job = snap.take(&[(at, v.len())], vec![buf(v.len(), at)]);
        assert!(job.chunks.is_empty());
        assert_eq!(job.take_copies().unwrap()[0].as_slice(), &v[..]);
    }

    #[test]
    fn a_forgotten_region_is_written_freely() {
        let Some(snap) = snapshotter() else { return };
        let mut v = vec![1u8; 4 << 20];
        let (src, len) = (v.as_mut_ptr() as usize, v.len());
        let job = snap.take(&[(src, len)], vec![buf(len, src)]);
        snap.forget(src, len);
        assert_eq!(*lock(&job.left), 0, "forget finished the copy");
        v.iter_mut().for_each(|b| *b = 2);
        let copy = job.take_copies().unwrap().pop().unwrap();
        assert!(copy.as_slice().iter().all(|&b| b == 1));
        // Taken again after the forget: registered anew.
        let job = snap.take(&[(src, len)], vec![buf(len, src)]);
        v[len - 1] = 3;
        let copy = job.take_copies().unwrap().pop().unwrap();
        assert!(copy.as_slice().iter().all(|&b| b == 2));
    }
}
