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
    /// The DBA's `MAX_SIZE` of the region of `regions` and `ipa-regions`, bytes: the region
    /// takes the fewest chips whose usable capacity in its cells reaches it (`region_chips` is
    /// then ignored), and never holds more (None: `region_chips`, no MAX_SIZE).
    pub region_max_size_bytes: Option<u64>,
    /// GC policy of the regions layout's region (greedy, cost-benefit, fifo, random; None:
    /// greedy).
    pub region_gc: Option<String>,
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
    /// The paper's regime this spec reproduces, in words (`table_i`), for the report.
    pub regime: Option<String>,
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
    /// Chips of the regions layout's region (from MAX_SIZE when given).
    pub(super) region_chips: u32,
    /// Why the regions layout's rows cannot run (a MAX_SIZE the device cannot give).
    pub(super) region_unfit: Option<String>,
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
    if let Some(g) = &a.region_gc {
        g.parse::<ftl::GcPolicy>()
            .map_err(|e| anyhow::anyhow!("--region-gc: {e}"))?;
    }
    let region_chips = match a.region_max_size_bytes {
        Some(bytes) => chips_for(&dev, ipa_mode, bytes, a.op_fraction, page_bytes),
        None => a.region_chips,
    };
    // A MAX_SIZE the device cannot give the region: its rows are reported as not run (the
    // layout does not fit), the other rows run.
    let region_unfit = (a.region_max_size_bytes.is_some() && region_chips >= chips).then(|| {
        format!(
            "the DBA's MAX_SIZE of {:.1} MB needs {region_chips} or more of the device's {chips} chips in {ipa_mode}, and the default region must keep at least one for the rest and the log",
            a.region_max_size_bytes.unwrap_or(0) as f64 / 1e6
        )
    });
    if region_unfit.is_none() && (region_chips == 0 || region_chips >= chips) {
        bail!(
            "the regions layout takes {region_chips} chip(s) (--region-chips, or a MAX_SIZE of {} bytes): the device has {chips} chips and the default region keeps at least one",
            a.region_max_size_bytes.unwrap_or(0)
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
        region_chips,
        region_unfit,
        ipa_opts,
        op_percent,
        advised: None,
    })
}

/// The fewest chips whose usable capacity in the IPA region's cells (pSLC: half an MLC
/// block's pages) reaches `bytes` at spare factor `op`, counted as the store counts a region's
/// (`storage::native::region_overhead_blocks`), less the blocks the datasheet's factory-bad
/// ratio expects to be bad.
fn chips_for(
    dev: &nand::DeviceConfig,
    ipa_mode: &str,
    bytes: u64,
    op: f64,
    page_bytes: usize,
) -> u32 {
    let g = &dev.geometry;
    let mode = if ipa_mode == "SLC" {
        CellMode::Slc
    } else {
        CellMode::Pslc
    };
    let block_bytes = u64::from(dev.pages_in_mode(mode)) * u64::from(g.page_size_bytes);
    let blocks_per_chip = f64::from(g.dies_per_chip * g.planes_per_die * g.blocks_per_plane)
        * (1.0 - dev.reliability.factory_bad_block_ratio);
    let usable = |k: u32| {
        let dies = u64::from(k * g.dies_per_chip);
        let blocks = (f64::from(k) * blocks_per_chip).floor() as u64;
        let blocks = blocks.saturating_sub(storage::native::region_overhead_blocks(dies));
        // Whole DB pages only.
        let pages = (blocks * block_bytes) as f64 * (1.0 - op) / page_bytes as f64;
        pages.floor() as u64 * page_bytes as u64
    };
    let all = g.channels * g.chips_per_channel;
    (1..=all).find(|&k| usable(k) >= bytes).unwrap_or(all)
}

/// IPA Table I in its regime (`noftl ipa compare --paper`; docs/ipa.md, "Table I in steady
/// state"): TATP on the default device of mlc16k chips with 16 KiB pages (Table I's 16 KB host
/// pages), the baseline and Table I's layout (Subscriber and Special_Facility in a pSLC region
/// with IPA [2x3], everything else in the default region without IPA), the control rows,
/// preconditioned and run in rounds until steady, three seeds.
///
/// The regime: Table I's baseline copies 0.914 pages per host write, which on this device
/// takes a database of about 57% of the flash (`table_i_regime`: 160,000 subscribers, 0.93 in
/// steady state). At that size Table I's layout does not fit: Subscriber and Special_Facility with their
/// indexes are 46% of TATP's pages, pSLC holds half an MLC chip's, so the layout needs about
/// 1.46 times the baseline's flash. The comparison therefore runs at the largest round
/// database at which the layout fits with a DBA's room for GC (`TABLE_I_SUBSCRIBERS`), says so,
/// and reports the baseline's copies there.
pub fn table_i(seed: u64, terminals: u32) -> Spec {
    let mut spec = table_i_at(TABLE_I_SUBSCRIBERS, seed, terminals);
    spec.configs = Some(
        ["baseline", "regions", "ipa-regions", "global", "ipa-global"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    );
    spec.regime = Some(format!(
        "IPA Table I's layout at the largest database it fits on this device: TATP {TABLE_I_SUBSCRIBERS} subscribers on 256 MiB of MLC (2 x 2 chips), Subscriber and Special_Facility (with their indexes) in a pSLC region of MAX_SIZE {:.1} MB ({}% room for GC), the rest and the log in the default region; preconditioned to 2 device writes, then 10 s rounds until SNIA SSS PTS steady state, 60 s windows, 3 seeds",
        spec.region_max_size_bytes.unwrap_or(0) as f64 / 1e6,
        (DBA_ROOM_FOR_GC * 100.0) as u32
    ));
    spec
}

/// Table I's regime itself (`table_i`'s companion): the baseline with
/// `TABLE_I_REGIME_SUBSCRIBERS`, where it copies about as much per host write as Table I's
/// baseline, and Table I's layout sized by the same rule, which the device cannot give there.
pub fn table_i_regime(seed: u64, terminals: u32) -> Spec {
    let mut spec = table_i_at(TABLE_I_REGIME_SUBSCRIBERS, seed, terminals);
    spec.configs = Some(
        ["baseline", "regions", "ipa-regions"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    );
    spec.regime = Some(format!(
        "IPA Table I's regime: TATP {TABLE_I_REGIME_SUBSCRIBERS} subscribers on the same device (57% of its flash valid), where the baseline copies about 0.9 pages per host write in steady state (Table I: 0.914); Table I's layout sized by the same rule"
    ));
    spec
}

/// The spec both Table I comparisons share, at `subscribers`.
fn table_i_at(subscribers: u32, seed: u64, terminals: u32) -> Spec {
    let hot_bytes = u64::from(subscribers) * TATP_HOT_BYTES_PER_SUBSCRIBER;
    Spec {
        workload: "tatp".into(),
        scale: Some(subscribers),
        accounts_per_branch: 100_000,
        device: DeviceSpec {
            preset: "mlc16k".into(),
            config: None,
            set: DEFAULT_GEOMETRY.iter().map(|s| s.to_string()).collect(),
        },
        page_size_bytes: None,
        op_fraction: 0.1,
        region_chips: 1,
        region_gc: None,
        region_max_size_bytes: Some((hot_bytes as f64 / (1.0 - DBA_ROOM_FOR_GC)).ceil() as u64),
        scheme: "2x3".into(),
        record_bytes: 32,
        configs: None,
        terminals,
        warmup: "none".into(),
        precondition_device_writes: 2.0,
        round: "10s".into(),
        max_rounds: crate::steady::MAX_ROUNDS,
        duration: "60s".into(),
        repeat: 3,
        buffer_pages: None,
        seed,
        regime: None,
    }
}

/// TATP's database of `table_i`: the largest round number of subscribers at which Table I's
/// layout, sized by `DBA_ROOM_FOR_GC`, fits the default device (two pSLC chips for the hot
/// tables, two MLC chips for the rest and the log).
pub const TABLE_I_SUBSCRIBERS: u32 = 85_000;
/// TATP's database of `table_i_regime`: 160,000 subscribers fill 57% of the default device's
/// flash with valid pages, where the baseline copied 0.927 pages per host write in steady
/// state (seed 1, 60 s window, 2026-11-28); Table I's baseline: 0.914.
pub const TABLE_I_REGIME_SUBSCRIBERS: u32 = 160_000;
/// Bytes Subscriber and Special_Facility with their indexes take per subscriber on 16 KiB
/// pages, measured: 4,216 units of 4 KiB for 40,000 subscribers right after the load
/// (`ipa compare --store ipa-regions`, region counters, 2026-11-28).
pub const TATP_HOT_BYTES_PER_SUBSCRIBER: u64 = 4_216 * 4_096 / 40_000;
/// The DBA's room for GC in a region's MAX_SIZE: a quarter of it free, so that its valid pages
/// fill at most three quarters of it (our rule of thumb; the IPA demo leaves MAX_SIZE to the
/// DBA).
pub const DBA_ROOM_FOR_GC: f64 = 0.25;

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
