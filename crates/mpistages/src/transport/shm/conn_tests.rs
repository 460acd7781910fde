//! A shared-memory connection between two ends in this process, over a
//! real abstract Unix socket and real memfds.

use super::*;

fn key() -> Vec<u8> {
    format!(
        "conn-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    )
    .into_bytes()
}

/// Both ends of a connection, the hello read and the rings set up.
fn pair(cap: usize) -> (ShmConn, ShmConn) {
    let k = key();
    let l = listen(&k, 1, 7).unwrap();
    let a = ShmConn::connect(&k, 1, 7, b"HELLO", cap).unwrap();
    let (sock, _) = l.accept().unwrap();
    let mut b = ShmConn::accepted(sock).unwrap();
    let mut hello = [0u8; 5];
    let mut got = 0;
    while got < 5 {
        match b.read(&mut hello[got..]) {
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(&hello, b"HELLO");
    b.established(cap).unwrap();
    (a, b)
}

fn read_some(c: &mut ShmConn, n: usize) -> io::Result<Vec<u8>> {
    let mut v = vec![0u8; n];
    let got = c.read(&mut v)?;
    v.truncate(got);
    Ok(v)
}

#[test]
fn bytes_go_both_ways_and_the_end_is_seen_after_the_last_byte() {
    let (mut a, mut b) = pair(MIN_RING);
    assert_eq!(a.write_vectored(&[IoSlice::new(b"to b")]).unwrap(), 4);
    assert_eq!(read_some(&mut b, 100).unwrap(), b"to b");
    // a has b's ring only once it looked at its socket.
    a.on_event();
    assert_eq!(b.write_vectored(&[IoSlice::new(b"to a")]).unwrap(), 4);
    assert_eq!(read_some(&mut a, 100).unwrap(), b"to a");
    assert_eq!(
        read_some(&mut a, 100).unwrap_err().kind(),
        io::ErrorKind::WouldBlock
    );
    // a writes its last words and ends: b reads them, then the end.
    a.write_vectored(&[IoSlice::new(b"bye")]).unwrap();
    drop(a);
    b.on_event();
    assert_eq!(read_some(&mut b, 100).unwrap(), b"bye");
    assert_eq!(read_some(&mut b, 100).unwrap(), b"");
}

/// A peer that ends with doorbells unread on its socket resets it
/// (`ECONNRESET` for the reader, not an end of file). Its ring still holds
/// its last bytes, written just before: they are read, and then the end —
/// never an error that drops them. (The reader may have found the ring
/// empty just before the reset, so the ring must be looked at again.)
#[test]
fn a_reset_socket_is_an_end_after_the_last_bytes_of_the_ring() {
    let (mut a, mut b) = pair(MIN_RING);
    a.on_event();
    assert_eq!(
        read_some(&mut b, 100).unwrap_err().kind(),
        io::ErrorKind::WouldBlock
    );
    // b rings a's doorbell; a never reads it, writes, and ends.
    b.ring_bell();
    a.write_vectored(&[IoSlice::new(b"last")]).unwrap();
    drop(a);
    b.on_event();
    assert_eq!(read_some(&mut b, 2).unwrap(), b"la");
    assert_eq!(read_some(&mut b, 100).unwrap(), b"st");
    assert_eq!(read_some(&mut b, 100).unwrap(), b"");
}

#[test]
fn a_sleeping_reader_gets_a_doorbell_and_a_full_ring_waits_for_room() {
    let (mut a, mut b) = pair(MIN_RING);
    assert!(b.want_data(), "nothing to read: b may sleep");
    a.write_vectored(&[IoSlice::new(b"x")]).unwrap();
    // The doorbell byte is on b's socket (what epoll would report).
    let mut pfd = libc::pollfd {
        fd: b.fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 1);
    b.on_event();
    assert_eq!(read_some(&mut b, 10).unwrap(), b"x");
    // Fill a's ring: the next write would block until b makes room.
    let big = vec![5u8; 2 * MIN_RING];
    assert_eq!(a.write_vectored(&[IoSlice::new(&big)]).unwrap(), MIN_RING);
    assert_eq!(
        a.write_vectored(&[IoSlice::new(&big)]).unwrap_err().kind(),
        io::ErrorKind::WouldBlock
    );
    assert_eq!(read_some(&mut b, 100).unwrap().len(), 100);
    // b's read rang a's doorbell.
    let mut pfd = libc::pollfd {
        fd: a.fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 1);
    assert_eq!(a.write_vectored(&[IoSlice::new(&big)]).unwrap(), 100);
}

#[test]
fn a_hello_without_a_ring_or_a_bad_ring_is_refused() {
    let k = key();
    let l = listen(&k, 2, 7).unwrap();
    // A stranger: plain bytes, no descriptor.
    let mut s = UnixStream::connect_addr(&address(&k, 2, 7).unwrap()).unwrap();
    std::io::Write::write_all(&mut s, b"HELLO").unwrap();
    let (sock, _) = l.accept().unwrap();
    let mut b = ShmConn::accepted(sock).unwrap();
    let mut buf = [0u8; 5];
    while b.read(&mut buf).is_err() {}
    assert!(b.established(MIN_RING).is_err());
    // A descriptor of the wrong size.
    let s = UnixStream::connect_addr(&address(&k, 2, 7).unwrap()).unwrap();
    let f = fdpass::memfd("bad", 12345).unwrap();
    fdpass::send_with_fd(s.as_raw_fd(), b"HELLO", f.as_raw_fd()).unwrap();
    let (sock, _) = l.accept().unwrap();
    let mut b = ShmConn::accepted(sock).unwrap();
    while b.read(&mut buf).is_err() {}
    assert!(b.established(MIN_RING).is_err());
}

#[test]
fn two_threads_move_64_mib_through_a_256_kib_ring() {
    let (mut a, mut b) = pair(DEFAULT_RING);
    const N: usize = 64 << 20;
    let byte = |i: usize| (i.wrapping_mul(2654435761) >> 9) as u8;
    std::thread::scope(|s| {
        s.spawn(move || {
            let data: Vec<u8> = (0..N).map(byte).collect();
            let mut sent = 0;
            while sent < N {
                match a.write_vectored(&[IoSlice::new(&data[sent..])]) {
                    Ok(n) => sent += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        a.on_event();
                        std::thread::yield_now()
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        });
        let mut got = 0;
        let mut buf = vec![0u8; 100_000];
        while got < N {
            match b.read(&mut buf) {
                Ok(n) => {
                    for (k, &x) in buf[..n].iter().enumerate() {
                        assert_eq!(x, byte(got + k));
                    }
                    got += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
    });
}

/// Single copy: the reader copies from the writer's memory, unless the
/// writer halted for a failure newer than the frame that referred to it
/// (its program may have freed and reused that memory since).
#[test]
fn a_copy_from_a_peer_that_halted_since_is_refused() {
    if !cma_allowed() {
        println!("SKIPPED: cross-memory attach is not allowed here");
        return;
    }
    let (a, b) = pair(MIN_RING);
    assert!(b.reads_peer, "this process can read its own memory");
    let data = *b"referred bytes";
    let addr = data.as_ptr() as u64;
    let mut got = [0u8; 14];
    b.read_peer_memory(addr, &mut got, 0).unwrap();
    assert_eq!(got, data);
    a.set_halted(2);
    let e = b.read_peer_memory(addr, &mut got, 1).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::Interrupted, "{e}");
    // Frames of the generation it resumed at refer to live memory again.
    b.read_peer_memory(addr, &mut got, 2).unwrap();
    // An address that is not mapped fails, and is not a panic.
    assert!(b.read_peer_memory(8, &mut got, 2).is_err());
}

#[test]
fn the_default_ring_shrinks_on_a_crowded_host() {
    // 8 MiB of rings per rank at most, from 256 KiB down to 64 KiB.
    let rings: Vec<usize> = [1, 2, 8, 16, 17, 27, 64, 1000]
        .iter()
        .map(|&n| default_ring(n))
        .collect();
    let k = 1 << 10;
    assert_eq!(
        rings,
        [
            256 * k,
            256 * k,
            256 * k,
            256 * k,
            256 * k,
            128 * k,
            64 * k,
            64 * k
        ]
    );
    for n in 2..100 {
        let r = default_ring(n);
        assert!(r.is_power_of_two());
        assert!(
            2 * (n - 1) * r <= RING_BUDGET || r == SMALL_RING,
            "{n}: {r}"
        );
    }
}
