//! `mpiexec` command-line options.

use crate::hosts::{self, Host, MapBy, Policy};
use crate::slurm::{self, Allocation};
use mpistages_control::inject::Inject;
pub use mpistages_control::mode::RecoveryMode;
use std::path::PathBuf;

pub use crate::usage::USAGE;

/// One program of the job and its ranks (MPMD: several, split by `:`).
#[derive(Debug, Clone, PartialEq)]
pub struct App {
    pub ranks: usize,
    pub program: String,
    pub args: Vec<String>,
    /// `-env NAME VALUE` of this program only.
    pub env: Vec<(String, String)>,
    /// `-wdir DIR`: where its ranks start (default: mpiexec's directory).
    pub wdir: Option<PathBuf>,
}

/// `--bind-to`: what each rank's CPU affinity is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Bind {
    /// Where the job is on this machine alone and its ranks fit the cores
    /// mpiexec may use, each rank on its share of them; otherwise none.
    #[default]
    Auto,
    /// The scheduler places ranks.
    None,
    /// Each rank on one core, in turn over the cores mpiexec may use.
    Core,
    /// Each rank on the cores of one socket (package), in turn over the
    /// sockets of the cores mpiexec may use.
    Socket,
}

/// `--initial-errhandler`'s values, and how a rank learns the choice.
pub const INITIAL_ERRHANDLERS: [&str; 3] = [
    "mpi_errors_are_fatal",
    "mpi_errors_return",
    "mpi_errors_abort",
];
pub const INITIAL_ERRHANDLER_ENV: &str = "MPISTAGES_INITIAL_ERRHANDLER";

#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Every rank of every program.
    pub ranks: usize,
    pub apps: Vec<App>,
    /// `--tag-output`, `-l`, `--output-filename`.
    pub output: crate::output::Style,
    /// `-x`, `-genv`: for every program.
    pub env: Vec<(String, String)>,
    pub kill_grace_secs: f64,
    pub recovery: RecoveryMode,
    pub max_restarts: usize,
    /// Spare processes kept waiting for a failure (stages, reinit).
    pub spares: usize,
    pub inject: Vec<Inject>,
    pub ckpt: Option<String>,
    /// `--restart DIR`: the pfs directory of an ended run to start from.
    pub restart: Option<std::path::PathBuf>,
    /// `--host`/`--hostfile`: the hosts and their slots (None: this host,
    /// as many ranks as asked).
    pub hosts: Option<Vec<Host>>,
    /// The last this many of `hosts` are `--spare-hosts`: no rank starts
    /// there, replacements go there first.
    pub spare_hosts: usize,
    pub policy: Policy,
    /// The host of each rank (an index into `hosts`; 0 without hosts).
    pub placement: Vec<usize>,
    pub bind: Bind,
    /// The command that starts an agent on another host, the host's name
    /// appended (`ssh`, or `--launcher-exec`, e.g. `ip netns exec`).
    pub launcher: Vec<String>,
    /// This machine's address as the other hosts reach it.
    pub control_addr: Option<std::net::IpAddr>,
    /// A host whose agent is silent this long is lost.
    pub heartbeat_timeout: std::time::Duration,
    /// `--timeout` / `MPIEXEC_TIMEOUT`: the job ends when it runs longer.
    pub timeout: Option<std::time::Duration>,
    /// `--report-bindings`: each rank's CPUs, said as it starts.
    pub report_bindings: bool,
}

impl Options {
    /// The program of rank `rank`.
    pub fn app_of(&self, rank: usize) -> &App {
        app_of(&self.apps, rank)
    }
}

/// The program of rank `rank` among `apps` (ranks are numbered through
/// the programs in order).
pub fn app_of(apps: &[App], rank: usize) -> &App {
    let mut first = 0;
    for a in apps {
        if rank < first + a.ranks {
            return a;
        }
        first += a.ranks;
    }
    apps.last().expect("a job has a program")
}

#[derive(Debug, PartialEq)]
pub enum Parsed {
    Run(Box<Options>),
    Help,
    Version,
}

/// A positive number of ranks for `opt`.
/// Most ranks in one job: per-rank tables are made at the start, and a
/// mistyped count must be an error, not gigabytes (found by fuzzing:
/// `-np 444444447` asked for 3.5 GB).
const MAX_RANKS: usize = 1 << 20;

fn rank_count(opt: &str, v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(0) => Err(format!("{opt} needs a positive number, not 0")),
        Ok(n) if n > MAX_RANKS => Err(format!("{opt} {n}: at most {MAX_RANKS} ranks")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{opt} needs a positive number, not '{v}'")),
    }
}

/// Hosts that are this machine: their ranks are started by mpiexec itself,
/// those of other hosts by an agent there.
pub fn is_this_host(name: &str) -> bool {
    let me = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    name == "localhost" || name.starts_with("127.") || name == me.trim()
}

/// Parses one program's options and its command line from `seg` (the
/// first one also takes the global options, into `g`).
fn parse_app(seg: &[String], mut g: Option<&mut Global>) -> Result<App, String> {
    let mut ranks = None;
    let mut env = Vec::new();
    let mut wdir = None;
    let mut i = 0;
    let value = |i: usize, name: &str| -> Result<String, String> {
        seg.get(i + 1)
            .cloned()
            .ok_or_else(|| format!("option {name} needs a value"))
    };
    while i < seg.len() {
        let a = seg[i].as_str();
        match a {
            "-n" | "-np" | "--n" | "--np" | "-c" => {
                ranks = Some(rank_count(a, &value(i, a)?)?);
                i += 2;
            }
            "-wdir" | "--wdir" | "-wd" | "--wd" => {
                let d = PathBuf::from(value(i, a)?);
                if !d.is_dir() {
                    return Err(format!("{a} {}: not a directory", d.display()));
                }
                wdir = Some(d);
                i += 2;
            }
            "-env" | "--env" => {
                env.push((value(i, a)?, value(i + 1, a)?));
                i += 3;
            }
            "--" => {
                i += 1;
                break;
            }
            _ if !a.starts_with('-') => break,
            _ => match g.as_deref_mut() {
                Some(g) => i += g.option(seg, i)?,
                None => {
                    return Err(format!(
                        "option '{a}' is for the whole job: give it before the first program"
                    ))
                }
            },
        }
    }
    if g.as_ref().is_some_and(|g| g.done.is_some()) {
        return Err(String::new());
    }
    let Some(program) = seg.get(i).cloned() else {
        return Err("no program given".into());
    };
    let ranks =
        ranks.ok_or_else(|| format!("the number of ranks of '{program}' is missing (-n N)"))?;
    Ok(App {
        ranks,
        program,
        args: seg[i + 1..].to_vec(),
        env,
        wdir,
    })
}

/// The options of the whole job.
#[derive(Default)]
struct Global {
    done: Option<Parsed>,
    output: crate::output::Style,
    env: Vec<(String, String)>,
    kill_grace_secs: Option<f64>,
    recovery: Option<RecoveryMode>,
    max_restarts: Option<usize>,
    spares: Option<usize>,
    inject: Vec<Inject>,
    ckpt: Option<String>,
    restart: Option<std::path::PathBuf>,
    hosts: Option<Vec<Host>>,
    spare_hosts: Vec<Host>,
    policy: Policy,
    bind: Bind,
    launcher: Option<Vec<String>>,
    /// `--launcher slurm`.
    slurm: bool,
    control_addr: Option<std::net::IpAddr>,
    heartbeat_timeout: Option<f64>,
    timeout: Option<f64>,
    report_bindings: bool,
}

impl Global {
    /// Takes the option at `argv[i]`; returns how many words it used.
    fn option(&mut self, argv: &[String], i: usize) -> Result<usize, String> {
        let a = argv[i].as_str();
        let value = |k: usize| -> Result<String, String> {
            argv.get(i + k)
                .cloned()
                .ok_or_else(|| format!("option {a} needs a value"))
        };
        match a {
            "--tag-output" | "-tag-output" => {
                self.output.tag = true;
                return Ok(1);
            }
            // MPICH's: "[rank] " before each line.
            "-l" | "--prepend-rank" | "-prepend-rank" => {
                self.output.rank = true;
                return Ok(1);
            }
            // MPICH's: pass this environment to the ranks, which they get
            // here anyway (locally inherited, sent to other hosts' agents).
            "-genvall" | "--genvall" | "-envall" | "--envall" => return Ok(1),
            "--report-bindings" | "-report-bindings" => {
                self.report_bindings = true;
                return Ok(1);
            }
            "--oversubscribe" | "-oversubscribe" => {
                self.policy.oversubscribe = true;
                return Ok(1);
            }
            "-h" | "--help" => {
                self.done = Some(Parsed::Help);
                return Ok(argv.len() - i);
            }
            "--version" | "-V" => {
                self.done = Some(Parsed::Version);
                return Ok(argv.len() - i);
            }
            "-genv" | "--genv" => {
                self.env.push((value(1)?, value(2)?));
                return Ok(3);
            }
            _ => {}
        }
        let v = match value(1) {
            Ok(v) => v,
            // Last on the line: whether it takes a value at all.
            Err(e) => {
                let mut probe = argv[..=i].to_vec();
                probe.push(String::new());
                return Err(match self.option(&probe, i) {
                    Err(u) if u.starts_with("unknown option") => u,
                    _ => e,
                });
            }
        };
        match a {
            "-x" => match v.split_once('=') {
                Some((k, val)) => self.env.push((k.to_string(), val.to_string())),
                None => {
                    let val = std::env::var(&v).unwrap_or_default();
                    self.env.push((v, val));
                }
            },
            "--mtbf" | "--ckpt-interval" => {
                use mpistages::stages::cadence;
                cadence::parse_seconds(a, &v)?;
                let var = if a == "--mtbf" {
                    cadence::MTBF
                } else {
                    cadence::INTERVAL
                };
                self.env.push((var.to_string(), v));
            }
            "--kill-grace" => {
                self.kill_grace_secs = Some(
                    v.parse::<f64>()
                        .ok()
                        .filter(|s| (0.0..=MAX_SECS).contains(s))
                        .ok_or_else(|| {
                            format!("--kill-grace needs seconds (0 to {MAX_SECS}), not '{v}'")
                        })?,
                )
            }
            "--recovery" => {
                self.recovery =
                    Some(RecoveryMode::parse(&v).map_err(|e| format!("--recovery {e}"))?)
            }
            "--with-ft" => match v.as_str() {
                "ulfm" | "mpi" => self.recovery = Some(RecoveryMode::Ulfm),
                "no" | "none" => self.recovery = Some(RecoveryMode::None),
                _ => return Err(format!("--with-ft '{v}': expected ulfm (or mpi), or no")),
            },
            "--initial-errhandler" | "-initial-errhandler" => {
                let h = v.to_ascii_lowercase();
                if !INITIAL_ERRHANDLERS.contains(&h.as_str()) {
                    return Err(format!(
                        "--initial-errhandler '{v}': expected one of {}",
                        INITIAL_ERRHANDLERS.join(", ")
                    ));
                }
                self.env.push((INITIAL_ERRHANDLER_ENV.to_string(), h));
            }
            "--max-restarts" => {
                self.max_restarts = Some(
                    v.parse()
                        .map_err(|_| format!("--max-restarts needs a number, not '{v}'"))?,
                )
            }
            "--spares" => {
                self.spares = Some(
                    v.parse::<usize>()
                        .ok()
                        .filter(|&n| n <= 64)
                        .ok_or_else(|| {
                            format!("--spares needs a number from 0 to 64, not '{v}'")
                        })?,
                )
            }
            "--inject" => self.inject.push(mpistages_control::inject::parse(&v)?),
            "--ckpt" => {
                mpistages::checkpoint::config::parse(&v).map_err(|e| format!("--ckpt: {e}"))?;
                self.ckpt = Some(v);
            }
            "--restart" => self.restart = Some(v.into()),
            "-H" | "--host" | "-host" | "--hosts" | "-hosts" => {
                let more = hosts::parse_host_list(&v)?;
                self.hosts.get_or_insert_with(Vec::new).extend(more);
            }
            "--spare-hosts" => self.spare_hosts.extend(hosts::parse_host_list(&v)?),
            "--hostfile" | "-hostfile" | "--machinefile" | "-machinefile" | "-f" => {
                let text = std::fs::read_to_string(&v).map_err(|e| format!("{a} {v}: {e}"))?;
                let more = hosts::parse_hostfile(&text, &v)?;
                self.hosts.get_or_insert_with(Vec::new).extend(more);
            }
            "--map-by" | "-map-by" => self.policy.map_by = MapBy::parse(&v)?,
            "-ppn" | "--ppn" | "--npernode" | "-npernode" => {
                self.policy.per_host = Some(rank_count(a, &v)?)
            }
            "--launcher" | "-launcher" => {
                match v.as_str() {
                    "ssh" => {
                        self.launcher =
                            Some(vec!["ssh".into(), "-o".into(), "BatchMode=yes".into()])
                    }
                    // The command comes with --launcher-exec.
                    "exec" => {
                        self.launcher.get_or_insert_with(Vec::new);
                    }
                    "slurm" | "srun" => self.slurm = true,
                    _ => return Err(format!("--launcher takes ssh, exec or slurm, not '{v}'")),
                }
            }
            "--launcher-exec" | "-launcher-exec" => {
                let words: Vec<String> = v.split_whitespace().map(String::from).collect();
                if words.is_empty() {
                    return Err("--launcher-exec needs a command".into());
                }
                self.launcher = Some(words);
            }
            "--control-addr" => {
                self.control_addr = Some(
                    v.parse()
                        .map_err(|_| format!("--control-addr needs an IP address, not '{v}'"))?,
                )
            }
            "--timeout" | "-timeout" => self.timeout = Some(parse_timeout("--timeout", &v)?),
            "--heartbeat-timeout" => {
                self.heartbeat_timeout = Some(
                    v.parse::<f64>()
                        .ok()
                        .filter(|s| (0.3..=MAX_SECS).contains(s))
                        .ok_or_else(|| {
                            format!(
                                "--heartbeat-timeout needs seconds (0.3 to {MAX_SECS}), not '{v}'"
                            )
                        })?,
                )
            }
            "--output-filename" | "-output-filename" => self.output.set_files(&v)?,
            "--transport" => {
                let ok = v == "auto" || v.split(',').all(|w| matches!(w, "tcp" | "shm" | "udp"));
                if !ok {
                    return Err(format!(
                        "--transport takes auto, or a list of tcp, shm and udp, not '{v}'"
                    ));
                }
                self.env.push(("MPISTAGES_TRANSPORT".into(), v));
            }
            "--bind-to" | "-bind-to" => {
                self.bind = match v.as_str() {
                    "core" => Bind::Core,
                    "socket" | "package" => Bind::Socket,
                    "none" => Bind::None,
                    _ => return Err(format!("--bind-to takes core, socket or none, not '{v}'")),
                }
            }
            _ => return Err(format!("unknown option '{a}'")),
        }
        Ok(2)
    }
}

pub fn parse(argv: &[String]) -> Result<Parsed, String> {
    parse_in(argv, &Allocation::from_env())
}

/// `parse` inside the Slurm allocation `alloc` (none when not present).
pub fn parse_in(argv: &[String], alloc: &Allocation) -> Result<Parsed, String> {
    let mut g = Global::default();
    let mut apps = Vec::new();
    for (k, seg) in argv.split(|a| a == ":").enumerate() {
        match parse_app(seg, (k == 0).then_some(&mut g)) {
            Err(e) if e.is_empty() => return Ok(g.done.take().expect("help or version")),
            r => apps.push(r?),
        }
    }
    let ranks: usize = apps.iter().map(|a| a.ranks).sum();
    if ranks > MAX_RANKS {
        return Err(format!("{ranks} ranks in all: at most {MAX_RANKS}"));
    }
    if let Some(bad) = g.inject.iter().find(|s| s.rank >= ranks) {
        return Err(format!(
            "--inject names rank {}, but the job has {ranks} ranks",
            bad.rank
        ));
    }
    let recovery = g.recovery.unwrap_or(RecoveryMode::None);
    if g.restart.is_some() && recovery == RecoveryMode::None {
        return Err(
            "--restart needs a recovery mode (--recovery cpr, stages or reinit): the \
             restarted program restores its data where MPIX_Get_fault_epoch says, as after a \
             relaunch"
                .into(),
        );
    }
    let spares = match g.spares {
        Some(n) if n > 0 && !recovery.replaces_rank() => {
            return Err(format!(
                "--spares {n} needs --recovery stages or reinit (the failed rank is replaced)"
            ))
        }
        Some(n) if n > 0 && apps.len() > 1 => {
            return Err(format!(
                "--spares {n} runs one program; with several (MPMD) a failed rank gets a new process (--spares 0)"
            ))
        }
        Some(n) => n,
        None if recovery.replaces_rank() && apps.len() == 1 => 1,
        None => 0,
    };
    // Inside an allocation mpiexec uses Slurm's hosts and srun, as Open
    // MPI does, unless told other hosts or another launcher.
    let slurm = g.slurm || (alloc.present() && g.hosts.is_none() && g.launcher.is_none());
    if slurm {
        if g.hosts.is_none() {
            g.hosts = Some(alloc.hosts()?);
        } else if !alloc.present() {
            return Err("--launcher slurm needs a Slurm allocation (salloc or sbatch)".into());
        }
        g.launcher = Some(slurm::launcher());
    }
    let mut placement = vec![0; ranks];
    let spare_hosts = g.spare_hosts.len();
    if spare_hosts > 0 {
        // Ranks start on the job's hosts (this machine when none is given).
        let job_hosts = g.hosts.get_or_insert_with(|| {
            vec![Host {
                name: "localhost".into(),
                slots: ranks,
            }]
        });
        if let Some(h) = g
            .spare_hosts
            .iter()
            .find(|s| job_hosts.iter().any(|h| h.name == s.name))
        {
            return Err(format!(
                "host '{}' is both a host of the job and a spare host",
                h.name
            ));
        }
    }
    let remote = g.hosts.as_ref().is_some_and(|hs| {
        hs.iter()
            .chain(&g.spare_hosts)
            .any(|h| !is_this_host(&h.name))
    });
    if remote && spares > 0 && g.spares.is_some() {
        return Err(
            "--spares with hosts other than this machine is not supported yet (--spares 0)".into(),
        );
    }
    let spares = if remote { 0 } else { spares };
    if let Some(hs) = g.hosts.as_mut() {
        placement = hosts::place(hs, ranks, g.policy)?;
        hs.append(&mut g.spare_hosts);
    } else if let Some(n) = g.policy.per_host {
        if ranks > n && !g.policy.oversubscribe {
            return Err(format!(
                "{ranks} ranks asked for but -ppn {n} allows {n} on this host; allow it with --oversubscribe"
            ));
        }
    }
    Ok(Parsed::Run(Box::new(Options {
        ranks,
        apps,
        output: g.output,
        report_bindings: g.report_bindings,
        env: g.env,
        kill_grace_secs: g.kill_grace_secs.unwrap_or(2.0),
        recovery,
        max_restarts: g.max_restarts.unwrap_or(8),
        spares,
        inject: g.inject,
        ckpt: g.ckpt,
        restart: g.restart,
        hosts: g.hosts,
        spare_hosts,
        policy: g.policy,
        placement,
        bind: g.bind,
        launcher: match g.launcher {
            Some(l) if l.is_empty() => {
                return Err("--launcher exec needs the command: --launcher-exec CMD".into())
            }
            Some(l) => l,
            None => vec!["ssh".into(), "-o".into(), "BatchMode=yes".into()],
        },
        control_addr: g.control_addr,
        heartbeat_timeout: std::time::Duration::from_secs_f64(g.heartbeat_timeout.unwrap_or(5.0)),
        timeout: match g.timeout {
            Some(t) => Some(t),
            None => match std::env::var("MPIEXEC_TIMEOUT") {
                Ok(v) if !v.trim().is_empty() => Some(parse_timeout("MPIEXEC_TIMEOUT", v.trim())?),
                _ => None,
            },
        }
        .map(std::time::Duration::from_secs_f64),
    })))
}

/// The longest time an option takes (about 31 years): a larger one would
/// overflow a deadline (a panic, found by fuzzing the inject specs).
const MAX_SECS: f64 = 1e9;

/// Seconds of `--timeout` or `MPIEXEC_TIMEOUT` (more than 0).
fn parse_timeout(what: &str, v: &str) -> Result<f64, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0 && *s <= MAX_SECS)
        .ok_or_else(|| format!("{what} needs seconds (more than 0, at most {MAX_SECS}), not '{v}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Parsed, String> {
        parse_in(
            &s.split_whitespace().map(String::from).collect::<Vec<_>>(),
            &Allocation::default(),
        )
    }

    #[test]
    fn common_forms() {
        let Parsed::Run(o) = p("-np 4 --tag-output ./app -n 3 x").unwrap() else {
            panic!()
        };
        assert_eq!(
            (o.ranks, o.output.tag, o.apps[0].program.as_str()),
            (4, true, "./app")
        );
        assert_eq!(o.apps[0].args, vec!["-n", "3", "x"]);
        assert_eq!(p("--help").unwrap(), Parsed::Help);
        assert!(p("-n 0 ./a").is_err());
        assert!(p("-n x ./a").is_err());
        assert!(p("./a").is_err());
        assert!(p("-n 2").is_err());
        assert!(p("--bogus -n 2 ./a").is_err());
        let Parsed::Run(o) =
            p("-n 4 --recovery stages --inject rank=3,after=0.5 --max-restarts 2 ./a").unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (o.recovery, o.max_restarts, o.inject.len()),
            (RecoveryMode::Stages, 2, 1)
        );
        assert!(p("-n 2 --inject rank=2,after=1 ./a").is_err());
        assert!(p("-n 2 --recovery maybe ./a").is_err());
        for (m, r) in [("reinit", RecoveryMode::Reinit), ("cpr", RecoveryMode::Cpr)] {
            let Parsed::Run(o) = p(&format!("-n 2 --recovery {m} ./a")).unwrap() else {
                panic!()
            };
            assert_eq!(o.recovery, r);
        }
        assert!(p("-n 2 --ckpt bogus ./a").is_err());
        let Parsed::Run(o) = p("-n 2 --mtbf 3600 --ckpt-interval 2.5 ./a").unwrap() else {
            panic!()
        };
        assert!(o.env.contains(&("MPISTAGES_MTBF".into(), "3600".into())));
        assert!(o
            .env
            .contains(&("MPISTAGES_CKPT_INTERVAL".into(), "2.5".into())));
        for bad in ["0", "-3", "never", "1e10"] {
            let e = p(&format!("-n 2 --mtbf {bad} ./a")).err().unwrap();
            assert!(e.contains("--mtbf") && e.contains(bad), "{e}");
        }
        // One spare by default where a failed rank is replaced, none
        // elsewhere; asking for spares without replacement is an error.
        let spares = |s: &str| match p(s) {
            Ok(Parsed::Run(o)) => Ok(o.spares),
            Ok(_) => panic!(),
            Err(e) => Err(e),
        };
        assert_eq!(spares("-n 2 --recovery stages ./a"), Ok(1));
        assert_eq!(spares("-n 2 --recovery reinit --spares 0 ./a"), Ok(0));
        assert_eq!(spares("-n 2 --recovery stages --spares 3 ./a"), Ok(3));
        assert_eq!(spares("-n 2 --recovery cpr ./a"), Ok(0));
        assert_eq!(spares("-n 2 ./a"), Ok(0));
        assert!(spares("-n 2 --recovery cpr --spares 1 ./a").is_err());
        assert!(spares("-n 2 --recovery stages --spares x ./a").is_err());
        assert!(spares("-n 2 --recovery stages --spares 65 ./a").is_err());
        assert_eq!(spares("-n 1 --recovery stages ./a : -n 1 ./b"), Ok(0));
        assert!(spares("-n 1 --recovery stages --spares 1 ./a : -n 1 ./b").is_err());
    }

    fn run(s: &str) -> Options {
        match p(s) {
            Ok(Parsed::Run(o)) => *o,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn several_programs_with_their_own_options() {
        let o = run("-genv A 1 -n 2 -wdir /tmp -env B 2 ./a x : -np 3 ./b y z");
        assert_eq!(o.ranks, 5);
        assert_eq!(o.env, vec![("A".to_string(), "1".to_string())]);
        let (a, b) = (&o.apps[0], &o.apps[1]);
        assert_eq!(
            (a.ranks, a.program.as_str(), a.args.clone()),
            (2, "./a", vec!["x".to_string()])
        );
        assert_eq!(a.wdir.as_deref(), Some(std::path::Path::new("/tmp")));
        assert_eq!(a.env, vec![("B".to_string(), "2".to_string())]);
        assert_eq!(
            (b.ranks, b.program.as_str(), b.wdir.clone()),
            (3, "./b", None)
        );
        assert_eq!(o.app_of(1).program, "./a");
        assert_eq!(o.app_of(2).program, "./b");
        assert_eq!(o.app_of(4).program, "./b");
        let err = p("-n 1 ./a : --recovery stages -n 1 ./b").unwrap_err();
        assert!(err.contains("before the first program"), "{err}");
        assert!(p("-n 1 ./a : -n 1").unwrap_err().contains("no program"));
        assert!(p("-n 1 ./a : ./b")
            .unwrap_err()
            .contains("'./b' is missing"));
        assert!(
            p("-n 2 -env A ./a").is_err(),
            "-env takes a name and a value"
        );
    }

    #[test]
    fn hosts_slots_and_binding() {
        let o = run("-H localhost:2,127.0.0.1 --map-by node --bind-to core -n 3 ./a");
        let hs = o.hosts.clone().unwrap();
        assert_eq!((hs.len(), hs[0].slots), (2, 2));
        assert_eq!((o.policy.map_by, o.bind), (MapBy::Node, Bind::Core));
        let err = p("--host localhost:2 -n 3 ./a").unwrap_err();
        assert!(err.contains("--oversubscribe"), "{err}");
        run("--host localhost:2 --oversubscribe -n 3 ./a");
        // Without hosts, this host takes any number of ranks; -ppn caps it.
        run("-n 64 ./a");
        assert!(p("-ppn 2 -n 3 ./a").is_err());
        run("-ppn 2 --oversubscribe -n 3 ./a");
        let o = run("--host node7:4 --launcher-exec 'ip' -n 2 ./a");
        assert_eq!(o.launcher, vec!["'ip'".to_string()]);
        assert_eq!(o.spares, 0);
        assert!(p("--host node7:4 --recovery stages --spares 1 -n 2 ./a").is_err());
        let o = run("--host localhost:2 --spare-hosts 127.0.0.2:2 -n 2 ./a");
        assert_eq!(
            (o.hosts.unwrap().len(), o.spare_hosts, o.placement),
            (2, 1, vec![0, 0])
        );
        assert!(p("--host localhost:2 --spare-hosts localhost:1 -n 2 ./a").is_err());
        assert!(p("--launcher rsh -n 2 ./a").is_err());
        assert!(p("--launcher exec -n 2 ./a").is_err());
        let o = run("--launcher-exec ip --launcher exec -n 2 ./a");
        assert_eq!(o.launcher, vec!["ip".to_string()]);
        assert!(p("--heartbeat-timeout 0.1 -n 2 ./a").is_err());
        // Found by fuzzing: seconds past a deadline's range were a panic,
        // a huge rank count gigabytes.
        assert!(p("-np 444444447 ./a").is_err());
        for big in [
            "--heartbeat-timeout 1e300",
            "--timeout 1e300",
            "--kill-grace 1e20",
        ] {
            assert!(p(&format!("{big} -n 2 ./a")).is_err(), "{big}");
        }
        assert!(p("--control-addr here -n 2 ./a").is_err());
        assert!(p("--bind-to board -n 2 ./a").is_err());
        let Parsed::Run(o) = p("--bind-to socket --report-bindings -l -n 2 ./a").unwrap() else {
            panic!()
        };
        assert!(o.bind == Bind::Socket && o.report_bindings && o.output.rank);
        // An unknown option last on the line is unknown, not short of a value.
        assert_eq!(p("-n 2 --bogus").err().unwrap(), "unknown option '--bogus'");
        assert_eq!(
            p("-n 2 --spares").err().unwrap(),
            "option --spares needs a value"
        );
        assert!(p("--map-by ppr -n 2 ./a").is_err());
        assert!(p("--hostfile /nonexistent -n 2 ./a").is_err());
    }

    fn in_allocation(s: &str, nodes: &str, tasks: &str) -> Result<Parsed, String> {
        parse_in(
            &s.split_whitespace().map(String::from).collect::<Vec<_>>(),
            &Allocation {
                nodelist: Some(nodes.into()),
                tasks_per_node: Some(tasks.into()),
            },
        )
    }

    #[test]
    fn inside_an_allocation_hosts_and_launcher_are_slurms() {
        let Ok(Parsed::Run(o)) = in_allocation("-n 6 ./a", "c[1-2]", "3(x2)") else {
            panic!()
        };
        let hosts = o.hosts.as_ref().unwrap();
        assert_eq!(hosts.len(), 2);
        assert_eq!((hosts[1].name.as_str(), hosts[1].slots), ("c2", 3));
        assert_eq!(o.placement, vec![0, 0, 0, 1, 1, 1]);
        assert_eq!(o.launcher[0], "srun");
        assert!(o.launcher.iter().any(|w| w == "--overlap"));
        // More ranks than Slurm's slots is refused, as with --host.
        assert!(in_allocation("-n 7 ./a", "c[1-2]", "3(x2)").is_err());
        // --host inside an allocation: those hosts, started by ssh.
        let Ok(Parsed::Run(o)) = in_allocation("--host x:2 -n 2 ./a", "c1", "2") else {
            panic!()
        };
        assert_eq!(o.launcher[0], "ssh");
        // --launcher slurm outside an allocation is an error that says so.
        let e = p("--launcher slurm -n 2 ./a").unwrap_err();
        assert!(e.contains("allocation"), "{e}");
    }
}
