//! The job's recoveries as a state machine without processes or sockets:
//! events in (a rank failed, a rank reported a checkpoint, halted, was
//! ready, restored), decisions out (refuse, replace, relaunch, resume,
//! done). It owns the generation, the committed epoch, what every rank
//! said, and the recovery in progress; `mpiexec` (the rest of the
//! controller) does what the decisions say: prints, sends, kills, starts.

use super::barrier::Tally;
use std::collections::BTreeMap;
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
    /// The next failure is part of the last one (a rank lost with the
    /// same host): it spends no more of the restart budget.
    same_event: bool,
    count: usize,
    said: Tally,
    progress: Vec<Progress>,
    /// How many ranks completed each newest epoch / hold each newest
    /// durable one: their first keys are the committed and durable epochs
    /// (a minimum over every rank at each report was O(ranks)).
    epochs: Counts<u64>,
    durables: Counts<Option<u64>>,
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
            same_event: false,
            count: 0,
            said: Tally::new(ranks),
            progress: vec![Progress::default(); ranks],
            epochs: Counts::of(0, ranks),
            durables: Counts::of(None, ranks),
            recovering: None,
            confirming: None,
        }
    }

    /// `mpiexec --restart`: the job starts as a relaunched one, every rank
    /// restoring `epoch` (recovery number 0, reported as the restart).
    pub fn restart_from(&mut self, epoch: u64, now: Instant) {
        // As a relaunch: generation 1, so that every rank waits for the
        // resume (at generation 0 a rank counts as resumed from the start).
        self.generation = 1;
        self.committed = epoch;
        self.roll_back_to(epoch, false);
        let every: Vec<usize> = (0..self.said.len()).collect();
        self.said.begin(1, &every);
        self.recovering = Some(Recovering {
            number: 0,
            failed: every,
            epoch,
            start: now,
            detected: now,
            propagated: Some(now),
            // Started with the job (not a relaunch waiting for the old
            // processes to be gone).
            spawned: Some(now),
            restored: None,
            resumed: None,
        });
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
    /// A process joined the job (`MPI_Comm_spawn`): its id is the next.
    pub fn add_rank(&mut self) {
        self.said.add_rank();
        self.progress.push(Progress::default());
        self.epochs.add(0);
        self.durables.add(None);
    }

    pub fn started(&mut self, rank: usize) {
        self.said.started(rank);
    }

    /// Every rank's progress is `epoch` (and nothing durable unless
    /// `keep_durable`).
    fn roll_back_to(&mut self, epoch: u64, keep_durable: bool) {
        let n = self.progress.len();
        for p in &mut self.progress {
            p.epoch = epoch;
            if !keep_durable {
                p.durable = None;
            }
        }
        self.epochs = Counts::of(epoch, n);
        self.durables = Counts::default();
        for p in &self.progress {
            self.durables.add(p.durable);
        }
    }

    /// Whether the next failure comes with the last one (the ranks of a
    /// lost host fail together: the budget counts them as one).
    pub fn with_last_failure(&mut self, yes: bool) {
        self.same_event = yes;
    }

    /// Why a failure cannot be recovered from, if it cannot.
    fn refusal(&self, facts: Facts) -> Option<String> {
        if !facts.bootstrapped {
            Some("it failed during start-up, before every rank joined".to_string())
        } else if let Some(q) = facts.finalizing {
            Some(format!(
                "rank {q} has already called MPI_Finalize and a finalized rank cannot take part in a recovery"
            ))
        } else if self.restarts >= self.max_restarts && !self.same_event {
            Some(format!(
                "the restart budget is spent ({} failures recovered from, --max-restarts {})",
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
        if !std::mem::take(&mut self.same_event) {
            self.restarts += 1;
        }
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
            self.said.begin(generation, &rec.failed);
            self.roll_back_to(epoch, true);
            return Decision::Relaunch {
                number,
                epoch,
                generation,
            };
        }
        if !rec.failed.contains(&rank) {
            rec.failed.push(rank);
        }
        self.said.begin(generation, &rec.failed);
        let old = std::mem::replace(&mut self.progress[rank].epoch, epoch);
        self.epochs.change(old, epoch);
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
        (self.said.said(rank).ready != Some(self.generation))
            .then(|| (rec.number, rec.failed.clone()))
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
        let old = *p;
        p.epoch = p.epoch.max(epoch);
        p.durable = p.durable.max(durable);
        let new = *p;
        self.epochs.change(old.epoch, new.epoch);
        self.durables.change(old.durable, new.durable);
        let committed = self.epochs.least().unwrap_or(0);
        let durable = self.durables.least().flatten();
        if committed > self.committed || durable > self.durable {
            self.committed = self.committed.max(committed);
            self.durable = self.durable.max(durable);
            return Some((self.committed, self.durable));
        }
        None
    }

    pub fn halted(&mut self, rank: usize, generation: u32, now: Instant) -> Option<Resume> {
        self.said.halted(rank, generation);
        self.advance(now)
    }

    pub fn ready(
        &mut self,
        rank: usize,
        generation: u32,
        newest: Option<u64>,
        now: Instant,
    ) -> Option<Resume> {
        self.said.ready(rank, generation, newest);
        self.advance(now)
    }

    /// Advances the recovery timeline; resumes the job when every rank is
    /// ready at the current generation.
    fn advance(&mut self, now: Instant) -> Option<Resume> {
        let g = self.generation;
        let rec = self.recovering.as_mut()?;
        let stand = self.said.stand();
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
        self.roll_back_to(rec.epoch, false);
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
        self.said.restored(rank, generation, epoch);
        self.confirmed()
    }

    /// The recovery is done if every rank already confirmed (a restore
    /// can be reported before the resume that it answers is sent).
    pub fn confirmed(&mut self) -> Option<Done> {
        self.confirming.as_ref()?;
        let epoch = self.said.confirmed()?;
        Some(Done {
            recovery: self.confirming.take()?,
            epoch,
            generation: self.generation,
        })
    }
}

/// A multiset: how many ranks hold each value.
#[derive(Clone, Debug, Default)]
struct Counts<T: Ord>(BTreeMap<T, usize>);

impl<T: Ord + Copy> Counts<T> {
    fn of(value: T, n: usize) -> Counts<T> {
        let mut c = Counts(BTreeMap::new());
        if n > 0 {
            c.0.insert(value, n);
        }
        c
    }

    fn add(&mut self, value: T) {
        *self.0.entry(value).or_insert(0) += 1;
    }

    /// One rank's value went from `old` to `new`.
    fn change(&mut self, old: T, new: T) {
        if old == new {
            return;
        }
        if let Some(n) = self.0.get_mut(&old) {
            *n -= 1;
            if *n == 0 {
                self.0.remove(&old);
            }
        }
        self.add(new);
    }

    fn least(&self) -> Option<T> {
        self.0.keys().next().copied()
    }
}

#[cfg(test)]
#[path = "recoveries_tests.rs"]
mod tests;
