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
//!   0 kind u16   2 codec u16 (0 none, 1 zstd, 2 diff)   4 name_len u32   8 id u64
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
    /// The changed blocks of the section on a base epoch (`checkpoint::diff`).
    Diff = 2,
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
    /// In pages of its own at the page offset of the program's region it
    /// copies (the memory level's copy): a rollback exchanges the pages
    /// instead of copying them (`PageBuf::give_to`).
    Pages(Arc<mpistages_sys::pages::PageBuf>),
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
            SectionData::Pages(p) => p.as_slice(),
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
    /// `data` is the program's own memory, which stays mapped while its
    /// region is protected: a snapshot may copy it after the call returns.
    pub program: bool,
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
            program: false,
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

mod decode;
mod encode;
pub use decode::*;
pub use encode::*;

#[cfg(test)]
mod tests;
