//! What the API's request handles need of the engine, each in one hold of
//! the lock: requests made with their owner (the communicator or file
//! whose error handler their errors go to, opaque here), a handle's slot
//! looked up, and a whole `MPI_Waitall` waited for and taken at once.
//! A message-rate loop (a window of `MPI_Isend`s, then `MPI_Waitall`)
//! pays per request a few loads here instead of several locks and a map.

use super::engine::{Engine, ReqState};
use super::req::{Req, State};
use super::request::{Op, ReqId, Status};
use super::state::Core;

/// What `Engine::wait_all_unless_blocked` found of one request.
#[derive(Debug)]
pub enum Waited {
    /// Complete: its status, taken (a one-shot request is released, a
    /// persistent one inactive).
    Done(Status),
    /// A wildcard receive blocked by a failure not acknowledged (ULFM):
    /// still posted.
    Blocked,
    /// Gone meanwhile (freed), or an inactive persistent request.
    Idle,
}

/// A handle's request, as `Engine::lookup` finds it.
#[derive(Clone, Copy, Debug)]
pub struct Found {
    pub id: ReqId,
    pub state: ReqState,
    /// Whose error handler its errors go to (`Req::owner`).
    pub owner: i32,
}

impl Engine {
    /// Creates and starts a one-shot request owned by `owner`, and leaves
    /// it to the progress thread as `background` does (one hold of the
    /// lock for both).
    pub fn post_owned(&self, op: Op, owner: i32) -> ReqId {
        self.with(|c| {
            let id = c.alloc(Req::new(op, false).owned_by(owner));
            c.start(id);
            self.hand_off(c);
            id
        })
    }

    /// A one-shot request owned by `owner`, complete from the start with
    /// `status` (a standard send shared memory took whole at once).
    pub fn completed_owned(&self, status: Status, owner: i32) -> ReqId {
        self.with(|c| c.alloc(completed(status, owner)))
    }

    /// `completed_owned` of a standard send written whole at once
    /// (`send_bytes_now`), under the same hold of the lock; `None`: not
    /// written, nothing made.
    pub fn send_bytes_now_owned(
        &self,
        dest: usize,
        context: u32,
        src: u32,
        tag: i32,
        data: crate::transport::RawBuf,
        owner: i32,
    ) -> Option<ReqId> {
        self.with(|c| {
            c.send_bytes_now(dest, context, src, tag, data)
                .then(|| c.alloc(completed(Status::empty(), owner)))
        })
    }

    /// `MPI_Waitall`'s quick path, for requests that end without an
    /// error: `slots` are (position, slot index) of the handles. Waits as
    /// `wait_all_unless_blocked` does, then, if every request is complete
    /// and none with an error, takes each and gives `each` its position,
    /// whether it is persistent, and its status; all under one hold of
    /// the lock. False, with nothing taken, if a slot holds no request or
    /// any request ends blocked or with an error: the ordinary path then
    /// does it (and finds them complete).
    pub fn wait_all_quick(
        &self,
        slots: &[(usize, u32)],
        mut each: impl FnMut(usize, bool, Status),
    ) -> bool {
        let mut from = 0;
        self.wait_until(|c| {
            let id = |index: u32| c.id_at(index);
            let settled = |&(_, i): &(usize, u32)| match id(i) {
                Some(id) => !c.is_running(id) || c.wildcard_blocked(id),
                None => true,
            };
            from += slots[from..].iter().take_while(|s| settled(s)).count();
            if from < slots.len() {
                return None;
            }
            let clean = slots.iter().all(|&(_, i)| {
                matches!(
                    id(i).and_then(|id| c.req(id)),
                    Some(Req { state: State::Done(st), .. }) if st.error.is_none()
                )
            });
            if !clean {
                return Some(false);
            }
            for &(at, i) in slots {
                let Some(id) = c.id_at(i) else { continue };
                let persistent = c.req(id).is_some_and(|r| r.persistent);
                if let Some(st) = c.take(id) {
                    each(at, persistent, st);
                }
            }
            Some(true)
        })
    }

    /// The request in slot `index`, if any.
    pub fn lookup(&self, index: u32) -> Option<Found> {
        self.with(|c| lookup_in(c, index))
    }

    /// `lookup` of each of `indices`, in order, under one hold of the lock.
    pub fn lookup_all(&self, indices: impl Iterator<Item = u32>) -> Vec<Option<Found>> {
        self.with(|c| indices.map(|i| lookup_in(c, i)).collect())
    }

    /// `MPI_Waitall`'s engine side: waits until each of `ids` is complete
    /// or blocked (`Waited::Blocked`), then takes the status of every
    /// complete one, all under one hold of the lock.
    pub fn wait_all_unless_blocked(&self, ids: &[ReqId]) -> Vec<Waited> {
        // A request once complete stays so: each round looks on from the
        // first one that was not.
        let mut from = 0;
        self.wait_until(|c| {
            let settled = |&id: &ReqId| !c.is_running(id) || c.wildcard_blocked(id);
            from += ids[from..].iter().take_while(|id| settled(id)).count();
            if from < ids.len() {
                return None;
            }
            Some(
                ids.iter()
                    .map(|&id| {
                        if c.is_running(id) {
                            return Waited::Blocked;
                        }
                        c.take(id).map_or(Waited::Idle, Waited::Done)
                    })
                    .collect(),
            )
        })
    }

    /// Starts `op` as the one part of `parent`, an active `Op::External`
    /// request, which then completes with the part's status or error (a
    /// partitioned send once every partition is ready, a partitioned
    /// receive as it starts). False, with nothing started, if `parent` is
    /// not an active external request. `shown_tag`: the tag the request
    /// reports instead of the part's.
    pub fn attach(&self, parent: ReqId, op: Op, shown_tag: Option<i32>) -> bool {
        self.with(|c| {
            let active = matches!(
                c.req(parent),
                Some(Req {
                    op: Op::External,
                    state: State::Active(_),
                    ..
                })
            );
            if !active || c.joins.contains_key(&parent) {
                return false;
            }
            c.start_parts(parent, vec![op], 0, shown_tag);
            true
        })
    }
}

impl Core {
    /// Starts `ops` as the parts of `parent`, which completes with the
    /// last of them, reporting `ops[report]`'s status or the first error
    /// (`Engine::join`, `Engine::attach`).
    pub(super) fn start_parts(
        &mut self,
        parent: ReqId,
        ops: Vec<Op>,
        report: usize,
        shown_tag: Option<i32>,
    ) {
        let parts: Vec<ReqId> = ops
            .into_iter()
            .map(|op| self.alloc(Req::new(op, false)))
            .collect();
        self.joins.insert(
            parent,
            super::state::Join {
                left: parts.len(),
                report: parts[report],
                status: Status::empty(),
                shown_tag,
            },
        );
        for &p in &parts {
            if let Some(r) = self.req_mut(p) {
                r.part_of = Some(parent);
                r.freed = true;
            }
        }
        for p in parts {
            self.start(p);
        }
    }
}

/// A one-shot request owned by `owner`, complete with `status`.
fn completed(status: Status, owner: i32) -> Req {
    let mut r = Req::new(Op::External, false).owned_by(owner);
    r.state = State::Done(status);
    r
}

fn lookup_in(c: &Core, index: u32) -> Option<Found> {
    let id = c.id_at(index)?;
    Some(Found {
        id,
        state: state_of(c, id),
        owner: c.req(id).map_or(super::req::NO_OWNER, |r| r.owner),
    })
}

/// `Engine::state`.
pub(super) fn state_of(c: &Core, id: ReqId) -> ReqState {
    match c.req(id) {
        None => ReqState::Gone,
        Some(r) if matches!(r.state, State::Inactive) => ReqState::Inactive,
        Some(r) => ReqState::Live {
            persistent: r.persistent,
        },
    }
}
