//! MPI message matching for one process, free of I/O ("sans-I/O").
//!
//! Per communicator context there is a posted-receive queue and an unexpected
//! message queue, both split by source so a receive or an arrival with a known
//! source looks at one short list. Wildcard (`MPI_ANY_SOURCE`) receives sit in
//! their own list; posting sequence numbers decide between a per-source and a
//! wildcard candidate, which keeps MPI's rule that receives match in the order
//! they were posted. Arrival sequence numbers do the same for unexpected
//! messages, which keeps the non-overtaking rule per (context, source).

// Small integer keys (context ids, ranks) on every message: a fast
// hash, not SipHash (which was 5-7% of an 8-byte ping-pong).
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;

/// A receive's source selector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Src {
    Any,
    Rank(u32),
}

/// A receive's tag selector (`None` = `MPI_ANY_TAG`).
pub type TagSel = Option<i32>;

struct Posted<R> {
    seq: u64,
    tag: TagSel,
    req: R,
}

struct Unexpected<M> {
    seq: u64,
    tag: i32,
    msg: M,
}

/// What one context holds for one source: its posted receives and its
/// unexpected messages, found with one lookup (a receive looks at the
/// unexpected ones, then queues itself; an arrival looks at the posted
/// ones, then queues itself).
struct Source<R, M> {
    posted: VecDeque<Posted<R>>,
    unexpected: VecDeque<Unexpected<M>>,
}

impl<R, M> Default for Source<R, M> {
    fn default() -> Self {
        Source {
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
        }
    }
}

struct Context<R, M> {
    sources: HashMap<u32, Source<R, M>>,
    posted_any: VecDeque<Posted<R>>,
}

impl<R, M> Default for Context<R, M> {
    fn default() -> Self {
        Context {
            sources: HashMap::default(),
            posted_any: VecDeque::new(),
        }
    }
}

/// An emptied queue keeps its memory (not freed and made again at its
/// next entry: an allocation per message of a ping-pong, and five
/// regrowths per window of a message-rate loop that posts 64 receives at
/// once) unless a burst grew it beyond this many entries (6 KiB of posted
/// receives, 16 KiB of unexpected messages).
const KEEP_EMPTY: usize = 256;

fn tag_matches(sel: TagSel, tag: i32) -> bool {
    sel.is_none_or(|t| t == tag)
}

/// Takes entry `i` of `q` (nearly always the first: `pop_front` is
/// cheaper), giving back the memory of a burst once `q` is empty.
fn take_at<T>(q: &mut VecDeque<T>, i: usize) -> Option<T> {
    let v = if i == 0 { q.pop_front() } else { q.remove(i) };
    if q.is_empty() && q.capacity() > KEEP_EMPTY {
        *q = VecDeque::new();
    }
    v
}

impl<R: Copy, M> Context<R, M> {
    /// Takes the receive a message from `src` with `tag` matches (among
    /// those for that source and the wildcard ones, the one posted first)
    /// if `ok` accepts it; else leaves everything as it was. One lookup of
    /// the source: this runs for every message that arrives.
    fn take_posted(&mut self, src: u32, tag: i32, ok: impl FnOnce(R) -> bool) -> Option<R> {
        let by_src = self.sources.get_mut(&src).map(|s| &mut s.posted);
        let i = by_src
            .as_ref()
            .and_then(|q| q.iter().position(|p| tag_matches(p.tag, tag)));
        let j = if self.posted_any.is_empty() {
            None
        } else {
            self.posted_any.iter().position(|p| tag_matches(p.tag, tag))
        };
        let from_src = match (i, j) {
            (Some(i), Some(j)) => by_src
                .as_ref()
                .is_some_and(|q| q[i].seq < self.posted_any[j].seq),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        let (q, i) = if from_src {
            (by_src?, i?)
        } else {
            (&mut self.posted_any, j?)
        };
        if !ok(q[i].req) {
            return None;
        }
        Some(take_at(q, i)?.req)
    }

    /// The earliest unexpected message a receive matches: (source, index
    /// in that source's list).
    fn find_unexpected(&self, src: Src, tag: TagSel) -> Option<(u32, usize)> {
        let first_in = |s: u32| -> Option<(u64, usize)> {
            let q = &self.sources.get(&s)?.unexpected;
            q.iter()
                .position(|u| tag_matches(tag, u.tag))
                .map(|i| (q[i].seq, i))
        };
        match src {
            Src::Rank(s) => first_in(s).map(|(_, i)| (s, i)),
            Src::Any => self
                .sources
                .keys()
                .filter_map(|&s| first_in(s).map(|(seq, i)| (seq, s, i)))
                .min_by_key(|&(seq, _, _)| seq)
                .map(|(_, s, i)| (s, i)),
        }
    }

    fn take_unexpected(&mut self, src: Src, tag: TagSel) -> Option<(u32, i32, M)> {
        let (s, i) = self.find_unexpected(src, tag)?;
        let u = take_at(&mut self.sources.get_mut(&s)?.unexpected, i)?;
        Some((s, u.tag, u.msg))
    }
}

pub struct Matcher<R, M> {
    contexts: HashMap<u32, Context<R, M>>,
    next_seq: u64,
}

impl<R, M> Default for Matcher<R, M> {
    fn default() -> Self {
        Matcher {
            contexts: HashMap::default(),
            next_seq: 0,
        }
    }
}

impl<R: PartialEq + Copy, M> Matcher<R, M> {
    /// A receive is posted: returns the earliest matching unexpected message
    /// (with its source and tag), or queues the receive.
    pub fn post(&mut self, ctx: u32, src: Src, tag: TagSel, req: R) -> Option<(u32, i32, M)> {
        // Looked up first, made only when missing: `entry` would make
        // room for an insertion on every call.
        let c = match self.contexts.get_mut(&ctx) {
            Some(c) => c,
            None => self.contexts.entry(ctx).or_default(),
        };
        self.next_seq += 1;
        let entry = Posted {
            seq: self.next_seq,
            tag,
            req,
        };
        match src {
            Src::Any => {
                if let Some(found) = c.take_unexpected(src, tag) {
                    return Some(found);
                }
                c.posted_any.push_back(entry);
            }
            Src::Rank(s) => {
                let q = match c.sources.get_mut(&s) {
                    Some(q) => q,
                    None => c.sources.entry(s).or_default(),
                };
                if let Some(i) = q.unexpected.iter().position(|u| tag_matches(tag, u.tag)) {
                    let u = take_at(&mut q.unexpected, i)?;
                    return Some((s, u.tag, u.msg));
                }
                q.posted.push_back(entry);
            }
        }
        None
    }

    /// A message arrives: returns the receive it matches together with the
    /// message, or keeps the message as unexpected and returns `None`.
    pub fn arrive(&mut self, ctx: u32, src: u32, tag: i32, msg: M) -> Option<(R, M)> {
        self.next_seq += 1;
        let c = self.contexts.entry(ctx).or_default();
        match c.take_posted(src, tag, |_| true) {
            Some(req) => Some((req, msg)),
            None => {
                c.sources
                    .entry(src)
                    .or_default()
                    .unexpected
                    .push_back(Unexpected {
                        seq: self.next_seq,
                        tag,
                        msg,
                    });
                None
            }
        }
    }

    /// Takes the receive a message from `src` with `tag` would match now,
    /// if `ok` accepts it (matching in place: the message is copied into
    /// that receive's buffer directly); else leaves everything as it was.
    pub fn take_posted(
        &mut self,
        ctx: u32,
        src: u32,
        tag: i32,
        ok: impl FnOnce(R) -> bool,
    ) -> Option<R> {
        self.contexts.get_mut(&ctx)?.take_posted(src, tag, ok)
    }

    /// Looks at the message a receive would match now, without taking it.
    pub fn peek(&self, ctx: u32, src: Src, tag: TagSel) -> Option<(u32, i32, &M)> {
        let c = self.contexts.get(&ctx)?;
        let (s, i) = c.find_unexpected(src, tag)?;
        let u = &c.sources.get(&s)?.unexpected[i];
        Some((s, u.tag, &u.msg))
    }

    /// Removes a posted receive that has not matched yet. Returns whether it
    /// was still queued.
    pub fn cancel(&mut self, ctx: u32, req: R) -> bool {
        let Some(c) = self.contexts.get_mut(&ctx) else {
            return false;
        };
        let queues =
            std::iter::once(&mut c.posted_any).chain(c.sources.values_mut().map(|s| &mut s.posted));
        for q in queues {
            if let Some(i) = q.iter().position(|p| p.req == req) {
                take_at(q, i);
                return true;
            }
        }
        false
    }

    /// Drops every posted receive and unexpected message (used when MPI state
    /// is reset for a recovery). Returns the receives that were posted.
    pub fn clear(&mut self) -> Vec<R> {
        let mut reqs = Vec::new();
        for (_, c) in self.contexts.drain() {
            reqs.extend(c.posted_any.into_iter().map(|p| p.req));
            for (_, s) in c.sources {
                reqs.extend(s.posted.into_iter().map(|p| p.req));
            }
        }
        reqs
    }

    pub fn unexpected_count(&self) -> usize {
        self.contexts
            .values()
            .map(|c| {
                c.sources
                    .values()
                    .map(|s| s.unexpected.len())
                    .sum::<usize>()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn posted_in_order_same_tag() {
        let mut m: Matcher<u32, &str> = Matcher::default();
        assert!(m.post(0, Src::Rank(1), Some(5), 1).is_none());
        assert!(m.post(0, Src::Rank(1), Some(5), 2).is_none());
        assert_eq!(m.arrive(0, 1, 5, "a"), Some((1, "a")));
        assert_eq!(m.arrive(0, 1, 5, "b"), Some((2, "b")));
    }

    #[test]
    fn wildcard_posted_earlier_wins() {
        let mut m: Matcher<u32, ()> = Matcher::default();
        m.post(0, Src::Any, None, 1);
        m.post(0, Src::Rank(2), Some(3), 2);
        assert_eq!(m.arrive(0, 2, 3, ()), Some((1, ())));
        assert_eq!(m.arrive(0, 2, 3, ()), Some((2, ())));
    }

    /// Matching in place takes the receive `arrive` would match, or
    /// nothing at all when the caller declines it (the next one in line
    /// must not get the message instead).
    #[test]
    fn take_posted_takes_the_first_in_line_or_nothing() {
        let mut m: Matcher<u32, ()> = Matcher::default();
        m.post(0, Src::Rank(2), Some(3), 1);
        m.post(0, Src::Any, Some(3), 2);
        assert_eq!(m.take_posted(0, 2, 3, |r| r == 2), None);
        assert_eq!(m.take_posted(0, 2, 4, |_| true), None);
        assert_eq!(m.take_posted(0, 2, 3, |_| true), Some(1));
        assert_eq!(m.take_posted(0, 5, 3, |_| true), Some(2));
        assert_eq!(m.take_posted(0, 2, 3, |_| true), None);
        assert!(m.arrive(0, 2, 3, ()).is_none());
    }

    #[test]
    fn any_source_takes_earliest_arrival() {
        let mut m: Matcher<u32, u32> = Matcher::default();
        assert!(m.arrive(0, 3, 1, 30).is_none());
        assert!(m.arrive(0, 1, 1, 10).is_none());
        assert!(m.arrive(0, 3, 1, 31).is_none());
        assert_eq!(m.post(0, Src::Any, None, 9), Some((3, 1, 30)));
        assert_eq!(m.post(0, Src::Any, None, 9), Some((1, 1, 10)));
        assert_eq!(m.post(0, Src::Any, None, 9), Some((3, 1, 31)));
    }

    #[test]
    fn contexts_are_isolated_and_cancel_works() {
        let mut m: Matcher<u32, ()> = Matcher::default();
        m.post(1, Src::Rank(0), None, 7);
        assert!(m.arrive(2, 0, 0, ()).is_none());
        assert!(m.cancel(1, 7));
        assert!(!m.cancel(1, 7));
        assert!(m.arrive(1, 0, 0, ()).is_none());
        assert_eq!(m.unexpected_count(), 2);
    }

    /// Reference model: one flat list each, searched front to back.
    #[derive(Default)]
    struct Naive {
        posted: Vec<(u32, Src, TagSel, u32)>,
        unexp: Vec<(u32, u32, i32, u32)>,
    }

    impl Naive {
        fn post(&mut self, ctx: u32, src: Src, tag: TagSel, req: u32) -> Option<(u32, i32, u32)> {
            let hit = self.unexp.iter().position(|&(c, s, t, _)| {
                c == ctx && (src == Src::Any || src == Src::Rank(s)) && tag_matches(tag, t)
            });
            match hit {
                Some(i) => {
                    let (_, s, t, m) = self.unexp.remove(i);
                    Some((s, t, m))
                }
                None => {
                    self.posted.push((ctx, src, tag, req));
                    None
                }
            }
        }
        fn first_posted(&self, ctx: u32, s: u32, t: i32) -> Option<usize> {
            self.posted.iter().position(|&(c, src, tag, _)| {
                c == ctx && (src == Src::Any || src == Src::Rank(s)) && tag_matches(tag, t)
            })
        }
        fn take(&mut self, ctx: u32, s: u32, t: i32, ok: impl Fn(u32) -> bool) -> Option<u32> {
            let i = self.first_posted(ctx, s, t)?;
            ok(self.posted[i].3).then(|| self.posted.remove(i).3)
        }
        fn cancel(&mut self, ctx: u32, req: u32) -> bool {
            let hit = self
                .posted
                .iter()
                .position(|&(c, _, _, r)| c == ctx && r == req);
            hit.map(|i| self.posted.remove(i)).is_some()
        }
        fn arrive(&mut self, ctx: u32, s: u32, t: i32, msg: u32) -> Option<(u32, u32)> {
            let hit = self.first_posted(ctx, s, t);
            match hit {
                Some(i) => Some((self.posted.remove(i).3, msg)),
                None => {
                    self.unexp.push((ctx, s, t, msg));
                    None
                }
            }
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Post(u32, Option<u32>, Option<i32>),
        Arrive(u32, u32, i32),
        /// Matching in place, declined for odd request numbers.
        Take(u32, u32, i32),
        /// Cancels the receive posted by the operation this many back.
        Cancel(u32, u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (
                0u32..2,
                proptest::option::of(0u32..3),
                proptest::option::of(0i32..3)
            )
                .prop_map(|(c, s, t)| Op::Post(c, s, t)),
            (0u32..2, 0u32..3, 0i32..3).prop_map(|(c, s, t)| Op::Arrive(c, s, t)),
            (0u32..2, 0u32..3, 0i32..3).prop_map(|(c, s, t)| Op::Take(c, s, t)),
            (0u32..2, 1u32..6).prop_map(|(c, back)| Op::Cancel(c, back)),
        ]
    }

    proptest! {
        #[test]
        fn agrees_with_naive_model(ops in proptest::collection::vec(op(), 0..200)) {
            let mut m: Matcher<u32, u32> = Matcher::default();
            let mut n = Naive::default();
            for (i, o) in ops.into_iter().enumerate() {
                let id = i as u32;
                match o {
                    Op::Post(c, s, t) => {
                        let src = s.map_or(Src::Any, Src::Rank);
                        prop_assert_eq!(m.post(c, src, t, id), n.post(c, src, t, id));
                    }
                    Op::Arrive(c, s, t) => {
                        prop_assert_eq!(m.arrive(c, s, t, id), n.arrive(c, s, t, id));
                    }
                    Op::Take(c, s, t) => {
                        let even = |r: u32| r.is_multiple_of(2);
                        prop_assert_eq!(m.take_posted(c, s, t, even), n.take(c, s, t, even));
                    }
                    Op::Cancel(c, back) => {
                        let req = id.saturating_sub(back);
                        prop_assert_eq!(m.cancel(c, req), n.cancel(c, req));
                    }
                }
            }
            prop_assert_eq!(m.unexpected_count(), n.unexp.len());
            let mut left = m.clear();
            left.sort_unstable();
            let mut want: Vec<u32> = n.posted.iter().map(|p| p.3).collect();
            want.sort_unstable();
            prop_assert_eq!(left, want);
        }
    }
}
