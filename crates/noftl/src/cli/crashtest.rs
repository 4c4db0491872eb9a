//! `noftl crashtest`: the deterministic crash test over many seeds (see kits::crash), of TPC-B,
//! TPC-C or the IAA workload, on the crash disk, an FTL on emulated flash or the native store.
//! This module parses the flags into `lab::experiments::crashtest::Spec` and prints the report
//! (a summary, or JSON); the test itself (media, faults, recovery, verification, what is
//! refused up front) is `lab::experiments::crashtest`'s, whose doc says how it goes.

use anyhow::bail;
use clap::Args;
use lab::experiments::crashtest;

use super::common::parse_percent;

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
    /// power | io (a program, erase or read fails on the media) | paired (the first upper- or
    /// middle-page program from the drawn operation on fails on the media, tearing its word
    /// line's lower pages: MLC/TLC devices) | mixed (that media failure, then a power cut drawn
    /// at or after it: MLC/TLC devices). Native: the device is aged first for all, as the
    /// FTLs' devices are.
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

impl CrashtestArgs {
    /// The crash test these flags name, as the experiment library takes it.
    pub fn spec(&self) -> crashtest::Spec {
        let device = match (&self.preset, &self.config) {
            (None, None) => crashtest::Device::Own(self.set.clone()),
            _ => crashtest::Device::Given(lab::device::DeviceSpec {
                preset: self
                    .preset
                    .clone()
                    .unwrap_or_else(|| nand::DEFAULT_PRESET.to_string()),
                config: self.config.clone(),
                set: self.set.clone(),
            }),
        };
        crashtest::Spec {
            workload: self.workload.clone(),
            storage: self.storage.clone(),
            cache: self.cache,
            seeds: self.seeds,
            first_seed: self.first_seed,
            fault: self.fault.clone(),
            page_size: self.page_size,
            torn: self.torn,
            recovery_crash: self.recovery_crash,
            terminals: self.terminals,
            txns: self.txns,
            device,
            log_region: self.log_region.clone(),
            ipa: self.ipa.clone(),
            canary: self.canary,
        }
    }
}

pub fn run(args: CrashtestArgs) -> anyhow::Result<()> {
    super::common::check_outputs(
        &[("--config", args.config.as_deref())],
        &[args.json.as_deref()],
    )?;
    let job = crashtest::prepare(&args.spec())?;
    let bar = lab::progress::phase("crashtest", args.seeds, "seeds");
    let rep = job.run(&mut || bar.inc(1))?;
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
