//! The `bench tpcb` and `crashtest` verbs as a user runs them: stable JSON fields, determinism,
//! the check, clear errors.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cli_support;
use cli_support::noftl;

const BENCH: [&str; 17] = [
    "bench",
    "tpcb",
    "--storage",
    "memdisk",
    "--preset",
    "tiny",
    "--scale",
    "2",
    "--accounts-per-branch",
    "2000",
    "--terminals",
    "4",
    "--txns",
    "150",
    "--json",
    "-",
    "--check",
];

/// Runs `args` twice; both must succeed with byte-identical standard output (JSON), returned
/// parsed.
fn same_json_twice(args: &[&str]) -> serde_json::Value {
    let (ok, a, err) = noftl(args);
    assert!(ok, "{err}");
    let (_, b, _) = noftl(args);
    assert_eq!(a, b, "the same seed must give the same JSON: {args:?}");
    serde_json::from_str(&a).unwrap()
}

#[test]
fn bench_tpcb_in_virtual_time_gives_byte_identical_json_with_the_stable_fields() {
    let v = same_json_twice(&BENCH);
    for f in [
        "workload",
        "storage",
        "scale",
        "terminals",
        "seed",
        "committed",
        "aborted",
        "throughput_tps",
        "virtual_seconds",
        "check",
    ] {
        assert!(v.get(f).is_some(), "missing {f}");
    }
    for f in ["mean", "p50", "p95", "p99", "max"] {
        assert!(v["latency_us"].get(f).is_some(), "missing latency_us.{f}");
    }
    for f in [
        "flash_reads",
        "flash_programs",
        "flash_erases",
        "gc_migrations",
        "energy_joules",
    ] {
        assert!(v["per_txn"].get(f).is_some(), "missing per_txn.{f}");
    }
    for f in ["hits", "misses", "evictions", "writebacks"] {
        assert!(v["buffer"].get(f).is_some(), "missing buffer.{f}");
    }
    assert_eq!(v["committed"], 600);
    assert_eq!(v["check"], "passed");
    assert_eq!(v["consistency"]["status"], "ok", "{}", v["consistency"]);
    let mut other = BENCH;
    other[15] = "-";
    let (_, c, _) = noftl(&[&other[..], &["--seed", "2"]].concat());
    assert_ne!(
        serde_json::from_str::<serde_json::Value>(&c).unwrap()["latency_us"],
        v["latency_us"]
    );
}

#[test]
fn bench_tpcb_runs_on_a_plain_file_and_reuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let p = path.to_str().unwrap();
    let args = [
        "bench",
        "tpcb",
        "--storage",
        "file",
        "--path",
        p,
        "--preset",
        "tiny",
        "--scale",
        "1",
        "--accounts-per-branch",
        "1000",
        "--txns",
        "50",
        "--check",
    ];
    let (ok, out, err) = noftl(&args);
    assert!(ok, "{err}");
    assert!(out.contains("check: passed"), "{out}");
    let (ok, out, err) = noftl(&args);
    assert!(ok && err.contains("reusing"), "{out}{err}");
    assert!(out.contains("check: passed"), "{out}");
}

#[test]
fn bench_errors_are_clear() {
    let (ok, _, err) = noftl(&["bench", "tpcb", "--scale", "1"]);
    assert!(!ok && err.contains("--txns"), "{err}");
    let (ok, _, err) = noftl(&["bench", "tpcb", "--txns", "5", "--clock", "sundial"]);
    assert!(
        !ok && err.contains("possible values: virtual, real, none"),
        "{err}"
    );
    let (ok, _, err) = noftl(&["bench", "tpcb", "--txns", "5", "--duration", "3 parsecs"]);
    assert!(!ok, "{err}");
}

#[test]
fn crashtest_verifies_every_seed_and_the_canary_fails() {
    let (ok, out, err) = noftl(&[
        "crashtest",
        "--workload",
        "tpcb",
        "--storage",
        "memdisk",
        "--seeds",
        "25",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["seeds"], 25);
    assert_eq!(v["verified"], 25);
    assert_eq!(v["failures"].as_array().map(Vec::len), Some(0));
    let (ok, out, _) = noftl(&["crashtest", "--seeds", "20", "--canary", "--json"]);
    assert!(!ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["failures"]
        .as_array()
        .is_some_and(|f| !f.is_empty() && f[0].get("seed").is_some()));
}

const BENCH_PAGE: [&str; 17] = [
    "bench",
    "tpcb",
    "--storage",
    "page",
    "--preset",
    "tiny",
    "--scale",
    "1",
    "--accounts-per-branch",
    "1000",
    "--terminals",
    "2",
    "--txns",
    "60",
    "--json",
    "-",
    "--check",
];

#[test]
fn bench_tpcb_on_the_page_ftl_in_virtual_time_gives_byte_identical_json() {
    let v = same_json_twice(&BENCH_PAGE);
    assert_eq!(v["storage"], "page");
    assert_eq!(v["committed"], 120);
    assert_eq!(v["check"], "passed");
    assert!(
        v["per_txn"]["flash_programs"]
            .as_f64()
            .is_some_and(|p| p > 1.0),
        "{v}"
    );
}

#[test]
fn bench_tpcb_runs_in_real_time_on_every_ftl_the_engine_can_use() {
    for ftl in ["page", "dftl", "fast", "block"] {
        let args = [
            "bench",
            "tpcb",
            "--storage",
            ftl,
            "--preset",
            "tiny",
            "--scale",
            "1",
            "--accounts-per-branch",
            "500",
            "--terminals",
            "2",
            "--txns",
            "20",
            "--clock",
            "real",
            "--json",
            "-",
            "--check",
        ];
        let (ok, out, err) = noftl(&args);
        assert!(ok, "{ftl}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["committed"], 40, "{ftl}");
        assert_eq!(v["check"], "passed", "{ftl}");
        // Wall-clock latencies: shorter than the whole run.
        assert!(
            v["latency_us"]["max"].as_f64().unwrap()
                <= v["committed"].as_f64().unwrap() / v["throughput_tps"].as_f64().unwrap() * 1e6,
            "{ftl}: {out}"
        );
    }
}

#[test]
fn bench_tpcb_on_dftl_orig_reports_its_host_cpu_per_transaction() {
    let run = |storage: &str| {
        let mut args = BENCH.to_vec();
        args[3] = storage;
        args.extend(["--cache", "2%"]);
        same_json_twice(&args)
    };
    let v = run("dftl-orig");
    assert_eq!(v["storage"], "dftl-orig-2%");
    assert_eq!(v["check"], "passed", "{v}");
    let p = &v["per_txn"];
    let host_us = p["host_cpu_us"].as_f64().unwrap();
    let share = p["host_cpu_share"].as_f64().unwrap();
    assert!(host_us > 0.0 && share > 0.0 && share < 1.0, "{p}");
    // Overwrites mark their old copies in the OOB.
    assert!(p["flash_oob_writes"].as_f64().unwrap() > 0.0, "{p}");
    // Our DFTL's mapping work runs on the device's controller, not the host.
    let v = run("dftl");
    assert_eq!(v["per_txn"]["host_cpu_us"], 0.0);
    assert_eq!(v["per_txn"]["flash_oob_writes"], 0.0);
}

#[test]
fn the_engine_refuses_amf_up_front_with_the_reason() {
    let (ok, _, err) = noftl(&[
        "bench",
        "tpcb",
        "--storage",
        "amf",
        "--preset",
        "tiny",
        "--txns",
        "5",
    ]);
    assert!(
        !ok && err.contains("amf") && err.contains("in place") && !err.contains("loading"),
        "{err}"
    );
    let (ok, _, err) = noftl(&["crashtest", "--storage", "amf", "--seeds", "1"]);
    assert!(!ok && err.contains("amf"), "{err}");
}

#[test]
fn crashtest_runs_on_flash_ftls() {
    let (ok, out, err) = noftl(&[
        "crashtest",
        "--storage",
        "dftl",
        "--seeds",
        "6",
        "--recovery-crash",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["storage"], "dftl");
    assert_eq!(v["verified"], 6);
    assert!(
        v["faults_landed_on"]
            .as_object()
            .is_some_and(|m| !m.is_empty()),
        "{out}"
    );
    let (ok, out, _) = noftl(&[
        "crashtest",
        "--storage",
        "page",
        "--seeds",
        "12",
        "--canary",
        "--json",
    ]);
    assert!(!ok, "the canary must fail on flash too");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["failures"].as_array().is_some_and(|f| !f.is_empty()
            && f[0].get("seed").is_some()
            && f[0].get("violations").is_some()),
        "{out}"
    );
    for ftl in ["fast", "block"] {
        let (ok, out, err) = noftl(&["crashtest", "--storage", ftl, "--seeds", "2", "--json"]);
        assert!(ok, "{ftl}: {out}{err}");
    }
    let (ok, _, err) = noftl(&["crashtest", "--storage", "page", "--seeds", "1", "--torn"]);
    assert!(!ok && err.contains("crash disk"), "{err}");
}
