//! Every size-like input of every verb is checked here, before any expensive work: against its
//! meaningful range (0 is refused where it would mean "nothing", and the message says so), and
//! against the machine (the memory the run will need, computed from the inputs, against the
//! memory available, with both figures in the message).
//!
//! Why one place: the emulator, the FTLs and the engine allocate from these numbers (a block
//! table per block, a map entry per page, a buffer frame per page, a terminal's state per
//! terminal). Checked deep inside, an absurd value is an allocation abort (exit 134) or an OOM
//! kill minutes later; checked here, it is a typed error naming the input before anything runs.
//!
//! Invariants:
//! 1. A [`LimitError`] names the input (flag or config key) and gives the figures it was
//!    checked against.
//! 2. The memory estimate only adds (saturating): it can overestimate a run (refusing a run that
//!    would have fit in an edge case), never wrap around to a small number.

use std::fmt;

/// A byte count that prints in binary units (for messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
        let mut v = self.0 as f64;
        let mut unit = 0;
        while v >= 1024.0 && unit + 1 < UNITS.len() {
            v /= 1024.0;
            unit += 1;
        }
        if unit == 0 {
            write!(f, "{} bytes", self.0)
        } else {
            write!(f, "{v:.1} {}", UNITS[unit])
        }
    }
}

/// An input refused up front.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LimitError {
    #[error("{input} must be at least {min}, got {got}: {why}")]
    TooSmall {
        input: &'static str,
        min: u64,
        got: u64,
        why: &'static str,
    },
    #[error("{input} is at most {max}, got {got}: {why}")]
    TooLarge {
        input: &'static str,
        max: u64,
        got: u64,
        why: &'static str,
    },
    #[error(
        "this run needs about {need} of memory ({parts}) and {available} is available: {hint}"
    )]
    Memory {
        need: Bytes,
        available: Bytes,
        parts: String,
        hint: String,
    },
}

/// Checks `min <= got <= max` for the input named `input`; `why` says what the bounds mean.
pub fn in_range(
    input: &'static str,
    got: u64,
    min: u64,
    max: u64,
    why: &'static str,
) -> Result<u64, LimitError> {
    if got < min {
        return Err(LimitError::TooSmall {
            input,
            min,
            got,
            why,
        });
    }
    if got > max {
        return Err(LimitError::TooLarge {
            input,
            max,
            got,
            why,
        });
    }
    Ok(got)
}

/// Checks that a count is not 0 where 0 would mean "run nothing".
pub fn at_least_one(input: &'static str, got: u64, what: &'static str) -> Result<u64, LimitError> {
    in_range(input, got, 1, u64::MAX, what)
}

/// Host memory of the emulated device kept from the start: the block table (one entry per
/// block), the page-state table (a byte per page) and the FTL's or the native store's maps
/// (at most 16 bytes per page: the forward map, the reverse map, the validity bits). The page
/// data itself is allocated as it is written (see [`written_data_bytes`]).
pub const BLOCK_ENTRY_BYTES: u64 = 64;
pub const PAGE_METADATA_BYTES: u64 = 17;

/// Host memory one terminal of the engine's benchmarks holds (its scheduler state, its share of
/// the lock and transaction tables, its latency histogram): measured as about 270 KB (peak RSS
/// of `noftl bench tpcb --txns 1`: 56 MB with 1 terminal, 110 MB with 200, 594 MB with 2,000;
/// 2026-11-25), rounded up.
pub const TERMINAL_BYTES: u64 = 288 << 10;

/// Memory reserved beside the computed parts (the binary, thread stacks, allocator slack).
pub const BASE_BYTES: u64 = 64 << 20;

/// The parts of a run's memory, added up and checked against what the machine has.
#[derive(Clone, Debug, Default)]
pub struct MemoryPlan {
    parts: Vec<(String, u64)>,
}

impl MemoryPlan {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a part of the estimate.
    pub fn add(&mut self, what: impl Into<String>, bytes: u64) -> &mut Self {
        self.parts.push((what.into(), bytes));
        self
    }

    /// The device's metadata, kept from the start whatever the run does.
    pub fn device(&mut self, cfg: &nand::DeviceConfig) -> &mut Self {
        let g = &cfg.geometry;
        let bytes = u64::from(g.blocks())
            .saturating_mul(BLOCK_ENTRY_BYTES)
            .saturating_add(g.pages().saturating_mul(PAGE_METADATA_BYTES));
        self.add(
            format!(
                "device metadata for {} blocks of {} pages",
                g.blocks(),
                g.pages_per_block
            ),
            bytes,
        )
    }

    pub fn total_bytes(&self) -> u64 {
        self.parts
            .iter()
            .fold(BASE_BYTES, |acc, (_, b)| acc.saturating_add(*b))
    }

    /// Refuses the run when it needs more than the machine has available (invariant 1).
    pub fn check(&self, hint: &str) -> Result<(), LimitError> {
        self.check_against(available_memory_bytes(), hint)
    }

    /// [`MemoryPlan::check`] against a given amount (`None`: unknown, nothing refused).
    pub fn check_against(&self, available: Option<u64>, hint: &str) -> Result<(), LimitError> {
        let Some(available) = available else {
            return Ok(());
        };
        let need = self.total_bytes();
        if need <= available {
            return Ok(());
        }
        let parts = self
            .parts
            .iter()
            .filter(|(_, b)| *b > 0)
            .map(|(w, b)| format!("{w}: {}", Bytes(*b)))
            .collect::<Vec<_>>()
            .join(", ");
        Err(LimitError::Memory {
            need: Bytes(need),
            available: Bytes(available),
            parts,
            hint: hint.to_string(),
        })
    }
}

/// Data the run will write into host memory: `pages` pages of `page_bytes` each (emulated flash
/// kept in RAM stores its OOB too, at most the page size again).
pub fn written_data_bytes(pages: u64, page_bytes: u64) -> u64 {
    pages.saturating_mul(page_bytes)
}

/// Memory the process may still allocate (`nand::host_memory`, which the RAM store's budget
/// reads too).
pub fn available_memory_bytes() -> Option<u64> {
    nand::host_memory::available_bytes()
}

/// What runs started together may take in all: 90% of the available memory (the rest for the
/// process's own tables and whatever else the host runs); None where it cannot be read.
pub fn memory_budget_bytes() -> Option<u64> {
    available_memory_bytes().map(|a| a / 10 * 9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_name_the_input_and_refuse_zero() {
        assert_eq!(at_least_one("--txns", 3, "transactions to run"), Ok(3));
        let e = at_least_one("--txns", 0, "0 transactions would measure nothing")
            .expect_err("0 refused");
        assert!(e.to_string().contains("--txns must be at least 1, got 0"));
        assert!(in_range("--qd", 9, 1, 8, "queue depth").is_err());
    }

    #[test]
    fn memory_plan_saturates_and_reports_figures() {
        let mut p = MemoryPlan::new();
        p.add("a", u64::MAX).add("b", 5);
        assert_eq!(p.total_bytes(), u64::MAX);
        let e = p
            .check_against(Some(8 << 30), "use a smaller device")
            .expect_err("too big");
        let msg = e.to_string();
        assert!(msg.contains("8.0 GiB is available"), "{msg}");
        assert!(msg.contains("a: "), "{msg}");
        assert!(p.check_against(None, "").is_ok());
        assert_eq!(Bytes(1536).to_string(), "1.5 KiB");
    }
}
