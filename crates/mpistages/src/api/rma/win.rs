//! Window objects (`MPI_Win`): the table of handles, what each window
//! knows about its members, its memory, its agent, and what its origin
//! side has outstanding.

use super::target::{Memory, Target};
use crate::api::consts::{err, ERRORS_ARE_FATAL};
use crate::api::error::{fail, MpiResult};
use crate::api::info::Info;
use crate::api::Comm;
use crate::progress::ReqId;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// `MPI_WIN_NULL`.
pub const WIN_NULL: i32 = 0;

/// `MPI_WIN_FLAVOR_*` and `MPI_WIN_SEPARATE` / `MPI_WIN_UNIFIED` (MPICH's
/// values).
pub mod flavor {
    pub const CREATE: i32 = 1;
    pub const ALLOCATE: i32 = 2;
    pub const DYNAMIC: i32 = 3;
    pub const SHARED: i32 = 4;
}
pub const SEPARATE: i32 = 1;
pub const UNIFIED: i32 = 2;

/// What an origin waits for before its operations to a target are
/// complete.
pub enum Pending {
    /// A request message (put, accumulate) or our own reply receive.
    Ours(ReqId),
    /// A request the program also holds (`MPI_Rput` ...): waited for, not
    /// taken.
    Users(ReqId),
    /// A reply that must bring exactly this many bytes (a get's).
    Reply {
        id: ReqId,
        bytes: usize,
        users: bool,
    },
}

/// A window whose members share one host: locks are atomics in a page
/// every member maps, and (`MPI_Win_create`) puts and gets are
/// cross-memory copies into the target process.
pub struct OnHost {
    pub locks: std::sync::Arc<super::hostlock::HostLocks>,
    /// Each member's process ID and window base, for windows of the
    /// program's memory; `None` for the others, and once a copy failed
    /// (the kernel's ptrace policy forbids it): then the agent does them.
    pub cma: Option<Vec<(i32, usize)>>,
}

/// A passive-target lock an origin holds.
pub struct Held {
    /// Asked for (not under `MPI_MODE_NOCHECK`, which asks nothing).
    pub asked: bool,
    pub exclusive: bool,
}

pub struct Win {
    /// A private duplicate of the communicator it was created on.
    pub comm: Arc<Comm>,
    pub target: Arc<Target>,
    pub flavor: i32,
    /// This member's base address and size, as the program sees them.
    pub base: usize,
    pub size: usize,
    pub disp_unit: usize,
    /// Every member's (size, displacement unit), to check ranges at the
    /// origin.
    pub peers: Vec<(usize, usize)>,
    /// Every member's base address in this process's mapping, for windows
    /// in shared memory (`_allocate_shared`, `_allocate` on one host);
    /// empty for the others.
    pub shared_bases: Vec<usize>,
    /// What origins do themselves when every member shares this host.
    pub on_host: Option<OnHost>,
    pub info: Info,
    pub name: String,
    /// Memory we allocated (`MPI_Win_allocate`), freed with the window.
    pub owned: Option<Vec<u128>>,
    /// A shared window's mapping, unmapped with the window.
    pub mapping: Option<memmap2::MmapMut>,
    /// Per target, what is outstanding.
    pub pending: Vec<Vec<Pending>>,
    /// Targets with requests not flushed yet.
    pub unflushed: BTreeSet<usize>,
    /// Targets this origin holds a lock on, and how.
    pub locked: std::collections::BTreeMap<usize, Held>,
    /// `MPI_Win_start`'s group (ranks in the window), until `complete`.
    pub access: Option<Vec<usize>>,
    /// `MPI_Win_post`'s group, until `wait`.
    pub exposure: Option<Vec<usize>>,
    next_reply: i32,
}

impl Win {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        comm: Arc<Comm>,
        target: Arc<Target>,
        flavor: i32,
        base: usize,
        size: usize,
        disp_unit: usize,
        peers: Vec<(usize, usize)>,
        info: Info,
    ) -> Win {
        let n = comm.size();
        Win {
            comm,
            target,
            flavor,
            base,
            size,
            disp_unit,
            peers,
            shared_bases: Vec::new(),
            on_host: None,
            info,
            name: String::new(),
            owned: None,
            mapping: None,
            pending: (0..n).map(|_| Vec::new()).collect(),
            unflushed: BTreeSet::new(),
            locked: Default::default(),
            access: None,
            exposure: None,
            next_reply: super::wire::FIRST_REPLY,
        }
    }

    /// A tag for one reply.
    pub fn reply_tag(&mut self) -> i32 {
        let t = self.next_reply;
        self.next_reply = if t >= (1 << 28) {
            super::wire::FIRST_REPLY
        } else {
            t + 1
        };
        t
    }

    /// Checks a target rank (`None` for `MPI_PROC_NULL`).
    pub fn target_rank(&self, rank: i32) -> MpiResult<Option<usize>> {
        if rank == crate::api::consts::PROC_NULL {
            return Ok(None);
        }
        match usize::try_from(rank).ok().filter(|&r| r < self.comm.size()) {
            Some(r) => Ok(Some(r)),
            None => fail(
                err::RANK,
                format!(
                    "target rank {rank} is not in the window's group of {}",
                    self.comm.size()
                ),
            ),
        }
    }
}

/// The window table: handle 0 is `MPI_WIN_NULL`.
struct Table {
    wins: Vec<Option<Arc<Mutex<Win>>>>,
    handlers: Vec<i32>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    wins: Vec::new(),
    handlers: Vec::new(),
});

fn table() -> MutexGuard<'static, Table> {
    let mut t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    if t.wins.is_empty() {
        t.wins.push(None);
        t.handlers.push(ERRORS_ARE_FATAL);
    }
    t
}

/// The window behind a handle.
pub fn get(h: i32) -> MpiResult<Arc<Mutex<Win>>> {
    let t = table();
    match usize::try_from(h).ok().and_then(|i| t.wins.get(i)) {
        Some(Some(w)) => Ok(w.clone()),
        _ => fail(err::WIN, format!("invalid window handle {h}")),
    }
}

pub fn lock(w: &Mutex<Win>) -> MutexGuard<'_, Win> {
    w.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn add(w: Win) -> i32 {
    let mut t = table();
    let w = Some(Arc::new(Mutex::new(w)));
    match t.wins.iter().skip(1).position(Option::is_none) {
        Some(i) => {
            t.wins[i + 1] = w;
            t.handlers[i + 1] = ERRORS_ARE_FATAL;
            (i + 1) as i32
        }
        None => {
            t.wins.push(w);
            t.handlers.push(ERRORS_ARE_FATAL);
            (t.wins.len() - 1) as i32
        }
    }
}

/// Every window, taken out of the table (a rollback releases them).
pub fn take_all() -> Vec<Arc<Mutex<Win>>> {
    let mut t = table();
    let all = t.wins.iter_mut().filter_map(Option::take).collect();
    for h in t.handlers.iter_mut().skip(1) {
        *h = ERRORS_ARE_FATAL;
    }
    all
}

pub fn remove(h: i32) {
    let mut t = table();
    if let Some(slot) = t.wins.get_mut(h as usize) {
        *slot = None;
    }
}

/// Whether `h` ever named a window (`MPI_WIN_NULL` never does; a freed
/// window's handle keeps its error handler until the slot is reused).
pub fn ever_named(h: i32) -> bool {
    h > 0 && (h as usize) < table().handlers.len()
}

/// A window's error handler (`MPI_ERRORS_ARE_FATAL` unless set, as the
/// standard says).
pub fn errhandler(h: i32) -> i32 {
    let t = table();
    usize::try_from(h)
        .ok()
        .and_then(|i| t.handlers.get(i).copied())
        .unwrap_or(ERRORS_ARE_FATAL)
}

pub fn set_errhandler(h: i32, eh: i32) -> MpiResult<()> {
    get(h)?;
    table().handlers[h as usize] = eh;
    Ok(())
}

/// The info keys a window knows (MPI 4.0 12.2.7), with their defaults
/// where the standard gives one; other keys are ignored, as hints may be.
const KNOWN: &[(&str, Option<&str>)] = &[
    ("no_locks", Some("false")),
    ("accumulate_ordering", Some("rar,raw,war,waw")),
    ("accumulate_ops", Some("same_op_no_op")),
    ("same_size", Some("false")),
    ("same_disp_unit", Some("false")),
    ("alloc_shared_noncontig", Some("false")),
    ("mpi_accumulate_granularity", None),
];

/// A new window's info: the defaults, then the keys of `given` it knows.
pub fn initial_info(given: &Info) -> Info {
    let mut info = Info::default();
    for (k, v) in KNOWN {
        if let Some(v) = v {
            let _ = info.set(k, v);
        }
    }
    merge_info(&mut info, given);
    info
}

/// `MPI_Win_set_info`: the keys of `given` a window knows replace its own.
pub fn merge_info(info: &mut Info, given: &Info) {
    for (k, v) in given.entries() {
        if KNOWN.iter().any(|(known, _)| *known == k) {
            let _ = info.set(k, v);
        }
    }
}

/// A fixed window's memory; `atomic`: in shared memory origins update
/// (see `Target::atomic`).
pub fn fixed(base: usize, size: usize, disp_unit: usize, atomic: bool) -> Target {
    Target {
        memory: Memory::Fixed { base, size },
        disp_unit,
        atomic,
    }
}
