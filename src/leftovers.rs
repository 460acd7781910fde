//! What a job leaves on disk, and its removal by `mpiexec`: the job's
//! node-local checkpoint directories (`ROOT/job-ID`, ID being mpiexec's
//! pid), tmpfs roots that the job created, the temporary and parked files
//! of its ranks on `pfs`, and its control directory. At its end a job
//! removes its own (on other hosts their agents do); at its start, those
//! of earlier jobs whose `mpiexec` is gone (killed with SIGKILL, it could
//! not), so nothing piles up. Only directories that an mpiexec of this
//! host claimed (`OWNER` in them names the host) are swept: a PID says
//! nothing about a job whose mpiexec runs on another host.

use mpistages::checkpoint::config::{self, Level};
use std::path::{Path, PathBuf};

/// The directories of one job, worked out from its checkpoint levels.
pub struct JobFiles {
    job_id: String,
    /// Node-local roots (tmpfs levels, and the root of routed files).
    roots: Vec<PathBuf>,
    /// Of those and their ancestors, the ones that did not exist before
    /// the job (deepest first): removed at the end if empty.
    created: Vec<PathBuf>,
    /// Durable levels' directories.
    pfs: Vec<PathBuf>,
}

/// Whether process `pid` is gone (no process, or not ours to signal is
/// counted as alive: only what surely belongs to nobody is removed).
pub fn process_gone(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks; it takes no pointers.
    let r = unsafe { libc::kill(pid, 0) };
    r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// `NAME.tmp.PID` / `NAME.flush.PID`: a checkpoint file being written by
/// process PID (renamed to its final name when complete).
fn writer_of_temporary(name: &str) -> Option<i32> {
    let (rest, pid) = name.rsplit_once('.')?;
    if !(rest.ends_with(".tmp") || rest.ends_with(".flush")) {
        return None;
    }
    pid.parse().ok()
}

/// The file in a job directory that names the host of its mpiexec.
const OWNER: &str = ".mpiexec-host";

fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_string()
}

impl JobFiles {
    /// Before the job starts: its directories, and which of them it will
    /// create.
    pub fn new(ckpt_spec: &str, job_id: &str) -> JobFiles {
        let cfg = config::parse(ckpt_spec).unwrap_or_default();
        let mut roots: Vec<PathBuf> = cfg
            .levels
            .iter()
            .filter_map(|l| match l {
                Level::Tmpfs(d) => Some(d.clone()),
                _ => None,
            })
            .chain([cfg.node_local_root()])
            .collect();
        roots.sort();
        roots.dedup();
        let pfs = cfg
            .levels
            .iter()
            .filter_map(|l| match l {
                Level::Pfs { dir, .. } => Some(dir.clone()),
                _ => None,
            })
            .collect();
        let mut created: Vec<PathBuf> = Vec::new();
        for r in &roots {
            let mut d = Some(r.as_path());
            while let Some(p) = d.filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
                created.push(p.to_path_buf());
                d = p.parent();
            }
        }
        created.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        created.dedup();
        JobFiles {
            job_id: job_id.to_string(),
            roots,
            created,
            pfs,
        }
    }

    /// The job's own node-local directories.
    fn job_dirs(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.roots.iter().map(|r| config::job_dir(r, &self.job_id))
    }

    /// At the start: makes the job's node-local directories on this host
    /// and marks them as its mpiexec's.
    pub fn claim(&self) {
        for d in self.job_dirs() {
            // Only the job's user may look inside (checkpoints are whole
            // protected states).
            if mpistages_sys::file::create_private_dir(&d).is_ok() {
                let _ = mpistages_sys::file::write_private(&d.join(OWNER), this_host().as_bytes());
            }
        }
    }

    /// At the start: removes what jobs whose mpiexec is gone left in these
    /// roots and pfs directories. Returns what was removed.
    pub fn sweep_dead_jobs(&self) -> Vec<PathBuf> {
        let mut removed = Vec::new();
        for root in &self.roots {
            let Ok(entries) = std::fs::read_dir(root) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                let Some(pid) = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("job-"))
                    .and_then(|p| p.parse::<i32>().ok())
                else {
                    continue;
                };
                let ours = std::fs::read_to_string(e.path().join(OWNER))
                    .is_ok_and(|h| h.trim() == this_host());
                if ours && process_gone(pid) && std::fs::remove_dir_all(e.path()).is_ok() {
                    removed.push(e.path());
                }
            }
        }
        for dir in &self.pfs {
            removed.extend(sweep_temporaries(dir));
        }
        removed
    }

    /// On another host, at the end of the job (its agent): the job's
    /// node-local directories there, and the roots it created if empty.
    pub fn remove_node_local(&self) {
        for d in self.job_dirs() {
            let _ = std::fs::remove_dir_all(&d);
        }
        for d in &self.created {
            let _ = std::fs::remove_dir(d);
        }
        let _ = std::fs::remove_dir(config::DEFAULT_TMPFS);
    }

    /// At the end, when every rank is gone: the job's node-local
    /// directories, the roots it created if they are empty now, and on
    /// pfs the temporaries of dead writers and the files parked for reuse
    /// (MPI_Finalize removes those, but not after a crash).
    pub fn remove_at_end(&self) {
        // The default root is shared by every job: removed once empty.
        self.remove_node_local();
        for dir in &self.pfs {
            sweep_temporaries(dir);
            if let Ok(entries) = std::fs::read_dir(dir) {
                for e in entries.flatten() {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    if name.starts_with("free-") && name.ends_with(".ckpt") {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
        }
    }
}

/// Removes `DIR/epoch-*/NAME.{tmp,flush}.PID` files whose writer is gone.
fn sweep_temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(epochs) = std::fs::read_dir(dir) else {
        return removed;
    };
    for ep in epochs.flatten() {
        if !ep.file_name().to_string_lossy().starts_with("epoch-") {
            continue;
        }
        let Ok(files) = std::fs::read_dir(ep.path()) else {
            continue;
        };
        for f in files.flatten() {
            let dead =
                writer_of_temporary(&f.file_name().to_string_lossy()).is_some_and(process_gone);
            if dead && std::fs::remove_file(f.path()).is_ok() {
                removed.push(f.path());
            }
        }
        // An epoch directory that held only a temporary is empty now.
        let _ = std::fs::remove_dir(ep.path());
    }
    removed
}

/// A private directory (mode 0700) for a control socket, mpiexec's or an
/// agent's, removed on drop. Its owner holds an `flock` on the `LOCK` file
/// in it for as long as it lives, and `sweep_control_dirs` removes only
/// directories whose lock it can take: the kernel drops the lock when the
/// owner dies (also by SIGKILL), and unlike a PID it means the same in
/// every PID namespace and on every host sharing the directory (Slurm's
/// nodes here, where an agent's PID is one of its node's namespace and
/// another agent's sweep took its live directory for a dead one's).
pub struct ControlDir {
    dir: PathBuf,
    /// Open (and locked) as long as the directory is in use; close-on-exec,
    /// so the ranks do not keep it.
    _lock: std::fs::File,
}

/// The owner's lock file in a control directory.
const LOCK: &str = "owner.lock";

impl ControlDir {
    pub fn base() -> PathBuf {
        std::env::var_os("TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| "/tmp".into())
    }

    /// Made under a name no sweep looks at, locked, then renamed into
    /// place: a directory under its final name always has its lock.
    pub fn create() -> std::io::Result<ControlDir> {
        Self::create_in(&Self::base())
    }

    fn create_in(base: &Path) -> std::io::Result<ControlDir> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::DirBuilderExt;
        let mut r = [0u8; 8];
        mpistages_sys::process::random_bytes(&mut r)?;
        let hex: String = r.iter().map(|x| format!("{x:02x}")).collect();
        let making = base.join(format!(".mpistages-making-{hex}"));
        std::fs::DirBuilder::new().mode(0o700).create(&making)?;
        let locked = std::fs::File::create(making.join(LOCK)).and_then(|f| {
            match mpistages_sys::try_lock(f.as_raw_fd(), true)? {
                true => Ok(f),
                false => Err(std::io::Error::other("the new lock is taken")),
            }
        });
        let dir = base.join(format!("mpistages-{}-{hex}", std::process::id()));
        match locked.and_then(|f| std::fs::rename(&making, &dir).map(|_| f)) {
            Ok(lock) => Ok(ControlDir { dir, _lock: lock }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&making);
                Err(e)
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for ControlDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Control directories (`TMP/mpistages-PID-HEX`) whose owner is gone: its
/// lock can be taken. One with no lock file is from a version before the
/// locks; for those the PID is all there is.
pub fn sweep_control_dirs(base: &Path) -> Vec<PathBuf> {
    use std::os::fd::AsRawFd;
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(base) else {
        return removed;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("mpistages-"))
            .and_then(|r| r.split_once('-'))
            .and_then(|(p, _)| p.parse::<i32>().ok())
        else {
            continue;
        };
        let gone = match std::fs::File::open(e.path().join(LOCK)) {
            Ok(f) => mpistages_sys::try_lock(f.as_raw_fd(), true).unwrap_or(false),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => process_gone(pid),
            Err(_) => false,
        };
        if gone && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process and a directory of the test, gone when it ends (also when
    /// it fails).
    struct Cleanup(std::process::Child, PathBuf);

    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }

    /// A process that lives until the guard goes (with `base`), and its pid.
    fn live_process(base: &Path) -> (Cleanup, i32) {
        let other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = other.id() as i32;
        (Cleanup(other, base.to_path_buf()), pid)
    }

    /// A pid that is surely gone: a child that has been reaped.
    fn dead_pid() -> i32 {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id() as i32;
        c.wait().unwrap();
        pid
    }

    #[test]
    fn dead_jobs_files_go_and_live_ones_stay() {
        let base = std::env::temp_dir().join(format!("leftovers-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let tmpfs = base.join("made/by/the/job");
        let pfs = base.join("pfs");
        let spec = format!("mem,tmpfs:{},pfs:{}", tmpfs.display(), pfs.display());
        std::fs::create_dir_all(&base).unwrap();
        let me = std::process::id() as i32;
        let files = JobFiles::new(&spec, &me.to_string());
        let made = ["made/by/the/job", "made/by/the", "made/by", "made"];
        assert_eq!(files.created, made.map(|d| base.join(d)).to_vec());
        // Another job that is still running, and one whose mpiexec is gone.
        let (mut guard, live) = live_process(&base);
        let dead = dead_pid();
        files.claim();
        for d in [
            format!("job-{dead}"),
            format!("job-{live}"),
            format!("job-{me}/epoch-1"),
            // A job of an mpiexec on another host (its PID means nothing
            // here), and one from before owners were written.
            format!("job-{}", dead + 1),
            format!("job-{}", dead + 2),
        ] {
            std::fs::create_dir_all(tmpfs.join(d)).unwrap();
        }
        for (pid, host) in [
            (dead, this_host()),
            (live, this_host()),
            (dead + 1, "n7".into()),
        ] {
            std::fs::write(tmpfs.join(format!("job-{pid}")).join(OWNER), host).unwrap();
        }
        std::fs::create_dir_all(pfs.join("epoch-3")).unwrap();
        let dead_tmp = format!("epoch-3/rank-1.ckpt.flush.{dead}");
        let live_tmp = format!("epoch-3/rank-2.ckpt.tmp.{live}");
        for f in [
            &dead_tmp,
            &live_tmp,
            "epoch-3/rank-0.ckpt",
            "free-0-rank-1.ckpt",
        ] {
            std::fs::write(pfs.join(f), b"x").unwrap();
        }
        let removed = files.sweep_dead_jobs();
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert!(!tmpfs.join(format!("job-{dead}")).exists());
        assert!(tmpfs.join(format!("job-{live}")).exists());
        assert!(tmpfs.join(format!("job-{me}")).exists());
        assert!(tmpfs.join(format!("job-{}", dead + 1)).exists());
        assert!(tmpfs.join(format!("job-{}", dead + 2)).exists());
        std::fs::remove_dir_all(tmpfs.join(format!("job-{}", dead + 1))).unwrap();
        std::fs::remove_dir_all(tmpfs.join(format!("job-{}", dead + 2))).unwrap();
        assert!(!pfs.join(&dead_tmp).exists());
        assert!(pfs.join(&live_tmp).exists());
        // At the end: its own directory and the parked files go; the
        // checkpoint stays, and so does a root another job still uses.
        files.remove_at_end();
        assert!(!tmpfs.join(format!("job-{me}")).exists());
        assert!(!pfs.join("free-0-rank-1.ckpt").exists());
        assert!(pfs.join("epoch-3/rank-0.ckpt").exists());
        assert!(tmpfs.exists());
        guard.0.kill().unwrap();
        guard.0.wait().unwrap();
        std::fs::remove_dir_all(tmpfs.join(format!("job-{live}"))).unwrap();
        files.remove_at_end();
        assert!(!base.join("made").exists(), "created roots stay");
    }

    /// A control directory stays while its owner lives, whatever its name's
    /// PID says (another PID namespace's), and goes once its lock is free.
    #[test]
    fn control_dirs_go_when_their_owner_does() {
        let base = std::env::temp_dir().join(format!("controldirs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let (mut guard, live) = live_process(&base);
        let dead = dead_pid();
        let mut owned = ControlDir::create_in(&base).unwrap();
        let foreign = base.join(format!("mpistages-{dead}-0a"));
        std::fs::rename(&owned.dir, &foreign).unwrap();
        owned.dir = foreign.clone();
        // Unlocked (its owner gone) though its PID is alive; from before
        // the locks, with a dead PID and with a live one.
        let unlocked = base.join(format!("mpistages-{live}-0b"));
        std::fs::create_dir(&unlocked).unwrap();
        std::fs::write(unlocked.join(LOCK), b"").unwrap();
        let (old_dead, old_live) = (
            base.join(format!("mpistages-{dead}-0c")),
            base.join(format!("mpistages-{live}-0d")),
        );
        std::fs::create_dir(&old_dead).unwrap();
        std::fs::create_dir(&old_live).unwrap();
        let mut removed = sweep_control_dirs(&base);
        let mut want = vec![unlocked, old_dead];
        removed.sort();
        want.sort();
        assert_eq!(removed, want);
        assert!(foreign.exists() && old_live.exists());
        drop(owned);
        assert!(!foreign.exists());
        guard.0.kill().unwrap();
        guard.0.wait().unwrap();
        assert_eq!(sweep_control_dirs(&base), vec![old_live]);
    }

    #[test]
    fn temporaries_are_recognised() {
        assert_eq!(writer_of_temporary("rank-2.ckpt.flush.77"), Some(77));
        assert_eq!(writer_of_temporary("rank-2.ckpt.tmp.8"), Some(8));
        assert_eq!(writer_of_temporary("rank-2.ckpt"), None);
        assert_eq!(writer_of_temporary("free-0-rank-1.ckpt"), None);
        assert_eq!(writer_of_temporary("x.tmp.notapid"), None);
    }
}
