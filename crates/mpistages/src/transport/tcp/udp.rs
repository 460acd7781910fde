//! UDP connections in the stream transport: the listener that opens them
//! (a peer's first packets), and the one timer that drives every UDP
//! connection's retransmissions, keepalives and death.

use super::*;
use std::time::Instant;

/// First packets remembered, so that a repeated one opens nothing.
const OPENED_MEMORY: usize = 1024;

impl Tcp {
    pub(super) fn on_accept_udp(&mut self, out: &mut Vec<Event>) {
        let Some(l) = &self.udp_listener else {
            return;
        };
        let ip = match l.local_addr() {
            Ok(a) => a.ip(),
            Err(_) => return,
        };
        let mut buf = vec![0u8; 65_536];
        let mut opened = Vec::new();
        loop {
            match l.recv_from(&mut buf) {
                Ok((n, from)) => {
                    let Some(conn) = crate::transport::udp::reliable::Reliable::conn_of(&buf[..n])
                    else {
                        continue;
                    };
                    if self.udp_opened.contains(&(from, conn)) {
                        continue;
                    }
                    if self.udp_opened.len() == OPENED_MEMORY {
                        self.udp_opened.pop_front();
                    }
                    self.udp_opened.push_back((from, conn));
                    if let Ok(c) = UdpConn::accepted(ip, from, &buf[..n]) {
                        opened.push(c);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        for c in opened {
            self.start_handshake(Conn::Udp(Box::new(c)), out);
        }
        self.arm_udp_timer();
    }

    /// Retransmissions and keepalives; a peer silent past the limit is
    /// lost, a connection still in its handshake dropped.
    pub(super) fn on_udp_timer(&mut self, out: &mut Vec<Event>) {
        if let Some(t) = &self.udp_timer {
            t.drain();
        }
        self.udp_armed = None;
        let now = Instant::now();
        for i in 0..self.live.len() {
            let Some(&peer) = self.live.get(i) else {
                break;
            };
            let p = &mut self.peers[peer];
            let mut fired = false;
            let ticked = p
                .conns_mut()
                .filter_map(Conn::udp)
                .filter(|c| c.next_timeout() <= now)
                .try_for_each(|c| {
                    fired = true;
                    c.on_timer()
                });
            if !fired {
                continue;
            }
            if let Err(e) = ticked {
                // Its process may be alive (stopped, say): reported as
                // broken, mpiexec ends it for good, so that it cannot come
                // back to a job that went on without it, and every rank
                // and mpiexec agree it failed.
                self.reject(peer, format!("UDP: {e}"), out);
            } else if self.peers[peer].backlog() {
                self.flush(peer, out);
            }
        }
        for slot in 0..self.handshakes.len() {
            let Some(hs) = self.handshakes[slot].as_mut() else {
                continue;
            };
            let Some(c) = hs.stream.udp() else { continue };
            if c.next_timeout() <= now && c.on_timer().is_err() {
                let hs = self.handshakes[slot].take().expect("just seen");
                let _ = self.epoll.delete(hs.stream.fd());
            }
        }
        self.arm_udp_timer();
    }

    /// Sets the timer to the earliest moment a UDP connection needs it.
    pub(super) fn arm_udp_timer(&mut self) {
        let Some(t) = &self.udp_timer else {
            return;
        };
        let mut next: Option<Instant> = None;
        let mut consider = |c: &Conn| {
            if let Conn::Udp(u) = c {
                let at = u.next_timeout();
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        };
        for &peer in &self.live {
            self.peers[peer].conns().for_each(&mut consider);
        }
        for hs in self.handshakes.iter().flatten() {
            consider(&hs.stream);
        }
        // A system call per frame sent is saved while the timer is already
        // set to fire no later than needed (firing early only re-arms it),
        // or a little later: by a quarter of the wait, at most 1 ms. (In a
        // ping-pong each packet moves the earliest deadline — a delayed
        // acknowledgement, a tail probe, 200 µs ahead — by a few µs, which
        // cost two timerfd_settime calls per message.)
        if let Some(at) = next {
            let now = Instant::now();
            let slack = (at.saturating_duration_since(now) / 4).min(Duration::from_millis(1));
            if self.udp_armed.is_some_and(|a| a > now && a <= at + slack) {
                return;
            }
            t.arm(at.saturating_duration_since(now));
            self.udp_armed = Some(at);
        }
    }
}
