//! The deterministic crash test: a workload on a device that loses power (or fails an I/O) at a
//! seeded random operation, a restart from the device alone, and a check against a reference
//! model.
//!
//! A workload ([`CrashWorkload`]: TPC-B in `crash_tpcb`, TPC-C in `tpcc::crash`) is loaded, run
//! into the fault and checked the same way on every medium; the round that injects the fault and
//! restarts is the medium's: [`block_round`] on a block device (this module),
//! `crash_native::native_round` on the NoFTL store. What both rounds share (the options, the
//! outcome, the media, the workload trait) is in `crash_common`, re-exported here.
//!
//! Three media ([`Medium`]):
//! - the crash disk (`storage::crashdisk`): a RAM device with a volatile write cache; the cut
//!   lands at a device operation (read, write, trim, flush), unflushed writes persist in a seeded
//!   subset, optionally torn at sector granularity;
//! - an FTL on emulated flash ([`FlashMedium`]): the emulator's `FaultPlan` cuts power during the
//!   N-th flash operation (a host page program, a GC copy or erase, a DFTL translation-page
//!   write, an FTL journal write, a read), which tears that page as the emulator's power-loss
//!   model says (nand device.rs invariant 6); the flash is then taken back from the FTL
//!   (`into_nand`), powered on, and the FTL recovers from it (`ftl::open`) before the engine
//!   restarts on top. `fail_op` injects a media error (a failed program or erase, an
//!   uncorrectable read) instead;
//! - the NoFTL store managing the flash itself (`Medium::Native`, see `crash_native`).
//!
//! Model (TPC-B; TPC-C's is in `tpcc::crash`): the terminals record every commit they saw
//! acknowledged and the one whose commit was in flight. After recovery the history table names
//! the transactions that survived (`h_seq`). Verified: (1) every acknowledged commit survived; (2) nothing survived that was not at least
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
//!
//! The fault's operation ([`block_round`]): on flash, and on the crash disk for a workload that
//! gives no estimate of its operations (TPC-C), a dry run of the same seed without a fault counts
//! the workload's device operations (on flash naming each one, [`OpCount`]) and the fault is
//! drawn from that count plus 5%; TPC-B on the crash disk draws it from 1.5 operations per
//! transaction, its estimate since the first version of this test (kept, so that every seed
//! keeps its cut).

use ftl::BlockDevice;
use nand::Nand;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::crashdisk::{CrashDisk, CrashPlan, SharedCrashDisk};
use storage::shared::SharedDevice;
use storage::{BlockPageStore, Engine, Error, Result};

use crate::crash_common::{paired_fault_fired, CrashWorkload, OpCount, Shot};
pub use crate::crash_common::{
    CrashOptions, CrashOutcome, Fault, FlashMedium, Medium, NativeDevice,
};
use crate::crash_native::{native_round, tpcb_native_setup};
use crate::crash_tpcb::Tpcb;

/// What a sweep of seeds saw, outcome by outcome (the tests' and `noftl crashtest`'s tally).
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Faults that fell inside the workload.
    pub hit: u64,
    /// Faults the engine saw as an error.
    pub errors: u64,
    /// Second cuts that fell inside the restart.
    pub recovery_hits: u64,
    /// Flash operations the faults, resp. the second cuts, hit.
    pub landed: std::collections::BTreeMap<String, u64>,
    pub recovery_landed: std::collections::BTreeMap<String, u64>,
    /// Seeds whose recovery failed verification, with what was found.
    pub failures: Vec<(u64, String)>,
}

impl Tally {
    pub fn add(&mut self, out: &CrashOutcome) {
        self.hit += u64::from(out.fault_hit);
        self.errors += u64::from(out.error_reported.is_some());
        self.recovery_hits += u64::from(out.recovery_cut_hit);
        if let Some(op) = &out.fault_landed_on {
            *self.landed.entry(op.clone()).or_default() += 1;
        }
        if let Some(op) = &out.recovery_cut_landed_on {
            *self.recovery_landed.entry(op.clone()).or_default() += 1;
        }
        if !out.verified() {
            self.failures.push((
                out.seed,
                format!(
                    "fault at op {} on {:?}, second cut on {:?}: {:?}",
                    out.fault_at_op,
                    out.fault_landed_on,
                    out.recovery_cut_landed_on,
                    out.violations
                ),
            ));
        }
    }
}

/// Crash disk: 24 MiB with a 4 MiB log.
const DISK_PAGES: u64 = 6144;
const DISK_LOG_BLOCKS: u64 = 1024;
/// Flash: a 1.5 MiB log on the ~4.5 MiB the FTLs export.
const FLASH_LOG_BLOCKS: u64 = 384;

/// One crash-test device through its power cycles.
// One per seed: the flash variant's size costs nothing.
#[allow(clippy::large_enum_variant)]
enum Rig {
    Disk(SharedCrashDisk),
    Flash(SharedDevice<Box<dyn BlockDevice>>, FlashMedium),
}

impl Rig {
    fn create(medium: &Medium, seed: u64) -> Result<Rig> {
        match medium {
            Medium::CrashDisk => Ok(Rig::Disk(SharedCrashDisk::new(CrashDisk::new(DISK_PAGES)))),
            Medium::Flash(m) => {
                let mut dev = ftl::build(&m.kind, m.nand(seed)?, &m.ftl)?;
                age(&mut *dev, m.aged_fraction, seed)?;
                Ok(Rig::Flash(SharedDevice::new(dev), m.clone()))
            }
            Medium::Native(_) => Err(Error::Unsupported(
                "the native store is no block device: its round is crash_native::native_round"
                    .into(),
            )),
        }
    }
    fn log_blocks(&self) -> u64 {
        match self {
            Rig::Disk(_) => DISK_LOG_BLOCKS,
            Rig::Flash(..) => FLASH_LOG_BLOCKS,
        }
    }
    /// A page store on a new handle of the device.
    fn store(&self, s: &BlockSetup) -> Result<Box<BlockPageStore>> {
        let dev: Box<dyn BlockDevice> = match self {
            Rig::Disk(d) => Box::new(d.clone()),
            Rig::Flash(d, _) => Box::new(d.clone()),
        };
        Ok(Box::new(BlockPageStore::new(
            dev,
            s.page_bytes,
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
    /// The range a cut during restart is drawn from without `BlockSetup::count_restart` (TPC-B's
    /// estimate): a TPC-B restart issues about this many operations (crash disk: 15-40; flash,
    /// counting reads: 35-90), so most second cuts fall inside it.
    fn restart_ops(&self) -> u64 {
        match self {
            Rig::Disk(_) => 40,
            Rig::Flash(..) => 80,
        }
    }
    /// Arms `fault` at `shot`, operations counted from `base` (`rig.ops()` before the workload).
    fn arm(&self, fault: Fault, shot: Shot, base: u64, tear_sectors: bool) {
        let at = base + shot.nth;
        match self {
            Rig::Disk(d) => d.set_plan(match fault {
                Fault::PowerCut => CrashPlan {
                    cut_at_op: Some(at),
                    fail_op: None,
                    tear_sectors,
                },
                // The crash disk has no paired pages (the lab refuses them up front); a failed
                // write is its nearest media error.
                Fault::IoError | Fault::PairedProgram | Fault::Mixed => CrashPlan {
                    cut_at_op: shot.cut_nth.map(|c| base + c),
                    fail_op: Some(at),
                    tear_sectors,
                },
            }),
            Rig::Flash(d, _) => d.with(|d| {
                if let Some(n) = d.nand_mut() {
                    n.set_fault_plan(shot.plan(fault, base));
                }
            }),
        }
    }
    /// Starts counting operations (flash: restarts the trace that names them); gives the
    /// operation number [`Rig::counted_since`] counts from.
    fn start_count(&self) -> Result<u64> {
        match self {
            Rig::Disk(d) => Ok(d.ops()),
            Rig::Flash(d, _) => d
                .with(|d| d.nand_mut().map(OpCount::start))
                .ok_or_else(no_flash),
        }
    }
    /// The operations since `start` (named on flash, unnamed on the crash disk).
    fn counted_since(&self, start: u64) -> Result<OpCount> {
        match self {
            Rig::Disk(d) => Ok(OpCount {
                ops: d.ops() - start,
                names: Vec::new(),
            }),
            Rig::Flash(d, _) => d
                .with(|d| d.nand().map(|n| OpCount::since(n, start)))
                .ok_or_else(no_flash),
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
                let mut dev = d.into_inner().ok_or_else(|| {
                    Error::Unsupported("the engine still holds the device".into())
                })?;
                // Power-loss protection: the controller writes back what it buffers on its
                // capacitors before the flash goes dark (nand invariant 6).
                if let Some(now) = dev
                    .nand()
                    .filter(|n| n.config().plp && n.is_powered())
                    .map(|n| n.now_ns())
                {
                    dev.power_fail(now)?;
                }
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

fn no_flash() -> Error {
    Error::Unsupported("the FTL shows no flash to count on".into())
}

/// Where [`block_round`] puts the database, and how it draws the fault.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockSetup<'a> {
    /// The crash disk or an FTL on flash (not `Native`).
    pub medium: &'a Medium,
    pub page_bytes: usize,
    /// Crash disk: tear unflushed pages at sector granularity.
    pub tear_sectors: bool,
    /// Crash disk: draw the fault from this many operations instead of a dry run's count.
    pub disk_fault_ops: Option<u64>,
    /// The second cut (`crash_during_recovery`): drawn from a cut-free restart's operations
    /// (plus 5%; on flash named where it lands), counted on the device a second faulted run of
    /// the seed leaves; else from the first `Rig::restart_ops` operations of the restart.
    pub count_restart: bool,
}

/// A device with the workload's database created and loaded, ready to run.
fn prepare<W: CrashWorkload>(w: &W, s: &BlockSetup, seed: u64) -> Result<(Rig, Engine, W::Loaded)> {
    let rig = Rig::create(s.medium, seed)?;
    let mut e = Engine::create(rig.store(s)?, w.engine_config())?;
    let l = w.load(&mut e, seed)?;
    Ok((rig, e, l))
}

/// One crash-and-recover round of TPC-B for `seed` on `o.medium` ([`block_round`], or
/// `crash_native::native_round` for `Medium::Native`).
pub fn crash_once(seed: u64, o: &CrashOptions) -> Result<CrashOutcome> {
    let w = Tpcb(o);
    if matches!(o.medium, Medium::Native(_)) {
        return native_round(&w, &tpcb_native_setup(o), seed);
    }
    let txns = u64::from(o.terminals) * o.txns_per_terminal;
    let s = BlockSetup {
        medium: &o.medium,
        page_bytes: o.page_bytes,
        tear_sectors: o.tear_sectors,
        disk_fault_ops: Some((txns * 3 / 2).max(10)),
        count_restart: false,
    };
    block_round(&w, &s, seed)
}

/// Refuses TPC-B's native crash device (`Medium::Native`) if the store cannot run on it, before
/// any seed runs; other media pass.
pub fn check_native(o: &CrashOptions) -> Result<()> {
    match o.medium {
        Medium::Native(_) => tpcb_native_setup(o).check(),
        _ => Ok(()),
    }
}

/// One crash-and-recover round of workload `w` for `seed` on a block device.
///
/// The fault's operation number: on the crash disk with `disk_fault_ops`, drawn from that many
/// operations (TPC-B: 1.5 per transaction, about what it issues with group commit), so most
/// faults fall inside the workload. Otherwise (flash, where operations per transaction vary with
/// the FTL, DFTL's translation pages and GC; the crash disk for TPC-C), a dry run of the same
/// seed without a fault first counts the workload's operations (and on flash names each one);
/// the fault is drawn from that count plus 5% (a cut after the last operation: power lost while
/// idle). The dry run is exact because everything up to the fault is the same in both runs (nand
/// device.rs invariant 7; the crash disk is deterministic up to its cut).
pub(crate) fn block_round<W: CrashWorkload>(
    w: &W,
    s: &BlockSetup,
    seed: u64,
) -> Result<CrashOutcome> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (budget, count) = match (s.medium, s.disk_fault_ops) {
        (Medium::CrashDisk, Some(ops)) => (ops, OpCount::default()),
        _ => {
            let (rig, mut e, l) = prepare(w, s, seed)?;
            let start = rig.start_count()?;
            let mut dry = CrashOutcome::default();
            w.run(&mut e, &l, seed, &mut dry);
            if let Some(failed) = OpCount::failed_dry_run(seed, &dry) {
                return Ok(failed);
            }
            let count = rig.counted_since(start)?;
            (count.budget(), count)
        }
    };
    let shot = Shot::draw(w.fault(), &mut rng, budget);
    let mut out = CrashOutcome {
        seed,
        ..CrashOutcome::default()
    };
    let (rig, l, seen, paired_fired) = faulted_run(w, s, seed, shot, &mut out)?;
    if out.fault_hit {
        out.fault_landed_on = shot.landed_on(w.fault(), paired_fired, |n| count.name(n));
    }
    // Restart from the device alone (optionally crashing once more during recovery).
    let mut rig = match rig {
        Ok(r) => r,
        Err(why) => {
            out.violations.push(why);
            return Ok(out);
        }
    };
    if w.crash_during_recovery() {
        let second = if s.count_restart {
            // A cut-free restart of the same device, reached by the same faulted run again.
            let (again, ..) = faulted_run(w, s, seed, shot, &mut CrashOutcome::default())?;
            match again {
                Ok(r) => {
                    let start = r.start_count()?;
                    let restarted = Engine::open(r.store(s)?, w.engine_config()).is_ok();
                    let restart = r.counted_since(start)?;
                    restarted.then(|| {
                        let nth = rng.random_range(1..=restart.budget());
                        (nth, restart.name(nth))
                    })
                }
                // The real restart fails the same way, and the check reports it.
                Err(_) => None,
            }
        } else {
            Some((rng.random_range(1..=rig.restart_ops()), None))
        };
        if let Some((nth, name)) = second {
            rig.arm(
                Fault::PowerCut,
                Shot { nth, cut_nth: None },
                rig.ops(),
                s.tear_sectors,
            );
            let r = Engine::open(rig.store(s)?, w.engine_config());
            out.recovery_cut_hit = r.is_err();
            if out.recovery_cut_hit {
                out.recovery_cut_landed_on = name;
            }
            drop(r);
            rig = match rig.power_cycle(seed.wrapping_add(1))? {
                Ok(r) => r,
                Err(why) => {
                    out.violations.push(why);
                    return Ok(out);
                }
            };
        }
    }
    w.verify(
        Engine::open(rig.store(s)?, w.engine_config()),
        &l,
        seen,
        out,
    )
}

/// The workload with the fault armed at `shot`, then a power cycle: the device as the restart
/// finds it (`Err(why)`: it did not come back), and whether a paired-program failure fired.
#[allow(clippy::type_complexity)] // the round's four results, named in the caller
fn faulted_run<W: CrashWorkload>(
    w: &W,
    s: &BlockSetup,
    seed: u64,
    shot: Shot,
    out: &mut CrashOutcome,
) -> Result<(std::result::Result<Rig, String>, W::Loaded, W::Seen, bool)> {
    let (rig, mut e, l) = prepare(w, s, seed)?;
    let base = rig.ops();
    rig.arm(w.fault(), shot, base, s.tear_sectors);
    out.fault_at_op = base + shot.nth;
    let seen = w.run(&mut e, &l, seed, out);
    let reported = out.error_reported.is_some();
    let ops = rig.ops();
    let (hit, paired_fired) = match &rig {
        Rig::Flash(d, _) => d.with(|d| {
            let nand = d.nand();
            (
                shot.hit(w.fault(), nand, ops, base, reported),
                nand.is_some_and(paired_fault_fired),
            )
        }),
        Rig::Disk(_) => (shot.hit(w.fault(), None, ops, base, reported), false),
    };
    out.fault_hit = hit;
    drop(e);
    Ok((rig.power_cycle(seed)?, l, seen, paired_fired))
}
