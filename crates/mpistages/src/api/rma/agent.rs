//! The windows' agent: one thread per process that takes the requests
//! origins send to this process's windows (all on one context,
//! `RMA_CONTEXT`, each request naming its window) and does them: one at a
//! time, in the order each origin sent them, so accumulates are atomic
//! with respect to each other and a flush's answer means every earlier
//! request of that origin is done. The target's program needs no MPI call
//! for this (passive-target progress); the thread sleeps in the engine
//! while nothing comes. One thread serves every window: a thread per
//! window would have each message of the process wake them all.
//!
//! It starts with the first window and ends when the engine halts for a
//! recovery (every wait fails then; the rollback joins it) or at exit;
//! the next window starts it again.

use super::lock::{Ask, LockState, Released};
use super::target::Target;
use super::wire::{self, Request};
use crate::api::{Comm, Mpi};
use crate::progress::request::{Data, Owned};
use crate::progress::{Op, SendMode, Src};
use crate::transport::RawBuf;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The context of every request to a window's agent (reserved: the
/// communicators' contexts come after it). Messages on it carry the
/// origin's world rank as their source.
pub const RMA_CONTEXT: u32 = 6;

/// What the agent knows of one window here.
struct Exposed {
    comm: Arc<Comm>,
    target: Arc<Target>,
    locks: LockState,
    /// Per origin (world rank), the first error of its requests since its
    /// last flush or unlock, which reports it (requests without a reply
    /// have nobody else to tell).
    errors: HashMap<usize, i32>,
    /// A halt closed it (`close`): requests are dropped, as the program
    /// may have left its memory.
    closed: bool,
}

struct Agent {
    windows: HashMap<u32, Exposed>,
    thread: Option<std::thread::JoinHandle<()>>,
}

static AGENT: Mutex<Option<Agent>> = Mutex::new(None);

fn agent() -> MutexGuard<'static, Option<Agent>> {
    AGENT.lock().unwrap_or_else(|p| p.into_inner())
}

/// Makes window `id` (its communicator's context) reachable, starting the
/// thread if it is not running.
pub fn expose(
    m: &'static Mpi,
    id: u32,
    comm: Arc<Comm>,
    target: Arc<Target>,
) -> std::io::Result<()> {
    let mut a = agent();
    let a = a.get_or_insert_with(|| Agent {
        windows: HashMap::new(),
        thread: None,
    });
    a.windows.insert(
        id,
        Exposed {
            comm,
            target,
            locks: LockState::default(),
            errors: HashMap::new(),
            closed: false,
        },
    );
    if a.thread.as_ref().is_none_or(|t| t.is_finished()) {
        a.thread = Some(
            std::thread::Builder::new()
                .name("mpistages-rma".into())
                .spawn(move || run(m))?,
        );
    }
    Ok(())
}

/// Window `id` is freed: no request for it can come any more.
pub fn withdraw(id: u32) {
    if let Some(a) = agent().as_mut() {
        a.windows.remove(&id);
    }
}

/// A halt (`gate::close_all`): the windows known now take no request
/// any more. Once this returns, no request is being done either: requests
/// are done with the registry locked.
pub fn close() {
    if let Some(a) = agent().as_mut() {
        for w in a.windows.values_mut() {
            w.closed = true;
        }
    }
}

/// A rollback (the engine is halted): forgets every window and waits for
/// the thread, whose waits all fail now.
pub fn stop() {
    let thread = agent().as_mut().and_then(|a| {
        a.windows.clear();
        a.thread.take()
    });
    if let Some(t) = thread {
        let _ = t.join();
    }
}

fn run(m: &Mpi) {
    // Requests come at any moment while windows exist: waits of this
    // process leave it the core.
    let _helper = crate::progress::Helper::running();
    loop {
        let Some((origin, msg)) = receive(m) else {
            return;
        };
        let (id, req, data) = match wire::decode(&msg) {
            Ok(r) => r,
            Err(e) => {
                log::warn!("window agent: from process {origin}: {}", e.detail);
                continue;
            }
        };
        let replies = {
            let mut a = agent();
            let Some(w) = a.as_mut().and_then(|a| a.windows.get_mut(&id)) else {
                log::warn!(
                    "window agent: process {origin} asks for window {id}, which is not here"
                );
                continue;
            };
            if w.closed {
                log::debug!("window agent: window {id} is closed by a halt: a request of process {origin} dropped");
                continue;
            }
            handle(w, origin, req, data)
        };
        // Sent without the registry locked: a send may wait.
        for (comm, to, tag, bytes) in replies {
            answer(m, &comm, to, tag, bytes);
        }
    }
}

/// One request to window `w` from world rank `origin`: done, and the
/// answers to send (communicator, world rank, tag, bytes).
fn handle(
    w: &mut Exposed,
    origin: usize,
    req: Request,
    data: &[u8],
) -> Vec<(Arc<Comm>, usize, i32, Vec<u8>)> {
    let comm = w.comm.clone();
    let reply = |to: usize, tag: i32, bytes: Vec<u8>| (comm.clone(), to, tag, bytes);
    match req {
        Request::Lock {
            exclusive,
            reply: tag,
        } => {
            let ask = Ask {
                origin,
                exclusive,
                reply: tag,
            };
            w.locks
                .lock(ask)
                .map(|a| reply(a.origin, a.reply, Vec::new()))
                .into_iter()
                .collect()
        }
        Request::Unlock { reply: tag } => {
            let granted = match w.locks.unlock(origin) {
                Released::Granted(g) => g,
                Released::NotHeld => {
                    w.errors.insert(origin, crate::api::consts::err::RMA_SYNC);
                    Vec::new()
                }
            };
            let code = w.errors.remove(&origin).unwrap_or(0);
            let mut out = vec![reply(origin, tag, code.to_le_bytes().to_vec())];
            out.extend(
                granted
                    .into_iter()
                    .map(|a| reply(a.origin, a.reply, Vec::new())),
            );
            out
        }
        Request::Flush { reply: tag } => {
            let code = w.errors.remove(&origin).unwrap_or(0);
            vec![reply(origin, tag, code.to_le_bytes().to_vec())]
        }
        req => {
            let done = w.target.apply(&req, data);
            if let Err(e) = &done {
                w.errors.entry(origin).or_insert(e.class);
            }
            // An error answers with no bytes, which the origin sees as
            // too few.
            reply_tag(&req)
                .map(|tag| reply(origin, tag, done.unwrap_or_default()))
                .into_iter()
                .collect()
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

/// The next request: its origin (world rank) and bytes; `None` once the
/// engine fails it (a halt).
fn receive(m: &Mpi) -> Option<(usize, Vec<u8>)> {
    let (h, st) = m.engine.claim(RMA_CONTEXT, Src::Any, Some(wire::REQUEST));
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
        layout: Data::Bytes(raw),
    };
    let id = m.engine.receive_claimed(h, op)?;
    let got = m.engine.wait(id);
    if got.error.is_some() {
        return None;
    }
    Some((st.source as usize, buf))
}

/// Sends `bytes` to world rank `to` on the window's context and `tag`
/// (the origin posted its receive). A dead origin fails the send, which
/// is all there is to do about it.
fn answer(m: &Mpi, comm: &Comm, to: usize, tag: i32, bytes: Vec<u8>) {
    let id = m.engine.post_internal(Op::Send {
        dest: Some(to),
        src: comm.rank as u32,
        context: comm.context,
        tag,
        mode: SendMode::Standard,
        layout: Data::of(Owned(bytes)),
    });
    m.engine.wait(id);
}
