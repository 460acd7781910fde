//! Writing a checkpoint file: sections prepared (compressed when that
//! shrinks them), the header and table, then the bytes, under a temporary
//! name renamed into place.

use super::*;

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

/// Compresses each section where that shrinks it (`zstd`), or keeps only
/// its changed blocks where `diff` says so, without checksumming yet: the
/// file writer checksums while it writes.
fn prepare<'a, S: AsSection>(
    sections: &'a [S],
    compression: Compression,
    diff: Option<&crate::checkpoint::diff::Plan>,
) -> Vec<Prepared<'a>> {
    sections
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let s = s.section();
            let changed = diff.and_then(|d| Some((d.base, d.changed.get(i)?.as_ref()?)));
            let (codec, stored) = match compression {
                _ if changed.is_some() => {
                    let (base, changed) = changed.expect("checked");
                    let payload = crate::checkpoint::diff::encode(base, s.data, changed);
                    (Codec::Diff, std::borrow::Cow::Owned(payload))
                }
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
    let mut prepared = prepare(sections, compression, None);
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
pub(super) const WRITE_CHUNK: usize = 256 << 10;

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
    write_diff(path, who, sections, compression, sync, reuse, None)
}

/// `write`, with the sections `diff` names written as their changed
/// blocks only (a differential checkpoint on `diff.base`).
pub fn write_diff<S: AsSection>(
    path: &Path,
    who: &Identity,
    sections: &[S],
    compression: Compression,
    sync: bool,
    reuse: &[PathBuf],
    diff: Option<&crate::checkpoint::diff::Plan>,
) -> io::Result<WriteStats> {
    let mut prepared = prepare(sections, compression, diff);
    let tmp = temp_name(path);
    let result = (|| -> io::Result<WriteStats> {
        let f = match take_for_reuse(reuse, &tmp) {
            Some(f) => f,
            None => mpistages_sys::file::create_private(&tmp)?,
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
pub(super) const SMALL_FILE: u64 = 4 << 20;

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

pub(super) fn temp_name(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!(".tmp.{}", std::process::id()));
    path.with_file_name(name)
}
