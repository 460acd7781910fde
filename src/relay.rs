//! The agent's part of the control tree: the ranks of its host connect to
//! it (a Unix socket in a private directory) instead of to `mpiexec`, and
//! it passes their messages up on its one connection. The reports that
//! every rank makes at each step of a recovery (halted, ready, restored)
//! and at each checkpoint are merged on the way (`fan::Fan`): `mpiexec`
//! gets one report per host and step instead of one per rank. What `mpiexec` sends to many ranks
//! comes down once (`ToAgent::Relay`) and is copied to each here.
//!
//! The hellos of processes started together (the job's start, a
//! recovery's replacements) go up together too, once every process the
//! agent started has said hello or ended.
//!
//! Order: a rank's other messages never overtake its gathered reports or
//! held hellos (what is held goes up first), and a connection's end goes
//! up after everything it sent.

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

/// How long a step's gathering (or the held hellos) may go without a new
/// report before what it has goes up (`MPISTAGES_FAN_WINDOW_MS`). The last
/// rank of the host to report sends it at once; the window only bounds
/// the cost of a rank that never does (it ended). Ranks that report
/// slowly (64 of them on two cores halt over 100 ms) still go up as one.
pub const WINDOW: Duration = Duration::from_millis(100);

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
    /// Ranks started here that have not said hello yet, and the hellos
    /// held until none is left (or the window passes).
    awaiting: RankSet,
    hellos: Vec<(u32, ToController)>,
    /// Those of hosts below this one (the control tree), by host.
    hellos_below: Vec<(String, Vec<(u32, ToController)>)>,
    hellos_last: Option<Duration>,
    /// Each rank's connection that said hello last.
    current: HashMap<u32, u32>,
    /// The newest generation a notice going down named: a report of a
    /// newer one is not gathered (it could only be a rank's mistake, and
    /// would fence the host's true reports).
    generation: u64,
    window: Duration,
    epoch: Instant,
}

/// A rank's report that is merged with the others of its host (None:
/// a message that goes up as it is).
fn report(rank: u32, msg: &ToController) -> Option<Gathered> {
    let (kind, key, value) = match *msg {
        ToController::Halted { generation } => (Kind::Halted, generation as u64, None),
        ToController::Ready { generation, newest } => (Kind::Ready, generation as u64, newest),
        ToController::Restored { generation, epoch } => {
            (Kind::Restored, generation as u64, Some(epoch))
        }
        ToController::Checkpoint { epoch, durable } => (Kind::Checkpoint, epoch, durable),
        _ => return None,
    };
    Some(Gathered {
        kind,
        key,
        ranks: RankSet::one(rank),
        value: Common::All(value),
    })
}

/// What a gathering says for each of its ranks, as the rank said it
/// (`mpiexec` handles it rank by rank). Ready values that differ are the
/// same to `mpiexec` as no common value: the ranks agree among themselves.
pub fn per_rank(g: &Gathered) -> Option<ToController> {
    let value = match g.value {
        Common::All(v) => v,
        Common::Differ => None,
    };
    if g.kind == Kind::Checkpoint {
        return Some(ToController::Checkpoint {
            epoch: g.key,
            durable: value,
        });
    }
    let generation = u32::try_from(g.key).ok()?;
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
            awaiting: RankSet::new(),
            hellos: Vec::new(),
            hellos_below: Vec::new(),
            hellos_last: None,
            current: HashMap::new(),
            generation: 0,
            window,
            epoch: Instant::now(),
        })
    }

    /// The agent started a process of `rank`: it will say hello here, and
    /// report with the others of this host.
    pub fn started(&mut self, rank: u32) {
        self.fan.add_below(rank);
        self.awaiting.insert(rank);
    }

    /// A process of `rank` was started below this agent (the control
    /// tree): its hello and reports come from the child that leads to it.
    pub fn add_below(&mut self, rank: u32) {
        self.fan.add_below(rank);
        self.awaiting.insert(rank);
    }

    /// No process of `rank` runs below any more: it is not waited for.
    pub fn remove_below(&mut self, rank: u32, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        self.awaiting.remove(rank);
        let ups = self.fan.remove_below(rank);
        self.send_up(ups, up) && self.send_hellos(false, up)
    }

    /// Hellos of `host`, below this agent: held with this branch's.
    pub fn hellos_below(
        &mut self,
        host: String,
        hellos: Vec<(u32, ToController)>,
        up: &mut dyn FnMut(&FromAgent) -> bool,
    ) -> bool {
        for (_, m) in &hellos {
            if let ToController::Hello { rank, .. } = m {
                self.awaiting.remove(*rank);
            }
        }
        match self.hellos_below.iter_mut().find(|(h, _)| *h == host) {
            Some((_, held)) => held.extend(hellos),
            None => self.hellos_below.push((host, hellos)),
        }
        self.hellos_last = Some(self.now());
        self.send_hellos(false, up)
    }

    /// A child's merged reports, merged again with this host's.
    pub fn report_below(&mut self, g: Gathered, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        if g.kind == Kind::Checkpoint || g.key <= self.generation {
            let ups = self.fan.report(g, self.now());
            self.send_up(ups, up)
        } else {
            self.flush(up) && up(&FromAgent::Gathered(g))
        }
    }

    /// What is held goes up now: a message from below must not overtake
    /// it.
    pub fn flush_up(&mut self, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        self.flush(up)
    }

    /// The process of `rank` ended: no hello is awaited from it.
    pub fn ended(&mut self, rank: u32, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        self.awaiting.remove(rank);
        self.send_hellos(false, up)
    }

    /// The held hellos go up when no process started here is still to say
    /// hello, or `now` (window passed, or something must not overtake them).
    fn send_hellos(&mut self, now: bool, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        let none = self.hellos.is_empty() && self.hellos_below.is_empty();
        if none || !(now || self.awaiting.is_empty()) {
            return true;
        }
        self.hellos_last = None;
        let own = std::mem::take(&mut self.hellos);
        up(&match self.hellos_below.is_empty() {
            true => FromAgent::Hellos(own),
            false => FromAgent::BranchHellos {
                own,
                below: std::mem::take(&mut self.hellos_below),
            },
        })
    }

    /// What is held goes up (before a message that must not overtake it).
    fn flush(&mut self, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        let gathered = self.fan.flush();
        self.send_hellos(true, up) && self.send_up(gathered, up)
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
        let mut msgs = Vec::new();
        loop {
            match c.dec.next_message::<ToController>() {
                Ok(Some(msg)) => msgs.push(msg),
                Ok(None) => break,
                Err(e) => {
                    crate::say!("mpistages-agent: dropped a rank's control connection: {e}");
                    closed = true;
                    break;
                }
            }
        }
        let mut ok = true;
        for msg in msgs {
            ok &= self.take_message(id, msg, now, up);
        }
        if closed {
            ok &= self.closed(id, ep, up);
        }
        ok
    }

    /// One message of connection `id`.
    fn take_message(
        &mut self,
        id: u32,
        msg: ToController,
        now: Duration,
        up: &mut dyn FnMut(&FromAgent) -> bool,
    ) -> bool {
        let Some(c) = self.conns.get_mut(&id) else {
            return true;
        };
        match (&msg, c.rank) {
            // Its first hello: held with the others started with it.
            (&ToController::Hello { rank, .. }, None) => {
                c.rank = Some(rank);
                self.current.insert(rank, id);
                self.fan.add_below(rank);
                self.awaiting.remove(rank);
                self.hellos.push((id, msg));
                self.hellos_last = Some(now);
                self.send_hellos(false, up)
            }
            (_, Some(rank)) => match report(rank, &msg) {
                // A checkpoint's key is its epoch, the others' a generation.
                Some(g) if g.kind == Kind::Checkpoint || g.key <= self.generation => {
                    let ups = self.fan.report(g, now);
                    self.send_up(ups, up)
                }
                _ => self.pass(id, msg, up),
            },
            // A spare's first message, a second hello: mpiexec judges.
            _ => self.pass(id, msg, up),
        }
    }

    /// Connection `id` ended: what it sent went up; its end goes up after
    /// what is held. Its rank is no longer waited for here unless another
    /// process of it started here since.
    fn closed(&mut self, id: u32, ep: &Epoll, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        let rank = self.conns.get(&id).and_then(|c| c.rank);
        self.drop_conn(id, ep);
        let mut ok = self.flush(up);
        if let Some(r) = rank {
            if self.current.get(&r) == Some(&id) && !self.awaiting.contains(r) {
                self.current.remove(&r);
                let ups = self.fan.remove_below(r);
                ok &= self.send_up(ups, up);
            }
        }
        ok && up(&FromAgent::Closed { conn: id })
    }

    /// `msg` of connection `id` goes up as it is, after what is held.
    fn pass(&mut self, id: u32, msg: ToController, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        self.flush(up) && up(&FromAgent::Relayed { conn: id, msg })
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

    /// mpiexec closed connection `id` (its process is ended or replaced,
    /// or it broke the protocol): it is dropped as if it had ended.
    pub fn close(&mut self, id: u32, ep: &Epoll, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        self.conns.contains_key(&id) && self.closed(id, ep, up)
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
                self.generation = self.generation.max(*generation as u64);
                let failed: RankSet = failed.iter().copied().collect();
                self.fan.failure(*generation as u64, &failed)
            }
            ToRank::Welcome { generation, .. } => {
                self.generation = self.generation.max(*generation as u64);
                Vec::new()
            }
            ToRank::Resume { generation, .. } => {
                self.generation = self.generation.max(*generation as u64);
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

    /// Gatherings and hellos whose window passed go up.
    pub fn due(&mut self, up: &mut dyn FnMut(&FromAgent) -> bool) -> bool {
        let now = self.now();
        let ups = self.fan.due(now);
        let late = self.hellos_last.is_some_and(|t| now >= t + self.window);
        self.send_up(ups, up) && self.send_hellos(late, up)
    }

    /// How long until the next gathering or held hellos fall due.
    pub fn next_due(&self) -> Option<Duration> {
        let now = self.now();
        let hellos = self.hellos_last.map(|t| t + self.window);
        [self.fan.deadline(), hellos]
            .into_iter()
            .flatten()
            .min()
            .map(|t| t.saturating_sub(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    struct Host {
        ep: Epoll,
        relay: Relay,
        up: Vec<FromAgent>,
    }

    impl Host {
        fn new() -> Host {
            let ep = Epoll::new().unwrap();
            let relay = Relay::new(&ep).unwrap();
            Host {
                ep,
                relay,
                up: Vec::new(),
            }
        }

        /// A process of `rank` connects and says hello (the agent started
        /// it); returns its socket and connection number.
        fn connect(&mut self, rank: u32) -> (UnixStream, u32) {
            let s = UnixStream::connect(self.relay.control()).unwrap();
            self.relay.accept(&self.ep);
            let id = self.relay.next - 1;
            let hello = ToController::Hello {
                key: b"k".to_vec(),
                rank,
                generation: 0,
                addr: format!("a{rank}"),
            };
            (&s).write_all(&proto::encode(&hello)).unwrap();
            (s, id)
        }

        fn send(&mut self, s: &UnixStream, id: u32, msg: &ToController) {
            let mut w = s;
            w.write_all(&proto::encode(msg)).unwrap();
            self.read(id);
        }

        fn read(&mut self, id: u32) {
            let up = &mut self.up;
            assert!(self.relay.on_conn(id, &self.ep, &mut |m| {
                up.push(m.clone());
                true
            }));
        }

        fn down(&mut self, msg: ToRank) {
            let up = &mut self.up;
            self.relay.down(&RankSet::new(), &msg, &mut |m| {
                up.push(m.clone());
                true
            });
        }

        fn took(&mut self) -> Vec<String> {
            std::mem::take(&mut self.up)
                .iter()
                .map(|m| match m {
                    FromAgent::Hellos(h) => format!("hellos {}", h.len()),
                    FromAgent::Gathered(g) => {
                        format!("{} {:?}", g.kind_name(), g.ranks.iter().collect::<Vec<_>>())
                    }
                    FromAgent::Relayed { conn, msg } => format!("{} from {conn}", msg.kind()),
                    FromAgent::Closed { conn } => format!("closed {conn}"),
                    FromAgent::BranchHellos { own, below } => {
                        let below: Vec<String> = below
                            .iter()
                            .map(|(h, x)| format!("{h} {}", x.len()))
                            .collect();
                        format!("hellos {} and {}", own.len(), below.join(", "))
                    }
                    other => format!("{other:?}"),
                })
                .collect()
        }
    }

    #[test]
    fn hellos_go_up_together_and_steps_once_per_host() {
        let mut h = Host::new();
        h.relay.started(0);
        h.relay.started(1);
        let (s0, c0) = h.connect(0);
        h.read(c0);
        assert!(h.took().is_empty(), "rank 1 has not said hello yet");
        let (s1, c1) = h.connect(1);
        h.read(c1);
        assert_eq!(h.took(), ["hellos 2"]);
        // A report of a generation no notice named goes up as it is.
        h.send(&s0, c0, &ToController::Halted { generation: 3 });
        assert_eq!(h.took(), [format!("halted from {c0}")]);
        h.down(ToRank::Failure {
            generation: 3,
            epoch: 1,
            failed: vec![7],
        });
        h.send(&s0, c0, &ToController::Halted { generation: 3 });
        assert!(h.took().is_empty(), "rank 1 has not halted");
        h.send(&s1, c1, &ToController::Halted { generation: 3 });
        assert_eq!(h.took(), ["halted [0, 1]"]);
        // Another message of a rank does not overtake what is gathered.
        let ready = ToController::Ready {
            generation: 3,
            newest: Some(1),
        };
        h.send(&s0, c0, &ready);
        h.send(&s0, c0, &ToController::Finalizing);
        assert_eq!(
            h.took(),
            ["ready [0]".to_string(), format!("finalizing from {c0}")]
        );
        // Rank 1's process ends: nobody else of this host is to be ready.
        drop(s1);
        h.read(c1);
        assert_eq!(h.took(), [format!("closed {c1}")]);
        h.send(&s0, c0, &ready);
        assert_eq!(h.took(), ["ready [0]"], "no longer waits for rank 1");
        // A process that ends before its hello is no longer awaited.
        h.relay.started(2);
        h.relay.started(3);
        let (_s2, c2) = h.connect(2);
        h.read(c2);
        assert!(h.took().is_empty());
        let up = &mut h.up;
        h.relay.ended(3, &mut |m| {
            up.push(m.clone());
            true
        });
        assert_eq!(h.took(), ["hellos 1"]);
    }

    /// An agent with agents below it: their merged reports merge again
    /// with its own ranks', and their hellos go up with its own once every
    /// process started in the branch said hello or ended.
    #[test]
    fn a_branch_reports_and_says_hello_as_one() {
        let mut h = Host::new();
        h.relay.started(0);
        h.relay.add_below(5);
        h.relay.add_below(6);
        let (s0, c0) = h.connect(0);
        h.read(c0);
        let hello = |rank| ToController::Hello {
            key: b"k".to_vec(),
            rank,
            generation: 0,
            addr: String::new(),
        };
        let below = |h: &mut Host, host: &str, rank| {
            let up = &mut h.up;
            let hellos = vec![(0, hello(rank))];
            h.relay.hellos_below(host.into(), hellos, &mut |m| {
                up.push(m.clone());
                true
            });
        };
        below(&mut h, "c1", 5);
        assert!(h.took().is_empty(), "rank 6 has not said hello yet");
        below(&mut h, "c2", 6);
        assert_eq!(h.took(), ["hellos 1 and c1 1, c2 1"]);
        h.down(ToRank::Failure {
            generation: 1,
            epoch: 1,
            failed: vec![9],
        });
        let halted = |ranks: &[u32]| Gathered {
            kind: Kind::Halted,
            key: 1,
            ranks: ranks.iter().copied().collect(),
            value: Common::All(None),
        };
        let up = &mut h.up;
        let mut report = |r: &mut Relay, g| {
            assert!(r.report_below(g, &mut |m| {
                up.push(m.clone());
                true
            }))
        };
        report(&mut h.relay, halted(&[5]));
        h.send(&s0, c0, &ToController::Halted { generation: 1 });
        assert!(h.took().is_empty(), "rank 6 has not halted");
        // Rank 6's process ended below: not waited for.
        let up = &mut h.up;
        h.relay.remove_below(6, &mut |m| {
            up.push(m.clone());
            true
        });
        assert_eq!(h.took(), ["halted [0, 5]"]);
    }

    #[test]
    fn checkpoints_go_up_once_per_host_and_a_failure_drops_them() {
        let mut h = Host::new();
        h.relay.started(0);
        h.relay.started(1);
        let (s0, c0) = h.connect(0);
        let (s1, c1) = h.connect(1);
        h.read(c0);
        h.read(c1);
        assert_eq!(h.took(), ["hellos 2"]);
        let done = |epoch| ToController::Checkpoint {
            epoch,
            durable: None,
        };
        h.send(&s0, c0, &done(1));
        h.send(&s1, c1, &done(1));
        assert_eq!(h.took(), ["checkpoint [0, 1]"]);
        h.send(&s0, c0, &done(2));
        assert!(h.took().is_empty());
        // Rank 0 rolls back with the others: its epoch 2 is done again.
        h.down(ToRank::Failure {
            generation: 1,
            epoch: 1,
            failed: vec![5],
        });
        h.send(&s1, c1, &done(2));
        assert!(h.took().is_empty(), "rank 0's epoch 2 was dropped");
        h.send(&s0, c0, &done(2));
        assert_eq!(h.took(), ["checkpoint [0, 1]"]);
    }
}
