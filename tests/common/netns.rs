//! Separate hosts for tests: network namespaces joined by veth pairs to a
//! bridge in this (the root) namespace, addressed from 198.18.0.0/24 (the
//! benchmarking range; no other network is ever used). Each set of hosts
//! takes one /28 of that range (a "slot": the bridge `msbr<slot>` at .1 of
//! it, hosts at .2, .3, ...), so tests and test runs side by side do not
//! meet. Everything is removed when the set is dropped, also when the test
//! panics; a set whose process was killed is swept by the next one.

use std::process::Command;

/// Slots of 16 addresses in 198.18.0.0/24.
const SLOTS: u32 = 16;

pub struct Hosts {
    slot: u32,
    /// The namespaces' names: run a command on host i with
    /// `ip netns exec NAME ...` (see `exec`).
    pub names: Vec<String>,
    /// Host i's address.
    pub addrs: Vec<String>,
    /// This namespace's address on the bridge (where mpiexec listens).
    pub gateway: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn bridge(slot: u32) -> String {
    format!("msbr{slot}")
}

fn ns(slot: u32, i: usize) -> String {
    format!("mst{slot}h{i}")
}

fn addr(slot: u32, k: u32) -> String {
    format!("198.18.0.{}", slot * 16 + k)
}

/// The PID that owns a slot (in the bridge's alias), if the bridge exists.
fn owner(slot: u32) -> Option<Option<u32>> {
    let out = Command::new("ip")
        .args(["-o", "link", "show", "dev", &bridge(slot)])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    Some(
        text.split("alias mpistages-test-")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|p| p.parse().ok()),
    )
}

/// Removes a slot's hosts, their veths and (with `bridge`) its bridge.
fn remove(slot: u32, bridge_too: bool) {
    for i in 0..14 {
        // A namespace lives on while a process is in it, and its end of
        // the veth with it: the outer end goes explicitly.
        let _ = ip(&["link", "del", &format!("msv{slot}h{i}")]);
        let _ = ip(&["netns", "del", &ns(slot, i)]);
    }
    if bridge_too {
        let _ = ip(&["link", "del", &bridge(slot)]);
    }
}

impl Hosts {
    /// `n` hosts (1 to 13), or why they cannot be made here (then the
    /// caller prints SKIPPED and returns). Once this machine can make
    /// them, a step that fails panics (a test failure, not a skip).
    pub fn new(n: usize) -> Result<Hosts, String> {
        assert!((1..=13).contains(&n));
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("network namespaces need root".into());
        }
        // Slots of processes that are gone are swept.
        for slot in 0..SLOTS {
            if let Some(Some(pid)) = owner(slot) {
                if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    remove(slot, true);
                }
            }
        }
        // Taking a slot is creating its bridge: the kernel refuses a
        // second one of the same name.
        let me = std::process::id();
        let mut slot = None;
        for s in 0..SLOTS {
            match ip(&["link", "add", &bridge(s), "type", "bridge"]) {
                Ok(()) => {
                    slot = Some(s);
                    break;
                }
                Err(e) if e.contains("File exists") => continue,
                // No CAP_NET_ADMIN, no bridge support, ...
                Err(e) => return Err(e),
            }
        }
        let slot = slot.ok_or("every test slot of 198.18.0.0/24 is taken")?;
        // What a killed set of this slot may have left.
        remove(slot, false);
        let mut hosts = Hosts {
            slot,
            names: Vec::new(),
            addrs: Vec::new(),
            gateway: addr(slot, 1),
        };
        let br = bridge(slot);
        let alias = format!("mpistages-test-{me}");
        let cidr = |a: &str| format!("{a}/28");
        let must = |args: &[&str]| ip(args).unwrap_or_else(|e| panic!("making test hosts: {e}"));
        must(&["link", "set", "dev", &br, "alias", &alias]);
        must(&["addr", "add", &cidr(&hosts.gateway), "dev", &br]);
        must(&["link", "set", &br, "up"]);
        for i in 0..n {
            let name = ns(slot, i);
            let (outside, inside) = (format!("msv{slot}h{i}"), format!("msv{slot}h{i}p"));
            let a = addr(slot, 2 + i as u32);
            must(&["netns", "add", &name]);
            hosts.names.push(name.clone());
            must(&[
                "link", "add", &outside, "type", "veth", "peer", "name", &inside,
            ]);
            must(&["link", "set", &inside, "netns", &name]);
            must(&["link", "set", &outside, "master", &br]);
            must(&["link", "set", &outside, "up"]);
            must(&["-n", &name, "addr", "add", &cidr(&a), "dev", &inside]);
            must(&["-n", &name, "link", "set", &inside, "up"]);
            must(&["-n", &name, "link", "set", "lo", "up"]);
            hosts.addrs.push(a);
        }
        Ok(hosts)
    }

    /// A command run on host `i`.
    pub fn exec(&self, i: usize, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.names[i], program]);
        c
    }

    /// Cuts host `i`'s link (its veth goes down), as a failed switch port.
    pub fn cut(&self, i: usize) -> Result<(), String> {
        ip(&["link", "set", &format!("msv{}h{i}", self.slot), "down"])
    }

    /// Brings host `i`'s link back up, forgetting the neighbours that went
    /// unreachable while it was down (they would answer "no route to host"
    /// for a while).
    pub fn restore(&self, i: usize) -> Result<(), String> {
        ip(&["link", "set", &format!("msv{}h{i}", self.slot), "up"])?;
        ip(&["-n", &self.names[i], "neigh", "flush", "all"])?;
        ip(&["neigh", "flush", "dev", &bridge(self.slot)])
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        remove(self.slot, true);
    }
}
