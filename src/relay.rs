//! The agent's part of the control tree: the ranks of its host connect to
//! it (a Unix socket in a private directory) instead of to `mpiexec`, and
//! it passes their messages up on its one connection. The reports that
//! every rank makes at each step of a recovery (halted, ready, restored)
//! are merged on the way (`fan::Fan`): `mpiexec` gets one report per host
//! and step instead of one per rank. What `mpiexec` sends to many ranks
//! comes down once (`ToAgent::Relay`) and is copied to each here.
//!
//! Order: a rank's other messages never overtake its gathered reports
//! (what is gathered goes up first), and a connection's end goes up after
//! everything it sent.

use crate::leftovers::ControlDir;
use mpistages_control::agent::FromAgent;
use mpistages_control::fan::{Common, Fan, Gathered, Kind};
use mpistages_control::proto::{self, Decoder, ToController, ToRank};
use mpistages_control::rankset::RankSet;
use mpistages_sys::epoll::{self, Epoll};
use std::collections::HashMap;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// Epoll token of the listener; rank connections are `TOKEN_CONN + id`.
pub const TOKEN_LISTENER: u64 = 4;
pub const TOKEN_CONN: u64 = 1 << 32;

/// How long a step's gathering waits for ranks that have not reported
/// before what it has goes up (`MPISTAGES_FAN_WINDOW_MS`). Every rank of
/// the host reporting sends it at once; the window only bounds the cost
/// of a rank that never does (it ended, or it is slow).
const WINDOW: Duration = Duration::from_millis(20);

struct RankConn {
    stream: UnixStream,
    dec: Decoder,
    /// The rank it said hello as.
    rank: Option<u32>,
}

pub struct Relay {
    dir: ControlDir,
    listener: UnixListener,
    conns: HashMap<u32, RankConn>,
    next: u32,
    fan: Fan,
    epoch: Instant,
}

/// Where a message from a rank goes.
enum Up {
    Gather(Gathered),
    Pass(ToController),
}

/// A rank's report that is merged with the others of its host.
fn gathered(rank: u32, msg: ToController) -> Up {
    let (kind, key, value) = match msg {
        ToController::Halted { generation } => (Kind::Halted, generation, None),
        ToController::Ready { generation, newest } => (Kind::Ready, generation, newest),
        ToController::Restored { generation, epoch } => (Kind::Restored, generation, Some(epoch)),
        other => return Up::Pass(other),
    };
    Up::Gather(Gathered {
        kind,
        key: key as u64,
        ranks: RankSet::one(rank),
        value: Common::All(value),
    })
}

/// What a gathering says for each of its ranks, as the rank said it
/// (`mpiexec` handles it rank by rank). Ready values that differ are the
/// same to `mpiexec` as no common value: the ranks agree among themselves.
pub fn per_rank(g: &Gathered) -> Option<ToController> {
    let generation = u32::try_from(g.key).ok()?;
    let value = match g.value {
        Common::All(v) => v,
        Common::Differ => None,
    };
    Some(match g.kind {
        Kind::Halted => ToController::Halted { generation },
        Kind::Ready => ToController::Ready {
            generation,
            newest: value,
        },
        Kind::Restored => ToController::Restored {
            generation,
            epoch: value?,
        },
        _ => return None,
    })
}

impl Relay {
    pub fn new(ep: &Epoll) -> std::io::Result<Relay> {
        let dir = ControlDir::create()?;
        let listener = UnixListener::bind(dir.path().join("control"))?;
        listener.set_nonblocking(true)?;
        ep.add(listener.as_raw_fd(), epoll::READABLE, TOKEN_LISTENER)?;
        let window = std::env::var("MPISTAGES_FAN_WINDOW_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(WINDOW, Duration::from_millis);
        Ok(Relay {
            dir,
            listener,
            conns: HashMap::new(),
            next: 0,
            fan: Fan::new(RankSet::new(), window),
            epoch: Instant::now(),
        })
    }

    /// The control address the agent's ranks get (`MPISTAGES_CONTROL`).
    pub fn control(&self) -> String {
        self.dir
            .path()
            .join("control")
            .to_string_lossy()
            .into_owned()
    }

    pub fn accept(&mut self, ep: &Epoll) {
        while let Ok((stream, _)) = self.listener.accept() {
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let id = self.next;
            self.next = self.next.wrapping_add(1);
            if ep
                .add(stream.as_raw_fd(), epoll::READABLE, TOKEN_CONN + id as u64)
                .is_ok()
            {
                let dec = Decoder::default();
                self.conns.insert(
                    id,
                    RankConn {
                        stream,
                        dec,
                        rank: None,
                    },
                );
            }
        }
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// Reads what connection `id` sent and passes it up; false when the
    /// link to mpiexec failed.
    pub fn on_conn(&mut self, id: u32, ep: &Epoll, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        let now = self.now();
        let Some(c) = self.conns.get_mut(&id) else {
            return true;
        };
        let mut closed = c.dec.read_available(&mut c.stream);
        let mut out = Vec::new();
        loop {
            match c.dec.next_message::<ToController>() {
                Ok(Some(msg)) => {
                    if let ToController::Hello { rank, .. } = &msg {
                        c.rank = Some(*rank);
                        self.fan.add_below(*rank);
                    }
                    match (c.rank, msg) {
                        (Some(r), msg) => out.push((r, msg)),
                        // A spare's first message, or garbage: mpiexec judges.
                        (None, msg) => out.push((u32::MAX, msg)),
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    eprintln!("mpistages-agent: dropped a rank's control connection: {e}");
                    closed = true;
                    break;
                }
            }
        }
        let mut ok = true;
        for (rank, msg) in out {
            let gathered = match rank {
                u32::MAX => Up::Pass(msg),
                r => gathered(r, msg),
            };
            ok &= match gathered {
                Up::Gather(g) => {
                    let ups = self.fan.report(g, now);
                    self.send_up(ups, up)
                }
                Up::Pass(msg) => {
                    let flushed = self.fan.flush();
                    self.send_up(flushed, up) && up(&FromAgent::Relayed { conn: id, msg })
                }
            };
        }
        if closed {
            self.drop_conn(id, ep);
            let flushed = self.fan.flush();
            ok &= self.send_up(flushed, up) && up(&FromAgent::Closed { conn: id });
        }
        ok
    }

    fn send_up(&self, gathered: Vec<Gathered>, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        gathered.into_iter().all(|g| up(&FromAgent::Gathered(g)))
    }

    /// Reads every connection (before a process's end is reported: what
    /// it said goes first).
    pub fn drain(&mut self, ep: &Epoll, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        let ids: Vec<u32> = self.conns.keys().copied().collect();
        ids.into_iter().all(|id| self.on_conn(id, ep, up))
    }

    fn drop_conn(&mut self, id: u32, ep: &Epoll) {
        if let Some(c) = self.conns.remove(&id) {
            let _ = ep.delete(c.stream.as_raw_fd());
        }
    }

    /// mpiexec dropped connection `id`.
    pub fn close(&mut self, id: u32, ep: &Epoll) {
        self.drop_conn(id, ep);
    }

    /// `msg` from mpiexec to the connections `conns`. A failure notice or
    /// a resume passing down tells the fan what the next reports are.
    pub fn down(
        &mut self,
        conns: &RankSet,
        msg: &ToRank,
        up: &mut dyn FnMut(&FromAgent) -> bool,
    ) -> bool {
        let ups = match msg {
            ToRank::Failure {
                generation, failed, ..
            } => {
                let failed: RankSet = failed.iter().copied().collect();
                self.fan.failure(*generation as u64, &failed)
            }
            ToRank::Resume { .. } => {
                self.fan.resumed();
                Vec::new()
            }
            _ => Vec::new(),
        };
        let bytes = proto::encode(msg);
        for id in conns.iter() {
            if let Some(c) = self.conns.get_mut(&id) {
                // Small and rare: a blocking write is brief (as mpiexec's
                // own to its ranks); a rank that is gone is skipped.
                let _ = c.stream.set_nonblocking(false);
                let _ = mpistages_sys::socket::NoSignal::new(&c.stream).write_all(&bytes);
                let _ = c.stream.set_nonblocking(true);
            }
        }
        self.send_up(ups, up)
    }

    /// Gatherings whose window passed go up.
    pub fn due(&mut self, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        let now = self.now();
        let ups = self.fan.due(now);
        self.send_up(ups, up)
    }

    /// How long until the next gathering falls due.
    pub fn next_due(&self) -> Option<Duration> {
        let now = self.now();
        self.fan.deadline().map(|t| t.saturating_sub(now))
    }
}
