//! The sending side's reliability (see `reliable.rs`): acknowledgements
//! taken in, losses found by time (RACK), the tail probe (TLP) and the
//! retransmission timeout, the congestion window and the round-trip
//! estimate.

use super::*;

impl Reliable {
    pub(super) fn next_xmit(&mut self) -> u64 {
        self.xmits += 1;
        self.xmits
    }

    /// Sends segment `seq` again (a new transmission).
    pub(super) fn resend_segment(&mut self, seq: u64, now: Instant) -> Packet {
        let xmit = self.next_xmit();
        self.stats.resent += 1;
        let seg = self.flight.get_mut(&seq).expect("a segment in flight");
        if seg.lost {
            seg.lost = false;
            self.lost_bytes -= seg.len as u64;
        }
        seg.sent_at = now;
        seg.xmit = xmit;
        seg.resent = true;
        let len = seg.len;
        self.last_data_sent = now;
        self.data_packet(seq, len)
    }

    pub(super) fn mark_lost(&mut self, seq: u64) {
        let seg = self.flight.get_mut(&seq).expect("a segment in flight");
        if !seg.lost && !seg.sacked {
            seg.lost = true;
            self.lost_bytes += seg.len as u64;
            self.resend.push_back(seq);
        }
    }

    /// `n` segments found lost: the first of a round trip begins an
    /// episode, judged at its end (`end_episode`).
    pub(super) fn on_losses(&mut self, n: u64) {
        if self.recovery_until.is_none() {
            let mss = self.cfg.mss as u64;
            self.recovery_until = Some(self.snd_nxt);
            self.episode_segments = (self.snd_nxt - self.snd_una).div_ceil(mss);
            self.episode_xmits = self.xmits;
            self.episode_lost = 0;
        }
        self.episode_lost += n;
    }

    /// A round trip with losses is over. More than one in eight of the
    /// segments it had in flight and sent lost is congestion: the window
    /// halves. Fewer is taken for noise (a corrupted frame, the fault
    /// injector): halving the window for each such round trip would leave
    /// a stream that loses 5% of its packets at a few segments per round
    /// trip (Reno's sqrt(2/p)), and the packets lost are sent again all
    /// the same.
    pub(super) fn end_episode(&mut self) {
        self.recovery_until = None;
        let segments = self.episode_segments + (self.xmits - self.episode_xmits);
        if self.episode_lost * 8 > segments {
            let mss = self.cfg.mss as u64;
            self.ssthresh = (self.cwnd / 2).max(2 * mss);
            self.cwnd = self.ssthresh;
        }
    }

    /// RACK: a segment is lost when one sent after it was delivered and
    /// that one's round trip, plus the reordering window, has passed
    /// since it was sent; the earliest such moment to come is kept.
    pub(super) fn detect_losses(&mut self, now: Instant) {
        self.reo_deadline = None;
        let Some((rack_xmit, rack_rtt)) = self.rack else {
            return;
        };
        let reo = self.min_rtt.unwrap_or(rack_rtt) / 4;
        let mut lost = Vec::new();
        for (&seq, seg) in self.flight.range(..self.sack_top) {
            if seg.sacked || seg.lost || seg.xmit >= rack_xmit {
                continue;
            }
            let due = seg.sent_at + rack_rtt + reo;
            if now >= due {
                lost.push(seq);
            } else {
                self.reo_deadline = Some(self.reo_deadline.map_or(due, |d| d.min(due)));
            }
        }
        if !lost.is_empty() {
            self.stats.detected += lost.len() as u64;
            let n = lost.len() as u64;
            for seq in lost {
                self.mark_lost(seq);
            }
            self.on_losses(n);
        }
    }

    /// When a tail probe goes if nothing is heard: two round trips after
    /// the last data sent (and the peer's acknowledgement delay when a
    /// lone segment waits for it).
    pub(super) fn probe_deadline(&self) -> Option<Instant> {
        if self.probe_sent || self.flight.is_empty() || !self.resend.is_empty() {
            return None;
        }
        let srtt = self.srtt.unwrap_or(Duration::from_millis(1));
        let pipe = self.snd_nxt - self.snd_una - self.sacked_bytes - self.lost_bytes;
        let delack = if pipe <= self.cfg.mss as u64 {
            self.cfg.ack_delay
        } else {
            Duration::ZERO
        };
        Some(self.last_data_sent + 2 * srtt + delack)
    }

    /// The oldest transmission neither acknowledged nor known lost, and
    /// when its retransmission timeout expires.
    pub(super) fn rto_deadline(&self) -> Option<Instant> {
        self.flight
            .values()
            .filter(|s| !s.sacked && !s.lost)
            .map(|s| s.sent_at)
            .min()
            .map(|t| t + self.rto)
    }

    /// When `on_timeout` must run next (retransmission, loss detection,
    /// tail probe, a delayed acknowledgement, keepalive, death).
    pub fn next_timeout(&self) -> Instant {
        let mut t = (self.last_sent + self.cfg.keepalive).min(self.heard + self.cfg.dead_after);
        for d in [
            self.rto_deadline(),
            self.reo_deadline,
            self.probe_deadline(),
            self.ack_by,
        ]
        .into_iter()
        .flatten()
        {
            t = t.min(d);
        }
        t
    }

    /// Timers: losses found by time, a tail probe, the retransmission
    /// timeout (everything in flight is lost; the timeout doubles); a
    /// silent peer is dead.
    pub fn on_timeout(&mut self, now: Instant) -> Result<(), StreamError> {
        // This side was not running for a while: what it did not hear
        // then says nothing of the peer. It gets a whole limit again.
        if now.saturating_duration_since(self.ticked) > self.cfg.dead_after / 4 {
            self.heard = self.heard.max(now);
        }
        self.ticked = now;
        if now.duration_since(self.heard) >= self.cfg.dead_after {
            return Err(StreamError::Dead);
        }
        self.detect_losses(now);
        if self.rto_deadline().is_some_and(|t| now >= t) {
            self.stats.timeouts += 1;
            self.rto = (self.rto * 2).min(self.cfg.max_rto);
            let mss = self.cfg.mss as u64;
            let pipe = self.snd_nxt - self.snd_una - self.sacked_bytes - self.lost_bytes;
            self.ssthresh = (pipe / 2).max(2 * mss);
            self.cwnd = 2 * mss;
            // The window is cut already: the episode's end cuts no more.
            self.recovery_until = Some(self.snd_nxt);
            self.episode_lost = 0;
            let all: Vec<u64> = self.flight.keys().copied().collect();
            for seq in all {
                self.mark_lost(seq);
            }
            // A segment lost again must wait for the timeout no more.
            self.probe_sent = false;
        } else if self.probe_deadline().is_some_and(|t| now >= t) {
            self.stats.probes += 1;
            self.probe_sent = true;
            self.probe_due = true;
        }
        Ok(())
    }

    pub(super) fn on_ack(
        &mut self,
        ack: u64,
        room: u64,
        sack: &[(u64, u64)],
        now: Instant,
    ) -> Result<(), StreamError> {
        if ack > self.snd_nxt {
            return Err(StreamError::Malformed(format!(
                "acknowledges byte {ack}, {} sent",
                self.snd_nxt
            )));
        }
        self.peer_room = room;
        // The delivered transmission sent last (RACK); a retransmission
        // acknowledged sooner than the least round trip was probably the
        // original's acknowledgement, and says nothing.
        let mut newest: Option<(u64, Duration)> = None;
        let mut delivered = |seg: &Segment, min_rtt: Option<Duration>| {
            let rtt = now.duration_since(seg.sent_at);
            if seg.resent && min_rtt.is_some_and(|m| rtt < m) {
                return;
            }
            if newest.is_none_or(|(x, _)| seg.xmit > x) {
                newest = Some((seg.xmit, rtt));
            }
        };
        let mut progress = false;
        if ack > self.snd_una {
            progress = true;
            let mut sample = None;
            while let Some((&s, seg)) = self.flight.first_key_value() {
                if s + seg.len as u64 > ack {
                    break;
                }
                if !seg.resent {
                    sample = Some(now.duration_since(seg.sent_at));
                }
                if !seg.sacked {
                    delivered(seg, self.min_rtt);
                }
                let seg = self.flight.pop_first().expect("just seen").1;
                if seg.sacked {
                    self.sacked_bytes -= seg.len as u64;
                }
                if seg.lost {
                    self.lost_bytes -= seg.len as u64;
                }
            }
            // An acknowledgement within a segment (ours come at segment
            // ends only) leaves the segment's rest in flight from `ack`:
            // no segment begins before the bytes held.
            if self.flight.first_key_value().is_some_and(|(&s, _)| s < ack) {
                let (s, mut seg) = self.flight.pop_first().expect("just seen");
                let cut = ack - s;
                seg.len -= cut as usize;
                if seg.sacked {
                    self.sacked_bytes -= cut;
                }
                if seg.lost {
                    self.lost_bytes -= cut;
                    self.resend.push_back(ack);
                }
                self.flight.insert(ack, seg);
            }
            let acked = ack - self.snd_una;
            self.sbuf.drain(acked as usize, &mut self.completed);
            self.snd_una = ack;
            if self.recovery_until.is_some_and(|r| ack >= r) {
                self.end_episode();
            }
            // The window grows during an episode too: its end halves it if
            // the losses were congestion.
            let mss = self.cfg.mss as u64;
            self.cwnd = if self.cwnd < self.ssthresh {
                self.cwnd + acked
            } else {
                self.cwnd + (mss * acked / self.cwnd).max(1)
            }
            .min(self.cfg.window as u64);
            if let Some(r) = sample {
                self.rtt_sample(r);
            }
        }
        if !sack.is_empty() {
            let (low, high) = (sack[0].0, sack.iter().map(|r| r.1).max().unwrap_or(0));
            self.sack_top = self.sack_top.max(high);
            let (mut newly, mut not_lost) = (0, 0);
            for (&k, seg) in self.flight.range_mut(low..high) {
                let e = k + seg.len as u64;
                if seg.sacked || !sack.iter().any(|&(a, b)| a <= k && e <= b) {
                    continue;
                }
                seg.sacked = true;
                newly += seg.len as u64;
                if seg.lost {
                    // It arrived after all (late, not lost).
                    seg.lost = false;
                    not_lost += seg.len as u64;
                }
                delivered(seg, self.min_rtt);
            }
            self.sacked_bytes += newly;
            self.lost_bytes -= not_lost;
            progress |= newly > 0;
        }
        if progress {
            self.probe_sent = false;
        }
        if let Some((x, rtt)) = newest {
            if self.rack.is_none_or(|(rx, _)| x > rx) {
                self.rack = Some((x, rtt));
            }
        }
        self.detect_losses(now);
        Ok(())
    }

    pub(super) fn rtt_sample(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let d = s.abs_diff(r);
                self.rttvar = (self.rttvar * 3 + d) / 4;
                self.srtt = Some((s * 7 + r) / 8);
            }
        }
        self.min_rtt = Some(self.min_rtt.map_or(r, |m| m.min(r)));
        let s = self.srtt.expect("set above");
        self.rto = (s + (self.rttvar * 4).max(Duration::from_micros(500)))
            .clamp(self.cfg.min_rto, self.cfg.max_rto);
    }
}
