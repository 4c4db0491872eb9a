//! `noftl bench tpch` as a user runs it: SF 0.01 on flash (the native store and DFTL), every
//! query checked against the independent evaluation, the JSON's fields; a device too small for
//! the scale factor and bad arguments refused before loading.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cli_support;
use cli_support::noftl;

/// The tiny preset with room for SF 0.01 (8 dies, 64 MiB).
const DEVICE: [&str; 4] = ["--preset", "tiny", "--set", "geometry.blocks_per_plane=128"];

#[test]
fn bench_tpch_runs_the_four_queries_on_flash_and_checks_their_answers() {
    for storage in ["native", "dftl"] {
        let mut args = vec!["bench", "tpch", "--storage", storage, "--scale", "0.01"];
        args.extend(DEVICE);
        args.extend(["--op", "20%", "--repeat", "2", "--check", "--json", "-"]);
        let (ok, out, err) = noftl(&args);
        assert!(ok, "{storage}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["workload"], "tpch");
        assert_eq!(v["scale"], 0.01);
        let qs = v["queries"].as_array().unwrap();
        assert_eq!(
            qs.iter()
                .map(|q| q["query"].as_u64().unwrap())
                .collect::<Vec<_>>(),
            vec![1, 6, 12, 14]
        );
        for q in qs {
            assert_eq!(q["check"], "passed", "{storage}: {q}");
            assert!(q["seconds"].as_f64().unwrap() > 0.0);
            assert!(q["stdev"].as_f64().is_some());
            assert!(!q["rows"].as_array().unwrap().is_empty());
            // The scans read from flash: LINEITEM alone is over 2,000 pages and the pool is 256.
            assert!(
                q["per_query"]["flash_reads"].as_f64().unwrap() > 1000.0,
                "{q}"
            );
            assert_eq!(q["consistency"]["status"], "ok", "{q}");
        }
        assert_eq!(
            qs[0]["rows"].as_array().unwrap().len(),
            4,
            "Q1's four groups"
        );
    }
}

#[test]
fn bench_tpch_refuses_a_device_too_small_and_bad_arguments_before_loading() {
    let mut args = vec!["bench", "tpch", "--storage", "native", "--scale", "1"];
    args.extend(DEVICE);
    let (ok, _, err) = noftl(&args);
    assert!(!ok);
    assert!(err.contains("needs about") && err.contains("GiB"), "{err}");
    for bad in [
        vec!["--scale", "0"],
        vec!["--queries", "3"],
        vec!["--repeat", "0"],
        vec!["--params", "some"],
    ] {
        let mut args = vec!["bench", "tpch"];
        args.extend(bad.iter().copied());
        let (ok, _, err) = noftl(&args);
        assert!(!ok, "{bad:?} accepted");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn compare_tpch_prints_seconds_and_slowdowns_per_query_with_the_mapping_misses() {
    let v = cli_support::noftl_json(&[
        "compare",
        "--workload",
        "tpch",
        "--sf",
        "0.01",
        "--stores",
        "native,dftl-2%",
        "--repeat",
        "2",
        "--json",
        "-",
    ]);
    assert_eq!(v["workload"], "tpch");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for (i, q) in rows[1]["queries"].as_array().unwrap().iter().enumerate() {
        let native = &rows[0]["queries"][i];
        assert_eq!(native["slowdown"], 1.0);
        assert_eq!(native["translation_reads"], 0.0);
        // DFTL at 2% misses its mapping cache on the scans: a translation read per data read,
        // and the query takes longer by that.
        assert!(q["mapping_miss_ratio"].as_f64().unwrap() > 0.5, "{q}");
        assert!(q["slowdown"].as_f64().unwrap() > 1.2, "{q}");
        assert_eq!(q["consistency"]["status"], "ok");
    }
}
