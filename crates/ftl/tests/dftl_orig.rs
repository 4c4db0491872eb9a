//! `dftl-orig`, the DFTL that NoFTL measured: the block-device contract, its two-level cache's
//! scans and what they cost on the host, the OOB invalidation marks, GC's OOB reads, and the
//! same capacity as `dftl` on the same device.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use ftl::dftl::MapCache;
use ftl::dftl_orig::DftlOrig;
use ftl::oob::{OobRecord, PageOob};
use ftl::testkit::{check_contract, random_vs_model};
use ftl::{build, BlockDevice, FtlError, FtlOptions};
use nand::{DeviceConfig, Nand, OpKind, Ppn, Purpose};

fn tiny(extra: &[&str]) -> Nand {
    let o: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    Nand::new(DeviceConfig::preset("tiny", &o).unwrap()).unwrap()
}

fn opts(cache: f64) -> FtlOptions {
    FtlOptions {
        cache_fraction: cache,
        ..FtlOptions::default()
    }
}

const PAGE: usize = ftl::LOGICAL_PAGE_BYTES;

#[test]
fn dftl_orig_meets_the_block_device_contract_and_matches_a_memdisk_with_gc() {
    for (seed, cache) in [(1, 0.02), (2, 0.15), (3, 0.35), (4, 1.0)] {
        let mut dev = build("dftl-orig", tiny(&[]), &opts(cache)).unwrap();
        check_contract(dev.as_mut()).unwrap_or_else(|e| panic!("cache {cache}: {e}"));
        let mut dev = build(
            "dftl-orig",
            tiny(&[]),
            &FtlOptions {
                seed,
                ..opts(cache)
            },
        )
        .unwrap();
        random_vs_model(dev.as_mut(), seed, 6000, 0)
            .unwrap_or_else(|e| panic!("cache {cache}: {e}"));
        let r = dev.report();
        assert!(r.gc.erases > 0, "the workload should have collected: {r:?}");
        assert!(
            r.host_cpu_us > 0.0 && r.host_cpu_us == r.controller_busy_us,
            "{r:?}"
        );
        let f = dev.nand().unwrap().stats().flash_counts();
        assert!(f.oob_writes > 0 && f.oob_reads > 0, "{f:?}");
        if cache < 1.0 {
            assert!(r.translation_writes > 0 && r.translation_reads > 0, "{r:?}");
        }
    }
}

/// Writes `lpns` one page each, in order, from `t`; returns the end.
fn write_all(d: &mut DftlOrig, lpns: impl IntoIterator<Item = u64>, mut t: u64) -> u64 {
    for l in lpns {
        t = d.write(t, l, &[l as u8; PAGE], false).unwrap();
    }
    t
}

#[test]
fn a_miss_on_a_full_cache_scans_both_arrays_and_a_ghost_hit_promotes() {
    let mut d = DftlOrig::new(tiny(&[]), &opts(0.1)).unwrap();
    let c = d.cache();
    let (real, ghost) = (c.real_capacity(), c.ghost_capacity());
    assert_eq!(real + ghost, c.capacity());
    assert_eq!((real, ghost), ftl::dftl_orig::TwoLevel::split(c.capacity()));
    assert!(ghost >= 2 && real >= 4 * ghost - 4, "{real} + {ghost}");
    let cyc = c.cycles();

    // Filling real: each miss searches real for its first free slot, no scan.
    let mut t = write_all(&mut d, 0..real as u64, 0);
    let k = d.cache().counts();
    assert_eq!(k.scanned_entries, 0);
    assert_eq!(k.searched_entries, (1..=real as u64).sum::<u64>());
    // Filling ghost: each miss searches ghost for a free slot and scans real to demote.
    t = write_all(&mut d, real as u64..(real + ghost) as u64, t);
    let k = d.cache().counts();
    assert_eq!(k.scanned_entries, (ghost * real) as u64);
    assert_eq!(d.cache().len(), real + ghost);
    d.cache().check().unwrap();

    // A miss on the full cache: scans ghost (to evict) and real (to demote), nothing else.
    let busy0 = d.report().host_cpu_us;
    let before = d.cache().counts();
    let at = t;
    let lpn = (real + ghost) as u64;
    t = d.write(at, lpn, &[1; PAGE], false).unwrap();
    let k = d.cache().counts();
    assert_eq!(
        k.scanned_entries - before.scanned_entries,
        (real + ghost) as u64
    );
    assert_eq!(k.searched_entries, before.searched_entries);
    assert_eq!(k.evictions - before.evictions, 1);
    let miss_cycles = cyc.miss + (real + ghost) as u64 * cyc.scan_entry;
    assert_eq!(k.cycles - before.cycles, miss_cycles);
    // The host charged at least that, and the request waited for it.
    let host_us = d.report().host_cpu_us - busy0;
    assert!(host_us >= miss_cycles as f64 / 2530.0, "{host_us}");
    assert!(t - at >= miss_cycles * 1000 / 2530, "{} ns", t - at);
    d.cache().check().unwrap();

    // A real hit: no scan, no search.
    let reads = d.counts().translation_reads;
    let before = d.cache().counts();
    let mut buf = vec![0u8; PAGE];
    t = d.read(t, lpn, &mut buf).unwrap();
    assert_eq!(buf, vec![1; PAGE]);
    let k = d.cache().counts();
    assert_eq!(k.real_hits - before.real_hits, 1);
    assert_eq!(k.scanned_entries, before.scanned_entries);
    assert_eq!(k.cycles - before.cycles, cyc.lookup);

    // A ghost hit on the entry demoted last (its age + 1 reaches real's minimum): real is
    // scanned, ghost searched up to its slot, and the two entries swap.
    let in_ghost: Vec<u64> = (0..=lpn)
        .filter(|&l| d.cache().in_ghost(l) == Some(true))
        .collect();
    assert_eq!(in_ghost.len(), ghost);
    let hit = *in_ghost.iter().max().unwrap();
    let before = d.cache().counts();
    d.read(t, hit, &mut buf).unwrap();
    assert_eq!(buf, vec![hit as u8; PAGE]);
    let k = d.cache().counts();
    assert_eq!(k.ghost_hits - before.ghost_hits, 1);
    assert_eq!(k.promotions - before.promotions, 1);
    assert_eq!(k.scanned_entries - before.scanned_entries, real as u64);
    assert!(k.searched_entries - before.searched_entries <= ghost as u64);
    assert_eq!(d.cache().in_ghost(hit), Some(false));
    assert_eq!(
        d.counts().translation_reads,
        reads,
        "hits read no translation page"
    );
    d.cache().check().unwrap();
}

#[test]
fn every_translation_page_is_written_at_format_so_every_miss_reads_one() {
    let d = DftlOrig::new(tiny(&[]), &opts(0.02)).unwrap();
    let tpages = d.capacity_pages().div_ceil(1024);
    assert_eq!(d.counts().translation_writes, tpages);
    let mut d: Box<dyn BlockDevice> = Box::new(d);
    assert_eq!(
        d.report().waf,
        0.0,
        "the format's programs are not the host's"
    );
    let mut buf = vec![1u8; PAGE];
    d.read(0, 7, &mut buf).unwrap();
    assert_eq!(buf, vec![0; PAGE]);
    assert_eq!(
        d.report().translation_reads,
        1,
        "a miss reads its translation page"
    );
    // Our DFTL writes a translation page first when it writes an entry back.
    let mut d = build("dftl", tiny(&[]), &opts(0.02)).unwrap();
    d.read(0, 7, &mut buf).unwrap();
    assert_eq!(
        (d.report().translation_reads, d.report().translation_writes),
        (0, 0)
    );
}

#[test]
fn an_overwrite_marks_the_old_copy_invalid_in_its_oob() {
    let mut d = DftlOrig::new(tiny(&[]), &opts(0.02)).unwrap();
    let t = d.write(0, 5, &[1; PAGE], false).unwrap();
    let old = d.space().nand().stats().flash_counts();
    assert_eq!(old.oob_writes, 0, "a first write supersedes nothing");
    let old_ppn = (0..d.space().geometry().pages())
        .find(|&p| d.space().key_at(Ppn(p)) == Some(5))
        .unwrap();
    let t = d.write(t, 5, &[2; PAGE], false).unwrap();
    assert_eq!(d.space().nand().stats().flash_counts().oob_writes, 1);
    assert_eq!(d.counts().invalid_marks, 1);
    assert_eq!(
        d.space()
            .nand()
            .stats()
            .get(OpKind::OobWrite, Purpose::Meta),
        1
    );
    let mut nand = d.into_nand();
    let mut oob = vec![0u8; nand.geometry().oob_size_bytes as usize];
    nand.read_oob(t, Ppn(old_ppn), &mut oob, Purpose::Recovery)
        .unwrap();
    assert_eq!(OobRecord::classify(&oob), PageOob::Damaged);
    // The new copy survives a reopen; the marked one is not mistaken for anything.
    let mut d = ftl::open("dftl-orig", nand, &opts(0.02)).unwrap();
    let mut buf = vec![0u8; PAGE];
    d.read(0, 5, &mut buf).unwrap();
    assert_eq!(buf, vec![2; PAGE]);
}

#[test]
fn gc_reads_the_oob_of_every_page_of_every_victim() {
    let mut d = DftlOrig::new(tiny(&[]), &opts(0.1)).unwrap();
    let cap = d.capacity_pages();
    let mut t = write_all(&mut d, 0..cap, 0);
    // Overwrite a hot tenth many times: GC collects blocks of mostly invalid pages.
    for round in 0..8 {
        t = write_all(&mut d, (0..cap / 10).map(|l| (l * 7 + round) % cap), t);
    }
    let s = d.space().counts();
    assert!(s.gc_victims > 0, "{s:?}");
    let ppb = u64::from(d.space().pages_per_block());
    assert_eq!(s.gc_oob_reads, s.gc_victims * ppb, "{s:?}");
    assert_eq!(
        d.space().nand().stats().get(OpKind::OobRead, Purpose::Gc),
        s.gc_oob_reads
    );
    // Every page moved was read in full after its OOB.
    assert!(d.space().nand().stats().get(OpKind::Read, Purpose::Gc) >= s.gc_migrations);
}

#[test]
fn dftl_orig_has_dftls_capacity_on_the_compare_geometry() {
    // One chip of 64-page blocks, as `compare` sizes it.
    let noftl = |blocks: u32| {
        let o = [
            format!("geometry.blocks_per_plane={blocks}"),
            "store=\"meta\"".to_string(),
        ];
        Nand::new(DeviceConfig::preset("noftl13", &o).unwrap()).unwrap()
    };
    for (spare, cache) in [(0.0275, 0.02), (0.07, 0.35)] {
        let o = FtlOptions {
            spare_factor: spare,
            cache_fraction: cache,
            ..FtlOptions::default()
        };
        let a = build("dftl", noftl(512), &o).unwrap();
        let b = build("dftl-orig", noftl(512), &o).unwrap();
        assert_eq!(a.capacity_pages(), b.capacity_pages());
        assert_eq!(b.name(), format!("dftl-orig-{}%", (cache * 100.0).round()));
    }
    // NoFTL Fig. 5's split: 4,080 real and 1,020 ghost entries of 5,100 (2%).
    assert_eq!(ftl::dftl_orig::TwoLevel::split(5100), (4080, 1020));
}

#[test]
fn dftl_orig_refuses_what_it_cannot_model() {
    let fifo = FtlOptions {
        gc: ftl::GcPolicy::Fifo,
        ..FtlOptions::default()
    };
    let e = build("dftl-orig", tiny(&[]), &fifo).err().unwrap();
    assert!(
        matches!(&e, FtlError::Config(m) if m.contains("greedy")),
        "{e}"
    );
    // Chips that allow one program per page cannot take the OOB invalidation mark.
    let e = build("dftl-orig", tiny(&["cell.nop=1"]), &FtlOptions::default())
        .err()
        .unwrap();
    assert!(
        matches!(&e, FtlError::Config(m) if m.contains("NOP")),
        "{e}"
    );
    // The original wrote nothing back at FLUSH; the write-back is our DFTL's option.
    let wb = FtlOptions {
        dftl_flush_writeback: true,
        ..FtlOptions::default()
    };
    let e = build("dftl-orig", tiny(&[]), &wb).err().unwrap();
    assert!(
        matches!(&e, FtlError::Config(m) if m.contains("FLUSH")),
        "{e}"
    );
}

#[test]
fn the_host_model_charges_a_dram_access_per_entry_beyond_the_l3() {
    // 16-byte records of 1 Mi pages are 16 MiB, beyond the 12 MiB L3.
    let big = ftl::host::access_cycles(ftl::dftl_orig::RECORD_BYTES << 20);
    let small = ftl::host::access_cycles(ftl::dftl_orig::RECORD_BYTES << 18);
    assert_eq!((small, big), (40, 210));
}

#[test]
fn loads_in_flight_cut_a_scan_entrys_cost_and_the_report_counts_the_entries() {
    // One access into the records costs 40 cycles here (the table fits the E5630's L3): a scan
    // entry is 8 instructions + 40 at overlap 1 (the upper bound), 8 + 40/4 with 4 in flight.
    let full = DftlOrig::new(tiny(&[]), &opts(0.1)).unwrap();
    assert_eq!(full.cache().cycles().scan_entry, 8 + 40);
    let four = DftlOrig::new(
        tiny(&[]),
        &FtlOptions {
            dftl_orig_scan_overlap: 4,
            ..opts(0.1)
        },
    )
    .unwrap();
    assert_eq!(four.cache().cycles().scan_entry, 8 + 10);
    // Everything else about the cache is as before.
    assert_eq!(four.cache().cycles().lookup, full.cache().cycles().lookup);
    assert_eq!(four.cache().cycles().miss, full.cache().cycles().miss);
    // The scanned entries reach the report, where experiments read them.
    let mut d = four;
    let n = (d.cache().capacity() + 8) as u64;
    write_all(&mut d, 0..n, 0);
    let scanned = d.cache().counts().scanned_entries;
    assert!(scanned > 0);
    assert_eq!(d.report().cache_scanned_entries, scanned);
    // Out of range: refused with what is wrong.
    for bad in [0, 65] {
        let e = DftlOrig::new(
            tiny(&[]),
            &FtlOptions {
                dftl_orig_scan_overlap: bad,
                ..opts(0.1)
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("scan overlap"), "{e}");
    }
}
