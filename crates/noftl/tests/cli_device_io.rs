//! The `device` and `io` verbs as a user runs them: determinism, JSON fields, clear errors.

mod cli_support;
use cli_support::noftl;

#[test]
fn the_same_io_command_twice_gives_byte_identical_json() {
    let args = [
        "io", "--target", "raw", "--preset", "tiny", "--rw", "write", "--qd", "4", "--ops", "3000",
        "--json", "--seed", "7",
    ];
    let (ok1, a, e1) = noftl(&args);
    let (ok2, b, _) = noftl(&args);
    assert!(ok1 && ok2, "{e1}");
    assert_eq!(a, b);
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    for field in [
        "target",
        "ops",
        "iops",
        "mib_per_s",
        "virtual_seconds",
        "energy_joules",
    ] {
        assert!(v.get(field).is_some(), "missing {field} in {a}");
    }
    for field in ["mean", "p50", "p99", "max"] {
        assert!(
            v["latency_us"].get(field).is_some(),
            "missing latency_us.{field}"
        );
    }
    for field in [
        "reads",
        "programs",
        "partial_programs",
        "erases",
        "oob_reads",
        "oob_writes",
    ] {
        assert!(v["flash"].get(field).is_some(), "missing flash.{field}");
    }
    assert_eq!(v["flash"]["programs"], 3000);
    let (_, c, _) = noftl(&[
        "io", "--target", "raw", "--preset", "tiny", "--rw", "write", "--qd", "4", "--ops", "3000",
        "--json", "--seed", "8",
    ]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&c).unwrap()["flash"],
        v["flash"],
        "write pattern does not depend on the seed"
    );
}

#[test]
fn raw_reads_after_precondition_return_programmed_pages_at_the_modelled_latency() {
    let (ok, out, err) = noftl(&[
        "io",
        "--target",
        "raw",
        "--preset",
        "noftl13",
        "--set",
        "geometry.blocks_per_plane=64",
        "--precondition",
        "--ops",
        "1000",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["flash"]["reads"], 1000);
    assert_eq!(
        v["flash"]["programs"], 0,
        "the precondition is not part of the measured phase"
    );
    // noftl13: 50 us per read, one die: 20,000 IOPS at QD 1.
    assert!(
        (v["iops"].as_f64().unwrap() - 20_000.0).abs() < 1.0,
        "{out}"
    );
}

#[test]
fn device_show_prints_geometry_and_json() {
    let (ok, out, _) = noftl(&["device", "show"]);
    assert!(ok);
    assert!(
        out.contains("noftl13") && out.contains("4096 blocks") && out.contains("1.00 GiB"),
        "{out}"
    );
    let (ok, out, _) = noftl(&["device", "show", "--preset", "mlc16k", "--json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["config"]["cell"]["native"], "mlc");
    assert_eq!(v["dies"], 8);
}

#[test]
fn bad_input_is_refused_with_a_message_that_names_the_problem() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["device", "show", "--set", "geometry.channels=0"],
            "geometry.channels",
        ),
        (&["device", "show", "--preset", "nosuch"], "unknown preset"),
        (
            &["device", "show", "--set", "timing.read_us=fast"],
            "timing.read_us",
        ),
        (
            &[
                "io",
                "--target",
                "raw",
                "--preset",
                "tiny",
                "--rw",
                "randwrite",
            ],
            "raw target runs",
        ),
        (
            &["io", "--target", "raw", "--preset", "tiny", "--bs", "1000"],
            "multiple",
        ),
        (
            &["io", "--target", "raw", "--preset", "tiny", "--qd", "0"],
            "--qd",
        ),
        (
            &["io", "--target", "raw", "--preset", "tiny", "--bs", "4q"],
            "unit",
        ),
        (
            &["io", "--target", "nosuch", "--preset", "tiny"],
            "unknown target",
        ),
        (
            &["device", "show", "--config", "/nonexistent/dev.toml"],
            "cannot read",
        ),
    ];
    for (args, needle) in cases {
        let (ok, _, err) = noftl(args);
        assert!(!ok, "{args:?} should fail");
        assert!(
            err.contains(needle),
            "{args:?}: '{err}' should mention '{needle}'"
        );
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    }
}

/// On TLC chips the result splits reads and programs by page type (lower, middle, upper pages
/// differ several times in latency), the split adds up to the flash counters, and the run checks
/// itself against the die-time bound.
#[test]
fn io_on_tlc_splits_flash_operations_by_page_type_and_checks_itself() {
    let (ok, out, err) = noftl(&[
        "io",
        "--target",
        "page",
        "--preset",
        "tlc16k",
        "--set",
        "geometry.blocks_per_plane=16",
        "--set",
        "geometry.pages_per_block=48",
        "--rw",
        "randwrite",
        "--ops",
        "3000",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let types = v["by_page_type"].as_array().expect("by_page_type");
    let sum = |field: &str| {
        types
            .iter()
            .map(|t| t[field].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(sum("programs"), v["flash"]["programs"].as_u64().unwrap());
    assert_eq!(sum("reads"), v["flash"]["reads"].as_u64().unwrap());
    let names: Vec<&str> = types
        .iter()
        .map(|t| t["page_type"].as_str().unwrap())
        .collect();
    for t in ["lower", "middle", "upper"] {
        assert!(names.contains(&t), "no {t} pages in {names:?}");
    }
    // Word lines are programmed whole: as many lower as upper pages.
    let programs_of = |name: &str| {
        types.iter().find(|t| t["page_type"] == name).unwrap()["programs"]
            .as_u64()
            .unwrap()
    };
    assert!(programs_of("lower").abs_diff(programs_of("upper")) <= 64);
    assert_eq!(v["consistency"]["status"], "ok", "{}", v["consistency"]);
    let die = v["consistency"]["die_busy_fraction_max"].as_f64().unwrap();
    assert!(die > 0.0 && die <= 1.0, "die busy fraction {die}");
}

/// `--slc-cache` on TLC: the JSON carries the cache's counters (writes cached, folds), the WAF
/// counts the folds' programs, and the run checks itself; SLC devices and FTLs without a cache
/// are refused with a message that names the reason.
#[test]
fn io_with_a_pslc_cache_reports_hits_and_folds_and_refuses_what_cannot_run_one() {
    let dev = [
        "--preset",
        "tlc16k",
        "--set",
        "geometry.blocks_per_plane=8",
        "--set",
        "geometry.pages_per_block=48",
        "--set",
        "store=meta",
    ];
    let mut args = vec!["io", "--target", "page", "--slc-cache", "25%"];
    args.extend(dev);
    args.extend([
        "--op",
        "15%",
        "--rw",
        "randwrite",
        "--ops",
        "12000",
        "--json",
    ]);
    let (ok, out, err) = noftl(&args);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let c = &v["slc_cache"];
    assert_eq!(c["blocks"], 2 * 2 * 8, "{c}");
    let cached = c["host_writes_cached"].as_u64().unwrap();
    assert_eq!(cached, v["host"]["writes"].as_u64().unwrap(), "{c}");
    assert_eq!(c["hit_rate"], 1.0);
    assert!(c["folds"].as_u64().unwrap() > 0, "{c}");
    assert!(c["folded_units"].as_u64().unwrap() > 0, "{c}");
    assert!(
        v["waf"].as_f64().unwrap() > 1.0,
        "the folds' programs count"
    );
    assert_eq!(v["consistency"]["status"], "ok", "{}", v["consistency"]);

    let (ok, _, err) = noftl(&[
        "io",
        "--target",
        "page",
        "--preset",
        "tiny",
        "--slc-cache",
        "25%",
        "--ops",
        "10",
    ]);
    assert!(!ok && err.contains("MLC or TLC"), "{err}");
    let mut args = vec!["io", "--target", "dftl", "--slc-cache", "25%"];
    args.extend(dev);
    args.extend(["--ops", "10"]);
    let (ok, _, err) = noftl(&args);
    assert!(!ok && err.contains("no pSLC write cache"), "{err}");
}

/// DFTL's FLUSH write-back is off by default (DFTL's paper); the option is named in the result
/// and refused where it would be ignored.
#[test]
fn the_dftl_flush_writeback_option_is_named_in_results_and_refused_off_dftl() {
    let base = ["io", "--preset", "tiny", "--ops", "200", "--json"];
    let run = |extra: &[&str]| {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        noftl(&args)
    };
    let (ok, out, err) = run(&["--target", "dftl"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ftl"]["name"], "dftl-2%", "{out}");
    let (ok, out, err) = run(&["--target", "dftl", "--dftl-flush-writeback"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ftl"]["name"], "dftl-flushwb-2%", "{out}");
    for target in ["page", "dftl-orig"] {
        let (ok, _, err) = run(&["--target", target, "--dftl-flush-writeback"]);
        assert!(!ok && err.contains("option of the dftl FTL"), "{err}");
    }
}

/// `bench` on the page FTL with a pSLC write cache reports the cache over its window, as `io`
/// does; without the cache the field is absent.
#[test]
fn bench_with_a_pslc_cache_reports_its_hits_and_folds() {
    let dev = [
        "--preset",
        "tlc16k",
        "--set",
        "geometry.page_size_bytes=4096",
        "--set",
        "geometry.oob_size_bytes=128",
        "--set",
        "geometry.blocks_per_plane=64",
        "--set",
        "geometry.pages_per_block=96",
    ];
    let mut args = vec!["bench", "tpcb", "--storage", "page", "--scale", "1"];
    args.extend(dev);
    args.extend(["--txns", "3000", "--json", "-"]);
    let (ok, out, err) = noftl(&args);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v.get("slc_cache").is_none(), "{out}");
    args.extend(["--slc-cache", "20%"]);
    let (ok, out, err) = noftl(&args);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let c = &v["slc_cache"];
    assert!(c["host_writes_cached"].as_u64().unwrap() > 0, "{c}");
    assert!(c["folds"].as_u64().unwrap() > 0, "{c}");
    assert_eq!(v["consistency"]["status"], "ok", "{}", v["consistency"]);
}
