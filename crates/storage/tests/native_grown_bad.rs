//! The NoFTL page store after a failed flash program (a block grown bad, retired, its valid
//! pages moved off): the restart must find the same layout and no stale copy from the retired
//! block (issue 32: an aged native store refused to restart after a media error, "corrupt region
//! table", and once that was fixed, a stale page came back from the retired block).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use nand::{DeviceConfig, FaultPlan, Nand};
use storage::pagestore::{PageKind, WriteHint};
use storage::{NativeConfig, NativeStore, PageStore};

/// `tiny` with 32 blocks per plane: 4 dies, 16 pages per block.
fn device() -> Nand {
    let o = ["geometry.blocks_per_plane=32".to_string()];
    Nand::new(DeviceConfig::preset("tiny", &o).unwrap()).unwrap()
}

fn cfg() -> NativeConfig {
    NativeConfig {
        log_blocks: Some(64),
        spare_factor: 0.25,
        ..NativeConfig::default()
    }
}

fn page(pid: u32, version: u32) -> Vec<u8> {
    let mut p = vec![version as u8; 4096];
    p[..4].copy_from_slice(&pid.to_le_bytes());
    p[4..8].copy_from_slice(&version.to_le_bytes());
    p
}

const HEAP: WriteHint = WriteHint {
    object: 7,
    kind: PageKind::Heap,
};

/// The version a page reads back (0: zeros, unmapped).
fn version(s: &mut NativeStore, pid: u32) -> u32 {
    let mut buf = vec![0u8; 4096];
    s.read_page(0, pid, &mut buf).unwrap();
    if buf.iter().all(|&b| b == 0) {
        0
    } else {
        assert_eq!(buf[..4], pid.to_le_bytes(), "page {pid} holds another page");
        u32::from_le_bytes(buf[4..8].try_into().unwrap())
    }
}

/// Writes `pid` with the next flash operation failing on the media: the store retires the
/// block, programs the page elsewhere and moves the block's valid pages off.
fn write_failing(s: &mut NativeStore, t: u64, pid: u32, v: u32) -> u64 {
    let nand = s.nand_mut().unwrap();
    let at = nand.ops_issued() + 1;
    nand.set_fault_plan(FaultPlan {
        fail_op: Some(at),
        ..FaultPlan::default()
    });
    let t = s.write_page(t, pid, &page(pid, v), HEAP).unwrap();
    let nand = s.nand_mut().unwrap();
    nand.set_fault_plan(FaultPlan::default());
    assert_eq!(
        s.space().counts().retired_blocks,
        1,
        "the program should have failed"
    );
    t
}

fn power_cycle(mut nand: Nand) -> Nand {
    nand.set_fault_plan(FaultPlan::default());
    nand.power_cut();
    nand.power_on();
    nand
}

/// A grown-bad block must not change the store's layout: the keys (DB pages, the region table's
/// key after them) are computed from the device at every open, from its factory-good blocks.
/// Counting the grown-bad block too shrank the DB pages at the restart, so the region table's
/// key fell on the last DB page's copy and the restart failed ("corrupt region table").
#[test]
fn a_grown_bad_block_keeps_the_layout_and_the_last_page() {
    let mut s = NativeStore::format(device(), cfg()).unwrap();
    let db_pages = s.db_pages();
    let last = (db_pages - 1) as u32;
    let mut t = s.write_page(0, last, &page(last, 1), HEAP).unwrap();
    for pid in 0..40 {
        t = s.write_page(t, pid, &page(pid, 1), HEAP).unwrap();
    }
    t = write_failing(&mut s, t, 40, 1);
    s.sync_pages(t).unwrap();
    let nand = power_cycle(s.into_nand_raw());
    let mut s = NativeStore::open(nand, cfg()).unwrap();
    assert_eq!(s.db_pages(), db_pages, "the layout changed at the restart");
    assert_eq!(version(&mut s, last), 1);
    for pid in 0..=40 {
        assert_eq!(version(&mut s, pid), 1, "page {pid}");
    }
}

/// Writes pages 0..=40 (version 1; the program of page 40 fails and retires its block),
/// rewrites them all (version 2), takes a map checkpoint and syncs: the flash as a restart
/// finds it.
fn retired_then_rewritten() -> Nand {
    let mut s = NativeStore::format(device(), cfg()).unwrap();
    let mut t = 0;
    for pid in 0..40 {
        t = s.write_page(t, pid, &page(pid, 1), HEAP).unwrap();
    }
    t = write_failing(&mut s, t, 40, 1);
    for pid in 0..=40 {
        t = s.write_page(t, pid, &page(pid, 2), HEAP).unwrap();
    }
    t = s.write_map_checkpoint(t).unwrap();
    s.sync_pages(t).unwrap();
    power_cycle(s.into_nand_raw())
}

/// A block retired before a map checkpoint keeps its (stale) pages: it is never erased again.
/// Recovery read such a block in full, as a block the checkpoint promises nothing about, and
/// its copies beat the checkpoint's entries: pages rewritten between the failure and the
/// checkpoint came back in their version from before the failure.
#[test]
fn stale_copies_in_a_block_retired_before_the_checkpoint_do_not_come_back() {
    for full in [false, true] {
        let nand = retired_then_rewritten();
        let mut s = if full {
            NativeStore::open_full_scan(nand, cfg()).unwrap()
        } else {
            NativeStore::open(nand, cfg()).unwrap()
        };
        for pid in 0..=40 {
            assert_eq!(version(&mut s, pid), 2, "page {pid} (full scan: {full})");
        }
    }
}
