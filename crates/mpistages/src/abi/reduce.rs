//! Reduction entry points (reduce, allreduce, scans, reduce-scatter) and
//! user-defined operations; buffers are staged as in `coll.rs`.

use super::coll::{check_counts, comm, is_in_place, offsets, raw_of, root_ok, Stage};
use super::intercoll as IC;
use super::typed_in;
use super::{array, mpi, mpi_fn, ret, typed, NO_OBJECT};
use crate::api::collective::{self as coll, Reduction};
use crate::api::consts::err;
use crate::api::error::{fail, MpiResult};
use crate::api::op::{self, OpDef};
use crate::api::Mpi;
use std::os::raw::{c_int, c_void};

/// The reduction of `o` over `dt` (a closure on the caller's stack, not a
/// box: it is made for every reducing call), and whether it commutes.
// The closure's type has no name to factor out.
#[allow(clippy::type_complexity)]
pub(super) fn reducer(
    m: &Mpi,
    o: c_int,
    dt: c_int,
) -> MpiResult<(
    impl Fn(&[u8], &mut [u8], usize) + Send + Sync + 'static,
    bool,
)> {
    reducer_in(&m.tables(), o, dt)
}

/// `reducer` with the tables already held.
#[allow(clippy::type_complexity)]
fn reducer_in(
    tb: &crate::api::Tables,
    o: c_int,
    dt: c_int,
) -> MpiResult<(
    impl Fn(&[u8], &mut [u8], usize) + Send + Sync + 'static,
    bool,
)> {
    let (opdef, t) = (tb.op(o)?, tb.dtype(dt)?);
    op::check(&opdef, &t)?;
    if matches!(opdef, OpDef::Predefined(p) if p == crate::api::consts::op::REPLACE || p == crate::api::consts::op::NO_OP)
    {
        return fail(
            err::OP,
            "MPI_REPLACE and MPI_NO_OP are not reduction operations for collectives",
        );
    }
    let commutative = opdef.commutative();
    Ok((
        move |src: &[u8], dst: &mut [u8], count: usize| op::reduce(&opdef, &t, dt, count, src, dst),
        commutative,
    ))
}

mpi_fn!(fn MPI_Reduce / PMPI_Reduce(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, root: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if cm.is_inter() {
            // SAFETY: the caller's buffers and arrays stay valid for this
            // blocking call.
            return unsafe { IC::reduce(m, &cm, sbuf, rbuf, n, dt, o, IC::ReduceKind::Rooted(root)) };
        }
        let root = root_ok(&cm, root)?;
        let (red, commutative) = reducer(m, o, dt)?;
        let at_root = cm.rank == root;
        let input = if at_root && is_in_place(sbuf) { rbuf as *const c_void } else { sbuf };
        // SAFETY: the buffers stay valid for this blocking call.
        let s = Stage::layout(unsafe { typed(m, input, n, dt)? }, true)?;
        // SAFETY: the buffer stays valid for this blocking call.
        let out = if at_root { Stage::layout(unsafe { typed(m, rbuf, n, dt)? }, false)? } else { Stage::none() };
        let elem = s.tb.as_ref().expect("typed").dtype.extent as usize;
        coll::reduce(m, &cm, root, s.raw, out.raw, &Reduction { count: n as usize, elem, op: &red, commutative })?;
        if at_root {
            out.store();
        }
        Ok(())
    });
    ret("MPI_Reduce", c, r)
});

mpi_fn!(fn MPI_Allreduce / PMPI_Allreduce(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        // One look at the tables for the communicator, the operation and
        // both buffers' datatype (an 8-byte allreduce is ~0.5 us in all).
        let input = if is_in_place(sbuf) { rbuf as *const c_void } else { sbuf };
        let (cm, (red, commutative), tin, tout) = {
            let tb = m.tables();
            let cm = tb.comm(c)?;
            if cm.is_inter() {
                drop(tb);
                // SAFETY: the caller's buffers and arrays stay valid for
                // this blocking call.
                return unsafe { IC::reduce(m, &cm, sbuf, rbuf, n, dt, o, IC::ReduceKind::All) };
            }
            // SAFETY: the buffers stay valid for this blocking call.
            let (tin, tout) = unsafe { (typed_in(&tb, input, n, dt)?, typed_in(&tb, rbuf, n, dt)?) };
            (cm, reducer_in(&tb, o, dt)?, tin, tout)
        };
        let s = Stage::layout(tin, true)?;
        let out = Stage::layout(tout, false)?;
        let elem = out.tb.as_ref().expect("typed").dtype.extent as usize;
        coll::allreduce(m, &cm, s.raw, out.raw, &Reduction { count: n as usize, elem, op: &red, commutative })?;
        out.store();
        Ok(())
    });
    ret("MPI_Allreduce", c, r)
});

/// # Safety
/// Buffers valid for the blocking call.
unsafe fn scan_impl(
    name: &str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    n: c_int,
    dt: c_int,
    o: c_int,
    c: c_int,
    exclusive: bool,
) -> c_int {
    let r = mpi().and_then(|m| {
        let cm = comm(m, c)?;
        let (red, commutative) = reducer(m, o, dt)?;
        let input = if is_in_place(sbuf) {
            rbuf as *const c_void
        } else {
            sbuf
        };
        // SAFETY: forwarded.
        let s = Stage::layout(unsafe { typed(m, input, n, dt)? }, true)?;
        // SAFETY: the buffer stays valid for this blocking call.
        let out = Stage::layout(unsafe { typed(m, rbuf, n, dt)? }, exclusive)?;
        let elem = out.tb.as_ref().expect("typed").dtype.extent as usize;
        coll::scan(
            m,
            &cm,
            s.raw,
            out.raw,
            &Reduction {
                count: n as usize,
                elem,
                op: &red,
                commutative,
            },
            exclusive,
        )?;
        // MPI_Exscan leaves rank 0's receive buffer alone.
        if !(exclusive && cm.rank == 0) {
            out.store();
        }
        Ok(())
    });
    ret(name, c, r)
}

mpi_fn!(fn MPI_Scan / PMPI_Scan(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) {
    // SAFETY: caller's buffers.
    unsafe { scan_impl("MPI_Scan", sbuf, rbuf, n, dt, o, c, false) }
});

mpi_fn!(fn MPI_Exscan / PMPI_Exscan(sbuf: *const c_void, rbuf: *mut c_void, n: c_int, dt: c_int, o: c_int, c: c_int) {
    // SAFETY: caller's buffers.
    unsafe { scan_impl("MPI_Exscan", sbuf, rbuf, n, dt, o, c, true) }
});

/// Reduce-scatter: reduce everything to rank 0, then scatter the blocks.
///
/// # Safety
/// Buffers valid for the blocking call.
unsafe fn reduce_scatter_impl(
    m: &Mpi,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    counts: &[usize],
    dt: c_int,
    o: c_int,
    c: c_int,
) -> MpiResult<()> {
    let cm = comm(m, c)?;
    let (red, commutative) = reducer(m, o, dt)?;
    let total: usize = counts.iter().sum();
    let input = if is_in_place(sbuf) {
        rbuf as *const c_void
    } else {
        sbuf
    };
    // SAFETY: forwarded.
    let s = Stage::layout(unsafe { typed(m, input, total as c_int, dt)? }, true)?;
    let ext = s.tb.as_ref().expect("typed").dtype.extent as usize;
    let mut full = vec![0u8; if cm.rank == 0 { total * ext } else { 0 }];
    let fraw = raw_of(&mut full);
    coll::reduce(
        m,
        &cm,
        0,
        s.raw,
        fraw,
        &Reduction {
            count: total,
            elem: ext,
            op: &red,
            commutative,
        },
    )?;
    let lens: Vec<usize> = counts.iter().map(|&k| k * ext).collect();
    let offs = offsets(&lens);
    // SAFETY: forwarded; this rank's block of the result.
    let out = Stage::layout(
        unsafe { typed(m, rbuf, counts[cm.rank] as c_int, dt)? },
        false,
    )?;
    coll::scatterv(m, &cm, 0, fraw, out.raw, &offs, &lens)?;
    out.store();
    Ok(())
}

mpi_fn!(fn MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block(sbuf: *const c_void, rbuf: *mut c_void, rn: c_int, dt: c_int, o: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if cm.is_inter() {
            // SAFETY: the caller's buffers and arrays stay valid for this
            // blocking call.
            return unsafe { { let counts = vec![super::count(rn)?; cm.size()]; IC::reduce(m, &cm, sbuf, rbuf, 0, dt, o, IC::ReduceKind::Scatter(&counts)) } };
        }
        let n = cm.size();
        let counts = vec![super::count(rn)?; n];
        // SAFETY: caller's buffers for this blocking call.
        unsafe { reduce_scatter_impl(m, sbuf, rbuf, &counts, dt, o, c) }
    });
    ret("MPI_Reduce_scatter_block", c, r)
});

mpi_fn!(fn MPI_Reduce_scatter / PMPI_Reduce_scatter(sbuf: *const c_void, rbuf: *mut c_void, rcounts: *const c_int, dt: c_int, o: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        let cm = m.tables().comm(c)?;
        if cm.is_inter() {
            // SAFETY: the caller's buffers and arrays stay valid for this
            // blocking call.
            return unsafe { { let counts = check_counts(array(rcounts, cm.size())?)?; IC::reduce(m, &cm, sbuf, rbuf, 0, dt, o, IC::ReduceKind::Scatter(&counts)) } };
        }
        let n = cm.size();
        // SAFETY: caller's array of comm-size counts.
        let counts = check_counts(unsafe { array(rcounts, n)? })?;
        // SAFETY: caller's buffers for this blocking call.
        unsafe { reduce_scatter_impl(m, sbuf, rbuf, &counts, dt, o, c) }
    });
    ret("MPI_Reduce_scatter", c, r)
});

/// `MPI_Op_create` of either form of user function.
fn op_create(name: &str, func: Option<op::UserFunc>, commute: c_int, out: *mut c_int) -> c_int {
    let r = mpi().and_then(|m| {
        let Some(func) = func else {
            return fail(err::ARG, "the user function is NULL");
        };
        let mut t = m.tables();
        let first = crate::api::consts::op::FIRST_USER as usize;
        if t.ops.len() < first {
            t.ops.resize(first, None);
        }
        let h = match t.ops.iter().skip(first).position(Option::is_none) {
            Some(i) => first + i,
            None => {
                t.ops.push(None);
                t.ops.len() - 1
            }
        };
        t.ops[h] = Some(OpDef::User {
            func,
            commute: commute != 0,
        });
        // SAFETY: caller's out-pointer.
        unsafe { super::put(out, h as c_int) }
    });
    ret(name, NO_OBJECT, r)
}

mpi_fn!(fn MPI_Op_create / PMPI_Op_create(f: Option<op::UserFn>, commute: c_int, out: *mut c_int) {
    op_create("MPI_Op_create", f.map(op::UserFunc::Int), commute, out)
});

mpi_fn!(fn MPI_Op_create_c / PMPI_Op_create_c(f: Option<op::UserFnC>, commute: c_int, out: *mut c_int) {
    op_create("MPI_Op_create_c", f.map(op::UserFunc::Large), commute, out)
});

mpi_fn!(fn MPI_Op_free / PMPI_Op_free(o: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's in/out pointer.
        let h = unsafe { super::get(o)? };
        let mut t = m.tables();
        match t.op(h)? {
            OpDef::Predefined(_) => return fail(err::OP, "predefined operations cannot be freed"),
            OpDef::User { .. } => t.free_or_defer(crate::api::Pin::Op, h),
        }
        // SAFETY: as above.
        unsafe { super::put(o, crate::api::consts::OP_NULL) }
    });
    ret("MPI_Op_free", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Op_commutative / PMPI_Op_commutative(o: c_int, flag: *mut c_int) {
    let r = mpi().and_then(|m| {
        let c = m.tables().op(o)?.commutative();
        // SAFETY: caller's out-pointer.
        unsafe { super::put(flag, c as c_int) }
    });
    ret("MPI_Op_commutative", NO_OBJECT, r)
});
