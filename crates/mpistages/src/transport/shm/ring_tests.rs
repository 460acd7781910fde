//! The ring in one process: both sides over one allocation, in one thread
//! (wrap-around, a full ring, broken counters, the doorbell) and in two.

use super::*;

/// A zeroed, 64-aligned region for a ring of `cap` bytes.
struct Region {
    mem: Vec<u64>,
}

impl Region {
    fn new(cap: usize) -> Region {
        // A Vec<u64> is 8-aligned; over-allocate and align by hand.
        Region {
            mem: vec![0u64; region_len(cap) / 8 + 8],
        }
    }
    fn base(&mut self) -> *mut u8 {
        let p = self.mem.as_mut_ptr() as usize;
        ((p + 63) & !63) as *mut u8
    }
}

fn pair(r: &mut Region, cap: usize) -> (Ring, Ring) {
    let b = r.base();
    // SAFETY: `b` is 64-aligned with region_len(cap) bytes after it in
    // `r`, which outlives the rings in each test; one side pushes, the
    // other pops.
    unsafe { (Ring::new(b, cap), Ring::new(b, cap)) }
}

fn pop(r: &Ring) -> Option<Vec<u8>> {
    let n = r.peek().unwrap()?;
    let mut v = vec![0u8; n];
    r.pop_into(&mut v);
    Some(v)
}

#[test]
fn records_come_out_as_they_went_in_across_the_wrap() {
    let mut region = Region::new(256);
    let (tx, rx) = pair(&mut region, 256);
    // Sizes that do not divide the ring: records straddle its end.
    for round in 0..200u32 {
        let len = (round as usize * 7) % tx.max_record();
        let body: Vec<u8> = (0..len).map(|i| (i as u32 ^ round) as u8).collect();
        let (a, b) = body.split_at(len / 3);
        assert_eq!(tx.push(&[a, b]), Some(false));
        assert_eq!(pop(&rx).unwrap(), body, "round {round}");
        assert_eq!(pop(&rx), None);
    }
}

#[test]
fn a_full_ring_refuses_until_the_reader_frees_room() {
    let mut region = Region::new(256);
    let (tx, rx) = pair(&mut region, 256);
    let rec = [9u8; 56]; // 64 bytes with the prefix: four fill the ring
    for _ in 0..4 {
        assert!(tx.push(&[&rec]).is_some());
    }
    assert_eq!(tx.push(&[&[1u8]]), None);
    assert_eq!(pop(&rx).unwrap(), rec.to_vec());
    assert!(tx.push(&[&[1u8]]).is_some());
    for _ in 0..3 {
        assert_eq!(pop(&rx).unwrap(), rec.to_vec());
    }
    assert_eq!(pop(&rx).unwrap(), vec![1u8]);
}

#[test]
fn the_doorbell_is_asked_for_only_by_a_sleeping_reader() {
    let mut region = Region::new(256);
    let (tx, rx) = pair(&mut region, 256);
    assert!(rx.arm(), "an empty ring lets the reader sleep");
    assert_eq!(tx.push(&[b"a"]), Some(true), "the sleeper must be woken");
    assert_eq!(tx.push(&[b"b"]), Some(false), "once is enough");
    assert!(!rx.arm(), "records are there: no sleeping");
    assert_eq!(tx.push(&[b"c"]), Some(false));
    rx.disarm();
    for want in [b"a", b"b", b"c"] {
        assert_eq!(pop(&rx).unwrap(), want.to_vec());
    }
}

#[test]
fn broken_counters_and_lengths_are_errors() {
    let mut region = Region::new(256);
    let base = region.base();
    let (tx, rx) = pair(&mut region, 256);
    tx.push(&[&[1u8; 10]]).unwrap();
    // SAFETY: the head counter is the region's first u64, 64-aligned; the
    // test plays a broken producer.
    let head = unsafe { &*(base as *const AtomicU64) };
    let good = head.load(Ordering::Relaxed);
    for bad in [good + 1, good + 1000, 4] {
        head.store(bad, Ordering::Relaxed);
        assert!(rx.peek().is_err(), "head {bad}");
    }
    head.store(good, Ordering::Relaxed);
    // A length larger than what was published.
    // SAFETY: the first record's prefix is at the start of the data area.
    unsafe { *base.add(DATA) = 200 };
    assert!(rx.peek().is_err());
}

#[test]
fn two_threads_pass_a_million_numbered_records() {
    let mut region = Region::new(4096);
    let (tx, rx) = pair(&mut region, 4096);
    const N: u64 = 1_000_000;
    std::thread::scope(|s| {
        s.spawn(move || {
            for i in 0..N {
                let len = (i % 37) as usize;
                let body = vec![i as u8; len];
                while tx.push(&[&i.to_le_bytes(), &body]).is_none() {
                    std::hint::spin_loop();
                }
            }
        });
        let mut next = 0u64;
        while next < N {
            match rx.peek().unwrap() {
                None => std::hint::spin_loop(),
                Some(n) => {
                    let mut v = vec![0u8; n];
                    rx.pop_into(&mut v);
                    let i = u64::from_le_bytes(v[..8].try_into().unwrap());
                    assert_eq!(i, next);
                    assert_eq!(n, 8 + (i % 37) as usize);
                    assert!(v[8..].iter().all(|&b| b == i as u8));
                    next += 1;
                }
            }
        }
    });
}
