//! The controller's copies of the pages of incomplete word lines (MLC, TLC).
//!
//! Why: on MLC and TLC chips a program of an upper (or middle) page that fails on the media
//! tears the pages below it on its word line as well (nand invariant 6,
//! `FaultPlan::fail_paired_program_from`). Those pages may hold data the host was told is
//! written, or the only copy of data GC moved there. No flush rule helps here: the failure is
//! no power loss, so everything acknowledged must survive it. A controller keeps each lower
//! page's data in its buffer until the word line's last page is programmed and rewrites it from
//! there when that program fails; [`LowerPageCopies`] is that buffer. The FTLs retire the failed
//! block and move its valid pages off as after any failed program; a page the device now reads
//! as torn is served from its copy ([`read`], [`read_range`]).
//!
//! Invariants:
//! 1. While the last page of a word line is not programmed, every page programmed below it on
//!    that word line since its block's erase has its copy here, data and OOB as programmed.
//! 2. A copy is dropped when its word line's last page is programmed or its block is erased; a
//!    failed program keeps the copies of its word line (its block is bad now and never erased,
//!    so they stay until the FTL is dropped: a handful of pages per failure).
//! 3. A copy is used only when the device reads its page as torn: a run without a failed
//!    program reads, times and counts exactly as without this buffer.
//! 4. SLC and pSLC (one page per word line): nothing is kept.
//!
//! The copies are DRAM of the controller: a power loss takes them with the FTL object, and the
//! power-loss rule (pads at durability points, space invariant 9) is what protects flushed data
//! then.

use std::collections::BTreeMap;

use nand::{Done, Nand, NandError, Nanos, Pbn, Ppn, Purpose};

/// Data and OOB of one page as programmed.
#[derive(Debug, Clone)]
struct Copy {
    data: Vec<u8>,
    oob: Vec<u8>,
}

/// The copies of lower (and middle) pages of word lines whose last page is not yet programmed.
#[derive(Debug, Clone)]
pub struct LowerPageCopies {
    /// Pages per word line in the mode the owner erases its blocks into (1: keeps nothing).
    wl_pages: u64,
    pages_per_block: u64,
    copies: BTreeMap<u64, Copy>,
    /// Buffers of dropped copies, reused.
    spare: Vec<Copy>,
}

impl LowerPageCopies {
    /// For blocks of `pages_per_block` pages with `wl_pages` pages per word line (the cell
    /// mode's bits per cell).
    pub fn new(wl_pages: u32, pages_per_block: u32) -> Self {
        LowerPageCopies {
            wl_pages: u64::from(wl_pages.max(1)),
            pages_per_block: u64::from(pages_per_block.max(1)),
            copies: BTreeMap::new(),
            spare: Vec::new(),
        }
    }

    /// Pages whose copies are held (tests, reports).
    pub fn len(&self) -> usize {
        self.copies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.copies.is_empty()
    }

    /// A full-page program of `ppn` completed with `data` and `oob` (invariants 1 and 2).
    #[inline]
    pub fn programmed(&mut self, ppn: Ppn, data: &[u8], oob: &[u8]) {
        if self.wl_pages == 1 {
            return;
        }
        let pos = (ppn.0 % self.pages_per_block) % self.wl_pages;
        if pos + 1 == self.wl_pages {
            // The word line is complete: its lower pages are safe on flash.
            for k in 1..=pos {
                if let Some(c) = self.copies.remove(&(ppn.0 - k)) {
                    self.spare.push(c);
                }
            }
            return;
        }
        let mut c = self.spare.pop().unwrap_or(Copy {
            data: Vec::new(),
            oob: Vec::new(),
        });
        c.data.clear();
        c.data.extend_from_slice(data);
        c.oob.clear();
        c.oob.extend_from_slice(oob);
        if let Some(old) = self.copies.insert(ppn.0, c) {
            self.spare.push(old);
        }
    }

    /// Block `pbn` was erased: its copies are stale (invariant 2).
    pub fn erased(&mut self, pbn: Pbn) {
        if self.copies.is_empty() {
            return;
        }
        let first = u64::from(pbn.0) * self.pages_per_block;
        let stale: Vec<u64> = self
            .copies
            .range(first..first + self.pages_per_block)
            .map(|(&k, _)| k)
            .collect();
        for k in stale {
            if let Some(c) = self.copies.remove(&k) {
                self.spare.push(c);
            }
        }
    }

    /// Fills `data` (from byte `data_off` of the page) and `oob` (from OOB byte `oob_off`) from
    /// the copy of `ppn`, if one is held; OOB bytes the copy lacks read as erased.
    pub fn fill(
        &self,
        ppn: Ppn,
        (data_off, data): (usize, &mut [u8]),
        (oob_off, oob): (usize, &mut [u8]),
    ) -> bool {
        let Some(c) = self.copies.get(&ppn.0) else {
            return false;
        };
        let Some(src) = c.data.get(data_off..data_off + data.len()) else {
            return false;
        };
        data.copy_from_slice(src);
        for (i, b) in oob.iter_mut().enumerate() {
            *b = c.oob.get(oob_off + i).copied().unwrap_or(0xFF);
        }
        true
    }
}

/// `nand.read` of a whole page, served from `copies` when the device reads it as torn
/// (invariant 3). A copy is in the controller's DRAM: it takes no device time.
pub fn read(
    nand: &mut Nand,
    copies: &LowerPageCopies,
    at_ns: Nanos,
    ppn: Ppn,
    data: &mut [u8],
    oob: &mut [u8],
    purpose: Purpose,
) -> Result<Done, NandError> {
    match nand.read(at_ns, ppn, data, oob, purpose) {
        Err(NandError::Torn(p)) if copies.fill(p, (0, data), (0, oob)) => Ok(Done {
            start_ns: at_ns,
            done_ns: at_ns,
        }),
        r => r,
    }
}

/// `nand.read_range`, served from `copies` when the device reads the page as torn.
pub fn read_range(
    nand: &mut Nand,
    copies: &LowerPageCopies,
    at_ns: Nanos,
    ppn: Ppn,
    (data_off, data): (usize, &mut [u8]),
    (oob_off, oob): (usize, &mut [u8]),
    purpose: Purpose,
) -> Result<Done, NandError> {
    match nand.read_range(at_ns, ppn, (data_off, data), (oob_off, oob), purpose) {
        Err(NandError::Torn(p)) if copies.fill(p, (data_off, data), (oob_off, oob)) => Ok(Done {
            start_ns: at_ns,
            done_ns: at_ns,
        }),
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_lives_until_its_word_line_is_complete_or_its_block_erased() {
        let mut c = LowerPageCopies::new(3, 96);
        let page = |b: u8| vec![b; 16];
        c.programmed(Ppn(96), &page(1), &[7]);
        c.programmed(Ppn(97), &page(2), &[8]);
        assert_eq!(c.len(), 2);
        let (mut d, mut o) = (vec![0u8; 4], vec![0u8; 2]);
        assert!(c.fill(Ppn(97), (4, &mut d), (0, &mut o)));
        assert_eq!((d, o), (vec![2u8; 4], vec![8, 0xFF]));
        c.programmed(Ppn(98), &page(3), &[9]);
        assert!(c.is_empty(), "the upper page completes the word line");
        c.programmed(Ppn(99), &page(4), &[]);
        c.erased(Pbn(1));
        assert!(c.is_empty());
        let mut slc = LowerPageCopies::new(1, 64);
        slc.programmed(Ppn(0), &page(1), &[]);
        assert!(slc.is_empty());
    }
}
