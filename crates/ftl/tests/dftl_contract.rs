//! The BlockDevice contract, checked on DFTL at several cache sizes.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use ftl::testkit::{check_contract, random_vs_model};
use ftl::{build, BlockDevice, FtlOptions};
use nand::{DeviceConfig, Nand};

fn tiny() -> Nand {
    Nand::new(DeviceConfig::preset("tiny", &[]).unwrap()).unwrap()
}

#[test]
fn dftl_meets_the_block_device_contract() {
    for cache in [0.02, 0.15, 1.0] {
        let mut dev = build(
            "dftl",
            tiny(),
            &FtlOptions {
                cache_fraction: cache,
                ..FtlOptions::default()
            },
        )
        .unwrap();
        check_contract(dev.as_mut()).unwrap_or_else(|e| panic!("cache {cache}: {e}"));
    }
}

#[test]
fn dftl_matches_a_memdisk_under_random_writes_reads_and_trims_with_gc() {
    for (seed, cache) in [(1, 0.02), (2, 0.15), (3, 0.35), (4, 1.0)] {
        let mut dev = build(
            "dftl",
            tiny(),
            &FtlOptions {
                seed,
                cache_fraction: cache,
                ..FtlOptions::default()
            },
        )
        .unwrap();
        random_vs_model(dev.as_mut(), seed, 6000, 0)
            .unwrap_or_else(|e| panic!("cache {cache}: {e}"));
        let r = dev.report();
        assert!(
            r.gc.erases > 0,
            "the workload should have needed garbage collection: {r:?}"
        );
        if cache < 1.0 {
            assert!(r.translation_writes > 0 && r.translation_reads > 0, "{r:?}");
        }
    }
}
