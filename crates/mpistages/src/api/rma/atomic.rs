//! Accumulates element by element with the CPU's atomics, where the
//! target's elements are 4 or 8 bytes, dense and aligned. The agent
//! updates such elements this way, and so does an origin that maps the
//! target's window (shared memory): each element's update is one
//! compare-and-swap, so updates of one element from the agent and from
//! any number of origins are atomic with respect to each other, as MPI
//! wants of accumulates of one predefined type to one location, with no
//! lock and no round trip (issue 38: `MPI_Fetch_and_op` under a shared
//! lock was a round trip through the target's agent).
//!
//! Which way an element goes depends only on its type and its address,
//! so every process decides alike for the same element.

use super::target;
use crate::api::consts::{err, op};
use crate::api::datatype::Datatype;
use crate::api::error::{fail, MpiResult};
use crate::api::usermem::TypedBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The elements `t` names as runs of (address, elements), if every one
/// can be updated atomically: elements of `elem`, 4 or 8 bytes without
/// padding, each aligned to its size.
pub fn runs(t: &TypedBuf, elem: &Datatype) -> Option<Vec<(usize, usize)>> {
    let size = elem.size;
    if !matches!(size, 4 | 8) || elem.true_lb != 0 || elem.extent != size as isize {
        return None;
    }
    let base = t.base() as usize;
    let mut out = Vec::new();
    for (off, len) in t.dtype.segments(t.count) {
        let addr = base.checked_add_signed(off)?;
        if !addr.is_multiple_of(size) || !len.is_multiple_of(size) {
            return None;
        }
        out.push((addr, len / size));
    }
    Some(out)
}

/// `target = target o data` on the elements at `runs` (`data` packed, one
/// element per element there; empty for `MPI_NO_OP`); returns their
/// packed values before.
///
/// # Safety
/// `runs` must come from `runs()` on memory valid for reads and writes
/// while this runs (a window's, which MPI's rules leave to accumulates
/// during the epoch).
pub unsafe fn combine(
    runs: &[(usize, usize)],
    elem: &Datatype,
    o: i32,
    data: &[u8],
) -> MpiResult<Vec<u8>> {
    let size = elem.size;
    let n: usize = runs.iter().map(|r| r.1).sum();
    if o != op::NO_OP && data.len() != n * size {
        return fail(
            err::RMA_RANGE,
            format!("{} bytes for a target of {}", data.len(), n * size),
        );
    }
    let mut old = Vec::with_capacity(n * size);
    let mut i = 0;
    for &(addr, count) in runs {
        for k in 0..count {
            let at = addr + k * size;
            let theirs = data.get(i * size..(i + 1) * size).unwrap_or(&[]);
            let next = |mine: &[u8]| target::combine(elem, o, mine, theirs);
            match size {
                // SAFETY: `at` is aligned to `size` and inside memory valid
                // for the call (this function's contract).
                4 => old.extend(unsafe { update4(at, next)? }),
                // SAFETY: as above.
                _ => old.extend(unsafe { update8(at, next)? }),
            }
            i += 1;
        }
    }
    Ok(old)
}

/// `MPI_Compare_and_swap` of the element at `addr` (checked by `runs`):
/// `new` replaces it if it equals `compare`; returns its value before.
///
/// # Safety
/// As for `combine`.
pub unsafe fn compare_and_swap(addr: usize, size: usize, new: &[u8], compare: &[u8]) -> Vec<u8> {
    match size {
        4 => {
            let word = |b: &[u8]| u32::from_ne_bytes(b.try_into().expect("4 bytes"));
            // SAFETY: aligned, valid (the contract).
            let a = unsafe { AtomicU32::from_ptr(addr as *mut u32) };
            let old = match a.compare_exchange(
                word(compare),
                word(new),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(v) | Err(v) => v,
            };
            old.to_ne_bytes().to_vec()
        }
        _ => {
            let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().expect("8 bytes"));
            // SAFETY: aligned, valid (the contract).
            let a = unsafe { AtomicU64::from_ptr(addr as *mut u64) };
            let old = match a.compare_exchange(
                word(compare),
                word(new),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(v) | Err(v) => v,
            };
            old.to_ne_bytes().to_vec()
        }
    }
}

type Next<'a> = &'a dyn Fn(&[u8]) -> MpiResult<Option<Vec<u8>>>;

/// Replaces the 4-byte element at `at` by `next(it)` in one
/// compare-and-swap (again if another update came between); its bytes
/// before.
///
/// # Safety
/// `at` aligned to 4 and valid for reads and writes.
unsafe fn update4(
    at: usize,
    next: impl Fn(&[u8]) -> MpiResult<Option<Vec<u8>>>,
) -> MpiResult<[u8; 4]> {
    // SAFETY: the caller's contract.
    let a = unsafe { AtomicU32::from_ptr(at as *mut u32) };
    let next: Next = &next;
    let mut cur = a.load(Ordering::Acquire);
    loop {
        let Some(new) = next(&cur.to_ne_bytes())? else {
            return Ok(cur.to_ne_bytes());
        };
        let new = u32::from_ne_bytes(new[..4].try_into().expect("one element"));
        match a.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Ok(cur.to_ne_bytes()),
            Err(seen) => cur = seen,
        }
    }
}

/// As `update4`, for 8 bytes.
///
/// # Safety
/// `at` aligned to 8 and valid for reads and writes.
unsafe fn update8(
    at: usize,
    next: impl Fn(&[u8]) -> MpiResult<Option<Vec<u8>>>,
) -> MpiResult<[u8; 8]> {
    // SAFETY: the caller's contract.
    let a = unsafe { AtomicU64::from_ptr(at as *mut u64) };
    let next: Next = &next;
    let mut cur = a.load(Ordering::Acquire);
    loop {
        let Some(new) = next(&cur.to_ne_bytes())? else {
            return Ok(cur.to_ne_bytes());
        };
        let new = u64::from_ne_bytes(new[..8].try_into().expect("one element"));
        match a.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Ok(cur.to_ne_bytes()),
            Err(seen) => cur = seen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::consts::dt;
    use std::sync::Arc;

    fn ty(h: i32) -> Arc<Datatype> {
        Arc::new(Datatype::predefined(h).expect("predefined"))
    }

    #[test]
    fn threads_adding_at_once_lose_nothing() {
        let counters = vec![0u64; 4];
        let base = counters.as_ptr() as usize;
        let elem = ty(dt::LONG_LONG);
        std::thread::scope(|s| {
            for _ in 0..4 {
                let elem = elem.clone();
                s.spawn(move || {
                    // SAFETY: the vector outlives the scope; u64s are aligned.
                    let t = unsafe { TypedBuf::new(base as *mut u8, 4, elem.clone()) };
                    let r = runs(&t, &elem).expect("aligned 8-byte elements");
                    let one: Vec<u8> = [1i64, 2, 3, 4]
                        .iter()
                        .flat_map(|v| v.to_ne_bytes())
                        .collect();
                    for _ in 0..10_000 {
                        // SAFETY: as above.
                        unsafe { combine(&r, &elem, op::SUM, &one).unwrap() };
                    }
                });
            }
        });
        assert_eq!(counters, vec![40_000, 80_000, 120_000, 160_000]);
    }

    #[test]
    fn old_values_come_back_and_no_op_only_reads() {
        let mut v = [5i32, -7];
        let elem = ty(dt::INT);
        // SAFETY: `v` lives through the test; i32s are aligned.
        let t = unsafe { TypedBuf::new(v.as_mut_ptr() as *mut u8, 2, elem.clone()) };
        let r = runs(&t, &elem).unwrap();
        let data: Vec<u8> = [3i32, 9].iter().flat_map(|v| v.to_ne_bytes()).collect();
        // SAFETY: as above.
        let old = unsafe { combine(&r, &elem, op::MAX, &data).unwrap() };
        assert_eq!(
            old,
            [5i32, -7]
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect::<Vec<_>>()
        );
        assert_eq!(v, [5, 9]);
        // SAFETY: as above.
        let old = unsafe { combine(&r, &elem, op::NO_OP, &[]).unwrap() };
        assert_eq!(old.len(), 8);
        assert_eq!(v, [5, 9]);
        // SAFETY: as above.
        let was = unsafe { compare_and_swap(r[0].0, 4, &1i32.to_ne_bytes(), &5i32.to_ne_bytes()) };
        assert_eq!((was, v), (5i32.to_ne_bytes().to_vec(), [1, 9]));
    }

    #[test]
    fn unaligned_padded_or_odd_sized_elements_are_not_taken() {
        let v = [0u64; 3];
        let at = v.as_ptr() as usize + 4;
        // SAFETY: inside `v`; only addresses are looked at.
        let t = unsafe { TypedBuf::new(at as *mut u8, 2, ty(dt::LONG_LONG)) };
        assert!(runs(&t, &ty(dt::LONG_LONG)).is_none());
        // SAFETY: as above.
        let t = unsafe { TypedBuf::new(v.as_ptr() as *mut u8, 2, ty(dt::SHORT)) };
        assert!(runs(&t, &ty(dt::SHORT)).is_none());
        // SAFETY: as above.
        let t = unsafe { TypedBuf::new(v.as_ptr() as *mut u8, 1, ty(dt::DOUBLE_INT)) };
        assert!(runs(&t, &ty(dt::DOUBLE_INT)).is_none());
    }
}
