//! What ranks agree on around a checkpoint, over the job's internal
//! communicator (context `STAGES_CONTEXT`, never visible to users):
//! - the partner level: at `MPIX_Checkpoint_write` every rank sends its
//!   checkpoint to its partner (the next rank) and keeps the one of the
//!   previous rank; at a restore a rank without a valid local copy asks its
//!   partner for it (the `xor` and `rs` levels: `api::redundancy`);
//! - the epoch to restore: every rank restores the same epoch, the newest
//!   one each rank holds a valid copy of (normally the committed epoch; an
//!   older one when a copy turned out corrupt or missing everywhere).

use super::consts::err;
use super::error::request_error;
use super::error::{MpiError, MpiResult};
use super::group::Group;
use super::redundancy;
use super::{Comm, Mpi};
use crate::checkpoint::erasure::Redundancy;
use crate::checkpoint::store::Restored;
use crate::progress::request::Data;
use crate::progress::{Op, ReqId, SendMode, Src};
use crate::transport::RawBuf;
use std::sync::Arc;

/// Context id of the internal communicator (its collectives use +1).
pub const STAGES_CONTEXT: u32 = 4;

const TAG_PARTNER: i32 = 1;

fn internal_comm(m: &Mpi) -> Comm {
    Comm::intra(
        STAGES_CONTEXT,
        Arc::new(Group {
            members: (0..m.size).collect(),
        }),
        m.rank,
    )
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
            layout: Data::Bytes(raw),
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
            layout: Data::Bytes(raw),
        }));
    }

    /// Waits for every request; the first error wins.
    fn finish(self) -> MpiResult<()> {
        self.finish_counted().map(drop)
    }

    /// `finish`, with the bytes each request moved, in posting order.
    fn finish_counted(self) -> MpiResult<Vec<usize>> {
        let mut first = None;
        let mut bytes = Vec::with_capacity(self.reqs.len());
        for id in self.reqs {
            let st = self.m.engine.wait(id);
            if let (Some(e), None) = (&st.error, &first) {
                first = Some(request_error(e));
            }
            bytes.push(st.bytes);
        }
        first.map_or(Ok(bytes), Err)
    }
}

/// Largest message the exchanges accept: a length beyond it is damage.
const MAX_MESSAGE: u64 = 1 << 44;

/// Sends each of `out` (destination, bytes) and receives one message from
/// each rank of `from`, all at once; messages are length-prefixed, so
/// nobody needs to know a length in advance. Returns the received
/// messages in the order of `from`. Every request is waited for, also on
/// an error (a failed peer), before this returns. A rank appears at most
/// once in `out` and once in `from` (a second message of the same pair
/// could match the first one's length receive).
pub(super) fn exchange(m: &Mpi, out: &[(usize, &[u8])], from: &[usize]) -> MpiResult<Vec<Vec<u8>>> {
    debug_assert!(distinct(out.iter().map(|o| o.0)) && distinct(from.iter().copied()));
    let out_lens: Vec<[u8; 8]> = out
        .iter()
        .map(|(_, b)| (b.len() as u64).to_le_bytes())
        .collect();
    let mut in_lens = vec![[0u8; 8]; from.len()];
    let mut sends = Exchange::new(m);
    let mut lens = Exchange::new(m);
    // SAFETY: every buffer outlives the `finish` of its exchange below.
    unsafe {
        for ((to, bytes), len) in out.iter().zip(&out_lens) {
            sends.send(*to, len);
            sends.send(*to, bytes);
        }
        for (f, len) in from.iter().zip(in_lens.iter_mut()) {
            lens.recv(*f, len);
        }
    }
    // The lengths first: the payloads' buffers are sized from them.
    let sized = lens.finish().and_then(|()| {
        in_lens
            .iter()
            .map(|l| {
                let n = u64::from_le_bytes(*l);
                usize::try_from(n)
                    .ok()
                    .filter(|_| n <= MAX_MESSAGE)
                    .map(|n| vec![0u8; n])
                    .ok_or_else(|| {
                        MpiError::new(err::INTERN, "recovery message of impossible size")
                    })
            })
            .collect::<MpiResult<Vec<Vec<u8>>>>()
    });
    let mut data = match sized {
        Ok(d) => d,
        Err(e) => {
            // The sends still read `out_lens` and `out`: wait for them.
            let _ = sends.finish();
            return Err(e);
        }
    };
    let mut payloads = Exchange::new(m);
    // SAFETY: `data` outlives `payloads.finish()`.
    unsafe {
        for (f, d) in from.iter().zip(data.iter_mut()) {
            payloads.recv(*f, d);
        }
    }
    let r = payloads.finish();
    sends.finish()?;
    r?;
    Ok(data)
}

/// `exchange` when the receiver knows a bound of each message's length
/// (`from`: rank and bound): one round instead of two (no length first),
/// which counts where ranks outnumber cores and every round waits for the
/// peers to be scheduled. A longer message is an error.
pub(super) fn exchange_bounded(
    m: &Mpi,
    out: &[(usize, &[u8])],
    from: &[(usize, usize)],
) -> MpiResult<Vec<Vec<u8>>> {
    debug_assert!(distinct(out.iter().map(|o| o.0)) && distinct(from.iter().map(|f| f.0)));
    let mut data: Vec<Vec<u8>> = from.iter().map(|&(_, n)| vec![0u8; n]).collect();
    let mut sends = Exchange::new(m);
    let mut recvs = Exchange::new(m);
    // SAFETY: `out` and `data` outlive the `finish` calls below.
    unsafe {
        for (to, bytes) in out {
            sends.send(*to, bytes);
        }
        for ((f, _), d) in from.iter().zip(data.iter_mut()) {
            recvs.recv(*f, d);
        }
    }
    let got = recvs.finish_counted();
    sends.finish()?;
    for (d, n) in data.iter_mut().zip(got?) {
        d.truncate(n);
    }
    Ok(data)
}

fn distinct(it: impl Iterator<Item = usize>) -> bool {
    let mut seen = std::collections::BTreeSet::new();
    it.into_iter().all(|x| seen.insert(x))
}

/// Sends a length-prefixed message to `to` and receives one from `from`.
fn swap(m: &Mpi, to: usize, out: &[u8], from: usize) -> MpiResult<Vec<u8>> {
    let mut got = exchange(m, &[(to, out)], &[from])?;
    Ok(got.pop().expect("one message was received"))
}

/// What a rank holds for others after a checkpoint: a partner's copy, or
/// the chunks its parity is computed from.
pub enum Held {
    Copy(Vec<u8>),
    Chunks(redundancy::Chunks),
}

/// The redundancy level at `MPIX_Checkpoint_write` of `epoch`: sends
/// `copy` (this rank's epoch as file bytes) to the partner, or its chunks
/// to its set, and returns what this rank holds for others, if anything.
pub fn protect_copy(m: &Mpi, epoch: u64, copy: &[u8]) -> MpiResult<Option<Held>> {
    // (The guard of `m.stages()` must not live through the match.)
    let redundancy = m.stages().redundancy();
    match redundancy {
        None => Ok(None),
        Some(Redundancy::Partner) => {
            let (partner, client) = partner_of(m);
            swap(m, partner, copy, client).map(|c| Some(Held::Copy(c)))
        }
        Some(r) => match redundancy::layout(m, r) {
            Some(layout) => {
                redundancy::encode_set(m, layout, epoch, copy).map(|c| Some(Held::Chunks(c)))
            }
            None => Ok(None),
        },
    }
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
    let [min, not_max] = min_each(m, c, [v, !v])?;
    Ok((min, !not_max))
}

/// The minimum of each of `v` over every rank of the job, on the internal
/// communicator (the application's collectives on MPI_COMM_WORLD are not
/// disturbed).
pub(super) fn min_over_job<const N: usize>(m: &Mpi, v: [u64; N]) -> MpiResult<[u64; N]> {
    min_each(m, &internal_comm(m), v)
}

/// The minimum of each of `v` over all ranks.
fn min_each<const N: usize>(m: &Mpi, c: &Comm, v: [u64; N]) -> MpiResult<[u64; N]> {
    let mut inp: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut out = vec![0u8; 8 * N];
    let red: &crate::coll::Reducer = &|src: &[u8], dst: &mut [u8], count: usize| {
        for i in 0..count {
            let r = i * 8..i * 8 + 8;
            let a = u64::from_le_bytes(src[r.clone()].try_into().expect("8 bytes"));
            let b = u64::from_le_bytes(dst[r.clone()].try_into().expect("8 bytes"));
            dst[r].copy_from_slice(&a.min(b).to_le_bytes());
        }
    };
    // SAFETY: both buffers live on this frame until the blocking call returns.
    let (s, r) = unsafe {
        (
            RawBuf::new(inp.as_mut_ptr(), 8 * N),
            RawBuf::new(out.as_mut_ptr(), 8 * N),
        )
    };
    crate::coll::allreduce(
        &c.team(m),
        s,
        r,
        &crate::coll::Reduction {
            count: N,
            elem: 8,
            op: red,
            commutative: true,
        },
    )?;
    Ok(std::array::from_fn(|i| {
        u64::from_le_bytes(out[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
    }))
}

/// Finds, with every other rank, the newest epoch at most `committed` that
/// every rank holds a valid copy of, and returns this rank's copy; `None`
/// when there is none (every rank then starts again from the beginning,
/// as SCR does when it has no checkpoint: e.g. the committed epoch was on
/// a memory level only, lost with the process, and the pfs level takes
/// every other epoch). A job of one process decides alone.
pub fn agree_on_copy(m: &Mpi, committed: u64) -> MpiResult<Option<Restored>> {
    let together = m.size > 1;
    let redundancy = m.stages().redundancy().filter(|_| together);
    let c = internal_comm(m);
    let mut want = committed;
    loop {
        let local = m.stages().newest_local(want);
        let missing = local.as_ref().is_none_or(|r| r.epoch < want);
        let from_others = match redundancy {
            None => None,
            Some(Redundancy::Partner) => ask_partner(m, if missing { want } else { 0 })?,
            Some(r) => match redundancy::layout(m, r) {
                Some(layout) => redundancy::rebuild_from_set(m, layout, want, local.as_ref())?,
                None => None,
            },
        };
        let mut best = local;
        if let Some(p) = from_others {
            if best.as_ref().is_none_or(|r| r.epoch < p.epoch) {
                best = Some(p);
            }
        }
        // A rank of an erasure-coded set that could not get `want` back
        // may still rebuild an older epoch its set keeps parity of: it
        // proposes the one before, to be tried by everyone (the parity of
        // an epoch can be damaged where that of the one before is not).
        let guess = best.is_none()
            && redundancy.is_some_and(|r| r != Redundancy::Partner)
            && want > 1
            && want + m.stages().keep() > committed + 1;
        let mine = best
            .as_ref()
            .map_or(if guess { want - 1 } else { 0 }, |r| r.epoch);
        let (min, max, guessing) = if together {
            let [min, not_max, not_guessing] = min_each(m, &c, [mine, !mine, u64::from(!guess)])?;
            (min, !not_max, not_guessing == 0)
        } else {
            (mine, mine, guess)
        };
        if min == 0 {
            let whose = if mine == 0 {
                "this rank has no valid copy on any level".to_string()
            } else {
                format!("this rank has epoch {mine}, another rank has none")
            };
            if m.rank == 0 {
                let hint = m.stages().levels_hint();
                log::warn!(
                    "mpistages: no checkpoint is held by every rank (wanted epoch {committed}; rank 0: {whose}){hint}; the job starts again from the beginning (epoch 0); see `mpistages-ckpt verify`"
                );
            }
            return Ok(None);
        }
        if min == max && !guessing {
            return Ok(Some(
                best.expect("min > 0 and no guess, so this rank has a copy"),
            ));
        }
        want = min;
    }
}
