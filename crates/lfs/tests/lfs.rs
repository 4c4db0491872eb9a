//! Behaviour of the log-structured file system in both modes: POSIX-ish operations and remount,
//! host cleaning on a full device, ALFS's append-only writes on AMF, and power cuts at seeded
//! flash operations (every fsynced file intact, fsck clean).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ftl::{BlockDevice, FtlError, FtlOptions, FtlReport};
use lfs::{Lfs, LfsError, Mode, Params};
use nand::{DeviceConfig, FaultPlan, Nand, Nanos};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const S_IFREG: u32 = 0o100_644;
const S_IFDIR: u32 = 0o040_755;

fn nand(blocks_per_plane: u32) -> Nand {
    let cfg = DeviceConfig::preset(
        "tiny",
        &[
            format!("geometry.blocks_per_plane={blocks_per_plane}"),
            "reliability.factory_bad_block_ratio=0".into(),
        ],
    )
    .unwrap();
    Nand::new(cfg).unwrap()
}

fn target(mode: Mode) -> &'static str {
    match mode {
        Mode::F2fs => "page",
        Mode::Alfs => "amf",
    }
}

fn fresh(mode: Mode, blocks_per_plane: u32) -> Lfs {
    fresh_with(mode, blocks_per_plane, false)
}

/// A fresh file system, with every data block's CRC beside its address when `data_checksums`.
fn fresh_with(mode: Mode, blocks_per_plane: u32, data_checksums: bool) -> Lfs {
    fresh_nids(mode, blocks_per_plane, data_checksums, 0)
}

/// A fresh file system with `max_nids` node ids (0: format's default).
fn fresh_nids(mode: Mode, blocks_per_plane: u32, data_checksums: bool, max_nids: u32) -> Lfs {
    let (dev, seg) = lfs::device(
        mode,
        target(mode),
        nand(blocks_per_plane),
        &FtlOptions::default(),
        true,
    )
    .unwrap();
    let p = Params {
        mode,
        seg_pages: seg,
        max_nids,
        data_checksums,
    };
    Lfs::format(dev, p, 0).unwrap()
}

/// Unmounts (or, with `cut`, takes the device as a power cut leaves it) and mounts again.
fn remount(fs: Lfs, mode: Mode, cut: bool) -> (Lfs, lfs::MountReport) {
    let dev = if cut {
        fs.into_device()
    } else {
        fs.unmount().unwrap()
    };
    let mut nand = dev.into_nand().unwrap();
    nand.set_fault_plan(FaultPlan::default());
    if nand.is_powered() {
        nand.power_cut();
    }
    nand.power_on();
    let (dev, _) = lfs::device(mode, target(mode), nand, &FtlOptions::default(), false).unwrap();
    Lfs::mount(dev).unwrap()
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut v = vec![0u8; len];
    r.fill_bytes(&mut v);
    v
}

fn read_all(fs: &mut Lfs, ino: u32) -> Vec<u8> {
    let size = fs.getattr(ino).unwrap().size as usize;
    let mut v = vec![0u8; size];
    assert_eq!(fs.read(ino, 0, &mut v).unwrap(), size);
    v
}

fn assert_clean(fs: &mut Lfs) {
    let p = fs.fsck().unwrap();
    assert!(p.is_empty(), "fsck: {p:?}");
}

#[test]
fn files_and_directories_survive_remount_in_both_modes() {
    let modes = [Mode::F2fs, Mode::Alfs];
    for (mode, sums) in modes.iter().flat_map(|&m| [(m, false), (m, true)]) {
        let mut fs = fresh_with(mode, 64, sums);
        let (d, _) = fs.create(1, b"dir", S_IFDIR, 0, 0, 1, None).unwrap();
        let (a, _) = fs.create(d, b"a", S_IFREG, 0, 0, 1, None).unwrap();
        let big = pattern(1, 3_000_000); // beyond the inode's own addresses: direct nodes
        fs.write(a, 0, &big, 2).unwrap();
        fs.write(a, 5000, b"hello", 3).unwrap();
        let (b, _) = fs.create(1, b"b", S_IFREG, 0, 0, 1, None).unwrap();
        fs.write(b, 0, b"small file", 4).unwrap();
        fs.create(1, b"ln", 0o120_777, 0, 0, 1, Some(b"dir/a"))
            .unwrap();
        fs.rename(1, b"b", d, b"b2", 5).unwrap();
        let (c, _) = fs.create(1, b"gone", S_IFREG, 0, 0, 1, None).unwrap();
        fs.write(c, 0, &pattern(2, 100_000), 6).unwrap();
        fs.remove(1, b"gone", false, 7).unwrap();
        assert!(matches!(
            fs.remove(1, b"dir", true, 8),
            Err(LfsError::NotEmpty)
        ));
        assert_clean(&mut fs);
        let (mut fs, _) = remount(fs, mode, false);
        assert_clean(&mut fs);
        let (a2, _) = fs.lookup(d, b"a").unwrap();
        assert_eq!(a2, a);
        let mut want = big.clone();
        want[5000..5005].copy_from_slice(b"hello");
        assert!(read_all(&mut fs, a) == want, "{mode:?}: big file differs");
        let (b2, _) = fs.lookup(d, b"b2").unwrap();
        assert_eq!(read_all(&mut fs, b2), b"small file");
        assert!(matches!(fs.lookup(1, b"b"), Err(LfsError::NotFound)));
        assert!(matches!(fs.lookup(1, b"gone"), Err(LfsError::NotFound)));
        let (l, _) = fs.lookup(1, b"ln").unwrap();
        assert_eq!(fs.readlink(l).unwrap(), b"dir/a");
        // Truncate, then grow over a hole.
        fs.setattr(
            a,
            lfs::SetAttr {
                size: Some(10_000),
                ..Default::default()
            },
            9,
        )
        .unwrap();
        fs.write(a, 20_000, b"x", 10).unwrap();
        let v = read_all(&mut fs, a);
        assert_eq!(&v[..10_000], &want[..10_000]);
        assert!(v[10_000..20_000].iter().all(|&x| x == 0));
        let (mut fs, _) = remount(fs, mode, false);
        assert_clean(&mut fs);
        assert_eq!(read_all(&mut fs, a).len(), 20_001);
    }
}

/// Fills the device to `fill` of what statfs offers with files, then overwrites random
/// 16 KiB pieces until `rounds` times the device's capacity has been written.
fn churn(fs: &mut Lfs, seed: u64, fill: f64, rounds: f64) -> BTreeMap<u32, Vec<u8>> {
    let st = fs.statfs();
    let file_bytes = 256 * 1024;
    let n = ((st.blocks_free as f64 * 4096.0 * fill) as usize / file_bytes).max(2);
    let mut files = BTreeMap::new();
    for i in 0..n {
        let (ino, _) = fs
            .create(1, format!("f{i}").as_bytes(), S_IFREG, 0, 0, 0, None)
            .unwrap();
        let d = pattern(seed * 1000 + i as u64, file_bytes);
        fs.write(ino, 0, &d, 0).unwrap();
        files.insert(ino, d);
    }
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
    let inos: Vec<u32> = files.keys().copied().collect();
    let total = (st.blocks as f64 * 4096.0 * rounds) as usize;
    let mut written = 0;
    while written < total {
        let ino = inos[r.next_u64() as usize % inos.len()];
        let off = (r.next_u64() as usize % (file_bytes / 4096 - 4)) * 4096;
        let piece = pattern(r.next_u64(), 16384);
        fs.write(ino, off as u64, &piece, 1).unwrap();
        files.get_mut(&ino).unwrap()[off..off + 16384].copy_from_slice(&piece);
        written += piece.len();
        if r.next_u64() % 64 == 0 {
            fs.fsync(ino).unwrap();
        }
    }
    files
}

#[test]
fn cost_benefit_cleaning_keeps_data_too() {
    let mut fs = fresh(Mode::Alfs, 64);
    fs.cleaning = lfs::Cleaning::CostBenefit;
    let files = churn(&mut fs, 11, 0.8, 2.0);
    assert!(fs.stats().victims > 10, "{:?}", fs.stats());
    assert_clean(&mut fs);
    for (&ino, d) in &files {
        assert!(read_all(&mut fs, ino) == *d, "inode {ino} differs");
    }
}

#[test]
fn host_cleaning_keeps_a_full_device_working() {
    for mode in [Mode::F2fs, Mode::Alfs] {
        let mut fs = fresh(mode, 64);
        let files = churn(&mut fs, 7, 0.8, 3.0);
        let st = fs.stats();
        assert!(st.victims > 10, "{mode:?}: the cleaner never ran ({st:?})");
        assert!(st.cleaned_pages > 0);
        assert_clean(&mut fs);
        for (&ino, d) in &files {
            assert!(
                read_all(&mut fs, ino) == *d,
                "{mode:?}: inode {ino} differs"
            );
        }
        let (mut fs, _) = remount(fs, mode, false);
        assert_clean(&mut fs);
        for (&ino, d) in &files {
            assert!(
                read_all(&mut fs, ino) == *d,
                "{mode:?} remounted: inode {ino} differs"
            );
        }
        // Past the capacity statfs offers: ENOSPC, not a failure of the cleaner.
        let (big, _) = fs.create(1, b"big", S_IFREG, 0, 0, 0, None).unwrap();
        let chunk = vec![7u8; 1 << 20];
        let mut off = 0u64;
        let err = loop {
            match fs.write(big, off, &chunk, 0) {
                Ok(_) => off += chunk.len() as u64,
                Err(e) => break e,
            }
        };
        assert!(matches!(err, LfsError::NoSpace), "{mode:?}: {err}");
        fs.remove(1, b"big", false, 0).unwrap();
        assert_clean(&mut fs);
    }
}

/// A block device that remembers which pages were written since their last trim, and counts
/// writes to a page already written (what AMF refuses).
struct OverwriteCounter {
    inner: Box<dyn BlockDevice>,
    written: Vec<bool>,
    overwrites: Arc<AtomicU64>,
}

impl BlockDevice for OverwriteCounter {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn capacity_pages(&self) -> u64 {
        self.inner.capacity_pages()
    }
    fn read(&mut self, at: Nanos, lpn: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        self.inner.read(at, lpn, buf)
    }
    fn write(&mut self, at: Nanos, lpn: u64, data: &[u8], fua: bool) -> Result<Nanos, FtlError> {
        for p in lpn..lpn + (data.len() / 4096) as u64 {
            if std::mem::replace(&mut self.written[p as usize], true) {
                self.overwrites.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.inner.write(at, lpn, data, fua)
    }
    fn trim(&mut self, at: Nanos, lpn: u64, pages: u64) -> Result<Nanos, FtlError> {
        self.written[lpn as usize..(lpn + pages) as usize].fill(false);
        self.inner.trim(at, lpn, pages)
    }
    fn flush(&mut self, at: Nanos) -> Result<Nanos, FtlError> {
        self.inner.flush(at)
    }
    fn report(&self) -> FtlReport {
        self.inner.report()
    }
}

fn overwrites_under_churn(mode: Mode, target: &str) -> u64 {
    let (dev, seg) = lfs::device(mode, target, nand(64), &FtlOptions::default(), true).unwrap();
    let cap = dev.capacity_pages() as usize;
    let overwrites = Arc::new(AtomicU64::new(0));
    let counter = OverwriteCounter {
        inner: dev,
        written: vec![false; cap],
        overwrites: overwrites.clone(),
    };
    let p = Params {
        mode,
        seg_pages: seg,
        max_nids: 0,
        data_checksums: false,
    };
    let mut fs = Lfs::format(Box::new(counter), p, 0).unwrap();
    churn(&mut fs, 3, 0.7, 2.0);
    fs.sync_all().unwrap();
    fs.unmount().unwrap();
    overwrites.load(Ordering::Relaxed)
}

#[test]
fn alfs_never_writes_a_page_twice_between_trims() {
    // On AMF the device would refuse (FtlError::Overwrite, which fails the churn); the counter
    // shows it directly, and that F2FS mode, by design, does overwrite (its checkpoint, NAT
    // and SIT) on a page FTL.
    assert_eq!(overwrites_under_churn(Mode::Alfs, "amf"), 0);
    assert!(overwrites_under_churn(Mode::F2fs, "page") > 0);
}

#[test]
fn alfs_refuses_a_page_target() {
    let Err(e) = lfs::device(Mode::Alfs, "page", nand(16), &FtlOptions::default(), true) else {
        panic!("alfs accepted the page FTL");
    };
    assert!(e.to_string().contains("amf"), "{e}");
}

// ----- power cuts -----

#[derive(Debug)]
enum Op {
    Create(u32),
    Write(u32, u64, usize, u64),
    Fsync(u32),
    Rename(u32, u32),
    Unlink(u32),
    Truncate(u32, u64),
}

fn gen(r: &mut Xoshiro256PlusPlus, w: &Workload, files: u32) -> Op {
    let (files, max_off) = (u64::from(files), w.max_off);
    let f = (r.next_u64() % files) as u32;
    match r.next_u64() % 20 {
        0..=2 => Op::Create(f),
        3..=10 => Op::Write(
            f,
            r.next_u64() % max_off,
            1 + (r.next_u64() % 40_000) as usize,
            r.next_u64(),
        ),
        11..=15 => Op::Fsync(f),
        16 => Op::Rename(f, (r.next_u64() % files) as u32),
        17 => Op::Unlink(f),
        _ => Op::Truncate(f, r.next_u64() % (max_off / 2)),
    }
}

fn name(f: u32) -> Vec<u8> {
    format!("f{f}").into_bytes()
}

/// Runs `ops` seeded operations with a cut at flash operation `cut` (0: none); returns the
/// flash operations issued. After the cut: mount, fsck clean, and every file fsynced and not
/// touched since reads back as it was. Odd seeds keep data checksums (the nodes' address and
/// CRC pairs): fsck then also reads every block against the CRC its node holds, so a node made
/// durable without its blocks' CRCs, or before them, fails the run.
fn crash_run(
    mode: Mode,
    w: Workload,
    seed: u64,
    cut: u64,
) -> Result<(u64, bool, usize, u64), String> {
    let mut fs = fresh_nids(mode, w.blocks_per_plane, seed % 2 == 1, w.max_nids);
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
    // name -> current contents; and the fsynced, untouched-since ones.
    let mut cur: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    let mut stable: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    let mut cut_fired = false;
    let files = if w.prefill {
        // Files enough for 3/4 of what statfs offers.
        (fs.statfs().blocks * 3 / 4 / w.max_off.div_ceil(4096)) as u32
    } else {
        w.files
    };
    if w.prefill {
        // Every file written whole and fsynced first, so that overwrites leave segments
        // partly valid and the cleaner must run.
        for f in 0..files {
            let (ino, _) = fs.create(1, &name(f), S_IFREG, 0, 0, 0, None).unwrap();
            let d = pattern(seed ^ u64::from(f) << 20, w.max_off as usize);
            fs.write(ino, 0, &d, 0).unwrap();
            fs.fsync(ino).unwrap();
            cur.insert(f, d.clone());
            stable.insert(f, d);
        }
    }
    let base = fs.device().nand().unwrap().ops_issued();
    if cut > 0 {
        fs.device_mut()
            .nand_mut()
            .unwrap()
            .set_fault_plan(FaultPlan {
                cut_at_op: Some(base + cut),
                ..FaultPlan::default()
            });
    }
    for _ in 0..w.ops {
        let op = gen(&mut r, &w, files);
        let res: Result<(), LfsError> = (|| {
            match op {
                Op::Create(f) => {
                    if cur.contains_key(&f) {
                        return Ok(());
                    }
                    fs.create(1, &name(f), S_IFREG, 0, 0, 0, None)?;
                    cur.insert(f, Vec::new());
                }
                Op::Write(f, off, len, s) => {
                    let Some(c) = cur.get_mut(&f) else {
                        return Ok(());
                    };
                    let (ino, _) = fs.lookup(1, &name(f))?;
                    let d = pattern(s, len);
                    stable.remove(&f);
                    fs.write(ino, off, &d, 0)?;
                    let end = off as usize + len;
                    if c.len() < end {
                        c.resize(end, 0);
                    }
                    c[off as usize..end].copy_from_slice(&d);
                }
                Op::Fsync(f) => {
                    let Some(c) = cur.get(&f) else { return Ok(()) };
                    let (ino, _) = fs.lookup(1, &name(f))?;
                    fs.fsync(ino)?;
                    stable.insert(f, c.clone());
                }
                Op::Rename(a, b) => {
                    if a == b || !cur.contains_key(&a) {
                        return Ok(());
                    }
                    stable.remove(&a);
                    stable.remove(&b);
                    fs.rename(1, &name(a), 1, &name(b), 0)?;
                    let c = cur.remove(&a).unwrap();
                    cur.insert(b, c);
                }
                Op::Unlink(f) => {
                    if !cur.contains_key(&f) {
                        return Ok(());
                    }
                    stable.remove(&f);
                    fs.remove(1, &name(f), false, 0)?;
                    cur.remove(&f);
                }
                Op::Truncate(f, size) => {
                    let Some(c) = cur.get_mut(&f) else {
                        return Ok(());
                    };
                    let (ino, _) = fs.lookup(1, &name(f))?;
                    stable.remove(&f);
                    let ch = lfs::SetAttr {
                        size: Some(size),
                        ..Default::default()
                    };
                    fs.setattr(ino, ch, 0)?;
                    c.resize(size as usize, 0);
                }
            }
            Ok(())
        })();
        match res {
            Ok(()) => {}
            Err(e) if e.is_power_loss() => {
                cut_fired = true;
                break;
            }
            Err(LfsError::NoSpace) if matches!(op, Op::Write(..) | Op::Create(_)) => {}
            Err(e) => return Err(format!("{op:?}: {e}")),
        }
    }
    let issued = fs.device().nand().unwrap().ops_issued() - base;
    if cut == 0 {
        return Ok((issued, false, 0, fs.stats().victims));
    }
    // A cut that falls after the last operation: the power goes now (unsynced state is lost).
    let (mut fs, rep) = remount(fs, mode, true);
    let p = fs.fsck().map_err(|e| e.to_string())?;
    if !p.is_empty() {
        return Err(format!("cut at {cut}: fsck {p:?}"));
    }
    for (f, want) in &stable {
        let (ino, _) = fs
            .lookup(1, &name(*f))
            .map_err(|e| format!("cut at {cut}: fsynced f{f}: {e}"))?;
        let got = read_all(&mut fs, ino);
        if got != *want {
            return Err(format!(
                "cut at {cut}: fsynced f{f} reads {} bytes, {} were fsynced (first difference at {:?})",
                got.len(),
                want.len(),
                got.iter().zip(want).position(|(a, b)| a != b)
            ));
        }
    }
    // Keeps working after recovery.
    let (ino, _) = fs
        .create(1, b"after", S_IFREG, 0, 0, 0, None)
        .map_err(|e| e.to_string())?;
    fs.write(ino, 0, &pattern(9, 50_000), 0)
        .map_err(|e| e.to_string())?;
    fs.fsync(ino).map_err(|e| e.to_string())?;
    let (mut fs, _) = remount(fs, mode, false);
    let p = fs.fsck().map_err(|e| e.to_string())?;
    if !p.is_empty() {
        return Err(format!("after recovery and more work: fsck {p:?}"));
    }
    Ok((issued, cut_fired, stable.len(), rep.rolled_forward_nodes))
}

/// A crash workload: operations, the device's size, how far into a file writes go.
#[derive(Clone, Copy, Debug)]
struct Workload {
    ops: usize,
    blocks_per_plane: u32,
    max_off: u64,
    /// Files the operations pick from (with `prefill`: as many as fill 3/4 of the space).
    files: u32,
    /// Write every file whole (`max_off` bytes) and fsync it before the operations.
    prefill: bool,
    /// Node ids (0: format's default).
    max_nids: u32,
}

/// Many files, little cleaning.
const FSYNCS: Workload = Workload {
    ops: 120,
    blocks_per_plane: 32,
    max_off: 600_000,
    files: 12,
    prefill: false,
    max_nids: 0,
};
/// Node ids for 1,013 NAT blocks: with the SIT block, more meta blocks than a checkpoint
/// pack's header lists, so that every checkpoint is a pack of 2 blocks.
const MULTI_NIDS: u32 = 1013 * 1023;
/// `FSYNCS` with two-block checkpoint packs, on a device large enough for their NAT (64 MiB).
const MULTI: Workload = Workload {
    blocks_per_plane: 128,
    max_nids: MULTI_NIDS,
    ..FSYNCS
};
/// A device kept near full: the cleaner runs before most cuts.
const CLEANING: Workload = Workload {
    ops: 1500,
    blocks_per_plane: 32,
    max_off: 65_536,
    files: 0,
    prefill: true,
    max_nids: 0,
};

fn crash_seeds(mode: Mode, w: Workload, seeds: u64) {
    let mut failures = Vec::new();
    let (mut fired, mut checked, mut rolled, mut victims) = (0, 0, 0, 0);
    for seed in 0..seeds {
        let (total, _, _, v) = crash_run(mode, w, seed, 0)
            .unwrap_or_else(|e| panic!("seed {seed} without a cut: {e}"));
        victims += u64::from(v > 0);
        let mut r = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xC0FFEE);
        let cut = 1 + r.next_u64() % total.max(1);
        match crash_run(mode, w, seed, cut) {
            Ok((_, f, c, rf)) => {
                fired += u64::from(f);
                checked += c;
                rolled += u64::from(rf > 0);
            }
            Err(e) => failures.push(format!("seed {seed}: {e}")),
        }
    }
    // The cuts land inside the runs, and fsynced files were there to check.
    assert!(
        fired * 10 >= seeds * 9,
        "only {fired} of {seeds} cuts fired"
    );
    assert!(
        checked as u64 >= seeds,
        "only {checked} fsynced files checked"
    );
    if w.ops == CLEANING.ops {
        assert!(
            victims * 2 >= seeds,
            "the cleaner ran in only {victims} of {seeds} runs"
        );
    }
    // Some recoveries rolled fsynced nodes forward past their checkpoint.
    assert!(
        rolled * 10 >= seeds,
        "roll-forward in only {rolled} of {seeds} recoveries"
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn seeds() -> u64 {
    std::env::var("LFS_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100)
}

#[test]
fn power_cuts_keep_fsynced_files_f2fs_on_page() {
    crash_seeds(Mode::F2fs, FSYNCS, seeds());
}

#[test]
fn power_cuts_keep_fsynced_files_alfs_on_amf() {
    crash_seeds(Mode::Alfs, FSYNCS, seeds());
}

#[test]
fn power_cuts_while_cleaning_f2fs_on_page() {
    crash_seeds(Mode::F2fs, CLEANING, seeds() / 2);
}

#[test]
fn power_cuts_while_cleaning_alfs_on_amf() {
    crash_seeds(Mode::Alfs, CLEANING, seeds() / 2);
}

/// Random cuts while checkpoints are packs of two blocks (a cut can tear one); half the seeds,
/// since each run formats a 64 MiB device with a million node ids.
#[test]
fn power_cuts_with_multi_block_checkpoints_f2fs_on_page() {
    crash_seeds(Mode::F2fs, MULTI, seeds() / 2);
}

#[test]
fn power_cuts_with_multi_block_checkpoints_alfs_on_amf() {
    crash_seeds(Mode::Alfs, MULTI, seeds() / 2);
}

/// Checkpoints of `MULTI`'s geometry are packs of 2 blocks; a format that cannot fit its
/// checkpoint pack or its metadata is refused with a clear error, not a panic.
#[test]
fn checkpoint_packs_grow_with_the_node_ids_and_unfit_geometries_are_refused() {
    for mode in [Mode::F2fs, Mode::Alfs] {
        let fs = fresh_nids(mode, MULTI.blocks_per_plane, false, MULTI_NIDS);
        assert_eq!(fs.superblock().cp_blocks(), 2, "{mode:?}");
        // Ten times the node ids: the NAT alone would fill the device (f2fs keeps it twice);
        // alfs's pack (11 blocks) still fits a segment, its meta log does not.
        let (dev, seg) =
            lfs::device(mode, target(mode), nand(16), &FtlOptions::default(), true).unwrap();
        let p = Params {
            mode,
            seg_pages: seg,
            max_nids: 10 * MULTI_NIDS,
            data_checksums: false,
        };
        let e = Lfs::format(dev, p, 0).unwrap_err();
        assert!(
            matches!(&e, LfsError::Invalid(m) if m.contains("do not fit") || m.contains("does not fit")),
            "{mode:?}: {e}"
        );
    }
    // alfs: a pack larger than a checkpoint segment (segments of 4 pages, 5 pack blocks).
    let (dev, _) = lfs::device(Mode::Alfs, "amf", nand(16), &FtlOptions::default(), true).unwrap();
    let p = Params {
        mode: Mode::Alfs,
        seg_pages: 4,
        max_nids: 5 * MULTI_NIDS,
        data_checksums: false,
    };
    let e = Lfs::format(dev, p, 0).unwrap_err();
    assert!(
        e.to_string().contains("exceeds a checkpoint segment"),
        "{e}"
    );
}

/// The first address of the newest whole pack (version `v`) in `fs`'s checkpoint area.
fn pack_of(fs: &mut Lfs, v: u64) -> u32 {
    let sb = fs.superblock();
    let k = sb.cp_blocks() as usize;
    let end = match sb.mode {
        Mode::F2fs => 1 + 2 * k as u32,
        Mode::Alfs => 3 * sb.seg_pages,
    };
    let mut b = vec![0u8; k * 4096];
    for a in 1..end {
        let n = b.len().min(4096 * (end - a) as usize);
        for j in 0..n / 4096 {
            fs.device_mut()
                .read(0, u64::from(a) + j as u64, &mut b[j * 4096..(j + 1) * 4096])
                .unwrap();
        }
        if let Some(c) = lfs::layout::Checkpoint::decode_pack(&b[..n]) {
            if c.version == v {
                return a;
            }
        }
    }
    panic!("no pack of version {v}");
}

/// A torn two-block pack (the header of a newer checkpoint written where the next pack goes,
/// its continuation not: what a cut between its blocks leaves) is skipped; the older, whole
/// pack is used, and everything fsynced before it reads back.
#[test]
fn a_torn_multi_block_checkpoint_is_skipped_for_the_older_one() {
    for mode in [Mode::F2fs, Mode::Alfs] {
        let mut fs = fresh_nids(mode, MULTI.blocks_per_plane, false, MULTI_NIDS);
        let (ino, _) = fs.create(1, b"kept", S_IFREG, 0, 0, 0, None).unwrap();
        let data = pattern(5, 300_000);
        fs.write(ino, 0, &data, 0).unwrap();
        fs.sync_all().unwrap();
        let v = fs.checkpoint_version();
        let a = pack_of(&mut fs, v);
        let sb = fs.superblock();
        let mut pack = vec![0u8; 2 * 4096];
        for j in 0..2 {
            let blk = &mut pack[j * 4096..(j + 1) * 4096];
            fs.device_mut()
                .read(0, u64::from(a) + j as u64, blk)
                .unwrap();
        }
        let mut cp = lfs::layout::Checkpoint::decode_pack(&pack).unwrap();
        cp.version += 1;
        cp.encode_pack(&mut pack);
        let at = match mode {
            Mode::F2fs => sb.cp_pack_addr(cp.version),
            Mode::Alfs => a + 2, // the next page of the checkpoint segment
        };
        fs.device_mut()
            .write(0, u64::from(at), &pack[..4096], true)
            .unwrap();
        fs.device_mut().flush(0).unwrap();
        let (mut fs, rep) = remount(fs, mode, true);
        assert_eq!(rep.checkpoint_version, v, "{mode:?}");
        assert_eq!(rep.torn_checkpoints, 1, "{mode:?}");
        assert_clean(&mut fs);
        let (ino, _) = fs.lookup(1, b"kept").unwrap();
        assert!(read_all(&mut fs, ino) == data, "{mode:?}");
    }
}

/// A power cut at every flash operation of a checkpoint whose pack spans 2 blocks: the mount
/// uses the new pack if it is whole, else the one before (some cuts land between the pack's
/// blocks), and the file fsynced before the checkpoint, and rewritten and fsynced again
/// (rolled forward), reads back every time.
#[test]
fn a_cut_at_every_operation_of_a_multi_block_checkpoint_loses_nothing_fsynced() {
    for mode in [Mode::F2fs, Mode::Alfs] {
        let run = |cut: Option<u64>| -> (Lfs, Vec<u8>, u64, u64) {
            let mut fs = fresh_nids(mode, MULTI.blocks_per_plane, false, MULTI_NIDS);
            let (ino, _) = fs.create(1, b"f", S_IFREG, 0, 0, 0, None).unwrap();
            let mut want = pattern(1, 200_000);
            fs.write(ino, 0, &want, 0).unwrap();
            fs.fsync(ino).unwrap(); // a namespace change: a checkpoint
            let d = pattern(2, 50_000);
            fs.write(ino, 100_000, &d, 0).unwrap();
            fs.fsync(ino).unwrap(); // roll-forward only
            want[100_000..150_000].copy_from_slice(&d);
            let v = fs.checkpoint_version();
            let before = fs.device().nand().unwrap().ops_issued();
            if let Some(c) = cut {
                let plan = FaultPlan {
                    cut_at_op: Some(before + c),
                    ..FaultPlan::default()
                };
                fs.device_mut().nand_mut().unwrap().set_fault_plan(plan);
            }
            let res = fs.sync_all();
            match (cut, res) {
                (None, r) => r.unwrap(),
                (Some(_), Ok(())) => {}
                (Some(c), Err(e)) => assert!(e.is_power_loss(), "cut {c}: {e}"),
            }
            let ops = fs.device().nand().unwrap().ops_issued() - before;
            (fs, want, v, ops)
        };
        let (fs, _, v, ops) = run(None);
        assert_eq!(fs.superblock().cp_blocks(), 2);
        assert_eq!(fs.checkpoint_version(), v + 1);
        let (mut torn, mut old, mut new) = (0, 0, 0);
        // Cut ops + 1 falls after the checkpoint: the power goes at the remount.
        for c in 1..=ops + 1 {
            let (fs, want, v, _) = run(Some(c));
            let (mut fs, rep) = remount(fs, mode, true);
            torn += rep.torn_checkpoints;
            // The mount checkpoints again after a roll-forward: count the pack it found.
            match rep.checkpoint_version - v {
                0 => old += 1,
                1 => new += 1,
                d => panic!("{mode:?} cut {c}: checkpoint {d} after the last"),
            }
            let p = fs.fsck().unwrap();
            assert!(p.is_empty(), "{mode:?} cut {c}: fsck {p:?}");
            let (ino, _) = fs.lookup(1, b"f").unwrap();
            assert!(read_all(&mut fs, ino) == want, "{mode:?} cut {c}: data");
        }
        eprintln!("{mode:?}: {ops} operations: {torn} torn, {old} older, {new} new");
        assert!(
            torn > 0 && old > 0 && new > 0,
            "{mode:?}: {ops} cuts: {torn} torn packs seen, {old} mounts of the older \
             checkpoint, {new} of the new one"
        );
    }
}
