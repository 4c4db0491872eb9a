//! Bulk loading: an empty table filled from a stream of rows, its heap pages packed densely and
//! its B+-trees built bottom-up from sorted keys, instead of one logged insert per row and index.
//!
//! How it works:
//! - Heap: the rows go, in the order given, into a page image kept in memory; a page that can
//!   take no more (or has reached the fill factor) is written through the buffer pool with one
//!   redo-only log record (its allocation and its image), and the chain moves to the next page.
//! - Indexes: each row's key for every index of the table is kept (in one flat arena per index);
//!   at the end the keys are sorted if they did not arrive sorted, duplicates in a unique index
//!   are refused, and the tree is built a level at a time: leaves filled to the fill factor and
//!   linked both ways, then inner levels over the leaves' first keys, until one node is left,
//!   which becomes the tree's root page (whose id the catalog keeps, btree.rs).
//! - End: every dirty page is written back and a checkpoint is taken.
//!
//! Logging and the recovery rule: one redo-only record per page (its image and allocation),
//! never undone, no per-row records and no locks. So redo restores every page written before a
//! crash, but a load is not a transaction: a crash during a bulk load leaves a prefix of the
//! rows (and index roots that do not cover them yet), and the database must be loaded again.
//! A load is complete, and survives any later crash, once `bulk_finish` has returned: its
//! checkpoint has made every page durable and moved restart's starting point past the load.
//!
//! Invariants:
//! 1. Only an empty table is bulk loaded (a head page with no record, a chain of one page, and
//!    index roots that are empty leaves): nothing the load does has to be merged with old data.
//! 2. The heap chain ends at the head's `aux` (tail), and the head's `aux2` is the chain length,
//!    as after row-at-a-time inserts (heap.rs invariant 3).
//! 3. The trees satisfy btree.rs invariants 1-3 (sorted keys, one leaf level, a complete leaf
//!    chain); `Engine::check` verifies them after a load in the tests.
//! 4. Every page is written through `log_apply` (engine invariant 1: no page change without a
//!    log record), so the WAL rule and full-page writes hold as for any other change.

use crate::access::PageAccess;
use crate::btree_node;
use crate::buffer::Fix;
use crate::catalog::{Index, Table};
use crate::error::{Error, Result};
use crate::ipa::IpaScheme;
use crate::log::{Body, Op};
use crate::page::{self, PageType};
use crate::pagestore::PageKind;
use crate::slotted;
use crate::tuple::Schema;
use crate::{ObjectId, PageId, Rid};

/// Options of a bulk load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkOptions {
    /// Fill heap pages and B+-tree nodes to this percentage of their room (100: as full as they
    /// go, for read-mostly data; less leaves room for later inserts and growing updates).
    pub fill_percent: u8,
}

impl Default for BulkOptions {
    fn default() -> Self {
        BulkOptions { fill_percent: 100 }
    }
}

/// What a bulk load wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BulkStats {
    pub rows: u64,
    pub heap_pages: u64,
    pub index_pages: u64,
}

/// The keys of one index, in load order: a flat arena of key bytes and, per row, where its key
/// ends and its record id (no allocation per row).
#[derive(Debug)]
pub(crate) struct Keys {
    index: Index,
    bytes: Vec<u8>,
    ends: Vec<(usize, Rid)>,
    sorted: bool,
}

impl Keys {
    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1].0 };
        &self.bytes[start..self.ends[i].0]
    }
}

/// A bulk load in progress (`Engine::bulk_begin`).
#[derive(Debug)]
pub struct BulkLoad {
    table: ObjectId,
    head: PageId,
    schema: Schema,
    opts: BulkOptions,
    /// The heap page being filled, its id and the allocation op still to be logged with it.
    page: Vec<u8>,
    pid: PageId,
    alloc: Option<Op>,
    /// Free bytes a page must keep (100 - fill factor).
    reserve_bytes: usize,
    keys: Vec<Keys>,
    stats: BulkStats,
}

impl BulkLoad {
    pub fn rows(&self) -> u64 {
        self.stats.rows
    }
    /// The table being loaded.
    pub fn table(&self) -> ObjectId {
        self.table
    }
    /// The table's schema (rows are encoded with it for `bulk_insert`).
    pub fn schema(&self) -> &Schema {
        &self.schema
    }
}

/// Refuses a fill factor outside 10% to 100% (before `Engine::bulk_begin` looks at the table).
pub(crate) fn check_options(opts: BulkOptions) -> Result<()> {
    if !(10..=100).contains(&opts.fill_percent) {
        return Err(Error::Config(format!(
            "a bulk load's fill factor is 10% to 100%, not {}%",
            opts.fill_percent
        )));
    }
    Ok(())
}

fn reserve(page_bytes: usize, fill_percent: u8) -> usize {
    page_bytes * usize::from(100 - fill_percent.min(100)) / 100
}

/// Bulk loading, written against [`PageAccess`] (the engine implements both); the engine's
/// `bulk_begin`, `bulk_insert` and `bulk_finish` (engine/bulk.rs) add the catalog lookups and
/// the final write-back and checkpoint.
pub(crate) trait Bulk: PageAccess {
    /// Starts a bulk load of the empty table `t` (invariant 1), whose indexes the engine looked
    /// up in the catalog (`Engine::bulk_begin`, engine/bulk.rs), in `t.indexes` order.
    fn bulk_start(
        &mut self,
        table: ObjectId,
        t: Table,
        indexes: Vec<Result<Index>>,
        opts: BulkOptions,
    ) -> Result<BulkLoad> {
        let f = self.fix(t.head, Fix::Read)?;
        let p = self.pool().page(f);
        let empty = slotted::nslots(p) == 0 && slotted::aux(p) == t.head && page::next(p) == 0;
        self.pool_mut().unfix(f);
        if !empty {
            return Err(Error::Unsupported(format!(
                "bulk load into table '{}', which is not empty",
                t.name
            )));
        }
        let mut keys = Vec::new();
        for index in indexes {
            let index = index?;
            let f = self.fix(index.root, Fix::Read)?;
            let p = self.pool().page(f);
            let leaf = page::page_type(p) == PageType::BTreeLeaf && slotted::nslots(p) == 0;
            self.pool_mut().unfix(f);
            if !leaf {
                return Err(Error::Unsupported(format!(
                    "bulk load into index '{}', which is not empty",
                    index.name
                )));
            }
            keys.push(Keys {
                index,
                bytes: Vec::new(),
                ends: Vec::new(),
                sorted: true,
            });
        }
        let pb = self.page_bytes();
        let mut img = vec![0u8; pb];
        heap_page(&mut img, t.head, table, self.ipa_scheme(table));
        slotted::set_aux(&mut img, t.head);
        slotted::set_aux2(&mut img, 1);
        Ok(BulkLoad {
            table,
            head: t.head,
            schema: t.schema,
            opts,
            page: img,
            pid: t.head,
            alloc: None,
            reserve_bytes: reserve(pb, opts.fill_percent),
            keys,
            stats: BulkStats::default(),
        })
    }

    /// Adds one encoded row (it must match the table's schema); returns its record id.
    fn bulk_add(&mut self, b: &mut BulkLoad, row: &[u8]) -> Result<Rid> {
        let ipa_bytes = self.ipa_scheme(b.table).map_or(0, |s| s.area_bytes());
        let max = slotted::max_record(self.page_bytes()) - 64 - ipa_bytes;
        if row.len() > max {
            return Err(Error::RecordTooLarge {
                bytes: row.len(),
                max,
            });
        }
        let vals = b.schema.decode(row)?;
        let room = |p: &[u8]| {
            slotted::fits(p, row.len(), true)
                && slotted::free_space(p) >= row.len() + 4 + b.reserve_bytes
        };
        if slotted::nslots(&b.page) > 0 && !room(&b.page) {
            // The page is full: link it to the next one and write it.
            let (next, alloc) = self.alloc_page(b.table, PageKind::Heap, &[b.pid])?;
            page::set_next(&mut b.page, next);
            self.bulk_write_heap_page(b)?;
            heap_page(&mut b.page, next, b.table, self.ipa_scheme(b.table));
            b.pid = next;
            b.alloc = Some(alloc);
            b.stats.heap_pages += 1;
        }
        let slot = slotted::nslots(&b.page);
        slotted::insert_at(&mut b.page, slot, row);
        let rid = Rid {
            page: b.pid,
            slot: slot as u16,
        };
        for k in &mut b.keys {
            let start = k.bytes.len();
            for &c in &k.index.columns {
                crate::keyenc::encode_into(&mut k.bytes, b.schema.columns[c].ty, &vals[c])?;
            }
            if !k.index.unique {
                k.bytes.extend_from_slice(&rid.encode());
            }
            let end = k.bytes.len();
            if end - start > btree_node::max_key_bytes(self.page_bytes()) {
                return Err(Error::RecordTooLarge {
                    bytes: end - start,
                    max: btree_node::max_key_bytes(self.page_bytes()),
                });
            }
            if let Some(&(prev_end, _)) = k.ends.last() {
                let prev_start = if k.ends.len() >= 2 {
                    k.ends[k.ends.len() - 2].0
                } else {
                    0
                };
                if k.bytes[prev_start..prev_end] >= k.bytes[start..end] {
                    k.sorted = false;
                }
            }
            k.ends.push((end, rid));
        }
        b.stats.rows += 1;
        Ok(rid)
    }

    fn bulk_write_heap_page(&mut self, b: &mut BulkLoad) -> Result<()> {
        let mut ops: Vec<Op> = b.alloc.take().into_iter().collect();
        ops.push(Op::image(b.pid, &b.page));
        self.log_apply(0, Body::Redo(ops))?;
        Ok(())
    }

    /// Writes the last heap page and builds the indexes; `Engine::bulk_finish` then writes every
    /// page back and checkpoints.
    fn bulk_write_rest(&mut self, mut b: BulkLoad) -> Result<BulkStats> {
        self.bulk_write_heap_page(&mut b)?;
        b.stats.heap_pages += 1;
        // The head learns the tail and the chain's length (invariant 2).
        self.log_apply(
            0,
            Body::Redo(vec![
                Op::SetField {
                    pid: b.head,
                    offset: 40,
                    value: b.pid,
                },
                Op::SetField {
                    pid: b.head,
                    offset: 44,
                    value: b.stats.heap_pages as u32,
                },
            ]),
        )?;
        for k in std::mem::take(&mut b.keys) {
            b.stats.index_pages += self.bulk_build_index(k, b.opts)?;
        }
        Ok(b.stats)
    }

    /// Builds one tree bottom-up from its keys; returns the pages written.
    fn bulk_build_index(&mut self, k: Keys, opts: BulkOptions) -> Result<u64> {
        let n = k.ends.len();
        let mut order: Vec<u32> = (0..n as u32).collect();
        if !k.sorted {
            order.sort_unstable_by(|&a, &b| k.key(a as usize).cmp(k.key(b as usize)));
        }
        for w in order.windows(2) {
            if k.key(w[0] as usize) == k.key(w[1] as usize) {
                return Err(Error::DuplicateKey {
                    index: k.index.name.clone(),
                });
            }
        }
        let pb = self.page_bytes();
        let keep = reserve(pb, opts.fill_percent);
        let object = k.index.id;
        let root = k.index.root;
        let mut written = 0u64;
        // Level 0: the leaves, written as they fill; `level` collects each node's first key and
        // page for the level above.
        let mut level: Vec<(Vec<u8>, PageId)> = Vec::new();
        let mut img = vec![0u8; pb];
        node_page(&mut img, true, 0, object, self.ipa_scheme(object));
        let mut pid: Option<(PageId, Option<Op>)> = None;
        let mut prev: PageId = 0;
        let mut first_key: Vec<u8> = Vec::new();
        for (i, &at) in order.iter().enumerate() {
            let (key, rid) = (k.key(at as usize), k.ends[at as usize].1);
            let e = btree_node::entry(key, &rid.encode());
            if slotted::nslots(&img) > 0
                && !(slotted::fits(&img, e.len(), true)
                    && slotted::free_space(&img) >= e.len() + 4 + keep)
            {
                // Full, and more entries follow: this leaf is not the root.
                let (me, alloc) = match pid.take() {
                    Some(x) => x,
                    None => {
                        let (p, a) = self.alloc_page(object, PageKind::BTreeLeaf, &[])?;
                        (p, Some(a))
                    }
                };
                let (next, next_alloc) = self.alloc_page(object, PageKind::BTreeLeaf, &[me])?;
                page::set_prev(&mut img, prev);
                page::set_next(&mut img, next);
                self.bulk_write_node(&mut img, me, alloc)?;
                written += 1;
                level.push((std::mem::take(&mut first_key), me));
                prev = me;
                pid = Some((next, Some(next_alloc)));
                node_page(&mut img, true, 0, object, self.ipa_scheme(object));
            }
            if slotted::nslots(&img) == 0 {
                first_key = key.to_vec();
            }
            let s = slotted::nslots(&img);
            slotted::insert_at(&mut img, s, &e);
            debug_assert!(i + 1 == n || s < u16::MAX as usize);
        }
        // The last leaf: the root itself when it is the only one.
        match pid {
            None => {
                self.bulk_write_node(&mut img, root, None)?;
                return Ok(written + 1);
            }
            Some((me, alloc)) => {
                page::set_prev(&mut img, prev);
                page::set_next(&mut img, 0);
                self.bulk_write_node(&mut img, me, alloc)?;
                written += 1;
                level.push((first_key, me));
            }
        }
        // Inner levels until one node holds them all; that node goes to the root's page.
        let mut height: u16 = 1;
        loop {
            assert!(level.len() >= 2, "an inner level has at least two children");
            let mut above: Vec<(Vec<u8>, PageId)> = Vec::new();
            let mut i = 0;
            while i < level.len() {
                node_page(&mut img, false, height, object, self.ipa_scheme(object));
                slotted::set_aux(&mut img, level[i].1);
                let first = level[i].0.clone();
                i += 1;
                while i < level.len() {
                    let e = btree_node::entry(&level[i].0, &level[i].1.to_le_bytes());
                    if !(slotted::fits(&img, e.len(), true)
                        && slotted::free_space(&img) >= e.len() + 4 + keep)
                    {
                        break;
                    }
                    let s = slotted::nslots(&img);
                    slotted::insert_at(&mut img, s, &e);
                    i += 1;
                }
                if above.is_empty() && i == level.len() {
                    self.bulk_write_node(&mut img, root, None)?;
                    return Ok(written + 1);
                }
                let (me, alloc) = self.alloc_page(object, PageKind::BTreeInner, &[])?;
                self.bulk_write_node(&mut img, me, Some(alloc))?;
                written += 1;
                above.push((first, me));
            }
            level = above;
            height += 1;
        }
    }

    /// Writes a node image under its page id (the root, or a page allocated by `alloc`).
    fn bulk_write_node(&mut self, img: &mut [u8], pid: PageId, alloc: Option<Op>) -> Result<()> {
        page::put_u32(img, 4, pid);
        let mut ops: Vec<Op> = alloc.into_iter().collect();
        ops.push(Op::image(pid, img));
        self.log_apply(0, Body::Redo(ops))?;
        Ok(())
    }
}

/// An empty heap page `pid` of `object`, with its delta area if the object has In-Place
/// Appends (ipa.rs).
fn heap_page(img: &mut [u8], pid: PageId, object: ObjectId, ipa: Option<IpaScheme>) {
    page::format(img, pid, PageType::Heap, object, 0);
    if let Some(scheme) = ipa {
        crate::ipa::reserve(img, scheme);
    }
    slotted::init(img);
}

/// An empty B-tree node of `object` (its page id is set when it is written).
fn node_page(img: &mut [u8], leaf: bool, level: u16, object: ObjectId, ipa: Option<IpaScheme>) {
    let ty = if leaf {
        PageType::BTreeLeaf
    } else {
        PageType::BTreeInner
    };
    page::format(img, 0, ty, object, 0);
    if let Some(scheme) = ipa {
        crate::ipa::reserve(img, scheme);
    }
    slotted::init(img);
    slotted::set_level(img, level);
}
