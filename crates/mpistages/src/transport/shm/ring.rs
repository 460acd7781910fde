//! A single-producer single-consumer byte ring in memory shared by two
//! processes: one writes the bytes of its frames to a peer, the other
//! reads them, as through a socket but without the kernel.
//!
//! Layout (offsets in bytes; the words one side writes often are 128
//! bytes apart, not 64: the processors here fetch lines in pairs, and a
//! pair shared by the two sides' counters moved at every message):
//!
//! ```text
//! 0    head        u64  bytes ever written (the producer's; Release)
//! 128  tail        u64  bytes ever read (the consumer's; Release)
//! 256  want_data   u32  the consumer is going to sleep: ring its doorbell
//!                       when bytes come
//! 384  want_room   u32  the producer is waiting for room: ring its
//!                       doorbell when bytes are taken
//! 392  reader_cma  u32  the consumer can read the producer's memory
//! 400  probe_addr  u64  an address in the producer's memory ...
//! 408  probe_value u64  ... that holds this value (written at creation)
//! 416  halted      u32  the producer halted for the failure announced at
//!                       this generation: memory it referred to in frames
//!                       of older generations may be gone
//! 512  data        CAP bytes, CAP a power of two
//! ```
//!
//! Each side keeps its own counter in a local copy as well and never
//! loads it back from the region (a load that missed whenever the other
//! side had just read it).
//!
//! The doorbells themselves are outside the ring (a byte on the pair's
//! Unix socket): the ring only says when one is needed. Each "set my flag,
//! then look at the other side's counter" is paired with "move my counter,
//! then look at the flag", both with a SeqCst fence between, so one of the
//! two always sees the other and no wake-up is lost.
//!
//! The other side is another process and may be buggy or gone: counters
//! read from the ring are checked (`Broken`), never trusted.

use std::io::IoSlice;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

const HEAD: usize = 0;
const TAIL: usize = 128;
const WANT_DATA: usize = 256;
const WANT_ROOM: usize = 384;
const READER_CMA: usize = 392;
const PROBE_ADDR: usize = 400;
const PROBE_VALUE: usize = 408;
const HALTED: usize = 416;
const DATA: usize = 512;

/// The size of a region holding a ring of `cap` data bytes.
pub fn region_len(cap: usize) -> usize {
    DATA + cap
}

/// The ring breaks the rules: counters that cannot be.
#[derive(Debug, PartialEq, Eq)]
pub struct Broken(pub String);

/// One side's view of a ring in a shared region.
pub struct Ring {
    base: *mut u8,
    cap: usize,
    /// Producer: the consumer's `tail` as last loaded. The room it leaves
    /// can only have grown since, so a write that fits in it does not
    /// load `tail` again (a cache line the consumer owns: a miss per
    /// message in a ping-pong).
    seen_tail: std::cell::Cell<u64>,
    /// Producer: `head` as it last stored it.
    head: std::cell::Cell<u64>,
    /// Consumer: `tail` as it last stored it.
    tail: std::cell::Cell<u64>,
    /// Consumer: the producer's `head` as last loaded. Bytes up to it are
    /// published, so a look that needs no more does not load `head` again
    /// (a line the producer writes at every message: a miss per frame, and
    /// three looks per frame placed in memory).
    seen_head: std::cell::Cell<u64>,
}

// SAFETY: a Ring is a pointer into a shared mapping that outlives it (the
// owner keeps the mapping alive); its methods synchronise through the
// atomics in the region, so moving it to another thread is fine.
unsafe impl Send for Ring {}

impl Ring {
    /// # Safety
    /// `base` must point at a mapping of `region_len(cap)` bytes, aligned
    /// to 64, that stays mapped while the Ring exists; `cap` a power of
    /// two. At most one `Ring` per region writes and one reads.
    pub unsafe fn new(base: *mut u8, cap: usize) -> Ring {
        assert!(cap.is_power_of_two() && cap >= 64);
        assert_eq!(base as usize % 64, 0);
        let ring = Ring {
            base,
            cap,
            seen_tail: std::cell::Cell::new(0),
            head: std::cell::Cell::new(0),
            tail: std::cell::Cell::new(0),
            seen_head: std::cell::Cell::new(0),
        };
        // Where the counters stand (0 for a new ring).
        let tail = ring.word(TAIL).load(Ordering::Acquire);
        ring.seen_tail.set(tail);
        ring.tail.set(tail);
        let head = ring.word(HEAD).load(Ordering::Acquire);
        ring.head.set(head);
        ring.seen_head.set(head);
        ring
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `new`'s contract: the region is mapped and aligned and
        // the words lie inside it; atomics make the access from two
        // processes well defined.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    fn flag(&self, off: usize) -> &AtomicU32 {
        // SAFETY: as `word`.
        unsafe { &*(self.base.add(off) as *const AtomicU32) }
    }

    /// Bytes written and not yet read, checked.
    fn used(&self, head: u64, tail: u64) -> Result<usize, Broken> {
        let used = head.wrapping_sub(tail);
        if used > self.cap as u64 {
            return Err(Broken(format!("ring counters head {head} tail {tail}")));
        }
        Ok(used as usize)
    }

    /// The data area's byte range for ring position `pos` and `len` bytes:
    /// up to two slices' (offset, length), the second from the start.
    fn spans(&self, pos: u64, len: usize) -> [(usize, usize); 2] {
        let off = (pos as usize) & (self.cap - 1);
        let first = len.min(self.cap - off);
        [(off, first), (0, len - first)]
    }

    /// Producer: copies as much of `bufs` as fits; returns how many bytes
    /// (0 when the ring is full) and whether the consumer asked for its
    /// doorbell.
    pub fn write(&self, bufs: &[IoSlice]) -> Result<(usize, bool), Broken> {
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        let (head, room) = self.room_for(want)?;
        self.write_at(head, room, bufs)
    }

    /// Producer: copies all of `bufs` if the ring has room for all of it
    /// now, else nothing (`None`); with whether a doorbell is owed.
    pub fn write_whole(&self, bufs: &[IoSlice]) -> Result<Option<bool>, Broken> {
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        let (head, room) = self.room_for(want)?;
        if room < want {
            return Ok(None);
        }
        Ok(Some(self.write_at(head, room, bufs)?.1))
    }

    /// The producer's position and the room after it, the consumer's
    /// `tail` loaded only when the room last seen is less than `want`.
    fn room_for(&self, want: usize) -> Result<(u64, usize), Broken> {
        let head = self.head.get();
        let mut tail = self.seen_tail.get();
        let cached_used = head.wrapping_sub(tail);
        if cached_used > self.cap as u64 || self.cap - (cached_used as usize) < want {
            tail = self.word(TAIL).load(Ordering::Acquire);
            self.seen_tail.set(tail);
        }
        Ok((head, self.cap - self.used(head, tail)?))
    }

    fn write_at(
        &self,
        head: u64,
        mut room: usize,
        bufs: &[IoSlice],
    ) -> Result<(usize, bool), Broken> {
        let mut pos = head;
        for b in bufs {
            if room == 0 {
                break;
            }
            let n = b.len().min(room);
            let mut from = 0;
            for (off, len) in self.spans(pos, n) {
                // SAFETY: `off + len <= cap` (spans), inside the data area;
                // the producer owns the bytes from head to tail + cap, which
                // the consumer does not read until head moves past them.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        b.as_ptr().add(from),
                        self.base.add(DATA + off),
                        len,
                    )
                };
                from += len;
            }
            pos += n as u64;
            room -= n;
        }
        let wrote = (pos - head) as usize;
        if wrote == 0 {
            return Ok((0, false));
        }
        self.head.set(pos);
        self.word(HEAD).store(pos, Ordering::Release);
        fence(Ordering::SeqCst);
        Ok((wrote, self.take_flag(WANT_DATA)))
    }

    /// Consumer: copies up to `out.len()` bytes out; returns how many (0
    /// when empty) and whether the producer asked for its doorbell.
    pub fn read(&self, out: &mut [u8]) -> Result<(usize, bool), Broken> {
        let n = self.written(out.len())?.min(out.len());
        if n == 0 {
            return Ok((0, false));
        }
        self.copy_out(0, &mut out[..n]);
        Ok((n, self.advance(n)))
    }

    /// Consumer: copies the `out.len()` bytes that lie `at` bytes past the
    /// read position, without taking them; false (nothing copied) when
    /// they are not all written yet.
    pub fn peek(&self, at: usize, out: &mut [u8]) -> Result<bool, Broken> {
        if self.written(at + out.len())? < at + out.len() {
            return Ok(false);
        }
        self.copy_out(at, out);
        Ok(true)
    }

    /// Consumer: takes `n` bytes already looked at (`peek`); returns
    /// whether the producer asked for its doorbell.
    pub fn skip(&self, n: usize) -> Result<bool, Broken> {
        if self.written(n)? < n {
            return Err(Broken(format!("skipping {n} bytes past those written")));
        }
        Ok(self.advance(n))
    }

    /// Copies bytes `at` past the read position; the caller checked they
    /// are written (`pending`, whose Acquire load of head published them).
    fn copy_out(&self, at: usize, out: &mut [u8]) {
        let tail = self.tail.get();
        let mut to = 0;
        for (off, len) in self.spans(tail + at as u64, out.len()) {
            // SAFETY: inside the data area (spans); these bytes were
            // published by head and stay the consumer's until tail moves
            // past them. A broken producer could still write them: the
            // result is wrong bytes (caught by the frame layer), never
            // access outside the mapping.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.base.add(DATA + off),
                    out.as_mut_ptr().add(to),
                    len,
                )
            };
            to += len;
        }
    }

    /// Moves the read position `n` bytes on (checked by the caller);
    /// whether the producer asked for its doorbell.
    fn advance(&self, n: usize) -> bool {
        let tail = self.tail.get() + n as u64;
        self.tail.set(tail);
        self.word(TAIL).store(tail, Ordering::Release);
        fence(Ordering::SeqCst);
        self.take_flag(WANT_ROOM)
    }

    /// Clears flag `off`; true if it was set (a doorbell is owed).
    fn take_flag(&self, off: usize) -> bool {
        self.flag(off).load(Ordering::Relaxed) != 0 && self.flag(off).swap(0, Ordering::AcqRel) != 0
    }

    /// Consumer, about to sleep: asks for a doorbell when bytes come.
    /// False if bytes are there already (then it must not sleep).
    pub fn want_data(&self) -> Result<bool, Broken> {
        self.flag(WANT_DATA).store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let head = self.word(HEAD).load(Ordering::Acquire);
        if self.used(head, self.tail.get())? != 0 {
            self.flag(WANT_DATA).store(0, Ordering::Relaxed);
            return Ok(false);
        }
        Ok(true)
    }

    /// Producer, with bytes left over: asks for a doorbell when room is
    /// made. False if there is room already (then it should write again).
    pub fn want_room(&self) -> Result<bool, Broken> {
        self.flag(WANT_ROOM).store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let tail = self.word(TAIL).load(Ordering::Acquire);
        if self.used(self.head.get(), tail)? < self.cap {
            self.flag(WANT_ROOM).store(0, Ordering::Relaxed);
            return Ok(false);
        }
        Ok(true)
    }

    /// Producer, at creation: where the consumer can check that it reads
    /// this process's memory (cross-memory attach).
    pub fn set_probe(&self, addr: u64, value: u64) {
        self.word(PROBE_ADDR).store(addr, Ordering::Relaxed);
        self.word(PROBE_VALUE).store(value, Ordering::Release);
    }

    /// Consumer: the producer's probe (address, value).
    pub fn probe(&self) -> (u64, u64) {
        let value = self.word(PROBE_VALUE).load(Ordering::Acquire);
        (self.word(PROBE_ADDR).load(Ordering::Relaxed), value)
    }

    /// Consumer: says it can read the producer's memory.
    pub fn set_reader_cma(&self) {
        self.flag(READER_CMA).store(1, Ordering::Release);
    }

    /// Producer: whether the consumer said it can read this memory.
    pub fn reader_cma(&self) -> bool {
        self.flag(READER_CMA).load(Ordering::Acquire) != 0
    }

    /// Producer: it halted for the failure announced at `generation`;
    /// from now on its program may free what earlier frames referred to.
    pub fn set_halted(&self, generation: u32) {
        self.flag(HALTED).fetch_max(generation, Ordering::SeqCst);
    }

    /// Consumer: the generation of the producer's newest halt (0: none).
    /// Looked at after a copy from the producer's memory, with a fence
    /// between: a copy that could see memory freed after the halt sees the
    /// halt here.
    pub fn halted(&self) -> u32 {
        fence(Ordering::SeqCst);
        self.flag(HALTED).load(Ordering::SeqCst)
    }

    /// Bytes waiting to be read (consumer's view).
    pub fn pending(&self) -> Result<usize, Broken> {
        self.written(usize::MAX)
    }

    /// Consumer: whether any byte waits (`head` loaded only when none
    /// was seen before).
    pub fn has_bytes(&self) -> Result<bool, Broken> {
        Ok(self.written(1)? > 0)
    }

    /// Bytes waiting to be read, `head` loaded again only when fewer than
    /// `need` were seen waiting.
    fn written(&self, need: usize) -> Result<usize, Broken> {
        let tail = self.tail.get();
        let seen = self.seen_head.get().wrapping_sub(tail);
        if seen <= self.cap as u64 && seen >= need as u64 {
            return Ok(seen as usize);
        }
        let head = self.word(HEAD).load(Ordering::Acquire);
        self.seen_head.set(head);
        self.used(head, tail)
    }
}

#[cfg(test)]
#[path = "ring_tests.rs"]
mod tests;
