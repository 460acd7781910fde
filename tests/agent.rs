//! The node agent of another host (`mpistages-agent`), driven as mpiexec
//! drives it: over a real TCP connection, with real processes and
//! signals. It starts what it is asked, forwards output before it reports
//! the end, signals, and ends its processes when mpiexec goes.

mod common;
use common::bin;
use mpistages_control::agent::{Ended, FromAgent, Start, ToAgent};
use mpistages_control::proto::{self, encode};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

const KEY: &str = "0123456789abcdef";

fn sh(id: u64, script: &str) -> ToAgent {
    ToAgent::Start(Start {
        id,
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        env: vec![("AGENT_TEST".into(), "yes".into())],
        wdir: Some("/".into()),
        cpus: Vec::new(),
        stdin: false,
        rank: 0,
    })
}

/// Messages from the agent until `done` says so (skipping heartbeats).
fn until(c: &mut TcpStream, done: impl Fn(&FromAgent) -> bool) -> Vec<FromAgent> {
    let mut got = Vec::new();
    loop {
        let m: FromAgent = proto::recv(c).expect("the agent's messages");
        if m == FromAgent::Alive {
            continue;
        }
        let stop = done(&m);
        got.push(m);
        if stop {
            return got;
        }
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// An agent of host "h0" connected to this test as to its mpiexec.
fn start_agent() -> (std::process::Child, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let mut agent = common::command(bin("mpistages-agent"))
        .args(["--connect", &addr, "--host", "h0"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(agent.stdin.take().unwrap(), "{KEY}").unwrap();
    let (c, _) = l.accept().unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    (agent, c)
}

#[test]
fn the_agent_starts_forwards_signals_and_ends_with_mpiexec() {
    let (mut agent, mut c) = start_agent();
    let hello: FromAgent = proto::recv(&mut c).unwrap();
    assert_eq!(
        hello,
        FromAgent::Hello {
            key: KEY.as_bytes().to_vec(),
            host: "h0".into()
        }
    );

    // Output first, then the end with its status.
    c.write_all(&encode(&sh(
        1,
        "echo out $AGENT_TEST $(pwd); echo err >&2; exit 7",
    )))
    .unwrap();
    let got = until(&mut c, |m| matches!(m, FromAgent::Ended { .. }));
    assert!(
        matches!(got[0], FromAgent::Started { id: 1, .. }),
        "{got:?}"
    );
    let out = |stderr: bool| {
        got.iter()
            .filter_map(|m| match m {
                FromAgent::Output {
                    id: 1,
                    stderr: e,
                    line,
                } if *e == stderr => Some(String::from_utf8_lossy(line).into_owned()),
                _ => None,
            })
            .collect::<String>()
    };
    assert_eq!(out(false), "out yes /\n");
    assert_eq!(out(true), "err\n");
    assert_eq!(
        got.last(),
        Some(&FromAgent::Ended {
            id: 1,
            how: Ended::Code(7)
        })
    );

    // A program that cannot start is reported, not fatal.
    c.write_all(&encode(&ToAgent::Start(Start {
        id: 2,
        program: "/nonexistent/program".into(),
        args: vec![],
        env: vec![],
        wdir: None,
        cpus: Vec::new(),
        stdin: false,
        rank: 0,
    })))
    .unwrap();
    let got = until(&mut c, |m| matches!(m, FromAgent::NotStarted { .. }));
    assert!(
        matches!(got.last(), Some(FromAgent::NotStarted { id: 2, why }) if why.contains("/nonexistent/program")),
        "{got:?}"
    );

    // A signal reaches the process.
    c.write_all(&encode(&sh(3, "sleep 30"))).unwrap();
    let got = until(&mut c, |m| matches!(m, FromAgent::Started { .. }));
    assert!(matches!(got.last(), Some(FromAgent::Started { id: 3, .. })));
    c.write_all(&encode(&ToAgent::Signal { id: 3, signal: 9 }))
        .unwrap();
    let got = until(&mut c, |m| matches!(m, FromAgent::Ended { .. }));
    assert_eq!(
        got.last(),
        Some(&FromAgent::Ended {
            id: 3,
            how: Ended::Signal(9)
        })
    );

    // mpiexec goes: the agent ends what it started, and itself.
    c.write_all(&encode(&sh(4, "sleep 60"))).unwrap();
    let got = until(&mut c, |m| matches!(m, FromAgent::Started { .. }));
    let Some(FromAgent::Started { pid, .. }) = got.last().cloned() else {
        panic!("{got:?}")
    };
    assert!(alive(pid));
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = agent.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = agent.kill();
            panic!("the agent outlived mpiexec's connection");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(pid), "process {pid} outlived its agent");
}

/// mpiexec busy (it reads nothing for a second) while a process writes
/// far more than a socket buffer holds: every line and then the end still
/// arrive (the agent's link is non-blocking; a plain write failed on the
/// full buffer, dropped lines and lost the end, and a job of 1024 ranks
/// waited forever for it).
#[test]
fn a_slow_mpiexec_loses_no_line_and_no_end() {
    let (mut agent, mut c) = start_agent();
    let _hello: FromAgent = proto::recv(&mut c).unwrap();
    // 200,000 lines of 100 bytes: 20 MB, more than the socket buffers on
    // both sides hold.
    c.write_all(&encode(&sh(1, "seq -f '%099.0f' 1 200000; exit 3")))
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let got = until(&mut c, |m| matches!(m, FromAgent::Ended { .. }));
    let lines = got
        .iter()
        .filter(|m| matches!(m, FromAgent::Output { id: 1, .. }))
        .count();
    assert_eq!(lines, 200000);
    assert_eq!(
        got.last(),
        Some(&FromAgent::Ended {
            id: 1,
            how: Ended::Code(3)
        })
    );
    c.write_all(&encode(&ToAgent::Shutdown { grace_ms: 100 }))
        .unwrap();
    let _ = agent.wait();
}
