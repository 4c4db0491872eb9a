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

use std::time::Instant;

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use kits::tpch::answer::{self, QueryResult, Tolerance};
use kits::tpch::query::{self, ExecOptions, Params, QueryCpu};
use kits::tpch::{self, reference, LoadStats, TpchConfig};
use serde::Serialize;
use storage::measure::Consistency;

use super::shared::{check_counts, new_engine, Spec};
use crate::device::DeviceSpec;
use crate::measure::{consistency, per_txn, snapshot, PerTxn};
use crate::targets::FtlKnobs;

#[derive(Debug, Clone)]
pub struct TpchSpec {
    /// The store: native (NoFTL) | page | dftl | dftl-orig | fast | block | memdisk.
    pub storage: String,
    pub device: DeviceSpec,
    /// FTL targets' knobs; `--op` is also the native store's spare factor.
    pub knobs: FtlKnobs,
    /// --store native: the log in a region of its own, with these CREATE REGION options.
    pub log_region: Option<crate::stores::LogRegion>,
    /// The scale factor (1: 6 million line items), 0.01 to 1000.
    pub scale: f64,
    /// The queries to run, in this order.
    pub queries: Vec<u32>,
    /// Runs of each query (seconds are their mean, with their standard deviation).
    pub repeat: u32,
    /// validation: the specification's validation parameters; random: drawn from --seed as
    /// clause 2.4 prescribes.
    pub params: String,
    /// Seed of the query parameters drawn with --params random.
    pub seed: u64,
    /// Pages each scan reads ahead (default: two per die of the flash, 64 without flash).
    pub read_ahead: Option<usize>,
    /// Buffer pool frames (default: 2% of the database's pages, at least 256).
    pub buffer_pages: Option<usize>,
    /// DB page size in bytes: 4096, 8192 or 16384.
    pub page_size: usize,
    /// Check every answer (see the verb's description).
    pub check: bool,
}

impl TpchSpec {
    /// The `bench tpcb` arguments that select and size the store, so that the store is built,
    /// sized and refused by the same code.
    fn store_args(&self) -> Spec {
        Spec {
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
            check: self.check,
            regions: None,
            precondition_device_writes: 0.0,
            round: "10s".into(),
            max_rounds: 0,
            results: None,
            sample_window: "1s".into(),
            raw: false,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct QueryReport {
    pub query: u32,
    /// Mean virtual seconds per run, and their standard deviation over the runs.
    pub seconds: f64,
    pub stdev: f64,
    pub runs: u32,
    pub rows: Vec<Vec<answer::Cell>>,
    pub columns: Vec<&'static str>,
    /// "passed", "failed" or "skipped"; against what; the first difference.
    pub check: &'static str,
    pub check_against: &'static str,
    pub check_problem: Option<String>,
    /// Device and host counters per run of the query.
    pub per_query: PerTxn,
    pub buffer_hit_ratio: f64,
    pub pages_scanned: u64,
    pub read_ahead_used: u64,
    pub read_ahead_wasted: u64,
    pub consistency: Consistency,
}

#[derive(Debug, Serialize)]
pub struct TpchResult {
    pub workload: &'static str,
    pub storage: String,
    pub scale: f64,
    pub page_bytes: usize,
    pub buffer_frames: usize,
    pub read_ahead_pages: usize,
    pub params: Params,
    pub cpu: QueryCpu,
    pub load: LoadStats,
    pub load_virtual_seconds: f64,
    pub queries: Vec<QueryReport>,
    /// Read-only queries on the loaded database: nothing below them settles (`crate::steady`).
    pub steady_state: crate::steady::SteadyState,
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

/// Runs TPC-H's queries as `a` says.
pub fn run(a: &TpchSpec) -> anyhow::Result<TpchRun> {
    let cfg = TpchConfig::new(a.scale).context("--scale")?;
    crate::limits::in_range(
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
    check_counts(&sa)?;
    let (mut e, storage_name, frames) = new_engine(
        &sa,
        cfg.db_pages_estimate(a.page_size),
        &format!("TPC-H scale factor {}", a.scale),
    )?;
    let read_ahead_pages = a.read_ahead.unwrap_or_else(|| e.default_read_ahead());

    let wall = Instant::now();
    let bar = super::shared::load_bar(cfg.rows(), false);
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
        steady_state: crate::steady::SteadyState::not_applicable(
            "read-only queries: no writes, so no GC to settle; each query runs --repeat times",
            0.0,
        ),
    };
    Ok(TpchRun {
        result: res,
        frames,
        read_ahead_pages,
        load_virtual_seconds,
        load_s,
        query_wall_s,
    })
}

/// What a run gave: its result (the JSON) and the host-side figures of the human report.
#[derive(Debug)]
pub struct TpchRun {
    pub result: TpchResult,
    pub frames: usize,
    pub read_ahead_pages: usize,
    pub load_virtual_seconds: f64,
    pub load_s: f64,
    pub query_wall_s: Vec<f64>,
}
