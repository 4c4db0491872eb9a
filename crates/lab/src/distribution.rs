//! Where random requests land: fio's `random_distribution` (`random`, `zipf:THETA`,
//! `pareto:H`, `normal:DEV`) over a region of `n` request-sized slots, from a seeded generator.
//!
//! The definitions are fio's (lib/zipf.c, lib/gauss.c), so that a job file means here what it
//! means to fio: Zipf by the method of Gray et al. ("Quickly generating billion-record synthetic
//! databases", SIGMOD 1994) with theta != 1, its normalising sum over at most 10 million ranks;
//! Pareto as `(n - 1) * u ^ (ln h / ln (1 - h))`; "normal" as the mean of 12 uniform draws over
//! the region plus a uniform deviation of DEV percent of it. As in fio, the skewed draws are
//! ranks, scattered over the region by a hash (so the hot slots are not all at its start) and
//! shifted by a seeded offset. The generator and the hash are ours, so the sequence is not
//! fio's: the shape is.
//!
//! Invariant: `next_slot` returns a slot in `0..n`, a function of the seed and the calls before.

use std::fmt;
use std::str::FromStr;

use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// fio's cap on the ranks summed for Zipf's normalising constant (its cost is linear in them).
const ZIPF_MAX_RANKS: u64 = 10_000_000;
/// Uniform draws averaged for fio's "normal" distribution.
const NORMAL_DRAWS: u64 = 12;

/// A `random_distribution`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Distribution {
    /// Every slot equally likely (fio's `random`, the default).
    #[default]
    Uniform,
    /// Zipf with exponent theta (> 0, != 1): rank k drawn with probability ~ 1 / k^theta.
    Zipf { theta: f64 },
    /// Pareto with shape h (0 < h < 1): the larger h, the more uniform.
    Pareto { h: f64 },
    /// fio's approximately normal distribution, `dev` percent of the region wide.
    Normal { dev_percent: f64 },
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distribution::Uniform => f.write_str("random"),
            Distribution::Zipf { theta } => write!(f, "zipf:{theta}"),
            Distribution::Pareto { h } => write!(f, "pareto:{h}"),
            Distribution::Normal { dev_percent } => write!(f, "normal:{dev_percent}"),
        }
    }
}

impl FromStr for Distribution {
    type Err = String;

    /// fio's syntax: `random`, `zipf:THETA`, `pareto:H`, `normal:DEV` (also `uniform`).
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, arg) = match s.split_once(':') {
            Some((k, a)) => (k.trim(), Some(a.trim())),
            None => (s.trim(), None),
        };
        let num = |what: &str| -> Result<f64, String> {
            let a =
                arg.ok_or_else(|| format!("{kind} needs a {what}, e.g. {kind}:{}", example(kind)))?;
            let v: f64 = a
                .parse()
                .map_err(|_| format!("{kind}: {a:?} is not a number ({what})"))?;
            if v.is_finite() {
                Ok(v)
            } else {
                Err(format!("{kind}: {a} is not a finite number"))
            }
        };
        let d = match kind {
            "random" | "uniform" if arg.is_none() => Distribution::Uniform,
            "zipf" => {
                let theta = num("theta")?;
                if theta <= 0.0 || (theta - 1.0).abs() < 1e-9 {
                    return Err(format!("zipf: theta {theta} must be above 0 and not 1"));
                }
                Distribution::Zipf { theta }
            }
            "pareto" => {
                let h = num("shape h")?;
                if !(h > 0.0 && h < 1.0) {
                    return Err(format!("pareto: h {h} must be between 0 and 1"));
                }
                Distribution::Pareto { h }
            }
            "normal" => {
                let dev_percent = num("deviation in percent")?;
                if !(0.0..=100.0).contains(&dev_percent) {
                    return Err(format!("normal: deviation {dev_percent}% must be 0..100"));
                }
                Distribution::Normal { dev_percent }
            }
            "zoned" | "zoned_abs" => {
                return Err(format!(
                    "random_distribution {kind} is not supported (random, zipf:THETA, pareto:H, \
                     normal:DEV are)"
                ))
            }
            _ => {
                return Err(format!(
                    "unknown random distribution {s:?} (random, zipf:THETA, pareto:H, normal:DEV)"
                ))
            }
        };
        Ok(d)
    }
}

fn example(kind: &str) -> &'static str {
    match kind {
        "zipf" => "1.2",
        "pareto" => "0.9",
        _ => "10",
    }
}

/// Draws slots of a region of `n` by a distribution.
#[derive(Debug)]
pub struct Sampler {
    d: Distribution,
    n: u64,
    rng: Xoshiro256PlusPlus,
    offset: u64,
    /// Zipf: the normalising sum over the ranks (zeta(n, theta)) and zeta(2, theta).
    zeta_n: f64,
    zeta_2: f64,
    /// Normal: the deviation's width in slots.
    width: u64,
}

impl Sampler {
    /// A sampler over `0..n` (n >= 1) seeded with `seed`.
    pub fn new(d: Distribution, n: u64, seed: u64) -> Sampler {
        let n = n.max(1);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        // Uniform draws need no offset (and so draw exactly what `rng % n` always drew).
        let offset = if d == Distribution::Uniform {
            0
        } else {
            rng.next_u64() % n
        };
        let (mut zeta_n, mut zeta_2, mut width) = (0.0, 0.0, 0);
        match d {
            Distribution::Zipf { theta } => {
                zeta_2 = 1.0 + 0.5f64.powf(theta);
                zeta_n = (1..=n.min(ZIPF_MAX_RANKS))
                    .map(|k| (k as f64).powf(-theta))
                    .sum();
            }
            Distribution::Normal { dev_percent } => {
                width = ((n as f64 * dev_percent / 100.0).ceil() as u64).min(n / 2);
            }
            _ => {}
        }
        Sampler {
            d,
            n,
            rng,
            offset,
            zeta_n,
            zeta_2,
            width,
        }
    }

    /// True with probability `percent` / 100 (a read of a `rwmixread` mix), from the same
    /// generator.
    pub fn percent(&mut self, percent: u32) -> bool {
        self.rng.next_u64() % 100 < u64::from(percent)
    }

    /// A uniform draw in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next slot, in `0..n`.
    pub fn next_slot(&mut self) -> u64 {
        let n = self.n;
        let rank = match self.d {
            Distribution::Uniform => return self.rng.next_u64() % n,
            Distribution::Zipf { theta } => {
                let u = self.unit();
                let z = u * self.zeta_n;
                if z < 1.0 {
                    0
                } else if z < 1.0 + 0.5f64.powf(theta) {
                    1
                } else {
                    let alpha = 1.0 / (1.0 - theta);
                    let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta))
                        / (1.0 - self.zeta_2 / self.zeta_n);
                    // Rank 1 + n * (eta u - eta + 1)^alpha, from 1; here from 0.
                    (n as f64 * (eta * u - eta + 1.0).powf(alpha)) as u64
                }
            }
            Distribution::Pareto { h } => {
                let u = self.unit();
                ((n - 1) as f64 * u.powf(h.ln() / (1.0 - h).ln())) as u64
            }
            Distribution::Normal { .. } => {
                let mut sum = 0;
                for _ in 0..NORMAL_DRAWS {
                    sum += self.rng.next_u64() % (n + 1);
                }
                let mean = sum.div_ceil(NORMAL_DRAWS);
                if self.width == 0 {
                    mean
                } else {
                    let w = self.width as i64;
                    let mut dev = (self.unit() * w as f64) as i64 - w / 2;
                    while mean as i64 + dev >= n as i64 || mean as i64 + dev < 0 {
                        dev /= 2;
                    }
                    (mean as i64 + dev) as u64
                }
            }
        };
        (scatter(rank) % n + self.offset) % n
    }
}

/// A bijective 64-bit mix (splitmix64's finaliser): consecutive ranks land far apart.
fn scatter(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The share of draws that hit the most popular `top` slots.
    fn top_share(d: &str, n: u64, top: usize) -> f64 {
        let mut s = Sampler::new(d.parse().unwrap(), n, 7);
        let mut counts = vec![0u64; n as usize];
        let draws = 200_000;
        for _ in 0..draws {
            let k = s.next_slot();
            assert!(k < n);
            counts[k as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        counts[..top].iter().sum::<u64>() as f64 / draws as f64
    }

    #[test]
    fn skewed_distributions_concentrate_on_few_slots() {
        let uniform = top_share("random", 10_000, 100);
        assert!(uniform < 0.02, "1% of the slots take {uniform}");
        // Zipf 1.2: the top 1% of ranks draws well over half (the sum's tail is small).
        let zipf = top_share("zipf:1.2", 10_000, 100);
        assert!(zipf > 0.6, "{zipf}");
        let zipf_mild = top_share("zipf:0.8", 10_000, 100);
        assert!(uniform < zipf_mild && zipf_mild < zipf, "{zipf_mild}");
        let pareto = top_share("pareto:0.9", 10_000, 100);
        assert!(pareto > 0.1, "{pareto}");
        let normal = top_share("normal:5", 10_000, 100);
        assert!(normal > uniform, "{normal}");
    }

    #[test]
    fn fio_syntax_is_parsed_and_bad_values_are_named() {
        assert_eq!("zipf:1.2".parse(), Ok(Distribution::Zipf { theta: 1.2 }));
        assert_eq!("random".parse(), Ok(Distribution::Uniform));
        assert_eq!(
            "normal:10".parse(),
            Ok(Distribution::Normal { dev_percent: 10.0 })
        );
        for (bad, says) in [
            ("zipf:1", "not 1"),
            ("zipf", "needs a theta"),
            ("pareto:1.5", "between 0 and 1"),
            ("zoned:50/5:50/95", "not supported"),
            ("gauss:3", "unknown"),
        ] {
            let e = bad.parse::<Distribution>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert_eq!(Distribution::Zipf { theta: 1.2 }.to_string(), "zipf:1.2");
    }

    #[test]
    fn a_sampler_is_a_function_of_its_seed() {
        let draw = |seed| {
            let mut s = Sampler::new(Distribution::Zipf { theta: 1.1 }, 1000, seed);
            (0..50).map(|_| s.next_slot()).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }
}
