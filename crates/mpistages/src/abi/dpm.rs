//! Ports, names and `MPI_Comm_join` (see `api::dpm`).

use super::comm::new_comm;
use super::{cstr, mpi, mpi_fn, ret};
use crate::api::consts::{COMM_SELF, COMM_WORLD};
use crate::api::dpm::{self, Side, MAX_PORT_NAME};
use crate::api::error::{fail, MpiResult};
use crate::api::{consts::err, info};
use std::os::raw::{c_char, c_int};

/// Writes a port name into the caller's `MPI_MAX_PORT_NAME` bytes.
///
/// # Safety
/// `buf` is NULL or holds `MPI_MAX_PORT_NAME` bytes.
unsafe fn put_port(name: &str, buf: *mut c_char) -> MpiResult<()> {
    if buf.is_null() || name.len() >= MAX_PORT_NAME {
        return fail(
            err::ARG,
            "the port name buffer is NULL (or the name too long for MPI_MAX_PORT_NAME)",
        );
    }
    // SAFETY: len + 1 <= MPI_MAX_PORT_NAME bytes of the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(name.as_ptr() as *const c_char, buf, name.len());
        buf.add(name.len()).write(0);
    }
    Ok(())
}

mpi_fn!(fn MPI_Open_port / PMPI_Open_port(info_h: c_int, port: *mut c_char) {
    let r = mpi().and_then(|m| {
        info::get_or_empty(info_h)?;
        let name = dpm::open_port(m)?;
        // SAFETY: the caller's buffer of MPI_MAX_PORT_NAME bytes.
        unsafe { put_port(&name, port) }
    });
    ret("MPI_Open_port", COMM_WORLD, r)
});

mpi_fn!(fn MPI_Close_port / PMPI_Close_port(port: *const c_char) {
    // SAFETY: the caller's C string.
    let r = mpi().and_then(|m| dpm::close_port(m, &unsafe { cstr(port) }?));
    ret("MPI_Close_port", COMM_WORLD, r)
});

/// `MPI_Comm_accept` and `MPI_Comm_connect`: the port name is read at the
/// root only (elsewhere it may be anything, NULL included).
///
/// # Safety
/// At the root `port` is a C string; `out` is the caller's out-pointer.
unsafe fn rendezvous(
    what: &str,
    side: Side,
    port: *const c_char,
    info_h: c_int,
    root: c_int,
    c: c_int,
    out: *mut c_int,
) -> c_int {
    new_comm(what, c, out, |m| {
        let at_root = m.tables().comm(c)?.rank as c_int == root;
        let name = match at_root {
            true => {
                info::get_or_empty(info_h)?;
                // SAFETY: the root's C string (caller's contract).
                Some(unsafe { cstr(port) }?)
            }
            false => None,
        };
        dpm::accept_or_connect(m, side, name.as_deref(), root, c)
    })
}

mpi_fn!(fn MPI_Comm_accept / PMPI_Comm_accept(port: *const c_char, info_h: c_int, root: c_int, c: c_int, out: *mut c_int) {
    // SAFETY: forwarded caller's arguments.
    unsafe { rendezvous("MPI_Comm_accept", Side::Accept, port, info_h, root, c, out) }
});

mpi_fn!(fn MPI_Comm_connect / PMPI_Comm_connect(port: *const c_char, info_h: c_int, root: c_int, c: c_int, out: *mut c_int) {
    // SAFETY: forwarded caller's arguments.
    unsafe { rendezvous("MPI_Comm_connect", Side::Connect, port, info_h, root, c, out) }
});

mpi_fn!(fn MPI_Comm_join / PMPI_Comm_join(fd: c_int, out: *mut c_int) {
    new_comm("MPI_Comm_join", COMM_SELF, out, |m| {
        if fd < 0 {
            return fail(err::ARG, format!("file descriptor {fd} is not a socket"));
        }
        use std::os::fd::FromRawFd;
        // SAFETY: the caller's open socket, borrowed for the call: the
        // ManuallyDrop keeps it open (the standard leaves it to the caller).
        let mut socket = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
        dpm::join(m, &mut *socket)
    })
});

/// `MPI_Publish_name` and `MPI_Unpublish_name`: `f` with the strings.
fn service(
    name: &str,
    service: *const c_char,
    info_h: c_int,
    port: *const c_char,
    f: fn(&crate::api::Mpi, &str, &str) -> MpiResult<()>,
) -> c_int {
    let r = mpi().and_then(|m| {
        info::get_or_empty(info_h)?;
        // SAFETY: the caller's C strings.
        let (s, p) = unsafe { (cstr(service)?, cstr(port)?) };
        f(m, &s, &p)
    });
    ret(name, COMM_WORLD, r)
}

mpi_fn!(fn MPI_Publish_name / PMPI_Publish_name(s: *const c_char, info_h: c_int, port: *const c_char) {
    service("MPI_Publish_name", s, info_h, port, dpm::publish)
});

mpi_fn!(fn MPI_Unpublish_name / PMPI_Unpublish_name(s: *const c_char, info_h: c_int, port: *const c_char) {
    service("MPI_Unpublish_name", s, info_h, port, dpm::unpublish)
});

mpi_fn!(fn MPI_Lookup_name / PMPI_Lookup_name(service: *const c_char, info_h: c_int, port: *mut c_char) {
    let r = mpi().and_then(|m| {
        info::get_or_empty(info_h)?;
        // SAFETY: the caller's C string.
        let name = dpm::lookup(m, &unsafe { cstr(service) }?)?;
        // SAFETY: the caller's buffer of MPI_MAX_PORT_NAME bytes.
        unsafe { put_port(&name, port) }
    });
    ret("MPI_Lookup_name", COMM_WORLD, r)
});
