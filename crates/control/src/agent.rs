//! Messages between `mpiexec` and the node agent of another host, framed
//! as the rank messages are (`proto::encode`, `proto::Decoder`). The agent
//! is thin: it starts and signals processes on its host, reports how they
//! end, forwards their output, and says it is alive; every decision stays
//! with `mpiexec`. The ranks on that host reach `mpiexec` through it (the
//! control tree, `--relay`): each connects to the agent, which passes its
//! messages up (`Relayed`), merges the reports of a recovery's steps into
//! one per step (`Gathered`, see `fan`), and passes `mpiexec`'s messages
//! down, one copy to the agent for all its ranks (`Relay`). Without
//! `--relay` they talk to `mpiexec` directly over TCP.
//!
//! When hosts are many the agents form a tree (`tree`): an agent started
//! with `--children` listens for the agents below it (`Listening`), and
//! passes what they send up (`Via`, the message encoded inside: the types
//! are not recursive, so no message can nest deeper than one level) and
//! what goes to them down (`Via`, `Spread`). It merges their reports with
//! its own ranks', says when one of them connected (`Joined`) and when one
//! is lost (`Lost`).

use crate::fan::Gathered;
use crate::proto::{ToController, ToRank};
use crate::rankset::RankSet;
use serde::{Deserialize, Serialize};

/// How a process ended (as `mpistages_sys::process::Exit`).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Code(i32),
    Signal(i32),
}

/// What to start: the program, its arguments and environment (on top of
/// the agent's own), where, and on which CPU.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// mpiexec's name for the process (a rank's generation-unique id, or
    /// a spare's); the agent's reports carry it.
    pub id: u64,
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub wdir: Option<String>,
    /// The CPUs it may run on; empty: those the agent may.
    pub cpus: Vec<u32>,
    /// The process reads what mpiexec forwards of its own stdin (`Input`);
    /// every other process gets an empty stdin.
    pub stdin: bool,
    /// The job's rank it is (mpiexec's index, also for a spawned process):
    /// the relay expects its hello and its reports.
    pub rank: u32,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum ToAgent {
    Start(Start),
    /// Sends `signal` to the process (and its children) named `id`.
    Signal {
        id: u64,
        signal: i32,
    },
    /// The job is over: end every process (SIGTERM, then SIGKILL after
    /// `grace_ms`) and exit.
    Shutdown {
        grace_ms: u32,
    },
    /// mpiexec is alive (the agent ends its processes when mpiexec falls
    /// silent: a lost controller is the end of the job).
    Alive,
    /// Bytes of mpiexec's stdin for process `id` (started with `stdin`);
    /// empty: the end of the input (its stdin is closed).
    Input {
        id: u64,
        data: Vec<u8>,
    },
    /// `msg` to each of the agent's rank connections `conns` (numbers the
    /// agent gave them in `Relayed`).
    Relay {
        conns: RankSet,
        msg: ToRank,
    },
    /// mpiexec closed the rank connection `conn` (its process is ended or
    /// replaced, or it broke the protocol); the agent answers `Closed`.
    Close {
        conn: u32,
    },
    /// For the agent of `host`, below this one: `msg` (a `ToAgent`'s
    /// encoding, `proto::body`) passes down toward it.
    Via {
        host: String,
        msg: Vec<u8>,
    },
    /// `msg` to rank connections of several hosts of this agent's subtree
    /// (`conns` of each, this agent's own among them): one message goes
    /// down to each child, with the parts below it.
    Spread {
        parts: Vec<(String, RankSet)>,
        msg: ToRank,
    },
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum FromAgent {
    /// First message: the job key (from the agent's stdin), and the host
    /// as the agent names it.
    Hello {
        key: Vec<u8>,
        host: String,
    },
    Started {
        id: u64,
        pid: u32,
    },
    /// The process could not be started (exec failed, ...).
    NotStarted {
        id: u64,
        why: String,
    },
    Ended {
        id: u64,
        how: Ended,
    },
    /// A line (or a piece of one at most `MAX_LINE` long) of output.
    Output {
        id: u64,
        stderr: bool,
        line: Vec<u8>,
    },
    /// The agent is alive (sent every `HEARTBEAT_MS`).
    Alive,
    /// What the process on the agent's rank connection `conn` sent (the
    /// first message of a connection is its hello, or a spare's).
    Relayed {
        conn: u32,
        msg: ToController,
    },
    /// The reports of `ranks` (each said hello on a connection of this
    /// agent), merged.
    Gathered(Gathered),
    /// The hellos of the processes the agent started together, once each
    /// has said it (or ended), by connection.
    Hellos(Vec<(u32, ToController)>),
    /// The rank connection `conn` ended (after everything it sent).
    Closed {
        conn: u32,
    },
    /// From the agent of `host`, below this one: `msg` (a `FromAgent`'s
    /// encoding, never itself a `Via`).
    Via {
        host: String,
        msg: Vec<u8>,
    },
    /// The agents below this one (`--children`) connect to `addr`.
    Listening {
        addr: String,
    },
    /// The agent of `host`, a child of this one, connected (from `addr`:
    /// its ranks listen there) and gave the job key.
    Joined {
        host: String,
        addr: String,
    },
    /// The hellos of processes started together in this agent's branch:
    /// its own (as `Hellos`) and those of hosts below it, by host, sent
    /// once every one has said hello or ended.
    BranchHellos {
        own: Vec<(u32, ToController)>,
        below: Vec<(String, Vec<(u32, ToController)>)>,
    },
    /// The agent of `host`, below this one, is lost (and every agent below
    /// it with it).
    Lost {
        host: String,
        why: String,
    },
}

impl FromAgent {
    /// `msg` of the agent of `host`, wrapped to pass up (a `Via` already
    /// names its origin and passes as it is).
    pub fn via(host: &str, msg: &FromAgent) -> FromAgent {
        match msg {
            FromAgent::Via { .. } => msg.clone(),
            _ => FromAgent::Via {
                host: host.into(),
                msg: crate::proto::body(msg),
            },
        }
    }
}

/// How often both sides say they are alive.
pub const HEARTBEAT_MS: u64 = 250;

/// Longest piece of one output line in one message.
pub const MAX_LINE: usize = 64 << 10;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{encode, Decoder};

    #[test]
    fn messages_round_trip_and_garbage_is_an_error() {
        let start = ToAgent::Start(Start {
            id: 7,
            program: "./a".into(),
            args: vec!["x".into()],
            env: vec![("MPISTAGES_RANK".into(), "3".into())],
            wdir: Some("/tmp".into()),
            cpus: vec![1, 2],
            stdin: false,
            rank: 3,
        });
        let from = [
            FromAgent::Hello {
                key: b"k".to_vec(),
                host: "h1".into(),
            },
            FromAgent::Ended {
                id: 7,
                how: Ended::Signal(9),
            },
            FromAgent::Output {
                id: 7,
                stderr: true,
                line: b"hi\n".to_vec(),
            },
        ];
        let mut d = Decoder::default();
        d.push(&encode(&start));
        assert_eq!(d.next_message::<ToAgent>().unwrap(), Some(start));
        for m in from {
            let bytes = encode(&m);
            // In two pieces, as a stream delivers them.
            d.push(&bytes[..3]);
            assert_eq!(d.next_message::<FromAgent>().unwrap(), None);
            d.push(&bytes[3..]);
            assert_eq!(d.next_message::<FromAgent>().unwrap(), Some(m));
        }
        d.push(&[3, 0, 0, 0, 0xff, 0xff, 0xff]);
        assert!(d.next_message::<FromAgent>().is_err());
    }

    /// A message wrapped for the way up is wrapped once, whatever the
    /// depth it comes from, and unwraps to itself.
    #[test]
    fn via_wraps_once() {
        let m = FromAgent::Ended {
            id: 7,
            how: Ended::Code(0),
        };
        let once = FromAgent::via("h3", &m);
        assert_eq!(FromAgent::via("h1", &once), once);
        let FromAgent::Via { host, msg } = once else {
            panic!("not wrapped");
        };
        assert_eq!(host, "h3");
        assert_eq!(crate::proto::from_body::<FromAgent>(&msg).unwrap(), m);
        assert!(crate::proto::from_body::<FromAgent>(&msg[..1]).is_err());
    }
}
