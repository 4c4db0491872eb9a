//! The fuzz targets in `cargo test`: every committed input replayed (`fuzz/corpus/TARGET/` and
//! the crashes found, `fuzz/regressions/TARGET/`), then a short seeded mutation of each corpus
//! input (bit flips, byte sets, boundary integers, inserts, deletes, splices): the structured
//! fuzzing that needs no fuzzer installed. A panic fails the test; so does an input that takes
//! more than `HANG_LIMIT` (a hang, as AFL would report it). Coverage-guided runs: scripts/fuzz.sh.
//!
//! `cargo test -p noftl-fuzz --test corpus -- --ignored write_seed_corpus` regenerates the seed
//! inputs made by the real encoders (flash images, records).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Wall-clock bound of one input. The only wall-clock figure in the project's tests: a hang has
/// no virtual time to count.
const HANG_LIMIT: Duration = Duration::from_secs(20);

/// Mutants per target and corpus input (`FUZZ_MUTANTS=N` for more).
fn mutants() -> usize {
    std::env::var("FUZZ_MUTANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn inputs(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<(PathBuf, Vec<u8>)> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .map(|p| {
                let b = std::fs::read(&p).unwrap();
                (p, b)
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

/// Runs `f` on `data` on a thread of its own; `Err` names a panic or a hang.
fn run_bounded(f: fn(&[u8]), data: Vec<u8>) -> Result<(), String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(|| f(&data));
        let _ = tx.send(r.is_ok());
    });
    match rx.recv_timeout(HANG_LIMIT) {
        Ok(true) => Ok(()),
        Ok(false) | Err(mpsc::RecvTimeoutError::Disconnected) => Err("panicked".into()),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!("ran past {HANG_LIMIT:?}")),
    }
}

#[test]
fn every_target_has_a_corpus_and_survives_it_and_its_regressions() {
    let mut bad = Vec::new();
    for &(name, f) in noftl_fuzz::TARGETS {
        let corpus = inputs(&root().join("corpus").join(name));
        assert!(!corpus.is_empty(), "fuzz/corpus/{name} is empty");
        for (path, data) in corpus
            .into_iter()
            .chain(inputs(&root().join("regressions").join(name)))
        {
            if let Err(e) = run_bounded(f, data) {
                bad.push(format!("{name}: {}: {e}", path.display()));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

fn mutate(rng: &mut Xoshiro256PlusPlus, seed: &[u8], other: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let at = if d.is_empty() {
            0
        } else {
            rng.random_range(0..d.len())
        };
        match rng.random_range(0..6) {
            0 if !d.is_empty() => d[at] ^= 1 << rng.random_range(0..8),
            1 if !d.is_empty() => d[at] = rng.random(),
            2 if d.len() >= at + 4 => {
                let v: u32 = [0, 1, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 4096, 65_535]
                    [rng.random_range(0..7)];
                d[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            3 => {
                let n = rng.random_range(1..=16);
                let b: u8 = rng.random();
                d.splice(at..at, std::iter::repeat_n(b, n));
            }
            4 if !d.is_empty() => {
                let n = rng.random_range(1..=16).min(d.len() - at);
                d.drain(at..at + n);
            }
            _ if !other.is_empty() => {
                let from = rng.random_range(0..other.len());
                let n = rng.random_range(1..=64).min(other.len() - from);
                d.splice(at..at, other[from..from + n].iter().copied());
            }
            _ => {}
        }
    }
    d
}

#[test]
fn seeded_mutations_of_every_corpus_input_neither_panic_nor_hang() {
    let mut bad = Vec::new();
    for (t, &(name, f)) in noftl_fuzz::TARGETS.iter().enumerate() {
        let corpus: Vec<Vec<u8>> = inputs(&root().join("corpus").join(name))
            .into_iter()
            .map(|x| x.1)
            .collect();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0xF022 + t as u64);
        // The image targets open a device per input: fewer mutants keep the test short.
        let n = if name.ends_with("_flash") {
            mutants() / 4
        } else {
            mutants()
        };
        for (i, seed) in corpus.iter().enumerate() {
            let other = &corpus[(i + 1) % corpus.len()];
            for k in 0..n {
                let m = mutate(&mut rng, seed, other);
                if let Err(e) = run_bounded(f, m.clone()) {
                    let path = std::env::temp_dir().join(format!("noftl-fuzz-{name}-{i}-{k}"));
                    std::fs::write(&path, &m).unwrap();
                    bad.push(format!(
                        "{name}: mutant {k} of input {i}: {e} (saved to {})",
                        path.display()
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

// ----- the seed corpus -----------------------------------------------------------------------

fn write_seed(target: &str, name: &str, data: &[u8]) {
    let dir = root().join("corpus").join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), data).unwrap();
}

/// Every programmed page of `nand` as chunks of `noftl_fuzz::program_from`.
fn image_chunks(nand: &mut nand::Nand) -> Vec<u8> {
    let geo = nand.geometry().clone();
    let mut out = Vec::new();
    let mut data = vec![0u8; geo.page_size_bytes as usize];
    let mut oob = vec![0u8; geo.oob_size_bytes as usize];
    for b in 0..geo.blocks() {
        let used = nand.block_info(nand::Pbn(b)).map_or(0, |i| i.next_page);
        for p in 0..used {
            let ppn = geo.ppn_in_block(nand::Pbn(b), p);
            if nand
                .read(0, ppn, &mut data, &mut oob, nand::Purpose::Host)
                .is_ok()
            {
                // Data repeats to fill the page: its shortest period keeps the chunk short.
                let n = data.len();
                let period = (1..=256)
                    .find(|&p| n % p == 0 && data.chunks(p).all(|c| c == &data[..p]))
                    .unwrap_or(n);
                out.extend(noftl_fuzz::raw_chunk(b as u8, &oob, &data[..period]));
            }
        }
    }
    out
}

#[test]
#[ignore = "writes fuzz/corpus: run by hand when a format changes"]
fn write_seed_corpus() {
    use ftl::oob::{OobRecord, PageKind};
    // OOB records of every kind.
    for (i, k) in [PageKind::Data, PageKind::Trim, PageKind::MapCheckpoint]
        .into_iter()
        .enumerate()
    {
        let mut oob = vec![0xFFu8; 64];
        OobRecord::new(k, 77, 9, 3).encode_into(&mut oob);
        write_seed("oob_record", &format!("record-{i}"), &oob);
    }
    // A region table of two regions.
    let spec = |name: &str, o: &[(&str, &str)]| {
        let o: Vec<(String, String)> = o
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        storage::region::RegionSpec::parse(name, &o).unwrap()
    };
    let mut table = vec![0u8; 512];
    storage::region::encode_table(
        &[
            (
                spec(
                    "hot",
                    &[("MAX_SIZE", "64K"), ("MAX_CHIPS", "1"), ("GC", "fifo")],
                ),
                vec![0, 1],
            ),
            (spec("log", &[("LOG", "on"), ("MAX_CHIPS", "1")]), vec![2]),
        ],
        &mut table,
    )
    .unwrap();
    write_seed("region_table", "two", &table);
    // Flash images: the page FTL after writes, trims and a flush; DFTL; DFS; the native store.
    let opts = ftl::FtlOptions {
        spare_factor: 0.3,
        ..ftl::FtlOptions::default()
    };
    for kind in ["page", "dftl", "fast"] {
        let mut dev = ftl::build(kind, noftl_fuzz::flash_device().unwrap(), &opts).unwrap();
        let page = vec![0x5Au8; ftl::LOGICAL_PAGE_BYTES];
        let mut t = 0;
        for l in 0..24 {
            t = dev.write(t, l * 3, &page, false).unwrap();
        }
        t = dev.trim(t, 6, 4).unwrap();
        dev.flush(t).unwrap();
        let mut nand = dev.into_nand().unwrap();
        write_seed("ftl_flash", kind, &image_chunks(&mut nand));
    }
    let nand = noftl_fuzz::flash_device().unwrap();
    let params = dfs::FormatParams {
        chunk_blocks: 1 << 8,
        max_inodes: 64,
        small_blocks: 2,
    };
    let mut fs = dfs::Dfs::format(nand, &noftl_fuzz::dfs_config(), params, 0).unwrap();
    let (ino, _) = fs
        .create(
            dfs::fs::ROOT_INO,
            b"f",
            dfs::fs::S_IFREG | 0o644,
            0,
            0,
            0,
            None,
        )
        .unwrap();
    fs.write(ino, 0, b"hello fuzz", 0).unwrap();
    let mut nand = fs.unmount().unwrap();
    write_seed("dfs_flash", "small", &image_chunks(&mut nand));
    use storage::pagestore::{PageKind as DbPage, WriteHint};
    use storage::PageStore;
    let mut store = storage::NativeStore::format(
        noftl_fuzz::native_device().unwrap(),
        noftl_fuzz::native_config(),
    )
    .unwrap();
    let t = store
        .create_region(0, "hot", &[("MAX_SIZE".into(), "64K".into())])
        .unwrap_or(0);
    let hint = WriteHint {
        object: 0,
        kind: DbPage::Heap,
    };
    let mut t = t;
    for pid in 0..12 {
        t = store
            .write_page(t, pid, &vec![pid as u8 + 1; 4096], hint)
            .unwrap();
    }
    t = store.sync_pages(t).unwrap();
    store.write_map_checkpoint(t).unwrap();
    let mut nand = store.into_nand_raw();
    write_seed("native_flash", "formatted", &image_chunks(&mut nand));
}
