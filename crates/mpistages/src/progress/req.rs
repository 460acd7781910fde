//! A request's state inside the engine (`Req`: its operation and where it
//! stands, `Phase` while active) and a message the matcher holds until a
//! receive takes it (`Msg`). The protocol (`protocol.rs`) moves requests
//! through these states.

use super::request::{Op, ReqId, Status};

/// `Req::owner` of a request nobody said owns it.
pub const NO_OWNER: i32 = 0;

/// A message the matcher holds until a receive takes it.
pub(super) struct Msg {
    /// World rank of the sender.
    pub(super) from: usize,
    pub(super) len: usize,
    /// The sender's request to acknowledge on match (synchronous eager send).
    pub(super) sync: Option<u64>,
    pub(super) body: Body,
}

pub(super) enum Body {
    Eager(Vec<u8>),
    /// Rendezvous: the data waits at the sender's request.
    Rts {
        sender: u64,
    },
}

pub(super) enum Phase {
    Send {
        /// Every byte handed to the transport (or copied, for oneself).
        out: bool,
        /// The receiver matched (always true unless synchronous eager).
        acked: bool,
        /// Rendezvous: waiting for the receiver's CTS.
        want_cts: bool,
    },
    RecvPosted,
    RecvData {
        status: Status,
        staging: Option<Vec<u8>>,
    },
    /// `Op::External`: waiting for `Engine::complete`.
    External,
}

pub(super) enum State {
    Inactive,
    Active(Phase),
    Done(Status),
}

pub(super) struct Req {
    pub(super) op: Op,
    pub(super) persistent: bool,
    /// Counted in `Core::bulk_active` while active.
    pub(super) bulk: bool,
    /// `MPI_Request_free` was called: release the slot on completion.
    pub(super) freed: bool,
    pub(super) state: State,
    /// Packed copy of non-contiguous send data, alive until completion.
    pub(super) packed: Option<Vec<u8>>,
    /// A part of this joined request (`Engine::join`).
    pub(super) part_of: Option<ReqId>,
    /// The library's own (a window agent's reply), not the application's:
    /// not one of the requests a checkpoint must wait for.
    pub(super) internal: bool,
    /// Whose error handler the request's errors go to (the API's
    /// communicator or file; opaque here, `NO_OWNER` when none).
    pub(super) owner: i32,
}

impl Req {
    /// A request for `op`, not started.
    pub(super) fn new(op: Op, persistent: bool) -> Req {
        Req {
            op,
            persistent,
            bulk: false,
            freed: false,
            state: State::Inactive,
            packed: None,
            part_of: None,
            internal: false,
            owner: NO_OWNER,
        }
    }

    /// This request, owned by `owner` (`Req::owner`).
    pub(super) fn owned_by(mut self, owner: i32) -> Req {
        self.owner = owner;
        self
    }
}
