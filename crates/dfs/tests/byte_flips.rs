//! Random byte flips in a DFS image (issue 32, "Nothing lost, nothing hidden"): 200 flipped
//! bytes left `noftl fsck` saying `clean` and files reading back with other bytes. Now, for
//! seeded flips anywhere in the flash contents of an image (the OOB and data areas):
//! - fsck calls the image clean only if no flip changed what the VSL presents (a block's bytes,
//!   the set of mapped blocks): a flip that hit no live structure may pass, one that did may
//!   not;
//! - every file, directory listing and symlink either reads back exactly as written or fails
//!   with an error (a refused mount, EIO), never other bytes.
//!
//! `DFS_FLIP_SEEDS` sets the number of seeded images (default 48: flips of 1, 4, 20 and 200
//! bytes in turn).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::Path;

use dfs::fs::{Dfs, FormatParams, ROOT_INO, S_IFDIR, S_IFLNK, S_IFREG};
use dfs::vsl::{Vsl, VslConfig, BLOCK_BYTES};
use nand::{DeviceConfig, ImageLayout, Nand};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn vcfg() -> VslConfig {
    VslConfig {
        max_atomic_blocks: 64,
        ..VslConfig::default()
    }
}

fn params() -> FormatParams {
    FormatParams {
        chunk_blocks: 1 << 12,
        max_inodes: 4096,
        small_blocks: 4,
    }
}

/// What the image must hold: files (path -> bytes), directories, symlinks (path -> target).
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

/// Formats an image at `path` and fills it: directories, small and large files (some
/// rewritten, truncated, renamed or deleted, so that stale copies, trim records and a map
/// checkpoint are on flash too), a symlink.
fn make_image(path: &Path, preset: &str, overrides: &[String]) -> Expected {
    let cfg = DeviceConfig::preset(preset, overrides).unwrap();
    let nand = Nand::create_image(cfg, path).unwrap();
    let mut fs = Dfs::format(nand, &vcfg(), params(), 0).unwrap();
    let mut want = Expected::default();
    let mut dirs = vec![(ROOT_INO, String::new())];
    for d in ["a", "b"] {
        let (ino, _) = fs
            .create(ROOT_INO, d.as_bytes(), S_IFDIR | 0o755, 0, 0, 0, None)
            .unwrap();
        dirs.push((ino, d.to_string()));
        want.dirs.push(d.to_string());
    }
    for k in 0..36u64 {
        let (dir, dname) = &dirs[(k % 3) as usize];
        let name = format!("f{k}");
        let (ino, _) = fs
            .create(*dir, name.as_bytes(), S_IFREG | 0o644, 0, 0, 0, None)
            .unwrap();
        let len = [0, 100, 4096, 9000, 20_000, 70_000][(k % 6) as usize];
        let mut data = content(k, len);
        fs.write(ino, 0, &data, 0).unwrap();
        if k % 4 == 1 && len > 0 {
            // Rewritten in place: the old copies stay on flash until GC.
            data = content(k + 1000, len);
            fs.write(ino, 0, &data, 0).unwrap();
        }
        if k % 5 == 2 && len > 5000 {
            fs.setattr(
                ino,
                dfs::fs::SetAttr {
                    size: Some(5000),
                    ..Default::default()
                },
                0,
            )
            .unwrap();
            data.truncate(5000);
        }
        let path = if dname.is_empty() {
            name
        } else {
            format!("{dname}/{name}")
        };
        want.files.insert(path, data);
    }
    // Deletes: trim records, and past 64 of them a map checkpoint.
    for k in (0..36u64).filter(|k| k % 3 == 0 && k % 2 == 0) {
        let name = format!("f{k}");
        fs.remove(ROOT_INO, name.as_bytes(), false, 0).unwrap();
        want.files.remove(&name);
    }
    for k in 0..70u64 {
        let (ino, _) = fs
            .create(ROOT_INO, b"tmp", S_IFREG | 0o644, 0, 0, 0, None)
            .unwrap();
        fs.write(ino, 0, &content(k, 100), 0).unwrap();
        fs.remove(ROOT_INO, b"tmp", false, 0).unwrap();
    }
    fs.rename(ROOT_INO, b"f3", dirs[2].0, b"moved", 0).unwrap();
    let moved = want.files.remove("f3").unwrap();
    want.files.insert("b/moved".into(), moved);
    fs.create(
        dirs[1].0,
        b"link",
        S_IFLNK | 0o777,
        0,
        0,
        0,
        Some(b"../b/moved"),
    )
    .unwrap();
    want.links.insert("a/link".into(), b"../b/moved".to_vec());
    assert!(
        fs.vsl().counts().checkpoints > 0,
        "a map checkpoint is on flash"
    );
    let mut nand = fs.unmount().unwrap();
    nand.flush().unwrap();
    want
}

/// What the VSL presents: every mapped block and its bytes (`None`: the image does not
/// recover, or a block fails its checks).
fn view(path: &Path) -> Option<BTreeMap<u64, Vec<u8>>> {
    let nand = Nand::open_image_private(path).ok()?;
    let (mut vsl, _) = Vsl::open(nand, &vcfg()).ok()?;
    let mut out = BTreeMap::new();
    for (s, n) in vsl.map().extents() {
        for v in s..s + n {
            let mut b = vec![0u8; BLOCK_BYTES];
            vsl.read(0, v, &mut b).ok()?;
            out.insert(v, b);
        }
    }
    Some(out)
}

/// fsck's verdict: `Ok(())` clean, else what it reported.
fn fsck(path: &Path) -> Result<(), String> {
    let nand = Nand::open_image_private(path).map_err(|e| e.to_string())?;
    let (mut fs, _) = Dfs::open_checking(nand, &vcfg()).map_err(|e| e.to_string())?;
    let problems = fs.fsck().map_err(|e| e.to_string())?;
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

fn resolve(fs: &mut Dfs, path: &str) -> Result<u32, String> {
    let mut ino = ROOT_INO;
    for part in path.split('/') {
        ino = fs
            .lookup(ino, part.as_bytes())
            .map_err(|e| e.to_string())?
            .0;
    }
    Ok(ino)
}

/// Reads everything the image should hold through a normal mount. Errors are fine (that is
/// what a reader must get from damage); other bytes are not: returns what read back wrong.
fn wrong_reads(path: &Path, want: &Expected) -> Vec<String> {
    let Ok(nand) = Nand::open_image_private(path) else {
        return Vec::new();
    };
    let Ok((mut fs, _)) = Dfs::open(nand, &vcfg()) else {
        return Vec::new();
    };
    let mut wrong = Vec::new();
    for (p, data) in &want.files {
        let Ok(ino) = resolve(&mut fs, p) else {
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
        if let Ok(ino) = resolve(&mut fs, p) {
            if fs.readlink(ino).is_ok_and(|t| t != *target) {
                wrong.push(format!("{p}: another target"));
            }
        }
    }
    for d in want.dirs.iter().map(String::as_str).chain([""]) {
        let ino = if d.is_empty() {
            Ok(ROOT_INO)
        } else {
            resolve(&mut fs, d)
        };
        let mut ents = Vec::new();
        if ino.is_ok_and(|i| fs.readdir(i, 2, &mut ents).is_ok()) {
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
    std::env::var("DFS_FLIP_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(48)
}

/// Flips `n` random bytes (each XORed with a random non-zero value) in the flash contents of
/// `image` (from the OOB area to the end of the data area).
fn flip(image: &mut [u8], layout: ImageLayout, n: usize, rng: &mut Xoshiro256PlusPlus) {
    let span = layout.len - layout.oob_at;
    for _ in 0..n {
        let at = (layout.oob_at + rng.next_u64() % span) as usize;
        image[at] ^= (rng.next_u64() % 255 + 1) as u8;
    }
}

fn flips_on(preset: &str, overrides: &[String]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dfs.img");
    let want = make_image(&path, preset, overrides);
    let pristine = std::fs::read(&path).unwrap();
    let before = view(&path).expect("the pristine image recovers");
    assert_eq!(fsck(&path), Ok(()), "the pristine image is clean");
    assert!(wrong_reads(&path, &want).is_empty());
    let cfg = Nand::open_image_private(&path).unwrap().config().clone();
    let layout = ImageLayout::of(&cfg.geometry);
    let (mut hit_caught, mut missed_clean) = (0, 0);
    for seed in 0..seeds() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let n = [1, 4, 20, 200][(seed % 4) as usize];
        let mut img = pristine.clone();
        flip(&mut img, layout, n, &mut rng);
        std::fs::write(&path, &img).unwrap();
        let hit = view(&path).as_ref() != Some(&before);
        let verdict = fsck(&path);
        assert!(
            !(hit && verdict.is_ok()),
            "{preset} seed {seed} ({n} flips): the VSL's view changed, yet fsck says clean"
        );
        let wrong = wrong_reads(&path, &want);
        assert!(
            wrong.is_empty(),
            "{preset} seed {seed} ({n} flips): other bytes read back:\n{}\nfsck: {verdict:?}",
            wrong.join("\n")
        );
        hit_caught += u32::from(hit);
        missed_clean += u32::from(!hit && verdict.is_ok());
    }
    // The flips reach live structures, and fsck does not condemn every image: flips that hit
    // nothing live (erased pages, stale copies) pass.
    if seeds() >= 16 {
        assert!(hit_caught > 0, "{preset}: no flip hit a live structure");
        assert!(missed_clean > 0, "{preset}: fsck condemned every image");
    }
    std::fs::write(&path, &pristine).unwrap();
    assert_eq!(fsck(&path), Ok(()));
}

#[test]
fn flipped_bytes_are_reported_by_fsck_and_never_read_back_as_data() {
    flips_on("tiny", &["geometry.blocks_per_plane=32".into()]);
}

/// The same on MLC chips with 16 KiB pages: four blocks per page, each with its own OOB
/// record (and checksum) in slots of the page's OOB area.
#[test]
fn flipped_bytes_on_16k_pages_are_reported_and_never_read_back() {
    flips_on(
        "mlc16k",
        &[
            "geometry.oob_size_bytes=128".into(),
            "geometry.channels=2".into(),
            "geometry.chips_per_channel=1".into(),
            "geometry.blocks_per_plane=16".into(),
            "geometry.pages_per_block=32".into(),
        ],
    );
}

/// Format 1 (before checksums) had a superblock CRC over bytes 0..60 only and no data
/// checksums; its images are refused naming the version, not mistaken for damage.
#[test]
fn a_format_1_image_is_refused_naming_its_version() {
    let cfg = DeviceConfig::preset("tiny", &["geometry.blocks_per_plane=32".into()]).unwrap();
    let mut fs = Dfs::format(Nand::new(cfg).unwrap(), &vcfg(), params(), 0).unwrap();
    // A format-1 superblock: magic, version 1, block bytes, the parameters, CRC of 0..60.
    let mut sb = vec![0u8; BLOCK_BYTES];
    sb[0..8].copy_from_slice(&0x0031_5346_4456_4E44u64.to_le_bytes());
    sb[8..12].copy_from_slice(&1u32.to_le_bytes());
    sb[12..16].copy_from_slice(&(BLOCK_BYTES as u32).to_le_bytes());
    sb[16..24].copy_from_slice(&params().chunk_blocks.to_le_bytes());
    sb[24..28].copy_from_slice(&params().max_inodes.to_le_bytes());
    sb[28..32].copy_from_slice(&params().small_blocks.to_le_bytes());
    sb[32..36].copy_from_slice(&ROOT_INO.to_le_bytes());
    let crc = crc32fast::hash(&sb[0..60]);
    sb[60..64].copy_from_slice(&crc.to_le_bytes());
    fs.vsl_mut().write(0, 0, &sb).unwrap();
    let e = Dfs::open(fs.into_nand(), &vcfg()).unwrap_err().to_string();
    assert!(
        e.contains("format version 1") && e.contains("reads version 2"),
        "{e}"
    );
}
