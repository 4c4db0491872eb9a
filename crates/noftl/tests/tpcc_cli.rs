//! `noftl bench tpcc` and `noftl compare --workload tpcc` as a user runs them (REDUCED
//! populations, labelled as such by the commands, so that the suite stays fast).

mod cli_support;
use cli_support::noftl;

#[test]
fn bench_tpcc_runs_on_native_reports_notpm_and_passes_the_check() {
    let args = [
        "bench",
        "tpcc",
        "--storage",
        "native",
        "--preset",
        "tiny",
        "--op",
        "30%",
        "--items",
        "1000",
        "--customers",
        "60",
        "--terminals",
        "2",
        "--txns",
        "60",
        "--json",
        "-",
        "--check",
    ];
    let (ok, out, err) = noftl(&args);
    assert!(ok, "{err}");
    assert!(
        err.contains("REDUCED"),
        "a reduced population is labelled: {err}"
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["workload"], "tpcc");
    assert_eq!(v["storage"], "native");
    assert_eq!(v["check"], "passed");
    assert_eq!(v["reduced"], true);
    let m = &v["mix"];
    let done: u64 = [
        "new_order",
        "payment",
        "order_status",
        "delivery",
        "stock_level",
        "new_order_rollbacks",
    ]
    .iter()
    .map(|k| m[*k].as_u64().unwrap())
    .sum();
    assert_eq!(done, 120);
    assert!(v["notpm"].as_f64().unwrap() > 0.0);
    for f in [
        "throughput_tps",
        "virtual_seconds",
        "committed",
        "aborted",
        "latency_us",
        "per_txn",
        "buffer",
        "lock_waits",
        "group_commit_forces",
    ] {
        assert!(!v[f].is_null(), "missing {f}");
    }
    assert_eq!(v["home_warehouse"], "fixed");
    assert_eq!(v["consistency"]["status"], "ok", "{}", v["consistency"]);
    let (_, again, _) = noftl(&args);
    assert_eq!(out, again, "the same seed gives the same JSON");
}

#[test]
fn bench_tpcc_with_random_home_warehouses_visits_them_all_and_passes_the_check() {
    let args = [
        "bench",
        "tpcc",
        "--storage",
        "memdisk",
        "--scale",
        "3",
        "--items",
        "1000",
        "--customers",
        "30",
        "--home-warehouse",
        "random",
        "--txns",
        "200",
        "--json",
        "-",
        "--check",
    ];
    let (ok, out, err) = noftl(&args);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["home_warehouse"], "random");
    assert_eq!(v["check"], "passed");
    let (ok, _, err) = noftl(&[&args[..10], &["--home-warehouse", "any", "--txns", "1"]].concat());
    assert!(!ok && err.contains("fixed or random"), "{err}");
}

#[test]
fn bench_tpcc_refuses_bad_arguments_without_panicking() {
    let (ok, _, err) = noftl(&["bench", "tpcc", "--scale", "0", "--txns", "1"]);
    assert!(!ok && err.contains("at least 1"), "{err}");
    let (ok, _, err) = noftl(&["bench", "tpcc", "--items", "3", "--txns", "1"]);
    assert!(!ok && !err.contains("panicked"), "{err}");
}

#[test]
fn bench_tpcc_loads_a_new_database_into_a_file_and_refuses_to_overwrite_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tpcc.db");
    let db_s = db.to_str().unwrap();
    let args = [
        "bench",
        "tpcc",
        "--storage",
        "file",
        "--path",
        db_s,
        "--preset",
        "tiny",
        "--items",
        "1000",
        "--customers",
        "60",
        "--txns",
        "40",
        "--json",
        "-",
        "--check",
    ];
    let (ok, out, err) = noftl(&args);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["storage"], "file");
    assert_eq!(v["check"], "passed");
    assert!(v["committed"].as_u64().unwrap() > 0);
    // The file now holds that database: a second load over it is refused, and leaves it as it was.
    let before = std::fs::read(&db).unwrap();
    let (ok, _, err) = noftl(&args);
    assert!(
        !ok && err.contains("not empty") && err.contains("--force"),
        "{err}"
    );
    assert!(
        std::fs::read(&db).unwrap() == before,
        "the refused run changed the file"
    );
    let (ok, _, err) = noftl(&[&args[..], &["--force"]].concat());
    assert!(ok, "{err}");

    // --reuse runs on that database again, with new inputs, and the check still passes.
    let again = [&args[..], &["--reuse", "--run-seed", "7"]].concat();
    let (ok, out, err) = noftl(&again);
    assert!(ok && err.contains("reusing the TPC-C database"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["load"], "reused");
    assert_eq!(v["run_seed"], 7);
    assert_eq!(v["check"], "passed");
    // Other population flags than the load's are refused when the database is opened (its
    // recovery may have written), and it still runs with the load's.
    let other: Vec<&str> = again
        .iter()
        .map(|&a| if a == "60" { "61" } else { a })
        .collect();
    let (ok, _, err) = noftl(&other);
    assert!(!ok && err.contains("was not loaded with these"), "{err}");
    let (ok, out, err) = noftl(&again);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["check"], "passed");
    // Nothing to reuse: a clear error before anything is written.
    let empty = dir.path().join("none.db");
    let on_empty: Vec<&str> = again
        .iter()
        .map(|&a| {
            if a == db_s {
                empty.to_str().unwrap()
            } else {
                a
            }
        })
        .collect();
    let (ok, _, err) = noftl(&on_empty);
    assert!(!ok && err.contains("holds no database"), "{err}");
    assert!(!empty.exists() || std::fs::metadata(&empty).unwrap().len() == 0);
    let (ok, _, err) = noftl(&["bench", "tpcc", "--storage", "native", "--reuse"]);
    assert!(!ok && err.contains("--reuse"), "{err}");
}

#[test]
fn compare_tpcc_gives_the_figure_3_rows() {
    let args = [
        "compare",
        "--workload",
        "tpcc",
        "--tpcc-reduced",
        "1000",
        "30",
        "--repeat",
        "1",
        "--duration",
        "200ms",
        "--json",
        "-",
        "--seed",
        "2",
    ];
    let (ok, out, err) = noftl(&args);
    assert!(ok, "{err}");
    assert!(err.contains("[5/5]"), "progress is shown: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["workload"], "tpcc");
    assert_eq!(v["scale"], 1);
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["storage"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["native", "dftl-2%", "dftl-15%", "dftl-35%", "page"]);
    for r in rows {
        assert!(r["throughput_tps"].as_f64().unwrap() > 0.0);
        assert!(r["notpm"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(rows[0]["slowdown"], 1.0);
}

#[test]
fn every_bench_refuses_a_device_too_small_for_its_database_before_loading() {
    for (workload, scale) in [("tpcc", "25"), ("tpcb", "200"), ("tatp", "2000000")] {
        for storage in ["native", "dftl", "memdisk"] {
            let (ok, out, err) = noftl(&[
                "bench",
                workload,
                "--storage",
                storage,
                "--scale",
                scale,
                "--duration",
                "1s",
            ]);
            assert!(!ok, "{workload} {storage}: {out}");
            assert!(
                err.contains("needs about") && err.contains("blocks_per_plane="),
                "{workload} {storage}: the size it needs and how to get it: {err}"
            );
            assert!(!err.contains("loading"), "refused before loading: {err}");
        }
    }
}
