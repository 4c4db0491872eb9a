//! The unit of mapping (4 KiB) and how many of them a flash page holds (`space.rs`, "Units").
//! Bottom floor: the OOB scan (`oob`), the flash space and the block interface's counters all
//! need the units per page, and the space sits above the OOB scan, so the arithmetic lives
//! below both. `space` re-exports these, where other crates name them.

use nand::Geometry;

/// The unit of mapping on flash pages larger than it: the block interface's logical page and
/// the NoFTL store's key (`space.rs`, "Units").
pub const UNIT_BYTES: usize = 4096;

/// Units per flash page of a geometry (1 for pages of 4 KiB or less).
pub fn units_per_page(geo: &Geometry) -> u32 {
    (geo.page_size_bytes as usize / UNIT_BYTES).max(1) as u32
}

/// Bytes of one unit of a geometry: 4 KiB, or the page if it is smaller.
pub fn unit_bytes(geo: &Geometry) -> usize {
    (geo.page_size_bytes as usize).min(UNIT_BYTES)
}
