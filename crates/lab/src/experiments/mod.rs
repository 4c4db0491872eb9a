//! The experiments, one module each: a plain spec in, a serializable result out, run through
//! the runner and the measurement code below (`runner`, `workload`, `measure`, `results`). The
//! command line builds the spec from its flags and prints the result; the dashboard, sweeps and
//! programs call the same functions.
//!
//! Convention: `<name>::Spec` (plain data, `Debug + Clone`), `<name>::run(&Spec, ...)`
//! returning the result the CLI writes as JSON (the same bytes as before the move:
//! `crates/noftl/tests/golden.rs`). Human output (stdout) is the CLI's; notes and progress on
//! stderr may come from here.

pub mod bench;
pub mod compare;
pub mod crashtest;
pub mod fs_bench;
pub mod fs_mount;
pub mod fs_waf;
pub mod iaa;
pub mod iaa_paper;
pub mod io;
pub mod ipa;
pub mod replay;
pub mod reproduce;
pub mod rounds;
pub mod vm;
