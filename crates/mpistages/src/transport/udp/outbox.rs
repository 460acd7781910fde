//! The sending side's buffer of a UDP stream: every byte written and not
//! yet acknowledged, which the stream may have to send again. Most bytes
//! are copied in (frame headers, small messages); a large message's data
//! is *lent* instead: the buffer keeps a reference to the sender's memory
//! and the message's send stays incomplete until the peer acknowledged its
//! last byte (`mark`), so the memory stays untouched while it may be read —
//! a copy less per byte, as the shared-memory transport's by-reference
//! frames save one.
//!
//! The stream is a list of runs in order, each either bytes of `copied`
//! (which holds the copied runs' bytes back to back) or a lent buffer.

use crate::transport::RawBuf;
use std::collections::VecDeque;
use std::io::IoSlice;

/// The most pieces (of `copied`, or lent buffers) a packet's data is sent
/// from: packets end early rather than span more (`fits`).
pub const MAX_PIECES: usize = 6;

#[derive(Clone, Copy)]
enum Run {
    Copied(usize),
    Lent(RawBuf),
}

impl Run {
    fn len(&self) -> usize {
        match self {
            Run::Copied(n) => *n,
            Run::Lent(b) => b.len(),
        }
    }
}

pub(super) struct Outbox {
    copied: VecDeque<u8>,
    runs: VecDeque<Run>,
    len: usize,
    lent: usize,
    /// Stream offset of the first byte held.
    start: u64,
    /// Tokens to give back once every byte before the offset is
    /// acknowledged, in order of offset.
    marks: VecDeque<(u64, u64)>,
}

impl Outbox {
    pub(super) fn new() -> Outbox {
        Outbox {
            copied: VecDeque::new(),
            runs: VecDeque::new(),
            len: 0,
            lent: 0,
            start: 0,
            marks: VecDeque::new(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held by reference to the sender's memory.
    pub(super) fn lent(&self) -> usize {
        self.lent
    }

    pub(super) fn copy_in(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.copied.extend(bytes);
        match self.runs.back_mut() {
            Some(Run::Copied(n)) => *n += bytes.len(),
            _ => self.runs.push_back(Run::Copied(bytes.len())),
        }
        self.len += bytes.len();
    }

    /// Holds `buf` by reference: its memory must stay valid and unchanged
    /// until a `mark` placed after it comes back from `drain`, or until
    /// `own_all` (the `RawBuf` contract: valid until completion).
    pub(super) fn lend(&mut self, buf: RawBuf) {
        if buf.is_empty() {
            return;
        }
        self.runs.push_back(Run::Lent(buf));
        self.len += buf.len();
        self.lent += buf.len();
    }

    /// `token` comes back from `drain` once every byte held now but the
    /// last `after` is acknowledged.
    pub(super) fn mark(&mut self, token: u64, after: usize) {
        let at = self.start + self.len.saturating_sub(after) as u64;
        debug_assert!(self.marks.back().is_none_or(|&(last, _)| last <= at));
        self.marks.push_back((at, token));
    }

    /// A mark ends within `(from, to]`: the packet carrying those bytes
    /// completes a send, and its acknowledgement should not wait.
    pub(super) fn marked_within(&self, from: u64, to: u64) -> bool {
        self.marks.iter().any(|&(at, _)| from < at && at <= to)
    }

    /// How many of the `len` bytes from stream offset `seq` one packet can
    /// carry: all of them, unless they span more than `MAX_PIECES - 1`
    /// runs (one piece is kept for where `copied` wraps around).
    pub(super) fn fits(&self, seq: u64, len: usize) -> usize {
        let mut off = (seq - self.start) as usize;
        let (mut took, mut runs) = (0, 0);
        for r in &self.runs {
            if off >= r.len() {
                off -= r.len();
                continue;
            }
            if runs == MAX_PIECES - 1 {
                break;
            }
            took += (r.len() - off).min(len - took);
            runs += 1;
            off = 0;
            if took == len {
                break;
            }
        }
        took.max(len.min(1))
    }

    /// The pieces holding the `len` bytes from stream offset `seq`, into
    /// `out`; how many.
    pub(super) fn slices<'a>(&'a self, seq: u64, len: usize, out: &mut [IoSlice<'a>]) -> usize {
        let mut off = (seq - self.start) as usize;
        let (mut left, mut at_copied, mut n) = (len, 0, 0);
        let (a, b) = self.copied.as_slices();
        for r in &self.runs {
            if left == 0 || n == out.len() {
                break;
            }
            let rl = r.len();
            if off >= rl {
                off -= rl;
                if let Run::Copied(k) = r {
                    at_copied += k;
                }
                continue;
            }
            let take = (rl - off).min(left);
            match r {
                Run::Copied(k) => {
                    let (s, e) = (at_copied + off, at_copied + off + take);
                    for part in [
                        &a[s.min(a.len())..e.min(a.len())],
                        &b[s.saturating_sub(a.len())..e.saturating_sub(a.len())],
                    ] {
                        if !part.is_empty() && n < out.len() {
                            out[n] = IoSlice::new(part);
                            n += 1;
                        }
                    }
                    at_copied += k;
                }
                Run::Lent(buf) => {
                    // Valid: see `lend`.
                    out[n] = IoSlice::new(&buf.as_slice()[off..off + take]);
                    n += 1;
                }
            }
            left -= take;
            off = 0;
        }
        n
    }

    /// The first `n` bytes were acknowledged: they are dropped, and the
    /// tokens of marks they complete are pushed to `done`.
    pub(super) fn drain(&mut self, n: usize, done: &mut Vec<u64>) {
        let mut left = n.min(self.len);
        self.len -= left;
        self.start += left as u64;
        while left > 0 {
            let front = self.runs.front_mut().expect("bytes held");
            let take = left.min(front.len());
            match front {
                Run::Copied(k) => {
                    self.copied.drain(..take);
                    *k -= take;
                }
                Run::Lent(buf) => {
                    self.lent -= take;
                    *buf = buf.sub(take, buf.len() - take).expect("within the run");
                }
            }
            if front.len() == 0 {
                self.runs.pop_front();
            }
            left -= take;
        }
        while let Some(&(at, token)) = self.marks.front() {
            if at > self.start {
                break;
            }
            done.push(token);
            self.marks.pop_front();
        }
    }

    /// The sender's sends failed (a failure halted the job): the lent
    /// bytes are copied in place, so the memory they came from may change,
    /// and the marks are forgotten (their sends are never complete).
    pub(super) fn own_all(&mut self) {
        self.marks.clear();
        if self.lent == 0 {
            return;
        }
        let mut copied = VecDeque::with_capacity(self.len);
        let mut at = 0;
        for r in &self.runs {
            match r {
                Run::Copied(k) => {
                    copied.extend(self.copied.range(at..at + k));
                    at += k;
                }
                Run::Lent(buf) => copied.extend(buf.as_slice()),
            }
        }
        self.copied = copied;
        self.runs.clear();
        self.runs.push_back(Run::Copied(self.len));
        self.lent = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gather(o: &Outbox, seq: u64, len: usize) -> Vec<u8> {
        let mut out = [IoSlice::new(&[]); MAX_PIECES];
        let n = o.slices(seq, len, &mut out);
        out[..n].iter().flat_map(|s| s.iter().copied()).collect()
    }

    #[test]
    fn copied_and_lent_runs_read_back_in_order_and_marks_come_back_when_acknowledged() {
        let mut lent_mem: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        // SAFETY: `lent_mem` outlives the outbox's use of it in this test
        // and is not written while lent.
        let buf = unsafe { RawBuf::new(lent_mem.as_mut_ptr(), lent_mem.len()) };
        let mut o = Outbox::new();
        let mut want = Vec::new();
        for round in 0..40u32 {
            let head = vec![round as u8; 7 + round as usize % 13];
            o.copy_in(&head);
            want.extend(&head);
            let part = buf
                .sub(round as usize * 37, 100 + round as usize * 3)
                .unwrap();
            o.lend(part);
            want.extend(part.as_slice());
            o.mark(round as u64, 0);
        }
        assert_eq!(o.len(), want.len());
        let mut seq = 0u64;
        let mut done = Vec::new();
        let mut step = 1;
        while !o.is_empty() {
            // Any range reads back as written, in at most MAX_PIECES pieces.
            let len = o.fits(seq, (want.len() - seq as usize).min(step * 11));
            assert!(len > 0);
            assert_eq!(gather(&o, seq, len), want[seq as usize..seq as usize + len]);
            let marked = o.marked_within(seq, seq + len as u64);
            o.drain(len, &mut done);
            seq += len as u64;
            if marked {
                assert!(!done.is_empty());
            }
            step += 1;
        }
        assert_eq!(done, (0..40).collect::<Vec<u64>>());
        assert_eq!(o.lent(), 0);
    }

    #[test]
    fn owning_the_lent_bytes_keeps_the_stream_and_forgets_the_marks() {
        let mut lent_mem = vec![9u8; 300];
        // SAFETY: as above; the memory is written only after `own_all`.
        let buf = unsafe { RawBuf::new(lent_mem.as_mut_ptr(), lent_mem.len()) };
        let mut o = Outbox::new();
        o.copy_in(b"abc");
        o.lend(buf);
        o.mark(1, 0);
        o.copy_in(b"xyz");
        let mut done = Vec::new();
        o.drain(2, &mut done);
        o.own_all();
        lent_mem.fill(0);
        let got = gather(&o, 2, o.len());
        assert_eq!(got.len(), 1 + 300 + 3);
        assert_eq!(&got[..1], b"c");
        assert!(got[1..301].iter().all(|&b| b == 9));
        assert_eq!(&got[301..], b"xyz");
        o.drain(o.len(), &mut done);
        assert!(done.is_empty(), "a halted send never completes");
    }
}
