//! ULFM's fault-tolerant agreement (`MPIX_Comm_agree`, and the agreement
//! inside `MPIX_Comm_shrink`) as a state machine without processes or
//! sockets. mpiexec is the coordinator: it outlives every rank and learns
//! of every death, so an agreement among the live members of a
//! communicator is a gather at mpiexec that completes once every member
//! has contributed or is dead, and one answer, the same for all.
//!
//! What the answer says (as Open MPI's ULFM documents it):
//! - `flag`: the bitwise AND of the contributed flags;
//! - `failed`: the members that died without contributing;
//! - `unacked`: some member of `failed` was not acknowledged by every
//!   contributor (then every contributor raises MPIX_ERR_PROC_FAILED:
//!   uniformly, since the answer is one);
//! - `context`: the largest context id any contributor proposed (a shrink
//!   takes its new communicator's context from it).

use std::collections::{BTreeMap, BTreeSet};

/// One member's contribution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contribution {
    pub flag: u32,
    /// The world ranks whose failure this member acknowledged on the
    /// communicator.
    pub acked: Vec<u32>,
    /// This member's proposal for a new context id.
    pub context: u32,
}

/// An agreement's key: the communicator's context and the agreement's
/// number on it (every member counts its agreements on a communicator).
/// With its members, it names one agreement: processes started by
/// `MPI_Comm_spawn` have a world of their own with the same context.
pub type Key = (u32, u32);

/// The answer to one agreement, for the contributors still alive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub key: Key,
    pub to: Vec<u32>,
    pub flag: u32,
    pub failed: Vec<u32>,
    pub unacked: bool,
    pub context: u32,
}

#[derive(Debug)]
struct Pending {
    members: Vec<u32>,
    got: BTreeMap<u32, Contribution>,
}

#[derive(Debug, Default)]
pub struct Agreements {
    pending: BTreeMap<(Key, Vec<u32>), Pending>,
}

impl Agreements {
    /// `rank` contributes to agreement `key` among `members` (world
    /// ranks, in one order for all). `dead`: every rank known dead. A
    /// decision comes back once every member has contributed or is dead.
    /// A contribution that does not fit (a rank that is not a member, a
    /// second contribution) is an error: the rank's library broke the
    /// protocol.
    pub fn contribute(
        &mut self,
        rank: u32,
        key: Key,
        members: Vec<u32>,
        c: Contribution,
        dead: &BTreeSet<u32>,
    ) -> Result<Option<Decision>, String> {
        if !members.contains(&rank) {
            return Err(format!(
                "rank {rank} contributes to an agreement of communicator context {} it is not a member of",
                key.0
            ));
        }
        let id = (key, members.clone());
        let p = self.pending.entry(id.clone()).or_insert_with(|| Pending {
            members,
            got: BTreeMap::new(),
        });
        if p.got.insert(rank, c).is_some() {
            return Err(format!(
                "rank {rank} contributes twice to agreement {} on context {}",
                key.1, key.0
            ));
        }
        Ok(self.decide(id, dead))
    }

    /// A rank died: the agreements that waited only for it (or other dead
    /// ranks) are decided now.
    pub fn on_death(&mut self, dead: &BTreeSet<u32>) -> Vec<Decision> {
        let ids: Vec<(Key, Vec<u32>)> = self.pending.keys().cloned().collect();
        ids.into_iter()
            .filter_map(|id| self.decide(id, dead))
            .collect()
    }

    /// Agreements still waiting.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    fn decide(&mut self, id: (Key, Vec<u32>), dead: &BTreeSet<u32>) -> Option<Decision> {
        let p = self.pending.get(&id)?;
        if !p
            .members
            .iter()
            .all(|m| p.got.contains_key(m) || dead.contains(m))
        {
            return None;
        }
        let p = self.pending.remove(&id)?;
        let key = id.0;
        let failed: Vec<u32> = p
            .members
            .iter()
            .copied()
            .filter(|m| !p.got.contains_key(m))
            .collect();
        let unacked = failed
            .iter()
            .any(|f| p.got.values().any(|c| !c.acked.contains(f)));
        Some(Decision {
            key,
            to: p
                .got
                .keys()
                .copied()
                .filter(|r| !dead.contains(r))
                .collect(),
            flag: p.got.values().fold(u32::MAX, |a, c| a & c.flag),
            failed,
            unacked,
            context: p.got.values().map(|c| c.context).max().unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(flag: u32, acked: &[u32], context: u32) -> Contribution {
        Contribution {
            flag,
            acked: acked.to_vec(),
            context,
        }
    }

    #[test]
    fn all_alive_gives_the_and_and_the_largest_context() {
        let mut a = Agreements::default();
        let dead = BTreeSet::new();
        let m = vec![0, 1, 2];
        assert_eq!(
            a.contribute(0, (8, 0), m.clone(), c(0b111, &[], 10), &dead),
            Ok(None)
        );
        assert_eq!(
            a.contribute(2, (8, 0), m.clone(), c(0b101, &[], 14), &dead),
            Ok(None)
        );
        let d = a
            .contribute(1, (8, 0), m, c(0b110, &[], 12), &dead)
            .unwrap()
            .unwrap();
        assert_eq!((d.flag, d.context, d.unacked), (0b100, 14, false));
        assert_eq!(d.to, vec![0, 1, 2]);
        assert!(d.failed.is_empty());
        assert_eq!(a.waiting(), 0);
    }

    #[test]
    fn a_death_during_the_agreement_completes_it_with_an_error() {
        let mut a = Agreements::default();
        let mut dead = BTreeSet::new();
        let m = vec![0, 1, 2, 3];
        for r in [0, 1, 3] {
            assert_eq!(
                a.contribute(r, (4, 2), m.clone(), c(1, &[], 6), &dead),
                Ok(None)
            );
        }
        // Rank 2 dies before it contributes: the rest decide without it.
        dead.insert(2);
        let d = a.on_death(&dead);
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].flag, d[0].unacked), (1, true));
        assert_eq!(d[0].failed, vec![2]);
        assert_eq!(d[0].to, vec![0, 1, 3]);
    }

    #[test]
    fn acknowledged_failures_raise_no_error_only_if_every_contributor_acked() {
        let m = vec![0, 1, 2];
        let dead: BTreeSet<u32> = [1].into();
        let mut a = Agreements::default();
        a.contribute(0, (2, 0), m.clone(), c(1, &[1], 2), &dead)
            .unwrap();
        let d = a
            .contribute(2, (2, 0), m.clone(), c(1, &[1], 2), &dead)
            .unwrap()
            .unwrap();
        assert!(!d.unacked);
        assert_eq!(d.failed, vec![1]);
        // One contributor did not acknowledge it: an error for everyone.
        a.contribute(0, (2, 1), m.clone(), c(1, &[1], 2), &dead)
            .unwrap();
        let d = a
            .contribute(2, (2, 1), m, c(1, &[], 2), &dead)
            .unwrap()
            .unwrap();
        assert!(d.unacked);
    }

    #[test]
    fn a_contributor_that_dies_counts_but_gets_no_answer() {
        let m = vec![0, 1];
        let mut dead = BTreeSet::new();
        let mut a = Agreements::default();
        a.contribute(1, (2, 0), m.clone(), c(0, &[], 2), &dead)
            .unwrap();
        dead.insert(1);
        assert!(a.on_death(&dead).is_empty());
        let d = a
            .contribute(0, (2, 0), m, c(1, &[], 2), &dead)
            .unwrap()
            .unwrap();
        assert_eq!((d.flag, d.unacked), (0, false));
        assert_eq!(d.to, vec![0]);
    }

    #[test]
    fn agreements_on_different_keys_are_apart() {
        let dead = BTreeSet::new();
        let mut a = Agreements::default();
        a.contribute(0, (2, 0), vec![0, 1], c(1, &[], 2), &dead)
            .unwrap();
        a.contribute(0, (4, 0), vec![0, 2], c(1, &[], 2), &dead)
            .unwrap();
        assert_eq!(a.waiting(), 2);
        assert!(a
            .contribute(1, (2, 0), vec![0, 1], c(1, &[], 2), &dead)
            .unwrap()
            .is_some());
        assert_eq!(a.waiting(), 1);
    }

    #[test]
    fn protocol_breaks_are_errors() {
        let dead = BTreeSet::new();
        let mut a = Agreements::default();
        assert!(a
            .contribute(5, (2, 0), vec![0, 1], c(1, &[], 2), &dead)
            .is_err());
        a.contribute(0, (2, 0), vec![0, 1], c(1, &[], 2), &dead)
            .unwrap();
        assert!(a
            .contribute(0, (2, 0), vec![0, 1], c(1, &[], 2), &dead)
            .is_err());
    }
}
