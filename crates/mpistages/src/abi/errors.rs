//! Error classes, codes and strings (the predefined ones and those a
//! program adds), and error handlers (the predefined ones and those made
//! with `MPI_Comm_create_errhandler`, called by `abi::raise`).

use super::{cstr, get, mpi, mpi_fn, put, put_str, ret, NO_OBJECT};
use crate::api::consts::{
    err, ERRHANDLER_NULL, ERRORS_ABORT, ERRORS_ARE_FATAL, ERRORS_RETURN, MAX_ERROR_STRING,
};
use crate::api::error::{class_name, class_text, fail, MpiResult};
use std::os::raw::{c_char, c_int};
use std::sync::{Mutex, MutexGuard};

/// `void handler(MPI_Comm *comm, int *code, ...)`.
pub type HandlerFn = unsafe extern "C" fn(*mut c_int, *mut c_int, ...);

/// The first handle of a program's error handler.
const FIRST_USER_HANDLER: i32 = 4;

struct Registry {
    /// Class of each added code (classes added are their own class),
    /// from `err::LASTCODE + 1` on: the program's and our own (`detailed`).
    added: Vec<i32>,
    strings: std::collections::BTreeMap<i32, String>,
    handlers: Vec<Option<usize>>,
    /// Codes of our own by their text (`detailed`).
    detailed: std::collections::BTreeMap<String, i32>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    added: Vec::new(),
    strings: std::collections::BTreeMap::new(),
    handlers: Vec::new(),
    detailed: std::collections::BTreeMap::new(),
});

/// An error's detail without the call's name in front, which some details
/// start with.
pub fn cause<'a>(name: &str, detail: &'a str) -> &'a str {
    detail
        .strip_prefix(name)
        .and_then(|d| d.strip_prefix(": "))
        .unwrap_or(detail)
}

/// Distinct causes that get codes of their own, at most (then the class is
/// returned; the cause is still in the log).
const DETAILED_MAX: usize = 256;

/// The code an error of call `name` returns to the program. Errors of the
/// resilience API (`MPIX_Checkpoint_*`, `MPIX_Protect`, ...) get a code of
/// their own — of the error's class for `MPI_Error_class`, its cause in
/// `MPI_Error_string` ("MPI_ERR_OTHER: other error: MPIX_Checkpoint_restore:
/// no checkpoint has been written yet"), as codes added with
/// `MPI_Add_error_code` have; the same cause, the same code. Other calls,
/// and the classes a program acts on (`MPIX_TRY_RELOAD`, ULFM's) return
/// the class itself. The flag: the code is new (its cause not yet said).
pub fn code_for(name: &str, class: c_int, detail: &str) -> (c_int, bool) {
    let signal = matches!(
        class,
        err::TRY_RELOAD | err::PROC_FAILED | err::PROC_FAILED_PENDING | err::REVOKED
    );
    let resilience = name.starts_with("MPIX_") && !name.starts_with("MPIX_Comm_");
    if signal || !resilience || !(0..=err::LASTCODE).contains(&class) || detail.is_empty() {
        return (class, false);
    }
    let mut text = format!(
        "{}: {}: {name}: {}",
        class_name(class),
        class_text(class),
        cause(name, detail)
    );
    let max = MAX_ERROR_STRING as usize - 1;
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    let mut r = registry();
    if let Some(&code) = r.detailed.get(&text) {
        return (code, false);
    }
    if r.detailed.len() >= DETAILED_MAX {
        return (class, false);
    }
    let code = err::LASTCODE + 1 + r.added.len() as c_int;
    r.added.push(class);
    r.strings.insert(code, text.clone());
    r.detailed.insert(text, code);
    (code, true)
}

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// `MPI_LASTUSEDCODE`'s value: a pointer to an int that lives for ever.
pub fn last_used_code() -> &'static c_int {
    static LAST: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(err::LASTCODE);
    let v = err::LASTCODE + registry().added.len() as c_int;
    LAST.store(v, std::sync::atomic::Ordering::Relaxed);
    // SAFETY: an AtomicI32 has the layout of an i32; readers only read it.
    unsafe { &*(LAST.as_ptr() as *const c_int) }
}

/// The class of an error code, or `None` if it is not one.
pub fn class_of(code: c_int) -> Option<c_int> {
    if (0..=err::LASTCODE).contains(&code) {
        return Some(code);
    }
    let i = usize::try_from(code - err::LASTCODE - 1).ok()?;
    registry().added.get(i).copied()
}

fn add_code(class: Option<c_int>) -> c_int {
    let mut r = registry();
    let code = err::LASTCODE + 1 + r.added.len() as c_int;
    r.added.push(class.unwrap_or(code));
    code
}

/// The text of an error code: a string the program added, else the class's.
pub fn text_of(code: c_int) -> String {
    if let Some(s) = registry().strings.get(&code) {
        return s.clone();
    }
    match class_of(code) {
        Some(c) if c <= err::LASTCODE => format!("{}: {}", class_name(c), class_text(c)),
        Some(_) => String::new(),
        None => format!("{code} is not an MPI error code"),
    }
}

pub fn valid_handler(h: c_int) -> bool {
    matches!(h, ERRORS_ARE_FATAL | ERRORS_RETURN | ERRORS_ABORT) || user_handler(h).is_some()
}

/// A program's error handler function.
pub fn user_handler(h: c_int) -> Option<HandlerFn> {
    let f = usize::try_from(h - FIRST_USER_HANDLER)
        .ok()
        .and_then(|i| registry().handlers.get(i).copied().flatten())?;
    // SAFETY: only MPI_Comm_create_errhandler stores addresses here, each
    // of a function of this signature.
    Some(unsafe { std::mem::transmute::<usize, HandlerFn>(f) })
}

mpi_fn!(fn MPI_Error_string / PMPI_Error_string(code: c_int, s: *mut c_char, len: *mut c_int) {
    let text = text_of(code);
    // SAFETY: the standard sizes `s` as MPI_MAX_ERROR_STRING.
    ret("MPI_Error_string", NO_OBJECT, unsafe { put_str(&text, s, MAX_ERROR_STRING as usize, len) })
});

mpi_fn!(fn MPI_Error_class / PMPI_Error_class(code: c_int, class: *mut c_int) {
    let r = match class_of(code) {
        // SAFETY: caller's out-pointer.
        Some(c) => unsafe { put(class, c) },
        None => fail(err::ARG, format!("{code} is not an error code")),
    };
    ret("MPI_Error_class", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Add_error_class / PMPI_Add_error_class(class: *mut c_int) {
    // SAFETY: caller's out-pointer.
    ret("MPI_Add_error_class", NO_OBJECT, unsafe { put(class, add_code(None)) })
});

mpi_fn!(fn MPI_Add_error_code / PMPI_Add_error_code(class: c_int, code: *mut c_int) {
    let r = match class_of(class) {
        Some(c) if c == class => {
            // SAFETY: caller's out-pointer.
            unsafe { put(code, add_code(Some(class))) }
        }
        _ => fail(err::ARG, format!("{class} is not an error class")),
    };
    ret("MPI_Add_error_code", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Add_error_string / PMPI_Add_error_string(code: c_int, s: *const c_char) {
    let r = (|| {
        if code <= err::LASTCODE || class_of(code).is_none() {
            return fail(err::ARG, format!("{code} is not an error code or class the program added"));
        }
        // SAFETY: caller's NUL-terminated string.
        let mut text = unsafe { cstr(s)? };
        if text.len() >= MAX_ERROR_STRING as usize {
            return fail(err::ARG, "the error string is longer than MPI_MAX_ERROR_STRING - 1");
        }
        text.shrink_to_fit();
        registry().strings.insert(code, text);
        Ok(())
    })();
    ret("MPI_Add_error_string", NO_OBJECT, r)
});

pub(super) fn create_handler(f: Option<HandlerFn>, out: *mut c_int) -> MpiResult<()> {
    let Some(f) = f else {
        return fail(err::ARG, "the error handler function is NULL");
    };
    let h = {
        let mut r = registry();
        r.handlers.push(Some(f as usize));
        FIRST_USER_HANDLER + r.handlers.len() as c_int - 1
    };
    // SAFETY: caller's out-pointer.
    unsafe { put(out, h) }
}

mpi_fn!(fn MPI_Comm_create_errhandler / PMPI_Comm_create_errhandler(f: Option<HandlerFn>, out: *mut c_int) {
    ret("MPI_Comm_create_errhandler", NO_OBJECT, create_handler(f, out))
});

mpi_fn!(fn MPI_Errhandler_create / PMPI_Errhandler_create(f: Option<HandlerFn>, out: *mut c_int) {
    ret("MPI_Errhandler_create", NO_OBJECT, create_handler(f, out))
});

/// Whether the program set `MPI_COMM_SELF`'s error handler (`abi::raise`).
static SELF_SET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn self_handler_set() -> bool {
    SELF_SET.load(std::sync::atomic::Ordering::Relaxed)
}

fn set_handler(comm: c_int, eh: c_int) -> MpiResult<()> {
    let m = mpi()?;
    if !valid_handler(eh) {
        return fail(err::ARG, format!("invalid error handler {eh}"));
    }
    let mut t = m.tables();
    t.comm(comm)?;
    if comm == crate::api::consts::COMM_SELF {
        SELF_SET.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    t.comms[comm as usize].as_mut().expect("checked").errhandler = eh;
    Ok(())
}

fn get_handler(comm: c_int, eh: *mut c_int) -> MpiResult<()> {
    let m = mpi()?;
    let t = m.tables();
    t.comm(comm)?;
    let h = t.comms[comm as usize].as_ref().expect("checked").errhandler;
    // SAFETY: caller's out-pointer.
    unsafe { put(eh, h) }
}

mpi_fn!(fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: c_int, eh: c_int) {
    ret("MPI_Comm_set_errhandler", comm, set_handler(comm, eh))
});

mpi_fn!(fn MPI_Errhandler_set / PMPI_Errhandler_set(comm: c_int, eh: c_int) {
    ret("MPI_Errhandler_set", comm, set_handler(comm, eh))
});

mpi_fn!(fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: c_int, eh: *mut c_int) {
    ret("MPI_Comm_get_errhandler", comm, get_handler(comm, eh))
});

mpi_fn!(fn MPI_Errhandler_get / PMPI_Errhandler_get(comm: c_int, eh: *mut c_int) {
    ret("MPI_Errhandler_get", comm, get_handler(comm, eh))
});

mpi_fn!(fn MPI_Errhandler_free / PMPI_Errhandler_free(eh: *mut c_int) {
    // A handler stays usable by the communicators that have it, so the
    // handle only becomes NULL.
    let r = (|| {
        // SAFETY: caller's in/out pointer.
        let h = unsafe { get(eh)? };
        if !valid_handler(h) {
            return fail(err::ARG, format!("invalid error handler {h}"));
        }
        // SAFETY: as above.
        unsafe { put(eh, ERRHANDLER_NULL) }
    })();
    ret("MPI_Errhandler_free", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Comm_call_errhandler / PMPI_Comm_call_errhandler(comm: c_int, code: c_int) {
    let r = mpi().and_then(|m| m.tables().comm(comm).map(|_| ()));
    match r {
        Err(e) => ret("MPI_Comm_call_errhandler", comm, Err(e)),
        Ok(()) => {
            let e = crate::api::error::MpiError::new(code, text_of(code));
            super::raise("MPI_Comm_call_errhandler", comm, e);
            err::SUCCESS
        }
    }
});
