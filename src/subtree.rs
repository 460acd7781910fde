//! The agents below this one in the control tree, for an agent started
//! with `--children` (mpiexec makes a tree of the agents when hosts are
//! more than `MPISTAGES_TREE_RADIX`). They connect to this agent's
//! listener and say hello with the job key; from then on what they send
//! passes up through this agent and what mpiexec sends them passes down:
//!
//! - up: a child's message goes up wrapped as from its host
//!   (`FromAgent::via`); one that a grandchild sent is wrapped already and
//!   passes as it is. Their merged reports (`Gathered`) are merged again
//!   here with this host's (`Relay::report_below`), so mpiexec hears once
//!   per step from each of its children, not from every host. Heartbeats
//!   stop here: this agent watches its children and says when one is
//!   `Lost` (mpiexec counts every host below it lost too).
//! - down: `Via { host }` goes to the child that is that host or leads to
//!   it (learned as their hellos came up: `Joined`), `Spread` is split into
//!   one message per child with the parts below it.
//!
//! What is started below is watched for the fan: a rank started on a host
//! below is expected to report, until its process ends.

use crate::relay::Relay;
use mpistages_control::agent::{FromAgent, ToAgent};
use mpistages_control::proto::{self, Decoder, ToRank};
use mpistages_control::rankset::RankSet;
use mpistages_sys::epoll::{self, Epoll};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

pub const TOKEN_LISTENER: u64 = 6;
/// Children's connections: this plus their index.
pub const TOKEN_CHILD: u64 = 1 << 33;

/// How long a connection may take to say hello.
const HELLO_WITHIN: Duration = Duration::from_secs(1);

/// How long a write to a child may wait on a full buffer.
const WRITE_WITHIN: Duration = Duration::from_secs(2);

type Up<'a> = &'a mut dyn FnMut(&FromAgent) -> bool;

struct Child {
    stream: TcpStream,
    dec: Decoder,
    /// Its host, once it said hello.
    host: Option<String>,
    addr: IpAddr,
    heard: Instant,
}

pub struct Subtree {
    listener: TcpListener,
    children: Vec<Option<Child>>,
    /// Every host below, by the index of the child that leads to it.
    routes: HashMap<String, usize>,
    /// Processes started below (their ids): their rank and the child
    /// that leads to them.
    started: HashMap<u64, (u32, usize)>,
    key: Vec<u8>,
    /// A child silent this long is lost.
    silence: Duration,
}

/// The parts of a `Spread` by the child they go through (`route` names
/// it for a host; parts of hosts it does not know are dropped: lost).
pub fn by_child(
    parts: Vec<(String, RankSet)>,
    route: impl Fn(&str) -> Option<usize>,
) -> BTreeMap<usize, Vec<(String, RankSet)>> {
    let mut out: BTreeMap<usize, Vec<(String, RankSet)>> = BTreeMap::new();
    for (host, conns) in parts {
        if let Some(c) = route(&host) {
            out.entry(c).or_default().push((host, conns));
        }
    }
    out
}

impl Subtree {
    /// Listens on `ip` (this host's address toward mpiexec, which the
    /// hosts below reach too); returns it and its `ADDR:PORT`.
    pub fn new(
        ip: IpAddr,
        key: &[u8],
        silence: Duration,
        ep: &Epoll,
    ) -> std::io::Result<(Subtree, String)> {
        let listener = TcpListener::bind((ip, 0))?;
        listener.set_nonblocking(true)?;
        ep.add(listener.as_raw_fd(), epoll::READABLE, TOKEN_LISTENER)?;
        let addr = listener.local_addr()?.to_string();
        let tree = Subtree {
            listener,
            children: Vec::new(),
            routes: HashMap::new(),
            started: HashMap::new(),
            key: key.to_vec(),
            silence,
        };
        Ok((tree, addr))
    }

    pub fn accept(&mut self, ep: &Epoll) {
        while let Ok((stream, from)) = self.listener.accept() {
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let _ = stream.set_nodelay(true);
            let i = self.children.len();
            if ep
                .add(stream.as_raw_fd(), epoll::READABLE, TOKEN_CHILD + i as u64)
                .is_ok()
            {
                self.children.push(Some(Child {
                    stream,
                    dec: Decoder::for_agent_link(),
                    host: None,
                    addr: from.ip(),
                    heard: Instant::now(),
                }));
            }
        }
    }

    /// The child that is `host` or leads to it.
    fn route(&self, host: &str) -> Option<usize> {
        self.routes
            .get(host)
            .copied()
            .filter(|&i| self.children.get(i).is_some_and(Option::is_some))
    }

    fn send(&mut self, i: usize, bytes: &[u8]) {
        let ok = self.children[i]
            .as_ref()
            .is_some_and(|c| mpistages_sys::socket::send_whole(&c.stream, bytes, WRITE_WITHIN));
        // A child that takes nothing is found lost at the next beat.
        if !ok {
            if let Some(c) = self.children[i].as_mut() {
                c.heard = Instant::now() - self.silence;
            }
        }
    }

    /// Reads what child `i` sent and passes it up; false when the link up
    /// failed.
    pub fn on_child(&mut self, i: usize, ep: &Epoll, relay: &mut Option<Relay>, up: Up) -> bool {
        let Some(c) = self.children.get_mut(i).and_then(Option::as_mut) else {
            return true;
        };
        let mut closed = c.dec.read_available(&mut c.stream);
        c.heard = Instant::now();
        let mut msgs = Vec::new();
        loop {
            match c.dec.next_message::<FromAgent>() {
                Ok(Some(m)) => msgs.push(m),
                Ok(None) => break,
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        let mut ok = true;
        for m in msgs {
            match self.take(i, m, relay, up) {
                Some(true) => {}
                Some(false) => ok = false,
                None => {
                    closed = true;
                    break;
                }
            }
        }
        if closed {
            ok &= self.lost(i, "its connection to its parent agent ended", ep, relay, up);
        }
        ok
    }

    /// One message of child `i`: Some(whether the link up took what went
    /// up), None when the child broke the protocol.
    fn take(&mut self, i: usize, m: FromAgent, relay: &mut Option<Relay>, up: Up) -> Option<bool> {
        let c = self.children[i].as_ref().expect("read above");
        let Some(name) = c.host.clone() else {
            // The first message: a hello with the key, else a stranger.
            let FromAgent::Hello { key, host } = m else {
                return None;
            };
            if !mpistages_sys::constant_time_eq(&key, &self.key) {
                return None;
            }
            let addr = c.addr.to_string();
            self.children[i].as_mut().expect("read above").host = Some(host.clone());
            self.routes.insert(host.clone(), i);
            return Some(up(&FromAgent::Joined { host, addr }));
        };
        // What this says of the hosts and processes below.
        let inner = match &m {
            FromAgent::Via { host, msg } => {
                self.routes.insert(host.clone(), i);
                proto::from_body::<FromAgent>(msg).ok()
            }
            other => Some(other.clone()),
        };
        // What a rank said after its report, or its end, must not overtake
        // the report gathered here (a hello, output, a start need not wait).
        let ordered = matches!(
            inner,
            Some(
                FromAgent::Relayed { .. }
                    | FromAgent::Closed { .. }
                    | FromAgent::Ended { .. }
                    | FromAgent::Lost { .. }
            )
        );
        match inner {
            Some(FromAgent::Joined { host, .. }) => {
                self.routes.insert(host, i);
            }
            Some(FromAgent::Ended { id, .. } | FromAgent::NotStarted { id, .. })
                if !self.ended(id, relay, up) =>
            {
                return Some(false);
            }
            _ => {}
        }
        Some(match (m, relay.as_mut()) {
            (FromAgent::Alive, _) => true,
            // Merged with this host's ranks' reports.
            (FromAgent::Gathered(g), Some(r)) => r.report_below(g, up),
            // Held with this branch's.
            (FromAgent::Hellos(own), Some(r)) => r.hellos_below(name, own, up),
            (FromAgent::BranchHellos { own, below }, Some(r)) => std::iter::once((name, own))
                .chain(below)
                .all(|(h, hellos)| r.hellos_below(h, hellos, up)),
            (m, Some(r)) if ordered => r.flush_up(up) && up(&FromAgent::via(&name, &m)),
            (m, _) => up(&FromAgent::via(&name, &m)),
        })
    }

    /// Process `id` below ended: its rank is not waited for here unless
    /// another process of it runs below.
    fn ended(&mut self, id: u64, relay: &mut Option<Relay>, up: Up) -> bool {
        let Some((rank, _)) = self.started.remove(&id) else {
            return true;
        };
        let again = self.started.values().any(|&(r, _)| r == rank);
        match relay.as_mut() {
            Some(r) if !again => r.remove_below(rank, up),
            _ => true,
        }
    }

    /// Child `i` is lost, and every host it leads to: mpiexec hears it,
    /// and their ranks are no longer waited for.
    fn lost(&mut self, i: usize, why: &str, ep: &Epoll, relay: &mut Option<Relay>, up: Up) -> bool {
        let Some(c) = self.children[i].take() else {
            return true;
        };
        let _ = ep.delete(c.stream.as_raw_fd());
        self.routes.retain(|_, &mut x| x != i);
        let gone: Vec<u64> = (self.started.iter())
            .filter(|(_, &(_, x))| x == i)
            .map(|(&id, _)| id)
            .collect();
        let mut ok = true;
        for id in gone {
            ok &= self.ended(id, relay, up);
        }
        match c.host {
            Some(host) => {
                let why = why.to_string();
                ok && up(&FromAgent::Lost { host, why })
            }
            None => ok,
        }
    }

    /// `msg` (a `ToAgent`'s encoding) toward `host` below.
    pub fn down_via(&mut self, host: &str, msg: Vec<u8>, relay: &mut Option<Relay>) {
        let Some(i) = self.route(host) else {
            return;
        };
        if let Ok(ToAgent::Start(s)) = proto::from_body::<ToAgent>(&msg) {
            self.started.insert(s.id, (s.rank, i));
            if let Some(r) = relay.as_mut() {
                r.add_below(s.rank);
            }
        }
        let own = self.children[i].as_ref().and_then(|c| c.host.as_deref()) == Some(host);
        let bytes = if own {
            proto::frame(&msg)
        } else {
            proto::encode(&ToAgent::Via {
                host: host.into(),
                msg,
            })
        };
        self.send(i, &bytes);
    }

    /// The parts of a `Spread` for hosts below, one message per child.
    pub fn spread(&mut self, parts: Vec<(String, RankSet)>, msg: &ToRank) {
        for (i, parts) in by_child(parts, |h| self.route(h)) {
            let m = ToAgent::Spread {
                parts,
                msg: msg.clone(),
            };
            self.send(i, &proto::encode(&m));
        }
    }

    /// Heartbeats to the children; those silent too long (or with no
    /// hello in time) are lost. False when the link up failed.
    pub fn beat(&mut self, ep: &Epoll, relay: &mut Option<Relay>, up: Up) -> bool {
        let alive = proto::encode(&ToAgent::Alive);
        let mut ok = true;
        for i in 0..self.children.len() {
            let Some(c) = self.children[i].as_ref() else {
                continue;
            };
            let quiet = c.heard.elapsed();
            match &c.host {
                None if quiet > HELLO_WITHIN => {
                    let _ = ep.delete(c.stream.as_raw_fd());
                    self.children[i] = None;
                }
                Some(_) if quiet > self.silence => {
                    let why = format!("no heartbeat for {:.1} s", quiet.as_secs_f64());
                    ok &= self.lost(i, &why, ep, relay, up);
                }
                Some(_) => self.send(i, &alive),
                None => {}
            }
        }
        ok
    }

    /// The job ends: the children end theirs and themselves; waits (up to
    /// `grace` and 2 s) for their connections to close.
    pub fn shutdown(&mut self, grace: Duration) {
        let msg = proto::encode(&ToAgent::Shutdown {
            grace_ms: grace.as_millis() as u32,
        });
        for i in 0..self.children.len() {
            self.send(i, &msg);
        }
        let deadline = Instant::now() + grace + Duration::from_secs(2);
        for c in self.children.iter_mut().flatten() {
            let _ = c.stream.set_nonblocking(false);
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = c
                .stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))));
            let mut buf = [0u8; 4096];
            while matches!(std::io::Read::read(&mut c.stream, &mut buf), Ok(n) if n > 0) {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spread's parts go to the child that leads to each host, one
    /// message per child, and those of unknown hosts nowhere.
    #[test]
    fn spread_parts_go_by_child() {
        let routes: HashMap<&str, usize> = [("b", 0), ("d", 0), ("c", 1)].into();
        let part = |h: &str, c: u32| (h.to_string(), RankSet::one(c));
        let parts = vec![part("b", 1), part("c", 2), part("d", 3), part("x", 4)];
        let got = by_child(parts, |h| routes.get(h).copied());
        assert_eq!(got.len(), 2);
        assert_eq!(got[&0], vec![part("b", 1), part("d", 3)]);
        assert_eq!(got[&1], vec![part("c", 2)]);
    }
}
