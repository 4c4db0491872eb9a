//! What every bench verb shares: the flags of a run (`BenchArgs`), the store it runs on, the
//! checks made before anything is loaded (counts, memory, the store's size), and the lines of
//! the human output. Below the verbs (`bench tpcb` in `bench.rs`, `bench/tpcc.rs`,
//! `bench/tpch.rs`, `bench_tatp.rs`), which import it.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use ftl::BlockDevice;
use lab::limits::{self, LimitError, MemoryPlan};
use lab::measure::{LatencyUs, PerTxn};
use storage::measure::Consistency;
use storage::{BlockPageStore, Engine, EngineConfig, PageStore};

use crate::cli::common::{parse_duration_ns, DeviceArgs};
use crate::targets::{self, FtlKnobs, TargetArgs};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The store: native (NoFTL) | page | dftl | dftl-orig | fast | block | amf | file | memdisk.
    #[arg(long = "store", visible_alias = "storage", default_value = "memdisk")]
    pub storage: String,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// FTL targets' knobs; `--op` is also the native store's spare factor.
    #[command(flatten)]
    pub knobs: FtlKnobs,
    /// --store native: the log in a region of its own, with these CREATE REGION options
    /// (`KEY=VALUE,...`), e.g. `MAX_CHIPS=1,CELL_MODE=pSLC` on MLC/TLC chips.
    #[arg(long, value_parser = lab::stores::parse_log_region)]
    pub log_region: Option<lab::stores::LogRegion>,
    /// --store file: the database file (created if missing, reused if it holds a TPC-B database).
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// --store file: use --path even if it holds something that is not a noftl database.
    #[arg(long)]
    pub force: bool,
    /// Branches (10 tellers and 100,000 accounts each).
    #[arg(long, default_value_t = 1)]
    pub scale: u32,
    /// Accounts per branch (the specification's 100,000 unless changed, for small tests).
    #[arg(long, default_value_t = 100_000)]
    pub accounts_per_branch: u32,
    /// Terminals: concurrent transaction streams, each running its transactions back to back.
    #[arg(long, default_value_t = 1)]
    pub terminals: u32,
    /// Committed transactions per terminal.
    #[arg(long, conflicts_with = "duration")]
    pub txns: Option<u64>,
    /// Run time (virtual or real), e.g. 60s, 500ms, 2m.
    #[arg(long)]
    pub duration: Option<String>,
    /// Buffer pool frames (default: 2% of the database's pages, at least 256).
    #[arg(long)]
    pub buffer_pages: Option<usize>,
    /// DB page size in bytes: 4096, 8192 or 16384.
    #[arg(long, default_value_t = 4096)]
    pub page_size: usize,
    /// virtual: deterministic scheduler in virtual time; real: one thread per terminal, the
    /// device's modelled time waited on the wall clock. bench tpcb and tatp support virtual
    /// and real (none is refused).
    #[arg(long, default_value = "virtual", value_parser = crate::cli::clock::parser("bench", &["virtual", "real"]))]
    pub clock: String,
    /// Seed of the database contents and of the terminals' transaction inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the JSON result to this file ("-" or no value: standard output, instead of the
    /// human report).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<PathBuf>,
    /// Verify the TPC-B invariants and the engine's structure afterwards.
    #[arg(long)]
    pub check: bool,
    /// TATP on native: put Subscriber and Special_Facility in a region of this many chips (IPA
    /// Table I set-up), the other tables in the default region.
    #[arg(long)]
    pub regions: Option<u32>,
    /// tpcb, tpcc: how the database is loaded: bulk (dense heap pages, B+-trees built bottom-up
    /// from sorted keys, one log record per page; the default) or rows (one logged insert per
    /// row and index, how every TPC-B and TPC-C figure published before 2026-11-27 was loaded).
    /// TATP always loads row by row.
    #[arg(long)]
    pub load: Option<kits::LoadMethod>,
    #[command(flatten)]
    pub results: crate::cli::common::ResultsArgs,
}

pub fn device(args: &BenchArgs) -> anyhow::Result<Box<dyn BlockDevice>> {
    if args.storage == "file" {
        let path = args
            .path
            .clone()
            .context("--storage file needs --path FILE")?;
        let cfg = args.device.load()?;
        let pages = cfg.geometry.capacity_bytes() / ftl::LOGICAL_PAGE_BYTES as u64;
        lab::filelock::hold(&path, "--path")?;
        return Ok(Box::new(
            storage::filedev::FileDevice::open(&path, pages)
                .with_context(|| format!("cannot open {}", path.display()))?,
        ));
    }
    let t = TargetArgs {
        target: args.storage.clone(),
        device: args.device.clone(),
        knobs: args.knobs.clone(),
        image: None,
    };
    targets::build(&t)
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
            lab::limits::Bytes(len)
        );
    }
    Ok(())
}

/// The consistency line of every bench verb's human output.
pub fn print_consistency(c: &Consistency) {
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
    println!(
        "  consistency: {} (busiest die {} and channel {} of the elapsed time; Little's law {})",
        c.status,
        f(c.die_busy_fraction_max),
        f(c.channel_busy_fraction_max),
        f(c.little_law_ratio)
    );
    for v in &c.violations {
        println!("  WARNING: violated: {v}");
    }
}

/// The pSLC write cache lines of `io` and the bench verbs' human output.
pub fn print_slc_cache(c: &ftl::block_device::SlcCacheReport) {
    println!(
        "  slc cache   {} pSLC blocks ({:.1}%): {} host writes cached, {} direct (hit {:.1}%), {} absorbed in pSLC",
        c.blocks,
        c.share * 100.0,
        c.host_writes_cached,
        c.host_writes_direct,
        c.hit_rate * 100.0,
        c.absorbed
    );
    println!(
        "  folds       {} blocks ({} idle): {} units folded in {} programs, {} pad pages (WAF includes them)",
        c.folds, c.idle_folds, c.folded_units, c.fold_programs, c.fold_pads
    );
}

/// The run's end (`--duration`, if given) and clock (true: virtual), checked.
pub fn run_plan(args: &BenchArgs) -> anyhow::Result<(Option<u64>, bool)> {
    if args.txns.is_none() && args.duration.is_none() {
        bail!("give --txns N or --duration D");
    }
    check_counts(args)?;
    if let Some(p) = &args.json {
        lab::output::check_writable(p)?;
    }
    let until = args
        .duration
        .as_deref()
        .map(parse_duration_ns)
        .transpose()?;
    let virtual_clock = match args.clock.as_str() {
        "virtual" => true,
        "real" => false,
        other => bail!("--clock is virtual or real, not '{other}'"),
    };
    Ok((until, virtual_clock))
}

/// The counts of a bench run, in their meaningful ranges (lab::limits): 0 transactions, 0
/// terminals, scale 0 or an empty buffer pool would run nothing, or nothing meaningful.
pub fn check_counts(args: &BenchArgs) -> Result<(), LimitError> {
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
/// against what the machine has (lab::limits): the device's metadata, the database's pages
/// when the device keeps them in RAM (every target but `--storage file`), the buffer pool and
/// the terminals.
pub fn check_memory(args: &BenchArgs, need_pages: u64, frames: usize) -> anyhow::Result<()> {
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
pub fn page_store(args: &BenchArgs) -> anyhow::Result<(Box<dyn PageStore>, String)> {
    storage::pagestore::engine_runs_on(&args.storage)?;
    if args.log_region.is_some() && args.storage != "native" {
        anyhow::bail!(
            "--log-region places the native store's log; --storage is {}",
            args.storage
        );
    }
    targets::refuse_flush_writeback_off_dftl(args.knobs.dftl_flush_writeback, &args.storage)?;
    if args.knobs.slc_cache.is_some() && (args.storage == "native" || args.storage == "file") {
        anyhow::bail!(
            "--slc-cache is the page FTL's pSLC write cache; --storage is {} (the native store puts data in pSLC with a region: CELL_MODE=pSLC)",
            args.storage
        );
    }
    Ok(if args.storage == "native" {
        // NoFTL: the engine maps its pages to the raw flash itself (storage::native).
        (
            Box::new(lab::stores::native_store(
                &args.device.spec(),
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
    args: &BenchArgs,
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
    args: &BenchArgs,
    need_pages: u64,
    what: &str,
) -> anyhow::Result<(Engine, String, usize)> {
    let (store, storage_name) = page_store(args)?;
    let frames = sized_frames(args, &*store, need_pages, what)?;
    let e = Engine::create(
        store,
        EngineConfig {
            buffer_frames: frames,
            ..EngineConfig::default()
        },
    )?;
    Ok((e, storage_name, frames))
}

/// The latency line of every bench verb's human output.
pub fn print_latency(l: &LatencyUs) {
    println!(
        "  latency us: mean {:.1} p50 {:.1} p95 {:.1} p99 {:.1} max {:.1}",
        l.mean, l.p50, l.p95, l.p99, l.max
    );
}

/// The per-transaction lines of every bench verb's human output.
pub fn print_per_txn(p: &PerTxn) {
    println!(
            "  per txn: flash reads {:.2} programs {:.2} erases {:.3} gc migrations {:.2} energy {:.2e} J; host reads {:.2} writes {:.2} log forces {:.2}",
            p.flash_reads, p.flash_programs, p.flash_erases, p.gc_migrations, p.energy_joules,
            p.host_page_reads, p.host_page_writes, p.log_forces
        );
    if p.flash_oob_reads + p.flash_oob_writes > 0.0 {
        println!(
            "  per txn: flash OOB reads {:.2} OOB writes {:.2}",
            p.flash_oob_reads, p.flash_oob_writes
        );
    }
    if p.host_cpu_us > 0.0 {
        println!(
            "  per txn: host CPU of flash management {:.1} us ({:.1}% of the run)",
            p.host_cpu_us,
            p.host_cpu_share * 100.0
        );
    }
}

/// The check line of every bench verb: the outcome and, if any, the problems found.
pub fn print_check(check: &str, problems: &[String]) {
    if problems.is_empty() {
        println!("  check: {check}");
    } else {
        println!("  check: {check} {problems:?}");
    }
}
