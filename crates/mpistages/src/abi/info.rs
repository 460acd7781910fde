//! `MPI_Info_*`: info objects (usable before `MPI_Init`, as MPI 4.0 allows).

use super::{cstr, get, mpi_fn, put, put_str, ret, NO_OBJECT};
use crate::api::consts::err;
use crate::api::error::{fail, MpiResult};
use crate::api::info::{self, Info, INFO_NULL, MAX_INFO_KEY};
use std::os::raw::{c_char, c_int};

fn done(name: &str, r: MpiResult<()>) -> c_int {
    // An error of no object (see `NO_OBJECT`).
    ret(name, NO_OBJECT, r)
}

mpi_fn!(fn MPI_Info_create / PMPI_Info_create(out: *mut c_int) {
    // SAFETY: caller's out-pointer.
    done("MPI_Info_create", unsafe { put(out, info::add(Info::default())) })
});

mpi_fn!(fn MPI_Info_create_env / PMPI_Info_create_env(_argc: c_int, _argv: *mut *mut c_char, out: *mut c_int) {
    let r = info::get_or_empty(info::INFO_ENV).map(info::add);
    // SAFETY: caller's out-pointer.
    done("MPI_Info_create_env", r.and_then(|h| unsafe { put(out, h) }))
});

mpi_fn!(fn MPI_Info_set / PMPI_Info_set(h: c_int, key: *const c_char, value: *const c_char) {
    let r = (|| {
        // SAFETY: caller's NUL-terminated strings.
        let (k, v) = unsafe { (cstr(key)?, cstr(value)?) };
        info::with(h, |i| i.set(&k, &v))
    })();
    done("MPI_Info_set", r)
});

mpi_fn!(fn MPI_Info_delete / PMPI_Info_delete(h: c_int, key: *const c_char) {
    // SAFETY: caller's NUL-terminated string.
    let r = unsafe { cstr(key) }.and_then(|k| info::with(h, |i| i.delete(&k)));
    done("MPI_Info_delete", r)
});

/// Looks `key` up: `Some(value)` or `None`, and the flag written.
///
/// # Safety
/// `key` is a C string, `flag` an out-pointer.
unsafe fn lookup(h: c_int, key: *const c_char, flag: *mut c_int) -> MpiResult<Option<String>> {
    // SAFETY: forwarded from this function's contract.
    let k = unsafe { cstr(key)? };
    let v = info::with(h, |i| Ok(i.get(&k)?.map(str::to_string)))?;
    // SAFETY: as above.
    unsafe { put(flag, v.is_some() as c_int)? };
    Ok(v)
}

mpi_fn!(fn MPI_Info_get / PMPI_Info_get(h: c_int, key: *const c_char, valuelen: c_int, value: *mut c_char, flag: *mut c_int) {
    let r = (|| {
        if valuelen < 0 {
            return fail(err::ARG, format!("valuelen {valuelen} is negative"));
        }
        // SAFETY: caller's string and out-pointer.
        if let Some(v) = unsafe { lookup(h, key, flag)? } {
            let mut len = 0;
            // SAFETY: the standard sizes `value` as valuelen + 1 bytes.
            unsafe { put_str(&v, value, valuelen as usize + 1, &mut len)? };
        }
        Ok(())
    })();
    done("MPI_Info_get", r)
});

mpi_fn!(fn MPI_Info_get_string / PMPI_Info_get_string(h: c_int, key: *const c_char, buflen: *mut c_int, value: *mut c_char, flag: *mut c_int) {
    let r = (|| {
        // SAFETY: caller's in/out pointer.
        let cap = unsafe { get(buflen)? };
        // SAFETY: caller's string and out-pointer.
        if let Some(v) = unsafe { lookup(h, key, flag)? } {
            if cap > 0 {
                let mut len = 0;
                // SAFETY: `value` holds `cap` bytes by the standard.
                unsafe { put_str(&v, value, cap as usize, &mut len)? };
            }
            // SAFETY: as above.
            unsafe { put(buflen, v.len() as c_int + 1)? };
        }
        Ok(())
    })();
    done("MPI_Info_get_string", r)
});

mpi_fn!(fn MPI_Info_get_valuelen / PMPI_Info_get_valuelen(h: c_int, key: *const c_char, valuelen: *mut c_int, flag: *mut c_int) {
    let r = (|| {
        // SAFETY: caller's string and out-pointers.
        if let Some(v) = unsafe { lookup(h, key, flag)? } {
            // SAFETY: as above.
            unsafe { put(valuelen, v.len() as c_int)? };
        }
        Ok(())
    })();
    done("MPI_Info_get_valuelen", r)
});

mpi_fn!(fn MPI_Info_get_nkeys / PMPI_Info_get_nkeys(h: c_int, nkeys: *mut c_int) {
    // SAFETY: caller's out-pointer.
    let r = info::with(h, |i| Ok(i.nkeys())).and_then(|n| unsafe { put(nkeys, n as c_int) });
    done("MPI_Info_get_nkeys", r)
});

mpi_fn!(fn MPI_Info_get_nthkey / PMPI_Info_get_nthkey(h: c_int, n: c_int, key: *mut c_char) {
    let r = info::with(h, |i| Ok(i.nth_key(n)?.to_string())).and_then(|k| {
        let mut len = 0;
        // SAFETY: the standard sizes `key` as MPI_MAX_INFO_KEY + 1 bytes.
        unsafe { put_str(&k, key, MAX_INFO_KEY + 1, &mut len) }
    });
    done("MPI_Info_get_nthkey", r)
});

mpi_fn!(fn MPI_Info_dup / PMPI_Info_dup(h: c_int, out: *mut c_int) {
    let r = info::with(h, |i| Ok(i.clone())).map(info::add);
    // SAFETY: caller's out-pointer.
    done("MPI_Info_dup", r.and_then(|n| unsafe { put(out, n) }))
});

mpi_fn!(fn MPI_Info_free / PMPI_Info_free(h: *mut c_int) {
    let r = (|| {
        // SAFETY: caller's in/out pointer.
        info::free(unsafe { get(h)? })?;
        // SAFETY: as above.
        unsafe { put(h, INFO_NULL) }
    })();
    done("MPI_Info_free", r)
});
