//! Cross-memory attach: copying straight from another process's memory
//! (`process_vm_readv`), one copy instead of two through shared memory.
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
}
