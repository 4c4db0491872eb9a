//! The page stores an experiment runs the engine on: the NoFTL store (`native`) on a raw
//! device, with its log or every object in a region of its own when asked; the block-device
//! stores are `targets` under `storage::BlockPageStore`.

use nand::Nand;
use storage::{NativeConfig, NativeStore};

use crate::device::DeviceSpec;

/// The NoFTL store for `bench --storage native`: on the device of `device`, with `op` spare,
/// its log in a region of its own if `log_region` says so.
pub fn native_store(
    device: &DeviceSpec,
    op: f64,
    page_bytes: usize,
    log_region: Option<&LogRegion>,
) -> anyhow::Result<NativeStore> {
    let cfg = device.load()?;
    let seed = cfg.seed;
    let mut s = NativeStore::format(
        Nand::new(cfg)?,
        NativeConfig {
            page_bytes,
            spare_factor: op,
            seed,
            ..NativeConfig::default()
        },
    )?;
    place_log(&mut s, log_region)?;
    Ok(s)
}

/// `--log-region`: CREATE REGION options for the native store's log (`LOG=on` added).
#[derive(Clone, Debug, PartialEq)]
pub struct LogRegion(pub Vec<(String, String)>);

/// The region that holds the log when `--log-region` is given.
pub const LOG_REGION: &str = "noftl_log";

/// Parses `--log-region` (`KEY=VALUE,...`) and checks it as CREATE REGION would, before
/// anything is loaded.
pub fn parse_log_region(s: &str) -> Result<LogRegion, String> {
    parse_region_options(s, LOG_REGION, "LOG", "--log-region").map(LogRegion)
}

/// `--ipa`: CREATE REGION options of a region that takes every object (`DEFAULT=on` added),
/// with In-Place Appends.
#[derive(Clone, Debug, PartialEq)]
pub struct IpaRegion(pub Vec<(String, String)>);

/// The region of every object when `--ipa` is given.
pub const IPA_REGION: &str = "noftl_ipa";

/// Parses `--ipa` (`KEY=VALUE,...`, IPA_MODE among them) as CREATE REGION would.
pub fn parse_ipa_region(s: &str) -> Result<IpaRegion, String> {
    let opts = parse_region_options(s, IPA_REGION, "DEFAULT", "--ipa")?;
    let spec = storage::region::RegionSpec::parse(IPA_REGION, &opts).map_err(|e| e.to_string())?;
    if spec.ipa.is_none() {
        return Err(
            "--ipa needs IPA_MODE=SLC or pSLC (e.g. MAX_CHIPS=2,IPA_MODE=SLC,IPA_SCHEME=2x3)"
                .into(),
        );
    }
    Ok(IpaRegion(opts))
}

/// `KEY=VALUE,...` as CREATE REGION options, with `implied=on` added (refused if given).
fn parse_region_options(
    s: &str,
    region: &str,
    implied: &str,
    flag: &str,
) -> Result<Vec<(String, String)>, String> {
    let mut opts = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            format!("'{part}' is not KEY=VALUE (e.g. MAX_CHIPS=1,CELL_MODE=pSLC)")
        })?;
        let k = k.trim().to_ascii_uppercase();
        if k == implied {
            return Err(format!("{implied}=on is implied by {flag}"));
        }
        opts.push((k, v.trim().to_string()));
    }
    opts.push((implied.into(), "on".into()));
    storage::region::RegionSpec::parse(region, &opts).map_err(|e| e.to_string())?;
    Ok(opts)
}

/// Creates the log's region on a freshly formatted store (nothing to do without one).
pub fn place_log(s: &mut NativeStore, log_region: Option<&LogRegion>) -> anyhow::Result<()> {
    if let Some(LogRegion(opts)) = log_region {
        let at = s.space().nand().now_ns();
        s.create_region(at, LOG_REGION, opts)?;
    }
    Ok(())
}
