//! The `noftl` Python package's native part: the lab's experiments (`compare`, `bench`, `io`,
//! `crashtest`) called with Python keywords, their results as the JSON the CLI writes.
//!
//! Layers, bottom up: [`args`] (keywords to the lab's specs, over the lab's defaults, with the
//! lab's parsers), [`runs`] (the lab's checks, then the run, as JSON), and `python` (the
//! extension module, only with the `python` feature, which maturin turns on: without it the
//! crate is plain Rust, so `cargo test --workspace` needs neither Python nor its headers).
//! Above `lab`, beside the CLI crate `noftl`, which it does not import.

pub mod args;
#[cfg(feature = "python")]
mod python;
pub mod runs;
