//! What a process keeps of its peers. For every rank of the job, a few
//! bytes: where it listens and the oldest generation of it alive (both
//! from mpiexec). For the peers it talks to, the state of the pair: its
//! connections, queues, read buffer and transfers (~380 bytes), made at
//! first use. Full records for every rank were 384 KiB per process at
//! 1024 ranks, written at start (7% of a 1024-rank job's start, perf) and
//! walked at its end: O(ranks²) over the job.

use super::{Class, Conn, OutFrame, ReadState, Refs, Target};
use rustc_hash::FxHashMap as HashMap;
use std::collections::VecDeque;
use std::net::SocketAddr;

/// What mpiexec said of a peer.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Known {
    /// Where to connect at the first frame for the peer (lazy connection).
    pub addr: Option<SocketAddr>,
    /// Processes of this peer older than this generation are dead (a
    /// failure notice named them): their connections are refused. The
    /// hello of a dead process can wait in the listen queue and be read
    /// after the notice, and its end would then mark the peer lost and
    /// fail sends meant for its replacement.
    pub min_generation: u32,
}

/// Every peer: `Known` for all, a `Peer` for those talked to. Indexing
/// gives a peer never talked to as an empty record (not connected,
/// nothing queued); indexing mutably makes its record.
pub(super) struct Peers {
    known: Vec<Known>,
    pairs: Vec<Option<Box<Peer>>>,
    empty: Peer,
}

impl Peers {
    pub fn new(n: usize) -> Peers {
        let mut p = Peers {
            known: Vec::new(),
            pairs: Vec::new(),
            empty: Peer::new(),
        };
        p.grow_to(n);
        p
    }

    pub fn len(&self) -> usize {
        self.known.len()
    }

    pub fn grow_to(&mut self, n: usize) {
        if n > self.len() {
            self.known.resize(n, Known::default());
            self.pairs.resize_with(n, || None);
        }
    }

    pub fn known(&self, peer: usize) -> Option<&Known> {
        self.known.get(peer)
    }

    pub fn known_mut(&mut self, peer: usize) -> Option<&mut Known> {
        self.known.get_mut(peer)
    }

    pub fn get(&self, peer: usize) -> Option<&Peer> {
        (peer < self.len()).then(|| &self[peer])
    }

    /// The record of `peer` (made now if it has none), if `peer` is a rank.
    pub fn get_mut(&mut self, peer: usize) -> Option<&mut Peer> {
        (peer < self.len()).then(|| &mut self[peer])
    }

    /// The records made (peers talked to), with their ranks.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut Peer)> {
        self.pairs
            .iter_mut()
            .enumerate()
            .filter_map(|(r, p)| p.as_deref_mut().map(|p| (r, p)))
    }
}

impl std::ops::Index<usize> for Peers {
    type Output = Peer;
    fn index(&self, peer: usize) -> &Peer {
        self.pairs[peer].as_deref().unwrap_or(&self.empty)
    }
}

impl std::ops::IndexMut<usize> for Peers {
    fn index_mut(&mut self, peer: usize) -> &mut Peer {
        self.pairs[peer].get_or_insert_with(|| Box::new(Peer::new()))
    }
}

pub(super) struct Peer {
    /// The connection frames to the peer go on (and its frames come on,
    /// unless it opened `inbound`).
    pub(super) stream: Option<Conn>,
    /// This process opened `stream` itself.
    pub(super) initiated: bool,
    /// The peer's own connection, opened while ours was (both sides
    /// connected at once): the peer's frames come on it; it is only read.
    pub(super) inbound: Option<Conn>,
    /// The generation of the peer's process on this connection: from its
    /// hello when it connected; when this process did, the generation
    /// that process joined at (`min_generation`, from mpiexec). A
    /// replacement's connection is newer than the failure that replaced
    /// it, and a connection crossing ours comes from the same generation.
    pub(super) conn_generation: u32,
    pub(super) lost: bool,
    pub(super) urgent: VecDeque<OutFrame>,
    pub(super) bulk: VecDeque<OutFrame>,
    /// Frames being written (with their class); the first has `woff`
    /// bytes out already.
    pub(super) wire: VecDeque<(OutFrame, Class)>,
    pub(super) woff: usize,
    /// `seq` of the next frame written / read on the current connection.
    pub(super) sent_seq: u64,
    pub(super) recv_seq: u64,
    pub(super) want_write: bool,
    pub(super) rbuf: Vec<u8>,
    pub(super) rhead: usize,
    pub(super) rtail: usize,
    pub(super) rstate: ReadState,
    /// Rendezvous transfers being received, by transfer id and the
    /// generation they belong to: after a rollback a transfer may get the
    /// id of one of the generation before, whose frames may still come.
    pub(super) targets: HashMap<(u64, u32), Target>,
    /// Transfers with DATA sent by reference that the peer has not copied
    /// yet (REF_DONE), by the receiver's request id.
    pub(super) refs: HashMap<u64, Refs>,
}

impl Peer {
    pub(super) fn new() -> Peer {
        Peer {
            stream: None,
            initiated: false,
            inbound: None,
            conn_generation: 0,
            lost: false,
            urgent: VecDeque::new(),
            bulk: VecDeque::new(),
            wire: VecDeque::new(),
            woff: 0,
            sent_seq: 0,
            recv_seq: 0,
            want_write: false,
            rbuf: Vec::new(),
            rhead: 0,
            rtail: 0,
            rstate: ReadState::Header,
            targets: HashMap::default(),
            refs: HashMap::default(),
        }
    }

    /// Its connections: the one frames go on, and the peer's own when
    /// both opened one.
    pub(super) fn conns(&self) -> impl Iterator<Item = &Conn> {
        self.stream.iter().chain(&self.inbound)
    }

    pub(super) fn conns_mut(&mut self) -> impl Iterator<Item = &mut Conn> {
        self.stream.iter_mut().chain(self.inbound.iter_mut())
    }

    /// The shared-memory connection the peer sends on (a pair that
    /// opened two: the one the peer opened, `inbound`), if it is one.
    pub(super) fn sending_shm(&mut self) -> Option<&mut crate::transport::shm::ShmConn> {
        let from = if self.inbound.is_some() {
            self.inbound.as_mut()
        } else {
            self.stream.as_mut()
        };
        match from {
            Some(Conn::Shm(c)) => Some(&mut **c),
            _ => None,
        }
    }

    pub(super) fn backlog(&self) -> bool {
        !(self.urgent.is_empty() && self.bulk.is_empty() && self.wire.is_empty())
    }
}
