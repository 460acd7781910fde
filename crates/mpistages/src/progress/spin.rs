//! How long a waiting thread polls before it sleeps, adapted to what the
//! recent waits of this process needed (issue 38: waiting that survives
//! contention). A sleep costs a wake-up — a system call by the peer and a
//! trip through the scheduler, tens of microseconds with a busy process
//! beside the job — so a wait that ended soon after its thread went to
//! sleep says that polling longer would have paid: the budget grows, up to
//! a cap. A wait far longer than the cap says the peer is busy with other
//! work, and one that ended well within the budget says less would do: the
//! budget shrinks back towards its base. A poller does not give its core
//! away between rounds while the job's ranks fit on the cores (mpiexec
//! binds them each to its own share): a `sched_yield` then hands the rest
//! of the time slice to whatever else runs there, a busy process beside
//! the job included.
//!
//! Where the job's ranks do not fit on the machine's cores the cap is the
//! base, and the poller yields between rounds: idle ranks must sleep.
//! While a helper thread of this process runs (a window's agent, a
//! non-blocking collective's worker: `Helper`), the budget stays at the
//! base too: a rank bound to its share of the cores would take the core
//! such a thread needs for as long as it polls (MPICH's `rma_contig` took
//! 80 s with 1 ms budgets against 33 s at the base).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub struct SpinBudget {
    base: Duration,
    cap: Duration,
    /// The budget now, in nanoseconds.
    now: AtomicU64,
}

impl SpinBudget {
    pub fn new(base: Duration, cap: Duration) -> SpinBudget {
        let cap = cap.max(base);
        SpinBudget {
            base,
            cap,
            now: AtomicU64::new(base.as_nanos() as u64),
        }
    }

    /// How long the next wait polls before it sleeps.
    pub fn budget(&self) -> Duration {
        with_helpers(self.grown(), self.base, HELPERS.load(Ordering::Relaxed))
    }

    /// The budget as waits grew it, helpers aside.
    fn grown(&self) -> Duration {
        Duration::from_nanos(self.now.load(Ordering::Relaxed))
    }

    /// A wait ended `waited` after it began; `slept`: its thread slept.
    /// Waiting threads of one process may record at once: the last store
    /// wins, which is as good as any.
    pub fn record(&self, waited: Duration, slept: bool) {
        let next = next_budget(self.grown(), self.base, self.cap, waited, slept);
        self.now.store(next.as_nanos() as u64, Ordering::Relaxed);
    }
}

/// The stretches of one wait between the things that came, as its clock
/// reads see them: a wait polls for its budget from the start of each
/// (a sender streaming large messages, whose completions come every
/// ~100 us, slept through each when the budget ran from the start of its
/// `MPI_Waitall`, and was woken for each), and what it records is its
/// longest (the stretch that polling must cover; the whole wait, when
/// nothing came before it ended).
pub struct Stretches {
    /// When the current stretch began (the first clock read, or the
    /// first after something came); none before the clock was read.
    from: Option<Instant>,
    longest: Duration,
    /// Something came since the last clock read.
    moved: bool,
}

impl Stretches {
    pub fn new() -> Stretches {
        Stretches {
            from: None,
            longest: Duration::ZERO,
            moved: false,
        }
    }

    /// Something came: the stretch ends at the next clock read (no clock
    /// read here: this runs per message).
    pub fn moved(&mut self) {
        self.moved = true;
    }

    /// The clock read `now`: true if a stretch begins here (the budget
    /// then counts from now).
    pub fn tick(&mut self, now: Instant) -> bool {
        let Some(from) = self.from else {
            self.from = Some(now);
            self.moved = false;
            return true;
        };
        self.longest = self.longest.max(now.saturating_duration_since(from));
        if std::mem::take(&mut self.moved) {
            self.from = Some(now);
            return true;
        }
        false
    }

    /// What the wait ending now needed (`needed_at`); the clock is read
    /// only if it was before (most waits end sooner).
    pub fn needed(&self) -> Option<Duration> {
        self.from.and_then(|_| self.needed_at(Instant::now()))
    }

    /// What the wait ending `now` needed: its longest stretch, the last
    /// included; `None` if the clock was never read (a short wait).
    pub fn needed_at(&self, now: Instant) -> Option<Duration> {
        let from = self.from?;
        Some(self.longest.max(now.saturating_duration_since(from)))
    }
}

impl Default for Stretches {
    fn default() -> Self {
        Stretches::new()
    }
}

/// Helper threads of this process running now.
static HELPERS: AtomicUsize = AtomicUsize::new(0);

/// Held by a helper thread while it runs: waits poll for the base budget
/// only meanwhile (see the module's comment).
pub struct Helper(());

impl Helper {
    pub fn running() -> Helper {
        HELPERS.fetch_add(1, Ordering::Relaxed);
        Helper(())
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        HELPERS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The budget a wait polls for: the grown one, or the base while helper
/// threads run.
fn with_helpers(grown: Duration, base: Duration, helpers: usize) -> Duration {
    if helpers > 0 {
        grown.min(base)
    } else {
        grown
    }
}

/// The budget after a wait (pure: the policy, tested on its own).
pub fn next_budget(
    now: Duration,
    base: Duration,
    cap: Duration,
    waited: Duration,
    slept: bool,
) -> Duration {
    let shrunk = (now - now / 4).max(base);
    if slept {
        if waited <= cap {
            // Polling until then would have saved the wake-up.
            (now * 2).max(waited + waited / 4).min(cap)
        } else {
            shrunk
        }
    } else if waited < now / 8 {
        shrunk
    } else {
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn a_wait_records_its_longest_stretch_without_progress() {
        let t0 = Instant::now();
        let at = |us: u32| t0 + US * us;
        // Nothing came: the whole wait.
        let mut s = Stretches::new();
        assert_eq!(s.needed_at(at(5)), None, "no clock read: not recorded");
        assert!(s.tick(at(0)), "the first read begins a stretch");
        assert!(!s.tick(at(40)));
        assert_eq!(s.needed_at(at(100)), Some(100 * US));
        // Completions every 30 us of a 100 us wait, seen at clock reads
        // every 10 us: stretches of 30, 30, 30 and 10.
        let mut s = Stretches::new();
        let mut began = Vec::new();
        for us in (0..=90).step_by(10) {
            if us > 0 && us % 30 == 0 {
                s.moved();
            }
            if s.tick(at(us)) {
                began.push(us);
            }
        }
        assert_eq!(began, [0, 30, 60, 90], "the budget counts from each");
        assert_eq!(s.needed_at(at(100)), Some(30 * US));
        // A long stretch first, short ones after: the long one counts.
        let mut s = Stretches::new();
        s.tick(at(0));
        s.moved();
        s.tick(at(80));
        s.moved();
        s.tick(at(90));
        assert_eq!(s.needed_at(at(95)), Some(80 * US));
    }

    #[test]
    fn a_wait_that_slept_briefly_grows_the_budget_up_to_the_cap() {
        let (base, cap) = (50 * US, 1000 * US);
        assert_eq!(next_budget(base, base, cap, 80 * US, true), 100 * US);
        assert_eq!(next_budget(base, base, cap, 400 * US, true), 500 * US);
        assert_eq!(next_budget(800 * US, base, cap, 900 * US, true), cap);
    }

    #[test]
    fn long_waits_and_short_ones_shrink_it_to_the_base() {
        let (base, cap) = (50 * US, 1000 * US);
        // Slept far longer than the cap: the peer was busy.
        assert_eq!(next_budget(800 * US, base, cap, 5000 * US, true), 600 * US);
        // Done within an eighth of the budget.
        assert_eq!(next_budget(800 * US, base, cap, 20 * US, false), 600 * US);
        // Never below the base.
        assert_eq!(next_budget(60 * US, base, cap, US, false), base);
        // A spin that used its budget keeps it.
        assert_eq!(next_budget(400 * US, base, cap, 300 * US, false), 400 * US);
    }

    #[test]
    fn a_running_helper_keeps_the_budget_at_the_base() {
        let (base, grown) = (50 * US, 800 * US);
        assert_eq!(with_helpers(grown, base, 0), grown);
        assert_eq!(with_helpers(grown, base, 1), base);
        assert_eq!(with_helpers(grown, base, 3), base);
        // A budget below the base (set so by hand) stays as it is.
        assert_eq!(with_helpers(10 * US, base, 1), 10 * US);
    }

    #[test]
    fn where_ranks_do_not_fit_the_cap_is_the_base() {
        let b = SpinBudget::new(200 * US, 200 * US);
        b.record(150 * US, true);
        b.record(250 * US, true);
        assert_eq!(b.budget(), 200 * US);
        let b = SpinBudget::new(50 * US, 1000 * US);
        for _ in 0..10 {
            b.record(300 * US, true);
        }
        assert_eq!(b.budget(), 1000 * US);
        for _ in 0..20 {
            b.record(US, false);
        }
        assert_eq!(b.budget(), 50 * US);
    }
}
