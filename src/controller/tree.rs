//! The control tree over the agents when hosts are more than its radix
//! (`MPISTAGES_TREE_RADIX`, the shape of `mpistages_control::tree`): which
//! agent each connects to, starting the agents below one once it listens
//! for them, what agents say of those below them (`crate::subtree` is the
//! agents' side), and a lost host taking every host below it along.

use super::remote::Remotes;
use super::*;
use mpistages_control::agent::FromAgent;

/// The control tree's radix (`MPISTAGES_TREE_RADIX`, default 32): up to
/// that many agents connect to mpiexec, the others to an agent above them
/// (`mpistages_control::tree`). `Err` when it is not a number ≥ 2.
pub(super) fn tree_radix() -> Result<usize, String> {
    match std::env::var("MPISTAGES_TREE_RADIX") {
        Err(_) => Ok(32),
        Ok(v) => match v.parse::<usize>() {
            Ok(r) if r >= 2 => Ok(r),
            _ => Err(format!(
                "MPISTAGES_TREE_RADIX={v}: the tree's radix must be a number of at least 2"
            )),
        },
    }
}

impl Remotes {
    /// Starts host `h`'s agent, connecting to `connect` (mpiexec's or its
    /// parent agent's listener): through the launcher, or directly on this
    /// machine.
    pub(super) fn launch(&mut self, h: usize, connect: &str) -> std::io::Result<()> {
        let has_children = self.hosts.iter().flatten().any(|x| x.parent == Some(h));
        let name = self.hosts[h]
            .as_ref()
            .expect("a host with an agent")
            .name
            .clone();
        let mut cmd = if cli::is_this_host(&name) {
            std::process::Command::new(&self.agent_exe)
        } else {
            // The command line makes sure the launcher has a command.
            let mut c = std::process::Command::new(&self.launcher[0]);
            c.args(&self.launcher[1..]).arg(&name).arg(&self.agent_exe);
            c
        };
        cmd.args(["--connect", connect, "--host", &name])
            .stdin(std::process::Stdio::piped());
        if self.relaying {
            cmd.arg("--relay");
        }
        if has_children {
            cmd.args(["--children", "--silence-ms", &self.silence_ms.to_string()]);
        }
        let mut child = cmd.spawn().map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot start the agent of host '{name}': {e}"),
            )
        })?;
        // The key goes on stdin: a command line is visible to everyone.
        if let Some(mut stdin) = child.stdin.take() {
            let _ = writeln!(stdin, "{}", self.key);
        }
        let x = self.hosts[h].as_mut().expect("a host with an agent");
        x.pid = child.id() as i32;
        x.launched = true;
        x.heard = Instant::now();
        Ok(())
    }

    /// Whether host `g` is host `h` or below it in the tree.
    pub(super) fn below(&self, h: usize, g: usize) -> bool {
        let mut at = Some(g);
        while let Some(x) = at {
            if x == h {
                return true;
            }
            at = self
                .hosts
                .get(x)
                .and_then(Option::as_ref)
                .and_then(|r| r.parent);
        }
        false
    }

    /// The host at the top of `g`'s branch (whose agent mpiexec talks to).
    pub(super) fn top(&self, g: usize) -> usize {
        let mut at = g;
        while let Some(p) = self.hosts[at].as_ref().and_then(|r| r.parent) {
            at = p;
        }
        at
    }

    pub(super) fn index_of(&self, name: &str) -> Option<usize> {
        self.hosts
            .iter()
            .position(|x| x.as_ref().is_some_and(|x| x.name == name))
    }
}

impl Job {
    /// What an agent says of the agents below it: that one listens for
    /// its children (they are started now), that a child connected, that
    /// one is lost, or a message of one of them (`Via`).
    pub(super) fn on_tree_message(&mut self, h: usize, m: FromAgent) {
        match m {
            FromAgent::Listening { addr } => {
                let children: Vec<usize> = (0..self.remotes().hosts.len())
                    .filter(|&c| {
                        self.remotes().hosts[c]
                            .as_ref()
                            .is_some_and(|x| x.parent == Some(h) && !x.launched && !x.lost)
                    })
                    .collect();
                for c in children {
                    if let Err(e) = self.remotes().launch(c, &addr) {
                        self.host_lost(c, &e.to_string());
                    }
                }
            }
            FromAgent::Joined { host, addr } => {
                let r = self.remotes();
                let Some(g) = r.index_of(&host) else { return };
                let x = r.hosts[g].as_ref().expect("a host");
                if x.parent != Some(h) || x.joined || x.lost {
                    return;
                }
                let top = r.hosts[r.top(g)].as_ref().expect("a host").link.clone();
                r.hosts[g]
                    .as_ref()
                    .expect("a host")
                    .link
                    .set_via(&top, &host);
                self.joined(g, addr);
            }
            FromAgent::Lost { host, why } => {
                let r = self.remotes();
                if let Some(g) = r.index_of(&host).filter(|&g| g != h && r.below(h, g)) {
                    self.host_lost(g, &why);
                }
            }
            FromAgent::Via { host, msg } => {
                let r = self.remotes();
                let Some(g) = r.index_of(&host).filter(|&g| g != h && r.below(h, g)) else {
                    return;
                };
                match proto::from_body::<FromAgent>(&msg) {
                    // One level of wrapping only (see `FromAgent::via`).
                    Ok(FromAgent::Via { .. } | FromAgent::Hello { .. }) | Err(_) => {}
                    Ok(inner) => self.on_agent_message(g, inner),
                }
            }
            _ => {}
        }
    }

    /// Every rank of host `h` is gone with it, and so is every host below
    /// it in the tree (their agents reached mpiexec through it).
    pub(super) fn host_lost(&mut self, h: usize, why: &str) {
        let Some(remotes) = self.remote.as_ref() else {
            return;
        };
        if remotes.hosts[h].as_ref().is_none_or(|x| x.lost) {
            return;
        }
        let hosts: Vec<usize> = (0..remotes.hosts.len())
            .filter(|&g| remotes.below(h, g))
            .filter(|&g| remotes.hosts[g].as_ref().is_some_and(|x| !x.lost))
            .collect();
        let top_name = remotes.hosts[h].as_ref().expect("a host").name.clone();
        // One host (or branch) lost is one failure for --max-restarts, and
        // one notice to every rank.
        self.hold_failures(true);
        let mut first = true;
        for g in hosts {
            let remote = self.remotes().hosts[g].as_mut().expect("a host");
            remote.lost = true;
            remote.link.set(None);
            let conn = remote.conn.take();
            let relayed = std::mem::take(&mut remote.relayed);
            if let Some((s, _)) = conn {
                let _ = self.epoll.delete(s.as_raw_fd());
            }
            for slot in relayed.into_values() {
                self.close(slot);
            }
            let name = self.remotes().hosts[g]
                .as_ref()
                .expect("a host")
                .name
                .clone();
            let on_host: Vec<usize> = (0..self.ranks.len())
                .filter(|&r| self.launch.rank_host[r] == g)
                .filter(|&r| self.ranks[r].proc.is_some() && self.ranks[r].exit.is_none())
                .collect();
            if !on_host.is_empty() && self.failure.is_none() {
                let why = match g == h {
                    true => why.to_string(),
                    false => format!("its agent reached mpiexec through host {top_name}'s"),
                };
                crate::say!("mpiexec: host {name} is lost ({why}) with ranks {on_host:?}");
            }
            for r in on_host {
                self.rec.with_last_failure(!first);
                first = false;
                let what = format!("was lost with host {name}");
                self.process_ended(r, Exit::Signal(libc::SIGKILL), Some(what));
            }
        }
        self.rec.with_last_failure(false);
        self.hold_failures(false);
    }
}
