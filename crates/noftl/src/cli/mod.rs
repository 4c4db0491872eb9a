//! Command-line verbs. One module per verb; shared argument groups in `common`.

pub mod bench;
pub mod bench_tatp;
pub mod common;
pub mod compare;
pub mod crashtest;
pub mod device;
pub mod ftl;
pub mod io;
pub mod plot;
pub mod serve;
pub mod sweep;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "noftl",
    version,
    about = "NAND flash emulator, FTLs and a flash-aware storage engine, with the benchmarks to compare them"
)]
pub struct Cli {
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
    /// Benchmarks on the storage engine (TPC-B).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Power cuts and I/O errors during a workload, then recovery and verification.
    Crashtest(crashtest::CrashtestArgs),
    /// Seed 000's Figure 3: the same workload on NoFTL (native), DFTL 2/15/35% and the page FTL.
    Compare(compare::CompareArgs),
    /// Many runs of one verb over a grid of parameters, in parallel (local or Ray), merged into one table.
    Sweep(sweep::SweepArgs),
    /// Figures (SVG) from result files: Fig. 3 bars from `compare` JSON, WAF curves from a sweep.
    Plot(plot::PlotArgs),
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
        Command::Sweep(a) => sweep::run(a),
        Command::Plot(a) => plot::run(a),
    }
}
