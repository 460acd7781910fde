//! Transports move frames (see `frame.rs`) between the processes of a job.
//! The progress engine knows them only through the `Transport` trait: it hands
//! over frames to send, registers where rendezvous data must land, and feeds
//! readiness events from its epoll; the transport answers with `Event`s.
//!
//! Owns: sockets, per-peer queues, framing. Must not touch: requests,
//! matching, MPI semantics (those belong to `progress`).

pub mod frame;
pub mod shm;
pub mod tcp;
pub mod udp;

use crate::sys::epoll;
use frame::Header;

/// Memory the transport reads from or writes into without copying: a user
/// buffer or a buffer owned by a request.
#[derive(Clone, Copy, Debug)]
pub struct RawBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a RawBuf is only a pointer and a length; whoever creates it promises
// (see `RawBuf::new`) that the memory stays valid until the owning request
// completes, whichever thread then touches it.
unsafe impl Send for RawBuf {}
// SAFETY: shared references only read the pointer and the length (as for Send).
unsafe impl Sync for RawBuf {}

impl RawBuf {
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes (reads only if
    /// the buffer is only ever sent) until the request it belongs to
    /// completes, and nothing else may access it meanwhile — the rule MPI
    /// states for communication buffers.
    pub unsafe fn new(ptr: *mut u8, len: usize) -> RawBuf {
        RawBuf { ptr, len }
    }

    pub fn empty() -> RawBuf {
        RawBuf {
            ptr: std::ptr::NonNull::dangling().as_ptr(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// A sub-range of this buffer; `None` if out of bounds.
    pub fn sub(&self, off: usize, len: usize) -> Option<RawBuf> {
        if off.checked_add(len)? > self.len {
            return None;
        }
        Some(RawBuf {
            // SAFETY: in bounds (checked just above) of a buffer whose
            // validity `new` guarantees.
            ptr: unsafe { self.ptr.add(off) },
            len,
        })
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `new`'s contract: valid for `len` bytes until completion.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The memory as a mutable slice.
    ///
    /// # Safety
    /// A `RawBuf` is `Copy`: no other slice of this memory (from this or
    /// another copy) may be alive while the returned one is. Prefer
    /// `write_at` and `copy_from`, which make no reference.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice(&self) -> &mut [u8] {
        // SAFETY: `new`'s contract makes the memory valid for `len` bytes;
        // the caller promises that no other slice of it is alive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Copies `bytes` (at most what fits) to offset `off`; returns how many
    /// were copied. No reference to the memory is made, so none can alias.
    pub fn write_at(&self, off: usize, bytes: &[u8]) -> usize {
        let n = bytes.len().min(self.len.saturating_sub(off));
        if n > 0 {
            // SAFETY: `off + n <= len` of memory that `new` makes valid;
            // `bytes` is Rust memory that cannot be this user buffer while
            // borrowed (a user buffer is only reached through RawBufs).
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(off), n) };
        }
        n
    }

    /// Copies `from` into the start of this buffer (as much as fits, as
    /// `memmove`: the two may overlap); returns how many bytes.
    pub fn copy_from(&self, from: &RawBuf) -> usize {
        let n = from.len.min(self.len);
        if n > 0 {
            // SAFETY: both are valid for `n` bytes (`new`'s contract);
            // `ptr::copy` allows overlap and makes no reference.
            unsafe { std::ptr::copy(from.ptr, self.ptr, n) };
        }
        n
    }
}

/// Bytes after a header.
pub enum Payload {
    None,
    Owned(Vec<u8>),
    Borrowed(RawBuf),
}

impl Payload {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Payload::None => &[],
            Payload::Owned(v) => v,
            Payload::Borrowed(b) => b.as_slice(),
        }
    }
}

pub struct OutFrame {
    pub header: [u8; frame::HEADER_LEN],
    pub payload: Payload,
    /// Reported back in `Event::Sent` once every byte is handed to the kernel.
    pub token: Option<u64>,
}

impl OutFrame {
    pub fn new(hdr: &Header, payload: Payload, token: Option<u64>) -> OutFrame {
        debug_assert_eq!(hdr.len as usize, payload.bytes().len());
        OutFrame {
            header: hdr.encode(),
            payload,
            token,
        }
    }

    pub fn wire_len(&self) -> usize {
        frame::HEADER_LEN + self.payload.bytes().len()
    }
}

/// What a transport tells the engine.
#[derive(Debug)]
pub enum Event {
    /// A complete frame other than DATA arrived.
    Frame {
        peer: usize,
        hdr: Header,
        payload: Vec<u8>,
    },
    /// The frame sent with this token is fully written.
    Sent { token: u64 },
    /// All bytes of a registered rendezvous transfer arrived.
    DataDone { peer: usize, rid: u64 },
    /// A small message was copied straight into the buffer of the posted
    /// receive it matched (`Placement`); that receive is complete.
    Placed {
        token: u64,
        src: u32,
        tag: i32,
        len: usize,
    },
    /// The connection to a peer closed or broke. `broken`: the peer sent
    /// bytes that break the protocol (the stream cannot go on, yet the
    /// process may be alive: it must be failed, not waited for).
    PeerLost {
        peer: usize,
        reason: String,
        broken: bool,
    },
}

/// The engine's half of matching in place: a small message waiting whole
/// in shared memory is offered here, header first, before it is read the
/// ordinary way (staged, parsed, copied out as an event and matched).
pub trait Placement {
    /// An eager frame `hdr` is next from `peer`, its payload complete: the
    /// token and buffer of the posted receive it matches, taken off the
    /// posted list (its payload is then copied there and reported as
    /// `Event::Placed`), or `None` to read it the ordinary way.
    fn place(&mut self, peer: usize, hdr: &Header) -> Option<(u64, RawBuf)>;
}

/// No matching in place: every frame is read the ordinary way.
pub struct Ordinary;

impl Placement for Ordinary {
    fn place(&mut self, _peer: usize, _hdr: &Header) -> Option<(u64, RawBuf)> {
        None
    }
}

#[derive(Debug)]
pub enum TransportError {
    /// The peer's connection is closed.
    PeerGone(usize),
    Io(std::io::Error),
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportError::PeerGone(p) => write!(f, "connection to rank {p} is closed"),
            TransportError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Frames of class `Urgent` (matching, control) go out before queued `Bulk`
/// frames (rendezvous data fragments), so one large message cannot starve
/// small ones; order within a class is kept.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Class {
    Urgent,
    Bulk,
}

pub trait Transport: Send {
    fn name(&self) -> &'static str;
    /// Messages up to this many bytes are sent eagerly.
    fn eager_limit(&self) -> usize;
    /// Rendezvous data is cut into fragments of at most this size.
    fn fragment_size(&self) -> usize;
    /// Queues a frame to `peer` and writes what the socket takes now.
    fn send(
        &mut self,
        peer: usize,
        frame: OutFrame,
        class: Class,
        out: &mut Vec<Event>,
    ) -> Result<(), TransportError>;
    /// Writes `frame` whole at once if that needs no queue (a connection
    /// idle and with room for all of it); otherwise writes nothing and
    /// gives the frame back (then `send` it). The caller may reuse the
    /// payload's memory as soon as this returns `Ok`.
    fn send_now(&mut self, _peer: usize, frame: OutFrame) -> Result<(), OutFrame> {
        Err(frame)
    }
    /// Declares where the DATA frames of transfer `rid` from `peer` land.
    /// Bytes past `target.len()` (up to `total`) are read and dropped.
    fn expect_data(&mut self, peer: usize, rid: u64, target: RawBuf, total: u64);
    /// Handles one readiness event for a token this transport registered.
    fn handle(&mut self, ev: epoll::Event, out: &mut Vec<Event>);
    /// Whether any frame is still queued for sending.
    fn has_backlog(&self) -> bool;
    /// For a spinning waiter: reads every connection once without asking
    /// epoll, which saves a system call on the latency path (epoll, then
    /// read). Returns false, doing nothing, when that would cost more than
    /// it saves (many connections, or frames waiting for writability): the
    /// caller then waits on epoll.
    fn poll_reads(&mut self, _out: &mut Vec<Event>, _place: &mut dyn Placement) -> bool {
        false
    }
    /// Reads every connection once without epoll, whatever it costs (a
    /// test or probe while another thread sleeps in epoll: what has come
    /// must be seen now, not when that thread wakes).
    fn read_all(&mut self, out: &mut Vec<Event>, place: &mut dyn Placement) {
        self.poll_memory(out, place);
    }
    /// Reads connections through memory (shared memory), which cost no
    /// system call to look at; called whenever the engine handles events.
    /// Small messages that `place` takes are copied straight there.
    fn poll_memory(&mut self, _out: &mut Vec<Event>, _place: &mut dyn Placement) {}
    /// The caller is about to sleep in epoll: returns false when bytes are
    /// already there that epoll would not report (shared memory; the
    /// peers are asked for a doorbell otherwise).
    fn prepare_sleep(&mut self) -> bool {
        true
    }
    /// Whether a connection to `peer` is open (bytes may still come).
    fn connected(&self, _peer: usize) -> bool {
        false
    }
    /// Closes every connection (after a final flush attempt).
    fn close_all(&mut self);
    /// Stages `halt`: a failure stops all communication. Queued frames are
    /// dropped; a frame partly written keeps going (the stream must stay
    /// whole) from a private copy; incoming rendezvous data is read and
    /// dropped. Afterwards no user memory is referenced, and peers that
    /// copy from this process's memory are told (they drop what they copy
    /// for frames older than `generation`, the failure's).
    fn halt(&mut self, generation: u32);
    /// Stages `cleanup`: forget transfers, and from now on treat DATA of
    /// other generations as stale (read and dropped).
    fn cleanup(&mut self, generation: u32);
    /// These peers failed (announced with `generation`): drop connections
    /// their old processes made; frames to them wait for their replacements
    /// to connect. A connection a replacement already made is kept.
    fn forget_peers(&mut self, failed: &[usize], generation: u32);
    /// A new process of `peer` (a replacement, joined at generation
    /// `born`) listens at `addr`: the first frame for it connects there,
    /// unless it connected already.
    fn learn_address(&mut self, _peer: usize, _born: u32, _addr: std::net::SocketAddr) {}
}
