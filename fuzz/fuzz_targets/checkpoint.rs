//! Checkpoint files (every level's format), erasure-code parity files,
//! differential payloads and the saved MPI state: bytes from a disk that
//! may be damaged, read as a restore would.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mpistages::checkpoint::{diff, erasure::parity::Parity, format};

fuzz_target!(|data: &[u8]| {
    let _ = format::parse(data, None);
    let _ = format::verify(data);
    let _ = Parity::parse(data);
    let _ = diff::base_of(data);
    // A payload applied to a base of the first bytes.
    let cut = data.len() / 3;
    let _ = diff::apply(&data[..cut], &data[cut..], cut as u64 + 64);
    let _ = mpistages::stages::state::MpiState::decode(data, 4);
});
