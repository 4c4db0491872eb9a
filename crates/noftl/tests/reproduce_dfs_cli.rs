//! `noftl reproduce dfs --quick`: DFS's application table with kernel ext3 in a QEMU guest,
//! one row (VM-Update: `fs bench`'s vmupdate) on a 32 MiB device with a 4 MiB file, DFS
//! through FUSE beside it. The quick table is the machinery, not the paper's set-up: its cell
//! is checked for what the counters must say, not for the paper's value. Two guest boots and
//! two FUSE mounts: under a minute under TCG on 2 cores.
//!
//! Needs qemu-system-x86_64, the kernel cache of scripts/vm-kernel.sh, mkfs.ext3 and FUSE;
//! without them the test says so and skips.

mod nbd_support;

use std::process::Command;

use nbd_support::quick_reproduce_in_guest;
use serde_json::Value;

#[test]
fn the_quick_table_has_its_cell_from_device_time_less_the_baselines() {
    let Some(r) =
        quick_reproduce_in_guest("dfs", &["qemu-system-x86_64", "mkfs.ext3", "fusermount3"])
    else {
        return;
    };
    assert!(r["setup"]["time_note"]
        .as_str()
        .is_some_and(|t| t.contains("device time only")));
    let rows = r["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{r}");
    let row = &rows[0];
    assert_eq!(row["app"], "vmupdate");
    for side in ["ext3", "dfs"] {
        let s = &row[side];
        assert_eq!(s["consistency"]["status"], "ok", "{s}");
        // The application rewrote its 4 MiB file and fsynced it: about 1,024 programs beyond
        // the baseline (which wrote the file once), in modelled device time of its own.
        let programs = s["flash_programs"].as_u64().unwrap_or(0);
        assert!((1024..1200).contains(&programs), "{side}: {s}");
        assert!(s["elapsed_us"].as_f64() > Some(0.0), "{s}");
        assert!(s["die_busy_us"].as_f64() > Some(0.0), "{s}");
        assert!(
            s["baseline"]["flash_programs"].as_u64() >= Some(1024),
            "the baseline wrote the file: {s}"
        );
        assert_eq!(s["app"]["app_bytes"], 4 << 20);
        // One run from a fresh device: its steady-state record says it was not steady.
        assert_eq!(s["steady_state"]["met"], false, "{s}");
        assert!(
            s["steady_state"]["device_writes"].as_f64() > Some(0.0),
            "{s}"
        );
    }
    assert!(row["ext3"]["guest_command_s"].as_f64().is_some());
    assert_eq!(row["ext3"]["fs"], "kernel ext3 on page");
    let speedup = row["speedup_elapsed"].as_f64().expect("speedup");
    let e = row["ext3"]["elapsed_us"].as_f64().unwrap();
    let d = row["dfs"]["elapsed_us"].as_f64().unwrap();
    assert!((speedup - e / d).abs() < 1e-9, "{row}");
    // The paper's cell beside ours.
    let cells = r["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 1);
    let c = &cells[0];
    assert_eq!(c["cell"], "VM-Update (ours: vmupdate)");
    assert_eq!(c["paper"], 1.07);
    let err = c["error"].as_f64().unwrap();
    assert!((err - (c["ours"].as_f64().unwrap() / 1.07 - 1.0)).abs() < 1e-3);
    assert_eq!(c["within"], err.abs() <= 0.15);
    assert!(!c["why"].as_str().unwrap_or("").is_empty());
}

/// Bad flags are refused before QEMU or the kernel are looked for (so on any machine).
#[test]
fn bad_flags_are_refused_before_any_boot() {
    for (args, says) in [
        (&["--only", "knn"][..], "--only takes the applications"),
        (&["--today"][..], "--calibrate and --today are NoFTL's"),
        (&["--warmup", "precondition"][..], "--warmup is NoFTL's"),
        (&["--duration", "5s"][..], "--repeat, --duration and --cpu"),
        (&["--executor", "ray"][..], "local executor only"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
            .args(["reproduce", "dfs"])
            .args(args)
            .output()
            .expect("run noftl");
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// The guest's side, run on the host: `fs app-workload` runs one `fs bench` application in a
/// directory and prints what it did; an unknown application is refused.
#[test]
fn the_app_verb_runs_one_application_in_a_directory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().to_str().expect("utf-8");
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_noftl"))
            .args(["fs", "app-workload", "--dir", d, "--app-mib", "1"])
            .args(extra)
            .output()
            .expect("run noftl")
    };
    for (app, writes) in [
        ("sort", true),
        ("zipf", false),
        ("vmupdate", true),
        ("scan", false),
    ] {
        let out = run(&["--app", app]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(r["app"], app);
        assert_eq!(r["file_bytes"], 1 << 20);
        assert_eq!(r["app_bytes"], if writes { 1 << 20 } else { 0 }, "{r}");
        assert!(r["ops"].as_u64() > Some(0), "{r}");
    }
    let out = run(&["--app", "sort", "--setup-only"]);
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        (r["setup_only"].as_bool(), r["ops"].as_u64()),
        (Some(true), Some(0))
    );
    let out = run(&["--app", "knn"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown application"));
}
