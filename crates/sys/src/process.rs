//! Process control for the runtime: signals to our own children (by PID or
//! process group), exit-status waiting, and the signalfd through which
//! `mpiexec` hears SIGCHLD / SIGINT / SIGTERM in its event loop.

use super::cvt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// Sends `sig` to the process group led by our child `pid`.
pub fn kill_group(pid: i32, sig: i32) {
    // SAFETY: kill takes no pointers. `pid` is a child we started as the
    // leader of its own group, so only its group is signalled.
    unsafe {
        libc::kill(-pid, sig);
    }
}

/// Sends `sig` to our child `pid` (or one of its descendants).
pub fn signal(pid: i32, sig: i32) {
    // SAFETY: kill takes no pointers; callers signal only processes they
    // started (or those processes' children).
    unsafe {
        libc::kill(pid, sig);
    }
}

/// True once our child `pid` has ended (it is reaped here) or is not our
/// child (any more). Does not block.
pub fn ended(pid: i32) -> bool {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a valid out-pointer for the duration of the call.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    r == pid || (r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD))
}

/// Waits until our child `pid` has ended and reaps it.
pub fn wait_for(pid: i32) {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a valid out-pointer for the duration of the call.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
        && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
    {}
}

/// Reaps one exited child without blocking.
pub fn try_wait_any() -> Option<(i32, Exit)> {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a valid out-pointer for the duration of the call.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    if pid <= 0 {
        return None;
    }
    let exit = if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Code(libc::WEXITSTATUS(status))
    };
    Some((pid, exit))
}

/// A closed pipe ends this process quietly, as it does `cat` or `head`
/// (Rust ignores SIGPIPE, and `println!` then panics on the EPIPE): for
/// tools whose output is piped into others.
pub fn die_on_closed_pipe() {
    // SAFETY: setting a signal's disposition to its default takes no
    // pointer; no handler of ours is replaced.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGHUP => "SIGHUP",
        libc::SIGPIPE => "SIGPIPE",
        _ => "signal",
    }
}

/// The CPUs this process may run on (its affinity mask), in order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most
    // its size into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Makes a spawned child start with no signals blocked (a `SignalFd` in
/// the parent blocks them, and a mask is inherited across exec).
pub fn start_unblocked(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (sigemptyset, sigprocmask) on local data.
    unsafe {
        cmd.pre_exec(|| {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
}

/// A signalfd for the given signals, which are blocked for normal delivery
/// in the calling thread (call before starting other threads so they
/// inherit the mask).
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    pub fn new(signals: &[i32]) -> io::Result<SignalFd> {
        // SAFETY: sigset_t is plain data; every call gets valid pointers to it.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &s in signals {
                libc::sigaddset(&mut set, s);
            }
            cvt(libc::pthread_sigmask(
                libc::SIG_BLOCK,
                &set,
                std::ptr::null_mut(),
            ))?;
            let fd = cvt(libc::signalfd(
                -1,
                &set,
                libc::SFD_CLOEXEC | libc::SFD_NONBLOCK,
            ))?;
            Ok(SignalFd {
                fd: OwnedFd::from_raw_fd(fd),
            })
        }
    }

    /// Waits for the next signal.
    pub fn wait(&self) -> i32 {
        loop {
            if let Some(sig) = self.read() {
                return sig;
            }
            let mut fds = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `fds` is one valid pollfd for the duration of the call.
            unsafe { libc::poll(&mut fds, 1, -1) };
        }
    }

    /// The next pending signal, if any.
    pub fn read(&self) -> Option<i32> {
        // SAFETY: signalfd_siginfo is plain data; we read at most its size.
        unsafe {
            let mut info: libc::signalfd_siginfo = std::mem::zeroed();
            let n = libc::read(
                self.fd.as_raw_fd(),
                &mut info as *mut _ as *mut libc::c_void,
                std::mem::size_of::<libc::signalfd_siginfo>(),
            );
            (n == std::mem::size_of::<libc::signalfd_siginfo>() as isize)
                .then_some(info.ssi_signo as i32)
        }
    }
}

impl AsRawFd for SignalFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Fills `buf` from the kernel's random source.
pub fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// Dies at once by SIGKILL, as a crashed node's process would, after
/// flushing C's stdio buffers (the output a user expects to see before).
pub fn kill_self() -> ! {
    // SAFETY: fflush(NULL) flushes every C stream; raise takes no pointers.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::raise(libc::SIGKILL);
    }
    unreachable!("SIGKILL cannot be caught")
}

/// This machine's host name (`gethostname`), lossily as UTF-8.
pub fn hostname() -> String {
    let mut host = [0u8; 256];
    // SAFETY: gethostname writes at most host.len() bytes into our buffer.
    unsafe { libc::gethostname(host.as_mut_ptr() as *mut libc::c_char, host.len()) };
    let end = host.iter().position(|&b| b == 0).unwrap_or(host.len());
    String::from_utf8_lossy(&host[..end]).into_owned()
}

/// True while process `pid` exists and is not a zombie (a process that
/// ended and was not reaped yet runs no code any more). Any process, not
/// only our children; reads `/proc`.
pub fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which may hold spaces and
        // parentheses: it is the first field after the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

/// Lowers the calling thread's scheduling priority to niceness `nice`
/// (background work that the program's threads should pass: on Linux the
/// nice value is per thread). Raising it back needs privileges, so a
/// thread does this for itself only.
pub fn lower_this_thread(nice: i32) {
    // SAFETY: gettid and setpriority take no pointers; a failure leaves
    // the thread as it was.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
    }
}

extern "C" {
    // glibc's on_exit(3): as atexit, with the status given to exit().
    fn on_exit(
        f: extern "C" fn(libc::c_int, *mut libc::c_void),
        arg: *mut libc::c_void,
    ) -> libc::c_int;
}

/// Runs `f` with the exit status as the process calls `exit` (or returns
/// from `main`); not on `_exit`, a signal or an abort.
pub fn at_exit(f: extern "C" fn(libc::c_int, *mut libc::c_void)) -> io::Result<()> {
    // SAFETY: registers a function of the signature glibc calls; the
    // argument pointer is unused (NULL).
    if unsafe { on_exit(f, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::other(
            "on_exit: no room for another exit handler",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_runs_until_it_ends_reaped_or_not() {
        assert!(running(std::process::id() as i32));
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        assert!(running(pid));
        signal(pid, libc::SIGKILL);
        // A zombie until reaped: not running already.
        let t = std::time::Instant::now();
        while running(pid) && t.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(!running(pid), "killed, not reaped");
        child.wait().unwrap();
        assert!(!running(pid), "reaped");
    }
}
