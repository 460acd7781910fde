//! A window's passive-target lock at its owner (`MPI_Win_lock` /
//! `unlock`): shared holders or one exclusive holder, and a queue of
//! waiting requests granted in arrival order. A pure state machine: the
//! agent feeds it requests and sends the grants it returns.

use std::collections::VecDeque;

/// A lock request: who asks, how, and the reply tag its grant goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ask {
    pub origin: usize,
    pub exclusive: bool,
    pub reply: i32,
}

#[derive(Debug, Default)]
pub struct LockState {
    shared: Vec<usize>,
    exclusive: Option<usize>,
    waiting: VecDeque<Ask>,
}

/// What an unlock found.
#[derive(Debug, PartialEq, Eq)]
pub enum Released {
    /// The lock was released; these waiting requests are granted now.
    Granted(Vec<Ask>),
    /// The origin held no lock here.
    NotHeld,
}

impl LockState {
    /// A lock request: granted now (`Some`) or queued.
    pub fn lock(&mut self, ask: Ask) -> Option<Ask> {
        if self.waiting.is_empty() && self.grantable(ask.exclusive) {
            self.hold(ask);
            Some(ask)
        } else {
            self.waiting.push_back(ask);
            None
        }
    }

    /// `origin` releases its lock; returns the requests that get it now.
    pub fn unlock(&mut self, origin: usize) -> Released {
        if self.exclusive == Some(origin) {
            self.exclusive = None;
        } else if let Some(i) = self.shared.iter().position(|&o| o == origin) {
            self.shared.swap_remove(i);
        } else {
            return Released::NotHeld;
        }
        let mut granted = Vec::new();
        while let Some(&next) = self.waiting.front() {
            if !self.grantable(next.exclusive) {
                break;
            }
            self.waiting.pop_front();
            self.hold(next);
            granted.push(next);
        }
        Released::Granted(granted)
    }

    /// Forgets a dead origin: its locks are released and its waiting
    /// requests dropped (ULFM); returns the requests granted now.
    pub fn forget(&mut self, origin: usize) -> Vec<Ask> {
        self.waiting.retain(|a| a.origin != origin);
        let mut granted = Vec::new();
        while let Released::Granted(g) = self.unlock(origin) {
            granted.extend(g);
        }
        granted
    }

    fn grantable(&self, exclusive: bool) -> bool {
        self.exclusive.is_none() && (!exclusive || self.shared.is_empty())
    }

    fn hold(&mut self, ask: Ask) {
        if ask.exclusive {
            self.exclusive = Some(ask.origin);
        } else {
            self.shared.push(ask.origin);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(origin: usize, exclusive: bool) -> Ask {
        Ask {
            origin,
            exclusive,
            reply: origin as i32,
        }
    }

    #[test]
    fn shared_locks_coexist_and_an_exclusive_one_waits_for_them() {
        let mut l = LockState::default();
        assert!(l.lock(ask(1, false)).is_some());
        assert!(l.lock(ask(2, false)).is_some());
        assert!(l.lock(ask(3, true)).is_none());
        // A later shared request queues behind the exclusive one.
        assert!(l.lock(ask(4, false)).is_none());
        assert_eq!(l.unlock(1), Released::Granted(vec![]));
        assert_eq!(l.unlock(2), Released::Granted(vec![ask(3, true)]));
        assert_eq!(l.unlock(3), Released::Granted(vec![ask(4, false)]));
        assert_eq!(l.unlock(3), Released::NotHeld);
    }

    #[test]
    fn waiting_shared_requests_are_granted_together() {
        let mut l = LockState::default();
        assert!(l.lock(ask(0, true)).is_some());
        assert!(l.lock(ask(1, false)).is_none());
        assert!(l.lock(ask(2, false)).is_none());
        assert!(l.lock(ask(3, true)).is_none());
        assert_eq!(
            l.unlock(0),
            Released::Granted(vec![ask(1, false), ask(2, false)])
        );
        assert_eq!(l.unlock(1), Released::Granted(vec![]));
        assert_eq!(l.unlock(2), Released::Granted(vec![ask(3, true)]));
    }

    #[test]
    fn a_dead_origin_releases_what_it_held_and_stops_waiting() {
        let mut l = LockState::default();
        assert!(l.lock(ask(5, true)).is_some());
        assert!(l.lock(ask(6, true)).is_none());
        assert!(l.lock(ask(5, false)).is_none());
        assert_eq!(l.forget(5), vec![ask(6, true)]);
        assert_eq!(l.unlock(6), Released::Granted(vec![]));
        assert!(l.lock(ask(7, true)).is_some());
    }
}
