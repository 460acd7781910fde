//! Collective reads and writes (`MPI_File_write_all`, `read_all` and
//! their `_at` twins) with collective buffering, the two-phase I/O of
//! ROMIO: when the members' accesses interleave in the file, a few
//! members (the aggregators, by default one per host) each own an even
//! share of the accessed range (their file domain); the others send them
//! their pieces, and each aggregator writes what it got as few large
//! contiguous writes (or reads its domain's requested extents and sends
//! each member its pieces back). A domain is done in rounds of
//! `cb_buffer_size` bytes, which bounds an aggregator's memory. Accesses
//! that do not interleave are done independently, each member its own.
//!
//! Hints (info keys, as ROMIO names them): `romio_cb_write` and
//! `romio_cb_read` (`enable`, `disable`, `automatic`: only when
//! interleaved, in runs shorter than 256 KiB on average, the default), `cb_nodes` (how many aggregators) and
//! `cb_buffer_size` (bytes per aggregator per round, 16 MiB by default).
//!
//! Every step starts with an agreement, so a member whose access failed
//! before the exchange (a read-only file, a bad offset) makes everyone
//! return an error instead of leaving the others waiting.

use super::comm;
use super::consts::err;
use super::error::{fail, MpiError, MpiResult};
use super::file::{agree, Access};
use super::info::Info;
use crate::coll::{self, Team};
use crate::transport::RawBuf;

/// Whether to buffer collectively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cb {
    Enable,
    Disable,
    /// Only when the members' accesses interleave.
    Automatic,
}

/// A file's collective buffering hints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hints {
    pub write: Cb,
    pub read: Cb,
    /// How many aggregators (`None`: one per host).
    pub nodes: Option<usize>,
    /// Bytes an aggregator handles per round.
    pub buffer: u64,
}

/// The mean run length from which `automatic` leaves interleaved
/// accesses independent: runs this long are already large writes, and
/// sending them through aggregators only adds a copy.
const LARGE_RUN: u64 = 256 << 10;

/// `cb_buffer_size`'s default, as ROMIO's.
const DEFAULT_BUFFER: u64 = 16 << 20;

impl Hints {
    /// The hints `info` gives; values that are not understood are ignored,
    /// as hints may be.
    pub fn of(info: &Info) -> Hints {
        let get = |k: &str| info.get(k).ok().flatten().map(str::trim);
        let cb = |k: &str| match get(k) {
            Some("enable") => Cb::Enable,
            Some("disable") => Cb::Disable,
            _ => Cb::Automatic,
        };
        Hints {
            write: cb("romio_cb_write"),
            read: cb("romio_cb_read"),
            nodes: get("cb_nodes")
                .and_then(|v| v.parse().ok())
                .filter(|&n| n > 0),
            buffer: get("cb_buffer_size")
                .and_then(|v| v.parse().ok())
                .filter(|&n| n > 0)
                .unwrap_or(DEFAULT_BUFFER),
        }
    }
}

/// A collective access's file and hints, as `File::collective` gives them.
pub struct Collective<'a> {
    pub team: Team<'a>,
    pub hosts: &'a [usize],
    pub hints: &'a Hints,
}

/// `MPI_File_write_all` and its kin: writes `data` (the access's stream
/// bytes) collectively; returns the bytes written.
pub fn write_all(c: &Collective, acc: MpiResult<Access>, data: &[u8]) -> MpiResult<usize> {
    let Some((acc, plan)) = start(c, acc, c.hints.write)? else {
        return Ok(0);
    };
    let Some(plan) = plan else {
        acc.write(data)?;
        return Ok(data.len());
    };
    let me = plan.aggregator_index(c.team.rank);
    let mut stream = 0;
    let pieces = plan.pieces(&acc.runs, &mut stream);
    let mut result = Ok(());
    for round in pieces {
        let sends: Vec<Vec<u8>> = round.iter().map(|p| encode_write(p, data)).collect();
        let got = exchange(&c.team, &plan, sends, me.is_some())?;
        if me.is_some() && result.is_ok() {
            result = write_round(&acc, &got);
        }
    }
    agree(&c.team, &result)?;
    Ok(data.len())
}

/// `MPI_File_read_all` and its kin: reads the access's stream bytes
/// collectively, stopping where the file ends.
pub fn read_all(c: &Collective, acc: MpiResult<Access>) -> MpiResult<Vec<u8>> {
    let Some((acc, plan)) = start(c, acc, c.hints.read)? else {
        return Ok(Vec::new());
    };
    let Some(plan) = plan else {
        return acc.read();
    };
    let me = plan.aggregator_index(c.team.rank);
    let len: usize = acc.runs.iter().map(|r| r.1).sum();
    let mut buf = vec![0u8; len];
    // Where the stream first comes up short (the end of the file).
    let mut end = len;
    let mut stream = 0;
    let pieces = plan.pieces(&acc.runs, &mut stream);
    let mut result = Ok(());
    for round in pieces {
        let asks: Vec<Vec<u8>> = round.iter().map(|p| encode_ask(p)).collect();
        let got = exchange(&c.team, &plan, asks, me.is_some())?;
        let replies = match (me, &result) {
            (Some(_), Ok(())) => match read_round(&acc, &got) {
                Ok(r) => r,
                Err(e) => {
                    result = Err(e);
                    vec![Vec::new(); got.len()]
                }
            },
            _ => vec![Vec::new(); got.len()],
        };
        let back = exchange_back(&c.team, &plan, replies)?;
        for (a, reply) in back.iter().enumerate() {
            if let Err(e) = place_reply(&round[a], reply, &mut buf, &mut end) {
                result = result.and(Err(e));
            }
        }
    }
    agree(&c.team, &result)?;
    buf.truncate(end);
    Ok(buf)
}

/// The agreement every collective access starts with: everyone's error
/// (the first one is everyone's), and each member's file extent. Returns
/// `None` when nobody accesses anything; else the access and the plan of
/// the two phases, `None` when done independently.
fn start(
    c: &Collective,
    acc: MpiResult<Access>,
    cb: Cb,
) -> MpiResult<Option<(Access, Option<Plan>)>> {
    let (lo, hi) = match &acc {
        Ok(a) => extent(&a.runs),
        Err(_) => (u64::MAX, 0),
    };
    let (runs, bytes) = match &acc {
        Ok(a) => (
            a.runs.iter().filter(|r| r.1 > 0).count() as u64,
            a.runs.iter().map(|r| r.1 as u64).sum(),
        ),
        Err(_) => (0, 0),
    };
    let code = acc.as_ref().err().map_or(0, |e| e.class);
    let mut mine = Vec::with_capacity(36);
    mine.extend_from_slice(&code.to_le_bytes());
    for v in [lo, hi, runs, bytes] {
        mine.extend_from_slice(&v.to_le_bytes());
    }
    let all = comm::allgather_fixed(&c.team, &mine)?;
    let members: Vec<(i32, u64, u64, u64, u64)> = all
        .chunks_exact(36)
        .map(|b| {
            let u = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
            (
                i32::from_le_bytes(b[..4].try_into().expect("4")),
                u(4),
                u(12),
                u(20),
                u(28),
            )
        })
        .collect();
    let acc = match (acc, members.iter().position(|m| m.0 != 0)) {
        (Err(e), _) => return Err(e),
        (Ok(_), Some(r)) => {
            return fail(members[r].0, format!("rank {r} of the file's group failed"))
        }
        (Ok(a), None) => a,
    };
    let extents: Vec<(u64, u64)> = members
        .iter()
        .map(|m| (m.1, m.2))
        .filter(|(lo, hi)| lo < hi)
        .collect();
    if extents.is_empty() {
        return Ok(None);
    }
    let two_phase = match cb {
        Cb::Enable => true,
        Cb::Disable => false,
        Cb::Automatic => {
            let runs: u64 = members.iter().map(|m| m.3).sum();
            let bytes: u64 = members.iter().map(|m| m.4).sum();
            interleaved(&extents) && bytes < runs.saturating_mul(LARGE_RUN)
        }
    };
    if !two_phase {
        return Ok(Some((acc, None)));
    }
    let lo = extents.iter().map(|e| e.0).min().expect("some");
    let hi = extents.iter().map(|e| e.1).max().expect("some");
    let aggregators = aggregators(c.hosts, c.hints.nodes);
    let plan = Plan::new(lo, hi, aggregators, c.hints.buffer);
    log::debug!(
        "collective I/O: two phases over [{lo}, {hi}), aggregators {:?}, {} rounds",
        plan.aggregators,
        plan.rounds
    );
    Ok(Some((acc, Some(plan))))
}

/// The file range `runs` touch, `(u64::MAX, 0)` when none.
fn extent(runs: &[(u64, usize)]) -> (u64, u64) {
    runs.iter()
        .filter(|r| r.1 > 0)
        .fold((u64::MAX, 0), |(lo, hi), &(at, len)| {
            (lo.min(at), hi.max(at + len as u64))
        })
}

/// Whether any two members' extents overlap.
fn interleaved(extents: &[(u64, u64)]) -> bool {
    let mut e = extents.to_vec();
    e.sort_unstable();
    e.windows(2).any(|w| w[1].0 < w[0].1)
}

/// The aggregators' ranks, ascending: `nodes` of them (one per host by
/// default), taking members host by host in turn: first the first member
/// of every host, then the second ones, and so on.
fn aggregators(hosts: &[usize], nodes: Option<usize>) -> Vec<usize> {
    let mut seen = std::collections::HashMap::new();
    let mut order: Vec<(usize, usize)> = hosts
        .iter()
        .enumerate()
        .map(|(r, h)| {
            let nth = seen.entry(h).or_insert(0);
            *nth += 1;
            (*nth, r)
        })
        .collect();
    let k = nodes.unwrap_or(seen.len()).clamp(1, hosts.len().max(1));
    order.sort_unstable();
    let mut chosen: Vec<usize> = order.iter().take(k).map(|o| o.1).collect();
    chosen.sort_unstable();
    chosen
}

/// A piece of a member's access inside one aggregator's window of one
/// round: `len` bytes at file offset `file`, `stream` bytes into the
/// access's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub file: u64,
    pub len: u64,
    pub stream: u64,
}

/// The two phases' layout: the accessed range `[lo, lo + domain *
/// aggregators)` cut into one domain per aggregator, each done in rounds
/// of `buffer` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    lo: u64,
    domain: u64,
    buffer: u64,
    aggregators: Vec<usize>,
    rounds: usize,
}

impl Plan {
    pub fn new(lo: u64, hi: u64, aggregators: Vec<usize>, buffer: u64) -> Plan {
        let span = hi.saturating_sub(lo);
        let domain = span.div_ceil(aggregators.len().max(1) as u64).max(1);
        let buffer = buffer.max(1);
        Plan {
            lo,
            domain,
            buffer,
            rounds: domain.div_ceil(buffer) as usize,
            aggregators,
        }
    }

    fn aggregator_index(&self, rank: usize) -> Option<usize> {
        self.aggregators.iter().position(|&a| a == rank)
    }

    /// The aggregator and round of file byte `at` (inside the range), and
    /// where that window ends.
    fn window(&self, at: u64) -> (usize, usize, u64) {
        let rel = at - self.lo;
        let a = (rel / self.domain) as usize;
        let inner = rel - a as u64 * self.domain;
        let r = (inner / self.buffer) as usize;
        let end =
            self.lo + a as u64 * self.domain + ((r as u64 + 1) * self.buffer).min(self.domain);
        (a, r, end)
    }

    /// A member's runs cut at the windows: `[round][aggregator]`, each in
    /// stream order. `stream` counts the stream bytes passed.
    pub fn pieces(&self, runs: &[(u64, usize)], stream: &mut u64) -> Vec<Vec<Vec<Piece>>> {
        let mut out = vec![vec![Vec::new(); self.aggregators.len()]; self.rounds];
        for &(at, len) in runs {
            let end = at + len as u64;
            let mut p = at;
            while p < end {
                let (a, r, wend) = self.window(p);
                let cut = end.min(wend);
                out[r][a].push(Piece {
                    file: p,
                    len: cut - p,
                    stream: *stream,
                });
                *stream += cut - p;
                p = cut;
            }
        }
        out
    }
}

/// A write round's message to an aggregator: the number of pieces, each
/// piece's (offset, length), then their bytes.
fn encode_write(pieces: &[Piece], data: &[u8]) -> Vec<u8> {
    let bytes: u64 = pieces.iter().map(|p| p.len).sum();
    let mut m = Vec::with_capacity(8 + 16 * pieces.len() + bytes as usize);
    m.extend_from_slice(&(pieces.len() as u64).to_le_bytes());
    for p in pieces {
        m.extend_from_slice(&p.file.to_le_bytes());
        m.extend_from_slice(&p.len.to_le_bytes());
    }
    for p in pieces {
        m.extend_from_slice(&data[p.stream as usize..(p.stream + p.len) as usize]);
    }
    m
}

/// A read round's request to an aggregator: each piece's (offset, length).
fn encode_ask(pieces: &[Piece]) -> Vec<u8> {
    let mut m = Vec::with_capacity(16 * pieces.len());
    for p in pieces {
        m.extend_from_slice(&p.file.to_le_bytes());
        m.extend_from_slice(&p.len.to_le_bytes());
    }
    m
}

fn malformed(what: &str) -> MpiError {
    MpiError::new(err::INTERN, format!("collective I/O: malformed {what}"))
}

fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    b.get(i..i + 8)
        .map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
}

/// `(offset, length)` pairs from `n` of them at the start of `b`.
fn decode_ranges(b: &[u8], n: usize) -> MpiResult<Vec<(u64, u64)>> {
    (0..n)
        .map(|i| {
            let at = u64_at(b, 16 * i).ok_or_else(|| malformed("piece list"))?;
            let len = u64_at(b, 16 * i + 8).ok_or_else(|| malformed("piece list"))?;
            at.checked_add(len)
                .map(|_| (at, len))
                .ok_or_else(|| malformed("piece range"))
        })
        .collect()
}

/// A write round's message decoded: `(offset, bytes)` pieces.
fn decode_write(m: &[u8]) -> MpiResult<Vec<(u64, &[u8])>> {
    let n = u64_at(m, 0).ok_or_else(|| malformed("write message"))?;
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n <= m.len() / 16)
        .ok_or_else(|| malformed("piece count"))?;
    let ranges = decode_ranges(&m[8..], n)?;
    let mut at = 8 + 16 * n;
    let mut out = Vec::with_capacity(n);
    for (off, len) in ranges {
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| at.checked_add(l))
            .filter(|&e| e <= m.len())
            .ok_or_else(|| malformed("piece data"))?;
        out.push((off, &m[at..end]));
        at = end;
    }
    Ok(out)
}

/// Pieces as the contiguous extents they make: sorted by offset, touching
/// or overlapping ones merged (where pieces overlap, the later member's
/// bytes win, as the standard leaves that undefined).
pub fn coalesce(mut pieces: Vec<(u64, &[u8])>) -> Vec<(u64, Vec<u8>)> {
    pieces.sort_by_key(|p| p.0);
    let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
    for (at, bytes) in pieces {
        match out.last_mut() {
            Some((start, buf)) if at <= *start + buf.len() as u64 => {
                let from = (at - *start) as usize;
                let end = from + bytes.len();
                if end > buf.len() {
                    buf.resize(end, 0);
                }
                buf[from..end].copy_from_slice(bytes);
            }
            _ => out.push((at, bytes.to_vec())),
        }
    }
    out
}

/// An aggregator's write round: every member's pieces for its window,
/// written as few contiguous writes.
fn write_round(acc: &Access, got: &[Vec<u8>]) -> MpiResult<()> {
    let mut pieces = Vec::new();
    for m in got {
        pieces.extend(decode_write(m)?);
    }
    for (at, bytes) in coalesce(pieces) {
        acc.io.write(at, &bytes)?;
    }
    Ok(())
}

/// An aggregator's read round: reads the extents the members' requests
/// make and answers each member: each piece's byte count read (fewer at
/// the end of the file), then the bytes.
fn read_round(acc: &Access, got: &[Vec<u8>]) -> MpiResult<Vec<Vec<u8>>> {
    let asks: Vec<Vec<(u64, u64)>> = got
        .iter()
        .map(|m| decode_ranges(m, m.len() / 16))
        .collect::<MpiResult<_>>()?;
    let mut extents = Vec::new();
    for (at, want) in merge_ranges(asks.iter().flatten().copied().collect()) {
        let mut buf = vec![0u8; want as usize];
        let n = acc.io.read(at, &mut buf)?;
        buf.truncate(n);
        extents.push((at, buf));
    }
    Ok(asks
        .iter()
        .map(|ranges| {
            let mut counts = Vec::with_capacity(8 * ranges.len());
            let mut bytes = Vec::new();
            for &(at, len) in ranges {
                let have = served(&extents, at, len);
                counts.extend_from_slice(&(have.len() as u64).to_le_bytes());
                bytes.extend_from_slice(have);
            }
            counts.extend_from_slice(&bytes);
            counts
        })
        .collect())
}

/// Ranges merged where they touch or overlap, sorted.
fn merge_ranges(mut r: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    r.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (at, len) in r.into_iter().filter(|r| r.1 > 0) {
        match out.last_mut() {
            Some((s, l)) if at <= *s + *l => *l = (*l).max(at + len - *s),
            _ => out.push((at, len)),
        }
    }
    out
}

/// The bytes of `[at, at + len)` that `extents` (read, sorted, possibly
/// short at the end of the file) hold.
fn served(extents: &[(u64, Vec<u8>)], at: u64, len: u64) -> &[u8] {
    let i = extents.partition_point(|e| e.0 <= at).saturating_sub(1);
    match extents.get(i) {
        Some((s, b)) if *s <= at && at <= *s + b.len() as u64 => {
            let from = (at - s) as usize;
            &b[from..(from + len as usize).min(b.len())]
        }
        _ => &[],
    }
}

/// A member's pieces of one aggregator's reply put in place; `end`
/// becomes the first stream byte the file did not have.
fn place_reply(pieces: &[Piece], reply: &[u8], buf: &mut [u8], end: &mut usize) -> MpiResult<()> {
    let mut at = 8 * pieces.len();
    if reply.len() < at {
        return Err(malformed("read reply"));
    }
    for (i, p) in pieces.iter().enumerate() {
        let n = u64_at(reply, 8 * i)
            .filter(|&n| n <= p.len)
            .ok_or_else(|| malformed("read reply count"))? as usize;
        let data = reply
            .get(at..at + n)
            .ok_or_else(|| malformed("read reply data"))?;
        let s = p.stream as usize;
        buf[s..s + n].copy_from_slice(data);
        if (n as u64) < p.len {
            *end = (*end).min(s + n);
        }
        at += n;
    }
    Ok(())
}

/// One round's exchange from every member to the aggregators: `sends[a]`
/// goes to aggregator `a`; an aggregator gets every member's message.
fn exchange(
    t: &Team,
    plan: &Plan,
    sends: Vec<Vec<u8>>,
    aggregator: bool,
) -> MpiResult<Vec<Vec<u8>>> {
    let n = t.size();
    let mut out = vec![Vec::new(); n];
    for (a, m) in plan.aggregators.iter().zip(sends) {
        out[*a] = m;
    }
    let got = alltoallv(t, out)?;
    Ok(if aggregator { got } else { Vec::new() })
}

/// The replies back: aggregator `a`'s `replies[member]` to each member;
/// returns, per aggregator, its reply to this member.
fn exchange_back(t: &Team, plan: &Plan, replies: Vec<Vec<u8>>) -> MpiResult<Vec<Vec<u8>>> {
    let n = t.size();
    let mut out = replies;
    out.resize(n, Vec::new());
    let got = alltoallv(t, out)?;
    Ok(plan.aggregators.iter().map(|&a| got[a].clone()).collect())
}

/// Every member sends `out[r]` to member `r`; returns what each sent here.
fn alltoallv(t: &Team, out: Vec<Vec<u8>>) -> MpiResult<Vec<Vec<u8>>> {
    let n = t.size();
    // The lengths first, then the bytes.
    let mut lens: Vec<u8> = out
        .iter()
        .flat_map(|m| (m.len() as u64).to_le_bytes())
        .collect();
    let mut in_lens = vec![0u8; 8 * n];
    let fixed: Vec<usize> = (0..n).map(|r| 8 * r).collect();
    // SAFETY: both arrays outlive the blocking collective.
    let (s, r) = unsafe {
        (
            RawBuf::new(lens.as_mut_ptr(), lens.len()),
            RawBuf::new(in_lens.as_mut_ptr(), in_lens.len()),
        )
    };
    coll::alltoallv(t, s, r, &fixed, &vec![8; n], &fixed, &vec![8; n])?;
    let rlens: Vec<usize> = (0..n)
        .map(|i| u64_at(&in_lens, 8 * i).unwrap_or(0) as usize)
        .collect();
    let slens: Vec<usize> = out.iter().map(Vec::len).collect();
    let offs = |l: &[usize]| -> Vec<usize> {
        l.iter()
            .scan(0, |acc, &x| {
                let o = *acc;
                *acc += x;
                Some(o)
            })
            .collect()
    };
    let (soffs, roffs) = (offs(&slens), offs(&rlens));
    let mut send: Vec<u8> = out.concat();
    let mut recv = vec![0u8; rlens.iter().sum()];
    // SAFETY: as above.
    let (s, r) = unsafe {
        (
            RawBuf::new(send.as_mut_ptr(), send.len()),
            RawBuf::new(recv.as_mut_ptr(), recv.len()),
        )
    };
    coll::alltoallv(t, s, r, &soffs, &slens, &roffs, &rlens)?;
    Ok((0..n)
        .map(|i| recv[roffs[i]..roffs[i] + rlens[i]].to_vec())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_come_from_the_info_and_bad_values_are_ignored() {
        let mut i = Info::default();
        assert_eq!(
            Hints::of(&i),
            Hints {
                write: Cb::Automatic,
                read: Cb::Automatic,
                nodes: None,
                buffer: DEFAULT_BUFFER
            }
        );
        i.set("romio_cb_write", "enable").unwrap();
        i.set("romio_cb_read", "disable").unwrap();
        i.set("cb_nodes", "3").unwrap();
        i.set("cb_buffer_size", "many").unwrap();
        let h = Hints::of(&i);
        assert_eq!(
            (h.write, h.read, h.nodes, h.buffer),
            (Cb::Enable, Cb::Disable, Some(3), DEFAULT_BUFFER)
        );
    }

    #[test]
    fn aggregators_are_taken_host_by_host() {
        // Two hosts of three members each.
        let hosts = [0, 0, 0, 3, 3, 3];
        assert_eq!(aggregators(&hosts, None), vec![0, 3]);
        assert_eq!(aggregators(&hosts, Some(3)), vec![0, 1, 3]);
        assert_eq!(aggregators(&hosts, Some(99)), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(aggregators(&[0, 0, 0, 0], None), vec![0]);
    }

    #[test]
    fn only_overlapping_extents_interleave() {
        assert!(!interleaved(&[(0, 10), (10, 20), (30, 40)]));
        assert!(interleaved(&[(0, 10), (20, 40), (5, 25)]));
    }

    #[test]
    fn runs_are_cut_at_domains_and_rounds() {
        // [100, 200) between 2 aggregators (50 bytes each), rounds of 20.
        let plan = Plan::new(100, 200, vec![0, 5], 20);
        assert_eq!(plan.rounds, 3);
        let mut s = 0;
        let p = plan.pieces(&[(110, 30), (145, 20)], &mut s);
        assert_eq!(s, 50);
        let piece = |file, len, stream| Piece { file, len, stream };
        // Round 0: aggregator 0 has [100, 120), aggregator 1 [150, 170).
        assert_eq!(p[0][0], vec![piece(110, 10, 0)]);
        assert_eq!(p[0][1], vec![piece(150, 15, 35)]);
        // Round 1: [120, 140) and [170, 190).
        assert_eq!(p[1][0], vec![piece(120, 20, 10)]);
        assert!(p[1][1].is_empty());
        // Round 2: [140, 150) (the domain's end) and [190, 200).
        assert_eq!(p[2][0], vec![piece(145, 5, 30)]);
        assert!(p[2][1].is_empty());
    }

    #[test]
    fn write_messages_round_trip_and_bad_ones_are_errors() {
        let data: Vec<u8> = (0..40).collect();
        let pieces = [
            Piece {
                file: 7,
                len: 3,
                stream: 10,
            },
            Piece {
                file: 100,
                len: 2,
                stream: 0,
            },
        ];
        let m = encode_write(&pieces, &data);
        let d = decode_write(&m).unwrap();
        assert_eq!(d, vec![(7, &data[10..13]), (100, &data[0..2])]);
        for cut in 0..m.len() {
            assert!(decode_write(&m[..cut]).is_err(), "cut at {cut}");
        }
        let mut huge = m.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_write(&huge).is_err());
        let mut wrap = m;
        wrap[8..16].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
        assert!(decode_write(&wrap).is_err());
    }

    #[test]
    fn pieces_coalesce_into_contiguous_extents() {
        let a = [1u8; 4];
        let b = [2u8; 4];
        let c = [3u8; 2];
        let got = coalesce(vec![(8, &b[..]), (0, &a[..]), (4, &c[..]), (20, &a[..])]);
        assert_eq!(
            got,
            vec![
                (0, vec![1, 1, 1, 1, 3, 3]),
                (8, vec![2; 4]),
                (20, vec![1; 4])
            ]
        );
    }

    #[test]
    fn reads_are_served_from_merged_extents_short_at_the_end() {
        assert_eq!(
            merge_ranges(vec![(10, 5), (0, 4), (4, 2), (12, 10), (30, 0)]),
            vec![(0, 6), (10, 12)]
        );
        // The file ends at 16: the second extent is short.
        let extents = vec![(0u64, vec![1u8; 6]), (10, vec![2u8; 6])];
        assert_eq!(served(&extents, 2, 3), &[1, 1, 1]);
        assert_eq!(served(&extents, 12, 10), &[2, 2, 2, 2]);
        assert_eq!(served(&extents, 20, 2), &[] as &[u8]);
        let mut buf = [0u8; 6];
        let mut end = 6;
        let pieces = [
            Piece {
                file: 12,
                len: 3,
                stream: 0,
            },
            Piece {
                file: 15,
                len: 3,
                stream: 3,
            },
        ];
        let mut reply = Vec::new();
        reply.extend_from_slice(&3u64.to_le_bytes());
        reply.extend_from_slice(&1u64.to_le_bytes());
        reply.extend_from_slice(&[2, 2, 2, 2]);
        place_reply(&pieces, &reply, &mut buf, &mut end).unwrap();
        assert_eq!((buf, end), ([2, 2, 2, 2, 0, 0], 4));
        assert!(place_reply(&pieces, &reply[..19], &mut buf, &mut end).is_err());
    }
}
