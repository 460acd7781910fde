//! Shared by the integration tests: build C/C++ test programs with our
//! `mpicc`/`mpicxx` and run them with our `mpiexec`, bounded in time, with
//! every process gone when the call returns.

#![allow(dead_code)]

pub mod netns;
pub mod slurm;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub fn bin(name: &str) -> PathBuf {
    match name {
        "mpicc" => PathBuf::from(env!("CARGO_BIN_EXE_mpicc")),
        "mpicxx" => PathBuf::from(env!("CARGO_BIN_EXE_mpicxx")),
        "mpiexec" => PathBuf::from(env!("CARGO_BIN_EXE_mpiexec")),
        "mpifort" => PathBuf::from(env!("CARGO_BIN_EXE_mpifort")),
        "mpistages-bench" => PathBuf::from(env!("CARGO_BIN_EXE_mpistages-bench")),
        "mpistages-agent" => PathBuf::from(env!("CARGO_BIN_EXE_mpistages-agent")),
        "mpistages-ckpt" => PathBuf::from(env!("CARGO_BIN_EXE_mpistages-ckpt")),
        _ => panic!("unknown binary {name}"),
    }
}

/// A command for one of our programs, without the `LD_LIBRARY_PATH` that
/// `cargo test` sets: it names target/release before target/release/deps,
/// so ranks would load whatever libmpistages.so an earlier `cargo build`
/// left there instead of the one this test run built (which the programs'
/// RUNPATH names).
/// Says that the calling test cannot run here and why, where the user
/// sees it: on standard error past the test harness's capture (which
/// hides what a passing test prints), and in the file
/// `MPISTAGES_SKIPPED_LOG` names (scripts/test lists them at its end).
/// The test's name is its thread's, as the harness names it.
pub fn skipped(why: &str) {
    use std::io::Write;
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let line = format!("SKIPPED {test}: {why}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(log) = std::env::var_os("MPISTAGES_SKIPPED_LOG") {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log);
        if let Ok(mut f) = file {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    c.env_remove("LD_LIBRARY_PATH");
    c
}

pub fn out_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mpi-programs");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles `tests/c/<name>` once per test process; returns the executable.
pub fn build(name: &str) -> PathBuf {
    build_from("tests/c", name)
}

/// Compiles `examples/<name>` once per test process.
pub fn build_example(name: &str) -> PathBuf {
    build_from("examples", name)
}

fn build_from(dir: &str, name: &str) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    let key = format!("{dir}/{name}");
    if let Some((_, p)) = built.iter().find(|(n, _)| *n == key) {
        return p.clone();
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join(name);
    let stem = src.file_stem().unwrap().to_string_lossy().into_owned();
    let exe = out_dir().join(&stem);
    let wrapper = if name.ends_with(".cpp") {
        "mpicxx"
    } else {
        "mpicc"
    };
    let out = command(bin(wrapper))
        .args(["-O1", "-g", "-Wall", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(["-lpthread", "-lm"])
        .output()
        .expect("run the compiler wrapper");
    assert!(
        out.status.success(),
        "compiling {name} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    built.push((key, exe.clone()));
    exe
}

/// At most this many jobs run at once, whatever the test threads: the
/// machine has two cores.
const MAX_JOBS: usize = 2;

struct Slots {
    used: Mutex<usize>,
    cv: Condvar,
}

fn slots() -> &'static Slots {
    static S: OnceLock<Slots> = OnceLock::new();
    S.get_or_init(|| Slots {
        used: Mutex::new(0),
        cv: Condvar::new(),
    })
}

struct Slot;

impl Slot {
    fn take() -> Slot {
        let s = slots();
        let mut u = s.used.lock().unwrap_or_else(|p| p.into_inner());
        while *u >= MAX_JOBS {
            u = s.cv.wait(u).unwrap_or_else(|p| p.into_inner());
        }
        *u += 1;
        Slot
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let s = slots();
        *s.used.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        s.cv.notify_one();
    }
}

pub struct Run {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.status.success()
    }
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

/// Runs `mpiexec <args>`; a job still running after `limit` is torn down
/// (SIGTERM to mpiexec, which ends its ranks; SIGKILL if it lingers) and
/// the test fails.
pub fn mpiexec(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Run {
    let _slot = Slot::take();
    let mut cmd = command(bin("mpiexec"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_bounded(cmd, &format!("mpiexec {args:?}"), limit)
}

/// Runs `cmd` with its output captured; one still running after `limit`
/// gets SIGTERM (SIGKILL 5 s later) and the test fails.
pub fn run_bounded(cmd: Command, what: &str, limit: Duration) -> Run {
    run_bounded_with_input(cmd, None, what, limit)
}

/// `run_bounded` with `input` written to the child's stdin (then closed).
pub fn run_bounded_with_input(
    mut cmd: Command,
    input: Option<Vec<u8>>,
    what: &str,
    limit: Duration,
) -> Run {
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"));
    if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(&data);
        });
    }
    finish(child, what, limit)
}

/// Waits for `child` (started with its stdout and stderr piped) and
/// collects its output; one still running after `limit` gets SIGTERM
/// (SIGKILL 5 s later) and the test fails.
pub fn finish(mut child: std::process::Child, what: &str, limit: Duration) -> Run {
    let pid = child.id() as i32;
    let out_pipe = child.stdout.take().unwrap();
    let err_pipe = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || read_all(out_pipe));
    let err_t = std::thread::spawn(move || read_all(err_pipe));
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the child") {
            break s;
        }
        if start.elapsed() > limit && !timed_out {
            timed_out = true;
            unsafe_kill(pid, libc::SIGTERM);
        }
        if timed_out && start.elapsed() > limit + Duration::from_secs(5) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let run = Run {
        status,
        stdout: out_t.join().unwrap(),
        stderr: err_t.join().unwrap(),
    };
    assert!(
        !timed_out,
        "{what} did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    run
}

fn unsafe_kill(pid: i32, sig: i32) {
    // SAFETY: kill takes no pointers; `pid` is the mpiexec child we started.
    unsafe {
        libc::kill(pid, sig);
    }
}

fn read_all(mut r: impl std::io::Read) -> String {
    let mut v = Vec::new();
    let _ = r.read_to_end(&mut v);
    String::from_utf8_lossy(&v).into_owned()
}

/// Runs a test program at `np` ranks and asserts it passed: exit 0 and its
/// "OK <name>" line.
pub fn run_ok(prog: &Path, np: usize, env: &[(&str, &str)]) -> Run {
    let n = np.to_string();
    let p = prog.to_string_lossy().into_owned();
    let r = mpiexec(&["-n", &n, &p], env, Duration::from_secs(120));
    let name = prog.file_name().unwrap().to_string_lossy();
    assert!(
        r.ok() && r.stdout.contains(&format!("OK {name}")),
        "{name} at {np} ranks (env {env:?}) failed with {:?}\nstdout:\n{}\nstderr:\n{}",
        r.status,
        r.stdout,
        r.stderr
    );
    r
}

pub const RANKS: &[usize] = &[1, 2, 3, 4, 7];

/// A directory under the test target's temp dir, unique to this process and
/// tag, empty at the start and removed when the test ends (also when it
/// fails).
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The line of a program's output that holds its checksum.
pub fn checksum(r: &Run) -> String {
    r.stdout
        .lines()
        .find(|l| l.contains("checksum"))
        .unwrap_or_else(|| {
            panic!(
                "no checksum line\nstdout:\n{}\nstderr:\n{}",
                r.stdout, r.stderr
            )
        })
        .to_string()
}

/// A tmpfs of `size` mounted on `dir` for one test, unmounted when
/// dropped. None (after printing SKIPPED) where mounting is not allowed;
/// in CI (root) it must work.
pub struct TmpfsMount(PathBuf);

impl TmpfsMount {
    pub fn new(dir: &Path, size: &str) -> Option<TmpfsMount> {
        let mounted = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .is_ok_and(|st| st.success());
        if !mounted {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must be able to mount a tmpfs (root)"
            );
            skipped("needs permission to mount a tmpfs");
            return None;
        }
        Some(TmpfsMount(dir.to_path_buf()))
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}
