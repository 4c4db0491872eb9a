//! `noftl`: the command line of the NAND emulator, the FTLs, the engine and the benchmarks.

mod cli;
mod targets;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    if let Err(e) = cli::run(args) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
