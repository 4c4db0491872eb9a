//! `noftl compare --workload tpch`: the TPC-H half of NoFTL Fig. 3. Queries 1, 6, 12 and 14 on
//! the same database and device under NoFTL (`native`), DFTL with 2%, 15% and 35% of the
//! mappings cached and the page FTL; seconds per query (virtual), their standard deviation over
//! `--repeat` consecutive runs, the slowdown against NoFTL, and the statistics that explain it.
//!
//! What it shares with the transaction comparison: the device and its sizing (the database
//! loaded once on a RAM disk, measured, the device built for it: `size_rig`), the stores
//! (`ROWS`, `build_store`), the page-by-page copy of the loaded database onto every store, the
//! buffer pool (2% of the database) and the device counters. What differs: no warm-up (the
//! queries only read, so garbage collection never runs, and a device's free space does not
//! change what a read costs), and no windows: each query runs `--repeat` times in a row, each
//! run measured alone, from its start until the flash has served every read it issued.
//!
//! Invariants:
//! 1. Every row runs the same queries with the validation parameters on a copy of the same
//!    loaded database; only the store differs, and every row's answers equal native's (checked:
//!    a difference fails the command).
//! 2. The JSON depends on the arguments only (virtual time).

use anyhow::{bail, Context};
use kits::tpch::answer::{self, QueryResult, Tolerance};
use kits::tpch::query::{self, ExecOptions, Params, QueryCpu};
use kits::tpch::TpchConfig;
use serde::Serialize;
use storage::measure::{self, Busy, Consistency};
use storage::Engine;

use crate::workload::Workload;

use super::rig::{
    counters, mean_stdev, parse_stores, r4, size_rig, Counters, Device, Spec, DEFAULT_STORES, ROWS,
};

/// The scale factor when neither --sf nor --scale is given: the comparison runs in about a
/// minute on two cores.
const DEFAULT_SF: f64 = 0.1;

#[derive(Debug, Serialize)]
pub struct QueryRow {
    pub query: u32,
    pub seconds: f64,
    pub stdev: f64,
    pub slowdown: f64,
    /// Per run of the query.
    pub flash_reads: f64,
    pub host_reads: f64,
    pub translation_reads: f64,
    /// Translation-page reads per host read: the mapping-cache misses of a page-at-a-time
    /// lookup (0 on native, whose map is in the host's memory).
    pub mapping_miss_ratio: f64,
    /// Per run: host CPU the profile charged for the query layer's rows (scans, aggregates,
    /// joins) and for the engine's work (fixes, page reads), seconds.
    pub query_cpu_seconds: f64,
    pub engine_cpu_seconds: f64,
    /// Per run: mapping work (the device controller's, or the host's for dftl-orig and
    /// native), seconds, and the cache entries dftl-orig's min-age scans visited.
    pub mapping_seconds: f64,
    pub cache_scanned_entries: f64,
    /// Of those, the entries of scans whose working set did not fit the host's L3.
    pub cache_scanned_entries_beyond_l3: f64,
    pub consistency: Consistency,
}

#[derive(Debug, Serialize)]
pub struct StoreRow {
    pub storage: String,
    pub queries: Vec<QueryRow>,
}

#[derive(Debug, Serialize)]
pub struct TpchCompareResult {
    pub workload: &'static str,
    pub scale: f64,
    pub repeat: u32,
    pub read_ahead_pages: usize,
    pub cpu: QueryCpu,
    /// The host CPU profile (crate::cpu): the engine's costs and the query layer's (`cpu`).
    pub cpu_profile: crate::cpu::CpuProfile,
    pub log_device: super::LogDevice,
    pub device: Device,
    pub rows: Vec<StoreRow>,
}

/// One query on one store, `repeat` runs.
pub struct Measured {
    pub secs: Vec<f64>,
    /// Query-layer and engine CPU charged over all runs, ns.
    pub query_cpu_ns: u64,
    pub engine_cpu_ns: u64,
    pub before: (Counters, u64, Busy),
    pub after: (Counters, u64, Busy),
    pub elapsed_ns: u64,
    pub result: QueryResult,
}

fn host_reads(e: &Engine) -> u64 {
    e.store().device_report().map_or(0, |r| r.host.reads)
}

fn measure_query(
    e: &mut Engine,
    h: &kits::tpch::Handles,
    q: u32,
    repeat: u32,
    opts: &ExecOptions,
) -> anyhow::Result<Measured> {
    let before = (counters(e.store()), host_reads(e), Busy::of(e.store()));
    let start = e.now();
    let mut secs = Vec::new();
    let mut result = None;
    let cpu0 = e.cpu_counts().charged_ns;
    let mut query_cpu_ns = 0;
    for _ in 0..repeat {
        let t0 = e.now();
        let run = query::run(e, h, q, &Params::validation(), opts)?;
        e.set_now(e.device_idle_ns());
        secs.push((e.now() - t0) as f64 / 1e9);
        query_cpu_ns += run.scans.iter().map(|s| s.cpu_ns).sum::<u64>();
        result = Some(run.result);
    }
    Ok(Measured {
        secs,
        query_cpu_ns,
        engine_cpu_ns: e.cpu_counts().charged_ns - cpu0,
        before,
        after: (counters(e.store()), host_reads(e), Busy::of(e.store())),
        elapsed_ns: e.now() - start,
        result: result.context("a query ran at least once")?,
    })
}

/// Runs the TPC-H comparison, handing its result to `done` (the caller writes and prints it)
/// before the strict check.
pub fn run(
    args: &Spec,
    done: &mut dyn FnMut(&TpchCompareResult) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if args.paper {
        bail!("--paper runs the transaction workloads' scales; for TPC-H give --sf 1 (the NoFTL paper's TPC-H scale factor)");
    }
    let sf = args.sf.or(args.scale.map(f64::from)).unwrap_or(DEFAULT_SF);
    let cfg = TpchConfig::new(sf).context("--sf")?;
    let w = crate::workloads::tpch::Tpch(cfg);
    w.load_method(args.load)?;
    crate::limits::in_range(
        "--repeat",
        u64::from(args.repeat),
        1,
        1000,
        "each query runs at least once",
    )?;
    let stores: Vec<String> = match &args.stores {
        Some(s) => s.clone(),
        None => DEFAULT_STORES.split(',').map(String::from).collect(),
    };
    let selected = parse_stores(&stores)?;
    if args.device.load()?.geometry.page_size_bytes != 4096 {
        bail!("compare --workload tpch runs on 4 KiB flash pages");
    }
    eprintln!("measuring the database of TPC-H scale factor {sf} ...");
    let (rig, probe) = size_rig(args, &w)?;
    let h = *crate::workload::handles::<kits::tpch::Handles>(&probe.loaded, w.label())?;
    let g = &rig.nand.geometry;
    eprintln!(
        "device: {} with {} blocks ({:.1} MiB), {} DB pages + {}-block log, spare factor {:.2}%, {} buffer frames",
        rig.nand.name,
        g.blocks(),
        g.capacity_bytes() as f64 / (1 << 20) as f64,
        rig.db_pages,
        rig.log_blocks,
        rig.spare * 100.0,
        rig.frames
    );
    let read_ahead_pages = args.read_ahead_pages.unwrap_or(2 * g.dies() as usize);
    let opts = ExecOptions {
        read_ahead_pages,
        cpu: rig.cpu.query,
    };
    let mut out: Vec<StoreRow> = Vec::new();
    let mut native: Vec<(f64, QueryResult)> = Vec::new();
    for &row in &selected {
        let name = ROWS[row].0;
        let wall = std::time::Instant::now();
        let mut e = probe.copy_onto(&rig, row)?;
        e.set_now(e.device_idle_ns());
        let mut queries = Vec::new();
        for (i, q) in query::QUERIES.into_iter().enumerate() {
            let m = measure_query(&mut e, &h, q, args.repeat, &opts)?;
            let (mean, stdev) = mean_stdev(&m.secs);
            if row == 0 {
                native.push((mean, m.result.clone()));
            } else if let Some((_, want)) = native.get(i) {
                answer::compare(want, &m.result, Tolerance::Exact).map_err(|why| {
                    anyhow::anyhow!("Q{q} on {name} answers differently from native: {why}")
                })?;
            }
            let runs = f64::from(args.repeat);
            let (b, a) = (&m.before, &m.after);
            let host = (a.1 - b.1) as f64 / runs;
            let tr = (a.0.tr - b.0.tr) as f64 / runs;
            let mut hist =
                hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
            for s in &m.secs {
                hist.record(((s * 1e9) as u64).max(1))?;
            }
            queries.push(QueryRow {
                query: q,
                seconds: r4(mean),
                stdev: r4(stdev),
                slowdown: native.get(i).map_or(1.0, |n| r4(mean / n.0)),
                flash_reads: r4((a.0.reads - b.0.reads) as f64 / runs),
                host_reads: r4(host),
                translation_reads: r4(tr),
                mapping_miss_ratio: if host > 0.0 { r4(tr / host) } else { 0.0 },
                query_cpu_seconds: r4(m.query_cpu_ns as f64 / 1e9 / runs),
                engine_cpu_seconds: r4(m.engine_cpu_ns as f64 / 1e9 / runs),
                mapping_seconds: r4((a.0.ctrl_us - b.0.ctrl_us) / 1e6 / runs),
                cache_scanned_entries: r4((a.0.scanned - b.0.scanned) as f64 / runs),
                cache_scanned_entries_beyond_l3: r4(
                    (a.0.scanned_beyond_l3 - b.0.scanned_beyond_l3) as f64 / runs,
                ),
                consistency: measure::check(measure::Window {
                    before: &b.2,
                    after: &a.2,
                    elapsed_ns: m.elapsed_ns,
                    terminals: 1,
                    terminals_run_throughout: true,
                    txns: hist.len(),
                    latency_sum_ns: hist.mean() * hist.len() as f64,
                }),
            });
        }
        eprintln!(
            "{name}: copied and queried in {:.1} s wall",
            wall.elapsed().as_secs_f64()
        );
        out.push(StoreRow {
            storage: name.into(),
            queries,
        });
    }
    let res = TpchCompareResult {
        workload: "tpch",
        scale: sf,
        repeat: args.repeat,
        read_ahead_pages,
        cpu: opts.cpu,
        cpu_profile: rig.cpu.clone(),
        log_device: rig.log_device,
        device: Device::of(&rig),
        rows: out,
    };
    done(&res)?;
    let violated = res
        .rows
        .iter()
        .flat_map(|r| &r.queries)
        .any(|q| q.consistency.status != "ok");
    if violated && args.strict {
        bail!("a query's measured window broke a physical bound (consistency: violated)");
    }
    Ok(())
}
