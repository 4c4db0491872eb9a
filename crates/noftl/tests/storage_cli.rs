//! The `bench tpcb` and `crashtest` verbs as a user runs them: stable JSON fields, determinism,
//! the check, clear errors.

use std::process::Command;

fn noftl(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_noftl")).args(args).output().expect("run noftl");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

const BENCH: [&str; 17] = [
    "bench", "tpcb", "--storage", "memdisk", "--preset", "tiny", "--scale", "2", "--accounts-per-branch", "2000", "--terminals", "4", "--txns", "150", "--json", "-", "--check",
];

#[test]
fn bench_tpcb_in_virtual_time_gives_byte_identical_json_with_the_stable_fields() {
    let (ok, a, err) = noftl(&BENCH);
    assert!(ok, "{err}");
    let (_, b, _) = noftl(&BENCH);
    assert_eq!(a, b, "the same seed must give the same JSON");
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    for f in ["workload", "storage", "scale", "terminals", "seed", "committed", "aborted", "throughput_tps", "virtual_seconds", "check"] {
        assert!(v.get(f).is_some(), "missing {f}");
    }
    for f in ["mean", "p50", "p95", "p99", "max"] {
        assert!(v["latency_us"].get(f).is_some(), "missing latency_us.{f}");
    }
    for f in ["flash_reads", "flash_programs", "flash_erases", "gc_migrations", "energy_joules"] {
        assert!(v["per_txn"].get(f).is_some(), "missing per_txn.{f}");
    }
    for f in ["hits", "misses", "evictions", "writebacks"] {
        assert!(v["buffer"].get(f).is_some(), "missing buffer.{f}");
    }
    assert_eq!(v["committed"], 600);
    assert_eq!(v["check"], "passed");
    let mut other = BENCH;
    other[15] = "-";
    let (_, c, _) = noftl(&[&other[..], &["--seed", "2"]].concat());
    assert_ne!(serde_json::from_str::<serde_json::Value>(&c).unwrap()["latency_us"], v["latency_us"]);
}

#[test]
fn bench_tpcb_runs_on_a_plain_file_and_reuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let p = path.to_str().unwrap();
    let args = ["bench", "tpcb", "--storage", "file", "--path", p, "--preset", "tiny", "--scale", "1", "--accounts-per-branch", "1000", "--txns", "50", "--check"];
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
    assert!(!ok && err.contains("virtual or real"), "{err}");
    let (ok, _, err) = noftl(&["bench", "tpcb", "--txns", "5", "--duration", "3 parsecs"]);
    assert!(!ok, "{err}");
}

#[test]
fn crashtest_verifies_every_seed_and_the_canary_fails() {
    let (ok, out, err) = noftl(&["crashtest", "--workload", "tpcb", "--storage", "memdisk", "--seeds", "25", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["seeds"], 25);
    assert_eq!(v["verified"], 25);
    assert_eq!(v["failures"].as_array().map(Vec::len), Some(0));
    let (ok, out, _) = noftl(&["crashtest", "--seeds", "20", "--canary", "--json"]);
    assert!(!ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["failures"].as_array().is_some_and(|f| !f.is_empty() && f[0].get("seed").is_some()));
}
