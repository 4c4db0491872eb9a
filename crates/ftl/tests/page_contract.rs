//! The BlockDevice contract, checked on the page-mapped FTL.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use ftl::testkit::{check_contract, random_vs_model};
use ftl::{build, BlockDevice, FtlOptions};
use nand::{DeviceConfig, Nand};

fn tiny(overrides: &[&str]) -> Nand {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    Nand::new(DeviceConfig::preset("tiny", &o).unwrap()).unwrap()
}

#[test]
fn page_ftl_meets_the_block_device_contract() {
    let mut dev = build("page", tiny(&[]), &FtlOptions::default()).unwrap();
    check_contract(dev.as_mut()).unwrap();
}

#[test]
fn page_ftl_matches_a_memdisk_under_random_writes_reads_and_trims_with_gc() {
    for seed in 1..=3 {
        let mut dev = build("page", tiny(&[]), &FtlOptions { seed, ..FtlOptions::default() }).unwrap();
        random_vs_model(dev.as_mut(), seed, 6000, 0).unwrap();
        let r = dev.report();
        assert!(r.gc.erases > 0, "the workload should have needed garbage collection: {r:?}");
    }
}
