//! The IPA advisor's rule (docs/ipa.md, "The advisor"): from a baseline's write profile, which
//! objects get an IPA region and which scheme.
//!
//! Objects that take at least 5% of the page write-backs are candidates; the scheme is the
//! smallest delta area (M records of R bytes) whose fit share over the candidates is within 5
//! points of the best one; a candidate gets IPA when at least half its write-backs fit one append
//! of that scheme. N is 2 (IPA Table I), or what the chips' NOP allows if less.

use anyhow::bail;
use serde::Serialize;
use storage::ipa::IpaScheme;

use super::row::ObjectProfile;

/// The advisor's decision from a baseline's write profile.
pub(super) struct Recommendation {
    pub(super) scheme: IpaScheme,
    pub(super) objects: Vec<Advice>,
    /// Expected share of page writes done as appends (0..1).
    pub(super) expected: f64,
    /// Page write-backs in the profile.
    pub(super) total: u64,
}

impl Recommendation {
    /// The tables the advisor gives IPA (an index lives in its table's tablespace, so indexes
    /// are not placed on their own).
    pub(super) fn tables(&self) -> Vec<&str> {
        self.objects
            .iter()
            .filter(|o| o.ipa && o.kind == "table")
            .map(|o| o.name.as_str())
            .collect()
    }
}

/// One object's line of the advice.
#[derive(Debug, Serialize)]
pub struct Advice {
    pub name: String,
    pub kind: &'static str,
    pub writebacks: u64,
    /// This object's share of all page write-backs, percent.
    pub share_percent: f64,
    /// Median and 90th percentile of changed bytes per write-back (bucket upper bounds).
    pub changed_bytes_p50: String,
    pub changed_bytes_p90: String,
    /// Median and 90th percentile of changed ranges (delta records) per write-back.
    pub ranges_p50: usize,
    pub ranges_p90: usize,
    /// Write-backs one append of the recommended scheme could carry, percent of diffed ones.
    pub fit_percent: f64,
    pub ipa: bool,
    /// The histograms, for a plot of the distribution (`noftl plot` reads them).
    pub histogram: storage::buffer::ObjectWrites,
}

/// The rule of this module's doc on `profile`, with N bounded by the chips' `nop`.
pub(super) fn recommend(profile: &[ObjectProfile], nop: u8) -> anyhow::Result<Recommendation> {
    use storage::buffer::PROFILE_RECORD_BYTES;
    let total: u64 = profile.iter().map(|p| p.writes.writebacks).sum();
    if total == 0 {
        bail!("the baseline wrote no pages back in its window; give a longer --duration");
    }
    let share = |p: &ObjectProfile| p.writes.writebacks as f64 / total as f64;
    let candidates: Vec<&ObjectProfile> = profile
        .iter()
        .filter(|p| p.kind != "system" && share(p) >= 0.05 && p.writes.diffed > 0)
        .collect();
    let fit = |p: &ObjectProfile, m: usize, r: usize| {
        p.writes.fits[m][r] as f64 / p.writes.diffed.max(1) as f64
    };
    let combined = |m: usize, r: usize| {
        let w: u64 = candidates.iter().map(|p| p.writes.diffed).sum();
        candidates
            .iter()
            .map(|p| p.writes.fits[m][r] as f64)
            .sum::<f64>()
            / w.max(1) as f64
    };
    let mut options: Vec<(usize, usize, f64, usize)> = Vec::new();
    for m in 0..4 {
        for (r, &record_bytes) in PROFILE_RECORD_BYTES.iter().enumerate() {
            let area = (m + 1) * (storage::ipa::RECORD_HEADER_BYTES + record_bytes);
            options.push((m, r, combined(m, r), area));
        }
    }
    let best = options.iter().map(|o| o.2).fold(0.0, f64::max);
    let (m, r, _, _) = options
        .iter()
        .filter(|o| o.2 >= best - 0.05)
        .min_by_key(|o| o.3)
        .copied()
        .unwrap_or((2, 1, 0.0, 0));
    let n = 2u8.min(nop.saturating_sub(1)).max(1);
    let scheme = IpaScheme {
        appends: n,
        records: (m + 1) as u8,
        record_bytes: PROFILE_RECORD_BYTES[r] as u16,
    };
    let mut objects: Vec<Advice> = profile
        .iter()
        .map(|p| {
            let f = fit(p, m, r);
            let ipa = candidates.iter().any(|c| c.name == p.name) && f >= 0.5;
            Advice {
                name: p.name.clone(),
                kind: p.kind,
                writebacks: p.writes.writebacks,
                share_percent: 100.0 * share(p),
                changed_bytes_p50: bytes_bucket_label(quantile_bucket(
                    &p.writes.changed_bytes,
                    0.5,
                )),
                changed_bytes_p90: bytes_bucket_label(quantile_bucket(
                    &p.writes.changed_bytes,
                    0.9,
                )),
                ranges_p50: quantile_bucket(&p.writes.ranges, 0.5),
                ranges_p90: quantile_bucket(&p.writes.ranges, 0.9),
                fit_percent: 100.0 * f,
                ipa,
                histogram: p.writes.clone(),
            }
        })
        .collect();
    objects.sort_by_key(|o| std::cmp::Reverse(o.writebacks));
    let nf = f64::from(n) / f64::from(n + 1);
    let expected: f64 = objects
        .iter()
        .filter(|o| o.ipa)
        .map(|o| o.writebacks as f64 * o.fit_percent / 100.0 * nf)
        .sum::<f64>()
        / total as f64;
    Ok(Recommendation {
        scheme,
        objects,
        expected,
        total,
    })
}

/// The bucket a quantile of a histogram falls in.
fn quantile_bucket(h: &[u64], q: f64) -> usize {
    let total: u64 = h.iter().sum();
    let want = (total as f64 * q).ceil() as u64;
    let mut acc = 0;
    for (i, &c) in h.iter().enumerate() {
        acc += c;
        if acc >= want.max(1) {
            return i;
        }
    }
    h.len().saturating_sub(1)
}

fn bytes_bucket_label(i: usize) -> String {
    use storage::buffer::PROFILE_BYTES;
    PROFILE_BYTES.get(i).map_or(
        format!("> {}", PROFILE_BYTES[PROFILE_BYTES.len() - 1]),
        |b| format!("<= {b}"),
    )
}
