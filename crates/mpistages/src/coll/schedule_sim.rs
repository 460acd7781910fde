//! Runs the schedules of all ranks in memory, with FIFO channels per pair.
use super::*;
use std::collections::{HashMap, VecDeque};

pub struct Rank {
    pub send: Vec<u8>,
    pub recv: Vec<u8>,
}

fn slot(b: Buf) -> usize {
    match b {
        Buf::Send => 0,
        Buf::Recv => 1,
        Buf::Temp => 2,
    }
}

/// `a op b` on whole buffers.
pub type Op<'a> = &'a dyn Fn(&[u8], &[u8]) -> Vec<u8>;

pub fn run(scheds: &[Schedule], ranks: &mut [Rank], op: Op) {
    let n = scheds.len();
    // Per rank: [send, recv, temp].
    let mut bufs: Vec<[Vec<u8>; 3]> = ranks
        .iter_mut()
        .zip(scheds)
        .map(|(r, s)| {
            [
                std::mem::take(&mut r.send),
                std::mem::take(&mut r.recv),
                // Garbage, as scratch reused from an earlier collective
                // holds: a schedule must write its temp before reading it.
                vec![0xA5; s.temp_len],
            ]
        })
        .collect();
    let read = |b: &[Vec<u8>; 3], l: Loc, len: usize| b[slot(l.buf)][l.off..l.off + len].to_vec();
    let mut chans: HashMap<(usize, usize), VecDeque<Vec<u8>>> = HashMap::new();
    let mut pc = vec![0usize; n];
    let mut posted = vec![false; n];
    loop {
        let mut progressed = false;
        for r in 0..n {
            let Some(round) = scheds[r].rounds.get(pc[r]) else {
                continue;
            };
            if !posted[r] {
                for st in round {
                    if let Step::Send { to, from, len } = st {
                        chans
                            .entry((r, *to))
                            .or_default()
                            .push_back(read(&bufs[r], *from, *len));
                    }
                }
                posted[r] = true;
                progressed = true;
            }
            let recvs: Vec<(usize, Loc, usize)> = round
                .iter()
                .filter_map(|st| match st {
                    Step::Recv { from, into, len } => Some((*from, *into, *len)),
                    _ => None,
                })
                .collect();
            let mut need: HashMap<usize, usize> = HashMap::new();
            for (f, _, _) in &recvs {
                *need.entry(*f).or_default() += 1;
            }
            if !need
                .iter()
                .all(|(f, k)| chans.get(&(*f, r)).map_or(0, |q| q.len()) >= *k)
            {
                continue;
            }
            for (f, into, len) in recvs {
                let m = chans.get_mut(&(f, r)).unwrap().pop_front().unwrap();
                assert_eq!(
                    m.len(),
                    len,
                    "rank {r}: message from {f} has the wrong length"
                );
                bufs[r][slot(into.buf)][into.off..into.off + len].copy_from_slice(&m);
            }
            for st in round {
                let (dst, val) = match st {
                    Step::Copy { src, dst, len } => (*dst, read(&bufs[r], *src, *len)),
                    Step::Reduce {
                        src,
                        dst,
                        len,
                        src_first,
                        ..
                    } => {
                        let a = read(&bufs[r], *src, *len);
                        let b = read(&bufs[r], *dst, *len);
                        (*dst, if *src_first { op(&a, &b) } else { op(&b, &a) })
                    }
                    _ => continue,
                };
                bufs[r][slot(dst.buf)][dst.off..dst.off + val.len()].copy_from_slice(&val);
            }
            pc[r] += 1;
            posted[r] = false;
            progressed = true;
        }
        if !progressed {
            break;
        }
    }
    for r in 0..n {
        assert_eq!(
            pc[r],
            scheds[r].rounds.len(),
            "rank {r} is stuck (deadlock)"
        );
    }
    assert!(
        chans.values().all(|q| q.is_empty()),
        "unreceived messages left"
    );
    for (r, [send, recv, _]) in ranks.iter_mut().zip(bufs) {
        r.send = send;
        r.recv = recv;
    }
}
