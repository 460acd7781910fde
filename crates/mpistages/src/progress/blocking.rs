//! The blocking point-to-point calls' short ways: a send written whole at
//! once into shared memory needs no request at all, and a blocking send or
//! receive that does is posted and waited for under one hold of the lock.

use super::engine::Engine;
use super::req::Req;
use super::request::{Data, Op, ReqError, ReqId, SendMode, Status};
use super::Src;
use crate::transport::RawBuf;
use smallvec::SmallVec;

/// The messages of one round of a collective, on one context and tag:
/// receives of contiguous bytes from (source number, buffer), sends to
/// (world rank, buffer) carrying source number `me`.
pub struct Round<'a> {
    pub context: u32,
    pub tag: i32,
    pub me: u32,
    pub recvs: &'a [(u32, RawBuf)],
    pub sends: &'a [(usize, RawBuf)],
}

impl Engine {
    /// A blocking standard send that shared memory takes whole at once
    /// completes here, with no request (`Core::send_now`); otherwise the
    /// operation comes back, to be posted.
    pub fn send_now(&self, op: Op) -> Result<(), Op> {
        self.lock().send_now(op)
    }

    /// `send_now` of a standard send of `data`, contiguous: true if it
    /// was written whole at once (nothing allocated, no request).
    pub fn send_bytes_now(
        &self,
        dest: usize,
        context: u32,
        src: u32,
        tag: i32,
        data: RawBuf,
    ) -> bool {
        self.lock().send_bytes_now(dest, context, src, tag, data)
    }

    /// A blocking send: sent at once with no request when it can be
    /// (`send_now`), else posted and waited for, all under one hold of
    /// the lock.
    pub fn send_blocking(&self, op: Op) -> Status {
        let mut op = Some(op);
        let mut posted = None;
        self.wait_until(|c| {
            let id = match posted {
                Some(id) => id,
                None => match c.send_now(op.take().expect("taken once")) {
                    Ok(()) => return Some(Status::empty()),
                    Err(op) => {
                        let id = c.alloc(Req::new(op, false));
                        c.start(id);
                        *posted.insert(id)
                    }
                },
            };
            if !c.exists(id) || c.is_inactive(id) {
                return Some(Status::empty());
            }
            c.take(id)
        })
    }

    /// Runs a round of a collective under one hold of the lock: posts the
    /// receives first (a message then finds its receive waiting, here and
    /// at the peer running the same schedule), writes each send at once
    /// where shared memory takes it whole (no request) or posts it, and
    /// waits for all; the first error, if any.
    pub fn exchange(&self, round: &Round) -> Result<(), ReqError> {
        let mut ids: SmallVec<[ReqId; 8]> = SmallVec::new();
        let mut posted = false;
        self.wait_until(|c| {
            if !posted {
                posted = true;
                for &(from, buf) in round.recvs {
                    let op = Op::Recv {
                        src: Some(Src::Rank(from)),
                        tag: Some(round.tag),
                        context: round.context,
                        layout: Data::Bytes(buf),
                    };
                    let id = c.alloc(Req::new(op, false));
                    c.start(id);
                    ids.push(id);
                }
                for &(to, buf) in round.sends {
                    if c.send_bytes_now(to, round.context, round.me, round.tag, buf) {
                        continue;
                    }
                    let op = Op::Send {
                        dest: Some(to),
                        src: round.me,
                        context: round.context,
                        tag: round.tag,
                        mode: SendMode::Standard,
                        layout: Data::Bytes(buf),
                    };
                    let id = c.alloc(Req::new(op, false));
                    c.start(id);
                    ids.push(id);
                }
            }
            if ids.iter().any(|&id| c.is_running(id)) {
                return None;
            }
            let mut first = Ok(());
            for &id in &ids {
                if let Some(Status { error: Some(e), .. }) = c.take(id) {
                    if first.is_ok() {
                        first = Err(e);
                    }
                }
            }
            Some(first)
        })
    }

    /// A blocking receive: posted and waited for under one hold of the
    /// lock. `Err` with its request: a wildcard receive that a failure not
    /// acknowledged blocks (ULFM), still posted (as `wait_unless_blocked`).
    pub fn recv_blocking(&self, op: Op) -> Result<Status, ReqId> {
        let mut op = Some(op);
        let mut posted = None;
        self.wait_until(|c| {
            let id = *posted.get_or_insert_with(|| {
                let id = c.alloc(Req::new(op.take().expect("taken once"), false));
                c.start(id);
                id
            });
            if !c.exists(id) || c.is_inactive(id) {
                return Some(Ok(Status::empty()));
            }
            match c.take(id) {
                Some(st) => Some(Ok(st)),
                None => c.wildcard_blocked(id).then_some(Err(id)),
            }
        })
    }
}
