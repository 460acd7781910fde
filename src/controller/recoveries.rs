//! The job's recoveries as a state machine without processes or sockets:
//! events in (a rank failed, a rank reported a checkpoint, halted, was
//! ready, restored), decisions out (refuse, replace, relaunch, resume,
//! done). It owns the generation, the committed epoch, what every rank
//! said, and the recovery in progress; `mpiexec` (the rest of the
//! controller) does what the decisions say: prints, sends, kills, starts.

use super::barrier::{self, Said};
use std::time::Instant;

/// What the controller knows of the job that can forbid a recovery.
#[derive(Clone, Copy, Debug, Default)]
pub struct Facts {
    /// Every rank got its first Welcome.
    pub bootstrapped: bool,
    /// A rank that has called MPI_Finalize, if any.
    pub finalizing: Option<usize>,
}

/// What a failure of a rank means.
#[derive(Debug, PartialEq)]
pub enum Decision {
    /// The job cannot recover, for this reason: it ends.
    Refuse(String),
    /// Replace `rank` (a spare or a new process) at `generation`; every
    /// rank rolls back to `epoch`. `number` counts recoveries: a failure
    /// during a recovery joins it.
    Replace {
        rank: usize,
        number: usize,
        epoch: u64,
        generation: u32,
    },
    /// `cpr`: kill every rank, and start the job again at `generation`
    /// from `epoch` once all are gone (`Recoveries::relaunch_now`).
    Relaunch {
        number: usize,
        epoch: u64,
        generation: u32,
    },
}

/// Every rank is ready at `generation`: tell all to resume, with the epoch
/// they all hold when they agree on one.
#[derive(Debug, PartialEq)]
pub struct Resume {
    pub generation: u32,
    pub agreed: Option<u64>,
}

/// A recovery in progress, with its timeline.
#[derive(Clone, Debug)]
pub struct Recovering {
    pub number: usize,
    /// The ranks being replaced (every rank when the job is relaunched).
    pub failed: Vec<usize>,
    /// The epoch every rank rolls back to.
    pub epoch: u64,
    /// Kill time when known (injected), else detection.
    pub start: Instant,
    pub detected: Instant,
    pub propagated: Option<Instant>,
    pub spawned: Option<Instant>,
    pub restored: Option<Instant>,
    /// Every rank was told to resume (then the recovery waits for every
    /// rank to confirm its restore before it is reported done).
    pub resumed: Option<Instant>,
}

/// A recovery every rank confirmed: `epoch` restored everywhere.
#[derive(Debug)]
pub struct Done {
    pub recovery: Recovering,
    pub epoch: u64,
    pub generation: u32,
}

/// What one rank reported besides the barrier: its checkpoints.
#[derive(Clone, Copy, Debug, Default)]
struct Progress {
    /// Newest checkpoint epoch the rank completed.
    epoch: u64,
    /// Newest epoch the rank reported durable on its pfs level.
    durable: Option<u64>,
}

pub struct Recoveries {
    /// `cpr`: a failure relaunches the whole job.
    relaunches: bool,
    max_restarts: usize,
    /// Bumped at each failure; messages of older generations are fenced off.
    generation: u32,
    /// Newest epoch every rank completed.
    committed: u64,
    /// Newest epoch every rank has on its pfs level.
    durable: Option<u64>,
    restarts: usize,
    count: usize,
    said: Vec<Said>,
    progress: Vec<Progress>,
    recovering: Option<Recovering>,
    /// A recovery whose ranks resumed and are restoring their data: done
    /// once every rank confirmed (a restore can still fail, or fall back
    /// to an older epoch than the committed one).
    confirming: Option<Recovering>,
}

impl Recoveries {
    pub fn new(ranks: usize, relaunches: bool, max_restarts: usize) -> Recoveries {
        Recoveries {
            relaunches,
            max_restarts,
            generation: 0,
            committed: 0,
            durable: None,
            restarts: 0,
            count: 0,
            said: vec![Said::default(); ranks],
            progress: vec![Progress::default(); ranks],
            recovering: None,
            confirming: None,
        }
    }

    pub fn generation(&self) -> u32 {
        self.generation
    }

    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// The recovery in progress (until every rank resumed).
    pub fn recovering(&self) -> Option<&Recovering> {
        self.recovering.as_ref()
    }

    /// The epoch a process started now restores (0: none, a fresh start).
    pub fn restart_epoch(&self) -> u64 {
        self.recovering.as_ref().map_or(0, |r| r.epoch)
    }

    /// `cpr`: the failed job's processes are being killed, none restarted.
    pub fn tearing_down_for_relaunch(&self) -> bool {
        self.relaunches
            && self
                .recovering
                .as_ref()
                .is_some_and(|r| r.spawned.is_none())
    }

    /// A new process for `rank`: what the old one said no longer counts.
    pub fn started(&mut self, rank: usize) {
        let s = &mut self.said[rank];
        s.halted = None;
        s.ready = None;
        s.newest = None;
    }

    /// Why a failure cannot be recovered from, if it cannot.
    fn refusal(&self, facts: Facts) -> Option<String> {
        if !facts.bootstrapped {
            Some("it failed during start-up, before every rank joined".to_string())
        } else if let Some(q) = facts.finalizing {
            Some(format!(
                "rank {q} has already called MPI_Finalize and a finalized rank cannot take part in a recovery"
            ))
        } else if self.restarts >= self.max_restarts {
            Some(format!(
                "the restart budget is spent ({} recoveries, --max-restarts {})",
                self.restarts, self.max_restarts
            ))
        } else {
            None
        }
    }

    /// `rank`'s process ended abnormally (killed at `start` when known).
    pub fn failed(&mut self, rank: usize, facts: Facts, start: Instant, now: Instant) -> Decision {
        if let Some(why) = self.refusal(facts) {
            return Decision::Refuse(why);
        }
        self.restarts += 1;
        self.generation += 1;
        if self.recovering.is_none() {
            // A failure before every rank confirmed its restore: the same
            // recovery goes on.
            self.recovering = self.confirming.take();
        }
        let rec = self.recovering.get_or_insert_with(|| {
            self.count += 1;
            Recovering {
                number: self.count,
                failed: Vec::new(),
                epoch: self.committed,
                start,
                detected: now,
                propagated: None,
                spawned: None,
                restored: None,
                resumed: None,
            }
        });
        rec.propagated = None;
        rec.restored = None;
        let (number, epoch, generation) = (rec.number, rec.epoch, self.generation);
        if self.relaunches {
            rec.failed = (0..self.said.len()).collect();
            rec.spawned = None;
            for p in &mut self.progress {
                p.epoch = epoch;
            }
            return Decision::Relaunch {
                number,
                epoch,
                generation,
            };
        }
        if !rec.failed.contains(&rank) {
            rec.failed.push(rank);
        }
        self.progress[rank].epoch = epoch;
        Decision::Replace {
            rank,
            number,
            epoch,
            generation,
        }
    }

    /// Replacements were started at `now`.
    pub fn spawned(&mut self, now: Instant) {
        if let Some(rec) = self.recovering.as_mut() {
            rec.spawned = Some(now);
        }
    }

    /// `cpr`: whether to start every rank again now that `all_gone` says
    /// whether the old processes are all reaped. True once.
    pub fn relaunch_now(&mut self, all_gone: bool, now: Instant) -> bool {
        if !all_gone || !self.tearing_down_for_relaunch() {
            return false;
        }
        if let Some(rec) = self.recovering.as_mut() {
            rec.propagated = Some(now);
        }
        true
    }

    /// A rank reached MPI_Finalize. If a recovery waits for it, it will
    /// never roll back: the recovery that cannot complete (its number and
    /// failed ranks) is returned and the job must end.
    pub fn finalizing(&self, rank: usize) -> Option<(usize, Vec<usize>)> {
        let rec = self.recovering.as_ref()?;
        (self.said[rank].ready != Some(self.generation)).then(|| (rec.number, rec.failed.clone()))
    }

    /// A rank completed checkpoint `epoch` (and holds `durable` on pfs).
    /// Returns the new committed and durable epochs when either advanced.
    pub fn checkpoint(
        &mut self,
        rank: usize,
        epoch: u64,
        durable: Option<u64>,
    ) -> Option<(u64, Option<u64>)> {
        // During a recovery the epoch to restore is fixed; reports from
        // ranks that had not stopped yet are for epochs being rolled back.
        if self.recovering.is_some() {
            return None;
        }
        let p = &mut self.progress[rank];
        p.epoch = p.epoch.max(epoch);
        p.durable = p.durable.max(durable);
        let committed = self.progress.iter().map(|p| p.epoch).min().unwrap_or(0);
        let durable = self.progress.iter().map(|p| p.durable).min().flatten();
        if committed > self.committed || durable > self.durable {
            self.committed = self.committed.max(committed);
            self.durable = self.durable.max(durable);
            return Some((self.committed, self.durable));
        }
        None
    }

    pub fn halted(&mut self, rank: usize, generation: u32, now: Instant) -> Option<Resume> {
        self.said[rank].halted = Some(generation);
        self.advance(now)
    }

    pub fn ready(
        &mut self,
        rank: usize,
        generation: u32,
        newest: Option<u64>,
        now: Instant,
    ) -> Option<Resume> {
        self.said[rank].ready = Some(generation);
        self.said[rank].newest = newest;
        self.advance(now)
    }

    /// Advances the recovery timeline; resumes the job when every rank is
    /// ready at the current generation.
    fn advance(&mut self, now: Instant) -> Option<Resume> {
        let g = self.generation;
        let rec = self.recovering.as_mut()?;
        let stand = barrier::stand(g, &rec.failed, &self.said);
        if rec.propagated.is_none() && stand.propagated {
            rec.propagated = Some(now);
        }
        if rec.restored.is_none() && stand.replaced {
            rec.restored = Some(now);
        }
        // The epoch agreement rides on this barrier when every rank holds
        // the same newest copy (the common case); otherwise the ranks work
        // it out among themselves after resuming.
        let agreed = stand.resume?;
        let mut rec = self.recovering.take()?;
        // Epochs after the one restored are rolled back, also on pfs:
        // what is durable there is counted again from the ranks' reports.
        self.durable = None;
        for p in &mut self.progress {
            *p = Progress {
                epoch: rec.epoch,
                durable: None,
            };
        }
        rec.resumed = Some(now);
        self.confirming = Some(rec);
        Some(Resume {
            generation: g,
            agreed,
        })
    }

    /// A rank restored `epoch` at `generation`. The recovery is done once
    /// every rank restored the same epoch at the current generation.
    pub fn restored(&mut self, rank: usize, generation: u32, epoch: u64) -> Option<Done> {
        self.said[rank].restored = Some((generation, epoch));
        self.confirmed()
    }

    /// The recovery is done if every rank already confirmed (a restore
    /// can be reported before the resume that it answers is sent).
    pub fn confirmed(&mut self) -> Option<Done> {
        self.confirming.as_ref()?;
        let epoch = barrier::confirmed(self.generation, &self.said)?;
        Some(Done {
            recovery: self.confirming.take()?,
            epoch,
            generation: self.generation,
        })
    }
}

#[cfg(test)]
mod tests {
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
}
