//! mpi4py, built from its source against this build as the README says
//! (`MPICC=.../mpicc pip install --no-binary=mpi4py mpi4py`), runs a job:
//! a reduction over the ranks, a pickled object sent around, and the
//! version and library it reports. The build takes minutes: it is kept
//! under target/ for the next run, as long as mpi.h and the library's
//! location are the same. Without python3's venv and pip, or where PyPI
//! cannot be reached, the test says SKIPPED; a build that fails fails it.

mod common;
use common::{bin, mpiexec};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const MPI4PY: &str = "4.1.2";
const LIMIT: Duration = Duration::from_secs(120);

/// Where the virtual environment is kept, named by what it was built from.
fn venv_dir() -> PathBuf {
    let header = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/include/mpi.h")).unwrap();
    let mut h = crc32fast::Hasher::new();
    h.update(&header);
    h.update(bin("mpicc").to_string_lossy().as_bytes());
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("mpi4py-{MPI4PY}-{:08x}", h.finalize()))
}

fn python_ok(py: &Path, code: &str) -> bool {
    Command::new(py)
        .args(["-c", code])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The environment's python with mpi4py built against us, or why not.
fn mpi4py() -> Result<PathBuf, String> {
    let dir = venv_dir();
    let py = dir.join("bin/python");
    if python_ok(&py, "import mpi4py") {
        return Ok(py);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let venv = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&dir)
        .output();
    if !venv.is_ok_and(|o| o.status.success()) || !python_ok(&py, "import pip") {
        return Err("needs python3 with venv and pip".into());
    }
    let headers = "import os, sysconfig; \
        assert os.path.exists(sysconfig.get_paths()['include'] + '/Python.h')";
    if !python_ok(&py, headers) {
        let _ = std::fs::remove_dir_all(&dir);
        return Err("needs Python's headers to build mpi4py (apt-get install python3-dev)".into());
    }
    let out = Command::new(&py)
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--no-cache-dir",
            "--no-binary=mpi4py",
        ])
        .arg(format!("mpi4py=={MPI4PY}"))
        .env("MPICC", bin("mpicc"))
        .env("PIP_DEFAULT_TIMEOUT", "30")
        .output()
        .map_err(|e| format!("cannot run pip: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
        let offline = [
            "Could not find a version",
            "No matching distribution",
            "connection",
            "Network",
        ]
        .iter()
        .any(|w| err.contains(w));
        if offline {
            return Err(format!(
                "PyPI cannot be reached: {}",
                err.lines().last().unwrap_or("")
            ));
        }
        panic!("mpi4py does not build against mpistages:\n{err}");
    }
    Ok(py)
}

#[test]
fn mpi4py_builds_and_runs_a_job() {
    let py = match mpi4py() {
        Ok(py) => py,
        Err(why) => {
            common::skipped(&why);
            return;
        }
    };
    let script = r#"
from mpi4py import MPI
c = MPI.COMM_WORLD
r, n = c.Get_rank(), c.Get_size()
total = c.allreduce(r + 1)
got = c.sendrecv({"from": r}, dest=(r + 1) % n, source=(r - 1) % n)
lib = MPI.Get_library_version()
print(f"rank {r}: total {total} got {got['from']} version {MPI.Get_version()} {lib.split()[0]}")
"#;
    let r = mpiexec(&["-n", "3", py.to_str().unwrap(), "-c", script], &[], LIMIT);
    assert!(r.ok(), "{}\n{}", r.stdout, r.stderr);
    for rank in 0..3 {
        let line = format!(
            "rank {rank}: total 6 got {} version (4, 0) mpistages",
            (rank + 2) % 3
        );
        assert!(r.stdout.contains(&line), "{line}\n{}", r.stdout);
    }
}
