//! Ending `mpistages-bench` cleanly on SIGINT, SIGTERM or SIGHUP: the
//! jobs it started are told to end (their `mpiexec` tears the ranks down
//! and removes the job's files), its scratch directories are removed, and
//! it exits as the signal asks. Without this, a Ctrl-C left
//! `/dev/shm/mpistages-soak-PID` and `/tmp/mpistages-soak-PID` behind.

use mpistages_sys::process::{self, SignalFd};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static JOBS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// A signal came: the watcher ends the program (jobs and errors that
/// follow from the interruption are not worth reporting).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static SCRATCH: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// How long a job's `mpiexec` gets to end its ranks and clean up.
const GRACE: Duration = Duration::from_secs(5);

/// Call first in `main`, before any thread starts (they inherit the
/// blocked signals; the watcher hears them through a signalfd).
pub fn install() {
    let Ok(fd) = SignalFd::new(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        let sig = fd.wait();
        INTERRUPTED.store(true, Ordering::SeqCst);
        let jobs: Vec<i32> = JOBS.lock().map(|j| j.clone()).unwrap_or_default();
        for &pid in &jobs {
            process::signal(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + GRACE;
        while !jobs.iter().all(|&pid| process::ended(pid)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        for &pid in &jobs {
            process::signal(pid, libc::SIGKILL);
        }
        for dir in SCRATCH.lock().map(|s| s.clone()).unwrap_or_default() {
            let _ = std::fs::remove_dir_all(dir);
        }
        eprintln!(
            "mpistages-bench: caught {}; jobs ended, scratch removed",
            process::signal_name(sig)
        );
        std::process::exit(128 + sig);
    });
}

/// Ends the program with `code`, unless a signal came: then the watcher
/// ends it once the jobs are gone and the scratch removed.
pub fn exit(code: i32) -> ! {
    while INTERRUPTED.load(Ordering::SeqCst) {
        std::thread::park();
    }
    std::process::exit(code)
}

/// Prints an error of the program's work, unless it came from an
/// interruption.
pub fn report(message: &str) {
    if !INTERRUPTED.load(Ordering::SeqCst) {
        eprintln!("{message}");
    }
}

/// Starts a job (an `mpiexec`), which is ended with this program.
pub fn spawn_job(cmd: &mut Command) -> std::io::Result<Job> {
    process::start_unblocked(cmd);
    let child = cmd.spawn()?;
    if let Ok(mut j) = JOBS.lock() {
        j.push(child.id() as i32);
    }
    Ok(Job(child))
}

/// A job started by `spawn_job`; forgotten when dropped.
pub struct Job(Child);

impl std::ops::Deref for Job {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Job {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let pid = self.0.id() as i32;
        if let Ok(mut j) = JOBS.lock() {
            j.retain(|&p| p != pid);
        }
    }
}

/// A scratch directory, removed when dropped and when this program is
/// interrupted.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(dir: PathBuf) -> Scratch {
        if let Ok(mut s) = SCRATCH.lock() {
            s.push(dir.clone());
        }
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        if let Ok(mut s) = SCRATCH.lock() {
            s.retain(|d| d != &self.0);
        }
    }
}
