//! The node agent of mpiexec's own host (it runs inside `mpiexec`): starts
//! ranks here, forwards their output line by line, and tears them down.
//! What a rank gets (program, arguments, environment, directory, CPU) is
//! decided here for every host; on another host `mpistages-agent`
//! (`remote_agent.rs`) starts it.

use crate::cli::{App, Bind};
use crate::output::{RankFiles, Style};
use mpistages_control::env;
use mpistages_control::proto::SpawnCommand;
use mpistages_sys::liveness::Page;
use mpistages_sys::process;
use mpistages_sys::spawn::{Command, Stdin};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// The host of each rank (0: this machine; see `cli::Options::hosts`).
    pub rank_host: Vec<usize>,
    /// `env::PARTNER_SHIFT`, fixed at the start (replacements moved to
    /// another host keep the job's partner pairs).
    pub partner_shift: usize,
    /// `env::RANK_HOSTS`, fixed at the start like `partner_shift`.
    pub rank_hosts_at_start: String,
    pub size: usize,
    pub control: String,
    pub key: String,
    pub job_id: String,
    /// How the ranks' output is written (`--tag-output`, `-l`,
    /// `--output-filename`).
    pub output: Arc<crate::output::Style>,
    /// `--report-bindings`.
    pub report_bindings: bool,
}

pub struct RankProc {
    pub rank: usize,
    /// On this host, the pid (exits are collected with `waitpid`); on
    /// another, the pid there once its agent said (0 before).
    pub pid: i32,
    /// mpiexec's name for this process on another host, and the agent
    /// that runs it (None: this host).
    pub remote: Option<(u64, AgentLink)>,
    /// The page whose robust lock the process holds while it lives (this
    /// host only; `controller::liveness` watches it), and the flag that
    /// ends the watch when this handle goes.
    pub liveness: Option<Arc<Page>>,
    pub watch_stop: Arc<AtomicBool>,
}

impl Drop for RankProc {
    fn drop(&mut self) {
        self.watch_stop.store(true, Ordering::Release);
    }
}

/// Where messages to the agent of another host go (shared by the
/// processes it runs); empty until the agent has connected, and again
/// once it is gone.
#[derive(Clone, Default)]
pub struct AgentLink(Arc<Mutex<Route>>);

#[derive(Default)]
enum Route {
    #[default]
    None,
    /// Its own connection to mpiexec.
    Direct(std::net::TcpStream),
    /// Through the agent of `link`, the top of its branch of the control
    /// tree, which passes `Via { host }` down to it.
    Via(AgentLink, String),
}

impl AgentLink {
    pub fn set(&self, stream: Option<std::net::TcpStream>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) =
            stream.map_or(Route::None, Route::Direct);
    }

    /// Messages go to `host` through `top`'s agent.
    pub fn set_via(&self, top: &AgentLink, host: &str) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Route::Via(top.clone(), host.into());
    }

    /// Sends `msg`; false if the agent is not (or no longer) there.
    pub fn send(&self, msg: &mpistages_control::agent::ToAgent) -> bool {
        let r = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match &*r {
            Route::None => false,
            Route::Direct(s) => {
                let bytes = mpistages_control::proto::encode(msg);
                // The socket is non-blocking (mpiexec reads it in its event
                // loop); an agent that takes nothing for 2 s is as good as
                // lost.
                mpistages_sys::socket::send_whole(s, &bytes, std::time::Duration::from_secs(2))
            }
            Route::Via(top, host) => {
                let (top, host) = (top.clone(), host.clone());
                drop(r);
                top.send(&mpistages_control::agent::ToAgent::Via {
                    host,
                    msg: mpistages_control::proto::body(msg),
                })
            }
        }
    }
}

/// Serializes forwarded lines so lines from different ranks never interleave.
static OUTPUT: Mutex<()> = Mutex::new(());

/// Whose output a process's forwarders pass on. A rank's is open from the
/// start. A spare's lines are held until it becomes a rank (then they come
/// out as that rank's, as a freshly started replacement's would) and
/// dropped if it never does.
pub struct Gate {
    state: Mutex<GateState>,
    style: Arc<Style>,
    /// The job's id, for `--tag-output`.
    job: String,
    /// `--output-filename`: the rank's files, opened at its first line
    /// (None: not yet, or they cannot be; see `write`).
    files: Mutex<Option<RankFiles>>,
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
    /// The gate of a rank's output, open from the start.
    pub fn for_rank(rank: usize, style: Arc<Style>, job: String) -> Arc<Gate> {
        Gate::new(GateState::Open(rank), style, job)
    }

    fn new(state: GateState, style: Arc<Style>, job: String) -> Arc<Gate> {
        Arc::new(Gate {
            state: Mutex::new(state),
            style,
            job,
            files: Mutex::new(None),
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

    /// One line of the process's output (stderr or stdout).
    pub fn line(&self, to_stderr: bool, line: &[u8]) {
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
        if let Some(dir) = &self.style.dir {
            let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
            if files.is_none() {
                match RankFiles::open(dir, rank) {
                    Ok(f) => *files = Some(f),
                    // Said once per process; its lines still reach the
                    // terminal if they were to.
                    Err(e) => crate::say!(
                        "mpiexec: rank {rank}'s output cannot go to {}: {e}",
                        dir.display()
                    ),
                }
            }
            if let Some(f) = files.as_mut() {
                if let Err(e) = f.write(to_stderr, line) {
                    crate::say!("mpiexec: rank {rank}'s output file: {e}; no more lines go there");
                    *files = None;
                }
            }
        }
        if !self.style.copy {
            return;
        }
        // One write per line, whole: neither another rank's line nor one
        // of mpiexec's own (`say!`) can cut it.
        let bytes = self.style.terminal_line(&self.job, rank, to_stderr, line);
        let _guard = OUTPUT.lock().unwrap_or_else(|p| p.into_inner());
        let _ = if to_stderr {
            std::io::stderr().lock().write_all(&bytes)
        } else {
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes).and_then(|_| out.flush())
        };
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

/// `cpus` grouped by socket (package), in the order of the sockets'
/// numbers; a CPU whose socket `socket_of` cannot tell is on socket 0.
fn by_socket(cpus: &[usize], socket_of: impl Fn(usize) -> Option<usize>) -> Vec<Vec<usize>> {
    let mut sockets = std::collections::BTreeMap::<usize, Vec<usize>>::new();
    for &c in cpus {
        sockets
            .entry(socket_of(c).unwrap_or(0))
            .or_default()
            .push(c);
    }
    sockets.into_values().collect()
}

/// `--report-bindings`: rank `rank`'s CPUs (none: not bound), as it starts.
pub fn report_binding(rank: usize, host: &str, cpus: &[usize]) {
    if cpus.is_empty() {
        crate::say!("mpiexec: rank {rank} on {host}: not bound (the scheduler places it)");
    } else {
        crate::say!(
            "mpiexec: rank {rank} on {host}: bound to CPUs {}",
            cpu_list(cpus)
        );
    }
}

/// CPU numbers as ranges: "0-3,6".
fn cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// A started process and the threads forwarding its output.
pub struct Started {
    pub proc: RankProc,
    pub gate: Arc<Gate>,
    pub forwarders: Vec<JoinHandle<()>>,
}

/// What a process of the job gets, on whichever host it runs.
pub struct Plan {
    pub program: String,
    pub args: Vec<String>,
    /// On top of the environment it inherits.
    pub env: Vec<(String, String)>,
    pub wdir: Option<std::path::PathBuf>,
    /// The CPUs it may run on; empty: those mpiexec may.
    pub cpus: Vec<usize>,
}

impl Launch {
    /// The CPUs of the `local`-th rank on `host`. `--bind-to core`: one,
    /// in turn over the cores. By default, where the job is on this machine
    /// alone and its ranks fit its cores, each rank gets its share: a block
    /// of cores/ranks consecutive ones, so that no two ranks of the job
    /// ever take turns on one core while another stays idle or busy with
    /// someone else's work (unbound, a waiting rank and the rank it waits
    /// for can share a core while a third process has the other, and each
    /// message then costs a time slice). Threads of a rank share its block.
    fn cpus_of(&self, local: usize, host: usize) -> Vec<usize> {
        let n = self.cpus.len();
        match self.bind {
            Bind::Core if n > 0 => vec![self.cpus[local % n]],
            Bind::Socket if n > 0 => {
                let sockets = by_socket(&self.cpus, |c| {
                    let f = format!("/sys/devices/system/cpu/cpu{c}/topology/physical_package_id");
                    std::fs::read_to_string(f).ok()?.trim().parse().ok()
                });
                sockets[local % sockets.len()].clone()
            }
            Bind::Auto if n > 0 && self.rank_host.iter().all(|&h| h == 0) => {
                let ranks = self.ranks_on(host);
                if ranks > n {
                    return Vec::new();
                }
                let block = n / ranks;
                self.cpus[local * block..(local + 1) * block].to_vec()
            }
            _ => Vec::new(),
        }
    }

    /// Ranks of the job on `host`.
    pub fn ranks_on(&self, host: usize) -> usize {
        self.rank_host.iter().filter(|&&h| h == host).count()
    }

    /// What rank `rank` (None: a spare, which runs the job's one program
    /// and gets no rank variables) gets, reaching mpiexec at `control`.
    pub fn plan(
        &self,
        rank: Option<usize>,
        generation: u32,
        extra_env: &[(&str, String)],
        control: &str,
    ) -> Plan {
        let app = match rank {
            Some(r) => crate::cli::app_of(&self.apps, r),
            // The command line refuses spares with several programs.
            None => &self.apps[0],
        };
        let host = rank.map_or(0, |r| self.rank_host[r]);
        let mut env: Vec<(String, String)> = vec![
            (env::SIZE.into(), self.size.to_string()),
            (env::LOCAL_SIZE.into(), self.ranks_on(host).to_string()),
            (env::CONTROL.into(), control.to_string()),
            (env::KEY.into(), self.key.clone()),
            (env::JOB_ID.into(), self.job_id.clone()),
            (env::PARTNER_SHIFT.into(), self.partner_shift.to_string()),
            (env::RANK_HOSTS.into(), self.rank_hosts_at_start.clone()),
            (
                env::APPNUM.into(),
                self.apps
                    .iter()
                    .position(|a| std::ptr::eq(a, app))
                    .unwrap_or(0)
                    .to_string(),
            ),
        ];
        if !self.cpus.is_empty() {
            env.push((env::LOCAL_CORES.into(), self.cpus.len().to_string()));
        }
        env.extend(self.env.iter().chain(&app.env).cloned());
        let mut cpus = Vec::new();
        match rank {
            Some(r) => {
                for k in [env::RANK, "OMPI_COMM_WORLD_RANK", "PMI_RANK"] {
                    env.push((k.into(), r.to_string()));
                }
                env.push((env::GENERATION.into(), generation.to_string()));
                // Counting this host's ranks.
                let local = self.rank_host[..r].iter().filter(|&&h| h == host).count();
                cpus = self.cpus_of(local, host);
            }
            None => env.push((env::SPARE.into(), "1".into())),
        }
        env.extend(extra_env.iter().map(|(k, v)| (k.to_string(), v.clone())));
        Plan {
            program: app.program.clone(),
            args: app.args.clone(),
            env,
            wdir: app.wdir.clone(),
            cpus,
        }
    }

    /// Starts rank `rank` on this host and the threads that forward its
    /// output.
    pub fn spawn(
        &self,
        rank: usize,
        generation: u32,
        extra_env: &[(&str, String)],
    ) -> std::io::Result<Started> {
        let plan = self.plan(Some(rank), generation, extra_env, &self.control);
        if self.report_bindings {
            report_binding(rank, "this host", &plan.cpus);
        }
        let mut cmd = self.command(&plan);
        // Rank 0 reads mpiexec's stdin, unless it is forwarded to a rank 0
        // on another host (then a local replacement gets none).
        let forwarded =
            crate::controller::stdin::FORWARDED.load(std::sync::atomic::Ordering::Acquire);
        cmd.stdin(if rank == 0 && !forwarded {
            Stdin::Inherit
        } else {
            Stdin::Null
        });
        self.start(cmd, rank, GateState::Open(rank))
    }

    /// Starts process `id`, a child of `MPI_Comm_spawn`: the program of
    /// `spawn` with its arguments in directory `wdir` on this host, with the
    /// job's environment, its id as its rank, and `extra_env` (its world
    /// and its parents).
    pub fn spawn_child(
        &self,
        id: usize,
        spawn: &SpawnCommand,
        wdir: &str,
        extra_env: &[(&str, String)],
    ) -> std::io::Result<Started> {
        let plan = self.child_plan(id, spawn, wdir, extra_env, &self.control);
        let cmd = self.command(&plan);
        self.start(cmd, id, GateState::Open(id))
    }

    /// What process `id`, a child of `MPI_Comm_spawn`, gets (see
    /// `spawn_child`), reaching mpiexec at `control`.
    pub fn child_plan(
        &self,
        id: usize,
        spawn: &SpawnCommand,
        wdir: &str,
        extra_env: &[(&str, String)],
        control: &str,
    ) -> Plan {
        let mut plan = self.plan(None, 0, extra_env, control);
        // (Later entries win: `extra_env` sets the size the job has now.)
        plan.env.retain(|(k, _)| k != env::SPARE);
        for k in [env::RANK, "OMPI_COMM_WORLD_RANK", "PMI_RANK"] {
            plan.env.push((k.into(), id.to_string()));
        }
        plan.env.push((env::GENERATION.into(), "0".into()));
        plan.program = spawn.program.clone();
        plan.args = spawn.args.clone();
        plan.wdir = (!wdir.is_empty()).then(|| wdir.into());
        plan.cpus.clear();
        plan
    }

    /// Starts a spare: the program runs up to `MPI_Init` and waits there
    /// until mpiexec makes it the replacement of a failed rank. It gets
    /// no rank variables, and its output is held until then.
    pub fn spawn_spare(&self, extra_env: &[(&str, String)]) -> std::io::Result<Started> {
        let mut cmd = self.command(&self.plan(None, 0, extra_env, &self.control));
        // Whatever mpiexec's own environment says, a spare has no rank yet.
        cmd.env_remove(env::RANK)
            .env_remove("OMPI_COMM_WORLD_RANK")
            .env_remove("PMI_RANK");
        self.start(cmd, usize::MAX, GateState::Held(Vec::new(), 0))
    }

    /// The command of a plan: stdin `/dev/null` unless set otherwise,
    /// output through pipes (`spawn::Command`).
    fn command(&self, p: &Plan) -> Command {
        let mut cmd = Command::new(&p.program);
        cmd.args(&p.args)
            .envs(p.env.iter().map(|(k, v)| (k, v)))
            .cpus(&p.cpus);
        if let Some(d) = &p.wdir {
            cmd.current_dir(d);
        }
        cmd
    }

    fn start(&self, mut cmd: Command, rank: usize, gate: GateState) -> std::io::Result<Started> {
        // Its death is seen before the kernel's teardown (`sys::liveness`);
        // without the page, by its exit alone (also when asked:
        // MPISTAGES_LIVENESS=0, for comparisons).
        let wanted = std::env::var("MPISTAGES_LIVENESS").map_or(true, |v| v != "0");
        // (An outer job's descriptor number must not reach this child.)
        cmd.env_remove(env::LIVENESS_FD);
        let liveness = match wanted.then(Page::new) {
            None => None,
            Some(Ok(page)) => {
                cmd.keep_fd(page.fd())
                    .env(env::LIVENESS_FD, page.fd().to_string());
                Some(Arc::new(page))
            }
            Some(Err(e)) => {
                crate::say!("mpiexec: no liveness page for a process ({e}); its failure is seen when it has ended");
                None
            }
        };
        let child = cmd.spawn()?;
        let gate = Gate::new(gate, self.output.clone(), self.job_id.clone());
        let forwarders = vec![
            forward(child.stdout, gate.clone(), false),
            forward(child.stderr, gate.clone(), true),
        ];
        Ok(Started {
            proc: RankProc {
                rank,
                pid: child.pid,
                remote: None,
                liveness,
                watch_stop: Default::default(),
            },
            gate,
            forwarders,
        })
    }
}

impl RankProc {
    /// A process on another host, started by its agent as `id`.
    pub fn remote(rank: usize, id: u64, link: AgentLink) -> RankProc {
        RankProc {
            rank,
            pid: 0,
            remote: Some((id, link)),
            liveness: None,
            watch_stop: Default::default(),
        }
    }

    pub fn signal(&self, sig: i32) {
        match &self.remote {
            None => process::kill_group(self.pid, sig),
            Some((id, link)) => {
                link.send(&mpistages_control::agent::ToAgent::Signal {
                    id: *id,
                    signal: sig,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_and_sockets() {
        assert_eq!(cpu_list(&[3, 0, 1, 2, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(cpu_list(&[5]), "5");
        let socket = |c: usize| (c != 7).then_some(c / 4);
        assert_eq!(
            by_socket(&[0, 1, 4, 5, 7], socket),
            vec![vec![0, 1, 7], vec![4, 5]]
        );
    }
}
