//! TPC-B as the crash tests run it: the [`CrashWorkload`] ([`Tpcb`]) whose terminals record
//! every commit acknowledged and the one in flight, and the check of a restart against them
//! (the model is described in `crash`).
//!
//! Both rounds run it (`crash::crash_once` on the crash disk and the FTLs,
//! `crash_native::crash_native_once` on the NoFTL store), so it sits below both, on
//! `crash_common`.

use std::collections::{BTreeMap, BTreeSet};

use storage::{Engine, EngineConfig, Result};

use crate::crash_common::{
    engine_cfg, run_to_fault, CrashOptions, CrashOutcome, CrashWorkload, Fault,
};
use crate::tpcb::{self, Done, Handles, TpcbConfig, TpcbTerminal};

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

/// TPC-B as the crash tests run it, on every medium.
pub(crate) struct Tpcb<'a>(pub &'a CrashOptions);

impl CrashWorkload for Tpcb<'_> {
    type Loaded = Handles;
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
