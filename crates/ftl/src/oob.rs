//! The reverse-mapping record every FTL page carries in its OOB (spare) area, one format for
//! all FTLs (page, DFTL, block, FAST, AMF) and for the NoFTL page store, and the recovery scan
//! that reads the records back.
//!
//! Layout (32 bytes, little-endian; fits the smallest preset OOB, the NoFTL paper's 32 bytes). Bytes of
//! a larger OOB beyond these 32 are left erased (0xFF).
//!
//! | bytes  | field   | meaning                                                              |
//! |--------|---------|----------------------------------------------------------------------|
//! | 0..8   | key     | data and pad: logical page; translation: translation page number; trim: first trimmed page; checkpoint, map checkpoint: page index within the checkpoint |
//! | 8..16  | seq     | sequence number of the write (GC copies keep the original's); block FTL: the version of the physical block |
//! | 16     | kind    | 1 data, 2 translation, 3 trim record, 4 checkpoint, 5 pad, 6 map checkpoint |
//! | 17     | version | format version, 3 (2 is read too)                                    |
//! | 18     | flags   | bit 0 commit (block FTL: the page completes its block), bit 1 log (FAST: the page is in a random-write log block); other bits 0 |
//! | 19     | zero    | reserved                                                             |
//! | 20..28 | aux     | trim: pages trimmed; checkpoint, map checkpoint: pages in the checkpoint; FAST data and pad: version of the physical block; data of a space with `stamp_incarnation` (NoFTL): bits 0..8 the caller's tag (the write stream), bits 8..64 the block's incarnation (see below); else 0 |
//! | 28..32 | crc     | CRC-32 (IEEE, as zlib) of bytes 0..28                                |
//!
//! Version 1 (page FTL and DFTL only: no flags, a 4-byte aux) was never released; its records
//! are refused like foreign ones. Version 3 added kind 6 and the incarnation in `aux`; a
//! version-2 record reads as before (its incarnation is 0, which matches no checkpoint, so
//! recovery reads such blocks in full).
//!
//! Incarnation (`space.rs`, only in spaces with `SpaceConfig::stamp_incarnation`): the erase
//! count of the page's block when it was opened, plus one. The space stamps it into every data
//! page it programs there, GC and wear-levelling copies included (they are re-stamped with their
//! new block's, keeping key and seq), so page 0 alone tells which incarnation a block holds.
//!
//! Invariants:
//! 1. `decode(encode(r)) == Some(r)` for every record; an erased OOB (all 0xFF) classifies as
//!    [`PageOob::Erased`], a torn or otherwise damaged one as [`PageOob::Damaged`] (kind,
//!    version and reserved bits are checked, then the CRC); `decode` gives `None` for both.
//! 2. A sequence number is issued once per logical write (data, translation page, trim record,
//!    checkpoint); copies made by garbage collection or wear levelling carry the original's
//!    number, so "newest sequence wins" picks the newest *version*, and copies of one version
//!    are interchangeable. (The block FTL issues one per physical block instead: all pages of
//!    one incarnation of a block share it.)
//! 3. A record whose kind byte was cleared by `INVALID_MARK` is `Damaged` (kind 0 is no kind).
//! 4. The recovery scan reads every page that may hold a record (all pages of a block, or the
//!    pages the chip has programmed, per [`ScanExtent`]) of every block that is not factory-bad,
//!    with purpose `Recovery`, and hands each block's findings to the caller in block order.

use nand::{BlockState, Nand, NandError, Nanos, Pbn};

use crate::error::FtlError;

/// The invalidation mark of `dftl-orig` (the original DFTL keeps each page's valid/invalid
/// status in its OOB): a partial program of one OOB byte, (offset, value). It clears the kind
/// byte to 0, which only clears bits (a legal partial program on SLC) and which no record has,
/// so the page classifies as `Damaged` from then on: it holds no record for recovery, which is
/// right, since a newer copy of its key was programmed before the mark.
pub const INVALID_MARK: (usize, u8) = (16, 0);

/// Bytes of the record; the smallest OOB the FTLs accept.
pub const OOB_RECORD_BYTES: usize = 32;
const VERSION: u8 = 3;
/// The oldest version still read (see the module documentation).
const VERSION_MIN: u8 = 2;
/// Bits of `aux` below a data page's incarnation (the caller's tag).
pub const INCARNATION_SHIFT: u32 = 8;

/// Flag bit: the page completes its physical block (block FTL: the last page of a merge, or a
/// page programmed on its own); a block without a committed page is an interrupted merge.
pub const FLAG_COMMIT: u8 = 1;
/// Flag bit: the page lives in a FAST random-write log block, not at its logical offset.
pub const FLAG_LOG: u8 = 2;
const FLAGS_KNOWN: u8 = FLAG_COMMIT | FLAG_LOG;

/// What a page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PageKind {
    Data = 1,
    Translation = 2,
    Trim = 3,
    Checkpoint = 4,
    /// Filler programmed only to keep the pages of a block consecutive (MLC/TLC chips forbid
    /// skipping pages); holds no data and reads as zeros.
    Pad = 5,
    /// A page of a full map checkpoint (`journal.rs`): key -> flash page and per-block state.
    MapCheckpoint = 6,
}

impl PageKind {
    fn from_u8(b: u8) -> Option<PageKind> {
        match b {
            1 => Some(PageKind::Data),
            2 => Some(PageKind::Translation),
            3 => Some(PageKind::Trim),
            4 => Some(PageKind::Checkpoint),
            5 => Some(PageKind::Pad),
            6 => Some(PageKind::MapCheckpoint),
            _ => None,
        }
    }
}

/// One decoded OOB record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OobRecord {
    pub key: u64,
    pub seq: u64,
    pub kind: PageKind,
    /// `FLAG_*` bits.
    pub flags: u8,
    pub aux: u64,
}

/// What a page's OOB area holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageOob {
    /// Never programmed since the last erase (all 0xFF).
    Erased,
    Record(OobRecord),
    /// Programmed but holding no record: torn by a power loss, uncorrectable, or a record that
    /// fails its checks (foreign, older version, damaged).
    Damaged,
}

impl OobRecord {
    pub fn new(kind: PageKind, key: u64, seq: u64, aux: u64) -> Self {
        OobRecord {
            key,
            seq,
            kind,
            flags: 0,
            aux,
        }
    }

    /// The same record with `flags` (`FLAG_*` bits) set.
    pub fn with_flags(self, flags: u8) -> Self {
        debug_assert_eq!(flags & !FLAGS_KNOWN, 0, "unknown OOB flags {flags:#x}");
        OobRecord { flags, ..self }
    }

    pub fn commit(&self) -> bool {
        self.flags & FLAG_COMMIT != 0
    }

    pub fn log(&self) -> bool {
        self.flags & FLAG_LOG != 0
    }

    /// The block incarnation a data page carries (0: none; see the module documentation).
    pub fn incarnation(&self) -> u64 {
        if self.kind == PageKind::Data {
            self.aux >> INCARNATION_SHIFT
        } else {
            0
        }
    }

    /// The same record with `incarnation` stamped over the bits above the caller's tag.
    pub fn with_incarnation(self, incarnation: u64) -> Self {
        let tag = self.aux & ((1 << INCARNATION_SHIFT) - 1);
        OobRecord {
            aux: tag | (incarnation << INCARNATION_SHIFT),
            ..self
        }
    }

    /// Writes the record into the first 32 bytes of `oob`; the rest is left erased.
    pub fn encode_into(&self, oob: &mut [u8]) {
        debug_assert!(oob.len() >= OOB_RECORD_BYTES);
        oob.fill(0xFF);
        oob[0..8].copy_from_slice(&self.key.to_le_bytes());
        oob[8..16].copy_from_slice(&self.seq.to_le_bytes());
        oob[16] = self.kind as u8;
        oob[17] = VERSION;
        oob[18] = self.flags;
        oob[19] = 0;
        oob[20..28].copy_from_slice(&self.aux.to_le_bytes());
        let crc = crc32fast::hash(&oob[0..28]);
        oob[28..32].copy_from_slice(&crc.to_le_bytes());
    }

    /// The record in `oob`, or `None` if it holds none (erased, damaged, foreign).
    pub fn decode(oob: &[u8]) -> Option<OobRecord> {
        match OobRecord::classify(oob) {
            PageOob::Record(r) => Some(r),
            PageOob::Erased | PageOob::Damaged => None,
        }
    }

    /// Tells an erased OOB from a record and from anything else (invariant 1).
    pub fn classify(oob: &[u8]) -> PageOob {
        let Some(rec) = oob.get(..OOB_RECORD_BYTES) else {
            return PageOob::Damaged;
        };
        if rec.iter().all(|&b| b == 0xFF) {
            return PageOob::Erased;
        }
        let u64_at = |o: usize| {
            u64::from_le_bytes([
                rec[o],
                rec[o + 1],
                rec[o + 2],
                rec[o + 3],
                rec[o + 4],
                rec[o + 5],
                rec[o + 6],
                rec[o + 7],
            ])
        };
        let crc = u32::from_le_bytes([rec[28], rec[29], rec[30], rec[31]]);
        let kind = PageKind::from_u8(rec[16]);
        match kind {
            Some(kind)
                if (VERSION_MIN..=VERSION).contains(&rec[17])
                    && rec[18] & !FLAGS_KNOWN == 0
                    && rec[19] == 0
                    && crc32fast::hash(&rec[0..28]) == crc =>
            {
                PageOob::Record(OobRecord {
                    key: u64_at(0),
                    seq: u64_at(8),
                    kind,
                    flags: rec[18],
                    aux: u64_at(20),
                })
            }
            _ => PageOob::Damaged,
        }
    }
}

/// Refuses a device whose OOB area cannot hold the record.
pub fn check_oob_size(geo: &nand::Geometry) -> Result<(), FtlError> {
    if (geo.oob_size_bytes as usize) < OOB_RECORD_BYTES {
        return Err(FtlError::Config(format!(
            "the OOB area has {} bytes; the FTLs' reverse-mapping record needs {OOB_RECORD_BYTES}",
            geo.oob_size_bytes
        )));
    }
    Ok(())
}

/// Which pages of a block a recovery scan reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanExtent {
    /// Every page: for FTLs that may leave erased pages below programmed ones (the block-mapped
    /// FTLs on SLC place page `i` of a logical block at page `i`), so that only a full read
    /// finds every record.
    AllPages,
    /// The pages the chip has programmed: for FTLs that fill blocks strictly in order, whose
    /// scan stops at the first erased page. The chip's own block state stands in for that
    /// last read.
    Programmed,
}

/// Reads the OOB of `ppn` for recovery (into `oob`, the device's OOB size) and classifies it;
/// a media error is `Damaged`. Errors: power loss, or anything but a media error.
pub fn read_record(
    nand: &mut Nand,
    at_ns: Nanos,
    ppn: nand::Ppn,
    oob: &mut [u8],
) -> Result<(PageOob, Nanos), FtlError> {
    match nand.read_oob(at_ns, ppn, oob, nand::Purpose::Recovery) {
        Ok(d) => Ok((OobRecord::classify(oob), d.done_ns)),
        Err(e @ (NandError::PowerLost | NandError::PoweredOff)) => Err(e.into()),
        Err(e) if e.is_media_error() => Ok((PageOob::Damaged, at_ns)),
        Err(e) => Err(e.into()),
    }
}

/// The record of unit `slot` of a page whose OOB is `oob` (space.rs, "Units").
pub fn unit_record(oob: &[u8], slot: u32) -> PageOob {
    let o = slot as usize * OOB_RECORD_BYTES;
    match oob.get(o..o + OOB_RECORD_BYTES) {
        Some(r) => OobRecord::classify(r),
        None => PageOob::Damaged,
    }
}

/// What a scan found in one block.
#[derive(Clone, Debug, Default)]
pub struct BlockScan {
    /// Bad (grown bad: its pages stay readable and are scanned). Factory-bad blocks are not read.
    pub bad: bool,
    /// An erase was interrupted: the block reads as nothing and must be erased before use.
    pub needs_erase: bool,
    /// Units holding a record: (unit index in the block, record). The unit index is the page
    /// index on pages of one unit, else page x units per page + slot (space.rs, "Units").
    pub records: Vec<(u32, OobRecord)>,
    /// One past the highest page that is not erased (a record or damaged): the next page a
    /// program may use.
    pub next_free: u32,
    /// Some page is programmed but holds no record (torn, uncorrectable, damaged).
    pub damaged: bool,
    /// Units (indexed as `records`) whose OOB was read without error yet holds no record and is
    /// not erased: neither a power cut (a torn page does not read) nor the chip's ECC explains
    /// it, so the bytes were changed behind the chip's back (a corrupt image). A subset of
    /// what `damaged` counts; callers that care (the VSL's recovery) report them.
    pub corrupt: Vec<u32>,
}

impl BlockScan {
    /// Holds nothing: usable as a free block without an erase.
    pub fn is_clean(&self) -> bool {
        !self.bad && !self.needs_erase && self.next_free == 0
    }
}

/// Totals of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanDone {
    /// When the last OOB read completed.
    pub done_ns: Nanos,
    /// OOB reads issued.
    pub pages_read: u64,
}

/// Reads the OOB of the pages of every block (invariant 4), all reads issued at `at_ns` (the
/// dies work through them in parallel), and calls `visit(pbn, scan)` per block in block order.
/// Errors: power loss during the scan, or whatever `visit` returns.
pub fn scan_blocks(
    nand: &mut Nand,
    at_ns: Nanos,
    extent: ScanExtent,
    visit: &mut dyn FnMut(u32, BlockScan) -> Result<(), FtlError>,
) -> Result<ScanDone, FtlError> {
    let upp = crate::units::units_per_page(nand.geometry());
    scan_blocks_of(nand, at_ns, extent, upp, visit)
}

/// `scan_blocks` for a device whose pages hold `upp` unit records each: 1 for the FTLs whose
/// record covers a whole flash page of any size (the block-mapped FTLs, `sectors.rs`).
pub(crate) fn scan_blocks_of(
    nand: &mut Nand,
    at_ns: Nanos,
    extent: ScanExtent,
    upp: u32,
    visit: &mut dyn FnMut(u32, BlockScan) -> Result<(), FtlError>,
) -> Result<ScanDone, FtlError> {
    let g = nand.geometry().clone();
    let ppb = g.pages_per_block;
    let mut oob = vec![0xFF; g.oob_size_bytes as usize];
    let mut out = ScanDone {
        done_ns: at_ns,
        pages_read: 0,
    };
    for b in 0..g.blocks() {
        let pbn = Pbn(b);
        let info = nand.block_info(pbn)?;
        let mut s = BlockScan {
            bad: nand.is_bad(pbn),
            ..BlockScan::default()
        };
        let pages = match (info.state, extent) {
            // A factory-bad block never held our data (its page-0 marker says so).
            (BlockState::FactoryBad, _) => 0,
            (BlockState::NeedsErase, _) => {
                s.needs_erase = true;
                0
            }
            (_, ScanExtent::AllPages) => ppb,
            (_, ScanExtent::Programmed) => info.next_page.min(ppb),
        };
        for page in 0..pages {
            out.pages_read += 1;
            let (found, read) = match nand.read_oob(
                at_ns,
                g.ppn_in_block(pbn, page),
                &mut oob,
                nand::Purpose::Recovery,
            ) {
                Ok(d) => {
                    out.done_ns = out.done_ns.max(d.done_ns);
                    (OobRecord::classify(&oob), true)
                }
                Err(e @ (NandError::PowerLost | NandError::PoweredOff)) => return Err(e.into()),
                Err(e) if e.is_media_error() => (PageOob::Damaged, false),
                Err(e) => return Err(e.into()),
            };
            if upp == 1 {
                match found {
                    PageOob::Erased => {}
                    PageOob::Record(r) => {
                        s.records.push((page, r));
                        s.next_free = page + 1;
                    }
                    PageOob::Damaged => {
                        s.damaged = true;
                        s.next_free = page + 1;
                        if read {
                            s.corrupt.push(page);
                        }
                    }
                }
                continue;
            }
            if !read {
                s.damaged = true;
                s.next_free = page + 1;
                continue;
            }
            for slot in 0..upp {
                match unit_record(&oob, slot) {
                    PageOob::Erased => {}
                    PageOob::Record(r) => {
                        s.records.push((page * upp + slot, r));
                        s.next_free = page + 1;
                    }
                    PageOob::Damaged => {
                        s.damaged = true;
                        s.next_free = page + 1;
                        s.corrupt.push(page * upp + slot);
                    }
                }
            }
        }
        visit(b, s)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_detected() {
        let r =
            OobRecord::new(PageKind::Trim, 0x0102_0304_0506_0708, 99, 1 << 40).with_flags(FLAG_LOG);
        let mut oob = [0u8; 64];
        r.encode_into(&mut oob);
        assert!(oob[32..].iter().all(|&b| b == 0xFF));
        assert_eq!(OobRecord::decode(&oob), Some(r));
        assert_eq!(OobRecord::classify(&[0xFF; 32]), PageOob::Erased);
        assert_eq!(OobRecord::decode(&[0xFF; 32]), None);
        for i in 0..32 {
            let mut bad = oob;
            bad[i] ^= 0x10;
            assert_eq!(
                OobRecord::classify(&bad),
                PageOob::Damaged,
                "flip in byte {i}"
            );
        }
        // The byte table of the module doc, field by field.
        assert_eq!(oob[0..8], 0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(oob[8..16], 99u64.to_le_bytes());
        assert_eq!((oob[16], oob[17], oob[18], oob[19]), (3, 3, FLAG_LOG, 0));
        // Version 2 records still read; version 1 and 4 do not.
        for (v, ok) in [(1u8, false), (2, true), (4, false)] {
            let mut old = oob;
            old[17] = v;
            let crc = crc32fast::hash(&old[0..28]);
            old[28..32].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(OobRecord::decode(&old).is_some(), ok, "version {v}");
        }
        assert_eq!(oob[20..28], (1u64 << 40).to_le_bytes());
        assert_eq!(oob[28..32], crc32fast::hash(&oob[0..28]).to_le_bytes());
        assert_eq!(
            crc32fast::hash(b"123456789"),
            0xCBF4_3926,
            "CRC-32 as zlib computes it"
        );
    }

    #[test]
    fn every_kind_and_flag_round_trips() {
        for kind in [
            PageKind::Data,
            PageKind::Translation,
            PageKind::Trim,
            PageKind::Checkpoint,
            PageKind::Pad,
            PageKind::MapCheckpoint,
        ] {
            for flags in [0, FLAG_COMMIT, FLAG_LOG, FLAG_COMMIT | FLAG_LOG] {
                let r = OobRecord::new(kind, 7, u64::MAX - 1, 3).with_flags(flags);
                let mut oob = [0u8; 32];
                r.encode_into(&mut oob);
                assert_eq!(OobRecord::decode(&oob), Some(r));
                assert_eq!(
                    (r.commit(), r.log()),
                    (flags & FLAG_COMMIT != 0, flags & FLAG_LOG != 0)
                );
            }
        }
    }
}
