//! MPI-IO files: open and close, views (`file_view`: offsets and file
//! pointers count etypes of the view's stream), independent and collective
//! reads and writes at explicit offsets, at the individual file pointer
//! and at the shared one, sizes, sync, atomicity and the file's error
//! handler. Non-blocking and split-collective calls and collective
//! buffering are not here yet.
//!
//! Each open file has a private duplicate of the communicator it was opened
//! on, so its collective steps never meet the program's own messages. The
//! shared file pointer lives in a side file beside the data file, read and
//! advanced under an exclusive lock (`flock`, which the kernel drops when a
//! process dies, so a rank's death never leaves the pointer locked). Files
//! are not part of the MPI state checkpoint: a rank replaced in a recovery
//! starts with none open.

use super::comm;
use super::consts::{dt, err, ERRORS_RETURN};
use super::datatype::Datatype;
use super::error::{fail, MpiError, MpiResult};
use super::file_collective::{self, Collective, Hints};
use super::file_view::View;
use super::info::Info;
use super::{Comm, Mpi};
use crate::coll;
use crate::progress::ReqId;
use crate::transport::RawBuf;
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// `MPI_FILE_NULL`.
pub const FILE_NULL: i32 = 0;

/// Access modes (`MPI_MODE_*`, MPICH's values).
pub mod mode {
    pub const CREATE: i32 = 1;
    pub const RDONLY: i32 = 2;
    pub const WRONLY: i32 = 4;
    pub const RDWR: i32 = 8;
    pub const DELETE_ON_CLOSE: i32 = 16;
    pub const UNIQUE_OPEN: i32 = 32;
    pub const EXCL: i32 = 64;
    pub const APPEND: i32 = 128;
    pub const SEQUENTIAL: i32 = 256;
    pub const ALL: i32 = 511;
}

/// `MPI_SEEK_SET`, `MPI_SEEK_CUR`, `MPI_SEEK_END`.
pub const SEEK_SET: i32 = 600;
pub const SEEK_CUR: i32 = 602;
pub const SEEK_END: i32 = 604;

/// An open file.
pub struct File {
    /// The private duplicate of the communicator it was opened on.
    pub comm: Arc<Comm>,
    /// The open descriptor, shared with accesses running outside the
    /// file's lock (non-blocking and collective ones).
    io: Arc<Io>,
    /// Each member's host, as an index (collective buffering picks its
    /// aggregators by host).
    hosts: Vec<usize>,
    pub amode: i32,
    pub info: Info,
    /// The individual file pointer, in bytes of the view's stream.
    pos: u64,
    /// The shared file pointer, in bytes of the view's stream.
    shared: SharedPointer,
    pub atomic: bool,
    view: View,
    /// The split collective begun and not ended yet: its request and the
    /// name of the call that began it.
    pub split: Option<(ReqId, &'static str)>,
    /// The view as `MPI_File_set_view` gave it, for `MPI_File_get_view`.
    pub view_given: ViewGiven,
}

/// A file's descriptor and name.
pub struct Io {
    fd: std::fs::File,
    path: PathBuf,
}

impl Io {
    /// Writes `data` at file offset `at`.
    pub fn write(&self, at: u64, data: &[u8]) -> MpiResult<()> {
        self.fd
            .write_all_at(data, at)
            .map_err(|e| io_error("cannot write", &self.path, e))
    }

    /// Reads into `buf` from file offset `at`; fewer bytes only where the
    /// file ends. Returns how many.
    pub fn read(&self, at: u64, buf: &mut [u8]) -> MpiResult<usize> {
        let mut n = 0;
        while n < buf.len() {
            match self.fd.read_at(&mut buf[n..], at + n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error("cannot read", &self.path, e)),
            }
        }
        Ok(n)
    }
}

/// One access, placed under the file's lock (its file pointer moved at
/// the call, as the standard says for non-blocking ones too), done
/// outside it: the file runs its stream bytes map to, in stream order.
pub struct Access {
    pub io: Arc<Io>,
    pub runs: Vec<(u64, usize)>,
}

impl Access {
    /// Writes `data`, the access's stream bytes.
    pub fn write(&self, data: &[u8]) -> MpiResult<()> {
        let mut from = 0;
        for &(at, len) in &self.runs {
            self.io.write(at, &data[from..from + len])?;
            from += len;
        }
        Ok(())
    }

    /// Reads the access's stream bytes, stopping where the file ends.
    pub fn read(&self) -> MpiResult<Vec<u8>> {
        let mut buf = vec![0u8; self.runs.iter().map(|r| r.1).sum()];
        let mut n = 0;
        for &(at, len) in &self.runs {
            let got = self.io.read(at, &mut buf[n..n + len])?;
            n += got;
            if got < len {
                break;
            }
        }
        buf.truncate(n);
        Ok(buf)
    }
}

/// A collective access placed under the file's lock, with what its two
/// phases need, done outside the lock: a collective never waits for
/// others while holding it.
pub struct Placed {
    acc: MpiResult<Access>,
    comm: Arc<Comm>,
    hosts: Vec<usize>,
    hints: Hints,
}

impl Placed {
    fn with<T>(self, m: &Mpi, f: impl FnOnce(&Collective, MpiResult<Access>) -> T) -> T {
        let c = Collective {
            team: self.comm.team(m),
            hosts: &self.hosts,
            hints: &self.hints,
        };
        f(&c, self.acc)
    }

    /// Writes `data` collectively; returns the bytes written.
    pub fn write(self, m: &Mpi, data: &[u8]) -> MpiResult<usize> {
        self.with(m, |c, acc| file_collective::write_all(c, acc, data))
    }

    /// Reads collectively (fewer bytes where the file ends).
    pub fn read(self, m: &Mpi) -> MpiResult<Vec<u8>> {
        self.with(m, file_collective::read_all)
    }
}

/// Starts `job`, a collective access of file `fh` (placed already), on
/// the worker thread of the file's communicator: the non-blocking
/// collectives (`MPI_File_iwrite_all` ...) and split ones. Its request
/// reports the bytes `job` returns.
pub fn start_collective(
    m: &'static Mpi,
    fh: i32,
    file: &Mutex<File>,
    job: super::nbc::CountedJob,
) -> ReqId {
    let context = lock(file).comm.coll_context();
    super::nbc::start_counted(m, request_owner(fh), context, job)
}

/// A request of an independent non-blocking access, done at the call:
/// complete from the start, with its byte count.
pub fn completed_request(m: &Mpi, fh: i32, bytes: usize) -> ReqId {
    let id = super::p2p::post(m, crate::progress::Op::External, request_owner(fh));
    m.engine.complete(
        id,
        crate::progress::Status {
            bytes,
            ..crate::progress::Status::empty()
        },
    );
    id
}

/// What a file's requests record as their owner in place of a
/// communicator: their errors go to the file's error handler.
pub fn request_owner(fh: i32) -> i32 {
    -fh
}

/// A view's arguments: displacement, etype and filetype (with the
/// handles they had), data representation.
#[derive(Clone, Debug)]
pub struct ViewGiven {
    pub disp: i64,
    pub etype: (i32, Arc<Datatype>),
    pub filetype: (i32, Arc<Datatype>),
    pub datarep: String,
}

/// The file table: handle 0 is `MPI_FILE_NULL`, which holds only the error
/// handler that open and delete use.
struct Table {
    files: Vec<Option<Arc<Mutex<File>>>>,
    handlers: Vec<i32>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    files: Vec::new(),
    handlers: Vec::new(),
});

fn table() -> MutexGuard<'static, Table> {
    let mut t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    if t.handlers.is_empty() {
        t.files.push(None);
        t.handlers.push(ERRORS_RETURN);
    }
    t
}

/// The open file behind a handle.
pub fn get(h: i32) -> MpiResult<Arc<Mutex<File>>> {
    let t = table();
    match usize::try_from(h).ok().and_then(|i| t.files.get(i)) {
        Some(Some(f)) => Ok(f.clone()),
        _ => fail(err::FILE, format!("invalid file handle {h}")),
    }
}

/// Locks a file (a panic of another thread leaves it usable).
pub fn lock(f: &Mutex<File>) -> MutexGuard<'_, File> {
    f.lock().unwrap_or_else(|p| p.into_inner())
}

/// The error handler of a file handle (`MPI_FILE_NULL`'s for an invalid one,
/// as the standard says for errors no file can be named for).
pub fn errhandler(h: i32) -> i32 {
    let t = table();
    let i = usize::try_from(h)
        .ok()
        .filter(|&i| i == 0 || t.files.get(i).is_some_and(Option::is_some));
    t.handlers[i.unwrap_or(0)]
}

pub fn set_errhandler(h: i32, eh: i32) -> MpiResult<()> {
    if h != FILE_NULL {
        get(h)?;
    }
    table().handlers[h as usize] = eh;
    Ok(())
}

fn add(f: File) -> i32 {
    let mut t = table();
    let eh = t.handlers[0];
    let f = Some(Arc::new(Mutex::new(f)));
    match t.files.iter().skip(1).position(Option::is_none) {
        Some(i) => {
            t.files[i + 1] = f;
            t.handlers[i + 1] = eh;
            (i + 1) as i32
        }
        None => {
            t.files.push(f);
            t.handlers.push(eh);
            (t.files.len() - 1) as i32
        }
    }
}

/// An I/O error as the MPI error class that names it.
fn io_error(what: &str, path: &Path, e: std::io::Error) -> MpiError {
    let class = match e.kind() {
        ErrorKind::NotFound => err::NO_SUCH_FILE,
        ErrorKind::PermissionDenied => err::ACCESS,
        ErrorKind::AlreadyExists => err::FILE_EXISTS,
        ErrorKind::StorageFull => err::NO_SPACE,
        ErrorKind::QuotaExceeded => err::QUOTA,
        ErrorKind::ReadOnlyFilesystem => err::READ_ONLY,
        ErrorKind::IsADirectory | ErrorKind::InvalidFilename | ErrorKind::InvalidInput => {
            err::BAD_FILE
        }
        _ => err::IO,
    };
    MpiError::new(class, format!("{what} {}: {e}", path.display()))
}

/// Checks an access mode as the standard requires.
pub fn check_amode(amode: i32) -> MpiResult<()> {
    let access = [mode::RDONLY, mode::WRONLY, mode::RDWR]
        .iter()
        .filter(|&&m| amode & m != 0)
        .count();
    let why = if amode & !mode::ALL != 0 {
        "has bits that are no MPI_MODE_*"
    } else if access != 1 {
        "must have exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY and MPI_MODE_RDWR"
    } else if amode & mode::RDONLY != 0 && amode & (mode::CREATE | mode::EXCL) != 0 {
        "cannot create a file opened read-only"
    } else if amode & mode::RDWR != 0 && amode & mode::SEQUENTIAL != 0 {
        "cannot be MPI_MODE_RDWR and MPI_MODE_SEQUENTIAL together"
    } else {
        return Ok(());
    };
    fail(err::AMODE, format!("access mode {amode:#x} {why}"))
}

fn open_local(path: &Path, amode: i32, create: bool) -> MpiResult<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(amode & mode::WRONLY == 0)
        .write(amode & mode::RDONLY == 0)
        .mode(0o644);
    if create && amode & mode::CREATE != 0 {
        o.create(true);
    }
    if create && amode & mode::EXCL != 0 {
        o.create_new(true);
    }
    o.open(path).map_err(|e| io_error("cannot open", path, e))
}

/// The first error of any member (all return it), or nothing.
pub(super) fn agree(team: &coll::Team, mine: &MpiResult<()>) -> MpiResult<()> {
    let code = mine.as_ref().err().map_or(0, |e| e.class);
    let all = comm::allgather_fixed(team, &code.to_le_bytes())?;
    let first = all
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")))
        .enumerate()
        .find(|&(_, c)| c != 0);
    match (mine, first) {
        (Err(e), _) => Err(e.clone()),
        (Ok(()), Some((r, c))) => fail(c, format!("rank {r} of the file's group failed")),
        (Ok(()), None) => Ok(()),
    }
}

/// `MPI_File_open`: collective over `h`'s members; the first member creates
/// the file when asked, then everyone opens it.
pub fn open(m: &Mpi, h: i32, name: &str, amode: i32, info: Info) -> MpiResult<i32> {
    check_amode(amode)?;
    let comm = comm::private_dup(m, h)?;
    if comm.is_inter() {
        return fail(
            err::COMM,
            "a file cannot be opened on an inter-communicator",
        );
    }
    let team = comm.team(m);
    let path = PathBuf::from(name);
    // The first member creates (EXCL is checked once), then everyone opens.
    let first = if comm.rank == 0 {
        open_local(&path, amode, true).map(Some)
    } else {
        Ok(None)
    };
    agree(&team, &first.as_ref().map(|_| ()).map_err(Clone::clone))?;
    let fd = match first? {
        Some(fd) => Ok(fd),
        None => open_local(&path, amode, false),
    };
    agree(&team, &fd.as_ref().map(|_| ()).map_err(Clone::clone))?;
    let fd = fd?;
    // Rank 0's pid and a count of its opens name the shared pointer's file.
    let mut id = [0u8; 12];
    if comm.rank == 0 {
        static OPENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = OPENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        id[..4].copy_from_slice(&std::process::id().to_le_bytes());
        id[4..].copy_from_slice(&n.to_le_bytes());
    }
    // SAFETY: `id` outlives the blocking broadcast.
    coll::bcast(&team, 0, unsafe { RawBuf::new(id.as_mut_ptr(), id.len()) })?;
    let end = if amode & mode::APPEND != 0 {
        size_of(&fd, &path)?
    } else {
        0
    };
    let shared = SharedPointer::new(&path, &id, end);
    let hosts = comm::host_indices(&team)?;
    let byte = Arc::new(Datatype::predefined(dt::BYTE).expect("MPI_BYTE"));
    Ok(add(File {
        comm,
        io: Arc::new(Io { fd, path }),
        hosts,
        amode,
        info,
        pos: end,
        shared,
        atomic: false,
        view: View::bytes(),
        split: None,
        view_given: ViewGiven {
            disp: 0,
            etype: (dt::BYTE, byte.clone()),
            filetype: (dt::BYTE, byte),
            datarep: "native".into(),
        },
    }))
}

fn size_of(fd: &std::fs::File, path: &Path) -> MpiResult<u64> {
    Ok(fd
        .metadata()
        .map_err(|e| io_error("cannot read the size of", path, e))?
        .len())
}

/// `MPI_File_close`: collective; the shared pointer's file goes, and the
/// data file too under `MPI_MODE_DELETE_ON_CLOSE`. The file is released
/// even when a member has failed (ULFM), with the error returned.
pub fn close(m: &Mpi, h: i32) -> MpiResult<()> {
    let f = get(h)?;
    let r = {
        let f = lock(&f);
        // Everyone is done with the shared pointer and the data.
        let done = coll::barrier(&f.comm.team(m)).map_err(MpiError::from);
        let mut r = done.clone();
        if f.comm.rank == 0 || done.is_err() {
            f.shared.remove();
        }
        if f.comm.rank == 0 && f.amode & mode::DELETE_ON_CLOSE != 0 {
            let path = &f.io.path;
            r = r.and(std::fs::remove_file(path).map_err(|e| io_error("cannot delete", path, e)));
        }
        r
    };
    let mut t = table();
    t.files[h as usize] = None;
    t.handlers[h as usize] = ERRORS_RETURN;
    r
}

/// Closes every open file of this process without the collective steps
/// of `MPI_File_close` (a rollback); each member removes the shared
/// pointer's side file, which is gone already for all but the first.
pub fn release_all() {
    let files: Vec<_> = {
        let mut t = table();
        let all = t
            .files
            .iter_mut()
            .skip(1)
            .filter_map(Option::take)
            .collect();
        for h in t.handlers.iter_mut().skip(1) {
            *h = ERRORS_RETURN;
        }
        all
    };
    for f in files {
        lock(&f).shared.remove();
    }
}

/// `MPI_File_delete`.
pub fn delete(name: &str) -> MpiResult<()> {
    let path = Path::new(name);
    std::fs::remove_file(path).map_err(|e| io_error("cannot delete", path, e))
}

/// Where an access starts.
#[derive(Clone, Copy)]
pub enum At {
    /// An explicit offset (`_at` calls).
    Offset(u64),
    /// The individual file pointer, which moves past the data.
    Individual,
    /// The shared file pointer, which moves past the data.
    Shared,
}

impl File {
    fn allows(&self, write: bool, at: At) -> MpiResult<()> {
        if write && self.amode & mode::RDONLY != 0 {
            return fail(err::READ_ONLY, "the file was opened MPI_MODE_RDONLY");
        }
        if !write && self.amode & mode::WRONLY != 0 {
            return fail(err::ACCESS, "the file was opened MPI_MODE_WRONLY");
        }
        if self.amode & mode::SEQUENTIAL != 0 && !matches!(at, At::Shared) {
            return fail(
                err::UNSUPPORTED_OPERATION,
                "a file opened MPI_MODE_SEQUENTIAL is accessed only through the shared file pointer",
            );
        }
        Ok(())
    }

    /// Where in the view's stream `len` bytes go or come from, moving the
    /// pointer used.
    fn place(&mut self, at: At, len: u64) -> MpiResult<u64> {
        Ok(match at {
            At::Offset(o) => o * self.view.etype_size as u64,
            At::Individual => {
                let o = self.pos;
                self.pos += len;
                o
            }
            At::Shared => self.shared.fetch_add(len)?,
        })
    }

    /// Places an access of `len` stream bytes at `at`: checks the mode,
    /// moves the pointer used, maps the bytes to file runs.
    pub fn prepare(&mut self, write: bool, at: At, len: usize) -> MpiResult<Access> {
        self.allows(write, at)?;
        let off = self.place(at, len as u64)?;
        Ok(self.access(off, len))
    }

    fn access(&self, off: u64, len: usize) -> Access {
        Access {
            io: self.io.clone(),
            runs: self.view.runs(off, len),
        }
    }

    /// Writes `data` (already packed), returning the bytes written.
    pub fn write(&mut self, at: At, data: &[u8]) -> MpiResult<usize> {
        self.prepare(true, at, data.len())?.write(data)?;
        Ok(data.len())
    }

    /// Reads up to `len` bytes (fewer at the end of the file).
    pub fn read(&mut self, at: At, len: usize) -> MpiResult<Vec<u8>> {
        let got = self.prepare(false, at, len)?.read()?;
        self.read_short(at, len, got.len());
        Ok(got)
    }

    /// After a blocking read at the individual pointer that got `got` of
    /// `len` bytes: the pointer moves past what was read, not what was
    /// asked.
    pub fn read_short(&mut self, at: At, len: usize, got: usize) {
        if let At::Individual = at {
            self.pos -= (len - got) as u64;
        }
    }

    /// A collective access placed (its pointer moved now), to be done
    /// outside the file's lock.
    pub fn place_collective(&mut self, write: bool, at: At, len: usize) -> Placed {
        Placed {
            acc: self.prepare(write, at, len),
            comm: self.comm.clone(),
            hosts: self.hosts.clone(),
            hints: Hints::of(&self.info),
        }
    }

    /// `MPI_File_write_ordered`: the members' data one after the other, in
    /// rank order, at the shared file pointer.
    pub fn write_ordered(&mut self, m: &Mpi, data: &[u8]) -> MpiResult<usize> {
        self.allows(true, At::Shared)?;
        let off = self.ordered_offset(m, data.len() as u64)?;
        self.access(off, data.len()).write(data)?;
        Ok(data.len())
    }

    pub fn read_ordered(&mut self, m: &Mpi, len: usize) -> MpiResult<Vec<u8>> {
        self.allows(false, At::Shared)?;
        let off = self.ordered_offset(m, len as u64)?;
        self.access(off, len).read()
    }

    /// Each member's offset for an ordered access of `len` bytes: the first
    /// member advances the shared pointer by the sum and tells everyone.
    fn ordered_offset(&mut self, m: &Mpi, len: u64) -> MpiResult<u64> {
        let team = self.comm.team(m);
        let lens = comm::allgather_fixed(&team, &len.to_le_bytes())?;
        let lens: Vec<u64> = lens
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        let mut base = [0u8; 8];
        let start = if self.comm.rank == 0 {
            self.shared.fetch_add(lens.iter().sum())
        } else {
            Ok(0)
        };
        agree(&team, &start.as_ref().map(|_| ()).map_err(Clone::clone))?;
        base.copy_from_slice(&start?.to_le_bytes());
        // SAFETY: `base` outlives the blocking broadcast.
        coll::bcast(&team, 0, unsafe { RawBuf::new(base.as_mut_ptr(), 8) })?;
        let before: u64 = lens[..self.comm.rank].iter().sum();
        Ok(u64::from_le_bytes(base) + before)
    }

    /// `MPI_File_seek` (individual pointer).
    pub fn seek(&mut self, offset: i64, whence: i32) -> MpiResult<()> {
        if self.amode & mode::SEQUENTIAL != 0 {
            return fail(
                err::UNSUPPORTED_OPERATION,
                "a file opened MPI_MODE_SEQUENTIAL has no individual file pointer",
            );
        }
        let e = self.view.etype_size as u64;
        let end = self.end_in_etypes()?;
        self.pos = moved(self.pos / e, end, offset, whence)? * e;
        Ok(())
    }

    /// The individual file pointer, in etypes.
    pub fn position(&self) -> u64 {
        self.pos / self.view.etype_size as u64
    }

    /// Where the file ends, in etypes of the view (a partial etype counts).
    fn end_in_etypes(&self) -> MpiResult<u64> {
        let e = self.view.etype_size as u64;
        Ok(self.view.stream_before(self.size()?).div_ceil(e))
    }

    /// `MPI_File_get_byte_offset`: the file offset of etype `offset`.
    pub fn byte_offset(&self, offset: u64) -> u64 {
        self.view.file_offset(offset * self.view.etype_size as u64)
    }

    /// The view's data representation.
    pub fn datarep(&self) -> &str {
        &self.view_given.datarep
    }

    /// `MPI_File_set_view` (collective): offsets count `etype`s of the
    /// stream `filetype` makes from `disp` on; both file pointers go back
    /// to 0.
    pub fn set_view(&mut self, m: &Mpi, given: ViewGiven, info: &Info) -> MpiResult<()> {
        // MPI_DISPLACEMENT_CURRENT (sequential files): the shared pointer's
        // place in the file, read by every member before the first one
        // sets it to 0 (after a barrier, below).
        let current = if given.disp == DISPLACEMENT_CURRENT {
            self.shared.get().map(|at| self.view.file_offset(at))
        } else {
            Ok(0)
        };
        let view = current.and_then(|c| set_view_checks(&given, self.amode, c));
        agree(
            &self.comm.team(m),
            &view.as_ref().map(|_| ()).map_err(Clone::clone),
        )?;
        self.view = view?;
        self.view_given = given;
        self.pos = 0;
        for (k, v) in info.entries() {
            self.info.set(k, v)?;
        }
        self.first_member_does(m, |f| f.shared.set(0))
    }

    /// `MPI_File_seek_shared`: collective, everyone gives the same values.
    pub fn seek_shared(&mut self, m: &Mpi, offset: i64, whence: i32) -> MpiResult<()> {
        // The others check their arguments alike.
        moved(0, 0, offset.max(0), whence)?;
        let e = self.view.etype_size as u64;
        self.first_member_does(m, |f| {
            let cur = f.shared.get()? / e;
            let to = moved(cur, f.end_in_etypes()?, offset, whence)?;
            f.shared.set(to * e)
        })
    }

    /// A collective change made once: after every member has called (so
    /// nobody's earlier access sees it), the first member makes it, and
    /// everyone returns its outcome.
    fn first_member_does(
        &mut self,
        m: &Mpi,
        change: impl FnOnce(&mut File) -> MpiResult<()>,
    ) -> MpiResult<()> {
        let comm = self.comm.clone();
        let team = comm.team(m);
        coll::barrier(&team)?;
        let r = if comm.rank == 0 { change(self) } else { Ok(()) };
        agree(&team, &r)
    }

    /// The shared file pointer, in etypes.
    pub fn position_shared(&mut self) -> MpiResult<u64> {
        Ok(self.shared.get()? / self.view.etype_size as u64)
    }

    pub fn size(&self) -> MpiResult<u64> {
        size_of(&self.io.fd, &self.io.path)
    }

    /// `MPI_File_set_size` (collective): the first member truncates or
    /// extends.
    pub fn set_size(&mut self, m: &Mpi, size: i64) -> MpiResult<()> {
        let size = self.new_size(size)?;
        self.first_member_does(m, |f| f.resize(size))
    }

    /// `MPI_File_preallocate`: storage for `size` bytes (the file grows to
    /// it, with zeros, if smaller; it never shrinks).
    pub fn preallocate(&mut self, m: &Mpi, size: i64) -> MpiResult<()> {
        let size = self.new_size(size)?;
        self.first_member_does(m, |f| {
            if f.size()? < size {
                f.resize(size)?;
            }
            mpistages_sys::file::allocate(&f.io.fd, size)
                .map_err(|e| io_error("cannot allocate", &f.io.path, e))
        })
    }

    fn new_size(&self, size: i64) -> MpiResult<u64> {
        if self.amode & mode::RDONLY != 0 {
            return fail(err::READ_ONLY, "the file was opened MPI_MODE_RDONLY");
        }
        u64::try_from(size).or_else(|_| fail(err::ARG, format!("size {size} is negative")))
    }

    fn resize(&self, size: u64) -> MpiResult<()> {
        self.io
            .fd
            .set_len(size)
            .map_err(|e| io_error("cannot resize", &self.io.path, e))
    }

    pub fn sync(&self) -> MpiResult<()> {
        self.io
            .fd
            .sync_all()
            .map_err(|e| io_error("cannot sync", &self.io.path, e))
    }
}

/// A view's arguments checked, and the view they make.
fn set_view_checks(given: &ViewGiven, amode: i32, current: u64) -> MpiResult<View> {
    match given.datarep.as_str() {
        // "internal" is ours to choose: the native one. In external32,
        // the types this machine has are of the sizes that
        // representation gives them; their bytes are swapped (big-endian)
        // at the ABI boundary, where the program's datatype is known.
        "native" | "internal" | "external32" => {}
        other if super::file_view::datarep_registered(other) => {}
        other => {
            return fail(
                err::UNSUPPORTED_DATAREP,
                format!(
                    "unknown data representation '{other}' (native, internal, external32 and \
                     those registered with MPI_Register_datarep are supported)"
                ),
            )
        }
    }
    let disp = if given.disp == DISPLACEMENT_CURRENT && amode & mode::SEQUENTIAL != 0 {
        // Where the shared pointer is (its file offset).
        current
    } else {
        u64::try_from(given.disp).or_else(|_| {
            fail(
                err::ARG,
                format!("the view's displacement {} is negative", given.disp),
            )
        })?
    };
    View::new(disp, &given.etype.1, &given.filetype.1)
}

/// `MPI_DISPLACEMENT_CURRENT` (MPICH's value).
pub const DISPLACEMENT_CURRENT: i64 = -54278278;

/// A pointer at `cur` in a file of `end` bytes moved by `offset` from
/// `whence`.
fn moved(cur: u64, end: u64, offset: i64, whence: i32) -> MpiResult<u64> {
    let from = match whence {
        SEEK_SET => 0,
        SEEK_CUR => cur as i64,
        SEEK_END => end as i64,
        w => {
            return fail(
                err::ARG,
                format!("whence {w} is not MPI_SEEK_SET, _CUR or _END"),
            )
        }
    };
    let to = from.checked_add(offset).unwrap_or(-1);
    u64::try_from(to).or_else(|_| fail(err::ARG, format!("the pointer would move to {to}")))
}

/// The shared file pointer: a side file holding it as 8 bytes, changed
/// under an exclusive lock. Until it exists the pointer is `initial`.
struct SharedPointer {
    path: PathBuf,
    initial: u64,
    fd: Option<std::fs::File>,
}

impl SharedPointer {
    fn new(data: &Path, id: &[u8; 12], initial: u64) -> SharedPointer {
        let name = data
            .file_name()
            .map_or("file".into(), |n| n.to_string_lossy());
        let pid = u32::from_le_bytes(id[..4].try_into().expect("4 bytes"));
        let n = u64::from_le_bytes(id[4..].try_into().expect("8 bytes"));
        let side = format!(".{name}.mpistages-shfp.{pid}.{n}");
        SharedPointer {
            path: data.with_file_name(side),
            initial,
            fd: None,
        }
    }

    /// Runs `f` on the pointer's value under the lock; `f` returns the new
    /// value and what to give back.
    fn locked<T>(&mut self, f: impl FnOnce(u64) -> MpiResult<(u64, T)>) -> MpiResult<T> {
        if self.fd.is_none() {
            let fd = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&self.path)
                .map_err(|e| io_error("cannot open the shared file pointer", &self.path, e))?;
            self.fd = Some(fd);
        }
        let fd = self.fd.as_ref().expect("opened above");
        let path = &self.path;
        let ioerr = |e| io_error("cannot use the shared file pointer", path, e);
        fd.lock().map_err(ioerr)?;
        let r = (|| {
            let mut b = [0u8; 8];
            let now = match fd.read_at(&mut b, 0).map_err(ioerr)? {
                8 => u64::from_le_bytes(b),
                0 => self.initial,
                n => return fail(err::IO, format!("{}: {n} bytes, not 8", path.display())),
            };
            let (next, out) = f(now)?;
            fd.write_all_at(&next.to_le_bytes(), 0).map_err(ioerr)?;
            Ok(out)
        })();
        let unlocked = fd.unlock().map_err(ioerr);
        let out = r?;
        unlocked?;
        Ok(out)
    }

    fn fetch_add(&mut self, len: u64) -> MpiResult<u64> {
        self.locked(|now| Ok((now + len, now)))
    }

    fn get(&mut self) -> MpiResult<u64> {
        self.locked(|now| Ok((now, now)))
    }

    fn set(&mut self, to: u64) -> MpiResult<()> {
        self.locked(|_| Ok((to, ())))
    }

    fn remove(&self) {
        // Absent when nobody used the shared pointer.
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_modes_follow_the_standard() {
        assert!(check_amode(mode::RDONLY).is_ok());
        assert!(check_amode(mode::WRONLY | mode::CREATE | mode::EXCL).is_ok());
        assert!(check_amode(mode::WRONLY | mode::SEQUENTIAL | mode::CREATE).is_ok());
        for bad in [
            0,
            mode::RDONLY | mode::WRONLY,
            mode::RDONLY | mode::CREATE,
            mode::RDONLY | mode::EXCL,
            mode::RDWR | mode::SEQUENTIAL,
            mode::RDWR | 1024,
        ] {
            assert_eq!(check_amode(bad).unwrap_err().class, err::AMODE, "{bad:#x}");
        }
    }

    #[test]
    fn seeks_move_from_where_they_say() {
        assert_eq!(moved(5, 100, 7, SEEK_SET).unwrap(), 7);
        assert_eq!(moved(5, 100, 7, SEEK_CUR).unwrap(), 12);
        assert_eq!(moved(5, 100, -10, SEEK_END).unwrap(), 90);
        assert_eq!(moved(5, 100, -6, SEEK_CUR).unwrap_err().class, err::ARG);
        assert_eq!(moved(5, 100, 0, 1).unwrap_err().class, err::ARG);
        assert_eq!(
            moved(5, 100, i64::MAX, SEEK_END).unwrap_err().class,
            err::ARG
        );
    }

    #[test]
    fn the_shared_pointer_starts_at_its_initial_value_and_advances() {
        let dir = std::env::temp_dir().join(format!("mpistages-shfp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data = dir.join("data.bin");
        let mut a = SharedPointer::new(&data, &[1; 12], 40);
        let mut b = SharedPointer::new(&data, &[1; 12], 40);
        assert_eq!(a.fetch_add(10).unwrap(), 40);
        assert_eq!(b.fetch_add(5).unwrap(), 50);
        assert_eq!(a.get().unwrap(), 55);
        b.set(3).unwrap();
        assert_eq!(a.fetch_add(1).unwrap(), 3);
        a.remove();
        assert!(!a.path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
