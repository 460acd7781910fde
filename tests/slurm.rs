//! Under a real Slurm (tests/common/slurm.rs starts munged, slurmctld and
//! slurmd here): jobs started directly by `srun --mpi=pmi2`, and mpiexec
//! inside an allocation, where it takes Slurm's hosts and starts its
//! agents with srun, recovering from a killed rank and from a lost node.

mod common;
use common::netns::Hosts;
use common::slurm::Slurm;
use common::{build, build_example, run_bounded, Run};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(120);

macro_rules! or_skip {
    ($e:expr, $name:expr) => {
        match $e {
            Ok(v) => v,
            Err(why) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI must run {}: {why}",
                    $name
                );
                common::skipped(&why);
                return;
            }
        }
    };
}

fn run(s: &Slurm, program: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = s.command(program);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    run_bounded(c, &format!("{program} {args:?}"), LIMIT)
}

fn checksum(out: &str) -> Option<String> {
    out.lines()
        .find(|l| l.contains("checksum"))
        .map(str::to_string)
}

/// PIDs of processes running `exe` in this cluster's jobs (their
/// environment names its configuration).
fn processes_of(s: &Slurm, exe: &std::path::Path) -> Vec<i32> {
    let conf = format!("SLURM_CONF={}", s.conf.display());
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let runs_it = std::fs::read_link(e.path().join("exe")).is_ok_and(|p| p == exe);
        let ours = std::fs::read(e.path().join("environ"))
            .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == conf.as_bytes()));
        if runs_it && ours {
            pids.push(pid);
        }
    }
    pids
}

/// Waits until `n` processes run `exe` in this cluster's jobs.
fn wait_for_ranks(s: &Slurm, exe: &std::path::Path, n: usize) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let p = processes_of(s, exe);
        if p.len() >= n {
            return p;
        }
        assert!(Instant::now() < deadline, "the ranks never started: {p:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `srun --mpi=pmi2 -n 4 ./app` is a job of 4 ranks that talk (an
/// allreduce checks it); the same without PMI-2, or asking for a recovery
/// mode that nothing could carry out, is refused with a message that says
/// what to do.
#[test]
fn srun_starts_a_job_directly_through_pmi2() {
    let s = or_skip!(
        Slurm::start(None, 8),
        "srun_starts_a_job_directly_through_pmi2"
    );
    let exe = build("whoami.c");
    let exe = exe.to_str().unwrap();
    let r = run(
        &s,
        "srun",
        &["--mpi=pmi2", "-n", "4", exe, "X", "SLURM_PROCID"],
        &[],
    );
    assert!(r.ok(), "{}\n{}\n{}", r.stdout, r.stderr, s.logs());
    for rank in 0..4 {
        let want = format!("rank {rank} of 4: X cwd=");
        let line = r.stdout.lines().find(|l| l.starts_with(&want));
        let line = line.unwrap_or_else(|| panic!("rank {rank}: {}\n{}", r.stdout, r.stderr));
        // Slurm's task number is the MPI rank.
        assert!(line.contains(&format!("var={rank} ")), "{line}");
    }

    let r = run(&s, "srun", &["-n", "2", exe, "X", "-"], &[]);
    assert!(!r.ok(), "{}", r.stdout);
    assert!(r.stderr.contains("srun --mpi=pmi2"), "{}", r.stderr);
    assert!(
        !r.stdout.contains("rank 0 of 1"),
        "ran as singletons: {}",
        r.stdout
    );

    let r = run(
        &s,
        "srun",
        &["--mpi=pmi2", "-n", "2", exe, "X", "-"],
        &[("MPISTAGES_RECOVERY", "stages")],
    );
    assert!(!r.ok(), "{}", r.stdout);
    assert!(r.stderr.contains("cannot recover"), "{}", r.stderr);
}

/// A rank of a job started by srun is SIGKILLed: nothing can replace it,
/// so the job ends (as in any MPI) — the survivors see the lost
/// connection, end the job through PMI-2, and none is left hanging.
#[test]
fn a_direct_srun_job_ends_when_a_rank_dies() {
    let s = or_skip!(
        Slurm::start(None, 8),
        "a_direct_srun_job_ends_when_a_rank_dies"
    );
    let exe = build_example("stencil2d.c");
    let mut c = s.command("srun");
    // Checkpoints in memory only: a job started by srun has no mpiexec to
    // remove node-local files, and this one is killed.
    c.env("MPISTAGES_CKPT", "mem")
        .args(["--mpi=pmi2", "-n", "4"])
        .arg(&exe)
        .args(["240", "1000000", "10", "protect"]);
    let job = std::thread::spawn(move || run_bounded(c, "srun stencil2d", LIMIT));
    let pids = wait_for_ranks(&s, &exe, 4);
    std::thread::sleep(Duration::from_millis(500));
    let killed = Instant::now();
    mpistages_sys::process::signal(pids[1], libc::SIGKILL);
    let r = job.join().unwrap();
    let took = killed.elapsed();
    assert!(!r.ok(), "{}\n{}", r.stdout, r.stderr);
    assert!(checksum(&r.stdout).is_none(), "{}", r.stdout);
    println!("the job ended {took:?} after the kill:\n{}", r.stderr);
    assert!(processes_of(&s, &exe).is_empty(), "ranks left behind");
}

/// Inside `salloc`, mpiexec takes Slurm's hosts and slots and starts its
/// agents with srun (the ranks run in a Slurm step); a job bigger than
/// the allocation is refused.
#[test]
fn mpiexec_in_an_allocation_uses_slurms_hosts_and_srun() {
    let s = or_skip!(
        Slurm::start(None, 8),
        "mpiexec_in_an_allocation_uses_slurms_hosts_and_srun"
    );
    let exe = build("whoami.c");
    let mpiexec = common::bin("mpiexec");
    let mpiexec = mpiexec.to_str().unwrap();
    let exe = exe.to_str().unwrap();
    let r = run(
        &s,
        "salloc",
        &["-n", "4", mpiexec, "-n", "4", exe, "X", "SLURM_STEP_ID"],
        &[],
    );
    assert!(r.ok(), "{}\n{}\n{}", r.stdout, r.stderr, s.logs());
    for rank in 0..4 {
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("rank {rank} of 4:")))
            .unwrap_or_else(|| panic!("rank {rank}: {}\n{}", r.stdout, r.stderr));
        // Started by an agent in a Slurm job step.
        let step = line.split("var=").nth(1).unwrap_or("").split(' ').next();
        assert!(
            step.is_some_and(|v| v.parse::<u32>().is_ok()),
            "rank {rank} is not in a Slurm step: {line}"
        );
    }
    let r = run(
        &s,
        "salloc",
        &["-n", "4", mpiexec, "-n", "5", exe, "X", "-"],
        &[],
    );
    assert!(!r.ok(), "{}", r.stdout);
    assert!(r.stderr.contains("slots"), "{}", r.stderr);
}

/// Inside an allocation, a rank is SIGKILLed in each recovery mode: it is
/// replaced through the agent Slurm started and the result is the
/// failure-free one.
#[test]
fn a_killed_rank_in_an_allocation_is_recovered_in_every_mode() {
    let s = or_skip!(
        Slurm::start(None, 8),
        "a_killed_rank_in_an_allocation_is_recovered_in_every_mode"
    );
    let exe = build_example("stencil2d.c");
    let mpiexec = common::bin("mpiexec");
    let job = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = vec!["-n".into(), "4".into(), mpiexec.to_str().unwrap().into()];
        a.extend(extra.iter().map(|x| x.to_string()));
        a.extend(
            [
                "-n",
                "4",
                exe.to_str().unwrap(),
                "240",
                "2000",
                "10",
                "protect",
            ]
            .map(String::from),
        );
        a
    };
    let clean = job(&[]);
    let clean: Vec<&str> = clean.iter().map(String::as_str).collect();
    let clean = run(&s, "salloc", &clean, &[]);
    assert!(clean.ok(), "{}\n{}", clean.stderr, s.logs());
    assert!(checksum(&clean.stdout).is_some(), "{}", clean.stdout);
    for mode in ["stages", "reinit", "cpr"] {
        let a = job(&["--recovery", mode, "--inject", "rank=1,checkpoint=50"]);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let r = run(&s, "salloc", &a, &[]);
        assert!(r.ok(), "{mode}: {}\n{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("recovery 1 done"), "{mode}: {}", r.stderr);
        assert_eq!(
            checksum(&clean.stdout),
            checksum(&r.stdout),
            "{mode}: {}",
            r.stderr
        );
    }
}

/// Three Slurm nodes on three network namespaces; mpiexec runs 6 ranks
/// over them (two per node) inside the allocation, and one node loses
/// power (its slurmd and everything on it SIGKILLed at once). mpiexec
/// finds the node lost, replaces its ranks on the nodes with free slots
/// and the result is the failure-free one.
#[test]
fn a_lost_slurm_node_is_recovered() {
    let h = or_skip!(Hosts::new(3), "a_lost_slurm_node_is_recovered");
    let mut s = or_skip!(Slurm::start(Some(&h), 4), "a_lost_slurm_node_is_recovered");
    let exe = build_example("stencil2d.c");
    let mpiexec = common::bin("mpiexec");
    let args: Vec<String> = [
        "-N",
        "3",
        "--ntasks-per-node",
        "4",
        "--no-kill",
        mpiexec.to_str().unwrap(),
        "--recovery",
        "stages",
        "--map-by",
        "node",
        "-n",
        "6",
        exe.to_str().unwrap(),
        "240",
        "6000",
        "10",
        "protect",
    ]
    .map(String::from)
    .to_vec();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let clean = run(&s, "salloc", &a, &[]);
    assert!(
        clean.ok(),
        "{}\n{}\n{}",
        clean.stdout,
        clean.stderr,
        s.logs()
    );
    let mut c = s.command("salloc");
    c.args(&args);
    let job = std::thread::spawn(move || run_bounded(c, "salloc mpiexec", LIMIT));
    // By node: ranks 1 and 4 run on node 1.
    wait_for_ranks(&s, &exe, 6);
    std::thread::sleep(Duration::from_millis(700));
    s.kill_node(1);
    let r = job.join().unwrap();
    assert!(r.ok(), "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(&format!("host {} is lost", h.names[1])),
        "{}",
        r.stderr
    );
    assert_eq!(checksum(&clean.stdout), checksum(&r.stdout), "{}", r.stderr);
    for l in r
        .stderr
        .lines()
        .filter(|l| l.contains("lost") || l.contains(" done: "))
    {
        println!("{l}");
    }
}
