//! `noftl bench tpcb`: TPC-B on the storage engine, on any block-device target, in virtual or
//! real time.
//!
//! The database is loaded first (or reused from a `--storage file` image that holds one); only
//! the run is measured: device counters are differences across it. In virtual time the JSON
//! holds virtual-time figures only, so the same command and seed give byte-identical JSON; wall
//! clock figures (load time, host CPU per transaction) go to the human output.

use std::time::Instant;

use anyhow::bail;
use hdrhistogram::Histogram;
use kits::tpcb::{self, Handles, TpcbConfig, TpcbTerminal};
use serde::Serialize;
use storage::measure::Consistency;
use storage::{BlockPageStore, Engine, EngineConfig};

use crate::measure::{
    buffer, consistency, latency_us, per_txn, slc_cache, snapshot, Buffer, LatencyUs, PerTxn,
};
use crate::runner::write_results;

use crate::limits;

mod shared;
mod tatp;
mod tpcc;
mod tpch;

use shared::{device, page_store, refuse_foreign_file, run_plan, run_recorded, sized_frames};
pub use shared::{plan, Spec};
pub use tatp::{run as run_tatp, TatpResult, TatpRun};
pub use tpcc::{run as run_tpcc, TpccResult, TpccRun, TpccSpec};
pub use tpch::{run as run_tpch, TpchResult, TpchRun, TpchSpec};

#[derive(Debug, Serialize)]
pub struct BenchResult {
    pub workload: &'static str,
    pub storage: String,
    pub clock: String,
    pub scale: u32,
    pub accounts_per_branch: u32,
    pub terminals: u32,
    pub seed: u64,
    pub page_bytes: usize,
    pub committed: u64,
    pub aborted: u64,
    pub throughput_tps: f64,
    pub virtual_seconds: f64,
    pub latency_us: LatencyUs,
    pub per_txn: PerTxn,
    pub buffer: Buffer,
    pub lock_waits: u64,
    pub group_commit_forces: u64,
    pub consistency: Consistency,
    pub check: &'static str,
    pub check_problems: Vec<String>,
    /// How the database was loaded: bulk or rows (--load), or reused (a file that held one).
    pub load: &'static str,
    /// The page FTL's pSLC write cache over the window (--slc-cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slc_cache: Option<ftl::block_device::SlcCacheReport>,
    /// The steady-state rule before the run (`crate::steady`).
    pub steady_state: crate::steady::SteadyState,
}

/// The TPC-B database of the run: the one a `--store file` image already holds (reused), or a
/// new one created on `store` and loaded; with the loader's name for the result.
fn load_or_reuse(
    args: &Spec,
    cfg: TpcbConfig,
    store: Box<dyn storage::PageStore>,
    ecfg: EngineConfig,
) -> anyhow::Result<(Engine, Handles, &'static str)> {
    let reuse = args.storage == "file" && args.path.as_ref().is_some_and(|p| p.exists());
    let existing = if reuse {
        Engine::open(
            Box::new(BlockPageStore::new(device(args)?, args.page_size, None)?),
            ecfg.clone(),
        )
        .ok()
    } else {
        None
    };
    let method = args.load.unwrap_or_default();
    Ok(match existing {
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
            let bar = shared::load_bar(cfg.rows(), false);
            let h = tpcb::load_using(&mut e, cfg, tpcb::DDL, method, |n| bar.set_position(n))?;
            bar.finish_and_clear();
            e.checkpoint()?;
            (e, h, method.name())
        }
    })
}

/// Every check of `args` that needs no work (no store built, no file opened): the counts, the
/// run's end and clock, the store's name and the device; what `run_tpcb` and `run_tatp` refuse
/// before they load, so that a caller (the Python package) can tell bad input from a run that
/// failed.
pub fn check(args: &Spec) -> anyhow::Result<()> {
    if args.accounts_per_branch == 0 {
        bail!("--scale, --terminals and --accounts-per-branch must be at least 1");
    }
    run_plan(args)?;
    const STORES: [&str; 9] = [
        "native",
        "page",
        "dftl",
        "dftl-orig",
        "fast",
        "block",
        "amf",
        "file",
        "memdisk",
    ];
    if !STORES.contains(&args.storage.as_str()) {
        bail!(
            "--store: no store '{}' (the stores are {})",
            args.storage,
            STORES.join(", ")
        );
    }
    storage::pagestore::engine_runs_on(&args.storage)?;
    args.device.load()?;
    crate::units::parse_duration_ns(&args.sample_window)
        .map_err(|e| anyhow::anyhow!("--sample-window: {e}"))?;
    Ok(())
}

/// Runs TPC-B as `args` says: loads (or reuses a file's database), runs the terminals, checks.
pub fn run_tpcb(args: &Spec) -> anyhow::Result<TpcbRun> {
    if args.scale == 0 || args.terminals == 0 || args.accounts_per_branch == 0 {
        bail!("--scale, --terminals and --accounts-per-branch must be at least 1");
    }
    let (until, virtual_clock) = run_plan(args)?;
    let plan = plan(args)?;
    // Someone else's file is refused before anything opens, sizes or writes it (and the run
    // that creates the file then finds its own database in it).
    if let (Some(path), "file", false) = (&args.path, args.storage.as_str(), args.force) {
        crate::filelock::hold(path, "--path")?;
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
    let (store, storage_name) = page_store(args)?;
    let frames = sized_frames(
        args,
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
    let (mut e, h, load) = load_or_reuse(args, cfg, store, ecfg)?;
    let load_s = wall.elapsed().as_secs_f64();
    let params = crate::workload::Params {
        scale: Some(args.scale),
        seed: args.seed,
        accounts_per_branch: args.accounts_per_branch,
        ..crate::workload::Params::default()
    };
    let steady_state =
        shared::reach_steady(args, &mut e, "tpcb", params, Box::new(h), virtual_clock)?;

    let before = (snapshot(&e), e.buffer_stats(), e.lock_stats());
    let terms: Vec<TpcbTerminal> = (0..args.terminals)
        .map(|i| TpcbTerminal::new(i, h, cfg, args.seed, args.txns))
        .collect();
    let ((mut e, mut terms, virtual_ns, forces, marks), run_wall_s) =
        run_recorded(e, terms, until, virtual_clock, plan.as_ref())?;
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
        steady_state,
    };
    if let Some(p) = &plan {
        let trace = crate::results::Trace::of_terminals(
            Vec::new(),
            marks,
            terms.iter_mut().map(|t| t.events.take()),
        );
        write_results(
            p,
            &res,
            "tpcb",
            f64::from(res.scale),
            res.terminals,
            secs,
            trace,
            &["tpcb"],
            &args.device,
        )?;
    }
    Ok(TpcbRun {
        result: res,
        frames,
        secs,
        load_s,
        run_wall_s,
    })
}

/// What a run gave: its result (the JSON) and the host-side figures of the human report.
#[derive(Debug)]
pub struct TpcbRun {
    pub result: BenchResult,
    pub frames: usize,
    pub secs: f64,
    pub load_s: f64,
    pub run_wall_s: f64,
}
