//! `noftl ipa compare` and `noftl ipa advise`: IPA Table I (the IPA demo, ICDE 2017;
//! docs/ipa.md) and the IPA advisor. The experiment (its rows, the advisor's rule, the result
//! directory) is `lab::experiments::ipa`; this module parses the flags into its `Spec` and
//! prints what it returns.

use anyhow::bail;
use clap::{Args, Subcommand};
use lab::experiments::ipa::{self as exp, AdviseReport, Report};

use super::common::parse_percent;

/// The rows a comparison can run (the dashboard checks its form's rows against them).
pub use lab::experiments::ipa::CONFIGS;

#[derive(Debug, Subcommand)]
pub enum IpaCommand {
    /// IPA Table I: baseline, global IPA and selective IPA (regions) side by side.
    Compare(IpaCompareArgs),
    /// The IPA advisor: runs the baseline and measures, per object, what each page write-back
    /// changed; recommends the objects for an IPA region, the scheme and the DDL.
    Advise(IpaCompareArgs),
}

#[derive(Debug, Clone, Args)]
pub struct IpaCompareArgs {
    /// tatp | tpcb | tpcc
    #[arg(long, default_value = "tatp")]
    pub workload: String,
    /// TATP: subscribers; TPC-B: branches (with --accounts-per-branch accounts each); TPC-C:
    /// warehouses.
    #[arg(long)]
    pub scale: Option<u32>,
    /// TPC-B: accounts per branch.
    #[arg(long, default_value_t = 100_000)]
    pub accounts_per_branch: u32,
    /// A preset from presets/ (mlc16k, tlc16k: the IPA region in pSLC; noftl13, tiny: SLC).
    #[arg(long, default_value = "mlc16k")]
    pub preset: String,
    /// Override a device config field. Without a geometry override the comparison runs on a
    /// small device of the preset's chips: 2 channels x 2 chips, 32 blocks per plane of 64
    /// pages (256 MiB of MLC on mlc16k), so that TATP's default 40,000 subscribers fill the
    /// one-chip IPA region enough for its GC to work, and the default run takes minutes.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// DB page size in bytes (default: the device's flash page, as IPA Table I's 16 KB pages).
    #[arg(long)]
    pub page_size: Option<usize>,
    /// Spare factor of the store and of its regions.
    #[arg(long, value_parser = parse_percent, default_value = "10%")]
    pub op: f64,
    /// Chips of the IPA region of `ipa-regions` (and of `regions`); `ipa-global` takes every
    /// chip but one, which keeps the log and the store's metadata.
    #[arg(long, default_value_t = 1)]
    pub region_chips: u32,
    /// The DBA's MAX_SIZE of the regions layout's region (e.g. 54M): the region takes the fewest
    /// chips that hold it in its cells and never more (overrides --region-chips).
    #[arg(long, value_parser = super::common::parse_size)]
    pub region_size: Option<u64>,
    /// GC policy of that region: greedy (default), cost-benefit, fifo or random.
    #[arg(long)]
    pub region_gc: Option<String>,
    /// IPA Table I in its regime (docs/ipa.md, "Table I in steady state"): TATP, the baseline,
    /// Table I's layout and the control rows on a device and database chosen for it, a
    /// DBA-sized region, preconditioning and rounds until steady, 3 seeds. Replaces the
    /// workload, scale, device, region, rows, durations and --repeat; keeps --seed and
    /// --terminals.
    #[arg(long)]
    pub paper: bool,
    /// Fail (after the report) when a row broke a physical bound or did not reach steady state.
    #[arg(long)]
    pub strict: bool,
    /// The IPA scheme NxM: N appends per page between out-of-place writes, M records each.
    #[arg(long, default_value = "2x3")]
    pub scheme: String,
    /// Bytes a delta record is sized for.
    #[arg(long, default_value_t = 32)]
    pub record_bytes: u16,
    /// Rows to run (baseline, regions, ipa-regions, global, ipa-global); ipa-regions and regions
    /// are TATP's (Subscriber and Special_Facility in the region); `regions` and `global` are
    /// the control rows: the same layout and cells as their IPA row, without appends.
    #[arg(long = "store", visible_alias = "configs", value_delimiter = ',')]
    pub configs: Option<Vec<String>>,
    /// Terminals: concurrent transaction streams of each run.
    #[arg(long, default_value_t = 1)]
    pub terminals: u32,
    /// A fixed warm-up after the load, virtual time (or none), before the preconditioning.
    #[arg(long, default_value = "none")]
    pub warmup: String,
    /// Preconditioning: the workload runs until the host has written the device over this many
    /// times since it was formatted (the load included), then the steady-state rounds.
    #[arg(
        long = "precondition",
        value_name = "DEVICE_WRITES",
        default_value_t = 2.0
    )]
    pub precondition: f64,
    /// One round of the steady-state rule (SNIA SSS PTS: the last 5 rounds' throughput and WAF
    /// within 20% range and 10% fit excursion of their mean), virtual time.
    #[arg(long, default_value = "10s")]
    pub round: String,
    /// The cap on rounds (0: none, and every row says it was not checked for steady state).
    #[arg(long, default_value_t = lab::steady::MAX_ROUNDS)]
    pub max_rounds: u32,
    /// Measured window, virtual time.
    #[arg(long, default_value = "20s")]
    pub duration: String,
    /// Runs per row (seeds seed, seed + 1, ...): the throughput's standard deviation.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Buffer pool frames (default: 2% of the database's pages, at least 64).
    #[arg(long)]
    pub buffer_pages: Option<usize>,
    /// Seed of each row's device, database and transaction inputs (run k of --repeat: seed + k).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the JSON result to this file ("-" or no value: standard output, instead of the
    /// human report).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<std::path::PathBuf>,
    /// `ipa compare` only (docs/results.md): one samples.csv row per window of every row's
    /// measured run.
    #[command(flatten)]
    pub results: crate::cli::common::ResultsArgs,
}

impl IpaCompareArgs {
    /// The experiment these flags name.
    fn spec(&self) -> exp::Spec {
        exp::Spec {
            workload: self.workload.clone(),
            scale: self.scale,
            accounts_per_branch: self.accounts_per_branch,
            device: lab::device::DeviceSpec {
                preset: self.preset.clone(),
                config: None,
                set: self.set.clone(),
            },
            page_size_bytes: self.page_size,
            op_fraction: self.op,
            region_chips: self.region_chips,
            region_max_size_bytes: self.region_size,
            region_gc: self.region_gc.clone(),
            scheme: self.scheme.clone(),
            record_bytes: self.record_bytes,
            configs: self.configs.clone(),
            terminals: self.terminals,
            warmup: self.warmup.clone(),
            precondition_device_writes: self.precondition,
            round: self.round.clone(),
            max_rounds: self.max_rounds,
            duration: self.duration.clone(),
            repeat: self.repeat,
            buffer_pages: self.buffer_pages,
            seed: self.seed,
            regime: None,
        }
    }
}

pub fn run(cmd: IpaCommand) -> anyhow::Result<()> {
    match cmd {
        IpaCommand::Compare(a) => compare(a),
        IpaCommand::Advise(a) => advise(a),
    }
}

fn compare(a: IpaCompareArgs) -> anyhow::Result<()> {
    if a.paper {
        return paper(a);
    }
    let spec = a.spec();
    // The spec is checked before the result directory is created (the order of the refusals).
    exp::check(&spec)?;
    super::common::check_outputs(&[], &[a.json.as_deref()])?;
    let plan = a.results.plan()?;
    let report = exp::run(&spec, plan.as_ref())?;
    if super::common::emit_json(a.json.as_deref(), &report)? {
        print_table(&report);
    }
    strict(a.strict, &[&report])
}

/// `--paper`: Table I where its layout fits, then at Table I's regime.
fn paper(a: IpaCompareArgs) -> anyhow::Result<()> {
    super::common::check_outputs(&[], &[a.json.as_deref()])?;
    let plan = a.results.plan()?;
    let report = exp::paper(a.seed, a.terminals, plan.as_ref())?;
    if super::common::emit_json(a.json.as_deref(), &report)? {
        print_table(&report.fits);
        println!();
        print_table(&report.at_table_i_regime);
    }
    strict(a.strict, &[&report.fits, &report.at_table_i_regime])
}

/// `--strict`: a row that broke a physical bound or did not reach steady state fails the verb.
fn strict(strict: bool, reports: &[&Report]) -> anyhow::Result<()> {
    let rows = || reports.iter().flat_map(|r| r.rows.iter());
    let violated = rows().filter(|r| r.consistency.status != "ok").count();
    if strict && violated > 0 {
        bail!("--strict: {violated} row(s) violated their consistency check");
    }
    lab::steady::refuse_unsteady(strict, rows().map(|r| (r.config.as_str(), &r.steady_state)))
}

fn print_table(r: &Report) {
    if let Some(regime) = &r.regime {
        println!("regime: {regime}");
    }
    println!(
        "ipa compare: {} scale {} on {} ({}-byte DB pages), IPA [{}] records of {} B in {}, region {} chips; warm-up {:.0} s, preconditioning to {} device writes, rounds of {:.0} s until steady (at most {}), window {:.0} s, {} run(s) per row",
        r.workload,
        r.scale,
        r.preset,
        r.page_bytes,
        r.scheme,
        r.record_bytes,
        r.ipa_mode,
        r.region_chips,
        r.warmup_s,
        r.precondition_device_writes,
        r.round_s,
        r.max_rounds,
        r.duration_s,
        r.repeat
    );
    if let Some(s) = &r.advised_scheme {
        println!(
            "  advised: IPA [{s}] for {} (noftl ipa advise's rule on a profiled baseline run)",
            r.advised_tables.join(", ")
        );
    }
    for x in &r.not_run {
        println!("  {:<12} not run: {}", x.config, x.why);
    }
    let base = r.rows.iter().find(|x| x.config == "baseline");
    println!(
        "  {:<12} {:>9} {:>10} {:>10} {:>8} {:>10} {:>8} {:>10} {:>10} {:>9} {:>8}",
        "config",
        "oop/ipa",
        "host rd",
        "host wr",
        "appends",
        "GC migr",
        "GC ers",
        "migr/wr",
        "erases/wr",
        "tx/s",
        "overhead"
    );
    for x in &r.rows {
        let oop = 100.0 - x.append_percent;
        println!(
            "  {:<12} {:>4.0}/{:<4.0} {:>10} {:>10} {:>8} {:>10} {:>8} {:>10.4} {:>10.5} {:>9.1} {:>7.1}%",
            x.config,
            oop,
            x.append_percent,
            x.host_reads,
            x.host_writes,
            x.ipa_appends,
            x.gc_migrations,
            x.gc_erases,
            x.gc_migrations_per_host_write,
            x.gc_erases_per_host_write,
            x.throughput_tps,
            x.space_overhead * 100.0
        );
        if x.consistency.status != "ok" {
            println!("    consistency violated: {:?}", x.consistency.violations);
        }
        if let Some(w) = x.steady_state.warning() {
            println!("    WARNING: {w}");
        }
        for g in &x.regions {
            println!(
                "    region {:<16} {:>6} {:>5.1}% full of {:>7} units, GC victims {:>5} at {:>5.1}% valid, {:>6} migrations, {:>5} erases",
                g.name,
                g.cells,
                100.0 * g.fullness,
                g.capacity_units,
                g.gc_victims,
                100.0 * g.victim_validity,
                g.gc_migrations,
                g.gc_erases
            );
        }
    }
    if let Some(b) = base {
        let rel = |v: f64, b: f64| {
            if b == 0.0 {
                f64::NAN
            } else {
                100.0 * (v / b - 1.0)
            }
        };
        for x in r.rows.iter().filter(|x| x.config != "baseline") {
            println!(
                "  {} vs baseline: GC migrations per host write {:+.0}%, GC erases per host write {:+.0}%, throughput {:+.1}%",
                x.config,
                rel(x.gc_migrations_per_host_write, b.gc_migrations_per_host_write),
                rel(x.gc_erases_per_host_write, b.gc_erases_per_host_write),
                rel(x.throughput_tps, b.throughput_tps)
            );
        }
    }
}

/// `ipa advise`: the advisor on a profiled baseline run (its rule: docs/ipa.md, "The advisor").
fn advise(a: IpaCompareArgs) -> anyhow::Result<()> {
    if a.results.results.is_some() {
        bail!("--results: `ipa advise` writes no result directory (`ipa compare` does)");
    }
    super::common::check_outputs(&[], &[a.json.as_deref()])?;
    let report = exp::advise(&a.spec())?;
    if super::common::emit_json(a.json.as_deref(), &report)? {
        print_advice(&report);
    }
    Ok(())
}

fn print_advice(report: &AdviseReport) {
    println!(
        "ipa advise: {} scale {} on {} ({}-byte pages), baseline window {:.0} s, {} page write-backs",
        report.workload, report.scale, report.preset, report.page_bytes, report.window_s, report.total_writebacks
    );
    println!(
        "  {:<24} {:>6} {:>10} {:>7} {:>12} {:>12} {:>6} {:>6} {:>6}  IPA",
        "object", "kind", "writebacks", "share", "bytes p50", "bytes p90", "rec50", "rec90", "fit"
    );
    for o in &report.objects {
        println!(
            "  {:<24} {:>6} {:>10} {:>6.1}% {:>12} {:>12} {:>6} {:>6} {:>5.0}%  {}",
            o.name,
            o.kind,
            o.writebacks,
            o.share_percent,
            o.changed_bytes_p50,
            o.changed_bytes_p90,
            o.ranges_p50,
            o.ranges_p90,
            o.fit_percent,
            if o.ipa { "yes" } else { "no" }
        );
    }
    println!(
        "  recommended: IPA [{}] with {}-byte records in {} ({:.1}% of each page), expected appends {:.0}% of page writes",
        report.scheme,
        report.record_bytes,
        report.ipa_mode,
        100.0 * report.space_overhead_per_page,
        report.expected_append_percent
    );
    for line in &report.ddl {
        println!("  {line}");
    }
}
