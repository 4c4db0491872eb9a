//! `noftl fs bench` and `noftl fs waf`: the flags, their conversion to the experiments'
//! specs, and the reports. The experiments are `lab::experiments::fs_bench` (one driver for
//! every file system on the emulated device, DFS against ext4 in the spirit of its paper's
//! measurements) and `lab::experiments::fs_waf` (AMF's write-amplification table).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::Value;

use lab::experiments::fs_bench::{BenchResult, Spec};

use crate::cli::common::DeviceArgs;
use crate::cli::fs_waf::FsWafArgs;

#[derive(Debug, Subcommand)]
pub enum FsCommand {
    /// fio random 4 KiB I/O at 1..32 threads and application workloads, DFS against ext4.
    Bench(FsBenchArgs),
    /// Write amplification at file-system and FTL level (AMF's table): ext4, f2fs and alfs on
    /// the page FTL, DFTL and AMF, under sequential, random and small-file (Postmark) writes,
    /// key-value and database loads, and Hadoop-like jobs.
    Waf(FsWafArgs),
    /// One `fs waf` workload in a directory someone else mounted, its result as JSON on
    /// standard output: the guest side of `noftl reproduce amf` (a kernel file system in a
    /// QEMU guest). Hidden: an internal step, not a measurement of its own.
    #[command(hide = true)]
    WafWorkload(FsWafWorkloadArgs),
    /// One `fs bench` application in a directory someone else mounted, its result as JSON on
    /// standard output: the guest side of `noftl reproduce dfs` (kernel ext3 in a QEMU guest).
    /// Hidden: an internal step, not a measurement of its own.
    #[command(hide = true)]
    AppWorkload(FsAppWorkloadArgs),
}

#[derive(Debug, Args)]
pub struct FsAppWorkloadArgs {
    /// The directory to run the application in (a mounted file system).
    #[arg(long)]
    pub dir: PathBuf,
    /// The application: sort, zipf, vmupdate or scan (`fs bench --apps`).
    #[arg(long)]
    pub app: String,
    /// MiB of the application's file.
    #[arg(long, default_value_t = 32)]
    pub app_mib: u32,
    /// Seed of the file's data and the access pattern.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Make the application's file only (the baseline of a `reproduce dfs` row).
    #[arg(long)]
    pub setup_only: bool,
}

#[derive(Debug, Args)]
pub struct FsWafWorkloadArgs {
    /// The directory to run the workload in (a mounted file system).
    #[arg(long)]
    pub dir: PathBuf,
    /// The workload's parameters, as `fs waf` takes them; `--workloads` names exactly one.
    #[command(flatten)]
    pub waf: FsWafArgs,
    /// Run in steady-state rounds, marking preconditioning and every round on this serial
    /// device and going on while the measurer answers GO (seqwrite, randwrite, kv; the guest
    /// side of `reproduce amf`).
    #[arg(long)]
    pub rounds_tty: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct FsBenchArgs {
    /// File systems to run, comma-separated: dfs, ext4, f2fs (on --ext4-target's FTL), alfs
    /// (on amf).
    #[arg(long = "fs", value_delimiter = ',', default_value = "dfs,ext4")]
    pub fs: Vec<String>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// fio thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
    pub threads: Vec<u32>,
    /// fio workloads, comma-separated: randread, randwrite.
    #[arg(long, value_delimiter = ',', default_value = "randread,randwrite")]
    pub rw: Vec<String>,
    /// Seconds per fio point.
    #[arg(long, default_value_t = 5)]
    pub runtime_s: u32,
    /// MiB of fio files in all (split over the threads).
    #[arg(long, default_value_t = 64)]
    pub fio_mib: u32,
    /// Applications, comma-separated: sort, zipf, vmupdate, scan (empty: none).
    #[arg(long, value_delimiter = ',', default_value = "sort,zipf,vmupdate,scan")]
    pub apps: Vec<String>,
    /// MiB of each application's file.
    #[arg(long, default_value_t = 32)]
    pub app_mib: u32,
    /// Device timing on the wall clock (real) or as fast as possible (none).
    #[arg(long, default_value = "real", value_parser = super::clock::parser("fs bench", &["real", "none"]))]
    pub clock: String,
    /// Write the results as JSON to this file ("-" or no value: standard output, after the
    /// human report).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<PathBuf>,
    /// The store under ext4: a block FTL (any `noftl serve --store`: page, dftl, ...).
    #[arg(long = "store", visible_alias = "ext4-target", default_value = "page")]
    pub ext4_target: String,
    /// Seed of the applications' data and access pattern.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write a result directory (created if missing): BENCH_TIMESTAMP.summary.json (the JSON
    /// result with BenchBase's names per fio point), .params.json, .config.xml and fio's own
    /// JSON of every fio point. No samples.csv: the points run on the wall clock in external
    /// programs. docs/results.md.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// Write into a --results directory that is not empty (its files of the same names are
    /// replaced).
    #[arg(long, requires = "results")]
    pub force: bool,
    /// fio points: rounds of fio (each --runtime-s, on the same mount) before the measured
    /// run, until their IOPS are steady (SNIA SSS PTS: the last 5 within 20% range and 10% fit
    /// excursion of their mean), at most this many (0, the default: none; 25 is SNIA's cap).
    #[arg(long, default_value_t = 0)]
    pub max_rounds: u32,
    /// Fail (after the report) when a point was not measured in steady state.
    #[arg(long)]
    pub strict: bool,
}

impl FsBenchArgs {
    /// The experiment these flags name, served by this program; its result directory is
    /// planned by the caller, after the spec's checks.
    pub fn spec(&self) -> anyhow::Result<Spec> {
        Ok(Spec {
            noftl: std::env::current_exe().context("own executable")?,
            fs: self.fs.clone(),
            device: self.device.spec(),
            threads: self.threads.clone(),
            rw: self.rw.clone(),
            runtime_s: self.runtime_s,
            fio_mib: self.fio_mib,
            apps: self.apps.clone(),
            app_mib: self.app_mib,
            clock: self.clock.clone(),
            ext4_target: self.ext4_target.clone(),
            seed: self.seed,
            max_rounds: self.max_rounds,
            results: None,
        })
    }
}

pub fn run(c: FsCommand) -> anyhow::Result<()> {
    match c {
        FsCommand::Bench(a) => bench(a),
        FsCommand::Waf(a) => crate::cli::fs_waf::run(a),
        FsCommand::WafWorkload(a) => waf_workload(a),
        FsCommand::AppWorkload(a) => {
            let run = lab::experiments::fs_bench::run_app_in(
                &a.dir,
                &a.app,
                a.app_mib,
                a.seed,
                a.setup_only,
            )?;
            println!("{}", serde_json::to_string(&run)?);
            Ok(())
        }
    }
}

fn waf_workload(a: FsWafWorkloadArgs) -> anyhow::Result<()> {
    let [workload] = a.waf.workloads.as_slice() else {
        anyhow::bail!("--workloads names exactly one workload here");
    };
    let spec = a.waf.spec()?;
    let mut tty = match &a.rounds_tty {
        Some(p) => Some(lab::experiments::rounds::Tty::open(p)?),
        None => None,
    };
    let marker = tty
        .as_mut()
        .map(|t| t as &mut dyn lab::experiments::rounds::Marker);
    let run = lab::experiments::fs_waf::run_workload_in(&spec, &a.dir, workload, marker)?;
    println!("{}", serde_json::to_string(&run)?);
    Ok(())
}

fn bench(a: FsBenchArgs) -> anyhow::Result<()> {
    let mut spec = a.spec()?;
    spec.check()?;
    super::common::check_outputs(&[a.device.input()], &[a.json.as_deref()])?;
    // The result directory, checked before any mount: the shared writer's plan (no windows,
    // no raw rows here).
    spec.results = crate::cli::common::ResultsArgs {
        results: a.results.clone(),
        sample_window: "1s".into(),
        raw: false,
        force: a.force,
    }
    .plan()?;
    let res = lab::experiments::fs_bench::run(&spec)?;
    print_table(&res);
    // Through a JSON value, whose objects keep their keys sorted: the bytes of the JSON this
    // verb has always written.
    super::common::emit_json(a.json.as_deref(), &serde_json::to_value(&res)?)?;
    lab::steady::refuse_unsteady(
        a.strict,
        res.results.iter().map(|r| {
            (
                format!("{} {} x{}", r.fs, r.workload, r.threads),
                &r.steady_state,
            )
        }),
    )
}

/// The report. Thread counts and flash counters print as JSON values (no column padding), as
/// this report always has.
fn print_table(res: &BenchResult) {
    println!(
        "{:<6} {:<20} {:>7} {:>10} {:>8} {:>10} {:>9} {:>9} {:>7}",
        "fs", "workload", "threads", "IOPS", "seconds", "CPU us/IO", "reads", "programs", "erases"
    );
    for r in &res.results {
        let f = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.1}"));
        println!(
            "{:<6} {:<20} {:>7} {:>10} {:>8} {:>10} {:>9} {:>9} {:>7}",
            r.fs,
            r.workload,
            Value::from(r.threads),
            f(r.iops),
            f(r.seconds),
            f(Some(r.cpu_us_per_io)),
            r.flash["reads"],
            r.flash["programs"],
            r.flash["erases"],
        );
        if let Some(w) = r.steady_state.warning() {
            println!("       WARNING: {w}");
        }
    }
    if !res.ratios.is_empty() {
        println!("\nDFS / ext4 (IOPS ratio; applications: ext4 time / DFS time)");
        for r in &res.ratios {
            println!(
                "{:<20} {:>7} {:>8.2}",
                r.workload,
                Value::from(r.threads),
                r.dfs_over_ext4
            );
        }
    }
}
