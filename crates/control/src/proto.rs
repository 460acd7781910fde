//! Control messages between ranks and `mpiexec`: a u32 little-endian length,
//! then a postcard-encoded message. Decoding is bounded and never panics on
//! malformed bytes.

use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// No control message is larger than this.
pub const MAX_MESSAGE: usize = 1 << 20;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum ToController {
    /// First message on a connection: who this is, and its transport address.
    Hello {
        key: Vec<u8>,
        rank: u32,
        generation: u32,
        addr: String,
    },
    /// The rank entered `MPI_Finalize`: its exit is now expected.
    Finalizing,
    /// `MPI_Abort` was called.
    Abort { code: i32, message: String },
    /// The library ends the job: an error under a fatal error handler, or
    /// a recovery this rank cannot take part in. `message` explains it.
    Fatal { code: i32, message: String },
    /// `MPIX_Checkpoint_write` made this epoch complete on the first level.
    /// `durable`: the newest epoch this rank's background flush has made
    /// durable on the pfs level so far (none without one).
    Checkpoint { epoch: u64, durable: Option<u64> },
    /// The rank saw the failure notice of `generation` and stopped (for the
    /// propagation timing).
    Halted { generation: u32 },
    /// The rank is cleaned up (a live rank in `MPIX_Checkpoint_read`) or
    /// restored (a replacement in `MPI_Init`) at `generation`, and waits.
    /// `newest`: the newest epoch (at most the one to roll back to) of
    /// which it holds a valid copy on a level of its own (0: none), or
    /// `None` when the ranks must agree among themselves (partner level).
    Ready {
        generation: u32,
        newest: Option<u64>,
    },
    /// The rank restored `epoch` (its data is the application's to load
    /// now) after the resume of `generation`.
    Restored { generation: u32, epoch: u64 },
    /// The connection of `rank` sent bytes that break the protocol: that
    /// rank must be ended as failed (it cannot be talked to any more).
    PeerBroken { rank: u32, reason: String },
    /// Fault injection: the rank is about to SIGKILL itself.
    Injecting { spec: usize },
    /// First message of a spare process: it waits for an `Assign`.
    Spare { key: Vec<u8>, pid: u32 },
    /// ULFM (`MPIX_Comm_revoke`): tell the other `members` (world ranks)
    /// that the communicator of `context` is revoked.
    Revoke { context: u32, members: Vec<u32> },
    /// ULFM: this rank's contribution to agreement `seq` on the
    /// communicator of `context` among `members` (world ranks): its
    /// `flag`, the failures it acknowledged there, and its proposal for a
    /// new context id (for a shrink).
    Agree {
        context: u32,
        seq: u32,
        members: Vec<u32>,
        flag: u32,
        acked: Vec<u32>,
        proposal: u32,
    },
    /// `MPI_Comm_spawn` at its root.
    Spawn(SpawnArgs),
    /// `MPI_Publish_name`, `MPI_Unpublish_name` or `MPI_Lookup_name`: the
    /// job's name service is mpiexec's; it answers with `Named`.
    Name(NameRequest),
    /// `MPI_Finalize`'s barrier among the ranks of this process's world
    /// (the job's first ranks, or those of one spawn), carried by mpiexec
    /// rather than by the ranks' own connections (none is made at the end
    /// of a job): `durable` is the newest epoch this rank's background
    /// flushes made durable (0: none). Answered by `Finalized` once every
    /// rank of the world sent it.
    FinalizeBarrier { durable: u64 },
}

/// A request to the job's name service (one per process at a time).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum NameRequest {
    Publish { service: String, port: String },
    Unpublish { service: String, port: String },
    Lookup { service: String },
}

/// What `MPI_Comm_spawn` (one command) or `MPI_Comm_spawn_multiple` asks
/// of mpiexec: start each command's processes, in order, in directory
/// `wdir`, children of `parents` through an inter-communicator of context
/// `context`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SpawnArgs {
    pub commands: Vec<SpawnCommand>,
    pub wdir: String,
    pub parents: Vec<u32>,
    pub context: u32,
}

/// `count` processes of `program` with `args`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SpawnCommand {
    pub program: String,
    pub args: Vec<String>,
    pub count: u32,
}

impl ToController {
    /// The message's name, for counts and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            ToController::Hello { .. } => "hello",
            ToController::Finalizing => "finalizing",
            ToController::Abort { .. } => "abort",
            ToController::Fatal { .. } => "fatal",
            ToController::Checkpoint { .. } => "checkpoint",
            ToController::Halted { .. } => "halted",
            ToController::Ready { .. } => "ready",
            ToController::Restored { .. } => "restored",
            ToController::PeerBroken { .. } => "peer-broken",
            ToController::Injecting { .. } => "injecting",
            ToController::Spare { .. } => "spare",
            ToController::Revoke { .. } => "revoke",
            ToController::Agree { .. } => "agree",
            ToController::Spawn(_) => "spawn",
            ToController::Name(_) => "name",
            ToController::FinalizeBarrier { .. } => "finalize-barrier",
        }
    }
}

impl ToRank {
    /// The message's name, for counts and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            ToRank::Welcome { .. } => "welcome",
            ToRank::Failure { .. } => "failure",
            ToRank::Resume { .. } => "resume",
            ToRank::Committed { .. } => "committed",
            ToRank::Assign { .. } => "assign",
            ToRank::ProcFailed { .. } => "proc-failed",
            ToRank::Revoked { .. } => "revoked",
            ToRank::Agreed { .. } => "agreed",
            ToRank::Spawned { .. } => "spawned",
            ToRank::Named { .. } => "named",
            ToRank::Finalized { .. } => "finalized",
        }
    }
}

impl SpawnArgs {
    /// How many processes in all (saturating: a bound is checked after).
    pub fn total(&self) -> u32 {
        self.commands
            .iter()
            .fold(0u32, |n, c| n.saturating_add(c.count))
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum ToRank {
    /// Every rank has said hello: the address of each rank, by rank. A
    /// replacement also learns the generation it belongs to, the epoch to
    /// restore, and which ranks are new with it (it connects to every rank
    /// except newer ones above it, which connect to it).
    /// `born`: the generation each rank's process joined at (what its
    /// handshakes announce; older processes of that rank are dead).
    /// Addresses: each host's IP once (`hosts`), and per rank the index of
    /// its host there and its port (`NO_ADDRESS`: the process has ended) —
    /// 4-5 bytes a rank instead of its address as text (a welcome goes to
    /// every rank: 30 MB in all at 1024 ranks, O(ranks²)).
    Welcome {
        hosts: Vec<String>,
        addrs: Vec<(u32, u16)>,
        born: Vec<u32>,
        generation: u32,
        epoch: u64,
        fresh: Vec<u32>,
    },
    /// Ranks failed (those whose failure opened `generation`): stop, and
    /// roll back to `epoch` at `generation`.
    Failure {
        generation: u32,
        epoch: u64,
        failed: Vec<u32>,
    },
    /// Every rank is ready at `generation`: go on. `agreed`: the epoch
    /// every rank reported holding as its newest valid copy, so no further
    /// agreement is needed; `None` when the ranks must agree among
    /// themselves (a copy is missing, invalid or held by a partner).
    /// `joined`: the ranks with a new process since the last resume, the
    /// generation it joined at and its address (a connection to it is
    /// made at the first message).
    Resume {
        generation: u32,
        agreed: Option<u64>,
        joined: Vec<(u32, u32, String)>,
    },
    /// Every rank has completed `epoch`, and (`durable`) every rank's copy
    /// of that epoch is on its pfs level: older ones may be removed there.
    Committed { epoch: u64, durable: Option<u64> },
    /// To a spare: become the replacement of `rank` at `generation`,
    /// restoring `epoch`, with these fault injections (`inject::ENV`
    /// encoding). It goes on with a `Hello` on the same connection.
    Assign {
        rank: u32,
        generation: u32,
        epoch: u64,
        inject: String,
    },
    /// ULFM: these ranks died (in the order mpiexec learned it; every
    /// rank hears of every death in the same order). The job goes on.
    ProcFailed { ranks: Vec<u32> },
    /// ULFM: the communicator of `context` was revoked by a member.
    Revoked { context: u32 },
    /// ULFM: the answer to agreement `seq` on the communicator of
    /// `context`, the same for every member (see the controller's
    /// `agreement` module): the AND of the flags, the members that died
    /// without contributing, whether one of those was not acknowledged
    /// by every contributor, and the largest context proposed.
    Agreed {
        context: u32,
        seq: u32,
        flag: u32,
        failed: Vec<u32>,
        unacked: bool,
        proposal: u32,
    },
    /// The answer to `Spawn`, once every child is in `MPI_Init`: their
    /// process ids are `first..first + count`; `error` says why none were
    /// started (empty when they were).
    Spawned {
        first: u32,
        count: u32,
        error: String,
    },
    /// The answer to `Name`: the port (of a lookup; empty otherwise), or
    /// why the request was refused (empty when it was done).
    Named { port: String, error: String },
    /// Every rank of this process's world is in `MPI_Finalize`'s barrier;
    /// `durable`: the least of their durable epochs (the newest every rank
    /// has on its pfs level; 0: none).
    Finalized { durable: u64 },
}

/// A `Welcome` host index for a process that has no address (it ended).
pub const NO_ADDRESS: u32 = u32::MAX;

/// Each rank's address from a `Welcome`'s table (`None`: it ended), or
/// why the table is malformed.
pub fn welcome_addresses(
    hosts: &[String],
    addrs: &[(u32, u16)],
) -> Result<Vec<Option<std::net::SocketAddr>>, String> {
    let ips = hosts
        .iter()
        .map(|h| {
            h.parse::<std::net::IpAddr>()
                .map_err(|_| format!("bad host address '{h}'"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    addrs
        .iter()
        .enumerate()
        .map(|(r, &(h, port))| match h {
            NO_ADDRESS => Ok(None),
            h => ips
                .get(h as usize)
                .map(|&ip| Some(std::net::SocketAddr::new(ip, port)))
                .ok_or_else(|| format!("rank {r}: host {h} of {}", ips.len())),
        })
        .collect()
}

pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    frame(&body(msg))
}

/// `msg`'s encoding without the length (a message carried in another).
pub fn body<T: Serialize>(msg: &T) -> Vec<u8> {
    postcard::to_stdvec(msg).expect("control messages always serialize")
}

/// The message `body` encodes (malformed bytes are an error).
pub fn from_body<T: for<'de> Deserialize<'de>>(body: &[u8]) -> io::Result<T> {
    postcard::from_bytes(body).map_err(|e| invalid(format!("malformed control message: {e}")))
}

/// A framed message of `body` (as `encode` makes it).
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    out
}

pub fn send<T: Serialize>(w: &mut impl Write, msg: &T) -> io::Result<()> {
    w.write_all(&encode(msg))
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// Blocking read of one message.
pub fn recv<T: for<'de> Deserialize<'de>>(r: &mut impl Read) -> io::Result<T> {
    recv_within(r, MAX_MESSAGE)
}

/// The largest welcome to a job of `size` ranks: every rank's address
/// (an IPv6 one and its port at most 48 bytes, with its generation), past
/// `MAX_MESSAGE` from about 20,000 ranks on.
pub fn welcome_limit(size: usize) -> usize {
    MAX_MESSAGE.max(size.saturating_mul(64).saturating_add(4096))
}

/// Blocking read of one message of at most `limit` bytes.
pub fn recv_within<T: for<'de> Deserialize<'de>>(r: &mut impl Read, limit: usize) -> io::Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > limit {
        return Err(invalid(format!(
            "control message of {len} bytes is too large"
        )));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    postcard::from_bytes(&body).map_err(|e| invalid(format!("malformed control message: {e}")))
}

/// No message between mpiexec and an agent is larger than this: one
/// carries a rank's message (at most `MAX_MESSAGE`) and its routing, or a
/// host's hellos together.
pub const MAX_AGENT_MESSAGE: usize = 16 << 20;

/// Incremental decoder for a non-blocking stream.
pub struct Decoder {
    buf: Vec<u8>,
    limit: usize,
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder {
            buf: Vec::new(),
            limit: MAX_MESSAGE,
        }
    }
}

impl Decoder {
    /// A decoder of the link between mpiexec and an agent.
    pub fn for_agent_link() -> Decoder {
        Decoder {
            buf: Vec::new(),
            limit: MAX_AGENT_MESSAGE,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Takes all a non-blocking `stream` has now; true when the connection
    /// ended or failed.
    pub fn read_available(&mut self, stream: &mut impl Read) -> bool {
        let mut buf = [0u8; 16 << 10];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(n) => self.push(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
    }

    /// The next complete message, `Ok(None)` if more bytes are needed.
    pub fn next_message<T: for<'de> Deserialize<'de>>(&mut self) -> io::Result<Option<T>> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len > self.limit {
            return Err(invalid(format!(
                "control message of {len} bytes is too large"
            )));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let msg = postcard::from_bytes(&self.buf[4..4 + len])
            .map_err(|e| invalid(format!("malformed control message: {e}")));
        self.buf.drain(..4 + len);
        msg.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_in_pieces() {
        let m = ToController::Hello {
            key: vec![1, 2, 3],
            rank: 4,
            generation: 0,
            addr: "127.0.0.1:5".into(),
        };
        let bytes = encode(&m);
        let mut d = Decoder::default();
        for b in &bytes[..bytes.len() - 1] {
            d.push(&[*b]);
            assert_eq!(d.next_message::<ToController>().unwrap(), None);
        }
        d.push(&bytes[bytes.len() - 1..]);
        assert_eq!(d.next_message::<ToController>().unwrap(), Some(m));
    }

    /// The welcome of a job of 65,536 ranks is over a megabyte: a rank
    /// takes it (bounded by the job's size), and the worst addresses fit.
    #[test]
    fn a_large_jobs_welcome_is_taken() {
        let n = 65_536;
        // The worst case: every rank on a host of its own, IPv6.
        let v6 = |i: usize| format!("ffff:ffff:ffff:ffff:ffff:ffff:ffff:{i:x}");
        let w = ToRank::Welcome {
            hosts: (0..n).map(v6).collect(),
            addrs: (0..n).map(|i| (i as u32, 65535)).collect(),
            born: vec![u32::MAX; n],
            generation: 1,
            epoch: 2,
            fresh: vec![],
        };
        let bytes = encode(&w);
        assert!(bytes.len() > MAX_MESSAGE);
        assert!(recv::<ToRank>(&mut &bytes[..]).is_err());
        let got: ToRank = recv_within(&mut &bytes[..], welcome_limit(n)).unwrap();
        assert_eq!(got, w);
    }

    #[test]
    fn welcome_tables_give_addresses_and_refuse_bad_ones() {
        let hosts = vec!["198.18.0.2".to_string(), "::1".to_string()];
        let got = welcome_addresses(&hosts, &[(1, 7), (NO_ADDRESS, 0), (0, 80)]).unwrap();
        assert_eq!(got[0], Some("[::1]:7".parse().unwrap()));
        assert_eq!(got[1], None);
        assert_eq!(got[2], Some("198.18.0.2:80".parse().unwrap()));
        assert!(welcome_addresses(&hosts, &[(2, 7)]).is_err());
        assert!(welcome_addresses(&["x".to_string()], &[]).is_err());
    }

    /// One of each message a rank sends, for mutation.
    fn every_message() -> Vec<ToController> {
        vec![
            ToController::Hello {
                key: vec![7; 32],
                rank: 3,
                generation: 2,
                addr: "127.0.0.1:40000".into(),
            },
            ToController::Finalizing,
            ToController::Abort {
                code: 5,
                message: "bye".into(),
            },
            ToController::Fatal {
                code: 101,
                message: "why".into(),
            },
            ToController::Checkpoint {
                epoch: 9,
                durable: Some(8),
            },
            ToController::Halted { generation: 1 },
            ToController::Ready {
                generation: 1,
                newest: Some(4),
            },
            ToController::Restored {
                generation: 1,
                epoch: 4,
            },
            ToController::PeerBroken {
                rank: 2,
                reason: "x".into(),
            },
            ToController::Injecting { spec: 0 },
            ToController::Spare {
                key: vec![1; 32],
                pid: 77,
            },
            ToController::Revoke {
                context: 8,
                members: vec![0, 1, 2],
            },
            ToController::Agree {
                context: 8,
                seq: 3,
                members: vec![0, 1, 2],
                flag: 1,
                acked: vec![2],
                proposal: 12,
            },
            ToController::Spawn(SpawnArgs {
                commands: vec![
                    SpawnCommand {
                        program: "./a.out".into(),
                        args: vec!["-x".into()],
                        count: 2,
                    },
                    SpawnCommand {
                        program: "./b.out".into(),
                        args: vec![],
                        count: 1,
                    },
                ],
                wdir: "/tmp".into(),
                parents: vec![0, 1],
                context: 14,
            }),
            ToController::Name(NameRequest::Publish {
                service: "ocean".into(),
                port: "mpistages-port:j:0:1".into(),
            }),
            ToController::Name(NameRequest::Lookup {
                service: "ocean".into(),
            }),
            ToController::FinalizeBarrier { durable: 3 },
        ]
    }

    proptest! {
        #[test]
        fn garbage_is_an_error_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut d = Decoder::default();
            d.push(&bytes);
            let _ = d.next_message::<ToController>();
            let _ = recv::<ToRank>(&mut &bytes[..]);
        }

        /// Valid messages with bytes changed, cut or appended reach deeper
        /// into the decoder than random bytes: still no panic, and a
        /// message that decodes re-encodes to a message of its own.
        #[test]
        fn mutated_messages_decode_or_fail(
            which in 0usize..17,
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
            cut in any::<usize>(),
            tail in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            let mut b = encode(&every_message()[which]);
            for (at, x) in flips {
                let i = at % b.len();
                b[i] ^= x;
            }
            b.truncate(cut % (b.len() + 1));
            b.extend_from_slice(&tail);
            let mut d = Decoder::default();
            d.push(&b);
            while let Ok(Some(m)) = d.next_message::<ToController>() {
                let again = encode(&m);
                prop_assert!(again.len() >= 4);
            }
            let _ = recv::<ToRank>(&mut &b[..]);
        }
    }
}
