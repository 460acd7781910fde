//! `mpiexec`: starts the job through the node agent, runs the bootstrap
//! fence, watches every rank, and decides what a failure means: with
//! `--recovery none` (the standard) the job ends; with `stages` or `reinit`
//! the failed rank is replaced and every rank rolls back to the committed
//! epoch (the ranks differ in what they do about it, see `api::mpix` and
//! `api::reinit`); with `cpr` every rank is killed and the job relaunched.
//! A replacement is a spare process when one is waiting (`spares`).

use crate::agent::{Launch, RankProc};
use crate::cli::{self, Parsed, RecoveryMode, USAGE};
use crate::leftovers::{self, JobFiles};
use crate::spares::{Spares, Taken};
use mpistages::control::inject::{self, Trigger};
use mpistages::control::proto::{self, Decoder, ToController, ToRank};
use mpistages::sys::epoll::{self, Epoll};
use mpistages::sys::process::{self, Exit, SignalFd};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const TOKEN_LISTENER: u64 = 1;
const TOKEN_SIGNALS: u64 = 2;
const TOKEN_CONN: u64 = 1 << 32;

/// A private directory for the job's control socket, removed on drop.
struct JobDir(PathBuf);

impl JobDir {
    fn base() -> PathBuf {
        std::env::var_os("TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| "/tmp".into())
    }

    fn create() -> std::io::Result<JobDir> {
        use std::os::unix::fs::DirBuilderExt;
        let mut r = [0u8; 8];
        process::random_bytes(&mut r)?;
        let base = Self::base();
        let dir = base.join(format!("mpistages-{}-{}", std::process::id(), hex(&r)));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(JobDir(dir))
    }
}

impl Drop for JobDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[derive(Default)]
struct RankState {
    proc: Option<RankProc>,
    /// Transport address of the current process, once it said hello.
    hello: Option<String>,
    /// Control connection of the current process.
    conn: Option<usize>,
    finalizing: bool,
    exit: Option<Exit>,
    /// The current process got its Welcome (it is part of the job).
    welcomed: bool,
    /// Newest checkpoint epoch the rank completed.
    epoch: u64,
    /// Newest epoch the rank reported durable on its pfs level.
    durable: Option<u64>,
    /// Generation at which the rank reported itself halted / ready.
    halted: Option<u32>,
    ready: Option<u32>,
    /// What the rank's Ready said it holds (see `ToController::Ready`).
    newest: Option<u64>,
    /// Generation and epoch of the rank's last completed restore.
    restored: Option<(u32, u64)>,
    /// When fault injection killed the current process.
    killed_at: Option<Instant>,
}

struct Conn {
    stream: UnixStream,
    dec: Decoder,
    rank: Option<usize>,
    /// A spare's connection: the rank it was made the replacement of.
    assigned: Option<usize>,
}

/// A recovery in progress, with its timeline.
struct Recovering {
    number: usize,
    /// The ranks being replaced (every rank when the job is relaunched).
    failed: Vec<usize>,
    /// The epoch every rank rolls back to.
    epoch: u64,
    /// Kill time when known (injected), else detection.
    start: Instant,
    detected: Instant,
    propagated: Option<Instant>,
    spawned: Option<Instant>,
    restored: Option<Instant>,
    /// Every rank was told to resume (then the recovery waits for every
    /// rank to confirm its restore before it is reported done).
    resumed: Option<Instant>,
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
    Abort { code: i32 },
    Rank { exit: Exit },
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
    /// Bumped at each failure; messages of older generations are fenced off.
    generation: u32,
    /// Newest epoch every rank completed.
    committed: u64,
    /// Newest epoch every rank has on its pfs level.
    durable: Option<u64>,
    restarts: usize,
    recoveries: usize,
    recovering: Option<Recovering>,
    /// A recovery whose ranks resumed and are restoring their data: done
    /// once every rank confirmed (a restore can still fail, or fall back
    /// to an older epoch than the committed one).
    confirming: Option<Recovering>,
    /// What became of each `--inject` spec.
    fired: Vec<Fate>,
    spares: Spares,
}

pub fn main() -> ! {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let code = match cli::parse(&argv) {
        Err(e) => {
            eprintln!("mpiexec: {e}\n\n{USAGE}");
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
        Ok(Parsed::Run(o)) => match run(o) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("mpiexec: {e}");
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
    leftovers::sweep_control_dirs(&JobDir::base());
    let dir = JobDir::create()?;
    let sock = dir.0.join("control");
    let listener = UnixListener::bind(&sock)?;
    listener.set_nonblocking(true)?;
    let mut k = [0u8; 16];
    process::random_bytes(&mut k)?;
    let epoll = Epoll::new()?;
    epoll.add(listener.as_raw_fd(), epoll::READABLE, TOKEN_LISTENER)?;
    epoll.add(signals.as_raw_fd(), epoll::READABLE, TOKEN_SIGNALS)?;
    let launch = Launch {
        program: opts.program.clone(),
        args: opts.args.clone(),
        env: opts.env.clone(),
        size: opts.ranks,
        control: sock.to_string_lossy().into_owned(),
        key: hex(&k),
        job_id: std::process::id().to_string(),
        tag_output: opts.tag_output,
    };
    let spec = opts
        .ckpt
        .clone()
        .or_else(|| std::env::var(mpistages::control::env::CKPT).ok())
        .unwrap_or_default();
    let files = JobFiles::new(&spec, &launch.job_id);
    files.sweep_dead_jobs();
    let mut job = Job {
        key: launch.key.clone(),
        ranks: (0..opts.ranks).map(|_| RankState::default()).collect(),
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
        generation: 0,
        committed: 0,
        durable: None,
        restarts: 0,
        recoveries: 0,
        recovering: None,
        confirming: None,
        spares: Spares::default(),
    };
    for r in 0..job.opts.ranks {
        if let Err(e) = job.spawn(r) {
            eprintln!("mpiexec: cannot start '{}': {e}", job.opts.program);
            job.fail(Failure::Launch);
            break;
        }
    }
    job.event_loop();
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
            let timeout = match (self.teardown, self.next_timed_injection()) {
                (Some(t), _) if !self.killed => until(t),
                (None, Some(t)) => until(t),
                _ => -1,
            };
            evs.clear();
            let _ = self.epoll.wait(&mut evs, timeout);
            for ev in evs.clone() {
                match ev.token {
                    TOKEN_LISTENER => self.accept(),
                    TOKEN_SIGNALS => self.on_signals(),
                    t if t >= TOKEN_CONN => self.on_conn((t - TOKEN_CONN) as usize),
                    _ => {}
                }
            }
            self.fire_timed_injections();
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

    fn accept(&mut self) {
        while let Ok((stream, _)) = self.listener.accept() {
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let slot = self
                .conns
                .iter()
                .position(Option::is_none)
                .unwrap_or_else(|| {
                    self.conns.push(None);
                    self.conns.len() - 1
                });
            if self
                .epoll
                .add(
                    stream.as_raw_fd(),
                    epoll::READABLE,
                    TOKEN_CONN + slot as u64,
                )
                .is_ok()
            {
                self.conns[slot] = Some(Conn {
                    stream,
                    dec: Decoder::default(),
                    rank: None,
                    assigned: None,
                });
            }
        }
    }

    fn close(&mut self, slot: usize) {
        if let Some(c) = self.conns[slot].take() {
            let _ = self.epoll.delete(c.stream.as_raw_fd());
        }
        // The slot may be reused by another process's connection.
        for r in &mut self.ranks {
            if r.conn == Some(slot) {
                r.conn = None;
            }
        }
        self.spares.disconnected(slot);
    }

    fn on_conn(&mut self, slot: usize) {
        let mut buf = [0u8; 4096];
        let mut closed = false;
        let Some(c) = self.conns[slot].as_mut() else {
            return;
        };
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => c.dec.push(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        loop {
            let Some(c) = self.conns[slot].as_mut() else {
                return;
            };
            match c.dec.next_message::<ToController>() {
                Ok(Some(msg)) => {
                    if let Err(why) = self.on_message(slot, msg) {
                        eprintln!("mpiexec: dropped a control connection: {why}");
                        self.close(slot);
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    eprintln!("mpiexec: dropped a control connection: {e}");
                    self.close(slot);
                    return;
                }
            }
        }
        if closed {
            self.close(slot);
        }
    }

    fn on_message(&mut self, slot: usize, msg: ToController) -> Result<(), String> {
        let conn_rank = self.conns[slot].as_ref().and_then(|c| c.rank);
        match (msg, conn_rank) {
            (
                ToController::Hello {
                    key, rank, addr, ..
                },
                None,
            ) => {
                let rank = rank as usize;
                self.check_key(&key)?;
                let assigned = self.conns[slot].as_ref().and_then(|c| c.assigned);
                if rank >= self.ranks.len()
                    || self.ranks[rank].hello.is_some()
                    || assigned.is_some_and(|a| a != rank)
                {
                    return Err(format!("unexpected hello from rank {rank}"));
                }
                self.ranks[rank].hello = Some(addr);
                self.ranks[rank].conn = Some(slot);
                if let Some(c) = self.conns[slot].as_mut() {
                    c.rank = Some(rank);
                }
                self.welcome();
            }
            (ToController::Finalizing, Some(r)) => {
                self.ranks[r].finalizing = true;
                self.finalizing_in_recovery(r);
            }
            (ToController::Abort { code, message }, Some(r)) => {
                if self.failure.is_none() {
                    let extra = if message.is_empty() {
                        String::new()
                    } else {
                        format!(": {message}")
                    };
                    eprintln!("mpiexec: rank {r} called MPI_Abort with error code {code}{extra}; terminating the job");
                }
                self.fail(Failure::Abort { code });
            }
            (ToController::Fatal { code, message }, Some(r)) => {
                if self.failure.is_none() {
                    eprintln!("mpiexec: rank {r} ends the job: {message}");
                }
                self.fail(Failure::Abort { code });
            }
            (ToController::Checkpoint { epoch, durable }, Some(r)) => {
                self.on_checkpoint(r, epoch, durable)
            }
            (ToController::Halted { generation }, Some(r)) => {
                self.ranks[r].halted = Some(generation);
                self.check_recovery();
            }
            (ToController::Ready { generation, newest }, Some(r)) => {
                self.ranks[r].ready = Some(generation);
                self.ranks[r].newest = newest;
                self.check_recovery();
            }
            (ToController::Restored { generation, epoch }, Some(r)) => {
                self.ranks[r].restored = Some((generation, epoch));
                self.check_confirmed();
            }
            (ToController::PeerBroken { rank, reason }, Some(r)) => {
                self.end_broken_rank(r, rank as usize, &reason)
            }
            (ToController::Injecting { spec }, Some(r)) => {
                if let Some(f) = self.fired.get_mut(spec) {
                    *f = Fate::Fired;
                }
                self.ranks[r].killed_at = Some(Instant::now());
            }
            (ToController::Spare { key, pid }, None) => {
                self.check_key(&key)?;
                if !self.spares.connected(pid as i32, slot) {
                    return Err(format!("unexpected spare (pid {pid})"));
                }
            }
            (ToController::Spare { .. }, Some(r)) => {
                return Err(format!("rank {r} says it is a spare"))
            }
            (_, None) => return Err("message before hello".into()),
            (ToController::Hello { .. }, Some(r)) => {
                return Err(format!("second hello from rank {r}"))
            }
        }
        Ok(())
    }

    fn check_key(&self, key: &[u8]) -> Result<(), String> {
        if mpistages::sys::constant_time_eq(key, self.key.as_bytes()) {
            Ok(())
        } else {
            Err("wrong job key".into())
        }
    }

    /// Sends a message to a rank's current process (small: a blocking write
    /// is brief). A rank that is gone is skipped: its exit is handled apart.
    fn send_to(&mut self, rank: usize, msg: &ToRank) {
        if let Some(slot) = self.ranks[rank].conn {
            let _ = self.send_on(slot, msg);
        }
    }

    fn send_on(&mut self, slot: usize, msg: &ToRank) -> std::io::Result<()> {
        let Some(c) = self.conns[slot].as_mut() else {
            return Err(std::io::ErrorKind::NotConnected.into());
        };
        let bytes = proto::encode(msg);
        c.stream.set_nonblocking(false)?;
        let sent = c.stream.write_all(&bytes);
        let _ = c.stream.set_nonblocking(true);
        sent
    }

    /// The bootstrap fence, also for replacements: once every process not
    /// yet welcomed has said hello, each of them gets everyone's address.
    fn welcome(&mut self) {
        let pending: Vec<usize> = (0..self.ranks.len())
            .filter(|&r| !self.ranks[r].welcomed)
            .collect();
        if pending.is_empty() || pending.iter().any(|&r| self.ranks[r].hello.is_none()) {
            return;
        }
        let msg = ToRank::Welcome {
            addrs: self
                .ranks
                .iter()
                .map(|r| r.hello.clone().unwrap_or_default())
                .collect(),
            generation: self.generation,
            epoch: self.recovering.as_ref().map_or(0, |r| r.epoch),
            fresh: pending.iter().map(|&r| r as u32).collect(),
        };
        for &r in &pending {
            self.send_to(r, &msg);
            self.ranks[r].welcomed = true;
        }
        self.bootstrapped = true;
        self.top_up_spares();
    }

    /// Starts spares up to `--spares`, outside a recovery (whose critical
    /// path they would slow down) and while the job runs normally.
    fn top_up_spares(&mut self) {
        let quiet = self.bootstrapped
            && self.recovering.is_none()
            && self.failure.is_none()
            && !self.ranks.iter().any(|r| r.finalizing);
        if !quiet || self.opts.spares == 0 {
            return;
        }
        let env = self.job_env();
        match self.spares.top_up(self.opts.spares, &self.launch, &env) {
            Ok(f) => self.keep_forwarders(f),
            Err(e) => {
                eprintln!("mpiexec: cannot start a spare process: {e}; failed ranks get new processes instead");
                self.opts.spares = 0;
            }
        }
    }

    /// Environment every process of the job gets from mpiexec besides the
    /// launcher's own (recovery mode, checkpoint configuration).
    fn job_env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![(
            mpistages::control::env::RECOVERY,
            self.opts.recovery.name().to_string(),
        )];
        if let Some(c) = &self.opts.ckpt {
            env.push((mpistages::control::env::CKPT, c.clone()));
        }
        env
    }

    fn on_checkpoint(&mut self, rank: usize, epoch: u64, durable: Option<u64>) {
        // During a recovery the epoch to restore is fixed; reports from
        // ranks that had not stopped yet are for epochs being rolled back.
        if self.recovering.is_some() {
            return;
        }
        let st = &mut self.ranks[rank];
        st.epoch = st.epoch.max(epoch);
        st.durable = st.durable.max(durable);
        let committed = self.ranks.iter().map(|r| r.epoch).min().unwrap_or(0);
        let durable = self.ranks.iter().map(|r| r.durable).min().flatten();
        if committed > self.committed || durable > self.durable {
            self.committed = self.committed.max(committed);
            self.durable = self.durable.max(durable);
            let note = ToRank::Committed {
                epoch: self.committed,
                durable: self.durable,
            };
            for r in 0..self.ranks.len() {
                self.send_to(r, &note);
            }
        }
    }

    /// Rank `by` can no longer talk to rank `rank` (its connection broke
    /// the protocol): `rank` is ended and handled as any failed rank, so no
    /// rank waits for it forever.
    fn end_broken_rank(&mut self, by: usize, rank: usize, reason: &str) {
        let Some(st) = self.ranks.get_mut(rank) else {
            return;
        };
        let (Some(p), None) = (&st.proc, st.exit) else {
            return;
        };
        if self.failure.is_some() || !st.welcomed {
            return;
        }
        eprintln!(
            "mpiexec: rank {by} reports that the connection of rank {rank} broke the protocol ({reason}); ending rank {rank} (pid {}) as failed",
            p.pid
        );
        p.signal(libc::SIGKILL);
        st.killed_at = Some(Instant::now());
    }

    /// A rank that enters `MPI_Finalize` while a recovery waits for it
    /// will never roll back: the job cannot recover and ends.
    fn finalizing_in_recovery(&mut self, rank: usize) {
        let Some(rec) = &self.recovering else { return };
        if self.ranks[rank].ready == Some(self.generation) || self.failure.is_some() {
            return;
        }
        let failed: Vec<usize> = rec.failed.clone();
        eprintln!(
            "mpiexec: rank {rank} called MPI_Finalize while the job was recovering from the failure of rank(s) {failed:?} (recovery {}); it did not roll back, so the recovery cannot complete; terminating the job",
            rec.number
        );
        self.fail(Failure::Rank {
            exit: Exit::Code(1),
        });
    }

    /// Why a failure of `rank` cannot be recovered from, if it cannot.
    fn refusal(&self) -> Option<String> {
        if !self.bootstrapped {
            Some("it failed during start-up, before every rank joined".to_string())
        } else if let Some(q) = self.ranks.iter().position(|r| r.finalizing) {
            Some(format!(
                "rank {q} has already called MPI_Finalize and a finalized rank cannot take part in a recovery"
            ))
        } else if self.restarts >= self.opts.max_restarts {
            Some(format!(
                "the restart budget is spent ({} recoveries, --max-restarts {})",
                self.restarts, self.opts.max_restarts
            ))
        } else {
            None
        }
    }

    /// A rank's process ended abnormally under a recovery mode: recover,
    /// or say why the job cannot.
    fn recover(&mut self, rank: usize, what: &str) {
        let pid = self.ranks[rank].proc.as_ref().map_or(0, |p| p.pid);
        if let Some(why) = self.refusal() {
            eprintln!(
                "mpiexec: rank {rank} (pid {pid}) {what}; cannot recover: {why}; terminating the job"
            );
            let exit = self.ranks[rank].exit.unwrap_or(Exit::Code(1));
            self.fail(Failure::Rank { exit });
            return;
        }
        let now = Instant::now();
        self.restarts += 1;
        self.generation += 1;
        let start = self.ranks[rank].killed_at.unwrap_or(now);
        let relaunch = self.relaunches();
        if self.recovering.is_none() {
            // A failure before every rank confirmed its restore: the same
            // recovery goes on.
            self.recovering = self.confirming.take();
        }
        let rec = self.recovering.get_or_insert_with(|| {
            self.recoveries += 1;
            Recovering {
                number: self.recoveries,
                failed: Vec::new(),
                epoch: self.committed,
                start,
                detected: now,
                propagated: None,
                spawned: None,
                restored: None,
                resumed: None,
            }
        });
        let (number, epoch) = (rec.number, rec.epoch);
        if relaunch {
            eprintln!(
                "mpiexec: rank {rank} (pid {pid}) {what}; recovery {number}: killing every rank and relaunching the job (generation {}) from epoch {epoch}",
                self.generation
            );
            rec.failed = (0..self.ranks.len()).collect();
            rec.propagated = None;
            rec.spawned = None;
            rec.restored = None;
            for r in 0..self.ranks.len() {
                self.forget_process(r);
                self.ranks[r].epoch = epoch;
            }
            for p in self.live() {
                p.signal(libc::SIGKILL);
            }
            self.relaunch_when_gone();
            return;
        }
        rec.failed.push(rank);
        rec.propagated = None;
        rec.restored = None;
        let with = if self.spares.ready() {
            " with a spare process"
        } else {
            ""
        };
        eprintln!(
            "mpiexec: rank {rank} (pid {pid}) {what}; recovery {number}: replacing it{with} (generation {}), every rank rolls back to epoch {epoch}",
            self.generation
        );
        self.forget_process(rank);
        self.ranks[rank].epoch = epoch;
        // Only the rank that failed now: a replacement of an earlier
        // failure in the same recovery may already be connected at an
        // earlier generation, and those connections are good.
        let notice = ToRank::Failure {
            generation: self.generation,
            epoch,
            failed: vec![rank as u32],
        };
        for r in 0..self.ranks.len() {
            if self.ranks[r].welcomed {
                self.send_to(r, &notice);
            }
        }
        while let Some(spare) = self.spares.take() {
            if self.assign(rank, spare) {
                return;
            }
        }
        self.spawn_replacements(&[rank]);
    }

    /// Makes a spare the replacement of `rank`. False if the spare could
    /// not be told (it is discarded).
    fn assign(&mut self, rank: usize, spare: Taken) -> bool {
        let msg = ToRank::Assign {
            rank: rank as u32,
            generation: self.generation,
            epoch: self.recovering.as_ref().map_or(0, |r| r.epoch),
            inject: self.injections_for(rank),
        };
        if self.send_on(spare.conn, &msg).is_err() {
            self.spares.discard(spare);
            return false;
        }
        if let Some(c) = self.conns[spare.conn].as_mut() {
            c.assigned = Some(rank);
        }
        spare.gate.open(rank);
        let mut proc = spare.proc;
        proc.rank = rank;
        self.started(rank, proc);
        if let Some(rec) = self.recovering.as_mut() {
            rec.spawned = Some(Instant::now());
        }
        true
    }

    /// Drops what the controller knew of a rank's current process (its
    /// control connection, its place in the bootstrap fence).
    fn forget_process(&mut self, rank: usize) {
        if let Some(slot) = self.ranks[rank].conn.take() {
            self.close(slot);
        }
        let st = &mut self.ranks[rank];
        st.hello = None;
        st.welcomed = false;
        st.finalizing = false;
    }

    /// `cpr`: a failure relaunches the whole job (the other modes replace
    /// the failed rank).
    fn relaunches(&self) -> bool {
        !self.opts.recovery.replaces_rank()
    }

    /// `cpr`: once every killed rank has been reaped, starts the whole job
    /// again at the new generation.
    fn relaunch_when_gone(&mut self) {
        let gone = self.live().next().is_none();
        let relaunches = self.relaunches();
        let Some(rec) = self.recovering.as_mut() else {
            return;
        };
        if !relaunches || rec.spawned.is_some() || !gone {
            return;
        }
        rec.propagated = Some(Instant::now());
        let all: Vec<usize> = (0..self.ranks.len()).collect();
        self.spawn_replacements(&all);
    }

    fn spawn_replacements(&mut self, ranks: &[usize]) {
        for &rank in ranks {
            if let Err(e) = self.spawn(rank) {
                eprintln!(
                    "mpiexec: cannot start a replacement for rank {rank}: {e}; terminating the job"
                );
                self.fail(Failure::Launch);
                return;
            }
        }
        if let Some(rec) = self.recovering.as_mut() {
            rec.spawned = Some(Instant::now());
        }
    }

    /// Advances the recovery timeline; resumes the job when every rank is
    /// ready at the current generation.
    fn check_recovery(&mut self) {
        let g = self.generation;
        let Some(rec) = self.recovering.as_mut() else {
            return;
        };
        let now = Instant::now();
        let replaced = |r: usize| rec.failed.contains(&r);
        if rec.propagated.is_none()
            && (0..self.ranks.len()).all(|r| {
                replaced(r) || self.ranks[r].halted == Some(g) || self.ranks[r].ready == Some(g)
            })
        {
            rec.propagated = Some(now);
        }
        if rec.restored.is_none() && rec.failed.iter().all(|&r| self.ranks[r].ready == Some(g)) {
            rec.restored = Some(now);
        }
        if !self.ranks.iter().all(|r| r.ready == Some(g)) {
            return;
        }
        let mut rec = self.recovering.take().expect("checked above");
        // The epoch agreement rides on this barrier when every rank holds
        // the same newest copy (the common case); otherwise the ranks work
        // it out among themselves after resuming.
        let first = self.ranks[0].newest;
        let agreed = first.filter(|&e| e > 0 && self.ranks.iter().all(|r| r.newest == first));
        // Epochs after the one restored are rolled back, also on pfs:
        // what is durable there is counted again from the ranks' reports.
        self.durable = None;
        for r in 0..self.ranks.len() {
            self.ranks[r].epoch = rec.epoch;
            self.ranks[r].durable = None;
            self.send_to(
                r,
                &ToRank::Resume {
                    generation: g,
                    agreed,
                },
            );
        }
        rec.resumed = Some(now);
        self.confirming = Some(rec);
        self.top_up_spares();
        self.check_confirmed();
    }

    /// Reports the recovery done once every rank has restored at the
    /// current generation, with the epoch they restored.
    fn check_confirmed(&mut self) {
        let g = self.generation;
        let Some(first) = self.confirming.as_ref().and(self.ranks[0].restored) else {
            return;
        };
        if first.0 != g || self.ranks.iter().any(|r| r.restored != Some(first)) {
            return;
        }
        let rec = self.confirming.take().expect("checked above");
        let ms = |t: Option<Instant>| {
            t.map_or("-".to_string(), |t| {
                format!(
                    "{:.1}",
                    t.saturating_duration_since(rec.start).as_secs_f64() * 1e3
                )
            })
        };
        // Wall-clock time of the failure, so that applications can measure
        // their own way back against it (`mpistages-bench recovery`).
        let failed_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64()
            - Instant::now()
                .saturating_duration_since(rec.start)
                .as_secs_f64();
        let what = if self.relaunches() {
            "job relaunched".to_string()
        } else {
            format!("ranks {:?} replaced", rec.failed)
        };
        eprintln!(
            "mpiexec: recovery {} done: {what}, epoch {} restored, generation {g}; ms after the failure: detected {}, propagated {}, replacement started {}, MPI state restored {}, all ranks resumed {}; failure at unix time {failed_at:.6}",
            rec.number,
            first.1,
            ms(Some(rec.detected)),
            ms(rec.propagated),
            ms(rec.spawned),
            ms(rec.restored),
            ms(rec.resumed),
        );
    }

    /// Starts (or restarts) a rank's process with the injection specs that
    /// concern it and have not fired.
    fn spawn(&mut self, rank: usize) -> std::io::Result<()> {
        let mut env = self.job_env();
        let injected = self.injections_for(rank);
        if !injected.is_empty() {
            env.push((inject::ENV, injected));
        }
        if let Some(rec) = &self.recovering {
            env.push((
                mpistages::control::env::RESTART_EPOCH,
                rec.epoch.to_string(),
            ));
        }
        let started = self.launch.spawn(rank, self.generation, &env)?;
        self.keep_forwarders(started.forwarders);
        self.started(rank, started.proc);
        Ok(())
    }

    /// The injection specs that concern `rank` and have not fired, encoded
    /// for the rank.
    fn injections_for(&self, rank: usize) -> String {
        let specs: Vec<(usize, &inject::Inject)> = self
            .opts
            .inject
            .iter()
            .enumerate()
            .filter(|(i, s)| s.rank == rank && self.fired[*i] == Fate::Pending)
            .collect();
        inject::encode_for_rank(&specs)
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
        let st = &mut self.ranks[rank];
        st.proc = Some(p);
        st.exit = None;
        st.killed_at = None;
        st.halted = None;
        st.ready = None;
        st.newest = None;
    }

    /// Says which `--inject` specs never fired, and why as far as
    /// mpiexec knows; true if any did not.
    fn report_unfired(&self) -> bool {
        let mut any = false;
        for (s, fate) in self.opts.inject.iter().zip(&self.fired) {
            let why = match (fate, &s.trigger) {
                (Fate::Fired, _) => continue,
                (Fate::Missed(why), _) => why.clone(),
                (Fate::Pending, Trigger::After(d)) => format!(
                    "the job ended {:.2} s after the start, before {:.2} s",
                    self.started.elapsed().as_secs_f64(),
                    d.as_secs_f64()
                ),
                (Fate::Pending, Trigger::Call { name, nth }) => format!(
                    "rank {} did not make {nth} calls of {name} (a replacement counts from 0)",
                    s.rank
                ),
                (Fate::Pending, Trigger::Checkpoint(e) | Trigger::Writing(e)) => format!(
                    "rank {} never wrote checkpoint epoch {e} (newest committed: {})",
                    s.rank, self.committed
                ),
            };
            eprintln!("mpiexec: --inject {s} never fired: {why}");
            any = true;
        }
        if any && self.failure.is_none() {
            eprintln!(
                "mpiexec: the job succeeded without the failure asked for; exit status {EXIT_NOT_INJECTED}"
            );
        }
        any
    }

    fn next_timed_injection(&self) -> Option<Instant> {
        self.opts
            .inject
            .iter()
            .zip(&self.fired)
            .filter(|(_, f)| **f == Fate::Pending)
            .filter_map(|(s, _)| match s.trigger {
                Trigger::After(d) => Some(self.started + d),
                _ => None,
            })
            .min()
    }

    fn fire_timed_injections(&mut self) {
        if self.failure.is_some() {
            return;
        }
        let now = Instant::now();
        for i in 0..self.opts.inject.len() {
            let s = &self.opts.inject[i];
            let Trigger::After(d) = s.trigger else {
                continue;
            };
            if self.fired[i] != Fate::Pending || now < self.started + d {
                continue;
            }
            let st = &mut self.ranks[s.rank];
            if let (Some(p), None) = (&st.proc, st.exit) {
                eprintln!(
                    "mpiexec: injecting a failure: SIGKILL to rank {} (pid {})",
                    s.rank, p.pid
                );
                p.signal(libc::SIGKILL);
                st.killed_at = Some(now);
                self.fired[i] = Fate::Fired;
            } else {
                self.fired[i] = Fate::Missed(format!(
                    "rank {} had already ended {:.2} s after the start",
                    s.rank,
                    d.as_secs_f64()
                ));
            }
        }
    }

    fn on_signals(&mut self) {
        while let Some(sig) = self.signals.read() {
            if sig == libc::SIGCHLD {
                self.reap();
            } else if self.failure.is_none() {
                eprintln!(
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
        while let Some((pid, exit)) = process::try_wait_any() {
            if let Some(conn) = self.spares.ended(pid) {
                if let Some(slot) = conn {
                    self.close(slot);
                }
                if self.failure.is_none() {
                    eprintln!("mpiexec: spare process (pid {pid}) ended ({exit:?}) before it was needed; a failed rank gets a new process instead");
                }
                continue;
            }
            let Some(r) = self
                .ranks
                .iter()
                .position(|r| r.proc.as_ref().is_some_and(|p| p.pid == pid))
            else {
                continue;
            };
            let st = &mut self.ranks[r];
            st.exit = Some(exit);
            if self.relaunches()
                && self
                    .recovering
                    .as_ref()
                    .is_some_and(|rec| rec.spawned.is_none())
            {
                // `cpr`: the old job's processes going, whatever their end.
                self.relaunch_when_gone();
                continue;
            }
            let st = &mut self.ranks[r];
            let clean = exit == Exit::Code(0) && (st.finalizing || st.hello.is_none());
            if clean || self.failure.is_some() {
                continue;
            }
            let what = match exit {
                Exit::Signal(s) => {
                    format!("was killed by signal {s} ({})", process::signal_name(s))
                }
                Exit::Code(0) => "exited with status 0 without calling MPI_Finalize".to_string(),
                Exit::Code(c) if st.finalizing => format!("exited with status {c}"),
                Exit::Code(c) => format!("exited with status {c} before MPI_Finalize"),
            };
            if self.opts.recovery != RecoveryMode::None && !st.finalizing {
                self.recover(r, &what);
                continue;
            }
            eprintln!("mpiexec: rank {r} (pid {pid}) {what}; terminating the job");
            self.fail(Failure::Rank { exit });
        }
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
        }
    }
}
