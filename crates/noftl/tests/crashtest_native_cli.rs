//! `noftl crashtest --storage native`: power cuts at random flash operations under the NoFTL page
//! store, recovered from the flash alone and verified.

mod cli_support;
use cli_support::{noftl, noftl_json};

#[test]
fn crashtest_on_native_verifies_every_recovery() {
    let v = noftl_json(&[
        "crashtest",
        "--workload",
        "tpcb",
        "--storage",
        "native",
        "--seeds",
        "8",
        "--json",
    ]);
    assert_eq!(v["storage"], "native");
    assert_eq!(v["seeds"], 8);
    assert_eq!(v["verified"], 8, "{v}");
    assert!(
        v["faults_inside_workload"].as_u64().unwrap_or(0) > 0,
        "some cuts must land inside the workload: {v}"
    );
}

#[test]
fn crashtest_on_native_cuts_power_again_during_recovery_and_verifies() {
    let v = noftl_json(&[
        "crashtest",
        "--workload",
        "tpcb",
        "--storage",
        "native",
        "--recovery-crash",
        "--seeds",
        "6",
        "--json",
    ]);
    assert_eq!(v["verified"], 6, "{v}");
    assert!(
        v["recovery_cuts_inside_restart"].as_u64().unwrap_or(0) > 0,
        "some second cuts must land inside the restart: {v}"
    );
}

#[test]
fn crashtest_options_native_cannot_honour_are_refused() {
    let (ok, _, err) = noftl(&[
        "crashtest",
        "--workload",
        "tpcb",
        "--storage",
        "native",
        "--torn",
        "--seeds",
        "1",
    ]);
    assert!(!ok);
    assert!(err.contains("--torn is for the crash disk"), "{err}");
}

#[test]
fn compare_paper_refuses_workloads_the_noftl_paper_gives_no_scales_for() {
    for args in [
        &["compare", "--paper", "--workload", "tatp"][..],
        &["compare", "--paper", "--scale", "3"][..],
    ] {
        let (ok, _, err) = noftl(args);
        assert!(!ok, "{args:?}");
        assert!(
            err.contains("--paper") || err.contains("cannot be used with"),
            "{args:?}: {err}"
        );
    }
}

/// Issue 16, item 8: the native harness never aged its device, so of 2,000 cuts not one landed
/// on a GC program, GC read or erase. Aged now, as the FTL harness ages its device, some of a
/// few dozen cuts land on GC, for TPC-B and TPC-C alike, and every recovery still verifies.
#[test]
fn native_crash_cuts_land_on_garbage_collection_of_the_aged_device() {
    for (workload, seeds) in [("tpcb", "40"), ("tpcc", "30")] {
        let v = noftl_json(&[
            "crashtest",
            "--workload",
            workload,
            "--storage",
            "native",
            "--seeds",
            seeds,
            "--json",
        ]);
        assert_eq!(v["verified"], v["seeds"], "{v}");
        let landed = v["faults_landed_on"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let on_gc: u64 = landed
            .iter()
            .filter(|(op, _)| op.ends_with(" gc"))
            .map(|(_, n)| n.as_u64().unwrap_or(0))
            .sum();
        assert!(on_gc > 0, "{workload}: no cut landed on GC: {landed:?}");
    }
}

/// Issue 32: `--fault io` on native ran on the unaged device, so no user could reach a failed
/// flash operation on a fully written store (where the restart once failed with "corrupt region
/// table"). It ages the device as the power-cut runs do, regions included: some faults land on
/// the store's GC, and every recovery verifies.
#[test]
fn native_media_errors_run_on_the_aged_device_with_and_without_a_log_region() {
    let log_region = [
        "--log-region",
        "MAX_CHIPS=1",
        "--set",
        "geometry.blocks_per_plane=16",
    ];
    for extra in [&[][..], &log_region[..]] {
        let mut args = vec![
            "crashtest",
            "--workload",
            "tpcb",
            "--storage",
            "native",
            "--fault",
            "io",
            "--seeds",
            "40",
            "--json",
        ];
        args.extend_from_slice(extra);
        let v = noftl_json(&args);
        assert_eq!(v["verified"], 40, "{extra:?}: {v}");
        let landed = v["faults_landed_on"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let on_gc: u64 = landed
            .iter()
            .filter(|(op, _)| op.ends_with(" gc"))
            .map(|(_, n)| n.as_u64().unwrap_or(0))
            .sum();
        assert!(on_gc > 0, "{extra:?}: no fault landed on GC: {landed:?}");
    }
}
