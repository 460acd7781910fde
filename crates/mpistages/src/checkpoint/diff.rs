//! Differential checkpoints (`--ckpt ...,diff[:N]`), as FTI's dCP: each
//! section is cut into blocks, each block hashed (XXH3-128); a checkpoint
//! writes to directory levels only the blocks whose hash changed since
//! the epoch before, as a section of codec `Diff` naming that epoch as
//! its base. Every N-th checkpoint (and the first after a start or a
//! rollback) is full, so a chain is at most N files long; a restore reads
//! the chain back to its full checkpoint, every file verified, and patches
//! the blocks in (`DirLevel::read`).
//!
//! The payload of a `Diff` section (little endian): base epoch u64, block
//! size u32, reserved u32 (0), a bitmap of the changed blocks (bit i of
//! byte i/8, padded to 8 bytes), then the changed blocks in order (the
//! last block of a section may be short).

use std::collections::HashMap;

/// Bytes per hashed block.
pub const BLOCK: usize = 16 << 10;
/// Full checkpoints come at least every this many epochs by default.
pub const DEFAULT_EVERY: u32 = 8;
/// Longest chain a restore follows (more is damage).
pub const MAX_CHAIN: usize = 1024;

const HEAD: usize = 16;

/// A section's identity across epochs.
pub type Key = (u16, u64, String);

/// What an epoch's sections hashed to: the length and block hashes of
/// each, by key.
pub type Hashes = HashMap<Key, (usize, Vec<u128>)>;

pub fn block_hashes(data: &[u8]) -> Vec<u128> {
    data.chunks(BLOCK)
        .map(xxhash_rust::xxh3::xxh3_128)
        .collect()
}

/// The blocks of a section that differ from `before` (its length and
/// hashes in the base epoch); none when the whole section must be
/// written (no base, or another length).
pub fn changed(before: Option<&(usize, Vec<u128>)>, len: usize, now: &[u128]) -> Option<Vec<bool>> {
    let (blen, bh) = before?;
    (*blen == len && bh.len() == now.len())
        .then(|| bh.iter().zip(now).map(|(a, b)| a != b).collect())
}

fn bitmap_len(blocks: usize) -> usize {
    blocks.div_ceil(8).div_ceil(8) * 8
}

/// The payload of a `Diff` section: `data`'s changed blocks on `base`.
pub fn encode(base: u64, data: &[u8], changed: &[bool]) -> Vec<u8> {
    let blocks = data.len().div_ceil(BLOCK);
    debug_assert_eq!(blocks, changed.len());
    let mut out = Vec::with_capacity(HEAD + bitmap_len(blocks));
    out.extend_from_slice(&base.to_le_bytes());
    out.extend_from_slice(&(BLOCK as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut bits = vec![0u8; bitmap_len(blocks)];
    for (i, _) in changed.iter().enumerate().filter(|c| *c.1) {
        bits[i / 8] |= 1 << (i % 8);
    }
    out.extend_from_slice(&bits);
    for (i, block) in data.chunks(BLOCK).enumerate() {
        if changed[i] {
            out.extend_from_slice(block);
        }
    }
    out
}

/// The base epoch a payload names.
pub fn base_of(payload: &[u8]) -> Result<u64, String> {
    let b = payload
        .get(..8)
        .ok_or("differential section shorter than its header")?;
    Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// Applies `payload` to `base` (the section in the base epoch): the
/// section's `length` bytes. Every bound is checked: a payload that does
/// not fit is an error.
pub fn apply(base: &[u8], payload: &[u8], length: u64) -> Result<Vec<u8>, String> {
    let len = usize::try_from(length).map_err(|_| "section too large".to_string())?;
    if payload.len() < HEAD {
        return Err("differential section shorter than its header".into());
    }
    let block = u32::from_le_bytes(payload[8..12].try_into().expect("4 bytes")) as usize;
    if !(512..=1 << 26).contains(&block) || !block.is_power_of_two() || payload[12..16] != [0; 4] {
        return Err(format!("differential section with blocks of {block} bytes"));
    }
    if base.len() != len {
        return Err(format!(
            "differential section of {len} bytes on a base of {} bytes",
            base.len()
        ));
    }
    let blocks = len.div_ceil(block);
    let bits = payload
        .get(HEAD..HEAD + bitmap_len(blocks))
        .ok_or("differential section shorter than its bitmap")?;
    let mut out = base.to_vec();
    let mut at = HEAD + bitmap_len(blocks);
    for (i, target) in out.chunks_mut(block).enumerate() {
        if bits[i / 8] & (1 << (i % 8)) != 0 {
            let src = payload
                .get(at..at + target.len())
                .ok_or("differential section shorter than its changed blocks")?;
            target.copy_from_slice(src);
            at += target.len();
        }
    }
    let stray = (blocks..bits.len() * 8).any(|i| bits[i / 8] & (1 << (i % 8)) != 0);
    if at != payload.len() || stray {
        return Err("differential section with bytes beyond its blocks".into());
    }
    Ok(out)
}

/// The writer's side: the hashes of the last epoch written, to diff the
/// next one against, and how long the chain has grown.
#[derive(Debug)]
pub struct Differ {
    /// A full checkpoint at least every this many epochs.
    every: u32,
    last: Option<(u64, Hashes)>,
    chain: u32,
}

/// What to write for an epoch: per section, the changed blocks (none:
/// the whole section), against epoch `base`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub base: u64,
    pub changed: Vec<Option<Vec<bool>>>,
}

impl Differ {
    pub fn new(every: u32) -> Differ {
        Differ {
            every: every.max(1),
            last: None,
            chain: 0,
        }
    }

    /// Hashes `sections` (key, bytes) as epoch `epoch` and returns the
    /// plan to write it as a difference from the epoch before, or none
    /// when it is to be full: the first, one after a gap or a rollback,
    /// every `every`-th, or when `full` says so (a level needs a full
    /// file at this epoch).
    pub fn next<'a>(
        &mut self,
        epoch: u64,
        sections: impl Iterator<Item = (Key, &'a [u8])>,
        full: bool,
    ) -> Option<Plan> {
        let mut hashes = Hashes::new();
        let mut order = Vec::new();
        for (key, data) in sections {
            order.push((key.clone(), data.len()));
            hashes.insert(key, (data.len(), block_hashes(data)));
        }
        let diffable = !full
            && self.chain < self.every
            && self.last.as_ref().is_some_and(|(e, _)| *e + 1 == epoch);
        let plan = diffable.then(|| {
            let (base, before) = self.last.as_ref().expect("diffable");
            Plan {
                base: *base,
                changed: order
                    .iter()
                    .map(|(k, len)| changed(before.get(k), *len, &hashes[k].1))
                    .collect(),
            }
        });
        self.chain = if plan.is_some() { self.chain + 1 } else { 1 };
        self.last = Some((epoch, hashes));
        plan
    }

    /// The job rolled back (or a write failed): the next one is full.
    pub fn forget(&mut self) {
        self.last = None;
    }

    /// Epochs a level must keep before its oldest kept one: a chain
    /// reaches back at most this far.
    pub fn reach(every: u32) -> u64 {
        u64::from(every.max(1)) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: u64) -> Key {
        (2, id, String::new())
    }

    #[test]
    fn a_patch_rebuilds_the_section_and_writes_only_changed_blocks() {
        let base: Vec<u8> = (0..BLOCK * 3 + 100).map(|i| (i % 251) as u8).collect();
        let mut now = base.clone();
        now[BLOCK + 5] ^= 1;
        now[BLOCK * 3 + 99] ^= 1;
        let c = changed(
            Some(&(base.len(), block_hashes(&base))),
            now.len(),
            &block_hashes(&now),
        )
        .unwrap();
        assert_eq!(c, vec![false, true, false, true]);
        let p = encode(7, &now, &c);
        assert_eq!(p.len(), HEAD + 8 + BLOCK + 100);
        assert_eq!(base_of(&p).unwrap(), 7);
        assert_eq!(apply(&base, &p, now.len() as u64).unwrap(), now);
    }

    #[test]
    fn malformed_payloads_are_errors() {
        let base = vec![1u8; BLOCK * 2];
        let mut now = base.clone();
        now[0] = 2;
        let p = encode(1, &now, &[true, false]);
        for cut in 0..p.len() {
            assert!(
                apply(&base, &p[..cut], now.len() as u64).is_err(),
                "cut at {cut}"
            );
        }
        let mut longer = p.clone();
        longer.push(0);
        assert!(apply(&base, &longer, now.len() as u64).is_err());
        assert!(
            apply(&base[1..], &p, now.len() as u64).is_err(),
            "base of another length"
        );
        let mut bad_block = p.clone();
        bad_block[8] = 3;
        assert!(apply(&base, &bad_block, now.len() as u64).is_err());
        let mut stray_bit = p;
        stray_bit[HEAD] |= 0x80;
        assert!(apply(&base, &stray_bit, now.len() as u64).is_err());
    }

    #[test]
    fn full_checkpoints_come_first_after_gaps_and_every_n() {
        let a = vec![0u8; 100];
        let b = vec![1u8; 100];
        let mut d = Differ::new(3);
        let mut step = |e: u64, data: &[u8]| d.next(e, [(key(1), data)].into_iter(), false);
        assert_eq!(step(1, &a), None, "first");
        assert_eq!(step(2, &a).unwrap().changed, vec![Some(vec![false])]);
        assert_eq!(step(3, &b).unwrap().changed, vec![Some(vec![true])]);
        assert_eq!(step(4, &b), None, "every 3rd is full");
        assert!(step(5, &b).is_some());
        assert_eq!(step(7, &b), None, "after a gap");
        let mut d = Differ::new(8);
        d.next(1, [(key(1), &a[..])].into_iter(), false);
        d.forget();
        assert_eq!(
            d.next(2, [(key(1), &a[..])].into_iter(), false),
            None,
            "after a rollback"
        );
        // A section that changed size, or a new one, is written whole.
        let p = d
            .next(3, [(key(1), &a[..50]), (key(2), &a[..])].into_iter(), false)
            .unwrap();
        assert_eq!(p.changed, vec![None, None]);
        assert_eq!(
            d.next(4, [(key(1), &a[..50])].into_iter(), true),
            None,
            "asked full"
        );
    }
}
