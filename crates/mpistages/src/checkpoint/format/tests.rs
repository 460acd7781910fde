//! Tests of the checkpoint format.

use super::encode::{temp_name, SMALL_FILE, WRITE_CHUNK};
use super::*;
use crate::checkpoint::testutil::Scratch;
use proptest::prelude::*;

fn who() -> Identity {
    Identity {
        job: 42,
        rank: 3,
        size: 8,
        epoch: 7,
        generation: 1,
    }
}

fn sample() -> Vec<Section> {
    vec![
        Section {
            kind: Kind::MpiState,
            id: 0,
            name: String::new(),
            data: b"state".to_vec().into(),
        },
        Section {
            kind: Kind::Protected,
            id: 5,
            name: String::new(),
            data: (0..5000u32)
                .flat_map(|i| (i as f64).sin().to_le_bytes())
                .collect(),
        },
        Section {
            kind: Kind::Protected,
            id: 6,
            name: String::new(),
            data: vec![0u8; 10000].into(),
        },
        Section {
            kind: Kind::File,
            id: 0,
            name: "fields/u.dat".into(),
            data: vec![].into(),
        },
    ]
}

fn tempdir() -> Scratch {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = Scratch::new(&format!("ckpt-test-{k}"));
    fs::create_dir_all(&d.0).unwrap();
    d
}

fn bytes_of(sections: &[Section], c: Compression) -> Vec<u8> {
    let d = tempdir();
    let p = d.0.join("c");
    write(&p, &who(), sections, c, false, &[]).unwrap();
    fs::read(&p).unwrap()
}

/// Above `SMALL_FILE` the sections go piece by piece (header last);
/// the file is byte for byte what the in-memory encoding gives.
#[test]
fn large_and_small_files_are_the_same_bytes_as_encode() {
    let mut big = sample();
    big[1].data = (0..(SMALL_FILE as usize + 3 * WRITE_CHUNK + 13) / 8)
        .flat_map(|i| (i as f64).cos().to_le_bytes())
        .collect();
    for sections in [sample(), big] {
        let on_disk = bytes_of(&sections, Compression::Off);
        assert_eq!(on_disk, encode(&who(), &sections, Compression::Off));
        assert_eq!(parse(&on_disk, Some(&who())).unwrap().sections, sections);
    }
}

#[test]
fn round_trip_with_and_without_compression() {
    let d = tempdir();
    for c in [Compression::Off, Compression::Zstd(3)] {
        let p = d.0.join(format!("{c:?}"));
        let stats = write(&p, &who(), &sample(), c, true, &[]).unwrap();
        let ck = read(&p, Some(&who())).unwrap();
        assert_eq!(ck.sections, sample());
        assert_eq!(ck.who, who());
        if c == Compression::Off {
            assert_eq!(stats.stored_bytes, stats.raw_bytes);
        } else {
            assert!(
                stats.stored_bytes < stats.raw_bytes,
                "zeros compress: {stats:?}"
            );
        }
    }
    assert_eq!(
        fs::read_dir(&d.0).unwrap().count(),
        2,
        "no temporary files left"
    );
}

/// Uncompressed sections read from a file are views of its mapping
/// (no copy), and keep their bytes when the file is replaced by a
/// newer one under the same name or removed.
#[test]
fn read_sections_are_mapped_and_outlive_the_file() {
    let d = tempdir();
    let p = d.0.join("ck");
    write(&p, &who(), &sample(), Compression::Off, false, &[]).unwrap();
    let ck = read(&p, Some(&who())).unwrap();
    assert!(ck
        .sections
        .iter()
        .all(|s| matches!(s.data, SectionData::Mapped(..))));
    let mut other = sample();
    other[1].data = vec![7u8; 10000].into();
    write(&p, &who(), &other, Compression::Off, false, &[]).unwrap();
    assert_eq!(ck.sections, sample());
    fs::remove_file(&p).unwrap();
    assert_eq!(ck.sections, sample());
}

/// An old file given for reuse is overwritten (and cut to the new
/// length) unless a reader still has it mapped: then it stays parked,
/// and a new file is written.
#[test]
fn a_reused_file_is_overwritten_unless_someone_reads_it() {
    let d = tempdir();
    let (old, p) = (d.0.join("old"), d.0.join("new"));
    let mut big = sample();
    big[1].data = vec![9u8; 50_000].into();
    // Writes `p`, offering `old` for reuse.
    let write_over = |sections: &[Section]| {
        let reuse = std::slice::from_ref(&old);
        write(&p, &who(), sections, Compression::Off, false, reuse).unwrap();
    };
    write(&old, &who(), &big, Compression::Off, false, &[]).unwrap();
    write_over(&sample());
    assert!(!old.exists());
    assert_eq!(
        fs::read(&p).unwrap(),
        encode(&who(), &sample(), Compression::Off)
    );
    // A reader holds `p` mapped; offering it for reuse changes nothing
    // the reader sees.
    let held = read(&p, Some(&who())).unwrap();
    fs::rename(&p, &old).unwrap();
    write_over(&big);
    assert!(old.exists(), "still parked");
    assert_eq!(held.sections, sample());
    assert_eq!(read(&p, Some(&who())).unwrap().sections, big);
    // Once the reader is gone, the next write takes it.
    drop(held);
    write_over(&sample());
    assert!(!old.exists());
    assert_eq!(fs::read_dir(&d.0).unwrap().count(), 1, "only `new` is left");
}

#[test]
fn every_flipped_byte_and_every_truncation_is_detected() {
    let good = bytes_of(&sample(), Compression::Zstd(1));
    for i in 0..good.len() {
        let mut b = good.clone();
        b[i] ^= 0x5A;
        assert!(
            parse(&b, Some(&who())).is_err(),
            "byte {i} flipped and accepted"
        );
    }
    for len in 0..good.len() - 7 {
        assert!(
            parse(&good[..len], Some(&who())).is_err(),
            "truncated to {len} accepted"
        );
    }
}

#[test]
fn wrong_identity_is_refused() {
    let b = bytes_of(&sample(), Compression::Off);
    for other in [
        Identity { rank: 4, ..who() },
        Identity { epoch: 6, ..who() },
        Identity { job: 1, ..who() },
        Identity { size: 9, ..who() },
    ] {
        assert!(matches!(
            parse(&b, Some(&other)),
            Err(CkptError::WrongIdentity { .. })
        ));
    }
    assert!(parse(
        &b,
        Some(&Identity {
            generation: 9,
            ..who()
        })
    )
    .is_ok());
    assert!(matches!(
        parse(b"hello", None),
        Err(CkptError::NotACheckpoint)
    ));
}

#[test]
fn a_failed_write_leaves_the_old_file() {
    let d = tempdir();
    let p = d.0.join("c");
    write(&p, &who(), &sample(), Compression::Off, false, &[]).unwrap();
    // A directory in the way of the temporary name makes the write fail.
    fs::create_dir(temp_name(&p)).unwrap();
    assert!(write(&p, &who(), &[] as &[Section], Compression::Off, false, &[]).is_err());
    assert_eq!(read(&p, Some(&who())).unwrap().sections, sample());
}

#[test]
fn borrowed_sections_write_the_same_bytes_as_owned_ones() {
    let owned = sample();
    let refs: Vec<SectionRef> = owned.iter().map(|s| s.section()).collect();
    for c in [Compression::Off, Compression::Zstd(1)] {
        assert_eq!(encode(&who(), &refs, c), encode(&who(), &owned, c));
    }
    assert_eq!(refs[1].to_owned(), owned[1]);
}

proptest! {
    #[test]
    fn any_bytes_parse_or_fail(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse(&bytes, None);
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&bytes);
        let _ = parse(&b, None);
    }

    /// A valid file with bytes changed or cut: never a panic, and never
    /// sections other than the ones written (a checksum catches it).
    #[test]
    fn mutated_files_are_rejected_or_intact(
        flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 1..4),
        cut in any::<usize>(),
        z in any::<bool>(),
    ) {
        let sections: Vec<Section> = (0..3u64).map(|i| Section {
            kind: Kind::Protected, id: i, name: format!("s{i}"),
            data: (0..100 + 50 * i).map(|x| (x * 7 + i) as u8).collect::<Vec<u8>>().into(),
        }).collect();
        let c = if z { Compression::Zstd(1) } else { Compression::Off };
        let good = bytes_of(&sections, c);
        let mut b = good.clone();
        for (at, x) in flips {
            let i = at % b.len();
            b[i] ^= x;
        }
        if let Ok(f) = parse(&b, Some(&who())) {
            prop_assert_eq!(f.sections, sections.clone());
        }
        let short = &good[..cut % good.len()];
        prop_assert!(parse(short, Some(&who())).is_err());
    }

    #[test]
    fn round_trips(datas in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..5), z in any::<bool>()) {
        let sections: Vec<Section> = datas.into_iter().enumerate().map(|(i, data)| Section {
            kind: Kind::Protected, id: i as u64, name: format!("s{i}"), data: data.into(),
        }).collect();
        let c = if z { Compression::Zstd(1) } else { Compression::Off };
        let b = bytes_of(&sections, c);
        // In memory (the partner level) the bytes are the file's.
        prop_assert_eq!(&encode(&who(), &sections, c), &b);
        prop_assert_eq!(parse(&b, Some(&who())).unwrap().sections, sections);
    }
}
