//! The deterministic crash test: a TPC-B workload on a device that loses power (or fails an
//! I/O) at a seeded random operation, a restart from the device alone, and a check against a
//! reference model.
//!
//! Model: the terminals record every commit they saw acknowledged and the one whose commit was
//! in flight. After recovery the history table names the transactions that survived (`h_seq`).
//! Verified: (1) every acknowledged commit survived; (2) nothing survived that was not at least
//! requested (no uncommitted or invented transaction); (3) every account, teller and branch
//! balance equals the sum of the surviving transactions' deltas (so no partial transaction is
//! visible); (4) the TPC-B sums hold and the engine's structural check passes (indexes agree
//! with heaps, every page checksum is valid); (5) optionally, a second power cut during recovery
//! followed by another recovery gives the same result.
//!
//! Everything depends on the seed only: the workload, the cut point and which unflushed writes
//! persist.

use std::collections::{BTreeMap, BTreeSet};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::crashdisk::{CrashDisk, CrashPlan, SharedCrashDisk};
use storage::sched::{run_virtual, VirtualOptions};
use storage::{BlockPageStore, Engine, EngineConfig, Result};

use crate::tpcb::{self, Done, Handles, TpcbConfig, TpcbTerminal};

/// What to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Fault {
    PowerCut,
    IoError,
}

#[derive(Clone, Debug)]
pub struct CrashOptions {
    pub fault: Fault,
    pub page_bytes: usize,
    /// Unflushed pages may tear inside a 4 KiB page (forces full-page writes on).
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
            fault: Fault::PowerCut,
            page_bytes: 4096,
            tear_sectors: false,
            crash_during_recovery: false,
            unsafe_ack_before_force: false,
            terminals: 4,
            txns_per_terminal: 40,
            buffer_frames: 24,
            tpcb: TpcbConfig { scale: 2, tellers_per_branch: 10, accounts_per_branch: 300 },
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CrashOutcome {
    pub seed: u64,
    pub fault_at_op: u64,
    /// The workload ran into the fault (else power was cut after it finished).
    pub fault_hit: bool,
    pub error_reported: Option<String>,
    pub acknowledged: u64,
    pub recovered: u64,
    pub violations: Vec<String>,
}

impl CrashOutcome {
    pub fn verified(&self) -> bool {
        self.violations.is_empty()
    }
}

const DISK_PAGES: u64 = 6144;
const LOG_BLOCKS: u64 = 1024;

pub(crate) fn engine_cfg(o: &CrashOptions) -> EngineConfig {
    EngineConfig {
        buffer_frames: o.buffer_frames,
        full_page_writes: if o.tear_sectors { Some(true) } else { None },
        unsafe_ack_before_force: o.unsafe_ack_before_force,
        ..EngineConfig::default()
    }
}

fn open(disk: CrashDisk, o: &CrashOptions) -> (SharedCrashDisk, Result<Engine>) {
    let shared = SharedCrashDisk::new(disk);
    let store = match BlockPageStore::new(Box::new(shared.clone()), o.page_bytes, Some(LOG_BLOCKS)) {
        Ok(s) => s,
        Err(e) => return (shared, Err(e)),
    };
    let r = Engine::open(Box::new(store), engine_cfg(o));
    (shared, r)
}

/// One crash-and-recover round for `seed`.
pub fn crash_once(seed: u64, o: &CrashOptions) -> Result<CrashOutcome> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let disk = SharedCrashDisk::new(CrashDisk::new(DISK_PAGES));
    let store = BlockPageStore::new(Box::new(disk.clone()), o.page_bytes, Some(LOG_BLOCKS))?;
    let mut e = Engine::create(Box::new(store), engine_cfg(o))?;
    let h = tpcb::load(&mut e, o.tpcb, |_| {})?;
    e.checkpoint()?;
    let ops0 = disk.ops();
    // The workload issues about 1.7 device operations per transaction here (group commit).
    let budget = (u64::from(o.terminals) * o.txns_per_terminal * 3 / 2).max(10);
    let at = ops0 + rng.random_range(1..=budget);
    let tear = o.tear_sectors;
    disk.set_plan(match o.fault {
        Fault::PowerCut => CrashPlan { cut_at_op: Some(at), fail_op: None, tear_sectors: tear },
        Fault::IoError => CrashPlan { cut_at_op: None, fail_op: Some(at), tear_sectors: tear },
    });
    let mut out = CrashOutcome { seed, fault_at_op: at, ..CrashOutcome::default() };
    let (acked, maybe) = run_until_fault(&mut e, h, o, seed, &mut out);
    drop(e);
    disk.cut_power();

    // Restart from the device alone (optionally crashing once more during recovery).
    let mut image = disk.after_power_loss(seed);
    if o.crash_during_recovery {
        let probe = SharedCrashDisk::new(image.clone());
        let cut = rng.random_range(1..=40u64);
        probe.set_plan(CrashPlan { cut_at_op: Some(cut), fail_op: None, tear_sectors: tear });
        let store = BlockPageStore::new(Box::new(probe.clone()), o.page_bytes, Some(LOG_BLOCKS))?;
        let r = Engine::open(Box::new(store), engine_cfg(o));
        drop(r);
        probe.cut_power();
        image = probe.after_power_loss(seed.wrapping_add(1));
    }
    let (_d, r) = open(image, o);
    verify_restart(r, h, o.tpcb, &acked, &maybe, out)
}

/// Verifies the engine a restart gave, or records that the restart failed.
pub(crate) fn verify_restart(r: Result<Engine>, h: Handles, cfg: TpcbConfig, acked: &[Done], maybe: &[Done], mut out: CrashOutcome) -> Result<CrashOutcome> {
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
pub(crate) fn run_until_fault(e: &mut Engine, h: Handles, o: &CrashOptions, seed: u64, out: &mut CrashOutcome) -> (Vec<Done>, Vec<Done>) {
    let mut terms: Vec<TpcbTerminal> = (0..o.terminals)
        .map(|i| {
            let mut t = TpcbTerminal::new(i, h, o.tpcb, seed, Some(o.txns_per_terminal));
            t.record = true;
            t
        })
        .collect();
    let start = e.now();
    if let Err(err) = run_virtual(e, &mut terms, start, VirtualOptions::default()) {
        // A read error may leave the engine running; either way the test restarts from the
        // device below.
        out.fault_hit = true;
        out.error_reported = Some(err.to_string());
    }
    let acked: Vec<Done> = terms.iter().flat_map(|t| t.acked.iter().copied()).collect();
    let maybe: Vec<Done> = terms.iter().filter_map(|t| t.in_flight).collect();
    out.acknowledged = acked.len() as u64;
    (acked, maybe)
}

fn verify(e: &mut Engine, h: Handles, cfg: TpcbConfig, acked: &[Done], maybe: &[Done], out: &mut CrashOutcome) -> Result<()> {
    let history = tpcb::rows(e, h.history)?;
    let seqs: BTreeSet<i64> = history.iter().filter_map(|r| r[5].as_i64()).collect();
    if seqs.len() != history.len() {
        out.violations.push("a transaction's history row appears twice".into());
    }
    out.recovered = seqs.len() as u64;
    let known: BTreeMap<i64, Done> = acked.iter().chain(maybe).map(|d| (d.seq, *d)).collect();
    for d in acked {
        if !seqs.contains(&d.seq) {
            out.violations.push(format!("acknowledged commit {:#x} is missing after recovery", d.seq));
            break;
        }
    }
    let mut acct: BTreeMap<i64, i64> = BTreeMap::new();
    let mut tell: BTreeMap<i64, i64> = BTreeMap::new();
    let mut bran: BTreeMap<i64, i64> = BTreeMap::new();
    for s in &seqs {
        match known.get(s) {
            None => {
                out.violations.push(format!("transaction {s:#x} is visible but its commit was never requested"));
                break;
            }
            Some(d) => {
                *acct.entry(i64::from(d.input.account)).or_default() += d.input.delta_cents;
                *tell.entry(i64::from(d.input.teller)).or_default() += d.input.delta_cents;
                *bran.entry(i64::from(d.input.branch)).or_default() += d.input.delta_cents;
            }
        }
    }
    for (table, col, model, name) in [(h.account, 2, &acct, "account"), (h.teller, 2, &tell, "teller"), (h.branch, 1, &bran, "branch")] {
        for r in tpcb::rows(e, table)? {
            let id = r[0].as_i64().unwrap_or(-1);
            let bal = r[col].as_i64().unwrap_or(i64::MIN);
            let want = model.get(&id).copied().unwrap_or(0);
            if bal != want {
                out.violations.push(format!("{name} {id} has balance {bal}, the surviving transactions give {want}"));
                break;
            }
        }
    }
    let rep = tpcb::check(e, cfg)?;
    out.violations.extend(rep.problems);
    Ok(())
}
