//! What every round of the crash test shares, below the rounds themselves: the fault
//! ([`Fault`]), the media ([`Medium`], [`FlashMedium`], [`NativeDevice`]), the options
//! ([`CrashOptions`]) and the outcome ([`CrashOutcome`]), the workload trait
//! ([`CrashWorkload`]), the flash operation count a fault is drawn from ([`OpCount`]), and
//! running terminals into the fault ([`run_to_fault`]).
//!
//! It sits under `crash` (the block-device round, `crash::block_round`) and `crash_native` (the
//! NoFTL store's round, `crash_native::native_round`), so that both import it downward and
//! neither imports the other's round. `crash` re-exports the public types, so they keep their
//! `kits::crash::` paths.

use ftl::FtlOptions;
use nand::{DeviceConfig, Nand};
use storage::sched::{run_virtual, VirtualOptions};
use storage::{Engine, EngineConfig, Error, Result};

use crate::tpcb::TpcbConfig;

/// What to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Fault {
    PowerCut,
    IoError,
    /// A media failure of the first upper- or middle-page program from the drawn operation on
    /// (MLC, TLC): it tears the lower pages of its word line without a power loss
    /// (`FaultPlan::fail_paired_program_from`), so the controller must keep what they held.
    /// Flash only; on SLC and pSLC there is no such program and nothing fails.
    PairedProgram,
    /// Both together: the media failure of [`Fault::PairedProgram`] armed from the drawn
    /// operation on, and a power cut at a second operation drawn after it ([`Shot`]), so a
    /// controller that has just absorbed a failed upper-page program loses power with its
    /// recovery state (a kept lower-page copy, a retired block) in flight. MLC/TLC flash only.
    Mixed,
}

impl Fault {
    /// The emulator's fault plan that injects this fault at flash operation `at`.
    pub fn plan_at(self, at: u64) -> nand::FaultPlan {
        match self {
            Fault::PowerCut => nand::FaultPlan {
                cut_at_op: Some(at),
                ..nand::FaultPlan::default()
            },
            Fault::IoError => nand::FaultPlan {
                fail_op: Some(at),
                ..nand::FaultPlan::default()
            },
            // The cut of `Mixed` is placed by its `Shot`.
            Fault::PairedProgram | Fault::Mixed => nand::FaultPlan {
                fail_paired_program_from: Some(at),
                ..nand::FaultPlan::default()
            },
        }
    }

    /// Whether the fault fails an upper- or middle-page program (MLC/TLC flash only).
    pub fn fails_paired_program(self) -> bool {
        matches!(self, Fault::PairedProgram | Fault::Mixed)
    }
}

/// Where one round's faults land, counted in the workload's flash operations from 1: the
/// fault's operation, and with [`Fault::Mixed`] the power cut's, drawn second from the same
/// seed's stream (so every other fault draws exactly as before `Mixed` existed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shot {
    pub(crate) nth: u64,
    pub(crate) cut_nth: Option<u64>,
}

impl Shot {
    /// Draws from `budget` operations (the dry run's count plus 5%: power lost while idle). The
    /// cut falls at or after the media failure's first chance, so it cuts either the
    /// controller's handling of the failure or work after it (or the failure never comes first,
    /// and the round is a plain power cut).
    pub(crate) fn draw(fault: Fault, rng: &mut impl rand::Rng, budget: u64) -> Shot {
        debug_assert!(budget >= 1);
        let nth = rng.random_range(1..=budget);
        let cut_nth = (fault == Fault::Mixed).then(|| rng.random_range(nth..=budget));
        Shot { nth, cut_nth }
    }

    /// The emulator's plan for `fault`, with operations counted from `base` (the count before
    /// the workload's first operation).
    pub(crate) fn plan(self, fault: Fault, base: u64) -> nand::FaultPlan {
        let mut plan = fault.plan_at(base + self.nth);
        if let Some(cut) = self.cut_nth {
            plan.cut_at_op = Some(base + cut);
        }
        plan
    }

    /// Whether the round's fault fired, from the device after the faulted run (`ops` the
    /// operations issued by then, `base` as for [`Shot::plan`]; `reported`: the workload saw
    /// an error). A media error the store absorbed reaches no one, so the operation count
    /// judges it; a paired-program failure whether it fired (it waits for an upper-page
    /// program, which may never come); `Mixed` either.
    pub(crate) fn hit(
        self,
        fault: Fault,
        nand: Option<&Nand>,
        ops: u64,
        base: u64,
        reported: bool,
    ) -> bool {
        let fired = nand.is_some_and(paired_fault_fired);
        match fault {
            Fault::PairedProgram => fired,
            Fault::Mixed => fired || self.cut_nth.is_some_and(|c| ops >= base + c),
            Fault::PowerCut | Fault::IoError => reported || ops >= base + self.nth,
        }
    }

    /// What the report names the fault that landed: `name` names a workload operation.
    pub(crate) fn landed_on(
        self,
        fault: Fault,
        paired_fired: bool,
        name: impl Fn(u64) -> Option<String>,
    ) -> Option<String> {
        match fault {
            Fault::PairedProgram => Some(PAIRED_PROGRAM.into()),
            Fault::Mixed if paired_fired => Some(PAIRED_THEN_CUT.into()),
            Fault::Mixed => self.cut_nth.and_then(name),
            Fault::PowerCut | Fault::IoError => name(self.nth),
        }
    }
}

/// What the reports name a fired [`Fault::PairedProgram`] ("landed on"): the failed program is
/// the first upper- or middle-page one from the drawn operation on, whatever its purpose.
pub(crate) const PAIRED_PROGRAM: &str = "upper-page program";

/// What the reports name a [`Fault::Mixed`] round whose media failure fired before its cut (the
/// cut then lands on whatever the controller did next).
pub(crate) const PAIRED_THEN_CUT: &str = "upper-page program, then power cut";

/// Whether an armed [`Fault::PairedProgram`] fired: no program fails on this device otherwise
/// (aging and the workload run without faults until it is armed).
pub(crate) fn paired_fault_fired(nand: &Nand) -> bool {
    nand.stats().failed_programs > 0
}

/// Where the database lives.
// One value per sweep, passed by reference: the flash variant's size costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Medium {
    /// The RAM crash disk: faults at the page-store seam, a volatile write cache.
    CrashDisk,
    /// An FTL on emulated flash: faults at flash operations.
    Flash(FlashMedium),
    /// The NoFTL store on emulated flash (`crash_native`): the workload's own small device, or
    /// the one named.
    Native(NativeDevice),
}

/// The flash of the native crash test.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NativeDevice {
    /// `None`: the workload's own `tiny` variant (`crash_native::tiny_device`) with
    /// `overrides` applied; else this device (its seed replaced per test seed).
    pub device: Option<DeviceConfig>,
    /// `KEY=VALUE` device settings applied to the workload's own device, as `--set` takes them.
    pub overrides: Vec<String>,
    /// CREATE REGION options of a region that holds the log (`LOG=on` among them), created
    /// right after the store is formatted.
    pub log_region: Option<Vec<(String, String)>>,
    /// CREATE REGION options of a region that takes every object (`DEFAULT=on` among them),
    /// with In-Place Appends: the crash test of IPA.
    pub ipa_region: Option<Vec<(String, String)>>,
}

impl Medium {
    /// The name the reports use: `crashdisk`, the FTL's kind, `native`.
    pub fn name(&self) -> &str {
        match self {
            Medium::CrashDisk => "crashdisk",
            Medium::Flash(m) => &m.kind,
            Medium::Native(_) => "native",
        }
    }
}

/// An FTL on an emulated NAND device, for crash tests.
#[derive(Clone, Debug, PartialEq)]
pub struct FlashMedium {
    /// An FTL kind of `ftl::build` (page, dftl, fast, block).
    pub kind: String,
    /// The device; its seed is replaced by the test's seed (bit errors vary per seed).
    pub device: DeviceConfig,
    pub ftl: FtlOptions,
    /// Logical pages written (with zeros, see `age`) before the database is created, as a
    /// fraction of the capacity: an aged device has no free space left but its spare, so the
    /// workload's writes make the FTL collect garbage and the cut can land on a GC copy or erase.
    pub aged_fraction: f64,
}

/// The flash crash-test device: the tiny preset (8 dies of SLC, 16-page blocks) with 12 blocks
/// per plane (96 blocks, 6 MiB) and 15% spare, the smallest that holds the open blocks of every
/// page-mapped FTL; small enough that recovery scans it in well under a millisecond of host time.
/// Both crash workloads' databases fit (TPC-C's reduced one even with 2,000 transactions).
const FLASH_PRESET: &str = "tiny";
const FLASH_BLOCKS_PER_PLANE: &str = "geometry.blocks_per_plane=12";
const FLASH_SPARE_FACTOR: f64 = 0.15;

impl FlashMedium {
    /// The crash-test device with FTL `kind`, checked up front: the engine must be able to run
    /// on it, and the FTL must hand its flash back after a cut.
    pub fn new(kind: &str) -> Result<FlashMedium> {
        Self::with_overrides(kind, &[])
    }

    /// The crash-test device (the tiny preset, see above) with `overrides` (`KEY=VALUE`, as
    /// `--set` takes them) applied after the crash test's own, e.g. `cell.native=mlc` to run
    /// the FTL on MLC blocks.
    pub fn with_overrides(kind: &str, overrides: &[String]) -> Result<FlashMedium> {
        let mut sets = vec![
            FLASH_BLOCKS_PER_PLANE.to_string(),
            format!("trace_entries={TRACE_ENTRIES}"),
        ];
        sets.extend(overrides.iter().cloned());
        let device =
            DeviceConfig::preset(FLASH_PRESET, &sets).map_err(|e| Error::Config(e.to_string()))?;
        Self::on_device(kind, device)
    }

    /// The crash test of FTL `kind` on any device (its seed is replaced per test seed).
    pub fn on_device(kind: &str, mut device: DeviceConfig) -> Result<FlashMedium> {
        storage::pagestore::engine_runs_on(kind)?;
        // The report names the operation each fault landed on from the device's trace.
        device.trace_entries = device.trace_entries.max(TRACE_ENTRIES);
        let m = FlashMedium {
            kind: kind.to_string(),
            device,
            ftl: FtlOptions {
                spare_factor: FLASH_SPARE_FACTOR,
                ..FtlOptions::default()
            },
            aged_fraction: 1.0,
        };
        let probe = ftl::build(kind, m.nand(0)?, &m.ftl)?;
        if probe.into_nand().is_none() {
            return Err(Error::Unsupported(format!(
                "the {kind} FTL cannot hand its flash back after a power cut (BlockDevice::into_nand returns None), so it cannot be crash-tested"
            )));
        }
        Ok(m)
    }
    pub(crate) fn nand(&self, seed: u64) -> Result<Nand> {
        Nand::new(DeviceConfig {
            seed,
            ..self.device.clone()
        })
        .map_err(|e| Error::Config(e.to_string()))
    }
}

#[derive(Clone, Debug)]
pub struct CrashOptions {
    pub medium: Medium,
    pub fault: Fault,
    pub page_bytes: usize,
    /// Unflushed pages may tear inside a 4 KiB page (forces full-page writes on; crash disk only:
    /// flash tears the page being programmed by itself).
    pub tear_sectors: bool,
    /// Also cut power during the first recovery, then recover again.
    pub crash_during_recovery: bool,
    /// The canary: acknowledge commits before the log force.
    pub unsafe_ack_before_force: bool,
    pub terminals: u32,
    pub txns_per_terminal: u64,
    pub buffer_frames: usize,
    pub tpcb: TpcbConfig,
}

impl Default for CrashOptions {
    fn default() -> Self {
        CrashOptions {
            medium: Medium::CrashDisk,
            fault: Fault::PowerCut,
            page_bytes: 4096,
            tear_sectors: false,
            crash_during_recovery: false,
            unsafe_ack_before_force: false,
            terminals: 4,
            txns_per_terminal: 40,
            buffer_frames: 24,
            tpcb: TpcbConfig {
                scale: 2,
                tellers_per_branch: 10,
                accounts_per_branch: 300,
            },
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CrashOutcome {
    pub seed: u64,
    pub fault_at_op: u64,
    /// The workload ran into the fault (else power was cut after it finished).
    pub fault_hit: bool,
    /// Flash only: the operation the fault hit ("program host", "erase gc", ...).
    pub fault_landed_on: Option<String>,
    pub error_reported: Option<String>,
    /// The second cut (`crash_during_recovery`) fell inside the restart.
    pub recovery_cut_hit: bool,
    /// Native, and flash with a counted restart (TPC-C): the restart's operation the second cut
    /// hit ("read recovery", "program log").
    pub recovery_cut_landed_on: Option<String>,
    pub acknowledged: u64,
    pub recovered: u64,
    pub violations: Vec<String>,
}

impl CrashOutcome {
    pub fn verified(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Flash trace kept from arming the fault on (or from the start of a count), to name the
/// operation a cut hits: more than a workload and a restart of the crash tests issue.
pub(crate) const TRACE_ENTRIES: usize = 1 << 16;

pub(crate) fn engine_cfg(o: &CrashOptions) -> EngineConfig {
    EngineConfig {
        buffer_frames: o.buffer_frames,
        full_page_writes: if o.tear_sectors { Some(true) } else { None },
        unsafe_ack_before_force: o.unsafe_ack_before_force,
        ..EngineConfig::default()
    }
}

/// A workload of the crash tests, loaded, run into the fault and checked the same way on every
/// medium: by `crash::block_round` on the crash disk and the FTLs, by
/// `crash_native::native_round` on the NoFTL store.
pub(crate) trait CrashWorkload {
    /// What the check needs from the load (table handles, row counts).
    type Loaded;
    /// What the terminals saw (the commits acknowledged and those in flight).
    type Seen;
    fn fault(&self) -> Fault;
    fn crash_during_recovery(&self) -> bool;
    fn engine_config(&self) -> EngineConfig;
    /// Loads the database into the new engine and checkpoints it.
    fn load(&self, e: &mut Engine, seed: u64) -> Result<Self::Loaded>;
    /// Runs the terminals until they finish or the fault stops them (noted in `out`).
    fn run(
        &self,
        e: &mut Engine,
        l: &Self::Loaded,
        seed: u64,
        out: &mut CrashOutcome,
    ) -> Self::Seen;
    /// Checks what a restart gave against what the terminals saw (a failed restart is a
    /// violation).
    fn verify(
        &self,
        r: Result<Engine>,
        l: &Self::Loaded,
        seen: Self::Seen,
        out: CrashOutcome,
    ) -> Result<CrashOutcome>;
}

/// The flash operations of a fault-free dry run, counted and named in order ("program host",
/// "erase gc", ...), so that a fault is drawn from what the run really issues and named where it
/// lands. Exact for the faulted run of the same seed on an identical device: everything up to
/// the fault is the same in both (nand device.rs invariant 7).
#[derive(Clone, Debug, Default)]
pub(crate) struct OpCount {
    pub ops: u64,
    pub names: Vec<String>,
}

impl OpCount {
    /// Restarts `nand`'s trace (it keeps the device config's first `trace_entries` operations
    /// from here) and gives the operation number that `since` counts from.
    pub(crate) fn start(nand: &mut Nand) -> u64 {
        nand.reset_stats();
        nand.ops_issued()
    }

    /// The operations `nand` issued since `start`.
    pub(crate) fn since(nand: &Nand, start: u64) -> OpCount {
        OpCount {
            ops: nand.ops_issued() - start,
            names: nand
                .trace()
                .iter()
                .map(|e| format!("{:?} {:?}", e.op, e.purpose).to_lowercase())
                .collect(),
        }
    }

    /// A dry run must not fail: without a fault, a failure is the harness's or the engine's,
    /// and the count would be meaningless. A failed one is the seed's failure (an unverified
    /// outcome that says so), not an error of the whole test: a campaign goes on past it and
    /// its report names the seed, as for any other failure.
    pub(crate) fn failed_dry_run(seed: u64, dry: &CrashOutcome) -> Option<CrashOutcome> {
        dry.error_reported.as_ref().map(|err| CrashOutcome {
            seed,
            violations: vec![format!(
                "the fault-free dry run failed before any fault was armed: {err}"
            )],
            ..CrashOutcome::default()
        })
    }

    /// The range a fault is drawn from: the count plus 5% (a cut after the last operation: power
    /// lost while idle).
    pub(crate) fn budget(&self) -> u64 {
        (self.ops + self.ops / 20).max(10)
    }

    /// The `nth` operation counted (1-based), if the trace kept it.
    pub(crate) fn name(&self, nth: u64) -> Option<String> {
        let i = usize::try_from(nth.checked_sub(1)?).ok()?;
        self.names.get(i).cloned()
    }
}

/// Runs the crash test's terminals to their end or to the fault, whose error is recorded (a
/// read error may leave the engine running; either way the test restarts from the device).
pub(crate) fn run_to_fault<T: storage::sched::Terminal>(
    e: &mut Engine,
    terms: &mut [T],
    out: &mut CrashOutcome,
) {
    let start = e.now();
    if let Err(err) = run_virtual(e, terms, start, VirtualOptions::default()) {
        out.fault_hit = true;
        out.error_reported = Some(err.to_string());
    }
}
