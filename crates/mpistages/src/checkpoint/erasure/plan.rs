//! After a failure: which members of a set lost their checkpoint, and for
//! each of them which survivor sends which shard of which stripe. Every
//! member computes the same plan from the same statuses, so nobody has to
//! be told what to send.

use super::Layout;

/// What a member can give for an epoch: its own checkpoint (the data of
/// its chunks) and a valid parity of its stripes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub data: bool,
    pub parity: bool,
}

/// Stripe `row` of a lost member: its chunk is data shard `want`, rebuilt
/// from the shards `from` = (member, shard index) sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stripe {
    pub row: usize,
    pub want: usize,
    pub from: Vec<(usize, usize)>,
}

/// How one lost member gets its checkpoint back: a stripe per chunk, in
/// chunk order, or why it cannot.
pub type Rebuild = Result<Vec<Stripe>, String>;

/// The rebuild of every member without data, by member index.
pub fn plan(layout: &Layout, status: &[Status]) -> Vec<(usize, Rebuild)> {
    let lost: Vec<usize> = (0..layout.n()).filter(|&j| !status[j].data).collect();
    lost.iter()
        .map(|&x| {
            let stripes = (0..layout.d())
                .map(|i| stripe(layout, status, layout.row_of_chunk(x, i), i))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|have| {
                    let ranks: Vec<u32> = lost.iter().map(|&j| layout.members[j]).collect();
                    format!(
                        "{} of {} members of its redundancy set have no copy (ranks {ranks:?}) and {have} shards of a stripe are left where {} are needed",
                        lost.len(),
                        layout.n(),
                        layout.d(),
                    )
                });
            (x, stripes)
        })
        .collect()
}

/// The first `d` available shards of `row` (data before parity); the
/// number available when there are too few.
fn stripe(layout: &Layout, status: &[Status], row: usize, want: usize) -> Result<Stripe, usize> {
    let d = layout.d();
    let data = (0..d)
        .filter(|&i| i != want)
        .map(|i| (layout.data_member(row, i), i))
        .filter(|&(j, _)| status[j].data);
    let parity = (0..layout.m)
        .map(|p| (layout.holder(row, p), d + p))
        .filter(|&(j, _)| status[j].parity);
    let from: Vec<(usize, usize)> = data.chain(parity).collect();
    if from.len() < d {
        return Err(from.len());
    }
    Ok(Stripe {
        row,
        want,
        from: from[..d].to_vec(),
    })
}

/// What member `j` sends to lost member `x` under `rebuild`, in order:
/// (stripe, shard index) of each shard it contributes.
pub fn sends(rebuild: &[Stripe], j: usize) -> Vec<(usize, usize)> {
    rebuild
        .iter()
        .filter_map(|s| s.from.iter().find(|f| f.0 == j).map(|f| (s.row, f.1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(n: usize) -> Vec<Status> {
        vec![
            Status {
                data: true,
                parity: true
            };
            n
        ]
    }

    #[test]
    fn nobody_lost_no_plan() {
        let l = Layout {
            members: vec![0, 1, 2, 3],
            m: 1,
        };
        assert!(plan(&l, &ok(4)).is_empty());
    }

    #[test]
    fn one_lost_under_xor_gets_every_chunk_from_the_others() {
        let l = Layout {
            members: vec![10, 11, 12, 13],
            m: 1,
        };
        let mut st = ok(4);
        st[2] = Status {
            data: false,
            parity: false,
        };
        let p = plan(&l, &st);
        assert_eq!(p.len(), 1);
        let (x, stripes) = &p[0];
        assert_eq!(*x, 2);
        let stripes = stripes.as_ref().unwrap();
        assert_eq!(stripes.len(), 3);
        for s in stripes {
            assert_eq!(s.from.len(), 3);
            assert!(s.from.iter().all(|&(j, _)| j != 2));
            // The stripe's parity holder is among the senders.
            assert!(s.from.contains(&(l.holder(s.row, 0), 3)));
        }
        // Each survivor sends a shard in the stripes it is part of.
        let total: usize = (0..4).map(|j| sends(stripes, j).len()).sum();
        assert_eq!(total, 9);
        assert!(sends(stripes, 2).is_empty());
    }

    #[test]
    fn losses_beyond_the_code_are_explained() {
        let l = Layout {
            members: vec![0, 1, 2, 3],
            m: 1,
        };
        let mut st = ok(4);
        st[0].data = false;
        st[3].data = false;
        let p = plan(&l, &st);
        assert_eq!(p.len(), 2);
        for (_, r) in p {
            let e = r.unwrap_err();
            assert!(e.contains("2 of 4 members") && e.contains("[0, 3]"), "{e}");
        }
    }

    #[test]
    fn reed_solomon_survives_two_lost_and_a_missing_parity_elsewhere() {
        let l = Layout {
            members: (0..6).collect(),
            m: 2,
        };
        for a in 0..6 {
            for b in a + 1..6 {
                let mut st = ok(6);
                st[a] = Status {
                    data: false,
                    parity: false,
                };
                st[b] = st[a];
                for (x, r) in plan(&l, &st) {
                    let stripes = r.unwrap_or_else(|e| panic!("lost {a},{b}: {e}"));
                    assert_eq!(stripes.len(), 4);
                    for s in &stripes {
                        assert_eq!(s.from.len(), 4);
                        assert!(s.from.iter().all(|&(j, _)| j != a && j != b));
                        assert_eq!(s.want, l.role(s.row, x).unwrap());
                    }
                }
            }
        }
        // Two lost and a survivor's parity damaged: some stripe is short.
        let mut st = ok(6);
        st[0].data = false;
        st[0].parity = false;
        st[1] = st[0];
        st[3].parity = false;
        assert!(plan(&l, &st).iter().any(|(_, r)| r.is_err()));
    }
}
