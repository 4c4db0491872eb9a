//! `noftl bench tatp`: TATP on the storage engine, like `bench tpcb` (`--scale` is the number of
//! subscribers). Throughput counts *successful* transactions per second (TATP's MQTh); the
//! per-type success rates are reported next to the ones the population rules give
//! (kits::tatp). `--regions CHIPS` (native only) places Subscriber and Special_Facility in a
//! region of their own, as in IPA Table I.

use std::time::Instant;

use anyhow::bail;
use hdrhistogram::Histogram;
use kits::tatp::{self, TatpConfig, TatpTerminal, TXN_TYPES};
use serde::Serialize;
use storage::measure::Consistency;
use storage::PageStore;

use super::shared::{new_engine, plan, run_plan, Spec};
use crate::measure::{latency_us, per_txn, snapshot, LatencyUs, PerTxn};

#[derive(Debug, Serialize)]
pub struct TxnRow {
    pub name: &'static str,
    pub attempted: u64,
    pub succeeded: u64,
    pub success_percent: f64,
}

#[derive(Debug, Serialize)]
pub struct TatpResult {
    pub workload: &'static str,
    pub storage: String,
    pub clock: String,
    pub subscribers: u32,
    pub regions: Option<u32>,
    pub terminals: u32,
    pub seed: u64,
    pub page_bytes: usize,
    pub finished: u64,
    pub succeeded: u64,
    pub deadlocks: u64,
    /// Successful transactions per second.
    pub throughput_tps: f64,
    pub virtual_seconds: f64,
    pub latency_us: LatencyUs,
    /// Per successful transaction.
    pub per_txn: PerTxn,
    /// IPA Table I's figures: GC page migrations and erases per host page write.
    pub gc_migrations_per_host_write: f64,
    pub gc_erases_per_host_write: f64,
    pub transactions: Vec<TxnRow>,
    pub consistency: Consistency,
    pub check: &'static str,
    pub check_problems: Vec<String>,
    /// The page FTL's pSLC write cache over the window (--slc-cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slc_cache: Option<ftl::block_device::SlcCacheReport>,
    /// The steady-state rule before the run (`crate::steady`).
    pub steady_state: crate::steady::SteadyState,
}

fn gc_and_host_writes(store: &dyn PageStore) -> (u64, u64, u64) {
    store
        .device_report()
        .map_or((0, 0, 0), |r| (r.gc.migrations, r.gc.erases, r.host.writes))
}

/// Every terminal's latencies, and the attempts and successes of each transaction type.
fn by_type(terms: &[TatpTerminal]) -> anyhow::Result<(Histogram<u64>, Vec<TxnRow>)> {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    let mut rows: Vec<TxnRow> = TXN_TYPES
        .iter()
        .map(|t| TxnRow {
            name: t.name(),
            attempted: 0,
            succeeded: 0,
            success_percent: 0.0,
        })
        .collect();
    for t in terms {
        hist.add(&t.latency_ns)?;
        for (r, o) in rows.iter_mut().zip(&t.outcomes) {
            r.attempted += o.attempted;
            r.succeeded += o.succeeded;
        }
    }
    for r in &mut rows {
        r.success_percent = if r.attempted == 0 {
            0.0
        } else {
            (r.succeeded as f64 * 1e6 / r.attempted as f64).round() / 1e4
        };
    }
    Ok((hist, rows))
}

/// Runs TATP as `args` says (`scale`: subscribers).
pub fn run(args: &Spec) -> anyhow::Result<TatpRun> {
    if args.scale == 0 || args.terminals == 0 {
        bail!("--scale (subscribers) and --terminals must be at least 1");
    }
    if args.storage == "file" {
        bail!("bench tatp runs on the emulated targets (--storage file is TPC-B's for now)");
    }
    if args.regions.is_some() && args.storage != "native" {
        bail!("--regions needs --storage native (regions are NoFTL's)");
    }
    if args.load == Some(kits::LoadMethod::Bulk) {
        bail!("bench tatp loads row by row (--load rows); --load bulk is TPC-B's and TPC-C's");
    }
    let (until, virtual_clock) = run_plan(args)?;
    let plan = plan(args)?;
    let cfg = TatpConfig {
        subscribers: args.scale,
    };
    let (mut e, storage_name, _frames) = new_engine(
        args,
        cfg.db_pages_estimate(args.page_size),
        &format!("TATP with {} subscribers", cfg.subscribers),
    )?;
    let ddl = match args.regions {
        Some(chips) => tatp::regions_ddl(chips, (args.knobs.op * 100.0).round() as u32, ""),
        None => tatp::DDL.to_string(),
    };
    let wall = Instant::now();
    let bar = super::shared::load_bar(cfg.rows_estimate(), true);
    let h = tatp::load(&mut e, cfg, &ddl, args.seed, |n| bar.set_position(n))?;
    bar.finish_and_clear();
    e.checkpoint()?;
    let load_s = wall.elapsed().as_secs_f64();
    let params = crate::workload::Params {
        scale: Some(cfg.subscribers),
        seed: args.seed,
        ..crate::workload::Params::default()
    };
    let steady_state =
        super::shared::reach_steady(args, &mut e, "tatp", params, Box::new(h), virtual_clock)?;

    let before = snapshot(&e);
    let gc0 = gc_and_host_writes(e.store());
    let terms: Vec<TatpTerminal> = (0..args.terminals)
        .map(|i| TatpTerminal::new(i, h, cfg, args.seed, args.txns))
        .collect();
    let ((mut e, mut terms, virtual_ns, _, marks), run_wall_s) =
        super::shared::run_recorded(e, terms, until, virtual_clock, plan.as_ref())?;
    let after = snapshot(&e);
    let gc1 = gc_and_host_writes(e.store());
    let succeeded: u64 = terms.iter().map(TatpTerminal::succeeded).sum();
    let finished: u64 = terms.iter().map(|t| t.finished).sum();
    let (hist, rows) = by_type(&terms)?;
    let secs = if virtual_clock {
        virtual_ns as f64 / 1e9
    } else {
        run_wall_s
    };
    let (check, problems) = if args.check {
        let rep = tatp::check(&mut e, cfg)?;
        (if rep.passed() { "passed" } else { "failed" }, rep.problems)
    } else {
        ("skipped", vec![])
    };
    let host_writes = (gc1.2 - gc0.2).max(1) as f64;
    let res = TatpResult {
        workload: "tatp",
        storage: storage_name,
        clock: args.clock.clone(),
        subscribers: cfg.subscribers,
        regions: args.regions,
        terminals: args.terminals,
        seed: args.seed,
        page_bytes: args.page_size,
        finished,
        succeeded,
        deadlocks: terms.iter().map(|t| t.deadlocks).sum(),
        throughput_tps: if secs > 0.0 {
            succeeded as f64 / secs
        } else {
            0.0
        },
        virtual_seconds: virtual_ns as f64 / 1e9,
        latency_us: latency_us(&hist),
        per_txn: per_txn(&before, &after, succeeded, secs),
        gc_migrations_per_host_write: (gc1.0 - gc0.0) as f64 / host_writes,
        gc_erases_per_host_write: (gc1.1 - gc0.1) as f64 / host_writes,
        transactions: rows,
        consistency: crate::measure::consistency(
            &before,
            &after,
            (secs * 1e9) as u64,
            args.terminals,
            until.is_some(),
            &hist,
        ),
        check,
        check_problems: problems,
        slc_cache: crate::measure::slc_cache(&before, &after),
        steady_state,
    };
    if let Some(p) = &plan {
        let trace = crate::results::Trace::of_terminals(
            Vec::new(),
            marks,
            terms.iter_mut().map(|t| t.events.take()),
        );
        let types: Vec<&str> = TXN_TYPES.iter().map(|t| t.name()).collect();
        crate::runner::write_results(
            p,
            &res,
            "tatp",
            f64::from(res.subscribers),
            res.terminals,
            secs,
            trace,
            &types,
            &args.device,
        )?;
    }
    Ok(TatpRun {
        result: res,
        finished,
        succeeded,
        secs,
        load_s,
        run_wall_s,
    })
}

/// What a run gave: its result (the JSON) and the host-side figures of the human report.
#[derive(Debug)]
pub struct TatpRun {
    pub result: TatpResult,
    pub finished: u64,
    pub succeeded: u64,
    pub secs: f64,
    pub load_s: f64,
    pub run_wall_s: f64,
}
