//! The IAA paper's storage engine as the paper describes it (Miyaji, Sun and Takeuchi, "IAA",
//! section "Proposed database storage system", Figs. 5, 9 and 10), driven against a page store
//! (`PageStore`: the page FTL behind the block interface, or the native NoFTL store), for
//! `noftl iaa compare --model paper` and the ablation towards the engine (docs/iaa.md).
//!
//! What the paper's model is, and how it is rendered here:
//! - "A data unit in the DB is a row"; the storage engine (SE) writes rows at their logical
//!   address LA, and "LPA is the quotient of the LA divided by the NAND page size". Here a table
//!   is a range of DB pages of the store (`table_pages`), each DB page one LPA; row slot `i` of
//!   page `p` is LA `p * page_bytes + i * row_bytes`, rows packed with no page header.
//! - Fig. 5: a write of a row to an LPA is a read-modify-write (read the old page, merge, write
//!   it to a new physical page). Here: `read_page`, the row merged, `write_page`: the same flash
//!   operations the paper's FTL issues, at the page-store seam.
//! - Fig. 9(a), conventional: "the new row is appended to the last row" (an append point that
//!   moves on slot by slot, wrapping round the table's pages, so a table kept at its size reuses
//!   the holes behind it); "Delete disables a row in the LA space, which has no corresponding
//!   operation in the FTL (no NAND operation)": a delete only marks its slot free in the SE, no
//!   read, no write, no trim; "Update modifies a row in-place for the same LA": one
//!   read-modify-write of the row's page.
//! - Fig. 9(b), IAA: the FTL tells the SE the page size and "LPAs of the remaining valid pages
//!   that are in the target next block to be erased"; each Insert goes to free row space in one
//!   of those LPAs, "for each Insert, the target LPA is changed (ex. LPA0 -> LPA1 -> LPA2...)".
//!   Here: `PageStore::gc_victims` (the same channel as the engine's, docs/iaa.md "The victim
//!   commitment"), one victim committed at first ("the next block to be erased"), one more when
//!   every hinted page had its record or has no room (up to `max_victims`, by default every
//!   closed block: when the committed victims hold no page with room, the next block GC will
//!   erase that still holds valid pages is "the target next block to be erased"); each hinted
//!   page takes one record per epoch (rotation); no page with room in any block the store can
//!   commit: the conventional append.
//! - U2DI: "Update is modified to a Delete and Insert": the row's slot is freed (no NAND
//!   operation) and the row inserted anew, by IAA when it is on, else at the append point.
//! - "No log, no index, no buffer pool" between SE and SSD: the paper describes none.
//!
//! [`Assumptions`] adds, one at a time, what the engine has and the paper's model does not (the
//! ablation): a Delete that writes its page, a log force per query, index maintenance, a buffer
//! pool; the fifth, 4 KiB DB pages, is the store's page size.
//!
//! The table keeps its row count (an Insert drawn above the target by more than `slack` becomes a
//! Delete and the reverse, as `kits::iaa`), so the device's free space is the controlled variable.
//! One stream of queries, each issued when the previous one completed (queue depth 1: the
//! paper's SE issues one query at a time; it states nothing else).
//!
//! Invariants:
//! 1. A slot is free in the SE's map iff no live row is in it; every live row's bytes (id,
//!    version) are what the device (or the buffer pool) holds at its LA (`check`).
//! 2. Without `delete_writes`, a Delete issues no page-store call at all.
//! 3. Without a buffer pool, a row write is exactly one `read_page` and one `write_page` of its
//!    LPA; an IAA insert goes to a page the store listed as valid in a committed victim.

use std::collections::{BTreeMap, HashMap, HashSet};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::pagestore::{PageKind, WriteHint, LOG_BLOCK_BYTES};
use storage::{Error, PageStore, Result};

use crate::iaa::{Query, Scheme};

/// What the engine has and the paper's model does not: the ablation's steps (docs/iaa.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Assumptions {
    /// A Delete writes its row's page (the engine's delete changes the page on flash).
    pub delete_writes: bool,
    /// Every query appends a log record and forces the log (a commit per query).
    pub log_force: bool,
    /// A unique index on the row's key: Insert, Delete and a U2DI move change a leaf page.
    pub index: bool,
    /// Buffer pool frames (0: none). Pages are read once into the pool and written when
    /// evicted; a page that took an IAA record is written at once (the engine writes hinted
    /// pages back at commit).
    pub buffer_frames: usize,
}

/// Bytes of an index entry with its share of B-tree slack: key 8 + record id 6 + slot 4 +
/// prefix and fill slack (the figure `lab::experiments::iaa::rows_for` sizes the engine's index
/// with, from the engine's own pages on a test load).
pub const INDEX_ENTRY_BYTES: usize = 40;
/// Log bytes a query appends beyond its row image: record header, LSNs, the commit record
/// (the order of the engine's: a data record's header plus a commit record).
pub const LOG_OVERHEAD_BYTES: usize = 64;
/// Fixed bytes of a row: id and version.
const HEAD_BYTES: usize = 16;
const FREE: u64 = u64::MAX;
const TABLE: u32 = 1;
const INDEX: u32 = 2;

/// The workload's knobs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaperConfig {
    /// DB pages (LPAs) the table spans; its rows fill `density` of their slots.
    pub table_pages: u64,
    /// Bytes of a row (at least 24).
    pub row_bytes: usize,
    /// Relative weights of Insert, Delete and Update.
    pub weights: [u32; 3],
    /// How far (fraction of the target) the row count may drift.
    pub slack: f64,
    /// Share of the table's slots the load fills (one hole every `1 / (1 - density)` slots).
    pub density: f64,
    pub scheme: Scheme,
    /// Victims committed at first, and at most.
    pub victims: u32,
    pub max_victims: u32,
    pub seed: u64,
    pub assume: Assumptions,
}

impl PaperConfig {
    /// Checked before any work (typed errors).
    pub fn check(&self, page_bytes: usize) -> Result<()> {
        if self.row_bytes < HEAD_BYTES + 8 || self.row_bytes > page_bytes {
            return Err(Error::Config(format!(
                "rows of {} bytes: between {} and the page's {page_bytes}",
                self.row_bytes,
                HEAD_BYTES + 8
            )));
        }
        crate::iaa::check_weights(&self.weights)?;
        if !(0.05..=0.98).contains(&self.density) {
            return Err(Error::Config(format!(
                "density {} is not in [0.05, 0.98] (inserts need free slots)",
                self.density
            )));
        }
        if self.table_pages == 0 || !(1..=self.max_victims).contains(&self.victims) {
            return Err(Error::Config(
                "a table of at least one page, 1 <= victims <= max victims".into(),
            ));
        }
        Ok(())
    }
}

/// The index pages of `rows` rows on pages of `page_bytes` (one leaf per `page_bytes /
/// INDEX_ENTRY_BYTES` keys).
pub fn index_pages(rows: u64, page_bytes: usize) -> u64 {
    rows.div_ceil((page_bytes / INDEX_ENTRY_BYTES).max(1) as u64)
}

/// Counters of the model (queries and what they cost at the seam).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PaperStats {
    pub queries: u64,
    pub inserts: u64,
    pub deletes: u64,
    pub updates: u64,
    /// Inserts (and U2DI moves) placed in a hinted page.
    pub hinted_inserts: u64,
    /// Of those with IAA on, the ones that found no hinted page with room (appended instead).
    pub unhinted_inserts: u64,
    /// Inserts placed at the append point.
    pub appended_inserts: u64,
    pub moved_updates: u64,
    pub in_place_updates: u64,
    /// DB pages read and written at the seam (table, index), log blocks forced.
    pub page_reads: u64,
    pub page_writes: u64,
    /// Page writes of hinted pages that took a record (aimed at a committed victim).
    pub aimed_page_writes: u64,
    pub delete_page_writes: u64,
    pub index_page_writes: u64,
    pub log_forces: u64,
    /// Dirty pages written when evicted from the buffer pool.
    pub evictions_written: u64,
    /// Times the committed victims changed (a new epoch).
    pub hint_epochs: u64,
    /// When the victims changed: pages still valid in the last list that got no record (they
    /// were copied by GC): table pages, and other pages (index), which inserts cannot empty.
    pub victim_pages_left_table: u64,
    pub victim_pages_left_other: u64,
    /// Of the table pages left, those with no free slot (full: no insert could empty them;
    /// IAA Fig. 10(a)'s "filled up" pages).
    pub victim_pages_left_full: u64,
    /// Victims the SE has the store keep committed (a level, not a count of events: it only
    /// grows, by one each time no committed victim held a page with room).
    pub victims_committed: u64,
}

/// The buffer pool of the ablation: LRU over whole pages.
#[derive(Debug, Default)]
struct Pool {
    frames: usize,
    /// pid -> (last use, data, dirty).
    pages: HashMap<u32, (u64, Vec<u8>, bool)>,
    lru: BTreeMap<u64, u32>,
    tick: u64,
}

/// The paper's storage engine over a page store.
#[derive(Debug)]
pub struct PaperEngine {
    cfg: PaperConfig,
    page_bytes: usize,
    rows_per_page: usize,
    /// Per slot: the row's id, or `FREE`.
    slot_id: Vec<u64>,
    slot_ver: Vec<u32>,
    /// Free slots per table page.
    free: Vec<u32>,
    /// Live slots (random choice of a row) and each slot's position there.
    live: Vec<u32>,
    pos: Vec<u32>,
    target: usize,
    next_id: u64,
    /// The conventional append point: the slot after the last row appended.
    append: u64,
    index_pages: u64,
    // IAA state.
    victims: u32,
    epoch: Option<u64>,
    hinted: Vec<u32>,
    used: HashSet<u32>,
    // Log state (ablation): bytes appended so far.
    log_bytes: u64,
    log_blocks: u64,
    pool: Pool,
    rng: Xoshiro256PlusPlus,
    buf: Vec<u8>,
    stats: PaperStats,
}

impl PaperEngine {
    /// The SE on `store`'s pages: loads the table (pages written in order, rows at `density`,
    /// one hole every `1 / (1 - density)` slots) and, with the index assumption, its index
    /// pages after it. Returns the engine and the load's completion time.
    pub fn load(
        store: &mut dyn PageStore,
        cfg: PaperConfig,
        at_ns: u64,
    ) -> Result<(PaperEngine, u64)> {
        let page_bytes = store.page_bytes();
        cfg.check(page_bytes)?;
        let rows_per_page = page_bytes / cfg.row_bytes;
        let slots = cfg.table_pages * rows_per_page as u64;
        let hole_every = ((1.0 / (1.0 - cfg.density)).round() as u64).max(2);
        let rows = slots - slots / hole_every;
        let index_pages = if cfg.assume.index {
            index_pages(rows, page_bytes)
        } else {
            0
        };
        if cfg.table_pages + index_pages > store.db_pages() {
            return Err(Error::Config(format!(
                "the table ({} pages) and its index ({index_pages}) exceed the store's {} pages",
                cfg.table_pages,
                store.db_pages()
            )));
        }
        let mut e = PaperEngine {
            cfg,
            page_bytes,
            rows_per_page,
            slot_id: vec![FREE; slots as usize],
            slot_ver: vec![0; slots as usize],
            free: vec![0; cfg.table_pages as usize],
            live: Vec::with_capacity(rows as usize),
            pos: vec![u32::MAX; slots as usize],
            target: rows as usize,
            next_id: 0,
            append: 0,
            index_pages,
            victims: cfg.victims,
            epoch: None,
            hinted: Vec::new(),
            used: HashSet::new(),
            log_bytes: 0,
            log_blocks: store.log_blocks(),
            pool: Pool {
                frames: cfg.assume.buffer_frames,
                ..Pool::default()
            },
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            buf: vec![0; page_bytes],
            stats: PaperStats::default(),
        };
        let mut t = at_ns;
        let mut page = vec![0u8; page_bytes];
        for p in 0..cfg.table_pages {
            page.fill(0);
            for i in 0..rows_per_page {
                let slot = p * rows_per_page as u64 + i as u64;
                if slot % hole_every == hole_every - 1 {
                    e.free[p as usize] += 1;
                    continue;
                }
                let id = e.next_id;
                e.next_id += 1;
                e.occupy(slot, id, 0);
                e.encode_row(&mut page, i, id, 0);
            }
            t = t.max(store.write_page(at_ns.max(t), p as u32, &page, hint(TABLE))?);
        }
        page.fill(0);
        for p in 0..index_pages {
            t = store.write_page(t, (cfg.table_pages + p) as u32, &page, hint(INDEX))?;
        }
        e.append = 0;
        Ok((e, t))
    }

    pub fn stats(&self) -> PaperStats {
        PaperStats {
            victims_committed: u64::from(self.victims),
            ..self.stats
        }
    }
    /// Rows live now.
    pub fn rows(&self) -> u64 {
        self.live.len() as u64
    }
    pub fn index_pages(&self) -> u64 {
        self.index_pages
    }

    /// One query, issued at `at_ns`; returns its completion.
    pub fn query(&mut self, store: &mut dyn PageStore, at_ns: u64) -> Result<u64> {
        let q = self.draw();
        self.stats.queries += 1;
        let mut t = at_ns;
        match q {
            Query::Insert => {
                self.stats.inserts += 1;
                let id = self.next_id;
                self.next_id += 1;
                t = self.insert(store, t, id, 0)?;
                t = self.index_touch(store, t, id)?;
            }
            Query::Delete => {
                self.stats.deletes += 1;
                let slot = self.pick();
                let id = self.slot_id[slot as usize];
                t = self.delete(store, t, slot)?;
                t = self.index_touch(store, t, id)?;
            }
            Query::Update => {
                self.stats.updates += 1;
                let slot = self.pick();
                let (id, ver) = (
                    self.slot_id[slot as usize],
                    self.slot_ver[slot as usize] + 1,
                );
                if self.u2di() {
                    // Update to Delete + Insert: the delete frees the slot (no NAND operation
                    // unless the ablation says so), the insert places the row anew.
                    self.stats.moved_updates += 1;
                    t = self.delete(store, t, slot)?;
                    t = self.insert(store, t, id, ver)?;
                    // The row's record id changed: its index entry with it.
                    t = self.index_touch(store, t, id)?;
                } else {
                    self.stats.in_place_updates += 1;
                    self.slot_ver[slot as usize] = ver;
                    t = self.write_row(store, t, slot, false)?;
                }
            }
        }
        if self.cfg.assume.log_force {
            t = self.log_force(store, t)?;
        }
        Ok(t)
    }

    fn iaa(&self) -> bool {
        matches!(self.cfg.scheme, Scheme::Iaa | Scheme::IaaU2di)
    }
    fn u2di(&self) -> bool {
        matches!(self.cfg.scheme, Scheme::U2di | Scheme::IaaU2di)
    }

    fn draw(&mut self) -> Query {
        let full = self.live.len() as u64 >= self.slot_id.len() as u64 - 1;
        crate::iaa::draw_query(
            &mut self.rng,
            self.cfg.weights,
            (self.live.len(), self.target),
            self.cfg.slack,
            full,
        )
    }

    /// A live row's slot, uniformly.
    fn pick(&mut self) -> u64 {
        let i = self.rng.random_range(0..self.live.len());
        u64::from(self.live[i])
    }

    fn occupy(&mut self, slot: u64, id: u64, ver: u32) {
        let s = slot as usize;
        debug_assert_eq!(self.slot_id[s], FREE, "slot {slot} taken twice");
        self.slot_id[s] = id;
        self.slot_ver[s] = ver;
        self.pos[s] = self.live.len() as u32;
        self.live.push(slot as u32);
    }

    fn vacate(&mut self, slot: u64) {
        let s = slot as usize;
        let i = self.pos[s] as usize;
        let last = *self.live.last().expect("a live row to vacate");
        self.live.swap_remove(i);
        if last as usize != s {
            self.pos[last as usize] = i as u32;
        }
        self.pos[s] = u32::MAX;
        self.slot_id[s] = FREE;
        self.free[s / self.rows_per_page] += 1;
    }

    /// Insert (Fig. 9): into a hinted page with room (IAA on), else at the append point.
    fn insert(&mut self, store: &mut dyn PageStore, t: u64, id: u64, ver: u32) -> Result<u64> {
        let hinted = if self.iaa() {
            let h = self.hinted_page(store);
            if h.is_none() {
                self.stats.unhinted_inserts += 1;
            }
            h
        } else {
            None
        };
        let slot = match hinted {
            Some(p) => {
                self.stats.hinted_inserts += 1;
                self.free_slot_in(p)
                    .expect("a hinted page is chosen with room")
            }
            None => {
                self.stats.appended_inserts += 1;
                let s = self.next_append();
                self.append = (s + 1) % self.slot_id.len() as u64;
                s
            }
        };
        self.free[slot as usize / self.rows_per_page] -= 1;
        self.occupy(slot, id, ver);
        self.write_row(store, t, slot, hinted.is_some())
    }

    /// Delete: frees the slot; a NAND operation only under the ablation's `delete_writes`.
    fn delete(&mut self, store: &mut dyn PageStore, t: u64, slot: u64) -> Result<u64> {
        self.vacate(slot);
        if !self.cfg.assume.delete_writes {
            return Ok(t);
        }
        self.stats.delete_page_writes += 1;
        let (page, i) = self.split(slot);
        let row = self.cfg.row_bytes;
        self.modify(store, t, page, TABLE, false, |b| {
            b[i * row..i * row + HEAD_BYTES].fill(0)
        })
    }

    fn split(&self, slot: u64) -> (u32, usize) {
        (
            (slot / self.rows_per_page as u64) as u32,
            (slot % self.rows_per_page as u64) as usize,
        )
    }

    /// The row in `slot` written to its LPA (Fig. 5's read-modify-write).
    fn write_row(
        &mut self,
        store: &mut dyn PageStore,
        t: u64,
        slot: u64,
        aimed: bool,
    ) -> Result<u64> {
        let (page, i) = self.split(slot);
        let (id, ver) = (self.slot_id[slot as usize], self.slot_ver[slot as usize]);
        if aimed {
            self.stats.aimed_page_writes += 1;
        }
        let row = self.cfg.row_bytes;
        self.modify(store, t, page, TABLE, aimed, |b| {
            encode(&mut b[i * row..(i + 1) * row], id, ver)
        })
    }

    fn encode_row(&self, page: &mut [u8], i: usize, id: u64, ver: u32) {
        let row = self.cfg.row_bytes;
        encode(&mut page[i * row..(i + 1) * row], id, ver);
    }

    /// Changes page `pid`: without a pool a read-modify-write; with one, the page is changed in
    /// its frame (read on a miss, evicting the least recently used page, written if dirty) and
    /// written now only if `through`.
    fn modify(
        &mut self,
        store: &mut dyn PageStore,
        t: u64,
        pid: u32,
        object: u32,
        through: bool,
        f: impl FnOnce(&mut [u8]),
    ) -> Result<u64> {
        self.stats.page_writes += u64::from(self.pool.frames == 0 || through);
        if object == INDEX {
            self.stats.index_page_writes += 1;
        }
        if self.pool.frames == 0 {
            self.stats.page_reads += 1;
            let t = store.read_page(t, pid, &mut self.buf)?;
            f(&mut self.buf);
            return store.write_page(t, pid, &self.buf, hint(object));
        }
        let mut t = t;
        if !self.pool.pages.contains_key(&pid) {
            if self.pool.pages.len() >= self.pool.frames {
                let (_, victim) = self.pool.lru.pop_first().expect("a full pool has pages");
                let (_, data, dirty) = self.pool.pages.remove(&victim).expect("in the pool");
                if dirty {
                    self.stats.evictions_written += 1;
                    self.stats.page_writes += 1;
                    let kind = if u64::from(victim) < self.cfg.table_pages {
                        TABLE
                    } else {
                        INDEX
                    };
                    t = store.write_page(t, victim, &data, hint(kind))?;
                }
            }
            self.stats.page_reads += 1;
            let mut data = vec![0u8; self.page_bytes];
            t = store.read_page(t, pid, &mut data)?;
            self.pool.pages.insert(pid, (0, data, false));
        } else {
            let (last, _, _) = self.pool.pages[&pid];
            self.pool.lru.remove(&last);
        }
        self.pool.tick += 1;
        let tick = self.pool.tick;
        self.pool.lru.insert(tick, pid);
        let e = self.pool.pages.get_mut(&pid).expect("fetched above");
        e.0 = tick;
        f(&mut e.1);
        if through {
            e.2 = false;
            return store.write_page(t, pid, &e.1, hint(object));
        }
        e.2 = true;
        Ok(t)
    }

    /// The next free slot from the append point on, wrapping round the table.
    fn next_append(&self) -> u64 {
        let n = self.slot_id.len() as u64;
        (0..n)
            .map(|k| (self.append + k) % n)
            .find(|&s| self.slot_id[s as usize] == FREE)
            .expect("the row count is kept below the table's slots")
    }

    fn free_slot_in(&self, page: u32) -> Option<u64> {
        let first = u64::from(page) * self.rows_per_page as u64;
        (first..first + self.rows_per_page as u64).find(|&s| self.slot_id[s as usize] == FREE)
    }

    /// Fetches the table pages valid in the committed victims now (a new epoch starts a new
    /// round of the rotation and counts the pages the last one left to GC).
    fn refresh(&mut self, store: &mut dyn PageStore) -> bool {
        let mut pages = Vec::new();
        let Some(info) = store.gc_victims(self.victims, u64::MAX, &mut pages) else {
            return false;
        };
        if Some(info.epoch) != self.epoch {
            for pid in &self.hinted {
                if self.used.contains(pid) || pages.contains(pid) {
                    continue;
                }
                if u64::from(*pid) < self.cfg.table_pages {
                    self.stats.victim_pages_left_table += 1;
                    self.stats.victim_pages_left_full += u64::from(self.free[*pid as usize] == 0);
                } else {
                    self.stats.victim_pages_left_other += 1;
                }
            }
            self.stats.hint_epochs += 1;
            self.epoch = Some(info.epoch);
            self.used.clear();
        }
        self.hinted = pages;
        true
    }

    /// IAA: the next hinted table page with a free slot that had no record this epoch (the
    /// rotation LPA0 -> LPA1 -> ...); when there is none, one more victim is committed (up to
    /// `max_victims`, or until the store has no closed block left to commit: the epoch stays):
    /// its pages are the next ones GC needs empty. The list is scanned afresh for every insert
    /// ("whenever Insert is issued"): a delete may have made room in a hinted page since.
    fn hinted_page(&mut self, store: &mut dyn PageStore) -> Option<u32> {
        if !self.refresh(store) {
            return None;
        }
        loop {
            let found = self.hinted.iter().copied().find(|&p| {
                u64::from(p) < self.cfg.table_pages
                    && self.free[p as usize] > 0
                    && !self.used.contains(&p)
            });
            if let Some(p) = found {
                self.used.insert(p);
                return Some(p);
            }
            if self.victims >= self.cfg.max_victims {
                return None;
            }
            let before = self.epoch;
            self.victims += 1;
            self.refresh(store);
            if self.epoch == before {
                // Nothing more to commit: every closed block with valid pages already is.
                self.victims -= 1;
                return None;
            }
        }
    }

    /// Index maintenance (ablation): the leaf of key `id` changes (a B+-tree leaf per
    /// `page_bytes / INDEX_ENTRY_BYTES` keys, keys in id order, leaves reused round the index's
    /// pages: new ids fill the rightmost leaf, deletes and moves touch any).
    fn index_touch(&mut self, store: &mut dyn PageStore, t: u64, id: u64) -> Result<u64> {
        if self.index_pages == 0 {
            return Ok(t);
        }
        let per_leaf = (self.page_bytes / INDEX_ENTRY_BYTES) as u64;
        let leaf = (id / per_leaf) % self.index_pages;
        let pid = (self.cfg.table_pages + leaf) as u32;
        let at = ((id % per_leaf) as usize * INDEX_ENTRY_BYTES) % self.page_bytes;
        self.modify(store, t, pid, INDEX, false, |b| {
            b[at..at + 8].copy_from_slice(&id.to_le_bytes())
        })
    }

    /// A commit's log force (ablation): the query's record appended to the circular log and
    /// the log blocks it lies in written and forced.
    fn log_force(&mut self, store: &mut dyn PageStore, t: u64) -> Result<u64> {
        if self.log_blocks == 0 {
            return Err(Error::Config("the log assumption needs a log area".into()));
        }
        let block = LOG_BLOCK_BYTES as u64;
        let first = self.log_bytes / block;
        self.log_bytes += (self.cfg.row_bytes + LOG_OVERHEAD_BYTES) as u64;
        let last = (self.log_bytes - 1) / block;
        let data = vec![0x4Cu8; LOG_BLOCK_BYTES];
        let mut t = t;
        for b in first..=last {
            t = store.write_log(t, b % self.log_blocks, &data)?;
        }
        self.stats.log_forces += 1;
        store.force_log(t)
    }

    /// Writes every dirty page of the buffer pool (before `check`).
    pub fn flush(&mut self, store: &mut dyn PageStore, t: u64) -> Result<u64> {
        let mut t = t;
        let mut dirty: Vec<u32> = self
            .pool
            .pages
            .iter()
            .filter(|(_, e)| e.2)
            .map(|(&p, _)| p)
            .collect();
        dirty.sort_unstable();
        for pid in dirty {
            let kind = if u64::from(pid) < self.cfg.table_pages {
                TABLE
            } else {
                INDEX
            };
            let e = self.pool.pages.get_mut(&pid).expect("listed above");
            e.2 = false;
            t = store.write_page(t, pid, &e.1, hint(kind))?;
        }
        Ok(t)
    }

    /// Invariant 1: every live row reads back as written, and the free-slot counts agree with
    /// the slot map. Returns the problems (empty: passed). Reads through the pool if any.
    pub fn check(&mut self, store: &mut dyn PageStore, t: u64) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        let mut page = vec![0u8; self.page_bytes];
        let row = self.cfg.row_bytes;
        for p in 0..self.cfg.table_pages as u32 {
            match self.pool.pages.get(&p) {
                Some(e) => page.copy_from_slice(&e.1),
                None => {
                    store.read_page(t, p, &mut page)?;
                }
            }
            let mut free = 0;
            for i in 0..self.rows_per_page {
                let s = p as usize * self.rows_per_page + i;
                if self.slot_id[s] == FREE {
                    free += 1;
                    continue;
                }
                let got = &page[i * row..(i + 1) * row];
                let mut want = vec![0u8; row];
                encode(&mut want, self.slot_id[s], self.slot_ver[s]);
                if got != want.as_slice() && problems.len() < 10 {
                    problems.push(format!(
                        "page {p} slot {i}: row {} version {} does not read back",
                        self.slot_id[s], self.slot_ver[s]
                    ));
                }
            }
            if free != self.free[p as usize] && problems.len() < 10 {
                problems.push(format!(
                    "page {p}: {free} free slots, the count says {}",
                    self.free[p as usize]
                ));
            }
        }
        if self.live.len() != self.slot_id.iter().filter(|&&x| x != FREE).count() {
            problems.push("the live list and the slot map disagree".into());
        }
        Ok(problems)
    }

    /// The table pages listed as valid in the committed victims at the last refresh (tests).
    pub fn hinted_pages(&self) -> &[u32] {
        &self.hinted
    }
}

fn hint(object: u32) -> WriteHint {
    WriteHint {
        object,
        kind: if object == INDEX {
            PageKind::BTreeLeaf
        } else {
            PageKind::Heap
        },
    }
}

/// A row's bytes: id, version, and a pad that is a function of both (a stale row shows).
fn encode(b: &mut [u8], id: u64, ver: u32) {
    b[..8].copy_from_slice(&id.to_le_bytes());
    b[8..16].copy_from_slice(&u64::from(ver).to_le_bytes());
    let x = (id as u8) ^ (ver as u8).rotate_left(3) ^ 0x5A;
    b[HEAD_BYTES..].fill(x);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
    use super::*;
    use nand::{DeviceConfig, Nand};
    use storage::{BlockPageStore, NativeConfig, NativeStore};

    /// 16 KiB flash pages, 4 per block, 16 blocks per plane of `tiny` (8 planes): 8 MiB.
    fn store(native: bool) -> Box<dyn PageStore> {
        let set = [
            "geometry.blocks_per_plane=16",
            "geometry.page_size_bytes=16384",
            "geometry.oob_size_bytes=512",
            "geometry.pages_per_block=4",
        ]
        .map(String::from);
        let nand = Nand::new(DeviceConfig::preset("tiny", &set).unwrap()).unwrap();
        if native {
            Box::new(
                NativeStore::format(
                    nand,
                    NativeConfig {
                        page_bytes: 16384,
                        log_blocks: Some(64),
                        spare_factor: 0.2,
                        ..NativeConfig::default()
                    },
                )
                .unwrap(),
            )
        } else {
            let opts = ftl::FtlOptions {
                spare_factor: 0.2,
                ..ftl::FtlOptions::default()
            };
            Box::new(
                BlockPageStore::new(ftl::build("page", nand, &opts).unwrap(), 16384, Some(64))
                    .unwrap(),
            )
        }
    }

    fn cfg(s: &dyn PageStore, scheme: Scheme) -> PaperConfig {
        PaperConfig {
            table_pages: s.db_pages() * 7 / 10,
            row_bytes: 256,
            weights: [1, 1, 1],
            slack: 0.02,
            density: 0.85,
            scheme,
            victims: 1,
            max_victims: 8,
            seed: 7,
            assume: Assumptions::default(),
        }
    }

    /// (flash reads, programs, erases) and (host unit reads, writes) of the store now.
    fn counts(s: &dyn PageStore) -> ((u64, u64, u64), (u64, u64)) {
        let f = s.nand().unwrap().report().flash;
        let h = s.device_report().unwrap().host;
        ((f.reads, f.programs, f.erases), (h.reads, h.writes))
    }

    /// Loaded and aged past the load (GC running), so that victims hold table pages.
    fn aged(native: bool, scheme: Scheme) -> (Box<dyn PageStore>, PaperEngine, u64) {
        let mut s = store(native);
        let c = cfg(s.as_ref(), scheme);
        let (mut e, mut t) = PaperEngine::load(s.as_mut(), c, 0).unwrap();
        for _ in 0..3_000 {
            t = e.query(s.as_mut(), t).unwrap();
        }
        assert!(s.nand().unwrap().report().flash.erases > 0, "GC ran");
        (s, e, t)
    }

    /// Invariant 2 (IAA Fig. 9: "Delete ... has no corresponding operation in the FTL (no NAND
    /// operation)"): a Delete issues no flash operation and no call reaches the device.
    #[test]
    fn a_delete_issues_no_flash_operation() {
        for native in [false, true] {
            let (mut s, mut e, t) = aged(native, Scheme::IaaU2di);
            let before = counts(s.as_ref());
            let slot = e.pick();
            let done = e.delete(s.as_mut(), t, slot).unwrap();
            assert_eq!(done, t, "a delete takes no device time");
            assert_eq!(counts(s.as_ref()), before, "native {native}");
            assert_eq!(e.slot_id[slot as usize], FREE);
        }
    }

    /// Invariant 3 (IAA Fig. 5): an Update in place is one read-modify-write of the row's LPA:
    /// one DB page read (4 units) and one written (4 units: one flash page program, unless GC
    /// had to run first).
    #[test]
    fn an_update_in_place_is_one_read_modify_write() {
        for native in [false, true] {
            let (mut s, mut e, mut t) = aged(native, Scheme::Conventional);
            for _ in 0..50 {
                let slot = e.pick();
                let before = counts(s.as_ref());
                let st0 = e.stats();
                let gc0 = s.device_report().unwrap().gc.migrations;
                e.slot_ver[slot as usize] += 1;
                t = e.write_row(s.as_mut(), t, slot, false).unwrap();
                let after = counts(s.as_ref());
                assert_eq!(e.stats().page_reads - st0.page_reads, 1);
                assert_eq!(e.stats().page_writes - st0.page_writes, 1);
                assert_eq!(
                    after.1 .0 - before.1 .0,
                    4,
                    "native {native}: host unit reads"
                );
                assert_eq!(
                    after.1 .1 - before.1 .1,
                    4,
                    "native {native}: host unit writes"
                );
                if s.device_report().unwrap().gc.migrations == gc0 {
                    assert_eq!(after.0 .1 - before.0 .1, 1, "native {native}: one program");
                }
            }
            let t = e.flush(s.as_mut(), t).unwrap();
            assert_eq!(e.check(s.as_mut(), t).unwrap(), Vec::<String>::new());
        }
    }

    /// Invariant 3, IAA: every insert placed by the hint lands in a page the store listed as
    /// valid in a committed victim just before, and it takes one record per epoch (rotation);
    /// every row reads back afterwards (invariant 1).
    #[test]
    fn iaa_inserts_land_in_hinted_pages() {
        for native in [false, true] {
            let (mut s, mut e, mut t) = aged(native, Scheme::Iaa);
            let mut hinted = 0;
            for id in 0..300u64 {
                let before = e.stats().hinted_inserts;
                let n0 = e.live.len();
                t = e.insert(s.as_mut(), t, 1_000_000 + id, 0).unwrap();
                let slot = u64::from(*e.live.last().unwrap());
                assert_eq!(e.live.len(), n0 + 1);
                if e.stats().hinted_inserts > before {
                    hinted += 1;
                    let page = (slot / e.rows_per_page as u64) as u32;
                    assert!(
                        e.hinted_pages().contains(&page),
                        "native {native}: page {page} not in the hint {:?}",
                        e.hinted_pages()
                    );
                }
                // Keep the table's size: a delete per insert (no flash operation).
                let victim = e.pick();
                t = e.delete(s.as_mut(), t, victim).unwrap();
            }
            // Only as many as the victims hold pages with room: the rest are appended.
            assert!(
                hinted >= 30,
                "native {native}: {hinted} of 300 inserts hinted"
            );
            assert_eq!(e.check(s.as_mut(), t).unwrap(), Vec::<String>::new());
        }
    }

    /// "The target next block to be erased" is always named: with the commitment uncapped, an
    /// IAA+U2DI insert finds no room in the committed victims only when no closed block the
    /// store could commit has any, so none is appended (the fallback that fills pages up, IAA
    /// Fig. 10(a)); and asking for more victims than the store has closed blocks stops at what
    /// it has (no endless commitment).
    #[test]
    fn with_the_commitment_uncapped_every_iaa_u2di_insert_is_aimed() {
        for native in [false, true] {
            let mut s = store(native);
            let mut c = cfg(s.as_ref(), Scheme::IaaU2di);
            c.max_victims = u32::MAX;
            let (mut e, mut t) = PaperEngine::load(s.as_mut(), c, 0).unwrap();
            for _ in 0..6_000 {
                t = e.query(s.as_mut(), t).unwrap();
            }
            let st = e.stats();
            assert!(
                s.nand().unwrap().report().flash.erases > 0,
                "native {native}: GC ran"
            );
            assert!(st.hinted_inserts > 3_000, "native {native}: {st:?}");
            assert_eq!(st.appended_inserts, 0, "native {native}: {st:?}");
            let blocks = u64::from(s.nand().unwrap().geometry().blocks());
            assert!(
                (2..blocks).contains(&st.victims_committed),
                "native {native}: {} victims of {blocks} blocks",
                st.victims_committed
            );
            assert_eq!(e.check(s.as_mut(), t).unwrap(), Vec::<String>::new());
        }
    }

    /// The ablation's assumptions keep the rows intact too: every row reads back after queries
    /// with delete writes, log forces, an index and a buffer pool (flushed first).
    #[test]
    fn the_ablations_assumptions_keep_every_row() {
        let mut s = store(false);
        let mut c = cfg(s.as_ref(), Scheme::IaaU2di);
        c.table_pages = s.db_pages() / 2;
        c.assume = Assumptions {
            delete_writes: true,
            log_force: true,
            index: true,
            buffer_frames: 16,
        };
        let (mut e, mut t) = PaperEngine::load(s.as_mut(), c, 0).unwrap();
        for _ in 0..2_000 {
            t = e.query(s.as_mut(), t).unwrap();
        }
        let st = e.stats();
        assert!(st.delete_page_writes > 0 && st.log_forces == 2_000 && st.index_page_writes > 0);
        assert!(st.evictions_written > 0 && st.hinted_inserts > 0);
        let t = e.flush(s.as_mut(), t).unwrap();
        assert_eq!(e.check(s.as_mut(), t).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn bad_configs_are_refused() {
        let s = store(false);
        let mut c = cfg(s.as_ref(), Scheme::Iaa);
        c.row_bytes = 8;
        assert!(c.check(16384).is_err());
        let mut c = cfg(s.as_ref(), Scheme::Iaa);
        c.density = 0.99;
        assert!(c.check(16384).is_err());
        let mut c = cfg(s.as_ref(), Scheme::Iaa);
        c.victims = 9;
        assert!(c.check(16384).is_err());
    }
}
