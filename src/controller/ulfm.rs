//! `--recovery ulfm` (`--with-ft ulfm`) at mpiexec: a dead rank is not
//! replaced; every live rank hears of it (in one order for all) and the
//! job goes on. mpiexec also relays revocations and makes agreements
//! (`agreement.rs`), since it outlives every rank and sees every death.

use super::agreement::{Contribution, Decision};
use super::*;

impl Job {
    /// Rank `r` died under ULFM: the others hear of it, and agreements
    /// that waited for it are decided.
    pub(super) fn ulfm_failed(&mut self, r: usize, pid: i32, what: &str) {
        // When it died (injected: the kill) and when mpiexec knew, so that
        // applications can time their own way back against it.
        let now = Instant::now();
        let start = self.ranks[r].killed_at.unwrap_or(now);
        let detected_ms = now.saturating_duration_since(start).as_secs_f64() * 1e3;
        let failed_at = unix_time(start);
        crate::say!(
            "mpiexec: rank {r} (pid {pid}) {what}; the job goes on without it (ULFM); detected {detected_ms:.1} ms after the failure at unix time {failed_at:.6}"
        );
        self.ulfm_dead.insert(r as u32);
        let notice = ToRank::ProcFailed {
            ranks: vec![r as u32],
        };
        let live: Vec<usize> = (0..self.ranks.len())
            .filter(|&x| x != r && self.ranks[x].exit.is_none())
            .collect();
        self.send_many(&live, &notice);
        for d in self.agreements.on_death(&self.ulfm_dead) {
            self.answer(d);
        }
    }

    /// `MPIX_Comm_revoke` at rank `r`: the other members hear of it.
    pub(super) fn on_revoke(&mut self, r: usize, context: u32, members: Vec<u32>) {
        let notice = ToRank::Revoked { context };
        for m in members {
            let m = m as usize;
            if m != r && m < self.ranks.len() && self.ranks[m].exit.is_none() {
                self.send_to(m, &notice);
            }
        }
    }

    pub(super) fn on_agree(
        &mut self,
        r: usize,
        key: agreement::Key,
        members: Vec<u32>,
        c: Contribution,
    ) -> Result<(), String> {
        if members.iter().any(|&m| m as usize >= self.ranks.len()) {
            return Err(format!(
                "rank {r}: an agreement among ranks that do not exist"
            ));
        }
        if let Some(d) = self
            .agreements
            .contribute(r as u32, key, members, c, &self.ulfm_dead)?
        {
            self.answer(d);
        }
        Ok(())
    }

    fn answer(&mut self, d: Decision) {
        let msg = ToRank::Agreed {
            context: d.key.0,
            seq: d.key.1,
            flag: d.flag,
            failed: d.failed,
            unacked: d.unacked,
            proposal: d.context,
        };
        let to: Vec<usize> = d.to.iter().map(|&x| x as usize).collect();
        self.send_many(&to, &msg);
    }
}
