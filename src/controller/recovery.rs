//! Recoveries: what a failure means (`recover`, or why the job cannot:
//! `refusal`), replacing ranks by spares or new processes, relaunching
//! under `cpr`, and the recovery's milestones until every rank confirmed
//! its restore.

use super::barrier;
use super::*;

impl Job {
    /// What every rank said, for the barrier's decisions.
    fn said(&self) -> Vec<barrier::Said> {
        self.ranks
            .iter()
            .map(|r| barrier::Said {
                halted: r.halted,
                ready: r.ready,
                newest: r.newest,
                restored: r.restored,
            })
            .collect()
    }

    /// A rank that enters `MPI_Finalize` while a recovery waits for it
    /// will never roll back: the job cannot recover and ends.
    pub(super) fn finalizing_in_recovery(&mut self, rank: usize) {
        let Some(rec) = &self.recovering else { return };
        if self.ranks[rank].ready == Some(self.generation) || self.failure.is_some() {
            return;
        }
        let failed: Vec<usize> = rec.failed.clone();
        eprintln!(
            "mpiexec: rank {rank} called MPI_Finalize while the job was recovering from the failure of rank(s) {failed:?} (recovery {}); it did not roll back, so the recovery cannot complete; terminating the job",
            rec.number
        );
        self.fail(Failure::Rank {
            exit: Exit::Code(1),
        });
    }

    /// Why a failure of `rank` cannot be recovered from, if it cannot.
    pub(super) fn refusal(&self) -> Option<String> {
        if !self.bootstrapped {
            Some("it failed during start-up, before every rank joined".to_string())
        } else if let Some(q) = self.ranks.iter().position(|r| r.finalizing) {
            Some(format!(
                "rank {q} has already called MPI_Finalize and a finalized rank cannot take part in a recovery"
            ))
        } else if self.restarts >= self.opts.max_restarts {
            Some(format!(
                "the restart budget is spent ({} recoveries, --max-restarts {})",
                self.restarts, self.opts.max_restarts
            ))
        } else {
            None
        }
    }

    /// A rank's process ended abnormally under a recovery mode: recover,
    /// or say why the job cannot.
    pub(super) fn recover(&mut self, rank: usize, what: &str) {
        let pid = self.ranks[rank].proc.as_ref().map_or(0, |p| p.pid);
        if let Some(why) = self.refusal() {
            eprintln!(
                "mpiexec: rank {rank} (pid {pid}) {what}; cannot recover: {why}; terminating the job"
            );
            let exit = self.ranks[rank].exit.unwrap_or(Exit::Code(1));
            self.fail(Failure::Rank { exit });
            return;
        }
        let now = Instant::now();
        self.restarts += 1;
        self.generation += 1;
        let start = self.ranks[rank].killed_at.unwrap_or(now);
        let relaunch = self.relaunches();
        if self.recovering.is_none() {
            // A failure before every rank confirmed its restore: the same
            // recovery goes on.
            self.recovering = self.confirming.take();
        }
        let rec = self.recovering.get_or_insert_with(|| {
            self.recoveries += 1;
            Recovering {
                number: self.recoveries,
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
        let (number, epoch) = (rec.number, rec.epoch);
        if relaunch {
            eprintln!(
                "mpiexec: rank {rank} (pid {pid}) {what}; recovery {number}: killing every rank and relaunching the job (generation {}) from epoch {epoch}",
                self.generation
            );
            rec.failed = (0..self.ranks.len()).collect();
            rec.propagated = None;
            rec.spawned = None;
            rec.restored = None;
            for r in 0..self.ranks.len() {
                self.forget_process(r);
                self.ranks[r].epoch = epoch;
            }
            for p in self.live() {
                p.signal(libc::SIGKILL);
            }
            self.relaunch_when_gone();
            return;
        }
        rec.failed.push(rank);
        rec.propagated = None;
        rec.restored = None;
        let with = if self.spares.ready() {
            " with a spare process"
        } else {
            ""
        };
        eprintln!(
            "mpiexec: rank {rank} (pid {pid}) {what}; recovery {number}: replacing it{with} (generation {}), every rank rolls back to epoch {epoch}",
            self.generation
        );
        self.forget_process(rank);
        self.ranks[rank].epoch = epoch;
        // Only the rank that failed now: a replacement of an earlier
        // failure in the same recovery may already be connected at an
        // earlier generation, and those connections are good.
        let notice = ToRank::Failure {
            generation: self.generation,
            epoch,
            failed: vec![rank as u32],
        };
        for r in 0..self.ranks.len() {
            if self.ranks[r].welcomed {
                self.send_to(r, &notice);
            }
        }
        while let Some(spare) = self.spares.take() {
            if self.assign(rank, spare) {
                return;
            }
        }
        self.spawn_replacements(&[rank]);
    }

    /// Makes a spare the replacement of `rank`. False if the spare could
    /// not be told (it is discarded).
    pub(super) fn assign(&mut self, rank: usize, spare: Taken) -> bool {
        let msg = ToRank::Assign {
            rank: rank as u32,
            generation: self.generation,
            epoch: self.recovering.as_ref().map_or(0, |r| r.epoch),
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
        if let Some(rec) = self.recovering.as_mut() {
            rec.spawned = Some(Instant::now());
        }
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

    /// `cpr`: a failure relaunches the whole job (the other modes replace
    /// the failed rank).
    pub(super) fn relaunches(&self) -> bool {
        !self.opts.recovery.replaces_rank()
    }

    /// `cpr`: once every killed rank has been reaped, starts the whole job
    /// again at the new generation.
    pub(super) fn relaunch_when_gone(&mut self) {
        let gone = self.live().next().is_none();
        let relaunches = self.relaunches();
        let Some(rec) = self.recovering.as_mut() else {
            return;
        };
        if !relaunches || rec.spawned.is_some() || !gone {
            return;
        }
        rec.propagated = Some(Instant::now());
        let all: Vec<usize> = (0..self.ranks.len()).collect();
        self.spawn_replacements(&all);
    }

    pub(super) fn spawn_replacements(&mut self, ranks: &[usize]) {
        for &rank in ranks {
            if let Err(e) = self.spawn(rank) {
                eprintln!(
                    "mpiexec: cannot start a replacement for rank {rank}: {e}; terminating the job"
                );
                self.fail(Failure::Launch);
                return;
            }
        }
        if let Some(rec) = self.recovering.as_mut() {
            rec.spawned = Some(Instant::now());
        }
    }

    /// Advances the recovery timeline; resumes the job when every rank is
    /// ready at the current generation.
    pub(super) fn check_recovery(&mut self) {
        let g = self.generation;
        let said = self.said();
        let Some(rec) = self.recovering.as_mut() else {
            return;
        };
        let now = Instant::now();
        let stand = barrier::stand(g, &rec.failed, &said);
        if rec.propagated.is_none() && stand.propagated {
            rec.propagated = Some(now);
        }
        if rec.restored.is_none() && stand.replaced {
            rec.restored = Some(now);
        }
        // The epoch agreement rides on this barrier when every rank holds
        // the same newest copy (the common case); otherwise the ranks work
        // it out among themselves after resuming.
        let Some(agreed) = stand.resume else {
            return;
        };
        let mut rec = self.recovering.take().expect("checked above");
        // Epochs after the one restored are rolled back, also on pfs:
        // what is durable there is counted again from the ranks' reports.
        self.durable = None;
        for r in 0..self.ranks.len() {
            self.ranks[r].epoch = rec.epoch;
            self.ranks[r].durable = None;
            self.send_to(
                r,
                &ToRank::Resume {
                    generation: g,
                    agreed,
                },
            );
        }
        rec.resumed = Some(now);
        self.confirming = Some(rec);
        self.top_up_spares();
        self.check_confirmed();
    }

    /// Reports the recovery done once every rank has restored at the
    /// current generation, with the epoch they restored.
    pub(super) fn check_confirmed(&mut self) {
        let g = self.generation;
        let Some(restored) = self
            .confirming
            .as_ref()
            .and(barrier::confirmed(g, &self.said()))
        else {
            return;
        };
        let rec = self.confirming.take().expect("checked above");
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
        let failed_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64()
            - Instant::now()
                .saturating_duration_since(rec.start)
                .as_secs_f64();
        let what = if self.relaunches() {
            "job relaunched".to_string()
        } else {
            format!("ranks {:?} replaced", rec.failed)
        };
        eprintln!(
            "mpiexec: recovery {} done: {what}, epoch {} restored, generation {g}; ms after the failure: detected {}, propagated {}, replacement started {}, MPI state restored {}, all ranks resumed {}; failure at unix time {failed_at:.6}",
            rec.number,
            restored,
            ms(Some(rec.detected)),
            ms(rec.propagated),
            ms(rec.spawned),
            ms(rec.restored),
            ms(rec.resumed),
        );
    }
}
