//! `noftl iaa compare`: the IAA paper's free-space sweep (Miyaji, Sun and Takeuchi, "IAA"
//! Figs. 11 and 12; docs/iaa.md): per device free-space level and scheme (conventional, IAA,
//! U2DI, IAA+U2DI), the random Insert/Delete/Update workload of `kits::iaa` on the page FTL or
//! the native (NoFTL) store, in virtual time.
//!
//! This module parses the flags into `lab::experiments::iaa::Spec` and prints the sweep's
//! result (a table, or JSON); the runs themselves (device, load, warm-up, measured window,
//! result directory) are `lab::experiments::iaa`'s, whose doc says how each run goes.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, Subcommand};
use kits::iaa::Scheme;
use lab::experiments::{iaa, iaa_paper};

use super::bench::print_consistency;
use super::common::parse_percent;

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process: its size costs nothing
pub enum IaaCommand {
    /// The free-space sweep of the IAA paper: throughput, energy, erases and GC copies per
    /// scheme, with the ratios to conventional.
    Compare(CompareArgs),
    /// From the paper's model to the engine, one assumption at a time (at most 8 victims
    /// committed, Delete writes its page, a log force per query, index maintenance, a buffer
    /// pool, 4 KiB pages): conventional and
    /// IAA+U2DI per step, with the aimed share f and GC copies per erase.
    Ablation(AblationArgs),
}

#[derive(Debug, Clone, Args)]
pub struct AblationArgs {
    /// The free-space level (the paper's headline: 20%).
    #[arg(long, default_value = "20%", value_parser = parse_percent)]
    pub free: f64,
    /// The store: page (the page FTL's hint channel) | dftl | native (NoFTL).
    #[arg(long = "store", visible_alias = "storage", default_value = "page")]
    pub storage: String,
    /// A preset from presets/ (default: the paper model's, mlc16k).
    #[arg(long)]
    pub preset: Option<String>,
    /// Override a device config field (default geometry: 64 blocks per plane of 32 pages).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Measured window per run, virtual time (default: the paper model's 20s).
    #[arg(long)]
    pub duration: Option<String>,
    /// Warm-up writes, in device capacities (default: the paper model's 2).
    #[arg(long)]
    pub warmup: Option<f64>,
    /// Seed of the rows and of the queries (every run of the ablation takes the same).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs in parallel.
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// Write the JSON result to this file ("-" or no value: standard output).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<PathBuf>,
}

impl AblationArgs {
    pub fn spec(&self) -> iaa_paper::AblationSpec {
        let mut base = iaa::Spec::for_model(iaa::Model::Paper);
        base.storage = self.storage.clone();
        if let Some(p) = &self.preset {
            base.device.preset = p.clone();
        }
        base.device.set = self.set.clone();
        if let Some(d) = &self.duration {
            base.duration = d.clone();
        }
        if let Some(w) = self.warmup {
            base.warmup = w;
        }
        base.seed = self.seed;
        base.jobs = self.jobs;
        iaa_paper::AblationSpec {
            base,
            free: self.free,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The storage engine: engine (this repo's: a WAL, a B+-tree index, a buffer pool) or paper
    /// (IAA's, as the paper describes it: rows read-modify-written at their LPA, free deletes,
    /// no log, no index, no buffer pool; its defaults: mlc16k, 16 KiB pages, one stream, 20s).
    #[arg(long, default_value = "engine")]
    pub model: iaa::Model,
    /// Device free-space levels (share of the store's logical capacity holding no live data).
    #[arg(long, value_delimiter = ',', default_value = "10%,20%,30%,40%,50%", value_parser = parse_percent)]
    pub free: Vec<f64>,
    /// Schemes: conventional, iaa, u2di, iaa+u2di.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "conventional,iaa,u2di,iaa+u2di"
    )]
    pub schemes: Vec<String>,
    /// The store: page (the page-mapped FTL behind the block interface) | dftl | native (NoFTL).
    #[arg(long = "store", visible_alias = "storage", default_value = "page")]
    pub storage: String,
    /// A preset from presets/ (noftl13, mt29f16g08, mlc16k, tlc16k, tiny, amf-slides; default: the
    /// model's, noftl13 for the engine, mlc16k for the paper).
    #[arg(long)]
    pub preset: Option<String>,
    /// Override a device config field, e.g. --set geometry.blocks_per_plane=1024. Without an
    /// override of blocks_per_plane the sweep uses 256 blocks per plane (64 MiB on noftl13),
    /// so that the default sweep runs in about two minutes.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Over-provisioning of the FTL (and the native store) as a spare factor.
    #[arg(long, value_parser = parse_percent, default_value = "7%")]
    pub op: f64,
    /// Bytes per row as stored.
    #[arg(long, default_value_t = 256)]
    pub row_bytes: usize,
    /// Relative probabilities of Insert, Delete and Update.
    #[arg(long, value_delimiter = ',', default_value = "1,1,1")]
    pub mix: Vec<u32>,
    /// Share of the table's pages' record space the rows fill (the rest are holes that IAA
    /// and next fit reuse).
    #[arg(long, value_parser = parse_percent, default_value = "85%")]
    pub density: f64,
    /// Terminals: concurrent streams of Insert/Delete/Update transactions (1 to 256; default:
    /// 4 for the engine, 1 for the paper model, which takes no other).
    #[arg(long)]
    pub terminals: Option<u32>,
    /// Measured window, virtual time (default: 2s for the engine, 20s for the paper model).
    #[arg(long)]
    pub duration: Option<String>,
    /// Warm-up writes, in multiples of the device's logical capacity (default: 1 for the
    /// engine, 2 for the paper model).
    #[arg(long)]
    pub warmup: Option<f64>,
    /// One round of the steady-state rule after the warm-up (SNIA SSS PTS: the last 5 rounds'
    /// throughput and WAF within 20% range and 10% fit excursion of their mean), virtual time
    /// (default: 1s for the engine, 5s for the paper model).
    #[arg(long)]
    pub round: Option<String>,
    /// Rounds before the measured window, at most (0: none, and every row says it was not
    /// checked for steady state; default: 0 for the engine, as `noftl bench`, 25 for the
    /// paper model, SNIA's cap).
    #[arg(long)]
    pub max_rounds: Option<u32>,
    /// Buffer pool frames (default: as `noftl bench`, 2% of the table's pages, at least 256).
    #[arg(long)]
    pub buffer_pages: Option<usize>,
    /// DB page size in bytes (default: 4096 for the engine, 16384 for the paper model, whose
    /// LPA is the flash page; 16384 needs 16 KiB flash pages for IAA to name DB pages).
    #[arg(long)]
    pub page_size: Option<usize>,
    /// GC victims the engine has the flash commit to at first (it commits more, up to
    /// --max-victims, when every hinted page had its record; default: 2 for the engine, 1 for
    /// the paper model).
    #[arg(long)]
    pub victims: Option<u32>,
    /// The most GC victims the engine has the flash commit to (default: 8 for the engine, its
    /// most; every closed block for the paper model, whose SE is always told the next block to
    /// be erased).
    #[arg(long)]
    pub max_victims: Option<u32>,
    /// Native store, engine model: B-tree and space-map pages in write streams of their own,
    /// so that no flash block mixes heap and index pages and the committed victims hold heap
    /// pages only, which inserts can empty (docs/iaa.md).
    #[arg(long)]
    pub index_streams: bool,
    /// Seed of the table's rows and of the terminals' transaction inputs.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Runs in parallel.
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// Verify the table, its index and the engine's structures after each run.
    #[arg(long)]
    pub check: bool,
    /// Fail (after the report) when a run did not reach steady state (--max-rounds).
    #[arg(long)]
    pub strict: bool,
    /// Write the JSON result to this file ("-" or no value: standard output, instead of the
    /// human report).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<PathBuf>,
    /// docs/results.md: one samples.csv row per window of every run's measured window.
    #[command(flatten)]
    pub results: crate::cli::common::ResultsArgs,
}

impl CompareArgs {
    /// The sweep these flags name, as the experiment library takes it.
    pub fn spec(&self) -> iaa::Spec {
        let d = iaa::Spec::for_model(self.model);
        iaa::Spec {
            model: self.model,
            free: self.free.clone(),
            schemes: self.schemes.clone(),
            storage: self.storage.clone(),
            device: lab::device::DeviceSpec {
                preset: self.preset.clone().unwrap_or(d.device.preset),
                config: None,
                set: self.set.clone(),
            },
            op: self.op,
            row_bytes: self.row_bytes,
            mix: self.mix.clone(),
            density: self.density,
            terminals: self.terminals.unwrap_or(d.terminals),
            duration: self.duration.clone().unwrap_or(d.duration),
            warmup: self.warmup.unwrap_or(d.warmup),
            round: self.round.clone().unwrap_or(d.round),
            max_rounds: self.max_rounds.unwrap_or(d.max_rounds),
            buffer_pages: self.buffer_pages,
            page_size: self.page_size.unwrap_or(d.page_size),
            victims: self.victims.unwrap_or(d.victims),
            max_victims: self.max_victims.unwrap_or(d.max_victims),
            index_streams: self.index_streams,
            seed: self.seed,
            jobs: self.jobs,
            check: self.check,
        }
    }
}

pub fn run(cmd: IaaCommand) -> anyhow::Result<()> {
    match cmd {
        IaaCommand::Compare(a) => compare(a),
        IaaCommand::Ablation(a) => ablation(a),
    }
}

/// The sweep's schemes, parsed (`lab::experiments::iaa::schemes`; the dashboard counts runs).
pub(super) fn schemes(a: &CompareArgs) -> anyhow::Result<Vec<Scheme>> {
    iaa::schemes(&a.spec())
}

/// The sweep's live series (`lab::experiments::iaa::series_name`), in the order of its rows:
/// the dashboard's legend.
pub(super) fn series(a: &CompareArgs) -> anyhow::Result<Vec<String>> {
    Ok(iaa::runs(&a.spec())?
        .into_iter()
        .map(|(free, scheme)| iaa::series_name(free, scheme))
        .collect())
}

/// The sweep's own checks (`lab::experiments::iaa::check`; the dashboard runs them on the
/// command line it builds).
pub(super) fn checked(a: &CompareArgs) -> anyhow::Result<()> {
    iaa::check(&a.spec())
}

fn compare(a: CompareArgs) -> anyhow::Result<()> {
    let spec = a.spec();
    let runs = iaa::runs(&spec)?;
    super::common::check_outputs(&[], &[a.json.as_deref()])?;
    let plan = a.results.plan()?;
    // Refuse a bad device before the progress bar shows.
    iaa::check_device(&spec)?;
    let bar = lab::progress::phase("iaa compare", runs.len() as u64, "runs");
    let res = iaa_paper::run(&spec, plan.as_ref(), &|| bar.inc(1));
    bar.finish_and_clear();
    let out = res?;
    if super::common::emit_json(a.json.as_deref(), &out)? {
        print_table(&out);
    }
    if out.check_failed() {
        bail!("a run's check failed");
    }
    lab::steady::refuse_unsteady(
        a.strict,
        out.rows.iter().map(|r| {
            let name = format!("{:.0}% {}", r.free_space * 100.0, r.scheme);
            (name, &r.steady_state)
        }),
    )
}

fn print_table(o: &iaa::Sweep) {
    println!(
        "iaa compare, {} model, on {} ({}; {} B rows, mix I/D/U {:?}, {} terminals, {} virtual per run)",
        o.model.name(),
        o.storage,
        o.preset,
        o.row_bytes,
        o.mix,
        o.terminals,
        o.duration
    );
    println!(
        "{:>5} {:<13} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>5} {:>8}",
        "free",
        "scheme",
        "qps",
        "uJ/query",
        "copies/w",
        "erase/GiB",
        "er/kq",
        "x qps",
        "x J",
        "x erase",
        "f",
        "cp/erase"
    );
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    for r in &o.rows {
        println!(
            "{:>4.0}% {:<13} {:>9.0} {:>9.1} {:>9.3} {:>9.1} {:>9.2} {:>7} {:>7} {:>7} {:>5.2} {:>8.1}",
            r.free_space * 100.0,
            r.scheme,
            r.throughput_qps,
            r.energy_joules_per_query * 1e6,
            r.gc_copies_per_host_write,
            r.erases_per_host_gib,
            r.erases_per_kquery,
            f(r.relative.throughput),
            f(r.relative.energy),
            f(r.relative.erases),
            r.aimed_share,
            r.gc_copies_per_erase,
        );
        if r.check != "skipped" {
            println!("       check: {} {:?}", r.check, r.check_problems);
        }
        if !r.consistency.is_ok() {
            print_consistency(&r.consistency);
        }
        if let Some(w) = r.steady_state.warning() {
            println!("       WARNING: {w}");
        }
    }
}

fn ablation(a: AblationArgs) -> anyhow::Result<()> {
    let spec = a.spec();
    iaa_paper::check_ablation(&spec)?;
    super::common::check_outputs(&[], &[a.json.as_deref()])?;
    let bar = lab::progress::phase(
        "iaa ablation",
        2 * iaa_paper::Step::on(&spec.base.storage).len() as u64,
        "runs",
    );
    let res = iaa_paper::ablation(&spec, &|| bar.inc(1));
    bar.finish_and_clear();
    let out = res?;
    if super::common::emit_json(a.json.as_deref(), &out)? {
        print_ablation(&out);
    }
    Ok(())
}

fn print_ablation(o: &iaa_paper::Ablation) {
    println!(
        "iaa ablation on {} ({}; {}), {:.0}% free, conventional against IAA+U2DI, {} virtual per run",
        o.storage,
        o.preset,
        o.set.join(" "),
        o.free_space * 100.0,
        o.duration
    );
    println!(
        "{:<26} {:>8} {:>8} {:>6} {:>6} {:>7} {:>5} {:>8} {:>8} {:>6} {:>6}",
        "step",
        "qps conv",
        "qps both",
        "x qps",
        "x J",
        "x erase",
        "f",
        "cp/e conv",
        "cp/e both",
        "bound",
        "B"
    );
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    for s in &o.steps {
        let (c, i) = (&s.conventional, &s.iaa_u2di);
        println!(
            "{:<26} {:>8.0} {:>8.0} {:>6} {:>6} {:>7} {:>5.2} {:>9.1} {:>9.1} {:>6} {:>6}",
            s.label,
            c.throughput_qps,
            i.throughput_qps,
            f(i.relative.throughput),
            f(i.relative.energy),
            f(i.relative.erases),
            i.aimed_share,
            c.gc_copies_per_erase,
            i.gc_copies_per_erase,
            i.bound_copies_per_erase
                .map_or("-".to_string(), |b| format!("{b:.1}")),
            i.units_per_block,
        );
        for r in [c, i] {
            if !r.consistency.is_ok() {
                print_consistency(&r.consistency);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(subcommand)]
        c: IaaCommand,
    }

    fn args(extra: &[&str]) -> CompareArgs {
        let mut v = vec!["t", "compare"];
        v.extend_from_slice(extra);
        match T::try_parse_from(v).unwrap().c {
            IaaCommand::Compare(a) => a,
            IaaCommand::Ablation(_) => unreachable!("parsed a compare"),
        }
    }

    #[test]
    fn bad_arguments_are_refused_with_errors() {
        assert!(checked(&args(&["--storage", "fast"])).is_err());
        assert!(checked(&args(&["--mix", "1,1"])).is_err());
        assert!(checked(&args(&["--free", "95%"])).is_err());
        assert!(schemes(&args(&["--schemes", "lru"])).is_err());
        assert!(T::try_parse_from(["t", "compare", "--free", "abc"]).is_err());
        // Index streams are the native store's, and the paper's model has no index.
        let err = checked(&args(&["--index-streams"])).unwrap_err();
        assert!(format!("{err}").contains("native"), "{err}");
        assert!(checked(&args(&["--index-streams", "--storage", "native"])).is_ok());
        let paper = ["--index-streams", "--storage", "native", "--model", "paper"];
        assert!(checked(&args(&paper)).is_err());
    }

    /// A `--model` that names no model is refused at parsing, with the names it takes; the
    /// paper model refuses what it has not (several terminals, a buffer pool, a DB page that
    /// does not divide the flash page) before any run.
    #[test]
    fn bad_models_and_flags_the_paper_model_has_not_are_refused() {
        let err = T::try_parse_from(["t", "compare", "--model", "papr"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--model is paper or engine, not 'papr'"),
            "{err}"
        );
        let a = args(&["--model", "paper"]);
        assert_eq!(a.spec().terminals, 1);
        assert_eq!(a.spec().device.preset, "mlc16k");
        checked(&a).unwrap();
        iaa::check_device(&a.spec()).unwrap();
        let err = checked(&args(&["--model", "paper", "--terminals", "4"])).unwrap_err();
        assert!(format!("{err}").contains("--terminals 1"), "{err}");
        assert!(checked(&args(&["--model", "paper", "--buffer-pages", "512"])).is_err());
        let a = args(&["--model", "paper", "--page-size", "12288"]);
        assert!(iaa::check_device(&a.spec()).is_err());
    }

    /// The flags' defaults are the library's (`Spec::default`, which programs and lab's tests
    /// start from).
    #[test]
    fn the_flags_defaults_are_the_specs() {
        assert_eq!(
            format!("{:?}", args(&[]).spec()),
            format!("{:?}", iaa::Spec::default())
        );
    }
}
