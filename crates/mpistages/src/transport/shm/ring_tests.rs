//! The ring in one process: both sides over one allocation, in one thread
//! (wrap-around, a full ring, both doorbells, broken counters) and in two.

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
    // `r`, which outlives the rings in each test; one side writes, the
    // other reads.
    unsafe { (Ring::new(b, cap), Ring::new(b, cap)) }
}

fn write_all(r: &Ring, bytes: &[u8]) -> usize {
    r.write(&[IoSlice::new(bytes)]).unwrap().0
}

fn read_n(r: &Ring, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    let got = r.read(&mut v).unwrap().0;
    v.truncate(got);
    v
}

#[test]
fn bytes_come_out_as_they_went_in_across_the_wrap() {
    let mut region = Region::new(256);
    let (tx, rx) = pair(&mut region, 256);
    for round in 0..300u32 {
        // Sizes that do not divide the ring: writes straddle its end, in
        // several slices.
        let len = (round as usize * 37) % 250 + 1;
        let body: Vec<u8> = (0..len).map(|i| (i as u32 ^ round) as u8).collect();
        let (a, b) = body.split_at(len / 3);
        let (n, bell) = tx.write(&[IoSlice::new(a), IoSlice::new(b)]).unwrap();
        assert_eq!((n, bell), (len, false));
        assert_eq!(read_n(&rx, 1000), body, "round {round}");
        assert_eq!(read_n(&rx, 10), Vec::<u8>::new());
    }
}

#[test]
fn a_full_ring_takes_what_fits_and_the_rest_after_a_read() {
    let mut region = Region::new(64);
    let (tx, rx) = pair(&mut region, 64);
    let data: Vec<u8> = (0..100u8).collect();
    assert_eq!(write_all(&tx, &data), 64);
    assert_eq!(write_all(&tx, &data[64..]), 0);
    assert_eq!(read_n(&rx, 10), data[..10].to_vec());
    assert_eq!(write_all(&tx, &data[64..]), 10);
    assert_eq!(read_n(&rx, 1000), data[10..74].to_vec());
}

#[test]
fn doorbells_are_asked_for_only_by_a_waiting_side() {
    let mut region = Region::new(64);
    let (tx, rx) = pair(&mut region, 64);
    // The reader sleeps on an empty ring: the next write owes a doorbell.
    assert_eq!(rx.want_data(), Ok(true));
    assert_eq!(tx.write(&[IoSlice::new(b"ab")]).unwrap(), (2, true));
    assert_eq!(tx.write(&[IoSlice::new(b"c")]).unwrap(), (1, false));
    // Bytes are there: the reader must not sleep.
    assert_eq!(rx.want_data(), Ok(false));
    // The writer fills the ring and waits for room: the next read owes one.
    assert_eq!(write_all(&tx, &[7u8; 100]), 61);
    assert_eq!(tx.want_room(), Ok(true));
    let mut out = [0u8; 3];
    assert_eq!(rx.read(&mut out).unwrap(), (3, true));
    assert_eq!(&out, b"abc");
    assert_eq!(rx.read(&mut out).unwrap(), (3, false));
    // Room is there: the writer must not wait.
    assert_eq!(tx.want_room(), Ok(false));
}

#[test]
fn broken_counters_are_errors() {
    let mut region = Region::new(64);
    let base = region.base();
    let (tx, rx) = pair(&mut region, 64);
    write_all(&tx, b"0123456789");
    // SAFETY: the head counter is the region's first u64, 64-aligned; the
    // test plays a broken producer.
    let head = unsafe { &*(base as *const AtomicU64) };
    head.store(1000, Ordering::Relaxed);
    let mut out = [0u8; 8];
    assert!(rx.read(&mut out).is_err());
    assert!(rx.pending().is_err());
    // The producer counts from its own copy of head, and finds a broken
    // consumer's tail when it looks at it (for more room than it knew of).
    head.store(10, Ordering::Relaxed);
    // SAFETY: the tail counter is the u64 at TAIL, inside the region; the
    // test plays a broken consumer.
    let tail = unsafe { &*(base.add(TAIL) as *const AtomicU64) };
    tail.store(1000, Ordering::Relaxed);
    assert_eq!(tx.write(&[IoSlice::new(b"x")]), Ok((1, false)));
    assert!(tx.write(&[IoSlice::new(&[0u8; 60])]).is_err());
}

#[test]
fn two_threads_pass_thirty_megabytes_through_a_small_ring() {
    let mut region = Region::new(4096);
    let (tx, rx) = pair(&mut region, 4096);
    const N: usize = 30 << 20;
    let byte = |i: usize| (i.wrapping_mul(2654435761) >> 7) as u8;
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut sent = 0;
            while sent < N {
                // Each write continues the pattern where the last stopped.
                let want = (N - sent).min(1500);
                let part: Vec<u8> = (sent..sent + want).map(byte).collect();
                let (n, _) = tx.write(&[IoSlice::new(&part)]).unwrap();
                sent += n;
                if n == 0 {
                    std::hint::spin_loop();
                }
            }
        });
        let mut got = 0;
        let mut buf = vec![0u8; 3000];
        while got < N {
            let (n, _) = rx.read(&mut buf).unwrap();
            for (k, &b) in buf[..n].iter().enumerate() {
                assert_eq!(b, byte(got + k), "byte {}", got + k);
            }
            got += n;
            if n == 0 {
                std::hint::spin_loop();
            }
        }
    });
}

/// `peek` copies bytes ahead of the read position without taking them,
/// across the wrap, and refuses bytes not written yet; `skip` takes them
/// and never more than were written.
#[test]
fn peek_looks_ahead_and_skip_takes() {
    let cap = 64;
    let mut r = Region::new(cap);
    let (w, rd) = pair(&mut r, cap);
    assert_eq!(write_all(&w, &[9u8; 60]), 60);
    assert_eq!(read_n(&rd, 60).len(), 60);
    // The next frame wraps: 4 bytes at the end, the rest at the start.
    let bytes: Vec<u8> = (0..20).collect();
    assert_eq!(write_all(&w, &bytes), 20);
    let mut head = [0u8; 6];
    assert!(rd.peek(0, &mut head).unwrap());
    assert_eq!(head, [0, 1, 2, 3, 4, 5]);
    let mut tail = [0u8; 4];
    assert!(rd.peek(16, &mut tail).unwrap());
    assert_eq!(tail, [16, 17, 18, 19]);
    assert!(!rd.peek(17, &mut tail).unwrap(), "bytes not written yet");
    assert!(rd.skip(21).is_err(), "more than was written");
    rd.skip(6).unwrap();
    assert_eq!(read_n(&rd, 64), (6..20).collect::<Vec<u8>>());
}

#[test]
fn the_readers_remembered_head_never_hides_bytes_written_since() {
    let mut region = Region::new(256);
    let (tx, rx) = pair(&mut region, 256);
    assert!(!rx.has_bytes().unwrap());
    write_all(&tx, &[1, 2, 3, 4]);
    // Seen once: these looks need no more than was seen.
    assert!(rx.has_bytes().unwrap());
    let mut two = [0u8; 2];
    assert!(rx.peek(2, &mut two).unwrap());
    assert_eq!(two, [3, 4]);
    // Beyond what was seen: head is looked at again.
    assert!(!rx.peek(4, &mut two).unwrap());
    write_all(&tx, &[5, 6]);
    assert!(rx.peek(4, &mut two).unwrap());
    assert_eq!(two, [5, 6]);
    assert!(!rx.skip(6).unwrap());
    assert!(!rx.has_bytes().unwrap());
    write_all(&tx, &[7]);
    assert!(rx.has_bytes().unwrap());
    assert_eq!(read_n(&rx, 8), vec![7]);
    assert!(rx.skip(1).is_err());
}
