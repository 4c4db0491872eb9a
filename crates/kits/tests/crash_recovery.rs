//! The crash test: seeded power cuts, I/O errors and torn pages during TPC-B, restart from the
//! device alone, verification against the model; and the canary that must be caught.

use kits::crash::{crash_once, CrashOptions, Fault};

fn sweep(seeds: std::ops::Range<u64>, o: &CrashOptions) -> (u64, Vec<String>) {
    let mut hit = 0;
    let mut failures = Vec::new();
    for s in seeds {
        let out = crash_once(s, o).unwrap_or_else(|e| panic!("seed {s}: the harness failed: {e}"));
        hit += u64::from(out.fault_hit);
        if !out.verified() {
            failures.push(format!("seed {s}: {:?}", out.violations));
        }
    }
    (hit, failures)
}

#[test]
fn power_cuts_at_random_operations_recover_every_acknowledged_commit() {
    let (hit, failures) = sweep(0..200, &CrashOptions::default());
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(
        hit > 150,
        "the cut fell inside the workload for only {hit} of 200 seeds"
    );
}

#[test]
fn a_crash_during_recovery_recovers_again() {
    let o = CrashOptions {
        crash_during_recovery: true,
        ..CrashOptions::default()
    };
    let (_, failures) = sweep(1000..1060, &o);
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn torn_multi_sector_pages_are_repaired_from_page_images() {
    // 8 KiB pages span two device pages, which persist independently: torn DB pages.
    let o = CrashOptions {
        page_bytes: 8192,
        ..CrashOptions::default()
    };
    let (_, failures) = sweep(2000..2060, &o);
    assert!(failures.is_empty(), "{failures:#?}");
    // Pages torn inside a 4 KiB device page (sector granularity), with full-page writes.
    let o = CrashOptions {
        tear_sectors: true,
        ..CrashOptions::default()
    };
    let (_, failures) = sweep(3000..3060, &o);
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn injected_io_errors_are_reported_and_leave_a_recoverable_database() {
    let o = CrashOptions {
        fault: Fault::IoError,
        ..CrashOptions::default()
    };
    let mut reported = 0;
    for s in 4000..4060 {
        let out = crash_once(s, &o).unwrap();
        assert!(out.verified(), "seed {s}: {:?}", out.violations);
        if out.fault_hit {
            assert!(out.error_reported.is_some());
            reported += 1;
        }
    }
    assert!(reported > 30, "only {reported} runs hit the injected error");
}

#[test]
fn the_canary_that_acknowledges_before_the_force_is_caught() {
    let o = CrashOptions {
        unsafe_ack_before_force: true,
        ..CrashOptions::default()
    };
    let (_, failures) = sweep(0..60, &o);
    assert!(
        failures.len() > 5,
        "the crash test missed a broken durability rule ({} failures)",
        failures.len()
    );
    assert!(
        failures.iter().any(|f| f.contains("acknowledged commit")),
        "{failures:#?}"
    );
}
