//! `noftl compare --workload tpcc`: the TPC-C parts of the comparison (load, terminals, the
//! NoFTL Fig. 3 reference line). Everything else (device sizing, rows, statistics, layout) is the
//! comparison's own, shared with TPC-B.
//!
//! Invariant: every row loads the same population with the same seed and runs the same inputs
//! (seed + repeat index, run constants derived from the load constants per clause 2.1.6.1).

use kits::tpcc::{self, NurandConsts, TpccConfig, TpccTerminal};
use storage::{Engine, Result};

use super::Ran;

/// The load's seed: fixed, so that every row and repeat holds the same database.
const LOAD_SEED: u64 = 0x7C;

pub fn load(
    e: &mut Engine,
    cfg: TpccConfig,
    method: kits::LoadMethod,
    progress: &dyn Fn(u64),
) -> Result<tpcc::load::Loaded> {
    tpcc::load_using(e, cfg, tpcc::DDL, LOAD_SEED, method, progress)
}

#[allow(clippy::too_many_arguments)]
pub fn run(
    e: &mut Engine,
    l: &tpcc::load::Loaded,
    cfg: TpccConfig,
    terminals: u32,
    seed: u64,
    start: u64,
    opts: storage::sched::VirtualOptions,
    sample_ns: Option<u64>,
) -> anyhow::Result<Ran> {
    let run_c = NurandConsts::run_from(l.c_load, seed);
    let mut terms: Vec<TpccTerminal> = (0..terminals)
        .map(|i| TpccTerminal::new(i, l.h, cfg, run_c, seed, None))
        .collect();
    if sample_ns.is_some() {
        terms.iter_mut().for_each(|t| t.events = Some(Vec::new()));
    }
    let (st, marks) = lab::runner::run_virtual_marked(e, &mut terms, start, opts, sample_ns)?;
    let mut ran = Ran::new(
        terms.iter().map(|t| t.committed()).sum(),
        terms.iter().map(|t| &t.latency_ns),
        &st,
        terms
            .iter()
            .map(|t| t.counts.committed[0] + t.counts.rolled_back)
            .sum(),
    );
    ran.trace = sample_ns.map(|_| {
        lab::results::Trace::of_terminals(
            Vec::new(),
            marks,
            terms.iter_mut().map(|t| t.events.take()),
        )
    });
    Ok(ran)
}
