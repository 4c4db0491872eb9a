//! TPC-B and the crash test on the NoFTL page store (`storage::native`).
//!
//! The rule for these tests (docs/ARCHITECTURE.md, "Tests"): a test is never weakened to pass.
//! Seeds, ageing, fault kinds and bounds are not cut back until a failure stops showing; a
//! known failure stays a failing test, marked `#[ignore = "known bug: ..."]` with a doc comment
//! that says what fails and why, until the code is fixed. (Issue 32: media errors once ran on
//! the unaged device and the ageing was once capped at 90%, which hid two recovery bugs of a
//! fully written store: both fixed, and the aged tests below run again.)

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use kits::crash::{CrashOptions, Fault};
use kits::crash_native::crash_native_once;

/// What a sweep of seeds saw.
struct Sweep {
    fault_hits: u64,
    /// Faults that landed on the store's garbage collection ("program gc", "erase gc", ...):
    /// only an aged device collects garbage during the workload.
    gc_hits: u64,
    recovery_hits: u64,
    verified: u64,
    bad: Vec<String>,
}

fn sweep(seeds: std::ops::Range<u64>, o: &CrashOptions) -> Sweep {
    let mut s = Sweep {
        fault_hits: 0,
        gc_hits: 0,
        recovery_hits: 0,
        verified: 0,
        bad: Vec::new(),
    };
    for seed in seeds {
        let out = crash_native_once(seed, o).unwrap();
        s.fault_hits += u64::from(out.fault_hit);
        s.recovery_hits += u64::from(out.recovery_cut_hit);
        s.gc_hits += u64::from(
            out.fault_landed_on
                .as_deref()
                .is_some_and(|op| op.ends_with(" gc")),
        );
        if out.verified() {
            s.verified += 1;
        } else {
            s.bad.push(format!(
                "seed {seed} (fault at op {}, on {:?}; second cut on {:?}): {:?}",
                out.fault_at_op, out.fault_landed_on, out.recovery_cut_landed_on, out.violations
            ));
        }
    }
    s
}

#[test]
fn power_cuts_at_random_flash_operations_recover_every_acknowledged_commit_on_native() {
    let s = sweep(0..40, &CrashOptions::default());
    assert!(s.bad.is_empty(), "{:#?}", s.bad);
    // Drawn from a dry run's count plus 5%: nearly every cut falls inside the workload.
    assert!(
        s.fault_hits >= 34,
        "only {} of 40 cuts fell inside the workload",
        s.fault_hits
    );
}

#[test]
fn power_cuts_during_recovery_on_native_recover_again_and_verify() {
    let o = CrashOptions {
        crash_during_recovery: true,
        ..CrashOptions::default()
    };
    let s = sweep(400..440, &o);
    assert!(s.bad.is_empty(), "{:#?}", s.bad);
    assert_eq!(s.verified, 40);
    assert!(
        s.recovery_hits >= 30,
        "only {} of 40 second cuts fell inside the restart",
        s.recovery_hits
    );
    assert!(
        s.fault_hits >= 34,
        "only {} of 40 first cuts hit",
        s.fault_hits
    );
}

#[test]
fn eight_kib_pages_torn_across_flash_pages_recover_on_native() {
    let o = CrashOptions {
        page_bytes: 8192,
        ..CrashOptions::default()
    };
    let s = sweep(100..120, &o);
    assert!(s.bad.is_empty(), "{:#?}", s.bad);
}

#[test]
fn failed_flash_operations_are_reported_and_the_database_recovers_on_native() {
    let o = CrashOptions {
        fault: Fault::IoError,
        ..CrashOptions::default()
    };
    let s = sweep(200..220, &o);
    assert!(s.bad.is_empty(), "{:#?}", s.bad);
}

/// Seed 2205 once drew its second cut onto the restore's moves off a block a failed program
/// had retired, where a failed restore keeps the flash: the cut is now drawn before the restore.
#[test]
fn failed_flash_operations_then_power_cuts_during_recovery_recover_on_native() {
    let o = CrashOptions {
        fault: Fault::IoError,
        crash_during_recovery: true,
        ..CrashOptions::default()
    };
    let s = sweep(2200..2210, &o);
    assert!(s.bad.is_empty(), "{:#?}", s.bad);
    assert!(
        s.recovery_hits >= 7,
        "only {} of 10 second cuts fell inside the restart",
        s.recovery_hits
    );
}

#[test]
fn the_canary_is_caught_on_native() {
    let o = CrashOptions {
        unsafe_ack_before_force: true,
        ..CrashOptions::default()
    };
    let s = sweep(300..310, &o);
    assert!(
        s.verified < 10,
        "the canary (ack before force) passed every seed"
    );
}

#[test]
fn tpcb_on_native_collects_garbage_and_survives_a_clean_restart() {
    use kits::crash_native::{crash_device, crash_store_config};
    use kits::tpcb::{self, TpcbTerminal};
    use storage::sched::{run_virtual, VirtualOptions};
    use storage::{Engine, EngineConfig, NativeStore};

    let o = CrashOptions::default();
    let store = NativeStore::format(crash_device(1).unwrap(), crash_store_config(&o)).unwrap();
    let ecfg = EngineConfig {
        buffer_frames: 24,
        ..EngineConfig::default()
    };
    let mut e = Engine::create(Box::new(store), ecfg.clone()).unwrap();
    let h = tpcb::load(&mut e, o.tpcb, |_| {}).unwrap();
    let mut terms: Vec<TpcbTerminal> = (0..4)
        .map(|i| TpcbTerminal::new(i, h, o.tpcb, 7, Some(300)))
        .collect();
    let t0 = e.now();
    run_virtual(&mut e, &mut terms, t0, VirtualOptions::default()).unwrap();
    let rep = e.store().device_report().unwrap();
    assert!(
        rep.gc.erases > 10,
        "GC should run on the small device ({:?})",
        rep.gc
    );
    assert!(rep.controller_busy_us > 0.0, "host mapping time is charged");
    assert!(tpcb::check(&mut e, o.tpcb).unwrap().passed());
    let nand = e.shutdown().unwrap().into_nand().unwrap();
    let mut e = Engine::open(
        Box::new(NativeStore::open(nand, crash_store_config(&o)).unwrap()),
        ecfg,
    )
    .unwrap();
    assert!(tpcb::check(&mut e, o.tpcb).unwrap().passed());
}

/// Media errors on the device aged as the power-cut runs age it (every DB page written, then
/// rewritten until the store collects garbage). Issue 32: 12 of these 20 seeds once failed
/// their restart with "corrupt region table" (the store's layout counted grown-bad blocks, so
/// a failed program shifted every key at the restart); with that fixed, seed 208 read a stale
/// page from a block retired before the last map checkpoint. The GC landings show the device
/// is aged (no fault lands on GC without ageing).
#[test]
fn aged_native_store_recovers_after_failed_flash_operations() {
    let o = CrashOptions {
        fault: Fault::IoError,
        ..CrashOptions::default()
    };
    let s = sweep(200..260, &o);
    assert!(s.bad.is_empty(), "{:#?}", s.bad);
    assert_eq!(s.verified, 60);
    assert!(
        s.gc_hits > 0,
        "no fault of 60 landed on GC: is the device aged?"
    );
}

/// The long run of the test above: 1,000 other seeds, all verified (18-26 s in a release build
/// on a shared 2-core machine, 2026; about as long in the test profile). Run it with
/// `cargo test --release -p kits --test native_crash -- --ignored aged_native_store_1000`.
#[test]
#[ignore = "long: 1,000 seeds; run in release with --ignored"]
fn aged_native_store_1000_seeds_recover_after_failed_flash_operations() {
    let o = CrashOptions {
        fault: Fault::IoError,
        ..CrashOptions::default()
    };
    let s = sweep(10_000..11_000, &o);
    assert!(s.bad.is_empty(), "{:#?}", s.bad);
    assert_eq!(s.verified, 1_000);
    assert!(
        s.gc_hits > 0,
        "no fault of 1,000 landed on GC: is the device aged?"
    );
}

/// A failed upper-page program (`Fault::PairedProgram`) on the aged native store on MLC chips
/// (`MLC4K`, docs/PERFORMANCE.md section 7): the flash space rewrites the torn lower pages from
/// its copies of incomplete word lines; the engine sees no error, and every acknowledged commit
/// survives the power cycle after. Before that rule the restart of a debug build panicked on a
/// stale page ("page LSN only grows") within 30 seeds.
#[test]
fn aged_native_store_on_mlc_loses_no_commit_when_an_upper_page_program_fails() {
    on_aged_mlc(Fault::PairedProgram, 7000..7030);
}

/// `fault` on the aged native store on MLC chips (`MLC4K`) over `seeds`: every round verified
/// and nine in ten faults fired.
fn on_aged_mlc(fault: Fault, seeds: std::ops::Range<u64>) {
    let n = seeds.end - seeds.start;
    let device = ftl::testkit::paired_device_config("mlc", &[]);
    let o = CrashOptions {
        fault,
        medium: kits::crash::Medium::Native(kits::crash::NativeDevice {
            device: Some(device),
            ..Default::default()
        }),
        ..CrashOptions::default()
    };
    let s = sweep(seeds, &o);
    assert!(s.bad.is_empty(), "{:#?}", s.bad);
    assert_eq!(s.verified, n);
    assert!(
        s.fault_hits * 10 >= n * 9,
        "only {} of {n} fired",
        s.fault_hits
    );
}

/// A failed upper-page program and then a power cut (`Fault::Mixed`) on the aged native store on
/// MLC chips: the cut lands while the flash space rewrites the torn lower pages or after;
/// recovery brings back every acknowledged commit.
#[test]
fn aged_native_store_on_mlc_loses_no_commit_when_power_fails_after_an_upper_page_program_fails() {
    on_aged_mlc(Fault::Mixed, 7100..7120);
}
