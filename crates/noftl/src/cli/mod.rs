//! Command-line verbs. One module per verb; shared argument groups in `common`.

pub mod common;
pub mod device;
pub mod ftl;
pub mod io;
pub mod serve;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "noftl", version, about = "NAND flash emulator, FTLs and a flash-aware storage engine, with the benchmarks to compare them")]
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
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Device(c) => device::run(c),
        Command::Io(a) => io::run(a),
        Command::Ftl(c) => ftl::run(c),
        Command::Serve(a) => serve::run(a),
    }
}
