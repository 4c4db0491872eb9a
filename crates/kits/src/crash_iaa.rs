//! The crash test of the IAA workload (`noftl crashtest --workload iaa`): random Insert, Delete
//! and Update queries on a table with IAA and U2DI on, on an aged device whose GC is running
//! (so victims are committed and rows move into hinted pages), cut at a seeded flash
//! operation; after the restart the table, its index and the engine's structures are checked
//! against the terminals' model (the same rounds as TPC-B: `crash::block_round` on an FTL,
//! `crash_native::native_round` on the NoFTL store).
//!
//! Model: each terminal owns its keys and knows, per key, the version its acknowledged queries
//! left (`IaaTerminal::rows`), plus at most one query whose commit was requested and not
//! acknowledged (`IaaTerminal::in_flight`). Verified after recovery: (1) every acknowledged
//! query's effect is there; (2) the only other effect allowed is the in-flight query's, whole;
//! (3) every row's content is its version's; (4) the primary-key index maps every row's key to
//! its record id and holds nothing else (U2DI moved rows: the index followed under the WAL);
//! (5) the engine's structural check passes.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use storage::tuple::Value;
use storage::{Engine, EngineConfig, Result};

use crate::crash::{block_round, BlockSetup};
use crate::crash_common::{
    engine_cfg, run_to_fault, CrashOptions, CrashOutcome, CrashWorkload, Fault, Medium,
};
use crate::crash_native::{native_round, tpcb_native_setup};
use crate::iaa::{self, Handles, IaaConfig, IaaTerminal, Scheme};

/// The table of the crash test: small enough for the crash devices, IAA and U2DI on.
pub fn crash_config() -> IaaConfig {
    IaaConfig {
        rows: 600,
        row_bytes: 256,
        weights: [1, 1, 1],
        slack: 0.05,
        density: 0.8,
        scheme: Scheme::IaaU2di,
    }
}

struct Iaa<'a>(&'a CrashOptions);

/// Rows moved by U2DI and records placed in hinted pages by the crash rounds of this process
/// (before their faults): evidence that the cuts fall while rows move (tests read it).
static MOVED_UPDATES: AtomicU64 = AtomicU64::new(0);
static HINTED_INSERTS: AtomicU64 = AtomicU64::new(0);

/// (rows moved by U2DI, records placed in hinted pages) over the crash rounds run so far.
pub fn exercised() -> (u64, u64) {
    (
        MOVED_UPDATES.load(Ordering::Relaxed),
        HINTED_INSERTS.load(Ordering::Relaxed),
    )
}

/// (acknowledged rows, in-flight queries) of all terminals.
type Seen = (Vec<(i64, i64)>, Vec<(i64, Option<i64>)>);

impl CrashWorkload for Iaa<'_> {
    type Loaded = Handles;
    type Seen = Seen;
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
        let h = iaa::load(e, &crash_config(), |_| {})?;
        e.checkpoint()?;
        Ok(h)
    }
    fn run(&self, e: &mut Engine, h: &Handles, seed: u64, out: &mut CrashOutcome) -> Seen {
        let mut terms: Vec<IaaTerminal> = (0..self.0.terminals)
            .map(|i| {
                IaaTerminal::new(
                    i,
                    self.0.terminals,
                    *h,
                    crash_config(),
                    seed,
                    Some(self.0.txns_per_terminal),
                )
            })
            .collect();
        let s0 = e.iaa_stats();
        run_to_fault(e, &mut terms, out);
        let s1 = e.iaa_stats();
        MOVED_UPDATES.fetch_add(s1.moved_updates - s0.moved_updates, Ordering::Relaxed);
        HINTED_INSERTS.fetch_add(s1.hinted_inserts - s0.hinted_inserts, Ordering::Relaxed);
        out.acknowledged = terms.iter().map(|t| t.committed).sum();
        (
            terms.iter().flat_map(|t| t.rows().to_vec()).collect(),
            terms.iter().filter_map(IaaTerminal::in_flight).collect(),
        )
    }
    fn verify(
        &self,
        r: Result<Engine>,
        h: &Handles,
        (acked, maybe): Seen,
        mut out: CrashOutcome,
    ) -> Result<CrashOutcome> {
        let mut e = match r {
            Ok(e) => e,
            Err(err) => {
                out.violations.push(format!("recovery failed: {err}"));
                return Ok(out);
            }
        };
        verify_rows(&mut e, *h, &acked, &maybe, &mut out)?;
        Ok(out)
    }
}

/// Checks (1)-(5) of the module doc.
fn verify_rows(
    e: &mut Engine,
    h: Handles,
    acked: &[(i64, i64)],
    maybe: &[(i64, Option<i64>)],
    out: &mut CrashOutcome,
) -> Result<()> {
    let cfg = crash_config();
    let want: HashMap<i64, i64> = acked.iter().copied().collect();
    let alt: HashMap<i64, Option<i64>> = maybe.iter().copied().collect();
    let schema = e.catalog().tables[&h.table].schema.clone();
    let t = e.begin()?;
    let rows = e.scan_table(t, h.table)?;
    let mut seen = HashSet::new();
    for (rid, bytes) in &rows {
        let vals = schema.decode(bytes)?;
        let (id, ver) = (
            vals[0].as_i64().unwrap_or(-1),
            vals[1].as_i64().unwrap_or(-1),
        );
        if !seen.insert(id) {
            out.violations.push(format!("row {id} appears twice"));
        }
        let ok = want.get(&id) == Some(&ver) || alt.get(&id) == Some(&Some(ver));
        if !ok {
            out.violations.push(format!(
                "row {id} has version {ver}; acknowledged {:?}, in flight {:?}",
                want.get(&id),
                alt.get(&id)
            ));
        }
        if bytes != &iaa::row(e, h, &cfg, id, ver)? {
            out.violations
                .push(format!("row {id}: content is not version {ver}'s"));
        }
        let rids = e.lookup(t, h.pk, &[Value::Int(id)], false)?;
        if rids != vec![*rid] {
            out.violations.push(format!(
                "index entry of row {id}: {rids:?}, the row is at {rid:?}"
            ));
        }
    }
    for (id, _) in acked {
        if !seen.contains(id) && alt.get(id) != Some(&None) {
            out.violations
                .push(format!("acknowledged row {id} is missing after recovery"));
            break;
        }
    }
    let entries = e.scan_index(t, h.pk, None, None, false, usize::MAX)?.len();
    if entries != rows.len() {
        out.violations.push(format!(
            "the index holds {entries} entries for {} rows",
            rows.len()
        ));
    }
    e.commit(t)?;
    out.recovered = rows.len() as u64;
    out.violations.extend(e.check()?);
    Ok(())
}

/// One crash-and-recover round of the IAA workload for `seed` on `o.medium`.
pub fn crash_iaa_once(seed: u64, o: &CrashOptions) -> Result<CrashOutcome> {
    let w = Iaa(o);
    if matches!(o.medium, Medium::Native(_)) {
        // TPC-B's native device (and its --preset/--set/--log-region, if given).
        return native_round(&w, &tpcb_native_setup(o), seed);
    }
    let s = BlockSetup {
        medium: &o.medium,
        page_bytes: o.page_bytes,
        tear_sectors: o.tear_sectors,
        disk_fault_ops: None,
        count_restart: false,
    };
    block_round(&w, &s, seed)
}
