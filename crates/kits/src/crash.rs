//! The deterministic crash test: a TPC-B workload on a device that loses power (or fails an
//! I/O) at a seeded random operation, a restart from the device alone, and a check against a
//! reference model.
//!
//! Two media ([`Medium`]):
//! - the crash disk (`storage::crashdisk`): a RAM device with a volatile write cache; the cut
//!   lands at a device operation (read, write, trim, flush), unflushed writes persist in a seeded
//!   subset, optionally torn at sector granularity;
//! - an FTL on emulated flash ([`FlashMedium`]): the emulator's `FaultPlan` cuts power during the
//!   N-th flash operation (a host page program, a GC copy or erase, a DFTL translation-page
//!   write, an FTL journal write, a read), which tears that page as the emulator's power-loss
//!   model says (nand device.rs invariant 6); the flash is then taken back from the FTL
//!   (`into_nand`), powered on, and the FTL recovers from it (`ftl::open`) before the engine
//!   restarts on top. `fail_op` injects a media error (a failed program or erase, an
//!   uncorrectable read) instead.
//!
//! Model: the terminals record every commit they saw acknowledged and the one whose commit was
//! in flight. After recovery the history table names the transactions that survived (`h_seq`).
//! Verified: (1) every acknowledged commit survived; (2) nothing survived that was not at least
//! requested (no uncommitted or invented transaction); (3) every account, teller and branch
//! balance equals the sum of the surviving transactions' deltas (so no partial transaction is
//! visible); (4) the TPC-B sums hold and the engine's structural check passes (indexes agree
//! with heaps, every page checksum is valid); (5) optionally, a second power cut during recovery
//! followed by another recovery gives the same result. A fault must reach the engine as an
//! error, never a panic; a device that does not come back (the FTL cannot recover) is a
//! violation too.
//!
//! Everything depends on the seed only: the workload, the cut point and which unflushed writes
//! persist.

use std::collections::{BTreeMap, BTreeSet};

use ftl::{BlockDevice, FtlOptions};
use nand::{DeviceConfig, Nand};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::crashdisk::{CrashDisk, CrashPlan, SharedCrashDisk};
use storage::sched::{run_virtual, VirtualOptions};
use storage::shared::SharedDevice;
use storage::{BlockPageStore, Engine, EngineConfig, Error, Result};

use crate::tpcb::{self, Done, Handles, TpcbConfig, TpcbTerminal};

/// What to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Fault {
    PowerCut,
    IoError,
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
        }
    }
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
const FLASH_PRESET: &str = "tiny";
const FLASH_BLOCKS_PER_PLANE: &str = "geometry.blocks_per_plane=12";
const FLASH_SPARE_FACTOR: f64 = 0.15;

impl FlashMedium {
    /// The crash-test device with FTL `kind`, checked up front: the engine must be able to run
    /// on it, and the FTL must hand its flash back after a cut.
    pub fn new(kind: &str) -> Result<FlashMedium> {
        storage::pagestore::engine_runs_on(kind)?;
        let device = DeviceConfig::preset(
            FLASH_PRESET,
            &[
                FLASH_BLOCKS_PER_PLANE.into(),
                format!("trace_entries={TRACE_ENTRIES}"),
            ],
        )
        .map_err(|e| Error::Config(e.to_string()))?;
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
    fn nand(&self, seed: u64) -> Result<Nand> {
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
    /// Native only: the restart's operation the second cut hit ("read recovery", "program log").
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

/// Crash disk: 24 MiB with a 4 MiB log.
const DISK_PAGES: u64 = 6144;
const DISK_LOG_BLOCKS: u64 = 1024;
/// Flash: a 1.5 MiB log on the ~4.5 MiB the FTLs export.
const FLASH_LOG_BLOCKS: u64 = 384;
/// Flash trace kept from arming the fault on, to name the operation it hit.
const TRACE_ENTRIES: usize = 1 << 16;

pub(crate) fn engine_cfg(o: &CrashOptions) -> EngineConfig {
    EngineConfig {
        buffer_frames: o.buffer_frames,
        full_page_writes: if o.tear_sectors { Some(true) } else { None },
        unsafe_ack_before_force: o.unsafe_ack_before_force,
        ..EngineConfig::default()
    }
}

/// One crash-test device through its power cycles.
// One per seed: the flash variant's size costs nothing.
#[allow(clippy::large_enum_variant)]
enum Rig {
    Disk(SharedCrashDisk),
    Flash(SharedDevice<Box<dyn BlockDevice>>, FlashMedium),
}

impl Rig {
    fn create(o: &CrashOptions, seed: u64) -> Result<Rig> {
        match &o.medium {
            Medium::CrashDisk => Ok(Rig::Disk(SharedCrashDisk::new(CrashDisk::new(DISK_PAGES)))),
            Medium::Flash(m) => {
                let mut dev = ftl::build(&m.kind, m.nand(seed)?, &m.ftl)?;
                age(&mut *dev, m.aged_fraction, seed)?;
                Ok(Rig::Flash(SharedDevice::new(dev), m.clone()))
            }
        }
    }
    fn log_blocks(&self) -> u64 {
        match self {
            Rig::Disk(_) => DISK_LOG_BLOCKS,
            Rig::Flash(..) => FLASH_LOG_BLOCKS,
        }
    }
    /// A page store on a new handle of the device.
    fn store(&self, o: &CrashOptions) -> Result<Box<BlockPageStore>> {
        let dev: Box<dyn BlockDevice> = match self {
            Rig::Disk(d) => Box::new(d.clone()),
            Rig::Flash(d, _) => Box::new(d.clone()),
        };
        Ok(Box::new(BlockPageStore::new(
            dev,
            o.page_bytes,
            Some(self.log_blocks()),
        )?))
    }
    /// Operations so far, as the fault plan counts them.
    fn ops(&self) -> u64 {
        match self {
            Rig::Disk(d) => d.ops(),
            Rig::Flash(d, _) => d.with(|d| d.nand().map_or(0, Nand::ops_issued)),
        }
    }
    /// The range a cut during restart is drawn from: a restart issues about this many operations
    /// (crash disk: 15-40; flash, counting reads: 35-90), so most second cuts fall inside it.
    fn restart_ops(&self) -> u64 {
        match self {
            Rig::Disk(_) => 40,
            Rig::Flash(..) => 80,
        }
    }
    fn arm(&self, fault: Fault, at: u64, tear_sectors: bool) {
        match self {
            Rig::Disk(d) => d.set_plan(match fault {
                Fault::PowerCut => CrashPlan {
                    cut_at_op: Some(at),
                    fail_op: None,
                    tear_sectors,
                },
                Fault::IoError => CrashPlan {
                    cut_at_op: None,
                    fail_op: Some(at),
                    tear_sectors,
                },
            }),
            Rig::Flash(d, _) => d.with(|d| {
                if let Some(n) = d.nand_mut() {
                    n.set_fault_plan(fault.plan_at(at));
                }
            }),
        }
    }
    /// Flash: `f` on the device under the FTL (`None` on the crash disk).
    fn with_nand<R>(&self, f: impl FnOnce(&mut Nand) -> R) -> Option<R> {
        match self {
            Rig::Disk(_) => None,
            Rig::Flash(d, _) => d.with(|d| d.nand_mut().map(f)),
        }
    }
    /// Cuts power (if the fault has not already), powers on, and brings the device back as the
    /// next power-on finds it. `Err(why)`: it did not come back.
    fn power_cycle(self, seed: u64) -> Result<std::result::Result<Rig, String>> {
        match self {
            Rig::Disk(d) => {
                d.cut_power();
                Ok(Ok(Rig::Disk(SharedCrashDisk::new(
                    d.after_power_loss(seed),
                ))))
            }
            Rig::Flash(d, m) => {
                let dev = d.into_inner().ok_or_else(|| {
                    Error::Unsupported("the engine still holds the device".into())
                })?;
                let mut nand = dev.into_nand().ok_or_else(|| {
                    Error::Unsupported(format!(
                        "the {} FTL cannot hand its flash back (into_nand)",
                        m.kind
                    ))
                })?;
                nand.power_cut();
                nand.power_on();
                Ok(match ftl::open(&m.kind, nand, &m.ftl) {
                    Ok(dev) => Ok(Rig::Flash(SharedDevice::new(dev), m)),
                    Err(e) => Err(format!(
                        "the {} FTL did not recover after the power cut: {e}",
                        m.kind
                    )),
                })
            }
        }
    }
}

/// Ages the device: writes zeros over the first `fraction` of its logical pages, then over a
/// seeded random quarter of those again, one page at a time, so that flash blocks hold a mix of
/// valid and stale pages and garbage collection must copy pages (a cut can land on a GC copy).
/// Zeros read as "never written" to the engine, so the database still finds an empty device.
fn age(dev: &mut dyn BlockDevice, fraction: f64, seed: u64) -> Result<()> {
    const CHUNK_PAGES: u64 = 64;
    let pages =
        ((dev.capacity_pages() as f64 * fraction.clamp(0.0, 1.0)) as u64).min(dev.capacity_pages());
    let zeros = vec![0u8; CHUNK_PAGES as usize * ftl::LOGICAL_PAGE_BYTES];
    let mut t = 0;
    let mut lpn = 0;
    while lpn < pages {
        let n = CHUNK_PAGES.min(pages - lpn);
        t = dev.write(
            t,
            lpn,
            &zeros[..n as usize * ftl::LOGICAL_PAGE_BYTES],
            false,
        )?;
        lpn += n;
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xA9E);
    for _ in 0..pages / 4 {
        t = dev.write(
            t,
            rng.random_range(0..pages),
            &zeros[..ftl::LOGICAL_PAGE_BYTES],
            false,
        )?;
    }
    dev.flush(t)?;
    Ok(())
}

/// A device with the TPC-B database created and loaded, ready to run.
fn prepare(o: &CrashOptions, seed: u64) -> Result<(Rig, Engine, Handles)> {
    let rig = Rig::create(o, seed)?;
    let mut e = Engine::create(rig.store(o)?, engine_cfg(o))?;
    let h = tpcb::load(&mut e, o.tpcb, |_| {})?;
    e.checkpoint()?;
    Ok((rig, e, h))
}

/// One crash-and-recover round for `seed`.
///
/// The fault's operation number: on the crash disk, drawn from 1.5 operations per transaction
/// of the workload (about what it issues with group commit), so most faults fall inside it. On
/// flash, where operations per transaction vary with the FTL (DFTL's translation pages) and with
/// GC, a dry run of the same seed without a fault first counts the workload's flash operations
/// and names each one; the fault is drawn from that count plus 5% (a cut after the last
/// operation: power lost while idle). The dry run is exact because everything up to the fault is
/// the same in both runs (nand device.rs invariant 7).
pub fn crash_once(seed: u64, o: &CrashOptions) -> Result<CrashOutcome> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let txns = u64::from(o.terminals) * o.txns_per_terminal;
    let (budget, count) = match o.medium {
        Medium::CrashDisk => ((txns * 3 / 2).max(10), OpCount::default()),
        Medium::Flash(_) => {
            let (rig, mut e, h) = prepare(o, seed)?;
            let no_flash = || Error::Unsupported("the FTL shows no flash to count on".into());
            let start = rig.with_nand(OpCount::start).ok_or_else(no_flash)?;
            let mut dry = CrashOutcome::default();
            run_until_fault(&mut e, h, o, seed, &mut dry);
            let count = rig
                .with_nand(|n| OpCount::of_dry_run(n, start, seed, &dry))
                .ok_or_else(no_flash)??;
            (count.budget(), count)
        }
    };
    let (rig, mut e, h) = prepare(o, seed)?;
    let nth = rng.random_range(1..=budget);
    let at = rig.ops() + nth;
    rig.arm(o.fault, at, o.tear_sectors);
    let mut out = CrashOutcome {
        seed,
        fault_at_op: at,
        ..CrashOutcome::default()
    };
    let (acked, maybe) = run_until_fault(&mut e, h, o, seed, &mut out);
    // A media error the FTL absorbed (a failed program it rewrote elsewhere) reaches no one, so
    // "hit" is judged by the operation count.
    out.fault_hit = out.error_reported.is_some() || rig.ops() >= at;
    if out.fault_hit {
        out.fault_landed_on = count.name(nth);
    }
    drop(e);

    // Restart from the device alone (optionally crashing once more during recovery).
    let mut rig = match rig.power_cycle(seed)? {
        Ok(r) => r,
        Err(why) => {
            out.violations.push(why);
            return Ok(out);
        }
    };
    if o.crash_during_recovery {
        let cut = rig.ops() + rng.random_range(1..=rig.restart_ops());
        rig.arm(Fault::PowerCut, cut, o.tear_sectors);
        let r = Engine::open(rig.store(o)?, engine_cfg(o));
        out.recovery_cut_hit = r.is_err();
        drop(r);
        rig = match rig.power_cycle(seed.wrapping_add(1))? {
            Ok(r) => r,
            Err(why) => {
                out.violations.push(why);
                return Ok(out);
            }
        };
    }
    verify_restart(
        Engine::open(rig.store(o)?, engine_cfg(o)),
        h,
        o.tpcb,
        &acked,
        &maybe,
        out,
    )
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

    /// `since` for a dry run of the workload, which must not have failed: without a fault, a
    /// failure is the harness's or the engine's, and the count would be meaningless.
    pub(crate) fn of_dry_run(
        nand: &Nand,
        start: u64,
        seed: u64,
        dry: &CrashOutcome,
    ) -> Result<OpCount> {
        match &dry.error_reported {
            Some(err) => Err(Error::Unsupported(format!(
                "the dry run of seed {seed} failed without a fault: {err}"
            ))),
            None => Ok(Self::since(nand, start)),
        }
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

/// Verifies the engine a restart gave, or records that the restart failed.
pub(crate) fn verify_restart(
    r: Result<Engine>,
    h: Handles,
    cfg: TpcbConfig,
    acked: &[Done],
    maybe: &[Done],
    mut out: CrashOutcome,
) -> Result<CrashOutcome> {
    let mut e = match r {
        Ok(e) => e,
        Err(err) => {
            out.violations.push(format!("recovery failed: {err}"));
            return Ok(out);
        }
    };
    verify(&mut e, h, cfg, acked, maybe, &mut out)?;
    Ok(out)
}

/// Runs the crash test's terminals until they finish or the fault stops them; returns the
/// commits acknowledged and those in flight (requested, not acknowledged).
pub(crate) fn run_until_fault(
    e: &mut Engine,
    h: Handles,
    o: &CrashOptions,
    seed: u64,
    out: &mut CrashOutcome,
) -> (Vec<Done>, Vec<Done>) {
    let mut terms: Vec<TpcbTerminal> = (0..o.terminals)
        .map(|i| {
            let mut t = TpcbTerminal::new(i, h, o.tpcb, seed, Some(o.txns_per_terminal));
            t.record = true;
            t
        })
        .collect();
    run_to_fault(e, &mut terms, out);
    let acked: Vec<Done> = terms.iter().flat_map(|t| t.acked.iter().copied()).collect();
    let maybe: Vec<Done> = terms.iter().filter_map(|t| t.in_flight).collect();
    out.acknowledged = acked.len() as u64;
    (acked, maybe)
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

fn verify(
    e: &mut Engine,
    h: Handles,
    cfg: TpcbConfig,
    acked: &[Done],
    maybe: &[Done],
    out: &mut CrashOutcome,
) -> Result<()> {
    let history = tpcb::rows(e, h.history)?;
    let seqs: BTreeSet<i64> = history.iter().filter_map(|r| r[5].as_i64()).collect();
    if seqs.len() != history.len() {
        out.violations
            .push("a transaction's history row appears twice".into());
    }
    out.recovered = seqs.len() as u64;
    let known: BTreeMap<i64, Done> = acked.iter().chain(maybe).map(|d| (d.seq, *d)).collect();
    for d in acked {
        if !seqs.contains(&d.seq) {
            out.violations.push(format!(
                "acknowledged commit {:#x} is missing after recovery",
                d.seq
            ));
            break;
        }
    }
    let mut acct: BTreeMap<i64, i64> = BTreeMap::new();
    let mut tell: BTreeMap<i64, i64> = BTreeMap::new();
    let mut bran: BTreeMap<i64, i64> = BTreeMap::new();
    for s in &seqs {
        match known.get(s) {
            None => {
                out.violations.push(format!(
                    "transaction {s:#x} is visible but its commit was never requested"
                ));
                break;
            }
            Some(d) => {
                *acct.entry(i64::from(d.input.account)).or_default() += d.input.delta_cents;
                *tell.entry(i64::from(d.input.teller)).or_default() += d.input.delta_cents;
                *bran.entry(i64::from(d.input.branch)).or_default() += d.input.delta_cents;
            }
        }
    }
    for (table, col, model, name) in [
        (h.account, 2, &acct, "account"),
        (h.teller, 2, &tell, "teller"),
        (h.branch, 1, &bran, "branch"),
    ] {
        for r in tpcb::rows(e, table)? {
            let id = r[0].as_i64().unwrap_or(-1);
            let bal = r[col].as_i64().unwrap_or(i64::MIN);
            let want = model.get(&id).copied().unwrap_or(0);
            if bal != want {
                out.violations.push(format!(
                    "{name} {id} has balance {bal}, the surviving transactions give {want}"
                ));
                break;
            }
        }
    }
    let rep = tpcb::check(e, cfg)?;
    out.violations.extend(rep.problems);
    Ok(())
}
