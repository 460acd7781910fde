//! The recovery models end to end on the proxy applications, at small
//! sizes: every run, with and without failures, in every mode (ULFM: the
//! proxies' respawning driver) and with one or two failures, ends with the
//! same energies as the failure-free run. Also MPIX_Reinit's states and reset
//! (tests/c/reinit.c), and `mpistages-bench recovery` writing its CSV and
//! charts.

mod common;
use common::{build, build_example, mpiexec, Run, Scratch};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn run(exe: &str, np: usize, mode: &str, injects: &[String], args: &[&str]) -> Run {
    let n = np.to_string();
    let mut a = vec!["-n", n.as_str(), "--recovery", mode];
    for i in injects {
        a.extend(["--inject", i.as_str()]);
    }
    a.push(exe);
    a.extend(args);
    // Where the ULFM driver keeps its checkpoint files: empty at the end
    // (one directory per run: tests run side by side in this process).
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let files = Scratch::new(&format!("proxy-ulfm-{k}"));
    let r = mpiexec(&a, &[("PROXY_ULFM_DIR", files.path())], LIMIT);
    let left: Vec<_> = std::fs::read_dir(&files.0).unwrap().flatten().collect();
    assert!(left.is_empty(), "{mode}: left behind: {left:?}");
    assert!(
        r.ok(),
        "{exe} {mode} at {np} ranks with {injects:?} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        r.status,
        r.stdout,
        r.stderr
    );
    r
}

/// The result line, without the run time at its end.
fn result(r: &Run, marker: &str) -> String {
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains(marker))
        .unwrap_or_else(|| {
            panic!(
                "no '{marker}' line\nstdout:\n{}\nstderr:\n{}",
                r.stdout, r.stderr
            )
        });
    line.rsplit_once(", ").map_or(line, |(a, _)| a).to_string()
}

/// Recoveries mpiexec reported (under ULFM: ranks the job went on without).
fn recoveries(r: &Run) -> usize {
    r.stderr
        .lines()
        .filter(|l| {
            (l.contains("mpiexec: recovery ") && l.contains(" done: "))
                || l.contains("the job goes on without it (ULFM)")
        })
        .count()
}

/// The app failure-free, then under each mode with the kills of `injects`
/// (one list per run): the same result every time, one recovery per kill,
/// and every rank reported itself back after each.
fn same_everywhere(app: &str, np: usize, args: &[&str], marker: &str, injects: &[Vec<String>]) {
    let exe = build_example(&format!("{app}.c"));
    let exe = exe.to_str().unwrap();
    let clean = result(&run(exe, np, "none", &[], args), marker);
    for mode in ["stages", "reinit", "cpr", "ulfm"] {
        assert_eq!(
            result(&run(exe, np, mode, &[], args), marker),
            clean,
            "{mode} without failure"
        );
        for kills in injects {
            let r = run(exe, np, mode, kills, args);
            assert_eq!(
                result(&r, marker),
                clean,
                "{app} {mode} with {kills:?}\n{}",
                r.stderr
            );
            assert_eq!(
                recoveries(&r),
                kills.len(),
                "{mode} {kills:?}:\n{}",
                r.stderr
            );
            let back = r
                .stderr
                .lines()
                .filter(|l| l.contains(" back at iteration "))
                .count();
            assert!(
                back >= np,
                "{mode}: only {back} ranks said they were back:\n{}",
                r.stderr
            );
        }
    }
}

#[test]
fn hydro3d_energy_is_the_same_in_every_mode_and_failure_count() {
    // hydro3d counts one MPI_Waitall in its set-up and one per iteration:
    // call N is iteration N - 2. Checkpoints every 5 iterations.
    let kill = |rank: usize, n: u32| format!("rank={rank},call=MPI_Waitall:{n}");
    same_everywhere(
        "hydro3d",
        8,
        &["-s", "5", "-i", "24", "-k", "5"],
        "final origin energy",
        &[
            vec![kill(3, 13)],             // iteration 11, after epoch 2
            vec![kill(5, 4), kill(2, 20)], // before the first checkpoint, then later
        ],
    );
}

#[test]
fn hydro3d_on_a_grid_that_is_not_a_cube_recovers_alike() {
    // 6 ranks: a 3 x 2 x 1 grid of blocks (MPI_Dims_create).
    same_everywhere(
        "hydro3d",
        6,
        &["-s", "4", "-i", "16", "-k", "5"],
        "final origin energy",
        &[vec!["rank=4,call=MPI_Waitall:10".into()]],
    );
}

#[test]
fn md_energies_are_the_same_in_every_mode_and_failure_count() {
    // md: 12 Sendrecv in the initial halo, 24 per step.
    let kill = |rank: usize, step: u32, k: u32| {
        format!("rank={rank},call=MPI_Sendrecv:{}", 12 + 24 * step + k)
    };
    same_everywhere(
        "md",
        4,
        &["-s", "4", "-i", "24", "-k", "5"],
        "energy per atom",
        &[vec![kill(1, 11, 7)], vec![kill(3, 6, 20), kill(0, 17, 1)]],
    );
}

/// A rank killed with its transfers under way (16 MiB each way, entering
/// MPI_Waitall), and its neighbours' transfers to and from it half done:
/// every mode recovers with the failure-free checksum, over whichever
/// transport the suite runs on (`scripts/test`); over shared memory also
/// without single-copy reads, so that both paths lose their peer mid-message.
#[test]
fn a_rank_killed_mid_transfer_is_recovered_in_every_mode() {
    let exe = build("bulk.c");
    let exe = exe.to_str().unwrap();
    let args = ["6", "16"];
    // The whole line: result() would cut the checksum off.
    let line = |r: &Run| {
        let l = r.stdout.lines().find(|l| l.starts_with("bulk: "));
        l.unwrap_or_else(|| panic!("no result:\n{}", r.stderr))
            .to_string()
    };
    let clean = line(&run(exe, 3, "none", &[], &args));
    assert!(clean.contains(" checksum "), "{clean}");
    for cma in ["1", "0"] {
        for mode in ["stages", "reinit", "cpr"] {
            let mut a = vec!["-n", "3", "--recovery", mode];
            a.extend(["--inject", "rank=1,call=MPI_Waitall:3", exe]);
            a.extend(args);
            let r = mpiexec(&a, &[("MPISTAGES_SHM_CMA", cma)], LIMIT);
            assert!(r.ok(), "{mode}, cma {cma}: {}", r.stderr);
            assert_eq!(recoveries(&r), 1, "{mode}, cma {cma}: {}", r.stderr);
            assert_eq!(line(&r), clean, "{mode}, cma {cma}");
        }
    }
}

#[test]
fn one_rank_jobs_recover_too() {
    let exe = build_example("md.c");
    let exe = exe.to_str().unwrap();
    let args = ["-s", "3", "-i", "12", "-k", "4"];
    let clean = result(&run(exe, 1, "none", &[], &args), "energy per atom");
    for mode in ["stages", "reinit", "cpr"] {
        let r = run(
            exe,
            1,
            mode,
            &["rank=0,call=MPI_Sendrecv:200".into()],
            &args,
        );
        assert_eq!(result(&r, "energy per atom"), clean, "{mode}");
        assert_eq!(recoveries(&r), 1, "{mode}");
    }
}

/// Non-blocking and persistent collectives on WORLD, a dup and a split
/// (examples/collectives.c) across a rollback, to epoch 0 (no checkpoint:
/// the reset Reinit always does) and to a saved epoch, in every mode: the
/// failure-free total.
/// Campaign cause 1: a survivor kept its count of non-blocking collectives
/// through a reset, so its next one had another tag than the
/// replacement's and the job hung.
#[test]
fn nonblocking_collectives_across_a_rollback() {
    let exe = build_example("collectives.c");
    let exe = exe.to_str().unwrap();
    let clean = result(&run(exe, 4, "none", &[], &["30", "0"]), "collectives:");
    let kill = vec!["rank=1,call=MPI_Iallreduce:40".to_string()];
    for mode in ["reinit", "stages", "cpr"] {
        for every in ["0", "7"] {
            let r = run(exe, 4, mode, &kill, &["30", every]);
            assert_eq!(
                result(&r, "collectives:"),
                clean,
                "{mode}, checkpoint every {every}"
            );
            assert_eq!(recoveries(&r), 1, "{mode}, checkpoint every {every}");
        }
    }
}

/// States and reset of MPIX_Reinit: live ranks REINITED with the MPI state
/// of MPI_Init (checked inside the program), the replacement RESTARTED;
/// under cpr every rank RESTARTED; without a failure NEW only.
#[test]
fn reinit_states_and_reset() {
    let exe = build("reinit.c");
    let exe = exe.to_str().unwrap();
    let states = |r: &Run, rank: usize| -> String {
        let p = format!("rank {rank} states ");
        r.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&p))
            .unwrap_or_else(|| panic!("no states of rank {rank}:\n{}\n{}", r.stdout, r.stderr))
            .to_string()
    };
    let kill = vec!["rank=1,call=MPI_Allreduce:8".to_string()];
    let r = run(exe, 3, "none", &[], &[]);
    assert!(r.stdout.contains("OK reinit"));
    assert_eq!((states(&r, 0), states(&r, 1)), ("1".into(), "1".into()));
    let r = run(exe, 3, "reinit", &kill, &[]);
    assert!(r.stdout.contains("OK reinit"), "{}", r.stderr);
    assert_eq!(states(&r, 0), "1 2");
    assert_eq!(states(&r, 2), "1 2");
    assert_eq!(states(&r, 1), "3");
    let r = run(exe, 3, "cpr", &kill, &[]);
    assert!(r.stdout.contains("OK reinit"), "{}", r.stderr);
    for rank in 0..3 {
        assert_eq!(states(&r, rank), "3", "rank {rank}");
    }
    assert!(r.stderr.contains("relaunching the job"), "{}", r.stderr);
}

#[test]
fn recovery_benchmark_writes_rows_and_charts() {
    let out = Scratch::new("bench-recovery");
    let bench = env!("CARGO_BIN_EXE_mpistages-bench");
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let r = common::command(bench)
        .args([
            "recovery", "--apps", "md", "--ranks", "1,2", "--reps", "2", "--iters", "20",
        ])
        .args([
            "--every",
            "5",
            "--size",
            "3",
            "--out",
            out.path(),
            "--examples",
            examples,
        ])
        .output()
        .expect("run mpistages-bench");
    let (so, se) = (
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr),
    );
    assert!(r.status.success(), "{so}\n{se}");
    // 1 rank: 4 modes (ULFM has no survivor), 2 ranks: all 6; a plain
    // run and per mode a failure-free and a failure run, twice.
    assert!(se.contains("[44/44]"), "progress is shown:\n{se}");
    // The floor is measured as the recoveries are, and the table says what
    // its columns are.
    assert!(
        se.contains("the floor, one rank alone recovering from the same kill"),
        "{se}"
    );
    assert!(
        so.contains("no ckpt s      the program built without"),
        "{so}"
    );
    assert!(
        !so.contains(" -0.") && !so.contains(" -1"),
        "no negative overhead:\n{so}"
    );
    let csv = std::fs::read_to_string(out.0.join("recovery.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("app,mode,ranks,state_mb,rep,recovery_ms,detected_ms,propagated_ms,started_ms,mpi_restored_ms,resumed_ms,data_load_ms,state_bytes,reexecuted_iters,floor_ms,time_to_solution_s,failure_free_s,ckpt_overhead_pct")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(
        rows.len(),
        (4 + 6) * 2,
        "(4 + 6 modes) x 2 repetitions:\n{csv}"
    );
    for row in &rows {
        assert_eq!(row.len(), 18);
        let ms: f64 = row[5].parse().unwrap();
        assert!(ms > 0.0 && ms < 60_000.0, "recovery {ms} ms in {row:?}");
        // (A restarted job's detection is the first job's end.)
        if row[1] != "restart" {
            let detected: f64 = row[6].parse().unwrap();
            assert!(detected >= 0.0 && detected <= ms, "detection in {row:?}");
        }
        let bytes: u64 = row[12].parse().unwrap();
        assert!(bytes > 1000, "the state restored in {row:?}");
        let floor: f64 = row[14].parse().unwrap();
        assert!(floor > 0.0 && floor < 60_000.0, "floor in {row:?}");
        let tts: f64 = row[15].parse().unwrap();
        assert!(tts > 0.0);
    }
    for mode in ["stages", "reinit", "cpr", "restart", "ulfm", "ulfm-shrink"] {
        assert!(
            so.contains(&format!(" {mode} ")),
            "the table has {mode}:\n{so}"
        );
    }
    let summary = std::fs::read_to_string(out.0.join("summary.txt")).unwrap();
    for n in [1, 2] {
        assert!(
            summary.contains(&format!("md {n} ranks 0 MiB: stages recovers in ")),
            "{summary}"
        );
    }
    assert!(summary.contains("of restart's"), "{summary}");
    let svg = std::fs::read_to_string(out.0.join("recovery-md.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{svg}");
    for mode in ["stages", "reinit", "cpr"] {
        let named = svg.split("<text").any(|t| {
            t.split_once('>')
                .is_some_and(|(_, body)| body.trim_start().starts_with(&format!("{mode}\n")))
        });
        assert!(named, "the legend names {mode}:\n{svg}");
    }
    // A line per mode, a mark per mode in the legend, a bar per point.
    assert!(svg.matches("<polyline").count() >= 3 * 2 + 3 * 2, "{svg}");
    // The summary again from the rows alone: the same text.
    let again = Scratch::new("bench-summary");
    let r = common::command(bench)
        .args(["recovery", "--summary-from"])
        .arg(out.0.join("recovery.csv"))
        .args(["--out", again.path()])
        .output()
        .expect("run mpistages-bench");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let rebuilt = std::fs::read_to_string(again.0.join("summary.txt")).unwrap();
    assert_eq!(rebuilt, summary);
    // Bytes that are no recovery.csv are refused with a message.
    let bad = again.0.join("bad.csv");
    std::fs::write(&bad, "app,mode\nmd,stages\n").unwrap();
    let r = common::command(bench)
        .args(["recovery", "--summary-from"])
        .arg(&bad)
        .output()
        .expect("run mpistages-bench");
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        !r.status.success() && err.contains("not a recovery.csv"),
        "{err}"
    );
}

/// ULFM's shrinking recovery (the proxies' driver with PROXY_ULFM=shrink):
/// md goes on with fewer ranks, the survivors sharing the dead rank's part
/// of the box from every rank's checkpoint file. The energies equal the
/// failure-free run's but for the order of floating-point sums (other
/// domains): to 1e-12, with the same hottest and most bound atoms.
#[test]
fn md_shrinks_onto_the_survivors_with_the_failure_free_energies() {
    let exe = build_example("md.c");
    let exe = exe.to_str().unwrap();
    let args = ["-s", "4", "-i", "24", "-k", "5"];
    // md: 12 Sendrecv in the initial halo, 24 per step.
    let kill =
        |rank: usize, step: u32| format!("rank={rank},call=MPI_Sendrecv:{}", 12 + 24 * step + 3);
    let numbers = |line: &str| -> Vec<f64> {
        line.split([' ', '(', ')', ',', ';'])
            .filter_map(|w| w.parse::<f64>().ok().filter(|_| w.contains('e')))
            .collect()
    };
    let atoms = |line: &str| -> Vec<String> {
        let w: Vec<&str> = line.split_whitespace().collect();
        w.windows(2)
            .filter(|p| p[0] == "atom")
            .map(|p| p[1].to_string())
            .collect()
    };
    for (np, kills) in [
        (4, vec![kill(1, 12)]),
        (4, vec![kill(2, 3)]),              // before the first checkpoint
        (6, vec![kill(3, 7), kill(0, 18)]), // 6, then 5, then 4 ranks
    ] {
        let clean = result(&run(exe, np, "none", &[], &args), "energy per atom");
        let files = Scratch::new(&format!("md-shrink-{np}-{}", kills.len()));
        let n = np.to_string();
        let mut a = vec!["-n", &n, "--with-ft", "ulfm"];
        for k in &kills {
            a.extend(["--inject", k.as_str()]);
        }
        a.push(exe);
        a.extend(args);
        let r = mpiexec(
            &a,
            &[("PROXY_ULFM", "shrink"), ("PROXY_ULFM_DIR", files.path())],
            LIMIT,
        );
        let what = format!(
            "{np} ranks, {kills:?}: {:?}\n{}\n{}",
            r.status, r.stdout, r.stderr
        );
        assert!(r.ok(), "{what}");
        let got = result(&r, "energy per atom");
        assert!(
            got.contains(&format!("md: {} ranks", np - kills.len())),
            "{what}"
        );
        let (want, have) = (numbers(&clean), numbers(&got));
        assert_eq!(want.len(), have.len(), "{clean}\n{got}");
        for (w, h) in want.iter().zip(&have) {
            assert!(
                (w - h).abs() <= 1e-12 * w.abs(),
                "{w} vs {h}\n{clean}\n{got}"
            );
        }
        assert_eq!(atoms(&clean), atoms(&got), "{clean}\n{got}");
        assert_eq!(recoveries(&r), kills.len(), "{what}");
        let left: Vec<_> = std::fs::read_dir(&files.0).unwrap().flatten().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

/// A rank killed in the proxy's MPI set-up (hydro3d's first MPI_Waitall,
/// before its loop): the others get MPIX_TRY_RELOAD there and roll back to
/// epoch 0 like anywhere else. The campaign found it: the proxy ended the
/// job ("set-up: MPIX_TRY_RELOAD").
#[test]
fn a_kill_during_the_mpi_set_up_is_rolled_back() {
    let exe = build_example("hydro3d.c");
    let exe = exe.to_str().unwrap();
    let args = ["-s", "4", "-i", "12", "-k", "5"];
    let clean = result(&run(exe, 8, "none", &[], &args), "final origin energy");
    let kill = vec!["rank=5,call=MPI_Waitall:1".to_string()];
    for mode in ["stages", "reinit", "cpr"] {
        let r = run(exe, 8, mode, &kill, &args);
        assert_eq!(
            result(&r, "final origin energy"),
            clean,
            "{mode}\n{}",
            r.stderr
        );
        assert_eq!(recoveries(&r), 1, "{mode}:\n{}", r.stderr);
    }
}

/// A killed rank with 256 MiB of state is seen by its liveness lock
/// (`sys::liveness`), as the kernel begins to tear it down, in the modes
/// that go on (stages, reinit, ulfm), and recovered with the failure-free
/// energies; without recovery the job ends with the status the exit gives
/// (seen at `SIGCHLD`). Before, every failure was seen at `SIGCHLD` or by
/// closed sockets, after the dead process's memory was freed.
#[test]
fn a_failure_is_seen_before_the_teardown() {
    let exe = build_example("md.c");
    let exe = exe.to_str().unwrap();
    let args = ["-s", "4", "-i", "24", "-k", "5", "-m", "256"];
    let kill = vec!["rank=1,call=MPI_Sendrecv:200".to_string()];
    let clean = result(&run(exe, 3, "none", &[], &args), "energy per atom");
    for mode in ["stages", "reinit", "ulfm"] {
        let r = run(exe, 3, mode, &kill, &args);
        assert_eq!(recoveries(&r), 1, "{mode}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("died (its liveness lock was freed as the kernel tore it down)"),
            "{mode}: {}",
            r.stderr
        );
        if mode != "ulfm" {
            assert_eq!(result(&r, "energy per atom"), clean, "{mode}");
        }
    }
    // A fresh replacement (no spare) starts while its predecessor, with
    // 256 MiB still to free, may hold its sockets: its shared-memory
    // address is its own (it has the process's TCP port in it), so every
    // survivor reaches it over shared memory, not over TCP.
    let big = ["-s", "4", "-i", "24", "-k", "5", "-m", "256"];
    let n = [
        "-n",
        "3",
        "--spares",
        "0",
        "--recovery",
        "stages",
        "--inject",
        &kill[0],
        exe,
    ];
    let env = [("MPISTAGES_TRANSPORT", "auto"), ("MPISTAGES_LOG", "debug")];
    let r = mpiexec(&[&n[..], &big[..]].concat(), &env, LIMIT);
    assert!(r.ok(), "{}", r.stderr);
    for peer in [0, 2] {
        let line = format!("rank {peer}: connected to rank 1 over shm (generation 1)");
        let theirs = format!("rank 1: connected to rank {peer} over shm (generation 1)");
        assert!(
            r.stderr.contains(&line) || r.stderr.contains(&theirs),
            "{peer}: {}",
            r.stderr
        );
    }
    assert!(
        !r.stderr.contains("no shared-memory listener"),
        "{}",
        r.stderr
    );
    // The fallback, asked for: the death seen when the process has ended.
    let n = ["-n", "3", "--recovery", "stages", "--inject", &kill[0], exe];
    let r = mpiexec(
        &[&n[..], &args[..]].concat(),
        &[("MPISTAGES_LIVENESS", "0")],
        LIMIT,
    );
    assert!(r.ok(), "{}", r.stderr);
    assert_eq!(recoveries(&r), 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("was killed by signal 9 (SIGKILL); recovery 1"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("liveness lock"), "{}", r.stderr);
    assert_eq!(result(&r, "energy per atom"), clean);
    let n = ["-n", "3", "--recovery", "none", "--inject", &kill[0], exe];
    let ended = mpiexec(&[&n[..], &args[..]].concat(), &[], LIMIT);
    assert_eq!(ended.code(), Some(137), "{}", ended.stderr);
    assert!(
        ended.stderr.contains("was killed by signal 9 (SIGKILL)"),
        "{}",
        ended.stderr
    );
}

/// Checkpoints whose files a thread writes (`MPISTAGES_CKPT_BACKGROUND=1`):
/// the program waits only for the copy in memory, the epoch commits once
/// the files are written, and a rank killed at any point recovers with
/// the failure-free energies under stages and reinit, in the stages mode
/// also when killed right after a checkpoint (its files may still be
/// under way: the job then rolls back to the epoch before).
#[test]
fn checkpoints_written_in_the_background_recover_the_same_result() {
    let exe = build_example("md.c");
    let exe = exe.to_str().unwrap();
    let args = ["-s", "4", "-i", "24", "-k", "5", "-m", "8"];
    let clean = result(&run(exe, 3, "none", &[], &args), "energy per atom");
    let env = [("MPISTAGES_CKPT_BACKGROUND", "1")];
    for (mode, kill) in [
        ("stages", "rank=1,call=MPI_Sendrecv:200"),
        ("reinit", "rank=2,call=MPI_Sendrecv:130"),
        ("stages", "rank=0,checkpoint=2"),
    ] {
        let n = ["-n", "3", "--recovery", mode, "--inject", kill, exe];
        let r = mpiexec(&[&n[..], &args[..]].concat(), &env, LIMIT);
        assert!(r.ok(), "{mode} {kill}: {}", r.stderr);
        assert_eq!(recoveries(&r), 1, "{mode} {kill}: {}", r.stderr);
        assert_eq!(result(&r, "energy per atom"), clean, "{mode} {kill}");
    }
}

/// A program of sessions alone (tests/c/sessions_stages.c: the minimal
/// program with MPI_Session_init and a communicator of the WORLD process
/// set, protected): the failure-free sum after a rank is killed, and a
/// clean end at exit.
#[test]
fn a_session_program_recovers_under_stages() {
    let exe = build("sessions_stages.c");
    let exe = exe.to_str().unwrap();
    let sum = |r: &Run| -> String {
        let line = r.stdout.lines().find(|l| l.starts_with("sessions_stages:"));
        line.unwrap_or_else(|| panic!("no sum\n{}\n{}", r.stdout, r.stderr))
            .to_string()
    };
    let clean = mpiexec(&["-n", "4", exe], &[], LIMIT);
    assert!(clean.ok(), "{}", clean.stderr);
    assert!(sum(&clean).contains("60 steps"), "{}", clean.stdout);
    for kill in ["rank=2,checkpoint=3", "rank=1,call=MPI_Allreduce:15"] {
        let hurt = run(exe, 4, "stages", &[kill.to_string()], &[]);
        assert!(hurt.ok(), "{kill}: {}", hurt.stderr);
        assert!(
            hurt.stderr.contains("mpiexec: recovery 1 done"),
            "{kill}: {}",
            hurt.stderr
        );
        assert_eq!(sum(&clean), sum(&hurt), "{kill}: {}", hurt.stderr);
    }
}

/// examples/minimal_resilient.c, the README's skeleton: the failure-free
/// sum after a rank is killed — after its third checkpoint, and in the
/// middle of a step before the second, and twice in one run — under
/// stages and cpr.
#[test]
fn the_minimal_resilient_program_survives_killed_ranks() {
    let exe = build_example("minimal_resilient.c");
    let exe = exe.to_str().unwrap();
    let sum = |r: &Run| -> String {
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with("minimal_resilient:"));
        line.unwrap_or_else(|| panic!("no sum\n{}\n{}", r.stdout, r.stderr))
            .to_string()
    };
    let clean = mpiexec(&["-n", "4", exe], &[], LIMIT);
    assert!(clean.ok(), "{}", clean.stderr);
    assert!(sum(&clean).contains("60 steps"), "{}", clean.stdout);
    let kills: [&[&str]; 3] = [
        &["rank=2,checkpoint=3"],
        &["rank=1,call=MPI_Allreduce:15"],
        &["rank=0,checkpoint=2", "rank=3,call=MPI_Allreduce:30"],
    ];
    for mode in ["stages", "cpr"] {
        for kill in kills {
            let hurt = run(
                exe,
                4,
                mode,
                &kill.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                &[],
            );
            let done = hurt.stderr.matches("mpiexec: recovery ").count();
            assert!(done >= kill.len(), "{mode} {kill:?}: {}", hurt.stderr);
            assert_eq!(sum(&clean), sum(&hurt), "{mode} {kill:?}: {}", hurt.stderr);
        }
    }
}
