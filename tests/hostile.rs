//! Bytes from the network that are not ours: a rank's listening socket gets
//! garbage, a truncated header and a handshake with a wrong job key while
//! the job is running. Each must be dropped without disturbing the job.

mod common;
use std::io::Write;
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// PIDs of the direct children of `parent`.
fn children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // The field after the ")" that closes the command name is the state,
        // then the parent PID.
        let after = &stat[stat.rfind(')').unwrap_or(0) + 1..];
        if after
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok())
            == Some(parent)
        {
            out.push(pid);
        }
    }
    out
}

/// TCP ports `pid` listens on (from its socket inodes and /proc/net/tcp).
fn listening_ports(pid: u32) -> Vec<u16> {
    let mut inodes = Vec::new();
    if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path()) {
                let l = link.to_string_lossy().into_owned();
                if let Some(i) = l.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                    inodes.push(i.to_string());
                }
            }
        }
    }
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (f.get(1)?, f.get(3)?, f.get(9)?);
            if *state != "0A" || !inodes.iter().any(|i| i == inode) {
                return None;
            }
            u16::from_str_radix(local.rsplit(':').next()?, 16).ok()
        })
        .collect()
}

fn poke(port: u16, bytes: &[u8]) {
    if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
        let _ = s.write_all(bytes);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running job of linger.c at 3 ranks (output piped), and each rank's
/// pid and listening port once all are up, by rank.
fn linger_job(extra: &[&str]) -> (std::process::Child, Vec<(u32, u16)>) {
    let exe = common::build("linger.c");
    let mut args = vec!["-n", "3"];
    args.extend(extra);
    args.push(exe.to_str().unwrap());
    let child = common::command(common::bin("mpiexec"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut ranks: Vec<(usize, u32, u16)> = Vec::new();
    while ranks.len() < 3 && start.elapsed() < Duration::from_secs(10) {
        ranks = children(child.id())
            .into_iter()
            .filter_map(|pid| {
                let rank = env_of(pid, "MPISTAGES_RANK")?.parse().ok()?;
                Some((rank, pid, *listening_ports(pid).first()?))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ranks.len(), 3, "expected 3 listening ranks: {ranks:?}");
    ranks.sort();
    (
        child,
        ranks
            .into_iter()
            .map(|(_, pid, port)| (pid, port))
            .collect(),
    )
}

/// A variable of a process's environment (readable by its own user, as the
/// job key is: the threat this file tests).
fn env_of(pid: u32, name: &str) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|&b| b == 0).find_map(|kv| {
        let kv = String::from_utf8_lossy(kv);
        kv.strip_prefix(&format!("{name}=")).map(str::to_string)
    })
}

/// A TCP hello as `src` at `generation` with `key`.
fn hello(src: u32, generation: u32, key: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; 56];
    h[0..2].copy_from_slice(&0x534Du16.to_le_bytes());
    h[2] = 1;
    h[3] = 6; // HELLO
    h[12..16].copy_from_slice(&src.to_le_bytes());
    h[20..24].copy_from_slice(&generation.to_le_bytes());
    h[28..32].copy_from_slice(&(key.len() as u32).to_le_bytes());
    h.extend_from_slice(key);
    h
}

/// Waits for the job, at most a minute: a hang fails the test (mpiexec
/// gets SIGTERM and takes its ranks down).
fn finish(mut child: std::process::Child) -> (std::process::ExitStatus, String, String) {
    let read = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = read(child.stdout.take().map(|s| Box::new(s) as _));
    let err = read(child.stderr.take().map(|s| Box::new(s) as _));
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if start.elapsed() > Duration::from_secs(60) {
            // SAFETY: a signal to the mpiexec this test started.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    let status = status.unwrap_or_else(|| panic!("the job hung\nstdout:\n{out}\nstderr:\n{err}"));
    (status, out, err)
}

#[test]
fn garbage_and_forged_handshakes_are_dropped() {
    let (child, ranks) = linger_job(&[]);
    let ports: Vec<u16> = ranks.iter().map(|r| r.1).collect();
    // A header with the right magic and version claiming to be rank 1, then
    // a wrong key of the right length.
    let forged = hello(1, 0, &[b'x'; 32]);
    let mut huge = forged[..56].to_vec();
    huge[28..32].copy_from_slice(&u32::MAX.to_le_bytes());
    for &port in &ports {
        poke(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        poke(port, &(0..=255u8).cycle().take(5000).collect::<Vec<_>>());
        poke(port, &forged[..20]);
        poke(port, &forged);
        poke(port, &huge);
        poke(port, b"");
    }
    let (status, stdout, stderr) = finish(child);
    assert!(
        status.success() && stdout.contains("OK linger"),
        "the job was disturbed: {status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

/// A process that knows the job key (it can read a rank's environment)
/// claims to be rank 1 to rank 0 and sends garbage: refused, since rank 1
/// is connected; the job is unaffected. (It used to take rank 1's place
/// and hang the job.) The ranks connect at start here: with connections
/// made at the first message, a pair that has not met yet has no
/// connection to defend, and whoever holds the key — the job's own user,
/// who could as well attach a debugger to the rank — can take its place.
#[test]
fn an_impersonated_rank_is_refused() {
    let (child, ranks) = linger_job(&["-x", "MPISTAGES_CONNECT=eager"]);
    let key = env_of(ranks[0].0, "MPISTAGES_JOB_KEY").expect("job key");
    let mut bytes = hello(1, 0, key.as_bytes());
    bytes.extend_from_slice(&[0xAB; 200]);
    poke(ranks[0].1, &bytes);
    let (status, stdout, stderr) = finish(child);
    assert!(
        status.success() && stdout.contains("OK linger"),
        "the job was disturbed: {status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("rank 0: refused a second connection claiming to be rank 1"),
        "{stderr}"
    );
}

/// Garbage after a handshake that was taken (one that claims a newer
/// process of rank 1, as a replacement's does): rank 0 reports rank 1's
/// connection broken and mpiexec ends rank 1 as failed, so the job ends
/// with the reason instead of waiting forever for rank 1's messages.
#[test]
fn garbage_after_a_valid_handshake_fails_that_rank_loudly() {
    let (child, ranks) = linger_job(&[]);
    let key = env_of(ranks[0].0, "MPISTAGES_JOB_KEY").expect("job key");
    let mut bytes = hello(1, 7, key.as_bytes());
    bytes.extend_from_slice(&[0xAB; 200]);
    poke(ranks[0].1, &bytes);
    let (status, _, stderr) = finish(child);
    assert_eq!(status.code(), Some(128 + 9), "{stderr}");
    for line in [
        "rank 0: the connection of rank 1 failed (",
        "mpiexec: rank 0 reports that its connection to rank 1 failed (",
        "rank 1 (pid",
    ] {
        assert!(stderr.contains(line), "{line}\n{stderr}");
    }
}

/// The control channel (mpiexec's Unix socket, its path in every rank's
/// environment): garbage, a truncated message, a huge length, a hello with
/// a wrong key, and one with the right key for a rank that is connected.
/// Each connection is dropped and said on stderr; the job is unaffected.
#[test]
fn hostile_control_connections_are_dropped() {
    use std::os::unix::net::UnixStream;
    let (child, ranks) = linger_job(&[]);
    let control = env_of(ranks[0].0, "MPISTAGES_CONTROL").expect("control socket");
    let key = env_of(ranks[0].0, "MPISTAGES_JOB_KEY").expect("job key");
    // postcard: variant index, then the fields; a u32 length before it.
    let framed = |body: &[u8]| {
        let mut b = (body.len() as u32).to_le_bytes().to_vec();
        b.extend_from_slice(body);
        b
    };
    let hello = |key: &[u8], rank: u8| {
        let mut body = vec![0u8, key.len() as u8];
        body.extend_from_slice(key);
        body.extend_from_slice(&[rank, 0, 4]);
        body.extend_from_slice(b"x:10");
        framed(&body)
    };
    let inputs: Vec<Vec<u8>> = vec![
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        framed(&[0xFF; 40]),
        framed(&[0u8, 32])[..5].to_vec(),
        u32::MAX.to_le_bytes().to_vec(),
        hello(&[b'y'; 32], 1),
        hello(key.as_bytes(), 1),
        framed(&[1]), // Finalizing before any hello
    ];
    for bytes in &inputs {
        let mut s = UnixStream::connect(&control).unwrap();
        let _ = std::io::Write::write_all(&mut s, bytes);
        let _ = s.shutdown(std::net::Shutdown::Write);
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // mpiexec closes it: reading ends (or fails) instead of waiting.
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut s, &mut sink);
    }
    let (status, stdout, stderr) = finish(child);
    assert!(
        status.success() && stdout.contains("OK linger"),
        "the job was disturbed: {status:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let dropped = stderr
        .matches("mpiexec: dropped a control connection")
        .count();
    assert!(dropped >= 6, "{dropped} drops said:\n{stderr}");
    assert!(stderr.contains("wrong job key"), "{stderr}");
    assert!(stderr.contains("unexpected hello from rank 1"), "{stderr}");
}

/// Open descriptors of a process.
fn fds_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// A flood of connections that never say hello: a rank keeps a bounded
/// number of them (the oldest are closed), not one descriptor per
/// connection (15,504 were seen), and the job is unaffected.
#[test]
fn a_connection_flood_holds_a_bounded_number_of_descriptors() {
    let (child, ranks) = linger_job(&[]);
    let (pid, port) = ranks[0];
    let before = fds_of(pid);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let mut held = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && held.len() < 3000 {
                if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(100)) {
                    held.push(s);
                }
            }
            held.len()
        })
    };
    let mut most = before;
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        most = most.max(fds_of(pid));
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let made = flood.join().unwrap();
    let (status, _, stderr) = finish(child);
    assert!(status.success(), "the job was disturbed: {stderr}");
    assert!(made > 300, "only {made} connections were made");
    assert!(
        most < before + 100,
        "rank 0 went from {before} to {most} descriptors for {made} silent connections"
    );
    assert!(
        stderr.contains("connections wait for their handshake"),
        "{stderr}"
    );
}
