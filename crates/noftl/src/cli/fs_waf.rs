//! `noftl fs waf`: write amplification at file-system and FTL level, the table of AMF (FAST
//! 2016). The flags, their conversion to `lab::experiments::fs_waf::Spec`, and the report;
//! the experiment (its configurations, workloads and the consistency of every row) is
//! `lab::experiments::fs_waf`.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;

use lab::experiments::fs_waf::{Postmark, Spec, WafResult};

use crate::cli::common::DeviceArgs;

#[derive(Debug, Args)]
pub struct FsWafArgs {
    /// Configurations as FS:TARGET, comma-separated (FS: ext4, f2fs, alfs, dfs; TARGET: an FTL
    /// of `noftl serve`, amf for alfs, none for dfs).
    #[arg(
        long = "store",
        visible_alias = "configs",
        value_delimiter = ',',
        default_value = "ext4:page,ext4:dftl,f2fs:page,f2fs:dftl,alfs:amf"
    )]
    pub configs: Vec<String>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Workloads, comma-separated: seqwrite, randwrite, postmark-low, postmark-high, kv, tpcb,
    /// tpcc, dfsio, terasort, wordcount.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "seqwrite,randwrite,postmark-low,postmark-high,kv,tpcb,tpcc,dfsio,terasort,wordcount"
    )]
    pub workloads: Vec<String>,
    /// seqwrite, randwrite and dfsio: the data set's share of the free space the mount reports
    /// (kv: its live data is half of it; terasort: its input a third, for the runs and the
    /// output beside it; wordcount: its input a quarter).
    #[arg(long, default_value_t = 0.5)]
    pub fill: f64,
    /// seqwrite and randwrite: bytes written after the data set is laid out, as a multiple of
    /// it.
    #[arg(long, default_value_t = 2.0)]
    pub rounds: f64,
    /// postmark-low: files at the start of the Postmark-like load.
    #[arg(long, default_value_t = 1000)]
    pub postmark_low_files: u32,
    /// postmark-high: files at the start of the Postmark-like load.
    #[arg(long, default_value_t = 10000)]
    pub postmark_high_files: u32,
    /// postmark-low and postmark-high: transactions after the files are created.
    #[arg(long, default_value_t = 20000)]
    pub postmark_transactions: u32,
    /// The Postmark rows' driver: builtin (this driver's Postmark-like mix) or real (the
    /// `postmark` program, Debian package postmark, with the same file counts, sizes,
    /// transactions, 10 subdirectories and 4 KiB read and write blocks).
    #[arg(long, default_value = "builtin", value_parser = ["builtin", "real"])]
    pub postmark: String,
    /// kv (the non-transactional row): operations of the mix after the load.
    #[arg(long, default_value_t = 100_000)]
    pub kv_ops: u32,
    /// tpcb (OLTP): the engine's TPC-B on a database file in the mount: its scale (branches).
    #[arg(long, default_value_t = 1)]
    pub tpcb_scale: u32,
    /// tpcb: transactions to run (each commit forces the log: an fsync).
    #[arg(long, default_value_t = 20000)]
    pub tpcb_txns: u32,
    /// tpcc: the engine's TPC-C (the specification's population) on a database file in the
    /// mount: its scale (warehouses).
    #[arg(long, default_value_t = 1)]
    pub tpcc_scale: u32,
    /// tpcc: transactions of the mix to run.
    #[arg(long, default_value_t = 2000)]
    pub tpcc_txns: u32,
    /// Write the results as JSON to this file ("-" or no value: standard output, after the
    /// human report).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<PathBuf>,
    /// Seed of the data and the access pattern.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run seqwrite, randwrite, kv, postmark-high, tpcb and tpcc in steady-state rounds: the
    /// data set laid out (the engine's database loaded and run), then rounds until the last five
    /// are steady, counted once the device was written over (SNIA SSS PTS 2.1.24 on throughput
    /// and FTL WAF, at most 25); those rows' figures are the last five rounds'.
    #[arg(long)]
    pub steady: bool,
    /// Fail (after the report) when a row was not measured in steady state (without --steady,
    /// and for the workloads that do not run in rounds, a row is its whole run from a fresh
    /// mount: not in steady state).
    #[arg(long)]
    pub strict: bool,
}

impl FsWafArgs {
    /// The experiment these flags name, served by this program.
    pub fn spec(&self) -> anyhow::Result<Spec> {
        Ok(Spec {
            noftl: std::env::current_exe().context("own executable")?,
            configs: self.configs.clone(),
            device: self.device.spec(),
            workloads: self.workloads.clone(),
            fill: self.fill,
            rounds: self.rounds,
            postmark_low_files: self.postmark_low_files,
            postmark_high_files: self.postmark_high_files,
            postmark_transactions: self.postmark_transactions,
            // clap admits only these two.
            postmark: if self.postmark == "real" {
                Postmark::Real
            } else {
                Postmark::Builtin
            },
            kv_ops: self.kv_ops,
            tpcb_scale: self.tpcb_scale,
            tpcb_txns: self.tpcb_txns,
            tpcc_scale: self.tpcc_scale,
            tpcc_txns: self.tpcc_txns,
            seed: self.seed,
            max_rounds: self.steady.then_some(lab::steady::MAX_ROUNDS),
        })
    }
}

pub fn run(a: FsWafArgs) -> anyhow::Result<()> {
    let spec = a.spec()?;
    // Refused before any mount is made and formatted.
    spec.check()?;
    super::common::check_outputs(&[a.device.input()], &[a.json.as_deref()])?;
    let res = lab::experiments::fs_waf::run(&spec)?;
    print_table(&res);
    // Through a JSON value, whose objects keep their keys sorted: the bytes of the JSON this
    // verb has always written.
    super::common::emit_json(a.json.as_deref(), &serde_json::to_value(&res)?)?;
    let violated = res.violated();
    if violated > 0 {
        bail!("{violated} row(s) broke a physical bound of the write path (consistency: violated); their figures are not results");
    }
    lab::steady::refuse_unsteady(
        a.strict,
        res.results.iter().map(|r| {
            (
                format!("{}:{} {}", r.fs, r.target, r.workload),
                &r.steady_state,
            )
        }),
    )
}

fn print_table(res: &WafResult) {
    super::common::print_waf_header();
    for r in &res.results {
        super::common::print_waf_line(&super::common::WafLine {
            config: format!("{}:{}", r.fs, r.target),
            workload: &r.workload,
            app_bytes: r.app_bytes,
            fs_waf: r.fs_waf,
            ftl_waf: r.ftl_waf,
            total_waf: r.total_waf,
            gc_copies: r.ftl_gc["migrations"].to_string(),
            steady: &r.steady_state,
            window: r.window.as_ref(),
            consistency: r.consistency.status,
        });
        for v in &r.consistency.violations {
            println!("  WARNING: violated: {v}");
        }
        if let Some(w) = r.steady_state.warning() {
            println!("  WARNING: {w}");
        }
    }
}
