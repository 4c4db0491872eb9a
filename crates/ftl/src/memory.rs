//! Mapping memory of each FTL at a given capacity: the table of the AMF lab slides (AMF, FAST 2016,
//! "Memory Overhead and WAF"), computed from stated assumptions rather than copied.
//!
//! Assumptions (AMF's evaluation SSD: "1 block = 128 * 4K pages"):
//! - logical pages of `PAGE_BYTES` = 4 KiB, blocks of `BLOCK_BYTES` = 128 x 4 KiB = 512 KiB;
//! - a mapping entry (a physical page or block number) takes `ENTRY_BYTES` = 4 bytes;
//! - page-level FTL: one entry per logical page;
//! - block-level FTL: one entry per logical block;
//! - AMF's AFTL: a static segment mapping kept per block, one entry per block (AMF, FAST 2016:
//!   "Page Allocation via Static Mapping", "a static segment mapping kept per block");
//! - hybrid (log-block) FTL: a block-level map of every block plus a page-level map of the log
//!   blocks. Its size depends on the share of capacity given to log blocks, which the AMF slides do
//!   not state; `HYBRID_LOG_SHARE` is the share that reproduces its 96 MB at 512 GB:
//!   4 MiB + s x 512 MiB = 96 MiB, s = 92 / 512 = 17.97 %. (With that share 1 TB gives 192 MiB;
//!   the AMF slides say 186 MB, so its hybrid figures are not exactly proportional to capacity.)
//! - DFTL (Gupta et al., ASPLOS 2009, who count a cached entry as a (logical, physical) pair):
//!   8 bytes per Cached Mapping Table entry for the cached fraction of the page entries, plus
//!   the Global Translation Directory, one 4-byte entry per translation page of 1024 entries.
//!
//! Flash pages larger than 4 KiB (`table_for`; blocks stay 128 flash pages): the page-mapped
//! FTLs map 4 KiB units inside flash pages (sub-page mapping, `space.rs` "Units"), so their maps
//! keep one entry per 4 KiB of capacity (2^27 units at 512 GiB still fit 4-byte entries), and
//! their controller also holds its write buffer (`wbuf.rs`: 2 flash pages per die by default,
//! not in the table, which knows no die count). The block-mapped FTLs map whole flash pages
//! (`sectors.rs`), so their block maps shrink with the larger blocks, plus one gathered page.
//!
//! "MB" in the AMF slides is read as MiB (512 MB page-level at 512 GB = 2^27 entries x 4 bytes).

use serde::{Deserialize, Serialize};

pub const PAGE_BYTES: u64 = 4096;
pub const BLOCK_BYTES: u64 = 128 * PAGE_BYTES;
pub const ENTRY_BYTES: u64 = 4;
pub const DFTL_CMT_ENTRY_BYTES: u64 = 8;
/// Share of the capacity in log blocks for the hybrid FTL (see the module documentation).
pub const HYBRID_LOG_SHARE: f64 = 92.0 / 512.0;
/// The cache fractions the NoFTL paper evaluates DFTL with.
pub const DFTL_FRACTIONS: [f64; 3] = [0.02, 0.15, 0.35];

/// One row of the table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryRow {
    pub ftl: String,
    pub bytes: u64,
    pub note: String,
}

/// Mapping memory of block, hybrid, page, DFTL (2 %, 15 %, 35 %) and AMF at `capacity_bytes`.
pub fn table(capacity_bytes: u64) -> Vec<MemoryRow> {
    table_for(capacity_bytes, PAGE_BYTES)
}

/// `table` on flash pages of `page_bytes` (a multiple of 4 KiB), blocks of 128 of them.
pub fn table_for(capacity_bytes: u64, page_bytes: u64) -> Vec<MemoryRow> {
    assert!(
        page_bytes >= PAGE_BYTES && page_bytes.is_multiple_of(PAGE_BYTES),
        "flash pages are whole 4 KiB units"
    );
    let pages_per_block = BLOCK_BYTES / PAGE_BYTES;
    let block_bytes = pages_per_block * page_bytes;
    let units = capacity_bytes.div_ceil(PAGE_BYTES);
    let flash_pages = capacity_bytes.div_ceil(page_bytes);
    let blocks = capacity_bytes.div_ceil(block_bytes);
    // The block-mapped FTLs' sector layer gathers one flash page when pages hold several units.
    let gather = if page_bytes > PAGE_BYTES {
        page_bytes
    } else {
        0
    };
    let gather_note = if gather > 0 {
        format!(" + a gathered {} KiB page", page_bytes / 1024)
    } else {
        String::new()
    };
    let block_map = blocks * ENTRY_BYTES;
    let page_map = units * ENTRY_BYTES;
    let log_pages = (HYBRID_LOG_SHARE * flash_pages as f64).round() as u64;
    let gtd = units.div_ceil(PAGE_BYTES / ENTRY_BYTES) * ENTRY_BYTES;
    let block_kib = block_bytes / 1024;
    let unit_note = if page_bytes > PAGE_BYTES {
        " (4 KiB units in larger pages)"
    } else {
        ""
    };
    let mut rows = vec![
        MemoryRow { ftl: "block".into(), bytes: block_map + gather, note: format!("{blocks} blocks of {block_kib} KiB x 4 B{gather_note}") },
        MemoryRow {
            ftl: "hybrid".into(),
            bytes: block_map + log_pages * ENTRY_BYTES + gather,
            note: format!("block map + page map of log blocks holding {:.2}% of capacity ({log_pages} pages x 4 B){gather_note}", HYBRID_LOG_SHARE * 100.0),
        },
        MemoryRow { ftl: "page".into(), bytes: page_map, note: format!("{units} pages of 4 KiB x 4 B{unit_note}") },
    ];
    let pages = units;
    for f in DFTL_FRACTIONS {
        let cached = (f * pages as f64).round() as u64;
        rows.push(MemoryRow {
            ftl: format!("dftl-{}%", (f * 100.0).round()),
            bytes: cached * DFTL_CMT_ENTRY_BYTES + gtd,
            note: format!("{cached} cached entries x 8 B + GTD {} B", gtd),
        });
    }
    rows.push(MemoryRow {
        ftl: "amf".into(),
        bytes: block_map + gather,
        note: format!("AFTL: static segment map, {blocks} blocks x 4 B{gather_note}"),
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn row(t: &[MemoryRow], name: &str) -> u64 {
        t.iter()
            .find(|r| r.ftl == name)
            .map(|r| r.bytes)
            .unwrap_or_else(|| panic!("no row {name}"))
    }

    #[test]
    fn page_block_and_aftl_match_amfs_table_at_512_gb_and_1_tb() {
        let t = table(512 * GIB);
        assert_eq!(row(&t, "page"), 512 * MIB);
        assert_eq!(row(&t, "block"), 4 * MIB);
        assert_eq!(row(&t, "amf"), 4 * MIB);
        assert_eq!(row(&t, "hybrid"), 96 * MIB);
        let t = table(1024 * GIB);
        assert_eq!(row(&t, "page"), 1024 * MIB);
        assert_eq!(row(&t, "block"), 8 * MIB);
        assert_eq!(row(&t, "amf"), 8 * MIB);
        assert_eq!(
            row(&t, "hybrid"),
            192 * MIB,
            "proportional; the AMF slides say 186 MB"
        );
    }

    #[test]
    fn on_16k_pages_page_maps_keep_4k_entries_and_block_maps_shrink() {
        let t = table_for(512 * GIB, 16384);
        assert_eq!(row(&t, "page"), 512 * MIB, "one entry per 4 KiB unit");
        assert_eq!(row(&t, "dftl-2%"), row(&table(512 * GIB), "dftl-2%"));
        // 2 MiB blocks: a quarter of the entries, plus the one gathered page.
        assert_eq!(row(&t, "block"), MIB + 16384);
        assert_eq!(row(&t, "amf"), MIB + 16384);
        assert_eq!(table_for(512 * GIB, 4096), table(512 * GIB));
    }

    #[test]
    fn dftl_rows_grow_with_the_cached_fraction() {
        let t = table(512 * GIB);
        let (a, b, c) = (row(&t, "dftl-2%"), row(&t, "dftl-15%"), row(&t, "dftl-35%"));
        assert!(a < b && b < c && c < row(&t, "page"));
        // 2% of 2^27 entries x 8 B plus a 512 KiB GTD.
        assert_eq!(
            a,
            (0.02 * (1u64 << 27) as f64).round() as u64 * 8 + 512 * 1024
        );
    }
}
