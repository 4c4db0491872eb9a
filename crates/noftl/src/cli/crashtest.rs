//! `noftl crashtest`: the deterministic crash test over many seeds (see kits::crash), of TPC-B
//! (`--workload tpcb`, kits::crash) or TPC-C (`--workload tpcc`, kits::tpcc::crash: a reduced
//! population, acknowledged New-Orders and the clause 3.3.2 conditions checked), on every
//! storage below, or of the IAA workload (`--workload iaa`, kits::crash_iaa: random Insert,
//! Delete and Update queries with IAA and U2DI on, rows moving into the GC victim's pages).
//! The JSON report is the same for every workload (`workload` names it).
//!
//! `--storage memdisk` (or `crashdisk`) runs on the crash disk: a RAM device with a volatile
//! write cache, power cuts and I/O errors at the page-store seam. `--storage page|dftl|fast|block`
//! runs the FTL on emulated flash: the emulator's fault plan cuts power during a random flash
//! operation (or fails one on the media), the FTL recovers from the flash, the engine restarts
//! on top. `--storage native` runs the NoFTL store on emulated flash (kits::crash_native). `amf`
//! (which the engine cannot run on) and any FTL that cannot hand its flash back
//! (`BlockDevice::into_nand`) are refused up front with the reason, as are flags the storage
//! cannot honour (`--torn` off the crash disk) and bad page sizes.

use std::collections::BTreeMap;

use anyhow::bail;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use kits::crash::{
    crash_once, CrashOptions, CrashOutcome, Fault, FlashMedium, Medium, NativeDevice,
};
use kits::tpcb::TpcbConfig;
use kits::tpcc::crash::{crash_tpcc_once, TpccCrashOptions};
use serde::Serialize;

use super::common::parse_percent;
use lab::limits;

#[derive(Debug, Args)]
pub struct CrashtestArgs {
    /// tpcb | tpcc (a reduced TPC-C population: 1 warehouse, 500 items, 20 customers per
    /// district) | iaa (Insert/Delete/Update with IAA and U2DI on).
    #[arg(long, default_value = "tpcb")]
    pub workload: String,
    /// The store: memdisk (the crash disk) | page | dftl | dftl-orig | fast | block (an FTL on emulated flash) | native (NoFTL).
    #[arg(long = "store", visible_alias = "storage", default_value = "memdisk")]
    pub storage: String,
    /// DFTL: fraction of the page mappings cached.
    #[arg(long, value_parser = parse_percent, default_value = "2%")]
    pub cache: f64,
    /// Crash runs, one per seed (each seed places the fault and drives the workload).
    #[arg(long, default_value_t = 100)]
    pub seeds: u64,
    /// The first seed; the runs use --first-seed .. --first-seed + --seeds - 1.
    #[arg(long, default_value_t = 0)]
    pub first_seed: u64,
    /// power | io
    #[arg(long, default_value = "power")]
    pub fault: String,
    /// DB page size: 4096, 8192 or 16384 (the larger make torn pages possible).
    #[arg(long, default_value_t = 4096)]
    pub page_size: usize,
    /// Crash disk: tear unflushed pages at sector granularity (turns full-page writes on).
    #[arg(long)]
    pub torn: bool,
    /// Also cut power during the first recovery.
    #[arg(long)]
    pub recovery_crash: bool,
    /// Terminals [default: tpcb 4, tpcc 2, iaa 2].
    #[arg(long)]
    pub terminals: Option<u32>,
    /// Transactions per terminal [default: tpcb 40, tpcc 30, iaa 150].
    #[arg(long)]
    pub txns: Option<u64>,
    /// Flash (FTLs and native): the device, a preset instead of the crash test's own (the
    /// tiny preset with 12 blocks per plane; native: 8 for TPC-B, more for TPC-C). Shrink large presets with --set, e.g. --preset mlc16k --set
    /// geometry.blocks_per_plane=16 --set geometry.pages_per_block=64.
    #[arg(long, conflicts_with = "config")]
    pub preset: Option<String>,
    /// Flash: a device config file in the presets' TOML format.
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    /// Flash: override a device config field, e.g. --set cell.native=mlc (applied after the
    /// crash test's own settings, or to --preset / --config).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Native: the log in a region of its own, with these CREATE REGION options
    /// (`KEY=VALUE,...`), e.g. `MAX_CHIPS=1,CELL_MODE=pSLC` on MLC/TLC chips.
    #[arg(long, value_parser = lab::stores::parse_log_region)]
    pub log_region: Option<lab::stores::LogRegion>,
    /// Native: In-Place Appends on every object, in a region with these CREATE REGION options
    /// (`DEFAULT=on` implied), e.g. `MAX_CHIPS=2,IPA_MODE=SLC,IPA_SCHEME=2x3` on the crash
    /// test's SLC device. Cuts that land on appends are counted as `partialprogram host`.
    #[arg(long, value_parser = lab::stores::parse_ipa_region)]
    pub ipa: Option<lab::stores::IpaRegion>,
    /// The canary: acknowledge commits before the log force (the test must fail).
    #[arg(long, hide = true)]
    pub canary: bool,
    /// Write the JSON result to this file ("-" or no value: standard output, instead of the
    /// human report).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<std::path::PathBuf>,
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
    page_bytes: usize,
    seeds: u64,
    verified: u64,
    faults_inside_workload: u64,
    /// Faults the engine saw as an error (the rest the device absorbed, or came after the run).
    errors_reported: u64,
    /// Flash: how many faults hit each kind of flash operation ("program gc", ...).
    faults_landed_on: BTreeMap<String, u64>,
    /// With --recovery-crash: second cuts that fell inside the restart.
    recovery_cuts_inside_restart: u64,
    /// With --recovery-crash, native (and TPC-C on flash): how many second cuts hit each kind of
    /// flash operation.
    recovery_cuts_landed_on: BTreeMap<String, u64>,
    failures: Vec<Failure>,
}

const TORN_OFF_DISK: &str =
    "--torn is for the crash disk: on flash, the cut tears the page being programmed by itself";

fn medium(args: &CrashtestArgs) -> anyhow::Result<Medium> {
    if args.ipa.is_some() && args.storage != "native" {
        bail!(
            "--ipa runs In-Place Appends on the native store; --storage is {}",
            args.storage
        );
    }
    if args.log_region.is_some() && args.storage != "native" {
        bail!(
            "--log-region places the native store's log; --storage is {}",
            args.storage
        );
    }
    let device_flags = args.preset.is_some() || args.config.is_some() || !args.set.is_empty();
    Ok(match args.storage.as_str() {
        "memdisk" | "crashdisk" if device_flags => {
            bail!("--preset, --config and --set choose a flash device; the crash disk (memdisk) has none")
        }
        "memdisk" | "crashdisk" => Medium::CrashDisk,
        kind if ftl::options::KINDS.contains(&kind) => {
            if args.torn {
                bail!(TORN_OFF_DISK);
            }
            let mut m = flash_medium(kind, args)?;
            m.ftl.cache_fraction = args.cache;
            m.ftl.validate()?;
            Medium::Flash(m)
        }
        "native" => {
            if args.torn {
                bail!(TORN_OFF_DISK);
            }
            Medium::Native(match (&args.preset, &args.config) {
                (None, None) => NativeDevice {
                    device: None,
                    overrides: args.set.clone(),
                    log_region: args.log_region.clone().map(|r| r.0),
                    ipa_region: args.ipa.clone().map(|r| r.0),
                },
                _ => NativeDevice {
                    device: Some(device_args(args).load()?),
                    overrides: Vec::new(),
                    log_region: args.log_region.clone().map(|r| r.0),
                    ipa_region: args.ipa.clone().map(|r| r.0),
                },
            })
        }
        other => bail!("crashtest runs on memdisk (the crash disk), an FTL on flash (page, dftl, dftl-orig, fast, block) or native, not '{other}'"),
    })
}

/// The FTL medium on the device the flags name (the crash test's own by default).
fn flash_medium(kind: &str, args: &CrashtestArgs) -> anyhow::Result<FlashMedium> {
    Ok(match (&args.preset, &args.config) {
        (None, None) => FlashMedium::with_overrides(kind, &args.set)?,
        _ => FlashMedium::on_device(kind, device_args(args).load()?)?,
    })
}

/// The device flags as the other commands take them (a preset, a config file, overrides).
fn device_args(args: &CrashtestArgs) -> super::common::DeviceArgs {
    super::common::DeviceArgs {
        preset: args
            .preset
            .clone()
            .unwrap_or_else(|| nand::DEFAULT_PRESET.to_string()),
        config: args.config.clone(),
        set: args.set.clone(),
    }
}

/// One workload's crash test, set up (every option checked) before the first seed runs.
// One per command: the size of the options costs nothing.
#[allow(clippy::large_enum_variant)]
enum Job {
    Tpcb(CrashOptions),
    Iaa(CrashOptions),
    Tpcc(TpccCrashOptions),
}

impl Job {
    fn new(args: &CrashtestArgs) -> anyhow::Result<Job> {
        let fault = match args.fault.as_str() {
            "power" => Fault::PowerCut,
            "io" => Fault::IoError,
            other => bail!("--fault is power or io, not '{other}'"),
        };
        limits::at_least_one(
            "--seeds",
            args.seeds,
            "a crash test of 0 seeds verifies nothing",
        )?;
        args.first_seed.checked_add(args.seeds).ok_or_else(|| {
            anyhow::anyhow!(
                "--first-seed {} + --seeds {} overflows 64 bits",
                args.first_seed,
                args.seeds
            )
        })?;
        if let Some(t) = args.terminals {
            limits::at_least_one(
                "--terminals",
                u64::from(t),
                "nobody would run a transaction",
            )?;
            limits::MemoryPlan::new()
                .add(
                    format!("{t} terminals"),
                    u64::from(t).saturating_mul(limits::TERMINAL_BYTES),
                )
                .check("use fewer --terminals")?;
        }
        if let Some(n) = args.txns {
            limits::at_least_one(
                "--txns",
                n,
                "a crash test of 0 transactions per terminal cuts nothing",
            )?;
        }
        if ![4096, 8192, 16384].contains(&args.page_size) {
            bail!("--page-size is 4096, 8192 or 16384, not {}", args.page_size);
        }
        let medium = medium(args)?;
        Ok(match args.workload.as_str() {
            "tpcb" => Job::Tpcb(CrashOptions {
                medium,
                fault,
                page_bytes: args.page_size,
                tear_sectors: args.torn,
                crash_during_recovery: args.recovery_crash,
                unsafe_ack_before_force: args.canary,
                terminals: args.terminals.unwrap_or(4),
                txns_per_terminal: args.txns.unwrap_or(40),
                tpcb: TpcbConfig {
                    scale: 2,
                    tellers_per_branch: 10,
                    accounts_per_branch: 300,
                },
                ..CrashOptions::default()
            }),
            "tpcc" => {
                let d = TpccCrashOptions::default();
                Job::Tpcc(TpccCrashOptions {
                    medium,
                    fault,
                    page_bytes: args.page_size,
                    tear_sectors: args.torn,
                    crash_during_recovery: args.recovery_crash,
                    unsafe_ack_before_force: args.canary,
                    terminals: args.terminals.unwrap_or(d.terminals),
                    txns_per_terminal: args.txns.unwrap_or(d.txns_per_terminal),
                    ..d
                })
            }
            "iaa" => Job::Iaa(CrashOptions {
                medium,
                fault,
                page_bytes: args.page_size,
                tear_sectors: args.torn,
                crash_during_recovery: args.recovery_crash,
                unsafe_ack_before_force: args.canary,
                terminals: args.terminals.unwrap_or(2),
                txns_per_terminal: args.txns.unwrap_or(150),
                ..CrashOptions::default()
            }),
            other => bail!("crashtest runs --workload tpcb, tpcc or iaa, not '{other}'"),
        })
    }
    fn medium(&self) -> &Medium {
        match self {
            Job::Tpcb(o) | Job::Iaa(o) => &o.medium,
            Job::Tpcc(o) => &o.medium,
        }
    }
    /// Refuses a native device the store cannot run on, before the first seed.
    fn check(&self) -> storage::Result<()> {
        match self {
            Job::Tpcb(o) | Job::Iaa(o) => kits::crash::check_native(o),
            Job::Tpcc(o) => kits::tpcc::crash::check_native(o),
        }
    }
    fn once(&self, seed: u64) -> storage::Result<CrashOutcome> {
        match self {
            Job::Tpcb(o) => crash_once(seed, o),
            Job::Iaa(o) => kits::crash_iaa::crash_iaa_once(seed, o),
            Job::Tpcc(o) => crash_tpcc_once(seed, o),
        }
    }
}

pub fn run(args: CrashtestArgs) -> anyhow::Result<()> {
    let job = Job::new(&args)?;
    job.check()?;
    let mut rep = CrashReport {
        workload: args.workload.clone(),
        storage: job.medium().name().to_string(),
        fault: args.fault.clone(),
        page_bytes: args.page_size,
        seeds: args.seeds,
        verified: 0,
        faults_inside_workload: 0,
        errors_reported: 0,
        faults_landed_on: BTreeMap::new(),
        recovery_cuts_inside_restart: 0,
        recovery_cuts_landed_on: BTreeMap::new(),
        failures: vec![],
    };
    let bar = ProgressBar::new(args.seeds);
    bar.set_style(
        ProgressStyle::with_template("crashtest {wide_bar} {pos}/{len} seeds ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    for s in args.first_seed..args.first_seed + args.seeds {
        let out = job.once(s)?;
        rep.faults_inside_workload += u64::from(out.fault_hit);
        rep.errors_reported += u64::from(out.error_reported.is_some());
        rep.recovery_cuts_inside_restart += u64::from(out.recovery_cut_hit);
        if let Some(op) = out.fault_landed_on.clone() {
            *rep.faults_landed_on.entry(op).or_default() += 1;
        }
        if let Some(op) = out.recovery_cut_landed_on.clone() {
            *rep.recovery_cuts_landed_on.entry(op).or_default() += 1;
        }
        if out.verified() {
            rep.verified += 1;
        } else {
            rep.failures.push(Failure {
                seed: s,
                violations: out.violations,
            });
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if super::common::emit_json(args.json.as_deref(), &rep)? {
        println!(
            "crashtest {} on {} ({} faults): {} of {} recoveries verified ({} faults fell inside the workload, {} reached the engine as errors)",
            rep.workload,
            rep.storage, rep.fault, rep.verified, rep.seeds, rep.faults_inside_workload, rep.errors_reported
        );
        if !rep.faults_landed_on.is_empty() {
            let ops: Vec<String> = rep
                .faults_landed_on
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            println!("  faults landed on: {}", ops.join(", "));
        }
        if args.recovery_crash {
            println!(
                "  second cuts inside the restart: {}",
                rep.recovery_cuts_inside_restart
            );
            if !rep.recovery_cuts_landed_on.is_empty() {
                let ops: Vec<String> = rep
                    .recovery_cuts_landed_on
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect();
                println!("  second cuts landed on: {}", ops.join(", "));
            }
        }
        for f in &rep.failures {
            println!("  seed {}: {}", f.seed, f.violations.join("; "));
        }
    }
    if !rep.failures.is_empty() {
        bail!(
            "{} of {} recoveries failed verification",
            rep.failures.len(),
            rep.seeds
        );
    }
    Ok(())
}
