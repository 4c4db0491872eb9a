//! `noftl reproduce <paper>`: a paper's figures at the paper's set-up, and the fidelity table
//! (`lab::experiments::reproduce`). This verb parses, writes the JSON and prints.

use std::path::PathBuf;

use clap::Args;
use lab::experiments::reproduce::{self as experiment, jobs, CellSet, ReproduceResult};

use super::common::emit_json;
use super::executor::{self, Executor, RayJob};

#[derive(Debug, Clone, Args)]
pub struct ReproduceArgs {
    /// The paper: noftl (NoFTL, VLDB 2013: Fig. 3's TPC-B, TPC-C and TPC-H rows and Fig. 4) or
    /// amf (AMF, FAST 2016: its slides' write-amplification table, kernel ext4 and F2FS in a
    /// QEMU guest on the page FTL and DFTL, our f2fs mode and ALFS on AMF beside them) or dfs
    /// (DFS, FAST 2010: its applications' speedups over kernel ext3 in a QEMU guest on the page
    /// FTL, in modelled device time).
    pub paper: String,
    /// Small scales in about a minute (CI): the machinery and the table, not the paper's set-up.
    #[arg(long)]
    pub quick: bool,
    /// Host CPU profile: paper-noftl (Shore-MT on the paper's server, fitted from the NoFTL
    /// columns), measured (this engine), none, or a TOML file (docs/noftl.md).
    #[arg(long, default_value = "paper-noftl")]
    pub cpu: String,
    /// Measured windows per store (default 3; 2 with --quick).
    #[arg(long)]
    pub repeat: Option<u32>,
    /// Virtual length of each window (default 30s; 5s with --quick).
    #[arg(long)]
    pub duration: Option<String>,
    /// Run one part only: oltp, tpch, fig4 or today (amf: the rows' workloads, comma-separated:
    /// seqwrite, randwrite, postmark-low, postmark-high, kv, tpcb, tpcc, dfsio, terasort,
    /// wordcount; default all ten; dfs: the applications, comma-separated: sort, zipf, vmupdate, scan;
    /// default all four).
    #[arg(long)]
    pub only: Option<String>,
    /// Beyond the paper: also the OLTP rows at 1 GiB on today's chips (mlc16k, tlc16k with
    /// multi-plane programs), NoFTL against our DFTL and the page FTL, as a second table.
    #[arg(long)]
    pub today: bool,
    /// The OLTP rows' warm-up: auto (two device writes by transactions) or precondition (the
    /// same two device writes, most of them by replaying the workload's own page reads and
    /// write-backs; `compare --warmup`; not faithful on every row, docs/lab.md).
    #[arg(long)]
    pub warmup: Option<String>,
    /// Re-fit the profile paper-noftl from its calibration cells (repeated runs until the fit
    /// settles) and print the constants to commit, instead of the table.
    #[arg(long)]
    pub calibrate: bool,
    /// Cores to use (runs and their rows are independent: the local executor starts a run when
    /// its cores and memory are free).
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// Where the runs go: local (in this process, as many at once as --jobs cores and the
    /// memory allow) or ray (one Ray task per
    /// run, on the cluster RAY_ADDRESS names or a local Ray instance; the same table). Ray needs
    /// the Python package `ray` (.venv or NOFTL_PYTHON), and this noftl binary at the same path
    /// on every node (or NOFTL_BIN there): checked before any run.
    #[arg(long, default_value = "local")]
    pub executor: Executor,
    /// Write the JSON result to this file ("-" or no value: standard output, instead of the
    /// table).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<PathBuf>,
}

impl ReproduceArgs {
    pub fn spec(&self) -> anyhow::Result<experiment::Spec> {
        Ok(experiment::Spec {
            paper: self.paper.clone(),
            noftl: std::env::current_exe()?,
            quick: self.quick,
            jobs: self.jobs,
            cpu: self.cpu.clone(),
            repeat: self.repeat,
            duration: self.duration.clone(),
            only: self.only.clone(),
            today: self.today,
            warmup: self.warmup.clone(),
            memory_cap_bytes: None,
        })
    }
}

pub fn run(args: ReproduceArgs) -> anyhow::Result<()> {
    super::common::check_outputs(
        &[super::common::cpu_input(&args.cpu)],
        &[args.json.as_deref()],
    )?;
    let spec = args.spec()?;
    let mut progress = |s: &str| lab::progress::note(&format!("reproduce {}: {s}", args.paper));
    if args.paper == "amf" {
        refuse_guest_flags(&args)?;
        let res = experiment::amf::run(&spec, &mut progress)?;
        if emit_json(args.json.as_deref(), &res)? {
            print_amf(&res);
        }
        return Ok(());
    }
    if args.paper == "dfs" {
        refuse_guest_flags(&args)?;
        if args.repeat.is_some() || args.duration.is_some() || args.cpu != "paper-noftl" {
            anyhow::bail!(
                "reproduce dfs: --repeat, --duration and --cpu are NoFTL's (dfs compares modelled \
                 device time of whole application runs: no windows, no host CPU profile)"
            );
        }
        let res = experiment::dfs::run(&spec, &mut progress)?;
        if emit_json(args.json.as_deref(), &res)? {
            print_dfs(&res);
        }
        return Ok(());
    }
    if args.calibrate {
        if args.executor != Executor::Local {
            anyhow::bail!("--calibrate runs on the local executor only: each round's runs need the previous round's fit");
        }
        let rounds = experiment::calibrate(&spec, &mut progress)?;
        if emit_json(args.json.as_deref(), &rounds)? {
            print_calibration(&rounds);
        }
        return Ok(());
    }
    let res = match args.executor {
        Executor::Local => experiment::run(&spec, &mut progress)?,
        Executor::Ray => run_on_ray(&spec)?,
    };
    if emit_json(args.json.as_deref(), &res)? {
        print_table(&res);
    }
    Ok(())
}

/// The flags a reproduction with guests (amf, dfs) refuses before any boot.
fn refuse_guest_flags(args: &ReproduceArgs) -> anyhow::Result<()> {
    let p = &args.paper;
    if args.calibrate || args.today {
        anyhow::bail!("reproduce {p}: --calibrate and --today are NoFTL's ({p} fits nothing)");
    }
    if args.warmup.is_some() {
        anyhow::bail!("reproduce {p}: --warmup is NoFTL's ({p} runs no transactional warm-up)");
    }
    if args.executor != Executor::Local {
        anyhow::bail!(
            "reproduce {p} runs on the local executor only: its guests need QEMU and the \
             guest kernel beside the server, not on Ray workers"
        );
    }
    Ok(())
}

/// The reproduction's runs as Ray tasks (`executor`), merged into its table.
fn run_on_ray(spec: &experiment::Spec) -> anyhow::Result<ReproduceResult> {
    let runs = jobs::runs(spec)?;
    let todo: Vec<RayJob<jobs::RunJob>> = runs
        .into_iter()
        .map(|job| RayJob {
            label: label(&job),
            memory_bytes: jobs::memory_bytes(spec, &job),
            job,
        })
        .collect();
    let outputs = executor::run_on_ray("reproduce", &todo)?;
    jobs::merge(spec, outputs)
}

/// A run as the progress lines and errors name it.
fn label(job: &jobs::RunJob) -> String {
    match job {
        jobs::RunJob::Oltp {
            workload, scale, ..
        } => format!("{workload} scale {scale}"),
        jobs::RunJob::Tpch => "tpch".into(),
        jobs::RunJob::Fig4 { target } => format!("fig. 4 on {target}"),
        jobs::RunJob::Today {
            chip,
            workload,
            scale,
            ..
        } => format!("today's chips: {workload} scale {scale} on {chip}"),
    }
}

/// `noftl run-job`: one run of this reproduction, on a Ray worker.
pub fn run_job(args: &ReproduceArgs, job: serde_json::Value) -> anyhow::Result<jobs::RunOutput> {
    let job: jobs::RunJob = serde_json::from_value(job)
        .map_err(|e| anyhow::anyhow!("run-job: not a run of reproduce: {e}"))?;
    let spec = args.spec()?;
    let mut progress = |s: &str| lab::progress::note(&format!("reproduce {}: {s}", args.paper));
    jobs::run_one(&spec, &job, &mut progress)
}

fn print_calibration(rounds: &[experiment::CalibrationRound]) {
    for (i, r) in rounds.iter().enumerate() {
        let f = &r.fitted;
        println!(
            "round {}: ran with engine x{} commit {} ns query x{} overlap {}; fitted engine x{} commit {} ns query x{} overlap {} (scan {:.2} cycles per entry)",
            i + 1,
            r.used.engine_scale,
            r.used.commit_ns,
            r.used.query_scale,
            r.used.dftl_orig_scan_overlap,
            f.fit.engine_scale,
            f.fit.commit_ns,
            f.fit.query_scale,
            f.fit.dftl_orig_scan_overlap,
            f.scan_cycles_per_entry
        );
        for c in &f.residuals {
            println!(
                "  {:<22} paper {:>14.0} ns  fitted {:>14.0} ns  ({:+.1}%)",
                c.cell,
                c.paper_ns,
                c.fitted_ns,
                (c.fitted_ns / c.paper_ns - 1.0) * 100.0
            );
        }
    }
    if let Some(last) = rounds.last() {
        println!(
            "inputs of the last round (calibration.rs COMMITTED):\n{:#?}",
            last.inputs
        );
    }
}

fn print_table(res: &ReproduceResult) {
    println!(
        "{} reproduction{}: host CPU profile {}, {} KiB DB pages, {} MiB buffer, log on a {} device, {}, one terminal, {} x {} windows",
        res.paper,
        if res.quick {
            " (--quick: small scales, not the paper's set-up; the cells stand for the paper's)"
        } else {
            ""
        },
        res.cpu.name,
        res.setup.page_bytes / 1024,
        res.setup.buffer_bytes >> 20,
        res.setup.log_device,
        res.setup.preset,
        res.setup.repeat,
        res.setup.window
    );
    print_cells(&res.cells);
    println!(
        "held-out cells within tolerance: {} of {}",
        res.held_out_within, res.held_out_judged
    );
    println!("every cell's counters are in the JSON (--json), field `why`.");
    print_today(res);
}

/// A table without calibration cells (amf, dfs): its cells and how many land.
fn print_judged_cells(cells: &[experiment::Cell], within: usize, judged: usize) {
    print_cells(cells);
    println!(
        "cells within tolerance: {within} of {judged}; every cell's counters are in the JSON, field `why`."
    );
    let missed: Vec<&experiment::Cell> = cells.iter().filter(|c| c.reason.is_some()).collect();
    if !missed.is_empty() {
        println!("\nwhy the cells outside miss, from their counters (field `reason`):");
        for c in missed {
            println!("- {}: {}", c.cell, c.reason.as_deref().unwrap_or_default());
        }
    }
}

/// The fidelity table's cells, one a line (every paper's).
fn print_cells(cells: &[experiment::Cell]) {
    println!(
        "{:<44} {:>9} {:>10} {:>10} {:>8} {:<12} {:>6} {:<7} {:<9}",
        "cell", "metric", "paper", "ours", "error", "set", "tol.", "within", "check"
    );
    for c in cells {
        let paper = match c.paper_high {
            Some(h) => format!("{}-{}", c.paper, h),
            None => format!("{}", c.paper),
        };
        println!(
            "{:<44} {:>9} {:>10} {:>10.3} {:>+7.1}% {:<12} {:>5.0}% {:<7} {:<9}",
            c.cell,
            c.metric,
            paper,
            c.ours,
            c.error * 100.0,
            match c.set {
                CellSet::Calibration => "calibration",
                CellSet::HeldOut => "held-out",
            },
            c.tolerance * 100.0,
            if c.within { "yes" } else { "NO" },
            c.consistency
        );
    }
}

fn print_amf(res: &experiment::amf::AmfResult) {
    let s = &res.setup;
    println!(
        "amf reproduction{}: kernel {} under {}; {}; device {} ({} MiB; TPC-C rows {} MiB), fill {}, rounds {}",
        if res.quick {
            " (--quick: a small device, not the set-up)"
        } else {
            ""
        },
        s.kernel_version,
        s.accelerator,
        s.timing_note,
        s.device.join(" "),
        s.device_bytes >> 20,
        s.tpcc_device_bytes >> 20,
        s.fill,
        s.rounds
    );
    use super::common::{print_waf_header, print_waf_line, WafLine};
    print_waf_header();
    for k in &res.kernel {
        print_waf_line(&WafLine {
            config: format!("kernel {}:{}", k.fs.name(), k.target),
            workload: &k.workload,
            app_bytes: k.app_bytes,
            fs_waf: k.fs_waf,
            ftl_waf: k.ftl_waf,
            total_waf: k.total_waf,
            gc_copies: k.gc_migrations.to_string(),
            steady: &k.steady_state,
            window: k.window.as_ref(),
            consistency: k.consistency.status,
        });
    }
    for h in &res.host {
        print_waf_line(&WafLine {
            config: format!("ours {}:{}", h.fs, h.target),
            workload: &h.workload,
            app_bytes: h.app_bytes,
            fs_waf: h.fs_waf,
            ftl_waf: h.ftl_waf,
            total_waf: h.total_waf,
            gc_copies: h.ftl_gc["migrations"].to_string(),
            steady: &h.steady_state,
            window: h.window.as_ref(),
            consistency: h.consistency.status,
        });
    }
    println!();
    print_judged_cells(&res.cells, res.held_out_within, res.held_out_judged);
    for f in &res.failed {
        println!("FAILED: {} {}: {}", f.config, f.workload, f.error);
    }
    println!(
        "\nkernel F2FS against our f2fs mode (within {:.0}%):",
        experiment::amf::MODEL_TOLERANCE * 100.0
    );
    for m in &res.f2fs_model {
        println!(
            "  {:<10} {:<5} FS {:.2} (ours {:.2}, {:+.1}%)  FTL {:.2} (ours {:.2}, {:+.1}%)  {}",
            m.workload,
            m.target,
            m.kernel_fs_waf,
            m.ours_fs_waf,
            m.fs_difference * 100.0,
            m.kernel_ftl_waf,
            m.ours_ftl_waf,
            m.ftl_difference * 100.0,
            if m.within { "within" } else { "NOT within" }
        );
        if let Some(r) = &m.reason {
            println!("      {r}");
        }
    }
}

fn print_dfs(res: &experiment::dfs::DfsResult) {
    let s = &res.setup;
    println!(
        "dfs reproduction{}: kernel {} under {}; device {} ({} MiB), {} MiB files\n{}",
        if res.quick {
            " (--quick: a small device and file, not the set-up)"
        } else {
            ""
        },
        s.kernel_version,
        s.accelerator,
        s.device.join(" "),
        s.device_bytes >> 20,
        s.app_mib,
        s.time_note
    );
    println!(
        "{:<9} {:>12} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11}",
        "app",
        "ext3 dev ms",
        "DFS dev ms",
        "speedup",
        "busy x",
        "ext3 prog",
        "DFS prog",
        "ext3 rd",
        "consistency"
    );
    for r in &res.rows {
        let ok = r.ext3.consistency.is_ok() && r.dfs.consistency.is_ok();
        println!(
            "{:<9} {:>12.1} {:>12.1} {:>9.2} {:>9.2} {:>9} {:>9} {:>9} {:>11}",
            r.app,
            r.ext3.elapsed_us / 1e3,
            r.dfs.elapsed_us / 1e3,
            r.speedup_elapsed,
            r.speedup_die_busy,
            r.ext3.flash_programs,
            r.dfs.flash_programs,
            r.ext3.flash_reads,
            if ok { "ok" } else { "violated" }
        );
    }
    println!();
    print_judged_cells(&res.cells, res.held_out_within, res.held_out_judged);
    for m in &res.missing {
        println!("NOT RUN: {}: {}", m.row, m.reason);
    }
}

/// Beyond the paper: NoFTL's advantage on today's chips, with the statistics that explain it.
fn print_today(res: &ReproduceResult) {
    for chip in &res.today {
        for r in &chip.rows {
            println!(
                "\ntoday's chips: {} {} on {} (a {:.0} MiB volume, multi-plane programs), host CPU {}",
                if r.workload == "tpcc" { "TPC-C" } else { "TPC-B" },
                r.scale,
                chip.preset,
                r.volume_bytes as f64 / (1 << 20) as f64,
                res.cpu.name
            );
            println!(
                "{:<10} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
                "store",
                "tx/s",
                "slowdown",
                "host us",
                "flash rd",
                "transl.rd",
                "programs",
                "transl.wr",
                "GC migr.",
                "check"
            );
            for s in &r.stores {
                println!(
                    "{:<10} {:>9.1} {:>9.2} {:>10.0} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>8}",
                    s.store,
                    s.tps,
                    s.slowdown,
                    s.host_cpu_us,
                    s.flash_reads,
                    s.translation_reads,
                    s.flash_programs,
                    s.translation_writes,
                    s.gc_migrations,
                    s.consistency
                );
            }
        }
    }
}
