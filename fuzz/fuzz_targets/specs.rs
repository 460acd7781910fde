//! Text users and their files give: hostfiles, host lists, --ckpt and
//! --inject specs (and the inject list passed to ranks), recovery modes,
//! UDP fault settings, transport lists, and mpiexec's whole command line.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = launcher::hosts::parse_hostfile(s, "fuzz");
    let _ = launcher::hosts::parse_host_list(s);
    let _ = mpistages::checkpoint::config::parse(s);
    let _ = mpistages_control::inject::parse(s);
    let _ = mpistages_control::inject::decode_for_rank(s);
    let _ = mpistages_control::mode::RecoveryMode::parse(s);
    let _ = mpistages::transport::udp::Faults::parse(s);
    let _ = mpistages::transport::tcp::Links::parse(s);
    // mpiexec's command line, split as a shell would split a simple one.
    let argv: Vec<String> = s.split_whitespace().map(str::to_string).collect();
    let _ = launcher::cli::parse(&argv);
});
