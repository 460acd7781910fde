//! The fault campaign and the soak, as users run them
//! (`mpistages-bench campaign`, `mpistages-bench soak`): a short seeded
//! campaign over the examples in every mode, a third of it beside CPU hogs,
//! must have no wrong result, no hang and no crash; a job with many
//! recoveries must keep its survivor's descriptors, threads and memory and
//! mpiexec's threads flat, and leave nothing behind.

mod common;
use common::bin;

#[test]
fn a_quick_seeded_campaign_is_all_correct_or_clean() {
    let out = common::Scratch::new("campaign");
    let r = common::command(bin("mpistages-bench"))
        .args([
            "campaign",
            "--quick",
            "--runs",
            "24",
            "--seed",
            "2026",
            "--out",
            out.path(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stdout}\n{stderr}");
    let all = stdout
        .lines()
        .find(|l| l.starts_with("all "))
        .unwrap_or_else(|| panic!("no summary:\n{stdout}"));
    let n: Vec<usize> = all
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    // correct, clean-error, wrong, hang, crash
    assert_eq!(n.iter().sum::<usize>(), 24, "{stdout}");
    assert_eq!(&n[2..], &[0, 0, 0], "{stdout}\n{stderr}");
    assert!(n[0] >= 12, "too few recovered runs:\n{stdout}");
    let csv = std::fs::read_to_string(out.0.join("campaign.csv")).unwrap();
    assert_eq!(csv.lines().count(), 25, "{csv}");
}

#[test]
fn a_soak_of_many_recoveries_stays_flat() {
    let r = common::command(bin("mpistages-bench"))
        .args(["soak", "--recoveries", "40"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("soak: 40 recoveries"), "{stdout}");
    assert!(
        stdout.contains("identical to the failure-free run; left in the checkpoint root: []"),
        "{stdout}"
    );
    // "WHO after 10 recoveries: LO-HI fds, LO-HI threads, M KB; after 40: ... : flat"
    // (the tool compares the fewest at the end with the most early on).
    for who in ["rank 0", "mpiexec"] {
        let line = stdout.lines().find(|l| l.starts_with(who)).unwrap();
        assert!(line.ends_with(": flat"), "{who}: {line}");
    }
}
