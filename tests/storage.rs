//! Application data on the checkpoint levels, end to end: the stencil
//! example keeps its block with `MPIX_Protect` (or in a routed file), a
//! rank is SIGKILLed, and the job must finish with the checksum of a
//! failure-free run — from each level alone, after the loss of the failed
//! rank's node-local copies, with its newest copy corrupted, and when it
//! dies while writing. Plus the protect/route API's checks at 1–3 ranks.

mod common;
use common::{build, build_example, checksum, mpiexec, Run, Scratch};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);
/// 4 ranks, a 64x64 grid, 100 iterations, a checkpoint every 10.
const GRID: [&str; 3] = ["64", "100", "10"];
/// Rank 2 dies on entering its 55th MPI_Allreduce: epoch 5 is committed.
const KILL: &str = "rank=2,call=MPI_Allreduce:55";

fn stencil(store: &str, ckpt: Option<&str>, injects: &[&str]) -> Run {
    let exe = build_example("stencil2d.c");
    let mut a = vec!["-n", "4", "--recovery", "stages"];
    if let Some(c) = ckpt {
        a.extend(["--ckpt", c]);
    }
    for i in injects {
        a.extend(["--inject", i]);
    }
    a.push(exe.to_str().unwrap());
    a.extend(GRID);
    a.push(store);
    mpiexec(&a, &[], LIMIT)
}

/// The failure-free result (computed once per test process).
fn reference() -> String {
    static R: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    R.get_or_init(|| {
        let r = stencil("protect", None, &[]);
        assert!(r.ok(), "failure-free run failed:\n{}", r.stderr);
        checksum(&r)
    })
    .clone()
}

/// Runs with the injections; the job must recover and match the reference.
fn recovers(store: &str, ckpt: Option<&str>, injects: &[&str]) -> Run {
    let r = stencil(store, ckpt, injects);
    assert!(
        r.ok(),
        "{store} {ckpt:?} {injects:?} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        r.status,
        r.stdout,
        r.stderr
    );
    assert!(
        r.stderr.contains(" done: ranks"),
        "no recovery:\n{}",
        r.stderr
    );
    assert_eq!(checksum(&r), reference(), "stderr:\n{}", r.stderr);
    r
}

/// The node-local root of a level named by the test holds no job directory
/// once the job is over.
fn assert_no_job_dirs(root: &std::path::Path) {
    let left: Vec<_> = std::fs::read_dir(root)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in {}: {left:?}", root.display());
}

#[test]
fn protected_data_restores_from_tmpfs_alone() {
    let s = Scratch::new("storage-tmpfs");
    let spec = format!("tmpfs:{}", s.path());
    let r = recovers("protect", Some(&spec), &[KILL]);
    assert!(
        r.stderr.contains("restores epoch 5 from tmpfs"),
        "{}",
        r.stderr
    );
    assert_no_job_dirs(&s.0);
}

#[test]
fn protected_data_restores_from_partner_alone() {
    let r = recovers("protect", Some("partner"), &[KILL]);
    assert!(
        r.stderr.contains("restores epoch 5 from partner"),
        "{}",
        r.stderr
    );
}

#[test]
fn protected_data_restores_from_pfs_alone() {
    let s = Scratch::new("storage-pfs");
    let spec = format!("pfs:{}", s.path());
    let r = recovers("protect", Some(&spec), &[KILL]);
    assert!(r.stderr.contains("from pfs"), "{}", r.stderr);
    // The durable level is the user's: its files stay, and they verify.
    let epochs: Vec<_> = std::fs::read_dir(&s.0).unwrap().flatten().collect();
    assert!(!epochs.is_empty());
}

#[test]
fn memory_alone_cannot_restore_a_replacement() {
    let r = stencil("protect", Some("mem"), &[KILL]);
    assert!(!r.ok(), "succeeded without any copy:\n{}", r.stderr);
    assert!(
        r.stderr.contains("no valid checkpoint is left") && r.stderr.contains("only the mem level"),
        "{}",
        r.stderr
    );
    assert!(!r.stdout.contains("checksum"), "{}", r.stdout);
}

#[test]
fn routed_files_restore_with_the_default_levels() {
    recovers("route", None, &[KILL]);
}

#[test]
fn lost_node_restores_from_partner() {
    let s = Scratch::new("storage-node-partner");
    let spec = format!("mem,tmpfs:{},partner", s.path());
    let r = recovers("protect", Some(&spec), &[&format!("{KILL},damage=node")]);
    assert!(
        r.stderr.contains("node-local checkpoint file(s) of rank 2"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("restores epoch 5 from partner"),
        "{}",
        r.stderr
    );
    assert_no_job_dirs(&s.0);
}

#[test]
fn lost_node_restores_from_pfs() {
    let s = Scratch::new("storage-node-pfs");
    let spec = format!("mem,tmpfs:{0}/local,pfs:{0}/durable", s.path());
    let r = recovers("protect", Some(&spec), &[&format!("{KILL},damage=node")]);
    // The flush of the newest epoch may not be finished when the node is
    // lost: then every rank goes one epoch further back.
    assert!(r.stderr.contains("from pfs"), "{}", r.stderr);
}

#[test]
fn corrupt_newest_copy_falls_back_to_the_previous_epoch() {
    let s = Scratch::new("storage-corrupt");
    let spec = format!("mem,tmpfs:{}", s.path());
    let r = recovers("protect", Some(&spec), &[&format!("{KILL},damage=corrupt")]);
    assert!(r.stderr.contains("checksum mismatch"), "{}", r.stderr);
    assert!(
        r.stderr.contains("restoring epoch 4 instead"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("restores epoch 4 from tmpfs"),
        "{}",
        r.stderr
    );
}

#[test]
fn kill_while_writing_keeps_the_previous_epoch() {
    let r = recovers("protect", None, &["rank=1,writing=3"]);
    assert!(r.stderr.contains("rolls back to epoch 2"), "{}", r.stderr);
    assert!(r.stderr.contains("restores epoch 2 from"), "{}", r.stderr);
}

#[test]
fn protect_route_api_checks() {
    let exe = build("protect.c");
    let exe = exe.to_str().unwrap();
    for n in ["1", "2", "3"] {
        let r = mpiexec(&["-n", n, exe], &[], LIMIT);
        assert!(
            r.ok(),
            "{n} ranks: {:?}\n{}\n{}",
            r.status,
            r.stdout,
            r.stderr
        );
        assert!(
            r.stdout.contains(&format!("OK protect {n}")),
            "{}",
            r.stdout
        );
    }
}
