//! The MPI Stages extensions (ExaMPI's names, signatures and values).

use super::{mpi, mpi_fn, put, ret};
use crate::api::consts::{err, COMM_WORLD};
use crate::api::error::fail;
use crate::api::mpix;
use crate::stages::{DeserializeFn, SerializeFn};
use std::os::raw::c_int;

mpi_fn!(fn MPIX_Checkpoint_write / PMPIX_Checkpoint_write() {
    ret("MPIX_Checkpoint_write", COMM_WORLD, mpi().and_then(mpix::checkpoint_write))
});

mpi_fn!(fn MPIX_Checkpoint_read / PMPIX_Checkpoint_read() {
    ret("MPIX_Checkpoint_read", COMM_WORLD, mpi().and_then(mpix::checkpoint_read))
});

mpi_fn!(fn MPIX_Get_fault_epoch / PMPIX_Get_fault_epoch(epoch: *mut c_int) {
    let r = mpi().and_then(|m| {
        let e = mpix::fault_epoch(m);
        let e = c_int::try_from(e).or_else(|_| fail(err::INTERN, "the fault epoch does not fit an int"))?;
        // SAFETY: caller's out-pointer (NULL is refused).
        unsafe { put(epoch, e) }
    });
    ret("MPIX_Get_fault_epoch", COMM_WORLD, r)
});

mpi_fn!(fn MPIX_Serialize_handles / PMPIX_Serialize_handles() {
    ret("MPIX_Serialize_handles", COMM_WORLD, mpi().and_then(mpix::serialize_handles))
});

mpi_fn!(fn MPIX_Deserialize_handles / PMPIX_Deserialize_handles() {
    ret("MPIX_Deserialize_handles", COMM_WORLD, mpi().and_then(mpix::deserialize_handles))
});

mpi_fn!(fn MPIX_Serialize_handler_register / PMPIX_Serialize_handler_register(handler: Option<SerializeFn>) {
    let r = mpi().and_then(|m| match handler {
        Some(h) => {
            mpix::register_serializer(m, h);
            Ok(())
        }
        None => fail(err::ARG, "the serialize handler is NULL"),
    });
    ret("MPIX_Serialize_handler_register", COMM_WORLD, r)
});

mpi_fn!(fn MPIX_Deserialize_handler_register / PMPIX_Deserialize_handler_register(handler: Option<DeserializeFn>) {
    let r = mpi().and_then(|m| match handler {
        Some(h) => {
            mpix::register_deserializer(m, h);
            Ok(())
        }
        None => fail(err::ARG, "the deserialize handler is NULL"),
    });
    ret("MPIX_Deserialize_handler_register", COMM_WORLD, r)
});
