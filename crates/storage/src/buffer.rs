//! The buffer manager: a fixed set of frames, CLOCK eviction, pinning, the WAL rule, write-back.
//!
//! Why CLOCK: a hit costs one bit set, no list surgery, so the hot path (TPC-B touches the branch
//! and teller pages every transaction) stays cheap; it approximates LRU well for OLTP, and a
//! frame's reference bit gives recently used pages a second chance. LRU-2 resists scans better,
//! but the benchmarks here do point accesses and the engine has no large scans on the hot path.
//!
//! Invariants:
//! 1. A page is in at most one frame; `map` and the frames agree.
//! 2. A pinned frame is never evicted or replaced.
//! 3. WAL rule: a dirty page is written only after the log is durable up to its page LSN.
//! 4. A dirty frame's `rec_lsn` is the LSN of the first record that dirtied it since it was last
//!    written, so redo from the minimum `rec_lsn` of all dirty frames restores every lost change.
//! 5. Pages leave the pool sealed (checksum) and are verified when read: checksum, then the
//!    slotted and B-tree structure that the accessors trust (`check_structure`).
//! 6. In-Place Appends (ipa.rs): a frame holding a page with a delta area keeps a *shadow*, the
//!    page as it is on flash (base plus valid appends), and `ipa_used`, the slots on flash that
//!    are not erased. A write-back of such a page appends the diff against the shadow when it
//!    fits one slot and a slot is left (and the store can append now), else writes the page out
//!    of place with an erased delta area; either way the shadow then equals the frame. Why a
//!    shadow and a diff instead of tracking changed ranges at every change: the engine changes
//!    pages in many places (slotted records, compaction, headers, B-tree splits), each a chance
//!    to miss a range and lose an update silently; one diff at write-back cannot miss one, and
//!    costs a word compare per 8 bytes only for IPA pages (docs/PERFORMANCE.md measures it).
//! 7. `dirty` holds `(rec_lsn, frame)` for exactly the frames with `dirty` set, so that the
//!    cleaner's "oldest few dirty pages" and the checkpoint's minimum `rec_lsn` cost a lookup,
//!    not a pass over the pool.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::fxhash::FxHashMap;
use crate::log::LogManager;
use crate::page::{self, PageType};
use crate::pagestore::{PageKind, PageStore, WriteHint};
use crate::slotted;
use crate::{Lsn, Nanos, PageId};

/// Counters of the buffer pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BufferStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub writebacks: u64,
    /// Write-backs done as In-Place Appends (a subset of `writebacks`).
    pub ipa_appends: u64,
    /// Write-backs of pages with a delta area done out of place (another subset).
    pub ipa_out_of_place: u64,
}

/// The IPA advisor's record of what write-backs changed (`BufferPool::enable_profile`), per
/// object: measured where a change leaves the pool, against the page as it was read or last
/// written, so it is exactly what an append would have to carry.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ObjectWrites {
    pub writebacks: u64,
    /// Write-backs of pages read from storage or written before (a diff exists); the others
    /// are pages formatted in the pool.
    pub diffed: u64,
    /// Changed bytes per diffed write-back, in buckets of at most 8, 16, 32, ... 4096 bytes,
    /// then more (`PROFILE_BYTES`).
    pub changed_bytes: [u64; 11],
    /// Changed ranges (delta records, neighbours closer than a record header merged) per
    /// diffed write-back: 0 to 15, then 16 or more.
    pub ranges: [u64; 17],
    /// Diffed write-backs that one append of M records (index M - 1, M = 1..=4) sized for
    /// records of R bytes (`PROFILE_RECORD_BYTES`) could carry.
    pub fits: [[u64; 3]; 4],
}

/// Upper bounds of `ObjectWrites::changed_bytes`' buckets (the last one is open).
pub const PROFILE_BYTES: [usize; 10] = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];
/// The record sizes `ObjectWrites::fits` tries.
pub const PROFILE_RECORD_BYTES: [usize; 3] = [16, 32, 64];

#[derive(Debug)]
struct Frame {
    pid: Option<PageId>,
    data: Box<[u8]>,
    dirty: bool,
    rec_lsn: Lsn,
    pins: u32,
    referenced: bool,
    /// The page as on flash, for In-Place Appends (invariant 6); empty until needed.
    shadow: Vec<u8>,
    shadow_valid: bool,
    ipa_used: u8,
}

/// How to bring a page in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fix {
    /// Read and verify; a corrupt page is an error.
    Read,
    /// Read; a corrupt page comes back zeroed with `corrupt = true` (recovery repairs it from a
    /// page image).
    Lenient,
    /// A page about to be formatted: not read.
    New,
}

#[derive(Debug)]
pub struct BufferPool {
    page_bytes: usize,
    frames: Vec<Frame>,
    /// Page to frame. Hashed with `FxHasher`: SipHash here cost more than the CLOCK itself.
    map: FxHashMap<PageId, usize>,
    hand: usize,
    /// The dirty frames as `(rec_lsn, frame)`, kept as they change (invariant 7): the
    /// background cleaner asks for the oldest few after every page it writes, and a pass over a
    /// pool of tens of thousands of frames there cost more than the write at the NoFTL paper's
    /// scales.
    dirty: BTreeSet<(Lsn, usize)>,
    /// Scratch for `flush`: the frames chosen, so that a flush does not allocate.
    flush_batch: Vec<usize>,
    pub stats: BufferStats,
    /// Scratch for In-Place Appends: the diff's ranges and the slot being encoded.
    ipa_ranges: Vec<(u16, u16)>,
    ipa_slot: Vec<u8>,
    /// The IPA advisor's profile of write-backs, when enabled.
    profile: Option<std::collections::BTreeMap<crate::ObjectId, ObjectWrites>>,
    /// Reads and write-backs in order, when recorded (`count_page_io`).
    page_io: Option<PageIo>,
}

/// One page operation between the pool and the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageOp {
    /// The page read from the store (a miss).
    Read(PageId),
    /// The page written back.
    Write(PageId),
}

impl PageOp {
    pub fn pid(self) -> PageId {
        match self {
            PageOp::Read(p) | PageOp::Write(p) => p,
        }
    }
}

/// The pool's reads from the store (misses, not a scan's read-ahead) and write-backs since
/// counting began, in the order the pool made them: what a preconditioning warm-up replays
/// (`Engine::replay_page_io`). Counts per page are the trace's to derive.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageIo {
    pub trace: Vec<PageOp>,
}

impl PageIo {
    /// Write-backs counted in all.
    pub fn total_writes(&self) -> u64 {
        self.trace
            .iter()
            .filter(|o| matches!(o, PageOp::Write(_)))
            .count() as u64
    }
    /// Reads counted in all.
    pub fn total_reads(&self) -> u64 {
        self.trace.len() as u64 - self.total_writes()
    }
}

pub fn hint_of(p: &[u8]) -> WriteHint {
    let kind = match page::page_type(p) {
        PageType::SpaceMap | PageType::Unformatted => PageKind::SpaceMap,
        PageType::Heap => PageKind::Heap,
        PageType::BTreeLeaf => PageKind::BTreeLeaf,
        PageType::BTreeInner => PageKind::BTreeInner,
    };
    WriteHint {
        object: page::object(p),
        kind,
    }
}

impl BufferPool {
    pub fn new(frames: usize, page_bytes: usize) -> Result<BufferPool> {
        if frames < 8 {
            return Err(Error::Config(format!(
                "the buffer pool needs at least 8 frames, not {frames}"
            )));
        }
        Ok(BufferPool {
            page_bytes,
            frames: (0..frames)
                .map(|_| Frame {
                    pid: None,
                    data: vec![0u8; page_bytes].into(),
                    dirty: false,
                    rec_lsn: 0,
                    pins: 0,
                    referenced: false,
                    shadow: Vec::new(),
                    shadow_valid: false,
                    ipa_used: 0,
                })
                .collect(),
            map: FxHashMap::with_capacity_and_hasher(frames * 2, Default::default()),
            hand: 0,
            dirty: BTreeSet::new(),
            flush_batch: Vec::new(),
            stats: BufferStats::default(),
            ipa_ranges: Vec::new(),
            ipa_slot: Vec::new(),
            profile: None,
            page_io: None,
        })
    }
    pub fn capacity(&self) -> usize {
        self.frames.len()
    }

    /// Pins `pid` in a frame; returns the frame, whether it was corrupt (Lenient), and the time.
    pub fn fix(
        &mut self,
        store: &mut dyn PageStore,
        log: &mut LogManager,
        at: Nanos,
        pid: PageId,
        how: Fix,
    ) -> Result<(usize, bool, Nanos)> {
        if let Some(&f) = self.map.get(&pid) {
            let fr = &mut self.frames[f];
            fr.pins += 1;
            fr.referenced = true;
            self.stats.hits += 1;
            return Ok((f, false, at));
        }
        self.stats.misses += 1;
        let (f, mut t) = self.victim(store, log, at)?;
        let mut corrupt = false;
        let profiling = self.profile.is_some();
        {
            let fr = &mut self.frames[f];
            fr.shadow_valid = false;
            fr.ipa_used = 0;
            if how == Fix::New {
                fr.data.fill(0);
            } else {
                t = store.read_page(t, pid, &mut fr.data)?;
                if let Some(io) = self.page_io.as_mut() {
                    io.trace.push(PageOp::Read(pid));
                }
                // The base first (its checksum excludes the delta area), then its appends.
                match page::verify(&fr.data, pid)
                    .and_then(|_| crate::ipa::apply(&mut fr.data, pid))
                    .and_then(|st| check_structure(&fr.data, pid).map(|()| st))
                {
                    Ok(st) => {
                        if profiling || crate::ipa::layout_of(&fr.data).is_some() {
                            fr.ipa_used = st.used as u8;
                            fr.shadow.clear();
                            fr.shadow.extend_from_slice(&fr.data);
                            fr.shadow_valid = true;
                        }
                    }
                    Err(e) => {
                        if how == Fix::Lenient {
                            fr.data.fill(0);
                            corrupt = true;
                        } else {
                            return Err(e);
                        }
                    }
                }
            }
            fr.pid = Some(pid);
            fr.pins = 1;
            fr.referenced = true;
            if fr.dirty {
                self.dirty.remove(&(fr.rec_lsn, f));
            }
            fr.dirty = false;
            fr.rec_lsn = 0;
        }
        self.map.insert(pid, f);
        Ok((f, corrupt, t))
    }

    pub fn unfix(&mut self, f: usize) {
        let fr = &mut self.frames[f];
        assert!(fr.pins > 0, "unfix of an unpinned frame");
        fr.pins -= 1;
    }

    pub fn page(&self, f: usize) -> &[u8] {
        &self.frames[f].data
    }
    pub fn page_mut(&mut self, f: usize) -> &mut [u8] {
        &mut self.frames[f].data
    }
    /// Records that the frame was changed by the record at `lsn` (invariant 4).
    pub fn mark_dirty(&mut self, f: usize, lsn: Lsn) {
        let fr = &mut self.frames[f];
        if !fr.dirty {
            fr.dirty = true;
            fr.rec_lsn = lsn;
            let fresh = self.dirty.insert((lsn, f));
            debug_assert!(fresh, "invariant 7: a frame is in the dirty set once");
        }
    }

    /// Finds a frame to reuse (CLOCK), writing it back if dirty.
    fn victim(
        &mut self,
        store: &mut dyn PageStore,
        log: &mut LogManager,
        at: Nanos,
    ) -> Result<(usize, Nanos)> {
        let n = self.frames.len();
        for _ in 0..3 * n {
            let f = self.hand;
            self.hand = (self.hand + 1) % n;
            let fr = &mut self.frames[f];
            if fr.pins > 0 {
                continue;
            }
            if fr.pid.is_none() {
                return Ok((f, at));
            }
            if fr.referenced {
                fr.referenced = false;
                continue;
            }
            let t = if fr.dirty {
                self.write_back(store, log, at, f)?
            } else {
                at
            };
            let pid = self.frames[f].pid.take().expect("checked above");
            self.map.remove(&pid);
            self.stats.evictions += 1;
            return Ok((f, t));
        }
        Err(Error::Config(format!(
            "all {n} buffer frames are pinned; give the pool more frames"
        )))
    }

    /// Writes a dirty frame (WAL rule first); it stays in the pool, clean.
    fn write_back(
        &mut self,
        store: &mut dyn PageStore,
        log: &mut LogManager,
        at: Nanos,
        f: usize,
    ) -> Result<Nanos> {
        let pid = self.frames[f].pid.expect("a dirty frame holds a page");
        let mut t = at;
        let plsn = page::lsn(&self.frames[f].data);
        if plsn >= log.durable_lsn() {
            t = log.force(store, t)?;
        }
        assert!(
            plsn < log.durable_lsn() || plsn == 0,
            "WAL rule (invariant 3)"
        );
        if self.profile.is_some() {
            self.profile_writeback(f);
        }
        if let Some(io) = self.page_io.as_mut() {
            io.trace.push(PageOp::Write(pid));
        }
        if let Some(done) = self.try_append(store, t, f, pid)? {
            return Ok(done);
        }
        let profiling = self.profile.is_some();
        let fr = &mut self.frames[f];
        let layout = crate::ipa::layout_of(&fr.data);
        if let Some((n, _, slot_bytes)) = layout {
            // Out of place: the deltas are folded into the base (ipa.rs invariant 4).
            let len = fr.data.len();
            fr.data[len - n * slot_bytes..].fill(0xFF);
        }
        page::seal(&mut fr.data);
        let t = store.write_page(t, pid, &fr.data, hint_of(&fr.data))?;
        if layout.is_some() || profiling {
            fr.shadow.clear();
            fr.shadow.extend_from_slice(&fr.data);
            fr.shadow_valid = true;
            fr.ipa_used = 0;
        }
        if layout.is_some() {
            self.stats.ipa_out_of_place += 1;
        }
        let was = self.dirty.remove(&(fr.rec_lsn, f));
        debug_assert!(was, "invariant 7: a dirty frame is in the dirty set");
        fr.dirty = false;
        fr.rec_lsn = 0;
        self.stats.writebacks += 1;
        Ok(t)
    }

    /// Starts counting reads and write-backs per page (`PageIo`), from zero.
    pub fn count_page_io(&mut self) {
        self.page_io = Some(PageIo::default());
    }
    /// The reads and write-backs counted since `count_page_io`, which stops counting.
    pub fn take_page_io(&mut self) -> Option<PageIo> {
        self.page_io.take()
    }

    /// Starts the IPA advisor's profile of write-backs (frames keep a shadow of every page from
    /// now on: twice the pool's memory).
    pub fn enable_profile(&mut self) {
        self.profile.get_or_insert_with(Default::default);
    }
    pub fn profile(&self) -> Option<&std::collections::BTreeMap<crate::ObjectId, ObjectWrites>> {
        self.profile.as_ref()
    }

    /// Records what the write-back of frame `f` changes (the advisor's profile).
    fn profile_writeback(&mut self, f: usize) {
        let fr = &self.frames[f];
        let Some(profile) = self.profile.as_mut() else {
            return;
        };
        let o = profile.entry(page::object(&fr.data)).or_default();
        o.writebacks += 1;
        if !fr.shadow_valid || page::delta_area(&fr.shadow) != page::delta_area(&fr.data) {
            return;
        }
        let base_end = fr.data.len() - page::delta_area(&fr.data);
        let ranges = &mut self.ipa_ranges;
        crate::ipa::diff(
            &fr.shadow,
            &fr.data,
            base_end,
            usize::MAX,
            usize::MAX,
            ranges,
        );
        o.diffed += 1;
        let bytes: usize = ranges.iter().map(|r| usize::from(r.1)).sum();
        let b = PROFILE_BYTES
            .iter()
            .position(|&x| bytes <= x)
            .unwrap_or(PROFILE_BYTES.len());
        o.changed_bytes[b] += 1;
        o.ranges[ranges.len().min(16)] += 1;
        for (m, row) in o.fits.iter_mut().enumerate() {
            for (i, &r) in PROFILE_RECORD_BYTES.iter().enumerate() {
                let budget = (m + 1) * (crate::ipa::RECORD_HEADER_BYTES + r);
                let payload = bytes + ranges.len() * crate::ipa::RECORD_HEADER_BYTES;
                row[i] += u64::from(ranges.len() <= m + 1 && payload <= budget);
            }
        }
    }

    /// In-Place Appends (invariant 6): writes the frame's change since its shadow as one append
    /// into the next erased slot, if it fits and the store can append now. `None`: the page must
    /// go out of place.
    fn try_append(
        &mut self,
        store: &mut dyn PageStore,
        at: Nanos,
        f: usize,
        pid: PageId,
    ) -> Result<Option<Nanos>> {
        let fr = &mut self.frames[f];
        let Some((n, m, slot_bytes)) = crate::ipa::layout_of(&fr.data) else {
            return Ok(None);
        };
        if !fr.shadow_valid
            || usize::from(fr.ipa_used) >= n
            || crate::ipa::layout_of(&fr.shadow) != Some((n, m, slot_bytes))
        {
            return Ok(None);
        }
        let base_end = fr.data.len() - n * slot_bytes;
        let budget = slot_bytes - crate::ipa::SLOT_HEADER_BYTES;
        if crate::ipa::diff(
            &fr.shadow,
            &fr.data,
            base_end,
            m,
            budget,
            &mut self.ipa_ranges,
        )
        .is_none()
        {
            return Ok(None);
        }
        self.ipa_slot.resize(slot_bytes, 0xFF);
        crate::ipa::encode_slot(
            &fr.data,
            &self.ipa_ranges,
            page::lsn(&fr.data),
            &mut self.ipa_slot,
        );
        let offset = base_end + usize::from(fr.ipa_used) * slot_bytes;
        let Some(done) = store.write_delta(at, pid, offset, &self.ipa_slot)? else {
            return Ok(None);
        };
        fr.data[offset..offset + slot_bytes].copy_from_slice(&self.ipa_slot);
        fr.ipa_used += 1;
        fr.shadow.copy_from_slice(&fr.data);
        let was = self.dirty.remove(&(fr.rec_lsn, f));
        debug_assert!(was, "invariant 7: a dirty frame is in the dirty set");
        fr.dirty = false;
        fr.rec_lsn = 0;
        self.stats.writebacks += 1;
        self.stats.ipa_appends += 1;
        Ok(Some(done))
    }

    /// Writes back up to `max` dirty unpinned pages, oldest `rec_lsn` first, all submitted at
    /// `at`; then, with `sync`, syncs them. Returns the completion time.
    pub fn flush(
        &mut self,
        store: &mut dyn PageStore,
        log: &mut LogManager,
        at: Nanos,
        max: usize,
        sync: bool,
    ) -> Result<Nanos> {
        // Oldest first: the same pages, in the same order, as sorting every dirty unpinned frame
        // by `(rec_lsn, frame)` and taking the first `max`.
        let mut batch = std::mem::take(&mut self.flush_batch);
        batch.clear();
        batch.extend(
            self.dirty
                .iter()
                .filter(|&&(_, f)| self.frames[f].pins == 0)
                .map(|&(_, f)| f)
                .take(max),
        );
        if batch.is_empty() {
            self.flush_batch = batch;
            return Ok(at);
        }
        let mut done = at;
        let mut result = Ok(());
        for &f in &batch {
            match self.write_back(store, log, at, f) {
                Ok(t) => done = done.max(t),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.flush_batch = batch;
        result?;
        if sync {
            store.sync_pages(done)
        } else {
            Ok(done)
        }
    }

    /// Writes `pid` back if it is in the pool, dirty and unpinned (IAA's write-back of hinted
    /// pages at commit, iaa.rs); returns the completion time, `None` if nothing was written.
    pub fn write_if_dirty(
        &mut self,
        store: &mut dyn PageStore,
        log: &mut LogManager,
        at: Nanos,
        pid: PageId,
    ) -> Result<Option<Nanos>> {
        match self.map.get(&pid) {
            Some(&f) if self.frames[f].dirty && self.frames[f].pins == 0 => {
                self.write_back(store, log, at, f).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Dirty pages and their `rec_lsn`, by page id (for checkpoints).
    pub fn dirty_pages(&self) -> Vec<(PageId, Lsn)> {
        let mut v: Vec<(PageId, Lsn)> = self
            .frames
            .iter()
            .filter(|fr| fr.dirty)
            .filter_map(|fr| fr.pid.map(|p| (p, fr.rec_lsn)))
            .collect();
        v.sort_unstable();
        v
    }
    pub fn dirty_count(&self) -> usize {
        debug_assert_eq!(
            self.dirty.len(),
            self.frames.iter().filter(|fr| fr.dirty).count(),
            "invariant 7: the dirty set follows every change of a frame's dirty flag"
        );
        self.dirty.len()
    }
    /// Whether `pid` is in the pool and dirty.
    pub fn is_dirty(&self, pid: PageId) -> bool {
        self.map.get(&pid).is_some_and(|&f| self.frames[f].dirty)
    }
    pub fn min_rec_lsn(&self) -> Option<Lsn> {
        self.dirty.first().map(|&(lsn, _)| lsn)
    }
    pub fn pinned_count(&self) -> usize {
        self.frames.iter().filter(|fr| fr.pins > 0).count()
    }
    pub fn page_bytes(&self) -> usize {
        self.page_bytes
    }
}

/// A page with a valid checksum whose structure is broken (only an engine bug or a forged page
/// can make one) is reported as `Corrupt` before any accessor indexes into it (invariant 5).
fn check_structure(p: &[u8], pid: PageId) -> Result<()> {
    let ty = page::page_type(p);
    let why = match ty {
        PageType::Heap | PageType::BTreeLeaf | PageType::BTreeInner => slotted::check(p)
            .and_then(|()| match ty {
                PageType::Heap => Ok(()),
                _ => crate::btree_node::check_node(p),
            })
            .err(),
        PageType::Unformatted | PageType::SpaceMap => None,
    };
    match why {
        None => Ok(()),
        Some(why) => Err(Error::Corrupt { pid, why }),
    }
}
