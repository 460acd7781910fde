//! Small collectives of the members of one host through memory they share,
//! instead of messages: each member publishes its part in a slot of a
//! segment every member maps, and reads the others' slots. A barrier
//! between two ranks is then one cache line each way, not a message each
//! way through the matching engine (2-rank barrier 1.3 µs by messages
//! against Open MPI's 0.5 µs on this machine).
//!
//! Layout: line 0 holds `sleepers`, the count of members asleep on a slot
//! (a publisher wakes them only when it is not 0). Then one 64-byte line
//! per (member, line phase): its epoch word and `INLINE` bytes of data;
//! then `capacity(n)` bytes of data per (member, data phase) for larger
//! parts.
//!
//! Each collective on the segment is an epoch, 1, 2, ... in the order the
//! members call them (MPI's rule for collectives on a communicator);
//! epoch `e` uses the line of phase `e % LINE_PHASES` and the data region
//! of phase `e % DATA_PHASES`. A member publishes `e` in its line once its
//! data for `e` is there (Release; readers Acquire) and, for a broadcast's
//! receivers, once it has read the root's. Before a member writes data of
//! `len` bytes at `e`, every member must have published `e - depth + 1`
//! (the depth of the line or of the data regions, whichever `len` uses):
//! then none still reads what the same place held at `e - depth`. After a
//! barrier or an allreduce that is known already (all published `e - 1` to
//! finish it); after broadcasts it is waited for, which lets a broadcast's
//! root run up to `depth - 1` ahead of its slowest receiver (with two
//! phases each broadcast was a barrier too: 8 ranks, 1 KiB, 1.4x Open
//! MPI's time; with four, 8-byte broadcasts from one root at 4 ranks on
//! 2 cores were 2.5-3.2x Open MPI's, whose root runs ahead freely).
//!
//! The members are other processes: a wait checks the engine for a halt,
//! a revoked communicator or a dead member every few rounds and on every
//! wake-up, so a failure never leaves a survivor waiting. Past its spin
//! budget a waiter sleeps on the slot's word and on the engine's refusal
//! bell at once (`futex_waitv`): the member's publication or anything that
//! could refuse the collective wakes it, and an idle rank stays asleep.

use super::exec::{CollError, CollResult, Team};
use super::Reduction;
use crate::transport::RawBuf;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// Data bytes in a slot's own line (an 8-byte allreduce reads one line per
/// member).
const INLINE: usize = 56;
/// The largest reduction done here, in bytes: every member combines every
/// member's part, n times the work of one (larger ones are cheaper by
/// messages or copies).
pub const REDUCE_MAX: usize = 4096;
/// Data bytes per member and phase of all (per member, 1 MiB at most over
/// the four phases): what a broadcast, a gather, a scatter, an allgather
/// or an alltoall moves per member through the segment at most. Pages of
/// it no collective touches take no memory.
pub fn capacity(n: usize) -> usize {
    ((256 << 10) / n.max(1)).clamp(4096, 64 << 10) / LINE * LINE
}
/// The most members a segment serves (each reads every other's slot).
pub const MAX_MEMBERS: usize = 64;
const LINE: usize = 64;
/// Lines per member, used in turn by successive collectives.
const LINE_PHASES: usize = 16;
/// Data regions per member, used in turn by successive collectives.
const DATA_PHASES: usize = 4;
/// A sleeping member looks at the engine at least this often where
/// nothing else advances communication (no progress thread) ...
pub(super) const NAP: Duration = Duration::from_millis(1);
/// ... and where a progress thread does and rings the refusal bell.
const LONG_NAP: Duration = Duration::from_millis(200);
/// Rounds of spinning between two looks at the engine and the clock.
const CHECK_EVERY: u32 = 64;

/// The length of the segment for `n` members.
pub fn segment_len(n: usize) -> usize {
    LINE + LINE_PHASES * n * LINE + DATA_PHASES * n * capacity(n)
}

/// Whether `n` members may use a segment at all.
pub fn fits(n: usize) -> bool {
    (2..=MAX_MEMBERS).contains(&n)
}

/// One member's view of a mapped segment.
pub struct Segment {
    /// Keeps the mapping alive as long as the view.
    _map: memmap2::MmapMut,
    base: *mut u8,
    pub(super) n: usize,
    pub(super) me: usize,
    /// `capacity(n)`.
    cap: usize,
    /// The epoch of this member's last collective here (the slots hold
    /// its low 32 bits).
    epoch: AtomicU64,
    /// The newest epoch every member is known to have published.
    pub(super) all_seen: AtomicU64,
    /// Whether the members may copy from each other's memory
    /// (`single_copy.rs`): 0 not known yet, 1 yes, 2 no.
    pub(super) cma: AtomicU8,
}

// SAFETY: the raw pointer is into `_map`, which the Segment owns; every
// access to shared words is atomic, and data regions are written by one
// member only, ordered by the epoch words (see the module comment). One
// collective at a time per communicator (MPI's rule) uses a Segment.
unsafe impl Send for Segment {}
// SAFETY: as for Send; the local counters are atomics.
unsafe impl Sync for Segment {}

/// Whether a slot's epoch word `v` is at or past epoch `e` (wrapping: the
/// members are never 2^31 collectives apart).
fn reached(v: u32, e: u64) -> bool {
    (v.wrapping_sub(e as u32) as i32) >= 0
}

impl Segment {
    /// A view of `map` (zeroed, `segment_len(n)` bytes, shared by the
    /// members) for member `me` of `n`.
    pub fn new(mut map: memmap2::MmapMut, n: usize, me: usize) -> Option<Segment> {
        if !fits(n) || me >= n || map.len() < segment_len(n) {
            return None;
        }
        let base = map.as_mut_ptr();
        if !(base as usize).is_multiple_of(LINE) {
            return None;
        }
        Some(Segment {
            _map: map,
            base,
            n,
            me,
            cap: capacity(n),
            epoch: AtomicU64::new(0),
            all_seen: AtomicU64::new(0),
            cma: AtomicU8::new(0),
        })
    }

    fn word(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `off` is one of the words of the layout, inside the
        // mapping (`new` checked its length) and 4-byte aligned; shared
        // words are only accessed atomically.
        unsafe { &*(self.base.add(off) as *const AtomicU32) }
    }

    fn sleepers(&self) -> &AtomicU32 {
        self.word(0)
    }

    /// The offset of member's line for epoch `e`.
    fn line(&self, member: usize, e: u64) -> usize {
        LINE + (LINE_PHASES * member + (e % LINE_PHASES as u64) as usize) * LINE
    }

    /// Member's published epoch in its line for epoch `e`.
    fn published(&self, member: usize, e: u64) -> &AtomicU32 {
        self.word(self.line(member, e))
    }

    /// Where member's data of `len` bytes lies for epoch `e`.
    pub(super) fn data(&self, member: usize, e: u64, len: usize) -> RawBuf {
        let off = if len <= INLINE {
            self.line(member, e) + 8
        } else {
            let i = DATA_PHASES * member + (e % DATA_PHASES as u64) as usize;
            LINE + LINE_PHASES * self.n * LINE + i * self.cap
        };
        // SAFETY: inside the mapping (len <= self.cap, checked by the
        // callers); which member writes it when is the protocol's business.
        unsafe { RawBuf::new(self.base.add(off), len) }
    }

    /// Starts a collective: refused at once on a revoked communicator or
    /// after a failure of a member or a halt (as a message would be: a
    /// member that revoked it must not see its next collective succeed
    /// because the others had not heard yet); else its epoch. What has not
    /// arrived yet is looked for by the waits (`refused`): a member that
    /// has not heard waits for those that refused, and hears while it does
    /// (an `epoll_wait` here was a third of a 2-rank barrier's time).
    pub(super) fn begin(&self, t: &Team) -> CollResult<u64> {
        self.known_refusal(t)?;
        let e = self.epoch.load(Ordering::Relaxed).wrapping_add(1);
        self.epoch.store(e, Ordering::Relaxed);
        Ok(e)
    }

    /// Publishes this member's epoch `e`, waking sleepers if any.
    pub(super) fn publish(&self, e: u64) {
        let w = self.published(self.me, e);
        w.store(e as u32, Ordering::Release);
        // Pairs with a sleeper's count-then-look (`wait_for`).
        fence(Ordering::SeqCst);
        if self.sleepers().load(Ordering::Relaxed) != 0 {
            crate::sys::futex::wake(w);
        }
    }

    /// Waits until every member (but this one) has published `e`.
    pub(super) fn wait_all(&self, t: &Team, e: u64) -> CollResult<()> {
        for j in (0..self.n).filter(|&j| j != self.me) {
            self.wait_for(t, j, e)?;
        }
        Ok(())
    }

    /// Before writing `len` bytes of data at epoch `e`: every member
    /// published `e - depth + 1` (done with what the place held before).
    pub(super) fn make_room(&self, t: &Team, e: u64, len: usize) -> CollResult<()> {
        let depth = if len <= INLINE {
            LINE_PHASES
        } else {
            DATA_PHASES
        } as u64;
        if e < depth {
            return Ok(());
        }
        let done = e - (depth - 1);
        if self.all_seen.load(Ordering::Relaxed) >= done {
            return Ok(());
        }
        self.wait_everyone(t, done)
    }

    /// Waits until `member` has published `e`: spinning (yielding the core
    /// between rounds where ranks outnumber cores) for the engine's spin
    /// budget, then asleep on the word and on the engine's refusal bell
    /// (`Engine::refusal_bell`); a halt, a revoked communicator or a dead
    /// member ends the wait with its error.
    pub(super) fn wait_for(&self, t: &Team, member: usize, e: u64) -> CollResult<()> {
        let w = self.published(member, e);
        if reached(w.load(Ordering::Acquire), e) {
            return Ok(());
        }
        // Requests in flight go on without this thread meanwhile.
        t.engine.background();
        let (budget, yielding) = t.engine.spin_policy();
        // With a progress thread, what could end the wait early rings the
        // bell: the nap is only a safety net. Without one, this thread
        // must advance communication itself every nap.
        let nap = if t.engine.has_progress_thread() {
            LONG_NAP
        } else {
            NAP
        };
        let began = Instant::now();
        let mut spinning = true;
        let mut rounds: u32 = 0;
        loop {
            let v = w.load(Ordering::Acquire);
            if reached(v, e) {
                return Ok(());
            }
            if spinning {
                rounds = rounds.wrapping_add(1);
                if !rounds.is_multiple_of(CHECK_EVERY) {
                    if yielding {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                    continue;
                }
                self.refused(t)?;
                spinning = began.elapsed() < budget;
                if !spinning {
                    t.engine.sleep_outside();
                }
                continue;
            }
            // Asleep: the bell's value first, then the look, so that a
            // refusal arriving after the look changes the bell and ends
            // the sleep at once. (An idle rank must not wake every
            // millisecond: 1024 waiting ranks on 2 cores were all awake.)
            let (bell, rung) = t.engine.refusal_bell();
            self.refused(t)?;
            self.sleepers().fetch_add(1, Ordering::SeqCst);
            if w.load(Ordering::SeqCst) == v {
                crate::sys::futex::wait_either(w, v, bell, rung, nap, NAP);
            }
            self.sleepers().fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Between two looks at the slot: communication advances (in poll
    /// mode nothing else moves it, and a peer may wait for this process's
    /// acknowledgements before it can come to this collective), then a
    /// halt, a revoked communicator or a dead member ends the wait.
    pub(super) fn refused(&self, t: &Team) -> CollResult<()> {
        t.engine.poke();
        self.known_refusal(t)
    }

    /// A halt, a revoked communicator or a dead member already known here.
    fn known_refusal(&self, t: &Team) -> CollResult<()> {
        match t.engine.team_refused(t.context, t.members) {
            Some(e) => Err(CollError::Request(e)),
            None => Ok(()),
        }
    }

    /// This member's part published at the next epoch (once the place is
    /// free); the epoch.
    pub(super) fn offer(&self, t: &Team, part: RawBuf) -> CollResult<u64> {
        let e = self.begin(t)?;
        self.make_room(t, e, part.len())?;
        self.data(self.me, e, part.len()).copy_from(&part);
        self.publish(e);
        Ok(e)
    }

    /// The next epoch published, with no part; the epoch.
    pub(super) fn arrive(&self, t: &Team) -> CollResult<u64> {
        let e = self.begin(t)?;
        self.publish(e);
        Ok(e)
    }

    /// Waits until every member has published `e`, then knows it.
    pub(super) fn wait_everyone(&self, t: &Team, e: u64) -> CollResult<()> {
        self.wait_all(t, e)?;
        self.all_seen.store(e, Ordering::Relaxed);
        Ok(())
    }

    /// The step every member-to-member collective starts with: this
    /// member's part published at the next epoch, every other member's
    /// awaited; the epoch, whose slots now hold all parts.
    pub(super) fn share(&self, t: &Team, part: RawBuf) -> CollResult<u64> {
        let e = self.offer(t, part)?;
        self.wait_everyone(t, e)?;
        Ok(e)
    }

    pub fn barrier(&self, t: &Team) -> CollResult<()> {
        let e = self.arrive(t)?;
        self.wait_everyone(t, e)
    }

    /// `recv` = the members' `send` combined in rank order (every member
    /// computes the same bytes). `send` may be `recv` (in place).
    pub fn allreduce(&self, t: &Team, send: RawBuf, recv: RawBuf, r: &Reduction) -> CollResult<()> {
        let len = send.len();
        if len > REDUCE_MAX || recv.len() < len {
            return Err(CollError::Internal(format!(
                "shared-memory allreduce of {len} bytes into {}",
                recv.len()
            )));
        }
        let e = self.share(t, send)?;
        self.fold(e, len, recv, r)
    }

    /// `recv` = x0 op (x1 op (... op x[n-1])) of the members' parts of
    /// epoch `e`: rank order, right to left, the same bytes everywhere.
    fn fold(&self, e: u64, len: usize, recv: RawBuf, r: &Reduction) -> CollResult<()> {
        let acc = recv
            .sub(0, len)
            .ok_or_else(|| CollError::Internal("recv".into()))?;
        acc.copy_from(&self.data(self.n - 1, e, len));
        for j in (0..self.n - 1).rev() {
            // SAFETY: `acc` is the caller's receive buffer, which nothing
            // else refers to during this call; the slot is another region.
            (r.op)(
                self.data(j, e, len).as_slice(),
                unsafe { acc.as_mut_slice() },
                r.count,
            );
        }
        Ok(())
    }

    /// `recv` at `root` = the members' `send` combined in rank order; the
    /// others go on as soon as their part is published.
    pub fn reduce(
        &self,
        t: &Team,
        root: usize,
        send: RawBuf,
        recv: RawBuf,
        r: &Reduction,
    ) -> CollResult<()> {
        let len = send.len();
        if len > REDUCE_MAX || root >= self.n || (self.me == root && recv.len() < len) {
            return Err(CollError::Internal(format!(
                "shared-memory reduce of {len} bytes to {root}"
            )));
        }
        let e = self.offer(t, send)?;
        if self.me == root {
            self.wait_everyone(t, e)?;
            self.fold(e, len, recv, r)?;
        }
        Ok(())
    }

    /// Every member's `send` into block j of `recv` at `root` (blocks of
    /// `send.len()` bytes); the others go on once theirs is published.
    pub fn gather(&self, t: &Team, root: usize, send: RawBuf, recv: RawBuf) -> CollResult<()> {
        let len = send.len();
        if len > self.cap || root >= self.n || (self.me == root && recv.len() < len * self.n) {
            return Err(CollError::Internal(format!(
                "shared-memory gather of {len} bytes to {root}"
            )));
        }
        let e = self.begin(t)?;
        self.make_room(t, e, len)?;
        if self.me != root {
            self.data(self.me, e, len).copy_from(&send);
            self.publish(e);
            return Ok(());
        }
        self.publish(e);
        self.wait_everyone(t, e)?;
        for j in 0..self.n {
            let to = recv.sub(j * len, len).expect("checked above");
            if j == self.me {
                // In place, `send` is this very block.
                if to.ptr() != send.ptr() {
                    to.copy_from(&send);
                }
            } else {
                to.copy_from(&self.data(j, e, len));
            }
        }
        Ok(())
    }

    /// Block j of `send` at `root` (blocks of `recv.len()` bytes) into
    /// member j's `recv`.
    pub fn scatter(&self, t: &Team, root: usize, send: RawBuf, recv: RawBuf) -> CollResult<()> {
        let (len, all) = (recv.len(), recv.len() * self.n);
        if all > self.cap || root >= self.n || (self.me == root && send.len() < all) {
            return Err(CollError::Internal(format!(
                "shared-memory scatter of {len} bytes each from {root}"
            )));
        }
        let e = self.begin(t)?;
        if self.me == root {
            self.make_room(t, e, all)?;
            self.data(root, e, all).copy_from(&send);
            self.publish(e);
            recv.copy_from(&send.sub(root * len, len).expect("checked above"));
        } else {
            self.wait_for(t, root, e)?;
            let mine = self.data(root, e, all).sub(self.me * len, len);
            recv.copy_from(&mine.expect("inside the root's part"));
            self.publish(e);
        }
        Ok(())
    }

    /// Block j of every member's `send` into block `i` (the member's rank)
    /// of member j's `recv` (`MPI_Alltoall`: blocks of one length, all of a
    /// member's within `capacity(n)`).
    pub fn alltoall(&self, t: &Team, send: RawBuf, recv: RawBuf) -> CollResult<()> {
        let all = send.len();
        let len = all / self.n;
        if all > self.cap || !all.is_multiple_of(self.n) || recv.len() != all {
            return Err(CollError::Internal(format!(
                "shared-memory alltoall of {all} bytes into {}",
                recv.len()
            )));
        }
        let e = self.share(t, send)?;
        for j in 0..self.n {
            let from = self.data(j, e, all).sub(self.me * len, len);
            let to = recv.sub(j * len, len);
            if let (Some(from), Some(to)) = (from, to) {
                to.copy_from(&from);
            }
        }
        Ok(())
    }

    /// Every member's block (`lens[j]` bytes) into `recv` at `offs[j]`.
    pub fn allgatherv(
        &self,
        t: &Team,
        send: RawBuf,
        recv: RawBuf,
        offs: &[usize],
        lens: &[usize],
    ) -> CollResult<()> {
        let bad = lens.len() != self.n
            || offs.len() != self.n
            || send.len() != lens[self.me]
            || lens
                .iter()
                .zip(offs)
                .any(|(&l, &o)| l > self.cap || o + l > recv.len());
        if bad {
            return Err(CollError::Internal(format!(
                "shared-memory allgather of {lens:?} at {offs:?} into {}",
                recv.len()
            )));
        }
        let e = self.share(t, send)?;
        for j in 0..self.n {
            if let Some(to) = recv.sub(offs[j], lens[j]) {
                to.copy_from(&self.data(j, e, lens[j]));
            }
        }
        Ok(())
    }

    /// `buf` of `root` to every member.
    pub fn bcast(&self, t: &Team, root: usize, buf: RawBuf) -> CollResult<()> {
        let len = buf.len();
        if len > self.cap || root >= self.n {
            return Err(CollError::Internal(format!(
                "shared-memory broadcast of {len} bytes from {root}"
            )));
        }
        let e = self.begin(t)?;
        if self.me == root {
            self.make_room(t, e, len)?;
            self.data(root, e, len).copy_from(&buf);
            self.publish(e);
        } else {
            self.wait_for(t, root, e)?;
            buf.copy_from(&self.data(root, e, len));
            self.publish(e);
        }
        Ok(())
    }
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "shm collectives of member {} of {}", self.me, self.n)
    }
}
