//! `noftl crashtest --preset/--set` on MLC and TLC chips: power cuts land on upper-page
//! programs, whose interruption destroys the lower pages of their word line (nand invariant 6),
//! and on the pad pages that complete word lines at durability points (ftl space invariant 9);
//! every acknowledged commit survives on the page FTL and DFTL, and on the NoFTL store (its
//! units gathered into 16 KiB pages, its log in the default region or in a pSLC region of its
//! own). Device flags the crash disk cannot honour are refused.

mod cli_support;
use cli_support::{noftl, noftl_json};

/// The 16 KiB presets' chips (`mlc16k`, `tlc16k`) on a small device with `page_bytes` pages (4
/// KiB: one logical page per flash page; 16 KiB: four, through the FTL's write buffer): four
/// dies, ten blocks per plane, 64-page MLC or 96-page TLC blocks.
fn shrunk(preset: &str, page_bytes: u32) -> Vec<String> {
    let ppb = if preset == "mlc16k" { 64 } else { 96 };
    let mut a = vec!["--preset".to_string(), preset.to_string()];
    for s in [
        format!("geometry.page_size_bytes={page_bytes}"),
        "geometry.channels=2".into(),
        "geometry.chips_per_channel=2".into(),
        "geometry.blocks_per_plane=10".into(),
        format!("geometry.pages_per_block={ppb}"),
        "reliability.factory_bad_block_ratio=0".into(),
        "reliability.ecc_codeword_bytes=512".into(),
    ] {
        a.push("--set".into());
        a.push(s);
    }
    a
}

#[test]
fn tpcb_crashtest_on_mlc_and_tlc_with_4k_and_16k_pages_keeps_every_acknowledged_commit_on_page_and_dftl(
) {
    for (preset, page_bytes) in [
        ("mlc16k", 4096),
        ("tlc16k", 4096),
        ("mlc16k", 16384),
        ("tlc16k", 16384),
    ] {
        for ftl in ["page", "dftl"] {
            let dev = shrunk(preset, page_bytes);
            let mut args = vec![
                "crashtest",
                "--workload",
                "tpcb",
                "--storage",
                ftl,
                "--seeds",
                "15",
                "--json",
            ];
            args.extend(dev.iter().map(String::as_str));
            let v = noftl_json(&args);
            assert_eq!(v["verified"], 15, "{preset} {page_bytes} {ftl}: {v}");
            let inside = v["faults_inside_workload"].as_u64().unwrap_or(0);
            assert!(
                inside >= 12,
                "{preset} {ftl}: only {inside} cuts inside: {v}"
            );
        }
    }
}

#[test]
fn tpcb_and_tpcc_crashtests_on_native_with_16k_mlc_and_tlc_pages_keep_every_acknowledged_commit() {
    for preset in ["mlc16k", "tlc16k"] {
        for (workload, log_region, page_size) in [
            ("tpcb", None, "4096"),
            ("tpcc", None, "16384"),
            ("tpcb", Some("MAX_CHIPS=1,CELL_MODE=pSLC"), "4096"),
        ] {
            let dev = shrunk(preset, 16384);
            let mut args = vec![
                "crashtest",
                "--workload",
                workload,
                "--storage",
                "native",
                "--page-size",
                page_size,
                "--seeds",
                "12",
                "--json",
            ];
            args.extend(dev.iter().map(String::as_str));
            if let Some(r) = log_region {
                args.extend(["--log-region", r]);
            }
            let v = noftl_json(&args);
            assert_eq!(v["verified"], 12, "{preset} {workload} {log_region:?}: {v}");
            let inside = v["faults_inside_workload"].as_u64().unwrap_or(0);
            assert!(
                inside >= 9,
                "{preset} {workload}: only {inside} cuts inside: {v}"
            );
        }
    }
}

#[test]
fn device_flags_are_refused_on_the_crash_disk_and_bad_overrides_before_any_seed() {
    let (ok, _, err) = noftl(&[
        "crashtest",
        "--storage",
        "memdisk",
        "--set",
        "cell.native=mlc",
    ]);
    assert!(!ok);
    assert!(err.contains("the crash disk (memdisk) has none"), "{err}");
    let (ok, _, err) = noftl(&[
        "crashtest",
        "--storage",
        "page",
        "--set",
        "geometry.channels=0",
    ]);
    assert!(!ok);
    assert!(err.contains("channels"), "{err}");
    let (ok, _, err) = noftl(&[
        "crashtest",
        "--storage",
        "page",
        "--log-region",
        "MAX_CHIPS=1",
    ]);
    assert!(!ok);
    assert!(err.contains("the native store's log"), "{err}");
}

/// `--fault paired` (a media failure of an upper-page program) runs on MLC flash and is refused
/// with the reason where there is no upper page: the crash disk and SLC chips.
#[test]
fn fault_paired_runs_on_mlc_and_is_refused_on_the_crash_disk_and_slc() {
    let mut args = vec![
        "crashtest",
        "--storage",
        "page",
        "--fault",
        "paired",
        "--seeds",
        "3",
    ];
    let dev = shrunk("mlc16k", 4096);
    args.extend(dev.iter().map(String::as_str));
    let (ok, text, err) = noftl(&args);
    assert!(ok, "{err}");
    assert!(text.contains("3 of 3 recoveries verified"), "{text}");
    assert!(text.contains("upper-page program"), "{text}");
    for (args, why) in [
        (
            &["crashtest", "--fault", "paired", "--seeds", "1"][..],
            "crash disk has none",
        ),
        (
            &[
                "crashtest",
                "--storage",
                "page",
                "--fault",
                "paired",
                "--seeds",
                "1",
            ][..],
            "slc chips have none",
        ),
        (
            &[
                "crashtest",
                "--storage",
                "native",
                "--fault",
                "mixed",
                "--seeds",
                "1",
            ][..],
            "--fault mixed fails an upper-page program, and slc chips have none",
        ),
    ] {
        let (ok, _, err) = noftl(args);
        assert!(!ok);
        assert!(err.contains(why), "{err}");
    }
}
