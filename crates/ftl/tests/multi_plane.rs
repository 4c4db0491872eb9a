//! Multi-plane programs (space.rs invariant 10) on chips whose datasheet has them
//! (`timing.multi_plane_program = true`, off by default in the presets): the write buffer hands
//! one page per plane to the space, which programs pages at the same page index of each plane
//! of a die in one array time. Sequential bursts run faster with them and read back intact;
//! power cuts keep every flushed write; the space's invariants hold under GC-heavy writes.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::HashMap;

use ftl::oob::{OobRecord, PageKind};
use ftl::testkit::{power_cuts_across, Durability, Pattern};
use ftl::{build, BlockDevice, FlashSpace, FtlError, FtlOptions, Move, SpaceConfig};
use nand::{DeviceConfig, Nand, Ppn, Purpose};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The mlc16k chips (16 KiB pages, 2 planes) on four dies, 10 blocks per plane of 64 pages;
/// multi-plane programs on or off.
fn mlc16k(multi_plane: bool) -> Nand {
    let o: Vec<String> = vec![
        "geometry.channels=2".into(),
        "geometry.chips_per_channel=2".into(),
        "geometry.blocks_per_plane=10".into(),
        "geometry.pages_per_block=64".into(),
        "reliability.factory_bad_block_ratio=0".into(),
        format!("timing.multi_plane_program={multi_plane}"),
    ];
    Nand::new(DeviceConfig::preset("mlc16k", &o).unwrap()).unwrap()
}

/// More spare than the 16 KiB-page tests elsewhere (0.15): an open block per plane of each die
/// (invariant 10) is room the capacity model holds back (options.rs, `page_mapped_capacity`).
fn opts() -> FtlOptions {
    FtlOptions {
        spare_factor: 0.25,
        ..FtlOptions::default()
    }
}

/// Writes `lpns` 4 KiB pages sequentially (each issued when the previous is acknowledged),
/// flushes, and reads every one back. Returns the flush's completion time and the report's
/// multi-plane program count.
fn sequential_burst(kind: &str, multi_plane: bool, lpns: u64) -> (u64, u64) {
    let mut dev = build(kind, mlc16k(multi_plane), &opts()).unwrap();
    let mut t = 0;
    let mut page = vec![0u8; 4096];
    for l in 0..lpns {
        page[..8].copy_from_slice(&l.to_le_bytes());
        t = dev.write(t, l, &page, false).unwrap();
    }
    let end = dev.flush(t).unwrap();
    for l in 0..lpns {
        dev.read(end, l, &mut page).unwrap();
        assert_eq!(
            u64::from_le_bytes(page[..8].try_into().unwrap()),
            l,
            "{kind} lpn {l}"
        );
    }
    (end, dev.report().multi_plane_programs)
}

#[test]
fn a_sequential_burst_uses_multi_plane_programs_finishes_sooner_and_reads_back() {
    for kind in ["page", "dftl"] {
        // 1,024 logical pages: 256 flash pages, 32 per plane of the 8 planes, no GC.
        let (on_ns, on_mp) = sequential_burst(kind, true, 1024);
        let (off_ns, off_mp) = sequential_burst(kind, false, 1024);
        assert_eq!(
            off_mp, 0,
            "{kind}: multi-plane programs on chips without them"
        );
        // Every pair of pages (one per plane) goes out together, bar a few at the start of a
        // die's blocks and the final flush.
        assert!(
            on_mp >= 100,
            "{kind}: only {on_mp} multi-plane programs of 256 pages"
        );
        // Two planes programmed in one array time: the burst is program-bound, so it takes
        // well under the single-plane time (not exactly half: bus transfers stay serial).
        assert!(
            (on_ns as f64) < 0.75 * off_ns as f64,
            "{kind}: {on_ns} ns with multi-plane programs, {off_ns} ns without"
        );
    }
}

#[test]
fn page_ftl_and_dftl_with_multi_plane_programs_keep_every_flushed_write_across_power_cuts() {
    for kind in ["page", "dftl"] {
        let make = move || -> Result<Box<dyn BlockDevice>, FtlError> {
            build(kind, mlc16k(true), &opts())
        };
        let reopen = move |n: Nand| ftl::open(kind, n, &opts());
        // The workload itself issues multi-plane programs (else this test shows nothing).
        let mut dev = make().unwrap();
        ftl::testkit::random_vs_model(dev.as_mut(), 3, 1500, 0).unwrap();
        assert!(dev.report().multi_plane_programs > 0, "{kind}: none issued");
        power_cuts_across(
            &make,
            &reopen,
            3,
            1500,
            25,
            Durability::TrimsAcknowledged,
            Pattern::Random,
        )
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
    }
}

/// A page store over the space that writes two pages of four units per call (`write_batch`),
/// keyed by unit id, following the space's moves.
struct Store {
    space: FlashSpace,
    map: HashMap<u64, Ppn>,
    moves: Vec<Move>,
}

impl Store {
    fn put_batch(&mut self, at: u64, ids: &[u64]) -> u64 {
        let ub = self.space.unit_bytes();
        let data: Vec<Vec<u8>> = ids
            .iter()
            .map(|id| {
                let mut d = vec![0u8; ub];
                d[..8].copy_from_slice(&id.to_le_bytes());
                d
            })
            .collect();
        let recs: Vec<OobRecord> = ids
            .iter()
            .map(|&id| OobRecord::new(PageKind::Data, id, self.space.alloc_seq(), 0))
            .collect();
        let units: Vec<(OobRecord, &[u8])> =
            recs.iter().zip(&data).map(|(r, d)| (*r, &d[..])).collect();
        let upp = self.space.units_per_page() as usize;
        let pages: Vec<&[(OobRecord, &[u8])]> = units.chunks(upp).collect();
        let (firsts, done) = self
            .space
            .write_batch(at, 0, &pages, Purpose::Host)
            .unwrap();
        self.space.take_moves(&mut self.moves);
        for m in self.moves.drain(..) {
            let e = self.map.get_mut(&m.key).expect("moved an unknown unit");
            assert_eq!(*e, m.from, "a move names the unit's current location");
            *e = m.to;
        }
        for (i, &id) in ids.iter().enumerate() {
            let loc = Ppn(firsts[i / upp].0 + (i % upp) as u64);
            if let Some(old) = self.map.insert(id, loc) {
                self.space.note_replacement(loc);
                self.space.invalidate(old);
            }
        }
        done
    }
}

#[test]
fn the_space_keeps_its_invariants_and_every_unit_under_gc_heavy_multi_plane_writes() {
    let cfg = SpaceConfig {
        streams: 1,
        seed: 5,
        ..SpaceConfig::default()
    };
    let (space, _) = FlashSpace::format(mlc16k(true), cfg, 0).unwrap();
    assert_eq!(space.multi_plane_width(), 2);
    let mut s = Store {
        space,
        map: HashMap::new(),
        moves: Vec::new(),
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    // 12,000 unit ids of the space's 20,480 units: GC runs all the time.
    let keys = 12_000u64;
    let mut t = 0;
    for base in (0..keys).step_by(8) {
        let ids: Vec<u64> = (base..(base + 8).min(keys)).collect();
        t = s.put_batch(t, &ids);
    }
    for round in 0..3000 {
        let mut ids: Vec<u64> = (0..8).map(|_| rng.next_u64() % keys).collect();
        ids.sort_unstable();
        ids.dedup();
        t = s.put_batch(t, &ids);
        if round % 500 == 0 {
            s.space.check().unwrap();
        }
    }
    s.space.check().unwrap();
    let c = s.space.counts();
    assert!(c.gc_erases > 20, "GC ran too little: {c:?}");
    assert!(c.multi_plane_programs > 1000, "{c:?}");
    let mut buf = vec![0u8; s.space.unit_bytes()];
    for (&id, &loc) in &s.map {
        assert_eq!(s.space.key_at(loc), Some(id));
        s.space
            .read(t, loc, &mut buf, &mut [], Purpose::Host)
            .unwrap();
        assert_eq!(u64::from_le_bytes(buf[..8].try_into().unwrap()), id);
    }
}

/// A multi-plane program that fails on the media (nand: the first plane's page is torn and its
/// block turns grown-bad, the others are programmed) retires that block and writes its page
/// again elsewhere; every page still reads back after a flush. On SLC chips (the tiny preset
/// with 16 KiB pages): on MLC a failed upper-page program also destroys its word line's lower
/// page, which the page FTL does not survive with or without multi-plane programs (a known gap
/// of program-failure handling on MLC, outside this test).
#[test]
fn a_failed_multi_plane_program_retires_its_block_and_keeps_every_page() {
    let slc16k = || {
        let o: Vec<String> = vec![
            "geometry.page_size_bytes=16384".into(),
            "geometry.oob_size_bytes=128".into(),
            "timing.multi_plane_program=true".into(),
            // No random bit errors: the test is about the failed program, not ECC.
            "reliability.rber_fresh=0".into(),
            "reliability.rber_at_endurance=0".into(),
            "reliability.rber_retention_per_year=0".into(),
        ];
        Nand::new(DeviceConfig::preset("tiny", &o).unwrap()).unwrap()
    };
    let mut failed_multi = 0;
    // About 130 operations program the 256 pages, nearly all in pairs: every injected failure
    // falls on a program, and nearly always on a multi-plane one.
    for at in [20u64, 45, 70, 95, 120] {
        let mut dev = build("page", slc16k(), &opts()).unwrap();
        let base = dev.nand().unwrap().ops_issued();
        dev.nand_mut().unwrap().set_fault_plan(nand::FaultPlan {
            fail_op: Some(base + at),
            ..nand::FaultPlan::default()
        });
        let mut t = 0;
        let mut page = vec![0u8; 4096];
        for l in 0..1024u64 {
            page[..8].copy_from_slice(&l.to_le_bytes());
            t = dev.write(t, l, &page, false).unwrap();
        }
        let end = dev.flush(t).unwrap();
        for l in 0..1024u64 {
            dev.read(end, l, &mut page)
                .unwrap_or_else(|e| panic!("fail at op {at}: lpn {l}: {e}"));
            assert_eq!(
                u64::from_le_bytes(page[..8].try_into().unwrap()),
                l,
                "fail at {at}: lpn {l}"
            );
        }
        let st = dev.nand().unwrap().stats();
        if st.failed_programs > 0 && dev.report().multi_plane_programs > 0 {
            failed_multi += 1;
        }
    }
    assert_eq!(failed_multi, 5, "an injected failure missed the programs");
}
