//! `mpiexec`: starts the job through the node agent, runs the bootstrap
//! fence, watches every rank, and decides what a failure means (with
//! `--recovery none`, the standard: the job ends).

use super::agent::{Launch, RankProc};
use super::cli::{self, Parsed, USAGE};
use super::proto::{self, Decoder, ToController, ToRank};
use crate::sys::epoll::{self, Epoll};
use crate::sys::process::{self, Exit, SignalFd};
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
    fn create() -> std::io::Result<JobDir> {
        use std::os::unix::fs::DirBuilderExt;
        let mut r = [0u8; 8];
        process::random_bytes(&mut r)?;
        let base = std::env::var_os("TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| "/tmp".into());
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
    hello: Option<String>,
    finalizing: bool,
    exit: Option<Exit>,
}

struct Conn {
    stream: UnixStream,
    dec: Decoder,
    rank: Option<usize>,
}

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
    let mut job = Job {
        key: launch.key.clone(),
        ranks: (0..opts.ranks).map(|_| RankState::default()).collect(),
        opts,
        epoll,
        listener,
        signals,
        conns: Vec::new(),
        failure: None,
        teardown: None,
        killed: false,
    };
    let mut forwarders = Vec::new();
    for r in 0..job.opts.ranks {
        match launch.spawn(r, 0) {
            Ok((p, f)) => {
                job.ranks[r].proc = Some(p);
                forwarders.extend(f);
            }
            Err(e) => {
                eprintln!("mpiexec: cannot start '{}': {e}", job.opts.program);
                job.fail(Failure::Launch);
                break;
            }
        }
    }
    job.event_loop();
    // Output of the last lines may still be in flight; give it a moment.
    let deadline = Instant::now() + Duration::from_secs(2);
    for f in forwarders {
        while !f.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    drop(dir);
    Ok(job.exit_code())
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
            let timeout = match self.teardown {
                Some(t) if !self.killed => {
                    t.saturating_duration_since(Instant::now()).as_millis() as i32
                }
                _ => -1,
            };
            evs.clear();
            let _ = self.epoll.wait(&mut evs, timeout.max(0));
            for ev in evs.clone() {
                match ev.token {
                    TOKEN_LISTENER => self.accept(),
                    TOKEN_SIGNALS => self.on_signals(),
                    t if t >= TOKEN_CONN => self.on_conn((t - TOKEN_CONN) as usize),
                    _ => {}
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
                });
            }
        }
    }

    fn close(&mut self, slot: usize) {
        if let Some(c) = self.conns[slot].take() {
            let _ = self.epoll.delete(c.stream.as_raw_fd());
        }
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
                if key.len() != self.key.len()
                    || key
                        .iter()
                        .zip(self.key.as_bytes())
                        .fold(0, |a, (x, y)| a | (x ^ y))
                        != 0
                {
                    return Err("wrong job key".into());
                }
                if rank >= self.ranks.len() || self.ranks[rank].hello.is_some() {
                    return Err(format!("unexpected hello from rank {rank}"));
                }
                self.ranks[rank].hello = Some(addr);
                if let Some(c) = self.conns[slot].as_mut() {
                    c.rank = Some(rank);
                }
                if self.ranks.iter().all(|r| r.hello.is_some()) {
                    self.welcome();
                }
            }
            (ToController::Finalizing, Some(r)) => self.ranks[r].finalizing = true,
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
            (_, None) => return Err("message before hello".into()),
            (ToController::Hello { .. }, Some(r)) => {
                return Err(format!("second hello from rank {r}"))
            }
        }
        Ok(())
    }

    /// The bootstrap fence: every rank said hello, tell everyone everything.
    fn welcome(&mut self) {
        let addrs: Vec<String> = self
            .ranks
            .iter()
            .map(|r| r.hello.clone().unwrap_or_default())
            .collect();
        let bytes = proto::encode(&ToRank::Welcome { addrs });
        for c in self.conns.iter_mut().flatten() {
            if c.rank.is_some() {
                // The message is small; a blocking write is brief.
                let _ = c.stream.set_nonblocking(false);
                let _ = c.stream.write_all(&bytes);
                let _ = c.stream.set_nonblocking(true);
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
            let Some(r) = self
                .ranks
                .iter()
                .position(|r| r.proc.as_ref().is_some_and(|p| p.pid == pid))
            else {
                continue;
            };
            let st = &mut self.ranks[r];
            st.exit = Some(exit);
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
