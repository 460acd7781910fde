//! Sessions (MPI 4.0): a library's own handle on MPI, opened and closed
//! without `MPI_Init` (`MPI_Session_init` … `MPI_Session_finalize`),
//! through which it names process sets ("mpi://WORLD", "mpi://SELF"),
//! makes groups of them and, from a group, communicators
//! (`MPI_Comm_create_from_group`). Owns: the table of open sessions and
//! the process sets. The runtime under them is the one `MPI_Init` starts
//! (`open_session`, `close_session`): one per process, held by the world
//! model and by every open session.
//!
//! Sessions are not part of a checkpoint: a replacement opens its own as
//! the program does at its start (their handles come out the same, in the
//! same order), and a survivor's stay open through a rollback.

use super::consts::err;
use super::error::{fail, MpiResult};
use super::info::Info;
use super::Mpi;
use std::sync::{Mutex, MutexGuard};

/// `MPI_SESSION_NULL`.
pub const SESSION_NULL: i32 = 0;

/// `MPI_MAX_PSET_NAME_LEN` (MPICH's value).
pub const MAX_PSET_NAME_LEN: usize = 256;

/// The process sets every session sees, in the order
/// `MPI_Session_get_nth_pset` numbers them.
pub const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

/// The thread levels, as the "thread_level" info key names them.
const LEVELS: [&str; 4] = [
    "MPI_THREAD_SINGLE",
    "MPI_THREAD_FUNNELED",
    "MPI_THREAD_SERIALIZED",
    "MPI_THREAD_MULTIPLE",
];

/// An open session.
struct Session {
    errhandler: i32,
    /// The thread level asked for (and provided: every level is).
    level: &'static str,
}

/// Open sessions by handle (0 is `MPI_SESSION_NULL`, never used).
static TABLE: Mutex<Vec<Option<Session>>> = Mutex::new(Vec::new());

fn table() -> MutexGuard<'static, Vec<Option<Session>>> {
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

/// `MPI_Session_init`: starts the runtime if nothing runs it yet, and
/// gives the new session's handle. `errhandler` is checked by the caller.
pub fn init(info: &Info, errhandler: i32) -> MpiResult<i32> {
    let level = match info.get("thread_level")? {
        None => LEVELS[0],
        Some(v) => match LEVELS.iter().find(|l| l.eq_ignore_ascii_case(v.trim())) {
            Some(l) => l,
            None => {
                return fail(
                    err::ARG,
                    format!("thread_level '{v}': expected one of {}", LEVELS.join(", ")),
                )
            }
        },
    };
    super::open_session()?;
    let mut t = table();
    if t.is_empty() {
        t.push(None);
    }
    Ok(super::tables::alloc(
        &mut t,
        1,
        Session { errhandler, level },
    ))
}

fn check(t: &[Option<Session>], h: i32) -> MpiResult<&Session> {
    match usize::try_from(h).ok().and_then(|i| t.get(i)?.as_ref()) {
        Some(s) => Ok(s),
        None => fail(err::SESSION, format!("{h} is not an open session")),
    }
}

/// `MPI_Session_finalize`: the session is closed; the runtime ends with
/// the last holder (`close_session`).
pub fn finalize(h: i32) -> MpiResult<()> {
    {
        let mut t = table();
        check(&t, h)?;
        t[h as usize] = None;
    }
    super::close_session()
}

/// A session's error handler (`None`: `h` is not an open session).
pub fn errhandler(h: i32) -> Option<i32> {
    check(&table(), h).ok().map(|s| s.errhandler)
}

/// The error handler of errors of no object (those of the resilience
/// API, info objects, error codes) in a program of sessions alone:
/// the first open session's.
pub fn first_errhandler() -> Option<i32> {
    table().iter().flatten().next().map(|s| s.errhandler)
}

/// Fails unless `h` is an open session.
pub fn valid(h: i32) -> MpiResult<()> {
    check(&table(), h).map(|_| ())
}

/// `MPI_Session_set_errhandler` (the handler is checked by the caller).
pub fn set_errhandler(h: i32, eh: i32) -> MpiResult<()> {
    let mut t = table();
    check(&t, h)?;
    if let Some(s) = t[h as usize].as_mut() {
        s.errhandler = eh;
    }
    Ok(())
}

/// `MPI_Session_get_info`: the thread level the session provides.
pub fn info(h: i32) -> MpiResult<Info> {
    let level = check(&table(), h)?.level;
    let mut i = Info::default();
    i.set("thread_level", level)?;
    Ok(i)
}

/// The world ranks of process set `name`, in rank order.
pub fn members(m: &Mpi, name: &str) -> MpiResult<Vec<usize>> {
    if name.eq_ignore_ascii_case(PSETS[0]) {
        Ok(m.world.clone())
    } else if name.eq_ignore_ascii_case(PSETS[1]) {
        Ok(vec![m.rank])
    } else {
        fail(
            err::ARG,
            format!(
                "no process set '{name}' (there are {})",
                PSETS.join(" and ")
            ),
        )
    }
}

/// `MPI_Session_get_pset_info`: "mpi_size", the number of processes.
pub fn pset_info(m: &Mpi, name: &str) -> MpiResult<Info> {
    let n = members(m, name)?.len();
    let mut i = Info::default();
    i.set("mpi_size", &n.to_string())?;
    Ok(i)
}

/// `MPI_Session_get_nth_pset`: the name of process set `n`.
pub fn nth_pset(n: i32) -> MpiResult<&'static str> {
    match usize::try_from(n).ok().and_then(|i| PSETS.get(i)) {
        Some(p) => Ok(p),
        None => fail(
            err::ARG,
            format!(
                "process set {n}: there are {} (0 to {})",
                PSETS.len(),
                PSETS.len() - 1
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psets_are_numbered_and_checked() {
        assert_eq!(nth_pset(0).unwrap(), "mpi://WORLD");
        assert_eq!(nth_pset(1).unwrap(), "mpi://SELF");
        assert_eq!(nth_pset(2).unwrap_err().class, err::ARG);
        assert_eq!(nth_pset(-1).unwrap_err().class, err::ARG);
        assert!(PSETS.iter().all(|p| p.len() < MAX_PSET_NAME_LEN));
    }

    #[test]
    fn a_handle_not_open_is_a_session_error() {
        assert_eq!(valid(SESSION_NULL).unwrap_err().class, err::SESSION);
        assert_eq!(valid(12345).unwrap_err().class, err::SESSION);
        assert_eq!(errhandler(-3), None);
    }
}
