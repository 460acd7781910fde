//! Application data on the checkpoint levels, end to end: the stencil
//! example keeps its block with `MPIX_Protect` (or in a routed file), a
//! rank is SIGKILLed, and the job must finish with the checksum of a
//! failure-free run — from each level alone, after the loss of the failed
//! rank's node-local copies, with its newest copy corrupted, and when it
//! dies while writing. Plus the protect/route API's checks at 1–3 ranks.

mod common;
use common::{build, build_example, checksum, mpiexec, Run, Scratch};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);
/// 4 ranks, a 64x64 grid, 100 iterations, a checkpoint every 10.
const GRID: [&str; 3] = ["64", "100", "10"];
/// Rank 2 dies on entering its 55th MPI_Allreduce: epoch 5 is committed.
const KILL: &str = "rank=2,call=MPI_Allreduce:55";

fn stencil(store: &str, ckpt: Option<&str>, injects: &[&str]) -> Run {
    stencil_job("stages", store, ckpt, injects, &[])
}

/// The stencil on GRID at 4 ranks in a recovery mode, with levels,
/// injections and extra environment.
fn stencil_job(
    recovery: &str,
    store: &str,
    ckpt: Option<&str>,
    injects: &[&str],
    env: &[(&str, &str)],
) -> Run {
    let exe = build_example("stencil2d.c");
    let mut a = vec!["-n", "4", "--recovery", recovery];
    if let Some(c) = ckpt {
        a.extend(["--ckpt", c]);
    }
    for i in injects {
        a.extend(["--inject", i]);
    }
    a.push(exe.to_str().unwrap());
    a.extend(GRID);
    a.push(store);
    mpiexec(&a, env, LIMIT)
}

/// The failure-free result (computed once per test process).
fn reference() -> String {
    static R: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    R.get_or_init(|| {
        let r = stencil("protect", None, &[]);
        assert!(r.ok(), "failure-free run failed:\n{}", r.stderr);
        checksum(&r)
    })
    .clone()
}

/// Runs with the injections; the job must recover and match the reference.
fn recovers(store: &str, ckpt: Option<&str>, injects: &[&str]) -> Run {
    let r = stencil(store, ckpt, injects);
    assert!(
        r.ok(),
        "{store} {ckpt:?} {injects:?} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        r.status,
        r.stdout,
        r.stderr
    );
    assert!(
        r.stderr.contains(" done: ranks"),
        "no recovery:\n{}",
        r.stderr
    );
    assert_eq!(checksum(&r), reference(), "stderr:\n{}", r.stderr);
    r
}

/// The stencil's resilient loop (examples/resilient.h) serves every mode:
/// protected data and routed files come back under reinit (the loop is
/// MPIX_Reinit's restart point) and cpr (a relaunched job) as under stages.
#[test]
fn the_resilient_loop_recovers_in_every_mode() {
    for mode in ["reinit", "cpr"] {
        for store in ["protect", "route"] {
            let r = stencil_job(mode, store, None, &[KILL], &[]);
            let what = format!("{mode} {store}: {:?}\n{}", r.status, r.stderr);
            assert!(r.ok(), "{what}");
            assert!(r.stderr.contains(" done: "), "no recovery: {what}");
            assert_eq!(checksum(&r), reference(), "{what}");
        }
    }
}

/// The node-local root of a level named by the test holds no job directory
/// once the job is over.
fn assert_no_job_dirs(root: &std::path::Path) {
    let left: Vec<_> = std::fs::read_dir(root)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in {}: {left:?}", root.display());
}

#[test]
fn protected_data_restores_from_tmpfs_alone() {
    let s = Scratch::new("storage-tmpfs");
    let spec = format!("tmpfs:{}", s.path());
    let r = recovers("protect", Some(&spec), &[KILL]);
    assert!(
        r.stderr.contains("restores epoch 5 from tmpfs"),
        "{}",
        r.stderr
    );
    assert_no_job_dirs(&s.0);
}

#[test]
fn protected_data_restores_from_partner_alone() {
    let r = recovers("protect", Some("partner"), &[KILL]);
    assert!(
        r.stderr.contains("restores epoch 5 from partner"),
        "{}",
        r.stderr
    );
}

#[test]
fn protected_data_restores_from_pfs_alone() {
    let s = Scratch::new("storage-pfs");
    let spec = format!("pfs:{}", s.path());
    let r = recovers("protect", Some(&spec), &[KILL]);
    assert!(r.stderr.contains("from pfs"), "{}", r.stderr);
    // The durable level is the user's: its files stay, and they verify.
    let epochs: Vec<_> = std::fs::read_dir(&s.0).unwrap().flatten().collect();
    assert!(!epochs.is_empty());
}

/// With the memory level alone a replacement finds no copy of any epoch:
/// the job starts again from the beginning, says why, and ends with the
/// failure-free result.
#[test]
fn memory_alone_starts_the_job_over() {
    let r = stencil("protect", Some("mem"), &[KILL]);
    assert!(r.ok(), "{}", r.stderr);
    assert!(
        r.stderr.contains("starts again from the beginning")
            && r.stderr.contains("only the mem level"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("epoch 0 restored"), "{}", r.stderr);
    assert_eq!(checksum(&r), reference(), "stderr:\n{}", r.stderr);
}

/// Campaign cause 6: `mem,pfs:DIR@every=2` with only epoch 1 committed (in
/// memory; the pfs level takes epoch 2 first) — a kill ended the job with
/// "no valid checkpoint ... wanted epoch 1" where it must start again from
/// epoch 0, in every mode.
#[test]
fn an_epoch_held_in_memory_only_falls_back_to_the_beginning() {
    for mode in ["stages", "reinit", "cpr"] {
        let s = Scratch::new(&format!("storage-every2-{mode}"));
        let spec = format!("mem,pfs:{}@every=2", s.path());
        let r = stencil_job(
            mode,
            "protect",
            Some(&spec),
            &["rank=2,call=MPI_Allreduce:15"],
            &[],
        );
        assert!(r.ok(), "{mode}: {}", r.stderr);
        assert!(
            r.stderr.contains("epoch 0 restored"),
            "{mode}: {}",
            r.stderr
        );
        assert_eq!(checksum(&r), reference(), "{mode}: stderr:\n{}", r.stderr);
    }
}

#[test]
fn routed_files_restore_with_the_default_levels() {
    recovers("route", None, &[KILL]);
}

/// A lost node (the failed rank's node-local copies deleted, and the
/// partner copies it held there) in every mode: the failed rank restores
/// from the copy its partner holds. Under cpr every process is relaunched,
/// so the partner's copy must have outlived its process: it is on the
/// partner's node-local storage, not only in its memory.
#[test]
fn lost_node_restores_from_partner_in_every_mode() {
    for mode in ["stages", "reinit", "cpr"] {
        let s = Scratch::new(&format!("storage-node-partner-{mode}"));
        let spec = format!("mem,tmpfs:{},partner", s.path());
        let kill = format!("{KILL},damage=node");
        let r = stencil_job(mode, "protect", Some(&spec), &[&kill], &[]);
        let what = format!("{mode}: {:?}\n{}", r.status, r.stderr);
        assert!(r.ok(), "{what}");
        assert!(r.stderr.contains(" done: "), "no recovery: {what}");
        assert_eq!(checksum(&r), reference(), "{what}");
        assert!(
            r.stderr.contains("node-local checkpoint file(s) of rank 2"),
            "{what}"
        );
        let who = if mode == "cpr" {
            "relaunched job: rank 2"
        } else {
            "rank 2 (replacement)"
        };
        assert!(
            r.stderr
                .contains(&format!("{who} restores epoch 5 from partner")),
            "{what}"
        );
        assert_no_job_dirs(&s.0);
    }
}

#[test]
fn lost_node_restores_from_pfs() {
    let s = Scratch::new("storage-node-pfs");
    let spec = format!("mem,tmpfs:{0}/local,pfs:{0}/durable", s.path());
    let r = recovers("protect", Some(&spec), &[&format!("{KILL},damage=node")]);
    // The flush of the newest epoch may not be finished when the node is
    // lost: then every rank goes one epoch further back.
    assert!(r.stderr.contains("from pfs"), "{}", r.stderr);
}

#[test]
fn corrupt_newest_copy_falls_back_to_the_previous_epoch() {
    let s = Scratch::new("storage-corrupt");
    let spec = format!("mem,tmpfs:{}", s.path());
    let r = recovers("protect", Some(&spec), &[&format!("{KILL},damage=corrupt")]);
    assert!(r.stderr.contains("checksum mismatch"), "{}", r.stderr);
    assert!(
        r.stderr.contains("restoring epoch 4 instead"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("restores epoch 4 from tmpfs"),
        "{}",
        r.stderr
    );
    // mpiexec reports the epoch the ranks restored, once they have (it
    // used to report the committed epoch 5 at the resume).
    assert!(
        r.stderr
            .contains("done: ranks [2] replaced, epoch 4 restored"),
        "{}",
        r.stderr
    );
}

#[test]
fn kill_while_writing_keeps_the_previous_epoch() {
    let r = recovers("protect", None, &["rank=1,writing=3"]);
    assert!(r.stderr.contains("rolls back to epoch 2"), "{}", r.stderr);
    assert!(r.stderr.contains("restores epoch 2 from"), "{}", r.stderr);
}

#[test]
fn protect_route_api_checks() {
    let exe = build("protect.c");
    let exe = exe.to_str().unwrap();
    let s = Scratch::new("storage-protect");
    let wiped = format!("mem,tmpfs:{}", s.path());
    // The default levels, then the same with the tmpfs files deleted
    // before the restore (a live rank restores from memory).
    let runs = [
        ("1", vec![]),
        ("2", vec![]),
        ("3", vec![]),
        (
            "2",
            vec![
                ("MPISTAGES_CKPT", wiped.as_str()),
                ("PROTECT_WIPE", s.path()),
            ],
        ),
    ];
    for (n, env) in runs {
        let r = mpiexec(&["-n", n, exe], &env, LIMIT);
        assert!(
            r.ok(),
            "{n} ranks: {:?}\n{}\n{}",
            r.status,
            r.stdout,
            r.stderr
        );
        assert!(
            r.stdout.contains(&format!("OK protect {n}")),
            "{}",
            r.stdout
        );
        // The cause of an error the program got is said once per rank at
        // the default log level (the same cause again: not again).
        let said = r
            .stderr
            .lines()
            .filter(|l| l.contains("MPIX_Checkpoint_restore: MPI_ERR_OTHER: no checkpoint"))
            .count();
        assert_eq!(said, n.parse::<usize>().unwrap(), "{}", r.stderr);
    }
}

/// Large regions checkpointed by a snapshot and restored by giving the
/// program the copy's pages (see tests/c/rollback_pages.c), with the
/// mem and tmpfs levels; and the same with the copy made while the program
/// waits (`MPISTAGES_SNAPSHOT=copy`, as where the kernel has no
/// userfaultfd) and without background writes (every copy then restored
/// by a move as well).
#[test]
fn large_regions_come_back_byte_for_byte_whichever_way_they_are_copied() {
    let exe = build("rollback_pages.c");
    let exe = exe.to_str().unwrap();
    let s = Scratch::new("storage-rollback-pages");
    let levels = format!("mem,tmpfs:{}", s.path());
    for extra in [
        None,
        Some(("MPISTAGES_SNAPSHOT", "copy")),
        Some(("MPISTAGES_CKPT_BACKGROUND", "0")),
    ] {
        let mut env = vec![
            ("MPISTAGES_CKPT", levels.as_str()),
            ("MPISTAGES_LOG", "debug"),
        ];
        env.extend(extra);
        let r = mpiexec(&["-n", "2", exe], &env, LIMIT);
        assert!(
            r.ok(),
            "{extra:?}: {:?}\n{}\n{}",
            r.status,
            r.stdout,
            r.stderr
        );
        assert!(r.stdout.contains("OK rollback_pages"), "{}", r.stdout);
        // Without a thread writing files from the copy, every first
        // restore of an epoch gives the pages of the two large regions
        // (6 rounds, 2 ranks).
        let moved = r.stderr.matches("restored by exchanging pages").count();
        if extra.is_some_and(|e| e.0 == "MPISTAGES_CKPT_BACKGROUND") {
            assert_eq!(moved, 6 * 2 * 2, "{}", r.stderr);
        }
    }
}

/// Epoch directories under a pfs root, and any file that is not a
/// finished checkpoint (a temporary copy left behind).
fn pfs_contents(root: &std::path::Path) -> (Vec<u64>, Vec<String>) {
    let mut epochs = Vec::new();
    let mut stray = Vec::new();
    for e in std::fs::read_dir(root).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(n) = name.strip_prefix("epoch-").and_then(|n| n.parse().ok()) else {
            stray.push(name);
            continue;
        };
        epochs.push(n);
        for f in std::fs::read_dir(e.path()).unwrap().flatten() {
            let f = f.file_name().to_string_lossy().into_owned();
            if !(f.starts_with("rank-") && f.ends_with(".ckpt")) {
                stray.push(format!("{name}/{f}"));
            }
        }
    }
    epochs.sort_unstable();
    (epochs, stray)
}

/// A job that ends normally leaves its newest epochs durable and complete
/// on a slow pfs level (MPI_Finalize waits for the background flushes), no
/// temporary files, and only `keep` epochs, with and without a recovery
/// mode (mpiexec announces committed epochs in every mode).
#[test]
fn pfs_holds_the_newest_epochs_when_a_job_ends() {
    for recovery in ["none", "stages"] {
        let s = Scratch::new(&format!("storage-pfs-end-{recovery}"));
        let durable = s.0.join("durable");
        let spec = format!(
            "mem,tmpfs:{0}/local,pfs:{0}/durable@every=1,keep=2",
            s.path()
        );
        // A slow pfs: the last flushes are still queued when the ranks
        // reach MPI_Finalize. (Slow enough that the checkpoints wait for it
        // even on a loaded machine, where ten iterations took over 30 ms.)
        let slow = [("MPISTAGES_FLUSH_DELAY_MS", "150")];
        let r = stencil_job(recovery, "protect", Some(&spec), &[], &slow);
        assert!(r.ok(), "{recovery}: {:?}\n{}", r.status, r.stderr);
        assert_eq!(checksum(&r), reference());
        let (epochs, stray) = pfs_contents(&durable);
        assert!(stray.is_empty(), "{recovery}: left on pfs: {stray:?}");
        // 100 iterations, a checkpoint every 10: epochs 1..=10, every one
        // flushed (in order), then all but the newest `keep` removed.
        assert_eq!(epochs, vec![9, 10], "{recovery}");
        // The flush is slower than the checkpoints: they waited, and said so.
        assert!(
            r.stderr.contains("is slower than the checkpoints"),
            "{recovery}: {}",
            r.stderr
        );
        let v = std::process::Command::new(env!("CARGO_BIN_EXE_mpistages-ckpt"))
            .arg("verify")
            .arg(&durable)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&v.stdout);
        assert!(v.status.success(), "{recovery}: {out}");
        assert!(out.contains("8 files, 0 corrupt"), "{recovery}: {out}");
    }
}

/// With pfs as the only level (written at every checkpoint, no flush)
/// old epochs are removed there too.
#[test]
fn a_pfs_only_job_keeps_the_newest_epochs() {
    let s = Scratch::new("storage-pfs-only");
    let spec = format!("pfs:{}/durable,keep=2", s.path());
    let r = stencil_job("none", "protect", Some(&spec), &[], &[]);
    assert!(r.ok(), "{:?}\n{}", r.status, r.stderr);
    assert_eq!(checksum(&r), reference());
    assert_eq!(pfs_contents(&s.0.join("durable")), (vec![9, 10], vec![]));
}

/// A pfs level that cannot be written is reported (once per epoch, on
/// stderr) and the job still finishes from its node-local levels.
#[test]
fn failed_pfs_flushes_are_reported() {
    let s = Scratch::new("storage-pfs-fails");
    std::fs::create_dir_all(&s.0).unwrap();
    // A regular file where the pfs directory's parent should be.
    std::fs::write(s.0.join("not-a-dir"), b"x").unwrap();
    let spec = format!(
        "mem,tmpfs:{0}/local,pfs:{0}/not-a-dir/pfs@every=5",
        s.path()
    );
    let r = stencil_job("none", "protect", Some(&spec), &[], &[]);
    assert!(r.ok(), "{:?}\n{}", r.status, r.stderr);
    assert_eq!(checksum(&r), reference());
    for epoch in [5, 10] {
        let said = r
            .stderr
            .lines()
            .filter(|l| l.contains(&format!("epoch {epoch} could not be made durable")))
            .count();
        assert_eq!(said, 4, "epoch {epoch}, one line per rank:\n{}", r.stderr);
    }
}

/// tests/c/ckptfull.c at 2 ranks with a real 256 KiB tmpfs as the first
/// level (then the levels `more` adds); none where no tmpfs can be
/// mounted (SKIPPED).
fn ckptfull_on_a_full_tmpfs(tag: &str, more: &str, env: &[(&str, &str)]) -> Option<Run> {
    let s = Scratch::new(tag);
    let _mount = common::TmpfsMount::new(&s.0, "256k")?;
    let exe = build("ckptfull.c");
    let spec = format!("tmpfs:{}{more}", s.path());
    Some(mpiexec(
        &["-n", "2", "--ckpt", &spec, exe.to_str().unwrap()],
        env,
        LIMIT,
    ))
}

/// A full checkpoint level (a real 256 KiB tmpfs): the write fails with
/// MPI_ERR_NO_SPACE, and stderr says what, where and what the job does
/// without MPISTAGES_DEBUG (it used to be MPI_ERR_OTHER, "other error").
#[test]
fn a_full_level_says_what_where_and_what_follows() {
    let Some(r) = ckptfull_on_a_full_tmpfs("storage-full", "", &[]) else {
        return;
    };
    assert!(
        r.ok() && r.stdout.contains("OK ckptfull.c"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    for rank in 0..2 {
        let line = r
            .stderr
            .lines()
            .find(|l| l.contains(&format!("MPIX_Checkpoint_write: rank {rank}: ")))
            .unwrap_or_else(|| panic!("no message from rank {rank}:\n{}", r.stderr));
        for part in [
            "checkpoint epoch 2 on tmpfs:",
            &format!("epoch-2/rank-{rank}.ckpt"),
            "No space left on device",
            "epoch 2 is not saved and will not be committed",
        ] {
            assert!(line.contains(part), "{part}: {line}");
        }
    }
}

/// Only rank 0's checkpoint does not fit, with a partner or a set level:
/// rank 0 gets MPI_ERR_NO_SPACE and still takes its part in the exchange
/// (an empty one), so rank 1 is not left waiting for it (it used to wait
/// there while rank 0 waited in the barrier after: a hang). Rank 1's own
/// write may find the shared level full at that moment, and fail too.
#[test]
fn a_rank_whose_checkpoint_fails_leaves_no_partner_waiting() {
    for scheme in ["partner", "xor:2"] {
        let only_rank_0 = [("CKPTFULL_ONLY_RANK", "0")];
        let Some(r) =
            ckptfull_on_a_full_tmpfs("storage-full-partner", &format!(",{scheme}"), &only_rank_0)
        else {
            return;
        };
        assert!(
            r.ok() && r.stdout.matches("OK ckptfull.c").count() >= 1,
            "{scheme}: {:?}\n{}\n{}",
            r.status,
            r.stdout,
            r.stderr
        );
        assert!(
            r.stderr.contains("MPIX_Checkpoint_write: rank 0: "),
            "{}",
            r.stderr
        );
    }
}

/// What a failed job leaves is removed by mpiexec: on pfs the files parked
/// for reuse (MPI_Finalize removes them, a crash did not) and temporaries
/// whose writer is gone (one is planted before the job, as a rank killed
/// while writing leaves it), and a tmpfs root the job created.
#[test]
fn a_failed_job_leaves_nothing_behind() {
    let s = Scratch::new("storage-leftovers");
    let pfs = s.0.join("durable");
    std::fs::create_dir_all(pfs.join("epoch-2")).unwrap();
    let gone = {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    };
    let planted = pfs.join(format!("epoch-2/rank-1.ckpt.flush.{gone}"));
    std::fs::write(&planted, b"half a checkpoint").unwrap();
    let spec = format!(
        "mem,tmpfs:{0}/made/by/the/job,pfs:{0}/durable,keep=2",
        s.path()
    );
    // Parking on pfs starts at the 4th checkpoint; rank 1 dies after the 6th.
    let r = stencil_job(
        "none",
        "protect",
        Some(&spec),
        &["rank=1,checkpoint=6"],
        &[],
    );
    assert_eq!(r.code(), Some(137), "{}", r.stderr);
    let mut left = Vec::new();
    let mut walk = vec![pfs.clone()];
    while let Some(d) = walk.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() {
                walk.push(e.path());
            } else if !(name.starts_with("rank-") && name.ends_with(".ckpt")) {
                left.push(e.path());
            }
        }
    }
    assert!(left.is_empty(), "left on pfs: {left:?}");
    assert!(!planted.exists());
    assert!(
        !s.0.join("made").exists(),
        "the tmpfs root the job made stays"
    );
}

/// Two failures before the first checkpoint: the rollback to epoch 0 keeps
/// MPI_COMM_WORLD's error handler (set once after MPI_Init, as in the
/// thesis's resilient loop), so the second failure is a recovery too. It
/// used to reset it to MPI_ERRORS_ARE_FATAL and end the job (found by the
/// campaign, seed 24, run 72).
#[test]
fn a_second_failure_before_the_first_checkpoint_recovers() {
    let r = stencil_job(
        "stages",
        "protect",
        None,
        &["rank=2,call=MPI_Allreduce:3", "rank=1,call=MPI_Allreduce:9"],
        &[],
    );
    assert!(r.ok(), "{:?}\n{}", r.status, r.stderr);
    let done: Vec<&str> = r.stderr.lines().filter(|l| l.contains(" done: ")).collect();
    assert_eq!(done.len(), 2, "{}", r.stderr);
    assert!(
        done.iter().all(|l| l.contains("epoch 0 restored")),
        "{}",
        r.stderr
    );
    assert_eq!(checksum(&r), reference());
}

/// A job that ended on a failure (no recovery mode: the whole job is
/// lost, as in a crash) starts again with `mpiexec --restart DIR` from the
/// newest epoch every rank has on its pfs level, in each recovery mode,
/// and finishes with the failure-free result. Misuse is refused with a
/// message: no recovery mode, DIR not a pfs level of the job, nothing in
/// DIR, checkpoints of another number of ranks.
#[test]
fn a_crashed_job_restarts_from_its_pfs_checkpoints() {
    for mode in ["cpr", "stages", "reinit"] {
        let s = Scratch::new(&format!("storage-restart-{mode}"));
        let pfs = format!("{}/pfs", s.path());
        let spec = format!("mem,tmpfs:{0}/local,pfs:{pfs}", s.path());
        let crash = stencil_job("none", "protect", Some(&spec), &[KILL], &[]);
        assert!(!crash.ok(), "{mode}: the job must end on the kill");
        let exe = build_example("stencil2d.c");
        let mut a = vec!["-n", "4", "--recovery", mode, "--restart", &pfs];
        a.extend(["--ckpt", &spec, exe.to_str().unwrap()]);
        a.extend(GRID);
        a.push("protect");
        let r = mpiexec(&a, &[], LIMIT);
        let what = format!("{mode}: {:?}\n{}", r.status, r.stderr);
        assert!(r.ok(), "{what}");
        // Epoch 5 is committed when rank 2 dies; the flushes to pfs run in
        // the background and may be an epoch or two behind on some rank:
        // then the restart takes the newest epoch every rank has there.
        let from: u64 = r
            .stderr
            .split("restarting from epoch ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{what}"));
        assert!((1..=5).contains(&from), "{what}");
        assert!(
            r.stderr
                .contains(&format!("restart done: every rank restored epoch {from}")),
            "{what}"
        );
        assert_eq!(checksum(&r), reference(), "{what}");
        assert_no_job_dirs(&s.0.join("local"));
        if mode != "cpr" {
            continue;
        }
        // Misuse: each a clear message and no job.
        let exe = exe.to_str().unwrap();
        let refused = |args: &[&str], says: &str| {
            let r = mpiexec(args, &[], LIMIT);
            assert!(!r.ok() && r.stderr.contains(says), "{args:?}: {}", r.stderr);
        };
        refused(
            &["-n", "4", "--restart", &pfs, "--ckpt", &spec, exe],
            "--restart needs a recovery mode",
        );
        let empty = format!("{}/empty", s.path());
        std::fs::create_dir_all(&empty).unwrap();
        let cases = [
            (
                "4",
                &pfs,
                format!("mem,pfs:{}/elsewhere", s.path()),
                "must include pfs:",
            ),
            (
                "4",
                &empty,
                format!("mem,pfs:{empty}"),
                "no checkpoint epoch there",
            ),
            ("2", &pfs, spec.clone(), "start it with -n 4"),
        ];
        for (n, dir, ckpt, says) in &cases {
            let restart = ["-n", n, "--recovery", "cpr", "--restart", dir];
            refused(&[&restart[..], &["--ckpt", ckpt, exe]].concat(), says);
        }
    }
}

/// Removes a directory when dropped (also when the test fails).
struct RemoveOnDrop(std::path::PathBuf);
impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An mpiexec that is ended (SIGTERM: it ends its ranks) and reaped if the
/// test fails before it finished.
struct Job(Option<std::process::Child>);
impl Job {
    fn finish(mut self) -> Run {
        common::finish(self.0.take().expect("running"), "mpiexec", LIMIT)
    }
}
impl Drop for Job {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            // SAFETY: kill takes no pointers; the pid is our child's.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }
}

/// Another user of the node (`nobody`) reads no byte of a running or ended
/// job's checkpoints, whatever the umask the job ran with (0 here): the
/// job's node-local directory (parked files included) and every epoch
/// directory are 0700, every file 0600. Before, the parked
/// `free-N-rank-R.ckpt` files sat in a 0755 directory as 0644 files.
#[test]
fn another_user_reads_nothing_of_a_jobs_checkpoints() {
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/usr/bin/setpriv").exists() {
        common::skipped("needs root and setpriv to act as nobody");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    // Under /tmp, 0755 all the way: nobody can reach the levels' roots.
    let base = std::env::temp_dir().join(format!("mpistages-private-{}", std::process::id()));
    let _clean = RemoveOnDrop(base.clone());
    let (tmpfs, pfs) = (base.join("tmpfs"), base.join("pfs"));
    for d in [&base, &tmpfs, &pfs] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let as_nobody = |args: &[&str]| {
        std::process::Command::new("/usr/bin/setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .args(args)
            .output()
            .unwrap()
    };
    assert!(
        as_nobody(&["ls", tmpfs.to_str().unwrap()]).status.success(),
        "nobody cannot reach the level's root"
    );
    let exe = build_example("stencil2d.c");
    let cmd = format!(
        "umask 000; exec {} -n 2 --recovery stages --ckpt tmpfs:{},pfs:{} {} 128 20000 10 protect",
        common::bin("mpiexec").display(),
        tmpfs.display(),
        pfs.display(),
        exe.display()
    );
    let job = Job(Some(
        common::command("sh")
            .args(["-c", &cmd])
            // Shared memory between the two ranks whatever transport the
            // suite's pass names: its sockets are checked below.
            .env("MPISTAGES_TRANSPORT", "auto")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    // Every file and directory under the roots, found as root.
    let walk = |root: &std::path::Path| -> Vec<(std::path::PathBuf, u32, bool)> {
        let mut out = Vec::new();
        let mut todo = vec![root.to_path_buf()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let Ok(md) = std::fs::symlink_metadata(e.path()) else {
                    continue;
                };
                if md.is_dir() {
                    todo.push(e.path());
                }
                out.push((e.path(), md.permissions().mode() & 0o777, md.is_dir()));
            }
        }
        out
    };
    let check = |when: &str| -> usize {
        let found: Vec<_> = [&tmpfs, &pfs].iter().flat_map(|r| walk(r)).collect();
        for (p, mode, dir) in &found {
            let want = if *dir { 0o700 } else { 0o600 };
            assert_eq!(*mode, want, "{when}: {} is {mode:o}", p.display());
        }
        let files: Vec<String> = found
            .iter()
            .filter(|f| !f.2)
            .map(|f| f.0.display().to_string())
            .collect();
        if !files.is_empty() {
            // cat each one as nobody: none may be read (a file gone since
            // the walk fails too, and is no leak).
            let mut script = String::from(
                "for f in \"$@\"; do cat \"$f\" >/dev/null 2>&1 && echo \"READ $f\"; done; true",
            );
            script.push('\n');
            let mut args = vec!["sh", "-c", script.as_str(), "sh"];
            args.extend(files.iter().map(String::as_str));
            let out = as_nobody(&args);
            let read = String::from_utf8_lossy(&out.stdout);
            assert!(read.trim().is_empty(), "{when}: another user read:\n{read}");
        }
        files.len()
    };
    let started = std::time::Instant::now();
    let mut seen = 0;
    let mut sockets = 0;
    let run = loop {
        seen = seen.max(check("while the job runs"));
        // The ranks' shared-memory sockets are abstract (no permissions):
        // another user's connection is closed at once, never held.
        let names = listening_abstract_sockets("mpistages-");
        sockets = sockets.max(names.len());
        for n in &names {
            assert!(
                !held_open_for_nobody(n),
                "nobody's connection to @{} was held open",
                String::from_utf8_lossy(n)
            );
        }
        if started.elapsed() > Duration::from_secs(2) || seen > 4 {
            break job.finish();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(run.ok(), "{}", run.stderr);
    assert!(seen > 0, "no checkpoint file was seen while the job ran");
    assert!(
        sockets > 0,
        "no shared-memory socket was seen while the job ran"
    );
    assert!(check("after the job") > 0, "the pfs level kept nothing");
}

/// The abstract Unix addresses (without the leading NUL) that listen now
/// and start with `prefix` (from /proc/net/unix, where they show as @name).
fn listening_abstract_sockets(prefix: &str) -> Vec<Vec<u8>> {
    let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Flags 00010000: listening; the path is the last field.
            let name = f.get(7)?.strip_prefix('@')?;
            (f[3] == "00010000" && name.starts_with(prefix)).then(|| name.as_bytes().to_vec())
        })
        .collect()
}

/// Whether a connection of user nobody to the abstract address `name`
/// stays open for a second (a forked child drops to uid 65534, connects
/// and waits for a byte or the end).
fn held_open_for_nobody(name: &[u8]) -> bool {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name).unwrap();
    // SAFETY: the child only makes system calls and exits (glibc keeps
    // malloc usable after fork), never returning into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        // SAFETY: plain system calls in the child.
        let dropped = unsafe { libc::setgid(65534) == 0 && libc::setuid(65534) == 0 };
        let code = match std::os::unix::net::UnixStream::connect_addr(&addr) {
            _ if !dropped => 3,
            Err(_) => 0,
            Ok(mut s) => {
                use std::io::Read;
                s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
                match s.read(&mut [0u8; 1]) {
                    Ok(0) => 0,
                    Ok(_) => 2,
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => 0,
                    Err(_) => 1,
                }
            }
        };
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) != 3,
        "the child could not become nobody"
    );
    libc::WEXITSTATUS(status) != 0
}
