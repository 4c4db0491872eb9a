//! Benchmark kits written as code against the storage manager API, as in shore-kits.
//!
//! Each kit keeps input generation apart from execution: an input generator turns a seed into
//! the transactions' parameters, and terminals execute them step by step on the engine, in
//! virtual time (the deterministic scheduler of `storage::sched`) or in real time (threads).

mod batch;
pub mod crash;
pub mod crash_iaa;
pub mod crash_native;
pub mod iaa;
mod settle;
pub mod tatp;
pub mod tpcb;
pub mod tpcc;
pub mod tpch;

/// Pages for `rows` rows of `bytes_per_row` measured page space each on pages of `page_bytes`,
/// plus 64 for the catalog and the first pages of every table and index.
pub(crate) fn pages_for(rows: u64, bytes_per_row: u64, page_bytes: usize) -> u64 {
    assert!(page_bytes > 0, "a page has a size");
    rows.saturating_mul(bytes_per_row) / page_bytes as u64 + 64
}
