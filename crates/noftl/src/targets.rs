//! The target flags every verb that builds a block device takes, and their spec for the
//! experiment library (`lab::targets` builds the device).

use std::path::PathBuf;

use clap::Args;
use ftl::BlockDevice;

use crate::cli::common::{parse_percent, DeviceArgs};

/// Which FTL (or plain device) to run on, and its knobs.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// The store: page | dftl | dftl-orig | fast | block | amf | memdisk (io also: raw, the
    /// flash itself).
    #[arg(long = "store", visible_alias = "target", default_value = "page")]
    pub target: String,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub knobs: FtlKnobs,
    /// Keep the flash in this image file (created if missing, reopened and recovered if present).
    #[arg(long)]
    pub image: Option<PathBuf>,
}

/// The knobs of an FTL target, shared by every verb that builds one.
#[derive(Debug, Clone, Args)]
pub struct FtlKnobs {
    /// DFTL and dftl-orig: fraction of the page mappings cached (e.g. 2%).
    #[arg(long, value_parser = parse_percent, default_value = "2%")]
    pub cache: f64,
    /// Over-provisioning as a spare factor: (physical - logical) / physical.
    #[arg(long, value_parser = parse_percent, default_value = "7%")]
    pub op: f64,
    /// Garbage-collection victim policy: greedy | cost-benefit | fifo | random.
    #[arg(long, default_value = "greedy")]
    pub gc: String,
    /// Controller clock of the device's FTL, MHz (default: 400, an embedded ARM Cortex-R class
    /// core). dftl-orig runs on the host's CPU (Xeon E5630, 2.53 GHz) and does not use it.
    #[arg(long, default_value_t = 400.0)]
    pub controller_mhz: f64,
    /// page and dftl on flash pages larger than 4 KiB: the controller's write buffer in flash
    /// pages, the one being filled plus those whose programs are in flight (default: 2 per die).
    /// Acknowledged writes in it may be lost at power loss until a FLUSH.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub write_buffer: Option<u32>,
    /// page on MLC/TLC devices: run this share of every plane's blocks as a pSLC write cache
    /// (host writes land there and are folded into native blocks when it fills or when idle;
    /// the cache blocks hold no exported capacity). Off by default.
    #[arg(long, value_parser = parse_percent)]
    pub slc_cache: Option<f64>,
    /// dftl: FLUSH also writes every dirty cached mapping back to flash (not in DFTL's paper;
    /// recovery does not need it). On an OLTP run every commit is a FLUSH, so this multiplies
    /// DFTL's translation writes.
    #[arg(long)]
    pub dftl_flush_writeback: bool,
}

impl TargetArgs {
    /// The target these flags name, as the experiment library takes it.
    pub fn spec(&self) -> lab::targets::TargetSpec {
        lab::targets::TargetSpec {
            target: self.target.clone(),
            device: self.device.spec(),
            knobs: self.knobs.spec(),
            image: self.image.clone(),
        }
    }
}

impl FtlKnobs {
    /// The knobs as the experiment library takes them.
    pub fn spec(&self) -> lab::targets::FtlKnobs {
        lab::targets::FtlKnobs {
            cache: self.cache,
            op: self.op,
            gc: self.gc.clone(),
            controller_mhz: self.controller_mhz,
            write_buffer: self.write_buffer,
            slc_cache: self.slc_cache,
            dftl_flush_writeback: self.dftl_flush_writeback,
            ..lab::targets::FtlKnobs::default()
        }
    }
}

/// The block device of these flags (`lab::targets::build`).
pub fn build(t: &TargetArgs) -> anyhow::Result<Box<dyn BlockDevice>> {
    lab::targets::build(&t.spec())
}
