//! Running one job of the campaign: mpiexec under a time limit, with
//! its output kept, and the disturbances a scenario asks for beside it
//! (CPU hogs, a SIGKILL of mpiexec, a rank stopped and continued).

use mpistages_sys::process::signal;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A rank paused with SIGSTOP: which, when and for how long (then SIGCONT).
#[derive(Clone, Copy)]
pub(super) struct Stop {
    pub rank: usize,
    pub at: Duration,
    pub length: Duration,
}

/// Two threads that keep the machine's cores busy while they live.
pub(super) struct Hogs(Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>);

impl Hogs {
    pub(super) fn start(n: usize) -> Hogs {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Hogs(stop, threads)
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        for t in self.1.drain(..) {
            let _ = t.join();
        }
    }
}

/// What one job did.
pub(super) struct Outcome {
    pub(super) code: Option<i32>,
    pub(super) signal: Option<i32>,
    pub(super) timed_out: bool,
    pub(super) wall: f64,
    pub(super) stdout: String,
    pub(super) stderr: String,
    /// Scenario::Mpiexec: how long its ranks outlived it (None: some were
    /// still there after 5 s, and were killed by the campaign).
    pub(super) ranks_gone_after: Option<Duration>,
}

/// Direct children of `pid`.
fn children(pid: u32) -> Vec<i32> {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) else {
        return Vec::new();
    };
    s.split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn alive(pid: i32) -> bool {
    // Zombies count as gone: their parent (mpiexec, now dead) is not there
    // to reap them, init does.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let after = &s[s.rfind(')').unwrap_or(0) + 1..];
        !after.trim_start().starts_with('Z')
    })
}

/// Scenario::Stop under way: the stopped process, until it is continued.
#[derive(Default)]
struct Paused {
    pid: Option<i32>,
    done: bool,
}

impl Paused {
    /// At `elapsed` into the job: stops the rank when its time comes, and
    /// continues it `length` later.
    fn step(&mut self, mpiexec: u32, s: Stop, elapsed: Duration) {
        if self.done || elapsed < s.at {
            return;
        }
        match self.pid {
            None => match rank_pid(mpiexec, s.rank) {
                Some(p) => {
                    signal(p, libc::SIGSTOP);
                    self.pid = Some(p);
                }
                // Gone (the job ended, or the rank is being replaced).
                None => self.done = true,
            },
            Some(_) if elapsed >= s.at + s.length => self.resume(),
            Some(_) => {}
        }
    }

    fn resume(&mut self) {
        if let Some(p) = self.pid.take() {
            signal(p, libc::SIGCONT);
        }
        self.done = true;
    }
}

/// The process of `rank` among mpiexec's children (by its environment).
fn rank_pid(mpiexec: u32, rank: usize) -> Option<i32> {
    let want = format!("MPISTAGES_RANK={rank}");
    children(mpiexec).into_iter().find(|&p| {
        std::fs::read(format!("/proc/{p}/environ"))
            .is_ok_and(|e| e.split(|&b| b == 0).any(|kv| kv == want.as_bytes()))
    })
}

/// Runs `mpiexec` with `args` in directory `cwd` (where a program that
/// writes into its current directory writes).
pub(super) fn job(
    mpiexec: &Path,
    cwd: &Path,
    args: &[String],
    env: &[(&str, String)],
    limit: Duration,
    kill_mpiexec: Option<Duration>,
    stop: Option<Stop>,
) -> Result<Outcome, String> {
    let t0 = Instant::now();
    let mut child = crate::interrupt::spawn_job(
        Command::new(mpiexec)
            .current_dir(cwd)
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .map_err(|e| format!("starting {}: {e}", mpiexec.display()))?;
    let read = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = read(child.stdout.take().map(|s| Box::new(s) as _));
    let err = read(child.stderr.take().map(|s| Box::new(s) as _));
    let pid = child.id();
    let mut timed_out = false;
    let mut ranks_gone_after = None;
    let mut paused = Paused::default();
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            break st;
        }
        if let Some(s) = stop {
            paused.step(pid, s, t0.elapsed());
        }
        if let Some(at) = kill_mpiexec {
            if t0.elapsed() >= at {
                let ranks = children(pid);
                signal(pid as i32, libc::SIGKILL);
                let st = child.wait().map_err(|e| e.to_string())?;
                let killed = Instant::now();
                while ranks.iter().any(|&r| alive(r)) && killed.elapsed() < Duration::from_secs(5) {
                    std::thread::sleep(Duration::from_millis(2));
                }
                if ranks.iter().any(|&r| alive(r)) {
                    for &r in &ranks {
                        signal(r, libc::SIGKILL);
                    }
                } else {
                    ranks_gone_after = Some(killed.elapsed());
                }
                break st;
            }
        }
        if t0.elapsed() > limit {
            timed_out = true;
            // mpiexec takes its ranks down on SIGTERM; then it is killed.
            signal(pid as i32, libc::SIGTERM);
            let grace = Instant::now();
            while child.try_wait().map_err(|e| e.to_string())?.is_none() {
                if grace.elapsed() > Duration::from_secs(10) {
                    for r in children(pid) {
                        signal(r, libc::SIGKILL);
                    }
                    signal(pid as i32, libc::SIGKILL);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            break child.wait().map_err(|e| e.to_string())?;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    paused.resume();
    use std::os::unix::process::ExitStatusExt;
    Ok(Outcome {
        code: status.code(),
        signal: status.signal(),
        timed_out,
        wall: t0.elapsed().as_secs_f64(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        ranks_gone_after,
    })
}
