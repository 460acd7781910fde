//! Children started by `spawn`: what they get (arguments, environment,
//! directory, descriptors, group, mask, CPUs), what fails to start, and
//! death with the thread that started them.

use super::*;
use std::io::{Read, Write};

fn output(mut c: Child) -> (String, String, i32) {
    let (mut out, mut err) = (String::new(), String::new());
    c.stdout.read_to_string(&mut out).unwrap();
    c.stderr.read_to_string(&mut err).unwrap();
    (out, err, wait(c.pid))
}

/// The exit code, or 128 + the signal.
fn wait(pid: i32) -> i32 {
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer; `pid` is our child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        libc::WEXITSTATUS(status)
    }
}

fn sh(script: &str) -> Command {
    let mut c = Command::new("sh");
    c.args(["-c", script]);
    c
}

/// A field of the child's /proc/PID/status.
fn status_field(pid: i32, name: &str) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(name))
        .map(|v| v.trim_start_matches(':').trim().to_string())
        .unwrap()
}

#[test]
fn arguments_environment_and_both_outputs_reach_the_child() {
    std::env::set_var("SPAWN_TEST_GONE", "x");
    let mut c = sh("echo \"$0|$FOO|${SPAWN_TEST_GONE-unset}|$#|$1 $2\"; echo oops >&2; exit 7");
    c.args(["prog", "a b", "c"])
        .env("FOO", "first")
        .env("FOO", "bar")
        .env_remove("SPAWN_TEST_GONE");
    let (out, err, code) = output(c.spawn().unwrap());
    assert_eq!(out, "prog|bar|unset|2|a b c\n");
    assert_eq!(err, "oops\n");
    assert_eq!(code, 7);
}

#[test]
fn the_directory_and_stdin_are_the_childs() {
    let dir = std::env::temp_dir().canonicalize().unwrap();
    let mut c = sh("pwd; cat");
    c.current_dir(&dir).stdin(Stdin::Piped);
    let mut child = c.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(b"through the pipe\n").unwrap();
    drop(input);
    let (out, _, code) = output(child);
    assert_eq!(out, format!("{}\nthrough the pipe\n", dir.display()));
    assert_eq!(code, 0);
    // /dev/null by default: cat ends at once.
    let (out, _, code) = output(sh("cat; echo end").spawn().unwrap());
    assert_eq!((out.as_str(), code), ("end\n", 0));
}

#[test]
fn a_program_not_found_or_not_executable_is_an_error_and_no_process() {
    let e = Command::new("no-such-program-anywhere")
        .spawn()
        .err()
        .unwrap();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    let e = Command::new("/no/such/dir/prog").spawn().err().unwrap();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    // A file that is not executable.
    let path = std::env::temp_dir().join(format!("spawn-test-{}", std::process::id()));
    std::fs::write(&path, "#!/bin/sh\n").unwrap();
    let e = Command::new(&path).spawn().err().unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
    let e = Command::new("/tmp")
        .current_dir("/no/such/dir")
        .spawn()
        .err()
        .unwrap();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
}

#[test]
fn the_child_leads_its_group_with_no_signal_blocked_and_sigpipe_default() {
    // Block one signal here: the child must not inherit it.
    // SAFETY: sigset_t is plain data; valid pointers to it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR2);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let mut c = Command::new("sleep");
    c.args(["30"]).cpus(&[0]);
    let child = c.spawn().unwrap();
    let pid = child.pid;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    assert_eq!(fields[2], pid.to_string(), "process group");
    assert_eq!(status_field(pid, "SigBlk"), "0000000000000000");
    let ignored = u64::from_str_radix(&status_field(pid, "SigIgn"), 16).unwrap();
    assert_eq!(ignored & (1 << (libc::SIGPIPE - 1)), 0, "SIGPIPE ignored");
    assert_eq!(status_field(pid, "Cpus_allowed_list"), "0");
    // SAFETY: signals our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    assert_eq!(wait(pid), 128 + libc::SIGKILL);
}

#[test]
fn a_kept_descriptor_reaches_the_child_and_no_other() {
    let file = File::open("/dev/zero").unwrap();
    let fd = file.as_raw_fd();
    let script = format!("readlink /proc/self/fd/{fd} || echo closed");
    let mut c = sh(&script);
    c.keep_fd(fd);
    let (out, _, _) = output(c.spawn().unwrap());
    assert_eq!(out, "/dev/zero\n");
    let (out, _, _) = output(sh(&script).spawn().unwrap());
    assert_eq!(out, "closed\n");
}

#[test]
fn the_child_dies_with_the_thread_that_started_it() {
    let pid = std::thread::spawn(|| {
        let mut c = Command::new("sleep");
        c.args(["30"]);
        c.spawn().unwrap().pid
    })
    .join()
    .unwrap();
    assert_eq!(wait(pid), 128 + libc::SIGKILL);
}
