//! Reliable UDP between ranks (here on one host, `--transport udp`): the
//! stream carries every byte through injected loss, duplication and
//! reordering (`MPISTAGES_UDP_FAULTS`, seeded), and a rank killed over UDP
//! is recovered in every mode.

mod common;
use common::{build, build_example, checksum, mpiexec};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(180);

#[test]
fn messages_survive_loss_duplication_and_reordering() {
    let large = build("large.c");
    let p2p = build("p2p.c");
    for faults in [
        "",
        "loss=0.01,seed=3",
        "loss=0.05,dup=0.01,reorder=0.02,seed=7",
        "dup=0.2,reorder=0.2,seed=11",
    ] {
        let env = [("MPISTAGES_UDP_FAULTS", faults)];
        for exe in [&large, &p2p] {
            let name = exe.file_name().unwrap().to_string_lossy().into_owned();
            let r = mpiexec(
                &["--transport", "udp", "-n", "3", exe.to_str().unwrap()],
                &env,
                LIMIT,
            );
            assert!(
                r.ok() && r.stdout.contains(&format!("OK {name}")),
                "{name} with faults '{faults}': {}\n{}",
                r.stdout,
                r.stderr
            );
        }
    }
}

/// In poll mode nothing but the ranks' own calls moves data: a rank
/// waiting in a shared-memory barrier goes on answering its peers over
/// UDP, so a peer waiting for the acknowledgement of a large send reaches
/// the barrier too (before, both waited until the peer's silence ended
/// the job: bench/transports' overlap rounds).
#[test]
fn a_rank_waiting_in_a_barrier_answers_its_peers_in_poll_mode() {
    let exe = build("poll_exchange.c");
    let env = [
        ("MPISTAGES_PROGRESS", "poll"),
        ("MPISTAGES_UDP_SILENCE", "3"),
    ];
    for n in ["2", "3"] {
        let r = mpiexec(
            &["--transport", "udp", "-n", n, exe.to_str().unwrap()],
            &env,
            LIMIT,
        );
        assert!(
            r.ok() && r.stdout.contains("OK poll_exchange"),
            "{n} ranks: {}\n{}",
            r.stdout,
            r.stderr
        );
    }
}

#[test]
fn a_rank_killed_over_udp_is_recovered_in_every_mode() {
    let exe = build_example("stencil2d.c");
    let exe = exe.to_str().unwrap();
    let args = |extra: &[&'static str]| -> Vec<String> {
        let mut a: Vec<String> = ["--transport", "udp"].map(String::from).to_vec();
        a.extend(extra.iter().map(|s| s.to_string()));
        a.extend(["-n", "4", exe, "240", "2000", "10", "protect"].map(String::from));
        a
    };
    let env = [("MPISTAGES_UDP_FAULTS", "loss=0.02,reorder=0.02,seed=5")];
    let clean = args(&[]);
    let clean: Vec<&str> = clean.iter().map(String::as_str).collect();
    let clean = mpiexec(&clean, &env, LIMIT);
    assert!(clean.ok(), "{}", clean.stderr);
    for mode in ["stages", "reinit", "cpr"] {
        let a = args(&["--recovery", mode, "--inject", "rank=1,checkpoint=40"]);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let r = mpiexec(&a, &env, LIMIT);
        assert!(r.ok(), "{mode}: {}", r.stderr);
        assert!(r.stderr.contains("recovery 1 done"), "{mode}: {}", r.stderr);
        assert_eq!(checksum(&clean), checksum(&r), "{mode}: {}", r.stderr);
    }
}

/// The pids of mpiexec `parent`'s ranks, by rank (waits until all `n` run).
fn rank_pids(parent: u32, n: usize) -> Vec<i32> {
    let start = std::time::Instant::now();
    loop {
        let mut found: Vec<(usize, i32)> = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            let after = &stat[stat.rfind(')').unwrap_or(0) + 1..];
            if after.split_whitespace().nth(1) != Some(parent.to_string().as_str()) {
                continue;
            }
            let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
            let rank = env.split(|&b| b == 0).find_map(|kv| {
                String::from_utf8_lossy(kv)
                    .strip_prefix("MPISTAGES_RANK=")
                    .and_then(|r| r.parse::<usize>().ok())
            });
            if let Some(r) = rank {
                found.push((r, pid));
            }
        }
        found.sort();
        if found.len() >= n {
            return found.into_iter().map(|(_, p)| p).collect();
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "ranks never started: {found:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a test does to the ranks of a running job (given their pids).
type Stop<'a> = Option<&'a dyn Fn(&[i32])>;

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill takes no pointers; the pid is a rank of our mpiexec.
    unsafe { libc::kill(pid, sig) };
}

/// Campaign cause 2: over UDP a live rank silent for longer than the
/// connections' limit (SIGSTOP) made the job hang forever without a word,
/// in every mode. Now: a pause shorter than the limit is survived with no
/// recovery; a longer one ends that rank for good (mpiexec kills it on a
/// peer's report) and the job recovers (stages) or ends saying why (none);
/// a pause of the whole job (every rank stopped, as a VM freeze) is not a
/// failure of anyone.
#[test]
fn a_stopped_rank_over_udp_is_taken_back_or_ended_for_good() {
    let exe = build_example("stencil2d.c");
    let exe = exe.to_str().unwrap().to_string();
    let env = [("MPISTAGES_UDP_SILENCE", "2")];
    let run = |mode: &str, stop: Stop| -> common::Run {
        let child = common::command(common::bin("mpiexec"))
            .args(["--transport", "udp", "--recovery", mode, "-n", "3", &exe])
            .args(["240", "8000", "10", "protect"])
            .envs(env)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(stop) = stop {
            let pids = rank_pids(child.id(), 3);
            std::thread::sleep(Duration::from_millis(300));
            stop(&pids);
        }
        common::finish(child, "mpiexec", LIMIT)
    };
    let pause = |which: Vec<usize>, secs: f64| {
        move |pids: &[i32]| {
            for &r in &which {
                signal(pids[r], libc::SIGSTOP);
            }
            std::thread::sleep(Duration::from_secs_f64(secs));
            for &r in &which {
                signal(pids[r], libc::SIGCONT);
            }
        }
    };
    let clean = run("stages", None);
    assert!(clean.ok(), "{}", clean.stderr);
    let short = run("stages", Some(&pause(vec![1], 0.8)));
    assert!(short.ok(), "short pause: {}", short.stderr);
    assert!(
        !short.stderr.contains("recovery 1"),
        "short pause: {}",
        short.stderr
    );
    assert_eq!(checksum(&clean), checksum(&short), "{}", short.stderr);
    let all = run("stages", Some(&pause(vec![0, 1, 2], 3.0)));
    assert!(all.ok(), "whole job paused: {}", all.stderr);
    assert!(
        !all.stderr.contains("recovery 1"),
        "whole job paused: {}",
        all.stderr
    );
    assert_eq!(checksum(&clean), checksum(&all), "{}", all.stderr);
    let long = run("stages", Some(&pause(vec![1], 5.0)));
    assert!(long.ok(), "long pause: {}", long.stderr);
    assert!(
        long.stderr
            .contains("reports that its connection to rank 1 failed")
            && long.stderr.contains("recovery 1 done"),
        "long pause: {}",
        long.stderr
    );
    assert_eq!(checksum(&clean), checksum(&long), "{}", long.stderr);
    let none = run("none", Some(&pause(vec![1], 5.0)));
    assert!(!none.ok(), "none: {}", none.stderr);
    assert!(
        none.stderr
            .contains("reports that its connection to rank 1 failed"),
        "none: {}",
        none.stderr
    );
}
