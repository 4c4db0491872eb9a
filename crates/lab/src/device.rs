//! Which emulated device an experiment runs on: a preset or a TOML file, with `KEY=VALUE`
//! overrides, checked against the machine before anything is allocated.

use std::path::PathBuf;

use anyhow::Context;
use nand::DeviceConfig;

/// A device, as every experiment names one (the CLI's `--preset/--config/--set`).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSpec {
    /// A preset from presets/ (ignored when `config` is given).
    pub preset: String,
    /// A device config file in the presets' TOML format.
    pub config: Option<PathBuf>,
    /// Overrides by dotted path, e.g. `geometry.channels=4`.
    pub set: Vec<String>,
}

impl Default for DeviceSpec {
    fn default() -> Self {
        DeviceSpec::preset(nand::DEFAULT_PRESET)
    }
}

impl DeviceSpec {
    /// A preset without overrides.
    pub fn preset(name: &str) -> DeviceSpec {
        DeviceSpec {
            preset: name.to_string(),
            config: None,
            set: Vec::new(),
        }
    }

    /// The CLI flags naming this device (`--config` or `--preset`, then every `--set`), for
    /// the verbs an experiment runs as child processes (`noftl serve`, `noftl mount`).
    pub fn cli_args(&self) -> Vec<String> {
        let mut v = Vec::new();
        match &self.config {
            Some(c) => v.extend(["--config".into(), c.display().to_string()]),
            None => v.extend(["--preset".into(), self.preset.clone()]),
        }
        for s in &self.set {
            v.extend(["--set".into(), s.clone()]);
        }
        v
    }

    /// The device configuration, checked (nand's `validate`) and refused when the machine cannot
    /// hold the device's metadata (crate::limits), so that no experiment allocates from an absurd
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
