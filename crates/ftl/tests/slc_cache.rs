//! The page FTL's pSLC write cache (`--slc-cache`, `page.rs` "SLC cache") on TLC chips: the
//! block-device contract and equality with a RAM disk while the cache folds, idle-time folds,
//! recovery (and its refusal of a device formatted with another share), power cuts with every
//! flushed sector intact, and the refusals of devices and FTLs that cannot run a cache.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use ftl::testkit::{
    check_contract, compare_all, count_from_env, power_cuts_across, random_vs_model, Durability,
    Pattern,
};
use ftl::{build, BlockDevice, FtlError, FtlOptions, MemDisk};
use nand::{DeviceConfig, Nand};

/// TLC chips (tlc16k's) with `page_bytes` pages on four dies, 12 blocks per plane of 96 pages.
fn tlc(page_bytes: u32) -> Nand {
    let mut o: Vec<String> = vec![
        format!("geometry.page_size_bytes={page_bytes}"),
        "geometry.channels=2".into(),
        "geometry.chips_per_channel=2".into(),
        "geometry.blocks_per_plane=12".into(),
        "geometry.pages_per_block=96".into(),
        "reliability.factory_bad_block_ratio=0".into(),
    ];
    if page_bytes == 4096 {
        o.push("geometry.oob_size_bytes=128".into());
        o.push("reliability.ecc_codeword_bytes=512".into());
    }
    Nand::new(DeviceConfig::preset("tlc16k", &o).unwrap()).unwrap()
}

/// A quarter of every plane's blocks (3 of 12) as the cache.
fn opts(cache: f64) -> FtlOptions {
    FtlOptions {
        spare_factor: 0.15,
        slc_cache: cache,
        ..FtlOptions::default()
    }
}

#[test]
fn the_cache_meets_the_contract_and_matches_a_ramdisk_while_it_folds() {
    for page_bytes in [4096, 16384] {
        let mut dev = build("page", tlc(page_bytes), &opts(0.25)).unwrap();
        check_contract(dev.as_mut()).unwrap_or_else(|e| panic!("{page_bytes}: {e}"));
        let mut dev = build("page", tlc(page_bytes), &opts(0.25)).unwrap();
        random_vs_model(dev.as_mut(), 5, 4000, 0).unwrap_or_else(|e| panic!("{page_bytes}: {e}"));
        let c = dev.report().slc_cache.unwrap();
        assert_eq!(
            c.blocks,
            3 * 2 * 4,
            "{page_bytes}: 3 blocks of each of 8 planes"
        );
        assert!(
            c.folds > 0 && c.folded_units > 0,
            "{page_bytes}: no fold: {c:?}"
        );
        assert!(c.absorbed > 0, "{page_bytes}: no rewrite absorbed: {c:?}");
        assert_eq!(c.host_writes_direct, 0, "{page_bytes}: {c:?}");
        // Every folded unit went into a native page program, packed.
        let upp = u64::from(page_bytes / 4096);
        assert!(c.fold_programs >= c.folded_units.div_ceil(upp), "{c:?}");
    }
}

#[test]
fn capacity_counts_the_native_blocks_only() {
    let with = build("page", tlc(16384), &opts(0.25)).unwrap();
    let without = build("page", tlc(16384), &opts(0.0)).unwrap();
    // 9 of 12 blocks per plane hold capacity (the GC reserve is the same 6 blocks).
    let (w, wo) = (
        with.capacity_pages() as f64,
        without.capacity_pages() as f64,
    );
    let expect = (9.0 * 8.0 - 6.0) / (12.0 * 8.0 - 6.0);
    assert!((w / wo - expect).abs() < 0.01, "{w} / {wo}");
    assert!(without.report().slc_cache.is_none());
}

#[test]
fn idle_time_folds_the_cache_and_a_reopen_recovers_both_spaces() {
    let mut dev = build("page", tlc(16384), &opts(0.25)).unwrap();
    let mut model = MemDisk::new(dev.capacity_pages());
    let mut buf = vec![0u8; 4096];
    let mut t = 0;
    for i in 0..2000u64 {
        let lpn = (i * 7919) % dev.capacity_pages();
        ftl::testkit::fill_page(&mut buf, lpn, i);
        t = dev.write(t, lpn, &buf, false).unwrap();
        model.write(t, lpn, &buf, false).unwrap();
    }
    t = dev.flush(t).unwrap();
    let before = dev.report().slc_cache.unwrap();
    t = dev.background(t, 64).unwrap();
    let after = dev.report().slc_cache.unwrap();
    assert!(after.idle_folds > before.idle_folds, "{after:?}");
    compare_all(dev.as_mut(), &mut model, t).unwrap();
    // Recovery splits the device's pages between the two spaces again.
    let nand = dev.into_nand().unwrap();
    let mut dev = ftl::open("page", nand, &opts(0.25)).unwrap();
    compare_all(dev.as_mut(), &mut model, t).unwrap();
    // Another share moves the partition: refused, naming the knob.
    let nand = dev.into_nand().unwrap();
    let e = ftl::open("page", nand, &opts(0.4))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("--slc-cache"), "{e}");
}

/// Power cuts with the cache on, 16 KiB TLC pages: every flushed sector (and every returned
/// trim) survives, including cuts during folds, their pads and the cache's erases.
/// `SLC_CACHE_CUTS` sets the cuts per seed (default 12).
#[test]
fn every_flushed_sector_survives_power_cuts_with_the_cache_on() {
    let cuts = count_from_env("SLC_CACHE_CUTS", 12);
    let make =
        || -> Result<Box<dyn BlockDevice>, FtlError> { build("page", tlc(16384), &opts(0.25)) };
    let reopen = |n: Nand| ftl::open("page", n, &opts(0.25));
    // A run of this length folds (the cuts land among folds, pads and the cache's erases).
    let mut dev = make().unwrap();
    random_vs_model(dev.as_mut(), 3, 1500, 0).unwrap();
    assert!(dev.report().slc_cache.unwrap().folds >= 4);
    for seed in [3, 4] {
        let (total, _) = power_cuts_across(
            &make,
            &reopen,
            seed,
            1500,
            cuts,
            Durability::TrimsAcknowledged,
            Pattern::Random,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(total > 1000, "only {total} flash operations");
    }
}

#[test]
fn slc_chips_other_ftls_and_too_small_a_share_are_refused_before_anything_is_built() {
    let slc = Nand::new(DeviceConfig::preset("tiny", &[]).unwrap()).unwrap();
    let e = build("page", slc, &opts(0.25)).err().unwrap().to_string();
    assert!(e.contains("MLC or TLC"), "{e}");
    for kind in ["dftl", "fast", "block", "amf"] {
        let e = build(kind, tlc(16384), &opts(0.25))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no pSLC write cache"), "{kind}: {e}");
    }
    // 5% of 12 blocks per plane is none.
    let e = build("page", tlc(16384), &opts(0.05))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("0 per plane"), "{e}");
    let e = build("page", tlc(16384), &opts(0.75))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("50%"), "{e}");
}

/// The fold's own paired-page rule, cut where it matters: pages flushed while in pSLC are then
/// folded (their pSLC block erased) and the host goes on writing other pages with no FLUSH, so
/// the next fold's programs land on the native word line the previous fold left open. A cut at
/// every flash operation from the flush to the end of the second fold must leave every flushed
/// page intact: the fold completes its word lines before it erases the pSLC source.
#[test]
fn a_cut_during_the_next_fold_never_destroys_pages_an_earlier_fold_moved() {
    use ftl::testkit::{decode_page, fill_page, Content};
    const FLUSHED: u64 = 200;
    let make = || build("page", tlc(4096), &opts(0.25)).unwrap();
    // Writes FLUSHED pages, flushes, then writes pages FLUSHED.. until `stop` says so or `n`
    // more are written. Returns the op count after the flush and the writes done after it.
    let run = |dev: &mut dyn BlockDevice,
               n: u64,
               stop: &dyn Fn(&dyn BlockDevice) -> bool|
     -> Result<(u64, u64), FtlError> {
        let mut buf = vec![0u8; 4096];
        let mut t = 0;
        for l in 0..FLUSHED {
            fill_page(&mut buf, l, 1);
            t = dev.write(t, l, &buf, false)?;
        }
        t = dev.flush(t)?;
        let flushed_ops = dev.nand().unwrap().ops_issued();
        for i in 0..n {
            let l = FLUSHED + i;
            fill_page(&mut buf, l, 1);
            t = dev.write(t, l, &buf, false)?;
            if stop(dev) {
                return Ok((flushed_ops, i + 1));
            }
        }
        Ok((flushed_ops, n))
    };
    let mut dev = make();
    let (from, writes) = run(dev.as_mut(), 20_000, &|d| {
        d.report().slc_cache.unwrap().folds >= 2
    })
    .unwrap();
    let to = dev.nand().unwrap().ops_issued();
    assert!(
        to > from + 50,
        "two folds took only {} operations",
        to - from
    );
    // `cut_at_op` n cuts the n-th operation of the device (1-based): op `from` is the last
    // write before the flush.
    for at in from + 1..=to {
        let mut dev = make();
        dev.nand_mut().unwrap().set_fault_plan(nand::FaultPlan {
            cut_at_op: Some(at),
            ..nand::FaultPlan::default()
        });
        let _ = run(dev.as_mut(), writes, &|_| false);
        let mut n = dev.into_nand().unwrap();
        n.power_on();
        let mut dev = ftl::open("page", n, &opts(0.25)).unwrap();
        let mut page = vec![0u8; 4096];
        let t = dev.nand().unwrap().now_ns();
        let lost: Vec<u64> = (0..FLUSHED)
            .filter(|&l| {
                dev.read(t, l, &mut page).unwrap();
                decode_page(&page, l) != Content::Version(1)
            })
            .collect();
        assert!(
            lost.is_empty(),
            "cut at op {at}: flushed pages lost: {lost:?}"
        );
    }
}
