//! Shared memory between the ranks of one host: which connections a job
//! makes (`--transport`), and that nothing of them is left when it ends,
//! also after a rank was SIGKILLed (the rings are memfds, the doorbells
//! abstract Unix sockets: the kernel frees both with their processes).

mod common;
use common::{build, build_example, checksum, mpiexec};
use std::sync::Mutex;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// The tests of this file count system-wide sockets: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Abstract Unix sockets of mpistages jobs on this machine.
fn job_sockets() -> std::collections::BTreeSet<String> {
    std::fs::read_to_string("/proc/net/unix")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("@mpistages-")))
        .map(str::to_string)
        .collect()
}

/// Fails if sockets of the jobs run since `before` was taken stay. A job
/// someone else runs on the machine meanwhile has sockets too, which go
/// when it ends: only what stays for 10 s counts.
fn assert_no_socket_left(before: &std::collections::BTreeSet<String>, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let left: Vec<String> = job_sockets().difference(before).cloned().collect();
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
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let exe = build("whoami.c");
    let exe = exe.to_str().unwrap();
    let debug = [("MPISTAGES_LOG", "debug")];
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
        let r = mpiexec(&args, &debug, LIMIT);
        assert!(r.ok(), "{opts:?}: {}", r.stderr);
        // The higher rank of each pair connects (and says so) in MPI_Init;
        // the lower one may finish before it looks at the connection.
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

/// A resilient stencil over shared memory loses a rank (SIGKILL) in each
/// recovery mode and ends with the failure-free checksum; afterwards no
/// socket of the job is left.
#[test]
fn a_rank_killed_over_shared_memory_is_recovered_and_nothing_is_left() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let exe = build_example("stencil2d.c");
    let exe = exe.to_str().unwrap();
    let before = job_sockets();
    let run = |extra: &[&str]| {
        let mut args = vec!["--transport", "shm"];
        args.extend(extra);
        args.extend(["-n", "4", exe, "240", "2000", "10", "protect"]);
        mpiexec(&args, &[], LIMIT)
    };
    let clean = run(&[]);
    assert!(clean.ok(), "{}", clean.stderr);
    for mode in ["stages", "reinit", "cpr"] {
        let r = run(&["--recovery", mode, "--inject", "rank=2,checkpoint=40"]);
        assert!(r.ok(), "{mode}: {}", r.stderr);
        assert!(r.stderr.contains("recovery 1 done"), "{mode}: {}", r.stderr);
        assert_eq!(checksum(&clean), checksum(&r), "{mode}: {}", r.stderr);
        assert_no_socket_left(&before, mode);
    }
}

/// Messages around the eager limit and of several MiB, checked byte by
/// byte, through both shared-memory paths: copied through the rings, and
/// copied once straight from the sender's memory (cross-memory attach,
/// which this machine allows: the test checks that it was used).
#[test]
fn large_messages_through_both_shared_memory_paths() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
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
