//! `noftl iaa compare`: the IAA paper's free-space sweep (Miyaji, Sun and Takeuchi, "IAA"
//! Figs. 11 and 12; docs/iaa.md): per device free-space level and scheme (conventional, IAA,
//! U2DI, IAA+U2DI), the random Insert/Delete/Update workload of `kits::iaa` on the page FTL or
//! the native (NoFTL) store, in virtual time.
//!
//! Each run: a fresh device; the table loaded at the size that leaves the asked free space of
//! the store's logical capacity (table, index, log and master record count as used); a warm-up
//! that writes `--warmup` times the device's capacity, so that GC is in its steady state; then
//! the measured window (`--duration` of virtual time, the same scheduler, measurement window,
//! snapshots and `consistency` object as `noftl bench`). Runs are independent and spread over
//! `--jobs` threads; each is a function of its parameters and the seed, so the output does not
//! depend on the thread count.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use ftl::FtlOptions;
use hdrhistogram::Histogram;
use kits::iaa::{IaaConfig, IaaTerminal, Scheme};
use nand::Nand;
use serde::Serialize;
use storage::measure::Consistency;
use storage::native::{NativeConfig, NativeStore};
use storage::sched::{run_virtual, VirtualOptions};

use lab::runner::run_virtual_marked;
use storage::{BlockPageStore, Engine, EngineConfig, PageStore};

use super::bench::print_consistency;
use super::common::{parse_percent, DeviceArgs};
use lab::measure::{consistency, per_txn, snapshot};
use lab::units::parse_duration_ns;

#[derive(Debug, Subcommand)]
pub enum IaaCommand {
    /// The free-space sweep of the IAA paper: throughput, energy, erases and GC copies per
    /// scheme, with the ratios to conventional.
    Compare(CompareArgs),
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Device free-space levels (share of the store's logical capacity holding no live data).
    #[arg(long, value_delimiter = ',', default_value = "10%,20%,30%,40%,50%", value_parser = parse_percent)]
    pub free: Vec<f64>,
    /// Schemes: conventional, iaa, u2di, iaa+u2di.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "conventional,iaa,u2di,iaa+u2di"
    )]
    pub schemes: Vec<String>,
    /// The store: page (the page-mapped FTL behind the block interface) | dftl | native (NoFTL).
    #[arg(long = "store", visible_alias = "storage", default_value = "page")]
    pub storage: String,
    /// A preset from presets/ (noftl13, mt29f16g08, mlc16k, tlc16k, tiny).
    #[arg(long, default_value = nand::DEFAULT_PRESET)]
    pub preset: String,
    /// Override a device config field, e.g. --set geometry.blocks_per_plane=1024. Without an
    /// override of blocks_per_plane the sweep uses 256 blocks per plane (64 MiB on noftl13),
    /// so that the default sweep runs in about two minutes.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Over-provisioning of the FTL (and the native store) as a spare factor.
    #[arg(long, value_parser = parse_percent, default_value = "7%")]
    pub op: f64,
    /// Bytes per row as stored.
    #[arg(long, default_value_t = 256)]
    pub row_bytes: usize,
    /// Relative probabilities of Insert, Delete and Update.
    #[arg(long, value_delimiter = ',', default_value = "1,1,1")]
    pub mix: Vec<u32>,
    /// Share of the table's pages' record space the rows fill (the rest are holes that IAA
    /// and next fit reuse).
    #[arg(long, value_parser = parse_percent, default_value = "85%")]
    pub density: f64,
    /// Terminals: concurrent streams of Insert/Delete/Update transactions (1 to 256).
    #[arg(long, default_value_t = 4)]
    pub terminals: u32,
    /// Measured window, virtual time.
    #[arg(long, default_value = "2s")]
    pub duration: String,
    /// Warm-up writes, in multiples of the device's logical capacity.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Buffer pool frames (default: as `noftl bench`, 2% of the table's pages, at least 256).
    #[arg(long)]
    pub buffer_pages: Option<usize>,
    /// DB page size in bytes (4096; 16384 needs 16 KiB flash pages for IAA to name DB pages).
    #[arg(long, default_value_t = 4096)]
    pub page_size: usize,
    /// GC victims the engine has the flash commit to at first (it commits more, up to 8, when
    /// every hinted page had its record).
    #[arg(long, default_value_t = ftl::iaa::DEFAULT_COMMITTED_VICTIMS)]
    pub victims: u32,
    /// The most GC victims the engine has the flash commit to.
    #[arg(long, default_value_t = storage::iaa::MAX_COMMITTED_VICTIMS)]
    pub max_victims: u32,
    /// Seed of the table's rows and of the terminals' transaction inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs in parallel.
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// Verify the table, its index and the engine's structures after each run.
    #[arg(long)]
    pub check: bool,
    /// Write the JSON result to this file ("-" or no value: standard output, instead of the
    /// human report).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<PathBuf>,
    /// docs/results.md: one samples.csv row per window of every run's measured window.
    #[command(flatten)]
    pub results: crate::cli::common::ResultsArgs,
}

/// One run's figures (the JSON row).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
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
    pub relative: Relative,
    pub rows: u64,
    pub buffer_frames: usize,
    pub iaa: storage::iaa::IaaStats,
    pub consistency: Consistency,
    pub check: &'static str,
    pub check_problems: Vec<String>,
    /// With --results: the measured window's marks and queries.
    #[serde(skip)]
    pub trace: Option<lab::results::Trace>,
}

/// Ratios to the conventional scheme at the same free space (1 for conventional itself).
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Relative {
    pub throughput: Option<f64>,
    pub energy: Option<f64>,
    pub erases: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Output {
    workload: &'static str,
    storage: String,
    preset: String,
    set: Vec<String>,
    row_bytes: usize,
    mix: Vec<u32>,
    terminals: u32,
    duration: String,
    warmup: f64,
    seed: u64,
    rows: Vec<Row>,
}

pub fn run(cmd: IaaCommand) -> anyhow::Result<()> {
    match cmd {
        IaaCommand::Compare(a) => compare(a),
    }
}

/// The device of a run: the preset with the overrides, 512 blocks per plane unless overridden.
pub fn device_args(a: &CompareArgs) -> DeviceArgs {
    let mut set = a.set.clone();
    if !set.iter().any(|s| s.contains("blocks_per_plane")) {
        set.push("geometry.blocks_per_plane=256".into());
    }
    DeviceArgs {
        preset: a.preset.clone(),
        config: None,
        set,
    }
}

pub(super) fn schemes(a: &CompareArgs) -> anyhow::Result<Vec<Scheme>> {
    let mut out = Vec::new();
    for s in &a.schemes {
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

pub(super) fn checked(a: &CompareArgs) -> anyhow::Result<()> {
    if !["page", "dftl", "native"].contains(&a.storage.as_str()) {
        bail!(
            "--storage is page, dftl or native, not '{}' (IAA needs an FTL that answers the GC information queries, or NoFTL)",
            a.storage
        );
    }
    if a.mix.len() != 3 {
        bail!("--mix takes three weights: Insert, Delete, Update (e.g. 1,1,1)");
    }
    if a.terminals == 0 || a.terminals > 256 {
        bail!("--terminals is 1..256");
    }
    if !(1..=storage::iaa::MAX_COMMITTED_VICTIMS).contains(&a.max_victims)
        || !(1..=a.max_victims).contains(&a.victims)
    {
        bail!(
            "--victims and --max-victims: 1 <= victims <= max-victims <= {}",
            storage::iaa::MAX_COMMITTED_VICTIMS
        );
    }
    if a.jobs == 0 {
        bail!("--jobs is at least 1");
    }
    if !(0.05..=0.98).contains(&a.density) {
        bail!("--density is between 5% and 98%");
    }
    if !(0.0..=20.0).contains(&a.warmup) {
        bail!("--warmup is between 0 and 20 device capacities");
    }
    if a.buffer_pages.is_some_and(|b| !(16..=1 << 22).contains(&b)) {
        bail!("--buffer-pages is between 16 and 4,194,304");
    }
    for &f in &a.free {
        if !(0.02..=0.9).contains(&f) {
            bail!(
                "--free levels are between 2% and 90%, not {:.0}%",
                f * 100.0
            );
        }
    }
    parse_duration_ns(&a.duration)?;
    Ok(())
}

/// A fresh store of `--storage` on the device, and its logical capacity in bytes.
fn build_store(a: &CompareArgs) -> anyhow::Result<(Box<dyn PageStore>, u64)> {
    let cfg = device_args(a).load()?;
    let seed = cfg.seed;
    let nand = Nand::new(cfg)?;
    // A log of 1/32 of the device (at least 512 blocks, 2 MiB: a load batch of 2,000 rows fits): enough for the checkpoints to keep up
    // with single-row transactions, small enough that the table is what fills the device.
    let lpns = nand.geometry().capacity_bytes() / ftl::LOGICAL_PAGE_BYTES as u64;
    let log_blocks = (lpns / 32).max(512);
    let store: Box<dyn PageStore> = if a.storage == "native" {
        Box::new(NativeStore::format(
            nand,
            NativeConfig {
                page_bytes: a.page_size,
                log_blocks: Some(log_blocks),
                spare_factor: a.op,
                seed,
                ..NativeConfig::default()
            },
        )?)
    } else {
        let opts = FtlOptions {
            spare_factor: a.op,
            seed,
            ..FtlOptions::default()
        };
        let dev = ftl::build(&a.storage, nand, &opts)?;
        Box::new(BlockPageStore::new(dev, a.page_size, Some(log_blocks))?)
    };
    let capacity_bytes = store.db_pages() * store.page_bytes() as u64
        + (store.log_blocks() + 2) * storage::pagestore::LOG_BLOCK_BYTES as u64;
    Ok((store, capacity_bytes))
}

/// Rows that leave `free` of `capacity_bytes` unused: the table's pages (rows at `density` of a
/// page's record space), its index (about 1/12 of the heap: 8-byte keys and 6-byte record ids
/// per 256-byte row plus B-tree slack, counted from the index's own pages on a test load), the
/// log and the master record.
pub fn rows_for(a: &CompareArgs, capacity_bytes: u64, free: f64, log_bytes: u64) -> u64 {
    let page = a.page_size as f64;
    let per_row = (a.row_bytes + 4) as f64;
    let rows_per_page = ((page - 64.0) / per_row).floor().max(1.0) * a.density;
    let index_per_row = 40.0; // key 8 + rid 6 + slot 4 + prefix and fill slack
    let usable = (capacity_bytes as f64 * (1.0 - free) - log_bytes as f64).max(page * 64.0);
    let per_row_bytes = page / rows_per_page + index_per_row;
    (usable / per_row_bytes).floor().max(64.0) as u64
}

/// One run of the sweep; with `sample_ns`, its measured window's marks every `sample_ns` and
/// its queries (`Row::trace`).
pub fn run_one(
    a: &CompareArgs,
    free: f64,
    scheme: Scheme,
    sample_ns: Option<u64>,
) -> anyhow::Result<Row> {
    let (store, capacity_bytes) = build_store(a)?;
    let log_bytes = (store.log_blocks() + 2) * storage::pagestore::LOG_BLOCK_BYTES as u64;
    let cfg = IaaConfig {
        rows: rows_for(a, capacity_bytes, free, log_bytes),
        row_bytes: a.row_bytes,
        weights: [a.mix[0], a.mix[1], a.mix[2]],
        slack: 0.02,
        density: a.density,
        scheme,
    };
    let rows_per_page = (a.page_size - 64) / (a.row_bytes + 4);
    let table_pages = cfg.rows / rows_per_page.max(1) as u64;
    let frames = a
        .buffer_pages
        .unwrap_or(((table_pages as f64 * 0.02) as usize).max(256));
    let mut e = Engine::create(
        store,
        EngineConfig {
            buffer_frames: frames,
            ..EngineConfig::default()
        },
    )?;
    e.set_iaa_victims(a.victims, a.max_victims);
    let h = kits::iaa::load(&mut e, &cfg, |_| {})?;
    e.checkpoint()?;
    let mut terms: Vec<IaaTerminal> = (0..a.terminals)
        .map(|i| IaaTerminal::new(i, a.terminals, h, cfg, a.seed, None))
        .collect();
    // Warm-up: until the host wrote `warmup` device capacities, so that GC is steady.
    let page_writes = |e: &Engine| {
        e.store()
            .device_report()
            .map_or(0, |r| r.host.writes * ftl::LOGICAL_PAGE_BYTES as u64)
    };
    let want_bytes = (a.warmup * capacity_bytes as f64) as u64;
    let w0 = page_writes(&e);
    let chunk = 2_000u64;
    while page_writes(&e) - w0 < want_bytes {
        for t in terms.iter_mut() {
            t.reset_counters(Some(chunk / u64::from(a.terminals) + 1));
        }
        let start = e.now();
        run_virtual(&mut e, &mut terms, start, VirtualOptions::default())?;
    }
    // The measured window.
    let until = parse_duration_ns(&a.duration)?;
    for t in terms.iter_mut() {
        t.reset_counters(None);
        // Only the measured window's queries are recorded (with --results).
        t.events = sample_ns.map(|_| Vec::new());
    }
    let stats0 = e.iaa_stats();
    let before = snapshot(&e);
    let start = e.now();
    let (st, marks) = run_virtual_marked(
        &mut e,
        &mut terms,
        start,
        VirtualOptions {
            until_ns: Some(start + until),
            ..VirtualOptions::default()
        },
        sample_ns,
    )?;
    let trace = sample_ns.map(|_| {
        lab::results::Trace::of_terminals(
            vec![format!("{}", r3(free * 100.0)), scheme.name().to_string()],
            marks,
            terms.iter_mut().map(|t| t.events.take()),
        )
    });
    let after = snapshot(&e);
    let elapsed_ns = st.elapsed_ns();
    let secs = elapsed_ns as f64 / 1e9;
    let committed: u64 = terms.iter().map(|t| t.committed).sum();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    for t in &terms {
        hist.add(&t.latency_ns)?;
    }
    let c = consistency(&before, &after, elapsed_ns, a.terminals, true, &hist);
    let p = per_txn(&before, &after, committed, secs);
    let stats1 = e.iaa_stats();
    let (check, problems) = if a.check {
        e.quiesce()?;
        let expected: Vec<(i64, i64)> = terms.iter().flat_map(|t| t.rows().to_vec()).collect();
        let rep = kits::iaa::check(&mut e, &cfg, &expected)?;
        (if rep.passed() { "passed" } else { "failed" }, rep.problems)
    } else {
        ("skipped", vec![])
    };
    let host_gib_per_query =
        p.host_page_writes * ftl::LOGICAL_PAGE_BYTES as f64 / f64::from(1u32 << 30);
    Ok(Row {
        free_space: free,
        scheme: scheme.name(),
        storage: a.storage.clone(),
        queries: committed,
        virtual_seconds: secs,
        throughput_qps: if secs > 0.0 {
            committed as f64 / secs
        } else {
            0.0
        },
        energy_joules_per_query: p.energy_joules,
        gc_copies_per_host_write: if p.host_page_writes > 0.0 {
            p.gc_migrations / p.host_page_writes
        } else {
            0.0
        },
        erases_per_host_gib: if host_gib_per_query > 0.0 {
            p.flash_erases / host_gib_per_query
        } else {
            0.0
        },
        erases_per_kquery: p.flash_erases * 1000.0,
        host_writes_per_query: p.host_page_writes,
        flash_programs_per_query: p.flash_programs,
        flash_pad_programs_per_query: p.flash_pad_programs,
        gc_copies_per_query: p.gc_migrations,
        log_forces_per_query: p.log_forces,
        relative: Relative::default(),
        rows: cfg.rows,
        buffer_frames: frames,
        iaa: diff(stats0, stats1),
        consistency: c,
        check,
        check_problems: problems,
        trace,
    })
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
            r.relative = Relative {
                throughput: ratio(r.throughput_qps, b.throughput_qps),
                energy: ratio(r.energy_joules_per_query, b.energy_joules_per_query),
                erases: ratio(r.erases_per_kquery, b.erases_per_kquery),
            };
        }
    }
}

fn compare(a: CompareArgs) -> anyhow::Result<()> {
    checked(&a)?;
    let schemes = schemes(&a)?;
    if let Some(p) = &a.json {
        lab::output::check_writable(p)?;
    }
    let plan = a.results.plan()?;
    let sample_ns = plan.as_ref().map(|p| p.window_ns);
    // Refuse a bad device before any thread starts.
    device_args(&a).load().context("the sweep's device")?;
    let jobs: Vec<(f64, Scheme)> = a
        .free
        .iter()
        .flat_map(|&f| schemes.iter().map(move |&s| (f, s)))
        .collect();
    let bar = indicatif::ProgressBar::new(jobs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("iaa compare {wide_bar} {pos}/{len} runs ({eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<(usize, anyhow::Result<Row>)>> =
        std::sync::Mutex::new(Vec::new());
    // The dashboard's live points (if it runs this sweep): one series per run, from the
    // worker threads.
    let live = lab::results::live_hook();
    std::thread::scope(|s| {
        for _ in 0..a.jobs.min(jobs.len()) {
            s.spawn(|| loop {
                lab::results::set_live(live.clone());
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(&(f, sc)) = jobs.get(i) else {
                    break;
                };
                lab::results::set_live_series(&series_name(f, sc));
                let r = run_one(&a, f, sc, sample_ns);
                bar.inc(1);
                results.lock().expect("no worker panics").push((i, r));
            });
        }
    });
    bar.finish_and_clear();
    let mut results = results.into_inner().expect("no worker panics");
    results.sort_by_key(|(i, _)| *i);
    let mut rows = Vec::new();
    for (i, r) in results {
        let (f, s) = jobs[i];
        rows.push(
            r.with_context(|| format!("run at {:.0}% free, scheme {}", f * 100.0, s.name()))?,
        );
    }
    relate(&mut rows);
    let traces: Vec<Option<lab::results::Trace>> =
        rows.iter_mut().map(|r| r.trace.take()).collect();
    let out = Output {
        workload: "iaa",
        storage: a.storage.clone(),
        preset: a.preset.clone(),
        set: device_args(&a).set,
        row_bytes: a.row_bytes,
        mix: a.mix.clone(),
        terminals: a.terminals,
        duration: a.duration.clone(),
        warmup: a.warmup,
        seed: a.seed,
        rows,
    };
    if let Some(p) = &plan {
        write_results(p, &a, &out, &traces)?;
    }
    if super::common::emit_json(a.json.as_deref(), &out)? {
        print_table(&out);
    }
    if out.rows.iter().any(|r| r.check == "failed") {
        bail!("a run's check failed");
    }
    Ok(())
}

/// The dashboard's name of a run's series: its free space and scheme.
fn series_name(free: f64, scheme: Scheme) -> String {
    format!("{}% {}", r3(free * 100.0), scheme.name())
}

/// The result directory of `iaa compare` (docs/results.md): summary.json (the JSON result with
/// BenchBase's names per row; the table's rows are each row's `scalefactor`, as the sweep's
/// table size follows its free space), samples.csv and raw.csv with a row per window or query
/// of every run (`free_percent`, `scheme`).
fn write_results(
    plan: &lab::results::Plan,
    a: &CompareArgs,
    out: &Output,
    traces: &[Option<lab::results::Trace>],
) -> anyhow::Result<()> {
    use lab::results as r;
    let mut v = serde_json::to_value(out)?;
    for (i, t) in traces.iter().enumerate() {
        let Some(t) = t else { continue };
        let secs = t.end_ns().saturating_sub(t.start_ns()) as f64 / 1e9;
        if let Some(obj) = v["rows"].get_mut(i).and_then(|x| x.as_object_mut()) {
            obj.extend(r::benchbase(&t.events, secs));
            let rows = obj["rows"].clone();
            obj.insert("scalefactor".into(), rows);
        }
    }
    let mut keys = r::common_keys("iaa", 0.0, a.terminals, plan);
    keys.remove("scalefactor");
    r::write_summary(&plan.dir, &v, keys)?;
    let all: Vec<r::Trace> = traces.iter().flatten().cloned().collect();
    r::write_txn_series(
        plan,
        &all,
        &["free_percent", "scheme"],
        &kits::iaa::QUERY_TYPES,
    )
}

fn print_table(o: &Output) {
    println!(
        "iaa compare on {} ({}; {} B rows, mix I/D/U {:?}, {} terminals, {} virtual per run)",
        o.storage, o.preset, o.row_bytes, o.mix, o.terminals, o.duration
    );
    println!(
        "{:>5} {:<13} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7}",
        "free",
        "scheme",
        "qps",
        "uJ/query",
        "copies/w",
        "erase/GiB",
        "er/kq",
        "x qps",
        "x J",
        "x erase"
    );
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    for r in &o.rows {
        println!(
            "{:>4.0}% {:<13} {:>9.0} {:>9.1} {:>9.3} {:>9.1} {:>9.2} {:>7} {:>7} {:>7}",
            r.free_space * 100.0,
            r.scheme,
            r.throughput_qps,
            r.energy_joules_per_query * 1e6,
            r.gc_copies_per_host_write,
            r.erases_per_host_gib,
            r.erases_per_kquery,
            f(r.relative.throughput),
            f(r.relative.energy),
            f(r.relative.erases),
        );
        if r.check != "skipped" {
            println!("       check: {} {:?}", r.check, r.check_problems);
        }
        if !r.consistency.is_ok() {
            print_consistency(&r.consistency);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(subcommand)]
        c: IaaCommand,
    }

    fn args(extra: &[&str]) -> CompareArgs {
        let mut v = vec!["t", "compare"];
        v.extend_from_slice(extra);
        match T::try_parse_from(v).unwrap().c {
            IaaCommand::Compare(a) => a,
        }
    }

    /// A CI-sized sweep point on both stores: every run checks (table, index, engine), its
    /// window is consistent, and IAA+U2DI leaves GC fewer copies per host write than the
    /// conventional scheme (the mechanism works; its size is in docs/PERFORMANCE.md).
    #[test]
    fn a_small_sweep_point_runs_checks_and_iaa_cuts_gc_copies() {
        for storage in ["page", "native"] {
            let a = args(&[
                "--storage",
                storage,
                "--set",
                "geometry.blocks_per_plane=192",
                "--duration",
                "300ms",
                "--warmup",
                "1.0",
                "--terminals",
                "2",
                "--check",
            ]);
            checked(&a).unwrap();
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
    fn bad_arguments_are_refused_with_errors() {
        assert!(checked(&args(&["--storage", "fast"])).is_err());
        assert!(checked(&args(&["--mix", "1,1"])).is_err());
        assert!(checked(&args(&["--free", "95%"])).is_err());
        assert!(schemes(&args(&["--schemes", "lru"])).is_err());
        assert!(T::try_parse_from(["t", "compare", "--free", "abc"]).is_err());
    }
}
