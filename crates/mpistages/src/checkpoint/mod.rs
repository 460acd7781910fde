//! Application and MPI-state checkpoints on storage. Owns: the per-rank
//! checkpoint file format (`format.rs`). Must not touch: MPI semantics or
//! the engine; callers hand it sections of bytes.
//!
//! Levels: `mem`, `tmpfs` and `pfs` live here (`store.rs`, `dirlevel.rs`,
//! `flush.rs`); the partner level's copies are held here too, but moving
//! them between ranks is the MPI layer's (`api::recovery`). `snapshot.rs`
//! copies protected regions in the background under write-protection,
//! into the `mem` level's copy (`memcopy.rs`).

pub mod config;
pub mod diff;
pub mod dirlevel;
pub mod erasure;
pub mod flush;
pub mod format;
pub mod inspect;
pub mod levelwrite;
pub mod memcopy;
pub mod snapshot;
pub mod store;
#[cfg(test)]
pub(crate) mod testutil;
