//! `noftl`: the command line of the NAND emulator, the FTLs, the engine and the benchmarks.

mod cli;
mod targets;

use clap::Parser;

fn main() {
    // A reader that goes away (`noftl ... --json - | head`) ends the program quietly, as it does
    // every Unix tool: Rust ignores SIGPIPE by default, so `println!` would panic on EPIPE.
    // SAFETY: restoring the default disposition of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args = cli::Cli::parse();
    if let Err(e) = cli::run(args) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
