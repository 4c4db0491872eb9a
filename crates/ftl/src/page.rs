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
//! SLC cache (`FtlOptions::slc_cache`, `--slc-cache N%`, MLC/TLC chips): the first N% of every
//! plane's blocks run in pSLC mode (lower pages only: a third of a TLC block's pages, half of an
//! MLC block's, at the preset's pSLC program time and endurance) as a second `FlashSpace` over
//! those blocks; the native space runs over the rest, and only the native blocks count towards
//! the exported capacity (`page_mapped_capacity`): the cache is spare room, so every page fits
//! the native blocks once folded. Host writes (and the write buffer's pages) are programmed into
//! the cache. When a write finds the cache's free blocks down to its reserve, or when the host
//! is idle (`background`), the cache block closed longest ago is *folded*: its valid units are
//! read and programmed into the native data stream (packed into whole pages, in the native
//! space's word-line order), the open word lines that hold them are completed (space invariant
//! 9: the pSLC source is the intact copy until then), and the pSLC block is erased. A rewrite
//! or trim of a page still in the cache costs no native program (`absorbed`). A write goes
//! straight to a native block only if no cache block can be freed (every cache block open).
//! The two spaces share the device: the native space holds it, and lends it to the cache space
//! for each of its operations (`FlashSpace::lend_nand`). Sequence numbers come from the native
//! space's counter only, so "newest wins" orders both. A data record written into the cache
//! carries `aux` = 1 ([`PSLC_AUX`]; fold copies 0), so that recovery checks each mapped page
//! against the partition and refuses a device formatted with another share.
//!
//! Controller costs: see `options.rs`.

use nand::{Nand, Nanos, Ppn, Purpose};

use crate::block_device::{
    check_range, check_request, BlockDevice, Counters, FtlError, FtlReport, SlcCacheReport,
    LOGICAL_PAGE_BYTES,
};
use crate::controller::Controller;
use crate::journal::{mapped_bitmap, scan, Journal, UNMAPPED};
use crate::oob::{OobRecord, PageKind};
use crate::options::{
    charge_gc_work, page_mapped_capacity, read_mapped, space_device_methods, space_report,
    FtlOptions, LOOKUP_CYCLES, UPDATE_CYCLES,
};
use crate::space::{FlashSpace, Move, SpaceCounts};
use crate::wbuf::{write_buffer, WriteBuffer};

const DATA: u8 = 0;
const JOURNAL: u8 = 1;
const STREAMS: u8 = 2;

/// OOB `aux` of a data record programmed into a pSLC cache block (module documentation).
pub const PSLC_AUX: u64 = 1;

/// The pSLC write cache (module documentation, "SLC cache").
#[derive(Debug)]
struct SlcCache {
    /// Over the first `blocks_per_plane` blocks of every plane, in pSLC mode; holds a stand-in
    /// device except while it runs an operation.
    space: FlashSpace,
    blocks_per_plane: u32,
    report: SlcCacheReport,
}

/// A device the cache space holds while the native space has the real one (never used).
fn standin() -> Result<Nand, FtlError> {
    let o = [
        "geometry.channels=1".to_string(),
        "geometry.chips_per_channel=1".to_string(),
    ];
    let cfg =
        nand::DeviceConfig::preset("tiny", &o).map_err(|e| FtlError::Config(e.to_string()))?;
    Nand::new(cfg).map_err(|e| FtlError::Config(e.to_string()))
}

/// The cache space's configuration: pSLC over the cache blocks, one stream, blocks taken back
/// by folds only (FIFO order; `reserve` 1 so that writes never collect inside the cache).
fn cache_config(opts: &FtlOptions, blocks_per_plane: u32) -> crate::space::SpaceConfig {
    crate::space::SpaceConfig {
        streams: 1,
        gc: crate::space::GcPolicy::Fifo,
        reserve_blocks: 1,
        background_free_blocks: 1,
        wl_threshold: 0,
        cell_mode: Some(nand::CellMode::Pslc),
        plane_blocks: Some((0, blocks_per_plane)),
        ..opts.space_config(1)
    }
}

/// The native space's configuration beside a cache of `cache` blocks per plane.
fn native_config(
    opts: &FtlOptions,
    cache: u32,
    blocks_per_plane: u32,
) -> crate::space::SpaceConfig {
    crate::space::SpaceConfig {
        plane_blocks: (cache > 0).then_some((cache, blocks_per_plane)),
        ..opts.space_config(STREAMS)
    }
}

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
    /// The pSLC write cache, if `FtlOptions::slc_cache` asks for one.
    cache: Option<SlcCache>,
}

impl SlcCache {
    fn new(space: FlashSpace, blocks_per_plane: u32) -> SlcCache {
        let g = space.geometry();
        let blocks = blocks_per_plane * g.planes_per_die * g.dies();
        let share = f64::from(blocks) / f64::from(g.blocks());
        SlcCache {
            space,
            blocks_per_plane,
            report: SlcCacheReport {
                blocks,
                share,
                ..SlcCacheReport::default()
            },
        }
    }

    /// Whether location `loc` lies in a cache block.
    fn holds(&self, loc: u64) -> bool {
        let g = self.space.geometry();
        let b = g.block_of(self.space.page_of(Ppn(loc))).0;
        crate::space::in_plane_blocks(g, b, Some((0, self.blocks_per_plane)))
    }

    /// Whether a write can go into the cache without collecting inside it.
    fn has_room(&self) -> bool {
        self.space.free_blocks() > self.space.reserve_blocks()
    }
}

/// Runs `f` on the cache space with the device lent to it (the native space holds it between
/// operations), and gives the device back whatever `f` returns.
fn on_cache<R>(
    native: &mut FlashSpace,
    cache: &mut SlcCache,
    f: impl FnOnce(&mut FlashSpace, &mut FlashSpace) -> R,
) -> R {
    native.lend_nand(&mut cache.space);
    let r = f(&mut cache.space, native);
    native.lend_nand(&mut cache.space);
    r
}

/// Applies the cache space's moves to the map (pages moved off a cache block whose program
/// failed; the cache never collects otherwise).
fn apply_cache_moves(map: &mut [u32], c: &mut SlcCache) {
    if c.space.has_moves() {
        let mut moves = Vec::new();
        c.space.take_moves(&mut moves);
        for m in &moves {
            apply_move(map, m);
        }
    }
}

/// Drops the copy at `old` (a logical page's previous location) in the space that holds it.
fn drop_copy(native: &mut FlashSpace, cache: Option<&mut SlcCache>, old: u32) {
    match cache {
        Some(c) if c.holds(u64::from(old)) => {
            c.space.invalidate(Ppn(u64::from(old)));
            c.report.absorbed += 1;
        }
        _ => native.invalidate(Ppn(u64::from(old))),
    }
}

impl PageFtl {
    /// A fresh FTL on `nand` (formatted).
    pub fn new(nand: Nand, opts: &FtlOptions) -> Result<PageFtl, FtlError> {
        opts.check_slc_cache("page", nand.config())?;
        let capacity = page_mapped_capacity(&nand, opts, 1)?;
        let at = nand.now_ns();
        let g = nand.geometry().clone();
        let k = opts.slc_cache_blocks_per_plane(&g);
        let (mut space, t) =
            FlashSpace::format(nand, native_config(opts, k, g.blocks_per_plane), at)?;
        let cache = if k > 0 {
            let real = space.replace_nand(standin()?);
            let (mut cs, _) = FlashSpace::format(real, cache_config(opts, k), t)?;
            space.replace_nand(cs.replace_nand(standin()?));
            Some(SlcCache::new(cs, k))
        } else {
            None
        };
        let page_bytes = space.unit_bytes();
        Ok(PageFtl {
            cache,
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
        opts.check_slc_cache("page", nand.config())?;
        let capacity = page_mapped_capacity(&nand, opts, 1)?;
        let at = nand.now_ns();
        let g = nand.geometry().clone();
        let k = opts.slc_cache_blocks_per_plane(&g);
        let rec = scan(&mut nand, at, capacity, 0)?;
        let upp = u64::from(crate::space::units_per_page(&g));
        let cached = |loc: u64| {
            k > 0 && crate::space::in_plane_blocks(&g, g.block_of(Ppn(loc / upp)).0, Some((0, k)))
        };
        // Each mapped page must lie where its record says it was written (module
        // documentation): a cache write in a cache block, anything else in a native one.
        for (l, (&p, &aux)) in rec.map.iter().zip(&rec.map_aux).enumerate() {
            if p != UNMAPPED && (aux == PSLC_AUX) != cached(u64::from(p)) {
                return Err(FtlError::Recovery(format!(
                    "logical page {l} was written {} but lies in a {} block: the device was formatted with another --slc-cache share (this open asks for {} blocks per plane)",
                    if aux == PSLC_AUX { "into the pSLC cache" } else { "to native blocks" },
                    if cached(u64::from(p)) { "cache" } else { "native" },
                    k
                )));
            }
        }
        let (live_cache, live): (Vec<_>, Vec<_>) = rec
            .live_pages(|_| DATA, JOURNAL)
            .into_iter()
            .partition(|p| cached(p.ppn.0));
        let (mut space, t) = FlashSpace::restore(
            nand,
            native_config(opts, k, g.blocks_per_plane),
            rec.done_ns,
            &live,
            rec.next_seq,
        )?;
        let cache = if k > 0 {
            let real = space.replace_nand(standin()?);
            let (mut cs, _) =
                FlashSpace::restore(real, cache_config(opts, k), t, &live_cache, rec.next_seq)?;
            space.replace_nand(cs.replace_nand(standin()?));
            Some(SlcCache::new(cs, k))
        } else {
            None
        };
        let page_bytes = space.unit_bytes();
        let mut ftl = PageFtl {
            cache,
            map: rec.map,
            ctrl: Controller::new(&opts.controller),
            journal: Journal::recovered(capacity, page_bytes, JOURNAL, rec.journal),
            c: Counters::new(space.nand()),
            charged: space.counts(),
            wbuf: write_buffer(&space, opts),
            space,
        };
        ftl.absorb(); // pages moved off bad blocks during the restore
        ftl.absorb_cache();
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

    /// Applies the cache space's moves (pages moved off a block that failed a program).
    fn absorb_cache(&mut self) {
        if let Some(c) = self.cache.as_mut() {
            apply_cache_moves(&mut self.map, c);
        }
    }

    /// How many of the `max` logical pages from `l` on are one flash read: mapped side by side
    /// in one flash page, none of them waiting in the write buffer (at least 1).
    fn run_at(&self, l: usize, max: usize) -> usize {
        if self.map[l] == UNMAPPED {
            return 1;
        }
        let buffered = |k: usize| self.wbuf.as_ref().is_some_and(|wb| wb.holds(k as u64));
        let units = (l..l + max)
            .take_while(|&k| self.map[k] != UNMAPPED && (k == l || !buffered(k)))
            .map(|k| u64::from(self.map[k]));
        self.space.run_in_page(units)
    }

    /// Runs `f` with the cache taken out of `self` (so that `f` may use `self` whole), and puts
    /// it back whatever `f` returns.
    fn with_cache<R>(&mut self, f: impl FnOnce(&mut Self, Option<&mut SlcCache>) -> R) -> R {
        let mut c = self.cache.take();
        let r = f(self, c.as_mut());
        self.cache = c;
        r
    }

    /// Folds cache blocks, oldest first, issued at `at_ns`, until a write can go into the
    /// cache again (module documentation). The write does not wait for the folds: they run on
    /// the dies beside it ("background" in virtual time), and only delay it where they share a die.
    fn fold_if_full(&mut self, c: &mut SlcCache, at_ns: Nanos) -> Result<(), FtlError> {
        while !c.has_room() {
            if self.fold_one(c, at_ns, false)?.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// Folds the cache block closed longest ago: reads each of its pages that holds a valid
    /// unit once, programs the valid units packed into whole native pages (keeping their
    /// records' key and sequence number), completes the word lines that hold them, and erases
    /// the pSLC block. Returns when the erase is done, `None` if no cache block is closed.
    fn fold_one(
        &mut self,
        c: &mut SlcCache,
        at_ns: Nanos,
        idle: bool,
    ) -> Result<Option<Nanos>, FtlError> {
        let Some(pbn) = c.space.take_oldest_closed() else {
            return Ok(None);
        };
        let units = c.space.valid_units(pbn);
        let upp = u64::from(self.space.units_per_page());
        let ub = self.space.unit_bytes();
        let g = self.space.geometry().clone();
        let mut page_data = vec![0u8; g.page_size_bytes as usize];
        let mut page_oob = vec![0xFFu8; g.oob_size_bytes as usize];
        // (old location, record, data) of every valid unit, read a page at a time.
        let mut got: Vec<(Ppn, OobRecord, Vec<u8>)> = Vec::with_capacity(units.len());
        let mut read_done = at_ns;
        on_cache(&mut self.space, c, |cs, _| -> Result<(), FtlError> {
            let mut i = 0;
            while i < units.len() {
                let page = Ppn(units[i].0 .0 / upp);
                let r =
                    cs.nand_mut()
                        .read(at_ns, page, &mut page_data, &mut page_oob, Purpose::Gc)?;
                read_done = read_done.max(r.done_ns);
                while i < units.len() && units[i].0 .0 / upp == page.0 {
                    let (loc, key) = units[i];
                    let slot = (loc.0 % upp) as usize;
                    let rec = OobRecord::decode(
                        &page_oob[slot * crate::oob::OOB_RECORD_BYTES
                            ..(slot + 1) * crate::oob::OOB_RECORD_BYTES],
                    )
                    .filter(|r| r.kind == PageKind::Data && r.key == key)
                    .ok_or_else(|| {
                        FtlError::Recovery(format!(
                            "folding pSLC location {}: its OOB record does not name logical page {key}",
                            loc.0
                        ))
                    })?;
                    let d = if upp == 1 {
                        page_data[..ub].to_vec()
                    } else {
                        page_data[slot * ub..(slot + 1) * ub].to_vec()
                    };
                    got.push((loc, rec, d));
                    i += 1;
                }
            }
            Ok(())
        })?;
        let mut end = read_done;
        for chunk in got.chunks(upp as usize) {
            let recs: Vec<(OobRecord, &[u8])> = chunk
                .iter()
                .map(|(_, r, d)| (OobRecord { aux: 0, ..*r }, d.as_slice()))
                .collect();
            let (first, done) = self
                .space
                .write_units(read_done, DATA, &recs, Purpose::Gc)?;
            end = end.max(done);
            // Moves first: GC may have moved native pages (invariant 1).
            self.absorb();
            for (i, (old, r, _)) in chunk.iter().enumerate() {
                let e = &mut self.map[r.key as usize];
                debug_assert_eq!(u64::from(*e), old.0, "folded unit is not the mapped copy");
                *e = (first.0 + i as u64) as u32;
                c.space.invalidate(*old);
            }
            c.report.fold_programs += 1;
        }
        c.report.folded_units += got.len() as u64;
        // The pSLC block is the intact copy until the word lines of its copies are complete
        // (space invariant 9).
        let pads = self.space.counts().pad_pages;
        end = end.max(self.space.pair_word_lines(end)?);
        self.absorb();
        c.report.fold_pads += self.space.counts().pad_pages - pads;
        let erased = on_cache(&mut self.space, c, |cs, _| {
            cs.erase_emptied(end, pbn, Purpose::Gc)
        })?;
        c.report.folds += 1;
        if idle {
            c.report.idle_folds += 1;
        }
        self.ctrl.charge(
            at_ns,
            crate::options::VICTIM_CYCLES + got.len() as u64 * crate::options::MOVE_CYCLES,
        );
        self.charge_background(at_ns);
        Ok(Some(erased))
    }

    /// Programs one logical page for the host: into the cache if it has room (after folding),
    /// else into the native data stream. Maps it and drops its previous copy.
    fn program_one(
        &mut self,
        c: Option<&mut SlcCache>,
        at_ns: Nanos,
        l: u64,
        chunk: &[u8],
    ) -> Result<Nanos, FtlError> {
        let seq = self.space.alloc_seq();
        let mut cache = c;
        let mut cached = false;
        if let Some(c) = cache.as_deref_mut() {
            self.fold_if_full(c, at_ns)?;
            cached = c.has_room();
        }
        let (ppn, done) = match cache.as_deref_mut() {
            Some(c) if cached => {
                let rec = OobRecord::new(PageKind::Data, l, seq, PSLC_AUX);
                let r = on_cache(&mut self.space, c, |cs, _| {
                    cs.write(at_ns, 0, &rec, chunk, Purpose::Host)
                })?;
                c.report.host_writes_cached += 1;
                r
            }
            _ => {
                let r = self.space.write(
                    at_ns,
                    DATA,
                    &OobRecord::new(PageKind::Data, l, seq, 0),
                    chunk,
                    Purpose::Host,
                )?;
                if let Some(c) = cache.as_deref_mut() {
                    c.report.host_writes_direct += 1;
                }
                r
            }
        };
        // Moves first: GC may have moved this page's previous copy (invariant 1).
        self.absorb();
        if let Some(c) = cache.as_deref_mut() {
            apply_cache_moves(&mut self.map, c);
        }
        let old = std::mem::replace(&mut self.map[l as usize], ppn.0 as u32);
        if old != UNMAPPED {
            drop_copy(&mut self.space, cache, old);
        }
        self.charge_background(at_ns);
        Ok(done)
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
        if self.wbuf.as_ref().is_none_or(|wb| wb.is_empty()) {
            return Ok(at_ns);
        }
        self.with_cache(|f, c| f.program_buffer_into(c, at_ns))
    }

    /// `program_buffer` into the cache if there is one with room (after folding), else into
    /// the native data stream.
    fn program_buffer_into(
        &mut self,
        mut cache: Option<&mut SlcCache>,
        at_ns: Nanos,
    ) -> Result<Nanos, FtlError> {
        let mut cached = false;
        if let Some(c) = cache.as_deref_mut() {
            self.fold_if_full(c, at_ns)?;
            cached = c.has_room();
        }
        let Some(wb) = self.wbuf.as_mut() else {
            return Ok(at_ns);
        };
        let programmed = match cache.as_deref_mut() {
            Some(c) if cached => {
                let native = &mut self.space;
                let first_seq = native.alloc_seqs(wb.len() as u64);
                native.lend_nand(&mut c.space);
                let r = crate::wbuf::program_gathered_into(
                    wb,
                    &mut c.space,
                    0,
                    at_ns,
                    PSLC_AUX,
                    first_seq,
                );
                native.lend_nand(&mut c.space);
                let r = r?;
                if let Some((lpns, _, _)) = &r {
                    c.report.host_writes_cached += lpns.len() as u64;
                }
                r
            }
            _ => {
                let r = crate::wbuf::program_gathered(wb, &mut self.space, DATA, at_ns)?;
                if let (Some(c), Some((lpns, _, _))) = (cache.as_deref_mut(), &r) {
                    c.report.host_writes_direct += lpns.len() as u64;
                }
                r
            }
        };
        let Some((lpns, locs, done)) = programmed else {
            return Ok(at_ns);
        };
        // Moves first: GC may have moved these pages' previous copies (invariant 1).
        self.absorb();
        if let Some(c) = cache.as_deref_mut() {
            apply_cache_moves(&mut self.map, c);
        }
        for (i, l) in lpns.into_iter().enumerate() {
            let old = std::mem::replace(&mut self.map[l as usize], locs[i].0 as u32);
            if old != UNMAPPED {
                // Several pages (a multi-plane batch): each old copy is pinned to its own
                // replacement's word line (space invariant 9a), not to the last page's.
                if !cached {
                    self.space.note_replacement(locs[i]);
                }
                drop_copy(&mut self.space, cache.as_deref_mut(), old);
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
    /// With a pSLC cache, idle time first folds up to `max_victims` of its closed blocks.
    pub fn background(&mut self, at_ns: Nanos, max_victims: u32) -> Result<Nanos, FtlError> {
        let mut t = at_ns;
        if self.cache.is_some() {
            t = self.with_cache(|f, c| -> Result<Nanos, FtlError> {
                let c = c.expect("checked above");
                let mut t = at_ns;
                for _ in 0..max_victims {
                    match f.fold_one(c, t, true)? {
                        Some(done) => t = done,
                        None => break,
                    }
                }
                Ok(t)
            })?;
        }
        let t = t.max(self.space.background_gc(t, max_victims)?);
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
        let pages = buf.len() / LOGICAL_PAGE_BYTES;
        let mut i = 0;
        while i < pages {
            let mut t = self.ctrl.charge(at_ns, LOOKUP_CYCLES);
            self.c.host.reads += 1;
            let chunk = &mut buf[i * LOGICAL_PAGE_BYTES..(i + 1) * LOGICAL_PAGE_BYTES];
            let l = lpn as usize + i;
            let p = self.map[l];
            // The gathered page, or a page whose program is in flight (`wbuf.rs` invariants 2
            // and 4): the controller has the bytes.
            if self
                .wbuf
                .as_ref()
                .is_some_and(|wb| wb.read(l as u64, chunk))
                || crate::wbuf::read_in_flight(self.wbuf.as_ref(), p, t, chunk)
            {
                end = end.max(t);
                i += 1;
                continue;
            }
            // The next pages stored side by side in the same flash page come with this one's
            // array read (`FlashSpace::read_units`), once the controller has looked them up.
            let n = self.run_at(l, pages - i);
            for _ in 1..n {
                t = self.ctrl.charge(at_ns, LOOKUP_CYCLES);
                self.c.host.reads += 1;
            }
            let run = &mut buf[i * LOGICAL_PAGE_BYTES..(i + n) * LOGICAL_PAGE_BYTES];
            let done = if n == 1 {
                read_mapped(&mut self.space, t, p, run)?
            } else {
                self.space
                    .read_units(t, Ppn(u64::from(p)), run, Purpose::Host)?
            };
            end = end.max(done);
            i += n;
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
            let done = self.with_cache(|f, c| f.program_one(c, t, l, chunk))?;
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
                drop_copy(&mut self.space, self.cache.as_mut(), old);
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
        let mut r = space_report(
            self.name(),
            &self.space,
            &self.c,
            &self.ctrl,
            self.map.len() as u64 * 4,
        );
        r.slc_cache = self.cache.as_ref().map(|c| {
            let mut s = c.report;
            let host = s.host_writes_cached + s.host_writes_direct;
            s.hit_rate = if host == 0 {
                0.0
            } else {
                s.host_writes_cached as f64 / host as f64
            };
            s
        });
        r
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
