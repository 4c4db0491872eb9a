//! The crash test for TPC-C on the NoFTL page store: a reduced TPC-C database on a small flash
//! device, terminals running the full mix, a power cut at a seeded flash operation, recovery
//! from the flash alone (`NativeStore::open`, then ARIES), and a check.
//!
//! Model: terminals record every acknowledged commit and the one in flight (kits::crash's
//! approach). Verified (what a verified seed shows):
//! 1. Every acknowledged New-Order's order exists after recovery, with its O_OL_CNT.
//! 2. Orders and history rows added since the load number at least the acknowledged New-Orders
//!    and Payments, and at most those plus the ones whose commit was in flight (nothing
//!    unrequested survives).
//! 3. The consistency conditions of clause 3.3.2 hold (condition 11 too when no Delivery was
//!    acknowledged or in flight), and the engine's structural check passes.
//!
//! Everything depends on the seed only.

use nand::FaultPlan;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::sched::{run_virtual, VirtualOptions};
use storage::tuple::Value;
use storage::{Engine, EngineConfig, NativeConfig, NativeStore, Result};

use super::input::Kind;
use super::txn::{Done, TpccTerminal};
use super::{check, load, Handles, NurandConsts, TpccConfig};
use crate::crash::{CrashOutcome, Fault};
use crate::crash_native::{arm_native, native_flash_back, tiny_device};

#[derive(Clone, Debug)]
pub struct TpccCrashOptions {
    pub fault: Fault,
    pub terminals: u32,
    pub txns_per_terminal: u64,
    pub buffer_frames: usize,
    /// A REDUCED population (tests): the crash device holds about 2,000 flash pages.
    pub tpcc: TpccConfig,
}

impl Default for TpccCrashOptions {
    fn default() -> Self {
        TpccCrashOptions {
            fault: Fault::PowerCut,
            terminals: 2,
            txns_per_terminal: 30,
            buffer_frames: 48,
            tpcc: TpccConfig::reduced(1, 500, 20),
        }
    }
}

fn store_cfg() -> NativeConfig {
    NativeConfig {
        log_blocks: Some(256),
        spare_factor: 0.42,
        ..NativeConfig::default()
    }
}

fn engine_cfg(o: &TpccCrashOptions) -> EngineConfig {
    EngineConfig {
        buffer_frames: o.buffer_frames,
        ..EngineConfig::default()
    }
}

fn count(e: &mut Engine, table: storage::ObjectId) -> Result<u64> {
    let t = e.begin()?;
    let n = e.scan_table(t, table)?.len() as u64;
    e.commit(t)?;
    Ok(n)
}

/// One crash-and-recover round for `seed`.
pub fn crash_tpcc_native_once(seed: u64, o: &TpccCrashOptions) -> Result<CrashOutcome> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let store = NativeStore::format(tiny_device(seed, 16)?, store_cfg())?;
    let mut e = Engine::create(Box::new(store), engine_cfg(o))?;
    let loaded = load(&mut e, o.tpcc, seed, |_| {})?;
    e.checkpoint()?;
    let h: Handles = loaded.h;
    let orders0 = count(&mut e, h.orders)?;
    let history0 = count(&mut e, h.history)?;
    // About ten flash operations per TPC-C transaction here (reads, write-backs, log blocks).
    let budget = (u64::from(o.terminals) * o.txns_per_terminal * 10).max(10);
    let at = arm_native(&mut e, o.fault, &mut rng, budget)?;
    let mut out = CrashOutcome {
        seed,
        fault_at_op: at,
        ..CrashOutcome::default()
    };
    let run = NurandConsts::run_from(loaded.c_load, seed);
    let mut terms: Vec<TpccTerminal> = (0..o.terminals)
        .map(|i| {
            let mut t = TpccTerminal::new(i, h, o.tpcc, run, seed, Some(o.txns_per_terminal));
            t.record = true;
            t
        })
        .collect();
    let start = e.now();
    if let Err(err) = run_virtual(&mut e, &mut terms, start, VirtualOptions::default()) {
        out.fault_hit = true;
        out.error_reported = Some(err.to_string());
    }
    let acked: Vec<Done> = terms.iter().flat_map(|t| t.acked.iter().copied()).collect();
    let maybe: Vec<Done> = terms.iter().filter_map(|t| t.in_flight).collect();
    out.acknowledged = acked.len() as u64;
    let mut nand = native_flash_back(e)?;
    nand.set_fault_plan(FaultPlan::default());
    nand.power_cut();
    nand.power_on();
    let store = match NativeStore::open(nand, store_cfg()) {
        Ok(s) => s,
        Err(err) => {
            out.violations.push(format!("flash recovery failed: {err}"));
            return Ok(out);
        }
    };
    let mut e = match Engine::open(Box::new(store), engine_cfg(o)) {
        Ok(e) => e,
        Err(err) => {
            out.violations.push(format!("recovery failed: {err}"));
            return Ok(out);
        }
    };
    if let Err(err) = verify(&mut e, h, o, &acked, &maybe, orders0, history0, &mut out) {
        // An error reading the recovered database is a failed recovery, not a harness error.
        out.violations
            .push(format!("reading the recovered database failed: {err}"));
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)] // the model's parts, named
fn verify(
    e: &mut Engine,
    h: Handles,
    o: &TpccCrashOptions,
    acked: &[Done],
    maybe: &[Done],
    orders0: u64,
    history0: u64,
    out: &mut CrashOutcome,
) -> Result<()> {
    // 1. Acknowledged New-Orders survive.
    let t = e.begin()?;
    for d in acked.iter().filter(|d| d.kind == Kind::NewOrder) {
        let key = [
            Value::Int(i64::from(d.w_id)),
            Value::Int(i64::from(d.d_id)),
            Value::Int(i64::from(d.o_id)),
        ];
        let rids = e.lookup(t, h.orders_pk, &key, false)?;
        let cnt = match rids.first() {
            Some(&r) => e
                .get(t, h.orders, r)?
                .and_then(|row| row[super::col::O_OL_CNT].as_i64()),
            None => None,
        };
        if cnt != Some(i64::from(d.ol_cnt)) {
            out.violations.push(format!(
                "acknowledged New-Order {}/{}/{} is missing or changed after recovery ({cnt:?})",
                d.w_id, d.d_id, d.o_id
            ));
            break;
        }
    }
    e.commit(t)?;
    // 2. Nothing unrequested survives.
    let n = |v: &[Done], k: Kind| v.iter().filter(|d| d.kind == k).count() as u64;
    let orders = count(e, h.orders)?.saturating_sub(orders0);
    let history = count(e, h.history)?.saturating_sub(history0);
    out.recovered = orders + history;
    for (name, got, k) in [
        ("orders", orders, Kind::NewOrder),
        ("history rows", history, Kind::Payment),
    ] {
        let (lo, hi) = (n(acked, k), n(acked, k) + n(maybe, k));
        if got < lo || got > hi {
            out.violations.push(format!(
                "{got} new {name} after recovery; acknowledged {lo}, at most {hi} requested"
            ));
        }
    }
    // 3. Clause 3.3.2.
    let no_delivery = n(acked, Kind::Delivery) + n(maybe, Kind::Delivery) == 0;
    let rep = check(e, o.tpcc, no_delivery)?;
    out.violations.extend(rep.problems);
    Ok(())
}
