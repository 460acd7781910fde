//! Recoveries as `mpiexec` carries them out: what the state machine
//! (`recoveries`) decides on a failure, printed and done — replacing ranks
//! by spares or new processes, relaunching under `cpr`, telling every rank
//! to resume, and reporting the recovery done with its milestones.

use super::recoveries::{Decision, Done, Facts, Resume};
use super::*;

impl Job {
    /// A rank that enters `MPI_Finalize` while a recovery waits for it
    /// will never roll back: the job cannot recover and ends.
    pub(super) fn finalizing_in_recovery(&mut self, rank: usize) {
        if self.failure.is_some() {
            return;
        }
        let Some((number, failed)) = self.rec.finalizing(rank) else {
            return;
        };
        crate::say!(
            "mpiexec: rank {rank} called MPI_Finalize while the job was recovering from the failure of rank(s) {failed:?} (recovery {number}); it did not roll back, so the recovery cannot complete; terminating the job"
        );
        self.fail(Failure::Rank {
            exit: Exit::Code(1),
        });
    }

    /// A rank's process ended abnormally under a recovery mode: recover,
    /// or say why the job cannot.
    pub(super) fn recover(&mut self, rank: usize, what: &str) {
        let pid = self.ranks[rank].proc.as_ref().map_or(0, |p| p.pid);
        let now = Instant::now();
        let facts = Facts {
            bootstrapped: self.bootstrapped,
            finalizing: self.ranks.iter().position(|r| r.finalizing),
        };
        let start = self.ranks[rank].killed_at.unwrap_or(now);
        if self.rec.recovering().is_none() {
            self.traffic.restart();
        }
        match self.rec.failed(rank, facts, start, now) {
            Decision::Refuse(why) => {
                crate::say!(
                    "mpiexec: rank {rank} (pid {pid}) {what}; cannot recover: {why}; terminating the job"
                );
                let exit = self.ranks[rank].exit.unwrap_or(Exit::Code(1));
                self.fail(Failure::Rank { exit });
            }
            Decision::Relaunch {
                number,
                epoch,
                generation,
            } => {
                crate::say!(
                    "mpiexec: rank {rank} (pid {pid}) {what}; recovery {number}: killing every rank and relaunching the job (generation {generation}) from epoch {epoch}"
                );
                for r in 0..self.ranks.len() {
                    self.forget_process(r);
                }
                for p in self.live() {
                    p.signal(libc::SIGKILL);
                }
                self.relaunch_when_gone();
            }
            Decision::Replace {
                rank,
                number,
                epoch,
                generation,
            } => {
                let with = if self.spares.ready() {
                    " with a spare process".to_string()
                } else {
                    // Where it goes, when it cannot stay where it was.
                    if let Err(e) = self.rehome(rank) {
                        crate::say!("mpiexec: rank {rank} (pid {pid}) {what}; cannot recover: {e}; terminating the job");
                        self.fail(Failure::Launch);
                        return;
                    }
                    self.on_host(rank)
                };
                crate::say!(
                    "mpiexec: rank {rank} (pid {pid}) {what}; recovery {number}: replacing it{with} (generation {generation}), every rank rolls back to epoch {epoch}"
                );
                self.forget_process(rank);
                // The replacement first: its start (exec, MPI_Init) then
                // overlaps the notices' way to every rank (at 1024 ranks
                // on 2 cores, 200 ms of wake-ups).
                let mut assigned = false;
                while let Some(spare) = self.spares.take() {
                    if self.assign(rank, spare) {
                        assigned = true;
                        break;
                    }
                }
                if !assigned {
                    self.spawn_replacements(&[rank]);
                }
                // Only the rank that failed now: a replacement of an
                // earlier failure in the same recovery may already be
                // connected at an earlier generation, and those
                // connections are good.
                self.held_failures.push(rank as u32);
                if !self.holding_failures {
                    self.announce_failures(generation, epoch);
                }
            }
        }
    }

    /// The ranks of a lost host fail together: their failure notices are
    /// held (`holding_failures`) and go out as one, at the last
    /// generation, naming them all (at 1024 ranks, 64 notices to every
    /// rank, each halting it again, kept mpiexec so busy that another
    /// host's agent gave it up).
    pub(super) fn hold_failures(&mut self, hold: bool) {
        self.holding_failures = hold;
        if self.failure.is_some() {
            // The job ends: nothing to announce.
            self.held_failures.clear();
        }
        if !hold && !self.held_failures.is_empty() {
            let (generation, epoch) = (self.rec.generation(), self.rec.restart_epoch());
            self.announce_failures(generation, epoch);
        }
    }

    /// Tells every welcomed rank that the held ranks failed.
    fn announce_failures(&mut self, generation: u32, epoch: u64) {
        let notice = ToRank::Failure {
            generation,
            epoch,
            failed: std::mem::take(&mut self.held_failures),
        };
        let welcomed: Vec<usize> = (0..self.ranks.len())
            .filter(|&r| self.ranks[r].welcomed)
            .collect();
        self.send_many(&welcomed, &notice);
    }

    /// Makes a spare the replacement of `rank`. False if the spare could
    /// not be told (it is discarded).
    pub(super) fn assign(&mut self, rank: usize, spare: Taken) -> bool {
        let msg = ToRank::Assign {
            rank: rank as u32,
            generation: self.rec.generation(),
            epoch: self.rec.restart_epoch(),
            inject: self.injections_for(rank),
        };
        if self.send_on(spare.conn, &msg).is_err() {
            self.spares.discard(spare);
            return false;
        }
        if let Some(c) = self.conns[spare.conn].as_mut() {
            c.assigned = Some(rank);
        }
        spare.gate.open(rank);
        let mut proc = spare.proc;
        proc.rank = rank;
        self.started(rank, proc);
        self.rec.spawned(Instant::now());
        true
    }

    /// Drops what the controller knew of a rank's current process (its
    /// control connection, its place in the bootstrap fence).
    pub(super) fn forget_process(&mut self, rank: usize) {
        if let Some(slot) = self.ranks[rank].conn.take() {
            self.close(slot);
        }
        let st = &mut self.ranks[rank];
        st.hello = None;
        st.welcomed = false;
        st.finalizing = false;
    }

    /// `cpr`: once every killed rank has been reaped, starts the whole job
    /// again at the new generation.
    pub(super) fn relaunch_when_gone(&mut self) {
        // The job is ending (a relaunch that could not start every rank
        // ends it): the processes going now are not a failed job's.
        if self.failure.is_some() {
            return;
        }
        let gone = self.live().next().is_none();
        if self.rec.relaunch_now(gone, Instant::now()) {
            let all: Vec<usize> = (0..self.ranks.len()).collect();
            self.spawn_replacements(&all);
        }
    }

    pub(super) fn spawn_replacements(&mut self, ranks: &[usize]) {
        for &rank in ranks {
            if let Err(e) = self.spawn(rank) {
                crate::say!(
                    "mpiexec: cannot start a replacement for rank {rank}: {e}; terminating the job"
                );
                self.fail(Failure::Launch);
                return;
            }
        }
        self.rec.spawned(Instant::now());
    }

    /// Tells every rank to resume when the barrier says so.
    pub(super) fn resume(&mut self, resume: Option<Resume>) {
        let Some(Resume { generation, agreed }) = resume else {
            return;
        };
        let joined = std::mem::take(&mut self.joined)
            .into_iter()
            .filter_map(|r| {
                let st = &self.ranks[r];
                Some((r as u32, st.born, st.hello?.to_string()))
            })
            .collect();
        let all: Vec<usize> = (0..self.ranks.len()).collect();
        self.send_many(
            &all,
            &ToRank::Resume {
                generation,
                agreed,
                joined,
            },
        );
        self.top_up_spares();
        // Every rank may have confirmed its restore already.
        let done = self.rec.confirmed();
        self.report_done(done);
    }

    /// Reports a recovery done once every rank has restored at the
    /// current generation, with the epoch they restored.
    pub(super) fn report_done(&mut self, done: Option<Done>) {
        let Some(Done {
            recovery: rec,
            epoch,
            generation,
        }) = done
        else {
            return;
        };
        let ms = |t: Option<Instant>| {
            t.map_or("-".to_string(), |t| {
                format!(
                    "{:.1}",
                    t.saturating_duration_since(rec.start).as_secs_f64() * 1e3
                )
            })
        };
        // Wall-clock time of the failure, so that applications can measure
        // their own way back against it (`mpistages-bench recovery`).
        let failed_at = unix_time(rec.start);
        if rec.number == 0 {
            crate::say!(
                "mpiexec: restart done: every rank restored epoch {epoch}, generation {generation}; \
                 {} ms after the start",
                ms(rec.resumed)
            );
            return;
        }
        let what = if self.opts.recovery.replaces_rank() {
            format!("ranks {:?} replaced", rec.failed)
        } else {
            "job relaunched".to_string()
        };
        crate::say!(
            "mpiexec: recovery {} done: {what}, epoch {epoch} restored, generation {generation}; ms after the failure: detected {}, propagated {}, replacement started {}, MPI state restored {}, all ranks resumed {}; failure at unix time {failed_at:.6}; control messages since the failure, {}",
            rec.number,
            ms(Some(rec.detected)),
            ms(rec.propagated),
            ms(rec.spawned),
            ms(rec.restored),
            ms(rec.resumed),
            self.traffic.summary(),
        );
    }
}
