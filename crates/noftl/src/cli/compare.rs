//! `noftl compare`: NoFTL Fig. 3, the same workload on NoFTL (native), DFTL 2/15/35% and the
//! page FTL. The experiment is `lab::experiments::compare` (its module doc says how the device
//! is sized, the database copied, the stores warmed up and the windows measured); this verb
//! parses its flags into a spec, writes each scale's JSON and prints its table.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use kits::LoadMethod;
use lab::experiments::compare::{self as experiment, CompareResult, Outcome, TpchCompareResult};
use lab::stores::{parse_log_region, LogRegion};

use super::common::{emit_json, parse_percent, DeviceArgs, ResultsArgs};
use super::executor::{self, Executor, RayJob};

/// The other comparisons, grouped under `compare` so that a user finds them where NoFTL Fig. 3
/// is: `noftl compare ipa ...` is `noftl ipa compare ...`, `noftl compare iaa ...` is `noftl
/// iaa compare ...` (the older spellings stay, as aliases of these).
#[derive(Debug, Clone, Subcommand)]
pub enum CompareExperiment {
    /// IPA Table I: baseline, global IPA and selective IPA side by side (as `noftl ipa compare`).
    Ipa(Box<super::ipa::IpaCompareArgs>),
    /// IAA Figs. 11-12: the free-space sweep of conventional, IAA and IAA+U2DI (as `noftl iaa
    /// compare`).
    Iaa(Box<super::iaa::CompareArgs>),
}

#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CompareArgs {
    /// Another comparison than NoFTL Fig. 3's (given alone, with its own flags).
    #[command(subcommand)]
    pub experiment: Option<CompareExperiment>,
    /// tpcb | tatp | tpcc (throughput: committed, resp. successful, transactions per second;
    /// TPC-C also New-Orders per minute, NOTPM); with --paper also all (TPC-B, then TPC-C);
    /// tpch (seconds per query, queries 1, 6, 12 and 14; --sf is the scale factor).
    #[arg(long, default_value = "tpcb")]
    pub workload: String,
    /// TPC-B branches (the NoFTL paper ran 48, 200 and 500; default 12: the runs take about two
    /// minutes on two cores); TATP subscribers (default 20,000); TPC-C warehouses (the NoFTL paper ran
    /// 5, 25 and 50; default 1).
    #[arg(long)]
    pub scale: Option<u32>,
    /// TPC-H's scale factor (default 0.1; the NoFTL paper ran 1); --scale N means SF N.
    #[arg(long, conflicts_with = "scale")]
    pub sf: Option<f64>,
    /// Runs per store (different input seeds); the standard deviation is over these.
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    /// Virtual length of each measured window, e.g. 10s (default 10s; with --paper 30s, so
    /// that the windows at the paper's scales, where a store runs a few hundred transactions
    /// a second, hold thousands of transactions and several GC cycles each).
    #[arg(long)]
    pub duration: Option<String>,
    /// Before each measured run: auto (run until the store has written as many pages for the
    /// engine as the device has twice, so GC is in steady state; at most two transactions per
    /// device page), precondition (the same two device writes, most of them by replaying the
    /// page reads and write-backs the workload made over the first fifth, the last fifth by
    /// transactions again; faster, not faithful on every workload: docs/lab.md), a virtual time
    /// such as 30s, or none.
    #[arg(long, default_value = "auto")]
    pub warmup: String,
    /// Terminals per run: concurrent transaction streams on the store.
    #[arg(long, default_value_t = 1)]
    pub terminals: u32,
    /// Over-provisioning on top of the database, as a spare factor (NoFTL Fig. 5: 116 extra
    /// blocks on 4,096, 2.75%).
    #[arg(long, value_parser = parse_percent, default_value = "2.75%")]
    pub op: f64,
    /// The native store's log in a region of its own, with these CREATE REGION options
    /// (`KEY=VALUE,...`), e.g. `MAX_CHIPS=1,CELL_MODE=pSLC` on MLC/TLC chips: no paired-page
    /// pads and lower-page program times at each commit.
    #[arg(long, value_parser = parse_log_region)]
    pub log_region: Option<LogRegion>,
    /// Buffer pool, the same for every store (at least 256 frames): a share of the database
    /// pages (2%) or a size (10MiB: the NoFTL authors' published Shore-MT configuration for the
    /// flash volume). The NoFTL paper does not state its pool; 2% keeps the workload I/O-bound.
    #[arg(long, default_value = "2%")]
    pub buffer: experiment::BufferSize,
    /// DB page size: 4KiB, 8KiB (Shore-MT's, which NoFTL Fig. 3 ran: a DB page is two 4 KiB
    /// logical pages of the flash, each mapped on its own) or 16KiB.
    #[arg(long = "page-size", value_parser = lab::units::parse_size, default_value = "4KiB")]
    pub page_size: u64,
    /// TPC-H: pages each scan reads ahead (default: two per die, every die busy; 0: a page is
    /// read when the scan reaches it, as Shore-MT's buffer manager reads on fix).
    #[arg(long)]
    pub read_ahead: Option<usize>,
    /// The flash volume the stores export, e.g. 1GiB (NoFTL Fig. 3's 1, 5 and 10 GB volumes);
    /// the database takes what it takes of it. Default: the database's size plus growth, so
    /// that it fills the device.
    #[arg(long, value_parser = lab::units::parse_size)]
    pub flash: Option<u64>,
    /// Host CPU in virtual time: measured (this engine's own costs, measured on the development
    /// machine), paper-noftl (Shore-MT on the NoFTL paper's Xeon E5630, fitted from NoFTL
    /// Fig. 3's NoFTL columns: `noftl reproduce noftl`), none, or a TOML file with [engine],
    /// [query] and [host] tables (docs/noftl.md, "Host CPU in virtual time").
    #[arg(long, default_value = "measured")]
    pub cpu: String,
    /// Where the engine's log lives: flash (beside the DB pages) or separate (another device,
    /// as Shore-MT's log directory was in the NoFTL paper's set-up: the flash sees page reads
    /// and write-backs only).
    #[arg(long, default_value = "flash")]
    pub log_device: experiment::LogDevice,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Accounts per branch (the specification's 100,000 unless changed, for small tests).
    #[arg(long, default_value_t = 100_000)]
    pub accounts_per_branch: u32,
    /// TPC-C: a REDUCED population for tests, items and customers per district (the
    /// specification's 100,000 and 3,000 unless given).
    #[arg(long, num_args = 2, value_names = ["ITEMS", "CUSTOMERS"])]
    pub tpcc_reduced: Option<Vec<u32>>,
    /// Seed of the first run of each store (run k of --repeat uses seed + k): the database
    /// contents and the transaction inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The stores to run, comma-separated; native must be one (the slowdowns are against it):
    /// native, dftl-2%, dftl-15%, dftl-35%, page, dftl-orig-2%, dftl-orig-15%, dftl-orig-35%
    /// (default: the first five; with --paper all eight).
    #[arg(long = "store", visible_alias = "stores", value_delimiter = ',')]
    pub stores: Option<Vec<String>>,
    /// Worker threads (runs are independent).
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// Where the rows go: local (--jobs threads in this process) or ray (one Ray task per row
    /// and scale, on the cluster RAY_ADDRESS names or a local Ray instance; each task loads the
    /// database itself; the same result). Ray needs the Python package `ray` (.venv or
    /// NOFTL_PYTHON), and this noftl binary at the same path on every node (or NOFTL_BIN
    /// there): checked before any row. Not with --workload tpch or --results.
    #[arg(long, default_value = "local")]
    pub executor: Executor,
    /// Write the JSON result to this file ("-" or no value: standard output, instead of the
    /// human report). With --paper, one file per scale: the scale is put before the extension
    /// (compare.json -> compare-sf48.json).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<PathBuf>,
    /// Run the NoFTL paper's scales one after the other (TPC-B 48/200/500 branches, TPC-C 5/25/50
    /// warehouses; Figure 3), instead of --scale. Needs a machine with RAM for --jobs devices of
    /// up to ~10 GiB each: every device keeps its data.
    #[arg(long, conflicts_with = "scale")]
    pub paper: bool,
    /// TPC-C: fixed (each terminal keeps one home warehouse, the specification's clause
    /// 2.4.1.1) or random (every transaction draws its home warehouse over all warehouses, as
    /// Shore-MT's kit ran the NoFTL paper's single thread; the default here, so that one
    /// terminal touches the whole database at every scale).
    #[arg(long)]
    pub home_warehouse: Option<String>,
    /// Exit non-zero when any row's measured windows break a physical bound (consistency:
    /// violated) or are not steady (SNIA SSS PTS over the last 5 windows: needs --repeat 5 or
    /// more), after writing the results.
    #[arg(long)]
    pub strict: bool,
    /// TPC-B and TPC-C: how the database is loaded (once, on a RAM disk, before it is copied to
    /// every store): bulk (dense heap pages, B+-trees built bottom-up; the default) or rows (one
    /// logged insert per row and index: every comparison published before 2026-11-27 was loaded
    /// this way, and `--load rows` reproduces it). TATP always loads row by row, TPC-H in bulk.
    #[arg(long)]
    pub load: Option<kits::LoadMethod>,
    #[command(flatten)]
    pub results: ResultsArgs,
}

impl CompareArgs {
    /// The comparison these flags ask for, as the experiment library takes it.
    pub fn spec(&self) -> experiment::Spec {
        experiment::Spec {
            workload: self.workload.clone(),
            scale: self.scale,
            sf: self.sf,
            repeat: self.repeat,
            duration: self.duration.clone(),
            warmup: self.warmup.clone(),
            terminals: self.terminals,
            op: self.op,
            log_region: self.log_region.clone(),
            buffer: self.buffer,
            flash_bytes: self.flash,
            read_ahead_pages: self.read_ahead,
            page_bytes: usize::try_from(self.page_size).unwrap_or(usize::MAX),
            cpu: self.cpu.clone(),
            log_device: self.log_device,
            device: self.device.spec(),
            accounts_per_branch: self.accounts_per_branch,
            tpcc_reduced: self.tpcc_reduced.clone(),
            seed: self.seed,
            stores: self.stores.clone(),
            jobs: self.jobs,
            memory_cap_bytes: None,
            paper: self.paper,
            home_warehouse: self.home_warehouse.clone(),
            strict: self.strict,
            load: self.load,
            results: self.results.results.clone(),
            sample_window: self.results.sample_window.clone(),
            raw: self.results.raw,
        }
    }
}

pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    match args.experiment {
        Some(CompareExperiment::Ipa(a)) => {
            return super::ipa::run(super::ipa::IpaCommand::Compare(*a));
        }
        Some(CompareExperiment::Iaa(a)) => {
            return super::iaa::run(super::iaa::IaaCommand::Compare(*a));
        }
        None => {}
    }
    super::common::check_outputs(
        &[args.device.input(), super::common::cpu_input(&args.cpu)],
        &[args.json.as_deref()],
    )?;
    args.results.check()?;
    let spec = args.spec();
    match args.executor {
        Executor::Local => {
            experiment::run(&spec, &mut |label, outcome| emit(&args, label, outcome))
        }
        Executor::Ray => {
            let rows = experiment::jobs::rows(&spec)?;
            let todo: Vec<RayJob<experiment::jobs::RowJob>> = rows
                .into_iter()
                .map(|(job, memory_bytes)| RayJob {
                    label: match &job.scale {
                        Some(l) => format!("{} of {l}", job.store),
                        None => job.store.clone(),
                    },
                    memory_bytes,
                    job,
                })
                .collect();
            let outputs = executor::run_on_ray("compare", &todo)?;
            experiment::jobs::merge(&spec, outputs, &mut |label, outcome| {
                emit(&args, label, outcome)
            })
        }
    }
}

/// Writes a scale's JSON (`--json`, the scale's label put in the name under --paper) or prints
/// its table.
fn emit(args: &CompareArgs, label: Option<&str>, outcome: Outcome<'_>) -> anyhow::Result<()> {
    let json = match label {
        Some(l) => args.json.as_deref().map(|p| with_label(p, l)),
        None => args.json.clone(),
    };
    match outcome {
        Outcome::Stores(res) => {
            if emit_json(json.as_deref(), res)? {
                print_table(res);
            }
        }
        Outcome::Tpch(res) => {
            if emit_json(json.as_deref(), res)? {
                print_tpch_table(res);
            }
        }
    }
    Ok(())
}

/// `noftl run-job`: one row of this comparison, on a Ray worker.
pub fn run_job(
    args: &CompareArgs,
    job: serde_json::Value,
) -> anyhow::Result<experiment::jobs::RowOutput> {
    let job: experiment::jobs::RowJob = serde_json::from_value(job)
        .map_err(|e| anyhow::anyhow!("run-job: not a row of compare: {e}"))?;
    experiment::jobs::run_row(&args.spec(), &job)
}

/// `compare.json` -> `compare-sf48.json` (standard output stays standard output).
fn with_label(path: &std::path::Path, label: &str) -> PathBuf {
    if path.as_os_str() == "-" {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{label}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{label}"),
    };
    path.with_file_name(name)
}

/// NoFTL Fig. 3's layout: throughput per store with its deviation, the slowdown against
/// native, then the statistics per transaction that explain it.
fn print_table(res: &CompareResult) {
    let label = match res.workload.as_str() {
        "tatp" => "TATP",
        "tpcc" => "TPC-C",
        _ => "TPC-B",
    };
    println!("{label}: SF={}  DB {:.1} MiB on {:.1} MiB of flash ({} x {}s virtual, {} terminal(s), seed {})",
        res.scale,
        res.device.db_pages as f64 * res.device.page_bytes as f64 / (1 << 20) as f64,
        res.device.capacity_bytes as f64 / (1 << 20) as f64,
        res.repeat,
        res.virtual_seconds,
        res.terminals,
        res.seed);
    if let Some(h) = res.home_warehouse {
        println!(
            "home warehouse: {} ({})",
            h.name(),
            match h {
                kits::tpcc::HomeWarehouse::Random => "drawn over all warehouses for every transaction, as the NoFTL paper's Shore-MT kit ran its single thread",
                kits::tpcc::HomeWarehouse::Fixed => "one per terminal, the specification's clause 2.4.1.1",
            }
        );
    }
    println!(
        "load: {} ({})",
        res.load,
        match res.load {
            LoadMethod::Bulk => "storage::bulk, B+-trees built bottom-up; --load rows for the row-by-row load of the figures before 2026-11-27",
            LoadMethod::Rows => "one logged insert per row and index",
        }
    );
    print!("{:<8}", "");
    for r in &res.rows {
        print!(" | {:^26}", r.storage);
    }
    println!();
    print!("{:<8}", "");
    for r in &res.rows {
        if r.storage == "native" {
            print!(" | {:>9} {:>7} {:>8}", "Tx/s", "STDEV", "");
        } else {
            print!(" | {:>9} {:>7} {:>8}", "Tx/s", "STDEV", "Slowdown");
        }
    }
    println!();
    print!("{:<8}", label);
    for r in &res.rows {
        let sd = if r.storage == "native" {
            String::new()
        } else {
            format!("{:.2}", r.slowdown)
        };
        print!(" | {:>9.1} {:>7.2} {:>8}", r.throughput_tps, r.stdev, sd);
    }
    println!();
    let warm: Vec<String> = res
        .rows
        .iter()
        .map(|r| {
            format!(
                "{} {:.1} s ({:.2}x the device)",
                r.storage, r.warmup_seconds, r.warmup_device_writes
            )
        })
        .collect();
    println!("warm-up ({}), virtual: {}", res.warmup, warm.join(", "));
    let windows: Vec<String> = res
        .rows
        .iter()
        .map(|r| {
            format!(
                "{} {:.1} s ({:.1} checkpoints{})",
                r.storage,
                r.window_seconds,
                r.window_checkpoints,
                if r.windows_without_checkpoint > 0 {
                    format!(", {} without", r.windows_without_checkpoint)
                } else {
                    String::new()
                }
            )
        })
        .collect();
    println!(
        "windows (at least {} s, ending at a checkpoint), mean virtual length: {}",
        res.virtual_seconds,
        windows.join(", ")
    );
    print_per_txn(res);
    let checks: Vec<String> = res
        .rows
        .iter()
        .map(|r| {
            let f = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.3}"));
            format!(
                "{} {} (die {}, Little {})",
                r.storage,
                r.consistency.status,
                f(r.consistency.die_busy_fraction_max),
                f(r.consistency.little_law_ratio)
            )
        })
        .collect();
    println!("consistency of the measured windows: {}", checks.join(", "));
    println!(
        "host CPU profile: {}; log on {}",
        res.cpu.name, res.log_device
    );
    println!("mapping us: dftl and page on the device controller (400 MHz); native and dftl-orig on the host (2.53 GHz: the engine's CPU time, resp. the published DFTL's kernel-module scans).");
    if res.workload == "tpcc" {
        let n: Vec<String> = res
            .rows
            .iter()
            .map(|r| format!("{} {:.0}", r.storage, r.notpm.unwrap_or(0.0)))
            .collect();
        println!(
            "NOTPM (New-Orders per minute, no keying or think times): {}",
            n.join(", ")
        );
        println!("{}", experiment::paper_line("tpcc", res.scale));
    } else if res.workload == "tatp" {
        println!(
            "TATP: successful transactions per second (TATP's MQTh); the NoFTL paper has no TATP figure."
        );
    } else {
        println!("{}", experiment::paper_line("tpcb", res.scale));
    }
}

/// The table of flash and host work per transaction, one row per store.
fn print_per_txn(res: &CompareResult) {
    println!();
    println!(
        "per transaction    {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12} {:>11} {:>11}",
        "flash rd",
        "programs",
        "erases",
        "GC migr.",
        "transl. rd",
        "transl. wr",
        "mapping us",
        "energy uJ",
        "host CPU us",
        "latency us"
    );
    for r in &res.rows {
        let p = r.per_txn;
        println!(
            "{:<18} {:>10.2} {:>10.2} {:>10.4} {:>10.2} {:>10.2} {:>10.2} {:>12.2} {:>12.1} {:>11.1} {:>11.1}",
            r.storage, p.flash_reads, p.flash_programs, p.flash_erases, p.gc_migrations, p.translation_reads, p.translation_writes, p.controller_us, p.energy_joules * 1e6, p.host_cpu_us, p.latency_us
        );
        for v in &r.consistency.violations {
            println!("{:<18} WARNING: violated: {v}", "");
        }
        if let Some(w) = r.steady_state.warning() {
            println!("{:<18} WARNING: {w}", "");
        }
    }
}

fn print_tpch_table(res: &TpchCompareResult) {
    println!(
        "TPC-H: SF={}  DB {:.1} MiB on {:.1} MiB of flash ({} runs per query, read-ahead {} pages)",
        res.scale,
        res.device.db_pages as f64 * res.device.page_bytes as f64 / (1 << 20) as f64,
        res.device.capacity_bytes as f64 / (1 << 20) as f64,
        res.repeat,
        res.read_ahead_pages
    );
    print!("{:<6}", "");
    for r in &res.rows {
        print!(" | {:^27}", r.storage);
    }
    println!();
    print!("{:<6}", "");
    for _ in &res.rows {
        print!(" | {:>9} {:>7} {:>9}", "Sec.", "STDEV", "Slow-down");
    }
    println!();
    for (i, q) in kits::tpch::query::QUERIES.iter().enumerate() {
        print!("{:<6}", format!("Q{q}"));
        for r in &res.rows {
            let x = &r.queries[i];
            print!(
                " | {:>9.3} {:>7.3} {:>8.2}x",
                x.seconds, x.stdev, x.slowdown
            );
        }
        println!();
    }
    println!("per query run: flash reads / translation reads / mapping misses per host read");
    for (i, q) in kits::tpch::query::QUERIES.iter().enumerate() {
        print!("{:<6}", format!("Q{q}"));
        for r in &res.rows {
            let x = &r.queries[i];
            print!(
                " | {:>9.0} {:>8.0} {:>8.3}",
                x.flash_reads, x.translation_reads, x.mapping_miss_ratio
            );
        }
        println!();
    }
    for r in &res.rows {
        for q in &r.queries {
            for v in &q.consistency.violations {
                println!("  WARNING: {} Q{}: violated: {v}", r.storage, q.query);
            }
        }
    }
}

#[cfg(test)]
mod paper_tests {
    use super::*;

    /// The lab's defaults (which the Python package starts from) are the CLI's.
    #[test]
    fn the_lab_defaults_are_the_flags_defaults() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["noftl", "compare"]).unwrap();
        let crate::cli::Command::Compare(a) = cli.command else {
            panic!("not compare")
        };
        assert_eq!(
            format!("{:?}", a.spec()),
            format!("{:?}", experiment::Spec::default())
        );
        let cli = crate::cli::Cli::try_parse_from(["noftl", "crashtest"]).unwrap();
        let crate::cli::Command::Crashtest(c) = cli.command else {
            panic!("not crashtest")
        };
        assert_eq!(
            format!("{:?}", c.spec()),
            format!("{:?}", lab::experiments::crashtest::Spec::default())
        );
        let cli = crate::cli::Cli::try_parse_from(["noftl", "bench", "tpcb"]).unwrap();
        let crate::cli::Command::Bench(super::super::bench::BenchCommand::Tpcb(b)) = cli.command
        else {
            panic!("not bench tpcb")
        };
        assert_eq!(
            format!("{:?}", b.spec()),
            format!("{:?}", lab::experiments::bench::Spec::default())
        );
    }

    #[test]
    fn paper_json_files_carry_the_scale() {
        assert_eq!(
            with_label(std::path::Path::new("out/compare.json"), "sf48"),
            PathBuf::from("out/compare-sf48.json")
        );
        assert_eq!(
            with_label(std::path::Path::new("compare"), "tpcc-sf5"),
            PathBuf::from("compare-tpcc-sf5")
        );
        assert_eq!(
            with_label(std::path::Path::new("-"), "sf5"),
            PathBuf::from("-")
        );
        assert!(
            lab::limits::available_memory_bytes().is_some_and(|b| b > 0)
                || !cfg!(target_os = "linux")
        );
    }
}
