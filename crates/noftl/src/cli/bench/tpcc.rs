//! `noftl bench tpcc`: TPC-C on the storage engine, like `bench tpcb` (same JSON field names,
//! plus `notpm`, the per-type counts and the population).
//!
//! NOTPM: New-Order transactions completed per minute of (virtual) run time, counting the 1%
//! that roll back by design (they are complete business transactions), with no keying or think
//! times, hence not tpmC. `throughput_tps` counts every committed transaction.
//!
//! Invariants: 1. only the run is measured (device counters are differences across it); 2. in
//! virtual time the JSON depends on the arguments only; 3. `--check` verifies clause 3.3.2 after
//! loading (with condition 11) and again after the run, and a failed check fails the command.

use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use kits::tpcc::{self, input::Kind, HomeWarehouse, NurandConsts, TpccConfig, TpccTerminal};
use serde::Serialize;
use storage::measure::Consistency;
use storage::sched::VirtualOptions;

use super::shared::{run_plan, BenchArgs};
use lab::measure::{buffer, latency_us, per_txn, snapshot, Buffer, LatencyUs, PerTxn};

/// `bench tpcb`'s arguments (`--scale` is warehouses here) and the reduced-population knobs.
#[derive(Debug, Args)]
pub struct TpccArgs {
    #[command(flatten)]
    pub run: BenchArgs,
    /// REDUCED population for quick tries and tests: items (specification: 100,000).
    #[arg(long, default_value_t = 100_000)]
    pub items: u32,
    /// REDUCED population: customers (and orders) per district (specification: 3,000).
    #[arg(long, default_value_t = 3000)]
    pub customers: u32,
    /// fixed: each terminal keeps one home warehouse (the specification, clause 2.4.1.1);
    /// random: each transaction draws its home warehouse over all warehouses (Shore-MT's kit
    /// with fewer threads than warehouses, as the NoFTL paper ran it).
    #[arg(long, default_value = "fixed")]
    pub home_warehouse: String,
}

#[derive(Debug, Serialize)]
struct Mix {
    new_order: u64,
    payment: u64,
    order_status: u64,
    delivery: u64,
    stock_level: u64,
    new_order_rollbacks: u64,
    conflict_retries: u64,
    delivery_districts_skipped: u64,
}

#[derive(Debug, Serialize)]
struct TpccResult {
    workload: &'static str,
    storage: String,
    clock: String,
    scale: u32,
    items: u32,
    customers_per_district: u32,
    reduced: bool,
    home_warehouse: HomeWarehouse,
    terminals: u32,
    seed: u64,
    page_bytes: usize,
    committed: u64,
    aborted: u64,
    throughput_tps: f64,
    notpm: f64,
    virtual_seconds: f64,
    mix: Mix,
    latency_us: LatencyUs,
    per_txn: PerTxn,
    buffer: Buffer,
    lock_waits: u64,
    group_commit_forces: u64,
    consistency: Consistency,
    check: &'static str,
    check_problems: Vec<String>,
    /// How the database was loaded: bulk or rows (--load).
    load: &'static str,
    /// The page FTL's pSLC write cache over the window (--slc-cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    slc_cache: Option<ftl::block_device::SlcCacheReport>,
}

pub fn run(a: TpccArgs) -> anyhow::Result<()> {
    let args = &a.run;
    if args.clock != "virtual"
        || (args.path.is_some() && args.storage != "file")
        || args.accounts_per_branch != 100_000
    {
        bail!("bench tpcc runs in virtual time on a flash target, memdisk or --storage file --path FILE (--clock real and --accounts-per-branch are TPC-B's)");
    }
    if let ("file", Some(path)) = (args.storage.as_str(), &args.path) {
        // TPC-C always loads a new database (it does not reuse one as TPC-B does): a file that
        // holds anything is refused before it is opened for writing, unless --force.
        lab::filelock::hold(path, "--path")?;
        let len = std::fs::metadata(path).map_or(0, |m| m.len());
        if len > 0 && !args.force {
            bail!(
                "bench tpcc loads a new database over --path, and {} is not empty ({}): give --force to overwrite it, or another --path",
                path.display(),
                lab::limits::Bytes(len)
            );
        }
    }
    if args.scale == 0 || args.terminals == 0 {
        bail!("--scale and --terminals must be at least 1");
    }
    let (until, _virtual_clock) = run_plan(args)?;
    let plan = args.results.plan()?;
    let mut cfg = if a.items == 100_000 && a.customers == 3000 {
        TpccConfig::spec(args.scale)
    } else {
        TpccConfig::reduced(args.scale, a.items, a.customers)
    };
    cfg.home_warehouse = HomeWarehouse::parse(&a.home_warehouse)?;
    cfg.validate()
        .context("--items must be at least 15 and --customers at least 2")?;
    if cfg.reduced {
        eprintln!("note: REDUCED TPC-C population ({} items, {} customers per district): not the specification's", cfg.items, cfg.customers_per_district);
    }
    let (mut e, storage_name, frames) = super::new_engine(
        args,
        cfg.db_pages_estimate(args.page_size),
        &format!("TPC-C scale {}", args.scale),
    )?;
    let wall = Instant::now();
    let bar = ProgressBar::new(cfg.rows_estimate());
    bar.set_style(
        ProgressStyle::with_template("loading {wide_bar} {pos}/{len} rows ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let method = args.load.unwrap_or_default();
    let loaded = tpcc::load_using(&mut e, cfg, tpcc::DDL, args.seed, method, |n| {
        bar.set_position(n)
    })?;
    bar.finish_and_clear();
    e.checkpoint()?;
    let load_s = wall.elapsed().as_secs_f64();
    if args.check {
        let rep = tpcc::check(&mut e, cfg, true)?;
        if !rep.passed() {
            bail!(
                "the TPC-C check failed right after loading: {:?}",
                rep.problems
            );
        }
    }

    let before = (snapshot(&e), e.buffer_stats(), e.lock_stats());
    let start_ns = e.now();
    let run_c = NurandConsts::run_from(loaded.c_load, args.seed);
    let mut terms: Vec<TpccTerminal> = (0..args.terminals)
        .map(|i| TpccTerminal::new(i, loaded.h, cfg, run_c, args.seed, args.txns))
        .collect();
    if plan.is_some() {
        terms.iter_mut().for_each(|t| t.events = Some(Vec::new()));
    }
    let cpu0 = Instant::now();
    let (sched, marks) = lab::runner::run_virtual_marked(
        &mut e,
        &mut terms,
        start_ns,
        VirtualOptions {
            until_ns: until.map(|u| start_ns + u),
            ..VirtualOptions::default()
        },
        plan.as_ref().map(|p| p.window_ns),
    )?;
    let events: Vec<storage::sched::TxnEvent> = terms
        .iter_mut()
        .flat_map(|t| t.events.take().unwrap_or_default())
        .collect();
    let run_wall_s = cpu0.elapsed().as_secs_f64();
    let virtual_ns = sched.elapsed_ns();
    let mut by = [0u64; 5];
    let (mut rb, mut retries, mut skipped) = (0, 0, 0);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    for t in &terms {
        for (k, n) in t.counts.committed.iter().enumerate() {
            by[k] += n;
        }
        rb += t.counts.rolled_back;
        retries += t.counts.retries;
        skipped += t.counts.delivery_skipped;
        hist.add(&t.latency_ns)?;
    }
    let committed: u64 = by.iter().sum();
    let after = (snapshot(&e), e.buffer_stats(), e.lock_stats());
    tpcc::txn::settle(&mut e, &mut terms)?;
    let secs = virtual_ns as f64 / 1e9;
    let (check, problems) = if args.check {
        let rep = tpcc::check(&mut e, cfg, by[Kind::Delivery.index()] == 0)?;
        (if rep.passed() { "passed" } else { "failed" }, rep.problems)
    } else {
        ("skipped", vec![])
    };
    let res = TpccResult {
        workload: "tpcc",
        storage: storage_name,
        clock: "virtual".into(),
        scale: args.scale,
        items: cfg.items,
        customers_per_district: cfg.customers_per_district,
        reduced: cfg.reduced,
        home_warehouse: cfg.home_warehouse,
        terminals: args.terminals,
        seed: args.seed,
        page_bytes: args.page_size,
        committed,
        aborted: rb + retries,
        throughput_tps: if secs > 0.0 {
            committed as f64 / secs
        } else {
            0.0
        },
        notpm: if secs > 0.0 {
            (by[Kind::NewOrder.index()] + rb) as f64 * 60.0 / secs
        } else {
            0.0
        },
        virtual_seconds: secs,
        mix: Mix {
            new_order: by[0],
            payment: by[1],
            order_status: by[2],
            delivery: by[3],
            stock_level: by[4],
            new_order_rollbacks: rb,
            conflict_retries: retries,
            delivery_districts_skipped: skipped,
        },
        latency_us: latency_us(&hist),
        per_txn: per_txn(&before.0, &after.0, committed, secs),
        buffer: buffer(frames, &before.1, &after.1),
        lock_waits: after.2.waits - before.2.waits,
        group_commit_forces: sched.group_forces,
        consistency: lab::measure::consistency(
            &before.0,
            &after.0,
            virtual_ns,
            args.terminals,
            until.is_some(),
            &hist,
        ),
        check,
        check_problems: problems,
        load: method.name(),
        slc_cache: lab::measure::slc_cache(&before.0, &after.0),
    };
    if let Some(p) = &plan {
        let types: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        lab::runner::write_results(
            p,
            &res,
            "tpcc",
            f64::from(res.scale),
            res.terminals,
            secs,
            marks,
            events,
            &types,
        )?;
    }
    if super::super::common::emit_json(args.json.as_deref(), &res)? {
        println!(
            "tpcc on {} (virtual clock): {} warehouse(s){}, home warehouse {}, {} terminals, seed {}",
            res.storage,
            res.scale,
            if cfg.reduced { " REDUCED" } else { "" },
            cfg.home_warehouse.name(),
            res.terminals,
            res.seed
        );
        println!(
            "  NOTPM {:.0}  committed {} ({:.1} tx/s) over {:.3} s virtual",
            res.notpm, committed, res.throughput_tps, secs
        );
        let m = &res.mix;
        println!(
            "  mix: new-order {} (+{} rolled back) payment {} order-status {} delivery {} stock-level {}; conflict retries {}",
            m.new_order, m.new_order_rollbacks, m.payment, m.order_status, m.delivery, m.stock_level, m.conflict_retries
        );
        super::shared::print_latency(&res.latency_us);
        super::shared::print_per_txn(&res.per_txn);
        println!(
            "  buffer ({} frames): hits {} misses {} evictions {} writebacks {}",
            frames, res.buffer.hits, res.buffer.misses, res.buffer.evictions, res.buffer.writebacks
        );
        super::print_consistency(&res.consistency);
        if let Some(c) = &res.slc_cache {
            super::print_slc_cache(c);
        }
        super::print_check(res.check, &res.check_problems);
        println!(
            "  host: load {:.2} s ({}); run {:.3} s wall",
            load_s, res.load, run_wall_s
        );
    }
    if res.check == "failed" {
        bail!("the TPC-C check failed");
    }
    Ok(())
}
