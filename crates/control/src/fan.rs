//! Fan-in at one node of the control tree, without sockets or clocks: the
//! reports of the ranks below a node (their own, or already gathered by a
//! child) that say the same thing at the same generation — halted, ready,
//! restored, a checkpoint done — are merged into one report for the node
//! above. A gathering goes up as soon as it covers every rank below that
//! is expected to report, or when `window` has passed since its last
//! report (so a rank that never reports, or a guess of the expected ranks
//! that is wrong, costs a message and a window more, never a stall; ranks
//! that report slowly, many on few cores, still go up as one). The node above
//! does the same, and `mpiexec` gets one report per child per step of a
//! recovery instead of one per rank.

use crate::rankset::RankSet;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What a report says.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Saw the failure notice of `key` (a generation) and stopped.
    Halted,
    /// Ready at generation `key`; the value: the newest copy held.
    Ready,
    /// Restored at generation `key`; the value: the epoch.
    Restored,
    /// Completed checkpoint epoch `key`.
    Checkpoint,
    /// Holds epoch `key` durable on its pfs level.
    Durable,
    /// Said hello at generation `key` (started; its address travels with
    /// the gathering).
    Hello,
    /// The process ended, as its agent saw (`key`: the generation it was
    /// ended at, a relaunch ends them all).
    Ended,
    /// A survivor's contribution to the agreement of generation `key`
    /// (ULFM; the value: its flag).
    Agree,
}

/// The value the reports carry, when they all carry the same.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Common {
    All(Option<u64>),
    Differ,
}

impl Common {
    fn merge(self, other: Common) -> Common {
        if self == other {
            self
        } else {
            Common::Differ
        }
    }
}

/// Reports of `ranks` of one kind and key, merged.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Gathered {
    pub kind: Kind,
    pub key: u64,
    pub ranks: RankSet,
    pub value: Common,
}

impl Gathered {
    /// The name of the message each rank would have sent, for counts.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            Kind::Halted => "halted",
            Kind::Ready => "ready",
            Kind::Restored => "restored",
            Kind::Checkpoint => "checkpoint",
            Kind::Durable => "durable",
            Kind::Hello => "hello",
            Kind::Ended => "ended",
            Kind::Agree => "agree",
        }
    }
}

struct Gathering {
    /// What has come in and not gone up yet.
    report: Gathered,
    /// Ranks of this kind and key that went up already, when the window
    /// sent part of it: with them the rest completes.
    sent: RankSet,
    /// When the last report not yet sent came in.
    since: Option<Duration>,
}

pub struct Fan {
    /// The ranks below this node: its own and its children's.
    below: RankSet,
    /// Ranks being replaced in the recovery under way: they do not halt.
    replaced: RankSet,
    /// The newest generation a notice or report named.
    generation: u64,
    gathering: Vec<Gathering>,
    window: Duration,
}

impl Fan {
    pub fn new(below: RankSet, window: Duration) -> Fan {
        Fan {
            below,
            replaced: RankSet::new(),
            generation: 0,
            gathering: Vec::new(),
            window,
        }
    }

    pub fn below(&self) -> &RankSet {
        &self.below
    }

    /// `rank` is below this node now (an agent learns its ranks as it
    /// starts them).
    pub fn add_below(&mut self, rank: u32) {
        self.below.insert(rank);
    }

    /// `rank` is no longer below this node (its process ended and no other
    /// took its place here): no report of it is waited for. May complete
    /// gatherings.
    pub fn remove_below(&mut self, rank: u32) -> Vec<Gathered> {
        self.below.remove(rank);
        self.complete()
    }

    /// Everything gathered and not yet sent goes up now (before a message
    /// that must not overtake it).
    pub fn flush(&mut self) -> Vec<Gathered> {
        self.due(Duration::MAX)
    }

    /// The failure notice of `generation` passed down through this node:
    /// `failed` is being replaced (it will not halt). Gatherings of older
    /// generations are moot. May complete a gathering of halts.
    pub fn failure(&mut self, generation: u64, failed: &RankSet) -> Vec<Gathered> {
        self.new_generation(generation);
        // The job rolls back: the epochs after the one restored are done
        // again, and their reports must go up again.
        self.gathering.retain(|x| Self::fenced(x.report.kind));
        self.replaced.union(failed);
        self.complete()
    }

    /// The job resumed: the next failure starts a new recovery.
    pub fn resumed(&mut self) {
        self.replaced = RankSet::new();
    }

    fn new_generation(&mut self, generation: u64) {
        if generation > self.generation {
            self.generation = generation;
            let g = generation;
            self.gathering
                .retain(|x| !Self::fenced(x.report.kind) || x.report.key >= g);
        }
    }

    /// Kinds whose key is a generation: gatherings of older ones are
    /// dropped when a newer generation is named (the others' key is an
    /// epoch: a newer one done supersedes them).
    fn fenced(kind: Kind) -> bool {
        !matches!(kind, Kind::Checkpoint | Kind::Durable)
    }

    /// Kinds whose value the node above needs rank by rank (the epoch
    /// restored, how far a checkpoint is durable): reports of
    /// different values gather apart (and go up when their window passes:
    /// they differ only when something went wrong).
    fn exact(kind: Kind) -> bool {
        matches!(kind, Kind::Restored | Kind::Checkpoint)
    }

    fn expected(&self, kind: Kind) -> RankSet {
        match kind {
            // The failed do not halt, nor agree.
            Kind::Halted | Kind::Agree => self.below.minus(&self.replaced),
            // During a recovery only its new processes say hello; at a
            // (re)launch every one.
            Kind::Hello if !self.replaced.is_empty() => self
                .replaced
                .iter()
                .filter(|&r| self.below.contains(r))
                .collect(),
            _ => self.below.clone(),
        }
    }

    /// A report from below (a rank's own, or a child's gathering) at time
    /// `now`. Returns what goes up now, if anything.
    pub fn report(&mut self, r: Gathered, now: Duration) -> Vec<Gathered> {
        if Self::fenced(r.kind) {
            if r.key < self.generation {
                return Vec::new();
            }
            self.new_generation(r.key);
        }
        let same = |x: &Gathering| x.report.kind == r.kind && x.report.key == r.key;
        // An exact kind joins the gathering of its value, else one that
        // is empty (went up already), else a new one.
        let exact = Self::exact(r.kind);
        let at = (self.gathering.iter())
            .position(|x| same(x) && (!exact || x.report.value == r.value))
            .or_else(|| (self.gathering.iter()).position(|x| same(x) && x.report.ranks.is_empty()));
        match at.map(|i| &mut self.gathering[i]) {
            Some(x) if x.report.ranks.is_empty() => {
                x.report.ranks = r.ranks;
                x.report.value = r.value;
                x.since = Some(now);
            }
            Some(x) => {
                x.report.ranks.union(&r.ranks);
                x.report.value = x.report.value.merge(r.value);
                x.since = Some(now);
            }
            None => self.gathering.push(Gathering {
                report: r,
                sent: RankSet::new(),
                since: Some(now),
            }),
        }
        self.complete()
    }

    /// Gatherings that cover every rank expected of them (with what went
    /// up of them before) go up; a checkpoint done supersedes the older
    /// ones still gathering. A gathering that went up stays (empty) until
    /// its generation passes: a rank that joins this node later (a
    /// replacement's hello) completes it alone.
    fn complete(&mut self) -> Vec<Gathered> {
        let mut out: Vec<Gathered> = Vec::new();
        for i in 0..self.gathering.len() {
            let expected = self.expected(self.gathering[i].report.kind);
            let x = &mut self.gathering[i];
            let mut all = x.sent.clone();
            all.union(&x.report.ranks);
            if !x.report.ranks.is_empty() && all.covers(&expected) {
                x.sent = all;
                x.since = None;
                out.push(Gathered {
                    ranks: std::mem::take(&mut x.report.ranks),
                    ..x.report.clone()
                });
            }
        }
        for done in out.iter().filter(|d| !Self::fenced(d.kind)) {
            self.gathering
                .retain(|x| x.report.kind != done.kind || x.report.key > done.key);
        }
        out
    }

    /// Gatherings whose window has passed at `now` send what they have.
    pub fn due(&mut self, now: Duration) -> Vec<Gathered> {
        let mut out = Vec::new();
        for x in &mut self.gathering {
            if x.since.is_some_and(|t| now >= t + self.window) {
                let ranks = std::mem::take(&mut x.report.ranks);
                x.sent.union(&ranks);
                x.since = None;
                out.push(Gathered {
                    ranks,
                    ..x.report.clone()
                });
            }
        }
        out
    }

    /// When the next gathering falls due.
    pub fn deadline(&self) -> Option<Duration> {
        self.gathering
            .iter()
            .filter_map(|x| x.since)
            .map(|t| t + self.window)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_millis(2);

    fn rep(kind: Kind, key: u64, ranks: RankSet, value: Option<u64>) -> Gathered {
        Gathered {
            kind,
            key,
            ranks,
            value: Common::All(value),
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn halts_go_up_once_every_survivor_below_halted() {
        let mut f = Fan::new(RankSet::of(0..4), W);
        assert!(f.failure(1, &RankSet::one(2)).is_empty());
        for r in [0, 1] {
            assert!(f
                .report(rep(Kind::Halted, 1, RankSet::one(r), None), ms(0))
                .is_empty());
        }
        let up = f.report(rep(Kind::Halted, 1, RankSet::one(3), None), ms(0));
        assert_eq!(up.len(), 1);
        assert_eq!(up[0].ranks.iter().collect::<Vec<_>>(), [0, 1, 3]);
        assert_eq!(f.deadline(), None, "nothing left");
    }

    #[test]
    fn ready_needs_every_rank_and_says_whether_they_agree() {
        let mut f = Fan::new(RankSet::of(0..3), W);
        f.failure(1, &RankSet::one(0));
        f.report(rep(Kind::Ready, 1, RankSet::one(0), Some(4)), ms(0));
        f.report(rep(Kind::Ready, 1, RankSet::one(1), Some(4)), ms(0));
        let up = f.report(rep(Kind::Ready, 1, RankSet::one(2), Some(4)), ms(0));
        assert_eq!(up[0].value, Common::All(Some(4)));
        f.report(rep(Kind::Ready, 2, RankSet::of(0..2), Some(4)), ms(0));
        let up = f.report(rep(Kind::Ready, 2, RankSet::one(2), Some(3)), ms(0));
        assert_eq!(up[0].value, Common::Differ);
    }

    #[test]
    fn a_newer_generation_drops_older_gatherings_and_stale_reports() {
        let mut f = Fan::new(RankSet::of(0..4), W);
        f.failure(1, &RankSet::one(3));
        f.report(rep(Kind::Halted, 1, RankSet::one(0), None), ms(0));
        // Rank 2 fails during the recovery: generation 2 replaces 3 and 2.
        f.failure(2, &RankSet::one(2));
        assert_eq!(f.deadline(), None, "generation 1's halts are moot");
        assert!(f
            .report(rep(Kind::Halted, 1, RankSet::one(1), None), ms(0))
            .is_empty());
        f.report(rep(Kind::Halted, 2, RankSet::one(0), None), ms(0));
        let up = f.report(rep(Kind::Halted, 2, RankSet::one(1), None), ms(0));
        assert_eq!(up.len(), 1, "2 and 3 are both replaced");
        // A checkpoint report is not fenced by the generation of a report
        // (its key is an epoch), but a failure notice drops it: the job
        // rolls back and the epoch is done again.
        f.report(rep(Kind::Halted, 3, RankSet::one(0), None), ms(0));
        f.report(rep(Kind::Checkpoint, 1, RankSet::one(0), None), ms(0));
        assert_eq!(f.deadline(), Some(W));
        f.flush();
        f.report(rep(Kind::Checkpoint, 1, RankSet::one(1), None), ms(0));
        f.failure(3, &RankSet::new());
        assert_eq!(f.deadline(), None);
    }

    #[test]
    fn during_a_recovery_only_the_new_processes_say_hello() {
        let mut f = Fan::new(RankSet::of(0..4), W);
        let up = f.report(rep(Kind::Hello, 0, RankSet::of(0..4), None), ms(0));
        assert_eq!(up.len(), 1, "at start every rank");
        f.failure(1, &RankSet::one(2));
        let up = f.report(rep(Kind::Hello, 1, RankSet::one(2), None), ms(0));
        assert_eq!(up.len(), 1, "the replacement alone");
        let up = f.report(rep(Kind::Agree, 1, RankSet::of(0..2), Some(1)), ms(0));
        assert!(up.is_empty());
        let up = f.report(rep(Kind::Agree, 1, RankSet::one(3), Some(1)), ms(0));
        assert_eq!(up.len(), 1, "the failed rank does not agree");
    }

    #[test]
    fn an_incomplete_gathering_goes_up_when_its_window_passes() {
        let mut f = Fan::new(RankSet::of(0..8), W);
        f.report(rep(Kind::Checkpoint, 5, RankSet::of(0..3), None), ms(10));
        f.report(rep(Kind::Checkpoint, 5, RankSet::of(4..6), None), ms(11));
        assert_eq!(f.deadline(), Some(ms(13)), "a window after the last report");
        assert!(f.due(ms(12)).is_empty());
        let up = f.due(ms(13));
        assert_eq!(up[0].ranks.len(), 5);
        assert_eq!(up[0].ranks.ranges(), 2);
        // The rest completes with what went up already.
        assert!(f
            .report(rep(Kind::Checkpoint, 5, RankSet::one(3), None), ms(13))
            .is_empty());
        let rest = f.report(rep(Kind::Checkpoint, 5, RankSet::of(6..8), None), ms(13));
        assert_eq!(rest[0].ranks.iter().collect::<Vec<_>>(), [3, 6, 7]);
        assert_eq!(f.deadline(), None);
        // A newer checkpoint done supersedes an older one still gathering.
        f.report(rep(Kind::Checkpoint, 6, RankSet::of(0..7), None), ms(20));
        let up = f.report(rep(Kind::Checkpoint, 7, RankSet::of(0..8), None), ms(20));
        assert_eq!(up[0].key, 7);
        assert_eq!(f.deadline(), None, "epoch 6's gathering is gone");
    }

    #[test]
    fn restores_of_different_epochs_gather_apart_and_flush_sends_all() {
        let mut f = Fan::new(RankSet::new(), W);
        for r in 0..3 {
            f.add_below(r);
        }
        f.report(rep(Kind::Restored, 1, RankSet::one(0), Some(4)), ms(0));
        f.report(rep(Kind::Restored, 1, RankSet::one(1), Some(3)), ms(0));
        let up = f.report(rep(Kind::Restored, 1, RankSet::one(2), Some(4)), ms(0));
        assert!(up.is_empty(), "neither value covers every rank");
        // Generation 2 fences them (a rank failed while they restored).
        f.report(rep(Kind::Halted, 2, RankSet::one(0), None), ms(0));
        f.report(rep(Kind::Restored, 2, RankSet::one(0), Some(4)), ms(0));
        f.report(rep(Kind::Restored, 2, RankSet::one(1), Some(3)), ms(0));
        let mut up = f.flush();
        up.sort_by_key(|g| g.ranks.iter().next());
        let got: Vec<_> = up
            .iter()
            .map(|g| (g.kind, g.key, g.ranks.len(), g.value))
            .collect();
        assert_eq!(
            got,
            [
                (Kind::Halted, 2, 1, Common::All(None)),
                (Kind::Restored, 2, 1, Common::All(Some(4))),
                (Kind::Restored, 2, 1, Common::All(Some(3)))
            ]
        );
        assert_eq!(f.deadline(), None);
    }

    #[test]
    fn a_rank_that_joins_after_its_step_went_up_completes_it_alone() {
        let mut f = Fan::new(RankSet::of(4..6), W);
        f.failure(1, &RankSet::of(2..4));
        let up = f.report(rep(Kind::Ready, 1, RankSet::of(4..6), Some(3)), ms(0));
        assert_eq!(up.len(), 1);
        // The replacements of 2 and 3 start here and say hello.
        f.add_below(2);
        f.add_below(3);
        assert!(f
            .report(rep(Kind::Ready, 1, RankSet::one(2), Some(3)), ms(1))
            .is_empty());
        let up = f.report(rep(Kind::Ready, 1, RankSet::one(3), Some(3)), ms(1));
        assert_eq!(up[0].ranks.iter().collect::<Vec<_>>(), [2, 3]);
        assert_eq!(f.deadline(), None);
    }
}
