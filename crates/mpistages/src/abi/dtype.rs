//! Datatype constructors, queries, and MPI_Pack / MPI_Unpack.

use super::{array, get, mpi, mpi_fn, put, ret, typed, NO_OBJECT};
use crate::api::attr::Kind;
use crate::api::consts::{err, DATATYPE_NULL};
use crate::api::datatype::{combiner as C, Datatype};
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
    if r.is_err() && !out.is_null() {
        // SAFETY: caller's out-pointer: no datatype was made.
        unsafe { out.write(DATATYPE_NULL) };
    }
    ret(name, NO_OBJECT, r)
}

fn old(m: &Mpi, h: c_int) -> MpiResult<std::sync::Arc<Datatype>> {
    m.tables().any_dtype(h)
}

fn widen(v: &[c_int]) -> Vec<i64> {
    v.iter().map(|&x| x as i64).collect()
}

mpi_fn!(fn MPI_Type_contiguous / PMPI_Type_contiguous(n: c_int, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_contiguous", out, |m| {
        let o = old(m, oldtype)?;
        Ok(Datatype::contiguous(n as i64, &o)?.made_by(C::CONTIGUOUS, vec![n], vec![], vec![(oldtype, o)]))
    })
});

mpi_fn!(fn MPI_Type_vector / PMPI_Type_vector(n: c_int, bl: c_int, stride: c_int, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_vector", out, |m| {
        let o = old(m, oldtype)?;
        Ok(Datatype::vector(n as i64, bl as i64, stride as i64, false, &o)?
            .made_by(C::VECTOR, vec![n, bl, stride], vec![], vec![(oldtype, o)]))
    })
});

mpi_fn!(fn MPI_Type_create_hvector / PMPI_Type_create_hvector(n: c_int, bl: c_int, stride: Aint, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_create_hvector", out, |m| {
        let o = old(m, oldtype)?;
        Ok(Datatype::vector(n as i64, bl as i64, stride as i64, true, &o)?
            .made_by(C::HVECTOR, vec![n, bl], vec![stride as i64], vec![(oldtype, o)]))
    })
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
        let o = old(m, oldtype)?;
        let ints = [&[n as c_int][..], b, d].concat();
        Ok(Datatype::indexed(&widen(b), &widen(d), false, &o)?.made_by(C::INDEXED, ints, vec![], vec![(oldtype, o)]))
    })
});

mpi_fn!(fn MPI_Type_create_indexed_block / PMPI_Type_create_indexed_block(n: c_int, bl: c_int, displs: *const c_int, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_create_indexed_block", out, |m| {
        let n = super::count(n)?;
        // SAFETY: caller's array of n elements.
        let d = unsafe { array(displs, n)? };
        let o = old(m, oldtype)?;
        let ints = [&[n as c_int, bl][..], d].concat();
        Ok(Datatype::indexed(&vec![bl as i64; n], &widen(d), false, &o)?
            .made_by(C::INDEXED_BLOCK, ints, vec![], vec![(oldtype, o)]))
    })
});

mpi_fn!(fn MPI_Type_create_hindexed / PMPI_Type_create_hindexed(n: c_int, bls: *const c_int, displs: *const Aint, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_create_hindexed", out, |m| {
        let n = super::count(n)?;
        // SAFETY: caller's arrays of n elements.
        let (b, d) = unsafe { (array(bls, n)?, array(displs, n)?) };
        let d: Vec<i64> = d.to_vec();
        let o = old(m, oldtype)?;
        let ints = [&[n as c_int][..], b].concat();
        Ok(Datatype::indexed(&widen(b), &d, true, &o)?.made_by(C::HINDEXED, ints, d, vec![(oldtype, o)]))
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
        let ints = [&[n as c_int][..], b].concat();
        let kept = ts.iter().copied().zip(olds.iter().cloned()).collect();
        Ok(Datatype::create_struct(&widen(b), &d, &refs)?.made_by(C::STRUCT, ints, d, kept))
    })
});

mpi_fn!(fn MPI_Type_struct / PMPI_Type_struct(n: c_int, bls: *const c_int, displs: *const Aint, types: *const c_int, out: *mut c_int) {
    // SAFETY: same contract as the MPI-2 name.
    unsafe { PMPI_Type_create_struct(n, bls, displs, types, out) }
});

mpi_fn!(fn MPI_Type_create_resized / PMPI_Type_create_resized(oldtype: c_int, lb: Aint, extent: Aint, out: *mut c_int) {
    build("MPI_Type_create_resized", out, |m| {
        let o = old(m, oldtype)?;
        Ok(Datatype::resized(&o, lb as isize, extent as isize)
            .made_by(C::RESIZED, vec![], vec![lb as i64, extent as i64], vec![(oldtype, o)]))
    })
});

mpi_fn!(fn MPI_Type_dup / PMPI_Type_dup(oldtype: c_int, out: *mut c_int) {
    let rc = build("MPI_Type_dup", out, |m| {
        let o = old(m, oldtype)?;
        let mut t = (*o).clone();
        t.predefined = false;
        Ok(t.made_by(C::DUP, vec![], vec![], vec![(oldtype, o)]))
    });
    if rc != err::SUCCESS {
        return rc;
    }
    let r = mpi().and_then(|m| {
        // SAFETY: `out` was written by build above.
        let h = unsafe { get(out)? };
        super::attr::copy_all(m, Kind::Type, oldtype, h).inspect_err(|_| {
            m.tables().types[h as usize] = None;
            // SAFETY: as above.
            unsafe { out.write(DATATYPE_NULL) };
        })
    });
    ret("MPI_Type_dup", NO_OBJECT, r)
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
    ret("MPI_Type_commit", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Type_free / PMPI_Type_free(h: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's in/out pointer.
        let v = unsafe { get(h)? };
        if m.tables().any_dtype(v)?.predefined {
            return fail(err::TYPE, "predefined datatypes cannot be freed");
        }
        super::attr::delete_all(m, Kind::Type, v)?;
        let mut t = m.tables();
        // Operations in flight keep their own reference to the type; a
        // pending non-blocking collective looks it up when it runs.
        t.free_or_defer(crate::api::Pin::Type, v);
        // SAFETY: as above.
        unsafe { put(h, DATATYPE_NULL) }
    });
    ret("MPI_Type_free", NO_OBJECT, r)
});

fn query<T>(
    name: &str,
    h: c_int,
    f: impl FnOnce(&Datatype) -> MpiResult<T>,
    out: impl FnOnce(T) -> MpiResult<()>,
) -> c_int {
    let r = mpi().and_then(|m| out(f(&*old(m, h)?)?));
    ret(name, NO_OBJECT, r)
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
    ret("MPI_Get_address", NO_OBJECT, unsafe { put(addr, loc as Aint) })
});

mpi_fn!(fn MPI_Address / PMPI_Address(loc: *const c_void, addr: *mut Aint) {
    // SAFETY: caller's out-pointer.
    ret("MPI_Address", NO_OBJECT, unsafe { put(addr, loc as Aint) })
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

mpi_fn!(fn MPI_Type_get_envelope / PMPI_Type_get_envelope(h: c_int, ni: *mut c_int, na: *mut c_int, nt: *mut c_int, combiner: *mut c_int) {
    let r = mpi().and_then(|m| {
        let t = old(m, h)?;
        let (c, i, a, ty) = match (&t.envelope, t.predefined) {
            (Some(e), _) => (e.combiner, e.ints.len(), e.aints.len(), e.types.len()),
            (None, true) => (C::NAMED, 0, 0, 0),
            // Restored from a checkpoint: its constructor is not kept.
            (None, false) => (C::CONTIGUOUS, 1, 0, 1),
        };
        // SAFETY: caller's out-pointers.
        unsafe {
            put(ni, i as c_int)?;
            put(na, a as c_int)?;
            put(nt, ty as c_int)?;
            put(combiner, c)
        }
    });
    ret("MPI_Type_get_envelope", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Type_get_contents / PMPI_Type_get_contents(h: c_int, maxi: c_int, maxa: c_int, maxt: c_int, ints: *mut c_int, aints: *mut Aint, types: *mut c_int) {
    let r = mpi().and_then(|m| {
        let t = old(m, h)?;
        // The Fortran 90 types are predefined and have contents.
        if t.predefined && t.envelope.is_none() {
            return fail(err::TYPE, "a predefined datatype has no contents");
        }
        let e = match &t.envelope {
            Some(e) => (**e).clone(),
            None => crate::api::datatype::Envelope {
                combiner: C::CONTIGUOUS,
                ints: vec![t.size as c_int],
                aints: vec![],
                larges: vec![],
                types: vec![(crate::api::consts::dt::BYTE, old(m, crate::api::consts::dt::BYTE)?)],
                as_large: None,
            },
        };
        if (maxi as usize) < e.ints.len() || (maxa as usize) < e.aints.len() || (maxt as usize) < e.types.len() {
            return fail(err::ARG, "the arrays are smaller than MPI_Type_get_envelope said");
        }
        // SAFETY: caller's arrays of at least the envelope's sizes.
        unsafe {
            super::array_mut(ints, e.ints.len())?.copy_from_slice(&e.ints);
            for (o, &v) in super::array_mut(aints, e.aints.len())?.iter_mut().zip(&e.aints) {
                *o = v as Aint;
            }
            types_out(m, &e.types, super::array_mut(types, e.types.len())?);
        }
        Ok(())
    });
    ret("MPI_Type_get_contents", NO_OBJECT, r)
});

/// An envelope's datatypes as handles: derived ones come back as new
/// handles the program frees.
pub(super) fn types_out(m: &Mpi, types: &[(c_int, std::sync::Arc<Datatype>)], out: &mut [c_int]) {
    for (o, (h, ty)) in out.iter_mut().zip(types) {
        *o = if ty.predefined {
            *h
        } else {
            m.tables().add_dtype((**ty).clone())
        };
    }
}

/// (combiner, precision, range): the question an f90 type answers.
type F90Key = (c_int, c_int, c_int);

/// The parameterized Fortran 90 types (`MPI_Type_create_f90_*`) made so
/// far, by combiner and arguments: each is made once and is predefined
/// (it cannot be freed), its envelope saying how it was asked for.
static F90: std::sync::Mutex<Vec<(F90Key, c_int)>> = std::sync::Mutex::new(Vec::new());

/// The handle of the Fortran 90 type `combiner` with precision `p` and
/// range `r` (MPI_UNDEFINED: not asked) of the predefined type `base`.
fn f90(m: &Mpi, combiner: c_int, p: c_int, r: c_int, base: Option<c_int>) -> MpiResult<c_int> {
    let undefined = crate::api::consts::UNDEFINED;
    let Some(base) = base else {
        let asked = match (p, r) {
            (p, r) if p != undefined && r != undefined => format!("precision {p} and range {r}"),
            (p, _) if p != undefined => format!("precision {p}"),
            (_, r) => format!("range {r}"),
        };
        return fail(err::ARG, format!("no Fortran type of {asked} here"));
    };
    let key = (combiner, p, r);
    let mut made = F90.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, h)) = made.iter().find(|(k, _)| *k == key) {
        return Ok(h);
    }
    let ints = if combiner == C::F90_INTEGER {
        vec![r]
    } else {
        vec![p, r]
    };
    let mut t = (*old(m, base)?)
        .clone()
        .made_by(combiner, ints, vec![], vec![]);
    t.predefined = true;
    let h = m.tables().add_dtype(t);
    made.push((key, h));
    Ok(h)
}

/// The smallest of `kinds` (precision, range, handle) that holds `p` and `r`.
fn smallest(kinds: &[(c_int, c_int, c_int)], p: c_int, r: c_int) -> Option<c_int> {
    let undefined = crate::api::consts::UNDEFINED;
    let fits = |want: c_int, have: c_int| want == undefined || want <= have;
    kinds
        .iter()
        .find(|&&(kp, kr, _)| fits(p, kp) && fits(r, kr))
        .map(|&(_, _, h)| h)
}

mpi_fn!(fn MPI_Type_create_f90_integer / PMPI_Type_create_f90_integer(r: c_int, out: *mut c_int) {
    use crate::api::consts::dt;
    // Decimal digits each integer kind holds.
    let kinds = [(0, 2, dt::INTEGER1), (0, 4, dt::INTEGER2), (0, 9, dt::INTEGER4), (0, 18, dt::INTEGER8)];
    let undefined = crate::api::consts::UNDEFINED;
    let res = mpi().and_then(|m| f90(m, C::F90_INTEGER, undefined, r, smallest(&kinds, undefined, r)));
    // SAFETY: caller's out-pointer.
    ret("MPI_Type_create_f90_integer", NO_OBJECT, res.and_then(|h| unsafe { put(out, h) }))
});

mpi_fn!(fn MPI_Type_create_f90_real / PMPI_Type_create_f90_real(p: c_int, r: c_int, out: *mut c_int) {
    use crate::api::consts::dt;
    let kinds = [(6, 37, dt::REAL4), (15, 307, dt::REAL8)];
    let res = mpi().and_then(|m| f90(m, C::F90_REAL, p, r, smallest(&kinds, p, r)));
    // SAFETY: caller's out-pointer.
    ret("MPI_Type_create_f90_real", NO_OBJECT, res.and_then(|h| unsafe { put(out, h) }))
});

mpi_fn!(fn MPI_Type_create_f90_complex / PMPI_Type_create_f90_complex(p: c_int, r: c_int, out: *mut c_int) {
    use crate::api::consts::dt;
    let kinds = [(6, 37, dt::COMPLEX8), (15, 307, dt::COMPLEX16)];
    let res = mpi().and_then(|m| f90(m, C::F90_COMPLEX, p, r, smallest(&kinds, p, r)));
    // SAFETY: caller's out-pointer.
    ret("MPI_Type_create_f90_complex", NO_OBJECT, res.and_then(|h| unsafe { put(out, h) }))
});

mpi_fn!(fn MPI_Type_set_name / PMPI_Type_set_name(h: c_int, name: *const std::os::raw::c_char) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's NUL-terminated string.
        let n = super::comm::truncate_name(unsafe { super::cstr(name)? });
        let mut t = m.tables();
        let mut ty = (*t.any_dtype(h)?).clone();
        ty.name = n;
        ty.name_given = true;
        t.types[h as usize] = Some(std::sync::Arc::new(ty));
        Ok(())
    });
    ret("MPI_Type_set_name", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Type_get_name / PMPI_Type_get_name(h: c_int, name: *mut std::os::raw::c_char, len: *mut c_int) {
    let r = mpi().and_then(|m| {
        let t = old(m, h)?;
        // Derived types have no name until the program gives one.
        let n = if t.predefined || t.name_given { t.name.clone() } else { String::new() };
        // SAFETY: the standard sizes `name` as MPI_MAX_OBJECT_NAME.
        unsafe { super::put_str(&n, name, super::comm::MAX_OBJECT_NAME, len) }
    });
    ret("MPI_Type_get_name", NO_OBJECT, r)
});

fn order(o: c_int) -> MpiResult<bool> {
    match o {
        crate::api::datatype::ORDER_C => Ok(false),
        crate::api::datatype::ORDER_FORTRAN => Ok(true),
        _ => fail(
            err::ARG,
            format!("order {o} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"),
        ),
    }
}

mpi_fn!(fn MPI_Type_create_subarray / PMPI_Type_create_subarray(ndims: c_int, sizes: *const c_int, subsizes: *const c_int, starts: *const c_int, o: c_int, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_create_subarray", out, |m| {
        let n = super::count(ndims)?;
        // SAFETY: caller's arrays of ndims elements.
        let (a, b, c) = unsafe { (array(sizes, n)?, array(subsizes, n)?, array(starts, n)?) };
        let old_t = old(m, oldtype)?;
        let t = Datatype::subarray(&widen(a), &widen(b), &widen(c), order(o)?, &old_t)?;
        let ints = [&[ndims][..], a, b, c, &[o]].concat();
        Ok(t.made_by(C::SUBARRAY, ints, vec![], vec![(oldtype, old_t)]))
    })
});

mpi_fn!(fn MPI_Type_create_darray / PMPI_Type_create_darray(size: c_int, rank: c_int, ndims: c_int, gsizes: *const c_int, distribs: *const c_int, dargs: *const c_int, psizes: *const c_int, o: c_int, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_create_darray", out, |m| {
        let n = super::count(ndims)?;
        // SAFETY: caller's arrays of ndims elements.
        let (g, d, a, p) = unsafe { (array(gsizes, n)?, array(distribs, n)?, array(dargs, n)?, array(psizes, n)?) };
        let old_t = old(m, oldtype)?;
        let t = Datatype::darray(size as i64, rank as i64, &widen(g), d, &widen(a), &widen(p), order(o)?, &old_t)?;
        let ints = [&[size, rank, ndims][..], g, d, a, p, &[o]].concat();
        Ok(t.made_by(C::DARRAY, ints, vec![], vec![(oldtype, old_t)]))
    })
});

mpi_fn!(fn MPI_Type_create_hindexed_block / PMPI_Type_create_hindexed_block(n: c_int, bl: c_int, displs: *const Aint, oldtype: c_int, out: *mut c_int) {
    build("MPI_Type_create_hindexed_block", out, |m| {
        let k = super::count(n)?;
        // SAFETY: caller's array of n elements.
        let d: Vec<i64> = unsafe { array(displs, k)? }.to_vec();
        let old_t = old(m, oldtype)?;
        let t = Datatype::indexed(&vec![bl as i64; k], &d, true, &old_t)?;
        Ok(t.made_by(C::HINDEXED_BLOCK, vec![n, bl], d, vec![(oldtype, old_t)]))
    })
});

mpi_fn!(fn MPI_Type_match_size / PMPI_Type_match_size(class: c_int, size: c_int, out: *mut c_int) {
    // SAFETY: caller's out-pointer.
    let r = Datatype::match_size(class, size).and_then(|h| unsafe { put(out, h) });
    ret("MPI_Type_match_size", NO_OBJECT, r)
});

/// The only data representation `MPI_Pack_external` knows.
///
/// # Safety
/// `rep` is NULL or a NUL-terminated string.
unsafe fn external32(rep: *const std::os::raw::c_char) -> MpiResult<()> {
    // SAFETY: forwarded.
    match unsafe { super::cstr(rep)? }.as_str() {
        "external32" => Ok(()),
        other => fail(
            err::ARG,
            format!("data representation {other:?} is not external32"),
        ),
    }
}

mpi_fn!(fn MPI_Pack_external_size / PMPI_Pack_external_size(rep: *const std::os::raw::c_char, n: c_int, h: c_int, size: *mut Aint) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's string and out-pointer.
        unsafe {
            external32(rep)?;
            let t = m.tables().dtype(h)?;
            put(size, (super::count(n)? * t.size) as Aint)
        }
    });
    ret("MPI_Pack_external_size", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Pack_external / PMPI_Pack_external(rep: *const std::os::raw::c_char, inbuf: *const c_void, n: c_int, h: c_int, outbuf: *mut c_void, outsize: Aint, pos: *mut Aint) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's string, buffers (used during this call) and position.
        unsafe {
            external32(rep)?;
            let tb = typed(m, inbuf, n, h)?;
            let p = get(pos)?;
            let mut data = tb.pack();
            tb.dtype.swap_external32(tb.count, &mut data);
            if p < 0 || outsize < 0 || p as usize + data.len() > outsize as usize {
                return fail(err::TRUNCATE, format!("{} packed bytes do not fit at position {p} of a {outsize}-byte buffer", data.len()));
            }
            std::ptr::copy_nonoverlapping(data.as_ptr(), (outbuf as *mut u8).add(p as usize), data.len());
            put(pos, p + data.len() as Aint)
        }
    });
    ret("MPI_Pack_external", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Unpack_external / PMPI_Unpack_external(rep: *const std::os::raw::c_char, inbuf: *const c_void, insize: Aint, pos: *mut Aint, outbuf: *mut c_void, n: c_int, h: c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's string, buffers (used during this call) and position.
        unsafe {
            external32(rep)?;
            let tb = typed(m, outbuf, n, h)?;
            let p = get(pos)?;
            let need = tb.bytes();
            if p < 0 || insize < 0 || p as usize + need > insize as usize {
                return fail(err::TRUNCATE, format!("unpacking {need} bytes at position {p} runs past the {insize}-byte buffer"));
            }
            let mut data = std::slice::from_raw_parts((inbuf as *const u8).add(p as usize), need).to_vec();
            tb.dtype.swap_external32(tb.count, &mut data);
            tb.unpack(&data);
            put(pos, p + need as Aint)
        }
    });
    ret("MPI_Unpack_external", NO_OBJECT, r)
});
