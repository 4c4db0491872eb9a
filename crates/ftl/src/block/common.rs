//! Parts shared by the three block-mapped FTLs (`block`, `fast`, `amf`): a thin flash wrapper
//! that writes and reads the common OOB record (`crate::oob`), a per-die free-block pool, a bit
//! set, the controller cycle costs, the recovery scan with its cycle charge, and the logical
//! capacity and mapping memory of a block-mapped device. The three FTLs import it, never each
//! other.
//!
//! Invariants:
//! 1. Every page these FTLs program carries an [`OobRecord`] in the first
//!    [`OOB_RECORD_BYTES`] bytes of its OOB (`oob.rs`); an erased page never decodes as one.
//! 2. Page programs within a block go in increasing page order; where the chip demands strictly
//!    consecutive programs (MLC/TLC), skipped pages are filled with `PageKind::Pad` pages first.
//! 3. Nothing here keeps state that recovery cannot rebuild from the flash: the pool and bit
//!    sets are RAM only.
//! 4. Paired pages (MLC, TLC): a cut upper- or middle-page program destroys the lower pages of
//!    its word line (nand invariant 6). [`Flash::open_word_lines`] names every block whose last
//!    program left its word line incomplete; the FTLs complete those word lines with `Pad` pages
//!    ([`Flash::complete_word_line`]) at FLUSH and before they erase a block whose pages were
//!    copied onto such a word line, so that data a host was told is durable never sits alone on
//!    an unpaired lower page (docs/ftl.md, "Paired pages in the block-mapped FTLs").
//! 5. Program failures on paired pages (MLC, TLC, with or without power-loss protection): a
//!    failed upper- or middle-page program tears the pages below it on its word line. `Flash`
//!    keeps a copy of every page of an incomplete word line (`crate::lower_pages`) and serves a
//!    read of such a torn page from it, so the FTL that moves the failed block's data off (as
//!    after any failed program) moves what was acknowledged there, not a torn page.

use std::collections::VecDeque;

use nand::{BlockState, CellMode, Geometry, Nand, NandError, Nanos, Pbn, Ppn, Purpose};

use crate::block_device::{FtlError, LOGICAL_PAGE_BYTES};
use crate::controller::{Controller, DRAM_ACCESS_CYCLES};
use crate::lower_pages::{self, LowerPageCopies};
use crate::oob::{check_oob_size, scan_blocks_of, BlockScan, OobRecord, PageKind, ScanExtent};
use crate::options::{check_page_size, check_spare_factor};

/// "No block" in `u32` block tables.
pub(crate) const NONE: u32 = u32::MAX;

// ----- controller cycle costs ----------------------------------------------------------------
// Assumptions (docs/ftl.md, "Controller cost assumptions"): the 400 MHz embedded core of
// `ControllerConfig::default`, whose mapping tables live in DRAM: a dependent table access is
// one `DRAM_ACCESS_CYCLES` (~100 ns); ALU work is a few cycles and is folded in.

/// Per host request: command decode, range check, completion posting (instructions only).
pub(crate) const CYC_REQUEST: u64 = 200;
/// One mapping-table read (a dependent DRAM load plus address arithmetic).
pub(crate) const CYC_LOOKUP: u64 = DRAM_ACCESS_CYCLES;
/// One mapping-table update (load, store, validity-bit update).
pub(crate) const CYC_UPDATE: u64 = 2 * DRAM_ACCESS_CYCLES;
/// One probe of a hashed page table (FAST's log-page map): hash plus about two DRAM loads.
pub(crate) const CYC_HASH: u64 = 40 + 2 * DRAM_ACCESS_CYCLES;
/// Per page a merge considers: find the newest copy, build the OOB record (CRC in hardware).
pub(crate) const CYC_MERGE_PAGE: u64 = 20 + DRAM_ACCESS_CYCLES;
/// Per page a recovery scan parses: check the CRC, compare sequence numbers.
pub(crate) const CYC_SCAN_PAGE: u64 = 110 + DRAM_ACCESS_CYCLES;

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

/// The OOB record fields of the pad pages a block takes (invariant 2 and 4): page `p` of the
/// block gets `Pad` with key `lpn_base + p`, so that a positional FTL's recovery reads it as the
/// empty slot of that logical page.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PadRecord {
    pub lpn_base: u64,
    pub seq: u64,
    pub aux: u64,
}

impl PadRecord {
    fn at(self, page: u32) -> OobRecord {
        OobRecord::new(
            PageKind::Pad,
            self.lpn_base + u64::from(page),
            self.seq,
            self.aux,
        )
    }
}

/// The NAND device plus the facts the FTLs need about it, and reusable buffers.
#[derive(Debug)]
pub(crate) struct Flash {
    pub nand: Nand,
    pub geo: Geometry,
    pub ppb: u32,
    /// The FTL's logical page: one flash page. 4 KiB on 4 KiB pages; on larger pages the FTL
    /// serves `crate::sectors::Sectors`, which exports 4 KiB sectors over it.
    pub lp: usize,
    /// MLC/TLC: pages of a block must be programmed consecutively (no skipping).
    pub strict: bool,
    pub mode: CellMode,
    /// Pages per word line whose lower pages a cut program can destroy (invariant 4): 2 on
    /// MLC, 3 on TLC; 1 on SLC and pSLC, and on any chip with power-loss protection.
    wl_pages: u32,
    /// Blocks whose last program left a word line incomplete (invariant 4); a handful at most
    /// (the FTLs' open blocks), so a vector searched linearly.
    open_lines: Vec<u32>,
    /// Copies of the pages of incomplete word lines (invariant 5, `crate::lower_pages`): kept
    /// with power-loss protection too, which does nothing against a media failure.
    lower: LowerPageCopies,
    oob: Vec<u8>,
    pub zeros: Vec<u8>,
    /// Scratch page for merge copies.
    pub buf: Vec<u8>,
}

impl Flash {
    /// The flash of an FTL whose logical pages are `LOGICAL_PAGE_BYTES` (4 KiB pages only).
    pub fn new(nand: Nand) -> Result<Flash, FtlError> {
        check_page_size(nand.geometry())?;
        Flash::whole_pages(nand)
    }

    /// The flash of an FTL whose logical page is a whole flash page of any size (the inner FTL
    /// of `crate::sectors::Sectors` on 8 and 16 KiB pages).
    pub fn whole_pages(nand: Nand) -> Result<Flash, FtlError> {
        let geo = nand.geometry().clone();
        if geo.page_size_bytes == 0
            || !(geo.page_size_bytes as usize).is_multiple_of(LOGICAL_PAGE_BYTES)
        {
            return Err(FtlError::Config(format!(
                "{}-byte flash pages are no whole number of {}-byte sectors",
                geo.page_size_bytes, LOGICAL_PAGE_BYTES
            )));
        }
        check_oob_size(&geo)?;
        if !nand.is_powered() {
            return Err(FtlError::Flash(NandError::PoweredOff));
        }
        let mode = nand.config().cell.native;
        Ok(Flash {
            ppb: geo.pages_per_block,
            lp: geo.page_size_bytes as usize,
            strict: matches!(mode, CellMode::Mlc | CellMode::Tlc),
            // With power-loss protection no program is ever cut: nothing to pair.
            wl_pages: match mode {
                CellMode::Mlc | CellMode::Tlc if !nand.config().plp => mode.bits_per_cell(),
                _ => 1,
            },
            open_lines: Vec::new(),
            lower: LowerPageCopies::new(mode.bits_per_cell(), geo.pages_per_block),
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

    pub fn program(
        &mut self,
        at_ns: Nanos,
        ppn: Ppn,
        data: &[u8],
        rec: &OobRecord,
        purpose: Purpose,
    ) -> Result<Nanos, FtlError> {
        rec.encode_into(&mut self.oob);
        let r = self.nand.program(at_ns, ppn, data, &self.oob, purpose);
        if r.is_ok() {
            self.lower.programmed(ppn, data, &self.oob);
        }
        self.note_program(ppn, r.is_ok());
        Ok(r?.done_ns)
    }

    /// Programs the scratch buffer (a page just read for a merge copy).
    pub fn program_buf(
        &mut self,
        at_ns: Nanos,
        ppn: Ppn,
        rec: &OobRecord,
        purpose: Purpose,
    ) -> Result<Nanos, FtlError> {
        rec.encode_into(&mut self.oob);
        let r = self.nand.program(at_ns, ppn, &self.buf, &self.oob, purpose);
        if r.is_ok() {
            self.lower.programmed(ppn, &self.buf, &self.oob);
        }
        self.note_program(ppn, r.is_ok());
        Ok(r?.done_ns)
    }

    /// Keeps `open_lines` (invariant 4) after a program of `ppn`. A failed program leaves its
    /// block grown bad (or the power gone): the FTL retires it and never programs it again, so
    /// there is no word line left to complete.
    #[inline]
    fn note_program(&mut self, ppn: Ppn, ok: bool) {
        if self.wl_pages == 1 {
            return;
        }
        let pbn = self.geo.block_of(ppn).0;
        let page = self.geo.page_in_block(ppn);
        let at = self.open_lines.iter().position(|&b| b == pbn);
        let complete = !ok || (page + 1).is_multiple_of(self.wl_pages);
        match (at, complete) {
            (Some(i), true) => {
                self.open_lines.swap_remove(i);
            }
            (None, false) => self.open_lines.push(pbn),
            _ => {}
        }
    }

    /// Whether a cut program can destroy the pages below it on its word line (invariant 4):
    /// MLC and TLC blocks of a chip without power-loss protection.
    pub fn pairs_pages(&self) -> bool {
        self.wl_pages > 1
    }

    /// The blocks whose word line is incomplete (invariant 4), in no particular order; empty
    /// on SLC, without allocating.
    pub fn open_word_lines(&self) -> Vec<u32> {
        self.open_lines.clone()
    }

    /// Whether block `pbn`'s last program left its word line incomplete.
    fn has_open_word_line(&self, pbn: u32) -> bool {
        self.open_lines.contains(&pbn)
    }

    /// Completes block `pbn`'s open word line with `Pad` pages (invariant 4), each with the
    /// positional record the FTL's recovery expects (`pad`), and moves `*next_free` past them.
    /// Returns at once when the word line is complete.
    pub fn complete_word_line(
        &mut self,
        at_ns: Nanos,
        pbn: u32,
        next_free: &mut u32,
        pad: PadRecord,
        purpose: Purpose,
    ) -> Result<Nanos, FtlError> {
        if !self.has_open_word_line(pbn) {
            return Ok(at_ns);
        }
        let end = next_free.next_multiple_of(self.wl_pages).min(self.ppb);
        debug_assert!(end > *next_free, "an open word line has pages left");
        let done = self.pad_range(at_ns, pbn, next_free, end, pad, purpose)?;
        debug_assert!(
            !self.has_open_word_line(pbn),
            "the pads complete the word line"
        );
        Ok(done)
    }

    pub fn read(
        &mut self,
        at_ns: Nanos,
        ppn: Ppn,
        buf: &mut [u8],
        purpose: Purpose,
    ) -> Result<Nanos, FtlError> {
        let r = lower_pages::read(
            &mut self.nand,
            &self.lower,
            at_ns,
            ppn,
            buf,
            &mut [],
            purpose,
        );
        Ok(r?.done_ns)
    }

    /// Reads a page into the scratch buffer.
    pub fn read_buf(
        &mut self,
        at_ns: Nanos,
        ppn: Ppn,
        purpose: Purpose,
    ) -> Result<Nanos, FtlError> {
        let mut buf = std::mem::take(&mut self.buf);
        let r = self.read(at_ns, ppn, &mut buf, purpose);
        self.buf = buf;
        r
    }

    /// Reads data and OOB; returns the record too (`None` for erased or unreadable pages,
    /// whose data the caller must treat as never written).
    pub fn read_with_record(
        &mut self,
        at_ns: Nanos,
        ppn: Ppn,
        buf: &mut [u8],
        purpose: Purpose,
    ) -> Result<(Nanos, Option<OobRecord>), FtlError> {
        let r = lower_pages::read(
            &mut self.nand,
            &self.lower,
            at_ns,
            ppn,
            buf,
            &mut self.oob,
            purpose,
        );
        match r {
            Ok(d) => Ok((d.done_ns, OobRecord::decode(&self.oob))),
            Err(NandError::Torn(_)) => Ok((self.nand.now_ns().max(at_ns), None)),
            Err(e) => Err(e.into()),
        }
    }

    pub fn erase(&mut self, at_ns: Nanos, pbn: u32, purpose: Purpose) -> Result<Nanos, FtlError> {
        // Whatever happens to the erase, the block's pages are gone or never used again.
        self.forget_open_line(pbn);
        self.lower.erased(Pbn(pbn));
        Ok(self
            .nand
            .erase(at_ns, Pbn(pbn), self.mode, purpose)?
            .done_ns)
    }

    /// Drops `pbn` from the open word lines (invariant 4): it is erased, or grown bad and
    /// retired, so no program will ever complete or destroy its word line.
    fn forget_open_line(&mut self, pbn: u32) {
        if let Some(i) = self.open_lines.iter().position(|&b| b == pbn) {
            self.open_lines.swap_remove(i);
        }
    }

    /// After a recovery scan: the blocks whose programmed pages end inside a word line
    /// (invariant 4), from each block's next free page.
    pub fn note_scanned_block(&mut self, pbn: u32, next_free: u32) {
        if self.wl_pages > 1
            && next_free > 0
            && !next_free.is_multiple_of(self.wl_pages)
            && !self.is_bad(pbn)
            && !self.has_open_word_line(pbn)
        {
            self.open_lines.push(pbn);
        }
    }

    pub fn is_bad(&self, pbn: u32) -> bool {
        self.nand.is_bad(Pbn(pbn))
    }

    /// True if the block holds anything at all (programmed pages or an interrupted erase): a
    /// format erases exactly these. Reading the chip's own block state stands in for a full
    /// read of the block, which would find the same.
    pub fn needs_format_erase(&self, pbn: u32) -> bool {
        self.nand.block_info(Pbn(pbn)).is_ok_and(|i| {
            i.state == BlockState::NeedsErase || (i.state == BlockState::Good && i.next_page > 0)
        })
    }

    /// Programs pad pages from `*next_free` up to (not including) `page` when the chip forbids
    /// skipping pages (invariant 2); advances `*next_free` to `page + 1` in any case.
    pub fn pad_to(
        &mut self,
        at_ns: Nanos,
        pbn: u32,
        next_free: &mut u32,
        page: u32,
        pad: PadRecord,
        purpose: Purpose,
    ) -> Result<Nanos, FtlError> {
        let mut done = at_ns;
        if self.strict {
            done = self.pad_range(at_ns, pbn, next_free, page, pad, purpose)?;
        }
        *next_free = (*next_free).max(page + 1);
        Ok(done)
    }

    /// Programs pad pages `*next_free..end` of `pbn`, advancing `*next_free` page by page (so
    /// that a failed pad leaves it at the failed page).
    fn pad_range(
        &mut self,
        at_ns: Nanos,
        pbn: u32,
        next_free: &mut u32,
        end: u32,
        pad: PadRecord,
        purpose: Purpose,
    ) -> Result<Nanos, FtlError> {
        let mut done = at_ns;
        while *next_free < end {
            let rec = pad.at(*next_free);
            let ppn = self.ppn(pbn, *next_free);
            rec.encode_into(&mut self.oob);
            let r = self
                .nand
                .program(at_ns, ppn, &self.zeros, &self.oob, purpose);
            if r.is_ok() {
                self.lower.programmed(ppn, &self.zeros, &self.oob);
            }
            self.note_program(ppn, r.is_ok());
            done = done.max(r?.done_ns);
            *next_free += 1;
        }
        Ok(done)
    }

    /// Makes a block that recovery found unneeded ready for reuse: erases it unless the scan
    /// found it clean. `Ok(false)` if it went bad on the erase (it must not be used).
    pub fn make_clean(
        &mut self,
        at_ns: Nanos,
        pbn: u32,
        scan: &BlockScan,
    ) -> Result<bool, FtlError> {
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
    matches!(
        e,
        FtlError::Flash(
            NandError::EraseFailed(_) | NandError::WornOut { .. } | NandError::BadBlock(_)
        )
    )
}

/// A program failed (the block turned grown-bad, the page is torn) or went to a block that is
/// already bad: the FTL retires the block, moves what it holds and retries elsewhere.
pub(crate) fn failed_program_block(e: &FtlError, geo: &Geometry) -> Option<u32> {
    match e {
        FtlError::Flash(NandError::ProgramFailed(ppn)) => Some(geo.block_of(*ppn).0),
        FtlError::Flash(NandError::BadBlock(pbn)) => Some(pbn.0),
        _ => None,
    }
}

// ----- recovery scan -------------------------------------------------------------------------

/// Reads the OOB of every page of every block (bad blocks too: their pages stay readable; SLC
/// blocks may have erased pages below programmed ones, so every page is read), all reads issued
/// at `at_ns`, and charges the controller for parsing them.
pub(crate) fn scan_device(
    f: &mut Flash,
    ctrl: &mut Controller,
    at_ns: Nanos,
) -> Result<(Vec<BlockScan>, Nanos), FtlError> {
    let mut out = Vec::with_capacity(f.geo.blocks() as usize);
    // One record per flash page, whatever its size (`Flash::lp`).
    let scanned = scan_blocks_of(&mut f.nand, at_ns, ScanExtent::AllPages, 1, &mut |_, s| {
        out.push(s);
        Ok(())
    })?;
    let parsed = ctrl.charge(at_ns, CYC_SCAN_PAGE * scanned.pages_read);
    Ok((out, scanned.done_ns.max(parsed)))
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
        FreePool {
            per_die: vec![VecDeque::new(); dies as usize],
            count: 0,
        }
    }
    pub fn push(&mut self, die: u32, pbn: u32) {
        self.per_die[die as usize].push_back(pbn);
        self.count += 1;
    }
    /// A block from `prefer_die`, else from the die with the most free blocks (lowest index on ties).
    pub fn pop(&mut self, prefer_die: u32) -> Option<u32> {
        let d = prefer_die as usize % self.per_die.len();
        let die = if self.per_die[d].is_empty() {
            let (best, q) = self
                .per_die
                .iter()
                .enumerate()
                .max_by_key(|(i, q)| (q.len(), std::cmp::Reverse(*i)))?;
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

/// `flush`, `report`, `nand`, `nand_mut` and `into_nand` of an FTL with fields `f: Flash`,
/// `c: Counters`, `ctrl: Controller` and methods `mapping_bytes()` and
/// `pair_word_lines(at_ns)`. None of these FTLs caches writes: a flush costs the controller's
/// request overhead and, on MLC/TLC, the pads that complete open word lines (invariant 4).
macro_rules! shared_block_device_methods {
    () => {
        fn flush(
            &mut self,
            at_ns: nand::Nanos,
        ) -> Result<nand::Nanos, $crate::block_device::FtlError> {
            self.c.host.flushes += 1;
            let t = self.ctrl.charge(at_ns, $crate::block::common::CYC_REQUEST);
            self.pair_word_lines(t)
        }

        fn report(&self) -> $crate::block_device::FtlReport {
            self.c
                .report(self.name(), &self.f.nand, self.mapping_bytes(), &self.ctrl)
        }

        fn nand(&self) -> Option<&nand::Nand> {
            Some(&self.f.nand)
        }

        fn nand_mut(&mut self) -> Option<&mut nand::Nand> {
            Some(&mut self.f.nand)
        }

        fn into_nand(self: Box<Self>) -> Option<nand::Nand> {
            Some(self.f.nand)
        }
    };
}
pub(crate) use shared_block_device_methods;

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

/// `floor(blocks x (1 - spare_factor))`: the logical blocks a device formatted with this spare
/// factor exposes (`open` takes it as it is: blocks that went bad since eat spare, not capacity).
pub(crate) fn exposed_blocks(f: &Flash, spare_factor: f64) -> Result<u32, FtlError> {
    check_spare_factor(spare_factor)?;
    Ok((f64::from(f.geo.blocks()) * (1.0 - spare_factor)).floor() as u32)
}

/// Logical blocks exposed for a geometry and spare factor (independent of bad blocks, so that
/// capacity does not change across a restart).
pub(crate) fn logical_blocks(
    f: &Flash,
    spare_factor: f64,
    min_spare: u32,
) -> Result<u32, FtlError> {
    let blocks = f.geo.blocks();
    let logical = exposed_blocks(f, spare_factor)?;
    let good = (0..blocks).filter(|&b| !f.is_bad(b)).count() as u32;
    if logical == 0 || good < logical + min_spare {
        return Err(FtlError::Config(format!(
            "{good} good blocks cannot hold {logical} logical blocks plus {min_spare} spare; raise the spare factor ({spare_factor})"
        )));
    }
    Ok(logical)
}

/// Mapping memory of a block-level FTL (and of AMF's AFTL) for a device of `capacity_bytes`:
/// one 4-byte entry per block of `pages_per_block` pages of `page_bytes`. AMF's table:
/// 512 GiB with 128 x 4 KiB blocks gives 4 MiB; 1 TiB gives 8 MiB.
pub fn mapping_bytes_for(capacity_bytes: u64, page_bytes: u64, pages_per_block: u64) -> u64 {
    4 * capacity_bytes.div_ceil(page_bytes * pages_per_block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_split_at_block_boundaries() {
        let v: Vec<_> = chunks(14, 20, 16).collect();
        assert_eq!(v, vec![(0, 14, 2), (1, 0, 16), (2, 0, 2)]);
    }
}
