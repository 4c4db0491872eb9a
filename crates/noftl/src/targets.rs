//! Builds the block device a verb runs on from its command-line arguments.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use ftl::{BlockDevice, FtlOptions};
use nand::Nand;

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
    /// The FTL knobs these arguments set; the FTL's seed is the device's.
    pub fn ftl_options(&self, device_seed: u64) -> anyhow::Result<FtlOptions> {
        let opts = FtlOptions {
            cache_fraction: self.knobs.cache,
            spare_factor: self.knobs.op,
            gc: self
                .knobs
                .gc
                .parse()
                .map_err(|e: ftl::FtlError| anyhow::anyhow!("--gc: {e}"))?,
            seed: device_seed,
            controller: ftl::ControllerConfig {
                clock_mhz: self.knobs.controller_mhz,
            },
            // 0 asks the FTL for its default (`FtlOptions::write_buffer_pages`).
            write_buffer_pages: self.knobs.write_buffer.unwrap_or(0),
            slc_cache: self.knobs.slc_cache.unwrap_or(0.0),
            dftl_flush_writeback: self.knobs.dftl_flush_writeback,
            ..FtlOptions::default()
        };
        opts.validate()?;
        Ok(opts)
    }
}

pub fn build(t: &TargetArgs) -> anyhow::Result<Box<dyn BlockDevice>> {
    refuse_flush_writeback_off_dftl(t.knobs.dftl_flush_writeback, &t.target)?;
    match t.target.as_str() {
        "memdisk" => {
            if t.image.is_some() {
                bail!("--image needs a flash target (memdisk keeps nothing)");
            }
            let cfg = t.device.load()?;
            Ok(Box::new(ftl::MemDisk::new(
                cfg.geometry.capacity_bytes() / ftl::LOGICAL_PAGE_BYTES as u64,
            )))
        }
        kind if ftl::options::KINDS.contains(&kind) => {
            let cfg = t.device.load()?;
            let opts = t.ftl_options(cfg.seed)?;
            // Locked before it is looked at, created or recovered (filelock invariant 1); the
            // lock creates a missing image empty, so "exists" means "holds something".
            if let Some(path) = &t.image {
                crate::filelock::hold(path, "--image")?;
            }
            let holds_image = |p: &std::path::Path| std::fs::metadata(p).is_ok_and(|m| m.len() > 0);
            match &t.image {
                None => Ok(ftl::build(kind, Nand::new(cfg)?, &opts)?),
                Some(path) if holds_image(path) => {
                    let nand = Nand::open_image(path)
                        .with_context(|| format!("cannot reopen {}", path.display()))?;
                    if nand.config() != &cfg {
                        eprintln!(
                            "note: {} holds a '{}' device; its own configuration is used",
                            path.display(),
                            nand.config().name
                        );
                    }
                    ftl::open(kind, nand, &opts).with_context(|| {
                        format!("cannot recover the {kind} FTL from {}", path.display())
                    })
                }
                Some(path) => {
                    let nand = Nand::create_image(cfg, path)
                        .with_context(|| format!("cannot create {}", path.display()))?;
                    Ok(ftl::build(kind, nand, &opts)?)
                }
            }
        }
        other => bail!(
            "unknown target '{other}' ({}, memdisk)",
            ftl::options::KINDS.join(", ")
        ),
    }
}

/// `--dftl-flush-writeback` changes what `dftl`'s FLUSH writes; on any other target or store it
/// would be silently ignored, so it is refused.
pub fn refuse_flush_writeback_off_dftl(on: bool, target: &str) -> anyhow::Result<()> {
    if on && target != "dftl" {
        bail!("--dftl-flush-writeback is an option of the dftl FTL; the target is {target}");
    }
    Ok(())
}
