//! `noftl reproduce` and `noftl compare` with `--executor ray`: each run (reproduce) or row
//! (compare) a Ray task on a local Ray instance, merged into the same result as `--executor
//! local`, byte for byte (every figure is virtual time, seeded; the JSON carries no wall time);
//! and what either executor refuses before any work. The Ray tests are skipped, with the
//! reason, where the Python package `ray` is not installed (scripts/install-test-deps.sh
//! installs it into .venv).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cli_support;

use std::path::Path;
use std::process::Output;

use cli_support::{noftl, ray_or_skip};

/// `noftl ARGS` with NOFTL_PYTHON set and no RAY_ADDRESS (a local Ray instance).
fn noftl_ray(python: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_noftl"));
    c.args(args)
        .env("NOFTL_PYTHON", python)
        .env_remove("RAY_ADDRESS")
        .env_remove("NOFTL_BIN");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// Runs `args` with `--json FILE` on both executors; returns both files' bytes.
fn both(python: &str, args: &[&str], dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let local = dir.join("local.json");
    let ray = dir.join("ray.json");
    let mut a: Vec<&str> = args.to_vec();
    a.extend(["--executor", "local", "--json", local.to_str().unwrap()]);
    let (ok, _, err) = noftl(&a);
    assert!(ok, "{err}");
    let mut a: Vec<&str> = args.to_vec();
    a.extend(["--executor", "ray", "--json", ray.to_str().unwrap()]);
    let out = noftl_ray(python, &a, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("jobs on Ray"), "{err}");
    (std::fs::read(&local).unwrap(), std::fs::read(&ray).unwrap())
}

#[test]
fn reproduce_on_ray_gives_the_local_fidelity_table() {
    let Some((_one, python)) = ray_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The whole quick reproduction (Fig. 3's OLTP and TPC-H rows, Fig. 4): five runs, five tasks.
    let (local, ray) = both(
        &python,
        &[
            "reproduce",
            "noftl",
            "--quick",
            "--repeat",
            "1",
            "--duration",
            "2s",
        ],
        dir.path(),
    );
    let v: serde_json::Value = serde_json::from_slice(&local).unwrap();
    assert_eq!(v["cells"].as_array().unwrap().len(), 8 + 20 + 4, "{v}");
    assert!(
        local == ray,
        "the Ray executor's JSON differs from the local one:\n{}\n---\n{}",
        String::from_utf8_lossy(&local),
        String::from_utf8_lossy(&ray)
    );
}

#[test]
fn compare_on_ray_gives_the_local_rows() {
    let Some((_one, python)) = ray_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (local, ray) = both(
        &python,
        &[
            "compare",
            "--scale",
            "1",
            "--accounts-per-branch",
            "5000",
            "--repeat",
            "2",
            "--duration",
            "300ms",
            "--stores",
            "native,dftl-2%,page",
            "--seed",
            "3",
        ],
        dir.path(),
    );
    let v: serde_json::Value = serde_json::from_slice(&local).unwrap();
    let stores: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["storage"].as_str().unwrap())
        .collect();
    assert_eq!(stores, ["native", "dftl-2%", "page"]);
    assert!(
        local == ray,
        "the Ray executor's JSON differs from the local one:\n{}\n---\n{}",
        String::from_utf8_lossy(&local),
        String::from_utf8_lossy(&ray)
    );
}

#[test]
fn a_node_without_the_binary_stops_the_ray_executor_before_any_run() {
    let Some((_one, python)) = ray_or_skip() else {
        return;
    };
    // The local Ray instance's worker sees NOFTL_BIN as a node of a cluster would.
    let out = noftl_ray(
        &python,
        &[
            "reproduce",
            "noftl",
            "--quick",
            "--only",
            "fig4",
            "--executor",
            "ray",
        ],
        &[("NOFTL_BIN", "/nonexistent/noftl")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("no executable noftl at /nonexistent/noftl"),
        "{err}"
    );
    assert!(!err.contains("[ray] 1/"), "no job ran: {err}");
}

#[test]
fn the_executors_refuse_what_they_cannot_run_before_any_work() {
    let (ok, _, err) = noftl(&["reproduce", "noftl", "--quick", "--executor", "slurm"]);
    assert!(!ok);
    assert!(
        err.contains("unknown executor 'slurm' (local, ray)"),
        "{err}"
    );
    let (ok, _, err) = noftl(&["compare", "--executor", "slurm"]);
    assert!(!ok);
    assert!(
        err.contains("unknown executor 'slurm' (local, ray)"),
        "{err}"
    );
    let (ok, _, err) = noftl(&["reproduce", "noftl", "--calibrate", "--executor", "ray"]);
    assert!(!ok);
    assert!(
        err.contains("--calibrate runs on the local executor only"),
        "{err}"
    );
    let (ok, _, err) = noftl(&["compare", "--workload", "tpch", "--executor", "ray"]);
    assert!(!ok);
    assert!(err.contains("runs on the local executor only"), "{err}");
    assert!(!err.contains("measuring"), "refused before the load: {err}");
    // Without `ray`: the sweep's message, before any run.
    for args in [
        &["reproduce", "noftl", "--quick", "--executor", "ray"][..],
        &["compare", "--executor", "ray"][..],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_noftl"))
            .args(args)
            .env("NOFTL_PYTHON", "/nonexistent/python")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            err.contains("the Ray executor needs the Python package `ray` in /nonexistent/python"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("measuring"),
            "{args:?}: refused before any run: {err}"
        );
    }
}
