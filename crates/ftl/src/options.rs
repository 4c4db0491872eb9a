//! FTL options and what the FTLs share: the logical capacity for a spare factor, the spare-factor
//! and page-size checks, and the page-mapped FTLs' controller cycle costs and their charge.
//!
//! Floor: above the flash space and the journal, below every FTL, which import it. The factory
//! that builds an FTL by name (`build`, `open`) names every FTL, so it sits above them all in
//! `factory.rs`; nothing here may import an FTL.
//!
//! Controller cost assumptions (cycles of the controller clock, `ControllerConfig`, default
//! 400 MHz). The mapping structures of a real SSD live in the controller's DRAM and are far
//! larger than its caches, so a random mapping access is a DRAM access:
//! - `DRAM_ACCESS_CYCLES` = 40 (~100 ns; `controller.rs` says why), shared by every FTL.
//! - Instruction counts per operation are our estimates for straight-line C on an in-order
//!   Cortex-R class core (about one instruction per cycle); each cost names its accesses.
//!
//! | operation (page FTL)      | cycles | accounting                                              |
//! |---------------------------|--------|---------------------------------------------------------|
//! | lookup (read, trim)       | 60     | 20 instructions + 1 DRAM access (the map entry)         |
//! | update (write)            | 200    | 40 instr. + 4 DRAM: map entry, old page's reverse-map entry and block counter, new reverse-map entry |
//! | GC / WL page move         | 100    | 20 instr. + 2 DRAM: map entry, block counter (reverse map read sequentially: cached) |
//! | victim selection          | 90     | 50 instr. + 1 DRAM (greedy bucket head, FIFO head, random index); cost-benefit adds 10 per candidate |
//!
//! DFTL's costs are in `dftl.rs`; `dftl-orig` runs on the host, its costs are in `dftl_orig.rs`.

use nand::Nand;
use serde::{Deserialize, Serialize};

use crate::block_device::{Counters, FtlError, FtlReport, GcCounts, LOGICAL_PAGE_BYTES};
use crate::controller::{Controller, ControllerConfig};
use crate::space::{FlashSpace, GcPolicy, SpaceConfig, SpaceCounts};

pub use crate::controller::DRAM_ACCESS_CYCLES;
pub const LOOKUP_CYCLES: u64 = 20 + DRAM_ACCESS_CYCLES;
pub const UPDATE_CYCLES: u64 = 40 + 4 * DRAM_ACCESS_CYCLES;
pub const MOVE_CYCLES: u64 = 20 + 2 * DRAM_ACCESS_CYCLES;
pub const VICTIM_CYCLES: u64 = 50 + DRAM_ACCESS_CYCLES;
pub const COST_BENEFIT_CYCLES_PER_CANDIDATE: u64 = 10;

/// Knobs of every FTL (each uses the ones that apply to it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FtlOptions {
    /// DFTL and dftl-orig: fraction of the page mappings cached (0 < f <= 1).
    pub cache_fraction: f64,
    /// Over-provisioning as a spare factor (T - U) / T, T the physical pages outside the GC
    /// reserve, U the logical pages exported.
    pub spare_factor: f64,
    pub gc: GcPolicy,
    /// Seed of every random choice of the FTL (the random GC policy).
    pub seed: u64,
    pub controller: ControllerConfig,
    /// Static wear levelling threshold (erase-count spread); 0 turns it off.
    pub wl_threshold: u32,
    /// GC reserve in blocks; 0 picks dies + 2, dies x planes + 2 with multi-plane programs
    /// (see `space.rs`).
    pub reserve_blocks: u32,
    /// Flash pages larger than a logical page (`page`, `dftl`): the controller's write buffer
    /// in flash pages (`wbuf.rs`); 0 picks 2 per die (per plane of each die with multi-plane
    /// programs).
    pub write_buffer_pages: u32,
    /// `page` on MLC/TLC chips: the share of every plane's blocks run as a pSLC write cache
    /// (`page.rs`, "SLC cache"); 0 turns it off. Those blocks hold no exported capacity.
    #[serde(default)]
    pub slc_cache: f64,
    /// `dftl`: FLUSH also writes every dirty cached mapping back to its translation page.
    /// Off by default, as in DFTL's paper: recovery rebuilds the map from the OOB scan and
    /// needs none of it (`dftl.rs`, "FLUSH").
    #[serde(default)]
    pub dftl_flush_writeback: bool,
    /// `dftl-orig`: independent loads of its min-age scans in flight at once on the host's core
    /// (memory-level parallelism: a scan entry costs its instructions plus one access divided
    /// by this). 1 charges every access in full, the upper bound; Westmere's 10 line-fill
    /// buffers bound it from above. `noftl reproduce noftl` fits it from one named cell of NoFTL
    /// Fig. 3 (docs/noftl.md, "Calibration").
    #[serde(default = "one")]
    pub dftl_orig_scan_overlap: u32,
}

fn one() -> u32 {
    1
}

impl Default for FtlOptions {
    fn default() -> Self {
        FtlOptions {
            cache_fraction: 0.02,
            spare_factor: 0.07,
            gc: GcPolicy::Greedy,
            seed: 1,
            controller: ControllerConfig::default(),
            wl_threshold: 1000,
            reserve_blocks: 0,
            write_buffer_pages: 0,
            slc_cache: 0.0,
            dftl_flush_writeback: false,
            dftl_orig_scan_overlap: 1,
        }
    }
}

impl FtlOptions {
    pub fn validate(&self) -> Result<(), FtlError> {
        check_spare_factor(self.spare_factor)?;
        if !(1..=64).contains(&self.dftl_orig_scan_overlap) {
            return Err(FtlError::Config(format!(
                "dftl-orig's scan overlap {} is not in 1..=64 loads in flight",
                self.dftl_orig_scan_overlap
            )));
        }
        if !(self.cache_fraction.is_finite()
            && self.cache_fraction > 0.0
            && self.cache_fraction <= 1.0)
        {
            return Err(FtlError::Config(format!(
                "cache fraction {} is not in (0, 1]",
                self.cache_fraction
            )));
        }
        if !(self.slc_cache.is_finite() && (0.0..=0.5).contains(&self.slc_cache)) {
            return Err(FtlError::Config(format!(
                "--slc-cache {}% is not in [0%, 50%]",
                self.slc_cache * 100.0
            )));
        }
        if !(self.controller.clock_mhz.is_finite() && self.controller.clock_mhz > 0.0) {
            return Err(FtlError::Config(format!(
                "controller clock {} MHz is not positive",
                self.controller.clock_mhz
            )));
        }
        Ok(())
    }

    /// The space configuration of a page-mapped FTL with `streams` streams, of which only
    /// stream 0 (host data) is striped page by page.
    pub(crate) fn space_config(&self, streams: u8) -> SpaceConfig {
        SpaceConfig {
            streams,
            gc: self.gc,
            seed: self.seed,
            reserve_blocks: self.reserve_blocks,
            background_free_blocks: 0,
            wl_threshold: self.wl_threshold,
            striped: 1,
            dies: Vec::new(),
            stamp_incarnation: false,
            gc_reads_oob: false,
            cell_mode: None,
            plane_blocks: None,
        }
    }

    /// Blocks per plane run as the pSLC write cache (`page.rs`, "SLC cache"): the first
    /// `slc_cache` share of every plane's blocks, rounded down; 0 when the cache is off.
    pub fn slc_cache_blocks_per_plane(&self, g: &nand::Geometry) -> u32 {
        (self.slc_cache * f64::from(g.blocks_per_plane)).floor() as u32
    }

    /// Refuses a pSLC write cache that the device or the FTL `kind` cannot run, before anything
    /// is built: SLC chips have no pSLC mode, only the page FTL folds, and the share must leave
    /// both the cache and the native blocks a usable number of blocks.
    pub(crate) fn check_slc_cache(
        &self,
        kind: &str,
        dev: &nand::DeviceConfig,
    ) -> Result<(), FtlError> {
        if self.slc_cache == 0.0 {
            return Ok(());
        }
        self.validate()?;
        if kind != "page" {
            return Err(FtlError::Config(format!(
                "--slc-cache: the {kind} FTL has no pSLC write cache (only page folds its cache into native blocks)"
            )));
        }
        if !dev.allows_mode(nand::CellMode::Pslc) {
            return Err(FtlError::Config(format!(
                "--slc-cache needs MLC or TLC chips (a pSLC block is an MLC/TLC block programmed on its lower pages only); this device is {}",
                dev.cell.native.name()
            )));
        }
        let g = &dev.geometry;
        let k = self.slc_cache_blocks_per_plane(g);
        // Every die needs an open cache block, plus one to fill while another is folded.
        let cache_blocks = u64::from(k) * u64::from(g.planes_per_die) * u64::from(g.dies());
        if k == 0 || cache_blocks < u64::from(g.dies()) + 2 {
            return Err(FtlError::Config(format!(
                "--slc-cache {}% of {} blocks per plane is {k} per plane, {cache_blocks} in all; the cache needs at least {} (an open block per die plus 2)",
                self.slc_cache * 100.0,
                g.blocks_per_plane,
                g.dies() + 2
            )));
        }
        Ok(())
    }
}

/// Refuses a spare factor outside [0, 1) (every FTL's over-provisioning knob).
pub(crate) fn check_spare_factor(spare_factor: f64) -> Result<(), FtlError> {
    if spare_factor.is_finite() && (0.0..1.0).contains(&spare_factor) {
        Ok(())
    } else {
        Err(FtlError::Config(format!(
            "spare factor {spare_factor} is not in [0, 1)"
        )))
    }
}

/// Refuses flash pages larger than a logical page where the mapping is one to one (the
/// block-mapped FTLs: no sub-page mapping, no write buffer).
pub(crate) fn check_page_size(g: &nand::Geometry) -> Result<(), FtlError> {
    if g.page_size_bytes as usize != LOGICAL_PAGE_BYTES {
        return Err(FtlError::Config(format!(
            "the block-mapped FTLs (block, fast, amf) map {}-byte logical pages one to one onto flash pages; the device has {}-byte pages (`ftl::build` runs them behind 4 KiB sectors there, `sectors.rs`)",
            LOGICAL_PAGE_BYTES,
            g.page_size_bytes
        )));
    }
    Ok(())
}

/// Page geometry checks and the logical capacity of a page-mapped FTL: U = floor((1 - s) T),
/// T = (blocks not marked bad at the factory - GC reserve) x pages per block. Computed from the
/// device's config and factory marks only, so it is the same on every reopen (grown bad blocks
/// eat spare, not capacity). `extra_open_blocks` are the metadata streams' open blocks.
pub(crate) fn page_mapped_capacity(
    nand: &Nand,
    opts: &FtlOptions,
    extra_open_blocks: u32,
) -> Result<u64, FtlError> {
    opts.validate()?;
    let g = nand.geometry();
    // Sub-page mapping (space.rs, "Units"): a flash page of 8 or 16 KiB holds 2 or 4 logical
    // pages, each mapped on its own.
    let page_bytes = g.page_size_bytes as usize;
    if page_bytes < LOGICAL_PAGE_BYTES || !page_bytes.is_multiple_of(LOGICAL_PAGE_BYTES) {
        return Err(FtlError::Config(format!(
            "the page-mapped FTLs map {}-byte logical pages onto flash pages of a whole number of them; the device has {page_bytes}-byte pages",
            LOGICAL_PAGE_BYTES
        )));
    }
    let upp = u64::from(crate::space::units_per_page(g));
    if g.pages() * upp >= u64::from(u32::MAX) {
        return Err(FtlError::Config(format!(
            "{} flash pages of {upp} logical pages do not fit the 32-bit map entries",
            g.pages()
        )));
    }
    let mode = nand.config().cell.native;
    let ppb = u64::from(nand.config().pages_in_mode(mode)) * upp;
    // A pSLC write cache's blocks hold no capacity: every page must fit the native blocks once
    // folded (the cache is spare room, as a consumer SSD's static SLC cache is).
    let cache = opts.slc_cache_blocks_per_plane(g);
    let native = (cache > 0).then_some((cache, g.blocks_per_plane));
    let factory_good = (0..g.blocks())
        .filter(|&b| crate::space::in_plane_blocks(g, b, native))
        .filter(|&b| {
            nand.block_info(nand::Pbn(b))
                .map(|i| i.state != nand::BlockState::FactoryBad)
                .unwrap_or(false)
        })
        .count() as u64;
    // The space keeps its open blocks and reserve per lane: per plane of each die on chips that
    // take multi-plane programs (space.rs invariant 10), else per die.
    let lanes = g.dies() * crate::space::lanes_per_die(nand.config());
    let reserve = u64::from(if opts.reserve_blocks == 0 {
        lanes + 2
    } else {
        opts.reserve_blocks
    });
    let t = factory_good.saturating_sub(reserve) * ppb;
    let u = ((1.0 - opts.spare_factor) * t as f64).floor() as u64;
    // Room to work: every lane of the data stream may hold a partly filled open block, the
    // metadata streams one each, and GC needs at least two blocks of slack to make progress.
    let needed = (u64::from(lanes) + u64::from(extra_open_blocks) + 2) * ppb;
    if t < u + needed || u == 0 {
        return Err(FtlError::Config(format!(
            "spare factor {} leaves {} spare pages; this geometry needs at least {} (open blocks on {} dies{} plus GC slack)",
            opts.spare_factor,
            t.saturating_sub(u),
            needed,
            g.dies(),
            if lanes > g.dies() {
                " x planes: multi-plane programs, timing.multi_plane_program"
            } else {
                ""
            }
        )));
    }
    Ok(u)
}

/// Cycles an FTL's processor spends on the work its `FlashSpace` does on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpaceWorkCycles {
    /// Per page copied by GC or wear levelling.
    pub per_move: u64,
    /// Per victim collected (GC or wear levelling).
    pub per_victim: u64,
    /// Per victim, per block of the device (a victim search that visits every block).
    pub per_victim_per_block: u64,
    /// Per free block taken into use, per block of the device (a free-block search that visits
    /// every block).
    pub per_opened_per_block: u64,
}

impl SpaceWorkCycles {
    /// The page-mapped FTLs' controller costs (the table above); cost-benefit scans its candidates.
    pub fn page_ftl(gc: GcPolicy) -> Self {
        SpaceWorkCycles {
            per_move: MOVE_CYCLES,
            per_victim: VICTIM_CYCLES,
            per_victim_per_block: if gc == GcPolicy::CostBenefit {
                COST_BENEFIT_CYCLES_PER_CANDIDATE
            } else {
                0
            },
            per_opened_per_block: 0,
        }
    }
}

/// Charges the controller for the GC and wear-levelling work `space` did since `charged` (which
/// is then brought up to date): a move per page copied, a victim selection per block collected.
pub(crate) fn charge_gc_work(
    ctrl: &mut Controller,
    space: &FlashSpace,
    charged: &mut SpaceCounts,
    at_ns: nand::Nanos,
) {
    let costs = SpaceWorkCycles::page_ftl(space.config().gc);
    charge_space_work(ctrl, space, charged, at_ns, &costs);
}

/// Charges `ctrl` for the work `space` did since `charged` (which is then brought up to date),
/// at `costs`.
pub(crate) fn charge_space_work(
    ctrl: &mut Controller,
    space: &FlashSpace,
    charged: &mut SpaceCounts,
    at_ns: nand::Nanos,
    costs: &SpaceWorkCycles,
) {
    let now = space.counts();
    let moves =
        (now.gc_migrations + now.wl_migrations) - (charged.gc_migrations + charged.wl_migrations);
    let victims = (now.gc_victims + now.wl_erases) - (charged.gc_victims + charged.wl_erases);
    let opened = now.blocks_opened - charged.blocks_opened;
    let blocks = u64::from(space.geometry().blocks());
    let cycles = moves * costs.per_move
        + victims * (costs.per_victim + blocks * costs.per_victim_per_block)
        + opened * blocks * costs.per_opened_per_block;
    // Zero cycles change nothing (`Controller::charge`).
    ctrl.charge(at_ns, cycles);
    *charged = now;
}

/// Serves one logical page of a host read: the flash page `p` (a map entry), or zeros if it is
/// unmapped (contract item 2: no flash operation for a page that holds nothing).
pub(crate) fn read_mapped(
    space: &mut FlashSpace,
    at_ns: nand::Nanos,
    p: u32,
    page: &mut [u8],
) -> Result<nand::Nanos, FtlError> {
    if p == crate::journal::UNMAPPED {
        page.fill(0);
        Ok(at_ns)
    } else {
        space.read(
            at_ns,
            nand::Ppn(u64::from(p)),
            page,
            &mut [],
            nand::Purpose::Host,
        )
    }
}

/// The report of an FTL built on a `FlashSpace`: its counters, GC and wear levelling as the
/// space counted them.
pub(crate) fn space_report(
    name: String,
    space: &FlashSpace,
    c: &Counters,
    ctrl: &Controller,
    mapping_bytes: u64,
) -> FtlReport {
    let s = space.counts();
    FtlReport {
        gc: GcCounts {
            migrations: s.gc_migrations,
            erases: s.gc_erases,
            wl_migrations: s.wl_migrations,
            wl_erases: s.wl_erases,
        },
        multi_plane_programs: s.multi_plane_programs,
        ..c.report(name, space.nand(), mapping_bytes, ctrl)
    }
}

/// The `BlockDevice` methods of an FTL whose flash is its field `space` and whose inherent
/// `background` does its idle-time work.
macro_rules! space_device_methods {
    () => {
        fn nand(&self) -> Option<&nand::Nand> {
            Some(self.space.nand())
        }
        fn nand_mut(&mut self) -> Option<&mut nand::Nand> {
            Some(self.space.nand_mut())
        }
        fn into_nand(self: Box<Self>) -> Option<nand::Nand> {
            Some(self.space.into_nand())
        }
        fn background(
            &mut self,
            at_ns: nand::Nanos,
            max_victims: u32,
        ) -> Result<nand::Nanos, FtlError> {
            Self::background(self, at_ns, max_victims)
        }
    };
}
pub(crate) use space_device_methods;

/// The FTL kinds `build` and `open` know (`factory.rs`, whose match names each). Kept here, with
/// the options, rather than in the factory: it is a list of values, and callers that check a
/// name (`noftl`'s target parsing, `ftl::options::KINDS`) need no FTL for it.
pub const KINDS: [&str; 6] = ["page", "dftl", "dftl-orig", "fast", "block", "amf"];
