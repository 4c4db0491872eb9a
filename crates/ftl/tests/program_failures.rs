//! A failed program (the page torn, its block turned grown-bad: `FaultPlan::fail_op`) injected
//! at many points of a workload, on the block-mapped FTLs that retire the block and retry
//! (`block`, `fast`): every acknowledged write and trim reads back, the FTL keeps serving
//! requests, and after a power cut `open` recovers the same contents and keeps working too.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use ftl::testkit::{count_ops, fill_pages, spread_cuts, Pattern, Request, Workload};
use ftl::{BlockDevice, FtlError, FtlOptions, MemDisk, LOGICAL_PAGE_BYTES as PAGE};
use nand::{DeviceConfig, FaultPlan, Nand, NandError};

const OPS: usize = 400;

fn opts() -> FtlOptions {
    FtlOptions {
        spare_factor: 0.15,
        ..FtlOptions::default()
    }
}

fn device() -> Nand {
    let cfg = DeviceConfig::preset("tiny", &["geometry.blocks_per_plane=12".into()]).unwrap();
    Nand::new(cfg).unwrap()
}

/// The model and the pages whose content is unknown (a request that failed on an injected
/// uncorrectable read may or may not have landed).
struct Expect {
    model: MemDisk,
    unknown: Vec<bool>,
}

fn compare(dev: &mut dyn BlockDevice, e: &mut Expect, t: u64, when: &str) -> Result<(), String> {
    let (mut a, mut b) = (vec![0u8; PAGE], vec![0u8; PAGE]);
    for lpn in 0..dev.capacity_pages() {
        if e.unknown[lpn as usize] {
            continue;
        }
        dev.read(t, lpn, &mut a)
            .map_err(|x| format!("{when}: read of {lpn}: {x}"))?;
        e.model.read(t, lpn, &mut b).unwrap();
        if a != b {
            return Err(format!("{when}: lpn {lpn} differs from the model"));
        }
    }
    Ok(())
}

/// Runs `ops` requests of `w` on `dev` and the model. Writes and trims must succeed, unless the
/// injected fault was an uncorrectable read (then their pages become unknown).
fn drive(
    dev: &mut dyn BlockDevice,
    e: &mut Expect,
    w: &mut Workload,
    max_pages: u64,
    ops: usize,
    t: &mut u64,
    stamp: u64,
) -> Result<(), String> {
    let cap = dev.capacity_pages();
    let mut buf = vec![0u8; max_pages as usize * PAGE];
    let mut want = vec![0u8; max_pages as usize * PAGE];
    let read_fault = |r: &FtlError| matches!(r, FtlError::Flash(NandError::Uncorrectable { .. }));
    for op in 0..ops {
        let req = w.next(cap);
        match req {
            Request::Write {
                lpn,
                pages,
                version,
                fua,
            } => {
                let n = pages as usize * PAGE;
                fill_pages(&mut buf, lpn, pages, stamp + version);
                match dev.write(*t, lpn, &buf[..n], fua) {
                    Ok(done) => {
                        *t = done;
                        e.model.write(*t, lpn, &buf[..n], fua).unwrap();
                        (lpn..lpn + pages).for_each(|l| e.unknown[l as usize] = false);
                    }
                    Err(x) if read_fault(&x) => {
                        (lpn..lpn + pages).for_each(|l| e.unknown[l as usize] = true)
                    }
                    Err(x) => return Err(format!("op {op} {req:?}: {x}")),
                }
            }
            Request::Trim { lpn, pages } => match dev.trim(*t, lpn, pages) {
                Ok(done) => {
                    *t = done;
                    e.model.trim(*t, lpn, pages).unwrap();
                    (lpn..lpn + pages).for_each(|l| e.unknown[l as usize] = false);
                }
                Err(x) if read_fault(&x) => {
                    (lpn..lpn + pages).for_each(|l| e.unknown[l as usize] = true)
                }
                Err(x) => return Err(format!("op {op} {req:?}: {x}")),
            },
            Request::Read { lpn, pages } => {
                let n = pages as usize * PAGE;
                match dev.read(*t, lpn, &mut buf[..n]) {
                    Ok(done) => {
                        *t = done;
                        e.model.read(*t, lpn, &mut want[..n]).unwrap();
                        for i in 0..pages as usize {
                            if !e.unknown[lpn as usize + i]
                                && buf[i * PAGE..(i + 1) * PAGE] != want[i * PAGE..(i + 1) * PAGE]
                            {
                                return Err(format!(
                                    "op {op}: lpn {} differs from the model",
                                    lpn + i as u64
                                ));
                            }
                        }
                    }
                    Err(x) if read_fault(&x) => {}
                    Err(x) => return Err(format!("op {op} {req:?}: {x}")),
                }
            }
            Request::Flush => *t = dev.flush(*t).map_err(|x| x.to_string())?,
        }
    }
    Ok(())
}

/// One run: the fault at flash operation `at`, the workload, a check, a power cut, `open`, a
/// check, more requests, a check. Returns whether the fault was a failed program.
fn run_with_failure(
    kind: &'static str,
    seed: u64,
    pattern: Pattern,
    at: u64,
) -> Result<bool, String> {
    let mut dev = ftl::build(kind, device(), &opts()).map_err(|x| x.to_string())?;
    let cap = dev.capacity_pages();
    let base = dev.nand().unwrap().ops_issued();
    dev.nand_mut().unwrap().set_fault_plan(FaultPlan {
        fail_op: Some(base + at),
        ..FaultPlan::default()
    });
    let mut e = Expect {
        model: MemDisk::new(cap),
        unknown: vec![false; cap as usize],
    };
    let mut w = Workload::with_pattern(seed, 0, pattern, true);
    w.trim_percent = 8;
    let mut t = 0;
    drive(
        dev.as_mut(),
        &mut e,
        &mut w,
        pattern.max_request_pages(),
        OPS,
        &mut t,
        0,
    )?;
    compare(dev.as_mut(), &mut e, t, "after the failure")?;
    let failed = dev.nand().unwrap().stats().failed_programs > 0;
    let mut nand = dev.into_nand().unwrap();
    nand.power_cut();
    nand.power_on();
    let mut dev = ftl::open(kind, nand, &opts()).map_err(|x| format!("recovery: {x}"))?;
    let mut t = dev.nand().unwrap().now_ns();
    compare(dev.as_mut(), &mut e, t, "after recovery")?;
    let mut w2 = Workload::with_pattern(seed ^ 0xA5A5, 0, pattern, false);
    drive(
        dev.as_mut(),
        &mut e,
        &mut w2,
        pattern.max_request_pages(),
        OPS / 2,
        &mut t,
        1_000_000,
    )?;
    compare(dev.as_mut(), &mut e, t, "after recovery and more requests")?;
    Ok(failed)
}

fn failures_everywhere(kind: &'static str, pattern: Pattern, points: u64) {
    let make = || ftl::build(kind, device(), &opts());
    let total = count_ops(&make, 7, OPS, pattern).unwrap();
    let mut programs = 0;
    for at in spread_cuts(total, points, 5) {
        programs += u64::from(
            run_with_failure(kind, 7, pattern, at)
                .unwrap_or_else(|x| panic!("{kind} {pattern:?}, failure at op {at}: {x}")),
        );
    }
    assert!(
        programs * 2 > points,
        "{kind}: only {programs} of {points} faults hit a program"
    );
}

#[test]
fn fast_survives_a_failed_program_anywhere_and_recovers_after_a_power_cut() {
    let ppb = u64::from(device().geometry().pages_per_block);
    failures_everywhere("fast", Pattern::Random, 40);
    failures_everywhere("fast", Pattern::Sequential { block_pages: ppb }, 25);
}

#[test]
fn block_ftl_survives_a_failed_program_anywhere_and_recovers_after_a_power_cut() {
    failures_everywhere("block", Pattern::Random, 40);
}

/// Fails the next flash operation of `dev`.
fn fail_next(dev: &mut dyn BlockDevice) {
    let n = dev.nand().unwrap().ops_issued() + 1;
    dev.nand_mut().unwrap().set_fault_plan(FaultPlan {
        fail_op: Some(n),
        ..FaultPlan::default()
    });
}

fn page_of(stamp: u8) -> Vec<u8> {
    vec![stamp; PAGE]
}

fn read_page(dev: &mut dyn BlockDevice, lpn: u64) -> Vec<u8> {
    let mut b = vec![0u8; PAGE];
    dev.read(0, lpn, &mut b).unwrap();
    b
}

/// A grown-bad block keeps its pages for good (it is never erased): a page trimmed before or
/// after its block went bad must stay trimmed even once the trim's own record is gone and
/// power is cut.
#[test]
fn trimmed_pages_on_a_grown_bad_block_stay_trimmed_across_a_power_cut() {
    for kind in ["fast", "block"] {
        let mut dev = ftl::build(kind, device(), &opts()).unwrap();
        let cap = dev.capacity_pages();
        dev.write(0, 0, &page_of(1), false).unwrap();
        dev.write(0, 1, &page_of(2), false).unwrap();
        dev.trim(0, 0, 1).unwrap();
        // The append of page 2 fails: the block holding pages 0 (trimmed) and 1 goes bad.
        fail_next(dev.as_mut());
        dev.write(0, 2, &page_of(3), false).unwrap();
        assert!(
            dev.nand().unwrap().stats().failed_programs == 1,
            "{kind}: the fault missed the program"
        );
        // Page 1 and 2 trimmed after the failure; then enough overwrites elsewhere that every
        // log block of the trims is reclaimed.
        dev.trim(0, 1, 2).unwrap();
        let mut x = 7u64;
        for i in 0..3000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let lpn = 64 + (x >> 33) % (cap - 64);
            dev.write(0, lpn, &page_of((i % 200) as u8 + 10), false)
                .unwrap();
        }
        for lpn in 0..3 {
            assert!(
                read_page(dev.as_mut(), lpn).iter().all(|&b| b == 0),
                "{kind}: lpn {lpn} came back before the cut"
            );
        }
        let mut nand = dev.into_nand().unwrap();
        nand.power_cut();
        nand.power_on();
        let mut dev = ftl::open(kind, nand, &opts()).unwrap();
        for lpn in 0..3 {
            assert!(
                read_page(dev.as_mut(), lpn).iter().all(|&b| b == 0),
                "{kind}: trimmed lpn {lpn} came back after recovery"
            );
        }
    }
}
