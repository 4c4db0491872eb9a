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
        let mut dev = build(
            "page",
            tiny(&[]),
            &FtlOptions {
                seed,
                ..FtlOptions::default()
            },
        )
        .unwrap();
        random_vs_model(dev.as_mut(), seed, 6000, 0).unwrap();
        let r = dev.report();
        assert!(
            r.gc.erases > 0,
            "the workload should have needed garbage collection: {r:?}"
        );
    }
}

#[test]
fn idle_time_background_gc_keeps_every_page() {
    for kind in ["page", "dftl"] {
        let opts = FtlOptions {
            seed: 4,
            ..FtlOptions::default()
        };
        let mut dev = build(kind, tiny(&[]), &opts).unwrap();
        let mut model = ftl::MemDisk::new(dev.capacity_pages());
        let mut t = 0;
        let mut page = vec![0u8; ftl::LOGICAL_PAGE_BYTES];
        for i in 0..4000u64 {
            let lpn = (i * 7919) % dev.capacity_pages();
            ftl::testkit::fill_page(&mut page, lpn, i);
            t = dev.write(t, lpn, &page, false).unwrap();
            model.write(t, lpn, &page, false).unwrap();
        }
        let erases = dev.report().gc.erases;
        let t2 = dev.background(t, 64).unwrap();
        assert!(
            dev.report().gc.erases > erases,
            "{kind}: background GC collected nothing"
        );
        assert!(t2 > t);
        ftl::testkit::compare_all(dev.as_mut(), &mut model, t2).unwrap();
    }
}
