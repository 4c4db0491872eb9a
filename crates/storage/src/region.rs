//! NoFTL regions (IPA demo, ICDE 2017): a named set of flash chips with its own allocation, GC policy,
//! over-provisioning and wear levelling; tablespaces name a region, and every page of an object
//! in such a tablespace lives on the region's dies.
//!
//! ```text
//! CREATE REGION rg_hot (MAX_SIZE=2G, MAX_CHIPS=4, MAX_CHANNELS=2, GC=greedy, OP=10%, IPA_MODE=pSLC);
//! CREATE TABLESPACE ts_hot (REGION=rg_hot, EXTENT_SIZE=128K);
//! CREATE TABLE t (...) TABLESPACE ts_hot;
//! ```
//!
//! Options: `MAX_CHIPS` (required: the region takes exactly this many whole chips),
//! `MAX_CHANNELS` (default: every channel; the chips come from at most this many channels),
//! `MAX_SIZE` (bytes with K/M/G/T; the region's usable capacity at its OP must reach it),
//! `GC` (greedy, cost-benefit, fifo, random; default greedy), `OP` (over-provisioning as a spare
//! factor in percent, 0-90; default 7), `CELL_MODE` (`native`: the chips' own SLC, MLC or TLC
//! mode, the default; `pSLC`: MLC/TLC blocks used through their lower pages only, with SLC-like
//! timing and endurance and no paired pages, at a half or a third of the capacity; refused on
//! SLC chips), `IPA_MODE` (In-Place Appends, ipa.rs: `none`, the default; `SLC` on SLC chips;
//! `pSLC` on MLC/TLC chips, which makes the region's blocks pSLC; `odd-MLC` is refused with the
//! reason), `IPA_SCHEME` (`NxM`, default `2x3`: N appends per page of M delta records each),
//! `IPA_RECORD` (bytes a delta record is sized for, default 32), `LOG` (`on`: the region also holds the
//! engine's log from now on, e.g. a pSLC region that spares the log the paired-page pads and the
//! slow upper-page programs of MLC/TLC at every commit; at most one region holds it; default
//! `off`), `DEFAULT` (`on`: objects of tablespaces that name no region live here instead of in
//! the default region, which keeps the log and the store's metadata: how IPA is applied to
//! every object on MLC/TLC chips; at most one region; default `off`). A chip here is a package of `dies_per_chip` dies on one channel.
//!
//! Invariants:
//! 1. Parsing and die choice never panic and change nothing; a refused region leaves the device
//!    and the catalog as they were.
//! 2. Regions own disjoint chip sets; the default region keeps at least one chip.
//! 3. The die choice is a function of the geometry, the dies already taken and the spec, so a
//!    region chosen again after a restart gets the same dies.

use ftl::GcPolicy;
use nand::{CellMode, Geometry};

use crate::error::{Error, Result};
use crate::ipa::IpaScheme;

/// Where a region's In-Place Appends go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpaMode {
    /// SLC chips: appends to their pages (NOP from the datasheet).
    Slc,
    /// MLC/TLC chips in pSLC mode (lower pages only): appends as on SLC.
    Pslc,
}

impl IpaMode {
    /// The blocks' cell mode the appends go to (whose NOP bounds them).
    pub fn cell_mode(self) -> CellMode {
        match self {
            IpaMode::Slc => CellMode::Slc,
            IpaMode::Pslc => CellMode::Pslc,
        }
    }
}

/// A parsed `CREATE REGION`.
#[derive(Clone, Debug, PartialEq)]
pub struct RegionSpec {
    pub name: String,
    pub max_chips: u32,
    pub max_channels: Option<u32>,
    pub max_size_bytes: Option<u64>,
    pub gc: GcPolicy,
    /// Spare factor (T - U) / T.
    pub spare_factor: f64,
    /// In-Place Appends (ipa.rs): the mode and the scheme, `None` without.
    pub ipa: Option<(IpaMode, IpaScheme)>,
    /// `None`: the chips' native mode; `Some(Pslc)`: pSLC blocks.
    pub cell_mode: Option<CellMode>,
    /// `LOG=on`: the region holds the engine's log.
    pub holds_log: bool,
    /// `DEFAULT=on`: objects placed in no region's tablespace live here (global IPA on a device
    /// whose native cells cannot append).
    pub holds_default: bool,
    /// The options as written (what the catalog and the store's region table keep).
    pub options: Vec<(String, String)>,
}

/// Parses a size: digits with an optional K, M, G or T suffix (binary units).
pub fn parse_size_bytes(v: &str) -> Option<u64> {
    let v = v.trim();
    let (num, mult) = match v.chars().last()?.to_ascii_uppercase() {
        'K' => (&v[..v.len() - 1], 1u64 << 10),
        'M' => (&v[..v.len() - 1], 1 << 20),
        'G' => (&v[..v.len() - 1], 1 << 30),
        'T' => (&v[..v.len() - 1], 1 << 40),
        _ => (v, 1),
    };
    num.parse::<u64>()
        .ok()?
        .checked_mul(mult)
        .filter(|&b| b > 0)
}

/// Checks one `CREATE REGION` option (the parser calls this to report a bad value at its
/// position). Returns why it is refused.
pub fn check_option(key: &str, value: &str) -> std::result::Result<(), String> {
    let count = |v: &str| {
        v.parse::<u32>()
            .ok()
            .filter(|&n| (1..=4096).contains(&n))
            .map(|_| ())
    };
    match key {
        "MAX_CHIPS" | "MAX_CHANNELS" => {
            count(value).ok_or_else(|| format!("{key} must be a count from 1 to 4096"))
        }
        "MAX_SIZE" => parse_size_bytes(value)
            .map(|_| ())
            .ok_or_else(|| format!("{key} must be a size such as 512M or 2G")),
        "GC" => value
            .parse::<GcPolicy>()
            .map(|_| ())
            .map_err(|e| e.to_string()),
        "OP" => value
            .trim_end_matches('%')
            .parse::<f64>()
            .ok()
            .filter(|p| p.is_finite() && (0.0..=90.0).contains(p))
            .map(|_| ())
            .ok_or_else(|| "OP must be a percentage from 0% to 90%".into()),
        "IPA_MODE" => match value.to_ascii_lowercase().as_str() {
            "none" | "slc" | "pslc" => Ok(()),
            "odd-mlc" | "odd_mlc" => Err(
                "IPA_MODE=odd-MLC (appends on the lower pages of MLC blocks whose upper pages are in use) is not offered: its program-order and paired-page rules are not described in the sources we follow, so its safety cannot be modelled honestly; use pSLC"
                    .into(),
            ),
            _ => Err("IPA_MODE must be none, SLC or pSLC".into()),
        },
        "IPA_SCHEME" => IpaScheme::parse(value, IpaScheme::TABLE_I.record_bytes).map(|_| ()),
        "IPA_RECORD" => value
            .parse::<u16>()
            .ok()
            .filter(|b| (1..=crate::ipa::MAX_RECORD_BYTES).contains(b))
            .map(|_| ())
            .ok_or_else(|| {
                format!(
                    "IPA_RECORD must be the bytes of a delta record, 1 to {}",
                    crate::ipa::MAX_RECORD_BYTES
                )
            }),
        "CELL_MODE" => ["native", "pslc"]
            .contains(&value.to_ascii_lowercase().as_str())
            .then_some(())
            .ok_or_else(|| "CELL_MODE must be native or pSLC".into()),
        "LOG" | "DEFAULT" => ["on", "off"]
            .contains(&value.to_ascii_lowercase().as_str())
            .then_some(())
            .ok_or_else(|| format!("{key} must be on or off")),
        _ => Err(format!(
            "unknown region option {key} (MAX_SIZE, MAX_CHIPS, MAX_CHANNELS, GC, OP, CELL_MODE, IPA_MODE, IPA_SCHEME, IPA_RECORD, LOG, DEFAULT)"
        )),
    }
}

impl RegionSpec {
    pub fn parse(name: &str, options: &[(String, String)]) -> Result<RegionSpec> {
        let mut s = RegionSpec {
            name: name.to_string(),
            max_chips: 0,
            max_channels: None,
            max_size_bytes: None,
            gc: GcPolicy::Greedy,
            spare_factor: 0.07,
            ipa: None,
            cell_mode: None,
            holds_log: false,
            holds_default: false,
            options: options.to_vec(),
        };
        let mut cell_mode_given = None;
        let (mut ipa_mode, mut scheme_text, mut record_bytes) =
            (None, None, IpaScheme::TABLE_I.record_bytes);
        for (k, v) in options {
            check_option(k, v).map_err(|m| Error::Config(format!("region {name}: {m}")))?;
            match k.as_str() {
                "MAX_CHIPS" => s.max_chips = v.parse().unwrap_or(0),
                "MAX_CHANNELS" => s.max_channels = v.parse().ok(),
                "MAX_SIZE" => s.max_size_bytes = parse_size_bytes(v),
                "GC" => s.gc = v.parse().unwrap_or_default(),
                "OP" => {
                    s.spare_factor = v.trim_end_matches('%').parse::<f64>().unwrap_or(7.0) / 100.0
                }
                "CELL_MODE" => cell_mode_given = Some(v.eq_ignore_ascii_case("pslc")),
                "LOG" => s.holds_log = v.eq_ignore_ascii_case("on"),
                "DEFAULT" => s.holds_default = v.eq_ignore_ascii_case("on"),
                "IPA_MODE" => {
                    ipa_mode = match v.to_ascii_lowercase().as_str() {
                        "slc" => Some(IpaMode::Slc),
                        "pslc" => Some(IpaMode::Pslc),
                        _ => None,
                    }
                }
                "IPA_SCHEME" => scheme_text = Some(v.clone()),
                "IPA_RECORD" => record_bytes = v.parse().unwrap_or(record_bytes),
                _ => unreachable!("check_option refuses unknown options"),
            }
        }
        if cell_mode_given == Some(true) {
            s.cell_mode = Some(CellMode::Pslc);
        }
        match ipa_mode {
            None if scheme_text.is_some() => {
                return Err(Error::Config(format!(
                    "region {name}: IPA_SCHEME needs IPA_MODE=SLC or pSLC"
                )))
            }
            None => {}
            Some(mode) => {
                let scheme =
                    IpaScheme::parse(scheme_text.as_deref().unwrap_or("2x3"), record_bytes)
                        .map_err(|m| Error::Config(format!("region {name}: {m}")))?;
                match (mode, cell_mode_given) {
                    // pSLC appends need pSLC blocks: IPA_MODE=pSLC chooses them.
                    (IpaMode::Pslc, Some(false)) => {
                        return Err(Error::Config(format!(
                            "region {name}: IPA_MODE=pSLC appends to pSLC blocks, but CELL_MODE=native"
                        )))
                    }
                    (IpaMode::Pslc, _) => s.cell_mode = Some(CellMode::Pslc),
                    (IpaMode::Slc, Some(true)) => {
                        return Err(Error::Config(format!(
                            "region {name}: IPA_MODE=SLC needs SLC chips in their native mode, but CELL_MODE=pSLC (use IPA_MODE=pSLC)"
                        )))
                    }
                    (IpaMode::Slc, _) => {}
                }
                s.ipa = Some((mode, scheme));
            }
        }
        if s.max_chips == 0 {
            return Err(Error::Config(format!(
                "region {name}: MAX_CHIPS is required"
            )));
        }
        Ok(s)
    }

    /// The dies of the chips this region gets, given the dies other regions hold (`taken`):
    /// the channels with the most free chips first (ties: lower channel), then chips taken
    /// round-robin over those channels so that the region spreads over its channels.
    pub fn choose_dies(&self, geo: &Geometry, taken: &[bool]) -> Result<Vec<u32>> {
        let dpc = geo.dies_per_channel();
        let chip_dies = |ch: u32, chip: u32| {
            (0..geo.dies_per_chip).map(move |i| ch * dpc + chip * geo.dies_per_chip + i)
        };
        let free_chips: Vec<Vec<u32>> = (0..geo.channels)
            .map(|ch| {
                (0..geo.chips_per_channel)
                    .filter(|&c| {
                        chip_dies(ch, c).all(|d| !taken.get(d as usize).copied().unwrap_or(true))
                    })
                    .collect()
            })
            .collect();
        let total_free: usize = free_chips.iter().map(Vec::len).sum();
        let max_channels = self.max_channels.unwrap_or(geo.channels).min(geo.channels);
        let mut order: Vec<u32> = (0..geo.channels).collect();
        order.sort_by_key(|&ch| (std::cmp::Reverse(free_chips[ch as usize].len()), ch));
        order.truncate(max_channels as usize);
        let reachable: usize = order.iter().map(|&ch| free_chips[ch as usize].len()).sum();
        let want = self.max_chips as usize;
        if reachable < want {
            return Err(Error::Config(format!(
                "region {}: {} chips on at most {max_channels} channels do not fit: {reachable} free chips there (the device has {} channels x {} chips, other regions hold the rest)",
                self.name, want, geo.channels, geo.chips_per_channel
            )));
        }
        if total_free <= want {
            return Err(Error::Config(format!(
                "region {}: {want} chips would leave the default region none",
                self.name
            )));
        }
        let mut dies = Vec::new();
        let mut next = vec![0usize; geo.channels as usize];
        let mut got = 0;
        while got < want {
            for &ch in &order {
                let c = &free_chips[ch as usize];
                if got < want && next[ch as usize] < c.len() {
                    dies.extend(chip_dies(ch, c[next[ch as usize]]));
                    next[ch as usize] += 1;
                    got += 1;
                }
            }
        }
        dies.sort_unstable();
        Ok(dies)
    }
}

/// The store's region table (one 4 KiB flash page, key `Layout::region_key`):
///
/// | offset | bytes | field |
/// |---|---|---|
/// | 0 | 4 | magic `RGN1` |
/// | 4 | 2 | region count n |
/// | 6 | .. | n regions: name (u16 len + UTF-8), option count u16, (key, value) strings, die count u16, dies u32 each |
pub fn encode_table(regions: &[(RegionSpec, Vec<u32>)], out: &mut [u8]) -> Result<()> {
    let mut b = Vec::new();
    b.extend_from_slice(b"RGN1");
    b.extend_from_slice(&(regions.len() as u16).to_le_bytes());
    let put = |b: &mut Vec<u8>, s: &str| {
        b.extend_from_slice(&(s.len() as u16).to_le_bytes());
        b.extend_from_slice(s.as_bytes());
    };
    for (spec, dies) in regions {
        put(&mut b, &spec.name);
        b.extend_from_slice(&(spec.options.len() as u16).to_le_bytes());
        for (k, v) in &spec.options {
            put(&mut b, k);
            put(&mut b, v);
        }
        b.extend_from_slice(&(dies.len() as u16).to_le_bytes());
        for d in dies {
            b.extend_from_slice(&d.to_le_bytes());
        }
    }
    if b.len() > out.len() {
        return Err(Error::Config(format!(
            "the region table needs {} bytes, a page has {}",
            b.len(),
            out.len()
        )));
    }
    out.fill(0);
    out[..b.len()].copy_from_slice(&b);
    Ok(())
}

pub fn decode_table(b: &[u8]) -> Result<Vec<(RegionSpec, Vec<u32>)>> {
    let bad = || Error::Recovery("corrupt region table".into());
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8]> {
        let s = b.get(at..at + n).ok_or_else(bad)?;
        at += n;
        Ok(s)
    };
    if take(4)? != b"RGN1" {
        return Err(bad());
    }
    let u16_ = |s: &[u8]| u16::from_le_bytes([s[0], s[1]]) as usize;
    let n = u16_(take(2)?);
    let mut out = Vec::new();
    for _ in 0..n {
        let string = |take: &mut dyn FnMut(usize) -> Result<Vec<u8>>| -> Result<String> {
            let l = u16_(&take(2)?);
            String::from_utf8(take(l)?).map_err(|_| bad())
        };
        let mut tk = |k: usize| take(k).map(<[u8]>::to_vec);
        let name = string(&mut tk)?;
        let no = u16_(&tk(2)?);
        let mut options = Vec::new();
        for _ in 0..no {
            let k = string(&mut tk)?;
            let v = string(&mut tk)?;
            options.push((k, v));
        }
        let nd = u16_(&tk(2)?);
        let mut dies = Vec::new();
        for _ in 0..nd {
            let d = tk(4)?;
            dies.push(u32::from_le_bytes([d[0], d[1], d[2], d[3]]));
        }
        out.push((RegionSpec::parse(&name, &options)?, dies));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(opts: &[(&str, &str)]) -> Result<RegionSpec> {
        RegionSpec::parse(
            "rg",
            &opts
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn options_parse_and_bad_values_are_refused() {
        let s = spec(&[
            ("MAX_SIZE", "2G"),
            ("MAX_CHIPS", "4"),
            ("MAX_CHANNELS", "2"),
            ("GC", "greedy"),
            ("OP", "10%"),
            ("IPA_MODE", "pSLC"),
        ])
        .unwrap();
        assert_eq!(
            (s.max_chips, s.max_channels, s.max_size_bytes),
            (4, Some(2), Some(2 << 30))
        );
        assert!((s.spare_factor - 0.10).abs() < 1e-12);
        assert!(spec(&[("MAX_CHIPS", "0")]).is_err());
        assert!(spec(&[("MAX_CHIPS", "2"), ("OP", "95%")]).is_err());
        assert!(spec(&[("MAX_CHIPS", "2"), ("GC", "lru")]).is_err());
        assert!(
            spec(&[("MAX_SIZE", "2G")]).is_err(),
            "MAX_CHIPS is required"
        );
        assert!(spec(&[("MAX_CHIPS", "2"), ("COLOR", "red")]).is_err());
    }

    #[test]
    fn dies_come_from_the_channel_and_chip_limits_and_tables_round_trip() {
        let geo = Geometry {
            channels: 4,
            chips_per_channel: 2,
            dies_per_chip: 2,
            ..nand::DeviceConfig::preset("tiny", &[]).unwrap().geometry
        };
        let s = spec(&[("MAX_CHIPS", "4"), ("MAX_CHANNELS", "2")]).unwrap();
        let mut taken = vec![false; geo.dies() as usize];
        let d = s.choose_dies(&geo, &taken).unwrap();
        assert_eq!(d.len(), 8);
        let chans: std::collections::BTreeSet<u32> =
            d.iter().map(|x| x / geo.dies_per_channel()).collect();
        assert_eq!(chans.len(), 2);
        for &x in &d {
            taken[x as usize] = true;
        }
        assert!(
            s.choose_dies(&geo, &taken).is_err(),
            "4 more chips would leave the default region none"
        );
        let s2 = spec(&[("MAX_CHIPS", "2"), ("MAX_CHANNELS", "1")]).unwrap();
        let again = s2.choose_dies(&geo, &taken).unwrap();
        assert_eq!(again.len(), 4);
        assert!(again.iter().all(|x| !d.contains(x)));
        for &x in &again {
            taken[x as usize] = true;
        }
        assert!(
            s2.choose_dies(&geo, &taken).is_err(),
            "no chips left for the default region"
        );
        let mut page = vec![0u8; 4096];
        encode_table(&[(s.clone(), d.clone())], &mut page).unwrap();
        let t = decode_table(&page).unwrap();
        assert_eq!(t, vec![(s, d)]);
        assert!(decode_table(&[0u8; 16]).is_err());
    }
}
