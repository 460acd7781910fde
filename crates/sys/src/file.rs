//! Files: storage allocation (`MPI_File_preallocate`).

use std::io;
use std::os::fd::AsRawFd;

/// Allocates storage for the first `len` bytes of `f` (`posix_fallocate`):
/// later writes there cannot fail for want of space.
pub fn allocate(f: &std::fs::File, len: u64) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let len =
        libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: the descriptor is open for the borrow of `f`; the call reads
    // no memory of ours.
    let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, len) };
    match rc {
        0 => Ok(()),
        // File systems without the call: the file was already extended to
        // `len` by the caller, which is all they can offer.
        libc::EOPNOTSUPP | libc::EINVAL => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Creates a new file only its owner can read or write (0600, whatever the
/// umask): checkpoints are a rank's whole protected state, and other users
/// of the node must not read them.
pub fn create_private(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    // The mode above is masked by the umask; nothing may widen it, but a
    // umask that takes the owner's bits would leave a file we cannot use.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(f)
}

/// Writes `bytes` to a new private file at `path` (see `create_private`;
/// an existing file is replaced).
pub fn write_private(path: &std::path::Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    create_private(path)?.write_all(bytes)
}

/// Creates `dir` and any missing parents; `dir` itself (new or not) ends
/// up 0700, whatever the umask. Parents are created as usual: they may be
/// a root shared by jobs of several users (e.g. /dev/shm/mpistages).
pub fn create_private_dir(dir: &std::path::Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &std::path::Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn private_files_and_dirs_whatever_the_umask() {
        // SAFETY: umask takes no pointers; this test restores it.
        let old = unsafe { libc::umask(0) };
        let base = std::env::temp_dir().join(format!("sys-private-{}", std::process::id()));
        let dir = base.join("a").join("b");
        let r = (|| -> io::Result<()> {
            create_private_dir(&dir)?;
            create_private_dir(&dir)?;
            write_private(&dir.join("f"), b"x")?;
            write_private(&dir.join("f"), b"yz")?;
            Ok(())
        })();
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        r.unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("f")), 0o600);
        assert_eq!(std::fs::read(dir.join("f")).unwrap(), b"yz");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
