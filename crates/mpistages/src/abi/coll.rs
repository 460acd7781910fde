//! Collective entry points that move data (reductions are `reduce.rs`):
//! stage user buffers (packed bytes for data movement, memory layout for
//! reductions), handle `MPI_IN_PLACE`, and call the byte-level
//! collectives of `src/coll`.

use super::intercoll as IC;
use super::{array, mpi, mpi_fn, ret, typed, IN_PLACE};
use crate::api::collective as coll;
use crate::api::consts::err;
use crate::api::error::{fail, MpiResult};
use crate::api::usermem::TypedBuf;
use crate::api::Layout;
use crate::api::RawBuf;
use crate::api::{Comm, Mpi};
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

/// A user buffer as a collective sees it: the user's memory when it is
/// contiguous, else a temporary copy.
pub(super) struct Stage {
    pub(super) tb: Option<TypedBuf>,
    temp: Option<Vec<u8>>,
    pub(super) raw: RawBuf,
    layout: bool,
}

pub(super) fn raw_of(v: &mut Vec<u8>) -> RawBuf {
    // SAFETY: the Vec is owned by the Stage and outlives every use of the
    // RawBuf (the blocking collective returns before the Stage is dropped).
    unsafe { RawBuf::new(v.as_mut_ptr(), v.len()) }
}

impl Stage {
    pub(super) fn none() -> Stage {
        Stage {
            tb: None,
            temp: None,
            raw: RawBuf::empty(),
            layout: false,
        }
    }

    /// Packed bytes of the buffer (loaded from user memory if `load`).
    pub(super) fn packed(tb: TypedBuf, load: bool) -> Stage {
        if let Some(raw) = tb.contiguous() {
            return Stage {
                tb: Some(tb),
                temp: None,
                raw,
                layout: false,
            };
        }
        let mut v = if load { tb.pack() } else { vec![0; tb.bytes()] };
        let raw = raw_of(&mut v);
        Stage {
            tb: Some(tb),
            temp: Some(v),
            raw,
            layout: false,
        }
    }

    /// Memory layout, `count * extent` bytes from the true lower bound.
    pub(super) fn layout(tb: TypedBuf, load: bool) -> MpiResult<Stage> {
        let t = &tb.dtype;
        if (t.extent as usize) < t.true_extent as usize && tb.count > 1 {
            return fail(
                err::TYPE,
                format!(
                    "datatype {} has overlapping elements; it cannot be reduced",
                    t.name
                ),
            );
        }
        if let Some(raw) = tb.contiguous() {
            return Ok(Stage {
                tb: Some(tb),
                temp: None,
                raw,
                layout: true,
            });
        }
        let mut v = vec![0u8; tb.count * t.extent as usize];
        if load {
            tb.load_span(&mut v);
        }
        let raw = raw_of(&mut v);
        Ok(Stage {
            tb: Some(tb),
            temp: Some(v),
            raw,
            layout: true,
        })
    }

    /// Writes a temporary copy back to user memory.
    pub(super) fn store(&self) {
        if let (Some(tb), Some(v)) = (&self.tb, &self.temp) {
            if self.layout {
                tb.store_span(v);
            } else {
                tb.unpack(v);
            }
        }
    }
}

/// The communicator of a collective (an intra-communicator: collectives
/// on inter-communicators are not implemented yet, and must not run on
/// the local group as if they were).
pub(super) fn comm(m: &Mpi, c: c_int) -> MpiResult<Arc<Comm>> {
    let comm = m.tables().comm(c)?;
    if comm.is_inter() {
        return fail(
            err::COMM,
            "collectives on inter-communicators are not supported by mpistages yet",
        );
    }
    Ok(comm)
}

pub(super) fn root_ok(c: &Comm, root: c_int) -> MpiResult<usize> {
    if root < 0 || root as usize >= c.size() {
        return fail(
            err::ROOT,
            format!(
                "root {root} is outside the communicator (size {})",
                c.size()
            ),
        );
    }
    Ok(root as usize)
}

pub(super) fn is_in_place(p: *const c_void) -> bool {
    std::ptr::eq(p, IN_PLACE)
}

mpi_fn!(fn MPI_Barrier / PMPI_Barrier(c: c_int) {
    ret("MPI_Barrier", c, mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if cm.is_inter() {
            return IC::barrier(m, &cm);
        }
        coll::barrier(m, &cm)
    }))
});

mpi_fn!(fn MPI_Bcast / PMPI_Bcast(buf: *mut c_void, n: c_int, dt: c_int, root: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if cm.is_inter() {
            // SAFETY: the caller's buffers and arrays stay valid for this
            // blocking call.
            return unsafe { IC::bcast(m, &cm, buf, n, dt, root) };
        }
        let root = root_ok(&cm, root)?;
        // SAFETY: the buffer stays valid for this blocking call.
        let st = Stage::packed(unsafe { typed(m, buf, n, dt)? }, cm.rank == root);
        coll::bcast(m, &cm, root, st.raw)?;
        if cm.rank != root {
            st.store();
        }
        Ok(())
    });
    ret("MPI_Bcast", c, r)
});

/// Prefix sums of `lens`.
pub(super) fn offsets(lens: &[usize]) -> Vec<usize> {
    lens.iter()
        .scan(0, |acc, l| {
            let o = *acc;
            *acc += l;
            Some(o)
        })
        .collect()
}

pub(super) fn check_counts(v: &[c_int]) -> MpiResult<Vec<usize>> {
    v.iter().map(|&x| super::count(x)).collect()
}

mpi_fn!(fn MPI_Gather / PMPI_Gather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if cm.is_inter() {
            // SAFETY: the caller's buffers and arrays stay valid for this
            // blocking call.
            return unsafe { IC::gather(m, &cm, (sbuf, sn, st), (rbuf, rt), |k| IC::uniform(rn, k), root) };
        }
        let root = root_ok(&cm, root)?;
        let n = cm.size();
        let at_root = cm.rank == root;
        // SAFETY: the buffers stay valid for this blocking call.
        let out = if at_root { Stage::packed(unsafe { typed(m, rbuf, rn.saturating_mul(n as c_int), rt)? }, false) } else { Stage::none() };
        let s = if at_root && is_in_place(sbuf) {
            // SAFETY: as above; the root's block of its receive buffer.
            let all = unsafe { typed(m, rbuf, rn.saturating_mul(n as c_int), rt)? };
            Stage::packed(all.slice(root * rn as usize, rn as usize), true)
        } else {
            // SAFETY: as above.
            Stage::packed(unsafe { typed(m, sbuf, sn, st)? }, true)
        };
        if at_root && s.raw.len() * n != out.raw.len() {
            return fail(err::TRUNCATE, format!("the root sends {} bytes but receives {} per rank", s.raw.len(), out.raw.len() / n.max(1)));
        }
        coll::gather(m, &cm, root, s.raw, out.raw)?;
        if at_root {
            out.store();
        }
        Ok(())
    });
    ret("MPI_Gather", c, r)
});

mpi_fn!(fn MPI_Scatter / PMPI_Scatter(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if cm.is_inter() {
            // SAFETY: the caller's buffers and arrays stay valid for this
            // blocking call.
            return unsafe { IC::scatter(m, &cm, (sbuf, st), (rbuf, rn, rt), |k| IC::uniform(sn, k), root) };
        }
        let root = root_ok(&cm, root)?;
        let n = cm.size();
        let at_root = cm.rank == root;
        // SAFETY: the buffers stay valid for this blocking call.
        let s = if at_root { Stage::packed(unsafe { typed(m, sbuf, sn.saturating_mul(n as c_int), st)? }, true) } else { Stage::none() };
        let mut scratch = Vec::new();
        let out = if at_root && is_in_place(rbuf) {
            scratch.resize(s.raw.len() / n.max(1), 0u8);
            Stage { tb: None, temp: None, raw: raw_of(&mut scratch), layout: false }
        } else {
            // SAFETY: as above.
            Stage::packed(unsafe { typed(m, rbuf, rn, rt)? }, false)
        };
        if at_root && out.raw.len() * n != s.raw.len() {
            return fail(err::TRUNCATE, format!("the root sends {} bytes per rank but receives {}", s.raw.len() / n.max(1), out.raw.len()));
        }
        coll::scatter(m, &cm, root, s.raw, out.raw)?;
        out.store();
        drop(scratch);
        Ok(())
    });
    ret("MPI_Scatter", c, r)
});

mpi_fn!(fn MPI_Gatherv / PMPI_Gatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, root: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if cm.is_inter() {
            // SAFETY: the caller's buffers and arrays stay valid for this
            // blocking call.
            return unsafe { IC::gather(m, &cm, (sbuf, sn, st), (rbuf, rt), |k| IC::counts_displs(rcounts, displs, k), root) };
        }
        let root = root_ok(&cm, root)?;
        let n = cm.size();
        let at_root = cm.rank == root;
        // At the root: the blocks, and the run they make when they lie
        // back to back (then received in place, not staged).
        let (mut temp, lens, offs, blocks, dense) = if at_root {
            // SAFETY: caller's arrays of comm-size elements.
            let counts = check_counts(unsafe { array(rcounts, n)? })?;
            // SAFETY: caller's arrays of the stated number of elements.
            let ds = unsafe { array(displs, n)? };
            // SAFETY: the buffer stays valid for this blocking call.
            let all = unsafe { typed(m, rbuf, 0, rt)? };
            let blocks: Vec<TypedBuf> = (0..n).map(|r| all.slice(ds[r] as usize, counts[r])).collect();
            let lens: Vec<usize> = blocks.iter().map(|b| b.bytes()).collect();
            let offs = offsets(&lens);
            let ds: Vec<usize> = ds.iter().map(|&d| d as usize).collect();
            // SAFETY: as above.
            let dense = unsafe { dense_run(m, rbuf, &counts, &ds, rt)? }.map(|(run, _)| run);
            let temp = if dense.is_some() { Vec::new() } else { vec![0u8; lens.iter().sum()] };
            (temp, lens, offs, blocks, dense)
        } else {
            (Vec::new(), vec![], vec![], vec![], None)
        };
        let s = if at_root && is_in_place(sbuf) {
            Stage::packed(blocks[root].clone(), true)
        } else {
            // SAFETY: the buffer stays valid for this blocking call.
            Stage::packed(unsafe { typed(m, sbuf, sn, st)? }, true)
        };
        if at_root && s.raw.len() != lens[root] {
            return fail(err::TRUNCATE, format!("the root sends {} bytes but expects {} from itself", s.raw.len(), lens[root]));
        }
        if let Some(run) = dense {
            return coll::gatherv(m, &cm, root, s.raw, run, &offs, &lens);
        }
        let raw = raw_of(&mut temp);
        coll::gatherv(m, &cm, root, s.raw, raw, &offs, &lens)?;
        for (r, b) in blocks.iter().enumerate() {
            b.unpack(&temp[offs[r]..offs[r] + lens[r]]);
        }
        Ok(())
    });
    ret("MPI_Gatherv", c, r)
});

mpi_fn!(fn MPI_Scatterv / PMPI_Scatterv(sbuf: *const c_void, scounts: *const c_int, displs: *const c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, root: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if cm.is_inter() {
            // SAFETY: the caller's buffers and arrays stay valid for this
            // blocking call.
            return unsafe { IC::scatter(m, &cm, (sbuf, st), (rbuf, rn, rt), |k| IC::counts_displs(scounts, displs, k), root) };
        }
        let root = root_ok(&cm, root)?;
        let n = cm.size();
        let at_root = cm.rank == root;
        // At the root: the blocks packed, or sent from where they lie when
        // they make one run back to back.
        let (mut temp, lens, offs, dense) = if at_root {
            // SAFETY: caller's arrays of comm-size elements; the send buffer
            // stays valid for this blocking call.
            let counts = check_counts(unsafe { array(scounts, n)? })?;
            // SAFETY: caller's arrays of the stated number of elements.
            let ds = unsafe { array(displs, n)? };
            let dsu: Vec<usize> = ds.iter().map(|&d| d as usize).collect();
            // SAFETY: the buffer stays valid for this blocking call.
            if let Some((run, lens)) = unsafe { dense_run(m, sbuf, &counts, &dsu, st)? } {
                let offs = offsets(&lens);
                (Vec::new(), lens, offs, Some(run))
            } else {
                // SAFETY: the buffer stays valid for this blocking call.
                let all = unsafe { typed(m, sbuf, 0, st)? };
                let mut temp = Vec::new();
                let mut lens = Vec::new();
                for r in 0..n {
                    let p = all.slice(ds[r] as usize, counts[r]).pack();
                    lens.push(p.len());
                    temp.extend_from_slice(&p);
                }
                let offs = offsets(&lens);
                (temp, lens, offs, None)
            }
        } else {
            (Vec::new(), vec![], vec![], None)
        };
        let mut scratch = Vec::new();
        let out = if at_root && is_in_place(rbuf) {
            scratch.resize(lens[root], 0u8);
            Stage { tb: None, temp: None, raw: raw_of(&mut scratch), layout: false }
        } else {
            // SAFETY: the buffer stays valid for this blocking call.
            Stage::packed(unsafe { typed(m, rbuf, rn, rt)? }, false)
        };
        if at_root && out.raw.len() != lens[root] {
            return fail(err::TRUNCATE, format!("the root sends {} bytes to itself but receives {}", lens[root], out.raw.len()));
        }
        let raw = dense.unwrap_or_else(|| raw_of(&mut temp));
        coll::scatterv(m, &cm, root, raw, out.raw, &offs, &lens)?;
        out.store();
        Ok(())
    });
    ret("MPI_Scatterv", c, r)
});

/// Allgather(v): `counts`/`displs` describe the receive blocks.
///
/// # Safety
/// Buffers valid for the blocking call.
unsafe fn allgather_impl(
    name: &str,
    m: &Mpi,
    sbuf: *const c_void,
    sn: c_int,
    st: c_int,
    rbuf: *mut c_void,
    counts: &[usize],
    displs: &[usize],
    rt: c_int,
    c: c_int,
) -> MpiResult<()> {
    let cm = comm(m, c)?;
    let n = cm.size();
    let me = cm.rank;
    let mismatch = |sends: usize, holds: usize| {
        fail(
            err::TRUNCATE,
            format!("{name}: this rank sends {sends} bytes but its block holds {holds}"),
        )
    };
    // Blocks back to back in one dense run (MPI_Allgather of a contiguous
    // type): received where they belong, no staging copy and no view of
    // each block (1 MiB blocks at 2 ranks: 604 -> 298 us; Open MPI 259).
    // SAFETY: forwarded.
    if let Some((whole, lens)) = unsafe { dense_run(m, rbuf, counts, displs, rt)? } {
        let offs = offsets(&lens);
        let s = if is_in_place(sbuf) {
            let own = whole.sub(offs[me], lens[me]).expect("a block of the run");
            Stage {
                tb: None,
                temp: None,
                raw: own,
                layout: false,
            }
        } else {
            // SAFETY: forwarded.
            Stage::packed(unsafe { typed(m, sbuf, sn, st)? }, true)
        };
        if s.raw.len() != lens[me] {
            return mismatch(s.raw.len(), lens[me]);
        }
        return coll::allgatherv(m, &cm, s.raw, whole, &offs, &lens);
    }
    // SAFETY: forwarded.
    let all = unsafe { typed(m, rbuf, 0, rt)? };
    let blocks: Vec<TypedBuf> = (0..n).map(|r| all.slice(displs[r], counts[r])).collect();
    let lens: Vec<usize> = blocks.iter().map(|b| b.bytes()).collect();
    let offs = offsets(&lens);
    let s = if is_in_place(sbuf) {
        Stage::packed(blocks[me].clone(), true)
    } else {
        // SAFETY: forwarded.
        Stage::packed(unsafe { typed(m, sbuf, sn, st)? }, true)
    };
    if s.raw.len() != lens[me] {
        return mismatch(s.raw.len(), lens[me]);
    }
    let total = lens.iter().sum::<usize>();
    let mut temp = vec![0u8; total];
    let raw = raw_of(&mut temp);
    coll::allgatherv(m, &cm, s.raw, raw, &offs, &lens)?;
    for (r, b) in blocks.iter().enumerate() {
        b.unpack(&temp[offs[r]..offs[r] + lens[r]]);
    }
    Ok(())
}

mpi_fn!(fn MPI_Allgather / PMPI_Allgather(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if cm.is_inter() {
            // SAFETY: the caller's buffers and arrays stay valid for this
            // blocking call.
            return unsafe { { let (cs, ds) = IC::uniform(rn, cm.peers().size())?; IC::allgather(m, &cm, (sbuf, sn, st), (rbuf, rt), &cs, &ds) } };
        }
        let n = cm.size();
        let rn = super::count(rn)?;
        let counts = vec![rn; n];
        let displs: Vec<usize> = (0..n).map(|r| r * rn).collect();
        // SAFETY: caller's buffers for this blocking call.
        unsafe { allgather_impl("MPI_Allgather", m, sbuf, sn, st, rbuf, &counts, &displs, rt, c) }
    });
    ret("MPI_Allgather", c, r)
});

mpi_fn!(fn MPI_Allgatherv / PMPI_Allgatherv(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rcounts: *const c_int, displs: *const c_int, rt: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if cm.is_inter() {
            // SAFETY: the caller's buffers and arrays stay valid for this
            // blocking call.
            return unsafe { { let (cs, ds) = IC::counts_displs(rcounts, displs, cm.peers().size())?; IC::allgather(m, &cm, (sbuf, sn, st), (rbuf, rt), &cs, &ds) } };
        }
        let n = cm.size();
        // SAFETY: caller's arrays of comm-size elements.
        let counts = check_counts(unsafe { array(rcounts, n)? })?;
        // SAFETY: caller's arrays of the stated number of elements.
        let ds = check_counts(unsafe { array(displs, n)? })?;
        // SAFETY: caller's buffers for this blocking call.
        unsafe { allgather_impl("MPI_Allgatherv", m, sbuf, sn, st, rbuf, &counts, &ds, rt, c) }
    });
    ret("MPI_Allgatherv", c, r)
});

/// Alltoall(v) with per-peer element counts and displacements.
///
/// # Safety
/// Buffers valid for the blocking call.
#[allow(clippy::too_many_arguments)]
unsafe fn alltoall_impl(
    m: &Mpi,
    sbuf: *const c_void,
    sc: &[usize],
    sd: &[usize],
    st: c_int,
    rbuf: *mut c_void,
    rc: &[usize],
    rd: &[usize],
    rt: c_int,
    c: c_int,
) -> MpiResult<()> {
    let cm = comm(m, c)?;
    let n = cm.size();
    // Blocks back to back in one dense run on both sides (MPI_Alltoall of a
    // contiguous type, not in place) go from and to the caller's memory as
    // they lie: no packing, no staging buffer (at 8 ranks and 64 KiB
    // blocks, a third of the call's time).
    if !is_in_place(sbuf) {
        // SAFETY: forwarded.
        let runs = unsafe {
            (
                dense_run(m, sbuf, sc, sd, st)?,
                dense_run(m, rbuf, rc, rd, rt)?,
            )
        };
        if let (Some((sraw, slens)), Some((rraw, rlens))) = runs {
            if slens[cm.rank] != rlens[cm.rank] {
                return self_mismatch(cm.rank, slens[cm.rank], rlens[cm.rank]);
            }
            let (soffs, roffs) = (offsets(&slens), offsets(&rlens));
            return coll::alltoallv(m, &cm, sraw, rraw, &soffs, &slens, &roffs, &rlens);
        }
    }
    // SAFETY: forwarded.
    let rall = unsafe { typed(m, rbuf, 0, rt)? };
    let rblocks: Vec<TypedBuf> = (0..n).map(|r| rall.slice(rd[r], rc[r])).collect();
    let sblocks: Vec<TypedBuf> = if is_in_place(sbuf) {
        rblocks.clone()
    } else {
        // SAFETY: forwarded.
        let sall = unsafe { typed(m, sbuf, 0, st)? };
        (0..n).map(|r| sall.slice(sd[r], sc[r])).collect()
    };
    exchange_blocks(m, &cm, &sblocks, &rblocks)
}

/// The blocks of `counts` elements at `displs` of `buf`, when they lie
/// back to back (each displacement the sum of the counts before it) and
/// their elements make one dense run: that run, and each block's bytes.
///
/// # Safety
/// `buf` is the caller's buffer of the blocks (MPI's rule for a blocking
/// collective).
unsafe fn dense_run(
    m: &Mpi,
    buf: *const c_void,
    counts: &[usize],
    displs: &[usize],
    dt: c_int,
) -> MpiResult<Option<(RawBuf, Vec<usize>)>> {
    // Each displacement the sum of the counts before it (no list made).
    let back_to_back = displs
        .iter()
        .zip(counts)
        .try_fold(0, |next, (&d, &c)| (d == next).then_some(next + c))
        .is_some();
    if displs.len() != counts.len() || !back_to_back {
        return Ok(None);
    }
    let total: usize = counts.iter().sum();
    // SAFETY: forwarded: the blocks together are these `total` elements.
    let all = unsafe { typed(m, buf, total as i64, dt)? };
    let size = all.dtype.size;
    Ok(all
        .contiguous()
        .map(|run| (run, counts.iter().map(|c| c * size).collect())))
}

fn self_mismatch(rank: usize, sends: usize, receives: usize) -> MpiResult<()> {
    fail(
        err::TRUNCATE,
        format!("rank {rank} sends {sends} bytes to itself but receives {receives}"),
    )
}

/// Sends block r of `sblocks` to rank r and receives block r of `rblocks`
/// from it (the all-to-all family, whatever the types).
pub(super) fn exchange_blocks(
    m: &Mpi,
    cm: &Comm,
    sblocks: &[TypedBuf],
    rblocks: &[TypedBuf],
) -> MpiResult<()> {
    let mut stemp = Vec::new();
    let mut slens = Vec::new();
    for b in sblocks {
        let p = b.pack();
        slens.push(p.len());
        stemp.extend_from_slice(&p);
    }
    let soffs = offsets(&slens);
    let rlens: Vec<usize> = rblocks.iter().map(|b| b.bytes()).collect();
    let roffs = offsets(&rlens);
    if slens[cm.rank] != rlens[cm.rank] {
        return self_mismatch(cm.rank, slens[cm.rank], rlens[cm.rank]);
    }
    let mut rtemp = vec![0u8; rlens.iter().sum()];
    let (sraw, rraw) = (raw_of(&mut stemp), raw_of(&mut rtemp));
    coll::alltoallv(m, cm, sraw, rraw, &soffs, &slens, &roffs, &rlens)?;
    for (r, b) in rblocks.iter().enumerate() {
        b.unpack(&rtemp[roffs[r]..roffs[r] + rlens[r]]);
    }
    Ok(())
}

mpi_fn!(fn MPI_Alltoall / PMPI_Alltoall(sbuf: *const c_void, sn: c_int, st: c_int, rbuf: *mut c_void, rn: c_int, rt: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if cm.is_inter() {
            // SAFETY: the caller's buffers and arrays stay valid for this
            // blocking call.
            return unsafe { { let k = cm.peers().size(); let (sc, sd) = IC::uniform(sn, k)?; let (rc, rd) = IC::uniform(rn, k)?; let (sa, ra) = (typed(m, sbuf, 0, st)?, typed(m, rbuf, 0, rt)?); IC::alltoall(m, &cm, &(0..k).map(|r| sa.slice(sd[r], sc[r])).collect::<Vec<_>>(), &(0..k).map(|r| ra.slice(rd[r], rc[r])).collect::<Vec<_>>()) } };
        }
        let n = cm.size();
        let rn = super::count(rn)?;
        // In place, the send count and type are ignored.
        let sn = if is_in_place(sbuf) { rn } else { super::count(sn)? };
        // Small blocks through shared memory, packed (whether it is used
        // must not depend on this rank's layout: the same at every rank).
        // SAFETY: caller's buffers for this blocking call.
        let rall = unsafe { typed(m, rbuf, rn.saturating_mul(n) as i64, rt)? };
        let large = coll::alltoall_copies(n, rall.bytes() / n.max(1));
        if rall.bytes() <= coll::shm_capacity(n) || large {
            let out = Stage::packed(rall, is_in_place(sbuf));
            // Kept until the exchange is done: it may own the packed bytes.
            let staged_send;
            let mut own_copy;
            let input = if is_in_place(sbuf) && large {
                // Others copy from the input while this rank writes its
                // output: in place they must be apart.
                own_copy = out.raw.as_slice().to_vec();
                raw_of(&mut own_copy)
            } else if is_in_place(sbuf) {
                out.raw
            } else {
                // SAFETY: as above.
                staged_send = Stage::packed(unsafe { typed(m, sbuf, sn.saturating_mul(n) as i64, st)? }, true);
                staged_send.raw
            };
            if input.len() != out.raw.len() {
                return self_mismatch(cm.rank, input.len() / n.max(1), out.raw.len() / n.max(1));
            }
            if coll::alltoall_shared(m, &cm, input, out.raw)? {
                out.store();
                return Ok(());
            }
        }
        let sd: Vec<usize> = (0..n).map(|r| r * sn).collect();
        let rd: Vec<usize> = (0..n).map(|r| r * rn).collect();
        // SAFETY: caller's buffers for this blocking call.
        unsafe { alltoall_impl(m, sbuf, &vec![sn; n], &sd, st, rbuf, &vec![rn; n], &rd, rt, c) }
    });
    ret("MPI_Alltoall", c, r)
});

mpi_fn!(fn MPI_Alltoallv / PMPI_Alltoallv(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, st: c_int,
        rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rt: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if cm.is_inter() {
            // SAFETY: the caller's buffers and arrays stay valid for this
            // blocking call.
            return unsafe { { let k = cm.peers().size(); let (sc, sd) = IC::counts_displs(scounts, sdispls, k)?; let (rc, rd) = IC::counts_displs(rcounts, rdispls, k)?; let (sa, ra) = (typed(m, sbuf, 0, st)?, typed(m, rbuf, 0, rt)?); IC::alltoall(m, &cm, &(0..k).map(|r| sa.slice(sd[r], sc[r])).collect::<Vec<_>>(), &(0..k).map(|r| ra.slice(rd[r], rc[r])).collect::<Vec<_>>()) } };
        }
        let n = cm.size();
        // SAFETY: caller's arrays of comm-size elements (send ones unused in place).
        let (rc, rd) = unsafe { (check_counts(array(rcounts, n)?)?, check_counts(array(rdispls, n)?)?) };
        let (sc, sd) = if is_in_place(sbuf) {
            (rc.clone(), rd.clone())
        } else {
            // SAFETY: caller's arrays of the stated number of elements.
            unsafe { (check_counts(array(scounts, n)?)?, check_counts(array(sdispls, n)?)?) }
        };
        // SAFETY: caller's buffers for this blocking call.
        unsafe { alltoall_impl(m, sbuf, &sc, &sd, st, rbuf, &rc, &rd, rt, c) }
    });
    ret("MPI_Alltoallv", c, r)
});

mpi_fn!(fn MPI_Alltoallw / PMPI_Alltoallw(sbuf: *const c_void, scounts: *const c_int, sdispls: *const c_int, stypes: *const c_int,
        rbuf: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtypes: *const c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        let inter = IC::inter(m, c);
        let cm = match &inter {
            Some(ic) => ic.clone(),
            None => comm(m, c)?,
        };
        let n = cm.peers().size();
        // Byte displacements, a datatype per peer.
        // SAFETY: caller's arrays of comm-size elements, and buffers valid
        // for this blocking call.
        let blocks = |buf: *const c_void, counts: *const c_int, displs: *const c_int, types: *const c_int| unsafe {
            let (cs, ds, ts) = (check_counts(array(counts, n)?)?, array(displs, n)?, array(types, n)?);
            (0..n)
                .map(|r| super::typed_block(m, (buf as *const u8).wrapping_offset(ds[r] as isize) as *const c_void, cs[r] as c_int, ts[r]))
                .collect::<MpiResult<Vec<TypedBuf>>>()
        };
        let rblocks = blocks(rbuf, rcounts, rdispls, rtypes)?;
        let sblocks = if is_in_place(sbuf) { rblocks.clone() } else { blocks(sbuf, scounts, sdispls, stypes)? };
        if inter.is_some() {
            return IC::alltoall(m, &cm, &sblocks, &rblocks);
        }
        exchange_blocks(m, &cm, &sblocks, &rblocks)
    });
    ret("MPI_Alltoallw", c, r)
});
