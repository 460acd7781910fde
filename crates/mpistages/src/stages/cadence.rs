//! When a checkpoint pays (`MPIX_Checkpoint_needed`): the compute time to
//! let pass between the end of one checkpoint and the start of the next,
//! from what this rank's checkpoints cost (measured) and what the user
//! said: a fixed interval (`MPISTAGES_CKPT_INTERVAL`, mpiexec's
//! `--ckpt-interval`), or a mean time between failures (`MPISTAGES_MTBF`,
//! `--mtbf`) for Daly's optimum, or by default a cap on the share of the
//! run spent blocked in checkpoints. Pure: times come in as arguments.

/// Seconds between two checkpoints, whatever they cost.
pub const INTERVAL: &str = "MPISTAGES_CKPT_INTERVAL";
/// The mean time between failures of the job, in seconds.
pub const MTBF: &str = "MPISTAGES_MTBF";
/// Without either: checkpoints block the application at most this share
/// of its time.
pub const DEFAULT_OVERHEAD: f64 = 0.05;
/// The longest time taken (about 31 years), as mpiexec's other options.
pub const MAX_SECS: f64 = 1e9;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Policy {
    /// A checkpoint every so many seconds.
    Every(f64),
    /// Daly's optimum for this mean time between failures.
    Daly { mtbf: f64 },
    /// Checkpoints block at most this share of the time.
    Overhead(f64),
}

/// Seconds of `what`: more than 0, at most `MAX_SECS`.
pub fn parse_seconds(what: &str, v: &str) -> Result<f64, String> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0 && *s <= MAX_SECS)
        .ok_or_else(|| format!("{what} needs seconds (more than 0, at most {MAX_SECS}), not '{v}'"))
}

impl Policy {
    /// From the two settings (an interval wins over an MTBF).
    pub fn from_values(interval: Option<&str>, mtbf: Option<&str>) -> Result<Policy, String> {
        if let Some(v) = interval {
            return Ok(Policy::Every(parse_seconds(INTERVAL, v)?));
        }
        if let Some(v) = mtbf {
            return Ok(Policy::Daly {
                mtbf: parse_seconds(MTBF, v)?,
            });
        }
        Ok(Policy::Overhead(DEFAULT_OVERHEAD))
    }

    pub fn from_env() -> Result<Policy, String> {
        let interval = std::env::var(INTERVAL).ok();
        let mtbf = std::env::var(MTBF).ok();
        Policy::from_values(interval.as_deref(), mtbf.as_deref())
    }

    /// Compute seconds between checkpoints that cost `cost` seconds each.
    /// Daly (2006), "A higher order estimate of the optimum checkpoint
    /// interval for restart dumps": for C < 2M,
    /// τ = √(2CM)·(1 + √(C/2M)/3 + C/(18M)) − C, else τ = M; its first
    /// term is Young's √(2CM).
    pub fn interval(&self, cost: f64) -> f64 {
        let c = cost.max(0.0);
        match *self {
            Policy::Every(s) => s,
            Policy::Daly { mtbf: m } if c < 2.0 * m => {
                let x = c / (2.0 * m);
                ((2.0 * c * m).sqrt() * (1.0 + x.sqrt() / 3.0 + x / 9.0) - c).max(0.0)
            }
            Policy::Daly { mtbf } => mtbf,
            // c / (τ + c) = share.
            Policy::Overhead(share) => c * (1.0 / share - 1.0),
        }
    }
}

/// What this rank knows of its checkpoints: their mean cost and when the
/// work that a failure would lose started.
#[derive(Debug, Default)]
pub struct Cadence {
    /// Checkpoints measured, and their summed cost in seconds.
    written: u32,
    total_cost: f64,
    /// Seconds (on the caller's clock) when the last checkpoint ended or
    /// the last rollback restored one; `None` before either.
    since: Option<f64>,
}

impl Cadence {
    /// A checkpoint that blocked for `cost` seconds ended at `now`.
    pub fn written(&mut self, cost: f64, now: f64) {
        self.written += 1;
        self.total_cost += cost.max(0.0);
        self.since = Some(now);
    }

    /// A rollback restored a checkpoint at `now`: the work since then is
    /// what the next failure would lose.
    pub fn restored(&mut self, now: f64) {
        self.since = Some(now);
    }

    /// The mean cost of this rank's checkpoints, once one was measured.
    pub fn cost(&self) -> Option<f64> {
        (self.written > 0).then(|| self.total_cost / self.written as f64)
    }

    /// Whether this rank would checkpoint at `now`: always before its
    /// first measured checkpoint (that one measures the cost and protects
    /// the start), then once the policy's interval has passed.
    pub fn needed(&self, policy: &Policy, now: f64) -> bool {
        match (self.cost(), self.since) {
            (Some(c), Some(since)) => now - since >= policy.interval(c),
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_and_their_errors() {
        assert_eq!(
            Policy::from_values(None, None),
            Ok(Policy::Overhead(DEFAULT_OVERHEAD))
        );
        assert_eq!(
            Policy::from_values(Some("30"), Some("3600")),
            Ok(Policy::Every(30.0))
        );
        assert_eq!(
            Policy::from_values(None, Some(" 3600 ")),
            Ok(Policy::Daly { mtbf: 3600.0 })
        );
        for bad in ["0", "-1", "soon", "", "nan", "inf", "2e9"] {
            let e = Policy::from_values(None, Some(bad)).unwrap_err();
            assert!(e.contains(MTBF) && e.contains(bad), "{e}");
            assert!(Policy::from_values(Some(bad), None).is_err());
        }
    }

    #[test]
    fn daly_is_young_for_cheap_checkpoints_and_the_mtbf_for_dear_ones() {
        let p = Policy::Daly { mtbf: 86400.0 };
        let young = (2.0f64 * 10.0 * 86400.0).sqrt();
        let t = p.interval(10.0);
        // Within 1 % of Young's first-order value when C << M.
        assert!((t - young).abs() / young < 0.01, "{t} vs {young}");
        // Exactly Daly's expression at a value worked by hand:
        // C = 50, M = 1000: √(100000)·(1 + √0.025/3 + 0.025/9) − 50.
        let d = Policy::Daly { mtbf: 1000.0 }.interval(50.0);
        let want = 100000f64.sqrt() * (1.0 + 0.025f64.sqrt() / 3.0 + 0.025 / 9.0) - 50.0;
        assert!((d - want).abs() < 1e-9, "{d} vs {want}");
        assert_eq!(Policy::Daly { mtbf: 10.0 }.interval(25.0), 10.0);
        // Dearer checkpoints, longer intervals.
        assert!(p.interval(20.0) > t);
    }

    #[test]
    fn overhead_cap_and_fixed_interval() {
        // 5 %: a 1 s checkpoint after 19 s of work.
        assert!((Policy::Overhead(0.05).interval(1.0) - 19.0).abs() < 1e-9);
        assert_eq!(Policy::Every(7.5).interval(100.0), 7.5);
    }

    #[test]
    fn first_checkpoint_then_the_interval() {
        let p = Policy::Every(10.0);
        let mut c = Cadence::default();
        assert!(c.needed(&p, 0.0), "before any checkpoint");
        c.written(2.0, 5.0);
        assert_eq!(c.cost(), Some(2.0));
        assert!(!c.needed(&p, 14.9));
        assert!(c.needed(&p, 15.0));
        c.written(4.0, 20.0);
        assert_eq!(c.cost(), Some(3.0));
        // A rollback at 40 restarts the count from there.
        c.restored(40.0);
        assert!(!c.needed(&p, 45.0));
        assert!(c.needed(&p, 50.0));
        // A restored process that never wrote one: true, so that it
        // measures one (the others' answers decide, see the API).
        let mut fresh = Cadence::default();
        fresh.restored(0.0);
        assert!(fresh.needed(&p, 1.0));
    }
}
