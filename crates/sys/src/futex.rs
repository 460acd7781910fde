//! Sleeping on a 32-bit word of memory shared between processes until
//! another process changes it (`futex(2)` without the private flag: the
//! word may lie in a mapping several processes share).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `word` holds `val`, for at most `limit`. Returns at once
/// when the word holds something else; spurious wake-ups happen, so the
/// caller looks at the word again.
pub fn wait(word: &AtomicU32, val: u32, limit: Duration) {
    let ts = libc::timespec {
        tv_sec: limit.as_secs() as libc::time_t,
        tv_nsec: limit.subsec_nanos() as libc::c_long,
    };
    // SAFETY: the address is of a live, aligned 4-byte word (a reference);
    // the timeout is a live timespec. EAGAIN, EINTR and ETIMEDOUT all mean
    // "look again", which every caller does.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, val, &ts);
    }
}

/// Wakes every process sleeping in `wait` on `word`.
pub fn wake(word: &AtomicU32) {
    // SAFETY: the address is of a live, aligned 4-byte word; waking
    // nobody is harmless.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}
