//! Builds the block device an experiment runs on from its spec (a target, a device, the FTL's
//! knobs and an optional image file).

use std::path::PathBuf;

use anyhow::{bail, Context};
use ftl::{BlockDevice, FtlOptions};
use nand::Nand;

use crate::device::DeviceSpec;

/// Which FTL (or plain device) to run on, and its knobs.
#[derive(Debug, Clone)]
pub struct TargetSpec {
    /// page | dftl | dftl-orig | fast | block | amf | memdisk
    pub target: String,
    pub device: DeviceSpec,
    pub knobs: FtlKnobs,
    /// Keep the flash in this image file (created if missing, reopened and recovered if present).
    pub image: Option<PathBuf>,
}

/// The knobs of an FTL target, shared by every experiment that builds one (their meaning and
/// units: the CLI's `--cache`, `--op`, `--gc`, `--controller-mhz`, `--write-buffer`,
/// `--slc-cache`, `--dftl-flush-writeback`).
#[derive(Debug, Clone, PartialEq)]
pub struct FtlKnobs {
    /// DFTL and dftl-orig: fraction of the page mappings cached.
    pub cache: f64,
    /// Over-provisioning as a spare factor: (physical - logical) / physical.
    pub op: f64,
    /// Garbage-collection victim policy: greedy | cost-benefit | fifo | random.
    pub gc: String,
    /// Controller clock of the device's FTL, MHz.
    pub controller_mhz: f64,
    /// The controller's write buffer in flash pages (None: the FTL's default).
    pub write_buffer: Option<u32>,
    /// The page FTL's pSLC write cache as a share of every plane's blocks (None: off).
    pub slc_cache: Option<f64>,
    /// dftl: FLUSH also writes every dirty cached mapping back.
    pub dftl_flush_writeback: bool,
    /// `dftl-orig`: loads in flight in its min-age scans (`FtlOptions::dftl_orig_scan_overlap`).
    pub dftl_orig_scan_overlap: u32,
}

impl Default for FtlKnobs {
    /// The CLI's defaults: 2% cache, 7% spare, greedy GC, a 400 MHz controller.
    fn default() -> Self {
        FtlKnobs {
            cache: 0.02,
            op: 0.07,
            gc: "greedy".to_string(),
            controller_mhz: 400.0,
            write_buffer: None,
            slc_cache: None,
            dftl_flush_writeback: false,
            dftl_orig_scan_overlap: 1,
        }
    }
}

impl TargetSpec {
    /// The flags of `noftl serve` naming this target, device, knobs and image (fractions as
    /// fractions, which `--cache`/`--op`/`--slc-cache` take as they take percentages).
    /// `dftl_orig_scan_overlap` has no flag: the CLI always runs its default.
    pub fn cli_args(&self) -> Vec<String> {
        let k = &self.knobs;
        let mut v: Vec<String> = vec!["--store".into(), self.target.clone()];
        v.extend(self.device.cli_args());
        v.extend([
            "--cache".into(),
            k.cache.to_string(),
            "--op".into(),
            k.op.to_string(),
            "--gc".into(),
            k.gc.clone(),
            "--controller-mhz".into(),
            k.controller_mhz.to_string(),
        ]);
        if let Some(w) = k.write_buffer {
            v.extend(["--write-buffer".into(), w.to_string()]);
        }
        if let Some(c) = k.slc_cache {
            v.extend(["--slc-cache".into(), c.to_string()]);
        }
        if k.dftl_flush_writeback {
            v.push("--dftl-flush-writeback".into());
        }
        if let Some(p) = &self.image {
            v.extend(["--image".into(), p.display().to_string()]);
        }
        v
    }

    /// The device configuration this target runs: an existing image's own (read without
    /// changing it or locking it), else the flags'.
    pub fn run_config(&self) -> anyhow::Result<nand::DeviceConfig> {
        match &self.image {
            Some(p) if std::fs::metadata(p).is_ok_and(|m| m.len() > 0) => {
                Ok(Nand::open_image_private(p)
                    .with_context(|| format!("cannot read {}", p.display()))?
                    .config()
                    .clone())
            }
            _ => self.device.load(),
        }
    }

    /// The bytes this target exports on `cfg` (the configuration it runs, `run_config`), found
    /// before anything is served: its FTL built on a fresh in-memory device of that
    /// configuration, nothing locked or written.
    pub fn export_bytes(&self, cfg: &nand::DeviceConfig) -> anyhow::Result<u64> {
        // The probe: the same target on the configuration above, without the image.
        let probe = TargetSpec {
            image: None,
            ..self.clone()
        };
        let opts = probe.ftl_options(cfg.seed)?;
        refuse_flush_writeback_off_dftl(probe.knobs.dftl_flush_writeback, &probe.target)?;
        let pages = match probe.target.as_str() {
            "memdisk" if self.image.is_some() => {
                bail!("--image needs a flash target (memdisk keeps nothing)")
            }
            "memdisk" => cfg.geometry.capacity_bytes() / ftl::LOGICAL_PAGE_BYTES as u64,
            kind if ftl::options::KINDS.contains(&kind) => {
                ftl::build(kind, Nand::new(cfg.clone())?, &opts)?.capacity_pages()
            }
            other => bail!(
                "unknown target '{other}' ({}, memdisk)",
                ftl::options::KINDS.join(", ")
            ),
        };
        Ok(pages * ftl::LOGICAL_PAGE_BYTES as u64)
    }

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
            dftl_orig_scan_overlap: self.knobs.dftl_orig_scan_overlap,
            ..FtlOptions::default()
        };
        opts.validate()?;
        Ok(opts)
    }
}

/// A target's name, checked before any work: the raw flash (`io` only), an FTL or memdisk.
pub fn check_name(target: &str) -> anyhow::Result<()> {
    if target == "raw" || target == "memdisk" || ftl::options::KINDS.contains(&target) {
        return Ok(());
    }
    bail!(
        "unknown target '{target}' (raw, {}, memdisk)",
        ftl::options::KINDS.join(", ")
    )
}

pub fn build(t: &TargetSpec) -> anyhow::Result<Box<dyn BlockDevice>> {
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
