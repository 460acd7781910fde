//! The MPI Stages extensions at the API level: checkpoint write / read,
//! the fault epoch, handle (de)serialization, and rank-side fault
//! injection. The protocol itself lives in `crate::stages`.

use super::consts::{self, err};
use super::error::{fail, stages_error, MpiError, MpiResult};
use super::{protect, recovery, state, Mpi, RecoveryMode};
use crate::checkpoint::store::Restored;
use crate::inject;
use crate::stages::{self, CHandles, LibraryHandles, Stages};
/// The handler types of the Stages extensions, as the C ABI registers them.
pub use crate::stages::{DeserializeFn, FortranHandlerFn, Handler, SerializeFn};
use std::sync::MutexGuard;

impl Mpi {
    pub fn stages(&self) -> MutexGuard<'_, Stages> {
        self.stages.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn reload() -> MpiError {
    MpiError::new(
        err::TRY_RELOAD,
        "a process failed: call MPIX_Checkpoint_read() to roll back",
    )
}

/// `MPIX_TRY_RELOAD` while communication is halted for a recovery.
pub fn check_running(m: &Mpi) -> MpiResult<()> {
    if m.engine.halted() {
        return Err(reload());
    }
    Ok(())
}

/// A checkpoint that the first level did not take: said on stderr at
/// once, whatever the error handler (the job goes on without this epoch,
/// and the user must know why recoveries go back further), and returned
/// as MPI_ERR_NO_SPACE or MPI_ERR_IO.
fn not_written(m: &Mpi, epoch: u64, e: crate::checkpoint::store::WriteError) -> MpiError {
    let committed = m.engine.committed().0;
    let then = if committed > 0 {
        format!("a recovery restores epoch {committed}, the newest committed one")
    } else {
        "no epoch is committed yet: a recovery starts from the beginning".to_string()
    };
    let msg = format!(
        "MPIX_Checkpoint_write: rank {}: {}; epoch {epoch} is not saved and will not be committed, \
         {then}; free space there or choose another level (--ckpt)",
        m.rank, e.message
    );
    log::error!("mpistages: {msg}");
    let class = if e.no_space { err::NO_SPACE } else { err::IO };
    MpiError::new(class, msg)
}

/// `MPIX_Checkpoint_write`: saves this rank's MPI state, protected
/// regions and routed files as its next epoch, on every level.
pub fn checkpoint_write(m: &Mpi) -> MpiResult<()> {
    check_running(m)?;
    let started = super::wtime();
    let pending = m.engine.pending_requests();
    if pending > 0 {
        return fail(
            err::OTHER,
            format!(
                "MPIX_Checkpoint_write: {pending} requests are still pending on this rank (complete them first): {}; nothing was written",
                m.engine.pending_summary().join("; ")
            ),
        );
    }
    let generation = m.engine.generation();
    let regions = protect::regions(m);
    let written = {
        let mut st = m.stages();
        // Epochs that newer commits made old go first: this write then
        // reuses their memory.
        let (committed, durable) = m.engine.committed();
        st.apply_committed(committed, durable);
        let killer = inject::while_writing(st.epoch + 1)
            .map(|spec| kill_while_writing(m, spec, st.first_file(st.epoch + 1)));
        // The files are written by a thread of their own, which reports the
        // epoch (not while a kill waits for them to be under way).
        let sections = protect::sections(&regions);
        let bytes = sections.iter().map(|s| s.data.len()).sum();
        let background = m.client.is_some() && killer.is_none() && background_writes(bytes);
        let saved = state::save(&m.tables(), m.rank, m.size, st.epoch + 1, &st.library);
        let written = st.write(&saved, &sections, generation, background);
        if let Some((done, thread)) = killer {
            // The rank dies now at the latest, before reporting the epoch.
            done.store(true, std::sync::atomic::Ordering::Release);
            let _ = thread.join();
        }
        written.map_err(|e| not_written(m, st.epoch + 1, e))
    };
    let crate::stages::Saved {
        epoch,
        partner: copy,
        later,
    } = match written {
        Ok(w) => w,
        Err(e) => {
            // The partner or the set waits for this rank's part of the
            // exchange: it gets an empty one (nothing to hold) rather than
            // waiting for a checkpoint that is not coming.
            if m.stages().redundancy().is_some() {
                let _ = recovery::protect_copy(m, 0, &[]);
            }
            return Err(e);
        }
    };
    // Reported by the thread that writes the files or makes the parity.
    let mut reported_later = false;
    if let (Some(later), Some(client)) = (later, m.client.clone()) {
        m.stages().write_later(later, client);
        reported_later = true;
    }
    if let Some(copy) = copy {
        match recovery::protect_copy(m, epoch, &copy)? {
            // An empty copy: the partner could not write its checkpoint.
            Some(recovery::Held::Copy(held)) if held.is_empty() => {}
            Some(recovery::Held::Copy(held)) => m.stages().hold(epoch, held, copy.len()),
            // The parity is computed while the application goes on.
            // The parity is computed while the application goes on; the
            // thread that makes it reports the epoch once it is held.
            Some(recovery::Held::Chunks(c)) => match m.client.clone() {
                Some(client) => {
                    m.stages()
                        .hold_later(epoch, copy.len(), move || c.parity(), client);
                    reported_later = true;
                }
                // (A set without mpiexec: not a job this runs in.)
                None => match c.parity() {
                    Ok(bytes) => m.stages().hold(epoch, bytes, copy.len()),
                    Err(why) => log::warn!(
                        "mpistages: warning: the parity of epoch {epoch} was not made: {why}"
                    ),
                },
            },
            None => {}
        }
    }
    let (committed, durable) = m.engine.committed();
    let mut st = m.stages();
    if reported_later {
        st.apply_committed(committed, durable);
    } else {
        st.report(epoch, m.client.as_deref(), committed, durable)
            .map_err(|e| stages_error("MPIX_Checkpoint_write", e))?;
    }
    let now = super::wtime();
    st.cadence.written(now - started, now);
    if let Some(spec) = inject::after_checkpoint(epoch) {
        st.damage(inject::damage_of(spec));
        inject::kill_self(m.client.as_deref(), spec);
    }
    Ok(())
}

/// Whether checkpoints of `bytes` protected bytes leave their directory
/// levels to a thread (`MPISTAGES_CKPT_BACKGROUND`: `1` always, `0`
/// never, by default from `BACKGROUND_MIN` bytes on). The epoch then
/// commits only once the thread has written the files, so a failure in
/// that window rolls back to the checkpoint before; below the threshold
/// the files take less than handing them to a thread would save, and
/// the epoch commits as the call returns (a program that checks its
/// fault epoch after a kill a few calls later — tests/c/reinit.c — sees
/// the one it wrote).
fn background_writes(bytes: usize) -> bool {
    const BACKGROUND_MIN: usize = 1 << 20;
    static SETTING: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    let setting =
        SETTING.get_or_init(
            || match std::env::var("MPISTAGES_CKPT_BACKGROUND").as_deref() {
                Ok("1") => Some(true),
                Ok("0") => Some(false),
                _ => None,
            },
        );
    setting.unwrap_or(bytes >= BACKGROUND_MIN)
}

/// Under an erasure-coded level, an epoch commits once every member of
/// every set holds its parity, which threads make in the background. A
/// rank killed by `call=` after its newest checkpoint waits (up to 5 s)
/// for that epoch to commit, so that the failure comes after the
/// checkpoint as the injection means it, not before the others' parity
/// threads are done (which tests the fallback to the epoch before).
fn wait_for_parity_commit(m: &Mpi) {
    let written = {
        let st = m.stages();
        if st.redundancy().is_none_or(|r| r.set_shape().is_none()) {
            return;
        }
        st.epoch
    };
    m.engine
        .wait_committed(written, std::time::Duration::from_secs(5));
}

/// `--inject rank=R,writing=E`: a thread that SIGKILLs this process as
/// soon as the (temporary) file of `file` appears, `file` being this
/// rank's checkpoint on the first directory level, or when the write is
/// done, whichever comes first.
fn kill_while_writing(
    m: &Mpi,
    spec: usize,
    file: Option<std::path::PathBuf>,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<()>,
) {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let client = m.client.clone();
    let thread = std::thread::spawn(move || {
        let started = |f: &std::path::Path| {
            let (Some(dir), Some(name)) = (f.parent(), f.file_name()) else {
                return false;
            };
            let name = name.to_string_lossy();
            std::fs::read_dir(dir).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with(&*name))
            })
        };
        while !flag.load(std::sync::atomic::Ordering::Acquire)
            && !file.as_deref().is_some_and(started)
        {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
        inject::kill_self(client.as_deref(), spec);
    });
    (done, thread)
}

/// The rejoin barrier and the restore after it, again if another failure
/// interrupts the restore. A restore that cannot succeed ends the job.
pub(super) fn rejoin_and_restore(
    m: &Mpi,
    client: &crate::control::client::Client,
    replacement: bool,
) -> MpiResult<()> {
    // A parity thread still running reports its (rolled-back) epoch now,
    // while mpiexec ignores reports, not after the recovery.
    m.stages().settle();
    // No worker may touch the failed attempt's buffers once it resumes.
    super::nbc::quiesce();
    // Windows and open files are not MPI state a rollback restores: the
    // attempt that comes next creates them again (docs/ARCHITECTURE.md).
    // Released while the engine is halted, which ends the windows' agents.
    super::rma::release_all();
    super::file::release_all();
    // The copy this rank holds is looked up (and a file copy read and
    // verified) before the barrier, while the other ranks are still on
    // their way to it; when every rank holds the same epoch, mpiexec says
    // so at the resume and no agreement among the ranks is needed.
    let mut held: Option<Restored> = None;
    let partner = m.stages().redundancy().is_some();
    loop {
        let mut newest = |epoch: u64| {
            if epoch == 0 || partner {
                // Copies and shards from other ranks come over the
                // transport, once it runs.
                held = None;
                return None;
            }
            if held.as_ref().is_none_or(|h| h.epoch != epoch) {
                held = m.stages().newest_local(epoch);
            }
            Some(held.as_ref().map_or(0, |h| h.epoch))
        };
        let r = stages::rejoin(&m.engine, client, &mut newest)
            .map_err(|_| MpiError::new(err::OTHER, "mpiexec is gone; the job is over"))?;
        log::debug!(
            "mpistages: rank {}: rejoined at epoch {} (agreed {:?}), holding {:?}",
            m.rank,
            r.epoch,
            r.agreed,
            held.as_ref().map(|h| h.epoch)
        );
        let copy = match (&held, r.agreed) {
            (Some(h), Some(e)) if h.epoch == e => Some(h.clone()),
            _ => None,
        };
        match restore(
            m,
            r.epoch,
            replacement,
            m.mode == RecoveryMode::Stages,
            copy,
        ) {
            Err(e) if e.class == err::TRY_RELOAD => continue,
            Err(e) => super::abort(
                err::OTHER,
                &format!("rank {} cannot roll back: {}", m.rank, e.detail),
            ),
            Ok(()) => {
                let _ = client.send(&crate::control::proto::ToController::Restored {
                    generation: m.engine.generation(),
                    epoch: fault_epoch(m),
                });
                mpistages_sys::give_back_free_memory();
                return Ok(());
            }
        }
    }
}

/// `MPIX_Checkpoint_read`: after a failure, cleans up, waits until every
/// rank (the replacement included) is ready, and restores the MPI state of
/// the epoch every rank holds (the committed one unless copies were lost).
/// Without a failure to recover from it does nothing.
pub fn checkpoint_read(m: &Mpi) -> MpiResult<()> {
    if !m.engine.halted() {
        return Ok(());
    }
    let Some(client) = m.client.as_deref() else {
        return Ok(());
    };
    if m.mode == RecoveryMode::Reinit {
        // Reinit restores no MPI state: a rank rolled back this way would
        // hold handles that no longer exist, and a replacement starts at
        // main, not in this loop. Refused rather than half done.
        super::fatal(
            err::TRY_RELOAD,
            "MPIX_Checkpoint_read is the MPI Stages rollback and does not apply under \
             --recovery reinit, which restores no MPI state; run this program with \
             --recovery stages, or recover through MPIX_Reinit's restart point",
        );
    }
    rejoin_and_restore(m, client, false)
}

/// `MPIX_Checkpoint_needed`: whether the job should checkpoint now, the
/// same answer on every rank (collective over MPI_COMM_WORLD, like the
/// checkpoint it decides). Each rank asks its own cadence (its measured
/// cost, the policy of `MPISTAGES_CKPT_INTERVAL` / `MPISTAGES_MTBF`) and
/// the job checkpoints once every rank's interval has passed: the rank
/// whose checkpoints cost most sets the pace, as it sets the collective
/// write's time.
pub fn checkpoint_needed(m: &Mpi) -> MpiResult<bool> {
    check_running(m)?;
    let policy = stages::cadence::Policy::from_env()
        .map_err(|e| MpiError::new(err::ARG, format!("MPIX_Checkpoint_needed: {e}")))?;
    let mine = m.stages().cadence.needed(&policy, super::wtime());
    if m.size == 1 {
        return Ok(mine);
    }
    let [all] = recovery::min_over_job(m, [u64::from(mine)])?;
    Ok(all == 1)
}

/// The tables as right after `MPI_Init`. With `keep_handlers` (a Stages
/// rollback to epoch 0, before any checkpoint) MPI_COMM_WORLD and
/// MPI_COMM_SELF keep their error handlers: the resilient loop sets them
/// once, right after MPI_Init (Listing 5.4 of the thesis), and a second
/// failure must reach the program as MPIX_TRY_RELOAD again, as it does in
/// the replacement, which runs that code.
fn reset_tables(m: &Mpi, keep_handlers: bool) {
    let fresh = super::initial_tables(m.rank, &m.world);
    let mut t = m.tables();
    let handlers: Vec<Option<i32>> = [consts::COMM_WORLD, consts::COMM_SELF]
        .iter()
        .map(|&h| {
            t.comms
                .get(h as usize)
                .and_then(Option::as_ref)
                .map(|c| c.errhandler)
        })
        .collect();
    t.comms = fresh.comms;
    t.groups = fresh.groups;
    t.types = fresh.types;
    t.max_context = fresh.max_context;
    t.forget_in_flight();
    if keep_handlers {
        for (h, eh) in [consts::COMM_WORLD, consts::COMM_SELF].iter().zip(handlers) {
            if let (Some(Some(c)), Some(eh)) = (t.comms.get_mut(*h as usize), eh) {
                c.errhandler = eh;
            }
        }
    }
}

/// Makes `epoch` the fault epoch after a failure. Collective: every rank
/// restores the same epoch. With `mpi_state` (Stages) the MPI state saved
/// in it is loaded into the tables; without (Reinit, CPR) the MPI state is
/// the one right after `MPI_Init` and only the application data of the
/// epoch is there to restore. Epoch 0: nothing was committed yet. A
/// replacement says where its copy came from. `agreed`: this rank's copy
/// of the epoch every rank holds, when that is already known.
pub fn restore(
    m: &Mpi,
    epoch: u64,
    replacement: bool,
    mpi_state: bool,
    agreed: Option<Restored>,
) -> MpiResult<()> {
    let started = std::time::Instant::now();
    // The work a next failure would lose starts here.
    m.stages().cadence.restored(super::wtime());
    if epoch == 0 || !mpi_state {
        reset_tables(m, mpi_state);
        if !mpi_state {
            // Reinit / CPR: as after MPI_Init. (A Stages rollback to epoch
            // 0 keeps the registrations: they are the application's, and
            // its next attempt fills the same memory.)
            protect::unprotect_all(m);
        }
        if epoch == 0 {
            m.stages().start_over();
            return Ok(());
        }
    }
    let copy = match agreed {
        Some(c) => c,
        None => match recovery::agree_on_copy(m, epoch)? {
            Some(c) => c,
            // No epoch is held by every rank: from the beginning, as after
            // a failure before the first checkpoint.
            None => return restore(m, 0, replacement, mpi_state, None),
        },
    };
    if copy.epoch < epoch && m.rank == 0 {
        log::warn!(
            "mpistages: committed epoch {epoch} is not valid on every rank; restoring epoch {} instead",
            copy.epoch
        );
    }
    // A relaunched job says it once, not once per rank, and for each rank
    // whose own copies were lost (it restores from its partner or set).
    let from_partner = m
        .stages()
        .redundancy()
        .is_some_and(|r| copy.level == r.to_string());
    if replacement && (m.mode != RecoveryMode::Cpr || m.rank == 0 || from_partner) {
        let who = if m.mode == RecoveryMode::Cpr {
            format!("relaunched job: rank {}", m.rank)
        } else {
            format!("rank {} (replacement)", m.rank)
        };
        log::info!(
            "mpistages: {who} restores epoch {} from {} (found in {:.1} ms)",
            copy.epoch,
            copy.level,
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    if !mpi_state {
        m.stages().set_restored(copy);
        return Ok(());
    }
    let saved = Stages::mpi_state(&copy.sections, copy.epoch, m.size)
        .map_err(|e| stages_error("restoring MPI state", e))?;
    state::load(&mut m.tables(), &saved, m.rank)?;
    super::comm::announce_all(m);
    let mut st = m.stages();
    st.library = saved.library;
    st.set_restored(copy);
    Ok(())
}

/// `MPI_Init` of a process started because of a failure (a replacement, or
/// every rank of a relaunched `cpr` job): join the rejoin barrier, then
/// restore with the other ranks.
pub fn restore_replacement(m: &Mpi) -> MpiResult<()> {
    match m.client.as_deref() {
        Some(client) => rejoin_and_restore(m, client, true),
        None => Ok(()),
    }
}

pub fn fault_epoch(m: &Mpi) -> u64 {
    m.stages().epoch
}

pub fn register_serializer(m: &Mpi, f: Handler<SerializeFn>) {
    m.stages().serializers.push(f);
}

pub fn register_deserializer(m: &Mpi, f: Handler<DeserializeFn>) {
    m.stages().deserializers.push(f);
}

/// The capacity of the arrays a Fortran handler gets (`MPIX_MAX_HANDLES`).
pub const MAX_FORTRAN_HANDLES: usize = 128;

/// `MPIX_Serialize_handles`: each serialize handler, in registration
/// order, names the communicators and groups it needs; they are saved with
/// the next checkpoint.
pub fn serialize_handles(m: &Mpi) -> MpiResult<()> {
    check_running(m)?;
    let handlers = m.stages().serializers.clone();
    let mut library = Vec::with_capacity(handlers.len());
    for h in handlers {
        let lib = match h {
            Handler::C(h) => serialize_c(h)?,
            Handler::Fortran(h) => serialize_fortran(h)?,
        };
        {
            let t = m.tables();
            for &c in &lib.comms {
                t.comm(c)?;
            }
            for &g in &lib.groups {
                t.group(g)?;
            }
        }
        library.push(lib);
    }
    m.stages().library = library;
    Ok(())
}

fn serialize_c(h: SerializeFn) -> MpiResult<LibraryHandles> {
    let mut ch = CHandles {
        comms: std::ptr::null_mut(),
        comm_size: 0,
        grps: std::ptr::null_mut(),
        group_size: 0,
    };
    // SAFETY: a handler registered by the application, called with a
    // valid MPIX_Handles as its documented contract says.
    unsafe { h(&mut ch) };
    let read = |p: *mut i32, n: i32| -> MpiResult<Vec<i32>> {
        if n <= 0 {
            return Ok(Vec::new());
        }
        if p.is_null() {
            return fail(
                err::ARG,
                "a serialize handler returned a NULL array with a positive size",
            );
        }
        // SAFETY: the handler promises `n` readable handles at `p`.
        Ok(unsafe { std::slice::from_raw_parts(p, n as usize) }.to_vec())
    };
    Ok(LibraryHandles {
        comms: read(ch.comms, ch.comm_size)?,
        groups: read(ch.grps, ch.group_size)?,
    })
}

fn serialize_fortran(h: FortranHandlerFn) -> MpiResult<LibraryHandles> {
    let mut comms = vec![0i32; MAX_FORTRAN_HANDLES];
    let mut groups = vec![0i32; MAX_FORTRAN_HANDLES];
    let (mut nc, mut ng) = (0i32, 0i32);
    // SAFETY: a Fortran handler registered by the application, given two
    // arrays of MPIX_MAX_HANDLES elements and two counts, all by reference.
    unsafe { h(comms.as_mut_ptr(), &mut nc, groups.as_mut_ptr(), &mut ng) };
    let count = |n: i32, what: &str| -> MpiResult<usize> {
        match usize::try_from(n) {
            Ok(n) if n <= MAX_FORTRAN_HANDLES => Ok(n),
            _ => fail(
                err::ARG,
                format!("a serialize handler returned {n} {what} (0 to MPIX_MAX_HANDLES = {MAX_FORTRAN_HANDLES})"),
            ),
        }
    };
    comms.truncate(count(nc, "communicators")?);
    groups.truncate(count(ng, "groups")?);
    Ok(LibraryHandles { comms, groups })
}

/// `MPIX_Deserialize_handles`: hands each deserialize handler, in
/// registration order, the handles its serialize handler saved.
pub fn deserialize_handles(m: &Mpi) -> MpiResult<()> {
    check_running(m)?;
    let (handlers, library) = {
        let st = m.stages();
        (st.deserializers.clone(), st.library.clone())
    };
    for (i, h) in handlers.into_iter().enumerate() {
        let mut lib = library.get(i).cloned().unwrap_or_default();
        let mut nc = lib.comms.len() as i32;
        let mut ng = lib.groups.len() as i32;
        match h {
            Handler::C(h) => {
                let ch = CHandles {
                    comms: lib.comms.as_mut_ptr(),
                    comm_size: nc,
                    grps: lib.groups.as_mut_ptr(),
                    group_size: ng,
                };
                // SAFETY: as in serialize_c; the arrays live across the call.
                unsafe { h(ch) };
            }
            Handler::Fortran(h) => {
                // Fortran arrays of the documented capacity, even if fewer
                // handles were saved.
                lib.comms
                    .resize(MAX_FORTRAN_HANDLES.max(lib.comms.len()), 0);
                lib.groups
                    .resize(MAX_FORTRAN_HANDLES.max(lib.groups.len()), 0);
                // SAFETY: as in serialize_fortran.
                unsafe {
                    h(
                        lib.comms.as_mut_ptr(),
                        &mut nc,
                        lib.groups.as_mut_ptr(),
                        &mut ng,
                    )
                };
            }
        }
    }
    Ok(())
}

/// Counts an MPI call for `--inject rank=R,call=NAME:N`: one cheap check
/// unless such a spec is armed.
#[inline]
pub fn count_call(name: &str) {
    if inject::counting_calls() {
        fire_on_call(name);
    }
}

fn fire_on_call(name: &str) {
    let Some(spec) = inject::count_call(name) else {
        return;
    };
    if let Ok(m) = super::mpi() {
        m.stages().damage(inject::damage_of(spec));
        wait_for_parity_commit(m);
        inject::kill_self(m.client.as_deref(), spec);
    }
    inject::kill_self(None, spec);
}
