//! Map checkpoints of the NoFTL page store: recovery reads the checkpoint and what was written
//! after it, agrees with a full OOB scan, and survives power cuts anywhere around a checkpoint.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use nand::{DeviceConfig, FaultPlan, Nand, Nanos, OpKind, Pbn, Purpose};
use storage::native::JOURNAL;
use storage::pagestore::{PageKind, WriteHint};
use storage::{Error, NativeConfig, NativeStore, PageStore};

/// `tiny` with `blocks_per_plane` blocks per plane: 4 dies, 16 pages per block.
fn device(blocks_per_plane: u32) -> Nand {
    let o = [format!("geometry.blocks_per_plane={blocks_per_plane}")];
    Nand::new(DeviceConfig::preset("tiny", &o).unwrap()).unwrap()
}

fn cfg() -> NativeConfig {
    NativeConfig {
        log_blocks: Some(64),
        spare_factor: 0.25,
        ..NativeConfig::default()
    }
}

fn page(pid: u32, version: u32) -> Vec<u8> {
    let mut p = vec![version as u8; 4096];
    p[..4].copy_from_slice(&pid.to_le_bytes());
    p[4..8].copy_from_slice(&version.to_le_bytes());
    p
}

const HEAP: WriteHint = WriteHint {
    object: 7,
    kind: PageKind::Heap,
};

/// The version a page reads back (0: zeros, unmapped).
fn version(s: &mut NativeStore, pid: u32) -> u32 {
    let mut buf = vec![0u8; 4096];
    s.read_page(0, pid, &mut buf).unwrap();
    if buf.iter().all(|&b| b == 0) {
        0
    } else {
        assert_eq!(buf[..4], pid.to_le_bytes(), "page {pid} holds another page");
        u32::from_le_bytes(buf[4..8].try_into().unwrap())
    }
}

/// Recovery's flash reads (OOB and page reads).
fn recovery_reads(n: &Nand) -> (u64, u64) {
    let st = n.stats();
    (
        st.get(OpKind::OobRead, Purpose::Recovery),
        st.get(OpKind::Read, Purpose::Recovery),
    )
}

fn reopen(mut nand: Nand, full: bool) -> NativeStore {
    nand.set_fault_plan(FaultPlan::default());
    nand.power_cut();
    nand.power_on();
    if full {
        NativeStore::open_full_scan(nand, cfg()).unwrap()
    } else {
        NativeStore::open(nand, cfg()).unwrap()
    }
}

/// Fills most of the device with rewrites (GC runs), frees pages 0..20, checkpoints, then
/// writes `after` more pages and frees pages 20..25. Returns the store and the device's
/// programs before the checkpoint.
fn history(after: u32) -> (NativeStore, u64) {
    let mut s = NativeStore::format(device(64), cfg()).unwrap();
    let n = (s.db_pages() as u32) * 3 / 4;
    let mut t = 0;
    for round in 1..=3u32 {
        for pid in 0..n {
            t = s.write_page(t, pid, &page(pid, round), HEAP).unwrap();
        }
    }
    t = s.write_log(t, 3, &[9u8; 4096]).unwrap();
    t = s.write_meta(t, 1, &[7u8; 4096]).unwrap();
    for pid in 0..20 {
        t = s.page_freed(t, pid).unwrap();
    }
    let before = s.nand().unwrap().stats().total(OpKind::Program);
    t = s.write_map_checkpoint(t).unwrap();
    for i in 0..after {
        let pid = 100 + (i * 7) % (n - 100);
        t = s.write_page(t, pid, &page(pid, 4), HEAP).unwrap();
    }
    for pid in 20..25 {
        t = s.page_freed(t, pid).unwrap();
    }
    (s, before)
}

/// (a) After a checkpoint, recovery reads page 0 of every block, the journal's blocks, the
/// checkpoint and the pages programmed after it, far fewer than a full scan, and rebuilds the
/// same pages.
#[test]
fn recovery_after_a_checkpoint_reads_few_oobs_and_agrees_with_a_full_scan() {
    let (s, before) = history(60);
    assert!(s.space().counts().gc_erases > 0, "GC should have run");
    let g = s.space().geometry().clone();
    let ppb = u64::from(s.space().pages_per_block());
    let programmed_since = s.nand().unwrap().stats().total(OpKind::Program) - before;
    let (_, cp_pages) = s.checkpoint_pages_written();
    let journal_blocks = (0..g.blocks())
        .filter(|&b| {
            let (inc, _, stream, _) = s.space().block_checkpoint(Pbn(b));
            inc != 0 && stream == JOURNAL
        })
        .count() as u64;
    let nand = s.into_nand_raw();
    let (oob0, read0) = recovery_reads(&nand);
    let mut r = reopen(nand, false);
    let (oob1, read1) = recovery_reads(r.nand().unwrap());
    let (oob, reads) = (oob1 - oob0, read1 - read0);
    let bound = u64::from(g.blocks()) + programmed_since + journal_blocks * ppb;
    assert!(
        oob <= bound,
        "{oob} OOB reads, more than {} blocks + {programmed_since} pages programmed since the checkpoint + {journal_blocks} journal blocks",
        g.blocks()
    );
    assert!(
        reads <= cp_pages + 1,
        "{reads} page reads for a {cp_pages}-page checkpoint"
    );

    let (s2, _) = history(60);
    let nand = s2.into_nand_raw();
    let (f0, _) = recovery_reads(&nand);
    let mut full = reopen(nand, true);
    let (f1, _) = recovery_reads(full.nand().unwrap());
    assert!(
        4 * oob < f1 - f0,
        "checkpoint recovery read {oob} OOBs, the full scan {}",
        f1 - f0
    );
    for pid in 0..r.db_pages() as u32 {
        let v = version(&mut r, pid);
        assert_eq!(v, version(&mut full, pid), "page {pid}");
        if pid < 20 {
            assert_eq!(v, 0, "page {pid} was freed before the checkpoint");
        }
    }
    let mut buf = vec![0u8; 4096];
    r.read_log(0, 3, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 9));
    r.read_meta(0, 1, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 7));
    r.space().check().unwrap();
    assert_eq!(
        r.nand()
            .unwrap()
            .stats()
            .get(OpKind::Program, Purpose::Recovery),
        0,
        "recovery writes nothing"
    );
}

/// Without any checkpoint, recovery is a full scan: every programmed page's OOB once.
#[test]
fn without_a_checkpoint_recovery_scans_everything() {
    let mut s = NativeStore::format(device(16), cfg()).unwrap();
    let mut t = 0;
    for pid in 0..200 {
        t = s.write_page(t, pid, &page(pid, 1), HEAP).unwrap();
    }
    assert_eq!(s.checkpoints_written(), 0);
    let nand = s.into_nand_raw();
    let programs = nand.stats().total(OpKind::Program);
    let (o0, _) = recovery_reads(&nand);
    let mut r = reopen(nand, false);
    let (o1, _) = recovery_reads(r.nand().unwrap());
    assert_eq!(o1 - o0, programs, "every programmed page once");
    for pid in 0..200 {
        assert_eq!(version(&mut r, pid), 1);
    }
}

/// A newer "checkpoint" whose page has an intact OOB but a bad payload CRC is ignored: recovery
/// falls back to the older, complete one (and frees before it stay free).
#[test]
fn a_checkpoint_page_with_a_bad_crc_is_ignored() {
    use ftl::oob::{OobRecord, PageKind as OobKind};
    let (s, _) = history(10);
    let g = s.space().geometry().clone();
    let free = (0..g.blocks())
        .find(|&b| s.space().block_use(Pbn(b)) == ftl::space::BlockUse::Free)
        .unwrap();
    let mut nand = s.into_nand_raw();
    let mut data = vec![0u8; 4096];
    data[0..8].copy_from_slice(b"NFTLMAP1");
    data[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    data[20..24].copy_from_slice(&1u32.to_le_bytes());
    data[24..28].copy_from_slice(&100u32.to_le_bytes());
    data[28..32].copy_from_slice(&0xDEAD_BEEFu32.to_le_bytes());
    let mut oob = vec![0xFFu8; g.oob_size_bytes as usize];
    OobRecord::new(OobKind::MapCheckpoint, 0, 1 << 40, 1).encode_into(&mut oob);
    let t = nand.now_ns();
    nand.program(t, g.first_page(Pbn(free)), &data, &oob, Purpose::Meta)
        .unwrap();
    let mut r = reopen(nand, false);
    for pid in 0..20 {
        assert_eq!(
            version(&mut r, pid),
            0,
            "page {pid} was freed before the checkpoint"
        );
    }
    for pid in 100..200 {
        assert!(version(&mut r, pid) >= 3, "page {pid}");
    }
    r.space().check().unwrap();
}

/// (b) Power cuts at every flash operation across a checkpoint write and the GC-heavy writes
/// after it: the store reopens, every acknowledged write reads back (or the one in flight),
/// and pages freed before a completed checkpoint stay free.
#[test]
fn power_cuts_at_every_operation_around_a_checkpoint_lose_nothing() {
    let setup = || {
        let mut s = NativeStore::format(device(16), cfg()).unwrap();
        let mut t = 0;
        for pid in 0..1200 {
            t = s.write_page(t, pid, &page(pid, 1), HEAP).unwrap();
        }
        // Scattered rewrites: blocks keep some valid pages, so GC has pages to move.
        for i in 0..700u32 {
            let pid = (i * 37) % 1200;
            t = s.write_page(t, pid, &page(pid, 2), HEAP).unwrap();
        }
        (s, t)
    };
    // The operations of the run, counted once without a cut.
    let run = |s: &mut NativeStore,
               t: &mut Nanos,
               acked: &mut [(u32, Option<u32>)],
               cp: &mut u64|
     -> Result<(), Error> {
        for pid in 0..30u32 {
            *t = s.page_freed(*t, pid)?;
            acked[pid as usize] = (0, None);
        }
        *t = s.write_map_checkpoint(*t)?;
        *cp = s.checkpoints_written();
        for i in 0..600u32 {
            let pid = 30 + (i * 13) % 1170;
            acked[pid as usize].1 = Some(3);
            *t = s.write_page(*t, pid, &page(pid, 3), HEAP)?;
            acked[pid as usize] = (3, None);
            if i % 50 == 49 {
                *t = s.sync_pages(*t)?;
            }
        }
        Ok(())
    };
    let (mut s, mut t) = setup();
    let ops0 = s.nand().unwrap().ops_issued();
    let moved0 = s.space().counts().gc_migrations;
    let mut acked: Vec<(u32, Option<u32>)> = (0..1200)
        .map(|p| {
            (
                1 + u32::from((0..700).any(|i: u32| (i * 37) % 1200 == p)),
                None,
            )
        })
        .collect();
    let mut cp = 0;
    run(&mut s, &mut t, &mut acked, &mut cp).unwrap();
    let total = s.nand().unwrap().ops_issued() - ops0;
    assert!(
        s.space().counts().gc_migrations > moved0 && total > 300,
        "the run should collect garbage: {:?} {total} ops, {} free blocks",
        s.space().counts(),
        s.space().free_blocks()
    );
    for k in 1..=total {
        let (mut s, mut t) = setup();
        let base = s.checkpoints_written();
        let at = s.nand().unwrap().ops_issued() + k;
        s.nand_mut().unwrap().set_fault_plan(FaultPlan {
            cut_at_op: Some(at),
            ..FaultPlan::default()
        });
        let mut acked: Vec<(u32, Option<u32>)> = (0..1200)
            .map(|p| {
                (
                    1 + u32::from((0..700).any(|i: u32| (i * 37) % 1200 == p)),
                    None,
                )
            })
            .collect();
        let mut cp = base;
        let _ = run(&mut s, &mut t, &mut acked, &mut cp);
        let mut r = reopen(s.into_nand_raw(), false);
        for (pid, &(v, in_flight)) in acked.iter().enumerate() {
            let pid = pid as u32;
            let got = version(&mut r, pid);
            if pid < 30 {
                if cp > base {
                    assert_eq!(
                        got, 0,
                        "cut at op +{k}: page {pid} freed before the checkpoint came back"
                    );
                }
            } else {
                assert!(
                    got == v || Some(got) == in_flight,
                    "cut at op +{k}: page {pid} reads version {got}, acknowledged {v}"
                );
            }
        }
        r.space().check().unwrap();
    }
}

/// A tiny deterministic generator (xorshift64*), so the test needs no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One seeded history: writes, frees, syncs (which checkpoint on their own), explicit
/// checkpoints, GC (the working set fills the device), and a power cut at a random operation
/// followed by a restart, three times over. Returns the device after the last cut, and per page
/// (last acknowledged version, version in flight, freed since the last complete checkpoint).
fn random_history(seed: u64) -> (Nand, Vec<(u32, Option<u32>, bool)>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut s = NativeStore::format(device(16), cfg()).unwrap();
    let pids = 1000u64;
    let mut model: Vec<(u32, Option<u32>, bool)> = vec![(0, None, false); pids as usize];
    let mut next_version = 1u32;
    for phase in 0..3 {
        let ops = 500 + rng.below(2500);
        let at = s.nand().unwrap().ops_issued() + 1 + rng.below(ops * 2);
        s.nand_mut().unwrap().set_fault_plan(FaultPlan {
            cut_at_op: Some(at),
            ..FaultPlan::default()
        });
        let mut t = s.nand().unwrap().now_ns();
        let mut go =
            |s: &mut NativeStore, model: &mut Vec<(u32, Option<u32>, bool)>| -> Result<(), Error> {
                for _ in 0..ops {
                    let pid = rng.below(pids) as u32;
                    match rng.below(100) {
                        0..=79 => {
                            model[pid as usize].1 = Some(next_version);
                            t = s.write_page(t, pid, &page(pid, next_version), HEAP)?;
                            model[pid as usize] = (next_version, None, false);
                            next_version += 1;
                        }
                        80..=93 => {
                            if model[pid as usize].0 != 0 {
                                model[pid as usize].2 = true;
                                t = s.page_freed(t, pid)?;
                                model[pid as usize].0 = 0;
                            }
                        }
                        94..=98 => {
                            let cps = s.checkpoints_written();
                            t = s.sync_pages(t)?;
                            if s.checkpoints_written() > cps {
                                model.iter_mut().for_each(|m| m.2 = false);
                            }
                        }
                        _ => {
                            t = s.write_map_checkpoint(t)?;
                            model.iter_mut().for_each(|m| m.2 = false);
                        }
                    }
                }
                Ok(())
            };
        let _ = go(&mut s, &mut model);
        let nand = s.into_nand_raw();
        if phase == 2 {
            return (nand, model);
        }
        s = reopen(nand, false);
        // As the engine would: pages the model holds free are freed again after a restart.
        for (pid, m) in model.iter_mut().enumerate() {
            if let Some(v) = m.1.take() {
                let got = version(&mut s, pid as u32);
                if got == v {
                    m.0 = v;
                }
            }
            if m.0 == 0 && s.location(pid as u32).is_some() {
                let t = s.nand().unwrap().now_ns();
                s.page_freed(t, pid as u32).unwrap();
                m.2 = true;
            }
        }
    }
    unreachable!()
}

/// (c) Seeded random histories: the checkpoint recovery and a full-scan recovery of the same
/// device agree on every page, and both keep the model: acknowledged versions present, pages
/// freed before the last complete checkpoint free.
#[test]
fn random_histories_recover_as_a_full_scan_does() {
    for seed in 1..=12u64 {
        let (nand, model) = random_history(seed);
        let (o0, _) = recovery_reads(&nand);
        let programs = nand.stats().total(OpKind::Program);
        let mut r = reopen(nand, false);
        let (o1, _) = recovery_reads(r.nand().unwrap());
        assert!(
            2 * (o1 - o0) < programs,
            "seed {seed}: {} OOB reads after {programs} programs",
            o1 - o0
        );
        let (nand2, _) = random_history(seed);
        let mut f = reopen(nand2, true);
        for (pid, &(v, in_flight, freed_since)) in model.iter().enumerate() {
            let pid = pid as u32;
            let got = version(&mut r, pid);
            let reference = version(&mut f, pid);
            if freed_since {
                // Freed after the last checkpoint: may come back (the engine frees it again).
                continue;
            }
            assert_eq!(
                got, reference,
                "seed {seed}: page {pid} checkpoint vs full scan"
            );
            assert!(
                got == v || Some(got) == in_flight,
                "seed {seed}: page {pid} reads {got}, acknowledged {v}"
            );
        }
        r.space().check().unwrap();
    }
}

/// Recovery before and after map checkpoints on the `mt29f16g08` preset (2 GiB, one die, OOB
/// read = tR = 25 us), filled with writes: run with
/// `cargo test --release -p storage --test native_checkpoint -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_recovery_on_mt29f16g08() {
    let cfg = NativeConfig {
        spare_factor: 0.07,
        ..NativeConfig::default()
    };
    let history = |extra: u32| {
        let nand = Nand::new(DeviceConfig::preset("mt29f16g08", &[]).unwrap()).unwrap();
        let mut s = NativeStore::format(nand, cfg.clone()).unwrap();
        let n = s.db_pages() as u32;
        let mut t = 0;
        for pid in 0..n {
            t = s.write_page(t, pid, &page(pid, 1), HEAP).unwrap();
            if pid % 64 == 63 {
                t = s.sync_pages(t).unwrap();
            }
        }
        let mut rng = Rng(7);
        for i in 0..n / 4 + extra {
            let pid = rng.below(u64::from(n)) as u32;
            t = s.write_page(t, pid, &page(pid, 2), HEAP).unwrap();
            if i % 64 == 63 {
                t = s.sync_pages(t).unwrap();
            }
        }
        let (cp_written, cp_pages) = s.checkpoint_pages_written();
        let host = s.device_report().unwrap().host.writes;
        println!(
            "{} host writes, {} GC migrations, {cp_written} checkpoint pages written ({:.1} per 1,000 host writes; {cp_pages} pages per checkpoint)",
            host,
            s.space().counts().gc_migrations,
            cp_written as f64 * 1000.0 / host as f64
        );
        s.into_nand_raw()
    };
    // The full scan once; the checkpoint recovery at cut points spread over one checkpoint
    // interval (32 x 488 programs), since what it reads depends on the distance to the last one.
    for (full, extra) in [
        (true, 0),
        (false, 0),
        (false, 1000),
        (false, 2000),
        (false, 3000),
        (false, 4000),
    ] {
        let mut nand = history(extra);
        nand.power_cut();
        nand.power_on();
        let (o0, r0) = recovery_reads(&nand);
        let t0 = nand.now_ns();
        let s = if full {
            NativeStore::open_full_scan(nand, cfg.clone()).unwrap()
        } else {
            NativeStore::open(nand, cfg.clone()).unwrap()
        };
        let (o1, r1) = recovery_reads(s.nand().unwrap());
        let g = s.space().geometry();
        println!(
            "{} (+{extra} writes): {} OOB reads + {} page reads of {} pages in {} blocks; recovery {:.1} ms virtual",
            if full { "full scan" } else { "map checkpoint" },
            o1 - o0,
            r1 - r0,
            g.pages(),
            g.blocks(),
            (s.nand().unwrap().now_ns() - t0) as f64 / 1e6
        );
    }
}

/// With a region (its own space over its dies, stamping its own blocks), a checkpoint taken
/// before and another after `CREATE REGION`: the checkpoint recovery and the full scan agree,
/// and the region's pages stay on its dies.
#[test]
fn regions_recover_from_a_checkpoint_as_from_a_full_scan() {
    const REGION: WriteHint = WriteHint {
        object: 9,
        kind: PageKind::Heap,
    };
    let history = || {
        let mut s = NativeStore::format(device(64), cfg()).unwrap();
        let mut t = 0;
        for pid in 0..1500 {
            t = s.write_page(t, pid, &page(pid, 1), HEAP).unwrap();
        }
        t = s.write_map_checkpoint(t).unwrap();
        let o = [("MAX_CHIPS".to_string(), "1".to_string())];
        t = s.create_region(t, "rg", &o).unwrap();
        s.bind_object(9, "rg").unwrap();
        for round in 2..=4u32 {
            for pid in 1500..1800 {
                t = s.write_page(t, pid, &page(pid, round), REGION).unwrap();
            }
            for pid in (0..1500).step_by(3) {
                t = s.write_page(t, pid, &page(pid, round), HEAP).unwrap();
            }
            if round == 3 {
                t = s.write_map_checkpoint(t).unwrap();
            }
        }
        for pid in 1000..1010 {
            t = s.page_freed(t, pid).unwrap();
        }
        s.into_nand_raw()
    };
    let nand = history();
    let (o0, _) = recovery_reads(&nand);
    let programs = nand.stats().total(OpKind::Program);
    let mut r = reopen(nand, false);
    let (o1, _) = recovery_reads(r.nand().unwrap());
    assert!(2 * (o1 - o0) < programs, "{} OOB reads", o1 - o0);
    r.bind_object(9, "rg").unwrap();
    let mut f = reopen(history(), true);
    let (_, dies) = r.region("rg").unwrap();
    let dies = dies.to_vec();
    let g = r.space().geometry().clone();
    for pid in 0..1800 {
        let v = version(&mut r, pid);
        if (1000..1010).contains(&pid) {
            continue; // freed after the last checkpoint: may come back
        }
        assert_eq!(v, version(&mut f, pid), "page {pid}");
        let want = if pid >= 1500 || pid % 3 == 0 { 4 } else { 1 };
        assert_eq!(v, want, "page {pid}");
        if pid >= 1500 {
            let die = g.die_of_block(g.block_of(r.location(pid).unwrap())).0;
            assert!(dies.contains(&die), "region page {pid} off its dies");
        }
    }
    r.space().check().unwrap();
}

/// Map checkpoint pages are programmed as mapping work, master records as meta, so that flash
/// statistics and the crash test's report ("program mapping", "program meta") tell a cut on one
/// from a cut on the other (issue 32: both were "program meta").
#[test]
fn map_checkpoints_and_master_records_are_counted_apart() {
    let mut s = NativeStore::format(device(64), cfg()).unwrap();
    let programs = |s: &NativeStore, p| s.nand().unwrap().stats().get(OpKind::Program, p);
    let t = s.write_meta(0, 1, &[7u8; 4096]).unwrap();
    assert_eq!(programs(&s, Purpose::Meta), 1);
    assert_eq!(programs(&s, Purpose::Mapping), 0);
    s.write_map_checkpoint(t).unwrap();
    let (written, per_checkpoint) = s.checkpoint_pages_written();
    assert_eq!(written, per_checkpoint);
    assert_eq!(programs(&s, Purpose::Mapping), written);
    assert_eq!(programs(&s, Purpose::Meta), 1);
}
