//! Cross-memory attach: copying straight from or into another process's
//! memory (`process_vm_readv` / `_writev`), one copy instead of two
//! through shared memory.
//! The kernel allows it only where `ptrace` would be (same user, and the
//! Yama policy); callers find out by trying (`probe`), never assume.

use super::cvt_size;
use std::io;

/// Copies `out.len()` bytes from address `remote` of process `pid` (as this
/// process's PID namespace names it) into `out`; returns how many were
/// copied (fewer only if the remote range ends in unmapped memory).
pub fn read_from(pid: i32, remote: u64, out: &mut [u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: out.as_mut_ptr() as *mut libc::c_void,
        iov_len: out.len(),
    };
    let remote = libc::iovec {
        iov_base: remote as *mut libc::c_void,
        iov_len: out.len(),
    };
    // SAFETY: `local` describes `out`, writable for its length during the
    // call; the remote iovec is only an address in the other process,
    // which the kernel checks (EFAULT) and never dereferences here.
    cvt_size(unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) })
}

/// The most iovecs one call takes (`IOV_MAX`).
const IOV_MAX: usize = 1024;

/// Copies between `local` (contiguous, in this process) and the runs
/// `remote` (address, length) of process `pid`, in order: into the runs
/// when `write`, out of them otherwise. `local.len()` must be the runs'
/// total length. A short copy (a run ending in unmapped memory) is an
/// error: nothing says which bytes arrived.
///
/// # Safety
/// `local` must be valid for writes of `len` bytes when `!write`, for
/// reads when `write`, during the call.
unsafe fn transfer(
    pid: i32,
    remote: &[(u64, usize)],
    local: *mut u8,
    len: usize,
    write: bool,
) -> io::Result<()> {
    let total: usize = remote.iter().map(|r| r.1).sum();
    if total != len {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{len} local bytes for {total} remote ones"),
        ));
    }
    let mut done = 0;
    for chunk in remote.chunks(IOV_MAX) {
        let iov: Vec<libc::iovec> = chunk
            .iter()
            .map(|&(addr, n)| libc::iovec {
                iov_base: addr as *mut libc::c_void,
                iov_len: n,
            })
            .collect();
        let want: usize = chunk.iter().map(|r| r.1).sum();
        let here = libc::iovec {
            iov_base: local.wrapping_add(done) as *mut libc::c_void,
            iov_len: want,
        };
        // SAFETY: `here` lies inside `local` (the chunks' lengths add up
        // to `len`), valid for the direction by the caller's promise; the
        // remote iovecs are only addresses in the other process, which the
        // kernel checks (EFAULT) and never dereferences here.
        let n = cvt_size(unsafe {
            if write {
                libc::process_vm_writev(pid, &here, 1, iov.as_ptr(), iov.len() as libc::c_ulong, 0)
            } else {
                libc::process_vm_readv(pid, &here, 1, iov.as_ptr(), iov.len() as libc::c_ulong, 0)
            }
        })?;
        if n != want {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{n} of {want} bytes copied"),
            ));
        }
        done += want;
    }
    Ok(())
}

/// Writes `data` into the runs `remote` of process `pid` (see `transfer`).
pub fn write_runs(pid: i32, remote: &[(u64, usize)], data: &[u8]) -> io::Result<()> {
    // SAFETY: `data` is readable for its length during the call, and a
    // write only reads the local side.
    unsafe { transfer(pid, remote, data.as_ptr() as *mut u8, data.len(), true) }
}

/// Reads the runs `remote` of process `pid` into `out` (see `transfer`).
pub fn read_runs(pid: i32, remote: &[(u64, usize)], out: &mut [u8]) -> io::Result<()> {
    // SAFETY: `out` is writable for its length during the call.
    unsafe { transfer(pid, remote, out.as_mut_ptr(), out.len(), false) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_memory_and_refuses_bad_addresses() {
        let src = *b"cross-memory";
        let mut out = [0u8; 12];
        let me = std::process::id() as i32;
        let n = read_from(me, src.as_ptr() as u64, &mut out).unwrap();
        assert_eq!((n, &out), (12, &src));
        assert!(read_from(me, 8, &mut out).is_err());
    }

    #[test]
    fn writes_and_reads_runs_and_refuses_short_or_bad_ones() {
        let mut target = [0u8; 16];
        let at = target.as_mut_ptr() as u64;
        let me = std::process::id() as i32;
        let runs = [(at + 1, 3), (at + 8, 2)];
        write_runs(me, &runs, b"abcde").unwrap();
        assert_eq!(&target[..10], b"\0abc\0\0\0\0de");
        let mut back = [0u8; 5];
        read_runs(me, &runs, &mut back).unwrap();
        assert_eq!(&back, b"abcde");
        assert!(write_runs(me, &runs, b"abc").is_err());
        assert!(read_runs(me, &[(8, 5)], &mut back).is_err());
    }
}
