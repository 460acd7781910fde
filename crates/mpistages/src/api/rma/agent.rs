//! A window's agent: a thread of each member that takes the requests
//! other members (and this one) send to the window's context and does
//! them: one at a time, in the order each origin sent them, so
//! accumulates are atomic with respect to each other and a flush's answer
//! means every earlier request of that origin is done. The target's
//! program needs no MPI call for this (passive-target progress); the
//! thread sleeps in the engine while nothing comes. It ends when its own
//! process sends `Stop` (`MPI_Win_free`) or when the engine halts for a
//! recovery.

use super::lock::{Ask, LockState, Released};
use super::target::Target;
use super::wire::{self, Request};
use crate::api::{Comm, Mpi};
use crate::progress::request::{Bytes, Owned};
use crate::progress::{Op, SendMode, Src};
use crate::transport::RawBuf;
use std::sync::Arc;

/// Starts the agent of a window on `comm` (its private context).
pub fn spawn(
    m: &'static Mpi,
    comm: Arc<Comm>,
    target: Arc<Target>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("mpistages-win-{}", comm.context))
        .spawn(move || run(m, &comm, &target))
}

fn run(m: &Mpi, comm: &Comm, target: &Target) {
    let mut locks = LockState::default();
    // Per origin, the first error of its requests since its last flush
    // or unlock, which reports it (requests without a reply have nobody
    // else to tell).
    let mut errors = vec![0i32; comm.size()];
    loop {
        let Some((origin, msg)) = receive(m, comm) else {
            return;
        };
        let (req, data) = match wire::decode(&msg) {
            Ok(r) => r,
            Err(e) => {
                log::warn!("window agent: from rank {origin}: {}", e.detail);
                continue;
            }
        };
        match req {
            Request::Stop => return,
            Request::Lock { exclusive, reply } => {
                let ask = Ask {
                    origin,
                    exclusive,
                    reply,
                };
                if let Some(a) = locks.lock(ask) {
                    answer(m, comm, a.origin, a.reply, Vec::new());
                }
            }
            Request::Unlock { reply } => {
                let granted = match locks.unlock(origin) {
                    Released::Granted(g) => g,
                    Released::NotHeld => {
                        errors[origin] = crate::api::consts::err::RMA_SYNC;
                        Vec::new()
                    }
                };
                let code = std::mem::take(&mut errors[origin]);
                answer(m, comm, origin, reply, code.to_le_bytes().to_vec());
                for a in granted {
                    answer(m, comm, a.origin, a.reply, Vec::new());
                }
            }
            Request::Flush { reply } => {
                let code = std::mem::take(&mut errors[origin]);
                answer(m, comm, origin, reply, code.to_le_bytes().to_vec());
            }
            req => {
                let done = target.apply(&req, data);
                if let Err(e) = &done {
                    if errors[origin] == 0 {
                        errors[origin] = e.class;
                    }
                }
                if let Some(tag) = reply_tag(&req) {
                    // An error answers with no bytes, which the origin
                    // sees as too few.
                    answer(m, comm, origin, tag, done.unwrap_or_default());
                }
            }
        }
    }
}

fn reply_tag(req: &Request) -> Option<i32> {
    match req {
        Request::Get { reply, .. }
        | Request::GetAccumulate { reply, .. }
        | Request::CompareAndSwap { reply, .. } => Some(*reply),
        _ => None,
    }
}

/// The next request: its origin (rank in the window's group) and bytes;
/// `None` once the engine fails it (a halt).
fn receive(m: &Mpi, comm: &Comm) -> Option<(usize, Vec<u8>)> {
    let (h, st) = m.engine.claim(comm.context, Src::Any, Some(wire::REQUEST));
    if st.error.is_some() {
        return None;
    }
    let mut buf = vec![0u8; st.bytes];
    // SAFETY: `buf` lives until the receive is waited for below.
    let raw = unsafe { RawBuf::new(buf.as_mut_ptr(), buf.len()) };
    let op = Op::Recv {
        src: Some(Src::Any),
        tag: None,
        context: 0,
        layout: Box::new(Bytes(raw)),
    };
    let id = m.engine.receive_claimed(h, op)?;
    let got = m.engine.wait(id);
    if got.error.is_some() {
        return None;
    }
    Some((st.source as usize, buf))
}

/// Sends `bytes` to `origin` on its reply tag. A dead origin fails the
/// send, which is all there is to do about it.
fn answer(m: &Mpi, comm: &Comm, origin: usize, tag: i32, bytes: Vec<u8>) {
    let id = m.engine.post(Op::Send {
        dest: Some(comm.peer_world(origin)),
        src: comm.rank as u32,
        context: comm.context,
        tag,
        mode: SendMode::Standard,
        layout: Box::new(Owned(bytes)),
    });
    m.engine.wait(id);
}
