//! `noftl bench tpcb`: TPC-B on the storage engine, on any block-device target, in virtual or
//! real time.
//!
//! The database is loaded first (or reused from a `--storage file` image that holds one); only
//! the run is measured: device counters are differences across it. In virtual time the JSON
//! holds virtual-time figures only, so the same command and seed give byte-identical JSON; wall
//! clock figures (load time, host CPU per transaction) go to the human output.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use ftl::BlockDevice;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use kits::tpcb::{self, Handles, TpcbConfig, TpcbTerminal};
use serde::Serialize;
use storage::measure::Consistency;
use storage::{BlockPageStore, Engine, EngineConfig, PageStore};

use lab::measure::{
    buffer, consistency, latency_us, per_txn, slc_cache, snapshot, Buffer, LatencyUs, PerTxn,
};
use lab::runner::{run_terminals, write_results};

use super::common::{parse_duration_ns, DeviceArgs};
use crate::targets::{self, FtlKnobs, TargetArgs};
use lab::limits::{self, LimitError, MemoryPlan};

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// TPC-B: branches, tellers, accounts, history; the one transaction.
    Tpcb(BenchArgs),
    /// TATP: subscribers, access info, special facilities, call forwarding; seven transactions.
    /// --scale is the number of subscribers.
    #[command(
        mut_arg("scale", |a| a.help("Subscribers (each with its access info, special facilities and call forwarding rows).")),
        mut_arg("accounts_per_branch", |a| a.help("TPC-B's accounts per branch: not used by TATP.")),
        mut_arg("path", |a| a.help("TPC-B's database file: TATP refuses --store file and does not use it.")),
        mut_arg("force", |a| a.help("TPC-B's --path overwrite: not used by TATP.")),
        mut_arg("check", |a| a.help("Verify the TATP consistency invariants and the engine's structure afterwards.")),
        mut_arg("regions", |a| a.help("--store native: put Subscriber and Special_Facility in a region of this many chips (IPA Table I set-up), the other tables in the default region.")),
        mut_arg("load", |a| a.help("TATP always loads row by row: rows (the default) is the only value accepted.")),
        mut_arg("clock", |a| a.help("virtual: deterministic scheduler in virtual time; real: one thread per terminal, the device's modelled time waited on the wall clock. bench tatp supports virtual and real (none is refused).")),
    )]
    Tatp(BenchArgs),
    /// TPC-C: nine tables, the five transactions (45/43/4/4/4); reports NOTPM. --scale is the
    /// number of warehouses.
    #[command(
        mut_arg("scale", |a| a.help("Warehouses (10 districts each).")),
        mut_arg("accounts_per_branch", |a| a.help("TPC-B's accounts per branch: TPC-C refuses any value but the default.")),
        mut_arg("path", |a| a.help("--store file: the database file (TPC-C always loads a new database: a file that is not empty needs --force).")),
        mut_arg("force", |a| a.help("--store file: overwrite a --path that is not empty.")),
        mut_arg("check", |a| a.help("Check the TPC-C consistency conditions and the engine's structure after loading and after the run.")),
        mut_arg("regions", |a| a.help("TATP's regions on native: not used by TPC-C.")),
        mut_arg("clock", |a| a
            .help("virtual: deterministic scheduler in virtual time. bench tpcc supports virtual only (real and none are refused).")
            .value_parser(super::clock::parser("bench tpcc", &["virtual"]))),
    )]
    Tpcc(tpcc::TpccArgs),
    /// TPC-H: the eight tables bulk loaded, queries 1, 6, 12 and 14 with seconds per query
    /// (virtual time) and their answers checked. --scale is the scale factor (0.01 to 1000).
    Tpch(tpch::TpchArgs),
}

mod tpcc;
mod tpch;

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
    #[arg(long, default_value = "virtual", value_parser = super::clock::parser("bench", &["virtual", "real"]))]
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

#[derive(Debug, Serialize)]
struct BenchResult {
    workload: &'static str,
    storage: String,
    clock: String,
    scale: u32,
    accounts_per_branch: u32,
    terminals: u32,
    seed: u64,
    page_bytes: usize,
    committed: u64,
    aborted: u64,
    throughput_tps: f64,
    virtual_seconds: f64,
    latency_us: LatencyUs,
    per_txn: PerTxn,
    buffer: Buffer,
    lock_waits: u64,
    group_commit_forces: u64,
    consistency: Consistency,
    check: &'static str,
    check_problems: Vec<String>,
    /// How the database was loaded: bulk or rows (--load), or reused (a file that held one).
    load: &'static str,
    /// The page FTL's pSLC write cache over the window (--slc-cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    slc_cache: Option<ftl::block_device::SlcCacheReport>,
}

fn device(args: &BenchArgs) -> anyhow::Result<Box<dyn BlockDevice>> {
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
fn refuse_foreign_file(path: &std::path::Path) -> anyhow::Result<()> {
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
pub(super) fn print_consistency(c: &Consistency) {
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
pub(super) fn print_slc_cache(c: &ftl::block_device::SlcCacheReport) {
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
pub(super) fn run_plan(args: &BenchArgs) -> anyhow::Result<(Option<u64>, bool)> {
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
pub(super) fn check_counts(args: &BenchArgs) -> Result<(), LimitError> {
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
pub(super) fn check_memory(args: &BenchArgs, need_pages: u64, frames: usize) -> anyhow::Result<()> {
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
pub(super) fn page_store(args: &BenchArgs) -> anyhow::Result<(Box<dyn PageStore>, String)> {
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
pub(super) fn sized_frames(
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
pub(super) fn new_engine(
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

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    let args = match cmd {
        BenchCommand::Tpcb(args) => args,
        BenchCommand::Tatp(args) => return super::bench_tatp::run(args),
        BenchCommand::Tpcc(args) => return tpcc::run(args),
        BenchCommand::Tpch(args) => return tpch::run(args),
    };
    if args.scale == 0 || args.terminals == 0 || args.accounts_per_branch == 0 {
        bail!("--scale, --terminals and --accounts-per-branch must be at least 1");
    }
    let (until, virtual_clock) = run_plan(&args)?;
    let plan = args.results.plan()?;
    // Someone else's file is refused before anything opens, sizes or writes it (and the run
    // that creates the file then finds its own database in it).
    if let (Some(path), "file", false) = (&args.path, args.storage.as_str(), args.force) {
        lab::filelock::hold(path, "--path")?;
        refuse_foreign_file(path)?;
    }
    // Accounts and tellers are numbered by 32-bit ids.
    let accounts = u64::from(args.scale) * u64::from(args.accounts_per_branch);
    limits::in_range(
        "--scale x --accounts-per-branch",
        accounts,
        1,
        u64::from(u32::MAX),
        "accounts are numbered by 32-bit ids",
    )?;
    let cfg = TpcbConfig {
        scale: args.scale,
        tellers_per_branch: 10,
        accounts_per_branch: args.accounts_per_branch,
    };
    let (store, storage_name) = page_store(&args)?;
    let frames = sized_frames(
        &args,
        &*store,
        cfg.db_pages_estimate(args.page_size),
        &format!("TPC-B scale {}", args.scale),
    )?;
    let ecfg = EngineConfig {
        buffer_frames: frames,
        ..EngineConfig::default()
    };

    // Reuse a database the file already holds; otherwise create and load.
    let wall = Instant::now();
    let reuse = args.storage == "file" && args.path.as_ref().is_some_and(|p| p.exists());
    let existing = if reuse {
        Engine::open(
            Box::new(BlockPageStore::new(device(&args)?, args.page_size, None)?),
            ecfg.clone(),
        )
        .ok()
    } else {
        None
    };
    let method = args.load.unwrap_or_default();
    let (e, h, load): (Engine, Handles, &'static str) = match existing {
        Some(mut e) if Handles::get(&e).is_ok() => {
            let h = Handles::get(&e)?;
            e.set_now(0);
            eprintln!(
                "reusing the TPC-B database in {}",
                args.path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
            drop(store);
            (e, h, "reused")
        }
        _ => {
            let mut e = Engine::create(store, ecfg)?;
            let bar = ProgressBar::new(cfg.rows());
            bar.set_style(
                ProgressStyle::with_template("loading {wide_bar} {pos}/{len} rows ({eta})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            let h = tpcb::load_using(&mut e, cfg, tpcb::DDL, method, |n| bar.set_position(n))?;
            bar.finish_and_clear();
            e.checkpoint()?;
            (e, h, method.name())
        }
    };
    let load_s = wall.elapsed().as_secs_f64();

    let before = (snapshot(&e), e.buffer_stats(), e.lock_stats());
    let start_ns = e.now();
    let mut terms: Vec<TpcbTerminal> = (0..args.terminals)
        .map(|i| TpcbTerminal::new(i, h, cfg, args.seed, args.txns))
        .collect();
    if plan.is_some() {
        terms.iter_mut().for_each(|t| t.events = Some(Vec::new()));
    }
    let cpu0 = Instant::now();
    let (mut e, mut terms, virtual_ns, forces, marks) = run_terminals(
        e,
        terms,
        start_ns,
        until,
        virtual_clock,
        plan.as_ref().map(|p| p.window_ns),
    )?;
    let run_wall_s = cpu0.elapsed().as_secs_f64();
    let committed: u64 = terms.iter().map(|t| t.committed).sum();
    let aborted: u64 = terms.iter().map(|t| t.aborted).sum();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    for t in &terms {
        hist.add(&t.latency_ns)?;
    }
    let after = (snapshot(&e), e.buffer_stats(), e.lock_stats());
    let secs = if virtual_clock {
        virtual_ns as f64 / 1e9
    } else {
        run_wall_s
    };
    let (check, problems) = if args.check {
        let rep = tpcb::check(&mut e, cfg)?;
        (if rep.passed() { "passed" } else { "failed" }, rep.problems)
    } else {
        ("skipped", vec![])
    };
    let res = BenchResult {
        workload: "tpcb",
        storage: storage_name,
        clock: args.clock.clone(),
        scale: args.scale,
        accounts_per_branch: args.accounts_per_branch,
        terminals: args.terminals,
        seed: args.seed,
        page_bytes: args.page_size,
        committed,
        aborted,
        throughput_tps: if secs > 0.0 {
            committed as f64 / secs
        } else {
            0.0
        },
        virtual_seconds: virtual_ns as f64 / 1e9,
        latency_us: latency_us(&hist),
        per_txn: per_txn(&before.0, &after.0, committed, secs),
        buffer: buffer(frames, &before.1, &after.1),
        lock_waits: after.2.waits - before.2.waits,
        group_commit_forces: forces,
        consistency: consistency(
            &before.0,
            &after.0,
            (secs * 1e9) as u64,
            args.terminals,
            until.is_some(),
            &hist,
        ),
        check,
        check_problems: problems,
        load,
        slc_cache: slc_cache(&before.0, &after.0),
    };
    if let Some(p) = &plan {
        let events = terms
            .iter_mut()
            .flat_map(|t| t.events.take().unwrap_or_default())
            .collect();
        write_results(
            p,
            &res,
            "tpcb",
            f64::from(res.scale),
            res.terminals,
            secs,
            marks,
            events,
            &["tpcb"],
        )?;
    }
    if super::common::emit_json(args.json.as_deref(), &res)? {
        println!(
            "tpcb on {} ({} clock): scale {}, {} terminals, seed {}",
            res.storage, res.clock, res.scale, res.terminals, res.seed
        );
        println!(
            "  committed {} aborted {}  throughput {:.1} tx/s over {:.3} s",
            committed, aborted, res.throughput_tps, secs
        );
        print_latency(&res.latency_us);
        print_per_txn(&res.per_txn);
        println!(
            "  buffer ({} frames): hits {} misses {} evictions {} writebacks {}; lock waits {}",
            frames,
            res.buffer.hits,
            res.buffer.misses,
            res.buffer.evictions,
            res.buffer.writebacks,
            res.lock_waits
        );
        print_consistency(&res.consistency);
        if let Some(c) = &res.slc_cache {
            print_slc_cache(c);
        }
        print_check(res.check, &res.check_problems);
        if committed > 0 {
            println!(
                "  host: load {:.2} s ({}); run {:.3} s wall, {:.2} us wall per committed transaction",
                load_s,
                res.load,
                run_wall_s,
                run_wall_s * 1e6 / committed as f64
            );
        }
    }
    if res.check == "failed" {
        bail!("the TPC-B check failed");
    }
    Ok(())
}

/// The latency line of every bench verb's human output.
pub(super) fn print_latency(l: &LatencyUs) {
    println!(
        "  latency us: mean {:.1} p50 {:.1} p95 {:.1} p99 {:.1} max {:.1}",
        l.mean, l.p50, l.p95, l.p99, l.max
    );
}

/// The per-transaction lines of every bench verb's human output.
pub(super) fn print_per_txn(p: &PerTxn) {
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
pub(super) fn print_check(check: &str, problems: &[String]) {
    if problems.is_empty() {
        println!("  check: {check}");
    } else {
        println!("  check: {check} {problems:?}");
    }
}
