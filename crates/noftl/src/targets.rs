//! Builds the block device a verb runs on from its command-line arguments.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use ftl::BlockDevice;

use crate::cli::common::{parse_percent, DeviceArgs};

/// Which FTL (or plain device) to run on, and its knobs.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// page | dftl | fast | block | amf | memdisk
    #[arg(long, default_value = "page")]
    pub target: String,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// DFTL: fraction of the page mappings the controller caches (e.g. 2%).
    #[arg(long, value_parser = parse_percent, default_value = "2%")]
    pub cache: f64,
    /// Over-provisioning as a spare factor: (physical - logical) / physical.
    #[arg(long, value_parser = parse_percent, default_value = "7%")]
    pub op: f64,
    /// Garbage-collection victim policy: greedy | cost-benefit | fifo | random.
    #[arg(long, default_value = "greedy")]
    pub gc: String,
    /// Keep the flash in this image file (created if missing, reopened and recovered if present).
    #[arg(long)]
    pub image: Option<PathBuf>,
}

pub fn build(t: &TargetArgs) -> anyhow::Result<Box<dyn BlockDevice>> {
    match t.target.as_str() {
        "memdisk" => {
            if t.image.is_some() {
                bail!("--image needs a flash target (memdisk keeps nothing)");
            }
            let cfg = t.device.load()?;
            Ok(Box::new(ftl::MemDisk::new(cfg.geometry.capacity_bytes() / ftl::LOGICAL_PAGE_BYTES as u64)))
        }
        other => bail!("unknown target '{other}' (memdisk; FTL targets are being built)"),
    }
}
