//! A transport frame header (TCP, shm and UDP streams carry the same
//! frames): decoded with the limits of a small job, and again with the
//! loosest limits; re-encoding a header that decoded gives the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mpistages::transport::frame::{Header, Limits};

fuzz_target!(|data: &[u8]| {
    for limits in [
        Limits {
            max_payload: 1 << 20,
            ranks: 8,
        },
        Limits {
            max_payload: u32::MAX,
            ranks: u32::MAX,
        },
    ] {
        if let Ok(h) = Header::decode(data, &limits) {
            let again = h.encode();
            assert_eq!(Header::decode(&again, &limits).ok(), Some(h));
        }
    }
});
