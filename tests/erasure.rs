//! Erasure-coded redundancy sets end to end (`--ckpt ...,xor:K` and
//! `rs:K+M`): ranks of the stencil lose their node-local checkpoints and
//! die (`damage=node`), and their checkpoints are rebuilt from the rest of
//! their set, in every recovery mode, with the failure-free checksum; more
//! losses than the code covers fall back to `pfs` or end the job saying
//! why; damaged parity is detected. On one host (a lost node is simulated
//! by deleting the rank's files); `tests/multihost.rs` loses real hosts.

mod common;
use common::{build_example, checksum, mpiexec, Run, Scratch};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);

/// The stencil on an n×n grid at `ranks`, 100 iterations, a checkpoint
/// every 10, under `mode` with levels `ckpt` and injections.
fn stencil(ranks: usize, grid: usize, mode: &str, ckpt: Option<&str>, injects: &[String]) -> Run {
    let exe = build_example("stencil2d.c");
    let (ranks, grid) = (ranks.to_string(), grid.to_string());
    let mut a = vec!["-n", &ranks, "--recovery", mode];
    if let Some(c) = ckpt {
        a.extend(["--ckpt", c]);
    }
    for i in injects {
        a.extend(["--inject", i]);
    }
    a.push(exe.to_str().unwrap());
    a.extend([grid.as_str(), "100", "10", "protect"]);
    mpiexec(&a, &[], LIMIT)
}

/// Rank r loses its node (its node-local files, the parity it holds)
/// when it enters its 55th MPI_Allreduce: epoch 5 is committed.
fn lose(r: usize) -> String {
    format!("rank={r},call=MPI_Allreduce:55,damage=node")
}

/// Runs the failure-free job once per shape, for the checksum.
fn reference(ranks: usize, grid: usize) -> String {
    let r = stencil(ranks, grid, "stages", None, &[]);
    assert!(r.ok(), "failure-free run failed:\n{}", r.stderr);
    checksum(&r)
}

/// The job recovered with the failure-free result, and each of `ranks`
/// said it restored epoch 5 rebuilt from `scheme`.
fn rebuilt(r: &Run, want: &str, mode: &str, scheme: &str, ranks: &[usize]) {
    let what = format!("{mode} {scheme}: {:?}\n{}", r.status, r.stderr);
    assert!(r.ok(), "{what}");
    assert!(r.stderr.contains(" done: "), "no recovery: {what}");
    assert_eq!(checksum(r), want, "{what}");
    for x in ranks {
        assert!(
            r.stderr
                .contains(&format!("rank {x}: epoch 5 rebuilt from {scheme} parity")),
            "rank {x}: {what}"
        );
        let who = if mode == "cpr" {
            format!("relaunched job: rank {x} ")
        } else {
            format!("rank {x} (replacement) ")
        };
        assert!(
            r.stderr
                .contains(&format!("{who}restores epoch 5 from {scheme}")),
            "rank {x}: {what}"
        );
    }
}

/// The stencil at `ranks` on a grid of `grid` with `scheme`, in every
/// mode, losing the nodes of ranks `lost` (under cpr only the last: the
/// relaunch can overtake a second rank's injection): the job ends with
/// the failure-free checksum and each lost rank rebuilt from its set.
fn sets_rebuild(ranks: usize, grid: usize, scheme: &str, lost: &[usize]) {
    let want = reference(ranks, grid);
    for mode in ["stages", "reinit", "cpr"] {
        let s = Scratch::new(&format!("erasure-{}-{mode}", &scheme[..2]));
        let spec = format!("mem,tmpfs:{},{scheme}", s.path());
        let lost = if mode == "cpr" {
            &lost[lost.len() - 1..]
        } else {
            lost
        };
        let injects: Vec<String> = lost.iter().map(|&r| lose(r)).collect();
        let r = stencil(ranks, grid, mode, Some(&spec), &injects);
        rebuilt(&r, &want, mode, scheme, lost);
    }
}

/// xor:4 at 8 ranks (two sets of 4): one lost member in each set is
/// rebuilt from the other three.
#[test]
fn xor_sets_rebuild_one_lost_member_each_in_every_mode() {
    sets_rebuild(8, 64, "xor:4", &[1, 6]);
}

/// rs:4+2 at 6 ranks (one set): two lost members are rebuilt from the
/// other four.
#[test]
fn reed_solomon_sets_rebuild_two_lost_members_in_every_mode() {
    sets_rebuild(6, 48, "rs:4+2", &[1, 4]);
}

/// Ranks 1 and 2 of one xor:4 set lose their nodes, with a pfs level:
/// the job recovers with the failure-free result whether the two losses
/// come at once (more than xor:4 covers: both restore from pfs) or one
/// after the other (each rebuilt in its own recovery; a rank restored
/// keeps its copy in memory for the next). The two at once for certain,
/// and without pfs, is `tests/multihost.rs` (a host with two members).
#[test]
fn two_lost_members_of_a_set_recover_from_pfs() {
    let want = reference(4, 64);
    let s = Scratch::new("erasure-too-many");
    let spec = format!("mem,tmpfs:{0}/local,xor:4,pfs:{0}/durable", s.path());
    let r = stencil(4, 64, "stages", Some(&spec), &[lose(1), lose(2)]);
    let what = format!("{:?}\n{}", r.status, r.stderr);
    assert!(r.ok(), "{what}");
    assert_eq!(checksum(&r), want, "{what}");
    for x in [1, 2] {
        assert!(
            r.stderr.lines().any(
                |l| l.contains(&format!("rank {x} (replacement) restores epoch"))
                    && (l.contains("from pfs") || l.contains("from xor:4"))
            ),
            "{what}"
        );
    }
}

/// Rank 1 dies and its parity file is damaged as it does (its
/// replacement has only the file); then, after that recovery and before
/// the next checkpoint, rank 2 loses its node. The damage is detected,
/// epoch 5 cannot be rebuilt for rank 2, and every rank goes back to
/// epoch 4, which rank 2 rebuilds from the parity of epoch 4.
#[test]
fn damaged_parity_is_detected() {
    let want = reference(4, 64);
    let s = Scratch::new("erasure-parity");
    let spec = format!("mem,tmpfs:{},xor:4", s.path());
    let injects = [
        "rank=1,call=MPI_Allreduce:55,damage=parity".to_string(),
        "rank=2,call=MPI_Allreduce:57,damage=node".to_string(),
    ];
    let r = stencil(4, 64, "stages", Some(&spec), &injects);
    let what = format!("{:?}\n{}", r.status, r.stderr);
    assert!(r.ok(), "{what}");
    assert_eq!(checksum(&r), want, "{what}");
    for line in [
        "rank 1: xor:4 parity of epoch 5 skipped: parity checksum mismatch",
        "rank 2: epoch 5 cannot be rebuilt from xor:4",
        "restoring epoch 4 instead",
        "rank 2: epoch 4 rebuilt from xor:4 parity",
        "rank 2 (replacement) restores epoch 4 from xor:4",
    ] {
        assert!(r.stderr.contains(line), "{line}: {what}");
    }
}

/// `mpistages-ckpt` on the parity a running job holds: the scheme, the
/// set and what it covers; a flipped byte makes `verify` fail. (The
/// job's node-local directory goes with the job, so a copy is taken
/// while it runs: a job of a few seconds with ten checkpoints, not
/// thousands, which take too long on a loaded machine.)
#[test]
fn the_checkpoint_tool_shows_parity_and_its_scheme() {
    let s = Scratch::new("erasure-tool");
    let spec = format!("mem,tmpfs:{}/local,xor:4", s.path());
    let exe = build_example("stencil2d.c");
    let child = common::command(common::bin("mpiexec"))
        .args(["-n", "4", "--ckpt", &spec, exe.to_str().unwrap()])
        .args(["1024", "1000", "100", "protect"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let copy = s.0.join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    let deadline = std::time::Instant::now() + LIMIT;
    // Copies rank 0's held parity of some epoch (epochs come and go).
    let took = loop {
        assert!(std::time::Instant::now() < deadline, "no parity appeared");
        let held = std::fs::read_dir(s.0.join("local"))
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|job| {
                std::fs::read_dir(job.path())
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .map(|epoch| epoch.path().join("held-by-0.ckpt"))
            .find_map(|p| std::fs::read(&p).ok().map(|b| (p, b)));
        if let Some((p, bytes)) = held {
            let to = copy.join(p.file_name().unwrap());
            std::fs::write(&to, bytes).unwrap();
            break to;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let r = common::finish(child, "mpiexec", LIMIT);
    assert!(r.ok(), "{}", r.stderr);
    let tool = |cmd: &str| {
        let o = common::command(common::bin("mpistages-ckpt"))
            .args([cmd, copy.to_str().unwrap()])
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    let (code, out) = tool("verify");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("xor:4 parity held by rank 0: job ")
            && out.contains("set of ranks [0, 1, 2, 3]")
            && out.contains("stripe/shard 0/0")
            && out.trim_end().ends_with("1 files, 0 corrupt"),
        "{out}"
    );
    let mut bytes = std::fs::read(&took).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&took, bytes).unwrap();
    let (code, out) = tool("verify");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("CORRUPT: parity checksum mismatch"), "{out}");
}
