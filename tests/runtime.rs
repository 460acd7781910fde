//! How mpiexec runs and ends jobs: exit statuses, failure messages,
//! MPI_Abort, fatal errors, signals, arguments, environment, output
//! tagging, idle CPU use. Real processes, real signals.

mod common;
use common::{bin, build, mpiexec};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// A marker unique to one job, passed as an extra argument, so a test can
/// look for its own processes while other tests run theirs.
fn marker(mode: &str) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("job-{}-{k}-{mode}", std::process::id())
}

/// Runs behave.c; returns the result and the job's marker.
fn behave(np: usize, mode: &str) -> (common::Run, String) {
    let exe = build("behave.c");
    let n = np.to_string();
    let m = marker(mode);
    (
        mpiexec(&["-n", &n, exe.to_str().unwrap(), mode, &m], &[], LIMIT),
        m,
    )
}

/// No process of the job with this marker may outlive it.
fn assert_no_leftovers(marker: &str) {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let has = cmd.split(|&b| b == 0).any(|a| a == marker.as_bytes());
        assert!(
            !has,
            "a process of job {marker} is still running: pid {:?}",
            entry.file_name()
        );
    }
}

#[test]
fn killed_rank_ends_the_job_with_its_signal() {
    let (r, m) = behave(4, "kill");
    assert_eq!(r.code(), Some(128 + 9), "stderr: {}", r.stderr);
    assert!(
        r.stderr.contains("rank 3") && r.stderr.contains("SIGKILL"),
        "stderr: {}",
        r.stderr
    );
    assert_no_leftovers(&m);
}

#[test]
fn exit_status_is_passed_on() {
    let (r, m) = behave(3, "exit7");
    assert_eq!(r.code(), Some(7), "stderr: {}", r.stderr);
    assert!(
        r.stderr.contains("rank 2") && r.stderr.contains("status 7"),
        "stderr: {}",
        r.stderr
    );
    assert_no_leftovers(&m);
}

#[test]
fn exit_without_finalize_is_a_failure() {
    let (r, m) = behave(2, "nofinalize");
    assert!(!r.ok());
    assert!(
        r.stderr.contains("rank 1") && r.stderr.contains("without calling MPI_Finalize"),
        "stderr: {}",
        r.stderr
    );
    assert_no_leftovers(&m);
}

#[test]
fn mpi_abort_gives_its_code_and_keeps_output() {
    let (r, m) = behave(3, "abort");
    assert_eq!(r.code(), Some(5), "stderr: {}", r.stderr);
    assert!(
        r.stderr
            .contains("rank 2 called MPI_Abort with error code 5"),
        "stderr: {}",
        r.stderr
    );
    assert!(
        r.stdout.contains("about to abort"),
        "output before MPI_Abort was lost: {}",
        r.stdout
    );
    assert_no_leftovers(&m);
}

#[test]
fn fatal_error_handler_names_the_error() {
    let (r, m) = behave(2, "fatal");
    assert!(!r.ok());
    assert!(
        r.stderr.contains("MPI_Send") && r.stderr.contains("MPI_ERR_RANK"),
        "stderr: {}",
        r.stderr
    );
    assert_no_leftovers(&m);
}

#[test]
fn sigterm_tears_the_job_down() {
    let exe = build("behave.c");
    let m = marker("hang");
    let child = common::command(bin("mpiexec"))
        .args(["-n", "3", exe.to_str().unwrap(), "hang", &m])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    // SAFETY: kill takes no pointers; this is the mpiexec we just started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(128 + 15));
    assert!(String::from_utf8_lossy(&out.stderr).contains("SIGTERM"));
    assert_no_leftovers(&m);
}

/// `MPIEXEC_TIMEOUT` (as MPICH's and Open MPI's mpiexec honour it) and
/// `--timeout` end a job that runs too long: exit status 124, a message,
/// nothing left behind. A bad value is refused before anything starts.
#[test]
fn a_time_limit_ends_a_hung_job() {
    let exe = build("behave.c");
    let m = marker("hang");
    let r = mpiexec(
        &["-n", "3", exe.to_str().unwrap(), "hang", &m],
        &[("MPIEXEC_TIMEOUT", "1")],
        LIMIT,
    );
    assert_eq!(r.code(), Some(124), "stderr: {}", r.stderr);
    assert!(
        r.stderr.contains("time limit of 1 s"),
        "stderr: {}",
        r.stderr
    );
    assert_no_leftovers(&m);
    let m = marker("hang");
    let r = mpiexec(
        &[
            "--timeout",
            "0.5",
            "-n",
            "2",
            exe.to_str().unwrap(),
            "hang",
            &m,
        ],
        &[("MPIEXEC_TIMEOUT", "100")],
        LIMIT,
    );
    assert_eq!(r.code(), Some(124), "the option wins: {}", r.stderr);
    assert_no_leftovers(&m);
    let r = mpiexec(
        &["-n", "1", exe.to_str().unwrap(), "args"],
        &[("MPIEXEC_TIMEOUT", "soon")],
        LIMIT,
    );
    assert!(
        !r.ok() && r.stderr.contains("MPIEXEC_TIMEOUT needs seconds"),
        "stderr: {}",
        r.stderr
    );
}

#[test]
fn arguments_environment_and_tags() {
    let exe = build("behave.c");
    let r = mpiexec(
        &[
            "-np",
            "2",
            "--tag-output",
            "-x",
            "BEHAVE_VAR=hello world",
            exe.to_str().unwrap(),
            "args",
            "a b",
            "-n",
            "3",
        ],
        &[],
        LIMIT,
    );
    assert!(r.ok(), "stderr: {}", r.stderr);
    for rank in 0..2 {
        let line = format!("<stdout>:rank {rank} args: [a b] [-n] [3] env=hello world");
        assert!(
            r.stdout
                .lines()
                .any(|l| l.ends_with(&line) && l.contains(&format!(",{rank}]"))),
            "missing {line:?} in:\n{}",
            r.stdout
        );
    }
}

#[test]
fn idle_ranks_sleep() {
    // 8 ranks oversubscribe this machine (no polling at all); 2 ranks fit
    // on its cores, so waits poll briefly before they sleep.
    for np in [8, 2] {
        let (r, _) = behave(np, "idle");
        assert!(
            r.ok() && r.stdout.contains("OK behave"),
            "{np} ranks\nstdout: {}\nstderr: {}",
            r.stdout,
            r.stderr
        );
    }
}

#[test]
fn usage_errors_and_missing_programs() {
    // A usage error is its line and where the help is, not the help.
    let r = mpiexec(&["-n", "2"], &[], LIMIT);
    assert_eq!(r.code(), Some(2));
    assert_eq!(
        r.stderr,
        "mpiexec: no program given\nRun 'mpiexec --help' for its options.\n"
    );
    let r = mpiexec(&["--bogus", "-n", "2", "true"], &[], LIMIT);
    assert_eq!(r.code(), Some(2));
    assert!(
        r.stderr.starts_with("mpiexec: unknown option '--bogus'\n"),
        "{}",
        r.stderr
    );
    // Last on the line, an unknown option is still unknown (it was "needs
    // a value"), and a known one says what it lacks.
    let r = mpiexec(&["-n", "2", "--bogus"], &[], LIMIT);
    assert!(
        r.stderr.starts_with("mpiexec: unknown option '--bogus'\n"),
        "{}",
        r.stderr
    );
    let r = mpiexec(&["-n", "2", "true", ":", "-n"], &[], LIMIT);
    assert!(
        r.stderr.starts_with("mpiexec: option -n needs a value\n"),
        "{}",
        r.stderr
    );
    // With standard error closed: the same exit status, no panic.
    let out = common::command("sh")
        .args(["-c", "exec 2>&-; \"$0\" --bogus -n 1 true"])
        .arg(bin("mpiexec"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let r = mpiexec(&["-n", "2", "/nonexistent/program"], &[], LIMIT);
    assert_eq!(r.code(), Some(127));
    assert!(r.stderr.contains("cannot start"), "stderr: {}", r.stderr);
    let r = mpiexec(&["--help"], &[], LIMIT);
    assert!(r.ok() && r.stdout.contains("--tag-output"));
}

/// The output and binding options users know from Open MPI and MPICH.
#[test]
fn output_and_binding_options_of_other_mpis() {
    // MPICH's -l: "[rank] " before each line; -genvall is accepted.
    let r = mpiexec(&["-genvall", "-l", "-n", "2", "echo", "hi"], &[], LIMIT);
    assert!(r.ok(), "{}", r.stderr);
    let mut lines: Vec<&str> = r.stdout.lines().collect();
    lines.sort();
    assert_eq!(lines, ["[0] hi", "[1] hi"]);
    // Open MPI's --output-filename: a file per rank and stream; with
    // :nocopy nothing on the terminal.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let spec = format!("{}:nocopy", dir.display());
    let script = "echo out $MPISTAGES_RANK; echo err >&2";
    let args = ["--output-filename", &spec, "-n", "2", "sh", "-c", script];
    let r = mpiexec(&args, &[], LIMIT);
    assert!(r.ok() && r.stdout.is_empty(), "{}\n{}", r.stdout, r.stderr);
    for rank in 0..2 {
        let d = dir.join(format!("1/rank.{rank}"));
        let read = |n| std::fs::read_to_string(d.join(n)).unwrap();
        assert_eq!(read("stdout"), format!("out {rank}\n"));
        assert_eq!(read("stderr"), "err\n");
    }
    // Without :nocopy, also on the terminal.
    let args = [
        "--output-filename",
        dir.to_str().unwrap(),
        "-n",
        "1",
        "echo",
        "again",
    ];
    let r = mpiexec(&args, &[], LIMIT);
    assert_eq!(r.stdout, "again\n");
    let again = std::fs::read_to_string(dir.join("1/rank.0/stdout")).unwrap();
    assert_eq!(again, "out 0\nagain\n");
    // --report-bindings, bound and not.
    for (bind, says) in [
        ("core", "bound to CPUs"),
        ("socket", "bound to CPUs"),
        ("none", "not bound"),
    ] {
        let args = ["--report-bindings", "--bind-to", bind, "-n", "2", "true"];
        let r = mpiexec(&args, &[], LIMIT);
        assert!(r.ok(), "{}", r.stderr);
        for rank in 0..2 {
            let line = format!("mpiexec: rank {rank} on this host: {says}");
            assert!(r.stderr.contains(&line), "--bind-to {bind}: {}", r.stderr);
        }
    }
}

#[test]
fn non_mpi_programs_run() {
    let r = mpiexec(&["-n", "3", "echo", "hi"], &[], LIMIT);
    assert!(r.ok(), "stderr: {}", r.stderr);
    assert_eq!(r.stdout.lines().filter(|l| *l == "hi").count(), 3);
}

#[test]
fn wrappers_show_their_command() {
    let out = common::command(bin("mpicc"))
        .args(["-show", "x.c"])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("x.c") && s.contains("-lmpistages") && s.contains("/include"),
        "{s}"
    );
    let out = common::command(bin("mpicxx"))
        .args(["-show", "-c", "x.cpp"])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.contains("-c") && !s.contains("-lmpistages"),
        "compile-only must not link: {s}"
    );
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut c = common::command(bin("mpicc"));
        c.args(args).env_remove("MPISTAGES_CC");
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    // Open MPI's -showme:version; the compiler from Open MPI's and MPICH's
    // variables and MPICH's -cc=.
    let (_, s, _) = run(&["-showme:version"], &[]);
    assert!(
        s.starts_with("mpicc: mpistages ") && s.contains("MPI 4.0") && s.contains("Language: C"),
        "{s}"
    );
    let (_, s, _) = run(&["-show", "x.c"], &[("OMPI_CC", "gcc")]);
    assert!(s.starts_with("gcc "), "{s}");
    let (_, s, _) = run(&["-show", "x.c"], &[("MPICH_CC", "clang")]);
    assert!(s.starts_with("clang "), "{s}");
    let (_, s, _) = run(&["-cc=tcc", "-show", "x.c"], &[("OMPI_CC", "gcc")]);
    assert!(s.starts_with("tcc ") && !s.contains("-cc="), "{s}");
    // Nothing to compile: the compiler says so; no link of a program
    // without main. Questions to the compiler get its answer.
    let (code, _, err) = run(&[], &[]);
    assert!(code == Some(1) && err.contains("no input files"), "{err}");
    assert!(!err.contains("undefined reference"), "{err}");
    let (code, s, _) = run(&["-dumpversion"], &[]);
    assert!(code == Some(0) && !s.trim().is_empty(), "{s}");
}

/// An `--inject` spec that never fires is reported with the reason, and a
/// job that succeeded without the failure asked for exits with status 3
/// (it used to end with 0 and no word).
#[test]
fn injections_that_never_fire_are_reported() {
    let exe = build("plain.c");
    let r = mpiexec(
        &[
            "-n",
            "2",
            "--recovery",
            "stages",
            "--inject",
            "rank=1,call=MPI_Bcast:1",
            "--inject",
            "rank=0,checkpoint=3",
            "--inject",
            "rank=1,after=3000",
            exe.to_str().unwrap(),
        ],
        &[],
        LIMIT,
    );
    assert_eq!(r.code(), Some(3), "{}", r.stderr);
    for line in [
        "--inject rank=1,call=MPI_Bcast:1 never fired: rank 1 did not make 1 calls of MPI_Bcast",
        "--inject rank=0,checkpoint=3 never fired: rank 0 never wrote checkpoint epoch 3",
        "--inject rank=1,after=3000 never fired: the job ended",
        "the job succeeded without the failure asked for",
    ] {
        assert!(r.stderr.contains(line), "{line}\n{}", r.stderr);
    }
    assert!(r.stdout.contains("plain: sum"), "{}", r.stdout);
}

/// A rank killed after its MPI_Finalize under a recovery mode cannot be
/// recovered (it will never roll back): the job ends and mpiexec says why,
/// in the words of the other unrecoverable cases (found by the campaign
/// under load: a timed kill landed in md's MPI_Finalize and mpiexec only
/// said "terminating the job").
#[test]
fn a_rank_killed_after_finalize_is_explained() {
    let exe = build("after_finalize.c");
    let r = mpiexec(
        &[
            "-n",
            "2",
            "--recovery",
            "stages",
            "--inject",
            "rank=1,after=4",
            exe.to_str().unwrap(),
        ],
        &[],
        LIMIT,
    );
    assert!(!r.ok(), "{}", r.stderr);
    assert!(r.stdout.contains("OK after_finalize"), "{}", r.stdout);
    assert!(
        r.stderr.contains(
            "was killed by signal 9 (SIGKILL) after it called MPI_Finalize; cannot recover: a rank that has already called MPI_Finalize cannot take part in a recovery"
        ),
        "{}",
        r.stderr
    );
}

/// MPI_Finalize holds every rank until the last one comes (rank 0, a
/// second late), and its barrier goes through mpiexec: ranks that never
/// talked make no connection for it (it was an allreduce among the ranks,
/// log2(ranks) connections each at the end of every job).
#[test]
fn finalize_waits_for_every_rank_without_connecting_them() {
    let exe = build("finalize_wait.c");
    let r = mpiexec(
        &["-n", "4", exe.to_str().unwrap()],
        &[("MPISTAGES_LOG", "debug")],
        LIMIT,
    );
    assert!(r.ok(), "{}", r.stderr);
    for rank in 1..4 {
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("rank {rank} waited")))
            .unwrap_or_else(|| panic!("no line of rank {rank}:\n{}", r.stdout));
        let waited: f64 = line.split(' ').nth(3).unwrap().parse().unwrap();
        assert!(
            waited > 0.5,
            "rank {rank} left MPI_Finalize before rank 0 came: {line}"
        );
    }
    assert!(
        !r.stderr.contains("connected to rank"),
        "a connection was made:\n{}",
        r.stderr
    );
}

/// The line rank `r` of whoami.c printed.
fn whoami_line(out: &str, r: usize) -> &str {
    let head = format!("rank {r} of ");
    out.lines()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no line of rank {r}:\n{out}"))
}

/// MPMD: two programs (here one binary with two tags and directories)
/// form one job; each has its own ranks, arguments, `-env` and `-wdir`,
/// and `-genv` reaches both.
#[test]
fn several_programs_make_one_job() {
    let exe = build("whoami.c");
    let exe = exe.to_str().unwrap();
    let dir = common::Scratch::new("mpmd");
    let r = mpiexec(
        &[
            "-genv",
            "MPMD_ALL",
            "all",
            "-n",
            "2",
            "-env",
            "MPMD_A",
            "a",
            exe,
            "A",
            "MPMD_A",
            ":",
            "-n",
            "1",
            "-wdir",
            dir.path(),
            exe,
            "B",
            "MPMD_ALL",
        ],
        &[],
        LIMIT,
    );
    assert!(r.ok(), "{}", r.stderr);
    for k in 0..2 {
        let l = whoami_line(&r.stdout, k);
        assert!(l.contains(" of 3: A ") && l.contains("var=a"), "{l}");
    }
    let l = whoami_line(&r.stdout, 2);
    assert!(
        l.contains(" of 3: B ")
            && l.contains(&format!("cwd={} ", dir.path()))
            && l.contains("var=all"),
        "{l}"
    );
}

/// The CPUs the test itself may use, as /proc/self/status lists them.
fn my_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().unwrap()..=b.parse().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

/// `--bind-to core` puts each rank on one core, in turn over the cores
/// mpiexec may use, as the kernel reports it to the rank; by default ranks
/// that fit the cores get a share each.
#[test]
fn bind_to_core_is_real_affinity() {
    let exe = build("whoami.c");
    let cpus = my_cpus();
    let n = cpus.len() + 1;
    let n_s = n.to_string();
    let r = mpiexec(
        &[
            "--bind-to",
            "core",
            "-n",
            &n.to_string(),
            exe.to_str().unwrap(),
            "X",
            "-",
        ],
        &[],
        LIMIT,
    );
    assert!(r.ok(), "{}", r.stderr);
    for k in 0..n {
        let l = whoami_line(&r.stdout, k);
        let want = format!("cpus={}", cpus[k % cpus.len()]);
        assert!(l.ends_with(&want), "rank {k}: {l}, want {want}");
    }
    let all = std::fs::read_to_string("/proc/self/status").unwrap();
    let all = all
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    // By default, ranks that fit the cores get their share of them: one
    // rank all of them, as many ranks as cores one each.
    let r = mpiexec(&["-n", "1", exe.to_str().unwrap(), "X", "-"], &[], LIMIT);
    assert!(r.ok(), "{}", r.stderr);
    let l = whoami_line(&r.stdout, 0);
    assert!(l.ends_with(&format!("cpus={all}")), "{l}, want {all}");
    let fit = cpus.len().to_string();
    let r = mpiexec(&["-n", &fit, exe.to_str().unwrap(), "X", "-"], &[], LIMIT);
    assert!(r.ok(), "{}", r.stderr);
    for (k, cpu) in cpus.iter().enumerate() {
        let l = whoami_line(&r.stdout, k);
        assert!(
            l.ends_with(&format!("cpus={cpu}")),
            "rank {k}: {l}, want {cpu}"
        );
    }
    // More ranks than cores, or --bind-to none: every CPU mpiexec may use.
    for args in [
        vec!["-n", &n_s, "--oversubscribe"],
        vec!["--bind-to", "none", "-n", &fit],
    ] {
        let mut args = args.clone();
        args.extend([exe.to_str().unwrap(), "X", "-"]);
        let r = mpiexec(&args, &[], LIMIT);
        assert!(r.ok(), "{}", r.stderr);
        let l = whoami_line(&r.stdout, 0);
        assert!(
            l.ends_with(&format!("cpus={all}")),
            "{args:?}: {l}, want {all}"
        );
    }
}

/// Hosts and slots: a job that does not fit is refused unless
/// oversubscribed; a hostfile in either form is read; another machine that
/// cannot be reached is explained.
#[test]
fn slots_are_enforced_and_hostfiles_read() {
    let exe = build("whoami.c");
    let exe = exe.to_str().unwrap();
    let r = mpiexec(
        &["--host", "localhost:2", "-n", "3", exe, "X", "-"],
        &[],
        LIMIT,
    );
    assert_eq!(r.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("3 ranks asked for but the hosts have 2 slots (localhost:2)"),
        "{}",
        r.stderr
    );
    let r = mpiexec(
        &[
            "--host",
            "localhost:2",
            "--oversubscribe",
            "-n",
            "3",
            exe,
            "X",
            "-",
        ],
        &[],
        LIMIT,
    );
    assert!(r.ok(), "{}", r.stderr);
    let dir = common::Scratch::new("hostfile");
    let hf = dir.0.join("hosts");
    std::fs::write(
        &hf,
        "# this machine twice\nlocalhost slots=2\n127.0.0.1:1\n",
    )
    .unwrap();
    let r = mpiexec(
        &["--hostfile", hf.to_str().unwrap(), "-n", "3", exe, "X", "-"],
        &[],
        LIMIT,
    );
    assert!(r.ok(), "{}", r.stderr);
    assert_eq!(
        r.stdout.lines().filter(|l| l.starts_with("rank ")).count(),
        3
    );
    std::fs::write(&hf, "localhost slots=2 cpus=4\n").unwrap();
    let r = mpiexec(
        &["--hostfile", hf.to_str().unwrap(), "-n", "1", exe],
        &[],
        LIMIT,
    );
    assert_eq!(r.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("hosts:1: unknown word 'cpus=4'"),
        "{}",
        r.stderr
    );
    // Another machine: without a route to it, mpiexec says what to give.
    let r = mpiexec(&["--host", "node7:4", "-n", "1", exe], &[], LIMIT);
    assert_eq!(r.code(), Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("toward host 'node7'") && r.stderr.contains("--control-addr"),
        "{}",
        r.stderr
    );
}

/// A rank that dies of a fault says where, on its standard error, before it
/// dies of the signal (found hunting a SIGSEGV the campaign saw once and no
/// core kept): signal, address, thread, backtrace; mpiexec still reports
/// the signal. `MPISTAGES_BACKTRACE=0` turns the report off.
#[test]
fn a_rank_that_faults_says_where() {
    let exe = build("faults.c");
    for (how, thread) in [("main", "faults"), ("thread", "worker")] {
        let r = mpiexec(&["-n", "2", exe.to_str().unwrap(), how], &[], LIMIT);
        assert!(!r.ok(), "{}", r.stderr);
        for line in [
            "mpistages: rank 1 (pid ".to_string(),
            format!(", thread {thread}) received SIGSEGV (segmentation fault) at address 0x0 (address not mapped); backtrace"),
            "was killed by signal 11 (SIGSEGV)".to_string(),
        ] {
            assert!(r.stderr.contains(&line), "{how}: {line}\n{}", r.stderr);
        }
        // At least the faulting function's frame in the program and one in
        // the C library, as file(+offset) or file(symbol+offset).
        let frames: Vec<&str> = r.stderr.lines().filter(|l| l.contains(")[0x")).collect();
        assert!(
            frames.iter().any(|l| l.contains("/faults(")),
            "{how}: no frame of the program\n{}",
            r.stderr
        );
    }
    let r = mpiexec(
        &["-n", "2", exe.to_str().unwrap()],
        &[("MPISTAGES_BACKTRACE", "0")],
        LIMIT,
    );
    assert!(
        r.stderr.contains("was killed by signal 11 (SIGSEGV)"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("received SIGSEGV"), "{}", r.stderr);
}
