//! Matching in place: a small message waiting whole in shared memory is
//! matched by its header against the posted receives and copied once,
//! from the ring into the receive's buffer (`transport::Placement`), instead
//! of being staged, copied into an event, matched and copied again.

use super::matcher::Matcher;
use super::req::{Msg, Phase, Req, State};
use super::request::{Op, ReqId, Status};
use super::slab::Slab;
use super::state::Core;
use crate::transport::frame::{flags, Header};
use crate::transport::{Event, Placement, RawBuf, Transport};

/// The engine's side of `Placement`, borrowing what matching needs while
/// the transport reads.
struct InPlace<'a> {
    matcher: &'a mut Matcher<ReqId, Msg>,
    requests: &'a Slab<Req>,
    /// Messages of this generation only, and none while a failure is
    /// known or a halt under way: those go the ordinary way, which fences
    /// and fails as the protocol says.
    generation: Option<u32>,
}

impl Placement for InPlace<'_> {
    fn place(&mut self, _peer: usize, hdr: &Header) -> Option<(u64, RawBuf)> {
        // A synchronous send wants its acknowledgement: the ordinary way.
        if Some(hdr.generation) != self.generation || hdr.flags & flags::SYNC != 0 {
            return None;
        }
        let len = hdr.len as usize;
        let requests = self.requests;
        let buffer = |id: ReqId| match requests.get(id) {
            Some(Req {
                op: Op::Recv { layout, .. },
                state: State::Active(Phase::RecvPosted),
                ..
            }) => layout.contiguous().filter(|b| b.len() >= len),
            _ => None,
        };
        let mut found = None;
        let id = self
            .matcher
            .take_posted(hdr.context, hdr.src, hdr.tag, |id| {
                found = buffer(id);
                found.is_some()
            })?;
        Some((id.to_wire(), found?))
    }
}

impl Core {
    /// Runs a read of the transport (`poll_reads`, `poll_memory`) with the
    /// matcher and the requests lent to it for matching in place; `None`
    /// without a transport.
    pub(super) fn read_in_place<T>(
        &mut self,
        read: impl FnOnce(&mut dyn Transport, &mut Vec<Event>, &mut dyn Placement) -> T,
    ) -> Option<T> {
        let generation = self.placing_generation();
        let t = self.transport.as_mut()?;
        let mut place = InPlace {
            matcher: &mut self.matcher,
            requests: &self.requests,
            generation,
        };
        Some(read(t.as_mut(), &mut self.events, &mut place))
    }

    /// `InPlace::generation`: this one unless a failure is known or a
    /// halt under way.
    pub(super) fn placing_generation(&self) -> Option<u32> {
        (!self.halted() && self.failure_free()).then_some(self.generation)
    }

    /// A message was copied into the receive posted for it.
    pub(super) fn on_placed(&mut self, token: u64, src: u32, tag: i32, len: usize) {
        let status = Status {
            source: src as i32,
            tag,
            bytes: len,
            cancelled: false,
            error: None,
        };
        self.finish(ReqId::from_wire(token), status);
    }
}
