//! MPI Stages: the fault epoch, the MPI-state checkpoint of this rank, the
//! library handle registries, and the rollback protocol with `mpiexec`.
//!
//! Owns: epochs, the rank's checkpoint store, serialize/deserialize handler
//! registries, and the rejoin barrier (`rejoin`). Must not touch: the API
//! layer's tables (they come here as an encoded `MpiState`, built by
//! `api::state`), sockets (it talks to `mpiexec` through `runtime::client`
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

pub mod state;

use crate::checkpoint::config::{self, Config, Level};
use crate::checkpoint::format::{Kind, Section};
use crate::checkpoint::store::Store;
use crate::progress::Engine;
use crate::runtime::client::Client;
use crate::runtime::inject::{self, Trigger};
use crate::runtime::proto::ToController;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use state::{LibraryHandles, MpiState};

/// C handler types of `MPIX_Serialize_handler_register` and
/// `MPIX_Deserialize_handler_register` (the pointer is to `MPIX_Handles`).
pub type SerializeFn = unsafe extern "C" fn(*mut CHandles);
pub type DeserializeFn = unsafe extern "C" fn(CHandles);

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
    pub serializers: Vec<SerializeFn>,
    pub deserializers: Vec<DeserializeFn>,
    /// What the serialize handlers handed over last, saved with the next
    /// checkpoint and restored from it.
    pub library: Vec<LibraryHandles>,
    /// Committed epoch applied to the store's retention.
    committed: u64,
    /// Rank-side fault injection (`mpiexec --inject`).
    injections: Vec<(usize, Trigger)>,
    calls: HashMap<String, u64>,
}

/// How many injection triggers count calls: MPI entry points skip the
/// bookkeeping when this is 0.
static CALL_TRIGGERS: AtomicU64 = AtomicU64::new(0);

impl Stages {
    /// The checkpoint configuration from the environment, with node-local
    /// levels moved into this job's own directory.
    pub fn new(job_id: &str, rank: usize, size: usize) -> Result<Stages, String> {
        let spec = std::env::var(crate::runtime::env::CKPT).unwrap_or_default();
        let mut cfg: Config = config::parse(&spec).map_err(|e| format!("MPISTAGES_CKPT: {e}"))?;
        for l in &mut cfg.levels {
            if let Level::Tmpfs(d) = l {
                *d = config::job_dir(d, job_id);
            }
        }
        let job = job_id.parse::<u64>().unwrap_or(0);
        let store = Store::new(&cfg, job, rank as u32, size as u32)?;
        let injections = inject::decode_for_rank(&std::env::var(inject::ENV).unwrap_or_default());
        let counted = injections
            .iter()
            .filter(|(_, t)| matches!(t, Trigger::Call { .. }))
            .count();
        CALL_TRIGGERS.store(counted as u64, Ordering::Relaxed);
        Ok(Stages::with(store, injections))
    }

    fn with(store: Store, injections: Vec<(usize, Trigger)>) -> Stages {
        Stages {
            epoch: 0,
            store,
            serializers: Vec::new(),
            deserializers: Vec::new(),
            library: Vec::new(),
            committed: 0,
            injections,
            calls: HashMap::new(),
        }
    }

    /// A process started without mpiexec: checkpoints stay in memory.
    pub fn singleton() -> Result<Stages, String> {
        let cfg = Config {
            levels: vec![Level::Mem],
            ..Config::default()
        };
        Ok(Stages::with(Store::new(&cfg, 0, 0, 1)?, Vec::new()))
    }

    /// Saves `state` as the next epoch. The epoch counts as written once the
    /// first level has it; then mpiexec is told.
    pub fn write(
        &mut self,
        state: &MpiState,
        generation: u32,
        client: Option<&Client>,
        committed: u64,
    ) -> Result<u64, String> {
        let epoch = self.epoch + 1;
        let data = state.encode();
        let sections = [Section {
            kind: Kind::MpiState,
            id: 0,
            name: String::new(),
            data,
        }];
        for w in self.store.write(epoch, generation, &sections)? {
            eprintln!("mpistages: warning: {w}");
        }
        self.epoch = epoch;
        match client {
            Some(c) => c
                .send(&ToController::Checkpoint { epoch })
                .map_err(|e| format!("telling mpiexec about epoch {epoch}: {e}"))?,
            // Alone, every epoch is committed when written.
            None => self.apply_committed(epoch),
        }
        self.apply_committed(committed);
        Ok(epoch)
    }

    /// Old epochs go once a newer one is complete on every rank.
    pub fn apply_committed(&mut self, committed: u64) {
        if committed > self.committed {
            self.committed = committed;
            for w in self.store.commit(committed) {
                eprintln!("mpistages: warning: {w}");
            }
        }
    }

    /// The MPI state of `epoch` (None for epoch 0: the state after
    /// `MPI_Init`), from the fastest level holding a valid copy.
    pub fn read(&mut self, epoch: u64, size: usize) -> Result<Option<MpiState>, String> {
        if epoch == 0 {
            return Ok(None);
        }
        let r = self.store.restore(&[epoch])?;
        // A level without a copy is normal (a new process has nothing in
        // memory); a copy that was there but invalid is worth a line.
        for why in r.skipped.iter().filter(|w| !w.ends_with("no copy")) {
            eprintln!("mpistages: checkpoint copy skipped: {why}");
        }
        let sec = r
            .sections
            .iter()
            .find(|s| s.kind == Kind::MpiState)
            .ok_or_else(|| format!("checkpoint epoch {epoch} holds no MPI state"))?;
        let st = MpiState::decode(&sec.data, size)?;
        self.epoch = epoch;
        Ok(Some(st))
    }

    /// Counts a call of `name` and returns true when an injection says this
    /// process must die now.
    pub fn count_call(&mut self, name: &str) -> Option<usize> {
        let n = self.calls.entry(name.to_string()).or_insert(0);
        *n += 1;
        let n = *n;
        self.injections
            .iter()
            .find(|(_, t)| matches!(t, Trigger::Call { name: f, nth } if f == name && *nth == n))
            .map(|(i, _)| *i)
    }

    /// An injection firing right after `epoch` was written.
    pub fn after_checkpoint(&self, epoch: u64) -> Option<usize> {
        self.injections
            .iter()
            .find(|(_, t)| *t == Trigger::Checkpoint(epoch))
            .map(|(i, _)| *i)
    }
}

/// Whether any call-count injection is armed (a cheap check for every call).
pub fn counting_calls() -> bool {
    CALL_TRIGGERS.load(Ordering::Relaxed) > 0
}

/// Fault injection: tells mpiexec, then dies the way a crashed node does.
pub fn kill_self(client: Option<&Client>, spec: usize) -> ! {
    if let Some(c) = client {
        let _ = c.send(&ToController::Injecting { spec });
    }
    // SAFETY: fflush(NULL) flushes C streams; raise takes no pointers.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::raise(libc::SIGKILL);
    }
    unreachable!("SIGKILL cannot be caught")
}

/// Why a rejoin did not end with the job running again.
#[derive(Debug)]
pub enum RejoinError {
    /// mpiexec is gone.
    Orphaned,
}

/// The rejoin barrier of a rollback: clean up to the newest announced
/// failure, tell mpiexec this rank is ready, and wait until every rank is.
/// A further failure announced meanwhile starts the round again. Returns
/// the generation the job resumed at and the epoch to restore.
pub fn rejoin(engine: &Arc<Engine>, client: &Client) -> Result<(u32, u64), RejoinError> {
    loop {
        let generation = engine.with(|c| {
            let g = c.notices.failed.max(c.generation());
            if g > c.generation() {
                c.cleanup(g);
            }
            g
        });
        if client.send(&ToController::Ready { generation }).is_err() {
            return Err(RejoinError::Orphaned);
        }
        enum Next {
            Resumed(u64),
            Again,
            Orphaned,
        }
        let next = engine.wait_until(|c| {
            if c.notices.failed > c.generation() {
                Some(Next::Again)
            } else if c.notices.resumed >= c.generation() {
                Some(Next::Resumed(c.notices.epoch))
            } else if c.notices.orphaned {
                Some(Next::Orphaned)
            } else {
                None
            }
        });
        match next {
            Next::Resumed(epoch) => return Ok((generation, epoch)),
            Next::Again => continue,
            Next::Orphaned => return Err(RejoinError::Orphaned),
        }
    }
}
