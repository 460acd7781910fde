//! Environment management, error classes and error handlers.

use super::{get, mpi, mpi_fn, put, ret};
use crate::api::consts::{
    err, COMM_WORLD, ERRORS_ABORT, ERRORS_ARE_FATAL, ERRORS_RETURN, MAX_ERROR_STRING,
    MAX_PROCESSOR_NAME,
};
use crate::api::error::{class_text, fail, MpiResult};
use crate::api::{self};
use std::os::raw::{c_char, c_int};

fn init(required: c_int, provided: *mut c_int) -> c_int {
    let r = api::init(required).map(|p| {
        if !provided.is_null() {
            // SAFETY: caller passed a valid out-pointer (or NULL, checked).
            unsafe { provided.write(p) };
        }
    });
    ret("MPI_Init", COMM_WORLD, r)
}

mpi_fn!(fn MPI_Init / PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) {
    init(crate::api::consts::THREAD_SINGLE, std::ptr::null_mut())
});

mpi_fn!(fn MPI_Init_thread / PMPI_Init_thread(_argc: *mut c_int, _argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int) {
    init(required, provided)
});

mpi_fn!(fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) {
    // SAFETY: caller's out-pointer.
    ret("MPI_Initialized", COMM_WORLD, unsafe { put(flag, api::initialized() as c_int) })
});

mpi_fn!(fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) {
    // SAFETY: caller's out-pointer.
    ret("MPI_Finalized", COMM_WORLD, unsafe { put(flag, api::finalized() as c_int) })
});

mpi_fn!(fn MPI_Finalize / PMPI_Finalize() {
    ret("MPI_Finalize", COMM_WORLD, api::finalize())
});

mpi_fn!(fn MPI_Abort / PMPI_Abort(_comm: c_int, code: c_int) {
    api::abort(code, "")
});

mpi_fn!(fn MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) {
    // SAFETY: caller's pointer, checked for NULL by get/put.
    let r = mpi().and_then(|m| unsafe { put(provided, m.thread_level) });
    ret("MPI_Query_thread", COMM_WORLD, r)
});

mpi_fn!(fn MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) {
    // SAFETY: caller's out-pointer.
    ret("MPI_Is_thread_main", COMM_WORLD, unsafe { put(flag, 1) })
});

#[no_mangle]
pub extern "C" fn PMPI_Wtime() -> f64 {
    api::wtime()
}
#[no_mangle]
pub extern "C" fn MPI_Wtime() -> f64 {
    api::wtime()
}
#[no_mangle]
pub extern "C" fn PMPI_Wtick() -> f64 {
    1e-9
}
#[no_mangle]
pub extern "C" fn MPI_Wtick() -> f64 {
    1e-9
}

/// Copies a Rust string into a C buffer of `cap` bytes with a NUL, and
/// reports the length without it.
///
/// # Safety
/// `buf` is valid for `cap` bytes; `len` is a valid out-pointer.
unsafe fn put_str(s: &str, buf: *mut c_char, cap: usize, len: *mut c_int) -> MpiResult<()> {
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

mpi_fn!(fn MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, len: *mut c_int) {
    let mut host = [0u8; 256];
    // SAFETY: gethostname writes at most host.len() bytes into our buffer.
    unsafe { libc::gethostname(host.as_mut_ptr() as *mut c_char, host.len()) };
    let end = host.iter().position(|&b| b == 0).unwrap_or(host.len());
    let h = String::from_utf8_lossy(&host[..end]).into_owned();
    // SAFETY: the standard sizes `name` as MPI_MAX_PROCESSOR_NAME.
    ret("MPI_Get_processor_name", COMM_WORLD, unsafe { put_str(&h, name, MAX_PROCESSOR_NAME as usize, len) })
});

mpi_fn!(fn MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) {
    // SAFETY: caller's out-pointers.
    ret("MPI_Get_version", COMM_WORLD, unsafe { put(version, 3).and_then(|_| put(subversion, 1)) })
});

mpi_fn!(fn MPI_Get_library_version / PMPI_Get_library_version(s: *mut c_char, len: *mut c_int) {
    let v = format!("mpistages {} (MPI Stages fault-tolerant MPI)", env!("CARGO_PKG_VERSION"));
    // SAFETY: the standard sizes `s` as MPI_MAX_LIBRARY_VERSION_STRING (>= 64).
    ret("MPI_Get_library_version", COMM_WORLD, unsafe { put_str(&v, s, 64, len) })
});

mpi_fn!(fn MPI_Error_string / PMPI_Error_string(code: c_int, s: *mut c_char, len: *mut c_int) {
    let text = format!("{}: {}", crate::api::error::class_name(code), class_text(code));
    // SAFETY: the standard sizes `s` as MPI_MAX_ERROR_STRING.
    ret("MPI_Error_string", COMM_WORLD, unsafe { put_str(&text, s, MAX_ERROR_STRING as usize, len) })
});

mpi_fn!(fn MPI_Error_class / PMPI_Error_class(code: c_int, class: *mut c_int) {
    let r = if (0..=err::LASTCODE).contains(&code) {
        // SAFETY: caller's out-pointer.
        unsafe { put(class, code) }
    } else {
        fail(err::ARG, format!("{code} is not an error code"))
    };
    ret("MPI_Error_class", COMM_WORLD, r)
});

fn valid_handler(h: c_int) -> bool {
    matches!(h, ERRORS_ARE_FATAL | ERRORS_RETURN | ERRORS_ABORT)
}

mpi_fn!(fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: c_int, eh: c_int) {
    let r = mpi().and_then(|m| {
        if !valid_handler(eh) {
            return fail(err::ARG, format!("invalid error handler {eh}"));
        }
        let mut t = m.tables();
        t.comm(comm)?;
        t.comms[comm as usize].as_mut().expect("checked").errhandler = eh;
        Ok(())
    });
    ret("MPI_Comm_set_errhandler", comm, r)
});

mpi_fn!(fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: c_int, eh: *mut c_int) {
    let r = mpi().and_then(|m| {
        let t = m.tables();
        t.comm(comm)?;
        let h = t.comms[comm as usize].as_ref().expect("checked").errhandler;
        // SAFETY: caller's out-pointer.
        unsafe { put(eh, h) }
    });
    ret("MPI_Comm_get_errhandler", comm, r)
});

mpi_fn!(fn MPI_Errhandler_free / PMPI_Errhandler_free(eh: *mut c_int) {
    // Predefined handlers are never really freed; the handle becomes NULL.
    // SAFETY: caller's in/out pointer.
    let r = unsafe { get(eh).and_then(|_| put(eh, crate::api::consts::ERRHANDLER_NULL)) };
    ret("MPI_Errhandler_free", COMM_WORLD, r)
});
