//! `mpistages-ckpt ls|verify|show PATH`: what a user runs when a restart
//! goes wrong. PATH is a checkpoint file or a directory searched (two levels
//! deep, e.g. `DIR/epoch-N/rank-R.ckpt`) for `*.ckpt` files.

use super::erasure::parity::{self, Parity};
use super::format;
use std::path::{Path, PathBuf};

pub const USAGE: &str = "\
usage: mpistages-ckpt ls|verify|show PATH

  ls      one line per checkpoint file: job, rank, epoch, sections, sizes,
          compression ratio and whether every checksum holds; for what a
          rank holds for others (held-by-R.ckpt), the partner copy or the
          parity of its redundancy set (xor:K, rs:K+M) and what it covers
  verify  like ls, but exits with status 1 if any file is corrupt
  show    every section of every file (kind, id or name, sizes)

PATH is a checkpoint file or a directory holding *.ckpt files (searched
two levels deep).
";

/// Checkpoint files under `path`, sorted. Old files a level parked for
/// reuse (`free-*.ckpt`) belong to no epoch and are left out.
pub fn find(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let listed = |p: &Path| {
        p.extension().is_some_and(|x| x == "ckpt")
            && !p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("free-"))
    };
    let mut out = Vec::new();
    for e in std::fs::read_dir(path)? {
        let p = e?.path();
        if p.is_dir() {
            for e2 in std::fs::read_dir(&p)? {
                let q = e2?.path();
                if listed(&q) {
                    out.push(q);
                }
            }
        } else if listed(&p) {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// One line on a parity file: scheme, set, what it holds and covers.
fn describe(p: &Parity) -> String {
    let t = &p.table;
    let stripes: Vec<String> = p
        .shards
        .iter()
        .map(|(row, i, _)| format!("{row}/{i}"))
        .collect();
    let covered: u64 = t.lengths.iter().sum();
    format!(
        "{} parity held by rank {}: job {} epoch {}  set of ranks {:?}  stripe/shard {}  {} bytes of parity for {} bytes of checkpoints",
        p.scheme(),
        p.holder,
        p.job,
        p.epoch,
        t.members,
        stripes.join(","),
        p.shards.len() as u64 * t.chunk,
        covered
    )
}

/// Runs the tool; returns the process exit status.
pub fn run(args: &[String], out: &mut dyn std::io::Write) -> i32 {
    let (Some(cmd), Some(path), None) = (args.first(), args.get(1), args.get(2)) else {
        let _ = write!(out, "{USAGE}");
        return 2;
    };
    if !matches!(cmd.as_str(), "ls" | "verify" | "show") {
        let _ = write!(out, "unknown command '{cmd}'\n\n{USAGE}");
        return 2;
    }
    let files = match find(Path::new(path)) {
        Ok(f) => f,
        Err(e) => {
            let _ = writeln!(out, "cannot read {path}: {e}");
            return 2;
        }
    };
    if files.is_empty() {
        let _ = writeln!(out, "no checkpoint files under {path}");
        return if cmd == "verify" { 1 } else { 0 };
    }
    let mut bad = 0;
    for f in &files {
        let bytes = std::fs::read(f).unwrap_or_default();
        if bytes.starts_with(parity::MAGIC) {
            match Parity::parse(&bytes) {
                Ok(p) => {
                    let _ = writeln!(out, "{}  {}  ok", f.display(), describe(&p));
                }
                Err(e) => {
                    bad += 1;
                    let _ = writeln!(out, "{}  CORRUPT: {e}", f.display());
                }
            }
            continue;
        }
        let holder = f
            .file_name()
            .and_then(|n| {
                n.to_string_lossy()
                    .strip_prefix("held-by-")?
                    .strip_suffix(".ckpt")?
                    .parse::<u32>()
                    .ok()
            })
            .map_or(String::new(), |h| {
                format!("partner copy held by rank {h}: ")
            });
        match format::read(f, None) {
            Ok(ck) => {
                let raw: u64 = ck.sections.iter().map(|s| s.data.len() as u64).sum();
                let ratio = if ck.stored_bytes == 0 {
                    1.0
                } else {
                    raw as f64 / ck.stored_bytes as f64
                };
                let diff = match ck.diff.first() {
                    Some(&i) => format!(
                        "  differential on epoch {} ({} of {} sections)",
                        super::diff::base_of(&ck.sections[i].data).unwrap_or(0),
                        ck.diff.len(),
                        ck.sections.len()
                    ),
                    None => String::new(),
                };
                let _ = writeln!(
                    out,
                    "{}  {holder}job {} rank {}/{} epoch {} gen {}  {} sections  {} bytes ({} stored, {:.2}x){diff}  ok",
                    f.display(),
                    ck.who.job,
                    ck.who.rank,
                    ck.who.size,
                    ck.who.epoch,
                    ck.who.generation,
                    ck.sections.len(),
                    raw,
                    ck.stored_bytes,
                    ratio
                );
                if cmd == "show" {
                    for (i, s) in ck.sections.iter().enumerate() {
                        let what = if s.name.is_empty() {
                            format!("id {}", s.id)
                        } else {
                            s.name.clone()
                        };
                        let _ =
                            writeln!(out, "    [{i}] {:?} {what}: {} bytes", s.kind, s.data.len());
                    }
                }
            }
            Err(e) => {
                bad += 1;
                let _ = writeln!(out, "{}  CORRUPT: {e}", f.display());
            }
        }
    }
    if cmd == "verify" {
        let _ = writeln!(out, "{} files, {} corrupt", files.len(), bad);
        return i32::from(bad > 0);
    }
    0
}
