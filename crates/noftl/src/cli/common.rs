//! Argument groups shared by several verbs.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use nand::DeviceConfig;

/// Which emulated device to use.
#[derive(Debug, Clone, Args)]
pub struct DeviceArgs {
    /// A preset from presets/ (noftl13, mt29f16g08, mlc16k, tlc16k, tiny).
    #[arg(long, default_value = nand::DEFAULT_PRESET, conflicts_with = "config")]
    pub preset: String,
    /// A device config file in the presets' TOML format.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override any config field by its dotted path, e.g. --set geometry.channels=4.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

impl DeviceArgs {
    /// The device configuration, checked (nand's `validate`) and refused when the machine cannot
    /// hold the device's metadata (crate::limits), so that no verb allocates from an absurd
    /// geometry.
    pub fn load(&self) -> anyhow::Result<DeviceConfig> {
        let cfg = self.load_unchecked()?;
        crate::limits::MemoryPlan::new()
            .device(&cfg)
            .check("use fewer blocks (--set geometry.blocks_per_plane=...) or a smaller preset")?;
        Ok(cfg)
    }

    fn load_unchecked(&self) -> anyhow::Result<DeviceConfig> {
        match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                DeviceConfig::from_toml(&text, &self.set)
                    .with_context(|| format!("in {}", path.display()))
            }
            None => Ok(DeviceConfig::preset(&self.preset, &self.set)?),
        }
    }
}

/// Writes `res` as pretty JSON to `path` ("-": standard output). Returns whether the human
/// report should be printed too (not when the JSON went to standard output).
pub fn emit_json(
    path: Option<&std::path::Path>,
    res: &impl serde::Serialize,
) -> anyhow::Result<bool> {
    let json = serde_json::to_string_pretty(res)?;
    match path {
        Some(p) if p.as_os_str() == "-" => {
            println!("{json}");
            return Ok(false);
        }
        Some(p) => crate::output::write_atomic(p, format!("{json}\n").as_bytes())?,
        None => {}
    }
    Ok(true)
}

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
