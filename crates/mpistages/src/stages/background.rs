//! The threads that finish a checkpoint while the application goes on:
//! one writes the directory levels of an epoch from its copy in memory
//! (`write_later`), one computes the parity a rank holds for its set
//! (`hold_later`); each reports the epoch to mpiexec once its part is
//! done. `settle` takes their results back before anything that needs
//! them (the next checkpoint, a rollback, `MPI_Finalize`).

use super::*;

impl Stages {
    /// Writes the directory levels of `w`'s epoch on a thread of its own
    /// (while the application goes on), which then reports the epoch to
    /// mpiexec through `client`: it commits only once its files are
    /// written. Without a thread, here and now.
    pub fn write_later(&mut self, w: LevelWrites, client: Arc<Client>) {
        self.settle();
        let epoch = w.epoch();
        // Handed over once the thread runs: without a thread, `w` and
        // `client` are still here for the call to write and report.
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("mpistages-ckpt".into())
            .spawn(move || {
                // Background work: the program's threads come first.
                crate::sys::process::lower_this_thread(10);
                let Ok((w, client)): Result<(LevelWrites, Arc<Client>), _> = rx.recv() else {
                    return None;
                };
                Some(write_and_report(w, &client))
            });
        match thread {
            Ok(t) => {
                let _ = tx.send((w, client));
                self.writing = Some(t);
            }
            Err(e) => {
                log::warn!(
                    "mpistages: warning: no thread to write epoch {epoch}: {e}; written now"
                );
                // The caller leaves the report to this call, as to the thread.
                let done = write_and_report(w, &client);
                for w in self.store.finish(done) {
                    log::warn!("mpistages: warning: {w}");
                }
            }
        }
    }

    /// Holds, once `compute` has made them on a thread of its own (while
    /// the application goes on), the bytes this rank keeps of `epoch` for
    /// others; written to node-local storage by that thread too. The same
    /// thread then reports `epoch` to mpiexec through `client`: this
    /// rank's part of an epoch is complete only once the parity it holds
    /// for its set is, so no epoch commits before every member of a set
    /// holds its parity (a relaunch after a commit finds it on disk).
    pub fn hold_later(
        &mut self,
        epoch: u64,
        own: usize,
        compute: impl FnOnce() -> Result<Vec<u8>, String> + Send + 'static,
        client: Arc<Client>,
    ) {
        self.settle();
        let files = self.store.held_files();
        let holder = self.store.rank();
        let durable = self.store.durable();
        let thread = std::thread::Builder::new()
            .name("mpistages-parity".into())
            .spawn(move || {
                let bytes = compute();
                let warning = match (&bytes, &files) {
                    (Ok(b), Some(d)) => crate::checkpoint::store::write_held(d, epoch, holder, b),
                    _ => None,
                };
                if bytes.is_ok() {
                    // A failed send means mpiexec is gone: the application
                    // thread learns it at its next call.
                    let _ = client.send(&ToController::Checkpoint { epoch, durable });
                }
                (bytes, warning)
            });
        match thread {
            Ok(t) => self.pending = Some((epoch, own, t)),
            Err(e) => {
                log::warn!("mpistages: warning: no thread for the parity of epoch {epoch}: {e}")
            }
        }
    }

    /// Waits for the threads that write the newest epoch's files or make
    /// its parity, if they run, and keeps what they made.
    pub fn settle(&mut self) {
        if let Some(t) = self.writing.take() {
            match t.join() {
                Ok(Some(done)) => {
                    for w in self.store.finish(done) {
                        log::warn!("mpistages: warning: {w}");
                    }
                    let flushes = self.store.flush_status();
                    self.report_flush_errors(flushes);
                }
                _ => log::warn!("mpistages: warning: the thread writing a checkpoint failed"),
            }
        }
        let Some((epoch, own, thread)) = self.pending.take() else {
            return;
        };
        match thread.join() {
            Ok((Ok(bytes), warning)) => {
                if let Some(w) = warning {
                    log::warn!("mpistages: warning: {w}");
                }
                self.store.keep_held(epoch, bytes, own);
            }
            Ok((Err(why), _)) => {
                log::warn!("mpistages: warning: the parity of epoch {epoch} was not made: {why}")
            }
            Err(_) => log::warn!("mpistages: warning: the parity thread of epoch {epoch} failed"),
        }
    }
}

/// Writes `w`'s files, then reports its epoch to mpiexec if this rank holds
/// it (its copy in memory is whole). A failed send means mpiexec is gone:
/// the application thread learns it at its next call.
fn write_and_report(w: LevelWrites, client: &Client) -> LevelsWritten {
    let epoch = w.epoch();
    let done = w.run();
    if done.held {
        let _ = client.send(&ToController::Checkpoint {
            epoch,
            durable: done.durable,
        });
    }
    done
}
