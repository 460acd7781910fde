//! Collective algorithms as schedules: pure data saying, per round, what
//! each rank sends, receives, reduces and copies. Nothing here does I/O, so
//! the tests below run every algorithm for many rank counts in memory.
//!
//! Buffers: `Send` (this rank's input), `Recv` (its output), `Temp`
//! (scratch of `temp_len` bytes). Offsets and lengths are in bytes; reduce
//! counts are in elements of `elem` bytes. Within a round all sends and
//! receives run concurrently, then the local steps run in order. Messages
//! between two ranks match in the order they are listed, so both sides of
//! every pair list them in the same order.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buf {
    Send,
    Recv,
    Temp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    pub buf: Buf,
    pub off: usize,
}

pub fn at(buf: Buf, off: usize) -> Loc {
    Loc { buf, off }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Send {
        to: usize,
        from: Loc,
        len: usize,
    },
    Recv {
        from: usize,
        into: Loc,
        len: usize,
    },
    /// `dst = src op dst` when `src_first` (src holds lower ranks' data),
    /// else `dst = dst op src`.
    Reduce {
        src: Loc,
        dst: Loc,
        count: usize,
        len: usize,
        src_first: bool,
    },
    Copy {
        src: Loc,
        dst: Loc,
        len: usize,
    },
}

#[derive(Clone, Debug, Default)]
pub struct Schedule {
    pub rounds: Vec<Vec<Step>>,
    pub temp_len: usize,
}

impl Schedule {
    fn round(&mut self, steps: Vec<Step>) {
        if !steps.is_empty() {
            self.rounds.push(steps);
        }
    }
}

fn send(to: usize, from: Loc, len: usize) -> Step {
    Step::Send { to, from, len }
}
fn recv(from: usize, into: Loc, len: usize) -> Step {
    Step::Recv { from, into, len }
}
fn copy(src: Loc, dst: Loc, len: usize) -> Step {
    Step::Copy { src, dst, len }
}

/// Dissemination barrier: ⌈log2 n⌉ rounds of empty messages.
pub fn barrier(me: usize, n: usize) -> Schedule {
    let mut s = Schedule::default();
    let mut k = 1;
    while k < n {
        s.round(vec![
            send((me + k) % n, at(Buf::Temp, 0), 0),
            recv((me + n - k) % n, at(Buf::Temp, 0), 0),
        ]);
        k <<= 1;
    }
    s
}

/// Barrier of a team in groups (`group[r]`: member `r`'s, a host): each
/// group's members report up a binomial tree to its first member, the
/// first members run the dissemination barrier among themselves, and each
/// releases its group down the same tree. A group of g takes 2(g - 1)
/// messages, each member at most ⌈log2 g⌉ + 1 partners, against n⌈log2 n⌉
/// messages and 2⌈log2 n⌉ partners of the dissemination barrier: what
/// counts where ranks outnumber cores (every message a wake-up) and where
/// connections are made at first use. Every member must pass the same
/// `group`.
pub fn barrier_grouped(me: usize, group: &[usize]) -> Schedule {
    let n = group.len();
    let mine: Vec<usize> = (0..n).filter(|&r| group[r] == group[me]).collect();
    // The first member of each group, in order (one pass: a scan of the
    // earlier members for each was O(n²) per barrier).
    let mut seen = std::collections::HashSet::new();
    let leaders: Vec<usize> = (0..n).filter(|&r| seen.insert(group[r])).collect();
    let local = mine.iter().position(|&r| r == me).expect("in its group");
    // Binomial tree over the group's order: the parent clears the lowest
    // set bit; the children add each lower power of two.
    let low = if local == 0 {
        mine.len().next_power_of_two()
    } else {
        1 << local.trailing_zeros()
    };
    let children: Vec<usize> = (0..low.trailing_zeros())
        .map(|k| local + (1 << k))
        .filter(|&c| c < mine.len())
        .map(|c| mine[c])
        .collect();
    let mut s = Schedule::default();
    s.round(
        children
            .iter()
            .map(|&c| recv(c, at(Buf::Temp, 0), 0))
            .collect(),
    );
    if local > 0 {
        let parent = mine[local - low];
        s.round(vec![
            send(parent, at(Buf::Temp, 0), 0),
            recv(parent, at(Buf::Temp, 0), 0),
        ]);
    } else {
        let i = leaders.iter().position(|&r| r == me).expect("a leader");
        for step in barrier(i, leaders.len()).rounds {
            s.round(
                step.into_iter()
                    .map(|x| match x {
                        Step::Send { to, from, len } => send(leaders[to], from, len),
                        Step::Recv { from, into, len } => recv(leaders[from], into, len),
                        other => other,
                    })
                    .collect(),
            );
        }
    }
    s.round(
        children
            .iter()
            .map(|&c| send(c, at(Buf::Temp, 0), 0))
            .collect(),
    );
    s
}

/// Binomial-tree broadcast of `len` bytes held in `Recv` at `root`.
pub fn bcast(me: usize, n: usize, root: usize, len: usize) -> Schedule {
    let mut s = Schedule::default();
    let rel = (me + n - root) % n;
    let mut mask = 1;
    while mask < n {
        if rel & mask != 0 {
            s.round(vec![recv((me + n - mask) % n, at(Buf::Recv, 0), len)]);
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    let mut sends = Vec::new();
    while mask > 0 {
        if rel + mask < n {
            sends.push(send((me + mask) % n, at(Buf::Recv, 0), len));
        }
        mask >>= 1;
    }
    s.round(sends);
    s
}

/// Broadcast for large buffers (van de Geijn): the root scatters one
/// segment to each rank, then a ring allgather completes everyone's copy.
/// Every byte leaves the root once instead of log2(n) times.
pub fn bcast_scatter_ring(me: usize, n: usize, root: usize, len: usize) -> Schedule {
    let chunk = len.div_ceil(n);
    // Segment of root-relative rank k.
    let seg = |k: usize| {
        let off = (k * chunk).min(len);
        (off, chunk.min(len - off))
    };
    let rel = (me + n - root) % n;
    let mut s = Schedule::default();
    if me == root {
        let sends = (1..n)
            .filter(|&k| seg(k).1 > 0)
            .map(|k| send((root + k) % n, at(Buf::Recv, seg(k).0), seg(k).1))
            .collect();
        s.round(sends);
    } else if seg(rel).1 > 0 {
        s.round(vec![recv(root, at(Buf::Recv, seg(rel).0), seg(rel).1)]);
    }
    // Ring over root-relative ranks (a rotation keeps the same neighbours).
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    for step in 0..n - 1 {
        let (so, sl) = seg((rel + n - step) % n);
        let (ro, rl) = seg((rel + 2 * n - step - 1) % n);
        let mut steps = Vec::new();
        if sl > 0 {
            steps.push(send(right, at(Buf::Recv, so), sl));
        }
        if rl > 0 {
            steps.push(recv(left, at(Buf::Recv, ro), rl));
        }
        s.round(steps);
    }
    s
}

/// Reduction to `root` of `count` elements of `elem` bytes (input in `Send`,
/// result in `Recv` at the root). Rank order is kept for every op: the
/// binomial tree combines contiguous rank ranges towards rank 0, which then
/// forwards to the root.
pub fn reduce(me: usize, n: usize, root: usize, count: usize, elem: usize) -> Schedule {
    let len = count * elem;
    let acc = at(Buf::Temp, 0);
    let inc = at(Buf::Temp, len);
    let mut s = Schedule {
        rounds: vec![],
        temp_len: 2 * len,
    };
    s.round(vec![copy(at(Buf::Send, 0), acc, len)]);
    let mut mask = 1;
    while mask < n {
        if me & mask != 0 {
            s.round(vec![send(me - mask, acc, len)]);
            break;
        }
        if me + mask < n {
            s.round(vec![
                recv(me + mask, inc, len),
                Step::Reduce {
                    src: inc,
                    dst: acc,
                    count,
                    len,
                    src_first: false,
                },
            ]);
        }
        mask <<= 1;
    }
    if root == 0 {
        if me == 0 {
            s.round(vec![copy(acc, at(Buf::Recv, 0), len)]);
        }
    } else if me == 0 {
        s.round(vec![send(root, acc, len)]);
    } else if me == root {
        s.round(vec![recv(0, at(Buf::Recv, 0), len)]);
    }
    s
}

/// Recursive-doubling allreduce (with the usual fold of the ranks beyond
/// the largest power of two). Every rank computes the same bits, combining
/// lower rank ranges first.
pub fn allreduce(me: usize, n: usize, count: usize, elem: usize) -> Schedule {
    let len = count * elem;
    let acc = at(Buf::Recv, 0);
    let tmp = at(Buf::Temp, 0);
    let mut s = Schedule {
        rounds: vec![],
        temp_len: len,
    };
    s.round(vec![copy(at(Buf::Send, 0), acc, len)]);
    let p = if n == 0 {
        0
    } else {
        1 << (usize::BITS - 1 - n.leading_zeros())
    };
    let rem = n - p;
    // Fold: in each pair (2i, 2i+1) below 2*rem, the odd rank takes over.
    let newrank = if me < 2 * rem {
        if me.is_multiple_of(2) {
            s.round(vec![send(me + 1, acc, len)]);
            None
        } else {
            s.round(vec![
                recv(me - 1, tmp, len),
                Step::Reduce {
                    src: tmp,
                    dst: acc,
                    count,
                    len,
                    src_first: true,
                },
            ]);
            Some(me / 2)
        }
    } else {
        Some(me - rem)
    };
    if let Some(nr) = newrank {
        let real = |r: usize| if r < rem { 2 * r + 1 } else { r + rem };
        let mut mask = 1;
        while mask < p {
            let peer = real(nr ^ mask);
            s.round(vec![
                send(peer, acc, len),
                recv(peer, tmp, len),
                Step::Reduce {
                    src: tmp,
                    dst: acc,
                    count,
                    len,
                    src_first: peer < me,
                },
            ]);
            mask <<= 1;
        }
    }
    if me < 2 * rem {
        if me % 2 == 1 {
            s.round(vec![send(me - 1, acc, len)]);
        } else {
            s.round(vec![recv(me + 1, acc, len)]);
        }
    }
    s
}

/// Ring allreduce for large vectors and commutative ops: reduce-scatter
/// around the ring, then allgather; each rank sends and receives only
/// 2(n-1)/n of the vector. Every segment is finished on one rank and then
/// copied, so all ranks end with the same bits.
pub fn ring_allreduce(me: usize, n: usize, count: usize, elem: usize) -> Schedule {
    let len = count * elem;
    // Segment k: elements [first(k), first(k + 1)).
    let first = |k: usize| k * (count / n) + k.min(count % n);
    let seg = |k: usize| (first(k) * elem, (first(k + 1) - first(k)) * elem);
    let max_seg = seg(0).1;
    let mut s = Schedule {
        rounds: vec![],
        temp_len: max_seg,
    };
    s.round(vec![copy(at(Buf::Send, 0), at(Buf::Recv, 0), len)]);
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    let tmp = at(Buf::Temp, 0);
    for step in 0..n - 1 {
        let (so, sl) = seg((me + n - step) % n);
        let k = (me + 2 * n - step - 1) % n;
        let (ro, rl) = seg(k);
        s.round(vec![
            send(right, at(Buf::Recv, so), sl),
            recv(left, tmp, rl),
            Step::Reduce {
                src: tmp,
                dst: at(Buf::Recv, ro),
                count: first(k + 1) - first(k),
                len: rl,
                src_first: true,
            },
        ]);
    }
    for step in 0..n - 1 {
        let (so, sl) = seg((me + 1 + n - step) % n);
        let (ro, rl) = seg((me + n - step) % n);
        s.round(vec![
            send(right, at(Buf::Recv, so), sl),
            recv(left, at(Buf::Recv, ro), rl),
        ]);
    }
    s
}

/// Ranks in the binomial subtree rooted at root-relative rank `r` (the
/// ranks `r ..` it gathers from or scatters to, itself included).
fn subtree(r: usize, n: usize) -> usize {
    let mut m = 1;
    while m < n && r & m == 0 {
        m <<= 1;
    }
    m.min(n - r)
}

/// Gather of `len` bytes per rank into `Recv` (rank order) at `root`.
/// Small totals use a binomial tree (subtrees gathered in `Temp` in
/// root-relative order), large ones go straight to the root.
pub fn gather(me: usize, n: usize, root: usize, len: usize) -> Schedule {
    let mut s = Schedule::default();
    if len * n > 64 << 10 {
        if me == root {
            let mut steps = vec![copy(at(Buf::Send, 0), at(Buf::Recv, root * len), len)];
            steps.extend(
                (0..n)
                    .filter(|&r| r != root)
                    .map(|r| recv(r, at(Buf::Recv, r * len), len)),
            );
            s.round(steps);
        } else {
            s.round(vec![send(root, at(Buf::Send, 0), len)]);
        }
        return s;
    }
    let rel = (me + n - root) % n;
    // Temp holds the blocks of relative ranks rel .. rel + subtree, in order.
    let subtree = |r: usize| subtree(r, n);
    s.temp_len = subtree(rel) * len;
    s.round(vec![copy(at(Buf::Send, 0), at(Buf::Temp, 0), len)]);
    let mut mask = 1;
    while mask < n {
        if rel & mask != 0 {
            s.round(vec![send(
                (me + n - mask) % n,
                at(Buf::Temp, 0),
                subtree(rel) * len,
            )]);
            break;
        }
        if rel + mask < n {
            let child = rel + mask;
            s.round(vec![recv(
                (me + mask) % n,
                at(Buf::Temp, mask * len),
                subtree(child) * len,
            )]);
        }
        mask <<= 1;
    }
    if me == root {
        // Relative order → absolute order.
        let steps = (0..n)
            .map(|r| {
                copy(
                    at(Buf::Temp, r * len),
                    at(Buf::Recv, ((r + root) % n) * len),
                    len,
                )
            })
            .collect();
        s.round(steps);
    }
    s
}

/// Scatter of `len` bytes per rank from `Send` (rank order) at `root` into
/// each rank's `Recv`: the mirror of `gather`.
pub fn scatter(me: usize, n: usize, root: usize, len: usize) -> Schedule {
    let mut s = Schedule::default();
    if len * n > 64 << 10 {
        if me == root {
            let mut steps = vec![copy(at(Buf::Send, root * len), at(Buf::Recv, 0), len)];
            steps.extend(
                (0..n)
                    .filter(|&r| r != root)
                    .map(|r| send(r, at(Buf::Send, r * len), len)),
            );
            s.round(steps);
        } else {
            s.round(vec![recv(root, at(Buf::Recv, 0), len)]);
        }
        return s;
    }
    let rel = (me + n - root) % n;
    let subtree = |r: usize| subtree(r, n);
    s.temp_len = subtree(rel) * len;
    if me == root {
        let steps = (0..n)
            .map(|r| {
                copy(
                    at(Buf::Send, ((r + root) % n) * len),
                    at(Buf::Temp, r * len),
                    len,
                )
            })
            .collect();
        s.round(steps);
    }
    let mut mask = 1;
    while mask < n && rel & mask == 0 {
        mask <<= 1;
    }
    if rel != 0 {
        s.round(vec![recv(
            (me + n - mask) % n,
            at(Buf::Temp, 0),
            subtree(rel) * len,
        )]);
    }
    mask >>= 1;
    let mut sends = Vec::new();
    while mask > 0 {
        if rel + mask < n {
            sends.push(send(
                (me + mask) % n,
                at(Buf::Temp, mask * len),
                subtree(rel + mask) * len,
            ));
        }
        mask >>= 1;
    }
    s.round(sends);
    s.round(vec![copy(at(Buf::Temp, 0), at(Buf::Recv, 0), len)]);
    s
}

/// Ring allgather with per-rank block offsets and lengths into `Recv`; this
/// rank's block is first copied from `Send`.
pub fn allgatherv(me: usize, n: usize, offs: &[usize], lens: &[usize]) -> Schedule {
    let mut s = Schedule::default();
    s.round(vec![copy(
        at(Buf::Send, 0),
        at(Buf::Recv, offs[me]),
        lens[me],
    )]);
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    for step in 0..n.saturating_sub(1) {
        let out = (me + n - step) % n;
        let inb = (me + n - step - 1) % n;
        s.round(vec![
            send(right, at(Buf::Recv, offs[out]), lens[out]),
            recv(left, at(Buf::Recv, offs[inb]), lens[inb]),
        ]);
    }
    s
}

/// Blocks up to this size go all at once in an all-to-all (every receive
/// and send posted together: one round of latency, as Open MPI's linear
/// algorithm for small blocks); larger ones pairwise, one peer per round,
/// so that the transfers of many peers do not compete.
const ALLTOALL_LINEAR_MAX: usize = 64 << 10;

/// All-to-all: for blocks up to `ALLTOALL_LINEAR_MAX` one round with every
/// exchange; otherwise pairwise, in step k sending to me+k and receiving
/// from me-k. `soffs/slens` index `Send` by destination, `roffs/rlens`
/// index `Recv` by source.
pub fn alltoallv(
    me: usize,
    n: usize,
    soffs: &[usize],
    slens: &[usize],
    roffs: &[usize],
    rlens: &[usize],
) -> Schedule {
    let mut s = Schedule::default();
    s.round(vec![copy(
        at(Buf::Send, soffs[me]),
        at(Buf::Recv, roffs[me]),
        slens[me].min(rlens[me]),
    )]);
    let linear = slens.iter().chain(rlens).all(|&l| l <= ALLTOALL_LINEAR_MAX);
    let mut all = Vec::new();
    for k in 1..n {
        let to = (me + k) % n;
        let from = (me + n - k) % n;
        let pair = [
            send(to, at(Buf::Send, soffs[to]), slens[to]),
            recv(from, at(Buf::Recv, roffs[from]), rlens[from]),
        ];
        if linear {
            all.extend(pair);
        } else {
            s.round(pair.to_vec());
        }
    }
    if !all.is_empty() {
        s.round(all);
    }
    s
}

/// Linear gather with per-rank lengths (gatherv).
pub fn gatherv(
    me: usize,
    n: usize,
    root: usize,
    offs: &[usize],
    lens: &[usize],
    mylen: usize,
) -> Schedule {
    let mut s = Schedule::default();
    if me == root {
        let mut steps = vec![copy(
            at(Buf::Send, 0),
            at(Buf::Recv, offs[root]),
            lens[root],
        )];
        steps.extend(
            (0..n)
                .filter(|&r| r != root)
                .map(|r| recv(r, at(Buf::Recv, offs[r]), lens[r])),
        );
        s.round(steps);
    } else {
        s.round(vec![send(root, at(Buf::Send, 0), mylen)]);
    }
    s
}

/// Linear scatter with per-rank lengths (scatterv).
pub fn scatterv(
    me: usize,
    n: usize,
    root: usize,
    offs: &[usize],
    lens: &[usize],
    mylen: usize,
) -> Schedule {
    let mut s = Schedule::default();
    if me == root {
        let mut steps = vec![copy(
            at(Buf::Send, offs[root]),
            at(Buf::Recv, 0),
            lens[root],
        )];
        steps.extend(
            (0..n)
                .filter(|&r| r != root)
                .map(|r| send(r, at(Buf::Send, offs[r]), lens[r])),
        );
        s.round(steps);
    } else {
        s.round(vec![recv(root, at(Buf::Recv, 0), mylen)]);
    }
    s
}

/// Recursive-doubling inclusive (or exclusive) prefix reduction.
pub fn scan(me: usize, n: usize, count: usize, elem: usize, exclusive: bool) -> Schedule {
    let len = count * elem;
    let partial = at(Buf::Temp, 0);
    let tmp = at(Buf::Temp, len);
    let result = at(Buf::Recv, 0);
    let mut s = Schedule {
        rounds: vec![],
        temp_len: 2 * len,
    };
    let mut first = vec![copy(at(Buf::Send, 0), partial, len)];
    if !exclusive {
        first.push(copy(at(Buf::Send, 0), result, len));
    }
    s.round(first);
    let mut have_result = !exclusive;
    let mut mask = 1;
    while mask < n {
        let peer = me ^ mask;
        if peer < n {
            let mut steps = vec![send(peer, partial, len), recv(peer, tmp, len)];
            if peer < me {
                steps.push(Step::Reduce {
                    src: tmp,
                    dst: partial,
                    count,
                    len,
                    src_first: true,
                });
                if have_result {
                    steps.push(Step::Reduce {
                        src: tmp,
                        dst: result,
                        count,
                        len,
                        src_first: true,
                    });
                } else {
                    steps.push(copy(tmp, result, len));
                    have_result = true;
                }
            } else {
                steps.push(Step::Reduce {
                    src: tmp,
                    dst: partial,
                    count,
                    len,
                    src_first: false,
                });
            }
            s.round(steps);
        }
        mask <<= 1;
    }
    s
}

#[cfg(test)]
#[path = "schedule_sim.rs"]
pub mod sim;

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
