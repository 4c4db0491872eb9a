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
use hdrhistogram::Histogram;
use kits::tpcc::{self, input::Kind, HomeWarehouse, NurandConsts, TpccConfig, TpccTerminal};
use serde::Serialize;
use storage::measure::Consistency;
use storage::sched::VirtualOptions;

use super::shared::{new_engine, plan, run_plan, Spec};
use crate::measure::{buffer, latency_us, per_txn, snapshot, Buffer, LatencyUs, PerTxn};

/// `bench tpcb`'s arguments (`--scale` is warehouses here) and the reduced-population knobs.
#[derive(Debug, Clone)]
pub struct TpccSpec {
    pub run: Spec,
    /// REDUCED population for quick tries and tests: items (specification: 100,000).
    pub items: u32,
    /// REDUCED population: customers (and orders) per district (specification: 3,000).
    pub customers: u32,
    /// fixed: each terminal keeps one home warehouse (the specification, clause 2.4.1.1);
    /// random: each transaction draws its home warehouse over all warehouses (Shore-MT's kit
    /// with fewer threads than warehouses, as the NoFTL paper ran it).
    pub home_warehouse: String,
    /// Run on the TPC-C database already in `--path` (loaded by an earlier `bench tpcc
    /// --storage file` with the same population flags and `--seed`) instead of loading one:
    /// the steady-state rounds of a file system's table reopen one database round after round.
    pub reuse: bool,
    /// The seed of the transaction inputs (None: `--seed`). The load's NURand constant always
    /// comes from `--seed`, so runs on one reused database draw new inputs with new run seeds.
    pub run_seed: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct Mix {
    pub new_order: u64,
    pub payment: u64,
    pub order_status: u64,
    pub delivery: u64,
    pub stock_level: u64,
    pub new_order_rollbacks: u64,
    pub conflict_retries: u64,
    pub delivery_districts_skipped: u64,
}

#[derive(Debug, Serialize)]
pub struct TpccResult {
    pub workload: &'static str,
    pub storage: String,
    pub clock: String,
    pub scale: u32,
    pub items: u32,
    pub customers_per_district: u32,
    pub reduced: bool,
    pub home_warehouse: HomeWarehouse,
    pub terminals: u32,
    pub seed: u64,
    /// The transaction inputs' seed where it is not `seed` (`--run-seed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_seed: Option<u64>,
    pub page_bytes: usize,
    pub committed: u64,
    pub aborted: u64,
    pub throughput_tps: f64,
    pub notpm: f64,
    pub virtual_seconds: f64,
    pub mix: Mix,
    pub latency_us: LatencyUs,
    pub per_txn: PerTxn,
    pub buffer: Buffer,
    pub lock_waits: u64,
    pub group_commit_forces: u64,
    pub consistency: Consistency,
    pub check: &'static str,
    pub check_problems: Vec<String>,
    /// How the database was loaded: bulk or rows (--load).
    pub load: &'static str,
    /// The page FTL's pSLC write cache over the window (--slc-cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slc_cache: Option<ftl::block_device::SlcCacheReport>,
    /// The steady-state rule before the run (`crate::steady`).
    pub steady_state: crate::steady::SteadyState,
}

/// Refuses, before anything is opened, what TPC-C does not run: another clock, TPC-B's flags,
/// a `--store file` path that holds something (TPC-C loads a new database, unless `--reuse`),
/// and `--reuse` without a file that holds one.
fn refuse_what_tpcc_does_not_run(a: &TpccSpec) -> anyhow::Result<()> {
    let args = &a.run;
    if args.clock != "virtual"
        || (args.path.is_some() && args.storage != "file")
        || args.accounts_per_branch != 100_000
    {
        bail!("bench tpcc runs in virtual time on a flash target, memdisk or --storage file --path FILE (--clock real and --accounts-per-branch are TPC-B's)");
    }
    if a.reuse {
        // Reusing needs a file that holds something; what it holds is checked when opened.
        let Some(path) = args.path.as_ref().filter(|_| args.storage == "file") else {
            bail!("bench tpcc --reuse runs on the database in --storage file --path FILE");
        };
        crate::filelock::hold(path, "--path")?;
        if std::fs::metadata(path).map_or(0, |m| m.len()) == 0 {
            bail!(
                "bench tpcc --reuse: {} holds no database (load one with bench tpcc --storage file first)",
                path.display()
            );
        }
    } else if let ("file", Some(path)) = (args.storage.as_str(), &args.path) {
        // TPC-C always loads a new database (it does not reuse one as TPC-B does): a file that
        // holds anything is refused before it is opened for writing, unless --force.
        crate::filelock::hold(path, "--path")?;
        let len = std::fs::metadata(path).map_or(0, |m| m.len());
        if len > 0 && !args.force {
            bail!(
                "bench tpcc loads a new database over --path, and {} is not empty ({}): give --force to overwrite it, or another --path",
                path.display(),
                crate::limits::Bytes(len)
            );
        }
    }
    if args.scale == 0 || args.terminals == 0 {
        bail!("--scale and --terminals must be at least 1");
    }
    Ok(())
}

/// The TPC-C configuration of the run: the specification's population, or a REDUCED one.
fn config(a: &TpccSpec) -> anyhow::Result<TpccConfig> {
    let args = &a.run;
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
    Ok(cfg)
}

/// The terminals' counters summed: commits by kind, New-Order rollbacks, conflict retries,
/// skipped delivery districts, and every latency.
#[allow(clippy::type_complexity)]
fn totals(terms: &[TpccTerminal]) -> anyhow::Result<([u64; 5], u64, u64, u64, Histogram<u64>)> {
    let mut by = [0u64; 5];
    let (mut rb, mut retries, mut skipped) = (0, 0, 0);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    for t in terms {
        for (k, n) in t.counts.committed.iter().enumerate() {
            by[k] += n;
        }
        rb += t.counts.rolled_back;
        retries += t.counts.retries;
        skipped += t.counts.delivery_skipped;
        hist.add(&t.latency_ns)?;
    }
    Ok((by, rb, retries, skipped, hist))
}

/// Runs TPC-C as `a` says (`run.scale`: warehouses).
/// Loads the database (with a progress bar) and checkpoints it; with `--check`, checks it
/// before any transaction. Returns what the load gave and its wall time, seconds.
fn load_checked(
    e: &mut storage::Engine,
    cfg: TpccConfig,
    args: &Spec,
    method: kits::LoadMethod,
) -> anyhow::Result<(tpcc::load::Loaded, f64)> {
    let wall = Instant::now();
    let bar = super::shared::load_bar(cfg.rows_estimate(), false);
    let loaded = tpcc::load_using(e, cfg, tpcc::DDL, args.seed, method, |n| {
        bar.set_position(n)
    })?;
    bar.finish_and_clear();
    e.checkpoint()?;
    let load_s = wall.elapsed().as_secs_f64();
    if args.check {
        let rep = tpcc::check(e, cfg, true)?;
        if !rep.passed() {
            bail!(
                "the TPC-C check failed right after loading: {:?}",
                rep.problems
            );
        }
    }
    Ok((loaded, load_s))
}

/// The engine of a run with its database: the file's, opened again (`--reuse`), or a new one
/// loaded (and checked with `--check`).
struct Opened {
    e: storage::Engine,
    storage_name: String,
    frames: usize,
    loaded: tpcc::load::Loaded,
    load_s: f64,
    load: &'static str,
}

fn open_or_load(a: &TpccSpec, cfg: TpccConfig) -> anyhow::Result<Opened> {
    let args = &a.run;
    let what = format!("TPC-C scale {}", args.scale);
    let need_pages = cfg.db_pages_estimate(args.page_size);
    if a.reuse {
        let wall = Instant::now();
        let (mut e, storage_name, frames) = super::shared::reopen_engine(args, need_pages, &what)?;
        let loaded = tpcc::reopened(&mut e, cfg, args.seed)?;
        eprintln!(
            "reusing the TPC-C database in {}",
            args.path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        );
        return Ok(Opened {
            e,
            storage_name,
            frames,
            loaded,
            load_s: wall.elapsed().as_secs_f64(),
            load: "reused",
        });
    }
    let (mut e, storage_name, frames) = new_engine(args, need_pages, &what)?;
    let method = args.load.unwrap_or_default();
    let (loaded, load_s) = load_checked(&mut e, cfg, args, method)?;
    Ok(Opened {
        e,
        storage_name,
        frames,
        loaded,
        load_s,
        load: method.name(),
    })
}

pub fn run(a: &TpccSpec) -> anyhow::Result<TpccRun> {
    let args = &a.run;
    refuse_what_tpcc_does_not_run(a)?;
    let (until, virtual_clock) = run_plan(args)?;
    let plan = plan(args)?;
    let cfg = config(a)?;
    let Opened {
        mut e,
        storage_name,
        frames,
        loaded,
        load_s,
        load,
    } = open_or_load(a, cfg)?;
    let run_seed = a.run_seed.unwrap_or(args.seed);
    let params = crate::workload::Params {
        scale: Some(args.scale),
        seed: args.seed,
        tpcc_reduced: Some((cfg.items, cfg.customers_per_district)),
        home_warehouse: Some(a.home_warehouse.clone()),
        ..crate::workload::Params::default()
    };
    let steady_state = super::shared::reach_steady(
        args,
        &mut e,
        "tpcc",
        params,
        Box::new(loaded),
        virtual_clock,
    )?;
    let before = (snapshot(&e), e.buffer_stats(), e.lock_stats());
    let start_ns = e.now();
    let run_c = NurandConsts::run_from(loaded.c_load, run_seed);
    let mut terms: Vec<TpccTerminal> = (0..args.terminals)
        .map(|i| TpccTerminal::new(i, loaded.h, cfg, run_c, run_seed, args.txns))
        .collect();
    if plan.is_some() {
        terms.iter_mut().for_each(|t| t.events = Some(Vec::new()));
    }
    let cpu0 = Instant::now();
    let (sched, marks) = crate::runner::run_virtual_marked(
        &mut e,
        &mut terms,
        start_ns,
        VirtualOptions {
            until_ns: until.map(|u| start_ns + u),
            ..VirtualOptions::default()
        },
        plan.as_ref().map(|p| p.window_ns),
    )?;
    let events: Vec<Option<Vec<storage::sched::TxnEvent>>> =
        terms.iter_mut().map(|t| t.events.take()).collect();
    let run_wall_s = cpu0.elapsed().as_secs_f64();
    let virtual_ns = sched.elapsed_ns();
    let (by, rb, retries, skipped, hist) = totals(&terms)?;
    let committed: u64 = by.iter().sum();
    let after = (snapshot(&e), e.buffer_stats(), e.lock_stats());
    tpcc::txn::settle(&mut e, &mut terms)?;
    let secs = virtual_ns as f64 / 1e9;
    let (check, problems) = if args.check {
        // A reused database may hold earlier runs' deliveries.
        let before_delivery = !a.reuse && by[Kind::Delivery.index()] == 0;
        let rep = tpcc::check(&mut e, cfg, before_delivery)?;
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
        run_seed: a.run_seed.filter(|&r| r != args.seed),
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
        consistency: crate::measure::consistency(
            &before.0,
            &after.0,
            virtual_ns,
            args.terminals,
            until.is_some(),
            &hist,
        ),
        check,
        check_problems: problems,
        load,
        slc_cache: crate::measure::slc_cache(&before.0, &after.0),
        steady_state,
    };
    if let Some(p) = &plan {
        let types: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        crate::runner::write_results(
            p,
            &res,
            "tpcc",
            f64::from(res.scale),
            res.terminals,
            secs,
            crate::results::Trace::of_terminals(Vec::new(), marks, events),
            &types,
            &args.device,
        )?;
    }
    Ok(TpccRun {
        result: res,
        cfg,
        committed,
        secs,
        frames,
        load_s,
        run_wall_s,
    })
}

/// What a run gave: its result (the JSON) and the host-side figures of the human report.
#[derive(Debug)]
pub struct TpccRun {
    pub result: TpccResult,
    pub cfg: TpccConfig,
    pub committed: u64,
    pub secs: f64,
    pub frames: usize,
    pub load_s: f64,
    pub run_wall_s: f64,
}
