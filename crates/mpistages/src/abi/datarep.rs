//! Data representations a program defines (`MPI_Register_datarep`, and
//! `_c` with large counts): a name a file view may then use, with the
//! functions that convert data to the file's representation (on writes)
//! and back (on reads). `MPI_CONVERSION_FN_NULL` leaves the data as it is
//! in memory. A representation whose file extent of a basic type differs
//! from its size in memory is refused when data of that type is read or
//! written (`MPI_ERR_UNSUPPORTED_DATAREP`): views here map files in the
//! memory's sizes. Also how a file's bytes are made from and into the
//! program's (`file_bytes`, `from_file`), for every representation.

use super::file::with;
use super::{cstr, mpi_fn, ret, typed, NO_OBJECT};
use crate::api::consts::err;
use crate::api::datatype::{Basic, Datatype};
use crate::api::error::{fail, MpiResult};
use crate::api::file_view;
use crate::api::usermem::TypedBuf;
use crate::api::{Layout, Mpi};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::Mutex;

/// `MPI_Datarep_conversion_function`.
pub type Conversion =
    unsafe extern "C" fn(*mut c_void, c_int, c_int, *mut c_void, i64, *mut c_void) -> c_int;
/// `MPI_Datarep_conversion_function_c`.
pub type ConversionC =
    unsafe extern "C" fn(*mut c_void, c_int, i64, *mut c_void, i64, *mut c_void) -> c_int;
/// `MPI_Datarep_extent_function`.
pub type Extent = unsafe extern "C" fn(c_int, *mut isize, *mut c_void) -> c_int;

#[derive(Clone, Copy)]
enum Convert {
    Int(Conversion),
    Large(ConversionC),
}

/// What a program registered under a name.
#[derive(Clone, Copy)]
pub struct Functions {
    read: Option<Convert>,
    write: Option<Convert>,
    extent: Extent,
    extra: usize,
}

static REGISTERED: Mutex<Vec<(String, Functions)>> = Mutex::new(Vec::new());

/// The functions of a registered representation.
pub fn functions(name: &str) -> Option<Functions> {
    let r = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
    r.iter().find(|(n, _)| n == name).map(|(_, f)| *f)
}

fn register(name: *const c_char, f: Functions) -> MpiResult<()> {
    // SAFETY: the caller's NUL-terminated string.
    let name = unsafe { cstr(name)? };
    if name.len() >= super::file::MAX_DATAREP_STRING {
        return fail(
            err::ARG,
            "the representation's name is longer than MPI_MAX_DATAREP_STRING - 1",
        );
    }
    let mut r = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
    file_view::register_datarep(&name)?;
    r.push((name, f));
    Ok(())
}

mpi_fn!(fn MPI_Register_datarep / PMPI_Register_datarep(name: *const c_char, read: Option<Conversion>,
        write: Option<Conversion>, extent: Option<Extent>, extra: *mut c_void) {
    let r = match extent {
        None => fail(err::ARG, "the extent function is NULL"),
        Some(extent) => register(name, Functions {
            read: read.map(Convert::Int),
            write: write.map(Convert::Int),
            extent,
            extra: extra as usize,
        }),
    };
    ret("MPI_Register_datarep", NO_OBJECT, r)
});

mpi_fn!(fn MPI_Register_datarep_c / PMPI_Register_datarep_c(name: *const c_char, read: Option<ConversionC>,
        write: Option<ConversionC>, extent: Option<Extent>, extra: *mut c_void) {
    let r = match extent {
        None => fail(err::ARG, "the extent function is NULL"),
        Some(extent) => register(name, Functions {
            read: read.map(Convert::Large),
            write: write.map(Convert::Large),
            extent,
            extra: extra as usize,
        }),
    };
    ret("MPI_Register_datarep_c", NO_OBJECT, r)
});

impl Functions {
    /// Fails unless every basic type of `t` has its memory size in the file.
    fn check_extents(&self, t: &Datatype) -> MpiResult<()> {
        let mut seen: Vec<Basic> = Vec::new();
        for r in &t.runs {
            if seen.contains(&r.basic) {
                continue;
            }
            seen.push(r.basic);
            let mut extent: isize = -1;
            // SAFETY: the program's extent function, of the standard's
            // signature, gets a handle, a local and its own state.
            let rc =
                unsafe { (self.extent)(r.basic.handle(), &mut extent, self.extra as *mut c_void) };
            if rc != err::SUCCESS {
                return fail(
                    err::CONVERSION,
                    format!("the extent function returned {rc}"),
                );
            }
            if extent != r.basic.size() as isize {
                return fail(
                    err::UNSUPPORTED_DATAREP,
                    format!(
                        "the representation stores a {}-byte basic type in {extent} bytes: only \
                         representations of the memory's sizes are supported",
                        r.basic.size()
                    ),
                );
            }
        }
        Ok(())
    }

    /// Calls a conversion function on `count` elements.
    fn convert(
        &self,
        f: Convert,
        user: *mut c_void,
        datatype: c_int,
        count: usize,
        file: *mut c_void,
    ) -> MpiResult<()> {
        let extra = self.extra as *mut c_void;
        // SAFETY: the program's conversion function, of the standard's
        // signature, gets its buffer (valid for `count` elements of
        // `datatype` by the MPI buffer rule), a file buffer of as many
        // elements and its own state.
        let rc = unsafe {
            match f {
                Convert::Int(f) => {
                    let n = c_int::try_from(count).or_else(|_| {
                        fail(
                            err::COUNT,
                            "more elements than an int counts: use MPI_Register_datarep_c",
                        )
                    })?;
                    f(user, datatype, n, file, 0, extra)
                }
                Convert::Large(f) => f(user, datatype, count as i64, file, 0, extra),
            }
        };
        if rc != err::SUCCESS {
            return fail(
                err::CONVERSION,
                format!("the conversion function returned {rc}"),
            );
        }
        Ok(())
    }

    /// `tb` (the program's `buf`, elements of `datatype`) as the file
    /// holds it.
    pub fn to_file(
        &self,
        buf: *const c_void,
        datatype: c_int,
        tb: &TypedBuf,
    ) -> MpiResult<Vec<u8>> {
        self.check_extents(&tb.dtype)?;
        let Some(f) = self.write else {
            return Ok(tb.pack());
        };
        let mut out = vec![0u8; tb.bytes()];
        self.convert(
            f,
            buf as *mut c_void,
            datatype,
            tb.count,
            out.as_mut_ptr() as *mut c_void,
        )?;
        Ok(out)
    }

    /// Bytes read from the file into `into` (the program's `buf`): the
    /// whole elements read are converted.
    pub fn from_file(
        &self,
        buf: *mut c_void,
        datatype: c_int,
        into: &TypedBuf,
        mut got: Vec<u8>,
    ) -> MpiResult<()> {
        self.check_extents(&into.dtype)?;
        let Some(f) = self.read else {
            into.unpack(&got);
            return Ok(());
        };
        let size = into.dtype.size.max(1);
        let whole = (got.len() / size).min(into.count);
        self.convert(f, buf, datatype, whole, got.as_mut_ptr() as *mut c_void)
    }
}

/// How a file holds its data: as memory does, big-endian (external32), or
/// as the program's functions convert it (`MPI_Register_datarep`).
#[derive(Clone, Copy)]
pub(super) enum Repr {
    Native,
    External32,
    User(Functions),
}

/// The representation of file `fh`'s view.
pub(super) fn repr(fh: c_int) -> MpiResult<Repr> {
    with(fh, |f| {
        Ok(match f.datarep() {
            "external32" => Repr::External32,
            name => functions(name).map_or(Repr::Native, Repr::User),
        })
    })
}

/// `count` elements of `datatype` at `buf`, packed as the file holds
/// them.
///
/// # Safety
/// The buffer is the caller's, valid for the call.
pub(super) unsafe fn file_bytes(
    m: &Mpi,
    fh: c_int,
    buf: *const c_void,
    count: c_int,
    datatype: c_int,
) -> MpiResult<Vec<u8>> {
    // SAFETY: forwarded.
    let tb = unsafe { typed(m, buf, count, datatype)? };
    match repr(fh)? {
        Repr::Native => Ok(tb.pack()),
        Repr::External32 => {
            let mut data = tb.pack();
            tb.dtype.swap_external32(tb.count, &mut data);
            Ok(data)
        }
        Repr::User(f) => f.to_file(buf, datatype, &tb),
    }
}

/// Unpacks bytes read from a file into `into` (elements of `datatype`),
/// converted from the file's representation `repr`.
pub(super) fn from_file(
    into: &TypedBuf,
    repr: Repr,
    datatype: c_int,
    mut got: Vec<u8>,
) -> MpiResult<()> {
    match repr {
        Repr::Native => into.unpack(&got),
        Repr::External32 => {
            into.dtype.swap_external32(into.count, &mut got);
            into.unpack(&got);
        }
        Repr::User(f) => f.from_file(into.base() as *mut c_void, datatype, into, got)?,
    }
    Ok(())
}
