//! What an IPA comparison is asked for (`Spec`), and everything its rows share (`Setup`), checked
//! before any row loads: the device, the DB page size, the IPA scheme against the chips' NOP, the
//! workload, the rows, the durations and the region's chips.

use anyhow::bail;
use kits::tatp::TatpConfig;
use kits::tpcb::TpcbConfig;
use kits::tpcc::TpccConfig;
use nand::CellMode;
use storage::ipa::IpaScheme;

use crate::device::DeviceSpec;

/// The device of the default comparison (see `Spec::device`).
pub const DEFAULT_GEOMETRY: [&str; 4] = [
    "geometry.channels=2",
    "geometry.chips_per_channel=2",
    "geometry.blocks_per_plane=32",
    "geometry.pages_per_block=64",
];

/// The most preconditioning a comparison accepts, in device writes: beyond it a run is hours.
pub const MAX_PRECONDITION_DEVICE_WRITES: f64 = 20.0;

/// The configurations a comparison can run.
pub const CONFIGS: [&str; 7] = [
    "baseline",
    "regions",
    "ipa-regions",
    "advised",
    "ipa-advised",
    "global",
    "ipa-global",
];

/// An IPA comparison (`noftl ipa compare`) or the advisor's profiled baseline (`noftl ipa
/// advise`): the flags of both verbs, as plain data.
#[derive(Debug, Clone)]
pub struct Spec {
    /// `tatp`, `tpcb` or `tpcc`.
    pub workload: String,
    /// TATP: subscribers (default 40,000); TPC-B: branches (default 1, with
    /// `accounts_per_branch` accounts each); TPC-C: warehouses (default 1).
    pub scale: Option<u32>,
    /// TPC-B: accounts per branch.
    pub accounts_per_branch: u32,
    /// The device: a preset (mlc16k, tlc16k: the IPA region in pSLC; noftl13, tiny: SLC) with
    /// overrides. Without a `geometry.` override the comparison adds `DEFAULT_GEOMETRY`: 2
    /// channels x 2 chips, 32 blocks per plane of 64 pages (256 MiB of MLC on mlc16k), so that
    /// TATP's default 40,000 subscribers fill the one-chip IPA region enough for its GC to work.
    pub device: DeviceSpec,
    /// DB page size in bytes (None: the device's flash page, clamped to 4-16 KiB, as IPA Table
    /// I's 16 KB pages).
    pub page_size_bytes: Option<usize>,
    /// Spare factor of the store and of its regions, a fraction (0.1 = 10%).
    pub op_fraction: f64,
    /// Chips of the IPA region of `ipa-regions`, `regions` and the advised rows; `ipa-global`
    /// takes every chip but one, which keeps the log and the store's metadata.
    pub region_chips: u32,
    /// The IPA scheme NxM: N appends per page between out-of-place writes, M records each.
    pub scheme: String,
    /// Bytes a delta record is sized for.
    pub record_bytes: u16,
    /// Rows to run, from `CONFIGS` (None: all of them for TATP; baseline, advised, ipa-advised,
    /// global and ipa-global otherwise). Names are trimmed and lower-cased.
    pub configs: Option<Vec<String>>,
    /// Terminals: concurrent transaction streams of each run.
    pub terminals: u32,
    /// A fixed warm-up after the load, virtual time as text (10s, 500ms;
    /// `crate::units::parse_duration_ns`) or `none`, before the preconditioning.
    pub warmup: String,
    /// Preconditioning: the workload runs until the host has written the device over this many
    /// times since it was formatted (the load included), so that GC works before the rounds
    /// (`crate::steady`; the `compare` verb's two device writes).
    pub precondition_device_writes: f64,
    /// One round of the steady-state rule, virtual time as text.
    pub round: String,
    /// The cap on rounds (`crate::steady::MAX_ROUNDS` by default; 0: no rounds, and the rows
    /// say they were not checked for steady state).
    pub max_rounds: u32,
    /// Measured window, virtual time as text.
    pub duration: String,
    /// Runs per row (seeds seed, seed + 1, ...): the throughput's standard deviation.
    pub repeat: u32,
    /// Buffer pool frames (None: 2% of the database's pages, at least 64).
    pub buffer_pages: Option<usize>,
    /// Seed of each row's device, database and transaction inputs (run k of `repeat`: seed + k).
    pub seed: u64,
}

/// A workload the comparison runs: its load and its terminals.
pub(super) enum Workload {
    Tatp(TatpConfig),
    Tpcb(TpcbConfig),
    Tpcc(TpccConfig),
}

impl Workload {
    pub(super) fn pages_estimate(&self, page_bytes: usize) -> u64 {
        match self {
            Workload::Tatp(c) => c.db_pages_estimate(page_bytes),
            Workload::Tpcb(c) => c.db_pages_estimate(page_bytes),
            Workload::Tpcc(c) => c.db_pages_estimate(page_bytes),
        }
    }

    /// The scale the reports name: subscribers, branches or warehouses.
    pub(super) fn scale(&self) -> u32 {
        match self {
            Workload::Tatp(c) => c.subscribers,
            Workload::Tpcb(c) => c.scale,
            Workload::Tpcc(c) => c.warehouses,
        }
    }
}

/// Everything a comparison's rows share, checked before any row loads.
pub(super) struct Setup {
    pub(super) dev: nand::DeviceConfig,
    pub(super) page_bytes: usize,
    pub(super) scheme: IpaScheme,
    pub(super) ipa_mode: &'static str,
    pub(super) nop: u8,
    pub(super) workload: Workload,
    pub(super) configs: Vec<String>,
    pub(super) warmup_ns: u64,
    pub(super) round_ns: u64,
    pub(super) precondition: f64,
    pub(super) max_rounds: u32,
    pub(super) duration_ns: u64,
    pub(super) chips: u32,
    pub(super) ipa_opts: String,
    pub(super) op_percent: u32,
    /// The advisor's tables and scheme (from a profiled baseline run), for the advised rows.
    pub(super) advised: Option<(Vec<String>, IpaScheme)>,
}

pub(super) fn setup(a: &Spec) -> anyhow::Result<Setup> {
    let dev = device(&a.device)?;
    let flash_page = dev.geometry.page_size_bytes as usize;
    let page_bytes = a.page_size_bytes.unwrap_or(flash_page.clamp(4096, 16384));
    let scheme = IpaScheme::parse(&a.scheme, a.record_bytes).map_err(anyhow::Error::msg)?;
    let ipa_mode = if dev.cell.native == CellMode::Slc {
        "SLC"
    } else {
        "pSLC"
    };
    // The region checks, made here so that a bad scheme is refused before any row loads.
    let nop = dev.nop_limit(if ipa_mode == "SLC" {
        CellMode::Slc
    } else {
        CellMode::Pslc
    });
    check_scheme(&scheme, nop, ipa_mode, &a.device.preset, page_bytes)?;
    let workload = workload(a)?;
    let configs = configs(a, &workload)?;
    if a.repeat == 0 || a.terminals == 0 {
        bail!("--repeat and --terminals must be at least 1");
    }
    let warmup_ns = match a.warmup.trim() {
        "none" => 0,
        w => crate::units::parse_duration_ns(w)?,
    };
    let duration_ns = crate::units::parse_duration_ns(&a.duration)?;
    let round_ns = crate::units::parse_duration_ns(&a.round)?;
    if round_ns == 0 || duration_ns == 0 {
        bail!("--round and --duration must be longer than 0");
    }
    if !(0.0..=MAX_PRECONDITION_DEVICE_WRITES).contains(&a.precondition_device_writes) {
        bail!(
            "--precondition is between 0 and {MAX_PRECONDITION_DEVICE_WRITES} device writes, not {}",
            a.precondition_device_writes
        );
    }
    let chips = dev.geometry.channels * dev.geometry.chips_per_channel;
    if a.region_chips == 0 || a.region_chips >= chips {
        bail!(
            "--region-chips {}: the device has {chips} chips and the default region keeps at least one",
            a.region_chips
        );
    }
    let ipa_opts = format!(
        "IPA_MODE={ipa_mode}, IPA_SCHEME={}, IPA_RECORD={}",
        scheme.label(),
        scheme.record_bytes
    );
    let op_percent = (a.op_fraction * 100.0).round() as u32;
    Ok(Setup {
        dev,
        page_bytes,
        scheme,
        ipa_mode,
        nop,
        workload,
        configs,
        warmup_ns,
        round_ns,
        precondition: a.precondition_device_writes,
        max_rounds: a.max_rounds,
        duration_ns,
        chips,
        ipa_opts,
        op_percent,
        advised: None,
    })
}

/// The device, on `DEFAULT_GEOMETRY` unless the spec overrides the geometry.
fn device(d: &DeviceSpec) -> anyhow::Result<nand::DeviceConfig> {
    let mut d = d.clone();
    if !d.set.iter().any(|s| s.starts_with("geometry.")) {
        d.set.extend(DEFAULT_GEOMETRY.iter().map(|s| s.to_string()));
    }
    d.load()
}

/// A page and its appends must fit the chips' NOP, and the delta area an eighth of the page.
fn check_scheme(
    scheme: &IpaScheme,
    nop: u8,
    ipa_mode: &str,
    preset: &str,
    page_bytes: usize,
) -> anyhow::Result<()> {
    if u32::from(scheme.appends) + 1 > u32::from(nop) {
        bail!(
            "--scheme {}: a page and {} appends need {} programs; {ipa_mode} pages of {} allow {nop} (cell.nop)",
            scheme.label(),
            scheme.appends,
            u32::from(scheme.appends) + 1,
            preset
        );
    }
    if scheme.area_bytes() > page_bytes / 8 {
        bail!(
            "--scheme {} with {}-byte records takes {} bytes of each {page_bytes}-byte page; at most an eighth may go to deltas",
            scheme.label(),
            scheme.record_bytes,
            scheme.area_bytes()
        );
    }
    Ok(())
}

fn workload(a: &Spec) -> anyhow::Result<Workload> {
    Ok(match a.workload.as_str() {
        "tatp" => Workload::Tatp(TatpConfig {
            subscribers: a.scale.unwrap_or(40_000),
        }),
        "tpcb" => Workload::Tpcb(TpcbConfig {
            accounts_per_branch: a.accounts_per_branch,
            ..TpcbConfig::spec(a.scale.unwrap_or(1))
        }),
        "tpcc" => Workload::Tpcc(TpccConfig::spec(a.scale.unwrap_or(1))),
        other => bail!("ipa compare runs tatp, tpcb or tpcc, not '{other}'"),
    })
}

/// The rows asked for (or the workload's default rows), each a known one its workload can run.
fn configs(a: &Spec, workload: &Workload) -> anyhow::Result<Vec<String>> {
    let configs: Vec<String> = match &a.configs {
        Some(c) => c.iter().map(|s| s.trim().to_ascii_lowercase()).collect(),
        None if matches!(workload, Workload::Tatp(_)) => {
            CONFIGS.iter().map(|s| s.to_string()).collect()
        }
        None => ["baseline", "advised", "ipa-advised", "global", "ipa-global"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    };
    for c in &configs {
        if !CONFIGS.contains(&c.as_str()) {
            bail!("--configs: '{c}' is not one of {}", CONFIGS.join(", "));
        }
        if !matches!(workload, Workload::Tatp(_)) && c.contains("regions") {
            bail!("--configs {c}: the regions layouts are TATP's (Subscriber and Special_Facility); TPC-B and TPC-C run baseline, global and ipa-global");
        }
    }
    Ok(configs)
}
