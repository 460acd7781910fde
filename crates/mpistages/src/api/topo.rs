//! Process topologies (`MPI_Cart_*`, `MPI_Graph_*`, `MPI_Dist_graph_*`,
//! `MPI_Dims_create`): what a communicator's topology is and the pure
//! arithmetic on it. Ranks are never reordered (`reorder` is a hint the
//! standard lets us ignore), so a topology's rank r is the parent's rank r.

use super::consts::{err, PROC_NULL, UNDEFINED};
use super::error::{fail, MpiResult};

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Topology {
    Cart {
        dims: Vec<i32>,
        periods: Vec<bool>,
    },
    /// `index[i]` is the number of edges of nodes 0..=i (MPI's layout).
    Graph {
        index: Vec<i32>,
        edges: Vec<i32>,
    },
    /// This process's own edges; weights `None` for `MPI_UNWEIGHTED`.
    DistGraph {
        sources: Vec<i32>,
        source_weights: Option<Vec<i32>>,
        dests: Vec<i32>,
        dest_weights: Option<Vec<i32>>,
    },
}

/// `MPI_CART`, `MPI_GRAPH`, `MPI_DIST_GRAPH` (and `MPI_UNDEFINED` for none).
pub const CART: i32 = 1;
pub const GRAPH: i32 = 2;
pub const DIST_GRAPH: i32 = 3;

impl Topology {
    pub fn kind(&self) -> i32 {
        match self {
            Topology::Cart { .. } => CART,
            Topology::Graph { .. } => GRAPH,
            Topology::DistGraph { .. } => DIST_GRAPH,
        }
    }

    /// The ranks this process receives from and sends to in a neighbourhood
    /// collective, in the standard's order (for a Cartesian topology: for
    /// each dimension, the negative then the positive neighbour).
    pub fn neighbors(&self, rank: usize) -> (Vec<i32>, Vec<i32>) {
        match self {
            Topology::Cart { dims, periods } => {
                let mut v = Vec::new();
                for d in 0..dims.len() {
                    let (src, dst) = cart_shift(dims, periods, rank, d, 1);
                    v.push(src);
                    v.push(dst);
                }
                (v.clone(), v)
            }
            Topology::Graph { index, edges } => {
                let n = graph_neighbors(index, edges, rank).to_vec();
                (n.clone(), n)
            }
            Topology::DistGraph { sources, dests, .. } => (sources.clone(), dests.clone()),
        }
    }
}

/// Number of processes a Cartesian grid holds; `MPI_ERR_DIMS` if a
/// dimension is negative or the product overflows.
pub fn cart_size(dims: &[i32]) -> MpiResult<usize> {
    dims.iter().try_fold(1usize, |acc, &d| {
        if d < 0 {
            return fail(err::DIMS, format!("dimension size {d} is negative"));
        }
        acc.checked_mul(d as usize)
            .filter(|&p| p <= i32::MAX as usize)
            .ok_or_else(|| super::error::MpiError::new(err::DIMS, "the grid is too large"))
    })
}

/// Coordinates of `rank` (row-major: the last dimension varies fastest).
pub fn cart_coords(dims: &[i32], rank: usize) -> Vec<i32> {
    let mut c = vec![0; dims.len()];
    let mut r = rank;
    for (i, &d) in dims.iter().enumerate().rev() {
        let d = d.max(1) as usize;
        c[i] = (r % d) as i32;
        r /= d;
    }
    c
}

/// The rank at `coords`; out-of-range coordinates wrap in periodic
/// dimensions and are an error (`MPI_ERR_ARG`) in the others.
pub fn cart_rank(dims: &[i32], periods: &[bool], coords: &[i32]) -> MpiResult<usize> {
    let mut r = 0usize;
    for (i, (&d, &c)) in dims.iter().zip(coords).enumerate() {
        let c = if (0..d).contains(&c) {
            c
        } else if periods[i] && d > 0 {
            c.rem_euclid(d)
        } else {
            return fail(
                err::ARG,
                format!(
                    "coordinate {c} is outside dimension {i} of size {d}, which is not periodic"
                ),
            );
        };
        r = r * d as usize + c as usize;
    }
    Ok(r)
}

/// `MPI_Cart_shift`: (source, dest) of a shift by `disp` along `dir`.
pub fn cart_shift(
    dims: &[i32],
    periods: &[bool],
    rank: usize,
    dir: usize,
    disp: i32,
) -> (i32, i32) {
    let c = cart_coords(dims, rank);
    let at = |delta: i32| {
        let mut cc = c.clone();
        let v = cc[dir] as i64 + delta as i64;
        let d = dims[dir] as i64;
        if !periods[dir] && !(0..d).contains(&v) {
            return PROC_NULL;
        }
        cc[dir] = v.rem_euclid(d.max(1)) as i32;
        cart_rank(dims, periods, &cc).map_or(PROC_NULL, |r| r as i32)
    };
    (at(-disp), at(disp))
}

/// `MPI_Cart_sub`: for this rank, the (color, key) of the split and the
/// sub-grid's dimensions and periods.
pub fn cart_sub(
    dims: &[i32],
    periods: &[bool],
    rank: usize,
    remain: &[bool],
) -> (i32, i32, Vec<i32>, Vec<bool>) {
    let c = cart_coords(dims, rank);
    let (mut color, mut key) = (0i64, 0i64);
    let (mut sd, mut sp) = (Vec::new(), Vec::new());
    for i in 0..dims.len() {
        if remain[i] {
            key = key * dims[i] as i64 + c[i] as i64;
            sd.push(dims[i]);
            sp.push(periods[i]);
        } else {
            color = color * dims[i] as i64 + c[i] as i64;
        }
    }
    (color as i32, key as i32, sd, sp)
}

pub fn graph_neighbors<'a>(index: &[i32], edges: &'a [i32], rank: usize) -> &'a [i32] {
    let lo = if rank == 0 {
        0
    } else {
        index[rank - 1] as usize
    };
    &edges[lo..index[rank] as usize]
}

/// Checks a graph given as (index, edges) over `nnodes` nodes.
pub fn check_graph(index: &[i32], edges: &[i32], nnodes: usize) -> MpiResult<()> {
    let mut prev = 0;
    for &i in index {
        if i < prev {
            return fail(err::ARG, "graph index is not non-decreasing");
        }
        prev = i;
    }
    if prev as usize != edges.len() {
        return fail(err::ARG, "graph index and edge count disagree");
    }
    if let Some(e) = edges.iter().find(|&&e| e < 0 || e as usize >= nnodes) {
        return fail(err::RANK, format!("graph edge to {e}, outside 0..{nnodes}"));
    }
    Ok(())
}

/// `MPI_Dims_create`: fills the zero entries of `dims` so that the
/// product is `nnodes`, as balanced as possible (the smallest difference
/// between the largest and smallest new entry), in non-increasing order.
pub fn dims_create(nnodes: i32, dims: &mut [i32]) -> MpiResult<()> {
    if nnodes < 0 {
        return fail(err::ARG, format!("nnodes {nnodes} is negative"));
    }
    let mut fixed: i64 = 1;
    for &d in dims.iter() {
        if d < 0 {
            return fail(err::DIMS, format!("dims entry {d} is negative"));
        }
        if d > 0 {
            fixed *= d as i64;
        }
    }
    let free = dims.iter().filter(|&&d| d == 0).count();
    if fixed == 0 || nnodes as i64 % fixed != 0 {
        return fail(
            err::DIMS,
            format!(
                "{nnodes} processes cannot be split into the given dimensions (product {fixed})"
            ),
        );
    }
    if free == 0 {
        if fixed != nnodes as i64 {
            return fail(
                err::DIMS,
                format!("the dimensions' product {fixed} is not {nnodes}"),
            );
        }
        return Ok(());
    }
    let chosen = balanced((nnodes as i64 / fixed) as u64, free);
    let mut it = chosen.into_iter();
    for d in dims.iter_mut().filter(|d| **d == 0) {
        *d = it.next().expect("one value per free dimension") as i32;
    }
    Ok(())
}

/// The factorisation of `n` into `k` factors, non-increasing, with the
/// smallest spread (largest − smallest), ties to the largest factors
/// counted from the smallest up; searched exactly over divisors.
fn balanced(n: u64, k: usize) -> Vec<u64> {
    let mut divisors: Vec<u64> = (1..)
        .take_while(|d| d * d <= n)
        .filter(|d| n.is_multiple_of(*d))
        .flat_map(|d| [d, n / d])
        .collect();
    divisors.sort_unstable_by(|a, b| b.cmp(a));
    divisors.dedup();
    let mut best: Option<(u64, Vec<u64>)> = None;
    let mut cur = Vec::with_capacity(k);
    search(&divisors, n, k, u64::MAX, &mut cur, &mut best);
    best.map(|b| b.1).unwrap_or_else(|| vec![1; k])
}

fn search(
    divs: &[u64],
    m: u64,
    k: usize,
    cap: u64,
    cur: &mut Vec<u64>,
    best: &mut Option<(u64, Vec<u64>)>,
) {
    if k == 1 {
        if m <= cap {
            cur.push(m);
            let spread = cur[0] - m;
            // Among equal spreads, the one with the largest smallest
            // factor, then the largest next one up (13x9x8x6 before
            // 13x12x6x6, 21x16x15 before 20x18x14), as MPICH chooses.
            let better = |b: &(u64, Vec<u64>)| {
                spread < b.0 || (spread == b.0 && cur.iter().rev().gt(b.1.iter().rev()))
            };
            if best.as_ref().is_none_or(better) {
                *best = Some((spread, cur.clone()));
            }
            cur.pop();
        }
        return;
    }
    for &d in divs {
        if d > cap || !m.is_multiple_of(d) {
            continue;
        }
        // The k factors left are at most d each: d^k must reach m.
        if (d as f64).powi(k as i32) < m as f64 * (1.0 - 1e-12) {
            break;
        }
        if let (Some(b), Some(&top)) = (best.as_ref(), cur.first()) {
            if top - d > b.0 {
                continue;
            }
        }
        cur.push(d);
        search(divs, m / d, k - 1, d, cur, best);
        cur.pop();
    }
}

/// `MPI_Topo_test`'s answer for an optional topology.
pub fn kind_of(t: Option<&Topology>) -> i32 {
    t.map_or(UNDEFINED, Topology::kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(n: i32, k: usize) -> Vec<i32> {
        let mut d = vec![0; k];
        dims_create(n, &mut d).unwrap();
        d
    }

    #[test]
    fn dims_are_balanced_and_non_increasing() {
        assert_eq!(dims(12, 2), [4, 3]);
        assert_eq!(dims(16, 3), [4, 2, 2]);
        assert_eq!(dims(1323, 2), [49, 27]);
        assert_eq!(dims(5616, 4), [13, 9, 8, 6]);
        assert_eq!(dims(5040, 3), [21, 16, 15]);
        assert_eq!(dims(1_000_000_000, 3), [1000, 1000, 1000]);
        assert_eq!(dims(7, 3), [7, 1, 1]);
        assert_eq!(dims(1, 2), [1, 1]);
        let mut d = [0, 3, 0];
        dims_create(24, &mut d).unwrap();
        assert_eq!(d, [4, 3, 2]);
        assert_eq!(dims_create(10, &mut [3, 0]).unwrap_err().class, err::DIMS);
    }

    #[test]
    fn cart_coords_ranks_and_shifts() {
        let (d, p) = (vec![2, 3], vec![false, true]);
        assert_eq!(cart_coords(&d, 5), [1, 2]);
        assert_eq!(cart_rank(&d, &p, &[1, 2]).unwrap(), 5);
        assert_eq!(cart_rank(&d, &p, &[1, 3]).unwrap(), 3);
        assert_eq!(cart_rank(&d, &p, &[2, 0]).unwrap_err().class, err::ARG);
        assert_eq!(cart_shift(&d, &p, 0, 0, 1), (PROC_NULL, 3));
        assert_eq!(cart_shift(&d, &p, 0, 1, 1), (2, 1));
        let (color, key, sd, _) = cart_sub(&d, &p, 5, &[false, true]);
        assert_eq!((color, key, sd), (1, 2, vec![3]));
    }

    #[test]
    fn neighbors_of_a_ring() {
        let t = Topology::Cart {
            dims: vec![4],
            periods: vec![true],
        };
        assert_eq!(t.neighbors(0), (vec![3, 1], vec![3, 1]));
        let g = Topology::Graph {
            index: vec![2, 3, 4],
            edges: vec![1, 2, 0, 0],
        };
        assert_eq!(g.neighbors(0).0, [1, 2]);
        assert_eq!(g.neighbors(2).1, [0]);
        assert!(check_graph(&[2, 3, 4], &[1, 2, 0, 3], 3).is_err());
    }
}
