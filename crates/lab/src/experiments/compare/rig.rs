//! What every `compare` experiment shares, below the transactional comparison (`compare.rs`)
//! and TPC-H's (`tpch.rs`): the flags, the rows (stores) and their device, the database loaded
//! once and measured to size that device (`size_rig`), the counters read around a window, and
//! the warm-up rule's constants.

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::bail;
use ftl::{FtlOptions, MemDisk};
use kits::LoadMethod;
use nand::{DeviceConfig, Nand};
use serde::{Deserialize, Serialize};
use storage::splitlog::SplitLogStore;
use storage::{BlockPageStore, Engine, EngineConfig, NativeConfig, NativeStore, PageStore};

use crate::cpu::CpuProfile;

use crate::stores::{place_log, LogRegion};
use crate::workload::{Loaded, Workload};

use crate::device::DeviceSpec;

/// A comparison of stores under one workload (NoFTL Fig. 3): what the CLI's `compare` flags
/// say, as plain data. Meanings and defaults: `noftl compare --help`.
#[derive(Debug, Clone)]
pub struct Spec {
    /// tpcb | tatp | tpcc | tpch; with `paper` also all (TPC-B, then TPC-C).
    pub workload: String,
    /// Branches, subscribers or warehouses (None: the workload's default).
    pub scale: Option<u32>,
    /// TPC-H's scale factor.
    pub sf: Option<f64>,
    /// Measured windows per store.
    pub repeat: u32,
    /// Virtual length of a window (None: 10s; 30s with `paper`).
    pub duration: Option<String>,
    /// auto | none | a virtual time.
    pub warmup: String,
    pub terminals: u32,
    /// Over-provisioning on top of the database, as a spare factor.
    pub op: f64,
    /// The native store's log in a region of its own.
    pub log_region: Option<LogRegion>,
    /// The buffer pool: a share of the database's pages, or a size.
    pub buffer: BufferSize,
    /// TPC-H: pages each scan reads ahead (None: two per die, every die busy; 0: a page is read
    /// when the scan reaches it, as Shore-MT's buffer manager reads on fix).
    pub read_ahead_pages: Option<usize>,
    /// The DB page size in bytes: 4096 (default), 8192 (Shore-MT's, which NoFTL Fig. 3 ran) or
    /// 16384; a DB page takes that many bytes / 4 KiB logical pages of the flash.
    pub page_bytes: usize,
    /// The flash volume's size (the logical space the stores export), when given; else the
    /// database's size plus growth. NoFTL Fig. 3 ran 1, 5 and 10 GB volumes, whatever the
    /// database used of them.
    pub flash_bytes: Option<u64>,
    /// Host CPU profile: measured, paper-noftl, none or a TOML file (crate::cpu).
    pub cpu: String,
    /// Where the log lives: on the flash under test, or on a separate device (the NoFTL
    /// paper's set-up: Shore-MT's log directory was not on the emulated flash).
    pub log_device: LogDevice,
    pub device: DeviceSpec,
    pub accounts_per_branch: u32,
    /// TPC-C's REDUCED population: items and customers per district.
    pub tpcc_reduced: Option<Vec<u32>>,
    pub seed: u64,
    /// The rows (stores) to run (None: the default rows, or the paper's with `paper`).
    pub stores: Option<Vec<String>>,
    /// Rows run at once.
    pub jobs: usize,
    /// RAM this comparison may take for its devices and its loaded database beside other work
    /// of the same process (`reproduce` runs several at once); None: what is available.
    pub memory_cap_bytes: Option<u64>,
    /// The NoFTL paper's scales, one after the other.
    pub paper: bool,
    pub home_warehouse: Option<String>,
    /// Fail when a row's measured windows break a physical bound or it did not reach steady
    /// state.
    pub strict: bool,
    pub load: Option<LoadMethod>,
    /// A result directory (with `paper`, one per scale inside it).
    pub results: Option<PathBuf>,
    /// The length of a samples.csv row, e.g. 1s.
    pub sample_window: String,
    /// Also raw.csv, one row per transaction.
    pub raw: bool,
}

impl Default for Spec {
    /// The CLI's defaults (`noftl compare` without flags: TPC-B scale 12, three 10 s windows
    /// per store after an auto warm-up, the five default stores); a test in the CLI holds the
    /// two to each other.
    fn default() -> Self {
        Spec {
            workload: "tpcb".into(),
            scale: None,
            sf: None,
            repeat: 3,
            duration: None,
            warmup: "auto".into(),
            terminals: 1,
            op: 0.0275,
            log_region: None,
            buffer: BufferSize::Share(0.02),
            read_ahead_pages: None,
            page_bytes: 4096,
            flash_bytes: None,
            cpu: "measured".into(),
            log_device: LogDevice::Flash,
            device: DeviceSpec::default(),
            accounts_per_branch: 100_000,
            tpcc_reduced: None,
            seed: 1,
            stores: None,
            jobs: 2,
            memory_cap_bytes: None,
            paper: false,
            home_warehouse: None,
            strict: false,
            load: None,
            results: None,
            sample_window: "1s".into(),
            raw: false,
        }
    }
}

impl Spec {
    /// A comparison small enough to try in seconds (a notebook's or a test's): scale 1 with
    /// 5,000 accounts per branch (TPC-B; TATP 2,000 subscribers, TPC-C a REDUCED population of
    /// 1,000 items and 30 customers per district), two windows of 300 ms virtual per store.
    /// Its numbers show the method, not the paper's: the database is tiny and the windows hold
    /// a few hundred transactions. Fields set afterwards win.
    pub fn quick(workload: &str) -> Spec {
        Spec {
            workload: workload.into(),
            scale: Some(if workload == "tatp" { 2_000 } else { 1 }),
            repeat: 2,
            duration: Some("300ms".into()),
            accounts_per_branch: 5_000,
            tpcc_reduced: (workload == "tpcc").then(|| vec![1_000, 30]),
            ..Spec::default()
        }
    }
}

/// `--buffer`: a share of the database's pages (at least 256 frames) or a size in bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BufferSize {
    Share(f64),
    Bytes(u64),
}

impl std::str::FromStr for BufferSize {
    type Err = String;
    /// `2%` is a share of the database's pages, `10MiB` a size.
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim_end().ends_with('%') {
            return crate::units::parse_percent(s).map(BufferSize::Share);
        }
        match crate::units::parse_size(s) {
            Ok(b) if b >= 4096 => Ok(BufferSize::Bytes(b)),
            Ok(b) => Err(format!("{b} bytes is less than one 4 KiB frame")),
            Err(e) => Err(format!("{e} (or a share of the database such as 2%)")),
        }
    }
}

/// Where the engine's log lives (`--log-device`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogDevice {
    /// On the flash under test, beside the DB pages.
    #[default]
    Flash,
    /// On another device (a RAM disk here: its force time belongs to the CPU profile's commit
    /// cost), so the flash sees page reads and write-backs only (`storage::splitlog`).
    Separate,
}

impl std::str::FromStr for LogDevice {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s {
            "flash" => Ok(LogDevice::Flash),
            "separate" => Ok(LogDevice::Separate),
            _ => bail!("--log-device takes flash or separate, not '{s}'"),
        }
    }
}

impl std::fmt::Display for LogDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LogDevice::Flash => "flash",
            LogDevice::Separate => "separate",
        })
    }
}

/// The flash's log blocks when the log lives on a separate device: the fewest a store takes
/// (`BlockLayout`); the engine never writes them there.
const SEPARATE_LOG_FLASH_BLOCKS: u64 = 16;

/// The stores compared, in the NoFTL paper's column order, then the page FTL, then the DFTL
/// the paper measured (`dftl-orig`, docs/ftl.md): name, FTL kind (None: native), fraction of
/// the mappings cached.
pub const ROWS: [(&str, Option<&str>, f64); 8] = [
    ("native", None, 0.0),
    ("dftl-2%", Some("dftl"), 0.02),
    ("dftl-15%", Some("dftl"), 0.15),
    ("dftl-35%", Some("dftl"), 0.35),
    ("page", Some("page"), 0.02),
    ("dftl-orig-2%", Some("dftl-orig"), 0.02),
    ("dftl-orig-15%", Some("dftl-orig"), 0.15),
    ("dftl-orig-35%", Some("dftl-orig"), 0.35),
];

/// The stores of a comparison when --stores is not given: the paper's five columns, and with
/// --paper also the DFTL the paper measured.
pub const DEFAULT_STORES: &str = "native,dftl-2%,dftl-15%,dftl-35%,page";
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Device {
    pub preset: String,
    pub blocks: u32,
    pub capacity_bytes: u64,
    pub db_pages: u64,
    /// DB page size (--page-size).
    pub page_bytes: usize,
    pub log_blocks: u64,
    pub spare_factor: f64,
    pub buffer_frames: usize,
}

impl Device {
    /// The device and layout of `rig`, as every result names them.
    pub fn of(rig: &Rig) -> Device {
        let g = &rig.nand.geometry;
        Device {
            preset: rig.nand.name.clone(),
            blocks: g.blocks(),
            capacity_bytes: g.capacity_bytes(),
            db_pages: rig.db_pages,
            page_bytes: rig.page_bytes,
            log_blocks: rig.log_blocks,
            spare_factor: r4(rig.spare),
            buffer_frames: rig.frames,
        }
    }
}

/// The device and layout every row shares.
#[derive(Clone, Debug)]
pub struct Rig {
    pub nand: DeviceConfig,
    pub log_region: Option<LogRegion>,
    pub spare: f64,
    /// The engine's log blocks (on the flash, or on the separate log device).
    pub log_blocks: u64,
    pub log_device: LogDevice,
    pub cpu: CpuProfile,
    /// DB page size (4 KiB logical pages per DB page: `page_bytes / 4096`).
    pub page_bytes: usize,
    pub frames: usize,
    pub db_pages: u64,
    pub warmup: Warmup,
}

/// What runs before the measured run (module doc: warm-up).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Warmup {
    None,
    /// Until the store wrote as many pages for the engine as the device has.
    Auto,
    VirtualNs(u64),
    /// As `Auto`, with most of the writes done by replaying the workload's own page reads and
    /// write-backs instead of running it (compare/precondition.rs).
    Precondition,
}

/// The longest auto warm-up, in transactions per device page (4 KiB unit). It bounds the work,
/// not the virtual time: a store that writes at least one page for the engine per transaction
/// (TPC-B, TPC-C) reaches `WARMUP_DEVICE_WRITES` first; a read-mostly mix that writes fewer is
/// measured as it is then, and its `warmup_device_writes` shows it. A bound of three virtual
/// hours instead cut the DFTL the paper measured short at TPC-B 500 after 0.12 device writes:
/// its host scans (80 ms per transaction at 35%) make its virtual time long and its work small
/// (135,000 transactions in those three hours, 5 s of wall time).
pub const WARMUP_MAX_TXNS_PER_DEVICE_PAGE: u64 = WARMUP_DEVICE_WRITES;
/// A backstop in virtual time (100 hours) for a store that ends no transaction at all.
pub const WARMUP_MAX_NS: u64 = 100 * 3_600_000_000_000;
/// Auto warm-up checks the programs after each slice of this virtual length.
pub const WARMUP_SLICE_NS: u64 = 1_000_000_000;
/// Auto warm-up writes the device over this many times (host writes: DB pages, log and
/// metadata, not GC copies or translation pages). The same amount on every row: host writes
/// per transaction are the engine's, nearly the same on every store, so every row warms up with
/// about as many transactions and its database grows about as much (TPC-B's history, TPC-C's
/// orders). Once is not enough: the copied database lies packed in its blocks, and greedy GC's
/// copies per write keep changing for another device write while the blocks mix (TPC-B scale
/// 200, DFTL 2%: 215, 173 and 123 tx/s in three consecutive 30 s windows after one write over).
/// A criterion on GC's settling instead made the rows' warm-ups, and so their databases' sizes,
/// differ (TPC-C scale 5: DFTL 15% warmed up for four device writes, DFTL 2% for 1.8).
pub const WARMUP_DEVICE_WRITES: u64 = 2;
/// Warm-up inputs differ from every measured run's (seed + repeat) and are the same on every row.
pub const WARMUP_SEED: u64 = 0x5741_524D_5550;

/// Row indices of `--stores`, in `ROWS` order; native must be among them.
pub fn parse_stores(names: &[String]) -> anyhow::Result<Vec<usize>> {
    let mut rows = Vec::new();
    for n in names {
        match ROWS.iter().position(|(r, _, _)| r == n) {
            Some(i) if !rows.contains(&i) => rows.push(i),
            Some(_) => bail!("--stores names '{n}' twice"),
            None => bail!(
                "--stores: no store '{n}' (the stores are {})",
                ROWS.map(|r| r.0).join(", ")
            ),
        }
    }
    if !rows.contains(&0) {
        bail!("--stores must include native: the slowdowns are against it");
    }
    rows.sort_unstable();
    Ok(rows)
}

pub fn parse_warmup(s: &str) -> anyhow::Result<Warmup> {
    Ok(match s {
        "auto" => Warmup::Auto,
        "precondition" => Warmup::Precondition,
        "none" | "0" | "0s" => Warmup::None,
        d => Warmup::VirtualNs(crate::units::parse_duration_ns(d).map_err(|e| {
            anyhow::anyhow!(
                "--warmup takes auto, precondition, none or a virtual time like 30s: {e}"
            )
        })?),
    })
}

/// Counters that the per-transaction figures are differences of.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub reads: u64,
    pub programs: u64,
    pub erases: u64,
    pub joules: f64,
    pub gc: u64,
    pub tr: u64,
    pub tw: u64,
    pub ctrl_us: f64,
    /// `dftl-orig`'s scanned cache entries.
    pub scanned: u64,
    /// Of those, the entries of scans beyond the host's L3.
    pub scanned_beyond_l3: u64,
    /// 4 KiB units per flash page: GC moves units, a program writes a page of them.
    pub units_per_page: u64,
}

pub fn counters(store: &dyn PageStore) -> Counters {
    let mut c = Counters::default();
    if let Some(n) = store.nand() {
        let r = n.report();
        c.reads = r.flash.reads;
        c.programs = r.flash.programs + r.flash.partial_programs;
        c.erases = r.flash.erases;
        c.joules = r.energy.total_joules;
        c.units_per_page = units_per_page(n.geometry());
    }
    if let Some(d) = store.device_report() {
        c.gc = d.gc.migrations + d.gc.wl_migrations;
        c.tr = d.translation_reads;
        c.tw = d.translation_writes;
        c.ctrl_us = d.controller_busy_us;
        c.scanned = d.cache_scanned_entries;
        c.scanned_beyond_l3 = d.cache_scanned_entries_beyond_l3;
    }
    c
}

pub fn build_store(rig: &Rig, row: usize) -> anyhow::Result<Box<dyn PageStore>> {
    let nand = Nand::new(rig.nand.clone())?;
    let (_, kind, cache) = ROWS[row];
    let flash_log_blocks = match rig.log_device {
        LogDevice::Flash => rig.log_blocks,
        LogDevice::Separate => SEPARATE_LOG_FLASH_BLOCKS,
    };
    let store: Box<dyn PageStore> = match kind {
        None => {
            let mut s = NativeStore::format(
                nand,
                NativeConfig {
                    page_bytes: rig.page_bytes,
                    log_blocks: Some(flash_log_blocks),
                    spare_factor: rig.spare,
                    seed: rig.nand.seed,
                    ..NativeConfig::default()
                },
            )?;
            place_log(&mut s, rig.log_region.as_ref())?;
            Box::new(s)
        }
        Some(kind) => {
            let opts = FtlOptions {
                cache_fraction: cache,
                spare_factor: rig.spare,
                seed: rig.nand.seed,
                dftl_orig_scan_overlap: rig.cpu.host.dftl_orig_scan_overlap,
                ..FtlOptions::default()
            };
            Box::new(BlockPageStore::new(
                ftl::build(kind, nand, &opts)?,
                rig.page_bytes,
                Some(flash_log_blocks),
            )?)
        }
    };
    Ok(match rig.log_device {
        LogDevice::Flash => store,
        LogDevice::Separate => {
            // Room for the log and the fewest DB pages a block store takes (never used).
            let k = (rig.page_bytes / 4096) as u64;
            let log = BlockPageStore::new(
                Box::new(MemDisk::new(2 + rig.log_blocks + 16 * k)),
                rig.page_bytes,
                Some(rig.log_blocks),
            )?;
            Box::new(SplitLogStore::new(store, Box::new(log))?)
        }
    })
}

/// The database, loaded once: measured to size the device, then copied onto every row's store
/// (`Engine::copy_to`) instead of being loaded again row by row. It lives in an unlinked file
/// where the temporary directory is on a disk with room, in RAM otherwise (`crate::scratch`).
pub struct Probe {
    pub engine: Mutex<Engine>,
    /// RAM the loaded pages take in the process (0: they are page cache of a file).
    pub ram_bytes: u64,
    pub loaded: Loaded,
    /// The object of every allocated page of the loaded database (`--warmup precondition`
    /// only: read once, before any copy, so that every row's copy starts from the same log).
    pub objects: Option<Vec<Option<storage::ObjectId>>>,
}

impl Probe {
    /// The loaded database copied page by page onto `row`'s store of `rig`.
    pub fn copy_onto(&self, rig: &Rig, row: usize) -> anyhow::Result<Engine> {
        let store = build_store(rig, row)?;
        Ok(self
            .engine
            .lock()
            .map_err(|_| anyhow::anyhow!("a worker panicked while copying the database"))?
            .copy_to(
                store,
                EngineConfig {
                    buffer_frames: rig.frames,
                    cpu: rig.cpu.engine,
                    ..EngineConfig::default()
                },
            )?)
    }
}

/// Logical 4 KiB pages of the device the database is loaded on (64 GiB; it takes what it takes).
const PROBE_PAGES: u64 = 1 << 24;

/// The device `w`'s database is loaded on once: a sparse unlinked file (`crate::scratch`), or a
/// RAM disk where no disk has room for the kit's estimate; whether it is the RAM disk, and where
/// it is in words.
fn probe_device(w: &dyn Workload) -> (Box<dyn ftl::BlockDevice>, bool, String) {
    let ram = |said: String| -> (Box<dyn ftl::BlockDevice>, bool, String) {
        (Box::new(MemDisk::new(PROBE_PAGES)), true, said)
    };
    match crate::scratch::image(probe_estimate_bytes(w)) {
        // Sized sparse; a file system that cannot hold a file of that size leaves it in RAM.
        crate::scratch::Image::File(file, dir) => {
            match storage::filedev::FileDevice::from_file(file, PROBE_PAGES) {
                Ok(d) => (
                    Box::new(d),
                    false,
                    crate::scratch::Image::describe_file(&dir),
                ),
                Err(e) => ram(format!(
                    "in RAM (a {} GiB sparse file in {} was refused: {e})",
                    (PROBE_PAGES * 4096) >> 30,
                    dir.display()
                )),
            }
        }
        image @ crate::scratch::Image::Ram(_) => ram(image.describe()),
    }
}

/// The loaded database's bytes, from the kit's estimate and an eighth for its growth.
pub fn probe_estimate_bytes(w: &dyn Workload) -> u64 {
    let est = w.db_pages_estimate();
    (est + est / 8) * 4096
}

/// 4 KiB units per flash page of `g` (1 on 4 KiB pages).
pub fn units_per_page(g: &nand::Geometry) -> u64 {
    u64::from(ftl::space::units_per_page(g))
}

/// CPU seconds this thread has used: what a phase costs whatever else the shared machine runs
/// (its wall time is an upper bound when other work competes for the cores).
pub fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a pointer to a live local.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Loads the database on a RAM disk, measures it and sizes the device for it.
pub fn size_rig(args: &Spec, w: &dyn Workload) -> anyhow::Result<(Rig, Probe)> {
    let cfg = args.device.load()?;
    // Checked before the load, the expensive part.
    let cpu_profile = CpuProfile::parse(&args.cpu)?;
    if ![4096, 8192, 16384].contains(&args.page_bytes) {
        bail!("--page-size {} is not 4, 8 or 16 KiB", args.page_bytes);
    }
    // 4 KiB logical pages per DB page.
    let k = (args.page_bytes / 4096) as u64;
    let (image, in_ram, image_at) = probe_device(w);
    let probe = BlockPageStore::new(image, args.page_bytes, Some(1024))?;
    let mut e = Engine::create(
        Box::new(probe),
        EngineConfig {
            buffer_frames: 4096,
            ..EngineConfig::default()
        },
    )?;
    let bar = crate::progress::phase("loading", w.rows_estimate(), "rows (estimated)");
    let wall = std::time::Instant::now();
    let cpu = thread_cpu_s();
    let method = w.load_method(args.load)?;
    let loaded_handles = w.load(&mut e, method, &|n| bar.set_position(n))?;
    bar.finish_and_clear();
    eprintln!(
        "loaded {} once in {:.1} s wall, {:.1} s CPU ({method}, {image_at}; every store gets a page-by-page copy of it)",
        w.label(),
        wall.elapsed().as_secs_f64(),
        thread_cpu_s() - cpu
    );
    let loaded = e.stats().pages_allocated + 2;
    let grown = loaded + loaded / 10 + 256;
    let log_blocks = (grown / 8).clamp(256, 16384);
    let flash_log_blocks = match args.log_device {
        LogDevice::Flash => log_blocks,
        LogDevice::Separate => SEPARATE_LOG_FLASH_BLOCKS,
    };
    // The logical space: the database and its growth, or the volume asked for (in which the
    // database takes what it takes; the rest is never written, as on the paper's volumes).
    let (db_pages, logical) = match args.flash_bytes {
        None => (grown, 2 + flash_log_blocks + grown * k),
        Some(bytes) => {
            let logical = bytes / 4096;
            if logical < 2 + flash_log_blocks + grown * k {
                bail!(
                    "--flash {:.1} MiB is too small for the database: it takes {:.1} MiB with its growth and the log",
                    bytes as f64 / (1 << 20) as f64,
                    ((2 + flash_log_blocks + grown * k) * 4096) as f64 / (1 << 20) as f64
                );
            }
            ((logical - 2 - flash_log_blocks) / k, logical)
        }
    };
    let g = &cfg.geometry;
    // In 4 KiB units (the stores map 4 KiB pages inside larger flash pages).
    let ppb = u64::from(g.pages_per_block) * units_per_page(g);
    let dies = u64::from(g.dies());
    let planes = u64::from(g.channels * g.chips_per_channel * g.dies_per_chip * g.planes_per_die);
    // Physical: the logical space over (1 - op), plus what every store needs to work: the GC
    // reserve (dies + 2 blocks) and the native store's open blocks (5 striped streams on every
    // die, 2 metadata streams, 2 blocks of GC slack), the largest of the stores' needs.
    let data_blocks = ((logical as f64 / (1.0 - args.op)) / ppb as f64).ceil() as u64;
    let fixed_blocks = (dies + 2) + (5 * dies + 2 + 2);
    // Factory-bad blocks (each block bad with the preset's ratio, drawn per device seed): the
    // expected number plus three standard deviations and one more, so that the stores fit.
    let ratio = cfg.reliability.factory_bad_block_ratio;
    let n = (data_blocks + fixed_blocks) as f64 / (1.0 - ratio);
    let bad_blocks = if ratio > 0.0 {
        (n * ratio + 3.0 * (n * ratio * (1.0 - ratio)).sqrt() + 1.0).ceil() as u64
    } else {
        0
    };
    let blocks_per_plane = (data_blocks + fixed_blocks + bad_blocks).div_ceil(planes);
    let mut sized = args.device.clone();
    sized
        .set
        .push(format!("geometry.blocks_per_plane={blocks_per_plane}"));
    let cfg = sized.load()?;
    // Every store exports exactly the logical space: U = (1 - s) T, T = (blocks - reserve) ppb.
    let t = (blocks_per_plane * planes - bad_blocks - (dies + 2)) * ppb;
    let spare = 1.0 - logical as f64 / t as f64;
    let warmup = parse_warmup(&args.warmup)?;
    let objects = match warmup {
        Warmup::Precondition => Some(e.page_objects()?),
        _ => None,
    };
    let frames = match args.buffer {
        BufferSize::Share(f) if !(f > 0.0 && f <= 1.0) => {
            bail!("--buffer {:.1}% is not in (0%, 100%]", f * 100.0)
        }
        BufferSize::Share(f) => ((db_pages as f64 * f) as usize).max(256),
        BufferSize::Bytes(b) => (b / args.page_bytes as u64).max(256) as usize,
    };
    Ok((
        Rig {
            nand: cfg,
            log_region: args.log_region.clone(),
            spare,
            log_blocks,
            log_device: args.log_device,
            cpu: cpu_profile,
            page_bytes: args.page_bytes,
            frames,
            db_pages,
            warmup,
        },
        Probe {
            engine: Mutex::new(e),
            ram_bytes: if in_ram {
                loaded * args.page_bytes as u64
            } else {
                0
            },
            loaded: loaded_handles,
            objects,
        },
    ))
}

pub fn mean_stdev(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (m, var.sqrt())
}

/// Rounds to 4 significant decimals so that the JSON does not carry float noise.
pub fn r4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}
