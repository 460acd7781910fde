//! The simulator's message and process costs, measured on this machine:
//! one-way latency of a Unix socket and of loopback TCP (ping-pong between
//! two threads), the CPU to frame, send, read and decode one control
//! message (a stream of them between two threads), the start of a process
//! by the launcher's spawner, and how soon a killed child is seen ended.

use super::model::Costs;
use mpistages_control::proto::{self, Decoder, ToRank};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::Instant;

/// Median one-way time of `rounds` ping-pongs of one byte, µs.
fn ping_pong<S: Read + Write + Send + 'static>(mut a: S, mut b: S, rounds: usize) -> f64 {
    let echo = std::thread::spawn(move || {
        let mut x = [0u8; 1];
        for _ in 0..rounds {
            if b.read_exact(&mut x).is_err() || b.write_all(&x).is_err() {
                return;
            }
        }
    });
    let mut times = Vec::with_capacity(rounds);
    let mut x = [7u8; 1];
    for _ in 0..rounds {
        let t = Instant::now();
        if a.write_all(&x).is_err() || a.read_exact(&mut x).is_err() {
            break;
        }
        times.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    let _ = echo.join();
    median(&mut times)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// CPU per control message, µs: a thread frames and writes `n` Resume
/// notices while another reads and decodes them (the slower side's time
/// per message).
fn message_cost(n: usize) -> std::io::Result<f64> {
    let (mut a, mut b) = UnixStream::pair()?;
    let msg = ToRank::Resume {
        generation: 3,
        agreed: Some(2),
        joined: Vec::new(),
    };
    let t = Instant::now();
    let reader = std::thread::spawn(move || {
        let mut d = Decoder::default();
        let mut buf = vec![0u8; 64 << 10];
        let mut got = 0;
        while got < n {
            let k = match b.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => k,
            };
            d.push(&buf[..k]);
            while let Ok(Some(_)) = d.next_message::<ToRank>() {
                got += 1;
            }
        }
        got
    });
    for _ in 0..n {
        a.write_all(&proto::encode(&msg))?;
    }
    let got = reader.join().unwrap_or(0);
    if got < n {
        return Err(std::io::Error::other("the reader stopped early"));
    }
    Ok(t.elapsed().as_secs_f64() * 1e6 / n as f64)
}

/// Median time to start `/bin/true` with the launcher's spawner, and from
/// a SIGKILL of a sleeping child to its exit being reaped, µs.
fn process_costs(rounds: usize) -> std::io::Result<(f64, f64)> {
    use mpistages_sys::spawn::Command;
    let (mut start, mut seen) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        let c = Command::new("true").spawn()?;
        start.push(t.elapsed().as_secs_f64() * 1e6);
        mpistages_sys::process::wait_for(c.pid);
        let c = Command::new("sleep").args(["5"]).spawn()?;
        std::thread::sleep(std::time::Duration::from_millis(2));
        let t = Instant::now();
        mpistages_sys::process::signal(c.pid, libc::SIGKILL);
        mpistages_sys::process::wait_for(c.pid);
        seen.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok((median(&mut start), median(&mut seen)))
}

/// The medians of `batches` batches of a latency measurement: (least,
/// median, most) of them. A wake-up's cost depends on where the scheduler
/// puts the two threads and how deeply the other core slept: 1.3 µs in
/// one run here, 24 µs in the next.
fn batches(
    batches: usize,
    mut one: impl FnMut() -> std::io::Result<f64>,
) -> std::io::Result<(f64, f64, f64)> {
    let mut v = Vec::new();
    for _ in 0..batches {
        v.push(one()?);
    }
    let mid = median(&mut v);
    Ok((v[0], mid, v[v.len() - 1]))
}

/// Measures what can be measured here into `c`; says what it found.
pub fn measure(c: &mut Costs) -> std::io::Result<String> {
    let local = batches(5, || {
        let (a, b) = UnixStream::pair()?;
        Ok(ping_pong(a, b, 400))
    })?;
    let net = batches(5, || {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let a = TcpStream::connect(l.local_addr()?)?;
        let (b, _) = l.accept()?;
        a.set_nodelay(true)?;
        b.set_nodelay(true)?;
        Ok(ping_pong(a, b, 400))
    })?;
    c.local_us = local.1;
    c.net_us = net.1;
    let per_message = message_cost(200_000)?;
    c.send_us = per_message;
    c.recv_us = per_message;
    let (spawn, detect) = process_costs(20)?;
    c.spawn_us = spawn;
    c.detect_us = detect;
    Ok(format!(
        "a message {:.1} µs over a Unix socket ({:.1} to {:.1} over 5 batches), {:.1} µs over loopback TCP ({:.1} to {:.1}); {:.2} µs of CPU to send or take in one; a process started in {:.0} µs, its kill seen in {:.0} µs (medians)",
        local.1, local.0, local.2, net.1, net.0, net.2, per_message, spawn, detect
    ))
}
