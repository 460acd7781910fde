//! What a failure's halt does to this process's windows, before the
//! program hears of it: no origin writes into their memory any more.
//!
//! Under a rollback mode, the program leaves its attempt as soon as a call
//! fails with `MPIX_TRY_RELOAD`, and the memory of an `MPI_Win_create`
//! window (often the attempt's stack frame) becomes something else, while
//! the window itself is released only by the rollback. Two kinds of
//! writers may still be on their way: this process's agent, with a request
//! it received before the halt, and origins on this host that had not
//! heard of the failure yet, writing by cross-memory copy. The engine runs
//! `close_all` first thing in its halt, so both are stopped before any
//! wait of the program can fail: the agent drops the requests of the
//! windows it knew, and the gate (`hostlock`) of each window of program
//! memory on this host is closed once the writes already inside are done.

use super::agent;
use super::hostlock::HostLocks;
use crate::api::Mpi;
use std::sync::{Arc, Mutex, Once};

/// A window whose origins write into this process's memory themselves.
struct Open {
    id: u32,
    locks: Arc<HostLocks>,
    /// This process's rank in the window.
    me: usize,
    /// Every member's process ID (whether a writer still runs).
    pids: Vec<i32>,
}

static OPEN: Mutex<Vec<Open>> = Mutex::new(Vec::new());

fn open() -> std::sync::MutexGuard<'static, Vec<Open>> {
    OPEN.lock().unwrap_or_else(|p| p.into_inner())
}

/// Has the engine run `close_all` at each halt (once per process).
pub fn install(m: &'static Mpi) {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| m.engine.on_halt(Box::new(close_all)));
}

/// Window `id` (its communicator's context): members of this host write
/// into this process's memory through the gate of slot `me` of `locks`.
pub fn register(id: u32, locks: Arc<HostLocks>, me: usize, pids: Vec<i32>) {
    open().push(Open {
        id,
        locks,
        me,
        pids,
    });
}

/// Window `id` is freed.
pub fn forget(id: u32) {
    open().retain(|o| o.id != id);
}

/// Every window is released (a rollback).
pub fn forget_all() {
    open().clear();
}

/// The halt's part: the agent drops what it has not done yet, and every
/// gate closes once the writes inside are done. Runs with the engine
/// locked: touches no engine.
pub fn close_all() {
    agent::close();
    for o in open().iter() {
        o.locks
            .slot(o.me)
            .close(|member| crate::sys::process::running(o.pids[member]));
    }
}
