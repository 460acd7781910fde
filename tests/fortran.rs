//! Fortran end to end with gfortran: the programs in tests/fortran (one per
//! binding group, `use mpi`, `include 'mpif.h'` in free and fixed form)
//! compiled with our `mpifort` and run at 1-4 ranks, `mpifort -show`, and
//! the Fortran heat examples surviving SIGKILLed ranks under
//! `--recovery stages` with the checksum of the failure-free run.
//!
//! Without gfortran these tests say SKIPPED (on stderr, past the test
//! harness's capture); with CI set (.ci/run installs gfortran) they fail.

mod common;
use common::{bin, checksum, mpiexec, out_dir, Run};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn have_gfortran() -> bool {
    let fc = std::env::var("MPISTAGES_FC").unwrap_or_else(|_| "gfortran".into());
    if Command::new(&fc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{fc} is not installed (.ci/run installs gfortran)"
    );
    common::skipped("the Fortran tests need gfortran (apt-get install gfortran)");
    false
}

/// Compiles `sources` (relative to the repository) into one program named
/// `name`, once per test process; its modules go to its own directory.
fn build(name: &str, sources: &[&str]) -> PathBuf {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    let dir = out_dir().join(format!("fortran-{name}"));
    let exe = dir.join(name);
    if built.iter().any(|n| n == name) {
        return exe;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = common::command(bin("mpifort"))
        .args(["-O1", "-g", "-J"])
        .arg(&dir)
        .args(sources.iter().map(|s| root.join(s)))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run mpifort");
    assert!(
        out.status.success(),
        "compiling {name} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    built.push(name.to_string());
    exe
}

/// A test program of tests/fortran (built with the shared `checks` module).
fn test_program(file: &str) -> PathBuf {
    let name = file.split('.').next().unwrap();
    build(
        name,
        &["tests/fortran/checks.f90", &format!("tests/fortran/{file}")],
    )
}

/// Runs a test program at 1-4 ranks: every rank's checks must pass, and
/// at least `min_checks` per rank must have run.
fn passes_at_1_to_4(file: &str, min_checks: usize) {
    if !have_gfortran() {
        return;
    }
    let exe = test_program(file);
    let name = exe.file_name().unwrap().to_string_lossy().into_owned();
    for np in 1..=4 {
        // Where a program may write files (MPI-IO); one per test, as the
        // tests of this process run side by side.
        let dir = common::Scratch::new(&format!("fortran-files-{name}"));
        let env = [("FILE_TEST_DIR", dir.path())];
        let r = mpiexec(&["-n", &np.to_string(), exe.to_str().unwrap()], &env, LIMIT);
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("OK {name} ")));
        assert!(
            r.ok() && line.is_some(),
            "{name} at {np} ranks: {:?}\nstdout:\n{}\nstderr:\n{}",
            r.status,
            r.stdout,
            r.stderr
        );
        let n: usize = line
            .unwrap()
            .split(['(', ' '])
            .nth(3)
            .and_then(|x| x.parse().ok())
            .unwrap_or(0);
        assert!(
            n >= min_checks * np,
            "{name} at {np} ranks ran only {n} checks: {}",
            r.stdout
        );
        assert!(!r.stdout.contains("FAIL"), "{}", r.stdout);
    }
}

#[test]
fn point_to_point() {
    passes_at_1_to_4("p2p.f90", 30);
}

#[test]
fn collectives() {
    passes_at_1_to_4("coll.f90", 20);
}

#[test]
fn communicators_groups_and_strings_through_mpif_h() {
    passes_at_1_to_4("comms.f90", 20);
}

#[test]
fn datatypes() {
    passes_at_1_to_4("dtypes.f90", 35);
}

/// Topologies, non-blocking and persistent collectives, matched probe,
/// Comm_split_type, inter-communicators, info and error classes.
#[test]
fn beyond_the_proxy_subset() {
    passes_at_1_to_4("coverage.f90", 23);
}

#[test]
fn errors_return_their_class_in_fixed_form() {
    passes_at_1_to_4("errors.f", 19);
}

#[test]
fn checkpoint_extensions_protect_route_and_restore() {
    passes_at_1_to_4("mpix.f90", 18);
}

#[test]
fn errors_are_fatal_by_default() {
    if !have_gfortran() {
        return;
    }
    let exe = test_program("errors.f");
    let r = mpiexec(&["-n", "2", exe.to_str().unwrap(), "fatal"], &[], LIMIT);
    assert!(!r.ok(), "the job did not fail:\n{}", r.stdout);
    assert!(
        r.stderr.contains("MPI_Send: MPI_ERR_RANK") && !r.stdout.contains("NOT REACHED"),
        "{}",
        r.stderr
    );
}

#[test]
fn mpifort_show_names_the_compiler_the_header_and_the_module() {
    if !have_gfortran() {
        return;
    }
    let out = common::command(bin("mpifort"))
        .args(["-show", "x.f90"])
        .output()
        .unwrap();
    let cmd = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{cmd}");
    let words: Vec<&str> = cmd.split_whitespace().collect();
    assert!(words[0].ends_with("gfortran"), "{cmd}");
    let dirs: Vec<&str> = words.iter().filter_map(|w| w.strip_prefix("-I")).collect();
    assert!(
        dirs.iter().any(|d| Path::new(d).join("mpif.h").exists()),
        "{cmd}"
    );
    assert!(
        dirs.iter().any(|d| Path::new(d).join("mpi.mod").exists()),
        "{cmd}"
    );
    assert!(
        words.contains(&"x.f90") && words.contains(&"-lmpistages"),
        "{cmd}"
    );
}

fn heat(name: &str) -> PathBuf {
    build(name, &[&format!("examples/fortran/{name}.f90")])
}

fn run_heat(exe: &Path, np: usize, injects: &[&str]) -> Run {
    let n = np.to_string();
    let mut a = vec!["-n", n.as_str(), "--recovery", "stages"];
    for i in injects {
        a.extend(["--inject", i]);
    }
    a.extend([exe.to_str().unwrap(), "96", "120", "10"]);
    let r = mpiexec(&a, &[], LIMIT);
    assert!(
        r.ok(),
        "{a:?}: {:?}\nstdout:\n{}\nstderr:\n{}",
        r.status,
        r.stdout,
        r.stderr
    );
    r
}

/// The failure-free checksum, and the same one after every injection.
fn heat_survives(name: &str, np: usize, injects: &[&[&str]]) {
    let exe = heat(name);
    let clean = run_heat(&exe, np, &[]);
    assert!(!clean.stderr.contains("rolled back"), "{}", clean.stderr);
    for inj in injects {
        let hurt = run_heat(&exe, np, inj);
        assert!(
            hurt.stderr.contains(" done: ranks"),
            "no recovery with {inj:?}:\n{}",
            hurt.stderr
        );
        assert!(hurt.stderr.contains("rolled back"), "{}", hurt.stderr);
        assert_eq!(
            checksum(&clean),
            checksum(&hurt),
            "{inj:?}\n{}",
            hurt.stderr
        );
    }
}

#[test]
fn heat_mpif_h_survives_killed_ranks() {
    if !have_gfortran() {
        return;
    }
    heat_survives(
        "heat",
        4,
        &[
            &["rank=2,call=MPI_Allreduce:35"],
            &[
                "rank=0,call=MPI_Sendrecv:101",
                "rank=3,call=MPIX_Checkpoint_write:9",
            ],
        ],
    );
}

#[test]
fn heat_use_mpi_library_handles_survive_killed_ranks() {
    if !have_gfortran() {
        return;
    }
    heat_survives(
        "heat_lib",
        3,
        &[
            &["rank=1,call=MPI_Sendrecv:77"],
            &["rank=2,call=MPIX_Checkpoint_write:4"],
        ],
    );
}

#[test]
fn heat_variants_compute_the_same_plate() {
    if !have_gfortran() {
        return;
    }
    let a = checksum(&run_heat(&heat("heat"), 2, &[]));
    let b = checksum(&run_heat(&heat("heat_lib"), 2, &[]));
    let numbers = |s: &str| s.split_whitespace().skip(2).collect::<Vec<_>>().join(" ");
    assert_eq!(numbers(&a), numbers(&b));
}

/// Every binding of the table, hand-written ones included, is exported by
/// the library under gfortran's names (`mpi_x_` and `pmpi_x_`).
#[test]
fn every_binding_is_exported_with_gfortran_names() {
    let dir = bin("mpiexec").parent().unwrap().to_path_buf();
    let lib = [
        dir.join("libmpistages.so"),
        dir.join("deps/libmpistages.so"),
    ]
    .into_iter()
    .filter(|p| p.exists())
    // `cargo test` refreshes the one in deps/ only: the newest is this build's.
    .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
    .expect("libmpistages.so next to mpiexec");
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("run nm");
    let syms: std::collections::HashSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(String::from))
        .collect();
    let mut names = vec!["mpi_wtime_".to_string(), "mpi_wtick_".to_string()];
    for b in mpistages::abi::fortran::TABLE {
        names.push(format!("{}_", b.name.to_ascii_lowercase()));
    }
    for n in names {
        assert!(syms.contains(&n), "{n} is not exported");
        assert!(syms.contains(&format!("p{n}")), "p{n} is not exported");
    }
}

/// `use mpi_f08`: handle types, TYPE(MPI_Status), optional IERROR, the
/// sentinels, and the common calls.
#[test]
fn the_f08_module_runs_the_common_calls() {
    passes_at_1_to_4("f08.f90", 29);
}

/// ULFM from Fortran under `--with-ft ulfm`: revoke, a real SIGKILL,
/// agree, acknowledge, get_failed, shrink (tests/fortran/ulfm.f90).
/// MPI 4.0 sessions and communicators from groups through `use mpi`.
#[test]
fn sessions_and_communicators_from_groups() {
    passes_at_1_to_4("sessions.f90", 13);
}

#[test]
fn ulfm_calls_from_fortran() {
    if !have_gfortran() {
        return;
    }
    let exe = build("ulfm", &["tests/fortran/ulfm.f90"]);
    let r = mpiexec(
        &["-n", "4", "--with-ft", "ulfm", exe.to_str().unwrap()],
        &[],
        LIMIT,
    );
    let what = format!(
        "{:?}\nstdout:\n{}\nstderr:\n{}",
        r.status, r.stdout, r.stderr
    );
    assert!(r.ok(), "{what}");
    for x in 0..3 {
        assert!(
            r.stdout.contains(&format!("ulfm fortran ok {x}\n")),
            "{what}"
        );
    }
    assert!(!r.stdout.contains("FAIL"), "{what}");
}

/// examples/fortran/minimal_resilient.f90: the sum of the C twin
/// (examples/minimal_resilient.c), without and with killed ranks.
#[test]
fn the_minimal_resilient_program_in_fortran() {
    if !have_gfortran() {
        return;
    }
    let exe = heat("minimal_resilient");
    let exe = exe.to_str().unwrap();
    let c = common::build_example("minimal_resilient.c");
    let c_run = mpiexec(&["-n", "4", c.to_str().unwrap()], &[], LIMIT);
    assert!(c_run.ok(), "{}", c_run.stderr);
    for kill in [
        None,
        Some("rank=2,checkpoint=3"),
        Some("rank=1,call=MPI_Allreduce:15"),
    ] {
        let mut args = vec!["-n", "4", "--recovery", "stages"];
        if let Some(k) = kill {
            args.extend(["--inject", k]);
        }
        args.push(exe);
        let r = mpiexec(&args, &[], LIMIT);
        assert!(r.ok(), "{kill:?}: {}", r.stderr);
        if kill.is_some() {
            assert!(
                r.stderr.contains("recovery 1 done"),
                "{kill:?}: {}",
                r.stderr
            );
        }
        assert_eq!(r.stdout, c_run.stdout, "{kill:?}: {}", r.stderr);
    }
}
