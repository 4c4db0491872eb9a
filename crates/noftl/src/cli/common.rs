//! Argument groups shared by several verbs.

use std::path::{Path, PathBuf};

use clap::Args;
use nand::DeviceConfig;

pub use lab::units::{parse_percent, parse_size};

/// Which emulated device to use.
#[derive(Debug, Clone, Args)]
pub struct DeviceArgs {
    /// A preset from presets/ (noftl13, mt29f16g08, mlc16k, tlc16k, tiny, amf-slides).
    #[arg(long, default_value = nand::DEFAULT_PRESET, conflicts_with = "config")]
    pub preset: String,
    /// A device config file in the presets' TOML format.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override any config field by its dotted path, e.g. --set geometry.channels=4.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

impl DeviceArgs {
    /// The device these flags name, as the experiment library takes it.
    pub fn spec(&self) -> lab::device::DeviceSpec {
        lab::device::DeviceSpec {
            preset: self.preset.clone(),
            config: self.config.clone(),
            set: self.set.clone(),
        }
    }

    /// The device configuration, checked (`lab::device::DeviceSpec::load`).
    pub fn load(&self) -> anyhow::Result<DeviceConfig> {
        self.spec().load()
    }

    /// `--config` as an input of the output rule (`check_outputs`).
    pub fn input(&self) -> (&'static str, Option<&Path>) {
        ("--config", self.config.as_deref())
    }
}

/// The output rule (`lab::output`) at start-up, before any work: the verb's `inputs` (flag,
/// path) are declared, so that no result replaces one, then every output path is judged
/// ("-", standard output, passes).
pub fn check_outputs(
    inputs: &[(&'static str, Option<&Path>)],
    outputs: &[Option<&Path>],
) -> anyhow::Result<()> {
    for (flag, path) in inputs {
        if let Some(p) = path {
            lab::output::protect(flag, p);
        }
    }
    for p in outputs.iter().flatten() {
        lab::output::check_writable(p)?;
    }
    Ok(())
}

/// `--cpu`'s profile file, when it names one (an input no result may replace).
pub fn cpu_input(cpu: &str) -> (&'static str, Option<&Path>) {
    (
        "--cpu",
        (!lab::cpu::PROFILES.contains(&cpu)).then(|| Path::new(cpu)),
    )
}

/// Writes `res` as pretty JSON to `path` ("-": standard output). Returns whether the human
/// report should be printed too (not when the JSON went to standard output).
pub fn emit_json(
    path: Option<&std::path::Path>,
    res: &impl serde::Serialize,
) -> anyhow::Result<bool> {
    let json = serde_json::to_string_pretty(res)?;
    match path {
        Some(p) if p.as_os_str() == "-" => {
            println!("{json}");
            return Ok(false);
        }
        Some(p) => lab::output::write_atomic(p, format!("{json}\n").as_bytes())?,
        None => {}
    }
    Ok(true)
}

/// The flags every verb with a result directory takes.
#[derive(Clone, Debug, Args)]
pub struct ResultsArgs {
    /// Write a result directory (created if missing) in BenchBase's layout: BENCH_TIMESTAMP.
    /// summary.json, .samples.csv, .results.csv, .params.json, .config.xml (and .raw.csv with
    /// --raw; .fio.json for io). Names and units: docs/results.md.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// The length of one samples.csv (and results.csv) row, in the run's (virtual) time, e.g.
    /// 100ms, 1s.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub sample_window: String,
    /// With --results: also write raw.csv, one row per transaction or request.
    #[arg(long, requires = "results")]
    pub raw: bool,
    /// Write into a --results directory that is not empty (its files of the same names are
    /// replaced); bench --store file: also use a --path that is not a noftl database.
    #[arg(long)]
    pub force: bool,
}

impl ResultsArgs {
    /// The result directory, if any, refused when it holds anything, unless --force
    /// (`lab::output::check_results_dir`): before any work.
    pub fn check(&self) -> anyhow::Result<()> {
        if let Some(dir) = &self.results {
            lab::output::check_results_dir("--results", dir, self.force)?;
        }
        Ok(())
    }

    /// The result directory's plan (`lab::results::Plan::new`), checked before any work.
    pub fn plan(&self) -> anyhow::Result<Option<lab::results::Plan>> {
        self.check()?;
        self.results
            .as_deref()
            .map(|dir| lab::results::Plan::new(dir, &self.sample_window, self.raw))
            .transpose()
    }
}

/// The steady-state line of every measuring verb's human output (`lab::steady`), and its
/// warning when the rule was not met, as a violated consistency prints one.
pub fn print_steady(s: &lab::steady::SteadyState) {
    println!(
        "  steady state: {} after {} round(s), {}",
        if s.met { "met" } else { "NOT met" },
        s.rounds,
        s.device_writes_text()
    );
    if let Some(w) = s.warning() {
        println!("  WARNING: {w}");
    }
}

/// One row of a write-amplification table (`fs waf`, `reproduce amf`): the file system and
/// FTL levels, GC copies, how often the device had been written over, the rounds and their
/// throughput, the write path's check.
pub struct WafLine<'a> {
    pub config: String,
    pub workload: &'a str,
    pub app_bytes: u64,
    pub fs_waf: f64,
    pub ftl_waf: f64,
    pub total_waf: f64,
    pub gc_copies: String,
    pub steady: &'a lab::steady::SteadyState,
    pub window: Option<&'a lab::experiments::rounds::Window>,
    pub consistency: &'a str,
}

/// The header of a write-amplification table (`WafLine`).
pub fn print_waf_header() {
    println!(
        "{:<16} {:<13} {:>9} {:>7} {:>7} {:>7} {:>10} {:>9} {:>12} {:>9} {:>11}",
        "config",
        "workload",
        "app MiB",
        "FS",
        "FTL",
        "total",
        "GC copies",
        "dev. x",
        "rounds",
        "MiB/s dev",
        "consistency"
    );
}

/// A row of a write-amplification table; a non-finite figure prints as the JSON reads it
/// back (NaN).
pub fn print_waf_line(l: &WafLine<'_>) {
    let fig = lab::experiments::fs_waf::nan_if_infinite;
    println!(
        "{:<16} {:<13} {:>9.1} {:>7.2} {:>7.2} {:>7.2} {:>10} {:>9.2} {:>12} {:>9} {:>11}",
        l.config,
        l.workload,
        l.app_bytes as f64 / 1048576.0,
        fig(l.fs_waf),
        fig(l.ftl_waf),
        fig(l.total_waf),
        l.gc_copies,
        l.steady.device_writes,
        rounds_text(l.steady),
        window_mib_s(l.window),
        l.consistency
    );
}

/// A row's rounds as the tables print them: "whole" (no rounds), "N steady", "N at cap".
fn rounds_text(s: &lab::steady::SteadyState) -> String {
    match (s.rounds, s.met) {
        (0, _) => "whole".into(),
        (n, true) => format!("{n} steady"),
        (n, false) => format!("{n} at cap"),
    }
}

/// A row in rounds: its window's application MiB per second of modelled device time; a whole
/// run: "-".
fn window_mib_s(w: Option<&lab::experiments::rounds::Window>) -> String {
    w.map_or("-".to_string(), |w| {
        format!("{:.1}", w.figures.app_mib_per_device_s)
    })
}
