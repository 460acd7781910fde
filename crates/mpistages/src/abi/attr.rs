//! Attributes on communicators and datatypes: keyvals, set/get/delete, and
//! the copy and delete callbacks run when an object is duplicated or freed
//! (`copy_all`, `delete_all`), always with the tables unlocked.

use super::{get, mpi, mpi_fn, put, raise, ret, NO_OBJECT};
use crate::api::attr::{Copy, Keyval, Kind, Lang, FIRST_USER_KEY, KEYVAL_INVALID};
use crate::api::consts::{err, COMM_WORLD};
use crate::api::error::{fail, MpiError, MpiResult};
use crate::api::Mpi;
use std::os::raw::{c_int, c_void};

/// `int copy(handle, keyval, extra_state, value_in, value_out, flag)`.
pub type CopyFn =
    unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
/// `int delete(handle, keyval, value, extra_state)`.
pub type DeleteFn = unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void) -> c_int;
/// Fortran: `SUBROUTINE COPY(OLD, KEYVAL, EXTRA, VAL_IN, VAL_OUT, FLAG, IERROR)`, all by reference.
pub type FortranCopyFn = unsafe extern "C" fn(
    *const c_int,
    *const c_int,
    *const isize,
    *const isize,
    *mut isize,
    *mut c_int,
    *mut c_int,
);
/// Fortran: `SUBROUTINE DELETE(OBJ, KEYVAL, VAL, EXTRA, IERROR)`, all by reference.
pub type FortranDeleteFn =
    unsafe extern "C" fn(*const c_int, *const c_int, *const isize, *const isize, *mut c_int);

macro_rules! predefined_callbacks {
    ($null_copy:ident, $dup:ident, $null_delete:ident) => {
        /// # Safety
        /// Called by MPI as a copy callback; writes `flag`.
        #[no_mangle]
        pub unsafe extern "C" fn $null_copy(
            _: c_int,
            _: c_int,
            _: *mut c_void,
            _: *mut c_void,
            _: *mut c_void,
            flag: *mut c_int,
        ) -> c_int {
            // SAFETY: MPI passes a valid flag pointer.
            unsafe { flag.write(0) };
            err::SUCCESS
        }
        /// # Safety
        /// Called by MPI as a copy callback; `out` is a `void **`.
        #[no_mangle]
        pub unsafe extern "C" fn $dup(
            _: c_int,
            _: c_int,
            _: *mut c_void,
            value: *mut c_void,
            out: *mut c_void,
            flag: *mut c_int,
        ) -> c_int {
            // SAFETY: MPI passes a `void **` for the copy and a flag pointer.
            unsafe {
                (out as *mut *mut c_void).write(value);
                flag.write(1);
            }
            err::SUCCESS
        }
        /// # Safety
        /// Called by MPI as a delete callback; touches nothing.
        #[no_mangle]
        pub unsafe extern "C" fn $null_delete(
            _: c_int,
            _: c_int,
            _: *mut c_void,
            _: *mut c_void,
        ) -> c_int {
            err::SUCCESS
        }
    };
}

predefined_callbacks!(
    MPI_COMM_NULL_COPY_FN,
    MPI_COMM_DUP_FN,
    MPI_COMM_NULL_DELETE_FN
);
predefined_callbacks!(
    MPI_TYPE_NULL_COPY_FN,
    MPI_TYPE_DUP_FN,
    MPI_TYPE_NULL_DELETE_FN
);
predefined_callbacks!(MPI_WIN_NULL_COPY_FN, MPI_WIN_DUP_FN, MPI_WIN_NULL_DELETE_FN);

fn copy_kind(f: usize) -> Copy {
    let is = |g: CopyFn| f == g as usize;
    if f == 0 || is(MPI_COMM_NULL_COPY_FN) || is(MPI_TYPE_NULL_COPY_FN) || is(MPI_WIN_NULL_COPY_FN)
    {
        Copy::Null
    } else if is(MPI_COMM_DUP_FN) || is(MPI_TYPE_DUP_FN) || is(MPI_WIN_DUP_FN) {
        Copy::Dup
    } else {
        Copy::User(f)
    }
}

fn delete_kind(f: usize) -> Option<usize> {
    let is = |g: DeleteFn| f == g as usize;
    if f == 0
        || is(MPI_COMM_NULL_DELETE_FN)
        || is(MPI_TYPE_NULL_DELETE_FN)
        || is(MPI_WIN_NULL_DELETE_FN)
    {
        None
    } else {
        Some(f)
    }
}

/// Makes a keyval; `copy`/`delete` are the callbacks' addresses (0 for none).
pub fn create_keyval(
    kind: Kind,
    lang: Lang,
    copy: usize,
    delete: usize,
    extra: usize,
) -> MpiResult<i32> {
    let m = mpi()?;
    let k = Keyval {
        kind,
        lang,
        copy: copy_kind(copy),
        delete: delete_kind(delete),
        extra,
    };
    Ok(m.tables().attrs.create_key(k))
}

pub fn free_keyval(kind: Kind, key: i32) -> MpiResult<()> {
    mpi()?.tables().attrs.free_key(kind, key)
}

/// Checks the object exists.
fn check_obj(m: &Mpi, kind: Kind, obj: i32) -> MpiResult<()> {
    let t = m.tables();
    match kind {
        Kind::Comm => t.comm(obj).map(|_| ()),
        Kind::Type => t.any_dtype(obj).map(|_| ()),
        Kind::Win => crate::api::rma::win::get(obj).map(|_| ()),
    }
}

/// Runs a key's delete callback on a value.
fn call_delete(k: &Keyval, obj: i32, key: i32, value: usize) -> MpiResult<()> {
    let Some(f) = k.delete else { return Ok(()) };
    let rc = match k.lang {
        Lang::C => {
            // SAFETY: the program registered `f` as a delete callback of this
            // C signature with MPI_*_create_keyval.
            let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(f) };
            // SAFETY: the callback gets the values the program stored.
            unsafe { f(obj, key, value as *mut c_void, k.extra as *mut c_void) }
        }
        Lang::Fortran | Lang::FortranInt => {
            // SAFETY: registered from Fortran with this calling convention.
            let f: FortranDeleteFn = unsafe { std::mem::transmute::<usize, FortranDeleteFn>(f) };
            let (v, x, mut ierr) = (value as isize, k.extra as isize, 0);
            // SAFETY: every argument is a local the callback reads.
            unsafe { f(&obj, &key, &v, &x, &mut ierr) };
            ierr
        }
    };
    if rc != err::SUCCESS {
        return Err(MpiError::new(
            rc,
            format!("the delete callback of attribute key {key} returned {rc}"),
        ));
    }
    Ok(())
}

/// Runs a key's copy callback: `Some(new value)` if the attribute is copied.
fn call_copy(k: &Keyval, old: i32, key: i32, value: usize) -> MpiResult<Option<usize>> {
    let f = match k.copy {
        Copy::Null => return Ok(None),
        Copy::Dup => return Ok(Some(value)),
        Copy::User(f) => f,
    };
    let (rc, flag, out) = match k.lang {
        Lang::C => {
            let (mut out, mut flag): (*mut c_void, c_int) = (std::ptr::null_mut(), 0);
            // SAFETY: registered as a copy callback of this C signature.
            let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(f) };
            // SAFETY: `out` and `flag` are locals the callback writes.
            let rc = unsafe {
                f(
                    old,
                    key,
                    k.extra as *mut c_void,
                    value as *mut c_void,
                    &mut out as *mut *mut c_void as *mut c_void,
                    &mut flag,
                )
            };
            (rc, flag, out as usize)
        }
        Lang::Fortran | Lang::FortranInt => {
            // SAFETY: registered from Fortran with this calling convention.
            let f: FortranCopyFn = unsafe { std::mem::transmute::<usize, FortranCopyFn>(f) };
            let (v, x, mut out, mut flag, mut ierr) =
                (value as isize, k.extra as isize, 0isize, 0, 0);
            // SAFETY: every argument is a local.
            unsafe { f(&old, &key, &x, &v, &mut out, &mut flag, &mut ierr) };
            (ierr, flag, out as usize)
        }
    };
    if rc != err::SUCCESS {
        return Err(MpiError::new(
            rc,
            format!("the copy callback of attribute key {key} returned {rc}"),
        ));
    }
    Ok((flag != 0).then_some(out))
}

pub fn set(kind: Kind, obj: i32, key: i32, value: usize) -> MpiResult<()> {
    let m = mpi()?;
    check_obj(m, kind, obj)?;
    let k = m.tables().attrs.key(kind, key)?;
    if let Some(old) = m.tables().attrs.get(kind, obj, key) {
        call_delete(&k, obj, key, old)?;
    }
    m.tables().attrs.set(kind, obj, key, value);
    Ok(())
}

/// `Some(value)` if the attribute is set.
pub fn get_value(kind: Kind, obj: i32, key: i32) -> MpiResult<Option<usize>> {
    let m = mpi()?;
    check_obj(m, kind, obj)?;
    let t = m.tables();
    t.attrs.key(kind, key)?;
    Ok(t.attrs.get(kind, obj, key))
}

pub fn delete(kind: Kind, obj: i32, key: i32) -> MpiResult<()> {
    let m = mpi()?;
    check_obj(m, kind, obj)?;
    let k = m.tables().attrs.key(kind, key)?;
    let Some(v) = m.tables().attrs.get(kind, obj, key) else {
        return fail(
            err::KEYVAL,
            format!("attribute key {key} is not set on this {}", kind.name()),
        );
    };
    call_delete(&k, obj, key, v)?;
    m.tables().attrs.remove(kind, obj, key);
    Ok(())
}

/// Copies the attributes of `old` to `new` (a dup), by their copy callbacks.
pub fn copy_all(m: &Mpi, kind: Kind, old: i32, new: i32) -> MpiResult<()> {
    let attrs = m.tables().attrs.all(kind, old);
    for a in attrs {
        let k = m.tables().attrs.key_of_attr(a.key);
        if let Some(v) = call_copy(&k, old, a.key, a.value)? {
            m.tables().attrs.set(kind, new, a.key, v);
        }
    }
    Ok(())
}

/// Deletes every attribute of an object being freed, the last set first.
pub fn delete_all(m: &Mpi, kind: Kind, obj: i32) -> MpiResult<()> {
    let attrs = m.tables().attrs.all(kind, obj);
    for a in attrs.into_iter().rev() {
        let k = m.tables().attrs.key_of_attr(a.key);
        call_delete(&k, obj, a.key, a.value)?;
        m.tables().attrs.remove(kind, obj, a.key);
    }
    Ok(())
}

/// # Safety
/// `out` is NULL or an int out-pointer.
unsafe fn new_key(
    name: &str,
    out: *mut c_int,
    kind: Kind,
    lang: Lang,
    copy: usize,
    del: usize,
    extra: usize,
) -> c_int {
    let r = create_keyval(kind, lang, copy, del, extra)
        // SAFETY: caller's out-pointer.
        .and_then(|k| unsafe { put(out, k) });
    ret(name, NO_OBJECT, r)
}

/// # Safety
/// `key` is NULL or an int in/out pointer.
unsafe fn free_key(name: &str, key: *mut c_int, kind: Kind) -> c_int {
    let r = (|| {
        // SAFETY: caller's in/out pointer.
        free_keyval(kind, unsafe { get(key)? })?;
        // SAFETY: as above.
        unsafe { put(key, KEYVAL_INVALID) }
    })();
    ret(name, NO_OBJECT, r)
}

/// Writes a C attribute lookup's results: the stored `void *` and the flag.
///
/// # Safety
/// `value` is a `void **` (as `void *` by the standard's signature), `flag` an int*.
pub unsafe fn put_c_attr(
    found: Option<usize>,
    value: *mut c_void,
    flag: *mut c_int,
) -> MpiResult<()> {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        put(flag, found.is_some() as c_int)?;
        if let Some(v) = found {
            put(value as *mut *mut c_void, v as *mut c_void)?;
        }
    }
    Ok(())
}

fn err_obj(kind: Kind, obj: i32) -> i32 {
    if kind == Kind::Comm {
        obj
    } else {
        COMM_WORLD
    }
}

mpi_fn!(fn MPI_Comm_create_keyval / PMPI_Comm_create_keyval(copy: Option<CopyFn>, del: Option<DeleteFn>, key: *mut c_int, extra: *mut c_void) {
    // SAFETY: caller's out-pointer.
    unsafe { new_key("MPI_Comm_create_keyval", key, Kind::Comm, Lang::C, copy.map_or(0, |f| f as usize), del.map_or(0, |f| f as usize), extra as usize) }
});

mpi_fn!(fn MPI_Keyval_create / PMPI_Keyval_create(copy: Option<CopyFn>, del: Option<DeleteFn>, key: *mut c_int, extra: *mut c_void) {
    // SAFETY: caller's out-pointer.
    unsafe { new_key("MPI_Keyval_create", key, Kind::Comm, Lang::C, copy.map_or(0, |f| f as usize), del.map_or(0, |f| f as usize), extra as usize) }
});

mpi_fn!(fn MPI_Type_create_keyval / PMPI_Type_create_keyval(copy: Option<CopyFn>, del: Option<DeleteFn>, key: *mut c_int, extra: *mut c_void) {
    // SAFETY: caller's out-pointer.
    unsafe { new_key("MPI_Type_create_keyval", key, Kind::Type, Lang::C, copy.map_or(0, |f| f as usize), del.map_or(0, |f| f as usize), extra as usize) }
});

mpi_fn!(fn MPI_Comm_free_keyval / PMPI_Comm_free_keyval(key: *mut c_int) {
    // SAFETY: caller's in/out pointer.
    unsafe { free_key("MPI_Comm_free_keyval", key, Kind::Comm) }
});

mpi_fn!(fn MPI_Keyval_free / PMPI_Keyval_free(key: *mut c_int) {
    // SAFETY: caller's in/out pointer.
    unsafe { free_key("MPI_Keyval_free", key, Kind::Comm) }
});

mpi_fn!(fn MPI_Type_free_keyval / PMPI_Type_free_keyval(key: *mut c_int) {
    // SAFETY: caller's in/out pointer.
    unsafe { free_key("MPI_Type_free_keyval", key, Kind::Type) }
});

mpi_fn!(fn MPI_Comm_set_attr / PMPI_Comm_set_attr(c: c_int, key: c_int, value: *mut c_void) {
    ret("MPI_Comm_set_attr", c, set(Kind::Comm, c, key, value as usize))
});

mpi_fn!(fn MPI_Attr_put / PMPI_Attr_put(c: c_int, key: c_int, value: *mut c_void) {
    ret("MPI_Attr_put", c, set(Kind::Comm, c, key, value as usize))
});

mpi_fn!(fn MPI_Type_set_attr / PMPI_Type_set_attr(t: c_int, key: c_int, value: *mut c_void) {
    ret("MPI_Type_set_attr", NO_OBJECT, set(Kind::Type, t, key, value as usize))
});

mpi_fn!(fn MPI_Comm_delete_attr / PMPI_Comm_delete_attr(c: c_int, key: c_int) {
    ret("MPI_Comm_delete_attr", c, delete(Kind::Comm, c, key))
});

mpi_fn!(fn MPI_Attr_delete / PMPI_Attr_delete(c: c_int, key: c_int) {
    ret("MPI_Attr_delete", c, delete(Kind::Comm, c, key))
});

mpi_fn!(fn MPI_Type_delete_attr / PMPI_Type_delete_attr(t: c_int, key: c_int) {
    ret("MPI_Type_delete_attr", NO_OBJECT, delete(Kind::Type, t, key))
});

mpi_fn!(fn MPI_Type_get_attr / PMPI_Type_get_attr(t: c_int, key: c_int, value: *mut c_void, flag: *mut c_int) {
    // SAFETY: the standard's `void **` and int* out-pointers.
    let r = get_value(Kind::Type, t, key).and_then(|v| unsafe { put_c_attr(v, value, flag) });
    ret("MPI_Type_get_attr", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Win_create_keyval / PMPI_Win_create_keyval(copy: Option<CopyFn>, del: Option<DeleteFn>, key: *mut c_int, extra: *mut c_void) {
    // SAFETY: caller's out-pointer.
    unsafe { new_key("MPI_Win_create_keyval", key, Kind::Win, Lang::C, copy.map_or(0, |f| f as usize), del.map_or(0, |f| f as usize), extra as usize) }
});

mpi_fn!(fn MPI_Win_free_keyval / PMPI_Win_free_keyval(key: *mut c_int) {
    // SAFETY: caller's in/out pointer.
    unsafe { free_key("MPI_Win_free_keyval", key, Kind::Win) }
});

mpi_fn!(fn MPI_Win_set_attr / PMPI_Win_set_attr(w: c_int, key: c_int, value: *mut c_void) {
    let r = set(Kind::Win, w, key, value as usize);
    super::win::ret_win("MPI_Win_set_attr", w, r)
});

mpi_fn!(fn MPI_Win_delete_attr / PMPI_Win_delete_attr(w: c_int, key: c_int) {
    super::win::ret_win("MPI_Win_delete_attr", w, delete(Kind::Win, w, key))
});

/// Whether `key` is a user key (the predefined ones are below them).
pub fn is_user_key(key: c_int) -> bool {
    key >= FIRST_USER_KEY
}

/// Runs the delete callbacks of an object that is being freed, reporting
/// a callback's error on `comm`'s handler; true if the object may go.
pub fn delete_all_or_raise(name: &str, m: &Mpi, kind: Kind, obj: i32) -> Result<(), c_int> {
    delete_all(m, kind, obj).map_err(|e| raise(name, err_obj(kind, obj), e))
}
