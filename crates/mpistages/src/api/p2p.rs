//! Point-to-point: argument checks, then requests for the engine.

use super::consts::{err, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};
use super::error::{fail, MpiResult};
use super::usermem::TypedBuf;
use super::Mpi;
use crate::progress::{Op, ReqId, SendMode, Src, Status};

pub fn check_tag_send(tag: i32) -> MpiResult<()> {
    if !(0..=TAG_UB).contains(&tag) {
        return fail(err::TAG, format!("tag {tag} is outside 0..={TAG_UB}"));
    }
    Ok(())
}

pub fn send_op(
    m: &Mpi,
    buf: TypedBuf,
    dest: i32,
    tag: i32,
    comm: i32,
    mode: SendMode,
) -> MpiResult<Op> {
    let c = m.tables().comm(comm)?;
    check_tag_send(tag)?;
    let dest = match dest {
        PROC_NULL => None,
        d if d >= 0 && (d as usize) < c.peers().size() => Some(c.peer_world(d as usize)),
        d => {
            return fail(
                err::RANK,
                format!(
                    "destination rank {d} is outside the communicator (size {})",
                    c.peers().size()
                ),
            )
        }
    };
    Ok(Op::Send {
        dest,
        src: c.rank as u32,
        context: c.context,
        tag,
        mode,
        layout: Box::new(buf),
    })
}

/// A receive's or probe's tag: a valid tag or `MPI_ANY_TAG` (None).
fn tag_sel(tag: i32) -> MpiResult<Option<i32>> {
    if tag == ANY_TAG {
        return Ok(None);
    }
    if !(0..=TAG_UB).contains(&tag) {
        return fail(
            err::TAG,
            format!("tag {tag} is outside 0..={TAG_UB} and not MPI_ANY_TAG"),
        );
    }
    Ok(Some(tag))
}

/// A receive's or probe's source: `None` for `MPI_PROC_NULL`.
fn source_sel(c: &super::Comm, src: i32) -> MpiResult<Option<Src>> {
    match src {
        PROC_NULL => Ok(None),
        ANY_SOURCE => Ok(Some(Src::Any)),
        s if s >= 0 && (s as usize) < c.peers().size() => Ok(Some(Src::Rank(s as u32))),
        s => fail(
            err::RANK,
            format!(
                "source rank {s} is outside the communicator (size {})",
                c.peers().size()
            ),
        ),
    }
}

pub fn recv_op(m: &Mpi, buf: TypedBuf, src: i32, tag: i32, comm: i32) -> MpiResult<Op> {
    let c = m.tables().comm(comm)?;
    let tag = tag_sel(tag)?;
    let src = source_sel(&c, src)?;
    Ok(Op::Recv {
        src,
        tag,
        context: c.context,
        layout: Box::new(buf),
    })
}

/// Starts a one-shot request and remembers its communicator.
pub fn post(m: &Mpi, op: Op, comm: i32) -> ReqId {
    let id = m.engine.post(op);
    m.tables().req_comm.insert(id.index, comm);
    id
}

pub fn create_persistent(m: &Mpi, op: Op, comm: i32) -> ReqId {
    let id = m.engine.create(op, true);
    m.tables().req_comm.insert(id.index, comm);
    id
}

/// A probe's (context, source, tag), or `None` for `MPI_PROC_NULL`.
pub fn probe_args(
    m: &Mpi,
    src: i32,
    tag: i32,
    comm: i32,
) -> MpiResult<Option<(u32, Src, Option<i32>)>> {
    let c = m.tables().comm(comm)?;
    let tag = tag_sel(tag)?;
    Ok(source_sel(&c, src)?.map(|s| (c.context, s, tag)))
}

/// Status of a probe / receive from `MPI_PROC_NULL`.
pub fn proc_null_status() -> Status {
    let mut s = Status::empty();
    s.source = PROC_NULL;
    s
}

/// A request complete from the start, with an empty status: a receive
/// from `MPI_PROC_NULL`, which the engine completes as it is posted.
pub fn completed(m: &Mpi, comm: i32) -> ReqId {
    let op = Op::Recv {
        src: None,
        tag: None,
        context: 0,
        layout: Box::new(crate::progress::request::Bytes(
            crate::transport::RawBuf::empty(),
        )),
    };
    post(m, op, comm)
}
