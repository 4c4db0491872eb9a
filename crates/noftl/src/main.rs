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
    // The README's test (tests/readme_cli.rs) checks that every command line the README shows
    // parses against this very definition, including lines it cannot afford to run.
    if std::env::var_os("NOFTL_PARSE_ONLY").is_some() {
        return;
    }
    // Result files name the program and the command that wrote them (lab::results).
    lab::results::set_version(cli::VERSION);
    let argv: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    lab::results::set_command(&argv);
    cli::executor::set_argv(&argv);
    cli::progress::install(args.quiet);
    if let Err(e) = cli::run(args) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
