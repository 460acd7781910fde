//! The reliable stream over UDP: a connection fed arbitrary packets (the
//! input cut into packets by a length byte each), its timers run between
//! them; it may refuse a packet, never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mpistages::transport::udp::reliable::{Config, Reliable};
use std::time::{Duration, Instant};

fuzz_target!(|data: &[u8]| {
    let start = Instant::now();
    let mut r = Reliable::new(Config::default(), 7, start);
    let mut rest = data;
    let mut t = start;
    while let Some((&len, tail)) = rest.split_first() {
        let n = (len as usize * 4).min(tail.len());
        let (packet, next) = tail.split_at(n);
        rest = next;
        t += Duration::from_millis(u64::from(len % 8));
        let _ = r.on_packet(packet, t);
        let _ = r.on_timeout(t);
    }
});
