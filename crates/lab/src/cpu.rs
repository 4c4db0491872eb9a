//! Host CPU profiles: what the database host's work costs in virtual time (docs/noftl.md,
//! "Host CPU in virtual time").
//!
//! A profile gives the engine's cost per kind of work (`storage::cpu::CpuModel`), the query
//! layer's (`kits::tpch::QueryCpu`) and how the host runs flash management that lives on it
//! (`dftl-orig`'s scans). Profiles:
//! - `measured`: this engine on the development machine (the defaults of both models, each
//!   with its measurement written at its definition). The honest default for "this engine on
//!   this device".
//! - `paper-noftl`: Shore-MT on the NoFTL paper's server (Xeon E5630), fitted from the NoFTL
//!   columns of NoFTL Fig. 3 and one named DFTL cell (`experiments::reproduce::calibration`
//!   fits them; a test re-fits and gets these constants).
//! - `none`: no host CPU at all (the flash alone).
//! - a TOML file with `[engine]`, `[query]` and `[host]` tables (any field left out keeps the
//!   `measured` value).
//!
//! Invariant: a profile's name says where its numbers come from; a file's profile is named by
//! its path.

use std::path::Path;

use anyhow::{bail, Context};
use kits::tpch::query::QueryCpu;
use serde::{Deserialize, Serialize};
use storage::cpu::CpuModel;

/// How the host runs flash management that lives on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HostCpu {
    /// `dftl-orig`'s min-age scans: independent loads in flight (`FtlOptions::
    /// dftl_orig_scan_overlap`; 1 charges every access in full).
    pub dftl_orig_scan_overlap: u32,
}

impl Default for HostCpu {
    fn default() -> Self {
        HostCpu {
            dftl_orig_scan_overlap: 1,
        }
    }
}

/// A host CPU profile: its name and its costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuProfile {
    pub name: String,
    pub engine: CpuModel,
    pub query: QueryCpu,
    pub host: HostCpu,
}

#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    #[serde(default)]
    engine: CpuModel,
    #[serde(default)]
    query: QueryCpu,
    #[serde(default)]
    host: HostCpu,
}

/// The profile names `--cpu` takes besides a file.
pub const PROFILES: [&str; 3] = ["measured", "paper-noftl", "none"];

/// A profile file is a few lines; anything larger is not one.
const MAX_PROFILE_FILE_BYTES: u64 = 64 << 10;

impl CpuProfile {
    pub fn measured() -> Self {
        CpuProfile {
            name: "measured".into(),
            engine: CpuModel::default(),
            query: QueryCpu::default(),
            host: HostCpu::default(),
        }
    }

    pub fn none() -> Self {
        CpuProfile {
            name: "none".into(),
            engine: CpuModel::NONE,
            query: QueryCpu::NONE,
            host: HostCpu::default(),
        }
    }

    /// Shore-MT on the NoFTL paper's server: `measured` scaled by the fitted factors of
    /// `PAPER_NOFTL_FIT`, plus its fitted commit cost and scan overlap.
    pub fn paper_noftl() -> Self {
        PAPER_NOFTL_FIT.profile()
    }

    /// `measured`, `paper-noftl`, `none`, or a TOML file.
    pub fn parse(spec: &str) -> anyhow::Result<Self> {
        Ok(match spec {
            "measured" => Self::measured(),
            "paper-noftl" => Self::paper_noftl(),
            "none" => Self::none(),
            path => Self::from_file(Path::new(path)).with_context(|| {
                format!(
                    "--cpu takes {} or a TOML file with [engine], [query] and [host] tables",
                    PROFILES.join(", ")
                )
            })?,
        })
    }

    /// The profile as a TOML file `parse` reads back (its name becomes the file's path).
    pub fn to_toml(&self) -> anyhow::Result<String> {
        Ok(toml::to_string(&ProfileFile {
            engine: self.engine,
            query: self.query,
            host: self.host,
        })?)
    }

    fn from_file(path: &Path) -> anyhow::Result<Self> {
        let meta = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?;
        if !meta.is_file() {
            bail!("{} is not a regular file", path.display());
        }
        if meta.len() > MAX_PROFILE_FILE_BYTES {
            bail!(
                "{} has {} bytes; a CPU profile has at most {MAX_PROFILE_FILE_BYTES}",
                path.display(),
                meta.len()
            );
        }
        let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
        let f: ProfileFile =
            toml::from_str(&text).with_context(|| format!("{}", path.display()))?;
        if !(1..=64).contains(&f.host.dftl_orig_scan_overlap) {
            bail!(
                "{}: host.dftl_orig_scan_overlap {} is not in 1..=64",
                path.display(),
                f.host.dftl_orig_scan_overlap
            );
        }
        Ok(CpuProfile {
            name: path.display().to_string(),
            engine: f.engine,
            query: f.query,
            host: f.host,
        })
    }
}

/// What the NoFTL calibration fitted (`experiments::reproduce::calibration::fit`): Shore-MT's
/// work as this engine's measured costs times `engine_scale` (OLTP) and `query_scale` (TPC-H's
/// rows), plus `commit_ns` per commit (the commit path and the log device, which the NoFTL set-up
/// kept off the flash), and the scan overlap of the published DFTL on the E5630.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PaperNoftlFit {
    pub engine_scale: f64,
    pub commit_ns: u64,
    pub query_scale: f64,
    pub dftl_orig_scan_overlap: u32,
}

impl PaperNoftlFit {
    pub fn profile(&self) -> CpuProfile {
        let m = CpuModel::default();
        let q = QueryCpu::default();
        let s = |ns: u64, k: f64| (ns as f64 * k).round() as u64;
        CpuProfile {
            name: "paper-noftl".into(),
            engine: CpuModel {
                ns_per_call: s(m.ns_per_call, self.engine_scale),
                ns_per_fix: s(m.ns_per_fix, self.engine_scale),
                ns_per_record: s(m.ns_per_record, self.engine_scale),
                ns_per_lock: s(m.ns_per_lock, self.engine_scale),
                ns_per_commit: self.commit_ns,
                ns_per_page_read: s(m.ns_per_page_read, self.engine_scale),
                ns_per_page_write: s(m.ns_per_page_write, self.engine_scale),
            },
            query: QueryCpu {
                ns_per_row: s(q.ns_per_row, self.query_scale),
                ns_per_agg: s(q.ns_per_agg, self.query_scale),
                ns_per_join: s(q.ns_per_join, self.query_scale),
            },
            host: HostCpu {
                dftl_orig_scan_overlap: self.dftl_orig_scan_overlap,
            },
        }
    }
}

/// The committed calibration (`noftl reproduce noftl --calibrate` prints a new one; the test
/// `calibration_refits_the_committed_constants` re-fits it from its committed inputs).
pub const PAPER_NOFTL_FIT: PaperNoftlFit = PaperNoftlFit {
    engine_scale: 127.6597,
    commit_ns: 0,
    query_scale: 247.556,
    dftl_orig_scan_overlap: 10,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_by_name_and_from_a_file() {
        assert_eq!(
            CpuProfile::parse("measured").unwrap().engine,
            CpuModel::default()
        );
        assert_eq!(CpuProfile::parse("none").unwrap().engine, CpuModel::NONE);
        assert_eq!(
            CpuProfile::parse("paper-noftl").unwrap().name,
            "paper-noftl"
        );
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.toml");
        std::fs::write(
            &p,
            "[engine]\nns_per_fix = 7\n[host]\ndftl_orig_scan_overlap = 4\n",
        )
        .unwrap();
        let f = CpuProfile::parse(p.to_str().unwrap()).unwrap();
        assert_eq!((f.engine.ns_per_fix, f.engine.ns_per_call), (7, 600));
        assert_eq!(f.query, QueryCpu::default());
        assert_eq!(f.host.dftl_orig_scan_overlap, 4);
    }

    #[test]
    fn bad_profiles_are_refused_with_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        for (text, says) in [
            ("[engine]\nns_per_fox = 7\n", "unknown field"),
            ("[host]\ndftl_orig_scan_overlap = 0\n", "not in 1..=64"),
            ("[engine]\nns_per_fix = -1\n", "ns_per_fix"),
        ] {
            let p = dir.path().join("bad.toml");
            std::fs::write(&p, text).unwrap();
            let e = format!("{:#}", CpuProfile::parse(p.to_str().unwrap()).unwrap_err());
            assert!(e.contains(says), "{text}: {e}");
        }
        let p = dir.path().join("round-trip.toml");
        std::fs::write(&p, CpuProfile::paper_noftl().to_toml().unwrap()).unwrap();
        let back = CpuProfile::parse(p.to_str().unwrap()).unwrap();
        assert_eq!(
            (back.engine, back.query, back.host),
            (
                CpuProfile::paper_noftl().engine,
                CpuProfile::paper_noftl().query,
                CpuProfile::paper_noftl().host
            )
        );
        let e = format!("{:#}", CpuProfile::parse("no-such-profile").unwrap_err());
        assert!(e.contains("measured, paper-noftl, none"), "{e}");
        let e = format!(
            "{:#}",
            CpuProfile::parse(dir.path().to_str().unwrap()).unwrap_err()
        );
        assert!(e.contains("not a regular file"), "{e}");
    }
}
