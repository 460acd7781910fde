//! Jobs over several hosts: network namespaces (tests/common/netns.rs)
//! with their own addresses, agents started by `ip netns exec`, ranks
//! reaching each other and mpiexec over the bridge.

mod common;
use common::netns::Hosts;
use common::{build, checksum, mpiexec, Run};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

macro_rules! hosts_or_skip {
    ($n:expr) => {
        match Hosts::new($n) {
            Ok(h) => h,
            Err(why) => {
                common::skipped(&why);
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
    let h = hosts_or_skip!(2);
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

/// `mpiexec` options for the hosts of `h` (`--host LIST`), with agents
/// started by `launcher` in their namespaces, and `more` options.
fn on_hosts(h: &Hosts, list: &str, launcher: &str, more: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "--host",
        list,
        "--launcher-exec",
        launcher,
        "--control-addr",
        &h.gateway,
    ]
    .map(String::from)
    .to_vec();
    a.extend(more.iter().map(|s| s.to_string()));
    a
}

/// `opts` running the resilient stencil, the same problem in every test.
fn stencil(opts: Vec<String>) -> Vec<String> {
    let exe = common::build_example("stencil2d.c");
    let mut a = opts;
    a.push(exe.to_str().unwrap().into());
    a.extend(["240", "3000", "10", "protect"].map(String::from));
    a
}

/// Runs `mpiexec args` failure-free, then again, and once host 1 runs its
/// agent and two ranks calls `during(mpiexec's pid)`; returns both runs.
fn clean_then(h: &Hosts, args: &[String], during: impl FnOnce(u32)) -> (Arc<Run>, Run) {
    (failure_free(args), hurt_run(h, args, &[], during))
}

/// `mpiexec args` run failure-free. A failure-free run does not depend on
/// the recovery mode: the run of a job that differs from one already made
/// only by its `--recovery` is that one (each test's loop over the modes
/// runs its job failure-free once, not once per mode).
fn failure_free(args: &[String]) -> Arc<Run> {
    static RUNS: Mutex<Vec<(Vec<String>, Arc<Run>)>> = Mutex::new(Vec::new());
    let key: Vec<String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| *a != "--recovery" && (*i == 0 || args[*i - 1] != "--recovery"))
        .map(|(_, a)| a.clone())
        .collect();
    let known = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, run)) = known.iter().find(|(k, _)| *k == key) {
        return run.clone();
    }
    drop(known);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let clean = mpiexec(&a, &[], LIMIT);
    assert!(clean.ok(), "failure-free: {}", clean.stderr);
    let clean = Arc::new(clean);
    RUNS.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((key, clean.clone()));
    clean
}

/// `mpiexec args` run once host 1 runs its agent and two ranks, calling
/// `during(mpiexec's pid)` then.
fn hurt_run(h: &Hosts, args: &[String], env: &[(&str, &str)], during: impl FnOnce(u32)) -> Run {
    hurt_run_on(h, 1, args, env, during)
}

/// The same once host `host` runs its agent and two ranks.
fn hurt_run_on(
    h: &Hosts,
    host: usize,
    args: &[String],
    env: &[(&str, &str)],
    during: impl FnOnce(u32),
) -> Run {
    let child = common::command(common::bin("mpiexec"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while processes_on(h, host) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "host {host} never ran its ranks"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    during(child.id());
    common::finish(child, "mpiexec", LIMIT)
}

/// Host 1 dies (its agent and ranks, SIGKILLed at once) once its ranks
/// are past their first checkpoints.
fn kill_host_1(h: &Hosts) {
    std::thread::sleep(Duration::from_millis(700));
    assert!(kill_host(h, 1) >= 3);
}

/// Prints the recovery's lines (with its milestones), for --nocapture.
fn show_recovery(tag: &str, r: &Run) {
    for l in r
        .stderr
        .lines()
        .filter(|l| l.contains("lost") || l.contains(" done: "))
    {
        println!("{tag}: {l}");
    }
}

/// A resilient stencil on three hosts loses the second one (its agent and
/// both its ranks, killed at once) in each recovery mode: its ranks are
/// replaced on the host with free slots and the result is the one of a
/// failure-free run.
#[test]
fn a_lost_host_is_recovered_in_every_mode() {
    let h = hosts_or_skip!(3);
    let list = format!("{}:2,{}:2,{}:4", h.names[0], h.names[1], h.names[2]);
    host_1_lost_in_every_mode(&h, &list, "6", stencil, checksum);
}

/// The ranks of a lost host fail together: each survivor gets one failure
/// notice naming both (not one per rank), and the loss spends one restart
/// of the budget (`--max-restarts 1` is enough for two ranks). mpiexec
/// talks to the ranks through their hosts' agents: one notice per host
/// goes down, and the reports come up merged, one per host and step (a
/// window of a minute: a report that did not complete its host's step
/// would make the count larger, or the run a minute longer).
#[test]
fn a_lost_hosts_ranks_are_one_failure() {
    let h = hosts_or_skip!(3);
    let list = format!("{}:2,{}:2,{}:4", h.names[0], h.names[1], h.names[2]);
    let more = ["--recovery", "stages", "-n", "6", "--max-restarts", "1"];
    let args = stencil(on_hosts(&h, &list, "ip netns exec", &more));
    let clean = failure_free(&args);
    let window = [("MPISTAGES_FAN_WINDOW_MS", "60000")];
    let hurt = hurt_run(&h, &args, &window, |_| kill_host_1(&h));
    let done = recovered_as(&clean, &hurt);
    // Ranks 2 and 3 were on host 1: four survivors, one notice each.
    assert!(done.contains("ranks [2, 3] replaced"), "{done}");
    assert_eq!(count_out(&done, "failure"), 2, "{done}");
    // Hosts 0 and 2 each halted, were ready and restored as one; the
    // replacements (both started on host 2) said hello together.
    came_in(
        &done,
        &[("halted", 2), ("hello", 1), ("ready", 2), ("restored", 2)],
    );
}

/// The line of `hurt`'s first recovery, once `hurt` ended with `clean`'s
/// result.
fn recovered_as(clean: &Run, hurt: &Run) -> String {
    assert!(hurt.ok(), "{}\n{}", hurt.stdout, hurt.stderr);
    assert_eq!(checksum(clean), checksum(hurt));
    let line = hurt.stderr.lines().find(|l| l.contains("recovery 1 done"));
    line.unwrap_or_else(|| panic!("{}", hurt.stderr))
        .to_string()
}

/// mpiexec's recovery line `done` says this many messages of each kind
/// came in.
fn came_in(done: &str, counts: &[(&str, usize)]) {
    for &(kind, n) in counts {
        assert_eq!(count_in(done, kind), n, "{kind}: {done}");
    }
}

/// mpiexec's own machine, when it is one of several hosts, is a host of
/// the tree like the others: an agent started there (no launcher) starts
/// its ranks and merges their reports. Host 1 is lost; this machine's two
/// ranks and host 0's two halt, get ready and restore as one report per
/// host (four each without the agent here), and this machine starts both
/// replacements, whose hellos come up together.
#[test]
fn this_machines_ranks_go_through_an_agent_too() {
    let h = hosts_or_skip!(2);
    let list = format!("localhost:4,{}:2,{}:2", h.names[0], h.names[1]);
    let more = ["--recovery", "stages", "-n", "6", "--map-by", "node"];
    let args = stencil(on_hosts(&h, &list, "ip netns exec", &more));
    let clean = failure_free(&args);
    let window = [("MPISTAGES_FAN_WINDOW_MS", "60000")];
    let hurt = hurt_run(&h, &args, &window, |_| kill_host_1(&h));
    let done = recovered_as(&clean, &hurt);
    for rank in [2, 5] {
        let replaced = format!("rank {rank} (pid");
        let line = hurt.stderr.lines().find(|l| l.contains(&replaced));
        let line = line.unwrap_or_else(|| panic!("{}", hurt.stderr));
        assert!(line.contains("replacing it on host localhost ("), "{line}");
    }
    came_in(
        &done,
        &[("halted", 2), ("hello", 1), ("ready", 2), ("restored", 2)],
    );
}

/// Five hosts and a tree of radix 2: mpiexec talks to the agents of hosts
/// 0 and 1; hosts 2 and 3 connect to host 0's agent, host 4 to host 1's.
/// Lost leaf (host 4): the agents above merge their branch's reports and
/// hellos, so mpiexec hears once per step from each of its two children,
/// and sends each notice twice. Lost inner host (1): host 4, whose agent reached
/// mpiexec through it, is lost with it, as one failure; host 0's branch
/// (six survivors on three hosts) halts as one report. Both runs end with
/// the failure-free result.
#[test]
fn a_tree_of_agents_loses_a_leaf_or_a_branch() {
    let h = hosts_or_skip!(5);
    let n = &h.names;
    let list = format!("{}:4,{}:2,{}:2,{}:4,{}:2", n[0], n[1], n[2], n[3], n[4]);
    let more = ["--recovery", "stages", "-n", "10", "--map-by", "node"];
    let args = stencil(on_hosts(&h, &list, "ip netns exec", &more));
    let clean = failure_free(&args);
    let env = [
        ("MPISTAGES_FAN_WINDOW_MS", "60000"),
        ("MPISTAGES_TREE_RADIX", "2"),
    ];
    let leaf = hurt_run_on(&h, 4, &args, &env, |_| {
        std::thread::sleep(Duration::from_millis(700));
        assert!(kill_host(&h, 4) >= 3);
    });
    let line = recovered_as(&clean, &leaf);
    assert!(line.contains("ranks [4, 9] replaced"), "{line}");
    // The replacements, on hosts 0 and 3, said hello as one.
    came_in(
        &line,
        &[("halted", 2), ("hello", 1), ("ready", 2), ("restored", 2)],
    );
    assert_eq!(count_out(&line, "failure"), 2, "{line}");
    let branch = hurt_run_on(&h, 1, &args, &env, |_| kill_host_1(&h));
    let line = recovered_as(&clean, &branch);
    assert!(line.contains("ranks [1, 6, 4, 9] replaced"), "{line}");
    came_in(&line, &[("halted", 1)]);
    assert!(
        branch.stderr.contains(&format!(
            "host {} is lost (its agent reached mpiexec through host {}'s)",
            n[4], n[1]
        )),
        "{}",
        branch.stderr
    );
}

/// How many messages of `kind` mpiexec's recovery line says came in.
fn count_in(line: &str, kind: &str) -> usize {
    count(line, "in: ", "; out:", kind)
}

/// How many messages of `kind` mpiexec's recovery line says went out.
fn count_out(line: &str, kind: &str) -> usize {
    count(line, "; out: ", "\n", kind)
}

fn count(line: &str, from: &str, to: &str, kind: &str) -> usize {
    let inbound = line
        .split(from)
        .nth(1)
        .and_then(|s| s.split(to).next())
        .unwrap_or("");
    inbound
        .split(", ")
        .filter_map(|c| c.trim().split_once(' '))
        .find(|(_, k)| *k == kind)
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(0)
}

/// Runs the job `app(options)` under each recovery mode, failure-free and
/// with host 1 killed mid-run (agent and ranks at once); `result` picks
/// from the output what must be the same in both runs.
fn host_1_lost_in_every_mode(
    h: &Hosts,
    list: &str,
    ranks: &str,
    app: impl Fn(Vec<String>) -> Vec<String>,
    result: impl Fn(&Run) -> String,
) {
    for mode in ["stages", "reinit", "cpr"] {
        let more = ["--recovery", mode, "-n", ranks];
        let args = app(on_hosts(h, list, "ip netns exec", &more));
        let (clean, hurt) = clean_then(h, &args, |_| kill_host_1(h));
        assert!(hurt.ok(), "{mode}:\n{}\n{}", hurt.stdout, hurt.stderr);
        assert!(
            hurt.stderr
                .contains(&format!("host {} is lost", h.names[1])),
            "{mode}: {}",
            hurt.stderr
        );
        assert_eq!(result(&clean), result(&hurt), "{mode}: {}", hurt.stderr);
        assert!(
            hurt.stderr.contains(" done: "),
            "{mode}: no recovery: {}",
            hurt.stderr
        );
        println!("{mode}: {}", result(&hurt));
        show_recovery(mode, &hurt);
    }
}

/// A host whose link is cut (its veth down) falls silent: mpiexec declares
/// it lost after the heartbeat timeout and its ranks are replaced on the
/// host with free slots, in each recovery mode; the result is the
/// failure-free one.
#[test]
fn a_host_cut_off_is_lost_by_heartbeat_and_recovered() {
    let h = hosts_or_skip!(3);
    let list = format!("{}:2,{}:2,{}:4", h.names[0], h.names[1], h.names[2]);
    for mode in ["stages", "reinit", "cpr"] {
        let more = ["--heartbeat-timeout", "1", "--recovery", mode, "-n", "6"];
        let args = stencil(on_hosts(&h, &list, "ip netns exec", &more));
        // The link the previous mode cut is back.
        h.restore(1).unwrap();
        let (clean, hurt) = clean_then(&h, &args, |_| {
            std::thread::sleep(Duration::from_millis(700));
            h.cut(1).unwrap();
        });
        // What the cut host still runs ends now (its agent would end it
        // once mpiexec stays silent).
        kill_host(&h, 1);
        assert!(hurt.ok(), "{mode}:\n{}\n{}", hurt.stdout, hurt.stderr);
        // Lost once silent for the timeout (1 s), not before.
        let silence: f64 = hurt
            .stderr
            .split(&format!("host {} is lost (no heartbeat for ", h.names[1]))
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{mode}: {}", hurt.stderr));
        assert!(silence >= 1.0, "{mode}: {}", hurt.stderr);
        assert_eq!(checksum(&clean), checksum(&hurt), "{mode}: {}", hurt.stderr);
        show_recovery(mode, &hurt);
    }
}

/// `--spare-hosts`: no rank starts there, and the ranks of a lost host are
/// replaced there (not on the job's other hosts, which have room too).
#[test]
fn a_lost_hosts_ranks_go_to_the_spare_host() {
    let h = hosts_or_skip!(3);
    let list = format!("{}:4,{}:2", h.names[0], h.names[1]);
    let spare = format!("{}:2", h.names[2]);
    let more = [
        "--spare-hosts",
        &spare,
        "--recovery",
        "stages",
        "-n",
        "4",
        "--map-by",
        "node",
    ];
    let args = stencil(on_hosts(&h, &list, "ip netns exec", &more));
    // By node: ranks 0 and 2 on host 0, 1 and 3 on host 1; the spare host
    // runs only its agent.
    let (clean, hurt) = clean_then(&h, &args, |_| {
        assert_eq!(processes_on(&h, 2), 1, "a rank started on the spare host");
        kill_host_1(&h);
    });
    assert!(hurt.ok(), "{}\n{}", hurt.stdout, hurt.stderr);
    for r in [1, 3] {
        assert!(
            hurt.stderr.contains(&format!("rank {r} (pid"))
                && hurt
                    .stderr
                    .contains(&format!("replacing it on host {} (", h.names[2])),
            "rank {r}: {}",
            hurt.stderr
        );
    }
    assert_eq!(checksum(&clean), checksum(&hurt), "{}", hurt.stderr);
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
    let h = hosts_or_skip!(2);
    let list = format!("{}:2,{}:2", h.names[0], h.names[1]);
    let more = ["--heartbeat-timeout", "1", "-n", "4"];
    let args = stencil(on_hosts(&h, &list, "ip netns exec", &more));
    let mut strangers = Vec::new();
    let (clean, run) = clean_then(&h, &args, |pid| {
        let ports = listening_ports(pid);
        assert!(ports.len() >= 2, "mpiexec's TCP listeners: {ports:?}");
        for p in &ports {
            // Three silent connections each (longer than the heartbeat
            // timeout if they stalled mpiexec), and garbage.
            let silent = format!("exec 3<>/dev/tcp/{}/{p}; sleep 3", h.gateway);
            let garbage = format!("head -c 4096 /dev/urandom > /dev/tcp/{}/{p}", h.gateway);
            for script in [&silent, &silent, &silent, &garbage] {
                strangers.push(h.exec(0, "bash").args(["-c", script]).spawn().unwrap());
            }
        }
    });
    for mut s in strangers {
        let _ = s.kill();
        let _ = s.wait();
    }
    assert!(run.ok(), "{}\n{}", run.stdout, run.stderr);
    assert!(!run.stderr.contains("is lost"), "{}", run.stderr);
    assert_eq!(checksum(&clean), checksum(&run), "{}", run.stderr);
}

/// Partner copies live on another host than their owner: with only the
/// `mem` and `partner` levels, the ranks of a lost host restore from the
/// copies their partners on the surviving host hold (with the next rank
/// as partner, both copies of a host's two ranks would be lost with it).
#[test]
fn partner_copies_outlive_their_host() {
    let h = hosts_or_skip!(3);
    let (clean, hurt) = lose_host_1_of_2(&h, "ip netns exec", "mem,partner");
    assert!(hurt.ok(), "{}\n{}", hurt.stdout, hurt.stderr);
    assert!(hurt.stderr.contains("from partner"), "{}", hurt.stderr);
    assert_eq!(checksum(&clean), checksum(&hurt), "{}", hurt.stderr);
}

/// Partner copies held on node-local storage: every host has its own
/// /dev/shm, and host 1 (ranks 2 and 3) is lost. In every mode, cpr
/// included — where every process is relaunched and the copies the
/// partners held in memory are gone — ranks 2 and 3 restore from the
/// copies their partners on host 0 wrote to host 0's /dev/shm.
#[test]
fn partner_copies_on_node_local_storage_outlive_a_relaunch() {
    let h = hosts_or_skip!(3);
    let ckpt = "mem,tmpfs:/dev/shm/mpistages,partner";
    for mode in ["stages", "reinit", "cpr"] {
        let (clean, hurt) = lose_host_1_of_2_in(&h, &own_shm_launcher(), ckpt, mode);
        assert!(hurt.ok(), "{mode}: {}\n{}", hurt.stdout, hurt.stderr);
        assert_eq!(checksum(&clean), checksum(&hurt), "{mode}: {}", hurt.stderr);
        for r in [2, 3] {
            assert!(
                hurt.stderr
                    .lines()
                    .any(|l| l.contains(&format!("rank {r} "))
                        && l.contains("restores epoch")
                        && l.contains("from partner")),
                "{mode}, rank {r}: {}",
                hurt.stderr
            );
        }
        show_recovery(mode, &hurt);
    }
}

/// Erasure-coded sets over hosts: 8 ranks on 4 hosts (each its own
/// /dev/shm), a spare host, and host 1 (ranks 2 and 3) lost. Under xor:4
/// the sets are {0,2,4,6} and {1,3,5,7}, one member per host, so each set
/// loses one member; under rs:4+2 the one set of 8 loses two at once. In
/// stages and cpr (every process relaunched: only node-local parity is
/// left), ranks 2 and 3 are rebuilt from the parity on the surviving hosts.
#[test]
fn erasure_coded_sets_outlive_a_lost_host() {
    let h = hosts_or_skip!(5);
    let list: Vec<String> = h.names[..4].iter().map(|n| format!("{n}:2")).collect();
    let spare = format!("{}:2", h.names[4]);
    let cases = [
        ("xor:4", "stages"),
        ("xor:4", "cpr"),
        ("rs:4+2", "stages"),
        ("rs:4+2", "cpr"),
    ];
    for (scheme, mode) in cases {
        let ckpt = format!("mem,tmpfs:/dev/shm/mpistages,{scheme}");
        let (clean, hurt) = lose_host_1(
            &h,
            &list.join(","),
            &spare,
            &own_shm_launcher(),
            &ckpt,
            mode,
            "8",
        );
        let what = format!("{scheme} {mode}: {}\n{}", hurt.stdout, hurt.stderr);
        assert!(hurt.ok(), "{what}");
        assert_eq!(checksum(&clean), checksum(&hurt), "{what}");
        assert!(!hurt.stderr.contains("members on one host"), "{what}");
        for r in [2, 3] {
            assert!(
                hurt.stderr
                    .lines()
                    .any(|l| l.contains(&format!("rank {r}: epoch "))
                        && l.contains(&format!("rebuilt from {scheme} parity"))),
                "rank {r}: {what}"
            );
        }
        show_recovery(&format!("{scheme} {mode}"), &hurt);
    }
}

/// More lost members than the code covers, at once: 4 ranks on 2 hosts
/// form one xor:4 set with two members on each host (rank 0 warns), and
/// host 1 (ranks 2 and 3) is lost. With a pfs level both restore from it;
/// without, the job says which members are missing and starts over.
#[test]
fn a_set_losing_more_than_its_code_covers_falls_back_or_ends_clearly() {
    let h = hosts_or_skip!(3);
    let pfs = common::Scratch::new("multihost-xor-pfs");
    let ckpt = format!("mem,tmpfs:/dev/shm/mpistages,xor:4,pfs:{}", pfs.path());
    let (clean, hurt) = lose_host_1_of_2(&h, &own_shm_launcher(), &ckpt);
    let what = format!("{}\n{}", hurt.stdout, hurt.stderr);
    assert!(hurt.ok(), "{what}");
    assert_eq!(checksum(&clean), checksum(&hurt), "{what}");
    assert!(hurt.stderr.contains("has 2 members on one host"), "{what}");
    for r in [2, 3] {
        assert!(
            hurt.stderr.lines().any(|l| l
                .contains(&format!("rank {r} (replacement) restores epoch"))
                && l.contains("from pfs")),
            "rank {r}: {what}"
        );
    }
    let (_, hurt) = lose_host_1_of_2(
        &h,
        &own_shm_launcher(),
        "mem,tmpfs:/dev/shm/mpistages,xor:4",
    );
    let what = format!("{}\n{}", hurt.stdout, hurt.stderr);
    assert!(hurt.ok(), "{what}");
    assert!(
        hurt.stderr.contains("cannot be rebuilt from xor:4: 2 of 4 members of its redundancy set have no copy (ranks [2, 3])"),
        "{what}"
    );
    // No epoch is left on every rank: the job starts again from the
    // beginning, and still ends with the failure-free result.
    assert!(
        hurt.stderr.contains("starts again from the beginning"),
        "{what}"
    );
    assert_eq!(checksum(&clean), checksum(&hurt), "{what}");
}

/// The launcher that gives each host its own /dev/shm.
fn own_shm_launcher() -> String {
    format!("{}/tests/netns-host", env!("CARGO_MANIFEST_DIR"))
}

/// The stencil on hosts 0 and 1 (spare host 2) with checkpoint levels
/// `ckpt`, agents started by `launcher`: failure-free, then with host 1
/// killed mid-run.
fn lose_host_1_of_2(h: &Hosts, launcher: &str, ckpt: &str) -> (Arc<Run>, Run) {
    lose_host_1_of_2_in(h, launcher, ckpt, "stages")
}

/// `lose_host_1_of_2` in recovery mode `mode`.
fn lose_host_1_of_2_in(h: &Hosts, launcher: &str, ckpt: &str, mode: &str) -> (Arc<Run>, Run) {
    let list = format!("{}:2,{}:2", h.names[0], h.names[1]);
    let spare = format!("{}:2", h.names[2]);
    lose_host_1(h, &list, &spare, launcher, ckpt, mode, "4")
}

/// The stencil on the hosts of `list` (spare hosts `spare`) at `ranks`
/// with checkpoint levels `ckpt`, agents started by `launcher`, under
/// `mode`: failure-free, then with host 1 killed mid-run.
fn lose_host_1(
    h: &Hosts,
    list: &str,
    spare: &str,
    launcher: &str,
    ckpt: &str,
    mode: &str,
    ranks: &str,
) -> (Arc<Run>, Run) {
    let more = [
        "--spare-hosts",
        spare,
        "--recovery",
        mode,
        "--ckpt",
        ckpt,
        "-n",
        ranks,
    ];
    let args = stencil(on_hosts(h, list, launcher, &more));
    clean_then(h, &args, |_| kill_host_1(h))
}

/// A lost host takes its node-local checkpoints (its own /dev/shm) with
/// it: its ranks restore from `pfs`; with node-local levels only, nothing
/// survives and the job starts over from the beginning, saying so.
#[test]
fn a_lost_hosts_node_local_copies_go_with_it() {
    let h = hosts_or_skip!(3);
    let pfs = common::Scratch::new("multihost-pfs");
    let ckpt = format!("mem,tmpfs:/dev/shm/mpistages,pfs:{}", pfs.path());
    let (clean, hurt) = lose_host_1_of_2(&h, &own_shm_launcher(), &ckpt);
    assert!(hurt.ok(), "{}\n{}", hurt.stdout, hurt.stderr);
    assert_eq!(checksum(&clean), checksum(&hurt), "{}", hurt.stderr);
    for r in [2, 3] {
        assert!(
            hurt.stderr.lines().any(|l| l
                .contains(&format!("rank {r} (replacement) restores epoch"))
                && l.contains("from pfs")),
            "rank {r}: {}",
            hurt.stderr
        );
    }
    let (_, hurt) = lose_host_1_of_2(&h, &own_shm_launcher(), "mem,tmpfs:/dev/shm/mpistages");
    assert!(hurt.ok(), "{}\n{}", hurt.stdout, hurt.stderr);
    assert!(
        hurt.stderr.contains("starts again from the beginning"),
        "{}",
        hurt.stderr
    );
    assert_eq!(checksum(&clean), checksum(&hurt), "{}", hurt.stderr);
}

/// mpiexec's stdin reaches rank 0 on another host (through its agent),
/// all of it and in order: 300 KiB of varied bytes, counted and summed
/// by position there and broadcast to every rank.
#[test]
fn stdin_reaches_rank_0_on_another_host() {
    let h = hosts_or_skip!(2);
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
    let h = hosts_or_skip!(2);
    let lists = common::Scratch::new("multihost-shm-lists");
    let prefix = format!("{}/shm", lists.path());
    let list = format!("{}:2,{}:2", h.names[0], h.names[1]);
    let more = [
        "--recovery",
        "stages",
        "--ckpt",
        "mem,tmpfs:/dev/shm/mpistages-test,partner",
        "-n",
        "4",
    ];
    let args = stencil(on_hosts(&h, &list, &own_shm_launcher(), &more));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
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

/// `--transport shm,udp`: ranks of one host connect through shared memory,
/// ranks of different hosts over UDP (auto would take TCP there).
#[test]
fn shared_memory_within_a_host_and_udp_between_hosts() {
    let h = hosts_or_skip!(2);
    let exe = build("whoami.c");
    let list = format!("{}:2,{}:2", h.names[0], h.names[1]);
    let more = ["--transport", "shm,udp", "-n", "4"];
    let mut args = on_hosts(&h, &list, "ip netns exec", &more);
    args.extend([exe.to_str().unwrap(), "X", "-"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env = [("MPISTAGES_LOG", "debug"), ("MPISTAGES_CONNECT", "eager")];
    let r = mpiexec(&args, &env, LIMIT);
    assert!(r.ok(), "{}\n{}", r.stdout, r.stderr);
    // Told to connect at start, the higher rank of each pair connects and
    // says so in MPI_Init.
    for (me, peer, kind) in [
        (1, 0, "shm"),
        (3, 2, "shm"),
        (2, 0, "udp"),
        (2, 1, "udp"),
        (3, 0, "udp"),
        (3, 1, "udp"),
    ] {
        let line = format!("rank {me}: connected to rank {peer} over {kind} ");
        assert!(r.stderr.contains(&line), "{line} missing: {}", r.stderr);
    }
    assert!(!r.stderr.contains(" over tcp "), "{}", r.stderr);
    assert_eq!(r.stdout.lines().filter(|l| l.contains(" of 4:")).count(), 4);
}

/// The LULESH-style proxy (examples/hydro3d.c, 8 ranks over hosts of 3, 2
/// and 3 slots) loses its second host in each recovery mode: the origin
/// and total energies are bit for bit those of the failure-free run.
#[test]
fn the_proxy_survives_a_lost_host_in_every_mode() {
    let h = hosts_or_skip!(3);
    let exe = common::build_example("hydro3d.c");
    // Spare slots on the surviving hosts for host 1's two ranks.
    let list = format!("{}:4,{}:2,{}:4", h.names[0], h.names[1], h.names[2]);
    // The energies; the line ends with the run's wall time.
    let energies = |r: &Run| {
        let l = r
            .stdout
            .lines()
            .find(|l| l.contains("final origin energy"))
            .unwrap_or_else(|| panic!("no result:\n{}\n{}", r.stdout, r.stderr));
        l[..l.rfind(", ").expect("a time at the end")].to_string()
    };
    let app = |mut args: Vec<String>| {
        args.push(exe.to_str().unwrap().into());
        args.extend(["-s", "12", "-i", "400", "-k", "20"].map(String::from));
        args
    };
    host_1_lost_in_every_mode(&h, &list, "8", app, energies);
}

/// A lost host whose ranks fit nowhere else (two hosts of two slots, four
/// ranks): every recovery mode ends the job at once with one message that
/// says why, and leaves no process behind. Under cpr mpiexec relaunched
/// the job again and again (4,355 times in 60 s in the campaign) and left
/// orphans when it was killed.
#[test]
fn a_lost_host_whose_ranks_fit_nowhere_ends_the_job_clearly() {
    let h = hosts_or_skip!(2);
    let list = format!("{}:2,{}:2", h.names[0], h.names[1]);
    for mode in ["cpr", "stages", "reinit"] {
        let more = ["--recovery", mode, "-n", "4"];
        let args = stencil(on_hosts(&h, &list, "ip netns exec", &more));
        let started = std::time::Instant::now();
        let hurt = hurt_run(&h, &args, &[], |_| kill_host_1(&h));
        let took = started.elapsed();
        assert!(
            !hurt.ok(),
            "{mode}: the job went on without slots:\n{}",
            hurt.stderr
        );
        assert!(
            hurt.stderr.contains("no free slot is left"),
            "{mode}: {}",
            hurt.stderr
        );
        let relaunches = hurt.stderr.matches("relaunching the job").count();
        assert!(
            relaunches <= 1,
            "{mode}: relaunched {relaunches} times:\n{}",
            hurt.stderr
        );
        let attempts = hurt.stderr.matches("cannot start a replacement").count()
            + hurt.stderr.matches("cannot recover").count();
        assert!(
            attempts <= 2,
            "{mode}: {attempts} attempts:\n{}",
            hurt.stderr
        );
        assert!(took < LIMIT, "{mode}: took {took:?}");
        for i in 0..2 {
            assert_eq!(processes_on(&h, i), 0, "{mode}: processes left on host {i}");
        }
    }
}

/// ULFM's respawn on a job over two hosts (campaign cause 4: MPI_Comm_spawn
/// returned MPI_ERR_SPAWN in every --host job): the last rank (on host 1)
/// dies, the survivors shrink and spawn its replacement, which goes to the
/// slot it freed on host 1 and starts there through the host's agent; the
/// merged communicator has the original size.
#[test]
fn ulfm_respawn_works_across_hosts() {
    let h = hosts_or_skip!(2);
    let list = format!("{}:2,{}:2", h.names[0], h.names[1]);
    let exe = build("spawn.c");
    let mut args = on_hosts(
        &h,
        &list,
        "ip netns exec",
        &["--with-ft", "ulfm", "-n", "4"],
    );
    args.push(exe.to_str().unwrap().into());
    args.push("respawn".into());
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = mpiexec(&a, &[], LIMIT);
    let what = format!("{:?}\n{}\n{}", r.status, r.stdout, r.stderr);
    assert!(r.ok(), "{what}");
    assert_eq!(r.stdout.matches("spawn ok parent").count(), 3, "{what}");
    assert!(r.stdout.contains("spawn ok child 3\n"), "{what}");
}

/// mpiexec itself stopped (SIGSTOP) past the heartbeat timeout, as on a
/// loaded or paused machine: the hosts' silence meanwhile is not theirs,
/// no host is declared lost, and the job ends with the failure-free
/// result (at load 20 a healthy host was declared lost).
#[test]
fn a_stalled_mpiexec_loses_no_host() {
    let h = hosts_or_skip!(2);
    let list = format!("{}:2,{}:2", h.names[0], h.names[1]);
    let more = [
        "--heartbeat-timeout",
        "1",
        "--recovery",
        "stages",
        "-n",
        "4",
    ];
    let args = stencil(on_hosts(&h, &list, "ip netns exec", &more));
    let (clean, paused) = clean_then(&h, &args, |pid| {
        std::thread::sleep(Duration::from_millis(300));
        mpistages_sys::process::signal(pid as i32, libc::SIGSTOP);
        std::thread::sleep(Duration::from_secs(3));
        mpistages_sys::process::signal(pid as i32, libc::SIGCONT);
    });
    assert!(paused.ok(), "{}", paused.stderr);
    assert!(!paused.stderr.contains("is lost"), "{}", paused.stderr);
    assert_eq!(checksum(&clean), checksum(&paused), "{}", paused.stderr);
}
