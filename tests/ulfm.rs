//! ULFM (`mpiexec --with-ft ulfm`) and `MPI_Comm_spawn`: real processes,
//! real SIGKILLs. The survivors get MPIX_ERR_PROC_FAILED, revoke, agree
//! (also with a failure during the agreement), acknowledge and shrink,
//! with values checked (tests/c/ulfm.c), and the job ends well without
//! the dead ranks; spawned processes talk to their parents, also as the
//! replacement of a dead rank (tests/c/spawn.c).

mod common;
use common::{build, mpiexec};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn survivors_revoke_agree_acknowledge_and_shrink() {
    let exe = build("ulfm.c");
    for np in [4, 5] {
        let n = np.to_string();
        let r = mpiexec(
            &["-n", &n, "--with-ft", "ulfm", exe.to_str().unwrap()],
            &[],
            LIMIT,
        );
        let what = format!("{np} ranks: {:?}\n{}\n{}", r.status, r.stdout, r.stderr);
        assert!(r.ok(), "{what}");
        for x in 0..np - 2 {
            assert!(r.stdout.contains(&format!("ulfm ok {x}\n")), "{what}");
        }
        for x in [np - 2, np - 1] {
            assert!(!r.stdout.contains(&format!("ulfm ok {x}\n")), "{what}");
            assert!(
                r.stderr.contains(&format!("rank {x} (pid"))
                    && r.stderr.contains("the job goes on without it (ULFM)"),
                "{what}"
            );
        }
    }
}

/// A window's fence and a file's collective write with a dead member fail
/// with MPIX_ERR_PROC_FAILED at every survivor; a lock the dead member
/// held is released for it (another origin gets it); free and close
/// release them; a window and a file on the shrunk communicator work.
#[test]
fn windows_and_files_fail_cleanly_and_the_survivors_make_new_ones() {
    let exe = build("ulfm_rma.c");
    for np in [3, 4] {
        let dir = common::Scratch::new(&format!("ulfm-rma-{np}"));
        let n = np.to_string();
        let r = mpiexec(
            &["-n", &n, "--with-ft", "ulfm", exe.to_str().unwrap()],
            &[("FILE_TEST_DIR", dir.path())],
            LIMIT,
        );
        let what = format!("{np} ranks: {:?}\n{}\n{}", r.status, r.stdout, r.stderr);
        assert!(r.ok(), "{what}");
        for x in 0..np - 1 {
            assert!(r.stdout.contains(&format!("ulfm rma ok {x}\n")), "{what}");
        }
        assert!(
            !r.stdout.contains(&format!("ulfm rma ok {}\n", np - 1)),
            "{what}"
        );
        let left: Vec<_> = std::fs::read_dir(&dir.0).unwrap().flatten().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

/// `MPI_Comm_spawn` without failures (the default mode): children with a
/// world of their own, messages and a collective over the
/// inter-communicator, a merge, a sum over it.
#[test]
fn spawned_processes_talk_to_their_parents() {
    let exe = build("spawn.c");
    for np in [1, 3] {
        let n = np.to_string();
        let r = mpiexec(&["-n", &n, exe.to_str().unwrap()], &[], LIMIT);
        let what = format!("{np} ranks: {:?}\n{}\n{}", r.status, r.stdout, r.stderr);
        assert!(r.ok(), "{what}");
        assert_eq!(r.stdout.matches("spawn ok parent").count(), np, "{what}");
        assert_eq!(r.stdout.matches("spawn ok child").count(), 2, "{what}");
    }
}

/// Spawning again after the children of an earlier spawn ended (mpi4py's
/// test_util_pool): the new children started, as before this fix, by
/// connecting to every earlier process, the ended ones too, and failed
/// ("connecting to rank 1 ... refused"). Each round's children also reach
/// their parents through a port.
#[test]
fn spawning_again_after_the_children_ended() {
    let exe = build("spawn_rounds.c");
    for np in [1, 3] {
        let n = np.to_string();
        let r = mpiexec(&["-n", &n, exe.to_str().unwrap()], &[], LIMIT);
        let what = format!("{np} ranks: {:?}\n{}\n{}", r.status, r.stdout, r.stderr);
        assert!(r.ok(), "{what}");
        for round in 0..3 {
            let parent = format!("round ok parent {round}\n");
            let child = format!("round ok child {round}\n");
            assert_eq!(r.stdout.matches(&parent).count(), np, "{what}");
            assert_eq!(r.stdout.matches(&child).count(), 2, "{what}");
        }
    }
}

/// MPI_Abort on MPI_COMM_SELF ends the caller alone under ULFM (the
/// bag-of-tasks tutorial in Fortran injects its failure so; it ended the
/// whole job before), and the whole job without fault tolerance.
#[test]
fn abort_on_self_ends_only_the_caller_under_ulfm() {
    let exe = build("abort_self.c");
    let exe = exe.to_str().unwrap();
    let r = mpiexec(&["-n", "4", "--with-ft", "ulfm", exe], &[], LIMIT);
    let what = format!("{:?}\n{}\n{}", r.status, r.stdout, r.stderr);
    for rank in [0, 2, 3] {
        assert!(
            r.stdout.contains(&format!("abort_self ok {rank}\n")),
            "{what}"
        );
    }
    assert!(!r.stdout.contains("abort_self ok 1"), "{what}");
    assert!(
        r.stderr
            .contains("rank 1: MPI_Abort on a communicator of this process alone"),
        "{what}"
    );
    let r = mpiexec(&["-n", "4", exe], &[], LIMIT);
    let what = format!("{:?}\n{}\n{}", r.status, r.stdout, r.stderr);
    assert!(!r.ok() && !r.stdout.contains("abort_self ok"), "{what}");
    assert!(r.stderr.contains("called MPI_Abort"), "{what}");
}

/// ULFM's respawn: the last rank dies, the survivors shrink and spawn its
/// replacement, and the merged communicator has the original size.
#[test]
fn survivors_respawn_a_dead_rank() {
    let exe = build("spawn.c");
    for np in [2, 4] {
        let n = np.to_string();
        let r = mpiexec(
            &[
                "-n",
                &n,
                "--with-ft",
                "ulfm",
                exe.to_str().unwrap(),
                "respawn",
            ],
            &[],
            LIMIT,
        );
        let what = format!("{np} ranks: {:?}\n{}\n{}", r.status, r.stdout, r.stderr);
        assert!(r.ok(), "{what}");
        assert_eq!(
            r.stdout.matches("spawn ok parent").count(),
            np - 1,
            "{what}"
        );
        assert!(
            r.stdout.contains(&format!("spawn ok child {}\n", np - 1)),
            "{what}"
        );
    }
}

/// Where spawning is not supported (a rollback mode), the call fails
/// with MPI_ERR_SPAWN and says why; nothing hangs.
#[test]
fn spawn_under_a_rollback_mode_is_refused_clearly() {
    let exe = build("spawn.c");
    let r = mpiexec(
        &["-n", "2", "--recovery", "stages", exe.to_str().unwrap()],
        &[],
        LIMIT,
    );
    let what = format!("{:?}\n{}\n{}", r.status, r.stdout, r.stderr);
    assert!(!r.ok(), "{what}");
    assert!(r.stderr.contains("MPI_ERR_SPAWN"), "{what}");
    assert!(
        r.stderr.contains("not supported under --recovery stages"),
        "{what}"
    );
}

/// A rank that dies before every rank has started (campaign cause 5: a
/// host lost during start-up) ends a ULFM job with a message and a failure
/// status: the others' MPI_Init failed with "expected a welcome from
/// mpiexec" and mpiexec exited 0 without a word.
#[test]
fn a_rank_dead_before_the_start_ends_a_ulfm_job_clearly() {
    let exe = build("dies_at_start.c");
    let r = mpiexec(
        &["-n", "4", "--with-ft", "ulfm", exe.to_str().unwrap(), "2"],
        &[],
        LIMIT,
    );
    let what = format!("{:?}\n{}\n{}", r.status, r.stdout, r.stderr);
    assert!(!r.ok(), "{what}");
    assert!(r.status.code().is_some_and(|c| c != 0), "{what}");
    assert!(
        r.stderr.contains("rank 2 (pid") && r.stderr.contains("before every rank had started"),
        "{what}"
    );
    assert!(!r.stderr.contains("expected a welcome"), "{what}");
}

/// A rank killed while the ranks run large collectives that copy from each
/// other's memory (tests/c/ulfm_copied.c: the kill lands at a moment its
/// own main thread does not choose): every survivor gets
/// MPIX_ERR_PROC_FAILED or MPIX_ERR_REVOKED from a collective and ends.
#[test]
fn a_rank_killed_during_copied_collectives_fails_them_at_every_survivor() {
    let exe = build("ulfm_copied.c");
    for delay_us in ["40000", "150000", "300000"] {
        let r = mpiexec(
            &[
                "-n",
                "4",
                "--with-ft",
                "ulfm",
                exe.to_str().unwrap(),
                delay_us,
            ],
            &[],
            LIMIT,
        );
        let what = format!(
            "delay {delay_us}: {:?}\n{}\n{}",
            r.status, r.stdout, r.stderr
        );
        assert!(r.ok(), "{what}");
        for x in 0..3 {
            assert!(r.stdout.contains(&format!("survivor {x}: ")), "{what}");
        }
        assert!(r.stderr.contains("rank 3 (pid"), "{what}");
    }
}
