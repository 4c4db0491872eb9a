//! The shared flash space on its own, used the way a caller other than an FTL would (a database
//! page store keyed by u64 page ids): striping, streams, move reports, bad blocks, wear
//! levelling, background GC, purposes, determinism.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::HashMap;

use ftl::oob::{OobRecord, PageKind};
use ftl::space::BlockUse;
use ftl::{FlashSpace, FtlError, GcPolicy, Move, SpaceConfig};
use nand::{DeviceConfig, FaultPlan, Nand, OpKind, Pbn, Ppn, Purpose};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn nand(overrides: &[&str]) -> Nand {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    Nand::new(DeviceConfig::preset("tiny", &o).unwrap()).unwrap()
}

/// A minimal page store: database page id -> flash page, updated from the space's moves.
struct Store {
    space: FlashSpace,
    map: HashMap<u64, Ppn>,
    moves: Vec<Move>,
    page: Vec<u8>,
}

impl Store {
    fn new(space: FlashSpace) -> Self {
        let page = vec![0u8; space.geometry().page_size_bytes as usize];
        Store {
            space,
            map: HashMap::new(),
            moves: Vec::new(),
            page,
        }
    }

    fn put(&mut self, at: u64, stream: u8, id: u64) -> Result<u64, FtlError> {
        let seq = self.space.alloc_seq();
        self.page[..8].copy_from_slice(&id.to_le_bytes());
        let (ppn, done) = self.space.write(
            at,
            stream,
            &OobRecord::new(PageKind::Data, id, seq, 0),
            &self.page,
            Purpose::Host,
        )?;
        self.space.take_moves(&mut self.moves);
        for m in &self.moves {
            let e = self.map.get_mut(&m.key).expect("moved an unknown page");
            assert_eq!(*e, m.from, "a move names the page's current location");
            *e = m.to;
        }
        if let Some(old) = self.map.insert(id, ppn) {
            self.space.invalidate(old);
        }
        Ok(done)
    }

    fn check(&mut self) {
        self.space.check().unwrap();
        let mut buf = vec![0u8; self.page.len()];
        let ids: Vec<(u64, Ppn)> = self.map.iter().map(|(&k, &v)| (k, v)).collect();
        for (id, ppn) in ids {
            assert_eq!(self.space.key_at(ppn), Some(id));
            self.space
                .read(0, ppn, &mut buf, &mut [], Purpose::Host)
                .unwrap();
            assert_eq!(
                u64::from_le_bytes(buf[..8].try_into().unwrap()),
                id,
                "page of id {id}"
            );
        }
    }
}

fn config(gc: GcPolicy) -> SpaceConfig {
    SpaceConfig {
        streams: 2,
        gc,
        seed: 3,
        ..SpaceConfig::default()
    }
}

#[test]
fn consecutive_writes_go_to_different_dies_and_run_in_parallel() {
    let (space, _) = FlashSpace::format(nand(&[]), config(GcPolicy::Greedy), 0).unwrap();
    let mut s = Store::new(space);
    let dies = s.space.geometry().dies();
    let mut seen = Vec::new();
    let mut done = 0;
    for id in 0..u64::from(dies) {
        done = done.max(s.put(0, 0, id).unwrap());
        seen.push(s.space.die_of(s.space.geometry().block_of(s.map[&id])).0);
    }
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), dies as usize, "one page per die");
    // One program is 200 us on the tiny preset; four in parallel take little more than one.
    assert!(
        done < 2 * 200_000,
        "4 pages issued at once finish at {done} ns"
    );
    // Channel-interleaved: the first two pages use different channels.
    let g = s.space.geometry().clone();
    let ch = |id: u64| g.channel_of_die(g.die_of_block(g.block_of(s.map[&id])));
    assert_ne!(ch(0), ch(1));
}

#[test]
fn a_database_page_store_keeps_every_page_through_gc_with_every_policy() {
    for gc in [
        GcPolicy::Greedy,
        GcPolicy::CostBenefit,
        GcPolicy::Fifo,
        GcPolicy::Random,
    ] {
        let (space, _) = FlashSpace::format(nand(&[]), config(gc), 0).unwrap();
        let mut s = Store::new(space);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut t = 0;
        // Sparse 64-bit page ids, hot ones on stream 0 and cold ones on stream 1.
        let ids: Vec<u64> = (0..1500u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 1)
            .collect();
        for (i, &id) in ids.iter().enumerate() {
            t = s.put(t, (i % 2) as u8, id).unwrap();
        }
        for _ in 0..10_000 {
            let i = (rng.next_u64() % 300) as usize * 2; // hot: even ids only
            t = s.put(t, 0, ids[i]).unwrap();
        }
        assert!(s.space.counts().gc_erases > 0, "{gc:?}: no GC happened");
        s.check();
        let st = s.space.nand().stats();
        assert_eq!(
            st.get(OpKind::Program, Purpose::Gc),
            s.space.counts().gc_migrations,
            "{gc:?}: every move is a Gc program"
        );
        assert_eq!(
            st.get(OpKind::Erase, Purpose::Gc),
            s.space.counts().gc_erases
        );
    }
}

#[test]
fn background_gc_frees_blocks_when_the_caller_is_idle() {
    let (space, _) = FlashSpace::format(nand(&[]), config(GcPolicy::Greedy), 0).unwrap();
    let mut s = Store::new(space);
    let mut t = 0;
    for _round in 0..6 {
        for id in 0..1500u64 {
            t = s.put(t, 0, id).unwrap();
        }
    }
    let before = s.space.free_blocks();
    assert!(
        before <= s.space.reserve_blocks(),
        "the device should be at its GC threshold ({before} free)"
    );
    let t2 = s.space.background_gc(t, 100).unwrap();
    s.space.take_moves(&mut s.moves);
    for m in s.moves.clone() {
        *s.map.get_mut(&m.key).unwrap() = m.to;
    }
    assert!(
        s.space.free_blocks() >= 2 * s.space.reserve_blocks(),
        "{} free after background GC",
        s.space.free_blocks()
    );
    assert!(t2 > t);
    s.check();
}

#[test]
fn factory_bad_blocks_are_never_used() {
    let n = nand(&["reliability.factory_bad_block_ratio=0.1", "seed=5"]);
    let bad: Vec<u32> = (0..n.geometry().blocks())
        .filter(|&b| n.is_bad(Pbn(b)))
        .collect();
    assert!(!bad.is_empty());
    let (space, _) = FlashSpace::format(n, config(GcPolicy::Greedy), 0).unwrap();
    let mut s = Store::new(space);
    let mut t = 0;
    for i in 0..8000u64 {
        t = s.put(t, 0, i % 1200).unwrap();
    }
    for &b in &bad {
        assert_eq!(s.space.block_use(Pbn(b)), BlockUse::Bad);
        assert_eq!(
            s.space.nand().block_info(Pbn(b)).unwrap().erase_count,
            0,
            "bad block {b} was erased"
        );
    }
    s.check();
}

#[test]
fn a_failed_program_retires_its_block_and_keeps_the_data() {
    let (space, _) = FlashSpace::format(nand(&[]), config(GcPolicy::Greedy), 0).unwrap();
    let mut s = Store::new(space);
    let mut t = 0;
    for id in 0..100 {
        t = s.put(t, 0, id).unwrap();
    }
    let next = s.space.nand().ops_issued() + 1;
    s.space.nand_mut().set_fault_plan(FaultPlan {
        fail_op: Some(next),
        ..FaultPlan::default()
    });
    t = s.put(t, 0, 1000).unwrap();
    assert_eq!(s.space.counts().retired_blocks, 1);
    assert_eq!(s.space.nand().report().bad_blocks.grown, 1);
    for id in 100..2000 {
        t = s.put(t, 0, id % 1300).unwrap();
    }
    s.check();
    assert!(s.map.contains_key(&1000));
}

#[test]
fn a_failed_erase_retires_the_block_and_the_data_survives() {
    // A dry run with a trace finds the 5th erase; the real run makes exactly that one fail.
    let run = |fail_op: Option<u64>| {
        let (space, _) = FlashSpace::format(
            nand(&["trace_entries=1000000"]),
            config(GcPolicy::Greedy),
            0,
        )
        .unwrap();
        let mut s = Store::new(space);
        s.space.nand_mut().set_fault_plan(FaultPlan {
            fail_op,
            ..FaultPlan::default()
        });
        let mut t = 0;
        for i in 0..6000u64 {
            t = s.put(t, 0, i % 1300).unwrap();
        }
        s
    };
    let dry = run(None);
    let fifth_erase = dry
        .space
        .nand()
        .trace()
        .iter()
        .filter(|e| e.op == OpKind::Erase)
        .nth(4)
        .expect("GC erased blocks")
        .seq;
    let mut s = run(Some(fifth_erase));
    assert_eq!(s.space.nand().report().failed_erases, 1);
    assert_eq!(s.space.counts().retired_blocks, 1);
    assert_eq!(s.space.good_blocks(), dry.space.good_blocks() - 1);
    s.check();
}

#[test]
fn static_wear_levelling_bounds_the_erase_count_spread_of_cold_data() {
    let run = |wl_threshold: u32| {
        let cfg = SpaceConfig {
            wl_threshold,
            ..config(GcPolicy::Greedy)
        };
        let (space, _) = FlashSpace::format(nand(&[]), cfg, 0).unwrap();
        let mut s = Store::new(space);
        let mut t = 0;
        // Cold data fills most of the device once; a few hot pages are rewritten forever.
        for id in 0..1500 {
            t = s.put(t, 0, id).unwrap();
        }
        for i in 0..60_000u64 {
            t = s.put(t, 0, 10_000 + i % 64).unwrap();
        }
        s.check();
        let r = s.space.nand().report();
        (
            r.erase_count.max - r.erase_count.min,
            s.space.counts().wl_erases,
            s.space
                .nand()
                .stats()
                .get(OpKind::Program, Purpose::WearLevel),
        )
    };
    let (spread_off, wl_off, _) = run(0);
    let (spread_on, wl_on, wl_programs) = run(20);
    println!("erase-count spread: {spread_off} without, {spread_on} with static wear levelling ({wl_on} WL erases)");
    assert_eq!(wl_off, 0);
    assert!(wl_on > 0 && wl_programs > 0, "wear levelling never ran");
    assert!(
        spread_on <= 20 + 10,
        "spread {spread_on} with a threshold of 20"
    );
    assert!(
        spread_on * 3 < spread_off,
        "wear levelling should cut the spread ({spread_on} vs {spread_off})"
    );
}

#[test]
fn the_same_seed_gives_the_same_results() {
    let run = || {
        let (space, _) = FlashSpace::format(nand(&[]), config(GcPolicy::Random), 0).unwrap();
        let mut s = Store::new(space);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let mut t = 0;
        for _ in 0..5000 {
            t = s.put(t, 0, rng.next_u64() % 1400).unwrap();
        }
        (t, s.space.counts(), s.space.nand().report().flash)
    };
    assert_eq!(run(), run());
}

/// NoFTL regions: two spaces over disjoint die sets of one device, taking turns holding it.
/// Each allocates only on its dies and collects only its own blocks.
#[test]
fn spaces_over_disjoint_dies_share_a_device() {
    let n = nand(&[]);
    let dies = n.geometry().dies();
    assert!(dies >= 2, "the tiny preset has several dies");
    let (a_dies, b_dies): (Vec<u32>, Vec<u32>) = (0..dies).partition(|d| d % 2 == 0);
    let standin = nand(&["geometry.channels=1", "geometry.chips_per_channel=1"]);
    let (mut a, _) = FlashSpace::format(
        n,
        SpaceConfig {
            dies: a_dies.clone(),
            ..config(GcPolicy::Greedy)
        },
        0,
    )
    .unwrap();
    let real = a.replace_nand(standin);
    let (b, _) = FlashSpace::format(
        real,
        SpaceConfig {
            dies: b_dies.clone(),
            ..config(GcPolicy::Greedy)
        },
        0,
    )
    .unwrap();
    let mut sb = Store::new(b);
    // Region B churns a small working set until it has collected many times.
    let span = u64::from(sb.space.good_blocks()) * u64::from(sb.space.pages_per_block()) / 2;
    for i in 0..span * 6 {
        sb.put(0, 0, i % span).unwrap();
    }
    sb.check();
    assert!(sb.space.counts().gc_erases > 0, "B collected");
    for ppn in sb.map.values() {
        assert!(b_dies.contains(&sb.space.die_of(sb.space.geometry().block_of(*ppn)).0));
    }
    // A takes the device and writes; its blocks are on its dies, its GC counts are its own.
    let mut sa = Store::new(a);
    sb.space.lend_nand(&mut sa.space);
    for i in 0..200 {
        sa.put(0, 1, 1_000_000 + i).unwrap();
    }
    sa.check();
    assert_eq!(sa.space.counts().gc_erases, 0);
    for ppn in sa.map.values() {
        assert!(a_dies.contains(&sa.space.die_of(sa.space.geometry().block_of(*ppn)).0));
    }
    assert_eq!(sa.space.dies().len(), a_dies.len());
    // B's pages are intact after A's writes.
    sa.space.lend_nand(&mut sb.space);
    sb.check();
}

/// A space gives dies up for a new region: their data moves to the remaining dies.
#[test]
fn released_dies_are_emptied_and_the_data_survives() {
    let (space, _) = FlashSpace::format(nand(&[]), config(GcPolicy::Greedy), 0).unwrap();
    let mut s = Store::new(space);
    let dies = s.space.geometry().dies();
    for i in 0..300 {
        s.put(0, (i % 2) as u8, i).unwrap();
    }
    let gone: Vec<u32> = (dies / 2..dies).collect();
    s.space.release_dies(0, &gone).unwrap();
    s.space.take_moves(&mut s.moves);
    for m in s.moves.clone() {
        *s.map.get_mut(&m.key).unwrap() = m.to;
    }
    s.check();
    for ppn in s.map.values() {
        assert!(!gone.contains(&s.space.die_of(s.space.geometry().block_of(*ppn)).0));
    }
    for i in 300..2000 {
        s.put(0, 0, i % 400).unwrap();
    }
    s.check();
    for ppn in s.map.values() {
        assert!(!gone.contains(&s.space.die_of(s.space.geometry().block_of(*ppn)).0));
    }
}
