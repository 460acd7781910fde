//! Request objects and what the upper layers pass in to create them.

use crate::transport::RawBuf;

/// How a message's bytes relate to user memory. The API layer implements it
/// for (buffer, count, datatype); the engine only moves packed bytes.
pub trait Layout: Send {
    /// Length of the message in packed form.
    fn packed_len(&self) -> usize;
    /// The bytes in place, when the data is contiguous in memory.
    fn contiguous(&self) -> Option<RawBuf>;
    /// Packs the data (only called when not contiguous).
    fn pack(&self) -> Vec<u8>;
    /// Unpacks `bytes` (at most `packed_len`) into user memory.
    fn unpack(&self, bytes: &[u8]);
}

/// A plain run of bytes.
pub struct Bytes(pub RawBuf);

impl Layout for Bytes {
    fn packed_len(&self) -> usize {
        self.0.len()
    }
    fn contiguous(&self) -> Option<RawBuf> {
        Some(self.0)
    }
    fn pack(&self) -> Vec<u8> {
        self.0.as_slice().to_vec()
    }
    fn unpack(&self, bytes: &[u8]) {
        self.0.write_at(0, bytes);
    }
}

/// Bytes owned by the request (buffered sends).
pub struct Owned(pub Vec<u8>);

impl Layout for Owned {
    fn packed_len(&self) -> usize {
        self.0.len()
    }
    fn contiguous(&self) -> Option<RawBuf> {
        // SAFETY: the Vec lives inside the request until it completes and is
        // never changed; the transport only reads through this pointer.
        Some(unsafe { RawBuf::new(self.0.as_ptr() as *mut u8, self.0.len()) })
    }
    fn pack(&self) -> Vec<u8> {
        self.0.clone()
    }
    fn unpack(&self, _bytes: &[u8]) {}
}

/// An operation's data: a run of bytes held inline (most messages: no
/// allocation per operation), or any other layout.
pub enum Data {
    Bytes(RawBuf),
    Other(Box<dyn Layout>),
}

// The layout's methods as Data's own, so that using them needs no import
// of the trait.
impl Data {
    pub fn of(layout: impl Layout + 'static) -> Data {
        Data::Other(Box::new(layout))
    }
    pub fn packed_len(&self) -> usize {
        match self {
            Data::Bytes(b) => b.len(),
            Data::Other(l) => l.packed_len(),
        }
    }
    pub fn contiguous(&self) -> Option<RawBuf> {
        match self {
            Data::Bytes(b) => Some(*b),
            Data::Other(l) => l.contiguous(),
        }
    }
    pub fn pack(&self) -> Vec<u8> {
        match self {
            Data::Bytes(b) => Bytes(*b).pack(),
            Data::Other(l) => l.pack(),
        }
    }
    pub fn unpack(&self, bytes: &[u8]) {
        match self {
            Data::Bytes(b) => Bytes(*b).unpack(bytes),
            Data::Other(l) => l.unpack(bytes),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    Standard,
    /// Completes only after the receiver matched the message.
    Sync,
}

pub enum Op {
    Send {
        /// World rank of the destination; `None` for `MPI_PROC_NULL`.
        dest: Option<usize>,
        /// This process's rank in the communicator (the receiver's source).
        src: u32,
        context: u32,
        tag: i32,
        mode: SendMode,
        layout: Data,
    },
    Recv {
        /// `None` for `MPI_PROC_NULL`.
        src: Option<super::Src>,
        tag: super::TagSel,
        context: u32,
        layout: Data,
    },
    /// Work done outside the engine (a non-blocking collective run by a
    /// worker thread): active until `Engine::complete`, or failed by a halt
    /// like any active request.
    External,
}

/// Why a request failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReqError {
    /// The message was longer than the receive buffer.
    Truncate,
    /// The peer's process is gone.
    PeerLost(usize),
    /// MPI state was halted for a recovery.
    Halted,
    /// ULFM: a wildcard receive while a process of its communicator has
    /// failed and the failure is not acknowledged.
    ProcFailedPending,
    /// ULFM: the communicator was revoked.
    Revoked,
    /// Work outside the engine failed with this MPI error class.
    Failed { class: i32, detail: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub source: i32,
    pub tag: i32,
    pub bytes: usize,
    pub cancelled: bool,
    pub error: Option<ReqError>,
}

/// The values of a status's fields that say "nobody" and "any": the
/// standard's constants (`api::consts` takes them from here).
pub const ANY_SOURCE: i32 = -2;
pub const PROC_NULL: i32 = -1;
pub const ANY_TAG: i32 = -1;

impl Status {
    /// The status of a request with nothing to report (MPI's "empty" status).
    pub fn empty() -> Status {
        Status {
            source: ANY_SOURCE,
            tag: ANY_TAG,
            bytes: 0,
            cancelled: false,
            error: None,
        }
    }
}

/// A request's identity: slot index and a serial that changes on reuse, so a
/// stale id from the wire can never complete a newer request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReqId {
    pub index: u32,
    pub serial: u32,
}

impl ReqId {
    pub fn to_wire(self) -> u64 {
        ((self.serial as u64) << 32) | self.index as u64
    }
    pub fn from_wire(v: u64) -> ReqId {
        ReqId {
            index: v as u32,
            serial: (v >> 32) as u32,
        }
    }
}
