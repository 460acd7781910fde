//! Collectives on inter-communicators: the entry points of `coll.rs` and
//! `reduce.rs` hand an inter-communicator here; buffers are staged as
//! there, then `api::intercoll` moves the bytes. `MPI_IN_PLACE` has no
//! meaning on an inter-communicator and is refused.

use super::coll::{check_counts, is_in_place, raw_of, Stage};
use super::{array, count, typed};
use crate::api::collective::Reduction;
use crate::api::consts::err;
use crate::api::error::{fail, MpiResult};
use crate::api::intercoll::{self as ic, Role};
use crate::api::usermem::TypedBuf;
use crate::api::{Comm, Layout, Mpi, RawBuf};
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

/// The communicator if it is an inter-communicator.
pub fn inter(m: &Mpi, c: c_int) -> Option<Arc<Comm>> {
    m.tables().comm(c).ok().filter(|cm| cm.is_inter())
}

fn no_in_place(p: *const c_void) -> MpiResult<()> {
    if is_in_place(p) {
        return fail(
            err::ARG,
            "MPI_IN_PLACE is not allowed on an inter-communicator",
        );
    }
    Ok(())
}

/// Blocks of `counts[r]` elements at element displacements `displs[r]`.
fn blocks(all: &TypedBuf, counts: &[usize], displs: &[usize]) -> Vec<TypedBuf> {
    counts
        .iter()
        .zip(displs)
        .map(|(&c, &d)| all.slice(d, c))
        .collect()
}

/// Receives packed blocks into `temp`, then unpacks each into its block.
fn unpack_blocks(blocks: &[TypedBuf], temp: &[u8]) {
    let mut off = 0;
    for b in blocks {
        let len = b.bytes();
        b.unpack(&temp[off..off + len]);
        off += len;
    }
}

fn pack_blocks(blocks: &[TypedBuf]) -> (Vec<u8>, Vec<usize>) {
    let mut v = Vec::new();
    let mut lens = Vec::new();
    for b in blocks {
        let p = b.pack();
        lens.push(p.len());
        v.extend_from_slice(&p);
    }
    (v, lens)
}

pub fn barrier(m: &Mpi, cm: &Comm) -> MpiResult<()> {
    ic::barrier(m, cm)
}

/// # Safety
/// The buffer stays valid for this blocking call.
pub unsafe fn bcast(
    m: &Mpi,
    cm: &Comm,
    buf: *mut c_void,
    n: c_int,
    dt: c_int,
    root: c_int,
) -> MpiResult<()> {
    let role = ic::role(cm, root)?;
    if role == Role::Idle {
        return Ok(());
    }
    // SAFETY: forwarded.
    let st = Stage::packed(unsafe { typed(m, buf, n, dt)? }, role == Role::Root);
    ic::bcast(m, cm, role, st.raw)?;
    if role != Role::Root {
        st.store();
    }
    Ok(())
}

/// Gather and Gatherv: `counts`/`displs` of the root's receive blocks.
///
/// # Safety
/// Buffers valid for this blocking call.
pub unsafe fn gather(
    m: &Mpi,
    cm: &Comm,
    (sbuf, sn, st): (*const c_void, c_int, c_int),
    (rbuf, rt): (*mut c_void, c_int),
    root_blocks: impl FnOnce(usize) -> MpiResult<(Vec<usize>, Vec<usize>)>,
    root: c_int,
) -> MpiResult<()> {
    match ic::role(cm, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            let (counts, displs) = root_blocks(cm.peers().size())?;
            // SAFETY: forwarded.
            let all = unsafe { typed(m, rbuf, 0, rt)? };
            let bs = blocks(&all, &counts, &displs);
            let mut temp = vec![0u8; bs.iter().map(TypedBuf::bytes).sum()];
            ic::gather(m, cm, Role::Root, RawBuf::empty(), raw_of(&mut temp))?;
            unpack_blocks(&bs, &temp);
            Ok(())
        }
        role => {
            no_in_place(sbuf)?;
            // SAFETY: forwarded.
            let s = Stage::packed(unsafe { typed(m, sbuf, sn, st)? }, true);
            ic::gather(m, cm, role, s.raw, RawBuf::empty())
        }
    }
}

/// Scatter and Scatterv: `counts`/`displs` of the root's send blocks.
///
/// # Safety
/// Buffers valid for this blocking call.
pub unsafe fn scatter(
    m: &Mpi,
    cm: &Comm,
    (sbuf, st): (*const c_void, c_int),
    (rbuf, rn, rt): (*mut c_void, c_int, c_int),
    root_blocks: impl FnOnce(usize) -> MpiResult<(Vec<usize>, Vec<usize>)>,
    root: c_int,
) -> MpiResult<()> {
    match ic::role(cm, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            let (counts, displs) = root_blocks(cm.peers().size())?;
            // SAFETY: forwarded.
            let all = unsafe { typed(m, sbuf, 0, st)? };
            let (mut packed, lens) = pack_blocks(&blocks(&all, &counts, &displs));
            ic::scatter(
                m,
                cm,
                Role::Root,
                raw_of(&mut packed),
                &lens,
                RawBuf::empty(),
            )
        }
        role => {
            no_in_place(rbuf)?;
            // SAFETY: forwarded.
            let out = Stage::packed(unsafe { typed(m, rbuf, rn, rt)? }, false);
            ic::scatter(m, cm, role, RawBuf::empty(), &[], out.raw)?;
            out.store();
            Ok(())
        }
    }
}

/// Allgather(v): `counts`/`displs` of the remote group's blocks.
///
/// # Safety
/// Buffers valid for this blocking call.
pub unsafe fn allgather(
    m: &Mpi,
    cm: &Comm,
    (sbuf, sn, st): (*const c_void, c_int, c_int),
    (rbuf, rt): (*mut c_void, c_int),
    counts: &[usize],
    displs: &[usize],
) -> MpiResult<()> {
    no_in_place(sbuf)?;
    // SAFETY: forwarded.
    let s = Stage::packed(unsafe { typed(m, sbuf, sn, st)? }, true);
    // SAFETY: forwarded.
    let all = unsafe { typed(m, rbuf, 0, rt)? };
    let bs = blocks(&all, counts, displs);
    let mut temp = vec![0u8; bs.iter().map(TypedBuf::bytes).sum()];
    ic::allgather(m, cm, s.raw, raw_of(&mut temp))?;
    unpack_blocks(&bs, &temp);
    Ok(())
}

/// The all-to-all family, on typed blocks (one per remote rank).
pub fn alltoall(m: &Mpi, cm: &Comm, sblocks: &[TypedBuf], rblocks: &[TypedBuf]) -> MpiResult<()> {
    let mut spacked: Vec<Vec<u8>> = sblocks.iter().map(TypedBuf::pack).collect();
    let mut rtemp: Vec<Vec<u8>> = rblocks.iter().map(|b| vec![0u8; b.bytes()]).collect();
    let s: Vec<RawBuf> = spacked.iter_mut().map(raw_of).collect();
    let r: Vec<RawBuf> = rtemp.iter_mut().map(raw_of).collect();
    ic::alltoall(m, cm, &s, &r)?;
    for (b, t) in rblocks.iter().zip(&rtemp) {
        b.unpack(t);
    }
    Ok(())
}

/// Rooted reduce, allreduce, reduce-scatter: the reduction of the other
/// group's data.
pub enum ReduceKind<'a> {
    Rooted(c_int),
    All,
    /// This group's counts (elements per local rank).
    Scatter(&'a [usize]),
}

/// # Safety
/// Buffers valid for this blocking call.
pub unsafe fn reduce(
    m: &Mpi,
    cm: &Comm,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: c_int,
    o: c_int,
    kind: ReduceKind,
) -> MpiResult<()> {
    // MPI_PROC_NULL's members ignore every other argument (mpi4py passes
    // MPI_DATATYPE_NULL there, which no operation takes).
    if let ReduceKind::Rooted(root) = kind {
        if matches!(ic::role(cm, root)?, Role::Idle) {
            return Ok(());
        }
    }
    no_in_place(sbuf)?;
    let (red, commutative) = super::reduce::reducer(m, o, dt)?;
    let n = count(n)?;
    let r = |elem: usize| Reduction {
        count: n,
        elem,
        op: &red,
        commutative,
    };
    match kind {
        ReduceKind::Rooted(root) => match ic::role(cm, root)? {
            Role::Idle => Ok(()),
            Role::Root => {
                // SAFETY: forwarded.
                let out = Stage::layout(unsafe { typed(m, rbuf, n as c_int, dt)? }, false)?;
                let elem = out.tb.as_ref().expect("typed").dtype.extent as usize;
                ic::reduce(m, cm, Role::Root, RawBuf::empty(), out.raw, &r(elem))?;
                out.store();
                Ok(())
            }
            role => {
                // SAFETY: forwarded.
                let s = Stage::layout(unsafe { typed(m, sbuf, n as c_int, dt)? }, true)?;
                let elem = s.tb.as_ref().expect("typed").dtype.extent as usize;
                ic::reduce(m, cm, role, s.raw, RawBuf::empty(), &r(elem))
            }
        },
        ReduceKind::All => {
            // SAFETY: forwarded.
            let s = Stage::layout(unsafe { typed(m, sbuf, n as c_int, dt)? }, true)?;
            // SAFETY: forwarded.
            let out = Stage::layout(unsafe { typed(m, rbuf, n as c_int, dt)? }, false)?;
            let elem = s.tb.as_ref().expect("typed").dtype.extent as usize;
            ic::allreduce(m, cm, s.raw, out.raw, &r(elem))?;
            out.store();
            Ok(())
        }
        ReduceKind::Scatter(counts) => {
            let total: usize = counts.iter().sum();
            // SAFETY: forwarded.
            let s = Stage::layout(unsafe { typed(m, sbuf, total as c_int, dt)? }, true)?;
            // SAFETY: forwarded.
            let out = Stage::layout(
                unsafe { typed(m, rbuf, counts[cm.rank] as c_int, dt)? },
                false,
            )?;
            let elem = s.tb.as_ref().expect("typed").dtype.extent as usize;
            let lens: Vec<usize> = counts.iter().map(|&k| k * elem).collect();
            let red_all = Reduction {
                count: total,
                elem,
                op: &red,
                commutative,
            };
            ic::reduce_scatter(m, cm, s.raw, out.raw, &lens, &red_all)?;
            out.store();
            Ok(())
        }
    }
}

/// Counts and displacements of the C arrays, `n` of each.
///
/// # Safety
/// Arrays of `n` ints.
pub unsafe fn counts_displs(
    counts: *const c_int,
    displs: *const c_int,
    n: usize,
) -> MpiResult<(Vec<usize>, Vec<usize>)> {
    // SAFETY: forwarded.
    unsafe {
        Ok((
            check_counts(array(counts, n)?)?,
            check_counts(array(displs, n)?)?,
        ))
    }
}

/// `k` blocks of `n` elements, one after the other.
pub fn uniform(n: c_int, k: usize) -> MpiResult<(Vec<usize>, Vec<usize>)> {
    let n = count(n)?;
    Ok((vec![n; k], (0..k).map(|r| r * n).collect()))
}
