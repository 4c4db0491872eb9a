//! Behaviour pinned across refactors: the deterministic output of every experiment verb,
//! byte for byte, against files recorded before the experiment code moved into the `lab` crate
//! (recorded with the release binary of commit e0ff36d, 2026-11-27).
//!
//! Every case runs in virtual time with a fixed seed, so its JSON (and a result directory's
//! files) are a function of the command alone (`results` invariant 3; `compare` invariant 3).
//! A difference here means behaviour changed: if the change is intended, say which fields
//! moved and why in the commit, then record again with
//! `NOFTL_GOLDEN_RECORD=1 cargo test -p noftl --test golden`.
//!
//! The cases are the ones the `lab` issue names (compare TPC-B 12, TPC-C 1 and TATP; ipa compare;
//! iaa compare --free 20%; bench tpch --scale 0.01; io; crashtest --seeds 20) plus one small
//! run of each bench workload and one result directory, which cover the runner they now share.

use std::path::{Path, PathBuf};
use std::process::Command;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn recording() -> bool {
    std::env::var_os("NOFTL_GOLDEN_RECORD").is_some_and(|v| v == "1")
}

fn noftl(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args(args)
        .output()
        .expect("the noftl binary runs");
    assert!(
        out.status.success(),
        "noftl {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Compares `got` with the recorded file `name` (or records it), with a readable diff hint.
fn check(name: &str, got: &[u8]) {
    let path = golden_dir().join(name);
    if recording() {
        std::fs::create_dir_all(golden_dir()).expect("golden dir");
        std::fs::write(&path, got).expect("record golden file");
        return;
    }
    let want = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (record it: see this file's doc)", path.display()));
    if want != got {
        let (w, g) = (String::from_utf8_lossy(&want), String::from_utf8_lossy(got));
        let line = w
            .lines()
            .zip(g.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| w.lines().count().min(g.lines().count()));
        panic!(
            "{name} differs from the recorded output, first at line {}:\n  recorded: {}\n  now:      {}",
            line + 1,
            w.lines().nth(line).unwrap_or("<end>"),
            g.lines().nth(line).unwrap_or("<end>")
        );
    }
}

fn case(name: &str, args: &[&str]) {
    check(&format!("{name}.json"), &noftl(args));
}

#[test]
fn compare_tpcb_12() {
    case(
        "compare-tpcb",
        &["compare", "--workload", "tpcb", "--json", "-"],
    );
}

#[test]
fn compare_tpcc_1() {
    case(
        "compare-tpcc",
        &["compare", "--workload", "tpcc", "--json", "-"],
    );
}

#[test]
fn compare_tatp() {
    case(
        "compare-tatp",
        &["compare", "--workload", "tatp", "--json", "-"],
    );
}

#[test]
fn ipa_compare() {
    case("ipa-compare", &["ipa", "compare", "--json", "-"]);
}

#[test]
fn iaa_compare_at_20_percent_free() {
    case(
        "iaa-compare",
        &["iaa", "compare", "--free", "20%", "--json", "-"],
    );
}

#[test]
fn bench_tpch_sf_0_01() {
    case(
        "bench-tpch",
        &["bench", "tpch", "--scale", "0.01", "--json", "-"],
    );
}

/// A small TPC-B run on NoFTL: the JSON case and the result directory's.
const TPCB_NATIVE: &[&str] = &[
    "bench",
    "tpcb",
    "--storage",
    "native",
    "--preset",
    "noftl13",
    "--scale",
    "1",
    "--accounts-per-branch",
    "10000",
    "--txns",
    "2000",
];

#[test]
fn bench_tpcb_on_native() {
    case(
        "bench-tpcb-native",
        &[TPCB_NATIVE, &["--json", "-"]].concat(),
    );
}

#[test]
fn bench_tatp_on_page() {
    case(
        "bench-tatp-page",
        &[
            "bench",
            "tatp",
            "--storage",
            "page",
            "--scale",
            "5000",
            "--txns",
            "3000",
            "--json",
            "-",
        ],
    );
}

#[test]
fn bench_tpcc_on_dftl() {
    case(
        "bench-tpcc-dftl",
        &[
            "bench",
            "tpcc",
            "--storage",
            "dftl",
            "--scale",
            "1",
            "--items",
            "1000",
            "--customers",
            "300",
            "--txns",
            "300",
            "--json",
            "-",
        ],
    );
}

#[test]
fn io_random_writes_on_page() {
    case(
        "io-page",
        &[
            "io",
            "--target",
            "page",
            "--preset",
            "tiny",
            "--rw",
            "randwrite",
            "--ops",
            "20000",
            "--json",
        ],
    );
}

#[test]
fn crashtest_20_seeds() {
    case("crashtest", &["crashtest", "--seeds", "20", "--json"]);
}

/// A result directory: summary.json, samples.csv, results.csv and raw.csv, every byte but the
/// program's version (which changes with every commit; it is written as `VERSION` here). The
/// run is in a directory of its own, `--results` relative to it, since the command line is in
/// summary.json.
#[test]
fn bench_result_directory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .current_dir(dir.path())
        .args(TPCB_NATIVE)
        .args(["--results", "res", "--raw", "--sample-window", "100ms"])
        .env_remove("SOURCE_DATE_EPOCH")
        .output()
        .expect("the noftl binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let version = String::from_utf8(noftl(&["--version"])).expect("utf-8");
    let version = version.trim().trim_start_matches("noftl ");
    for f in ["summary.json", "samples.csv", "results.csv", "raw.csv"] {
        let path = dir
            .path()
            .join("res")
            .join(format!("tpcb_1970-01-01_00-00-00.{f}"));
        let got = std::fs::read_to_string(path).expect("result file written");
        check(
            &format!("results-{f}"),
            got.replace(version, "VERSION").as_bytes(),
        );
    }
}
