//! The fault campaign and the soak, as users run them
//! (`mpistages-bench campaign`, `mpistages-bench soak`): a short seeded
//! campaign over the examples in every mode, a third of it beside CPU hogs,
//! must have no wrong result, no hang and no crash; a job with many
//! recoveries must keep its survivor's descriptors, threads and memory and
//! mpiexec's threads flat, and leave nothing behind.

mod common;
use common::bin;

/// The examples' sources: the bench finds them next to its binary's
/// target directory, which is elsewhere under CARGO_TARGET_DIR.
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");

#[test]
fn a_quick_seeded_campaign_is_all_correct_or_clean() {
    let out = common::Scratch::new("campaign");
    let r = common::command(bin("mpistages-bench"))
        .args([
            "campaign",
            "--quick",
            "--runs",
            "24",
            "--seed",
            "2026",
            "--out",
            out.path(),
            "--examples",
            EXAMPLES,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stdout}\n{stderr}");
    let all = stdout
        .lines()
        .find(|l| l.starts_with("all "))
        .unwrap_or_else(|| panic!("no summary:\n{stdout}"));
    let n: Vec<usize> = all
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    // correct, clean-error, wrong, hang, crash
    assert_eq!(n.iter().sum::<usize>(), 24, "{stdout}");
    assert_eq!(&n[2..], &[0, 0, 0], "{stdout}\n{stderr}");
    assert!(n[0] >= 12, "too few recovered runs:\n{stdout}");
    let csv = std::fs::read_to_string(out.0.join("campaign.csv")).unwrap();
    assert_eq!(csv.lines().count(), 25, "{csv}");
}

#[test]
fn a_soak_of_many_recoveries_stays_flat() {
    let r = common::command(bin("mpistages-bench"))
        .args(["soak", "--recoveries", "40", "--examples", EXAMPLES])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("soak: 40 recoveries"), "{stdout}");
    assert!(
        stdout.contains("identical to the failure-free run; left in the checkpoint root: []"),
        "{stdout}"
    );
    // "WHO after  10: LO-HI fds, LO-HI threads, M KB; after  25: ... (+K KB); after  40: ... : flat"
    // (the tool compares the fewest at a look with the most at the one before).
    for who in ["rank 0", "mpiexec"] {
        let line = stdout.lines().find(|l| l.starts_with(who)).unwrap();
        assert!(line.ends_with(": flat"), "{who}: {line}");
    }
}

/// The processes below `pid` (children, grandchildren, ...).
fn descendants(pid: u32) -> Vec<u32> {
    let mut all = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let kids =
            std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")).unwrap_or_default();
        for k in kids.split_whitespace().filter_map(|k| k.parse().ok()) {
            all.push(k);
            todo.push(k);
        }
    }
    all
}

/// A process that is gone or a zombie about to be reaped.
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// Ctrl-C or SIGTERM to the benchmark tool ends its job (mpiexec and every
/// rank) and removes its scratch directories (a soak killed this way left
/// /dev/shm/mpistages-soak-PID and /tmp/mpistages-soak-PID behind).
#[test]
fn an_interrupted_soak_leaves_nothing_behind() {
    let mut bench = common::command(bin("mpistages-bench"))
        .args(["soak", "--recoveries", "200", "--examples", EXAMPLES])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = bench.id();
    let shm = format!("/dev/shm/mpistages-soak-{pid}");
    let tmp = std::env::temp_dir().join(format!("mpistages-soak-{pid}"));
    // Wait until the soak's job runs with its ranks (mpiexec and 4 ranks).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let procs = loop {
        let d = descendants(pid);
        if d.len() >= 5 && std::path::Path::new(&shm).exists() {
            break d;
        }
        if std::time::Instant::now() > deadline {
            let _ = bench.kill();
            panic!("the soak's job never started: {d:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    mpistages_sys::process::signal(pid as i32, libc::SIGTERM);
    let status = bench.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut bench.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{err}");
    assert!(err.contains("caught SIGTERM"), "{err}");
    // mpiexec ended its ranks before the tool exited; give the kernel a
    // moment to reap the last of them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !procs.iter().all(|&p| gone(p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let left: Vec<u32> = procs.iter().copied().filter(|&p| !gone(p)).collect();
    for &p in &left {
        mpistages_sys::process::signal(p as i32, libc::SIGKILL);
    }
    assert!(left.is_empty(), "processes left: {left:?}\n{err}");
    assert!(!std::path::Path::new(&shm).exists(), "{shm} left");
    assert!(!tmp.exists(), "{} left", tmp.display());
}
