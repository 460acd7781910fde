//! What a member of a redundancy set holds for one epoch: its parity
//! shards and the table a rebuild needs (the set's members, the length of
//! each one's checkpoint, the chunk length), as bytes with a checksum —
//! kept in memory and in a node-local file, read back after a relaunch.
//! Malformed or damaged bytes are an error, never a panic.
//!
//! Layout (little endian): magic `MPSTPAR1`, version u32, scheme u32
//! (0 xor, 1 rs), job u64, epoch u64, holder rank u32, m u32, chunk u64,
//! n u32, then n × (rank u32, length u64), then m × (row u32, parity
//! index u32) and m × chunk bytes of parity, and a CRC-32 of everything
//! before it.

pub const MAGIC: &[u8; 8] = b"MPSTPAR1";
const VERSION: u32 = 1;
/// More members than any set has: a larger count is damage.
const MAX_MEMBERS: u32 = 1 << 16;

/// The table of one set at one epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub members: Vec<u32>,
    /// Bytes of each member's checkpoint (before padding).
    pub lengths: Vec<u64>,
    pub chunk: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parity {
    pub job: u64,
    pub epoch: u64,
    pub holder: u32,
    /// Reed–Solomon (else XOR).
    pub rs: bool,
    pub m: u32,
    pub table: Table,
    /// (stripe, parity shard index, bytes): the shards this member holds.
    pub shards: Vec<(u32, u32, Vec<u8>)>,
}

impl Parity {
    pub fn encode(&self) -> Vec<u8> {
        let t = &self.table;
        let mut b = Vec::with_capacity(
            64 + t.members.len() * 12 + self.shards.len() * (8 + t.chunk as usize),
        );
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&u32::from(self.rs).to_le_bytes());
        b.extend_from_slice(&self.job.to_le_bytes());
        b.extend_from_slice(&self.epoch.to_le_bytes());
        b.extend_from_slice(&self.holder.to_le_bytes());
        b.extend_from_slice(&self.m.to_le_bytes());
        b.extend_from_slice(&t.chunk.to_le_bytes());
        b.extend_from_slice(&(t.members.len() as u32).to_le_bytes());
        for (r, l) in t.members.iter().zip(&t.lengths) {
            b.extend_from_slice(&r.to_le_bytes());
            b.extend_from_slice(&l.to_le_bytes());
        }
        for (row, p, _) in &self.shards {
            b.extend_from_slice(&row.to_le_bytes());
            b.extend_from_slice(&p.to_le_bytes());
        }
        for (_, _, s) in &self.shards {
            b.extend_from_slice(s);
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and checks held bytes: they must be whole, undamaged, and
    /// the parity `holder` holds of `epoch` in `job`.
    pub fn decode(bytes: &[u8], job: u64, epoch: u64, holder: u32) -> Result<Parity, String> {
        let p = Parity::parse(bytes)?;
        if (p.job, p.epoch, p.holder) != (job, epoch, holder) {
            return Err(format!(
                "parity of job {}, epoch {}, held by rank {} (wanted job {job}, epoch {epoch}, rank {holder})",
                p.job, p.epoch, p.holder
            ));
        }
        Ok(p)
    }

    /// The scheme as `--ckpt` names it.
    pub fn scheme(&self) -> String {
        let n = self.table.members.len() as u32;
        if self.rs {
            format!("rs:{}+{}", n - self.m, self.m)
        } else {
            format!("xor:{n}")
        }
    }

    /// Parses and checks parity bytes, whoever's they are.
    pub fn parse(bytes: &[u8]) -> Result<Parity, String> {
        if bytes.len() < 8 || &bytes[..8] != MAGIC {
            return Err("not a parity file".into());
        }
        let (body, crc) = bytes.split_at(bytes.len().saturating_sub(4));
        if crc.len() != 4
            || crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes"))
        {
            return Err("parity checksum mismatch (the parity is damaged)".into());
        }
        let mut r = Reader { b: body, at: 8 };
        if r.u32()? != VERSION {
            return Err("parity file of another version".into());
        }
        let rs = match r.u32()? {
            0 => false,
            1 => true,
            s => return Err(format!("unknown parity scheme {s}")),
        };
        let (job, epoch, holder, m, chunk, n) =
            (r.u64()?, r.u64()?, r.u32()?, r.u32()?, r.u64()?, r.u32()?);
        if n > MAX_MEMBERS || m == 0 || m >= n || chunk == 0 || !chunk.is_multiple_of(64) {
            return Err(format!(
                "impossible parity shape: {n} members, {m} parity shards, chunks of {chunk} bytes"
            ));
        }
        let mut members = Vec::with_capacity(n as usize);
        let mut lengths = Vec::with_capacity(n as usize);
        for _ in 0..n {
            members.push(r.u32()?);
            lengths.push(r.u64()?);
        }
        let d = u64::from(n - m);
        if lengths.iter().any(|&l| l > chunk.saturating_mul(d)) {
            return Err("a checkpoint length exceeds its chunks".into());
        }
        let mut rows = Vec::with_capacity(m as usize);
        for _ in 0..m {
            rows.push((r.u32()?, r.u32()?));
        }
        let c = usize::try_from(chunk).map_err(|_| "chunk too large".to_string())?;
        let mut shards = Vec::with_capacity(m as usize);
        for (row, p) in rows {
            if row >= n || p >= m {
                return Err(format!("parity shard {p} of stripe {row} in a set of {n}"));
            }
            shards.push((row, p, r.take(c)?.to_vec()));
        }
        if r.at != body.len() {
            return Err("trailing bytes after the parity".into());
        }
        Ok(Parity {
            job,
            epoch,
            holder,
            rs,
            m,
            table: Table {
                members,
                lengths,
                chunk,
            },
            shards,
        })
    }
}

/// Bounds-checked little-endian reads.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or_else(|| "parity file is truncated".to_string())?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Parity {
        Parity {
            job: 7,
            epoch: 3,
            holder: 2,
            rs: true,
            m: 2,
            table: Table {
                members: vec![0, 2, 4, 6, 8, 10],
                lengths: vec![100, 200, 256, 1, 0, 77],
                chunk: 64,
            },
            shards: vec![(1, 1, vec![5; 64]), (2, 0, vec![9; 64])],
        }
    }

    #[test]
    fn round_trip() {
        let p = sample();
        assert_eq!(Parity::decode(&p.encode(), 7, 3, 2).unwrap(), p);
    }

    #[test]
    fn damage_and_mismatches_are_errors() {
        let b = sample().encode();
        let wrong = |bytes: &[u8], job, epoch, holder| {
            Parity::decode(bytes, job, epoch, holder).unwrap_err()
        };
        assert!(wrong(&b, 7, 4, 2).contains("epoch 3"));
        assert!(wrong(&b, 8, 3, 2).contains("job 7"));
        assert!(wrong(&b, 7, 3, 1).contains("rank 2"));
        // Any flipped byte and any truncation is caught.
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x10;
            assert!(Parity::decode(&c, 7, 3, 2).is_err(), "flip at {i}");
            assert!(Parity::decode(&b[..i], 7, 3, 2).is_err(), "cut at {i}");
        }
    }

    #[test]
    fn a_checksummed_lie_is_still_refused() {
        // A well-formed checksum over impossible contents.
        let mut p = sample();
        p.table.lengths[0] = 64 * 4 + 1;
        assert!(Parity::decode(&p.encode(), 7, 3, 2)
            .unwrap_err()
            .contains("exceeds"));
        let mut p = sample();
        p.shards[0].0 = 6;
        assert!(Parity::decode(&p.encode(), 7, 3, 2)
            .unwrap_err()
            .contains("stripe 6"));
        let mut p = sample();
        p.table.chunk = 65;
        assert!(Parity::decode(&p.encode(), 7, 3, 2).is_err());
    }
}
