//! The units of every experiment input, parsed one way for every caller (CLI flags, sweep
//! plans, the dashboard's forms): sizes in binary units, percentages, durations.

use anyhow::{bail, Context};

/// Parses sizes like 4096, 4k, 4KiB, 16M, 512GiB (binary units).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (e.g. 4k, 16MiB, 512GiB)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => return Err(format!("unknown size unit '{other}' in '{s}'")),
    };
    let bytes = value * mult as f64;
    if !(bytes.is_finite() && (0.0..1.8e19).contains(&bytes)) {
        return Err(format!("size '{s}' is out of range"));
    }
    Ok(bytes.round() as u64)
}

/// Parses a percentage like 2%, 2 or 0.02 (a bare number below 1 is a fraction).
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches('%');
    let v: f64 = t
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage (e.g. 2%)"))?;
    let frac = if s.trim().ends_with('%') || v > 1.0 {
        v / 100.0
    } else {
        v
    };
    if !(0.0..=1.0).contains(&frac) {
        return Err(format!("'{s}' is not between 0% and 100%"));
    }
    Ok(frac)
}

/// Parses durations like 60s, 500ms, 2m, 1h (a bare number is seconds) into nanoseconds.
pub fn parse_duration_ns(s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .with_context(|| format!("'{s}' is not a duration (e.g. 60s, 500ms, 2m)"))?;
    let mult = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "" | "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        other => bail!("unknown duration unit '{other}' in '{s}'"),
    };
    let ns = v * mult;
    if !(ns.is_finite() && ns > 0.0 && ns < 1e19) {
        bail!("duration '{s}' is out of range");
    }
    Ok(ns as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_percentages_parse() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("512GiB"), Ok(512 << 30));
        assert_eq!(parse_size("1TB"), Ok(1 << 40));
        assert!(parse_size("12parsecs").is_err());
        assert!(parse_size("").is_err());
        assert_eq!(parse_percent("2%"), Ok(0.02));
        assert_eq!(parse_percent("35"), Ok(0.35));
        assert_eq!(parse_percent("0.15"), Ok(0.15));
        assert!(parse_percent("150%").is_err());
    }
}
