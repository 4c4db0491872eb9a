//! Test support shared by the block-mapped FTL tests (block, fast, amf): a seeded workload
//! applied to a device and to a reference model at once, reads checked against the model.
//! Power cuts of every FTL go through `ftl::testkit::power_cut_run` (tests/power_loss.rs).
#![allow(dead_code)]

use ftl::{BlockDevice, FtlError, MemDisk, LOGICAL_PAGE_BYTES};
use nand::{DeviceConfig, Nand};

pub const PAGE: usize = LOGICAL_PAGE_BYTES;

/// The "tiny" preset (2 ch x 2 chips x 2 planes x 16 blocks x 16 pages) with overrides.
pub fn tiny(overrides: &[&str]) -> Nand {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    Nand::new(DeviceConfig::preset("tiny", &o).expect("tiny preset")).expect("nand")
}

/// xorshift64*: small, seeded, deterministic.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Write { lpn: u64, pages: u64 },
    Trim { lpn: u64, pages: u64 },
    Read { lpn: u64, pages: u64 },
    Flush,
}

/// Page contents are a stamp repeated over the page; stamp 0 stands for zeros.
pub fn fill(buf: &mut [u8], stamp: u64) {
    if stamp == 0 {
        buf.fill(0);
        return;
    }
    for w in buf.chunks_mut(8) {
        w.copy_from_slice(&stamp.to_le_bytes()[..w.len()]);
    }
}

fn stamp_of(page: &[u8]) -> Option<u64> {
    if page.iter().all(|&b| b == 0) {
        return Some(0);
    }
    let s = u64::from_le_bytes(page[..8].try_into().ok()?);
    page.chunks(8)
        .all(|w| w == &s.to_le_bytes()[..w.len()])
        .then_some(s)
}

/// The reference: what each logical page must read as. `alt` holds the other acceptable value
/// of pages touched by an operation interrupted by a power cut (old or new are both fine).
#[derive(Clone, Debug)]
pub struct Model {
    pub pages: Vec<u64>,
    pub alt: Vec<Option<u64>>,
    pub next_stamp: u64,
    pub mem: MemDisk,
}

impl Model {
    pub fn new(capacity: u64) -> Model {
        Model {
            pages: vec![0; capacity as usize],
            alt: vec![None; capacity as usize],
            next_stamp: 1,
            mem: MemDisk::new(capacity),
        }
    }
}

/// Applies one operation to the device and, if it succeeds, to the model. Returns the device's
/// result; on error the model is left as it was, with the touched pages' new values recorded as
/// acceptable alternatives (the caller decides whether the error was expected).
pub fn apply<D: BlockDevice>(
    dev: &mut D,
    m: &mut Model,
    op: Op,
    now: &mut u64,
) -> Result<(), FtlError> {
    let t = *now;
    let r = match op {
        Op::Write { lpn, pages } => {
            let mut data = vec![0u8; pages as usize * PAGE];
            let first = m.next_stamp;
            for (i, p) in data.chunks_mut(PAGE).enumerate() {
                fill(p, first + i as u64);
            }
            m.next_stamp += pages;
            let r = dev.write(t, lpn, &data, false);
            for i in 0..pages {
                let l = (lpn + i) as usize;
                if r.is_ok() {
                    m.pages[l] = first + i;
                    m.alt[l] = None;
                } else {
                    m.alt[l] = Some(first + i);
                }
            }
            if r.is_ok() {
                m.mem.write(t, lpn, &data, false).expect("model write");
            }
            r
        }
        Op::Trim { lpn, pages } => {
            let r = dev.trim(t, lpn, pages);
            for i in 0..pages {
                let l = (lpn + i) as usize;
                if r.is_ok() {
                    m.pages[l] = 0;
                    m.alt[l] = None;
                } else {
                    m.alt[l] = Some(0);
                }
            }
            if r.is_ok() {
                m.mem.trim(t, lpn, pages).expect("model trim");
            }
            r
        }
        Op::Read { lpn, pages } => {
            let mut buf = vec![0u8; pages as usize * PAGE];
            let r = dev.read(t, lpn, &mut buf);
            if r.is_ok() {
                let mut want = vec![0u8; buf.len()];
                m.mem.read(t, lpn, &mut want).expect("model read");
                assert!(
                    buf == want,
                    "read of {lpn}+{pages} differs from the model at {t} ns"
                );
            }
            r
        }
        Op::Flush => dev.flush(t),
    };
    match r {
        Ok(done) => {
            assert!(done >= t, "completion {done} before submission {t}");
            *now = t + 1_000;
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Checks every logical page against the model (current value or its alternative).
pub fn verify_all<D: BlockDevice>(dev: &mut D, m: &Model, at: u64) {
    let mut buf = vec![0u8; PAGE];
    for lpn in 0..dev.capacity_pages() {
        dev.read(at, lpn, &mut buf)
            .unwrap_or_else(|e| panic!("read {lpn}: {e}"));
        let got = stamp_of(&buf).unwrap_or_else(|| panic!("page {lpn} holds mixed data"));
        let want = m.pages[lpn as usize];
        let alt = m.alt[lpn as usize];
        assert!(
            got == want || Some(got) == alt,
            "page {lpn}: read stamp {got}, want {want} (or {alt:?})"
        );
    }
}

/// A random mix of writes (1-4 pages), trims, reads and flushes over the whole device, with
/// writes concentrated on `hot` pages when given.
pub fn random_op(rng: &mut Rng, capacity: u64) -> Op {
    let pages = 1 + rng.below(4);
    let lpn = rng.below(capacity - pages);
    match rng.below(100) {
        0..=64 => Op::Write { lpn, pages },
        65..=74 => Op::Trim {
            lpn,
            pages: 1 + rng.below(24).min(capacity - lpn - 1),
        },
        75..=94 => Op::Read { lpn, pages },
        _ => Op::Flush,
    }
}

/// `random_op` over a device of `capacity` pages, as a generator for `run`.
pub fn random_ops(capacity: u64) -> impl FnMut(&mut Rng, &Model) -> Op {
    move |r, _| random_op(r, capacity)
}

/// Runs `ops` operations of `gen` from `seed` on `dev`, checks every page against the model,
/// and returns the device with its report and virtual time (for determinism checks).
pub fn checked_run<D: BlockDevice>(
    mut dev: D,
    seed: u64,
    ops: usize,
    gen: &mut dyn FnMut(&mut Rng, &Model) -> Op,
) -> (D, ftl::FtlReport, u64) {
    let mut m = Model::new(dev.capacity_pages());
    let mut now = 0;
    run(&mut dev, &mut m, &mut Rng::new(seed), ops, &mut now, gen);
    verify_all(&mut dev, &m, now);
    let report = dev.report();
    let virtual_ns = dev.nand().map_or(0, |n| n.now_ns());
    (dev, report, virtual_ns)
}

/// Runs `ops` operations from `gen`, checking reads against the model; panics on any error.
pub fn run<D: BlockDevice>(
    dev: &mut D,
    m: &mut Model,
    rng: &mut Rng,
    ops: usize,
    now: &mut u64,
    gen: &mut dyn FnMut(&mut Rng, &Model) -> Op,
) {
    for _ in 0..ops {
        let op = gen(rng, m);
        apply(dev, m, op, now).unwrap_or_else(|e| panic!("{op:?}: {e}"));
    }
}
