//! The steady-state rule every measuring verb uses, written once: rounds of a fixed size after
//! preconditioning, steady when the last five rounds' throughput and write amplification each
//! lie within the band of the SNIA Solid State Storage Performance Test Specification (SSS PTS
//! v2.0.2, 2.1.24 "Steady State"), capped by a maximum number of rounds.
//!
//! SSS PTS 2.1.24: a device is in steady state when, for the tracked variable y over the
//! Measurement Window (the last five Rounds), (a) Max(y) - Min(y) is no more than 20% of Ave(y),
//! and (b) the excursion of the best linear fit of y over the window (its Max - Min) is within
//! 10% of Ave(y). The specification runs its test loop "until Steady State is reached, or a
//! maximum of 25 Rounds", and preconditions a drive first (a sequential fill of the user
//! capacity, then the test's own workload until steady); `io --precondition` does exactly that.
//!
//! Here the tracked variables are two: the round's throughput (transactions, requests or
//! operations per second of virtual time) and its write amplification (flash programs of every
//! purpose over the programs the host asked for, `Writes`). A verb that cannot count one of them
//! (a RAM disk has no flash) tracks the other alone.
//!
//! Pieces, bottom up: `in_band` (the two conditions on one variable; pure), `is_steady` (both
//! variables over the last rounds; pure), `until_steady` (the round loop: calls the verb's round
//! until steady or the cap), `SteadyState` (what every result JSON carries). The runner
//! (`runner::engine_rounds`) drives an engine's terminals through `until_steady`; the other verbs
//! call `until_steady` with a round of their own.
//!
//! Invariants:
//! 1. `is_steady` is a function of the samples alone: the same rounds give the same verdict.
//! 2. Fewer rounds than the window are never steady.
//! 3. `until_steady` runs at least `min(WINDOW_ROUNDS, max_rounds)` rounds and at most
//!    `max_rounds`; it stops at the first round after which `is_steady` holds.

use serde::{Deserialize, Serialize};

/// Rounds in the Measurement Window (SSS PTS 2.1.24: "five Rounds").
pub const WINDOW_ROUNDS: usize = 5;
/// Largest Max - Min of the window's values, as a share of their mean (SSS PTS 2.1.24 a).
pub const RANGE_SHARE: f64 = 0.20;
/// Largest excursion of the window's best linear fit, as a share of the mean (2.1.24 b).
pub const SLOPE_SHARE: f64 = 0.10;
/// The cap on rounds (SSS PTS: "until Steady State is reached, or a maximum of 25 Rounds").
pub const MAX_ROUNDS: u32 = 25;

/// A backstop on preconditioning, in virtual time (10 hours): a workload that writes almost
/// nothing is measured as it is then, and its `device_writes` shows it.
pub const PRECONDITION_MAX_NS: u64 = 10 * 3_600_000_000_000;

/// The criterion's name in every result JSON.
pub const CRITERION: &str =
    "SNIA SSS PTS 2.1.24: last 5 rounds' throughput and WAF each within 20% range and 10% fit excursion of their mean";

/// What one round measured.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// Work per second of virtual time (transactions, requests, operations).
    pub throughput: f64,
    /// Flash programs over host programs in the round (None: the store has no flash).
    pub waf: Option<f64>,
}

/// Whether `ys` (a Measurement Window) lies within the band of SSS PTS 2.1.24: range within
/// `RANGE_SHARE` of the mean and the least-squares line's excursion within `SLOPE_SHARE`.
/// A window whose values are all zero is steady (nothing changes); a negative mean never is.
pub fn in_band(ys: &[f64]) -> bool {
    if ys.is_empty() || ys.iter().any(|y| !y.is_finite()) {
        return false;
    }
    let n = ys.len() as f64;
    let mean = ys.iter().sum::<f64>() / n;
    if mean < 0.0 {
        return false;
    }
    let max = ys.iter().copied().fold(f64::MIN, f64::max);
    let min = ys.iter().copied().fold(f64::MAX, f64::min);
    if max - min > RANGE_SHARE * mean {
        return false;
    }
    // Least-squares slope over x = 0..n-1; the fit's excursion over the window is
    // |slope| x (n - 1), the distance between its values at the first and last round.
    let x_mean = (n - 1.0) / 2.0;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        let dx = i as f64 - x_mean;
        sxy += dx * (y - mean);
        sxx += dx * dx;
    }
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    slope.abs() * (n - 1.0) <= SLOPE_SHARE * mean
}

/// Whether the last `WINDOW_ROUNDS` rounds are steady: throughput in band, and WAF in band when
/// every round of the window counted it.
pub fn is_steady(rounds: &[Round]) -> bool {
    if rounds.len() < WINDOW_ROUNDS {
        return false;
    }
    let window = &rounds[rounds.len() - WINDOW_ROUNDS..];
    let tps: Vec<f64> = window.iter().map(|r| r.throughput).collect();
    let waf: Option<Vec<f64>> = window.iter().map(|r| r.waf).collect();
    in_band(&tps) && waf.is_none_or(|w| in_band(&w))
}

/// Rounds of a verb, run until steady or the cap.
#[derive(Clone, Debug, PartialEq)]
pub struct Rounds {
    pub samples: Vec<Round>,
    pub met: bool,
}

/// The round loop: `round(k)` runs round k (0-based) and says what it measured; stops when the
/// rounds are steady or after `max_rounds`.
pub fn until_steady(
    max_rounds: u32,
    mut round: impl FnMut(u32) -> anyhow::Result<Round>,
) -> anyhow::Result<Rounds> {
    let mut samples = Vec::new();
    for k in 0..max_rounds {
        samples.push(round(k)?);
        if is_steady(&samples) {
            return Ok(Rounds { samples, met: true });
        }
    }
    debug_assert!(samples.len() as u32 == max_rounds);
    Ok(Rounds {
        samples,
        met: false,
    })
}

/// What every measuring verb's result carries: the rule, the rounds it ran, whether they
/// reached steady state, and how often the host had written the device over when the measured
/// window began (preconditioning and rounds; the load or fill included).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SteadyState {
    pub criterion: String,
    pub rounds: u32,
    pub met: bool,
    pub device_writes: f64,
}

impl SteadyState {
    pub fn of(rounds: &Rounds, device_writes: f64) -> SteadyState {
        SteadyState {
            criterion: CRITERION.to_string(),
            rounds: rounds.samples.len() as u32,
            met: rounds.met,
            device_writes,
        }
    }

    /// A run that measured without rounds (the user turned them off): not steady by this rule.
    pub fn skipped(device_writes: f64) -> SteadyState {
        SteadyState {
            criterion: "none: no rounds before the measured window".to_string(),
            rounds: 0,
            met: false,
            device_writes,
        }
    }

    /// A run with nothing below it that settles (raw flash: no FTL, no GC): steady from its
    /// first request, with the reason as its criterion.
    pub fn not_applicable(why: &str, device_writes: f64) -> SteadyState {
        SteadyState {
            criterion: why.to_string(),
            rounds: 0,
            met: true,
            device_writes,
        }
    }

    /// Several runs of one row together: met only if every run met it; the most rounds any
    /// needed and the fewest device writes any had.
    pub fn all(runs: &[SteadyState]) -> Option<SteadyState> {
        let first = runs.first()?;
        Some(SteadyState {
            criterion: first.criterion.clone(),
            rounds: runs.iter().map(|r| r.rounds).max().unwrap_or(0),
            met: runs.iter().all(|r| r.met),
            device_writes: runs
                .iter()
                .map(|r| r.device_writes)
                .fold(f64::INFINITY, f64::min),
        })
    }

    /// The line a text report prints for a row that did not reach steady state (None when it
    /// did), as it prints a violated consistency.
    pub fn warning(&self) -> Option<String> {
        (!self.met).then(|| {
            format!(
                "not steady: {} round(s) did not settle ({}); {}",
                self.rounds,
                self.criterion,
                self.device_writes_text()
            )
        })
    }

    /// "the device was written over N times", or, for a run that counted no device writes (an
    /// application run once on a fresh mount), that it did not (rather than NaN).
    pub fn device_writes_text(&self) -> String {
        if self.device_writes.is_finite() {
            format!(
                "the device was written over {:.2} times",
                self.device_writes
            )
        } else {
            "the device's writes were not counted".to_string()
        }
    }
}

/// `--strict`: fails, naming them, when any of the `rows` (a name and its verdict) did not reach
/// steady state; a verb calls it after its result is written and printed.
pub fn refuse_unsteady<'a, N: AsRef<str>>(
    strict: bool,
    rows: impl IntoIterator<Item = (N, &'a SteadyState)>,
) -> anyhow::Result<()> {
    let unsteady: Vec<String> = rows
        .into_iter()
        .filter(|(_, s)| !s.met)
        .map(|(name, _)| name.as_ref().to_string())
        .collect();
    if strict && !unsteady.is_empty() {
        anyhow::bail!(
            "--strict: {} row(s) did not reach steady state ({}); their figures are not steady-state results",
            unsteady.len(),
            unsteady.join(", ")
        );
    }
    Ok(())
}

/// Host and flash programs of a device at one moment, for a round's write amplification.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Writes {
    /// Programs (full and partial) the host asked for: data pages, the log, the store's
    /// metadata; in flash pages.
    pub host_pages: u64,
    /// Programs of every purpose (GC, wear levelling, mapping pages and pads included).
    pub flash_pages: u64,
}

impl Writes {
    /// The counters of `nand` now (zero without a flash).
    pub fn of(nand: Option<&nand::Nand>) -> Writes {
        use nand::{OpKind, Purpose};
        let Some(n) = nand else {
            return Writes::default();
        };
        let st = n.stats();
        let programs = |p: Purpose| st.get(OpKind::Program, p) + st.get(OpKind::PartialProgram, p);
        Writes {
            host_pages: [Purpose::Host, Purpose::Log, Purpose::Meta]
                .into_iter()
                .map(programs)
                .sum(),
            flash_pages: st.total(OpKind::Program) + st.total(OpKind::PartialProgram),
        }
    }

    /// The programs since `before`.
    pub fn since(&self, before: &Writes) -> Writes {
        Writes {
            host_pages: self.host_pages.saturating_sub(before.host_pages),
            flash_pages: self.flash_pages.saturating_sub(before.flash_pages),
        }
    }

    /// How often the host has written `nand` over since it was formatted: host programs over
    /// the device's pages (0 without a flash).
    pub fn device_writes_of(nand: Option<&nand::Nand>) -> f64 {
        nand.map_or(0.0, |n| {
            Writes::of(Some(n)).host_pages as f64 / n.geometry().pages().max(1) as f64
        })
    }

    /// Flash programs per host program (None when the host wrote nothing: no flash, or a
    /// read-only round).
    pub fn waf(&self) -> Option<f64> {
        (self.host_pages > 0).then(|| self.flash_pages as f64 / self.host_pages as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(tps: &[f64], waf: &[f64]) -> Vec<Round> {
        tps.iter()
            .zip(waf)
            .map(|(&t, &w)| Round {
                throughput: t,
                waf: Some(w),
            })
            .collect()
    }

    #[test]
    fn band_is_the_pts_range_and_fit_excursion() {
        assert!(in_band(&[100.0, 101.0, 99.0, 100.0, 100.0]));
        // Range 25% of the mean: fails (a).
        assert!(!in_band(&[90.0, 115.0, 100.0, 95.0, 100.0]));
        // Range 16% but a steady climb: the fit rises 16% over the window, fails (b).
        assert!(!in_band(&[92.0, 96.0, 100.0, 104.0, 108.0]));
        // The same climb at half the rate: range 8%, excursion 8%: steady.
        assert!(in_band(&[96.0, 98.0, 100.0, 102.0, 104.0]));
        assert!(in_band(&[0.0; 5]));
        assert!(!in_band(&[]));
        assert!(!in_band(&[1.0, f64::NAN, 1.0, 1.0, 1.0]));
    }

    #[test]
    fn steady_needs_five_rounds_and_both_variables() {
        let flat = [100.0; 5];
        assert!(!is_steady(&rounds(&flat[..4], &flat[..4])), "four rounds");
        assert!(is_steady(&rounds(&flat, &[1.5; 5])));
        // Throughput flat, WAF still climbing as GC starts: not steady.
        assert!(!is_steady(&rounds(&flat, &[1.0, 1.0, 1.2, 1.6, 1.9])));
        // Only the last five count.
        let mut tps = vec![500.0, 300.0];
        tps.extend(flat);
        assert!(is_steady(&rounds(&tps, &[2.0; 7])));
        // No WAF (a RAM disk): throughput alone.
        let no_waf: Vec<Round> = flat
            .iter()
            .map(|&t| Round {
                throughput: t,
                waf: None,
            })
            .collect();
        assert!(is_steady(&no_waf));
    }

    #[test]
    fn the_loop_stops_when_steady_or_at_the_cap() {
        // Throughput falls by half each round for 6 rounds, then holds.
        let series = |k: u32| 100.0 * 0.5f64.powi(k.min(6) as i32);
        let r = until_steady(25, |k| {
            Ok(Round {
                throughput: series(k),
                waf: Some(2.0),
            })
        })
        .unwrap();
        assert!(r.met);
        assert_eq!(
            r.samples.len(),
            11,
            "rounds 6..=10 are the first steady window"
        );
        // A run too short to be steady is reported as not met.
        let short = until_steady(3, |_| {
            Ok(Round {
                throughput: 1.0,
                waf: Some(1.0),
            })
        })
        .unwrap();
        assert!(!short.met);
        assert_eq!(short.samples.len(), 3);
        let s = SteadyState::of(&short, 0.5);
        assert!(!s.met && s.rounds == 3);
        assert!(s.warning().is_some_and(|w| w.contains("not steady")));
    }

    /// A run that counted no device writes (an application run once on a fresh mount) is
    /// reported without a NaN.
    #[test]
    fn a_skipped_run_without_counted_writes_says_so_without_nan() {
        let w = SteadyState::skipped(f64::NAN).warning().unwrap();
        assert!(w.ends_with("the device's writes were not counted"), "{w}");
        assert!(!w.contains("NaN"), "{w}");
        let w = SteadyState::skipped(0.5).warning().unwrap();
        assert!(w.ends_with("written over 0.50 times"), "{w}");
    }
}
