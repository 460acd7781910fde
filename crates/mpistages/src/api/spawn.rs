//! `MPI_Comm_spawn` and `MPI_Comm_get_parent`. The children join the job
//! as processes with the next ids (mpiexec starts them: see
//! `src/controller/spawn.rs`); their `MPI_COMM_WORLD` is their own set,
//! and an inter-communicator joins them to the communicator that spawned
//! them. Its context is agreed among the parents before the spawn, and
//! the children's contexts start above it, so no process sees one
//! context used by two communicators.

use super::comm::{allgather_fixed, new_context};
use super::consts::err;
use super::error::{fail, MpiError, MpiResult};
use super::group::Group;
use super::{Comm, Mpi};
use crate::control::env;
pub use crate::control::proto::SpawnCommand;
use crate::control::proto::{SpawnArgs, ToController};
use std::sync::Arc;

/// The process ids of this process's `MPI_COMM_WORLD`: `0..size`, or
/// those `MPI_Comm_spawn` gave it (`env::WORLD`: `FIRST,COUNT`).
pub fn world_from_env(rank: usize, size: usize) -> MpiResult<Vec<usize>> {
    let Ok(v) = std::env::var(env::WORLD) else {
        return Ok((0..size).collect());
    };
    let bad = || MpiError::new(err::INTERN, format!("{}='{v}' is malformed", env::WORLD));
    let (first, count) = v.split_once(',').ok_or_else(bad)?;
    let first: usize = first.parse().map_err(|_| bad())?;
    let count: usize = count.parse().map_err(|_| bad())?;
    if count == 0 || first + count > size || !(first..first + count).contains(&rank) {
        return Err(bad());
    }
    Ok((first..first + count).collect())
}

/// `MPI_APPNUM`: the number of this process's program (mpiexec's
/// colon-separated programs, `MPI_Comm_spawn_multiple`'s commands).
pub fn appnum() -> i32 {
    std::env::var(env::APPNUM)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// In a spawned process: its parents' process ids (none elsewhere, or
/// when the variable is malformed: `adopt_parent` says so).
pub fn parents_from_env() -> Vec<usize> {
    let v = std::env::var(env::PARENT).unwrap_or_default();
    let list = v.split_once(':').map_or("", |(_, l)| l);
    list.split(',').filter_map(|p| p.parse().ok()).collect()
}

/// In a spawned process: the inter-communicator to its parents
/// (`env::PARENT`: `CONTEXT:P0,P1,...`) becomes `MPI_Comm_get_parent`'s.
pub fn adopt_parent(m: &Mpi) -> MpiResult<()> {
    let Ok(v) = std::env::var(env::PARENT) else {
        return Ok(());
    };
    let bad = || MpiError::new(err::INTERN, format!("{}='{v}' is malformed", env::PARENT));
    let (ctx, list) = v.split_once(':').ok_or_else(bad)?;
    let context: u32 = ctx.parse().map_err(|_| bad())?;
    let parents: Vec<usize> = list
        .split(',')
        .map(|p| p.parse().map_err(|_| bad()))
        .collect::<MpiResult<_>>()?;
    if parents.is_empty() || !context.is_multiple_of(2) {
        return Err(bad());
    }
    let mut t = m.tables();
    let world = t.comm(super::consts::COMM_WORLD)?;
    let c = Comm {
        context,
        group: world.group.clone(),
        rank: world.rank,
        remote: Some(Arc::new(Group { members: parents })),
        topo: None,
    };
    t.max_context = t.max_context.max(context + 2);
    t.parent = t.add_comm(c, super::consts::ERRORS_ARE_FATAL);
    Ok(())
}

/// What the root of `MPI_Comm_spawn` (one command) or
/// `MPI_Comm_spawn_multiple` asks for.
pub type Request = Vec<SpawnCommand>;

/// The root's answer to the others: ok, first id, count, and why not.
const ANSWER: usize = 256;

/// `MPI_Comm_spawn` over the intra-communicator `c` with root `root`
/// (which alone passes `request`): the inter-communicator to the children.
pub fn spawn(m: &Mpi, c: &Comm, root: usize, request: Option<Request>) -> MpiResult<Comm> {
    if c.is_inter() {
        return fail(
            err::COMM,
            "MPI_Comm_spawn over an inter-communicator is not supported",
        );
    }
    if root >= c.size() {
        return fail(
            err::ROOT,
            format!("root {root} of a communicator of {}", c.size()),
        );
    }
    let context = new_context(m, c)?;
    let mut mine = vec![0u8; ANSWER];
    if let Some(req) = request {
        let (first, count, error) = ask(m, c, context, req);
        mine[..4].copy_from_slice(&u32::from(error.is_empty()).to_le_bytes());
        mine[4..8].copy_from_slice(&first.to_le_bytes());
        mine[8..12].copy_from_slice(&count.to_le_bytes());
        let e = error.as_bytes();
        let n = e.len().min(ANSWER - 12);
        mine[12..12 + n].copy_from_slice(&e[..n]);
    }
    let all = allgather_fixed(&c.team(m), &mine)?;
    let a = &all[root * ANSWER..(root + 1) * ANSWER];
    let word = |i: usize| u32::from_le_bytes(a[4 * i..4 * i + 4].try_into().expect("4 bytes"));
    if word(0) == 0 {
        let why = String::from_utf8_lossy(&a[12..])
            .trim_end_matches('\0')
            .to_string();
        return fail(err::SPAWN, why);
    }
    let (first, count) = (word(1) as usize, word(2) as usize);
    Ok(Comm {
        context,
        group: c.group.clone(),
        rank: c.rank,
        remote: Some(Arc::new(Group {
            members: (first..first + count).collect(),
        })),
        topo: None,
    })
}

/// The root asks mpiexec and waits until the children are in `MPI_Init`:
/// (first id, count, error).
fn ask(m: &Mpi, c: &Comm, context: u32, req: Request) -> (u32, u32, String) {
    let Some(client) = &m.client else {
        return (0, 0, "a process not started by mpiexec cannot spawn".into());
    };
    if req.is_empty() || req.iter().any(|c| c.count == 0) {
        return (
            0,
            0,
            "maxprocs must be at least 1 (for each command)".into(),
        );
    }
    // Children start where this process runs, with the program as this
    // process names it.
    let wdir = std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default();
    let msg = ToController::Spawn(SpawnArgs {
        commands: req,
        wdir,
        parents: c.group.members.iter().map(|&w| w as u32).collect(),
        context,
    });
    if client.send(&msg).is_err() {
        return (0, 0, "mpiexec is gone".into());
    }
    m.engine
        .wait_spawned()
        .unwrap_or((0, 0, "mpiexec is gone".into()))
}
