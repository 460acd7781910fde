//! `mpistages-bench campaign`: randomized failures over the examples in
//! every recovery mode, each run checked bit for bit against a failure-free
//! run of the same job.
//!
//! A run is drawn from the seed and its number: application, mode, rank
//! count, whether two CPU hogs run beside it, and a scenario — a kill at a
//! time, on entering an MPI call, right after or while writing a
//! checkpoint, a second kill during the recovery of a first, two ranks at
//! once, rank 0, `mpiexec` itself, or a rank stopped (SIGSTOP) for 1 to
//! 10 s and continued, over a transport drawn too. Each run is classified:
//! - `correct`: the job finished and printed the failure-free result;
//! - `clean-error`: it ended with a message saying why it cannot recover,
//!   for failures unrecoverable by design (during start-up, after a rank
//!   finalized, the restart budget; `mpiexec` killed and every rank gone);
//! - `wrong`: it finished with another result;
//! - `hang`: it did not end within the limit;
//! - `crash`: it ended otherwise (a survivor died, an unexplained error).
//!
//! After every run the campaign's own checkpoint root must hold no job
//! directory (a job whose `mpiexec` was killed leaves one, which the next
//! `mpiexec` removes). Rows go to OUT/campaign.csv, the summary to stdout
//! and OUT/campaign-summary.txt; the exit status is 1 if any run was wrong,
//! hung or crashed.

mod job;

use job::{job, Hogs, Outcome, Stop};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub const USAGE: &str = "\
usage: mpistages-bench campaign [options]

Runs N randomized failures over stencil2d, hydro3d, md, collectives and halo_rma in every recovery
mode and checks each result against a failure-free run. Options:
  --runs N         how many failure runs (default 300)
  --seed S         the seed every run is drawn from (default 1)
  --apps LIST      stencil2d,hydro3d,md,collectives,halo_rma (default all)
  --modes LIST     stages,reinit,cpr (default all)
  --scenarios LIST time,call,checkpoint,writing,during-recovery,two-at-once,
                   rank-0,mpiexec,stop (default all)
  --load F         share of the runs with two CPU hogs beside them, spread
                   evenly (default 1/3: every third run)
  --quick          smaller problems and at most 4 ranks (for the tests)
  --out DIR        where campaign.csv and campaign-summary.txt go
                   (default results)
  --examples DIR   the examples' sources (default: the checkout's examples/)
  --timeout SECS   a run that takes longer is a hang (default: 30 s or 20
                   times the failure-free run, whichever is longer)
";

/// A deterministic generator (splitmix64): the same seed draws the same
/// campaign on every machine and with every version of every crate.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, run: u64) -> Rng {
        let mut r = Rng(seed ^ run.wrapping_mul(0xA076_1D64_78BD_642F));
        r.next();
        r
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    fn int(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.int(0, xs.len() as u64 - 1) as usize]
    }
}

/// An MPI call an application makes `per_iter` times per iteration after
/// `before` calls of set-up.
struct Call {
    name: &'static str,
    before: u64,
    per_iter: u64,
}

struct App {
    name: &'static str,
    ranks: &'static [usize],
    quick_ranks: &'static [usize],
    iters: u64,
    every: u64,
    /// Program arguments after the executable.
    args: fn(quick: bool) -> Vec<String>,
    result_marker: &'static str,
    calls: &'static [Call],
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

const APPS: [App; 5] = [
    App {
        name: "stencil2d",
        ranks: &[2, 3, 4, 6, 8],
        quick_ranks: &[2, 3, 4],
        iters: 1000,
        every: 20,
        args: |q| {
            if q {
                strings(&["192", "1000", "20", "protect"])
            } else {
                strings(&["384", "1000", "20", "protect"])
            }
        },
        result_marker: "checksum",
        calls: &[
            Call {
                name: "MPI_Allreduce",
                before: 0,
                per_iter: 1,
            },
            Call {
                name: "MPI_Waitall",
                before: 0,
                per_iter: 1,
            },
        ],
    },
    App {
        name: "hydro3d",
        ranks: &[8],
        quick_ranks: &[8],
        iters: 100,
        every: 10,
        args: |q| strings(&["-s", if q { "8" } else { "16" }, "-i", "100", "-k", "10"]),
        result_marker: "final origin energy",
        calls: &[
            Call {
                name: "MPI_Waitall",
                before: 1,
                per_iter: 1,
            },
            Call {
                name: "MPI_Allreduce",
                before: 0,
                per_iter: 1,
            },
        ],
    },
    App {
        name: "md",
        ranks: &[2, 3, 4, 6, 8],
        quick_ranks: &[2, 3, 4],
        iters: 100,
        every: 10,
        args: |q| strings(&["-s", if q { "4" } else { "6" }, "-i", "100", "-k", "10"]),
        result_marker: "energy per atom",
        calls: &[Call {
            name: "MPI_Sendrecv",
            before: 12,
            per_iter: 24,
        }],
    },
    // Beyond the proxies: non-blocking and persistent collectives in
    // flight at the kill, MPI_Alltoallv, sub-communicators made anew after
    // each rollback.
    App {
        name: "collectives",
        ranks: &[2, 3, 4, 6, 8],
        quick_ranks: &[2, 3, 4],
        iters: 200,
        every: 20,
        args: |_| strings(&["200", "20"]),
        result_marker: "total",
        calls: &[
            Call {
                name: "MPI_Waitall",
                before: 0,
                per_iter: 1,
            },
            Call {
                name: "MPI_Iallreduce",
                before: 0,
                per_iter: 3,
            },
            Call {
                name: "MPI_Alltoallv",
                before: 0,
                per_iter: 1,
            },
        ],
    },
    // Windows and files: a halo by MPI_Put between fences, the state
    // written to one shared file collectively every K iterations; the
    // rollback releases both and the attempt makes them again.
    App {
        name: "halo_rma",
        ranks: &[2, 3, 4, 6, 8],
        quick_ranks: &[2, 3, 4],
        iters: 200,
        every: 20,
        args: |_| strings(&["64", "200", "20"]),
        result_marker: "checksum",
        calls: &[
            Call {
                name: "MPI_Win_fence",
                before: 0,
                per_iter: 2,
            },
            Call {
                name: "MPI_Put",
                before: 0,
                per_iter: 2,
            },
        ],
    },
];

struct Opts {
    runs: u64,
    seed: u64,
    apps: Vec<&'static App>,
    modes: Vec<String>,
    scenarios: Vec<Scenario>,
    load: f64,
    quick: bool,
    out: PathBuf,
    examples: PathBuf,
    timeout: Option<Duration>,
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let bindir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let mut o = Opts {
        runs: 300,
        seed: 1,
        apps: APPS.iter().collect(),
        modes: super::list("stages,reinit,cpr"),
        scenarios: SCENARIOS.to_vec(),
        load: 1.0 / 3.0,
        quick: false,
        out: PathBuf::from("results"),
        examples: bindir.join("../../examples"),
        timeout: None,
    };
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "-h" | "--help" => return Err(String::new()),
            "--quick" => {
                o.quick = true;
                i += 1;
                continue;
            }
            _ => {}
        }
        let v = args
            .get(i + 1)
            .ok_or_else(|| format!("option {a} needs a value"))?;
        match a {
            "--runs" => o.runs = super::number("--runs", v)?,
            "--seed" => o.seed = super::number("--seed", v)?,
            "--apps" => o.apps = super::named(v, &APPS, |a| a.name)?,
            "--modes" => o.modes = super::modes(v)?,
            "--scenarios" => {
                o.scenarios = super::named(v, &SCENARIOS, |s| s.name())?
                    .into_iter()
                    .copied()
                    .collect()
            }
            "--load" => {
                o.load = super::number("--load", v)?;
                if !(0.0..=1.0).contains(&o.load) {
                    return Err("--load is a share between 0 and 1".into());
                }
            }
            "--out" => o.out = PathBuf::from(v),
            "--examples" => o.examples = PathBuf::from(v),
            "--timeout" => {
                o.timeout = Some(Duration::from_secs_f64(super::number("--timeout", v)?))
            }
            _ => return Err(format!("unknown option '{a}'")),
        }
        i += 2;
    }
    if o.runs == 0 || o.apps.is_empty() || o.modes.is_empty() || o.scenarios.is_empty() {
        return Err("need --runs >= 1, an app, a mode and a scenario".into());
    }
    Ok(o)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Scenario {
    Time,
    Call,
    Checkpoint,
    Writing,
    DuringRecovery,
    TwoAtOnce,
    RankZero,
    Mpiexec,
    Stop,
}

const SCENARIOS: [Scenario; 9] = [
    Scenario::Time,
    Scenario::Call,
    Scenario::Checkpoint,
    Scenario::Writing,
    Scenario::DuringRecovery,
    Scenario::TwoAtOnce,
    Scenario::RankZero,
    Scenario::Mpiexec,
    Scenario::Stop,
];

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Time => "time",
            Scenario::Call => "call",
            Scenario::Checkpoint => "checkpoint",
            Scenario::Writing => "writing",
            Scenario::DuringRecovery => "during-recovery",
            Scenario::TwoAtOnce => "two-at-once",
            Scenario::RankZero => "rank-0",
            Scenario::Mpiexec => "mpiexec",
            Scenario::Stop => "stop",
        }
    }
}

/// One drawn run.
struct Plan {
    app: &'static App,
    mode: String,
    ranks: usize,
    load: bool,
    scenario: Scenario,
    /// `--inject` specs.
    injects: Vec<String>,
    /// For `Scenario::Mpiexec`: when mpiexec gets SIGKILL.
    kill_mpiexec: Option<Duration>,
    /// For `Scenario::Stop`: the rank paused with SIGSTOP, when and for
    /// how long (then SIGCONT).
    stop: Option<Stop>,
    /// `MPISTAGES_TRANSPORT` (a stopped rank is seen differently on each).
    transport: &'static str,
}

/// The failure-free result of an app at a rank count, and its wall time.
struct Reference {
    result: String,
    wall: f64,
}

fn draw(o: &Opts, run: u64, reference: &dyn Fn(&App, usize) -> f64) -> Plan {
    let mut rng = Rng::new(o.seed, run);
    let app = *rng.pick(&o.apps);
    let mode = rng.pick(&o.modes).clone();
    let ranks = *rng.pick(if o.quick { app.quick_ranks } else { app.ranks });
    // Exactly the share asked for, spread evenly: run k is loaded when
    // floor(k * load) steps up (with 1/3: runs 3, 6, 9, ...).
    // (A small margin keeps 3 * (1/3) from rounding below 1.)
    let steps = |k: u64| (k as f64 * o.load + 1e-9).floor();
    let load = steps(run) > steps(run - 1);
    let scenario = *rng.pick(&o.scenarios);
    let wall = reference(app, ranks);
    let rank = |rng: &mut Rng| rng.int(0, ranks as u64 - 1);
    let epochs = app.iters / app.every;
    let call = |rng: &mut Rng, r: u64| {
        let c = rng.pick(app.calls);
        let it = rng.int(1, app.iters - 1);
        let n = c.before + c.per_iter * it + rng.int(1, c.per_iter);
        format!("rank={r},call={}:{n}", c.name)
    };
    // Timed kills land in the middle 80 % of a failure-free run.
    let at = |rng: &mut Rng| wall * (0.1 + 0.8 * rng.unit());
    let mut kill_mpiexec = None;
    let mut stop = None;
    let mut transport = "auto";
    let injects = match scenario {
        Scenario::Time => vec![format!("rank={},after={:.3}", rank(&mut rng), at(&mut rng))],
        Scenario::Call => {
            let r = rank(&mut rng);
            vec![call(&mut rng, r)]
        }
        Scenario::Checkpoint => vec![format!(
            "rank={},checkpoint={}",
            rank(&mut rng),
            rng.int(1, epochs - 1)
        )],
        Scenario::Writing => vec![format!(
            "rank={},writing={}",
            rank(&mut rng),
            rng.int(1, epochs - 1)
        )],
        Scenario::DuringRecovery => {
            let first = rank(&mut rng);
            let second = (first + rng.int(1, ranks as u64 - 1)) % ranks as u64;
            if mode == "stages" && rng.unit() < 0.5 {
                // The second rank dies inside the rollback itself.
                vec![
                    call(&mut rng, first),
                    format!("rank={second},call=MPIX_Checkpoint_read:1"),
                ]
            } else {
                let t = at(&mut rng);
                let dt = 0.001 * rng.int(2, 60) as f64;
                vec![
                    format!("rank={first},after={t:.3}"),
                    format!("rank={second},after={:.3}", t + dt),
                ]
            }
        }
        Scenario::TwoAtOnce => {
            let first = rank(&mut rng);
            let second = (first + rng.int(1, ranks as u64 - 1)) % ranks as u64;
            let spec = call(&mut rng, first);
            let when = spec.split_once(',').map_or("", |(_, w)| w).to_string();
            vec![spec, format!("rank={second},{when}")]
        }
        Scenario::RankZero => vec![if rng.unit() < 0.5 {
            call(&mut rng, 0)
        } else {
            format!("rank=0,checkpoint={}", rng.int(1, epochs - 1))
        }],
        Scenario::Mpiexec => {
            kill_mpiexec = Some(Duration::from_secs_f64(at(&mut rng)));
            Vec::new()
        }
        Scenario::Stop => {
            // 1 to 10 s: below, at and past UDP's 10 s silence limit.
            stop = Some(Stop {
                rank: rank(&mut rng) as usize,
                at: Duration::from_secs_f64(at(&mut rng)),
                length: Duration::from_secs(rng.int(1, 10)),
            });
            transport = *rng.pick(&["auto", "tcp", "udp"]);
            Vec::new()
        }
    };
    Plan {
        app,
        mode,
        ranks,
        load,
        scenario,
        injects,
        kill_mpiexec,
        stop,
        transport,
    }
}

/// The result line without a trailing ", T s" (the run time).
fn result_of(app: &App, stdout: &str) -> Option<String> {
    let line = stdout.lines().find(|l| l.contains(app.result_marker))?;
    Some(match line.rsplit_once(", ") {
        Some((a, t)) if t.ends_with(" s") && t[..t.len() - 2].parse::<f64>().is_ok() => {
            a.to_string()
        }
        _ => line.to_string(),
    })
}

/// Messages of failures that cannot be recovered by design.
const UNRECOVERABLE: [&str; 4] = [
    "it failed during start-up",
    "has already called MPI_Finalize",
    "restart budget is spent",
    "called MPI_Finalize while the job was recovering",
];

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Class {
    Correct,
    CleanError,
    Wrong,
    Hang,
    Crash,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::Correct => "correct",
            Class::CleanError => "clean-error",
            Class::Wrong => "wrong",
            Class::Hang => "hang",
            Class::Crash => "crash",
        }
    }
}

fn classify(plan: &Plan, r: &Outcome, expected: &str) -> (Class, String) {
    if r.timed_out {
        let last = r
            .stderr
            .lines()
            .rev()
            .find(|l| l.starts_with("mpiexec:"))
            .unwrap_or("");
        return (
            Class::Hang,
            format!("no end after {:.1} s; last: {last}", r.wall),
        );
    }
    if plan.scenario == Scenario::Mpiexec {
        return match (r.signal, r.ranks_gone_after) {
            (Some(9), Some(d)) => (
                Class::CleanError,
                format!("mpiexec killed; every rank gone {} ms later", d.as_millis()),
            ),
            (Some(9), None) => (
                Class::Crash,
                "mpiexec killed; ranks still there 5 s later".into(),
            ),
            // The job ended before the kill.
            _ => match result_of(plan.app, &r.stdout) {
                Some(res) if res == expected && r.code == Some(0) => {
                    (Class::Correct, "ended before mpiexec was killed".into())
                }
                Some(res) => (Class::Wrong, res),
                None => (
                    Class::Crash,
                    format!("exit {:?} before mpiexec was killed", r.code),
                ),
            },
        };
    }
    // A survivor killed by another signal than the injected SIGKILL.
    if let Some(l) = r
        .stderr
        .lines()
        .find(|l| l.contains("was killed by signal") && !l.contains("signal 9 "))
    {
        return (Class::Crash, l.to_string());
    }
    match r.code {
        // 3: the job succeeded, but a spec found nothing to kill (a timed
        // one after the job's end, or a rank already gone).
        Some(0) | Some(3) => match result_of(plan.app, &r.stdout) {
            Some(res) if res == expected => {
                let note = if r.code == Some(3) {
                    "a spec never fired"
                } else {
                    ""
                };
                (Class::Correct, note.to_string())
            }
            Some(res) => (Class::Wrong, res),
            None => (Class::Wrong, "no result line".into()),
        },
        _ => {
            if let Some(l) = r
                .stderr
                .lines()
                .find(|l| UNRECOVERABLE.iter().any(|u| l.contains(u)))
            {
                return (Class::CleanError, l.to_string());
            }
            let last = r
                .stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            (Class::Crash, format!("exit {:?}: {last}", r.code))
        }
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The job directories left in the campaign's checkpoint root.
fn job_dirs(root: &Path) -> Vec<String> {
    std::fs::read_dir(root)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("job-"))
                .collect()
        })
        .unwrap_or_default()
}

pub fn main(args: &[String]) -> i32 {
    super::command("mpistages-bench campaign", USAGE, parse(args), campaign)
}

/// Runs the campaign; true when no run was wrong, hung or crashed.
fn campaign(o: &Opts) -> Result<bool, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let mpiexec = me.with_file_name("mpiexec");
    let scratch = super::Scratch::new(
        std::env::temp_dir().join(format!("mpistages-campaign-{}", std::process::id())),
    );
    // The checkpoints go to a root of their own on tmpfs, so that what a
    // job leaves behind is seen (and no other job's files are).
    let root = super::Scratch::new(PathBuf::from(format!(
        "/dev/shm/mpistages-campaign-{}",
        std::process::id()
    )));
    std::fs::create_dir_all(&scratch.0).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let mpicc = me.with_file_name("mpicc");
    let mut exes = Vec::new();
    for app in &o.apps {
        let src = o.examples.join(format!("{}.c", app.name));
        let exe = scratch.0.join(app.name);
        let st = Command::new(&mpicc)
            .args(["-O2", "-o"])
            .arg(&exe)
            .arg(&src)
            .arg("-lm")
            .status()
            .map_err(|e| format!("running {}: {e}", mpicc.display()))?;
        if !st.success() {
            return Err(format!("building {} failed", src.display()));
        }
        exes.push((app.name, exe));
    }
    let exe_of = |app: &App| {
        exes.iter()
            .find(|(n, _)| *n == app.name)
            .map(|(_, e)| e.clone())
            .expect("built above")
    };
    let ckpt = format!("mem,tmpfs:{}", root.0.display());
    let job_args = |app: &App, mode: &str, ranks: usize, injects: &[String]| {
        let mut a = strings(&[
            "-n",
            &ranks.to_string(),
            "--recovery",
            mode,
            "--ckpt",
            &ckpt,
        ]);
        for i in injects {
            a.push("--inject".into());
            a.push(i.clone());
        }
        a.push(exe_of(app).display().to_string());
        a.extend((app.args)(o.quick));
        a
    };
    // Failure-free references, each app at each rank count drawn.
    let mut refs: Vec<(&str, usize, Reference)> = Vec::new();
    for app in &o.apps {
        for &n in if o.quick { app.quick_ranks } else { app.ranks } {
            let r = job(
                &mpiexec,
                &scratch.0,
                &job_args(app, "stages", n, &[]),
                &[],
                Duration::from_secs(300),
                None,
                None,
            )?;
            let result = result_of(app, &r.stdout)
                .filter(|_| r.code == Some(0))
                .ok_or_else(|| {
                    format!(
                        "the failure-free {} at {n} ranks failed:\n{}",
                        app.name, r.stderr
                    )
                })?;
            eprintln!("reference {} at {n} ranks: {:.2} s", app.name, r.wall);
            refs.push((
                app.name,
                n,
                Reference {
                    result,
                    wall: r.wall,
                },
            ));
        }
    }
    let reference = |app: &App, n: usize| -> &Reference {
        &refs
            .iter()
            .find(|(a, m, _)| *a == app.name && *m == n)
            .expect("a reference per app and rank count")
            .2
    };
    let mut csv = String::from(
        "run,app,mode,ranks,load,scenario,injects,class,exit,wall_s,recoveries,detail\n",
    );
    let mut counts: Vec<(String, Class)> = Vec::new();
    let mut bad = Vec::new();
    let mut leftovers = 0;
    let mut loaded = 0;
    for run in 1..=o.runs {
        let plan = draw(o, run, &|a, n| reference(a, n).wall);
        let rf = reference(plan.app, plan.ranks);
        let limit = o
            .timeout
            .unwrap_or_else(|| Duration::from_secs_f64((20.0 * rf.wall).max(30.0)));
        let hogs = plan.load.then(|| Hogs::start(2));
        loaded += usize::from(plan.load);
        let args = job_args(plan.app, &plan.mode, plan.ranks, &plan.injects);
        let env = [("MPISTAGES_TRANSPORT", plan.transport.to_string())];
        // In the campaign's scratch directory: halo_rma's file goes there
        // (a run whose mpiexec is killed leaves it, and the scratch
        // directory goes at the end), not into the caller's.
        let r = job(
            &mpiexec,
            &scratch.0,
            &args,
            &env,
            limit,
            plan.kill_mpiexec,
            plan.stop,
        )?;
        drop(hogs);
        let (class, mut detail) = classify(&plan, &r, &rf.result);
        // Only a job whose mpiexec was killed may leave its directory, for
        // the next mpiexec to remove.
        let left = job_dirs(&root.0);
        if plan.scenario != Scenario::Mpiexec && !left.is_empty() {
            leftovers += 1;
            let _ = write!(detail, "; left in the checkpoint root: {left:?}");
        }
        let recoveries = r
            .stderr
            .lines()
            .filter(|l| l.contains("mpiexec: recovery ") && l.contains(" done: "))
            .count();
        let injects = match (plan.kill_mpiexec, plan.stop) {
            (Some(t), _) => format!("mpiexec after={:.3}", t.as_secs_f64()),
            (_, Some(s)) => format!(
                "SIGSTOP rank={} after={:.3} for {} s over {}",
                s.rank,
                s.at.as_secs_f64(),
                s.length.as_secs(),
                plan.transport
            ),
            _ => plan.injects.join(" "),
        };
        let exit = match (r.code, r.signal) {
            (Some(c), _) => c.to_string(),
            (_, Some(s)) => format!("signal {s}"),
            _ => "-".into(),
        };
        let _ = writeln!(
            csv,
            "{run},{},{},{},{},{},{},{},{},{:.3},{recoveries},{}",
            plan.app.name,
            plan.mode,
            plan.ranks,
            plan.load,
            plan.scenario.name(),
            csv_field(&injects),
            class.name(),
            csv_field(&exit),
            r.wall,
            csv_field(&detail)
        );
        eprintln!(
            "[{run}/{}] {} {} {} ranks{} {}: {} ({:.2} s{}) {}",
            o.runs,
            plan.app.name,
            plan.mode,
            plan.ranks,
            if plan.load { " +load" } else { "" },
            injects,
            class.name(),
            r.wall,
            if recoveries > 0 {
                format!(", {recoveries} recoveries")
            } else {
                String::new()
            },
            detail
        );
        if matches!(class, Class::Wrong | Class::Hang | Class::Crash) {
            bad.push(format!(
                "run {run} ({} {} {} ranks, {injects}): {} - {detail}\n    stderr:\n{}",
                plan.app.name,
                plan.mode,
                plan.ranks,
                class.name(),
                stderr_excerpt(&r.stderr)
                    .iter()
                    .map(|l| format!("      {l}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
        counts.push((format!("{} {}", plan.app.name, plan.mode), class));
    }
    std::fs::write(o.out.join("campaign.csv"), &csv).map_err(|e| e.to_string())?;
    let summary = summarize(o, &counts, &bad, leftovers, loaded);
    print!("{summary}");
    std::fs::write(o.out.join("campaign-summary.txt"), &summary).map_err(|e| e.to_string())?;
    Ok(bad.is_empty() && leftovers == 0)
}

fn summarize(
    o: &Opts,
    counts: &[(String, Class)],
    bad: &[String],
    leftovers: usize,
    loaded: usize,
) -> String {
    let classes = [
        Class::Correct,
        Class::CleanError,
        Class::Wrong,
        Class::Hang,
        Class::Crash,
    ];
    let mut s = String::new();
    let _ = writeln!(
        s,
        "campaign: {} runs, seed {}, {}{loaded} beside two CPU hogs",
        o.runs,
        o.seed,
        if o.quick { "quick, " } else { "" },
    );
    let _ = write!(s, "{:<20}", "");
    for c in classes {
        let _ = write!(s, "{:>12}", c.name());
    }
    s.push('\n');
    let mut groups: Vec<&String> = counts.iter().map(|(g, _)| g).collect();
    groups.sort();
    groups.dedup();
    let total = "all".to_string();
    for g in groups.into_iter().chain([&total]) {
        let _ = write!(s, "{g:<20}");
        for c in classes {
            let n = counts
                .iter()
                .filter(|(h, k)| (g == &total || h == g) && *k == c)
                .count();
            let _ = write!(s, "{n:>12}");
        }
        s.push('\n');
    }
    if leftovers > 0 {
        let _ = writeln!(
            s,
            "{leftovers} runs left a job directory in the checkpoint root"
        );
    }
    for b in bad {
        let _ = writeln!(s, "{b}");
    }
    s
}

/// What a bad run's summary quotes of its standard error: a rank's fault
/// report and backtrace when one died of a fault (the lines that say
/// where), else the last 8 lines.
fn stderr_excerpt(stderr: &str) -> Vec<&str> {
    let lines: Vec<&str> = stderr.lines().collect();
    match lines.iter().position(|l| l.contains(") received SIG")) {
        Some(at) => lines[at..].iter().take(24).copied().collect(),
        None => lines[lines.len().saturating_sub(8)..].to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> Opts {
        parse(&strings(args)).unwrap()
    }

    fn plans(o: &Opts, n: u64) -> Vec<Plan> {
        (1..=n).map(|run| draw(o, run, &|_, _| 2.0)).collect()
    }

    #[test]
    fn every_third_run_is_loaded_and_the_draw_repeats() {
        let o = opts(&[]);
        let loaded: Vec<u64> = plans(&o, 30)
            .iter()
            .zip(1..)
            .filter(|(p, _)| p.load)
            .map(|(_, run)| run)
            .collect();
        assert_eq!(loaded, (1..=10).map(|k| 3 * k).collect::<Vec<_>>());
        let (a, b) = (plans(&o, 20), plans(&o, 20));
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(
                (x.app.name, &x.mode, x.ranks, x.scenario),
                (y.app.name, &y.mode, y.ranks, y.scenario)
            );
            assert_eq!(x.injects, y.injects);
        }
    }

    #[test]
    fn a_stop_pauses_one_rank_for_one_to_ten_seconds_over_a_drawn_transport() {
        let o = opts(&["--scenarios", "stop"]);
        let all = plans(&o, 200);
        let mut transports = std::collections::BTreeSet::new();
        for p in &all {
            let s = p.stop.expect("a stop plan");
            assert_eq!(p.scenario, Scenario::Stop);
            assert!(p.injects.is_empty() && p.kill_mpiexec.is_none());
            assert!(s.rank < p.ranks);
            assert!((1..=10).contains(&s.length.as_secs()), "{:?}", s.length);
            // In the middle 80 % of a failure-free run (2 s here).
            assert!(s.at >= Duration::from_millis(200) && s.at <= Duration::from_millis(1800));
            transports.insert(p.transport);
        }
        assert_eq!(
            transports.into_iter().collect::<Vec<_>>(),
            ["auto", "tcp", "udp"]
        );
        assert!(parse(&strings(&["--scenarios", "nap"])).is_err());
    }

    fn outcome(code: Option<i32>, timed_out: bool, stdout: &str, stderr: &str) -> Outcome {
        Outcome {
            code,
            signal: None,
            timed_out,
            wall: 1.0,
            stdout: stdout.into(),
            stderr: stderr.into(),
            ranks_gone_after: None,
        }
    }

    #[test]
    fn runs_are_classified_by_their_result_and_their_end() {
        let o = opts(&["--apps", "stencil2d", "--scenarios", "time"]);
        let plan = draw(&o, 1, &|_, _| 2.0);
        let good = "stencil2d: checksum 42.5, 1.2 s\n";
        let class = |r: &Outcome| classify(&plan, r, "stencil2d: checksum 42.5").0;
        assert_eq!(class(&outcome(Some(0), false, good, "")), Class::Correct);
        assert_eq!(
            class(&outcome(Some(0), false, "stencil2d: checksum 41\n", "")),
            Class::Wrong
        );
        assert_eq!(class(&outcome(None, true, "", "")), Class::Hang);
        let why = "mpiexec: rank 1 failed during start-up: it failed during start-up";
        assert_eq!(class(&outcome(Some(1), false, "", why)), Class::CleanError);
        assert_eq!(
            class(&outcome(Some(1), false, "", "something else")),
            Class::Crash
        );
    }
}
