//! Application and MPI-state checkpoints on storage. Owns: the per-rank
//! checkpoint file format (`format.rs`). Must not touch: MPI semantics or
//! the engine; callers hand it sections of bytes.
//!
//! Storage levels (mem, tmpfs, partner, pfs), asynchronous flush and the
//! `MPIX_Checkpoint_*` integration come with the MPI Stages work.

pub mod config;
pub mod dirlevel;
pub mod flush;
pub mod format;
pub mod inspect;
pub mod store;
#[cfg(test)]
mod testutil;
