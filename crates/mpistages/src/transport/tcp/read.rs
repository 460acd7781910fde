//! The read side: frames from the socket, validated header by header,
//! rendezvous data read straight into the posted buffer.

use super::*;

impl Tcp {
    /// Parses whatever is buffered for `peer`. Returns false if the peer was
    /// dropped for a protocol error.
    pub(super) fn consume(&mut self, peer: usize, out: &mut Vec<Event>) -> bool {
        loop {
            let p = &mut self.peers[peer];
            let avail = p.rtail - p.rhead;
            match &mut p.rstate {
                ReadState::Header => {
                    if avail < HEADER_LEN {
                        return true;
                    }
                    let bytes = &p.rbuf[p.rhead..p.rhead + HEADER_LEN];
                    let hdr = match Header::decode(bytes, &self.limits) {
                        Ok(h) => h,
                        Err(e) => {
                            self.reject(peer, format!("malformed frame: {e}"), out);
                            return false;
                        }
                    };
                    if hdr.seq != p.recv_seq {
                        let why = format!(
                            "frame out of sequence: expected {}, got {}",
                            p.recv_seq, hdr.seq
                        );
                        self.reject(peer, why, out);
                        return false;
                    }
                    p.recv_seq += 1;
                    p.rhead += HEADER_LEN;
                    match hdr.kind {
                        Kind::Data => {
                            let Some(t) = p.targets.get(&(hdr.rdv, hdr.generation)) else {
                                if hdr.generation != self.generation {
                                    // Stale data of a transfer a recovery
                                    // cancelled: read past it.
                                    p.rstate = ReadState::Data {
                                        key: (hdr.rdv, hdr.generation),
                                        pos: 0,
                                        end: hdr.len as u64,
                                        len: hdr.len as u64,
                                    };
                                    continue;
                                }
                                self.reject(
                                    peer,
                                    format!("data for unknown transfer {}", hdr.rdv),
                                    out,
                                );
                                return false;
                            };
                            let end = hdr.aux + hdr.len as u64;
                            if end > t.total {
                                self.reject(peer, "data beyond the announced length".into(), out);
                                return false;
                            }
                            p.rstate = ReadState::Data {
                                key: (hdr.rdv, hdr.generation),
                                pos: hdr.aux,
                                end,
                                len: hdr.len as u64,
                            };
                        }
                        Kind::Hello => {
                            self.reject(peer, "unexpected second handshake".into(), out);
                            return false;
                        }
                        Kind::RefDone => {
                            if let Some(r) = p.refs.get_mut(&hdr.rdv) {
                                r.outstanding = r.outstanding.saturating_sub(1);
                                if r.outstanding == 0 {
                                    if let Some(token) = r.token {
                                        out.push(Event::Sent { token });
                                    }
                                    p.refs.remove(&hdr.rdv);
                                }
                            }
                        }
                        _ if hdr.len == 0 => out.push(Event::Frame {
                            peer,
                            hdr,
                            payload: Vec::new(),
                        }),
                        // The whole payload is here already (a small frame
                        // almost always is): taken without the read state.
                        _ if p.rtail - p.rhead >= hdr.len as usize => {
                            let end = p.rhead + hdr.len as usize;
                            let payload = p.rbuf[p.rhead..end].to_vec();
                            p.rhead = end;
                            if !self.frame_complete(peer, hdr, payload, out) {
                                return false;
                            }
                        }
                        _ => {
                            p.rstate = ReadState::Payload {
                                hdr,
                                buf: vec![0; hdr.len as usize],
                                have: 0,
                            }
                        }
                    }
                }
                ReadState::Payload { hdr, buf, have } => {
                    let n = avail.min(buf.len() - *have);
                    buf[*have..*have + n].copy_from_slice(&p.rbuf[p.rhead..p.rhead + n]);
                    *have += n;
                    p.rhead += n;
                    if *have < buf.len() {
                        return true;
                    }
                    let hdr = *hdr;
                    let payload = std::mem::take(buf);
                    p.rstate = ReadState::Header;
                    if !self.frame_complete(peer, hdr, payload, out) {
                        return false;
                    }
                }
                ReadState::Data { key, pos, end, len } => {
                    let n = avail.min((*end - *pos) as usize);
                    if n == 0 {
                        return true;
                    }
                    // No target: stale data being dropped.
                    let key = *key;
                    let cap = p.targets.get(&key).map_or(0, |t| t.buf.len() as u64);
                    if *pos < cap {
                        let t = &p.targets[&key];
                        let k = (cap - *pos).min(n as u64) as usize;
                        let dst = t.buf.sub(*pos as usize, k).expect("bounded by cap");
                        dst.write_at(0, &p.rbuf[p.rhead..p.rhead + k]);
                    }
                    p.rhead += n;
                    *pos += n as u64;
                    if *pos == *end {
                        let len = *len;
                        p.rstate = ReadState::Header;
                        self.frame_done(peer, key, len, out);
                    }
                }
            }
        }
    }

    /// Matching in place: while the next frame in `peer`'s shared-memory
    /// ring (of the connection it sends on) is a whole eager message that a posted receive takes
    /// (`place`), its payload is copied from the ring into that receive's
    /// buffer, with no staging, no event payload and no second copy. Only
    /// when nothing of the peer's stream is staged or waiting in `out`
    /// (an earlier message must be matched first); anything else is left
    /// for the ordinary read.
    ///
    /// The ring's read position moves once, after the last message placed:
    /// each move is a store the writer's core must fetch back and a fence
    /// (a window of small messages paid one per message).
    pub(super) fn place_in_memory(
        &mut self,
        peer: usize,
        place: &mut dyn Placement,
        out: &mut Vec<Event>,
    ) {
        let staged = |e: &Event| matches!(e, Event::Frame { peer: p, .. } if *p == peer);
        if out.iter().any(staged) {
            return;
        }
        let mut placed = 0;
        while let Some(n) = self.place_next(peer, placed, place, out) {
            placed += n;
        }
        if placed == 0 {
            return;
        }
        let Some(c) = self.peers[peer].sending_shm() else {
            return; // lost meanwhile: nothing to take
        };
        if let Err(e) = c.skip(placed) {
            self.lose(peer, format!("read failed: {e}"), out);
        }
    }

    /// `place_in_memory` of the frame `at` bytes past the ring's read
    /// position: its length in bytes if it was placed.
    fn place_next(
        &mut self,
        peer: usize,
        at: usize,
        place: &mut dyn Placement,
        out: &mut Vec<Event>,
    ) -> Option<usize> {
        let p = &mut self.peers[peer];
        if !matches!(p.rstate, ReadState::Header) || p.rhead != p.rtail {
            return None;
        }
        let seq = p.recv_seq;
        let c = p.sending_shm()?;
        let mut raw = [0u8; HEADER_LEN];
        if !matches!(c.peek(at, &mut raw), Ok(true)) {
            return None;
        }
        // A bad header is for the ordinary read to reject.
        let hdr = Header::decode(&raw, &self.limits).ok()?;
        let len = hdr.len as usize;
        if hdr.kind != Kind::Eager || hdr.seq != seq || len > self.cfg.eager_limit {
            return None;
        }
        // The whole payload must be there before a receive is taken.
        if !matches!(c.peek(at + HEADER_LEN + len, &mut []), Ok(true)) {
            return None;
        }
        let (token, buf) = place.place(peer, &hdr)?;
        let Some(dst) = buf.sub(0, len) else {
            // `place` promised room for the payload.
            self.reject(peer, "a placed message does not fit".into(), out);
            return None;
        };
        // SAFETY: a posted receive's buffer is written by the engine
        // alone (this call runs under its lock) until the receive
        // completes, and no other slice of it is alive here.
        let into = unsafe { dst.as_mut_slice() };
        if let Err(e) = c.peek(at + HEADER_LEN, into) {
            self.lose(peer, format!("read failed: {e}"), out);
            return None;
        }
        p.recv_seq += 1;
        out.push(Event::Placed {
            token,
            src: hdr.src,
            tag: hdr.tag,
            len,
        });
        Some(HEADER_LEN + len)
    }

    /// A frame with its payload: a DATA_REF is the transport's own, any
    /// other goes to the engine. False if the peer was dropped.
    fn frame_complete(
        &mut self,
        peer: usize,
        hdr: Header,
        payload: Vec<u8>,
        out: &mut Vec<Event>,
    ) -> bool {
        if hdr.kind == Kind::DataRef {
            return self.take_reference(peer, hdr, &payload, out);
        }
        out.push(Event::Frame { peer, hdr, payload });
        true
    }

    /// A DATA_REF: copies the referred bytes from the peer's memory into
    /// the transfer's target (as much as fits; stale ones are skipped) and
    /// answers REF_DONE. False if the peer was dropped.
    fn take_reference(
        &mut self,
        peer: usize,
        hdr: Header,
        desc: &[u8],
        out: &mut Vec<Event>,
    ) -> bool {
        let word = |at: usize| u64::from_le_bytes(desc[at..at + 8].try_into().expect("16 bytes"));
        let (addr, len) = (word(0), word(8));
        let p = &mut self.peers[peer];
        let key = (hdr.rdv, hdr.generation);
        let target = p.targets.get(&key);
        if target.is_none() && hdr.generation == self.generation {
            self.reject(
                peer,
                format!("data reference for unknown transfer {}", hdr.rdv),
                out,
            );
            return false;
        }
        if let Some(t) = target {
            if len > MAX_PAYLOAD as u64 || hdr.aux.checked_add(len).is_none_or(|e| e > t.total) {
                self.reject(
                    peer,
                    "data reference beyond the announced length".into(),
                    out,
                );
                return false;
            }
            let cap = t.buf.len() as u64;
            if hdr.aux < cap {
                let k = (cap - hdr.aux).min(len) as usize;
                let dst = t.buf.sub(hdr.aux as usize, k).expect("bounded by cap");
                // SAFETY: a rendezvous target is written by this transport
                // alone until its data is complete, and no other slice of
                // it is alive during this copy.
                let into = unsafe { dst.as_mut_slice() };
                // (The frame came on the peer's own connection if it has
                // one; both lead to the same process.)
                let copied = p
                    .inbound
                    .as_ref()
                    .or(p.stream.as_ref())
                    .map(|s| s.read_referenced(addr, into, hdr.generation));
                if let Some(Err(e)) = copied {
                    // The sender keeps referred memory until REF_DONE unless
                    // it halted for a failure and its program rolled back
                    // (and freed it): this rank hears of the same failure
                    // and halts too. Until then the transfer is spoiled,
                    // never complete; the connection stays (losing it would
                    // part two live ranks for good).
                    log::debug!(
                        "mpistages: rank {}: a transfer from rank {peer} is dropped: its memory is gone ({e})",
                        self.cfg.me
                    );
                    if let Some(t) = self.peers[peer].targets.get_mut(&key) {
                        t.buf = RawBuf::empty();
                        t.spoiled = true;
                    }
                }
            }
            self.frame_done(peer, key, len, out);
        }
        let mut done = Header::new(Kind::RefDone);
        (done.src, done.generation, done.rdv, done.aux) =
            (self.cfg.me as u32, self.generation, hdr.rdv, hdr.aux);
        let frame = OutFrame::new(&done, Payload::None, None);
        let _ = self.send(peer, frame, Class::Urgent, out);
        true
    }

    /// A DATA frame of `len` bytes is in; the transfer is done when all its
    /// bytes are.
    pub(super) fn frame_done(
        &mut self,
        peer: usize,
        key: (u64, u32),
        len: u64,
        out: &mut Vec<Event>,
    ) {
        let p = &mut self.peers[peer];
        let Some(t) = p.targets.get_mut(&key) else {
            return;
        };
        t.got += len;
        if t.got >= t.total {
            let spoiled = t.spoiled;
            p.targets.remove(&key);
            if !spoiled {
                out.push(Event::DataDone { peer, rid: key.0 });
            }
        }
    }

    pub(super) fn on_readable(&mut self, peer: usize, out: &mut Vec<Event>) {
        // Both connections of a pair that opened two are read into the one
        // parser: the peer sends on one of them only (the other brings
        // acknowledgements and doorbells, read inside the connection, or
        // its end).
        self.read_some(peer, false, out);
        if self.peers[peer].inbound.is_some() {
            self.read_some(peer, true, out);
        }
        // Parse what the last read brought in.
        self.consume(peer, out);
        // Acknowledgements read may complete sends whose data was lent.
        for c in self.peers[peer].conns_mut() {
            for token in c.take_completed() {
                out.push(Event::Sent { token });
            }
        }
    }

    /// Reads (and parses) until the socket is drained or the budget spent.
    /// Bytes go to the staging buffer in small chunks (many small frames per
    /// system call); a payload of at least `DIRECT_READ_MIN` bytes still to
    /// come is read straight into where it belongs — the eager message's
    /// buffer or the receiver's memory — so it is copied only once.
    pub(super) fn read_some(&mut self, peer: usize, inbound: bool, out: &mut Vec<Event>) {
        enum Into {
            Staging,
            Payload,
            Data,
        }
        let mut budget = READ_BUDGET;
        while budget > 0 {
            if !self.consume(peer, out) {
                return;
            }
            let p = &mut self.peers[peer];
            if p.rhead == p.rtail {
                p.rhead = 0;
                p.rtail = 0;
            } else if p.rtail + STAGING_READ > p.rbuf.len() {
                p.rbuf.copy_within(p.rhead..p.rtail, 0);
                p.rtail -= p.rhead;
                p.rhead = 0;
            }
            let staged_empty = p.rhead == p.rtail;
            let Peer {
                stream,
                inbound: second,
                rstate,
                rbuf,
                rtail,
                targets,
                ..
            } = p;
            let Some(stream) = (if inbound { second } else { stream }).as_mut() else {
                return;
            };
            let (res, into, offered) = match rstate {
                ReadState::Payload { buf, have, .. }
                    if staged_empty && buf.len() - *have >= DIRECT_READ_MIN =>
                {
                    (
                        stream.read(&mut buf[*have..]),
                        Into::Payload,
                        buf.len() - *have,
                    )
                }
                ReadState::Data { key, pos, end, .. }
                    if staged_empty && {
                        let cap = targets.get(key).map_or(0, |t| t.buf.len() as u64);
                        (*end).min(cap).saturating_sub(*pos) as usize >= DIRECT_READ_MIN
                    } =>
                {
                    let t = &targets[key];
                    let k = (*end).min(t.buf.len() as u64) - *pos;
                    let dst = t.buf.sub(*pos as usize, k as usize).expect("in bounds");
                    // SAFETY: a rendezvous target is written by this
                    // transport alone until its data is complete, and no
                    // other slice of it is alive during this read.
                    let into = unsafe { dst.as_mut_slice() };
                    (stream.read(into), Into::Data, k as usize)
                }
                _ => {
                    let end = (*rtail + STAGING_READ).min(rbuf.len());
                    (
                        stream.read(&mut rbuf[*rtail..end]),
                        Into::Staging,
                        end - *rtail,
                    )
                }
            };
            match res {
                Ok(0) if self.peers[peer].inbound.is_some() => {
                    self.close_one(peer, inbound, out);
                    return;
                }
                Ok(0) => {
                    self.lose(peer, "connection closed by peer".into(), out);
                    return;
                }
                Ok(n) => {
                    budget = budget.saturating_sub(n);
                    // A read that did not fill what we offered drained the
                    // socket: stop here instead of paying for an EAGAIN
                    // (level-triggered epoll reports any later data).
                    if n < offered {
                        budget = 0;
                    }
                    let p = &mut self.peers[peer];
                    match (into, &mut p.rstate) {
                        (Into::Staging, _) => p.rtail += n,
                        (Into::Payload, ReadState::Payload { have, .. }) => *have += n,
                        (Into::Data, ReadState::Data { key, pos, end, len }) => {
                            *pos += n as u64;
                            if *pos == *end {
                                let (key, len) = (*key, *len);
                                p.rstate = ReadState::Header;
                                self.frame_done(peer, key, len, out);
                            }
                        }
                        _ => unreachable!("the read state does not change during a read"),
                    }
                }
                Err(e) if would_block(&e) => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.lose(peer, format!("read failed: {e}"), out);
                    return;
                }
            }
        }
    }
}
