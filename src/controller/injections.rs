//! `--inject`: the specs each process is handed, the timed ones fired by
//! mpiexec, and the report of those that never fired.

use super::*;

impl Job {
    /// The injection specs that concern `rank` and have not fired, encoded
    /// for the rank.
    pub(super) fn injections_for(&self, rank: usize) -> String {
        let specs: Vec<(usize, &inject::Inject)> = self
            .opts
            .inject
            .iter()
            .enumerate()
            .filter(|(i, s)| s.rank == rank && self.fired[*i] == Fate::Pending)
            .collect();
        inject::encode_for_rank(&specs)
    }

    /// Says which `--inject` specs never fired, and why as far as
    /// mpiexec knows; true if any did not.
    pub(super) fn report_unfired(&self) -> bool {
        let mut any = false;
        for (s, fate) in self.opts.inject.iter().zip(&self.fired) {
            let why = match (fate, &s.trigger) {
                (Fate::Fired, _) => continue,
                (Fate::Missed(why), _) => why.clone(),
                (Fate::Pending, Trigger::After(d)) => format!(
                    "the job ended {:.2} s after the start, before {:.2} s",
                    self.started.elapsed().as_secs_f64(),
                    d.as_secs_f64()
                ),
                (Fate::Pending, Trigger::Call { name, nth }) => format!(
                    "rank {} did not make {nth} calls of {name} (a replacement counts from 0)",
                    s.rank
                ),
                (Fate::Pending, Trigger::Checkpoint(e) | Trigger::Writing(e)) => format!(
                    "rank {} never wrote checkpoint epoch {e} (newest committed: {})",
                    s.rank,
                    self.rec.committed()
                ),
            };
            crate::say!("mpiexec: --inject {s} never fired: {why}");
            any = true;
        }
        if any && self.failure.is_none() {
            crate::say!(
                "mpiexec: the job succeeded without the failure asked for; exit status {EXIT_NOT_INJECTED}"
            );
        }
        any
    }

    pub(super) fn next_timed_injection(&self) -> Option<Instant> {
        self.opts
            .inject
            .iter()
            .zip(&self.fired)
            .filter(|(_, f)| **f == Fate::Pending)
            .filter_map(|(s, _)| match s.trigger {
                Trigger::After(d) => Some(self.started + d),
                _ => None,
            })
            .min()
    }

    pub(super) fn fire_timed_injections(&mut self) {
        if self.failure.is_some() {
            return;
        }
        let now = Instant::now();
        for i in 0..self.opts.inject.len() {
            let s = &self.opts.inject[i];
            let Trigger::After(d) = s.trigger else {
                continue;
            };
            if self.fired[i] != Fate::Pending || now < self.started + d {
                continue;
            }
            let st = &mut self.ranks[s.rank];
            if let (Some(p), None) = (&st.proc, st.exit) {
                crate::say!(
                    "mpiexec: injecting a failure: SIGKILL to rank {} (pid {})",
                    s.rank,
                    p.pid
                );
                p.signal(libc::SIGKILL);
                st.killed_at = Some(now);
                self.fired[i] = Fate::Fired;
            } else {
                self.fired[i] = Fate::Missed(format!(
                    "rank {} had already ended {:.2} s after the start",
                    s.rank,
                    d.as_secs_f64()
                ));
            }
        }
    }
}
