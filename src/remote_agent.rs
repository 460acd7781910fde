//! `mpistages-agent`: the node agent on a host other than mpiexec's.
//! Started by the launcher command (`ip netns exec H`, `ssh H`, `srun`),
//! it connects back to mpiexec, reads the job key from its stdin (never
//! from its command line, which other users can see), then starts and
//! signals processes as mpiexec asks, reports how they end, forwards their
//! output line by line, and says it is alive. When mpiexec goes (its
//! connection ends or falls silent), every process the agent started ends
//! with it. With `--relay` its ranks reach mpiexec through it (`relay`);
//! with `--children`, the agents of other hosts too (`subtree`): it
//! connects to mpiexec or to its parent agent alike.
//!
//!   mpistages-agent --connect ADDR:PORT --host NAME [--relay]
//!                   [--children --silence-ms MS]             (key on stdin)

use crate::relay::{self, Relay};
use crate::subtree::{self, Subtree};
use mpistages_control::agent::{Ended, FromAgent, Start, ToAgent, HEARTBEAT_MS, MAX_LINE};
use mpistages_control::proto::{self, Decoder};
use mpistages_control::rankset::RankSet;
use mpistages_sys::epoll::{self, Epoll};
use mpistages_sys::process::{self, Exit, SignalFd};
use mpistages_sys::spawn::{Command, Stdin};
use mpistages_sys::timerfd::TimerFd;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN_CONN: u64 = 1;
const TOKEN_SIGNALS: u64 = 2;
const TOKEN_TIMER: u64 = 3;
/// The relay's window timer (its listener and connections have their own).
const TOKEN_FAN: u64 = 5;

/// mpiexec silent this long: it is gone, and so is the job.
const CONTROLLER_SILENCE: Duration = Duration::from_secs(5);

/// How long an ended process's output may still trail in before its end
/// is reported (a grandchild can hold the pipes open).
const OUTPUT_TAIL: Duration = Duration::from_secs(1);

/// The connection to mpiexec, shared by the threads that forward output.
#[derive(Clone)]
struct Link(Arc<Mutex<TcpStream>>);

impl Link {
    /// Sends `msg` whole. The socket is non-blocking (the event loop
    /// reads it): a write must wait while mpiexec is slow to read (a lost
    /// `Ended` hung a job of 1024 ranks: the plain `write_all` failed on a
    /// full buffer and the end was never reported).
    fn send(&self, msg: &FromAgent) -> bool {
        let bytes = proto::encode(msg);
        let s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        mpistages_sys::socket::send_whole(&*s, &bytes, CONTROLLER_SILENCE)
    }
}

struct Proc {
    id: u64,
    rank: u32,
    /// Output streams not yet at their end.
    open: Arc<AtomicUsize>,
    /// Its stdin, when mpiexec forwards its own to it.
    input: Option<std::sync::mpsc::Sender<Vec<u8>>>,
}

fn forward(
    link: Link,
    id: u64,
    stderr: bool,
    from: impl Read + Send + 'static,
    open: Arc<AtomicUsize>,
) {
    std::thread::spawn(move || {
        // Whole lines (or MAX_LINE pieces of a longer one): a program's
        // line can come in several writes (unbuffered stderr).
        let mut r = BufReader::with_capacity(MAX_LINE, from);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = match (&mut r).take(MAX_LINE as u64).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if !link.send(&FromAgent::Output {
                id,
                stderr,
                line: line[..n].to_vec(),
            }) {
                break;
            }
        }
        open.fetch_sub(1, Ordering::Release);
    });
}

/// Writes what mpiexec forwards to a process's stdin, in a thread of its
/// own so a process that does not read cannot stall the agent; dropping
/// the sender closes the stdin.
fn feed(mut to: std::fs::File) -> std::sync::mpsc::Sender<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        for data in rx {
            if to.write_all(&data).is_err() {
                break;
            }
        }
    });
    tx
}

fn start(link: &Link, s: Start) -> Result<(i32, Proc), String> {
    let mut cmd = Command::new(&s.program);
    cmd.args(&s.args)
        .envs(s.env.iter().map(|(k, v)| (k, v)))
        .stdin(if s.stdin { Stdin::Piped } else { Stdin::Null });
    if let Some(d) = &s.wdir {
        cmd.current_dir(d);
    }
    let cpus: Vec<usize> = s.cpus.iter().map(|&c| c as usize).collect();
    cmd.cpus(&cpus);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start '{}': {e}", s.program))?;
    let input = child.stdin.map(feed);
    let open = Arc::new(AtomicUsize::new(2));
    forward(link.clone(), s.id, false, child.stdout, open.clone());
    forward(link.clone(), s.id, true, child.stderr, open.clone());
    // The child is reaped with waitpid(-1) on SIGCHLD.
    Ok((
        child.pid,
        Proc {
            id: s.id,
            rank: s.rank,
            open,
            input,
        },
    ))
}

/// Reports `id`'s end once its output has all been forwarded (or after
/// `OUTPUT_TAIL`), so mpiexec prints every line before it counts the end.
fn report_end(link: &Link, p: Proc, exit: Exit) {
    let link = link.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + OUTPUT_TAIL;
        while p.open.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let how = match exit {
            Exit::Code(c) => Ended::Code(c),
            Exit::Signal(s) => Ended::Signal(s),
        };
        link.send(&FromAgent::Ended { id: p.id, how });
    });
}

struct Agent {
    link: Link,
    conn: TcpStream,
    dec: Decoder,
    procs: HashMap<i32, Proc>,
    heard: Instant,
    /// The job's node-local directories on this host (known from the
    /// first Start), removed when mpiexec ends the job.
    files: Option<crate::leftovers::JobFiles>,
    ep: Epoll,
    /// The ranks' control connections, with `--relay`.
    relay: Option<Relay>,
    /// The agents below this one, with `--children`.
    tree: Option<Subtree>,
    /// This host's name (its part of a `Spread`).
    host: String,
}

impl Agent {
    fn end_all(&mut self, grace: Duration) {
        for &pid in self.procs.keys() {
            process::kill_group(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while !self.procs.keys().all(|&pid| process::ended(pid)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        for &pid in self.procs.keys() {
            process::kill_group(pid, libc::SIGKILL);
        }
    }

    /// Handles what mpiexec sent; false when the agent must end.
    fn on_conn(&mut self) -> bool {
        let mut buf = [0u8; 4096];
        loop {
            match self.conn.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => self.dec.push(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        self.heard = Instant::now();
        loop {
            match self.dec.next_message::<ToAgent>() {
                Ok(None) => return true,
                Ok(Some(ToAgent::Alive)) => {}
                Ok(Some(ToAgent::Start(mut s))) => {
                    if let Some(r) = &mut self.relay {
                        // Its ranks reach mpiexec through this agent.
                        s.env
                            .push((mpistages_control::env::CONTROL.into(), r.control()));
                        r.started(s.rank);
                    }
                    let (id, rank) = (s.id, s.rank);
                    if self.files.is_none() {
                        let var = |k: &str| {
                            s.env
                                .iter()
                                .rev()
                                .find(|(n, _)| n == k)
                                .map_or(String::new(), |(_, v)| v.clone())
                        };
                        self.files = Some(crate::leftovers::JobFiles::new(
                            &var(mpistages_control::env::CKPT),
                            &var(mpistages_control::env::JOB_ID),
                        ));
                    }
                    match start(&self.link, s) {
                        Ok((pid, p)) => {
                            self.procs.insert(pid, p);
                            self.link.send(&FromAgent::Started {
                                id,
                                pid: pid as u32,
                            });
                        }
                        Err(why) => {
                            if let Some(r) = &mut self.relay {
                                let link = self.link.clone();
                                r.ended(rank, &mut |m| link.send(m));
                            }
                            self.link.send(&FromAgent::NotStarted { id, why });
                        }
                    }
                }
                Ok(Some(ToAgent::Input { id, data })) => {
                    if let Some(p) = self.procs.values_mut().find(|p| p.id == id) {
                        if data.is_empty() {
                            p.input = None;
                        } else if let Some(tx) = &p.input {
                            let _ = tx.send(data);
                        }
                    }
                }
                Ok(Some(ToAgent::Signal { id, signal })) => {
                    if let Some((&pid, _)) = self.procs.iter().find(|(_, p)| p.id == id) {
                        process::kill_group(pid, signal);
                    }
                }
                Ok(Some(ToAgent::Relay { conns, msg })) => {
                    if let Some(r) = &mut self.relay {
                        let link = self.link.clone();
                        r.down(&conns, &msg, &mut |m| link.send(m));
                    }
                }
                Ok(Some(ToAgent::Close { conn })) => {
                    if let Some(r) = &mut self.relay {
                        let link = self.link.clone();
                        r.close(conn, &self.ep, &mut |m| link.send(m));
                    }
                }
                Ok(Some(ToAgent::Via { host, msg })) => {
                    if let Some(t) = &mut self.tree {
                        t.down_via(&host, msg, &mut self.relay);
                    }
                }
                Ok(Some(ToAgent::Spread { parts, msg })) => {
                    let (own, below): (Vec<_>, Vec<_>) =
                        parts.into_iter().partition(|(h, _)| *h == self.host);
                    let mut conns = RankSet::new();
                    for (_, c) in &own {
                        conns.union(c);
                    }
                    // This host's first: its fan learns of the notice (the
                    // reports it announces) before any come from below.
                    if let Some(r) = &mut self.relay {
                        let link = self.link.clone();
                        r.down(&conns, &msg, &mut |m| link.send(m));
                    }
                    if let Some(t) = &mut self.tree {
                        t.spread(below, &msg);
                    }
                }
                Ok(Some(ToAgent::Shutdown { grace_ms })) => {
                    if let Some(t) = &mut self.tree {
                        t.shutdown(Duration::from_millis(grace_ms as u64));
                    }
                    self.end_all(Duration::from_millis(grace_ms as u64));
                    // Only at the job's end: an agent cut off from mpiexec
                    // leaves them (the job may go on elsewhere).
                    if let Some(f) = &self.files {
                        f.remove_node_local();
                    }
                    return false;
                }
                Err(e) => {
                    crate::say!("mpistages-agent: mpiexec sent a malformed message: {e}");
                    return false;
                }
            }
        }
    }

    /// An event of the agents below: one connecting or sending. False when
    /// the link up cannot be written to.
    fn on_tree(&mut self, token: u64) -> bool {
        let Some(t) = &mut self.tree else {
            return true;
        };
        if token == subtree::TOKEN_LISTENER {
            t.accept(&self.ep);
            return true;
        }
        let link = self.link.clone();
        let i = (token - subtree::TOKEN_CHILD) as usize;
        t.on_child(i, &self.ep, &mut self.relay, &mut |m| link.send(m))
    }

    /// An event of the relay's: a rank connecting, sending, or a window
    /// passing. False when mpiexec cannot be written to.
    fn on_relay(&mut self, token: u64) -> bool {
        let Some(r) = &mut self.relay else {
            return true;
        };
        let link = self.link.clone();
        let mut up = |m: &FromAgent| link.send(m);
        match token {
            relay::TOKEN_LISTENER => {
                r.accept(&self.ep);
                true
            }
            TOKEN_FAN => r.due(&mut up),
            t => r.on_conn((t - relay::TOKEN_CONN) as u32, &self.ep, &mut up),
        }
    }

    fn reap(&mut self) {
        let mut ended = Vec::new();
        while let Some((pid, exit)) = process::try_wait_any() {
            if let Some(p) = self.procs.remove(&pid) {
                ended.push((p, exit));
            }
        }
        // What they said before they ended goes up before their ends (their
        // sockets are closed now: all they sent is there to read).
        if let Some(r) = &mut self.relay {
            let link = self.link.clone();
            let mut up = |m: &FromAgent| link.send(m);
            r.drain(&self.ep, &mut up);
            for (p, _) in &ended {
                r.ended(p.rank, &mut up);
            }
        }
        for (p, exit) in ended {
            report_end(&self.link, p, exit);
        }
    }
}

fn arg(args: &[String], name: &str) -> Result<String, String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .ok_or_else(|| format!("{name} is missing"))
}

fn run(args: &[String]) -> Result<(), String> {
    let connect = arg(args, "--connect")?;
    let host = arg(args, "--host")?;
    let relaying = args.iter().any(|a| a == "--relay");
    let children = args.iter().any(|a| a == "--children");
    let mut key = String::new();
    std::io::stdin()
        .read_line(&mut key)
        .map_err(|e| format!("reading the job key from stdin: {e}"))?;
    // Signals are blocked before any thread starts, so all inherit it.
    let signals = SignalFd::new(&[libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP])
        .map_err(|e| format!("signalfd: {e}"))?;
    let conn = TcpStream::connect(&connect).map_err(|e| format!("connecting to {connect}: {e}"))?;
    let _ = conn.set_nodelay(true);
    let link = Link(Arc::new(Mutex::new(
        conn.try_clone().map_err(|e| e.to_string())?,
    )));
    if !link.send(&FromAgent::Hello {
        key: key.trim().as_bytes().to_vec(),
        host: host.clone(),
    }) {
        return Err(format!("mpiexec at {connect} closed the connection"));
    }
    conn.set_nonblocking(true).map_err(|e| e.to_string())?;
    let ep = Epoll::new().map_err(|e| e.to_string())?;
    let timer = TimerFd::new().map_err(|e| e.to_string())?;
    let fan_timer = TimerFd::new().map_err(|e| e.to_string())?;
    let relay = match relaying {
        true => {
            crate::leftovers::sweep_control_dirs(&crate::leftovers::ControlDir::base());
            Some(Relay::new(&ep).map_err(|e| format!("the ranks' control socket: {e}"))?)
        }
        false => None,
    };
    let tree = match children {
        true => {
            let silence = arg(args, "--silence-ms")?
                .parse()
                .map_err(|_| "--silence-ms needs milliseconds".to_string())?;
            let ip = conn.local_addr().map_err(|e| e.to_string())?.ip();
            let (t, addr) = Subtree::new(
                ip,
                key.trim().as_bytes(),
                Duration::from_millis(silence),
                &ep,
            )
            .map_err(|e| format!("the agents' listener: {e}"))?;
            if !link.send(&FromAgent::Listening { addr }) {
                return Err(format!("mpiexec at {connect} closed the connection"));
            }
            Some(t)
        }
        false => None,
    };
    let beat = Duration::from_millis(HEARTBEAT_MS);
    timer.arm(beat);
    for (fd, token) in [
        (conn.as_raw_fd(), TOKEN_CONN),
        (signals.as_raw_fd(), TOKEN_SIGNALS),
        (timer.as_raw_fd(), TOKEN_TIMER),
        (fan_timer.as_raw_fd(), TOKEN_FAN),
    ] {
        ep.add(fd, epoll::READABLE, token)
            .map_err(|e| e.to_string())?;
    }
    let mut agent = Agent {
        link,
        conn,
        dec: Decoder::for_agent_link(),
        procs: HashMap::new(),
        heard: Instant::now(),
        files: None,
        ep,
        relay,
        tree,
        host,
    };
    let mut evs = Vec::new();
    loop {
        evs.clear();
        let _ = agent.ep.wait(&mut evs, -1);
        for ev in evs.clone() {
            match ev.token {
                subtree::TOKEN_LISTENER | subtree::TOKEN_CHILD.. => {
                    if !agent.on_tree(ev.token) {
                        crate::say!("mpistages-agent: cannot write to mpiexec; ending this host's processes");
                        agent.end_all(Duration::from_secs(2));
                        return Ok(());
                    }
                }
                relay::TOKEN_LISTENER | TOKEN_FAN | relay::TOKEN_CONN.. => {
                    if ev.token == TOKEN_FAN {
                        fan_timer.drain();
                    }
                    if !agent.on_relay(ev.token) {
                        crate::say!("mpistages-agent: cannot write to mpiexec; ending this host's processes");
                        agent.end_all(Duration::from_secs(2));
                        return Ok(());
                    }
                }
                TOKEN_CONN => {
                    if !agent.on_conn() {
                        agent.end_all(Duration::from_secs(2));
                        return Ok(());
                    }
                }
                TOKEN_SIGNALS => {
                    while let Some(sig) = signals.read() {
                        if sig == libc::SIGCHLD {
                            agent.reap();
                        } else {
                            agent.end_all(Duration::from_secs(2));
                            return Ok(());
                        }
                    }
                }
                _ => {
                    timer.drain();
                    timer.arm(beat);
                    let link = agent.link.clone();
                    let below_ok = match &mut agent.tree {
                        Some(t) => t.beat(&agent.ep, &mut agent.relay, &mut |m| link.send(m)),
                        None => true,
                    };
                    if agent.heard.elapsed() > CONTROLLER_SILENCE
                        || !below_ok
                        || !agent.link.send(&FromAgent::Alive)
                    {
                        crate::say!(
                            "mpistages-agent: mpiexec fell silent; ending this host's processes"
                        );
                        agent.end_all(Duration::from_secs(2));
                        return Ok(());
                    }
                }
            }
        }
        if let Some(after) = agent.relay.as_ref().and_then(Relay::next_due) {
            fan_timer.arm(after.max(Duration::from_micros(100)));
        }
    }
}

pub fn main() -> ! {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match run(&args) {
        Ok(()) => 0,
        Err(e) => {
            crate::say!("mpistages-agent: {e}");
            1
        }
    };
    std::process::exit(code)
}
