//! New connections: accepting them, and the hello that says who connects
//! (with the job key and generation); duplicates and strangers are refused.

use super::*;

impl Tcp {
    pub(super) fn on_accept(&mut self, out: &mut Vec<Event>) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() || stream.set_nodelay(true).is_err() {
                        continue;
                    }
                    self.start_handshake(Conn::Tcp(stream), out);
                }
                Err(e) if would_block(&e) => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    pub(super) fn on_accept_shm(&mut self, out: &mut Vec<Event>) {
        let mut accepted = Vec::new();
        if let Some(l) = &self.shm_listener {
            loop {
                match l.accept() {
                    // (Another user's process is closed on at once.)
                    Ok((sock, _)) if !crate::sys::fdpass::peer_is_same_user(&sock) => {}
                    Ok((sock, _)) => accepted.push(sock),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        for sock in accepted {
            if let Ok(c) = ShmConn::accepted(sock) {
                self.start_handshake(Conn::Shm(Box::new(c)), out);
            }
        }
    }

    /// Watches a new connection until its hello, and reads it at once if
    /// it is there (it usually is: it was sent before the connection was
    /// accepted), so that a replacement is attached without waiting for
    /// another turn of the event loop.
    pub(super) fn start_handshake(&mut self, stream: Conn, out: &mut Vec<Event>) {
        self.bound_handshakes();
        let slot = match self.handshakes.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.handshakes.push(None);
                self.handshakes.len() - 1
            }
        };
        let token = TOKEN_HANDSHAKE + slot as u64;
        if self.epoll.add(stream.fd(), epoll::READABLE, token).is_ok() {
            self.handshakes[slot] = Some(Handshake {
                stream,
                buf: Vec::new(),
                since: std::time::Instant::now(),
            });
            self.on_handshake(slot, out);
        }
    }

    /// Most connections waiting for their hello: every peer connecting at
    /// once, twice (a replacement's beside a dying one's), and some room.
    /// A flood of connections that never say hello would otherwise hold a
    /// descriptor each, without bound (15,504 were seen in one rank).
    fn handshake_limit(&self) -> usize {
        2 * self.peers.len() + 64
    }

    /// Makes room for one more connection in its handshake: at the limit,
    /// the one waiting longest is closed (a peer's hello comes with its
    /// connection; a silent one is a stranger's).
    fn bound_handshakes(&mut self) {
        let waiting: Vec<(std::time::Instant, usize)> = self
            .handshakes
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.as_ref().map(|h| (h.since, i)))
            .collect();
        if waiting.len() < self.handshake_limit() {
            return;
        }
        let Some(&(_, oldest)) = waiting.iter().min() else {
            return;
        };
        if let Some(hs) = self.handshakes[oldest].take() {
            let _ = self.epoll.delete(hs.stream.fd());
            if !self.handshakes_dropped {
                log::warn!(
                    "mpistages: rank {}: more than {} connections wait for their handshake; closing the oldest ones",
                    self.cfg.me,
                    self.handshake_limit()
                );
                self.handshakes_dropped = true;
            }
        }
    }

    /// Reads a connecting process's HELLO; on success the connection becomes
    /// that peer's. Anything wrong (bad frame, wrong key) closes it.
    pub(super) fn on_handshake(&mut self, slot: usize, out: &mut Vec<Event>) {
        let hello_limits = self.hello_limits();
        let Some(hs) = self.handshakes.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let want = HEADER_LEN + self.cfg.key.len();
        let mut chunk = [0u8; 512];
        let outcome: Result<Option<usize>, String> = loop {
            let room = want.saturating_sub(hs.buf.len()).max(1).min(chunk.len());
            match hs.stream.read(&mut chunk[..room]) {
                Ok(0) => break Err("closed during handshake".into()),
                Ok(n) => {
                    hs.buf.extend_from_slice(&chunk[..n]);
                    if hs.buf.len() >= want {
                        break Ok(Some(want));
                    }
                }
                Err(e) if would_block(&e) => break Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e.to_string()),
            }
        };
        let peer = match outcome {
            Ok(None) => return,
            // A process that joined the job later (`MPI_Comm_spawn`) has
            // an id above the ranks this one knows: its hello is read with
            // room for it, and the peers grow once its key is checked.
            Ok(Some(_)) => match Header::decode(&hs.buf, &hello_limits) {
                Ok(h)
                    if h.kind == Kind::Hello
                        && h.len as usize == self.cfg.key.len()
                        && h.src as usize != self.cfg.me
                        && crate::sys::constant_time_eq(
                            &hs.buf[HEADER_LEN..want],
                            &self.cfg.key,
                        ) =>
                {
                    Ok((h.src as usize, h.generation))
                }
                Ok(_) => Err("handshake rejected".to_string()),
                Err(e) => Err(format!("malformed handshake: {e}")),
            },
            Err(e) => Err(e),
        };
        if let Ok((p, _)) = peer {
            self.grow_to(p + 1);
        }
        let mut hs = self.handshakes[slot].take().expect("slot checked above");
        let _ = self.epoll.delete(hs.stream.fd());
        // One connection per peer: a second one claiming a connected rank
        // is refused unless it comes from a newer process of that rank (a
        // replacement, whose hello may arrive before the failure notice),
        // or the peer connected while this process was connecting to it.
        let mut inbound = false;
        let peer = peer.and_then(|(peer, generation)| match self.peers.get(peer) {
            Some(_) if self.peers.known(peer).is_some_and(|k| generation < k.min_generation) => {
                Err("a dead process".to_string())
            }
            Some(p)
                if p.stream.is_some()
                    && generation == p.conn_generation
                    && p.initiated
                    && p.inbound.is_none() =>
            {
                inbound = true;
                Ok((peer, generation))
            }
            Some(p) if p.stream.is_some() && generation <= p.conn_generation => {
                log::warn!(
                    "mpistages: rank {}: refused a second connection claiming to be rank {peer}, which is connected",
                    self.cfg.me
                );
                Err("duplicate".to_string())
            }
            _ => Ok((peer, generation)),
        });
        // Shared memory: the peer's ring came with the hello; ours goes back.
        let peer = peer.and_then(|x| match &mut hs.stream {
            Conn::Shm(c) => c
                .established(self.cfg.shm_ring)
                .map(|_| x)
                .map_err(|e| e.to_string()),
            Conn::Tcp(_) | Conn::Udp(_) => Ok(x),
        });
        match peer {
            Ok((peer, _)) if inbound => {
                if self.attach_inbound(peer, hs.stream).is_ok() {
                    // Its frames may have come with the hello.
                    self.on_readable(peer, out);
                }
            }
            Ok((peer, generation)) => {
                if self.attach(peer, hs.stream, generation).is_ok() {
                    self.flush(peer, out);
                }
            }
            Err(reason) => {
                // An unauthenticated or malformed connection is simply dropped.
                log::debug!(
                    "mpistages: rank {}: a connection refused: {reason}",
                    self.cfg.me
                );
            }
        }
    }
}
