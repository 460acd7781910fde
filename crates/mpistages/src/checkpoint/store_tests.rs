//! Tests of `store.rs`.

use super::*;

/// The newest valid local copy among `epochs` (newest first), or why none.
fn restore(store: &Store, epochs: &[u64]) -> Result<Restored, String> {
    let mut skipped = Vec::new();
    for &epoch in epochs {
        if let Some(r) = store.restore_local(epoch, &mut skipped) {
            return Ok(r);
        }
    }
    Err(format!(
        "no valid checkpoint in any level ({})",
        skipped.join("; ")
    ))
}
use crate::checkpoint::config;
use crate::checkpoint::dirlevel::DirLevel;
use crate::checkpoint::format::{Kind, SectionRef};
use crate::checkpoint::testutil::Scratch;

fn setup(tag: &str) -> (Scratch, Store) {
    let s = Scratch::new(&format!("store-{tag}"));
    let spec = format!("mem,tmpfs:{0}/tmpfs,pfs:{0}/pfs,keep=2", s.0.display());
    let store = Store::new(&config::parse(&spec).unwrap(), 5, 1, 4);
    (s, store)
}

fn state(epoch: u64) -> Arc<Vec<Section>> {
    Arc::new(vec![Section {
        kind: Kind::Protected,
        id: 0,
        name: String::new(),
        data: vec![epoch as u8; 1000].into(),
    }])
}

/// The memory level overwrites the copy it dropped last instead of
/// allocating a new one, unless someone (a restore) still holds it.
#[test]
fn the_memory_level_reuses_a_dropped_copy_nobody_holds() {
    let mut store = Store::new(&config::parse("mem,keep=1").unwrap(), 5, 1, 4);
    for e in 1..=2 {
        store.write(e, 0, &state(e), false).unwrap();
        store.commit(e, None);
    }
    let buf = store.spare.as_ref().expect("epoch 1's copy is kept")[0]
        .data
        .as_ptr();
    store.write(3, 0, &state(3), false).unwrap();
    let r = restore(&store, &[3]).unwrap();
    assert_eq!(r.sections, state(3));
    assert_eq!(
        r.sections[0].data.as_ptr(),
        buf,
        "written into epoch 1's buffer"
    );
    store.commit(3, None);
    store.write(4, 0, &state(4), false).unwrap();
    store.commit(4, None);
    assert!(store.spare.is_none(), "epoch 3 is held by the restore");
    assert_eq!(r.sections, state(3));
}

/// At every checkpoint the tmpfs level parks one old file, which is
/// done at once: its thread never starts.
#[test]
fn a_tmpfs_level_needs_no_thread_in_the_usual_case() {
    let s = Scratch::new("store-nothread");
    let spec = format!("mem,tmpfs:{}/tmpfs,keep=2", s.0.display());
    let mut store = Store::new(&config::parse(&spec).unwrap(), 5, 1, 4);
    for e in 1..=8 {
        store.write(e, 0, &state(e), false).unwrap();
        store.commit(e, None);
    }
    let Backend::Dir(f) = &store.levels[1].1 else {
        panic!("tmpfs is the second level")
    };
    assert!(!f.started());
    assert_eq!(f.level().epochs().unwrap(), vec![7, 8]);
    assert_eq!(restore(&store, &[8]).unwrap().sections, state(8));
}

#[test]
fn restores_from_the_fastest_valid_level() {
    let (s, mut store) = setup("fast");
    store.write(1, 0, &state(1), false).unwrap();
    store.wait_flushed();
    let r = restore(&store, &[1]).unwrap();
    assert_eq!((r.level.as_str(), r.sections.clone()), ("mem", state(1)));

    // A replacement process has no memory copy: tmpfs is next.
    let fresh = Store::new(
        &config::parse(&format!("mem,tmpfs:{0}/tmpfs,pfs:{0}/pfs", s.0.display())).unwrap(),
        5,
        1,
        4,
    );
    let r = restore(&fresh, &[1]).unwrap();
    assert!(
        r.level.starts_with("tmpfs") && r.sections == state(1),
        "{r:?}"
    );

    // Node lost: the tmpfs copy is gone, pfs has it.
    std::fs::remove_file(s.0.join("tmpfs/epoch-1/rank-1.ckpt")).unwrap();
    let r = restore(&fresh, &[1]).unwrap();
    assert!(
        r.level.starts_with("pfs") && r.sections == state(1),
        "{r:?}"
    );
    assert_eq!(r.skipped.len(), 2, "{:?}", r.skipped);
}

#[test]
fn corrupt_newest_copy_falls_back_cleanly() {
    let (s, mut store) = setup("corrupt");
    store.write(1, 0, &state(1), false).unwrap();
    store.commit(1, None);
    store.write(2, 0, &state(2), false).unwrap();
    store.wait_flushed();
    store.commit(2, store.durable());
    let fresh = Store::new(
        &config::parse(&format!("tmpfs:{0}/tmpfs,pfs:{0}/pfs", s.0.display())).unwrap(),
        5,
        1,
        4,
    );
    // Flip a byte of the newest tmpfs copy: pfs's copy of epoch 2 is used.
    let p = s.0.join("tmpfs/epoch-2/rank-1.ckpt");
    let mut b = std::fs::read(&p).unwrap();
    let i = b.len() - 10;
    b[i] ^= 0xFF;
    std::fs::write(&p, b).unwrap();
    let r = restore(&fresh, &[2, 1]).unwrap();
    assert!(
        r.epoch == 2 && r.level.starts_with("pfs") && r.sections == state(2),
        "{r:?}"
    );
    assert!(r.skipped[0].contains("checksum"), "{:?}", r.skipped);
    // Epoch 2 gone from pfs too: the previous committed epoch is used.
    std::fs::remove_file(s.0.join("pfs/epoch-2/rank-1.ckpt")).unwrap();
    let r = restore(&fresh, &[2, 1]).unwrap();
    assert!(r.epoch == 1 && r.sections == state(1), "{r:?}");
    // Nothing valid at all: an error that says what was tried.
    for lvl in ["tmpfs", "pfs"] {
        let _ = std::fs::remove_dir_all(s.0.join(lvl));
    }
    let e = restore(&fresh, &[2, 1]).unwrap_err();
    assert!(
        e.contains("no valid checkpoint") && e.contains("epoch 1 on pfs"),
        "{e}"
    );
}

#[test]
fn pfs_gets_every_nth_epoch_in_the_background() {
    let s = Scratch::new("store-pfs");
    let root = s.0.clone();
    let _ = std::fs::remove_dir_all(&root);
    let spec = format!("tmpfs:{0}/tmpfs,pfs:{0}/pfs@every=2,keep=2", root.display());
    let mut store = Store::new(&config::parse(&spec).unwrap(), 5, 1, 4);
    for e in 1..=4 {
        store.write(e, 0, &state(e), false).unwrap();
    }
    let st = store.wait_flushed();
    let pfs = &st.iter().find(|(n, _)| n.starts_with("pfs")).unwrap().1;
    assert_eq!(pfs.flushed, Some(4), "{st:?}");
    assert!(pfs.errors.is_empty(), "{st:?}");
    let pfs = DirLevel::new(root.join("pfs"), true, 2);
    assert_eq!(pfs.epochs().unwrap(), vec![2, 4]);
    // Node lost: restore the newest committed epoch from pfs.
    std::fs::remove_dir_all(root.join("tmpfs")).unwrap();
    let r = restore(&store, &[4, 3]).unwrap();
    assert!(
        r.epoch == 4 && r.level.starts_with("pfs") && r.sections == state(4),
        "{r:?}"
    );
    let e = restore(&store, &[3]).unwrap_err();
    assert!(e.contains("epoch 3 on pfs"), "{e}");
}

#[test]
fn failures_of_the_first_level_are_errors_others_warnings() {
    let s = Scratch::new("store-fail");
    let root = s.0.clone();
    std::fs::create_dir_all(&root).unwrap();
    // A file where the level's directory should be makes writes fail.
    std::fs::write(root.join("blocked"), b"x").unwrap();
    let spec = format!("tmpfs:{0}/blocked,pfs:{0}/pfs", root.display());
    let mut first_fails = Store::new(&config::parse(&spec).unwrap(), 5, 1, 4);
    let Err(e) = first_fails.write(1, 0, &state(1), false) else {
        panic!("the first level failed")
    };
    assert!(e.message.contains("tmpfs") && !e.no_space, "{e:?}");
    let spec = format!("tmpfs:{0}/tmpfs,pfs:{0}/blocked", root.display());
    let mut later_fails = Store::new(&config::parse(&spec).unwrap(), 5, 1, 4);
    // The durable level is written in the background: its failure is
    // reported by the flush status, and the write itself succeeds.
    assert!(later_fails
        .write(1, 0, &state(1), false)
        .unwrap()
        .0
        .is_empty());
    let flushed = later_fails.wait_flushed();
    let pfs = &flushed
        .iter()
        .find(|(n, _)| n.starts_with("pfs"))
        .unwrap()
        .1;
    assert_eq!(pfs.errors.len(), 1, "{flushed:?}");
    assert_eq!(pfs.flushed, None);
}

/// A partner copy is held in memory and in the node-local directory: a
/// new process of the holder (a relaunch) finds it there; commits remove
/// the epochs no longer kept; a lost node takes the copies held on it.
#[test]
fn held_partner_copies_outlive_the_holders_process() {
    let s = Scratch::new("store-held");
    let spec = format!("mem,tmpfs:{},partner,keep=2", s.0.display());
    let cfg = config::parse(&spec).unwrap();
    // Rank 1 holds rank 0's copies.
    let (client, mut holder) = (Store::new(&cfg, 5, 0, 4), Store::new(&cfg, 5, 1, 4));
    for e in 1..=3 {
        holder.write(e, 0, &state(e), false).unwrap();
        assert_eq!(holder.hold(e, client.encode(e, 0, &state(e)), 1000), None);
        holder.commit(e, None);
    }
    let dir = DirLevel::new(s.0.clone(), false, 2);
    assert!(!dir.held_path(1, 1).exists(), "epoch 1 is no longer kept");
    assert!(dir.held_path(2, 1).exists() && dir.held_path(3, 1).exists());
    // A relaunched holder has nothing in memory and reads the file.
    let relaunched = Store::new(&cfg, 5, 1, 4);
    let bytes = relaunched.held(3).expect("found on node-local storage");
    assert_eq!(*client.from_partner(3, &bytes).unwrap(), *state(3));
    assert!(relaunched.held(1).is_none());
    // Rank 2's held copies are not rank 1's.
    assert!(Store::new(&cfg, 5, 2, 4).held(3).is_none());
    relaunched.lose_node_local().unwrap();
    assert!(relaunched.held(3).is_none() && !dir.held_path(2, 1).exists());
}

/// Sections of an iterative code whose first region changes in one block
/// per epoch and whose second never changes.
fn partly_changing(epoch: u64) -> Vec<Section> {
    let mut a: Vec<u8> = (0..10 * crate::checkpoint::diff::BLOCK)
        .map(|i| (i % 253) as u8)
        .collect();
    for e in 1..=epoch as usize {
        a[(e % 10) * crate::checkpoint::diff::BLOCK + e] = e as u8;
    }
    vec![
        Section {
            kind: Kind::Protected,
            id: 1,
            name: String::new(),
            data: a.into(),
        },
        Section {
            kind: Kind::Protected,
            id: 2,
            name: String::new(),
            data: vec![7u8; 3 * crate::checkpoint::diff::BLOCK + 5].into(),
        },
    ]
}

/// `diff:3` on tmpfs and pfs: epochs 1, 4, 7 are full, the others hold
/// one changed block; every epoch reads back whole from both levels
/// through its chain; commits keep the chain's bases; a missing base is
/// an error naming it, and after a rollback the next epoch is full.
#[test]
fn differential_checkpoints_write_changed_blocks_and_restore_through_their_chain() {
    let s = Scratch::new("store-diff");
    let spec = format!("tmpfs:{0}/tmpfs,pfs:{0}/pfs,keep=1,diff:3", s.0.display());
    let mut store = Store::new(&config::parse(&spec).unwrap(), 5, 1, 4);
    let block = crate::checkpoint::diff::BLOCK as u64;
    let whole = (13 * block + 5) as f64;
    for e in 1..=8 {
        store.write(e, 0, &partly_changing(e), false).unwrap();
        store.wait_flushed();
        let file = std::fs::metadata(store.first_file(e).unwrap())
            .unwrap()
            .len() as f64;
        if [1, 4, 7].contains(&e) {
            assert!(file > whole, "epoch {e} is full: {file}");
        } else {
            assert!(file < 1.2 * block as f64, "epoch {e} is one block: {file}");
        }
        store.commit(e, store.durable());
        for level in ["tmpfs", "pfs"] {
            let d = DirLevel::new(s.0.join(level).as_path(), false, 1);
            let ck = d.read(&store.who(e, 0)).unwrap();
            assert_eq!(ck.sections, partly_changing(e), "{level} epoch {e}");
            assert!(ck.diff.is_empty());
        }
    }
    store.wait_flushed();
    // keep=1 at commit 8: epoch 8 and the two before it (a chain of
    // diff:3 reaches back two epochs at most; here 7 is its full base).
    let d = DirLevel::new(s.0.join("tmpfs").as_path(), false, 1);
    assert_eq!(d.epochs().unwrap(), vec![6, 7, 8]);
    std::fs::remove_file(d.path(7, 1)).unwrap();
    let e = d.read(&store.who(8, 0)).unwrap_err().to_string();
    assert!(
        e.contains("differential on epoch 7, which cannot be read"),
        "{e}"
    );
    // A rollback: the next epoch is full.
    store.rolled_back(6);
    store.write(7, 0, &partly_changing(7), false).unwrap();
    let file = std::fs::metadata(store.first_file(7).unwrap())
        .unwrap()
        .len() as f64;
    assert!(file > whole, "full after a rollback: {file}");
}

/// With a memory level first, `write` in the background keeps the copy in
/// memory at once and leaves the directory levels to `LevelWrites::run`:
/// no file before it runs, every file after, and the differential chain
/// (its differ travels with the writes) the same as written in place.
#[test]
fn background_writes_leave_the_files_to_a_thread_and_keep_the_chain() {
    let s = Scratch::new("store-background");
    let spec = format!(
        "mem,tmpfs:{0}/tmpfs,pfs:{0}/pfs,keep=1,diff:3",
        s.0.display()
    );
    let mut store = Store::new(&config::parse(&spec).unwrap(), 5, 1, 4);
    let block = crate::checkpoint::diff::BLOCK as u64;
    let whole = (13 * block + 5) as f64;
    for e in 1..=5 {
        let (warnings, later) = store.write(e, 0, &partly_changing(e), true).unwrap();
        assert!(warnings.is_empty());
        let later = later.expect("left to a thread");
        assert_eq!(later.epoch(), e);
        let file = store.first_file(e).unwrap();
        assert!(!file.exists(), "epoch {e}: no file before the thread runs");
        // In memory at once, whole.
        let r = restore(&store, &[e]).unwrap();
        assert_eq!(
            (r.level.as_str(), &r.sections[..]),
            ("mem", &partly_changing(e)[..])
        );
        let done = std::thread::spawn(move || later.run()).join().unwrap();
        assert!(store.finish(done).is_empty());
        store.wait_flushed();
        assert_eq!(store.durable(), Some(e), "copied to pfs in the background");
        let len = std::fs::metadata(&file).unwrap().len() as f64;
        if [1, 4].contains(&e) {
            assert!(len > whole, "epoch {e} is full: {len}");
        } else {
            assert!(len < 1.2 * block as f64, "epoch {e} is one block: {len}");
        }
        let d = DirLevel::new(s.0.join("tmpfs").as_path(), false, 1);
        assert_eq!(
            d.read(&store.who(e, 0)).unwrap().sections,
            partly_changing(e)
        );
        store.commit(e, store.durable());
    }
    // Without a memory level first, nothing is left to a thread.
    let spec = format!("tmpfs:{0}/t2,mem", s.0.display());
    let mut store = Store::new(&config::parse(&spec).unwrap(), 5, 1, 4);
    let (_, later) = store.write(1, 0, &state(1), true).unwrap();
    assert!(later.is_none());
    assert!(store.first_file(1).unwrap().exists());
}

/// Whether this kernel gives snapshots (else the test says SKIPPED).
fn snapshots_here() -> bool {
    match crate::checkpoint::snapshot::shared() {
        Ok(_) => true,
        Err(why) => {
            println!("SKIPPED: {why}");
            false
        }
    }
}

/// A private anonymous mapping standing for a program's region, unmapped
/// when dropped.
fn mapping(len: usize) -> crate::sys::pages::PageBuf {
    crate::sys::pages::PageBuf::new(len, 0).unwrap()
}

/// Writes `region` as the program's protected region 7 of `epoch`,
/// leaving the files (and the snapshot's completion) to the caller.
fn write_region(store: &mut Store, epoch: u64, region: &[u8]) -> LevelWrites {
    let sections = [SectionRef {
        kind: Kind::Protected,
        id: 7,
        name: "",
        data: region,
        program: true,
    }];
    let (_, later) = store.write(epoch, 0, &sections, true).unwrap();
    later.expect("left to a thread")
}

/// Regions of the program's memory are copied by a snapshot when the
/// files are written in the background: the call returns before the
/// copy is made, the program rewrites its memory at once, and every level
/// holds the bytes of the call's moment — also on the next epochs, whose
/// copies reuse the buffers of the dropped ones.
#[test]
fn a_snapshot_keeps_the_bytes_of_the_call_while_the_program_rewrites_them() {
    if !snapshots_here() {
        return;
    }
    let s = Scratch::new("store-snapshot");
    let spec = format!("mem,tmpfs:{0}/tmpfs,keep=1", s.0.display());
    let mut store = Store::new(&config::parse(&spec).unwrap(), 5, 1, 4);
    // 4 MiB + 3 bytes, 5 bytes into a page: unaligned ends.
    let mut backing = vec![0u8; (4 << 20) + 3 * 4096];
    let at = (backing.as_ptr() as usize).next_multiple_of(4096) - backing.as_ptr() as usize + 5;
    let len = (4 << 20) + 3;
    for e in 1..=3u64 {
        let region = &mut backing[at..at + len];
        region.fill(e as u8);
        let expected = vec![Section {
            kind: Kind::Protected,
            id: 7,
            name: String::new(),
            data: vec![e as u8; len].into(),
        }];
        let later = write_region(&mut store, e, region);
        // The program goes on at once.
        region.fill(0xEE);
        let done = std::thread::spawn(move || later.run()).join().unwrap();
        assert!(done.held);
        assert!(store.finish(done).is_empty());
        let r = restore(&store, &[e]).unwrap();
        assert_eq!((r.level.as_str(), &r.sections[..]), ("mem", &expected[..]));
        let d = DirLevel::new(s.0.join("tmpfs").as_path(), false, 1);
        assert_eq!(d.read(&store.who(e, 0)).unwrap().sections, expected);
        drop(r);
        store.commit(e, None);
    }
    crate::checkpoint::snapshot::unprotected(backing.as_ptr() as usize + at, len);
}

/// A program that frees a protected region before its snapshot is copied
/// (it should `MPIX_Unprotect` it first) loses that epoch, with a warning;
/// the process goes on (the copier reads through the kernel, which refuses
/// unmapped memory rather than faulting).
#[test]
fn a_region_unmapped_during_its_snapshot_fails_the_epoch_not_the_process() {
    if !snapshots_here() {
        return;
    }
    let s = Scratch::new("store-unmapped");
    let spec = format!("mem,tmpfs:{0}/tmpfs", s.0.display());
    let mut store = Store::new(&config::parse(&spec).unwrap(), 5, 1, 4);
    let mut lost = 0;
    for e in 1..=4u64 {
        let mut region = mapping(64 << 20);
        region.as_mut_slice().fill(e as u8);
        let later = write_region(&mut store, e, region.as_mut_slice());
        drop(region);
        let done = later.run();
        let held = done.held;
        let warnings = store.finish(done);
        match restore(&store, &[e]) {
            Ok(r) => {
                assert!(held && warnings.is_empty(), "{warnings:?}");
                assert!(r.sections[0].data.iter().all(|&b| b == e as u8));
            }
            Err(_) => {
                assert!(!held);
                assert!(
                    warnings.iter().any(|w| w.contains("kept nowhere")),
                    "{warnings:?}"
                );
                lost += 1;
            }
        }
    }
    println!("{lost} of 4 epochs lost to the unmapping");
}

/// A region freed and allocated again between two checkpoints (a new
/// mapping, perhaps at the same address, that the write-protection knows
/// nothing of): the next snapshot registers it anew and holds its bytes.
#[test]
fn a_region_freed_and_allocated_again_is_snapshotted_anew() {
    if !snapshots_here() {
        return;
    }
    let s = Scratch::new("store-realloc");
    let spec = format!("mem,tmpfs:{0}/tmpfs,keep=1", s.0.display());
    let mut store = Store::new(&config::parse(&spec).unwrap(), 5, 1, 4);
    for e in 1..=3u64 {
        // Each epoch's region is new (freed without MPIX_Unprotect at the
        // end of the one before).
        let mut region = mapping(8 << 20);
        region.as_mut_slice().fill(10 + e as u8);
        let later = write_region(&mut store, e, region.as_mut_slice());
        region.as_mut_slice().fill(0);
        let done = later.run();
        assert!(done.held);
        assert!(store.finish(done).is_empty());
        let r = restore(&store, &[e]).unwrap();
        assert!(
            r.sections[0].data.iter().all(|&b| b == 10 + e as u8),
            "epoch {e}"
        );
        drop(r);
        store.commit(e, None);
    }
}
