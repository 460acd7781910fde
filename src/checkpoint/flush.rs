//! Background flush of checkpoint files to a durable level: a thread copies
//! a file already written on a fast level (tmpfs) to the durable directory
//! (temporary name, fsync, rename, fsync of the directory), so the
//! application never waits for the slow file system. Completion and errors
//! are tracked and can be waited for. A checkpoint file is verified
//! (every checksum) before it takes its final name on the durable level, so
//! a copy that rotted on the fast level is never made durable.

use std::path::PathBuf;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

struct Job {
    epoch: u64,
    from: PathBuf,
    to: PathBuf,
    /// The file is a checkpoint: verify the copy before renaming it.
    verify: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlushStatus {
    /// Newest epoch whose file is durable on the target level.
    pub flushed: Option<u64>,
    /// Jobs submitted and not finished yet.
    pub pending: usize,
    /// Failures so far (epoch and reason), oldest first.
    pub errors: Vec<(u64, String)>,
}

struct Shared {
    status: Mutex<FlushStatus>,
    idle: Condvar,
}

pub struct Flusher {
    tx: Option<Sender<Job>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

fn copy_durably(
    from: &std::path::Path,
    to: &std::path::Path,
    verify: bool,
) -> std::io::Result<u64> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = to.parent().unwrap_or(std::path::Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut tmp_name = to.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".flush.{}", std::process::id()));
    let tmp = to.with_file_name(tmp_name);
    let result = (|| {
        let n = std::fs::copy(from, &tmp)?;
        if verify {
            super::format::read(&tmp, None)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        }
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, to)?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(n)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

impl Flusher {
    pub fn new() -> Flusher {
        let (tx, rx) = channel::<Job>();
        let shared = Arc::new(Shared {
            status: Mutex::new(FlushStatus::default()),
            idle: Condvar::new(),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("mpistages-flush".into())
            .spawn(move || {
                for job in rx {
                    let r = copy_durably(&job.from, &job.to, job.verify);
                    let mut st = s.status.lock().unwrap_or_else(|p| p.into_inner());
                    st.pending -= 1;
                    match r {
                        Ok(_) => {
                            st.flushed = Some(st.flushed.map_or(job.epoch, |f| f.max(job.epoch)))
                        }
                        Err(e) => st.errors.push((
                            job.epoch,
                            format!("{} -> {}: {e}", job.from.display(), job.to.display()),
                        )),
                    }
                    s.idle.notify_all();
                }
            })
            .ok();
        Flusher {
            tx: Some(tx),
            shared,
            thread,
        }
    }

    /// Queues a copy of `from` to `to` for `epoch`; returns at once.
    /// With `verify`, `from` is a checkpoint file whose checksums must hold.
    pub fn submit(&self, epoch: u64, from: PathBuf, to: PathBuf, verify: bool) {
        self.shared
            .status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pending += 1;
        let sent = self.tx.as_ref().is_some_and(|tx| {
            tx.send(Job {
                epoch,
                from,
                to,
                verify,
            })
            .is_ok()
        });
        if !sent {
            let mut st = self.shared.status.lock().unwrap_or_else(|p| p.into_inner());
            st.pending -= 1;
            st.errors
                .push((epoch, "the flush thread is not running".into()));
        }
    }

    pub fn status(&self) -> FlushStatus {
        self.shared
            .status
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Blocks until every submitted copy has finished (or failed).
    pub fn wait_idle(&self) -> FlushStatus {
        let mut st = self.shared.status.lock().unwrap_or_else(|p| p.into_inner());
        while st.pending > 0 {
            st = self.shared.idle.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.clone()
    }
}

impl Default for Flusher {
    fn default() -> Self {
        Flusher::new()
    }
}

impl Drop for Flusher {
    /// Finishes queued copies, then stops the thread.
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::testutil::Scratch;

    #[test]
    fn copies_complete_in_the_background_and_errors_are_kept() {
        let s = Scratch::new("flush");
        std::fs::create_dir_all(s.0.join("fast")).unwrap();
        let f = Flusher::new();
        for e in 1..=3u64 {
            let src = s.0.join(format!("fast/{e}"));
            std::fs::write(&src, vec![e as u8; 100_000]).unwrap();
            f.submit(
                e,
                src,
                s.0.join(format!("durable/epoch-{e}/rank-0.ckpt")),
                false,
            );
        }
        // A source that does not exist: reported, not fatal.
        f.submit(
            4,
            s.0.join("fast/missing"),
            s.0.join("durable/epoch-4/rank-0.ckpt"),
            false,
        );
        // A checkpoint that fails its checksums is not made durable.
        std::fs::write(s.0.join("fast/5"), b"MPISTGCKnot really").unwrap();
        f.submit(
            5,
            s.0.join("fast/5"),
            s.0.join("durable/epoch-5/rank-0.ckpt"),
            true,
        );
        let st = f.wait_idle();
        assert_eq!(st.pending, 0);
        assert_eq!(st.flushed, Some(3));
        assert_eq!(st.errors.len(), 2, "{st:?}");
        assert_eq!(st.errors[0].0, 4);
        assert_eq!(st.errors[1].0, 5);
        assert!(!s.0.join("durable/epoch-5/rank-0.ckpt").exists());
        for e in 1..=3u64 {
            let got = std::fs::read(s.0.join(format!("durable/epoch-{e}/rank-0.ckpt"))).unwrap();
            assert_eq!(got, vec![e as u8; 100_000]);
        }
        let leftovers: Vec<_> = std::fs::read_dir(s.0.join("durable/epoch-4"))
            .unwrap()
            .collect();
        assert!(leftovers.is_empty(), "temporary file left: {leftovers:?}");
    }
}
