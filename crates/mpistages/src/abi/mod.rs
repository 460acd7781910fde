//! The C ABI: every `MPI_*` function and its `PMPI_*` twin, taking C
//! arguments (integer handles, raw pointers), checking them, calling
//! `src/api`, and turning errors into return codes or running the
//! communicator's error handler. Owns: C types and pointer handling. Must
//! not touch: the engine's internals.

// MPI's C signatures are fixed by the standard, and so are their lengths.
#![allow(clippy::too_many_arguments)]

pub mod attr;
pub mod coll;
pub mod comm;
pub mod datarep;
pub mod dpm;
pub mod dtype;
pub mod env;
pub mod errors;
pub mod file;
pub mod fortran;
pub mod info;
pub mod intercoll;
pub mod large;
mod large_via_int;
pub mod misc;
pub mod mpix;
pub mod nbc;
pub mod neighbor;
pub mod p2p;
pub mod partitioned;
pub mod probe;
pub mod reduce;
pub mod request;
pub mod session;
pub mod tools;
pub mod topo;
pub mod ulfm;
pub mod win;

use crate::api::consts::{err, COMM_SELF, COMM_WORLD, ERRORS_RETURN};
use crate::api::error::{class_name, fail, MpiError, MpiResult};
use crate::api::usermem::TypedBuf;
use crate::api::Status;
use crate::api::{self, Mpi};
use std::os::raw::{c_char, c_int, c_void};

/// Defines `PMPI_x` with the body and `MPI_x` calling it. `MPI_x` is
/// exported as `mpistages_entry_MPI_x`: the C symbol `MPI_x` is generated
/// by build.rs and calls it (that is where the Reinit jump happens, in C).
macro_rules! mpi_fn {
    (fn $name:ident / $pname:ident ( $($a:ident : $t:ty),* $(,)? ) $body:block) => {
        /// # Safety
        /// A C entry point: every pointer argument must be what the MPI
        /// standard requires for this function (valid for the stated use,
        /// buffers valid until the operation completes).
        #[no_mangle]
        pub unsafe extern "C" fn $pname($($a: $t),*) -> ::std::os::raw::c_int $body
        /// # Safety
        /// As for the `PMPI_` function it forwards to.
        #[export_name = concat!("mpistages_entry_", stringify!($name))]
        #[allow(non_snake_case)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> ::std::os::raw::c_int {
            // Fault injection (`mpiexec --inject rank=R,call=NAME:N`).
            $crate::api::mpix::count_call(stringify!($name));
            // SAFETY: same contract as the PMPI_ function it forwards to.
            unsafe { $pname($($a),*) }
        }
    };
}
pub(crate) use mpi_fn;

/// The C `MPI_Status` layout (see include/mpi.h).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct CStatus {
    pub source: c_int,
    pub tag: c_int,
    pub error: c_int,
    pub count_lo: c_int,
    pub count_hi_and_cancelled: c_int,
}

impl CStatus {
    pub fn from_status(s: &Status) -> CStatus {
        let bytes = s.bytes as u64;
        CStatus {
            source: s.source,
            tag: s.tag,
            error: s
                .error
                .as_ref()
                .map_or(err::SUCCESS, |e| crate::api::error::request_error(e).class),
            count_lo: bytes as u32 as c_int,
            count_hi_and_cancelled: (((bytes >> 32) as c_int) << 1) | s.cancelled as c_int,
        }
    }
    pub fn bytes(&self) -> u64 {
        (self.count_lo as u32 as u64) | ((((self.count_hi_and_cancelled as u32) >> 1) as u64) << 32)
    }
}

/// `MPI_IN_PLACE` as C sees it.
pub const IN_PLACE: *mut c_void = -1isize as *mut c_void;

/// Writes the status of a single-completion call unless the caller passed
/// `MPI_STATUS_IGNORE` (NULL). Its `MPI_ERROR` field is left as it was
/// when the operation succeeded: the standard sets it only in the
/// multiple-completion calls (which fill their arrays with
/// `CStatus::from_status`), and programs check it stays; a failed
/// operation's class is put there too, beside the return code.
///
/// # Safety
/// `p` is NULL or points to a writable `MPI_Status`.
pub unsafe fn put_status(p: *mut CStatus, s: &Status) {
    if !p.is_null() {
        // SAFETY: non-null, readable and writable by the caller's contract.
        unsafe {
            let mut c = CStatus::from_status(s);
            if s.error.is_none() {
                c.error = (*p).error;
            }
            p.write(c);
        }
    }
}

/// Writes an output argument, refusing NULL.
///
/// # Safety
/// `p` is NULL or valid for a write of `T`.
pub unsafe fn put<T>(p: *mut T, v: T) -> MpiResult<()> {
    if p.is_null() {
        return fail(err::ARG, "an output argument is NULL");
    }
    // SAFETY: non-null and writable by the caller's contract.
    unsafe { p.write(v) };
    Ok(())
}

/// Reads an input argument, refusing NULL.
///
/// # Safety
/// `p` is NULL or valid for a read of `T`.
pub unsafe fn get<T: Copy>(p: *const T) -> MpiResult<T> {
    if p.is_null() {
        return fail(err::ARG, "an input argument is NULL");
    }
    // SAFETY: non-null and readable by the caller's contract.
    Ok(unsafe { p.read() })
}

/// An input array of `n` elements (empty for n = 0).
///
/// # Safety
/// `p` is NULL or valid for reads of `n` elements.
pub unsafe fn array<'a, T>(p: *const T, n: usize) -> MpiResult<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return fail(err::ARG, "an array argument is NULL");
    }
    // SAFETY: non-null, n elements readable by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// An output array of `n` elements.
///
/// # Safety
/// `p` is NULL or valid for writes of `n` elements.
pub unsafe fn array_mut<'a, T>(p: *mut T, n: usize) -> MpiResult<&'a mut [T]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return fail(err::ARG, "an array argument is NULL");
    }
    // SAFETY: non-null, n elements writable by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// Copies a Rust string into a C buffer of `cap` bytes with a NUL, and
/// reports the length without it.
///
/// # Safety
/// `buf` is valid for `cap` bytes; `len` is a valid out-pointer.
pub unsafe fn put_str(s: &str, buf: *mut c_char, cap: usize, len: *mut c_int) -> MpiResult<()> {
    if buf.is_null() {
        return fail(err::ARG, "the string buffer is NULL");
    }
    let n = s.len().min(cap.saturating_sub(1));
    // SAFETY: n + 1 <= cap bytes of a caller buffer of at least cap bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr() as *const c_char, buf, n);
        buf.add(n).write(0);
        put(len, n as c_int)
    }
}

/// A NUL-terminated C string argument, as UTF-8 (lossy).
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string.
pub unsafe fn cstr(p: *const std::os::raw::c_char) -> MpiResult<String> {
    if p.is_null() {
        return fail(err::ARG, "a string argument is NULL");
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    Ok(unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned())
}

/// An `MPI_Count` (the large-count `_c` calls) as a number of elements.
pub fn large_count(n: i64) -> MpiResult<usize> {
    usize::try_from(n).or_else(|_| fail(err::COUNT, format!("count {n} is negative")))
}

pub fn count(n: c_int) -> MpiResult<usize> {
    if n < 0 {
        return fail(err::COUNT, format!("count {n} is negative"));
    }
    Ok(n as usize)
}

/// A user buffer described by (pointer, count, datatype handle).
///
/// # Safety
/// The MPI buffer rule: the memory the datatype describes stays valid until
/// the operation completes.
pub unsafe fn typed(
    m: &Mpi,
    buf: *const c_void,
    n: impl Into<i64>,
    dt: i32,
) -> MpiResult<TypedBuf> {
    // SAFETY: forwarded from this function's contract.
    unsafe { typed_in(&m.tables(), buf, n, dt) }
}

/// `typed` with the tables already held (one lock for the datatype and
/// the communicator of a point-to-point call).
///
/// # Safety
/// As for `typed`.
pub unsafe fn typed_in(
    tables: &api::Tables,
    buf: *const c_void,
    n: impl Into<i64>,
    dt: i32,
) -> MpiResult<TypedBuf> {
    let n = large_count(n.into())?;
    // No data: MPI_DATATYPE_NULL names none (MPICH accepts it so too).
    let dt = if n == 0 && dt == crate::api::consts::DATATYPE_NULL {
        crate::api::consts::dt::BYTE
    } else {
        dt
    };
    let t = tables.dtype(dt)?;
    if buf.is_null() && n > 0 && t.size > 0 && t.true_lb == 0 {
        return fail(err::BUFFER, "the buffer is NULL but the count is not 0");
    }
    // SAFETY: forwarded from this function's contract.
    Ok(unsafe { TypedBuf::new(buf as *mut u8, n, t) })
}

/// A block of an `MPI_Alltoallw`-like call. An empty block's datatype is
/// not looked at, as MPICH does: programs pass `MPI_DATATYPE_NULL` (or the
/// zeros of a `calloc`ed array) for the peers they exchange nothing with,
/// as the Advanced MPI tutorial's stencils do.
///
/// # Safety
/// As for `typed`.
pub unsafe fn typed_block(m: &Mpi, buf: *const c_void, n: c_int, dt: i32) -> MpiResult<TypedBuf> {
    let dt = if n == 0 {
        crate::api::consts::dt::BYTE
    } else {
        dt
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { typed(m, buf, n, dt) }
}

/// Turns an API result into a return code, running the error handler of
/// `comm` (MPI_COMM_WORLD's when `comm` is not valid).
pub fn ret(name: &str, comm: i32, r: MpiResult<()>) -> c_int {
    match r {
        Ok(()) => err::SUCCESS,
        Err(e) => raise(name, comm, e),
    }
}

thread_local! {
    /// Set while a worker thread runs a non-blocking collective's body
    /// (`capture`): errors are kept for the request, not raised.
    static CAPTURED: std::cell::RefCell<Option<Option<MpiError>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs an entry point's body with errors captured instead of raised: the
/// error handler runs later, in the thread that waits for the request.
pub fn capture(f: impl FnOnce() -> c_int) -> MpiResult<()> {
    let before = CAPTURED.replace(Some(None));
    let rc = f();
    let got = CAPTURED.replace(before).flatten();
    match (rc, got) {
        (err::SUCCESS, _) => Ok(()),
        (_, Some(e)) => Err(e),
        (rc, None) => Err(MpiError::new(rc, "a non-blocking collective failed")),
    }
}

pub fn raise(name: &str, comm: i32, e: MpiError) -> c_int {
    if let Some(class) = captured(name, &e) {
        return class;
    }
    let (handler, object, m) = match api::mpi() {
        Ok(m) => {
            let t = m.tables();
            let eh = |h: i32| {
                t.comms
                    .get(usize::try_from(h).ok()?)
                    .and_then(Option::as_ref)
                    .map(|c| c.errhandler)
            };
            // In a program of sessions alone, MPI_COMM_WORLD is not the
            // program's: its errors, and those of no object, are a
            // session's.
            let alone = (comm == NO_OBJECT || comm == COMM_WORLD) && !api::initialized();
            let (handler, object) = match alone.then(api::session::first_errhandler).flatten() {
                Some(h) => (Some(h), comm),
                None if comm == NO_OBJECT => {
                    // MPI 4.0 raises these on MPI_COMM_SELF; MPI 3.1 did on
                    // MPI_COMM_WORLD. As MPICH does: SELF's handler once the
                    // program set one, else WORLD's (which programs written
                    // for 3.1 set).
                    let on = if errors::self_handler_set() {
                        COMM_SELF
                    } else {
                        COMM_WORLD
                    };
                    (eh(on), on)
                }
                None => (eh(comm).or_else(|| eh(COMM_WORLD)), comm),
            };
            (
                handler.unwrap_or(crate::api::consts::ERRORS_ARE_FATAL),
                object,
                Some(&**m),
            )
        }
        Err(_) => (crate::api::consts::ERRORS_ARE_FATAL, comm, None),
    };
    handle(name, object, handler, m, e)
}

/// The communicator argument of `ret` and `raise` for an error of no
/// object (datatypes, info objects, error codes, operations, the
/// environment's queries): see `raise`.
pub const NO_OBJECT: c_int = -2;

/// Turns a file call's result into a return code, running the error
/// handler of file `fh` (`MPI_FILE_NULL`'s when it is not valid).
pub fn ret_file(name: &str, fh: i32, r: MpiResult<()>) -> c_int {
    match r {
        Ok(()) => err::SUCCESS,
        Err(e) => raise_on(name, fh, api::file::errhandler(fh), e),
    }
}

/// Raises `e` on object `obj` (a file, a window) whose error handler is
/// `handler`.
pub fn raise_on(name: &str, obj: i32, handler: i32, e: MpiError) -> c_int {
    if let Some(class) = captured(name, &e) {
        return class;
    }
    let m = api::mpi().ok().map(|m| &**m);
    handle(name, obj, handler, m, e)
}

/// Keeps `e` for the request when a non-blocking collective's worker runs
/// the call (`capture`), returning its class; `None` when it must be raised.
fn captured(name: &str, e: &MpiError) -> Option<c_int> {
    CAPTURED.with_borrow_mut(|c| {
        let slot = c.as_mut()?;
        *slot = Some(MpiError::new(e.class, format!("{name}: {}", e.detail)));
        Some(e.class)
    })
}

/// Runs error handler `handler` of the object `handle` for `e`.
fn handle(name: &str, handle: i32, handler: i32, m: Option<&Mpi>, e: MpiError) -> c_int {
    if e.class == err::TRY_RELOAD {
        if let Some(m) = m {
            return reload(m, name, handler);
        }
    }
    let user = errors::user_handler(handler);
    if handler == ERRORS_RETURN || user.is_some() {
        let (code, new) = errors::code_for(name, e.class, &e.detail);
        if new {
            // Once per cause, at the default level: what the program gets
            // as a code (its text is MPI_Error_string's).
            let rank = m.map_or(String::new(), |m| format!("rank {}: ", m.rank));
            let cause = errors::cause(name, &e.detail);
            log::info!("mpistages: {rank}{name}: {}: {cause}", class_name(e.class));
        } else {
            log::debug!("mpistages: {name}: {}: {}", class_name(e.class), e.detail);
        }
        if let Some(f) = user {
            let (mut h, mut c) = (handle, code);
            // SAFETY: the program's handler, of the standard's signature,
            // gets pointers to two locals.
            unsafe { f(&mut h, &mut c) };
        }
        return code;
    }
    api::fatal(
        e.class,
        &format!(
            "{name}: {}: {} (error handler MPI_ERRORS_ARE_FATAL)",
            class_name(e.class),
            e.detail
        ),
    )
}

extern "C" {
    /// csrc/reinit.c: whether the running call takes the Reinit jump.
    fn mpistages_reinit_jumps() -> c_int;
}

/// A call saw a failure announced by `mpiexec`: the rank must roll back.
/// `MPIX_TRY_RELOAD` reaches the application when it can act on it — the
/// Reinit jump is armed, or the error handler returns errors — and a fatal
/// error handler is honoured: the job ends, saying what the program lacks.
fn reload(m: &Mpi, name: &str, handler: i32) -> c_int {
    // SAFETY: reads two thread-local variables of this thread.
    let jumps = m.mode == api::RecoveryMode::Reinit && unsafe { mpistages_reinit_jumps() } != 0;
    if jumps || handler == ERRORS_RETURN {
        return err::TRY_RELOAD;
    }
    let failed = m.engine.failed_ranks();
    let failed = match failed.as_slice() {
        [r] => format!("rank {r} failed"),
        rs => format!("ranks {rs:?} failed"),
    };
    let how = if m.mode == api::RecoveryMode::Reinit {
        "to recover under --recovery reinit, run the program's work in the restart point of \
         MPIX_Reinit(argc, argv, point) and call MPI functions from the thread that called it"
    } else {
        "to recover under --recovery stages, set MPI_ERRORS_RETURN (MPI_Comm_set_errhandler) \
         and, when a call returns MPIX_TRY_RELOAD, call MPIX_Checkpoint_read and reload your \
         data (the resilient loop of examples/ring.c)"
    };
    api::fatal(
        err::TRY_RELOAD,
        &format!(
            "{name}: {failed}, and the error handler is MPI_ERRORS_ARE_FATAL, so the job \
             ends; {how}"
        ),
    )
}

/// The running instance for an entry point, or the error to raise.
pub fn mpi() -> MpiResult<&'static Mpi> {
    api::mpi().map(|a| &**a)
}
