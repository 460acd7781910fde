//! Bytes from the network that are not ours: a rank's listening socket gets
//! garbage, a truncated header and a handshake with a wrong job key while
//! the job is running. Each must be dropped without disturbing the job.

mod common;
use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};
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

#[test]
fn garbage_and_forged_handshakes_are_dropped() {
    let exe = common::build("linger.c");
    let child = Command::new(common::bin("mpiexec"))
        .args(["-n", "3", exe.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Find the ranks' listening ports once they are up.
    let start = Instant::now();
    let mut ports = Vec::new();
    while ports.len() < 3 && start.elapsed() < Duration::from_secs(10) {
        ports = children(child.id())
            .into_iter()
            .flat_map(listening_ports)
            .collect();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        ports.len(),
        3,
        "expected one listening socket per rank, found {ports:?}"
    );
    // A header with the right magic and version claiming to be rank 1, then
    // a wrong key of the right length.
    let mut hello = vec![0u8; 56];
    hello[0..2].copy_from_slice(&0x534Du16.to_le_bytes());
    hello[2] = 1;
    hello[3] = 6; // HELLO
    hello[12..16].copy_from_slice(&1u32.to_le_bytes());
    hello[28..32].copy_from_slice(&32u32.to_le_bytes());
    let mut forged = hello.clone();
    forged.extend_from_slice(&[b'x'; 32]);
    let mut huge = hello.clone();
    huge[28..32].copy_from_slice(&u32::MAX.to_le_bytes());
    for &port in &ports {
        poke(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        poke(port, &(0..=255u8).cycle().take(5000).collect::<Vec<_>>());
        poke(port, &hello[..20]);
        poke(port, &forged);
        poke(port, &huge);
        poke(port, b"");
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("OK linger"),
        "the job was disturbed: {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
