//! The database server's CPU, for flash management that runs on the host instead of a device
//! controller: the NoFTL store's mapping (crate `storage`, `native.rs`) and `dftl-orig`, the DFTL
//! that NoFTL (VLDB 2013) measured, which ran in the host's Linux kernel.
//!
//! The machine is the one of NoFTL's evaluation: an Intel Xeon E5630 (Westmere-EP, 32 nm), 4
//! cores at 2.53 GHz, 12 MiB shared L3 (Intel ARK, Xeon E5630 specifications). Memory model,
//! one random access to a table of `table_bytes`:
//!
//! | where the table fits | cycles at 2.53 GHz | source |
//! |---|---|---|
//! | L3 (12 MiB)          | 40                 | L3 hit latency 40-42 cycles on Westmere-EP (7-cpu.com, "Intel Westmere", Xeon X5650 measurements); "~40 cycles" in D. Levinthal, "Performance Analysis Guide for Intel Core i7 Processor and Intel Xeon 5500 processors" (Intel, 2009), Table 2 |
//! | beyond L3: DRAM      | 40 + 170           | RAM latency "40 cycles + 67 ns" for local memory on Westmere-EP (7-cpu.com, same page); Levinthal: local DRAM ~60 ns. 67 ns x 2.53 GHz = 170 cycles |
//!
//! Why these two levels only: the L2 (256 KiB per core) is too small to keep an FTL's tables
//! across the database work done between two requests, and the L3 is the last level that can.
//! The model charges every random access its full latency, as if accesses did not overlap. An
//! out-of-order core overlaps independent misses (Westmere has 10 line-fill buffers, same
//! source), so for loops whose loads are independent (`dftl-orig`'s scans) the figures are an
//! upper estimate of the time, by up to the number of misses in flight. Instructions are counted
//! at one per cycle, as the other host costs are.

/// Host clock, MHz (Xeon E5630: 2.53 GHz base; Turbo Boost not counted).
pub const CLOCK_MHZ: f64 = 2530.0;
/// Host cycles per microsecond (`CLOCK_MHZ` as an integer).
pub const CYCLES_PER_US: u64 = 2530;
/// Shared last-level cache of the E5630.
pub const L3_BYTES: u64 = 12 << 20;
/// A random access that hits the L3.
pub const L3_HIT_CYCLES: u64 = 40;
/// What a DRAM access adds to the L3 lookup: 67 ns at 2.53 GHz (169.5, rounded up).
pub const DRAM_EXTRA_CYCLES: u64 = 170;

/// Cycles of one random access into a table of `table_bytes` (the memory model above).
pub fn access_cycles(table_bytes: u64) -> u64 {
    if table_bytes <= L3_BYTES {
        L3_HIT_CYCLES
    } else {
        L3_HIT_CYCLES + DRAM_EXTRA_CYCLES
    }
}

/// The host clock as a `Controller` clock: one core doing an FTL's work in submission order.
pub fn clock() -> crate::controller::ControllerConfig {
    crate::controller::ControllerConfig {
        clock_mhz: CLOCK_MHZ,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_beyond_the_l3_cost_a_dram_access() {
        assert_eq!(access_cycles(4 << 20), 40);
        assert_eq!(access_cycles(L3_BYTES), 40);
        assert_eq!(access_cycles(L3_BYTES + 1), 210);
        // 67 ns at 2.53 GHz.
        assert_eq!(
            (67.0 * CLOCK_MHZ / 1000.0_f64).ceil() as u64,
            DRAM_EXTRA_CYCLES
        );
        assert_eq!(CLOCK_MHZ as u64, CYCLES_PER_US);
    }
}
