//! A set of ranks as sorted, disjoint, non-adjacent ranges: the ranks of
//! a host or of a subtree of hosts are a few ranges (one when ranks are
//! placed by blocks), so a report gathered from thousands of ranks stays a
//! few bytes on its way up the control tree.

use serde::{Deserialize, Serialize};
use std::ops::Range;

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct RankSet {
    /// `[start, end)` pairs, sorted, none touching another.
    ranges: Vec<(u32, u32)>,
}

impl RankSet {
    pub fn new() -> RankSet {
        RankSet::default()
    }

    pub fn of(ranks: Range<u32>) -> RankSet {
        let mut s = RankSet::new();
        s.insert_range(ranks);
        s
    }

    pub fn one(rank: u32) -> RankSet {
        RankSet::of(rank..rank.saturating_add(1))
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn len(&self) -> usize {
        self.ranges.iter().map(|&(a, b)| (b - a) as usize).sum()
    }

    /// How many ranges (what a message carrying the set carries).
    pub fn ranges(&self) -> usize {
        self.ranges.len()
    }

    pub fn contains(&self, rank: u32) -> bool {
        let i = self.ranges.partition_point(|&(_, end)| end <= rank);
        self.ranges.get(i).is_some_and(|&(start, _)| start <= rank)
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|&(a, b)| a..b)
    }

    pub fn insert(&mut self, rank: u32) {
        self.insert_range(rank..rank.saturating_add(1));
    }

    pub fn insert_range(&mut self, r: Range<u32>) {
        if r.is_empty() {
            return;
        }
        // The ranges that touch or overlap `r` are merged with it.
        let first = self.ranges.partition_point(|&(_, end)| end < r.start);
        let last = self.ranges.partition_point(|&(start, _)| start <= r.end);
        let (mut a, mut b) = (r.start, r.end);
        if first < last {
            a = a.min(self.ranges[first].0);
            b = b.max(self.ranges[last - 1].1);
        }
        self.ranges.splice(first..last, [(a, b)]);
    }

    pub fn union(&mut self, other: &RankSet) {
        for &(a, b) in &other.ranges {
            self.insert_range(a..b);
        }
    }

    pub fn remove(&mut self, rank: u32) {
        let i = self.ranges.partition_point(|&(_, end)| end <= rank);
        let Some(&(a, b)) = self.ranges.get(i) else {
            return;
        };
        if rank < a {
            return;
        }
        let parts: Vec<(u32, u32)> = [(a, rank), (rank + 1, b)]
            .into_iter()
            .filter(|(x, y)| x < y)
            .collect();
        self.ranges.splice(i..=i, parts);
    }

    /// Every rank of `other` is in this set.
    pub fn covers(&self, other: &RankSet) -> bool {
        other.ranges.iter().all(|&(a, b)| {
            let i = self.ranges.partition_point(|&(_, end)| end <= a);
            self.ranges
                .get(i)
                .is_some_and(|&(start, end)| start <= a && b <= end)
        })
    }

    /// The ranks of this set that are not in `other`.
    pub fn minus(&self, other: &RankSet) -> RankSet {
        let mut out = self.clone();
        for r in other.iter() {
            out.remove(r);
        }
        out
    }
}

impl FromIterator<u32> for RankSet {
    fn from_iter<I: IntoIterator<Item = u32>>(it: I) -> RankSet {
        let mut s = RankSet::new();
        for r in it {
            s.insert(r);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn ranges_merge_and_split() {
        let mut s = RankSet::of(0..4);
        s.insert_range(8..12);
        assert_eq!(s.ranges(), 2);
        s.insert_range(4..8);
        assert_eq!((s.ranges(), s.len()), (1, 12), "adjacent ranges merge");
        s.remove(5);
        assert_eq!((s.ranges(), s.len()), (2, 11));
        assert!(!s.contains(5) && s.contains(4) && s.contains(6));
        assert!(s.covers(&RankSet::of(6..12)));
        assert!(!s.covers(&RankSet::of(4..7)));
        assert_eq!(
            s.minus(&RankSet::of(0..10)).iter().collect::<Vec<_>>(),
            [10, 11]
        );
    }

    proptest::proptest! {
        /// The set behaves as a set of numbers, whatever the order of
        /// insertions and removals, and stays in its canonical form.
        #[test]
        fn the_set_is_a_set(ops in proptest::collection::vec((proptest::bool::ANY, 0u32..40, 1u32..6), 0..40)) {
            let mut s = RankSet::new();
            let mut model = BTreeSet::new();
            for (add, at, n) in ops {
                if add {
                    s.insert_range(at..at + n);
                    model.extend(at..at + n);
                } else {
                    s.remove(at);
                    model.remove(&at);
                }
                proptest::prop_assert_eq!(s.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
                proptest::prop_assert!(s.ranges.windows(2).all(|w| w[0].1 < w[1].0));
                proptest::prop_assert!(s.ranges.iter().all(|&(a, b)| a < b));
                for r in 0..50 {
                    proptest::prop_assert_eq!(s.contains(r), model.contains(&r));
                }
                let probe = RankSet::of(at..at + n);
                proptest::prop_assert_eq!(s.covers(&probe), (at..at + n).all(|r| model.contains(&r)));
            }
        }
    }
}
