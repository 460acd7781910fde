//! Ports and names (MPI's "establishing communication"): `MPI_Open_port`,
//! `MPI_Comm_accept`/`MPI_Comm_connect`, `MPI_Comm_join` and the name
//! service. Every process of one mpiexec job (spawned ones included) can
//! reach every other, so a port is an address inside the job: the opener's
//! process id and a number. The two roots swap their groups on the ports'
//! own context (`DPM_CONTEXT`, where a message's source is the sender's
//! process id), each tells its group, and both sides take the same new
//! context, as `MPI_Intercomm_create` does. Ports of another job are
//! refused with `MPI_ERR_PORT`: jobs do not share a transport.

use super::comm::{bcast_vec, decode_group, encode_group, register, req_result, reserve};
use super::consts::err;
use super::error::{fail, MpiError, MpiResult};
use super::group::Group;
use super::{Comm, Mpi};
use crate::control::proto::{NameRequest, ToController};
use crate::progress::request::{Data, Owned};
use crate::progress::{Op, SendMode, Src};
use crate::transport::RawBuf;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

/// The ports' context (reserved: communicators' contexts come after it).
pub const DPM_CONTEXT: u32 = 8;

/// `MPI_MAX_PORT_NAME`.
pub const MAX_PORT_NAME: usize = 256;

const PREFIX: &str = "mpistages-port";

/// Ports are numbered per process; a port's request tag is 2n, the answer's
/// 2n + 1. Numbers stay below this so the tags are valid.
const MAX_PORTS: u32 = 1 << 29;

/// This process's open ports, and the next number to give.
static PORTS: Mutex<(u32, BTreeSet<u32>)> = Mutex::new((0, BTreeSet::new()));

fn job_id() -> String {
    std::env::var(crate::control::env::JOB_ID).unwrap_or_default()
}

/// A port: whose it is (process id) and its number.
#[derive(Debug, PartialEq)]
struct Port {
    owner: usize,
    number: u32,
}

fn port_name(owner: usize, number: u32) -> String {
    format!("{PREFIX}:{}:{owner}:{number}", job_id())
}

/// Reads a port name; an error says why it names no port of this job.
fn parse(name: &str) -> MpiResult<Port> {
    let bad = |why: &str| MpiError::new(err::PORT, format!("port name '{name}': {why}"));
    let mut it = name.rsplitn(3, ':');
    let (number, owner, head) = (it.next(), it.next(), it.next());
    let (Some(number), Some(owner), Some(head)) = (number, owner, head) else {
        return Err(bad("not a port of MPI_Open_port"));
    };
    let Some(job) = head.strip_prefix(PREFIX).and_then(|j| j.strip_prefix(':')) else {
        return Err(bad("not a port of MPI_Open_port"));
    };
    let (Ok(owner), Ok(number)) = (owner.parse::<usize>(), number.parse::<u32>()) else {
        return Err(bad("not a port of MPI_Open_port"));
    };
    if number >= MAX_PORTS {
        return Err(bad("not a port of MPI_Open_port"));
    }
    if job != job_id() {
        return Err(bad(
            "it was opened by another job (mpistages connects the processes of one mpiexec job, spawned ones included)",
        ));
    }
    Ok(Port { owner, number })
}

/// `MPI_Open_port`.
pub fn open_port(m: &Mpi) -> MpiResult<String> {
    let mut p = PORTS.lock().unwrap_or_else(|e| e.into_inner());
    if p.0 >= MAX_PORTS {
        return fail(err::PORT, "this process has opened too many ports");
    }
    let n = p.0;
    p.0 += 1;
    p.1.insert(n);
    Ok(port_name(m.rank, n))
}

/// `MPI_Close_port`.
pub fn close_port(m: &Mpi, name: &str) -> MpiResult<()> {
    let port = parse(name)?;
    let mut p = PORTS.lock().unwrap_or_else(|e| e.into_inner());
    if port.owner != m.rank || !p.1.remove(&port.number) {
        return fail(
            err::PORT,
            format!("port '{name}' is not open in this process"),
        );
    }
    Ok(())
}

fn is_open(m: &Mpi, port: &Port) -> bool {
    let p = PORTS.lock().unwrap_or_else(|e| e.into_inner());
    port.owner == m.rank && p.1.contains(&port.number)
}

/// How many process ids this process knows: its job's, and those of the
/// processes its communicators reach (spawned ones).
fn known_processes(m: &Mpi) -> usize {
    let t = m.tables();
    let ids = t.comms.iter().flatten().flat_map(|e| {
        let c = &e.comm;
        c.group
            .members
            .iter()
            .chain(c.remote.iter().flat_map(|g| g.members.iter()))
    });
    ids.map(|&w| w + 1).max().unwrap_or(0).max(m.size)
}

/// Sends `bytes` to process `dest` on the ports' context.
fn send(m: &Mpi, dest: usize, tag: i32, bytes: Vec<u8>) -> MpiResult<()> {
    let id = m.engine.post(Op::Send {
        dest: Some(dest),
        src: m.rank as u32,
        context: DPM_CONTEXT,
        tag,
        mode: SendMode::Standard,
        layout: Data::of(Owned(bytes)),
    });
    req_result(m.engine.wait(id)).map(|_| ())
}

/// Receives a message of `tag` from `src` on the ports' context: its
/// sender and bytes.
fn recv(m: &Mpi, src: Src, tag: i32) -> MpiResult<(usize, Vec<u8>)> {
    let probed = req_result(m.engine.probe(DPM_CONTEXT, src, Some(tag)))?;
    let from = Src::Rank(probed.source as u32);
    let mut bytes = vec![0u8; probed.bytes];
    // SAFETY: `bytes` lives until the receive is waited for below.
    let buf = unsafe { RawBuf::new(bytes.as_mut_ptr(), bytes.len()) };
    let id = m.engine.post(Op::Recv {
        src: Some(from),
        tag: Some(tag),
        context: DPM_CONTEXT,
        layout: Data::Bytes(buf),
    });
    req_result(m.engine.wait(id))?;
    Ok((probed.source as usize, bytes))
}

/// Which side of the rendezvous a root takes.
#[derive(Clone, Copy, PartialEq)]
pub enum Side {
    Accept,
    Connect,
}

/// The root's part: the other group's message (its context and members).
fn rendezvous(m: &Mpi, side: Side, name: &str, mine: Vec<u8>) -> MpiResult<Vec<u8>> {
    let port = parse(name)?;
    let (ask, answer) = (2 * port.number as i32, 2 * port.number as i32 + 1);
    match side {
        Side::Accept => {
            if !is_open(m, &port) {
                return fail(
                    err::PORT,
                    format!("port '{name}' is not open in this process (MPI_Comm_accept's root must have opened it)"),
                );
            }
            let (from, theirs) = recv(m, Src::Any, ask)?;
            send(m, from, answer, mine)?;
            Ok(theirs)
        }
        Side::Connect => {
            if port.owner == m.rank && !is_open(m, &port) {
                return fail(err::PORT, format!("port '{name}' is not open"));
            }
            if port.owner >= known_processes(m) {
                return fail(
                    err::PORT,
                    format!("port '{name}' names process {}, which this process does not know in the job", port.owner),
                );
            }
            send(m, port.owner, ask, mine)?;
            Ok(recv(m, Src::Rank(port.owner as u32), answer)?.1)
        }
    }
}

/// `MPI_Comm_accept` and `MPI_Comm_connect` over the intra-communicator
/// `h` (`name` is significant at `root` only): the new inter-communicator.
pub fn accept_or_connect(
    m: &Mpi,
    side: Side,
    name: Option<&str>,
    root: i32,
    h: i32,
) -> MpiResult<i32> {
    let lc = m.tables().comm(h)?;
    if lc.is_inter() {
        return fail(
            err::COMM,
            "MPI_Comm_accept and MPI_Comm_connect need an intra-communicator",
        );
    }
    let root = match usize::try_from(root) {
        Ok(r) if r < lc.size() => r,
        _ => {
            return fail(
                err::ROOT,
                format!("root {root} of a communicator of {}", lc.size()),
            )
        }
    };
    let team = lc.team(m);
    let mine = crate::coll::max_u32(&team, m.tables().max_context)?;
    // The root's outcome, for every member: 1 and the other group, or 0,
    // the error class and the reason.
    let mut msg = Vec::new();
    if lc.rank == root {
        let name = name.unwrap_or_default();
        msg = match rendezvous(m, side, name, encode_group(mine, &lc.group)) {
            Ok(theirs) => [&[1u8][..], &theirs].concat(),
            Err(e) => [&[0u8][..], &e.class.to_le_bytes(), e.detail.as_bytes()].concat(),
        };
    }
    bcast_vec(&team, root, &mut msg)?;
    match msg.split_first() {
        Some((1, theirs)) => {
            let (ctx, remote) = decode_group(theirs, usize::MAX)?;
            let c = joined(m, ctx.max(mine), lc.group.clone(), lc.rank, remote)?;
            Ok(register(m, h, c))
        }
        Some((0, e)) if e.len() >= 4 => {
            let class = i32::from_le_bytes(e[..4].try_into().expect("4 bytes"));
            Err(MpiError::new(
                class,
                String::from_utf8_lossy(&e[4..]).into_owned(),
            ))
        }
        _ => fail(
            err::INTERN,
            "malformed answer of MPI_Comm_accept/connect's root",
        ),
    }
}

/// The inter-communicator of `group` (this process at `rank`) and
/// `remote`, on the context pair at or above `agreed`.
fn joined(m: &Mpi, agreed: u32, group: Arc<Group>, rank: usize, remote: Group) -> MpiResult<Comm> {
    if remote.members.is_empty() || remote.members.iter().any(|w| group.rank_of(*w).is_some()) {
        return fail(
            err::ARG,
            "the two groups of the connection overlap (a process connected to its own group)",
        );
    }
    let context = reserve(m, agreed);
    Ok(Comm {
        remote: Some(Arc::new(remote)),
        ..Comm::intra(context, group, rank)
    })
}

const JOIN_MAGIC: &[u8; 16] = b"mpistages-join-1";

/// `MPI_Comm_join` over a connected socket: both sides write who they are
/// (job, process id, context) and read the other's. The socket is left
/// open, as the standard has it.
pub fn join(m: &Mpi, socket: &mut (impl Read + Write)) -> MpiResult<i32> {
    let io = |e: std::io::Error| MpiError::new(err::OTHER, format!("MPI_Comm_join's socket: {e}"));
    let job = job_id();
    let mine = m.tables().max_context;
    let mut rec = JOIN_MAGIC.to_vec();
    rec.extend_from_slice(&(job.len() as u32).to_le_bytes());
    rec.extend_from_slice(job.as_bytes());
    rec.extend_from_slice(&(m.rank as u32).to_le_bytes());
    rec.extend_from_slice(&mine.to_le_bytes());
    socket.write_all(&rec).map_err(io)?;
    let mut head = [0u8; 20];
    socket.read_exact(&mut head).map_err(io)?;
    let len = u32::from_le_bytes(head[16..].try_into().expect("4 bytes")) as usize;
    if &head[..16] != JOIN_MAGIC || len > 4096 {
        return fail(err::ARG, "the other end of MPI_Comm_join's socket is not a process of mpistages calling MPI_Comm_join");
    }
    let mut rest = vec![0u8; len + 8];
    socket.read_exact(&mut rest).map_err(io)?;
    if rest[..len] != *job.as_bytes() {
        return fail(
            err::ARG,
            "the other end of MPI_Comm_join's socket is a process of another job (mpistages joins the processes of one mpiexec job)",
        );
    }
    let word =
        |i: usize| u32::from_le_bytes(rest[len + i..len + i + 4].try_into().expect("4 bytes"));
    let (them, theirs) = (word(0) as usize, word(4));
    let me = Arc::new(Group {
        members: vec![m.rank],
    });
    let c = joined(
        m,
        mine.max(theirs),
        me,
        0,
        Group {
            members: vec![them],
        },
    )?;
    Ok(register(m, super::consts::COMM_SELF, c))
}

/// Asks the job's name service (mpiexec) and waits for its answer.
fn name_service(m: &Mpi, req: NameRequest, class: i32) -> MpiResult<String> {
    let Some(client) = &m.client else {
        return fail(
            class,
            "the name service is mpiexec's: this process was not started by it",
        );
    };
    if client.send(&ToController::Name(req)).is_err() {
        return fail(err::OTHER, "mpiexec is gone");
    }
    match m.engine.wait_named() {
        Some((port, error)) if error.is_empty() => Ok(port),
        Some((_, error)) => fail(class, error),
        None => fail(err::OTHER, "mpiexec is gone"),
    }
}

/// `MPI_Publish_name`.
pub fn publish(m: &Mpi, service: &str, port: &str) -> MpiResult<()> {
    let req = NameRequest::Publish {
        service: service.into(),
        port: port.into(),
    };
    name_service(m, req, err::SERVICE).map(|_| ())
}

/// `MPI_Unpublish_name`.
pub fn unpublish(m: &Mpi, service: &str, port: &str) -> MpiResult<()> {
    let req = NameRequest::Unpublish {
        service: service.into(),
        port: port.into(),
    };
    name_service(m, req, err::SERVICE).map(|_| ())
}

/// `MPI_Lookup_name`.
pub fn lookup(m: &Mpi, service: &str) -> MpiResult<String> {
    name_service(
        m,
        NameRequest::Lookup {
            service: service.into(),
        },
        err::NAME,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_name_reads_back_and_a_foreign_one_is_refused() {
        let name = port_name(3, 17);
        assert_eq!(
            parse(&name).unwrap(),
            Port {
                owner: 3,
                number: 17
            }
        );
        for bad in [
            "",
            "x",
            "mpistages-port:3:17",
            "tcp://1.2.3.4:5",
            &format!("{PREFIX}:{}:x:1", job_id()),
        ] {
            assert_eq!(parse(bad).unwrap_err().class, err::PORT, "{bad}");
        }
        let other = format!("{PREFIX}:another-job:0:0");
        assert!(parse(&other).unwrap_err().detail.contains("another job"));
        let huge = format!("{PREFIX}:{}:0:{MAX_PORTS}", job_id());
        assert!(parse(&huge).is_err());
    }
}
