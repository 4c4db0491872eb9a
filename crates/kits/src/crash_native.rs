//! The crash test on the NoFTL page store: the same workload, model and checks as `crash.rs`,
//! with the power cut (or the failed operation) at a seeded flash operation of the emulator's
//! `FaultPlan`, and the restart from the flash alone (`NativeStore::open`: map checkpoint and
//! the OOB written since, then ARIES). [`native_round`] runs one seed of any workload
//! (`crash_common::CrashWorkload`: TPC-B in `crash_tpcb`, TPC-C in `tpcc::crash`), on the device
//! its [`NativeSetup`] sizes (TPC-B's: [`tpcb_native_setup`]).
//!
//! The device is small (for TPC-B a `tiny` variant of 64 blocks of 16 pages, 42% spare, a
//! 256-block log) and aged before the database is created, for power cuts and media errors
//! alike and with the regions asked for created first, as `crash::age` ages an FTL: every
//! DB page is written once (zeros), then seeded random pages again until the store has started
//! collecting garbage, through the store, so that its blocks hold a mix of valid and stale
//! pages and its free blocks are down to the collection threshold. The workload's writes then
//! make the store collect garbage, and the cut can fall on a GC copy (its read or its program),
//! a GC erase, or a map checkpoint written while collecting. Names of the operations cut:
//! "program mapping" is a map checkpoint page, "program meta" a master record (or the region
//! table), "program log" the log, "program host" a DB page.
//! (Without ageing the database and the workload fit in the free blocks, and no cut of 2,000
//! seeds landed on GC.) The aged pages the engine never allocates stay valid until the restart's
//! `retain_allocated` frees them.
//!
//! The fault's operation: a dry run of the same seed without a fault on an identical device
//! counts and names the workload's flash operations (`crash_common::OpCount`); the fault is
//! drawn from that count plus 5%, so nearly every fault lands inside the workload, and its
//! operation is named ("program gc", "erase gc", "program log", ...).
//!
//! The second cut (`CrashOptions::crash_during_recovery`): power goes off again during the
//! restart, which then fails and gives the flash back (`NativeStore::open_or_give_back`,
//! `Engine::open_or_give_back`); the flash is power-cycled and recovered again, and that restart
//! is verified. Where the cut lands is exact too: a second run to the same fault, restarted
//! without a cut, counts the restart's operations, those of `NativeStore::open` (checkpoint and
//! OOB reads, the region table, the spaces' restores with their erases of half-erased blocks and
//! moves off grown-bad blocks) and those of `Engine::open` (ARIES, `retain_allocated`,
//! checkpoint) apart; the cut falls in either part with even odds (the recovery reads would
//! otherwise take nearly every cut), in the engine's part from its count plus 5%.
//!
//! Invariants (what a verified seed shows):
//! 1. Every acknowledged commit survives; nothing survives whose commit was not requested.
//! 2. Balances equal the sums of the surviving transactions' deltas; TPC-B sums and the engine's
//!    structural check hold (crash_tpcb.rs verify).
//! 3. With the second cut, 1 and 2 hold after the restart that follows it.
//!
//! Everything depends on the seed only: the workload, both cut points, the device's bit errors.

use nand::{DeviceConfig, FaultPlan, Nand};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::pagestore::{PageKind, WriteHint};
use storage::{Engine, Error, NativeConfig, NativeStore, PageStore, Result};

use crate::crash_common::{
    paired_fault_fired, CrashOptions, CrashOutcome, CrashWorkload, Fault, Medium, NativeDevice,
    OpCount, Shot, TRACE_ENTRIES,
};
use crate::crash_tpcb::Tpcb;

/// The region that holds the log when the crash test puts it in one (`NativeDevice::log_region`).
pub const LOG_REGION: &str = "crash_log";

/// The region that takes every object when the crash test runs In-Place Appends
/// (`NativeDevice::ipa_region`).
pub const IPA_REGION: &str = "crash_ipa";

impl NativeDevice {
    /// The device for `seed`: `blocks_per_plane` sizes the workload's own.
    pub fn nand(&self, seed: u64, blocks_per_plane: u32) -> Result<Nand> {
        match &self.device {
            None => tiny_device(seed, blocks_per_plane, &self.overrides),
            Some(cfg) => Nand::new(DeviceConfig {
                seed,
                // The report names the operation each fault landed on from the trace.
                trace_entries: cfg.trace_entries.max(TRACE_ENTRIES),
                ..cfg.clone()
            })
            .map_err(|e| Error::Config(e.to_string())),
        }
    }

    /// Creates the log's and the IPA region on a freshly formatted store, as asked.
    pub fn create_regions(&self, store: &mut NativeStore) -> Result<()> {
        for (name, opts) in [
            (LOG_REGION, &self.log_region),
            (IPA_REGION, &self.ipa_region),
        ] {
            if let Some(opts) = opts {
                let at = store.space().nand().now_ns();
                store.create_region(at, name, opts)?;
            }
        }
        Ok(())
    }
}

/// TPC-B's crash-test flash: `tiny` with 8 blocks per plane (64 blocks, 1,024 pages of 4 KiB).
pub const CRASH_BLOCKS_PER_PLANE: u32 = 8;

/// TPC-B's crash-test flash ([`CRASH_BLOCKS_PER_PLANE`]).
pub fn crash_device(seed: u64) -> Result<Nand> {
    tiny_device(seed, CRASH_BLOCKS_PER_PLANE, &[])
}

/// The `tiny` preset with `blocks_per_plane` blocks per plane, seeded, with a trace, then
/// `overrides` (`KEY=VALUE`, e.g. `cell.native=mlc`).
pub fn tiny_device(seed: u64, blocks_per_plane: u32, overrides: &[String]) -> Result<Nand> {
    let mut sets = vec![
        format!("geometry.blocks_per_plane={blocks_per_plane}"),
        format!("seed={seed}"),
        format!("trace_entries={TRACE_ENTRIES}"),
    ];
    sets.extend(overrides.iter().cloned());
    let cfg = DeviceConfig::preset("tiny", &sets).map_err(|e| Error::Config(e.to_string()))?;
    Nand::new(cfg).map_err(|e| Error::Config(e.to_string()))
}

/// The flash under the engine's native store, for power-on and recovery.
pub fn native_flash_back(e: Engine) -> Result<Nand> {
    flash_of(e.into_store())
}

fn flash_of(store: Box<dyn PageStore>) -> Result<Nand> {
    store
        .into_nand()
        .ok_or_else(|| Error::Config("the native store gave no flash back".into()))
}

fn flash(e: &mut Engine) -> Result<&mut Nand> {
    e.store_mut()
        .nand_mut()
        .ok_or_else(|| Error::Config("the native store has no flash".into()))
}

/// Power goes off now if a fault did not already cut it, and comes back, with no fault armed.
fn power_cycle(nand: &mut Nand) {
    nand.set_fault_plan(FaultPlan::default());
    nand.power_cut();
    nand.power_on();
}

pub fn crash_store_config(o: &CrashOptions) -> NativeConfig {
    NativeConfig {
        page_bytes: o.page_bytes,
        log_blocks: Some(256),
        spare_factor: 0.42,
        ..NativeConfig::default()
    }
}

/// How much of the native crash device is aged ([`age`]): all of it, for power cuts and media
/// errors alike. (Media errors once ran on the unaged device, and the ageing was once capped at
/// 90%: both hid recovery bugs that only a fully written store shows, issue 32.)
pub(crate) const NATIVE_AGED_FRACTION: f64 = 1.0;

/// TPC-B's native device: `tiny` with 8 blocks per plane (`crash_native::crash_device`).
pub(crate) fn tpcb_native_setup(o: &CrashOptions) -> NativeSetup {
    NativeSetup {
        device: match &o.medium {
            Medium::Native(d) => d.clone(),
            _ => NativeDevice::default(),
        },
        blocks_per_plane: CRASH_BLOCKS_PER_PLANE,
        store: crash_store_config(o),
        aged_fraction: NATIVE_AGED_FRACTION,
    }
}

/// The native store a workload runs on in [`native_round`].
#[derive(Clone, Debug)]
pub(crate) struct NativeSetup {
    /// The flash; its own device is `tiny` with `blocks_per_plane` blocks per plane
    /// ([`tiny_device`]).
    pub device: NativeDevice,
    pub blocks_per_plane: u32,
    pub store: NativeConfig,
    /// DB pages written (zeros) before the database is created, as a fraction of them
    /// ([`age`]).
    pub aged_fraction: f64,
}

impl NativeSetup {
    /// The seed's flash, fresh: identical for every run of the seed.
    fn device(&self, seed: u64) -> Result<Nand> {
        self.device.nand(seed, self.blocks_per_plane)
    }
    /// Refuses a device the store cannot be formatted on, before any seed runs.
    pub(crate) fn check(&self) -> Result<()> {
        let mut store = NativeStore::format(self.device(0)?, self.store.clone())?;
        self.device.create_regions(&mut store)
    }
}

/// Ages the store as `crash::age` ages an FTL: writes zeros over the first `fraction` of its DB
/// pages, then over seeded random ones of those again, page by page, until the store has erased
/// a block to reclaim space (at least a quarter of them, at most eight times as many: the 42%
/// spare of the crash devices takes more than `crash::age`'s one quarter to use up), and
/// syncs. Zeros read as a never-written page to the engine, so the database still finds an
/// empty device.
fn age(store: &mut NativeStore, fraction: f64, seed: u64) -> Result<()> {
    let db_pages = store.db_pages();
    let mut pages = ((db_pages as f64 * fraction.clamp(0.0, 1.0)) as u64).min(db_pages);
    // A region that takes every object (the IPA crash test) holds less than the whole logical
    // space: age what it can hold, less a tenth for the database. Only then: the default
    // region holds every DB page, and is aged in full (a cap of 90% there once hid a
    // recovery bug, issue 32).
    let room = store.room_pages(0);
    if room < db_pages {
        pages = pages.min(room * 9 / 10);
    }
    let zeros = vec![0u8; store.page_bytes()];
    // Placement only: the pages belong to no object the engine will create.
    let hint = WriteHint {
        object: 0,
        kind: PageKind::Heap,
    };
    let mut t = 0;
    for pid in 0..pages {
        t = store.write_page(t, pid as storage::PageId, &zeros, hint)?;
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xA9E);
    let collecting = |st: &NativeStore| st.device_report().is_some_and(|r| r.gc.erases > 0);
    let mut n = 0;
    while pages > 0 && n < 8 * pages && (n < pages / 4 || !collecting(store)) {
        let pid = rng.random_range(0..pages) as storage::PageId;
        t = store.write_page(t, pid, &zeros, hint)?;
        n += 1;
    }
    store.sync_pages(t)?;
    Ok(())
}

/// The database loaded on a freshly formatted, aged device.
fn prepare<W: CrashWorkload>(w: &W, s: &NativeSetup, seed: u64) -> Result<(Engine, W::Loaded)> {
    let mut store = NativeStore::format(s.device(seed)?, s.store.clone())?;
    s.device.create_regions(&mut store)?;
    age(&mut store, s.aged_fraction, seed)?;
    let mut e = Engine::create(Box::new(store), w.engine_config())?;
    let l = w.load(&mut e, seed)?;
    Ok((e, l))
}

/// The workload with the fault armed at `shot`, then a power cycle: the flash as the restart
/// finds it, and whether a paired-program failure fired.
fn faulted_run<W: CrashWorkload>(
    w: &W,
    s: &NativeSetup,
    seed: u64,
    shot: Shot,
    out: &mut CrashOutcome,
) -> Result<(Nand, W::Loaded, W::Seen, bool)> {
    let (mut e, l) = prepare(w, s, seed)?;
    let nand = flash(&mut e)?;
    let base = nand.ops_issued();
    nand.set_fault_plan(shot.plan(w.fault(), base));
    out.fault_at_op = base + shot.nth;
    let seen = w.run(&mut e, &l, seed, out);
    let mut nand = native_flash_back(e)?;
    // A media error the store absorbed (GC retiring a block whose erase failed) reaches no one
    // (`Shot::hit` says how each fault is judged).
    let reported = out.error_reported.is_some();
    out.fault_hit = shot.hit(w.fault(), Some(&nand), nand.ops_issued(), base, reported);
    let paired_fired = paired_fault_fired(&nand);
    power_cycle(&mut nand);
    Ok((nand, l, seen, paired_fired))
}

/// A restart's flash operations: `NativeStore::open`'s, then `Engine::open`'s.
struct RestartCount {
    store: OpCount,
    engine: OpCount,
}

impl RestartCount {
    /// Restarts `nand` without a cut and counts; `None` if the restart failed (the real one
    /// then fails the same way, and the check reports it).
    fn measure<W: CrashWorkload>(
        w: &W,
        s: &NativeSetup,
        mut nand: Nand,
    ) -> Result<Option<RestartCount>> {
        let start = OpCount::start(&mut nand);
        let Ok(mut store) = NativeStore::open(nand, s.store.clone()) else {
            return Ok(None);
        };
        let dev = store
            .nand_mut()
            .ok_or_else(|| Error::Config("the native store has no flash".into()))?;
        let store_ops = OpCount::since(dev, start);
        let start = OpCount::start(dev);
        let Ok(mut e) = Engine::open(Box::new(store), w.engine_config()) else {
            return Ok(None);
        };
        let engine_ops = OpCount::since(flash(&mut e)?, start);
        Ok(Some(RestartCount {
            store: store_ops,
            engine: engine_ops,
        }))
    }

    /// The second cut's operation, 1-based from the restart's start, and its name.
    fn draw(&self, rng: &mut Xoshiro256PlusPlus) -> (u64, Option<String>) {
        let store_ops = self.store.ops;
        let in_store = store_ops > 0 && rng.random_bool(0.5);
        if in_store {
            let nth = rng.random_range(1..=store_ops);
            (nth, self.store.name(nth))
        } else {
            let nth = rng.random_range(1..=self.engine.budget());
            (self.store.ops + nth, self.engine.name(nth))
        }
    }
}

/// The restart with a second power cut at its `nth` operation, then a power cycle. The restart
/// must fail when the cut hits it (and may only fail then); either way the flash comes back.
fn cut_restart<W: CrashWorkload>(
    w: &W,
    s: &NativeSetup,
    mut nand: Nand,
    nth: u64,
    name: Option<String>,
    out: &mut CrashOutcome,
) -> Result<Nand> {
    let at = nand.ops_issued() + nth;
    nand.set_fault_plan(Fault::PowerCut.plan_at(at));
    let (r, mut nand) = match NativeStore::open_or_give_back(nand, s.store.clone()) {
        Ok(store) => match Engine::open_or_give_back(Box::new(store), w.engine_config()) {
            Ok(e) => (Ok(()), native_flash_back(e)?),
            Err((err, store)) => (Err(err), flash_of(store)?),
        },
        Err((err, nand)) => (Err(err), *nand),
    };
    out.recovery_cut_hit = nand.ops_issued() >= at;
    if out.recovery_cut_hit {
        out.recovery_cut_landed_on = name;
    } else if let Err(err) = r {
        out.violations
            .push(format!("the restart failed before the second cut: {err}"));
    }
    power_cycle(&mut nand);
    Ok(nand)
}

/// One crash-and-recover round of workload `w` for `seed` on the native store `s`.
pub(crate) fn native_round<W: CrashWorkload>(
    w: &W,
    s: &NativeSetup,
    seed: u64,
) -> Result<CrashOutcome> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (mut e, l) = prepare(w, s, seed)?;
    let start = OpCount::start(flash(&mut e)?);
    let mut dry = CrashOutcome::default();
    w.run(&mut e, &l, seed, &mut dry);
    if let Some(failed) = OpCount::failed_dry_run(seed, &dry) {
        return Ok(failed);
    }
    let work = OpCount::since(flash(&mut e)?, start);
    drop(e);
    let shot = Shot::draw(w.fault(), &mut rng, work.budget());
    let mut out = CrashOutcome {
        seed,
        ..CrashOutcome::default()
    };
    let second_cut = if w.crash_during_recovery() {
        let mut scratch = out.clone();
        let (nand, ..) = faulted_run(w, s, seed, shot, &mut scratch)?;
        RestartCount::measure(w, s, nand)?.map(|c| c.draw(&mut rng))
    } else {
        None
    };
    let (mut nand, l, seen, paired_fired) = faulted_run(w, s, seed, shot, &mut out)?;
    if out.fault_hit {
        out.fault_landed_on = shot.landed_on(w.fault(), paired_fired, |n| work.name(n));
    }
    if let Some((cut, name)) = second_cut {
        nand = cut_restart(w, s, nand, cut, name, &mut out)?;
    }
    let store = match NativeStore::open(nand, s.store.clone()) {
        Ok(s) => s,
        Err(err) => {
            out.violations.push(format!("flash recovery failed: {err}"));
            return Ok(out);
        }
    };
    w.verify(
        Engine::open(Box::new(store), w.engine_config()),
        &l,
        seen,
        out,
    )
}

/// One crash-and-recover round of TPC-B for `seed` on the native store.
/// (`crash::crash_once` with `Medium::Native` runs this too).
pub fn crash_native_once(seed: u64, o: &CrashOptions) -> Result<CrashOutcome> {
    native_round(&Tpcb(o), &tpcb_native_setup(o), seed)
}
