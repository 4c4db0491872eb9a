//! `lfs`: a log-structured file system over any block FTL, in two modes (docs/lfs.md):
//! - `f2fs`: F2FS's design (Lee et al., "F2FS", FAST 2015): data and node logs, a node address
//!   table (NAT), a segment information table (SIT) and checkpoint packs at fixed addresses,
//!   rewritten in place; cleaning on the host; roll-forward of fsynced files.
//! - `alfs`: the same with every in-place update removed, as ALFS does for Application-Managed
//!   Flash ("AMF", FAST 2016): NAT and SIT blocks appended to a meta log, checkpoints appended to
//!   two checkpoint segments used in turn, segments the size of the AMF segment and trimmed
//!   whole after cleaning. On the `amf` target a single overwrite is refused by the device.

pub mod fs;
pub mod layout;

pub use fs::{
    host_table_bytes, table_sizes, Cleaning, DirEntry, Lfs, LfsError, LfsResult, MountReport,
    Params, SetAttr, StatFs, Stats,
};
pub use layout::{Inode, Mode};

use ftl::{BlockDevice, FtlError, FtlOptions};
use nand::Nand;

/// F2FS's segment: 2 MiB (512 pages of 4 KiB).
pub const F2FS_SEGMENT_PAGES: u32 = 512;

/// The block device a mode runs on: `target` (page, dftl, amf, ...) over `nand`, freshly
/// formatted (`fresh`) or recovered from what the flash holds; and the segment size the mode
/// uses there (ALFS: the AMF segment; F2FS: 2 MiB, less on a device too small for it).
pub fn device(
    mode: Mode,
    target: &str,
    nand: Nand,
    opts: &FtlOptions,
    fresh: bool,
) -> Result<(Box<dyn BlockDevice>, u32), FtlError> {
    if mode == Mode::Alfs && target != "amf" {
        return Err(FtlError::Config(format!(
            "alfs runs on the amf target only (it relies on append-only segments); got '{target}'"
        )));
    }
    if target == "amf" {
        let aopts = ftl::amf::AmfOptions {
            controller: opts.controller.clone(),
            ..Default::default()
        };
        let amf = if fresh {
            ftl::amf::Amf::new(nand, &aopts)?
        } else {
            ftl::amf::Amf::open(nand, &aopts)?
        };
        let seg = amf.segment_pages() as u32;
        return Ok((Box::new(amf), seg));
    }
    let dev = if fresh {
        ftl::build(target, nand, opts)?
    } else {
        ftl::open(target, nand, opts)?
    };
    // At least 64 segments, so that the cleaner's reserve is a small part of the device.
    let mut seg = F2FS_SEGMENT_PAGES;
    while seg > 16 && dev.capacity_pages() / u64::from(seg) < 64 {
        seg /= 2;
    }
    Ok((dev, seg))
}
