//! A window's memory at its owner and what a request does to it: the
//! range checked against the window (or, for a dynamic window, against
//! the regions attached), data unpacked into it, packed out of it, or
//! combined with it element by element (atomically where the elements
//! allow, `atomic.rs`). Used by the agent; tested on plain vectors.

use super::atomic;
use super::wire::{Place, Request};
use crate::api::consts::{err, op};
use crate::api::datatype::Datatype;
use crate::api::error::{fail, MpiResult};
use crate::api::op::{reduce, OpDef};
use crate::api::usermem::TypedBuf;
use crate::progress::Layout;
use std::sync::Mutex;

/// The memory a window exposes at this process.
pub enum Memory {
    /// `size` bytes from address `base` (`create`, `allocate`, shared).
    Fixed { base: usize, size: usize },
    /// `MPI_Win_create_dynamic`: the regions attached, (address, length).
    Dynamic(Mutex<Vec<(usize, usize)>>),
}

pub struct Target {
    pub memory: Memory,
    pub disp_unit: usize,
    /// The window is in shared memory that origins of this host update
    /// themselves with the CPU's atomics (`atomic.rs`): the agent must
    /// update such elements the same way. Otherwise the agent alone
    /// combines (an origin only under an exclusive lock), and a plain
    /// reduction is atomic enough and faster.
    pub atomic: bool,
}

impl Target {
    /// The typed memory `at` names, checked to lie inside the window;
    /// `None` for an empty access.
    fn typed(&self, at: &Place) -> MpiResult<Option<TypedBuf>> {
        let count = usize::try_from(at.count).unwrap_or(usize::MAX);
        let (lb, len) = at.dtype.span(count.min(1 << 40));
        if count == 0 || len == 0 {
            return Ok(None);
        }
        let range = || {
            fail(
                err::RMA_RANGE,
                format!(
                    "{count} elements at displacement {} fall outside the window",
                    at.disp
                ),
            )
        };
        let addr = match &self.memory {
            Memory::Fixed { base, size } => {
                let off = (at.disp as usize).checked_mul(self.disp_unit);
                let first = off.and_then(|o| o.checked_add_signed(lb));
                match first.and_then(|f| f.checked_add(len)) {
                    Some(end) if end <= *size => base + off.expect("checked"),
                    _ => return range(),
                }
            }
            Memory::Dynamic(regions) => {
                let addr = at.disp as usize;
                let first = addr.checked_add_signed(lb);
                let inside = first.and_then(|f| Some((f, f.checked_add(len)?)));
                let regions = regions.lock().unwrap_or_else(|p| p.into_inner());
                match inside {
                    Some((f, e)) if covered(&regions, f, e) => addr,
                    _ => return range(),
                }
            }
        };
        // SAFETY: the elements' memory lies inside the window (checked
        // above), which the program gave (or we allocated) for the
        // window's lifetime; MPI's rules for RMA epochs make conflicting
        // accesses by the program itself erroneous.
        Ok(Some(unsafe {
            TypedBuf::new(addr as *mut u8, count, at.dtype.clone())
        }))
    }

    /// Does `req` (with its data) to the window; returns the reply's bytes
    /// for requests that get one. Lock, flush and stop are the agent's.
    pub fn apply(&self, req: &Request, data: &[u8]) -> MpiResult<Vec<u8>> {
        match req {
            Request::Put(at) => {
                let t = self.typed(at)?;
                check_len(t.as_ref(), data.len())?;
                if let Some(t) = t {
                    t.unpack(data);
                }
                Ok(Vec::new())
            }
            Request::Get { at, .. } => Ok(self.typed(at)?.map_or(Vec::new(), |t| t.pack())),
            Request::Accumulate { at, elem, op } => {
                self.accumulate(at, elem, *op, data)?;
                Ok(Vec::new())
            }
            Request::GetAccumulate { at, elem, op, .. } => self.accumulate(at, elem, *op, data),
            Request::CompareAndSwap { at, .. } => {
                let t = self.typed(at)?;
                let n = t.as_ref().map_or(0, TypedBuf::bytes);
                if data.len() != 2 * n {
                    return fail(err::RMA_RANGE, "compare-and-swap needs two values");
                }
                let Some(t) = t else { return Ok(Vec::new()) };
                if self.atomic {
                    // SAFETY: the window's memory stays valid (see `typed`).
                    if let Some(old) = unsafe { atomic::compare_and_swap(&t, data) } {
                        return Ok(old);
                    }
                }
                let old = t.pack();
                if old == data[n..] {
                    t.unpack(&data[..n]);
                }
                Ok(old)
            }
            Request::Flush { .. } | Request::Lock { .. } | Request::Unlock { .. } => Ok(Vec::new()),
        }
    }

    /// `target = target op data`, returning the target's bytes before.
    fn accumulate(&self, at: &Place, elem: &Datatype, o: i32, data: &[u8]) -> MpiResult<Vec<u8>> {
        let t = self.typed(at)?;
        if o != op::NO_OP {
            check_len(t.as_ref(), data.len())?;
        }
        let Some(t) = t else { return Ok(Vec::new()) };
        if let Some(runs) = self.atomic.then(|| atomic::runs(&t, elem)).flatten() {
            // SAFETY: the window's memory stays valid (see `typed`).
            return unsafe { atomic::combine(&runs, elem, o, data) };
        }
        let old = t.pack();
        if let Some(new) = combine(elem, o, &old, data)? {
            t.unpack(&new);
        }
        Ok(old)
    }
}

/// What packed target elements `old` become under operation `o` with the
/// origin's packed `data`, of elements `elem`; `None` when unchanged
/// (`MPI_NO_OP`). Also used by an origin that combines itself.
pub fn combine(elem: &Datatype, o: i32, old: &[u8], data: &[u8]) -> MpiResult<Option<Vec<u8>>> {
    match o {
        op::NO_OP => Ok(None),
        op::REPLACE => Ok(Some(data.to_vec())),
        _ => {
            if elem.size == 0 || !old.len().is_multiple_of(elem.size) || data.len() != old.len() {
                return fail(
                    err::TYPE,
                    "the target type is not made of the operation's elements",
                );
            }
            let n = old.len() / elem.size;
            let op = OpDef::Predefined(o);
            if dense(elem) {
                let mut mine = old.to_vec();
                reduce(&op, elem, 0, n, data, &mut mine);
                Ok(Some(mine))
            } else {
                let theirs = to_memory(elem, n, data);
                let mut mine = to_memory(elem, n, old);
                reduce(&op, elem, 0, n, &theirs, &mut mine);
                Ok(Some(to_packed(elem, n, &mine)))
            }
        }
    }
}

/// Whether the regions (address, length) cover `[from, to)`: an access
/// may span regions attached one after the other.
fn covered(regions: &[(usize, usize)], from: usize, to: usize) -> bool {
    let mut at = from;
    while at < to {
        match regions.iter().find(|&&(b, l)| b <= at && at < b + l) {
            Some(&(b, l)) => at = b + l,
            None => return false,
        }
    }
    true
}

fn check_len(t: Option<&TypedBuf>, got: usize) -> MpiResult<()> {
    let want = t.map_or(0, TypedBuf::bytes);
    if want != got {
        return fail(
            err::RMA_RANGE,
            format!("{got} bytes for a target of {want}"),
        );
    }
    Ok(())
}

/// Whether a predefined type's elements lie in memory as they pack (no
/// padding): then both layouts are the same bytes.
fn dense(elem: &Datatype) -> bool {
    elem.true_lb == 0 && elem.extent == elem.size as isize
}

/// `n` packed elements of a predefined type laid out as in memory (its
/// extent apart, e.g. `MPI_DOUBLE_INT`'s padding), as reductions take them.
fn to_memory(elem: &Datatype, n: usize, packed: &[u8]) -> Vec<u8> {
    let mut mem = vec![0u8; n * elem.extent as usize];
    let mut from = 0;
    for (off, len) in elem.segments(n) {
        let at = (off - elem.true_lb) as usize;
        mem[at..at + len].copy_from_slice(&packed[from..from + len]);
        from += len;
    }
    mem
}

/// The inverse of `to_memory`.
fn to_packed(elem: &Datatype, n: usize, mem: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * elem.size);
    for (off, len) in elem.segments(n) {
        let at = (off - elem.true_lb) as usize;
        out.extend_from_slice(&mem[at..at + len]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::consts::dt;
    use std::sync::Arc;

    fn ty(h: i32) -> Datatype {
        Datatype::predefined(h).unwrap()
    }

    fn over(v: &mut [u8], disp_unit: usize) -> Target {
        Target {
            memory: Memory::Fixed {
                base: v.as_mut_ptr() as usize,
                size: v.len(),
            },
            disp_unit,
            atomic: false,
        }
    }

    fn place(disp: u64, count: u64, h: i32) -> Place {
        Place {
            disp,
            count,
            dtype: Arc::new(ty(h)),
        }
    }

    fn ints(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn put_get_and_ranges_in_displacement_units() {
        let mut mem = vec![0u8; 16];
        let t = over(&mut mem, 4);
        t.apply(&Request::Put(place(1, 2, dt::INT)), &ints(&[7, 8]))
            .unwrap();
        let got = t
            .apply(
                &Request::Get {
                    at: place(0, 4, dt::INT),
                    reply: 0,
                },
                &[],
            )
            .unwrap();
        assert_eq!(got, ints(&[0, 7, 8, 0]));
        let e = t.apply(&Request::Put(place(3, 2, dt::INT)), &ints(&[1, 2]));
        assert_eq!(e.unwrap_err().class, err::RMA_RANGE);
        let e = t.apply(&Request::Put(place(u64::MAX, 1, dt::INT)), &ints(&[1]));
        assert_eq!(e.unwrap_err().class, err::RMA_RANGE);
        let e = t.apply(&Request::Put(place(0, 2, dt::INT)), &ints(&[1]));
        assert_eq!(e.unwrap_err().class, err::RMA_RANGE, "too few bytes");
        drop(t);
        assert_eq!(mem, ints(&[0, 7, 8, 0]));
    }

    /// The agent's atomic updates (a window in shared memory) give what
    /// its plain reductions give.
    #[test]
    fn atomic_and_plain_accumulates_agree() {
        let ops = [
            (op::SUM, dt::INT),
            (op::MAX, dt::LONG_LONG),
            (op::BXOR, dt::UNSIGNED),
            (op::PROD, dt::DOUBLE),
            (op::REPLACE, dt::FLOAT),
            (op::NO_OP, dt::INT),
        ];
        let mut results = Vec::new();
        for atomic in [false, true] {
            let mut mem = vec![0u64; 4];
            let bytes = mem.as_mut_ptr() as *mut u8;
            // SAFETY: `mem` outlives `t` and these 32 bytes.
            let view = unsafe { std::slice::from_raw_parts_mut(bytes, 32) };
            view.copy_from_slice(&[3u8; 32]);
            let mut t = over(view, 8);
            t.atomic = atomic;
            let mut got = Vec::new();
            for (o, h) in ops {
                let elem = ty(h);
                let n = 8 / elem.size;
                let req = Request::GetAccumulate {
                    at: place(1, n as u64, h),
                    elem,
                    op: o,
                    reply: 0,
                };
                got.push(t.apply(&req, &[5u8; 8]).unwrap());
            }
            got.push(view.to_vec());
            results.push(got);
        }
        assert_eq!(results[0], results[1]);
    }

    #[test]
    fn accumulates_combine_and_fetch_the_old_values() {
        let mut mem = ints(&[1, 2, 3]);
        let t = over(&mut mem, 1);
        let int = ty(dt::INT);
        let sum = Request::Accumulate {
            at: place(0, 3, dt::INT),
            elem: int.clone(),
            op: op::SUM,
        };
        t.apply(&sum, &ints(&[10, 20, 30])).unwrap();
        let fetch = Request::GetAccumulate {
            at: place(4, 1, dt::INT),
            elem: int.clone(),
            op: op::MAX,
            reply: 0,
        };
        assert_eq!(t.apply(&fetch, &ints(&[5])).unwrap(), ints(&[22]));
        let noop = Request::GetAccumulate {
            at: place(0, 3, dt::INT),
            elem: int,
            op: op::NO_OP,
            reply: 0,
        };
        assert_eq!(t.apply(&noop, &[]).unwrap(), ints(&[11, 22, 33]));
        let cas = Request::CompareAndSwap {
            at: place(8, 1, dt::INT),
            reply: 0,
        };
        assert_eq!(t.apply(&cas, &ints(&[99, 0])).unwrap(), ints(&[33]));
        assert_eq!(t.apply(&cas, &ints(&[99, 33])).unwrap(), ints(&[33]));
        drop(t);
        assert_eq!(mem, ints(&[11, 22, 99]));
    }

    #[test]
    fn minloc_works_on_padded_pairs() {
        // MPI_DOUBLE_INT: 12 bytes packed, 16 in memory.
        let pair = |v: f64, i: i32| {
            let mut b = v.to_ne_bytes().to_vec();
            b.extend_from_slice(&i.to_ne_bytes());
            b
        };
        let mut mem = pair(2.5, 7);
        mem.resize(16, 0);
        let t = over(&mut mem, 1);
        let acc = Request::Accumulate {
            at: place(0, 1, dt::DOUBLE_INT),
            elem: ty(dt::DOUBLE_INT),
            op: op::MINLOC,
        };
        t.apply(&acc, &pair(1.5, 3)).unwrap();
        drop(t);
        assert_eq!(&mem[..12], &pair(1.5, 3)[..]);
    }

    #[test]
    fn dynamic_windows_check_the_attached_regions() {
        let mut a = vec![0u8; 8];
        let base = a.as_mut_ptr() as usize;
        let t = Target {
            memory: Memory::Dynamic(Mutex::new(vec![(base, 8)])),
            disp_unit: 1,
            atomic: false,
        };
        t.apply(
            &Request::Put(place(base as u64 + 4, 1, dt::INT)),
            &ints(&[5]),
        )
        .unwrap();
        let e = t.apply(
            &Request::Put(place(base as u64 + 6, 1, dt::INT)),
            &ints(&[5]),
        );
        assert_eq!(e.unwrap_err().class, err::RMA_RANGE);
        drop(t);
        assert_eq!(a, ints(&[0, 5]));
    }
}
