//! `mpistages-bench recovery`: the recovery models side by side. Builds the
//! proxy applications (examples/hydro3d.c, examples/md.c) with this
//! checkout's mpicc and runs app x ranks x mode x repetition, each failure
//! run with one SIGKILL injected right after a checkpoint, and reports:
//! - recovery time: from the kill until every rank is back in its main
//!   loop at the restored iteration, application data load excluded (the
//!   apps print when they are back and how long the load took; mpiexec
//!   prints the wall-clock time of the failure), with mpiexec's milestones;
//! - time to solution of the failure run, failure-free time with
//!   checkpointing (same mode, no kill) and without (the -DPLAIN build);
//! - the cost of checkpointing two ways: the failure-free run's own time
//!   (from its result line, without mpiexec's start and end) against the
//!   plain build's, and the share of its time a rank spent inside
//!   MPIX_Checkpoint_write (the proxies print it). The first is what the
//!   application sees but carries this machine's run-to-run noise (about
//!   +-10 %); the second has none of it, but leaves out work done outside
//!   the call (background removal of old epochs);
//! - the final energies, which must be identical in every run of one
//!   configuration (the run fails otherwise; ULFM's shrink to fewer ranks
//!   sums in another order: equal to 1e-12);
//! - per failure, the breakdown: mpiexec's milestones, the longest data
//!   load, the state bytes per rank (with `--state-mb`, the proxies'
//!   checked ballast on top of their own), the iterations done again.
//!
//! - the floor: one process coming back alone, measured as the recoveries
//!   are (`floor`), and each mode's recovery as a multiple of it.
//!
//! Modes: stages, reinit, cpr, restart (a new mpiexec --restart after the
//! job ended on the failure), and ULFM with the proxies' own driver
//! (`ulfm`: the dead rank respawned with MPI_Comm_spawn; `ulfm-shrink`:
//! md goes on with the survivors). Raw rows go to OUT/recovery.csv, the
//! charts to OUT/recovery-APP[-NMiB].svg.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod campaign;
pub mod chart;
mod interrupt;
mod plot;
mod soak;

use interrupt::Scratch;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const USAGE: &str = "\
usage: mpistages-bench recovery [options]
       mpistages-bench campaign [options]   (see mpistages-bench campaign --help)
       mpistages-bench soak [options]       (see mpistages-bench soak --help)
       mpistages-bench simulate [options]   (see mpistages-bench simulate --help)
       mpistages-bench plot [options] IN.csv OUT.svg (a log-log chart)

Runs the proxy applications under every recovery mode with one injected
SIGKILL per run and compares recovery time, time to solution and the cost
of checkpointing. Options (lists are comma-separated):
  --apps LIST        hydro3d,md (default both)
  --modes LIST       stages,reinit,cpr,restart,ulfm,ulfm-shrink (default
                     all; restart: the job ends on the failure and a new
                     mpiexec --restart starts it from its pfs checkpoints,
                     as a user's checkpoint/restart does; ulfm: the
                     proxies' driver respawns the dead rank; ulfm-shrink:
                     md goes on with the survivors)
  --ranks LIST       rank counts (default 1,2,4,8,16)
  --reps N           repetitions of each run (default 3)
  --iters N          iterations per run (default 60)
  --every K          checkpoint every K iterations (default 10)
  --size N           per-rank problem size (default: hydro3d 30 (30^3
                     elements), md 8 (8^3 FCC cells, 2048 atoms))
  --state-mb LIST    MiB of extra protected state per rank (the proxies'
                     -m: checked after every restore), each a configuration
                     of its own (default 0)
  --out DIR          where recovery.csv and the charts go (default results)
  --examples DIR     the proxies' sources (default: the checkout's examples/)
  --timeout SECS     limit per run (default 300)
  --summary-from CSV write only the summary of an earlier run's
                     recovery.csv (to --out)
";

struct App {
    name: &'static str,
    default_size: u32,
    /// The MPI call the kill is counted on, and its count at the start of
    /// iteration `it` (set-up calls included).
    call: &'static str,
    calls_before: fn(u64) -> u64,
    /// The line that carries the results that must not change.
    result_marker: &'static str,
}

const APPS: [App; 2] = [
    App {
        name: "hydro3d",
        default_size: 30,
        // One Waitall in the set-up (nodal masses), one per iteration.
        call: "MPI_Waitall",
        calls_before: |it| 1 + it,
        result_marker: "final origin energy",
    },
    App {
        name: "md",
        default_size: 8,
        // 12 Sendrecv in the initial halo, 24 per step (redistribution and
        // halo, counts and data, 6 directions).
        call: "MPI_Sendrecv",
        calls_before: |it| 12 + 24 * it,
        result_marker: "energy per atom",
    },
];

struct Opts {
    apps: Vec<&'static App>,
    modes: Vec<String>,
    ranks: Vec<usize>,
    reps: usize,
    iters: u64,
    every: u64,
    size: Option<u32>,
    state_mb: Vec<usize>,
    out: PathBuf,
    examples: PathBuf,
    timeout: Duration,
    /// Only write the summary of an earlier run's rows.
    summary_from: Option<PathBuf>,
}

/// The recovery modes the benchmark knows.
const MODES: [&str; 6] = ["stages", "reinit", "cpr", "restart", "ulfm", "ulfm-shrink"];

/// What a mode asks of mpiexec (and of the proxies' driver); `pfs` is the
/// directory of `restart`'s durable checkpoints.
fn mode_args(mode: &str, pfs: &Path) -> Vec<String> {
    let v: &[&str] = match mode {
        "ulfm" => &["--with-ft", "ulfm"],
        "ulfm-shrink" => &["--with-ft", "ulfm", "-x", "PROXY_ULFM=shrink"],
        "restart" => {
            return vec![
                "--recovery".into(),
                "none".into(),
                "--ckpt".into(),
                format!("mem,pfs:{}", pfs.display()),
            ]
        }
        m => return vec!["--recovery".into(), m.into()],
    };
    v.iter().map(|s| s.to_string()).collect()
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// The items of `all` that a comma-separated list names.
fn named<'a, T>(v: &str, all: &'a [T], name: fn(&T) -> &str) -> Result<Vec<&'a T>, String> {
    list(v)
        .iter()
        .map(|n| {
            all.iter().find(|x| name(x) == n).ok_or_else(|| {
                let known: Vec<&str> = all.iter().map(name).collect();
                format!("unknown name '{n}' ({})", known.join(", "))
            })
        })
        .collect()
}

/// A list of recovery modes, each one we know.
fn modes(v: &str) -> Result<Vec<String>, String> {
    let modes = list(v);
    match modes.iter().find(|m| !MODES.contains(&m.as_str())) {
        Some(m) => Err(format!("unknown mode '{m}' ({})", MODES.join(", "))),
        None => Ok(modes),
    }
}

fn number<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{name} needs a number, not '{v}'"))
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let bindir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let mut o = Opts {
        apps: APPS.iter().collect(),
        modes: MODES.iter().map(|m| m.to_string()).collect(),
        ranks: vec![1, 2, 4, 8, 16],
        reps: 3,
        iters: 60,
        every: 10,
        size: None,
        state_mb: vec![0],
        out: PathBuf::from("results"),
        examples: bindir.join("../../examples"),
        timeout: Duration::from_secs(300),
        summary_from: None,
    };
    match args.first().map(String::as_str) {
        Some("recovery") => {}
        Some("-h") | Some("--help") => return Err(String::new()),
        Some(other) => {
            return Err(format!(
                "unknown benchmark '{other}' (there are: recovery, campaign, soak)"
            ))
        }
        None => return Err("which benchmark? (there are: recovery, campaign, soak)".into()),
    }
    let mut i = 1;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "-h" || a == "--help" {
            return Err(String::new());
        }
        let v = args
            .get(i + 1)
            .ok_or_else(|| format!("option {a} needs a value"))?;
        match a {
            "--apps" => o.apps = named(v, &APPS, |a| a.name)?,
            "--modes" => o.modes = modes(v)?,
            "--ranks" => {
                o.ranks = list(v)
                    .iter()
                    .map(|n| number::<usize>("--ranks", n))
                    .collect::<Result<_, _>>()?;
                if o.ranks.contains(&0) {
                    return Err("--ranks: 0 ranks".into());
                }
            }
            "--reps" => o.reps = number("--reps", v)?,
            "--iters" => o.iters = number("--iters", v)?,
            "--every" => o.every = number("--every", v)?,
            "--size" => o.size = Some(number("--size", v)?),
            "--state-mb" => {
                o.state_mb = list(v)
                    .iter()
                    .map(|n| number::<usize>("--state-mb", n))
                    .collect::<Result<_, _>>()?
            }
            "--out" => o.out = PathBuf::from(v),
            "--examples" => o.examples = PathBuf::from(v),
            "--timeout" => o.timeout = Duration::from_secs_f64(number("--timeout", v)?),
            "--summary-from" => o.summary_from = Some(PathBuf::from(v)),
            _ => return Err(format!("unknown option '{a}'")),
        }
        i += 2;
    }
    if o.reps == 0 || o.every == 0 || o.iters < 2 * o.every {
        return Err("need --reps >= 1, --every >= 1 and --iters >= 2 * --every".into());
    }
    Ok(o)
}

fn build(o: &Opts, mpicc: &Path, dir: &Path, app: &App) -> Result<(PathBuf, PathBuf), String> {
    let src = o.examples.join(format!("{}.c", app.name));
    let mut out = Vec::new();
    for (suffix, flags) in [("", vec![]), ("_plain", vec!["-DPLAIN"])] {
        let exe = dir.join(format!("{}{suffix}", app.name));
        let st = Command::new(mpicc)
            .args(["-O2"])
            .args(&flags)
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .arg("-lm")
            .status()
            .map_err(|e| format!("running {}: {e}", mpicc.display()))?;
        if !st.success() {
            return Err(format!("building {} failed", src.display()));
        }
        out.push(exe);
    }
    Ok((out[0].clone(), out[1].clone()))
}

/// What one run printed and how long it took.
struct Run {
    wall: f64,
    /// The run's time as the application measured it (the last number of
    /// its result line): without mpiexec's start and end.
    app_s: f64,
    /// The largest share of a rank's time spent in MPIX_Checkpoint_write.
    in_ckpt: Option<f64>,
    result: String,
    recovery_ms: Option<f64>,
    /// mpiexec's milestones after the failure (ms): detected, propagated,
    /// replacement started, MPI state restored, all ranks resumed (under
    /// ULFM only the detection).
    milestones: Vec<f64>,
    /// From the ranks' back-at-iteration lines: the iteration they went on
    /// from, the longest data load (ms) and the state bytes per rank.
    back_iter: Option<u64>,
    load_ms: Option<f64>,
    state_bytes: Option<u64>,
}

/// Runs mpiexec with `args`; `files` is where the proxies' ULFM driver
/// keeps its checkpoint files. The job must succeed.
fn run(o: &Opts, app: &App, args: &[String], marker: &str, files: &Path) -> Result<Run, String> {
    let (ok, wall, out, err) = launch(o, args, marker, files)?;
    if !ok {
        return Err(format!("{marker}: mpiexec failed:\n{err}"));
    }
    parse_run(app, marker, wall, &out, &err)
}

/// Runs mpiexec with `args` to its end: (success, wall seconds, stdout,
/// stderr).
fn launch(
    o: &Opts,
    args: &[String],
    marker: &str,
    files: &Path,
) -> Result<(bool, f64, String, String), String> {
    let mpiexec = std::env::current_exe()
        .map_err(|e| e.to_string())?
        .with_file_name("mpiexec");
    let t0 = Instant::now();
    let mut child = interrupt::spawn_job(
        Command::new(&mpiexec)
            .args(args)
            .env("PROXY_ULFM_DIR", files)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .map_err(|e| format!("starting {}: {e}", mpiexec.display()))?;
    // Read both pipes on threads so a full pipe never stalls the job.
    let mut so = child.stdout.take().expect("piped");
    let mut se = child.stderr.take().expect("piped");
    let ro = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut so, &mut s);
        s
    });
    let re = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut se, &mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            break st;
        }
        if t0.elapsed() > o.timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{marker}: no end after {:?}; killed", o.timeout));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let wall = t0.elapsed().as_secs_f64();
    let (out, err) = (ro.join().unwrap_or_default(), re.join().unwrap_or_default());
    Ok((status.success(), wall, out, err))
}

/// The floor: one process coming back alone, measured as the recoveries
/// are — a one-rank job under `stages` killed at the same call, from the
/// kill until the rank is back in its loop, its data load left out: the
/// kernel's word of the death, a waiting spare taking the rank's place, its
/// checkpoint read; no other rank to tell or to wait for. A recovery of n
/// ranks costs this plus the coordination: its multiple of the floor says
/// how much that is. `inject` is the `--inject` spec of the recoveries.
fn floor(
    o: &Opts,
    app: &App,
    prog: &[String],
    files: &Path,
    inject: &str,
) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for _ in 0..o.reps {
        let mut a: Vec<String> = ["-n", "1", "--recovery", "stages", "--inject", inject]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(prog.iter().cloned());
        let r = run(o, app, &a, &format!("{} floor", app.name), files)?;
        out.push(
            r.recovery_ms.ok_or_else(|| {
                format!("{} floor: the run did not report its recovery", app.name)
            })?,
        );
    }
    Ok(out)
}

/// `restart`: the job ends on the failure (`args`), and a new mpiexec
/// starts it from the newest checkpoint on `pfs` every rank has, as a
/// user's checkpoint/restart does. The run is both jobs: its recovery from
/// the kill to every rank of the new job back in its loop.
#[allow(clippy::too_many_arguments)]
fn restart(
    o: &Opts,
    app: &App,
    args: &[String],
    what: &str,
    files: &Path,
    pfs: &Path,
    n: usize,
    prog: &[String],
) -> Result<Run, String> {
    let (ok, wall1, _, err1) = launch(o, args, what, files)?;
    if ok {
        return Err(format!(
            "{what}: the job did not end on the failure:\n{err1}"
        ));
    }
    let failed_at = err1
        .split("failure at unix time ")
        .nth(1)
        .and_then(|s| {
            s.split(|c: char| c.is_whitespace() || c == ')' || c == ';')
                .next()
        })
        .ok_or_else(|| format!("{what}: mpiexec did not say when the rank failed:\n{err1}"))?
        .to_string();
    let mut a = vec![
        "-n".to_string(),
        n.to_string(),
        "--restart".into(),
        pfs.display().to_string(),
    ];
    a.extend(mode_args("restart", pfs).into_iter().skip(2));
    a.extend(["--recovery".into(), "cpr".into()]);
    a.extend(prog.iter().cloned());
    let (ok, wall2, out, err2) = launch(o, &a, what, files)?;
    if !ok {
        return Err(format!("{what}: the restarted job failed:\n{err2}"));
    }
    // The failure's time, as the first job said it, for the parse.
    let err = format!("{err2}\nfailure at unix time {failed_at}\n");
    let mut r = parse_run(app, what, wall1 + wall2, &out, &err)?;
    r.milestones.clear();
    Ok(r)
}

/// What a successful run printed, read.
fn parse_run(app: &App, marker: &str, wall: f64, out: &str, err: &str) -> Result<Run, String> {
    let line = out
        .lines()
        .find(|l| l.contains(app.result_marker))
        .ok_or_else(|| format!("{marker}: no result line in the output:\n{out}\n{err}"))?;
    // "..., TIME s": the time is not part of the result.
    let (result, app_s) = line
        .rsplit_once(", ")
        .and_then(|(a, t)| Some((a.to_string(), t.strip_suffix(" s")?.parse::<f64>().ok()?)))
        .ok_or_else(|| format!("{marker}: no run time at the end of: {line}"))?;
    // "NAME: rank R: C ms of S s in MPIX_Checkpoint_write"
    let in_ckpt = err
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(": rank ")?;
            // (Under ULFM the proxies' driver checkpoints itself.)
            let rest = rest
                .strip_suffix(" s in MPIX_Checkpoint_write")
                .or_else(|| rest.strip_suffix(" s in checkpoints"))?;
            let (_, rest) = rest.split_once(": ")?;
            let (c, s) = rest.split_once(" ms of ")?;
            Some(c.parse::<f64>().ok()? / 1e3 / s.parse::<f64>().ok()?)
        })
        .reduce(f64::max);
    let failed_at = err
        .split("failure at unix time ")
        .nth(1)
        .and_then(|s| s.split(|c: char| c.is_whitespace() || c == ';').next())
        .and_then(|s| s.parse::<f64>().ok());
    let milestones = err
        .split("ms after the failure: ")
        .nth(1)
        .and_then(|s| s.split(';').next())
        .map(|s| {
            s.split(", ")
                .filter_map(|kv| kv.rsplit(' ').next()?.parse::<f64>().ok())
                .collect()
        })
        .or_else(|| {
            // ULFM: "...; detected D ms after the failure at unix time T"
            let d = err.split("(ULFM); detected ").nth(1)?;
            Some(vec![d.split(' ').next()?.parse::<f64>().ok()?])
        })
        .unwrap_or_default();
    let field = |l: &str, key: &str| -> Option<f64> {
        l.split(key)
            .nth(1)?
            .split([' ', ')', ','])
            .next()?
            .parse()
            .ok()
    };
    let back_lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(" back at iteration "))
        .collect();
    let back_iter = back_lines
        .iter()
        .filter_map(|l| field(l, "back at iteration "))
        .map(|x| x as u64)
        .min();
    let load_ms = back_lines
        .iter()
        .filter_map(|l| field(l, "data load "))
        .reduce(f64::max);
    let state_bytes = back_lines
        .iter()
        .filter_map(|l| field(l, " ms, "))
        .map(|x| x as u64)
        .max();
    // "NAME: rank R back at iteration I at unix time T (data load L ms)"
    let backs: Vec<f64> = err
        .lines()
        .filter(|l| l.contains(" back at iteration "))
        .filter_map(|l| {
            let t: f64 = l
                .split("unix time ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse()
                .ok()?;
            let load: f64 = l
                .split("data load ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse()
                .ok()?;
            Some(t - load / 1e3)
        })
        .collect();
    let recovery_ms = match (failed_at, backs.iter().cloned().reduce(f64::max)) {
        (Some(f), Some(b)) => Some((b - f) * 1e3),
        _ => None,
    };
    Ok(Run {
        wall,
        app_s,
        in_ckpt,
        result,
        recovery_ms,
        milestones,
        back_iter,
        load_ms,
        state_bytes,
    })
}

/// Peak memory of a run, as a multiple of the protected state per rank:
/// the state itself, up to three copies on the memory level and three
/// files on tmpfs while an epoch is written and the old ones go, measured
/// at 8 ranks x 256 MiB as 2 GiB per rank.
const PEAK_PER_STATE: usize = 8;

/// Whether `n` ranks with `mb` MiB of state each fit in the memory this
/// machine has available; says why not (a run that does not fit would
/// only measure the machine swapping or the kernel killing it).
fn fits_in_memory(app: &str, n: usize, mb: usize) -> bool {
    let available_mb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        })
        .map(|kb| kb / 1024);
    let need_mb = n * mb * PEAK_PER_STATE;
    match available_mb {
        Some(have) if need_mb > have * 9 / 10 => {
            eprintln!(
                "SKIPPED: {app} at {n} ranks with {mb} MiB each: needs about {} GiB at its peak, this machine has {} GiB available",
                need_mb / 1024,
                have / 1024
            );
            false
        }
        _ => true,
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn spread(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

struct Row {
    app: &'static str,
    mode: String,
    ranks: usize,
    state_mb: usize,
    rep: usize,
    recovery_ms: f64,
    tts: f64,
    ff: f64,
    overhead: f64,
    /// Percent of the failure-free run spent in MPIX_Checkpoint_write
    /// (the rank with the largest share).
    in_ckpt: f64,
    milestones: Vec<f64>,
    load_ms: f64,
    state_bytes: u64,
    /// Iterations done again: from the kill's back to where the ranks
    /// went on.
    reexecuted: u64,
    /// One process coming back alone (`floor`), ms.
    floor_ms: f64,
}

/// The `mpistages-bench` program (its `main`).
pub fn main() {
    interrupt::install();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("campaign") => campaign::main(&args[1..]),
        Some("soak") => soak::main(&args[1..]),
        Some("plot") => plot::main(&args[1..]),
        _ => recovery_main(&args),
    };
    interrupt::exit(code)
}

/// `mpistages-bench [options]`: the recovery benchmark.
fn recovery_main(args: &[String]) -> i32 {
    command("mpistages-bench", USAGE, parse(args), |o| {
        bench(o).map(|()| true)
    })
}

/// A command's exit status from its parsed options (an empty error asks
/// for the usage) and its run (false: it ran but found a failure).
fn command<O>(
    name: &str,
    usage: &str,
    parsed: Result<O, String>,
    run: impl FnOnce(&O) -> Result<bool, String>,
) -> i32 {
    let o = match parsed {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            print!("{usage}");
            return 0;
        }
        Err(e) => {
            eprintln!("{name}: {e}\n\n{usage}");
            return 2;
        }
    };
    match run(&o) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(e) => {
            interrupt::report(&format!("{name}: {e}"));
            1
        }
    }
}

fn bench(o: &Opts) -> Result<(), String> {
    if let Some(csv) = &o.summary_from {
        let text = std::fs::read_to_string(csv).map_err(|e| format!("{}: {e}", csv.display()))?;
        let rows = read_csv(&text).map_err(|e| format!("{}: {e}", csv.display()))?;
        let summary = summary(&rows);
        print!("{summary}");
        std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
        std::fs::write(o.out.join("summary.txt"), &summary).map_err(|e| e.to_string())?;
        return write_charts(&o.out, &rows);
    }
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let scratch =
        Scratch::new(std::env::temp_dir().join(format!("mpistages-bench-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let files = scratch.0.join("ulfm");
    std::fs::create_dir_all(&files).map_err(|e| e.to_string())?;
    // Every run of the plan, to show progress as k/N.
    let plan: Vec<(&App, usize, usize)> = o
        .apps
        .iter()
        .flat_map(|a| {
            o.ranks
                .iter()
                .flat_map(move |&n| o.state_mb.iter().map(move |&mb| (*a, n, mb)))
        })
        .filter(|&(a, n, mb)| fits_in_memory(a.name, n, mb))
        .collect();
    let modes_of = |app: &App, n: usize| -> Vec<String> {
        o.modes
            .iter()
            // hydro3d's driver respawns (it does not decompose its mesh
            // again over fewer ranks); under ULFM a job of one rank has no
            // survivor.
            .filter(|m| !(app.name == "hydro3d" && *m == "ulfm-shrink"))
            .filter(|m| !(n == 1 && m.starts_with("ulfm")))
            .cloned()
            .collect()
    };
    let total: usize = plan
        .iter()
        .map(|(a, n, _)| o.reps * (1 + 2 * modes_of(a, *n).len()))
        .sum();
    let mut done = 0;
    let mut rows = Vec::new();
    let mut plain_med: BTreeMap<(&str, usize, usize), f64> = BTreeMap::new();
    for app in &o.apps {
        let (exe, plain) = build(o, &me.with_file_name("mpicc"), &scratch.0, app)?;
        for &(_, n, mb) in plan.iter().filter(|(a, _, _)| a.name == app.name) {
            let size = o.size.unwrap_or(app.default_size).to_string();
            let prog_args = |exe: &Path| {
                vec![
                    exe.display().to_string(),
                    "-s".into(),
                    size.clone(),
                    "-i".into(),
                    o.iters.to_string(),
                    "-k".into(),
                    o.every.to_string(),
                    "-m".into(),
                    mb.to_string(),
                ]
            };
            let mut expected: Option<String> = None;
            let mut check = |r: &Run, what: &str| -> Result<(), String> {
                match &expected {
                    None => expected = Some(r.result.clone()),
                    // Fewer ranks sum in another order: equal to 1e-12.
                    Some(e) if what.starts_with("ulfm-shrink with") && same_numbers(e, &r.result) => {}
                    Some(e) if *e != r.result => {
                        return Err(format!(
                            "{} at {n} ranks: the results of {what} differ from the first run's:\n  {e}\n  {}",
                            app.name, r.result
                        ))
                    }
                    _ => {}
                }
                Ok(())
            };
            let mut progress = |what: &str, r: &Run| {
                done += 1;
                let rec = r
                    .recovery_ms
                    .map_or(String::new(), |ms| format!(", recovery {ms:.1} ms"));
                eprintln!(
                    "[{done}/{total}] {} {n} ranks {mb} MiB {what}: {:.2} s{rec}",
                    app.name, r.wall
                );
            };
            // The kill: right after the checkpoint in the middle of the run.
            let kill_it = (o.iters / 2) / o.every * o.every;
            let victim = n / 2;
            let kill_at = |rank: usize| {
                format!(
                    "rank={rank},call={}:{}",
                    app.call,
                    (app.calls_before)(kill_it) + 1
                )
            };
            let mut plains = Vec::new();
            let floor_ms = median(&floor(o, app, &prog_args(&exe), &files, &kill_at(0))?);
            eprintln!(
                "    {} {n} ranks {mb} MiB: the floor, one rank alone recovering from the same kill (stages, 1 rank): {floor_ms:.1} ms",
                app.name
            );
            // Each repetition runs the plain build next to the modes' runs,
            // so that a slow phase of this shared machine hits both sides
            // of the overhead alike.
            for rep in 1..=o.reps {
                let mut a = vec!["-n".to_string(), n.to_string()];
                a.extend(prog_args(&plain));
                let r = run(o, app, &a, &format!("{} plain", app.name), &files)?;
                check(&r, "the plain build")?;
                progress(&format!("plain build, rep {rep}"), &r);
                let plain_s = r.wall;
                let plain_app_s = r.app_s;
                plains.push(plain_s);
                // Each repetition starts with another mode: the first run
                // after the plain build touches memory the machine has not
                // used lately, which costs more on a virtual machine that
                // hands freed memory back to its host.
                let mut order = modes_of(app, n);
                let first = (rep - 1) % order.len().max(1);
                order.rotate_left(first);
                for mode in &order {
                    // `restart`'s durable checkpoints: a directory per run.
                    let pfs = scratch.0.join(format!("pfs-{n}-{mb}-{rep}-{mode}"));
                    let mut a = vec!["-n".to_string(), n.to_string()];
                    a.extend(mode_args(mode, &pfs));
                    a.extend(prog_args(&exe));
                    let ff = run(
                        o,
                        app,
                        &a,
                        &format!("{} {mode} failure-free", app.name),
                        &files,
                    )?;
                    check(&ff, &format!("{mode} without failure"))?;
                    progress(&format!("{mode} failure-free, rep {rep}"), &ff);
                    let _ = std::fs::remove_dir_all(&pfs);
                    let mut a = vec!["-n".to_string(), n.to_string()];
                    a.extend(mode_args(mode, &pfs));
                    a.extend(["--inject".into(), kill_at(victim)]);
                    a.extend(prog_args(&exe));
                    let what = format!("{} {mode} with a failure", app.name);
                    let hurt = if mode == "restart" {
                        restart(o, app, &a, &what, &files, &pfs, n, &prog_args(&exe))?
                    } else {
                        run(o, app, &a, &what, &files)?
                    };
                    let _ = std::fs::remove_dir_all(&pfs);
                    check(&hurt, &format!("{mode} with a failure"))?;
                    progress(&format!("{mode} with a failure, rep {rep}"), &hurt);
                    let recovery_ms = hurt.recovery_ms.ok_or_else(|| {
                        format!(
                            "{} {mode} at {n} ranks: the run did not report its recovery",
                            app.name
                        )
                    })?;
                    rows.push(Row {
                        app: app.name,
                        mode: mode.clone(),
                        ranks: n,
                        state_mb: mb,
                        rep,
                        recovery_ms,
                        tts: hurt.wall,
                        ff: ff.wall,
                        overhead: (ff.app_s - plain_app_s) / plain_app_s * 100.0,
                        in_ckpt: ff.in_ckpt.map_or(f64::NAN, |s| s * 100.0),
                        milestones: hurt.milestones,
                        load_ms: hurt.load_ms.unwrap_or(f64::NAN),
                        state_bytes: hurt.state_bytes.unwrap_or(0),
                        reexecuted: kill_it.saturating_sub(hurt.back_iter.unwrap_or(kill_it)),
                        floor_ms,
                    });
                }
            }
            plain_med.insert((app.name, n, mb), median(&plains));
            if let Some(e) = &expected {
                eprintln!("    every run agrees: {e}");
            }
        }
    }
    let csv = write_csv(o, &rows)?;
    let table = table(&rows, &plain_med);
    print!("{table}");
    std::fs::write(o.out.join("recovery.txt"), &table).map_err(|e| e.to_string())?;
    // From the rows as written, so that --summary-from gives the same.
    let summary = summary(&read_csv(&csv)?);
    print!("{summary}");
    std::fs::write(o.out.join("summary.txt"), &summary).map_err(|e| e.to_string())?;
    write_charts(&o.out, &read_csv(&csv)?)?;
    println!("rows: {}", o.out.join("recovery.csv").display());
    Ok(())
}

/// A chart per app and state size (the state size in its name when the
/// rows have several): recovery against ranks, a line per mode, in the
/// modes' order of first appearance.
fn write_charts(out: &Path, rows: &[Row]) -> Result<(), String> {
    let mut apps: Vec<&str> = Vec::new();
    for r in rows {
        if !apps.contains(&r.app) {
            apps.push(r.app);
        }
    }
    let sizes: std::collections::BTreeSet<usize> = rows.iter().map(|r| r.state_mb).collect();
    for app in apps {
        for &mb in &sizes {
            let these: Vec<&Row> = rows
                .iter()
                .filter(|r| r.app == app && r.state_mb == mb)
                .collect();
            let mut modes: Vec<&str> = Vec::new();
            for r in &these {
                if !modes.contains(&r.mode.as_str()) {
                    modes.push(&r.mode);
                }
            }
            if modes.is_empty() {
                continue;
            }
            let series: Vec<chart::Series> = modes
                .iter()
                .map(|m| {
                    let mut by_ranks: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
                    for r in these.iter().filter(|r| r.mode == *m) {
                        by_ranks.entry(r.ranks).or_default().push(r.recovery_ms);
                    }
                    chart::Series {
                        mode: m.to_string(),
                        points: by_ranks
                            .iter()
                            .map(|(&n, v)| {
                                let (lo, hi) = spread(v);
                                (n, median(v), lo, hi)
                            })
                            .collect(),
                    }
                })
                .collect();
            let name = if sizes.len() > 1 {
                format!("recovery-{app}-{mb}MiB")
            } else {
                format!("recovery-{app}")
            };
            let title = format!("{app} ({mb} MiB extra state per rank)");
            let base = out.join(name);
            std::fs::write(base.with_extension("svg"), chart::svg(&title, &series)?)
                .map_err(|e| e.to_string())?;
            println!("chart: {}.svg", base.display());
        }
    }
    Ok(())
}

/// The findings in a few lines per configuration: stages against the
/// other models (the recovery; and the whole cost of one failure: the
/// recovery with the data load), and against the floor.
fn summary(rows: &[Row]) -> String {
    let mut groups: BTreeMap<(&str, usize, usize), BTreeMap<&str, Vec<&Row>>> = BTreeMap::new();
    for r in rows {
        groups
            .entry((r.app, r.ranks, r.state_mb))
            .or_default()
            .entry(r.mode.as_str())
            .or_default()
            .push(r);
    }
    let mut t = String::from("\nsummary (medians):\n");
    for ((app, n, mb), modes) in &groups {
        let Some(st) = modes.get("stages") else {
            continue;
        };
        let rec = |rs: &[&Row]| median(&rs.iter().map(|r| r.recovery_ms).collect::<Vec<_>>());
        // The failure's whole cost, the iterations done again left out:
        // from the kill until every rank is back in its loop with its data
        // (the recovery and the longest data load). Measured directly: the
        // time to solution less the failure-free run's would carry the
        // failure-free run's own spread (seconds with 256 MiB per rank).
        let cost = |rs: &[&Row]| {
            median(
                &rs.iter()
                    .map(|r| r.recovery_ms + if r.load_ms.is_nan() { 0.0 } else { r.load_ms })
                    .collect::<Vec<_>>(),
            )
        };
        let s = rec(st);
        let mut line = format!(
            "{app} {n} ranks {mb} MiB: stages recovers in {s:.1} ms ({:.2}x one rank alone recovering from the same kill, {:.1} ms)",
            s / st[0].floor_ms,
            st[0].floor_ms
        );
        for (m, rs) in modes.iter().filter(|(m, _)| **m != "stages") {
            line += &format!("; {:.2} of {m}'s", s / rec(rs));
        }
        if let Some(rs) = modes.get("restart") {
            line += &format!(
                "; whole cost of the failure {:.0} ms, {:.2} of restart's {:.0} ms",
                cost(st),
                cost(st) / cost(rs),
                cost(rs)
            );
        }
        t += &line;
        t += "\n";
    }
    t
}

/// Whether two result lines say the same to 1e-12 (each number) and name
/// the same atoms: a run that went on with fewer ranks sums in another
/// order.
fn same_numbers(a: &str, b: &str) -> bool {
    let words = |s: &str| -> Vec<String> {
        s.split([' ', '(', ')', ',', ';'])
            .filter(|w| !w.is_empty())
            .map(String::from)
            .collect()
    };
    let (wa, wb) = (words(a), words(b));
    // The rank count and decomposition are the shrink's own.
    let skip = |w: &[String], i: usize| i > 0 && (w[i - 1] == "md:" || w[i].contains('x'));
    wa.len() == wb.len()
        && wa.iter().zip(&wb).enumerate().all(|(i, (x, y))| {
            if skip(&wa, i) {
                return true;
            }
            match (x.parse::<f64>(), y.parse::<f64>()) {
                (Ok(p), Ok(q)) if x.contains('e') => (p - q).abs() <= 1e-12 * p.abs(),
                _ => x == y,
            }
        })
}

/// One row per failure run: the recovery, its breakdown (mpiexec's
/// milestones after the failure, the longest data load, the state per
/// rank, the iterations done again) and the runs' times.
fn write_csv(o: &Opts, rows: &[Row]) -> Result<String, String> {
    let mut csv = String::from(
        "app,mode,ranks,state_mb,rep,recovery_ms,detected_ms,propagated_ms,started_ms,mpi_restored_ms,resumed_ms,data_load_ms,state_bytes,reexecuted_iters,floor_ms,time_to_solution_s,failure_free_s,ckpt_overhead_pct\n",
    );
    for r in rows {
        let m = |k: usize| {
            r.milestones
                .get(k)
                .map_or(String::new(), |v| format!("{v:.3}"))
        };
        csv += &format!(
            "{},{},{},{},{},{:.3},{},{},{},{},{},{:.3},{},{},{:.3},{:.4},{:.4},{:.2}\n",
            r.app,
            r.mode,
            r.ranks,
            r.state_mb,
            r.rep,
            r.recovery_ms,
            m(0),
            m(1),
            m(2),
            m(3),
            m(4),
            r.load_ms,
            r.state_bytes,
            r.reexecuted,
            r.floor_ms,
            r.tts,
            r.ff,
            r.overhead
        );
    }
    std::fs::write(o.out.join("recovery.csv"), &csv).map_err(|e| e.to_string())?;
    Ok(csv)
}

/// The rows `write_csv` wrote (what the summary needs of them; the
/// checkpoint shares are not in the file).
fn read_csv(text: &str) -> Result<Vec<Row>, String> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    if !header.starts_with("app,mode,ranks,state_mb,rep,recovery_ms,") {
        return Err("not a recovery.csv of mpistages-bench".into());
    }
    let mut rows = Vec::new();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        let bad = |what: &str| format!("line {}: {what}: {line}", i + 2);
        if f.len() != 18 {
            return Err(bad("not 18 fields"));
        }
        let num = |k: usize| f[k].parse::<f64>().map_err(|_| bad("not a number"));
        let int = |k: usize| f[k].parse::<u64>().map_err(|_| bad("not a count"));
        let app = APPS
            .iter()
            .find(|a| a.name == f[0])
            .ok_or_else(|| bad("unknown app"))?;
        rows.push(Row {
            app: app.name,
            mode: f[1].to_string(),
            ranks: int(2)? as usize,
            state_mb: int(3)? as usize,
            rep: int(4)? as usize,
            recovery_ms: num(5)?,
            milestones: f[6..11].iter().map_while(|v| v.parse().ok()).collect(),
            load_ms: num(11)?,
            state_bytes: int(12)?,
            reexecuted: int(13)?,
            floor_ms: num(14)?,
            tts: num(15)?,
            ff: num(16)?,
            overhead: num(17)?,
            in_ckpt: f64::NAN,
        });
    }
    Ok(rows)
}

/// A checkpointing overhead as the table shows it: below 0 is the
/// machine's noise, not a gain ("~0*", the table's header says so).
fn overhead_cell(pct: f64) -> String {
    if pct < 0.0 {
        "~0*".into()
    } else {
        format!("{pct:.1}")
    }
}

fn table(rows: &[Row], plain: &BTreeMap<(&str, usize, usize), f64>) -> String {
    let mut groups: BTreeMap<(&str, usize, usize), BTreeMap<String, Vec<&Row>>> = BTreeMap::new();
    for r in rows {
        groups
            .entry((r.app, r.ranks, r.state_mb))
            .or_default()
            .entry(r.mode.clone())
            .or_default()
            .push(r);
    }
    let header = [
        "One SIGKILLed rank per run, in the middle of the run, right after a checkpoint. Columns:",
        "recovery ms    kill -> every rank back in its main loop (its data load excluded): median [fastest-slowest]",
        "milestones ms  what mpiexec saw, ms after the kill (medians): failure detected / survivors told /",
        "               replacement started / MPI state restored / every rank resumed",
        "with kill s    the run's time to solution with the kill",
        "no kill s      the same run without a kill (with its checkpoints)",
        "no ckpt s      the program built without checkpoints or recovery, for comparison",
        "ckpt %         what checkpointing adds to a run without a kill: its own time against the build",
        "               without checkpoints, run beside it (median of the pairs; ~0* where it measured",
        "               below 0: less than this machine's run-to-run noise)",
        "in ckpt %      the share of its time a rank spent in MPIX_Checkpoint_write (the largest rank's)",
    ];
    let mut t = format!("\n{}\n\n", header.join("\n"));
    t += &format!(
        "{:<8} {:>5} {:>4} {:<11} {:>24} {:>32} {:>11} {:>9} {:>9} {:>8} {:>10}\n",
        "app",
        "ranks",
        "MiB",
        "mode",
        "recovery ms",
        "milestones ms",
        "with kill s",
        "no kill s",
        "no ckpt s",
        "ckpt %",
        "in ckpt %"
    );
    for ((app, n, mb), modes) in &groups {
        for (mode, rs) in modes {
            let rec: Vec<f64> = rs.iter().map(|r| r.recovery_ms).collect();
            let (lo, hi) = spread(&rec);
            let ms: Vec<String> = (0..5)
                .map(|k| {
                    let v: Vec<f64> = rs
                        .iter()
                        .filter_map(|r| r.milestones.get(k).copied())
                        .collect();
                    if v.is_empty() {
                        "-".into()
                    } else {
                        format!("{:.1}", median(&v))
                    }
                })
                .collect();
            let med = |f: fn(&Row) -> f64| median(&rs.iter().map(|r| f(r)).collect::<Vec<_>>());
            t += &format!(
                "{:<8} {:>5} {:>4} {:<11} {:>24} {:>32} {:>11.3} {:>9.3} {:>9.3} {:>8} {:>10.2}\n",
                app,
                n,
                mb,
                mode,
                format!("{:.1} [{lo:.1}-{hi:.1}]", median(&rec)),
                ms.join(" / "),
                med(|r| r.tts),
                med(|r| r.ff),
                plain.get(&(*app, *n, *mb)).copied().unwrap_or(f64::NAN),
                overhead_cell(med(|r| r.overhead)),
                med(|r| r.in_ckpt),
            );
        }
        if let (Some(s), true) = (modes.get("stages"), modes.len() > 1) {
            let st = median(&s.iter().map(|r| r.recovery_ms).collect::<Vec<_>>());
            for (m, rs) in modes.iter().filter(|(m, _)| *m != "stages") {
                let other = median(&rs.iter().map(|r| r.recovery_ms).collect::<Vec<_>>());
                t += &format!("    stages recovers in {:.2} of {m}'s time\n", st / other);
            }
        }
        // Each mode's recovery against one process coming back alone.
        if let Some(floor) = modes.values().flatten().map(|r| r.floor_ms).next() {
            let times: Vec<String> = modes
                .iter()
                .map(|(m, rs)| {
                    let rec = median(&rs.iter().map(|r| r.recovery_ms).collect::<Vec<_>>());
                    format!("{m} {:.2}", rec / floor)
                })
                .collect();
            t += &format!(
                "    recovery as a multiple of one rank alone recovering from the same kill ({floor:.1} ms): {}\n",
                times.join(", ")
            );
        }
    }
    t
}
