//! The Fortran bindings that are more than a forward (`custom` in the
//! table): no `argc`/`argv`, strings, 1-based indices, attribute values
//! by value, the deprecated MPI-1 calls whose Fortran addresses are
//! `INTEGER`, procedures, and the MPIX calls with Fortran-only shapes.
//! Each body is written once and exported as `mpi_x_` (calling `MPI_X`)
//! and `pmpi_x_` (calling `PMPI_X`).
//!
//! Every entry point's safety contract is the Fortran binding's: each
//! argument is a valid reference to what the MPI standard says (a
//! CHARACTER argument to as many bytes as its hidden length), and buffers
//! follow the MPI buffer rules.

use super::{buf, set, status, statuses, str_in, str_out};
use crate::abi::comm::*;
use crate::abi::dtype::*;
use crate::abi::env::*;
use crate::abi::errors::*;
use crate::abi::mpix::*;
use crate::abi::p2p::*;
use crate::abi::reduce::*;
use crate::abi::request::*;
use crate::abi::{mpi, ret, CStatus};
use crate::api::consts::{err, COMM_WORLD, MAX_ERROR_STRING, MAX_PROCESSOR_NAME, UNDEFINED};
use crate::api::error::{fail, MpiResult};
use crate::api::mpix::{FortranHandlerFn, Handler};
use crate::api::{mpix, op::UserFn, protect};
use std::os::raw::{c_char, c_int, c_long, c_void};

/// Exports the body as the Fortran symbols `$name` (with `$p` false) and
/// `$pname` (with `$p` true: the body then calls the PMPI_ functions).
macro_rules! twin {
    ($name:ident / $pname:ident ($p:ident; $($a:ident : $t:ty),* $(,)?) $body:block) => {
        /// # Safety
        /// The Fortran binding's contract (see the module comment).
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) {
            let $p = false;
            $body
        }
        /// # Safety
        /// As for the `MPI_` binding.
        #[no_mangle]
        pub unsafe extern "C" fn $pname($($a: $t),*) {
            let $p = true;
            $body
        }
    };
}

/// `PMPI_x` when `$p`, else `MPI_x`.
macro_rules! pick {
    ($p:expr, $c:ident) => {
        paste::paste! { if $p { [<P $c>] } else { $c } }
    };
}

twin!(mpi_init_ / pmpi_init_ (p; ierror: *mut c_int) {
    // SAFETY: MPI_Init accepts NULL argc/argv.
    unsafe { set(ierror, pick!(p, MPI_Init)(std::ptr::null_mut(), std::ptr::null_mut())) }
});

twin!(mpi_init_thread_ / pmpi_init_thread_ (p; required: *const c_int, provided: *mut c_int, ierror: *mut c_int) {
    let f = pick!(p, MPI_Init_thread);
    // SAFETY: as in mpi_init_; the rest are the caller's references.
    unsafe { set(ierror, f(std::ptr::null_mut(), std::ptr::null_mut(), *required, provided)) }
});

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

twin!(mpi_get_processor_name_ / pmpi_get_processor_name_ (p; name: *mut c_char, resultlen: *mut c_int, ierror: *mut c_int, name_len: usize) {
    let f = pick!(p, MPI_Get_processor_name);
    let cap = MAX_PROCESSOR_NAME as usize;
    // SAFETY: the caller's references; the temporary holds `cap` bytes.
    unsafe { string_out(cap, |s, n| f(s, n), name, resultlen, ierror, name_len) }
});

twin!(mpi_get_library_version_ / pmpi_get_library_version_ (p; version: *mut c_char, resultlen: *mut c_int, ierror: *mut c_int, version_len: usize) {
    let f = pick!(p, MPI_Get_library_version);
    let cap = 64; // MPI_MAX_LIBRARY_VERSION_STRING
    // SAFETY: as in mpi_get_processor_name_.
    unsafe { string_out(cap, |s, n| f(s, n), version, resultlen, ierror, version_len) }
});

twin!(mpi_error_string_ / pmpi_error_string_ (p; errorcode: *const c_int, string: *mut c_char, resultlen: *mut c_int, ierror: *mut c_int, string_len: usize) {
    let f = pick!(p, MPI_Error_string);
    let cap = MAX_ERROR_STRING as usize;
    // SAFETY: as in mpi_get_processor_name_.
    unsafe {
        let code = *errorcode;
        string_out(cap, |s, n| f(code, s, n), string, resultlen, ierror, string_len)
    }
});

/// Fortran indices are 1-based; MPI_UNDEFINED stays.
fn one_based(i: c_int) -> c_int {
    if i >= 0 {
        i + 1
    } else {
        i
    }
}

twin!(mpi_waitany_ / pmpi_waitany_ (p; count: *const c_int, reqs: *mut c_int, index: *mut c_int, st: *mut c_int, ierror: *mut c_int) {
    // SAFETY: the caller's references; the C function checks its input.
    unsafe {
        let rc = pick!(p, MPI_Waitany)(*count, reqs, index, status(st));
        if !index.is_null() {
            *index = one_based(*index);
        }
        set(ierror, rc)
    }
});

twin!(mpi_testany_ / pmpi_testany_ (p; count: *const c_int, reqs: *mut c_int, index: *mut c_int, flag: *mut c_int, st: *mut c_int, ierror: *mut c_int) {
    // SAFETY: as in mpi_waitany_.
    unsafe {
        let rc = pick!(p, MPI_Testany)(*count, reqs, index, flag, status(st));
        if !index.is_null() {
            *index = one_based(*index);
        }
        set(ierror, rc)
    }
});

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

twin!(mpi_waitsome_ / pmpi_waitsome_ (p; incount: *const c_int, reqs: *mut c_int, outcount: *mut c_int, indices: *mut c_int, sts: *mut c_int, ierror: *mut c_int) {
    // SAFETY: the caller's references, forwarded.
    unsafe { some(pick!(p, MPI_Waitsome), incount, reqs, outcount, indices, sts, ierror) }
});

twin!(mpi_testsome_ / pmpi_testsome_ (p; incount: *const c_int, reqs: *mut c_int, outcount: *mut c_int, indices: *mut c_int, sts: *mut c_int, ierror: *mut c_int) {
    // SAFETY: the caller's references, forwarded.
    unsafe { some(pick!(p, MPI_Testsome), incount, reqs, outcount, indices, sts, ierror) }
});

twin!(mpi_buffer_detach_ / pmpi_buffer_detach_ (p; _buffer_addr: *mut c_void, size: *mut c_int, ierror: *mut c_int) {
    // Fortran cannot use the address C returns; it is dropped.
    let mut addr: *mut c_void = std::ptr::null_mut();
    // SAFETY: `addr` is the `void **` C expects; `size` is the caller's.
    unsafe { set(ierror, pick!(p, MPI_Buffer_detach)(&mut addr as *mut _ as *mut c_void, size)) }
});

/// An attribute as Fortran wants it: the value (converted by `conv` to
/// the INTEGER kind of the call), not C's pointer to it.
///
/// # Safety
/// References from the caller.
unsafe fn attribute<T>(
    p: bool,
    comm: *const c_int,
    key: *const c_int,
    value: *mut T,
    flag: *mut c_int,
    ierror: *mut c_int,
    conv: fn(c_int) -> T,
    conv_user: fn(usize) -> T,
) {
    // SAFETY: the caller's references.
    let (c, k) = unsafe { (*comm, *key) };
    if crate::abi::attr::is_user_key(k) {
        // A key of the program's: the value set is the attribute (from
        // Fortran an integer; from C an address, given as one).
        let r = crate::abi::attr::get_value(crate::api::attr::Kind::Comm, c, k).map(|v| {
            // SAFETY: the caller's references.
            unsafe {
                *flag = v.is_some() as c_int;
                if let Some(v) = v {
                    *value = conv_user(v);
                }
            }
        });
        // SAFETY: the caller's IERROR.
        return unsafe { set(ierror, crate::abi::ret("MPI_COMM_GET_ATTR", c, r)) };
    }
    let mut ptr: *const c_int = std::ptr::null();
    // SAFETY: `ptr` is the `void **` C writes the attribute's address to;
    // the rest are the caller's references.
    unsafe {
        let rc = pick!(p, MPI_Comm_get_attr)(*comm, *key, &mut ptr as *mut _ as *mut c_void, flag);
        if rc == err::SUCCESS && !flag.is_null() && *flag != 0 && !ptr.is_null() {
            *value = conv(*ptr);
        }
        set(ierror, rc)
    }
}

twin!(mpi_comm_get_attr_ / pmpi_comm_get_attr_ (p; comm: *const c_int, key: *const c_int, value: *mut i64, flag: *mut c_int, ierror: *mut c_int) {
    // SAFETY: the caller's references, forwarded.
    unsafe { attribute(p, comm, key, value, flag, ierror, i64::from, |v| v as i64) }
});

twin!(mpi_attr_get_ / pmpi_attr_get_ (p; comm: *const c_int, key: *const c_int, value: *mut c_int, flag: *mut c_int, ierror: *mut c_int) {
    // SAFETY: the caller's references, forwarded; predefined attributes are ints.
    unsafe { attribute(p, comm, key, value, flag, ierror, |x| x, |v| v as c_int) }
});

// A Fortran `SUBROUTINE F(INVEC, INOUTVEC, LEN, DATATYPE)` takes all four
// by reference, exactly as the C user function does.
twin!(mpi_op_create_ / pmpi_op_create_ (p; user_fn: Option<UserFn>, commute: *const c_int, op: *mut c_int, ierror: *mut c_int) {
    // SAFETY: the caller's references.
    unsafe { set(ierror, pick!(p, MPI_Op_create)(user_fn, (*commute != 0) as c_int, op)) }
});

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

twin!(mpi_type_hvector_ / pmpi_type_hvector_ (p; count: *const c_int, bl: *const c_int, stride: *const c_int, old: *const c_int, new: *mut c_int, ierror: *mut c_int) {
    let f = pick!(p, MPI_Type_hvector);
    // SAFETY: the caller's references.
    unsafe { set(ierror, f(*count, *bl, *stride as c_long, *old, new)) }
});

twin!(mpi_type_hindexed_ / pmpi_type_hindexed_ (p; count: *const c_int, bls: *const c_int, displs: *const c_int, old: *const c_int, new: *mut c_int, ierror: *mut c_int) {
    let f = pick!(p, MPI_Type_hindexed);
    // SAFETY: the caller's references; `displs` has `count` entries.
    unsafe { set(ierror, f(*count, bls, widen(*count, displs).as_ptr(), *old, new)) }
});

twin!(mpi_type_struct_ / pmpi_type_struct_ (p; count: *const c_int, bls: *const c_int, displs: *const c_int, types: *const c_int, new: *mut c_int, ierror: *mut c_int) {
    let f = pick!(p, MPI_Type_struct);
    // SAFETY: as in mpi_type_hindexed_.
    unsafe { set(ierror, f(*count, bls, widen(*count, displs).as_ptr(), types, new)) }
});

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

twin!(mpi_type_extent_ / pmpi_type_extent_ (p; datatype: *const c_int, extent: *mut c_int, ierror: *mut c_int) {
    let mut v: c_long = 0;
    // SAFETY: the caller's references.
    unsafe { narrow("MPI_TYPE_EXTENT", pick!(p, MPI_Type_extent)(*datatype, &mut v), v, extent, ierror) }
});

twin!(mpi_address_ / pmpi_address_ (p; location: *mut c_void, addr: *mut c_int, ierror: *mut c_int) {
    let mut v: c_long = 0;
    // SAFETY: the caller's references.
    unsafe { narrow("MPI_ADDRESS", pick!(p, MPI_Address)(buf(location), &mut v), v, addr, ierror) }
});

twin!(mpix_protect_ / pmpix_protect_ (p; id: *const c_int, region: *mut c_void, count: *const c_int, datatype: *const c_int, ierror: *mut c_int) {
    // SAFETY: the caller's references; the region's lifetime is
    // MPIX_PROTECT's documented contract.
    unsafe { set(ierror, pick!(p, MPIX_Protect)(*id, buf(region), *count as i64, *datatype)) }
});

twin!(mpix_protect_x_ / pmpix_protect_x_ (p; id: *const c_int, region: *mut c_void, count: *const i64, datatype: *const c_int, ierror: *mut c_int) {
    // SAFETY: as in mpix_protect_.
    unsafe { set(ierror, pick!(p, MPIX_Protect)(*id, buf(region), *count, *datatype)) }
});

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

twin!(mpix_serialize_handler_register_ / pmpix_serialize_handler_register_ (_p; handler: Option<FortranHandlerFn>, ierror: *mut c_int) {
    // SAFETY: the caller's reference.
    unsafe { set(ierror, register("MPIX_SERIALIZE_HANDLER_REGISTER", handler, true)) }
});

twin!(mpix_deserialize_handler_register_ / pmpix_deserialize_handler_register_ (_p; handler: Option<FortranHandlerFn>, ierror: *mut c_int) {
    // SAFETY: the caller's reference.
    unsafe { set(ierror, register("MPIX_DESERIALIZE_HANDLER_REGISTER", handler, false)) }
});

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

twin!(mpix_checkpoint_route_ / pmpix_checkpoint_route_ (_p; name: *const c_char, path: *mut c_char, ierror: *mut c_int, name_len: usize, path_len: usize) {
    let call = "MPIX_CHECKPOINT_ROUTE";
    // SAFETY: the caller's references.
    unsafe { set(ierror, name_to_path(call, protect::route, name, path, name_len, path_len)) }
});

twin!(mpix_checkpoint_locate_ / pmpix_checkpoint_locate_ (_p; name: *const c_char, path: *mut c_char, ierror: *mut c_int, name_len: usize, path_len: usize) {
    let call = "MPIX_CHECKPOINT_LOCATE";
    // SAFETY: the caller's references.
    unsafe { set(ierror, name_to_path(call, protect::locate, name, path, name_len, path_len)) }
});

/// `MPI_F_SYNC_REG(BUF)` (MPI-3): does nothing, but the compiler must
/// assume it changed BUF, so values that MPI wrote behind its back (a
/// restored protected region, an MPI_BOTTOM receive) are read from memory.
#[no_mangle]
pub extern "C" fn mpi_f_sync_reg_(_buf: *mut c_void) {}
#[no_mangle]
pub extern "C" fn pmpi_f_sync_reg_(_buf: *mut c_void) {}

/// `MPI_AINT_ADD` and `MPI_AINT_DIFF` are functions of two
/// INTEGER(KIND=MPI_ADDRESS_KIND) (declared in mpif.h).
///
/// # Safety
/// Fortran passes both by reference.
#[no_mangle]
pub unsafe extern "C" fn mpi_aint_add_(base: *const isize, disp: *const isize) -> isize {
    // SAFETY: the caller's two integers.
    unsafe { (*base).wrapping_add(*disp) }
}
/// # Safety
/// As for `mpi_aint_add_`.
#[no_mangle]
pub unsafe extern "C" fn mpi_aint_diff_(a: *const isize, b: *const isize) -> isize {
    // SAFETY: the caller's two integers.
    unsafe { (*a).wrapping_sub(*b) }
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

/// A Fortran string argument as a C string, or the error code.
///
/// # Safety
/// `s` has `len` readable bytes.
unsafe fn c_string(s: *const c_char, len: usize) -> Result<std::ffi::CString, c_int> {
    use std::ffi::CString;
    // SAFETY: forwarded.
    let t = unsafe { str_in(s, len)? };
    CString::new(t).map_err(|_| err::ARG)
}

/// Runs `f` with C strings of the Fortran arguments, storing its code.
macro_rules! with_strings {
    ($ierror:ident, [$($s:ident : $l:ident),*], $f:expr) => {{
        // SAFETY: each string has its hidden length readable bytes.
        let r = (|| -> Result<c_int, c_int> { Ok($f($(unsafe { c_string($s, $l)? }),*)) })();
        // SAFETY: the caller's IERROR.
        unsafe { set($ierror, r.unwrap_or_else(|e| e)) }
    }};
}

mod objects;
mod sessions;
