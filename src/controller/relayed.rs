//! mpiexec's side of the agents' relay (`crate::relay`): the connections
//! of another host's ranks that come through its agent, the reports it
//! merged, and what goes down to many of them at once.

use super::*;
use mpistages_control::agent::{FromAgent, ToAgent};
use mpistages_control::rankset::RankSet;

impl Job {
    /// A message of host `h`'s agent about its ranks' connections.
    pub(super) fn on_relayed(&mut self, h: usize, m: FromAgent) {
        match m {
            FromAgent::Relayed { conn, msg } => {
                if let Some(slot) = self.relayed_slot(h, conn) {
                    self.traffic.received(msg.kind());
                    self.handle(slot, msg);
                }
            }
            FromAgent::Hellos(hellos) => {
                self.traffic.received("hello");
                self.take_hellos(h, hellos);
            }
            FromAgent::BranchHellos { own, below } => {
                self.traffic.received("hello");
                self.take_hellos(h, own);
                for (host, hellos) in below {
                    let r = self.remotes();
                    if let Some(g) = r.index_of(&host).filter(|&g| g != h && r.below(h, g)) {
                        self.take_hellos(g, hellos);
                    }
                }
            }
            FromAgent::Gathered(g) => {
                self.traffic.received(g.kind_name());
                let Some(msg) = crate::relay::per_rank(&g) else {
                    return;
                };
                let n = self.ranks.len();
                for r in g.ranks.iter().take_while(|&r| (r as usize) < n) {
                    let slot = self.ranks.get(r as usize).and_then(|st| st.conn);
                    // Merged below h: from h's host or one below it.
                    let r = self.remote.as_ref().expect("hosts other than this machine");
                    let through_h = slot.and_then(|s| self.conns[s].as_ref()).is_some_and(
                        |c| matches!(c.wire, Wire::Agent { host, .. } if r.below(h, host)),
                    );
                    if let (Some(slot), true) = (slot, through_h) {
                        self.handle(slot, msg.clone());
                    }
                }
            }
            FromAgent::Closed { conn } => {
                let r = self.agent_host(h);
                if let Some(slot) = r.relayed.remove(&conn) {
                    self.close(slot);
                }
            }
            _ => {}
        }
    }

    /// Hellos that came through host `h`'s agent, by its connection.
    fn take_hellos(&mut self, h: usize, hellos: Vec<(u32, ToController)>) {
        for (conn, msg) in hellos {
            if let Some(slot) = self.relayed_slot(h, conn) {
                self.handle(slot, msg);
            }
        }
    }

    /// The slot of host `h`'s connection `conn` (new at its first
    /// message; None once mpiexec closed it).
    fn relayed_slot(&mut self, h: usize, conn: u32) -> Option<usize> {
        let r = self.agent_host(h);
        if let Some(&slot) = r.relayed.get(&conn) {
            return Some(slot);
        }
        if r.closed.contains(conn) {
            return None;
        }
        let slot = self.adopt_relayed(h, conn);
        let r = self.agent_host(h);
        r.relayed.insert(conn, slot);
        Some(slot)
    }

    /// `msg` to the connections of several hosts' agents (`conns` of
    /// each host), in one message to each agent mpiexec talks to: `Relay`
    /// for its own, `Spread` when the tree takes it further down. Returns
    /// how many messages went, and false if an agent could not be written
    /// to (the next heartbeat finds the host lost).
    pub(super) fn relay_down(
        &mut self,
        to: std::collections::BTreeMap<usize, RankSet>,
        msg: &ToRank,
    ) -> (usize, bool) {
        let r = self.remote.as_ref().expect("hosts other than this machine");
        let mut by_top: std::collections::BTreeMap<usize, Vec<(usize, RankSet)>> =
            Default::default();
        for (h, conns) in to {
            by_top.entry(r.top(h)).or_default().push((h, conns));
        }
        let mut ok = true;
        let sent = by_top.len();
        for (top, mut parts) in by_top {
            let x = r.hosts[top].as_ref().expect("a host");
            let m = if parts.len() == 1 && parts[0].0 == top {
                ToAgent::Relay {
                    conns: parts.pop().expect("one part").1,
                    msg: msg.clone(),
                }
            } else {
                let name = |h: usize| r.hosts[h].as_ref().expect("a host").name.clone();
                ToAgent::Spread {
                    parts: parts.into_iter().map(|(h, c)| (name(h), c)).collect(),
                    msg: msg.clone(),
                }
            };
            ok &= x.link.send(&m);
        }
        (sent, ok)
    }

    /// mpiexec closed the connection `conn` through host `h`'s agent.
    pub(super) fn relayed_closed(&mut self, h: usize, conn: u32) {
        let r = self.agent_host(h);
        if r.relayed.remove(&conn).is_some() {
            r.closed.insert(conn);
            r.link.send(&ToAgent::Close { conn });
        }
    }
}
