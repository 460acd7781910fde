//! Tests of the recovery state machine: every step of a recovery, with
//! failures in between, without processes or sockets.

use super::*;

const UP: Facts = Facts {
    bootstrapped: true,
    finalizing: None,
};

fn now() -> Instant {
    Instant::now()
}

/// A job of `n` ranks that all committed epoch `epoch`.
fn job(n: usize, relaunches: bool, epoch: u64) -> Recoveries {
    let mut j = Recoveries::new(n, relaunches, 10);
    for r in 0..n {
        j.checkpoint(r, epoch, None);
    }
    assert_eq!(j.committed(), epoch);
    j
}

/// Every rank but `except` halts and every rank is ready at the
/// current generation; the last report resumes.
fn barrier(j: &mut Recoveries, holds: u64) -> Option<Resume> {
    let g = j.generation();
    let n = j.said.len();
    let failed = j.recovering().map(|r| r.failed.clone()).unwrap_or_default();
    for r in (0..n).filter(|r| !failed.contains(r)) {
        assert_eq!(j.halted(r, g, now()), None);
    }
    let mut resume = None;
    for r in 0..n {
        assert!(resume.is_none(), "resumed before rank {r} was ready");
        resume = j.ready(r, g, Some(holds), now());
    }
    resume
}

fn restore_all(j: &mut Recoveries, epoch: u64) -> Option<Done> {
    let g = j.generation();
    let n = j.said.len();
    let mut done = None;
    for r in 0..n {
        assert!(done.is_none(), "done before rank {r} restored");
        done = j.restored(r, g, epoch);
    }
    done
}

#[test]
fn a_failure_is_replaced_resumed_and_confirmed() {
    let mut j = job(4, false, 3);
    let d = j.failed(2, UP, now(), now());
    assert_eq!(
        d,
        Decision::Replace {
            rank: 2,
            number: 1,
            epoch: 3,
            generation: 1
        }
    );
    assert_eq!(j.restart_epoch(), 3);
    j.started(2);
    j.spawned(now());
    // Checkpoint reports of the rolled-back epochs do not count.
    assert_eq!(j.checkpoint(0, 4, None), None);
    let resume = barrier(&mut j, 3);
    assert_eq!(
        resume,
        Some(Resume {
            generation: 1,
            agreed: Some(3)
        })
    );
    assert!(j.recovering().is_none());
    let done = restore_all(&mut j, 3).expect("every rank restored");
    assert_eq!((done.recovery.number, done.epoch), (1, 3));
    assert_eq!(done.recovery.failed, vec![2]);
    let r = &done.recovery;
    assert!(r.propagated.is_some() && r.restored.is_some() && r.resumed.is_some());
    // The job goes on: checkpoints count again.
    for r in 0..4 {
        j.checkpoint(r, 4, None);
    }
    assert_eq!(j.committed(), 4);
}

#[test]
fn failures_are_refused_before_start_up_after_finalize_and_past_the_budget() {
    let mut j = job(2, false, 1);
    let starting = Facts {
        bootstrapped: false,
        finalizing: None,
    };
    assert!(
        matches!(j.failed(0, starting, now(), now()), Decision::Refuse(w) if w.contains("start-up"))
    );
    let done = Facts {
        bootstrapped: true,
        finalizing: Some(1),
    };
    assert!(
        matches!(j.failed(0, done, now(), now()), Decision::Refuse(w) if w.contains("rank 1 has already called MPI_Finalize"))
    );
    assert_eq!(j.generation(), 0, "a refusal changes nothing");
    let mut j = Recoveries::new(2, false, 1);
    assert!(matches!(
        j.failed(0, UP, now(), now()),
        Decision::Replace { .. }
    ));
    assert!(
        matches!(j.failed(1, UP, now(), now()), Decision::Refuse(w) if w.contains("--max-restarts 1"))
    );
    // The ranks of a lost host fail together: one restart of the budget.
    let mut j = Recoveries::new(4, false, 1);
    for r in 0..3 {
        j.with_last_failure(r > 0);
        assert!(
            matches!(j.failed(r, UP, now(), now()), Decision::Replace { .. }),
            "rank {r}"
        );
    }
    assert!(matches!(j.failed(3, UP, now(), now()), Decision::Refuse(_)));
}

/// A second failure at every step of a recovery joins it: same
/// number, both ranks replaced, a new generation, and only what the
/// ranks say at that generation counts.
#[test]
fn a_second_failure_at_every_step_joins_the_recovery() {
    for step in 0..5 {
        let mut j = job(4, false, 2);
        j.failed(1, UP, now(), now());
        j.started(1);
        let g1 = j.generation();
        match step {
            0 => {}
            1 => {
                j.halted(0, g1, now());
            }
            2 => {
                for r in [0, 2, 3] {
                    j.halted(r, g1, now());
                }
                j.ready(1, g1, Some(2), now());
            }
            3 => {
                for r in 0..4 {
                    j.ready(r, g1, Some(2), now());
                }
                assert!(j.recovering().is_none(), "resumed");
            }
            _ => {
                for r in 0..4 {
                    j.ready(r, g1, Some(2), now());
                }
                j.restored(0, g1, 2);
                j.restored(1, g1, 2);
            }
        }
        let d = j.failed(3, UP, now(), now());
        assert_eq!(
            d,
            Decision::Replace {
                rank: 3,
                number: 1,
                epoch: 2,
                generation: 2
            },
            "step {step}"
        );
        j.started(3);
        let rec = j.recovering().expect("the recovery goes on");
        assert_eq!(rec.failed, vec![1, 3], "step {step}");
        // What was said at generation 1 is no longer enough.
        assert!(j.confirmed().is_none(), "step {step}");
        let g2 = j.generation();
        assert_eq!(j.ready(0, g1, Some(2), now()), None, "step {step}");
        assert_eq!(j.restored(0, g1, 2).map(|d| d.epoch), None);
        assert_eq!(g2, 2);
        assert_eq!(
            barrier(&mut j, 2),
            Some(Resume {
                generation: 2,
                agreed: Some(2)
            }),
            "step {step}"
        );
        let done = restore_all(&mut j, 2).expect("confirmed at generation 2");
        assert_eq!(
            (done.recovery.number, done.generation),
            (1, 2),
            "step {step}"
        );
    }
}

#[test]
fn the_same_rank_failing_again_is_replaced_again() {
    let mut j = job(3, false, 1);
    j.failed(2, UP, now(), now());
    j.started(2);
    let d = j.failed(2, UP, now(), now());
    assert!(matches!(
        d,
        Decision::Replace {
            rank: 2,
            number: 1,
            generation: 2,
            ..
        }
    ));
    assert_eq!(j.recovering().unwrap().failed, vec![2]);
}

#[test]
fn a_failure_after_a_confirmed_recovery_is_a_new_one() {
    let mut j = job(2, false, 1);
    j.failed(0, UP, now(), now());
    barrier(&mut j, 1);
    restore_all(&mut j, 1).expect("done");
    let d = j.failed(1, UP, now(), now());
    assert!(matches!(
        d,
        Decision::Replace {
            number: 2,
            generation: 2,
            ..
        }
    ));
    assert_eq!(j.recovering().unwrap().failed, vec![1]);
}

#[test]
fn ranks_that_hold_different_copies_agree_after_resuming() {
    let mut j = job(3, false, 5);
    j.failed(0, UP, now(), now());
    let g = j.generation();
    for r in [1, 2] {
        j.halted(r, g, now());
    }
    j.ready(0, g, Some(5), now());
    j.ready(1, g, Some(5), now());
    let resume = j.ready(2, g, Some(4), now());
    assert_eq!(
        resume,
        Some(Resume {
            generation: g,
            agreed: None
        })
    );
    // They fell back to epoch 4 together.
    assert_eq!(restore_all(&mut j, 4).map(|d| d.epoch), Some(4));
}

#[test]
fn a_rank_that_finalizes_during_a_recovery_ends_it() {
    let mut j = job(3, false, 1);
    assert_eq!(j.finalizing(0), None, "no recovery");
    j.failed(2, UP, now(), now());
    assert_eq!(j.finalizing(0), Some((1, vec![2])));
    // A rank that was ready at this generation finalizes after the
    // resume: that is normal.
    j.ready(1, j.generation(), Some(1), now());
    assert_eq!(j.finalizing(1), None);
}

#[test]
fn cpr_relaunches_everyone_once_the_old_processes_are_gone() {
    let mut j = job(3, true, 2);
    let d = j.failed(1, UP, now(), now());
    assert_eq!(
        d,
        Decision::Relaunch {
            number: 1,
            epoch: 2,
            generation: 1
        }
    );
    assert!(j.tearing_down_for_relaunch());
    assert!(!j.relaunch_now(false, now()), "ranks still alive");
    assert!(j.relaunch_now(true, now()));
    j.spawned(now());
    assert!(!j.relaunch_now(true, now()), "once");
    assert!(!j.tearing_down_for_relaunch());
    for r in 0..3 {
        j.started(r);
    }
    assert_eq!(j.recovering().unwrap().failed, vec![0, 1, 2]);
    // Relaunched ranks are fresh: nobody halts, all are ready.
    let g = j.generation();
    let mut resume = None;
    for r in 0..3 {
        resume = j.ready(r, g, Some(2), now());
    }
    assert!(resume.is_some());
    assert_eq!(restore_all(&mut j, 2).map(|d| d.epoch), Some(2));
}

#[test]
fn cpr_a_failure_during_the_relaunch_relaunches_again() {
    let mut j = job(2, true, 1);
    j.failed(0, UP, now(), now());
    assert!(j.relaunch_now(true, now()));
    j.spawned(now());
    let d = j.failed(1, UP, now(), now());
    assert_eq!(
        d,
        Decision::Relaunch {
            number: 1,
            epoch: 1,
            generation: 2
        }
    );
    assert!(
        j.tearing_down_for_relaunch(),
        "kill the relaunched job again"
    );
}
