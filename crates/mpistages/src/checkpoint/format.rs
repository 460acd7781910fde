//! The per-rank checkpoint file: a fixed header, a section table, then the
//! sections' bytes. Every section has its own CRC32 (of the bytes as
//! stored) and is optionally zstd-compressed (only when that shrinks it).
//! Files are written under a temporary name, synced when asked, then
//! renamed, so a crash mid-write never leaves a half file under the real
//! name. Reading maps the file and verifies every field, bound and checksum
//! before returning any byte; malformed input is an error, never a panic.
//!
//! ```text
//! header (56 bytes, little-endian)
//!   0 magic "MPISTCKP"   8 version u32   12 flags u32 (0)
//!  16 job u64           24 rank u32     28 size u32
//!  32 epoch u64         40 generation u32  44 sections u32
//!  48 table_crc u32 (CRC32 of header bytes 0..48 and the whole table)
//!  52 reserved u32 (0)
//! section table entry (40 bytes + name, padded to 8)
//!   0 kind u16   2 codec u16   4 name_len u32   8 id u64
//!  16 length u64 (as used)  24 stored u64 (on disk)  32 crc u32  36 reserved u32
//! then the sections' stored bytes, in table order, each padded to 8
//! ```

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub const MAGIC: &[u8; 8] = b"MPISTCKP";
pub const VERSION: u32 = 1;
const HEADER_LEN: usize = 56;
const ENTRY_LEN: usize = 40;
/// Limits that keep a corrupt file from asking for absurd allocations.
const MAX_SECTIONS: u32 = 1 << 20;
const MAX_NAME: u32 = 4096;

#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The MPI state of the rank (communicators, groups, handles …).
    MpiState = 1,
    /// A region registered with `MPIX_Protect` (id = the region's id).
    Protected = 2,
    /// A file routed with `MPIX_Checkpoint_route` (name = its name).
    File = 3,
}

impl Kind {
    fn from_u16(v: u16) -> Option<Kind> {
        Some(match v {
            1 => Kind::MpiState,
            2 => Kind::Protected,
            3 => Kind::File,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    None = 0,
    Zstd = 1,
}

/// Who a checkpoint belongs to; a file for another job, rank or epoch is
/// refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub job: u64,
    pub rank: u32,
    pub size: u32,
    pub epoch: u64,
    pub generation: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub kind: Kind,
    pub id: u64,
    pub name: String,
    pub data: SectionData,
}

/// A section's bytes: owned, or a range of a mapped checkpoint file (a
/// restore then copies straight from the file's pages into the
/// application's memory, with no copy in between).
#[derive(Clone)]
pub enum SectionData {
    Owned(Vec<u8>),
    Mapped(Arc<MappedFile>, std::ops::Range<usize>),
}

/// A checkpoint file mapped for reading, with the shared lock that keeps a
/// writer from reusing it (see `open_locked`) for as long as it is mapped.
pub struct MappedFile {
    map: memmap2::Mmap,
    _locked: File,
}

impl std::ops::Deref for SectionData {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            SectionData::Owned(v) => v,
            SectionData::Mapped(m, r) => &m.map[r.clone()],
        }
    }
}

impl From<Vec<u8>> for SectionData {
    fn from(v: Vec<u8>) -> Self {
        SectionData::Owned(v)
    }
}

impl FromIterator<u8> for SectionData {
    fn from_iter<I: IntoIterator<Item = u8>>(it: I) -> Self {
        SectionData::Owned(it.into_iter().collect())
    }
}

impl PartialEq for SectionData {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for SectionData {}

impl std::fmt::Debug for SectionData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes", self.len())
    }
}

/// A section to write whose bytes live elsewhere: a protected region is
/// written to a directory level straight from the application's memory,
/// and copied only by the levels that keep it in memory.
#[derive(Clone, Copy, Debug)]
pub struct SectionRef<'a> {
    pub kind: Kind,
    pub id: u64,
    pub name: &'a str,
    pub data: &'a [u8],
}

impl SectionRef<'_> {
    pub fn to_owned(&self) -> Section {
        Section {
            kind: self.kind,
            id: self.id,
            name: self.name.to_string(),
            data: self.data.to_vec().into(),
        }
    }
}

/// What can be written as a section: an owned `Section` or a `SectionRef`.
pub trait AsSection {
    fn section(&self) -> SectionRef<'_>;
}

impl AsSection for Section {
    fn section(&self) -> SectionRef<'_> {
        SectionRef {
            kind: self.kind,
            id: self.id,
            name: &self.name,
            data: &self.data,
        }
    }
}

impl AsSection for SectionRef<'_> {
    fn section(&self) -> SectionRef<'_> {
        *self
    }
}

/// Compression applied when writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    Off,
    /// zstd at this level; a section is stored compressed only if smaller.
    Zstd(i32),
}

#[derive(Debug)]
pub enum CkptError {
    Io(io::Error),
    NotACheckpoint,
    Version(u32),
    Truncated { need: u64, have: u64 },
    Corrupt(String),
    TableChecksum,
    SectionChecksum { index: usize, kind: Kind, id: u64 },
    WrongIdentity { expected: Identity, found: Identity },
}

impl fmt::Display for CkptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CkptError::Io(e) => write!(f, "{e}"),
            CkptError::NotACheckpoint => write!(f, "not an mpistages checkpoint (bad magic)"),
            CkptError::Version(v) => write!(f, "checkpoint format version {v} is not supported (this build reads {VERSION})"),
            CkptError::Truncated { need, have } => write!(f, "truncated: needs {need} bytes, has {have}"),
            CkptError::Corrupt(why) => write!(f, "corrupt: {why}"),
            CkptError::TableChecksum => write!(f, "header or section table checksum mismatch"),
            CkptError::SectionChecksum { index, kind, id } => {
                write!(f, "checksum mismatch in section {index} ({kind:?} {id})")
            }
            CkptError::WrongIdentity { expected, found } => write!(
                f,
                "belongs to job {} rank {} epoch {} (size {}), expected job {} rank {} epoch {} (size {})",
                found.job, found.rank, found.epoch, found.size, expected.job, expected.rank, expected.epoch, expected.size
            ),
        }
    }
}

impl From<io::Error> for CkptError {
    fn from(e: io::Error) -> Self {
        CkptError::Io(e)
    }
}

fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// What `write` did, for reports and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteStats {
    pub raw_bytes: u64,
    pub stored_bytes: u64,
}

struct Prepared<'a> {
    section: SectionRef<'a>,
    codec: Codec,
    stored: std::borrow::Cow<'a, [u8]>,
    crc: u32,
}

/// Compresses each section where that shrinks it (`zstd`), without
/// checksumming yet: the file writer checksums while it writes.
fn prepare<'a, S: AsSection>(sections: &'a [S], compression: Compression) -> Vec<Prepared<'a>> {
    sections
        .iter()
        .map(|s| {
            let s = s.section();
            let (codec, stored) = match compression {
                Compression::Zstd(level) if !s.data.is_empty() => {
                    match zstd::bulk::compress(s.data, level) {
                        Ok(c) if c.len() < s.data.len() => {
                            (Codec::Zstd, std::borrow::Cow::Owned(c))
                        }
                        _ => (Codec::None, std::borrow::Cow::Borrowed(s.data)),
                    }
                }
                _ => (Codec::None, std::borrow::Cow::Borrowed(s.data)),
            };
            Prepared {
                section: s,
                codec,
                stored,
                crc: 0,
            }
        })
        .collect()
}

/// The header and section table describing `prepared` (whose checksums
/// must be filled in for a valid file; the length does not depend on them).
fn header(who: &Identity, prepared: &[Prepared]) -> Vec<u8> {
    let mut head = Vec::with_capacity(HEADER_LEN + prepared.len() * (ENTRY_LEN + 16));
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&VERSION.to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    head.extend_from_slice(&who.job.to_le_bytes());
    head.extend_from_slice(&who.rank.to_le_bytes());
    head.extend_from_slice(&who.size.to_le_bytes());
    head.extend_from_slice(&who.epoch.to_le_bytes());
    head.extend_from_slice(&who.generation.to_le_bytes());
    head.extend_from_slice(&(prepared.len() as u32).to_le_bytes());
    head.extend_from_slice(&[0u8; 8]); // table crc + reserved, filled below
    for p in prepared {
        let name = p.section.name.as_bytes();
        head.extend_from_slice(&(p.section.kind as u16).to_le_bytes());
        head.extend_from_slice(&(p.codec as u16).to_le_bytes());
        head.extend_from_slice(&(name.len() as u32).to_le_bytes());
        head.extend_from_slice(&p.section.id.to_le_bytes());
        head.extend_from_slice(&(p.section.data.len() as u64).to_le_bytes());
        head.extend_from_slice(&(p.stored.len() as u64).to_le_bytes());
        head.extend_from_slice(&p.crc.to_le_bytes());
        head.extend_from_slice(&0u32.to_le_bytes());
        head.extend_from_slice(name);
        head.resize(pad8(head.len()), 0);
    }
    let mut crc = crc32fast::Hasher::new();
    crc.update(&head[..48]);
    crc.update(&head[HEADER_LEN..]);
    head[48..52].copy_from_slice(&crc.finalize().to_le_bytes());
    head
}

/// The bytes of a checkpoint file, in memory (for the partner level).
pub fn encode<S: AsSection>(who: &Identity, sections: &[S], compression: Compression) -> Vec<u8> {
    let mut prepared = prepare(sections, compression);
    for p in &mut prepared {
        p.crc = crc32fast::hash(&p.stored);
    }
    let head = header(who, &prepared);
    let body: usize = prepared.iter().map(|p| pad8(p.stored.len())).sum();
    let mut out = Vec::with_capacity(head.len() + body);
    out.extend_from_slice(&head);
    for p in &prepared {
        out.extend_from_slice(&p.stored);
        out.resize(pad8(out.len()), 0);
    }
    out
}

/// Section data goes to the file in pieces of this size, each checksummed
/// just before it is written: the bytes are read from memory once (the
/// write copies them from cache) instead of once for the checksum and
/// again for the write.
const WRITE_CHUNK: usize = 256 << 10;

/// Writes a checkpoint file atomically (temporary name, then rename);
/// `sync` makes it durable first (fsync of the file and its directory).
/// The sections go first, then the header with their checksums at the
/// start of the file. On any error the temporary file is removed and
/// `path` is untouched. `reuse`: old checkpoint files (nobody's any more),
/// one of which to overwrite instead of creating a new one, which saves the file
/// system allocating pages for the new file and freeing the old one's
/// (on tmpfs most of the cost of a write); it is used only if nobody has
/// it open for reading (`open_locked`), else removed.
pub fn write<S: AsSection>(
    path: &Path,
    who: &Identity,
    sections: &[S],
    compression: Compression,
    sync: bool,
    reuse: &[PathBuf],
) -> io::Result<WriteStats> {
    let mut prepared = prepare(sections, compression);
    let tmp = temp_name(path);
    let result = (|| -> io::Result<WriteStats> {
        let f = match take_for_reuse(reuse, &tmp) {
            Some(f) => f,
            None => OpenOptions::new().write(true).create_new(true).open(&tmp)?,
        };
        let mut stats = WriteStats::default();
        for p in &prepared {
            stats.raw_bytes += p.section.data.len() as u64;
            stats.stored_bytes += p.stored.len() as u64;
        }
        let end = if stats.stored_bytes <= SMALL_FILE {
            write_small(&f, who, &mut prepared)?
        } else {
            write_chunked(&f, who, &mut prepared)?
        };
        // A reused file may have been longer.
        if f.metadata()?.len() != end {
            f.set_len(end)?;
        }
        if sync {
            f.sync_all()?;
        }
        // A reused file is locked: readers may have it once it is renamed.
        crate::sys::unlock(f.as_raw_fd());
        drop(f);
        fs::rename(&tmp, path)?;
        if sync {
            if let Some(dir) = path.parent() {
                File::open(dir)?.sync_all()?;
            }
        }
        Ok(stats)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Up to this many bytes of sections, a checkpoint is checksummed whole
/// (it stays in the CPU's cache) and written with one system call.
const SMALL_FILE: u64 = 4 << 20;

/// Checksums every section, then writes header, sections and padding with
/// one vectored write (system calls are a large part of a small write).
/// Returns the length written.
fn write_small(f: &File, who: &Identity, prepared: &mut [Prepared]) -> io::Result<u64> {
    for p in prepared.iter_mut() {
        p.crc = crc32fast::hash(&p.stored);
    }
    let head = header(who, prepared);
    let zeros = [0u8; 8];
    let mut parts = vec![io::IoSlice::new(&head)];
    for p in prepared.iter() {
        parts.push(io::IoSlice::new(&p.stored));
        parts.push(io::IoSlice::new(
            &zeros[..pad8(p.stored.len()) - p.stored.len()],
        ));
    }
    let len = parts.iter().map(|p| p.len() as u64).sum();
    let mut rest = &mut parts[..];
    while !rest.is_empty() {
        match io::Write::write_vectored(&mut &*f, rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => io::IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(len)
}

/// Writes the sections piece by piece, each piece checksummed just before
/// it is written, then the header with the checksums at the start.
/// Returns the length written.
fn write_chunked(f: &File, who: &Identity, prepared: &mut [Prepared]) -> io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut offset = header(who, prepared).len() as u64;
    for p in prepared.iter_mut() {
        let mut crc = crc32fast::Hasher::new();
        for chunk in p.stored.chunks(WRITE_CHUNK) {
            crc.update(chunk);
            f.write_all_at(chunk, offset)?;
            offset += chunk.len() as u64;
        }
        p.crc = crc.finalize();
        let pad = pad8(p.stored.len()) - p.stored.len();
        f.write_all_at(&[0u8; 8][..pad], offset)?;
        offset += pad as u64;
    }
    f.write_all_at(&header(who, prepared), 0)?;
    Ok(offset)
}

/// The first of the old files `candidates` that nobody is reading, locked
/// exclusively, opened for overwriting and moved to `tmp`. One that a
/// reader still has (a restore's mapping, a flush copying it) stays where
/// it is, for a later write.
pub(crate) fn take_for_reuse(candidates: &[PathBuf], tmp: &Path) -> Option<File> {
    candidates.iter().find_map(|old| {
        let f = OpenOptions::new().write(true).open(old).ok()?;
        if !crate::sys::try_lock(f.as_raw_fd(), true).unwrap_or(false) {
            return None;
        }
        fs::rename(old, tmp).ok()?;
        Some(f)
    })
}

fn temp_name(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!(".tmp.{}", std::process::id()));
    path.with_file_name(name)
}

/// A verified checkpoint: identity and sections.
#[derive(Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub who: Identity,
    pub sections: Vec<Section>,
    /// Bytes of section data as stored in the file (after compression).
    pub stored_bytes: u64,
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

fn need(bytes: &[u8], end: u64) -> Result<(), CkptError> {
    if (bytes.len() as u64) < end {
        return Err(CkptError::Truncated {
            need: end,
            have: bytes.len() as u64,
        });
    }
    Ok(())
}

/// One section of a verified checkpoint, as stored (`raw` may be
/// compressed).
struct StoredSection<'a> {
    index: usize,
    kind: Kind,
    codec: Codec,
    id: u64,
    length: u64,
    name: &'a str,
    raw: &'a [u8],
}

/// Walks checkpoint bytes, checking the header, the table, every section's
/// checksum and the padding, and hands each section to `each`. With
/// `expect`, the identity must match (the generation is not compared: it
/// only records the writer's).
fn walk<'a>(
    bytes: &'a [u8],
    expect: Option<&Identity>,
    mut each: impl FnMut(StoredSection<'a>) -> Result<(), CkptError>,
) -> Result<Identity, CkptError> {
    if bytes.len() < MAGIC.len() || &bytes[..8] != MAGIC {
        return Err(CkptError::NotACheckpoint);
    }
    need(bytes, HEADER_LEN as u64)?;
    let version = u32_at(bytes, 8);
    if version != VERSION {
        return Err(CkptError::Version(version));
    }
    if u32_at(bytes, 12) != 0 || u32_at(bytes, 52) != 0 {
        return Err(CkptError::Corrupt(
            "reserved header fields are not zero".into(),
        ));
    }
    let who = Identity {
        job: u64_at(bytes, 16),
        rank: u32_at(bytes, 24),
        size: u32_at(bytes, 28),
        epoch: u64_at(bytes, 32),
        generation: u32_at(bytes, 40),
    };
    let n = u32_at(bytes, 44);
    if n > MAX_SECTIONS {
        return Err(CkptError::Corrupt(format!("{n} sections")));
    }
    // Walk the table once to find its end, with every read bounds-checked.
    let mut entries = Vec::with_capacity(n.min(1024) as usize);
    let mut pos = HEADER_LEN as u64;
    for _ in 0..n {
        need(bytes, pos + ENTRY_LEN as u64)?;
        let e = pos as usize;
        let name_len = u32_at(bytes, e + 4);
        if name_len > MAX_NAME {
            return Err(CkptError::Corrupt(format!(
                "section name of {name_len} bytes"
            )));
        }
        let name_end = pos + ENTRY_LEN as u64 + name_len as u64;
        need(bytes, name_end)?;
        entries.push((e, name_len as usize));
        pos = pad8(name_end as usize) as u64;
    }
    need(bytes, pos)?;
    let table_end = pos as usize;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&bytes[..48]);
    crc.update(&bytes[HEADER_LEN..table_end]);
    if crc.finalize() != u32_at(bytes, 48) {
        return Err(CkptError::TableChecksum);
    }
    if let Some(exp) = expect {
        if (exp.job, exp.rank, exp.size, exp.epoch) != (who.job, who.rank, who.size, who.epoch) {
            return Err(CkptError::WrongIdentity {
                expected: *exp,
                found: who,
            });
        }
    }
    let mut data_pos = table_end as u64;
    for (index, (e, name_len)) in entries.into_iter().enumerate() {
        let kind = Kind::from_u16(u16_at(bytes, e))
            .ok_or_else(|| CkptError::Corrupt(format!("section {index} has an unknown kind")))?;
        let codec = match u16_at(bytes, e + 2) {
            0 => Codec::None,
            1 => Codec::Zstd,
            c => {
                return Err(CkptError::Corrupt(format!(
                    "section {index} has an unknown codec {c}"
                )))
            }
        };
        let id = u64_at(bytes, e + 8);
        let length = u64_at(bytes, e + 16);
        let stored = u64_at(bytes, e + 24);
        let sum = u32_at(bytes, e + 32);
        if codec == Codec::None && stored != length {
            return Err(CkptError::Corrupt(format!(
                "section {index}: stored {stored} bytes for {length}"
            )));
        }
        let end = data_pos
            .checked_add(stored)
            .ok_or_else(|| CkptError::Corrupt("section size overflows".into()))?;
        need(bytes, end)?;
        let raw = &bytes[data_pos as usize..end as usize];
        if crc32fast::hash(raw) != sum {
            return Err(CkptError::SectionChecksum { index, kind, id });
        }
        let name = std::str::from_utf8(&bytes[e + ENTRY_LEN..e + ENTRY_LEN + name_len])
            .map_err(|_| CkptError::Corrupt(format!("section {index} name is not UTF-8")))?;
        // Padding is not under a checksum, so it must be exactly zeros.
        let pad_end = (pad8(end as usize) as u64).min(bytes.len() as u64);
        if bytes[end as usize..pad_end as usize]
            .iter()
            .any(|&b| b != 0)
        {
            return Err(CkptError::Corrupt(format!(
                "non-zero padding after section {index}"
            )));
        }
        each(StoredSection {
            index,
            kind,
            codec,
            id,
            length,
            name,
            raw,
        })?;
        data_pos = pad8(end as usize) as u64;
    }
    if data_pos != bytes.len() as u64 && pad8(bytes.len()) as u64 != data_pos {
        return Err(CkptError::Corrupt(format!(
            "{} trailing bytes",
            bytes.len() as u64 - data_pos.min(bytes.len() as u64)
        )));
    }
    Ok(who)
}

/// Parses and verifies checkpoint bytes into owned sections (decompressed).
/// With `expect`, the identity must match.
pub fn parse(bytes: &[u8], expect: Option<&Identity>) -> Result<Checkpoint, CkptError> {
    parse_with(bytes, expect, |raw, _| raw.to_vec().into())
}

/// `parse`, with `hold` making the data of an uncompressed section (its
/// bytes and their range in `bytes`).
fn parse_with(
    bytes: &[u8],
    expect: Option<&Identity>,
    hold: impl Fn(&[u8], std::ops::Range<usize>) -> SectionData,
) -> Result<Checkpoint, CkptError> {
    let mut sections = Vec::new();
    let mut stored_bytes = 0;
    let who = walk(bytes, expect, |s| {
        let data = match s.codec {
            Codec::None => {
                let start = s.raw.as_ptr() as usize - bytes.as_ptr() as usize;
                hold(s.raw, start..start + s.raw.len())
            }
            Codec::Zstd => {
                let index = s.index;
                let cap = usize::try_from(s.length)
                    .map_err(|_| CkptError::Corrupt("section too large".into()))?;
                let out = zstd::bulk::decompress(s.raw, cap)
                    .map_err(|e| CkptError::Corrupt(format!("section {index}: {e}")))?;
                if out.len() as u64 != s.length {
                    return Err(CkptError::Corrupt(format!(
                        "section {index} decompressed to {} bytes, not {}",
                        out.len(),
                        s.length
                    )));
                }
                out.into()
            }
        };
        stored_bytes += s.raw.len() as u64;
        sections.push(Section {
            kind: s.kind,
            id: s.id,
            name: s.name.to_string(),
            data,
        });
        Ok(())
    })?;
    Ok(Checkpoint {
        who,
        sections,
        stored_bytes,
    })
}

/// Verifies checkpoint bytes (structure and every checksum) without
/// copying or decompressing any section; returns the identity.
pub fn verify(bytes: &[u8]) -> Result<Identity, CkptError> {
    walk(bytes, None, |_| Ok(()))
}

/// Opens a checkpoint file for reading, with a shared lock: while it is
/// held the file is not reused for a newer checkpoint (`write`'s `reuse`).
/// A file that is being reused right now is an error. On a file system
/// without `flock` (some parallel file systems) the file is read unlocked:
/// there no file can be locked for reuse either, so none is reused.
pub fn open_locked(path: &Path) -> io::Result<File> {
    let f = File::open(path)?;
    if let Ok(false) = crate::sys::try_lock(f.as_raw_fd(), false) {
        return Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "the file is being overwritten with a newer checkpoint",
        ));
    }
    Ok(f)
}

/// Reads and verifies a checkpoint file. It is mapped, not read: the
/// uncompressed sections stay views of the mapping.
pub fn read(path: &Path, expect: Option<&Identity>) -> Result<Checkpoint, CkptError> {
    let f = open_locked(path)?;
    if f.metadata()?.len() == 0 {
        return Err(CkptError::Truncated {
            need: HEADER_LEN as u64,
            have: 0,
        });
    }
    // SAFETY: the mapping is read-only. Checkpoint files are written under
    // a temporary name and renamed into place, and removed by unlink (the
    // mapping outlives the name); a file is overwritten for reuse only
    // under an exclusive lock, which cannot be had while `f` holds its
    // shared one, and `f` lives as long as the mapping. Only someone else
    // truncating a file in the job's private (0700) directory could raise
    // SIGBUS, the documented hazard of mapping files.
    let map = unsafe { memmap2::Mmap::map(&f)? };
    let mapped = Arc::new(MappedFile { map, _locked: f });
    parse_with(&mapped.map, expect, |_, range| {
        SectionData::Mapped(mapped.clone(), range)
    })
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
