//! The launcher: `mpiexec` (the controller), the node agent that starts and
//! supervises ranks, spares, the command line, leftovers of dead jobs, and
//! the compiler wrappers. It speaks to ranks through the control protocol
//! of the crate `mpistages-control`, and makes system calls through
//! `mpistages-sys`; of the MPI library it uses only the checkpoint reader
//! (`mpistages-ckpt`, the `--ckpt` syntax) and the Fortran binding table
//! (`mpifort`).
//!
//! Owns: processes, the job directory, the controller's side of the
//! control channel. Must not touch: MPI state inside ranks (a rank learns
//! what it needs through `control::client`).

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

/// `eprintln!`, but the line goes out in one `write`: a rank writing to
/// the same standard error then cannot cut it in two (`eprintln!` writes
/// each formatted piece on its own). Errors writing are ignored, as a
/// closed standard error must not end the job.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = format!("{}\n", format_args!($($arg)*));
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }};
}

pub mod agent;
pub mod cli;
pub mod controller;
pub mod hosts;
pub mod leftovers;
pub mod output;
pub mod relay;
pub mod remote_agent;
pub mod restart;
pub mod simulate;
pub mod slurm;
pub mod spares;
pub mod subtree;
pub mod usage;
pub mod wrapper;
