//! The write side: queued frames to the socket, urgent frames first, in
//! vectored `sendmsg` calls that never raise SIGPIPE.

use super::*;

impl Tcp {
    /// An urgent frame for a connection with nothing queued goes out at
    /// once, without the queues and the wire list (most frames — eager
    /// messages, CTS, acknowledgements — find nothing before them). What
    /// does not go whole joins the wire list, for `flush`.
    pub(super) fn write_now(&mut self, peer: usize, mut f: OutFrame, out: &mut Vec<Event>) {
        let p = &mut self.peers[peer];
        let Some(stream) = p.stream.as_mut() else {
            return p.urgent.push_back(f);
        };
        if Header::data_rid(&f.header).is_some() {
            return p.urgent.push_back(f);
        }
        Header::stamp_seq(&mut f.header, p.sent_seq);
        p.sent_seq += 1;
        let iov = [IoSlice::new(&f.header), IoSlice::new(f.payload.bytes())];
        let parts = if f.payload.bytes().is_empty() { 1 } else { 2 };
        match stream.write_vectored(&iov[..parts]) {
            Ok(n) if n == f.wire_len() => {
                if let Some(token) = f.token {
                    out.push(Event::Sent { token });
                }
            }
            // Partly written, no room, or an error: `flush` goes on from
            // here (and reports what happened).
            res => {
                p.woff = res.unwrap_or_default();
                p.wire.push_back((f, Class::Urgent));
            }
        }
    }

    /// `Transport::send_now`: an idle shared-memory connection with room
    /// takes the frame whole; anything else gives it back untouched (a
    /// frame must not overtake those queued before it).
    pub(super) fn write_whole(&mut self, peer: usize, mut f: OutFrame) -> Result<(), OutFrame> {
        let Some(p) = self.peers.get_mut(peer) else {
            return Err(f);
        };
        if p.lost || p.want_write || p.backlog() || Header::data_rid(&f.header).is_some() {
            return Err(f);
        }
        let Some(stream) = p.stream.as_mut() else {
            return Err(f);
        };
        Header::stamp_seq(&mut f.header, p.sent_seq);
        let iov = [IoSlice::new(&f.header), IoSlice::new(f.payload.bytes())];
        let parts = if f.payload.bytes().is_empty() { 1 } else { 2 };
        match stream.write_whole(&iov[..parts]) {
            Ok(true) => {
                p.sent_seq += 1;
                Ok(())
            }
            // No room, a socket, or a broken ring: the ordinary path
            // queues it (and reports the error).
            _ => Err(f),
        }
    }

    /// Writes queued frames until the socket is full, nothing is left, or
    /// the write budget is spent (then write interest brings us back).
    pub(super) fn flush(&mut self, peer: usize, out: &mut Vec<Event>) {
        let mut budget = WRITE_BUDGET;
        loop {
            let p = &mut self.peers[peer];
            let Some(stream) = p.stream.as_mut() else {
                return;
            };
            let by_ref = stream.by_reference();
            let lends = stream.lends();
            // Refill the wire list: urgent frames first, then at most one bulk
            // fragment, so later urgent frames wait for one fragment at most.
            // Each frame gets its `seq` as it joins the wire list.
            while p.wire.len() < MAX_IOV / 2 {
                let (mut f, class) = if let Some(f) = p.urgent.pop_front() {
                    (f, Class::Urgent)
                } else if !p.wire.iter().any(|(_, c)| *c == Class::Bulk) {
                    match p.bulk.pop_front() {
                        Some(f) => (f, Class::Bulk),
                        None => break,
                    }
                } else {
                    break;
                };
                if class == Class::Bulk && by_ref {
                    f = by_reference(f, &mut p.refs);
                }
                Header::stamp_seq(&mut f.header, p.sent_seq);
                p.sent_seq += 1;
                p.wire.push_back((f, class));
            }
            if p.wire.is_empty() {
                self.set_write_interest(peer, false);
                return;
            }
            // Checked only once something is left to write: write interest
            // left on with nothing queued would hold back the next frame
            // where no writability event comes (UDP, shared memory).
            if budget == 0 {
                self.set_write_interest(peer, true);
                return;
            }
            let mut iov = [IoSlice::new(&[]); MAX_IOV];
            // Pieces of large messages' data that UDP may keep by reference
            // (no array at all for the other connections: a hot path).
            let mut lend = lends.then_some([None; MAX_IOV]);
            let mut n_iov = 0;
            let mut skip = p.woff;
            'frames: for (f, class) in p.wire.iter() {
                for (i, part) in [&f.header[..], f.payload.bytes()].into_iter().enumerate() {
                    if skip >= part.len() {
                        skip -= part.len();
                        continue;
                    }
                    iov[n_iov] = IoSlice::new(&part[skip..]);
                    if let (Some(lend), Payload::Borrowed(buf)) = (lend.as_mut(), &f.payload) {
                        if i == 1 && *class == Class::Bulk && part.len() >= LEND_MIN {
                            lend[n_iov] = buf.sub(skip, part.len() - skip);
                        }
                    }
                    n_iov += 1;
                    skip = 0;
                    if n_iov == MAX_IOV {
                        break 'frames;
                    }
                }
            }
            let iov = &iov[..n_iov];
            let res = match &lend {
                Some(lend) => stream.write_lending(iov, &lend[..n_iov]),
                None => stream.write_vectored(iov),
            };
            match res {
                Ok(0) => {
                    self.lose(peer, "connection closed while writing".into(), out);
                    return;
                }
                Ok(mut n) => {
                    budget = budget.saturating_sub(n);
                    let p = &mut self.peers[peer];
                    while n > 0 {
                        let left = p.wire[0].0.wire_len() - p.woff;
                        if n >= left {
                            n -= left;
                            p.woff = 0;
                            let (f, class) = p.wire.pop_front().expect("non-empty wire");
                            if let Some(token) = f.token {
                                let stream = p.stream.as_mut().expect("written to");
                                // Earlier frames of its transfer that went
                                // by reference may not be copied yet, or
                                // (UDP) not yet acknowledged: its buffer
                                // may still be read.
                                match Header::data_rid(&f.header).and_then(|r| p.refs.get_mut(&r)) {
                                    Some(refs) => refs.token = Some(token),
                                    None if class == Class::Bulk && stream.lent() > 0 => {
                                        stream.mark(token, n)
                                    }
                                    None => out.push(Event::Sent { token }),
                                }
                            }
                        } else {
                            p.woff += n;
                            n = 0;
                        }
                    }
                    if let Some(s) = p.stream.as_mut() {
                        s.send_written();
                    }
                }
                Err(e) if would_block(&e) => {
                    self.set_write_interest(peer, true);
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.lose(peer, format!("write failed: {e}"), out);
                    return;
                }
            }
        }
    }
}

/// A DATA frame of a large user buffer as a DATA_REF: the peer copies the
/// bytes from this process's memory and answers REF_DONE, which reports
/// the frame's token (the buffer stays untouched until then, as the send
/// is not complete before).
fn by_reference(f: OutFrame, refs: &mut HashMap<u64, Refs>) -> OutFrame {
    let Payload::Borrowed(buf) = &f.payload else {
        return f;
    };
    if buf.len() < BY_REFERENCE_MIN {
        return f;
    }
    let Some((header, rid, _)) = Header::data_to_ref(&f.header) else {
        return f;
    };
    let mut desc = (buf.ptr() as u64).to_le_bytes().to_vec();
    desc.extend_from_slice(&(buf.len() as u64).to_le_bytes());
    let r = refs.entry(rid).or_default();
    r.outstanding += 1;
    if f.token.is_some() {
        r.token = f.token;
    }
    OutFrame {
        header,
        payload: Payload::Owned(desc),
        token: None,
    }
}
