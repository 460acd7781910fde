//! ULFM (`mpiexec --with-ft ulfm`): real processes, real SIGKILLs. The
//! survivors get MPIX_ERR_PROC_FAILED, revoke, agree (also with a failure
//! during the agreement), acknowledge and shrink, with values checked
//! (tests/c/ulfm.c), and the job ends well without the dead ranks.

mod common;
use common::{build, mpiexec};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn survivors_revoke_agree_acknowledge_and_shrink() {
    let exe = build("ulfm.c");
    for np in [4, 5] {
        let n = np.to_string();
        let r = mpiexec(
            &["-n", &n, "--with-ft", "ulfm", exe.to_str().unwrap()],
            &[],
            LIMIT,
        );
        let what = format!("{np} ranks: {:?}\n{}\n{}", r.status, r.stdout, r.stderr);
        assert!(r.ok(), "{what}");
        for x in 0..np - 2 {
            assert!(r.stdout.contains(&format!("ulfm ok {x}\n")), "{what}");
        }
        for x in [np - 2, np - 1] {
            assert!(!r.stdout.contains(&format!("ulfm ok {x}\n")), "{what}");
            assert!(
                r.stderr.contains(&format!("rank {x} (pid"))
                    && r.stderr.contains("the job goes on without it (ULFM)"),
                "{what}"
            );
        }
    }
}
