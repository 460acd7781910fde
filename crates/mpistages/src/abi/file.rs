//! `MPI_File_*` (MPI-IO): C arguments to
//! `api::file`. Errors go to the file's error handler (`MPI_ERRORS_RETURN`
//! unless the program set another), those of open and delete to
//! `MPI_FILE_NULL`'s.

use super::datarep::{file_bytes, from_file, repr};
use super::errors::{create_handler, valid_handler, HandlerFn};
use super::{cstr, get, mpi, mpi_fn, put, put_status, put_str, ret_file, typed, CStatus};
use crate::api::consts::err;
use crate::api::error::{fail, MpiError, MpiResult};
use crate::api::file::{self, At, File, ViewGiven, FILE_NULL};
use crate::api::usermem::TypedBuf;
use crate::api::{info, ReqId, Status};
use std::os::raw::{c_char, c_int, c_void};

/// Runs `f` on open file `fh`.
pub(super) fn with<T>(fh: c_int, f: impl FnOnce(&mut File) -> MpiResult<T>) -> MpiResult<T> {
    let file = file::get(fh)?;
    let mut g = file::lock(&file);
    f(&mut g)
}

mpi_fn!(fn MPI_File_open / PMPI_File_open(comm: c_int, name: *const c_char, amode: c_int, info_h: c_int, fh: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's NUL-terminated string.
        let name = unsafe { cstr(name)? };
        let hints = info::get_or_empty(info_h)?;
        let h = file::open(m, comm, &name, amode, hints)?;
        // SAFETY: caller's out-pointer.
        unsafe { put(fh, h) }
    });
    ret_file("MPI_File_open", FILE_NULL, r)
});

mpi_fn!(fn MPI_File_close / PMPI_File_close(fh: *mut c_int) {
    // SAFETY: caller's in/out pointer.
    let h = match unsafe { get(fh) } {
        Ok(h) => h,
        Err(e) => return ret_file("MPI_File_close", FILE_NULL, Err(e)),
    };
    let r = mpi().and_then(|m| file::close(m, h));
    // Released even when the close failed (a dead member under ULFM).
    let r = if file::get(h).is_err() {
        // SAFETY: as above.
        r.and(unsafe { put(fh, FILE_NULL) })
    } else {
        r
    };
    ret_file("MPI_File_close", h, r)
});

mpi_fn!(fn MPI_File_delete / PMPI_File_delete(name: *const c_char, _info: c_int) {
    // SAFETY: caller's NUL-terminated string.
    let r = unsafe { cstr(name) }.and_then(|n| file::delete(&n));
    ret_file("MPI_File_delete", FILE_NULL, r)
});

/// How an access is done: alone, or collectively with the file's other
/// members (`_all`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    Alone,
    All,
}

/// Writes `count` elements of `datatype` from `buf` at `at`.
///
/// # Safety
/// The buffer and status pointers are the caller's, valid for the call.
unsafe fn write(
    fh: c_int,
    at: At,
    how: How,
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
    status: *mut CStatus,
) -> MpiResult<()> {
    let m = mpi()?;
    // SAFETY: the caller's buffer stays valid for this blocking call.
    let data = unsafe { file_bytes(m, fh, buf, count, datatype)? };
    let n = match how {
        How::Alone => with(fh, |f| f.write(at, &data))?,
        How::All => {
            let placed = with(fh, |f| Ok(f.place_collective(true, at, data.len())))?;
            placed.write(m, &data)?
        }
    };
    // SAFETY: caller's status pointer or NULL.
    unsafe { put_status(status, &done(n)) };
    Ok(())
}

/// Reads up to `count` elements of `datatype` into `buf` from `at`.
///
/// # Safety
/// As for `write`.
unsafe fn read(
    fh: c_int,
    at: At,
    how: How,
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
    status: *mut CStatus,
) -> MpiResult<()> {
    let m = mpi()?;
    // SAFETY: the caller's buffer stays valid for this blocking call.
    let into: TypedBuf = unsafe { typed(m, buf, count, datatype)? };
    let len = into.bytes();
    let repr = repr(fh)?;
    let got = match how {
        How::Alone => with(fh, |f| f.read(at, len))?,
        How::All => {
            let placed = with(fh, |f| Ok(f.place_collective(false, at, len)))?;
            let got = placed.read(m)?;
            with(fh, |f| {
                f.read_short(at, len, got.len());
                Ok(())
            })?;
            got
        }
    };
    let n = got.len();
    from_file(&into, repr, datatype, got)?;
    // SAFETY: caller's status pointer or NULL.
    unsafe { put_status(status, &done(n)) };
    Ok(())
}

/// Starts a non-blocking write (`MPI_File_iwrite` ...): the data is
/// packed and the pointer moved at the call; an independent write is done
/// at once, a collective one on the file's worker thread.
///
/// # Safety
/// The buffer pointer is the caller's, valid for the call.
unsafe fn iwrite(
    fh: c_int,
    at: At,
    how: How,
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
) -> MpiResult<ReqId> {
    let m = mpi()?;
    // SAFETY: the caller's buffer is read (packed) during this call.
    let data = unsafe { file_bytes(m, fh, buf, count, datatype)? };
    let id = match how {
        How::Alone => {
            let n = with(fh, |f| f.write(at, &data))?;
            file::completed_request(m, fh, n)
        }
        How::All => {
            let file = file::get(fh)?;
            let placed = file::lock(&file).place_collective(true, at, data.len());
            let job = Box::new(move || placed.write(m, &data));
            file::start_collective(m, fh, &file, job)
        }
    };
    Ok(id)
}

/// Starts a non-blocking read (`MPI_File_iread` ...), as `iwrite` does;
/// a collective read fills the buffer from the worker thread.
///
/// # Safety
/// The buffer stays valid until the request completes (the standard's
/// rule).
unsafe fn iread(
    fh: c_int,
    at: At,
    how: How,
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
) -> MpiResult<ReqId> {
    let m = mpi()?;
    // SAFETY: the caller keeps the buffer until the request completes.
    let into: TypedBuf = unsafe { typed(m, buf, count, datatype)? };
    let repr = repr(fh)?;
    let id = match how {
        How::Alone => {
            let got = with(fh, |f| f.prepare(false, at, into.bytes()))?.read()?;
            let n = got.len();
            from_file(&into, repr, datatype, got)?;
            file::completed_request(m, fh, n)
        }
        How::All => {
            let file = file::get(fh)?;
            let placed = file::lock(&file).place_collective(false, at, into.bytes());
            let job = Box::new(move || {
                let got = placed.read(m)?;
                let n = got.len();
                from_file(&into, repr, datatype, got)?;
                Ok(n)
            });
            file::start_collective(m, fh, &file, job)
        }
    };
    Ok(id)
}

fn put_request(req: *mut c_int, id: ReqId) -> MpiResult<()> {
    // SAFETY: caller's out-pointer, checked for NULL by `put`.
    unsafe { put(req, super::request::handle(id)) }
}

fn done(bytes: usize) -> Status {
    Status {
        bytes,
        ..Status::empty()
    }
}

fn offset(o: i64) -> MpiResult<At> {
    u64::try_from(o)
        .map(At::Offset)
        .or_else(|_| fail(err::ARG, format!("offset {o} is negative")))
}

/// Defines the read and write calls that differ only by where they start
/// and whether they are collective: blocking ones with a status,
/// non-blocking ones (`i`) with a request.
macro_rules! access {
    ($($name:ident / $pname:ident ($kind:ident, $how:ident) => $at:expr;)*) => {$(
        access!(@one $kind $name / $pname => $at, How::$how);
    )*};
    (@one write $name:ident / $pname:ident => $at:expr, $how:expr) => {
        mpi_fn!(fn $name / $pname(fh: c_int, buf: *const c_void, count: c_int, datatype: c_int, status: *mut CStatus) {
            // SAFETY: the caller's buffer and status for this blocking call.
            let r = unsafe { write(fh, $at, $how, buf, count, datatype, status) };
            ret_file(stringify!($name), fh, r)
        });
    };
    (@one read $name:ident / $pname:ident => $at:expr, $how:expr) => {
        mpi_fn!(fn $name / $pname(fh: c_int, buf: *mut c_void, count: c_int, datatype: c_int, status: *mut CStatus) {
            // SAFETY: the caller's buffer and status for this blocking call.
            let r = unsafe { read(fh, $at, $how, buf, count, datatype, status) };
            ret_file(stringify!($name), fh, r)
        });
    };
    (@one iwrite $name:ident / $pname:ident => $at:expr, $how:expr) => {
        mpi_fn!(fn $name / $pname(fh: c_int, buf: *const c_void, count: c_int, datatype: c_int, req: *mut c_int) {
            // SAFETY: the caller's buffer (kept until completion) and request.
            let r = unsafe { iwrite(fh, $at, $how, buf, count, datatype) }.and_then(|id| put_request(req, id));
            ret_file(stringify!($name), fh, r)
        });
    };
    (@one iread $name:ident / $pname:ident => $at:expr, $how:expr) => {
        mpi_fn!(fn $name / $pname(fh: c_int, buf: *mut c_void, count: c_int, datatype: c_int, req: *mut c_int) {
            // SAFETY: the caller's buffer (kept until completion) and request.
            let r = unsafe { iread(fh, $at, $how, buf, count, datatype) }.and_then(|id| put_request(req, id));
            ret_file(stringify!($name), fh, r)
        });
    };
}

access! {
    MPI_File_write / PMPI_File_write(write, Alone) => At::Individual;
    MPI_File_write_all / PMPI_File_write_all(write, All) => At::Individual;
    MPI_File_write_shared / PMPI_File_write_shared(write, Alone) => At::Shared;
    MPI_File_read / PMPI_File_read(read, Alone) => At::Individual;
    MPI_File_read_all / PMPI_File_read_all(read, All) => At::Individual;
    MPI_File_read_shared / PMPI_File_read_shared(read, Alone) => At::Shared;
    MPI_File_iwrite / PMPI_File_iwrite(iwrite, Alone) => At::Individual;
    MPI_File_iwrite_all / PMPI_File_iwrite_all(iwrite, All) => At::Individual;
    MPI_File_iwrite_shared / PMPI_File_iwrite_shared(iwrite, Alone) => At::Shared;
    MPI_File_iread / PMPI_File_iread(iread, Alone) => At::Individual;
    MPI_File_iread_all / PMPI_File_iread_all(iread, All) => At::Individual;
    MPI_File_iread_shared / PMPI_File_iread_shared(iread, Alone) => At::Shared;
}

/// Defines the explicit-offset calls.
macro_rules! access_at {
    ($($name:ident / $pname:ident ($kind:ident, $how:ident);)*) => {$(
        access_at!(@one $kind $name / $pname, How::$how);
    )*};
    (@one write $name:ident / $pname:ident, $how:expr) => {
        mpi_fn!(fn $name / $pname(fh: c_int, off: i64, buf: *const c_void, count: c_int, datatype: c_int, status: *mut CStatus) {
            // SAFETY: the caller's buffer and status for this blocking call.
            let r = offset(off).and_then(|at| unsafe { write(fh, at, $how, buf, count, datatype, status) });
            ret_file(stringify!($name), fh, r)
        });
    };
    (@one read $name:ident / $pname:ident, $how:expr) => {
        mpi_fn!(fn $name / $pname(fh: c_int, off: i64, buf: *mut c_void, count: c_int, datatype: c_int, status: *mut CStatus) {
            // SAFETY: the caller's buffer and status for this blocking call.
            let r = offset(off).and_then(|at| unsafe { read(fh, at, $how, buf, count, datatype, status) });
            ret_file(stringify!($name), fh, r)
        });
    };
    (@one iwrite $name:ident / $pname:ident, $how:expr) => {
        mpi_fn!(fn $name / $pname(fh: c_int, off: i64, buf: *const c_void, count: c_int, datatype: c_int, req: *mut c_int) {
            // SAFETY: the caller's buffer (kept until completion) and request.
            let r = offset(off).and_then(|at| unsafe { iwrite(fh, at, $how, buf, count, datatype) }).and_then(|id| put_request(req, id));
            ret_file(stringify!($name), fh, r)
        });
    };
    (@one iread $name:ident / $pname:ident, $how:expr) => {
        mpi_fn!(fn $name / $pname(fh: c_int, off: i64, buf: *mut c_void, count: c_int, datatype: c_int, req: *mut c_int) {
            // SAFETY: the caller's buffer (kept until completion) and request.
            let r = offset(off).and_then(|at| unsafe { iread(fh, at, $how, buf, count, datatype) }).and_then(|id| put_request(req, id));
            ret_file(stringify!($name), fh, r)
        });
    };
}

access_at! {
    MPI_File_write_at / PMPI_File_write_at(write, Alone);
    MPI_File_write_at_all / PMPI_File_write_at_all(write, All);
    MPI_File_read_at / PMPI_File_read_at(read, Alone);
    MPI_File_read_at_all / PMPI_File_read_at_all(read, All);
    MPI_File_iwrite_at / PMPI_File_iwrite_at(iwrite, Alone);
    MPI_File_iwrite_at_all / PMPI_File_iwrite_at_all(iwrite, All);
    MPI_File_iread_at / PMPI_File_iread_at(iread, Alone);
    MPI_File_iread_at_all / PMPI_File_iread_at_all(iread, All);
}

mpi_fn!(fn MPI_File_write_ordered / PMPI_File_write_ordered(fh: c_int, buf: *const c_void, count: c_int, datatype: c_int, status: *mut CStatus) {
    let r = mpi().and_then(|m| {
        // SAFETY: the caller's buffer stays valid for this blocking call.
        let data = unsafe { file_bytes(m, fh, buf, count, datatype)? };
        let n = with(fh, |f| f.write_ordered(m, &data))?;
        // SAFETY: caller's status pointer or NULL.
        unsafe { put_status(status, &done(n)) };
        Ok(())
    });
    ret_file("MPI_File_write_ordered", fh, r)
});

mpi_fn!(fn MPI_File_read_ordered / PMPI_File_read_ordered(fh: c_int, buf: *mut c_void, count: c_int, datatype: c_int, status: *mut CStatus) {
    let r = mpi().and_then(|m| {
        // SAFETY: the caller's buffer stays valid for this blocking call.
        let into = unsafe { typed(m, buf, count, datatype)? };
        let got = with(fh, |f| f.read_ordered(m, into.bytes()))?;
        let n = got.len();
        from_file(&into, repr(fh)?, datatype, got)?;
        // SAFETY: caller's status pointer or NULL.
        unsafe { put_status(status, &done(n)) };
        Ok(())
    });
    ret_file("MPI_File_read_ordered", fh, r)
});

/// Begins a split collective (`MPI_File_write_all_begin` ...): one at a
/// time per file; `start` starts it as the non-blocking twin does.
fn begin(fh: c_int, name: &'static str, start: impl FnOnce() -> MpiResult<ReqId>) -> MpiResult<()> {
    with(fh, |f| match f.split {
        Some((_, other)) => fail(
            err::OTHER,
            format!("{other} has not ended: a file has one split collective at a time"),
        ),
        None => Ok(()),
    })?;
    let id = start()?;
    with(fh, |f| {
        f.split = Some((id, name));
        Ok(())
    })
}

/// Ends the split collective `begun_by` began: waits for it and gives its
/// status.
fn end(fh: c_int, begun_by: &str, status: *mut CStatus) -> MpiResult<()> {
    let m = mpi()?;
    let id = with(fh, |f| match f.split {
        Some((id, b)) if b == begun_by => {
            f.split = None;
            Ok(id)
        }
        Some((_, b)) => fail(
            err::OTHER,
            format!("the split collective begun is {b}, not {begun_by}"),
        ),
        None => fail(err::OTHER, format!("no {begun_by} to end")),
    })?;
    let st = m.engine.wait(id);
    if let Some(e) = &st.error {
        return Err(crate::api::error::request_error(e));
    }
    // SAFETY: caller's status pointer or NULL.
    unsafe { put_status(status, &st) };
    Ok(())
}

/// Defines a split collective's begin and end calls.
macro_rules! split {
    ($($begin:ident / $pbegin:ident, $end:ident / $pend:ident ($kind:ident) $(at $off:ident)? => $start:expr;)*) => {$(
        split!(@begin $kind $begin / $pbegin $(at $off)? => $start);
        mpi_fn!(fn $end / $pend(fh: c_int, _buf: *const c_void, status: *mut CStatus) {
            ret_file(stringify!($end), fh, end(fh, stringify!($begin), status))
        });
    )*};
    (@begin write $begin:ident / $pbegin:ident $(at $off:ident)? => $start:expr) => {
        mpi_fn!(fn $begin / $pbegin(fh: c_int, $($off: i64,)? buf: *const c_void, count: c_int, datatype: c_int) {
            let start = $start;
            let r = begin(fh, stringify!($begin), || start(fh, $($off,)? buf, count, datatype));
            ret_file(stringify!($begin), fh, r)
        });
    };
    (@begin read $begin:ident / $pbegin:ident $(at $off:ident)? => $start:expr) => {
        mpi_fn!(fn $begin / $pbegin(fh: c_int, $($off: i64,)? buf: *mut c_void, count: c_int, datatype: c_int) {
            let start = $start;
            let r = begin(fh, stringify!($begin), || start(fh, $($off,)? buf, count, datatype));
            ret_file(stringify!($begin), fh, r)
        });
    };
}

split! {
    MPI_File_write_all_begin / PMPI_File_write_all_begin, MPI_File_write_all_end / PMPI_File_write_all_end (write)
        // SAFETY: the caller's buffer, packed during the call.
        => |fh, buf, count, dt| unsafe { iwrite(fh, At::Individual, How::All, buf, count, dt) };
    MPI_File_read_all_begin / PMPI_File_read_all_begin, MPI_File_read_all_end / PMPI_File_read_all_end (read)
        // SAFETY: the caller keeps the buffer until the end call.
        => |fh, buf, count, dt| unsafe { iread(fh, At::Individual, How::All, buf, count, dt) };
    MPI_File_write_at_all_begin / PMPI_File_write_at_all_begin, MPI_File_write_at_all_end / PMPI_File_write_at_all_end (write) at off
        // SAFETY: as for write_all_begin.
        => |fh, off, buf, count, dt| offset(off).and_then(|at| unsafe { iwrite(fh, at, How::All, buf, count, dt) });
    MPI_File_read_at_all_begin / PMPI_File_read_at_all_begin, MPI_File_read_at_all_end / PMPI_File_read_at_all_end (read) at off
        // SAFETY: as for read_all_begin.
        => |fh, off, buf, count, dt| offset(off).and_then(|at| unsafe { iread(fh, at, How::All, buf, count, dt) });
    MPI_File_write_ordered_begin / PMPI_File_write_ordered_begin, MPI_File_write_ordered_end / PMPI_File_write_ordered_end (write)
        // SAFETY: as for write_all_begin.
        => |fh, buf, count, dt| unsafe { iwrite_ordered(fh, buf, count, dt) };
    MPI_File_read_ordered_begin / PMPI_File_read_ordered_begin, MPI_File_read_ordered_end / PMPI_File_read_ordered_end (read)
        // SAFETY: as for read_all_begin.
        => |fh, buf, count, dt| unsafe { iread_ordered(fh, buf, count, dt) };
}

/// `MPI_File_write_ordered_begin`'s work, on the file's worker thread.
///
/// # Safety
/// As for `iwrite`.
unsafe fn iwrite_ordered(
    fh: c_int,
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
) -> MpiResult<ReqId> {
    let m = mpi()?;
    // SAFETY: the caller's buffer is packed during this call.
    let data = unsafe { file_bytes(m, fh, buf, count, datatype)? };
    let file = file::get(fh)?;
    let f = file.clone();
    let job = Box::new(move || file::lock(&f).write_ordered(m, &data));
    Ok(file::start_collective(m, fh, &file, job))
}

/// `MPI_File_read_ordered_begin`'s work, on the file's worker thread.
///
/// # Safety
/// As for `iread`.
unsafe fn iread_ordered(
    fh: c_int,
    buf: *mut c_void,
    count: c_int,
    datatype: c_int,
) -> MpiResult<ReqId> {
    let m = mpi()?;
    // SAFETY: the caller keeps the buffer until the end call.
    let into: TypedBuf = unsafe { typed(m, buf, count, datatype)? };
    let repr = repr(fh)?;
    let file = file::get(fh)?;
    let f = file.clone();
    let job = Box::new(move || {
        let got = file::lock(&f).read_ordered(m, into.bytes())?;
        let n = got.len();
        from_file(&into, repr, datatype, got)?;
        Ok(n)
    });
    Ok(file::start_collective(m, fh, &file, job))
}

mpi_fn!(fn MPI_File_seek / PMPI_File_seek(fh: c_int, off: i64, whence: c_int) {
    ret_file("MPI_File_seek", fh, with(fh, |f| f.seek(off, whence)))
});

mpi_fn!(fn MPI_File_get_position / PMPI_File_get_position(fh: c_int, off: *mut i64) {
    let r = with(fh, |f| Ok(f.position()));
    // SAFETY: caller's out-pointer.
    ret_file("MPI_File_get_position", fh, r.and_then(|p| unsafe { put(off, p as i64) }))
});

mpi_fn!(fn MPI_File_seek_shared / PMPI_File_seek_shared(fh: c_int, off: i64, whence: c_int) {
    let r = mpi().and_then(|m| with(fh, |f| f.seek_shared(m, off, whence)));
    ret_file("MPI_File_seek_shared", fh, r)
});

mpi_fn!(fn MPI_File_get_position_shared / PMPI_File_get_position_shared(fh: c_int, off: *mut i64) {
    let r = with(fh, |f| f.position_shared());
    // SAFETY: caller's out-pointer.
    ret_file("MPI_File_get_position_shared", fh, r.and_then(|p| unsafe { put(off, p as i64) }))
});

mpi_fn!(fn MPI_File_get_byte_offset / PMPI_File_get_byte_offset(fh: c_int, off: i64, disp: *mut i64) {
    let r = offset(off).and_then(|_| with(fh, |f| Ok(f.byte_offset(off as u64)))).and_then(|b| {
        // SAFETY: caller's out-pointer.
        unsafe { put(disp, b as i64) }
    });
    ret_file("MPI_File_get_byte_offset", fh, r)
});

mpi_fn!(fn MPI_File_get_size / PMPI_File_get_size(fh: c_int, size: *mut i64) {
    let r = with(fh, |f| f.size());
    // SAFETY: caller's out-pointer.
    ret_file("MPI_File_get_size", fh, r.and_then(|s| unsafe { put(size, s as i64) }))
});

mpi_fn!(fn MPI_File_set_size / PMPI_File_set_size(fh: c_int, size: i64) {
    let r = mpi().and_then(|m| with(fh, |f| f.set_size(m, size)));
    ret_file("MPI_File_set_size", fh, r)
});

mpi_fn!(fn MPI_File_preallocate / PMPI_File_preallocate(fh: c_int, size: i64) {
    let r = mpi().and_then(|m| with(fh, |f| f.preallocate(m, size)));
    ret_file("MPI_File_preallocate", fh, r)
});

mpi_fn!(fn MPI_File_sync / PMPI_File_sync(fh: c_int) {
    ret_file("MPI_File_sync", fh, with(fh, |f| f.sync()))
});

mpi_fn!(fn MPI_File_get_amode / PMPI_File_get_amode(fh: c_int, amode: *mut c_int) {
    let r = with(fh, |f| Ok(f.amode));
    // SAFETY: caller's out-pointer.
    ret_file("MPI_File_get_amode", fh, r.and_then(|a| unsafe { put(amode, a) }))
});

mpi_fn!(fn MPI_File_get_group / PMPI_File_get_group(fh: c_int, group: *mut c_int) {
    let r = mpi().and_then(|m| {
        let g = with(fh, |f| Ok((*f.comm.group).clone()))?;
        let h = m.tables().add_group(g);
        // SAFETY: caller's out-pointer.
        unsafe { put(group, h) }
    });
    ret_file("MPI_File_get_group", fh, r)
});

mpi_fn!(fn MPI_File_set_info / PMPI_File_set_info(fh: c_int, info_h: c_int) {
    let r = info::get_or_empty(info_h).and_then(|i| with(fh, |f| {
        for (k, v) in i.entries() {
            f.info.set(k, v)?;
        }
        Ok(())
    }));
    ret_file("MPI_File_set_info", fh, r)
});

mpi_fn!(fn MPI_File_get_info / PMPI_File_get_info(fh: c_int, info_h: *mut c_int) {
    let r = with(fh, |f| Ok(f.info.clone())).map(info::add);
    // SAFETY: caller's out-pointer.
    ret_file("MPI_File_get_info", fh, r.and_then(|h| unsafe { put(info_h, h) }))
});

mpi_fn!(fn MPI_File_set_atomicity / PMPI_File_set_atomicity(fh: c_int, flag: c_int) {
    // Each access is one positioned read or write of contiguous bytes,
    // which POSIX already makes atomic; the flag is kept for get_atomicity.
    ret_file("MPI_File_set_atomicity", fh, with(fh, |f| {
        f.atomic = flag != 0;
        Ok(())
    }))
});

mpi_fn!(fn MPI_File_get_atomicity / PMPI_File_get_atomicity(fh: c_int, flag: *mut c_int) {
    let r = with(fh, |f| Ok(f.atomic as c_int));
    // SAFETY: caller's out-pointer.
    ret_file("MPI_File_get_atomicity", fh, r.and_then(|a| unsafe { put(flag, a) }))
});

mpi_fn!(fn MPI_File_get_type_extent / PMPI_File_get_type_extent(fh: c_int, datatype: c_int, extent: *mut i64) {
    let r = file::get(fh).and_then(|_| {
        let t = mpi()?.tables().dtype(datatype)?;
        // SAFETY: caller's out-pointer.
        unsafe { put(extent, t.extent as i64) }
    });
    ret_file("MPI_File_get_type_extent", fh, r)
});

mpi_fn!(fn MPI_File_set_view / PMPI_File_set_view(fh: c_int, disp: i64, etype: c_int, filetype: c_int, datarep: *const c_char, info_h: c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: caller's NUL-terminated string.
        let datarep = unsafe { cstr(datarep)? };
        let hints = info::get_or_empty(info_h)?;
        let committed = |h: c_int, what: &str| {
            let t = m.tables().dtype(h)?;
            if !t.predefined && !t.committed {
                return fail(err::TYPE, format!("the view's {what} is not committed"));
            }
            Ok((h, t))
        };
        let given = ViewGiven {
            disp,
            etype: committed(etype, "etype")?,
            filetype: committed(filetype, "filetype")?,
            datarep,
        };
        with(fh, |f| f.set_view(m, given, &hints))
    });
    ret_file("MPI_File_set_view", fh, r)
});

mpi_fn!(fn MPI_File_get_view / PMPI_File_get_view(fh: c_int, disp: *mut i64, etype: *mut c_int, filetype: *mut c_int, datarep: *mut c_char) {
    let r = mpi().and_then(|m| {
        let given = with(fh, |f| Ok(f.view_given.clone()))?;
        // Derived types come back as new handles the program frees, as
        // the standard has it; predefined ones as themselves.
        let handle = |(h, t): (c_int, std::sync::Arc<crate::api::datatype::Datatype>)| {
            if t.predefined {
                h
            } else {
                m.tables().add_dtype((*t).clone())
            }
        };
        let mut len = 0;
        // SAFETY: caller's out-pointers; `datarep` holds
        // MPI_MAX_DATAREP_STRING bytes by the standard.
        unsafe {
            put(disp, given.disp)?;
            put(etype, handle(given.etype))?;
            put(filetype, handle(given.filetype))?;
            put_str(&given.datarep, datarep, MAX_DATAREP_STRING, &mut len)
        }
    });
    ret_file("MPI_File_get_view", fh, r)
});

/// `MPI_MAX_DATAREP_STRING`.
pub const MAX_DATAREP_STRING: usize = 128;

mpi_fn!(fn MPI_File_create_errhandler / PMPI_File_create_errhandler(f: Option<HandlerFn>, out: *mut c_int) {
    ret_file("MPI_File_create_errhandler", FILE_NULL, create_handler(f, out))
});

mpi_fn!(fn MPI_File_set_errhandler / PMPI_File_set_errhandler(fh: c_int, eh: c_int) {
    let r = if valid_handler(eh) {
        file::set_errhandler(fh, eh)
    } else {
        fail(err::ARG, format!("invalid error handler {eh}"))
    };
    ret_file("MPI_File_set_errhandler", fh, r)
});

mpi_fn!(fn MPI_File_get_errhandler / PMPI_File_get_errhandler(fh: c_int, eh: *mut c_int) {
    let r = if fh == FILE_NULL { Ok(()) } else { file::get(fh).map(|_| ()) };
    // SAFETY: caller's out-pointer.
    let r = r.and_then(|()| unsafe { put(eh, file::errhandler(fh)) });
    ret_file("MPI_File_get_errhandler", fh, r)
});

mpi_fn!(fn MPI_File_call_errhandler / PMPI_File_call_errhandler(fh: c_int, code: c_int) {
    if fh != FILE_NULL {
        if let Err(e) = file::get(fh) {
            return ret_file("MPI_File_call_errhandler", FILE_NULL, Err(e));
        }
    }
    let e = MpiError::new(code, super::errors::text_of(code));
    ret_file("MPI_File_call_errhandler", fh, Err(e));
    err::SUCCESS
});
