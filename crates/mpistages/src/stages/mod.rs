//! MPI Stages: the fault epoch, the MPI-state checkpoint of this rank, the
//! library handle registries, and the rollback protocol with `mpiexec`.
//!
//! Owns: epochs, the rank's checkpoint store, serialize/deserialize handler
//! registries, and the rejoin barrier (`rejoin`). Must not touch: the API
//! layer's tables (they come here as an encoded `MpiState`, built by
//! `api::state`), sockets (it talks to `mpiexec` through `control::client`
//! and stops communication through the engine's `halt`/`cleanup`).
//!
//! Stages seam (ExaMPI's save / load / halt / cleanup):
//! - save: `api::state` encodes communicators, groups, derived datatypes,
//!   error handlers and library handles into `MpiState`;
//! - load: the same, back into the tables, handles keeping their values;
//! - halt: the engine fails every active request when a failure notice
//!   arrives, and the transport lets go of user memory;
//! - cleanup: `MPIX_Checkpoint_read` empties queues and moves the engine to
//!   the new generation before the rejoin barrier.

mod background;
pub mod cadence;
mod error;
pub mod files;
pub mod state;

use crate::checkpoint::config::{self, Config, Level};
use crate::checkpoint::erasure::Redundancy;
use crate::checkpoint::flush::FlushStatus;
use crate::checkpoint::format::{AsSection, Kind, Section, SectionRef};
use crate::checkpoint::levelwrite::{LevelWrites, LevelsWritten};
use crate::checkpoint::store::{Restored, Store, WriteError};
use crate::control::client::Client;
use crate::control::inject::Damage;
use crate::control::proto::ToController;
use crate::progress::engine::Resume;
use crate::progress::Engine;

use std::sync::Arc;

pub use error::StagesError;
use files::RoutedFiles;
pub use state::{LibraryHandles, MpiState};

/// C handler types of `MPIX_Serialize_handler_register` and
/// `MPIX_Deserialize_handler_register` (the pointer is to `MPIX_Handles`).
pub type SerializeFn = unsafe extern "C" fn(*mut CHandles);
pub type DeserializeFn = unsafe extern "C" fn(CHandles);
/// The Fortran handler of either registry:
/// `SUBROUTINE H(COMMS, NCOMMS, GROUPS, NGROUPS)`, arrays of
/// `MPIX_MAX_HANDLES` (see include/mpif.h).
pub type FortranHandlerFn = unsafe extern "C" fn(*mut i32, *mut i32, *mut i32, *mut i32);

/// A registered serialize or deserialize handler, C or Fortran.
#[derive(Clone, Copy)]
pub enum Handler<C> {
    C(C),
    Fortran(FortranHandlerFn),
}

/// `MPIX_Handles` as C sees it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CHandles {
    pub comms: *mut i32,
    pub comm_size: i32,
    pub grps: *mut i32,
    pub group_size: i32,
}

/// Per-rank Stages state.
pub struct Stages {
    /// The fault epoch: the last checkpoint written or restored.
    pub epoch: u64,
    store: Store,
    pub serializers: Vec<Handler<SerializeFn>>,
    pub deserializers: Vec<Handler<DeserializeFn>>,
    /// What the serialize handlers handed over last, saved with the next
    /// checkpoint and restored from it.
    pub library: Vec<LibraryHandles>,
    /// Committed epoch applied to the store's retention.
    committed: u64,
    /// Newest epoch every rank has on its pfs level, as last heard.
    durable: Option<u64>,
    /// Files routed into the next checkpoint, and located from the last.
    pub files: RoutedFiles,
    /// The sections of the fault epoch, once read or written.
    restored: Option<(u64, Arc<Vec<Section>>)>,
    /// Copies or shards are exchanged with other ranks (a partner, xor or
    /// rs level, and more than one rank).
    redundancy: Option<Redundancy>,
    /// Not started by mpiexec: nobody else removes the files directory.
    singleton: bool,
    /// Invalid copies already reported (a restore may look twice).
    reported: std::collections::HashSet<String>,
    /// Parity being computed on a thread of its own (epoch, size of this
    /// rank's copy, the thread): settled before anyone needs it.
    pending: Option<(u64, usize, PendingParity)>,
    /// The directory levels of the newest epoch, being written from its
    /// copy in memory by a thread of its own (`write_later`); settled
    /// before anything looks at those levels.
    writing: Option<std::thread::JoinHandle<Option<LevelsWritten>>>,
    /// What checkpoints cost here and when the work at risk began
    /// (`MPIX_Checkpoint_needed`).
    pub cadence: cadence::Cadence,
}

/// An epoch `Stages::write` saved: its number, with a redundancy level the
/// bytes for the partner or the parity, and the directory levels' writes
/// left to `Stages::write_later`.
pub struct Saved {
    pub epoch: u64,
    pub partner: Option<Vec<u8>>,
    pub later: Option<LevelWrites>,
}

/// The sections a restore of the program's regions takes (see
/// `Stages::sections_to_restore`).
pub enum ToRestore {
    /// The caller's: pages may be given away, then `Stages::give_back`.
    Owned(Vec<Section>),
    /// Held elsewhere too: to be copied from.
    Shared(Arc<Vec<Section>>),
}

impl ToRestore {
    pub fn sections(&self) -> &[Section] {
        match self {
            ToRestore::Owned(v) => v,
            ToRestore::Shared(a) => a,
        }
    }
}

/// A thread computing (and writing to node-local storage) the parity a
/// rank holds: the bytes, or why not, and a warning.
type PendingParity = std::thread::JoinHandle<(Result<Vec<u8>, String>, Option<String>)>;

impl Stages {
    /// The checkpoint configuration from the environment, with node-local
    /// levels moved into this job's own directory.
    pub fn new(job_id: &str, rank: usize, size: usize) -> Result<Stages, StagesError> {
        let spec = std::env::var(crate::control::env::CKPT).unwrap_or_default();
        let mut cfg: Config = config::parse(&spec).map_err(StagesError::Config)?;
        let files = config::job_dir(&cfg.node_local_root(), job_id)
            .join("files")
            .join(format!("rank-{rank}"));
        for l in &mut cfg.levels {
            if let Level::Tmpfs(d) = l {
                *d = config::job_dir(d, job_id);
            }
        }
        let job = job_id.parse::<u64>().unwrap_or(0);
        let mut store = Store::new(&cfg, job, rank as u32, size as u32);
        if let Ok(v) = std::env::var(crate::control::env::RESTART_FROM) {
            let (old, epoch) = v
                .split_once(':')
                .and_then(|(j, e)| Some((j.parse().ok()?, e.parse().ok()?)))
                .ok_or_else(|| {
                    StagesError::Config(format!(
                        "{}='{v}' is not JOB:EPOCH",
                        crate::control::env::RESTART_FROM
                    ))
                })?;
            store.set_restart(old, epoch);
        }
        // A set must hold data and parity: more ranks than parity shards.
        let least = |r: Redundancy| r.set_shape().map_or(2, |(_, m)| m + 1);
        let redundancy = store.redundancy().filter(|&r| size >= least(r));
        if let (Some(r), None, 0) = (store.redundancy(), redundancy, rank) {
            log::warn!(
                "mpistages: warning: the {r} level needs at least {} ranks; it is ignored",
                least(r)
            );
        }
        Ok(Stages::with(
            store,
            RoutedFiles::new(files),
            redundancy,
            false,
        ))
    }

    fn with(
        store: Store,
        files: RoutedFiles,
        redundancy: Option<Redundancy>,
        singleton: bool,
    ) -> Stages {
        Stages {
            files,
            restored: None,
            redundancy,
            singleton,
            reported: Default::default(),
            pending: None,
            writing: None,
            epoch: 0,
            store,
            serializers: Vec::new(),
            deserializers: Vec::new(),
            library: Vec::new(),
            committed: 0,
            durable: None,
            cadence: Default::default(),
        }
    }

    /// A process started without mpiexec: checkpoints stay in memory.
    pub fn singleton() -> Stages {
        let cfg = Config {
            levels: vec![Level::Mem],
            ..Config::default()
        };
        let files = std::path::Path::new(config::DEFAULT_TMPFS)
            .join(format!("single-{}", std::process::id()));
        Stages::with(
            Store::new(&cfg, 0, 0, 1),
            RoutedFiles::new(files),
            None,
            true,
        )
    }

    /// At `MPI_Finalize`: a process without mpiexec removes its own files.
    /// Waits for this rank's background flushes (the newest epochs must be
    /// durable before the process goes), says what went wrong or was slow,
    /// and returns the newest epoch this rank has on its pfs level.
    pub fn wait_flushes(&mut self) -> Option<u64> {
        self.settle();
        let flushes = self.store.wait_flushed();
        for (level, st) in &flushes {
            if st.stalled >= std::time::Duration::from_millis(1) {
                log::warn!(
                    "mpistages: {level} is slower than the checkpoints: MPIX_Checkpoint_write waited {:.3} s in all for its background flush (flush less often: @every=N)",
                    st.stalled.as_secs_f64()
                );
            }
        }
        self.report_flush_errors(flushes);
        self.store.durable()
    }

    /// The job ends: `durable` is the newest epoch every rank has on its
    /// pfs level, so the older ones beyond `keep` can go there too.
    pub fn finalize(&mut self, durable: Option<u64>, rank: usize) {
        self.settle();
        if std::env::var_os(crate::control::env::CKPT_REPORT).is_some() {
            for (level, w) in self.store.written() {
                log::info!(
                    "mpistages: rank {rank}: {level}: {} checkpoints ({} full), {} bytes checkpointed, {} bytes stored ({:.1} %)",
                    w.files,
                    w.full,
                    w.raw,
                    w.stored,
                    100.0 * w.stored as f64 / w.raw.max(1) as f64
                );
            }
        }
        self.apply_committed(self.committed, durable);
        let removals = self.store.wait_flushed();
        self.report_flush_errors(removals);
        self.store.remove_parked();
        if self.singleton {
            self.files.remove_all();
            let _ = std::fs::remove_dir(config::DEFAULT_TMPFS);
        }
    }

    /// Background flushes that failed, each said once on stderr (the job
    /// goes on: the node-local levels still hold the checkpoint).
    fn report_flush_errors(&mut self, flushes: Vec<(String, FlushStatus)>) {
        for (level, st) in flushes {
            let failed = st.errors.into_iter().map(|(epoch, why)| {
                format!("{level}: epoch {epoch} could not be made durable: {why}")
            });
            let stuck = (st.prune_errors.into_iter())
                .map(|why| format!("removing old checkpoints on {level}: {why}"));
            for msg in failed.chain(stuck) {
                if self.reported.insert(msg.clone()) {
                    log::warn!("mpistages: warning: {msg}");
                }
            }
        }
    }

    /// Saves `state`, the protected regions and the routed files as the
    /// next epoch on every local level. The epoch counts as written once the
    /// first level has it; `report` then tells mpiexec (after the partner
    /// copy, if any, is across).
    /// Returns the epoch and, with a redundancy level, the checkpoint's
    /// bytes for the partner (or, for parity, as any holder of the
    /// sections makes them again: generation 0); with `background` (see
    /// `Store::write`), the directory levels' writes left to `write_later`.
    pub fn write(
        &mut self,
        state: &MpiState,
        protected: &[SectionRef<'_>],
        generation: u32,
        background: bool,
    ) -> Result<Saved, WriteError> {
        self.settle();
        let epoch = self.epoch + 1;
        let state = Section {
            kind: Kind::MpiState,
            id: 0,
            name: String::new(),
            data: state.encode().into(),
        };
        let files = self
            .files
            .collect()
            .map_err(|e| WriteError::other(e.to_string()))?;
        let mut sections = vec![state.section()];
        sections.extend_from_slice(protected);
        sections.extend(files.iter().map(|f| f.section()));
        let background = background && self.redundancy.is_none();
        let (warnings, later) = self.store.write(epoch, generation, &sections, background)?;
        for w in warnings {
            log::warn!("mpistages: warning: {w}");
        }
        let flushes = self.store.flush_status();
        self.report_flush_errors(flushes);
        let partner = self.redundancy.map(|r| {
            let generation = if r == Redundancy::Partner {
                generation
            } else {
                0
            };
            self.store.encode(epoch, generation, &sections)
        });
        self.epoch = epoch;
        self.files.clear();
        Ok(Saved {
            epoch,
            partner,
            later,
        })
    }

    /// Why a rank may find no copy at all, for error messages.
    pub fn levels_hint(&self) -> &'static str {
        if self.store.survives_process_loss() {
            ""
        } else {
            " (only the mem level is configured, and a replacement process has no memory copy: add tmpfs, partner or pfs to MPISTAGES_CKPT / --ckpt)"
        }
    }

    /// How checkpoints are protected by other ranks, if they are.
    pub fn redundancy(&self) -> Option<Redundancy> {
        self.redundancy
    }

    /// Committed epochs each level keeps.
    pub fn keep(&self) -> u64 {
        self.store.keep() as u64
    }

    /// The job's id, as checkpoints and parity record it.
    pub fn job(&self) -> u64 {
        self.store.job()
    }

    /// The bytes parity of `r`'s epoch covers (see `write`).
    pub fn parity_bytes(&self, r: &Restored) -> Vec<u8> {
        self.store.encode(r.epoch, 0, &r.sections[..])
    }

    /// Keeps the copy of `epoch` received from the rank this one is partner of.
    pub fn hold(&mut self, epoch: u64, bytes: Vec<u8>, own: usize) {
        if let Some(w) = self.store.hold(epoch, bytes, own) {
            log::warn!("mpistages: warning: {w}");
        }
    }

    /// What this rank holds of `epoch` for other ranks (a copy, or parity).
    pub fn held(&mut self, epoch: u64) -> Option<Arc<Vec<u8>>> {
        self.settle();
        self.store.held(epoch)
    }

    /// The held copy of the newest epoch at most `epoch`, with its epoch.
    pub fn held_at_most(&mut self, epoch: u64) -> Option<(u64, Arc<Vec<u8>>)> {
        self.settle();
        (1..=epoch)
            .rev()
            .take(64)
            .find_map(|e| self.store.held(e).map(|b| (e, b)))
    }

    /// Verifies this rank's copy of `epoch` that came back from its partner
    /// or was rebuilt from its set's parity.
    pub fn from_partner(&self, epoch: u64, bytes: &[u8]) -> Result<Restored, StagesError> {
        let level = self.redundancy.map_or("partner".into(), |r| r.to_string());
        let sections = self
            .store
            .from_partner(epoch, bytes)
            .map_err(|e| StagesError::Malformed(format!("the {level} copy: {e}")))?;
        Ok(Restored {
            epoch,
            level,
            sections: Arc::new(sections),
            skipped: Vec::new(),
        })
    }

    /// The newest valid local copy of an epoch at most `at_most`. Copies
    /// that were there but invalid are reported on stderr.
    pub fn newest_local(&mut self, at_most: u64) -> Option<Restored> {
        self.settle();
        let mut skipped = Vec::new();
        let mut found = None;
        for e in self.store.local_epochs().into_iter().rev() {
            if e > at_most {
                continue;
            }
            if let Some(r) = self.store.restore_local(e, &mut skipped) {
                found = Some(r);
                break;
            }
        }
        let skipped = found.as_ref().map_or(&skipped, |r| &r.skipped);
        // A level without a copy is normal (a new process has nothing in
        // memory); a copy that was there but invalid is worth a line.
        for why in skipped.iter().filter(|w| !w.ends_with("no copy")) {
            if self.reported.insert(why.clone()) {
                log::warn!("mpistages: checkpoint copy skipped: {why}");
            }
        }
        found
    }

    /// Makes `r` the fault epoch: its sections are what restore, locate and
    /// the MPI-state load use. Files routed since are discarded.
    /// The job starts again from the beginning (fault epoch 0): nothing
    /// was committed, or no epoch is held by every rank any more.
    pub fn start_over(&mut self) {
        self.settle();
        self.durable = None;
        self.store.rolled_back(0);
        self.epoch = 0;
        self.library.clear();
        self.files.clear();
        self.restored = None;
    }

    pub fn set_restored(&mut self, r: Restored) {
        self.settle();
        // Later epochs are rolled back, also on the pfs level.
        self.durable = None;
        self.store.rolled_back(r.epoch);
        self.epoch = r.epoch;
        self.files.clear();
        self.files.forget_located(r.epoch);
        // A copy that came from elsewhere (a file, the partner, the set)
        // is kept in memory too: a second failure before the next
        // checkpoint rolls this rank back from there.
        self.store.adopt(r.epoch, &r.sections);
        self.restored = Some((r.epoch, r.sections));
    }

    /// The fault epoch's sections to restore the program's regions from,
    /// owned by the caller when the memory level's copy can be given away
    /// (no thread writes files from it, and a file of the epoch is there
    /// for a second rollback before the next checkpoint): its pages then
    /// go to the program (`PageBuf::give_to`) and the buffers, with the
    /// program's old pages, come back with `give_back`. Otherwise shared,
    /// to be copied from.
    pub fn sections_to_restore(&mut self) -> Result<ToRestore, StagesError> {
        let sections = self.fault_sections()?;
        let epoch = self.epoch;
        let running = self.writing.as_ref().is_some_and(|t| !t.is_finished());
        if running || !self.store.has_file(epoch) {
            return Ok(ToRestore::Shared(sections));
        }
        self.settle();
        self.restored = None;
        let taken = self.store.take_mem(epoch);
        match Arc::try_unwrap(sections) {
            Ok(owned) => Ok(ToRestore::Owned(owned)),
            Err(shared) => {
                if taken {
                    self.store.adopt(epoch, &shared);
                }
                self.restored = Some((epoch, shared.clone()));
                Ok(ToRestore::Shared(shared))
            }
        }
    }

    /// The buffers of a restore that gave the program their pages: the
    /// next checkpoint writes into them.
    pub fn give_back(&mut self, sections: Vec<Section>) {
        self.store.give_back(sections);
    }

    /// The fault epoch's sections (from memory when a level holds them).
    pub fn fault_sections(&mut self) -> Result<Arc<Vec<Section>>, StagesError> {
        let epoch = self.epoch;
        if epoch == 0 {
            return Err(StagesError::Missing(
                "no checkpoint has been written or restored yet (fault epoch 0)".into(),
            ));
        }
        if let Some((e, s)) = &self.restored {
            if *e == epoch {
                return Ok(s.clone());
            }
        }
        // Not settled: the copy in memory is complete, and a file being
        // written in the background is not under its name before it is.
        let mut skipped = Vec::new();
        let r = self
            .store
            .restore_local(epoch, &mut skipped)
            .ok_or_else(|| {
                StagesError::Missing(format!(
                    "no valid copy of checkpoint epoch {epoch}: {}",
                    skipped.join("; ")
                ))
            })?;
        self.restored = Some((epoch, r.sections.clone()));
        Ok(r.sections)
    }

    /// Tells mpiexec that `epoch` is complete on this rank (and how far
    /// its pfs flush got), and applies what mpiexec said every rank has
    /// (`committed`, and `durable` on the pfs level).
    pub fn report(
        &mut self,
        epoch: u64,
        client: Option<&Client>,
        committed: u64,
        durable: Option<u64>,
    ) -> Result<(), StagesError> {
        let flushed = self.store.durable();
        match client {
            Some(c) => c
                .send(&ToController::Checkpoint {
                    epoch,
                    durable: flushed,
                })
                .map_err(|error| StagesError::Control {
                    what: format!("telling mpiexec about epoch {epoch}"),
                    error,
                })?,
            // Alone, every epoch is committed when written.
            None => self.apply_committed(epoch, flushed),
        }
        self.apply_committed(committed, durable);
        Ok(())
    }

    /// Old epochs go once a newer one is complete on every rank (on the
    /// pfs level: durable there on every rank).
    pub fn apply_committed(&mut self, committed: u64, durable: Option<u64>) {
        if committed > self.committed || durable > self.durable {
            self.committed = self.committed.max(committed);
            self.durable = self.durable.max(durable);
            self.store.commit(self.committed, self.durable);
        }
    }

    /// The MPI state among a checkpoint's sections.
    pub fn mpi_state(
        sections: &[Section],
        epoch: u64,
        size: usize,
    ) -> Result<MpiState, StagesError> {
        let sec = sections
            .iter()
            .find(|s| s.kind == Kind::MpiState)
            .ok_or_else(|| {
                StagesError::Missing(format!("checkpoint epoch {epoch} holds no MPI state"))
            })?;
        MpiState::decode(&sec.data, size)
    }

    /// The first directory level's file of `epoch` (where a write shows).
    pub fn first_file(&self, epoch: u64) -> Option<std::path::PathBuf> {
        self.store.first_file(epoch)
    }

    /// Fault injection: harms this rank's node-local copies before it dies.
    pub fn damage(&mut self, damage: Damage) {
        self.settle();
        let r = match damage {
            Damage::None => return,
            Damage::Node => self.store.lose_node_local(),
            Damage::Corrupt => self.store.corrupt_newest_node_local(),
            Damage::Parity => self.store.corrupt_newest_held(),
        };
        match r {
            Ok(what) => log::info!("mpistages: injected damage: {what}"),
            Err(e) => log::warn!("mpistages: injected damage failed: {e}"),
        }
    }
}

/// Why a rejoin did not end with the job running again.
#[derive(Debug)]
pub enum RejoinError {
    /// mpiexec is gone.
    Orphaned,
}

/// Where a rejoin ends: the job runs again at `generation`, every rank
/// restores `epoch`, and `agreed` is the epoch of the copy every rank said
/// it holds (see `ToRank::Resume`).
pub struct Rejoined {
    pub generation: u32,
    pub epoch: u64,
    pub agreed: Option<u64>,
}

/// The rejoin barrier of a rollback: clean up to the newest announced
/// failure, tell mpiexec this rank is ready and which copy it holds
/// (`newest`, given the epoch to restore), and wait until every rank is.
/// A further failure announced meanwhile starts the round again.
pub fn rejoin(
    engine: &Arc<Engine>,
    client: &Client,
    newest: &mut dyn FnMut(u64) -> Option<u64>,
) -> Result<Rejoined, RejoinError> {
    loop {
        let (generation, epoch) = engine.roll_back_to_newest_failure();
        let newest = newest(epoch);
        if client
            .send(&ToController::Ready { generation, newest })
            .is_err()
        {
            return Err(RejoinError::Orphaned);
        }
        match engine.wait_resume() {
            Resume::Resumed {
                generation,
                epoch,
                agreed,
            } => {
                return Ok(Rejoined {
                    generation,
                    epoch,
                    agreed,
                })
            }
            Resume::FailedAgain => continue,
            Resume::Orphaned => return Err(RejoinError::Orphaned),
        }
    }
}
