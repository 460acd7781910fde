//! A single-producer single-consumer ring of records in memory shared by
//! two processes: one writes frames to a peer, the other reads them.
//!
//! Layout (offsets in bytes, each counter on its own cache line):
//!
//! ```text
//! 0    head     u64  bytes ever written (the producer's; Release)
//! 64   tail     u64  bytes ever read (the consumer's; Release)
//! 128  waiting  u32  the consumer is about to sleep: ring its doorbell
//! 192  data     CAP bytes, CAP a power of two
//! ```
//!
//! A record is an 8-byte prefix (the length, then 4 bytes of zero) and the
//! bytes, padded to 8; it may wrap around the end of the data area. The
//! producer publishes a record by moving `head` past it, the consumer
//! frees it by moving `tail`.
//!
//! The other side is another process and may be buggy or gone: every
//! length read from the ring is checked against what the counters allow,
//! and a ring that breaks the rules is reported (`Broken`), never trusted.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

const HEAD: usize = 0;
const TAIL: usize = 64;
const WAITING: usize = 128;
pub const DATA: usize = 192;
const PREFIX: usize = 8;

/// The size of a region holding a ring of `cap` data bytes.
pub fn region_len(cap: usize) -> usize {
    DATA + cap
}

fn padded(n: usize) -> usize {
    (n + 7) & !7
}

/// The ring breaks the rules: a counter or a length that cannot be.
#[derive(Debug, PartialEq, Eq)]
pub struct Broken(pub String);

/// One side of a ring in a shared region.
pub struct Ring {
    base: *mut u8,
    cap: usize,
}

// SAFETY: a Ring is a pointer into a shared mapping that outlives it (the
// owner keeps the mapping alive); its methods synchronise through the
// atomics in the region, so moving it to another thread is fine.
unsafe impl Send for Ring {}

impl Ring {
    /// # Safety
    /// `base` must point at a mapping of `region_len(cap)` bytes, aligned
    /// to 64, that stays mapped while the Ring exists; `cap` a power of
    /// two. At most one `Ring` per region pushes and one pops.
    pub unsafe fn new(base: *mut u8, cap: usize) -> Ring {
        assert!(cap.is_power_of_two() && cap >= 64);
        assert_eq!(base as usize % 64, 0);
        Ring { base, cap }
    }

    fn counter(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `new`'s contract: the region is mapped, aligned, and the
        // counters lie inside it; atomics make the cross-process access
        // well defined.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    fn waiting(&self) -> &AtomicU32 {
        // SAFETY: as `counter`.
        unsafe { &*(self.base.add(WAITING) as *const AtomicU32) }
    }

    /// Largest record body one push can carry.
    pub fn max_record(&self) -> usize {
        self.cap / 2 - PREFIX
    }

    /// Bytes not yet read (as the consumer sees the counters).
    pub fn pending(&self) -> u64 {
        let head = self.counter(HEAD).load(Ordering::Acquire);
        head.wrapping_sub(self.counter(TAIL).load(Ordering::Relaxed))
    }

    /// Copies `bytes` into the data area at ring position `pos`, wrapping.
    fn copy_in(&self, pos: u64, bytes: &[u8]) {
        let off = (pos as usize) & (self.cap - 1);
        let first = bytes.len().min(self.cap - off);
        // SAFETY: both destination ranges lie in the data area (`off +
        // first <= cap`, the rest from 0); the producer owns the bytes
        // between head and tail + cap, which the consumer does not read
        // until head moves past them.
        unsafe {
            let data = self.base.add(DATA);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), data.add(off), first);
            std::ptr::copy_nonoverlapping(bytes.as_ptr().add(first), data, bytes.len() - first);
        }
    }

    /// Copies from ring position `pos` into `out`, wrapping.
    fn copy_out(&self, pos: u64, out: &mut [u8]) {
        let off = (pos as usize) & (self.cap - 1);
        let first = out.len().min(self.cap - off);
        // SAFETY: both source ranges lie in the data area; these bytes were
        // published by head (Acquire) and are the consumer's until tail
        // moves past them. A broken producer could still write them: the
        // result is wrong bytes (checked by the frame layer), not unsound
        // memory access, as the range is always inside the mapping.
        unsafe {
            let data = self.base.add(DATA);
            std::ptr::copy_nonoverlapping(data.add(off), out.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(data, out.as_mut_ptr().add(first), out.len() - first);
        }
    }

    /// Producer: appends one record made of `parts`; `None` when it does
    /// not fit now (the ring is too full), else whether the consumer asked
    /// for its doorbell (it is going to sleep).
    pub fn push(&self, parts: &[&[u8]]) -> Option<bool> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        assert!(
            len <= self.max_record(),
            "record larger than the ring allows"
        );
        let need = (PREFIX + padded(len)) as u64;
        let head = self.counter(HEAD).load(Ordering::Relaxed);
        let tail = self.counter(TAIL).load(Ordering::Acquire);
        if head.wrapping_sub(tail) + need > self.cap as u64 {
            return None;
        }
        let mut prefix = [0u8; PREFIX];
        prefix[..4].copy_from_slice(&(len as u32).to_le_bytes());
        self.copy_in(head, &prefix);
        let mut pos = head + PREFIX as u64;
        for p in parts {
            self.copy_in(pos, p);
            pos += p.len() as u64;
        }
        self.counter(HEAD).store(head + need, Ordering::Release);
        // Against the consumer's "set waiting, then look at head": one of
        // the two sees the other (both sides fence SeqCst).
        fence(Ordering::SeqCst);
        Some(
            self.waiting().load(Ordering::Relaxed) != 0
                && self.waiting().swap(0, Ordering::AcqRel) != 0,
        )
    }

    /// Consumer: the length of the next record, if one is there.
    pub fn peek(&self) -> Result<Option<usize>, Broken> {
        let tail = self.counter(TAIL).load(Ordering::Relaxed);
        let head = self.counter(HEAD).load(Ordering::Acquire);
        let avail = head.wrapping_sub(tail);
        if avail == 0 {
            return Ok(None);
        }
        if avail > self.cap as u64 || avail < PREFIX as u64 || avail % 8 != 0 {
            return Err(Broken(format!("ring counters head {head} tail {tail}")));
        }
        let mut prefix = [0u8; PREFIX];
        self.copy_out(tail, &mut prefix);
        let len = u32::from_le_bytes(prefix[..4].try_into().expect("4 bytes")) as usize;
        if len > self.max_record() || (PREFIX + padded(len)) as u64 > avail {
            return Err(Broken(format!(
                "record of {len} bytes with {avail} in the ring"
            )));
        }
        Ok(Some(len))
    }

    /// Consumer: copies the next record (of length `peek`'s answer) into
    /// `out` and frees it.
    pub fn pop_into(&self, out: &mut [u8]) {
        let tail = self.counter(TAIL).load(Ordering::Relaxed);
        self.copy_out(tail + PREFIX as u64, out);
        let next = tail + (PREFIX + padded(out.len())) as u64;
        self.counter(TAIL).store(next, Ordering::Release);
    }

    /// Consumer: about to sleep. Asks for the doorbell and returns false
    /// if a record is there after all (then it must not sleep).
    pub fn arm(&self) -> bool {
        self.waiting().store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if self.pending() != 0 {
            self.waiting().store(0, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Consumer: awake again; no doorbell is needed.
    pub fn disarm(&self) {
        self.waiting().store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
#[path = "ring_tests.rs"]
mod tests;
