//! `dftl`: the demand-based page-mapped FTL of Gupta, Kim and Urgaonkar (DFTL, ASPLOS 2009).
//!
//! The full page map lives on flash in *translation pages* (entries of 4 bytes, so 1024 per
//! 4 KiB page), kept in their own blocks (stream 1). The controller holds:
//! - the Cached Mapping Table (CMT): a configurable fraction of the entries, LRU-replaced;
//! - the Global Translation Directory (GTD): where each translation page is, 4 bytes each.
//!
//! A lookup that misses the CMT reads the entry's translation page (one flash read) and caches
//! the entry. When the CMT is full, the LRU entry is evicted; if it is dirty, its translation
//! page is rewritten (read-modify-write: one read, one program) and, as DFTL's *batch update*,
//! every other dirty cached entry of that translation page goes with it and becomes clean.
//!
//! GC of data blocks reports the pages it moved; entries cached in the CMT are updated there
//! (and become dirty); the others are fixed *lazily in a batch*: after the operation that
//! collected, the moved entries are grouped by translation page and each page is rewritten
//! once. GC of translation blocks only updates the GTD. Both are the shared `FlashSpace`'s GC.
//! FLUSH writes no mapping back, as in DFTL's paper: nothing durable depends on translation
//! pages (recovery rebuilds the map from the OOB scan). `FtlOptions::dftl_flush_writeback`
//! (`--dftl-flush-writeback`) makes FLUSH write every dirty cached entry back, batched per
//! translation page, as a controller that wants a short scan after a power cut would; on a
//! single-terminal OLTP run every commit is a FLUSH, and the write-back then dominates DFTL's
//! translation writes (docs/ftl.md).
//!
//! Streams: 0 host data (striped), 1 translation pages, 2 journal (trim records, checkpoints).
//!
//! Translation page layout: 1024 little-endian u32 entries; entry i of translation page v is
//! logical page v x 1024 + i; `0xFFFF_FFFF` = unmapped (also past the logical capacity).
//!
//! Emulator note: `flash_map` holds, in host memory, the entries as last written to flash, so
//! that DFTL also runs on metadata-only stores (which keep no page contents). The controller
//! model never consults it without issuing (and being charged for) the flash read that would
//! deliver it. It is not part of `mapping_bytes`.
//!
//! Invariants:
//! 1. For every logical page l, the current mapping is the CMT entry if l is cached, else
//!    `flash_map[l]`, and it equals the page the space's reverse map holds l's valid copy in.
//!    (Between a GC and the next `settle`, uncached moves wait in `pending`.)
//! 2. `flash_map[v x 1024 .. (v+1) x 1024]` is the content of the translation page `gtd[v]`
//!    (or all unmapped if `gtd[v]` is unmapped), except while `v` waits in `tbuf`: then it is
//!    the content `v` will be programmed with, and `gtd[v]` its previous copy, still valid.
//! 5. On flash pages of several units, translation pages are written `units_per_page` to a
//!    flash page: a rewritten translation page waits in the controller's DRAM (`tbuf`) until
//!    that many are gathered or FLUSH comes. A lookup of a waiting page reads no flash. Nothing
//!    durable depends on them (recovery rebuilds the map from the OOB scan), so a power cut
//!    may lose `tbuf`.
//! 3. No CMT insertion, lookup of `flash_map`, or invalidation by mapping happens while
//!    `pending` is not empty.
//! 4. The CMT never holds more than its capacity; each entry is in the LRU list once and in its
//!    translation page's list once.
//! 6. Bounded GC mapping fixes: the translation pages `settle` writes for GC's fixes take at
//!    most three quarters of the units GC freed (`FIX_SHARE_OF_FREED`, a credit topped up from the space's
//!    GC counts), plus `SETTLE_DRAIN_TPAGES` per call that each retire at least
//!    `DEFERRED_PER_TPAGE` fixes; fixes left then wait in `deferred` (RAM, like dirty CMT entries: nothing durable depends on translation
//!    pages), which holds the current mapping of uncached pages it names. Any write of a
//!    translation page takes its deferred fixes with it; a lookup that misses takes the fix
//!    into the CMT as a dirty entry. No logical page is in both `deferred` and the CMT. Without
//!    the bound, GC with FIFO or random victims at low spare fed itself: each translation page
//!    written for the fixes of one GC made the next GC, which moved nearly full blocks of pages
//!    on other translation pages (5% spare: WAF 180-275 on a 16k-page device).
//!
//! Controller costs (cycles; DRAM_ACCESS = 40, see `options.rs`):
//!
//! | operation                        | cycles | accounting                                        |
//! |----------------------------------|--------|---------------------------------------------------|
//! | CMT lookup, hit                  | 150    | 30 instr. + 3 DRAM: hash bucket, entry, LRU neighbours |
//! | CMT miss bookkeeping             | 210    | 50 instr. + 4 DRAM: GTD entry, insertion, LRU tail, free slot |
//! | data write update                | 160    | 40 instr. + 3 DRAM: old page's reverse map and counter, new reverse map |
//! | entry written back (batch)       | 50     | 10 instr. + 1 DRAM per entry                      |
//! | translation page (de)serialise   | 612    | a 4 KiB copy at 8 bytes/cycle + 100 instr.        |
//! | GC move, victim selection        | as page FTL (`options.rs`)                          |
//!
//! The flash side described here (translation pages, GTD, lazy GC fixes, trims, checkpoints,
//! recovery) is `DftlCore`, generic over its cached mapping table ([`MapCache`]): [`Dftl`] is it
//! with the CMT above; `dftl_orig.rs` plugs in the two-level cache of the DFTL that NoFTL
//! (VLDB 2013) measured, with its own costs and flash habits ([`Variant`]).

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use nand::{Nand, NandError, Nanos, Ppn, Purpose};

use crate::block_device::{
    check_range, check_request, BlockDevice, Counters, FtlError, FtlReport, LOGICAL_PAGE_BYTES,
};
use crate::controller::{Controller, ControllerConfig};
use crate::journal::{scan, Journal, UNMAPPED};
use crate::oob::{OobRecord, PageKind};
use crate::options::{
    charge_space_work, page_mapped_capacity, read_mapped, space_device_methods, space_report,
    FtlOptions, SpaceWorkCycles, DRAM_ACCESS_CYCLES, LOOKUP_CYCLES,
};
use crate::space::{FlashSpace, LivePage, Move, SpaceConfig, SpaceCounts};

const DATA: u8 = 0;
const TRANSLATION: u8 = 1;
const JOURNAL: u8 = 2;
/// Streams of a DFTL's space: host data, translation pages, journal.
pub(crate) const STREAMS: u8 = 3;

const HIT_CYCLES: u64 = 30 + 3 * DRAM_ACCESS_CYCLES;
const MISS_CYCLES: u64 = 50 + 4 * DRAM_ACCESS_CYCLES;
const DATA_UPDATE_CYCLES: u64 = 40 + 3 * DRAM_ACCESS_CYCLES;
const WRITEBACK_ENTRY_CYCLES: u64 = 10 + DRAM_ACCESS_CYCLES;
const TPAGE_COPY_CYCLES: u64 = 4096 / 8 + 100;
/// Bytes per translation entry and per GTD entry.
pub(crate) const ENTRY_BYTES: u64 = 4;
/// Bytes per cached entry as DFTL counts them: logical and physical page number.
const CMT_ENTRY_BYTES: u64 = 8;
const NIL: u32 = u32::MAX;
/// Of the units GC frees, the share (numerator, denominator) that translation-page writes for
/// its mapping fixes may take (invariant 6): the rest is left for the host, so the fixes cannot
/// feed GC without end; GC's work per host write is at most 1 / (1 - share) times what the
/// data alone would cost. Three quarters binds only where the fixes ran away: greedy GC at 15%
/// spare with a 2% cache gives them about half (`dftl_sanity.rs`), FIFO at 5% gave them 95%.
const FIX_SHARE_OF_FREED: (u64, u64) = (3, 4);
/// Translation pages `settle` writes, beyond its passes, to bring `deferred` back under its cap.
const SETTLE_DRAIN_TPAGES: u64 = 2;
/// The cap of `deferred` per translation page of the device: the one with the most deferred
/// fixes then holds at least this many, so each drain write retires at least this many.
const DEFERRED_PER_TPAGE: u64 = 8;

/// A multiplicative hasher for logical page numbers (SipHash is needlessly slow here).
#[derive(Default, Clone, Copy)]
struct LpnHasher(u64);

impl Hasher for LpnHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, i: u64) {
        let x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = x ^ (x >> 29);
    }
}

/// A mapping evicted from a cache to make room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    pub lpn: u64,
    pub ppn: u32,
    pub dirty: bool,
}

/// What differs between DFTL variants outside their cache: where the mapping work runs, what it
/// costs, and how the variant treats the flash.
#[derive(Clone, Debug)]
pub struct Variant {
    /// Name prefix in results ("dftl", "dftl-orig").
    pub kind: &'static str,
    /// The processor doing the mapping work (device controller or host).
    pub clock: ControllerConfig,
    /// The mapping work runs on the host (reported as `host_cpu_us` too).
    pub on_host: bool,
    pub space: SpaceConfig,
    /// Cycles of the space's GC work (page moves, victim and free-block searches).
    pub space_work: SpaceWorkCycles,
    /// Per page written: the data write's map update.
    pub data_update_cycles: u64,
    /// Per entry copied into a translation page written back.
    pub writeback_entry_cycles: u64,
    /// Per translation page (de)serialised.
    pub tpage_copy_cycles: u64,
    /// Per page trimmed: its lookup.
    pub trim_lookup_cycles: u64,
    /// Every translation page is written (all entries unmapped) when the device is formatted,
    /// so that every miss reads one (the original DFTL's format); else a translation page is
    /// first written when an entry of it is written back.
    pub writes_tpages_at_format: bool,
    /// A superseded copy (a data page overwritten, a translation page rewritten) is marked
    /// invalid in its OOB by a partial program (`oob::INVALID_MARK`), as an FTL that keeps page
    /// status in the OOB does.
    pub marks_invalid: bool,
}

/// The cached mapping table of a DFTL variant: which mappings are cached, what a hit, a miss and
/// an eviction do and cost. Slots (`u32`) name cached entries until they are evicted.
pub trait MapCache: std::fmt::Debug + Send + Sized {
    /// The variant's costs and habits for `opts` on a DFTL of `capacity` logical pages; bad
    /// options are refused here, before the device is touched.
    fn variant(opts: &FtlOptions, nand: &Nand, capacity: u64) -> Result<Variant, FtlError>;
    /// The empty cache for `opts` on a DFTL of `capacity` logical pages in `tpages` translation
    /// pages of `per_tpage` entries.
    fn build(opts: &FtlOptions, capacity: u64, tpages: u64, per_tpage: u64) -> Self;
    /// Entries it can hold.
    fn capacity(&self) -> usize;
    /// Entries it holds.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The slot of `lpn`, if cached (no change of recency).
    fn get(&self, lpn: u64) -> Option<u32>;
    fn ppn(&self, s: u32) -> u32;
    fn lpn(&self, s: u32) -> u64;
    /// Points slot `s` at `ppn` and marks it dirty; returns the page it pointed at.
    fn remap(&mut self, s: u32, ppn: u32) -> u32;
    /// A lookup that hit slot `s`: updates recency; returns the entry's slot now and the cycles.
    fn hit(&mut self, s: u32) -> (u32, u64);
    /// A lookup that missed: makes room for one entry (evicting one if full) and returns the
    /// evicted entry, if any, and the cycles of the miss bookkeeping.
    fn make_room(&mut self) -> (Option<Evicted>, u64);
    /// Caches `lpn -> ppn`, clean (room was made).
    fn insert(&mut self, lpn: u64, ppn: u32) -> u32;
    /// The cached dirty entries of translation page `v` that are written back with it: copied
    /// to `flash_map` and marked clean. Returns how many.
    fn write_back_with(&mut self, v: u64, flash_map: &mut [u32]) -> u64;
    /// The translation pages FLUSH writes back, in order.
    fn flush_tpages(&self, per_tpage: u64) -> Vec<u64>;
    /// Host or controller RAM for mapping, bytes, with a GTD of `tpages` entries.
    fn mapping_bytes(&self, tpages: u64) -> u64;
    /// What linear min-age scans visited so far (zeros for a cache that does not scan).
    fn scan_counts(&self) -> ScanCounts {
        ScanCounts::default()
    }
}

/// What a mapping cache's linear min-age scans visited (`dftl-orig`; zeros for every other cache).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanCounts {
    /// Array entries visited.
    pub entries: u64,
    /// Of those, entries visited by scans whose working set did not fit the host's L3.
    pub entries_beyond_l3: u64,
    /// The largest working set of one scan, bytes.
    pub footprint_bytes_max: u64,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    lpn: u64,
    ppn: u32,
    dirty: bool,
    prev: u32,
    next: u32,
    tprev: u32,
    tnext: u32,
}

/// The Cached Mapping Table: a slab of entries, a hash index, an LRU list and, per
/// translation page, the list of its dirty cached entries (for batch updates).
#[derive(Debug)]
pub struct Cmt {
    entries: Vec<Entry>,
    index: HashMap<u64, u32, BuildHasherDefault<LpnHasher>>,
    free: Vec<u32>,
    mru: u32,
    lru: u32,
    by_tpage: Vec<u32>,
    /// With the FLUSH write-back only (else empty): dirty cached entries per translation page,
    /// and the pages with any, in order. FLUSH (on every sync, so on every log force under the
    /// engine) visits those, not the whole cache.
    dirty_in_tpage: Vec<u32>,
    dirty_tpages: std::collections::BTreeSet<u64>,
    capacity: usize,
    per_tpage: u64,
    /// FLUSH writes the dirty cached entries back (`FtlOptions::dftl_flush_writeback`).
    flush_writes_back: bool,
}

impl Cmt {
    fn new(capacity: usize, tpages: u64, per_tpage: u64, flush_writes_back: bool) -> Self {
        Cmt {
            entries: Vec::with_capacity(capacity),
            index: HashMap::with_capacity_and_hasher(capacity, BuildHasherDefault::default()),
            free: Vec::new(),
            mru: NIL,
            lru: NIL,
            by_tpage: vec![NIL; tpages as usize],
            dirty_in_tpage: if flush_writes_back {
                vec![0; tpages as usize]
            } else {
                Vec::new()
            },
            dirty_tpages: std::collections::BTreeSet::new(),
            capacity,
            per_tpage,
            flush_writes_back,
        }
    }

    /// Counts an entry of translation page `tp` turning dirty (`+1`) or clean (`-1`).
    fn count_dirty(&mut self, tp: u64, turned_dirty: bool) {
        // Only FLUSH's write-back asks which pages hold dirty entries: without it, the set's
        // upkeep on every remap and write-back would be work for nobody.
        if !self.flush_writes_back {
            return;
        }
        let n = &mut self.dirty_in_tpage[tp as usize];
        if turned_dirty {
            *n += 1;
            if *n == 1 {
                self.dirty_tpages.insert(tp);
            }
        } else {
            debug_assert!(*n > 0, "a clean page has no dirty entry to clean");
            *n -= 1;
            if *n == 0 {
                self.dirty_tpages.remove(&tp);
            }
        }
    }

    fn unlink_lru(&mut self, s: u32) {
        let Entry { prev, next, .. } = self.entries[s as usize];
        if prev == NIL {
            self.mru = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next == NIL {
            self.lru = prev;
        } else {
            self.entries[next as usize].prev = prev;
        }
    }

    fn push_mru(&mut self, s: u32) {
        self.entries[s as usize].prev = NIL;
        self.entries[s as usize].next = self.mru;
        if self.mru != NIL {
            self.entries[self.mru as usize].prev = s;
        } else {
            self.lru = s;
        }
        self.mru = s;
    }

    #[inline]
    fn touch(&mut self, s: u32) {
        if self.mru != s {
            self.unlink_lru(s);
            self.push_mru(s);
        }
    }

    fn insert(&mut self, lpn: u64, ppn: u32) -> u32 {
        debug_assert!(self.len() < self.capacity && self.get(lpn).is_none());
        let e = Entry {
            lpn,
            ppn,
            dirty: false,
            prev: NIL,
            next: NIL,
            tprev: NIL,
            tnext: NIL,
        };
        let s = match self.free.pop() {
            Some(s) => {
                self.entries[s as usize] = e;
                s
            }
            None => {
                self.entries.push(e);
                (self.entries.len() - 1) as u32
            }
        };
        self.push_mru(s);
        self.index.insert(lpn, s);
        s
    }

    fn remove(&mut self, s: u32) {
        self.unlink_lru(s);
        let Entry {
            lpn,
            tprev,
            tnext,
            dirty,
            ..
        } = self.entries[s as usize];
        if dirty {
            self.count_dirty(lpn / self.per_tpage, false);
            if tprev == NIL {
                self.by_tpage[(lpn / self.per_tpage) as usize] = tnext;
            } else {
                self.entries[tprev as usize].tnext = tnext;
            }
            if tnext != NIL {
                self.entries[tnext as usize].tprev = tprev;
            }
        }
        self.index.remove(&lpn);
        self.free.push(s);
    }
}

impl MapCache for Cmt {
    fn variant(opts: &FtlOptions, _nand: &Nand, _capacity: u64) -> Result<Variant, FtlError> {
        Ok(Variant {
            // Results name the write-back, so that rows with it are never mistaken for DFTL's.
            kind: if opts.dftl_flush_writeback {
                "dftl-flushwb"
            } else {
                "dftl"
            },
            clock: opts.controller.clone(),
            on_host: false,
            space: opts.space_config(STREAMS),
            space_work: SpaceWorkCycles::page_ftl(opts.gc),
            data_update_cycles: DATA_UPDATE_CYCLES,
            writeback_entry_cycles: WRITEBACK_ENTRY_CYCLES,
            tpage_copy_cycles: TPAGE_COPY_CYCLES,
            trim_lookup_cycles: LOOKUP_CYCLES,
            writes_tpages_at_format: false,
            marks_invalid: false,
        })
    }
    fn build(opts: &FtlOptions, capacity: u64, tpages: u64, per_tpage: u64) -> Self {
        Cmt::new(
            cached_entries(opts, capacity),
            tpages,
            per_tpage,
            opts.dftl_flush_writeback,
        )
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn len(&self) -> usize {
        self.index.len()
    }
    #[inline]
    fn get(&self, lpn: u64) -> Option<u32> {
        self.index.get(&lpn).copied()
    }
    fn ppn(&self, s: u32) -> u32 {
        self.entries[s as usize].ppn
    }
    fn lpn(&self, s: u32) -> u64 {
        self.entries[s as usize].lpn
    }
    fn remap(&mut self, s: u32, ppn: u32) -> u32 {
        let e = &mut self.entries[s as usize];
        let turned_dirty = !e.dirty;
        e.dirty = true;
        let old = std::mem::replace(&mut e.ppn, ppn);
        let tp = e.lpn / self.per_tpage;
        if turned_dirty {
            self.count_dirty(tp, true);
            // Only dirty entries are on their translation page's list (the batch update visits
            // those and no clean one).
            let head = self.by_tpage[tp as usize];
            let e = &mut self.entries[s as usize];
            e.tprev = NIL;
            e.tnext = head;
            if head != NIL {
                self.entries[head as usize].tprev = s;
            }
            self.by_tpage[tp as usize] = s;
        }
        old
    }
    fn hit(&mut self, s: u32) -> (u32, u64) {
        self.touch(s);
        (s, HIT_CYCLES)
    }
    /// Evicts the LRU entry when full.
    fn make_room(&mut self) -> (Option<Evicted>, u64) {
        if self.len() < self.capacity {
            return (None, HIT_CYCLES + MISS_CYCLES);
        }
        let s = self.lru;
        debug_assert!(s != NIL);
        let Entry {
            lpn, ppn, dirty, ..
        } = self.entries[s as usize];
        self.remove(s);
        (Some(Evicted { lpn, ppn, dirty }), HIT_CYCLES + MISS_CYCLES)
    }
    fn insert(&mut self, lpn: u64, ppn: u32) -> u32 {
        Cmt::insert(self, lpn, ppn)
    }
    /// Every dirty cached entry of the page (DFTL's batch update).
    fn write_back_with(&mut self, v: u64, flash_map: &mut [u32]) -> u64 {
        let mut n = 0;
        let mut s = std::mem::replace(&mut self.by_tpage[v as usize], NIL);
        while s != NIL {
            let e = &mut self.entries[s as usize];
            debug_assert!(
                e.dirty,
                "only dirty entries are on a translation page's list"
            );
            flash_map[e.lpn as usize] = e.ppn;
            e.dirty = false;
            n += 1;
            s = std::mem::replace(&mut e.tnext, NIL);
            e.tprev = NIL;
        }
        if self.flush_writes_back {
            debug_assert_eq!(u64::from(self.dirty_in_tpage[v as usize]), n);
            if n > 0 {
                self.dirty_in_tpage[v as usize] = 0;
                self.dirty_tpages.remove(&v);
            }
        }
        n
    }
    /// Every translation page with a dirty cached entry.
    fn flush_tpages(&self, per_tpage: u64) -> Vec<u64> {
        debug_assert_eq!(per_tpage, self.per_tpage);
        if !self.flush_writes_back {
            return Vec::new();
        }
        self.dirty_tpages.iter().copied().collect()
    }
    /// 8 bytes per CMT entry, as DFTL counts them.
    fn mapping_bytes(&self, tpages: u64) -> u64 {
        self.capacity as u64 * CMT_ENTRY_BYTES + tpages * ENTRY_BYTES
    }
}

/// Entries cached for `opts.cache_fraction` of `capacity` mappings (at least one, at most all).
pub(crate) fn cached_entries(opts: &FtlOptions, capacity: u64) -> usize {
    ((opts.cache_fraction * capacity as f64).round() as usize).clamp(1, capacity as usize)
}

/// DFTL. See the module documentation.
pub type Dftl = DftlCore<Cmt>;

/// The flash side of a DFTL variant, over its cache `C`. See the module documentation.
#[derive(Debug)]
pub struct DftlCore<C: MapCache> {
    space: FlashSpace,
    capacity: u64,
    per_tpage: u64,
    gtd: Vec<u32>,
    flash_map: Vec<u32>,
    cache: C,
    variant: Variant,
    pending: Vec<(u64, u32)>,
    /// GC mapping fixes put off by a `settle` that spent its budget (invariant 6): the
    /// current mapping of these uncached logical pages, newer than `flash_map`.
    deferred: BTreeMap<u64, u32>,
    /// How many fixes `deferred` holds before `settle` writes the translation pages with the
    /// most of them back.
    deferred_cap: usize,
    /// Translation-page writes the fixes may still take (invariant 6), and the space's GC
    /// counts (victims, units moved) it was last topped up from.
    fix_credit: u64,
    /// Freed units times the share's numerator not yet a whole write.
    credit_rest: u64,
    credit_seen: (u64, u64),
    ctrl: Controller,
    journal: Journal,
    c: Counters,
    charged: SpaceCounts,
    /// Flash pages of several logical pages: the write buffer (`wbuf.rs`), and the units of the
    /// page being mapped by `program_buffer` (lpn, location), followed through GC moves.
    wbuf: Option<crate::wbuf::WriteBuffer>,
    fresh: Vec<(u64, u32)>,
    page_buf: Vec<u8>,
    /// Translation pages waiting to share a flash page (invariant 5), and the page of units
    /// they are encoded into when it is programmed.
    tbuf: Vec<u64>,
    tbuf_page: Vec<u8>,
    cache_fraction: f64,
    lookups: u64,
    hits: u64,
    translation_reads: u64,
    translation_writes: u64,
    dirty_evictions: u64,
    gc_fix_writes: u64,
    invalid_marks: u64,
}

/// Counters of DFTL's own work, beyond `FtlReport`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DftlCounts {
    pub lookups: u64,
    pub hits: u64,
    pub translation_reads: u64,
    pub translation_writes: u64,
    pub dirty_evictions: u64,
    /// Translation pages rewritten by lazy GC mapping fixes (`settle`).
    pub gc_fix_writes: u64,
    pub cached_entries: u64,
    pub cmt_capacity: u64,
    /// Superseded copies marked invalid in their OOB (`Variant::marks_invalid`).
    pub invalid_marks: u64,
}

impl<C: MapCache> DftlCore<C> {
    fn assemble(
        space: FlashSpace,
        capacity: u64,
        opts: &FtlOptions,
        variant: Variant,
        flash_map: Vec<u32>,
        journal: Journal,
    ) -> Self {
        let per_tpage = space.unit_bytes() as u64 / ENTRY_BYTES;
        let tpages = capacity.div_ceil(per_tpage);
        let counts = space.counts();
        DftlCore {
            wbuf: crate::wbuf::write_buffer(&space, opts),
            fresh: Vec::new(),
            page_buf: vec![0; space.unit_bytes()],
            tbuf: Vec::with_capacity(space.units_per_page() as usize),
            tbuf_page: if space.units_per_page() > 1 {
                vec![0; space.unit_bytes() * space.units_per_page() as usize]
            } else {
                Vec::new()
            },
            charged: space.counts(),
            c: Counters::new(space.nand()),
            space,
            capacity,
            per_tpage,
            gtd: vec![UNMAPPED; tpages as usize],
            flash_map,
            cache: C::build(opts, capacity, tpages, per_tpage),
            pending: Vec::new(),
            deferred: BTreeMap::new(),
            deferred_cap: (DEFERRED_PER_TPAGE * tpages).max(per_tpage) as usize,
            fix_credit: 0,
            credit_rest: 0,
            credit_seen: (counts.gc_victims, counts.gc_migrations),
            ctrl: Controller::new(&variant.clock),
            variant,
            journal,
            cache_fraction: opts.cache_fraction,
            lookups: 0,
            hits: 0,
            translation_reads: 0,
            translation_writes: 0,
            dirty_evictions: 0,
            gc_fix_writes: 0,
            invalid_marks: 0,
        }
    }

    /// A fresh DFTL on `nand` (formatted), caching `opts.cache_fraction` of the mappings.
    pub fn new(nand: Nand, opts: &FtlOptions) -> Result<Self, FtlError> {
        let capacity = page_mapped_capacity(&nand, opts, 2)?;
        let variant = C::variant(opts, &nand, capacity)?;
        let page_bytes = crate::space::unit_bytes(nand.geometry());
        let at = nand.now_ns();
        let (space, t) = FlashSpace::format(nand, variant.space.clone(), at)?;
        let mut d = Self::assemble(
            space,
            capacity,
            opts,
            variant,
            vec![UNMAPPED; capacity as usize],
            Journal::new(capacity, page_bytes, JOURNAL),
        );
        d.write_format_tpages(t)?;
        Ok(d)
    }

    /// A variant that writes every translation page at format (`Variant::writes_tpages_at_format`)
    /// writes the ones not on flash (all of them after a format; after a power cut during one,
    /// those it had not reached). The work is the format's, not the host's.
    fn write_format_tpages(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        let mut t = at_ns;
        if self.variant.writes_tpages_at_format {
            for v in 0..self.gtd.len() as u64 {
                if self.gtd[v as usize] == UNMAPPED && !self.tbuf.contains(&v) {
                    t = self.write_tpage(t, v, false)?;
                    t = self.settle(t)?;
                }
            }
            t = self.program_tbuf(t)?;
            t = self.settle(t)?;
            self.charged = self.space.counts();
        }
        self.c = Counters::new(self.space.nand());
        Ok(t)
    }

    /// Recovers DFTL from a device that holds its data: rebuilds the map from the OOB scan
    /// (`journal::scan`), keeps every translation page that agrees with it and rewrites the
    /// others, rebuilds the GTD; the CMT starts empty.
    pub fn open(mut nand: Nand, opts: &FtlOptions) -> Result<Self, FtlError> {
        let capacity = page_mapped_capacity(&nand, opts, 2)?;
        let page_bytes = crate::space::unit_bytes(nand.geometry());
        let per_tpage = page_bytes as u64 / ENTRY_BYTES;
        let variant = C::variant(opts, &nand, capacity)?;
        let tpages = capacity.div_ceil(per_tpage);
        let at = nand.now_ns();
        let rec = scan(&mut nand, at, capacity, tpages)?;
        let mut live = rec.live_pages(|_| DATA, JOURNAL);
        let mut t = rec.done_ns;
        let mut buf = vec![0u8; page_bytes];
        let mut gtd = vec![UNMAPPED; tpages as usize];
        let mut rewrite = Vec::new();
        for v in 0..tpages {
            let range = tpage_range(v, per_tpage, capacity);
            let (seq, ppn) = rec.tpages[v as usize];
            let agrees = seq > 0
                && match crate::journal::read_unit(&mut nand, rec.done_ns, ppn, &mut buf) {
                    Ok(d) => {
                        t = t.max(d);
                        tpage_matches(&buf, &rec.map[range.clone()])
                    }
                    Err(NandError::Torn(_) | NandError::Uncorrectable { .. }) => false,
                    Err(e) => return Err(e.into()),
                };
            if agrees {
                gtd[v as usize] = ppn.0 as u32;
                live.push(LivePage {
                    ppn,
                    key: v,
                    stream: TRANSLATION,
                    seq,
                });
            } else if seq > 0 || rec.map[range].iter().any(|&p| p != UNMAPPED) {
                rewrite.push(v);
            }
        }
        let (space, t2) = FlashSpace::restore(nand, variant.space.clone(), t, &live, rec.next_seq)?;
        let journal = Journal::recovered(capacity, page_bytes, JOURNAL, rec.journal);
        let mut d = Self::assemble(space, capacity, opts, variant, rec.map, journal);
        d.gtd = gtd;
        d.absorb();
        let mut t = d.settle(t2)?;
        for v in rewrite {
            t = d.write_tpage(t, v, false)?;
            t = d.settle(t)?;
        }
        // Recovery's own programs are not the host's.
        d.write_format_tpages(t)?;
        Ok(d)
    }

    pub fn space(&self) -> &FlashSpace {
        &self.space
    }
    /// The cached mapping table.
    pub fn cache(&self) -> &C {
        &self.cache
    }
    pub fn into_nand(self) -> Nand {
        self.space.into_nand()
    }
    pub fn counts(&self) -> DftlCounts {
        DftlCounts {
            lookups: self.lookups,
            hits: self.hits,
            translation_reads: self.translation_reads,
            translation_writes: self.translation_writes,
            dirty_evictions: self.dirty_evictions,
            gc_fix_writes: self.gc_fix_writes,
            cached_entries: self.cache.len() as u64,
            cmt_capacity: self.cache.capacity() as u64,
            invalid_marks: self.invalid_marks,
        }
    }
    /// RAM for mapping as the variant counts it (DFTL: 8 bytes per CMT entry plus the GTD).
    pub fn mapping_bytes(&self) -> u64 {
        self.cache.mapping_bytes(self.gtd.len() as u64)
    }

    /// Applies the space's moves: cached entries in place, the GTD, the journal; uncached data
    /// moves wait in `pending` for `settle` (invariant 1).
    fn absorb(&mut self) {
        let (cache, gtd, pending) = (&mut self.cache, &mut self.gtd, &mut self.pending);
        let fresh = &mut self.fresh;
        self.journal.absorb(&mut self.space, &mut |m: &Move| {
            // A unit of the page `program_buffer` is mapping, moved before its mapping was
            // made: follow it (it is mapped where it is now).
            if let Some(f) = fresh.iter_mut().find(|f| u64::from(f.1) == m.from.0) {
                debug_assert_eq!(f.0, m.key);
                f.1 = m.to.0 as u32;
                return;
            }
            apply_move(cache, gtd, pending, m)
        });
    }

    /// A durability point (FLUSH, FUA, a trim): completes the word lines of the open blocks so
    /// that nothing acknowledged sits on an unpaired lower page (space invariant 9).
    fn pair(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        let t = self.program_buffer(at_ns)?;
        let t = t.max(self.space.pair_word_lines(at_ns)?);
        self.absorb();
        self.settle(t)
    }

    /// Programs the write buffer's gathered page (full, or partly filled at a durability
    /// point) at `at_ns` and maps its logical pages there (through the cached mapping table, as
    /// a direct write does). Returns when the program and the mapping work are done.
    fn program_buffer(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        let Some(wb) = self.wbuf.as_mut() else {
            return Ok(at_ns);
        };
        let Some((lpns, locs, done)) =
            crate::wbuf::program_gathered(wb, &mut self.space, DATA, at_ns)?
        else {
            return Ok(at_ns);
        };
        // The moves of GC before the program first (their sources may be pages of a victim
        // erased and reused for this very page: not ours). Then follow the new units, and
        // settle the uncached moves so that the lookups below find current flash-map entries.
        self.absorb();
        self.fresh = lpns
            .iter()
            .enumerate()
            .map(|(i, &l)| (l, locs[i].0 as u32))
            .collect();
        let mut end = self.settle(at_ns)?.max(done);
        for (i, &l) in lpns.iter().enumerate() {
            let (s, t) = self.lookup(at_ns, l)?;
            let t = self.ctrl.charge(t, self.variant.data_update_cycles);
            debug_assert_eq!(self.fresh[i].0, l);
            let now_at = self.fresh[i].1;
            let old = self.cache.remap(s, now_at);
            // Mapped now: later moves of it go through the cache.
            self.fresh[i].1 = UNMAPPED;
            if old != UNMAPPED {
                self.space.note_replacement(Ppn(u64::from(now_at)));
                end = end.max(self.supersede(done, old)?);
            }
            end = end.max(self.settle(t)?);
        }
        self.fresh.clear();
        self.charge_background(at_ns);
        Ok(end)
    }

    /// Invalidates the superseded copy `old` (the caller's map no longer points at it). A variant
    /// that keeps page status in the OOB also marks it there, issued at `at_ns` (after the copy
    /// that supersedes it is programmed). Returns when that is done.
    fn supersede(&mut self, at_ns: Nanos, old: u32) -> Result<Nanos, FtlError> {
        let ppn = Ppn(u64::from(old));
        self.space.invalidate(ppn);
        if !self.variant.marks_invalid {
            return Ok(at_ns);
        }
        self.invalid_marks += 1;
        let (offset, mark) = crate::oob::INVALID_MARK;
        let r = self.space.nand_mut().partial_program(
            at_ns,
            ppn,
            0,
            &[],
            offset,
            &[mark],
            Purpose::Meta,
        );
        match r {
            Ok(d) => Ok(d.done_ns),
            // A retired block takes no program; the copy's record is older than its successor's.
            Err(NandError::BadBlock(_)) => Ok(at_ns),
            // The mark tore the page (it held nothing valid any more) and the block is bad now.
            Err(NandError::ProgramFailed(_)) => {
                let t = self.space.retire_failed_block(at_ns, ppn)?;
                self.absorb();
                Ok(t)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Writes translation page `v` from `flash_map` (invariant 2). `read_first`: read the old
    /// copy first, as a read-modify-write of a partly cached page must (not when it waits in
    /// the DRAM of invariant 5). On pages of several units the write joins `tbuf`.
    fn write_tpage(&mut self, at_ns: Nanos, v: u64, read_first: bool) -> Result<Nanos, FtlError> {
        // Its deferred fixes go out with it (invariant 6; none is cached, so no newer cached
        // entry is overwritten).
        self.apply_deferred(v);
        let mut t = at_ns;
        let old = self.gtd[v as usize];
        let waiting = self.tbuf.contains(&v);
        if read_first && old != UNMAPPED && !waiting {
            t = self.space.read(
                t,
                Ppn(u64::from(old)),
                &mut self.page_buf,
                &mut [],
                Purpose::Mapping,
            )?;
            self.translation_reads += 1;
        }
        t = self.ctrl.charge(t, self.variant.tpage_copy_cycles);
        if self.space.units_per_page() > 1 {
            // Invariant 5: gather; a page rewritten while it waits is rewritten in DRAM.
            if !waiting {
                self.tbuf.push(v);
            }
            if self.tbuf.len() == self.space.units_per_page() as usize {
                return self.program_tbuf(t);
            }
            return Ok(t);
        }
        encode_tpage(
            &mut self.page_buf,
            &self.flash_map[tpage_range(v, self.per_tpage, self.capacity)],
        );
        let seq = self.space.alloc_seq();
        let (ppn, mut done) = self.space.write(
            t,
            TRANSLATION,
            &OobRecord::new(PageKind::Translation, v, seq, 0),
            &self.page_buf,
            Purpose::Mapping,
        )?;
        self.translation_writes += 1;
        self.absorb();
        let cur = self.gtd[v as usize];
        self.gtd[v as usize] = ppn.0 as u32;
        if cur != UNMAPPED {
            done = self.supersede(done, cur)?;
        }
        Ok(done)
    }

    /// Programs the translation pages waiting in `tbuf` into one flash page (invariant 5),
    /// points the GTD at them and supersedes their previous copies. Returns when done.
    fn program_tbuf(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        if self.tbuf.is_empty() {
            return Ok(at_ns);
        }
        let unit = self.space.unit_bytes();
        let vs = std::mem::take(&mut self.tbuf);
        debug_assert!(vs.len() <= self.space.units_per_page() as usize);
        let mut recs = Vec::with_capacity(vs.len());
        for (i, &v) in vs.iter().enumerate() {
            encode_tpage(
                &mut self.tbuf_page[i * unit..(i + 1) * unit],
                &self.flash_map[tpage_range(v, self.per_tpage, self.capacity)],
            );
            recs.push(OobRecord::new(
                PageKind::Translation,
                v,
                self.space.alloc_seq(),
                0,
            ));
        }
        let units: Vec<(OobRecord, &[u8])> = recs
            .iter()
            .zip(self.tbuf_page.chunks(unit))
            .map(|(r, d)| (*r, d))
            .collect();
        let (first, mut done) =
            self.space
                .write_units(at_ns, TRANSLATION, &units, Purpose::Mapping)?;
        drop(units);
        self.translation_writes += vs.len() as u64;
        // GC before the program may have moved the previous copies: follow them first.
        self.absorb();
        for (i, &v) in vs.iter().enumerate() {
            let cur = self.gtd[v as usize];
            self.gtd[v as usize] = (first.0 + i as u64) as u32;
            if cur != UNMAPPED {
                done = self.supersede(done, cur)?;
            }
        }
        self.tbuf = vs;
        self.tbuf.clear();
        Ok(done)
    }

    /// Lazy GC mapping fixes: rewrites, once per translation page, the entries of uncached
    /// pages that GC moved (invariant 3 holds again when this returns).
    fn settle(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        let mut end = at_ns;
        // Invariant 6: the fixes take at most their share of what GC freed; GC during their
        // own writes tops the credit up, by what it freed.
        while let Some(&(first, _)) = self.pending.first() {
            self.top_up_fix_credit();
            if self.fix_credit == 0 {
                self.defer_pending();
                break;
            }
            self.fix_credit -= 1;
            let v = first / self.per_tpage;
            let per = self.per_tpage;
            let mut n = self.apply_deferred(v);
            let (flash_map, cache) = (&mut self.flash_map, &self.cache);
            // In order, so that a page moved twice ends where it was moved last.
            self.pending.retain(|&(l, to)| {
                if l / per != v {
                    return true;
                }
                debug_assert!(cache.get(l).is_none());
                flash_map[l as usize] = to;
                n += 1;
                false
            });
            let t = self
                .ctrl
                .charge(at_ns, n * self.variant.writeback_entry_cycles);
            self.gc_fix_writes += 1;
            end = end.max(self.write_tpage(t, v, true)?);
        }
        // Deferred fixes past their cap: the translation pages holding the most go out (a
        // bounded number per call; their own GC's fixes are deferred in turn).
        let mut drain = SETTLE_DRAIN_TPAGES;
        while self.deferred.len() > self.deferred_cap && drain > 0 {
            drain -= 1;
            let v = self.densest_deferred_tpage();
            let n = self.apply_deferred(v);
            let t = self
                .ctrl
                .charge(end, n * self.variant.writeback_entry_cycles);
            self.gc_fix_writes += 1;
            end = end.max(self.write_tpage(t, v, true)?);
            self.absorb();
            self.defer_pending();
        }
        Ok(end)
    }

    /// Adds to the fix credit its share of the units GC freed since the last top-up (a victim
    /// frees its units less those it moved). The credit is capped at one write per translation
    /// page, so a long quiet spell cannot bank a burst.
    fn top_up_fix_credit(&mut self) {
        let c = self.space.counts();
        let (victims, moved) = (
            c.gc_victims - self.credit_seen.0,
            c.gc_migrations - self.credit_seen.1,
        );
        self.credit_seen = (c.gc_victims, c.gc_migrations);
        let units =
            u64::from(self.space.pages_per_block()) * u64::from(self.space.units_per_page());
        let freed = (victims * units).saturating_sub(moved);
        self.credit_rest += freed * FIX_SHARE_OF_FREED.0;
        let whole = self.credit_rest / FIX_SHARE_OF_FREED.1;
        self.credit_rest %= FIX_SHARE_OF_FREED.1;
        self.fix_credit = (self.fix_credit + whole).min(self.gtd.len() as u64);
    }

    /// Moves every pending fix into `deferred`, in order (a page moved twice keeps its last).
    fn defer_pending(&mut self) {
        for (l, to) in self.pending.drain(..) {
            self.deferred.insert(l, to);
        }
    }

    /// Applies the deferred fixes of translation page `v` to `flash_map` (it is about to be
    /// written); returns how many.
    fn apply_deferred(&mut self, v: u64) -> u64 {
        if self.deferred.is_empty() {
            return 0;
        }
        let range = v * self.per_tpage..(v + 1) * self.per_tpage;
        let fixes: Vec<(u64, u32)> = self.deferred.range(range).map(|(&l, &p)| (l, p)).collect();
        for &(l, p) in &fixes {
            self.flash_map[l as usize] = p;
            self.deferred.remove(&l);
        }
        fixes.len() as u64
    }

    /// The translation page with the most deferred fixes (the lowest on ties).
    fn densest_deferred_tpage(&self) -> u64 {
        let mut best = (0u64, 0u64);
        let mut cur = (u64::MAX, 0u64);
        for &l in self.deferred.keys() {
            let v = l / self.per_tpage;
            if v == cur.0 {
                cur.1 += 1;
            } else {
                cur = (v, 1);
            }
            if cur.1 > best.1 {
                best = cur;
            }
        }
        best.0
    }

    /// The cache slot of `lpn`, loading it on a miss (after making room).
    fn lookup(&mut self, at_ns: Nanos, lpn: u64) -> Result<(u32, Nanos), FtlError> {
        debug_assert!(self.pending.is_empty());
        self.lookups += 1;
        if let Some(s) = self.cache.get(lpn) {
            self.hits += 1;
            let (s, cycles) = self.cache.hit(s);
            return Ok((s, self.ctrl.charge(at_ns, cycles)));
        }
        // The evicted entry is out of the cache before its write-back: a move of its page during
        // the write then goes to `pending` and is fixed by `settle`, instead of landing in an
        // entry about to vanish.
        let (evicted, cycles) = self.cache.make_room();
        let mut t = self.ctrl.charge(at_ns, cycles);
        if let Some(e) = evicted.filter(|e| e.dirty) {
            t = self.write_back(t, e)?;
        }
        let v = lpn / self.per_tpage;
        let tp = self.gtd[v as usize];
        if tp != UNMAPPED && !self.tbuf.contains(&v) {
            t = self.space.read(
                t,
                Ppn(u64::from(tp)),
                &mut self.page_buf,
                &mut [],
                Purpose::Mapping,
            )?;
            self.translation_reads += 1;
        }
        let s = self.cache.insert(lpn, self.flash_map[lpn as usize]);
        if let Some(p) = self.deferred.remove(&lpn) {
            // A deferred fix (invariant 6) is newer than the translation page: the entry is
            // cached dirty, so that its eviction writes it back.
            self.cache.remap(s, p);
        }
        Ok((s, t))
    }

    /// Writes an evicted dirty entry back, with the cached entries the variant writes with it
    /// (DFTL: every dirty entry of its translation page, the batch update).
    fn write_back(&mut self, at_ns: Nanos, e: Evicted) -> Result<Nanos, FtlError> {
        self.dirty_evictions += 1;
        let v = e.lpn / self.per_tpage;
        self.flash_map[e.lpn as usize] = e.ppn;
        let n = 1 + self.cache.write_back_with(v, &mut self.flash_map);
        let t = self
            .ctrl
            .charge(at_ns, n * self.variant.writeback_entry_cycles);
        let t = self.write_tpage(t, v, true)?;
        self.settle(t)
    }

    fn charge_background(&mut self, at_ns: Nanos) {
        charge_space_work(
            &mut self.ctrl,
            &self.space,
            &mut self.charged,
            at_ns,
            &self.variant.space_work,
        );
    }

    /// The current mapping of `lpn` without touching the cache's order (for checkpoints).
    fn current(&self, lpn: u64) -> u32 {
        match self.cache.get(lpn) {
            Some(s) => self.cache.ppn(s),
            None => self
                .deferred
                .get(&lpn)
                .copied()
                .unwrap_or(self.flash_map[lpn as usize]),
        }
    }

    fn checkpoint_if_due(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        if !self.journal.wants_checkpoint() {
            return Ok(at_ns);
        }
        // The controller reads every written translation page to learn what is mapped.
        let mut t = at_ns;
        for v in 0..self.gtd.len() {
            let tp = self.gtd[v];
            if tp != UNMAPPED && !self.tbuf.contains(&(v as u64)) {
                t = t.max(self.space.read(
                    at_ns,
                    Ppn(u64::from(tp)),
                    &mut self.page_buf,
                    &mut [],
                    Purpose::Mapping,
                )?);
                self.translation_reads += 1;
            }
        }
        let bitmap = crate::journal::mapped_bitmap(self.capacity, |l| self.current(l) != UNMAPPED);
        let (cache, gtd, pending) = (&mut self.cache, &mut self.gtd, &mut self.pending);
        let t = self
            .journal
            .write_checkpoint(&mut self.space, t, &bitmap, &mut |m: &Move| {
                apply_move(cache, gtd, pending, m)
            })?;
        self.settle(t)
    }

    /// Idle-time work: background GC of up to `max_victims` blocks, with its mapping fixes.
    pub fn background(&mut self, at_ns: Nanos, max_victims: u32) -> Result<Nanos, FtlError> {
        let t = self.space.background_gc(at_ns, max_victims)?;
        self.absorb();
        self.charge_background(at_ns);
        self.settle(t)
    }
}

/// Applies one move of a data page (to its cached entry, or queued for `settle`) or of a
/// translation page (to the GTD). Journal pages never reach here (`Journal::absorb`).
fn apply_move<C: MapCache>(
    cache: &mut C,
    gtd: &mut [u32],
    pending: &mut Vec<(u64, u32)>,
    m: &Move,
) {
    match m.stream {
        DATA => match cache.get(m.key) {
            Some(s) => {
                let _from = cache.remap(s, m.to.0 as u32);
                debug_assert_eq!(u64::from(_from), m.from.0);
            }
            None => pending.push((m.key, m.to.0 as u32)),
        },
        TRANSLATION => {
            debug_assert_eq!(u64::from(gtd[m.key as usize]), m.from.0);
            gtd[m.key as usize] = m.to.0 as u32;
        }
        _ => debug_assert!(false, "move in unknown stream {}", m.stream),
    }
}

fn tpage_range(v: u64, per_tpage: u64, capacity: u64) -> std::ops::Range<usize> {
    let start = v * per_tpage;
    start as usize..(start + per_tpage).min(capacity) as usize
}

fn encode_tpage(page: &mut [u8], entries: &[u32]) {
    page.fill(0xFF);
    for (chunk, e) in page.chunks_exact_mut(4).zip(entries) {
        chunk.copy_from_slice(&e.to_le_bytes());
    }
}

fn tpage_matches(page: &[u8], entries: &[u32]) -> bool {
    page.chunks_exact(4).enumerate().all(|(i, c)| {
        let e = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        e == entries.get(i).copied().unwrap_or(UNMAPPED)
    })
}

impl<C: MapCache> BlockDevice for DftlCore<C> {
    fn name(&self) -> String {
        let pct = self.cache_fraction * 100.0;
        if (pct - pct.round()).abs() < 1e-9 {
            format!("{}-{}%", self.variant.kind, pct.round())
        } else {
            format!("{}-{pct}%", self.variant.kind)
        }
    }

    fn capacity_pages(&self) -> u64 {
        self.capacity
    }

    fn read(&mut self, at_ns: Nanos, lpn: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        check_request(lpn, buf.len(), self.capacity)?;
        let mut end = at_ns;
        for (i, chunk) in buf.chunks_exact_mut(LOGICAL_PAGE_BYTES).enumerate() {
            if self
                .wbuf
                .as_ref()
                .is_some_and(|wb| wb.read(lpn + i as u64, chunk))
            {
                end = end.max(self.ctrl.charge(at_ns, self.variant.data_update_cycles));
                self.c.host.reads += 1;
                continue;
            }
            let (s, t) = self.lookup(at_ns, lpn + i as u64)?;
            let p = self.cache.ppn(s);
            // A page whose program is in flight is read from the buffer (`wbuf.rs` invariant 4).
            let done = if crate::wbuf::read_in_flight(self.wbuf.as_ref(), p, t, chunk) {
                t
            } else {
                read_mapped(&mut self.space, t, p, chunk)?
            };
            end = end.max(done);
            self.c.host.reads += 1;
        }
        Ok(end)
    }

    fn write(&mut self, at_ns: Nanos, lpn: u64, data: &[u8], fua: bool) -> Result<Nanos, FtlError> {
        check_request(lpn, data.len(), self.capacity)?;
        let mut end = at_ns;
        for (i, chunk) in data.chunks_exact(LOGICAL_PAGE_BYTES).enumerate() {
            let l = lpn + i as u64;
            if let Some(wb) = self.wbuf.as_mut() {
                // Acknowledged once buffered; mapped when its page is programmed.
                let t = self.ctrl.charge(at_ns, self.variant.data_update_cycles);
                let (t, full) = wb.put(t, l, chunk);
                if full {
                    self.program_buffer(t)?;
                }
                end = end.max(t);
                self.c.host.writes += 1;
                continue;
            }
            let (s, t) = self.lookup(at_ns, l)?;
            let t = self.ctrl.charge(t, self.variant.data_update_cycles);
            let seq = self.space.alloc_seq();
            let (ppn, mut done) = self.space.write(
                t,
                DATA,
                &OobRecord::new(PageKind::Data, l, seq, 0),
                chunk,
                Purpose::Host,
            )?;
            self.absorb();
            debug_assert_eq!(self.cache.lpn(s), l);
            let old = self.cache.remap(s, ppn.0 as u32);
            if old != UNMAPPED {
                done = self.supersede(done, old)?;
            }
            let settled = self.settle(t)?;
            self.charge_background(t);
            end = end.max(done).max(settled);
            self.c.host.writes += 1;
        }
        if fua {
            end = end.max(self.pair(end)?);
        }
        Ok(end)
    }

    fn trim(&mut self, at_ns: Nanos, lpn: u64, pages: u64) -> Result<Nanos, FtlError> {
        check_range(lpn, pages, self.capacity)?;
        self.c.host.trims += pages;
        if pages == 0 {
            return Ok(at_ns);
        }
        if let Some(wb) = self.wbuf.as_mut() {
            wb.discard(lpn, pages);
        }
        let mut t = self
            .ctrl
            .charge(at_ns, self.variant.trim_lookup_cycles * pages);
        let (first_v, last_v) = (lpn / self.per_tpage, (lpn + pages - 1) / self.per_tpage);
        let cached_mapped = (lpn..lpn + pages).any(|l| {
            self.cache
                .get(l)
                .is_some_and(|s| self.cache.ppn(s) != UNMAPPED)
        });
        let on_flash =
            (first_v..=last_v).any(|v| self.gtd[v as usize] != UNMAPPED || self.tbuf.contains(&v));
        if !cached_mapped && !on_flash {
            return Ok(t);
        }
        let (cache, gtd, pending) = (&mut self.cache, &mut self.gtd, &mut self.pending);
        let mut end =
            self.journal
                .record_trim(&mut self.space, t, lpn, pages, &mut |m: &Move| {
                    apply_move(cache, gtd, pending, m)
                })?;
        t = self.settle(t)?;
        for v in first_v..=last_v {
            let range = tpage_range(v, self.per_tpage, self.capacity);
            let lo = (range.start as u64).max(lpn);
            let hi = (range.end as u64).min(lpn + pages);
            let mut changed = false;
            let tp = self.gtd[v as usize];
            // Its entries are in `flash_map`: on flash, or waiting in DRAM (invariant 5).
            let held = tp != UNMAPPED || self.tbuf.contains(&v);
            if tp != UNMAPPED && !self.tbuf.contains(&v) {
                t = self.space.read(
                    t,
                    Ppn(u64::from(tp)),
                    &mut self.page_buf,
                    &mut [],
                    Purpose::Mapping,
                )?;
                self.translation_reads += 1;
            }
            for l in lo..hi {
                match self.cache.get(l) {
                    Some(s) => {
                        if self.cache.ppn(s) != UNMAPPED {
                            let old = self.cache.remap(s, UNMAPPED);
                            self.space.invalidate(Ppn(u64::from(old)));
                        }
                    }
                    None if held => {
                        let mut p = std::mem::replace(&mut self.flash_map[l as usize], UNMAPPED);
                        if let Some(d) = self.deferred.remove(&l) {
                            p = d;
                        }
                        if p != UNMAPPED {
                            self.space.invalidate(Ppn(u64::from(p)));
                            changed = true;
                        }
                    }
                    None => debug_assert_eq!(self.flash_map[l as usize], UNMAPPED),
                }
            }
            if changed {
                t = self.write_tpage(t, v, false)?;
                t = self.settle(t)?;
            }
            end = end.max(t);
        }
        end = end.max(self.checkpoint_if_due(t)?);
        end = end.max(self.pair(end)?);
        self.charge_background(t);
        Ok(end)
    }

    fn flush(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        self.c.host.flushes += 1;
        let mut end = at_ns;
        for v in self.cache.flush_tpages(self.per_tpage) {
            let n = self.cache.write_back_with(v, &mut self.flash_map);
            if n == 0 {
                continue;
            }
            let t = self
                .ctrl
                .charge(at_ns, n * self.variant.writeback_entry_cycles);
            let t = self.write_tpage(t, v, true)?;
            end = end.max(self.settle(t)?);
        }
        // Invariant 5: what waits in DRAM goes out with the flush, in one page.
        let t = self.program_tbuf(end)?;
        end = end.max(self.settle(t)?);
        // MLC/TLC: nothing acknowledged may stay on an unpaired lower page (space invariant 9).
        end = end.max(self.pair(end)?);
        Ok(end)
    }

    fn report(&self) -> FtlReport {
        let scans = self.cache.scan_counts();
        FtlReport {
            cmt_hit_ratio: Some(if self.lookups == 0 {
                0.0
            } else {
                self.hits as f64 / self.lookups as f64
            }),
            translation_reads: self.translation_reads,
            translation_writes: self.translation_writes,
            host_cpu_us: if self.variant.on_host {
                self.ctrl.busy_us()
            } else {
                0.0
            },
            cache_scanned_entries: scans.entries,
            cache_scanned_entries_beyond_l3: scans.entries_beyond_l3,
            cache_scan_footprint_bytes_max: scans.footprint_bytes_max,
            ..space_report(
                self.name(),
                &self.space,
                &self.c,
                &self.ctrl,
                self.mapping_bytes(),
            )
        }
    }

    space_device_methods!();

    fn gc_informed(&mut self) -> Option<&mut dyn crate::iaa::GcInformed> {
        Some(self)
    }
}

/// Insert Address Assist (`iaa.rs`): victims are committed among the data stream's blocks only
/// (the engine cannot empty journal or translation blocks by its writes).
impl<C: MapCache> crate::iaa::GcInformed for DftlCore<C> {
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
