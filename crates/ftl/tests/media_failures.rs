//! Media failures on MLC and TLC chips, not power cuts: a program of an upper or middle page
//! that fails on the media (`FaultPlan::fail_paired_program_from`) tears the lower pages of its
//! word line too (nand invariant 6), and those may hold data the FTL has acknowledged, written
//! or moved there by GC. Every FTL, on an aged device (every logical page written, a quarter of
//! them again, so GC copies), must keep serving requests and keep every acknowledged write and
//! trim: the failure is the controller's to absorb (docs/ftl.md, "Program failures on paired
//! pages"). After a flush and a power cut, recovery finds the same contents.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use ftl::testkit::{compare_all, count_from_env, drive_vs_model, fill_pages, Pattern, Workload};
use ftl::{BlockDevice, FtlOptions, MemDisk, LOGICAL_PAGE_BYTES as PAGE};
use nand::{FaultPlan, Nand};

const OPS: usize = 600;

fn opts() -> FtlOptions {
    FtlOptions {
        spare_factor: 0.15,
        ..FtlOptions::default()
    }
}

/// A small MLC (64-page blocks) or TLC (96-page blocks) device with 4 KiB pages on four dies
/// (the chips of the 16 KiB presets, as in `power_loss.rs`). AMF is refused on MLC/TLC without
/// power-loss protection (a cut could tear a flushed page it cannot pad), so its device has it:
/// the capacitors do nothing against a media failure.
fn paired_device(cells: &str, plp: bool) -> Nand {
    Nand::new(ftl::testkit::paired_device_config(
        cells,
        &[format!("plp={plp}")],
    ))
    .unwrap()
}

fn pattern_for(kind: &str, cells: &str) -> Pattern {
    if kind == "amf" {
        let segment_pages =
            ftl::amf::Amf::new(paired_device(cells, true), &ftl::amf::AmfOptions::default())
                .unwrap()
                .segment_pages();
        Pattern::AppendOnly { segment_pages }
    } else {
        Pattern::Random
    }
}

/// Ages `dev` and its model alike: every logical page written once in order, then (but for the
/// append-only AMF) a seeded quarter of them again one at a time, so that blocks hold valid and
/// stale pages and GC copies; then a flush. Returns the time.
fn age(dev: &mut dyn BlockDevice, model: &mut MemDisk, kind: &str, seed: u64) -> u64 {
    let cap = dev.capacity_pages();
    let mut buf = vec![0u8; 8 * PAGE];
    let mut t = 0;
    let mut lpn = 0;
    while lpn < cap {
        let n = 8.min(cap - lpn);
        fill_pages(&mut buf, lpn, n, 1);
        t = dev.write(t, lpn, &buf[..n as usize * PAGE], false).unwrap();
        model
            .write(t, lpn, &buf[..n as usize * PAGE], false)
            .unwrap();
        lpn += n;
    }
    if kind != "amf" {
        let mut x = seed | 1;
        for i in 0..cap / 4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let l = x % cap;
            fill_pages(&mut buf, l, 1, 2 + i);
            t = dev.write(t, l, &buf[..PAGE], false).unwrap();
            model.write(t, l, &buf[..PAGE], false).unwrap();
        }
    }
    dev.flush(t).unwrap()
}

/// One run: age, arm the failure of the first paired program `after` operations into the
/// workload, run it, check everything, flush, cut the power, recover, check again and run on.
/// Returns whether the failure fired.
fn run(kind: &'static str, cells: &str, seed: u64, after: u64) -> Result<bool, String> {
    let plp = kind == "amf";
    let mut dev =
        ftl::build(kind, paired_device(cells, plp), &opts()).map_err(|e| e.to_string())?;
    let mut model = MemDisk::new(dev.capacity_pages());
    let t = age(dev.as_mut(), &mut model, kind, seed);
    let from = dev.nand().unwrap().ops_issued() + after;
    dev.nand_mut().unwrap().set_fault_plan(FaultPlan {
        fail_paired_program_from: Some(from),
        ..FaultPlan::default()
    });
    let pattern = pattern_for(kind, cells);
    let mut w = Workload::with_pattern(seed, 0, pattern, kind != "amf");
    let t = drive_vs_model(dev.as_mut(), &mut model, &mut w, OPS, t, 1000)?;
    let fired = dev.nand().unwrap().stats().failed_programs > 0;
    compare_all(dev.as_mut(), &mut model, t).map_err(|e| format!("after the failure: {e}"))?;
    let t = dev.flush(t).map_err(|e| e.to_string())?;
    let _ = t;
    let mut nand = dev.into_nand().unwrap();
    nand.power_cut();
    nand.power_on();
    let mut dev = ftl::open(kind, nand, &opts()).map_err(|e| format!("recovery: {e}"))?;
    let t = dev.nand().unwrap().now_ns();
    compare_all(dev.as_mut(), &mut model, t).map_err(|e| format!("after recovery: {e}"))?;
    let mut w2 = Workload::with_pattern(seed ^ 0x5EED, 0, pattern, false);
    let t = drive_vs_model(dev.as_mut(), &mut model, &mut w2, OPS / 3, t, 1000)
        .map_err(|e| format!("after recovery: {e}"))?;
    compare_all(dev.as_mut(), &mut model, t).map_err(|e| format!("at the end: {e}"))?;
    Ok(fired)
}

/// `points` failures spread over the workload's first operations, on MLC and TLC.
fn paired_failures(kind: &'static str, points: u64) {
    for cells in ["mlc", "tlc"] {
        let mut fired = 0;
        for i in 0..points {
            let after = 1 + i * 37;
            fired +=
                u64::from(run(kind, cells, 7 + i, after).unwrap_or_else(|e| {
                    panic!("{kind} on {cells}, failure from op +{after}: {e}")
                }));
        }
        assert!(
            fired * 4 >= points * 3,
            "{kind} on {cells}: only {fired} of {points} failures fired"
        );
    }
}

fn points() -> u64 {
    count_from_env("MEDIA_FAILURES", 6)
}

#[test]
fn page_ftl_keeps_acknowledged_data_when_an_upper_page_program_fails_on_an_aged_device() {
    paired_failures("page", points());
}

#[test]
fn dftl_keeps_acknowledged_data_when_an_upper_page_program_fails_on_an_aged_device() {
    paired_failures("dftl", points());
}

#[test]
fn block_ftl_keeps_acknowledged_data_when_an_upper_page_program_fails_on_an_aged_device() {
    paired_failures("block", points());
}

#[test]
fn fast_keeps_acknowledged_data_when_an_upper_page_program_fails_on_an_aged_device() {
    paired_failures("fast", points());
}

#[test]
fn amf_keeps_acknowledged_data_when_an_upper_page_program_fails_on_an_aged_device() {
    paired_failures("amf", points());
}
