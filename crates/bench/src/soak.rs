//! `mpistages-bench soak`: many recoveries in one job. The stencil runs at
//! 4 ranks under `--recovery stages`; rank 3 is killed again and again (each
//! replacement on entering its Nth `MPI_Allreduce`), and rank 0, which
//! survives every recovery, and `mpiexec` are measured after the first few
//! recoveries and after the last: open descriptors, threads, resident
//! memory. The job must end with the failure-free checksum, and nothing may
//! be left in its checkpoint root.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const USAGE: &str = "\
usage: mpistages-bench soak [options]

One stencil2d job at 4 ranks under --recovery stages with N recoveries
(rank 3 killed again and again); prints rank 0's and mpiexec's open
descriptors, threads and memory after the first recoveries and after the
last, and checks the result and that nothing is left behind. Options:
  --recoveries N   how many (default 200)
  --examples DIR   the examples' sources (default: the checkout's examples/)
";

/// What /proc says of a process.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    pub fds: usize,
    pub threads: usize,
    pub rss_kb: u64,
    /// The threads' names, sorted. A leak of threads shows as a name that
    /// repeats; a thread started once when first needed (the checkpoint
    /// flusher) as a new name.
    pub thread_names: Vec<String>,
}

pub fn usage_of(pid: u32) -> Option<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
    };
    let mut thread_names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|n| n.trim_end().to_string())
        .collect();
    thread_names.sort();
    Some(Usage {
        fds: std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count(),
        threads: field("Threads:")? as usize,
        rss_kb: field("VmRSS:")?,
        thread_names,
    })
}

/// What ten looks at a process over half a second saw: the least and the
/// most of its descriptors, threads (the checkpoint flusher's thread
/// apart: it starts once, when first needed) and resident memory. A
/// descriptor, thread or ring being made or let go at one instant (a
/// connection to the newest replacement, a checkpoint file open, a spare
/// starting) moves some looks; a leak moves all of them. (The early looks
/// are taken while rank 3 keeps failing, so its connection and its 512 KB
/// of shared-memory rings come and go between them.)
#[derive(Clone, Debug, Default)]
pub struct Window {
    pub fds: (usize, usize),
    pub threads: (usize, usize),
    /// The most flusher threads one look saw.
    pub flushers: usize,
    pub rss_kb: (u64, u64),
    pub thread_names: Vec<String>,
}

const FLUSHER: &str = "mpistages-flush";

impl Window {
    fn of(looks: &[Usage]) -> Window {
        let own = |u: &Usage| u.thread_names.iter().filter(|n| *n != FLUSHER).count();
        let range = |f: &dyn Fn(&Usage) -> usize| {
            let v = looks.iter().map(f);
            (v.clone().min().unwrap_or(0), v.max().unwrap_or(0))
        };
        Window {
            fds: range(&|u| u.fds),
            threads: range(&own),
            flushers: looks
                .iter()
                .map(|u| u.thread_names.iter().filter(|n| *n == FLUSHER).count())
                .max()
                .unwrap_or(0),
            rss_kb: (
                looks.iter().map(|u| u.rss_kb).min().unwrap_or(0),
                looks.iter().map(|u| u.rss_kb).max().unwrap_or(0),
            ),
            thread_names: looks
                .last()
                .map(|u| u.thread_names.clone())
                .unwrap_or_default(),
        }
    }
}

/// Whether `end` shows no growth over `early`, `recoveries` later: the
/// fewest descriptors and threads at the end are no more than the most
/// early on, one flusher at most, and the least memory at the end exceeds
/// the most early on by less than 4 KB per recovery.
#[cfg(test)]
fn flat(early: &Window, end: &Window, recoveries: usize) -> bool {
    same_counts(early, end) && same_memory(early, end, recoveries)
}

/// Whether three looks (early, half way, at the end; `spans` recoveries
/// apart) show no leak: descriptors and threads as `flat` says, and
/// memory flat over at least one half. A leak grows over both halves; a
/// buffer that grew once to a new high-water mark (a 136 KB step, at a
/// random recovery, of a stream's buffers beside two CPU hogs) over one.
pub fn steady(looks: &[Window; 3], spans: (usize, usize)) -> bool {
    same_counts(&looks[0], &looks[2])
        && (same_memory(&looks[0], &looks[1], spans.0)
            || same_memory(&looks[1], &looks[2], spans.1))
}

fn same_memory(early: &Window, end: &Window, recoveries: usize) -> bool {
    (end.rss_kb.0 as f64 - early.rss_kb.1 as f64) < 4.0 * recoveries as f64
}

fn same_counts(early: &Window, end: &Window) -> bool {
    // The flusher, once started, keeps one file of its own open (the
    // parked checkpoint file it reuses): when it started after the early
    // look, that descriptor is not a leak.
    let flusher_fds = end.flushers.saturating_sub(early.flushers);
    end.fds.0 <= early.fds.1 + flusher_fds && end.threads.0 <= early.threads.1 && end.flushers <= 1
}

/// The result of a soak.
pub struct Soak {
    pub recoveries: usize,
    /// Rank 0 and mpiexec after `early` recoveries, half way from there,
    /// and at the end.
    pub early: usize,
    pub rank0: [Window; 3],
    pub mpiexec: [Window; 3],
    pub checksum_ok: bool,
    pub left: Vec<String>,
    pub wall: f64,
}

/// Runs the soak: `recoveries` kills of rank 3 in one job of `exe`
/// (stencil2d), measured after `early` recoveries and at the last one.
pub fn soak(mpiexec: &Path, exe: &Path, recoveries: usize, early: usize) -> Result<Soak, String> {
    let root = super::Scratch::new(PathBuf::from(format!(
        "/dev/shm/mpistages-soak-{}",
        std::process::id()
    )));
    let ckpt = format!("mem,tmpfs:{}", root.0.display());
    // 64x64, a checkpoint every 5 iterations; each process of rank 3 dies
    // on entering its 25th Allreduce, so the job moves on by about 20
    // iterations per recovery; after the last one it runs on for a while
    // (about a second here) to be measured.
    let iters = (recoveries * 25 + 30_000).to_string();
    let args = |injects: usize| {
        let mut a: Vec<String> = [
            "-n",
            "4",
            "--recovery",
            "stages",
            "--ckpt",
            &ckpt,
            "--max-restarts",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.push((recoveries + 10).to_string());
        for _ in 0..injects {
            a.push("--inject".into());
            a.push("rank=3,call=MPI_Allreduce:25".into());
        }
        a.push(exe.display().to_string());
        for s in ["64", &iters, "5", "protect"] {
            a.push(s.to_string());
        }
        a
    };
    let reference = super::interrupt::spawn_job(
        Command::new(mpiexec)
            .args(args(0))
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    )
    .and_then(|mut job| {
        let out = std::io::read_to_string(job.stdout.take().expect("piped"));
        job.wait()?;
        out
    })
    .map_err(|e| e.to_string())?;
    let checksum = |out: &str| {
        out.lines()
            .find(|l| l.contains("checksum"))
            .map(str::to_string)
    };
    let expected = checksum(&reference).ok_or("the failure-free run printed no checksum")?;
    let t0 = Instant::now();
    let mut child = super::interrupt::spawn_job(
        Command::new(mpiexec)
            .args(args(recoveries))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .map_err(|e| e.to_string())?;
    let pid = child.id();
    let out = child.stdout.take().expect("piped");
    let out = std::thread::spawn(move || std::io::read_to_string(out).unwrap_or_default());
    let err = std::io::BufReader::new(child.stderr.take().expect("piped"));
    let rank0 = || -> Option<u32> {
        let kids = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
        kids.split_whitespace()
            .filter_map(|k| k.parse().ok())
            .find(|&k: &u32| {
                std::fs::read(format!("/proc/{k}/environ"))
                    .is_ok_and(|e| e.split(|&b| b == 0).any(|kv| kv == b"MPISTAGES_RANK=0"))
            })
    };
    let mut done = 0;
    let mut samples = Vec::new();
    let mut tail = Vec::new();
    for line in err.lines() {
        let line = line.map_err(|e| e.to_string())?;
        if line.contains("mpiexec: recovery ") && line.contains(" done: ") {
            done += 1;
            if done == early || done == (early + recoveries) / 2 || done == recoveries {
                // Let the job settle after the recovery (the new spare
                // starts, the survivors' rollback buffers are let go), then
                // look ten times.
                std::thread::sleep(Duration::from_millis(200));
                let (mut r0, mut me) = (Vec::new(), Vec::new());
                for _ in 0..10 {
                    r0.push(rank0().and_then(usage_of).unwrap_or_default());
                    me.push(usage_of(pid).unwrap_or_default());
                    std::thread::sleep(Duration::from_millis(50));
                }
                samples.push((Window::of(&r0), Window::of(&me)));
            }
        }
        tail.push(line);
        if tail.len() > 20 {
            tail.remove(0);
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let stdout = out.join().unwrap_or_default();
    if samples.len() < 3 {
        return Err(format!(
            "only {done} recoveries ({status}); stderr tail:\n{}",
            tail.join("\n")
        ));
    }
    let left = std::fs::read_dir(&root.0)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    Ok(Soak {
        recoveries: done,
        early,
        rank0: [0, 1, 2].map(|i| samples[i].0.clone()),
        mpiexec: [0, 1, 2].map(|i| samples[i].1.clone()),
        checksum_ok: status.success() && checksum(&stdout) == Some(expected),
        left,
        wall: t0.elapsed().as_secs_f64(),
    })
}

pub fn main(args: &[String]) -> i32 {
    let mut recoveries = 200;
    let bindir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let mut examples = bindir.join("../../examples");
    let mut i = 0;
    while i < args.len() {
        match (args[i].as_str(), args.get(i + 1)) {
            ("-h" | "--help", _) => {
                print!("{USAGE}");
                return 0;
            }
            ("--recoveries", Some(v)) => match super::number::<usize>("--recoveries", v) {
                Ok(n) if n >= 20 => recoveries = n,
                _ => {
                    eprintln!("mpistages-bench soak: --recoveries needs a number >= 20");
                    return 2;
                }
            },
            ("--examples", Some(v)) => examples = PathBuf::from(v),
            (a, _) => {
                eprintln!("mpistages-bench soak: unknown option or missing value: {a}\n\n{USAGE}");
                return 2;
            }
        }
        i += 2;
    }
    let scratch = super::Scratch::new(
        std::env::temp_dir().join(format!("mpistages-soak-{}", std::process::id())),
    );
    let exe = scratch.0.join("stencil2d");
    let built = std::fs::create_dir_all(&scratch.0).is_ok()
        && Command::new(bindir.join("mpicc"))
            .args(["-O2", "-o"])
            .arg(&exe)
            .arg(examples.join("stencil2d.c"))
            .arg("-lm")
            .status()
            .is_ok_and(|s| s.success());
    if !built {
        eprintln!("mpistages-bench soak: cannot build stencil2d");
        return 1;
    }
    match soak(&bindir.join("mpiexec"), &exe, recoveries, 10) {
        Ok(s) => {
            let mut all_flat = true;
            let mid = (s.early + s.recoveries) / 2;
            let mut show = |who: &str, w: &[Window; 3]| {
                let is_flat = steady(w, (mid - s.early, s.recoveries - mid));
                all_flat &= is_flat;
                let range = |lo: u64, hi: u64| format!("{lo}-{hi}");
                let n = |(lo, hi): (usize, usize)| range(lo as u64, hi as u64);
                let kb = |(lo, hi): (u64, u64)| range(lo, hi);
                // Growth as `same_memory` judges it: the least at a look
                // over the most at the one before.
                let grew = |a: &Window, b: &Window| b.rss_kb.0 as i64 - a.rss_kb.1 as i64;
                let at = |k: usize, x: &Window| {
                    format!(
                        "after {k:>3}: {:>5} fds, {:>5} threads, {:>11} KB",
                        n(x.fds),
                        n(x.threads),
                        kb(x.rss_kb)
                    )
                };
                println!(
                    "{who:<8} {}; {} ({:+} KB); {} ({:+} KB): {}",
                    at(s.early, &w[0]),
                    at(mid, &w[1]),
                    grew(&w[0], &w[1]),
                    at(s.recoveries, &w[2]),
                    grew(&w[1], &w[2]),
                    if is_flat { "flat" } else { "GROWS" }
                );
                println!(
                    "{who:<8} threads after {:>3}: {}; after {}: {}",
                    s.early,
                    w[0].thread_names.join(" "),
                    s.recoveries,
                    w[2].thread_names.join(" ")
                );
            };
            println!(
                "soak: {} recoveries in one job, {:.1} s",
                s.recoveries, s.wall
            );
            show("rank 0", &s.rank0);
            show("mpiexec", &s.mpiexec);
            println!(
                "result {}; left in the checkpoint root: {:?}",
                if s.checksum_ok {
                    "identical to the failure-free run"
                } else {
                    "WRONG"
                },
                s.left
            );
            i32::from(!s.checksum_ok || !s.left.is_empty() || !all_flat)
        }
        Err(e) => {
            super::interrupt::report(&format!("mpistages-bench soak: {e}"));
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(fds: usize, names: &[&str], rss_kb: u64) -> Usage {
        Usage {
            fds,
            threads: names.len(),
            rss_kb,
            thread_names: names.iter().map(|n| n.to_string()).collect(),
        }
    }

    #[test]
    fn a_look_in_passing_is_flat_a_leak_is_not() {
        let main = ["stencil2d", "mpistages-progr"];
        let with_flusher = ["stencil2d", "mpistages-progr", FLUSHER];
        // Early: a connection still being made in one look.
        let early = Window::of(&[look(16, &main, 3600), look(17, &main, 3600)]);
        // The end: a checkpoint file open in one look, the flusher started.
        let end = Window::of(&[look(17, &with_flusher, 3610), look(18, &with_flusher, 3610)]);
        assert_eq!((early.fds, end.fds), ((16, 17), (17, 18)));
        assert_eq!((end.threads, end.flushers), ((2, 2), 1));
        assert!(flat(&early, &end, 30));
        // One descriptor, one thread, 5 KB per recovery for 30 recoveries.
        let leak_fd = Window::of(&[look(46, &main, 3600)]);
        assert!(!flat(&early, &leak_fd, 30));
        let mut threads = main.to_vec();
        threads.extend(["mpistages-progr"; 30]);
        assert!(!flat(&early, &Window::of(&[look(17, &threads, 3600)]), 30));
        assert!(!flat(&early, &Window::of(&[look(17, &main, 3750)]), 30));
        // Rings of a connection made in passing: memory up in one early
        // look is not growth; up in every look at the end is.
        let early_ring = Window::of(&[look(16, &main, 3600), look(17, &main, 4120)]);
        assert_eq!(early_ring.rss_kb, (3600, 4120));
        assert!(flat(&early_ring, &Window::of(&[look(17, &main, 4120)]), 30));
        assert!(!flat(
            &early_ring,
            &Window::of(&[look(17, &main, 4250)]),
            30
        ));
        // The flusher started after the early look, with its parked file.
        assert!(flat(
            &early,
            &Window::of(&[look(18, &with_flusher, 3600)]),
            30
        ));
        assert!(!flat(
            &early,
            &Window::of(&[look(19, &with_flusher, 3600)]),
            30
        ));
        // A step to a new high-water mark in one half is no leak; the same
        // growth in both halves is.
        let at = |kb| Window::of(&[look(17, &main, kb)]);
        assert!(steady(&[at(3600), at(3736), at(3736)], (15, 15)));
        assert!(steady(&[at(3600), at(3600), at(3736)], (15, 15)));
        assert!(!steady(&[at(3600), at(3675), at(3750)], (15, 15)));
        assert!(!steady(
            &[at(3600), at(3600), Window::of(&[look(46, &main, 3600)])],
            (15, 15)
        ));
        let two_flushers = ["stencil2d", FLUSHER, FLUSHER];
        assert!(!flat(
            &early,
            &Window::of(&[look(17, &two_flushers, 3600)]),
            30
        ));
    }
}
