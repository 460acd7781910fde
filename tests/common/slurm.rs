//! A real Slurm for tests: Debian's `munged`, `slurmctld` and one
//! `slurmd` per node, started here with a configuration of their own (in
//! a scratch directory, on free ports, `SLURM_CONF` given to every
//! command) and gone when the cluster is dropped, also when the test
//! panics.
//!
//! Each node's `slurmd` runs as the first process of a PID namespace of
//! its own (`unshare --pid --fork --kill-child --mount-proc`): everything
//! Slurm starts on that node (step daemons, agents, ranks) lives in it,
//! so ending the node ends all of it, as a node that loses power. The
//! nodes are either one on this machine's loopback (`mpsn0`) or, given
//! test hosts (tests/common/netns.rs), one per network namespace, named
//! after it and reached at its address.

use super::netns::Hosts;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Slurm {
    dir: PathBuf,
    pub conf: PathBuf,
    pub nodes: Vec<String>,
    munged: Option<Child>,
    ctld: Option<Child>,
    slurmds: Vec<Option<Child>>,
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn free_port(ip: &str) -> u16 {
    std::net::TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_string()
}

impl Slurm {
    /// A cluster of one node on loopback, or one node per host of `hosts`;
    /// `Err` says why it cannot run here (the caller prints SKIPPED).
    /// Each node offers `cpus` CPUs (more than the machine has: the ranks
    /// share its cores, as with --oversubscribe).
    pub fn start(hosts: Option<&Hosts>, cpus: usize) -> Result<Slurm, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("the test cluster's daemons run as root".into());
        }
        let mut paths = Vec::new();
        for p in [
            "munged",
            "slurmctld",
            "slurmd",
            "srun",
            "salloc",
            "sinfo",
            "scontrol",
            "unshare",
            "nsenter",
        ] {
            paths.push(which(p).ok_or_else(|| {
                format!("{p} is not installed (Debian: apt-get install slurm-wlm munge)")
            })?);
        }
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "slurm-{}-{}",
            std::process::id(),
            next_id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("state")).unwrap();
        let mut s = Slurm {
            conf: dir.join("slurm.conf"),
            dir,
            nodes: Vec::new(),
            munged: None,
            ctld: None,
            slurmds: Vec::new(),
        };
        s.start_munge();
        let (ctl_ip, nodes): (String, Vec<(String, String)>) = match hosts {
            None => (
                "127.0.0.1".into(),
                vec![("mpsn0".into(), "127.0.0.1".into())],
            ),
            Some(h) => (
                h.gateway.clone(),
                h.names
                    .iter()
                    .cloned()
                    .zip(h.addrs.iter().cloned())
                    .collect(),
            ),
        };
        s.nodes = nodes.iter().map(|(n, _)| n.clone()).collect();
        s.write_conf(&ctl_ip, &nodes, cpus);
        let mut ctld = Command::new("slurmctld");
        ctld.args(["-D", "-i", "-f"]).arg(&s.conf);
        s.ctld = Some(s.spawn_logged(ctld, "slurmctld"));
        for (name, _) in &nodes {
            std::fs::create_dir_all(s.dir.join(format!("spool-{name}"))).unwrap();
            // nsenter, not `ip netns exec`: that remounts /sys, and slurmd
            // needs the cgroup file system under it.
            let mut c = Command::new("nsenter");
            if hosts.is_some() {
                c.arg(format!("--net=/run/netns/{name}"));
            }
            c.args([
                "unshare",
                "--pid",
                "--fork",
                "--kill-child",
                "--mount-proc",
                "slurmd",
            ])
            .args(["-D", "-N", name, "-f"])
            .arg(&s.conf);
            let child = s.spawn_logged(c, &format!("slurmd-{name}"));
            s.slurmds.push(Some(child));
        }
        s.wait_idle()?;
        Ok(s)
    }

    fn start_munge(&mut self) {
        let m = self.dir.join("munge");
        std::fs::create_dir_all(&m).unwrap();
        let mut key = vec![0u8; 1024];
        mpistages_sys::process::random_bytes(&mut key).unwrap();
        std::fs::write(m.join("key"), key).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(m.join("key"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(&m, std::fs::Permissions::from_mode(0o700)).unwrap();
        let mut c = Command::new("munged");
        c.arg("--foreground")
            .arg("--force")
            .arg(format!("--key-file={}", m.join("key").display()))
            .arg(format!("--socket={}", m.join("sock").display()))
            .arg(format!("--pid-file={}", m.join("pid").display()))
            .arg(format!("--seed-file={}", m.join("seed").display()))
            .arg(format!("--log-file={}", m.join("log").display()));
        self.munged = Some(self.spawn_logged(c, "munged"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !m.join("sock").exists() {
            assert!(
                Instant::now() < deadline,
                "munged did not start: {}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn write_conf(&self, ctl_ip: &str, nodes: &[(String, String)], cpus: usize) {
        let d = self.dir.display();
        let node_port = free_port("127.0.0.1");
        let mut conf = format!(
            "# A test cluster of mpistages' tests (tests/common/slurm.rs).
ClusterName=mpstest
SlurmctldHost={host}({ctl_ip})
SlurmctldPort={ctl_port}
SlurmdPort={node_port}
AuthType=auth/munge
AuthInfo=socket={d}/munge/sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool-%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout=30
KillWait=2
MailProg=/bin/true
",
            host = hostname(),
            ctl_port = free_port(ctl_ip),
        );
        for (name, addr) in nodes {
            conf.push_str(&format!(
                "NodeName={name} NodeHostname={name} NodeAddr={addr} CPUs={cpus} State=UNKNOWN\n"
            ));
        }
        conf.push_str("PartitionName=mpstest Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n");
        std::fs::write(&self.conf, conf).unwrap();
    }

    fn spawn_logged(&self, mut c: Command, name: &str) -> Child {
        let log = std::fs::File::create(self.dir.join(format!("{name}.out"))).unwrap();
        c.env("SLURM_CONF", &self.conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"))
    }

    /// Every node registered and idle.
    fn wait_idle(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = self
                .command("sinfo")
                .args(["-h", "-N", "-o", "%N %T"])
                .output()
                .map_err(|e| format!("sinfo: {e}"))?;
            let text = String::from_utf8_lossy(&out.stdout);
            let idle = text.lines().filter(|l| l.ends_with(" idle")).count();
            if idle == self.nodes.len() {
                return Ok(());
            }
            assert!(
                Instant::now() < deadline,
                "the test cluster's nodes never became idle: {text}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A Slurm command (`srun`, `salloc`, ...) for this cluster, without
    /// cargo's LD_LIBRARY_PATH (see `common::command`).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = super::command(program);
        c.env("SLURM_CONF", &self.conf);
        for v in [
            "SLURM_JOB_ID",
            "SLURM_JOBID",
            "SLURM_JOB_NODELIST",
            "SLURM_NODELIST",
        ] {
            c.env_remove(v);
        }
        c
    }

    /// Node `i` loses power: its slurmd and everything Slurm started on it
    /// end at once (SIGKILL to the PID namespace).
    pub fn kill_node(&mut self, i: usize) {
        if let Some(mut c) = self.slurmds[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The daemons' logs, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "log" || x == "out") {
                    let text = std::fs::read_to_string(&p).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(15).collect();
                    out.push_str(&format!("== {}\n", p.display()));
                    for l in tail.into_iter().rev() {
                        out.push_str(l);
                        out.push('\n');
                    }
                }
            }
        }
        out
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

fn next_id() -> usize {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Drop for Slurm {
    fn drop(&mut self) {
        // The nodes first: their PID namespaces take every step with them.
        for i in 0..self.slurmds.len() {
            self.kill_node(i);
        }
        for c in [self.ctld.take(), self.munged.take()].into_iter().flatten() {
            let mut c = c;
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
