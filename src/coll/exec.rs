//! Runs a schedule with the progress engine: per round, post every send and
//! receive, wait for all, then do the local copies and reductions.

use super::schedule::{Buf, Loc, Schedule, Step};
use crate::api::consts::err;
use crate::api::error::{fail, MpiError, MpiResult};
use crate::api::{Comm, Mpi};
use crate::progress::request::Bytes;
use crate::progress::{Op, ReqError, SendMode, Src};
use crate::transport::RawBuf;

/// `dst = src op dst` over `count` elements.
pub type Reducer = dyn Fn(&[u8], &mut [u8], usize);

/// All collective traffic on a communicator uses this tag on its collective
/// context; per-pair message order does the rest.
const TAG: i32 = 0;

pub fn req_error(e: &ReqError) -> MpiError {
    match e {
        ReqError::Truncate => MpiError::new(err::TRUNCATE, "message truncated"),
        ReqError::PeerLost(p) => {
            MpiError::new(err::OTHER, format!("the connection to rank {p} was lost"))
        }
        ReqError::Halted => MpiError::new(err::TRY_RELOAD, "a process failed"),
    }
}

pub fn run(
    m: &Mpi,
    c: &Comm,
    s: &Schedule,
    send: RawBuf,
    recv: RawBuf,
    red: Option<&super::Reduction>,
) -> MpiResult<()> {
    let mut temp = vec![0u8; s.temp_len];
    // SAFETY: `temp` lives until the end of this function and every request
    // using it is waited for before then.
    let temp_raw = unsafe { RawBuf::new(temp.as_mut_ptr(), temp.len()) };
    let loc = |l: Loc, len: usize| -> MpiResult<RawBuf> {
        let b = match l.buf {
            Buf::Send => send,
            Buf::Recv => recv,
            Buf::Temp => temp_raw,
        };
        if len == 0 {
            return Ok(RawBuf::empty());
        }
        b.sub(l.off, len).ok_or_else(|| {
            MpiError::new(
                err::INTERN,
                format!(
                    "collective schedule out of bounds: {l:?} + {len} of {}",
                    b.len()
                ),
            )
        })
    };
    for round in &s.rounds {
        let mut reqs = Vec::new();
        for st in round {
            let op = match *st {
                Step::Send { to, from, len } => Op::Send {
                    dest: Some(c.world(to)),
                    src: c.rank as u32,
                    context: c.coll_context(),
                    tag: TAG,
                    mode: SendMode::Standard,
                    layout: Box::new(Bytes(loc(from, len)?)),
                },
                Step::Recv { from, into, len } => Op::Recv {
                    src: Some(Src::Rank(from as u32)),
                    tag: Some(TAG),
                    context: c.coll_context(),
                    layout: Box::new(Bytes(loc(into, len)?)),
                },
                _ => continue,
            };
            reqs.push(m.engine.post(op));
        }
        let mut first_err = None;
        for id in reqs {
            let st = m.engine.wait(id);
            if let (Some(e), None) = (&st.error, &first_err) {
                first_err = Some(req_error(e));
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        for st in round {
            match *st {
                Step::Copy { src, dst, len } if len > 0 => {
                    let (a, b) = (loc(src, len)?, loc(dst, len)?);
                    if a.ptr() != b.ptr() {
                        b.as_mut_slice().copy_from_slice(a.as_slice());
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
                        return fail(err::INTERN, "reduction step without an operation");
                    };
                    let (a, b) = (loc(src, len)?, loc(dst, len)?);
                    if src_first || red.commutative {
                        (red.op)(a.as_slice(), b.as_mut_slice(), count);
                    } else {
                        // dst = dst op src: compute into a copy of src.
                        let mut scratch = a.as_slice().to_vec();
                        (red.op)(b.as_slice(), &mut scratch, count);
                        b.as_mut_slice().copy_from_slice(&scratch);
                    }
                }
                _ => {}
            }
        }
    }
    drop(temp);
    Ok(())
}
