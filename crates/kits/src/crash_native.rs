//! The crash test on the NoFTL page store: the same workload, model and checks as `crash.rs`,
//! with the power cut (or the failed operation) at a seeded flash operation of the emulator's
//! `FaultPlan`, and the restart from the flash alone (`NativeStore::open`: OOB scan, liveness
//! checkpoint, then ARIES).
//!
//! The device is small (a `tiny` variant of 64 blocks of 16 pages, 42% spare, a 256-block log) so that garbage
//! collection runs during the workload and the cut can fall inside a GC copy or erase.
//!
//! Invariants (what a verified seed shows):
//! 1. Every acknowledged commit survives; nothing survives whose commit was not requested.
//! 2. Balances equal the sums of the surviving transactions' deltas; TPC-B sums and the engine's
//!    structural check hold (crash.rs verify).

use nand::{DeviceConfig, FaultPlan, Nand};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::{Engine, NativeConfig, NativeStore, Result};

use crate::crash::{
    engine_cfg, run_until_fault, verify_restart, CrashOptions, CrashOutcome, Fault,
};
use crate::tpcb;

/// The crash test's flash: `tiny` with 8 blocks per plane (64 blocks, 1,024 pages of 4 KiB).
pub fn crash_device(seed: u64) -> Result<Nand> {
    tiny_device(seed, 8)
}

/// The `tiny` preset with `blocks_per_plane` blocks per plane, seeded.
pub fn tiny_device(seed: u64, blocks_per_plane: u32) -> Result<Nand> {
    let cfg = DeviceConfig::preset(
        "tiny",
        &[
            format!("geometry.blocks_per_plane={blocks_per_plane}"),
            format!("seed={seed}"),
        ],
    )
    .map_err(|e| storage::Error::Config(e.to_string()))?;
    Nand::new(cfg).map_err(|e| storage::Error::Config(e.to_string()))
}

/// Arms `fault` at a flash operation drawn from the next `budget` ones of the engine's native
/// store; returns the operation's number.
pub fn arm_native(
    e: &mut Engine,
    fault: Fault,
    rng: &mut Xoshiro256PlusPlus,
    budget: u64,
) -> Result<u64> {
    let nand = e
        .store_mut()
        .nand_mut()
        .ok_or_else(|| storage::Error::Config("the native store has no flash".into()))?;
    let at = nand.ops_issued() + rng.random_range(1..=budget.max(1));
    nand.set_fault_plan(fault.plan_at(at));
    Ok(at)
}

/// The flash under the engine's native store, for power-on and recovery.
pub fn native_flash_back(e: Engine) -> Result<Nand> {
    e.into_store()
        .into_nand()
        .ok_or_else(|| storage::Error::Config("the native store gave no flash back".into()))
}

pub fn crash_store_config(o: &CrashOptions) -> NativeConfig {
    NativeConfig {
        page_bytes: o.page_bytes,
        log_blocks: Some(256),
        spare_factor: 0.42,
        ..NativeConfig::default()
    }
}

/// One crash-and-recover round for `seed` on the native store.
pub fn crash_native_once(seed: u64, o: &CrashOptions) -> Result<CrashOutcome> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let store = NativeStore::format(crash_device(seed)?, crash_store_config(o))?;
    let mut e = Engine::create(Box::new(store), engine_cfg(o))?;
    let h = tpcb::load(&mut e, o.tpcb, |_| {})?;
    e.checkpoint()?;
    // About four flash operations per transaction here (page reads, write-backs, log blocks).
    let budget = (u64::from(o.terminals) * o.txns_per_terminal * 4).max(10);
    let at = arm_native(&mut e, o.fault, &mut rng, budget)?;
    let mut out = CrashOutcome {
        seed,
        fault_at_op: at,
        ..CrashOutcome::default()
    };
    let (acked, maybe) = run_until_fault(&mut e, h, o, seed, &mut out);
    let mut nand = native_flash_back(e)?;
    // Power goes off now if the fault did not already cut it, and comes back.
    nand.set_fault_plan(FaultPlan::default());
    nand.power_cut();
    nand.power_on();
    let store = match NativeStore::open(nand, crash_store_config(o)) {
        Ok(s) => s,
        Err(err) => {
            out.violations.push(format!("flash recovery failed: {err}"));
            return Ok(out);
        }
    };
    verify_restart(
        Engine::open(Box::new(store), engine_cfg(o)),
        h,
        o.tpcb,
        &acked,
        &maybe,
        out,
    )
}
