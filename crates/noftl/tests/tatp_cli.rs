//! `noftl bench tatp` and `noftl compare --workload tatp` as a user runs them.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cli_support;
use cli_support::noftl;

const BENCH: [&str; 17] = [
    "bench",
    "tatp",
    "--storage",
    "native",
    "--preset",
    "tiny",
    "--op",
    "30%",
    "--scale",
    "500",
    "--terminals",
    "2",
    "--txns",
    "300",
    "--json",
    "-",
    "--check",
];

#[test]
fn bench_tatp_runs_on_native_with_and_without_regions() {
    let (ok, out, err) = noftl(&BENCH);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["workload"], "tatp");
    assert_eq!(v["finished"], 600);
    assert_eq!(v["check"], "passed");
    let tx = v["transactions"].as_array().unwrap();
    assert_eq!(tx.len(), 7);
    assert_eq!(tx[0]["name"], "GET_SUBSCRIBER_DATA");
    assert_eq!(tx[0]["success_percent"], 100.0);
    let succeeded = v["succeeded"].as_u64().unwrap();
    assert!(succeeded < 600 && succeeded > 300, "{succeeded}");
    // The same run with Subscriber and Special_Facility in a one-chip region: same transactions,
    // same outcomes (placement changes timing only).
    let mut with = BENCH.to_vec();
    with.extend(["--regions", "1"]);
    let (ok, out2, err) = noftl(&with);
    assert!(ok, "{err}");
    let w: serde_json::Value = serde_json::from_str(&out2).unwrap();
    assert_eq!(w["regions"], 1);
    assert_eq!(w["succeeded"], v["succeeded"]);
    assert_eq!(w["check"], "passed");
    // Regions are NoFTL's.
    let mut bad = BENCH.to_vec();
    bad[3] = "page";
    bad.extend(["--regions", "1"]);
    let (ok, _, err) = noftl(&bad);
    assert!(!ok);
    assert!(err.contains("native"), "{err}");
}

#[test]
fn compare_tatp_gives_the_rows_and_the_same_json_for_the_same_seed() {
    let args = [
        "compare",
        "--workload",
        "tatp",
        "--scale",
        "400",
        "--repeat",
        "1",
        "--duration",
        "100ms",
        "--json",
        "-",
        "--seed",
        "2",
    ];
    let (ok, a, err) = noftl(&args);
    assert!(ok, "{err}");
    let (_, b, _) = noftl(&args);
    assert_eq!(a, b);
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    assert_eq!(v["workload"], "tatp");
    assert_eq!(v["scale"], 400);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
    assert!(rows
        .iter()
        .all(|r| r["throughput_tps"].as_f64().unwrap() > 0.0));
}
