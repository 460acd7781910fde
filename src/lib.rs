//! mpistages: an MPI implementation built around fast recovery from process
//! failures (MPI Stages). See `DESIGN.md` for the layering: `abi` (C and
//! Fortran entry points) → `api` → `coll` / `progress` / `stages` /
//! `checkpoint` → `transport` → `runtime`; `sys` wraps the OS.

pub mod abi;
pub mod api;
pub mod checkpoint;
pub mod coll;
pub mod progress;
pub mod runtime;
pub mod stages;
pub mod sys;
pub mod transport;
