//! The SSD controller's CPU as a resource: mapping work takes cycles at the controller's clock,
//! one piece of work at a time, before the flash operations it decides on can be issued.
//!
//! Invariants:
//! 1. Work is served in submission order; each piece starts no earlier than its submission and
//!    no earlier than the end of the previous piece (one core).
//! 2. `busy_ns` is the sum of all charged work; it never exceeds the span of virtual time used.

use nand::Nanos;
use serde::{Deserialize, Serialize};

/// Cycles of one random access to the controller's DRAM, where every FTL keeps its mapping
/// tables (they are far larger than the core's caches): ~100 ns of DRAM latency seen from an
/// embedded core (row activation + CAS ~30-50 ns plus the SoC interconnect and memory
/// controller; U. Drepper, "What every programmer should know about memory", 2007, sect. 2-3,
/// measures ~100 ns and more for main-memory accesses), at the default 400 MHz = 2.5 ns a cycle.
/// Every FTL's cycle costs are built from it (`options.rs`, `dftl.rs`, `block/common.rs`).
pub const DRAM_ACCESS_CYCLES: u64 = 40;

/// The controller's clock. Default: 400 MHz, the class of embedded ARM Cortex-R cores in SSD
/// controllers (e.g. Samsung's MDX/MEX controllers: three ARM Cortex-R4 cores at 400 MHz, per
/// Samsung's 840/840 EVO product documentation); one core does the mapping work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControllerConfig {
    pub clock_mhz: f64,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig { clock_mhz: 400.0 }
    }
}

/// One controller core.
#[derive(Clone, Debug)]
pub struct Controller {
    ps_per_cycle: u64,
    free_at_ns: Nanos,
    busy_ps: u128,
}

impl Controller {
    pub fn new(cfg: &ControllerConfig) -> Self {
        assert!(
            cfg.clock_mhz.is_finite() && cfg.clock_mhz > 0.0,
            "controller clock must be positive"
        );
        Controller {
            ps_per_cycle: (1e6 / cfg.clock_mhz).round().max(1.0) as u64,
            free_at_ns: 0,
            busy_ps: 0,
        }
    }

    /// Charges `cycles` of work submitted at `at_ns`; returns when the work is done.
    pub fn charge(&mut self, at_ns: Nanos, cycles: u64) -> Nanos {
        if cycles == 0 {
            return at_ns;
        }
        let ps = u128::from(cycles) * u128::from(self.ps_per_cycle);
        self.busy_ps += ps;
        let start = at_ns.max(self.free_at_ns);
        self.free_at_ns = start + (ps / 1000) as Nanos;
        self.free_at_ns
    }

    pub fn busy_us(&self) -> f64 {
        self.busy_ps as f64 / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_queues_on_one_core() {
        let mut c = Controller::new(&ControllerConfig { clock_mhz: 400.0 });
        assert_eq!(c.charge(0, 400), 1000); // 400 cycles at 400 MHz = 1 us
        assert_eq!(c.charge(500, 400), 2000); // waits for the first piece
        assert_eq!(c.charge(5000, 0), 5000);
        assert!((c.busy_us() - 2.0).abs() < 1e-9);
    }
}
