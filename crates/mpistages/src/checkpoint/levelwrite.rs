//! The directory levels' part of writing an epoch: node-local files
//! (`tmpfs`), and durable ones (`pfs`, written directly or copied in the
//! background from the node-local file). `Store::write` does it while the
//! program waits when no memory level comes first; when one does, the
//! program waits only for the copy in memory, and a thread of its own
//! writes the files from that copy (`LevelWrites::run`). The epoch is then
//! reported to mpiexec, and can commit, only once its files are written:
//! an epoch never commits before a restore finds it where it will look.

use super::diff::{Differ, Plan};
use super::flush::Flusher;
use super::format::{AsSection, Compression, Identity, WriteStats};
use super::memcopy::MemCopy;
use std::path::PathBuf;
use std::sync::Arc;

/// One directory level of an epoch's write.
pub(super) struct DirTask {
    /// The level's index in the store.
    pub index: usize,
    pub name: String,
    pub flusher: Arc<Flusher>,
    /// A durable level, written every that many epochs; `None`: node-local.
    pub every: Option<u64>,
    /// The level has the epoch before: a differential file may go there.
    pub on_last: bool,
}

/// What one level's write gave.
pub(super) struct Outcome {
    pub index: usize,
    pub name: String,
    /// Its file's bytes, or the error and the file it was writing.
    pub result: Result<WriteStats, (std::io::Error, Option<PathBuf>)>,
    /// The file holds only the blocks that changed.
    pub partial: bool,
}

/// Whether `plan` makes a differential file (some section changed only in
/// part).
pub(super) fn plan_used(plan: Option<&Plan>) -> bool {
    plan.is_some_and(|d| d.changed.iter().any(Option::is_some))
}

/// With `diff`: which blocks of `sections` changed since the epoch
/// before (`None`: a full checkpoint).
pub(super) fn plan_of<S: AsSection>(
    differ: &mut Differ,
    epoch: u64,
    sections: &[S],
    full: bool,
) -> Option<Plan> {
    let keyed = sections.iter().map(|s| {
        let s = s.section();
        ((s.kind as u16, s.id, s.name.to_string()), s.data)
    });
    differ.next(epoch, keyed, full)
}

/// Writes `sections` as `who.epoch` on each task's level, in order (a
/// durable level copies the file of the node-local level before it). A
/// durable level whose epoch this is not has no outcome.
pub(super) fn write_dirs<S: AsSection>(
    tasks: &[DirTask],
    who: &Identity,
    sections: &[S],
    compression: Compression,
    plan: Option<&Plan>,
) -> Vec<Outcome> {
    // The newest node-local file written, whether it is differential, and
    // its bytes: durable levels copy it.
    let mut local: Option<(PathBuf, bool, WriteStats)> = None;
    let mut out = Vec::new();
    for t in tasks {
        let diff = plan.filter(|_| t.on_last);
        let level = t.flusher.level();
        let path = level.path(who.epoch, who.rank);
        let result = match t.every {
            None => match level.write_diff(who, sections, compression, diff) {
                Ok(stats) => {
                    local = Some((path, diff.is_some(), stats));
                    Ok(stats)
                }
                Err(e) => Err((e, Some(path))),
            },
            Some(every) if !who.epoch.is_multiple_of(every) => continue,
            Some(_) => match &local {
                // A differential file is copied only where its base is (a
                // level written every epoch).
                Some((from, is_diff, stats)) if !is_diff || diff.is_some() => {
                    t.flusher.submit(who.epoch, who.rank, from.clone(), true);
                    Ok(*stats)
                }
                _ => t
                    .flusher
                    .write_now(who, sections, compression, diff)
                    .map_err(|e| (e, Some(path))),
            },
        };
        out.push(Outcome {
            index: t.index,
            name: t.name.clone(),
            result,
            partial: plan_used(diff),
        });
    }
    out
}

/// An epoch's directory levels, to be written from its copy in memory by
/// a thread of its own.
pub struct LevelWrites {
    pub(super) who: Identity,
    pub(super) compression: Compression,
    /// The epoch's copy in memory (maybe still being made by a snapshot).
    pub(super) copy: MemCopy,
    pub(super) tasks: Vec<DirTask>,
    /// With `diff`: the store's differ (back with the result) and whether
    /// this epoch must be full.
    pub(super) differ: Option<(Differ, bool)>,
}

/// What the thread did, for the store (`Store::finish`).
pub struct LevelsWritten {
    pub epoch: u64,
    pub(super) outcomes: Vec<Outcome>,
    pub(super) differ: Option<Differ>,
    /// The newest epoch this rank's durable levels hold after the writes
    /// (what the report to mpiexec carries).
    pub durable: Option<u64>,
    /// The copy in memory is whole: the epoch is this rank's to report
    /// (false when its snapshot failed: nothing holds the epoch).
    pub held: bool,
}

impl LevelWrites {
    pub fn epoch(&self) -> u64 {
        self.who.epoch
    }

    pub fn run(self) -> LevelsWritten {
        let mut differ = self.differ;
        let copy = self.copy.get();
        let held = copy.is_ok();
        let outcomes = match copy {
            Ok(copy) => {
                let plan = (differ.as_mut())
                    .and_then(|(d, full)| plan_of(d, self.who.epoch, &copy[..], *full));
                write_dirs(
                    &self.tasks,
                    &self.who,
                    &copy[..],
                    self.compression,
                    plan.as_ref(),
                )
            }
            // No bytes to write: every level fails the epoch.
            Err(why) => (self.tasks.iter())
                .map(|t| Outcome {
                    index: t.index,
                    name: t.name.clone(),
                    result: Err((std::io::Error::other(why.clone()), None)),
                    partial: false,
                })
                .collect(),
        };
        let durable = (self.tasks.iter())
            .filter(|t| t.every.is_some())
            .map(|t| t.flusher.flushed())
            .min()
            .flatten();
        LevelsWritten {
            epoch: self.who.epoch,
            outcomes,
            differ: differ.map(|(d, _)| d),
            durable,
            held,
        }
    }
}
