//! Background flush of checkpoint files to a durable level: a thread copies
//! a file already written on a fast level (tmpfs) to the durable directory
//! (temporary name, fsync, rename, fsync of the directory), so the
//! application never waits for the slow file system. Completion and errors
//! are tracked and can be waited for. A checkpoint file is verified
//! (every checksum) before it takes its final name on the durable level, so
//! a copy that rotted on the fast level is never made durable.
//!
//! The source is opened when the copy is queued, so removing old epochs
//! from the fast level cannot pull a file from under a queued copy. Copies
//! run in order, every one of them: ranks must hold the same epochs on the
//! durable level, or a restore after a node loss could find no epoch they
//! all have. When the durable level is slower than the checkpoints, at most
//! `MAX_QUEUED` copies wait; the next checkpoint then waits for a place
//! (as SCR waits for an unfinished flush), and the time lost is counted.
//!
//! The same thread removes old epochs from its level (node-local levels
//! have a flusher for this alone): deleting a file can take long (freeing
//! a large tmpfs file; ext4 mounted with `discard` trims the device inside
//! `unlink`), which must not stop the application.

use std::collections::VecDeque;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;

use super::dirlevel::DirLevel;

struct Job {
    epoch: u64,
    /// `State::rollbacks` when queued: a copy queued before a rollback
    /// does not count as durable when it completes.
    rollbacks: u64,
    /// The source, open (it may be unlinked meanwhile), and its name.
    from: File,
    from_path: PathBuf,
    rank: u32,
    to: PathBuf,
    /// The file is a checkpoint: verify the copy before renaming it.
    verify: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlushStatus {
    /// Newest epoch whose file is durable on the target level.
    pub flushed: Option<u64>,
    /// Copies queued or running.
    pub pending: usize,
    /// Time `submit` waited for a place in the queue (the application's
    /// checkpoint call waited that long for the durable level).
    pub stalled: std::time::Duration,
    /// Failures so far (epoch and reason), oldest first.
    pub errors: Vec<(u64, String)>,
    /// Failures to remove old epochs, oldest first.
    pub prune_errors: Vec<String>,
}

#[derive(Default)]
struct State {
    status: FlushStatus,
    queue: VecDeque<Job>,
    /// Remove this rank's epochs older than the newest `keep` up to this
    /// committed one (requests coalesce: only the newest matters).
    prune: Option<(u32, u64)>,
    /// A removal is queued or running.
    pruning: bool,
    /// Rollbacks so far.
    rollbacks: u64,
    closed: bool,
}

enum Task {
    Copy(Job),
    Prune(u32, u64),
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when a job is queued or the flusher closes.
    work: Condvar,
    /// Signalled when a job is taken or finishes.
    idle: Condvar,
}

/// Copies that may wait behind the one running before `submit` blocks.
const MAX_QUEUED: usize = 2;

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next task for the thread (copies first); `None` once closed.
    fn next_task(&self) -> Option<Task> {
        let mut st = self.lock();
        loop {
            if let Some(job) = st.queue.pop_front() {
                self.idle.notify_all();
                return Some(Task::Copy(job));
            }
            if let Some((rank, upto)) = st.prune.take() {
                return Some(Task::Prune(rank, upto));
            }
            if st.closed {
                return None;
            }
            st = self.work.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn copied(&self, job: &Job, r: std::io::Result<u64>) {
        let mut st = self.lock();
        st.status.pending -= 1;
        match r {
            Ok(_) if job.rollbacks == st.rollbacks => {
                let f = &mut st.status.flushed;
                *f = Some(f.map_or(job.epoch, |f| f.max(job.epoch)));
            }
            Ok(_) => {}
            Err(e) => st.status.errors.push((
                job.epoch,
                format!("{} -> {}: {e}", job.from_path.display(), job.to.display()),
            )),
        }
        self.idle.notify_all();
    }

    fn pruned(&self, r: std::io::Result<()>) {
        let mut st = self.lock();
        if let Err(e) = r {
            st.status.prune_errors.push(e.to_string());
        }
        st.pruning = st.prune.is_some();
        self.idle.notify_all();
    }
}

/// A directory level and its background thread, which removes old epochs
/// there and (for a durable level) copies checkpoint files to it. The
/// thread starts with the first task: a node-local level whose old files
/// are all parked for reuse (`prune_quick`) never needs it, and a process
/// has one thread less to wake at every checkpoint (and to end when it
/// dies, which is on the way to detecting the failure).
pub struct Flusher {
    level: Arc<DirLevel>,
    shared: Arc<Shared>,
    delay: Option<std::time::Duration>,
    /// `None` inside: the thread could not be started.
    thread: OnceLock<Option<JoinHandle<()>>>,
}

/// Copies `from` to `to` durably: temporary name, fsync, rename, fsync of
/// the directory. The source is mapped, verified in place when `verify`,
/// and written from the mapping with direct I/O where the target file
/// system allows it: the device then takes the bytes straight from the
/// fast level's pages, without a copy through the page cache and without
/// writeback work competing with the application for the CPU. `reuse`: an
/// old file of the level to overwrite instead of a new one (no blocks to
/// allocate, none to free and discard).
fn copy_durably(
    src: &File,
    to: &std::path::Path,
    verify: bool,
    reuse: &[PathBuf],
) -> std::io::Result<u64> {
    let dir = to.parent().unwrap_or(std::path::Path::new("."));
    mpistages_sys::file::create_private_dir(dir)?;
    let mut tmp_name = to.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".flush.{}", std::process::id()));
    let tmp = to.with_file_name(tmp_name);
    let result = (|| {
        let len = src.metadata()?.len();
        // SAFETY: read-only and private to this call. Files on the fast
        // level are written under a temporary name and renamed into place,
        // and overwritten for reuse only under an exclusive lock, which the
        // shared one `src` holds (`open_locked`) excludes; unlinking it (an
        // old epoch's removal) keeps the mapping valid.
        let map = match len {
            0 => None,
            // SAFETY: as explained above: the file is not truncated or rewritten while mapped.
            _ => Some(unsafe { memmap2::Mmap::map(src)? }),
        };
        let bytes: &[u8] = map.as_deref().unwrap_or(&[]);
        if verify {
            super::format::verify(bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        }
        let out = match super::format::take_for_reuse(reuse, &tmp) {
            Some(f) => f,
            None => mpistages_sys::file::create_private(&tmp)?,
        };
        write_direct_if_possible(&out, bytes)?;
        if out.metadata()?.len() != len {
            out.set_len(len)?;
        }
        out.sync_all()?;
        // A reused file is locked: readers may have it once it is renamed.
        crate::sys::unlock(std::os::fd::AsRawFd::as_raw_fd(&out));
        drop(out);
        std::fs::rename(&tmp, to)?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(len)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Direct I/O needs offsets, lengths and memory aligned to the device's
/// block size; 4 KiB covers every common device (and the mapping is page
/// aligned).
const DIRECT_ALIGN: usize = 4096;
const DIRECT_CHUNK: usize = 4 << 20;

/// Writes `bytes` at the start of `out`: the block-aligned bulk with
/// direct I/O when the file system accepts it, the rest (or everything,
/// when it does not) through the page cache.
fn write_direct_if_possible(out: &std::fs::File, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    let aligned = bytes.len() / DIRECT_ALIGN * DIRECT_ALIGN;
    let mut done = 0;
    if aligned > 0
        && (bytes.as_ptr() as usize).is_multiple_of(DIRECT_ALIGN)
        && crate::sys::set_direct_io(out.as_raw_fd(), true).is_ok()
    {
        while done < aligned {
            let n = (aligned - done).min(DIRECT_CHUNK);
            match out.write_at(&bytes[done..done + n], done as u64) {
                // A short direct write ends on a block boundary only by
                // chance: finish through the page cache.
                Ok(k) if k > 0 && k % DIRECT_ALIGN == 0 => done += k,
                Ok(_) => break,
                // The device wants a larger alignment than DIRECT_ALIGN.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        crate::sys::set_direct_io(out.as_raw_fd(), false)?;
    }
    out.write_all_at(&bytes[done..], done as u64)
}

impl Flusher {
    /// A flusher to `level` (whose files it writes and removes).
    pub fn new(level: DirLevel) -> Flusher {
        // A simulated slow durable file system (for tests of what waits
        // for flushes): each copy starts this much later.
        let delay = std::env::var("MPISTAGES_FLUSH_DELAY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(std::time::Duration::from_millis);
        Flusher::with_delay(level, delay)
    }

    fn with_delay(level: DirLevel, delay: Option<std::time::Duration>) -> Flusher {
        Flusher {
            level: Arc::new(level),
            shared: Arc::new(Shared::default()),
            delay,
            thread: OnceLock::new(),
        }
    }

    /// Starts the thread if it is not running yet; false if it cannot run.
    fn running(&self) -> bool {
        self.thread
            .get_or_init(|| {
                let (s, l, delay) = (self.shared.clone(), self.level.clone(), self.delay);
                std::thread::Builder::new()
                    .name("mpistages-flush".into())
                    .spawn(move || {
                        while let Some(task) = s.next_task() {
                            match task {
                                Task::Prune(rank, upto) => s.pruned(l.commit(rank, upto)),
                                Task::Copy(job) => {
                                    if let Some(d) = delay {
                                        std::thread::sleep(d);
                                    }
                                    let reuse = l.parked(job.rank);
                                    let r = copy_durably(&job.from, &job.to, job.verify, &reuse);
                                    s.copied(&job, r);
                                }
                            }
                        }
                    })
                    .ok()
            })
            .is_some()
    }

    /// Whether the thread was ever started (for tests).
    pub fn started(&self) -> bool {
        self.thread.get().is_some()
    }

    /// The directory level this flusher works on.
    pub fn level(&self) -> &DirLevel {
        &self.level
    }

    /// Queues a copy of `from` to this level as `rank`'s file of `epoch`
    /// and returns (after opening `from`), unless `MAX_QUEUED` copies are
    /// waiting already: then it first waits for one of them to start. With
    /// `verify`, `from` is a checkpoint file whose checksums must hold.
    pub fn submit(&self, epoch: u64, rank: u32, from: PathBuf, verify: bool) {
        let to = self.level.path(epoch, rank);
        let opened = super::format::open_locked(&from);
        let mut st = self.shared.lock();
        let job = match (opened, self.running()) {
            (Ok(file), true) => Job {
                epoch,
                rollbacks: st.rollbacks,
                from: file,
                from_path: from,
                rank,
                to,
                verify,
            },
            (Err(e), _) => {
                st.status
                    .errors
                    .push((epoch, format!("{}: {e}", from.display())));
                return;
            }
            (_, false) => {
                st.status
                    .errors
                    .push((epoch, "the flush thread is not running".into()));
                return;
            }
        };
        if st.queue.len() >= MAX_QUEUED {
            let waited = std::time::Instant::now();
            while st.queue.len() >= MAX_QUEUED {
                st = self.shared.idle.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            st.status.stalled += waited.elapsed();
        }
        st.status.pending += 1;
        st.queue.push_back(job);
        self.shared.work.notify_one();
    }

    /// `prune` for a node-local level: the usual case, one old file to park
    /// for reuse (a link and an unlink of a name), is done at once, unless
    /// the thread is pruning already; anything more goes to the thread.
    pub fn prune_quick(&self, rank: u32, committed: u64) {
        let busy = self.shared.lock().pruning;
        if busy || !matches!(self.level.commit_quick(rank, committed), Ok(true)) {
            self.prune(rank, committed);
        }
    }

    /// Queues the removal of this rank's epochs that `committed` makes
    /// obsolete on the level (see `DirLevel::commit`); returns at once.
    pub fn prune(&self, rank: u32, committed: u64) {
        if !self.running() {
            if let Err(e) = self.level.commit(rank, committed) {
                self.shared.lock().status.prune_errors.push(e.to_string());
            }
            return;
        }
        let mut st = self.shared.lock();
        let upto = st.prune.map_or(committed, |(_, u)| u.max(committed));
        st.prune = Some((rank, upto));
        st.pruning = true;
        self.shared.work.notify_one();
    }

    /// The job rolled back to `epoch`: copies of later epochs (done, or
    /// still to come from the abandoned run) are not durable epochs of the
    /// job any more.
    pub fn rolled_back(&self, epoch: u64) {
        let mut st = self.shared.lock();
        st.rollbacks += 1;
        if st.status.flushed.is_some_and(|f| f > epoch) {
            st.status.flushed = None;
        }
    }

    pub fn status(&self) -> FlushStatus {
        self.shared.lock().status.clone()
    }

    /// Writes a checkpoint to this level at once (no faster level holds a
    /// copy to flush from), differential where `diff` says; once written
    /// it counts as flushed.
    pub fn write_now<S: super::format::AsSection>(
        &self,
        who: &super::format::Identity,
        sections: &[S],
        compression: super::format::Compression,
        diff: Option<&super::diff::Plan>,
    ) -> std::io::Result<super::format::WriteStats> {
        let stats = self.level.write_diff(who, sections, compression, diff)?;
        let mut st = self.shared.lock();
        let f = &mut st.status.flushed;
        *f = Some(f.map_or(who.epoch, |f| f.max(who.epoch)));
        Ok(stats)
    }

    /// `status().flushed`, without copying the error lists.
    pub fn flushed(&self) -> Option<u64> {
        self.shared.lock().status.flushed
    }

    /// Blocks until every queued copy and removal has finished (or failed).
    pub fn wait_idle(&self) -> FlushStatus {
        let mut st = self.shared.lock();
        while st.status.pending > 0 || st.pruning {
            st = self.shared.idle.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.status.clone()
    }
}

impl Drop for Flusher {
    /// Finishes queued copies, then stops the thread.
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_all();
        if let Some(Some(t)) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::testutil::Scratch;

    /// A scratch directory with a `fast/` level, and a flusher to its
    /// `durable/` level that starts each copy 100 ms late.
    fn slow_flusher(tag: &str) -> (Scratch, Flusher) {
        let s = Scratch::new(tag);
        std::fs::create_dir_all(s.0.join("fast")).unwrap();
        let level = DirLevel::new(s.0.join("durable"), true, 2);
        let f = Flusher::with_delay(level, Some(std::time::Duration::from_millis(100)));
        (s, f)
    }

    fn durable(s: &Scratch, e: u64) -> PathBuf {
        s.0.join(format!("durable/epoch-{e}/rank-0.ckpt"))
    }

    #[test]
    fn copies_complete_in_the_background_and_errors_are_kept() {
        let s = Scratch::new("flush");
        std::fs::create_dir_all(s.0.join("fast")).unwrap();
        let f = Flusher::new(DirLevel::new(s.0.join("durable"), true, 2));
        for e in 1..=3u64 {
            let src = s.0.join(format!("fast/{e}"));
            std::fs::write(&src, vec![e as u8; 100_000]).unwrap();
            f.submit(e, 0, src, false);
        }
        // A source that does not exist: reported, not fatal.
        f.submit(4, 0, s.0.join("fast/missing"), false);
        // A checkpoint that fails its checksums is not made durable.
        std::fs::write(s.0.join("fast/5"), b"MPISTGCKnot really").unwrap();
        f.submit(5, 0, s.0.join("fast/5"), true);
        let st = f.wait_idle();
        assert_eq!(st.pending, 0);
        assert_eq!(st.flushed, Some(3));
        assert_eq!(st.errors.len(), 2, "{st:?}");
        assert_eq!(st.errors[0].0, 4);
        assert_eq!(st.errors[1].0, 5);
        assert!(!durable(&s, 5).exists());
        for e in 1..=3u64 {
            assert_eq!(
                std::fs::read(durable(&s, e)).unwrap(),
                vec![e as u8; 100_000]
            );
        }
        let leftovers: Vec<_> = std::fs::read_dir(s.0.join("durable/epoch-5"))
            .unwrap()
            .collect();
        assert!(leftovers.is_empty(), "temporary file left: {leftovers:?}");
    }

    /// On a slow durable level: every copy is made, in order, also when
    /// its source was removed from the fast level after it was queued (an
    /// old epoch's removal); beyond `MAX_QUEUED` waiting copies, `submit`
    /// waits, and the wait is counted. Sizes above 4 KiB that are not a
    /// multiple of it take both the direct and the buffered path.
    #[test]
    fn a_slow_level_copies_every_epoch_and_counts_the_wait() {
        let (s, f) = slow_flusher("flush-slow");
        let data = |e: u64| -> Vec<u8> { (0..50_001u32).map(|i| (i as u64 * e) as u8).collect() };
        let n = MAX_QUEUED as u64 + 3;
        for e in 1..=n {
            let src = s.0.join(format!("fast/{e}"));
            std::fs::write(&src, data(e)).unwrap();
            f.submit(e, 0, src.clone(), false);
            std::fs::remove_file(&src).unwrap();
        }
        let st = f.wait_idle();
        assert_eq!(st.flushed, Some(n));
        assert!(st.errors.is_empty(), "{st:?}");
        assert!(
            st.stalled >= std::time::Duration::from_millis(100),
            "{st:?}"
        );
        for e in 1..=n {
            assert_eq!(std::fs::read(durable(&s, e)).unwrap(), data(e));
        }
    }

    /// A copy overwrites an old file the level parked, cut to its length.
    #[test]
    fn a_copy_reuses_a_parked_file() {
        let s = Scratch::new("flush-reuse");
        std::fs::create_dir_all(s.0.join("fast")).unwrap();
        let f = Flusher::new(DirLevel::new(s.0.join("durable"), true, 1));
        let src = |e: u64, n: usize| {
            let p = s.0.join(format!("fast/{e}"));
            std::fs::write(&p, vec![e as u8; n]).unwrap();
            p
        };
        f.submit(1, 0, src(1, 100_000), false);
        f.submit(2, 0, src(2, 100_000), false);
        f.wait_idle();
        f.prune(0, 2);
        f.wait_idle();
        assert!(!f.level().parked(0).is_empty(), "epoch 1 parked");
        f.submit(3, 0, src(3, 5_000), false);
        let st = f.wait_idle();
        assert!(st.errors.is_empty(), "{st:?}");
        assert!(f.level().parked(0).is_empty(), "the parked file was used");
        assert_eq!(std::fs::read(durable(&s, 3)).unwrap(), vec![3u8; 5_000]);
    }

    /// After a rollback, copies of later epochs (done, or finishing from
    /// before the rollback) are not durable epochs; new copies are.
    #[test]
    fn a_rollback_forgets_later_durable_epochs() {
        let (s, f) = slow_flusher("flush-rollback");
        let src = |e: u64| {
            let p = s.0.join(format!("fast/{e}"));
            std::fs::write(&p, vec![e as u8; 10_000]).unwrap();
            p
        };
        f.submit(2, 0, src(2), false);
        assert_eq!(f.wait_idle().flushed, Some(2));
        f.rolled_back(1);
        assert_eq!(f.status().flushed, None);
        // Queued before the rollback, done after it: not counted.
        f.submit(3, 0, src(3), false);
        f.rolled_back(1);
        assert_eq!(f.wait_idle().flushed, None);
        f.submit(2, 0, src(2), false);
        assert_eq!(f.wait_idle().flushed, Some(2));
    }
}
