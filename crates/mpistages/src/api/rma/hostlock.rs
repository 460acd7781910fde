//! Passive-target locks of a window whose members share one host, taken
//! and released with atomic operations on a page every member maps,
//! without a message to the target's agent (one `MPI_Win_lock` /
//! `unlock` pair costs a few atomics instead of two round trips).
//!
//! Per target, a lock word (`EXCLUSIVE` bit, or the number of shared
//! holders) and one holder byte per member saying what it holds there, so
//! that survivors can release the locks of a member that died (ULFM) and
//! the next origin does not wait forever. A lock is granted to whoever
//! finds it free; there is no queue (waiters poll, sleeping between
//! polls). The state machine (`Slot`) is tested on plain memory.
//!
//! Per target also a gate for the origins' cross-memory writes into its
//! program's memory (`MPI_Win_create`): an origin marks itself writing,
//! then looks whether the target closed the gate; the target closes it
//! when a failure halts it, and waits for the writes already marked. After
//! that the program may leave the memory (a rollback abandons the stack
//! frame a window lived in) and no origin writes there any more: without
//! the gate, a survivor that had not heard of the failure yet put its halo
//! into a frame that was now another function's, and its return address.

use crate::api::consts::err;
use crate::api::error::{fail, MpiError, MpiResult};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

const EXCLUSIVE: u64 = 1 << 63;
/// Holder byte values.
const NONE: u8 = 0;
const SHARED: u8 = 1;
const HELD_EXCLUSIVE: u8 = 2;

/// One target's lock: its word and its members' holder bytes; its gate:
/// the closed word and its members' writing bytes.
pub struct Slot<'a> {
    pub word: &'a AtomicU64,
    pub holders: &'a [AtomicU8],
    pub closed: &'a AtomicU64,
    pub writing: &'a [AtomicU8],
}

impl Slot<'_> {
    /// Takes the lock for `origin` if it is free for that kind now.
    pub fn try_lock(&self, origin: usize, exclusive: bool) -> bool {
        let mut v = self.word.load(Ordering::Acquire);
        loop {
            let (free, next) = if exclusive {
                (v == 0, EXCLUSIVE)
            } else {
                (v & EXCLUSIVE == 0, v + 1)
            };
            if !free {
                return false;
            }
            match self
                .word
                .compare_exchange_weak(v, next, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(now) => v = now,
            }
        }
        let kind = if exclusive { HELD_EXCLUSIVE } else { SHARED };
        self.holders[origin].store(kind, Ordering::Release);
        true
    }

    /// Releases what `origin` holds; false when it holds nothing. Also
    /// what survivors do for a dead origin: the holder byte is taken by
    /// one swap, so the lock is released once.
    pub fn unlock(&self, origin: usize) -> bool {
        match self.holders[origin].swap(NONE, Ordering::AcqRel) {
            HELD_EXCLUSIVE => {
                self.word.fetch_and(!EXCLUSIVE, Ordering::Release);
                true
            }
            SHARED => {
                self.word.fetch_sub(1, Ordering::Release);
                true
            }
            _ => false,
        }
    }

    /// `origin` is about to write into the target's memory: true if it
    /// may (then `leave` when done), false once the gate is closed.
    /// Sequentially consistent with `close`: either the origin sees the
    /// gate closed or the target sees the origin writing.
    pub fn enter(&self, origin: usize) -> bool {
        self.writing[origin].store(1, Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) != 0 {
            self.writing[origin].store(0, Ordering::Release);
            return false;
        }
        true
    }

    /// `origin`'s write is done.
    pub fn leave(&self, origin: usize) {
        self.writing[origin].store(0, Ordering::Release);
    }

    /// Closes the gate and waits until no member writes any more, or
    /// until a writing one is no longer `running` (a dead process writes
    /// nothing; a stopped one is waited for, its write still to come).
    pub fn close(&self, mut running: impl FnMut(usize) -> bool) {
        self.closed.store(1, Ordering::SeqCst);
        for (o, w) in self.writing.iter().enumerate() {
            let mut pause = Duration::from_micros(1);
            while w.load(Ordering::SeqCst) != 0 && running(o) {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(1));
            }
        }
    }
}

/// The control page of a window on one host: a slot per member.
pub struct HostLocks {
    map: memmap2::MmapMut,
    n: usize,
}

/// Bytes of one member's slot: the lock word and the closed word on their
/// own cache line, then the holder bytes and the writing bytes, each
/// rounded to cache lines.
pub fn slot_bytes(n: usize) -> usize {
    64 + 2 * bytes_lines(n)
}

fn bytes_lines(n: usize) -> usize {
    n.div_ceil(64) * 64
}

impl HostLocks {
    /// Over a mapping of `n` slots of `slot_bytes(n)` bytes (zeroed: every
    /// lock free), which every member maps.
    pub fn new(map: memmap2::MmapMut, n: usize) -> HostLocks {
        assert!(map.len() >= n * slot_bytes(n));
        HostLocks { map, n }
    }

    /// Target `t`'s slot.
    pub fn slot(&self, t: usize) -> Slot<'_> {
        let at = self.map.as_ptr() as usize + t * slot_bytes(self.n);
        // SAFETY: shared memory: the slot lies inside the mapping (checked
        // in `new`), its words are 8-aligned (mappings are page-aligned and
        // slots multiples of 64 bytes), and every process touches these
        // bytes only through atomics; the references live no longer than
        // `self`, which keeps the mapping.
        unsafe {
            Slot {
                word: &*(at as *const AtomicU64),
                holders: std::slice::from_raw_parts((at + 64) as *const AtomicU8, self.n),
                closed: &*((at + 8) as *const AtomicU64),
                writing: std::slice::from_raw_parts(
                    (at + 64 + bytes_lines(self.n)) as *const AtomicU8,
                    self.n,
                ),
            }
        }
    }
}

/// Why a wait for a lock stops: the job is halted for a recovery, or
/// these members (ranks in the window) are dead.
pub enum Interrupt {
    Halted,
    Dead(Vec<usize>),
}

/// Waits until `origin` holds target `t`'s lock. `interrupted` is asked
/// between polls; dead members' locks are released on their behalf, and a
/// dead target or a halted job ends the wait with an error.
pub fn acquire(
    locks: &HostLocks,
    t: usize,
    origin: usize,
    exclusive: bool,
    mut interrupted: impl FnMut() -> Option<Interrupt>,
) -> MpiResult<()> {
    let slot = locks.slot(t);
    let mut pause = Duration::from_micros(1);
    loop {
        if slot.try_lock(origin, exclusive) {
            return Ok(());
        }
        match interrupted() {
            Some(Interrupt::Halted) => {
                return Err(MpiError::new(err::TRY_RELOAD, "a process failed"))
            }
            Some(Interrupt::Dead(dead)) => {
                if dead.contains(&t) {
                    return fail(
                        err::PROC_FAILED,
                        format!("rank {t}, the lock's target, has failed"),
                    );
                }
                for d in dead {
                    slot.unlock(d);
                }
            }
            None => {}
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot_of<'a>(word: &'a AtomicU64, holders: &'a [AtomicU8]) -> Slot<'a> {
        // The gate's words are not looked at by the lock.
        static CLOSED: AtomicU64 = AtomicU64::new(0);
        Slot {
            word,
            holders,
            closed: &CLOSED,
            writing: &[],
        }
    }

    #[test]
    fn a_closed_gate_lets_no_write_in_and_waits_for_the_one_inside() {
        let map = memmap2::MmapMut::map_anon(3 * slot_bytes(3)).unwrap();
        let locks = HostLocks::new(map, 3);
        let s = locks.slot(1);
        assert!(s.enter(0));
        assert!(s.enter(2));
        s.leave(2);
        // Member 0 is still writing: the close waits while it runs.
        let mut asked = Vec::new();
        s.close(|o| {
            asked.push(o);
            asked.len() < 3
        });
        assert_eq!(
            asked,
            vec![0, 0, 0],
            "only the writing member is waited for"
        );
        assert!(!s.enter(2), "closed");
        assert!(locks.slot(0).enter(2), "another target's gate is open");
        // The lock words are apart from the gate's.
        assert!(s.try_lock(2, true));
        assert!(s.unlock(2));
    }

    #[test]
    fn after_close_returns_no_thread_writes_any_more() {
        let map = memmap2::MmapMut::map_anon(4 * slot_bytes(4)).unwrap();
        let locks = HostLocks::new(map, 4);
        let writes = AtomicU64::new(0);
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|sc| {
            for o in 0..3 {
                let (locks, writes, stop) = (&locks, &writes, &stop);
                sc.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let s = locks.slot(3);
                        if s.enter(o) {
                            writes.fetch_add(1, Ordering::SeqCst);
                            s.leave(o);
                        }
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(5));
            locks.slot(3).close(|_| true);
            let seen = writes.load(Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(writes.load(Ordering::SeqCst), seen);
            stop.store(true, Ordering::Relaxed);
        });
    }

    #[test]
    fn shared_holders_exclude_an_exclusive_one_and_the_reverse() {
        let word = AtomicU64::new(0);
        let holders: Vec<AtomicU8> = (0..3).map(|_| AtomicU8::new(0)).collect();
        let s = slot_of(&word, &holders);
        assert!(s.try_lock(0, false));
        assert!(s.try_lock(1, false));
        assert!(!s.try_lock(2, true));
        assert!(s.unlock(0));
        assert!(!s.try_lock(2, true));
        assert!(s.unlock(1));
        assert!(s.try_lock(2, true));
        assert!(!s.try_lock(0, false));
        assert!(!s.try_lock(1, true));
        assert!(!s.unlock(0), "0 holds nothing");
        assert!(s.unlock(2));
        assert_eq!(word.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_dead_holder_is_released_once() {
        let word = AtomicU64::new(0);
        let holders: Vec<AtomicU8> = (0..2).map(|_| AtomicU8::new(0)).collect();
        let s = slot_of(&word, &holders);
        assert!(s.try_lock(1, false));
        assert!(s.try_lock(0, false));
        // Two survivors forget member 1: the count drops by one only.
        assert!(s.unlock(1));
        assert!(!s.unlock(1));
        assert_eq!(word.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_waiter_gets_the_lock_when_its_dead_holder_is_forgotten() {
        let map = memmap2::MmapMut::map_anon(2 * slot_bytes(2)).unwrap();
        let locks = HostLocks::new(map, 2);
        assert!(locks.slot(0).try_lock(1, true));
        let mut polls = 0;
        acquire(&locks, 0, 0, true, || {
            polls += 1;
            (polls == 3).then(|| Interrupt::Dead(vec![1]))
        })
        .unwrap();
        assert_eq!(polls, 3);
        let e = acquire(&locks, 0, 1, false, || Some(Interrupt::Dead(vec![0]))).unwrap_err();
        assert_eq!(e.class, err::PROC_FAILED);
        let e = acquire(&locks, 0, 1, false, || Some(Interrupt::Halted)).unwrap_err();
        assert_eq!(e.class, err::TRY_RELOAD);
    }

    #[test]
    fn threads_hammering_one_slot_never_share_an_exclusive_lock() {
        let word = AtomicU64::new(0);
        let holders: Vec<AtomicU8> = (0..4).map(|_| AtomicU8::new(0)).collect();
        let inside = AtomicU64::new(0);
        std::thread::scope(|sc| {
            for o in 0..4 {
                let (word, holders, inside) = (&word, &holders, &inside);
                sc.spawn(move || {
                    let s = slot_of(word, holders);
                    for i in 0..2000 {
                        let ex = (i + o) % 3 == 0;
                        while !s.try_lock(o, ex) {
                            std::hint::spin_loop();
                        }
                        let before = inside.fetch_add(if ex { 1000 } else { 1 }, Ordering::SeqCst);
                        assert!(if ex { before == 0 } else { before < 1000 });
                        inside.fetch_sub(if ex { 1000 } else { 1 }, Ordering::SeqCst);
                        assert!(s.unlock(o));
                    }
                });
            }
        });
        assert_eq!(word.load(Ordering::Relaxed), 0);
    }
}
