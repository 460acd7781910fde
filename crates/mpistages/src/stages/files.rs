//! Routed files (`MPIX_Checkpoint_route` / `MPIX_Checkpoint_locate`, SCR
//! style): the application writes a file where `route` says, the next
//! checkpoint takes it in as a section (checksummed, compressed, copied to
//! every level like the rest), and `locate` puts the fault epoch's copy
//! back into a file the application reads.
//!
//! Layout under the rank's directory (node-local, removed with the job):
//! `next/NAME` files routed for the next checkpoint, `epoch-E/NAME` files
//! located from epoch E.

use super::StagesError;
use crate::checkpoint::format::{Kind, Section};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub struct RoutedFiles {
    dir: PathBuf,
    routed: BTreeSet<String>,
}

/// Longest file name accepted (the usual file-system limit).
const NAME_MAX: usize = 255;

fn check_name(name: &str) -> Result<(), StagesError> {
    let bad = if name.is_empty() || name == "." || name == ".." {
        format!("'{name}' is not a file name")
    } else if name.len() > NAME_MAX {
        format!(
            "file name of {} bytes is longer than {NAME_MAX}",
            name.len()
        )
    } else if name.contains('/') || name.contains('\0') {
        format!("'{name}' must be a plain file name (no '/' or NUL)")
    } else {
        return Ok(());
    };
    Err(StagesError::BadName(bad))
}

fn make_dir(d: &Path) -> Result<(), StagesError> {
    mpistages_sys::file::create_private_dir(d)
        .map_err(StagesError::io(format!("creating {}", d.display())))
}

impl RoutedFiles {
    pub fn new(dir: PathBuf) -> RoutedFiles {
        RoutedFiles {
            dir,
            routed: BTreeSet::new(),
        }
    }

    /// Where to write `name` so that it joins the next checkpoint.
    pub fn route(&mut self, name: &str) -> Result<PathBuf, StagesError> {
        check_name(name)?;
        let next = self.dir.join("next");
        make_dir(&next)?;
        self.routed.insert(name.to_string());
        Ok(next.join(name))
    }

    /// The routed files as checkpoint sections. A file that was routed but
    /// not written is an error: the checkpoint would silently lack it.
    pub fn collect(&self) -> Result<Vec<Section>, StagesError> {
        self.routed
            .iter()
            .map(|name| {
                let p = self.dir.join("next").join(name);
                let data = std::fs::read(&p).map_err(StagesError::io(format!(
                    "routed file '{name}' cannot be read at {}",
                    p.display()
                )))?;
                Ok(Section {
                    kind: Kind::File,
                    id: 0,
                    name: name.clone(),
                    data: data.into(),
                })
            })
            .collect()
    }

    /// Forgets the routed files (after a checkpoint took them in, or at a
    /// rollback, which discards the unfinished iteration's files).
    pub fn clear(&mut self) {
        self.routed.clear();
        let _ = std::fs::remove_dir_all(self.dir.join("next"));
    }

    /// Writes the copy of `name` among `sections` (epoch `epoch`) to a file
    /// and returns its path.
    pub fn locate(
        &self,
        name: &str,
        epoch: u64,
        sections: &[Section],
    ) -> Result<PathBuf, StagesError> {
        check_name(name)?;
        let s = sections
            .iter()
            .find(|s| s.kind == Kind::File && s.name == name)
            .ok_or_else(|| {
                StagesError::UnknownFile(format!(
                    "checkpoint epoch {epoch} holds no file named '{name}'"
                ))
            })?;
        let d = self.dir.join(format!("epoch-{epoch}"));
        make_dir(&d)?;
        let p = d.join(name);
        // Written under a temporary name, so a reader never sees half a file.
        let tmp = d.join(format!(".{name}.tmp"));
        mpistages_sys::file::write_private(&tmp, &s.data)
            .and_then(|_| std::fs::rename(&tmp, &p))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                StagesError::io(format!("writing {}", p.display()))(e)
            })?;
        Ok(p)
    }

    /// Removes files located from epochs other than `keep`.
    pub fn forget_located(&self, keep: u64) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(n) = name
                .strip_prefix("epoch-")
                .and_then(|n| n.parse::<u64>().ok())
            {
                if n != keep {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
    }

    /// Removes everything (a process without mpiexec, at `MPI_Finalize`).
    pub fn remove_all(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::testutil::Scratch;

    #[test]
    fn route_collect_locate() {
        let s = Scratch::new("routed");
        let mut f = RoutedFiles::new(s.0.join("rank-0"));
        let p = f.route("grid.dat").unwrap();
        std::fs::write(&p, b"hello").unwrap();
        let sections = f.collect().unwrap();
        assert_eq!(sections[0].name, "grid.dat");
        assert_eq!(&*sections[0].data, b"hello");
        f.clear();
        assert!(!p.exists());
        let back = f.locate("grid.dat", 3, &sections).unwrap();
        assert_eq!(std::fs::read(&back).unwrap(), b"hello");
        assert!(f
            .locate("other", 3, &sections)
            .unwrap_err()
            .to_string()
            .contains("no file named 'other'"));
        f.forget_located(4);
        assert!(!back.exists());
    }

    #[test]
    fn bad_names_and_unwritten_files_are_errors() {
        let s = Scratch::new("routed-bad");
        let mut f = RoutedFiles::new(s.0.join("rank-0"));
        for bad in ["", ".", "..", "a/b", &"x".repeat(300)] {
            assert!(f.route(bad).is_err(), "{bad}");
        }
        f.route("never-written").unwrap();
        assert!(f
            .collect()
            .unwrap_err()
            .to_string()
            .contains("never-written"));
    }
}
