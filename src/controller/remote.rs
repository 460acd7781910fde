//! Hosts with agents: those other than mpiexec's, their agents
//! (`mpistages-agent`, started by the launcher command), and mpiexec's own
//! when the job has others (its agent started directly); the ranks they
//! start, their output, their heartbeats, and the loss of a host. The
//! agents reach mpiexec over `agent_listener`, and so do their ranks
//! (relayed, `relayed.rs`), or each over TCP (`control_tcp`) with the
//! control tree off.

use super::*;
use crate::agent::{AgentLink, Gate};
use mpistages_control::agent::{Ended, FromAgent, Start, ToAgent, HEARTBEAT_MS};
use mpistages_control::rankset::RankSet;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

/// A host whose ranks an agent starts: one other than this machine, or
/// this machine too when the job has other hosts and the control tree is
/// on (`MPISTAGES_CONTROL_TREE`).
pub(super) struct Remote {
    pub name: String,
    /// The launcher's process (the agent itself once it exec'd).
    pub pid: i32,
    pub link: AgentLink,
    /// The agent's connection (reading side) once it said hello.
    pub(super) conn: Option<(TcpStream, Decoder)>,
    /// The host's address as mpiexec sees its agent: its ranks listen there.
    pub addr: Option<String>,
    /// Starts that wait for the agent's hello.
    pending: Vec<Start>,
    pub heard: Instant,
    pub lost: bool,
    /// The agent it connects to (None: mpiexec; see `tree`), whether it
    /// was started (one below another starts once that one listens), and
    /// whether it connected.
    pub parent: Option<usize>,
    pub(super) launched: bool,
    pub(super) joined: bool,
    /// The agent's rank connections (its numbers) and their slots here,
    /// and those mpiexec closed (what they still send is dropped).
    pub(super) relayed: std::collections::HashMap<u32, usize>,
    pub(super) closed: RankSet,
}

/// A connection to the agent listener before its hello.
struct Handshake {
    stream: TcpStream,
    from: String,
    dec: Decoder,
    since: Instant,
}

/// How long a connection to the agent listener may take to say hello.
const HELLO_WITHIN: Duration = Duration::from_secs(1);

/// How long a host's agent may take to connect at all: a launcher (ssh,
/// `ip netns exec`) on a loaded machine can take seconds to start it, so
/// the heartbeat timeout applies only once it has connected. A launcher
/// that fails ends, and that is seen at once (`agent_ended`).
const AGENT_START: Duration = Duration::from_secs(30);

impl Remote {
    /// How long this host may stay silent before it is lost.
    fn silence_allowed(&self, heartbeat_timeout: Duration) -> Duration {
        if self.joined {
            heartbeat_timeout
        } else {
            heartbeat_timeout.max(AGENT_START)
        }
    }
}

/// What mpiexec needs for hosts other than this machine.
pub(super) struct Remotes {
    handshakes: Vec<Option<Handshake>>,
    pub hosts: Vec<Option<Remote>>,
    agent_listener: TcpListener,
    control_tcp: TcpListener,
    /// `tcp:ADDR:PORT` for the ranks' `MPISTAGES_CONTROL`.
    pub control: String,
    next_id: u64,
    next_beat: Instant,
    /// When `beat` last looked at the hosts' silences.
    last_check: Instant,
    /// Output gates of the processes agents run, by id.
    pub gates: std::collections::HashMap<u64, Arc<Gate>>,
    /// mpiexec's stdin, for rank 0 when it runs here.
    stdin: super::stdin::StdinForward,
    /// How agents are started: the launcher command, the agent's program,
    /// the job key, whether they relay, how long a child may be silent.
    pub(super) launcher: Vec<String>,
    pub(super) agent_exe: std::path::PathBuf,
    pub(super) key: String,
    pub(super) relaying: bool,
    pub(super) silence_ms: u64,
}

pub(super) const TOKEN_AGENT_LISTENER: u64 = 3;
/// Connections to the agent listener before their hello: this plus a slot.
pub(super) const TOKEN_AGENT_HELLO: u64 = 1 << 30;
pub(super) const TOKEN_CONTROL_TCP: u64 = 4;
/// Agents' connections: this plus the host index.
pub(super) const TOKEN_AGENT: u64 = 1 << 31;

/// This machine's address toward `host` (a name or an address; a Slurm
/// node name that does not resolve is looked up with `scontrol`).
fn address_toward(host: &str) -> std::io::Result<std::net::IpAddr> {
    use std::net::ToSocketAddrs;
    let peer = match (host, 9).to_socket_addrs() {
        Ok(mut addrs) => addrs.next().map(|a| a.ip()),
        Err(_) => None,
    };
    let peer = peer
        .or_else(|| crate::slurm::node_address(host))
        .ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, "no address for this name")
        })?;
    mpistages_sys::socket::address_toward(peer)
}

impl Remotes {
    /// Listeners and agents for the hosts of `opts` that are not this
    /// machine (None when every host is this machine).
    pub(super) fn start(
        opts: &cli::Options,
        key: &str,
        epoll: &Epoll,
    ) -> std::io::Result<Option<Remotes>> {
        let Some(hosts) = &opts.hosts else {
            return Ok(None);
        };
        let Some(first) = hosts.iter().find(|h| !cli::is_this_host(&h.name)) else {
            return Ok(None);
        };
        let addr = match opts.control_addr {
            Some(a) => a,
            None => address_toward(&first.name).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot find this machine's address toward host '{}' ({e}); give it with --control-addr",
                        first.name
                    ),
                )
            })?,
        };
        let agent_listener = TcpListener::bind((addr, 0))?;
        let control_tcp = TcpListener::bind((addr, 0))?;
        for l in [&agent_listener, &control_tcp] {
            l.set_nonblocking(true)?;
        }
        epoll.add(
            agent_listener.as_raw_fd(),
            epoll::READABLE,
            TOKEN_AGENT_LISTENER,
        )?;
        epoll.add(control_tcp.as_raw_fd(), epoll::READABLE, TOKEN_CONTROL_TCP)?;
        let agent_at = agent_listener.local_addr()?.to_string();
        // The ranks of a host reach mpiexec through its agent (the control
        // tree); `MPISTAGES_CONTROL_TREE=off`: directly, each over TCP.
        let relaying = std::env::var("MPISTAGES_CONTROL_TREE").map_or(true, |v| v != "off");
        // This machine's ranks, when the job has other hosts, are a host of
        // the tree too (with the tree off, mpiexec starts them).
        let agents: Vec<usize> = (0..hosts.len())
            .filter(|&h| relaying || !cli::is_this_host(&hosts[h].name))
            .collect();
        let radix = match relaying {
            true => super::tree::tree_radix().map_err(std::io::Error::other)?,
            false => usize::MAX,
        };
        // Agent k (counting the hosts with agents) connects to this one.
        let tree = mpistages_control::tree::Tree::new(agents.len(), radix);
        let parents: Vec<Option<usize>> = (0..agents.len())
            .map(|k| match tree.parent(k) {
                mpistages_control::tree::Node::Root => None,
                mpistages_control::tree::Node::Host(p) => Some(p),
            })
            .collect();
        let mut remotes: Vec<Option<Remote>> = (0..hosts.len()).map(|_| None).collect();
        for (k, &h) in agents.iter().enumerate() {
            remotes[h] = Some(Remote {
                name: hosts[h].name.clone(),
                pid: 0,
                link: AgentLink::default(),
                conn: None,
                addr: None,
                pending: Vec::new(),
                heard: Instant::now(),
                lost: false,
                parent: parents[k].map(|p| agents[p]),
                launched: false,
                joined: false,
                relayed: Default::default(),
                closed: RankSet::new(),
            });
        }
        let mut r = Remotes {
            handshakes: Vec::new(),
            hosts: remotes,
            control: format!("{}{}", stream::TCP_PREFIX, control_tcp.local_addr()?),
            agent_listener,
            control_tcp,
            next_id: 1,
            next_beat: Instant::now(),
            last_check: Instant::now(),
            gates: Default::default(),
            stdin: Default::default(),
            launcher: opts.launcher.clone(),
            agent_exe: std::env::current_exe()?.with_file_name("mpistages-agent"),
            key: key.to_string(),
            relaying,
            silence_ms: opts.heartbeat_timeout.as_millis() as u64,
        };
        for &h in &agents {
            if r.hosts[h].as_ref().is_some_and(|x| x.parent.is_none()) {
                r.launch(h, &agent_at)?;
            }
        }
        Ok(Some(r))
    }

    /// When `beat` must run next: the next heartbeat, or the moment a
    /// host would have been silent for `timeout` (checked then, not at the
    /// next heartbeat: a host is lost `timeout` after it was last heard).
    pub(super) fn next_beat(&self, timeout: Duration) -> Instant {
        self.hosts
            .iter()
            .flatten()
            .filter(|x| !x.lost)
            .map(|x| x.heard + x.silence_allowed(timeout) + Duration::from_millis(1))
            .fold(self.next_beat, Instant::min)
    }
}

impl Job {
    pub(super) fn remotes(&mut self) -> &mut Remotes {
        self.remote.as_mut().expect("hosts other than this machine")
    }

    /// Host `h`, which has an agent.
    pub(super) fn agent_host(&mut self, h: usize) -> &mut Remote {
        self.remotes().hosts[h]
            .as_mut()
            .expect("a host with an agent")
    }

    /// " on host NAME" when the job has hosts, for messages about `rank`.
    pub(super) fn on_host(&self, rank: usize) -> String {
        self.opts.hosts.as_ref().map_or(String::new(), |hs| {
            format!(" on host {}", hs[self.launch.rank_host[rank]].name)
        })
    }

    /// Whether rank `rank`'s processes are started by its host's agent.
    pub(super) fn through_agent(&self, rank: usize) -> bool {
        self.remote
            .as_ref()
            .is_some_and(|r| r.hosts[self.launch.rank_host[rank]].is_some())
    }

    /// Ranks' TCP control connections.
    pub(super) fn accept_control_tcp(&mut self) {
        while let Ok((s, _)) = self.remotes().control_tcp.accept() {
            let _ = s.set_nodelay(true);
            self.adopt(ControlStream::Tcp(s));
        }
    }

    /// Agents' connections: watched (never read blocking: a stranger
    /// that connects and stays silent must not stall mpiexec) until their
    /// first message, which must be a hello with the job key from a host of
    /// the job that has no agent yet.
    pub(super) fn accept_agents(&mut self) {
        while let Ok((s, from)) = self.remotes().agent_listener.accept() {
            if s.set_nonblocking(true).is_err() {
                continue;
            }
            let r = self.remotes();
            let slot = r
                .handshakes
                .iter()
                .position(Option::is_none)
                .unwrap_or_else(|| {
                    r.handshakes.push(None);
                    r.handshakes.len() - 1
                });
            let token = TOKEN_AGENT_HELLO + slot as u64;
            if self
                .epoll
                .add(s.as_raw_fd(), epoll::READABLE, token)
                .is_ok()
            {
                self.remotes().handshakes[slot] = Some(Handshake {
                    stream: s,
                    from: from.ip().to_string(),
                    dec: Decoder::for_agent_link(),
                    since: Instant::now(),
                });
            }
        }
    }

    fn drop_handshake(&mut self, slot: usize) {
        if let Some(hs) = self.remotes().handshakes[slot].take() {
            let _ = self.epoll.delete(hs.stream.as_raw_fd());
        }
    }

    /// Reads an agent's first bytes; adopts it on a good hello.
    pub(super) fn on_agent_hello(&mut self, slot: usize) {
        let Some(hs) = self
            .remotes()
            .handshakes
            .get_mut(slot)
            .and_then(Option::as_mut)
        else {
            return;
        };
        let closed = hs.dec.read_available(&mut hs.stream);
        let hello = match hs.dec.next_message::<FromAgent>() {
            Ok(Some(m)) => Ok(m),
            Ok(None) if !closed => return,
            _ => Err(()),
        };
        let hs = self.remotes().handshakes[slot]
            .take()
            .expect("checked above");
        let _ = self.epoll.delete(hs.stream.as_raw_fd());
        let Ok(FromAgent::Hello { key, host }) = hello else {
            return;
        };
        if !mpistages_sys::constant_time_eq(&key, self.key.as_bytes()) {
            return;
        }
        let r = self.remotes();
        let Some(h) = r.hosts.iter().position(|x| {
            x.as_ref().is_some_and(|x| {
                x.name == host && x.parent.is_none() && x.conn.is_none() && !x.lost
            })
        }) else {
            return;
        };
        let Ok(reader) = hs.stream.try_clone() else {
            return;
        };
        let _ = hs.stream.set_nodelay(true);
        if self
            .epoll
            .add(reader.as_raw_fd(), epoll::READABLE, TOKEN_AGENT + h as u64)
            .is_err()
        {
            return;
        }
        let remote = self.remotes().hosts[h].as_mut().expect("found above");
        remote.link.set(Some(hs.stream));
        remote.conn = Some((reader, hs.dec));
        self.joined(h, hs.from);
        // What came with the hello (an agent with children says where they
        // connect) is in the decoder already.
        self.on_agent(h);
    }

    /// Host `h`'s agent connected (to mpiexec or to its parent agent) from
    /// `addr`: what waited for it is started.
    pub(super) fn joined(&mut self, h: usize, addr: String) {
        let remote = self.agent_host(h);
        remote.addr = Some(addr.clone());
        remote.joined = true;
        remote.heard = Instant::now();
        let link = remote.link.clone();
        for mut start in std::mem::take(&mut remote.pending) {
            start.env.push(("MPISTAGES_TCP_ADDR".into(), addr.clone()));
            let (id, stdin) = (start.id, start.stdin);
            link.send(&ToAgent::Start(start));
            if stdin {
                self.remotes().stdin.aim(link.clone(), id);
            }
        }
    }

    /// Connections that said no hello within a second are dropped.
    fn expire_handshakes(&mut self) {
        let old: Vec<usize> = self
            .remotes()
            .handshakes
            .iter()
            .enumerate()
            .filter(|(_, h)| h.as_ref().is_some_and(|h| h.since.elapsed() > HELLO_WITHIN))
            .map(|(i, _)| i)
            .collect();
        for slot in old {
            self.drop_handshake(slot);
        }
    }

    /// Where the replacement of rank `rank` runs: on its host while that
    /// host is up, else on a spare host with a free slot, else on the host
    /// with the most free slots (`Err`: there is none, and why).
    pub(super) fn rehome(&mut self, rank: usize) -> Result<(), String> {
        let Some(r) = self.remote.as_ref() else {
            return Ok(());
        };
        let up = |h: usize| r.hosts[h].as_ref().is_none_or(|x| !x.lost);
        let here = self.launch.rank_host[rank];
        if up(here) {
            return Ok(());
        }
        let hosts = self.opts.hosts.as_ref().expect("hosts");
        let used = |h: usize| {
            (0..self.ranks.len())
                .filter(|&q| q != rank && self.launch.rank_host[q] == h)
                .count()
        };
        let first_spare = hosts.len() - self.opts.spare_hosts;
        let best = (0..hosts.len())
            .filter(|&h| up(h))
            .map(|h| (hosts[h].slots.saturating_sub(used(h)), h))
            .max_by_key(|&(free, h)| (h >= first_spare && free > 0, free, std::cmp::Reverse(h)));
        match best {
            Some((free, h)) if free > 0 || self.opts.policy.oversubscribe => {
                self.launch.rank_host[rank] = h;
                Ok(())
            }
            _ => Err(format!(
                "no free slot is left for rank {rank} (host {} is lost); give more hosts or slots, or --oversubscribe",
                r.hosts[here].as_ref().map_or("?", |x| x.name.as_str())
            )),
        }
    }

    /// Starts rank `rank` on its host's agent (now, or once it connects).
    pub(super) fn spawn_remote(&mut self, rank: usize, env: &[(&str, String)]) {
        let generation = self.rec.generation();
        let control = self.remotes().control.clone();
        let plan = self.launch.plan(Some(rank), generation, env, &control);
        if self.launch.report_bindings {
            let host =
                &self.opts.hosts.as_ref().expect("a host of the job")[self.launch.rank_host[rank]];
            crate::agent::report_binding(rank, &host.name, &plan.cpus);
        }
        self.start_remote(rank, plan);
    }

    /// Where processes on other hosts reach mpiexec.
    pub(super) fn remote_control(&mut self) -> String {
        self.remotes().control.clone()
    }

    /// Has process `rank` started by the agent of its host, as `plan` says.
    pub(super) fn start_remote(&mut self, rank: usize, plan: crate::agent::Plan) {
        let h = self.launch.rank_host[rank];
        let r = self.remotes();
        let id = r.next_id;
        r.next_id += 1;
        let (style, job) = (self.launch.output.clone(), self.launch.job_id.clone());
        let r = self.remotes();
        r.gates.insert(id, Gate::for_rank(rank, style, job));
        let remote = r.hosts[h].as_mut().expect("a host of the job");
        let mut start = Start {
            id,
            program: plan.program,
            args: plan.args,
            env: plan.env,
            wdir: plan.wdir.map(|d| d.to_string_lossy().into_owned()),
            cpus: plan.cpus.iter().map(|&c| c as u32).collect(),
            stdin: rank == 0,
            rank: rank as u32,
        };
        let link = remote.link.clone();
        match &remote.addr {
            Some(a) => {
                start.env.push(("MPISTAGES_TCP_ADDR".into(), a.clone()));
                link.send(&ToAgent::Start(start));
                if rank == 0 {
                    self.remotes().stdin.aim(link.clone(), id);
                }
            }
            None => remote.pending.push(start),
        }
        self.started(rank, RankProc::remote(rank, id, link));
    }

    /// The rank whose current process is `id` on another host.
    fn rank_of_id(&self, id: u64) -> Option<usize> {
        self.ranks.iter().position(|r| {
            r.proc
                .as_ref()
                .and_then(|p| p.remote.as_ref())
                .is_some_and(|(x, _)| *x == id)
        })
    }

    pub(super) fn on_agent(&mut self, h: usize) {
        let mut closed;
        let mut msgs = Vec::new();
        {
            let Some(remote) = self.remotes().hosts[h].as_mut() else {
                return;
            };
            let Some((s, dec)) = remote.conn.as_mut() else {
                return;
            };
            closed = dec.read_available(s);
            loop {
                match dec.next_message::<FromAgent>() {
                    Ok(Some(m)) => msgs.push(m),
                    Ok(None) => break,
                    Err(_) => {
                        closed = true;
                        break;
                    }
                }
            }
            remote.heard = Instant::now();
        }
        for m in msgs {
            self.on_agent_message(h, m);
        }
        if closed {
            self.host_lost(h, "its agent's connection ended");
        }
    }

    pub(super) fn on_agent_message(&mut self, h: usize, m: FromAgent) {
        if self.remotes().hosts[h].as_ref().is_none_or(|x| x.lost) {
            return;
        }
        match m {
            FromAgent::Alive | FromAgent::Hello { .. } => {}
            m @ (FromAgent::Listening { .. }
            | FromAgent::Joined { .. }
            | FromAgent::Lost { .. }
            | FromAgent::Via { .. }) => self.on_tree_message(h, m),
            m @ (FromAgent::Relayed { .. }
            | FromAgent::Hellos(_)
            | FromAgent::BranchHellos { .. }
            | FromAgent::Gathered(_)
            | FromAgent::Closed { .. }) => self.on_relayed(h, m),
            FromAgent::Started { id, pid } => {
                if let Some(r) = self.rank_of_id(id) {
                    if let Some(p) = self.ranks[r].proc.as_mut() {
                        p.pid = pid as i32;
                    }
                }
            }
            FromAgent::NotStarted { id, why } => {
                if let Some(r) = self.rank_of_id(id) {
                    if self.failure.is_none() {
                        let host = &self.remotes().hosts[h].as_ref().expect("a host").name;
                        crate::say!("mpiexec: rank {r} on host {host}: {why}; terminating the job");
                    }
                    self.ranks[r].exit = Some(Exit::Code(127));
                    self.fail(Failure::Launch);
                }
            }
            FromAgent::Output { id, stderr, line } => {
                if let Some(g) = self.remotes().gates.get(&id) {
                    g.line(stderr, &line);
                }
            }
            FromAgent::Ended { id, how } => {
                self.remotes().gates.remove(&id);
                if let Some(r) = self.rank_of_id(id) {
                    let exit = match how {
                        Ended::Code(c) => Exit::Code(c),
                        Ended::Signal(s) => Exit::Signal(s),
                    };
                    self.process_ended(r, exit, None);
                }
            }
        }
    }

    /// Heartbeats to every agent when due; hosts silent past the timeout
    /// are lost.
    pub(super) fn beat(&mut self) {
        let Some(r) = self.remote.as_mut() else {
            return;
        };
        let send = Instant::now() >= r.next_beat;
        if send {
            r.next_beat = Instant::now() + Duration::from_millis(HEARTBEAT_MS);
            self.expire_handshakes();
        }
        let Some(r) = self.remote.as_mut() else {
            return;
        };
        let timeout = self.opts.heartbeat_timeout;
        // `beat` runs at least every heartbeat: a much longer gap means
        // mpiexec itself did not run (a loaded or paused machine), and the
        // hosts' silence meanwhile says nothing of them. They get a whole
        // timeout again (a healthy host was declared lost at load 20).
        let now = Instant::now();
        if now.saturating_duration_since(r.last_check) > timeout / 2 {
            for x in r.hosts.iter_mut().flatten() {
                x.heard = x.heard.max(now);
            }
        }
        r.last_check = now;
        let mut silent = Vec::new();
        for (h, x) in r.hosts.iter().enumerate() {
            let Some(x) = x else { continue };
            if x.lost {
                continue;
            }
            // An agent below another is watched by that one (it says
            // `Lost`); mpiexec only waits for it to connect.
            if x.parent.is_some() && (x.joined || !x.launched) {
                continue;
            }
            if send && x.conn.is_some() && !x.link.send(&ToAgent::Alive) {
                silent.push((h, "its agent cannot be written to".to_string()));
            } else if x.heard.elapsed() > x.silence_allowed(timeout) {
                let what = if x.joined {
                    format!("no heartbeat for {:.2} s", x.heard.elapsed().as_secs_f64())
                } else {
                    format!(
                        "its agent did not connect within {:.1} s",
                        x.silence_allowed(timeout).as_secs_f64()
                    )
                };
                silent.push((h, what));
            }
        }
        for (h, why) in silent {
            self.host_lost(h, &why);
        }
    }

    /// An agent's process ended (the launcher, or the agent it became).
    pub(super) fn agent_ended(&mut self, pid: i32, exit: Exit) -> bool {
        let Some(r) = self.remote.as_ref() else {
            return false;
        };
        let Some(h) = r
            .hosts
            .iter()
            .position(|x| x.as_ref().is_some_and(|x| x.launched && x.pid == pid))
        else {
            return false;
        };
        let how = match exit {
            Exit::Code(c) => format!("its agent (or the launcher command) exited with status {c}"),
            Exit::Signal(s) => format!(
                "its agent was killed by signal {s} ({})",
                process::signal_name(s)
            ),
        };
        self.host_lost(h, &how);
        true
    }

    /// At the end: every agent ends its processes and itself.
    pub(super) fn shutdown_agents(&mut self) {
        let Some(r) = self.remote.as_mut() else {
            return;
        };
        let grace = (self.opts.kill_grace_secs * 1000.0) as u32;
        // (Never pid 0: a signal to it is one to mpiexec's whole group.)
        let pids: Vec<i32> = (r.hosts.iter().flatten())
            .filter(|x| x.launched && x.pid > 0)
            .map(|x| x.pid)
            .collect();
        // The agents at the top pass it down, and wait for those below.
        for x in r.hosts.iter().flatten().filter(|x| x.parent.is_none()) {
            x.link.send(&ToAgent::Shutdown { grace_ms: grace });
        }
        let depth = (0..r.hosts.len())
            .map(|g| {
                (0..r.hosts.len())
                    .filter(|&h| h != g && r.below(h, g))
                    .count()
            })
            .max()
            .unwrap_or(0);
        let each = Duration::from_millis(grace as u64 + 2000);
        let deadline = Instant::now() + each * (depth as u32 + 1);
        while !pids.iter().all(|&p| process::ended(p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        for &p in &pids {
            process::signal(p, libc::SIGKILL);
            process::wait_for(p);
        }
    }
}
