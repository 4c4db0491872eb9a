//! `noftl bench tpch`: TPC-H queries 1, 6, 12 and 14 on the storage engine, in virtual time, on
//! any store `bench tpcb` runs on (the same device, FTL and store arguments and helpers).
//!
//! The database is bulk loaded first (kits::tpch, storage::bulk); then each query runs `--repeat`
//! times in a row, each run measured alone: its virtual seconds (from its start until the flash
//! has completed every read it issued, read-ahead included), its flash operations (differences
//! of the device's counters), the buffer pool's hits and misses, and the measured window's
//! self-check against physical bounds (storage::measure, one "terminal" running one query).
//! `--check` compares each query's answer: at SF 1 with the validation parameters with the
//! specification's qualification answers (clause 2.1.3.5's tolerances), otherwise with an
//! independent evaluation over the generator's rows (kits::tpch::reference), exactly.
//!
//! Invariants: 1. the JSON holds virtual-time figures only (the same arguments give the same
//! JSON); 2. bad arguments and a device too small for the database are refused before loading;
//! 3. a failed check fails the command.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use kits::tpch::answer::{self, QueryResult, Tolerance};
use kits::tpch::query::{self, ExecOptions, Params, QueryCpu};
use kits::tpch::{self, reference, LoadStats, TpchConfig};
use serde::Serialize;
use storage::measure::Consistency;

use super::shared::{print_consistency, BenchArgs};
use crate::cli::common::DeviceArgs;
use crate::targets::FtlKnobs;
use lab::measure::{consistency, per_txn, snapshot, PerTxn};

#[derive(Debug, Args)]
pub struct TpchArgs {
    /// The store: native (NoFTL) | page | dftl | dftl-orig | fast | block | memdisk.
    #[arg(long = "store", visible_alias = "storage", default_value = "memdisk")]
    pub storage: String,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// FTL targets' knobs; `--op` is also the native store's spare factor.
    #[command(flatten)]
    pub knobs: FtlKnobs,
    /// --store native: the log in a region of its own, with these CREATE REGION options.
    #[arg(long, value_parser = lab::stores::parse_log_region)]
    pub log_region: Option<lab::stores::LogRegion>,
    /// The scale factor (1: 6 million line items), 0.01 to 1000.
    #[arg(long, default_value_t = 0.01)]
    pub scale: f64,
    /// The queries to run, in this order.
    #[arg(long, default_value = "1,6,12,14", value_delimiter = ',')]
    pub queries: Vec<u32>,
    /// Runs of each query (seconds are their mean, with their standard deviation).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// validation: the specification's validation parameters; random: drawn from --seed as
    /// clause 2.4 prescribes.
    #[arg(long, default_value = "validation")]
    pub params: String,
    /// Seed of the query parameters drawn with --params random.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Pages each scan reads ahead (default: two per die of the flash, 64 without flash).
    #[arg(long)]
    pub read_ahead: Option<usize>,
    /// Buffer pool frames (default: 2% of the database's pages, at least 256).
    #[arg(long)]
    pub buffer_pages: Option<usize>,
    /// DB page size in bytes: 4096, 8192 or 16384.
    #[arg(long, default_value_t = 4096)]
    pub page_size: usize,
    /// Write the JSON result to this file ("-" or no value: standard output, instead of the
    /// human report).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<PathBuf>,
    /// Check every answer (see the verb's description).
    #[arg(long)]
    pub check: bool,
}

impl TpchArgs {
    /// The `bench tpcb` arguments that select and size the store, so that the store is built,
    /// sized and refused by the same code.
    fn store_args(&self) -> BenchArgs {
        BenchArgs {
            storage: self.storage.clone(),
            device: self.device.clone(),
            knobs: self.knobs.clone(),
            log_region: self.log_region.clone(),
            path: None,
            force: false,
            load: None,
            scale: 1,
            accounts_per_branch: 100_000,
            terminals: 1,
            txns: Some(1),
            duration: None,
            buffer_pages: self.buffer_pages,
            page_size: self.page_size,
            clock: "virtual".into(),
            seed: self.seed,
            json: self.json.clone(),
            check: self.check,
            regions: None,
            results: crate::cli::common::ResultsArgs {
                results: None,
                sample_window: "1s".into(),
                raw: false,
            },
        }
    }
}

#[derive(Debug, Serialize)]
struct QueryReport {
    query: u32,
    /// Mean virtual seconds per run, and their standard deviation over the runs.
    seconds: f64,
    stdev: f64,
    runs: u32,
    rows: Vec<Vec<answer::Cell>>,
    columns: Vec<&'static str>,
    /// "passed", "failed" or "skipped"; against what; the first difference.
    check: &'static str,
    check_against: &'static str,
    check_problem: Option<String>,
    /// Device and host counters per run of the query.
    per_query: PerTxn,
    buffer_hit_ratio: f64,
    pages_scanned: u64,
    read_ahead_used: u64,
    read_ahead_wasted: u64,
    consistency: Consistency,
}

#[derive(Debug, Serialize)]
struct TpchResult {
    workload: &'static str,
    storage: String,
    scale: f64,
    page_bytes: usize,
    buffer_frames: usize,
    read_ahead_pages: usize,
    params: Params,
    cpu: QueryCpu,
    load: LoadStats,
    load_virtual_seconds: f64,
    queries: Vec<QueryReport>,
}

fn mean_stdev(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// The answer `--check` compares with, and how.
fn expected(
    cfg: TpchConfig,
    q: u32,
    p: &Params,
    got: &QueryResult,
) -> Option<(QueryResult, Tolerance, &'static str)> {
    if cfg.scale == 1.0 && *p == Params::validation() {
        answer::sf1_answer(q, got).map(|a| (a, Tolerance::Spec, "qualification answers (SF 1)"))
    } else {
        reference::answer(cfg.scale, q, p).map(|a| (a, Tolerance::Exact, "independent evaluation"))
    }
}

pub fn run(a: TpchArgs) -> anyhow::Result<()> {
    let cfg = TpchConfig::new(a.scale).context("--scale")?;
    lab::limits::in_range(
        "--repeat",
        u64::from(a.repeat),
        1,
        1000,
        "each query runs at least once",
    )?;
    if a.queries.is_empty() {
        bail!("--queries names no query");
    }
    if let Some(q) = a.queries.iter().find(|q| !query::QUERIES.contains(q)) {
        bail!("--queries: TPC-H query {q} is not implemented (queries: 1, 6, 12, 14)");
    }
    let params = match a.params.as_str() {
        "validation" => Params::validation(),
        "random" => Params::random(a.seed),
        other => bail!("--params is validation or random, not '{other}'"),
    };
    params.check()?;
    if a.storage == "file" {
        bail!("bench tpch runs on the emulated targets and memdisk (--storage file is TPC-B's for now)");
    }
    let sa = a.store_args();
    super::check_counts(&sa)?;
    if let Some(p) = &a.json {
        lab::output::check_writable(p)?;
    }
    let (mut e, storage_name, frames) = super::new_engine(
        &sa,
        cfg.db_pages_estimate(a.page_size),
        &format!("TPC-H scale factor {}", a.scale),
    )?;
    let read_ahead_pages = a.read_ahead.unwrap_or_else(|| e.default_read_ahead());

    let wall = Instant::now();
    let bar = ProgressBar::new(cfg.rows());
    bar.set_style(
        ProgressStyle::with_template("loading {wide_bar} {pos}/{len} rows ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let (h, load) = tpch::load(&mut e, cfg, |n| bar.set_position(n))?;
    bar.finish_and_clear();
    let load_s = wall.elapsed().as_secs_f64();
    let load_virtual_seconds = e.now() as f64 / 1e9;
    e.set_now(e.device_idle_ns());

    let opts = ExecOptions {
        read_ahead_pages,
        cpu: QueryCpu::default(),
    };
    let mut reports = Vec::new();
    let mut query_wall_s = Vec::new();
    for &q in &a.queries {
        let mut secs = Vec::new();
        let before = (snapshot(&e), e.buffer_stats());
        let start_ns = e.now();
        let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
        let (mut pages, mut used, mut wasted) = (0, 0, 0);
        let mut last = None;
        let w = Instant::now();
        for _ in 0..a.repeat {
            let t0 = e.now();
            let run = query::run(&mut e, &h, q, &params, &opts)?;
            // The run ends when the flash has served every read it issued.
            e.set_now(e.device_idle_ns());
            let ns = e.now() - t0;
            secs.push(ns as f64 / 1e9);
            hist.record(ns.max(1))?;
            for s in &run.scans {
                pages += s.pages;
                used += s.read_ahead_used;
                wasted += s.read_ahead_wasted;
            }
            last = Some(run.result);
        }
        query_wall_s.push(w.elapsed().as_secs_f64() / f64::from(a.repeat));
        let after = (snapshot(&e), e.buffer_stats());
        let result = last.context("a query ran at least once")?;
        let elapsed_ns = e.now() - start_ns;
        let (check, check_against, check_problem) = if a.check {
            match expected(cfg, q, &params, &result) {
                Some((want, tol, against)) => match answer::compare(&want, &result, tol) {
                    Ok(()) => ("passed", against, None),
                    Err(why) => ("failed", against, Some(why)),
                },
                None => ("skipped", "no answer for this query", None),
            }
        } else {
            ("skipped", "", None)
        };
        let (hits, misses) = (
            after.1.hits - before.1.hits,
            after.1.misses - before.1.misses,
        );
        let (mean, stdev) = mean_stdev(&secs);
        reports.push(QueryReport {
            query: q,
            seconds: mean,
            stdev,
            runs: a.repeat,
            columns: result.columns.iter().map(|c| c.0).collect(),
            rows: result.rows,
            check,
            check_against,
            check_problem,
            per_query: per_txn(
                &before.0,
                &after.0,
                u64::from(a.repeat),
                elapsed_ns as f64 / 1e9,
            ),
            buffer_hit_ratio: if hits + misses == 0 {
                0.0
            } else {
                hits as f64 / (hits + misses) as f64
            },
            pages_scanned: pages / u64::from(a.repeat),
            read_ahead_used: used / u64::from(a.repeat),
            read_ahead_wasted: wasted / u64::from(a.repeat),
            consistency: consistency(&before.0, &after.0, elapsed_ns, 1, true, &hist),
        });
    }
    let res = TpchResult {
        workload: "tpch",
        storage: storage_name,
        scale: a.scale,
        page_bytes: a.page_size,
        buffer_frames: frames,
        read_ahead_pages,
        params,
        cpu: opts.cpu,
        load,
        load_virtual_seconds,
        queries: reports,
    };
    if super::super::common::emit_json(a.json.as_deref(), &res)? {
        println!(
            "tpch on {} (virtual clock): scale factor {}, {} buffer frames, read-ahead {} pages",
            res.storage, res.scale, frames, read_ahead_pages
        );
        println!(
            "  load: {} rows, {} heap pages, {} index pages; {:.2} s virtual, {:.2} s wall",
            res.load.rows, res.load.heap_pages, res.load.index_pages, load_virtual_seconds, load_s
        );
        for (r, wall_s) in res.queries.iter().zip(&query_wall_s) {
            println!(
                "Q{}: {:.4} s (stdev {:.4}, {} runs), {} rows; {:.0} pages scanned, read-ahead used {} wasted {}; buffer hit ratio {:.3}; {:.3} s wall per run",
                r.query, r.seconds, r.stdev, r.runs, r.rows.len(), r.pages_scanned as f64,
                r.read_ahead_used, r.read_ahead_wasted, r.buffer_hit_ratio, wall_s
            );
            println!(
                "  per query: flash reads {:.0} programs {:.0}; host reads {:.0}",
                r.per_query.flash_reads, r.per_query.flash_programs, r.per_query.host_page_reads
            );
            for row in &r.rows {
                let cells: Vec<String> = row.iter().map(answer::Cell::text).collect();
                println!("  | {}", cells.join(" | "));
            }
            print_consistency(&r.consistency);
            match &r.check_problem {
                Some(why) => println!("  check: {} against {}: {why}", r.check, r.check_against),
                None if r.check == "skipped" => println!("  check: skipped"),
                None => println!("  check: {} against {}", r.check, r.check_against),
            }
        }
    }
    if let Some(r) = res.queries.iter().find(|r| r.check == "failed") {
        bail!(
            "the TPC-H answer check failed for Q{}: {}",
            r.query,
            r.check_problem.as_deref().unwrap_or("")
        );
    }
    Ok(())
}
