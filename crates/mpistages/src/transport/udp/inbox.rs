//! The receiving side's buffer of a UDP stream: the bytes that arrived in
//! order and wait for the reader, with room after them where the next
//! packet's data is received straight from the socket. A packet that
//! continues the stream then costs no copy between the kernel's and the
//! reader's; one that arrived early is copied aside (`Reliable::ooo`).

pub(super) struct Inbox {
    /// `buf[at..end]` waits for the reader; packets land at `buf[end..]`.
    buf: Vec<u8>,
    at: usize,
    end: usize,
}

impl Inbox {
    pub(super) fn new() -> Inbox {
        Inbox {
            buf: Vec::new(),
            at: 0,
            end: 0,
        }
    }

    /// Bytes waiting for the reader.
    pub(super) fn len(&self) -> usize {
        self.end - self.at
    }

    pub(super) fn is_empty(&self) -> bool {
        self.at == self.end
    }

    /// `n` bytes of room after the bytes in order, where the next packet's
    /// data is to land. The waiting bytes move to the front when they are
    /// no more than those already read (so a byte moves at most once per
    /// byte read), else the buffer grows: it stays within twice the most
    /// bytes ever waiting, plus `n`.
    pub(super) fn space(&mut self, n: usize) -> &mut [u8] {
        if self.at == self.end {
            (self.at, self.end) = (0, 0);
        }
        if self.end + n > self.buf.len() && self.at > 0 && self.len() <= self.at {
            self.buf.copy_within(self.at..self.end, 0);
            (self.at, self.end) = (0, self.len());
        }
        if self.end + n > self.buf.len() {
            self.buf.resize(self.end + n, 0);
        }
        &mut self.buf[self.end..self.end + n]
    }

    /// The `n` bytes that landed in `space`.
    pub(super) fn landed(&self, n: usize) -> &[u8] {
        &self.buf[self.end..self.end + n]
    }

    /// Of the `n` bytes that landed in `space`, those from `skip` on join
    /// the bytes in order (the first `skip` had arrived before).
    pub(super) fn commit(&mut self, skip: usize, n: usize) {
        if skip > 0 {
            self.buf
                .copy_within(self.end + skip..self.end + n, self.end);
        }
        self.end += n - skip;
    }

    /// Appends `bytes` (data that had arrived early).
    pub(super) fn push(&mut self, bytes: &[u8]) {
        self.space(bytes.len()).copy_from_slice(bytes);
        self.end += bytes.len();
    }

    /// Moves waiting bytes into `out`; how many.
    pub(super) fn read(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.len());
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_come_out_in_order_and_the_buffer_stays_bounded() {
        let mut inbox = Inbox::new();
        let mut next_in = 0u32;
        let mut next_out = 0u32;
        let mut out = [0u8; 700];
        let mut peak = 0;
        for round in 0..2000 {
            // Packets of varied sizes land in place, some with a head the
            // reader had already (a partial duplicate).
            let n = 1 + (round * 7919) % 1500;
            let skip = if round % 5 == 0 { n / 3 } else { 0 };
            let space = inbox.space(n);
            for (i, b) in space.iter_mut().enumerate().skip(skip) {
                *b = (next_in + (i - skip) as u32) as u8;
            }
            inbox.commit(skip, n);
            next_in += (n - skip) as u32;
            if round % 3 == 0 {
                inbox.push(&[next_in as u8]);
                next_in += 1;
            }
            peak = peak.max(inbox.len());
            // The reader takes less than arrives, then catches up.
            let want = if round % 10 < 7 { 300 } else { 700 };
            let k = inbox.read(&mut out[..want]);
            for &b in &out[..k] {
                assert_eq!(b, next_out as u8);
                next_out += 1;
            }
            assert!(
                inbox.buf.len() <= 2 * peak + 1500,
                "{} for {peak}",
                inbox.buf.len()
            );
        }
        while !inbox.is_empty() {
            let k = inbox.read(&mut out);
            for &b in &out[..k] {
                assert_eq!(b, next_out as u8);
                next_out += 1;
            }
        }
        assert_eq!(next_in, next_out);
    }
}
