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

pub fn stand(g: u32, failed: &[usize], ranks: &[Said]) -> Stand {
    let at_g = |v: Option<u32>| v == Some(g);
    let propagated = ranks
        .iter()
        .enumerate()
        .all(|(r, s)| failed.contains(&r) || at_g(s.halted) || at_g(s.ready));
    let replaced = failed.iter().all(|&r| at_g(ranks[r].ready));
    let resume = ranks.iter().all(|s| at_g(s.ready)).then(|| {
        let first = ranks.first().and_then(|s| s.newest);
        first.filter(|&e| e > 0 && ranks.iter().all(|s| s.newest == first))
    });
    Stand {
        propagated,
        replaced,
        resume,
    }
}

/// The epoch every rank restored at generation `g`, once all have.
pub fn confirmed(g: u32, ranks: &[Said]) -> Option<u64> {
    let first = ranks.first()?.restored?;
    (first.0 == g && ranks.iter().all(|s| s.restored == Some(first))).then_some(first.1)
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
}
