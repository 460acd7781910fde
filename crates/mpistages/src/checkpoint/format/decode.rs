//! Reading a checkpoint file: mapped, every field, bound and checksum
//! verified before any byte is returned.

use super::*;

/// A verified checkpoint: identity and sections.
#[derive(Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub who: Identity,
    pub sections: Vec<Section>,
    /// Bytes of section data as stored in the file (after compression).
    pub stored_bytes: u64,
    /// Sections that hold only changed blocks on a base epoch (their data
    /// is the `checkpoint::diff` payload until the chain is applied).
    pub diff: Vec<usize>,
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
            2 => Codec::Diff,
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
    let mut diff = Vec::new();
    let who = walk(bytes, expect, |s| {
        let data = match s.codec {
            Codec::None | Codec::Diff => {
                if s.codec == Codec::Diff {
                    diff.push(s.index);
                }
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
        diff,
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
