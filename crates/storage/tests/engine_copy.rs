//! `Engine::copy_to`: a loaded database copied page by page onto another store (the way
//! `noftl compare` gives every store the same database) reads the same, takes new work, and
//! recovers that work after a crash (the copy's log continues the source's LSNs).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use nand::{DeviceConfig, Nand};
use storage::crashdisk::{CrashDisk, SharedCrashDisk};
use storage::tuple::Value;
use storage::{
    BlockPageStore, Engine, EngineConfig, NativeConfig, NativeStore, PageOp, PageStore, ReplayPages,
};

const DDL: &str = "CREATE TABLE acct (id INT, owner VARCHAR(40), bal MONEY);
CREATE UNIQUE INDEX acct_pk ON acct (id);";

fn cfg() -> EngineConfig {
    EngineConfig {
        buffer_frames: 32,
        ..EngineConfig::default()
    }
}

/// A source with 3,000 rows, some updated and deleted, so that its LSNs are well past the start.
fn loaded_source() -> Engine {
    let store = BlockPageStore::new(Box::new(CrashDisk::new(8192)), 4096, Some(256)).unwrap();
    let mut e = Engine::create(Box::new(store), cfg()).unwrap();
    let t = e.begin().unwrap();
    e.execute_ddl(t, DDL).unwrap();
    e.commit(t).unwrap();
    let acct = e.table("acct").unwrap().id;
    let pk = e.index("acct_pk").unwrap().id;
    let t = e.begin().unwrap();
    for i in 0..3_000 {
        let row = [Value::Int(i), Value::Str(format!("o{i}")), Value::Money(i)];
        e.insert(t, acct, &row).unwrap();
    }
    e.commit(t).unwrap();
    let t = e.begin().unwrap();
    for i in (0..3_000).step_by(7) {
        let r = e.lookup(t, pk, &[Value::Int(i)], true).unwrap();
        e.add_to_column(t, acct, r[0], 2, 1_000).unwrap();
    }
    e.commit(t).unwrap();
    e
}

fn balances(e: &mut Engine) -> Vec<i64> {
    let acct = e.table("acct").unwrap().id;
    let pk = e.index("acct_pk").unwrap().id;
    let t = e.begin().unwrap();
    let out = (0..3_000)
        .map(|i| {
            let r = e.lookup(t, pk, &[Value::Int(i)], false).unwrap();
            let row = e.get(t, acct, r[0]).unwrap().unwrap();
            match row[2] {
                Value::Money(m) => m,
                ref v => panic!("balance {v:?}"),
            }
        })
        .collect();
    e.commit(t).unwrap();
    out
}

fn native() -> Box<dyn PageStore> {
    let nand = Nand::new(
        DeviceConfig::preset("tiny", &["geometry.blocks_per_plane=64".to_string()]).unwrap(),
    )
    .unwrap();
    Box::new(
        NativeStore::format(
            nand,
            NativeConfig {
                log_blocks: Some(128),
                spare_factor: 0.3,
                ..NativeConfig::default()
            },
        )
        .unwrap(),
    )
}

#[test]
fn a_copied_database_reads_the_same_on_every_kind_of_store() {
    let mut src = loaded_source();
    let want = balances(&mut src);
    let ftl = || {
        let nand = Nand::new(
            DeviceConfig::preset("tiny", &["geometry.blocks_per_plane=64".to_string()]).unwrap(),
        )
        .unwrap();
        let dev = ftl::build("page", nand, &ftl::FtlOptions::default()).unwrap();
        Box::new(BlockPageStore::new(dev, 4096, Some(128)).unwrap()) as Box<dyn PageStore>
    };
    for store in [native(), ftl()] {
        let name = store.name();
        let mut copy = src.copy_to(store, cfg()).unwrap();
        assert_eq!(balances(&mut copy), want, "{name}");
        assert!(copy.check().unwrap().is_empty(), "{name}");
    }
    // The source goes on unchanged.
    assert_eq!(balances(&mut src), want);
}

#[test]
fn work_committed_on_a_copy_survives_a_crash_of_the_copy() {
    let mut src = loaded_source();
    let mut want = balances(&mut src);
    let disk = SharedCrashDisk::new(CrashDisk::new(8192));
    let store = BlockPageStore::new(Box::new(disk.clone()), 4096, Some(256)).unwrap();
    let mut copy = src.copy_to(Box::new(store), cfg()).unwrap();
    let acct = copy.table("acct").unwrap().id;
    let pk = copy.index("acct_pk").unwrap().id;
    let t = copy.begin().unwrap();
    for i in (0..3_000).step_by(5) {
        let r = copy.lookup(t, pk, &[Value::Int(i)], true).unwrap();
        copy.add_to_column(t, acct, r[0], 2, 7).unwrap();
        want[i as usize] += 7;
    }
    copy.commit(t).unwrap();
    // Power goes before any updated page is written back: redo alone must bring them back, so
    // the new records' LSNs must be above the copied pages' LSNs.
    disk.cut_power();
    let after = SharedCrashDisk::new(disk.after_power_loss(1));
    let store = BlockPageStore::new(Box::new(after), 4096, Some(256)).unwrap();
    let mut e = Engine::open(Box::new(store), cfg()).unwrap();
    assert_eq!(balances(&mut e), want);
}

#[test]
fn a_copy_onto_a_store_too_small_or_of_another_page_size_is_refused() {
    let mut src = loaded_source();
    let small = BlockPageStore::new(Box::new(CrashDisk::new(100)), 4096, Some(64)).unwrap();
    let err = src.copy_to(Box::new(small), cfg()).err().unwrap();
    assert!(err.to_string().contains("DB pages"), "{err}");
    let big_pages = BlockPageStore::new(Box::new(CrashDisk::new(8192)), 8192, Some(64)).unwrap();
    let err = src.copy_to(Box::new(big_pages), cfg()).err().unwrap();
    assert!(err.to_string().contains("-byte pages"), "{err}");
}

#[test]
fn every_copy_of_one_source_starts_its_log_at_the_same_lsn() {
    // `noftl compare` copies one loaded database onto every row's store, two rows at a time:
    // a copy's log position must not depend on how many copies were made before it, or a
    // row's figures would depend on the order in which the worker threads took the source.
    let mut src = loaded_source();
    let starts: Vec<u64> = (0..3)
        .map(|_| {
            let store = BlockPageStore::new(Box::new(CrashDisk::new(8192)), 4096, Some(256));
            let copy = src.copy_to(Box::new(store.unwrap()), cfg()).unwrap();
            copy.log_next_lsn()
        })
        .collect();
    assert!(starts.iter().all(|&s| s == starts[0]), "{starts:?}");
    // Work on the source after a copy is checkpointed before the next: its copy starts later.
    let want = balances(&mut src);
    let acct = src.table("acct").unwrap().id;
    let pk = src.index("acct_pk").unwrap().id;
    let t = src.begin().unwrap();
    let r = src.lookup(t, pk, &[Value::Int(1)], true).unwrap();
    src.add_to_column(t, acct, r[0], 2, 1).unwrap();
    src.commit(t).unwrap();
    let store = BlockPageStore::new(Box::new(CrashDisk::new(8192)), 4096, Some(256)).unwrap();
    let mut copy = src.copy_to(Box::new(store), cfg()).unwrap();
    assert!(copy.log_next_lsn() > starts[0]);
    let mut after = want;
    after[1] += 1;
    assert_eq!(balances(&mut copy), after);
}

#[test]
fn pages_rewritten_as_they_are_change_nothing_and_redo_still_finds_its_work() {
    // `compare --warmup precondition` rewrites pages the workload writes, drawn from the
    // write-backs the pool counted, with the bytes the store holds: some of those are older
    // than the pool's dirty images. Nothing the database sees may change, and after a crash
    // redo must still bring back committed work whose pages were rewritten stale.
    let mut src = loaded_source();
    let mut want = balances(&mut src);
    let disk = SharedCrashDisk::new(CrashDisk::new(8192));
    let store = BlockPageStore::new(Box::new(disk.clone()), 4096, Some(256)).unwrap();
    let mut copy = src.copy_to(Box::new(store), cfg()).unwrap();
    let objects = copy.page_objects().unwrap();
    assert!(objects.iter().filter(|o| o.is_some()).count() > 10);
    let acct = copy.table("acct").unwrap().id;
    let pk = copy.index("acct_pk").unwrap().id;
    let writebacks0 = copy.buffer_stats().writebacks;
    copy.count_page_io();
    let pass = |copy: &mut Engine, want: &mut Vec<i64>, k: i64| {
        let t = copy.begin().unwrap();
        for i in (0..3_000).step_by(3) {
            let r = copy.lookup(t, pk, &[Value::Int(i)], true).unwrap();
            copy.add_to_column(t, acct, r[0], 2, k).unwrap();
            want[i as usize] += k;
        }
        copy.commit(t).unwrap();
    };
    pass(&mut copy, &mut want, 11);
    let io = copy.take_page_io().unwrap();
    assert_eq!(
        io.total_writes(),
        copy.buffer_stats().writebacks - writebacks0
    );
    assert!(io.total_reads() > 0, "32 frames miss");
    assert!(
        copy.take_page_io().is_none(),
        "taking the counts stops counting"
    );
    let written: Vec<u32> = io
        .trace
        .iter()
        .filter_map(|o| match *o {
            PageOp::Write(p) => Some(p),
            PageOp::Read(_) => None,
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(
        !written.is_empty(),
        "32 frames cannot hold a pass over 3,000 rows"
    );
    for &p in &written {
        assert!(objects[p as usize].is_some(), "page {p} is the database's");
    }
    // Committed work whose pages are still dirty in the pool, then the stale images rewritten.
    pass(&mut copy, &mut want, 5);
    let t = copy.begin().unwrap();
    let mut ops: Vec<PageOp> = written.iter().map(|&p| PageOp::Write(p)).collect();
    let mut recent = ReplayPages::new(8);
    let err = copy.replay_page_io(&ops, &mut recent).err().unwrap();
    assert!(err.to_string().contains("no transaction open"), "{err}");
    copy.commit(t).unwrap();
    ops.push(PageOp::Write(1 << 30)); // beyond the database: not allocated, skipped
    ops.push(PageOp::Read(written[0]));
    ops.push(PageOp::Write(written[0])); // its bytes are a recent read's
    let done = copy.replay_page_io(&ops, &mut recent).unwrap();
    let n = written.len() as u64;
    assert_eq!(
        (
            done.writes,
            done.writes_read_first,
            done.reads,
            done.skipped
        ),
        (n + 1, n, 1, 1)
    );
    assert_eq!(balances(&mut copy), want);
    assert!(copy.check().unwrap().is_empty());
    disk.cut_power();
    let after = SharedCrashDisk::new(disk.after_power_loss(1));
    let store = BlockPageStore::new(Box::new(after), 4096, Some(256)).unwrap();
    let mut e = Engine::open(Box::new(store), cfg()).unwrap();
    assert_eq!(balances(&mut e), want);
}
