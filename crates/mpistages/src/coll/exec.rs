//! Runs a schedule with the progress engine: per round, its receives and
//! sends under one hold of the engine's lock (`Engine::exchange`), then the
//! local copies and reductions.

use super::schedule::{Buf, Loc, Schedule, Step};
use crate::progress::{Engine, ReqError, Round};
use crate::transport::RawBuf;
use smallvec::SmallVec;

/// What a collective needs of a communicator, and no more: its members
/// (world ranks, in communicator order), this process's place among them,
/// the context its collective traffic uses, and the engine that moves it.
pub struct Team<'a> {
    pub engine: &'a Engine,
    pub members: &'a [usize],
    pub rank: usize,
    pub context: u32,
    /// The tag of all this collective's messages on `context`: 0 for the
    /// blocking collectives, others to keep concurrent ones apart.
    pub tag: i32,
    /// The source number each member's messages carry, when the team is a
    /// subset of the communicator owning `context` (its ranks there):
    /// teams of different subsets of one communicator then never mistake
    /// each other's members. `None`: the team's own ranks.
    pub wire: Option<&'a [usize]>,
}

impl Team<'_> {
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// The source number member `r`'s messages carry.
    pub fn wire_rank(&self, r: usize) -> u32 {
        self.wire.map_or(r, |w| w[r]) as u32
    }
}

/// Why a collective did not complete.
#[derive(Debug, Clone, PartialEq)]
pub enum CollError {
    /// One of its messages failed (a lost peer, a halt for recovery, ...).
    Request(ReqError),
    /// A schedule that does not fit its buffers: a bug, not a user error.
    Internal(String),
}

pub type CollResult<T> = Result<T, CollError>;

/// `dst = src op dst` over `count` elements.
pub type Reducer = dyn Fn(&[u8], &mut [u8], usize);

/// A schedule's temporary buffer, kept for the next collective of the
/// thread: a fresh allocation of a large one is an `mmap`, a page fault
/// per page and an `munmap` each call (a 256 KiB allreduce between two
/// ranks took 65 or 175 µs, depending on whether the allocator had raised
/// its mmap threshold). Not zeroed: schedules write their temp before they
/// read it (the simulator fills it with garbage to make sure).
pub(super) struct Scratch(pub(super) Vec<u8>);

/// Largest scratch kept between collectives.
const SCRATCH_KEEP: usize = 64 << 20;

thread_local! {
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Scratch {
    pub(super) fn take(len: usize) -> Scratch {
        let mut v = SCRATCH.take();
        if v.len() < len {
            v.resize(len, 0);
        }
        Scratch(v)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.0.len() <= SCRATCH_KEEP {
            SCRATCH.set(std::mem::take(&mut self.0));
        }
    }
}

pub fn run(
    t: &Team,
    s: &Schedule,
    send: RawBuf,
    recv: RawBuf,
    red: Option<&super::Reduction>,
) -> CollResult<()> {
    let mut temp = Scratch::take(s.temp_len);
    // SAFETY: `temp` lives until the end of this function and every request
    // using it is waited for before then.
    let temp_raw = unsafe { RawBuf::new(temp.0.as_mut_ptr(), s.temp_len) };
    let loc = |l: Loc, len: usize| -> CollResult<RawBuf> {
        let b = match l.buf {
            Buf::Send => send,
            Buf::Recv => recv,
            Buf::Temp => temp_raw,
        };
        if len == 0 {
            return Ok(RawBuf::empty());
        }
        b.sub(l.off, len).ok_or_else(|| {
            CollError::Internal(format!(
                "collective schedule out of bounds: {l:?} + {len} of {}",
                b.len()
            ))
        })
    };
    let mut recvs: SmallVec<[(u32, RawBuf); 4]> = SmallVec::new();
    let mut sends: SmallVec<[(usize, RawBuf); 4]> = SmallVec::new();
    for round in &s.rounds {
        // Each kind keeps its order, so matching is as the schedule says.
        recvs.clear();
        sends.clear();
        for st in round {
            match *st {
                Step::Send { to, from, len } => sends.push((t.members[to], loc(from, len)?)),
                Step::Recv { from, into, len } => recvs.push((t.wire_rank(from), loc(into, len)?)),
                _ => {}
            }
        }
        if !recvs.is_empty() || !sends.is_empty() {
            t.engine
                .exchange(&Round {
                    context: t.context,
                    tag: t.tag,
                    me: t.wire_rank(t.rank),
                    recvs: &recvs,
                    sends: &sends,
                })
                .map_err(CollError::Request)?;
        }
        for st in round {
            match *st {
                Step::Copy { src, dst, len } if len > 0 => {
                    let (a, b) = (loc(src, len)?, loc(dst, len)?);
                    if a.ptr() != b.ptr() {
                        b.copy_from(&a);
                    }
                }
                Step::Reduce {
                    src,
                    dst,
                    count,
                    len,
                    src_first,
                } => {
                    let Some(red) = red else {
                        return Err(CollError::Internal(
                            "reduction step without an operation".into(),
                        ));
                    };
                    let (a, b) = (loc(src, len)?, loc(dst, len)?);
                    let (pa, pb) = (a.ptr() as usize, b.ptr() as usize);
                    if len > 0 && pa < pb + len && pb < pa + len {
                        return Err(CollError::Internal(format!(
                            "reduction step over overlapping regions: {src:?}, {dst:?}"
                        )));
                    }
                    if src_first || red.commutative {
                        // SAFETY: the two regions are disjoint (checked just
                        // above) and no other slice of `b` is alive.
                        let dst = unsafe { b.as_mut_slice() };
                        (red.op)(a.as_slice(), dst, count);
                    } else {
                        // dst = dst op src: compute into a copy of src.
                        let mut scratch = a.as_slice().to_vec();
                        (red.op)(b.as_slice(), &mut scratch, count);
                        b.write_at(0, &scratch);
                    }
                }
                _ => {}
            }
        }
    }
    drop(temp);
    Ok(())
}
