//! The crash test on the NoFTL page store: the same workload, model and checks as `crash.rs`,
//! with the power cut (or the failed operation) at a seeded flash operation of the emulator's
//! `FaultPlan`, and the restart from the flash alone (`NativeStore::open`: map checkpoint and
//! the OOB written since, then ARIES). [`native_round`] runs one seed of any workload ([`NativeWorkload`]:
//! TPC-B here, TPC-C in `tpcc::crash`).
//!
//! The device is small (a `tiny` variant of 64 blocks of 16 pages, 42% spare, a 256-block log) so that garbage
//! collection runs during the workload and the cut can fall inside a GC copy or erase.
//!
//! The fault's operation: a dry run of the same seed without a fault on an identical device
//! counts and names the workload's flash operations (`crash::OpCount`); the fault is drawn from
//! that count plus 5%, so nearly every fault lands inside the workload, and its operation is
//! named ("program gc", "erase gc", "program log", ...).
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
//!    structural check hold (crash.rs verify).
//! 3. With the second cut, 1 and 2 hold after the restart that follows it.
//!
//! Everything depends on the seed only: the workload, both cut points, the device's bit errors.

use nand::{DeviceConfig, FaultPlan, Nand};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::{Engine, EngineConfig, Error, NativeConfig, NativeStore, PageStore, Result};

use crate::crash::{
    engine_cfg, run_until_fault, verify_restart, CrashOptions, CrashOutcome, Fault, OpCount,
};
use crate::tpcb::{self, Done, Handles};

/// Flash trace kept from the start of a count, to name the operation a cut hits: more than a
/// workload and a restart of the crash tests issue.
const TRACE_ENTRIES: usize = 1 << 16;

/// The crash test's flash: `tiny` with 8 blocks per plane (64 blocks, 1,024 pages of 4 KiB).
pub fn crash_device(seed: u64) -> Result<Nand> {
    tiny_device(seed, 8)
}

/// The `tiny` preset with `blocks_per_plane` blocks per plane, seeded, with a trace.
pub fn tiny_device(seed: u64, blocks_per_plane: u32) -> Result<Nand> {
    let cfg = DeviceConfig::preset(
        "tiny",
        &[
            format!("geometry.blocks_per_plane={blocks_per_plane}"),
            format!("seed={seed}"),
            format!("trace_entries={TRACE_ENTRIES}"),
        ],
    )
    .map_err(|e| Error::Config(e.to_string()))?;
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

/// A workload of the native crash test, run the same way for every seed by [`native_round`].
pub(crate) trait NativeWorkload {
    /// What the check needs from the load (table handles, row counts).
    type Loaded;
    /// What the terminals saw (the commits acknowledged and those in flight).
    type Seen;
    fn fault(&self) -> Fault;
    fn crash_during_recovery(&self) -> bool;
    fn store_config(&self) -> NativeConfig;
    fn engine_config(&self) -> EngineConfig;
    /// The seed's flash, fresh: identical for every run of the seed.
    fn device(&self, seed: u64) -> Result<Nand>;
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

/// The database loaded on a freshly formatted device.
fn prepare<W: NativeWorkload>(w: &W, seed: u64) -> Result<(Engine, W::Loaded)> {
    let store = NativeStore::format(w.device(seed)?, w.store_config())?;
    let mut e = Engine::create(Box::new(store), w.engine_config())?;
    let l = w.load(&mut e, seed)?;
    Ok((e, l))
}

/// The workload with the fault armed at its `nth` flash operation, then a power cycle: the flash
/// as the restart finds it.
fn faulted_run<W: NativeWorkload>(
    w: &W,
    seed: u64,
    nth: u64,
    out: &mut CrashOutcome,
) -> Result<(Nand, W::Loaded, W::Seen)> {
    let (mut e, l) = prepare(w, seed)?;
    let nand = flash(&mut e)?;
    let at = nand.ops_issued() + nth;
    nand.set_fault_plan(w.fault().plan_at(at));
    out.fault_at_op = at;
    let seen = w.run(&mut e, &l, seed, out);
    let mut nand = native_flash_back(e)?;
    // A media error the store absorbed (GC retiring a block whose erase failed) reaches no one,
    // so "hit" is judged by the operation count.
    out.fault_hit = out.error_reported.is_some() || nand.ops_issued() >= at;
    power_cycle(&mut nand);
    Ok((nand, l, seen))
}

/// A restart's flash operations: `NativeStore::open`'s, then `Engine::open`'s.
struct RestartCount {
    store: OpCount,
    engine: OpCount,
}

impl RestartCount {
    /// Restarts `nand` without a cut and counts; `None` if the restart failed (the real one
    /// then fails the same way, and the check reports it).
    fn measure<W: NativeWorkload>(w: &W, mut nand: Nand) -> Result<Option<RestartCount>> {
        let start = OpCount::start(&mut nand);
        let Ok(mut store) = NativeStore::open(nand, w.store_config()) else {
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
fn cut_restart<W: NativeWorkload>(
    w: &W,
    mut nand: Nand,
    nth: u64,
    name: Option<String>,
    out: &mut CrashOutcome,
) -> Result<Nand> {
    let at = nand.ops_issued() + nth;
    nand.set_fault_plan(Fault::PowerCut.plan_at(at));
    let (r, mut nand) = match NativeStore::open_or_give_back(nand, w.store_config()) {
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

/// One crash-and-recover round of workload `w` for `seed` on the native store.
pub(crate) fn native_round<W: NativeWorkload>(w: &W, seed: u64) -> Result<CrashOutcome> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (mut e, l) = prepare(w, seed)?;
    let start = OpCount::start(flash(&mut e)?);
    let mut dry = CrashOutcome::default();
    w.run(&mut e, &l, seed, &mut dry);
    let work = OpCount::of_dry_run(flash(&mut e)?, start, seed, &dry)?;
    drop(e);
    let nth = rng.random_range(1..=work.budget());
    let mut out = CrashOutcome {
        seed,
        ..CrashOutcome::default()
    };
    let second_cut = if w.crash_during_recovery() {
        let mut scratch = out.clone();
        let (nand, _, _) = faulted_run(w, seed, nth, &mut scratch)?;
        RestartCount::measure(w, nand)?.map(|c| c.draw(&mut rng))
    } else {
        None
    };
    let (mut nand, l, seen) = faulted_run(w, seed, nth, &mut out)?;
    if out.fault_hit {
        out.fault_landed_on = work.name(nth);
    }
    if let Some((cut, name)) = second_cut {
        nand = cut_restart(w, nand, cut, name, &mut out)?;
    }
    let store = match NativeStore::open(nand, w.store_config()) {
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

/// TPC-B as `crash.rs` runs it.
struct Tpcb<'a>(&'a CrashOptions);

impl NativeWorkload for Tpcb<'_> {
    type Loaded = Handles;
    type Seen = (Vec<Done>, Vec<Done>);
    fn fault(&self) -> Fault {
        self.0.fault
    }
    fn crash_during_recovery(&self) -> bool {
        self.0.crash_during_recovery
    }
    fn store_config(&self) -> NativeConfig {
        crash_store_config(self.0)
    }
    fn engine_config(&self) -> EngineConfig {
        engine_cfg(self.0)
    }
    fn device(&self, seed: u64) -> Result<Nand> {
        crash_device(seed)
    }
    fn load(&self, e: &mut Engine, _seed: u64) -> Result<Handles> {
        let h = tpcb::load(e, self.0.tpcb, |_| {})?;
        e.checkpoint()?;
        Ok(h)
    }
    fn run(&self, e: &mut Engine, h: &Handles, seed: u64, out: &mut CrashOutcome) -> Self::Seen {
        run_until_fault(e, *h, self.0, seed, out)
    }
    fn verify(
        &self,
        r: Result<Engine>,
        h: &Handles,
        (acked, maybe): Self::Seen,
        out: CrashOutcome,
    ) -> Result<CrashOutcome> {
        verify_restart(r, *h, self.0.tpcb, &acked, &maybe, out)
    }
}

/// One crash-and-recover round of TPC-B for `seed` on the native store.
pub fn crash_native_once(seed: u64, o: &CrashOptions) -> Result<CrashOutcome> {
    native_round(&Tpcb(o), seed)
}
