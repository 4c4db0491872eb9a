//! The VSL under power cuts: a seeded workload of writes, atomic multi-extent writes, trims and
//! syncs over a sparse virtual space (blocks near 0, 2^20, 2^40 and the top of the space), cut
//! at a seeded flash operation. After recovery every block reads what the oracle of
//! acknowledged operations says, except that the one operation in flight at the cut is visible
//! either whole or not at all (VSL invariants 3 and 4). The recovered VSL then serves more
//! operations and is checked again. The aged variants first fill three quarters of the
//! device's capacity with blocks of their own (in a fifth part of the virtual space) and rewrite
//! them until the space has collected garbage, so that the workload's writes make it collect
//! and the cut can land on a GC copy or erase; those blocks must read back intact too.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;

use dfs::vsl::{Vsl, VslConfig, BLOCK_BYTES, VIRTUAL_BLOCKS};
use nand::{DeviceConfig, FaultPlan, Nand};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const REGIONS: [u64; 4] = [0, 1 << 20, 1 << 40, VIRTUAL_BLOCKS - 256];
const SPAN: u64 = 96;

fn cfg() -> VslConfig {
    VslConfig {
        max_atomic_blocks: 48,
        ..VslConfig::default()
    }
}

fn device(cells: &str) -> Nand {
    let cfg = match cells {
        "slc" => DeviceConfig::preset("tiny", &["geometry.blocks_per_plane=12".into()]).unwrap(),
        _ => DeviceConfig::preset(
            "mlc16k",
            &[
                "geometry.page_size_bytes=16384".into(),
                "geometry.oob_size_bytes=128".into(),
                "geometry.channels=2".into(),
                "geometry.chips_per_channel=1".into(),
                "geometry.blocks_per_plane=12".into(),
                "geometry.pages_per_block=32".into(),
                "reliability.factory_bad_block_ratio=0".into(),
                "reliability.ecc_codeword_bytes=512".into(),
            ],
        )
        .unwrap(),
    };
    Nand::new(cfg).unwrap()
}

fn fill(buf: &mut [u8], vbn: u64, version: u64) {
    buf[0..8].copy_from_slice(&vbn.to_le_bytes());
    buf[8..16].copy_from_slice(&version.to_le_bytes());
    let x = vbn.wrapping_mul(31).wrapping_add(version.wrapping_mul(17));
    for (i, b) in buf[16..].iter_mut().enumerate() {
        *b = (x.wrapping_add(i as u64 * 7) >> 3) as u8;
    }
}

/// What a block reads as: `None` zeros, `Some(version)`, or an error for anything else.
fn decode(buf: &[u8], vbn: u64) -> Result<Option<u64>, String> {
    if buf.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    let v = u64::from_le_bytes(buf[8..16].try_into().unwrap());
    let mut want = vec![0u8; BLOCK_BYTES];
    fill(&mut want, vbn, v);
    if want != buf {
        return Err(format!("block {vbn} holds garbage (claims version {v})"));
    }
    Ok(Some(v))
}

#[derive(Debug, Clone)]
enum Op {
    Write(Vec<(u64, u64)>), // extents (vbn, blocks), one group
    Trim(u64, u64),
    Sync,
}

fn gen(rng: &mut Xoshiro256PlusPlus) -> Op {
    let at = |rng: &mut Xoshiro256PlusPlus| {
        REGIONS[(rng.next_u64() % 4) as usize] + rng.next_u64() % SPAN
    };
    match rng.next_u64() % 100 {
        0..=54 => Op::Write(vec![(at(rng), 1 + rng.next_u64() % 16)]),
        55..=74 => {
            // Extents in different regions: one atomic group.
            let k = 2 + rng.next_u64() % 2;
            let mut ex: Vec<(u64, u64)> = Vec::new();
            for r in REGIONS.iter().take(k as usize) {
                ex.push((r + rng.next_u64() % SPAN, 1 + rng.next_u64() % 12));
            }
            Op::Write(ex)
        }
        75..=94 => Op::Trim(at(rng), 1 + rng.next_u64() % 24),
        _ => Op::Sync,
    }
}

/// Model: block -> version (absent: zeros).
type Model = BTreeMap<u64, u64>;

fn apply(model: &mut Model, op: &Op, version: u64) {
    match op {
        Op::Write(ex) => {
            for &(s, n) in ex {
                for v in s..s + n {
                    model.insert(v, version);
                }
            }
        }
        Op::Trim(s, n) => {
            for v in *s..s + n {
                model.remove(&v);
            }
        }
        Op::Sync => {}
    }
}

fn clip(ex: &[(u64, u64)]) -> Vec<(u64, u64)> {
    ex.iter()
        .map(|&(s, n)| (s, n.min(VIRTUAL_BLOCKS - s)))
        .collect()
}

fn run_op(vsl: &mut Vsl, t: u64, op: &Op, version: u64) -> Result<u64, dfs::VslError> {
    match op {
        Op::Write(ex) => {
            let bufs: Vec<Vec<u8>> = ex
                .iter()
                .map(|&(s, n)| {
                    let mut b = vec![0u8; n as usize * BLOCK_BYTES];
                    for i in 0..n {
                        fill(
                            &mut b[i as usize * BLOCK_BYTES..(i as usize + 1) * BLOCK_BYTES],
                            s + i,
                            version,
                        );
                    }
                    b
                })
                .collect();
            let ext: Vec<(u64, &[u8])> = ex
                .iter()
                .zip(&bufs)
                .map(|(&(s, _), b)| (s, b.as_slice()))
                .collect();
            vsl.write_atomic(t, &ext)
        }
        Op::Trim(s, n) => vsl.trim(t, *s, *n),
        Op::Sync => vsl.sync(t),
    }
}

fn overlaps(ex: &[(u64, u64)]) -> bool {
    ex.iter()
        .enumerate()
        .any(|(i, &(s, n))| ex[..i].iter().any(|&(w, m)| s < w + m && w < s + n))
}

/// Reads every block of the regions; the state as a model.
fn read_all(vsl: &mut Vsl) -> Result<Model, String> {
    read_ranges(
        vsl,
        REGIONS
            .iter()
            .map(|&r| (r, (r + SPAN + 32).min(VIRTUAL_BLOCKS))),
    )
}

/// Where the aged variants keep their own blocks: apart from every workload region.
const AGE_BASE: u64 = 1 << 30;
/// Their versions, apart from the workload's (operation numbers) and the second workload's.
const AGE_VERSION: u64 = 1 << 40;

/// Ages the VSL: writes three quarters of its capacity at [`AGE_BASE`], then rewrites seeded
/// random 8-block runs of it until the space has erased a GC victim, and syncs. Returns the
/// time and the model of those blocks.
fn age(vsl: &mut Vsl, seed: u64) -> Result<(u64, Model), String> {
    let n = vsl.capacity_blocks() * 3 / 4;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xA6E);
    let mut model = Model::new();
    let mut t = 0;
    let mut k = 0;
    let mut write = |vsl: &mut Vsl, s: u64, t: u64, model: &mut Model| {
        let len = 8.min(n - s);
        k += 1;
        let op = Op::Write(vec![(AGE_BASE + s, len)]);
        apply(model, &op, AGE_VERSION + k);
        run_op(vsl, t, &op, AGE_VERSION + k).map_err(|e| format!("ageing: {e}"))
    };
    for s in (0..n).step_by(8) {
        t = write(vsl, s, t, &mut model)?;
    }
    let mut rounds = 0;
    while vsl.space_counts().gc_erases == 0 {
        rounds += 1;
        if rounds > 4 * n {
            return Err(format!(
                "ageing: no GC after {rounds} rewrites of {n} blocks"
            ));
        }
        t = write(vsl, rng.next_u64() % n / 8 * 8, t, &mut model)?;
    }
    t = vsl.sync(t).map_err(|e| format!("ageing: {e}"))?;
    Ok((t, model))
}

/// Reads the blocks of `ranges` (start, end); the state as a model.
fn read_ranges(vsl: &mut Vsl, ranges: impl Iterator<Item = (u64, u64)>) -> Result<Model, String> {
    let mut m = Model::new();
    let mut buf = vec![0u8; BLOCK_BYTES];
    let t = vsl.now_ns();
    for (start, end) in ranges {
        for v in start..end {
            vsl.read(t, v, &mut buf).map_err(|e| e.to_string())?;
            if let Some(ver) = decode(&buf, v)? {
                m.insert(v, ver);
            }
        }
    }
    Ok(m)
}

/// Runs `ops` operations of `seed`, cutting power at flash operation `cut` (0: no cut). Returns
/// the flash operations issued and the GC erases among them.
fn run(cells: &str, aged: bool, seed: u64, ops: usize, cut: u64) -> Result<(u64, u64), String> {
    let mut vsl = Vsl::format(device(cells), &cfg()).map_err(|e| e.to_string())?;
    let (mut t, aged_model) = if aged {
        age(&mut vsl, seed)?
    } else {
        (0, Model::new())
    };
    let base = vsl.nand().ops_issued();
    let gc_base = vsl.space_counts().gc_erases;
    if cut > 0 {
        vsl.nand_mut().set_fault_plan(FaultPlan {
            cut_at_op: Some(base + cut),
            ..FaultPlan::default()
        });
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut acked = Model::new();
    let mut inflight: Option<(Op, u64)> = None;
    for i in 0..ops {
        let mut op = gen(&mut rng);
        if let Op::Write(ex) = &op {
            if overlaps(ex) {
                continue;
            }
            op = Op::Write(clip(ex));
        }
        if let Op::Trim(s, n) = op {
            op = Op::Trim(s, n.min(VIRTUAL_BLOCKS - s));
        }
        let version = i as u64 + 1;
        match run_op(&mut vsl, t, &op, version) {
            Ok(done) => {
                t = done;
                apply(&mut acked, &op, version);
            }
            Err(e) if e.is_power_loss() => {
                inflight = Some((op, version));
                break;
            }
            Err(dfs::VslError::NoSpace { .. }) => {}
            Err(e) => return Err(format!("op {i} {op:?}: {e}")),
        }
        if cut == 0 && i % 50 == 0 {
            vsl.check()?;
        }
    }
    let issued = vsl.nand().ops_issued() - base;
    let gc_erases = vsl.space_counts().gc_erases - gc_base;
    if cut == 0 {
        return Ok((issued, gc_erases));
    }
    let mut nand = vsl.into_nand();
    nand.set_fault_plan(FaultPlan::default());
    if nand.is_powered() {
        nand.power_cut();
    }
    nand.power_on();
    let (mut vsl, _rep) = Vsl::open(nand, &cfg()).map_err(|e| format!("recovery: {e}"))?;
    vsl.check().map_err(|e| format!("after recovery: {e}"))?;
    // A cut tears pages (they do not read); it never leaves a readable record that fails its
    // CRC, which recovery reports as damage (format 2's checksums).
    if !vsl.damaged_units().is_empty() {
        return Err(format!(
            "recovery reports damaged records at {:?} after a power cut",
            vsl.damaged_units()
        ));
    }
    // Every block read back passes its checksum, written with it in one program.
    let (bad, _) = vsl.scrub(0).map_err(|e| format!("scrub: {e}"))?;
    if !bad.is_empty() {
        return Err(format!(
            "blocks failing their checksum after a cut: {bad:?}"
        ));
    }
    if aged {
        let n = vsl.capacity_blocks() * 3 / 4;
        if read_ranges(&mut vsl, std::iter::once((AGE_BASE, AGE_BASE + n)))? != aged_model {
            return Err(format!("cut at op {cut}: the aged blocks read back wrong"));
        }
    }
    let got = read_all(&mut vsl)?;
    let ok = got == acked
        || inflight.as_ref().is_some_and(|(op, version)| {
            let mut after = acked.clone();
            apply(&mut after, op, *version);
            got == after
        });
    if !ok {
        let diff: Vec<_> = got
            .iter()
            .filter(|(k, v)| acked.get(k) != Some(v))
            .take(5)
            .collect();
        let missing: Vec<_> = acked
            .iter()
            .filter(|(k, _)| !got.contains_key(k))
            .take(5)
            .collect();
        return Err(format!(
            "cut at op {cut}: recovered state is neither the acknowledged one nor it plus the \
             operation in flight {inflight:?}; differing {diff:?}, missing {missing:?}"
        ));
    }
    // The recovered VSL keeps working.
    let mut model = got;
    let mut t = vsl.now_ns();
    for i in 0..ops / 3 {
        let op = gen(&mut rng);
        if let Op::Write(ex) = &op {
            if overlaps(ex) {
                continue;
            }
        }
        let op = match op {
            Op::Write(ex) => Op::Write(clip(&ex)),
            Op::Trim(s, n) => Op::Trim(s, n.min(VIRTUAL_BLOCKS - s)),
            o => o,
        };
        let version = 1_000_000 + i as u64;
        match run_op(&mut vsl, t, &op, version) {
            Ok(d) => {
                t = d;
                apply(&mut model, &op, version);
            }
            Err(dfs::VslError::NoSpace { .. }) => {}
            Err(e) => return Err(format!("after recovery, op {i}: {e}")),
        }
    }
    vsl.check()?;
    if read_all(&mut vsl)? != model {
        return Err("after recovery, the second workload reads wrong".into());
    }
    Ok((issued, gc_erases))
}

fn seeds(cells: &str, aged: bool, n: u64, ops: usize) {
    let mut failures = Vec::new();
    let mut collected = 0;
    for seed in 0..n {
        let (total, gc_erases) = run(cells, aged, seed, ops, 0).unwrap();
        collected += u64::from(gc_erases > 0);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xC0FFEE);
        let cut = 1 + rng.next_u64() % total.max(1);
        if let Err(e) = run(cells, aged, seed, ops, cut) {
            failures.push(format!("{cells} seed {seed}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Ageing is what makes the workload collect garbage (so cuts can land on GC).
    if aged {
        assert!(
            collected * 10 >= n * 9,
            "{cells}: GC ran in only {collected} of {n} aged workloads"
        );
    }
}

#[test]
fn vsl_power_cuts_slc_many_seeds() {
    let n = std::env::var("VSL_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    seeds("slc", false, n, 300);
}

#[test]
fn vsl_power_cuts_mlc_16k_pages() {
    let n = std::env::var("VSL_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(60, |s: u64| s / 5);
    seeds("mlc", false, n, 200);
}

/// The same cuts on aged devices (three quarters written and rewritten until GC ran): the
/// workload makes the space collect garbage, so cuts land on GC copies and erases too.
#[test]
fn vsl_power_cuts_on_aged_devices() {
    let n = std::env::var("VSL_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(60, |s: u64| s / 5);
    seeds("slc", true, n, 300);
    seeds("mlc", true, n / 2, 200);
}

#[test]
fn virtual_space_is_sparse_and_large_writes_split() {
    let mut vsl = Vsl::format(device("slc"), &cfg()).unwrap();
    let top = VIRTUAL_BLOCKS - 1;
    let mut b = vec![0u8; BLOCK_BYTES];
    fill(&mut b, top, 9);
    let t = vsl.write(0, top, &b).unwrap();
    assert!(vsl.write(t, VIRTUAL_BLOCKS, &b).is_err());
    // 100 blocks > the bound of 48: three groups.
    let mut big = vec![0u8; 100 * BLOCK_BYTES];
    for i in 0..100 {
        fill(
            &mut big[i * BLOCK_BYTES..(i + 1) * BLOCK_BYTES],
            (1 << 41) + i as u64,
            3,
        );
    }
    let t = vsl.write(t, 1 << 41, &big).unwrap();
    assert_eq!(vsl.counts().groups, 4);
    assert!(matches!(
        vsl.write_atomic(t, &[(5, &big[..])]),
        Err(dfs::VslError::TooLarge { .. })
    ));
    assert_eq!(vsl.mapped_blocks(), 101);
    assert_eq!(vsl.map().leaves(), 2);
    let t = vsl.trim(t, 1 << 40, 1 << 42).unwrap();
    assert_eq!(vsl.mapped_blocks(), 1);
    vsl.check().unwrap();
    let mut r = vec![0u8; BLOCK_BYTES];
    vsl.read(t, top, &mut r).unwrap();
    assert_eq!(decode(&r, top).unwrap(), Some(9));
    let nand = vsl.into_nand();
    let (mut vsl, _) = Vsl::open(nand, &cfg()).unwrap();
    assert_eq!(vsl.mapped_blocks(), 1);
    vsl.read(0, top, &mut r).unwrap();
    assert_eq!(decode(&r, top).unwrap(), Some(9));
}

/// A program or erase that fails on the media (no power loss) retires its block: the space
/// retries the write elsewhere and moves the block's valid units off it, the VSL follows the
/// moves (including units of the group being written), and nothing acknowledged is lost.
#[test]
fn media_failures_retire_blocks_without_losing_data() {
    let mut retired = 0;
    for seed in 0..60u64 {
        let mut vsl = Vsl::format(device("slc"), &cfg()).unwrap();
        let base = vsl.nand().ops_issued();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xBAD);
        vsl.nand_mut().set_fault_plan(FaultPlan {
            fail_op: Some(base + 1 + rng.next_u64() % 1500),
            ..FaultPlan::default()
        });
        let mut model = Model::new();
        let mut t = 0;
        for i in 0..300 {
            let op = match gen(&mut rng) {
                Op::Write(ex) if overlaps(&ex) => continue,
                Op::Write(ex) => Op::Write(clip(&ex)),
                Op::Trim(s, n) => Op::Trim(s, n.min(VIRTUAL_BLOCKS - s)),
                o => o,
            };
            let version = i as u64 + 1;
            match run_op(&mut vsl, t, &op, version) {
                Ok(d) => {
                    t = d;
                    apply(&mut model, &op, version);
                }
                Err(dfs::VslError::NoSpace { .. }) => {}
                Err(e) => panic!("seed {seed} op {i} {op:?}: {e}"),
            }
        }
        vsl.check().unwrap();
        retired += vsl.space_counts().retired_blocks;
        // Reads may meet the failure too (an uncorrectable read): the plan fired by now.
        assert_eq!(read_all(&mut vsl).unwrap(), model, "seed {seed}");
        let nand = vsl.into_nand();
        let (mut vsl, _) = Vsl::open(nand, &cfg()).unwrap();
        vsl.check().unwrap();
        assert_eq!(
            read_all(&mut vsl).unwrap(),
            model,
            "seed {seed} after recovery"
        );
    }
    assert!(
        retired > 10,
        "only {retired} blocks retired: the failures missed the programs"
    );
}

/// A checkpoint of several pages (700 single-block extents: 3 pages) cut at each of its
/// programs: recovery uses the previous checkpoint and the trim records, or the new one once
/// complete; the state is the same either way.
#[test]
fn multi_page_checkpoints_survive_cuts() {
    for cut in 0..8u64 {
        let mut vsl = Vsl::format(device("slc"), &cfg()).unwrap();
        let mut model = Model::new();
        let mut b = vec![0u8; BLOCK_BYTES];
        let mut t = 0;
        let base_vbn = 1u64 << 30;
        for i in 0..700u64 {
            let v = base_vbn + 2 * i;
            fill(&mut b, v, 1);
            t = vsl.write(t, v, &b).unwrap();
            model.insert(v, 1);
        }
        t = vsl.checkpoint(t).unwrap();
        for i in 0..20u64 {
            let v = base_vbn + 2 * (i * 30);
            t = vsl.trim(t, v, 1).unwrap();
            model.remove(&v);
        }
        let ops = vsl.nand().ops_issued();
        vsl.nand_mut().set_fault_plan(FaultPlan {
            cut_at_op: Some(ops + 1 + cut),
            ..FaultPlan::default()
        });
        let r = vsl.checkpoint(t);
        assert!(r.is_err() == (cut < 3), "cut {cut}: {r:?}");
        let mut nand = vsl.into_nand();
        nand.set_fault_plan(FaultPlan::default());
        if nand.is_powered() {
            nand.power_cut();
        }
        nand.power_on();
        let (mut vsl, rep) = Vsl::open(nand, &cfg()).unwrap();
        vsl.check().unwrap();
        assert_eq!(rep.trims_applied, if cut < 3 { 20 } else { 0 }, "cut {cut}");
        let mut got = Model::new();
        let mut r = vec![0u8; BLOCK_BYTES];
        for i in 0..700u64 {
            let v = base_vbn + 2 * i;
            vsl.read(0, v, &mut r).unwrap();
            if let Some(x) = decode(&r, v).unwrap() {
                got.insert(v, x);
            }
        }
        assert_eq!(got, model, "cut {cut}");
    }
}
