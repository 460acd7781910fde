//! Erasure-coded redundancy sets (`xor:K`, `rs:K+M`) over the transport:
//! at `MPIX_Checkpoint_write` the members of a set send each other the
//! chunks of their checkpoints and every member keeps the parity of the
//! stripes it holds; at a restore, members that lost their checkpoint get
//! the shards that rebuild it from the survivors. The arithmetic (sets,
//! stripes, codes, plans) is `checkpoint::erasure`; this module only moves
//! bytes, on the job's internal communicator (`recovery::exchange`).

use super::error::MpiResult;
use super::recovery::exchange_bounded;
use super::Mpi;
use crate::checkpoint::erasure::code::Code;
use crate::checkpoint::erasure::parity::{Parity, Table};
use crate::checkpoint::erasure::plan::{self, Status};
use crate::checkpoint::erasure::{self, append_chunk, Layout, Redundancy};
use crate::checkpoint::store::Restored;

/// The set of this rank under `r` (fixed for the job: from mpiexec's
/// placement at the start, `MPISTAGES_RANK_HOSTS`), or none when the set
/// is too small to hold data and parity.
pub fn layout(m: &Mpi, r: Redundancy) -> Option<&'static Layout> {
    static LAYOUT: std::sync::OnceLock<Option<Layout>> = std::sync::OnceLock::new();
    LAYOUT
        .get_or_init(|| {
            let (n, parity) = r.set_shape()?;
            let hosts = rank_hosts(m.size);
            let sets = erasure::sets(&hosts, n);
            if m.rank == 0 {
                warn_shared_hosts(r, &sets, &hosts);
            }
            Layout::of(&sets, m.rank as u32, parity)
        })
        .as_ref()
}

/// Each rank's host index as mpiexec placed the job (all on one host
/// when it does not say).
fn rank_hosts(size: usize) -> Vec<usize> {
    let placed = super::comm::placement();
    match placed.len() == size {
        true => placed.to_vec(),
        false => vec![0; size],
    }
}

/// Says once when a set has more members on one host than the code
/// covers (fewer hosts than the set needs): losing that host loses them.
fn warn_shared_hosts(r: Redundancy, sets: &[Vec<u32>], hosts: &[usize]) {
    let covers = r.set_shape().map_or(1, |(_, m)| m);
    if hosts.iter().all(|&h| h == hosts[0]) {
        return;
    }
    for s in sets {
        let mut on: std::collections::BTreeMap<usize, usize> = Default::default();
        for &x in s {
            *on.entry(hosts[x as usize]).or_default() += 1;
        }
        let most = on.values().copied().max().unwrap_or(0);
        if most > covers {
            log::warn!(
                "mpistages: warning: {r}: the redundancy set of ranks {s:?} has {most} members on one host ({} hosts for {} members): losing that host loses more than {r} rebuilds",
                on.len(),
                s.len()
            );
            return;
        }
    }
}

fn code(layout: &Layout) -> Code {
    Code {
        d: layout.d(),
        m: layout.m,
    }
}

/// `MPIX_Checkpoint_write`: sends the chunks of this rank's checkpoint
/// (`bytes`) to the members holding parity of their stripes and receives
/// the chunks of the stripes this rank holds parity of. The parity itself
/// is computed later, off the application's thread (`Chunks::parity`).
pub fn encode_set(m: &Mpi, layout: &Layout, epoch: u64, bytes: &[u8]) -> MpiResult<Chunks> {
    let me = layout.index_of(m.rank as u32).expect("this rank's set");
    let n = layout.n();
    let others: Vec<usize> = (0..n).filter(|&j| j != me).collect();
    let from: Vec<usize> = others.iter().map(|&j| layout.members[j] as usize).collect();
    // Everyone's length: chunks are cut to the longest checkpoint.
    let len = (bytes.len() as u64).to_le_bytes();
    let out: Vec<(usize, &[u8])> = from.iter().map(|&r| (r, &len[..])).collect();
    let bounds: Vec<(usize, usize)> = from.iter().map(|&r| (r, 8)).collect();
    let mut lengths = vec![bytes.len() as u64; n];
    for (&j, msg) in others.iter().zip(exchange_bounded(m, &out, &bounds)?) {
        lengths[j] = <[u8; 8]>::try_from(&msg[..])
            .map(u64::from_le_bytes)
            .map_err(|_| bad("a set member's length message is malformed"))?;
    }
    let c = layout.chunk_len(lengths.iter().copied().max().unwrap_or(0));
    let cu = usize::try_from(c).map_err(|_| bad("checkpoint too large"))?;
    // To member h: this rank's chunk in each stripe h holds parity of.
    let chunks: Vec<Vec<u8>> = others
        .iter()
        .map(|&h| {
            let mut msg = Vec::new();
            for (row, _) in held_rows(layout, h) {
                if let Ok(i) = layout.role(row, me) {
                    append_chunk(&mut msg, bytes, cu, i);
                }
            }
            msg
        })
        .collect();
    let out: Vec<(usize, &[u8])> = from
        .iter()
        .copied()
        .zip(chunks.iter().map(|c| &c[..]))
        .collect();
    // From member j: its chunk in each stripe this rank holds parity of.
    let bounds: Vec<(usize, usize)> = others
        .iter()
        .zip(&from)
        .map(|(&j, &r)| {
            let stripes = held_rows(layout, me).filter(|&(row, _)| layout.role(row, j).is_ok());
            (r, stripes.count() * cu)
        })
        .collect();
    let got = exchange_bounded(m, &out, &bounds)?;
    Ok(Chunks {
        layout: layout.clone(),
        me,
        got,
        job: m.stages().job(),
        epoch,
        lengths,
        chunk: c,
    })
}

/// The stripes member `h` holds parity of, with the parity shard index.
fn held_rows(layout: &Layout, h: usize) -> impl Iterator<Item = (usize, usize)> {
    let n = layout.n();
    (0..layout.m).map(move |p| ((h + n - p) % n, p))
}

/// The data shards of the stripes a member holds parity of, as received
/// from the other members (`got[k]` from its k-th other member, its
/// chunks in stripe order).
pub struct Chunks {
    layout: Layout,
    me: usize,
    got: Vec<Vec<u8>>,
    job: u64,
    epoch: u64,
    lengths: Vec<u64>,
    chunk: u64,
}

impl Chunks {
    /// The parity of each stripe this member holds, with the set's table,
    /// as the bytes to hold (pure: runs on a thread of its own).
    pub fn parity(self) -> Result<Vec<u8>, String> {
        let l = &self.layout;
        let cu = self.chunk as usize;
        let code = code(l);
        let others: Vec<usize> = (0..l.n()).filter(|&j| j != self.me).collect();
        let mut shards = Vec::with_capacity(l.m);
        for (row, p) in held_rows(l, self.me) {
            let mut data = Vec::with_capacity(l.d());
            for i in 0..l.d() {
                let j = l.data_member(row, i);
                let k = others.iter().position(|&o| o == j).expect("another member");
                // Member j sent its chunks of my stripes in stripe order.
                let at = held_rows(l, self.me)
                    .take_while(|&(r, _)| r != row)
                    .filter(|&(r, _)| l.role(r, j).is_ok())
                    .count();
                let shard = self.got[k]
                    .get(at * cu..(at + 1) * cu)
                    .ok_or("a set member sent too few chunks")?;
                data.push(shard);
            }
            let parity = code.parity(&data)?;
            shards.push((row as u32, p as u32, parity[p].clone()));
        }
        Ok(Parity {
            job: self.job,
            epoch: self.epoch,
            holder: l.members[self.me],
            rs: l.m > 1,
            m: l.m as u32,
            table: Table {
                members: l.members.clone(),
                lengths: self.lengths,
                chunk: self.chunk,
            },
            shards,
        }
        .encode())
    }
}

fn bad(what: &str) -> super::error::MpiError {
    super::error::MpiError::new(super::consts::err::INTERN, what.to_string())
}

/// What a member tells its set at a restore: whether it has its own
/// checkpoint of the epoch, and the set's table if it holds valid parity.
fn status_message(data: bool, parity: Option<&Parity>) -> Vec<u8> {
    let mut b = vec![u8::from(data)];
    if let Some(p) = parity {
        b.extend_from_slice(&p.table.chunk.to_le_bytes());
        for l in &p.table.lengths {
            b.extend_from_slice(&l.to_le_bytes());
        }
    }
    b
}

/// The set's chunk length and the length of each member's checkpoint.
type SetTable = (u64, Vec<u64>);

/// (has data, the table if it holds parity) from a status message of a
/// set of `n`.
fn read_status(b: &[u8], n: usize) -> Option<(bool, Option<SetTable>)> {
    let data = match b.first()? {
        0 => false,
        1 => true,
        _ => return None,
    };
    if b.len() == 1 {
        return Some((data, None));
    }
    if b.len() != 1 + 8 * (n + 1) {
        return None;
    }
    let word = |i: usize| u64::from_le_bytes(b[1 + 8 * i..9 + 8 * i].try_into().expect("8 bytes"));
    Some((data, Some((word(0), (1..=n).map(word).collect()))))
}

/// At a restore of `epoch`: with every member of this rank's set, rebuilds
/// the checkpoint of each member without one (at most the code's parity
/// count) from the survivors' checkpoints and parity. `local` is this
/// rank's own copy, if it has one of `epoch`. Returns this rank's rebuilt
/// copy when it needed one and the set could rebuild it (else it says why
/// on stderr and returns none: a slower level or an older epoch may serve).
pub fn rebuild_from_set(
    m: &Mpi,
    layout: &Layout,
    epoch: u64,
    local: Option<&Restored>,
) -> MpiResult<Option<Restored>> {
    let me = layout.index_of(m.rank as u32).expect("this rank's set");
    let n = layout.n();
    let scheme = m
        .stages()
        .redundancy()
        .map_or(String::new(), |r| r.to_string());
    let local = local.filter(|r| r.epoch == epoch);
    let parity = held_parity(m, epoch, &scheme);
    let others: Vec<usize> = (0..n).filter(|&j| j != me).collect();
    let ranks: Vec<usize> = others.iter().map(|&j| layout.members[j] as usize).collect();
    let msg = status_message(local.is_some(), parity.as_ref());
    let out: Vec<(usize, &[u8])> = ranks.iter().map(|&r| (r, &msg[..])).collect();
    let mut status = vec![
        Status {
            data: local.is_some(),
            parity: parity.is_some()
        };
        n
    ];
    let mut table = parity
        .as_ref()
        .map(|p| (p.table.chunk, p.table.lengths.clone()));
    let bounds: Vec<(usize, usize)> = ranks.iter().map(|&r| (r, 1 + 8 * (n + 1))).collect();
    for (&j, b) in others.iter().zip(exchange_bounded(m, &out, &bounds)?) {
        let (data, t) = read_status(&b, n).ok_or_else(|| bad("malformed set status"))?;
        status[j] = Status {
            data,
            parity: t.is_some(),
        };
        table = table.or(t);
    }
    let plans = plan::plan(layout, &status);
    if plans.is_empty() {
        return Ok(None);
    }
    // What this rank sends to each member that lost its copy.
    let mut own: Option<Vec<u8>> = None;
    let mut outgoing: Vec<(usize, Vec<u8>)> = Vec::new();
    for (x, rebuild) in &plans {
        let (Ok(stripes), Some((c, _))) = (rebuild, &table) else {
            continue;
        };
        let c = *c as usize;
        let mut msg = Vec::new();
        for (row, shard) in plan::sends(stripes, me) {
            if shard < layout.d() {
                let bytes = own.get_or_insert_with(|| {
                    m.stages()
                        .parity_bytes(local.expect("a member with data sends data"))
                });
                append_chunk(&mut msg, bytes, c, shard);
            } else {
                let p = parity.as_ref().expect("a member with parity sends parity");
                let s = p
                    .shards
                    .iter()
                    .find(|s| s.0 as usize == row && s.1 as usize == shard - layout.d());
                msg.extend_from_slice(&s.ok_or_else(|| bad("parity shard missing"))?.2);
            }
        }
        if !msg.is_empty() {
            outgoing.push((layout.members[*x] as usize, msg));
        }
    }
    // What this rank receives, if it lost its copy.
    let mine = plans.iter().find(|(x, _)| *x == me).map(|(_, r)| r);
    let senders: Vec<usize> = match (mine, &table) {
        (Some(Ok(stripes)), Some(_)) => others
            .iter()
            .copied()
            .filter(|&j| !plan::sends(stripes, j).is_empty())
            .collect(),
        _ => Vec::new(),
    };
    // From each sender: its shards of this rank's stripes, a chunk each.
    let c = table.as_ref().map_or(0, |t| t.0 as usize);
    let from: Vec<(usize, usize)> = match mine {
        Some(Ok(stripes)) => (senders.iter())
            .map(|&j| {
                (
                    layout.members[j] as usize,
                    plan::sends(stripes, j).len() * c,
                )
            })
            .collect(),
        _ => Vec::new(),
    };
    let out: Vec<(usize, &[u8])> = outgoing.iter().map(|(r, b)| (*r, &b[..])).collect();
    let started = std::time::Instant::now();
    let got = exchange_bounded(m, &out, &from)?;
    let why = match (mine, &table) {
        (None, _) => return Ok(None),
        (Some(Err(why)), _) => why.clone(),
        (Some(Ok(_)), None) => "no member holds valid parity".to_string(),
        (Some(Ok(stripes)), Some((c, lengths))) => {
            match rebuild(layout, stripes, &senders, &got, *c as usize, lengths[me]) {
                Ok(bytes) => match m.stages().from_partner(epoch, &bytes) {
                    Ok(r) => {
                        log::info!(
                            "mpistages: rank {}: epoch {epoch} rebuilt from {scheme} parity ({} bytes) in {:.1} ms",
                            m.rank,
                            bytes.len(),
                            started.elapsed().as_secs_f64() * 1e3
                        );
                        return Ok(Some(r));
                    }
                    Err(e) => e.to_string(),
                },
                Err(e) => e,
            }
        }
    };
    log::warn!(
        "mpistages: rank {}: epoch {epoch} cannot be rebuilt from {scheme}: {why}",
        m.rank
    );
    Ok(None)
}

/// The parity this rank holds of `epoch`, checked; damage is said.
fn held_parity(m: &Mpi, epoch: u64, scheme: &str) -> Option<Parity> {
    let mut st = m.stages();
    let bytes = st.held(epoch)?;
    match Parity::decode(&bytes, st.job(), epoch, m.rank as u32) {
        Ok(p) => Some(p),
        Err(why) => {
            log::warn!(
                "mpistages: rank {}: {scheme} parity of epoch {epoch} skipped: {why}",
                m.rank
            );
            None
        }
    }
}

/// This member's checkpoint from the shards `got[k]` that `senders[k]`
/// sent, stripe by stripe, cut to its `len` bytes.
fn rebuild(
    layout: &Layout,
    stripes: &[plan::Stripe],
    senders: &[usize],
    got: &[Vec<u8>],
    c: usize,
    len: u64,
) -> Result<Vec<u8>, String> {
    let code = code(layout);
    let mut used = vec![0usize; senders.len()];
    let mut out = Vec::with_capacity(c * stripes.len());
    for s in stripes {
        let mut shards = Vec::with_capacity(s.from.len());
        for &(j, index) in &s.from {
            let k = senders
                .iter()
                .position(|&x| x == j)
                .ok_or("a sender is missing")?;
            let shard = got[k]
                .get(used[k] * c..(used[k] + 1) * c)
                .ok_or_else(|| format!("rank {} sent too few shards", layout.members[j]))?;
            used[k] += 1;
            shards.push((index, shard));
        }
        out.extend(code.rebuild(s.want, &shards)?);
    }
    if used.iter().zip(got).any(|(&u, g)| u * c != g.len()) {
        return Err("a set member sent more shards than asked".into());
    }
    let len = usize::try_from(len).map_err(|_| "length too large".to_string())?;
    if len > out.len() {
        return Err("the set's table gives a length beyond the rebuilt chunks".into());
    }
    out.truncate(len);
    Ok(out)
}
