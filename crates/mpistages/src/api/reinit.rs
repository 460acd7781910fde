//! Reinit (`mpiexec --recovery reinit`), the rank side apart from the jump
//! itself (csrc/reinit.c): what `MPIX_Reinit` tells the restart point, and
//! the reset of a live rank that jumped back.
//!
//! The controller treats a failure as under Stages (the failed rank is
//! replaced, every rank meets at the rejoin barrier); the difference is
//! that no MPI state is restored: every rank continues from the state
//! right after `MPI_Init`, with the fault epoch set for its data.

use super::consts::err;
use super::error::{fail, MpiError, MpiResult};
use super::{mpix, Mpi, RecoveryMode};

/// `MPIX_Reinit_state` values (include/mpi.h).
pub const NEW: i32 = 1;
pub const RESTARTED: i32 = 3;

/// At `MPIX_Reinit`: the state the restart point first sees (RESTARTED in
/// a process started because of a failure), and whether a failure makes
/// this rank jump back (only under `--recovery reinit`).
pub fn start(m: &Mpi) -> (i32, bool) {
    let state = if m.relaunched { RESTARTED } else { NEW };
    (state, m.mode == RecoveryMode::Reinit && m.client.is_some())
}

/// A live rank jumped back to its restart point: drop what was in flight,
/// wait at the rejoin barrier for the replacement, and come back with the
/// MPI state of `MPI_Init` and the agreed epoch as the fault epoch.
pub fn reset(m: &Mpi) -> MpiResult<()> {
    if !m.engine.halted() {
        return fail(
            err::INTERN,
            "MPIX_Reinit: jumped back without a failure to recover from",
        );
    }
    let client = m
        .client
        .as_deref()
        .ok_or_else(|| MpiError::new(err::INTERN, "MPIX_Reinit: no mpiexec to rejoin"))?;
    mpix::rejoin_and_restore(m, client, false)
}
