//! How the ranks' output reaches the user: on mpiexec's own standard
//! output and error, a line at a time, with a prefix if asked
//! (`--tag-output`: Open MPI's `[job,rank]<stdout>:`; `-l` or
//! `--prepend-rank`: MPICH's `[rank] `), and into a file per rank and
//! stream if asked (`--output-filename DIR`: Open MPI's
//! `DIR/1/rank.N/stdout`, also copied to the terminal unless the
//! directory ends in `:nocopy`). A replacement of rank N appends to the
//! same files.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq)]
pub struct Style {
    /// `--tag-output`.
    pub tag: bool,
    /// `-l`, `--prepend-rank`.
    pub rank: bool,
    /// `--output-filename`: the directory (absolute).
    pub dir: Option<PathBuf>,
    /// Lines go to the terminal too (all but `--output-filename DIR:nocopy`).
    pub copy: bool,
}

impl Default for Style {
    fn default() -> Style {
        Style {
            tag: false,
            rank: false,
            dir: None,
            copy: true,
        }
    }
}

impl Style {
    /// `--output-filename`'s value: a directory, made absolute, with an
    /// optional `:nocopy`.
    pub fn set_files(&mut self, v: &str) -> Result<(), String> {
        let (dir, nocopy) = match v.rsplit_once(':') {
            Some((d, flag)) if flag.eq_ignore_ascii_case("nocopy") => (d, true),
            _ => (v, false),
        };
        if dir.is_empty() {
            return Err("--output-filename needs a directory".into());
        }
        let dir = std::path::absolute(dir).map_err(|e| format!("--output-filename {dir}: {e}"))?;
        self.dir = Some(dir);
        self.copy = !nocopy;
        Ok(())
    }

    /// A line of rank `rank` of job `job` as the terminal gets it:
    /// prefixed, ending in a newline.
    pub fn terminal_line(&self, job: &str, rank: usize, to_stderr: bool, line: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(line.len() + 32);
        if self.tag {
            let stream = if to_stderr { "stderr" } else { "stdout" };
            let _ = write!(out, "[{job},{rank}]<{stream}>:");
        }
        if self.rank {
            let _ = write!(out, "[{rank}] ");
        }
        out.extend_from_slice(line);
        if !line.ends_with(b"\n") {
            out.push(b'\n');
        }
        out
    }
}

/// The files of one rank (`--output-filename`), opened at its first line.
pub struct RankFiles {
    stdout: File,
    stderr: File,
}

impl RankFiles {
    /// `DIR/1/rank.N/stdout` and `stderr`, appended to.
    pub fn open(dir: &Path, rank: usize) -> std::io::Result<RankFiles> {
        let d = dir.join("1").join(format!("rank.{rank}"));
        std::fs::create_dir_all(&d)?;
        let open = |name| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(d.join(name))
        };
        Ok(RankFiles {
            stdout: open("stdout")?,
            stderr: open("stderr")?,
        })
    }

    pub fn write(&mut self, to_stderr: bool, line: &[u8]) -> std::io::Result<()> {
        let f = if to_stderr {
            &mut self.stderr
        } else {
            &mut self.stdout
        };
        f.write_all(line)?;
        if !line.ends_with(b"\n") {
            f.write_all(b"\n")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_as_open_mpi_and_mpich_write_them() {
        let mut s = Style::default();
        assert_eq!(s.terminal_line("77", 3, false, b"hi\n"), b"hi\n");
        assert_eq!(s.terminal_line("77", 3, false, b"no end"), b"no end\n");
        s.rank = true;
        assert_eq!(s.terminal_line("77", 3, true, b"hi\n"), b"[3] hi\n");
        s.rank = false;
        s.tag = true;
        assert_eq!(
            s.terminal_line("77", 3, true, b"hi\n"),
            b"[77,3]<stderr>:hi\n"
        );
        assert_eq!(
            s.terminal_line("77", 0, false, b"x\n"),
            b"[77,0]<stdout>:x\n"
        );
    }

    #[test]
    fn output_files_per_rank_and_stream() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = Style::default();
        let dir = tmp.path().join("out");
        s.set_files(&format!("{}:NOCOPY", dir.display())).unwrap();
        assert_eq!((s.dir.as_deref(), s.copy), (Some(dir.as_path()), false));
        s.set_files(dir.to_str().unwrap()).unwrap();
        assert!(s.copy);
        assert!(s.set_files(":nocopy").is_err());
        let mut f = RankFiles::open(&dir, 2).unwrap();
        f.write(false, b"one\n").unwrap();
        f.write(true, b"err").unwrap();
        drop(f);
        // A replacement appends.
        RankFiles::open(&dir, 2)
            .unwrap()
            .write(false, b"two\n")
            .unwrap();
        let read = |n: &str| std::fs::read_to_string(dir.join("1/rank.2").join(n)).unwrap();
        assert_eq!(read("stdout"), "one\ntwo\n");
        assert_eq!(read("stderr"), "err\n");
    }
}
