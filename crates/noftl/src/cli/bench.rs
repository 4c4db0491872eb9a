//! `noftl bench tpcb`: TPC-B on the storage engine, on any block-device target, in virtual or
//! real time.
//!
//! The database is loaded first (or reused from a `--storage file` image that holds one); only
//! the run is measured: device counters are differences across it. In virtual time the JSON
//! holds virtual-time figures only, so the same command and seed give byte-identical JSON; wall
//! clock figures (load time, host CPU per transaction) go to the human output.

use std::time::Instant;

use anyhow::bail;
use clap::Subcommand;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use kits::tpcb::{self, Handles, TpcbConfig, TpcbTerminal};
use serde::Serialize;
use storage::measure::Consistency;
use storage::{BlockPageStore, Engine, EngineConfig};

use lab::measure::{
    buffer, consistency, latency_us, per_txn, slc_cache, snapshot, Buffer, LatencyUs, PerTxn,
};
use lab::runner::{run_terminals, write_results};

use lab::limits;

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
        mut_arg("force", |a| a.help("TPC-B's --path overwrite: not used by TATP.")),
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
        mut_arg("force", |a| a.help("--store file: overwrite a --path that is not empty.")),
        mut_arg("check", |a| a.help("Check the TPC-C consistency conditions and the engine's structure after loading and after the run.")),
        mut_arg("regions", |a| a.help("TATP's regions on native: not used by TPC-C.")),
        mut_arg("clock", |a| a
            .help("virtual: deterministic scheduler in virtual time. bench tpcc supports virtual only (real and none are refused).")
            .value_parser(super::clock::parser("bench tpcc", &["virtual"]))),
    )]
    Tpcc(tpcc::TpccArgs),
    /// TPC-H: the eight tables bulk loaded, queries 1, 6, 12 and 14 with seconds per query
    /// (virtual time) and their answers checked. --scale is the scale factor (0.01 to 1000).
    Tpch(tpch::TpchArgs),
}

mod shared;
mod tpcc;
mod tpch;

pub(super) use shared::{
    check_counts, new_engine, print_check, print_consistency, print_latency, print_per_txn,
    print_slc_cache, run_plan, BenchArgs,
};
use shared::{device, page_store, refuse_foreign_file, sized_frames};

#[derive(Debug, Serialize)]
struct BenchResult {
    workload: &'static str,
    storage: String,
    clock: String,
    scale: u32,
    accounts_per_branch: u32,
    terminals: u32,
    seed: u64,
    page_bytes: usize,
    committed: u64,
    aborted: u64,
    throughput_tps: f64,
    virtual_seconds: f64,
    latency_us: LatencyUs,
    per_txn: PerTxn,
    buffer: Buffer,
    lock_waits: u64,
    group_commit_forces: u64,
    consistency: Consistency,
    check: &'static str,
    check_problems: Vec<String>,
    /// How the database was loaded: bulk or rows (--load), or reused (a file that held one).
    load: &'static str,
    /// The page FTL's pSLC write cache over the window (--slc-cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    slc_cache: Option<ftl::block_device::SlcCacheReport>,
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    let args = match cmd {
        BenchCommand::Tpcb(args) => args,
        BenchCommand::Tatp(args) => return super::bench_tatp::run(args),
        BenchCommand::Tpcc(args) => return tpcc::run(args),
        BenchCommand::Tpch(args) => return tpch::run(args),
    };
    if args.scale == 0 || args.terminals == 0 || args.accounts_per_branch == 0 {
        bail!("--scale, --terminals and --accounts-per-branch must be at least 1");
    }
    let (until, virtual_clock) = run_plan(&args)?;
    let plan = args.results.plan()?;
    // Someone else's file is refused before anything opens, sizes or writes it (and the run
    // that creates the file then finds its own database in it).
    if let (Some(path), "file", false) = (&args.path, args.storage.as_str(), args.force) {
        lab::filelock::hold(path, "--path")?;
        refuse_foreign_file(path)?;
    }
    // Accounts and tellers are numbered by 32-bit ids.
    let accounts = u64::from(args.scale) * u64::from(args.accounts_per_branch);
    limits::in_range(
        "--scale x --accounts-per-branch",
        accounts,
        1,
        u64::from(u32::MAX),
        "accounts are numbered by 32-bit ids",
    )?;
    let cfg = TpcbConfig {
        scale: args.scale,
        tellers_per_branch: 10,
        accounts_per_branch: args.accounts_per_branch,
    };
    let (store, storage_name) = page_store(&args)?;
    let frames = sized_frames(
        &args,
        &*store,
        cfg.db_pages_estimate(args.page_size),
        &format!("TPC-B scale {}", args.scale),
    )?;
    let ecfg = EngineConfig {
        buffer_frames: frames,
        ..EngineConfig::default()
    };

    // Reuse a database the file already holds; otherwise create and load.
    let wall = Instant::now();
    let reuse = args.storage == "file" && args.path.as_ref().is_some_and(|p| p.exists());
    let existing = if reuse {
        Engine::open(
            Box::new(BlockPageStore::new(device(&args)?, args.page_size, None)?),
            ecfg.clone(),
        )
        .ok()
    } else {
        None
    };
    let method = args.load.unwrap_or_default();
    let (e, h, load): (Engine, Handles, &'static str) = match existing {
        Some(mut e) if Handles::get(&e).is_ok() => {
            let h = Handles::get(&e)?;
            e.set_now(0);
            eprintln!(
                "reusing the TPC-B database in {}",
                args.path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
            drop(store);
            (e, h, "reused")
        }
        _ => {
            let mut e = Engine::create(store, ecfg)?;
            let bar = ProgressBar::new(cfg.rows());
            bar.set_style(
                ProgressStyle::with_template("loading {wide_bar} {pos}/{len} rows ({eta})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            let h = tpcb::load_using(&mut e, cfg, tpcb::DDL, method, |n| bar.set_position(n))?;
            bar.finish_and_clear();
            e.checkpoint()?;
            (e, h, method.name())
        }
    };
    let load_s = wall.elapsed().as_secs_f64();

    let before = (snapshot(&e), e.buffer_stats(), e.lock_stats());
    let start_ns = e.now();
    let mut terms: Vec<TpcbTerminal> = (0..args.terminals)
        .map(|i| TpcbTerminal::new(i, h, cfg, args.seed, args.txns))
        .collect();
    if plan.is_some() {
        terms.iter_mut().for_each(|t| t.events = Some(Vec::new()));
    }
    let cpu0 = Instant::now();
    let (mut e, mut terms, virtual_ns, forces, marks) = run_terminals(
        e,
        terms,
        start_ns,
        until,
        virtual_clock,
        plan.as_ref().map(|p| p.window_ns),
    )?;
    let run_wall_s = cpu0.elapsed().as_secs_f64();
    let committed: u64 = terms.iter().map(|t| t.committed).sum();
    let aborted: u64 = terms.iter().map(|t| t.aborted).sum();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    for t in &terms {
        hist.add(&t.latency_ns)?;
    }
    let after = (snapshot(&e), e.buffer_stats(), e.lock_stats());
    let secs = if virtual_clock {
        virtual_ns as f64 / 1e9
    } else {
        run_wall_s
    };
    let (check, problems) = if args.check {
        let rep = tpcb::check(&mut e, cfg)?;
        (if rep.passed() { "passed" } else { "failed" }, rep.problems)
    } else {
        ("skipped", vec![])
    };
    let res = BenchResult {
        workload: "tpcb",
        storage: storage_name,
        clock: args.clock.clone(),
        scale: args.scale,
        accounts_per_branch: args.accounts_per_branch,
        terminals: args.terminals,
        seed: args.seed,
        page_bytes: args.page_size,
        committed,
        aborted,
        throughput_tps: if secs > 0.0 {
            committed as f64 / secs
        } else {
            0.0
        },
        virtual_seconds: virtual_ns as f64 / 1e9,
        latency_us: latency_us(&hist),
        per_txn: per_txn(&before.0, &after.0, committed, secs),
        buffer: buffer(frames, &before.1, &after.1),
        lock_waits: after.2.waits - before.2.waits,
        group_commit_forces: forces,
        consistency: consistency(
            &before.0,
            &after.0,
            (secs * 1e9) as u64,
            args.terminals,
            until.is_some(),
            &hist,
        ),
        check,
        check_problems: problems,
        load,
        slc_cache: slc_cache(&before.0, &after.0),
    };
    if let Some(p) = &plan {
        let events = terms
            .iter_mut()
            .flat_map(|t| t.events.take().unwrap_or_default())
            .collect();
        write_results(
            p,
            &res,
            "tpcb",
            f64::from(res.scale),
            res.terminals,
            secs,
            marks,
            events,
            &["tpcb"],
        )?;
    }
    if super::common::emit_json(args.json.as_deref(), &res)? {
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
    if res.check == "failed" {
        bail!("the TPC-B check failed");
    }
    Ok(())
}
