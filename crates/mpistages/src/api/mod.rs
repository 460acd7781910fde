//! The Rust-level MPI interface: initialization, the handle tables
//! (communicators, groups, datatypes, ops), argument checking and the
//! operations themselves. Owns: MPI objects and their integer handles.
//! Must not touch: C types or raw C arguments (that is `src/abi`), sockets.

pub mod attr;
pub mod collective;
pub mod comm;
pub mod consts;
pub mod datatype;
pub mod dpm;
pub mod error;
pub mod file;
pub mod file_collective;
pub mod file_view;
pub mod group;
pub mod info;
pub mod intercoll;
pub mod launch;
pub mod logging;
pub mod mpix;
pub mod nbc;
pub mod op;
pub mod p2p;
pub mod protect;
pub mod quick;
pub mod recovery;
pub mod redundancy;
pub mod reinit;
pub mod rma;
pub mod session;
pub mod spawn;
pub mod state;
mod tables;
pub mod topo;
pub mod ulfm;
pub mod usermem;

use crate::control::client::Client;
pub use crate::control::mode::RecoveryMode;
use crate::control::proto::ToController;
/// The vocabulary of the engine and the transports that the C ABI speaks
/// too: requests, their statuses and the memory they move.
pub use crate::progress::request::Owned;
pub use crate::progress::{
    Data, Found, Layout, Op, ReqError, ReqId, ReqState, SendMode, Status, Waited, NO_OWNER,
};
use crate::progress::{Engine, EngineConfig, FinalizeEnd, ProgressMode};
use crate::sys::epoll::Epoll;
pub use crate::transport::RawBuf;
use consts::{dt, err};
use datatype::Datatype;
use error::{fail, MpiError, MpiResult};
use group::Group;
use op::OpDef;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
pub use tables::{initial_tables, Comm, CommEntry, Pin, Tables};

pub struct Mpi {
    pub engine: Arc<Engine>,
    pub rank: usize,
    pub size: usize,
    pub tables: Mutex<Tables>,
    /// The process ids of `MPI_COMM_WORLD` (`0..size`, but a world of its
    /// own in processes started by `MPI_Comm_spawn`).
    pub world: Vec<usize>,
    pub client: Option<Arc<Client>>,
    /// Started directly by `srun` (PMI-2) instead of mpiexec.
    pub srun: Option<launch::Srun>,
    /// Fault epoch, checkpoint store, handle registries.
    pub stages: Mutex<crate::stages::Stages>,
    /// Regions registered with `MPIX_Protect`.
    pub regions: protect::Regions,
    /// What a failed rank means for this job (`mpiexec --recovery`).
    pub mode: RecoveryMode,
    /// This process was started because of a failure (a replacement, or a
    /// rank of a relaunched `cpr` job).
    pub relaunched: bool,
    pub thread_level: i32,
    pub started: Instant,
    /// The thread that called `MPI_Init` (`MPI_Is_thread_main`).
    pub main_thread: std::thread::ThreadId,
}

/// `MPISTAGES_RECOVERY`: how mpiexec reacts to a failed rank.
fn recovery_from_env() -> MpiResult<RecoveryMode> {
    match std::env::var(crate::control::env::RECOVERY) {
        Err(_) => Ok(RecoveryMode::None),
        Ok(v) if v.is_empty() => Ok(RecoveryMode::None),
        Ok(v) => {
            RecoveryMode::parse(&v).or_else(|e| fail(err::ARG, format!("MPISTAGES_RECOVERY={e}")))
        }
    }
}

const NOT_STARTED: u8 = 0;
const RUNNING: u8 = 1;
const FINALIZED: u8 = 2;
/// The runtime (connections, engine, tables): started by the first of
/// `MPI_Init` and `MPI_Session_init`, torn down once, when neither model
/// holds it any longer (`tear_down`).
static STATE: AtomicU8 = AtomicU8::new(NOT_STARTED);
/// The world model (`MPI_Init` … `MPI_Finalize`), which `MPI_Initialized`
/// and `MPI_Finalized` report.
static WORLD: AtomicU8 = AtomicU8::new(NOT_STARTED);
/// Sessions open (MPI 4.0). Every change of `STATE` and `WORLD` happens
/// under this lock too.
static SESSIONS: Mutex<usize> = Mutex::new(0);
static MPI: OnceLock<Arc<Mpi>> = OnceLock::new();

fn sessions() -> MutexGuard<'static, usize> {
    SESSIONS.lock().unwrap_or_else(|p| p.into_inner())
}

/// `MPI_Get_processor_name`: this host's name.
pub fn processor_name() -> String {
    crate::sys::process::hostname()
}

/// `MPI_Initialized`: whether `MPI_Init` was called (sessions do not count).
pub fn initialized() -> bool {
    WORLD.load(Ordering::Acquire) != NOT_STARTED
}

/// `MPI_Finalized`: whether `MPI_Finalize` was called.
pub fn finalized() -> bool {
    WORLD.load(Ordering::Acquire) == FINALIZED
}

/// The running MPI instance, or an error outside `MPI_Init` … `MPI_Finalize`.
pub fn mpi() -> MpiResult<&'static Arc<Mpi>> {
    match (STATE.load(Ordering::Acquire), MPI.get()) {
        (RUNNING, Some(m)) => Ok(m),
        (FINALIZED, _) => fail(err::OTHER, "MPI has already been finalized"),
        _ => fail(
            err::OTHER,
            "MPI has not been initialized (call MPI_Init or MPI_Session_init first)",
        ),
    }
}

impl Mpi {
    pub fn tables(&self) -> quick::TablesGuard<'_> {
        quick::TablesGuard(self.tables.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

pub(crate) fn env_usize(name: &str, default: usize) -> MpiResult<usize> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => v
            .parse()
            .map_err(|_| MpiError::new(err::ARG, format!("{name}='{v}' is not a number"))),
    }
}

/// How long a waiting thread polls before it sleeps at first and at most
/// (unless `MPISTAGES_SPIN_US` and `MPISTAGES_SPIN_MAX_US` say; see
/// progress/spin.rs), and whether it yields its core between polling
/// rounds from the start. Polling saves the ~15 us a wake-up from epoll costs per
/// message (more on a virtual machine). While every rank has a core of its
/// own it polls without yielding; on an oversubscribed machine a rank that
/// polls without yielding takes the core from the rank it waits for, so
/// there it yields between rounds (as Open MPI does when oversubscribed),
/// for longer, since each round is shorter than the other rank's turn.
/// Measured (bench/src/allreduce.c): 2 ranks on 2 cores, 8-byte latency
/// 43 -> 5 us; 4 ranks on 2 cores, 8-byte allreduce 55-63 us sleeping at
/// once, 108 us polling without yielding, 30-45 us yielding; 256 KiB
/// 690-910 -> 370-600 us; 8 ranks, 8 bytes 144-170 -> 96-123 us.
fn default_spin(crowd: &Crowding) -> (usize, usize, bool) {
    const SPIN_US: usize = 50;
    const SPIN_MAX_US: usize = 1000;
    const SPIN_YIELDING_US: usize = 200;
    if crowd.local <= crowd.cores {
        // Bound to a share of the cores (mpiexec's default where ranks
        // fit) or not: the budget grows as waits need (a 1 MiB ping-pong
        // waits ~100 us for the peer's copy: 150 us a message at a 50 us
        // budget, 98 at 300, Open MPI 97-103), except while this process's
        // own threads need the core (progress::Helper).
        (SPIN_US, SPIN_MAX_US, false)
    } else {
        // Idle ranks must sleep: the budget does not grow.
        (SPIN_YIELDING_US, SPIN_YIELDING_US, true)
    }
}

/// The ranks of this host and its cores.
#[derive(Clone, Copy)]
struct Crowding {
    local: usize,
    cores: usize,
}

fn crowding(size: usize) -> Crowding {
    let from_env = |name| std::env::var(name).ok().and_then(|v| v.parse().ok());
    // Not this process's affinity: bound to a core, it sees one.
    let mine = std::thread::available_parallelism().map_or(1, |n| n.get());
    Crowding {
        local: from_env(crate::control::env::LOCAL_SIZE).unwrap_or(size),
        cores: from_env(crate::control::env::LOCAL_CORES).unwrap_or(mine),
    }
}

/// How often a parked progress thread looks whether it is needed: every
/// `STANDBY` while ranks fit on the cores, and as many times less often as
/// ranks outnumber them (up to a second), so that a host's parked threads
/// wake about as often in all. 1024 ranks on 2 cores each looking every
/// 20 ms were 49,000 wake-ups a second, most of a barrier's time (20
/// barriers 6.5 s, 2.5 s at 200 ms); an application computing there gets
/// a share of a core too small for progress in the background to matter.
fn default_standby(crowd: &Crowding) -> Duration {
    let ratio = crowd.local.div_ceil(crowd.cores.max(1)).max(1) as u32;
    (crate::progress::STANDBY * ratio).min(Duration::from_secs(1))
}

pub(crate) fn io_err(what: &str) -> impl Fn(std::io::Error) -> MpiError + '_ {
    move |e| MpiError::new(err::OTHER, format!("{what}: {e}"))
}

/// `MPI_Init_thread`: returns the provided thread level.
pub fn init(required: i32) -> MpiResult<i32> {
    let _sessions = sessions();
    match WORLD.load(Ordering::Acquire) {
        RUNNING => return fail(err::OTHER, "MPI_Init was called twice"),
        FINALIZED => {
            return fail(
                err::OTHER,
                "MPI_Init after MPI_Finalize: the world model is initialized once per process \
                 (sessions, MPI_Session_init, are the model to start again)",
            )
        }
        _ => {}
    }
    bring_up()?;
    WORLD.store(RUNNING, Ordering::Release);
    Ok(required.clamp(consts::THREAD_SINGLE, consts::THREAD_MULTIPLE))
}

/// `MPI_Session_init`: the runtime is up, and held by one more session.
pub fn open_session() -> MpiResult<&'static Arc<Mpi>> {
    let mut open = sessions();
    let first = STATE.load(Ordering::Acquire) == NOT_STARTED;
    bring_up()?;
    if first && WORLD.load(Ordering::Acquire) == NOT_STARTED {
        // Sessions alone started it: it lives on after the last session
        // (another may begin) and is torn down as the process exits.
        if let Err(e) = crate::sys::process::at_exit(tear_down_at_exit) {
            log::warn!("mpistages: {e}: MPI will not be finalized at exit");
        }
    }
    *open += 1;
    mpi()
}

/// `MPI_Session_finalize`: one session fewer; the last one out after
/// `MPI_Finalize` tears the runtime down. A session program's runtime
/// outlives its last session (the process may begin another; MPICH's
/// tests do) and goes as the process exits.
pub fn close_session() -> MpiResult<()> {
    let mut open = sessions();
    *open = open.saturating_sub(1);
    if *open == 0 && WORLD.load(Ordering::Acquire) == FINALIZED {
        return tear_down(mpi()?);
    }
    Ok(())
}

/// A session program's end (`exit`, or a return from `main`): the
/// runtime is torn down as `MPI_Finalize` would, after a successful exit
/// only. A failing one (status not 0, `MPI_Abort`, a fatal error) is for
/// mpiexec to see as such: a finalize barrier there could wait for ranks
/// that wait for this one.
extern "C" fn tear_down_at_exit(status: std::os::raw::c_int, _: *mut std::os::raw::c_void) {
    let _open = sessions();
    // After MPI_Init (which came after the sessions), MPI_Finalize is the
    // end, not the exit.
    if status != 0 || ENDING.load(Ordering::Acquire) || WORLD.load(Ordering::Acquire) != NOT_STARTED
    {
        return;
    }
    if let Ok(m) = mpi() {
        if let Err(e) = tear_down(m) {
            log::warn!(
                "mpistages: rank {}: ending MPI at exit: {}",
                m.rank,
                e.detail
            );
        }
    }
}

/// Starts the runtime unless it runs: joins the job, makes the tables,
/// restores a replacement's state.
fn bring_up() -> MpiResult<()> {
    match STATE.load(Ordering::Acquire) {
        RUNNING => return Ok(()),
        FINALIZED => {
            return fail(
                err::OTHER,
                "MPI was finalized in this process (MPI_Finalize, and the last session after it); \
                 mpistages does not start it again",
            )
        }
        _ => {}
    }
    logging::init().or_else(|e| fail(err::ARG, e))?;
    let mpi = start()?;
    let replacement = mpi.relaunched;
    let _ = MPI.set(Arc::new(mpi));
    STATE.store(RUNNING, Ordering::Release);
    let m = MPI.get().expect("just set");
    spawn::adopt_parent(m)?;
    comm::announce_all(m);
    // The library's own communicator (`recovery`): the world's ranks.
    let world = m.tables().comm(consts::COMM_WORLD)?;
    let internal = Comm::intra(recovery::STAGES_CONTEXT, world.group.clone(), m.rank);
    comm::announce(m, &internal);
    if replacement {
        if let Err(e) = mpix::restore_replacement(m) {
            log::error!("mpistages: rank {}: {}", m.rank, e.detail);
            abort(
                err::OTHER,
                &format!("replacement rank {} cannot restore: {}", m.rank, e.detail),
            );
        }
    }
    Ok(())
}

/// A panic anywhere in the library (a bug) ends the process at once: a
/// dead progress thread would otherwise leave the rank hanging. mpiexec
/// then reports the rank as killed by SIGABRT.
fn abort_on_panic() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        eprintln!("mpistages: internal error (a bug); aborting this process");
        std::process::abort();
    }));
}

fn start() -> MpiResult<Mpi> {
    abort_on_panic();
    let mode = match std::env::var("MPISTAGES_PROGRESS").as_deref() {
        Err(_) | Ok("thread") | Ok("") => ProgressMode::Thread,
        Ok("poll") => ProgressMode::Poll,
        Ok(other) => {
            return fail(
                err::ARG,
                format!("MPISTAGES_PROGRESS='{other}': expected thread or poll"),
            )
        }
    };
    hold_liveness();
    let epoll = Arc::new(Epoll::new().map_err(io_err("epoll"))?);
    let recovery = recovery_from_env()?;
    let launch::Joined {
        rank,
        size,
        generation,
        client,
        srun,
        transport,
        restore_epoch,
        job_id,
        injections,
        replacement,
    } = launch::join(&epoll, recovery)?;
    let world = spawn::world_from_env(rank, size)?;
    // Watched in every mode: besides failures, mpiexec announces committed
    // checkpoint epochs on it, which is when old epochs may be removed.
    let control = match &client {
        Some(c) => Some((
            c.reader()
                .map_err(io_err("watching the control connection"))?,
            c.clone(),
        )),
        None => None,
    };
    let stages = if size > 1 || client.is_some() {
        crate::inject::arm(&injections);
        crate::stages::Stages::new(&job_id, rank, size)
            .map_err(|e| error::stages_error("MPI_Init", e))?
    } else {
        crate::stages::Stages::singleton()
    };
    let crowd = crowding(size);
    let (spin_us, spin_max_us, spin_yield) = default_spin(&crowd);
    let spin = Duration::from_micros(env_usize("MPISTAGES_SPIN_US", spin_us)? as u64);
    let spin_max = Duration::from_micros(env_usize("MPISTAGES_SPIN_MAX_US", spin_max_us)? as u64);
    let engine = Engine::new(EngineConfig {
        spin,
        spin_max,
        spin_yield,
        standby: default_standby(&crowd),
        me: rank,
        size,
        generation,
        mode,
        epoll,
        transport,
        control,
        replacement,
        ulfm: recovery == RecoveryMode::Ulfm,
    })
    .map_err(io_err("starting the progress engine"))?;
    engine.set_restore_epoch(restore_epoch);
    Ok(Mpi {
        engine,
        rank,
        size,
        tables: {
            quick::new_tables();
            Mutex::new(initial_tables(rank, &world))
        },
        world,
        client,
        srun,
        stages: Mutex::new(stages),
        regions: Default::default(),
        mode: recovery,
        relaunched: replacement,
        thread_level: consts::THREAD_MULTIPLE,
        started: Instant::now(),
        main_thread: std::thread::current().id(),
    })
}

/// `mpiexec --initial-errhandler`: the error handler of WORLD and SELF at
/// `MPI_Init` (MPI 4.0), by name.
pub const INITIAL_ERRHANDLER_ENV: &str = "MPISTAGES_INITIAL_ERRHANDLER";

fn initial_errhandler() -> i32 {
    match std::env::var(INITIAL_ERRHANDLER_ENV).as_deref() {
        Ok("mpi_errors_return") => consts::ERRORS_RETURN,
        Ok("mpi_errors_abort") => consts::ERRORS_ABORT,
        _ => consts::ERRORS_ARE_FATAL,
    }
}

/// `MPI_Finalize`: the world model ends; the runtime too unless a session
/// still holds it (then the last `MPI_Session_finalize` ends it).
pub fn finalize() -> MpiResult<()> {
    let open = sessions();
    if WORLD.load(Ordering::Acquire) != RUNNING {
        return fail(
            err::OTHER,
            "MPI_Finalize without MPI_Init (or a second time)",
        );
    }
    let m = mpi()?;
    WORLD.store(FINALIZED, Ordering::Release);
    if *open == 0 {
        tear_down(m)?;
    }
    Ok(())
}

/// The runtime's end: a barrier so no rank closes connections others
/// still need, then the engine stops.
fn tear_down(m: &Mpi) -> MpiResult<()> {
    nbc::stop_workers();
    // The parity thread's report of the last epoch goes before this.
    m.stages().settle();
    if let Some(c) = &m.client {
        let _ = c.send(&crate::control::proto::ToController::Finalizing);
    }
    let world = m.tables().comm(consts::COMM_WORLD)?;
    // Background flushes finish first; agreeing on the newest epoch every
    // rank then has durable is also the barrier MPI_Finalize needs.
    let flushed = m.stages().wait_flushes();
    let closing = if m.engine.halted() {
        Err(MpiError::new(err::TRY_RELOAD, ""))
    } else if m.mode == RecoveryMode::Ulfm || m.engine.is_revoked(world.context) {
        // Dead ranks do not come to a barrier, and a revoked world carries
        // none: an agreement among the live ranks is the barrier (no epoch
        // is claimed durable).
        ulfm::barrier(m, &world).map(|()| (0, 0))
    } else if let Some(c) = &m.client {
        finalize_barrier(m, c, flushed.unwrap_or(0)).map(|d| (d, d))
    } else {
        recovery::min_max(m, &world, flushed.unwrap_or(0))
    };
    let (durable, _) = match closing {
        Err(e) if e.class == err::TRY_RELOAD => finalize_in_recovery(m),
        r => r?,
    };
    m.engine.shutdown();
    m.stages()
        .finalize((durable > 0).then_some(durable), m.rank);
    if let Some(srun) = &m.srun {
        if let Err(e) = srun.lock().unwrap_or_else(|p| p.into_inner()).finalize() {
            log::warn!("mpistages: rank {}: PMI-2 finalize: {e}", m.rank);
        }
    }
    // A clean end from here: mpiexec's watcher sees the lock released.
    if let Some(h) = LIVENESS.lock().unwrap_or_else(|p| p.into_inner()).take() {
        h.release();
    }
    STATE.store(FINALIZED, Ordering::Release);
    Ok(())
}

/// `MPI_Finalize`'s barrier through mpiexec, which also gives the newest
/// epoch every rank of the world has durable. An allreduce among the
/// ranks made log2(ranks) connections per rank at the job's end (half of
/// a trivial program's time at 1024 ranks); mpiexec hears every rank
/// anyway. Without mpiexec (srun, a singleton) the ranks reduce.
fn finalize_barrier(m: &Mpi, c: &Client, durable: u64) -> MpiResult<u64> {
    c.send(&ToController::FinalizeBarrier { durable })
        .map_err(io_err("MPI_Finalize: telling mpiexec"))?;
    match m.engine.wait_finalized() {
        FinalizeEnd::Done { durable } => Ok(durable),
        FinalizeEnd::Halted => Err(MpiError::new(err::TRY_RELOAD, "")),
        FinalizeEnd::Orphaned => fail(
            err::OTHER,
            "MPI_Finalize: mpiexec is gone (the job was ended)",
        ),
    }
}

/// The robust lock mpiexec watches (`sys::liveness`), held from
/// `MPI_Init` to `MPI_Finalize`: mpiexec sees this process die as the
/// kernel begins to tear it down, not once it has freed its memory.
static LIVENESS: std::sync::Mutex<Option<crate::sys::liveness::Holder>> =
    std::sync::Mutex::new(None);

fn hold_liveness() {
    let Some(fd) = std::env::var(crate::control::env::LIVENESS_FD)
        .ok()
        .and_then(|v| v.parse().ok())
    else {
        return;
    };
    match crate::sys::liveness::hold(fd) {
        Ok(h) => *LIVENESS.lock().unwrap_or_else(|p| p.into_inner()) = Some(h),
        Err(e) => log::debug!("mpistages: no liveness lock: {e}"),
    }
}

/// `MPI_Finalize` met a failure this rank has not rolled back from: it is
/// leaving the program, so the recovery cannot complete and the job ends.
fn finalize_in_recovery(m: &Mpi) -> ! {
    let failed = m.engine.failed_ranks();
    fatal(
        err::TRY_RELOAD,
        &format!(
            "MPI_Finalize: rank(s) {failed:?} failed and this rank did not roll back (no \
             MPIX_Checkpoint_read after MPIX_TRY_RELOAD, or MPIX_Reinit under --recovery \
             reinit), so the job cannot recover and ends"
        ),
    )
}

/// `MPI_Abort`: asks `mpiexec` to end the job; exits if it does not.
pub fn abort(code: i32, message: &str) -> ! {
    end_job(ToController::Abort {
        code,
        message: message.to_string(),
    })
}

/// `MPI_Abort` of this process alone (ULFM, see `abi::env`): it ends as a
/// failed process, which the others survive.
pub fn abort_self(code: i32) -> ! {
    // SAFETY: fflush(NULL) flushes every open C stream; no pointer is read.
    unsafe {
        libc::fflush(std::ptr::null_mut());
    }
    let rank = MPI.get().map_or(0, |m| m.rank);
    eprintln!(
        "mpistages: rank {rank}: MPI_Abort on a communicator of this process alone under ULFM: it ends with code {code}; the others go on"
    );
    // SAFETY: ends the process at once, as an abort does (no exit handlers
    // that could still talk to the others).
    unsafe { libc::_exit(code) }
}

/// The library ends the job for an error it cannot return (a fatal error
/// handler, a recovery the program cannot take part in); `message` says
/// which rank, what happened and what the user can do.
pub fn fatal(code: i32, message: &str) -> ! {
    end_job(ToController::Fatal {
        code,
        message: message.to_string(),
    })
}

/// The job is being ended (`end_job`): no teardown at exit.
static ENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn end_job(msg: ToController) -> ! {
    ENDING.store(true, Ordering::Release);
    let (code, text) = match &msg {
        ToController::Abort { code, message } => (*code, format!("MPI_Abort: {message}")),
        ToController::Fatal { code, message } => (*code, message.clone()),
        _ => unreachable!("end_job takes Abort or Fatal"),
    };
    // Lines the program printed before aborting must not be lost in its
    // stdio buffers.
    // SAFETY: fflush(NULL) flushes every open C stream; no pointer is read.
    unsafe {
        libc::fflush(std::ptr::null_mut());
    }
    if let Some(Some(c)) = MPI.get().map(|m| m.client.as_ref()) {
        let _ = c.send(&msg);
        // mpiexec now tears the job down; do not race it with our own exit
        // status, but do not wait forever either.
        std::thread::sleep(std::time::Duration::from_secs(10));
    } else {
        eprintln!("mpistages: {text}");
        // Under srun, Slurm ends the other processes of the job step.
        if let Some(srun) = MPI.get().and_then(|m| m.srun.as_ref()) {
            let _ = srun.lock().unwrap_or_else(|p| p.into_inner()).abort(&text);
            std::thread::sleep(std::time::Duration::from_secs(10));
        }
    }
    std::process::exit(if code & 0xff == 0 { 1 } else { code & 0xff })
}

pub fn wtime() -> f64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_secs_f64()
}
