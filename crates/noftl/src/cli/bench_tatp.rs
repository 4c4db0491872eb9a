//! `noftl bench tatp`: TATP on the storage engine, like `bench tpcb` (`--scale` is the number of
//! subscribers). Throughput counts *successful* transactions per second (TATP's MQTh); the
//! per-type success rates are reported next to the ones the population rules give
//! (kits::tatp). `--regions CHIPS` (native only) places Subscriber and Special_Facility in a
//! region of their own, as in IPA Table I.

use std::time::Instant;

use anyhow::bail;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use kits::tatp::{self, TatpConfig, TatpTerminal, TXN_TYPES};
use serde::Serialize;
use storage::measure::Consistency;
use storage::PageStore;

use super::bench::{run_plan, BenchArgs};
use lab::measure::{latency_us, per_txn, snapshot, LatencyUs, PerTxn};
use lab::runner::run_terminals;

#[derive(Debug, Serialize)]
struct TxnRow {
    name: &'static str,
    attempted: u64,
    succeeded: u64,
    success_percent: f64,
}

#[derive(Debug, Serialize)]
struct TatpResult {
    workload: &'static str,
    storage: String,
    clock: String,
    subscribers: u32,
    regions: Option<u32>,
    terminals: u32,
    seed: u64,
    page_bytes: usize,
    finished: u64,
    succeeded: u64,
    deadlocks: u64,
    /// Successful transactions per second.
    throughput_tps: f64,
    virtual_seconds: f64,
    latency_us: LatencyUs,
    /// Per successful transaction.
    per_txn: PerTxn,
    /// IPA Table I's figures: GC page migrations and erases per host page write.
    gc_migrations_per_host_write: f64,
    gc_erases_per_host_write: f64,
    transactions: Vec<TxnRow>,
    consistency: Consistency,
    check: &'static str,
    check_problems: Vec<String>,
    /// The page FTL's pSLC write cache over the window (--slc-cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    slc_cache: Option<ftl::block_device::SlcCacheReport>,
}

fn gc_and_host_writes(store: &dyn PageStore) -> (u64, u64, u64) {
    store
        .device_report()
        .map_or((0, 0, 0), |r| (r.gc.migrations, r.gc.erases, r.host.writes))
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
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
    let (until, virtual_clock) = run_plan(&args)?;
    let plan = args.results.plan()?;
    let cfg = TatpConfig {
        subscribers: args.scale,
    };
    let (mut e, storage_name, _frames) = super::bench::new_engine(
        &args,
        cfg.db_pages_estimate(args.page_size),
        &format!("TATP with {} subscribers", cfg.subscribers),
    )?;
    let ddl = match args.regions {
        Some(chips) => tatp::regions_ddl(chips, (args.knobs.op * 100.0).round() as u32, ""),
        None => tatp::DDL.to_string(),
    };
    let wall = Instant::now();
    let bar = ProgressBar::new(cfg.rows_estimate());
    bar.set_style(
        ProgressStyle::with_template("loading {wide_bar} {pos}/~{len} rows ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let h = tatp::load(&mut e, cfg, &ddl, args.seed, |n| bar.set_position(n))?;
    bar.finish_and_clear();
    e.checkpoint()?;
    let load_s = wall.elapsed().as_secs_f64();

    let before = snapshot(&e);
    let gc0 = gc_and_host_writes(e.store());
    let start_ns = e.now();
    let mut terms: Vec<TatpTerminal> = (0..args.terminals)
        .map(|i| TatpTerminal::new(i, h, cfg, args.seed, args.txns))
        .collect();
    if plan.is_some() {
        terms.iter_mut().for_each(|t| t.events = Some(Vec::new()));
    }
    let cpu0 = Instant::now();
    let (mut e, mut terms, virtual_ns, _, marks) = run_terminals(
        e,
        terms,
        start_ns,
        until,
        virtual_clock,
        plan.as_ref().map(|p| p.window_ns),
    )?;
    let run_wall_s = cpu0.elapsed().as_secs_f64();
    let after = snapshot(&e);
    let gc1 = gc_and_host_writes(e.store());
    let succeeded: u64 = terms.iter().map(TatpTerminal::succeeded).sum();
    let finished: u64 = terms.iter().map(|t| t.finished).sum();
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
    for t in &terms {
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
        consistency: lab::measure::consistency(
            &before,
            &after,
            (secs * 1e9) as u64,
            args.terminals,
            until.is_some(),
            &hist,
        ),
        check,
        check_problems: problems,
        slc_cache: lab::measure::slc_cache(&before, &after),
    };
    if let Some(p) = &plan {
        let events = terms
            .iter_mut()
            .flat_map(|t| t.events.take().unwrap_or_default())
            .collect();
        let types: Vec<&str> = TXN_TYPES.iter().map(|t| t.name()).collect();
        lab::runner::write_results(
            p,
            &res,
            "tatp",
            f64::from(res.subscribers),
            res.terminals,
            secs,
            marks,
            events,
            &types,
        )?;
    }
    if super::common::emit_json(args.json.as_deref(), &res)? {
        println!(
            "tatp on {} ({} clock): {} subscribers{}, {} terminals, seed {}",
            res.storage,
            res.clock,
            res.subscribers,
            res.regions.map_or(String::new(), |c| format!(
                ", Subscriber + Special_Facility in a {c}-chip region"
            )),
            res.terminals,
            res.seed
        );
        println!(
            "  finished {} succeeded {}  throughput {:.1} successful tx/s over {:.3} s",
            finished, succeeded, res.throughput_tps, secs
        );
        for r in &res.transactions {
            println!(
                "  {:<24} {:>8} attempted {:>6.2}% succeeded",
                r.name, r.attempted, r.success_percent
            );
        }
        println!(
            "  GC per host write: {:.4} migrations, {:.5} erases",
            res.gc_migrations_per_host_write, res.gc_erases_per_host_write
        );
        super::bench::print_consistency(&res.consistency);
        if let Some(c) = &res.slc_cache {
            super::bench::print_slc_cache(c);
        }
        super::bench::print_check(res.check, &res.check_problems);
        println!("  host: load {:.2} s; run {:.3} s wall", load_s, run_wall_s);
    }
    if res.check == "failed" {
        bail!("the TATP check failed");
    }
    Ok(())
}
