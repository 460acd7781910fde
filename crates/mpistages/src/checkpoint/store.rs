//! A rank's checkpoints across its storage levels: `write` puts an epoch on
//! every level (it counts as written when the first level has it),
//! `restore` takes it from the fastest level holding a valid copy, falling
//! back to slower levels and then to older committed epochs — and says why
//! each copy was skipped. Nothing invalid is ever returned.

use super::config::{Config, Level};
use super::diff::Differ;
use super::dirlevel::DirLevel;
use super::erasure::Redundancy;
use super::flush::{FlushStatus, Flusher};
use super::format::{self, AsSection, CkptError, Compression, Identity, Section};
use super::levelwrite::{plan_of, write_dirs, DirTask, LevelWrites, LevelsWritten, Outcome};
use super::memcopy::MemCopy;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Copies in this process's memory: live ranks roll back without I/O.
#[derive(Default)]
pub struct MemLevel {
    epochs: BTreeMap<u64, MemCopy>,
}

impl MemLevel {
    /// Drops the copies of epochs before `first_kept` and returns them.
    fn drop_before(&mut self, first_kept: u64) -> Vec<MemCopy> {
        let kept = self.epochs.split_off(&first_kept);
        std::mem::replace(&mut self.epochs, kept)
            .into_values()
            .collect()
    }
}

/// The redundancy level (`partner`, `xor:K`, `rs:K+M`) as seen from one
/// process (as in SCR's schemes, each process keeps its own copy): the
/// copy of this rank that live ranks roll back from, and what it holds
/// *for* other ranks — a partner's whole checkpoint, or parity of its
/// set's checkpoints (`erasure::parity`) — in memory, and in the first
/// node-local directory level when there is one, where it outlives this
/// process (a relaunch of the whole job under cpr, a second failure that
/// takes this process). The MPI layer moves copies and shards over the
/// transport (`api::recovery`, `api::redundancy`).
pub struct PartnerLevel {
    scheme: Redundancy,
    own: MemLevel,
    held: BTreeMap<u64, Arc<Vec<u8>>>,
    files: Option<DirLevel>,
}

/// One configured level and the copies it holds.
enum Backend {
    Mem(MemLevel),
    /// A node-local directory; its thread removes old epochs.
    Dir(Arc<Flusher>),
    Partner(PartnerLevel),
    /// A durable level written every `every` epochs, in the background when
    /// a node-local level has the file already.
    Durable {
        flusher: Arc<Flusher>,
        every: u64,
    },
}

pub struct Store {
    levels: Vec<(String, Backend)>,
    job: u64,
    rank: u32,
    size: u32,
    keep: usize,
    compression: Compression,
    /// `mpiexec --restart`: (job, epoch) — this job's epochs up to `epoch`
    /// on durable levels were written by that earlier job, under its id.
    restart: Option<(u64, u64)>,
    /// The in-memory copy of an epoch the memory levels dropped, kept to
    /// be overwritten by the next checkpoint: memory that was just freed
    /// and allocated again costs a page fault per page at every checkpoint.
    spare: Option<Vec<Section>>,
    /// Differential checkpoints (`diff`): the hashes of the last epoch.
    differ: Option<Differ>,
    /// Per level (by index), the last epoch written there: a directory
    /// level writes a differential checkpoint only on the epoch before.
    last: Vec<Option<u64>>,
    /// Per level (by index), what its files held and took.
    written: Vec<Written>,
}

/// What a directory level's checkpoint files held and took, over a job
/// (for the redundancy level: this rank's copies, and what it held for
/// others).
#[derive(Clone, Copy, Debug, Default)]
pub struct Written {
    pub files: u64,
    /// Files that were full (not differential).
    pub full: u64,
    /// Bytes of the sections checkpointed.
    pub raw: u64,
    /// Bytes stored for them (compressed, or only the changed blocks).
    pub stored: u64,
}

/// Where a restore came from, and what was skipped on the way.
#[derive(Debug, Clone)]
pub struct Restored {
    pub epoch: u64,
    pub level: String,
    pub sections: Arc<Vec<Section>>,
    pub skipped: Vec<String>,
}

/// A checkpoint that could not be written on the first level (the one
/// that makes it count): what, where, and whether the device is full.
#[derive(Debug)]
pub struct WriteError {
    pub message: String,
    pub no_space: bool,
}

impl WriteError {
    pub fn other(message: String) -> WriteError {
        WriteError {
            message,
            no_space: false,
        }
    }
}

impl Store {
    /// Levels from the configuration.
    pub fn new(cfg: &Config, job: u64, rank: u32, size: u32) -> Store {
        let mut levels = Vec::new();
        let reach = cfg.diff.map_or(0, Differ::reach);
        for l in &cfg.levels {
            levels.push(match l {
                Level::Mem => ("mem".to_string(), Backend::Mem(MemLevel::default())),
                Level::Tmpfs(d) => (
                    format!("tmpfs:{}", d.display()),
                    Backend::Dir(Arc::new(Flusher::new(
                        DirLevel::new(d, false, cfg.keep).with_reach(reach),
                    ))),
                ),
                Level::Pfs { dir, every } => (
                    format!("pfs:{}", dir.display()),
                    Backend::Durable {
                        flusher: Arc::new(Flusher::new(
                            DirLevel::new(dir, true, cfg.keep).with_reach(reach),
                        )),
                        every: (*every).max(1) as u64,
                    },
                ),
                Level::Redundant(scheme) => (
                    scheme.to_string(),
                    Backend::Partner(PartnerLevel {
                        scheme: *scheme,
                        own: MemLevel::default(),
                        held: BTreeMap::new(),
                        files: cfg.levels.iter().find_map(|l| match l {
                            Level::Tmpfs(d) => Some(DirLevel::new(d, false, cfg.keep)),
                            _ => None,
                        }),
                    }),
                ),
            });
        }
        Store {
            last: vec![None; levels.len()],
            written: vec![Written::default(); levels.len()],
            levels,
            differ: cfg.diff.map(Differ::new),
            job,
            rank,
            size,
            keep: cfg.keep.max(1),
            compression: cfg.compression,
            restart: None,
            spare: None,
        }
    }

    /// This job restarts `job`, whose files hold its epochs up to `epoch`.
    pub fn set_restart(&mut self, job: u64, epoch: u64) {
        self.restart = Some((job, epoch));
    }

    /// Whose file of `epoch` a directory level holds: this job's, or for
    /// an epoch from before a restart, the restarted job's (only a durable
    /// level has those: node-local ones are this job's own).
    fn who_of_file(&self, epoch: u64) -> Identity {
        let mut who = self.who(epoch, 0);
        if let Some((job, upto)) = self.restart {
            if epoch <= upto {
                who.job = job;
            }
        }
        who
    }

    fn who(&self, epoch: u64, generation: u32) -> Identity {
        Identity {
            job: self.job,
            rank: self.rank,
            size: self.size,
            epoch,
            generation,
        }
    }

    /// Whether some level keeps a copy when this process dies.
    pub fn survives_process_loss(&self) -> bool {
        self.levels
            .iter()
            .any(|(_, l)| !matches!(l, Backend::Mem(_)))
    }

    /// The redundancy level configured, if any (the MPI layer then moves
    /// copies or shards between ranks).
    pub fn redundancy(&self) -> Option<Redundancy> {
        self.levels.iter().find_map(|(_, l)| match l {
            Backend::Partner(p) => Some(p.scheme),
            _ => None,
        })
    }

    /// What each directory level's files (and the redundancy level) held
    /// and took so far, by name.
    pub fn written(&self) -> Vec<(String, Written)> {
        self.levels
            .iter()
            .zip(&self.written)
            .filter(|(_, w)| w.files > 0)
            .map(|((name, _), w)| (name.clone(), *w))
            .collect()
    }

    /// Committed epochs each level keeps.
    pub fn keep(&self) -> usize {
        self.keep
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The job's id (parity records carry it).
    pub fn job(&self) -> u64 {
        self.job
    }

    /// This rank's checkpoint of `epoch` as the bytes of a checkpoint file,
    /// for its partner to hold (or, at generation 0, the bytes that parity
    /// covers: any process holding the sections makes the same).
    pub fn encode<S: AsSection>(&self, epoch: u64, generation: u32, sections: &[S]) -> Vec<u8> {
        format::encode(&self.who(epoch, generation), sections, self.compression)
    }

    /// Keeps a copy of `epoch` for the rank this one is partner of (or
    /// parity for its set), in memory and on node-local storage. A copy
    /// that could not be written there comes back as a warning (the one
    /// in memory still serves). `own` is the size of this rank's own copy
    /// (what is held is counted against it in `written`).
    pub fn hold(&mut self, epoch: u64, bytes: Vec<u8>, own: usize) -> Option<String> {
        let warning = self
            .held_files()
            .and_then(|d| write_held(&d, epoch, self.rank, &bytes));
        self.keep_held(epoch, bytes, own);
        warning
    }

    /// Where held copies go on node-local storage, if anywhere (for a
    /// thread that writes them itself: `write_held`).
    pub fn held_files(&self) -> Option<DirLevel> {
        self.levels.iter().find_map(|(_, l)| match l {
            Backend::Partner(p) => p.files.clone(),
            _ => None,
        })
    }

    /// `hold`, for bytes already written to node-local storage.
    pub fn keep_held(&mut self, epoch: u64, bytes: Vec<u8>, own: usize) {
        for (i, (_, l)) in self.levels.iter_mut().enumerate() {
            if let Backend::Partner(p) = l {
                let t = &mut self.written[i];
                (t.files, t.full) = (t.files + 1, t.full + 1);
                (t.raw, t.stored) = (t.raw + own as u64, t.stored + bytes.len() as u64);
                p.held.insert(epoch, Arc::new(bytes));
                return;
            }
        }
    }

    /// The copy of `epoch` held for the partner's client, if any: in
    /// memory, or on node-local storage (written by an earlier process of
    /// this rank, before a relaunch).
    pub fn held(&self, epoch: u64) -> Option<Arc<Vec<u8>>> {
        self.levels.iter().find_map(|(_, l)| match l {
            Backend::Partner(p) => p.held.get(&epoch).cloned().or_else(|| {
                p.files
                    .as_ref()
                    .and_then(|d| d.read_held(epoch, self.rank))
                    .map(Arc::new)
            }),
            _ => None,
        })
    }

    /// Verifies a copy of this rank's `epoch` that came back from the
    /// partner: a copy of another rank, job or epoch is refused.
    pub fn from_partner(&self, epoch: u64, bytes: &[u8]) -> Result<Vec<Section>, CkptError> {
        format::parse(bytes, Some(&self.who(epoch, 0))).map(|c| c.sections)
    }

    /// Epochs of this rank present on some local level (not verified).
    pub fn local_epochs(&self) -> Vec<u64> {
        let mut v = Vec::new();
        for (_, l) in &self.levels {
            match l {
                Backend::Mem(m) | Backend::Partner(PartnerLevel { own: m, .. }) => {
                    v.extend(m.epochs.keys().copied())
                }
                Backend::Dir(f) | Backend::Durable { flusher: f, .. } => v.extend(
                    f.level()
                        .epochs()
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|&e| f.level().path(e, self.rank).exists()),
                ),
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Where the first directory level puts `epoch` (for fault injection).
    pub fn first_file(&self, epoch: u64) -> Option<std::path::PathBuf> {
        self.levels.iter().find_map(|(_, l)| match l {
            Backend::Dir(f) | Backend::Durable { flusher: f, .. } => {
                Some(f.level().path(epoch, self.rank))
            }
            _ => None,
        })
    }

    /// Fault injection (a lost node): deletes this rank's copies on
    /// node-local directory levels, and the partner copies it holds there.
    pub fn lose_node_local(&self) -> std::io::Result<String> {
        let mut n = 0;
        for (_, l) in &self.levels {
            if let Backend::Dir(f) = l {
                let d = f.level();
                for e in d.epochs()? {
                    if std::fs::remove_file(d.path(e, self.rank)).is_ok() {
                        n += 1;
                    }
                }
            }
            if let Backend::Partner(PartnerLevel { files: Some(d), .. }) = l {
                n += d.remove_held_before(self.rank, u64::MAX);
            }
        }
        Ok(format!(
            "deleted {n} node-local checkpoint file(s) of rank {}",
            self.rank
        ))
    }

    /// Fault injection: flips bytes in the newest copy or parity this rank
    /// holds for others on node-local storage (the process dies next, and
    /// its replacement reads the file).
    pub fn corrupt_newest_held(&self) -> std::io::Result<String> {
        let files = self.levels.iter().find_map(|(_, l)| match l {
            Backend::Partner(PartnerLevel { files: Some(d), .. }) => Some(d),
            _ => None,
        });
        let newest = files.and_then(|d| {
            (d.epochs().ok()?.into_iter().rev())
                .map(|e| d.held_path(e, self.rank))
                .find(|p| p.exists())
        });
        let p = newest.ok_or_else(|| {
            std::io::Error::other("no copy or parity held for other ranks on node-local storage")
        })?;
        flip_bytes(&p)?;
        Ok(format!("flipped bytes in {}", p.display()))
    }

    /// Fault injection: flips bytes in the middle of this rank's newest
    /// copy on each node-local directory level.
    pub fn corrupt_newest_node_local(&self) -> std::io::Result<String> {
        let mut done = Vec::new();
        for (_, l) in &self.levels {
            let Backend::Dir(f) = l else { continue };
            let d = f.level();
            let newest = d
                .epochs()?
                .into_iter()
                .rev()
                .find(|&e| d.path(e, self.rank).exists());
            if let Some(e) = newest {
                let p = d.path(e, self.rank);
                flip_bytes(&p)?;
                done.push(p.display().to_string());
            }
        }
        Ok(format!("flipped bytes in {}", done.join(", ")))
    }

    /// Writes `epoch` on every local level (the partner copy is the MPI
    /// layer's). Fails only if the first level fails; failures of later
    /// levels come back as warnings. With `background` and a memory level
    /// first, the directory levels are left to the caller, to be written
    /// from the copy in memory by a thread (`LevelWrites::run`, then
    /// `finish`): the program then waits only for that copy.
    pub fn write<S: AsSection>(
        &mut self,
        epoch: u64,
        generation: u32,
        sections: &[S],
        background: bool,
    ) -> Result<(Vec<String>, Option<LevelWrites>), WriteError> {
        let who = self.who(epoch, generation);
        // The in-memory levels keep one owned copy, made only if one of
        // them is configured; in the background (a snapshot) when the
        // directory levels are written from it in the background too.
        let mem = |l: &Backend| matches!(l, Backend::Mem(_) | Backend::Partner(_));
        let first_in_memory = self.levels.first().is_some_and(|(_, l)| mem(l));
        let background = background && first_in_memory;
        let copy = (self.levels.iter().any(|(_, l)| mem(l)))
            .then(|| self.mem_copy(sections, background && self.redundancy().is_none()));
        let mut tasks = Vec::new();
        for (i, (name, level)) in self.levels.iter_mut().enumerate() {
            // A level writes a difference only on the epoch before.
            let on_last = epoch > 1 && self.last[i] == Some(epoch - 1);
            let (flusher, every) = match level {
                Backend::Mem(m) | Backend::Partner(PartnerLevel { own: m, .. }) => {
                    let copy = copy.clone().expect("made for the memory levels");
                    m.epochs.insert(epoch, copy);
                    self.last[i] = Some(epoch);
                    continue;
                }
                Backend::Dir(f) => (f.clone(), None),
                Backend::Durable { flusher, every } => (flusher.clone(), Some(*every)),
            };
            tasks.push(DirTask {
                index: i,
                name: name.clone(),
                flusher,
                every,
                on_last,
            });
        }
        if let (true, Some(copy)) = (background, &copy) {
            let full = self.diff_full(epoch);
            return Ok((
                Vec::new(),
                Some(LevelWrites {
                    who,
                    compression: self.compression,
                    copy: copy.clone(),
                    tasks,
                    differ: self.differ.take().map(|d| (d, full)),
                }),
            ));
        }
        let full = self.diff_full(epoch);
        let plan = (self.differ.as_mut()).and_then(|d| plan_of(d, epoch, sections, full));
        let outcomes = write_dirs(&tasks, &who, sections, self.compression, plan.as_ref());
        self.apply(epoch, outcomes).map(|warnings| (warnings, None))
    }

    /// A copy of `sections` for the memory levels (in the buffers of the
    /// copy last dropped): by a snapshot when `snapshot` and the kernel
    /// gives one, else now.
    fn mem_copy<S: AsSection>(&mut self, sections: &[S], snapshot: bool) -> MemCopy {
        if snapshot && MemCopy::worth_a_snapshot(sections) {
            match super::snapshot::shared() {
                Ok(snap) => return MemCopy::snapshot(snap, self.spare.take(), sections),
                Err(why) => say_copying(self.rank, why),
            }
        }
        MemCopy::copy(self.spare.take(), sections)
    }

    /// The directory levels' writes a thread did (`LevelWrites::run`):
    /// their results, as warnings.
    pub fn finish(&mut self, done: LevelsWritten) -> Vec<String> {
        if done.differ.is_some() {
            self.differ = done.differ;
        }
        if !done.held {
            // Its snapshot failed: no level holds the epoch.
            let mut why = String::new();
            for (_, l) in &mut self.levels {
                if let Backend::Mem(m) = l {
                    if let Some(Err(e)) = m.epochs.remove(&done.epoch).map(|c| c.get()) {
                        why = e;
                    }
                }
            }
            return vec![format!(
                "checkpoint epoch {} is kept nowhere: {why} (was a protected region freed before MPIX_Unprotect?)",
                done.epoch
            )];
        }
        match self.apply(done.epoch, done.outcomes) {
            Ok(w) => w,
            Err(e) => vec![e.message],
        }
    }

    /// Records what each directory level's write of `epoch` gave; an
    /// error of the first level is the write's error.
    fn apply(&mut self, epoch: u64, outcomes: Vec<Outcome>) -> Result<Vec<String>, WriteError> {
        let mut warnings = Vec::new();
        let mut first = None;
        for o in outcomes {
            self.last[o.index] = Some(epoch).filter(|_| o.result.is_ok());
            match o.result {
                Ok(w) => {
                    let t = &mut self.written[o.index];
                    t.files += 1;
                    t.full += u64::from(!o.partial);
                    t.raw += w.raw_bytes;
                    t.stored += w.stored_bytes;
                }
                Err((e, path)) => {
                    let at = path.map_or(String::new(), |p| format!(" ({})", p.display()));
                    let message = format!("checkpoint epoch {epoch} on {}{at}: {e}", o.name);
                    if o.index == 0 {
                        let no_space =
                            matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
                        first = Some(WriteError { message, no_space });
                    } else {
                        warnings.push(message);
                    }
                }
            }
        }
        first.map_or(Ok(warnings), Err)
    }

    /// Whether `epoch` must be a full checkpoint under `diff`: a durable
    /// level copies it from node-local storage without writing every epoch.
    fn diff_full(&self, epoch: u64) -> bool {
        let has_local = self
            .levels
            .iter()
            .any(|(_, l)| matches!(l, Backend::Dir(_)));
        has_local
            && self.levels.iter().any(|(_, l)| {
                matches!(l, Backend::Durable { every, .. } if *every > 1 && epoch.is_multiple_of(*every))
            })
    }

    /// Whether a directory level has a file of this rank's `epoch` (not
    /// verified).
    pub fn has_file(&self, epoch: u64) -> bool {
        self.levels.iter().any(|(_, l)| match l {
            Backend::Dir(f) | Backend::Durable { flusher: f, .. } => {
                f.level().path(epoch, self.rank).exists()
            }
            _ => false,
        })
    }

    /// Takes `epoch`'s copy out of the memory levels (a restore gives its
    /// pages to the program); whether one was there.
    pub fn take_mem(&mut self, epoch: u64) -> bool {
        let mut taken = false;
        for (_, l) in &mut self.levels {
            if let Backend::Mem(m) | Backend::Partner(PartnerLevel { own: m, .. }) = l {
                taken |= m.epochs.remove(&epoch).is_some();
            }
        }
        taken
    }

    /// Buffers a restore is done with: the next copy goes into them.
    pub fn give_back(&mut self, sections: Vec<Section>) {
        if let Some(old) = self.spare.replace(sections) {
            super::memcopy::free_later(old);
        }
    }

    /// The copy of `epoch` a restore found: the memory levels keep it too
    /// (shared, not copied) if they have none.
    pub fn adopt(&mut self, epoch: u64, sections: &Arc<Vec<Section>>) {
        for (_, l) in &mut self.levels {
            if let Backend::Mem(m) | Backend::Partner(PartnerLevel { own: m, .. }) = l {
                (m.epochs.entry(epoch)).or_insert_with(|| MemCopy::ready(sections.clone()));
            }
        }
    }

    /// The job rolled back to `epoch`: copies of later epochs on durable
    /// levels belong to the abandoned run and no longer count as durable.
    /// The next checkpoint is full (the one it would be a difference
    /// from is abandoned).
    pub fn rolled_back(&mut self, epoch: u64) {
        if let Some(d) = &mut self.differ {
            d.forget();
        }
        self.last.iter_mut().for_each(|l| *l = None);
        for (_, l) in &self.levels {
            if let Backend::Durable { flusher, .. } = l {
                flusher.rolled_back(epoch);
            }
        }
    }

    /// Progress of the background work of directory levels (flushes to
    /// durable levels, removal of old epochs), by level name.
    pub fn flush_status(&self) -> Vec<(String, FlushStatus)> {
        self.levels
            .iter()
            .filter_map(|(name, l)| match l {
                Backend::Durable { flusher, .. } | Backend::Dir(flusher) => {
                    Some((name.clone(), flusher.status()))
                }
                _ => None,
            })
            .collect()
    }

    /// Waits for background flushes (at the end of a job, or in tests).
    /// The job ends (flushes done): old files parked for reuse go.
    pub fn remove_parked(&self) {
        for (_, l) in &self.levels {
            if let Backend::Durable { flusher, .. } | Backend::Dir(flusher) = l {
                flusher.level().remove_parked(self.rank);
            }
        }
    }

    pub fn wait_flushed(&self) -> Vec<(String, FlushStatus)> {
        self.levels
            .iter()
            .filter_map(|(name, l)| match l {
                Backend::Durable { flusher, .. } | Backend::Dir(flusher) => {
                    Some((name.clone(), flusher.wait_idle()))
                }
                _ => None,
            })
            .collect()
    }

    /// The newest epoch this rank's background flushes have made durable
    /// (the oldest such epoch over several pfs levels); none without a pfs
    /// level or before the first flush.
    pub fn durable(&self) -> Option<u64> {
        self.levels
            .iter()
            .filter_map(|(_, l)| match l {
                Backend::Durable { flusher, .. } => Some(flusher.flushed()),
                _ => None,
            })
            .min()
            .flatten()
    }

    /// Every rank has `epoch`, and on the pfs level every rank has
    /// `durable`: drop what no restore can need any more. Files go in the
    /// background; failures show in the levels' status.
    pub fn commit(&mut self, epoch: u64, durable: Option<u64>) {
        let keep = self.keep as u64;
        let rank = self.rank;
        let mut dropped = Vec::new();
        for (_, level) in &mut self.levels {
            match level {
                Backend::Mem(m) => dropped.extend(m.drop_before((epoch + 1).saturating_sub(keep))),
                Backend::Partner(p) => {
                    dropped.extend(p.own.drop_before((epoch + 1).saturating_sub(keep)));
                    p.held.retain(|&e, _| e + keep > epoch);
                    if let Some(d) = &p.files {
                        d.remove_held_before(rank, (epoch + 1).saturating_sub(keep));
                    }
                }
                // Removing files costs time (freeing a tmpfs file's pages,
                // or worse): the level's thread does it, not the application;
                // parking the old file for reuse is quick and done here.
                Backend::Dir(flusher) => flusher.prune_quick(rank, epoch),
                Backend::Durable { flusher, .. } => {
                    // Only an epoch durable there on every rank counts as
                    // committed on this level: a rank whose node is lost
                    // restores from it, and the others must still have it.
                    // The flush thread removes the files (slow on some file
                    // systems); it reports its failures itself.
                    let mine = flusher.flushed();
                    if let Some(durable) = durable.min(mine) {
                        flusher.prune(rank, durable);
                    }
                }
            }
        }
        // A copy nobody else holds (a restore may) is kept for reuse; one
        // more is freed by a thread (unmapping 128 MiB takes 5-10 ms here).
        for copy in dropped.into_iter().filter_map(MemCopy::into_unique) {
            if let Some(old) = self.spare.replace(copy) {
                super::memcopy::free_later(old);
            }
        }
    }

    /// The copy of `epoch` from the fastest local level holding a valid
    /// one; `skipped` collects why each level was passed over.
    pub fn restore_local(&self, epoch: u64, skipped: &mut Vec<String>) -> Option<Restored> {
        for (name, level) in &self.levels {
            let got = match level {
                Backend::Mem(m) | Backend::Partner(PartnerLevel { own: m, .. }) => m
                    .epochs
                    .get(&epoch)
                    .ok_or_else(|| "no copy".to_string())
                    .and_then(MemCopy::get),
                Backend::Dir(f) | Backend::Durable { flusher: f, .. } => (f.level())
                    .read(&self.who_of_file(epoch))
                    .map(|c| Arc::new(c.sections))
                    .map_err(why_not),
            };
            match got {
                Ok(sections) => {
                    return Some(Restored {
                        epoch,
                        level: name.clone(),
                        sections,
                        skipped: std::mem::take(skipped),
                    })
                }
                Err(why) => skipped.push(format!("epoch {epoch} on {name}: {why}")),
            }
        }
        None
    }
}

/// Says once per process that checkpoints copy while the program waits,
/// and why (rank 0 to everyone, the others in the debug log).
fn say_copying(rank: u32, why: &str) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let level = if rank == 0 {
        log::Level::Info
    } else {
        log::Level::Debug
    };
    log::log!(
        level,
        "mpistages: checkpoints copy the protected memory while the program waits ({why})"
    );
}

/// Writes what `holder` holds of `epoch` to node-local level `d`; a
/// failure comes back as a warning.
pub fn write_held(d: &DirLevel, epoch: u64, holder: u32, bytes: &[u8]) -> Option<String> {
    d.write_held(epoch, holder, bytes).err().map(|e| {
        format!(
            "copy or parity of epoch {epoch} held for other ranks, on {}: {e}",
            d.held_path(epoch, holder).display()
        )
    })
}

/// Flips 8 bytes in the middle of file `p` (fault injection).
fn flip_bytes(p: &std::path::Path) -> std::io::Result<()> {
    let at = |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", p.display()));
    let mut b = std::fs::read(p).map_err(at)?;
    let (mid, end) = (b.len() / 2, (b.len() / 2 + 8).min(b.len()));
    for x in &mut b[mid..end] {
        *x ^= 0x5A;
    }
    // A new file renamed over the old one, as every writer does: a
    // process holding the old one mapped keeps its bytes.
    let tmp = p.with_extension("damaged");
    mpistages_sys::file::write_private(&tmp, &b)
        .and_then(|()| std::fs::rename(&tmp, p))
        .map_err(at)
}

/// Why a level's file did not serve: "no copy" when there is none (not
/// worth a warning: a new job, or a node that was lost, has none), else
/// what is wrong with it.
fn why_not(e: CkptError) -> String {
    match e {
        CkptError::Io(io) if io.kind() == std::io::ErrorKind::NotFound => "no copy".into(),
        e => e.to_string(),
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
