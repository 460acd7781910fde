//! Hosts as network namespaces (tests/common/netns.rs), the ground the
//! multi-host tests stand on: each host reaches this namespace over its
//! own link, a cut link stops that, and nothing is left afterwards.

mod common;
use common::netns::Hosts;
use std::io::Read;
use std::net::TcpListener;
use std::time::Duration;

/// Host `i` opens a TCP connection to `addr:port` and writes its name
/// (bash's /dev/tcp, bounded by `timeout`). True if it got through.
fn say_hello(h: &Hosts, i: usize, addr: &str, port: u16) -> bool {
    h.exec(i, "timeout")
        .args([
            "2",
            "bash",
            "-c",
            &format!("echo {} > /dev/tcp/{addr}/{port}", h.names[i]),
        ])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn hosts_reach_this_namespace_until_their_link_is_cut() {
    let h = match Hosts::new(2) {
        Ok(h) => h,
        Err(why) => {
            common::skipped(&why);
            return;
        }
    };
    let names = h.names.clone();
    let listener = TcpListener::bind((h.gateway.as_str(), 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    for (i, name) in names.iter().enumerate() {
        assert!(say_hello(&h, i, &h.gateway, port), "host {i}");
        let (mut s, from) = listener.accept().unwrap();
        assert_eq!(from.ip().to_string(), h.addrs[i], "host {i}'s own address");
        let mut got = String::new();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.read_to_string(&mut got).unwrap();
        assert_eq!(got.trim(), name);
    }
    h.cut(1).unwrap();
    assert!(
        !say_hello(&h, 1, &h.gateway, port),
        "a cut link carried a connection"
    );
    assert!(
        say_hello(&h, 0, &h.gateway, port),
        "host 0 lost its link too"
    );
    drop(h);
    let left = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let left = String::from_utf8_lossy(&left.stdout);
    for n in &names {
        assert!(!left.contains(n.as_str()), "{n} left: {left}");
    }
}
