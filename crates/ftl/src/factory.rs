//! The factory: builds or recovers an FTL by its name (`ftl::build`, `ftl::open`).
//!
//! Top floor of the crate: it names every FTL, so it sits above them all, and nothing but the
//! crate root imports it (the FTLs take their options and shared checks from `options.rs`
//! below them). The list of names is `options::KINDS`.

use nand::Nand;

use crate::block_device::{BlockDevice, FtlError};
use crate::options::{FtlOptions, KINDS};

/// Builds a fresh FTL of kind `kind` on `nand` (formatting it).
pub fn build(kind: &str, nand: Nand, opts: &FtlOptions) -> Result<Box<dyn BlockDevice>, FtlError> {
    opts.check_slc_cache(kind, nand.config())?;
    let units = crate::space::units_per_page(nand.geometry());
    let whole = units > 1;
    match kind {
        "page" => Ok(Box::new(crate::page::PageFtl::new(nand, opts)?)),
        "dftl" => Ok(Box::new(crate::dftl::Dftl::new(nand, opts)?)),
        "dftl-orig" => Ok(Box::new(crate::dftl_orig::DftlOrig::new(nand, opts)?)),
        // The block-mapped FTLs map whole flash pages; on pages of several sectors they run
        // behind the sector layer (`sectors.rs`).
        "fast" if whole => Ok(sectors(
            crate::fast::Fast::new_whole_pages(nand, &fast_options(opts))?,
            units,
        )),
        "fast" => Ok(Box::new(crate::fast::Fast::new(nand, &fast_options(opts))?)),
        "block" if whole => Ok(sectors(
            crate::block::BlockFtl::new_whole_pages(nand, &block_options(opts))?,
            units,
        )),
        "block" => Ok(Box::new(crate::block::BlockFtl::new(
            nand,
            &block_options(opts),
        )?)),
        "amf" if whole => Ok(Box::new(crate::sectors::Sectors::append_only(
            crate::amf::Amf::new_whole_pages(nand, &amf_options(opts))?,
            units,
        ))),
        "amf" => Ok(Box::new(crate::amf::Amf::new(nand, &amf_options(opts))?)),
        other => Err(unknown(other)),
    }
}

fn sectors(inner: impl BlockDevice + 'static, units: u32) -> Box<dyn BlockDevice> {
    Box::new(crate::sectors::Sectors::new(inner, units))
}

/// Recovers an FTL of kind `kind` from a device that holds data (after a power cut, or an image
/// reopened with `Nand::open_image`): scans it and rebuilds the mapping.
pub fn open(kind: &str, nand: Nand, opts: &FtlOptions) -> Result<Box<dyn BlockDevice>, FtlError> {
    opts.check_slc_cache(kind, nand.config())?;
    let units = crate::space::units_per_page(nand.geometry());
    let whole = units > 1;
    match kind {
        "page" => Ok(Box::new(crate::page::PageFtl::open(nand, opts)?)),
        "dftl" => Ok(Box::new(crate::dftl::Dftl::open(nand, opts)?)),
        "dftl-orig" => Ok(Box::new(crate::dftl_orig::DftlOrig::open(nand, opts)?)),
        "fast" if whole => Ok(sectors(
            crate::fast::Fast::open_whole_pages(nand, &fast_options(opts))?,
            units,
        )),
        "fast" => Ok(Box::new(crate::fast::Fast::open(
            nand,
            &fast_options(opts),
        )?)),
        "block" if whole => Ok(sectors(
            crate::block::BlockFtl::open_whole_pages(nand, &block_options(opts))?,
            units,
        )),
        "block" => Ok(Box::new(crate::block::BlockFtl::open(
            nand,
            &block_options(opts),
        )?)),
        "amf" if whole => Ok(Box::new(crate::sectors::Sectors::append_only(
            crate::amf::Amf::open_whole_pages(nand, &amf_options(opts))?,
            units,
        ))),
        "amf" => Ok(Box::new(crate::amf::Amf::open(nand, &amf_options(opts))?)),
        other => Err(unknown(other)),
    }
}

fn unknown(kind: &str) -> FtlError {
    FtlError::Config(format!("unknown FTL '{kind}' ({})", KINDS.join(", ")))
}

// The block-mapped FTLs have their own option types; the shared knobs carry over.
fn fast_options(o: &FtlOptions) -> crate::fast::FastOptions {
    crate::fast::FastOptions {
        spare_factor: o.spare_factor,
        controller: o.controller.clone(),
        ..Default::default()
    }
}
fn block_options(o: &FtlOptions) -> crate::block::BlockOptions {
    crate::block::BlockOptions {
        spare_factor: o.spare_factor,
        controller: o.controller.clone(),
    }
}
fn amf_options(o: &FtlOptions) -> crate::amf::AmfOptions {
    crate::amf::AmfOptions {
        controller: o.controller.clone(),
        ..Default::default()
    }
}
