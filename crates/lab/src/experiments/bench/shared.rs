//! What every bench verb shares: the flags of a run (`Spec`), the store it runs on, the
//! checks made before anything is loaded (counts, memory, the store's size), and the lines of
//! the human output. Below the verbs (`bench tpcb` in `bench.rs`, `bench/tpcc.rs`,
//! `bench/tpch.rs`, `bench_tatp.rs`), which import it.

use std::path::PathBuf;

use crate::limits::{self, LimitError, MemoryPlan};
use anyhow::{bail, Context};
use ftl::BlockDevice;
use storage::{BlockPageStore, Engine, EngineConfig, PageStore};

use crate::device::DeviceSpec;
use crate::targets::{FtlKnobs, TargetSpec};
use crate::units::parse_duration_ns;

#[derive(Debug, Clone)]
pub struct Spec {
    /// The store: native (NoFTL) | page | dftl | dftl-orig | fast | block | amf | file | memdisk.
    pub storage: String,
    pub device: DeviceSpec,
    /// FTL targets' knobs; `--op` is also the native store's spare factor.
    pub knobs: FtlKnobs,
    /// --store native: the log in a region of its own, with these CREATE REGION options
    /// (`KEY=VALUE,...`), e.g. `MAX_CHIPS=1,CELL_MODE=pSLC` on MLC/TLC chips.
    pub log_region: Option<crate::stores::LogRegion>,
    /// --store file: the database file (created if missing, reused if it holds a TPC-B database).
    pub path: Option<PathBuf>,
    /// --store file: use --path even if it holds something that is not a noftl database.
    pub force: bool,
    /// Branches (10 tellers and 100,000 accounts each).
    pub scale: u32,
    /// Accounts per branch (the specification's 100,000 unless changed, for small tests).
    pub accounts_per_branch: u32,
    /// Terminals: concurrent transaction streams, each running its transactions back to back.
    pub terminals: u32,
    /// Committed transactions per terminal.
    pub txns: Option<u64>,
    /// Run time (virtual or real), e.g. 60s, 500ms, 2m.
    pub duration: Option<String>,
    /// Buffer pool frames (default: 2% of the database's pages, at least 256).
    pub buffer_pages: Option<usize>,
    /// DB page size in bytes: 4096, 8192 or 16384.
    pub page_size: usize,
    /// virtual: deterministic scheduler in virtual time; real: one thread per terminal, the
    /// device's modelled time waited on the wall clock. bench tpcb and tatp support virtual
    /// and real (none is refused).
    pub clock: String,
    /// Seed of the database contents and of the terminals' transaction inputs.
    pub seed: u64,
    /// Verify the TPC-B invariants and the engine's structure afterwards.
    pub check: bool,
    /// TATP on native: put Subscriber and Special_Facility in a region of this many chips (IPA
    /// Table I set-up), the other tables in the default region.
    pub regions: Option<u32>,
    /// tpcb, tpcc: how the database is loaded: bulk (dense heap pages, B+-trees built bottom-up
    /// from sorted keys, one log record per page; the default) or rows (one logged insert per
    /// row and index, how every TPC-B and TPC-C figure published before 2026-11-27 was loaded).
    /// TATP always loads row by row.
    pub load: Option<kits::LoadMethod>,
    /// The steady-state rule before the measured run (`crate::steady`): preconditioning to
    /// this many device writes since format (0: none), rounds of `round` virtual time, at most
    /// `max_rounds` (0: none, and the result says the run was not checked for steady state).
    pub precondition_device_writes: f64,
    pub round: String,
    pub max_rounds: u32,
    /// A result directory: summary.json, samples.csv (raw.csv with `raw`).
    pub results: Option<PathBuf>,
    /// The length of a samples.csv row, e.g. 1s.
    pub sample_window: String,
    /// Also raw.csv, one row per transaction.
    pub raw: bool,
}

impl Default for Spec {
    /// The CLI's defaults (`noftl bench tpcb` without flags): TPC-B scale 1 on the RAM disk in
    /// virtual time, one terminal, seed 1; a run still needs `txns` or `duration`.
    fn default() -> Self {
        Spec {
            storage: "memdisk".into(),
            device: DeviceSpec::default(),
            knobs: FtlKnobs::default(),
            log_region: None,
            path: None,
            force: false,
            scale: 1,
            accounts_per_branch: 100_000,
            terminals: 1,
            txns: None,
            duration: None,
            buffer_pages: None,
            page_size: 4096,
            clock: "virtual".into(),
            seed: 1,
            check: false,
            regions: None,
            load: None,
            precondition_device_writes: 0.0,
            round: "10s".into(),
            max_rounds: 0,
            results: None,
            sample_window: "1s".into(),
            raw: false,
        }
    }
}

pub fn device(args: &Spec) -> anyhow::Result<Box<dyn BlockDevice>> {
    if args.storage == "file" {
        let path = args
            .path
            .clone()
            .context("--storage file needs --path FILE")?;
        let cfg = args.device.load()?;
        let pages = cfg.geometry.capacity_bytes() / ftl::LOGICAL_PAGE_BYTES as u64;
        crate::filelock::hold(&path, "--path")?;
        return Ok(Box::new(
            storage::filedev::FileDevice::open(&path, pages)
                .with_context(|| format!("cannot open {}", path.display()))?,
        ));
    }
    let t = TargetSpec {
        target: args.storage.clone(),
        device: args.device.clone(),
        knobs: args.knobs.clone(),
        image: None,
    };
    crate::targets::build(&t)
}

/// `--storage file` writes a database over the file: refuse one that holds something else (no
/// master record of the engine in either slot: the first two 4 KiB pages) unless `--force`.
/// An empty file is new (the lock creates a missing one empty).
pub fn refuse_foreign_file(path: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    let mut slot = vec![0u8; storage::pagestore::LOG_BLOCK_BYTES];
    let ours = (0..2u64).any(|i| {
        f.read_exact_at(&mut slot, i * storage::pagestore::LOG_BLOCK_BYTES as u64)
            .is_ok()
            && storage::engine::is_master_record(&slot)
    });
    if !ours {
        bail!(
            "{} holds {} that is not a noftl database (no master record): refusing to overwrite it; give --force to use it anyway, or another --path",
            path.display(),
            crate::limits::Bytes(len)
        );
    }
    Ok(())
}

/// The run's end (`--duration`, if given) and clock (true: virtual), checked.
pub fn run_plan(args: &Spec) -> anyhow::Result<(Option<u64>, bool)> {
    if args.txns.is_none() && args.duration.is_none() {
        bail!("give --txns N or --duration D");
    }
    check_counts(args)?;
    let until = args
        .duration
        .as_deref()
        .map(parse_duration_ns)
        .transpose()?;
    parse_duration_ns(&args.round)?;
    if !(0.0..=20.0).contains(&args.precondition_device_writes) {
        bail!(
            "--precondition is between 0 and 20 device writes, not {}",
            args.precondition_device_writes
        );
    }
    let virtual_clock = match args.clock.as_str() {
        "virtual" => true,
        "real" => false,
        other => bail!("--clock is virtual or real, not '{other}'"),
    };
    Ok((until, virtual_clock))
}

/// The counts of a bench run, in their meaningful ranges (crate::limits): 0 transactions, 0
/// terminals, scale 0 or an empty buffer pool would run nothing, or nothing meaningful.
pub fn check_counts(args: &Spec) -> Result<(), LimitError> {
    limits::at_least_one(
        "--scale",
        u64::from(args.scale),
        "the database would be empty",
    )?;
    limits::at_least_one(
        "--terminals",
        u64::from(args.terminals),
        "nobody would run a transaction",
    )?;
    if let Some(n) = args.txns {
        limits::at_least_one(
            "--txns",
            n,
            "a run of 0 transactions per terminal measures nothing",
        )?;
    }
    if let Some(frames) = args.buffer_pages {
        limits::in_range(
            "--buffer-pages",
            frames as u64,
            MIN_BUFFER_FRAMES,
            u64::MAX,
            "the engine pins a few pages at once (a B+-tree path, a heap page) and needs room to evict",
        )?;
    }
    Ok(())
}

/// The smallest buffer pool accepted: the pages one operation can pin at once (a root-to-leaf
/// path of a B+-tree and a split, a heap page, catalog pages), with room to spare.
const MIN_BUFFER_FRAMES: u64 = 16;

/// The memory a bench run will need, computed before anything is built or loaded, checked
/// against what the machine has (crate::limits): the device's metadata, the database's pages
/// when the device keeps them in RAM (every target but `--storage file`), the buffer pool and
/// the terminals.
pub fn check_memory(args: &Spec, need_pages: u64, frames: usize) -> anyhow::Result<()> {
    let cfg = args.device.load()?;
    let mut plan = MemoryPlan::new();
    plan.device(&cfg);
    if args.storage != "file" {
        plan.add(
            format!("the database in the emulated device's RAM ({need_pages} pages)"),
            limits::written_data_bytes(need_pages, args.page_size as u64),
        );
    }
    plan.add(
        format!("{frames} buffer frames"),
        (frames as u64).saturating_mul(args.page_size as u64),
    );
    plan.add(
        format!("{} terminals", args.terminals),
        u64::from(args.terminals).saturating_mul(limits::TERMINAL_BYTES),
    );
    plan.check(
        "use a smaller --scale, fewer --terminals or --buffer-pages, or a machine with more memory",
    )?;
    Ok(())
}

/// The page store of `--storage` and its name.
pub fn page_store(args: &Spec) -> anyhow::Result<(Box<dyn PageStore>, String)> {
    storage::pagestore::engine_runs_on(&args.storage)?;
    if args.log_region.is_some() && args.storage != "native" {
        anyhow::bail!(
            "--log-region places the native store's log; --storage is {}",
            args.storage
        );
    }
    crate::targets::refuse_flush_writeback_off_dftl(
        args.knobs.dftl_flush_writeback,
        &args.storage,
    )?;
    if args.knobs.slc_cache.is_some() && (args.storage == "native" || args.storage == "file") {
        anyhow::bail!(
            "--slc-cache is the page FTL's pSLC write cache; --storage is {} (the native store puts data in pSLC with a region: CELL_MODE=pSLC)",
            args.storage
        );
    }
    Ok(if args.storage == "native" {
        // NoFTL: the engine maps its pages to the raw flash itself (storage::native).
        (
            Box::new(crate::stores::native_store(
                &args.device,
                args.knobs.op,
                args.page_size,
                args.log_region.as_ref(),
            )?),
            "native".into(),
        )
    } else {
        let dev = device(args)?;
        let name = dev.name();
        (
            Box::new(BlockPageStore::new(dev, args.page_size, None)?),
            name,
        )
    })
}

/// Refuses, before anything is loaded, a store too small for the database (`need_pages`, the
/// kit's estimate); returns the buffer pool's frames (`--buffer-pages`, or 2% of the estimate,
/// at least 256).
pub fn sized_frames(
    args: &Spec,
    store: &dyn PageStore,
    need_pages: u64,
    what: &str,
) -> anyhow::Result<usize> {
    let have_pages = store.db_pages();
    if need_pages > have_pages {
        let gib = |pages: u64| pages as f64 * args.page_size as f64 / f64::from(1u32 << 30);
        let per_plane = args
            .device
            .load()
            .map(|c| {
                let g = &c.geometry;
                let grow = need_pages as f64 / have_pages.max(1) as f64 * 1.15;
                format!(
                    " (for example --set geometry.blocks_per_plane={})",
                    (f64::from(g.blocks_per_plane) * grow).ceil() as u64
                )
            })
            .unwrap_or_default();
        bail!(
            "{what} needs about {need_pages} DB pages ({:.2} GiB) and {} offers {have_pages} ({:.2} GiB): use a larger device{per_plane} or a smaller --scale",
            gib(need_pages),
            store.name(),
            gib(have_pages)
        );
    }
    let frames = args
        .buffer_pages
        .unwrap_or(((need_pages as f64 * 0.02) as usize).max(256));
    check_memory(args, need_pages, frames)?;
    Ok(frames)
}

/// A new engine on the store of `--storage`, sized for a database of `need_pages` (`what` names
/// it in the refusal: `sized_frames`); returns it, the store's name and the buffer frames.
pub fn new_engine(
    args: &Spec,
    need_pages: u64,
    what: &str,
) -> anyhow::Result<(Engine, String, usize)> {
    engine_on_store(args, need_pages, what, false)
}

/// `new_engine` for a database the store already holds (`--storage file`): opened and
/// recovered, not created.
pub fn reopen_engine(
    args: &Spec,
    need_pages: u64,
    what: &str,
) -> anyhow::Result<(Engine, String, usize)> {
    engine_on_store(args, need_pages, what, true)
}

fn engine_on_store(
    args: &Spec,
    need_pages: u64,
    what: &str,
    open: bool,
) -> anyhow::Result<(Engine, String, usize)> {
    let (store, storage_name) = page_store(args)?;
    let frames = sized_frames(args, &*store, need_pages, what)?;
    let cfg = EngineConfig {
        buffer_frames: frames,
        ..EngineConfig::default()
    };
    let e = if open {
        Engine::open(store, cfg)
            .with_context(|| format!("opening the database in {storage_name}"))?
    } else {
        Engine::create(store, cfg)?
    };
    Ok((e, storage_name, frames))
}

/// Brings the loaded database (`loaded`: the kit's handles, as `crate::workloads` keeps them)
/// to steady state before the measured run, as `args` asks (`crate::steady`). Rounds run in
/// virtual time only: with the real clock, or without rounds asked, the result says the run was
/// not checked.
pub fn reach_steady(
    args: &Spec,
    e: &mut Engine,
    workload: &str,
    params: crate::workload::Params,
    loaded: crate::workload::Loaded,
    virtual_clock: bool,
) -> anyhow::Result<crate::steady::SteadyState> {
    use crate::steady::{SteadyState, Writes};
    if !virtual_clock || (args.max_rounds == 0 && args.precondition_device_writes == 0.0) {
        return Ok(SteadyState::skipped(Writes::device_writes_of(
            e.store().nand(),
        )));
    }
    let (w, _) = crate::workloads::make(workload, &params)?;
    let spec = crate::workload::SteadySpec {
        precondition_device_writes: args.precondition_device_writes,
        round_ns: parse_duration_ns(&args.round)?,
        max_rounds: args.max_rounds,
        whole_checkpoint_cycles: false,
    };
    let s = crate::workload::reach_steady_state(&*w, e, &loaded, args.terminals, &spec)?;
    // The measured run starts right after a checkpoint, as it does after a load.
    e.checkpoint()?;
    Ok(s)
}

/// The result directory of a run, checked before any work (`results::Plan::new`).
pub fn plan(args: &Spec) -> anyhow::Result<Option<crate::results::Plan>> {
    args.results
        .as_deref()
        .map(|dir| crate::results::Plan::new(dir, &args.sample_window, args.raw))
        .transpose()
}

/// The progress of a database load of about `rows` rows (an estimate when `estimate`), told
/// to the installed observer (`crate::progress`).
pub fn load_bar(rows: u64, estimate: bool) -> crate::progress::Phase {
    crate::progress::phase(
        "loading",
        rows,
        if estimate { "rows (estimated)" } else { "rows" },
    )
}

/// Runs a bench's terminals from the engine's clock on (`runner::run_terminals`), each
/// recording its transactions when a result directory is written; returns what the runner
/// returns and the wall seconds the run took.
pub fn run_recorded<T: crate::workload::WorkloadTerminal + 'static>(
    e: Engine,
    mut terms: Vec<T>,
    until: Option<u64>,
    virtual_clock: bool,
    plan: Option<&crate::results::Plan>,
) -> anyhow::Result<(crate::runner::Ran<T>, f64)> {
    if plan.is_some() {
        terms.iter_mut().for_each(|t| t.record_events());
    }
    let start_ns = e.now();
    let cpu0 = std::time::Instant::now();
    let ran = crate::runner::run_terminals(
        e,
        terms,
        start_ns,
        until,
        virtual_clock,
        plan.map(|p| p.window_ns),
    )?;
    Ok((ran, cpu0.elapsed().as_secs_f64()))
}
