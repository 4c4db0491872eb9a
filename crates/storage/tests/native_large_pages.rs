//! The NoFTL page store on flash pages of several 4 KiB units (16 KiB MLC and TLC pages): units
//! are gathered per stream in host memory and programmed a page at a time, reads see the
//! gathered units, durability points program what is gathered, and nothing synced is lost at a
//! power cut.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use nand::{DeviceConfig, Nand, OpKind, Purpose};
use storage::pagestore::{PageKind, WriteHint};
use storage::{NativeConfig, NativeStore, PageStore};

/// The 16 KiB-page preset (`mlc16k` or `tlc16k`), shrunk to a few thousand pages.
fn device(preset: &str) -> Nand {
    let o: Vec<String> = [
        "geometry.channels=2",
        "geometry.chips_per_channel=1",
        "geometry.blocks_per_plane=24",
        "geometry.pages_per_block=48",
        "reliability.factory_bad_block_ratio=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    Nand::new(DeviceConfig::preset(preset, &o).unwrap()).unwrap()
}

fn cfg(page_bytes: usize) -> NativeConfig {
    NativeConfig {
        page_bytes,
        log_blocks: Some(64),
        spare_factor: 0.25,
        ..NativeConfig::default()
    }
}

fn page(pid: u32, version: u8, bytes: usize) -> Vec<u8> {
    let mut p = vec![version; bytes];
    p[..4].copy_from_slice(&pid.to_le_bytes());
    p
}

const HEAP: WriteHint = WriteHint {
    object: 7,
    kind: PageKind::Heap,
};

fn host_programs(s: &NativeStore) -> u64 {
    s.space().nand().stats().get(OpKind::Program, Purpose::Host)
}

fn host_reads(s: &NativeStore) -> u64 {
    s.space().nand().stats().get(OpKind::Read, Purpose::Host)
}

fn power_cycle(s: NativeStore) -> Nand {
    let mut nand = s.into_nand_raw();
    nand.power_cut();
    nand.power_on();
    nand
}

#[test]
fn four_4k_db_pages_share_one_16k_program_and_read_back_before_and_after_it() {
    let mut s = NativeStore::format(device("mlc16k"), cfg(4096)).unwrap();
    let mut t = 0;
    for pid in 0..3 {
        t = s.write_page(t, pid, &page(pid, 1, 4096), HEAP).unwrap();
    }
    assert_eq!(host_programs(&s), 0, "three units wait for a fourth");
    // A gathered unit reads back from host memory, and a rewrite replaces it in place.
    t = s.write_page(t, 1, &page(1, 2, 4096), HEAP).unwrap();
    let mut buf = vec![0u8; 4096];
    t = s.read_page(t, 1, &mut buf).unwrap();
    assert_eq!(buf, page(1, 2, 4096));
    assert_eq!(host_programs(&s), 0);
    t = s.write_page(t, 3, &page(3, 1, 4096), HEAP).unwrap();
    assert_eq!(host_programs(&s), 1, "the fourth unit fills the page");
    for pid in 0..4 {
        t = s.read_page(t, pid, &mut buf).unwrap();
        let version = if pid == 1 { 2 } else { 1 };
        assert_eq!(buf, page(pid, version, 4096), "page {pid}");
    }
    // All four are on one flash page.
    let first = s.location(0).unwrap();
    assert!((1..4).all(|pid| s.location(pid) == Some(first)));
    // Counted in bytes, a full page of units is no amplification.
    assert!((s.device_report().unwrap().waf - 4.0 / 5.0).abs() < 1e-9);
}

#[test]
fn a_sync_programs_a_partly_filled_page_and_it_survives_a_power_cut() {
    let mut s = NativeStore::format(device("tlc16k"), cfg(4096)).unwrap();
    let mut t = s.write_page(0, 9, &page(9, 1, 4096), HEAP).unwrap();
    assert_eq!(host_programs(&s), 0);
    t = s.sync_pages(t).unwrap();
    assert_eq!(host_programs(&s), 1, "the sync programs the gathered unit");
    // Written after the sync and never synced: may be lost, and is (it was in host memory).
    s.write_page(t, 10, &page(10, 1, 4096), HEAP).unwrap();
    let mut r = NativeStore::open(power_cycle(s), cfg(4096)).unwrap();
    let mut buf = vec![0u8; 4096];
    r.read_page(0, 9, &mut buf).unwrap();
    assert_eq!(buf, page(9, 1, 4096));
    r.read_page(0, 10, &mut buf).unwrap();
    assert!(
        buf.iter().all(|&b| b == 0),
        "the unsynced page was never on flash"
    );
    r.space().check().unwrap();
}

#[test]
fn a_16k_db_page_is_one_flash_program() {
    let mut s = NativeStore::format(device("mlc16k"), cfg(16384)).unwrap();
    // One program, all or nothing: the engine needs no full-page images for it.
    assert_eq!(s.atomic_write_bytes(), 16384);
    let mut t = 0;
    for pid in 0..10 {
        t = s.write_page(t, pid, &page(pid, 1, 16384), HEAP).unwrap();
        assert_eq!(host_programs(&s), u64::from(pid) + 1);
    }
    let mut buf = vec![0u8; 16384];
    for pid in 0..10 {
        let reads = host_reads(&s);
        t = s.read_page(t, pid, &mut buf).unwrap();
        assert_eq!(buf, page(pid, 1, 16384));
        // Its four units sit side by side in one flash page: sensed once (one tR), not four
        // times as when each unit was read on its own.
        assert_eq!(host_reads(&s) - reads, 1, "page {pid}: one array read");
    }
}

#[test]
fn rewrites_with_gc_and_frees_recover_to_the_last_synced_versions_on_mlc_and_tlc() {
    for preset in ["mlc16k", "tlc16k"] {
        let mut s = NativeStore::format(device(preset), cfg(4096)).unwrap();
        let pages = (s.db_pages() / 2) as u32;
        let mut t = 0;
        for round in 0..8u8 {
            for pid in 0..pages {
                // Pages of mixed temperature: a third are rewritten every round.
                if round == 0 || pid % 3 == 0 || round % 4 == 0 {
                    t = s.write_page(t, pid, &page(pid, round, 4096), HEAP).unwrap();
                }
            }
            t = s.sync_pages(t).unwrap();
        }
        for pid in 0..10 {
            t = s.page_freed(t, pid).unwrap();
        }
        t = s.write_log(t, 3, &[9u8; 4096]).unwrap();
        t = s.force_log(t).unwrap();
        t = s.sync_pages(t).unwrap();
        // Frees are durable from the next map checkpoint on (native.rs invariant 2).
        t = s.write_map_checkpoint(t).unwrap();
        assert!(s.space().counts().gc_erases > 0, "{preset}: GC ran");
        assert!(s.checkpoints_written() >= 1, "{preset}: a map checkpoint");
        // Rewrites after the last sync: each page reads back as its synced or a newer version.
        for pid in 10..40 {
            s.write_page(t, pid, &page(pid, 99, 4096), HEAP).unwrap();
        }
        let mut r = NativeStore::open(power_cycle(s), cfg(4096)).unwrap();
        r.space().check().unwrap();
        let mut buf = vec![0u8; 4096];
        for pid in 0..10 {
            assert_eq!(
                r.location(pid),
                None,
                "{preset}: freed page {pid} came back"
            );
        }
        for pid in 10..pages {
            r.read_page(0, pid, &mut buf).unwrap();
            let synced = if pid % 3 == 0 { 7 } else { 4 };
            assert!(
                buf == page(pid, synced, 4096) || (pid < 40 && buf == page(pid, 99, 4096)),
                "{preset}: page {pid} lost its synced version"
            );
        }
        r.read_log(0, 3, &mut buf).unwrap();
        assert!(
            buf.iter().all(|&b| b == 9),
            "{preset}: the forced log block"
        );
    }
}

#[test]
fn a_pslc_region_on_16k_pages_survives_a_reopen() {
    let mut s = NativeStore::format(device("mlc16k"), cfg(4096)).unwrap();
    let opts: Vec<(String, String)> = [("MAX_CHIPS", "1"), ("CELL_MODE", "pSLC"), ("OP", "20%")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut t = s.create_region(0, "rg_fast", &opts).unwrap();
    s.bind_object(7, "rg_fast").unwrap();
    for round in 1..=30u8 {
        for pid in 0..200 {
            t = s.write_page(t, pid, &page(pid, round, 4096), HEAP).unwrap();
        }
        t = s.sync_pages(t).unwrap();
    }
    let (sp, _) = s.region("rg_fast").unwrap();
    assert!(sp.counts().gc_erases > 0, "the region collected garbage");
    assert_eq!(sp.counts().pad_pages, 0, "pSLC has no paired pages to pad");
    let mut r = NativeStore::open(power_cycle(s), cfg(4096)).unwrap();
    let mut buf = vec![0u8; 4096];
    for pid in 0..200 {
        r.read_page(0, pid, &mut buf).unwrap();
        assert_eq!(buf, page(pid, 30, 4096), "page {pid}");
    }
}

fn region_opts(s: &[(&str, &str)]) -> Vec<(String, String)> {
    s.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_pslc_log_region_takes_the_log_forces_need_no_pads_and_the_log_survives_a_reopen() {
    let mut s = NativeStore::format(device("mlc16k"), cfg(4096)).unwrap();
    let block = |b: u64| vec![b as u8 + 1; 4096];
    // Before the region: every force on MLC pads the open word line.
    let mut t = s.write_log(0, 0, &block(0)).unwrap();
    t = s.force_log(t).unwrap();
    let pads_before = s.space().counts().pad_pages;
    assert!(pads_before > 0, "a forced log page on MLC is padded");
    let log = region_opts(&[("MAX_CHIPS", "1"), ("CELL_MODE", "pSLC"), ("LOG", "on")]);
    t = s.create_region(t, "rg_log", &log).unwrap();
    // A second region for the log is refused before anything changes.
    let e = s
        .create_region(
            t,
            "rg_log2",
            &region_opts(&[("MAX_CHIPS", "1"), ("LOG", "on")]),
        )
        .unwrap_err();
    assert!(e.to_string().contains("holds the log already"), "{e}");
    assert!(s.region("rg_log2").is_none());
    for b in 1..40 {
        t = s.write_log(t, b, &block(b)).unwrap();
        t = s.force_log(t).unwrap();
    }
    let (sp, dies) = s.region("rg_log").unwrap();
    assert_eq!(sp.counts().pad_pages, 0, "pSLC has no paired pages to pad");
    let dies = dies.to_vec();
    assert_eq!(
        s.space().counts().pad_pages,
        pads_before,
        "no force padded the default region"
    );
    let host_log = s.space().nand().stats().get(OpKind::Program, Purpose::Log);
    assert!(host_log >= 40, "one program per force");
    let mut r = NativeStore::open(power_cycle(s), cfg(4096)).unwrap();
    let mut buf = vec![0u8; 4096];
    for b in 0..40 {
        r.read_log(0, b, &mut buf).unwrap();
        assert_eq!(buf, block(b), "log block {b}");
    }
    // After the reopen the log still goes to the region.
    let g = r.space().geometry().clone();
    let valid_in_region = |r: &NativeStore| -> u32 {
        let (sp, _) = r.region("rg_log").unwrap();
        (0..g.blocks())
            .filter(|&b| dies.contains(&g.die_of_block(nand::Pbn(b)).0))
            .map(|b| sp.valid_pages(nand::Pbn(b)))
            .sum()
    };
    let before = valid_in_region(&r);
    let t = r.write_log(0, 40, &block(40)).unwrap();
    r.force_log(t).unwrap();
    assert_eq!(
        valid_in_region(&r),
        before + 1,
        "the log write went to the region"
    );
}
