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

use std::collections::HashMap;

use crate::error::{Error, Result};
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
}

#[derive(Debug)]
struct Frame {
    pid: Option<PageId>,
    data: Box<[u8]>,
    dirty: bool,
    rec_lsn: Lsn,
    pins: u32,
    referenced: bool,
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
    map: HashMap<PageId, usize>,
    hand: usize,
    /// Frames with `dirty` set, kept as they change: the background cleaner asks after every
    /// page it writes, and a count over a large pool there cost more than the write.
    dirty_frames: usize,
    pub stats: BufferStats,
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
                })
                .collect(),
            map: HashMap::with_capacity(frames * 2),
            hand: 0,
            dirty_frames: 0,
            stats: BufferStats::default(),
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
        {
            let fr = &mut self.frames[f];
            if how == Fix::New {
                fr.data.fill(0);
            } else {
                t = store.read_page(t, pid, &mut fr.data)?;
                match page::verify(&fr.data, pid).and_then(|_| check_structure(&fr.data, pid)) {
                    Ok(_) => {}
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
                self.dirty_frames -= 1;
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
            self.dirty_frames += 1;
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
        let fr = &mut self.frames[f];
        page::seal(&mut fr.data);
        let t = store.write_page(t, pid, &fr.data, hint_of(&fr.data))?;
        fr.dirty = false;
        self.dirty_frames -= 1;
        fr.rec_lsn = 0;
        self.stats.writebacks += 1;
        Ok(t)
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
        let mut dirty: Vec<(Lsn, usize)> = self
            .frames
            .iter()
            .enumerate()
            .filter(|(_, fr)| fr.dirty && fr.pins == 0)
            .map(|(i, fr)| (fr.rec_lsn, i))
            .collect();
        if dirty.is_empty() {
            return Ok(at);
        }
        // The background cleaner asks for a few pages of a large pool: select, do not sort all.
        if max < dirty.len() {
            dirty.select_nth_unstable(max);
            dirty.truncate(max);
        }
        dirty.sort_unstable();
        let mut done = at;
        for (_, f) in dirty {
            done = done.max(self.write_back(store, log, at, f)?);
        }
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
            self.dirty_frames,
            self.frames.iter().filter(|fr| fr.dirty).count(),
            "the dirty count follows every change of a frame's dirty flag"
        );
        self.dirty_frames
    }
    pub fn min_rec_lsn(&self) -> Option<Lsn> {
        self.frames
            .iter()
            .filter(|fr| fr.dirty)
            .map(|fr| fr.rec_lsn)
            .min()
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
                _ => crate::btree::check_node(p),
            })
            .err(),
        PageType::Unformatted | PageType::SpaceMap => None,
    };
    match why {
        None => Ok(()),
        Some(why) => Err(Error::Corrupt { pid, why }),
    }
}
