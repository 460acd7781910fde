//! Test helpers shared by the checkpoint modules.

use std::path::PathBuf;

/// A scratch directory path under the system temp dir, unique to this
/// process and tag; whatever is there is removed now and when the value is
/// dropped — when the test ends, passed or failed.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("mpistages-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
