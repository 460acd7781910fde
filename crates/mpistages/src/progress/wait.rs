//! The wait policy: who advances communication and who sleeps. A user
//! thread blocked in a wait polls the transports itself (spinning for
//! `spin`, then sleeping in epoll); other waiting threads sleep on the
//! condition variable; whenever no user thread waits, the progress thread
//! drives (strong progress while the application computes), and parks
//! while user threads poll.

use super::engine::{Engine, EPOLL_EVERY, HANDOFF_DELAY, TOKEN_WAKE};
use super::spin::Stretches;
use super::state::Core;
use parking_lot::MutexGuard;
use std::time::{Duration, Instant};

/// Spin rounds between two looks at the clock.
const CLOCK_EVERY: u32 = 32;

impl Engine {
    /// The progress thread drives communication unless user threads are
    /// busy waiting (and so polling) themselves: then it parks, looking
    /// again when the hand-off timer fires, on shutdown, or every
    /// `standby`.
    pub(super) fn progress_loop(&self) {
        let mut evs = Vec::with_capacity(64);
        let mut parked = false;
        let mut seen = 0;
        loop {
            let (may_sleep, timeout) = {
                let mut core = self.lock();
                core.progress_parked = parked;
                (parked || core.prepare_sleep(), core.sleep_timeout())
            };
            evs.clear();
            let r = if parked {
                self.standby.wait(&mut evs, self.standby_ms)
            } else {
                self.outer
                    .wait(&mut evs, if may_sleep { timeout } else { 0 })
            };
            if r.is_err() {
                std::thread::sleep(Duration::from_millis(1));
            }
            let mut core = self.lock();
            if core.shutdown {
                return;
            }
            self.wake.drain();
            let handed_back = self.handoff.drain();
            if handed_back {
                core.handoff_armed = false;
            }
            let users_busy = core.polling
                || if handed_back {
                    core.user_polls != core.handoff_polls
                } else {
                    core.user_polls != seen
                };
            seen = core.user_polls;
            parked = users_busy;
            if parked {
                // Failure notices cannot wait for the user thread.
                if evs.iter().any(|e| e.token == TOKEN_WAKE) {
                    let before = core.changes;
                    core.on_control(&self.bell);
                    self.after(&core, before, false);
                }
                continue;
            }
            evs.clear();
            let _ = self.main.wait(&mut evs, 0);
            let before = core.changes;
            core.handle(&evs, &self.bell);
            self.after(&core, before, false);
            // Hand the lock straight to a user thread waiting for it: this
            // thread would otherwise take it back at once for the next chunk
            // of a bulk transfer and starve the application's MPI calls.
            MutexGuard::unlock_fair(core);
        }
    }

    /// Wakes whoever must see changes that just happened.
    pub(super) fn after(&self, core: &Core, before: u64, from_user: bool) {
        if core.changes == before {
            return;
        }
        if core.waiters > 0 {
            self.cond.notify_all();
        }
        if from_user && core.polling {
            self.bell.ring();
        }
    }

    /// Called when a user thread returns to the application: requests still
    /// in flight must be advanced by the progress thread from now on (after
    /// `HANDOFF_DELAY`, in case the application comes right back to wait).
    pub fn background(&self) {
        self.hand_off(&mut self.lock());
    }

    /// `background` under the engine lock already held.
    pub(super) fn hand_off(&self, core: &mut Core) {
        if core.bulk_active > 0 {
            self.hand_all_off(core);
        }
    }

    fn hand_all_off(&self, core: &mut Core) {
        if core.progress_parked && !core.polling {
            core.handoff_polls = core.user_polls;
            if !core.handoff_armed {
                core.handoff_armed = true;
                self.handoff.arm(HANDOFF_DELAY);
            }
        }
    }

    /// The calling thread is going to sleep outside the engine (in a
    /// collective in shared memory): a parked progress thread takes over
    /// everything (a peer may wait for this process's acknowledgement).
    pub fn sleep_outside(&self) {
        self.hand_all_off(&mut self.lock());
    }

    /// Advances communication once without blocking (used by the test
    /// family and probes, which must make progress on their own in poll
    /// mode).
    pub fn poke(&self) {
        let mut core = self.lock();
        if core.polling {
            // Another thread (a window's agent, say) polls, asleep in epoll
            // or not yet scheduled after its wake-up: what has come is read
            // here all the same (every connection, at 4 ranks over TCP
            // too), or a test right after a collective in shared memory
            // would miss a message sent before it. Not through epoll: its
            // bell is the sleeper's. Epoll is level-triggered, so nothing
            // the sleeper waits for is lost; it hears of what was read
            // here by the bell.
            let before = core.changes;
            core.expire_doomed();
            core.read_all();
            self.after(&core, before, true);
            return;
        }
        let mut evs = Vec::new();
        let _ = self.main.wait(&mut evs, 0);
        let before = core.changes;
        core.handle(&evs, &self.bell);
        self.after(&core, before, false);
    }

    /// Runs `f` under the engine lock, then wakes waiters if it completed
    /// anything.
    pub(super) fn with<T>(&self, f: impl FnOnce(&mut Core) -> T) -> T {
        let mut core = self.lock();
        let before = core.changes;
        let v = f(&mut core);
        self.after(&core, before, true);
        v
    }

    /// Blocks until `f` returns `Some`. One waiting thread at a time polls
    /// the transports (spinning for the budget of `spin` first, giving the
    /// core away between rounds where ranks share cores, then sleeping in
    /// epoll);
    /// others sleep on the condition variable. What the wait took adapts
    /// the budget.
    pub(super) fn wait_until<T>(&self, mut f: impl FnMut(&mut Core) -> Option<T>) -> T {
        let mut core = self.lock();
        let mut evs = Vec::new();
        // The stretches between things that came, and when to stop polling
        // (a budget from the start of the current stretch).
        let mut stretches = Stretches::new();
        let mut deadline: Option<Instant> = None;
        let mut spins: u32 = 0;
        let mut spinning = true;
        let mut slept = false;
        loop {
            let before = core.changes;
            let v = f(&mut core);
            self.after(&core, before, true);
            if let Some(v) = v {
                self.hand_off(&mut core);
                drop(core);
                if let Some(needed) = stretches.needed() {
                    self.spin.record(needed, slept);
                }
                return v;
            }
            if !core.polling {
                // The clock is read every few rounds, from the end of the
                // first few: a read costs as much as a round of polling
                // shared memory, and most waits of a ping-pong end sooner
                // (they are not recorded: the budget matters to none).
                // A yielding poller reads it every round: a round there
                // costs a trip through the scheduler, and 32 of them per
                // wait were a third of a 1024-rank barrier's time.
                let clock_every = if self.spin_yield { 1 } else { CLOCK_EVERY };
                if spins > 0 && spins.is_multiple_of(clock_every) {
                    let now = Instant::now();
                    // The first read begins a stretch: a deadline is set.
                    if stretches.tick(now) {
                        deadline = Some(now + self.spin.budget());
                    }
                    spinning = deadline.is_some_and(|d| now < d);
                }
                spins = spins.wrapping_add(1);
                if spinning && !spins.is_multiple_of(EPOLL_EVERY) {
                    let before = core.changes;
                    if core.poll_reads() {
                        core.user_polls += 1;
                        let idle = core.changes == before;
                        if !idle {
                            stretches.moved();
                        }
                        self.after(&core, before, false);
                        if idle && self.spin_yield {
                            // Ranks outnumber cores and nothing came: the
                            // core goes to one that may have work (after
                            // the poll, not before: a message already there
                            // is taken without a trip through the scheduler).
                            MutexGuard::unlocked(&mut core, std::thread::yield_now);
                        } else {
                            // Let other threads at the engine between rounds.
                            MutexGuard::bump(&mut core);
                        }
                        continue;
                    }
                }
                core.polling = true;
                core.user_polls += 1;
                let sleep = !spinning && core.prepare_sleep();
                let timeout = if sleep { core.sleep_timeout() } else { 0 };
                slept |= timeout != 0;
                drop(core);
                evs.clear();
                let _ = self.main.wait(&mut evs, timeout);
                core = self.lock();
                core.polling = false;
                let before = core.changes;
                core.handle(&evs, &self.bell);
                if core.changes != before {
                    // Something came (after a sleep too): poll again for a
                    // budget before the next sleep (`Stretches`).
                    stretches.moved();
                    spinning = true;
                }
                // Another waiting thread may now take over polling.
                if core.waiters > 0 {
                    self.cond.notify_all();
                }
                if spinning && self.spin_yield && evs.is_empty() && core.changes == before {
                    MutexGuard::unlocked(&mut core, std::thread::yield_now);
                }
            } else {
                core.waiters += 1;
                self.cond.wait(&mut core);
                core.waiters -= 1;
            }
        }
    }
}
