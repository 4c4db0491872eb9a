//! Command-line verbs. One module per verb; shared argument groups in `common`.

pub mod bench;
pub mod clock;
pub mod common;
pub mod compare;
pub mod crashtest;
pub mod dashboard;
pub mod device;
pub mod executor;
pub mod fs;
pub mod fs_waf;
pub mod ftl;
pub mod iaa;
pub mod io;
pub mod ipa;
pub mod launch;
pub mod mount;
pub mod plot;
pub mod progress;
pub mod reproduce;
pub mod serve;
pub mod shell;
pub mod sweep;
pub mod vm;

use clap::{CommandFactory, Parser, Subcommand};

/// `noftl --version`: the crate's version, the commit it was built from (with "-modified" when
/// the tree had uncommitted changes) and that commit's date (build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("NOFTL_COMMIT"),
    " ",
    env!("NOFTL_COMMIT_DATE"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "noftl",
    version = VERSION,
    about = "NAND flash emulator, FTLs and a flash-aware storage engine, with the benchmarks to compare them"
)]
pub struct Cli {
    /// No progress bars or progress lines on standard error (bars are drawn only when it is a
    /// terminal anyway); results, warnings and errors are unchanged.
    #[arg(long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect emulated devices.
    #[command(subcommand)]
    Device(device::DeviceCommand),
    /// Run a fio-like workload on the raw flash or on an FTL, in virtual time.
    Io(io::IoArgs),
    /// Flash translation layers: mapping memory and more.
    #[command(subcommand)]
    Ftl(ftl::FtlCommand),
    /// Export an FTL as a Network Block Device.
    Serve(serve::ServeArgs),
    /// Run one workload on the storage engine (TPC-B, TATP, TPC-C, TPC-H); `noftl run <workload>`
    /// is the same verb.
    #[command(subcommand, visible_alias = "run")]
    Bench(bench::BenchCommand),
    /// Power cuts and I/O errors during a workload, then recovery and verification.
    Crashtest(crashtest::CrashtestArgs),
    /// Insert Address Assist and U2DI (Miyaji et al.): the free-space sweep.
    #[command(subcommand)]
    Iaa(iaa::IaaCommand),
    /// In-Place Appends (IPA Table I): baseline, global IPA and selective IPA side by side.
    #[command(subcommand)]
    Ipa(ipa::IpaCommand),
    /// NoFTL Fig. 3: the same workload on NoFTL (native), DFTL 2/15/35% and the page FTL.
    Compare(compare::CompareArgs),
    /// A paper's figures at the paper's set-up, with a fidelity table (paper, ours, error,
    /// calibration or held-out): `noftl reproduce noftl` (NoFTL Figs. 3 and 4).
    Reproduce(reproduce::ReproduceArgs),
    /// Many runs of one verb over a grid of parameters, in parallel (local or Ray), merged into one table.
    Sweep(sweep::SweepArgs),
    /// Mount a file system (dfs, f2fs, alfs) on an emulated device with FUSE.
    Mount(mount::MountArgs),
    /// Check a file-system image offline.
    Fsck(mount::FsckArgs),
    /// File systems on the emulated device: benchmarks (DFS against ext4).
    #[command(subcommand)]
    Fs(fs::FsCommand),
    /// A kernel file system (ext4, ext3, f2fs, xfs) in a QEMU guest on the exported device: runs
    /// a command in it and reports the device's counters.
    Vm(vm::VmArgs),
    /// Figures (SVG or PNG) from result files: NoFTL Fig. 3 from `compare`, WAF curves from a sweep, latency CDFs and time series from result directories.
    Plot(plot::PlotArgs),
    /// A web page (loopback) to start bench, compare and ipa compare runs and watch them live (server-sent events).
    Dashboard(dashboard::DashboardArgs),
    /// Shell completions (bash, zsh, fish, elvish, powershell) for noftl, on standard output.
    Completions(shell::CompletionsArgs),
    /// Roff man pages for noftl and every subcommand.
    Man(shell::ManArgs),
    /// One job of `reproduce` or `compare` under `--executor ray`, on a Ray worker (the
    /// executor starts it; not run by hand).
    #[command(hide = true)]
    RunJob(executor::RunJobArgs),
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Device(c) => device::run(c),
        Command::Io(a) => io::run(a),
        Command::Ftl(c) => ftl::run(c),
        Command::Serve(a) => serve::run(a),
        Command::Bench(c) => bench::run(c),
        Command::Crashtest(a) => crashtest::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Reproduce(a) => reproduce::run(a),
        Command::Iaa(c) => iaa::run(c),
        Command::Ipa(c) => ipa::run(c),
        Command::Sweep(a) => sweep::run(a, &launcher()),
        Command::Plot(a) => plot::run(a),
        Command::Dashboard(a) => dashboard::run(a, launcher()),
        Command::Mount(a) => mount::run_mount(a),
        Command::Fsck(a) => mount::run_fsck(a),
        Command::Fs(c) => fs::run(c),
        Command::Vm(a) => vm::run(a),
        Command::Completions(a) => shell::completions(a, Cli::command()),
        Command::Man(a) => shell::man(a, Cli::command()),
        Command::RunJob(a) => run_one_job(a),
    }
}

/// `noftl run-job`: the job's command line through this parser, its one job run by its verb
/// (`executor` module doc).
fn run_one_job(a: executor::RunJobArgs) -> anyhow::Result<()> {
    let spec = a.job_spec()?;
    let cli =
        Cli::try_parse_from(std::iter::once("noftl").chain(spec.argv.iter().map(String::as_str)))
            .map_err(|e| anyhow::anyhow!("run-job: the job's command line does not parse: {e}"))?;
    match cli.command {
        Command::Reproduce(r) => a.write(&reproduce::run_job(&r, spec.job)?),
        Command::Compare(c) => a.write(&compare::run_job(&c, spec.job)?),
        _ => anyhow::bail!("run-job runs a job of reproduce or compare"),
    }
}

/// The command line as the verbs that run other verbs (dashboard, sweep) get it: this parser,
/// this dispatch, and what they read of a parsed command (`launch`'s seam: they never name
/// `Cli` or `Command`).
pub fn launcher() -> launch::Launcher {
    launch::Launcher {
        parse: parse_job,
        run: run_job,
        device: job_device,
        iaa_compare: job_iaa_compare,
    }
}

/// A command line as parsed, with its words (the command its result files record).
struct Parsed {
    argv: Vec<String>,
    cli: Cli,
}

/// A command line (without the program name) through this parser.
fn parse_job(argv: &[String]) -> Result<launch::Job, clap::Error> {
    Cli::try_parse_from(std::iter::once("noftl").chain(argv.iter().map(String::as_str))).map(
        |cli| {
            launch::Job::new(Parsed {
                argv: argv.to_vec(),
                cli,
            })
        },
    )
}

/// A job from `parse_job` through this dispatch, on this thread, its command line recorded for
/// the result files it writes.
fn run_job(job: launch::Job) -> anyhow::Result<()> {
    match job.take::<Parsed>() {
        Ok(p) => {
            lab::results::set_command(&p.argv);
            executor::set_argv(&p.argv);
            run(p.cli)
        }
        Err(_) => anyhow::bail!("not a command line parsed by noftl's parser"),
    }
}

fn job_cli(job: &launch::Job) -> Option<&Cli> {
    job.get::<Parsed>().map(|p| &p.cli)
}

/// The device arguments of io, bench tpcb, tatp and tpcc (what a sweep sizes a job by).
fn job_device(job: &launch::Job) -> Option<&common::DeviceArgs> {
    match &job_cli(job)?.command {
        Command::Io(a) => Some(&a.target.device),
        Command::Bench(bench::BenchCommand::Tpcb(b) | bench::BenchCommand::Tatp(b)) => {
            Some(&b.device)
        }
        Command::Bench(bench::BenchCommand::Tpcc(t)) => Some(&t.run.device),
        _ => None,
    }
}

/// The arguments of an `iaa compare`.
fn job_iaa_compare(job: &launch::Job) -> Option<&iaa::CompareArgs> {
    match &job_cli(job)?.command {
        Command::Iaa(iaa::IaaCommand::Compare(a)) => Some(a),
        _ => None,
    }
}

#[cfg(test)]
mod surface_tests;

#[cfg(test)]
mod tests {
    //! Random argument vectors through the CLI parser and the config loader: refused or
    //! accepted, never a panic (a panic on user input is a bug).
    use super::*;
    use proptest::prelude::*;

    const WORDS: &[&str] = &[
        "device",
        "show",
        "presets",
        "io",
        "serve",
        "bench",
        "tpcb",
        "tpcc",
        "tatp",
        "crashtest",
        "compare",
        "sweep",
        "plot",
        "ftl",
        "memory",
        "--preset",
        "--set",
        "--config",
        "--target",
        "--storage",
        "--scale",
        "--terminals",
        "--txns",
        "--seeds",
        "--ops",
        "--qd",
        "--bs",
        "--buffer-pages",
        "--page-size",
        "--cache",
        "--op",
        "--json",
        "--duration",
        "--clock",
        "--socket",
        "--listen",
        "--max-connections",
        "--image",
        "--path",
        "--force",
        "--workload",
        "--capacity",
        "--rw",
        "--io-bytes",
        "--handshake-timeout",
        "--request-timeout",
        "--idle-timeout",
        "--max-peer-connections",
        "tiny",
        "noftl13",
        "mlc16k",
        "page",
        "dftl",
        "memdisk",
        "native",
        "file",
        "real",
        "none",
        "virtual",
        "-",
        "",
    ];
    const KEYS: &[&str] = &[
        "geometry.channels",
        "geometry.chips_per_channel",
        "geometry.dies_per_chip",
        "geometry.planes_per_die",
        "geometry.blocks_per_plane",
        "geometry.pages_per_block",
        "geometry.page_size_bytes",
        "geometry.oob_size_bytes",
        "seed",
        "cell.nop",
        "timing.read_us",
        "timing.program_us",
        "store",
        "trace_entries",
        "nonsense",
    ];
    const NUMBERS: &[&str] = &[
        "0",
        "1",
        "7",
        "4096",
        "65536",
        "4294967295",
        "4294967296",
        "18446744073709551615",
        "-1",
        "1e309",
        "NaN",
        "2%",
        "150%",
        "4k",
        "16MiB",
        "1T",
        "99999999999999999999",
        "0.5",
    ];

    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::sample::select(WORDS).prop_map(String::from),
            proptest::sample::select(NUMBERS).prop_map(String::from),
            (
                proptest::sample::select(KEYS),
                proptest::sample::select(NUMBERS)
            )
                .prop_map(|(k, v)| format!("{k}={v}")),
            "[ -~]{0,12}",
        ]
    }

    /// The device arguments a parsed command carries, if any.
    fn device_args(c: &Command) -> Option<&common::DeviceArgs> {
        match c {
            Command::Io(a) => Some(&a.target.device),
            Command::Serve(a) => Some(&a.target.device),
            Command::Bench(bench::BenchCommand::Tpcb(b) | bench::BenchCommand::Tatp(b)) => {
                Some(&b.device)
            }
            Command::Bench(bench::BenchCommand::Tpcc(t)) => Some(&t.run.device),
            Command::Bench(bench::BenchCommand::Tpch(t)) => Some(&t.device),
            _ => None,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

        #[test]
        fn random_argument_vectors_never_panic(args in proptest::collection::vec(token(), 0..8)) {
            let argv = std::iter::once("noftl".to_string()).chain(args);
            if let Ok(cli) = Cli::try_parse_from(argv) {
                if let Some(d) = device_args(&cli.command) {
                    let _ = d.load();
                }
            }
        }

        #[test]
        fn random_config_overrides_never_panic(
            preset in proptest::sample::select(nand::PRESETS.iter().map(|p| p.0).collect::<Vec<_>>()),
            sets in proptest::collection::vec(
                (proptest::sample::select(KEYS), proptest::sample::select(NUMBERS))
                    .prop_map(|(k, v)| format!("{k}={v}")), 0..4),
        ) {
            let d = common::DeviceArgs { preset: preset.to_string(), config: None, set: sets };
            let _ = d.load();
        }
    }
}
