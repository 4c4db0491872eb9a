//! `noftl ipa compare`: IPA Table I (the IPA demo, ICDE 2017; docs/ipa.md): the same OLTP
//! workload on the NoFTL store without In-Place Appends and with them, globally (every object in
//! one IPA region) and selectively (the objects with small, frequent updates in an IPA region),
//! in steady state, with the statistics the table reports: host reads and writes in flash
//! pages, the share of writes done as appends, GC page migrations and erases per host write,
//! throughput, and the space the delta areas take.
//!
//! Each row runs on a fresh device of the same config and seed: format, regions, load, a
//! checkpoint, a warm-up (`--warmup` of virtual time, so that GC works in its steady state),
//! then the measured window (`--duration`) with the scheduler, snapshots and `consistency`
//! object of `noftl bench`. Control rows (`regions`, `global`) place the same objects in the
//! same regions with the same cells (pSLC on MLC/TLC chips) and no appends, so that what pSLC
//! alone does is not credited to IPA.

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use hdrhistogram::Histogram;
use kits::tatp::{self, TatpConfig, TatpTerminal};
use kits::tpcb::{self, TpcbConfig, TpcbTerminal};
use kits::tpcc::{self, TpccConfig, TpccTerminal};
use nand::{CellMode, Nand, OpKind, Purpose};
use serde::Serialize;
use storage::ipa::IpaScheme;
use storage::measure::Consistency;
use storage::native::{NativeConfig, NativeStore};
use storage::{Engine, EngineConfig, PageStore};

use super::common::{parse_percent, DeviceArgs};
use lab::measure::{consistency, snapshot};
use lab::runner::run_terminals;

#[derive(Debug, Subcommand)]
pub enum IpaCommand {
    /// IPA Table I: baseline, global IPA and selective IPA (regions) side by side.
    Compare(IpaCompareArgs),
    /// The IPA advisor: runs the baseline and measures, per object, what each page write-back
    /// changed; recommends the objects for an IPA region, the scheme and the DDL.
    Advise(IpaCompareArgs),
}

/// The device of the default comparison (see `--set`).
pub const DEFAULT_GEOMETRY: [&str; 4] = [
    "geometry.channels=2",
    "geometry.chips_per_channel=2",
    "geometry.blocks_per_plane=32",
    "geometry.pages_per_block=64",
];

/// The configurations a comparison can run.
pub const CONFIGS: [&str; 7] = [
    "baseline",
    "regions",
    "ipa-regions",
    "advised",
    "ipa-advised",
    "global",
    "ipa-global",
];

#[derive(Debug, Args)]
pub struct IpaCompareArgs {
    /// tatp | tpcb | tpcc
    #[arg(long, default_value = "tatp")]
    pub workload: String,
    /// TATP: subscribers; TPC-B: branches (with --accounts-per-branch accounts each); TPC-C:
    /// warehouses.
    #[arg(long)]
    pub scale: Option<u32>,
    /// TPC-B: accounts per branch.
    #[arg(long, default_value_t = 100_000)]
    pub accounts_per_branch: u32,
    /// A preset from presets/ (mlc16k, tlc16k: the IPA region in pSLC; noftl13, tiny: SLC).
    #[arg(long, default_value = "mlc16k")]
    pub preset: String,
    /// Override a device config field. Without a geometry override the comparison runs on a
    /// small device of the preset's chips: 2 channels x 2 chips, 32 blocks per plane of 64
    /// pages (256 MiB of MLC on mlc16k), so that TATP's default 40,000 subscribers fill the
    /// one-chip IPA region enough for its GC to work, and the default run takes minutes.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// DB page size in bytes (default: the device's flash page, as IPA Table I's 16 KB pages).
    #[arg(long)]
    pub page_size: Option<usize>,
    /// Spare factor of the store and of its regions.
    #[arg(long, value_parser = parse_percent, default_value = "10%")]
    pub op: f64,
    /// Chips of the IPA region of `ipa-regions` (and of `regions`); `ipa-global` takes every
    /// chip but one, which keeps the log and the store's metadata.
    #[arg(long, default_value_t = 1)]
    pub region_chips: u32,
    /// The IPA scheme NxM: N appends per page between out-of-place writes, M records each.
    #[arg(long, default_value = "2x3")]
    pub scheme: String,
    /// Bytes a delta record is sized for.
    #[arg(long, default_value_t = 32)]
    pub record_bytes: u16,
    /// Rows to run (baseline, regions, ipa-regions, global, ipa-global); ipa-regions and regions
    /// are TATP's (Subscriber and Special_Facility in the region); `regions` and `global` are
    /// the control rows: the same layout and cells as their IPA row, without appends.
    #[arg(long = "store", visible_alias = "configs", value_delimiter = ',')]
    pub configs: Option<Vec<String>>,
    /// Terminals: concurrent transaction streams of each run.
    #[arg(long, default_value_t = 1)]
    pub terminals: u32,
    /// Warm-up before the measured window, virtual time.
    #[arg(long, default_value = "10s")]
    pub warmup: String,
    /// Measured window, virtual time.
    #[arg(long, default_value = "20s")]
    pub duration: String,
    /// Runs per row (seeds seed, seed + 1, ...): the throughput's standard deviation.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Buffer pool frames (default: 2% of the database's pages, at least 64).
    #[arg(long)]
    pub buffer_pages: Option<usize>,
    /// Seed of each row's device, database and transaction inputs (run k of --repeat: seed + k).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the JSON result to this file ("-" or no value: standard output, instead of the
    /// human report).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<std::path::PathBuf>,
    /// `ipa compare` only (docs/results.md): one samples.csv row per window of every row's
    /// measured run.
    #[command(flatten)]
    pub results: crate::cli::common::ResultsArgs,
}

#[derive(Debug, Serialize, Clone)]
struct Row {
    config: String,
    /// Flash pages read and written for the engine (written: out of place plus appends).
    host_reads: u64,
    host_writes: u64,
    ipa_appends: u64,
    /// Share of host writes done as appends, percent.
    append_percent: f64,
    gc_migrations: u64,
    gc_erases: u64,
    gc_migrations_per_host_write: f64,
    gc_erases_per_host_write: f64,
    throughput_tps: f64,
    stdev: f64,
    /// Bytes of delta areas over the database's bytes.
    space_overhead: f64,
    /// Flash programs and erases of every purpose per transaction (wear).
    programs_per_txn: f64,
    erases_per_txn: f64,
    consistency: Consistency,
    /// With --results: the measured window's marks and transactions.
    #[serde(skip)]
    trace: Option<lab::results::Trace>,
}

#[derive(Debug, Serialize)]
struct Report {
    workload: String,
    scale: u32,
    preset: String,
    page_bytes: usize,
    scheme: String,
    record_bytes: u16,
    ipa_mode: &'static str,
    region_chips: u32,
    warmup_s: f64,
    duration_s: f64,
    repeat: u32,
    rows: Vec<Row>,
    /// Rows whose layout does not fit the device (e.g. every object in pSLC).
    not_run: Vec<NotRun>,
    /// The advised rows' layout: the tables the advisor gives IPA, and its scheme.
    advised_tables: Vec<String>,
    advised_scheme: Option<String>,
}

#[derive(Debug, Serialize)]
struct NotRun {
    config: String,
    why: String,
}

pub fn run(cmd: IpaCommand) -> anyhow::Result<()> {
    match cmd {
        IpaCommand::Compare(a) => compare(a),
        IpaCommand::Advise(a) => advise(a),
    }
}

/// Counters of one window's ends.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    host_reads: u64,
    host_programs: u64,
    host_appends: u64,
    programs: u64,
    erases: u64,
    gc_migrations: u64,
    gc_erases: u64,
}

fn counts(store: &dyn PageStore) -> Counts {
    let mut c = Counts::default();
    if let Some(n) = store.nand() {
        let st = n.stats();
        c.host_reads = st.get(OpKind::Read, Purpose::Host);
        c.host_programs = st.get(OpKind::Program, Purpose::Host);
        c.host_appends = st.get(OpKind::PartialProgram, Purpose::Host);
        c.programs = st.total(OpKind::Program) + st.total(OpKind::PartialProgram);
        c.erases = st.total(OpKind::Erase);
    }
    if let Some(r) = store.device_report() {
        c.gc_migrations = r.gc.migrations;
        c.gc_erases = r.gc.erases;
    }
    c
}

/// A workload the comparison runs: its load and its terminals.
enum Workload {
    Tatp(TatpConfig),
    Tpcb(TpcbConfig),
    Tpcc(TpccConfig),
}

impl Workload {
    fn pages_estimate(&self, page_bytes: usize) -> u64 {
        match self {
            Workload::Tatp(c) => c.db_pages_estimate(page_bytes),
            Workload::Tpcb(c) => c.db_pages_estimate(page_bytes),
            Workload::Tpcc(c) => c.db_pages_estimate(page_bytes),
        }
    }
}

/// Everything a comparison's rows share, checked before any row loads.
struct Setup {
    dev: nand::DeviceConfig,
    page_bytes: usize,
    scheme: IpaScheme,
    ipa_mode: &'static str,
    nop: u8,
    workload: Workload,
    configs: Vec<String>,
    warmup_ns: u64,
    duration_ns: u64,
    chips: u32,
    ipa_opts: String,
    op_percent: u32,
    /// The advisor's tables and scheme (from a profiled baseline run), for the advised rows.
    advised: Option<(Vec<String>, IpaScheme)>,
}

fn setup(a: &IpaCompareArgs) -> anyhow::Result<Setup> {
    let mut set = a.set.clone();
    if !set.iter().any(|s| s.starts_with("geometry.")) {
        set.extend(DEFAULT_GEOMETRY.iter().map(|s| s.to_string()));
    }
    let dev = DeviceArgs {
        preset: a.preset.clone(),
        config: None,
        set,
    }
    .load()?;
    let flash_page = dev.geometry.page_size_bytes as usize;
    let page_bytes = a.page_size.unwrap_or(flash_page.clamp(4096, 16384));
    let scheme = IpaScheme::parse(&a.scheme, a.record_bytes).map_err(anyhow::Error::msg)?;
    let ipa_mode = if dev.cell.native == CellMode::Slc {
        "SLC"
    } else {
        "pSLC"
    };
    // The region checks, made here so that a bad scheme is refused before any row loads.
    let nop = dev.nop_limit(if ipa_mode == "SLC" {
        CellMode::Slc
    } else {
        CellMode::Pslc
    });
    if u32::from(scheme.appends) + 1 > u32::from(nop) {
        bail!(
            "--scheme {}: a page and {} appends need {} programs; {ipa_mode} pages of {} allow {nop} (cell.nop)",
            scheme.label(),
            scheme.appends,
            u32::from(scheme.appends) + 1,
            a.preset
        );
    }
    if scheme.area_bytes() > page_bytes / 8 {
        bail!(
            "--scheme {} with {}-byte records takes {} bytes of each {page_bytes}-byte page; at most an eighth may go to deltas",
            scheme.label(),
            scheme.record_bytes,
            scheme.area_bytes()
        );
    }
    let workload = match a.workload.as_str() {
        "tatp" => Workload::Tatp(TatpConfig {
            subscribers: a.scale.unwrap_or(40_000),
        }),
        "tpcb" => Workload::Tpcb(TpcbConfig {
            accounts_per_branch: a.accounts_per_branch,
            ..TpcbConfig::spec(a.scale.unwrap_or(1))
        }),
        "tpcc" => Workload::Tpcc(TpccConfig::spec(a.scale.unwrap_or(1))),
        other => bail!("ipa compare runs tatp, tpcb or tpcc, not '{other}'"),
    };
    let configs: Vec<String> = match &a.configs {
        Some(c) => c.iter().map(|s| s.trim().to_ascii_lowercase()).collect(),
        None if matches!(workload, Workload::Tatp(_)) => {
            CONFIGS.iter().map(|s| s.to_string()).collect()
        }
        None => ["baseline", "advised", "ipa-advised", "global", "ipa-global"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    };
    for c in &configs {
        if !CONFIGS.contains(&c.as_str()) {
            bail!("--configs: '{c}' is not one of {}", CONFIGS.join(", "));
        }
        if !matches!(workload, Workload::Tatp(_)) && c.contains("regions") {
            bail!("--configs {c}: the regions layouts are TATP's (Subscriber and Special_Facility); TPC-B and TPC-C run baseline, global and ipa-global");
        }
    }
    if a.repeat == 0 || a.terminals == 0 {
        bail!("--repeat and --terminals must be at least 1");
    }
    let warmup_ns = lab::units::parse_duration_ns(&a.warmup)?;
    let duration_ns = lab::units::parse_duration_ns(&a.duration)?;
    let chips = dev.geometry.channels * dev.geometry.chips_per_channel;
    if a.region_chips == 0 || a.region_chips >= chips {
        bail!(
            "--region-chips {}: the device has {chips} chips and the default region keeps at least one",
            a.region_chips
        );
    }
    let ipa_opts = format!(
        "IPA_MODE={ipa_mode}, IPA_SCHEME={}, IPA_RECORD={}",
        scheme.label(),
        scheme.record_bytes
    );
    let op_percent = (a.op * 100.0).round() as u32;
    Ok(Setup {
        dev,
        page_bytes,
        scheme,
        ipa_mode,
        nop,
        workload,
        configs,
        warmup_ns,
        duration_ns,
        chips,
        ipa_opts,
        op_percent,
        advised: None,
    })
}

fn compare(a: IpaCompareArgs) -> anyhow::Result<()> {
    let mut st = setup(&a)?;
    let plan = a.results.plan()?;
    let sample_ns = plan.as_ref().map(|p| p.window_ns);
    if st.configs.iter().any(|c| c.ends_with("advised")) {
        // The advisor's layout, from a profiled run of the baseline (the same run `ipa advise`
        // makes), before the rows that use it.
        let mut profile = Vec::new();
        run_one(&a, &st, "baseline", a.seed, Some(&mut profile), None)
            .context("ipa compare, the advisor's baseline run")?;
        let rec = recommend(&profile, st.nop)?;
        let tables: Vec<String> = rec.tables().iter().map(|t| t.to_string()).collect();
        st.advised = Some((tables, rec.scheme));
    }
    let (workload, scheme, page_bytes, ipa_mode) =
        (&st.workload, st.scheme, st.page_bytes, st.ipa_mode);
    let (warmup_ns, duration_ns) = (st.warmup_ns, st.duration_ns);
    let mut rows = Vec::new();
    // Per row, its runs' traces (with --results).
    let mut traces: Vec<Vec<lab::results::Trace>> = Vec::new();
    let mut not_run = Vec::new();
    'configs: for config in &st.configs {
        if config.ends_with("advised") && st.advised.as_ref().is_some_and(|a| a.0.is_empty()) {
            not_run.push(NotRun {
                config: config.clone(),
                why: "the advisor gives no table IPA".into(),
            });
            continue;
        }
        let mut runs: Vec<(Row, f64)> = Vec::new();
        for k in 0..a.repeat {
            let seed = a.seed + u64::from(k);
            // The dashboard's live points (if it runs this comparison): one series per run.
            lab::results::set_live_series(&if a.repeat > 1 {
                format!("{config} #{}", k + 1)
            } else {
                config.clone()
            });
            match run_one(&a, &st, config, seed, None, sample_ns) {
                Ok(mut row) => {
                    if let Some(t) = row.trace.as_mut() {
                        t.labels = vec![config.clone(), (k + 1).to_string()];
                    }
                    let tps = row.throughput_tps;
                    runs.push((row, tps));
                }
                // A layout whose region cannot hold its objects (pSLC halves the chips'
                // capacity) is a result of its own: reported, and the other rows go on.
                Err(e) if format!("{e:#}").contains("is full") => {
                    not_run.push(NotRun {
                        config: config.clone(),
                        why: format!("{e:#}"),
                    });
                    continue 'configs;
                }
                Err(e) => return Err(e.context(format!("ipa compare, row {config}, seed {seed}"))),
            }
        }
        let n = runs.len() as f64;
        let mean = runs.iter().map(|r| r.1).sum::<f64>() / n;
        let var = runs.iter().map(|r| (r.1 - mean).powi(2)).sum::<f64>() / n;
        let mut row = runs[0].0.clone();
        row.throughput_tps = mean;
        row.stdev = var.sqrt();
        row.trace = None;
        traces.push(runs.into_iter().filter_map(|r| r.0.trace).collect());
        rows.push(row);
    }
    let report = Report {
        workload: a.workload.clone(),
        scale: match workload {
            Workload::Tatp(c) => c.subscribers,
            Workload::Tpcb(c) => c.scale,
            Workload::Tpcc(c) => c.warehouses,
        },
        preset: a.preset.clone(),
        page_bytes,
        scheme: scheme.label(),
        record_bytes: scheme.record_bytes,
        ipa_mode,
        region_chips: a.region_chips,
        warmup_s: warmup_ns as f64 / 1e9,
        duration_s: duration_ns as f64 / 1e9,
        repeat: a.repeat,
        rows,
        not_run,
        advised_tables: st.advised.as_ref().map(|a| a.0.clone()).unwrap_or_default(),
        advised_scheme: st
            .advised
            .as_ref()
            .map(|a| format!("{}/{}B", a.1.label(), a.1.record_bytes)),
    };
    if let Some(p) = &plan {
        write_results(p, &a, &report, &traces)?;
    }
    if super::common::emit_json(a.json.as_deref(), &report)? {
        print_table(&report);
    }
    Ok(())
}

/// The result directory of `ipa compare` (docs/results.md): summary.json (the JSON result with
/// BenchBase's names per row), samples.csv and raw.csv with a row per window or transaction of
/// every row (`config`) and run (`repeat`).
fn write_results(
    plan: &lab::results::Plan,
    a: &IpaCompareArgs,
    report: &Report,
    traces: &[Vec<lab::results::Trace>],
) -> anyhow::Result<()> {
    use lab::results as r;
    let mut v = serde_json::to_value(report)?;
    for (i, runs) in traces.iter().enumerate() {
        let events: Vec<storage::sched::TxnEvent> =
            runs.iter().flat_map(|t| t.events.iter().copied()).collect();
        let secs: f64 = runs
            .iter()
            .map(|t| t.end_ns().saturating_sub(t.start_ns()) as f64 / 1e9)
            .sum();
        if let Some(obj) = v["rows"].get_mut(i).and_then(|x| x.as_object_mut()) {
            obj.extend(r::benchbase(&events, secs));
        }
    }
    r::write_summary(
        &plan.dir,
        &v,
        r::common_keys(&a.workload, f64::from(report.scale), a.terminals, plan),
    )?;
    let all: Vec<r::Trace> = traces.iter().flatten().cloned().collect();
    let types: Vec<&str> = match a.workload.as_str() {
        "tatp" => tatp::TXN_TYPES.iter().map(|t| t.name()).collect(),
        "tpcc" => tpcc::input::Kind::ALL.iter().map(|k| k.name()).collect(),
        _ => vec!["tpcb"],
    };
    r::write_txn_series(plan, &all, &["config", "repeat"], &types)
}

fn run_one(
    a: &IpaCompareArgs,
    st: &Setup,
    config: &str,
    seed: u64,
    mut profile: Option<&mut Vec<ObjectProfile>>,
    sample_ns: Option<u64>,
) -> anyhow::Result<Row> {
    let (workload, page_bytes, chips, ipa_opts) =
        (&st.workload, st.page_bytes, st.chips, st.ipa_opts.as_str());
    let op_percent = st.op_percent;
    // The delta area the row's pages carry: the advised rows use the advisor's scheme.
    let scheme = match (&st.advised, config) {
        (Some((_, advised)), "ipa-advised") => *advised,
        _ => st.scheme,
    };
    let mut cfg = st.dev.clone();
    cfg.seed = seed;
    let mut store = NativeStore::format(
        Nand::new(cfg)?,
        NativeConfig {
            page_bytes,
            spare_factor: a.op,
            seed,
            ..NativeConfig::default()
        },
    )?;
    if config.ends_with("global") {
        let mut opts = vec![
            ("MAX_CHIPS".to_string(), (chips - 1).to_string()),
            ("OP".to_string(), format!("{op_percent}%")),
            ("DEFAULT".to_string(), "on".to_string()),
        ];
        // `global`, the control row: the same region with the same cells, without appends.
        let region_opts = match config {
            "global" if ipa_opts.contains("pSLC") => "CELL_MODE=pSLC",
            "global" => "",
            _ => ipa_opts,
        };
        for kv in region_opts.split(',') {
            if let Some((k, v)) = kv.split_once('=') {
                opts.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let at = store.space().nand().now_ns();
        store.create_region(at, "rg_ipa_all", &opts)?;
    }
    let need = workload.pages_estimate(page_bytes);
    let frames = a
        .buffer_pages
        .unwrap_or_else(|| ((need / 50) as usize).max(64));
    let mut e = Engine::create(
        Box::new(store),
        EngineConfig {
            buffer_frames: frames,
            ..EngineConfig::default()
        },
    )?;
    // The control rows (`regions`, `advised`) get the IPA rows' cells without appends.
    let control = if ipa_opts.contains("pSLC") {
        "CELL_MODE=pSLC"
    } else {
        ""
    };
    let kit_ddl = match workload {
        Workload::Tatp(_) => tatp::DDL,
        Workload::Tpcb(_) => tpcb::DDL,
        Workload::Tpcc(_) => tpcc::DDL,
    };
    let ddl = match config {
        "regions" => tatp::regions_ddl(a.region_chips, op_percent, control),
        "ipa-regions" => tatp::regions_ddl(a.region_chips, op_percent, ipa_opts),
        "advised" | "ipa-advised" => {
            let Some((tables, scheme)) = &st.advised else {
                bail!("the advised layout needs the advisor's profile of the baseline first");
            };
            let extra = if config == "advised" {
                control.to_string()
            } else {
                format!(
                    "IPA_MODE={}, IPA_SCHEME={}, IPA_RECORD={}",
                    st.ipa_mode,
                    scheme.label(),
                    scheme.record_bytes
                )
            };
            let extra = if extra.is_empty() {
                extra
            } else {
                format!(", {extra}")
            };
            let names: Vec<&str> = tables.iter().map(String::as_str).collect();
            kits::place_tables(
                kit_ddl,
                &names,
                "rg_ipa",
                &format!(
                    "MAX_CHIPS={}, GC=greedy, OP={op_percent}%{extra}",
                    a.region_chips
                ),
            )?
        }
        _ => kit_ddl.to_string(),
    };
    let w = match workload {
        Workload::Tatp(tc) => {
            let h = tatp::load(&mut e, *tc, &ddl, seed, |_| {})?;
            let terms: Vec<TatpTerminal> = (0..a.terminals)
                .map(|i| TatpTerminal::new(i, h, *tc, seed, None))
                .collect();
            window(
                e,
                terms,
                Kit {
                    done: TatpTerminal::succeeded,
                    latency: |t| &t.latency_ns,
                    events: |t| &mut t.events,
                },
                st,
                &mut profile,
                sample_ns,
            )?
        }
        Workload::Tpcb(bc) => {
            let h = tpcb::load_with_ddl(&mut e, *bc, &ddl, |_| {})?;
            let terms: Vec<TpcbTerminal> = (0..a.terminals)
                .map(|i| TpcbTerminal::new(i, h, *bc, seed, None))
                .collect();
            window(
                e,
                terms,
                Kit {
                    done: |t| t.committed,
                    latency: |t| &t.latency_ns,
                    events: |t| &mut t.events,
                },
                st,
                &mut profile,
                sample_ns,
            )?
        }
        Workload::Tpcc(cc) => {
            let loaded = tpcc::load_with_ddl(&mut e, *cc, &ddl, seed, |_| {})?;
            let run_c = tpcc::NurandConsts::run_from(loaded.c_load, seed);
            let terms: Vec<TpccTerminal> = (0..a.terminals)
                .map(|i| TpccTerminal::new(i, loaded.h, *cc, run_c, seed, None))
                .collect();
            window(
                e,
                terms,
                Kit {
                    done: TpccTerminal::committed,
                    latency: |t| &t.latency_ns,
                    events: |t| &mut t.events,
                },
                st,
                &mut profile,
                sample_ns,
            )?
        }
    };
    let Window {
        tps: throughput,
        hist,
        before,
        after,
        c0,
        c1,
        share,
        elapsed_ns,
        trace,
    } = w;
    let host_writes = (c1.host_programs - c0.host_programs) + (c1.host_appends - c0.host_appends);
    let appends = c1.host_appends - c0.host_appends;
    let per_write = |x: u64| x as f64 / host_writes.max(1) as f64;
    let txns = hist.len().max(1) as f64;
    Ok(Row {
        config: config.to_string(),
        host_reads: c1.host_reads - c0.host_reads,
        host_writes,
        ipa_appends: appends,
        append_percent: 100.0 * per_write(appends),
        gc_migrations: c1.gc_migrations - c0.gc_migrations,
        gc_erases: c1.gc_erases - c0.gc_erases,
        gc_migrations_per_host_write: per_write(c1.gc_migrations - c0.gc_migrations),
        gc_erases_per_host_write: per_write(c1.gc_erases - c0.gc_erases),
        throughput_tps: throughput,
        stdev: 0.0,
        space_overhead: share * scheme.overhead(page_bytes),
        programs_per_txn: (c1.programs - c0.programs) as f64 / txns,
        erases_per_txn: (c1.erases - c0.erases) as f64 / txns,
        consistency: consistency(&before, &after, elapsed_ns, a.terminals, true, &hist),
        trace,
    })
}

/// What one measured window saw.
struct Window {
    tps: f64,
    hist: Histogram<u64>,
    before: lab::measure::Snapshot,
    after: lab::measure::Snapshot,
    c0: Counts,
    c1: Counts,
    share: f64,
    elapsed_ns: u64,
    trace: Option<lab::results::Trace>,
}

/// What `window` needs to know of a kit's terminals.
struct Kit<T> {
    /// Committed (TATP: successful) transactions so far.
    done: fn(&T) -> u64,
    latency: fn(&T) -> &Histogram<u64>,
    /// The terminal's per-transaction records (results::Trace), when asked for.
    events: fn(&mut T) -> &mut Option<Vec<storage::sched::TxnEvent>>,
}

/// A checkpoint after the load, the warm-up, then the measured window (with the advisor's
/// profile over it when asked): the same for every workload.
fn window<T: storage::sched::Terminal + Send + 'static>(
    mut e: Engine,
    terms: Vec<T>,
    kit: Kit<T>,
    st: &Setup,
    profile: &mut Option<&mut Vec<ObjectProfile>>,
    sample_ns: Option<u64>,
) -> anyhow::Result<Window> {
    let Kit {
        done,
        latency,
        events,
    } = kit;
    e.checkpoint()?;
    let start = e.now();
    let (mut e, terms, _, _, _) = run_terminals(e, terms, start, Some(st.warmup_ns), true, None)?;
    if profile.is_some() {
        e.enable_write_profile();
    }
    let ok0: u64 = terms.iter().map(done).sum();
    let lat0 = merged(terms.iter().map(latency))?;
    let (before, c0, start) = (snapshot(&e), counts(e.store()), e.now());
    // Only the measured window's transactions are recorded (with --results).
    let mut terms = terms;
    if sample_ns.is_some() {
        terms.iter_mut().for_each(|t| *events(t) = Some(Vec::new()));
    }
    let (e, mut terms, elapsed_ns, _, marks) =
        run_terminals(e, terms, start, Some(st.duration_ns), true, sample_ns)?;
    let trace = sample_ns.map(|_| {
        lab::results::Trace::of_terminals(
            Vec::new(),
            marks,
            terms.iter_mut().map(|t| events(t).take()),
        )
    });
    let ok1: u64 = terms.iter().map(done).sum();
    let mut hist = merged(terms.iter().map(latency))?;
    hist.subtract(&lat0)?;
    if let Some(p) = profile.as_mut() {
        **p = profile_of(&e);
    }
    Ok(Window {
        tps: (ok1 - ok0) as f64 / (elapsed_ns as f64 / 1e9),
        hist,
        before,
        after: snapshot(&e),
        c0,
        c1: counts(e.store()),
        share: ipa_share(&e),
        elapsed_ns,
        trace,
    })
}

/// One object's write-backs in the advisor's baseline window.
#[derive(Debug, Clone, Serialize)]
pub struct ObjectProfile {
    name: String,
    kind: &'static str,
    writes: storage::buffer::ObjectWrites,
}

/// The buffer pool's write profile, named from the catalog.
fn profile_of(e: &Engine) -> Vec<ObjectProfile> {
    let cat = e.catalog();
    let name = |id: storage::ObjectId| -> (String, &'static str) {
        if let Some(t) = cat.tables.get(&id) {
            (t.name.clone(), "table")
        } else if let Some(i) = cat.indexes.get(&id) {
            (i.name.clone(), "index")
        } else {
            (format!("object {id}"), "system")
        }
    };
    e.write_profile()
        .map(|m| {
            m.iter()
                .map(|(&id, w)| {
                    let (name, kind) = name(id);
                    ObjectProfile {
                        name,
                        kind,
                        writes: w.clone(),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The share of the database's pages that carry a delta area.
fn ipa_share(e: &Engine) -> f64 {
    e.store()
        .as_any()
        .and_then(|s| s.downcast_ref::<NativeStore>())
        .map_or(0.0, NativeStore::ipa_share)
}

/// The terminals' latency histograms merged.
fn merged<'a>(hs: impl Iterator<Item = &'a Histogram<u64>>) -> anyhow::Result<Histogram<u64>> {
    let mut m = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    for h in hs {
        m.add(h)?;
    }
    Ok(m)
}

fn print_table(r: &Report) {
    println!(
        "ipa compare: {} scale {} on {} ({}-byte DB pages), IPA [{}] records of {} B in {}, region {} chips; warm-up {:.0} s, window {:.0} s, {} run(s) per row",
        r.workload,
        r.scale,
        r.preset,
        r.page_bytes,
        r.scheme,
        r.record_bytes,
        r.ipa_mode,
        r.region_chips,
        r.warmup_s,
        r.duration_s,
        r.repeat
    );
    if let Some(s) = &r.advised_scheme {
        println!(
            "  advised: IPA [{s}] for {} (noftl ipa advise's rule on a profiled baseline run)",
            r.advised_tables.join(", ")
        );
    }
    for x in &r.not_run {
        println!("  {:<12} not run: {}", x.config, x.why);
    }
    let base = r.rows.iter().find(|x| x.config == "baseline");
    println!(
        "  {:<12} {:>9} {:>10} {:>10} {:>8} {:>10} {:>8} {:>10} {:>10} {:>9} {:>8}",
        "config",
        "oop/ipa",
        "host rd",
        "host wr",
        "appends",
        "GC migr",
        "GC ers",
        "migr/wr",
        "erases/wr",
        "tx/s",
        "overhead"
    );
    for x in &r.rows {
        let oop = 100.0 - x.append_percent;
        println!(
            "  {:<12} {:>4.0}/{:<4.0} {:>10} {:>10} {:>8} {:>10} {:>8} {:>10.4} {:>10.5} {:>9.1} {:>7.1}%",
            x.config,
            oop,
            x.append_percent,
            x.host_reads,
            x.host_writes,
            x.ipa_appends,
            x.gc_migrations,
            x.gc_erases,
            x.gc_migrations_per_host_write,
            x.gc_erases_per_host_write,
            x.throughput_tps,
            x.space_overhead * 100.0
        );
        if x.consistency.status != "ok" {
            println!("    consistency violated: {:?}", x.consistency.violations);
        }
    }
    if let Some(b) = base {
        let rel = |v: f64, b: f64| {
            if b == 0.0 {
                f64::NAN
            } else {
                100.0 * (v / b - 1.0)
            }
        };
        for x in r.rows.iter().filter(|x| x.config != "baseline") {
            println!(
                "  {} vs baseline: GC migrations per host write {:+.0}%, GC erases per host write {:+.0}%, throughput {:+.1}%",
                x.config,
                rel(x.gc_migrations_per_host_write, b.gc_migrations_per_host_write),
                rel(x.gc_erases_per_host_write, b.gc_erases_per_host_write),
                rel(x.throughput_tps, b.throughput_tps)
            );
        }
    }
}

/// The advisor's decision from a baseline's write profile (the rule above `advise`).
struct Recommendation {
    scheme: IpaScheme,
    objects: Vec<Advice>,
    /// Expected share of page writes done as appends (0..1).
    expected: f64,
    /// Page write-backs in the profile.
    total: u64,
}

impl Recommendation {
    /// The tables the advisor gives IPA (an index lives in its table's tablespace, so indexes
    /// are not placed on their own).
    fn tables(&self) -> Vec<&str> {
        self.objects
            .iter()
            .filter(|o| o.ipa && o.kind == "table")
            .map(|o| o.name.as_str())
            .collect()
    }
}

fn recommend(profile: &[ObjectProfile], nop: u8) -> anyhow::Result<Recommendation> {
    use storage::buffer::PROFILE_RECORD_BYTES;
    let total: u64 = profile.iter().map(|p| p.writes.writebacks).sum();
    if total == 0 {
        bail!("the baseline wrote no pages back in its window; give a longer --duration");
    }
    let share = |p: &ObjectProfile| p.writes.writebacks as f64 / total as f64;
    let candidates: Vec<&ObjectProfile> = profile
        .iter()
        .filter(|p| p.kind != "system" && share(p) >= 0.05 && p.writes.diffed > 0)
        .collect();
    let fit = |p: &ObjectProfile, m: usize, r: usize| {
        p.writes.fits[m][r] as f64 / p.writes.diffed.max(1) as f64
    };
    let combined = |m: usize, r: usize| {
        let w: u64 = candidates.iter().map(|p| p.writes.diffed).sum();
        candidates
            .iter()
            .map(|p| p.writes.fits[m][r] as f64)
            .sum::<f64>()
            / w.max(1) as f64
    };
    let mut options: Vec<(usize, usize, f64, usize)> = Vec::new();
    for m in 0..4 {
        for (r, &record_bytes) in PROFILE_RECORD_BYTES.iter().enumerate() {
            let area = (m + 1) * (storage::ipa::RECORD_HEADER_BYTES + record_bytes);
            options.push((m, r, combined(m, r), area));
        }
    }
    let best = options.iter().map(|o| o.2).fold(0.0, f64::max);
    let (m, r, _, _) = options
        .iter()
        .filter(|o| o.2 >= best - 0.05)
        .min_by_key(|o| o.3)
        .copied()
        .unwrap_or((2, 1, 0.0, 0));
    let n = 2u8.min(nop.saturating_sub(1)).max(1);
    let scheme = IpaScheme {
        appends: n,
        records: (m + 1) as u8,
        record_bytes: PROFILE_RECORD_BYTES[r] as u16,
    };
    let mut objects: Vec<Advice> = profile
        .iter()
        .map(|p| {
            let f = fit(p, m, r);
            let ipa = candidates.iter().any(|c| c.name == p.name) && f >= 0.5;
            Advice {
                name: p.name.clone(),
                kind: p.kind,
                writebacks: p.writes.writebacks,
                share_percent: 100.0 * share(p),
                changed_bytes_p50: bytes_bucket_label(quantile_bucket(
                    &p.writes.changed_bytes,
                    0.5,
                )),
                changed_bytes_p90: bytes_bucket_label(quantile_bucket(
                    &p.writes.changed_bytes,
                    0.9,
                )),
                ranges_p50: quantile_bucket(&p.writes.ranges, 0.5),
                ranges_p90: quantile_bucket(&p.writes.ranges, 0.9),
                fit_percent: 100.0 * f,
                ipa,
                histogram: p.writes.clone(),
            }
        })
        .collect();
    objects.sort_by_key(|o| std::cmp::Reverse(o.writebacks));
    let nf = f64::from(n) / f64::from(n + 1);
    let expected: f64 = objects
        .iter()
        .filter(|o| o.ipa)
        .map(|o| o.writebacks as f64 * o.fit_percent / 100.0 * nf)
        .sum::<f64>()
        / total as f64;
    Ok(Recommendation {
        scheme,
        objects,
        expected,
        total,
    })
}

/// One object's line of the advice.
#[derive(Debug, Serialize)]
struct Advice {
    name: String,
    kind: &'static str,
    writebacks: u64,
    /// This object's share of all page write-backs, percent.
    share_percent: f64,
    /// Median and 90th percentile of changed bytes per write-back (bucket upper bounds).
    changed_bytes_p50: String,
    changed_bytes_p90: String,
    /// Median and 90th percentile of changed ranges (delta records) per write-back.
    ranges_p50: usize,
    ranges_p90: usize,
    /// Write-backs one append of the recommended scheme could carry, percent of diffed ones.
    fit_percent: f64,
    ipa: bool,
    /// The histograms, for a plot of the distribution (`noftl plot` reads them).
    histogram: storage::buffer::ObjectWrites,
}

#[derive(Debug, Serialize)]
struct AdviseReport {
    workload: String,
    scale: u32,
    preset: String,
    page_bytes: usize,
    window_s: f64,
    /// The recommended scheme: N appends of M records of R bytes.
    scheme: String,
    record_bytes: usize,
    ipa_mode: &'static str,
    /// Expected share of page writes done as appends in the recommended layout (an estimate:
    /// each object's fit share times N / (N + 1), the share of appends when every write fits).
    expected_append_percent: f64,
    /// The delta area's share of each page of a recommended object.
    space_overhead_per_page: f64,
    objects: Vec<Advice>,
    ddl: Vec<String>,
}

/// The bucket a quantile of a histogram falls in.
fn quantile_bucket(h: &[u64], q: f64) -> usize {
    let total: u64 = h.iter().sum();
    let want = (total as f64 * q).ceil() as u64;
    let mut acc = 0;
    for (i, &c) in h.iter().enumerate() {
        acc += c;
        if acc >= want.max(1) {
            return i;
        }
    }
    h.len().saturating_sub(1)
}

fn bytes_bucket_label(i: usize) -> String {
    use storage::buffer::PROFILE_BYTES;
    PROFILE_BYTES.get(i).map_or(
        format!("> {}", PROFILE_BYTES[PROFILE_BYTES.len() - 1]),
        |b| format!("<= {b}"),
    )
}

/// The advisor's rule (docs/ipa.md, "The advisor"): objects that take at least 5% of the page
/// write-backs are candidates; the scheme is the smallest delta area (M records of R bytes)
/// whose fit share over the candidates is within 5 points of the best one; a candidate gets IPA
/// when at least half its write-backs fit one append of that scheme. N is 2 (IPA Table I), or
/// what the chips' NOP allows if less.
fn advise(a: IpaCompareArgs) -> anyhow::Result<()> {
    if a.results.results.is_some() {
        bail!("--results: `ipa advise` writes no result directory (`ipa compare` does)");
    }
    let st = setup(&a)?;
    let mut profile = Vec::new();
    run_one(&a, &st, "baseline", a.seed, Some(&mut profile), None)
        .context("ipa advise, baseline")?;
    let rec = recommend(&profile, st.nop)?;
    let (scheme, objects, expected, total) = (rec.scheme, rec.objects, rec.expected, rec.total);
    let chosen: Vec<&str> = objects
        .iter()
        .filter(|o| o.ipa)
        .map(|o| o.name.as_str())
        .collect();

    let mut ddl = Vec::new();
    if !chosen.is_empty() {
        ddl.push(format!(
            "CREATE REGION rg_ipa (MAX_CHIPS={}, IPA_MODE={}, IPA_SCHEME={}, IPA_RECORD={});",
            a.region_chips,
            st.ipa_mode,
            scheme.label(),
            scheme.record_bytes
        ));
        ddl.push("CREATE TABLESPACE ts_ipa (REGION=rg_ipa);".into());
        ddl.push(format!(
            "-- create these objects in TABLESPACE ts_ipa: {}",
            chosen.join(", ")
        ));
    }
    let report = AdviseReport {
        workload: a.workload.clone(),
        scale: match &st.workload {
            Workload::Tatp(c) => c.subscribers,
            Workload::Tpcb(c) => c.scale,
            Workload::Tpcc(c) => c.warehouses,
        },
        preset: a.preset.clone(),
        page_bytes: st.page_bytes,
        window_s: st.duration_ns as f64 / 1e9,
        scheme: scheme.label(),
        record_bytes: usize::from(scheme.record_bytes),
        ipa_mode: st.ipa_mode,
        expected_append_percent: 100.0 * expected,
        space_overhead_per_page: scheme.overhead(st.page_bytes),
        objects,
        ddl,
    };
    if super::common::emit_json(a.json.as_deref(), &report)? {
        println!(
            "ipa advise: {} scale {} on {} ({}-byte pages), baseline window {:.0} s, {} page write-backs",
            report.workload, report.scale, report.preset, report.page_bytes, report.window_s, total
        );
        println!(
            "  {:<24} {:>6} {:>10} {:>7} {:>12} {:>12} {:>6} {:>6} {:>6}  IPA",
            "object",
            "kind",
            "writebacks",
            "share",
            "bytes p50",
            "bytes p90",
            "rec50",
            "rec90",
            "fit"
        );
        for o in &report.objects {
            println!(
                "  {:<24} {:>6} {:>10} {:>6.1}% {:>12} {:>12} {:>6} {:>6} {:>5.0}%  {}",
                o.name,
                o.kind,
                o.writebacks,
                o.share_percent,
                o.changed_bytes_p50,
                o.changed_bytes_p90,
                o.ranges_p50,
                o.ranges_p90,
                o.fit_percent,
                if o.ipa { "yes" } else { "no" }
            );
        }
        println!(
            "  recommended: IPA [{}] with {}-byte records in {} ({:.1}% of each page), expected appends {:.0}% of page writes",
            report.scheme,
            report.record_bytes,
            report.ipa_mode,
            100.0 * report.space_overhead_per_page,
            report.expected_append_percent
        );
        for line in &report.ddl {
            println!("  {line}");
        }
    }
    Ok(())
}
