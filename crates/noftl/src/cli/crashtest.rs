//! `noftl crashtest`: the deterministic crash test over many seeds (see kits::crash).
//!
//! Today it runs on the crash disk (a RAM device with a volatile write cache and seeded power
//! cuts at the page-store seam): `--storage memdisk` or `block`. The FTL targets join when they
//! are merged and expose the emulator's FaultPlan through the target builder.

use anyhow::bail;
use clap::Args;
use kits::crash::{crash_once, CrashOptions, Fault};
use kits::tpcb::TpcbConfig;
use serde::Serialize;

#[derive(Debug, Args)]
pub struct CrashtestArgs {
    #[arg(long, default_value = "tpcb")]
    pub workload: String,
    /// memdisk | block (the crash disk); FTL targets once merged.
    #[arg(long, default_value = "memdisk")]
    pub storage: String,
    #[arg(long, default_value_t = 100)]
    pub seeds: u64,
    #[arg(long, default_value_t = 0)]
    pub first_seed: u64,
    /// power | io
    #[arg(long, default_value = "power")]
    pub fault: String,
    /// DB page size (8192 or 16384 make torn pages possible).
    #[arg(long, default_value_t = 4096)]
    pub page_size: usize,
    /// Tear unflushed pages at sector granularity (turns full-page writes on).
    #[arg(long)]
    pub torn: bool,
    /// Also cut power during the first recovery.
    #[arg(long)]
    pub recovery_crash: bool,
    #[arg(long, default_value_t = 4)]
    pub terminals: u32,
    #[arg(long, default_value_t = 40)]
    pub txns: u64,
    /// The canary: acknowledge commits before the log force (the test must fail).
    #[arg(long, hide = true)]
    pub canary: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct Failure {
    seed: u64,
    violations: Vec<String>,
}

#[derive(Debug, Serialize)]
struct CrashReport {
    workload: String,
    storage: String,
    fault: String,
    seeds: u64,
    verified: u64,
    faults_inside_workload: u64,
    failures: Vec<Failure>,
}

pub fn run(args: CrashtestArgs) -> anyhow::Result<()> {
    if args.workload != "tpcb" {
        bail!("crashtest runs --workload tpcb (TPC-C comes with the next issue)");
    }
    if !matches!(args.storage.as_str(), "memdisk" | "block" | "crashdisk") {
        bail!("crashtest on '{}' needs the FTL targets' fault plan, which is not wired yet; use --storage memdisk", args.storage);
    }
    let fault = match args.fault.as_str() {
        "power" => Fault::PowerCut,
        "io" => Fault::IoError,
        other => bail!("--fault is power or io, not '{other}'"),
    };
    let o = CrashOptions {
        fault,
        page_bytes: args.page_size,
        tear_sectors: args.torn,
        crash_during_recovery: args.recovery_crash,
        unsafe_ack_before_force: args.canary,
        terminals: args.terminals.max(1),
        txns_per_terminal: args.txns.max(1),
        tpcb: TpcbConfig { scale: 2, tellers_per_branch: 10, accounts_per_branch: 300 },
        ..CrashOptions::default()
    };
    let mut rep = CrashReport { workload: args.workload.clone(), storage: "crashdisk".into(), fault: args.fault.clone(), seeds: args.seeds, verified: 0, faults_inside_workload: 0, failures: vec![] };
    for s in args.first_seed..args.first_seed + args.seeds {
        let out = crash_once(s, &o)?;
        rep.faults_inside_workload += u64::from(out.fault_hit);
        if out.verified() {
            rep.verified += 1;
        } else {
            rep.failures.push(Failure { seed: s, violations: out.violations });
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
    } else {
        println!("crashtest tpcb on {} ({} faults): {} of {} recoveries verified ({} faults fell inside the workload)", rep.storage, rep.fault, rep.verified, rep.seeds, rep.faults_inside_workload);
        for f in &rep.failures {
            println!("  seed {}: {}", f.seed, f.violations.join("; "));
        }
    }
    if !rep.failures.is_empty() {
        bail!("{} of {} recoveries failed verification", rep.failures.len(), rep.seeds);
    }
    Ok(())
}
