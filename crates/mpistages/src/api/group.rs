//! Groups: ordered sets of processes, named by world rank.

use super::consts::{err, CONGRUENT, IDENT, PROC_NULL, SIMILAR, UNDEFINED, UNEQUAL};
use super::error::{fail, MpiResult};

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Group {
    /// World ranks, in group rank order.
    pub members: Vec<usize>,
}

impl Group {
    pub fn size(&self) -> usize {
        self.members.len()
    }

    pub fn rank_of(&self, world: usize) -> Option<usize> {
        self.members.iter().position(|&w| w == world)
    }

    fn check_ranks(&self, ranks: &[i32]) -> MpiResult<()> {
        let mut seen = vec![false; self.size()];
        for &r in ranks {
            if r < 0 || r as usize >= self.size() {
                return fail(
                    err::RANK,
                    format!("rank {r} is not in a group of size {}", self.size()),
                );
            }
            if std::mem::replace(&mut seen[r as usize], true) {
                return fail(err::RANK, format!("rank {r} is listed twice"));
            }
        }
        Ok(())
    }

    pub fn incl(&self, ranks: &[i32]) -> MpiResult<Group> {
        self.check_ranks(ranks)?;
        Ok(Group {
            members: ranks.iter().map(|&r| self.members[r as usize]).collect(),
        })
    }

    pub fn excl(&self, ranks: &[i32]) -> MpiResult<Group> {
        self.check_ranks(ranks)?;
        Ok(Group {
            members: (0..self.size())
                .filter(|i| !ranks.contains(&(*i as i32)))
                .map(|i| self.members[i])
                .collect(),
        })
    }

    /// The ranks `(first, last, stride)` triplets name, in order
    /// (`MPI_Group_range_incl/excl`).
    pub fn range_ranks(&self, ranges: &[[i32; 3]]) -> MpiResult<Vec<i32>> {
        let mut out = Vec::new();
        for &[first, last, stride] in ranges {
            if stride == 0 {
                return fail(err::ARG, "a rank range has stride 0");
            }
            let in_group = |r: i32| r >= 0 && (r as usize) < self.size();
            if !in_group(first) || !in_group(last) {
                return fail(
                    err::RANK,
                    format!(
                        "range {first}..{last} is outside a group of size {}",
                        self.size()
                    ),
                );
            }
            if (stride > 0 && first > last) || (stride < 0 && first < last) {
                continue;
            }
            let mut r = first as i64;
            while (stride > 0 && r <= last as i64) || (stride < 0 && r >= last as i64) {
                out.push(r as i32);
                r += stride as i64;
            }
        }
        Ok(out)
    }

    pub fn union(&self, other: &Group) -> Group {
        let mut members = self.members.clone();
        members.extend(other.members.iter().filter(|w| !self.members.contains(w)));
        Group { members }
    }

    pub fn intersection(&self, other: &Group) -> Group {
        Group {
            members: self
                .members
                .iter()
                .copied()
                .filter(|w| other.members.contains(w))
                .collect(),
        }
    }

    pub fn difference(&self, other: &Group) -> Group {
        Group {
            members: self
                .members
                .iter()
                .copied()
                .filter(|w| !other.members.contains(w))
                .collect(),
        }
    }

    pub fn translate(&self, ranks: &[i32], other: &Group) -> MpiResult<Vec<i32>> {
        ranks
            .iter()
            .map(|&r| {
                if r == PROC_NULL {
                    return Ok(PROC_NULL);
                }
                if r < 0 || r as usize >= self.size() {
                    return fail(
                        err::RANK,
                        format!("rank {r} is not in a group of size {}", self.size()),
                    );
                }
                Ok(other
                    .rank_of(self.members[r as usize])
                    .map_or(UNDEFINED, |x| x as i32))
            })
            .collect()
    }

    pub fn compare(&self, other: &Group) -> i32 {
        if self.members == other.members {
            IDENT
        } else if self.size() == other.size()
            && self.members.iter().all(|w| other.members.contains(w))
        {
            SIMILAR
        } else {
            UNEQUAL
        }
    }
}

/// `MPI_Comm_compare` on top of group comparison.
pub fn compare_comms(same_handle: bool, same_context: bool, a: &Group, b: &Group) -> i32 {
    if same_handle || same_context {
        return IDENT;
    }
    match a.compare(b) {
        IDENT => CONGRUENT,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations_keep_order() {
        let a = Group {
            members: vec![0, 1, 2, 3],
        };
        let b = Group {
            members: vec![3, 1, 5],
        };
        assert_eq!(a.union(&b).members, vec![0, 1, 2, 3, 5]);
        assert_eq!(a.intersection(&b).members, vec![1, 3]);
        assert_eq!(a.difference(&b).members, vec![0, 2]);
        assert_eq!(a.incl(&[3, 0]).unwrap().members, vec![3, 0]);
        assert_eq!(a.excl(&[1]).unwrap().members, vec![0, 2, 3]);
        assert_eq!(
            a.translate(&[1, 2, PROC_NULL], &b).unwrap(),
            vec![1, UNDEFINED, PROC_NULL]
        );
        assert!(a.incl(&[4]).is_err());
        assert_eq!(a.range_ranks(&[[3, 0, -2], [1, 1, 1]]).unwrap(), [3, 1, 1]);
        assert!(a.range_ranks(&[[0, 4, 1]]).is_err());
        assert!(a.incl(&[1, 1]).is_err());
        assert_eq!(
            b.compare(&Group {
                members: vec![5, 3, 1]
            }),
            SIMILAR
        );
    }
}
