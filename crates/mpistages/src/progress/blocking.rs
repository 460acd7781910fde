//! The blocking point-to-point calls' short ways: a send written whole at
//! once into shared memory needs no request at all, and a blocking send or
//! receive that does is posted and waited for under one hold of the lock.

use super::engine::Engine;
use super::req::Req;
use super::request::{Op, ReqId, Status};
use crate::transport::RawBuf;

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
