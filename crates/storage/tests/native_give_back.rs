//! The give-back seams of a restart on the NoFTL page store: a power cut during
//! `NativeStore::open_or_give_back` or `Engine::open_or_give_back` hands the flash back, and
//! after a power cycle the next open finds everything.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use nand::{DeviceConfig, FaultPlan, Nand};
use storage::pagestore::{PageKind, WriteHint};
use storage::{Engine, EngineConfig, NativeConfig, NativeStore, PageStore};

fn tiny() -> Nand {
    Nand::new(DeviceConfig::preset("tiny", &[]).unwrap()).unwrap()
}

/// A 256-block log: the engine keeps 64 blocks for rollbacks.
fn cfg() -> NativeConfig {
    NativeConfig {
        log_blocks: Some(256),
        spare_factor: 0.25,
        ..NativeConfig::default()
    }
}

const HEAP: WriteHint = WriteHint {
    object: 7,
    kind: PageKind::Heap,
};

/// Power off and on, with the cut armed `after` operations from now.
fn power_cycle_and_cut_after(nand: &mut Nand, after: Option<u64>) {
    nand.set_fault_plan(FaultPlan::default());
    nand.power_cut();
    nand.power_on();
    nand.set_fault_plan(FaultPlan {
        cut_at_op: after.map(|n| nand.ops_issued() + n),
        ..FaultPlan::default()
    });
}

#[test]
fn a_power_cut_during_the_oob_scan_gives_the_flash_back_and_the_next_open_finds_every_page() {
    let mut s = NativeStore::format(tiny(), cfg()).unwrap();
    let mut t = 0;
    for pid in 0..40u32 {
        t = s.write_page(t, pid, &vec![pid as u8; 4096], HEAP).unwrap();
    }
    let mut nand = Box::new(s).into_nand().unwrap();
    power_cycle_and_cut_after(&mut nand, Some(5));
    let Err((_, back)) = NativeStore::open_or_give_back(nand, cfg()) else {
        panic!("the open survived a power cut during its scan");
    };
    let mut nand = *back;
    power_cycle_and_cut_after(&mut nand, None);
    let mut s = NativeStore::open(nand, cfg()).unwrap();
    let mut buf = vec![0u8; 4096];
    for pid in 0..40u32 {
        s.read_page(t, pid, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == pid as u8), "page {pid}");
    }
}

#[test]
fn a_power_cut_during_the_engine_restart_gives_the_store_back_and_the_next_restart_recovers() {
    let ecfg = EngineConfig {
        buffer_frames: 16,
        ..EngineConfig::default()
    };
    let store = NativeStore::format(tiny(), cfg()).unwrap();
    let e = Engine::create(Box::new(store), ecfg.clone()).unwrap();
    let mut nand = e.into_store().into_nand().unwrap();
    power_cycle_and_cut_after(&mut nand, None);
    let mut store = NativeStore::open(nand, cfg()).unwrap();
    // The cut falls on the restart's third operation: the master record's write, after reading
    // both slots.
    let dev = store.nand_mut().unwrap();
    let at = dev.ops_issued() + 3;
    dev.set_fault_plan(FaultPlan {
        cut_at_op: Some(at),
        ..FaultPlan::default()
    });
    let Err((_, store)) = Engine::open_or_give_back(Box::new(store), ecfg.clone()) else {
        panic!("the restart survived a power cut");
    };
    let mut nand = store.into_nand().unwrap();
    assert_eq!(nand.ops_issued(), at, "the cut hit the restart");
    power_cycle_and_cut_after(&mut nand, None);
    let store = NativeStore::open(nand, cfg()).unwrap();
    let mut e = Engine::open(Box::new(store), ecfg).unwrap();
    e.checkpoint().unwrap();
}
