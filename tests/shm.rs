//! Shared memory between the ranks of one host: which connections a job
//! makes (`--transport`), and that nothing of them is left when it ends,
//! also after a rank was SIGKILLed (the rings are memfds, the doorbells
//! abstract Unix sockets: the kernel frees both with their processes).

mod common;
use common::{build, build_example, checksum, mpiexec};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// Abstract Unix sockets of mpistages jobs held by processes whose
/// environment has `MPISTAGES_TEST_MARK=mark`: those of this test's jobs
/// alone (another job on the machine has sockets too). A socket lives as
/// long as a process holds it, so one left means a process of the job left.
fn sockets_marked(mark: &str) -> Vec<String> {
    // /proc/net/unix: ... Inode Path; abstract names start with '@'.
    let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let names: std::collections::HashMap<String, String> = table
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (inode, path) = (f.get(6)?, f.get(7)?);
            path.starts_with("@mpistages-")
                .then(|| (inode.to_string(), path.to_string()))
        })
        .collect();
    let want = format!("MPISTAGES_TEST_MARK={mark}");
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
        if !environ.split(|&b| b == 0).any(|v| v == want.as_bytes()) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let link = std::fs::read_link(fd.path()).unwrap_or_default();
            let link = link.to_string_lossy();
            if let Some(inode) = link
                .strip_prefix("socket:[")
                .and_then(|l| l.strip_suffix(']'))
            {
                found.extend(names.get(inode).cloned());
            }
        }
    }
    found
}

/// Fails if a socket of the jobs marked `mark` stays (the kernel frees
/// them as their processes end: a moment after mpiexec has).
fn assert_no_socket_left(mark: &str, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left = sockets_marked(mark);
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: sockets left behind: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn ranks_of_one_host_connect_through_shared_memory_unless_told_otherwise() {
    let exe = build("whoami.c");
    let exe = exe.to_str().unwrap();
    let eager = [("MPISTAGES_LOG", "debug"), ("MPISTAGES_CONNECT", "eager")];
    // What a user gets without saying: unless this run of the suite was
    // told otherwise (MPISTAGES_TRANSPORT=udp cargo test ...).
    let default = std::env::var_os("MPISTAGES_TRANSPORT").is_none();
    for (opts, kind, other) in [
        (&[][..], "shm", "tcp"),
        (&["--transport", "auto"][..], "shm", "tcp"),
        (&["--transport", "shm"][..], "shm", "tcp"),
        (&["--transport", "tcp"][..], "tcp", "shm"),
    ] {
        if opts.is_empty() && !default {
            continue;
        }
        let mut args = opts.to_vec();
        args.extend(["-n", "3", exe, "X", "-"]);
        let r = mpiexec(&args, &eager, LIMIT);
        assert!(r.ok(), "{opts:?}: {}", r.stderr);
        // Told to connect at start, the higher rank of each pair connects
        // (and says so) in MPI_Init; the lower one may finish before it
        // looks at the connection.
        for (me, peer) in [(1, 0), (2, 0), (2, 1)] {
            let line = format!("rank {me}: connected to rank {peer} over {kind} ");
            assert!(
                r.stderr.contains(&line),
                "{opts:?}: {line} missing: {}",
                r.stderr
            );
        }
        assert!(
            !r.stderr.contains(&format!(" over {other} ")),
            "{opts:?}: {}",
            r.stderr
        );
        assert_eq!(r.stdout.lines().filter(|l| l.contains(" of 3:")).count(), 3);
    }
    let r = mpiexec(
        &["--transport", "udpx", "-n", "1", exe, "X", "-"],
        &[],
        LIMIT,
    );
    assert!(
        !r.ok() && r.stderr.contains("--transport takes"),
        "{}",
        r.stderr
    );
}

/// The pairs a debug log says connected (either end's line), lowest first.
fn connected_pairs(stderr: &str) -> std::collections::BTreeSet<(usize, usize)> {
    stderr
        .lines()
        .filter_map(|l| {
            let rest = l.split("mpistages: rank ").nth(1)?;
            let (me, rest) = rest.split_once(": connected to rank ")?;
            let peer = rest.split_whitespace().next()?;
            let (a, b) = (me.parse::<usize>().ok()?, peer.parse::<usize>().ok()?);
            Some((a.min(b), a.max(b)))
        })
        .collect()
}

/// Pairs connect at their first message: in a ring whose ranks send to
/// both neighbours at once, both ends of each pair open its connection at
/// the same moment; the messages, small and large, arrive whole and in
/// order over every transport, and the job makes fewer connections than
/// there are pairs. `MPISTAGES_CONNECT=eager` makes them all at start; a
/// wrong value is an error that says which values there are.
#[test]
fn pairs_connect_at_their_first_message() {
    let exe = build("pairs.c");
    let exe = exe.to_str().unwrap();
    let (n, rounds) = (8usize, 30usize);
    // What pairs.c sums: from each neighbour, round i, n_i elements.
    let expected = |rank: usize| -> i64 {
        let (left, right) = ((rank + n - 1) % n, (rank + 1) % n);
        (0..rounds)
            .map(|i| {
                let len = if i % 5 == 4 { 1 << 18 } else { 1 + i };
                (0..len)
                    .map(|k| ((left + right) * 1000 + 2 * (i + k)) as i64)
                    .sum::<i64>()
            })
            .sum()
    };
    let ring: std::collections::BTreeSet<(usize, usize)> = (0..n)
        .map(|r| (r.min((r + 1) % n), r.max((r + 1) % n)))
        .collect();
    let all = n * (n - 1) / 2;
    for (transport, connect) in [
        ("auto", "lazy"),
        ("tcp", "lazy"),
        ("udp", "lazy"),
        ("auto", "eager"),
    ] {
        let what = format!("{transport}, {connect}");
        let env = [("MPISTAGES_LOG", "debug"), ("MPISTAGES_CONNECT", connect)];
        let args = ["--transport", transport, "-n", "8", exe, "30"];
        let r = mpiexec(&args, &env, LIMIT);
        assert!(r.ok(), "{what}: {}\n{}", r.stdout, r.stderr);
        for rank in 0..n {
            let line = format!("rank {rank}: ok {}", expected(rank));
            assert!(
                r.stdout.contains(&line),
                "{what}: {line} missing: {}",
                r.stdout
            );
        }
        let pairs = connected_pairs(&r.stderr);
        assert!(pairs.is_superset(&ring), "{what}: {pairs:?}");
        if connect == "eager" {
            assert_eq!(pairs.len(), all, "{what}: {pairs:?}");
        } else {
            assert!(pairs.len() < all, "{what}: all {all} pairs connected");
        }
    }
    let r = mpiexec(
        &["-n", "2", exe, "1"],
        &[("MPISTAGES_CONNECT", "early")],
        LIMIT,
    );
    assert!(!r.ok(), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("MPISTAGES_CONNECT='early': expected lazy or eager"),
        "{}",
        r.stderr
    );
}

/// A resilient stencil over shared memory loses a rank (SIGKILL) in each
/// recovery mode and ends with the failure-free checksum; afterwards no
/// socket of the job is left.
#[test]
fn a_rank_killed_over_shared_memory_is_recovered_and_nothing_is_left() {
    let exe = build_example("stencil2d.c");
    let exe = exe.to_str().unwrap();
    let mark = format!("shm-kill-{}", std::process::id());
    let run = |extra: &[&str]| {
        let mut args = vec!["--transport", "shm"];
        args.extend(extra);
        args.extend(["-n", "4", exe, "240", "2000", "10", "protect"]);
        mpiexec(&args, &[("MPISTAGES_TEST_MARK", &mark)], LIMIT)
    };
    // The marked sockets are seen while a job runs (so that none seen
    // after one means none left), and gone after mpiexec is ended.
    let mut job = common::command(common::bin("mpiexec"));
    job.args([
        "--transport",
        "shm",
        "-n",
        "2",
        exe,
        "240",
        "100000",
        "10",
        "protect",
    ])
    .env("MPISTAGES_TEST_MARK", &mark)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let job = job.spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while sockets_marked(&mark).len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = sockets_marked(&mark);
    // SAFETY: kill takes no pointers; the pid is the mpiexec we started,
    // not yet reaped. (On SIGTERM mpiexec ends its ranks.)
    unsafe { libc::kill(job.id() as i32, libc::SIGTERM) };
    common::finish(job, "mpiexec", LIMIT);
    assert!(seen.len() >= 2, "a running job's sockets: {seen:?}");
    assert_no_socket_left(&mark, "after SIGTERM");
    let clean = run(&[]);
    assert!(clean.ok(), "{}", clean.stderr);
    for mode in ["stages", "reinit", "cpr"] {
        let r = run(&["--recovery", mode, "--inject", "rank=2,checkpoint=40"]);
        assert!(r.ok(), "{mode}: {}", r.stderr);
        assert!(r.stderr.contains("recovery 1 done"), "{mode}: {}", r.stderr);
        assert_eq!(checksum(&clean), checksum(&r), "{mode}: {}", r.stderr);
        assert_no_socket_left(&mark, mode);
    }
}

/// Messages around the eager limit and of several MiB, checked byte by
/// byte, through both shared-memory paths: copied through the rings, and
/// copied once straight from the sender's memory (cross-memory attach,
/// which this machine allows: the test checks that it was used).
#[test]
fn large_messages_through_both_shared_memory_paths() {
    let exe = build("large.c");
    let exe = exe.to_str().unwrap();
    for cma in ["1", "0"] {
        let env = [("MPISTAGES_SHM_CMA", cma), ("MPISTAGES_LOG", "debug")];
        let r = mpiexec(&["--transport", "shm", "-n", "3", exe], &env, LIMIT);
        assert!(
            r.ok() && r.stdout.contains("OK large"),
            "cma {cma}: {}",
            r.stderr
        );
        // Each rank receives large messages from its left neighbour: at
        // least those three pairs found they can copy once.
        let single = r
            .stderr
            .lines()
            .filter(|l| l.contains("single-copy"))
            .count();
        if cma == "1" {
            assert!(single >= 3, "cma {cma}: {}", r.stderr);
        } else {
            assert_eq!(single, 0, "cma {cma}: {}", r.stderr);
        }
    }
}
