//! Clocks: virtual time (the caller carries it) and real time (the caller waits on the wall
//! clock until the modelled completion).
//!
//! Real time maps virtual nanoseconds to wall-clock nanoseconds since the clock's creation. To
//! be precise to a few microseconds, `wait_until` sleeps while the target is far away and spins
//! for the last stretch: a bare `sleep` overshoots by the scheduler's timer slack (~50-100 us).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::timing::Nanos;

/// How requests are timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClockMode {
    /// Each request carries its virtual submit time and returns its completion time.
    Virtual,
    /// Each request takes its modelled time on the wall clock.
    Real,
    /// As fast as possible; device time is still counted.
    None,
}

impl std::str::FromStr for ClockMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "virtual" => Ok(ClockMode::Virtual),
            "real" => Ok(ClockMode::Real),
            "none" => Ok(ClockMode::None),
            other => Err(format!("unknown clock '{other}' (virtual, real, none)")),
        }
    }
}

/// The wall clock as virtual nanoseconds since creation.
#[derive(Debug, Clone, Copy)]
pub struct RealClock {
    epoch: Instant,
}

/// How long before the target `wait_until` stops sleeping and starts spinning.
const SPIN_WINDOW_NS: u64 = 200_000;

impl Default for RealClock {
    fn default() -> Self {
        Self::new()
    }
}

impl RealClock {
    pub fn new() -> Self {
        RealClock {
            epoch: Instant::now(),
        }
    }

    pub fn now_ns(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    /// Blocks until `now_ns() >= target_ns`; returns at once if it already is.
    pub fn wait_until(&self, target_ns: Nanos) {
        loop {
            let now = self.now_ns();
            if now >= target_ns {
                return;
            }
            let left = target_ns - now;
            if left > SPIN_WINDOW_NS {
                std::thread::sleep(Duration::from_nanos(left - SPIN_WINDOW_NS));
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// A device shared by threads in real time: each call locks the device only to schedule the
/// operation, then waits for its modelled completion without holding the lock, so that callers
/// on other dies proceed in parallel as they would on real hardware.
#[derive(Debug)]
pub struct RealTimeNand {
    nand: Mutex<crate::Nand>,
    clock: RealClock,
}

impl RealTimeNand {
    pub fn new(nand: crate::Nand) -> Self {
        RealTimeNand {
            nand: Mutex::new(nand),
            clock: RealClock::new(),
        }
    }

    pub fn clock(&self) -> &RealClock {
        &self.clock
    }

    /// Runs `op` at the current wall-clock time and waits until its modelled completion.
    /// `op` gets the device and the submit time and returns the completion time with its result.
    pub fn run<T, E>(
        &self,
        op: impl FnOnce(&mut crate::Nand, Nanos) -> Result<(T, Nanos), E>,
    ) -> Result<T, E> {
        let (value, done_ns) = {
            let mut nand = self
                .nand
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            let at = self.clock.now_ns();
            op(&mut nand, at)?
        };
        self.clock.wait_until(done_ns);
        Ok(value)
    }

    /// Direct access (statistics, fault plans, power control).
    pub fn with<T>(&self, f: impl FnOnce(&mut crate::Nand) -> T) -> T {
        let mut nand = self
            .nand
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        f(&mut nand)
    }

    pub fn into_inner(self) -> crate::Nand {
        self.nand
            .into_inner()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}
