//! The control plane of one recovery as a discrete-event simulation:
//! `mpiexec`'s real recovery state machine (`controller::recoveries`), the
//! agents' real fan-in (`mpistages_control::fan`) over the real tree shape
//! (`mpistages_control::tree`), and ranks that react to notices after the
//! times `Costs` gives. Every node handles one message at a time (a cost
//! to receive, a cost per message it sends); the ranks of a host share its
//! cores. Flat (`radix` 0) is today's runtime: every rank talks to
//! `mpiexec` itself; with a radix, ranks talk to their host's agent and
//! reports and notices go through the tree.

use crate::controller::recoveries::{Decision, Facts, Recoveries};
use crate::controller::traffic::Traffic;
use mpistages_control::fan::{Common, Fan, Gathered, Kind};
use mpistages_control::rankset::RankSet;
use mpistages_control::tree::{Node, Tree};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

mod nodes;

/// What each step costs, in microseconds (see `Costs::measured`).
#[derive(Clone, Copy, Debug)]
pub struct Costs {
    /// One message between processes of a host / between hosts.
    pub local_us: f64,
    pub net_us: f64,
    /// CPU to take in one message / to send one.
    pub recv_us: f64,
    pub send_us: f64,
    /// An agent sees its rank's process end.
    pub detect_us: f64,
    /// An agent starts one process.
    pub spawn_us: f64,
    /// A rank wakes on a notice and stops (halt).
    pub halt_us: f64,
    /// A survivor rolls back its MPI state to the epoch (stages: its
    /// rollback; reinit: MPI state rebuilt).
    pub rollback_us: f64,
    /// A new process's `MPI_Init` up to its hello, then its restore.
    pub init_us: f64,
    pub restore_us: f64,
    /// A rank takes the resume in; then loads its data (the program's).
    pub resume_us: f64,
    pub load_us: f64,
    /// Per address in a Welcome (a host index, a port and a generation
    /// per rank listed).
    pub per_address_us: f64,
    /// The fan's window.
    pub window_us: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    Stages,
    Reinit,
    Cpr,
    /// ULFM: the failure is announced, the survivors agree (shrink).
    Ulfm,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Stages => "stages",
            Mode::Reinit => "reinit",
            Mode::Cpr => "cpr",
            Mode::Ulfm => "ulfm-shrink",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Setup {
    pub ranks: usize,
    pub hosts: usize,
    pub cores_per_host: usize,
    /// 0: flat (no tree, today's runtime).
    pub radix: usize,
    pub mode: Mode,
}

/// What a simulated recovery took.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Detection of the failure to every rank resumed, ms.
    pub detect_to_resumed_ms: f64,
    /// Messages in and out, and bytes, at mpiexec and at the busiest
    /// agent.
    pub root_msgs: u64,
    pub root_bytes: u64,
    pub agent_msgs: u64,
    pub agent_bytes: u64,
    /// mpiexec's messages by kind, as its recovery line says them (`in:
    /// 7 halted, 8 ready; out: 7 failure, 8 resume`).
    pub root_kinds: String,
    pub events: u64,
    /// Every rank resumed (else the simulation ran out of events).
    pub complete: bool,
}

#[derive(Clone, Debug)]
enum Msg {
    /// A gathered (or a rank's own) report going up; a hello's gathering
    /// carries the addresses too (`size`).
    Report(Gathered),
    /// A rank's process ended: its agent sees it (an event of its own).
    Died(usize),
    /// The end of a rank's process, reported up to mpiexec.
    Lost(usize),
    /// For the agent of `host`: passed down the tree to it.
    Via {
        host: usize,
        inner: Box<Msg>,
    },
    /// Start processes for these ranks (at an agent).
    Start(Vec<usize>),
    /// Start every rank of the host and below again (cpr's relaunch).
    StartAll,
    /// End every process of the host and below (cpr).
    KillAll,
    /// The Welcome of a new process: every rank's address.
    Welcome {
        addresses: usize,
    },
    /// For one rank (at its agent): pass it on.
    ToRank(usize, Box<Msg>),
    /// Notices going down to every rank.
    Failure {
        generation: u32,
        failed: RankSet,
    },
    Resume,
    /// An agent's gathering window may have passed.
    Due,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum At {
    Root,
    Agent(usize),
    Rank(usize),
}

struct Ev {
    at: At,
    msg: Msg,
    /// A call within mpiexec (its own host's ranks, flat): no message.
    local: bool,
}

pub struct Sim {
    s: Setup,
    c: Costs,
    tree: Tree,
    base: Instant,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64, usize)>>,
    slots: Vec<Option<Ev>>,
    free: Vec<usize>,
    /// When each server is next free: mpiexec, each agent, each core.
    root_free: u64,
    agent_free: Vec<u64>,
    cores_free: Vec<Vec<u64>>,
    fans: Vec<Fan>,
    rec: Recoveries,
    generation: u32,
    resumed: usize,
    resumed_at: u64,
    detected_at: Option<u64>,
    gone: usize,
    hellos: usize,
    agreed: usize,
    victim: usize,
    root_count: (u64, u64),
    agent_count: Vec<(u64, u64)>,
    traffic: Traffic,
    events: u64,
}

fn ns(us: f64) -> u64 {
    (us * 1000.0) as u64
}

/// Bytes of a message on the wire, about (postcard: small integers are a
/// byte or two; a rank set two varints per range; an address ~22 bytes).
fn size(m: &Msg) -> u64 {
    match m {
        Msg::Report(g) if g.kind == Kind::Hello => 12 + 26 * g.ranks.len() as u64,
        Msg::Report(g) => 12 + 6 * g.ranks.ranges() as u64,
        Msg::Via { inner, .. } | Msg::ToRank(_, inner) => 4 + size(inner),
        Msg::Start(r) => 200 * r.len() as u64,
        Msg::Welcome { addresses } => 16 + 6 * *addresses as u64,
        Msg::Failure { failed, .. } => 12 + 6 * failed.ranges() as u64,
        _ => 8,
    }
}

fn kind_name(m: &Msg) -> &'static str {
    match m {
        Msg::Report(g) => match g.kind {
            Kind::Halted => "halted",
            Kind::Ready => "ready",
            Kind::Restored => "restored",
            Kind::Checkpoint | Kind::Durable => "checkpoint",
            Kind::Hello => "hello",
            Kind::Ended => "ended",
            Kind::Agree => "agree",
        },
        Msg::Died(_) | Msg::Lost(_) => "ended",
        Msg::Via { inner, .. } | Msg::ToRank(_, inner) => kind_name(inner),
        Msg::Start(_) | Msg::StartAll => "start",
        Msg::KillAll => "kill",
        Msg::Welcome { .. } => "welcome",
        Msg::Failure { .. } => "failure",
        Msg::Resume => "resume",
        Msg::Due => "timer",
    }
}

fn report(kind: Kind, key: u64, ranks: RankSet, value: Option<u64>) -> Msg {
    Msg::Report(Gathered {
        kind,
        key,
        ranks,
        value: Common::All(value),
    })
}

impl Sim {
    pub fn new(s: Setup, c: Costs) -> Sim {
        let per = s.ranks.div_ceil(s.hosts);
        let tree = Tree::new(s.hosts, if s.radix == 0 { s.hosts } else { s.radix });
        let fans = (0..s.hosts)
            .map(|h| {
                let mut below = RankSet::new();
                for x in tree.subtree(h) {
                    below.insert_range(
                        (x * per).min(s.ranks) as u32..((x + 1) * per).min(s.ranks) as u32,
                    );
                }
                Fan::new(below, Duration::from_nanos(ns(c.window_us)))
            })
            .collect();
        Sim {
            s,
            c,
            tree,
            base: Instant::now(),
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            root_free: 0,
            agent_free: vec![0; s.hosts],
            cores_free: vec![vec![0; s.cores_per_host.max(1)]; s.hosts],
            fans,
            rec: Recoveries::new(s.ranks, s.mode == Mode::Cpr, usize::MAX),
            generation: 0,
            resumed: 0,
            resumed_at: 0,
            detected_at: None,
            gone: 0,
            hellos: 0,
            agreed: 0,
            victim: 0,
            root_count: (0, 0),
            agent_count: vec![(0, 0); s.hosts],
            traffic: Traffic::default(),
            events: 0,
        }
    }

    fn flat(&self) -> bool {
        self.s.radix == 0
    }

    fn per_host(&self) -> usize {
        self.s.ranks.div_ceil(self.s.hosts)
    }

    fn host_of(&self, rank: usize) -> usize {
        rank / self.per_host()
    }

    fn ranks_of(&self, host: usize) -> std::ops::Range<usize> {
        let per = self.per_host();
        (host * per).min(self.s.ranks)..((host + 1) * per).min(self.s.ranks)
    }

    fn instant(&self, t: u64) -> Instant {
        self.base + Duration::from_nanos(t)
    }

    fn push(&mut self, t: u64, at: At, msg: Msg) {
        self.push_ev(
            t,
            Ev {
                at,
                msg,
                local: false,
            },
        );
    }

    fn push_ev(&mut self, t: u64, ev: Ev) {
        let slot = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(ev);
                i
            }
            None => {
                self.slots.push(Some(ev));
                self.slots.len() - 1
            }
        };
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, slot)));
    }

    /// One message in (`incoming`) or out at `at` (ranks are not counted).
    fn count(&mut self, at: At, m: &Msg, incoming: bool) {
        let (k, bytes) = (kind_name(m), size(m));
        match at {
            At::Root => {
                self.root_count.0 += 1;
                self.root_count.1 += bytes;
                if incoming {
                    self.traffic.received(k);
                } else {
                    self.traffic.sent(k, 1);
                }
            }
            At::Agent(h) => {
                self.agent_count[h].0 += 1;
                self.agent_count[h].1 += bytes;
            }
            At::Rank(_) => {}
        }
    }

    /// The host a node runs on (mpiexec: host 0, beside its agent).
    fn host_at(&self, at: At) -> usize {
        match at {
            At::Root => 0,
            At::Agent(h) => h,
            At::Rank(r) => self.host_of(r),
        }
    }

    /// Flat, mpiexec's own host has no agent process: mpiexec starts and
    /// watches those ranks itself (no message between them).
    fn in_process(&self, a: At, b: At) -> bool {
        self.flat() && matches!((a, b), (At::Root, At::Agent(0)) | (At::Agent(0), At::Root))
    }

    /// `from`, a server busy until `t`, sends `m` to `to`: when it is done.
    fn send(&mut self, from: At, t: u64, to: At, m: Msg) -> u64 {
        if self.in_process(from, to) {
            let ev = Ev {
                at: to,
                msg: m,
                local: true,
            };
            self.push_ev(t, ev);
            return t;
        }
        self.count(from, &m, false);
        let done = t + ns(self.c.send_us);
        let lat = if self.host_at(from) == self.host_at(to) {
            self.c.local_us
        } else {
            self.c.net_us
        };
        self.push(done + ns(lat), to, m);
        done
    }

    /// A server of `at` takes up work arriving at `t` for `cost`: when it
    /// is done.
    fn serve(&mut self, at: At, t: u64, cost: u64) -> u64 {
        let free = match at {
            At::Root => &mut self.root_free,
            At::Agent(h) => &mut self.agent_free[h],
            At::Rank(r) => {
                let h = self.host_of(r);
                let cores = &mut self.cores_free[h];
                let i = (0..cores.len()).min_by_key(|&i| cores[i]).unwrap_or(0);
                &mut cores[i]
            }
        };
        let done = t.max(*free) + cost;
        *free = done;
        done
    }

    /// A message arrives at a node: counted, and its receive cost paid
    /// (a call within mpiexec: neither).
    fn take_in(&mut self, local: bool, at: At, t: u64, m: &Msg) -> u64 {
        if local {
            return t;
        }
        self.count(at, m, true);
        self.serve(at, t, ns(self.c.recv_us))
    }

    /// The agents right below `node` (flat: mpiexec has every agent).
    fn child_agents(&self, node: At) -> std::ops::Range<usize> {
        match node {
            At::Root => self.tree.children(Node::Root),
            At::Agent(h) if !self.flat() => self.tree.children(Node::Host(h)),
            _ => 0..0,
        }
    }

    /// Sends `m` from `node` to everything right below it: its child
    /// agents and, for an agent, its own ranks (flat: mpiexec sends to
    /// every rank itself).
    fn fan_out(&mut self, node: At, mut t: u64, m: &Msg) -> u64 {
        let (kids, own) = match node {
            At::Root if self.flat() => (0..0, 0..self.s.ranks),
            At::Agent(h) if !self.flat() => (self.child_agents(node), self.ranks_of(h)),
            _ => (self.child_agents(node), 0..0),
        };
        for h in kids {
            t = self.send(node, t, At::Agent(h), m.clone());
        }
        // The dead process gets no notice (ULFM: nor the agreement).
        let dead = match m {
            Msg::Failure { failed, .. } => failed.iter().next(),
            Msg::Resume if self.s.mode == Mode::Ulfm => Some(self.victim as u32),
            _ => None,
        };
        for r in own.filter(|&r| Some(r as u32) != dead) {
            t = self.send(node, t, At::Rank(r), m.clone());
        }
        t
    }

    /// Where a rank's or an agent's report goes.
    fn up(&self, from: At) -> At {
        match from {
            At::Rank(_) if self.flat() => At::Root,
            At::Rank(r) => At::Agent(self.host_of(r)),
            At::Agent(_) if self.flat() => At::Root,
            At::Agent(h) => match self.tree.parent(h) {
                Node::Root => At::Root,
                Node::Host(p) => At::Agent(p),
            },
            At::Root => At::Root,
        }
    }

    /// The next node on the way from `node` down to `host`'s agent.
    fn toward(&self, node: At, host: usize) -> At {
        let mut h = host;
        loop {
            let parent = match self.tree.parent(h) {
                Node::Root => At::Root,
                Node::Host(p) => At::Agent(p),
            };
            if parent == node || self.flat() {
                return At::Agent(h);
            }
            match parent {
                At::Agent(p) => h = p,
                _ => return At::Agent(host),
            }
        }
    }

    /// Sends `m` from mpiexec (or an agent) toward `host`'s agent.
    fn send_down(&mut self, from: At, t: u64, host: usize, m: Msg) -> u64 {
        let next = self.toward(from, host);
        if next == At::Agent(host) {
            self.send(from, t, next, m)
        } else {
            let via = Msg::Via {
                host,
                inner: Box::new(m),
            };
            self.send(from, t, next, via)
        }
    }

    /// Sends `m` from mpiexec to rank `r`: itself (flat), or through the
    /// agents down to the rank's.
    fn send_to_rank(&mut self, t: u64, r: usize, m: Msg) -> u64 {
        if self.flat() {
            self.send(At::Root, t, At::Rank(r), m)
        } else {
            let h = self.host_of(r);
            self.send_down(At::Root, t, h, Msg::ToRank(r, Box::new(m)))
        }
    }

    /// Runs the recovery of `victim`, killed at time 0.
    pub fn run(mut self, victim: usize) -> Outcome {
        self.victim = victim;
        // Every rank completed epoch 1; the job is running.
        for r in 0..self.s.ranks {
            self.rec.checkpoint(r, 1, None);
        }
        let h = self.host_of(victim);
        self.push(ns(self.c.detect_us), At::Agent(h), Msg::Died(victim));
        while let Some(Reverse((t, _, slot))) = self.queue.pop() {
            self.now = t;
            self.events += 1;
            let ev = self.slots[slot].take().expect("a queued event");
            self.free.push(slot);
            self.step(ev);
        }
        let busiest = self
            .agent_count
            .iter()
            .copied()
            .max_by_key(|c| c.0)
            .unwrap_or_default();
        Outcome {
            detect_to_resumed_ms: self
                .resumed_at
                .saturating_sub(self.detected_at.unwrap_or(0))
                as f64
                / 1e6,
            complete: self.resumed == self.s.ranks,
            root_msgs: self.root_count.0,
            root_bytes: self.root_count.1,
            agent_msgs: busiest.0,
            agent_bytes: busiest.1,
            root_kinds: self.traffic.summary(),
            events: self.events,
        }
    }
}
