//! The shared-memory transport for ranks on one host (in progress).

pub mod ring;
