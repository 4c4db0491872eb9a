//! The block interface: what a conventional SSD offers its host.
//!
//! Contract (every implementation; tests in each FTL check it):
//! 1. Logical pages are `LOGICAL_PAGE_BYTES` long and numbered `0..capacity_pages()`. A request
//!    out of range, or whose buffer is not a whole number of pages, is refused with an error and
//!    changes nothing.
//! 2. A page never written, or trimmed since its last write, reads as zeros.
//! 3. A multi-page request is issued at `at_ns` as a whole (the FTL may spread it over dies); the
//!    returned time is when its last page completes.
//! 4. A write is durable once a later `flush` has returned, or at once when written with `fua`.
//!    After a power cut and recovery, every durable write reads back, and no trimmed data
//!    returns.

use nand::{Nand, Nanos};

use crate::controller::Controller;
// The error lives on the bottom floor (`error.rs`), where `space` and `oob` reach it too; this
// is its old path, which other crates name.
pub use crate::error::FtlError;
use serde::{Deserialize, Serialize};

pub const LOGICAL_PAGE_BYTES: usize = 4096;
pub const SECTOR_BYTES: usize = 512;

/// Host requests, in logical pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCounts {
    pub reads: u64,
    pub writes: u64,
    pub trims: u64,
    pub flushes: u64,
}

/// Work the FTL did on its own behalf.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcCounts {
    /// Valid pages copied by garbage collection (and merges).
    pub migrations: u64,
    /// Blocks erased by garbage collection (and merges).
    pub erases: u64,
    /// Pages moved and blocks erased by wear levelling.
    pub wl_migrations: u64,
    pub wl_erases: u64,
}

/// What an FTL reports about itself: the stable field names of `noftl io` JSON (`host`, `gc`,
/// `waf`, `ftl {...}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FtlReport {
    pub name: String,
    pub host: HostCounts,
    pub gc: GcCounts,
    /// Flash page programs (all purposes) per host page written.
    pub waf: f64,
    /// Controller RAM taken by mapping structures, bytes.
    pub mapping_bytes: u64,
    /// DFTL only: hits of the cached mapping table over lookups.
    pub cmt_hit_ratio: Option<f64>,
    pub translation_reads: u64,
    pub translation_writes: u64,
    /// CPU time spent on mapping work, microseconds: the device controller's, or for flash
    /// management that runs on the host (`dftl-orig`, the NoFTL store) the host's.
    pub controller_busy_us: f64,
    /// The part of `controller_busy_us` spent on the host's CPU (0 for FTLs inside a device).
    #[serde(default)]
    pub host_cpu_us: f64,
    /// `dftl-orig`: cache entries its min-age scans visited (0 for every other FTL).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_scanned_entries: u64,
    /// `dftl-orig`: of those, the entries of scans whose working set did not fit the host's L3.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_scanned_entries_beyond_l3: u64,
    /// `dftl-orig`: the largest working set of one scan (the cache lines of cached entries'
    /// records and both arrays), bytes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_scan_footprint_bytes_max: u64,
    /// `page` with a pSLC write cache (`--slc-cache`): what the cache absorbed and folded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slc_cache: Option<SlcCacheReport>,
    /// Multi-plane programs the flash space issued (space invariant 10; 0 on chips without
    /// them): each programs one page on each of several planes of a die in one array time.
    #[serde(default)]
    pub multi_plane_programs: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The pSLC write cache of the page FTL (`page.rs`, "SLC cache"), in logical pages (4 KiB
/// units) unless named otherwise. `waf` in the report includes the folds' programs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlcCacheReport {
    /// Blocks run in pSLC mode, and their share of the device's blocks.
    pub blocks: u32,
    pub share: f64,
    /// Host writes programmed into pSLC blocks, and straight into native blocks (the cache
    /// had no room).
    pub host_writes_cached: u64,
    pub host_writes_direct: u64,
    /// `host_writes_cached` over all host writes programmed.
    pub hit_rate: f64,
    /// Cached writes overwritten or trimmed while still in pSLC: never folded.
    pub absorbed: u64,
    /// Cache blocks folded (emptied and erased), the valid units copied into native blocks,
    /// the flash pages those copies programmed, and the pad pages that completed their last
    /// word line before the pSLC source was erased.
    pub folds: u64,
    pub folded_units: u64,
    pub fold_programs: u64,
    pub fold_pads: u64,
    /// Folds run in idle time (`background`) rather than when a write found the cache full.
    pub idle_folds: u64,
}

impl SlcCacheReport {
    /// The counters of a window: these less `before` (None: from the start), with the window's
    /// own hit rate.
    pub fn since(&self, before: Option<&SlcCacheReport>) -> SlcCacheReport {
        let b = before.copied().unwrap_or_default();
        let mut d = SlcCacheReport {
            blocks: self.blocks,
            share: self.share,
            host_writes_cached: self.host_writes_cached - b.host_writes_cached,
            host_writes_direct: self.host_writes_direct - b.host_writes_direct,
            hit_rate: 0.0,
            absorbed: self.absorbed - b.absorbed,
            folds: self.folds - b.folds,
            folded_units: self.folded_units - b.folded_units,
            fold_programs: self.fold_programs - b.fold_programs,
            fold_pads: self.fold_pads - b.fold_pads,
            idle_folds: self.idle_folds - b.idle_folds,
        };
        let host = d.host_writes_cached + d.host_writes_direct;
        if host > 0 {
            d.hit_rate = d.host_writes_cached as f64 / host as f64;
        }
        d
    }
}

/// Host and GC counters of one FTL instance, plus the device's program count when the instance
/// started, so that its WAF covers this instance's work only (host counts start at zero too).
#[derive(Clone, Debug, Default)]
pub(crate) struct Counters {
    pub host: HostCounts,
    pub gc: GcCounts,
    base_programs: u64,
}

impl Counters {
    /// Counting from now (call it once formatting or recovery is done).
    pub fn new(nand: &Nand) -> Counters {
        Counters {
            base_programs: flash_programs(nand),
            ..Counters::default()
        }
    }

    /// The report every FTL builds (DFTL adds its cache fields; FTLs on a `FlashSpace` take
    /// `gc` from the space).
    pub fn report(
        &self,
        name: String,
        nand: &Nand,
        mapping_bytes: u64,
        ctrl: &Controller,
    ) -> FtlReport {
        // On flash pages of several logical pages, WAF counts bytes: a page program writes
        // `units` logical pages' worth, full or not (a partly filled page is amplification too).
        let units = u64::from(crate::units::units_per_page(nand.geometry()));
        let programs = flash_programs(nand).saturating_sub(self.base_programs) * units;
        FtlReport {
            name,
            host: self.host,
            gc: self.gc,
            waf: if self.host.writes == 0 {
                0.0
            } else {
                programs as f64 / self.host.writes as f64
            },
            mapping_bytes,
            cmt_hit_ratio: None,
            translation_reads: 0,
            translation_writes: 0,
            controller_busy_us: ctrl.busy_us(),
            host_cpu_us: 0.0,
            cache_scanned_entries: 0,
            cache_scanned_entries_beyond_l3: 0,
            cache_scan_footprint_bytes_max: 0,
            slc_cache: None,
            multi_plane_programs: 0,
        }
    }
}

/// Page programs of every purpose, whole and partial.
fn flash_programs(nand: &Nand) -> u64 {
    let c = nand.stats().flash_counts();
    c.programs + c.partial_programs
}

/// A device with a block interface. Times are virtual nanoseconds (see the contract above).
pub trait BlockDevice: Send {
    /// Short name as it appears in results ("page", "dftl-2%", ...).
    fn name(&self) -> String;
    /// Number of logical pages.
    fn capacity_pages(&self) -> u64;
    /// Reads `buf.len() / LOGICAL_PAGE_BYTES` pages starting at `lpn`.
    fn read(&mut self, at_ns: Nanos, lpn: u64, buf: &mut [u8]) -> Result<Nanos, FtlError>;
    /// Writes whole pages starting at `lpn`; with `fua` they are durable when this returns.
    fn write(&mut self, at_ns: Nanos, lpn: u64, data: &[u8], fua: bool) -> Result<Nanos, FtlError>;
    /// Discards `pages` pages starting at `lpn`: they read as zeros afterwards.
    fn trim(&mut self, at_ns: Nanos, lpn: u64, pages: u64) -> Result<Nanos, FtlError>;
    /// Makes every write acknowledged so far durable.
    fn flush(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError>;
    /// The host power failed on a device with power-loss protection (`Nand::power_warning`):
    /// the capacitors hold the device up while the controller makes everything acknowledged
    /// durable (a flush, counted as one), then the flash goes dark. Returns when the write-back
    /// is done. Without flash there is nothing to protect.
    fn power_fail(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        let done = self.flush(at_ns)?;
        if let Some(n) = self.nand_mut() {
            n.power_cut();
        }
        Ok(done)
    }
    fn report(&self) -> FtlReport;
    /// The flash under the FTL, if it has one (a plain file or RAM disk has none).
    /// (Devices without flash, such as a RAM or file disk, keep the defaults.)
    fn nand(&self) -> Option<&Nand> {
        None
    }
    fn nand_mut(&mut self) -> Option<&mut Nand> {
        None
    }
    /// Gives the flash back (to recover from it after a power cut, or to reopen it with another
    /// FTL). Devices without flash return `None`.
    fn into_nand(self: Box<Self>) -> Option<Nand> {
        None
    }
    /// Whether logical page `lpn` holds data, if the device can tell from its map alone (no
    /// flash operation): `Some(false)` means trimmed or never written, so it reads as zeros.
    /// `None` (the default): cannot tell cheaply. NBD's `base:allocation` reports holes from it.
    fn mapped(&self, lpn: u64) -> Option<bool> {
        let _ = lpn;
        None
    }
    /// Idle-time work (background garbage collection of at most `max_victims` blocks); returns
    /// when it is done. Devices with nothing to do return `at_ns`.
    fn background(&mut self, at_ns: Nanos, max_victims: u32) -> Result<Nanos, FtlError> {
        let _ = max_victims;
        Ok(at_ns)
    }
    /// Insert Address Assist (`iaa.rs`): the device's GC information channel, if it has one.
    /// A plain block device has none.
    fn gc_informed(&mut self) -> Option<&mut dyn crate::iaa::GcInformed> {
        None
    }
}

/// Checks contract item 1 for a request of `bytes` bytes at `lpn`; returns the page count.
pub fn check_request(lpn: u64, bytes: usize, capacity: u64) -> Result<u64, FtlError> {
    check_request_of(lpn, bytes, capacity, LOGICAL_PAGE_BYTES)
}

/// `check_request` for a device whose logical pages are `page_bytes` long (the whole-page FTLs
/// inside `crate::sectors::Sectors`).
pub(crate) fn check_request_of(
    lpn: u64,
    bytes: usize,
    capacity: u64,
    page_bytes: usize,
) -> Result<u64, FtlError> {
    if !bytes.is_multiple_of(page_bytes) {
        return Err(FtlError::Misaligned {
            offset: lpn * page_bytes as u64,
            bytes,
            align: page_bytes,
        });
    }
    let pages = (bytes / page_bytes) as u64;
    check_range(lpn, pages, capacity)?;
    Ok(pages)
}

pub fn check_range(lpn: u64, pages: u64, capacity: u64) -> Result<(), FtlError> {
    match lpn.checked_add(pages) {
        Some(end) if end <= capacity => Ok(()),
        _ => Err(FtlError::OutOfRange {
            start: lpn,
            end: lpn.saturating_add(pages),
            capacity,
        }),
    }
}

impl<D: BlockDevice + ?Sized> BlockDevice for Box<D> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn capacity_pages(&self) -> u64 {
        (**self).capacity_pages()
    }
    fn read(&mut self, at_ns: Nanos, lpn: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        (**self).read(at_ns, lpn, buf)
    }
    fn write(&mut self, at_ns: Nanos, lpn: u64, data: &[u8], fua: bool) -> Result<Nanos, FtlError> {
        (**self).write(at_ns, lpn, data, fua)
    }
    fn trim(&mut self, at_ns: Nanos, lpn: u64, pages: u64) -> Result<Nanos, FtlError> {
        (**self).trim(at_ns, lpn, pages)
    }
    fn flush(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        (**self).flush(at_ns)
    }
    fn power_fail(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        (**self).power_fail(at_ns)
    }
    fn report(&self) -> FtlReport {
        (**self).report()
    }
    fn nand(&self) -> Option<&Nand> {
        (**self).nand()
    }
    fn nand_mut(&mut self) -> Option<&mut Nand> {
        (**self).nand_mut()
    }
    fn into_nand(self: Box<Self>) -> Option<Nand> {
        (*self).into_nand()
    }
    fn background(&mut self, at_ns: Nanos, max_victims: u32) -> Result<Nanos, FtlError> {
        (**self).background(at_ns, max_victims)
    }
    fn mapped(&self, lpn: u64) -> Option<bool> {
        (**self).mapped(lpn)
    }
    fn gc_informed(&mut self) -> Option<&mut dyn crate::iaa::GcInformed> {
        (**self).gc_informed()
    }
}
