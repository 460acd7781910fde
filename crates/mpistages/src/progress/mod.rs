//! The progress engine: every operation is a request; one progress thread
//! (or, in `poll` mode, the waiting user thread) advances all requests and
//! transports. Owns: the request table, matching, the eager / rendezvous /
//! synchronous protocols, waiting. Must not touch: communicators, datatypes
//! or error handlers (it sees messages as bytes through `Layout`), nor any
//! transport's internals (it sees them through `transport::Transport`).
//!
//! Stages seam: the engine's state to save is nothing but inactive persistent
//! requests; `halt` fails every active request and `cleanup` empties queues.

mod blocking;
pub mod engine;
mod handles;
mod inplace;
pub mod matcher;
mod protocol;
#[cfg(test)]
mod protocol_tests;
mod req;
pub mod request;
mod slab;
mod spin;
mod state;
pub mod ulfm;
mod wait;

pub use blocking::Round;
pub use engine::{Engine, EngineConfig, FinalizeEnd, ProgressMode, ReqState, STANDBY};
pub use handles::{Found, Waited};
pub use matcher::{Src, TagSel};
pub use req::NO_OWNER;
pub use request::{Data, Layout, Op, ReqError, ReqId, SendMode, Status};
pub use spin::Helper;
