//! Erasure-coded redundancy sets (`xor:K`, `rs:K+M`), as SCR's XOR and
//! FTI's Reed–Solomon levels have them: the ranks of a set, each on another
//! host where the hosts allow, store parity of each other's checkpoints
//! instead of whole copies, and the checkpoints of up to M lost members
//! are rebuilt from the survivors' checkpoints and parity.
//!
//! The arithmetic of one set, without processes or sockets:
//! - `sets`: which ranks form a set (spread over hosts);
//! - `Layout`: a set of n members with m parity shards per stripe. Every
//!   member's checkpoint (its file bytes, padded) is cut into d = n − m
//!   chunks; stripe ("row") r holds chunk i of member (r + m + i) mod n as
//!   its data shard i, and member (r + p) mod n holds its parity shard p.
//!   So each member holds m parity shards (m/d of its checkpoint size) and
//!   no member holds parity of a stripe it has data in (RAID-5 rotation);
//! - `code`: XOR (m = 1) and Reed–Solomon (the `reed-solomon-simd` crate);
//! - `parity`: what a member holds, as checksummed bytes;
//! - `plan`: after a failure, which survivor sends which shard to whom.
//!
//! Moving shards between ranks is the MPI layer's (`api::redundancy`).

pub mod code;
pub mod parity;
pub mod plan;

/// What protects a rank's checkpoint against the loss of its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redundancy {
    /// A whole copy at another rank.
    Partner,
    /// Sets of `k` ranks storing XOR parity: one lost member per set.
    Xor { k: u32 },
    /// Sets of `k + m` ranks storing Reed–Solomon parity: `m` lost members.
    Rs { k: u32, m: u32 },
}

impl Redundancy {
    /// (members per set, parity shards per stripe) for erasure codes.
    pub fn set_shape(self) -> Option<(usize, usize)> {
        match self {
            Redundancy::Partner => None,
            Redundancy::Xor { k } => Some((k as usize, 1)),
            Redundancy::Rs { k, m } => Some(((k + m) as usize, m as usize)),
        }
    }
}

impl std::fmt::Display for Redundancy {
    /// As `--ckpt` takes it (and as the level is named in messages).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Redundancy::Partner => write!(f, "partner"),
            Redundancy::Xor { k } => write!(f, "xor:{k}"),
            Redundancy::Rs { k, m } => write!(f, "rs:{k}+{m}"),
        }
    }
}

/// Splits the ranks of a job into sets of `n` (the last, short one merged
/// into the one before), with the ranks of each set on as many different
/// hosts as there are: ranks are taken one per host in turn (the first
/// rank of every host, then the second, ...). `hosts[r]` is rank r's host.
pub fn sets(hosts: &[usize], n: usize) -> Vec<Vec<u32>> {
    let size = hosts.len();
    let mut by_host: std::collections::BTreeMap<usize, Vec<u32>> = Default::default();
    for (r, &h) in hosts.iter().enumerate() {
        by_host.entry(h).or_default().push(r as u32);
    }
    let mut order = Vec::with_capacity(size);
    for i in 0.. {
        let before = order.len();
        order.extend(by_host.values().filter_map(|v| v.get(i).copied()));
        if order.len() == before {
            break;
        }
    }
    let n = n.max(1);
    let mut out: Vec<Vec<u32>> = order.chunks(n).map(<[u32]>::to_vec).collect();
    if out.len() > 1 && out.last().is_some_and(|s| s.len() < n) {
        let short = out.pop().expect("more than one set");
        out.last_mut().expect("more than one set").extend(short);
    }
    out
}

/// One redundancy set: `members[j]` is the rank of member j.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub members: Vec<u32>,
    /// Parity shards per stripe (lost members the set survives).
    pub m: usize,
}

impl Layout {
    /// The set of `rank` among `sets`, with `m` parity shards per stripe;
    /// none when the set is too small to hold data and parity.
    pub fn of(sets: &[Vec<u32>], rank: u32, m: usize) -> Option<Layout> {
        let members = sets.iter().find(|s| s.contains(&rank))?.clone();
        (m >= 1 && members.len() > m).then_some(Layout { members, m })
    }

    pub fn n(&self) -> usize {
        self.members.len()
    }

    /// Data shards per stripe (chunks per member).
    pub fn d(&self) -> usize {
        self.n() - self.m
    }

    /// This set's member index of `rank`.
    pub fn index_of(&self, rank: u32) -> Option<usize> {
        self.members.iter().position(|&r| r == rank)
    }

    /// The member whose chunk `i` is data shard `i` of stripe `row`.
    pub fn data_member(&self, row: usize, i: usize) -> usize {
        (row + self.m + i) % self.n()
    }

    /// The member holding parity shard `p` of stripe `row`.
    pub fn holder(&self, row: usize, p: usize) -> usize {
        (row + p) % self.n()
    }

    /// The stripe that holds chunk `i` of `member`'s checkpoint.
    pub fn row_of_chunk(&self, member: usize, i: usize) -> usize {
        (member + 2 * self.n() - self.m - i) % self.n()
    }

    /// What `member` is in stripe `row`: `Ok(i)` data shard i, `Err(p)`
    /// holder of parity shard p.
    pub fn role(&self, row: usize, member: usize) -> Result<usize, usize> {
        let k = (member + self.n() - row) % self.n();
        if k < self.m {
            Err(k)
        } else {
            Ok(k - self.m)
        }
    }

    /// Bytes per chunk for checkpoints of at most `longest` bytes: a
    /// multiple of 64 (what the Reed–Solomon code needs, and aligned).
    pub fn chunk_len(&self, longest: u64) -> u64 {
        let d = self.d() as u64;
        (longest.div_ceil(d).max(1)).div_ceil(64) * 64
    }
}

/// Appends chunk `i` of `bytes` cut into chunks of `chunk` bytes,
/// zero-padded, to `out`.
pub fn append_chunk(out: &mut Vec<u8>, bytes: &[u8], chunk: usize, i: usize) {
    let start = (i * chunk).min(bytes.len());
    let end = ((i + 1) * chunk).min(bytes.len());
    out.extend_from_slice(&bytes[start..end]);
    out.resize(out.len() + chunk - (end - start), 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_take_one_rank_per_host_in_turn() {
        // 4 hosts of 2 ranks (block placement).
        let hosts = [0, 0, 1, 1, 2, 2, 3, 3];
        assert_eq!(sets(&hosts, 4), vec![vec![0, 2, 4, 6], vec![1, 3, 5, 7]]);
        // One host: in rank order; a short last set joins the one before.
        assert_eq!(sets(&[0; 6], 4), vec![vec![0, 1, 2, 3, 4, 5]]);
        assert_eq!(sets(&[0; 8], 4), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        // Fewer ranks than a set: one set of them all.
        assert_eq!(sets(&[0, 1], 4), vec![vec![0, 1]]);
        // Round-robin placement.
        assert_eq!(
            sets(&[0, 1, 2, 0, 1, 2], 3),
            vec![vec![0, 1, 2], vec![3, 4, 5]]
        );
    }

    #[test]
    fn every_stripe_has_its_data_and_parity_on_distinct_members() {
        for (n, m) in [(2, 1), (3, 1), (4, 1), (6, 2), (7, 3), (5, 4)] {
            let l = Layout {
                members: (0..n as u32).collect(),
                m,
            };
            let d = l.d();
            let mut chunks_seen = std::collections::BTreeSet::new();
            for row in 0..n {
                let mut who: Vec<usize> = (0..d).map(|i| l.data_member(row, i)).collect();
                who.extend((0..m).map(|p| l.holder(row, p)));
                let mut sorted = who.clone();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(sorted.len(), n, "n={n} m={m} row {row}: {who:?}");
                for i in 0..d {
                    let j = l.data_member(row, i);
                    assert_eq!(l.role(row, j), Ok(i));
                    assert_eq!(l.row_of_chunk(j, i), row);
                    assert!(chunks_seen.insert((j, i)), "chunk {i} of {j} twice");
                }
                for p in 0..m {
                    assert_eq!(l.role(row, l.holder(row, p)), Err(p));
                }
            }
            // Every chunk of every member is in exactly one stripe.
            assert_eq!(chunks_seen.len(), n * d);
        }
    }

    fn chunk(bytes: &[u8], chunk: usize, i: usize) -> Vec<u8> {
        let mut out = Vec::new();
        append_chunk(&mut out, bytes, chunk, i);
        out
    }

    #[test]
    fn chunks_pad_with_zeros() {
        let l = Layout {
            members: vec![0, 1, 2, 3],
            m: 1,
        };
        assert_eq!(l.chunk_len(1), 64);
        assert_eq!(l.chunk_len(3 * 64), 64);
        assert_eq!(l.chunk_len(3 * 64 + 1), 128);
        let b: Vec<u8> = (1..=70).collect();
        assert_eq!(chunk(&b, 64, 0), b[..64]);
        let mut last = b[64..].to_vec();
        last.resize(64, 0);
        assert_eq!(chunk(&b, 64, 1), last);
        assert_eq!(chunk(&b, 64, 2), vec![0; 64]);
    }

    #[test]
    fn small_sets() {
        let s = sets(&[0, 1, 2], 4);
        assert_eq!(
            Layout::of(&s, 1, 1),
            Some(Layout {
                members: vec![0, 1, 2],
                m: 1
            })
        );
        assert_eq!(Layout::of(&s, 1, 3), None, "no room for data");
        assert_eq!(Layout::of(&s, 9, 1), None);
    }
}
