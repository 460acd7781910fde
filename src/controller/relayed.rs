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
                for (conn, msg) in hellos {
                    if let Some(slot) = self.relayed_slot(h, conn) {
                        self.handle(slot, msg);
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
                    let through_h = slot
                        .and_then(|s| self.conns[s].as_ref())
                        .is_some_and(|c| matches!(c.wire, Wire::Agent { host, .. } if host == h));
                    if let (Some(slot), true) = (slot, through_h) {
                        self.handle(slot, msg.clone());
                    }
                }
            }
            FromAgent::Closed { conn } => {
                let r = self.remotes().hosts[h].as_mut().expect("a host");
                if let Some(slot) = r.relayed.remove(&conn) {
                    self.close(slot);
                }
            }
            _ => {}
        }
    }

    /// The slot of host `h`'s connection `conn` (new at its first
    /// message; None once mpiexec closed it).
    fn relayed_slot(&mut self, h: usize, conn: u32) -> Option<usize> {
        let r = self
            .remote
            .as_mut()
            .expect("hosts other than this machine")
            .hosts[h]
            .as_mut()
            .expect("a host");
        if let Some(&slot) = r.relayed.get(&conn) {
            return Some(slot);
        }
        if r.closed.contains(conn) {
            return None;
        }
        let slot = self.adopt_relayed(h, conn);
        let r = self
            .remote
            .as_mut()
            .expect("hosts other than this machine")
            .hosts[h]
            .as_mut()
            .expect("a host");
        r.relayed.insert(conn, slot);
        Some(slot)
    }

    /// `msg` to the connections `conns` of host `h`'s agent, in one
    /// message to the agent; false if the agent cannot be written to (the
    /// next heartbeat finds the host lost).
    pub(super) fn relay_down(&mut self, h: usize, conns: RankSet, msg: &ToRank) -> bool {
        self.remote
            .as_mut()
            .expect("hosts other than this machine")
            .hosts[h]
            .as_ref()
            .is_some_and(|r| {
                r.link.send(&ToAgent::Relay {
                    conns,
                    msg: msg.clone(),
                })
            })
    }

    /// mpiexec closed the connection `conn` through host `h`'s agent.
    pub(super) fn relayed_closed(&mut self, h: usize, conn: u32) {
        let r = self
            .remote
            .as_mut()
            .expect("hosts other than this machine")
            .hosts[h]
            .as_mut()
            .expect("a host");
        if r.relayed.remove(&conn).is_some() {
            r.closed.insert(conn);
            r.link.send(&ToAgent::Close { conn });
        }
    }
}
