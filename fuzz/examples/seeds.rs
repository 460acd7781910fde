//! Writes the seed corpus (fuzz/seeds/TARGET/seed-*) from the real
//! encoders, so that the fuzzers start from well-formed inputs:
//!   cd fuzz && cargo +nightly run --example seeds
use mpistages::checkpoint::format::{self, Compression, Identity, Kind, SectionRef};
use mpistages::transport::frame::{Header, Kind as FrameKind};
use mpistages_control::proto::{encode, ToController, ToRank};
use std::path::Path;

fn put(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
}

fn main() {
    for (i, k) in [
        FrameKind::Eager,
        FrameKind::Rts,
        FrameKind::Hello,
        FrameKind::Data,
    ]
    .into_iter()
    .enumerate()
    {
        let mut h = Header::new(k);
        h.src = 1;
        h.len = 16;
        put("frame", &i.to_string(), &h.encode());
    }
    let hello = encode(&ToController::Hello {
        key: b"0123456789abcdef".to_vec(),
        rank: 2,
        generation: 0,
        addr: "127.0.0.1:4000".into(),
    });
    let welcome = encode(&ToRank::Welcome {
        hosts: vec!["127.0.0.1".into()],
        addrs: vec![(0, 4000), (0, 4001)],
        born: vec![0, 0],
        generation: 1,
        epoch: 3,
        fresh: vec![1],
    });
    put("control", "hello", &[&[3u8][..], &hello].concat());
    put("control", "welcome", &[&[5u8][..], &welcome].concat());
    // A checkpoint file with one protected region and the MPI state.
    let tmp = std::env::temp_dir().join(format!("seed-ckpt-{}", std::process::id()));
    let who = Identity {
        job: 7,
        rank: 1,
        size: 4,
        epoch: 2,
        generation: 0,
    };
    let data: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    let sections = [
        SectionRef {
            kind: Kind::Protected,
            id: 0,
            name: "",
            data: &data,
        },
        SectionRef {
            kind: Kind::File,
            id: 0,
            name: "out.dat",
            data: b"hello",
        },
    ];
    for (n, c) in [("plain", Compression::Off), ("zstd", Compression::Zstd(3))] {
        format::write(&tmp, &who, &sections, c, false, &[]).unwrap();
        put("checkpoint", n, &std::fs::read(&tmp).unwrap());
    }
    let _ = std::fs::remove_file(&tmp);
    put("udp", "empty", &[0]);
    for (n, s) in [
        ("hostfile", "node1 slots=4\nnode2:2\n# a comment\n"),
        ("hosts", "a:2,b:2,c"),
        (
            "ckpt",
            "mem,tmpfs:/dev/shm/x,partner,pfs:/tmp/p@every=2,diff:8",
        ),
        ("inject", "rank=1,call=MPI_Allreduce:20,damage=node"),
        ("faults", "loss=0.05,dup=0.01,reorder=0.02,seed=7"),
    ] {
        put("specs", n, s.as_bytes());
    }
    put(
        "messages",
        "pmi2",
        b"cmd=init;pmi_version=2;pmi_subversion=0;",
    );
}
