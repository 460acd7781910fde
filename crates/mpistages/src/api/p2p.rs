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
    send_op_in(m.tables().comm_ref(comm)?, buf, dest, tag, mode)
}

/// A blocking send of one contiguous run of bytes, as the tables describe
/// it (read without cloning anything), for `Engine::send_bytes_now`.
pub struct QuickSend {
    /// World rank of the destination.
    pub dest: usize,
    /// The sender's rank in the communicator.
    pub src: u32,
    pub context: u32,
    /// The run: offset from the buffer's address, and length.
    pub off: isize,
    pub len: usize,
}

/// The quick form of a standard send, or `None` for anything unusual (an
/// argument in error, `MPI_PROC_NULL`, a datatype with gaps): the ordinary
/// path then runs, and reports the errors.
pub fn quick_send(m: &Mpi, n: i64, dt: i32, dest: i32, tag: i32, comm: i32) -> Option<QuickSend> {
    super::quick::with_comm_and_type(m, comm, dt, |c, dtype| {
        quick_send_in(c, dtype, n, dest, tag)
    })
}

fn quick_send_in(
    c: &super::Comm,
    dtype: &super::datatype::Datatype,
    n: i64,
    dest: i32,
    tag: i32,
) -> Option<QuickSend> {
    let count = usize::try_from(n).ok()?;
    check_tag_send(tag).ok()?;
    if dest < 0 || dest as usize >= c.peers().size() {
        return None;
    }
    let (off, len) = dtype.contiguous_span(count)?;
    Some(QuickSend {
        dest: c.peer_world(dest as usize),
        src: c.rank as u32,
        context: c.context,
        off,
        len,
    })
}

/// A receive into one contiguous run of bytes, as the tables describe it
/// (read without cloning the datatype: no reference count to change).
pub struct QuickRecv {
    pub src: Src,
    pub tag: Option<i32>,
    pub context: u32,
    /// The run: offset from the buffer's address, and length.
    pub off: isize,
    pub len: usize,
}

/// The quick form of a receive, or `None` for anything unusual (an
/// argument in error, `MPI_PROC_NULL`, a datatype with gaps): the ordinary
/// path then runs, and reports the errors.
pub fn quick_recv(m: &Mpi, n: i64, dt: i32, src: i32, tag: i32, comm: i32) -> Option<QuickRecv> {
    super::quick::with_comm_and_type(m, comm, dt, |c, dtype| quick_recv_in(c, dtype, n, src, tag))
}

fn quick_recv_in(
    c: &super::Comm,
    dtype: &super::datatype::Datatype,
    n: i64,
    src: i32,
    tag: i32,
) -> Option<QuickRecv> {
    let count = usize::try_from(n).ok()?;
    let (off, len) = dtype.contiguous_span(count)?;
    Some(QuickRecv {
        src: source_sel(c, src).ok()??,
        tag: tag_sel(tag).ok()?,
        context: c.context,
        off,
        len,
    })
}

/// `send_op` on a communicator in hand.
pub fn send_op_in(
    c: &super::Comm,
    buf: TypedBuf,
    dest: i32,
    tag: i32,
    mode: SendMode,
) -> MpiResult<Op> {
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
        layout: buf.into_data(),
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
    recv_op_in(m.tables().comm_ref(comm)?, buf, src, tag)
}

/// `recv_op` on a communicator in hand.
pub fn recv_op_in(c: &super::Comm, buf: TypedBuf, src: i32, tag: i32) -> MpiResult<Op> {
    let tag = tag_sel(tag)?;
    let src = source_sel(c, src)?;
    Ok(Op::Recv {
        src,
        tag,
        context: c.context,
        layout: buf.into_data(),
    })
}

/// Starts a one-shot request and remembers its communicator.
pub fn post(m: &Mpi, op: Op, comm: i32) -> ReqId {
    m.engine.post_owned(op, comm)
}

/// Posts several operations as one request (`MPI_Isendrecv`), reporting
/// the status of `ops[report]`.
pub fn join(m: &Mpi, ops: Vec<Op>, report: usize, comm: i32) -> ReqId {
    m.engine.join(ops, report, comm)
}

pub fn create_persistent(m: &Mpi, op: Op, comm: i32) -> ReqId {
    m.engine.create(op, true, comm)
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

/// A request complete from the start, as a receive from `MPI_PROC_NULL`
/// is (source `MPI_PROC_NULL`, tag `MPI_ANY_TAG`, no bytes).
pub fn completed(m: &Mpi, comm: i32) -> ReqId {
    m.engine.completed_owned(proc_null_status(), comm)
}

/// A receive from `MPI_PROC_NULL` into nothing.
pub fn null_recv_op() -> Op {
    Op::Recv {
        src: None,
        tag: None,
        context: 0,
        layout: crate::progress::request::Data::Bytes(crate::transport::RawBuf::empty()),
    }
}

/// `MPI_MESSAGE_NULL` and `MPI_MESSAGE_NO_PROC`; handles of claimed
/// messages are above them.
pub const MESSAGE_NULL: i32 = 0;
pub const MESSAGE_NO_PROC: i32 = 1;

fn message_handle(h: u64) -> MpiResult<i32> {
    i32::try_from(h + 1)
        .map_err(|_| super::error::MpiError::new(err::INTERN, "message handles ran out"))
}

/// `MPI_Mprobe` (`block`) and `MPI_Improbe`: the message handle and its
/// status, or `None` (improbe, nothing there).
pub fn mprobe(
    m: &Mpi,
    src: i32,
    tag: i32,
    comm: i32,
    block: bool,
) -> MpiResult<Option<(i32, Status)>> {
    let Some((ctx, s, t)) = probe_args(m, src, tag, comm)? else {
        return Ok(Some((MESSAGE_NO_PROC, proc_null_status())));
    };
    let got = if block {
        Some(m.engine.claim(ctx, s, t))
    } else {
        m.engine.iclaim(ctx, s, t)
    };
    match got {
        None => Ok(None),
        Some((_, st)) if st.error.is_some() => Err(super::error::request_error(
            st.error.as_ref().expect("checked"),
        )),
        Some((h, st)) => Ok(Some((message_handle(h)?, st))),
    }
}

/// `MPI_Mrecv`/`MPI_Imrecv`: the receive of a claimed message into `buf`.
pub fn mrecv(m: &Mpi, buf: TypedBuf, message: i32) -> MpiResult<ReqId> {
    if message == MESSAGE_NO_PROC {
        return Ok(post(
            m,
            Op::Recv {
                src: None,
                tag: None,
                context: 0,
                layout: buf.into_data(),
            },
            super::consts::COMM_WORLD,
        ));
    }
    let op = Op::Recv {
        src: Some(Src::Any),
        tag: None,
        context: 0,
        layout: buf.into_data(),
    };
    let h = u64::try_from(message - 1)
        .ok()
        .filter(|&h| h >= 1)
        .ok_or_else(|| {
            super::error::MpiError::new(err::REQUEST, format!("invalid message handle {message}"))
        })?;
    match m.engine.receive_claimed(h, op) {
        Some(id) => Ok(id),
        None => fail(
            err::REQUEST,
            format!("message {message} was received already or is gone"),
        ),
    }
}
