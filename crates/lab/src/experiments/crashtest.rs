//! The deterministic crash test over many seeds (see kits::crash), run by `noftl crashtest`:
//! of TPC-B (`workload` tpcb, kits::crash) or TPC-C (tpcc, kits::tpcc::crash: a reduced
//! population, acknowledged New-Orders and the clause 3.3.2 conditions checked), on every
//! storage below, or of the IAA workload (iaa, kits::crash_iaa: random Insert, Delete and
//! Update queries with IAA and U2DI on, rows moving into the GC victim's pages). The report is
//! the same for every workload (`workload` names it).
//!
//! `storage` memdisk (or crashdisk) runs on the crash disk: a RAM device with a volatile write
//! cache, power cuts and I/O errors at the page-store seam. page|dftl|fast|block runs the FTL
//! on emulated flash: the emulator's fault plan cuts power during a random flash operation (or
//! fails one on the media), the FTL recovers from the flash, the engine restarts on top.
//! native runs the NoFTL store on emulated flash (kits::crash_native). `amf` (which the engine
//! cannot run on) and any FTL that cannot hand its flash back (`BlockDevice::into_nand`) are
//! refused up front with the reason ([`prepare`]), as are options the storage cannot honour
//! (`torn` off the crash disk) and bad page sizes.

use std::collections::BTreeMap;

use anyhow::bail;
use kits::crash::{
    crash_once, CrashOptions, CrashOutcome, Fault, FlashMedium, Medium, NativeDevice,
};
use kits::tpcb::TpcbConfig;
use kits::tpcc::crash::{crash_tpcc_once, TpccCrashOptions};
use serde::Serialize;

use crate::device::DeviceSpec;
use crate::limits;
use crate::stores::{IpaRegion, LogRegion};

/// The flash device of a crash test on flash (FTLs and native).
#[derive(Debug, Clone)]
pub enum Device {
    /// The crash test's own (the tiny preset with 12 blocks per plane; native: 8 for TPC-B,
    /// more for TPC-C), with these `KEY=VALUE` overrides applied after its settings.
    Own(Vec<String>),
    /// This device (a preset or a config file, with its overrides).
    Given(DeviceSpec),
}

/// The crash test, as `noftl crashtest`'s flags give it (messages name those flags).
#[derive(Debug, Clone)]
pub struct Spec {
    /// tpcb | tpcc (a reduced TPC-C population: 1 warehouse, 500 items, 20 customers per
    /// district) | iaa (Insert/Delete/Update with IAA and U2DI on).
    pub workload: String,
    /// The store: memdisk (the crash disk) | page | dftl | dftl-orig | fast | block (an FTL on
    /// emulated flash) | native (NoFTL).
    pub storage: String,
    /// DFTL: fraction of the page mappings cached (0.02 = 2%).
    pub cache: f64,
    /// Crash runs, one per seed (each seed places the fault and drives the workload).
    pub seeds: u64,
    /// The first seed; the runs use `first_seed .. first_seed + seeds - 1`.
    pub first_seed: u64,
    /// power | io | paired | mixed (native: on the aged device either way, kits::crash_native)
    pub fault: String,
    /// DB page size in bytes: 4096, 8192 or 16384 (the larger make torn pages possible).
    pub page_size: usize,
    /// Crash disk: tear unflushed pages at sector granularity (turns full-page writes on).
    pub torn: bool,
    /// Also cut power during the first recovery.
    pub recovery_crash: bool,
    /// Terminals (None: tpcb 4, tpcc 2, iaa 2).
    pub terminals: Option<u32>,
    /// Transactions per terminal (None: tpcb 40, tpcc 30, iaa 150).
    pub txns: Option<u64>,
    /// The flash device (FTLs and native; the crash disk has none: `Own` without overrides).
    pub device: Device,
    /// Native: the log in a region of its own, with these CREATE REGION options.
    pub log_region: Option<LogRegion>,
    /// Native: In-Place Appends on every object, in a region with these CREATE REGION options
    /// (`DEFAULT=on` implied). Cuts that land on appends are counted as `partialprogram host`.
    pub ipa: Option<IpaRegion>,
    /// The canary: acknowledge commits before the log force (the test must fail).
    pub canary: bool,
}

impl Default for Spec {
    /// The CLI's defaults (`noftl crashtest` without flags): TPC-B on the crash disk, 100 power
    /// cuts from seed 0, 4 KiB pages.
    fn default() -> Self {
        Spec {
            workload: "tpcb".into(),
            storage: "memdisk".into(),
            cache: 0.02,
            seeds: 100,
            first_seed: 0,
            fault: "power".into(),
            page_size: 4096,
            torn: false,
            recovery_crash: false,
            terminals: None,
            txns: None,
            device: Device::Own(Vec::new()),
            log_region: None,
            ipa: None,
            canary: false,
        }
    }
}

/// A seed whose recovery failed verification.
#[derive(Debug, Serialize)]
pub struct Failure {
    pub seed: u64,
    pub violations: Vec<String>,
}

/// The crash test's report (the JSON `noftl crashtest` writes).
#[derive(Debug, Serialize)]
pub struct CrashReport {
    pub workload: String,
    pub storage: String,
    pub fault: String,
    pub page_bytes: usize,
    pub seeds: u64,
    pub verified: u64,
    pub faults_inside_workload: u64,
    /// Faults the engine saw as an error (the rest the device absorbed, or came after the run).
    pub errors_reported: u64,
    /// Flash: how many faults hit each kind of flash operation ("program gc", ...; on native,
    /// "program mapping" is a map checkpoint page and "program meta" a master record).
    pub faults_landed_on: BTreeMap<String, u64>,
    /// With `recovery_crash`: second cuts that fell inside the restart.
    pub recovery_cuts_inside_restart: u64,
    /// With `recovery_crash`, native (and TPC-C on flash): how many second cuts hit each kind
    /// of flash operation.
    pub recovery_cuts_landed_on: BTreeMap<String, u64>,
    pub failures: Vec<Failure>,
}

const TORN_OFF_DISK: &str =
    "--torn is for the crash disk: on flash, the cut tears the page being programmed by itself";

fn medium(spec: &Spec) -> anyhow::Result<Medium> {
    if spec.ipa.is_some() && spec.storage != "native" {
        bail!(
            "--ipa runs In-Place Appends on the native store; --storage is {}",
            spec.storage
        );
    }
    if spec.log_region.is_some() && spec.storage != "native" {
        bail!(
            "--log-region places the native store's log; --storage is {}",
            spec.storage
        );
    }
    let device_flags = match &spec.device {
        Device::Own(set) => !set.is_empty(),
        Device::Given(_) => true,
    };
    Ok(match spec.storage.as_str() {
        "memdisk" | "crashdisk" if device_flags => {
            bail!("--preset, --config and --set choose a flash device; the crash disk (memdisk) has none")
        }
        "memdisk" | "crashdisk" => Medium::CrashDisk,
        kind if ftl::options::KINDS.contains(&kind) => {
            if spec.torn {
                bail!(TORN_OFF_DISK);
            }
            let mut m = flash_medium(kind, spec)?;
            m.ftl.cache_fraction = spec.cache;
            m.ftl.validate()?;
            Medium::Flash(m)
        }
        "native" => {
            if spec.torn {
                bail!(TORN_OFF_DISK);
            }
            Medium::Native(native_device(spec)?)
        }
        other => bail!("crashtest runs on memdisk (the crash disk), an FTL on flash (page, dftl, dftl-orig, fast, block) or native, not '{other}'"),
    })
}

/// The FTL medium on the device the spec names (the crash test's own by default).
fn flash_medium(kind: &str, spec: &Spec) -> anyhow::Result<FlashMedium> {
    Ok(match &spec.device {
        Device::Own(set) => FlashMedium::with_overrides(kind, set)?,
        Device::Given(d) => FlashMedium::on_device(kind, d.load()?)?,
    })
}

/// The native store's device and regions.
fn native_device(spec: &Spec) -> anyhow::Result<NativeDevice> {
    let (device, overrides) = match &spec.device {
        Device::Own(set) => (None, set.clone()),
        Device::Given(d) => (Some(d.load()?), Vec::new()),
    };
    Ok(NativeDevice {
        device,
        overrides,
        log_region: spec.log_region.clone().map(|r| r.0),
        ipa_region: spec.ipa.clone().map(|r| r.0),
    })
}

/// One workload's options.
// One per crash test: the size of the options costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Options {
    Tpcb(CrashOptions),
    Iaa(CrashOptions),
    Tpcc(TpccCrashOptions),
}

/// A crash test set up (every option checked, the device accepted) before the first seed runs.
#[derive(Debug)]
pub struct Job {
    spec: Spec,
    options: Options,
}

/// The crash test of `spec`, every option checked and the medium built; a native device the
/// store cannot run on refused, before the first seed.
pub fn prepare(spec: &Spec) -> anyhow::Result<Job> {
    let fault = checked(spec)?;
    let medium = medium(spec)?;
    if fault.fails_paired_program() {
        check_paired(&medium, fault)?;
    }
    let options = options(spec, medium, fault)?;
    let job = Job {
        spec: spec.clone(),
        options,
    };
    job.check()?;
    Ok(job)
}

/// The whole crash test: [`prepare`], then every seed ([`Job::run`]).
pub fn run(spec: &Spec, on_seed_done: &mut dyn FnMut()) -> anyhow::Result<CrashReport> {
    prepare(spec)?.run(on_seed_done)
}

/// `--fault paired` and `mixed` need upper pages to fail: flash whose chips store 2 or 3 bits
/// per cell.
fn check_paired(medium: &Medium, fault: Fault) -> anyhow::Result<()> {
    let flag = if fault == Fault::Mixed {
        "mixed"
    } else {
        "paired"
    };
    let cell = match medium {
        Medium::CrashDisk => None,
        Medium::Flash(m) => Some(m.device.cell.native),
        Medium::Native(n) => Some(match &n.device {
            Some(d) => d.cell.native,
            None => {
                kits::crash_native::tiny_device(0, 2, &n.overrides)?
                    .config()
                    .cell
                    .native
            }
        }),
    };
    match cell {
        Some(nand::CellMode::Mlc | nand::CellMode::Tlc) => Ok(()),
        Some(c) => bail!("--fault {flag} fails an upper-page program, and {c} chips have none: choose an MLC or TLC device (--preset mlc16k or tlc16k)"),
        None => bail!("--fault {flag} fails an upper-page program on MLC/TLC flash; the crash disk has none: use an FTL or --storage native with --preset mlc16k or tlc16k"),
    }
}

/// The fault, seeds, terminals, transactions and page size checked; the fault parsed.
fn checked(spec: &Spec) -> anyhow::Result<Fault> {
    let fault = match spec.fault.as_str() {
        "power" => Fault::PowerCut,
        "io" => Fault::IoError,
        "paired" => Fault::PairedProgram,
        "mixed" => Fault::Mixed,
        other => bail!("--fault is power, io, paired or mixed, not '{other}'"),
    };

    limits::at_least_one(
        "--seeds",
        spec.seeds,
        "a crash test of 0 seeds verifies nothing",
    )?;
    spec.first_seed.checked_add(spec.seeds).ok_or_else(|| {
        anyhow::anyhow!(
            "--first-seed {} + --seeds {} overflows 64 bits",
            spec.first_seed,
            spec.seeds
        )
    })?;
    if let Some(t) = spec.terminals {
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
    if let Some(n) = spec.txns {
        limits::at_least_one(
            "--txns",
            n,
            "a crash test of 0 transactions per terminal cuts nothing",
        )?;
    }
    if ![4096, 8192, 16384].contains(&spec.page_size) {
        bail!("--page-size is 4096, 8192 or 16384, not {}", spec.page_size);
    }
    Ok(fault)
}

/// The workload's crash options on `medium`, with its defaults where the spec leaves them.
fn options(spec: &Spec, medium: Medium, fault: Fault) -> anyhow::Result<Options> {
    Ok(match spec.workload.as_str() {
        "tpcb" => Options::Tpcb(CrashOptions {
            medium,
            fault,
            page_bytes: spec.page_size,
            tear_sectors: spec.torn,
            crash_during_recovery: spec.recovery_crash,
            unsafe_ack_before_force: spec.canary,
            terminals: spec.terminals.unwrap_or(4),
            txns_per_terminal: spec.txns.unwrap_or(40),
            tpcb: TpcbConfig {
                scale: 2,
                tellers_per_branch: 10,
                accounts_per_branch: 300,
            },
            ..CrashOptions::default()
        }),
        "tpcc" => {
            let d = TpccCrashOptions::default();
            Options::Tpcc(TpccCrashOptions {
                medium,
                fault,
                page_bytes: spec.page_size,
                tear_sectors: spec.torn,
                crash_during_recovery: spec.recovery_crash,
                unsafe_ack_before_force: spec.canary,
                terminals: spec.terminals.unwrap_or(d.terminals),
                txns_per_terminal: spec.txns.unwrap_or(d.txns_per_terminal),
                ..d
            })
        }
        "iaa" => Options::Iaa(CrashOptions {
            medium,
            fault,
            page_bytes: spec.page_size,
            tear_sectors: spec.torn,
            crash_during_recovery: spec.recovery_crash,
            unsafe_ack_before_force: spec.canary,
            terminals: spec.terminals.unwrap_or(2),
            txns_per_terminal: spec.txns.unwrap_or(150),
            ..CrashOptions::default()
        }),
        other => bail!("crashtest runs --workload tpcb, tpcc or iaa, not '{other}'"),
    })
}

impl Job {
    fn medium(&self) -> &Medium {
        match &self.options {
            Options::Tpcb(o) | Options::Iaa(o) => &o.medium,
            Options::Tpcc(o) => &o.medium,
        }
    }

    /// Refuses a native device the store cannot run on, before the first seed.
    fn check(&self) -> storage::Result<()> {
        match &self.options {
            Options::Tpcb(o) | Options::Iaa(o) => kits::crash::check_native(o),
            Options::Tpcc(o) => kits::tpcc::crash::check_native(o),
        }
    }

    fn once(&self, seed: u64) -> storage::Result<CrashOutcome> {
        match &self.options {
            Options::Tpcb(o) => crash_once(seed, o),
            Options::Iaa(o) => kits::crash_iaa::crash_iaa_once(seed, o),
            Options::Tpcc(o) => crash_tpcc_once(seed, o),
        }
    }

    /// Every seed in turn: a crash, recovery and verification each, counted in the report
    /// (a failed verification is a `Failure` in it, not an error). `on_seed_done` is called
    /// after each seed, for a progress bar.
    pub fn run(&self, on_seed_done: &mut dyn FnMut()) -> anyhow::Result<CrashReport> {
        let spec = &self.spec;
        let mut rep = CrashReport {
            workload: spec.workload.clone(),
            storage: self.medium().name().to_string(),
            fault: spec.fault.clone(),
            page_bytes: spec.page_size,
            seeds: spec.seeds,
            verified: 0,
            faults_inside_workload: 0,
            errors_reported: 0,
            faults_landed_on: BTreeMap::new(),
            recovery_cuts_inside_restart: 0,
            recovery_cuts_landed_on: BTreeMap::new(),
            failures: vec![],
        };
        for s in spec.first_seed..spec.first_seed + spec.seeds {
            let out = self.once(s)?;
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
            on_seed_done();
        }
        Ok(rep)
    }
}
