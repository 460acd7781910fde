//! `mpiexec --restart DIR`: where a new job starts when an earlier run of
//! it ended (a crash of the whole job, the end of an allocation). DIR is a
//! `pfs` level's directory (`epoch-E/rank-R.ckpt`); node-local copies do
//! not outlive their job (the next mpiexec on the host removes them). The
//! newest epoch that every rank has a valid file of is chosen, and the job
//! those files belong to: the restarted job reads them under that job's
//! identity (`MPISTAGES_RESTART_FROM`).

use mpistages::checkpoint::dirlevel::DirLevel;
use mpistages::checkpoint::format;
use std::path::Path;

/// The epoch to start from, and the job that wrote it.
#[derive(Debug, PartialEq, Eq)]
pub struct Found {
    pub epoch: u64,
    pub job: u64,
}

/// Checks that `dir` is a pfs level of the job's checkpoint levels (`spec`)
/// — the ranks read their files through it — and finds where to start;
/// says on stderr what it passed over and what it chose.
pub fn prepare(dir: &Path, spec: &str, ranks: usize) -> Result<Found, String> {
    let cfg = mpistages::checkpoint::config::parse(spec).map_err(|e| format!("--ckpt: {e}"))?;
    let same = |d: &Path| match (d.canonicalize(), dir.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => d == dir,
    };
    let on_pfs = cfg
        .levels
        .iter()
        .any(|l| matches!(l, mpistages::checkpoint::config::Level::Pfs { dir: d, .. } if same(d)));
    if !on_pfs {
        return Err(format!(
            "--restart {0}: the job's checkpoint levels must include pfs:{0} (--ckpt ...,pfs:{0}), \
             through which its ranks read their files",
            dir.display()
        ));
    }
    let mut passed = Vec::new();
    let found = find(dir, ranks, &mut passed);
    for p in &passed {
        crate::say!("mpiexec: --restart: passed over {p}");
    }
    let found = found?;
    crate::say!(
        "mpiexec: restarting from epoch {} of {} (checkpoints of job {})",
        found.epoch,
        dir.display(),
        found.job
    );
    Ok(found)
}

/// The newest epoch in `dir` of which all `ranks` ranks have a valid file
/// of one job of that size. Files are read and their checksums verified
/// (the ranks verify them again as they restore); an epoch with a missing
/// or invalid file is passed over, and said so in `passed`.
pub fn find(dir: &Path, ranks: usize, passed: &mut Vec<String>) -> Result<Found, String> {
    let level = DirLevel::new(dir, true, 1);
    let epochs = level
        .epochs()
        .map_err(|e| format!("--restart {}: {e}", dir.display()))?;
    if epochs.is_empty() {
        return Err(format!(
            "--restart {}: no checkpoint epoch there (a pfs level writes epoch-E/rank-R.ckpt)",
            dir.display()
        ));
    }
    let mut sizes = Vec::new();
    'epochs: for &epoch in epochs.iter().rev() {
        let mut job = None;
        for rank in 0..ranks {
            let path = level.path(epoch, rank as u32);
            // A differential checkpoint counts only with its whole chain.
            let read = format::read(&path, None).and_then(|ck| match ck.diff.is_empty() {
                true => Ok(ck.who),
                false => level.read(&ck.who).map(|c| c.who),
            });
            let who = match read.map_err(|e| e.to_string()) {
                Ok(who) => who,
                Err(why) => {
                    passed.push(format!("epoch {epoch}: {}: {why}", path.display()));
                    continue 'epochs;
                }
            };
            if who.size as usize != ranks {
                sizes.push(who.size);
                passed.push(format!(
                    "epoch {epoch}: written by a job of {} ranks, not {ranks}",
                    who.size
                ));
                continue 'epochs;
            }
            if who.epoch != epoch
                || who.rank as usize != rank
                || *job.get_or_insert(who.job) != who.job
            {
                passed.push(format!(
                    "epoch {epoch}: {} belongs to another job or place",
                    path.display()
                ));
                continue 'epochs;
            }
        }
        return Ok(Found {
            epoch,
            job: job.expect("at least one rank"),
        });
    }
    let hint = match sizes.first() {
        Some(s) if sizes.iter().all(|x| x == s) => {
            format!(" (its checkpoints are of {s} ranks: start it with -n {s})")
        }
        _ => String::new(),
    };
    Err(format!(
        "--restart {}: no epoch that all {ranks} ranks have a valid copy of{hint}",
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpistages::checkpoint::format::{Compression, Identity, Kind, Section};

    fn write(dir: &Path, job: u64, size: u32, epoch: u64, rank: u32) {
        let level = DirLevel::new(dir, false, 9);
        let who = Identity {
            job,
            rank,
            size,
            epoch,
            generation: 0,
        };
        let s = [Section {
            kind: Kind::Protected,
            id: 0,
            name: String::new(),
            data: vec![rank as u8; 100].into(),
        }];
        level.write(&who, &s, Compression::Off).unwrap();
    }

    #[test]
    fn the_newest_epoch_every_rank_has_whole() {
        let tmp = Tmp::new("restart-find");
        let d = tmp.0.clone();
        for e in 1..=3 {
            for r in 0..3 {
                write(&d, 77, 3, e, r);
            }
        }
        // Epoch 4: rank 2's file missing; epoch 3: rank 1's corrupt.
        write(&d, 77, 3, 4, 0);
        write(&d, 77, 3, 4, 1);
        let p = DirLevel::new(&d, false, 9).path(3, 1);
        let mut b = std::fs::read(&p).unwrap();
        let n = b.len();
        b[n - 20] ^= 0xff;
        std::fs::write(&p, b).unwrap();
        let mut passed = Vec::new();
        assert_eq!(find(&d, 3, &mut passed), Ok(Found { epoch: 2, job: 77 }));
        assert_eq!(passed.len(), 2, "{passed:?}");
        // Another size: refused, with the size to use.
        let err = find(&d, 4, &mut Vec::new()).unwrap_err();
        assert!(err.contains("-n 3"), "{err}");
        assert!(find(&d.join("none"), 3, &mut Vec::new())
            .unwrap_err()
            .contains("no checkpoint epoch"));
    }

    /// A directory of this test, removed when it ends (passed or failed).
    struct Tmp(std::path::PathBuf);

    impl Tmp {
        fn new(tag: &str) -> Tmp {
            let d = std::env::temp_dir().join(format!("mpistages-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Tmp(d)
        }
    }

    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
