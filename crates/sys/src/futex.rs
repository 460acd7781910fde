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

/// Wakes every thread of this process sleeping in `wait_either` on
/// `bell` (a word of this process only).
pub fn ring_private(bell: &AtomicU32) {
    // SAFETY: as `wake`; the private flag matches `wait_either`'s.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            bell.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        );
    }
}

/// `struct futex_waitv` of the kernel's ABI.
#[repr(C)]
struct WaitV {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

/// `futex_waitv(2)`, the same number on every architecture of the
/// unified system call table (Linux 5.16).
const SYS_FUTEX_WAITV: libc::c_long = 449;
const FUTEX2_SIZE_U32: u32 = 0x02;

/// Sleeps while `shared` (a word other processes may change) holds
/// `val` and `bell` (a word of this process, changed with
/// `ring_private`) holds `rung`, for at most `limit`: a change of either
/// wakes it, a change before the call returns at once. Where the kernel
/// lacks `futex_waitv`, sleeps on `shared` alone, at most `fallback`
/// (the caller then looks at the bell that often). Spurious wake-ups
/// happen: the caller looks again.
pub fn wait_either(
    shared: &AtomicU32,
    val: u32,
    bell: &AtomicU32,
    rung: u32,
    limit: Duration,
    fallback: Duration,
) {
    let waiters = [
        WaitV {
            val: val as u64,
            uaddr: shared.as_ptr() as u64,
            flags: FUTEX2_SIZE_U32,
            reserved: 0,
        },
        WaitV {
            val: rung as u64,
            uaddr: bell.as_ptr() as u64,
            flags: FUTEX2_SIZE_U32 | libc::FUTEX_PRIVATE_FLAG as u32,
            reserved: 0,
        },
    ];
    // futex_waitv's timeout is absolute.
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into our local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let end = Duration::new(now.tv_sec as u64, now.tv_nsec as u32) + limit;
    let ts = libc::timespec {
        tv_sec: end.as_secs() as libc::time_t,
        tv_nsec: end.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `waiters` is an array of two live `futex_waitv` entries
    // whose addresses are of live, aligned 4-byte words (references);
    // `ts` is a live timespec. Every outcome means "look again".
    let r = unsafe {
        libc::syscall(
            SYS_FUTEX_WAITV,
            waiters.as_ptr(),
            2u32,
            0u32,
            &ts,
            libc::CLOCK_MONOTONIC,
        )
    };
    if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
        wait(shared, val, limit.min(fallback));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::Instant;

    /// A change of either word ends the sleep long before its limit; a
    /// change made before the call makes it return at once.
    #[test]
    fn either_word_wakes_the_sleeper() {
        for ring_bell in [false, true] {
            let words = Arc::new((AtomicU32::new(0), AtomicU32::new(0)));
            let w = words.clone();
            let waker = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                if ring_bell {
                    w.1.fetch_add(1, Ordering::SeqCst);
                    ring_private(&w.1);
                } else {
                    w.0.store(1, Ordering::SeqCst);
                    wake(&w.0);
                }
            });
            let t = Instant::now();
            while words.0.load(Ordering::SeqCst) == 0 && words.1.load(Ordering::SeqCst) == 0 {
                wait_either(
                    &words.0,
                    0,
                    &words.1,
                    0,
                    Duration::from_secs(20),
                    Duration::from_millis(10),
                );
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "bell {ring_bell}: slept on"
            );
            waker.join().unwrap();
            // Both changed from what the caller saw: no sleep at all.
            let t = Instant::now();
            wait_either(
                &words.0,
                7,
                &words.1,
                7,
                Duration::from_secs(20),
                Duration::from_secs(20),
            );
            assert!(t.elapsed() < Duration::from_secs(10));
        }
    }
}
