//! The rank's side of the control plane: the client that connects a rank
//! to `mpiexec` (`client`), and the vocabulary it shares with the launcher
//! (the crate `mpistages-control`, re-exported here: `proto`, `inject`,
//! `mode`, `env`).
//!
//! Owns: the control channel's bytes. Must not touch: MPI state (the
//! engine reads notices from a `ControlReader`), processes (the launcher's).
//! Calls only `sys`.

pub mod client;
pub mod pmi2;
pub use mpistages_control::{env, inject, mode, proto, stream};
