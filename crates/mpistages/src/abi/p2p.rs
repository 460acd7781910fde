//! Point-to-point entry points.

use super::request::handle;
use super::{mpi, mpi_fn, put, put_status, ret, typed, typed_in, CStatus};
use crate::api::consts::{err, BSEND_OVERHEAD};
use crate::api::error::request_error as req_error;
use crate::api::error::{fail, MpiResult};
use crate::api::p2p;
use crate::api::Mpi;
use crate::api::Owned;
use crate::api::RawBuf;
use crate::api::{Data, Layout, Op, ReqId, SendMode, Status};
use std::os::raw::{c_int, c_void};

/// A send's operation, from one look at the tables; `None` for a send of
/// `MPI_DATATYPE_NULL` to `MPI_PROC_NULL` (nothing to do).
///
/// # Safety
/// MPI buffer rule for `buf` (until the operation completes).
#[allow(clippy::too_many_arguments)]
unsafe fn send_op(
    m: &Mpi,
    buf: *const c_void,
    n: impl Into<i64>,
    dt: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    mode: SendMode,
) -> MpiResult<Option<Op>> {
    let t = m.tables();
    if dest == crate::api::consts::PROC_NULL && dt == crate::api::consts::DATATYPE_NULL {
        t.comm_ref(comm)?;
        return Ok(None);
    }
    // SAFETY: forwarded.
    let tb = unsafe { typed_in(&t, buf, n, dt)? };
    Ok(Some(p2p::send_op_in(
        t.comm_ref(comm)?,
        tb,
        dest,
        tag,
        mode,
    )?))
}

/// The run of `len` bytes `off` bytes from `buf` that a contiguous
/// datatype describes (an empty one for `len` 0, whatever `buf` is).
///
/// # Safety
/// MPI buffer rule: for `len` > 0, `buf` is not NULL and the run stays
/// valid (readable for a send, writable for a receive) until the operation
/// using it completes.
unsafe fn run_in(buf: *mut c_void, off: isize, len: usize) -> RawBuf {
    if len == 0 {
        return RawBuf::empty();
    }
    // SAFETY: this function's contract.
    unsafe { RawBuf::new((buf as *mut u8).wrapping_offset(off), len) }
}

/// A standard send to be written whole at once, with nothing allocated
/// (`Engine::send_bytes_now`): its arguments as the tables describe them
/// and the run of bytes; `None`: send it the ordinary way (which also
/// reports any error in the arguments).
///
/// # Safety
/// MPI buffer rule for `buf` (read during the send that uses the run).
unsafe fn send_quick(
    m: &Mpi,
    buf: *const c_void,
    n: i64,
    dt: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
) -> Option<(p2p::QuickSend, RawBuf)> {
    let q = p2p::quick_send(m, n, dt, dest, tag, comm)?;
    if q.len > 0 && buf.is_null() {
        return None;
    }
    // SAFETY: forwarded: the send reads the run within the call.
    let data = unsafe { run_in(buf as *mut c_void, q.off, q.len) };
    Some((q, data))
}

/// Starts a nonblocking send.
///
/// # Safety
/// MPI buffer rule for `buf` (until the request completes).
#[allow(clippy::too_many_arguments)]
unsafe fn start_send(
    m: &Mpi,
    buf: *const c_void,
    n: impl Into<i64>,
    dt: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
    mode: SendMode,
) -> MpiResult<ReqId> {
    let n = n.into();
    // A standard send shared memory takes whole at once is complete now:
    // its request needs no more than a slot.
    if mode == SendMode::Standard {
        // SAFETY: forwarded; the buffer is read within this call.
        if let Some((q, data)) = unsafe { send_quick(m, buf, n, dt, dest, tag, comm) } {
            let e = &m.engine;
            if let Some(id) = e.send_bytes_now_owned(q.dest, q.context, q.src, tag, data, comm) {
                return Ok(id);
            }
        }
    }
    // SAFETY: forwarded.
    Ok(
        match unsafe { send_op(m, buf, n, dt, dest, tag, comm, mode)? } {
            Some(op) => p2p::post(m, op, comm),
            None => p2p::completed(m, comm),
        },
    )
}

/// A receive's operation, from one look at the tables. A receive from
/// `MPI_PROC_NULL` completes at once whatever its buffer says
/// (`MPI_DATATYPE_NULL` included, as MPICH and Open MPI allow).
///
/// # Safety
/// MPI buffer rule for `buf` (until the operation completes).
unsafe fn recv_op(
    m: &Mpi,
    buf: *mut c_void,
    n: impl Into<i64>,
    dt: c_int,
    src: c_int,
    tag: c_int,
    comm: c_int,
) -> MpiResult<Op> {
    let n = n.into();
    if let Some(q) = p2p::quick_recv(m, n, dt, src, tag, comm) {
        if q.len == 0 || !buf.is_null() {
            // SAFETY: forwarded: writable until the request completes.
            let run = unsafe { run_in(buf, q.off, q.len) };
            return Ok(Op::Recv {
                src: Some(q.src),
                tag: q.tag,
                context: q.context,
                layout: Data::Bytes(run),
            });
        }
    }
    let t = m.tables();
    if src == crate::api::consts::PROC_NULL && dt == crate::api::consts::DATATYPE_NULL {
        t.comm_ref(comm)?;
        return Ok(p2p::null_recv_op());
    }
    // SAFETY: forwarded.
    let tb = unsafe { typed_in(&t, buf, n, dt)? };
    p2p::recv_op_in(t.comm_ref(comm)?, tb, src, tag)
}

/// Starts a nonblocking receive.
///
/// # Safety
/// MPI buffer rule for `buf` (until the request completes).
unsafe fn start_recv(
    m: &Mpi,
    buf: *mut c_void,
    n: impl Into<i64>,
    dt: c_int,
    src: c_int,
    tag: c_int,
    comm: c_int,
) -> MpiResult<ReqId> {
    // SAFETY: forwarded.
    Ok(p2p::post(
        m,
        unsafe { recv_op(m, buf, n, dt, src, tag, comm)? },
        comm,
    ))
}

/// Waits for a receive, writes its status, and turns its error into ours.
///
/// # Safety
/// `status` is NULL or a writable `MPI_Status`.
pub(super) unsafe fn finish_recv(m: &Mpi, id: ReqId, status: *mut CStatus) -> MpiResult<()> {
    let st = wait_blocking(m, id);
    // SAFETY: forwarded.
    unsafe { put_status(status, &st) };
    st.error.as_ref().map_or(Ok(()), |e| Err(req_error(e)))
}

/// The same send, but from a private copy of the data (buffered sends,
/// Sendrecv_replace): the user's buffer is free as soon as this returns.
fn from_copy(op: Op, data: Vec<u8>) -> Op {
    match op {
        Op::Send {
            dest,
            src,
            context,
            tag,
            mode,
            ..
        } => Op::Send {
            dest,
            src,
            context,
            tag,
            mode,
            layout: Data::of(Owned(data)),
        },
        recv => recv,
    }
}

/// Waits for a request of a blocking call. A wildcard receive that a
/// failure not acknowledged blocks (ULFM) is cancelled and fails with
/// MPIX_ERR_PROC_FAILED, as the blocking receive's error.
fn wait_blocking(m: &Mpi, id: ReqId) -> Status {
    match m.engine.wait_unless_blocked(id) {
        Some(st) => st,
        None => cancel_blocked(m, id),
    }
}

/// Ends a blocking wildcard receive that a failure not acknowledged blocks
/// (ULFM): cancelled, and failed with MPIX_ERR_PROC_FAILED.
fn cancel_blocked(m: &Mpi, id: ReqId) -> Status {
    m.engine.cancel(id);
    let mut st = m.engine.wait(id);
    if st.cancelled {
        st.cancelled = false;
        st.error = Some(crate::api::ReqError::Failed {
            class: err::PROC_FAILED,
            detail: "a process that could send to this MPI_ANY_SOURCE receive has failed and the failure is not acknowledged (MPIX_Comm_failure_ack)".into(),
        });
    }
    st
}

fn finish(m: &Mpi, id: ReqId) -> MpiResult<Status> {
    let st = wait_blocking(m, id);
    match &st.error {
        Some(e) => Err(req_error(e)),
        None => Ok(st),
    }
}

/// Copies the message into the attached buffer's accounting and sends the
/// copy; returns at once.
///
/// # Safety
/// MPI buffer rule for `buf` (read during this call only).
unsafe fn bsend(
    m: &Mpi,
    buf: *const c_void,
    n: c_int,
    dt: c_int,
    dest: c_int,
    tag: c_int,
    comm: c_int,
) -> MpiResult<()> {
    // SAFETY: forwarded; the data is copied before this call returns.
    let tb = unsafe { typed(m, buf, n, dt)? };
    let data = match tb.contiguous() {
        Some(b) => b.as_slice().to_vec(),
        None => tb.pack(),
    };
    let need = data.len() + BSEND_OVERHEAD as usize;
    let op = from_copy(
        p2p::send_op(m, tb, dest, tag, comm, SendMode::Standard)?,
        data,
    );
    {
        let mut t = m.tables();
        let pending = std::mem::take(&mut t.bsend_pending);
        let ids: Vec<_> = pending.iter().map(|p| p.0).collect();
        let exists = m.engine.existing(&ids);
        let alive: Vec<_> = pending
            .into_iter()
            .zip(exists)
            .filter_map(|(p, e)| e.then_some(p))
            .collect();
        t.bsend_pending = alive;
        let used: usize = t.bsend_pending.iter().map(|x| x.1).sum();
        let Some((_, size)) = t.bsend else {
            return fail(
                err::BUFFER,
                "MPI_Bsend without an attached buffer (MPI_Buffer_attach)",
            );
        };
        if used + need > size {
            return fail(
                err::BUFFER,
                format!(
                    "the attached buffer of {size} bytes has {} free, {need} needed",
                    size - used
                ),
            );
        }
    }
    let id = m.engine.post(op);
    m.engine.free(id);
    m.tables().bsend_pending.push((id, need));
    Ok(())
}

macro_rules! blocking_send {
    ($name:ident, $pname:ident, $label:literal, $mode:expr) => {
        blocking_send!($name, $pname, $label, $mode, c_int);
    };
    ($name:ident, $pname:ident, $label:literal, $mode:expr, $cnt:ty) => {
        mpi_fn!(fn $name / $pname(buf: *const c_void, n: $cnt, dt: c_int, dest: c_int, tag: c_int, comm: c_int) {
            let r = mpi().and_then(|m| {
                if $mode == SendMode::Standard {
                    // SAFETY: the caller's buffer stays valid for this blocking call.
                    if let Some((q, data)) = unsafe { send_quick(m, buf, n.into(), dt, dest, tag, comm) } {
                        if m.engine.send_bytes_now(q.dest, q.context, q.src, tag, data) {
                            return Ok(());
                        }
                    }
                }
                // SAFETY: the caller's buffer stays valid for this blocking call.
                let Some(op) = (unsafe { send_op(m, buf, n, dt, dest, tag, comm, $mode)? }) else {
                    return Ok(());
                };
                let st = m.engine.send_blocking(op);
                st.error.as_ref().map_or(Ok(()), |e| Err(req_error(e)))
            });
            ret($label, comm, r)
        });
    };
}
blocking_send!(MPI_Send, PMPI_Send, "MPI_Send", SendMode::Standard);
blocking_send!(MPI_Ssend, PMPI_Ssend, "MPI_Ssend", SendMode::Sync);
blocking_send!(MPI_Rsend, PMPI_Rsend, "MPI_Rsend", SendMode::Standard);

macro_rules! nonblocking_send {
    ($name:ident, $pname:ident, $label:literal, $mode:expr) => {
        nonblocking_send!($name, $pname, $label, $mode, c_int);
    };
    ($name:ident, $pname:ident, $label:literal, $mode:expr, $cnt:ty) => {
        mpi_fn!(fn $name / $pname(buf: *const c_void, n: $cnt, dt: c_int, dest: c_int, tag: c_int, comm: c_int, req: *mut c_int) {
            let r = mpi().and_then(|m| {
                // SAFETY: the MPI buffer rule holds until the request completes.
                let id = unsafe { start_send(m, buf, n, dt, dest, tag, comm, $mode)? };
                // SAFETY: caller's out-pointer.
                unsafe { put(req, handle(id)) }
            });
            ret($label, comm, r)
        });
    };
}
nonblocking_send!(MPI_Isend, PMPI_Isend, "MPI_Isend", SendMode::Standard);
nonblocking_send!(MPI_Issend, PMPI_Issend, "MPI_Issend", SendMode::Sync);
nonblocking_send!(MPI_Irsend, PMPI_Irsend, "MPI_Irsend", SendMode::Standard);
// The large-count versions (MPI 4.0): the count is an MPI_Count.
blocking_send!(
    MPI_Send_c,
    PMPI_Send_c,
    "MPI_Send_c",
    SendMode::Standard,
    i64
);
blocking_send!(
    MPI_Ssend_c,
    PMPI_Ssend_c,
    "MPI_Ssend_c",
    SendMode::Sync,
    i64
);
blocking_send!(
    MPI_Rsend_c,
    PMPI_Rsend_c,
    "MPI_Rsend_c",
    SendMode::Standard,
    i64
);
nonblocking_send!(
    MPI_Isend_c,
    PMPI_Isend_c,
    "MPI_Isend_c",
    SendMode::Standard,
    i64
);
nonblocking_send!(
    MPI_Issend_c,
    PMPI_Issend_c,
    "MPI_Issend_c",
    SendMode::Sync,
    i64
);
nonblocking_send!(
    MPI_Irsend_c,
    PMPI_Irsend_c,
    "MPI_Irsend_c",
    SendMode::Standard,
    i64
);

mpi_fn!(fn MPI_Bsend / PMPI_Bsend(buf: *const c_void, n: c_int, dt: c_int, dest: c_int, tag: c_int, comm: c_int) {
    // SAFETY: the buffer is copied during the call.
    ret("MPI_Bsend", comm, mpi().and_then(|m| unsafe { bsend(m, buf, n, dt, dest, tag, comm) }))
});

mpi_fn!(fn MPI_Ibsend / PMPI_Ibsend(buf: *const c_void, n: c_int, dt: c_int, dest: c_int, tag: c_int, comm: c_int, req: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: the buffer is copied during the call.
        unsafe { bsend(m, buf, n, dt, dest, tag, comm)? };
        // The copy is made: the request is complete from the start.
        let id = p2p::post(m, Op::Send { dest: None, src: 0, context: 0, tag: 0, mode: SendMode::Standard, layout: Data::of(Owned(Vec::new())) }, comm);
        // SAFETY: caller's out-pointer.
        unsafe { put(req, handle(id)) }
    });
    ret("MPI_Ibsend", comm, r)
});

mpi_fn!(fn MPI_Buffer_attach / PMPI_Buffer_attach(buf: *mut c_void, size: c_int) {
    let r = mpi().and_then(|m| {
        if size < 0 {
            return fail(err::ARG, format!("buffer size {size} is negative"));
        }
        let mut t = m.tables();
        if t.bsend.is_some() {
            return fail(err::BUFFER, "a buffer is already attached");
        }
        t.bsend = Some((buf as usize, size as usize));
        Ok(())
    });
    ret("MPI_Buffer_attach", crate::api::consts::COMM_WORLD, r)
});

mpi_fn!(fn MPI_Buffer_detach / PMPI_Buffer_detach(buf: *mut c_void, size: *mut c_int) {
    let r = mpi().and_then(|m| {
        let pending: Vec<ReqId> = m.tables().bsend_pending.iter().map(|x| x.0).collect();
        m.engine.wait_gone(&pending);
        let mut t = m.tables();
        t.bsend_pending.clear();
        let (addr, sz) = t.bsend.take().unwrap_or((0, 0));
        // SAFETY: MPI passes the address of a pointer as `buf`.
        unsafe {
            put(buf as *mut *mut c_void, addr as *mut c_void)?;
            put(size, sz as c_int)
        }
    });
    ret("MPI_Buffer_detach", crate::api::consts::COMM_WORLD, r)
});

mpi_fn!(fn MPI_Recv / PMPI_Recv(buf: *mut c_void, n: c_int, dt: c_int, src: c_int, tag: c_int, comm: c_int, status: *mut CStatus) {
    let r = mpi().and_then(|m| {
        // SAFETY: the caller's buffer stays valid for this blocking call.
        let op = unsafe { recv_op(m, buf, n, dt, src, tag, comm)? };
        let st = m.engine.recv_blocking(op).unwrap_or_else(|id| cancel_blocked(m, id));
        // SAFETY: caller's status pointer or NULL.
        unsafe { put_status(status, &st) };
        st.error.as_ref().map_or(Ok(()), |e| Err(req_error(e)))
    });
    ret("MPI_Recv", comm, r)
});

mpi_fn!(fn MPI_Irecv / PMPI_Irecv(buf: *mut c_void, n: c_int, dt: c_int, src: c_int, tag: c_int, comm: c_int, req: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: the MPI buffer rule holds until the request completes.
        let id = unsafe { start_recv(m, buf, n, dt, src, tag, comm)? };
        // SAFETY: caller's out-pointer.
        unsafe { put(req, handle(id)) }
    });
    ret("MPI_Irecv", comm, r)
});

mpi_fn!(fn MPI_Recv_c / PMPI_Recv_c(buf: *mut c_void, n: i64, dt: c_int, src: c_int, tag: c_int, comm: c_int, status: *mut CStatus) {
    let r = mpi().and_then(|m| {
        // SAFETY: the caller's buffer stays valid for this blocking call.
        let id = unsafe { start_recv(m, buf, n, dt, src, tag, comm)? };
        // SAFETY: caller's status pointer or NULL.
        unsafe { finish_recv(m, id, status) }
    });
    ret("MPI_Recv_c", comm, r)
});

mpi_fn!(fn MPI_Irecv_c / PMPI_Irecv_c(buf: *mut c_void, n: i64, dt: c_int, src: c_int, tag: c_int, comm: c_int, req: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: the MPI buffer rule holds until the request completes.
        let id = unsafe { start_recv(m, buf, n, dt, src, tag, comm)? };
        // SAFETY: caller's out-pointer.
        unsafe { put(req, handle(id)) }
    });
    ret("MPI_Irecv_c", comm, r)
});

mpi_fn!(fn MPI_Sendrecv / PMPI_Sendrecv(sbuf: *const c_void, sn: c_int, sdt: c_int, dest: c_int, stag: c_int,
        rbuf: *mut c_void, rn: c_int, rdt: c_int, src: c_int, rtag: c_int, comm: c_int, status: *mut CStatus) {
    let r = mpi().and_then(|m| {
        // Both halves are checked before either is posted: a receive posted
        // beside a send that fails validation would wait forever.
        // SAFETY: both buffers stay valid for this blocking call.
        let rtb = unsafe { typed(m, rbuf, rn, rdt)? };
        // SAFETY: the buffer stays valid for this blocking call.
        let stb = unsafe { typed(m, sbuf, sn, sdt)? };
        let recv = p2p::recv_op(m, rtb, src, rtag, comm)?;
        let send = p2p::send_op(m, stb, dest, stag, comm, SendMode::Standard)?;
        let rid = p2p::post(m, recv, comm);
        let sres = finish(m, p2p::post(m, send, comm));
        // SAFETY: caller's status pointer or NULL.
        let rres = unsafe { finish_recv(m, rid, status) };
        sres?;
        rres
    });
    ret("MPI_Sendrecv", comm, r)
});

mpi_fn!(fn MPI_Sendrecv_replace / PMPI_Sendrecv_replace(buf: *mut c_void, n: c_int, dt: c_int, dest: c_int, stag: c_int,
        src: c_int, rtag: c_int, comm: c_int, status: *mut CStatus) {
    let r = mpi().and_then(|m| {
        // SAFETY: the buffer stays valid for this blocking call; the outgoing
        // data is copied before the receive may overwrite it.
        let tb = unsafe { typed(m, buf, n, dt)? };
        let data = tb.pack();
        let send = from_copy(
            p2p::send_op(m, tb.clone(), dest, stag, comm, SendMode::Standard)?,
            data,
        );
        let rid = p2p::post(m, p2p::recv_op(m, tb, src, rtag, comm)?, comm);
        let sid = m.engine.post(send);
        let sres = finish(m, sid);
        // SAFETY: caller's status pointer or NULL.
        let rres = unsafe { finish_recv(m, rid, status) };
        sres?;
        rres
    });
    ret("MPI_Sendrecv_replace", comm, r)
});

mpi_fn!(fn MPI_Isendrecv / PMPI_Isendrecv(sbuf: *const c_void, sn: c_int, sdt: c_int, dest: c_int, stag: c_int,
        rbuf: *mut c_void, rn: c_int, rdt: c_int, src: c_int, rtag: c_int, comm: c_int, req: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: both buffers stay valid until the request completes.
        let rtb = unsafe { typed(m, rbuf, rn, rdt)? };
        // SAFETY: as above.
        let stb = unsafe { typed(m, sbuf, sn, sdt)? };
        let recv = p2p::recv_op(m, rtb, src, rtag, comm)?;
        let send = p2p::send_op(m, stb, dest, stag, comm, SendMode::Standard)?;
        let id = p2p::join(m, vec![recv, send], 0, comm);
        m.engine.background();
        // SAFETY: caller's out-pointer.
        unsafe { put(req, handle(id)) }
    });
    ret("MPI_Isendrecv", comm, r)
});

mpi_fn!(fn MPI_Isendrecv_replace / PMPI_Isendrecv_replace(buf: *mut c_void, n: c_int, dt: c_int, dest: c_int, stag: c_int,
        src: c_int, rtag: c_int, comm: c_int, req: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: the buffer stays valid until the request completes; the
        // outgoing data is copied first.
        let tb = unsafe { typed(m, buf, n, dt)? };
        let data = tb.pack();
        let send = from_copy(p2p::send_op(m, tb.clone(), dest, stag, comm, SendMode::Standard)?, data);
        let recv = p2p::recv_op(m, tb, src, rtag, comm)?;
        let id = p2p::join(m, vec![recv, send], 0, comm);
        m.engine.background();
        // SAFETY: caller's out-pointer.
        unsafe { put(req, handle(id)) }
    });
    ret("MPI_Isendrecv_replace", comm, r)
});

macro_rules! send_init {
    ($name:ident, $pname:ident, $label:literal, $mode:expr) => {
        mpi_fn!(fn $name / $pname(buf: *const c_void, n: c_int, dt: c_int, dest: c_int, tag: c_int, comm: c_int, req: *mut c_int) {
            let r = mpi().and_then(|m| {
                // SAFETY: the MPI buffer rule holds while the request is active.
                let tb = unsafe { typed(m, buf, n, dt)? };
                let id = p2p::create_persistent(m, p2p::send_op(m, tb, dest, tag, comm, $mode)?, comm);
                // SAFETY: caller's out-pointer.
                unsafe { put(req, handle(id)) }
            });
            ret($label, comm, r)
        });
    };
}
send_init!(
    MPI_Send_init,
    PMPI_Send_init,
    "MPI_Send_init",
    SendMode::Standard
);
send_init!(
    MPI_Ssend_init,
    PMPI_Ssend_init,
    "MPI_Ssend_init",
    SendMode::Sync
);
send_init!(
    MPI_Rsend_init,
    PMPI_Rsend_init,
    "MPI_Rsend_init",
    SendMode::Standard
);
// A persistent buffered send is sent as a standard one: it never touches the
// attached buffer (noted in the README's limitations).
send_init!(
    MPI_Bsend_init,
    PMPI_Bsend_init,
    "MPI_Bsend_init",
    SendMode::Standard
);

mpi_fn!(fn MPI_Recv_init / PMPI_Recv_init(buf: *mut c_void, n: c_int, dt: c_int, src: c_int, tag: c_int, comm: c_int, req: *mut c_int) {
    let r = mpi().and_then(|m| {
        // SAFETY: the MPI buffer rule holds while the request is active.
        let tb = unsafe { typed(m, buf, n, dt)? };
        let id = p2p::create_persistent(m, p2p::recv_op(m, tb, src, tag, comm)?, comm);
        // SAFETY: caller's out-pointer.
        unsafe { put(req, handle(id)) }
    });
    ret("MPI_Recv_init", comm, r)
});
