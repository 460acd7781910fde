//! MPI Stages recovery end to end: real ranks, real SIGKILLs from
//! `mpiexec --inject`, and the examples' checksums compared with a
//! failure-free run of the same job. Also generation fencing (stale
//! messages), the finalize race, the restart budget, handle values across
//! a rollback, and the MPI-state checkpoint size.

mod common;
use common::{build, build_example, checksum, mpiexec, Run, Scratch};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);

fn run_app(exe: &str, np: usize, args: &[&str], injects: &[&str], extra: &[&str]) -> Run {
    let n = np.to_string();
    let mut a = vec!["-n", n.as_str(), "--recovery", "stages"];
    for i in injects {
        a.extend(["--inject", i]);
    }
    a.extend(extra);
    a.push(exe);
    a.extend(args);
    mpiexec(&a, &[], LIMIT)
}

fn recoveries(r: &Run) -> usize {
    r.stderr
        .lines()
        .filter(|l| l.contains(" done: ranks"))
        .count()
}

/// Runs `app` failure-free and with the injections; both must finish with
/// the same checksum, and at least one recovery must have happened.
fn survives(app: &str, np: usize, args: &[&str], injects: &[&str]) -> Run {
    let exe = build_example(app);
    let exe = exe.to_str().unwrap();
    let dir = Scratch::new(&format!(
        "stages-{}-{np}-{}",
        app.trim_end_matches(".c"),
        injects.join("+").replace([',', '=', ':', '.'], "_")
    ));
    let mut full: Vec<&str> = args.to_vec();
    full.push(dir.path());
    let clean = run_app(exe, np, &full, &[], &[]);
    assert!(clean.ok(), "failure-free run failed:\n{}", clean.stderr);
    assert_eq!(recoveries(&clean), 0);
    let hurt = run_app(exe, np, &full, injects, &[]);
    assert!(
        hurt.ok(),
        "{app} at {np} ranks with {injects:?} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        hurt.status,
        hurt.stdout,
        hurt.stderr
    );
    assert!(
        recoveries(&hurt) >= 1,
        "no recovery happened:\n{}",
        hurt.stderr
    );
    assert_eq!(
        checksum(&clean),
        checksum(&hurt),
        "stderr:\n{}",
        hurt.stderr
    );
    assert!(hurt.stderr.contains("rolled back"), "{}", hurt.stderr);
    // The application's files are cleaned up by the application itself.
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "files left: {left:?}");
    hurt
}

#[test]
fn ring_kill_during_compute() {
    survives("ring.c", 4, &["80", "10"], &["rank=1,after=0.4"]);
}

#[test]
fn ring_kill_while_others_block_in_recv() {
    survives("ring.c", 4, &["30", "0"], &["rank=2,call=MPI_Recv:5"]);
}

#[test]
fn ring_two_ranks_at_once() {
    let r = survives(
        "ring.c",
        4,
        &["80", "10"],
        &["rank=1,after=0.4", "rank=2,after=0.4"],
    );
    assert!(
        r.stderr.contains("rank 1 (pid") && r.stderr.contains("rank 2 (pid"),
        "{}",
        r.stderr
    );
}

#[test]
fn stencil_two_ranks_in_collective() {
    survives(
        "stencil2d.c",
        2,
        &["64", "200", "10"],
        &["rank=1,call=MPI_Allreduce:30"],
    );
}

/// K `auto`: the stencil checkpoints when MPIX_Checkpoint_needed says it
/// pays (at iterations that differ from run to run, the first one always)
/// and rolls back to the failure-free result.
#[test]
fn stencil_checkpoints_when_it_pays() {
    survives(
        "stencil2d.c",
        4,
        &["128", "200", "auto"],
        &["rank=1,call=MPI_Allreduce:150"],
    );
}

#[test]
fn stencil_kill_while_others_wait() {
    survives(
        "stencil2d.c",
        4,
        &["128", "200", "10"],
        &["rank=1,call=MPI_Waitall:30"],
    );
}

#[test]
fn stencil_kill_inside_collective() {
    survives(
        "stencil2d.c",
        4,
        &["128", "200", "10"],
        &["rank=3,call=MPI_Allreduce:55"],
    );
}

#[test]
fn stencil_kill_during_checkpoint_write() {
    survives(
        "stencil2d.c",
        4,
        &["128", "200", "10"],
        &["rank=2,call=MPIX_Checkpoint_write:4"],
    );
}

#[test]
fn stencil_second_failure_during_checkpoint_read() {
    let r = survives(
        "stencil2d.c",
        4,
        &["128", "200", "10"],
        &[
            "rank=0,call=MPI_Waitall:40",
            "rank=3,call=MPIX_Checkpoint_read:1",
        ],
    );
    assert!(
        r.stderr.contains("rank 0 (pid") && r.stderr.contains("rank 3 (pid"),
        "{}",
        r.stderr
    );
}

#[test]
fn stencil_rank_zero_then_last_rank_at_8() {
    let r = survives(
        "stencil2d.c",
        8,
        &["128", "200", "10"],
        &["rank=0,call=MPI_Waitall:20", "rank=7,checkpoint=12"],
    );
    assert_eq!(recoveries(&r), 2, "{}", r.stderr);
}

#[test]
fn library_communicator_survives() {
    survives(
        "matmul_lib.c",
        4,
        &["64", "40"],
        &["rank=1,call=MPI_Allgather:10", "rank=3,checkpoint=25"],
    );
}

fn stages_mode(
    np: usize,
    mode: &str,
    injects: &[&str],
    env: &[(&str, &str)],
    extra: &[&str],
) -> Run {
    let exe = build("stages.c");
    let n = np.to_string();
    let mut a = vec!["-n", n.as_str(), "--recovery", "stages"];
    for i in injects {
        a.extend(["--inject", i]);
    }
    a.extend(extra);
    let exe = exe.to_str().unwrap().to_string();
    a.extend([exe.as_str(), mode]);
    mpiexec(&a, env, LIMIT)
}

#[test]
fn no_stale_message_after_recovery() {
    let r = stages_mode(3, "stale", &["rank=2,call=MPI_Barrier:1"], &[], &[]);
    assert!(
        r.ok() && r.stdout.contains("OK stages-stale"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert_eq!(recoveries(&r), 1);
}

#[test]
fn handles_keep_their_values_across_a_rollback() {
    let r = stages_mode(4, "handles", &["rank=2,call=MPI_Allreduce:1"], &[], &[]);
    assert!(
        r.ok() && r.stdout.contains("OK stages-handles"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert_eq!(recoveries(&r), 1);
}

#[test]
fn epochs_and_mpi_state_size() {
    let dir = Scratch::new("epochs");
    let ckpt = format!("mem,tmpfs:{}", dir.path());
    let r = stages_mode(
        2,
        "epochs",
        &[],
        &[
            ("STAGES_TEST_TMPFS", dir.path()),
            ("MPISTAGES_LOG", "debug"),
        ],
        &["--ckpt", &ckpt],
    );
    // The refused write (a receive still posted) says which request.
    assert!(
        r.stderr.contains("1 requests are still pending on this rank (complete them first): a receive (context 0, tag 99), in progress; nothing was written"),
        "{}",
        r.stderr
    );
    assert!(
        r.ok() && r.stdout.contains("OK stages-epochs"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("MPI-state checkpoint:"))
        .expect("size line");
    let bytes: usize = line.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(
        bytes > 0 && bytes < 4096,
        "MPI-state checkpoint of {bytes} bytes"
    );
    // mpiexec removed the job's node-local directory.
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn failure_after_a_rank_finalized_ends_the_job() {
    let r = stages_mode(3, "finalize", &["rank=1,call=MPI_Comm_rank:2"], &[], &[]);
    assert_eq!(r.code(), Some(137), "{}", r.stderr);
    assert!(
        r.stderr.contains("has already called MPI_Finalize"),
        "{}",
        r.stderr
    );
}

/// A program that cannot roll back ends the job with the reason, in
/// both modes that replace a rank: under its default fatal error handler
/// at the first call that sees the failure, and with MPI_ERRORS_RETURN
/// (its errors ignored) when it reaches MPI_Finalize without rolling back.
/// Before, the survivors' calls returned MPIX_TRY_RELOAD whatever the
/// handler, the program printed a wrong sum and the job hung.
#[test]
fn a_program_that_cannot_roll_back_ends_the_job_with_the_reason() {
    let exe = build("plain.c");
    for (mode, handler, reason) in [
        (
            "stages",
            "fatal",
            "rank 1 failed, and the error handler is MPI_ERRORS_ARE_FATAL",
        ),
        ("reinit", "fatal", "restart point of MPIX_Reinit"),
        ("stages", "return", "it did not roll back"),
        ("reinit", "return", "it did not roll back"),
    ] {
        let r = mpiexec(
            &[
                "-n",
                "3",
                "--recovery",
                mode,
                "--inject",
                "rank=1,call=MPI_Allreduce:50",
                exe.to_str().unwrap(),
                handler,
            ],
            &[],
            LIMIT,
        );
        let what = format!("{mode}, {handler}:\n{}\n{}", r.stdout, r.stderr);
        assert!(!r.ok(), "{what}");
        assert!(r.stderr.contains(reason), "{what}");
        assert_eq!(recoveries(&r), 0, "{what}");
        if handler == "fatal" {
            assert!(!r.stdout.contains("sum"), "{what}");
        }
    }
}

/// A Stages loop (MPIX_Checkpoint_read) under Reinit, which restores no
/// MPI state, is refused with a reason (it used to resume survivors and
/// the replacement at different iterations and hang).
#[test]
fn the_stages_loop_under_reinit_is_refused() {
    let r = ring_killed(&["--recovery", "reinit"], "ring-reinit");
    assert!(!r.ok(), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("MPIX_Checkpoint_read is the MPI Stages rollback and does not apply under --recovery reinit"),
        "{}",
        r.stderr
    );
    assert_eq!(recoveries(&r), 0, "{}", r.stderr);
}

/// The ring at 3 ranks with `opts`, rank 1 killed on entering its third
/// MPI_Recv.
fn ring_killed(opts: &[&str], tag: &str) -> Run {
    let exe = build_example("ring.c");
    let dir = Scratch::new(tag);
    let mut a = vec!["-n", "3"];
    a.extend(opts);
    a.extend(["--inject", "rank=1,call=MPI_Recv:3"]);
    a.extend([exe.to_str().unwrap(), "30", "0", dir.path()]);
    mpiexec(&a, &[], LIMIT)
}

#[test]
fn restart_budget_stops_a_crash_loop() {
    let exe = build_example("ring.c");
    let dir = Scratch::new("budget");
    let r = run_app(
        exe.to_str().unwrap(),
        3,
        &["30", "0", dir.path()],
        &["rank=1,call=MPI_Recv:3", "rank=2,call=MPI_Recv:6"],
        &["--max-restarts", "1"],
    );
    assert!(!r.ok(), "{}", r.stderr);
    assert!(r.stderr.contains("restart budget is spent"), "{}", r.stderr);
}

#[test]
fn without_recovery_a_failure_ends_the_job() {
    let r = ring_killed(&[], "none");
    // Either the killed rank's exit or a survivor's MPI_Abort (its
    // connection broke) is reported first; both end the job.
    assert!(!r.ok(), "{}", r.stderr);
    assert!(r.stderr.contains("terminating the job"), "{}", r.stderr);
    assert_eq!(recoveries(&r), 0);
    assert!(!r.stdout.contains("checksum"), "{}", r.stdout);
}

/// Pids of the processes still running `exe` (scanning /proc; nothing is
/// signalled).
fn running(exe: &std::path::Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe))
        .collect()
}

/// `tests/c/spare.c` at 3 ranks with rank 1 killed in its 22nd Allreduce:
/// the expected sums, each rank's pid, and the pids that printed before
/// MPI_Init.
fn spare_run(extra: &[&str]) -> (Run, Vec<u32>, Vec<u32>) {
    let exe = build("spare.c");
    let r = run_app(
        exe.to_str().unwrap(),
        3,
        &[],
        &["rank=1,call=MPI_Allreduce:22"],
        extra,
    );
    assert!(r.ok(), "{:?}\n{}\n{}", r.status, r.stdout, r.stderr);
    assert!(
        running(&exe).is_empty(),
        "processes left: {:?}",
        running(&exe)
    );
    let pid_after = |l: &str, key: &str| -> Option<u32> {
        l.split(key).nth(1)?.split_whitespace().next()?.parse().ok()
    };
    let early: Vec<u32> = r
        .stdout
        .lines()
        .filter_map(|l| pid_after(l, "before MPI_Init: pid "))
        .collect();
    let mut ranks = Vec::new();
    for rank in 0..3 {
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("rank {rank} pid ")))
            .unwrap_or_else(|| panic!("no line of rank {rank}:\n{}", r.stdout));
        // Sum over 40 iterations of sum over ranks of (rank + it).
        let want: i64 = (0..40).map(|it| 3 * it + 3).sum();
        assert!(line.ends_with(&format!("sum {want}")), "{line}");
        ranks.push(pid_after(line, " pid ").unwrap());
    }
    (r, ranks, early)
}

/// One test, so that no other job runs the same program meanwhile (the
/// process check looks for any process running it).
#[test]
fn spare_processes() {
    // A spare replaces the failed rank; without spares the replacement
    // starts at the failure. Either way the three ranks and the replacement
    // printed before MPI_Init, and nothing else did (the spare started
    // after the recovery, never needed, did not show).
    for (extra, says) in [
        (&[][..], "replacing it with a spare process"),
        (&["--spares", "0"][..], "replacing it (generation 1)"),
    ] {
        let (r, ranks, early) = spare_run(extra);
        assert!(r.stderr.contains(says), "{}", r.stderr);
        assert_eq!(early.len(), 4, "{}", r.stdout);
        for pid in &ranks {
            assert!(early.contains(pid), "rank pid {pid} missing in {early:?}");
        }
    }

    // A job that cannot recover ends its spares too.
    let exe = build("spare.c");
    let r = run_app(
        exe.to_str().unwrap(),
        3,
        &[],
        &["rank=1,call=MPI_Allreduce:22"],
        &["--max-restarts", "0", "--spares", "2"],
    );
    assert!(!r.ok(), "{}", r.stderr);
    assert!(r.stderr.contains("cannot recover"), "{}", r.stderr);
    assert!(
        running(&exe).is_empty(),
        "processes left: {:?}",
        running(&exe)
    );
    assert_eq!(
        r.stdout.matches("before MPI_Init").count(),
        3,
        "{}",
        r.stdout
    );
}

/// One-sided halo exchange (fence, put) and a collective write every 10
/// iterations: killed inside an RMA epoch, the job ends with the same
/// blocks and the same file as without the failure. Windows and files are
/// released by the rollback and created again by every rank's attempt.
#[test]
fn halo_rma_kill_during_an_rma_epoch() {
    survives(
        "halo_rma.c",
        4,
        &["64", "100", "10"],
        &["rank=2,call=MPI_Win_fence:41"],
    );
}

/// The same job killed inside its fifth collective write.
#[test]
fn halo_rma_kill_during_a_collective_write() {
    survives(
        "halo_rma.c",
        4,
        &["64", "100", "10"],
        &["rank=1,call=MPI_File_write_at_all:5"],
    );
}

/// `MPIX_Checkpoint_needed` under each policy (tests/c/cadence.c checks
/// the answers): a fixed interval, the default 5 % cap, Daly's interval
/// for an MTBF, a long interval (no checkpoint right after one), and a
/// malformed MTBF (MPI_ERR_ARG naming it); mpiexec refuses a bad --mtbf.
#[test]
fn checkpoint_needed_keeps_each_policy() {
    let exe = build("cadence.c");
    let exe = exe.to_str().unwrap();
    type Case<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, &'a str)]);
    let cases: [Case; 5] = [
        ("interval", &["--ckpt-interval", "0.2"], &[]),
        ("default", &[], &[]),
        ("mtbf", &["--mtbf", "0.5"], &[]),
        ("long", &["--ckpt-interval", "1000", "--mtbf", "0.5"], &[]),
        (
            "badenv",
            &[],
            &[("MPISTAGES_MTBF", "soon"), ("MPISTAGES_LOG", "debug")],
        ),
    ];
    for (mode, opts, env) in cases {
        for np in [1, 3] {
            let n = np.to_string();
            let mut a = vec!["-n", n.as_str(), "--recovery", "stages"];
            a.extend(opts);
            a.extend([exe, mode]);
            let r = mpiexec(&a, env, LIMIT);
            assert!(
                r.ok() && r.stdout.contains("OK cadence"),
                "{mode} at {np} ranks: {:?}\n{}\n{}",
                r.status,
                r.stdout,
                r.stderr
            );
            if mode == "badenv" {
                assert!(
                    r.stderr.contains("MPIX_Checkpoint_needed: MPI_ERR_ARG: MPISTAGES_MTBF needs seconds (more than 0, at most 1000000000), not 'soon'"),
                    "{}",
                    r.stderr
                );
            }
        }
    }
    let bad = mpiexec(&["-n", "1", "--mtbf", "0", exe, "interval"], &[], LIMIT);
    assert!(!bad.ok(), "{}", bad.stderr);
    assert!(
        bad.stderr.contains("--mtbf needs seconds"),
        "{}",
        bad.stderr
    );
}

/// Under reinit, a window agent's reply to the replacement (posted and
/// complete, its agent thread not yet past its wait) was counted as the
/// survivor's pending request, and its next MPIX_Checkpoint_write was
/// refused (1 run in 1 to 6; the campaign found it with halo_rma). Ten
/// runs, each with the failure while a checkpoint is written.
#[test]
fn a_window_agents_reply_is_no_pending_request_of_the_application() {
    let exe = build_example("halo_rma.c");
    let exe = exe.to_str().unwrap();
    let dir = Scratch::new("halo-agent-reply");
    for i in 0..10 {
        let r = mpiexec(
            &[
                "-n",
                "2",
                "--recovery",
                "reinit",
                "--inject",
                "rank=1,writing=6",
                exe,
                "64",
                "200",
                "20",
                dir.path(),
            ],
            // Its lines slow the ranks where the race was most often lost.
            &[("MPISTAGES_LOG", "debug")],
            LIMIT,
        );
        assert!(
            r.ok() && r.stdout.contains("checksum"),
            "run {i}: {:?}\n{}\n{}",
            r.status,
            r.stdout,
            r.stderr
        );
    }
}

/// A survivor that had not yet heard of a failure put its halo, by
/// cross-memory copy, into a neighbour that had: that neighbour had left
/// its attempt, whose stack frame held the window, and the put overwrote
/// the return address of the rollback's function (SIGSEGV under reinit,
/// 4 runs in 100; the campaign found it with halo_rma and two kills). A
/// halt now closes the window's gate before the program hears of the
/// failure, and waits for the copies already under way. Twenty-five runs,
/// each compared with the failure-free result.
#[test]
fn a_put_of_a_survivor_lands_in_no_frame_the_rollback_left() {
    let exe = build_example("halo_rma.c");
    let exe = exe.to_str().unwrap();
    let dir = Scratch::new("halo-gate");
    let job = |injects: &[&str]| {
        let mut args = vec!["-n", "4", "--recovery", "reinit"];
        for i in injects {
            args.extend(["--inject", i]);
        }
        args.extend([exe, "64", "200", "20", dir.path()]);
        mpiexec(&args, &[], LIMIT)
    };
    let checksum = |out: &str| {
        out.lines()
            .find_map(|l| l.split_once("checksum").map(|(_, c)| c.to_string()))
    };
    let clean = job(&[]);
    assert!(clean.ok(), "{}", clean.stderr);
    let want = checksum(&clean.stdout).expect("a checksum");
    for i in 0..25 {
        let r = job(&["rank=2,call=MPI_Put:387", "rank=1,call=MPI_Put:387"]);
        assert!(
            r.ok() && !r.stderr.contains("SIGSEGV"),
            "run {i}: {:?}\n{}",
            r.status,
            r.stderr
        );
        assert_eq!(
            checksum(&r.stdout).as_deref(),
            Some(want.as_str()),
            "run {i}"
        );
    }
}
