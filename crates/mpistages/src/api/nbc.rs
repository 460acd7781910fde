//! Non-blocking collectives: each runs, as its blocking twin does, on a
//! worker thread of its communicator, under a tag of its own (the
//! communicator's next sequence number), and completes an `Op::External`
//! request. All members start a communicator's collectives in the same
//! order, so the n-th non-blocking collective has the same tag everywhere,
//! and its messages never match those of another collective running at the
//! same time. One worker per communicator runs them in order: a collective
//! never waits for a later one of its communicator, so this cannot
//! deadlock, and progress does not depend on the application calling MPI
//! (strong progress, like the engine's own). A process that waits for the
//! collective at the head of an idle worker's queue runs it itself
//! (`run_here`): the common post-then-wait costs no hand-off between
//! threads (two wake-ups, most of an 8-byte `MPI_Iallreduce`'s time).
//!
//! After a failure the requests fail with the halt like any other; a job
//! not started yet is skipped, one running sees its messages fail and
//! ends. The sequence numbers start again at 0 after a rollback
//! (`Tables::nbc_seq` is not saved), in every process alike.

use super::error::{MpiError, MpiResult};
use super::{Mpi, Pin};
use crate::progress::{Op, ReqError, ReqId, ReqState, Status};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Tags of non-blocking collectives on a collective context: far above
/// the blocking ones (0) and `MPI_Comm_create_group`'s.
const NBC_TAG: i32 = 1 << 29;
const NBC_TAG_SPAN: u32 = 1 << 28;

/// The work of one collective, returning its MPI result.
pub type Job = Box<dyn FnOnce() -> MpiResult<()> + Send>;

/// The work of a collective whose request reports a byte count (file
/// accesses).
pub type CountedJob = Box<dyn FnOnce() -> MpiResult<usize> + Send>;

struct Work {
    id: ReqId,
    tag: i32,
    pins: Vec<(Pin, i32)>,
    job: CountedJob,
}

/// The collectives of one communicator not started yet, in order, and
/// whether one is running (on the worker, or on a waiting thread).
#[derive(Default)]
struct Queue {
    jobs: VecDeque<Work>,
    busy: bool,
    stop: bool,
}

#[derive(Default)]
struct Worker {
    queue: Mutex<Queue>,
    changed: Condvar,
}

impl Worker {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `w` (taken from the queue, `busy` set), then lets the next go.
    fn run_taken(&self, m: &Mpi, w: Work) {
        run(m, w);
        self.lock().busy = false;
        self.changed.notify_all();
    }

    /// The worker thread: the queue's jobs in order, one at a time.
    fn serve(&self, m: &Mpi) {
        let mut q = self.lock();
        loop {
            if !q.busy {
                if let Some(w) = q.jobs.pop_front() {
                    taken();
                    q.busy = true;
                    drop(q);
                    let helper = crate::progress::Helper::running();
                    self.run_taken(m, w);
                    drop(helper);
                    q = self.lock();
                    continue;
                }
                if q.stop {
                    return;
                }
            }
            q = self.changed.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }
}

static WORKERS: Mutex<Option<HashMap<u32, Arc<Worker>>>> = Mutex::new(None);

/// Jobs queued and not started, in all workers: `run_here` (on every
/// `MPI_Wait`, point-to-point ones too) looks no further when there are none.
static QUEUED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn taken() {
    QUEUED.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
}

fn workers() -> MutexGuard<'static, Option<HashMap<u32, Arc<Worker>>>> {
    WORKERS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether any collective waits in a worker's queue (`run_here` may
/// then have something to do).
pub fn any_queued() -> bool {
    QUEUED.load(std::sync::atomic::Ordering::Relaxed) > 0
}

/// `MPI_Wait` (and `MPI_Waitall`) on request `id`: if it is the next
/// collective of a worker that is idle, this thread runs it (in order, as
/// the worker would have) instead of waking the worker and waiting to be
/// woken. Returns whether it did.
pub fn run_here(m: &Mpi, id: ReqId) -> bool {
    if !any_queued() {
        return false;
    }
    let all: Vec<Arc<Worker>> = match workers().as_ref() {
        Some(map) => map.values().cloned().collect(),
        None => return false,
    };
    for w in all {
        let mut q = w.lock();
        if !q.busy && q.jobs.front().is_some_and(|j| j.id == id) {
            let job = q.jobs.pop_front().expect("just seen");
            taken();
            q.busy = true;
            drop(q);
            w.run_taken(m, job);
            return true;
        }
    }
    false
}

/// Collectives handed to a worker and not yet ended (run or skipped), and
/// the condition a rollback waits on until there are none (`quiesce`).
static IN_FLIGHT: Mutex<usize> = Mutex::new(0);
static ENDED: std::sync::Condvar = std::sync::Condvar::new();

fn in_flight() -> std::sync::MutexGuard<'static, usize> {
    IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner())
}

/// How long a rollback waits for the workers before it goes on anyway.
const QUIESCE_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// At a rollback, with the engine halted: waits until no worker runs or
/// holds a collective of the attempt that failed. Their messages fail with
/// the halt, so they end at once; but until they have, a worker may still
/// write into the program's buffers, which after the rollback (and after
/// the Reinit jump, which reuses the stack those buffers were on) belong
/// to the next attempt. A worker still busy after `QUIESCE_LIMIT` is
/// reported and the rollback goes on.
pub fn quiesce() {
    let started = std::time::Instant::now();
    let mut n = in_flight();
    while *n > 0 {
        let left = QUIESCE_LIMIT.saturating_sub(started.elapsed());
        if left.is_zero() {
            log::error!(
                "mpistages: {} non-blocking collective(s) of the failed attempt did not end in {} s; rolling back anyway",
                *n,
                QUIESCE_LIMIT.as_secs()
            );
            return;
        }
        n = ENDED
            .wait_timeout(n, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// Starts `job` as a non-blocking collective of the communicator with
/// collective context `context`; returns its request.
/// The next collective tag of a collective context; pins `pins`.
fn next_tag(m: &Mpi, context: u32, pins: &[(Pin, i32)]) -> i32 {
    let mut t = m.tables();
    for &(k, h) in pins {
        t.pin(k, h);
    }
    let seq = t.nbc_seq.entry(context).or_insert(0);
    let tag = NBC_TAG + (*seq % NBC_TAG_SPAN) as i32;
    *seq = seq.wrapping_add(1);
    tag
}

/// `pins` are the handles it uses, kept from being freed until it ends.
pub fn start(m: &'static Mpi, comm: i32, context: u32, pins: Vec<(Pin, i32)>, job: Job) -> ReqId {
    start_counted_pinned(m, comm, context, pins, Box::new(move || job().map(|()| 0)))
}

/// Starts `job` as `start` does; its request reports the bytes it
/// returns. `owner` is the communicator handle the request's errors go
/// to (or a file's, see `file::request_owner`).
pub fn start_counted(m: &'static Mpi, owner: i32, context: u32, job: CountedJob) -> ReqId {
    start_counted_pinned(m, owner, context, Vec::new(), job)
}

fn start_counted_pinned(
    m: &'static Mpi,
    owner: i32,
    context: u32,
    pins: Vec<(Pin, i32)>,
    job: CountedJob,
) -> ReqId {
    let tag = next_tag(m, context, &pins);
    let id = super::p2p::post(m, Op::External, owner);
    enqueue(m, context, Work { id, tag, pins, job });
    id
}

/// A persistent collective (`MPI_Bcast_init` ...): its work, run again at
/// each `MPI_Start`, under the tag its initialization took (all members
/// initialize a communicator's collectives in the same order).
struct Persistent {
    context: u32,
    tag: i32,
    job: std::sync::Arc<dyn Fn() -> MpiResult<()> + Send + Sync>,
    pins: Vec<(Pin, i32)>,
}

static PERSISTENT: Mutex<Option<HashMap<ReqId, Persistent>>> = Mutex::new(None);

fn persistent() -> std::sync::MutexGuard<'static, Option<HashMap<ReqId, Persistent>>> {
    PERSISTENT.lock().unwrap_or_else(|p| p.into_inner())
}

/// `MPI_*_init` of a collective: an inactive persistent request.
pub fn init(
    m: &'static Mpi,
    comm: i32,
    context: u32,
    pins: Vec<(Pin, i32)>,
    job: std::sync::Arc<dyn Fn() -> MpiResult<()> + Send + Sync>,
) -> ReqId {
    let tag = next_tag(m, context, &pins);
    let id = super::p2p::create_persistent(m, Op::External, comm);
    persistent().get_or_insert_with(HashMap::new).insert(
        id,
        Persistent {
            context,
            tag,
            job,
            pins,
        },
    );
    id
}

/// `MPI_Start` of a request: `None` if it is not a persistent collective,
/// else whether it was inactive and is now started.
pub fn start_persistent(m: &'static Mpi, id: ReqId) -> Option<bool> {
    let (context, tag, job) = {
        let p = persistent();
        let e = p.as_ref()?.get(&id)?;
        (e.context, e.tag, e.job.clone())
    };
    if !m.engine.start(id) {
        return Some(false);
    }
    let job: CountedJob = Box::new(move || job().map(|()| 0));
    enqueue(
        m,
        context,
        Work {
            id,
            tag,
            pins: Vec::new(),
            job,
        },
    );
    Some(true)
}

/// `MPI_Request_free` of a persistent collective: its handles go free.
pub fn free_persistent(m: &Mpi, id: ReqId) {
    let gone = persistent().as_mut().and_then(|p| p.remove(&id));
    if let Some(e) = gone {
        let mut t = m.tables();
        for &(k, h) in &e.pins {
            t.unpin(k, h);
        }
    }
}

fn enqueue(m: &'static Mpi, context: u32, work: Work) {
    let id = work.id;
    *in_flight() += 1;
    QUEUED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut map = workers();
    let map = map.get_or_insert_with(HashMap::new);
    if let Some(w) = map.get(&context) {
        w.lock().jobs.push_back(work);
        w.changed.notify_all();
        return;
    }
    let w = Arc::new(Worker::default());
    w.lock().jobs.push_back(work);
    let served = w.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("mpistages-nbc-{context}"))
        .spawn(move || served.serve(m));
    match spawned {
        Ok(_) => {
            map.insert(context, w);
        }
        Err(e) => {
            taken();
            ended();
            m.engine.complete(
                id,
                failed(MpiError::new(
                    super::consts::err::OTHER,
                    format!("no thread for a non-blocking collective: {e}"),
                )),
            )
        }
    }
}

fn ended() {
    let mut n = in_flight();
    *n = n.saturating_sub(1);
    if *n == 0 {
        ENDED.notify_all();
    }
}

fn failed(e: MpiError) -> Status {
    let mut st = Status::empty();
    st.error = Some(if e.class == super::consts::err::TRY_RELOAD {
        ReqError::Halted
    } else {
        ReqError::Failed {
            class: e.class,
            detail: e.detail,
        }
    });
    st
}

fn run(m: &Mpi, w: Work) {
    // Failed by a halt (or gone with a rollback) before it started.
    let live = matches!(m.engine.state(w.id), ReqState::Live { .. })
        && m.engine.done_among(&[w.id]).is_empty();
    let st = if live {
        match crate::coll::with_tag(w.tag, w.job) {
            Ok(bytes) => Status {
                bytes,
                ..Status::empty()
            },
            Err(e) => failed(e),
        }
    } else {
        Status::empty()
    };
    {
        let mut t = m.tables();
        for &(k, h) in &w.pins {
            t.unpin(k, h);
        }
    }
    m.engine.complete(w.id, st);
    ended();
}

/// Ends the worker threads (at `MPI_Finalize`): each ends once its queue
/// is empty.
pub fn stop_workers() {
    for w in workers().take().into_iter().flat_map(|m| m.into_values()) {
        w.lock().stop = true;
        w.changed.notify_all();
    }
}
