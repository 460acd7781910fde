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
