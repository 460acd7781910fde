//! `mpistages-ckpt` on a directory of real checkpoint files: lists them,
//! verify passes, then fails once a byte of one file is flipped.

mod common;
use common::Scratch;
use mpistages::checkpoint::format::{self, Compression, Identity, Kind, Section};
use std::process::Command;

#[test]
fn ls_verify_show() {
    let scratch = Scratch::new("ckpt-tool");
    let dir = scratch.0.clone();
    for epoch in [1u64, 2] {
        let d = dir.join(format!("epoch-{epoch}"));
        std::fs::create_dir_all(&d).unwrap();
        for rank in 0..2u32 {
            let who = Identity {
                job: 9,
                rank,
                size: 2,
                epoch,
                generation: 0,
            };
            let sections = vec![
                Section {
                    kind: Kind::MpiState,
                    id: 0,
                    name: String::new(),
                    data: vec![1, 2, 3].into(),
                },
                Section {
                    kind: Kind::Protected,
                    id: 4,
                    name: String::new(),
                    data: vec![0; 4096].into(),
                },
                Section {
                    kind: Kind::File,
                    id: 0,
                    name: "out/u.dat".into(),
                    data: b"payload".to_vec().into(),
                },
            ];
            format::write(
                &d.join(format!("rank-{rank}.ckpt")),
                &who,
                &sections,
                Compression::Zstd(3),
                false,
                &[],
            )
            .unwrap();
        }
    }
    // An old file a level parked for reuse is no epoch's: not listed.
    std::fs::copy(
        dir.join("epoch-1/rank-0.ckpt"),
        dir.join("free-0-rank-0.ckpt"),
    )
    .unwrap();
    let tool = env!("CARGO_BIN_EXE_mpistages-ckpt");
    let run = |args: &[&str]| Command::new(tool).args(args).output().unwrap();
    let ls = run(&["ls", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&ls.stdout);
    assert!(ls.status.success());
    assert_eq!(
        text.lines().filter(|l| l.ends_with(" ok")).count(),
        4,
        "{text}"
    );
    assert!(
        text.contains("rank 1/2 epoch 2") && text.contains("3 sections"),
        "{text}"
    );
    let show = run(&["show", dir.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&show.stdout).contains("File out/u.dat: 7 bytes"));
    assert!(run(&["verify", dir.to_str().unwrap()]).status.success());

    let victim = dir.join("epoch-2/rank-1.ckpt");
    let mut b = std::fs::read(&victim).unwrap();
    let last = b.len() - 9;
    b[last] ^= 1;
    std::fs::write(&victim, b).unwrap();
    let v = run(&["verify", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&v.stdout);
    assert_eq!(v.status.code(), Some(1), "{text}");
    assert!(
        text.contains("epoch-2/rank-1.ckpt  CORRUPT") && text.contains("4 files, 1 corrupt"),
        "{text}"
    );
    assert_eq!(run(&["bogus", "x"]).status.code(), Some(2));
}
