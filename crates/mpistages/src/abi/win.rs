//! `MPI_Win_*`, `MPI_Put` and the other one-sided calls: C arguments to
//! `api::rma`. Errors go to the window's error handler
//! (`MPI_ERRORS_ARE_FATAL` unless the program set another).

use super::errors::{create_handler, valid_handler, HandlerFn};
use super::{cstr, get, mpi, mpi_fn, put, put_str, typed, typed_in, COMM_WORLD};
use crate::api::consts::err;
use crate::api::error::{fail, MpiError, MpiResult};
use crate::api::rma::{self, win, At, Memory};
use crate::api::usermem::TypedBuf;
use crate::api::{info, Mpi, ReqId, Tables};
use std::os::raw::{c_char, c_int, c_void};

/// Turns a window call's result into a return code, running the window's
/// error handler on an error.
/// An error about a handle that never named a window (`MPI_WIN_NULL`)
/// goes to `MPI_COMM_SELF`'s handler, as errors tied to no object do (MPI
/// 4.0, 9.3): a program that set `MPI_ERRORS_RETURN` there gets a code
/// back instead of the job ending. A window freed by the call that failed
/// (`MPI_Win_free` with a dead member) still has its own handler.
pub fn ret_win(name: &str, w: c_int, r: MpiResult<()>) -> c_int {
    match r {
        Ok(()) => err::SUCCESS,
        Err(e) if !win::ever_named(w) => super::raise(name, crate::api::consts::COMM_SELF, e),
        Err(e) => super::raise_on(name, w, win::errhandler(w), e),
    }
}

/// Runs `f` on window `h`.
fn with<T>(h: c_int, f: impl FnOnce(&Mpi, &mut win::Win) -> MpiResult<T>) -> MpiResult<T> {
    let m = mpi()?;
    let w = win::get(h)?;
    let mut g = win::lock(&w);
    f(m, &mut g)
}

fn size_arg(size: isize, what: &str) -> MpiResult<usize> {
    usize::try_from(size).or_else(|_| fail(err::SIZE, format!("{what} {size} is negative")))
}

mpi_fn!(fn MPI_Win_create / PMPI_Win_create(base: *mut c_void, size: isize, disp_unit: c_int, info_h: c_int, comm: c_int, win_out: *mut c_int) {
    let r = mpi().and_then(|m| {
        let size = size_arg(size, "window size")?;
        let hints = info::get_or_empty(info_h)?;
        let (h, _) = rma::create(m, comm, Memory::Given { base: base as usize, size }, disp_unit.into(), hints)?;
        // SAFETY: caller's out-pointer.
        unsafe { put(win_out, h) }
    });
    super::ret("MPI_Win_create", comm, r)
});

mpi_fn!(fn MPI_Win_allocate / PMPI_Win_allocate(size: isize, disp_unit: c_int, info_h: c_int, comm: c_int, baseptr: *mut c_void, win_out: *mut c_int) {
    let r = mpi().and_then(|m| {
        let size = size_arg(size, "window size")?;
        let hints = info::get_or_empty(info_h)?;
        let (h, base) = rma::create(m, comm, Memory::Allocate { size }, disp_unit.into(), hints)?;
        // SAFETY: caller's out-pointers; `baseptr` points to a pointer, as
        // the standard's `void *baseptr` does.
        unsafe {
            put(baseptr as *mut usize, base)?;
            put(win_out, h)
        }
    });
    super::ret("MPI_Win_allocate", comm, r)
});

mpi_fn!(fn MPI_Win_allocate_shared / PMPI_Win_allocate_shared(size: isize, disp_unit: c_int, info_h: c_int, comm: c_int, baseptr: *mut c_void, win_out: *mut c_int) {
    let r = mpi().and_then(|m| {
        let size = size_arg(size, "window size")?;
        let hints = info::get_or_empty(info_h)?;
        let (h, base) = rma::create(m, comm, Memory::Shared { size }, disp_unit.into(), hints)?;
        // SAFETY: caller's out-pointers, as for MPI_Win_allocate.
        unsafe {
            put(baseptr as *mut usize, base)?;
            put(win_out, h)
        }
    });
    super::ret("MPI_Win_allocate_shared", comm, r)
});

mpi_fn!(fn MPI_Win_shared_query / PMPI_Win_shared_query(w: c_int, rank: c_int, size: *mut isize, disp_unit: *mut c_int, baseptr: *mut c_void) {
    let r = with(w, |_, win| rma::shared_query(win, rank)).and_then(|(s, u, b)| {
        // SAFETY: caller's out-pointers; `baseptr` points to a pointer.
        unsafe {
            put(size, s as isize)?;
            put(disp_unit, u as c_int)?;
            put(baseptr as *mut usize, b)
        }
    });
    ret_win("MPI_Win_shared_query", w, r)
});

mpi_fn!(fn MPI_Win_create_dynamic / PMPI_Win_create_dynamic(info_h: c_int, comm: c_int, win_out: *mut c_int) {
    let r = mpi().and_then(|m| {
        let hints = info::get_or_empty(info_h)?;
        let (h, _) = rma::create(m, comm, Memory::Dynamic, 1, hints)?;
        // SAFETY: caller's out-pointer.
        unsafe { put(win_out, h) }
    });
    super::ret("MPI_Win_create_dynamic", comm, r)
});

mpi_fn!(fn MPI_Win_attach / PMPI_Win_attach(w: c_int, base: *mut c_void, size: isize) {
    let r = size_arg(size, "region size").and_then(|size| with(w, |_, win| rma::attach(win, base as usize, size)));
    ret_win("MPI_Win_attach", w, r)
});

mpi_fn!(fn MPI_Win_detach / PMPI_Win_detach(w: c_int, base: *const c_void) {
    ret_win("MPI_Win_detach", w, with(w, |_, win| rma::detach(win, base as usize)))
});

mpi_fn!(fn MPI_Win_free / PMPI_Win_free(w: *mut c_int) {
    // SAFETY: caller's in/out pointer.
    let h = match unsafe { get(w) } {
        Ok(h) => h,
        Err(e) => return ret_win("MPI_Win_free", win::WIN_NULL, Err(e)),
    };
    if let Ok(m) = mpi() {
        if let Err(rc) = super::attr::delete_all_or_raise("MPI_Win_free", m, crate::api::attr::Kind::Win, h) {
            return rc;
        }
    }
    let r = mpi().and_then(|m| rma::free(m, h));
    // Released even when the free failed (a dead member under ULFM).
    let r = if win::get(h).is_err() {
        // SAFETY: as above.
        r.and(unsafe { put(w, win::WIN_NULL) })
    } else {
        r
    };
    ret_win("MPI_Win_free", h, r)
});

/// The target side of a call's arguments.
fn at(m: &Mpi, rank: c_int, disp: isize, count: c_int, dtype: c_int) -> MpiResult<At> {
    at_in(&m.tables(), rank, disp, count, dtype)
}

/// `at` with the tables already held.
fn at_in(tables: &Tables, rank: c_int, disp: isize, count: c_int, dtype: c_int) -> MpiResult<At> {
    let count = usize::try_from(count)
        .or_else(|_| fail(err::COUNT, format!("target count {count} is negative")))?;
    Ok(At {
        rank,
        disp: disp as i64,
        count,
        dtype: tables.dtype(dtype)?,
    })
}

/// An origin buffer.
///
/// # Safety
/// The caller's buffer, valid until the operation completes (the end of
/// its epoch, or its request).
unsafe fn origin(m: &Mpi, buf: *const c_void, count: c_int, dtype: c_int) -> MpiResult<TypedBuf> {
    // SAFETY: forwarded.
    unsafe { typed(m, buf, count, dtype) }
}

fn put_request(req: *mut c_int, id: Option<ReqId>) -> MpiResult<()> {
    let m = mpi()?;
    // An operation on MPI_PROC_NULL: a request complete at once.
    let id = id.unwrap_or_else(|| crate::api::p2p::completed(m, COMM_WORLD));
    // SAFETY: caller's out-pointer.
    unsafe { put(req, super::request::handle(id)) }
}

/// Defines `MPI_Put` / `MPI_Get` / `MPI_Accumulate` and their request
/// twins.
macro_rules! transfer {
    ($($name:ident / $pname:ident => $kind:ident $(($op:ident))? $(, request $req:ident)?;)*) => {$(
        mpi_fn!(fn $name / $pname(obuf: *mut c_void, ocount: c_int, otype: c_int, rank: c_int, disp: isize, tcount: c_int, ttype: c_int, $($op: c_int,)? w: c_int $(, $req: *mut c_int)?) {
            let r = with(w, |m, win| {
                // Both datatypes under one lock of the tables.
                let tables = m.tables();
                // SAFETY: the program keeps its buffer until the operation completes.
                let o = unsafe { typed_in(&tables, obuf, ocount, otype)? };
                let t = at_in(&tables, rank, disp, tcount, ttype)?;
                drop(tables);
                let user = transfer!(@user $($req)?);
                let id = transfer!(@do $kind m, win, o, t, user $(, $op)?)?;
                $(put_request($req, id)?;)?
                let _ = id;
                Ok(())
            });
            ret_win(stringify!($name), w, r)
        });
    )*};
    (@user) => { false };
    (@user $r:ident) => { true };
    (@do put $m:ident, $w:ident, $o:ident, $t:ident, $user:ident) => { rma::put($m, $w, &$o, &$t, $user) };
    (@do get $m:ident, $w:ident, $o:ident, $t:ident, $user:ident) => { rma::get($m, $w, $o, &$t, $user) };
    (@do acc $m:ident, $w:ident, $o:ident, $t:ident, $user:ident, $op:ident) => { rma::accumulate($m, $w, &$o, &$t, $op, $user) };
}

transfer! {
    MPI_Put / PMPI_Put => put;
    MPI_Get / PMPI_Get => get;
    MPI_Accumulate / PMPI_Accumulate => acc (op);
    MPI_Rput / PMPI_Rput => put, request req;
    MPI_Rget / PMPI_Rget => get, request req;
    MPI_Raccumulate / PMPI_Raccumulate => acc (op), request req;
}

/// `MPI_Get_accumulate` and `MPI_Rget_accumulate`.
///
/// # Safety
/// The caller's buffers, valid until the operation completes.
#[allow(clippy::too_many_arguments)]
unsafe fn get_accumulate(
    obuf: *const c_void,
    ocount: c_int,
    otype: c_int,
    rbuf: *mut c_void,
    rcount: c_int,
    rtype: c_int,
    rank: c_int,
    disp: isize,
    tcount: c_int,
    ttype: c_int,
    o: c_int,
    w: c_int,
    user: bool,
) -> MpiResult<Option<ReqId>> {
    with(w, |m, win| {
        let origin = if o == crate::api::consts::op::NO_OP {
            None
        } else {
            // SAFETY: forwarded.
            Some(unsafe { origin(m, obuf, ocount, otype)? })
        };
        // SAFETY: forwarded.
        let result = unsafe { typed(m, rbuf, rcount, rtype)? };
        let t = at(m, rank, disp, tcount, ttype)?;
        rma::get_accumulate(m, win, origin.as_ref(), result, &t, o, user)
    })
}

mpi_fn!(fn MPI_Get_accumulate / PMPI_Get_accumulate(obuf: *const c_void, ocount: c_int, otype: c_int, rbuf: *mut c_void, rcount: c_int, rtype: c_int, rank: c_int, disp: isize, tcount: c_int, ttype: c_int, o: c_int, w: c_int) {
    // SAFETY: the program's buffers, kept until the epoch ends.
    let r = unsafe { get_accumulate(obuf, ocount, otype, rbuf, rcount, rtype, rank, disp, tcount, ttype, o, w, false) };
    ret_win("MPI_Get_accumulate", w, r.map(|_| ()))
});

mpi_fn!(fn MPI_Rget_accumulate / PMPI_Rget_accumulate(obuf: *const c_void, ocount: c_int, otype: c_int, rbuf: *mut c_void, rcount: c_int, rtype: c_int, rank: c_int, disp: isize, tcount: c_int, ttype: c_int, o: c_int, w: c_int, req: *mut c_int) {
    // SAFETY: the program's buffers, kept until the request completes.
    let r = unsafe { get_accumulate(obuf, ocount, otype, rbuf, rcount, rtype, rank, disp, tcount, ttype, o, w, true) };
    ret_win("MPI_Rget_accumulate", w, r.and_then(|id| put_request(req, id)))
});

mpi_fn!(fn MPI_Fetch_and_op / PMPI_Fetch_and_op(obuf: *const c_void, rbuf: *mut c_void, dtype: c_int, rank: c_int, disp: isize, o: c_int, w: c_int) {
    // SAFETY: the program's buffers, one element each, kept until the epoch ends.
    let r = unsafe { get_accumulate(obuf, 1, dtype, rbuf, 1, dtype, rank, disp, 1, dtype, o, w, false) };
    ret_win("MPI_Fetch_and_op", w, r.map(|_| ()))
});

mpi_fn!(fn MPI_Compare_and_swap / PMPI_Compare_and_swap(obuf: *const c_void, cbuf: *const c_void, rbuf: *mut c_void, dtype: c_int, rank: c_int, disp: isize, w: c_int) {
    let r = with(w, |m, win| {
        // SAFETY: the program's buffers, one element each, kept until the epoch ends.
        let (new, compare, result) = unsafe {
            (typed(m, obuf, 1, dtype)?, typed(m, cbuf, 1, dtype)?, typed(m, rbuf, 1, dtype)?)
        };
        let t = at(m, rank, disp, 1, dtype)?;
        rma::compare_and_swap(m, win, &new, &compare, result, &t)
    });
    ret_win("MPI_Compare_and_swap", w, r)
});

mpi_fn!(fn MPI_Win_fence / PMPI_Win_fence(a: c_int, w: c_int) {
    ret_win("MPI_Win_fence", w, with(w, |m, win| rma::fence(m, win, a)))
});

mpi_fn!(fn MPI_Win_lock / PMPI_Win_lock(kind: c_int, rank: c_int, a: c_int, w: c_int) {
    ret_win("MPI_Win_lock", w, with(w, |m, win| rma::lock(m, win, kind, rank, a)))
});

mpi_fn!(fn MPI_Win_unlock / PMPI_Win_unlock(rank: c_int, w: c_int) {
    ret_win("MPI_Win_unlock", w, with(w, |m, win| rma::unlock(m, win, rank)))
});

mpi_fn!(fn MPI_Win_lock_all / PMPI_Win_lock_all(a: c_int, w: c_int) {
    ret_win("MPI_Win_lock_all", w, with(w, |m, win| rma::lock_all(m, win, a)))
});

mpi_fn!(fn MPI_Win_unlock_all / PMPI_Win_unlock_all(w: c_int) {
    ret_win("MPI_Win_unlock_all", w, with(w, rma::unlock_all))
});

mpi_fn!(fn MPI_Win_flush / PMPI_Win_flush(rank: c_int, w: c_int) {
    ret_win("MPI_Win_flush", w, with(w, |m, win| rma::flush(m, win, Some(rank), false)))
});

mpi_fn!(fn MPI_Win_flush_all / PMPI_Win_flush_all(w: c_int) {
    ret_win("MPI_Win_flush_all", w, with(w, |m, win| rma::flush(m, win, None, false)))
});

mpi_fn!(fn MPI_Win_flush_local / PMPI_Win_flush_local(rank: c_int, w: c_int) {
    ret_win("MPI_Win_flush_local", w, with(w, |m, win| rma::flush(m, win, Some(rank), true)))
});

mpi_fn!(fn MPI_Win_flush_local_all / PMPI_Win_flush_local_all(w: c_int) {
    ret_win("MPI_Win_flush_local_all", w, with(w, |m, win| rma::flush(m, win, None, true)))
});

// The memory is one copy (the unified model): a fence of this thread's
// loads and stores is all a sync needs.
mpi_fn!(fn MPI_Win_sync / PMPI_Win_sync(w: c_int) {
    let r = win::get(w).map(|_| std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst));
    ret_win("MPI_Win_sync", w, r)
});

/// A group's members as ranks of the window.
fn group_ranks(m: &Mpi, win: &win::Win, g: c_int) -> MpiResult<Vec<usize>> {
    let group = m.tables().group(g)?;
    rma::ranks_of(win, &group.members)
}

mpi_fn!(fn MPI_Win_post / PMPI_Win_post(g: c_int, a: c_int, w: c_int) {
    ret_win("MPI_Win_post", w, with(w, |m, win| {
        let ranks = group_ranks(m, win, g)?;
        rma::post(m, win, ranks, a)
    }))
});

mpi_fn!(fn MPI_Win_start / PMPI_Win_start(g: c_int, a: c_int, w: c_int) {
    ret_win("MPI_Win_start", w, with(w, |m, win| {
        let ranks = group_ranks(m, win, g)?;
        rma::start(m, win, ranks, a)
    }))
});

mpi_fn!(fn MPI_Win_complete / PMPI_Win_complete(w: c_int) {
    ret_win("MPI_Win_complete", w, with(w, rma::complete))
});

mpi_fn!(fn MPI_Win_wait / PMPI_Win_wait(w: c_int) {
    ret_win("MPI_Win_wait", w, with(w, |m, win| rma::wait(m, win, true).map(|_| ())))
});

mpi_fn!(fn MPI_Win_test / PMPI_Win_test(w: c_int, flag: *mut c_int) {
    let r = with(w, |m, win| rma::wait(m, win, false)).and_then(|done| {
        // SAFETY: caller's out-pointer.
        unsafe { put(flag, done as c_int) }
    });
    ret_win("MPI_Win_test", w, r)
});

mpi_fn!(fn MPI_Win_get_group / PMPI_Win_get_group(w: c_int, group: *mut c_int) {
    let r = with(w, |m, win| {
        let g = (*win.comm.group).clone();
        let h = m.tables().add_group(g);
        // SAFETY: caller's out-pointer.
        unsafe { put(group, h) }
    });
    ret_win("MPI_Win_get_group", w, r)
});

mpi_fn!(fn MPI_Win_set_name / PMPI_Win_set_name(w: c_int, name: *const c_char) {
    // SAFETY: caller's NUL-terminated string.
    let r = unsafe { cstr(name) }.and_then(|n| with(w, |_, win| {
        win.name = n;
        Ok(())
    }));
    ret_win("MPI_Win_set_name", w, r)
});

mpi_fn!(fn MPI_Win_get_name / PMPI_Win_get_name(w: c_int, name: *mut c_char, len: *mut c_int) {
    let r = with(w, |_, win| Ok(win.name.clone())).and_then(|n| {
        let mut l = 0;
        // SAFETY: caller's buffer of MPI_MAX_OBJECT_NAME bytes and out-pointer.
        unsafe {
            put_str(&n, name, super::comm::MAX_OBJECT_NAME, &mut l)?;
            put(len, l as c_int)
        }
    });
    ret_win("MPI_Win_get_name", w, r)
});

mpi_fn!(fn MPI_Win_set_info / PMPI_Win_set_info(w: c_int, info_h: c_int) {
    let r = info::get_or_empty(info_h).and_then(|i| with(w, |_, win| {
        win::merge_info(&mut win.info, &i);
        Ok(())
    }));
    ret_win("MPI_Win_set_info", w, r)
});

mpi_fn!(fn MPI_Win_get_info / PMPI_Win_get_info(w: c_int, info_h: *mut c_int) {
    let r = with(w, |_, win| Ok(win.info.clone())).map(info::add);
    // SAFETY: caller's out-pointer.
    ret_win("MPI_Win_get_info", w, r.and_then(|h| unsafe { put(info_h, h) }))
});

/// The predefined window attributes (`MPI_WIN_BASE` ...), as mpi.h
/// numbers them.
pub mod keys {
    pub const BASE: i32 = 8;
    pub const SIZE: i32 = 9;
    pub const DISP_UNIT: i32 = 10;
    pub const CREATE_FLAVOR: i32 = 11;
    pub const MODEL: i32 = 12;
}

/// The values the predefined attributes point to, per window handle
/// (they must outlive the call that returns their address).
static ATTR_VALUES: std::sync::Mutex<Vec<(c_int, Box<[isize; 4]>)>> =
    std::sync::Mutex::new(Vec::new());

mpi_fn!(fn MPI_Win_get_attr / PMPI_Win_get_attr(w: c_int, key: c_int, value: *mut c_void, flag: *mut c_int) {
    if super::attr::is_user_key(key) {
        let r = super::attr::get_value(crate::api::attr::Kind::Win, w, key)
            // SAFETY: the standard's `void **` and int* out-pointers.
            .and_then(|v| unsafe { super::attr::put_c_attr(v, value, flag) });
        return ret_win("MPI_Win_get_attr", w, r);
    }
    let r = with(w, |_, win| Ok((win.base, win.size as isize, win.disp_unit as isize, win.flavor as isize))).and_then(|(base, size, unit, flavor)| {
        let mut t = ATTR_VALUES.lock().unwrap_or_else(|p| p.into_inner());
        t.retain(|(h, _)| *h != w);
        t.push((w, Box::new([size, unit, flavor, win::UNIFIED as isize])));
        let vals = &t.last().expect("pushed").1;
        // The size is an MPI_Aint, the others ints (read as their first
        // bytes, little-endian).
        let got: Option<usize> = match key {
            keys::BASE => Some(base),
            keys::SIZE => Some(&vals[0] as *const isize as usize),
            keys::DISP_UNIT => Some(&vals[1] as *const isize as usize),
            keys::CREATE_FLAVOR => Some(&vals[2] as *const isize as usize),
            keys::MODEL => Some(&vals[3] as *const isize as usize),
            _ => None,
        };
        if got.is_none() && key < crate::api::attr::FIRST_USER_KEY {
            return fail(err::KEYVAL, format!("{key} is not a window attribute"));
        }
        // SAFETY: caller's out-pointers: `value` points to a pointer.
        unsafe {
            if let Some(v) = got {
                put(value as *mut usize, v)?;
            }
            put(flag, got.is_some() as c_int)
        }
    });
    ret_win("MPI_Win_get_attr", w, r)
});

mpi_fn!(fn MPI_Win_create_errhandler / PMPI_Win_create_errhandler(f: Option<HandlerFn>, out: *mut c_int) {
    ret_win("MPI_Win_create_errhandler", win::WIN_NULL, create_handler(f, out))
});

mpi_fn!(fn MPI_Win_set_errhandler / PMPI_Win_set_errhandler(w: c_int, eh: c_int) {
    let r = if valid_handler(eh) {
        win::set_errhandler(w, eh)
    } else {
        fail(err::ARG, format!("invalid error handler {eh}"))
    };
    ret_win("MPI_Win_set_errhandler", w, r)
});

mpi_fn!(fn MPI_Win_get_errhandler / PMPI_Win_get_errhandler(w: c_int, eh: *mut c_int) {
    // SAFETY: caller's out-pointer.
    let r = win::get(w).and_then(|_| unsafe { put(eh, win::errhandler(w)) });
    ret_win("MPI_Win_get_errhandler", w, r)
});

mpi_fn!(fn MPI_Win_call_errhandler / PMPI_Win_call_errhandler(w: c_int, code: c_int) {
    if let Err(e) = win::get(w) {
        return ret_win("MPI_Win_call_errhandler", win::WIN_NULL, Err(e));
    }
    let e = MpiError::new(code, super::errors::text_of(code));
    ret_win("MPI_Win_call_errhandler", w, Err(e));
    err::SUCCESS
});
