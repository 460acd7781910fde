//! Process topologies: `MPI_Dims_create`, `MPI_Cart_*`, `MPI_Graph_*`,
//! `MPI_Dist_graph_*`, `MPI_Topo_test`.

use super::comm::new_comm;
use super::{array, array_mut, count, mpi, mpi_fn, put, ret};
use crate::api::comm;
use crate::api::consts::{err, COMM_WORLD};
use crate::api::error::{fail, MpiResult};
use crate::api::topo::{self, Topology};
use crate::api::Mpi;
use std::os::raw::c_int;

/// `MPI_UNWEIGHTED` and `MPI_WEIGHTS_EMPTY` (Open MPI's values: not
/// NULL, which a program may pass for an empty list).
const UNWEIGHTED: usize = 2;
const WEIGHTS_EMPTY: usize = 3;

/// Whether a weights argument is one of the two constants.
fn is_const(w: *const c_int, c: usize) -> bool {
    w as usize == c
}

mpi_fn!(fn MPI_Dims_create / PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) {
    let r = (|| {
        // SAFETY: caller's array of ndims ints.
        let d = unsafe { array_mut(dims, count(ndims)?)? };
        topo::dims_create(nnodes, d)
    })();
    ret("MPI_Dims_create", COMM_WORLD, r)
});

mpi_fn!(fn MPI_Cart_create / PMPI_Cart_create(c: c_int, ndims: c_int, dims: *const c_int, periods: *const c_int, _reorder: c_int, out: *mut c_int) {
    new_comm("MPI_Cart_create", c, out, |m| {
        let n = count(ndims)?;
        // SAFETY: caller's arrays of ndims ints.
        let (d, p) = unsafe { (array(dims, n)?, array(periods, n)?) };
        let p: Vec<bool> = p.iter().map(|&x| x != 0).collect();
        comm::cart_create(m, c, d, &p)
    })
});

fn cart(m: &Mpi, c: c_int) -> MpiResult<(std::sync::Arc<crate::api::Comm>, Vec<i32>, Vec<bool>)> {
    let (cm, t) = comm::topology(m, c)?;
    match &*t {
        Topology::Cart { dims, periods } => Ok((cm, dims.clone(), periods.clone())),
        _ => fail(
            err::TOPOLOGY,
            "the communicator's topology is not Cartesian",
        ),
    }
}

mpi_fn!(fn MPI_Cartdim_get / PMPI_Cartdim_get(c: c_int, ndims: *mut c_int) {
    let r = mpi().and_then(|m| cart(m, c)).and_then(|(_, d, _)| {
        // SAFETY: caller's out-pointer.
        unsafe { put(ndims, d.len() as c_int) }
    });
    ret("MPI_Cartdim_get", c, r)
});

mpi_fn!(fn MPI_Cart_get / PMPI_Cart_get(c: c_int, maxdims: c_int, dims: *mut c_int, periods: *mut c_int, coords: *mut c_int) {
    let r = mpi().and_then(|m| cart(m, c)).and_then(|(cm, d, p)| {
        let n = count(maxdims)?.min(d.len());
        let co = topo::cart_coords(&d, cm.rank);
        // SAFETY: caller's arrays of maxdims ints.
        unsafe {
            array_mut(dims, n)?.copy_from_slice(&d[..n]);
            for (o, &x) in array_mut(periods, n)?.iter_mut().zip(&p) {
                *o = x as c_int;
            }
            array_mut(coords, n)?.copy_from_slice(&co[..n]);
        }
        Ok(())
    });
    ret("MPI_Cart_get", c, r)
});

mpi_fn!(fn MPI_Cart_rank / PMPI_Cart_rank(c: c_int, coords: *const c_int, rank: *mut c_int) {
    let r = mpi().and_then(|m| cart(m, c)).and_then(|(_, d, p)| {
        // SAFETY: caller's array of ndims ints.
        let co = unsafe { array(coords, d.len())? };
        let v = topo::cart_rank(&d, &p, co)?;
        // SAFETY: caller's out-pointer.
        unsafe { put(rank, v as c_int) }
    });
    ret("MPI_Cart_rank", c, r)
});

mpi_fn!(fn MPI_Cart_coords / PMPI_Cart_coords(c: c_int, rank: c_int, maxdims: c_int, coords: *mut c_int) {
    let r = mpi().and_then(|m| cart(m, c)).and_then(|(cm, d, _)| {
        if rank < 0 || rank as usize >= cm.size() {
            return fail(err::RANK, format!("rank {rank} is not in the communicator"));
        }
        if (maxdims as usize) < d.len() {
            return fail(err::ARG, format!("maxdims {maxdims} is below the grid's {} dimensions", d.len()));
        }
        let co = topo::cart_coords(&d, rank as usize);
        // SAFETY: caller's array of maxdims ints.
        unsafe { array_mut(coords, d.len())?.copy_from_slice(&co) };
        Ok(())
    });
    ret("MPI_Cart_coords", c, r)
});

mpi_fn!(fn MPI_Cart_shift / PMPI_Cart_shift(c: c_int, dir: c_int, disp: c_int, src: *mut c_int, dst: *mut c_int) {
    let r = mpi().and_then(|m| cart(m, c)).and_then(|(cm, d, p)| {
        if dir < 0 || dir as usize >= d.len() {
            return fail(err::ARG, format!("direction {dir} is not a dimension of the grid"));
        }
        let (s, t) = topo::cart_shift(&d, &p, cm.rank, dir as usize, disp);
        // SAFETY: caller's out-pointers.
        unsafe { put(src, s).and_then(|_| put(dst, t)) }
    });
    ret("MPI_Cart_shift", c, r)
});

mpi_fn!(fn MPI_Cart_sub / PMPI_Cart_sub(c: c_int, remain: *const c_int, out: *mut c_int) {
    new_comm("MPI_Cart_sub", c, out, |m| {
        let (_, d, _) = cart(m, c)?;
        // SAFETY: caller's array of ndims ints.
        let rem: Vec<bool> = unsafe { array(remain, d.len())? }.iter().map(|&x| x != 0).collect();
        comm::cart_sub(m, c, &rem)
    })
});

mpi_fn!(fn MPI_Cart_map / PMPI_Cart_map(c: c_int, ndims: c_int, dims: *const c_int, _periods: *const c_int, newrank: *mut c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        // SAFETY: caller's array of ndims ints.
        let n = topo::cart_size(unsafe { array(dims, count(ndims)?)? })?;
        if n > cm.size() {
            return fail(err::DIMS, format!("a grid of {n} does not fit {} processes", cm.size()));
        }
        let v = if cm.rank < n { cm.rank as c_int } else { crate::api::consts::UNDEFINED };
        // SAFETY: caller's out-pointer.
        unsafe { put(newrank, v) }
    });
    ret("MPI_Cart_map", c, r)
});

mpi_fn!(fn MPI_Graph_create / PMPI_Graph_create(c: c_int, nnodes: c_int, index: *const c_int, edges: *const c_int, _reorder: c_int, out: *mut c_int) {
    new_comm("MPI_Graph_create", c, out, |m| {
        let n = count(nnodes)?;
        // SAFETY: caller's array of nnodes ints.
        let idx = unsafe { array(index, n)? };
        let ne = idx.last().copied().unwrap_or(0);
        // SAFETY: caller's array of index[nnodes-1] ints.
        let e = unsafe { array(edges, count(ne)?)? };
        comm::graph_create(m, c, idx, e)
    })
});

fn graph(m: &Mpi, c: c_int) -> MpiResult<(std::sync::Arc<crate::api::Comm>, Vec<i32>, Vec<i32>)> {
    let (cm, t) = comm::topology(m, c)?;
    match &*t {
        Topology::Graph { index, edges } => Ok((cm, index.clone(), edges.clone())),
        _ => fail(err::TOPOLOGY, "the communicator's topology is not a graph"),
    }
}

mpi_fn!(fn MPI_Graphdims_get / PMPI_Graphdims_get(c: c_int, nnodes: *mut c_int, nedges: *mut c_int) {
    let r = mpi().and_then(|m| graph(m, c)).and_then(|(_, i, e)| {
        // SAFETY: caller's out-pointers.
        unsafe { put(nnodes, i.len() as c_int).and_then(|_| put(nedges, e.len() as c_int)) }
    });
    ret("MPI_Graphdims_get", c, r)
});

mpi_fn!(fn MPI_Graph_get / PMPI_Graph_get(c: c_int, maxindex: c_int, maxedges: c_int, index: *mut c_int, edges: *mut c_int) {
    let r = mpi().and_then(|m| graph(m, c)).and_then(|(_, i, e)| {
        let (ni, ne) = (count(maxindex)?.min(i.len()), count(maxedges)?.min(e.len()));
        // SAFETY: caller's arrays of maxindex and maxedges ints.
        unsafe {
            array_mut(index, ni)?.copy_from_slice(&i[..ni]);
            array_mut(edges, ne)?.copy_from_slice(&e[..ne]);
        }
        Ok(())
    });
    ret("MPI_Graph_get", c, r)
});

fn graph_rank(cm: &crate::api::Comm, rank: c_int) -> MpiResult<usize> {
    if rank < 0 || rank as usize >= cm.size() {
        return fail(err::RANK, format!("rank {rank} is not in the communicator"));
    }
    Ok(rank as usize)
}

mpi_fn!(fn MPI_Graph_neighbors_count / PMPI_Graph_neighbors_count(c: c_int, rank: c_int, n: *mut c_int) {
    let r = mpi().and_then(|m| graph(m, c)).and_then(|(cm, i, e)| {
        let nb = topo::graph_neighbors(&i, &e, graph_rank(&cm, rank)?).len();
        // SAFETY: caller's out-pointer.
        unsafe { put(n, nb as c_int) }
    });
    ret("MPI_Graph_neighbors_count", c, r)
});

mpi_fn!(fn MPI_Graph_neighbors / PMPI_Graph_neighbors(c: c_int, rank: c_int, max: c_int, out: *mut c_int) {
    let r = mpi().and_then(|m| graph(m, c)).and_then(|(cm, i, e)| {
        let nb = topo::graph_neighbors(&i, &e, graph_rank(&cm, rank)?);
        let k = count(max)?.min(nb.len());
        // SAFETY: caller's array of max ints.
        unsafe { array_mut(out, k)?.copy_from_slice(&nb[..k]) };
        Ok(())
    });
    ret("MPI_Graph_neighbors", c, r)
});

mpi_fn!(fn MPI_Graph_map / PMPI_Graph_map(c: c_int, nnodes: c_int, _index: *const c_int, _edges: *const c_int, newrank: *mut c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        let n = count(nnodes)?;
        if n > cm.size() {
            return fail(err::ARG, format!("a graph of {n} nodes does not fit {} processes", cm.size()));
        }
        let v = if cm.rank < n { cm.rank as c_int } else { crate::api::consts::UNDEFINED };
        // SAFETY: caller's out-pointer.
        unsafe { put(newrank, v) }
    });
    ret("MPI_Graph_map", c, r)
});

mpi_fn!(fn MPI_Topo_test / PMPI_Topo_test(c: c_int, status: *mut c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        // SAFETY: caller's out-pointer.
        unsafe { put(status, topo::kind_of(cm.topo.as_deref())) }
    });
    ret("MPI_Topo_test", c, r)
});

/// A weights argument: `None` for `MPI_UNWEIGHTED`.
///
/// # Safety
/// `w` is `MPI_UNWEIGHTED`, `MPI_WEIGHTS_EMPTY` or an array of `n` ints.
unsafe fn weights<'a>(w: *const c_int, n: usize) -> MpiResult<Option<&'a [c_int]>> {
    if is_const(w, UNWEIGHTED) {
        return Ok(None);
    }
    if is_const(w, WEIGHTS_EMPTY) || (w.is_null() && n == 0) {
        if n > 0 {
            return fail(err::ARG, "MPI_WEIGHTS_EMPTY given for a non-empty list");
        }
        return Ok(Some(&[]));
    }
    // SAFETY: forwarded from this function's contract.
    Ok(Some(unsafe { array(w, n)? }))
}

mpi_fn!(fn MPI_Dist_graph_create_adjacent / PMPI_Dist_graph_create_adjacent(c: c_int, indegree: c_int, sources: *const c_int, sourceweights: *const c_int, outdegree: c_int, dests: *const c_int, destweights: *const c_int, info: c_int, _reorder: c_int, out: *mut c_int) {
    new_comm("MPI_Dist_graph_create_adjacent", c, out, |m| {
        crate::api::info::get_or_empty(info)?;
        let (ni, no) = (count(indegree)?, count(outdegree)?);
        // SAFETY: caller's arrays of indegree and outdegree ints (or the
        // weight constants).
        let (s, sw, d, dw) = unsafe {
            (array(sources, ni)?, weights(sourceweights, ni)?, array(dests, no)?, weights(destweights, no)?)
        };
        if sw.is_some() != dw.is_some() {
            return fail(err::ARG, "either both or neither weight lists must be MPI_UNWEIGHTED");
        }
        comm::dist_graph_adjacent(m, c, (s, sw), (d, dw))
    })
});

mpi_fn!(fn MPI_Dist_graph_create / PMPI_Dist_graph_create(c: c_int, n: c_int, sources: *const c_int, degrees: *const c_int, dests: *const c_int, w: *const c_int, info: c_int, _reorder: c_int, out: *mut c_int) {
    new_comm("MPI_Dist_graph_create", c, out, |m| {
        crate::api::info::get_or_empty(info)?;
        let n = count(n)?;
        // SAFETY: caller's arrays of n ints.
        let (s, deg) = unsafe { (array(sources, n)?, array(degrees, n)?) };
        let total = deg.iter().try_fold(0usize, |a, &d| Ok::<_, crate::api::error::MpiError>(a + count(d)?))?;
        // SAFETY: caller's arrays of sum(degrees) ints (or the weight constants).
        let (d, wt) = unsafe { (array(dests, total)?, weights(w, total)?) };
        let mut edges = Vec::with_capacity(total);
        let mut k = 0;
        for (i, &src) in s.iter().enumerate() {
            for _ in 0..deg[i] {
                edges.push((src, d[k], wt.map_or(1, |w| w[k])));
                k += 1;
            }
        }
        comm::dist_graph(m, c, &edges, wt.is_some())
    })
});

fn dist(m: &Mpi, c: c_int) -> MpiResult<std::sync::Arc<Topology>> {
    let (_, t) = comm::topology(m, c)?;
    match &*t {
        Topology::DistGraph { .. } => Ok(t),
        _ => fail(
            err::TOPOLOGY,
            "the communicator's topology is not a distributed graph",
        ),
    }
}

mpi_fn!(fn MPI_Dist_graph_neighbors_count / PMPI_Dist_graph_neighbors_count(c: c_int, indegree: *mut c_int, outdegree: *mut c_int, weighted: *mut c_int) {
    let r = mpi().and_then(|m| dist(m, c)).and_then(|t| {
        let Topology::DistGraph { sources, dests, source_weights, .. } = &*t else { unreachable!() };
        // SAFETY: caller's out-pointers.
        unsafe {
            put(indegree, sources.len() as c_int)?;
            put(outdegree, dests.len() as c_int)?;
            put(weighted, source_weights.is_some() as c_int)
        }
    });
    ret("MPI_Dist_graph_neighbors_count", c, r)
});

mpi_fn!(fn MPI_Dist_graph_neighbors / PMPI_Dist_graph_neighbors(c: c_int, maxin: c_int, sources: *mut c_int, sourceweights: *mut c_int, maxout: c_int, dests: *mut c_int, destweights: *mut c_int) {
    let r = mpi().and_then(|m| dist(m, c)).and_then(|t| {
        let Topology::DistGraph { sources: s, source_weights: sw, dests: d, dest_weights: dw } = &*t else { unreachable!() };
        let (ni, no) = (count(maxin)?.min(s.len()), count(maxout)?.min(d.len()));
        // SAFETY: caller's arrays of maxin and maxout ints; the weights are
        // written only for a weighted graph and a real array.
        unsafe {
            array_mut(sources, ni)?.copy_from_slice(&s[..ni]);
            array_mut(dests, no)?.copy_from_slice(&d[..no]);
            if let (Some(sw), false) = (sw, is_const(sourceweights, UNWEIGHTED) || is_const(sourceweights, WEIGHTS_EMPTY)) {
                array_mut(sourceweights, ni)?.copy_from_slice(&sw[..ni]);
            }
            if let (Some(dw), false) = (dw, is_const(destweights, UNWEIGHTED) || is_const(destweights, WEIGHTS_EMPTY)) {
                array_mut(destweights, no)?.copy_from_slice(&dw[..no]);
            }
        }
        Ok(())
    });
    ret("MPI_Dist_graph_neighbors", c, r)
});
