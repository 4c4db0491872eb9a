//! The block-mapped FTLs (`block`, `fast`, `amf`) on 8 and 16 KiB flash pages, behind the
//! sector layer (`sectors.rs`): the block-device contract in 4 KiB sectors, equality with a RAM
//! disk under random writes, reads, trims and flushes with merges, power cuts (every flushed
//! sector survives), and the cost of a sector write that does not fill its page.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use ftl::testkit::{
    check_contract, count_from_env, power_cuts_across, random_vs_model, Durability, Pattern,
};
use ftl::{build, BlockDevice, FtlError, FtlOptions};
use nand::{DeviceConfig, Nand};

/// The chips of `preset` with `page_bytes` pages on four dies, `blocks` blocks per plane of
/// `ppb` pages.
fn device(preset: &str, page_bytes: u32, ppb: u32, blocks: u32) -> Nand {
    let o: Vec<String> = vec![
        format!("geometry.page_size_bytes={page_bytes}"),
        "geometry.channels=2".into(),
        "geometry.chips_per_channel=2".into(),
        format!("geometry.blocks_per_plane={blocks}"),
        format!("geometry.pages_per_block={ppb}"),
        "reliability.factory_bad_block_ratio=0".into(),
    ];
    Nand::new(DeviceConfig::preset(preset, &o).unwrap()).unwrap()
}

/// The same chips behind power-loss protection (what AMF needs on MLC/TLC).
fn plp(nand: Nand) -> Nand {
    let mut cfg = nand.config().clone();
    cfg.plp = true;
    Nand::new(cfg).unwrap()
}

fn opts() -> FtlOptions {
    FtlOptions {
        spare_factor: 0.25,
        ..FtlOptions::default()
    }
}

#[test]
fn block_and_fast_on_8k_and_16k_pages_meet_the_contract_and_match_a_ramdisk_with_merges() {
    for kind in ["block", "fast"] {
        for page_bytes in [8192, 16384] {
            let mut dev = build(kind, device("mlc16k", page_bytes, 16, 12), &opts()).unwrap();
            assert_eq!(
                dev.capacity_pages() % u64::from(page_bytes / 4096),
                0,
                "{kind}: whole pages of sectors"
            );
            check_contract(dev.as_mut()).unwrap_or_else(|e| panic!("{kind} {page_bytes}: {e}"));
            let mut dev = build(kind, device("mlc16k", page_bytes, 16, 12), &opts()).unwrap();
            random_vs_model(dev.as_mut(), 5, 3000, 0)
                .unwrap_or_else(|e| panic!("{kind} {page_bytes}: {e}"));
            let r = dev.report();
            assert!(r.gc.erases > 0, "{kind} {page_bytes}: no merge: {r:?}");
        }
    }
}

/// Power cuts test what the sector layer adds: a flushed sector is in the inner FTL and stays
/// there, on SLC chips and on MLC chips, where the inner FTL completes open word lines at FLUSH
/// and before a merge erases its sources (docs/ftl.md, "Paired pages in the block-mapped FTLs").
#[test]
fn block_and_fast_on_16k_slc_and_mlc_pages_keep_every_flushed_sector_across_power_cuts() {
    let cuts = count_from_env("SECTORS_CUTS", 15);
    for (kind, preset) in [
        ("block", "tiny"),
        ("fast", "tiny"),
        ("block", "mlc16k"),
        ("fast", "mlc16k"),
    ] {
        let make = move || -> Result<Box<dyn BlockDevice>, FtlError> {
            build(kind, device(preset, 16384, 16, 12), &opts())
        };
        let reopen = move |n: Nand| ftl::open(kind, n, &opts());
        for seed in [3, 4] {
            let (total, _) = power_cuts_across(
                &make,
                &reopen,
                seed,
                600,
                cuts,
                Durability::Flushed,
                Pattern::Random,
            )
            .unwrap_or_else(|e| panic!("{kind} on {preset}: {e}"));
            assert!(total > 300, "{kind}: only {total} flash operations");
        }
    }
}

#[test]
fn a_sector_write_that_does_not_fill_its_page_reads_the_old_page_and_programs_all_of_it() {
    let sector = vec![7u8; 4096];
    // Sequential sectors fill whole pages: one program per four sectors, no reads.
    let mut dev = build("block", device("mlc16k", 16384, 16, 12), &opts()).unwrap();
    let mut t = 0;
    for lpn in 0..64 {
        t = dev.write(t, lpn, &sector, false).unwrap();
    }
    t = dev.flush(t).unwrap();
    let f = dev.nand().unwrap().stats().flash_counts();
    assert_eq!(f.programs, 16, "{f:?}");
    assert_eq!(f.reads, 0, "{f:?}");
    assert!((dev.report().waf - 1.0).abs() < 1e-9, "{:?}", dev.report());
    // One sector, flushed: the rest of its page is read and the whole page programmed again
    // (the block FTL then merges its block, which the WAF shows too).
    t = dev.write(t, 5, &[9u8; 4096], false).unwrap();
    dev.flush(t).unwrap();
    let g = dev.nand().unwrap().stats().flash_counts();
    assert!(g.reads > f.reads, "the old page was read: {g:?}");
    let mut buf = vec![0u8; 16384];
    dev.read(t, 4, &mut buf).unwrap();
    assert!(buf[..4096].iter().all(|&b| b == 7) && buf[4096..8192].iter().all(|&b| b == 9));
    assert!(buf[8192..].iter().all(|&b| b == 7));
    assert!(dev.report().waf > 1.0);
}

#[test]
fn amf_on_16k_pages_takes_appends_in_sectors_and_refuses_an_append_into_a_flushed_page() {
    let mut dev = build("amf", plp(device("mlc16k", 16384, 16, 12)), &opts()).unwrap();
    let mut t = 0;
    let sector = vec![3u8; 4096];
    // A segment written sector by sector: whole pages reach the flash.
    for lpn in 0..8 {
        t = dev.write(t, lpn, &sector, false).unwrap();
    }
    // Two sectors then a flush: the page is programmed with zeros for its other sectors.
    t = dev.write(t, 8, &sector, false).unwrap();
    t = dev.write(t, 9, &sector, false).unwrap();
    t = dev.flush(t).unwrap();
    let mut buf = vec![0u8; 4096 * 12];
    t = dev.read(t, 0, &mut buf).unwrap();
    assert!(buf[..10 * 4096].iter().all(|&b| b == 3));
    assert!(buf[10 * 4096..].iter().all(|&b| b == 0));
    // An append into the rest of that page would program it twice: refused when it arrives,
    // and nothing changes.
    let err = dev.write(t, 10, &sector, false).unwrap_err();
    assert!(
        matches!(err, FtlError::Overwrite { lpn: 10, .. }),
        "expected an overwrite refusal, got {err}"
    );
    assert!(err.to_string().contains("next page"), "{err}");
    t = dev.flush(t).unwrap();
    // A trim of part of a page is refused before it changes anything.
    assert!(matches!(dev.trim(t, 1, 2), Err(FtlError::Unsupported(_))));
    // Appends go on at the next page.
    t = dev.write(t, 12, &sector, false).unwrap();
    t = dev.flush(t).unwrap();
    dev.read(t, 0, &mut buf).unwrap();
    assert!(buf[..10 * 4096].iter().all(|&b| b == 3));
    assert!(buf[10 * 4096..].iter().all(|&b| b == 0));
}
