//! `noftl crashtest --workload tpcc`: TPC-C power cuts (and media errors) at seeded device
//! operations on native, the FTLs and the crash disk, recovered from the device alone and checked
//! (acknowledged New-Orders present with their O_OL_CNT, nothing unrequested, clause 3.3.2, the
//! engine's structural check); options that make no sense refused before any work.

mod cli_support;
use cli_support::{noftl, noftl_json};

fn tpcc(storage: &str, seeds: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "crashtest",
        "--workload",
        "tpcc",
        "--storage",
        storage,
        "--seeds",
        seeds,
        "--json",
    ];
    args.extend_from_slice(extra);
    noftl_json(&args)
}

/// The bar: 100 of 100 seeds verified on native, in CI time (about 15 s in the test
/// profile on 2 cores).
#[test]
fn tpcc_crashtest_on_native_verifies_100_of_100_seeds() {
    let v = tpcc("native", "100", &[]);
    assert_eq!(v["workload"], "tpcc");
    assert_eq!(v["storage"], "native");
    assert_eq!(v["seeds"], 100);
    assert_eq!(v["verified"], 100, "{v}");
    // Drawn from a dry run's count plus 5%: nearly every cut falls inside the workload, and
    // each one that does reaches the engine as an error.
    let inside = v["faults_inside_workload"].as_u64().unwrap_or(0);
    assert!(inside >= 90, "only {inside} of 100 cuts inside: {v}");
    assert_eq!(v["errors_reported"], inside, "{v}");
}

#[test]
fn tpcc_crashtest_on_every_ftl_verifies_and_names_where_the_cuts_landed() {
    for ftl in ["page", "dftl", "fast", "block"] {
        let v = tpcc(ftl, "5", &["--first-seed", "7000"]);
        assert_eq!(v["storage"], ftl);
        assert_eq!(v["verified"], 5, "{ftl}: {v}");
        let landed: u64 = v["faults_landed_on"]
            .as_object()
            .map(|m| m.values().filter_map(serde_json::Value::as_u64).sum())
            .unwrap_or(0);
        assert_eq!(
            landed, v["faults_inside_workload"],
            "{ftl}: every cut inside the workload is named: {v}"
        );
    }
}

#[test]
fn tpcc_crashtest_cuts_the_restart_again_on_flash_and_the_crash_disk() {
    for storage in ["dftl", "memdisk"] {
        let v = tpcc(storage, "4", &["--recovery-crash", "--first-seed", "7100"]);
        assert_eq!(v["verified"], 4, "{storage}: {v}");
        assert!(
            v["recovery_cuts_inside_restart"].as_u64().unwrap_or(0) >= 3,
            "{storage}: the second cut is drawn from a counted restart: {v}"
        );
    }
}

#[test]
fn tpcc_crashtest_with_media_errors_on_flash_verifies() {
    let v = tpcc("page", "4", &["--fault", "io", "--first-seed", "7200"]);
    assert_eq!(v["fault"], "io");
    assert_eq!(v["verified"], 4, "{v}");
}

/// The canary (commits acknowledged before the log force) must fail the TPC-C check: the
/// checker has teeth.
#[test]
fn the_tpcc_crashtest_catches_the_canary() {
    let (ok, out, _) = noftl(&[
        "crashtest",
        "--workload",
        "tpcc",
        "--storage",
        "native",
        "--canary",
        "--seeds",
        "10",
        "--json",
    ]);
    assert!(!ok, "the canary passed every seed: {out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let failures = v["failures"].as_array().cloned().unwrap_or_default();
    assert!(failures.len() >= 2, "{v}");
    assert!(
        failures.iter().any(|f| f["violations"]
            .to_string()
            .contains("acknowledged New-Order")),
        "{v}"
    );
}

#[test]
fn tpcc_crashtest_refuses_what_makes_no_sense_before_any_work() {
    for (args, want) in [
        (
            &["--storage", "page", "--torn"][..],
            "--torn is for the crash disk",
        ),
        (
            &["--storage", "native", "--torn"][..],
            "--torn is for the crash disk",
        ),
        (&["--storage", "amf"][..], "amf"),
        (&["--storage", "nvme"][..], "not 'nvme'"),
        (
            &["--fault", "fire"][..],
            "--fault is power, io, paired or mixed",
        ),
        (
            &["--page-size", "5000"][..],
            "--page-size is 4096, 8192 or 16384",
        ),
    ] {
        let mut all = vec!["crashtest", "--workload", "tpcc", "--seeds", "100000"];
        all.extend_from_slice(args);
        let t = std::time::Instant::now();
        let (ok, _, err) = noftl(&all);
        assert!(!ok, "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
        // 100,000 seeds would take hours: refused before the first.
        assert!(
            t.elapsed().as_secs() < 10,
            "{args:?} was not refused up front"
        );
    }
    let (ok, _, err) = noftl(&["crashtest", "--workload", "tatp", "--seeds", "1"]);
    assert!(!ok);
    assert!(err.contains("--workload tpcb, tpcc or iaa"), "{err}");
}
