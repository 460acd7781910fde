//! The Fortran ABI (`include 'mpif.h'` and `use mpi`) as gfortran calls it:
//! lower-case names with one trailing underscore, every argument by
//! reference, an `IERROR` argument last, and the hidden lengths of
//! `CHARACTER` arguments after all others. Handles are the C handles
//! (`INTEGER`s), and the Fortran `MPI_Status` is the C struct seen as
//! `INTEGER status(MPI_STATUS_SIZE)`, so almost every binding forwards to
//! its C twin (`mpi_send_` to `MPI_Send`, `pmpi_send_` to `PMPI_Send`);
//! what needs more (strings, 1-based indices, deprecated `INTEGER`
//! addresses, Fortran handler procedures) is in `special.rs`.
//!
//! One table (`bindings.rs`) gives each binding's arguments; it generates
//! the entry points and, through `module.rs`, the explicit interfaces of
//! the `mpi` module, so the two cannot drift apart.

mod bindings;
pub mod f08;
pub mod module;
mod special;

use super::CStatus;
use crate::api::consts::err;
use std::os::raw::{c_char, c_int, c_void};

/// The Fortran `MPI_STATUS_SIZE`: the C `MPI_Status` is five `int`s.
pub const STATUS_SIZE: usize = std::mem::size_of::<CStatus>() / std::mem::size_of::<c_int>();

/// How a binding's argument is passed, converted and declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `INTEGER, INTENT(IN)`, passed to C by value.
    I,
    /// `INTEGER, INTENT(OUT)`.
    O,
    /// `INTEGER, INTENT(INOUT)` (a request, a position).
    IO,
    /// `INTEGER, INTENT(IN) :: x(*)`.
    IA,
    /// `INTEGER, INTENT(INOUT) :: x(*)`.
    OA,
    /// `LOGICAL, INTENT(IN)`.
    L,
    /// `LOGICAL, INTENT(OUT)` (gfortran's `.TRUE.` is 1, as C's).
    LO,
    /// `LOGICAL, INTENT(IN) :: x(*)` (passed as C ints: gfortran's default
    /// LOGICAL is 4 bytes, 1 or 0).
    LA,
    /// `LOGICAL, INTENT(OUT) :: x(*)`.
    LAO,
    /// `INTEGER(KIND=MPI_ADDRESS_KIND), INTENT(IN)`.
    A,
    /// `INTEGER(KIND=MPI_ADDRESS_KIND), INTENT(OUT)`.
    AO,
    /// `INTEGER(KIND=MPI_ADDRESS_KIND), INTENT(IN) :: x(*)`.
    AA,
    /// `INTEGER(KIND=MPI_COUNT_KIND), INTENT(IN)`.
    Cnt,
    /// `INTEGER(KIND=MPI_COUNT_KIND), INTENT(OUT)`.
    CntO,
    /// A choice buffer (any type and rank); `MPI_BOTTOM` and
    /// `MPI_IN_PLACE` become their C values.
    Buf,
    /// A choice buffer the library keeps the address of (`MPIX_PROTECT`):
    /// declared `TARGET`, so the compiler knows later calls
    /// (`MPIX_CHECKPOINT_RESTORE`) may change it.
    Region,
    /// `INTEGER status(MPI_STATUS_SIZE)` written by the call;
    /// `MPI_STATUS_IGNORE` becomes NULL.
    St,
    /// `INTEGER, INTENT(IN) :: status(MPI_STATUS_SIZE)`.
    StIn,
    /// `INTEGER statuses(MPI_STATUS_SIZE, *)`; `MPI_STATUSES_IGNORE`
    /// becomes NULL.
    Sts,
    /// A procedure (`EXTERNAL`).
    Fun,
    /// `CHARACTER(LEN=*), INTENT(IN)`.
    Str,
    /// `CHARACTER(LEN=*), INTENT(OUT)`.
    StrO,
}

/// One binding: its C name and its arguments before `IERROR`.
pub struct Binding {
    pub name: &'static str,
    pub args: &'static [(&'static str, Kind)],
}

/// The storage of a Fortran sentinel: a one-variable `COMMON` block of
/// `mpif.h`, exported under gfortran's name for it. Only its address
/// matters; the library never reads or writes it.
#[repr(transparent)]
pub struct Common<const N: usize>(std::cell::UnsafeCell<[c_int; N]>);

// SAFETY: the library never accesses the contents, only the address.
unsafe impl<const N: usize> Sync for Common<N> {}

impl<const N: usize> Common<N> {
    const fn new() -> Self {
        Common(std::cell::UnsafeCell::new([0; N]))
    }
}

#[no_mangle]
pub static mpistages_bottom_: Common<1> = Common::new();
#[no_mangle]
pub static mpistages_in_place_: Common<1> = Common::new();
#[no_mangle]
pub static mpistages_status_ignore_: Common<STATUS_SIZE> = Common::new();
#[no_mangle]
pub static mpistages_statuses_ignore_: Common<STATUS_SIZE> = Common::new();

/// Which sentinel `mpistages_fortran_sentinel` (csrc/fortran_sentinels.c)
/// returns the address of: as the program sees it, which need not be the
/// address this crate would compute (copy relocations).
#[derive(Clone, Copy)]
enum Sentinel {
    Bottom = 0,
    InPlace = 1,
    StatusIgnore = 2,
    StatusesIgnore = 3,
}

extern "C" {
    fn mpistages_fortran_sentinel(which: c_int) -> *const c_void;
}

fn is(p: *const c_void, s: Sentinel) -> bool {
    // SAFETY: a C function without preconditions returning an address.
    p == unsafe { mpistages_fortran_sentinel(s as c_int) }
}

/// A choice buffer as C sees it.
pub fn buf(p: *mut c_void) -> *mut c_void {
    if is(p, Sentinel::Bottom) {
        std::ptr::null_mut()
    } else if is(p, Sentinel::InPlace) {
        super::IN_PLACE
    } else {
        p
    }
}

/// A status argument as C sees it (same layout; NULL for the ignore value).
pub fn status(p: *mut c_int) -> *mut CStatus {
    if is(p as *const c_void, Sentinel::StatusIgnore) {
        std::ptr::null_mut()
    } else {
        p as *mut CStatus
    }
}

/// A statuses array as C sees it.
pub fn statuses(p: *mut c_int) -> *mut CStatus {
    if is(p as *const c_void, Sentinel::StatusesIgnore)
        || is(p as *const c_void, Sentinel::StatusIgnore)
    {
        std::ptr::null_mut()
    } else {
        p as *mut CStatus
    }
}

/// Stores the return code in `IERROR`.
///
/// # Safety
/// `ierror` is NULL or a writable `INTEGER`.
pub unsafe fn set(ierror: *mut c_int, code: c_int) {
    if !ierror.is_null() {
        // SAFETY: non-null and writable by the caller's contract.
        unsafe { ierror.write(code) };
    }
}

/// A Fortran `CHARACTER(LEN=len)` argument in, without its trailing blanks.
///
/// # Safety
/// `s` is valid for reads of `len` bytes.
pub unsafe fn str_in<'a>(s: *const c_char, len: usize) -> Result<&'a str, c_int> {
    if s.is_null() {
        return Err(err::ARG);
    }
    // SAFETY: `len` readable bytes by the caller's contract.
    let bytes = unsafe { std::slice::from_raw_parts(s as *const u8, len) };
    let end = bytes.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    std::str::from_utf8(&bytes[..end]).map_err(|_| err::ARG)
}

/// Copies `text` into a Fortran `CHARACTER(LEN=len)` argument, blank
/// padded (cut at `len`); returns the length stored.
///
/// # Safety
/// `dst` is valid for writes of `len` bytes.
pub unsafe fn str_out(text: &[u8], dst: *mut c_char, len: usize) -> usize {
    if dst.is_null() {
        return 0;
    }
    // SAFETY: `len` writable bytes by the caller's contract.
    let out = unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, len) };
    let n = text.len().min(len);
    out[..n].copy_from_slice(&text[..n]);
    out[n..].fill(b' ');
    n
}

/// The Rust type of a binding argument of kind `$k`.
macro_rules! fty {
    (I) => { *const c_int };
    (O) => { *mut c_int };
    (IO) => { *mut c_int };
    (IA) => { *const c_int };
    (OA) => { *mut c_int };
    (L) => { *const c_int };
    (LA) => { *const c_int };
    (LAO) => { *mut c_int };
    (LO) => { *mut c_int };
    (A) => { *const i64 };
    (AO) => { *mut i64 };
    (AA) => { *const i64 };
    (Cnt) => { *const i64 };
    (CntO) => { *mut i64 };
    (Buf) => { *mut c_void };
    (St) => { *mut c_int };
    (StIn) => { *mut c_int };
    (Sts) => { *mut c_int };
}

/// The C argument for the Fortran argument `$x` of kind `$k` (inside an
/// `unsafe` block: scalars in are read through their reference).
macro_rules! fconv {
    (I, $x:ident) => {
        *$x
    };
    (L, $x:ident) => {
        (*$x != 0) as c_int
    };
    (A, $x:ident) => {
        *$x as _
    };
    (Cnt, $x:ident) => {
        *$x
    };
    (Buf, $x:ident) => {
        $crate::abi::fortran::buf($x) as _
    };
    (St, $x:ident) => {
        $crate::abi::fortran::status($x)
    };
    (StIn, $x:ident) => {
        $crate::abi::fortran::status($x) as _
    };
    (Sts, $x:ident) => {
        $crate::abi::fortran::statuses($x)
    };
    ($k:ident, $x:ident) => {
        $x as _
    };
}

/// Generates the entry points of the `auto` entries and the table of all.
macro_rules! fortran_bindings {
    ($( $how:ident $c:ident ( $($arg:ident : $k:ident),* ) ; )*) => {
        $( fortran_fn!($how $c ( $($arg : $k),* )); )*
        /// Every Fortran binding, in the order of the table.
        pub const TABLE: &[super::Binding] = &[
            $( super::Binding {
                name: stringify!($c),
                args: &[$((stringify!($arg), super::Kind::$k)),*],
            }, )*
        ];
    };
}

/// One forwarding binding (`auto`) or nothing (`custom`: written by hand
/// in `special.rs`).
macro_rules! fortran_fn {
    (custom $c:ident ( $($arg:ident : $k:ident),* )) => {};
    (auto $c:ident ( $($arg:ident : $k:ident),* )) => {
        paste::paste! {
            /// # Safety
            /// A Fortran entry point: every argument is a reference the
            /// Fortran standard and the MPI binding make valid.
            #[no_mangle]
            pub unsafe extern "C" fn [<$c:lower _>]($($arg: fty!($k),)* ierror: *mut c_int) {
                // SAFETY: the arguments are valid references (the caller's
                // contract); the C function checks what it is given.
                unsafe { super::set(ierror, $c($(fconv!($k, $arg)),*)) }
            }
            /// # Safety
            /// As for the `MPI_` binding.
            #[no_mangle]
            pub unsafe extern "C" fn [<p $c:lower _>]($($arg: fty!($k),)* ierror: *mut c_int) {
                // SAFETY: as above.
                unsafe { super::set(ierror, [<P $c>]($(fconv!($k, $arg)),*)) }
            }
        }
    };
}

pub(crate) use {fconv, fortran_bindings, fortran_fn, fty};

pub use bindings::TABLE;

#[cfg(test)]
mod tests {
    use super::STATUS_SIZE;
    use crate::api::consts::mpi_h_defines;

    /// Every `INTEGER, PARAMETER :: NAME = <int>` of include/mpif.h.
    fn mpif_h_parameters() -> Vec<(String, i64)> {
        let h =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../include/mpif.h"))
                .expect("include/mpif.h");
        h.lines()
            .filter_map(|l| l.trim().strip_prefix("INTEGER, PARAMETER :: "))
            .filter_map(|d| {
                let (name, value) = d.split_once(" = ")?;
                Some((name.to_string(), value.trim().parse().ok()?))
            })
            .collect()
    }

    /// Every function of mpi.h has its Fortran binding (the two functions
    /// MPI_WTIME and MPI_WTICK are declared in mpif.h; MPIX_Reinit is C
    /// only: its restart point takes argc/argv and the jump is in C).
    #[test]
    fn every_c_function_has_a_fortran_binding() {
        let h =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../include/mpi.h"))
                .unwrap();
        let mut n = 0;
        for l in h
            .lines()
            .filter(|l| l.starts_with("int MPI") || l.starts_with("double MPI"))
        {
            let name = l.split(['(', ' ']).nth(1).unwrap();
            n += 1;
            // The predefined attribute callbacks (MPI_COMM_DUP_FN ...) are
            // C functions; Fortran has its own of the same names (objects.rs).
            let callback = name.chars().all(|c| c.is_ascii_uppercase() || c == '_');
            // The tool interface has no Fortran binding in the standard.
            // Neither have the handle conversions, which are for C; the
            // large-count calls are the mpi_f08 module's in Fortran.
            let callback = callback
                || name.starts_with("MPI_T_")
                || name.ends_with("_c2f")
                || name.ends_with("_f2c")
                || name.ends_with("_c");
            // MPI_Comm_spawn's Fortran forms (arrays of blank-terminated
            // CHARACTER arguments) are not written yet, nor is
            // MPI_Register_datarep's (conversion callbacks in Fortran).
            if name == "MPI_Wtime"
                || name == "MPI_Wtick"
                || name == "MPIX_Reinit"
                || name == "MPI_Comm_spawn"
                || name == "MPI_Comm_spawn_multiple"
                || name == "MPI_Register_datarep"
                || callback
            {
                continue;
            }
            assert!(
                super::TABLE.iter().any(|b| b.name == name),
                "no Fortran binding for {name}"
            );
        }
        assert!(n > 120, "read only {n} functions from mpi.h");
    }

    #[test]
    fn mpif_h_agrees_with_mpi_h_and_the_library() {
        let c = mpi_h_defines();
        let f = mpif_h_parameters();
        let mut shared = 0;
        for (name, value) in &f {
            if let Some(v) = c.get(name) {
                assert_eq!(v, value, "{name}");
                shared += 1;
            }
        }
        assert!(shared > 120, "only {shared} names in both headers");
        let get = |n: &str| f.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
        assert_eq!(get("MPI_STATUS_SIZE"), Some(STATUS_SIZE as i64));
        assert_eq!(
            get("MPIX_MAX_HANDLES"),
            Some(crate::api::mpix::MAX_FORTRAN_HANDLES as i64)
        );
        assert_eq!(get("MPI_LONG_LONG_INT"), c.get("MPI_LONG_LONG").copied());
        // Fixed form: every statement fits in columns 7-72.
        let h =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../include/mpif.h"))
                .unwrap();
        for l in h.lines().filter(|l| !l.starts_with('!') && !l.is_empty()) {
            assert!(
                l.starts_with("      ") && l.len() <= 72,
                "not fixed-form: {l:?}"
            );
        }
    }
}
