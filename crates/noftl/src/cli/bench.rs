//! `noftl bench tpcb|tatp|tpcc|tpch`: one workload on the storage engine, on any store, in
//! virtual or real time. The experiment is `lab::experiments::bench` (its module doc says how
//! the database is loaded or reused and what is measured); this verb parses the flags into a
//! spec, writes the JSON and prints the report.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, Subcommand};
use kits::tpch::answer;
use lab::experiments::bench::{self as experiment, TatpRun, TpccRun, TpchRun};
use lab::measure::{LatencyUs, PerTxn};
use storage::measure::Consistency;

use super::common::{emit_json, DeviceArgs, ResultsArgs};
use crate::targets::FtlKnobs;

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
        mut_arg("force", |a| a.help("Write into a --results directory that is not empty (TPC-B's --path overwrite: not used by TATP).")),
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
        mut_arg("force", |a| a.help("Write into a --results directory that is not empty; --store file: overwrite a --path that is not empty.")),
        mut_arg("check", |a| a.help("Check the TPC-C consistency conditions and the engine's structure after loading and after the run.")),
        mut_arg("regions", |a| a.help("TATP's regions on native: not used by TPC-C.")),
        mut_arg("clock", |a| a
            .help("virtual: deterministic scheduler in virtual time. bench tpcc supports virtual only (real and none are refused).")
            .value_parser(super::clock::parser("bench tpcc", &["virtual"]))),
    )]
    Tpcc(TpccArgs),
    /// TPC-H: the eight tables bulk loaded, queries 1, 6, 12 and 14 with seconds per query
    /// (virtual time) and their answers checked. --scale is the scale factor (0.01 to 1000).
    Tpch(TpchArgs),
}

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
    /// Preconditioning before the measured run: the workload runs until the host has written
    /// the device over this many times since it was formatted (the load included).
    #[arg(
        long = "precondition",
        value_name = "DEVICE_WRITES",
        default_value_t = 0.0
    )]
    pub precondition: f64,
    /// One round of the steady-state rule (SNIA SSS PTS: the last 5 rounds' throughput and WAF
    /// within 20% range and 10% fit excursion of their mean), virtual time.
    #[arg(long, default_value = "10s")]
    pub round: String,
    /// Rounds before the measured run, at most (0, the default: none, and the result says the
    /// run was not checked for steady state; 25 is SNIA's cap).
    #[arg(long, default_value_t = 0)]
    pub max_rounds: u32,
    /// Fail (after the report) when the run did not start in steady state.
    #[arg(long)]
    pub strict: bool,
    /// tpcb, tpcc: how the database is loaded: bulk (dense heap pages, B+-trees built bottom-up
    /// from sorted keys, one log record per page; the default) or rows (one logged insert per
    /// row and index, how every TPC-B and TPC-C figure published before 2026-11-27 was loaded).
    /// TATP always loads row by row.
    #[arg(long)]
    pub load: Option<kits::LoadMethod>,
    #[command(flatten)]
    pub results: ResultsArgs,
}

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
    /// Run on the TPC-C database already in --path (loaded by an earlier `bench tpcc --storage
    /// file` with the same --scale, --items, --customers and --seed; checked by key) instead of
    /// loading a new one.
    #[arg(long)]
    pub reuse: bool,
    /// The seed of the transaction inputs (default: --seed); the load's constants always come
    /// from --seed, so runs on one reused database draw new inputs with new run seeds.
    #[arg(long)]
    pub run_seed: Option<u64>,
}

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

impl BenchArgs {
    /// The run these flags ask for, as the experiment library takes it.
    pub fn spec(&self) -> experiment::Spec {
        experiment::Spec {
            storage: self.storage.clone(),
            device: self.device.spec(),
            knobs: self.knobs.spec(),
            log_region: self.log_region.clone(),
            path: self.path.clone(),
            // One --force (`ResultsArgs`): overwrite what --path or --results holds.
            force: self.results.force,
            scale: self.scale,
            accounts_per_branch: self.accounts_per_branch,
            terminals: self.terminals,
            txns: self.txns,
            duration: self.duration.clone(),
            buffer_pages: self.buffer_pages,
            page_size: self.page_size,
            clock: self.clock.clone(),
            seed: self.seed,
            check: self.check,
            regions: self.regions,
            load: self.load,
            precondition_device_writes: self.precondition,
            round: self.round.clone(),
            max_rounds: self.max_rounds,
            results: self.results.results.clone(),
            sample_window: self.results.sample_window.clone(),
            raw: self.results.raw,
        }
    }
}

impl TpccArgs {
    /// The run these flags ask for, as the experiment library takes it.
    pub fn spec(&self) -> experiment::TpccSpec {
        experiment::TpccSpec {
            run: self.run.spec(),
            items: self.items,
            customers: self.customers,
            home_warehouse: self.home_warehouse.clone(),
            reuse: self.reuse,
            run_seed: self.run_seed,
        }
    }
}

impl TpchArgs {
    /// The run these flags ask for, as the experiment library takes it.
    pub fn spec(&self) -> experiment::TpchSpec {
        experiment::TpchSpec {
            storage: self.storage.clone(),
            device: self.device.spec(),
            knobs: self.knobs.spec(),
            log_region: self.log_region.clone(),
            scale: self.scale,
            queries: self.queries.clone(),
            repeat: self.repeat,
            params: self.params.clone(),
            seed: self.seed,
            buffer_pages: self.buffer_pages,
            read_ahead: self.read_ahead,
            page_size: self.page_size,
            check: self.check,
        }
    }
}

impl BenchArgs {
    /// The output rule before any work: the JSON and the result directory are judged, the
    /// config and the database file declared inputs (the JSON never replaces them).
    fn check_outputs(&self) -> anyhow::Result<()> {
        super::common::check_outputs(
            &[self.device.input(), ("--path", self.path.as_deref())],
            &[self.json.as_deref()],
        )?;
        self.results.check()
    }
}

impl BenchCommand {
    fn check_outputs(&self) -> anyhow::Result<()> {
        match self {
            BenchCommand::Tpcb(a) | BenchCommand::Tatp(a) => a.check_outputs(),
            BenchCommand::Tpcc(a) => a.run.check_outputs(),
            BenchCommand::Tpch(a) => {
                super::common::check_outputs(&[a.device.input()], &[a.json.as_deref()])
            }
        }
    }
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    cmd.check_outputs()?;
    match cmd {
        BenchCommand::Tpcb(a) => report(
            a.json.as_deref(),
            || experiment::run_tpcb(&a.spec()),
            |r| &r.result,
            print_tpcb,
            |r| verdict("TPC-B", r.result.check, a.strict, &r.result.steady_state),
        ),
        BenchCommand::Tatp(a) => report(
            a.json.as_deref(),
            || experiment::run_tatp(&a.spec()),
            |r| &r.result,
            print_tatp,
            |r| verdict("TATP", r.result.check, a.strict, &r.result.steady_state),
        ),
        BenchCommand::Tpcc(a) => report(
            a.run.json.as_deref(),
            || experiment::run_tpcc(&a.spec()),
            |r| &r.result,
            print_tpcc,
            |r| {
                verdict(
                    "TPC-C",
                    r.result.check,
                    a.run.strict,
                    &r.result.steady_state,
                )
            },
        ),
        BenchCommand::Tpch(a) => report(
            a.json.as_deref(),
            || experiment::run_tpch(&a.spec()),
            |r| &r.result,
            print_tpch,
            tpch_failed,
        ),
    }
}

/// One bench verb end to end (its outputs judged before, in `run`): the run, its JSON (or the
/// human report), then the check's verdict.
fn report<R, J: serde::Serialize>(
    json: Option<&std::path::Path>,
    run: impl FnOnce() -> anyhow::Result<R>,
    result: impl Fn(&R) -> &J,
    print: impl Fn(&R),
    verdict: impl Fn(&R) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let r = run()?;
    if emit_json(json, result(&r))? {
        print(&r);
    }
    verdict(&r)
}

/// A workload's check that failed fails the command, and with `--strict` a run that did not
/// start in steady state (after its report).
fn verdict(
    workload: &str,
    check: &str,
    strict: bool,
    steady: &lab::steady::SteadyState,
) -> anyhow::Result<()> {
    failed(workload, check)?;
    lab::steady::refuse_unsteady(strict, [(workload, steady)])
}

/// A workload's check that failed fails the command (after its report).
fn failed(workload: &str, check: &str) -> anyhow::Result<()> {
    if check == "failed" {
        bail!("the {workload} check failed");
    }
    Ok(())
}

/// TPC-H's answer check: the first query whose answer is wrong fails the command.
fn tpch_failed(run: &TpchRun) -> anyhow::Result<()> {
    if let Some(r) = run.result.queries.iter().find(|r| r.check == "failed") {
        bail!(
            "the TPC-H answer check failed for Q{}: {}",
            r.query,
            r.check_problem.as_deref().unwrap_or("")
        );
    }
    Ok(())
}

fn print_tpcb(run: &experiment::TpcbRun) {
    let res = &run.result;
    let (committed, aborted) = (res.committed, res.aborted);
    let (frames, secs, load_s, run_wall_s) = (run.frames, run.secs, run.load_s, run.run_wall_s);
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
    super::common::print_steady(&res.steady_state);
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

fn print_tatp(run: &TatpRun) {
    let res = &run.result;
    let (finished, succeeded, secs) = (run.finished, run.succeeded, run.secs);
    let (load_s, run_wall_s) = (run.load_s, run.run_wall_s);
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
    print_consistency(&res.consistency);
    super::common::print_steady(&res.steady_state);
    if let Some(c) = &res.slc_cache {
        print_slc_cache(c);
    }
    print_check(res.check, &res.check_problems);
    println!("  host: load {:.2} s; run {:.3} s wall", load_s, run_wall_s);
}

fn print_tpcc(run: &TpccRun) {
    let res = &run.result;
    let (cfg, committed, secs, frames) = (run.cfg, run.committed, run.secs, run.frames);
    let (load_s, run_wall_s) = (run.load_s, run.run_wall_s);
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
    print_latency(&res.latency_us);
    print_per_txn(&res.per_txn);
    println!(
        "  buffer ({} frames): hits {} misses {} evictions {} writebacks {}",
        frames, res.buffer.hits, res.buffer.misses, res.buffer.evictions, res.buffer.writebacks
    );
    print_consistency(&res.consistency);
    super::common::print_steady(&res.steady_state);
    if let Some(c) = &res.slc_cache {
        print_slc_cache(c);
    }
    print_check(res.check, &res.check_problems);
    println!(
        "  host: load {:.2} s ({}); run {:.3} s wall",
        load_s, res.load, run_wall_s
    );
}

fn print_tpch(run: &TpchRun) {
    let res = &run.result;
    let (frames, read_ahead_pages) = (run.frames, run.read_ahead_pages);
    let (load_virtual_seconds, load_s) = (run.load_virtual_seconds, run.load_s);
    let query_wall_s = &run.query_wall_s;
    println!(
        "tpch on {} (virtual clock): scale factor {}, {} buffer frames, read-ahead {} pages",
        res.storage, res.scale, frames, read_ahead_pages
    );
    println!(
        "  load: {} rows, {} heap pages, {} index pages; {:.2} s virtual, {:.2} s wall",
        res.load.rows, res.load.heap_pages, res.load.index_pages, load_virtual_seconds, load_s
    );
    for (r, wall_s) in res.queries.iter().zip(query_wall_s) {
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

/// The consistency line of every bench verb's human output.
pub fn print_consistency(c: &Consistency) {
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
pub fn print_slc_cache(c: &ftl::block_device::SlcCacheReport) {
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

/// The latency line of every bench verb's human output.
pub fn print_latency(l: &LatencyUs) {
    println!(
        "  latency us: mean {:.1} p50 {:.1} p95 {:.1} p99 {:.1} max {:.1}",
        l.mean, l.p50, l.p95, l.p99, l.max
    );
}

/// The per-transaction lines of every bench verb's human output.
pub fn print_per_txn(p: &PerTxn) {
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
pub fn print_check(check: &str, problems: &[String]) {
    if problems.is_empty() {
        println!("  check: {check}");
    } else {
        println!("  check: {check} {problems:?}");
    }
}
