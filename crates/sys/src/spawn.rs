//! Starting a program as a supervised child without copying this process.
//!
//! `fork` copies the caller's memory map (every mapping, every page-table
//! entry): in `mpiexec`, which holds threads, pipes and a liveness page per
//! rank, the n-th start cost O(n) and a launch O(n²) (1024 ranks: 22 s, two
//! thirds of it in the kernel's `copy_page_range` and `dup_mmap`). Here the
//! child borrows the parent's memory (`clone` with `CLONE_VM |
//! CLONE_VFORK`, what `posix_spawn` does), runs a few system calls on a
//! stack of its own while the calling thread waits, and `exec`s. What it
//! does before the `exec` is what every process of a job needs, which
//! `posix_spawn` cannot say all of: its own process group, death with its
//! parent (`PR_SET_PDEATHSIG`), no signal blocked, the default signal
//! dispositions, optionally a CPU set, and one descriptor kept open.
//!
//! The child runs in the parent's memory, so between `clone` and `exec` it
//! only reads what the parent built beforehand and makes system calls: no
//! allocation, no lock, no Rust runtime.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};

use super::cvt;

/// What the child's standard input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stdin {
    /// `/dev/null`.
    Null,
    /// The parent's.
    Inherit,
    /// A pipe from the parent (`Child::stdin`).
    Piped,
}

/// A program to start: its standard output and error always come back
/// through pipes.
pub struct Command {
    program: OsString,
    args: Vec<OsString>,
    /// Set on top of the parent's environment (later entries win).
    set: Vec<(OsString, OsString)>,
    removed: Vec<OsString>,
    cwd: Option<PathBuf>,
    stdin: Stdin,
    cpus: Vec<usize>,
    keep_fd: Option<RawFd>,
}

/// A started child: reap it with `waitpid` (nothing here waits for it).
pub struct Child {
    pub pid: i32,
    pub stdin: Option<File>,
    pub stdout: File,
    pub stderr: File,
}

impl Command {
    pub fn new(program: impl AsRef<OsStr>) -> Command {
        Command {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            set: Vec::new(),
            removed: Vec::new(),
            cwd: None,
            stdin: Stdin::Null,
            cpus: Vec::new(),
            keep_fd: None,
        }
    }

    pub fn args<S: AsRef<OsStr>>(&mut self, args: impl IntoIterator<Item = S>) -> &mut Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        let key = key.as_ref().to_owned();
        self.removed.retain(|k| *k != key);
        self.set.push((key, value.as_ref().to_owned()));
        self
    }

    pub fn envs<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        &mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> &mut Self {
        for (k, v) in vars {
            self.env(k, v);
        }
        self
    }

    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Self {
        let key = key.as_ref().to_owned();
        self.set.retain(|(k, _)| *k != key);
        self.removed.push(key);
        self
    }

    pub fn current_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cwd = Some(dir.into());
        self
    }

    pub fn stdin(&mut self, stdin: Stdin) -> &mut Self {
        self.stdin = stdin;
        self
    }

    /// Runs the child on these CPUs only (none: wherever the parent may).
    pub fn cpus(&mut self, cpus: &[usize]) -> &mut Self {
        self.cpus = cpus.to_vec();
        self
    }

    /// Lets the child inherit descriptor `fd` at the same number (which
    /// other children do not: it stays close-on-exec in the parent).
    pub fn keep_fd(&mut self, fd: RawFd) -> &mut Self {
        self.keep_fd = Some(fd);
        self
    }

    /// The environment the child gets: the parent's, changed as asked.
    fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(k, _)| !self.removed.contains(k))
            .collect();
        for (k, v) in &self.set {
            env.retain(|(key, _)| key != k);
            env.push((k.clone(), v.clone()));
        }
        env
    }

    /// Where `execve` looks for the program, in order (as `execvp`: the
    /// name itself if it holds a `/`, else each directory of `PATH`).
    fn candidates(&self, env: &[(OsString, OsString)]) -> io::Result<Vec<CString>> {
        let prog = self.program.as_bytes();
        if prog.is_empty() {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        if prog.contains(&b'/') {
            return Ok(vec![c_string(prog)?]);
        }
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or(&b"/usr/local/bin:/usr/bin:/bin"[..], |(_, v)| v.as_bytes());
        path.split(|&b| b == b':')
            .map(|dir| {
                let dir = if dir.is_empty() { &b"."[..] } else { dir };
                c_string(&[dir, b"/", prog].concat())
            })
            .collect()
    }

    /// Starts the child; an error if it could not `exec` (with the reason
    /// the kernel gave, as `std::process::Command` says it).
    pub fn spawn(&self) -> io::Result<Child> {
        let env = self.environment();
        let candidates = self.candidates(&env)?;
        let argv: Vec<CString> = std::iter::once(&self.program)
            .chain(&self.args)
            .map(|a| c_string(a.as_bytes()))
            .collect::<io::Result<_>>()?;
        let envp: Vec<CString> = env
            .iter()
            .map(|(k, v)| c_string(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
            .collect::<io::Result<_>>()?;
        let cwd = match &self.cwd {
            Some(d) => Some(c_string(d.as_os_str().as_bytes())?),
            None => None,
        };
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let (in_parent, in_child) = match self.stdin {
            Stdin::Inherit => (None, None),
            Stdin::Null => (None, Some(dev_null()?)),
            Stdin::Piped => {
                let (r, w) = pipe()?;
                (Some(w), Some(r))
            }
        };
        let ptrs = |v: &[CString]| -> Vec<*const libc::c_char> {
            v.iter()
                .map(|c| c.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        let (argv_p, envp_p, cand_p) = (ptrs(&argv), ptrs(&envp), ptrs(&candidates));
        let args = ChildArgs {
            candidates: &cand_p,
            argv: argv_p.as_ptr(),
            envp: envp_p.as_ptr(),
            cwd: cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            stdin: in_child.as_ref().map_or(-1, |f| f.as_raw_fd()),
            stdout: out_w.as_raw_fd(),
            stderr: err_w.as_raw_fd(),
            keep_fd: self.keep_fd.unwrap_or(-1),
            cpus: cpu_set(&self.cpus),
            // SAFETY: getpid takes no arguments.
            parent: unsafe { libc::getpid() },
            error: AtomicI32::new(0),
        };
        let pid = clone_vfork(&args)?;
        let error = args.error.load(Ordering::Acquire);
        if error != 0 {
            // It has ended already (the parent resumes at its exit).
            let mut status = 0;
            // SAFETY: `status` is a valid out-pointer; `pid` is our child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            return Err(io::Error::from_raw_os_error(error));
        }
        Ok(Child {
            pid,
            stdin: in_parent.map(File::from),
            stdout: File::from(out_r),
            stderr: File::from(err_r),
        })
    }
}

fn c_string(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a program name, argument or variable holds a NUL byte",
        )
    })
}

/// A descriptor above the standard three: the child `dup2`s onto 0, 1 and
/// 2, which must not close one it still needs (when the parent runs with
/// a standard stream closed, new descriptors take those numbers).
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: fcntl duplicates a descriptor we own; the new one is ours.
    let new = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) })?;
    // SAFETY: `new` was just returned to us and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both were just returned to us and are owned by nothing else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stdio(r)?, above_stdio(w)?))
}

fn dev_null() -> io::Result<OwnedFd> {
    // (std opens with O_CLOEXEC.)
    above_stdio(OwnedFd::from(File::open("/dev/null")?))
}

fn cpu_set(cpus: &[usize]) -> Option<libc::cpu_set_t> {
    if cpus.is_empty() {
        return None;
    }
    // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        // SAFETY: c is below CPU_SETSIZE, inside the set.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    Some(set)
}

/// What the child reads between `clone` and `exec`: all built before.
struct ChildArgs<'a> {
    /// Paths to try, NULL-terminated.
    candidates: &'a [*const libc::c_char],
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    /// Descriptors for 0, 1, 2 (-1: stdin as it is).
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    keep_fd: RawFd,
    cpus: Option<libc::cpu_set_t>,
    parent: libc::pid_t,
    /// Why the child could not `exec` (0: it did).
    error: AtomicI32,
}

/// The child's stack while it shares the parent's memory.
const CHILD_STACK: usize = 64 << 10;

/// Runs `child_main` in a child sharing this memory, this thread stopped
/// until the child `exec`s or ends. Returns its pid.
fn clone_vfork(args: &ChildArgs) -> io::Result<libc::pid_t> {
    let mut stack = vec![0u8; CHILD_STACK];
    // The top, 16-aligned as the ABI wants.
    let top = (stack.as_mut_ptr() as usize + CHILD_STACK) & !15;
    // SAFETY: sigset_t is plain data; the calls get valid pointers to it.
    // All signals stay blocked while the child runs in our memory (a
    // handler of ours must not run on its stack); it unblocks them itself
    // after resetting the dispositions, and the mask here is put back.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        // SAFETY (clone): `top` is the end of `stack`, which lives until
        // after clone returns; with CLONE_VFORK this thread does not run
        // until the child has exec'd or exited, so `args` and `stack`
        // outlive every use by the child, which only reads `args` (and
        // writes its atomic `error`).
        let pid = libc::clone(
            child_main,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            args as *const ChildArgs as *mut libc::c_void,
        );
        let e = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        drop(stack);
        if pid < 0 {
            return Err(e);
        }
        Ok(pid)
    }
}

/// The child, between `clone` and `exec`: system calls only.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildArgs` of `clone_vfork`, alive and
    // unchanged while the parent's thread waits for this child; every call
    // below is a system call wrapper given pointers into it or into this
    // frame (async-signal-safe, no allocation, no lock).
    unsafe {
        let a = &*(arg as *const ChildArgs);
        let fail = |e: libc::c_int| -> ! {
            a.error.store(e.max(1), Ordering::Release);
            libc::_exit(127)
        };
        let errno = || *libc::__errno_location();
        // Handlers belong to the parent's code: default dispositions here,
        // SIGPIPE's too (ignored in the parent; programs expect it to end
        // them, as std::process::Command makes it).
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        for sig in 1..65 {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && (old.sa_sigaction != libc::SIG_IGN || sig == libc::SIGPIPE)
                && old.sa_sigaction != libc::SIG_DFL
            {
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        // Its own group (teardown and terminal signals reach it and its
        // children together), and death with mpiexec, which may already
        // have been killed since the clone.
        libc::setpgid(0, 0);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != a.parent {
            fail(libc::ESRCH);
        }
        if let Some(set) = &a.cpus {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                fail(errno());
            }
        }
        for (from, to) in [(a.stdin, 0), (a.stdout, 1), (a.stderr, 2)] {
            if from >= 0 && libc::dup2(from, to) < 0 {
                fail(errno());
            }
        }
        if a.keep_fd >= 0 && libc::fcntl(a.keep_fd, libc::F_SETFD, 0) < 0 {
            fail(errno());
        }
        if !a.cwd.is_null() && libc::chdir(a.cwd) != 0 {
            fail(errno());
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        // As execvp: the next directory when the program is not in this
        // one; permission refused somewhere is the answer if found nowhere.
        let mut refused = false;
        for &path in a.candidates.iter().take_while(|p| !p.is_null()) {
            libc::execve(path, a.argv, a.envp);
            match errno() {
                libc::ENOENT | libc::ENOTDIR => {}
                libc::EACCES => refused = true,
                e => fail(e),
            }
        }
        fail(if refused { libc::EACCES } else { libc::ENOENT })
    }
}

#[cfg(test)]
#[path = "spawn_tests.rs"]
mod tests;
