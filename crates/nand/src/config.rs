//! Device configuration: geometry, cell technology, timing, endurance, reliability and energy.
//!
//! Presets live in `presets/*.toml` at the repository root and are embedded in the binary, so the
//! default device needs no file. `--set key=value` overrides any field by its dotted TOML path
//! before validation, so a bad override is refused with the same messages as a bad file.
//!
//! Units are in the field names: `_us` microseconds (f64 in files, integer nanoseconds inside),
//! `_ns` nanoseconds, `_ma` milliamperes, `_ua` microamperes, `_bytes` bytes.

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::geometry::Geometry;

/// The cell technology a block is run in. A chip has one native technology; MLC and TLC chips can
/// run a block as pSLC, chosen when the block is erased.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CellMode {
    Slc,
    Mlc,
    Tlc,
    Pslc,
}

impl CellMode {
    /// Bits stored per cell: the number of pages that share a word line.
    pub fn bits_per_cell(self) -> u32 {
        match self {
            CellMode::Slc | CellMode::Pslc => 1,
            CellMode::Mlc => 2,
            CellMode::Tlc => 3,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            CellMode::Slc => "slc",
            CellMode::Mlc => "mlc",
            CellMode::Tlc => "tlc",
            CellMode::Pslc => "pslc",
        }
    }
}

impl std::fmt::Display for CellMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CellMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "slc" => Ok(CellMode::Slc),
            "mlc" => Ok(CellMode::Mlc),
            "tlc" => Ok(CellMode::Tlc),
            "pslc" => Ok(CellMode::Pslc),
            other => Err(format!("unknown cell mode '{other}' (slc, mlc, tlc, pslc)")),
        }
    }
}

/// Which bit of a word line a page stores; program (and read) latency depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PageType {
    /// The only page of an SLC word line, or a pSLC page.
    Slc,
    Lower,
    Middle,
    Upper,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellConfig {
    /// The chip's native technology: slc, mlc or tlc.
    pub native: CellMode,
    /// Programs allowed per page in SLC and pSLC blocks (the datasheet's NOP). MLC/TLC allow one.
    pub nop: u8,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingConfig {
    /// Command and address cycles on the bus, per operation (and per plane of a multi-plane op).
    pub cmd_addr_ns: u64,
    /// Array read time tR of an SLC page or a lower page.
    pub read_us: f64,
    #[serde(default)]
    pub read_middle_us: Option<f64>,
    #[serde(default)]
    pub read_upper_us: Option<f64>,
    /// Array program time tPROG of an SLC page or a lower page.
    pub program_us: f64,
    #[serde(default)]
    pub program_middle_us: Option<f64>,
    #[serde(default)]
    pub program_upper_us: Option<f64>,
    #[serde(default)]
    pub pslc_read_us: Option<f64>,
    #[serde(default)]
    pub pslc_program_us: Option<f64>,
    /// Latency of an OOB-only read or program, when it differs from the page operation (the NoFTL paper's
    /// emulator charges 0 for OOB access). Absent: a full tR / tPROG, as real NAND needs.
    #[serde(default)]
    pub oob_read_us: Option<f64>,
    #[serde(default)]
    pub oob_program_us: Option<f64>,
    /// Block erase time tBERS.
    pub erase_us: f64,
    #[serde(default)]
    pub pslc_erase_us: Option<f64>,
    /// Bus rate in mega-transfers per second; one byte per transfer on an 8-bit ONFI bus.
    pub bus_mt_per_s: f64,
    /// True when the array times above already include the data transfer (as the latencies of
    /// the NoFTL paper's emulator do); the bus then carries only command cycles.
    #[serde(default)]
    pub transfer_in_array_time: bool,
    /// The chip takes multi-plane programs (ONFI PROGRAM PAGE MULTI-PLANE: one page on each
    /// plane of a die, same page index in each, one array time), as the datasheet says. The
    /// device always accepts `program_multi_plane` on multi-plane geometries; this key tells the
    /// flash space (ftl's space.rs) that it may stripe for it. Absent: false.
    #[serde(default)]
    pub multi_plane_program: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnduranceConfig {
    /// Rated program/erase cycles in the native mode.
    pub native_cycles: u32,
    /// Rated cycles of a block run as pSLC (MLC/TLC chips only).
    #[serde(default)]
    pub pslc_cycles: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReliabilityConfig {
    /// Fraction of blocks marked bad at the factory (seeded; block 0 of each die is always good).
    pub factory_bad_block_ratio: f64,
    /// Data bytes protected by one ECC codeword.
    pub ecc_codeword_bytes: u32,
    /// Bit errors one codeword can correct.
    pub ecc_correctable_bits: u32,
    /// Raw bit error rate of a fresh block just after programming.
    pub rber_fresh: f64,
    /// Raw bit error rate at rated endurance, just after programming.
    pub rber_at_endurance: f64,
    /// Exponent of the power law in wear (P/E cycles over endurance).
    pub rber_wear_exponent: f64,
    /// RBER added per year of retention at rated endurance (scaled by 1 + wear fraction).
    pub rber_retention_per_year: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnergyConfig {
    pub vcc_volts: f64,
    pub read_ma: f64,
    pub program_ma: f64,
    pub erase_ma: f64,
    /// Current drawn by the I/O while the bus transfers data.
    pub bus_ma: f64,
    /// Standby current per die while it is idle.
    pub standby_ua: f64,
}

/// Where page contents live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// Contents in memory, allocated per block as it is programmed.
    #[default]
    Ram,
    /// No payload kept: reads of programmed pages return a deterministic pattern. OOB is kept.
    Meta,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceConfig {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Seed of every random choice the device makes (factory bad blocks, bit errors).
    #[serde(default = "default_seed")]
    pub seed: u64,
    #[serde(default)]
    pub store: StoreKind,
    /// Record a per-operation trace of at most this many entries (0: no trace).
    #[serde(default)]
    pub trace_entries: usize,
    /// Also keep the most recent this many operations, in a ring (0: none): what a live view of
    /// the device's requests shows (NoFTL Fig. 7). Allocates only while the ring fills.
    #[serde(default)]
    pub trace_recent: usize,
    /// Power-loss protection: capacitors hold the device up after the host power fails, long
    /// enough for the operation in flight to complete and for the controller to program what it
    /// buffers (`Nand::power_warning`), as enterprise SSDs do. A power loss then tears nothing.
    /// Their energy is not modelled as a bound: the hold-up is assumed to cover the flush.
    #[serde(default)]
    pub plp: bool,
    pub geometry: Geometry,
    pub cell: CellConfig,
    pub timing: TimingConfig,
    pub endurance: EnduranceConfig,
    pub reliability: ReliabilityConfig,
    pub energy: EnergyConfig,
}

fn default_seed() -> u64 {
    1
}

/// Presets embedded at build time: `(name, TOML text)`.
pub const PRESETS: &[(&str, &str)] = &[
    ("noftl13", include_str!("../../../presets/noftl13.toml")),
    (
        "mt29f16g08",
        include_str!("../../../presets/mt29f16g08.toml"),
    ),
    ("mlc16k", include_str!("../../../presets/mlc16k.toml")),
    ("tlc16k", include_str!("../../../presets/tlc16k.toml")),
    ("tiny", include_str!("../../../presets/tiny.toml")),
    (
        "amf-slides",
        include_str!("../../../presets/amf-slides.toml"),
    ),
];

/// The device every command uses when none is named: the NoFTL paper's emulator.
pub const DEFAULT_PRESET: &str = "noftl13";

impl DeviceConfig {
    /// A preset by name, with overrides applied, validated.
    pub fn preset(name: &str, overrides: &[String]) -> Result<Self, ConfigError> {
        let text = PRESETS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .ok_or_else(|| {
                let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
                ConfigError::UnknownPreset(name.to_string(), names.join(", "))
            })?;
        Self::from_toml(text, overrides)
    }

    /// A config from TOML text, with `key=value` overrides applied, validated.
    pub fn from_toml(text: &str, overrides: &[String]) -> Result<Self, ConfigError> {
        let mut value: toml::Value = text
            .parse::<toml::Table>()
            .map(toml::Value::Table)
            .map_err(|e| ConfigError::Parse(e.to_string()))?;
        for item in overrides {
            apply_override(&mut value, item)?;
        }
        let cfg: DeviceConfig = value
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Parse(e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot render config: {e}"))
    }

    /// Refuses any config that cannot describe a device, naming the field.
    ///
    /// The checks run in a fixed order (the first failing field is the one reported), each
    /// group in its own step below.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.geometry.validate()?;
        self.validate_cell_shape()?;
        self.validate_timing()?;
        self.validate_mode_limits()?;
        self.validate_endurance()?;
        self.validate_reliability()?;
        self.validate_energy()
    }

    /// The chip's native cell mode, its NOP and whole word lines per block: a step because
    /// every later check assumes a real native mode.
    fn validate_cell_shape(&self) -> Result<(), ConfigError> {
        let native = self.cell.native;
        if native == CellMode::Pslc {
            return Err(ConfigError::invalid(
                "cell.native",
                "must be slc, mlc or tlc (pslc is a block mode of mlc/tlc chips)",
            ));
        }
        if self.cell.nop == 0 {
            return Err(ConfigError::invalid(
                "cell.nop",
                "must be at least 1 (one program per page)",
            ));
        }
        if !self
            .geometry
            .pages_per_block
            .is_multiple_of(native.bits_per_cell())
        {
            return Err(ConfigError::invalid(
                "geometry.pages_per_block",
                format!(
                    "must be a multiple of {} for {native} (whole word lines)",
                    native.bits_per_cell()
                ),
            ));
        }
        Ok(())
    }

    /// Every latency is a positive (or, for OOB, non-negative) finite time: a step because the
    /// timing table is one group of fields with one rule each.
    fn validate_timing(&self) -> Result<(), ConfigError> {
        let t = &self.timing;
        let positive = |field: &str, v: f64| -> Result<(), ConfigError> {
            if v.is_finite() && v > 0.0 && v < 1e9 {
                Ok(())
            } else {
                Err(ConfigError::invalid(
                    field,
                    format!("must be a positive finite time, got {v}"),
                ))
            }
        };
        positive("timing.read_us", t.read_us)?;
        positive("timing.program_us", t.program_us)?;
        positive("timing.erase_us", t.erase_us)?;
        if !(t.bus_mt_per_s.is_finite() && t.bus_mt_per_s > 0.0) {
            return Err(ConfigError::invalid(
                "timing.bus_mt_per_s",
                "must be a positive rate",
            ));
        }
        let optional = [
            ("timing.read_middle_us", t.read_middle_us),
            ("timing.read_upper_us", t.read_upper_us),
            ("timing.program_middle_us", t.program_middle_us),
            ("timing.program_upper_us", t.program_upper_us),
            ("timing.pslc_read_us", t.pslc_read_us),
            ("timing.pslc_program_us", t.pslc_program_us),
            ("timing.pslc_erase_us", t.pslc_erase_us),
        ];
        for (field, v) in optional {
            if let Some(v) = v {
                positive(field, v)?;
            }
        }
        for (field, v) in [
            ("timing.oob_read_us", t.oob_read_us),
            ("timing.oob_program_us", t.oob_program_us),
        ] {
            if let Some(v) = v {
                if !(v.is_finite() && (0.0..1e9).contains(&v)) {
                    return Err(ConfigError::invalid(
                        field,
                        format!("must be a non-negative finite time, got {v}"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The NOP ceiling and the per-mode latencies a multi-level chip needs: a step because it
    /// ties the cell mode to the timing table, after both were checked on their own.
    fn validate_mode_limits(&self) -> Result<(), ConfigError> {
        let native = self.cell.native;
        let t = &self.timing;
        if self.cell.nop > 15 {
            return Err(ConfigError::invalid(
                "cell.nop",
                "at most 15 programs per page are tracked",
            ));
        }
        if native != CellMode::Slc && t.program_upper_us.is_none() {
            return Err(ConfigError::invalid(
                "timing.program_upper_us",
                format!("is required for {native} chips"),
            ));
        }
        if native == CellMode::Tlc && t.program_middle_us.is_none() {
            return Err(ConfigError::invalid(
                "timing.program_middle_us",
                "is required for tlc chips",
            ));
        }
        Ok(())
    }

    /// Program/erase cycle budgets are at least one: a step because wear models divide by them.
    fn validate_endurance(&self) -> Result<(), ConfigError> {
        if self.endurance.native_cycles == 0 {
            return Err(ConfigError::invalid(
                "endurance.native_cycles",
                "must be at least 1",
            ));
        }
        if self.endurance.pslc_cycles == Some(0) {
            return Err(ConfigError::invalid(
                "endurance.pslc_cycles",
                "must be at least 1",
            ));
        }
        Ok(())
    }

    /// Bad-block ratio, ECC codeword size and bit error rates are in range: a step because
    /// the reliability model is one group of fields.
    fn validate_reliability(&self) -> Result<(), ConfigError> {
        let r = &self.reliability;
        if !(0.0..1.0).contains(&r.factory_bad_block_ratio) {
            return Err(ConfigError::invalid(
                "reliability.factory_bad_block_ratio",
                "must be in [0, 1)",
            ));
        }
        if r.ecc_codeword_bytes == 0
            || !self
                .geometry
                .page_size_bytes
                .is_multiple_of(r.ecc_codeword_bytes)
        {
            return Err(ConfigError::invalid(
                "reliability.ecc_codeword_bytes",
                "must be at least 1 and divide the page size",
            ));
        }
        for (field, v) in [
            ("reliability.rber_fresh", r.rber_fresh),
            ("reliability.rber_at_endurance", r.rber_at_endurance),
            (
                "reliability.rber_retention_per_year",
                r.rber_retention_per_year,
            ),
        ] {
            if !(0.0..0.5).contains(&v) {
                return Err(ConfigError::invalid(
                    field,
                    format!("must be a bit error rate in [0, 0.5), got {v}"),
                ));
            }
        }
        if !(r.rber_wear_exponent.is_finite() && r.rber_wear_exponent > 0.0) {
            return Err(ConfigError::invalid(
                "reliability.rber_wear_exponent",
                "must be positive",
            ));
        }
        Ok(())
    }

    /// Voltages and currents are non-negative numbers: a step because the energy model is one
    /// group of fields, checked last.
    fn validate_energy(&self) -> Result<(), ConfigError> {
        let e = &self.energy;
        for (field, v) in [
            ("energy.vcc_volts", e.vcc_volts),
            ("energy.read_ma", e.read_ma),
            ("energy.program_ma", e.program_ma),
            ("energy.erase_ma", e.erase_ma),
            ("energy.bus_ma", e.bus_ma),
            ("energy.standby_ua", e.standby_ua),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ConfigError::invalid(
                    field,
                    format!("must be a non-negative number, got {v}"),
                ));
            }
        }
        Ok(())
    }

    /// The partial-program limit of a block mode (NOP): SLC and pSLC use the chip's, MLC/TLC one.
    pub fn nop_limit(&self, mode: CellMode) -> u8 {
        match mode {
            CellMode::Slc | CellMode::Pslc => self.cell.nop,
            CellMode::Mlc | CellMode::Tlc => 1,
        }
    }

    pub fn endurance_cycles(&self, mode: CellMode) -> u32 {
        match mode {
            CellMode::Pslc => self
                .endurance
                .pslc_cycles
                .unwrap_or(self.endurance.native_cycles),
            _ => self.endurance.native_cycles,
        }
    }

    /// Modes a block of this chip may be erased into.
    pub fn allows_mode(&self, mode: CellMode) -> bool {
        mode == self.cell.native || (mode == CellMode::Pslc && self.cell.native != CellMode::Slc)
    }

    /// Pages usable in a block of the given mode (pSLC uses only the lower page of each word line).
    pub fn pages_in_mode(&self, mode: CellMode) -> u32 {
        match mode {
            CellMode::Pslc => self.geometry.pages_per_block / self.cell.native.bits_per_cell(),
            _ => self.geometry.pages_per_block,
        }
    }

    /// The type of page `page` of a block in `mode`.
    pub fn page_type(&self, mode: CellMode, page: u32) -> PageType {
        match mode {
            CellMode::Slc | CellMode::Pslc => PageType::Slc,
            CellMode::Mlc => {
                if page.is_multiple_of(2) {
                    PageType::Lower
                } else {
                    PageType::Upper
                }
            }
            CellMode::Tlc => match page % 3 {
                0 => PageType::Lower,
                1 => PageType::Middle,
                _ => PageType::Upper,
            },
        }
    }
}

fn apply_override(root: &mut toml::Value, item: &str) -> Result<(), ConfigError> {
    let (key, raw) = item
        .split_once('=')
        .ok_or_else(|| ConfigError::BadOverride(item.to_string(), "expected key=value".into()))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(ConfigError::BadOverride(
            item.to_string(),
            "empty key".into(),
        ));
    }
    // A value is parsed as TOML (numbers, booleans, quoted strings); anything else is a bare string.
    let value = format!("v = {}", raw.trim())
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.trim().to_string()));
    let parts: Vec<&str> = key.split('.').collect();
    let mut node = root;
    for (i, part) in parts.iter().enumerate() {
        let table = node.as_table_mut().ok_or_else(|| {
            ConfigError::BadOverride(
                item.to_string(),
                format!("'{}' is not a table", parts[..i].join(".")),
            )
        })?;
        if i + 1 == parts.len() {
            // Keep integer fields integer when the override is written as a whole float, and the
            // reverse, so that `--set timing.read_us=25` works for a float field.
            let fixed = match (table.get(*part), value) {
                (Some(toml::Value::Float(_)), toml::Value::Integer(n)) => {
                    toml::Value::Float(n as f64)
                }
                (_, v) => v,
            };
            table.insert((*part).to_string(), fixed);
            return Ok(());
        }
        node = table
            .entry((*part).to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_valid() {
        for (name, _) in PRESETS {
            let cfg =
                DeviceConfig::preset(name, &[]).unwrap_or_else(|e| panic!("preset {name}: {e}"));
            assert_eq!(&cfg.name, name);
        }
    }

    #[test]
    fn overrides_reach_any_field_and_bad_ones_name_the_problem() {
        let cfg = DeviceConfig::preset(
            "noftl13",
            &["timing.read_us=25".into(), "geometry.channels=4".into()],
        )
        .unwrap();
        assert_eq!(cfg.timing.read_us, 25.0);
        assert_eq!(cfg.geometry.channels, 4);
        let err =
            DeviceConfig::preset("noftl13", &["geometry.pages_per_block=0".into()]).unwrap_err();
        assert!(
            err.to_string().contains("geometry.pages_per_block"),
            "{err}"
        );
        let err = DeviceConfig::preset("noftl13", &["geometry.colour=3".into()]).unwrap_err();
        assert!(err.to_string().contains("colour"), "{err}");
        let err = DeviceConfig::preset("noftl13", &["nokey".into()]).unwrap_err();
        assert!(matches!(err, ConfigError::BadOverride(..)), "{err}");
        let err = DeviceConfig::preset("noftl13", &["cell.nop=0".into()]).unwrap_err();
        assert!(err.to_string().contains("cell.nop"), "{err}");
        let err = DeviceConfig::preset("noftl13", &["timing.erase_us=-3".into()]).unwrap_err();
        assert!(err.to_string().contains("timing.erase_us"), "{err}");
        let err = DeviceConfig::preset("nosuch", &[]).unwrap_err();
        assert!(err.to_string().contains("noftl13"), "{err}");
    }

    #[test]
    fn mlc_needs_upper_page_timing() {
        let err =
            DeviceConfig::preset("mlc16k", &["timing.program_upper_us=0".into()]).unwrap_err();
        assert!(err.to_string().contains("timing.program_upper_us"), "{err}");
    }

    #[test]
    fn page_types_follow_word_lines() {
        let cfg = DeviceConfig::preset("tlc16k", &[]).unwrap();
        assert_eq!(cfg.page_type(CellMode::Tlc, 0), PageType::Lower);
        assert_eq!(cfg.page_type(CellMode::Tlc, 4), PageType::Middle);
        assert_eq!(cfg.page_type(CellMode::Tlc, 5), PageType::Upper);
        assert_eq!(
            cfg.pages_in_mode(CellMode::Pslc),
            cfg.geometry.pages_per_block / 3
        );
        assert!(cfg.allows_mode(CellMode::Pslc));
        assert!(!cfg.allows_mode(CellMode::Mlc));
    }
}
