//! The crash test for TPC-C: a reduced TPC-C database on a small device, terminals running the
//! full mix, a power cut (or a failed operation) at a seeded device operation drawn from a dry
//! run's count, optionally a second cut during the restart, recovery from the device alone, and
//! a check. The workload is written once ([`CrashWorkload`]) and runs in every medium's
//! round: `crash_native::native_round` on the NoFTL store (`NativeStore::open`, then ARIES),
//! `crash::block_round` on an FTL on flash (the FTL recovered by `ftl::open`, then ARIES) and on
//! the crash disk.
//!
//! Devices: native `tiny` with 16 blocks per plane (128 blocks of 16 pages, 42% spare, a
//! 256-page log); on the FTLs and the crash disk the devices of TPC-B's crash test
//! (`crash::FlashMedium::new`: the aged `tiny` with 12 blocks per plane, 15% spare, a 1.5 MiB
//! log; the crash disk's 24 MiB), which hold the reduced population with room for 2,000
//! transactions.
//!
//! The second cut on a block device is drawn from the operations of a cut-free restart of the
//! same device (`crash::BlockSetup::count_restart`), so it can land anywhere in the engine's
//! restart (the FTL's own recovery, `ftl::open`, cannot be cut: it does not give the flash back
//! on failure); on flash it is named ("read host", "program gc", ...).
//!
//! Model: terminals record every acknowledged commit and the one in flight (kits::crash's
//! approach). Verified (what a verified seed shows):
//! 1. Every acknowledged New-Order's order exists after recovery, with its O_OL_CNT.
//! 2. Orders and history rows added since the load number at least the acknowledged New-Orders
//!    and Payments, and at most those plus the ones whose commit was in flight (nothing
//!    unrequested survives).
//! 3. The consistency conditions of clause 3.3.2 hold (condition 11 too when no Delivery was
//!    acknowledged or in flight), and the engine's structural check passes.
//! 4. With the second cut, 1 to 3 hold after the restart that follows it.
//!
//! Everything depends on the seed only.

use storage::tuple::Value;
use storage::{Engine, EngineConfig, NativeConfig, Result};

use super::config::{NurandConsts, TpccConfig};
use super::input::Kind;
use super::txn::{Done, TpccTerminal};
use super::{check, load, Handles};
use crate::crash::{block_round, BlockSetup};
use crate::crash_common::{run_to_fault, CrashOutcome, CrashWorkload, Fault, Medium};
use crate::crash_native::{native_round, NativeSetup, NATIVE_AGED_FRACTION};

/// The native device's blocks per plane (`tiny`: 8 planes of 16-page blocks).
const NATIVE_BLOCKS_PER_PLANE: u32 = 16;

#[derive(Clone, Debug)]
pub struct TpccCrashOptions {
    /// Where the database lives.
    pub medium: Medium,
    pub fault: Fault,
    pub terminals: u32,
    pub txns_per_terminal: u64,
    pub buffer_frames: usize,
    /// Also cut power during the first recovery, then recover again.
    pub crash_during_recovery: bool,
    /// The canary: acknowledge commits before the log force.
    pub unsafe_ack_before_force: bool,
    /// The DB page size (4, 8 or 16 KiB).
    pub page_bytes: usize,
    /// Crash disk: tear unflushed pages at sector granularity (turns full-page writes on).
    pub tear_sectors: bool,
    /// A REDUCED population (tests): the crash device holds about 2,000 flash pages.
    pub tpcc: TpccConfig,
}

impl Default for TpccCrashOptions {
    fn default() -> Self {
        TpccCrashOptions {
            medium: Medium::Native(Default::default()),
            fault: Fault::PowerCut,
            terminals: 2,
            txns_per_terminal: 30,
            buffer_frames: 48,
            crash_during_recovery: false,
            unsafe_ack_before_force: false,
            page_bytes: 4096,
            tear_sectors: false,
            tpcc: TpccConfig::reduced(1, 500, 20),
        }
    }
}

/// Refuses TPC-C's native crash device (`Medium::Native`) if the store cannot run on it, before
/// any seed runs; other media pass.
pub fn check_native(o: &TpccCrashOptions) -> Result<()> {
    match o.medium {
        Medium::Native(_) => native_setup(o).check(),
        _ => Ok(()),
    }
}

fn native_setup(o: &TpccCrashOptions) -> NativeSetup {
    NativeSetup {
        device: match &o.medium {
            Medium::Native(d) => d.clone(),
            _ => Default::default(),
        },
        blocks_per_plane: NATIVE_BLOCKS_PER_PLANE,
        store: NativeConfig {
            page_bytes: o.page_bytes,
            log_blocks: Some(256),
            spare_factor: 0.42,
            ..NativeConfig::default()
        },
        aged_fraction: NATIVE_AGED_FRACTION,
    }
}

fn engine_cfg(o: &TpccCrashOptions) -> EngineConfig {
    EngineConfig {
        buffer_frames: o.buffer_frames,
        full_page_writes: if o.tear_sectors { Some(true) } else { None },
        unsafe_ack_before_force: o.unsafe_ack_before_force,
        ..EngineConfig::default()
    }
}

fn count(e: &mut Engine, table: storage::ObjectId) -> Result<u64> {
    let t = e.begin()?;
    let n = e.scan_table(t, table)?.len() as u64;
    e.commit(t)?;
    Ok(n)
}

/// What the check needs from the load.
struct AfterLoad {
    h: Handles,
    run: NurandConsts,
    orders0: u64,
    history0: u64,
}

struct Tpcc<'a>(&'a TpccCrashOptions);

impl CrashWorkload for Tpcc<'_> {
    type Loaded = AfterLoad;
    /// The commits acknowledged and those in flight.
    type Seen = (Vec<Done>, Vec<Done>);
    fn fault(&self) -> Fault {
        self.0.fault
    }
    fn crash_during_recovery(&self) -> bool {
        self.0.crash_during_recovery
    }
    fn engine_config(&self) -> EngineConfig {
        engine_cfg(self.0)
    }
    fn load(&self, e: &mut Engine, seed: u64) -> Result<AfterLoad> {
        let loaded = load(e, self.0.tpcc, seed, |_| {})?;
        e.checkpoint()?;
        Ok(AfterLoad {
            h: loaded.h,
            run: NurandConsts::run_from(loaded.c_load, seed),
            orders0: count(e, loaded.h.orders)?,
            history0: count(e, loaded.h.history)?,
        })
    }
    fn run(&self, e: &mut Engine, l: &AfterLoad, seed: u64, out: &mut CrashOutcome) -> Self::Seen {
        let o = self.0;
        let mut terms: Vec<TpccTerminal> = (0..o.terminals)
            .map(|i| {
                let mut t =
                    TpccTerminal::new(i, l.h, o.tpcc, l.run, seed, Some(o.txns_per_terminal));
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
    fn verify(
        &self,
        r: Result<Engine>,
        l: &AfterLoad,
        (acked, maybe): Self::Seen,
        mut out: CrashOutcome,
    ) -> Result<CrashOutcome> {
        let mut e = match r {
            Ok(e) => e,
            Err(err) => {
                out.violations.push(format!("recovery failed: {err}"));
                return Ok(out);
            }
        };
        let (h, o) = (l.h, self.0);
        if let Err(err) = verify(
            &mut e, h, o, &acked, &maybe, l.orders0, l.history0, &mut out,
        ) {
            // An error reading the recovered database is a failed recovery, not a harness error.
            out.violations
                .push(format!("reading the recovered database failed: {err}"));
        }
        Ok(out)
    }
}

/// One crash-and-recover round for `seed` on `o.medium` (`crash_native::native_round` on
/// `Medium::Native`, `crash::block_round` on the others: the fault drawn from a dry run's
/// operations, optionally a second cut during the restart).
pub fn crash_tpcc_once(seed: u64, o: &TpccCrashOptions) -> Result<CrashOutcome> {
    round(&Tpcc(o), o, seed)
}

/// One round of `w` (TPC-C, or a test's variant of it) on `o.medium`.
fn round<W: CrashWorkload>(w: &W, o: &TpccCrashOptions, seed: u64) -> Result<CrashOutcome> {
    match &o.medium {
        Medium::Native(_) => native_round(w, &native_setup(o), seed),
        medium => block_round(
            w,
            &BlockSetup {
                medium,
                page_bytes: o.page_bytes,
                tear_sectors: o.tear_sectors,
                disk_fault_ops: None,
                count_restart: true,
            },
            seed,
        ),
    }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

    use super::*;

    /// TPC-C whose run reports an error for one seed: the stand-in for any fault-free dry run
    /// that fails (the engine's or the harness's bug; a full log once did it on the block FTL).
    struct FailsFor<'a> {
        tpcc: Tpcc<'a>,
        seed: u64,
    }

    impl CrashWorkload for FailsFor<'_> {
        type Loaded = AfterLoad;
        type Seen = (Vec<Done>, Vec<Done>);
        fn fault(&self) -> Fault {
            self.tpcc.fault()
        }
        fn crash_during_recovery(&self) -> bool {
            self.tpcc.crash_during_recovery()
        }
        fn engine_config(&self) -> EngineConfig {
            self.tpcc.engine_config()
        }
        fn load(&self, e: &mut Engine, seed: u64) -> Result<AfterLoad> {
            self.tpcc.load(e, seed)
        }
        fn run(
            &self,
            e: &mut Engine,
            l: &AfterLoad,
            seed: u64,
            out: &mut CrashOutcome,
        ) -> Self::Seen {
            let seen = self.tpcc.run(e, l, seed, out);
            if seed == self.seed {
                out.error_reported = Some("the log is full (a stand-in)".into());
            }
            seen
        }
        fn verify(
            &self,
            r: Result<Engine>,
            l: &AfterLoad,
            seen: Self::Seen,
            out: CrashOutcome,
        ) -> Result<CrashOutcome> {
            self.tpcc.verify(r, l, seen, out)
        }
    }

    /// A seed whose fault-free dry run fails is that seed's failure, named in the report, and the
    /// campaign goes on to the next seed (it once stopped the whole run with an error, losing
    /// every verdict before it), on the block media and on the native store alike.
    #[test]
    fn a_failed_dry_run_is_the_seeds_failure_and_the_campaign_goes_on() {
        let crash_disk = TpccCrashOptions {
            medium: Medium::CrashDisk,
            ..TpccCrashOptions::default()
        };
        let native = TpccCrashOptions::default();
        for o in [&crash_disk, &native] {
            let w = FailsFor {
                tpcc: Tpcc(o),
                seed: 11,
            };
            for seed in 10..13 {
                let out = round(&w, o, seed)
                    .unwrap_or_else(|e| panic!("seed {seed} ended the campaign: {e}"));
                if seed == 11 {
                    assert!(!out.verified());
                    assert_eq!(out.seed, 11);
                    assert!(
                        out.violations[0].contains("the fault-free dry run failed")
                            && out.violations[0].contains("the log is full (a stand-in)"),
                        "{:?}",
                        out.violations
                    );
                } else {
                    assert!(out.verified(), "seed {seed}: {:?}", out.violations);
                }
            }
        }
    }
}
