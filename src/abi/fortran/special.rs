//! The Fortran bindings that are more than a forward (`custom` in the
//! table): no `argc`/`argv`, strings, 1-based indices, attribute values
//! by value, the deprecated MPI-1 calls whose Fortran addresses are
//! `INTEGER`, procedures, and the MPIX calls with Fortran-only shapes.
//! Each body is written once and exported as `mpi_x_` (calling `MPI_X`)
//! and `pmpi_x_` (calling `PMPI_X`).

use super::{buf, set, status, statuses, str_in, str_out};
use crate::abi::coll::*;
use crate::abi::comm::*;
use crate::abi::dtype::*;
use crate::abi::env::*;
use crate::abi::mpix::*;
use crate::abi::p2p::*;
use crate::abi::request::*;
use crate::abi::{mpi, ret, CStatus};
use crate::api::consts::{err, COMM_WORLD, MAX_ERROR_STRING, MAX_PROCESSOR_NAME, UNDEFINED};
use crate::api::error::{fail, MpiResult};
use crate::api::{mpix, op::UserFn, protect};
use crate::stages::{FortranHandlerFn, Handler};
use std::os::raw::{c_char, c_int, c_long, c_void};

/// Exports `$body` (whose first argument says "profiling name") as the
/// Fortran symbols `$name` and `$pname`.
macro_rules! twin {
    ($name:ident / $pname:ident => $body:ident ( $($a:ident : $t:ty),* )) => {
        /// # Safety
        /// A Fortran entry point: every argument is a reference the MPI
        /// binding makes valid.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) {
            // SAFETY: the caller's contract, forwarded.
            unsafe { $body(false, $($a),*) }
        }
        /// # Safety
        /// As for the `MPI_` binding.
        #[no_mangle]
        pub unsafe extern "C" fn $pname($($a: $t),*) {
            // SAFETY: the caller's contract, forwarded.
            unsafe { $body(true, $($a),*) }
        }
    };
}

/// `PMPI_x` when `$p`, else `MPI_x`.
macro_rules! pick {
    ($p:expr, $c:ident) => {
        paste::paste! { if $p { [<P $c>] } else { $c } }
    };
}

twin!(mpi_init_ / pmpi_init_ => init(ierror: *mut c_int));
unsafe fn init(p: bool, ierror: *mut c_int) {
    // SAFETY: MPI_Init accepts NULL argc/argv; ierror is the caller's.
    unsafe {
        set(
            ierror,
            pick!(p, MPI_Init)(std::ptr::null_mut(), std::ptr::null_mut()),
        )
    }
}

twin!(mpi_init_thread_ / pmpi_init_thread_ => init_thread(required: *const c_int, provided: *mut c_int, ierror: *mut c_int));
unsafe fn init_thread(p: bool, required: *const c_int, provided: *mut c_int, ierror: *mut c_int) {
    let f = pick!(p, MPI_Init_thread);
    // SAFETY: as in init; `required` is a readable INTEGER.
    unsafe {
        set(
            ierror,
            f(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                *required,
                provided,
            ),
        )
    }
}

/// Calls a C function that fills a string of at most `cap` bytes and its
/// length, then stores it blank padded in the Fortran string.
///
/// # Safety
/// `dst` has `dst_len` writable bytes; `resultlen` and `ierror` are
/// writable INTEGERs.
unsafe fn string_out(
    cap: usize,
    f: impl FnOnce(*mut c_char, *mut c_int) -> c_int,
    dst: *mut c_char,
    resultlen: *mut c_int,
    ierror: *mut c_int,
    dst_len: usize,
) {
    let mut tmp = vec![0 as c_char; cap + 1];
    let mut n: c_int = 0;
    let rc = f(tmp.as_mut_ptr(), &mut n);
    if rc == err::SUCCESS {
        let n = (n.max(0) as usize).min(cap);
        let bytes: Vec<u8> = tmp[..n].iter().map(|&c| c as u8).collect();
        // SAFETY: the caller's contract.
        unsafe {
            let stored = str_out(&bytes, dst, dst_len);
            if !resultlen.is_null() {
                *resultlen = stored as c_int;
            }
        }
    }
    // SAFETY: the caller's contract.
    unsafe { set(ierror, rc) }
}

twin!(mpi_get_processor_name_ / pmpi_get_processor_name_ => processor_name(name: *mut c_char, resultlen: *mut c_int, ierror: *mut c_int, name_len: usize));
unsafe fn processor_name(
    p: bool,
    name: *mut c_char,
    len: *mut c_int,
    ierror: *mut c_int,
    name_len: usize,
) {
    let f = pick!(p, MPI_Get_processor_name);
    // SAFETY: the temporary holds MPI_MAX_PROCESSOR_NAME bytes; the rest is
    // the caller's contract.
    unsafe {
        string_out(
            MAX_PROCESSOR_NAME as usize,
            |s, n| f(s, n),
            name,
            len,
            ierror,
            name_len,
        )
    }
}

twin!(mpi_get_library_version_ / pmpi_get_library_version_ => library_version(version: *mut c_char, resultlen: *mut c_int, ierror: *mut c_int, version_len: usize));
unsafe fn library_version(
    p: bool,
    v: *mut c_char,
    len: *mut c_int,
    ierror: *mut c_int,
    v_len: usize,
) {
    let f = pick!(p, MPI_Get_library_version);
    let cap = 64; // MPI_MAX_LIBRARY_VERSION_STRING
                  // SAFETY: as in processor_name.
    unsafe { string_out(cap, |s, n| f(s, n), v, len, ierror, v_len) }
}

twin!(mpi_error_string_ / pmpi_error_string_ => error_string(errorcode: *const c_int, string: *mut c_char, resultlen: *mut c_int, ierror: *mut c_int, string_len: usize));
unsafe fn error_string(
    p: bool,
    code: *const c_int,
    s: *mut c_char,
    len: *mut c_int,
    ierror: *mut c_int,
    s_len: usize,
) {
    let f = pick!(p, MPI_Error_string);
    // SAFETY: `code` is a readable INTEGER; as in processor_name.
    unsafe {
        let code = *code;
        string_out(
            MAX_ERROR_STRING as usize,
            |t, n| f(code, t, n),
            s,
            len,
            ierror,
            s_len,
        )
    }
}

/// Fortran indices are 1-based; MPI_UNDEFINED stays.
fn one_based(i: c_int) -> c_int {
    if i >= 0 {
        i + 1
    } else {
        i
    }
}

twin!(mpi_waitany_ / pmpi_waitany_ => waitany(count: *const c_int, reqs: *mut c_int, index: *mut c_int, st: *mut c_int, ierror: *mut c_int));
unsafe fn waitany(
    p: bool,
    count: *const c_int,
    reqs: *mut c_int,
    index: *mut c_int,
    st: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: references from the caller; the C function checks its input.
    unsafe {
        let rc = pick!(p, MPI_Waitany)(*count, reqs, index, status(st));
        if !index.is_null() {
            *index = one_based(*index);
        }
        set(ierror, rc)
    }
}

twin!(mpi_testany_ / pmpi_testany_ => testany(count: *const c_int, reqs: *mut c_int, index: *mut c_int, flag: *mut c_int, st: *mut c_int, ierror: *mut c_int));
unsafe fn testany(
    p: bool,
    count: *const c_int,
    reqs: *mut c_int,
    index: *mut c_int,
    flag: *mut c_int,
    st: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: as in waitany.
    unsafe {
        let rc = pick!(p, MPI_Testany)(*count, reqs, index, flag, status(st));
        if !index.is_null() {
            *index = one_based(*index);
        }
        set(ierror, rc)
    }
}

/// Waitsome and Testsome: the C call, then the indices made 1-based.
///
/// # Safety
/// References from the caller: `indices` has room for `outcount` entries.
unsafe fn some(
    f: unsafe extern "C" fn(c_int, *mut c_int, *mut c_int, *mut c_int, *mut CStatus) -> c_int,
    incount: *const c_int,
    reqs: *mut c_int,
    outcount: *mut c_int,
    indices: *mut c_int,
    sts: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: the C function wrote `outcount` indices (or UNDEFINED).
    unsafe {
        let rc = f(*incount, reqs, outcount, indices, statuses(sts));
        if !outcount.is_null() && *outcount != UNDEFINED && !indices.is_null() {
            for i in 0..(*outcount).max(0) as usize {
                *indices.add(i) = one_based(*indices.add(i));
            }
        }
        set(ierror, rc)
    }
}

twin!(mpi_waitsome_ / pmpi_waitsome_ => waitsome(incount: *const c_int, reqs: *mut c_int, outcount: *mut c_int, indices: *mut c_int, sts: *mut c_int, ierror: *mut c_int));
unsafe fn waitsome(
    p: bool,
    n: *const c_int,
    r: *mut c_int,
    o: *mut c_int,
    i: *mut c_int,
    s: *mut c_int,
    e: *mut c_int,
) {
    // SAFETY: the caller's contract, forwarded.
    unsafe { some(pick!(p, MPI_Waitsome), n, r, o, i, s, e) }
}

twin!(mpi_testsome_ / pmpi_testsome_ => testsome(incount: *const c_int, reqs: *mut c_int, outcount: *mut c_int, indices: *mut c_int, sts: *mut c_int, ierror: *mut c_int));
unsafe fn testsome(
    p: bool,
    n: *const c_int,
    r: *mut c_int,
    o: *mut c_int,
    i: *mut c_int,
    s: *mut c_int,
    e: *mut c_int,
) {
    // SAFETY: the caller's contract, forwarded.
    unsafe { some(pick!(p, MPI_Testsome), n, r, o, i, s, e) }
}

twin!(mpi_buffer_detach_ / pmpi_buffer_detach_ => buffer_detach(buffer_addr: *mut c_void, size: *mut c_int, ierror: *mut c_int));
unsafe fn buffer_detach(p: bool, _addr: *mut c_void, size: *mut c_int, ierror: *mut c_int) {
    // Fortran cannot use the address C returns; it is dropped.
    let mut addr: *mut c_void = std::ptr::null_mut();
    // SAFETY: `addr` is the `void **` C expects; `size` is the caller's.
    unsafe {
        set(
            ierror,
            pick!(p, MPI_Buffer_detach)(&mut addr as *mut _ as *mut c_void, size),
        )
    }
}

/// An attribute as Fortran wants it: the value, not C's pointer to it.
///
/// # Safety
/// References from the caller.
unsafe fn attribute(
    p: bool,
    comm: *const c_int,
    key: *const c_int,
    flag: *mut c_int,
) -> (c_int, Option<i64>) {
    let mut ptr: *const c_int = std::ptr::null();
    // SAFETY: `ptr` is the `void **` C writes the attribute's address to.
    unsafe {
        let rc = pick!(p, MPI_Comm_get_attr)(*comm, *key, &mut ptr as *mut _ as *mut c_void, flag);
        let v = (rc == err::SUCCESS && !flag.is_null() && *flag != 0 && !ptr.is_null())
            .then(|| *ptr as i64);
        (rc, v)
    }
}

twin!(mpi_comm_get_attr_ / pmpi_comm_get_attr_ => comm_get_attr(comm: *const c_int, key: *const c_int, value: *mut i64, flag: *mut c_int, ierror: *mut c_int));
unsafe fn comm_get_attr(
    p: bool,
    comm: *const c_int,
    key: *const c_int,
    value: *mut i64,
    flag: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: references from the caller.
    unsafe {
        let (rc, v) = attribute(p, comm, key, flag);
        if let Some(v) = v {
            *value = v;
        }
        set(ierror, rc)
    }
}

twin!(mpi_attr_get_ / pmpi_attr_get_ => attr_get(comm: *const c_int, key: *const c_int, value: *mut c_int, flag: *mut c_int, ierror: *mut c_int));
unsafe fn attr_get(
    p: bool,
    comm: *const c_int,
    key: *const c_int,
    value: *mut c_int,
    flag: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: references from the caller; every predefined attribute is an int.
    unsafe {
        let (rc, v) = attribute(p, comm, key, flag);
        if let Some(v) = v {
            *value = v as c_int;
        }
        set(ierror, rc)
    }
}

twin!(mpi_op_create_ / pmpi_op_create_ => op_create(user_fn: Option<UserFn>, commute: *const c_int, op: *mut c_int, ierror: *mut c_int));
unsafe fn op_create(
    p: bool,
    f: Option<UserFn>,
    commute: *const c_int,
    op: *mut c_int,
    ierror: *mut c_int,
) {
    // A Fortran `SUBROUTINE F(INVEC, INOUTVEC, LEN, DATATYPE)` takes all
    // four by reference, exactly as the C user function does.
    // SAFETY: references from the caller.
    unsafe {
        set(
            ierror,
            pick!(p, MPI_Op_create)(f, (*commute != 0) as c_int, op),
        )
    }
}

/// INTEGER displacements of the MPI-1 calls, widened to addresses.
///
/// # Safety
/// `d` holds `n` INTEGERs when `n` > 0.
unsafe fn widen(n: c_int, d: *const c_int) -> Vec<c_long> {
    if n <= 0 || d.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(d, n as usize) }
        .iter()
        .map(|&x| x as c_long)
        .collect()
}

twin!(mpi_type_hvector_ / pmpi_type_hvector_ => type_hvector(count: *const c_int, bl: *const c_int, stride: *const c_int, old: *const c_int, new: *mut c_int, ierror: *mut c_int));
unsafe fn type_hvector(
    p: bool,
    n: *const c_int,
    bl: *const c_int,
    stride: *const c_int,
    old: *const c_int,
    new: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: references from the caller.
    unsafe {
        set(
            ierror,
            pick!(p, MPI_Type_hvector)(*n, *bl, *stride as c_long, *old, new),
        )
    }
}

twin!(mpi_type_hindexed_ / pmpi_type_hindexed_ => type_hindexed(count: *const c_int, bls: *const c_int, displs: *const c_int, old: *const c_int, new: *mut c_int, ierror: *mut c_int));
unsafe fn type_hindexed(
    p: bool,
    n: *const c_int,
    bls: *const c_int,
    d: *const c_int,
    old: *const c_int,
    new: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: references from the caller; `d` has `n` entries.
    unsafe {
        let d = widen(*n, d);
        set(
            ierror,
            pick!(p, MPI_Type_hindexed)(*n, bls, d.as_ptr(), *old, new),
        )
    }
}

twin!(mpi_type_struct_ / pmpi_type_struct_ => type_struct(count: *const c_int, bls: *const c_int, displs: *const c_int, types: *const c_int, new: *mut c_int, ierror: *mut c_int));
unsafe fn type_struct(
    p: bool,
    n: *const c_int,
    bls: *const c_int,
    d: *const c_int,
    types: *const c_int,
    new: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: as in type_hindexed.
    unsafe {
        let d = widen(*n, d);
        set(
            ierror,
            pick!(p, MPI_Type_struct)(*n, bls, d.as_ptr(), types, new),
        )
    }
}

/// Stores an address-sized value in an INTEGER, or fails (never cuts it).
///
/// # Safety
/// `out` and `ierror` are writable INTEGERs.
unsafe fn narrow(name: &str, rc: c_int, v: c_long, out: *mut c_int, ierror: *mut c_int) {
    let rc = if rc != err::SUCCESS {
        rc
    } else if let Ok(x) = c_int::try_from(v) {
        // SAFETY: the caller's contract.
        unsafe { *out = x };
        rc
    } else {
        let e = fail::<()>(
            err::ARG,
            format!(
                "{v} does not fit in a default INTEGER; use the MPI_ADDRESS_KIND form of this call"
            ),
        );
        ret(name, COMM_WORLD, e)
    };
    // SAFETY: the caller's contract.
    unsafe { set(ierror, rc) }
}

twin!(mpi_type_extent_ / pmpi_type_extent_ => type_extent(datatype: *const c_int, extent: *mut c_int, ierror: *mut c_int));
unsafe fn type_extent(p: bool, dt: *const c_int, extent: *mut c_int, ierror: *mut c_int) {
    let mut v: c_long = 0;
    // SAFETY: references from the caller.
    unsafe {
        narrow(
            "MPI_TYPE_EXTENT",
            pick!(p, MPI_Type_extent)(*dt, &mut v),
            v,
            extent,
            ierror,
        )
    }
}

twin!(mpi_address_ / pmpi_address_ => address(location: *mut c_void, addr: *mut c_int, ierror: *mut c_int));
unsafe fn address(p: bool, loc: *mut c_void, out: *mut c_int, ierror: *mut c_int) {
    let mut v: c_long = 0;
    // SAFETY: references from the caller.
    unsafe {
        narrow(
            "MPI_ADDRESS",
            pick!(p, MPI_Address)(buf(loc), &mut v),
            v,
            out,
            ierror,
        )
    }
}

twin!(mpix_protect_ / pmpix_protect_ => protect_int(id: *const c_int, region: *mut c_void, count: *const c_int, datatype: *const c_int, ierror: *mut c_int));
unsafe fn protect_int(
    p: bool,
    id: *const c_int,
    region: *mut c_void,
    n: *const c_int,
    dt: *const c_int,
    ierror: *mut c_int,
) {
    // SAFETY: references from the caller; the region's lifetime is
    // MPIX_PROTECT's documented contract.
    unsafe {
        set(
            ierror,
            pick!(p, MPIX_Protect)(*id, buf(region), *n as i64, *dt),
        )
    }
}

twin!(mpix_protect_x_ / pmpix_protect_x_ => protect_count(id: *const c_int, region: *mut c_void, count: *const i64, datatype: *const c_int, ierror: *mut c_int));
unsafe fn protect_count(
    p: bool,
    id: *const c_int,
    region: *mut c_void,
    n: *const i64,
    dt: *const c_int,
    ierror: *mut c_int,
) {
    // SAFETY: as in protect_int.
    unsafe { set(ierror, pick!(p, MPIX_Protect)(*id, buf(region), *n, *dt)) }
}

/// Registers a Fortran handler procedure.
fn register(name: &str, h: Option<FortranHandlerFn>, serialize: bool) -> c_int {
    let r = mpi().and_then(|m| {
        let Some(h) = h else {
            return fail(err::ARG, "the handler procedure is missing");
        };
        if serialize {
            mpix::register_serializer(m, Handler::Fortran(h));
        } else {
            mpix::register_deserializer(m, Handler::Fortran(h));
        }
        Ok(())
    });
    ret(name, COMM_WORLD, r)
}

twin!(mpix_serialize_handler_register_ / pmpix_serialize_handler_register_ => serialize_register(handler: Option<FortranHandlerFn>, ierror: *mut c_int));
unsafe fn serialize_register(_p: bool, h: Option<FortranHandlerFn>, ierror: *mut c_int) {
    // SAFETY: `ierror` is the caller's.
    unsafe { set(ierror, register("MPIX_SERIALIZE_HANDLER_REGISTER", h, true)) }
}

twin!(mpix_deserialize_handler_register_ / pmpix_deserialize_handler_register_ => deserialize_register(handler: Option<FortranHandlerFn>, ierror: *mut c_int));
unsafe fn deserialize_register(_p: bool, h: Option<FortranHandlerFn>, ierror: *mut c_int) {
    // SAFETY: `ierror` is the caller's.
    unsafe {
        set(
            ierror,
            register("MPIX_DESERIALIZE_HANDLER_REGISTER", h, false),
        )
    }
}

/// Route and locate: a file name in, the path out; a path longer than the
/// Fortran string is an error, never a cut path.
///
/// # Safety
/// `name` and `path` have the given lengths.
unsafe fn name_to_path(
    call: &str,
    f: fn(&crate::api::Mpi, &str) -> MpiResult<std::path::PathBuf>,
    name: *const c_char,
    path: *mut c_char,
    name_len: usize,
    path_len: usize,
) -> c_int {
    use std::os::unix::ffi::OsStrExt;
    let r = mpi().and_then(|m| {
        // SAFETY: the caller's contract.
        let n = unsafe { str_in(name, name_len) }
            .or_else(|_| fail(err::ARG, "the file name is not valid UTF-8"))?;
        let p = f(m, n)?;
        let b = p.as_os_str().as_bytes();
        if b.len() > path_len {
            return fail(
                err::ARG,
                format!(
                    "the path '{}' ({} characters) does not fit in PATH (CHARACTER*{path_len})",
                    p.display(),
                    b.len()
                ),
            );
        }
        // SAFETY: the caller's contract.
        unsafe { str_out(b, path, path_len) };
        Ok(())
    });
    ret(call, COMM_WORLD, r)
}

twin!(mpix_checkpoint_route_ / pmpix_checkpoint_route_ => route(name: *const c_char, path: *mut c_char, ierror: *mut c_int, name_len: usize, path_len: usize));
unsafe fn route(
    _p: bool,
    name: *const c_char,
    path: *mut c_char,
    ierror: *mut c_int,
    nl: usize,
    pl: usize,
) {
    // SAFETY: the caller's contract.
    unsafe {
        set(
            ierror,
            name_to_path("MPIX_CHECKPOINT_ROUTE", protect::route, name, path, nl, pl),
        )
    }
}

twin!(mpix_checkpoint_locate_ / pmpix_checkpoint_locate_ => locate(name: *const c_char, path: *mut c_char, ierror: *mut c_int, name_len: usize, path_len: usize));
unsafe fn locate(
    _p: bool,
    name: *const c_char,
    path: *mut c_char,
    ierror: *mut c_int,
    nl: usize,
    pl: usize,
) {
    // SAFETY: the caller's contract.
    unsafe {
        set(
            ierror,
            name_to_path(
                "MPIX_CHECKPOINT_LOCATE",
                protect::locate,
                name,
                path,
                nl,
                pl,
            ),
        )
    }
}

/// `MPI_WTIME` and `MPI_WTICK` are functions (declared in mpif.h).
#[no_mangle]
pub extern "C" fn mpi_wtime_() -> f64 {
    MPI_Wtime()
}
#[no_mangle]
pub extern "C" fn pmpi_wtime_() -> f64 {
    PMPI_Wtime()
}
#[no_mangle]
pub extern "C" fn mpi_wtick_() -> f64 {
    MPI_Wtick()
}
#[no_mangle]
pub extern "C" fn pmpi_wtick_() -> f64 {
    PMPI_Wtick()
}
