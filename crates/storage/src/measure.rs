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
//!
//! Write-amplification results (`noftl fs waf`) carry the same object, checked by
//! [`check_writes`] against the bounds of a write path (application -> file system -> FTL ->
//! flash), where each level can add writes but never drop one it was given:
//! 4. Flash bytes programmed (the emulator's count, data and spare area) >= the bytes the file
//!    system wrote to the FTL (host page writes x logical page bytes): the FTL stores every page
//!    it is given in a program.
//! 5. Flash bytes programmed >= the FTL's own count of its programs (its WAF x its host page
//!    writes x logical page bytes): an FTL cannot claim programs the flash did not make.
//! 6. Host bytes the FTL received >= the bytes the file system counts as written (its own
//!    counters, or the NBD export's request bytes under ext4).
//! 7. Where the workload guarantees it (every byte written once to a file that is fsynced and
//!    not deleted before, e.g. sequential passes over a file), the file system's bytes to the
//!    device in the measured window >= the application's bytes.
//! 8. The bytes the file system received in write requests (its own count, where it keeps
//!    one) <= the bytes the application says it wrote: a workload cannot undercount its own
//!    writes (its count may be larger: the engine's `wchar` includes writes to other files).
//!
//! These windows have no elapsed time of their own (a run spans several processes), so the die,
//! channel and Little's-law fields are `None` in them.

use serde::{Deserialize, Serialize};

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

/// A consistency read back (a distributed run's row, `lab`): its status must be one of the two
/// this module writes.
#[derive(Deserialize)]
struct ConsistencyRead {
    status: String,
    die_busy_fraction_max: Option<f64>,
    channel_busy_fraction_max: Option<f64>,
    little_law_ratio: Option<f64>,
    violations: Vec<String>,
}

// By hand, not derived: a derived impl would borrow `status` from the input (`&'static str`).
impl<'de> Deserialize<'de> for Consistency {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = ConsistencyRead::deserialize(d)?;
        let status = match r.status.as_str() {
            "ok" => "ok",
            "violated" => "violated",
            other => {
                return Err(serde::de::Error::custom(format!(
                    "consistency status '{other}' (ok or violated)"
                )))
            }
        };
        Ok(Consistency {
            status,
            die_busy_fraction_max: r.die_busy_fraction_max,
            channel_busy_fraction_max: r.channel_busy_fraction_max,
            little_law_ratio: r.little_law_ratio,
            violations: r.violations,
        })
    }
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

/// A write-amplification run's raw counters (bounds 4-8 of the module doc). `_total` counters
/// are the run's whole lifetime (formatting included); the others are the measured window (the
/// formatting's writes subtracted).
#[derive(Clone, Copy, Debug, Default)]
pub struct Writes {
    /// Bytes the application wrote in the window.
    pub app_bytes: u64,
    /// Bytes the file system received in write requests in the window, where it counts them.
    pub fs_received_bytes: Option<u64>,
    /// The workload writes every application byte to a file that is fsynced and kept (bound 7
    /// applies).
    pub app_bytes_reach_device: bool,
    /// Bytes the file system wrote to the FTL in the window.
    pub fs_bytes: u64,
    /// Bytes the FTL received from the host (host page writes x logical page bytes).
    pub host_bytes_total: u64,
    /// The file system's own count of the bytes it wrote, where it keeps one.
    pub fs_counted_bytes_total: Option<u64>,
    /// The FTL's own count of its flash programs (WAF x host page writes), in logical bytes.
    pub ftl_claimed_bytes_total: u64,
    /// Bytes the flash programmed (data and spare area).
    pub flash_bytes_total: u64,
}

/// Checks a write-amplification run against bounds 4-8 of the module doc.
pub fn check_writes(w: Writes) -> Consistency {
    let mut violations = Vec::new();
    if w.flash_bytes_total < w.host_bytes_total {
        violations.push(format!(
            "the flash programmed {} bytes, fewer than the {} the file system wrote to the FTL (every written page is programmed)",
            w.flash_bytes_total, w.host_bytes_total
        ));
    }
    // The FTL's claim is a float product: allow its rounding.
    if w.ftl_claimed_bytes_total as f64 > w.flash_bytes_total as f64 * (1.0 + EPSILON) {
        violations.push(format!(
            "the FTL counts {} bytes of programs, more than the {} the flash programmed",
            w.ftl_claimed_bytes_total, w.flash_bytes_total
        ));
    }
    if let Some(fs) = w
        .fs_counted_bytes_total
        .filter(|fs| *fs > w.host_bytes_total)
    {
        violations.push(format!(
            "the file system counts {fs} bytes written, more than the {} the FTL received",
            w.host_bytes_total
        ));
    }
    if w.app_bytes_reach_device && w.fs_bytes < w.app_bytes {
        violations.push(format!(
            "the file system wrote {} bytes to the device, fewer than the {} the workload wrote and fsynced",
            w.fs_bytes, w.app_bytes
        ));
    }
    if let Some(fs) = w.fs_received_bytes.filter(|fs| *fs > w.app_bytes) {
        violations.push(format!(
            "the file system received {fs} bytes of writes, more than the {} the workload counts",
            w.app_bytes
        ));
    }
    Consistency::of_violations(violations)
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
    /// A check with no elapsed time of its own (the write bounds): only its violations.
    pub fn of_violations(violations: Vec<String>) -> Consistency {
        Consistency {
            status: if violations.is_empty() {
                "ok"
            } else {
                "violated"
            },
            die_busy_fraction_max: None,
            channel_busy_fraction_max: None,
            little_law_ratio: None,
            violations,
        }
    }

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
    fn a_write_path_that_loses_bytes_is_violated() {
        let ok = Writes {
            app_bytes: 1 << 20,
            fs_received_bytes: Some(1 << 20),
            app_bytes_reach_device: true,
            fs_bytes: (1 << 20) + 8192,
            host_bytes_total: (1 << 20) + 65536,
            fs_counted_bytes_total: Some((1 << 20) + 65536),
            ftl_claimed_bytes_total: (1 << 20) + 65536,
            flash_bytes_total: (1 << 20) + 65536 + 4096,
        };
        let c = check_writes(ok);
        assert!(c.is_ok(), "{:?}", c.violations);
        assert_eq!(c.status, "ok");
        assert_eq!(c.die_busy_fraction_max, None);
        // Each counter wrong on its own, by one page.
        let fewer_programs = Writes {
            flash_bytes_total: ok.host_bytes_total - 4096,
            ftl_claimed_bytes_total: 0,
            ..ok
        };
        let overclaimed = Writes {
            ftl_claimed_bytes_total: ok.flash_bytes_total + 4096,
            ..ok
        };
        let overcounted = Writes {
            fs_counted_bytes_total: Some(ok.host_bytes_total + 4096),
            ..ok
        };
        let lost = Writes {
            fs_bytes: ok.app_bytes - 4096,
            ..ok
        };
        let undercounted = Writes {
            fs_received_bytes: Some(ok.app_bytes + 1),
            ..ok
        };
        for w in [fewer_programs, overclaimed, overcounted, lost, undercounted] {
            let c = check_writes(w);
            assert_eq!(c.status, "violated", "{w:?}");
            assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
        }
        // Fewer device bytes than application bytes is fine where the workload does not keep
        // what it wrote (files deleted before they left the cache).
        let deleted = Writes {
            app_bytes_reach_device: false,
            ..lost
        };
        assert!(check_writes(deleted).is_ok());
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
