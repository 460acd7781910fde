//! Deaths seen before the kernel's teardown: a thread per local process
//! waits on its liveness page (`sys::liveness`) and queues the pid of one
//! that died for the event loop, which fails the rank at once instead of
//! at `SIGCHLD` (after the dead process's memory was freed: 100 ms and more
//! with GiBs of it). The exit status is still collected at `SIGCHLD`.
//!
//! Used where the failure is recovered with the job going on (stages,
//! reinit, ulfm); without recovery the job ends with the status the exit
//! gives, and `cpr` relaunches only once every old process has gone.

use super::Job;
use crate::agent::RankProc;
use crate::cli::RecoveryMode;
use mpistages_sys::eventfd::EventFd;
use mpistages_sys::liveness::Ended;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(super) const TOKEN_DEATHS: u64 = 5;

/// How often a watcher looks whether its process was reaped first.
const POLL: Duration = Duration::from_millis(250);

/// The pids the watchers saw die, and the doorbell of the event loop.
pub(super) struct Deaths {
    pids: Mutex<Vec<i32>>,
    pub bell: EventFd,
}

impl Deaths {
    pub fn new() -> std::io::Result<Arc<Deaths>> {
        Ok(Arc::new(Deaths {
            pids: Mutex::new(Vec::new()),
            bell: EventFd::new()?,
        }))
    }
}

/// Whether this recovery mode acts on an early death.
pub(super) fn wanted(mode: RecoveryMode) -> bool {
    matches!(
        mode,
        RecoveryMode::Stages | RecoveryMode::Reinit | RecoveryMode::Ulfm
    )
}

/// Starts the watcher of process `p` (none for a process without a page).
pub(super) fn watch(deaths: &Arc<Deaths>, p: &RankProc) {
    let Some(page) = p.liveness.clone() else {
        return;
    };
    let (deaths, stop, pid) = (deaths.clone(), p.watch_stop.clone(), p.pid);
    let started = std::thread::Builder::new()
        .name(format!("watch-{pid}"))
        .stack_size(64 << 10)
        .spawn(move || {
            if page.watch(&stop, POLL) == Ended::Died {
                deaths
                    .pids
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(pid);
                deaths.bell.ring();
            }
        });
    if let Err(e) = started {
        crate::say!(
            "mpiexec: cannot watch process {pid} ({e}); its failure is seen when it has ended"
        );
    }
}

impl Job {
    /// The event loop's part: fails the ranks whose process died.
    pub(super) fn on_deaths(&mut self) {
        self.deaths.bell.drain();
        let pids = std::mem::take(&mut *self.deaths.pids.lock().unwrap_or_else(|p| p.into_inner()));
        for pid in pids {
            let Some(r) = self.ranks.iter().position(|r| {
                r.exit.is_none()
                    && !r.seen_dead
                    && r.proc
                        .as_ref()
                        .is_some_and(|p| p.remote.is_none() && p.pid == pid)
            }) else {
                continue;
            };
            self.ranks[r].seen_dead = true;
            self.process_ended(
                r,
                mpistages_sys::process::Exit::Signal(libc::SIGKILL),
                Some("died (its liveness lock was freed as the kernel tore it down)".into()),
            );
        }
    }
}
