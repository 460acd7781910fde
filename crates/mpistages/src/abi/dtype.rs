//! Datatype constructors, queries, and MPI_Pack / MPI_Unpack.

use super::{array, get, mpi, mpi_fn, put, ret, typed};
use crate::api::consts::{err, COMM_WORLD, DATATYPE_NULL};
use crate::api::datatype::Datatype;
use crate::api::error::{fail, MpiResult};
use crate::api::Layout;
use crate::api::Mpi;
use std::os::raw::{c_int, c_long, c_longlong, c_void};

type Aint = c_long;

fn build(name: &str, out: *mut c_int, f: impl FnOnce(&Mpi) -> MpiResult<Datatype>) -> c_int {
    let r = mpi().and_then(|m| {
        let t = f(m)?;
        let h = m.tables().add_dtype(t);
        // SAFETY: caller's out-pointer.
        unsafe { put(out, h) }
    });
    ret(name, COMM_WORLD, r)
}

fn old(m: &Mpi, h: c_int) -> MpiResult<std::sync::Arc<Datatype>> {
    m.tables().any_dtype(h)
}

fn widen(v: &[c_int]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

mpi_fn!(fn MPI_Type_contiguous / PMPI_Type_contiguous(n: c_int, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_contiguous", out, |m| Datatype::contiguous(n as i64, &*old(m, oldtype)?))
});

mpi_fn!(fn MPI_Type_vector / PMPI_Type_vector(n: c_int, bl: c_int, stride: c_int, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_vector", out, |m| Datatype::vector(n as i64, bl as i64, stride as i64, false, &*old(m, oldtype)?))
});

mpi_fn!(fn MPI_Type_create_hvector / PMPI_Type_create_hvector(n: c_int, bl: c_int, stride: Aint, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_create_hvector", out, |m| Datatype::vector(n as i64, bl as i64, stride as i64, true, &*old(m, oldtype)?))
});

mpi_fn!(fn MPI_Type_hvector / PMPI_Type_hvector(n: c_int, bl: c_int, stride: Aint, oldtype: c_int, out: *mut c_int) {
    // SAFETY: same contract as the MPI-2 name.
    unsafe { PMPI_Type_create_hvector(n, bl, stride, oldtype, out) }
});

mpi_fn!(fn MPI_Type_indexed / PMPI_Type_indexed(n: c_int, bls: *const c_int, displs: *const c_int, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_indexed", out, |m| {
        let n = super::count(n)?;
        // SAFETY: caller's arrays of n elements.
        let (b, d) = unsafe { (array(bls, n)?, array(displs, n)?) };
        Datatype::indexed(&widen(b), &widen(d), false, &*old(m, oldtype)?)
    })
});

mpi_fn!(fn MPI_Type_create_indexed_block / PMPI_Type_create_indexed_block(n: c_int, bl: c_int, displs: *const c_int, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_create_indexed_block", out, |m| {
        let n = super::count(n)?;
        // SAFETY: caller's array of n elements.
        let d = unsafe { array(displs, n)? };
        Datatype::indexed(&vec![bl as i64; n], &widen(d), false, &*old(m, oldtype)?)
    })
});

mpi_fn!(fn MPI_Type_create_hindexed / PMPI_Type_create_hindexed(n: c_int, bls: *const c_int, displs: *const Aint, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_create_hindexed", out, |m| {
        let n = super::count(n)?;
        // SAFETY: caller's arrays of n elements.
        let (b, d) = unsafe { (array(bls, n)?, array(displs, n)?) };
        let d: Vec<i64> = d.to_vec();
        Datatype::indexed(&widen(b), &d, true, &*old(m, oldtype)?)
    })
});

mpi_fn!(fn MPI_Type_hindexed / PMPI_Type_hindexed(n: c_int, bls: *const c_int, displs: *const Aint, oldtype: c_int, out: *mut c_int) {
    // SAFETY: same contract as the MPI-2 name.
    unsafe { PMPI_Type_create_hindexed(n, bls, displs, oldtype, out) }
});

mpi_fn!(fn MPI_Type_create_struct / PMPI_Type_create_struct(n: c_int, bls: *const c_int, displs: *const Aint, types: *const c_int, out: *mut c_int) {
    build("MPI_Type_create_struct", out, |m| {
        let n = super::count(n)?;
        // SAFETY: caller's arrays of n elements.
        let (b, d, ts) = unsafe { (array(bls, n)?, array(displs, n)?, array(types, n)?) };
        let olds = ts.iter().map(|&h| old(m, h)).collect::<MpiResult<Vec<_>>>()?;
        let refs: Vec<&Datatype> = olds.iter().map(|a| &**a).collect();
        let d: Vec<i64> = d.to_vec();
        Datatype::create_struct(&widen(b), &d, &refs)
    })
});

mpi_fn!(fn MPI_Type_struct / PMPI_Type_struct(n: c_int, bls: *const c_int, displs: *const Aint, types: *const c_int, out: *mut c_int) {
    // SAFETY: same contract as the MPI-2 name.
    unsafe { PMPI_Type_create_struct(n, bls, displs, types, out) }
});

mpi_fn!(fn MPI_Type_create_resized / PMPI_Type_create_resized(oldtype: c_int, lb: Aint, extent: Aint, out: *mut c_int) {
    build("MPI_Type_create_resized", out, |m| Ok(Datatype::resized(&*old(m, oldtype)?, lb as isize, extent as isize)))
});

mpi_fn!(fn MPI_Type_dup / PMPI_Type_dup(oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_dup", out, |m| {
        let mut t = (*old(m, oldtype)?).clone();
        t.predefined = false;
        Ok(t)
    })
});

mpi_fn!(fn MPI_Type_commit / PMPI_Type_commit(h: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's in-pointer.
        let h = unsafe { get(h)? };
        let mut t = m.tables();
        let mut d = (*t.any_dtype(h)?).clone();
        d.committed = true;
        t.types[h as usize] = Some(std::sync::Arc::new(d));
        Ok(())
    });
    ret("MPI_Type_commit", COMM_WORLD, r)
});

mpi_fn!(fn MPI_Type_free / PMPI_Type_free(h: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's in/out pointer.
        let v = unsafe { get(h)? };
        let mut t = m.tables();
        if t.any_dtype(v)?.predefined {
            return fail(err::TYPE, "predefined datatypes cannot be freed");
        }
        // Operations in flight keep their own reference to the type.
        t.types[v as usize] = None;
        // SAFETY: as above.
        unsafe { put(h, DATATYPE_NULL) }
    });
    ret("MPI_Type_free", COMM_WORLD, r)
});

fn query<T>(
    name: &str,
    h: c_int,
    f: impl FnOnce(&Datatype) -> MpiResult<T>,
    out: impl FnOnce(T) -> MpiResult<()>,
) -> c_int {
    let r = mpi().and_then(|m| out(f(&*old(m, h)?)?));
    ret(name, COMM_WORLD, r)
}

mpi_fn!(fn MPI_Type_size / PMPI_Type_size(h: c_int, size: *mut c_int) {
    query("MPI_Type_size", h, |t| Ok(c_int::try_from(t.size).unwrap_or(crate::api::consts::UNDEFINED)),
        // SAFETY: caller's out-pointer.
        |v| unsafe { put(size, v) })
});

mpi_fn!(fn MPI_Type_size_x / PMPI_Type_size_x(h: c_int, size: *mut c_longlong) {
    // SAFETY: caller's out-pointer.
    query("MPI_Type_size_x", h, |t| Ok(t.size as c_longlong), |v| unsafe { put(size, v) })
});

mpi_fn!(fn MPI_Type_get_extent / PMPI_Type_get_extent(h: c_int, lb: *mut Aint, extent: *mut Aint) {
    query("MPI_Type_get_extent", h, |t| Ok((t.lb, t.extent)),
        // SAFETY: caller's out-pointers.
        |(l, e)| unsafe { put(lb, l as Aint).and_then(|_| put(extent, e as Aint)) })
});

mpi_fn!(fn MPI_Type_get_true_extent / PMPI_Type_get_true_extent(h: c_int, lb: *mut Aint, extent: *mut Aint) {
    query("MPI_Type_get_true_extent", h, |t| Ok((t.true_lb, t.true_extent)),
        // SAFETY: caller's out-pointers.
        |(l, e)| unsafe { put(lb, l as Aint).and_then(|_| put(extent, e as Aint)) })
});

mpi_fn!(fn MPI_Type_extent / PMPI_Type_extent(h: c_int, extent: *mut Aint) {
    // SAFETY: caller's out-pointer.
    query("MPI_Type_extent", h, |t| Ok(t.extent), |e| unsafe { put(extent, e as Aint) })
});

mpi_fn!(fn MPI_Get_address / PMPI_Get_address(loc: *const c_void, addr: *mut Aint) {
    // SAFETY: caller's out-pointer.
    ret("MPI_Get_address", COMM_WORLD, unsafe { put(addr, loc as Aint) })
});

mpi_fn!(fn MPI_Address / PMPI_Address(loc: *const c_void, addr: *mut Aint) {
    // SAFETY: caller's out-pointer.
    ret("MPI_Address", COMM_WORLD, unsafe { put(addr, loc as Aint) })
});

mpi_fn!(fn MPI_Pack_size / PMPI_Pack_size(n: c_int, h: c_int, c: c_int, size: *mut c_int) {
    let r = mpi().and_then(|m| {
        m.tables().comm(c)?;
        let t = m.tables().dtype(h)?;
        let bytes = (super::count(n)? as u64) * t.size as u64;
        let v = c_int::try_from(bytes).map_err(|_| crate::api::error::MpiError::new(err::COUNT, "packed size exceeds an int"))?;
        // SAFETY: caller's out-pointer.
        unsafe { put(size, v) }
    });
    ret("MPI_Pack_size", c, r)
});

mpi_fn!(fn MPI_Pack / PMPI_Pack(inbuf: *const c_void, n: c_int, h: c_int, outbuf: *mut c_void, outsize: c_int, pos: *mut c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        m.tables().comm(c)?;
        // SAFETY: caller's buffers, used during this call only.
        let tb = unsafe { typed(m, inbuf, n, h)? };
        // SAFETY: caller's pointer, checked for NULL by get/put.
        let p = unsafe { get(pos)? };
        let data = tb.pack();
        if p < 0 || outsize < 0 || p as usize + data.len() > outsize as usize {
            return fail(err::TRUNCATE, format!("{} packed bytes do not fit at position {p} of a {outsize}-byte buffer", data.len()));
        }
        // SAFETY: bounds checked against the caller's stated outsize.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), (outbuf as *mut u8).add(p as usize), data.len());
            put(pos, p + data.len() as c_int)
        }
    });
    ret("MPI_Pack", c, r)
});

mpi_fn!(fn MPI_Unpack / PMPI_Unpack(inbuf: *const c_void, insize: c_int, pos: *mut c_int, outbuf: *mut c_void, n: c_int, h: c_int, c: c_int) {
    let r = mpi().and_then(|m| {
        m.tables().comm(c)?;
        // SAFETY: caller's buffers, used during this call only.
        let tb = unsafe { typed(m, outbuf, n, h)? };
        // SAFETY: caller's pointer, checked for NULL by get/put.
        let p = unsafe { get(pos)? };
        let need = tb.bytes();
        if p < 0 || insize < 0 || p as usize + need > insize as usize {
            return fail(err::TRUNCATE, format!("unpacking {need} bytes at position {p} runs past the {insize}-byte buffer"));
        }
        // SAFETY: bounds checked against the caller's stated insize.
        let src = unsafe { std::slice::from_raw_parts((inbuf as *const u8).add(p as usize), need) };
        tb.unpack(src);
        // SAFETY: caller's in/out pointer.
        unsafe { put(pos, p + need as c_int) }
    });
    ret("MPI_Unpack", c, r)
});
