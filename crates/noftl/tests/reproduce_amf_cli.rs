//! `noftl reproduce amf --quick`: AMF's write-amplification table with kernel ext4 and F2FS in
//! a QEMU guest, one row (FIO (RW): fio's random writes) on a 128 MiB device, with our f2fs
//! mode and ALFS on AMF through FUSE beside them. The quick table is the machinery, not the
//! slides' set-up: its cells are checked for what the counters must say, not for the slides'
//! values. Only one row: eight guest boots (a baseline and the workload per configuration) take
//! 2-3 minutes under TCG on 2 cores; the other rows run by `--only`.
//!
//! Needs qemu-system-x86_64, the kernel cache of scripts/vm-kernel.sh, fio, mkfs.f2fs and
//! FUSE; without them the test says so and skips.

mod nbd_support;

use std::process::Command;

use nbd_support::quick_reproduce_in_guest;
use serde_json::Value;

#[test]
fn the_quick_table_has_every_cell_of_its_row_from_the_server_counters() {
    let Some(r) = quick_reproduce_in_guest(
        "amf",
        &["qemu-system-x86_64", "fio", "mkfs.f2fs", "fusermount3"],
    ) else {
        return;
    };
    let acc = r["setup"]["accelerator"].as_str().unwrap_or("");
    assert!(acc.starts_with("kvm") || acc.starts_with("tcg"), "{acc}");

    // Four kernel rows (ext4 and f2fs on page and dftl), each less its own baseline.
    let kernel = r["kernel"].as_array().expect("kernel rows");
    assert_eq!(kernel.len(), 4, "{r}");
    for k in kernel {
        assert_eq!(k["workload"], "randwrite");
        assert_eq!(k["consistency"]["status"], "ok", "{k}");
        let app = k["app_bytes"].as_u64().unwrap_or(0);
        let fs_bytes = k["fs_write_bytes"].as_u64().unwrap_or(0);
        // fio's file is laid out and then written at random: the file system writes at least
        // about what the workload wrote (O_DIRECT) and the mkfs baseline is not in it.
        assert!(app >= 8 << 20, "{k}");
        assert!(fs_bytes as f64 >= 0.9 * app as f64, "{k}");
        assert!(
            k["baseline"]["host_write_bytes"].as_u64() > Some(0),
            "the baseline (mkfs, mount, unmount) wrote: {k}"
        );
        let (fs_waf, ftl_waf) = (k["fs_waf"].as_f64(), k["ftl_waf"].as_f64());
        assert!(fs_waf.is_some_and(|w| (0.9..5.0).contains(&w)), "{k}");
        assert!(ftl_waf.is_some_and(|w| w >= 1.0), "{k}");
        // randwrite runs in rounds, marked on the guest's ttyS1: --quick stops after two, which
        // is never steady (the rule needs five). The row's FTL level is its window's, from
        // the counters the host read at the marks: programs over host pages.
        assert_eq!(k["steady_state"]["rounds"], 2, "{k}");
        assert_eq!(k["steady_state"]["met"], false, "two rounds: {k}");
        let w = &k["window"];
        assert_eq!(w["rounds"].as_array().map(Vec::len), Some(2), "{k}");
        let programs = w["figures"]["flash_programs"].as_u64().unwrap_or(0) as f64;
        let pages = w["figures"]["host_write_pages"].as_u64().unwrap_or(1) as f64;
        assert!(
            (ftl_waf.unwrap_or(0.0) - programs / pages).abs() < 1e-9,
            "{k}"
        );
        // Each round wrote half the file at random, all of it through to the device.
        for round in w["rounds"].as_array().into_iter().flatten() {
            let (app, fs) = (
                round["app_bytes"].as_u64(),
                round["fs_write_bytes"].as_u64(),
            );
            assert!(app > Some(1 << 20), "{round}");
            assert!(fs >= app, "O_DIRECT and an fsync per round: {round}");
            assert!(
                round["app_mib_per_device_s"].as_f64() > Some(0.0),
                "{round}"
            );
        }
    }
    // Our f2fs mode (page, dftl) and ALFS on AMF.
    assert_eq!(r["host"].as_array().map(Vec::len), Some(3), "{r}");
    // The slides' seven cells of the row, each with the slides' value and ours.
    let cells = r["cells"].as_array().expect("cells");
    let names: Vec<&str> = cells.iter().filter_map(|c| c["cell"].as_str()).collect();
    assert_eq!(
        names,
        [
            "FIO (RW) EXT4+page FTL",
            "FIO (RW) EXT4+DFTL FTL",
            "FIO (RW) F2FS+page FS",
            "FIO (RW) F2FS+page FTL",
            "FIO (RW) F2FS+DFTL FS",
            "FIO (RW) F2FS+DFTL FTL",
            "FIO (RW) AMF (ALFS) FS",
        ]
    );
    let paper: Vec<f64> = cells.iter().filter_map(|c| c["paper"].as_f64()).collect();
    assert_eq!(paper, [1.41, 1.45, 1.35, 1.82, 1.34, 2.18, 1.38]);
    for c in cells {
        let (p, o) = (c["paper"].as_f64().unwrap(), c["ours"].as_f64().unwrap());
        let e = c["error"].as_f64().unwrap();
        assert!((e - (o / p - 1.0)).abs() < 1e-3, "{c}");
        assert_eq!(
            c["within"],
            e.abs() <= 0.15 && c["consistency"] == "ok",
            "{c}"
        );
        assert!(!c["why"].as_str().unwrap_or("").is_empty(), "{c}");
    }
    // Kernel F2FS beside our f2fs mode, on both FTLs.
    assert_eq!(r["f2fs_model"].as_array().map(Vec::len), Some(2), "{r}");
}

/// The guest's side, run on the host: `fs waf-workload` runs one `fs waf` workload in a
/// directory and prints what it wrote; more than one workload, or none known, is refused.
#[test]
fn the_workload_verb_runs_one_workload_in_a_directory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path().to_str().expect("utf-8");
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_noftl"))
            .args(["fs", "waf-workload", "--dir", d])
            .args(extra)
            .output()
            .expect("run noftl")
    };
    let out = run(&[
        "--workloads",
        "postmark-low",
        "--postmark-low-files",
        "20",
        "--postmark-transactions",
        "50",
    ]);
    let out = if out.status.success() {
        out
    } else {
        panic!("{}", String::from_utf8_lossy(&out.stderr))
    };
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(r["workload"], "postmark-low");
    assert!(r["app_bytes"].as_u64() > Some(0), "{r}");
    assert!(r["free_bytes_before"].as_u64() > Some(0), "{r}");
    let out = run(&["--workloads", "seqwrite,randwrite"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("exactly one"));
    let out = run(&["--workloads", "nosuch"]);
    assert!(!out.status.success());
    // Rounds only for the workloads that repeat their work.
    let out = run(&["--workloads", "postmark-low", "--rounds-tty", "/dev/null"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not in rounds"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
