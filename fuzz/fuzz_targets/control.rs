//! The control protocol (mpiexec <-> ranks, mpiexec <-> agents): bytes fed
//! to the incremental decoder in pieces, read as each message type in turn
//! until it needs more or refuses.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mpistages_control::agent::{FromAgent, ToAgent};
use mpistages_control::proto::{Decoder, ToController, ToRank};

fn drain<T: for<'de> serde::Deserialize<'de>>(data: &[u8], piece: usize) {
    let mut d = Decoder::default();
    for chunk in data.chunks(piece.max(1)) {
        d.push(chunk);
        loop {
            match d.next_message::<T>() {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let piece = usize::from(first % 17) + 1;
    drain::<ToRank>(rest, piece);
    drain::<ToController>(rest, piece);
    drain::<ToAgent>(rest, piece);
    drain::<FromAgent>(rest, piece);
});
