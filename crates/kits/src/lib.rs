//! Benchmark kits written as code against the storage manager API, as in shore-kits.
//!
//! Each kit keeps input generation apart from execution: an input generator turns a seed into
//! the transactions' parameters, and terminals execute them step by step on the engine, in
//! virtual time (the deterministic scheduler of `storage::sched`) or in real time (threads).

mod batch;
pub mod crash;
pub mod crash_native;
mod settle;
pub mod tatp;
pub mod tpcb;
pub mod tpcc;
