//! Environment management (errors are `errors.rs`).

use super::{mpi, mpi_fn, put, put_str, ret, NO_OBJECT};
use crate::api::consts::{COMM_WORLD, MAX_PROCESSOR_NAME};
use crate::api::{self};
use std::os::raw::{c_char, c_int};

fn init(required: c_int, provided: *mut c_int) -> c_int {
    let r = api::init(required).map(|p| {
        if !provided.is_null() {
            // SAFETY: caller passed a valid out-pointer (or NULL, checked).
            unsafe { provided.write(p) };
        }
    });
    ret("MPI_Init", NO_OBJECT, r)
}

mpi_fn!(fn MPI_Init / PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) {
    init(crate::api::consts::THREAD_SINGLE, std::ptr::null_mut())
});

mpi_fn!(fn MPI_Init_thread / PMPI_Init_thread(_argc: *mut c_int, _argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int) {
    init(required, provided)
});

mpi_fn!(fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) {
    // SAFETY: caller's out-pointer.
    ret("MPI_Initialized", NO_OBJECT, unsafe { put(flag, api::initialized() as c_int) })
});

mpi_fn!(fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) {
    // SAFETY: caller's out-pointer.
    ret("MPI_Finalized", NO_OBJECT, unsafe { put(flag, api::finalized() as c_int) })
});

mpi_fn!(fn MPI_Finalize / PMPI_Finalize() {
    // MPI_COMM_SELF's attributes are deleted first, as if it were freed
    // (the last set first), so a library can clean up there; then
    // MPI_COMM_WORLD's.
    let r = mpi().and_then(|m| {
        super::attr::delete_all(m, crate::api::attr::Kind::Comm, crate::api::consts::COMM_SELF)?;
        super::attr::delete_all(m, crate::api::attr::Kind::Comm, COMM_WORLD)
    });
    if let Err(e) = r {
        return ret("MPI_Finalize", NO_OBJECT, Err(e));
    }
    ret("MPI_Finalize", NO_OBJECT, api::finalize())
});

mpi_fn!(fn MPI_Abort / PMPI_Abort(comm: c_int, code: c_int) {
    // The standard aborts "the processes in the group of comm": under ULFM,
    // where the others survive a failed process, a communicator of this
    // process alone (MPI_COMM_SELF) ends this process only, as ULFM's
    // tutorials use it to inject a failure. Elsewhere the job ends.
    if let Ok(m) = mpi() {
        let alone = m.tables().comm(comm).is_ok_and(|c| !c.is_inter() && c.group.members == [m.rank]);
        if alone && m.mode == api::RecoveryMode::Ulfm {
            api::abort_self(code);
        }
    }
    api::abort(code, "")
});

mpi_fn!(fn MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) {
    // SAFETY: caller's pointer, checked for NULL by get/put.
    let r = mpi().and_then(|m| unsafe { put(provided, m.thread_level) });
    ret("MPI_Query_thread", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) {
    let r = mpi().and_then(|m| {
        let main = std::thread::current().id() == m.main_thread;
        // SAFETY: caller's out-pointer.
        unsafe { put(flag, main as c_int) }
    });
    ret("MPI_Is_thread_main", NO_OBJECT, r)
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

mpi_fn!(fn MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, len: *mut c_int) {
    let h = api::processor_name();
    // SAFETY: the standard sizes `name` as MPI_MAX_PROCESSOR_NAME.
    ret("MPI_Get_processor_name", NO_OBJECT, unsafe { put_str(&h, name, MAX_PROCESSOR_NAME as usize, len) })
});

mpi_fn!(fn MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) {
    // SAFETY: caller's out-pointers.
    ret("MPI_Get_version", NO_OBJECT, unsafe { put(version, crate::api::consts::VERSION).and_then(|_| put(subversion, crate::api::consts::SUBVERSION)) })
});

mpi_fn!(fn MPI_Get_library_version / PMPI_Get_library_version(s: *mut c_char, len: *mut c_int) {
    let v = format!("mpistages {} (MPI Stages fault-tolerant MPI)", env!("CARGO_PKG_VERSION"));
    // SAFETY: the standard sizes `s` as MPI_MAX_LIBRARY_VERSION_STRING (>= 64).
    ret("MPI_Get_library_version", NO_OBJECT, unsafe { put_str(&v, s, 64, len) })
});
