//! DFS against a model: a seeded random exerciser (create, write, truncate, read, rename,
//! link, unlink, mkdir, rmdir, fsync, remount) compares every result and, periodically, the
//! whole tree with an in-memory model; and power cuts at seeded flash operations, after which
//! fsck is clean and the tree is the one of the acknowledged operations, with the operation in
//! flight applied whole or not at all (every DFS operation is durable when it returns, so
//! every fsynced file has its fsynced content a fortiori).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;

use dfs::fs::{Dfs, FormatParams, SetAttr, ROOT_INO, S_IFDIR};
use dfs::vsl::VslConfig;
use nand::{DeviceConfig, FaultPlan, Nand};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const DIRS: [&str; 4] = ["", "d0", "d1", "d0/e"];
const NAMES: usize = 10;
const MAX_FILE: u64 = 96 * 1024;

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

fn device(blocks_per_plane: u32) -> Nand {
    let cfg = DeviceConfig::preset(
        "tiny",
        &[format!("geometry.blocks_per_plane={blocks_per_plane}")],
    )
    .unwrap();
    Nand::new(cfg).unwrap()
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    File(Vec<u8>),
    Dir,
}

type Model = BTreeMap<String, Node>;

#[derive(Clone, Debug)]
enum Op {
    Create(String),
    Write(String, u64, usize, u8),
    Truncate(String, u64),
    Read(String),
    Rename(String, String),
    Link(String, String),
    Unlink(String),
    Mkdir(String),
    Rmdir(String),
    Fsync(String),
    Remount,
}

fn path(rng: &mut Xoshiro256PlusPlus) -> String {
    let d = DIRS[(rng.next_u64() % DIRS.len() as u64) as usize];
    let n = rng.next_u64() % NAMES as u64;
    if d.is_empty() {
        format!("f{n}")
    } else {
        format!("{d}/f{n}")
    }
}

fn gen(rng: &mut Xoshiro256PlusPlus, remount: bool) -> Op {
    let p = path(rng);
    match rng.next_u64() % 100 {
        0..=14 => Op::Create(p),
        15..=44 => {
            let off = if rng.next_u64().is_multiple_of(3) {
                rng.next_u64() % MAX_FILE
            } else {
                rng.next_u64() % 20_000
            };
            let len = 1 + (rng.next_u64() % 12_000) as usize;
            Op::Write(p, off, len, rng.next_u64() as u8)
        }
        45..=51 => Op::Truncate(p, rng.next_u64() % MAX_FILE),
        52..=61 => Op::Read(p),
        62..=69 => Op::Rename(p, path(rng)),
        70..=73 => Op::Link(p, path(rng)),
        74..=83 => Op::Unlink(p),
        84..=88 => Op::Mkdir(DIRS[1 + (rng.next_u64() % 3) as usize].into()),
        89..=92 => Op::Rmdir(DIRS[1 + (rng.next_u64() % 3) as usize].into()),
        93..=97 => Op::Fsync(p),
        _ if remount => Op::Remount,
        _ => Op::Fsync(p),
    }
}

fn split(p: &str) -> (&str, &str) {
    match p.rfind('/') {
        Some(i) => (&p[..i], &p[i + 1..]),
        None => ("", p),
    }
}

fn pattern(off: u64, len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| ((off + i as u64).wrapping_mul(7) as u8) ^ seed)
        .collect()
}

/// Applies `op` to the model; Err(()) where the file system must fail too. Hard links are
/// modelled as shared content by keeping a link table.
fn apply(m: &mut Model, links: &mut Vec<Vec<String>>, op: &Op) -> Result<Option<Vec<u8>>, ()> {
    let parent_ok = |m: &Model, p: &str| {
        let (d, _) = split(p);
        d.is_empty() || m.get(d) == Some(&Node::Dir)
    };
    let group_of =
        |links: &Vec<Vec<String>>, p: &str| links.iter().position(|g| g.iter().any(|x| x == p));
    match op {
        Op::Create(p) => {
            if !parent_ok(m, p) || m.contains_key(p) {
                return Err(());
            }
            m.insert(p.clone(), Node::File(Vec::new()));
            links.push(vec![p.clone()]);
            Ok(None)
        }
        Op::Write(p, off, len, seed) => {
            let Some(Node::File(c)) = m.get(p) else {
                return Err(());
            };
            let mut c = c.clone();
            let end = *off as usize + len;
            if c.len() < end {
                c.resize(end, 0);
            }
            c[*off as usize..end].copy_from_slice(&pattern(*off, *len, *seed));
            let g = group_of(links, p).unwrap();
            for q in links[g].clone() {
                m.insert(q, Node::File(c.clone()));
            }
            Ok(None)
        }
        Op::Truncate(p, size) => {
            let Some(Node::File(c)) = m.get(p) else {
                return Err(());
            };
            let mut c = c.clone();
            c.resize(*size as usize, 0);
            let g = group_of(links, p).unwrap();
            for q in links[g].clone() {
                m.insert(q, Node::File(c.clone()));
            }
            Ok(None)
        }
        Op::Read(p) | Op::Fsync(p) => match m.get(p) {
            Some(Node::File(c)) => Ok(Some(c.clone())),
            _ => Err(()),
        },
        Op::Rename(a, b) => {
            let Some(Node::File(c)) = m.get(a).cloned() else {
                return Err(());
            };
            if !parent_ok(m, b) || matches!(m.get(b), Some(Node::Dir)) {
                return Err(());
            }
            if a == b {
                return Ok(None);
            }
            let ga = group_of(links, a).unwrap();
            if let Some(gb) = group_of(links, b) {
                if ga == gb {
                    // Both names are links of one file: POSIX says do nothing.
                    return Ok(None);
                }
                links[gb].retain(|x| x != b);
            }
            for x in links[ga].iter_mut() {
                if x == a {
                    *x = b.clone();
                }
            }
            links.retain(|g| !g.is_empty());
            m.remove(a);
            m.insert(b.clone(), Node::File(c));
            Ok(None)
        }
        Op::Link(a, b) => {
            let Some(Node::File(c)) = m.get(a).cloned() else {
                return Err(());
            };
            if !parent_ok(m, b) || m.contains_key(b) {
                return Err(());
            }
            let ga = group_of(links, a).unwrap();
            links[ga].push(b.clone());
            m.insert(b.clone(), Node::File(c));
            Ok(None)
        }
        Op::Unlink(p) => {
            let Some(Node::File(_)) = m.get(p) else {
                return Err(());
            };
            m.remove(p);
            let g = group_of(links, p).unwrap();
            links[g].retain(|x| x != p);
            links.retain(|g| !g.is_empty());
            Ok(None)
        }
        Op::Mkdir(p) => {
            if !parent_ok(m, p) || m.contains_key(p) {
                return Err(());
            }
            m.insert(p.clone(), Node::Dir);
            Ok(None)
        }
        Op::Rmdir(p) => {
            if m.get(p) != Some(&Node::Dir) {
                return Err(());
            }
            let prefix = format!("{p}/");
            if m.keys().any(|k| k.starts_with(&prefix)) {
                return Err(());
            }
            m.remove(p);
            Ok(None)
        }
        Op::Remount => Ok(None),
    }
}

fn resolve(fs: &mut Dfs, p: &str) -> Result<u32, dfs::FsError> {
    let mut ino = ROOT_INO;
    if p.is_empty() {
        return Ok(ino);
    }
    for part in p.split('/') {
        ino = fs.lookup(ino, part.as_bytes())?.0;
    }
    Ok(ino)
}

/// Runs `op` on the file system: Ok(read content) or the error.
fn run(fs: &mut Dfs, op: &Op, now: i64) -> Result<Option<Vec<u8>>, dfs::FsError> {
    let parent = |fs: &mut Dfs, p: &str| {
        let (d, n) = split(p);
        resolve(fs, d).map(|i| (i, n.as_bytes().to_vec()))
    };
    match op {
        Op::Create(p) => {
            let (d, n) = parent(fs, p)?;
            fs.create(d, &n, 0o644, 0, 0, now, None)?;
            Ok(None)
        }
        Op::Write(p, off, len, seed) => {
            let i = resolve(fs, p)?;
            fs.write(i, *off, &pattern(*off, *len, *seed), now)?;
            Ok(None)
        }
        Op::Truncate(p, size) => {
            let i = resolve(fs, p)?;
            fs.setattr(
                i,
                SetAttr {
                    size: Some(*size),
                    ..SetAttr::default()
                },
                now,
            )?;
            Ok(None)
        }
        Op::Read(p) | Op::Fsync(p) => {
            let i = resolve(fs, p)?;
            let a = fs.getattr(i)?;
            if a.is_dir() {
                return Err(dfs::FsError::IsDir);
            }
            if matches!(op, Op::Fsync(_)) {
                fs.fsync(i)?;
            }
            let mut b = vec![0u8; a.size as usize];
            let n = fs.read(i, 0, &mut b)?;
            assert_eq!(n, b.len());
            Ok(Some(b))
        }
        Op::Rename(a, b) => {
            let (da, na) = parent(fs, a)?;
            let (db, nb) = parent(fs, b)?;
            let (ino, attr) = fs.lookup(da, &na)?;
            let _ = ino;
            if attr.is_dir() {
                return Err(dfs::FsError::IsDir);
            }
            fs.rename(da, &na, db, &nb, now)?;
            Ok(None)
        }
        Op::Link(a, b) => {
            let i = resolve(fs, a)?;
            let (db, nb) = parent(fs, b)?;
            fs.link(i, db, &nb, now)?;
            Ok(None)
        }
        Op::Unlink(p) => {
            let (d, n) = parent(fs, p)?;
            fs.remove(d, &n, false, now)?;
            Ok(None)
        }
        Op::Mkdir(p) => {
            let (d, n) = parent(fs, p)?;
            fs.create(d, &n, S_IFDIR | 0o755, 0, 0, now, None)?;
            Ok(None)
        }
        Op::Rmdir(p) => {
            let (d, n) = parent(fs, p)?;
            fs.remove(d, &n, true, now)?;
            Ok(None)
        }
        Op::Remount => Ok(None),
    }
}

/// The whole tree as a model.
fn snapshot(fs: &mut Dfs) -> Result<Model, String> {
    let mut m = Model::new();
    let mut stack = vec![(ROOT_INO, String::new())];
    let mut ents = Vec::new();
    while let Some((d, prefix)) = stack.pop() {
        fs.readdir(d, 0, &mut ents).map_err(|e| e.to_string())?;
        for (_, e) in ents.clone() {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let name = String::from_utf8(e.name.clone()).unwrap();
            let p = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let a = fs.getattr(e.ino).map_err(|e| e.to_string())?;
            if a.is_dir() {
                m.insert(p.clone(), Node::Dir);
                stack.push((e.ino, p));
            } else {
                let mut b = vec![0u8; a.size as usize];
                fs.read(e.ino, 0, &mut b).map_err(|e| e.to_string())?;
                m.insert(p, Node::File(b));
            }
        }
    }
    Ok(m)
}

fn exercise(seed: u64, ops: usize) {
    let mut fs = Dfs::format(device(16), &vcfg(), params(), 0).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut m = Model::new();
    let mut links = Vec::new();
    let mut ok = 0;
    for i in 0..ops {
        let op = gen(&mut rng, true);
        if let Op::Remount = op {
            let nand = fs.unmount().unwrap();
            fs = Dfs::open(nand, &vcfg()).unwrap().0;
            continue;
        }
        let want = apply(&mut m, &mut links, &op);
        let got = run(&mut fs, &op, i as i64);
        match (&want, &got) {
            (Ok(a), Ok(b)) => {
                ok += 1;
                assert_eq!(a, b, "seed {seed} op {i} {op:?}: content differs")
            }
            (Err(()), Err(_)) => {}
            _ => panic!(
                "seed {seed} op {i} {op:?}: model {want:?}, fs {:?}",
                got.map(|_| ())
            ),
        }
        if i % 100 == 99 {
            assert_eq!(snapshot(&mut fs).unwrap(), m, "seed {seed} after op {i}");
            let p = fs.fsck().unwrap();
            assert!(p.is_empty(), "seed {seed} op {i}: fsck {p:?}");
        }
    }
    let files = m.values().filter(|n| matches!(n, Node::File(_))).count();
    let bytes: usize = m
        .values()
        .map(|n| if let Node::File(c) = n { c.len() } else { 0 })
        .sum();
    eprintln!(
        "seed {seed}: {ok} of {ops} operations succeeded; {files} files, {bytes} bytes at the end"
    );
    assert!(
        ok * 4 > ops,
        "too few operations succeed for the test to mean anything"
    );
    let nand = fs.unmount().unwrap();
    let (mut fs, rep) = Dfs::open(nand, &vcfg()).unwrap();
    assert_eq!(
        rep.orphans_freed + rep.blocks_trimmed,
        0,
        "clean unmount left work: {rep:?}"
    );
    assert_eq!(snapshot(&mut fs).unwrap(), m, "seed {seed} after remount");
    assert!(fs.fsck().unwrap().is_empty());
}

#[test]
fn exerciser_against_the_model() {
    let seeds = std::env::var("DFS_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    for seed in 0..seeds {
        exercise(seed, 1500);
    }
}

/// A run of `ops` operations with a cut at flash operation `cut` (0: none). Returns the flash
/// operations issued.
fn crash_run(seed: u64, ops: usize, cut: u64, mlc: bool) -> Result<u64, String> {
    let nand = if mlc { mlc_device() } else { device(16) };
    let mut fs = Dfs::format(nand, &vcfg(), params(), 0).unwrap();
    let base = fs.vsl().nand().ops_issued();
    if cut > 0 {
        fs.vsl_mut().nand_mut().set_fault_plan(FaultPlan {
            cut_at_op: Some(base + cut),
            ..FaultPlan::default()
        });
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut m = Model::new();
    let mut links = Vec::new();
    let mut inflight = None;
    for i in 0..ops {
        let op = gen(&mut rng, false);
        let mut m2 = m.clone();
        let mut l2 = links.clone();
        let want = apply(&mut m2, &mut l2, &op);
        match run(&mut fs, &op, i as i64) {
            Ok(_) => {
                if want.is_err() {
                    return Err(format!("op {i} {op:?} succeeded, the model refuses it"));
                }
                m = m2;
                links = l2;
            }
            Err(e) if e.is_power_loss() => {
                inflight = Some(m2);
                break;
            }
            Err(e) => {
                if want.is_ok() {
                    return Err(format!("op {i} {op:?}: {e}"));
                }
            }
        }
    }
    let issued = fs.vsl().nand().ops_issued() - base;
    if cut == 0 {
        return Ok(issued);
    }
    if inflight.is_none() {
        return Err(format!("the cut at flash operation {cut} never fired"));
    }
    let mut nand = fs.into_nand();
    nand.set_fault_plan(FaultPlan::default());
    if nand.is_powered() {
        nand.power_cut();
    }
    nand.power_on();
    let (mut fs, _) = Dfs::open(nand, &vcfg()).map_err(|e| format!("mount after the cut: {e}"))?;
    let problems = fs.fsck().map_err(|e| e.to_string())?;
    if !problems.is_empty() {
        return Err(format!("cut at {cut}: fsck {problems:?}"));
    }
    let got = snapshot(&mut fs)?;
    if got != m && inflight.as_ref() != Some(&got) {
        let diff: Vec<_> = got
            .keys()
            .chain(m.keys())
            .filter(|k| got.get(*k) != m.get(*k))
            .take(4)
            .collect();
        return Err(format!("cut at {cut}: the tree is neither the acknowledged one nor it plus the op in flight; differs at {diff:?}"));
    }
    // Keeps working.
    for i in 0..50 {
        let op = gen(&mut rng, false);
        let _ = run(&mut fs, &op, 10_000 + i);
    }
    let problems = fs.fsck().map_err(|e| e.to_string())?;
    if !problems.is_empty() {
        return Err(format!("after recovery and more ops: fsck {problems:?}"));
    }
    Ok(issued)
}

/// MLC chips with 16 KiB pages (4 blocks per page, paired pages: an interrupted upper-page
/// program destroys its word line's lower pages).
fn mlc_device() -> Nand {
    let cfg = DeviceConfig::preset(
        "mlc16k",
        &[
            "geometry.page_size_bytes=16384".into(),
            "geometry.oob_size_bytes=128".into(),
            "geometry.channels=2".into(),
            "geometry.chips_per_channel=1".into(),
            "geometry.blocks_per_plane=16".into(),
            "geometry.pages_per_block=32".into(),
            "reliability.factory_bad_block_ratio=0".into(),
            "reliability.ecc_codeword_bytes=512".into(),
        ],
    )
    .unwrap();
    Nand::new(cfg).unwrap()
}

fn crash_seeds(seeds: u64, mlc: bool) {
    let mut failures = Vec::new();
    for seed in 0..seeds {
        let total = crash_run(seed, 250, 0, mlc).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xD15C);
        let cut = 1 + rng.next_u64() % total.max(1);
        if let Err(e) = crash_run(seed, 250, cut, mlc) {
            failures.push(format!("seed {seed}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn power_cuts_many_seeds() {
    let seeds: u64 = std::env::var("DFS_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    crash_seeds(seeds, false);
}

#[test]
fn power_cuts_mlc_16k_pages() {
    let seeds: u64 = std::env::var("DFS_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(50, |s: u64| s / 4);
    crash_seeds(seeds, true);
}

#[test]
fn sparse_file_costs_only_what_is_written() {
    let mut fs = Dfs::format(device(16), &vcfg(), params(), 0).unwrap();
    let (ino, _) = fs
        .create(ROOT_INO, b"sparse", 0o644, 0, 0, 0, None)
        .unwrap();
    fs.write(ino, 10 << 20, b"end", 1).unwrap();
    assert_eq!(fs.getattr(ino).unwrap().size, (10 << 20) + 3);
    assert_eq!(fs.mapped_blocks_of(ino).unwrap(), 1);
    let mut b = vec![1u8; 8192];
    fs.read(ino, 5 << 20, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 0));
    let (l, _) = fs
        .create(
            ROOT_INO,
            b"link",
            0o777 | dfs::fs::S_IFLNK,
            0,
            0,
            0,
            Some(b"sparse"),
        )
        .unwrap();
    assert_eq!(fs.readlink(l).unwrap(), b"sparse");
    assert!(fs.fsck().unwrap().is_empty());
}

/// A directory that outgrows its small slot (16 entries per block, 4-block slots here) moves to
/// its large chunk; entries, removals and renames survive a remount and fsck is clean.
#[test]
fn large_directories_move_to_their_chunk() {
    let mut fs = Dfs::format(device(16), &vcfg(), params(), 0).unwrap();
    let (d, _) = fs
        .create(ROOT_INO, b"big", S_IFDIR | 0o755, 0, 0, 0, None)
        .unwrap();
    for i in 0..500u32 {
        let name = format!("file-{i:04}");
        let (ino, _) = fs.create(d, name.as_bytes(), 0o644, 0, 0, 1, None).unwrap();
        fs.write(ino, 0, name.as_bytes(), 2).unwrap();
    }
    for i in (0..500u32).step_by(2) {
        fs.remove(d, format!("file-{i:04}").as_bytes(), false, 3)
            .unwrap();
    }
    for i in (1..100u32).step_by(2) {
        fs.rename(
            d,
            format!("file-{i:04}").as_bytes(),
            ROOT_INO,
            format!("moved-{i:04}").as_bytes(),
            4,
        )
        .unwrap();
    }
    assert!(fs.fsck().unwrap().is_empty());
    let nand = fs.unmount().unwrap();
    let (mut fs, _) = Dfs::open(nand, &vcfg()).unwrap();
    let mut ents = Vec::new();
    fs.readdir(d, 0, &mut ents).unwrap();
    let names: Vec<String> = ents
        .iter()
        .map(|(_, e)| String::from_utf8(e.name.clone()).unwrap())
        .filter(|n| n.starts_with("file-"))
        .collect();
    assert_eq!(names.len(), 200);
    for n in &names {
        let (ino, a) = fs.lookup(d, n.as_bytes()).unwrap();
        let mut b = vec![0u8; a.size as usize];
        fs.read(ino, 0, &mut b).unwrap();
        assert_eq!(b, n.as_bytes());
    }
    assert!(fs.lookup(ROOT_INO, b"moved-0099").is_ok());
    assert!(
        fs.getattr(d).unwrap().size > 4 * 4096,
        "the directory grew past its slot"
    );
    assert!(fs.fsck().unwrap().is_empty());
}

/// Directory renames: across parents (the parent pointer follows), over an empty directory,
/// never into the directory's own subtree, never over a non-empty one.
#[test]
fn directory_renames() {
    let mut fs = Dfs::format(device(16), &vcfg(), params(), 0).unwrap();
    let dir = S_IFDIR | 0o755;
    let (a, _) = fs.create(ROOT_INO, b"a", dir, 0, 0, 0, None).unwrap();
    let (b, _) = fs.create(a, b"b", dir, 0, 0, 0, None).unwrap();
    let (c, _) = fs.create(ROOT_INO, b"c", dir, 0, 0, 0, None).unwrap();
    fs.create(b, b"f", 0o644, 0, 0, 0, None).unwrap();
    assert!(
        fs.rename(ROOT_INO, b"a", b, b"x", 1).is_err(),
        "into its own subtree"
    );
    fs.rename(a, b"b", c, b"b2", 1).unwrap();
    assert_eq!(fs.getattr(b).unwrap().parent, c);
    assert_eq!(fs.lookup(b, b"..").unwrap().0, c);
    let (e, _) = fs.create(ROOT_INO, b"empty", dir, 0, 0, 0, None).unwrap();
    assert!(matches!(
        fs.rename(ROOT_INO, b"empty", c, b"b2", 2),
        Err(dfs::FsError::NotEmpty)
    ));
    fs.rename(c, b"b2", ROOT_INO, b"empty", 2).unwrap();
    assert!(
        fs.getattr(e).is_err(),
        "the replaced empty directory is freed"
    );
    assert!(fs.fsck().unwrap().is_empty());
    let nand = fs.unmount().unwrap();
    let (mut fs, _) = Dfs::open(nand, &vcfg()).unwrap();
    let (n, _) = fs.lookup(ROOT_INO, b"empty").unwrap();
    assert_eq!(n, b);
    assert!(fs.lookup(b, b"f").is_ok());
    assert!(fs.fsck().unwrap().is_empty());
}
