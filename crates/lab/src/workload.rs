//! The one seam every transactional workload implements, and the one runner that drives a
//! measured window of any of them.
//!
//! A [`Workload`] knows its database (how big it will be, how to load it) and makes the
//! terminals that run against it; a [`WorkloadTerminal`] is a `storage::sched::Terminal` that
//! also reports what the runner counts (transactions that count for throughput, their latencies,
//! New-Orders for TPC-C's NOTPM, the per-transaction events of result directories).
//! [`run_window`] runs such terminals for one window in virtual time and returns a [`Ran`];
//! [`reach_steady_state`] runs them in rounds until the steady-state rule holds.
//!
//! Adding a workload: one file under `workloads/` implementing both traits, and one line in
//! `workloads::REGISTRY` (the test `a_workload_is_one_file_and_one_registration_line` shows a
//! small one).
//!
//! Invariants:
//! 1. A workload's load and its terminals' inputs are functions of its config and the seed:
//!    the same config and seed give the same database and the same transactions.
//! 2. `run_window` counts only what the window's terminals did: counters start at zero with
//!    the terminals it makes.

use std::any::Any;

use hdrhistogram::Histogram;
use kits::LoadMethod;
use storage::sched::{SchedStats, Step, Terminal, TxnEvent, VirtualOptions};
use storage::Engine;

/// The handles of a loaded database, whatever the workload; only the workload that loaded it
/// reads them (`Workload::terminals` downcasts).
pub type Loaded = Box<dyn Any + Send + Sync>;

/// A transactional workload: its database and its terminals.
pub trait Workload: Send + Sync + std::fmt::Debug {
    /// The name on the command line and in result files, e.g. `tpcb`.
    fn name(&self) -> &'static str;
    /// The name in human output, e.g. `TPC-B`.
    fn label(&self) -> &'static str;
    /// How the database is loaded when `asked` (None: the workload's default); refused with a
    /// message when the workload has no such loader.
    fn load_method(&self, asked: Option<LoadMethod>) -> anyhow::Result<LoadMethod> {
        Ok(asked.unwrap_or_default())
    }
    /// The database's size in 4 KiB DB pages, estimated before loading (to size devices and
    /// refuse what cannot fit before any work).
    fn db_pages_estimate(&self) -> u64;
    /// Rows the load inserts, for its progress bar.
    fn rows_estimate(&self) -> u64;
    /// Loads the database into `e`, calling `progress` with the rows loaded so far.
    fn load(
        &self,
        e: &mut Engine,
        method: LoadMethod,
        progress: &dyn Fn(u64),
    ) -> anyhow::Result<Loaded>;
    /// `n` terminals on the loaded database, drawing their inputs from `seed`.
    fn terminals(
        &self,
        loaded: &Loaded,
        n: u32,
        seed: u64,
    ) -> anyhow::Result<Vec<Box<dyn WorkloadTerminal>>>;
    /// TPC-C's warehouse choice, for the workloads that have one.
    fn home_warehouse(&self) -> Option<kits::tpcc::HomeWarehouse> {
        None
    }
    /// The names of its transaction types, in the order of `TxnEvent::kind` (result files).
    fn txn_types(&self) -> Vec<&'static str>;
    /// Whether the workload counts New-Orders (TPC-C's NOTPM).
    fn counts_new_orders(&self) -> bool {
        false
    }
}

/// A terminal of a [`Workload`], with the counters the runner reads.
pub trait WorkloadTerminal: Terminal + Send {
    /// Transactions that count for throughput: committed (TPC-B, TPC-C) or successful (TATP).
    fn counted(&self) -> u64;
    /// The latencies of the transactions it ended.
    fn latency_ns(&self) -> &Histogram<u64>;
    /// Completed New-Orders, counting the rolled-back 1% as NOTPM does (TPC-C); else 0.
    fn new_orders(&self) -> u64 {
        0
    }
    /// Start recording one event per ended transaction (result directories).
    fn record_events(&mut self);
    /// The recorded events, if recording.
    fn take_events(&mut self) -> Option<Vec<TxnEvent>>;
}

/// The `WorkloadTerminal` of a kit's terminal: every kit keeps its latencies in `latency_ns`
/// and its events in `events: Option<Vec<TxnEvent>>`; what differs is which transactions
/// count (`counted`) and whether New-Orders are counted (`new_orders`, TPC-C).
#[macro_export]
macro_rules! kit_terminal {
    ($t:ty, counted: |$c:ident| $counted:expr $(, new_orders: |$n:ident| $new_orders:expr)?) => {
        impl $crate::workload::WorkloadTerminal for $t {
            fn counted(&self) -> u64 {
                let $c = self;
                $counted
            }
            fn latency_ns(&self) -> &hdrhistogram::Histogram<u64> {
                &self.latency_ns
            }
            $(fn new_orders(&self) -> u64 {
                let $n = self;
                $new_orders
            })?
            fn record_events(&mut self) {
                self.events = Some(Vec::new());
            }
            fn take_events(&mut self) -> Option<Vec<storage::sched::TxnEvent>> {
                self.events.take()
            }
        }
    };
}

/// `Box` is fundamental, so a boxed workload terminal is a scheduler terminal: the scheduler
/// stays generic and every workload runs through it the same way.
impl Terminal for Box<dyn WorkloadTerminal> {
    fn step(&mut self, eng: &mut Engine) -> storage::Result<Step> {
        (**self).step(eng)
    }
    fn durable(&mut self, eng: &mut Engine) -> storage::Result<()> {
        (**self).durable(eng)
    }
    fn in_transaction(&self) -> bool {
        (**self).in_transaction()
    }
}

/// What one measured window gave.
#[derive(Debug)]
pub struct Ran {
    /// Committed (TPC-B, TPC-C) or successful (TATP) transactions.
    pub counted: u64,
    /// Transactions with a recorded latency, and the sum of their latencies.
    pub latency_txns: u64,
    pub latency_sum_ns: f64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub checkpoints: u64,
    pub ended_on_checkpoint: bool,
    /// TPC-C: completed New-Orders (NOTPM counts the rolled-back 1% too); else 0.
    pub new_orders: u64,
    /// With samples (result directories): the window's marks and transactions.
    pub trace: Option<crate::results::Trace>,
}

impl Ran {
    /// The window's figures from the terminals' counters and the scheduler's statistics.
    pub fn new<'a>(
        counted: u64,
        latencies: impl Iterator<Item = &'a Histogram<u64>>,
        st: &SchedStats,
        new_orders: u64,
    ) -> Ran {
        let (mut n, mut sum) = (0, 0.0);
        for h in latencies {
            n += h.len();
            sum += h.mean() * h.len() as f64;
        }
        Ran {
            counted,
            latency_txns: n,
            latency_sum_ns: sum,
            start_ns: st.start_ns,
            end_ns: st.end_ns,
            checkpoints: st.checkpoints,
            ended_on_checkpoint: st.ended_on_checkpoint,
            new_orders,
            trace: None,
        }
    }
}

/// Runs `terminals` terminals of `w` on its loaded database from `start` with `opts` (the
/// measured window of `storage::sched::run_virtual`), marking the store's counters every
/// `sample_ns` when given (result directories).
#[allow(clippy::too_many_arguments)]
pub fn run_window(
    w: &dyn Workload,
    e: &mut Engine,
    loaded: &Loaded,
    terminals: u32,
    seed: u64,
    start: u64,
    opts: VirtualOptions,
    sample_ns: Option<u64>,
) -> anyhow::Result<Ran> {
    let mut terms = w.terminals(loaded, terminals, seed)?;
    debug_assert_eq!(
        terms.len(),
        terminals as usize,
        "one terminal per terminal asked"
    );
    if sample_ns.is_some() {
        terms.iter_mut().for_each(|t| t.record_events());
    }
    let (st, marks) = crate::runner::run_virtual_marked(e, &mut terms, start, opts, sample_ns)?;
    let mut ran = Ran::new(
        terms.iter().map(|t| t.counted()).sum(),
        terms.iter().map(|t| t.latency_ns()),
        &st,
        terms.iter().map(|t| t.new_orders()).sum(),
    );
    ran.trace = sample_ns.map(|_| {
        crate::results::Trace::of_terminals(
            Vec::new(),
            marks,
            terms.iter_mut().map(|t| t.take_events()),
        )
    });
    Ok(ran)
}

/// How a verb brings a loaded database to steady state before it measures (`crate::steady`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SteadySpec {
    /// Preconditioning: the workload runs until the host has written the device over this many
    /// times since it was formatted (the load included); 0 for none.
    pub precondition_device_writes: f64,
    /// One round, virtual time.
    pub round_ns: u64,
    /// The cap on rounds; 0: no rounds, and the result says it was not checked.
    pub max_rounds: u32,
    /// Rounds end at the first checkpoint after `round_ns` (whole checkpoint cycles, as
    /// `compare`'s measured windows do), waiting at most `ROUND_CHECKPOINT_WAIT` rounds for it.
    pub whole_checkpoint_cycles: bool,
}

/// How many round lengths a round may go on past its length to end on a checkpoint.
const ROUND_CHECKPOINT_WAIT: u64 = 30;

/// Inputs of the preconditioning and the rounds: never a measured window's (those draw
/// seed + k from the user's seed).
const STEADY_SEED: u64 = 0x5354_4541_4459;

/// Brings `w`'s loaded database on `e` to steady state (`crate::steady`): preconditioning
/// slices of one round each until the device writes, then rounds until the rule holds or the
/// cap, each slice and round with fresh terminals drawing other inputs than any measured
/// window. Returns the verdict; the engine stands where the measured window may begin.
pub fn reach_steady_state(
    w: &dyn Workload,
    e: &mut Engine,
    loaded: &Loaded,
    terminals: u32,
    spec: &SteadySpec,
) -> anyhow::Result<crate::steady::SteadyState> {
    use crate::steady::{SteadyState, Writes, PRECONDITION_MAX_NS};
    let start = e.now();
    let mut slice = 0u64;
    let run_slice = |e: &mut Engine, slice: u64| -> anyhow::Result<u64> {
        let now = e.now();
        let opts = VirtualOptions {
            until_ns: Some(now + spec.round_ns),
            end_on_checkpoint_within_ns: spec
                .whole_checkpoint_cycles
                .then(|| spec.round_ns.saturating_mul(ROUND_CHECKPOINT_WAIT)),
            ..VirtualOptions::default()
        };
        let seed = STEADY_SEED.wrapping_add(slice);
        let ran = run_window(w, e, loaded, terminals, seed, now, opts, None)?;
        // The slice stopped mid-transaction: end those before the next terminals start.
        e.quiesce()?;
        Ok(ran.counted)
    };
    while Writes::device_writes_of(e.store().nand()) < spec.precondition_device_writes
        && e.now() - start < PRECONDITION_MAX_NS
    {
        run_slice(e, slice)?;
        slice += 1;
    }
    if spec.max_rounds == 0 {
        return Ok(SteadyState::skipped(Writes::device_writes_of(
            e.store().nand(),
        )));
    }
    let rounds = crate::runner::engine_rounds(e, spec.max_rounds, |e, k| {
        run_slice(e, slice + u64::from(k))
    })?;
    Ok(SteadyState::of(
        &rounds,
        Writes::device_writes_of(e.store().nand()),
    ))
}

/// What a workload is made from: the parameters an experiment gives every workload, the
/// scale in the workload's own unit (branches, subscribers, warehouses) and the few knobs
/// only some workloads read.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// None: the workload's default scale.
    pub scale: Option<u32>,
    /// The population's seed (TATP); run seeds are the runner's.
    pub seed: u64,
    /// TPC-B: accounts per branch (the specification's 100,000).
    pub accounts_per_branch: u32,
    /// TPC-C: a REDUCED population (items, customers per district), for tests.
    pub tpcc_reduced: Option<(u32, u32)>,
    /// TPC-C: how a terminal picks its home warehouse (`fixed` or `random`; None: random).
    pub home_warehouse: Option<String>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            scale: None,
            seed: 1,
            accounts_per_branch: 100_000,
            tpcc_reduced: None,
            home_warehouse: None,
        }
    }
}

/// One registered workload: its name and how to make it.
#[derive(Clone, Copy, Debug)]
pub struct Registration {
    pub name: &'static str,
    /// One line for listings and help.
    pub about: &'static str,
    /// The scale when none is given.
    pub default_scale: u32,
    /// Makes the workload at `scale` from the parameters.
    pub make: fn(scale: u32, p: &Params) -> anyhow::Result<Box<dyn Workload>>,
}

/// The handles a workload left in `loaded`, or an error naming the workload (a database loaded
/// by another workload).
pub fn handles<'a, T: 'static>(loaded: &'a Loaded, workload: &str) -> anyhow::Result<&'a T> {
    loaded
        .downcast_ref::<T>()
        .ok_or_else(|| anyhow::anyhow!("the database was not loaded by {workload}"))
}
