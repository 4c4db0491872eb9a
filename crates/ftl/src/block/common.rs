//! Parts shared by the three block-mapped FTLs (`block`, `fast`, `amf`): the OOB record that
//! makes every page self-describing, a thin flash wrapper, a per-die free-block pool, a bit set,
//! the controller cycle costs, the recovery scan and the report counters.
//!
//! Invariants:
//! 1. Every page these FTLs program carries a [`Tag`] in the first [`TAG_BYTES`] bytes of its OOB,
//!    protected by a CRC-32; an erased page reads back as all-0xFF OOB, which is never a valid tag
//!    (kind 0xFF is not a kind).
//! 2. Page programs within a block go in increasing page order; where the chip demands strictly
//!    consecutive programs (MLC/TLC), skipped pages are filled with `Kind::Pad` pages first.
//! 3. Nothing here keeps state that recovery cannot rebuild from the flash: the pool, bit sets and
//!    counters are RAM only.

use std::collections::VecDeque;

use nand::{BlockState, CellMode, Geometry, Nand, NandError, Nanos, Pbn, Ppn, Purpose};

use crate::block_device::{FtlError, FtlReport, GcCounts, HostCounts, LOGICAL_PAGE_BYTES};
use crate::controller::Controller;

/// OOB bytes the record takes: it fits the smallest preset (noftl13: 32-byte OOB).
pub(crate) const TAG_BYTES: usize = 32;
/// "No block" in `u32` block tables.
pub(crate) const NONE: u32 = u32::MAX;

// ----- controller cycle costs ----------------------------------------------------------------
// Assumptions (docs/ftl-blockmapped.md, "Controller CPU"): a 400 MHz embedded core
// (ControllerConfig::default) whose mapping tables live in DRAM with ~100 ns load latency, i.e.
// ~40 cycles per dependent table access; ALU work is a few cycles and is folded in.

/// Per host request: command decode, range check, completion posting.
pub(crate) const CYC_REQUEST: u64 = 200;
/// One mapping-table read (a dependent DRAM load plus address arithmetic).
pub(crate) const CYC_LOOKUP: u64 = 40;
/// One mapping-table update (load, store, validity-bit update).
pub(crate) const CYC_UPDATE: u64 = 80;
/// One probe of a hashed page table (FAST's log-page map): hash plus about two DRAM loads.
pub(crate) const CYC_HASH: u64 = 120;
/// Per page a merge considers: find the newest copy, build the OOB record (CRC in hardware).
pub(crate) const CYC_MERGE_PAGE: u64 = 60;
/// Per page a recovery scan parses: check the CRC, compare sequence numbers.
pub(crate) const CYC_SCAN_PAGE: u64 = 150;

// ----- the OOB record ------------------------------------------------------------------------

/// What a page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// Host data of logical page `lpn`.
    Data = 1,
    /// A trim record: logical pages `lpn .. lpn + aux` are discarded as of `seq` (FAST).
    Trim = 2,
    /// Filler programmed only to keep pages consecutive; holds no data (reads as zeros).
    Pad = 3,
}

/// The last page programmed by a merge (block FTL) or any stand-alone page: its block is whole.
pub(crate) const FLAG_COMMIT: u8 = 1;
/// The page lives in a FAST random-write log block (not at its logical offset).
pub(crate) const FLAG_RW_LOG: u8 = 2;

/// The reverse mapping every page carries in OOB bytes 0..32 (little endian):
///
/// | bytes  | field | meaning                                                   |
/// |--------|-------|-----------------------------------------------------------|
/// | 0      | kind  | 1 data, 2 trim record, 3 pad; 0xFF = erased                |
/// | 1      | flags | bit 0 commit, bit 1 random-write log                       |
/// | 2..4   | 0     | reserved, written as zero                                  |
/// | 4..12  | lpn   | logical page (trim: first logical page)                    |
/// | 12..20 | seq   | sequence number (block FTL: the block's version)           |
/// | 20..28 | aux   | FTL-specific (FAST: block version, trim: page count)       |
/// | 28..32 | crc   | CRC-32 (IEEE) of bytes 0..28                               |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tag {
    pub kind: Kind,
    pub flags: u8,
    pub lpn: u64,
    pub seq: u64,
    pub aux: u64,
}

impl Tag {
    pub fn data(lpn: u64, seq: u64, aux: u64, flags: u8) -> Tag {
        Tag { kind: Kind::Data, flags, lpn, seq, aux }
    }

    pub fn encode(&self, oob: &mut [u8]) {
        oob.fill(0xFF);
        let t = &mut oob[..TAG_BYTES];
        t[0] = self.kind as u8;
        t[1] = self.flags;
        t[2] = 0;
        t[3] = 0;
        t[4..12].copy_from_slice(&self.lpn.to_le_bytes());
        t[12..20].copy_from_slice(&self.seq.to_le_bytes());
        t[20..28].copy_from_slice(&self.aux.to_le_bytes());
        let crc = crc32(&t[..28]);
        t[28..32].copy_from_slice(&crc.to_le_bytes());
    }

    /// `Ok(None)` for an erased page, `Err(())` for a record that fails its CRC or names no kind.
    pub fn decode(oob: &[u8]) -> Result<Option<Tag>, ()> {
        let t = &oob[..TAG_BYTES];
        if t.iter().all(|&b| b == 0xFF) {
            return Ok(None);
        }
        let word = |r: std::ops::Range<usize>| u64::from_le_bytes(t[r].try_into().unwrap_or([0; 8]));
        let crc = u32::from_le_bytes(t[28..32].try_into().unwrap_or([0; 4]));
        if crc != crc32(&t[..28]) {
            return Err(());
        }
        let kind = match t[0] {
            1 => Kind::Data,
            2 => Kind::Trim,
            3 => Kind::Pad,
            _ => return Err(()),
        };
        Ok(Some(Tag { kind, flags: t[1], lpn: word(4..12), seq: word(12..20), aux: word(20..28) }))
    }

    pub fn commit(&self) -> bool {
        self.flags & FLAG_COMMIT != 0
    }
}

const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// CRC-32 (IEEE 802.3, reflected), as zlib computes it.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c = CRC_TABLE[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

// ----- bit set -------------------------------------------------------------------------------

/// A fixed-size bit set (validity of physical pages).
#[derive(Clone, Debug, Default)]
pub(crate) struct Bits(Vec<u64>);

impl Bits {
    pub fn new(n: u64) -> Bits {
        Bits(vec![0; n.div_ceil(64) as usize])
    }
    #[inline]
    pub fn get(&self, i: u64) -> bool {
        self.0[(i / 64) as usize] >> (i % 64) & 1 != 0
    }
    #[inline]
    pub fn set(&mut self, i: u64) {
        self.0[(i / 64) as usize] |= 1 << (i % 64);
    }
    #[inline]
    pub fn clear(&mut self, i: u64) {
        self.0[(i / 64) as usize] &= !(1 << (i % 64));
    }
    pub fn clear_range(&mut self, start: u64, n: u64) {
        for i in start..start + n {
            self.clear(i);
        }
    }
    pub fn count_range(&self, start: u64, n: u64) -> u32 {
        (start..start + n).filter(|&i| self.get(i)).count() as u32
    }
}

// ----- flash access --------------------------------------------------------------------------

/// What a recovery scan finds in one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PageScan {
    Erased,
    Tagged(Tag),
    /// Programmed but unusable: torn by a power loss, uncorrectable, or a record that fails its CRC.
    Unreadable,
}

/// The NAND device plus the facts the FTLs need about it, and reusable buffers.
#[derive(Debug)]
pub(crate) struct Flash {
    pub nand: Nand,
    pub geo: Geometry,
    pub ppb: u32,
    /// MLC/TLC: pages of a block must be programmed consecutively (no skipping).
    pub strict: bool,
    pub mode: CellMode,
    oob: Vec<u8>,
    pub zeros: Vec<u8>,
    /// Scratch page for merge copies.
    pub buf: Vec<u8>,
}

impl Flash {
    pub fn new(nand: Nand) -> Result<Flash, FtlError> {
        let geo = nand.geometry().clone();
        if geo.page_size_bytes as usize != LOGICAL_PAGE_BYTES {
            return Err(FtlError::Config(format!(
                "block-mapped FTLs need flash pages of {LOGICAL_PAGE_BYTES} bytes (one logical page each); this device has {}-byte pages",
                geo.page_size_bytes
            )));
        }
        if (geo.oob_size_bytes as usize) < TAG_BYTES {
            return Err(FtlError::Config(format!(
                "the OOB area of {} bytes cannot hold the {TAG_BYTES}-byte reverse-mapping record",
                geo.oob_size_bytes
            )));
        }
        if !nand.is_powered() {
            return Err(FtlError::Flash(NandError::PoweredOff));
        }
        let mode = nand.config().cell.native;
        Ok(Flash {
            ppb: geo.pages_per_block,
            strict: matches!(mode, CellMode::Mlc | CellMode::Tlc),
            mode,
            oob: vec![0xFF; geo.oob_size_bytes as usize],
            zeros: vec![0; geo.page_size_bytes as usize],
            buf: vec![0; geo.page_size_bytes as usize],
            geo,
            nand,
        })
    }

    #[inline]
    pub fn ppn(&self, pbn: u32, page: u32) -> Ppn {
        self.geo.ppn_in_block(Pbn(pbn), page)
    }
    #[inline]
    pub fn die_of(&self, pbn: u32) -> u32 {
        self.geo.die_of_block(Pbn(pbn)).0
    }

    pub fn program(&mut self, at_ns: Nanos, ppn: Ppn, data: &[u8], tag: &Tag, purpose: Purpose) -> Result<Nanos, FtlError> {
        tag.encode(&mut self.oob);
        Ok(self.nand.program(at_ns, ppn, data, &self.oob, purpose)?.done_ns)
    }

    /// Programs the scratch buffer (a page just read for a merge copy).
    pub fn program_buf(&mut self, at_ns: Nanos, ppn: Ppn, tag: &Tag, purpose: Purpose) -> Result<Nanos, FtlError> {
        tag.encode(&mut self.oob);
        Ok(self.nand.program(at_ns, ppn, &self.buf, &self.oob, purpose)?.done_ns)
    }

    pub fn read(&mut self, at_ns: Nanos, ppn: Ppn, buf: &mut [u8], purpose: Purpose) -> Result<Nanos, FtlError> {
        Ok(self.nand.read(at_ns, ppn, buf, &mut [], purpose)?.done_ns)
    }

    /// Reads a page into the scratch buffer.
    pub fn read_buf(&mut self, at_ns: Nanos, ppn: Ppn, purpose: Purpose) -> Result<Nanos, FtlError> {
        Ok(self.nand.read(at_ns, ppn, &mut self.buf, &mut [], purpose)?.done_ns)
    }

    /// Reads data and OOB; returns the tag too (`None` for erased or unreadable pages, whose
    /// data the caller must treat as never written).
    pub fn read_with_tag(&mut self, at_ns: Nanos, ppn: Ppn, buf: &mut [u8], purpose: Purpose) -> Result<(Nanos, Option<Tag>), FtlError> {
        match self.nand.read(at_ns, ppn, buf, &mut self.oob, purpose) {
            Ok(d) => Ok((d.done_ns, Tag::decode(&self.oob).ok().flatten())),
            Err(NandError::Torn(_)) => Ok((self.nand.now_ns().max(at_ns), None)),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads a page's OOB for a recovery scan. `Err` only for power loss or misuse.
    pub fn scan_page(&mut self, at_ns: Nanos, ppn: Ppn) -> Result<(Nanos, PageScan), FtlError> {
        match self.nand.read_oob(at_ns, ppn, &mut self.oob, Purpose::Recovery) {
            Ok(d) => Ok((d.done_ns, match Tag::decode(&self.oob) {
                Ok(None) => PageScan::Erased,
                Ok(Some(t)) => PageScan::Tagged(t),
                Err(()) => PageScan::Unreadable,
            })),
            Err(e @ (NandError::PowerLost | NandError::PoweredOff | NandError::NeedsErase(_))) => Err(e.into()),
            Err(e) if e.is_media_error() => Ok((self.nand.now_ns().max(at_ns), PageScan::Unreadable)),
            Err(e) => Err(e.into()),
        }
    }

    pub fn erase(&mut self, at_ns: Nanos, pbn: u32, purpose: Purpose) -> Result<Nanos, FtlError> {
        Ok(self.nand.erase(at_ns, Pbn(pbn), self.mode, purpose)?.done_ns)
    }

    pub fn is_bad(&self, pbn: u32) -> bool {
        self.nand.is_bad(Pbn(pbn))
    }

    /// True if the block holds anything at all (programmed pages or an interrupted erase): a
    /// format erases exactly these. Reading the chip's own block state stands in for a full
    /// read of the block, which would find the same.
    pub fn needs_format_erase(&self, pbn: u32) -> bool {
        self.nand
            .block_info(Pbn(pbn))
            .is_ok_and(|i| i.state == BlockState::NeedsErase || (i.state == BlockState::Good && i.next_page > 0))
    }

    /// Programs pad pages from `*next_free` up to (not including) `page` when the chip forbids
    /// skipping pages (invariant 2); advances `*next_free` to `page + 1` in any case.
    #[allow(clippy::too_many_arguments)]
    pub fn pad_to(&mut self, at_ns: Nanos, pbn: u32, next_free: &mut u32, page: u32, lpn_base: u64, seq: u64, aux: u64, purpose: Purpose) -> Result<Nanos, FtlError> {
        let mut done = at_ns;
        if self.strict {
            while *next_free < page {
                let tag = Tag { kind: Kind::Pad, flags: 0, lpn: lpn_base + u64::from(*next_free), seq, aux };
                let ppn = self.ppn(pbn, *next_free);
                tag.encode(&mut self.oob);
                done = done.max(self.nand.program(at_ns, ppn, &self.zeros, &self.oob, purpose)?.done_ns);
                *next_free += 1;
            }
        }
        *next_free = (*next_free).max(page + 1);
        Ok(done)
    }

    /// Makes a block that recovery found unneeded ready for reuse: erases it unless the scan
    /// found it clean. `Ok(false)` if it went bad on the erase (it must not be used).
    pub fn make_clean(&mut self, at_ns: Nanos, pbn: u32, scan: &BlockScan) -> Result<bool, FtlError> {
        if scan.is_clean() {
            return Ok(true);
        }
        match self.erase(at_ns, pbn, Purpose::Recovery) {
            Ok(_) => Ok(true),
            Err(e) if is_block_failure(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Erases every block that holds anything (format); leaves bad blocks alone.
    pub fn format(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        let mut done = at_ns;
        for pbn in 0..self.geo.blocks() {
            if !self.is_bad(pbn) && self.needs_format_erase(pbn) {
                match self.erase(at_ns, pbn, Purpose::Meta) {
                    Ok(t) => done = done.max(t),
                    // A block that fails its erase is now bad; the FTL will not use it.
                    Err(e) if is_block_failure(&e) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(done)
    }
}

/// The block went bad (erase or program status fail, worn out, or already bad): the FTL stops
/// using it and carries on.
pub(crate) fn is_block_failure(e: &FtlError) -> bool {
    matches!(e, FtlError::Flash(NandError::EraseFailed(_) | NandError::WornOut { .. } | NandError::BadBlock(_)))
}

// ----- recovery scan -------------------------------------------------------------------------

/// What a scan found in one block.
#[derive(Clone, Debug, Default)]
pub(crate) struct BlockScan {
    pub bad: bool,
    /// An erase was interrupted: the block reads as nothing and must be erased before use.
    pub needs_erase: bool,
    /// Tagged pages: (page index, tag).
    pub tags: Vec<(u32, Tag)>,
    /// One past the highest page that is not erased (tagged or unreadable): the next page a
    /// program may use.
    pub next_free: u32,
    /// Some page is programmed but unreadable (torn).
    pub unreadable: bool,
}

impl BlockScan {
    /// Holds nothing: usable as a free block without an erase.
    pub fn is_clean(&self) -> bool {
        !self.bad && !self.needs_erase && self.next_free == 0
    }
}

/// Reads the OOB of every page of every block (bad blocks too: their pages stay readable).
/// All reads are issued at `at_ns`; the dies work through them in parallel.
pub(crate) fn scan_device(f: &mut Flash, ctrl: &mut Controller, at_ns: Nanos) -> Result<(Vec<BlockScan>, Nanos), FtlError> {
    let blocks = f.geo.blocks();
    let mut out = Vec::with_capacity(blocks as usize);
    let mut done = at_ns;
    for pbn in 0..blocks {
        let mut s = BlockScan { bad: f.is_bad(pbn), ..BlockScan::default() };
        if f.nand.block_info(Pbn(pbn)).is_ok_and(|i| i.state == BlockState::FactoryBad) {
            // A factory-bad block never held our data (its page-0 marker says so).
            out.push(s);
            continue;
        }
        for page in 0..f.ppb {
            let (t, found) = match f.scan_page(at_ns, f.ppn(pbn, page)) {
                Err(FtlError::Flash(NandError::NeedsErase(_))) => {
                    s.needs_erase = true;
                    break;
                }
                r => r?,
            };
            done = done.max(t);
            match found {
                PageScan::Erased => {}
                PageScan::Tagged(tag) => {
                    s.tags.push((page, tag));
                    s.next_free = page + 1;
                }
                PageScan::Unreadable => {
                    s.unreadable = true;
                    s.next_free = page + 1;
                }
            }
        }
        out.push(s);
    }
    let cycles = CYC_SCAN_PAGE * f.geo.pages();
    done = done.max(ctrl.charge(at_ns, cycles));
    Ok((out, done))
}

// ----- free blocks ---------------------------------------------------------------------------

/// Erased, good blocks per die, handed out first-in first-out (which spreads erases: a crude
/// dynamic wear levelling).
#[derive(Clone, Debug, Default)]
pub(crate) struct FreePool {
    per_die: Vec<VecDeque<u32>>,
    count: usize,
}

impl FreePool {
    pub fn new(dies: u32) -> FreePool {
        FreePool { per_die: vec![VecDeque::new(); dies as usize], count: 0 }
    }
    pub fn push(&mut self, die: u32, pbn: u32) {
        self.per_die[die as usize].push_back(pbn);
        self.count += 1;
    }
    /// A block from `prefer_die`, else from the die with the most free blocks (lowest index on ties).
    pub fn pop(&mut self, prefer_die: u32) -> Option<u32> {
        let d = prefer_die as usize % self.per_die.len();
        let die = if self.per_die[d].is_empty() {
            let (best, q) = self.per_die.iter().enumerate().max_by_key(|(i, q)| (q.len(), std::cmp::Reverse(*i)))?;
            if q.is_empty() {
                return None;
            }
            best
        } else {
            d
        };
        self.count -= 1;
        self.per_die[die].pop_front()
    }
}

// ----- the BlockDevice methods all three share -----------------------------------------------

/// `flush`, `report`, `nand` and `nand_mut` of an FTL with fields `f: Flash`, `c: Counters`,
/// `ctrl: Controller` and a `mapping_bytes()` method. None of these FTLs caches writes, so a
/// flush only costs the controller's request overhead.
macro_rules! shared_block_device_methods {
    () => {
        fn flush(&mut self, at_ns: nand::Nanos) -> Result<nand::Nanos, $crate::block_device::FtlError> {
            self.c.host.flushes += 1;
            Ok(self.ctrl.charge(at_ns, $crate::block::common::CYC_REQUEST))
        }

        fn report(&self) -> $crate::block_device::FtlReport {
            self.c.report(self.name(), &self.f.nand, self.mapping_bytes(), &self.ctrl)
        }

        fn nand(&self) -> Option<&nand::Nand> {
            Some(&self.f.nand)
        }

        fn nand_mut(&mut self) -> Option<&mut nand::Nand> {
            Some(&mut self.f.nand)
        }
    };
}
pub(crate) use shared_block_device_methods;

// ----- counters and report -------------------------------------------------------------------

/// Host and merge counters plus the device's program count when this FTL instance started (so
/// that WAF covers only this instance's work).
#[derive(Clone, Debug, Default)]
pub(crate) struct Counters {
    pub host: HostCounts,
    pub gc: GcCounts,
    base_programs: u64,
}

impl Counters {
    pub fn new(nand: &Nand) -> Counters {
        Counters { base_programs: programs(nand), ..Counters::default() }
    }
    pub fn report(&self, name: String, nand: &Nand, mapping_bytes: u64, ctrl: &Controller) -> FtlReport {
        let flash_programs = programs(nand).saturating_sub(self.base_programs);
        FtlReport {
            name,
            host: self.host,
            gc: self.gc,
            waf: if self.host.writes == 0 { 0.0 } else { flash_programs as f64 / self.host.writes as f64 },
            mapping_bytes,
            cmt_hit_ratio: None,
            translation_reads: 0,
            translation_writes: 0,
            controller_busy_us: ctrl.busy_us(),
        }
    }
}

fn programs(nand: &Nand) -> u64 {
    let c = nand.stats().flash_counts();
    c.programs + c.partial_programs
}

/// Splits `[lpn, lpn + pages)` at block boundaries: yields (logical block, first offset, pages).
pub(crate) fn chunks(lpn: u64, pages: u64, ppb: u32) -> impl Iterator<Item = (u64, u32, u32)> {
    let ppb = u64::from(ppb);
    let end = lpn + pages;
    let mut at = lpn;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let lbn = at / ppb;
        let off = at % ppb;
        let n = (ppb - off).min(end - at);
        at += n;
        Some((lbn, off as u32, n as u32))
    })
}

/// Checks a spare factor in [0, 1).
pub(crate) fn check_spare_factor(spare_factor: f64) -> Result<(), FtlError> {
    if spare_factor.is_finite() && (0.0..1.0).contains(&spare_factor) {
        Ok(())
    } else {
        Err(FtlError::Config(format!("spare factor must be in [0, 1), got {spare_factor}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_erased_or_corrupt_records_are_told_apart() {
        let mut oob = vec![0u8; 32];
        let t = Tag { kind: Kind::Trim, flags: FLAG_RW_LOG, lpn: 77, seq: 1 << 40, aux: 9 };
        t.encode(&mut oob);
        assert_eq!(Tag::decode(&oob), Ok(Some(t)));
        oob[5] ^= 1;
        assert_eq!(Tag::decode(&oob), Err(()));
        assert_eq!(Tag::decode(&[0xFF; 32]), Ok(None));
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn chunks_split_at_block_boundaries() {
        let v: Vec<_> = chunks(14, 20, 16).collect();
        assert_eq!(v, vec![(0, 14, 2), (1, 0, 16), (2, 0, 2)]);
    }
}
