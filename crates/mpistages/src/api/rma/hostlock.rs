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

use crate::api::consts::err;
use crate::api::error::{fail, MpiError, MpiResult};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

const EXCLUSIVE: u64 = 1 << 63;
/// Holder byte values.
const NONE: u8 = 0;
const SHARED: u8 = 1;
const HELD_EXCLUSIVE: u8 = 2;

/// One target's lock: its word and its members' holder bytes.
pub struct Slot<'a> {
    pub word: &'a AtomicU64,
    pub holders: &'a [AtomicU8],
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
}

/// The control page of a window on one host: a slot per member.
pub struct HostLocks {
    map: memmap2::MmapMut,
    n: usize,
}

/// Bytes of one member's slot: the word on its own cache line, then the
/// holder bytes, rounded to cache lines.
pub fn slot_bytes(n: usize) -> usize {
    64 + n.div_ceil(64) * 64
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
        // in `new`), its word is 8-aligned (mappings are page-aligned and
        // slots multiples of 64 bytes), and every process touches these
        // bytes only through atomics; the references live no longer than
        // `self`, which keeps the mapping.
        unsafe {
            Slot {
                word: &*(at as *const AtomicU64),
                holders: std::slice::from_raw_parts((at + 64) as *const AtomicU8, self.n),
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
        Slot { word, holders }
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
