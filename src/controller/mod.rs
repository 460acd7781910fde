//! `mpiexec`: starts the job through the node agent, runs the bootstrap
//! fence, watches every rank, and decides what a failure means: with
//! `--recovery none` (the standard) the job ends; with `stages` or `reinit`
//! the failed rank is replaced and every rank rolls back to the committed
//! epoch (the ranks differ in what they do about it, see `api::mpix` and
//! `api::reinit`); with `cpr` every rank is killed and the job relaunched.
//! A replacement is a spare process when one is waiting (`spares`).

use crate::agent::{Launch, RankProc};
use crate::cli::{self, Parsed, RecoveryMode, USAGE};
use crate::leftovers::{self, ControlDir, JobFiles};
use crate::spares::{Spares, Taken};
use mpistages_control::inject::{self, Trigger};
use mpistages_control::proto::{self, Decoder, ToController, ToRank};
use mpistages_control::stream::{self, ControlStream};
use mpistages_sys::epoll::{self, Epoll};
use mpistages_sys::process::{self, Exit, SignalFd};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

mod agreement;
mod barrier;
mod finalize;
mod injections;
mod liveness;
mod messages;
mod names;
pub(crate) mod recoveries;
mod recovery;
mod relayed;
mod remote;
mod spawn;
pub mod stdin;
pub(crate) mod traffic;
mod tree;
mod ulfm;

const TOKEN_LISTENER: u64 = 1;
const TOKEN_SIGNALS: u64 = 2;
const TOKEN_CONN: u64 = 1 << 32;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[derive(Default)]
struct RankState {
    proc: Option<RankProc>,
    /// Transport address of the current process, once it said hello.
    hello: Option<std::net::SocketAddr>,
    /// Control connection of the current process.
    conn: Option<usize>,
    finalizing: bool,
    /// The job process ids of its `MPI_COMM_WORLD` (the job's first
    /// ranks, or those of its spawn).
    world: std::ops::Range<usize>,
    exit: Option<Exit>,
    /// The current process got its Welcome (it is part of the job).
    welcomed: bool,
    /// The generation its Welcome gave it (what its handshakes say).
    born: u32,
    /// When fault injection killed the current process.
    killed_at: Option<Instant>,
    /// A spawned process ended by mpiexec because its spawn failed: its
    /// end is no failure of the job.
    abandoned: bool,
    /// The current process was seen dying by its liveness page (its
    /// failure is handled; `SIGCHLD` then only records its exit).
    seen_dead: bool,
}

/// How a control connection reaches its process.
enum Wire {
    /// Its own socket, and what has come of it not yet decoded.
    Stream(ControlStream, Decoder),
    /// Through the agent of host `host`, its connection number `conn` there.
    Agent { host: usize, conn: u32 },
}

struct Conn {
    wire: Wire,
    rank: Option<usize>,
    /// A spare's connection: the rank it was made the replacement of.
    assigned: Option<usize>,
}

impl Conn {
    fn new(wire: Wire) -> Conn {
        Conn {
            wire,
            rank: None,
            assigned: None,
        }
    }
}

/// What became of an `--inject` spec.
#[derive(Clone, Debug, PartialEq)]
enum Fate {
    Pending,
    Fired,
    /// It can no longer fire, for this reason.
    Missed(String),
}

/// `mpiexec`'s exit status when the job succeeded but an `--inject` spec
/// never fired: the user asked for a failure and got none.
pub const EXIT_NOT_INJECTED: i32 = 3;

/// Why the job ended early.
enum Failure {
    Abort {
        code: i32,
    },
    /// The job ran past `--timeout` / `MPIEXEC_TIMEOUT`.
    Timeout,
    Rank {
        exit: Exit,
    },
    Signal(i32),
    Launch,
}

struct Job {
    opts: cli::Options,
    key: String,
    epoll: Epoll,
    listener: UnixListener,
    signals: SignalFd,
    ranks: Vec<RankState>,
    conns: Vec<Option<Conn>>,
    failure: Option<Failure>,
    teardown: Option<Instant>,
    killed: bool,
    launch: Launch,
    forwarders: Vec<std::thread::JoinHandle<()>>,
    started: Instant,
    /// Every rank got its first Welcome.
    bootstrapped: bool,
    /// Ranks welcomed with a new process since the last resume.
    joined: Vec<usize>,
    /// Generations, committed epochs and recoveries: the decisions.
    rec: recoveries::Recoveries,
    /// What became of each `--inject` spec.
    fired: Vec<Fate>,
    spares: Spares,
    /// Hosts other than this machine, when the job has any.
    remote: Option<remote::Remotes>,
    /// `--restart`: where the job starts from (its ranks read those files
    /// under the identity of the job that wrote them).
    restart: Option<crate::restart::Found>,
    /// `--recovery ulfm`: the ranks that died (the job went on), and the
    /// agreements in progress.
    ulfm_dead: std::collections::BTreeSet<u32>,
    agreements: agreement::Agreements,
    finalize: finalize::FinalizeBarriers,
    /// `MPI_Comm_spawn` requests waiting, and the one under way.
    spawn_queue: std::collections::VecDeque<spawn::SpawnRequest>,
    spawning: Option<spawn::Spawning>,
    /// `MPI_Publish_name`: service name → port name, for the whole job.
    names: names::Names,
    /// Deaths the liveness watchers saw.
    deaths: std::sync::Arc<liveness::Deaths>,
    /// Control messages since the recovery under way began.
    traffic: traffic::Traffic,
    /// Failed ranks whose notice is held while the others of their host
    /// are handled (`recovery::hold_failures`).
    holding_failures: bool,
    held_failures: Vec<u32>,
}

pub fn main() -> ! {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let code = match cli::parse(&argv) {
        Err(e) => {
            // The one line that matters, not buried under the help.
            crate::say!("mpiexec: {e}\nRun 'mpiexec --help' for its options.");
            2
        }
        Ok(Parsed::Help) => {
            print!("{USAGE}");
            0
        }
        Ok(Parsed::Version) => {
            println!("mpiexec (mpistages) {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Ok(Parsed::Run(o)) => match run(*o) {
            Ok(c) => c,
            Err(e) => {
                crate::say!("mpiexec: {e}");
                1
            }
        },
    };
    std::process::exit(code)
}

fn run(opts: cli::Options) -> std::io::Result<i32> {
    // Block the signals before any thread starts, so all inherit the mask.
    let signals = SignalFd::new(&[libc::SIGCHLD, libc::SIGINT, libc::SIGTERM, libc::SIGHUP])?;
    // What jobs whose mpiexec was killed left behind goes first.
    leftovers::sweep_control_dirs(&ControlDir::base());
    let dir = ControlDir::create()?;
    let sock = dir.path().join("control");
    let listener = UnixListener::bind(&sock)?;
    listener.set_nonblocking(true)?;
    let mut k = [0u8; 16];
    process::random_bytes(&mut k)?;
    let epoll = Epoll::new()?;
    epoll.add(listener.as_raw_fd(), epoll::READABLE, TOKEN_LISTENER)?;
    epoll.add(signals.as_raw_fd(), epoll::READABLE, TOKEN_SIGNALS)?;
    let deaths = liveness::Deaths::new()?;
    epoll.add(
        deaths.bell.as_raw_fd(),
        epoll::READABLE,
        liveness::TOKEN_DEATHS,
    )?;
    let remote = remote::Remotes::start(&opts, &hex(&k), &epoll)?;
    let launch = Launch {
        apps: opts.apps.clone(),
        env: opts.env.clone(),
        bind: opts.bind,
        cpus: process::allowed_cpus(),
        rank_host: opts.placement.clone(),
        partner_shift: crate::hosts::partner_shift(&opts.placement),
        rank_hosts_at_start: (opts.placement.iter())
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(","),
        size: opts.ranks,
        control: sock.to_string_lossy().into_owned(),
        key: hex(&k),
        job_id: std::process::id().to_string(),
        output: std::sync::Arc::new(opts.output.clone()),
        report_bindings: opts.report_bindings,
    };
    let spec = opts
        .ckpt
        .clone()
        .or_else(|| std::env::var(mpistages_control::env::CKPT).ok())
        .unwrap_or_default();
    let restart = match &opts.restart {
        Some(dir) => match crate::restart::prepare(dir, &spec, opts.ranks) {
            Ok(found) => Some(found),
            Err(e) => {
                crate::say!("mpiexec: {e}");
                return Ok(1);
            }
        },
        None => None,
    };
    let files = JobFiles::new(&spec, &launch.job_id);
    files.sweep_dead_jobs();
    files.claim();
    let mut rec = recoveries::Recoveries::new(
        opts.ranks,
        !opts.recovery.replaces_rank(),
        opts.max_restarts,
    );
    if let Some(found) = &restart {
        rec.restart_from(found.epoch, Instant::now());
    }
    let mut job = Job {
        key: launch.key.clone(),
        ranks: (0..opts.ranks)
            .map(|_| RankState {
                world: 0..opts.ranks,
                ..RankState::default()
            })
            .collect(),
        fired: vec![Fate::Pending; opts.inject.len()],
        opts,
        epoll,
        listener,
        signals,
        conns: Vec::new(),
        failure: None,
        teardown: None,
        killed: false,
        launch,
        forwarders: Vec::new(),
        started: Instant::now(),
        bootstrapped: false,
        joined: Vec::new(),
        rec,
        spares: Spares::default(),
        remote,
        restart,
        ulfm_dead: Default::default(),
        agreements: Default::default(),
        finalize: Default::default(),
        spawn_queue: Default::default(),
        spawning: None,
        names: Default::default(),
        deaths,
        traffic: traffic::Traffic::default(),
        holding_failures: false,
        held_failures: Vec::new(),
    };
    for r in 0..job.opts.ranks {
        if let Err(e) = job.spawn(r) {
            crate::say!(
                "mpiexec: cannot start '{}': {e}",
                job.opts.app_of(r).program
            );
            job.fail(Failure::Launch);
            break;
        }
    }
    job.event_loop();
    job.shutdown_agents();
    job.spares.dismiss(true);
    let unfired = job.report_unfired();
    // Output of the last lines may still be in flight; give it a moment.
    let deadline = Instant::now() + Duration::from_secs(2);
    for f in std::mem::take(&mut job.forwarders) {
        while !f.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    drop(dir);
    files.remove_at_end();
    Ok(match job.exit_code() {
        0 if unfired => EXIT_NOT_INJECTED,
        code => code,
    })
}

impl Job {
    fn live(&self) -> impl Iterator<Item = &RankProc> {
        self.ranks
            .iter()
            .filter(|r| r.exit.is_none())
            .filter_map(|r| r.proc.as_ref())
    }

    fn event_loop(&mut self) {
        let mut evs = Vec::new();
        while self
            .ranks
            .iter()
            .any(|r| r.proc.is_some() && r.exit.is_none())
        {
            // Milliseconds until `t`, rounded up; -1 (sleep until an
            // event) when nothing is scheduled.
            let until = |t: Instant| {
                let us = t.saturating_duration_since(Instant::now()).as_micros();
                us.div_ceil(1000).min(i32::MAX as u128) as i32
            };
            let mut timeout = match (self.teardown, self.next_timed_injection()) {
                (Some(t), _) if !self.killed => until(t),
                (None, Some(t)) => until(t),
                _ => -1,
            };
            if let Some(r) = &self.remote {
                let beat = until(r.next_beat(self.opts.heartbeat_timeout));
                timeout = if timeout < 0 { beat } else { timeout.min(beat) };
            }
            if let (Some(limit), None) = (self.opts.timeout, &self.failure) {
                let end = until(self.started + limit);
                timeout = if timeout < 0 { end } else { timeout.min(end) };
            }
            evs.clear();
            let _ = self.epoll.wait(&mut evs, timeout);
            for ev in evs.clone() {
                match ev.token {
                    TOKEN_LISTENER => self.accept(),
                    TOKEN_SIGNALS => self.on_signals(),
                    liveness::TOKEN_DEATHS => self.on_deaths(),
                    remote::TOKEN_AGENT_LISTENER => self.accept_agents(),
                    remote::TOKEN_CONTROL_TCP => self.accept_control_tcp(),
                    t if (remote::TOKEN_AGENT..TOKEN_CONN).contains(&t) => {
                        self.on_agent((t - remote::TOKEN_AGENT) as usize)
                    }
                    t if (remote::TOKEN_AGENT_HELLO..remote::TOKEN_AGENT).contains(&t) => {
                        self.on_agent_hello((t - remote::TOKEN_AGENT_HELLO) as usize)
                    }
                    t if t >= TOKEN_CONN => self.on_conn((t - TOKEN_CONN) as usize),
                    _ => {}
                }
            }
            self.fire_timed_injections();
            self.beat();
            if let (Some(limit), None) = (self.opts.timeout, &self.failure) {
                if self.started.elapsed() >= limit {
                    crate::say!(
                        "mpiexec: the job ran longer than its time limit of {} s (--timeout or \
                         MPIEXEC_TIMEOUT); terminating it",
                        limit.as_secs_f64()
                    );
                    self.fail(Failure::Timeout);
                }
            }
            if let Some(t) = self.teardown {
                if !self.killed && Instant::now() >= t {
                    for p in self.live() {
                        p.signal(libc::SIGKILL);
                    }
                    self.killed = true;
                }
            }
        }
    }

    fn fail(&mut self, f: Failure) {
        if self.failure.is_none() {
            self.failure = Some(f);
        }
        self.spares.dismiss(false);
        if self.teardown.is_none() {
            for p in self.live() {
                p.signal(libc::SIGTERM);
            }
            self.teardown =
                Some(Instant::now() + Duration::from_secs_f64(self.opts.kill_grace_secs));
        }
    }

    /// Starts spares up to `--spares`, outside a recovery (whose critical
    /// path they would slow down) and while the job runs normally.
    fn top_up_spares(&mut self) {
        let quiet = self.bootstrapped
            && self.rec.recovering().is_none()
            && self.failure.is_none()
            && !self.ranks.iter().any(|r| r.finalizing);
        if !quiet || self.opts.spares == 0 {
            return;
        }
        let env = self.job_env();
        match self.spares.top_up(self.opts.spares, &self.launch, &env) {
            Ok(f) => self.keep_forwarders(f),
            Err(e) => {
                crate::say!("mpiexec: cannot start a spare process: {e}; failed ranks get new processes instead");
                self.opts.spares = 0;
            }
        }
    }

    /// Environment every process of the job gets from mpiexec besides the
    /// launcher's own (recovery mode, checkpoint configuration).
    fn job_env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![(
            mpistages_control::env::RECOVERY,
            self.opts.recovery.name().to_string(),
        )];
        // Also when it comes from mpiexec's environment: a launcher (ssh)
        // need not pass that on to other hosts.
        let ckpt = self
            .opts
            .ckpt
            .clone()
            .or_else(|| std::env::var(mpistages_control::env::CKPT).ok());
        if let Some(c) = ckpt {
            env.push((mpistages_control::env::CKPT, c));
        }
        if let Some(f) = &self.restart {
            env.push((
                mpistages_control::env::RESTART_FROM,
                format!("{}:{}", f.job, f.epoch),
            ));
        }
        env
    }

    /// Starts (or restarts) a rank's process with the injection specs that
    /// concern it and have not fired.
    fn spawn(&mut self, rank: usize) -> std::io::Result<()> {
        let mut env = self.job_env();
        let injected = self.injections_for(rank);
        if !injected.is_empty() {
            env.push((inject::ENV, injected));
        }
        if let Some(rec) = self.rec.recovering() {
            env.push((mpistages_control::env::RESTART_EPOCH, rec.epoch.to_string()));
        }
        self.rehome(rank).map_err(std::io::Error::other)?;
        if self.through_agent(rank) {
            self.spawn_remote(rank, &env);
            return Ok(());
        }
        let started = self.launch.spawn(rank, self.rec.generation(), &env)?;
        self.keep_forwarders(started.forwarders);
        self.started(rank, started.proc);
        Ok(())
    }

    /// `p` is now rank `rank`'s process.
    /// Keeps the output forwarders of new processes, letting go of those
    /// whose process is gone: a finished thread that is never joined keeps
    /// its stack (mpiexec grew by ~17 KB per recovery), one whose handle is
    /// dropped is detached and freed.
    fn keep_forwarders(&mut self, new: Vec<std::thread::JoinHandle<()>>) {
        self.forwarders.retain(|f| !f.is_finished());
        self.forwarders.extend(new);
    }

    fn started(&mut self, rank: usize, p: RankProc) {
        if liveness::wanted(self.opts.recovery) {
            liveness::watch(&self.deaths, &p);
        }
        let st = &mut self.ranks[rank];
        st.seen_dead = false;
        st.proc = Some(p);
        st.exit = None;
        st.killed_at = None;
        self.rec.started(rank);
    }

    fn on_signals(&mut self) {
        while let Some(sig) = self.signals.read() {
            if sig == libc::SIGCHLD {
                self.reap();
            } else if self.failure.is_none() {
                crate::say!(
                    "mpiexec: caught {}; terminating the job",
                    process::signal_name(sig)
                );
                self.fail(Failure::Signal(sig));
            } else if let Some(Failure::Signal(_)) = self.failure {
                // A second Ctrl-C: do not wait for the grace period.
                for p in self.live() {
                    p.signal(libc::SIGKILL);
                }
                self.killed = true;
            }
        }
    }

    fn reap(&mut self) {
        // A death the watchers saw in the same wake-up is theirs: it was
        // seen before the teardown that `SIGCHLD` follows.
        self.on_deaths();
        while let Some((pid, exit)) = process::try_wait_any() {
            if let Some(conn) = self.spares.ended(pid) {
                if let Some(slot) = conn {
                    self.close(slot);
                }
                if self.failure.is_none() {
                    crate::say!("mpiexec: spare process (pid {pid}) ended ({exit:?}) before it was needed; a failed rank gets a new process instead");
                }
                continue;
            }
            if self.agent_ended(pid, exit) {
                continue;
            }
            let Some(r) = self.ranks.iter().position(|r| {
                r.proc
                    .as_ref()
                    .is_some_and(|p| p.remote.is_none() && p.pid == pid)
            }) else {
                continue;
            };
            if self.ranks[r].seen_dead {
                // Handled when its liveness page said it died; how it
                // ended is still news unless it was the usual SIGKILL.
                self.ranks[r].exit = Some(exit);
                let how = match exit {
                    Exit::Signal(libc::SIGKILL) => None,
                    Exit::Signal(s) => Some(format!(
                        "was killed by signal {s} ({})",
                        process::signal_name(s)
                    )),
                    Exit::Code(c) => Some(format!("exited with status {c}")),
                };
                if let Some(how) = how.filter(|_| self.failure.is_none()) {
                    crate::say!("mpiexec: rank {r} (pid {pid}) {how} (its failure was handled when it was seen dying)");
                }
                continue;
            }
            self.process_ended(r, exit, None);
        }
    }

    /// Rank `r`'s current process ended (`what`: how, when the exit
    /// status does not say it, e.g. a lost host).
    fn process_ended(&mut self, r: usize, exit: Exit, what: Option<String>) {
        let pid = self.ranks[r].proc.as_ref().map_or(0, |p| p.pid);
        // Read what the process said before it died (an `Injecting`
        // notice, `Finalizing`) before anything closes its connection:
        // SIGCHLD can arrive before epoll reports those last bytes.
        if let Some(slot) = self.ranks[r].conn {
            self.on_conn(slot);
        }
        let st = &mut self.ranks[r];
        st.exit = Some(exit);
        if st.abandoned {
            return;
        }
        if !st.welcomed {
            self.spawn_child_lost(r);
        }
        if self.rec.tearing_down_for_relaunch() {
            // `cpr`: the old job's processes going, whatever their end.
            self.relaunch_when_gone();
            return;
        }
        let st = &mut self.ranks[r];
        let clean =
            what.is_none() && exit == Exit::Code(0) && (st.finalizing || st.hello.is_none());
        if clean || self.failure.is_some() {
            return;
        }
        let what = what.unwrap_or_else(|| match exit {
            Exit::Signal(s) => {
                format!("was killed by signal {s} ({})", process::signal_name(s))
            }
            Exit::Code(0) => "exited with status 0 without calling MPI_Finalize".to_string(),
            Exit::Code(c) if st.finalizing => format!("exited with status {c}"),
            Exit::Code(c) => format!("exited with status {c} before MPI_Finalize"),
        });
        if self.opts.recovery == RecoveryMode::Ulfm && !st.finalizing {
            if !self.bootstrapped {
                // Before every rank is in: the others wait at the start-up
                // fence for its address, and there is no job to go on yet.
                crate::say!(
                    "mpiexec: rank {r} (pid {pid}) {what} before every rank had started (MPI_Init); ULFM tolerates failures of a running job only; terminating the job"
                );
                self.fail(Failure::Rank { exit });
                return;
            }
            self.ulfm_failed(r, pid, &what);
            return;
        }
        if self.opts.recovery != RecoveryMode::None && !st.finalizing {
            self.recover(r, &what);
            return;
        }
        if st.finalizing && self.opts.recovery != RecoveryMode::None {
            // Said in the words of the other unrecoverable cases.
            crate::say!(
                "mpiexec: rank {r} (pid {pid}) {what} after it called MPI_Finalize; cannot recover: a rank that has already called MPI_Finalize cannot take part in a recovery; terminating the job"
            );
        } else {
            // When it died (injected: the kill), for whoever restarts the
            // job and times the way back (`mpistages-bench`, mode restart).
            let failed_at = unix_time(self.ranks[r].killed_at.unwrap_or_else(Instant::now));
            crate::say!(
                "mpiexec: rank {r} (pid {pid}) {what}; terminating the job (failure at unix time {failed_at:.6})"
            );
        }
        self.fail(Failure::Rank { exit });
    }

    fn exit_code(&self) -> i32 {
        match self.failure {
            None => 0,
            Some(Failure::Abort { code }) => {
                let c = code & 0xff;
                if c == 0 {
                    1
                } else {
                    c
                }
            }
            Some(Failure::Rank {
                exit: Exit::Code(c),
            }) => {
                if c == 0 {
                    1
                } else {
                    c
                }
            }
            Some(Failure::Rank {
                exit: Exit::Signal(s),
            })
            | Some(Failure::Signal(s)) => 128 + s,
            Some(Failure::Launch) => 127,
            // As timeout(1) says it.
            Some(Failure::Timeout) => 124,
        }
    }
}

/// The wall-clock time (seconds since the Unix epoch) of an `Instant`
/// in the past: when a failure happened, printed so that whoever times
/// the way back (`mpistages-bench recovery`) can measure against it.
fn unix_time(t: Instant) -> f64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    now.as_secs_f64() - t.elapsed().as_secs_f64()
}
