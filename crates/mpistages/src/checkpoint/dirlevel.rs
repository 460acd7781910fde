//! A storage level kept in a directory (tmpfs or a parallel file system):
//! `ROOT/epoch-E/rank-R.ckpt`. Each rank writes, reads and removes only its
//! own files, so ranks sharing a directory never race on each other's.
//! The file of an epoch that is no longer kept is not removed but parked as
//! `ROOT/free-N-rank-R.ckpt` and overwritten by the rank's next checkpoint:
//! on tmpfs, allocating the pages of a new file and freeing those of the
//! old one cost several times the copy itself; on a disk, the blocks of
//! the old file need not be freed (and discarded) and new ones allocated.

use super::diff::{self, Plan};
use super::format::{self, AsSection, Checkpoint, CkptError, Compression, Identity, WriteStats};
use std::io;
use std::path::{Path, PathBuf};

#[derive(Clone)]
pub struct DirLevel {
    root: PathBuf,
    /// fsync files and directories (a durable level); tmpfs needs none.
    durable: bool,
    /// Committed epochs kept.
    keep: usize,
    /// Epochs kept before the oldest kept one, that differential
    /// checkpoints may be based on (`diff::Differ::reach`).
    reach: u64,
}

impl DirLevel {
    pub fn new(root: impl Into<PathBuf>, durable: bool, keep: usize) -> DirLevel {
        DirLevel {
            root: root.into(),
            durable,
            keep: keep.max(1),
            reach: 0,
        }
    }

    /// Keeps `reach` more epochs before the oldest kept one (the chains of
    /// differential checkpoints).
    pub fn with_reach(mut self, reach: u64) -> DirLevel {
        self.reach = reach;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn epoch_dir(&self, epoch: u64) -> PathBuf {
        self.root.join(format!("epoch-{epoch}"))
    }

    /// Creates an epoch's directory, 0700. A node-local level's root is the
    /// job's own directory (parked files sit there) and is made 0700 too; a
    /// durable level's root is the user's, and keeps the mode it has.
    fn make_epoch_dir(&self, epoch: u64) -> io::Result<PathBuf> {
        if !self.durable {
            mpistages_sys::file::create_private_dir(&self.root)?;
        }
        let dir = self.epoch_dir(epoch);
        mpistages_sys::file::create_private_dir(&dir)?;
        Ok(dir)
    }

    pub fn path(&self, epoch: u64, rank: u32) -> PathBuf {
        self.epoch_dir(epoch).join(format!("rank-{rank}.ckpt"))
    }

    /// Where the level parks a rank's old files for its next writes. Two
    /// places: an old epoch is parked (by the level's thread) about when
    /// the next write starts, and must not take the place of the file that
    /// write is about to reuse (freeing it instead).
    fn free_paths(&self, rank: u32) -> [PathBuf; 2] {
        [0, 1].map(|i| self.root.join(format!("free-{i}-rank-{rank}.ckpt")))
    }

    /// The parked old files of `rank`, to overwrite with a new checkpoint.
    pub fn parked(&self, rank: u32) -> Vec<PathBuf> {
        self.free_paths(rank)
            .into_iter()
            .filter(|p| p.exists())
            .collect()
    }

    /// Removes `rank`'s parked files (the job is over).
    pub fn remove_parked(&self, rank: u32) {
        for p in self.free_paths(rank) {
            let _ = std::fs::remove_file(p);
        }
    }

    /// Parks `file` for reuse; false if both places are taken.
    fn park(&self, file: &Path, rank: u32) -> bool {
        // A new name without replacing another parked file (rename would).
        for to in self.free_paths(rank) {
            if std::fs::hard_link(file, &to).is_ok() {
                if std::fs::remove_file(file).is_ok() {
                    return true;
                }
                // Still an epoch's file: it must never be overwritten.
                let _ = std::fs::remove_file(&to);
                return false;
            }
        }
        false
    }

    /// Writes this rank's checkpoint for `who.epoch`. On failure (disk full,
    /// …) nothing is left under the final name and older epochs are intact.
    pub fn write<S: AsSection>(
        &self,
        who: &Identity,
        sections: &[S],
        compression: Compression,
    ) -> io::Result<WriteStats> {
        self.write_diff(who, sections, compression, None)
    }

    /// `write`, differential on the epoch `diff` names where it says so.
    pub fn write_diff<S: AsSection>(
        &self,
        who: &Identity,
        sections: &[S],
        compression: Compression,
        diff: Option<&Plan>,
    ) -> io::Result<WriteStats> {
        self.make_epoch_dir(who.epoch)?;
        format::write_diff(
            &self.path(who.epoch, who.rank),
            who,
            sections,
            compression,
            self.durable,
            &self.parked(who.rank),
            diff,
        )
    }

    /// This rank's checkpoint of `who.epoch`, whole: a differential one is
    /// completed from the chain of epochs it is based on, each file
    /// verified; a missing or damaged link is an error naming it.
    pub fn read(&self, who: &Identity) -> Result<Checkpoint, CkptError> {
        let mut ck = format::read(&self.path(who.epoch, who.rank), Some(who))?;
        let mut chain = Vec::new();
        let mut epoch = who.epoch;
        while !ck.diff.is_empty() {
            let base = diff_base(&ck, epoch)?;
            if chain.len() >= diff::MAX_CHAIN {
                return Err(CkptError::Corrupt(
                    "chain of differential checkpoints too long".into(),
                ));
            }
            let at = Identity {
                epoch: base,
                ..*who
            };
            let next = format::read(&self.path(base, who.rank), Some(&at)).map_err(|e| {
                CkptError::Corrupt(format!(
                    "epoch {epoch} is differential on epoch {base}, which cannot be read: {e}"
                ))
            })?;
            chain.push(std::mem::replace(&mut ck, next));
            epoch = base;
        }
        // `ck` is whole; apply the differences from the oldest on.
        while let Some(mut top) = chain.pop() {
            for &i in &top.diff {
                let s = &top.sections[i];
                let under = ck
                    .sections
                    .iter()
                    .find(|b| (b.kind, b.id, &b.name) == (s.kind, s.id, &s.name))
                    .ok_or_else(|| {
                        CkptError::Corrupt(format!(
                            "differential section {i} of epoch {} has no base section",
                            top.who.epoch
                        ))
                    })?;
                let whole = diff::apply(&under.data, &s.data, under.data.len() as u64)
                    .map_err(|e| CkptError::Corrupt(format!("epoch {}: {e}", top.who.epoch)))?;
                top.sections[i].data = whole.into();
            }
            top.diff.clear();
            top.stored_bytes += ck.stored_bytes;
            ck = top;
        }
        Ok(ck)
    }

    /// Epochs present in this level (for any rank), ascending.
    pub fn epochs(&self) -> io::Result<Vec<u64>> {
        let mut v = Vec::new();
        match std::fs::read_dir(&self.root) {
            Ok(entries) => {
                for e in entries {
                    let name = e?.file_name();
                    if let Some(n) = name
                        .to_string_lossy()
                        .strip_prefix("epoch-")
                        .and_then(|n| n.parse().ok())
                    {
                        v.push(n);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        v.sort_unstable();
        Ok(v)
    }

    /// `commit` when all there is to do is park one old file (the usual
    /// case at a checkpoint): done, true. False when files must be
    /// unlinked, which can take long (a large file's pages or blocks):
    /// that is for the level's thread.
    pub fn commit_quick(&self, rank: u32, committed: u64) -> io::Result<bool> {
        let mut old = self.old_epochs(committed)?;
        old.retain(|&e| self.path(e, rank).exists());
        Ok(match old[..] {
            [] => true,
            [e] if self.park(&self.path(e, rank), rank) => {
                // Other ranks' files may still be there: then it stays.
                let _ = std::fs::remove_dir(self.epoch_dir(e));
                true
            }
            _ => false,
        })
    }

    /// Epoch `committed` is complete on every rank: remove this rank's
    /// files of epochs older than the newest `keep` committed ones (never a
    /// newer, uncommitted epoch), and epoch directories left empty.
    pub fn commit(&self, rank: u32, committed: u64) -> io::Result<()> {
        let old = self.old_epochs(committed)?;
        for &e in &old {
            // The newest old file is parked for reuse, the others removed.
            let parked = Some(&e) == old.last() && self.park(&self.path(e, rank), rank);
            if !parked {
                match std::fs::remove_file(self.path(e, rank)) {
                    Ok(()) => {}
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                    Err(err) => return Err(err),
                }
            }
            // Other ranks' files may still be there: then it stays.
            let _ = std::fs::remove_dir(self.epoch_dir(e));
        }
        Ok(())
    }

    /// Where `holder` keeps, on this level, the copy of `epoch` it holds
    /// for the rank it is partner of (as received: the bytes of that
    /// rank's checkpoint file, which say whose they are).
    pub fn held_path(&self, epoch: u64, holder: u32) -> PathBuf {
        self.epoch_dir(epoch).join(format!("held-by-{holder}.ckpt"))
    }

    /// Writes a held copy (under a temporary name first: a copy under the
    /// final name is whole).
    pub fn write_held(&self, epoch: u64, holder: u32, bytes: &[u8]) -> io::Result<()> {
        self.make_epoch_dir(epoch)?;
        let path = self.held_path(epoch, holder);
        let tmp = path.with_extension("part");
        mpistages_sys::file::write_private(&tmp, bytes)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .inspect_err(|_| {
                let _ = std::fs::remove_file(&tmp);
            })
    }

    /// The held copy of `epoch`, if this level has it.
    pub fn read_held(&self, epoch: u64, holder: u32) -> Option<Vec<u8>> {
        std::fs::read(self.held_path(epoch, holder)).ok()
    }

    /// Removes `holder`'s held copies of epochs before `first_kept` (and
    /// the epoch directories they leave empty); how many.
    pub fn remove_held_before(&self, holder: u32, first_kept: u64) -> usize {
        let mut n = 0;
        for e in self.epochs().unwrap_or_default() {
            if e < first_kept && std::fs::remove_file(self.held_path(e, holder)).is_ok() {
                n += 1;
                let _ = std::fs::remove_dir(self.epoch_dir(e));
            }
        }
        n
    }

    /// Epochs present here that `committed` makes old (older than the
    /// newest `keep` committed ones), ascending.
    fn old_epochs(&self, committed: u64) -> io::Result<Vec<u64>> {
        let oldest_kept = committed.saturating_sub(self.keep as u64 - 1 + self.reach);
        let mut old = self.epochs()?;
        old.retain(|&e| e < oldest_kept);
        Ok(old)
    }
}

/// The one base epoch of a checkpoint's differential sections, older
/// than its own.
fn diff_base(ck: &Checkpoint, epoch: u64) -> Result<u64, CkptError> {
    let mut base = None;
    for &i in &ck.diff {
        let b = diff::base_of(&ck.sections[i].data).map_err(CkptError::Corrupt)?;
        if b >= epoch || base.is_some_and(|x| x != b) {
            return Err(CkptError::Corrupt(format!(
                "epoch {epoch} names base epoch {b} (sections disagree or it is not older)"
            )));
        }
        base = Some(b);
    }
    base.ok_or_else(|| CkptError::Corrupt("no differential section".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::format::{Kind, Section};
    use crate::checkpoint::testutil::Scratch;

    fn scratch(tag: &str) -> Scratch {
        Scratch::new(&format!("dirlevel-{tag}"))
    }

    fn who(rank: u32, epoch: u64) -> Identity {
        Identity {
            job: 1,
            rank,
            size: 2,
            epoch,
            generation: 0,
        }
    }

    fn data(n: usize, seed: u8) -> Vec<Section> {
        vec![Section {
            kind: Kind::Protected,
            id: 1,
            name: String::new(),
            data: (0..n).map(|i| (i as u8).wrapping_mul(seed)).collect(),
        }]
    }

    #[test]
    fn keep_removes_only_old_committed_epochs_of_this_rank() {
        let s = scratch("keep");
        let level = DirLevel::new(&s.0, false, 2);
        for e in 1..=4 {
            for r in 0..2 {
                level
                    .write(&who(r, e), &data(100, e as u8), Compression::Off)
                    .unwrap();
            }
        }
        // Rank 0 commits epoch 3: epochs 2 and 3 stay, 1 goes; 4 is newer.
        level.commit(0, 3).unwrap();
        assert!(!level.path(1, 0).exists());
        assert!(level.path(1, 1).exists(), "another rank's file was removed");
        for e in 2..=4 {
            assert_eq!(level.read(&who(0, e)).unwrap().sections, data(100, e as u8));
        }
        level.commit(1, 3).unwrap();
        assert_eq!(level.epochs().unwrap(), vec![2, 3, 4]);
        // Epoch 1's files were parked, and the next write of each rank
        // takes its own.
        for r in 0..2 {
            assert!(level.free_paths(r)[0].exists());
            level
                .write(&who(r, 5), &data(50, 5), Compression::Off)
                .unwrap();
            assert!(!level.free_paths(r)[0].exists());
            assert_eq!(level.read(&who(r, 5)).unwrap().sections, data(50, 5));
        }
        // Two places per rank: a third old file is removed.
        let s = scratch("keep-durable");
        let level = DirLevel::new(&s.0, true, 1);
        for e in 1..=4 {
            level
                .write(&who(0, e), &data(100, 1), Compression::Off)
                .unwrap();
        }
        for e in 2..=4 {
            level.commit(0, e).unwrap();
        }
        assert!(level.free_paths(0).iter().all(|p| p.exists()));
        assert_eq!(level.epochs().unwrap(), vec![4]);
    }

    /// The quick commit parks a single old file and leaves anything more
    /// (files to unlink) alone, for the level's thread.
    #[test]
    fn a_quick_commit_only_parks() {
        let s = scratch("quick");
        let level = DirLevel::new(&s.0, false, 2);
        for e in 1..=4 {
            level
                .write(&who(0, e), &data(100, e as u8), Compression::Off)
                .unwrap();
        }
        assert!(level.commit_quick(0, 3).unwrap());
        assert_eq!(level.epochs().unwrap(), vec![2, 3, 4]);
        assert!(!level.parked(0).is_empty());
        // Epochs 2 and 3 are old at commit 5: two files, one to unlink.
        assert!(!level.commit_quick(0, 5).unwrap());
        assert_eq!(level.epochs().unwrap(), vec![2, 3, 4]);
        level.commit(0, 5).unwrap();
        assert_eq!(level.epochs().unwrap(), vec![4]);
    }

    /// A real full disk: a 64 KiB tmpfs. The write fails with an error, the
    /// failed epoch leaves no file, and the previous one is intact.
    #[test]
    fn disk_full_is_an_error_and_keeps_the_previous_checkpoint() {
        let s = scratch("full");
        std::fs::create_dir_all(&s.0).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs"])
            .arg(&s.0)
            .status()
            .is_ok_and(|st| st.success());
        if !mounted {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must be able to mount a tmpfs (root)"
            );
            println!("SKIPPED: disk-full test needs permission to mount a tmpfs");
            return;
        }
        struct Unmount<'a>(&'a Path);
        impl Drop for Unmount<'_> {
            fn drop(&mut self) {
                let _ = std::process::Command::new("umount").arg(self.0).status();
            }
        }
        let _unmount = Unmount(&s.0);
        let level = DirLevel::new(&s.0, true, 2);
        level
            .write(&who(0, 1), &data(10_000, 3), Compression::Off)
            .unwrap();
        let err = level
            .write(&who(0, 2), &data(200_000, 5), Compression::Off)
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
        assert!(!level.path(2, 0).exists());
        let leftovers: Vec<_> = std::fs::read_dir(s.0.join("epoch-2")).unwrap().collect();
        assert!(
            leftovers.is_empty(),
            "temporary file left behind: {leftovers:?}"
        );
        assert_eq!(level.read(&who(0, 1)).unwrap().sections, data(10_000, 3));
    }
}
