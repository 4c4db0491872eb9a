//! The measured window's self-check: every result that `bench` and `compare` publish carries a
//! `Consistency`, computed from the window's own raw counters against physical bounds, so that
//! a miscounted window says `violated` instead of printing a figure no device can deliver.
//!
//! The bounds (docs/storage.md, "The measured window"):
//! 1. Die time. A die executes one operation at a time (a multi-plane operation holds its die
//!    once, for all its planes), so the busy time of every die over the window is at most the
//!    window's elapsed time: `die_busy_fraction_max <= 1`. Busy time is the sum over operations
//!    of completion minus start (command, transfers and array time).
//! 2. Channel time. A channel's bus carries one transfer at a time: `channel_busy_fraction_max
//!    <= 1`.
//! 3. Little's law. With closed-loop terminals and no think time, each terminal is in at most
//!    one transaction at a time, so the mean number of transactions in the system, the summed
//!    latency of the transactions completed in the window over its length, is at most the
//!    number of terminals: `little_law_ratio = sum(latency) / (elapsed x terminals) <= 1`. A
//!    terminal is never idle between transactions either, so in a run for a duration the ratio
//!    is also close to 1 when enough transactions ran (at least `LITTLE_MIN_TXNS`): below
//!    `1 - LITTLE_TOLERANCE` the window holds time that belongs to no transaction (the stall a
//!    miscounted window hides).
//!
//! Each bound allows `EPSILON` of relative float error (Little's law: the histograms'
//! resolution, `LITTLE_HISTOGRAM_SLACK`). Invariant: `status` is "ok" exactly when
//! `violations` is empty.

use serde::Serialize;

use crate::pagestore::PageStore;
use crate::Nanos;

/// Relative slack for float rounding in the ratios.
pub const EPSILON: f64 = 1e-9;
/// How far below 1 the Little's-law ratio may fall: the window's last transaction may be cut
/// off by the stop (its time is in the window, it is not counted), and transactions that end
/// without a recorded latency (TPC-C's rolled-back New-Orders, 1%; lock-conflict retries) take
/// time too; 5% covers these at `LITTLE_MIN_TXNS` transactions and more.
pub const LITTLE_TOLERANCE: f64 = 0.05;
/// Latencies are summed from HdrHistograms of three significant digits, whose mean is within
/// 0.1% of the exact one: the upper Little's-law bound allows that much.
pub const LITTLE_HISTOGRAM_SLACK: f64 = 0.002;
/// Below this many transactions one cut-off transaction alone can exceed the tolerance: the
/// lower Little's-law bound is then not checked.
pub const LITTLE_MIN_TXNS: u64 = 100;

/// Busy time of every die and channel at one instant (differences give a window's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Busy {
    pub die_ns: Vec<Nanos>,
    pub channel_ns: Vec<Nanos>,
}

impl Busy {
    /// The store's flash busy counters (empty for stores without flash).
    pub fn of(store: &dyn PageStore) -> Busy {
        Busy::of_nand(store.nand())
    }

    /// The busy counters of a device (empty for none: a memory disk).
    pub fn of_nand(nand: Option<&nand::Nand>) -> Busy {
        nand.map_or_else(Busy::default, |n| Busy {
            die_ns: n.die_busy_ns().to_vec(),
            channel_ns: n.channel_busy_ns().to_vec(),
        })
    }
}

/// What a window's result carries (the JSON object `consistency`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Consistency {
    /// "ok" or "violated".
    pub status: &'static str,
    /// The busiest die's busy time over the elapsed time (None: no flash).
    pub die_busy_fraction_max: Option<f64>,
    /// The busiest channel's bus time over the elapsed time (None: no flash).
    pub channel_busy_fraction_max: Option<f64>,
    /// Summed transaction latency over elapsed time x terminals (None: nothing completed).
    pub little_law_ratio: Option<f64>,
    pub violations: Vec<String>,
}

/// One window's inputs to the check.
#[derive(Clone, Copy, Debug)]
pub struct Window<'a> {
    pub before: &'a Busy,
    pub after: &'a Busy,
    pub elapsed_ns: Nanos,
    pub terminals: u32,
    /// Did every terminal run from the window's start to its stop (a run for a duration)? A run
    /// for a number of transactions per terminal has terminals that finish early and then sit
    /// idle, so only the upper Little's-law bound holds for it.
    pub terminals_run_throughout: bool,
    /// Transactions whose latency was recorded in the window, and the sum of those latencies.
    pub txns: u64,
    pub latency_sum_ns: f64,
}

fn max_fraction(before: &[Nanos], after: &[Nanos], elapsed_ns: Nanos) -> Option<f64> {
    if after.is_empty() {
        return None;
    }
    assert_eq!(
        before.len(),
        after.len(),
        "the same device before and after"
    );
    let busiest = before
        .iter()
        .zip(after)
        .map(|(b, a)| a.checked_sub(*b).expect("busy time never decreases"))
        .max()
        .unwrap_or(0);
    Some(if elapsed_ns == 0 {
        if busiest == 0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        busiest as f64 / elapsed_ns as f64
    })
}

/// Checks a window against the bounds of the module doc.
pub fn check(w: Window<'_>) -> Consistency {
    let mut violations = Vec::new();
    let die = max_fraction(&w.before.die_ns, &w.after.die_ns, w.elapsed_ns);
    let channel = max_fraction(&w.before.channel_ns, &w.after.channel_ns, w.elapsed_ns);
    if let Some(f) = die.filter(|f| *f > 1.0 + EPSILON) {
        violations.push(format!(
            "a die was busy {f:.3} x the elapsed time (at most 1: a die runs one operation at a time)"
        ));
    }
    if let Some(f) = channel.filter(|f| *f > 1.0 + EPSILON) {
        violations.push(format!(
            "a channel carried data {f:.3} x the elapsed time (at most 1: one transfer at a time)"
        ));
    }
    let little = (w.txns > 0 && w.elapsed_ns > 0 && w.terminals > 0)
        .then(|| w.latency_sum_ns / (w.elapsed_ns as f64 * f64::from(w.terminals)));
    if let Some(r) = little {
        if r > 1.0 + LITTLE_HISTOGRAM_SLACK {
            violations.push(format!(
                "Little's law: {r:.3} transactions per terminal in the system on average (at most 1)"
            ));
        } else if w.terminals_run_throughout
            && w.txns >= LITTLE_MIN_TXNS
            && r < 1.0 - LITTLE_TOLERANCE
        {
            violations.push(format!(
                "Little's law: the terminals were in a transaction {:.1}% of the window (at least {:.0}%: the rest belongs to no transaction)",
                r * 100.0,
                (1.0 - LITTLE_TOLERANCE) * 100.0
            ));
        }
    }
    Consistency {
        status: if violations.is_empty() {
            "ok"
        } else {
            "violated"
        },
        die_busy_fraction_max: die.map(round6),
        channel_busy_fraction_max: channel.map(round6),
        little_law_ratio: little.map(round6),
        violations,
    }
}

/// Six decimals: the JSON carries no float noise.
fn round6(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1e6).round() / 1e6
    } else {
        x
    }
}

impl Consistency {
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// Several windows of one configuration (repeats) as one: violated if any is, the busiest
    /// die and channel over all, the Little's-law ratio farthest from 1, and every violation
    /// prefixed with its window's label.
    pub fn merge<'a>(windows: impl IntoIterator<Item = (String, &'a Consistency)>) -> Consistency {
        let mut out = Consistency {
            status: "ok",
            die_busy_fraction_max: None,
            channel_busy_fraction_max: None,
            little_law_ratio: None,
            violations: Vec::new(),
        };
        let max = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        };
        for (label, c) in windows {
            out.die_busy_fraction_max = max(out.die_busy_fraction_max, c.die_busy_fraction_max);
            out.channel_busy_fraction_max =
                max(out.channel_busy_fraction_max, c.channel_busy_fraction_max);
            out.little_law_ratio = match (out.little_law_ratio, c.little_law_ratio) {
                (Some(a), Some(b)) => Some(if (b - 1.0).abs() > (a - 1.0).abs() {
                    b
                } else {
                    a
                }),
                (a, b) => a.or(b),
            };
            out.violations
                .extend(c.violations.iter().map(|v| format!("{label}: {v}")));
        }
        if !out.violations.is_empty() {
            out.status = "violated";
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy(d: Nanos, c: Nanos) -> Busy {
        Busy {
            die_ns: vec![d, 0],
            channel_ns: vec![c],
        }
    }

    #[test]
    fn a_window_shorter_than_its_die_time_is_violated() {
        let before = busy(1_000, 0);
        let after = busy(1_000 + 530, 100);
        let c = check(Window {
            before: &before,
            after: &after,
            elapsed_ns: 338,
            terminals: 1,
            terminals_run_throughout: true,
            txns: 1,
            latency_sum_ns: 338.0,
        });
        assert_eq!(c.status, "violated");
        assert!(c.die_busy_fraction_max.unwrap() > 1.5);
        assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
    }

    #[test]
    fn a_window_with_time_that_belongs_to_no_transaction_is_violated() {
        let before = busy(0, 0);
        let after = busy(500, 100);
        // One terminal in a transaction 65% of a 1 us window of a run for a duration.
        let w = Window {
            before: &before,
            after: &after,
            elapsed_ns: 1_000,
            terminals: 1,
            terminals_run_throughout: true,
            txns: 1_000,
            latency_sum_ns: 650.0,
        };
        let c = check(w);
        assert_eq!(c.status, "violated");
        assert_eq!(c.little_law_ratio, Some(0.65));
        let ok = check(Window {
            latency_sum_ns: 990.0,
            ..w
        });
        assert!(ok.is_ok(), "{:?}", ok.violations);
        assert_eq!(ok.status, "ok");
        // Terminals that finished their transactions early sit idle: no lower bound then.
        let early = check(Window {
            terminals_run_throughout: false,
            ..w
        });
        assert!(early.is_ok(), "{:?}", early.violations);
    }

    #[test]
    fn stores_without_flash_check_littles_law_only() {
        let none = Busy::default();
        let c = check(Window {
            before: &none,
            after: &none,
            elapsed_ns: 10,
            terminals: 2,
            terminals_run_throughout: true,
            txns: 3,
            latency_sum_ns: 30.0,
        });
        assert_eq!(c.die_busy_fraction_max, None);
        assert_eq!(c.little_law_ratio, Some(1.5));
        assert_eq!(c.status, "violated");
    }
}
