//! The recovery barrier's decisions, without processes or sockets: from
//! what every rank said at which generation, whether the failure has
//! reached every survivor, whether the replacements are ready, whether the
//! job resumes (and on which epoch every rank agrees), and whether every
//! rank confirmed the same restore.

/// What one rank said during recoveries.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Said {
    /// Generation at which it reported itself halted / ready.
    pub halted: Option<u32>,
    pub ready: Option<u32>,
    /// The newest copy its Ready said it holds.
    pub newest: Option<u64>,
    /// Generation and epoch of its last completed restore.
    pub restored: Option<(u32, u64)>,
}

/// Where a recovery at generation `g`, replacing `failed`, stands.
#[derive(Debug, PartialEq)]
pub struct Stand {
    /// Every rank not being replaced halted (or is ready already).
    pub propagated: bool,
    /// Every replacement is ready.
    pub replaced: bool,
    /// Every rank is ready: the job resumes, with the epoch every rank
    /// holds when they all hold the same one (else they agree after).
    pub resume: Option<Option<u64>>,
}

/// Where the recovery stands, by looking at every rank (the definition
/// `Tally` keeps up with; its tests compare the two).
#[cfg(test)]
pub fn stand(g: u32, failed: &[usize], ranks: &[Said]) -> Stand {
    let at_g = |v: Option<u32>| v == Some(g);
    let propagated = ranks
        .iter()
        .enumerate()
        .all(|(r, s)| failed.contains(&r) || at_g(s.halted) || at_g(s.ready));
    let replaced = failed.iter().all(|&r| at_g(ranks[r].ready));
    let resume = ranks
        .iter()
        .all(|s| at_g(s.ready))
        .then(|| common_newest(ranks));
    Stand {
        propagated,
        replaced,
        resume,
    }
}

/// The epoch every rank holds, when they all hold the same one.
fn common_newest(ranks: &[Said]) -> Option<u64> {
    let first = ranks.first().and_then(|s| s.newest);
    first.filter(|&e| e > 0 && ranks.iter().all(|s| s.newest == first))
}

/// The epoch every rank restored at generation `g`, once all have.
pub fn confirmed(g: u32, ranks: &[Said]) -> Option<u64> {
    let first = ranks.first()?.restored?;
    (first.0 == g && ranks.iter().all(|s| s.restored == Some(first))).then_some(first.1)
}

/// What every rank said, with the barrier's counts kept up to date as
/// reports come in: a report costs O(1), and only the report that
/// completes the barrier looks at every rank (a scan per report made one
/// recovery O(ranks²) in mpiexec: a million steps at 1024 ranks).
#[derive(Clone, Debug, Default)]
pub struct Tally {
    said: Vec<Said>,
    /// The current generation, and which ranks it replaces.
    g: u32,
    replaced: Vec<bool>,
    replacements: usize,
    /// Ranks not being replaced that halted or are ready at `g`.
    stopped_survivors: usize,
    ready_replacements: usize,
    ready: usize,
    /// Ranks whose last restore was at `g`.
    restored: usize,
}

/// What of a rank's report the counts depend on.
#[derive(Clone, Copy, PartialEq)]
struct Marks {
    stopped: bool,
    ready: bool,
    restored: bool,
}

impl Tally {
    pub fn new(ranks: usize) -> Tally {
        let mut t = Tally {
            said: vec![Said::default(); ranks],
            replaced: vec![false; ranks],
            ..Tally::default()
        };
        t.begin(0, &[]);
        t
    }

    pub fn len(&self) -> usize {
        self.said.len()
    }

    pub fn said(&self, rank: usize) -> Said {
        self.said[rank]
    }

    /// A new generation `g` replacing `failed`: the counts start again
    /// (one scan per failure).
    pub fn begin(&mut self, g: u32, failed: &[usize]) {
        self.g = g;
        self.replaced.iter_mut().for_each(|r| *r = false);
        for &r in failed {
            self.replaced[r] = true;
        }
        self.replacements = self.replaced.iter().filter(|&&r| r).count();
        (self.stopped_survivors, self.ready_replacements, self.ready) = (0, 0, 0);
        self.restored = 0;
        for r in 0..self.said.len() {
            self.count(r, self.marks(r), 1);
        }
    }

    /// A process for a new rank (`MPI_Comm_spawn`).
    pub fn add_rank(&mut self) {
        self.said.push(Said::default());
        self.replaced.push(false);
    }

    fn marks(&self, r: usize) -> Marks {
        let s = &self.said[r];
        let at_g = |v: Option<u32>| v == Some(self.g);
        Marks {
            stopped: at_g(s.halted) || at_g(s.ready),
            ready: at_g(s.ready),
            restored: s.restored.is_some_and(|(g, _)| g == self.g),
        }
    }

    /// Adds (`sign` 1) or takes away (-1, wrapping) rank `r`'s marks.
    fn count(&mut self, r: usize, m: Marks, sign: usize) {
        let add = |n: &mut usize, yes: bool| {
            if yes {
                *n = n.wrapping_add(sign);
            }
        };
        let replaced = self.replaced[r];
        add(&mut self.stopped_survivors, m.stopped && !replaced);
        add(&mut self.ready_replacements, m.ready && replaced);
        add(&mut self.ready, m.ready);
        add(&mut self.restored, m.restored);
    }

    /// Changes what rank `r` said, keeping the counts.
    fn update(&mut self, r: usize, f: impl FnOnce(&mut Said)) {
        let before = self.marks(r);
        f(&mut self.said[r]);
        let after = self.marks(r);
        if before != after {
            self.count(r, before, usize::MAX);
            self.count(r, after, 1);
        }
    }

    /// A new process for `rank`: what the old one said no longer counts
    /// (but its last restore does, for the confirmation).
    pub fn started(&mut self, rank: usize) {
        self.update(rank, |s| {
            s.halted = None;
            s.ready = None;
            s.newest = None;
        });
    }

    pub fn halted(&mut self, rank: usize, g: u32) {
        self.update(rank, |s| s.halted = Some(g));
    }

    pub fn ready(&mut self, rank: usize, g: u32, newest: Option<u64>) {
        self.update(rank, |s| {
            s.ready = Some(g);
            s.newest = newest;
        });
    }

    pub fn restored(&mut self, rank: usize, g: u32, epoch: u64) {
        self.update(rank, |s| s.restored = Some((g, epoch)));
    }

    /// Where the recovery of the current generation stands.
    pub fn stand(&self) -> Stand {
        let n = self.said.len();
        Stand {
            propagated: self.stopped_survivors == n - self.replacements,
            replaced: self.ready_replacements == self.replacements,
            resume: (self.ready == n).then(|| common_newest(&self.said)),
        }
    }

    /// The epoch every rank restored at the current generation, once all
    /// have.
    pub fn confirmed(&self) -> Option<u64> {
        if self.restored < self.said.len() {
            return None;
        }
        confirmed(self.g, &self.said)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(halted: Option<u32>, ready: Option<u32>, newest: Option<u64>) -> Said {
        Said {
            halted,
            ready,
            newest,
            restored: None,
        }
    }

    #[test]
    fn the_barrier_waits_for_every_rank_at_the_current_generation() {
        // Rank 2 failed at generation 1: 0 and 1 halt, then everyone is ready.
        let mut r = vec![said(None, None, Some(4)); 3];
        let s = stand(1, &[2], &r);
        assert_eq!((s.propagated, s.replaced, s.resume), (false, false, None));
        r[0].halted = Some(1);
        r[1].halted = Some(1);
        assert!(
            stand(1, &[2], &r).propagated,
            "the replacement need not halt"
        );
        r[0].ready = Some(1);
        r[1].ready = Some(1);
        assert_eq!(
            stand(1, &[2], &r).resume,
            None,
            "the replacement is not ready"
        );
        r[2].ready = Some(1);
        let s = stand(1, &[2], &r);
        assert!(s.replaced);
        assert_eq!(s.resume, Some(Some(4)), "all hold epoch 4");
        r[1].newest = Some(3);
        assert_eq!(stand(1, &[2], &r).resume, Some(None), "no agreement here");
        r[1].newest = Some(0);
        r[0].newest = Some(0);
        r[2].newest = Some(0);
        assert_eq!(stand(1, &[2], &r).resume, Some(None), "epoch 0 is no copy");
    }

    #[test]
    fn a_second_failure_during_a_recovery_starts_the_barrier_again() {
        // Everyone was ready at generation 1 when rank 0 failed too: the
        // recovery goes on at generation 2 with both replaced, and what the
        // ranks said at generation 1 no longer counts.
        let mut r = vec![said(Some(1), Some(1), Some(2)); 3];
        let s = stand(2, &[2, 0], &r);
        assert_eq!((s.propagated, s.replaced, s.resume), (false, false, None));
        r[1].halted = Some(2);
        assert!(stand(2, &[2, 0], &r).propagated);
        r[1].ready = Some(2);
        r[2].ready = Some(2);
        assert_eq!(stand(2, &[2, 0], &r).resume, None, "rank 0's replacement");
        r[0].ready = Some(2);
        assert_eq!(stand(2, &[2, 0], &r).resume, Some(Some(2)));
    }

    #[test]
    fn a_recovery_is_confirmed_when_every_rank_restored_the_same_epoch() {
        let mut r = vec![Said::default(); 3];
        assert_eq!(confirmed(1, &r), None);
        for s in &mut r {
            s.restored = Some((1, 4));
        }
        assert_eq!(confirmed(1, &r), Some(4));
        assert_eq!(confirmed(2, &r), None, "a restore of an older generation");
        r[1].restored = Some((1, 3));
        assert_eq!(confirmed(1, &r), None, "ranks restored different epochs");
        assert_eq!(confirmed(1, &[]), None);
    }

    proptest::proptest! {
        /// The counts give what a look at every rank gives, whatever the
        /// order of reports, restarts and new generations.
        #[test]
        fn the_tally_agrees_with_a_look_at_every_rank(
            n in 1usize..6,
            ops in proptest::collection::vec((0u8..5, 0usize..6, 0u32..3, 0u64..3), 0..60),
        ) {
            let mut t = Tally::new(n);
            let mut said = vec![Said::default(); n];
            let (mut g, mut failed) = (0u32, Vec::<usize>::new());
            for (op, r, x, e) in ops {
                let r = r % n;
                match op {
                    0 => {
                        g += x % 2;
                        if !failed.contains(&r) {
                            failed.push(r);
                        }
                        t.begin(g, &failed);
                    }
                    1 => {
                        said[r].halted = Some(g.saturating_sub(x % 2));
                        t.halted(r, g.saturating_sub(x % 2));
                    }
                    2 => {
                        let newest = (x > 0).then_some(e);
                        said[r].ready = Some(g.saturating_sub(x % 2));
                        said[r].newest = newest;
                        t.ready(r, g.saturating_sub(x % 2), newest);
                    }
                    3 => {
                        said[r].restored = Some((g, e));
                        t.restored(r, g, e);
                    }
                    _ => {
                        said[r].halted = None;
                        said[r].ready = None;
                        said[r].newest = None;
                        t.started(r);
                    }
                }
                proptest::prop_assert_eq!(t.stand(), stand(g, &failed, &said));
                proptest::prop_assert_eq!(t.confirmed(), confirmed(g, &said));
            }
        }
    }
}
