//! The control-plane simulator (`mpistages-bench simulate`) against the
//! real runtime: one recovery of a real job (a rank SIGKILLed by fault
//! injection) and the same recovery simulated, flat on one host and
//! through the agents over namespace hosts (one level of the tree, and
//! two), must have mpiexec take in and send the same messages of each
//! kind. (Times
//! are compared in bench/scale: no timing here.)

mod common;
use common::netns::Hosts;
use common::*;
use launcher::simulate::model::{Mode, Setup, Sim};
use std::collections::BTreeMap;
use std::time::Duration;

/// `in: 7 halted, 1 hello; out: 7 failure` → {("in", "halted"): 7, ...}.
fn parse_counts(s: &str) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for side in s.split("; ") {
        let Some((dir, list)) = side.split_once(": ") else {
            continue;
        };
        for item in list.split(", ") {
            if let Some((n, kind)) = item.split_once(' ') {
                if let Ok(n) = n.parse() {
                    out.insert((dir.to_string(), kind.to_string()), n);
                }
            }
        }
    }
    out
}

/// The kinds both sides have (a spare's `assign`, a late checkpoint
/// report, are the real runtime's own).
const COMPARED: [&str; 7] = [
    "halted", "hello", "ready", "restored", "failure", "welcome", "resume",
];

fn compared(m: &BTreeMap<(String, String), u64>) -> BTreeMap<(String, String), u64> {
    m.iter()
        .filter(|((_, k), _)| COMPARED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// Counts of a real recovery of `n` ranks (the last one killed), on this
/// machine or over `hosts` (`n / hosts` each, the agents relaying; a tree
/// of `radix`).
fn real_counts(
    mode: &str,
    n: usize,
    hosts: Option<&Hosts>,
    radix: usize,
) -> BTreeMap<(String, String), u64> {
    let exe = build_example("stencil2d.c");
    let dir = Scratch::new(&format!("simulate-{mode}-{n}"));
    let ckpt = format!("mem,tmpfs:{}", dir.path());
    let victim = (n - 1).to_string();
    let inject = format!("rank={victim},call=MPI_Allreduce:25");
    let np = n.to_string();
    let mut args: Vec<String> = Vec::new();
    if let Some(h) = hosts {
        let per = n / h.names.len();
        let list: Vec<String> = h.names.iter().map(|x| format!("{x}:{per}")).collect();
        args.extend(
            [
                "--host",
                &list.join(","),
                "--launcher-exec",
                "ip netns exec",
                "--control-addr",
                &h.gateway,
            ]
            .map(String::from),
        );
    }
    args.extend(
        [
            "-n",
            &np,
            "--recovery",
            mode,
            "--ckpt",
            &ckpt,
            "--inject",
            &inject,
            exe.to_str().unwrap(),
            // Splits over every grid here (2x2 ... 4x4, 2x5).
            "80",
            "120",
            "5",
            "protect",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // A window of a minute: every step of every host goes up as one (a
    // report that does not complete its step would show in the counts).
    let radix = radix.to_string();
    let r = mpiexec(
        &args,
        &[
            ("MPISTAGES_FAN_WINDOW_MS", "60000"),
            ("MPISTAGES_TREE_RADIX", &radix),
        ],
        Duration::from_secs(120),
    );
    assert!(r.ok(), "{}", r.stderr);
    let line = r
        .stderr
        .lines()
        .find(|l| l.contains("recovery 1 done"))
        .unwrap_or_else(|| panic!("no recovery line:\n{}", r.stderr));
    let counts = line
        .split("control messages since the failure, ")
        .nth(1)
        .unwrap_or_else(|| panic!("no counts: {line}"));
    parse_counts(counts)
}

/// Counts of the simulated recovery: flat on one host (`hosts` 0), or
/// through a tree of agents of `radix` on `hosts` hosts.
fn simulated_counts(
    mode: Mode,
    n: usize,
    hosts: usize,
    radix: usize,
) -> BTreeMap<(String, String), u64> {
    let setup = Setup {
        ranks: n,
        hosts: hosts.max(1),
        cores_per_host: 2,
        radix,
        mode,
    };
    let out = Sim::new(setup, launcher::simulate::rank_costs()).run(n - 1);
    assert!(out.complete, "the simulation did not resume every rank");
    parse_counts(&out.root_kinds)
}

#[test]
fn the_simulated_recovery_has_the_real_runtimes_messages() {
    for (mode, name, n) in [
        (Mode::Stages, "stages", 4),
        (Mode::Stages, "stages", 16),
        (Mode::Reinit, "reinit", 8),
        (Mode::Cpr, "cpr", 8),
    ] {
        let real = compared(&real_counts(name, n, None, 32));
        let sim = compared(&simulated_counts(mode, n, 0, 0));
        assert!(
            real.get(&("in".to_string(), "ready".to_string())) == Some(&(n as u64)),
            "{name} at {n}: {real:?}"
        );
        assert_eq!(real, sim, "{name} at {n} ranks: real (left) and simulated");
    }
}

#[test]
fn the_agents_relay_as_the_simulated_tree_does() {
    let h = match Hosts::new(2) {
        Ok(h) => h,
        Err(why) => {
            common::skipped(&why);
            return;
        }
    };
    for (mode, name) in [
        (Mode::Stages, "stages"),
        (Mode::Reinit, "reinit"),
        (Mode::Cpr, "cpr"),
    ] {
        let real = compared(&real_counts(name, 8, Some(&h), 32));
        let sim = compared(&simulated_counts(mode, 8, 2, 2));
        // One report per host and step: not one per rank.
        assert!(
            real.get(&("in".to_string(), "ready".to_string())) == Some(&2),
            "{name}: {real:?}"
        );
        assert_eq!(real, sim, "{name} over 2 hosts: real (left) and simulated");
    }
}

/// Five hosts in a tree of radix 2 (two levels below mpiexec; the last
/// rank, killed, is on host 4, below host 1): the real agents and the
/// simulated ones merge and split alike.
#[test]
fn a_deeper_tree_of_agents_relays_as_the_simulated_one_does() {
    let h = match Hosts::new(5) {
        Ok(h) => h,
        Err(why) => {
            common::skipped(&why);
            return;
        }
    };
    for (mode, name) in [
        (Mode::Stages, "stages"),
        (Mode::Reinit, "reinit"),
        (Mode::Cpr, "cpr"),
    ] {
        let real = compared(&real_counts(name, 10, Some(&h), 2));
        let sim = compared(&simulated_counts(mode, 10, 5, 2));
        // One report per child of mpiexec and step.
        assert!(
            real.get(&("in".to_string(), "ready".to_string())) == Some(&2),
            "{name}: {real:?}"
        );
        assert_eq!(
            real, sim,
            "{name} over 5 hosts, radix 2: real (left) and simulated"
        );
    }
}

#[test]
fn the_tree_keeps_mpiexecs_messages_to_its_children() {
    // 4096 ranks on 64 hosts, radix 8: mpiexec hears from 8 agents per
    // step, not from 4096 ranks; the busiest agent from its 8 children and
    // its 64 ranks.
    let costs = launcher::simulate::rank_costs();
    for mode in [Mode::Stages, Mode::Reinit, Mode::Cpr, Mode::Ulfm] {
        let setup = |radix| Setup {
            ranks: 4096,
            hosts: 64,
            cores_per_host: 64,
            radix,
            mode,
        };
        let flat = Sim::new(setup(0), costs).run(4000);
        let tree = Sim::new(setup(8), costs).run(4000);
        assert!(flat.complete && tree.complete, "{mode:?}");
        assert!(
            flat.root_msgs >= 4096 * 2,
            "{mode:?}: flat {}",
            flat.root_msgs
        );
        // A few messages per child per step (and the replacement's own).
        assert!(
            tree.root_msgs <= 8 * 12,
            "{mode:?}: tree {}",
            tree.root_msgs
        );
        assert!(
            tree.agent_msgs <= 12 * (8 + 64),
            "{mode:?}: agent {}",
            tree.agent_msgs
        );
        assert!(
            tree.detect_to_resumed_ms < flat.detect_to_resumed_ms,
            "{mode:?}: the tree is faster ({} against {} ms)",
            tree.detect_to_resumed_ms,
            flat.detect_to_resumed_ms
        );
    }
}
