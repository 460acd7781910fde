//! Fault injection: `mpiexec --inject rank=R,WHEN` kills rank R with
//! SIGKILL at a reproducible point. `WHEN` is one of
//! - `after=SECS`: SECS seconds after the job started (mpiexec kills it);
//! - `checkpoint=E`: right after the rank completed checkpoint epoch E;
//! - `writing=E`: while the rank writes checkpoint epoch E to its first
//!   directory level (or right after, if the write was quicker), before
//!   the epoch is reported complete;
//! - `call=NAME:N`: on entering its Nth call of the MPI function NAME
//!   (counted in this process, e.g. `call=MPI_Allreduce:20`).
//!
//! The last two fire inside the rank, which SIGKILLs itself; mpiexec hands
//! each rank the specs that concern it through `MPISTAGES_INJECT`, and a
//! spec that fired is not handed to the replacement. With them, `damage=`
//! also harms the rank's node-local checkpoint copies as it dies:
//! - `damage=node`: they are deleted (the loss of the rank's node);
//! - `damage=corrupt`: bytes of its newest copy are flipped.
//! - `damage=parity`: bytes of the newest copy or parity it holds for
//!   other ranks (partner, xor, rs levels) are flipped.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub enum Trigger {
    After(Duration),
    Checkpoint(u64),
    Writing(u64),
    Call { name: String, nth: u64 },
}

/// What happens to the dying rank's node-local checkpoint copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Damage {
    #[default]
    None,
    /// Deleted: the node is lost.
    Node,
    /// Bytes of the newest copy flipped.
    Corrupt,
    /// Bytes of the newest copy or parity held for others flipped.
    Parity,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Inject {
    pub rank: usize,
    pub trigger: Trigger,
    pub damage: Damage,
}

impl std::fmt::Display for Inject {
    /// The spec as `--inject` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank={},", self.rank)?;
        match &self.trigger {
            Trigger::After(d) => write!(f, "after={}", d.as_secs_f64())?,
            Trigger::Checkpoint(e) => write!(f, "checkpoint={e}")?,
            Trigger::Writing(e) => write!(f, "writing={e}")?,
            Trigger::Call { name, nth } => write!(f, "call={name}:{nth}")?,
        }
        match self.damage {
            Damage::None => Ok(()),
            Damage::Node => write!(f, ",damage=node"),
            Damage::Corrupt => write!(f, ",damage=corrupt"),
            Damage::Parity => write!(f, ",damage=parity"),
        }
    }
}

/// A spec as the rank sees it: its index in mpiexec's list, when it fires,
/// and what it damages.
#[derive(Clone, Debug, PartialEq)]
pub struct RankInject {
    pub index: usize,
    pub trigger: Trigger,
    pub damage: Damage,
}

pub const ENV: &str = "MPISTAGES_INJECT";

pub fn parse(spec: &str) -> Result<Inject, String> {
    let mut rank = None;
    let mut trigger = None;
    let mut damage = Damage::None;
    let bad = |why: String| format!("--inject '{spec}': {why}");
    for item in spec.split(',').map(str::trim) {
        let Some((k, v)) = item.split_once('=') else {
            return Err(bad(format!("expected KEY=VALUE, not '{item}'")));
        };
        let t = match k {
            "rank" => {
                rank = Some(
                    v.parse::<usize>()
                        .map_err(|_| bad(format!("rank '{v}' is not a number")))?,
                );
                continue;
            }
            "after" => {
                let s: f64 = v
                    .parse()
                    .ok()
                    // At most about 31 years: a larger one overflows the
                    // deadline (a panic, found by fuzzing).
                    .filter(|s: &f64| (0.0..=1e9).contains(s))
                    .ok_or_else(|| bad(format!("after needs seconds (0 to 1e9), not '{v}'")))?;
                Trigger::After(Duration::from_secs_f64(s))
            }
            "damage" => {
                damage = match v {
                    "node" => Damage::Node,
                    "corrupt" => Damage::Corrupt,
                    "parity" => Damage::Parity,
                    _ => return Err(bad(format!("damage is node, corrupt or parity, not '{v}'"))),
                };
                continue;
            }
            "checkpoint" => Trigger::Checkpoint(
                v.parse()
                    .map_err(|_| bad(format!("checkpoint needs an epoch number, not '{v}'")))?,
            ),
            "writing" => Trigger::Writing(
                v.parse()
                    .map_err(|_| bad(format!("writing needs an epoch number, not '{v}'")))?,
            ),
            "call" => {
                let (name, n) = v
                    .rsplit_once(':')
                    .ok_or_else(|| bad("call needs NAME:N, e.g. MPI_Recv:3".into()))?;
                let nth: u64 = n
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad(format!("call count '{n}' is not a positive number")))?;
                if !(name.starts_with("MPI_") || name.starts_with("MPIX_")) {
                    return Err(bad(format!("'{name}' is not an MPI function name")));
                }
                Trigger::Call {
                    name: name.to_string(),
                    nth,
                }
            }
            _ => return Err(bad(format!("unknown key '{k}'"))),
        };
        if trigger.replace(t).is_some() {
            return Err(bad(
                "give one of after=, checkpoint=, writing=, call=".into()
            ));
        }
    }
    let trigger =
        trigger.ok_or_else(|| bad("give one of after=, checkpoint=, writing=, call=".into()))?;
    if damage != Damage::None && matches!(trigger, Trigger::After(_)) {
        return Err(bad(
            "damage= needs checkpoint=, writing= or call= (the rank harms its own copies)".into(),
        ));
    }
    Ok(Inject {
        rank: rank.ok_or_else(|| bad("rank=R is missing".into()))?,
        trigger,
        damage,
    })
}

/// The rank-side specs as passed in the environment: `INDEX=TRIGGER;…`.
pub fn encode_for_rank(specs: &[(usize, &Inject)]) -> String {
    specs
        .iter()
        .filter_map(|(i, s)| {
            let when = match &s.trigger {
                Trigger::After(_) => return None,
                Trigger::Checkpoint(e) => format!("checkpoint:{e}"),
                Trigger::Writing(e) => format!("writing:{e}"),
                Trigger::Call { name, nth } => format!("call:{name}:{nth}"),
            };
            let damage = match s.damage {
                Damage::None => "",
                Damage::Node => "@node",
                Damage::Corrupt => "@corrupt",
                Damage::Parity => "@parity",
            };
            Some(format!("{i}={when}{damage}"))
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// Parses what `encode_for_rank` produced; malformed items are skipped.
pub fn decode_for_rank(s: &str) -> Vec<RankInject> {
    let mut out = Vec::new();
    for item in s.split(';').filter(|i| !i.is_empty()) {
        let Some((i, t)) = item.split_once('=') else {
            continue;
        };
        let (t, damage) = match t.rsplit_once('@') {
            Some((t, "node")) => (t, Damage::Node),
            Some((t, "corrupt")) => (t, Damage::Corrupt),
            Some((t, "parity")) => (t, Damage::Parity),
            Some(_) => continue,
            None => (t, Damage::None),
        };
        let Ok(i) = i.parse() else { continue };
        let t = if let Some(e) = t.strip_prefix("checkpoint:") {
            match e.parse() {
                Ok(e) => Trigger::Checkpoint(e),
                Err(_) => continue,
            }
        } else if let Some(e) = t.strip_prefix("writing:") {
            match e.parse() {
                Ok(e) => Trigger::Writing(e),
                Err(_) => continue,
            }
        } else if let Some(c) = t.strip_prefix("call:") {
            match c.rsplit_once(':').map(|(n, k)| (n, k.parse())) {
                Some((name, Ok(nth))) => Trigger::Call {
                    name: name.to_string(),
                    nth,
                },
                _ => continue,
            }
        } else {
            continue;
        };
        out.push(RankInject {
            index: i,
            trigger: t,
            damage,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        assert_eq!(
            parse("rank=3,after=1.5").unwrap(),
            Inject {
                rank: 3,
                trigger: Trigger::After(Duration::from_millis(1500)),
                damage: Damage::None,
            }
        );
        let c = parse("rank=0, call=MPI_Recv:4").unwrap();
        assert_eq!(
            c.trigger,
            Trigger::Call {
                name: "MPI_Recv".into(),
                nth: 4
            }
        );
        let e = parse("checkpoint=2,rank=1,damage=corrupt").unwrap();
        // Shown as the user can type it again.
        for spec in [&c, &e] {
            assert_eq!(&parse(&spec.to_string()).unwrap(), spec);
        }
        assert_eq!(e.to_string(), "rank=1,checkpoint=2,damage=corrupt");
        let w = parse("rank=1,writing=3").unwrap();
        let enc = encode_for_rank(&[(0, &c), (5, &e), (6, &w)]);
        assert_eq!(
            decode_for_rank(&enc),
            vec![
                RankInject {
                    index: 0,
                    trigger: c.trigger.clone(),
                    damage: Damage::None
                },
                RankInject {
                    index: 5,
                    trigger: Trigger::Checkpoint(2),
                    damage: Damage::Corrupt
                },
                RankInject {
                    index: 6,
                    trigger: Trigger::Writing(3),
                    damage: Damage::None
                }
            ]
        );
        for bad in [
            "rank=1",
            "after=1",
            "rank=x,after=1",
            "rank=1,after=-1",
            "rank=1,after=2e104",
            "rank=1,call=Recv:1",
            "rank=1,call=MPI_Recv:0",
            "rank=1,after=1,checkpoint=2",
            "rank=1,when=2",
            "rank=1,after=2,damage=node",
            "rank=1,checkpoint=2,damage=all",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
