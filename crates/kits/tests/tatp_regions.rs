//! The IPA Table I set-up on the native store: Subscriber and Special_Facility in a region of
//! their own, the other tables in the default region; placement holds through a TATP run and a
//! restart, and the run's outcomes do not depend on placement.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use kits::tatp::{self, TatpConfig, TatpTerminal};
use nand::{DeviceConfig, Nand};
use storage::sched::{run_virtual, VirtualOptions};
use storage::{Engine, EngineConfig, NativeConfig, NativeStore};

fn cfg() -> NativeConfig {
    NativeConfig {
        log_blocks: Some(512),
        spare_factor: 0.25,
        ..NativeConfig::default()
    }
}

fn store() -> NativeStore {
    // 2 channels x 2 chips, 128 blocks of 16 pages per die.
    let o = ["geometry.blocks_per_plane=64".to_string()];
    NativeStore::format(
        Nand::new(DeviceConfig::preset("tiny", &o).unwrap()).unwrap(),
        cfg(),
    )
    .unwrap()
}

fn pages_of(e: &mut Engine, table: &str) -> Vec<u32> {
    let t = e.table(table).unwrap().id;
    let txn = e.begin().unwrap();
    let mut p: Vec<u32> = e
        .scan_table(txn, t)
        .unwrap()
        .iter()
        .map(|(rid, _)| rid.page)
        .collect();
    e.commit(txn).unwrap();
    p.sort_unstable();
    p.dedup();
    p
}

/// Runs TATP; returns the successes per type and, per table, whether its pages are on the
/// region's dies (after a restart from the flash).
fn run(ddl: &str) -> (Vec<u64>, Vec<(String, bool, bool)>) {
    let mut e = Engine::create(
        Box::new(store()),
        EngineConfig {
            buffer_frames: 64,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let c = TatpConfig { subscribers: 600 };
    let h = tatp::load(&mut e, c, ddl, 4, |_| {}).unwrap();
    let mut terms: Vec<TatpTerminal> = (0..2)
        .map(|i| TatpTerminal::new(i, h, c, 4, Some(1500)))
        .collect();
    let start = e.now();
    run_virtual(&mut e, &mut terms, start, VirtualOptions::default()).unwrap();
    let ok: Vec<u64> = (0..7)
        .map(|k| terms.iter().map(|t| t.outcomes[k].succeeded).sum())
        .collect();
    e.checkpoint().unwrap();
    let tables = [
        "subscriber",
        "special_facility",
        "access_info",
        "call_forwarding",
    ];
    let pages: Vec<(String, Vec<u32>)> = tables
        .iter()
        .map(|t| (t.to_string(), pages_of(&mut e, t)))
        .collect();
    let s = NativeStore::open(e.shutdown().unwrap().into_nand().unwrap(), cfg()).unwrap();
    let dies: Vec<u32> = s
        .region("rg_tatp_hot")
        .map(|(_, d)| d.to_vec())
        .unwrap_or_default();
    let g = s.space().geometry().clone();
    let on = |p: u32| dies.contains(&g.die_of_block(g.block_of(s.location(p).unwrap())).0);
    let placed = pages
        .into_iter()
        .map(|(t, ps)| (t, ps.iter().all(|&p| on(p)), ps.iter().any(|&p| on(p))))
        .collect();
    // The restarted engine finds the same database.
    let mut e = Engine::open(Box::new(s), EngineConfig::default()).unwrap();
    assert!(tatp::check(&mut e, c).unwrap().passed());
    (ok, placed)
}

#[test]
fn subscriber_and_special_facility_live_in_their_region() {
    let (ok_regions, placed) = run(&tatp::regions_ddl(1, 20, ""));
    for (t, all, any) in &placed {
        if t == "subscriber" || t == "special_facility" {
            assert!(*all, "{t}: every page on the region's die");
        } else {
            assert!(!*any, "{t}: no page on the region's die");
        }
    }
    let (ok_plain, placed) = run(tatp::DDL);
    assert!(
        placed.iter().all(|(_, _, any)| !any),
        "no region, no region dies"
    );
    assert_eq!(
        ok_regions, ok_plain,
        "placement changes timing, not outcomes"
    );
}
