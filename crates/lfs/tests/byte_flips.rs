//! Random byte flips in images of the log-structured file system (issue 32, "Nothing lost,
//! nothing hidden"), f2fs on the page FTL and alfs on AMF, formatted with data checksums. For
//! seeded flips anywhere in the flash contents of an image (the OOB and data areas):
//! - fsck calls the image clean only if no flip changed a block the file system's state is
//!   read from (`Lfs::live_blocks`, as the FTL presents them after its own recovery);
//! - every file, directory listing and symlink either reads back exactly as written or fails
//!   with an error, never other bytes.
//!
//! `LFS_FLIP_SEEDS` sets the number of seeded images per mode (default 40: flips of 1, 4, 20
//! and 200 bytes in turn).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::Path;

use ftl::{BlockDevice, FtlOptions};
use lfs::{Lfs, Mode, Params};
use nand::{DeviceConfig, ImageLayout, Nand};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const S_IFREG: u32 = 0o100_644;
const S_IFDIR: u32 = 0o040_755;
const S_IFLNK: u32 = 0o120_777;
const ROOT: u32 = 1;

fn target(mode: Mode) -> &'static str {
    match mode {
        Mode::F2fs => "page",
        Mode::Alfs => "amf",
    }
}

#[derive(Default)]
struct Expected {
    files: BTreeMap<String, Vec<u8>>,
    dirs: Vec<String>,
    links: BTreeMap<String, Vec<u8>>,
}

fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..len).map(|_| r.next_u64() as u8).collect()
}

/// Formats an image at `path` (data checksums on) and fills it: directories, files of several
/// sizes (some rewritten, truncated, deleted), a symlink; fsyncs and checkpoints between.
fn make_image(path: &Path, mode: Mode) -> Expected {
    let cfg = DeviceConfig::preset(
        "tiny",
        &[
            "geometry.blocks_per_plane=64".into(),
            "reliability.factory_bad_block_ratio=0".into(),
        ],
    )
    .unwrap();
    let nand = Nand::create_image(cfg, path).unwrap();
    let (dev, seg) = lfs::device(mode, target(mode), nand, &FtlOptions::default(), true).unwrap();
    let p = Params {
        mode,
        seg_pages: seg,
        max_nids: 0,
        data_checksums: true,
    };
    let mut fs = Lfs::format(dev, p, 0).unwrap();
    let mut want = Expected::default();
    let mut dirs = vec![(ROOT, String::new())];
    for d in ["a", "b"] {
        let (ino, _) = fs
            .create(ROOT, d.as_bytes(), S_IFDIR, 0, 0, 0, None)
            .unwrap();
        dirs.push((ino, d.to_string()));
        want.dirs.push(d.to_string());
    }
    for k in 0..30u64 {
        let (dir, dname) = &dirs[(k % 3) as usize];
        let name = format!("f{k}");
        let (ino, _) = fs
            .create(*dir, name.as_bytes(), S_IFREG, 0, 0, 0, None)
            .unwrap();
        let len = [0, 100, 4096, 9000, 40_000, 2_500_000][(k % 6) as usize];
        let mut data = content(k, len);
        fs.write(ino, 0, &data, 0).unwrap();
        if k % 4 == 1 && len > 0 {
            data = content(k + 1000, len);
            fs.write(ino, 0, &data, 0).unwrap();
        }
        if k % 5 == 2 && len > 5000 {
            let size = Some(5000);
            let a = lfs::SetAttr {
                size,
                ..Default::default()
            };
            fs.setattr(ino, a, 0).unwrap();
            data.truncate(5000);
        }
        fs.fsync(ino).unwrap();
        let path = if dname.is_empty() {
            name
        } else {
            format!("{dname}/{name}")
        };
        want.files.insert(path, data);
    }
    for k in (0..30u64).filter(|k| k % 3 == 0 && k % 2 == 0) {
        let name = format!("f{k}");
        fs.remove(ROOT, name.as_bytes(), false, 0).unwrap();
        want.files.remove(&name);
    }
    fs.create(dirs[1].0, b"link", S_IFLNK, 0, 0, 0, Some(b"../b/f2"))
        .unwrap();
    want.links.insert("a/link".into(), b"../b/f2".to_vec());
    let dev = fs.unmount().unwrap();
    dev.into_nand().unwrap().flush().unwrap();
    want
}

/// The file system on the image at `path`, mounted on a copy-on-write view of it.
fn mount(path: &Path, mode: Mode) -> Result<Lfs, String> {
    let nand = Nand::open_image_private(path).map_err(|e| e.to_string())?;
    let (dev, _) = lfs::device(mode, target(mode), nand, &FtlOptions::default(), false)
        .map_err(|e| e.to_string())?;
    Lfs::mount(dev).map(|(fs, _)| fs).map_err(|e| e.to_string())
}

/// The blocks `live` as the FTL presents them after its recovery (`None`: it does not recover,
/// or a read fails).
fn view(path: &Path, mode: Mode, live: &[u32]) -> Option<Vec<Vec<u8>>> {
    let nand = Nand::open_image_private(path).ok()?;
    let (mut dev, _) = lfs::device(mode, target(mode), nand, &FtlOptions::default(), false).ok()?;
    let dev: &mut dyn BlockDevice = &mut *dev;
    let mut out = Vec::new();
    for &a in live {
        let mut b = vec![0u8; 4096];
        dev.read(0, u64::from(a), &mut b).ok()?;
        out.push(b);
    }
    Some(out)
}

fn fsck(path: &Path, mode: Mode) -> Result<(), String> {
    let mut fs = mount(path, mode)?;
    let p = fs.fsck().map_err(|e| e.to_string())?;
    if p.is_empty() {
        Ok(())
    } else {
        Err(p.join("\n"))
    }
}

fn resolve(fs: &mut Lfs, path: &str) -> Option<u32> {
    let mut ino = ROOT;
    for part in path.split('/') {
        ino = fs.lookup(ino, part.as_bytes()).ok()?.0;
    }
    Some(ino)
}

/// Everything the image should hold, read through a mount: errors are fine, other bytes are
/// not; returns what read back wrong.
fn wrong_reads(path: &Path, mode: Mode, want: &Expected) -> Vec<String> {
    let Ok(mut fs) = mount(path, mode) else {
        return Vec::new();
    };
    let mut wrong = Vec::new();
    for (p, data) in &want.files {
        let Some(ino) = resolve(&mut fs, p) else {
            continue;
        };
        let mut got = vec![0u8; data.len() + 10];
        if let Ok(n) = fs.read(ino, 0, &mut got) {
            if got[..n] != data[..] {
                wrong.push(format!(
                    "{p}: {n} bytes read, not the {} written",
                    data.len()
                ));
            }
        }
    }
    for (p, target) in &want.links {
        if let Some(ino) = resolve(&mut fs, p) {
            if fs.readlink(ino).is_ok_and(|t| t != *target) {
                wrong.push(format!("{p}: another target"));
            }
        }
    }
    for d in want.dirs.iter().map(String::as_str).chain([""]) {
        let ino = if d.is_empty() {
            Some(ROOT)
        } else {
            resolve(&mut fs, d)
        };
        let mut ents = Vec::new();
        if ino.is_some_and(|i| fs.readdir(i, 2, &mut ents).is_ok()) {
            let mut names: Vec<String> = ents
                .iter()
                .map(|(_, e)| String::from_utf8_lossy(&e.name).into_owned())
                .collect();
            names.sort();
            let prefix = if d.is_empty() {
                String::new()
            } else {
                format!("{d}/")
            };
            let mut expect: Vec<String> = (want.files.keys().chain(want.links.keys()))
                .chain(want.dirs.iter())
                .filter_map(|p| p.strip_prefix(&prefix))
                .filter(|rest| !rest.contains('/'))
                .map(str::to_string)
                .collect();
            expect.sort();
            if names != expect {
                wrong.push(format!("directory {d:?} lists {names:?}, not {expect:?}"));
            }
        }
    }
    wrong
}

fn seeds() -> u64 {
    std::env::var("LFS_FLIP_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40)
}

fn flips_in(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lfs.img");
    let want = make_image(&path, mode);
    let pristine = std::fs::read(&path).unwrap();
    let live = mount(&path, mode).unwrap().live_blocks();
    let before = view(&path, mode, &live).expect("the pristine image recovers");
    assert_eq!(fsck(&path, mode), Ok(()), "the pristine image is clean");
    assert!(wrong_reads(&path, mode, &want).is_empty());
    let cfg = Nand::open_image_private(&path).unwrap().config().clone();
    let layout = ImageLayout::of(&cfg.geometry);
    let span = layout.len - layout.oob_at;
    let (mut hits, mut passed) = (0, 0);
    for seed in 0..seeds() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let n = [1, 4, 20, 200][(seed % 4) as usize];
        let mut img = pristine.clone();
        for _ in 0..n {
            let at = (layout.oob_at + rng.next_u64() % span) as usize;
            img[at] ^= (rng.next_u64() % 255 + 1) as u8;
        }
        std::fs::write(&path, &img).unwrap();
        let hit = view(&path, mode, &live).as_ref() != Some(&before);
        let verdict = fsck(&path, mode);
        assert!(
            !(hit && verdict.is_ok()),
            "{mode:?} seed {seed} ({n} flips): a live block changed, yet fsck says clean"
        );
        let wrong = wrong_reads(&path, mode, &want);
        assert!(
            wrong.is_empty(),
            "{mode:?} seed {seed} ({n} flips): other bytes read back:\n{}\nfsck: {verdict:?}",
            wrong.join("\n")
        );
        hits += u32::from(hit);
        passed += u32::from(!hit && verdict.is_ok());
    }
    if seeds() >= 16 {
        assert!(hits > 0, "{mode:?}: no flip hit a live block");
        assert!(passed > 0, "{mode:?}: fsck condemned every image");
    }
}

#[test]
fn flipped_bytes_in_an_f2fs_image_are_reported_and_never_read_back() {
    flips_in(Mode::F2fs);
}

#[test]
fn flipped_bytes_in_an_alfs_image_are_reported_and_never_read_back() {
    flips_in(Mode::Alfs);
}
