//! `page`: the page-mapped FTL. The whole map (logical page -> flash page, 4 bytes per entry)
//! lives in controller RAM; flash space, GC and wear levelling are the shared [`FlashSpace`].
//!
//! Streams: 0 host data (striped over all dies), 1 journal (trim records, checkpoints).
//!
//! Writes go straight to flash: a write completes when its last page is programmed. On SLC it is
//! durable when it returns (there is no volatile write cache), FUA needs nothing extra and FLUSH
//! only orders. On MLC/TLC a page on a lower page of a word line is durable only once the word
//! line is complete: FLUSH, FUA and trims complete the open word lines with pad pages (space
//! invariant 9), so an upper-page program cut by a power loss cannot destroy acknowledged data. Trims are made durable before they return by a trim record (`journal.rs`).
//! A multi-page request is mapped page by page on the one controller core and every page is
//! issued as soon as its mapping work is done, so the pages of a request run on all dies.
//!
//! Invariants:
//! 1. `map[l] == p` (p != UNMAPPED) iff the space's reverse map says page p holds the valid copy
//!    of key l (space invariant 1). Moves reported by the space are applied before the map is
//!    read again.
//! 2. A logical page is unmapped iff it was never written or its last operation was a trim.
//! 3. Requests are checked before anything changes (contract item 1).
//! 4. Recovery (`open`) rebuilds exactly the map of invariant 1 from flash (`journal::scan`).
//!
//! Flash pages of 8 or 16 KiB hold 2 or 4 logical pages, each mapped on its own (sub-page
//! mapping, `space.rs` "Units"; the map holds unit locations). Writes then go through the
//! controller's write buffer (`wbuf.rs`): acknowledged when buffered, programmed a page at a
//! time, durable at FLUSH or FUA (contract item 4), which program the partly filled page.
//!
//! Controller costs: see `options.rs`.

use nand::{Nand, Nanos, Ppn, Purpose};

use crate::block_device::{
    check_range, check_request, BlockDevice, Counters, FtlError, FtlReport, LOGICAL_PAGE_BYTES,
};
use crate::controller::Controller;
use crate::journal::{mapped_bitmap, scan, Journal, UNMAPPED};
use crate::oob::{OobRecord, PageKind};
use crate::options::{
    charge_gc_work, page_mapped_capacity, read_mapped, space_device_methods, space_report,
    FtlOptions, LOOKUP_CYCLES, UPDATE_CYCLES,
};
use crate::space::{FlashSpace, Move, SpaceCounts};
use crate::wbuf::WriteBuffer;

const DATA: u8 = 0;
const JOURNAL: u8 = 1;
const STREAMS: u8 = 2;

/// The page-mapped FTL.
#[derive(Debug)]
pub struct PageFtl {
    space: FlashSpace,
    map: Vec<u32>,
    ctrl: Controller,
    journal: Journal,
    c: Counters,
    /// Space counters at the last charge, to charge GC work done since.
    charged: SpaceCounts,
    /// Flash pages of several logical pages: the write buffer (`wbuf.rs`).
    wbuf: Option<WriteBuffer>,
}

/// The write buffer of a page-mapped FTL on `space`, if its pages hold several logical pages.
pub(crate) fn write_buffer(space: &FlashSpace, opts: &FtlOptions) -> Option<WriteBuffer> {
    let units = space.units_per_page() as usize;
    (units > 1).then(|| {
        let pages = if opts.write_buffer_pages == 0 {
            2 * space.geometry().dies() as usize
        } else {
            opts.write_buffer_pages as usize
        };
        WriteBuffer::new(units, space.unit_bytes(), pages)
    })
}

impl PageFtl {
    /// A fresh FTL on `nand` (formatted).
    pub fn new(nand: Nand, opts: &FtlOptions) -> Result<PageFtl, FtlError> {
        let capacity = page_mapped_capacity(&nand, opts, 1)?;
        let at = nand.now_ns();
        let (space, _) = FlashSpace::format(nand, opts.space_config(STREAMS), at)?;
        let page_bytes = space.unit_bytes();
        Ok(PageFtl {
            map: vec![UNMAPPED; capacity as usize],
            ctrl: Controller::new(&opts.controller),
            journal: Journal::new(capacity, page_bytes, JOURNAL),
            c: Counters::new(space.nand()),
            charged: space.counts(),
            wbuf: write_buffer(&space, opts),
            space,
        })
    }

    /// Recovers the FTL from a device that holds its data (invariant 4).
    pub fn open(mut nand: Nand, opts: &FtlOptions) -> Result<PageFtl, FtlError> {
        let capacity = page_mapped_capacity(&nand, opts, 1)?;
        let at = nand.now_ns();
        let rec = scan(&mut nand, at, capacity, 0)?;
        let live = rec.live_pages(|_| DATA, JOURNAL);
        let (space, _) = FlashSpace::restore(
            nand,
            opts.space_config(STREAMS),
            rec.done_ns,
            &live,
            rec.next_seq,
        )?;
        let page_bytes = space.unit_bytes();
        let mut ftl = PageFtl {
            map: rec.map,
            ctrl: Controller::new(&opts.controller),
            journal: Journal::recovered(capacity, page_bytes, JOURNAL, rec.journal),
            c: Counters::new(space.nand()),
            charged: space.counts(),
            wbuf: write_buffer(&space, opts),
            space,
        };
        ftl.absorb(); // pages moved off bad blocks during the restore
        ftl.c = Counters::new(ftl.space.nand());
        Ok(ftl)
    }

    pub fn space(&self) -> &FlashSpace {
        &self.space
    }
    pub fn space_mut(&mut self) -> &mut FlashSpace {
        &mut self.space
    }
    pub fn into_nand(self) -> Nand {
        self.space.into_nand()
    }

    /// Applies the space's moves to the map (invariant 1).
    fn absorb(&mut self) {
        let map = &mut self.map;
        self.journal
            .absorb(&mut self.space, &mut |m: &Move| apply_move(map, m));
    }

    /// Charges the controller for GC and wear-levelling work the space did since the last call.
    fn charge_background(&mut self, at_ns: Nanos) {
        charge_gc_work(&mut self.ctrl, &self.space, &mut self.charged, at_ns);
    }

    fn checkpoint_if_due(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        if !self.journal.wants_checkpoint() {
            return Ok(at_ns);
        }
        let bitmap = mapped_bitmap(self.map.len() as u64, |l| self.map[l as usize] != UNMAPPED);
        let map = &mut self.map;
        self.journal
            .write_checkpoint(&mut self.space, at_ns, &bitmap, &mut |m: &Move| {
                apply_move(map, m)
            })
    }

    /// Programs the write buffer's gathered page (full, or partly filled at a durability
    /// point) at `at_ns` and maps its logical pages there. Returns the program's completion.
    fn program_buffer(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        let Some(wb) = self.wbuf.as_mut() else {
            return Ok(at_ns);
        };
        let Some((lpns, first, done)) =
            crate::wbuf::program_gathered(wb, &mut self.space, DATA, at_ns)?
        else {
            return Ok(at_ns);
        };
        // Moves first: GC may have moved these pages' previous copies (invariant 1).
        self.absorb();
        for (i, l) in lpns.into_iter().enumerate() {
            let old = std::mem::replace(&mut self.map[l as usize], (first.0 + i as u64) as u32);
            if old != UNMAPPED {
                self.space.invalidate(Ppn(u64::from(old)));
            }
        }
        self.charge_background(at_ns);
        Ok(done)
    }

    /// A write of one logical page through the write buffer: acknowledged when buffered.
    fn buffered_write(&mut self, at_ns: Nanos, l: u64, chunk: &[u8]) -> Result<Nanos, FtlError> {
        let Some(wb) = self.wbuf.as_mut() else {
            return Ok(at_ns);
        };
        let (t, full) = wb.put(at_ns, l, chunk);
        if full {
            // Issued now; the write is acknowledged once buffered, not when programmed.
            self.program_buffer(t)?;
        }
        Ok(t)
    }

    /// A durability point (FLUSH, FUA, a trim's record): completes the word lines of the open
    /// blocks so that nothing acknowledged sits on an unpaired lower page (space invariant 9).
    fn pair(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        let t = self.program_buffer(at_ns)?;
        let t = t.max(self.space.pair_word_lines(at_ns)?);
        self.absorb();
        Ok(t)
    }

    /// Idle-time work: background GC of up to `max_victims` blocks.
    pub fn background(&mut self, at_ns: Nanos, max_victims: u32) -> Result<Nanos, FtlError> {
        let t = self.space.background_gc(at_ns, max_victims)?;
        self.absorb();
        self.charge_background(at_ns);
        Ok(t)
    }
}

/// Applies a move of a data page to the map (journal pages never reach here).
fn apply_move(map: &mut [u32], m: &Move) {
    debug_assert_eq!(m.stream, DATA);
    let e = &mut map[m.key as usize];
    debug_assert_eq!(
        u64::from(*e),
        m.from.0,
        "moved page of lpn {} is not the mapped one",
        m.key
    );
    *e = m.to.0 as u32;
}

impl BlockDevice for PageFtl {
    fn name(&self) -> String {
        "page".into()
    }

    fn capacity_pages(&self) -> u64 {
        self.map.len() as u64
    }

    /// The whole map is in RAM (invariant 1): an unmapped page is trimmed or never written,
    /// unless its write waits in the write buffer (mapped once its page is programmed).
    fn mapped(&self, lpn: u64) -> Option<bool> {
        let buffered = self.wbuf.as_ref().is_some_and(|wb| wb.holds(lpn));
        self.map
            .get(lpn as usize)
            .map(|&p| p != UNMAPPED || buffered)
    }

    fn read(&mut self, at_ns: Nanos, lpn: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        check_request(lpn, buf.len(), self.capacity_pages())?;
        let mut end = at_ns;
        for (i, chunk) in buf.chunks_exact_mut(LOGICAL_PAGE_BYTES).enumerate() {
            let t = self.ctrl.charge(at_ns, LOOKUP_CYCLES);
            if self
                .wbuf
                .as_ref()
                .is_some_and(|wb| wb.read(lpn + i as u64, chunk))
            {
                end = end.max(t);
                self.c.host.reads += 1;
                continue;
            }
            let done = read_mapped(&mut self.space, t, self.map[lpn as usize + i], chunk)?;
            end = end.max(done);
            self.c.host.reads += 1;
        }
        Ok(end)
    }

    fn write(&mut self, at_ns: Nanos, lpn: u64, data: &[u8], fua: bool) -> Result<Nanos, FtlError> {
        check_request(lpn, data.len(), self.capacity_pages())?;
        let mut end = at_ns;
        for (i, chunk) in data.chunks_exact(LOGICAL_PAGE_BYTES).enumerate() {
            let l = lpn + i as u64;
            let t = self.ctrl.charge(at_ns, UPDATE_CYCLES);
            if self.wbuf.is_some() {
                end = end.max(self.buffered_write(t, l, chunk)?);
                self.c.host.writes += 1;
                continue;
            }
            let seq = self.space.alloc_seq();
            let (ppn, done) = self.space.write(
                t,
                DATA,
                &OobRecord::new(PageKind::Data, l, seq, 0),
                chunk,
                Purpose::Host,
            )?;
            // Moves first: GC may have moved this page's previous copy (invariant 1).
            self.absorb();
            let old = std::mem::replace(&mut self.map[l as usize], ppn.0 as u32);
            if old != UNMAPPED {
                self.space.invalidate(Ppn(u64::from(old)));
            }
            self.charge_background(t);
            end = end.max(done);
            self.c.host.writes += 1;
        }
        if fua {
            end = end.max(self.pair(end)?);
        }
        Ok(end)
    }

    fn trim(&mut self, at_ns: Nanos, lpn: u64, pages: u64) -> Result<Nanos, FtlError> {
        check_range(lpn, pages, self.capacity_pages())?;
        self.c.host.trims += pages;
        let range = lpn as usize..(lpn + pages) as usize;
        if let Some(wb) = self.wbuf.as_mut() {
            wb.discard(lpn, pages);
        }
        if self.map[range.clone()].iter().all(|&p| p == UNMAPPED) {
            // Nothing to drop, nothing that could come back.
            return Ok(self.ctrl.charge(at_ns, LOOKUP_CYCLES * pages));
        }
        let t = self.ctrl.charge(at_ns, LOOKUP_CYCLES * pages);
        let map = &mut self.map;
        let mut end =
            self.journal
                .record_trim(&mut self.space, t, lpn, pages, &mut |m: &Move| {
                    apply_move(map, m)
                })?;
        for l in range {
            let old = std::mem::replace(&mut self.map[l], UNMAPPED);
            if old != UNMAPPED {
                self.space.invalidate(Ppn(u64::from(old)));
            }
        }
        end = end.max(self.checkpoint_if_due(t)?);
        end = end.max(self.pair(end)?);
        self.charge_background(t);
        Ok(end)
    }

    fn flush(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        // Nothing is buffered: on SLC a write is durable when it returns and FLUSH only orders;
        // on MLC/TLC the open word lines are completed first (space invariant 9).
        self.c.host.flushes += 1;
        self.pair(at_ns)
    }

    fn report(&self) -> FtlReport {
        space_report(
            self.name(),
            &self.space,
            &self.c,
            &self.ctrl,
            self.map.len() as u64 * 4,
        )
    }

    space_device_methods!();

    fn gc_informed(&mut self) -> Option<&mut dyn crate::iaa::GcInformed> {
        Some(self)
    }
}

/// Insert Address Assist (`iaa.rs`): victims are committed among the data stream's blocks only
/// (the engine cannot empty journal blocks by its writes).
impl crate::iaa::GcInformed for PageFtl {
    fn flash_page_bytes(&self) -> usize {
        self.space.geometry().page_size_bytes as usize
    }
    fn commit_victims(&mut self, victims: u32) -> u64 {
        self.space.commit_victims(victims, 1 << DATA)
    }
    fn victim_lpns(&mut self, out: &mut Vec<u64>) {
        self.space.committed_keys(out);
    }
}
