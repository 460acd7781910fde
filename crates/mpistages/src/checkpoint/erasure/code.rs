//! The codes of a stripe of `d` data shards and `m` parity shards, all of
//! one length: XOR for one parity shard, Reed–Solomon (the well-kept
//! `reed-solomon-simd` crate: GF(2^16), SIMD) for more.

/// Shard indices: data shards `0..d`, then parity shards `d..d + m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code {
    pub d: usize,
    pub m: usize,
}

/// `into ^= from`, a machine word at a time where the lengths allow.
fn xor_into(into: &mut [u8], from: &[u8]) {
    let mut a = into.chunks_exact_mut(8);
    let mut b = from.chunks_exact(8);
    for (x, y) in (&mut a).zip(&mut b) {
        let v = u64::from_ne_bytes(x[..].try_into().expect("8 bytes"))
            ^ u64::from_ne_bytes(y.try_into().expect("8 bytes"));
        x.copy_from_slice(&v.to_ne_bytes());
    }
    for (x, y) in a.into_remainder().iter_mut().zip(b.remainder()) {
        *x ^= y;
    }
}

impl Code {
    /// The `m` parity shards of `data` (`d` shards of one length, a
    /// multiple of 64 bytes).
    pub fn parity(&self, data: &[&[u8]]) -> Result<Vec<Vec<u8>>, String> {
        let len = data.first().map_or(0, |s| s.len());
        if data.len() != self.d || data.iter().any(|s| s.len() != len) {
            return Err(format!(
                "a stripe needs {} data shards of one length",
                self.d
            ));
        }
        if self.m == 1 {
            let mut p = data[0].to_vec();
            for s in &data[1..] {
                xor_into(&mut p, s);
            }
            return Ok(vec![p]);
        }
        reed_solomon_simd::encode(self.d, self.m, data).map_err(|e| e.to_string())
    }

    /// Data shard `want`, rebuilt from `shards`: (index, bytes) of at
    /// least `d` other shards of the stripe, all of one length.
    pub fn rebuild(&self, want: usize, shards: &[(usize, &[u8])]) -> Result<Vec<u8>, String> {
        let len = shards.first().map_or(0, |s| s.1.len());
        let valid = |&(i, s): &(usize, &[u8])| i < self.d + self.m && i != want && s.len() == len;
        let distinct: std::collections::BTreeSet<usize> = shards.iter().map(|s| s.0).collect();
        let enough = shards.len() >= self.d && distinct.len() == shards.len();
        if want >= self.d || !enough || !shards.iter().all(valid) {
            return Err(format!(
                "data shard {want} needs {} other shards of the stripe, of one length",
                self.d
            ));
        }
        if self.m == 1 {
            let mut out = vec![0u8; len];
            for (_, s) in shards {
                xor_into(&mut out, s);
            }
            return Ok(out);
        }
        let (data, parity): (Vec<_>, Vec<_>) = shards.iter().partition(|(i, _)| *i < self.d);
        if parity.is_empty() {
            return Err(format!("data shard {want} needs a parity shard"));
        }
        let mut got = reed_solomon_simd::decode(
            self.d,
            self.m,
            data.iter().map(|&&(i, s)| (i, s)),
            parity.iter().map(|&&(i, s)| (i - self.d, s)),
        )
        .map_err(|e| e.to_string())?;
        got.remove(&want)
            .ok_or_else(|| format!("data shard {want} was not rebuilt"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stripe(d: usize, len: usize, seed: u8) -> Vec<Vec<u8>> {
        (0..d)
            .map(|i| {
                (0..len)
                    .map(|b| (b as u8).wrapping_mul(31).wrapping_add(seed ^ i as u8))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn xor_rebuilds_any_one_data_shard() {
        let c = Code { d: 3, m: 1 };
        let data = stripe(3, 128, 7);
        let refs: Vec<&[u8]> = data.iter().map(|s| &s[..]).collect();
        let p = c.parity(&refs).unwrap();
        assert_eq!(p.len(), 1);
        for want in 0..3 {
            let mut others: Vec<(usize, &[u8])> = (0..3)
                .filter(|&i| i != want)
                .map(|i| (i, &data[i][..]))
                .collect();
            others.push((3, &p[0]));
            assert_eq!(c.rebuild(want, &others).unwrap(), data[want]);
        }
    }

    #[test]
    fn reed_solomon_rebuilds_from_any_d_shards() {
        let c = Code { d: 4, m: 2 };
        let data = stripe(4, 192, 3);
        let refs: Vec<&[u8]> = data.iter().map(|s| &s[..]).collect();
        let p = c.parity(&refs).unwrap();
        let all: Vec<&[u8]> = data.iter().chain(&p).map(|s| &s[..]).collect();
        // Every pair of lost data shards, from the other four shards.
        for (a, lost) in data.iter().enumerate() {
            for b in a + 1..6 {
                let left: Vec<(usize, &[u8])> = (0..6)
                    .filter(|&i| i != a && i != b)
                    .map(|i| (i, all[i]))
                    .collect();
                assert_eq!(&c.rebuild(a, &left).unwrap(), lost, "lost {a},{b}");
            }
        }
    }

    #[test]
    fn too_few_or_uneven_shards_are_refused() {
        let c = Code { d: 4, m: 2 };
        let s = vec![0u8; 64];
        let short = vec![0u8; 32];
        assert!(c.rebuild(0, &[(1, &s), (2, &s), (3, &s)]).is_err());
        assert!(c
            .rebuild(0, &[(1, &s), (2, &s), (3, &s), (4, &short)])
            .is_err());
        assert!(c.rebuild(0, &[(0, &s), (2, &s), (3, &s), (4, &s)]).is_err());
        assert!(c.rebuild(0, &[(1, &s), (2, &s), (3, &s), (9, &s)]).is_err());
        assert!(c.rebuild(0, &[(1, &s), (1, &s), (3, &s), (4, &s)]).is_err());
        assert!(c.parity(&[&s, &s]).is_err());
        let x = Code { d: 2, m: 1 };
        assert!(x.parity(&[&s, &short]).is_err());
    }
}
