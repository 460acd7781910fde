//! mpistages: an MPI implementation built around fast recovery from process
//! failures (MPI Stages). The library's layers call only downward
//! (tests/layering.rs checks it; docs/ARCHITECTURE.md explains them):
//!
//! ```text
//! abi        C and Fortran entry points
//!  └ api     MPI objects, handles, argument checks, errors
//!     ├ coll        collective algorithms (byte schedules on a Team)
//!     ├ stages      the Stages protocol: checkpoint, rejoin, restore
//!     │  └ checkpoint   storage levels and the checkpoint format
//!     └ progress    the engine: requests, matching, protocols, waiting
//!        ├ transport   moving frames between ranks (TCP)
//!        └ control     the rank's side of the control plane
//! inject     fault injection in a rank (beside stages, above control)
//! sys        system calls, below everything
//! ```
//!
//! The launcher (`mpiexec`, the agent, the compiler wrappers) is another
//! crate of the workspace: `libmpistages.so` holds none of it.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod abi;
pub mod api;
pub mod checkpoint;
pub mod coll;
pub mod control;
pub mod inject;
pub mod progress;
pub mod stages;
/// System calls: the crate `mpistages-sys`, shared with the launcher.
pub use mpistages_sys as sys;
pub mod transport;
