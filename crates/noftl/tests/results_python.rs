//! Result directories read by the tools researchers use: a reader written against BenchBase's
//! format (scripts/benchbase_check.py: file names, summary keys and types, column headers and
//! value formats) takes the directories of `bench`, `io`, `compare` and `iaa compare` unchanged,
//! and pandas and DuckDB load every CSV file of them with their default options
//! (scripts/results_frames.py). Skipped, with the reason printed, where python3 or the packages
//! are missing (scripts/install-test-deps.sh installs pandas and duckdb into .venv).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cli_support;
use cli_support::noftl;

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Result directories of four verbs, small, in `root`.
fn result_dirs(root: &Path) -> Vec<PathBuf> {
    let runs: [(&str, &[&str]); 4] = [
        (
            "tpcb",
            &[
                "bench",
                "tpcb",
                "--storage",
                "native",
                "--scale",
                "1",
                "--accounts-per-branch",
                "2000",
                "--terminals",
                "2",
                "--duration",
                "500ms",
                "--sample-window",
                "100ms",
            ],
        ),
        (
            "io",
            &[
                "io",
                "--target",
                "page",
                "--preset",
                "tiny",
                "--precondition",
                "--rw",
                "randrw",
                "--qd",
                "4",
                "--ops",
                "3000",
                "--sample-window",
                "10ms",
            ],
        ),
        (
            "compare",
            &[
                "compare",
                "--scale",
                "1",
                "--accounts-per-branch",
                "2000",
                "--duration",
                "200ms",
                "--warmup",
                "none",
                "--stores",
                "native,page",
                "--sample-window",
                "50ms",
            ],
        ),
        (
            "iaa",
            &[
                "iaa",
                "compare",
                "--free",
                "40%",
                "--schemes",
                "conventional,iaa",
                "--set",
                "geometry.blocks_per_plane=80",
                "--op",
                "12%",
                "--warmup",
                "0",
                "--duration",
                "100ms",
                "--sample-window",
                "50ms",
            ],
        ),
    ];
    runs.iter()
        .map(|(name, args)| {
            let dir = root.join(name);
            let d = dir.to_str().unwrap();
            let (ok, _, err) = noftl(&[*args, &["--results", d, "--raw"][..]].concat());
            assert!(ok, "{name}: {err}");
            dir
        })
        .collect()
}

fn python_ok(python: &Path, script: &str, dirs: &[PathBuf]) -> Result<String, String> {
    let out = Command::new(python)
        .arg(repo().join("scripts").join(script))
        .args(dirs)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

fn has_python() -> bool {
    Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn benchbase_and_dataframe_readers_take_the_result_files() {
    let d = tempfile::tempdir().unwrap();
    let dirs = result_dirs(d.path());
    if has_python() {
        let out = python_ok(Path::new("python3"), "benchbase_check.py", &dirs)
            .unwrap_or_else(|e| panic!("BenchBase's format: {e}"));
        assert_eq!(out.matches("ok: ").count(), 4, "{out}");
        assert!(
            out.contains("raw.csv") && out.contains("config.xml"),
            "{out}"
        );
    } else {
        eprintln!("SKIPPED the BenchBase format check: no python3");
    }
    let venv = repo().join(".venv/bin/python");
    let have = venv.exists()
        && Command::new(&venv)
            .args(["-c", "import pandas, duckdb"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !have {
        eprintln!(
            "SKIPPED pandas and DuckDB: {} cannot import them (scripts/install-test-deps.sh \
             installs them)",
            venv.display()
        );
        return;
    }
    let out = python_ok(&venv, "results_frames.py", &dirs)
        .unwrap_or_else(|e| panic!("pandas and DuckDB: {e}"));
    // Every CSV file of the four directories.
    let csvs: usize = dirs
        .iter()
        .map(|d| {
            std::fs::read_dir(d)
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .path()
                        .extension()
                        .is_some_and(|x| x == "csv")
                })
                .count()
        })
        .sum();
    assert_eq!(out.matches("ok: ").count(), csvs, "{out}");
}

/// The checker refuses what BenchBase's readers would trip over: a summary number written as a
/// decimal where BenchBase writes an integer.
#[test]
fn the_benchbase_check_refuses_a_decimal_latency() {
    if !has_python() {
        eprintln!("SKIPPED: no python3");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("io");
    let (ok, _, err) = noftl(&[
        "io",
        "--target",
        "raw",
        "--preset",
        "tiny",
        "--ops",
        "200",
        "--results",
        dir.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    python_ok(
        Path::new("python3"),
        "benchbase_check.py",
        std::slice::from_ref(&dir),
    )
    .unwrap();
    let summary = lab::results::find(&dir, "summary.json").unwrap();
    let text = std::fs::read_to_string(&summary).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["Latency Distribution"]["Median Latency (microseconds)"] = serde_json::json!(50.5);
    std::fs::write(&summary, v.to_string()).unwrap();
    let e = python_ok(Path::new("python3"), "benchbase_check.py", &[dir]).unwrap_err();
    assert!(
        e.contains("Median Latency (microseconds)") && e.contains("not an integer"),
        "{e}"
    );
}
