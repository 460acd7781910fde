//! `MPISTAGES_CKPT` / `mpiexec --ckpt`: which storage levels checkpoints
//! go to, how many committed epochs each keeps, and compression. Example:
//! `mem,tmpfs:/dev/shm/mpistages,partner,pfs:/scratch/run1@every=4,keep=3,zstd:3`
//! (`xor:K` or `rs:K+M` in place of `partner` for erasure-coded sets).

use super::erasure::Redundancy;
use super::format::Compression;
use std::path::PathBuf;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Level {
    /// In-process copy: live ranks roll back with no I/O.
    Mem,
    /// Node-local directory (survives a process failure).
    Tmpfs(PathBuf),
    /// A copy, or parity, held by other ranks (survives the loss of a
    /// node): `partner`, `xor:K` or `rs:K+M`.
    Redundant(Redundancy),
    /// Durable directory, flushed in the background every `every` checkpoints.
    Pfs { dir: PathBuf, every: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub levels: Vec<Level>,
    /// Committed epochs kept per level.
    pub keep: usize,
    pub compression: Compression,
    /// Differential checkpoints on directory levels, a full one at least
    /// every this many epochs (`diff[:N]`).
    pub diff: Option<u32>,
}

pub const DEFAULT_TMPFS: &str = "/dev/shm/mpistages";

/// A job's own directory under a node-local level's root: concurrent jobs
/// never see each other's files, and `mpiexec` removes it at the end.
pub fn job_dir(root: &std::path::Path, job_id: &str) -> PathBuf {
    root.join(format!("job-{job_id}"))
}

impl Config {
    /// The node-local directory for files that are not checkpoints (routed
    /// files): the first tmpfs level's root, or the default one.
    pub fn node_local_root(&self) -> PathBuf {
        self.levels
            .iter()
            .find_map(|l| match l {
                Level::Tmpfs(d) => Some(d.clone()),
                _ => None,
            })
            .unwrap_or_else(|| PathBuf::from(DEFAULT_TMPFS))
    }
}

impl Default for Config {
    /// One machine, no configuration: memory plus node-local tmpfs.
    fn default() -> Config {
        Config {
            levels: vec![Level::Mem, Level::Tmpfs(PathBuf::from(DEFAULT_TMPFS))],
            keep: 2,
            compression: Compression::Off,
            diff: None,
        }
    }
}

fn positive(what: &str, v: &str) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{what} needs a positive number, not '{v}'")),
    }
}

/// `xor:K` (K ≥ 2) or `rs:K+M` (K, M ≥ 1).
fn redundancy(name: &str, arg: Option<&str>) -> Result<Redundancy, String> {
    let arg = arg.unwrap_or("");
    let num = |v: &str| {
        v.trim()
            .parse::<u32>()
            .ok()
            .filter(|&n| (1..=128).contains(&n))
    };
    match name {
        "xor" => match num(arg) {
            Some(k) if k >= 2 => Ok(Redundancy::Xor { k }),
            _ => Err(format!("xor:K needs a set size K of 2..128 ranks, not '{arg}'")),
        },
        _ => match arg.split_once('+').map(|(k, m)| (num(k), num(m))) {
            Some((Some(k), Some(m))) => Ok(Redundancy::Rs { k, m }),
            _ => Err(format!(
                "rs:K+M needs K data and M parity ranks per set (1..128 each, e.g. rs:4+2), not '{arg}'"
            )),
        },
    }
}

/// Parses the configuration string; an empty string gives the default.
pub fn parse(spec: &str) -> Result<Config, String> {
    let mut cfg = Config {
        levels: Vec::new(),
        ..Config::default()
    };
    let spec = spec.trim();
    if spec.is_empty() {
        return Ok(Config::default());
    }
    for item in spec.split(',').map(str::trim) {
        let (name, arg) = match item.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (item, None),
        };
        let dir = |what: &str| -> Result<PathBuf, String> {
            match arg {
                Some(a) if !a.is_empty() => Ok(PathBuf::from(a)),
                _ => Err(format!("level '{what}' needs a directory ({what}:/path)")),
            }
        };
        let level = match name {
            "mem" => Some(Level::Mem),
            "partner" => Some(Level::Redundant(Redundancy::Partner)),
            "xor" | "rs" => Some(Level::Redundant(redundancy(name, arg)?)),
            "tmpfs" => Some(Level::Tmpfs(dir("tmpfs")?)),
            "pfs" => {
                let raw = dir("pfs")?;
                let s = raw.to_string_lossy().into_owned();
                let (path, every) = match s.rsplit_once("@every=") {
                    Some((p, e)) => (p.to_string(), positive("@every=", e)? as u32),
                    None => (s, 1),
                };
                Some(Level::Pfs { dir: PathBuf::from(path), every })
            }
            _ if name.starts_with("keep=") => {
                cfg.keep = positive("keep=", &name["keep=".len()..])? as usize;
                None
            }
            "zstd" => {
                let lvl: i32 = arg
                    .unwrap_or("3")
                    .parse()
                    .ok()
                    .filter(|l| (1..=19).contains(l))
                    .ok_or_else(|| format!("zstd level must be 1..19, not '{}'", arg.unwrap_or("")))?;
                cfg.compression = Compression::Zstd(lvl);
                None
            }
            "off" => {
                cfg.compression = Compression::Off;
                None
            }
            "diff" => {
                let every = match arg {
                    None => super::diff::DEFAULT_EVERY,
                    Some(n) => positive("diff:", n)?.min(u32::MAX as u64) as u32,
                };
                cfg.diff = Some(every);
                None
            }
            "" => return Err("empty item in the checkpoint configuration".into()),
            other => {
                return Err(format!(
                    "unknown checkpoint level or option '{other}' (levels: mem, tmpfs:DIR, partner or xor:K or rs:K+M, pfs:DIR[@every=N]; options: keep=N, zstd[:LEVEL], off, diff[:N])"
                ))
            }
        };
        if let Some(l) = level {
            if cfg
                .levels
                .iter()
                .any(|x| std::mem::discriminant(x) == std::mem::discriminant(&l))
            {
                return Err(match l {
                    Level::Redundant(_) => {
                        "partner, xor:K and rs:K+M protect against the same loss: give one of them"
                            .into()
                    }
                    _ => format!("level '{name}' is given twice"),
                });
            }
            cfg.levels.push(l);
        }
    }
    if cfg.levels.is_empty() {
        return Err("no storage level given (e.g. mem,tmpfs:/dev/shm/mpistages)".into());
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_example() {
        let c =
            parse("mem,tmpfs:/dev/shm/mpistages,partner,pfs:/scratch/run1@every=4,keep=3,zstd:5")
                .unwrap();
        assert_eq!(
            c.levels,
            vec![
                Level::Mem,
                Level::Tmpfs("/dev/shm/mpistages".into()),
                Level::Redundant(Redundancy::Partner),
                Level::Pfs {
                    dir: "/scratch/run1".into(),
                    every: 4
                }
            ]
        );
        assert_eq!((c.keep, c.compression), (3, Compression::Zstd(5)));
        assert_eq!(parse("mem,diff").unwrap().diff, Some(8));
        assert_eq!(parse("mem,diff:3").unwrap().diff, Some(3));
        assert_eq!(
            parse("mem,xor:4").unwrap().levels[1],
            Level::Redundant(Redundancy::Xor { k: 4 })
        );
        assert_eq!(
            parse("mem,rs:4+2").unwrap().levels[1],
            Level::Redundant(Redundancy::Rs { k: 4, m: 2 })
        );
        assert_eq!(parse("").unwrap(), Config::default());
        assert_eq!(
            parse("pfs:/x").unwrap().levels,
            vec![Level::Pfs {
                dir: "/x".into(),
                every: 1
            }]
        );
    }

    #[test]
    fn mistakes_are_explained() {
        for (bad, says) in [
            ("tmpfs", "needs a directory"),
            ("mem,mem", "twice"),
            ("mem,keep=0", "positive"),
            ("pfs:/x@every=no", "positive"),
            ("zstd:40,mem", "1..19"),
            ("disk:/x", "unknown"),
            ("keep=2", "no storage level"),
            ("mem,,tmpfs:/x", "empty item"),
            ("mem,xor", "set size"),
            ("mem,xor:1", "set size"),
            ("mem,rs:4", "rs:K+M"),
            ("mem,rs:4+0", "rs:K+M"),
            ("mem,partner,xor:4", "give one of them"),
            ("mem,diff:0", "positive"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
