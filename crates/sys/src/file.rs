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
