//! 4 KiB sectors over a block-mapped FTL on larger flash pages (`block`, `fast` and `amf` on 8
//! and 16 KiB pages).
//!
//! The block-mapped FTLs map a logical page to a page offset inside a block, so their logical
//! page is one flash page: they cannot map 4 KiB units inside a page as the page-mapped FTLs do
//! (`space.rs`, "Units"). A controller that runs them on large pages does what firmware of
//! block-mapped SSDs did: it gathers sector writes of one flash page in DRAM and writes the page
//! whole, reading the rest of the page first when the host did not write all of it
//! (read-modify-write). This module is that controller layer: it exports the block interface in
//! `LOGICAL_PAGE_BYTES` sectors over an inner FTL whose logical page is a flash page.
//!
//! Cost model: a sector write that completes its page costs nothing extra; a page written in
//! part (random sector writes, a flush or FUA with a partly gathered page) costs a read of the
//! old page and a program of the whole page: on 16 KiB pages a random 4 KiB write programs four
//! times the data, which is the write amplification such devices had.
//!
//! Invariants:
//! 1. At most one flash page is gathered. Its sectors are newer than the inner FTL's copy of
//!    that page; its other sectors are the inner FTL's.
//! 2. A gathered page is written to the inner FTL before the inner FTL serves any other request
//!    that touches the same page, before a flush or FUA returns, and when a write starts
//!    gathering another page. So contract item 4 (`block_device.rs`) holds: a flushed sector is
//!    in the inner FTL, which keeps it durable.
//! 3. Sector counts (`host`) are the block interface's; the inner FTL's host counts are pages.
//!    WAF is flash bytes programmed over host bytes written, as for every FTL.

use nand::{Nand, Nanos};

use crate::block_device::{
    check_range, check_request, BlockDevice, FtlError, FtlReport, HostCounts, LOGICAL_PAGE_BYTES,
};

/// The block interface in 4 KiB sectors over `inner`, whose logical pages are `units` sectors.
#[derive(Debug)]
pub struct Sectors<D> {
    inner: D,
    units: u64,
    /// The inner FTL takes each page once between trims (AMF): a sector write into a page it
    /// already holds is refused when it arrives, not at the later write-back.
    append_only: bool,
    /// The gathered page (invariant 1): its inner page number, its data, and which of its
    /// sectors the host wrote.
    page: Option<u64>,
    data: Vec<u8>,
    written: Vec<bool>,
    /// A page read from the inner FTL (read-modify-write and partial reads).
    scratch: Vec<u8>,
    host: HostCounts,
}

impl<D: BlockDevice> Sectors<D> {
    /// `inner` maps logical pages of `units` sectors each (its flash page).
    pub fn new(inner: D, units: u32) -> Sectors<D> {
        Sectors::with_rule(inner, units, false)
    }

    /// Over an append-only inner FTL (AMF): see `append_only`.
    pub fn append_only(inner: D, units: u32) -> Sectors<D> {
        Sectors::with_rule(inner, units, true)
    }

    fn with_rule(inner: D, units: u32, append_only: bool) -> Sectors<D> {
        assert!(units >= 1, "a flash page holds at least one sector");
        let page_bytes = units as usize * LOGICAL_PAGE_BYTES;
        Sectors {
            inner,
            units: u64::from(units),
            append_only,
            page: None,
            data: vec![0; page_bytes],
            written: vec![false; units as usize],
            scratch: vec![0; page_bytes],
            host: HostCounts::default(),
        }
    }

    /// Writes the gathered page to the inner FTL (invariant 2): whole if the host wrote every
    /// sector, else merged over the inner FTL's copy, which is read first.
    fn write_back(&mut self, at_ns: Nanos, fua: bool) -> Result<Nanos, FtlError> {
        let Some(page) = self.page else {
            return Ok(at_ns);
        };
        let mut t = at_ns;
        if !self.written.iter().all(|&w| w) {
            t = self.inner.read(at_ns, page, &mut self.scratch)?;
            let s = LOGICAL_PAGE_BYTES;
            for (i, _) in self.written.iter().enumerate().filter(|(_, w)| !**w) {
                self.data[i * s..(i + 1) * s].copy_from_slice(&self.scratch[i * s..(i + 1) * s]);
            }
        }
        let done = self.inner.write(t, page, &self.data, fua)?;
        // Only now: if the write failed, the page is still gathered and nothing was lost.
        self.page = None;
        self.written.fill(false);
        Ok(done)
    }

    /// Puts sectors `first..first + n` of inner page `page` (from `src`) into the gathered page.
    fn gather(
        &mut self,
        at_ns: Nanos,
        page: u64,
        first: usize,
        src: &[u8],
    ) -> Result<Nanos, FtlError> {
        let mut t = at_ns;
        if self.page != Some(page) {
            if self.append_only && self.inner.mapped(page) == Some(true) {
                return Err(FtlError::Overwrite {
                    lpn: page * self.units + first as u64,
                    why: format!(
                        "the {}-byte flash page of sectors {}..{} was written already (a flush wrote it in part); appends go on at the next page, or trim its segment first",
                        self.data.len(),
                        page * self.units,
                        (page + 1) * self.units
                    ),
                });
            }
            t = self.write_back(at_ns, false)?;
            self.page = Some(page);
        }
        let s = LOGICAL_PAGE_BYTES;
        let n = src.len() / s;
        self.data[first * s..(first + n) * s].copy_from_slice(src);
        self.written[first..first + n].fill(true);
        if self.written.iter().all(|&w| w) {
            // Complete: nothing to wait for (a flash page is programmed as soon as it is full).
            return self.write_back(t, false);
        }
        Ok(t)
    }
}

/// Splits sectors `[lpn, lpn + sectors)` at page boundaries of `units` sectors: yields (page,
/// first sector in it, sectors).
fn pieces(units: u64, lpn: u64, sectors: u64) -> impl Iterator<Item = (u64, usize, usize)> {
    let end = lpn + sectors;
    let mut at = lpn;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let (page, first) = (at / units, at % units);
        let n = (units - first).min(end - at);
        at += n;
        Some((page, first as usize, n as usize))
    })
}

impl<D: BlockDevice> BlockDevice for Sectors<D> {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn capacity_pages(&self) -> u64 {
        self.inner.capacity_pages() * self.units
    }

    fn read(&mut self, at_ns: Nanos, lpn: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        let sectors = check_request(lpn, buf.len(), self.capacity_pages())?;
        let s = LOGICAL_PAGE_BYTES;
        let mut done = at_ns;
        let mut at = 0;
        for (page, first, n) in pieces(self.units, lpn, sectors) {
            let out = &mut buf[at * s..(at + n) * s];
            at += n;
            if n as u64 == self.units && self.page != Some(page) {
                done = done.max(self.inner.read(at_ns, page, out)?);
                continue;
            }
            done = done.max(self.inner.read(at_ns, page, &mut self.scratch)?);
            for i in first..first + n {
                // Invariant 1: a gathered sector is newer than the inner FTL's.
                let from = if self.page == Some(page) && self.written[i] {
                    &self.data[i * s..(i + 1) * s]
                } else {
                    &self.scratch[i * s..(i + 1) * s]
                };
                out[(i - first) * s..(i - first + 1) * s].copy_from_slice(from);
            }
        }
        self.host.reads += sectors;
        Ok(done)
    }

    fn write(&mut self, at_ns: Nanos, lpn: u64, data: &[u8], fua: bool) -> Result<Nanos, FtlError> {
        let sectors = check_request(lpn, data.len(), self.capacity_pages())?;
        let s = LOGICAL_PAGE_BYTES;
        let mut done = at_ns;
        let mut at = 0;
        for (page, first, n) in pieces(self.units, lpn, sectors) {
            let src = &data[at * s..(at + n) * s];
            at += n;
            if n as u64 == self.units {
                if self.page == Some(page) {
                    // The whole page replaces what was gathered of it.
                    self.page = None;
                    self.written.fill(false);
                }
                done = done.max(self.inner.write(at_ns, page, src, fua)?);
            } else {
                done = done.max(self.gather(at_ns, page, first, src)?);
            }
        }
        if fua {
            // Contract item 4: a FUA write is durable when it returns (invariant 2).
            done = done.max(self.write_back(done, true)?);
        }
        self.host.writes += sectors;
        Ok(done)
    }

    fn trim(&mut self, at_ns: Nanos, lpn: u64, sectors: u64) -> Result<Nanos, FtlError> {
        check_range(lpn, sectors, self.capacity_pages())?;
        if self.append_only
            && (!lpn.is_multiple_of(self.units) || !sectors.is_multiple_of(self.units))
        {
            // Zeros gathered for a partial page would be an append the inner FTL may refuse
            // after this request changed something; refuse it first (contract item 1).
            return Err(FtlError::Unsupported(format!(
                "an append-only device trims whole {}-sector flash pages (whole segments); sectors {lpn}..{} are not",
                self.units,
                lpn + sectors
            )));
        }
        let mut done = at_ns;
        // Whole pages are trimmed in the inner FTL, in runs; the sectors of a page trimmed in
        // part must read as zeros (contract item 2), so they are written as zeros.
        let mut run: Option<(u64, u64)> = None;
        for (page, first, n) in pieces(self.units, lpn, sectors) {
            if n as u64 == self.units {
                if self.page == Some(page) {
                    self.page = None;
                    self.written.fill(false);
                }
                run = match run {
                    Some((start, len)) if start + len == page => Some((start, len + 1)),
                    Some((start, len)) => {
                        done = done.max(self.inner.trim(at_ns, start, len)?);
                        Some((page, 1))
                    }
                    None => Some((page, 1)),
                };
            } else {
                let zeros = vec![0u8; n * LOGICAL_PAGE_BYTES];
                done = done.max(self.gather(at_ns, page, first, &zeros)?);
            }
        }
        if let Some((start, len)) = run {
            done = done.max(self.inner.trim(at_ns, start, len)?);
        }
        self.host.trims += sectors;
        Ok(done)
    }

    fn flush(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        let t = self.write_back(at_ns, false)?;
        self.host.flushes += 1;
        self.inner.flush(t)
    }

    fn report(&self) -> FtlReport {
        let mut r = self.inner.report();
        // Invariant 3: the inner FTL's WAF is over its pages; ours is over sectors.
        let programmed_sectors = r.waf * r.host.writes as f64;
        r.waf = if self.host.writes == 0 {
            0.0
        } else {
            programmed_sectors / self.host.writes as f64
        };
        r.host = self.host;
        r
    }

    fn nand(&self) -> Option<&Nand> {
        self.inner.nand()
    }

    fn nand_mut(&mut self) -> Option<&mut Nand> {
        self.inner.nand_mut()
    }

    fn into_nand(self: Box<Self>) -> Option<Nand> {
        Box::new(self.inner).into_nand()
    }

    fn mapped(&self, lpn: u64) -> Option<bool> {
        if self.page == Some(lpn / self.units) && self.written[(lpn % self.units) as usize] {
            return Some(true);
        }
        self.inner.mapped(lpn / self.units)
    }

    fn background(&mut self, at_ns: Nanos, max_victims: u32) -> Result<Nanos, FtlError> {
        self.inner.background(at_ns, max_victims)
    }
}
