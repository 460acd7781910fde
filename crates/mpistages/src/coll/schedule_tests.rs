//! Tests of `schedule.rs`.

use super::sim::{run, Rank};
use super::*;

/// Composition of affine maps x -> a*x + b over u16 (4-byte elements):
/// associative, as MPI requires, and not commutative, so any change in
/// the order of combination shows in the result.
fn ordered(f: &[u8], g: &[u8]) -> Vec<u8> {
    f.chunks(4)
        .zip(g.chunks(4))
        .flat_map(|(f, g)| {
            let u = |b: &[u8], i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
            let (fa, fb, ga, gb) = (u(f, 0), u(f, 2), u(g, 0), u(g, 2));
            let a = ga.wrapping_mul(fa);
            let b = ga.wrapping_mul(fb).wrapping_add(gb);
            [a.to_le_bytes(), b.to_le_bytes()].concat()
        })
        .collect()
}

fn elem(r: usize) -> Vec<u8> {
    let (a, b) = (r as u16 * 7 + 3, r as u16 * 5 + 1);
    [a.to_le_bytes(), b.to_le_bytes()].concat()
}

fn fold(ranks: std::ops::Range<usize>) -> Vec<u8> {
    let mut it = ranks.map(elem);
    let first = it.next().unwrap();
    it.fold(first, |acc, x| ordered(&acc, &x))
}

const SIZES: &[usize] = &[1, 2, 3, 4, 5, 7, 8, 13, 16];

#[test]
fn reductions_keep_rank_order() {
    for &n in SIZES {
        let mk = || -> Vec<Rank> {
            (0..n)
                .map(|r| Rank {
                    send: elem(r),
                    recv: vec![0; 4],
                })
                .collect()
        };
        for root in 0..n {
            let mut ranks = mk();
            let sc: Vec<_> = (0..n).map(|me| reduce(me, n, root, 1, 4)).collect();
            run(&sc, &mut ranks, &ordered);
            assert_eq!(ranks[root].recv, fold(0..n), "reduce n={n} root={root}");
        }
        let mut ranks = mk();
        let sc: Vec<_> = (0..n).map(|me| allreduce(me, n, 1, 4)).collect();
        run(&sc, &mut ranks, &ordered);
        for r in &ranks {
            assert_eq!(r.recv, fold(0..n), "allreduce n={n}");
        }
        for excl in [false, true] {
            let mut ranks = mk();
            let sc: Vec<_> = (0..n).map(|me| scan(me, n, 1, 4, excl)).collect();
            run(&sc, &mut ranks, &ordered);
            for (me, r) in ranks.iter().enumerate() {
                if excl && me == 0 {
                    continue;
                }
                let upto = if excl { me } else { me + 1 };
                assert_eq!(r.recv, fold(0..upto), "scan n={n} me={me} excl={excl}");
            }
        }
    }
}

/// Wrapping u16 addition: commutative, for the ring algorithm.
fn add(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.chunks(2)
        .zip(b.chunks(2))
        .flat_map(|(x, y)| {
            u16::from_le_bytes([x[0], x[1]])
                .wrapping_add(u16::from_le_bytes([y[0], y[1]]))
                .to_le_bytes()
        })
        .collect()
}

#[test]
fn ring_allreduce_sums_every_element() {
    for &n in SIZES {
        for count in [n, n + 1, 3 * n + 2, 1000] {
            let mut ranks: Vec<Rank> = (0..n)
                .map(|r| Rank {
                    send: (0..count)
                        .flat_map(|i| ((r * 1000 + i) as u16).to_le_bytes())
                        .collect(),
                    recv: vec![0; 2 * count],
                })
                .collect();
            let sc: Vec<_> = (0..n).map(|me| ring_allreduce(me, n, count, 2)).collect();
            run(&sc, &mut ranks, &add);
            let want: Vec<u8> = (0..count)
                .flat_map(|i| {
                    (0..n)
                        .fold(0u16, |acc, r| acc.wrapping_add((r * 1000 + i) as u16))
                        .to_le_bytes()
                })
                .collect();
            for r in &ranks {
                assert_eq!(r.recv, want, "ring allreduce n={n} count={count}");
            }
        }
    }
}

#[test]
fn large_bcast_reaches_everyone() {
    for &n in SIZES {
        for len in [n, n + 3, 1000, 4099] {
            for root in 0..n {
                let want: Vec<u8> = (0..len).map(|i| (i * 13 + root) as u8).collect();
                let mut ranks: Vec<Rank> = (0..n)
                    .map(|r| Rank {
                        send: vec![],
                        recv: if r == root {
                            want.clone()
                        } else {
                            vec![0; len]
                        },
                    })
                    .collect();
                let sc: Vec<_> = (0..n)
                    .map(|me| bcast_scatter_ring(me, n, root, len))
                    .collect();
                run(&sc, &mut ranks, &add);
                assert!(
                    ranks.iter().all(|r| r.recv == want),
                    "bcast n={n} len={len} root={root}"
                );
            }
        }
    }
}

#[test]
fn data_movement() {
    for &n in SIZES {
        for root in 0..n {
            let mut ranks: Vec<Rank> = (0..n)
                .map(|r| Rank {
                    send: vec![],
                    recv: if r == root { vec![9, 8, 7] } else { vec![0; 3] },
                })
                .collect();
            let sc: Vec<_> = (0..n).map(|me| bcast(me, n, root, 3)).collect();
            run(&sc, &mut ranks, &ordered);
            assert!(
                ranks.iter().all(|r| r.recv == [9, 8, 7]),
                "bcast n={n} root={root}"
            );

            for len in [3, 70000] {
                let mut ranks: Vec<Rank> = (0..n)
                    .map(|r| Rank {
                        send: vec![r as u8; len],
                        recv: vec![0; len * n],
                    })
                    .collect();
                let sc: Vec<_> = (0..n).map(|me| gather(me, n, root, len)).collect();
                run(&sc, &mut ranks, &ordered);
                let want: Vec<u8> = (0..n).flat_map(|r| vec![r as u8; len]).collect();
                assert_eq!(ranks[root].recv, want, "gather n={n} root={root} len={len}");

                let mut ranks: Vec<Rank> = (0..n)
                    .map(|r| Rank {
                        send: if r == root { want.clone() } else { vec![] },
                        recv: vec![0; len],
                    })
                    .collect();
                let sc: Vec<_> = (0..n).map(|me| scatter(me, n, root, len)).collect();
                run(&sc, &mut ranks, &ordered);
                for (r, rk) in ranks.iter().enumerate() {
                    assert_eq!(
                        rk.recv,
                        vec![r as u8; len],
                        "scatter n={n} root={root} len={len}"
                    );
                }
            }
        }
        let lens: Vec<usize> = (0..n).map(|r| r % 3 + 1).collect();
        let offs: Vec<usize> = lens
            .iter()
            .scan(0, |a, l| {
                let o = *a;
                *a += l;
                Some(o)
            })
            .collect();
        let total: usize = lens.iter().sum();
        let mut ranks: Vec<Rank> = (0..n)
            .map(|r| Rank {
                send: vec![r as u8 + 1; lens[r]],
                recv: vec![0; total],
            })
            .collect();
        let sc: Vec<_> = (0..n).map(|me| allgatherv(me, n, &offs, &lens)).collect();
        run(&sc, &mut ranks, &ordered);
        let want: Vec<u8> = (0..n).flat_map(|r| vec![r as u8 + 1; lens[r]]).collect();
        assert!(ranks.iter().all(|r| r.recv == want), "allgatherv n={n}");

        let offs: Vec<usize> = (0..n).collect();
        let ones = vec![1; n];
        let mut ranks: Vec<Rank> = (0..n)
            .map(|r| Rank {
                send: (0..n).map(|d| (r * 16 + d) as u8).collect(),
                recv: vec![0; n],
            })
            .collect();
        let sc: Vec<_> = (0..n)
            .map(|me| alltoallv(me, n, &offs, &ones, &offs, &ones))
            .collect();
        run(&sc, &mut ranks, &ordered);
        for (me, rk) in ranks.iter().enumerate() {
            let want: Vec<u8> = (0..n).map(|s| (s * 16 + me) as u8).collect();
            assert_eq!(rk.recv, want, "alltoall n={n}");
        }
        // Blocks past the linear limit go pairwise, one peer per round.
        let big = super::ALLTOALL_LINEAR_MAX + 1;
        let offs: Vec<usize> = (0..n).map(|d| d * big).collect();
        let lens = vec![big; n];
        let mut ranks: Vec<Rank> = (0..n)
            .map(|r| Rank {
                send: (0..n * big).map(|i| (r * 16 + i / big + i) as u8).collect(),
                recv: vec![0; n * big],
            })
            .collect();
        let sc: Vec<_> = (0..n)
            .map(|me| alltoallv(me, n, &offs, &lens, &offs, &lens))
            .collect();
        assert!(sc.iter().all(|s| s.rounds.len() == n), "pairwise n={n}");
        run(&sc, &mut ranks, &ordered);
        for (me, rk) in ranks.iter().enumerate() {
            let want: Vec<u8> = (0..n * big)
                .map(|i| (i / big * 16 + me + me * big + i % big) as u8)
                .collect();
            assert_eq!(rk.recv, want, "pairwise alltoall n={n}");
        }
        let mut ranks: Vec<Rank> = (0..n)
            .map(|_| Rank {
                send: vec![],
                recv: vec![],
            })
            .collect();
        let sc: Vec<_> = (0..n).map(|me| barrier(me, n)).collect();
        run(&sc, &mut ranks, &ordered);
    }
}

/// Plays `sc` (one schedule per rank), carrying in each message what its
/// sender knows of who has arrived (a send carries what its rank knew when
/// its round began); returns what each rank knows at its end. Panics when
/// the ranks cannot all finish (a message nobody sends).
fn heard_of(sc: &[Schedule]) -> Vec<Vec<bool>> {
    use std::collections::{HashMap, VecDeque};
    let n = sc.len();
    let mut knows: Vec<Vec<bool>> = (0..n).map(|r| (0..n).map(|q| q == r).collect()).collect();
    let mut round = vec![0; n];
    let mut sent = vec![false; n];
    let mut wire: HashMap<(usize, usize), VecDeque<Vec<bool>>> = HashMap::new();
    loop {
        let mut moved = false;
        for r in 0..n {
            let Some(steps) = sc[r].rounds.get(round[r]) else {
                continue;
            };
            if !sent[r] {
                for st in steps {
                    if let Step::Send { to, .. } = st {
                        wire.entry((r, *to))
                            .or_default()
                            .push_back(knows[r].clone());
                    }
                }
                sent[r] = true;
                moved = true;
            }
            let mut need: HashMap<usize, usize> = HashMap::new();
            for st in steps {
                if let Step::Recv { from, .. } = st {
                    *need.entry(*from).or_default() += 1;
                }
            }
            if need
                .iter()
                .all(|(&f, &k)| wire.get(&(f, r)).map_or(0, |q| q.len()) >= k)
            {
                for (&f, &k) in &need {
                    for _ in 0..k {
                        let got = wire.get_mut(&(f, r)).unwrap().pop_front().unwrap();
                        for q in 0..n {
                            knows[r][q] |= got[q];
                        }
                    }
                }
                round[r] += 1;
                sent[r] = false;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    for r in 0..n {
        assert_eq!(
            round[r],
            sc[r].rounds.len(),
            "rank {r} of {n} cannot finish"
        );
    }
    assert!(
        wire.values().all(|q| q.is_empty()),
        "a message nobody receives"
    );
    knows
}

#[test]
fn no_rank_leaves_a_barrier_before_every_rank_came() {
    for n in [1, 2, 3, 5, 8, 13, 64, 100] {
        let sc: Vec<_> = (0..n).map(|me| barrier(me, n)).collect();
        assert!(
            heard_of(&sc).iter().flatten().all(|&k| k),
            "dissemination n={n}"
        );
        // One group, every rank its own, blocks of 4, 7 hosts round robin.
        let layouts: [Vec<usize>; 4] = [
            vec![0; n],
            (0..n).collect(),
            (0..n).map(|r| r / 4).collect(),
            (0..n).map(|r| (r * 3) % 7).collect(),
        ];
        for group in &layouts {
            let sc: Vec<_> = (0..n).map(|me| barrier_grouped(me, group)).collect();
            assert!(
                heard_of(&sc).iter().flatten().all(|&k| k),
                "grouped n={n} {group:?}"
            );
        }
        // One group: a message each way per member but the first.
        let sc: Vec<_> = (0..n).map(|me| barrier_grouped(me, &vec![0; n])).collect();
        let msgs: usize = sc
            .iter()
            .flat_map(|s| &s.rounds)
            .flatten()
            .filter(|s| matches!(s, Step::Send { .. }))
            .count();
        assert_eq!(msgs, 2 * (n - 1), "one group of {n}");
    }
}
