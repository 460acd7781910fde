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
        d if d >= 0 && (d as usize) < c.size() => Some(c.world(d as usize)),
        d => {
            return fail(
                err::RANK,
                format!(
                    "destination rank {d} is outside the communicator (size {})",
                    c.size()
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

pub fn recv_op(m: &Mpi, buf: TypedBuf, src: i32, tag: i32, comm: i32) -> MpiResult<Op> {
    let c = m.tables().comm(comm)?;
    if tag != ANY_TAG && !(0..=TAG_UB).contains(&tag) {
        return fail(
            err::TAG,
            format!("tag {tag} is outside 0..={TAG_UB} and not MPI_ANY_TAG"),
        );
    }
    let src = match src {
        PROC_NULL => None,
        ANY_SOURCE => Some(Src::Any),
        s if s >= 0 && (s as usize) < c.size() => Some(Src::Rank(s as u32)),
        s => {
            return fail(
                err::RANK,
                format!(
                    "source rank {s} is outside the communicator (size {})",
                    c.size()
                ),
            )
        }
    };
    Ok(Op::Recv {
        src,
        tag: (tag != ANY_TAG).then_some(tag),
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

pub fn probe_args(
    m: &Mpi,
    src: i32,
    tag: i32,
    comm: i32,
) -> MpiResult<Option<(u32, Src, Option<i32>)>> {
    let c = m.tables().comm(comm)?;
    if tag != ANY_TAG && !(0..=TAG_UB).contains(&tag) {
        return fail(
            err::TAG,
            format!("tag {tag} is outside 0..={TAG_UB} and not MPI_ANY_TAG"),
        );
    }
    let s = match src {
        PROC_NULL => return Ok(None),
        ANY_SOURCE => Src::Any,
        s if s >= 0 && (s as usize) < c.size() => Src::Rank(s as u32),
        s => {
            return fail(
                err::RANK,
                format!(
                    "source rank {s} is outside the communicator (size {})",
                    c.size()
                ),
            )
        }
    };
    Ok(Some((c.context, s, (tag != ANY_TAG).then_some(tag))))
}

/// Status of a probe / receive from `MPI_PROC_NULL`.
pub fn proc_null_status() -> Status {
    let mut s = Status::empty();
    s.source = PROC_NULL;
    s
}
