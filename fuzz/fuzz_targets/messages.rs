//! Messages between processes that are not frames: one-sided requests an
//! agent thread decodes, and PMI-2 messages from Slurm's srun.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = mpistages::api::rma::wire::decode(data);
    let _ = mpistages::control::pmi2::Message::parse(data);
});
