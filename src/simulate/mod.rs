//! `mpistages-bench simulate`: one recovery's control plane at scales this
//! machine cannot run (65,536 ranks on 1,024 hosts), flat as the runtime
//! is today and through a tree of agents, per mode (see `model`). The
//! costs of messages, process starts and detection are measured here at
//! start (`calibrate`); a rank's own steps come from mpiexec's milestones
//! at 64 ranks on this machine.

mod calibrate;
pub mod model;

use model::{Costs, Mode, Outcome, Setup, Sim};
use std::io::Write;
use std::path::PathBuf;

const USAGE: &str = "\
usage: mpistages-bench simulate [options]

Simulates the control plane of one recovery (a rank killed, every rank
resumed) with mpiexec's recovery state machine and the agents' fan-in:
flat (every rank talks to mpiexec, as on one host) and through a tree of
agents, under stages, reinit, cpr and ULFM's shrink. Prints a table;
with --out, writes it as CSV and charts (SVG) of time and of the busiest
node's messages against ranks. Options:
  --ranks N          ranks (default 65536)
  --hosts N          hosts (default: ranks / 64)
  --cores N          cores per host (default: ranks per host)
  --radix N          agents per tree node (default 32)
  --modes LIST       stages,reinit,cpr,ulfm (default all)
  --sweep            also every power of 4 from 64 ranks to --ranks, 64
                     ranks per host, for the charts
  --out DIR          write simulate-STAMP.csv and .svg charts there
  --control WHICH    flat, tree or both (default both)
  --kinds            also mpiexec's messages by kind, as its recovery line
                     says them
  --no-calibrate     use the built-in message costs instead of measuring
";

struct Options {
    ranks: usize,
    hosts: Option<usize>,
    cores: Option<usize>,
    radix: usize,
    modes: Vec<Mode>,
    sweep: bool,
    out: Option<PathBuf>,
    calibrate: bool,
    /// Radices to simulate (0: flat).
    radices: Vec<usize>,
    kinds: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        ranks: 65_536,
        hosts: None,
        cores: None,
        radix: 32,
        modes: vec![Mode::Stages, Mode::Reinit, Mode::Cpr, Mode::Ulfm],
        sweep: false,
        out: None,
        calibrate: true,
        radices: vec![0, 32],
        kinds: false,
    };
    let mut control = "both".to_string();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let value = || {
            args.get(i + 1)
                .cloned()
                .ok_or_else(|| format!("{a} needs a value"))
        };
        let number = || -> Result<usize, String> {
            value()?
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{a} needs a positive number"))
        };
        match a {
            "--ranks" => o.ranks = number()?,
            "--hosts" => o.hosts = Some(number()?),
            "--cores" => o.cores = Some(number()?),
            "--radix" => o.radix = number()?,
            "--modes" => {
                o.modes = value()?
                    .split(',')
                    .map(|m| match m {
                        "stages" => Ok(Mode::Stages),
                        "reinit" => Ok(Mode::Reinit),
                        "cpr" => Ok(Mode::Cpr),
                        "ulfm" | "ulfm-shrink" => Ok(Mode::Ulfm),
                        x => Err(format!("unknown mode '{x}' (stages, reinit, cpr, ulfm)")),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--out" => o.out = Some(PathBuf::from(value()?)),
            "--control" => control = value()?,
            "--sweep" | "--no-calibrate" | "--kinds" => {
                match a {
                    "--sweep" => o.sweep = true,
                    "--kinds" => o.kinds = true,
                    _ => o.calibrate = false,
                }
                i += 1;
                continue;
            }
            "-h" | "--help" => return Err(String::new()),
            x => return Err(format!("unknown option '{x}'")),
        }
        i += 2;
    }
    o.radices = match control.as_str() {
        "flat" => vec![0],
        "tree" => vec![o.radix],
        "both" => vec![0, o.radix],
        x => return Err(format!("--control {x}: flat, tree or both")),
    };
    if o.hosts.is_some_and(|h| h > o.ranks) {
        return Err("--hosts cannot exceed --ranks".into());
    }
    Ok(o)
}

/// Costs not measured at start: a rank's own steps, from mpiexec's
/// milestones for 64 ranks on this machine (bench/results/
/// scale-20261129-015958-recovery.csv, stages, medians): the survivors all
/// halted 2.1 ms after detection on 2 cores (65 µs per rank and core),
/// the replacement restored 2.5 ms after its start, every rank resumed
/// 0.8 ms after that (25 µs per rank and core).
pub fn rank_costs() -> Costs {
    Costs {
        local_us: 15.0,
        net_us: 25.0,
        recv_us: 2.0,
        send_us: 2.0,
        detect_us: 100.0,
        spawn_us: 1000.0,
        halt_us: 65.0,
        rollback_us: 20.0,
        init_us: 2000.0,
        restore_us: 300.0,
        resume_us: 30.0,
        load_us: 100.0,
        per_address_us: 0.05,
        // The agents' own (`relay::WINDOW`).
        window_us: crate::relay::WINDOW.as_micros() as f64,
    }
}

struct Row {
    setup: Setup,
    out: Outcome,
}

fn simulate(setup: Setup, costs: Costs) -> Row {
    // A rank in the middle of the last host (the deepest in the tree).
    let victim = setup.ranks - setup.ranks.div_ceil(setup.hosts) / 2 - 1;
    Row {
        setup,
        out: Sim::new(setup, costs).run(victim),
    }
}

fn topology(s: &Setup) -> String {
    if s.radix == 0 {
        "flat".into()
    } else {
        format!("tree/{}", s.radix)
    }
}

/// A row's columns: its name, its value as printed and as written.
fn columns(r: &Row) -> [(&'static str, String, String); 10] {
    let o = &r.out;
    let kb = |b: u64| format!("{:.1}", b as f64 / 1024.0);
    [
        (
            "ranks",
            r.setup.ranks.to_string(),
            r.setup.ranks.to_string(),
        ),
        (
            "hosts",
            r.setup.hosts.to_string(),
            r.setup.hosts.to_string(),
        ),
        ("control", topology(&r.setup), topology(&r.setup)),
        (
            "mode",
            r.setup.mode.name().into(),
            r.setup.mode.name().into(),
        ),
        (
            "detect_to_resumed_ms",
            format!("{:.2}", o.detect_to_resumed_ms),
            format!("{:.3}", o.detect_to_resumed_ms),
        ),
        (
            "mpiexec_msgs",
            o.root_msgs.to_string(),
            o.root_msgs.to_string(),
        ),
        ("mpiexec_bytes", kb(o.root_bytes), o.root_bytes.to_string()),
        (
            "busiest_agent_msgs",
            o.agent_msgs.to_string(),
            o.agent_msgs.to_string(),
        ),
        (
            "busiest_agent_bytes",
            kb(o.agent_bytes),
            o.agent_bytes.to_string(),
        ),
        (
            "complete",
            if o.complete { "" } else { "(did not complete)" }.into(),
            o.complete.to_string(),
        ),
    ]
}

fn print_table(rows: &[Row]) {
    const HEAD: [&str; 10] = [
        "ranks",
        "hosts",
        "control",
        "mode",
        "detect→all ms",
        "mpiexec msgs",
        "mpiexec KB",
        "busiest agent",
        "agent KB",
        "",
    ];
    const WIDTH: [usize; 10] = [7, 6, 8, 12, 14, 14, 12, 14, 12, 0];
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(WIDTH)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        println!("{}", padded.join(" ").trim_end());
    };
    line(HEAD.iter().map(|h| h.to_string()).collect());
    for r in rows {
        line(columns(r).into_iter().map(|c| c.1).collect());
    }
}

fn write_results(dir: &std::path::Path, rows: &[Row], costs: &Costs) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let stamp = stamp();
    let csv = dir.join(format!("simulate-{stamp}.csv"));
    let mut f = std::fs::File::create(&csv).map_err(|e| format!("{}: {e}", csv.display()))?;
    let mut text = format!("# costs (us): {costs:?}\n");
    if let Some(first) = rows.first() {
        let names: Vec<&str> = columns(first).iter().map(|c| c.0).collect();
        text.push_str(&(names.join(",") + "\n"));
    }
    for r in rows {
        let values: Vec<String> = columns(r).into_iter().map(|c| c.2).collect();
        text.push_str(&(values.join(",") + "\n"));
    }
    f.write_all(text.as_bytes())
        .map_err(|e| format!("{}: {e}", csv.display()))?;
    let series = |value: &dyn Fn(&Outcome) -> f64| {
        let mut out: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for r in rows {
            let name = format!("{} {}", r.setup.mode.name(), topology(&r.setup));
            let p = (r.setup.ranks as f64, value(&r.out).max(1e-3));
            match out.iter_mut().find(|s| s.0 == name) {
                Some(s) => s.1.push(p),
                None => out.push((name, vec![p])),
            }
        }
        out.retain(|s| s.1.len() > 1);
        // Modes whose control planes are the same (stages and reinit
        // differ only in what a rank does after the resume) share a line
        // that says so, instead of one hiding the other.
        let mut merged: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for (name, pts) in out {
            match merged.iter_mut().find(|m| m.1 == pts) {
                Some(m) => {
                    let (mode, control) = name.split_once(' ').unwrap_or((&name, ""));
                    m.0 =
                        m.0.replacen(&format!(" {control}"), &format!(" = {mode} {control}"), 1);
                }
                None => merged.push((name, pts)),
            }
        }
        merged
    };
    let charts = [
        (
            "time",
            "A recovery's control plane: detection to every rank resumed",
            "ms",
            series(&|o| o.detect_to_resumed_ms),
        ),
        (
            "busiest",
            "Messages at the busiest node (mpiexec or an agent)",
            "messages in and out",
            series(&|o| o.root_msgs.max(o.agent_msgs) as f64),
        ),
    ];
    for (name, title, y, s) in charts {
        if s.is_empty() {
            continue;
        }
        let svg = mpistages_bench::chart::log_lines(title, "ranks (64 per host)", y, &s)?;
        let path = dir.join(format!("simulate-{stamp}-{name}.svg"));
        std::fs::write(&path, svg).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    println!("wrote {}", csv.display());
    Ok(())
}

/// `YYYYMMDD-HHMMSS`, UTC, for file names.
fn stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, s) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

pub fn main(args: &[String]) -> i32 {
    mpistages_sys::process::die_on_closed_pipe();
    let o = match parse(args) {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            print!("{USAGE}");
            return 0;
        }
        Err(e) => {
            crate::say!("mpistages-bench simulate: {e}\nsee mpistages-bench simulate --help");
            return 2;
        }
    };
    let mut costs = rank_costs();
    if o.calibrate {
        match calibrate::measure(&mut costs) {
            Ok(said) => println!("measured here: {said}"),
            Err(e) => println!("could not measure here ({e}): built-in costs"),
        }
    }
    let hosts = o.hosts.unwrap_or(o.ranks.div_ceil(64));
    let mut rows = Vec::new();
    let mut scales = vec![(o.ranks, hosts)];
    if o.sweep {
        scales = std::iter::successors(Some(64usize), |n| Some(n * 4))
            .take_while(|&n| n <= o.ranks)
            .map(|n| (n, n.div_ceil(64)))
            .collect();
        if scales.last().map(|s| s.0) != Some(o.ranks) {
            scales.push((o.ranks, hosts));
        }
    }
    for (ranks, hosts) in scales {
        for &mode in &o.modes {
            for &radix in &o.radices {
                let setup = Setup {
                    ranks,
                    hosts,
                    cores_per_host: o.cores.unwrap_or(ranks.div_ceil(hosts)),
                    radix,
                    mode,
                };
                rows.push(simulate(setup, costs));
            }
        }
    }
    print_table(&rows);
    if o.kinds {
        for r in &rows {
            println!(
                "{} ranks, {} {}: mpiexec's messages, {}",
                r.setup.ranks,
                topology(&r.setup),
                r.setup.mode.name(),
                r.out.root_kinds
            );
        }
    }
    if let Some(dir) = &o.out {
        if let Err(e) = write_results(dir, &rows, &costs) {
            crate::say!("mpistages-bench simulate: {e}");
            return 1;
        }
    }
    0
}
