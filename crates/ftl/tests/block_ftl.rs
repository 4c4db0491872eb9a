//! Behaviour of the block-level mapping FTL (`ftl::block`).
#![allow(clippy::unwrap_used)]

mod block_harness;

use block_harness::*;
use ftl::block::{mapping_bytes_for, BlockFtl, BlockOptions};
use ftl::{BlockDevice, FtlError};

fn fresh(overrides: &[&str]) -> BlockFtl {
    BlockFtl::new(tiny(overrides), &BlockOptions::default()).expect("format")
}

#[test]
fn random_workload_matches_the_model() {
    let cap = fresh(&[]).capacity_pages();
    for seed in 1..=4 {
        checked_run(fresh(&[]), seed, 1500, &mut random_ops(cap));
    }
}

#[test]
fn capacity_follows_the_spare_factor_and_bad_requests_change_nothing() {
    let mut d = fresh(&[]);
    // 128 blocks x (1 - 0.07) = 119 logical blocks of 16 pages.
    assert_eq!(d.capacity_pages(), 119 * 16);
    let cap = d.capacity_pages();
    d.write(0, 5, &vec![7u8; PAGE], false).unwrap();
    let before = d.report();
    assert!(matches!(
        d.write(0, cap, &vec![1u8; PAGE], false),
        Err(FtlError::OutOfRange { .. })
    ));
    assert!(matches!(
        d.write(0, cap - 1, &vec![1u8; 2 * PAGE], false),
        Err(FtlError::OutOfRange { .. })
    ));
    assert!(matches!(
        d.write(0, 0, &[1u8; 100], false),
        Err(FtlError::Misaligned { .. })
    ));
    assert!(matches!(
        d.trim(0, cap, 1),
        Err(FtlError::OutOfRange { .. })
    ));
    assert!(matches!(
        d.read(0, u64::MAX, &mut vec![0u8; PAGE]),
        Err(FtlError::OutOfRange { .. })
    ));
    assert_eq!(d.report(), before);
    let mut b = vec![1u8; 2 * PAGE];
    d.read(0, 4, &mut b).unwrap();
    assert!(b[..PAGE].iter().all(|&x| x == 0) && b[PAGE..].iter().all(|&x| x == 7));
}

#[test]
fn appends_are_in_place_and_overwrites_merge() {
    let mut d = fresh(&[]);
    // A sequential fill of a block programs each page once: no merge.
    d.write(0, 0, &vec![1u8; 16 * PAGE], false).unwrap();
    assert_eq!(d.merges(), 0);
    let r = d.report();
    assert_eq!((r.gc.migrations, r.gc.erases), (0, 0));
    assert!((r.waf - 1.0).abs() < 1e-9);
    // Overwriting one page rewrites the block: 15 copies, 1 erase.
    d.write(0, 3, &vec![2u8; PAGE], false).unwrap();
    let r = d.report();
    assert_eq!(d.merges(), 1);
    assert_eq!((r.gc.migrations, r.gc.erases), (15, 1));
    assert!((r.waf - 32.0 / 17.0).abs() < 1e-9, "waf {}", r.waf);
    // Appending past the last written page of a block stays in place.
    d.write(0, 16, &vec![3u8; PAGE], false).unwrap();
    d.write(0, 20, &vec![3u8; PAGE], false).unwrap();
    assert_eq!(d.merges(), 1);
}

#[test]
fn trims_read_as_zeros_and_whole_block_trims_just_erase() {
    let mut d = fresh(&[]);
    d.write(0, 0, &vec![9u8; 32 * PAGE], false).unwrap();
    d.trim(0, 16, 16).unwrap();
    let r = d.report();
    assert_eq!((r.gc.migrations, r.gc.erases), (0, 1));
    d.trim(0, 2, 3).unwrap();
    let r = d.report();
    assert_eq!((r.gc.migrations, r.gc.erases), (13, 2));
    let mut b = vec![1u8; 32 * PAGE];
    d.read(0, 0, &mut b).unwrap();
    for (i, p) in b.chunks(PAGE).enumerate() {
        let want = if (2..5).contains(&i) || i >= 16 { 0 } else { 9 };
        assert!(p.iter().all(|&x| x == want), "page {i}");
    }
}

#[test]
fn multi_block_requests_spread_over_dies() {
    // Four blocks written at once land on four dies: far faster than four blocks one after the other.
    let mut d = fresh(&[]);
    let one = d.write(0, 0, &vec![1u8; 16 * PAGE], false).unwrap();
    let mut d = fresh(&[]);
    let four = d.write(0, 0, &vec![1u8; 64 * PAGE], false).unwrap();
    assert!(four < 2 * one, "4 blocks took {four} ns, 1 block {one} ns");
}

#[test]
fn reopening_a_cleanly_stopped_device_keeps_everything() {
    let mut d = fresh(&[]);
    let cap = d.capacity_pages();
    let mut m = Model::new(cap);
    let mut rng = Rng::new(42);
    let mut now = 0;
    run(&mut d, &mut m, &mut rng, 600, &mut now, &mut |r, _| {
        random_op(r, cap)
    });
    let mut d = BlockFtl::open(d.into_nand(), &BlockOptions::default()).unwrap();
    verify_all(&mut d, &m, now);
}

#[test]
fn same_seed_same_report() {
    let cap = fresh(&[]).capacity_pages();
    let go = || {
        let (_, report, ns) = checked_run(fresh(&[]), 7, 500, &mut random_ops(cap));
        (report, ns)
    };
    assert_eq!(go(), go());
}

#[test]
fn mapping_memory_matches_amfs_table() {
    const GIB: u64 = 1 << 30;
    assert_eq!(mapping_bytes_for(512 * GIB, 4096, 128), 4 << 20);
    assert_eq!(mapping_bytes_for(1024 * GIB, 4096, 128), 8 << 20);
    let d = fresh(&[]);
    assert_eq!(d.report().mapping_bytes, 4 * 119);
}

#[test]
fn random_writes_after_a_fill_cost_a_block_rewrite_each() {
    // Uniform random 4 KiB overwrites after a sequential fill: every write merges its block, so
    // WAF ~ pages per block (16 on tiny) for the block FTL.
    let mut d = fresh(&[]);
    let cap = d.capacity_pages();
    d.write(0, 0, &vec![1u8; cap as usize * PAGE], false)
        .unwrap();
    let mut rng = Rng::new(5);
    let mut now = 0;
    for _ in 0..2 * cap {
        now = d
            .write(now, rng.below(cap), &vec![2u8; PAGE], false)
            .unwrap();
    }
    let r = d.report();
    let random_waf = (r.waf * (3 * cap) as f64 - cap as f64) / (2 * cap) as f64;
    eprintln!("block: fill+2x random: waf {:.2} (random part {:.2}), merges {}, migrations {}, erases {}, cpu {:.0} us, {} ns", r.waf, random_waf, d.merges(), r.gc.migrations, r.gc.erases, r.controller_busy_us, now);
    assert!((14.0..=16.5).contains(&random_waf), "{random_waf}");
}

#[test]
fn the_32_byte_oob_of_noftl13_is_enough_for_all_three() {
    let nand = || {
        nand::Nand::new(
            nand::DeviceConfig::preset("noftl13", &["geometry.blocks_per_plane=64".into()])
                .unwrap(),
        )
        .unwrap()
    };
    let cap = BlockFtl::new(nand(), &BlockOptions::default())
        .unwrap()
        .capacity_pages();
    let (d, _, _) = checked_run(
        BlockFtl::new(nand(), &BlockOptions::default()).unwrap(),
        1,
        300,
        &mut random_ops(cap),
    );
    let mut d = BlockFtl::open(d.into_nand(), &BlockOptions::default()).unwrap();
    d.write(0, 0, &vec![1u8; PAGE], false).unwrap();
    let f = ftl::fast::Fast::new(nand(), &ftl::fast::FastOptions::default()).unwrap();
    let cap = f.capacity_pages();
    let (f, _, _) = checked_run(f, 2, 300, &mut random_ops(cap));
    ftl::fast::Fast::open(f.into_nand(), &ftl::fast::FastOptions::default()).unwrap();
    let mut a = ftl::amf::Amf::new(nand(), &ftl::amf::AmfOptions::default()).unwrap();
    a.write(0, 0, &vec![1u8; 3 * PAGE], false).unwrap();
    let mut a = ftl::amf::Amf::open(a.into_nand(), &ftl::amf::AmfOptions::default()).unwrap();
    assert_eq!(a.write_pointer(0), Some(3));
    assert!(matches!(
        a.write(0, 2, &vec![1u8; PAGE], false),
        Err(FtlError::Overwrite { .. })
    ));
}
