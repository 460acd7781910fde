//! Large-count calls of MPI 4.0 (`MPI_*_c`, counts and displacements as
//! `MPI_Count`): point-to-point takes any count (`p2p.rs`), datatypes and
//! the queries here take them whole; the collectives here take counts that
//! fit an int and say so otherwise (`MPI_ERR_COUNT`), rather than cut them.

use super::{array, mpi, mpi_fn, put, ret, NO_OBJECT};
use crate::api::consts::{err, DATATYPE_NULL};
use crate::api::datatype::{combiner as C, Datatype};
use crate::api::error::{fail, MpiResult};
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

type Count = i64;

/// A count for the int interface, or why it does not fit. (A negative one
/// passes: the int version reports it as it would its own.)
pub(super) fn fit(n: Count) -> MpiResult<c_int> {
    c_int::try_from(n).or_else(|_| {
        fail(
            err::COUNT,
            format!(
                "a count or displacement of {n}: mpistages takes at most 2^31 - 1 in this call"
            ),
        )
    })
}

/// An array of `n` counts or displacements for the int interface.
///
/// # Safety
/// `p` holds `n` values.
unsafe fn fit_all(p: *const Count, n: usize) -> MpiResult<Vec<c_int>> {
    // SAFETY: forwarded.
    unsafe { array(p, n)? }.iter().map(|&x| fit(x)).collect()
}

/// `fit_all`, or `None` for a NULL or empty array (the int version then
/// gets NULL, and reports it where it matters).
///
/// # Safety
/// `p` is NULL or holds `n` values.
pub(super) unsafe fn fit_opt(p: *const Count, n: usize) -> MpiResult<Option<Vec<c_int>>> {
    if p.is_null() || n == 0 {
        return Ok(None);
    }
    // SAFETY: forwarded.
    unsafe { fit_all(p, n) }.map(Some)
}

/// An array length from a count argument (0 when negative or absurd: the
/// int version then reports the count).
pub(super) fn len_of(n: Count) -> usize {
    usize::try_from(n)
        .ok()
        .filter(|&n| n <= 1 << 31)
        .unwrap_or(0)
}

fn comm_size(c: c_int) -> MpiResult<usize> {
    let m = mpi()?;
    let cm = m.tables().comm(c)?;
    Ok(cm.peers().size())
}

mpi_fn!(fn MPI_Bcast_c / PMPI_Bcast_c(buf: *mut c_void, n: Count, dt: c_int, root: c_int, c: c_int) {
    match fit(n) {
        // SAFETY: the same contract as MPI_Bcast's.
        Ok(n) => unsafe { super::coll::PMPI_Bcast(buf, n, dt, root, c) },
        Err(e) => ret("MPI_Bcast_c", c, Err(e)),
    }
});

mpi_fn!(fn MPI_Reduce_c / PMPI_Reduce_c(s: *const c_void, r: *mut c_void, n: Count, dt: c_int, o: c_int, root: c_int, c: c_int) {
    match fit(n) {
        // SAFETY: the same contract as MPI_Reduce's.
        Ok(n) => unsafe { super::reduce::PMPI_Reduce(s, r, n, dt, o, root, c) },
        Err(e) => ret("MPI_Reduce_c", c, Err(e)),
    }
});

mpi_fn!(fn MPI_Allreduce_c / PMPI_Allreduce_c(s: *const c_void, r: *mut c_void, n: Count, dt: c_int, o: c_int, c: c_int) {
    match fit(n) {
        // SAFETY: the same contract as MPI_Allreduce's.
        Ok(n) => unsafe { super::reduce::PMPI_Allreduce(s, r, n, dt, o, c) },
        Err(e) => ret("MPI_Allreduce_c", c, Err(e)),
    }
});

macro_rules! gather_like_c {
    ($($name:ident / $pname:ident => $int:path, root: $($root:ident)?;)*) => {$(
        mpi_fn!(fn $name / $pname(s: *const c_void, sn: Count, st: c_int, r: *mut c_void, rn: Count, rt: c_int, $($root: c_int,)? c: c_int) {
            match fit(sn).and_then(|sn| Ok((sn, fit(rn)?))) {
                // SAFETY: the same contract as the int version's.
                Ok((sn, rn)) => unsafe { $int(s, sn, st, r, rn, rt, $($root,)? c) },
                Err(e) => ret(stringify!($name), c, Err(e)),
            }
        });
    )*};
}

gather_like_c! {
    MPI_Gather_c / PMPI_Gather_c => super::coll::PMPI_Gather, root: root;
    MPI_Scatter_c / PMPI_Scatter_c => super::coll::PMPI_Scatter, root: root;
    MPI_Allgather_c / PMPI_Allgather_c => super::coll::PMPI_Allgather, root: ;
    MPI_Alltoall_c / PMPI_Alltoall_c => super::coll::PMPI_Alltoall, root: ;
}

mpi_fn!(fn MPI_Alltoallv_c / PMPI_Alltoallv_c(s: *const c_void, sc: *const Count, sd: *const Count, st: c_int,
        r: *mut c_void, rc: *const Count, rd: *const Count, rt: c_int, c: c_int) {
    let args = (|| {
        let n = comm_size(c)?;
        // SAFETY: the standard's arrays of comm-size elements (the send
        // ones unread in place).
        unsafe {
            let (rc, rd) = (fit_all(rc, n)?, fit_all(rd, n)?);
            let (sc, sd) = if super::coll::is_in_place(s) { (rc.clone(), rd.clone()) } else { (fit_all(sc, n)?, fit_all(sd, n)?) };
            Ok((sc, sd, rc, rd))
        }
    })();
    match args {
        // SAFETY: the same contract as MPI_Alltoallv's, with int arrays.
        Ok((sc, sd, rc, rd)) => unsafe { super::coll::PMPI_Alltoallv(s, sc.as_ptr(), sd.as_ptr(), st, r, rc.as_ptr(), rd.as_ptr(), rt, c) },
        Err(e) => ret("MPI_Alltoallv_c", c, Err(e)),
    }
});

fn build(name: &str, out: *mut c_int, f: impl FnOnce() -> MpiResult<Datatype>) -> c_int {
    let r = mpi().and_then(|m| {
        let t = f()?;
        let h = m.tables().add_dtype(t);
        // SAFETY: caller's out-pointer.
        unsafe { put(out, h) }
    });
    if r.is_err() && !out.is_null() {
        // SAFETY: caller's out-pointer: no datatype was made.
        unsafe { out.write(crate::api::consts::DATATYPE_NULL) };
    }
    ret(name, NO_OBJECT, r)
}

fn old(h: c_int) -> MpiResult<std::sync::Arc<Datatype>> {
    mpi()?.tables().any_dtype(h)
}

/// The int arguments an envelope keeps (the large ones are cut: the
/// `_c` envelope queries are not implemented).
fn ints(v: &[Count]) -> Vec<c_int> {
    v.iter().map(|&x| x as c_int).collect()
}

mpi_fn!(fn MPI_Type_contiguous_c / PMPI_Type_contiguous_c(n: Count, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_contiguous_c", out, || {
        let o = old(oldtype)?;
        let t = Datatype::contiguous(n, &o)?;
        if n <= Count::from(c_int::MAX) {
            return Ok(t.made_by(C::CONTIGUOUS, ints(&[n]), vec![], vec![(oldtype, o)]));
        }
        // The int interface (MPI_Type_get_envelope: this is an MPI 3.1)
        // cannot say the count, so the type describes itself as what
        // MPI 3.1 programs build for it (BigMPI's and mpi4py's way): a
        // struct of a vector of whole int-sized blocks and the rest.
        let block = Count::from(c_int::MAX);
        let (q, r) = (n / block, n % block);
        let qt = Datatype::vector(q, block, block, false, &o)?;
        let qt = qt.made_by(C::VECTOR, ints(&[q, block, block]), vec![], vec![(oldtype, o.clone())]);
        let rt = Datatype::contiguous(r, &o)?.made_by(C::CONTIGUOUS, ints(&[r]), vec![], vec![(oldtype, o.clone())]);
        let d = vec![0, q * block * o.extent as i64];
        let parts = vec![(DATATYPE_NULL, Arc::new(qt)), (DATATYPE_NULL, Arc::new(rt))];
        // The large-count interface says what it is (MPI 4.0).
        Ok(t.made_by(C::STRUCT, vec![2, 1, 1], d, parts).made_large_by(C::CONTIGUOUS, vec![n], vec![(oldtype, o)]))
    })
});

mpi_fn!(fn MPI_Type_vector_c / PMPI_Type_vector_c(n: Count, bl: Count, stride: Count, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_vector_c", out, || {
        let o = old(oldtype)?;
        Ok(Datatype::vector(n, bl, stride, false, &o)?.made_by(C::VECTOR, ints(&[n, bl, stride]), vec![], vec![(oldtype, o)]))
    })
});

mpi_fn!(fn MPI_Type_create_hindexed_c / PMPI_Type_create_hindexed_c(n: Count, bls: *const Count, displs: *const Count, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_create_hindexed_c", out, || {
        let k = super::large_count(n)?;
        // SAFETY: caller's arrays of n elements.
        let (b, d) = unsafe { (array(bls, k)?, array(displs, k)?) };
        let o = old(oldtype)?;
        let t = Datatype::indexed(b, d, true, &o)?;
        Ok(t.made_by(C::HINDEXED, ints(&[&[n][..], b].concat()), d.to_vec(), vec![(oldtype, o)]))
    })
});

mpi_fn!(fn MPI_Type_create_indexed_block_c / PMPI_Type_create_indexed_block_c(n: Count, bl: Count, displs: *const Count, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_create_indexed_block_c", out, || {
        let k = super::large_count(n)?;
        // SAFETY: caller's array of n elements.
        let d = unsafe { array(displs, k)? };
        let o = old(oldtype)?;
        let t = Datatype::indexed(&vec![bl; k], d, false, &o)?;
        Ok(t.made_by(C::INDEXED_BLOCK, ints(&[&[n, bl][..], d].concat()), vec![], vec![(oldtype, o)]))
    })
});

mpi_fn!(fn MPI_Type_size_c / PMPI_Type_size_c(h: c_int, size: *mut Count) {
    // SAFETY: caller's out-pointer.
    let r = old(h).and_then(|t| unsafe { put(size, t.size as Count) });
    ret("MPI_Type_size_c", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Type_get_extent_c / PMPI_Type_get_extent_c(h: c_int, lb: *mut Count, extent: *mut Count) {
    // SAFETY: caller's out-pointers.
    let r = old(h).and_then(|t| unsafe { put(lb, t.lb as Count).and_then(|_| put(extent, t.extent as Count)) });
    ret("MPI_Type_get_extent_c", NO_OBJECT, r)
});

// MPI 3.0's MPI_Count forms of the same two queries.
mpi_fn!(fn MPI_Type_get_extent_x / PMPI_Type_get_extent_x(h: c_int, lb: *mut Count, extent: *mut Count) {
    // SAFETY: caller's out-pointers.
    let r = old(h).and_then(|t| unsafe { put(lb, t.lb as Count).and_then(|_| put(extent, t.extent as Count)) });
    ret("MPI_Type_get_extent_x", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Type_get_true_extent_x / PMPI_Type_get_true_extent_x(h: c_int, lb: *mut Count, extent: *mut Count) {
    // SAFETY: caller's out-pointers.
    let r = old(h).and_then(|t| unsafe { put(lb, t.true_lb as Count).and_then(|_| put(extent, t.true_extent as Count)) });
    ret("MPI_Type_get_true_extent_x", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Type_get_true_extent_c / PMPI_Type_get_true_extent_c(h: c_int, lb: *mut Count, extent: *mut Count) {
    // SAFETY: caller's out-pointers.
    let r = old(h).and_then(|t| unsafe { put(lb, t.true_lb as Count).and_then(|_| put(extent, t.true_extent as Count)) });
    ret("MPI_Type_get_true_extent_c", NO_OBJECT, r)
});
