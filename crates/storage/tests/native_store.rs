//! The NoFTL page store on its own: mapping, frees without TRIM, striping, streams, recovery.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use nand::{DeviceConfig, Nand, OpKind, Ppn};
use storage::pagestore::{PageKind, WriteHint};
use storage::tuple::Value;
use storage::{Engine, EngineConfig};
use storage::{NativeConfig, NativeStore, PageStore};

fn tiny() -> Nand {
    Nand::new(DeviceConfig::preset("tiny", &[]).unwrap()).unwrap()
}

fn cfg() -> NativeConfig {
    NativeConfig {
        log_blocks: Some(64),
        spare_factor: 0.25,
        ..NativeConfig::default()
    }
}

fn page(pid: u32, version: u8) -> Vec<u8> {
    let mut p = vec![version; 4096];
    p[..4].copy_from_slice(&pid.to_le_bytes());
    p
}

const HEAP: WriteHint = WriteHint {
    object: 7,
    kind: PageKind::Heap,
};

#[test]
fn pages_read_back_and_unwritten_pages_read_as_zeros() {
    let mut s = NativeStore::format(tiny(), cfg()).unwrap();
    let mut t = 0;
    for pid in 0..50 {
        t = s.write_page(t, pid, &page(pid, 1), HEAP).unwrap();
    }
    t = s.write_page(t, 3, &page(3, 2), HEAP).unwrap();
    let mut buf = vec![0u8; 4096];
    s.read_page(t, 3, &mut buf).unwrap();
    assert_eq!(buf, page(3, 2));
    s.read_page(t, 60, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    assert!(
        s.write_page(t, s.db_pages() as u32, &page(0, 1), HEAP)
            .is_err(),
        "out of range is refused"
    );
}

#[test]
fn a_freed_page_is_invalid_at_once_without_any_flash_operation() {
    let mut s = NativeStore::format(tiny(), cfg()).unwrap();
    let t = s.write_page(0, 5, &page(5, 1), HEAP).unwrap();
    let ppn = s.location(5).unwrap();
    let block = s.space().geometry().block_of(ppn);
    let valid = s.space().valid_pages(block);
    let ops = s.nand().unwrap().ops_issued();
    s.page_freed(t, 5).unwrap();
    assert_eq!(
        s.nand().unwrap().ops_issued(),
        ops,
        "no TRIM, no record: nothing reaches the flash"
    );
    assert_eq!(s.space().valid_pages(block), valid - 1);
    assert_eq!(s.location(5), None);
}

#[test]
fn a_flusher_batch_runs_on_all_dies_at_once() {
    let mut s = NativeStore::format(tiny(), cfg()).unwrap();
    let dies = s.space().geometry().dies();
    let mut done = 0;
    for pid in 0..dies {
        done = done.max(s.write_page(0, pid, &page(pid, 1), HEAP).unwrap());
    }
    let g = s.space().geometry().clone();
    let mut used: Vec<u32> = (0..dies)
        .map(|pid| g.die_of_block(g.block_of(s.location(pid).unwrap())).0)
        .collect();
    used.sort_unstable();
    used.dedup();
    assert_eq!(used.len(), dies as usize);
    assert!(
        done < 2 * 200_000,
        "{dies} programs issued together finish at {done} ns"
    );
}

#[test]
fn hot_pages_and_loaded_pages_land_in_different_blocks() {
    let mut s = NativeStore::format(tiny(), cfg()).unwrap();
    let mut t = 0;
    for pid in 0..40 {
        t = s.write_page(t, pid, &page(pid, 1), HEAP).unwrap();
    }
    for v in 2..6 {
        t = s.write_page(t, 0, &page(0, v), HEAP).unwrap();
    }
    let g = s.space().geometry().clone();
    let hot = g.block_of(s.location(0).unwrap());
    assert!(
        (1..40).all(|pid| g.block_of(s.location(pid).unwrap()) != hot),
        "the hot page shares a block with loaded pages"
    );
}

#[test]
fn the_mapping_is_rebuilt_from_flash_after_a_power_cut_and_checkpointed_frees_stay_free() {
    let mut s = NativeStore::format(tiny(), cfg()).unwrap();
    let mut t = 0;
    // Enough rewrites to make GC move pages, then frees made durable by a checkpoint.
    for round in 0..30u8 {
        for pid in 0..120 {
            t = s.write_page(t, pid, &page(pid, round), HEAP).unwrap();
        }
    }
    t = s.write_log(t, 3, &[9u8; 4096]).unwrap();
    t = s.write_meta(t, 1, &[7u8; 4096]).unwrap();
    for pid in 100..120 {
        t = s.page_freed(t, pid).unwrap();
    }
    s.sync_pages(t).unwrap();
    assert!(s.checkpoints_written() >= 1);
    assert!(s.space().counts().gc_erases > 0, "GC should have run");
    let mut nand = Box::new(s).into_nand().unwrap();
    nand.power_cut();
    nand.power_on();
    let mut r = NativeStore::open(nand, cfg()).unwrap();
    let mut buf = vec![0u8; 4096];
    for pid in 0..100 {
        r.read_page(0, pid, &mut buf).unwrap();
        assert_eq!(buf, page(pid, 29), "page {pid}");
    }
    for pid in 100..120 {
        assert_eq!(r.location(pid), None, "freed page {pid} came back");
    }
    r.read_log(0, 3, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 9));
    r.read_meta(0, 1, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 7));
    r.space().check().unwrap();
    assert_eq!(
        r.nand()
            .unwrap()
            .stats()
            .get(OpKind::Program, nand::Purpose::Recovery),
        0,
        "recovery writes nothing"
    );
}

/// A root split is one redo-only record that sets two allocation bits in the same space-map
/// page. When that page is on flash older than the record, restart redo must set both: it used
/// to test the page LSN again before the second op, after the first had set it to the record's
/// LSN, so the second new page stayed free in the space map. The next allocation then handed it
/// out again over a live B-tree node, and on this store `retain_allocated` dropped it outright
/// when it was already on flash (TPC-C crash seeds 3 and 15).
#[test]
fn a_redone_root_split_keeps_both_new_pages_allocated_after_a_power_cut() {
    // Room for the engine's log (it keeps 64 blocks for rollbacks) and a database.
    let device = || {
        Nand::new(
            DeviceConfig::preset("tiny", &["geometry.blocks_per_plane=64".to_string()]).unwrap(),
        )
        .unwrap()
    };
    let cfg = || NativeConfig {
        log_blocks: Some(512),
        ..cfg()
    };
    // No automatic checkpoint: it would write the space map back before the crash.
    let cfg_e = || EngineConfig {
        buffer_frames: 256,
        checkpoint_bytes: Some(u64::MAX),
        ..EngineConfig::default()
    };
    let mut e = Engine::create(
        Box::new(NativeStore::format(device(), cfg()).unwrap()),
        cfg_e(),
    )
    .unwrap();
    let t = e.begin().unwrap();
    e.execute_ddl(
        t,
        "CREATE TABLE acct (id INT, v CHAR(100)); CREATE UNIQUE INDEX acct_pk ON acct (id);",
    )
    .unwrap();
    e.commit(t).unwrap();
    // Everything on flash, so the space map there is older than the split to come.
    let n = e.store().db_pages() as usize;
    e.flush_pages(n).unwrap();
    e.checkpoint().unwrap();
    let (acct, pk) = (e.table("acct").unwrap().id, e.index("acct_pk").unwrap().id);
    let row = |i: i64| vec![Value::Int(i), Value::Str(format!("row {i}"))];
    let insert = |e: &mut Engine, i: i64| {
        let t = e.begin().unwrap();
        e.insert(t, acct, &row(i)).unwrap();
        e.commit(t).unwrap();
    };
    let mut rows = 0;
    while e.stats().btree_splits == 0 {
        insert(&mut e, rows);
        rows += 1;
    }
    // The first split of the index is its root's; its record is durable (committed after it),
    // the space-map page it changed is not written back.
    let mut nand = e.into_store().into_nand().unwrap();
    nand.power_cut();
    nand.power_on();
    let mut e = Engine::open(Box::new(NativeStore::open(nand, cfg()).unwrap()), cfg_e()).unwrap();
    assert!(
        e.stats().recovery_redone > 0,
        "the split should have been redone"
    );
    // New pages after the restart must not be either of the split's.
    let more = e.stats().pages_allocated + 4;
    while e.stats().pages_allocated < more {
        insert(&mut e, rows);
        rows += 1;
    }
    let t = e.begin().unwrap();
    for i in 0..rows {
        assert_eq!(
            e.lookup(t, pk, &[Value::Int(i)], false).unwrap().len(),
            1,
            "row {i}"
        );
    }
    e.commit(t).unwrap();
    assert_eq!(e.check().unwrap(), Vec::<String>::new());
}

/// The log's dead blocks (behind the tail) are invalid on flash at once, so GC never copies
/// them; after a power cut the store and the log still recover every committed row, though
/// released blocks may come back stale.
#[test]
fn log_blocks_behind_the_tail_are_invalid_and_recovery_still_finds_every_commit() {
    let log_blocks = 96u64; // the engine keeps 64 blocks free for rollbacks
    let cfg = || NativeConfig {
        log_blocks: Some(log_blocks),
        ..cfg()
    };
    let cfg_e = || EngineConfig {
        buffer_frames: 64,
        ..EngineConfig::default()
    };
    let mut e = Engine::create(
        Box::new(NativeStore::format(tiny(), cfg()).unwrap()),
        cfg_e(),
    )
    .unwrap();
    let t = e.begin().unwrap();
    e.execute_ddl(
        t,
        "CREATE TABLE acct (id INT, v CHAR(100)); CREATE UNIQUE INDEX acct_pk ON acct (id);",
    )
    .unwrap();
    e.commit(t).unwrap();
    let (acct, pk) = (e.table("acct").unwrap().id, e.index("acct_pk").unwrap().id);
    // One log block per commit (a force pads its block): 600 commits wrap the log ~6 times.
    for i in 0..600i64 {
        let t = e.begin().unwrap();
        e.insert(t, acct, &[Value::Int(i), Value::Str(format!("row {i}"))])
            .unwrap();
        e.commit(t).unwrap();
    }
    let log_keys = 2..2 + log_blocks;
    let live_log = |s: &NativeStore| {
        let g = s.space().geometry();
        (0..g.pages())
            .filter(|&p| {
                s.space()
                    .key_at(Ppn(p))
                    .is_some_and(|k| log_keys.contains(&k))
            })
            .count() as u64
    };
    let held_blocks =
        e.log_next_lsn().div_ceil(storage::log::PAYLOAD) - e.log_tail_lsn() / storage::log::PAYLOAD;
    let native = e
        .store()
        .as_any()
        .and_then(|a| a.downcast_ref::<NativeStore>())
        .unwrap();
    assert!(
        live_log(native) <= held_blocks + 1,
        "{} valid log pages, the log holds {held_blocks} blocks",
        live_log(native)
    );
    let mut nand = e.into_store().into_nand().unwrap();
    nand.power_cut();
    nand.power_on();
    let mut e = Engine::open(Box::new(NativeStore::open(nand, cfg()).unwrap()), cfg_e()).unwrap();
    let t = e.begin().unwrap();
    for i in 0..600 {
        assert_eq!(
            e.lookup(t, pk, &[Value::Int(i)], false).unwrap().len(),
            1,
            "row {i}"
        );
    }
    e.commit(t).unwrap();
    assert_eq!(e.check().unwrap(), Vec::<String>::new());
}

const INDEX_LEAF: WriteHint = WriteHint {
    object: 8,
    kind: PageKind::BTreeLeaf,
};

/// Pages 0..160 written once, then rewritten in a scrambled order until GC has run: even pages
/// as heap pages, odd ones as B-tree leaves. Returns the store and the time.
fn heap_and_index_aged(index_streams: bool) -> (NativeStore, u64) {
    let cfg = NativeConfig {
        index_streams,
        ..cfg()
    };
    // Twice tiny's blocks: room for the two index streams' open blocks on every die.
    let set = ["geometry.blocks_per_plane=32".to_string()];
    let nand = Nand::new(DeviceConfig::preset("tiny", &set).unwrap()).unwrap();
    let mut s = NativeStore::format(nand, cfg).unwrap();
    let hint = |pid: u32| {
        if pid.is_multiple_of(2) {
            HEAP
        } else {
            INDEX_LEAF
        }
    };
    let mut t = 0;
    for pid in 0..160 {
        t = s.write_page(t, pid, &page(pid, 0), hint(pid)).unwrap();
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..8_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let pid = (x % 160) as u32;
        t = s
            .write_page(t, pid, &page(pid, (i % 250) as u8 + 1), hint(pid))
            .unwrap();
    }
    assert!(s.space().counts().gc_erases > 0, "GC should have run");
    (s, t)
}

/// Does some flash block hold a valid copy of a heap page and one of an index page?
fn a_block_mixes_heap_and_index(s: &NativeStore) -> bool {
    let g = s.space().geometry().clone();
    let mut kinds: std::collections::HashMap<u32, [bool; 2]> = Default::default();
    for pid in 0..160u32 {
        let b = g.block_of(s.location(pid).unwrap()).0;
        kinds.entry(b).or_default()[(pid % 2) as usize] = true;
    }
    kinds.values().any(|k| k[0] && k[1])
}

/// With index streams no block holds heap and index pages together, so the victims Insert
/// Address Assist is told about hold heap pages only (a heap insert can empty those); without
/// them both happen (the test tells the two apart). A store written with index streams opens
/// without them with every page intact.
#[test]
fn index_streams_keep_index_pages_out_of_the_heap_blocks_iaa_is_told_about() {
    let (mut mixed, _) = heap_and_index_aged(false);
    assert!(a_block_mixes_heap_and_index(&mixed));
    let mut pages = Vec::new();
    mixed.gc_victims(8, u64::MAX, &mut pages).unwrap();
    assert!(pages.iter().any(|p| p % 2 == 1), "{pages:?}");

    let (mut s, t) = heap_and_index_aged(true);
    assert!(!a_block_mixes_heap_and_index(&s));
    let mut pages = Vec::new();
    s.gc_victims(8, u64::MAX, &mut pages).unwrap();
    assert!(!pages.is_empty());
    assert!(
        pages.iter().all(|p| p % 2 == 0),
        "an index page in a committed victim: {pages:?}"
    );
    s.sync_pages(t).unwrap();
    let want: Vec<Vec<u8>> = (0..160)
        .map(|pid| {
            let mut b = vec![0u8; 4096];
            s.read_page(t, pid, &mut b).unwrap();
            b
        })
        .collect();
    let mut nand = Box::new(s).into_nand().unwrap();
    nand.power_cut();
    nand.power_on();
    // Opened without index streams first (their blocks go back to HOT and COLD), then with.
    for index_streams in [false, true] {
        let cfg = NativeConfig {
            index_streams,
            ..cfg()
        };
        let mut r = NativeStore::open(nand, cfg).unwrap();
        r.space().check().unwrap();
        let mut buf = vec![0u8; 4096];
        for pid in 0..160u32 {
            r.read_page(0, pid, &mut buf).unwrap();
            assert_eq!(
                buf, want[pid as usize],
                "page {pid}, index streams {index_streams}"
            );
        }
        nand = Box::new(r).into_nand().unwrap();
    }
}
