//! Jobs over several hosts: network namespaces (tests/common/netns.rs)
//! with their own addresses, agents started by `ip netns exec`, ranks
//! reaching each other and mpiexec over the bridge.

mod common;
use common::netns::Hosts;
use common::{build, mpiexec};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

macro_rules! hosts_or_skip {
    ($n:expr, $name:expr) => {
        match Hosts::new($n) {
            Ok(h) => h,
            Err(why) => {
                println!("SKIPPED {}: {why}", $name);
                return;
            }
        }
    };
}

/// `--host A:2,B:2` with the agents started in the namespaces.
fn host_args(h: &Hosts, per_host: usize) -> Vec<String> {
    let list: Vec<String> = h.names.iter().map(|n| format!("{n}:{per_host}")).collect();
    vec![
        "--host".into(),
        list.join(","),
        "--launcher-exec".into(),
        "ip netns exec".into(),
        "--control-addr".into(),
        h.gateway.clone(),
    ]
}

#[test]
fn ranks_run_on_their_hosts_and_talk_across_them() {
    let h = hosts_or_skip!(2, "ranks_run_on_their_hosts_and_talk_across_them");
    let exe = build("whoami.c");
    let mut args = host_args(&h, 2);
    for a in ["-n", "4", exe.to_str().unwrap(), "X", "MPISTAGES_TCP_ADDR"] {
        args.push(a.into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = mpiexec(&args, &[], LIMIT);
    assert!(r.ok(), "{}\n{}", r.stdout, r.stderr);
    for rank in 0..4 {
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("rank {rank} of 4:")))
            .unwrap_or_else(|| panic!("rank {rank}:\n{}\n{}", r.stdout, r.stderr));
        let want = &h.addrs[rank / 2];
        assert!(
            line.contains(&format!("var={want} ")),
            "rank {rank}: {line}"
        );
    }
}

/// SIGKILLs every process of host `i` (its agent and its ranks) at once.
fn kill_host(h: &Hosts, i: usize) -> usize {
    let out = std::process::Command::new("ip")
        .args(["netns", "pids", &h.names[i]])
        .output()
        .unwrap();
    let pids: Vec<i32> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    for &p in &pids {
        mpistages_sys::process::signal(p, libc::SIGKILL);
    }
    pids.len()
}

/// Processes in host `i`'s namespace.
fn processes_on(h: &Hosts, i: usize) -> usize {
    let out = std::process::Command::new("ip")
        .args(["netns", "pids", &h.names[i]])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .count()
}

/// A resilient stencil on three hosts loses the second one (its agent and
/// both its ranks, killed at once) in each recovery mode: its ranks are
/// replaced on the host with free slots and the result is the one of a
/// failure-free run.
#[test]
fn a_lost_host_is_recovered_in_every_mode() {
    let h = hosts_or_skip!(3, "a_lost_host_is_recovered_in_every_mode");
    let exe = common::build_example("stencil2d.c");
    let list = format!("{}:2,{}:2,{}:4", h.names[0], h.names[1], h.names[2]);
    for mode in ["stages", "reinit", "cpr"] {
        let args = |extra: &[&str]| -> Vec<String> {
            let mut a: Vec<String> = vec![
                "--host".into(),
                list.clone(),
                "--launcher-exec".into(),
                "ip netns exec".into(),
                "--control-addr".into(),
                h.gateway.clone(),
                "--recovery".into(),
                mode.into(),
                "-n".into(),
                "6".into(),
            ];
            a.extend(extra.iter().map(|s| s.to_string()));
            a.push(exe.to_str().unwrap().into());
            a.extend(["240", "6000", "10", "protect"].map(String::from));
            a
        };
        let clean_args = args(&[]);
        let clean_args: Vec<&str> = clean_args.iter().map(String::as_str).collect();
        let clean = mpiexec(&clean_args, &[], LIMIT);
        assert!(clean.ok(), "{mode} failure-free: {}", clean.stderr);
        // The same job, and host 1 dies once its ranks are running.
        let hurt_args = args(&[]);
        let child = common::command(common::bin("mpiexec"))
            .args(&hurt_args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while processes_on(&h, 1) < 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "{mode}: host 1 never ran its ranks"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(700));
        assert!(kill_host(&h, 1) >= 3);
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}:\n{stdout}\n{stderr}");
        assert!(
            stderr.contains(&format!("host {} is lost", h.names[1])),
            "{mode}: {stderr}"
        );
        let sum = |s: &str| {
            s.lines()
                .find(|l| l.contains("checksum"))
                .map(str::to_string)
        };
        assert_eq!(sum(&clean.stdout), sum(&stdout), "{mode}: {stderr}");
        assert!(stderr.contains(" done: "), "{mode}: no recovery: {stderr}");
        // The recovery's lines (with its milestones), for --nocapture.
        for l in stderr
            .lines()
            .filter(|l| l.contains("lost") || l.contains(" done: "))
        {
            println!("{mode}: {l}");
        }
    }
}

/// A host whose link is cut (its veth down) falls silent: mpiexec declares
/// it lost after the heartbeat timeout and its ranks are replaced on the
/// host with free slots, in each recovery mode; the result is the
/// failure-free one.
#[test]
fn a_host_cut_off_is_lost_by_heartbeat_and_recovered() {
    let h = hosts_or_skip!(3, "a_host_cut_off_is_lost_by_heartbeat_and_recovered");
    let exe = common::build_example("stencil2d.c");
    let list = format!("{}:2,{}:2,{}:4", h.names[0], h.names[1], h.names[2]);
    for mode in ["stages", "reinit", "cpr"] {
        let args: Vec<String> = [
            "--host",
            &list,
            "--launcher-exec",
            "ip netns exec",
            "--control-addr",
            &h.gateway,
            "--heartbeat-timeout",
            "1",
            "--recovery",
            mode,
            "-n",
            "6",
            exe.to_str().unwrap(),
            "240",
            "6000",
            "10",
            "protect",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        // The link the previous mode cut is back.
        h.restore(1).unwrap();
        let clean = mpiexec(&a, &[], LIMIT);
        assert!(clean.ok(), "{mode} failure-free: {}", clean.stderr);
        let child = common::command(common::bin("mpiexec"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while processes_on(&h, 1) < 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "{mode}: host 1 never ran its ranks"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(700));
        h.cut(1).unwrap();
        let out = child.wait_with_output().unwrap();
        // What the cut host still runs ends now (its agent would end it
        // once mpiexec stays silent).
        kill_host(&h, 1);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{mode}:\n{stdout}\n{stderr}");
        // Lost once silent for the timeout (1 s), not before.
        let silence: f64 = stderr
            .split(&format!("host {} is lost (no heartbeat for ", h.names[1]))
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{mode}: {stderr}"));
        assert!(silence >= 1.0, "{mode}: {stderr}");
        println!("{mode}: lost after {silence} s of silence");
        let sum = |s: &str| {
            s.lines()
                .find(|l| l.contains("checksum"))
                .map(str::to_string)
        };
        assert_eq!(sum(&clean.stdout), sum(&stdout), "{mode}: {stderr}");
        for l in stderr
            .lines()
            .filter(|l| l.contains("lost") || l.contains(" done: "))
        {
            println!("{mode}: {l}");
        }
    }
}

/// `--spare-hosts`: no rank starts there, and the ranks of a lost host are
/// replaced there (not on the job's other hosts, which have room too).
#[test]
fn a_lost_hosts_ranks_go_to_the_spare_host() {
    let h = hosts_or_skip!(3, "a_lost_hosts_ranks_go_to_the_spare_host");
    let exe = common::build_example("stencil2d.c");
    let list = format!("{}:4,{}:2", h.names[0], h.names[1]);
    let args: Vec<String> = [
        "--host",
        &list,
        "--spare-hosts",
        &format!("{}:2", h.names[2]),
        "--launcher-exec",
        "ip netns exec",
        "--control-addr",
        &h.gateway,
        "--recovery",
        "stages",
        "-n",
        "4",
        "--map-by",
        "node",
        exe.to_str().unwrap(),
        "240",
        "6000",
        "10",
        "protect",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let clean = mpiexec(&a, &[], LIMIT);
    assert!(clean.ok(), "failure-free: {}", clean.stderr);
    let child = common::command(common::bin("mpiexec"))
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    // By node: ranks 0 and 2 on host 0, 1 and 3 on host 1; the spare host
    // runs only its agent.
    while processes_on(&h, 1) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "host 1 never ran its ranks"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(processes_on(&h, 2), 1, "a rank started on the spare host");
    std::thread::sleep(Duration::from_millis(700));
    kill_host(&h, 1);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for r in [1, 3] {
        assert!(
            stderr.contains(&format!("rank {r} (pid"))
                && stderr.contains(&format!("replacing it on host {} (", h.names[2])),
            "rank {r}: {stderr}"
        );
    }
    let sum = |s: &str| {
        s.lines()
            .find(|l| l.contains("checksum"))
            .map(str::to_string)
    };
    assert_eq!(sum(&clean.stdout), sum(&stdout), "{stderr}");
}

/// The TCP ports mpiexec (`pid`) listens on (its sockets in LISTEN state
/// in /proc/net/tcp).
fn listening_ports(pid: u32) -> Vec<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    l.strip_prefix("socket:[")
                        .and_then(|x| x.strip_suffix(']'))
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    tcp.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (local, state, inode) = (f.get(1)?, f.get(3)?, f.get(9)?);
            if *state != "0A" || !inodes.iter().any(|i| i == inode) {
                return None;
            }
            u16::from_str_radix(local.rsplit(':').next()?, 16).ok()
        })
        .collect()
}

/// Strangers on a host of the job — silent connections and garbage, on
/// every port mpiexec listens on (agents' and ranks' control) — are
/// dropped without stalling mpiexec: no host is lost and the result is
/// the failure-free one.
#[test]
fn strangers_on_a_host_are_refused_and_change_nothing() {
    let h = hosts_or_skip!(2, "strangers_on_a_host_are_refused_and_change_nothing");
    let exe = common::build_example("stencil2d.c");
    let list = format!("{}:2,{}:2", h.names[0], h.names[1]);
    let args: Vec<String> = [
        "--host",
        &list,
        "--launcher-exec",
        "ip netns exec",
        "--control-addr",
        &h.gateway,
        "--heartbeat-timeout",
        "1",
        "-n",
        "4",
        exe.to_str().unwrap(),
        "240",
        "6000",
        "10",
        "protect",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let clean = mpiexec(&a, &[], LIMIT);
    assert!(clean.ok(), "failure-free: {}", clean.stderr);
    let child = common::command(common::bin("mpiexec"))
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while processes_on(&h, 1) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "host 1 never ran its ranks"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let ports = listening_ports(child.id());
    assert!(ports.len() >= 2, "mpiexec's TCP listeners: {ports:?}");
    let mut strangers = Vec::new();
    for p in &ports {
        // Three silent connections each (longer than the heartbeat
        // timeout if they stalled mpiexec), and garbage.
        for script in [
            format!("exec 3<>/dev/tcp/{}/{p}; sleep 3", h.gateway),
            format!("exec 3<>/dev/tcp/{}/{p}; sleep 3", h.gateway),
            format!("exec 3<>/dev/tcp/{}/{p}; sleep 3", h.gateway),
            format!("head -c 4096 /dev/urandom > /dev/tcp/{}/{p}", h.gateway),
        ] {
            strangers.push(h.exec(0, "bash").args(["-c", &script]).spawn().unwrap());
        }
    }
    let out = child.wait_with_output().unwrap();
    for mut s in strangers {
        let _ = s.kill();
        let _ = s.wait();
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("is lost"), "{stderr}");
    let sum = |s: &str| {
        s.lines()
            .find(|l| l.contains("checksum"))
            .map(str::to_string)
    };
    assert_eq!(sum(&clean.stdout), sum(&stdout), "{stderr}");
}

/// Partner copies live on another host than their owner: with only the
/// `mem` and `partner` levels, the ranks of a lost host restore from the
/// copies their partners on the surviving host hold (with the next rank
/// as partner, both copies of a host's two ranks would be lost with it).
#[test]
fn partner_copies_outlive_their_host() {
    let h = hosts_or_skip!(3, "partner_copies_outlive_their_host");
    let exe = common::build_example("stencil2d.c");
    let list = format!("{}:2,{}:2", h.names[0], h.names[1]);
    let args: Vec<String> = [
        "--host",
        &list,
        "--spare-hosts",
        &format!("{}:2", h.names[2]),
        "--launcher-exec",
        "ip netns exec",
        "--control-addr",
        &h.gateway,
        "--recovery",
        "stages",
        "--ckpt",
        "mem,partner",
        "-n",
        "4",
        exe.to_str().unwrap(),
        "240",
        "6000",
        "10",
        "protect",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let clean = mpiexec(&a, &[], LIMIT);
    assert!(clean.ok(), "failure-free: {}", clean.stderr);
    let child = common::command(common::bin("mpiexec"))
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while processes_on(&h, 1) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "host 1 never ran its ranks"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(700));
    kill_host(&h, 1);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("from partner"), "{stderr}");
    let sum = |s: &str| {
        s.lines()
            .find(|l| l.contains("checksum"))
            .map(str::to_string)
    };
    assert_eq!(sum(&clean.stdout), sum(&stdout), "{stderr}");
}

/// The launcher that gives each host its own /dev/shm.
fn own_shm_launcher() -> String {
    format!("{}/tests/netns-host", env!("CARGO_MANIFEST_DIR"))
}

/// Runs `stencil2d` on hosts 0 and 1 (spare host 2) with checkpoint levels
/// `ckpt`, each host with its own /dev/shm, and kills host 1 mid-run.
fn lose_host_with_own_storage(h: &Hosts, ckpt: &str) -> (common::Run, String, String, bool) {
    let exe = common::build_example("stencil2d.c");
    let list = format!("{}:2,{}:2", h.names[0], h.names[1]);
    let launcher = own_shm_launcher();
    let args: Vec<String> = [
        "--host",
        &list,
        "--spare-hosts",
        &format!("{}:2", h.names[2]),
        "--launcher-exec",
        &launcher,
        "--control-addr",
        &h.gateway,
        "--recovery",
        "stages",
        "--ckpt",
        ckpt,
        "-n",
        "4",
        exe.to_str().unwrap(),
        "240",
        "6000",
        "10",
        "protect",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let clean = mpiexec(&a, &[], LIMIT);
    assert!(clean.ok(), "failure-free: {}", clean.stderr);
    let child = common::command(common::bin("mpiexec"))
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while processes_on(h, 1) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "host 1 never ran its ranks"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(700));
    kill_host(h, 1);
    let out = child.wait_with_output().unwrap();
    (
        clean,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// A lost host takes its node-local checkpoints (its own /dev/shm) with
/// it: its ranks restore from `pfs`; with node-local levels only, nothing
/// survives and the job ends saying so.
#[test]
fn a_lost_hosts_node_local_copies_go_with_it() {
    let h = hosts_or_skip!(3, "a_lost_hosts_node_local_copies_go_with_it");
    let pfs = common::Scratch::new("multihost-pfs");
    let ckpt = format!("mem,tmpfs:/dev/shm/mpistages,pfs:{}", pfs.path());
    let (clean, stdout, stderr, ok) = lose_host_with_own_storage(&h, &ckpt);
    assert!(ok, "{stdout}\n{stderr}");
    let sum = |s: &str| {
        s.lines()
            .find(|l| l.contains("checksum"))
            .map(str::to_string)
    };
    assert_eq!(sum(&clean.stdout), sum(&stdout), "{stderr}");
    for r in [2, 3] {
        assert!(
            stderr.contains(&format!("rank {r} (replacement) restores epoch"))
                && stderr
                    .lines()
                    .any(|l| l.contains(&format!("rank {r} (replacement) restores"))
                        && l.contains("from pfs")),
            "rank {r}: {stderr}"
        );
    }
    let (_, stdout, stderr, ok) = lose_host_with_own_storage(&h, "mem,tmpfs:/dev/shm/mpistages");
    assert!(!ok, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("no valid checkpoint is left to restore"),
        "{stderr}"
    );
}

/// mpiexec's stdin reaches rank 0 on another host (through its agent),
/// all of it and in order: 300 KiB of varied bytes, counted and summed
/// by position there and broadcast to every rank.
#[test]
fn stdin_reaches_rank_0_on_another_host() {
    let h = hosts_or_skip!(2, "stdin_reaches_rank_0_on_another_host");
    let exe = build("stdin.c");
    let mut cmd = common::command(common::bin("mpiexec"));
    cmd.args(host_args(&h, 2)).args(["-n", "4"]).arg(&exe);
    let input: Vec<u8> = (0..300u32 << 10).map(|i| (i * 7 + i / 251) as u8).collect();
    let (mut bytes, mut sum) = (0u64, 0u64);
    for &b in &input {
        bytes += 1;
        sum = sum.wrapping_add(b as u64 * bytes);
    }
    let r = common::run_bounded_with_input(cmd, Some(input), "mpiexec stdin.c", LIMIT);
    assert!(r.ok(), "{}\n{}", r.stdout, r.stderr);
    for rank in 0..4 {
        let want = format!("rank {rank}: bytes={bytes} sum={sum}");
        assert!(r.stdout.contains(&want), "{want} missing:\n{}", r.stdout);
    }
}

/// At the end of a job each host's agent removes the job's node-local
/// checkpoint directories there (mpiexec can only remove its own host's):
/// nothing of the job is left in any host's /dev/shm.
#[test]
fn agents_remove_the_jobs_node_local_files() {
    let h = hosts_or_skip!(2, "agents_remove_the_jobs_node_local_files");
    let exe = common::build_example("stencil2d.c");
    let lists = common::Scratch::new("multihost-shm-lists");
    let prefix = format!("{}/shm", lists.path());
    let list = format!("{}:2,{}:2", h.names[0], h.names[1]);
    let launcher = own_shm_launcher();
    let args = [
        "--host",
        &list,
        "--launcher-exec",
        &launcher,
        "--control-addr",
        &h.gateway,
        "--recovery",
        "stages",
        "--ckpt",
        "mem,tmpfs:/dev/shm/mpistages-test,partner",
        "-n",
        "4",
        exe.to_str().unwrap(),
        "240",
        "600",
        "10",
        "protect",
    ];
    let r = mpiexec(&args, &[("MPISTAGES_TEST_SHM_LIST", &prefix)], LIMIT);
    assert!(r.ok(), "{}\n{}", r.stdout, r.stderr);
    for name in &h.names {
        let left = std::fs::read_to_string(format!("{prefix}.{name}"))
            .unwrap_or_else(|e| panic!("no listing of host {name}'s /dev/shm: {e}"));
        assert!(
            !left.contains("job-"),
            "host {name} keeps the job's files:\n{left}"
        );
    }
}
