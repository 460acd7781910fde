//! Differential checkpoints end to end (`--ckpt ...,diff:N`): the hydro
//! proxy (a blast wave: most of the mesh is still at rest for a while)
//! writes only its changed blocks to the directory levels, and a rank
//! that must read its state back from a directory level — a replacement,
//! every rank of a relaunched job, a rank whose node-local copies are gone
//! (from pfs), a job restarted from pfs — reassembles it from the chain,
//! with the failure-free energies.

mod common;
use common::{build_example, mpiexec, Run, Scratch};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);
/// 8 ranks, 8^3 elements each, 40 iterations, a checkpoint every 2.
const ARGS: [&str; 6] = ["-s", "8", "-i", "40", "-k", "2"];
/// Iteration 31 (call N is iteration N - 2): epoch 15 is committed, a
/// difference on 14 and 13 (with diff:4 epochs 1, 5, 9, 13 are full).
const KILL: &str = "rank=2,call=MPI_Waitall:33";

fn hydro(mode: &str, ckpt: Option<&str>, injects: &[&str], more: &[&str]) -> Run {
    let exe = build_example("hydro3d.c");
    let mut a = vec!["-n", "8", "--recovery", mode];
    a.extend(more);
    if let Some(c) = ckpt {
        a.extend(["--ckpt", c]);
    }
    for i in injects {
        a.extend(["--inject", i]);
    }
    a.push(exe.to_str().unwrap());
    a.extend(ARGS);
    mpiexec(&a, &[("MPISTAGES_CKPT_REPORT", "1")], LIMIT)
}

/// The energies line, without the run time.
fn energies(r: &Run) -> String {
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("final origin energy"))
        .unwrap_or_else(|| panic!("no result\n{}\n{}", r.stdout, r.stderr));
    line.rsplit_once(", ").map_or(line, |(a, _)| a).to_string()
}

fn reference() -> String {
    static R: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    R.get_or_init(|| {
        let r = hydro("none", None, &[], &[]);
        assert!(r.ok(), "{}", r.stderr);
        energies(&r)
    })
    .clone()
}

/// (files, full files, bytes checkpointed, bytes stored) summed over the
/// ranks' reports (`MPISTAGES_CKPT_REPORT`) for level `level` (tmpfs, pfs).
fn written(r: &Run, level: &str) -> (u64, u64, u64, u64) {
    let mut t = (0, 0, 0, 0);
    let ours = |l: &&str| l.contains(&format!(": {level}:")) && l.contains(" checkpoints (");
    for l in r.stderr.lines().filter(ours) {
        // "... : 20 checkpoints (3 full), 18053640 bytes checkpointed, 4967064 bytes stored (27.5 %)"
        let (_, counts) = l.rsplit_once(": ").unwrap();
        let w: Vec<&str> = counts.split_whitespace().collect();
        let num = |i: usize| -> u64 {
            w[i].trim_start_matches('(')
                .parse()
                .unwrap_or_else(|_| panic!("{l}"))
        };
        t = (t.0 + num(0), t.1 + num(2), t.2 + num(4), t.3 + num(7));
    }
    t
}

fn recovered(r: &Run, what: &str) {
    let all = format!("{what}: {:?}\n{}", r.status, r.stderr);
    assert!(r.ok(), "{all}");
    assert!(r.stderr.contains(" done: "), "no recovery: {all}");
    assert_eq!(energies(r), reference(), "{all}");
}

/// With diff:4 the files hold a fraction of the state (a full one every
/// 4 epochs), and a replacement (stages, reinit) or a relaunched job
/// (cpr) restores through the chain.
#[test]
fn a_diff_chain_restores_in_every_mode() {
    for mode in ["stages", "reinit", "cpr"] {
        let s = Scratch::new(&format!("diff-{mode}"));
        let spec = format!("mem,tmpfs:{},diff:4", s.path());
        let r = hydro(mode, Some(&spec), &[KILL], &[]);
        recovered(&r, mode);
        assert!(
            r.stderr.contains("restores epoch 15 from tmpfs"),
            "{mode}: {}",
            r.stderr
        );
        let (files, full, raw, stored) = written(&r, "tmpfs");
        assert!(
            files > 0 && full < files,
            "{mode}: {files} files, {full} full"
        );
        assert!(
            stored * 10 < raw * 9,
            "{mode}: {stored} of {raw} bytes stored"
        );
    }
}

/// Node-local copies lost: rank 2 restores from the pfs level, which got
/// the same differential files (a level written every epoch).
#[test]
fn a_diff_chain_on_pfs_serves_a_lost_node() {
    let s = Scratch::new("diff-pfs");
    let spec = format!("mem,tmpfs:{0}/local,pfs:{0}/durable,diff:4", s.path());
    let kill = format!("{KILL},damage=node");
    let r = hydro("stages", Some(&spec), &[&kill], &[]);
    recovered(&r, "pfs");
    assert!(
        r.stderr.contains("rank 2 (replacement) restores epoch") && r.stderr.contains("from pfs"),
        "{}",
        r.stderr
    );
}

/// A whole job lost (no recovery mode), restarted from its pfs level,
/// whose newest epochs are differential: the restart finds an epoch whose
/// chain is whole on every rank and the result is the failure-free one.
#[test]
fn a_job_restarts_from_a_diff_chain_on_pfs() {
    let s = Scratch::new("diff-restart");
    let pfs = format!("{}/durable", s.path());
    let spec = format!("mem,tmpfs:{}/local,pfs:{pfs},diff:4", s.path());
    let crashed = hydro("none", Some(&spec), &[KILL], &[]);
    assert!(!crashed.ok(), "{}", crashed.stderr);
    let r = hydro("stages", Some(&spec), &[], &["--restart", &pfs]);
    let all = format!("{:?}\n{}", r.status, r.stderr);
    assert!(r.ok(), "{all}");
    assert!(r.stderr.contains("restart done"), "{all}");
    assert_eq!(energies(&r), reference(), "{all}");
}
