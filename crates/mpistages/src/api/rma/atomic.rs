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

use crate::api::consts::{err, op};
use crate::api::datatype::{Basic, Datatype};
use crate::api::error::{fail, MpiResult};
use crate::api::op::{reduce, OpDef};
use crate::api::usermem::TypedBuf;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

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
/// packed values before. Sums, bitwise operations, maxima and minima of
/// integers are single atomic instructions, replace a swap, no-op a load;
/// the rest a compare-and-swap per element around the reduction.
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
    let basic = elem.uniform_basic();
    let mut old = Vec::with_capacity(n * size);
    let mut i = 0;
    for &(addr, count) in runs {
        for k in 0..count {
            let at = addr + k * size;
            let theirs = data.get(i * size..(i + 1) * size).unwrap_or(&[]);
            // SAFETY: `at` is aligned to `size` (4 or 8) and inside memory
            // valid for the call (this function's contract).
            let before = unsafe { update(at, elem, basic, o, theirs) };
            old.extend_from_slice(&before[..size]);
            i += 1;
        }
    }
    Ok(old)
}

/// One element's update (see `combine`); its bytes before (the first
/// `elem.size` of the eight).
///
/// # Safety
/// `at` aligned to `elem.size` (4 or 8) and valid for reads and writes.
unsafe fn update(
    at: usize,
    elem: &Datatype,
    basic: Option<Basic>,
    o: i32,
    theirs: &[u8],
) -> [u8; 8] {
    let mut out = [0u8; 8];
    macro_rules! int_ops {
        ($atomic:ty, $t:ty) => {{
            // SAFETY: the caller's contract.
            let a = unsafe { <$atomic>::from_ptr(at as *mut $t) };
            let v = |b: &[u8]| <$t>::from_ne_bytes(b.try_into().expect("one element"));
            let before = match o {
                op::NO_OP => Some(a.load(Ordering::Acquire)),
                op::REPLACE => Some(a.swap(v(theirs), Ordering::AcqRel)),
                op::SUM => Some(a.fetch_add(v(theirs), Ordering::AcqRel)),
                op::BAND => Some(a.fetch_and(v(theirs), Ordering::AcqRel)),
                op::BOR => Some(a.fetch_or(v(theirs), Ordering::AcqRel)),
                op::BXOR => Some(a.fetch_xor(v(theirs), Ordering::AcqRel)),
                op::MAX => Some(a.fetch_max(v(theirs), Ordering::AcqRel)),
                op::MIN => Some(a.fetch_min(v(theirs), Ordering::AcqRel)),
                _ => None,
            };
            if let Some(b) = before {
                let b = b.to_ne_bytes();
                out[..b.len()].copy_from_slice(&b);
                return out;
            }
        }};
    }
    // (A pair such as MPI_2INT is made of I32s, yet its element is both.)
    match (basic, elem.size) {
        (Some(Basic::I32), 4) => int_ops!(AtomicI32, i32),
        (Some(Basic::U32), 4) => int_ops!(AtomicU32, u32),
        (Some(Basic::I64), 8) => int_ops!(AtomicI64, i64),
        (Some(Basic::U64), 8) => int_ops!(AtomicU64, u64),
        _ => {}
    }
    // Any other element of 4 or 8 bytes: the reduction between a load and
    // a compare-and-swap, again if another update came between. The
    // element's bytes are the first `size` of eight.
    let size = elem.size;
    let w4 = |b: &[u8; 8]| u32::from_ne_bytes(b[..4].try_into().expect("4 bytes"));
    let w8 = |b: &[u8; 8]| u64::from_ne_bytes(*b);
    let bytes4 = |v: u32| {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&v.to_ne_bytes());
        b
    };
    // SAFETY: the caller's contract (AtomicU32 or AtomicU64 by `size`).
    let (a4, a8) = unsafe {
        (
            AtomicU32::from_ptr(at as *mut u32),
            AtomicU64::from_ptr(at as *mut u64),
        )
    };
    let mut cur = match size {
        4 => bytes4(a4.load(Ordering::Acquire)),
        _ => a8.load(Ordering::Acquire).to_ne_bytes(),
    };
    loop {
        if o == op::NO_OP {
            return cur;
        }
        let mut new = cur;
        if o == op::REPLACE {
            new[..size].copy_from_slice(theirs);
        } else {
            reduce(&OpDef::Predefined(o), elem, 0, 1, theirs, &mut new[..size]);
        }
        let swapped = match size {
            4 => a4
                .compare_exchange_weak(w4(&cur), w4(&new), Ordering::AcqRel, Ordering::Acquire)
                .map(|_| ())
                .map_err(bytes4),
            _ => a8
                .compare_exchange_weak(w8(&cur), w8(&new), Ordering::AcqRel, Ordering::Acquire)
                .map(|_| ())
                .map_err(u64::to_ne_bytes),
        };
        match swapped {
            Ok(_) => return cur,
            Err(seen) => cur = seen,
        }
    }
}

/// `MPI_Compare_and_swap` on the one element `t` names, when it can be
/// updated atomically (see `runs`): `data` is the new value, then the one
/// to compare with; the element's value before, or `None` when it must go
/// another way.
///
/// # Safety
/// As for `combine`: `t`'s memory valid for reads and writes.
pub unsafe fn compare_and_swap(t: &TypedBuf, data: &[u8]) -> Option<Vec<u8>> {
    let &[(addr, 1)] = runs(t, &t.dtype)?.as_slice() else {
        return None;
    };
    let n = t.dtype.size;
    let (new, compare) = (data.get(..n)?, data.get(n..2 * n)?);
    let (s, f) = (Ordering::AcqRel, Ordering::Acquire);
    macro_rules! swap {
        ($atomic:ty, $t:ty) => {{
            let v = |b: &[u8]| <$t>::from_ne_bytes(b.try_into().expect("one element"));
            // SAFETY: `runs` checked the alignment; valid (the contract).
            let a = unsafe { <$atomic>::from_ptr(addr as *mut $t) };
            let (Ok(old) | Err(old)) = a.compare_exchange(v(compare), v(new), s, f);
            old.to_ne_bytes().to_vec()
        }};
    }
    Some(match n {
        4 => swap!(AtomicU32, u32),
        _ => swap!(AtomicU64, u64),
    })
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
    fn doubles_and_pairs_go_by_compare_and_swap() {
        let sums = [0f64; 2];
        let base = sums.as_ptr() as usize;
        let elem = ty(dt::DOUBLE);
        std::thread::scope(|s| {
            for _ in 0..4 {
                let elem = elem.clone();
                s.spawn(move || {
                    // SAFETY: the array outlives the scope; f64s are aligned.
                    let t = unsafe { TypedBuf::new(base as *mut u8, 2, elem.clone()) };
                    let r = runs(&t, &elem).expect("aligned 8-byte elements");
                    let add: Vec<u8> = [0.5f64, 2.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
                    for _ in 0..5_000 {
                        // SAFETY: as above.
                        unsafe { combine(&r, &elem, op::SUM, &add).unwrap() };
                    }
                });
            }
        });
        assert_eq!(sums, [10_000.0, 40_000.0]);
        // MPI_2INT under MINLOC: value and index swap together.
        #[repr(align(8))]
        struct Pair([i32; 2]);
        let mut pair = Pair([7, 3]);
        let elem = ty(dt::TWO_INT);
        // SAFETY: `pair` lives through the test, aligned to 8.
        let t = unsafe { TypedBuf::new(pair.0.as_mut_ptr() as *mut u8, 1, elem.clone()) };
        let r = runs(&t, &elem).expect("an aligned 8-byte pair");
        let theirs: Vec<u8> = [5i32, 9].iter().flat_map(|v| v.to_ne_bytes()).collect();
        // SAFETY: as above.
        let old = unsafe { combine(&r, &elem, op::MINLOC, &theirs).unwrap() };
        assert_eq!(
            old,
            [7i32, 3]
                .iter()
                .flat_map(|v| v.to_ne_bytes())
                .collect::<Vec<_>>()
        );
        assert_eq!(pair.0, [5, 9]);
        // ... and under REPLACE (MPICH's acc_ordering), and NO_OP.
        let theirs: Vec<u8> = [1i32, 2].iter().flat_map(|v| v.to_ne_bytes()).collect();
        // SAFETY: as above.
        unsafe { combine(&r, &elem, op::REPLACE, &theirs).unwrap() };
        assert_eq!(pair.0, [1, 2]);
        // SAFETY: as above.
        let old = unsafe { combine(&r, &elem, op::NO_OP, &[]).unwrap() };
        assert_eq!(old.len(), 8);
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
        let swap: Vec<u8> = [1i32, 5].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let one = t.slice(0, 1);
        // SAFETY: as above.
        let was = unsafe { compare_and_swap(&one, &swap) }.unwrap();
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
