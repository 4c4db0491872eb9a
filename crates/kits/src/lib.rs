//! Benchmark kits.
