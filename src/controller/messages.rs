//! The control connections: accepting them, reading their messages, and
//! what each message from a rank changes.

use super::*;
use mpistages_control::rankset::RankSet;

impl Job {
    pub(super) fn accept(&mut self) {
        while let Ok((stream, _)) = self.listener.accept() {
            self.adopt(ControlStream::Unix(stream));
        }
    }

    /// A new control connection (a rank's or a spare's): watched until it
    /// says who it is.
    pub(super) fn adopt(&mut self, stream: ControlStream) {
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let slot = self.free_slot();
        let token = TOKEN_CONN + slot as u64;
        if self
            .epoll
            .add(stream.as_raw_fd(), epoll::READABLE, token)
            .is_ok()
        {
            self.conns[slot] = Some(Conn::new(Wire::Stream(stream, Decoder::default())));
        }
    }

    /// A connection that comes through an agent: `host`'s number `conn`.
    pub(super) fn adopt_relayed(&mut self, host: usize, conn: u32) -> usize {
        let slot = self.free_slot();
        self.conns[slot] = Some(Conn::new(Wire::Agent { host, conn }));
        slot
    }

    fn free_slot(&mut self) -> usize {
        self.conns
            .iter()
            .position(Option::is_none)
            .unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            })
    }

    pub(super) fn close(&mut self, slot: usize) {
        match self.conns[slot].take().map(|c| c.wire) {
            Some(Wire::Stream(s, _)) => {
                let _ = self.epoll.delete(s.as_raw_fd());
            }
            Some(Wire::Agent { host, conn }) => self.relayed_closed(host, conn),
            None => {}
        }
        // The slot may be reused by another process's connection.
        for r in &mut self.ranks {
            if r.conn == Some(slot) {
                r.conn = None;
            }
        }
        self.spares.disconnected(slot);
    }

    pub(super) fn on_conn(&mut self, slot: usize) {
        let Some(Conn {
            wire: Wire::Stream(stream, dec),
            ..
        }) = self.conns[slot].as_mut()
        else {
            return;
        };
        let closed = dec.read_available(stream);
        loop {
            let Some(Conn {
                wire: Wire::Stream(_, dec),
                ..
            }) = self.conns[slot].as_mut()
            else {
                return;
            };
            match dec.next_message::<ToController>() {
                Ok(Some(msg)) => {
                    self.traffic.received(msg.kind());
                    if !self.handle(slot, msg) {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    crate::say!("mpiexec: dropped a control connection: {e}");
                    self.close(slot);
                    return;
                }
            }
        }
        if closed {
            self.close(slot);
        }
    }

    /// Handles `msg` from connection `slot`; false when it broke the
    /// protocol and the connection is dropped.
    pub(super) fn handle(&mut self, slot: usize, msg: ToController) -> bool {
        match self.on_message(slot, msg) {
            Ok(()) => true,
            Err(why) => {
                crate::say!("mpiexec: dropped a control connection: {why}");
                self.close(slot);
                false
            }
        }
    }

    fn on_message(&mut self, slot: usize, msg: ToController) -> Result<(), String> {
        let conn_rank = self.conns[slot].as_ref().and_then(|c| c.rank);
        match (msg, conn_rank) {
            (
                ToController::Hello {
                    key, rank, addr, ..
                },
                None,
            ) => {
                let rank = rank as usize;
                self.check_key(&key)?;
                let assigned = self.conns[slot].as_ref().and_then(|c| c.assigned);
                if rank >= self.ranks.len()
                    || self.ranks[rank].hello.is_some()
                    || assigned.is_some_and(|a| a != rank)
                {
                    return Err(format!("unexpected hello from rank {rank}"));
                }
                let addr = addr.parse().map_err(|_| {
                    format!("rank {rank}'s address '{addr}' is not an IP address and port")
                })?;
                self.ranks[rank].hello = Some(addr);
                self.ranks[rank].conn = Some(slot);
                if let Some(c) = self.conns[slot].as_mut() {
                    c.rank = Some(rank);
                }
                self.welcome();
            }
            (ToController::Finalizing, Some(r)) => {
                self.ranks[r].finalizing = true;
                self.finalizing_in_recovery(r);
            }
            (ToController::FinalizeBarrier { durable }, Some(r)) => {
                let world = self.ranks[r].world.clone();
                if let finalize::Arrival::Done { ranks, durable } =
                    self.finalize.arrive(r, world, durable)?
                {
                    let ranks: Vec<usize> = ranks.collect();
                    self.send_many(&ranks, &ToRank::Finalized { durable });
                }
            }
            (ToController::Abort { code, message }, Some(r)) => {
                if self.failure.is_none() {
                    let extra = if message.is_empty() {
                        String::new()
                    } else {
                        format!(": {message}")
                    };
                    crate::say!("mpiexec: rank {r} called MPI_Abort with error code {code}{extra}; terminating the job");
                }
                self.fail(Failure::Abort { code });
            }
            (ToController::Fatal { code, message }, Some(r)) => {
                if self.failure.is_none() {
                    crate::say!("mpiexec: rank {r} ends the job: {message}");
                }
                self.fail(Failure::Abort { code });
            }
            (ToController::Checkpoint { epoch, durable }, Some(r)) => {
                self.on_checkpoint(r, epoch, durable)
            }
            (ToController::Halted { generation }, Some(r)) => {
                let resume = self.rec.halted(r, generation, Instant::now());
                self.resume(resume);
            }
            (ToController::Ready { generation, newest }, Some(r)) => {
                let resume = self.rec.ready(r, generation, newest, Instant::now());
                self.resume(resume);
            }
            (ToController::Restored { generation, epoch }, Some(r)) => {
                let done = self.rec.restored(r, generation, epoch);
                self.report_done(done);
            }
            (ToController::PeerBroken { rank, reason }, Some(r)) => {
                self.end_broken_rank(r, rank as usize, &reason)
            }
            (ToController::Injecting { spec }, Some(r)) => {
                if let Some(f) = self.fired.get_mut(spec) {
                    *f = Fate::Fired;
                }
                self.ranks[r].killed_at = Some(Instant::now());
            }
            (ToController::Spare { key, pid }, None) => {
                self.check_key(&key)?;
                if !self.spares.connected(pid as i32, slot) {
                    return Err(format!("unexpected spare (pid {pid})"));
                }
            }
            (ToController::Revoke { context, members }, Some(r)) => {
                self.on_revoke(r, context, members)
            }
            (
                ToController::Agree {
                    context,
                    seq,
                    members,
                    flag,
                    acked,
                    proposal,
                },
                Some(r),
            ) => {
                let c = agreement::Contribution {
                    flag,
                    acked,
                    context: proposal,
                };
                self.on_agree(r, (context, seq), members, c)?
            }
            (ToController::Spawn(args), Some(r)) => self.on_spawn(r, args),
            (ToController::Name(req), Some(r)) => {
                let answer = self.names.handle(req);
                self.send_to(r, &answer);
            }
            (ToController::Spare { .. }, Some(r)) => {
                return Err(format!("rank {r} says it is a spare"))
            }
            (_, None) => return Err("message before hello".into()),
            (ToController::Hello { .. }, Some(r)) => {
                return Err(format!("second hello from rank {r}"))
            }
        }
        Ok(())
    }

    pub(super) fn check_key(&self, key: &[u8]) -> Result<(), String> {
        if mpistages_sys::constant_time_eq(key, self.key.as_bytes()) {
            Ok(())
        } else {
            Err("wrong job key".into())
        }
    }

    /// Sends a message to a rank's current process (small: a blocking write
    /// is brief). A rank that is gone is skipped: its exit is handled apart.
    pub(super) fn send_to(&mut self, rank: usize, msg: &ToRank) {
        if let Some(slot) = self.ranks[rank].conn {
            let _ = self.send_on(slot, msg);
        }
    }

    pub(super) fn send_on(&mut self, slot: usize, msg: &ToRank) -> std::io::Result<()> {
        self.send_on_slots(&[slot], msg)
    }

    /// Sends one message to each of `ranks`, encoded once (a Welcome holds
    /// every rank's address: encoding it per rank was O(ranks²)), and
    /// once to each agent for all its ranks.
    pub(super) fn send_many(&mut self, ranks: &[usize], msg: &ToRank) {
        let slots: Vec<usize> = ranks.iter().filter_map(|&r| self.ranks[r].conn).collect();
        let _ = self.send_on_slots(&slots, msg);
    }

    fn send_on_slots(&mut self, slots: &[usize], msg: &ToRank) -> std::io::Result<()> {
        let mut bytes = None;
        let mut via: std::collections::BTreeMap<usize, RankSet> = Default::default();
        let mut result = Ok(());
        for &slot in slots {
            match self.conns[slot].as_mut().map(|c| &mut c.wire) {
                Some(Wire::Stream(s, _)) => {
                    self.traffic.sent(msg.kind(), 1);
                    let bytes = bytes.get_or_insert_with(|| proto::encode(msg));
                    result = write_blocking(s, bytes);
                }
                Some(Wire::Agent { host, conn }) => via.entry(*host).or_default().insert(*conn),
                None => result = Err(std::io::ErrorKind::NotConnected.into()),
            }
        }
        if !via.is_empty() {
            let (sent, ok) = self.relay_down(via, msg);
            self.traffic.sent(msg.kind(), sent as u64);
            if !ok {
                result = Err(std::io::ErrorKind::BrokenPipe.into());
            }
        }
        result
    }

    /// The bootstrap fence, also for replacements: once every process not
    /// yet welcomed has said hello, each of them gets everyone's address.
    pub(super) fn welcome(&mut self) {
        let pending: Vec<usize> = (0..self.ranks.len())
            .filter(|&r| !self.ranks[r].welcomed)
            .collect();
        if pending.is_empty() || pending.iter().any(|&r| self.ranks[r].hello.is_none()) {
            return;
        }
        // A process that has ended has no address: a later one (spawned,
        // or a replacement) does not connect to it. Without rollbacks (the
        // modes that spawn) neither has one ending in MPI_Finalize; with
        // them, a replacement meets it in the finalizing barrier.
        let no_rollback = matches!(self.opts.recovery, RecoveryMode::None | RecoveryMode::Ulfm);
        let generation = self.rec.generation();
        for &r in &pending {
            self.ranks[r].born = generation;
        }
        let mut hosts: Vec<String> = Vec::new();
        let mut index: std::collections::HashMap<std::net::IpAddr, u32> = Default::default();
        let addrs = self
            .ranks
            .iter()
            .map(
                |r| match (r.exit.is_some() || (r.finalizing && no_rollback), r.hello) {
                    (false, Some(a)) => {
                        let h = *index.entry(a.ip()).or_insert_with(|| {
                            hosts.push(a.ip().to_string());
                            hosts.len() as u32 - 1
                        });
                        (h, a.port())
                    }
                    _ => (proto::NO_ADDRESS, 0),
                },
            )
            .collect();
        let msg = ToRank::Welcome {
            born: self.ranks.iter().map(|r| r.born).collect(),
            hosts,
            addrs,
            generation,
            epoch: self.rec.restart_epoch(),
            fresh: pending.iter().map(|&r| r as u32).collect(),
        };
        self.send_many(&pending, &msg);
        for &r in &pending {
            self.ranks[r].welcomed = true;
        }
        if self.bootstrapped && pending.len() < self.ranks.len() {
            // The others learn their addresses with the resume (a
            // relaunched job's ranks all had them in this Welcome).
            self.joined.extend(&pending);
        }
        self.bootstrapped = true;
        self.top_up_spares();
        self.spawn_welcomed();
    }

    pub(super) fn on_checkpoint(&mut self, rank: usize, epoch: u64, durable: Option<u64>) {
        if let Some((epoch, durable)) = self.rec.checkpoint(rank, epoch, durable) {
            let all: Vec<usize> = (0..self.ranks.len()).collect();
            self.send_many(&all, &ToRank::Committed { epoch, durable });
        }
    }

    /// Rank `by` can no longer talk to rank `rank` (its connection broke
    /// the protocol): `rank` is ended and handled as any failed rank, so no
    /// rank waits for it forever.
    pub(super) fn end_broken_rank(&mut self, by: usize, rank: usize, reason: &str) {
        let Some(st) = self.ranks.get_mut(rank) else {
            return;
        };
        let (Some(p), None) = (&st.proc, st.exit) else {
            return;
        };
        if self.failure.is_some() || !st.welcomed {
            return;
        }
        crate::say!(
            "mpiexec: rank {by} reports that its connection to rank {rank} failed ({reason}); ending rank {rank} (pid {}) as failed",
            p.pid
        );
        p.signal(libc::SIGKILL);
        st.killed_at = Some(Instant::now());
    }
}

/// Writes a small message whole (a blocking write is brief).
fn write_blocking(s: &mut ControlStream, bytes: &[u8]) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    let sent = s.write_all(bytes);
    let _ = s.set_nonblocking(true);
    sent
}
