//! The node agent: starts ranks on this host, forwards their output line by
//! line, and tears them down. (On one host it runs inside `mpiexec`.)

use crate::cli::{App, Bind};
use mpistages_control::env;
use mpistages_sys::process;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

pub struct Launch {
    /// The job's programs, `ranks` of each in turn (MPMD).
    pub apps: Vec<App>,
    /// For every program.
    pub env: Vec<(String, String)>,
    pub bind: Bind,
    /// The CPUs ranks are bound to in turn with `--bind-to core`.
    pub cpus: Vec<usize>,
    pub size: usize,
    pub control: String,
    pub key: String,
    pub job_id: String,
    pub tag_output: bool,
}

pub struct RankProc {
    pub rank: usize,
    pub pid: i32,
    /// Kept only so the handle is not dropped early; exits are collected with
    /// `waitpid` by the controller.
    _child: Child,
}

/// Serializes forwarded lines so lines from different ranks never interleave.
static OUTPUT: Mutex<()> = Mutex::new(());

/// Whose output a process's forwarders pass on. A rank's is open from the
/// start. A spare's lines are held until it becomes a rank (then they come
/// out as that rank's, as a freshly started replacement's would) and
/// dropped if it never does.
pub struct Gate {
    state: Mutex<GateState>,
    /// `--tag-output`: the job id for the prefix.
    tag_job: Option<String>,
}

enum GateState {
    Open(usize),
    /// Lines (and whether to stderr), and their total size.
    Held(Vec<(bool, Vec<u8>)>, usize),
    Dropped,
}

/// Output a spare may hold before it becomes a rank; beyond it, lines are
/// dropped (pre-`MPI_Init` output of a spare is rare and short).
const HELD_MAX: usize = 1 << 20;

impl Gate {
    fn new(state: GateState, tag_job: Option<String>) -> Arc<Gate> {
        Arc::new(Gate {
            state: Mutex::new(state),
            tag_job,
        })
    }

    /// The process is now rank `rank`: what it held comes out.
    pub fn open(&self, rank: usize) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let GateState::Held(lines, _) = std::mem::replace(&mut *st, GateState::Open(rank)) {
            for (to_stderr, line) in lines {
                self.write(rank, to_stderr, &line);
            }
        }
    }

    /// The process will never be a rank: its output goes nowhere.
    pub fn drop_output(&self) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = GateState::Dropped;
    }

    fn line(&self, to_stderr: bool, line: &[u8]) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *st {
            GateState::Open(rank) => self.write(*rank, to_stderr, line),
            GateState::Held(lines, size) => {
                if *size < HELD_MAX {
                    *size += line.len();
                    lines.push((to_stderr, line.to_vec()));
                }
            }
            GateState::Dropped => {}
        }
    }

    fn write(&self, rank: usize, to_stderr: bool, line: &[u8]) {
        let _guard = OUTPUT.lock().unwrap_or_else(|p| p.into_inner());
        let write = |w: &mut dyn Write| {
            if let Some(job) = &self.tag_job {
                let stream = if to_stderr { "stderr" } else { "stdout" };
                let _ = write!(w, "[{job},{rank}]<{stream}>:");
            }
            let _ = w.write_all(line);
            if !line.ends_with(b"\n") {
                let _ = w.write_all(b"\n");
            }
            let _ = w.flush();
        };
        if to_stderr {
            write(&mut std::io::stderr().lock());
        } else {
            write(&mut std::io::stdout().lock());
        }
    }
}

fn forward(
    mut from: impl Read + Send + 'static,
    gate: Arc<Gate>,
    to_stderr: bool,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(&mut from);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => gate.line(to_stderr, &line),
            }
        }
    })
}

/// A started process and the threads forwarding its output.
pub struct Started {
    pub proc: RankProc,
    pub gate: Arc<Gate>,
    pub forwarders: Vec<JoinHandle<()>>,
}

impl Launch {
    /// Starts rank `rank` and the threads that forward its output.
    pub fn spawn(
        &self,
        rank: usize,
        generation: u32,
        extra_env: &[(&str, String)],
    ) -> std::io::Result<Started> {
        let mut cmd = self.command(crate::cli::app_of(&self.apps, rank));
        if self.bind == Bind::Core && !self.cpus.is_empty() {
            process::bind_to_cpu(&mut cmd, self.cpus[rank % self.cpus.len()]);
        }
        cmd.env(env::RANK, rank.to_string())
            .env(env::GENERATION, generation.to_string())
            .env("OMPI_COMM_WORLD_RANK", rank.to_string())
            .env("PMI_RANK", rank.to_string())
            .stdin(if rank == 0 {
                Stdio::inherit()
            } else {
                Stdio::null()
            });
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        self.start(cmd, rank, GateState::Open(rank))
    }

    /// Starts a spare: the program runs up to `MPI_Init` and waits there
    /// until mpiexec makes it the replacement of a failed rank. It gets
    /// no rank variables, and its output is held until then.
    pub fn spawn_spare(&self, extra_env: &[(&str, String)]) -> std::io::Result<Started> {
        // Spares run the job's one program (the command line refuses
        // spares with several).
        let mut cmd = self.command(&self.apps[0]);
        cmd.env(env::SPARE, "1")
            .env_remove(env::RANK)
            .env_remove("OMPI_COMM_WORLD_RANK")
            .env_remove("PMI_RANK")
            .stdin(Stdio::null());
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        self.start(cmd, usize::MAX, GateState::Held(Vec::new(), 0))
    }

    /// The command line and the environment every process of `app` gets.
    fn command(&self, app: &App) -> Command {
        let mut cmd = Command::new(&app.program);
        cmd.args(&app.args)
            .env(env::SIZE, self.size.to_string())
            // This agent starts every rank of the job on this machine.
            .env(env::LOCAL_SIZE, self.size.to_string())
            .env(env::CONTROL, &self.control)
            .env(env::KEY, &self.key)
            .env(env::JOB_ID, &self.job_id)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in self.env.iter().chain(&app.env) {
            cmd.env(k, v);
        }
        if let Some(d) = &app.wdir {
            cmd.current_dir(d);
        }
        cmd
    }

    fn start(&self, mut cmd: Command, rank: usize, gate: GateState) -> std::io::Result<Started> {
        process::supervise(&mut cmd);
        let mut child = cmd.spawn()?;
        let gate = Gate::new(gate, self.tag_output.then(|| self.job_id.clone()));
        let mut forwarders = Vec::new();
        if let Some(out) = child.stdout.take() {
            forwarders.push(forward(out, gate.clone(), false));
        }
        if let Some(err) = child.stderr.take() {
            forwarders.push(forward(err, gate.clone(), true));
        }
        let pid = child.id() as i32;
        Ok(Started {
            proc: RankProc {
                rank,
                pid,
                _child: child,
            },
            gate,
            forwarders,
        })
    }
}

impl RankProc {
    pub fn signal(&self, sig: i32) {
        process::kill_group(self.pid, sig);
    }
}
