//! What ranks agree on around a checkpoint, over the job's internal
//! communicator (context `STAGES_CONTEXT`, never visible to users):
//! - the partner level: at `MPIX_Checkpoint_write` every rank sends its
//!   checkpoint to its partner (the next rank) and keeps the one of the
//!   previous rank; at a restore a rank without a valid local copy asks its
//!   partner for it;
//! - the epoch to restore: every rank restores the same epoch, the newest
//!   one each rank holds a valid copy of (normally the committed epoch; an
//!   older one when a copy turned out corrupt or missing everywhere).

use super::consts::err;
use super::error::request_error;
use super::error::{fail, MpiError, MpiResult};
use super::group::Group;
use super::{Comm, Mpi};
use crate::checkpoint::store::Restored;
use crate::progress::request::Bytes;
use crate::progress::{Op, ReqId, SendMode, Src};
use crate::transport::RawBuf;
use std::sync::Arc;

/// Context id of the internal communicator (its collectives use +1).
pub const STAGES_CONTEXT: u32 = 4;

const TAG_PARTNER: i32 = 1;

fn internal_comm(m: &Mpi) -> Comm {
    Comm {
        context: STAGES_CONTEXT,
        group: Arc::new(Group {
            members: (0..m.size).collect(),
        }),
        rank: m.rank,
    }
}

/// The rank holding this rank's partner copy, and the rank whose copy this
/// one holds: `k` ranks on, where mpiexec's `MPISTAGES_PARTNER_SHIFT` (the
/// same in every process of the job) puts it on another host.
fn partner_of(m: &Mpi) -> (usize, usize) {
    static SHIFT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let k = *SHIFT.get_or_init(|| {
        std::env::var(crate::control::env::PARTNER_SHIFT)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1)
    });
    let n = m.size.max(1);
    let k = if (1..n).contains(&k) { k } else { 1 % n };
    ((m.rank + k) % n, (m.rank + n - k) % n)
}

/// Point-to-point on the internal communicator. Every request posted is
/// waited for before `finish` returns, so the buffers handed to `send` and
/// `recv` only need to outlive the value.
struct Exchange<'a> {
    m: &'a Mpi,
    reqs: Vec<ReqId>,
}

impl<'a> Exchange<'a> {
    fn new(m: &'a Mpi) -> Self {
        Exchange {
            m,
            reqs: Vec::new(),
        }
    }

    /// # Safety
    /// `buf` must stay valid and unmoved until `finish` returns.
    unsafe fn send(&mut self, to: usize, buf: &[u8]) {
        // SAFETY: the caller keeps `buf` alive until `finish`; a send only reads it.
        let raw = unsafe { RawBuf::new(buf.as_ptr() as *mut u8, buf.len()) };
        self.reqs.push(self.m.engine.post(Op::Send {
            dest: Some(to),
            src: self.m.rank as u32,
            context: STAGES_CONTEXT,
            tag: TAG_PARTNER,
            mode: SendMode::Standard,
            layout: Box::new(Bytes(raw)),
        }));
    }

    /// # Safety
    /// `buf` must stay valid, unmoved and unread until `finish` returns.
    unsafe fn recv(&mut self, from: usize, buf: &mut [u8]) {
        // SAFETY: as for `send`; nothing else reads `buf` meanwhile.
        let raw = unsafe { RawBuf::new(buf.as_mut_ptr(), buf.len()) };
        self.reqs.push(self.m.engine.post(Op::Recv {
            src: Some(Src::Rank(from as u32)),
            tag: Some(TAG_PARTNER),
            context: STAGES_CONTEXT,
            layout: Box::new(Bytes(raw)),
        }));
    }

    /// Waits for every request; the first error wins.
    fn finish(self) -> MpiResult<()> {
        let mut first = None;
        for id in self.reqs {
            let st = self.m.engine.wait(id);
            if let (Some(e), None) = (&st.error, &first) {
                first = Some(request_error(e));
            }
        }
        first.map_or(Ok(()), Err)
    }
}

/// Sends a length-prefixed message to `to` and receives one from `from`.
fn swap(m: &Mpi, to: usize, out: &[u8], from: usize) -> MpiResult<Vec<u8>> {
    let out_len = (out.len() as u64).to_le_bytes();
    let mut in_len = [0u8; 8];
    let mut x = Exchange::new(m);
    // SAFETY: every buffer is a local that outlives `x.finish()` below.
    unsafe {
        x.send(to, &out_len);
        x.send(to, out);
        x.recv(from, &mut in_len);
    }
    // The length first: the payload's buffer is sized from it.
    let first = m.engine.wait(x.reqs.pop().expect("the receive was posted"));
    let n = match &first.error {
        Some(e) => Err(request_error(e)),
        None => usize::try_from(u64::from_le_bytes(in_len))
            .ok()
            .filter(|&n| n <= isize::MAX as usize)
            .ok_or_else(|| MpiError::new(err::INTERN, "partner message of impossible size")),
    };
    let n = match n {
        Ok(n) => n,
        Err(e) => {
            // The sends still read `out_len` and `out`: wait for them.
            let _ = x.finish();
            return Err(e);
        }
    };
    let mut data = vec![0u8; n];
    let mut y = Exchange::new(m);
    // SAFETY: `data` outlives `y.finish()`.
    unsafe { y.recv(from, &mut data) };
    let r = y.finish();
    x.finish()?;
    r?;
    Ok(data)
}

/// The partner copy at `MPIX_Checkpoint_write`: sends `copy` (this rank's
/// epoch as file bytes) to the partner and returns the copy of the previous
/// rank, to hold.
pub fn exchange_partner_copies(m: &Mpi, copy: &[u8]) -> MpiResult<Vec<u8>> {
    let (partner, client) = partner_of(m);
    swap(m, partner, copy, client)
}

/// Asks the partner for this rank's newest copy of an epoch at most `want`
/// (0: nothing needed) and answers the same question from the previous
/// rank. Returns what came back, verified.
fn ask_partner(m: &Mpi, want: u64) -> MpiResult<Option<Restored>> {
    let (partner, client) = partner_of(m);
    let asked = swap(m, partner, &want.to_le_bytes(), client)?;
    let asked = <[u8; 8]>::try_from(asked.as_slice())
        .map(u64::from_le_bytes)
        .map_err(|_| MpiError::new(err::INTERN, "malformed partner request"))?;
    // Answer: epoch (8 bytes) then the copy; nothing when not asked.
    let answer = match (asked, m.stages().held_at_most(asked)) {
        (0, _) => Vec::new(),
        (_, Some((e, bytes))) => {
            let mut a = Vec::with_capacity(8 + bytes.len());
            a.extend_from_slice(&e.to_le_bytes());
            a.extend_from_slice(&bytes);
            a
        }
        (_, None) => 0u64.to_le_bytes().to_vec(),
    };
    // Every rank answers, even with nothing, so the pairing is fixed.
    let got = swap(m, client, &answer, partner)?;
    if want == 0 || got.len() < 8 {
        return Ok(None);
    }
    let epoch = u64::from_le_bytes(got[..8].try_into().expect("8 bytes"));
    if epoch == 0 || epoch > want {
        return Ok(None);
    }
    match m.stages().from_partner(epoch, &got[8..]) {
        Ok(r) => Ok(Some(r)),
        Err(why) => {
            log::warn!(
                "mpistages: rank {}: partner copy of epoch {epoch} skipped: {why}",
                m.rank
            );
            Ok(None)
        }
    }
}

/// Minimum and maximum of `v` over all ranks.
pub(crate) fn min_max(m: &Mpi, c: &Comm, v: u64) -> MpiResult<(u64, u64)> {
    // (v, !v) reduced with min gives (min, !max).
    let mut inp = [0u8; 16];
    inp[..8].copy_from_slice(&v.to_le_bytes());
    inp[8..].copy_from_slice(&(!v).to_le_bytes());
    let mut out = [0u8; 16];
    let red: &crate::coll::Reducer = &|src: &[u8], dst: &mut [u8], count: usize| {
        for i in 0..count {
            let r = i * 8..i * 8 + 8;
            let a = u64::from_le_bytes(src[r.clone()].try_into().expect("8 bytes"));
            let b = u64::from_le_bytes(dst[r.clone()].try_into().expect("8 bytes"));
            dst[r].copy_from_slice(&a.min(b).to_le_bytes());
        }
    };
    // SAFETY: both arrays live on this stack frame until the blocking call returns.
    let (s, r) = unsafe {
        (
            RawBuf::new(inp.as_mut_ptr(), 16),
            RawBuf::new(out.as_mut_ptr(), 16),
        )
    };
    crate::coll::allreduce(
        &c.team(m),
        s,
        r,
        &crate::coll::Reduction {
            count: 2,
            elem: 8,
            op: red,
            commutative: true,
        },
    )?;
    let min = u64::from_le_bytes(out[..8].try_into().expect("8 bytes"));
    let max = !u64::from_le_bytes(out[8..].try_into().expect("8 bytes"));
    Ok((min, max))
}

/// Finds, with every other rank, the newest epoch at most `committed` that
/// every rank holds a valid copy of, and returns this rank's copy. A
/// job of one process decides alone.
pub fn agree_on_copy(m: &Mpi, committed: u64) -> MpiResult<Restored> {
    let together = m.size > 1;
    let partner = together && m.stages().partner();
    let c = internal_comm(m);
    let mut want = committed;
    loop {
        let local = m.stages().newest_local(want);
        let mut best = local;
        if partner {
            let missing = best.as_ref().is_none_or(|r| r.epoch < want);
            if let Some(p) = ask_partner(m, if missing { want } else { 0 })? {
                if best.as_ref().is_none_or(|r| r.epoch < p.epoch) {
                    best = Some(p);
                }
            }
        }
        let mine = best.as_ref().map_or(0, |r| r.epoch);
        let (min, max) = if together {
            min_max(m, &c, mine)?
        } else {
            (mine, mine)
        };
        if min == 0 {
            let whose = if mine == 0 {
                "this rank has no valid copy on any level".to_string()
            } else {
                format!("this rank has epoch {mine}, another rank has none")
            };
            let hint = m.stages().levels_hint();
            return fail(
                err::OTHER,
                format!(
                    "no valid checkpoint is left to restore (wanted epoch {committed}; {whose}){hint}; see `mpistages-ckpt verify`"
                ),
            );
        }
        if min == max {
            return Ok(best.expect("min > 0, so this rank has a copy"));
        }
        want = min;
    }
}
