//! `noftl compare` and `bench tpcb --storage native` as a user runs them.

mod cli_support;
use cli_support::noftl;

const COMPARE: [&str; 13] = [
    "compare",
    "--scale",
    "1",
    "--accounts-per-branch",
    "5000",
    "--repeat",
    "2",
    "--duration",
    "300ms",
    "--json",
    "-",
    "--seed",
    "3",
];

#[test]
fn compare_gives_the_figure_3_rows_and_the_same_json_for_the_same_seed() {
    let (ok, a, err) = noftl(&COMPARE);
    assert!(ok, "{err}");
    assert!(err.contains("[10/10]"), "progress is shown: {err}");
    let (_, b, _) = noftl(&COMPARE);
    assert_eq!(a, b, "the same seed must give the same JSON");
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    assert_eq!(v["workload"], "tpcb");
    assert_eq!(v["repeat"], 2);
    assert_eq!(v["load"], "bulk", "the default load, said in the JSON");
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["storage"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["native", "dftl-2%", "dftl-15%", "dftl-35%", "page"]);
    for r in rows {
        for f in ["throughput_tps", "stdev", "slowdown"] {
            assert!(r[f].as_f64().is_some(), "missing {f}");
        }
        for f in [
            "flash_reads",
            "flash_programs",
            "flash_erases",
            "gc_migrations",
            "translation_reads",
            "translation_writes",
            "controller_us",
            "energy_joules",
        ] {
            assert!(r["per_txn"][f].as_f64().is_some(), "missing per_txn.{f}");
        }
    }
    assert_eq!(v["warmup"], "auto");
    for r in rows {
        // Every row checks its windows against the physical bounds, and none breaks one.
        let c = &r["consistency"];
        assert_eq!(c["status"], "ok", "{}: {c}", r["storage"]);
        assert!(c["die_busy_fraction_max"].as_f64().unwrap() <= 1.0);
        assert!(c["little_law_ratio"].as_f64().unwrap() > 0.95);
        assert!(
            r["window_seconds"].as_f64().unwrap() >= 0.3,
            "a window is at least --duration long"
        );
    }
    for r in rows {
        assert!(
            r["warmup_seconds"].as_f64().unwrap() > 0.0,
            "every run is warmed up before it is measured"
        );
    }
    assert_eq!(rows[0]["slowdown"], 1.0);
    assert_eq!(
        rows[0]["per_txn"]["translation_reads"], 0.0,
        "NoFTL has no translation pages"
    );
    assert!(
        rows[1]["per_txn"]["translation_reads"].as_f64().unwrap() > 0.0,
        "DFTL 2% misses its cache"
    );
}

#[test]
fn compare_refuses_a_home_warehouse_outside_tpcc() {
    let (ok, _, err) = noftl(&["compare", "--home-warehouse", "random"]);
    assert!(!ok);
    assert!(err.contains("TPC-C"), "{err}");
    let (ok, _, err) = noftl(&[
        "compare",
        "--workload",
        "tpcc",
        "--home-warehouse",
        "nearest",
    ]);
    assert!(!ok);
    assert!(err.contains("fixed or random"), "{err}");
}

#[test]
fn compare_refuses_workloads_it_has_no_kit_for() {
    let (ok, _, err) = noftl(&["compare", "--workload", "ycsb"]);
    assert!(!ok);
    assert!(err.contains("tpcb"), "{err}");
}

#[test]
fn compare_refuses_bad_warmups_and_stores_before_loading_anything() {
    for (args, says) in [
        (&["compare", "--warmup", "soon"][..], "--warmup takes auto"),
        (&["compare", "--stores", "page"][..], "must include native"),
        (&["compare", "--stores", "native,ssd"][..], "no store 'ssd'"),
    ] {
        let (ok, _, err) = noftl(args);
        assert!(!ok, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("measuring"), "refused before the load: {err}");
    }
}

#[test]
fn compare_runs_only_the_stores_asked_for() {
    let mut args = COMPARE.to_vec();
    args.extend([
        "--stores",
        "native,page",
        "--warmup",
        "none",
        "--load",
        "rows",
    ]);
    let (ok, out, err) = noftl(&args);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["load"], "rows",
        "--load rows: the figures before 2026-11-27"
    );
    let names: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["storage"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["native", "page"]);
    assert_eq!(v["rows"][1]["warmup_seconds"], 0.0);
}

#[test]
fn bench_tpcb_runs_on_the_native_store_and_passes_the_check() {
    let (ok, out, err) = noftl(&[
        "bench",
        "tpcb",
        "--storage",
        "native",
        "--preset",
        "tiny",
        "--op",
        "30%",
        "--scale",
        "2",
        "--accounts-per-branch",
        "2000",
        "--terminals",
        "4",
        "--txns",
        "100",
        "--json",
        "-",
        "--check",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["storage"], "native");
    assert_eq!(v["committed"], 400);
    assert_eq!(
        v["check"], "passed",
        "the TPC-B check passes after a bulk load"
    );
    assert_eq!(v["load"], "bulk");
}

#[test]
fn a_load_the_workload_has_no_loader_for_is_refused_before_loading() {
    for (args, says) in [
        (
            &["compare", "--workload", "tatp", "--load", "bulk"][..],
            "TATP loads row by row",
        ),
        (
            &["compare", "--workload", "tpch", "--load", "rows"][..],
            "TPC-H loads in bulk",
        ),
        (
            &["bench", "tatp", "--load", "bulk", "--txns", "10"][..],
            "bench tatp loads row by row",
        ),
        (&["compare", "--load", "sideways"][..], "bulk or rows"),
    ] {
        let (ok, _, err) = noftl(args);
        assert!(!ok, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("measuring"), "refused before the load: {err}");
    }
}

#[test]
fn progress_never_changes_the_json_and_quiet_leaves_out_the_progress_lines() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let run = |out: &std::path::Path, quiet: bool| {
        let mut args: Vec<&str> = COMPARE[..COMPARE.len() - 4].to_vec();
        args.extend(["--seed", "3", "--json", out.to_str().unwrap()]);
        if quiet {
            args.push("--quiet");
        }
        let (ok, _, err) = noftl(&args);
        assert!(ok, "{err}");
        err
    };
    let loud = run(&a, false);
    let quiet = run(&b, true);
    assert!(
        loud.contains("[10/10]"),
        "progress lines without --quiet: {loud}"
    );
    assert!(
        !quiet.contains("[10/10]"),
        "no progress lines with --quiet: {quiet}"
    );
    assert_eq!(
        std::fs::read(&a).unwrap(),
        std::fs::read(&b).unwrap(),
        "the JSON is the same bytes with and without progress"
    );
}

#[test]
fn the_loaded_database_in_a_file_or_in_ram_gives_the_same_json() {
    // The loaded database waits for its copies in an unlinked file in TMPDIR, or in RAM where
    // TMPDIR is a RAM file system (lab::scratch): the rows must not see the difference.
    let ram = std::path::Path::new("/dev/shm");
    if !ram.is_dir() {
        eprintln!("skipped: no /dev/shm to stand for a RAM TMPDIR");
        return;
    }
    let disk = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let run = |tmp: &std::path::Path| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_noftl"))
            .args(COMPARE)
            .args(["--store", "native", "--store", "dftl-2%"])
            .env("TMPDIR", tmp)
            .output()
            .expect("run noftl");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        (String::from_utf8_lossy(&out.stdout).into_owned(), err)
    };
    let (in_ram, said_ram) = run(ram);
    assert!(
        said_ram.contains("in RAM (/dev/shm is a RAM file system)"),
        "{said_ram}"
    );
    let (in_file, said_file) = run(disk.path());
    assert!(
        said_file.contains("in an unlinked file in") || said_file.contains("in RAM ("),
        "where the loaded database is, said: {said_file}"
    );
    assert_eq!(
        in_ram, in_file,
        "the same JSON wherever the loaded database waits"
    );
    // Unlinked at creation: nothing is left behind in TMPDIR.
    assert_eq!(std::fs::read_dir(disk.path()).unwrap().count(), 0);
}
