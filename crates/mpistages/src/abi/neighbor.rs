//! Neighbourhood collectives (`MPI_Neighbor_*`): each process exchanges
//! blocks with the neighbours its topology gives it, in the standard's
//! order (`api::topo::Topology::neighbors`).

use super::coll::{check_counts, raw_of, Stage};
use super::{array, count, mpi, mpi_fn, ret, typed};
use crate::api::collective::{neighbor_exchange, neighbor_tags, Part};
use crate::api::error::MpiResult;
use crate::api::usermem::TypedBuf;
use crate::api::{comm, Layout, Mpi};
use std::os::raw::{c_int, c_long, c_void};

/// The blocks to send to each out-neighbour and receive from each
/// in-neighbour, given the neighbour counts (in, out).
type Blocks = dyn FnOnce(&Mpi, usize, usize) -> MpiResult<(Vec<TypedBuf>, Vec<TypedBuf>)>;

fn run(m: &Mpi, c: c_int, blocks: Box<Blocks>) -> MpiResult<()> {
    let (cm, topo) = comm::topology(m, c)?;
    let (ins, outs) = topo.neighbors(cm.rank);
    let (sblocks, rblocks) = blocks(m, ins.len(), outs.len())?;
    let staged: Vec<Stage> = sblocks
        .into_iter()
        .map(|b| Stage::packed(b, true))
        .collect();
    let mut temps: Vec<Vec<u8>> = rblocks.iter().map(|b| vec![0u8; b.bytes()]).collect();
    let sends: Vec<Part> = staged
        .iter()
        .zip(&outs)
        .enumerate()
        .map(|(k, (s, &rank))| Part {
            rank,
            tag: neighbor_tags(&topo, k).0,
            buf: s.raw,
        })
        .collect();
    let recvs: Vec<Part> = temps
        .iter_mut()
        .zip(&ins)
        .enumerate()
        .map(|(k, (t, &rank))| Part {
            rank,
            tag: neighbor_tags(&topo, k).1,
            buf: raw_of(t),
        })
        .collect();
    neighbor_exchange(m, &cm, &sends, &recvs)?;
    for ((b, t), &rank) in rblocks.iter().zip(&temps).zip(&ins) {
        if rank >= 0 {
            b.unpack(t);
        }
    }
    Ok(())
}

/// `n` blocks of `counts[k]` elements at element displacements `displs[k]`.
fn blocks_at(all: &TypedBuf, counts: &[usize], displs: &[usize]) -> Vec<TypedBuf> {
    counts
        .iter()
        .zip(displs)
        .map(|(&c, &d)| all.slice(d, c))
        .collect()
}

mpi_fn!(fn MPI_Neighbor_allgather / PMPI_Neighbor_allgather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) {
    let r = mpi().and_then(|m| run(m, c, Box::new(move |m, ins, outs| {
        // SAFETY: the caller's buffers stay valid for this blocking call.
        let (s, all) = unsafe { (typed(m, sbuf, sn, st)?, typed(m, rbuf, 0, rt)?) };
        let rn = count(rn)?;
        let displs: Vec<usize> = (0..ins).map(|k| k * rn).collect();
        Ok((vec![s; outs], blocks_at(&all, &vec![rn; ins], &displs)))
    })));
    ret("MPI_Neighbor_allgather", c, r)
});

mpi_fn!(fn MPI_Neighbor_allgatherv / PMPI_Neighbor_allgatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, c: c_int) {
    let r = mpi().and_then(|m| run(m, c, Box::new(move |m, ins, outs| {
        // SAFETY: the caller's buffers and arrays (indegree long) stay
        // valid for this blocking call.
        let (s, all, rc, rd) = unsafe {
            (typed(m, sbuf, sn, st)?, typed(m, rbuf, 0, rt)?, check_counts(array(rcounts, ins)?)?, check_counts(array(displs, ins)?)?)
        };
        Ok((vec![s; outs], blocks_at(&all, &rc, &rd)))
    })));
    ret("MPI_Neighbor_allgatherv", c, r)
});

mpi_fn!(fn MPI_Neighbor_alltoall / PMPI_Neighbor_alltoall(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) {
    let r = mpi().and_then(|m| run(m, c, Box::new(move |m, ins, outs| {
        // SAFETY: the caller's buffers stay valid for this blocking call.
        let (sall, rall) = unsafe { (typed(m, sbuf, 0, st)?, typed(m, rbuf, 0, rt)?) };
        let (sn, rn) = (count(sn)?, count(rn)?);
        let sd: Vec<usize> = (0..outs).map(|k| k * sn).collect();
        let rd: Vec<usize> = (0..ins).map(|k| k * rn).collect();
        Ok((blocks_at(&sall, &vec![sn; outs], &sd), blocks_at(&rall, &vec![rn; ins], &rd)))
    })));
    ret("MPI_Neighbor_alltoall", c, r)
});

mpi_fn!(fn MPI_Neighbor_alltoallv / PMPI_Neighbor_alltoallv(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rt: c_int, c: c_int) {
    let r = mpi().and_then(|m| run(m, c, Box::new(move |m, ins, outs| {
        // SAFETY: the caller's buffers and arrays (out/indegree long) stay
        // valid for this blocking call.
        unsafe {
            let (sall, rall) = (typed(m, sbuf, 0, st)?, typed(m, rbuf, 0, rt)?);
            let (sc, sd) = (check_counts(array(scounts, outs)?)?, check_counts(array(sdispls, outs)?)?);
            let (rc, rd) = (check_counts(array(rcounts, ins)?)?, check_counts(array(rdispls, ins)?)?);
            Ok((blocks_at(&sall, &sc, &sd), blocks_at(&rall, &rc, &rd)))
        }
    })));
    ret("MPI_Neighbor_alltoallv", c, r)
});

/// Blocks at byte displacements, a datatype each.
///
/// # Safety
/// Arrays of `n` elements; the buffer valid for what they describe.
unsafe fn typed_blocks(
    m: &Mpi,
    buf: *const c_void,
    counts: *const c_int,
    displs: *const c_long,
    types: *const c_int,
    n: usize,
) -> MpiResult<Vec<TypedBuf>> {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        let (cs, ds, ts) = (
            check_counts(array(counts, n)?)?,
            array(displs, n)?,
            array(types, n)?,
        );
        (0..n)
            .map(|k| {
                super::typed_block(
                    m,
                    (buf as *const u8).wrapping_offset(ds[k] as isize) as *const c_void,
                    cs[k] as c_int,
                    ts[k],
                )
            })
            .collect()
    }
}

mpi_fn!(fn MPI_Neighbor_alltoallw / PMPI_Neighbor_alltoallw(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_long, stypes: *const c_int, rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_long, rtypes: *const c_int, c: c_int) {
    let r = mpi().and_then(|m| run(m, c, Box::new(move |m, ins, outs| {
        // SAFETY: the caller's buffers and arrays stay valid for this call.
        unsafe {
            Ok((typed_blocks(m, sbuf, scounts, sdispls, stypes, outs)?, typed_blocks(m, rbuf, rcounts, rdispls, rtypes, ins)?))
        }
    })));
    ret("MPI_Neighbor_alltoallw", c, r)
});
