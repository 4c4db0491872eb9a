//! The IAA paper's free-space sweep (Miyaji, Sun and Takeuchi, "IAA" Figs. 11 and 12;
//! docs/iaa.md), run by `noftl iaa compare`: per device free-space level and scheme
//! (conventional, IAA, U2DI, IAA+U2DI), the random Insert/Delete/Update workload of `kits::iaa`
//! on the page FTL or the native (NoFTL) store, in virtual time.
//!
//! Each run: a fresh device; the table loaded at the size that leaves the asked free space of
//! the store's logical capacity (table, index, log and master record count as used); a warm-up
//! that writes `warmup` times the device's capacity, then rounds of `round` until steady
//! (`crate::steady`, at most `max_rounds`); then the measured window (`duration` of virtual
//! time, the same scheduler, measurement window, snapshots and `consistency` object as `noftl
//! bench`). Runs are independent and spread over
//! `jobs` threads; each is a function of its parameters and the seed, so the output does not
//! depend on the thread count.

use anyhow::{bail, Context};
use ftl::FtlOptions;
use hdrhistogram::Histogram;
use kits::iaa::{IaaConfig, IaaTerminal, Scheme};
use nand::Nand;
use serde::Serialize;
use storage::measure::Consistency;
use storage::native::{NativeConfig, NativeStore};
use storage::sched::{run_virtual, VirtualOptions};
use storage::{BlockPageStore, Engine, EngineConfig, PageStore};

use crate::device::DeviceSpec;
use crate::measure::{consistency, per_txn, snapshot};
use crate::results::{Plan, Trace};
use crate::runner::run_virtual_marked;
use crate::units::parse_duration_ns;

/// Which storage engine runs the queries: the repo's engine (`kits::iaa` on `storage::Engine`:
/// a WAL, a B+-tree index, a buffer pool) or the paper's (`kits::iaa_paper`: rows
/// read-modify-written at their LPA, free deletes, no log, no index, no buffer pool;
/// `experiments::iaa_paper`, whose `run` is the entry point for both models).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    Engine,
    Paper,
}

impl Model {
    pub fn name(self) -> &'static str {
        match self {
            Model::Engine => "engine",
            Model::Paper => "paper",
        }
    }
}

/// A `--model` that names no model.
#[derive(Debug, thiserror::Error)]
#[error("--model is paper or engine, not '{0}'")]
pub struct UnknownModel(pub String);

impl std::str::FromStr for Model {
    type Err = UnknownModel;
    fn from_str(s: &str) -> Result<Model, UnknownModel> {
        match s.trim().to_ascii_lowercase().as_str() {
            "engine" => Ok(Model::Engine),
            "paper" => Ok(Model::Paper),
            _ => Err(UnknownModel(s.to_string())),
        }
    }
}

/// The sweep, as `noftl iaa compare`'s flags give it.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The storage engine that runs the queries ([`Model`]).
    pub model: Model,
    /// Device free-space levels, as fractions (0.1 = 10%) of the store's logical capacity
    /// holding no live data; each between 0.02 and 0.9.
    pub free: Vec<f64>,
    /// Schemes by name: conventional, iaa, u2di, iaa+u2di (duplicates run once).
    pub schemes: Vec<String>,
    /// The store: page (the page-mapped FTL behind the block interface) | dftl | native (NoFTL).
    pub storage: String,
    /// The device. Without an override of blocks_per_plane the sweep uses 256 blocks per plane
    /// (64 MiB on noftl13), so that the default sweep runs in about two minutes ([`device`]).
    pub device: DeviceSpec,
    /// Over-provisioning of the FTL (and the native store) as a spare factor (0.07 = 7%).
    pub op: f64,
    /// Bytes per row as stored.
    pub row_bytes: usize,
    /// Relative probabilities of Insert, Delete and Update (three weights).
    pub mix: Vec<u32>,
    /// Share (fraction) of the table's pages' record space the rows fill (the rest are holes
    /// that IAA and next fit reuse); between 0.05 and 0.98.
    pub density: f64,
    /// Terminals: concurrent streams of Insert/Delete/Update transactions (1 to 256).
    pub terminals: u32,
    /// Measured window in virtual time, as a duration text (e.g. "2s", "300ms";
    /// `crate::units::parse_duration_ns`).
    pub duration: String,
    /// Warm-up writes, in multiples of the device's logical capacity (0 to 20).
    pub warmup: f64,
    /// One round of the steady-state rule after the warm-up (`crate::steady`), virtual time.
    pub round: String,
    /// Rounds before the measured window, at most (0: none, and every row says it was not
    /// checked for steady state).
    pub max_rounds: u32,
    /// Buffer pool frames (None: as `noftl bench`, 2% of the table's pages, at least 256).
    pub buffer_pages: Option<usize>,
    /// DB page size in bytes (4096; 16384 needs 16 KiB flash pages for IAA to name DB pages).
    pub page_size: usize,
    /// GC victims the engine has the flash commit to at first (it commits more, up to
    /// `max_victims`, when every hinted page had its record).
    pub victims: u32,
    /// The most GC victims the engine has the flash commit to.
    pub max_victims: u32,
    /// Native store: B-tree and space-map pages in streams of their own, so that the victims
    /// Insert Address Assist is told about hold heap pages only (`NativeConfig::index_streams`).
    pub index_streams: bool,
    /// Seed of the table's rows and of the terminals' transaction inputs.
    pub seed: u64,
    /// Runs in parallel (threads).
    pub jobs: usize,
    /// Verify the table, its index and the engine's structures after each run.
    pub check: bool,
}

impl Default for Spec {
    /// The defaults of `noftl iaa compare`'s flags (the engine model's).
    fn default() -> Self {
        Spec {
            model: Model::Engine,
            free: vec![0.1, 0.2, 0.3, 0.4, 0.5],
            schemes: ["conventional", "iaa", "u2di", "iaa+u2di"]
                .map(String::from)
                .to_vec(),
            storage: "page".into(),
            device: DeviceSpec::default(),
            op: 0.07,
            row_bytes: 256,
            mix: vec![1, 1, 1],
            density: 0.85,
            terminals: 4,
            duration: "2s".into(),
            warmup: 1.0,
            // As `noftl bench`: rounds cost engine time; `--max-rounds 25` asks for them.
            round: "1s".into(),
            max_rounds: 0,
            buffer_pages: None,
            page_size: 4096,
            victims: ftl::iaa::DEFAULT_COMMITTED_VICTIMS,
            max_victims: storage::iaa::MAX_COMMITTED_VICTIMS,
            index_streams: false,
            seed: 1,
            jobs: 2,
            check: false,
        }
    }
}

impl Spec {
    /// The defaults of `noftl iaa compare --model M` (flags not given take these).
    ///
    /// The paper model's, each from the paper's stated set-up or the reason given: the device
    /// `mlc16k` (the paper's "16kB" pages; its emulator, IAA ref. [2], is of MLC NAND SSDs;
    /// chip timing and energy from the preset's datasheet-class figures), shrunk in `device`;
    /// DB pages of the flash page (the paper's LPA is the LA over the NAND page size); one
    /// stream of queries (the paper's SE issues one at a time); one committed victim at first
    /// ("the target next block to be erased"), and as many more as the inserts need (when the
    /// committed victims hold no page with room, the next block GC will erase with valid pages
    /// is the next block to be erased; a cap would send inserts to the append point, which
    /// fills pages up, the situation IAA exists to avoid, IAA Fig. 10(a)); a 20 s window
    /// (several hundred GC erases at 20% free) after a warm-up of two device capacities (the
    /// load writes every page once in order; GC reaches its steady victims only after the
    /// random writes have passed the device) and rounds of 5 s until steady.
    pub fn for_model(model: Model) -> Spec {
        match model {
            Model::Engine => Spec::default(),
            Model::Paper => Spec {
                model,
                device: DeviceSpec {
                    preset: "mlc16k".into(),
                    ..DeviceSpec::default()
                },
                terminals: 1,
                duration: "20s".into(),
                warmup: 2.0,
                // A quarter of the window: dozens of GC erases per round at 20% free.
                round: "5s".into(),
                max_rounds: crate::steady::MAX_ROUNDS,
                page_size: 16384,
                victims: 1,
                max_victims: u32::MAX,
                ..Spec::default()
            },
        }
    }
}

/// One run's figures (the JSON row).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub model: &'static str,
    pub free_space: f64,
    pub scheme: &'static str,
    pub storage: String,
    pub queries: u64,
    pub virtual_seconds: f64,
    pub throughput_qps: f64,
    pub energy_joules_per_query: f64,
    pub gc_copies_per_host_write: f64,
    pub erases_per_host_gib: f64,
    /// Block erases (W/E cycles consumed) per 1,000 queries.
    pub erases_per_kquery: f64,
    pub host_writes_per_query: f64,
    pub flash_programs_per_query: f64,
    /// Programs of padding (MLC/TLC: the rest of a word line a durability point closes).
    pub flash_pad_programs_per_query: f64,
    /// GC page copies (4 KiB units) per query.
    pub gc_copies_per_query: f64,
    pub log_forces_per_query: f64,
    /// GC page copies (4 KiB units) per block erase, and the units a block holds.
    pub gc_copies_per_erase: f64,
    pub units_per_block: u64,
    /// The share f of host writes (4 KiB units) aimed at a committed victim: pages written
    /// because they took a record by IAA (docs/iaa.md, "The aimed share").
    pub aimed_share: f64,
    /// The bound's copies per erase, B max(0, (u - f) / (1 - f)), with u the conventional
    /// run's victim occupancy at the same free space (docs/iaa.md).
    pub bound_copies_per_erase: Option<f64>,
    pub relative: Relative,
    pub rows: u64,
    pub buffer_frames: usize,
    pub iaa: storage::iaa::IaaStats,
    /// The paper model's own counters (`kits::iaa_paper::PaperStats`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper: Option<kits::iaa_paper::PaperStats>,
    pub consistency: Consistency,
    /// The steady-state rule (`crate::steady`): rounds after the warm-up, or (with
    /// `max_rounds` 0) none, and then it says so.
    pub steady_state: crate::steady::SteadyState,
    pub check: &'static str,
    pub check_problems: Vec<String>,
    /// With a result directory: the measured window's marks and queries.
    #[serde(skip)]
    pub trace: Option<Trace>,
}

/// Ratios to the conventional scheme at the same free space (1 for conventional itself).
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Relative {
    pub throughput: Option<f64>,
    pub energy: Option<f64>,
    pub erases: Option<f64>,
}

/// The sweep's result (the JSON `noftl iaa compare` writes).
#[derive(Debug, Serialize)]
pub struct Sweep {
    pub workload: &'static str,
    pub model: Model,
    pub storage: String,
    pub preset: String,
    pub set: Vec<String>,
    pub row_bytes: usize,
    pub mix: Vec<u32>,
    pub terminals: u32,
    pub duration: String,
    pub warmup: f64,
    pub seed: u64,
    pub rows: Vec<Row>,
}

impl Sweep {
    /// Whether a run's check (`Spec::check`) failed.
    pub fn check_failed(&self) -> bool {
        self.rows.iter().any(|r| r.check == "failed")
    }
}

/// The device of a run: the spec's, 256 blocks per plane unless overridden; the paper model
/// 64 blocks per plane of 32 pages unless overridden (`mlc16k` shrunk from 1024 x 512 to
/// 512 MiB, 1,024 blocks: the size the earlier MLC runs of PERFORMANCE section 10 used, so
/// that a sweep keeps its pages in memory on two jobs).
pub fn device(spec: &Spec) -> DeviceSpec {
    let mut d = spec.device.clone();
    let given = |d: &DeviceSpec, key: &str| d.set.iter().any(|s| s.contains(key));
    match spec.model {
        Model::Engine => {
            if !given(&d, "blocks_per_plane") {
                d.set.push("geometry.blocks_per_plane=256".into());
            }
        }
        Model::Paper => {
            if !given(&d, "blocks_per_plane") {
                d.set.push("geometry.blocks_per_plane=64".into());
            }
            if !given(&d, "pages_per_block") {
                d.set.push("geometry.pages_per_block=32".into());
            }
        }
    }
    d
}

/// The spec's schemes, parsed, duplicates dropped, in the order given.
pub fn schemes(spec: &Spec) -> anyhow::Result<Vec<Scheme>> {
    let mut out = Vec::new();
    for s in &spec.schemes {
        let x: Scheme = s.parse()?;
        if !out.contains(&x) {
            out.push(x);
        }
    }
    if out.is_empty() {
        bail!("--schemes names no scheme");
    }
    Ok(out)
}

/// Every input checked against its range before any work (the messages name the CLI's flags).
pub fn check(spec: &Spec) -> anyhow::Result<()> {
    if !["page", "dftl", "native"].contains(&spec.storage.as_str()) {
        bail!(
            "--storage is page, dftl or native, not '{}' (IAA needs an FTL that answers the GC information queries, or NoFTL)",
            spec.storage
        );
    }
    if spec.mix.len() != 3 {
        bail!("--mix takes three weights: Insert, Delete, Update (e.g. 1,1,1)");
    }
    if spec.terminals == 0 || spec.terminals > 256 {
        bail!("--terminals is 1..256");
    }
    // The engine keeps its hinted pages per committed victim in memory (storage::iaa); the
    // paper's SE is told the next block to be erased, whichever it is.
    let most = match spec.model {
        Model::Engine => storage::iaa::MAX_COMMITTED_VICTIMS,
        Model::Paper => u32::MAX,
    };
    if !(1..=most).contains(&spec.max_victims) || !(1..=spec.max_victims).contains(&spec.victims) {
        bail!(
            "--victims and --max-victims: 1 <= victims <= max-victims <= {most} (--model {})",
            spec.model.name()
        );
    }
    if spec.jobs == 0 {
        bail!("--jobs is at least 1");
    }
    if spec.index_streams && (spec.storage != "native" || spec.model != Model::Engine) {
        bail!("--index-streams is the native store's (NoFTL places its own pages) with --model engine (the paper's model has no index)");
    }
    if spec.model == Model::Paper {
        if spec.terminals != 1 {
            bail!("--model paper runs one stream of queries (the paper's SE issues one at a time): --terminals 1");
        }
        if spec.buffer_pages.is_some() {
            bail!("--model paper has no buffer pool (the paper describes none; `iaa ablation` adds one as a step)");
        }
    }
    if !(0.05..=0.98).contains(&spec.density) {
        bail!("--density is between 5% and 98%");
    }
    if !(0.0..=20.0).contains(&spec.warmup) {
        bail!("--warmup is between 0 and 20 device capacities");
    }
    if spec
        .buffer_pages
        .is_some_and(|b| !(16..=1 << 22).contains(&b))
    {
        bail!("--buffer-pages is between 16 and 4,194,304");
    }
    for &f in &spec.free {
        if !(0.02..=0.9).contains(&f) {
            bail!(
                "--free levels are between 2% and 90%, not {:.0}%",
                f * 100.0
            );
        }
    }
    parse_duration_ns(&spec.duration)?;
    if parse_duration_ns(&spec.round)? == 0 {
        bail!("--round is a virtual time above zero");
    }
    if spec.max_rounds > 4 * crate::steady::MAX_ROUNDS {
        bail!(
            "--max-rounds is 0 to {} (SNIA's cap is {})",
            4 * crate::steady::MAX_ROUNDS,
            crate::steady::MAX_ROUNDS
        );
    }
    Ok(())
}

/// The sweep's runs in order, (free space, scheme), each free-space level with every scheme;
/// the spec checked first ([`check`], [`schemes`]).
pub fn runs(spec: &Spec) -> anyhow::Result<Vec<(f64, Scheme)>> {
    check(spec)?;
    let schemes = schemes(spec)?;
    Ok(spec
        .free
        .iter()
        .flat_map(|&f| schemes.iter().map(move |&s| (f, s)))
        .collect())
}

/// Refuses a bad device before any thread starts (the paper model: DB pages must divide the
/// flash page, so that IAA's hints name them).
pub fn check_device(spec: &Spec) -> anyhow::Result<()> {
    let cfg = device(spec).load().context("the sweep's device")?;
    let flash = cfg.geometry.page_size_bytes as usize;
    if spec.model == Model::Paper
        && (spec.page_size > flash || !flash.is_multiple_of(spec.page_size))
    {
        bail!(
            "--page-size {} with --model paper: the paper's LPA is the flash page ({flash} bytes here); a DB page must divide it",
            spec.page_size
        );
    }
    Ok(())
}

/// The whole sweep: every run of [`runs`] over `spec.jobs` threads, the ratios to
/// conventional filled in and, with `plan`, its result directory written. `on_run_done` is
/// called (from the worker threads) after each run, for a progress bar.
/// One run of the paper's model (`--model paper`) at a free-space level and scheme: the seam
/// through which `experiments::iaa_paper`, which builds on this module, supplies it
/// (`iaa_paper::run` is the entry point that passes it).
pub type PaperRun<'a> = &'a (dyn Fn(&Spec, f64, Scheme) -> anyhow::Result<Row> + Sync);

pub fn run(
    spec: &Spec,
    plan: Option<&Plan>,
    on_run_done: &(dyn Fn() + Sync),
    paper: PaperRun<'_>,
) -> anyhow::Result<Sweep> {
    let runs = runs(spec)?;
    check_device(spec)?;
    if spec.model == Model::Paper && plan.is_some() {
        bail!("a result directory (--results) needs --model engine: the paper model records no per-query trace");
    }
    let sample_ns = plan.map(|p| p.window_ns);
    let mut rows = run_all(spec, &runs, sample_ns, on_run_done, paper)?;
    relate(&mut rows);
    let traces: Vec<Option<Trace>> = rows.iter_mut().map(|r| r.trace.take()).collect();
    let out = Sweep {
        workload: "iaa",
        model: spec.model,
        storage: spec.storage.clone(),
        preset: spec.device.preset.clone(),
        set: device(spec).set,
        row_bytes: spec.row_bytes,
        mix: spec.mix.clone(),
        terminals: spec.terminals,
        duration: spec.duration.clone(),
        warmup: spec.warmup,
        seed: spec.seed,
        rows,
    };
    if let Some(p) = plan {
        write_results(p, spec, &out, &traces)?;
    }
    Ok(out)
}

/// The runs on `spec.jobs` worker threads, each taking the next run not yet taken; the rows in
/// the order of `runs`, or the first run's error in that order.
fn run_all(
    spec: &Spec,
    runs: &[(f64, Scheme)],
    sample_ns: Option<u64>,
    on_run_done: &(dyn Fn() + Sync),
    paper: PaperRun<'_>,
) -> anyhow::Result<Vec<Row>> {
    // The dashboard's live points (if it runs this sweep): one series per run, from the
    // worker threads.
    let live = crate::results::live_hook();
    let results = crate::runner::on_workers(spec.jobs, runs.len(), &|i| {
        crate::results::set_live(live.clone());
        let (f, sc) = runs[i];
        crate::results::set_live_series(&series_name(f, sc));
        let r = match spec.model {
            Model::Engine => run_one(spec, f, sc, sample_ns),
            Model::Paper => paper(spec, f, sc),
        };
        on_run_done();
        r
    });
    let mut rows = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        let (f, s) = runs[i];
        rows.push(
            r.with_context(|| format!("run at {:.0}% free, scheme {}", f * 100.0, s.name()))?,
        );
    }
    Ok(rows)
}

/// A fresh store of `spec.storage` on the device, and its logical capacity in bytes.
pub(crate) fn build_store(spec: &Spec) -> anyhow::Result<(Box<dyn PageStore>, u64)> {
    let cfg = device(spec).load()?;
    let seed = cfg.seed;
    let nand = Nand::new(cfg)?;
    // A log of 1/32 of the device (at least 512 blocks, 2 MiB: a load batch of 2,000 rows fits): enough for the checkpoints to keep up
    // with single-row transactions, small enough that the table is what fills the device.
    let lpns = nand.geometry().capacity_bytes() / ftl::LOGICAL_PAGE_BYTES as u64;
    let log_blocks = (lpns / 32).max(512);
    let store: Box<dyn PageStore> = if spec.storage == "native" {
        Box::new(NativeStore::format(
            nand,
            NativeConfig {
                page_bytes: spec.page_size,
                log_blocks: Some(log_blocks),
                spare_factor: spec.op,
                seed,
                index_streams: spec.index_streams,
                ..NativeConfig::default()
            },
        )?)
    } else {
        let opts = FtlOptions {
            spare_factor: spec.op,
            seed,
            ..FtlOptions::default()
        };
        let dev = ftl::build(&spec.storage, nand, &opts)?;
        Box::new(BlockPageStore::new(dev, spec.page_size, Some(log_blocks))?)
    };
    let capacity_bytes = store.db_pages() * store.page_bytes() as u64
        + (store.log_blocks() + 2) * storage::pagestore::LOG_BLOCK_BYTES as u64;
    Ok((store, capacity_bytes))
}

/// Rows that leave `free` of `capacity_bytes` unused: the table's pages (rows at `density` of a
/// page's record space), its index (about 1/12 of the heap: 8-byte keys and 6-byte record ids
/// per 256-byte row plus B-tree slack, counted from the index's own pages on a test load), the
/// log and the master record.
pub fn rows_for(spec: &Spec, capacity_bytes: u64, free: f64, log_bytes: u64) -> u64 {
    let page = spec.page_size as f64;
    let per_row = (spec.row_bytes + 4) as f64;
    let rows_per_page = ((page - 64.0) / per_row).floor().max(1.0) * spec.density;
    let index_per_row = 40.0; // key 8 + rid 6 + slot 4 + prefix and fill slack
    let usable = (capacity_bytes as f64 * (1.0 - free) - log_bytes as f64).max(page * 64.0);
    let per_row_bytes = page / rows_per_page + index_per_row;
    (usable / per_row_bytes).floor().max(64.0) as u64
}

/// A run's loaded database: the engine, the table's config and its terminals.
struct Loaded {
    engine: Engine,
    cfg: IaaConfig,
    capacity_bytes: u64,
    frames: usize,
    terms: Vec<IaaTerminal>,
}

/// A fresh store with the table loaded at the size that leaves `free` unused, checkpointed,
/// and the terminals on it.
fn load(spec: &Spec, free: f64, scheme: Scheme) -> anyhow::Result<Loaded> {
    let (store, capacity_bytes) = build_store(spec)?;
    let log_bytes = (store.log_blocks() + 2) * storage::pagestore::LOG_BLOCK_BYTES as u64;
    let cfg = IaaConfig {
        rows: rows_for(spec, capacity_bytes, free, log_bytes),
        row_bytes: spec.row_bytes,
        weights: [spec.mix[0], spec.mix[1], spec.mix[2]],
        slack: 0.02,
        density: spec.density,
        scheme,
    };
    let rows_per_page = (spec.page_size - 64) / (spec.row_bytes + 4);
    let table_pages = cfg.rows / rows_per_page.max(1) as u64;
    let frames = spec
        .buffer_pages
        .unwrap_or(((table_pages as f64 * 0.02) as usize).max(256));
    let mut e = Engine::create(
        store,
        EngineConfig {
            buffer_frames: frames,
            ..EngineConfig::default()
        },
    )?;
    e.set_iaa_victims(spec.victims, spec.max_victims);
    let h = kits::iaa::load(&mut e, &cfg, |_| {})?;
    e.checkpoint()?;
    let terms: Vec<IaaTerminal> = (0..spec.terminals)
        .map(|i| IaaTerminal::new(i, spec.terminals, h, cfg, spec.seed, None))
        .collect();
    Ok(Loaded {
        engine: e,
        cfg,
        capacity_bytes,
        frames,
        terms,
    })
}

/// Warm-up: until the host wrote `spec.warmup` device capacities, so that GC is steady.
fn warm_up(spec: &Spec, l: &mut Loaded) -> anyhow::Result<()> {
    let page_writes = |e: &Engine| {
        e.store()
            .device_report()
            .map_or(0, |r| r.host.writes * ftl::LOGICAL_PAGE_BYTES as u64)
    };
    let want_bytes = (spec.warmup * l.capacity_bytes as f64) as u64;
    let w0 = page_writes(&l.engine);
    let chunk = 2_000u64;
    while page_writes(&l.engine) - w0 < want_bytes {
        for t in l.terms.iter_mut() {
            t.reset_counters(Some(chunk / u64::from(spec.terminals) + 1));
        }
        let start = l.engine.now();
        run_virtual(
            &mut l.engine,
            &mut l.terms,
            start,
            VirtualOptions::default(),
        )?;
    }
    Ok(())
}

/// The steady-state rounds after the warm-up (none with `max_rounds` 0), the terminals
/// running without a transaction limit.
fn engine_rounds(spec: &Spec, l: &mut Loaded) -> anyhow::Result<crate::steady::SteadyState> {
    use crate::steady::{SteadyState, Writes};
    if spec.max_rounds == 0 {
        return Ok(SteadyState::skipped(Writes::device_writes_of(
            l.engine.store().nand(),
        )));
    }
    let round_ns = parse_duration_ns(&spec.round)?;
    let done = |t: &[IaaTerminal]| t.iter().map(|t| t.committed).sum::<u64>();
    let rounds = crate::runner::terminal_rounds(
        &mut l.engine,
        &mut l.terms,
        round_ns,
        spec.max_rounds,
        done,
    )?;
    Ok(SteadyState::of(
        &rounds,
        Writes::device_writes_of(l.engine.store().nand()),
    ))
}

/// One run of the sweep; with `sample_ns`, its measured window's marks every `sample_ns` and
/// its queries (`Row::trace`).
pub fn run_one(
    spec: &Spec,
    free: f64,
    scheme: Scheme,
    sample_ns: Option<u64>,
) -> anyhow::Result<Row> {
    let mut l = load(spec, free, scheme)?;
    warm_up(spec, &mut l)?;
    // The measured window.
    let until = parse_duration_ns(&spec.duration)?;
    for t in l.terms.iter_mut() {
        t.reset_counters(None);
    }
    let steady_state = engine_rounds(spec, &mut l)?;
    for t in l.terms.iter_mut() {
        t.reset_counters(None);
        // Only the measured window's queries are recorded (with a result directory).
        t.events = sample_ns.map(|_| Vec::new());
    }
    let e = &mut l.engine;
    let stats0 = e.iaa_stats();
    let before = snapshot(e);
    let start = e.now();
    let (st, marks) = run_virtual_marked(
        e,
        &mut l.terms,
        start,
        VirtualOptions {
            until_ns: Some(start + until),
            ..VirtualOptions::default()
        },
        sample_ns,
    )?;
    let trace = sample_ns.map(|_| {
        Trace::of_terminals(
            vec![format!("{}", r3(free * 100.0)), scheme.name().to_string()],
            marks,
            l.terms.iter_mut().map(|t| t.events.take()),
        )
    });
    let after = snapshot(e);
    let elapsed_ns = st.elapsed_ns();
    let secs = elapsed_ns as f64 / 1e9;
    let committed: u64 = l.terms.iter().map(|t| t.committed).sum();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    for t in &l.terms {
        hist.add(&t.latency_ns)?;
    }
    let c = consistency(&before, &after, elapsed_ns, spec.terminals, true, &hist);
    let p = per_txn(&before, &after, committed, secs);
    let stats1 = e.iaa_stats();
    let (check, problems) = if spec.check {
        check_table(&mut l)?
    } else {
        ("skipped", vec![])
    };
    let iaa = diff(stats0, stats1);
    let units_per_page = (spec.page_size / ftl::LOGICAL_PAGE_BYTES) as f64;
    let aimed_units = iaa.hinted_writebacks as f64 * units_per_page / committed.max(1) as f64;
    let mut row = base_row(
        spec,
        l.engine.store(),
        (free, scheme),
        committed,
        secs,
        &p,
        aimed_units,
        c,
    );
    row.rows = l.cfg.rows;
    row.buffer_frames = l.frames;
    row.iaa = iaa;
    row.check = check;
    row.check_problems = problems;
    row.trace = trace;
    row.steady_state = steady_state;
    Ok(row)
}

/// A row's figures from a window's counters per query (`p`), the same for both models:
/// `aimed_units_per_query` is the 4 KiB units per query written because a page took a record
/// by IAA (the aimed share's numerator).
#[allow(clippy::too_many_arguments)]
pub(crate) fn base_row(
    spec: &Spec,
    store: &dyn PageStore,
    (free, scheme): (f64, Scheme),
    queries: u64,
    secs: f64,
    p: &crate::measure::PerTxn,
    aimed_units_per_query: f64,
    consistency: Consistency,
) -> Row {
    let host_gib_per_query =
        p.host_page_writes * ftl::LOGICAL_PAGE_BYTES as f64 / f64::from(1u32 << 30);
    let units_per_block = store.nand().map_or(0, |n| {
        let g = n.geometry();
        u64::from(g.pages_per_block) * u64::from(g.page_size_bytes) / ftl::LOGICAL_PAGE_BYTES as u64
    });
    let per = |x: f64, y: f64| if y > 0.0 { x / y } else { 0.0 };
    Row {
        model: spec.model.name(),
        free_space: free,
        scheme: scheme.name(),
        storage: spec.storage.clone(),
        queries,
        virtual_seconds: secs,
        throughput_qps: per(queries as f64, secs),
        energy_joules_per_query: p.energy_joules,
        gc_copies_per_host_write: per(p.gc_migrations, p.host_page_writes),
        erases_per_host_gib: per(p.flash_erases, host_gib_per_query),
        erases_per_kquery: p.flash_erases * 1000.0,
        host_writes_per_query: p.host_page_writes,
        flash_programs_per_query: p.flash_programs,
        flash_pad_programs_per_query: p.flash_pad_programs,
        gc_copies_per_query: p.gc_migrations,
        log_forces_per_query: p.log_forces,
        gc_copies_per_erase: per(p.gc_migrations, p.flash_erases),
        units_per_block,
        aimed_share: per(aimed_units_per_query, p.host_page_writes),
        bound_copies_per_erase: None,
        relative: Relative::default(),
        rows: 0,
        buffer_frames: 0,
        iaa: storage::iaa::IaaStats::default(),
        paper: None,
        consistency,
        // The paper model and the engine's run warm up by device writes without rounds.
        steady_state: crate::steady::SteadyState::skipped(crate::steady::Writes::device_writes_of(
            store.nand(),
        )),
        check: "skipped",
        check_problems: Vec::new(),
        trace: None,
    }
}

/// The table, its index and the engine's structures checked against the rows the terminals
/// say they hold: "passed" or "failed" and the problems.
fn check_table(l: &mut Loaded) -> anyhow::Result<(&'static str, Vec<String>)> {
    l.engine.quiesce()?;
    let expected: Vec<(i64, i64)> = l.terms.iter().flat_map(|t| t.rows().to_vec()).collect();
    let rep = kits::iaa::check(&mut l.engine, &l.cfg, &expected)?;
    Ok((if rep.passed() { "passed" } else { "failed" }, rep.problems))
}

/// `x` rounded to 3 decimals (a free-space level in percent as a label).
fn r3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

fn diff(a: storage::iaa::IaaStats, b: storage::iaa::IaaStats) -> storage::iaa::IaaStats {
    storage::iaa::IaaStats {
        hinted_inserts: b.hinted_inserts - a.hinted_inserts,
        unhinted_inserts: b.unhinted_inserts - a.unhinted_inserts,
        reused_inserts: b.reused_inserts - a.reused_inserts,
        moved_updates: b.moved_updates - a.moved_updates,
        in_place_updates: b.in_place_updates - a.in_place_updates,
        hint_refreshes: b.hint_refreshes - a.hint_refreshes,
        hinted_writebacks: b.hinted_writebacks - a.hinted_writebacks,
        ghosts_removed: b.ghosts_removed - a.ghosts_removed,
        victim_pages_left_heap: b.victim_pages_left_heap - a.victim_pages_left_heap,
        victim_pages_left_other: b.victim_pages_left_other - a.victim_pages_left_other,
    }
}

/// Fills in the ratios to conventional at each free-space level.
pub fn relate(rows: &mut [Row]) {
    let base: Vec<(f64, Row)> = rows
        .iter()
        .filter(|r| r.scheme == Scheme::Conventional.name())
        .map(|r| (r.free_space, r.clone()))
        .collect();
    let ratio = |x: f64, y: f64| (y > 0.0).then(|| (x / y * 1000.0).round() / 1000.0);
    for r in rows.iter_mut() {
        if let Some((_, b)) = base.iter().find(|(f, _)| *f == r.free_space) {
            // The aimed-share bound (docs/iaa.md): u from the conventional run's victims.
            let blk = r.units_per_block as f64;
            if blk > 0.0 && r.aimed_share < 1.0 {
                let u = b.gc_copies_per_erase / blk;
                let f = r.aimed_share;
                r.bound_copies_per_erase =
                    Some((blk * ((u - f) / (1.0 - f)).max(0.0) * 10.0).round() / 10.0);
            }
            r.relative = Relative {
                throughput: ratio(r.throughput_qps, b.throughput_qps),
                energy: ratio(r.energy_joules_per_query, b.energy_joules_per_query),
                erases: ratio(r.erases_per_kquery, b.erases_per_kquery),
            };
        }
    }
}

/// The dashboard's name of a run's series: its free space and scheme.
pub fn series_name(free: f64, scheme: Scheme) -> String {
    format!("{}% {}", r3(free * 100.0), scheme.name())
}

/// The result directory of the sweep (docs/results.md): summary.json (the JSON result with
/// BenchBase's names at the top, over every run, and per row; the table's rows are each row's
/// `scalefactor`, as the sweep's table size follows its free space), the per-window files and
/// raw.csv with a row per window or query of every run (`free_percent`, `scheme`).
fn write_results(
    plan: &Plan,
    spec: &Spec,
    out: &Sweep,
    traces: &[Option<Trace>],
) -> anyhow::Result<()> {
    use crate::results as r;
    let mut v = serde_json::to_value(out)?;
    for (i, t) in traces.iter().enumerate() {
        let Some(t) = t else { continue };
        if let Some(obj) = v["rows"].get_mut(i).and_then(|x| x.as_object_mut()) {
            obj.extend(r::benchbase(
                &t.events,
                r::elapsed_ns(std::slice::from_ref(t)),
            ));
            let rows = obj["rows"].to_string();
            obj.insert("scalefactor".into(), rows.into());
        }
    }
    let all: Vec<Trace> = traces.iter().flatten().cloned().collect();
    let c = r::Contents {
        bench: "iaa",
        scalefactor: None,
        terminals: Some(spec.terminals),
        isolation: Some(r::ENGINE_ISOLATION),
        traces: &all,
        label_cols: &["free_percent", "scheme"],
        types: &kits::iaa::QUERY_TYPES,
        unit: r::Unit::Txn,
        device: None,
    };
    r::write_dir(plan, &v, &c, None, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CI-sized sweep point on both stores: every run checks (table, index, engine), its
    /// window is consistent, and IAA+U2DI leaves GC fewer copies per host write than the
    /// conventional scheme (the mechanism works; its size is in docs/PERFORMANCE.md).
    #[test]
    fn a_small_sweep_point_runs_checks_and_iaa_cuts_gc_copies() {
        for storage in ["page", "native"] {
            let a = Spec {
                storage: storage.into(),
                device: DeviceSpec {
                    set: vec!["geometry.blocks_per_plane=192".into()],
                    ..DeviceSpec::default()
                },
                duration: "300ms".into(),
                warmup: 1.0,
                terminals: 2,
                check: true,
                ..Spec::default()
            };
            check(&a).unwrap();
            let mut rows = vec![
                run_one(&a, 0.3, Scheme::Conventional, None).unwrap(),
                run_one(&a, 0.3, Scheme::IaaU2di, None).unwrap(),
            ];
            relate(&mut rows);
            for r in &rows {
                assert_eq!(
                    r.check, "passed",
                    "{storage} {}: {:?}",
                    r.scheme, r.check_problems
                );
                assert!(
                    r.consistency.is_ok(),
                    "{storage} {}: {:?}",
                    r.scheme,
                    r.consistency
                );
                assert!(
                    r.queries > 100,
                    "{storage} {}: {} queries",
                    r.scheme,
                    r.queries
                );
            }
            assert!(rows[1].iaa.hinted_inserts > 0 && rows[1].iaa.moved_updates > 0);
            assert!(
                rows[1].gc_copies_per_host_write < rows[0].gc_copies_per_host_write,
                "{storage}: copies per host write {} with IAA+U2DI, {} conventional",
                rows[1].gc_copies_per_host_write,
                rows[0].gc_copies_per_host_write
            );
        }
    }

    #[test]
    fn bad_specs_are_refused_with_errors() {
        let bad = |f: fn(&mut Spec)| {
            let mut s = Spec::default();
            f(&mut s);
            runs(&s).is_err()
        };
        assert!(bad(|s| s.storage = "fast".into()));
        assert!(bad(|s| s.mix = vec![1, 1]));
        assert!(bad(|s| s.free = vec![0.95]));
        assert!(bad(|s| s.schemes = vec!["lru".into()]));
        assert!(!bad(|_| {}));
    }
}
