//! Checks of the [`BlockDevice`] contract that any FTL's tests can run: the contract items one
//! by one, random workloads against a [`MemDisk`] model, and power cuts at chosen operations
//! followed by recovery. Self-checking page contents make corruption visible: every page
//! written says which logical page and which version it is, and carries a checksum.
//!
//! Invariants the checks rely on:
//! 1. Workloads are functions of their seed only (same seed, same requests).
//! 2. A page written by the kit decodes to exactly one (lpn, version); zeros decode to "trimmed
//!    or never written"; anything else is corruption.

use nand::{FaultPlan, Nand, Nanos};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::block_device::{BlockDevice, FtlError, LOGICAL_PAGE_BYTES};
use crate::memdisk::MemDisk;

const PAGE: usize = LOGICAL_PAGE_BYTES;

/// The `--set` overrides of the small paired-page devices of the tests and campaigns (`MLC4K`
/// and `TLC4K` in docs/PERFORMANCE.md section 7): the chips of the 16 KiB presets with 4 KiB
/// pages on four dies, ten blocks per plane of 64 (MLC) or 96 (TLC) pages, no factory-bad
/// blocks. `cells`: "mlc" (on `mlc16k`) or "tlc" (on `tlc16k`); returns (preset, overrides).
pub fn paired_device_sets(cells: &str) -> (&'static str, Vec<String>) {
    let (preset, ppb) = if cells == "mlc" {
        ("mlc16k", 64)
    } else {
        ("tlc16k", 96)
    };
    let sets = [
        "geometry.page_size_bytes=4096".to_string(),
        "geometry.oob_size_bytes=128".into(),
        "geometry.channels=2".into(),
        "geometry.chips_per_channel=2".into(),
        "geometry.blocks_per_plane=10".into(),
        format!("geometry.pages_per_block={ppb}"),
        "reliability.factory_bad_block_ratio=0".into(),
        "reliability.ecc_codeword_bytes=512".into(),
    ]
    .into();
    (preset, sets)
}

/// The config of [`paired_device_sets`], with `extra` overrides after them.
pub fn paired_device_config(cells: &str, extra: &[String]) -> nand::DeviceConfig {
    let (preset, mut sets) = paired_device_sets(cells);
    sets.extend_from_slice(extra);
    nand::DeviceConfig::preset(preset, &sets).expect("the paired-page test device")
}

/// Fills `buf` (one page) with the self-checking contents of version `version` of `lpn`.
pub fn fill_page(buf: &mut [u8], lpn: u64, version: u64) {
    let mut x = lpn.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ version.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        ^ 0x5151;
    buf[0..8].copy_from_slice(&lpn.to_le_bytes());
    buf[8..16].copy_from_slice(&version.to_le_bytes());
    for chunk in buf[16..].chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
}

/// `fill_page` for `pages` consecutive logical pages from `lpn`, into the front of `buf`;
/// returns the filled bytes.
pub fn fill_pages(buf: &mut [u8], lpn: u64, pages: u64, version: u64) -> &[u8] {
    for (i, page) in buf.chunks_exact_mut(PAGE).take(pages as usize).enumerate() {
        fill_page(page, lpn + i as u64, version);
    }
    &buf[..pages as usize * PAGE]
}

/// What a page read back holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    Zero,
    Version(u64),
    Corrupt,
}

/// Decodes a page written by `fill_page` for `lpn` (invariant 2).
pub fn decode_page(buf: &[u8], lpn: u64) -> Content {
    if buf.iter().all(|&b| b == 0) {
        return Content::Zero;
    }
    let got_lpn = u64::from_le_bytes(buf[0..8].try_into().unwrap_or([0; 8]));
    let version = u64::from_le_bytes(buf[8..16].try_into().unwrap_or([0; 8]));
    if got_lpn != lpn {
        return Content::Corrupt;
    }
    let mut expect = vec![0u8; buf.len()];
    fill_page(&mut expect, lpn, version);
    if expect == buf {
        Content::Version(version)
    } else {
        Content::Corrupt
    }
}

fn err(what: &str, e: FtlError) -> String {
    format!("{what}: {e}")
}

/// Checks contract items 1-3 on a fresh device with at least 64 logical pages.
pub fn check_contract(dev: &mut dyn BlockDevice) -> Result<(), String> {
    let cap = dev.capacity_pages();
    if cap < 64 {
        return Err(format!(
            "capacity {cap} is too small for the contract checks"
        ));
    }
    let mut buf = vec![0xAAu8; 4 * PAGE];
    let mut t: Nanos = 0;
    // Item 2: never written reads as zeros.
    t = dev
        .read(t, 0, &mut buf)
        .map_err(|e| err("read unwritten", e))?;
    if buf.iter().any(|&b| b != 0) {
        return Err("a never-written page does not read as zeros".into());
    }
    // Writes read back, single and multi-page, and overwrites win.
    let mut data = vec![0u8; 4 * PAGE];
    for i in 0..4 {
        fill_page(&mut data[i * PAGE..(i + 1) * PAGE], 10 + i as u64, 1);
    }
    let done = dev
        .write(t, 10, &data, false)
        .map_err(|e| err("write 4 pages", e))?;
    if done < t {
        return Err(format!(
            "write completes at {done} ns, before its submission at {t} ns"
        ));
    }
    t = done;
    fill_page(&mut data[..PAGE], 11, 2);
    t = dev
        .write(t, 11, &data[..PAGE], true)
        .map_err(|e| err("overwrite", e))?;
    t = dev.read(t, 10, &mut buf).map_err(|e| err("read back", e))?;
    let want = [
        Content::Version(1),
        Content::Version(2),
        Content::Version(1),
        Content::Version(1),
    ];
    for (i, w) in want.iter().enumerate() {
        let got = decode_page(&buf[i * PAGE..(i + 1) * PAGE], 10 + i as u64);
        if got != *w {
            return Err(format!("lpn {} reads {got:?}, expected {w:?}", 10 + i));
        }
    }
    // Item 1: out of range and misaligned requests are refused and change nothing.
    let before = dev.report().host;
    let e = dev.write(t, cap - 1, &data[..2 * PAGE], false);
    if !matches!(e, Err(FtlError::OutOfRange { .. })) {
        return Err(format!("a write past the end gives {e:?}"));
    }
    let e = dev.read(t, cap, &mut buf[..PAGE]);
    if !matches!(e, Err(FtlError::OutOfRange { .. })) {
        return Err(format!("a read past the end gives {e:?}"));
    }
    let e = dev.trim(t, cap - 2, 3);
    if !matches!(e, Err(FtlError::OutOfRange { .. })) {
        return Err(format!("a trim past the end gives {e:?}"));
    }
    let e = dev.trim(t, u64::MAX, 2);
    if !matches!(e, Err(FtlError::OutOfRange { .. })) {
        return Err(format!("a trim whose end overflows gives {e:?}"));
    }
    let e = dev.write(t, 0, &data[..PAGE + 512], false);
    if !matches!(e, Err(FtlError::Misaligned { .. })) {
        return Err(format!("a misaligned write gives {e:?}"));
    }
    let e = dev.read(t, 0, &mut buf[..100]);
    if !matches!(e, Err(FtlError::Misaligned { .. })) {
        return Err(format!("a misaligned read gives {e:?}"));
    }
    if dev.report().host != before {
        return Err("refused requests changed the host counters".into());
    }
    let mut last = vec![0u8; PAGE];
    t = dev
        .read(t, cap - 1, &mut last)
        .map_err(|e| err("read last page", e))?;
    if last.iter().any(|&b| b != 0) {
        return Err("a refused write changed the last page".into());
    }
    // Item 2: trimmed pages read as zeros; neighbours are untouched.
    t = dev.trim(t, 11, 2).map_err(|e| err("trim", e))?;
    t = dev
        .read(t, 10, &mut buf)
        .map_err(|e| err("read after trim", e))?;
    let want = [
        Content::Version(1),
        Content::Zero,
        Content::Zero,
        Content::Version(1),
    ];
    for (i, w) in want.iter().enumerate() {
        let got = decode_page(&buf[i * PAGE..(i + 1) * PAGE], 10 + i as u64);
        if got != *w {
            return Err(format!(
                "after trim lpn {} reads {got:?}, expected {w:?}",
                10 + i
            ));
        }
    }
    // Trimming unwritten pages and an empty range is fine; the last page is writable.
    t = dev.trim(t, 40, 10).map_err(|e| err("trim unwritten", e))?;
    t = dev.trim(t, 5, 0).map_err(|e| err("empty trim", e))?;
    fill_page(&mut data[..PAGE], cap - 1, 7);
    t = dev
        .write(t, cap - 1, &data[..PAGE], false)
        .map_err(|e| err("write last page", e))?;
    t = dev.flush(t).map_err(|e| err("flush", e))?;
    dev.read(t, cap - 1, &mut last)
        .map_err(|e| err("read last page", e))?;
    if decode_page(&last, cap - 1) != Content::Version(7) {
        return Err("the last page does not read back".into());
    }
    Ok(())
}

/// Where a workload's writes and trims go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Writes and trims of 1-8 pages anywhere (overwrites included).
    Random,
    /// Mostly runs from the start of `block_pages`-page blocks, 1 to `block_pages` long (they
    /// exercise hybrid FTLs' sequential logs, switch and partial merges), some single-page
    /// writes anywhere, trims of up to 20 pages from within a block's first half.
    Sequential { block_pages: u64 },
    /// An append-only host of `segment_pages`-page segments (as ALFS is for AMF): writes of
    /// 1-8 pages at a segment's write pointer (one in eight skips a page first, leaving a gap),
    /// trims of whole segments only; a segment is trimmed before its first write when the
    /// workload does not know its write pointer (on a device that already holds data).
    AppendOnly { segment_pages: u64 },
}

impl Pattern {
    /// The most pages one write or read of this pattern spans.
    pub fn max_request_pages(self) -> u64 {
        match self {
            Pattern::Random | Pattern::AppendOnly { .. } => 8,
            Pattern::Sequential { block_pages } => block_pages.max(8),
        }
    }
}

/// A deterministic workload (invariant 1): writes, reads, trims, flushes, over the first `span`
/// pages (the whole device if 0), placed by its [`Pattern`].
#[derive(Debug)]
pub struct Workload {
    rng: Xoshiro256PlusPlus,
    span: u64,
    version: u64,
    pub trim_percent: u64,
    pattern: Pattern,
    /// `AppendOnly`: per segment, the write pointer the workload left it at, if it knows it.
    wp: Vec<Option<u64>>,
    wp_known_at_start: bool,
}

/// One request of a [`Workload`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    Write {
        lpn: u64,
        pages: u64,
        version: u64,
        fua: bool,
    },
    Read {
        lpn: u64,
        pages: u64,
    },
    Trim {
        lpn: u64,
        pages: u64,
    },
    Flush,
}

impl Workload {
    /// A `Pattern::Random` workload.
    pub fn new(seed: u64, span: u64) -> Self {
        Workload::with_pattern(seed, span, Pattern::Random, true)
    }

    /// A workload of `pattern`; `fresh`: the device is empty (for `AppendOnly`: every write
    /// pointer is 0; otherwise each segment is trimmed before its first write).
    pub fn with_pattern(seed: u64, span: u64, pattern: Pattern, fresh: bool) -> Self {
        Workload {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            span,
            version: 0,
            trim_percent: 5,
            pattern,
            wp: Vec::new(),
            wp_known_at_start: fresh,
        }
    }

    pub fn next(&mut self, capacity: u64) -> Request {
        let span = if self.span == 0 {
            capacity
        } else {
            self.span.min(capacity)
        };
        let r = self.rng.next_u64() % 100;
        let pages = 1 + self.rng.next_u64() % 8;
        let lpn = self.rng.next_u64() % span;
        let (lpn, pages) = match self.pattern {
            Pattern::Random => (lpn, pages.min(span - lpn)),
            Pattern::Sequential { block_pages } => {
                let start = lpn - lpn % block_pages;
                match self.rng.next_u64() % 10 {
                    // Trims: from the first half of a block, up to 20 pages.
                    _ if (55..55 + self.trim_percent).contains(&r) => {
                        let l = start + self.rng.next_u64() % block_pages.div_ceil(2);
                        let l = l.min(span - 1);
                        (l, (1 + self.rng.next_u64() % 20).min(span - l))
                    }
                    0..=6 => (
                        start,
                        (1 + self.rng.next_u64() % block_pages).min(span - start),
                    ),
                    _ => (lpn, 1),
                }
            }
            Pattern::AppendOnly { segment_pages } => {
                return self.next_append_only(r, lpn, pages, span, segment_pages)
            }
        };
        self.request(r, lpn, pages)
    }

    fn request(&mut self, r: u64, lpn: u64, pages: u64) -> Request {
        if r < 55 {
            self.version += 1;
            Request::Write {
                lpn,
                pages,
                version: self.version,
                fua: self.rng.next_u64().is_multiple_of(8),
            }
        } else if r < 55 + self.trim_percent {
            Request::Trim { lpn, pages }
        } else if r < 95 {
            Request::Read { lpn, pages }
        } else {
            Request::Flush
        }
    }

    fn next_append_only(&mut self, r: u64, lpn: u64, pages: u64, span: u64, seg: u64) -> Request {
        let segments = span / seg;
        if self.wp.is_empty() {
            let known = self.wp_known_at_start.then_some(0);
            self.wp = vec![known; segments as usize];
        }
        let s = (lpn / seg).min(segments - 1);
        let trim = |me: &mut Self| {
            me.wp[s as usize] = Some(0);
            Request::Trim {
                lpn: s * seg,
                pages: seg,
            }
        };
        let is_write = r < 55;
        let is_trim = !is_write && r < 55 + self.trim_percent;
        match self.wp[s as usize] {
            _ if is_trim => trim(self),
            None if is_write => trim(self),
            Some(wp) if is_write => {
                let start = wp + u64::from(self.rng.next_u64().is_multiple_of(8));
                if start >= seg {
                    return trim(self);
                }
                let pages = pages.min(seg - start);
                self.wp[s as usize] = Some(start + pages);
                self.request(r, s * seg + start, pages)
            }
            _ => self.request(r, lpn, pages.min(span - lpn)),
        }
    }
}

/// Runs `ops` requests of a seeded workload on `dev` and on a `MemDisk`, comparing every read
/// and, at the end, every page.
pub fn random_vs_model(
    dev: &mut dyn BlockDevice,
    seed: u64,
    ops: usize,
    span: u64,
) -> Result<(), String> {
    let mut model = MemDisk::new(dev.capacity_pages());
    let mut w = Workload::new(seed, span);
    let t = drive_vs_model(dev, &mut model, &mut w, ops, 0, 0)?;
    compare_all(dev, &mut model, t)
}

/// Runs `ops` requests of `w` from `at_ns` on `dev` and on `model`; every request must
/// succeed and every read match the model. Written pages carry version `stamp + version`.
/// Returns the time after the last request.
pub fn drive_vs_model(
    dev: &mut dyn BlockDevice,
    model: &mut MemDisk,
    w: &mut Workload,
    ops: usize,
    at_ns: Nanos,
    stamp: u64,
) -> Result<Nanos, String> {
    let cap = dev.capacity_pages();
    let mut buf = vec![0u8; 8 * PAGE];
    let mut want = vec![0u8; 8 * PAGE];
    let mut t = at_ns;
    for op in 0..ops {
        let req = w.next(cap);
        let fail = |e: FtlError| format!("op {op} {req:?}: {e}");
        match req {
            Request::Write {
                lpn,
                pages,
                version,
                fua,
            } => {
                let n = pages as usize * PAGE;
                fill_pages(&mut buf, lpn, pages, stamp + version);
                t = dev.write(t, lpn, &buf[..n], fua).map_err(fail)?;
                model
                    .write(t, lpn, &buf[..n], fua)
                    .map_err(|e| e.to_string())?;
            }
            Request::Read { lpn, pages } => {
                let n = pages as usize * PAGE;
                t = dev.read(t, lpn, &mut buf[..n]).map_err(fail)?;
                model
                    .read(t, lpn, &mut want[..n])
                    .map_err(|e| e.to_string())?;
                if buf[..n] != want[..n] {
                    return Err(format!("op {op} {req:?}: data differs from the model"));
                }
            }
            Request::Trim { lpn, pages } => {
                t = dev.trim(t, lpn, pages).map_err(fail)?;
                model.trim(t, lpn, pages).map_err(|e| e.to_string())?;
            }
            Request::Flush => t = dev.flush(t).map_err(fail)?,
        }
    }
    Ok(t)
}

/// Every page of `dev` equals the model's.
pub fn compare_all(
    dev: &mut dyn BlockDevice,
    model: &mut MemDisk,
    at_ns: Nanos,
) -> Result<(), String> {
    let mut a = vec![0u8; PAGE];
    let mut b = vec![0u8; PAGE];
    for lpn in 0..dev.capacity_pages() {
        dev.read(at_ns, lpn, &mut a)
            .map_err(|e| format!("final read of {lpn}: {e}"))?;
        model.read(at_ns, lpn, &mut b).map_err(|e| e.to_string())?;
        if a != b {
            return Err(format!(
                "lpn {lpn}: {:?} but the model has {:?}",
                decode_page(&a, lpn),
                decode_page(&b, lpn)
            ));
        }
    }
    Ok(())
}

/// Per logical page, the contents recovery may show: the durable one and any attempted since.
#[derive(Debug, Clone)]
struct Acceptable {
    sets: Vec<Vec<Content>>,
}

impl Acceptable {
    fn new(cap: u64) -> Self {
        Acceptable {
            sets: vec![vec![Content::Zero]; cap as usize],
        }
    }
    /// A request was attempted (it may or may not have reached flash).
    fn attempt(&mut self, lpn: u64, c: Content) {
        self.sets[lpn as usize].push(c);
    }
    /// The last attempted content of `lpn` is durable: nothing older may come back.
    fn settle(&mut self, lpn: u64) {
        let s = &mut self.sets[lpn as usize];
        let last = *s.last().unwrap_or(&Content::Zero);
        s.clear();
        s.push(last);
    }
}

/// What an FTL promises to keep across a power cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Contract item 4 only: writes once flushed or written with FUA, trims once flushed.
    Flushed,
    /// As `Flushed`, and trims once they return.
    TrimsAcknowledged,
    /// Every write and trim once it returns (FTLs without a volatile write cache).
    Acknowledged,
}

/// What one power-cut run found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutOutcome {
    /// Flash operations issued before the cut (0 if the run ended before the cut point).
    pub cut_after_ops: u64,
    /// Requests completed before the cut.
    pub requests: usize,
    /// Pages whose recovered content is the last one attempted (not an older acceptable one).
    pub newest: u64,
}

/// Runs a seeded workload of `pattern` on a fresh device from `make`, cutting power during the
/// flash operation number `cut_at_op` (counted from the device's current count), then powers on,
/// recovers with `reopen`, and checks contract item 4: every durable write reads back, nothing
/// trimmed comes back (what counts as durable is the FTL's promise, `durability`), and
/// every page holds either a content written to it or zeros, never anything else. The
/// recovered device must then serve a second workload correctly.
pub fn power_cut_run(
    make: &dyn Fn() -> Result<Box<dyn BlockDevice>, FtlError>,
    reopen: &dyn Fn(Nand) -> Result<Box<dyn BlockDevice>, FtlError>,
    seed: u64,
    ops: usize,
    cut_at_op: u64,
    durability: Durability,
    pattern: Pattern,
) -> Result<CutOutcome, String> {
    let mut dev = make().map_err(|e| err("build", e))?;
    let cap = dev.capacity_pages();
    let base = dev
        .nand()
        .map(|n| n.ops_issued())
        .ok_or("the device has no flash")?;
    dev.nand_mut().ok_or("no flash")?.set_fault_plan(FaultPlan {
        cut_at_op: Some(base + cut_at_op),
        ..FaultPlan::default()
    });
    let mut acc = Acceptable::new(cap);
    let mut current: Vec<Content> = vec![Content::Zero; cap as usize];
    let mut w = Workload::with_pattern(seed, 0, pattern, true);
    w.trim_percent = 8;
    let mut buf = vec![0u8; pattern.max_request_pages() as usize * PAGE];
    let mut t: Nanos = 0;
    let mut requests = 0;
    let mut cut = false;
    for _ in 0..ops {
        let req = w.next(cap);
        let result = issue_before_cut(
            &mut dev,
            req,
            t,
            durability,
            &mut buf,
            (&mut acc, &mut current),
            cap,
        )?;
        match result {
            Ok(done) => {
                t = done;
                requests += 1;
            }
            Err(FtlError::Flash(e)) if e.is_media_error() => {
                cut = true;
                break;
            }
            Err(e) => return Err(format!("request {requests} {req:?}: {e}")),
        }
        if dev.nand().is_some_and(|n| n.power_warning()) {
            // Power-loss protection: the request in flight completed on the capacitors; the
            // controller writes back what it buffers, and all of it is durable.
            dev.power_fail(t)
                .map_err(|e| format!("the write-back on power loss failed: {e}"))?;
            for l in 0..cap {
                acc.settle(l);
            }
            cut = true;
            break;
        }
    }
    let issued = dev.nand().map(|n| n.ops_issued()).unwrap_or(0) - base;
    let mut nand = dev.into_nand().ok_or("the device gives no flash back")?;
    if !cut {
        nand.set_fault_plan(FaultPlan::default());
        nand.power_cut();
    }
    nand.power_on();
    let mut dev = reopen(nand).map_err(|e| err("recovery", e))?;
    if dev.capacity_pages() != cap {
        return Err(format!(
            "capacity changed from {cap} to {} across recovery",
            dev.capacity_pages()
        ));
    }
    let mut page = vec![0u8; PAGE];
    let mut newest = 0;
    let mut model = MemDisk::new(cap);
    let t = dev.nand().map_or(0, |n| n.now_ns());
    for lpn in 0..cap {
        dev.read(t, lpn, &mut page)
            .map_err(|e| format!("after recovery, read of lpn {lpn}: {e}"))?;
        let got = decode_page(&page, lpn);
        let set = &acc.sets[lpn as usize];
        if got == Content::Corrupt || !set.contains(&got) {
            return Err(format!(
                "after a cut at op {cut_at_op}, lpn {lpn} reads {got:?}; acceptable: {set:?}"
            ));
        }
        if Some(&got) == set.last() {
            newest += 1;
        }
        model
            .write(t, lpn, &page, false)
            .map_err(|e| e.to_string())?;
    }
    // The recovered device keeps working.
    keeps_working(&mut dev, &mut model, (seed, ops, pattern), cap, &mut buf, t)?;
    Ok(CutOutcome {
        cut_after_ops: if cut { issued } else { 0 },
        requests,
        newest,
    })
}

/// One request of `power_cut_run`'s workload before the cut: what it attempts is noted in
/// `acc` before it is issued, what it completed in `current`, and what `durability` makes
/// durable on return is settled; a read must return `current`. Returns the device's answer
/// (an error may be the cut), or the mismatch a read found. A step because it is the model of
/// contract item 4, one request at a time.
fn issue_before_cut(
    dev: &mut Box<dyn BlockDevice>,
    req: Request,
    t: Nanos,
    durability: Durability,
    buf: &mut [u8],
    (acc, current): (&mut Acceptable, &mut [Content]),
    cap: u64,
) -> Result<Result<Nanos, FtlError>, String> {
    Ok(match req {
        Request::Write {
            lpn,
            pages,
            version,
            fua,
        } => {
            fill_pages(buf, lpn, pages, version);
            for i in 0..pages {
                acc.attempt(lpn + i, Content::Version(version));
            }
            let r = dev.write(t, lpn, &buf[..pages as usize * PAGE], fua);
            if r.is_ok() {
                for i in 0..pages {
                    current[(lpn + i) as usize] = Content::Version(version);
                    if fua || durability == Durability::Acknowledged {
                        acc.settle(lpn + i);
                    }
                }
            }
            r
        }
        Request::Read { lpn, pages } => {
            let r = dev.read(t, lpn, &mut buf[..pages as usize * PAGE]);
            if r.is_ok() {
                for i in 0..pages {
                    let got =
                        decode_page(&buf[i as usize * PAGE..(i as usize + 1) * PAGE], lpn + i);
                    if got != current[(lpn + i) as usize] {
                        return Err(format!(
                            "before the cut, lpn {} reads {got:?}, expected {:?}",
                            lpn + i,
                            current[(lpn + i) as usize]
                        ));
                    }
                }
            }
            r
        }
        Request::Trim { lpn, pages } => {
            for l in lpn..lpn + pages {
                acc.attempt(l, Content::Zero);
            }
            let r = dev.trim(t, lpn, pages);
            if r.is_ok() {
                for l in lpn..lpn + pages {
                    current[l as usize] = Content::Zero;
                    if durability != Durability::Flushed {
                        acc.settle(l);
                    }
                }
            }
            r
        }
        Request::Flush => {
            let r = dev.flush(t);
            if r.is_ok() {
                for l in 0..cap {
                    acc.settle(l);
                }
            }
            r
        }
    })
}

/// After `power_cut_run`'s checks: a second seeded workload (half as long) on the recovered
/// device, mirrored on `model`, then every page compared. A step because it checks that the
/// device keeps working, apart from what it recovered.
fn keeps_working(
    dev: &mut Box<dyn BlockDevice>,
    model: &mut MemDisk,
    (seed, ops, pattern): (u64, usize, Pattern),
    cap: u64,
    buf: &mut [u8],
    t: Nanos,
) -> Result<(), String> {
    let mut w2 = Workload::with_pattern(seed ^ 0xA5A5, 0, pattern, false);
    let mut t = t;
    for op in 0..ops / 2 {
        match w2.next(cap) {
            Request::Write {
                lpn,
                pages,
                version,
                fua,
            } => {
                let n = pages as usize * PAGE;
                fill_pages(buf, lpn, pages, 1_000_000 + version);
                t = dev
                    .write(t, lpn, &buf[..n], fua)
                    .map_err(|e| format!("after recovery, op {op}: {e}"))?;
                model
                    .write(t, lpn, &buf[..n], fua)
                    .map_err(|e| e.to_string())?;
            }
            Request::Trim { lpn, pages } => {
                t = dev
                    .trim(t, lpn, pages)
                    .map_err(|e| format!("after recovery, op {op}: {e}"))?;
                model.trim(t, lpn, pages).map_err(|e| e.to_string())?;
            }
            _ => {}
        }
    }
    compare_all(dev.as_mut(), model, t)?;
    Ok(())
}

/// `cuts` cut points spread evenly over a run of `total` flash operations, the k-th moved on by
/// `k % jitter` so that the points do not all fall on the same kind of operation.
pub fn spread_cuts(total: u64, cuts: u64, jitter: u64) -> impl Iterator<Item = u64> {
    assert!(jitter > 0, "a jitter modulus of at least 1");
    (1..=cuts).map(move |k| (total * k / (cuts + 1)).max(1) + k % jitter)
}

/// `cuts` power-cut runs (`power_cut_run`) at points spread over the seeded workload's flash
/// operations (`spread_cuts`, jitter 5). Returns the workload's operation count (for callers
/// that check it is long enough to mean something) and each cut's outcome; the first failure
/// names its cut point.
#[allow(clippy::too_many_arguments)] // power_cut_run's arguments and the number of cuts
pub fn power_cuts_across(
    make: &dyn Fn() -> Result<Box<dyn BlockDevice>, FtlError>,
    reopen: &dyn Fn(Nand) -> Result<Box<dyn BlockDevice>, FtlError>,
    seed: u64,
    ops: usize,
    cuts: u64,
    durability: Durability,
    pattern: Pattern,
) -> Result<(u64, Vec<CutOutcome>), String> {
    let total = count_ops(make, seed, ops, pattern)?;
    let outcomes = spread_cuts(total, cuts, 5)
        .map(|at| {
            power_cut_run(make, reopen, seed, ops, at, durability, pattern)
                .map_err(|e| format!("seed {seed}, cut at op {at} of {total}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((total, outcomes))
}

/// A count from environment variable `var` (longer power-cut runs by hand), else `default`.
pub fn count_from_env(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Flash operations a seeded power-cut workload issues without a cut (to spread cut points).
pub fn count_ops(
    make: &dyn Fn() -> Result<Box<dyn BlockDevice>, FtlError>,
    seed: u64,
    ops: usize,
    pattern: Pattern,
) -> Result<u64, String> {
    let mut dev = make().map_err(|e| err("build", e))?;
    let cap = dev.capacity_pages();
    let base = dev.nand().map(|n| n.ops_issued()).ok_or("no flash")?;
    let mut w = Workload::with_pattern(seed, 0, pattern, true);
    w.trim_percent = 8;
    let mut buf = vec![0u8; pattern.max_request_pages() as usize * PAGE];
    let mut t = 0;
    for _ in 0..ops {
        t = match w.next(cap) {
            Request::Write {
                lpn,
                pages,
                version,
                fua,
            } => {
                fill_pages(&mut buf, lpn, pages, version);
                dev.write(t, lpn, &buf[..pages as usize * PAGE], fua)
            }
            Request::Read { lpn, pages } => dev.read(t, lpn, &mut buf[..pages as usize * PAGE]),
            Request::Trim { lpn, pages } => dev.trim(t, lpn, pages),
            Request::Flush => dev.flush(t),
        }
        .map_err(|e| e.to_string())?;
    }
    Ok(dev.nand().map(|n| n.ops_issued()).unwrap_or(0) - base)
}
