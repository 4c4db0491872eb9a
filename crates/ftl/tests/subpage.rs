//! The page-mapped FTLs on 8 and 16 KiB flash pages: 4 KiB logical pages mapped on their own
//! (sub-page mapping, space.rs "Units") through the controller's write buffer (wbuf.rs). The
//! block-device contract, equality with a RAM disk under random writes, reads, trims and
//! flushes with garbage collection, and power cuts on MLC and TLC: every flushed write and every
//! trim survives, nothing else comes back but an older or newer version.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use ftl::testkit::{check_contract, power_cuts_across, random_vs_model, Durability, Pattern};
use ftl::{build, BlockDevice, FtlError, FtlOptions};
use nand::{DeviceConfig, Nand};

/// The chips of `preset` (mlc16k, tlc16k) with `page_bytes` pages on four dies, 10 blocks per
/// plane of `ppb` pages.
fn device(preset: &str, page_bytes: u32, ppb: u32) -> Nand {
    let o: Vec<String> = vec![
        format!("geometry.page_size_bytes={page_bytes}"),
        "geometry.channels=2".into(),
        "geometry.chips_per_channel=2".into(),
        "geometry.blocks_per_plane=10".into(),
        format!("geometry.pages_per_block={ppb}"),
        "reliability.factory_bad_block_ratio=0".into(),
    ];
    Nand::new(DeviceConfig::preset(preset, &o).unwrap()).unwrap()
}

fn opts() -> FtlOptions {
    FtlOptions {
        spare_factor: 0.15,
        ..FtlOptions::default()
    }
}

#[test]
fn page_ftl_and_dftl_on_16k_pages_meet_the_contract_and_match_a_ramdisk_with_gc() {
    for kind in ["page", "dftl"] {
        for page_bytes in [8192, 16384] {
            let mut dev = build(kind, device("mlc16k", page_bytes, 64), &opts()).unwrap();
            check_contract(dev.as_mut()).unwrap_or_else(|e| panic!("{kind} {page_bytes}: {e}"));
            let mut dev = build(kind, device("mlc16k", page_bytes, 64), &opts()).unwrap();
            random_vs_model(dev.as_mut(), 5, 8000, 0)
                .unwrap_or_else(|e| panic!("{kind} {page_bytes}: {e}"));
            let r = dev.report();
            assert!(r.gc.erases > 0, "{kind} {page_bytes}: no GC: {r:?}");
        }
    }
}

#[test]
fn page_ftl_and_dftl_on_16k_mlc_and_tlc_keep_every_flushed_write_across_power_cuts() {
    for (preset, ppb) in [("mlc16k", 64), ("tlc16k", 96)] {
        for kind in ["page", "dftl"] {
            let make = move || -> Result<Box<dyn BlockDevice>, FtlError> {
                build(kind, device(preset, 16384, ppb), &opts())
            };
            let reopen = move |n: Nand| ftl::open(kind, n, &opts());
            power_cuts_across(
                &make,
                &reopen,
                3,
                1500,
                25,
                Durability::TrimsAcknowledged,
                Pattern::Random,
            )
            .unwrap_or_else(|e| panic!("{kind} on {preset}: {e}"));
        }
    }
}

#[test]
fn waf_counts_bytes_and_a_full_buffer_makes_writes_wait() {
    // Sequential 4 KiB writes fill whole 16 KiB pages: WAF 1 before GC, as on 4 KiB pages.
    let mut dev = build("page", device("mlc16k", 16384, 64), &opts()).unwrap();
    let data = vec![7u8; 4096 * 64];
    let t = dev.write(0, 0, &data, false).unwrap();
    let t = dev.flush(t).unwrap();
    let r = dev.report();
    assert_eq!(r.host.writes, 64);
    assert!((r.waf - 1.0).abs() < 1e-9, "{r:?}");
    // 64 logical pages are 16 flash pages; the default buffer (2 pages per die, 8) cannot take
    // them all at once, so the request waits for programs to complete.
    assert!(t > 1_000_000, "the 64 writes took only {t} ns");
}

/// DFTL on 16 KiB pages writes its 4 KiB translation pages four to a flash page (dftl.rs
/// invariant 5): a translation page rewritten by a dirty eviction waits in DRAM until three
/// more join it or FLUSH comes, so mapping programs are about a quarter of translation writes,
/// and the device still matches a RAM disk.
#[test]
fn dftl_on_16k_pages_gathers_four_translation_pages_in_one_flash_page() {
    let small_cache = FtlOptions {
        cache_fraction: 0.01,
        ..opts()
    };
    let nand = device("mlc16k", 16384, 64);
    let mut dev = ftl::dftl::Dftl::new(nand, &small_cache).unwrap();
    let before = dev
        .space()
        .nand()
        .stats()
        .get(nand::OpKind::Program, nand::Purpose::Mapping);
    random_vs_model(&mut dev, 9, 6000, 0).unwrap();
    let c = dev.counts();
    let programs = dev
        .space()
        .nand()
        .stats()
        .get(nand::OpKind::Program, nand::Purpose::Mapping)
        - before;
    assert!(c.translation_writes > 200, "{c:?}");
    assert!(
        programs * 3 <= c.translation_writes,
        "{programs} mapping programs for {} translation writes",
        c.translation_writes
    );
}

/// The flash reads (array reads) the device has done so far.
fn array_reads(dev: &dyn BlockDevice) -> u64 {
    dev.nand().unwrap().report().flash.reads
}

#[test]
fn a_16k_read_of_units_side_by_side_in_one_flash_page_senses_the_page_once() {
    // Four 4 KiB pages written together share one 16 KiB flash page: a controller senses it
    // once (tR) and takes the four columns from the page register. Before, the page FTL read
    // them as four array reads, four tR on one die.
    let mut dev = build("page", device("mlc16k", 16384, 64), &opts()).unwrap();
    let data: Vec<u8> = (0..4 * 4096).map(|i| (i % 251) as u8).collect();
    let t = dev.write(0, 0, &data, false).unwrap();
    let t = dev.flush(t).unwrap();
    let before = array_reads(dev.as_ref());
    let mut back = vec![0u8; 4 * 4096];
    let done = dev.read(t, 0, &mut back).unwrap();
    assert_eq!(back, data);
    assert_eq!(
        array_reads(dev.as_ref()) - before,
        1,
        "one array read for the flash page"
    );
    let one = {
        let mut unit = vec![0u8; 4096];
        let t2 = dev.read(done, 0, &mut unit).unwrap();
        t2 - done
    };
    assert!(
        done - t < 2 * one,
        "16 KiB took {} ns where one 4 KiB unit takes {one} ns: more than one tR",
        done - t
    );

    // A page rewritten alone moves to another flash page: the read splits into runs.
    let t = dev.write(done, 1, &[9u8; 4096], false).unwrap();
    let t = dev.flush(t).unwrap();
    let before = array_reads(dev.as_ref());
    dev.read(t, 0, &mut back).unwrap();
    assert_eq!(&back[..4096], &data[..4096]);
    assert_eq!(&back[4096..8192], &[9u8; 4096][..]);
    assert_eq!(&back[8192..], &data[8192..]);
    assert_eq!(
        array_reads(dev.as_ref()) - before,
        3,
        "unit 0, the rewritten unit 1, units 2-3 together"
    );
}

#[test]
fn a_read_of_a_page_whose_program_is_in_flight_is_answered_from_the_write_buffer() {
    // A full 16 KiB page is programmed as soon as it is gathered, and the write is acknowledged
    // then; the controller keeps the page's data until the program completes (wbuf.rs
    // invariant 4). A read in that interval is answered from DRAM: no array read, and no wait
    // for the rest of tPROG (an MLC upper page's is 2.7 ms on mlc16k). Before, the read
    // queued behind the program on its die.
    for kind in ["page", "dftl"] {
        let mut dev = build(kind, device("mlc16k", 16384, 64), &opts()).unwrap();
        let data: Vec<u8> = (0..4 * 4096).map(|i| (i % 239) as u8).collect();
        // Two pages, so that the second program is on an upper page of its block's word line
        // on some die; each is read back at once.
        for lpn in [0u64, 4] {
            let t = dev.write(0, lpn, &data, false).unwrap();
            let before = array_reads(dev.as_ref());
            let mut back = vec![0u8; 4 * 4096];
            let done = dev.read(t, lpn, &mut back).unwrap();
            assert_eq!(back, data, "{kind}: lpn {lpn}");
            assert_eq!(
                array_reads(dev.as_ref()) - before,
                0,
                "{kind}: lpn {lpn} read from the buffer"
            );
            assert!(
                done - t < 50_000,
                "{kind}: lpn {lpn} took {} ns: it waited for the program",
                done - t
            );
        }
        // Once the programs complete, the flash answers.
        let t = dev.flush(1_000_000).unwrap();
        let before = array_reads(dev.as_ref());
        let mut back = vec![0u8; 4 * 4096];
        dev.read(t, 0, &mut back).unwrap();
        assert_eq!(back, data);
        assert!(
            array_reads(dev.as_ref()) > before,
            "{kind}: read from the flash"
        );
    }
}
