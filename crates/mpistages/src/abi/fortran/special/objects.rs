//! Fortran bindings of the object calls that need more than forwarding:
//! strings (info keys and values, names, error strings), attribute keys
//! with Fortran callbacks and integer values, error handlers written in
//! Fortran, and `MPI_PCONTROL`.

use super::super::{set, str_out};
use super::c_string;
use crate::abi::attr::{self as attr_abi, CopyFn};
use crate::abi::comm::*;
use crate::abi::dpm::*;
use crate::abi::dtype::*;
use crate::abi::errors::*;
use crate::abi::file::*;
use crate::abi::info::*;
use crate::abi::win::*;
use crate::api::attr::{Kind, Lang};
use crate::api::consts::err;
use std::ffi::CString;
use std::os::raw::c_void;
use std::os::raw::{c_char, c_int};

twin!(mpi_info_create_env_ / pmpi_info_create_env_ (p; info: *mut c_int, ierror: *mut c_int) {
    // SAFETY: argv is not read; `info` is the caller's INTEGER.
    unsafe { set(ierror, pick!(p, MPI_Info_create_env)(0, std::ptr::null_mut(), info)) }
});

twin!(mpi_info_set_ / pmpi_info_set_ (p; info: *const c_int, key: *const c_char, value: *const c_char, ierror: *mut c_int, key_len: usize, value_len: usize) {
    // SAFETY: the caller's INTEGER.
    let h = unsafe { *info };
    with_strings!(ierror, [key: key_len, value: value_len], |k: CString, v: CString| unsafe {
        // SAFETY: NUL-terminated strings that live through the call.
        pick!(p, MPI_Info_set)(h, k.as_ptr(), v.as_ptr())
    })
});

twin!(mpi_info_delete_ / pmpi_info_delete_ (p; info: *const c_int, key: *const c_char, ierror: *mut c_int, key_len: usize) {
    // SAFETY: the caller's INTEGER.
    let h = unsafe { *info };
    // SAFETY: a NUL-terminated string that lives through the call.
    with_strings!(ierror, [key: key_len], |k: CString| unsafe { pick!(p, MPI_Info_delete)(h, k.as_ptr()) })
});

twin!(mpi_info_get_ / pmpi_info_get_ (p; info: *const c_int, key: *const c_char, valuelen: *const c_int, value: *mut c_char, flag: *mut c_int, ierror: *mut c_int, key_len: usize, value_len: usize) {
    // SAFETY: the caller's INTEGERs.
    let (h, cap) = unsafe { (*info, (*valuelen).max(0) as usize) };
    with_strings!(ierror, [key: key_len], |k: CString| {
        let mut tmp = vec![0u8; cap + 1];
        // SAFETY: `tmp` holds valuelen + 1 bytes, as MPI_Info_get writes.
        let rc = unsafe { pick!(p, MPI_Info_get)(h, k.as_ptr(), cap as c_int, tmp.as_mut_ptr() as *mut c_char, flag) };
        // SAFETY: the caller's flag and CHARACTER(LEN=value_len).
        if rc == err::SUCCESS && unsafe { *flag } != 0 {
            let end = tmp.iter().position(|&b| b == 0).unwrap_or(cap);
            // SAFETY: as above.
            unsafe { str_out(&tmp[..end], value, value_len) };
        }
        rc
    })
});

twin!(mpi_info_get_string_ / pmpi_info_get_string_ (p; info: *const c_int, key: *const c_char, buflen: *mut c_int, value: *mut c_char, flag: *mut c_int, ierror: *mut c_int, key_len: usize, value_len: usize) {
    // SAFETY: the caller's INTEGERs.
    let (h, cap) = unsafe { (*info, (*buflen).max(0)) };
    with_strings!(ierror, [key: key_len], |k: CString| {
        let mut tmp = vec![0u8; cap as usize + 1];
        let mut n = cap + 1;
        // SAFETY: `tmp` holds `n` bytes.
        let rc = unsafe { pick!(p, MPI_Info_get_string)(h, k.as_ptr(), &mut n, tmp.as_mut_ptr() as *mut c_char, flag) };
        // SAFETY: the caller's flag, BUFLEN and CHARACTER(LEN=value_len).
        unsafe {
            if rc == err::SUCCESS && *flag != 0 {
                let end = tmp.iter().position(|&b| b == 0).unwrap_or(cap as usize);
                str_out(&tmp[..end], value, value_len);
                *buflen = n - 1;
            }
        }
        rc
    })
});

twin!(mpi_info_get_valuelen_ / pmpi_info_get_valuelen_ (p; info: *const c_int, key: *const c_char, valuelen: *mut c_int, flag: *mut c_int, ierror: *mut c_int, key_len: usize) {
    // SAFETY: the caller's INTEGER.
    let h = unsafe { *info };
    // SAFETY: the caller's out-arguments.
    with_strings!(ierror, [key: key_len], |k: CString| unsafe { pick!(p, MPI_Info_get_valuelen)(h, k.as_ptr(), valuelen, flag) })
});

twin!(mpi_info_get_nthkey_ / pmpi_info_get_nthkey_ (p; info: *const c_int, n: *const c_int, key: *mut c_char, ierror: *mut c_int, key_len: usize) {
    let mut tmp = [0u8; crate::api::info::MAX_INFO_KEY + 1];
    // SAFETY: the caller's INTEGERs; `tmp` holds MPI_MAX_INFO_KEY + 1 bytes.
    unsafe {
        let rc = pick!(p, MPI_Info_get_nthkey)(*info, *n, tmp.as_mut_ptr() as *mut c_char);
        if rc == err::SUCCESS {
            let end = tmp.iter().position(|&b| b == 0).unwrap_or(tmp.len());
            str_out(&tmp[..end], key, key_len);
        }
        set(ierror, rc)
    }
});

twin!(mpi_comm_set_name_ / pmpi_comm_set_name_ (p; comm: *const c_int, name: *const c_char, ierror: *mut c_int, name_len: usize) {
    // SAFETY: the caller's INTEGER.
    let c = unsafe { *comm };
    // SAFETY: a NUL-terminated string that lives through the call.
    with_strings!(ierror, [name: name_len], |s: CString| unsafe { pick!(p, MPI_Comm_set_name)(c, s.as_ptr()) })
});

twin!(mpi_type_set_name_ / pmpi_type_set_name_ (p; datatype: *const c_int, name: *const c_char, ierror: *mut c_int, name_len: usize) {
    // SAFETY: the caller's INTEGER.
    let t = unsafe { *datatype };
    // SAFETY: a NUL-terminated string that lives through the call.
    with_strings!(ierror, [name: name_len], |s: CString| unsafe { pick!(p, MPI_Type_set_name)(t, s.as_ptr()) })
});

twin!(mpi_comm_get_name_ / pmpi_comm_get_name_ (p; comm: *const c_int, name: *mut c_char, resultlen: *mut c_int, ierror: *mut c_int, name_len: usize) {
    let f = pick!(p, MPI_Comm_get_name);
    // SAFETY: the caller's references; the temporary holds the maximum.
    unsafe { super::string_out(MAX_OBJECT_NAME, |s, n| f(*comm, s, n), name, resultlen, ierror, name_len) }
});

twin!(mpi_type_get_name_ / pmpi_type_get_name_ (p; datatype: *const c_int, name: *mut c_char, resultlen: *mut c_int, ierror: *mut c_int, name_len: usize) {
    let f = pick!(p, MPI_Type_get_name);
    // SAFETY: as for mpi_comm_get_name_.
    unsafe { super::string_out(MAX_OBJECT_NAME, |s, n| f(*datatype, s, n), name, resultlen, ierror, name_len) }
});

twin!(mpi_add_error_string_ / pmpi_add_error_string_ (p; code: *const c_int, string: *const c_char, ierror: *mut c_int, string_len: usize) {
    // SAFETY: the caller's INTEGER.
    let c = unsafe { *code };
    // SAFETY: a NUL-terminated string that lives through the call.
    with_strings!(ierror, [string: string_len], |s: CString| unsafe { pick!(p, MPI_Add_error_string)(c, s.as_ptr()) })
});

// The predefined callbacks, as Fortran calls them (all by reference).

/// # Safety
/// Called by MPI as a Fortran copy callback.
#[no_mangle]
pub unsafe extern "C" fn mpi_comm_null_copy_fn_(
    _: *const c_int,
    _: *const c_int,
    _: *const isize,
    _: *const isize,
    _: *mut isize,
    flag: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: MPI passes the flag and IERROR.
    unsafe {
        *flag = 0;
        *ierr = 0;
    }
}

/// # Safety
/// Called by MPI as a Fortran copy callback.
#[no_mangle]
pub unsafe extern "C" fn mpi_comm_dup_fn_(
    _: *const c_int,
    _: *const c_int,
    _: *const isize,
    vin: *const isize,
    vout: *mut isize,
    flag: *mut c_int,
    ierr: *mut c_int,
) {
    // SAFETY: MPI passes the values, the flag and IERROR.
    unsafe {
        *vout = *vin;
        *flag = 1;
        *ierr = 0;
    }
}

/// # Safety
/// Called by MPI as a Fortran delete callback.
#[no_mangle]
pub unsafe extern "C" fn mpi_comm_null_delete_fn_(
    _: *const c_int,
    _: *const c_int,
    _: *const isize,
    _: *const isize,
    ierr: *mut c_int,
) {
    // SAFETY: MPI passes IERROR.
    unsafe { *ierr = 0 };
}

type FortranCopy = unsafe extern "C" fn(
    *const c_int,
    *const c_int,
    *const isize,
    *const isize,
    *mut isize,
    *mut c_int,
    *mut c_int,
);
type FortranDelete =
    unsafe extern "C" fn(*const c_int, *const c_int, *const isize, *const isize, *mut c_int);

/// The same predefined callbacks under their other Fortran names.
macro_rules! aliases {
    ($($alias:ident = $of:ident : $t:ty),* $(,)?) => {$(
        /// # Safety
        /// As for the callback it forwards to.
        #[no_mangle]
        pub unsafe extern "C" fn $alias(a: *const c_int, b: *const c_int, c: *const isize, d: *const isize, e: *mut isize, f: *mut c_int, g: *mut c_int) {
            // SAFETY: the same arguments.
            unsafe { $of(a, b, c, d, e, f, g) }
        }
    )*};
}
aliases!(
    mpi_type_null_copy_fn_ = mpi_comm_null_copy_fn_: FortranCopy,
    mpi_type_dup_fn_ = mpi_comm_dup_fn_: FortranCopy,
    mpi_null_copy_fn_ = mpi_comm_null_copy_fn_: FortranCopy,
    mpi_dup_fn_ = mpi_comm_dup_fn_: FortranCopy,
    mpi_win_null_copy_fn_ = mpi_comm_null_copy_fn_: FortranCopy,
    mpi_win_dup_fn_ = mpi_comm_dup_fn_: FortranCopy,
);

/// # Safety
/// Called by MPI as a Fortran delete callback.
#[no_mangle]
pub unsafe extern "C" fn mpi_win_null_delete_fn_(
    _: *const c_int,
    _: *const c_int,
    _: *const isize,
    _: *const isize,
    ierr: *mut c_int,
) {
    // SAFETY: MPI passes IERROR.
    unsafe { *ierr = 0 };
}

/// # Safety
/// Called by MPI as a Fortran delete callback.
#[no_mangle]
pub unsafe extern "C" fn mpi_type_null_delete_fn_(
    _: *const c_int,
    _: *const c_int,
    _: *const isize,
    _: *const isize,
    ierr: *mut c_int,
) {
    // SAFETY: MPI passes IERROR.
    unsafe { *ierr = 0 };
}

/// # Safety
/// Called by MPI as a Fortran delete callback.
#[no_mangle]
pub unsafe extern "C" fn mpi_null_delete_fn_(
    _: *const c_int,
    _: *const c_int,
    _: *const isize,
    _: *const isize,
    ierr: *mut c_int,
) {
    // SAFETY: MPI passes IERROR.
    unsafe { *ierr = 0 };
}

/// Fortran keys given the Fortran predefined callbacks take the C ones'
/// behaviour (no copy, a copy of the value, no deletion).
fn c_copy(f: usize) -> usize {
    let is = |g: FortranCopy| f == g as usize;
    if is(mpi_comm_null_copy_fn_)
        || is(mpi_type_null_copy_fn_)
        || is(mpi_null_copy_fn_)
        || is(mpi_win_null_copy_fn_)
    {
        0
    } else if is(mpi_comm_dup_fn_) || is(mpi_type_dup_fn_) || is(mpi_dup_fn_) || is(mpi_win_dup_fn_)
    {
        crate::abi::attr::MPI_COMM_DUP_FN as CopyFn as usize
    } else {
        f
    }
}

fn c_delete(f: usize) -> usize {
    let is = |g: FortranDelete| f == g as usize;
    if is(mpi_comm_null_delete_fn_) || is(mpi_type_null_delete_fn_) || is(mpi_null_delete_fn_) {
        0
    } else {
        f
    }
}

/// # Safety
/// `key` and `ierror` are the caller's INTEGERs.
unsafe fn fortran_key(
    kind: Kind,
    lang: Lang,
    copy: usize,
    delete: usize,
    extra: isize,
    key: *mut c_int,
    ierror: *mut c_int,
) {
    let r = attr_abi::create_keyval(kind, lang, c_copy(copy), c_delete(delete), extra as usize);
    // SAFETY: the caller's INTEGERs.
    unsafe {
        match r {
            Ok(k) => {
                *key = k;
                set(ierror, err::SUCCESS)
            }
            Err(e) => set(
                ierror,
                crate::abi::raise("MPI_COMM_CREATE_KEYVAL", crate::api::consts::COMM_WORLD, e),
            ),
        }
    }
}

twin!(mpi_comm_create_keyval_ / pmpi_comm_create_keyval_ (_p; copy: usize, delete: usize, key: *mut c_int, extra: *const isize, ierror: *mut c_int) {
    // SAFETY: the caller's references.
    unsafe { fortran_key(Kind::Comm, Lang::Fortran, copy, delete, *extra, key, ierror) }
});

twin!(mpi_type_create_keyval_ / pmpi_type_create_keyval_ (_p; copy: usize, delete: usize, key: *mut c_int, extra: *const isize, ierror: *mut c_int) {
    // SAFETY: the caller's references.
    unsafe { fortran_key(Kind::Type, Lang::Fortran, copy, delete, *extra, key, ierror) }
});

twin!(mpi_win_create_keyval_ / pmpi_win_create_keyval_ (_p; copy: usize, delete: usize, key: *mut c_int, extra: *const isize, ierror: *mut c_int) {
    // SAFETY: the caller's references.
    unsafe { fortran_key(Kind::Win, Lang::Fortran, copy, delete, *extra, key, ierror) }
});

twin!(mpi_keyval_create_ / pmpi_keyval_create_ (_p; copy: usize, delete: usize, key: *mut c_int, extra: *const c_int, ierror: *mut c_int) {
    // SAFETY: the caller's references.
    unsafe { fortran_key(Kind::Comm, Lang::FortranInt, copy, delete, *extra as isize, key, ierror) }
});

twin!(mpi_attr_put_ / pmpi_attr_put_ (_p; comm: *const c_int, key: *const c_int, value: *const c_int, ierror: *mut c_int) {
    // SAFETY: the caller's references.
    unsafe {
        let r = attr_abi::set(Kind::Comm, *comm, *key, *value as isize as usize);
        set(ierror, crate::abi::ret("MPI_ATTR_PUT", *comm, r))
    }
});

twin!(mpi_type_get_attr_ / pmpi_type_get_attr_ (_p; datatype: *const c_int, key: *const c_int, value: *mut i64, flag: *mut c_int, ierror: *mut c_int) {
    // SAFETY: the caller's references.
    unsafe {
        let r = attr_abi::get_value(Kind::Type, *datatype, *key).map(|v| {
            *flag = v.is_some() as c_int;
            if let Some(v) = v {
                *value = v as i64;
            }
        });
        set(ierror, crate::abi::ret("MPI_TYPE_GET_ATTR", crate::api::consts::COMM_WORLD, r))
    }
});

/// A Fortran error handler: `SUBROUTINE H(COMM, ERROR_CODE)`, both by
/// reference, which is how `abi::raise` calls a C one too.
type FortranHandler = unsafe extern "C" fn(*mut c_int, *mut c_int);

twin!(mpi_comm_create_errhandler_ / pmpi_comm_create_errhandler_ (p; f: Option<FortranHandler>, eh: *mut c_int, ierror: *mut c_int) {
    // SAFETY: the same two pointer arguments; the handler ignores the rest.
    let f: Option<HandlerFn> = f.map(|f| unsafe { std::mem::transmute::<FortranHandler, HandlerFn>(f) });
    // SAFETY: the caller's INTEGERs.
    unsafe { set(ierror, pick!(p, MPI_Comm_create_errhandler)(f, eh)) }
});

twin!(mpi_errhandler_create_ / pmpi_errhandler_create_ (p; f: Option<FortranHandler>, eh: *mut c_int, ierror: *mut c_int) {
    // SAFETY: as for mpi_comm_create_errhandler_.
    let f: Option<HandlerFn> = f.map(|f| unsafe { std::mem::transmute::<FortranHandler, HandlerFn>(f) });
    // SAFETY: the caller's INTEGERs.
    unsafe { set(ierror, pick!(p, MPI_Errhandler_create)(f, eh)) }
});

twin!(mpi_pcontrol_ / pmpi_pcontrol_ (_p; _level: *const c_int, ierror: *mut c_int) {
    // SAFETY: the caller's IERROR.
    unsafe { set(ierror, err::SUCCESS) }
});

twin!(mpi_grequest_start_ / pmpi_grequest_start_ (_p; query: usize, free: usize, cancel: usize, extra: *const isize, request: *mut c_int, ierror: *mut c_int) {
    // SAFETY: Fortran subroutines, kept as addresses and called back with
    // their own signature (abi::misc knows them as Fortran's).
    let (q, f, c) = unsafe {
        (
            (query != 0).then(|| std::mem::transmute::<usize, crate::abi::misc::QueryFn>(query)),
            (free != 0).then(|| std::mem::transmute::<usize, crate::abi::misc::FreeFn>(free)),
            (cancel != 0).then(|| std::mem::transmute::<usize, crate::abi::misc::CancelFn>(cancel)),
        )
    };
    // SAFETY: the caller's references.
    unsafe {
        match crate::abi::misc::grequest_start(q, f, c, *extra as usize, true) {
            Ok(h) => {
                *request = h;
                set(ierror, err::SUCCESS)
            }
            Err(e) => set(ierror, crate::abi::raise("MPI_GREQUEST_START", crate::api::consts::COMM_WORLD, e)),
        }
    }
});

twin!(mpi_pack_external_size_ / pmpi_pack_external_size_ (p; rep: *const c_char, n: *const c_int, dt: *const c_int, size: *mut i64, ierror: *mut c_int, rep_len: usize) {
    // SAFETY: the caller's INTEGERs.
    let (n, dt) = unsafe { (*n, *dt) };
    // SAFETY: the caller's INTEGER(KIND=MPI_ADDRESS_KIND).
    with_strings!(ierror, [rep: rep_len], |r: CString| unsafe { pick!(p, MPI_Pack_external_size)(r.as_ptr(), n, dt, size) })
});

twin!(mpi_pack_external_ / pmpi_pack_external_ (p; rep: *const c_char, inbuf: *const c_void, n: *const c_int, dt: *const c_int, outbuf: *mut c_void, outsize: *const i64, pos: *mut i64, ierror: *mut c_int, rep_len: usize) {
    // SAFETY: the caller's references.
    let (n, dt, outsize) = unsafe { (*n, *dt, *outsize) };
    let (inbuf, outbuf) = (super::super::buf(inbuf as *mut c_void), super::super::buf(outbuf));
    // SAFETY: the caller's buffers and position.
    with_strings!(ierror, [rep: rep_len], |r: CString| unsafe { pick!(p, MPI_Pack_external)(r.as_ptr(), inbuf, n, dt, outbuf, outsize, pos) })
});

twin!(mpi_unpack_external_ / pmpi_unpack_external_ (p; rep: *const c_char, inbuf: *const c_void, insize: *const i64, pos: *mut i64, outbuf: *mut c_void, n: *const c_int, dt: *const c_int, ierror: *mut c_int, rep_len: usize) {
    // SAFETY: the caller's references.
    let (n, dt, insize) = unsafe { (*n, *dt, *insize) };
    let (inbuf, outbuf) = (super::super::buf(inbuf as *mut c_void), super::super::buf(outbuf));
    // SAFETY: the caller's buffers and position.
    with_strings!(ierror, [rep: rep_len], |r: CString| unsafe { pick!(p, MPI_Unpack_external)(r.as_ptr(), inbuf, insize, pos, outbuf, n, dt) })
});

// Files: the name strings and the datarep out-string.

twin!(mpi_file_open_ / pmpi_file_open_ (p; comm: *const c_int, filename: *const c_char, amode: *const c_int, info: *const c_int, fh: *mut c_int, ierror: *mut c_int, filename_len: usize) {
    // SAFETY: the caller's INTEGERs.
    let (c, a, i) = unsafe { (*comm, *amode, *info) };
    // SAFETY: a NUL-terminated string that lives through the call; `fh`
    // is the caller's INTEGER.
    with_strings!(ierror, [filename: filename_len], |f: CString| unsafe {
        pick!(p, MPI_File_open)(c, f.as_ptr(), a, i, fh)
    })
});

twin!(mpi_file_delete_ / pmpi_file_delete_ (p; filename: *const c_char, info: *const c_int, ierror: *mut c_int, filename_len: usize) {
    // SAFETY: the caller's INTEGER.
    let i = unsafe { *info };
    // SAFETY: a NUL-terminated string that lives through the call.
    with_strings!(ierror, [filename: filename_len], |f: CString| unsafe { pick!(p, MPI_File_delete)(f.as_ptr(), i) })
});

twin!(mpi_file_set_view_ / pmpi_file_set_view_ (p; fh: *const c_int, disp: *const i64, etype: *const c_int, filetype: *const c_int, datarep: *const c_char, info: *const c_int, ierror: *mut c_int, datarep_len: usize) {
    // SAFETY: the caller's INTEGERs.
    let (f, d, e, t, i) = unsafe { (*fh, *disp, *etype, *filetype, *info) };
    // SAFETY: a NUL-terminated string that lives through the call.
    with_strings!(ierror, [datarep: datarep_len], |r: CString| unsafe {
        pick!(p, MPI_File_set_view)(f, d, e, t, r.as_ptr(), i)
    })
});

twin!(mpi_file_get_view_ / pmpi_file_get_view_ (p; fh: *const c_int, disp: *mut i64, etype: *mut c_int, filetype: *mut c_int, datarep: *mut c_char, ierror: *mut c_int, datarep_len: usize) {
    let mut tmp = [0u8; crate::abi::file::MAX_DATAREP_STRING];
    // SAFETY: the caller's INTEGERs; `tmp` holds MPI_MAX_DATAREP_STRING bytes.
    let rc = unsafe { pick!(p, MPI_File_get_view)(*fh, disp, etype, filetype, tmp.as_mut_ptr() as *mut c_char) };
    if rc == err::SUCCESS {
        let end = tmp.iter().position(|&b| b == 0).unwrap_or(tmp.len());
        // SAFETY: the caller's CHARACTER(LEN=datarep_len).
        unsafe { str_out(&tmp[..end], datarep, datarep_len) };
    }
    // SAFETY: the caller's IERROR.
    unsafe { set(ierror, rc) }
});

twin!(mpi_file_create_errhandler_ / pmpi_file_create_errhandler_ (p; f: Option<FortranHandler>, eh: *mut c_int, ierror: *mut c_int) {
    // SAFETY: as for mpi_comm_create_errhandler_.
    let f: Option<HandlerFn> = f.map(|f| unsafe { std::mem::transmute::<FortranHandler, HandlerFn>(f) });
    // SAFETY: the caller's INTEGERs.
    unsafe { set(ierror, pick!(p, MPI_File_create_errhandler)(f, eh)) }
});

twin!(mpi_win_set_name_ / pmpi_win_set_name_ (p; win: *const c_int, name: *const c_char, ierror: *mut c_int, name_len: usize) {
    // SAFETY: the caller's INTEGER.
    let w = unsafe { *win };
    // SAFETY: a NUL-terminated string that lives through the call.
    with_strings!(ierror, [name: name_len], |s: CString| unsafe { pick!(p, MPI_Win_set_name)(w, s.as_ptr()) })
});

twin!(mpi_win_get_name_ / pmpi_win_get_name_ (p; win: *const c_int, name: *mut c_char, resultlen: *mut c_int, ierror: *mut c_int, name_len: usize) {
    let f = pick!(p, MPI_Win_get_name);
    // SAFETY: as for mpi_comm_get_name_.
    unsafe { super::string_out(MAX_OBJECT_NAME, |s, n| f(*win, s, n), name, resultlen, ierror, name_len) }
});

twin!(mpi_win_create_errhandler_ / pmpi_win_create_errhandler_ (p; f: Option<FortranHandler>, eh: *mut c_int, ierror: *mut c_int) {
    // SAFETY: the same two pointer arguments; the handler ignores the rest.
    let f: Option<HandlerFn> = f.map(|f| unsafe { std::mem::transmute::<FortranHandler, HandlerFn>(f) });
    // SAFETY: the caller's INTEGERs.
    unsafe { set(ierror, pick!(p, MPI_Win_create_errhandler)(f, eh)) }
});

// The predefined window attributes as values: the base address itself,
// the others read through the address C gives.
twin!(mpi_win_get_attr_ / pmpi_win_get_attr_ (p; win: *const c_int, key: *const c_int, value: *mut i64, flag: *mut c_int, ierror: *mut c_int) {
    let mut ptr: *const isize = std::ptr::null();
    // SAFETY: `ptr` is the `void **` C writes the attribute to; the rest
    // are the caller's references.
    unsafe {
        let rc = pick!(p, MPI_Win_get_attr)(*win, *key, &mut ptr as *mut _ as *mut c_void, flag);
        if rc == err::SUCCESS && !flag.is_null() && *flag != 0 {
            let user = crate::abi::attr::is_user_key(*key);
            *value = if user || *key == crate::abi::win::keys::BASE || ptr.is_null() {
                ptr as i64
            } else {
                *ptr as i64
            };
        }
        set(ierror, rc)
    }
});

// Ports and names: the port name out-strings are blank padded.

/// Calls a C function that writes a port name into `MPI_MAX_PORT_NAME`
/// bytes, then stores it blank padded in the Fortran string.
///
/// # Safety
/// `dst` has `dst_len` writable bytes; `ierror` is a writable INTEGER.
unsafe fn port_out(
    f: impl FnOnce(*mut c_char) -> c_int,
    dst: *mut c_char,
    ierror: *mut c_int,
    dst_len: usize,
) {
    let mut tmp = vec![0 as c_char; crate::api::dpm::MAX_PORT_NAME];
    let rc = f(tmp.as_mut_ptr());
    if rc == err::SUCCESS {
        let bytes: Vec<u8> = tmp
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        // SAFETY: the caller's contract.
        unsafe { str_out(&bytes, dst, dst_len) };
    }
    // SAFETY: the caller's IERROR.
    unsafe { set(ierror, rc) }
}

twin!(mpi_open_port_ / pmpi_open_port_ (p; info: *const c_int, port_name: *mut c_char, ierror: *mut c_int, port_name_len: usize) {
    // SAFETY: the caller's INTEGER and CHARACTER (port_out's contract).
    unsafe {
        let i = *info;
        port_out(|s| pick!(p, MPI_Open_port)(i, s), port_name, ierror, port_name_len)
    }
});

twin!(mpi_close_port_ / pmpi_close_port_ (p; port_name: *const c_char, ierror: *mut c_int, port_name_len: usize) {
    // SAFETY: a NUL-terminated string that lives through the call.
    with_strings!(ierror, [port_name: port_name_len], |s: CString| unsafe { pick!(p, MPI_Close_port)(s.as_ptr()) })
});

twin!(mpi_comm_accept_ / pmpi_comm_accept_ (p; port_name: *const c_char, info: *const c_int, root: *const c_int, comm: *const c_int, newcomm: *mut c_int, ierror: *mut c_int, port_name_len: usize) {
    // SAFETY: the caller's INTEGERs.
    let (i, r, c) = unsafe { (*info, *root, *comm) };
    // SAFETY: a NUL-terminated string that lives through the call; `newcomm` is the caller's INTEGER.
    with_strings!(ierror, [port_name: port_name_len], |s: CString| unsafe { pick!(p, MPI_Comm_accept)(s.as_ptr(), i, r, c, newcomm) })
});

twin!(mpi_comm_connect_ / pmpi_comm_connect_ (p; port_name: *const c_char, info: *const c_int, root: *const c_int, comm: *const c_int, newcomm: *mut c_int, ierror: *mut c_int, port_name_len: usize) {
    // SAFETY: the caller's INTEGERs.
    let (i, r, c) = unsafe { (*info, *root, *comm) };
    // SAFETY: a NUL-terminated string that lives through the call; `newcomm` is the caller's INTEGER.
    with_strings!(ierror, [port_name: port_name_len], |s: CString| unsafe { pick!(p, MPI_Comm_connect)(s.as_ptr(), i, r, c, newcomm) })
});

twin!(mpi_publish_name_ / pmpi_publish_name_ (p; service_name: *const c_char, info: *const c_int, port_name: *const c_char, ierror: *mut c_int, service_name_len: usize, port_name_len: usize) {
    // SAFETY: the caller's INTEGER.
    let i = unsafe { *info };
    // SAFETY: NUL-terminated strings that live through the call.
    with_strings!(ierror, [service_name: service_name_len, port_name: port_name_len], |s: CString, t: CString| unsafe {
        pick!(p, MPI_Publish_name)(s.as_ptr(), i, t.as_ptr())
    })
});

twin!(mpi_unpublish_name_ / pmpi_unpublish_name_ (p; service_name: *const c_char, info: *const c_int, port_name: *const c_char, ierror: *mut c_int, service_name_len: usize, port_name_len: usize) {
    // SAFETY: the caller's INTEGER.
    let i = unsafe { *info };
    // SAFETY: NUL-terminated strings that live through the call.
    with_strings!(ierror, [service_name: service_name_len, port_name: port_name_len], |s: CString, t: CString| unsafe {
        pick!(p, MPI_Unpublish_name)(s.as_ptr(), i, t.as_ptr())
    })
});

twin!(mpi_lookup_name_ / pmpi_lookup_name_ (p; service_name: *const c_char, info: *const c_int, port_name: *mut c_char, ierror: *mut c_int, service_name_len: usize, port_name_len: usize) {
    // SAFETY: the caller's INTEGER.
    let i = unsafe { *info };
    // SAFETY: the service as a C string; the port as port_out's contract.
    let service = match unsafe { c_string(service_name, service_name_len) } {
        Ok(s) => s,
        // SAFETY: the caller's IERROR.
        Err(e) => return unsafe { set(ierror, e) },
    };
    // SAFETY: as above.
    unsafe { port_out(|s| pick!(p, MPI_Lookup_name)(service.as_ptr(), i, s), port_name, ierror, port_name_len) }
});
