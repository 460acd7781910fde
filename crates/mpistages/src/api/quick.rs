//! The tables as the quick paths of sends and receives see them, without
//! their lock: each thread keeps the few communicators and datatypes its
//! last calls used, valid while the tables' version is the one it saw.
//! Every mutable access to the tables (`TablesGuard`'s `deref_mut`) moves
//! the version on, so a handle freed or changed since is looked up again
//! under the lock. A message-rate loop then pays one load per call instead
//! of a lock and an unlock (two atomic read-modify-writes: a sixth of an
//! `MPI_Irecv`).

use super::datatype::Datatype;
use super::{Comm, Mpi, Tables};
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard};

/// Moved on by every mutable access to the tables.
static VERSION: AtomicU64 = AtomicU64::new(0);

/// The tables, held: reading them leaves the version alone, changing
/// them (or taking them mutably at all) moves it on.
pub struct TablesGuard<'a>(pub(super) MutexGuard<'a, Tables>);

impl Deref for TablesGuard<'_> {
    type Target = Tables;
    fn deref(&self) -> &Tables {
        &self.0
    }
}

impl DerefMut for TablesGuard<'_> {
    fn deref_mut(&mut self) -> &mut Tables {
        // Under the lock: nobody fills a cache from the tables meanwhile,
        // and a fill after this hold sees both the change and the version.
        VERSION.fetch_add(1, Ordering::Release);
        &mut self.0
    }
}

/// Entries per kind: a few communicators (a halo exchange on a Cartesian
/// one beside the world), a few datatypes.
const WAYS: usize = 4;

struct Cache {
    version: u64,
    comms: [Option<(i32, Arc<Comm>)>; WAYS],
    types: [Option<(i32, Arc<Datatype>)>; WAYS],
}

thread_local! {
    static CACHE: RefCell<Cache> = const {
        RefCell::new(Cache {
            version: u64::MAX,
            comms: [None, None, None, None],
            types: [None, None, None, None],
        })
    };
}

/// Whether a cache entry is that of handle `h`.
fn holds<T>(entry: &Option<(i32, T)>, h: i32) -> bool {
    entry.as_ref().is_some_and(|(k, _)| *k == h)
}

fn way(h: i32) -> usize {
    h as usize % WAYS
}

/// Runs `f` on communicator `comm` and committed datatype `dt` as the
/// tables have them now, or gives `None` if either handle names nothing
/// (the ordinary path then reports the error).
pub fn with_comm_and_type<T>(
    m: &Mpi,
    comm: i32,
    dt: i32,
    f: impl FnOnce(&Comm, &Datatype) -> Option<T>,
) -> Option<T> {
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        let now = VERSION.load(Ordering::Acquire);
        if cache.version != now {
            *cache = Cache {
                version: now,
                comms: Default::default(),
                types: Default::default(),
            };
        }
        let (c, t) = (way(comm), way(dt));
        if !holds(&cache.comms[c], comm) || !holds(&cache.types[t], dt) {
            let tables = m.tables();
            // Read again under the lock: a change since the load above
            // would otherwise be cached under the old version.
            let now = VERSION.load(Ordering::Acquire);
            if cache.version != now {
                return None;
            }
            let found_comm = tables.comm_ref(comm).ok()?.clone();
            let found_type = tables.committed_dtype(dt)?.clone();
            cache.comms[c] = Some((comm, found_comm));
            cache.types[t] = Some((dt, found_type));
        }
        let (_, comm) = cache.comms[c].as_ref()?;
        let (_, dtype) = cache.types[t].as_ref()?;
        f(comm, dtype)
    })
}

/// The tables of a new runtime: no cache filled before may answer for them.
pub(super) fn new_tables() {
    VERSION.fetch_add(1, Ordering::Release);
}
