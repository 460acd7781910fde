//! The one wire format every transport speaks: a fixed 56-byte little-endian
//! header followed by `len` payload bytes.
//!
//! ```text
//!  0 magic u16 "MS"   2 version u8   3 kind u8     4 flags u16   6 reserved u16
//!  8 context u32     12 src u32     16 tag i32    20 generation u32
//! 24 reserved u32    28 len u32     32 seq u64    40 rdv u64     48 aux u64
//! ```
//! `seq` numbers the frames of one connection in one direction from 0, after
//! the HELLO that opens it (whose `seq` is 0 and not counted); the TCP
//! transport stamps it as it writes and checks it as it reads, so a lost,
//! repeated or reordered frame is a protocol error, not a silent wrong
//! answer. `generation` is the
//! sender's: frames of an older generation are what a recovery cancelled.
//! `rdv` and `aux` depend on the kind: EAGER (rdv = sender's request when
//! SYNC), RTS (rdv = sender's request, aux = message length), CTS (rdv =
//! sender's request, aux = receiver's request), DATA (rdv = receiver's
//! request, aux = byte offset), ACK (rdv = sender's request), HELLO (src =
//! world rank of the connecting process, payload = job key). Between ranks
//! of one host a DATA frame may travel by reference: DATA_REF (as DATA,
//! payload = the 8-byte address and 8-byte length of the bytes in the
//! sender's memory, which the receiver copies itself) answered by REF_DONE
//! (rdv, aux as the DATA_REF's) once they are copied; both stay inside
//! the transport.
//!
//! Decoding checks every field; anything malformed is an error, never a panic.

use std::fmt;

pub const HEADER_LEN: usize = 56;
pub const MAGIC: u16 = 0x534D; // "MS" on the wire
pub const VERSION: u8 = 1;

/// Payload larger than this is malformed whatever the transport's limits.
pub const MAX_PAYLOAD: u32 = 64 << 20;

#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Eager = 1,
    Rts = 2,
    Cts = 3,
    Data = 4,
    Ack = 5,
    Hello = 6,
    Control = 7,
    DataRef = 8,
    RefDone = 9,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Eager,
            2 => Kind::Rts,
            3 => Kind::Cts,
            4 => Kind::Data,
            5 => Kind::Ack,
            6 => Kind::Hello,
            7 => Kind::Control,
            8 => Kind::DataRef,
            9 => Kind::RefDone,
            _ => return None,
        })
    }

    /// Kinds that go through the matcher and carry an MPI tag.
    pub fn is_matched(self) -> bool {
        matches!(self, Kind::Eager | Kind::Rts)
    }
}

pub mod flags {
    /// Synchronous send: the receiver acknowledges the match.
    pub const SYNC: u16 = 1;
    pub const ALL: u16 = SYNC;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub flags: u16,
    pub context: u32,
    pub src: u32,
    pub tag: i32,
    pub generation: u32,
    pub len: u32,
    pub seq: u64,
    pub rdv: u64,
    pub aux: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    BadMagic(u16),
    BadVersion(u8),
    BadKind(u8),
    BadFlags(u16),
    /// A reserved field (at this byte offset) is not zero.
    Reserved {
        at: usize,
        value: u32,
    },
    PayloadTooLarge {
        len: u32,
        limit: u32,
    },
    BadSource {
        src: u32,
        limit: u32,
    },
    NegativeTag(i32),
    Inconsistent(&'static str),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::BadMagic(m) => write!(f, "bad frame magic {m:#06x}"),
            FrameError::BadVersion(v) => write!(f, "unsupported frame version {v}"),
            FrameError::BadKind(k) => write!(f, "unknown frame kind {k}"),
            FrameError::BadFlags(x) => write!(f, "unknown frame flags {x:#x}"),
            FrameError::Reserved { at, value } => {
                write!(f, "reserved header field at byte {at} is {value:#x}, not 0")
            }
            FrameError::PayloadTooLarge { len, limit } => {
                write!(f, "payload of {len} bytes exceeds the limit of {limit}")
            }
            FrameError::BadSource { src, limit } => {
                write!(f, "source rank {src} out of range (size {limit})")
            }
            FrameError::NegativeTag(t) => write!(f, "negative tag {t} in a matched frame"),
            FrameError::Inconsistent(why) => write!(f, "inconsistent frame: {why}"),
        }
    }
}

/// What the receiving side accepts.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_payload: u32,
    /// Ranks in the job: a source must be below it.
    pub ranks: u32,
}

impl Header {
    pub fn new(kind: Kind) -> Header {
        Header {
            kind,
            flags: 0,
            context: 0,
            src: 0,
            tag: 0,
            generation: 0,
            len: 0,
            seq: 0,
            rdv: 0,
            aux: 0,
        }
    }

    /// Sets the `seq` field of an encoded header (stamped at write time).
    pub fn stamp_seq(encoded: &mut [u8; HEADER_LEN], seq: u64) {
        encoded[32..40].copy_from_slice(&seq.to_le_bytes());
    }

    /// An encoded DATA header turned into a DATA_REF one (16 payload
    /// bytes: the data's address and length), with its transfer and offset;
    /// `None` for other kinds.
    pub fn data_to_ref(encoded: &[u8; HEADER_LEN]) -> Option<([u8; HEADER_LEN], u64, u64)> {
        if encoded[3] != Kind::Data as u8 {
            return None;
        }
        let mut b = *encoded;
        b[3] = Kind::DataRef as u8;
        b[28..32].copy_from_slice(&16u32.to_le_bytes());
        let word = |at: usize| u64::from_le_bytes(encoded[at..at + 8].try_into().expect("8 bytes"));
        Some((b, word(40), word(48)))
    }

    /// The transfer (receiver's request) of an encoded DATA header.
    pub fn data_rid(encoded: &[u8; HEADER_LEN]) -> Option<u64> {
        (encoded[3] == Kind::Data as u8)
            .then(|| u64::from_le_bytes(encoded[40..48].try_into().expect("8 bytes")))
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = VERSION;
        b[3] = self.kind as u8;
        b[4..6].copy_from_slice(&self.flags.to_le_bytes());
        // 6..8 reserved, zero
        b[8..12].copy_from_slice(&self.context.to_le_bytes());
        b[12..16].copy_from_slice(&self.src.to_le_bytes());
        b[16..20].copy_from_slice(&self.tag.to_le_bytes());
        b[20..24].copy_from_slice(&self.generation.to_le_bytes());
        // 24..28 reserved, zero
        b[28..32].copy_from_slice(&self.len.to_le_bytes());
        b[32..40].copy_from_slice(&self.seq.to_le_bytes());
        b[40..48].copy_from_slice(&self.rdv.to_le_bytes());
        b[48..56].copy_from_slice(&self.aux.to_le_bytes());
        b
    }

    /// Decodes and validates a header. `bytes` may be longer than a header;
    /// only the first `HEADER_LEN` bytes are read.
    pub fn decode(bytes: &[u8], limits: &Limits) -> Result<Header, FrameError> {
        if bytes.len() < HEADER_LEN {
            return Err(FrameError::Inconsistent("short header"));
        }
        let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
        let u32_at =
            |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(a)
        };
        let magic = u16_at(0);
        if magic != MAGIC {
            return Err(FrameError::BadMagic(magic));
        }
        if bytes[2] != VERSION {
            return Err(FrameError::BadVersion(bytes[2]));
        }
        let kind = Kind::from_u8(bytes[3]).ok_or(FrameError::BadKind(bytes[3]))?;
        let flags = u16_at(4);
        if flags & !flags::ALL != 0 {
            return Err(FrameError::BadFlags(flags));
        }
        for (at, value) in [(6, u16_at(6) as u32), (24, u32_at(24))] {
            if value != 0 {
                return Err(FrameError::Reserved { at, value });
            }
        }
        let h = Header {
            kind,
            flags,
            context: u32_at(8),
            src: u32_at(12),
            tag: u32_at(16) as i32,
            generation: u32_at(20),
            len: u32_at(28),
            seq: u64_at(32),
            rdv: u64_at(40),
            aux: u64_at(48),
        };
        let limit = limits.max_payload.min(MAX_PAYLOAD);
        if h.len > limit {
            return Err(FrameError::PayloadTooLarge { len: h.len, limit });
        }
        if h.src >= limits.ranks {
            return Err(FrameError::BadSource {
                src: h.src,
                limit: limits.ranks,
            });
        }
        if kind.is_matched() && h.tag < 0 {
            return Err(FrameError::NegativeTag(h.tag));
        }
        match kind {
            Kind::DataRef if h.len != 16 => {
                return Err(FrameError::Inconsistent("data reference of the wrong size"))
            }
            Kind::Rts | Kind::Cts | Kind::Ack | Kind::RefDone if h.len != 0 => {
                return Err(FrameError::Inconsistent("control frame with a payload"))
            }
            Kind::Rts if h.aux > isize::MAX as u64 => {
                return Err(FrameError::Inconsistent("message length out of range"))
            }
            Kind::Data if h.len == 0 => return Err(FrameError::Inconsistent("empty data frame")),
            Kind::Data if h.aux.checked_add(h.len as u64).is_none() => {
                return Err(FrameError::Inconsistent("data offset overflows"))
            }
            _ => {}
        }
        if h.flags & flags::SYNC != 0 && kind != Kind::Eager && kind != Kind::Rts {
            return Err(FrameError::Inconsistent("SYNC flag on an unmatched frame"));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_data_header_becomes_a_reference_with_its_transfer_and_offset() {
        let mut h = Header::new(Kind::Data);
        (h.rdv, h.aux, h.len, h.generation) = (77, 4096, 65536, 3);
        let (r, rid, off) = Header::data_to_ref(&h.encode()).unwrap();
        let lim = Limits {
            max_payload: 1 << 20,
            ranks: 16,
        };
        let d = Header::decode(&r, &lim).unwrap();
        assert_eq!(
            (d.kind, d.len, d.rdv, d.aux, d.generation),
            (Kind::DataRef, 16, 77, 4096, 3)
        );
        assert_eq!((rid, off), (77, 4096));
        assert!(Header::data_to_ref(&Header::new(Kind::Eager).encode()).is_none());
        // Sizes other than 16 are malformed.
        let mut bad = d;
        bad.len = 8;
        assert!(Header::decode(&bad.encode(), &lim).is_err());
    }

    const LIM: Limits = Limits {
        max_payload: 1 << 20,
        ranks: 16,
    };

    fn sample() -> Header {
        Header {
            kind: Kind::Eager,
            flags: flags::SYNC,
            context: 7,
            src: 3,
            tag: 42,
            generation: 2,
            len: 100,
            seq: 1 << 40,
            rdv: 77,
            aux: 0,
        }
    }

    #[test]
    fn round_trip() {
        let h = sample();
        assert_eq!(Header::decode(&h.encode(), &LIM), Ok(h));
    }

    #[test]
    fn rejects_each_bad_field() {
        let good = sample().encode();
        let mut b = good;
        b[0] = 0;
        assert!(matches!(
            Header::decode(&b, &LIM),
            Err(FrameError::BadMagic(_))
        ));
        let mut b = good;
        b[2] = 9;
        assert_eq!(Header::decode(&b, &LIM), Err(FrameError::BadVersion(9)));
        let mut b = good;
        b[3] = 0;
        assert_eq!(Header::decode(&b, &LIM), Err(FrameError::BadKind(0)));
        let mut b = good;
        b[4] = 0x80;
        assert!(matches!(
            Header::decode(&b, &LIM),
            Err(FrameError::BadFlags(_))
        ));
        let mut b = good;
        b[6] = 1;
        assert_eq!(
            Header::decode(&b, &LIM),
            Err(FrameError::Reserved { at: 6, value: 1 })
        );
        let mut b = good;
        b[27] = 1;
        assert_eq!(
            Header::decode(&b, &LIM),
            Err(FrameError::Reserved {
                at: 24,
                value: 1 << 24
            })
        );
        let mut b = good;
        Header::stamp_seq(&mut b, 77);
        assert_eq!(Header::decode(&b, &LIM).map(|h| h.seq), Ok(77));
        let mut h = sample();
        h.src = 16;
        assert!(matches!(
            Header::decode(&h.encode(), &LIM),
            Err(FrameError::BadSource { .. })
        ));
        let mut h = sample();
        h.len = (1 << 20) + 1;
        assert!(matches!(
            Header::decode(&h.encode(), &LIM),
            Err(FrameError::PayloadTooLarge { .. })
        ));
        let mut h = sample();
        h.tag = -5;
        assert_eq!(
            Header::decode(&h.encode(), &LIM),
            Err(FrameError::NegativeTag(-5))
        );
        let mut h = sample();
        h.kind = Kind::Cts;
        assert!(matches!(
            Header::decode(&h.encode(), &LIM),
            Err(FrameError::Inconsistent(_))
        ));
        assert!(Header::decode(&good[..HEADER_LEN - 1], &LIM).is_err());
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_error(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = Header::decode(&bytes, &LIM);
        }

        #[test]
        fn valid_headers_round_trip(ctx in any::<u32>(), src in 0u32..16, tag in 0i32..i32::MAX,
                                    gen in any::<u32>(), len in 0u32..1000, seq in any::<u64>(),
                                    rdv in any::<u64>()) {
            let h = Header { kind: Kind::Eager, flags: 0, context: ctx, src, tag, generation: gen,
                             len, seq, rdv, aux: 0 };
            prop_assert_eq!(Header::decode(&h.encode(), &LIM), Ok(h));
        }

        #[test]
        fn decoded_headers_satisfy_limits(bytes in proptest::collection::vec(any::<u8>(), 56..57)) {
            if let Ok(h) = Header::decode(&bytes, &LIM) {
                prop_assert!(h.len <= LIM.max_payload);
                prop_assert!(h.src < LIM.ranks);
                prop_assert_eq!(h.encode().to_vec(), bytes);
            }
        }
    }
}
