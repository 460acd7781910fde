//! A pair's connection over its life: made (shared memory first, TCP
//! otherwise), attached to a peer, lost or refused, and dropped.

use super::*;

impl Tcp {
    /// At start-up: `peer` has ended (mpiexec gave it no address, or it
    /// refused a spawned process's connection while ending): sends to it
    /// fail instead of waiting for a connection that cannot come.
    pub fn ended(&mut self, peer: usize) {
        if peer < MAX_PROCESSES as usize {
            self.grow_to(peer + 1);
            self.peers[peer].lost = true;
        }
    }

    /// Room for peers `0..n` (processes that joined the job later).
    pub(super) fn grow_to(&mut self, n: usize) {
        if n > self.peers.len() {
            self.peers.grow_to(n);
            self.limits.ranks = n as u32;
        }
    }

    /// Where `peer` listens: the connection is made at the first frame
    /// for it (unless the peer connects first).
    /// `peer`'s process joined at generation `born` (mpiexec says): older
    /// processes of it are dead.
    pub fn set_born(&mut self, peer: usize, born: u32) {
        if peer < MAX_PROCESSES as usize && peer != self.cfg.me {
            self.grow_to(peer + 1);
            let k = self.peers.known_mut(peer).expect("grown to it");
            k.min_generation = k.min_generation.max(born);
        }
    }

    pub fn set_address(&mut self, peer: usize, addr: SocketAddr) {
        if peer < MAX_PROCESSES as usize && peer != self.cfg.me {
            self.grow_to(peer + 1);
            self.peers.known_mut(peer).expect("grown to it").addr = Some(addr);
        }
    }

    /// Connects to `peer` (through shared memory when it is on this host
    /// and that is allowed, else over TCP at `addr`) and introduces this
    /// process.
    pub fn connect(&mut self, peer: usize, addr: SocketAddr) -> io::Result<()> {
        let mut hello = Header::new(Kind::Hello);
        hello.src = self.cfg.me as u32;
        hello.generation = self.cfg.generation;
        hello.len = self.cfg.key.len() as u32;
        let mut bytes = hello.encode().to_vec();
        bytes.extend_from_slice(&self.cfg.key);
        let conn = match self.connect_shm(peer, addr.port(), &bytes) {
            Some(c) => c,
            None if self.cfg.links.udp => {
                let ip = self.listener.local_addr()?.ip();
                Conn::Udp(Box::new(UdpConn::connect(ip, addr, &bytes)?))
            }
            None if !self.cfg.links.tcp => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("rank {peer} is not on this host (MPISTAGES_TRANSPORT=shm)"),
                ))
            }
            None => {
                let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
                stream.set_nodelay(true)?;
                NoSignal::new(&stream).write_all(&bytes)?;
                stream.set_nonblocking(true)?;
                Conn::Tcp(stream)
            }
        };
        // (The peer's process is the one mpiexec named, of this generation.)
        let born = self.peers.known(peer).map_or(0, |k| k.min_generation);
        self.attach(peer, conn, born)?;
        self.peers[peer].initiated = true;
        Ok(())
    }

    /// A shared-memory connection to `peer`, if it listens on this host
    /// (its process of TCP port `port`).
    pub(super) fn connect_shm(&self, peer: usize, port: u16, hello: &[u8]) -> Option<Conn> {
        if !self.cfg.links.shm {
            return None;
        }
        match ShmConn::connect(&self.cfg.key, peer, port, hello, self.cfg.shm_ring) {
            Ok(c) => Some(Conn::Shm(Box::new(c))),
            Err(e) => {
                log::debug!(
                    "mpistages: rank {}: no shared memory with rank {peer}: {e}",
                    self.cfg.me
                );
                None
            }
        }
    }

    pub(super) fn attach(&mut self, peer: usize, stream: Conn, generation: u32) -> io::Result<()> {
        log::debug!(
            "mpistages: rank {}: connected to rank {peer} over {} (generation {generation})",
            self.cfg.me,
            stream.kind()
        );
        if let (Conn::Tcp(s), false) = (&stream, self.cfg.congestion.is_empty()) {
            // Best effort: an algorithm the kernel refuses leaves its default.
            let _ = crate::sys::set_tcp_congestion(s.as_raw_fd(), &self.cfg.congestion);
        }
        if self.peers[peer].stream.is_some() {
            // A newer process of the peer (a replacement whose hello came
            // before the failure notice): everything queued or expected
            // was the dead process's, and a frame half written to it would
            // reach the new one as garbage.
            self.disconnect(peer);
        }
        let p = &mut self.peers[peer];
        self.epoll.add(stream.fd(), epoll::READABLE, peer as u64)?;
        p.stream = Some(stream);
        p.initiated = false;
        self.peers.known_mut(peer).expect("a rank").addr = None;
        let p = &mut self.peers[peer];
        if !self.live.contains(&peer) {
            self.live.push(peer);
        }
        p.conn_generation = generation;
        p.sent_seq = 0;
        p.recv_seq = 0;
        p.lost = false;
        p.want_write = false;
        p.rstate = ReadState::Header;
        p.rhead = 0;
        p.rtail = 0;
        if p.rbuf.is_empty() {
            p.rbuf = vec![0; READ_BUF];
        }
        Ok(())
    }

    /// The peer opened its connection to this process while this one's to
    /// it was open already (both connected at once): its frames come on
    /// `stream`, which is only read; ours keep going on ours.
    pub(super) fn attach_inbound(&mut self, peer: usize, stream: Conn) -> io::Result<()> {
        log::debug!(
            "mpistages: rank {}: connected to rank {peer} over {} (its connection, beside ours)",
            self.cfg.me,
            stream.kind()
        );
        self.epoll.add(stream.fd(), epoll::READABLE, peer as u64)?;
        self.peers[peer].inbound = Some(stream);
        Ok(())
    }

    /// One of the two connections of a pair ended (`inbound`: the peer's).
    /// The peer ends both when it ends, but the end of the one it sends
    /// nothing on can come before frames still to be read on the other:
    /// the other stays (and carries this side's frames from now on, if it
    /// was the peer's), until it ends too.
    pub(super) fn close_one(&mut self, peer: usize, inbound: bool, out: &mut Vec<Event>) {
        let p = &mut self.peers[peer];
        if !inbound && p.woff > 0 {
            // A frame was half written on the connection that ended.
            self.lose(peer, "connection closed by peer".into(), out);
            return;
        }
        let gone = if inbound {
            p.inbound.take()
        } else {
            p.initiated = false;
            p.want_write = false;
            std::mem::replace(&mut p.stream, p.inbound.take())
        };
        if let Some(s) = gone {
            let _ = self.epoll.delete(s.fd());
        }
        log::debug!(
            "mpistages: rank {}: rank {peer} closed one of the pair's two connections",
            self.cfg.me
        );
        if self.peers[peer].backlog() {
            self.flush(peer, out);
        }
    }

    /// Closes the connection to `peer` and drops everything queued for it
    /// or expected from it.
    pub(super) fn disconnect(&mut self, peer: usize) {
        let p = &mut self.peers[peer];
        for s in [p.stream.take(), p.inbound.take()].into_iter().flatten() {
            let _ = self.epoll.delete(s.fd());
        }
        p.initiated = false;
        self.live.retain(|&q| q != peer);
        p.want_write = false;
        p.urgent.clear();
        p.bulk.clear();
        p.wire.clear();
        p.woff = 0;
        p.targets.clear();
        p.refs.clear();
        p.rstate = ReadState::Header;
        p.rhead = 0;
        p.rtail = 0;
    }

    pub(super) fn lose(&mut self, peer: usize, reason: String, out: &mut Vec<Event>) {
        self.disconnect(peer);
        self.peers[peer].lost = true;
        out.push(Event::PeerLost {
            peer,
            reason,
            broken: false,
        });
    }

    /// The peer's stream broke the protocol: dropped, and reported as
    /// broken so that the peer is failed rather than waited for.
    pub(super) fn reject(&mut self, peer: usize, reason: String, out: &mut Vec<Event>) {
        self.disconnect(peer);
        self.peers[peer].lost = true;
        out.push(Event::PeerLost {
            peer,
            reason,
            broken: true,
        });
    }

    pub(super) fn set_write_interest(&mut self, peer: usize, on: bool) {
        let p = &mut self.peers[peer];
        if p.want_write == on {
            return;
        }
        if let Some(s) = &p.stream {
            let mut interest = epoll::READABLE;
            if on {
                interest |= s.write_interest();
            }
            let _ = self.epoll.modify(s.fd(), interest, peer as u64);
        }
        p.want_write = on;
    }
}
