//! The storage manager: transactions, logging of every page change, rollback, checkpoints and
//! ARIES restart, the catalog and DDL, and the record/index API the benchmark kits call.
//!
//! Time: the engine keeps a clock (`now`). A caller sets it before an operation (`set_now`), the
//! operation advances it by its I/O completion times and by the CPU model, and the caller reads
//! it back. Nothing here reads the wall clock, so a run is a function of its inputs.
//!
//! Every page change goes through `log_apply`: build the physiological op, append the log
//! record, then apply the op with the same function redo uses. So the do path and redo cannot
//! disagree.
//!
//! Invariants:
//! 1. No page change without a log record, and the record is appended before the change.
//! 2. WAL: a page reaches storage only after the log up to its page LSN is durable (buffer.rs).
//! 3. A commit is acknowledged (commit returns, or `is_durable` says so) only after its commit
//!    record is durable. (The canary `unsafe_ack_before_force` breaks this on purpose.)
//! 4. Restart: analysis from the last complete checkpoint, redo of every logged change whose page
//!    LSN is older (repeating history), undo of losers with CLRs; a crash during restart restarts
//!    again and ends in the same state (CLRs are never undone; redo is idempotent by page LSN).
//!    The page-LSN test is per record and page, made before the record's first op on the page:
//!    a page holds all of a record's ops on it or none (records put a page's ops next to each
//!    other, so the do path fixes no other page, and evicts nothing, between them), and every op
//!    of a record on a page that needs it is redone, not only the first.
//! 5. The master record points to a checkpoint whose records are durable; it is written to the
//!    slot not holding the newest valid copy, so a torn master write leaves the previous one.
//! 6. With full-page writes, the first change of a clean page is preceded by an image of it, so a
//!    torn page write is repaired by redo.
//! 7. After an I/O error on a write or a force, the engine refuses further work (`Failed`): what
//!    reached storage is consistent, and reopening recovers it.
//!
//! Files: this one holds the engine's state, transactions, `log_apply`, page allocation, rollback,
//! checkpoints and the database check; restart.rs the ARIES restart, ddl.rs the catalog and DDL,
//! rows.rs the record and index API, iaa.rs Insert Address Assist and U2DI. The access methods
//! (crate::heap, crate::btree, crate::bulk, crate::scan) sit below the engine and reach it through
//! crate::access::PageAccess, which access.rs implements; heap.rs, bulk.rs and scan.rs here add
//! the engine's hooks and catalog lookups around them. Children use this module's items; this
//! module names none of theirs (their methods extend `Engine`), so the folder has no circle.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::btree::BTree;
use crate::btree_node;
use crate::buffer::{BufferPool, Fix};
use crate::catalog::{self, Catalog, Entry, Table, Tablespace};
use crate::error::{Error, Result};
use crate::heap::Heap;
use crate::lock::{LockManager, LockMode, Resource};
use crate::log::{
    oldest_undo_lsn, Body, LogManager, LogRecord, Op, TxnEntry, Undo, FIRST_LSN, PAYLOAD,
};
use crate::page::{self, get_u32, get_u64, put_u32, put_u64, PageType};
use crate::pagestore::{PageKind, PageStore, WriteHint, LOG_BLOCK_BYTES};
use crate::slotted;
pub use crate::TxnId;
use crate::{Lsn, Nanos, ObjectId, PageId, Rid};

// The engine's side of the access methods' interface (crate::access).
mod access;
// Bulk loads: catalog lookups, then crate::bulk's pages, then write-back and checkpoint.
mod bulk;
// The catalog and DDL statements.
mod ddl;
// Heap files: the engine's placement policy as crate::heap's hooks.
mod heap;
// Insert Address Assist and U2DI: the rules of crate::iaa, run on the engine's state.
mod iaa;
// Preconditioning a device: write-backs counted per page, pages rewritten as they are.
mod precondition;
pub use precondition::{ReplayPages, Replayed};
// ARIES restart.
mod restart;
// The record and index API.
mod rows;
// Table scans: the catalog lookup before crate::scan's algorithm.
mod scan;

pub use crate::cpu::{CpuCounts, CpuKind, CpuModel};

#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub buffer_frames: usize,
    /// Checkpoint after this many log bytes (default: a quarter of the log).
    pub checkpoint_bytes: Option<u64>,
    /// Page images before the first change of a clean page (default: when DB pages are larger
    /// than the store's atomic write).
    pub full_page_writes: Option<bool>,
    /// Canary for the crash test: acknowledge commits before the log force. Never use.
    pub unsafe_ack_before_force: bool,
    pub cpu: CpuModel,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            buffer_frames: 1024,
            checkpoint_bytes: None,
            full_page_writes: None,
            unsafe_ack_before_force: false,
            cpu: CpuModel::default(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineStats {
    pub commits: u64,
    pub aborts: u64,
    pub checkpoints: u64,
    pub btree_splits: u64,
    pub btree_merges: u64,
    pub pages_allocated: u64,
    pub pages_freed: u64,
    pub recovery_redone: u64,
    pub recovery_undone: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxnState {
    Active,
    /// Commit record appended at the LSN; waiting for it to be durable.
    Committing(Lsn),
}

#[derive(Debug)]
pub(crate) struct Txn {
    first_lsn: Lsn,
    last_lsn: Lsn,
    undo_next: Lsn,
    state: TxnState,
    /// Unique-index keys this transaction deleted (others must wait for it to end).
    deleted_keys: Vec<(ObjectId, Vec<u8>)>,
}

const MASTER_MAGIC: u32 = u32::from_le_bytes(*b"NMST");
const FORMAT_VERSION: u32 = 1;

/// Whether `slot` (a master-record slot as read from a page store: `LOG_BLOCK_BYTES`) holds a
/// valid master record of this engine: tools use it to tell a noftl database from someone
/// else's file before writing over it.
pub fn is_master_record(slot: &[u8]) -> bool {
    slot.len() == LOG_BLOCK_BYTES && Master::decode(slot).is_some()
}

/// The master record (one of two slots).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Master {
    seq: u64,
    epoch: u32,
    page_bytes: u32,
    ckpt_lsn: Lsn,
    next_txn: TxnId,
}

impl Master {
    fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; LOG_BLOCK_BYTES];
        put_u32(&mut b, 4, MASTER_MAGIC);
        put_u32(&mut b, 8, FORMAT_VERSION);
        put_u32(&mut b, 12, self.page_bytes);
        put_u64(&mut b, 16, self.seq);
        put_u32(&mut b, 24, self.epoch);
        put_u64(&mut b, 32, self.ckpt_lsn);
        put_u64(&mut b, 40, self.next_txn);
        let c = crc32fast::hash(&b[4..]);
        put_u32(&mut b, 0, c);
        b
    }
    fn decode(b: &[u8]) -> Option<Master> {
        (get_u32(b, 4) == MASTER_MAGIC
            && get_u32(b, 8) == FORMAT_VERSION
            && get_u32(b, 0) == crc32fast::hash(&b[4..]))
        .then(|| Master {
            seq: get_u64(b, 16),
            epoch: get_u32(b, 24),
            page_bytes: get_u32(b, 12),
            ckpt_lsn: get_u64(b, 32),
            next_txn: get_u64(b, 40),
        })
    }
}

/// Log bytes kept free for rollbacks (CLRs) and checkpoints.
const LOG_RESERVE: u64 = 64 * PAYLOAD;

pub struct Engine {
    pub(crate) store: Box<dyn PageStore>,
    pub(crate) log: LogManager,
    pub(crate) pool: BufferPool,
    pub(crate) locks: LockManager,
    pub(crate) catalog: Catalog,
    pub(crate) stats: EngineStats,
    txns: BTreeMap<TxnId, Txn>,
    cfg: EngineConfig,
    full_page_writes: bool,
    now: Nanos,
    next_txn: TxnId,
    failed: Option<String>,
    master: Master,
    last_ckpt_lsn: Lsn,
    /// The log's end right after the last checkpoint (0 before any): equal to the log's end
    /// now when nothing was logged since, so `copy_to` need not checkpoint again.
    ckpt_end_lsn: Lsn,
    alloc_cursor: PageId,
    /// Pages freed by records not yet durable; told to the store after the force.
    pending_frees: Vec<(Lsn, PageId)>,
    /// Unique keys deleted by active transactions.
    deleted_keys: HashMap<(ObjectId, Vec<u8>), TxnId>,
    /// Scratch for `append`: a record is encoded once, to size it and to append it.
    rec_scratch: Vec<u8>,
    in_recovery: bool,
    /// Background mode (the virtual-time scheduler's): checkpoints and page cleaning run in
    /// `background`, as a checkpointer and a cleaner thread would, instead of on the thread of
    /// the commit that made them due (see `set_background_mode`).
    background_mode: bool,
    /// The cleaner is writing back (it started above half the pool dirty and goes on down to a
    /// quarter: hysteresis, so it runs in bursts of useful length, not one page at a time).
    cleaning: bool,
    /// Insert Address Assist and U2DI (iaa.rs).
    pub(crate) iaa: crate::iaa::IaaState,
    /// Host work done and charged (crate::cpu).
    cpu_counts: CpuCounts,
    /// The pool's misses and write-backs already charged (`settle_io_cpu`).
    cpu_io_seen: (u64, u64),
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("store", &self.store.name())
            .field("now", &self.now)
            .field("txns", &self.txns.len())
            .finish()
    }
}

fn bits_per_map(page_bytes: usize) -> u32 {
    ((page_bytes - slotted::SLOTS_AT) * 8) as u32
}

/// Applies one redo op to its page (the single place where logged changes touch pages).
pub(crate) fn apply_op(p: &mut [u8], op: &Op) -> std::result::Result<(), String> {
    match op {
        Op::PageImage { pid: _, lo, hi } => {
            let n = p.len();
            if lo.len() + hi.len() > n {
                return Err("page image larger than the page".into());
            }
            p[..lo.len()].copy_from_slice(lo);
            p[lo.len()..n - hi.len()].fill(0);
            p[n - hi.len()..].copy_from_slice(hi);
        }
        Op::SetAlloc { map, pid, on, .. } => {
            let bits = bits_per_map(p.len());
            if pid / bits != map / bits {
                return Err(format!("page {pid} is not covered by space map {map}"));
            }
            let i = (pid % bits) as usize;
            let at = slotted::SLOTS_AT + i / 8;
            if *on {
                p[at] |= 1 << (i % 8);
            } else {
                p[at] &= !(1 << (i % 8));
            }
        }
        Op::SetField { offset, value, .. } => {
            let o = *offset as usize;
            if !matches!(o, 24 | 28 | 40 | 44) {
                return Err(format!("offset {o} is not a settable header field"));
            }
            put_u32(p, o, *value);
        }
        Op::HeapInsert { slot, data, .. } => {
            let s = *slot as usize;
            if s < slotted::nslots(p) && slotted::slot(p, s).0 != 0 {
                return Err(format!("slot {s} is taken"));
            }
            if !slotted::fits(p, data.len(), s >= slotted::nslots(p))
                || (s > slotted::nslots(p)
                    && !slotted::fits(p, data.len() + 4 * (s - slotted::nslots(p)), true))
            {
                return Err("no room for the record".into());
            }
            slotted::put_at_slot(p, s, data);
        }
        Op::HeapRemove { slot, .. } => {
            if slotted::get_any(p, *slot as usize).is_none() {
                return Err(format!("slot {slot} is empty"));
            }
            slotted::free_slot(p, *slot as usize);
        }
        Op::HeapGhost { slot, ghost, .. } => {
            if slotted::get_any(p, *slot as usize).is_none() {
                return Err(format!("slot {slot} is empty"));
            }
            slotted::set_ghost(p, *slot as usize, *ghost);
        }
        Op::HeapUpdate { slot, data, .. } => {
            let s = *slot as usize;
            if slotted::get_any(p, s).is_none() || !slotted::fits_replace(p, s, data.len()) {
                return Err(format!("slot {s} cannot take the update"));
            }
            slotted::replace(p, s, data);
        }
        Op::BtInsert { key, val, .. } => btree_node::apply_insert(p, key, val)?,
        Op::BtDelete { key, .. } => btree_node::apply_delete(p, key)?,
    }
    Ok(())
}

impl Engine {
    // ---- opening ----

    /// A failure gives the store back (`open_or_give_back`).
    fn blank(
        store: Box<dyn PageStore>,
        cfg: EngineConfig,
    ) -> std::result::Result<Engine, (Error, Box<dyn PageStore>)> {
        let pb = store.page_bytes();
        let pool = match BufferPool::new(cfg.buffer_frames, pb) {
            Ok(p) => p,
            Err(e) => return Err((e, store)),
        };
        let fpw = cfg
            .full_page_writes
            .unwrap_or(pb > store.atomic_write_bytes());
        let log = LogManager::new(store.log_blocks(), 1, FIRST_LSN, FIRST_LSN);
        Ok(Engine {
            store,
            log,
            pool,
            locks: LockManager::default(),
            catalog: Catalog::default(),
            stats: EngineStats::default(),
            txns: BTreeMap::new(),
            cfg,
            full_page_writes: fpw,
            now: 0,
            next_txn: 1,
            failed: None,
            master: Master {
                seq: 0,
                epoch: 1,
                page_bytes: pb as u32,
                ckpt_lsn: 0,
                next_txn: 1,
            },
            last_ckpt_lsn: FIRST_LSN,
            ckpt_end_lsn: 0,
            alloc_cursor: 2,
            pending_frees: Vec::new(),
            deleted_keys: HashMap::new(),
            rec_scratch: Vec::with_capacity(256),
            background_mode: false,
            cleaning: false,
            in_recovery: false,
            iaa: crate::iaa::IaaState::default(),
            cpu_counts: CpuCounts::default(),
            cpu_io_seen: (0, 0),
        })
    }

    /// Formats a new database on the store (everything on it is lost).
    pub fn create(store: Box<dyn PageStore>, cfg: EngineConfig) -> Result<Engine> {
        let mut e = Engine::blank(store, cfg).map_err(|(e, _)| e)?;
        let pb = e.page_bytes();
        // Space map 0 (owns pages 0 and 1) and the catalog heap head (page 1).
        let mut map = vec![0u8; pb];
        page::format(&mut map, 0, PageType::SpaceMap, 0, 0);
        map[slotted::SLOTS_AT] = 0b11;
        let mut cat = vec![0u8; pb];
        page::format(
            &mut cat,
            catalog::CATALOG_HEAD,
            PageType::Heap,
            catalog::CATALOG_OBJECT,
            0,
        );
        slotted::init(&mut cat);
        slotted::set_aux(&mut cat, catalog::CATALOG_HEAD);
        slotted::set_aux2(&mut cat, 1);
        e.write_master()?;
        e.log_apply(
            0,
            Body::Redo(vec![
                Op::image(0, &map),
                Op::image(catalog::CATALOG_HEAD, &cat),
            ]),
        )?;
        let t = e.begin()?;
        let ts = Entry::Tablespace(Tablespace {
            id: catalog::DEFAULT_TABLESPACE,
            name: "default".into(),
            options: vec![],
        });
        e.catalog.next_id = catalog::DEFAULT_TABLESPACE + 1;
        e.catalog_insert(t, ts)?;
        e.commit(t)?;
        e.checkpoint()?;
        Ok(e)
    }

    /// Opens a database from the store alone and recovers it (ARIES analysis, redo, undo).
    pub fn open(store: Box<dyn PageStore>, cfg: EngineConfig) -> Result<Engine> {
        Self::open_or_give_back(store, cfg).map_err(|(e, _)| e)
    }

    /// `open`, but a failure gives the store back with the error, so that the caller can take
    /// its device back (`PageStore::into_nand`), power-cycle it and open again: the crash test
    /// cuts power a second time during this restart. What the failed restart left in memory is
    /// dropped; what it wrote is on the store, which a restart after a crash during restart
    /// recovers (invariant 4).
    pub fn open_or_give_back(
        store: Box<dyn PageStore>,
        cfg: EngineConfig,
    ) -> std::result::Result<Engine, (Error, Box<dyn PageStore>)> {
        let mut e = Engine::blank(store, cfg)?;
        match e.restart() {
            Ok(()) => Ok(e),
            Err(err) => Err((err, e.store)),
        }
    }

    /// `open`'s work: master record, ARIES restart, catalog, space maps to the store, checkpoint.
    fn restart(&mut self) -> Result<()> {
        let mut best: Option<Master> = None;
        for slot in 0..2 {
            let mut b = vec![0u8; LOG_BLOCK_BYTES];
            self.now = self.store.read_meta(self.now, slot, &mut b)?;
            if let Some(m) = Master::decode(&b) {
                if best.is_none_or(|x| m.seq > x.seq) {
                    best = Some(m);
                }
            }
        }
        let m = best.ok_or_else(|| {
            Error::Recovery("no valid master record: the store holds no database".into())
        })?;
        if m.page_bytes as usize != self.page_bytes() {
            return Err(Error::Recovery(format!(
                "the database has {}-byte pages, the store {}",
                m.page_bytes,
                self.page_bytes()
            )));
        }
        self.master = m;
        // A new epoch before any log write (log.rs invariant 5).
        self.master.epoch = m.epoch + 1;
        self.write_master()?;
        self.next_txn = m.next_txn;
        self.in_recovery = true;
        self.recover(m.ckpt_lsn)?;
        self.in_recovery = false;
        self.load_catalog()?;
        self.retain_allocated()?;
        self.checkpoint()?;
        Ok(())
    }

    /// After restart, tells the store which pages the (recovered) space maps hold allocated, so
    /// that a store that keeps frees durable only at its own checkpoints (NoFTL) drops pages
    /// freed since.
    fn retain_allocated(&mut self) -> Result<()> {
        let allocated = self.allocated_pages()?;
        self.now = self.io(|s, t| {
            s.retain_allocated(t, &|pid| {
                allocated.get(pid as usize).copied().unwrap_or(true)
            })
        })?;
        Ok(())
    }

    /// Which DB pages the space maps hold allocated, by page id.
    fn allocated_pages(&mut self) -> Result<Vec<bool>> {
        let bits = bits_per_map(self.page_bytes());
        let total = self.store.db_pages().min(u64::from(u32::MAX)) as u32;
        let mut allocated = vec![false; total as usize];
        let mut map = 0u32;
        while map < total {
            let f = self.fix(map, Fix::Read)?;
            let p = self.pool.page(f);
            if page::page_type(p) == PageType::SpaceMap {
                for q in map..(map.saturating_add(bits)).min(total) {
                    let i = (q - map) as usize;
                    allocated[q as usize] = p[slotted::SLOTS_AT + i / 8] & (1 << (i % 8)) != 0;
                }
            }
            self.pool.unfix(f);
            map = map.saturating_add(bits);
        }
        Ok(allocated)
    }

    /// Copies this database onto another store and opens it there: every allocated DB page,
    /// byte for byte, with its write hint, then a fresh log that continues this one's LSNs
    /// (so that every page LSN stays below every new record's, invariants 2 and 4) holding one
    /// checkpoint, and the master record; then a restart on the copy, as after a clean shutdown.
    /// A loaded database is copied this way to each store of a comparison instead of loading
    /// it again row by row (the same database, at the cost of one write per page).
    ///
    /// Needs no transaction open here. Pages are read from this engine's store after a flush
    /// and a checkpoint, so this engine goes on unchanged. The copy's device time starts at 0.
    pub fn copy_to(&mut self, store: Box<dyn PageStore>, cfg: EngineConfig) -> Result<Engine> {
        self.check_ok()?;
        if !self.txns.is_empty() {
            return Err(Error::Unsupported(
                "copy_to needs no transaction open (quiesce first)".into(),
            ));
        }
        if store.page_bytes() != self.page_bytes() {
            return Err(Error::Config(format!(
                "the copy's store has {}-byte pages, the database {}",
                store.page_bytes(),
                self.page_bytes()
            )));
        }
        // Quiesce once: a checkpoint forces the log, which pads it to a fresh block, so a
        // checkpoint per copy would start each copy's log one block later than the one before,
        // and a row's figures would depend on how many rows were copied before it (with
        // --jobs 2, on which thread took the lock first).
        let n = self.pool.dirty_count();
        if n > 0 || self.log.next_lsn() != self.ckpt_end_lsn {
            self.flush_pages(n)?;
            self.checkpoint()?;
        }
        let allocated = self.allocated_pages()?;
        let last = allocated.iter().rposition(|&a| a).unwrap_or(0) as u64;
        if last >= store.db_pages() {
            return Err(Error::Config(format!(
                "the copy's store holds {} DB pages, the database uses pages up to {last}",
                store.db_pages()
            )));
        }
        let mut dst = Engine::blank(store, cfg).map_err(|(e, _)| e)?;
        let start = self.log.next_lsn().div_ceil(PAYLOAD) * PAYLOAD;
        dst.log = LogManager::new(dst.store.log_blocks(), 1, start, start);
        dst.next_txn = self.next_txn;
        let mut buf = vec![0u8; self.page_bytes()];
        let mut done = 0;
        for pid in (0..allocated.len()).filter(|&p| allocated[p]) {
            let pid = pid as PageId;
            self.now = self.store.read_page(self.now, pid, &mut buf)?;
            // Submitted at once: the copy is not measured, only its result is.
            done = dst
                .store
                .write_page(0, pid, &buf, crate::buffer::hint_of(&buf))?
                .max(done);
        }
        dst.now = dst.store.sync_pages(done)?;
        dst.checkpoint()?;
        let now = dst.now;
        let mut e = Engine::open(dst.store, dst.cfg)?;
        e.now = e.now.max(now);
        Ok(e)
    }

    fn write_master(&mut self) -> Result<()> {
        self.master.seq += 1;
        self.master.next_txn = self.next_txn;
        let slot = (self.master.seq % 2) as usize;
        let b = self.master.encode();
        self.now = self.io(|s, t| s.write_meta(t, slot, &b))?;
        Ok(())
    }

    // ---- clock, failure, CPU ----

    pub fn now(&self) -> Nanos {
        self.now
    }
    pub fn set_now(&mut self, t: Nanos) {
        self.now = t;
    }
    /// When the device has completed every operation submitted so far (the flash's latest
    /// completion; the engine's clock on stores without flash): a quiescent point for the
    /// measured window.
    pub fn device_idle_ns(&self) -> Nanos {
        self.store
            .nand()
            .map_or(self.now, |n| n.now_ns().max(self.now))
    }
    /// Replaces the CPU cost model (real time runs with none: there the CPU time is real).
    pub fn set_cpu_model(&mut self, m: CpuModel) {
        self.cfg.cpu = m;
    }
    pub fn page_bytes(&self) -> usize {
        self.store.page_bytes()
    }
    pub fn stats(&self) -> EngineStats {
        self.stats
    }
    pub fn buffer_stats(&self) -> crate::buffer::BufferStats {
        self.pool.stats
    }
    /// The IPA advisor: profile what every write-back of the buffer pool changes, per object
    /// (`buffer::ObjectWrites`), from now on.
    pub fn enable_write_profile(&mut self) {
        self.pool.enable_profile();
    }
    pub fn write_profile(
        &self,
    ) -> Option<&std::collections::BTreeMap<ObjectId, crate::buffer::ObjectWrites>> {
        self.pool.profile()
    }
    pub fn log_stats(&self) -> crate::log::LogStats {
        self.log.stats
    }
    pub fn lock_stats(&self) -> crate::lock::LockStats {
        self.locks.stats
    }
    pub fn store(&self) -> &dyn PageStore {
        &*self.store
    }
    /// The page store, to arm a fault plan on its flash (crash tests).
    pub fn store_mut(&mut self) -> &mut dyn PageStore {
        &mut *self.store
    }
    pub fn full_page_writes(&self) -> bool {
        self.full_page_writes
    }
    /// The page store, given back (to cut power or inspect the device).
    pub fn into_store(self) -> Box<dyn PageStore> {
        self.store
    }
    pub fn is_failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }
    fn check_ok(&self) -> Result<()> {
        match &self.failed {
            Some(why) => Err(Error::Failed(why.clone())),
            None => Ok(()),
        }
    }
    /// Runs an I/O on the store; an error stops the engine (invariant 7).
    fn io(&mut self, f: impl FnOnce(&mut dyn PageStore, Nanos) -> Result<Nanos>) -> Result<Nanos> {
        let r = f(&mut *self.store, self.now);
        self.note(r)
    }
    pub(crate) fn note<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e @ Error::Io(_)) = &r {
            self.failed.get_or_insert_with(|| e.to_string());
        }
        r
    }
    /// Charges `n` of `kind` to the engine's clock (crate::cpu invariant 1).
    pub(crate) fn cpu(&mut self, kind: CpuKind, n: u64) {
        self.now += self.cpu_counts.charge(&self.cfg.cpu, kind, n);
    }
    /// The host work done so far and the virtual time charged for it.
    pub fn cpu_counts(&self) -> CpuCounts {
        self.cpu_counts
    }
    pub fn cpu_model(&self) -> CpuModel {
        self.cfg.cpu
    }
    /// Charges the host I/O path of the pages the pool read and wrote since the last call, to
    /// the clock of whoever made it do so (a terminal's fix, the cleaner's write-backs).
    pub(crate) fn settle_io_cpu(&mut self) {
        let s = self.pool.stats;
        let (reads, writes) = (
            s.misses.saturating_sub(self.cpu_io_seen.0),
            s.writebacks.saturating_sub(self.cpu_io_seen.1),
        );
        self.cpu_io_seen = (s.misses, s.writebacks);
        if reads > 0 {
            self.cpu(CpuKind::PageRead, reads);
        }
        if writes > 0 {
            self.cpu(CpuKind::PageWrite, writes);
        }
    }

    // ---- pages ----

    pub(crate) fn fix(&mut self, pid: PageId, how: Fix) -> Result<usize> {
        self.cpu(CpuKind::Fix, 1);
        let r = self
            .pool
            .fix(&mut *self.store, &mut self.log, self.now, pid, how);
        let (f, corrupt, t) = self.note(r)?;
        debug_assert!(!corrupt || how == Fix::Lenient);
        self.now = t;
        self.settle_io_cpu();
        Ok(f)
    }

    fn fix_lenient(&mut self, pid: PageId) -> Result<(usize, bool)> {
        let r = self
            .pool
            .fix(&mut *self.store, &mut self.log, self.now, pid, Fix::Lenient);
        let (f, corrupt, t) = self.note(r)?;
        self.now = t;
        self.settle_io_cpu();
        Ok((f, corrupt))
    }

    /// Appends a record and applies its page ops (invariant 1). Returns its LSN.
    pub(crate) fn log_apply(&mut self, txn: TxnId, body: Body) -> Result<Lsn> {
        self.cpu(CpuKind::Record, 1);
        self.log_apply_charged(txn, body)
    }

    /// `log_apply` of a record whose CPU was charged before (the end record of a commit).
    fn log_apply_charged(&mut self, txn: TxnId, body: Body) -> Result<Lsn> {
        let pids: Vec<PageId> = {
            let mut v: Vec<PageId> = match &body {
                Body::Redo(ops) | Body::Clr { ops, .. } => ops.iter().map(Op::pid).collect(),
                Body::Update { op, .. } => vec![op.pid()],
                _ => vec![],
            };
            v.dedup();
            v
        };
        // Full-page writes: image of each clean page before its first change (invariant 6).
        if self.full_page_writes && !self.in_recovery {
            let mut images = Vec::new();
            for &pid in &pids {
                let whole = matches!(&body, Body::Redo(ops) if ops.iter().any(|o| matches!(o, Op::PageImage { pid: p, .. } if *p == pid)));
                if whole || self.pool.is_dirty(pid) {
                    continue;
                }
                let f = self.fix(pid, Fix::Read)?;
                if page::page_type(self.pool.page(f)) != PageType::Unformatted {
                    images.push(Op::image(pid, self.pool.page(f)));
                }
                self.pool.unfix(f);
            }
            if !images.is_empty() {
                self.append(&LogRecord {
                    txn: 0,
                    prev_lsn: 0,
                    body: Body::Redo(images.clone()),
                })
                .and_then(|lsn| self.apply_ops(lsn, &images))?;
            }
        }
        let prev_lsn = if txn == 0 {
            0
        } else {
            self.txns.get(&txn).ok_or(Error::NoSuchTxn(txn))?.last_lsn
        };
        let rec = LogRecord {
            txn,
            prev_lsn,
            body,
        };
        let lsn = self.append(&rec)?;
        if txn != 0 {
            let t = self.txns.get_mut(&txn).ok_or(Error::NoSuchTxn(txn))?;
            if t.first_lsn == 0 {
                t.first_lsn = lsn;
            }
            t.last_lsn = lsn;
            t.undo_next = match &rec.body {
                Body::Clr { undo_next, .. } => *undo_next,
                _ => lsn,
            };
        }
        let ops: &[Op] = rec.ops();
        let ops = ops.to_vec();
        self.apply_ops(lsn, &ops)?;
        if self.log.wants_spill() {
            let r = self.log.spill(&mut *self.store, self.now);
            self.now = self.note(r)?;
        }
        Ok(lsn)
    }

    fn append(&mut self, rec: &LogRecord) -> Result<Lsn> {
        let mut bytes = std::mem::take(&mut self.rec_scratch);
        bytes.clear();
        rec.encode_into(&mut bytes);
        let r = self.append_encoded(rec, &bytes);
        self.rec_scratch = bytes;
        r
    }

    /// `append` of a record already encoded into `bytes`.
    fn append_encoded(&mut self, rec: &LogRecord, bytes: &[u8]) -> Result<Lsn> {
        let need = bytes.len();
        let reserve = if self.in_recovery
            || matches!(
                rec.body,
                Body::Clr { .. } | Body::Abort | Body::End | Body::CkptBegin | Body::CkptEnd { .. }
            ) {
            0
        } else {
            LOG_RESERVE
        };
        if !self.log.has_room(need, reserve) {
            self.make_log_room()?;
            if !self.log.has_room(need, reserve) {
                return Err(Error::LogFull {
                    used_bytes: self.log.used_bytes(),
                    capacity_bytes: self.log.capacity_bytes(),
                });
            }
        }
        self.log.append_encoded(bytes)
    }

    fn apply_ops(&mut self, lsn: Lsn, ops: &[Op]) -> Result<()> {
        for op in ops {
            let pid = op.pid();
            let how = if matches!(op, Op::PageImage { .. }) {
                Fix::New
            } else {
                Fix::Read
            };
            let f = self.fix(pid, how)?;
            let p = self.pool.page_mut(f);
            let r = apply_op(p, op);
            if r.is_ok() {
                page::set_lsn(p, lsn);
                self.pool.mark_dirty(f, lsn);
            }
            self.pool.unfix(f);
            r.map_err(|why| Error::Corrupt {
                pid,
                why: format!("cannot apply {op:?}: {why}"),
            })?;
        }
        Ok(())
    }

    /// Picks a free page for `object`; returns it and the op that marks it allocated. Pages in
    /// `taken` are skipped (already chosen for the same structure change).
    pub(crate) fn alloc_page(
        &mut self,
        object: ObjectId,
        kind: PageKind,
        taken: &[PageId],
    ) -> Result<(PageId, Op)> {
        let pb = self.page_bytes();
        let bits = bits_per_map(pb);
        let total = self.store.db_pages() as u32;
        let mut pid = self.alloc_cursor.max(2);
        for _ in 0..2 {
            while pid < total {
                let map = pid / bits * bits;
                let f = self.fix(map, Fix::Read)?;
                let fresh = page::page_type(self.pool.page(f)) == PageType::Unformatted;
                self.pool.unfix(f);
                if fresh {
                    // A new space-map page owns itself.
                    let mut img = vec![0u8; pb];
                    page::format(&mut img, map, PageType::SpaceMap, 0, 0);
                    img[slotted::SLOTS_AT] = 1;
                    self.log_apply(0, Body::Redo(vec![Op::image(map, &img)]))?;
                }
                let f = self.fix(map, Fix::Read)?;
                let p = self.pool.page(f);
                let end = (map + bits).min(total);
                let mut found = None;
                let mut q = pid.max(map);
                while q < end {
                    let i = (q - map) as usize;
                    let byte = p[slotted::SLOTS_AT + i / 8];
                    if byte == 0xFF && i.is_multiple_of(8) {
                        q += 8;
                        continue;
                    }
                    if byte & (1 << (i % 8)) == 0
                        && !taken.contains(&q)
                        && !self.pending_frees.iter().any(|(_, x)| *x == q)
                    {
                        found = Some(q);
                        break;
                    }
                    q += 1;
                }
                self.pool.unfix(f);
                if let Some(q) = found {
                    self.alloc_cursor = q + 1;
                    self.stats.pages_allocated += 1;
                    let hint = WriteHint { object, kind };
                    self.store.page_allocated(q, hint);
                    return Ok((
                        q,
                        Op::SetAlloc {
                            map,
                            pid: q,
                            on: true,
                            object,
                            kind: kind as u8,
                        },
                    ));
                }
                pid = end;
            }
            pid = 2;
        }
        Err(Error::NoSpace {
            pages: u64::from(total),
        })
    }

    /// The op that frees `pid`; the store hears of it once the op is durable.
    pub(crate) fn free_op(&mut self, pid: PageId) -> Result<Op> {
        let bits = bits_per_map(self.page_bytes());
        self.pending_frees.push((self.log.next_lsn(), pid));
        self.stats.pages_freed += 1;
        Ok(Op::SetAlloc {
            map: pid / bits * bits,
            pid,
            on: false,
            object: 0,
            kind: 0,
        })
    }

    fn after_force(&mut self) -> Result<()> {
        let durable = self.log.durable_lsn();
        let (ready, keep): (Vec<_>, Vec<_>) = self
            .pending_frees
            .drain(..)
            .partition(|(l, _)| *l < durable);
        self.pending_frees = keep;
        for (_, pid) in ready {
            self.now = self.io(|s, t| s.page_freed(t, pid))?;
        }
        Ok(())
    }

    /// Forces the log (group commit: everything appended so far). Returns the completion time.
    pub fn force_log(&mut self) -> Result<Nanos> {
        self.check_ok()?;
        let r = self.log.force(&mut *self.store, self.now);
        self.now = self.note(r)?;
        self.after_force()?;
        Ok(self.now)
    }

    // ---- transactions ----

    pub fn begin(&mut self) -> Result<TxnId> {
        self.check_ok()?;
        self.cpu(CpuKind::Call, 1);
        let id = self.next_txn;
        self.next_txn += 1;
        self.txns.insert(
            id,
            Txn {
                first_lsn: 0,
                last_lsn: 0,
                undo_next: 0,
                state: TxnState::Active,
                deleted_keys: vec![],
            },
        );
        Ok(id)
    }

    fn active(&self, txn: TxnId) -> Result<()> {
        self.check_ok()?;
        match self.txns.get(&txn) {
            Some(t) if t.state == TxnState::Active => Ok(()),
            _ => Err(Error::NoSuchTxn(txn)),
        }
    }

    fn lock(&mut self, txn: TxnId, res: Resource, mode: LockMode) -> Result<()> {
        self.cpu(CpuKind::Lock, 1);
        self.locks.lock(txn, res, mode)
    }

    /// Appends the commit record; the commit is acknowledged once `is_durable(lsn)`.
    pub fn commit_request(&mut self, txn: TxnId) -> Result<Lsn> {
        self.active(txn)?;
        self.cpu(CpuKind::Call, 1);
        let t = &self.txns[&txn];
        if t.first_lsn == 0 {
            // Read-only: nothing to make durable.
            if let Some(t) = self.txns.get_mut(&txn) {
                t.state = TxnState::Committing(0);
            }
            return Ok(0);
        }
        self.cpu(CpuKind::Commit, 1);
        // The end record `commit_finish` writes after the acknowledgement is part of the
        // commit's work, and a client waits for it (Shore-MT returns from commit after it):
        // charged here, so that it falls inside the transaction's measured latency instead of
        // between two transactions (where the window's Little's-law check would see a terminal
        // outside any transaction).
        self.cpu(CpuKind::Record, 1);
        let lsn = self.log_apply(txn, Body::Commit)?;
        if let Some(t) = self.txns.get_mut(&txn) {
            t.state = TxnState::Committing(lsn);
        }
        Ok(lsn)
    }

    /// Is the commit record at `lsn` durable (may the commit be acknowledged)?
    pub fn is_durable(&self, lsn: Lsn) -> bool {
        self.cfg.unsafe_ack_before_force || lsn < self.log.durable_lsn() || lsn == 0
    }

    /// Ends a commit whose record is durable: releases locks, writes the end record.
    pub fn commit_finish(&mut self, txn: TxnId) -> Result<()> {
        self.check_ok()?;
        let Some(t) = self.txns.get(&txn) else {
            return Err(Error::NoSuchTxn(txn));
        };
        let TxnState::Committing(lsn) = t.state else {
            return Err(Error::NoSuchTxn(txn));
        };
        assert!(
            self.is_durable(lsn),
            "commit_finish before the commit record is durable (invariant 3)"
        );
        if lsn != 0 {
            // Its CPU was charged with the commit request (see there).
            self.log_apply_charged(txn, Body::End)?;
        }
        self.end_txn(txn);
        self.stats.commits += 1;
        self.iaa_after_commit()?;
        self.maybe_checkpoint()?;
        Ok(())
    }

    /// Commits and waits for durability (one force per commit unless others share it).
    pub fn commit(&mut self, txn: TxnId) -> Result<()> {
        let lsn = self.commit_request(txn)?;
        if !self.is_durable(lsn) {
            self.force_log()?;
        }
        self.commit_finish(txn)
    }

    fn end_txn(&mut self, txn: TxnId) {
        if let Some(t) = self.txns.remove(&txn) {
            for k in t.deleted_keys {
                if self.deleted_keys.get(&k) == Some(&txn) {
                    self.deleted_keys.remove(&k);
                }
            }
        }
        self.locks.release_all(txn);
    }

    /// Ends every transaction still open, so that another run can start on this database with
    /// no lock held: a virtual run stops at a time, not at a transaction boundary. Commits whose
    /// record is appended are made durable and finished (they were requested); transactions
    /// still active are rolled back. Returns (finished commits, rolled-back transactions).
    pub fn quiesce(&mut self) -> Result<(u64, u64)> {
        let open: Vec<(TxnId, TxnState)> = self.txns.iter().map(|(&id, t)| (id, t.state)).collect();
        let mut counts = (0, 0);
        if open
            .iter()
            .any(|(_, st)| matches!(st, TxnState::Committing(lsn) if !self.is_durable(*lsn)))
        {
            self.force_log()?;
        }
        for (id, st) in open {
            match st {
                TxnState::Committing(_) => {
                    self.commit_finish(id)?;
                    counts.0 += 1;
                }
                TxnState::Active => {
                    self.abort(id)?;
                    counts.1 += 1;
                }
            }
        }
        assert!(self.txns.is_empty(), "quiesce leaves no transaction open");
        Ok(counts)
    }

    /// Rolls the transaction back (CLRs for every undone change) and ends it.
    pub fn abort(&mut self, txn: TxnId) -> Result<()> {
        self.active(txn)?;
        self.cpu(CpuKind::Call, 1);
        if self.txns[&txn].first_lsn != 0 {
            self.log_apply(txn, Body::Abort)?;
            self.rollback(txn)?;
            self.log_apply(txn, Body::End)?;
        }
        self.end_txn(txn);
        self.stats.aborts += 1;
        Ok(())
    }

    /// Undoes `txn` back to its beginning, following `undo_next`.
    fn rollback(&mut self, txn: TxnId) -> Result<()> {
        let mut lsn = self.txns[&txn].undo_next;
        while lsn != 0 {
            let r = self.log.read(&mut *self.store, self.now, lsn);
            let (rec, t) = self.note(r)?;
            self.now = t;
            lsn = match rec.body {
                Body::Update { undo, .. } => {
                    self.undo_one(txn, &undo, rec.prev_lsn)?;
                    rec.prev_lsn
                }
                Body::Clr { undo_next, .. } => undo_next,
                _ => rec.prev_lsn,
            };
        }
        Ok(())
    }

    /// Performs one undo, logged as a CLR whose `undo_next` is `undo_next`.
    fn undo_one(&mut self, txn: TxnId, undo: &Undo, undo_next: Lsn) -> Result<()> {
        let ops = match undo {
            Undo::HeapRemove { pid, slot } => vec![Op::HeapRemove {
                pid: *pid,
                slot: *slot,
            }],
            Undo::HeapUnghost { pid, slot } => vec![Op::HeapGhost {
                pid: *pid,
                slot: *slot,
                ghost: false,
            }],
            Undo::HeapRestore { pid, slot, old } => vec![Op::HeapUpdate {
                pid: *pid,
                slot: *slot,
                data: old.clone(),
            }],
            Undo::IndexRemove { root, key } => {
                let leaf = self.bt_leaf_of(*root, key)?;
                vec![Op::BtDelete {
                    pid: leaf,
                    key: key.clone(),
                }]
            }
            Undo::IndexPut { root, key, val } => {
                let leaf = self.bt_prepare_insert(*root, key, 2 + key.len() + val.len() + 4)?;
                vec![Op::BtInsert {
                    pid: leaf,
                    key: key.clone(),
                    val: val.clone(),
                }]
            }
        };
        self.log_apply(txn, Body::Clr { ops, undo_next })?;
        Ok(())
    }

    // ---- checkpoints and log space ----

    /// A fuzzy checkpoint: begin record, sync of written pages, ATT and DPT in the end record,
    /// force, master record (invariant 5); then the log tail moves up.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.check_ok()?;
        let begin = self.log.append(&LogRecord {
            txn: 0,
            prev_lsn: 0,
            body: Body::CkptBegin,
        })?;
        self.now = self.io(|s, t| s.sync_pages(t))?;
        let att: Vec<TxnEntry> = self
            .txns
            .iter()
            .map(|(&id, t)| TxnEntry {
                txn: id,
                last_lsn: t.last_lsn,
                undo_next: t.undo_next,
                first_lsn: t.first_lsn,
                committed: matches!(t.state, TxnState::Committing(l) if l != 0),
            })
            .filter(|e| e.first_lsn != 0)
            .collect();
        let dpt = self.pool.dirty_pages();
        let end = LogRecord {
            txn: 0,
            prev_lsn: 0,
            body: Body::CkptEnd {
                att: att.clone(),
                dpt: dpt.clone(),
                next_txn: self.next_txn,
            },
        };
        self.log.append(&end)?;
        self.force_log()?;
        self.master.ckpt_lsn = begin;
        self.write_master()?;
        self.last_ckpt_lsn = begin;
        self.stats.checkpoints += 1;
        // A transaction whose commit record is durable (the force above covered every commit
        // record appended before it) needs no undo, so its records do not hold the tail; only
        // their pages' redo does, through the DPT. Holding it made a commit waiting for a slow
        // force (a block FTL's merge stalls a force for seconds) pin the log while the other
        // terminals filled it ("the log is full" in fault-free TPC-C runs on block and FAST).
        debug_assert!(att
            .iter()
            .filter(|a| a.committed)
            .all(|a| a.last_lsn < self.log.durable_lsn()));
        let tail = begin
            .min(dpt.iter().map(|d| d.1).min().unwrap_or(begin))
            .min(oldest_undo_lsn(&att).unwrap_or(begin));
        self.log.set_tail(tail);
        // The master record naming this checkpoint is durable: recovery no longer reads below
        // the tail, so the store may drop those log blocks.
        let r = self.log.release_dead(&mut *self.store, self.now);
        self.now = self.note(r)?;
        self.ckpt_end_lsn = self.log.next_lsn();
        Ok(())
    }

    fn maybe_checkpoint(&mut self) -> Result<()> {
        if !self.background_mode && self.checkpoint_due() {
            self.checkpoint_now()?;
        }
        Ok(())
    }

    /// Has enough log been written since the last checkpoint to take the next one?
    pub fn checkpoint_due(&self) -> bool {
        let every = self
            .cfg
            .checkpoint_bytes
            .unwrap_or(self.log.capacity_bytes() / 4);
        self.log.next_lsn() - self.last_ckpt_lsn >= every
    }

    /// The periodic checkpoint: writes back pages dirtied before the previous checkpoint, so
    /// that the tail can move, then checkpoints.
    fn checkpoint_now(&mut self) -> Result<()> {
        let old = self.last_ckpt_lsn;
        let n = self
            .pool
            .dirty_pages()
            .iter()
            .filter(|(_, l)| *l < old)
            .count();
        if n > 0 {
            self.flush_pages(n)?;
        }
        self.checkpoint()
    }

    fn make_log_room(&mut self) -> Result<()> {
        let n = self.pool.dirty_count();
        self.flush_pages(n)?;
        self.checkpoint()
    }

    /// Writes back up to `max` dirty pages (oldest first) and syncs them.
    pub fn flush_pages(&mut self, max: usize) -> Result<Nanos> {
        self.check_ok()?;
        let r = self
            .pool
            .flush(&mut *self.store, &mut self.log, self.now, max, true);
        self.now = self.note(r)?;
        self.settle_io_cpu();
        Ok(self.now)
    }

    /// Background mode: `commit_finish` no longer runs a due checkpoint itself; `background`
    /// does, at its own time. The virtual-time scheduler turns it on for a run (and off after),
    /// so that a checkpoint's I/O contends with the terminals for the flash, as a checkpointer
    /// thread's would, instead of stopping the terminal whose commit made it due for seconds.
    /// A full log still checkpoints inline (`make_log_room`): nothing can proceed without room.
    pub fn set_background_mode(&mut self, on: bool) {
        self.background_mode = on;
    }

    /// Background work at time `at`: a due checkpoint (in background mode), else the page
    /// cleaner, which starts when more than half of the pool is dirty and writes back, oldest
    /// first, one page per die per call (a queue depth of one per die, so that the terminals'
    /// reads wait behind at most one write per die instead of behind a whole batch) until a
    /// quarter of the pool is dirty. Cleaner writes are not synced: the WAL covers them, and
    /// the next checkpoint syncs before the log tail moves past them.
    ///
    /// Returns when its I/O completes and whether it has more to do right away (call again at
    /// that time) rather than at the next period.
    pub fn background(&mut self, at: Nanos) -> Result<(Nanos, bool)> {
        self.check_ok()?;
        let saved = self.now;
        self.now = at;
        let r = self.background_work();
        let done = self.now;
        self.now = saved;
        r.map(|more| (done, more))
    }

    fn background_work(&mut self) -> Result<bool> {
        if self.background_mode && self.checkpoint_due() {
            self.checkpoint_now()?;
            return Ok(self.cleaning);
        }
        let dirty = self.pool.dirty_count();
        let cap = self.pool.capacity();
        if dirty * 2 > cap {
            self.cleaning = true;
        }
        if !self.cleaning || dirty <= cap / 4 {
            self.cleaning = false;
            return Ok(false);
        }
        let batch = self
            .store
            .nand()
            .map_or(1, |n| n.geometry().dies() as usize)
            .min(dirty - cap / 4);
        let r = self
            .pool
            .flush(&mut *self.store, &mut self.log, self.now, batch, false);
        self.now = self.note(r)?;
        self.settle_io_cpu();
        // Pinned pages cannot be written: stop rather than spin when nothing was.
        let progress = self.pool.dirty_count() < dirty;
        self.cleaning = progress && self.pool.dirty_count() > cap / 4;
        Ok(self.cleaning)
    }

    /// Clean shutdown: all pages written, a checkpoint. The store can be reopened.
    pub fn shutdown(mut self) -> Result<Box<dyn PageStore>> {
        let n = self.pool.dirty_count();
        self.flush_pages(n)?;
        self.checkpoint()?;
        Ok(self.store)
    }

    // ---- checks ----

    /// Structural check of the whole database: every B-tree is well formed, every index agrees
    /// with its table's heap (same entries both ways), and every allocated page on storage has
    /// a valid checksum. Returns the problems found (empty: consistent).
    pub fn check(&mut self) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        let tables: Vec<Arc<Table>> = self.catalog.tables.values().cloned().collect();
        for t in &tables {
            let rows = self.heap_scan(t.head)?;
            for iid in &t.indexes {
                let idx = self.catalog.indexes[iid].clone();
                match self.bt_check(idx.root) {
                    Ok(n) if n != rows.len() => problems.push(format!(
                        "index {} has {n} entries, table {} {} rows",
                        idx.name,
                        t.name,
                        rows.len()
                    )),
                    Ok(_) => {}
                    Err(e) => problems.push(format!("index {}: {e}", idx.name)),
                }
                for (rid, row) in &rows {
                    let key = self.index_key(&idx, &t.schema, row, *rid)?;
                    match self.bt_get(idx.root, &key)? {
                        Some(v) if Rid::decode(&v) == Some(*rid) => {}
                        other => {
                            problems.push(format!(
                                "row {rid:?} of {} is not in index {} (found {other:?})",
                                t.name, idx.name
                            ));
                            break;
                        }
                    }
                }
            }
        }
        // Checksums of every page on storage: write everything back first.
        let n = self.pool.dirty_count();
        self.flush_pages(n)?;
        let mut buf = vec![0u8; self.page_bytes()];
        let total = self
            .store
            .db_pages()
            .min(u64::from(self.alloc_high_water()));
        for pid in 0..total as PageId {
            self.now = self.io(|s, t| s.read_page(t, pid, &mut buf))?;
            if let Err(e) = page::verify(&buf, pid) {
                problems.push(e.to_string());
            }
        }
        Ok(problems)
    }

    fn alloc_high_water(&mut self) -> PageId {
        // Conservative: scan up to the allocation cursor or the end of the first map group.
        self.alloc_cursor.max(64)
    }

    /// Active transactions (for tests and the scheduler).
    pub fn active_txns(&self) -> usize {
        self.txns.len()
    }
    pub fn log_durable_lsn(&self) -> Lsn {
        self.log.durable_lsn()
    }
    pub fn log_next_lsn(&self) -> Lsn {
        self.log.next_lsn()
    }
    /// The log's capacity: the stream bytes it can hold between its tail and its head.
    pub fn log_capacity_bytes(&self) -> u64 {
        self.log.capacity_bytes()
    }
    /// Log records below this LSN are no longer needed by recovery (log.rs invariant 3).
    pub fn log_tail_lsn(&self) -> Lsn {
        self.log.tail_lsn()
    }
}

impl Engine {
    /// True in the canary configuration that acknowledges commits before the log force.
    pub fn acks_early(&self) -> bool {
        self.cfg.unsafe_ack_before_force
    }
}
