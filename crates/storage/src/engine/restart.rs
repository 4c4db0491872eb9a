//! ARIES restart (engine invariant 4): analysis from the last complete checkpoint, redo that
//! repeats history, undo of the losers; then the catalog is read back from its heap.

use std::collections::{BTreeMap, BTreeSet};

use crate::catalog::{self, Catalog, Entry};
use crate::error::{Error, Result};
use crate::heap::Heap;
use crate::log::{oldest_undo_lsn, Body, Found, LogManager, LogReader, Op, TxnEntry, PAYLOAD};
use crate::page;
use crate::{Lsn, ObjectId, PageId, TxnId};

use super::{apply_op, Engine, Txn, TxnState};

impl Engine {
    /// Restart from the checkpoint at `ckpt`: analysis, redo, undo, in that order, each a
    /// step below; the log manager is set up between analysis and redo.
    pub(super) fn recover(&mut self, ckpt: Lsn) -> Result<()> {
        let cap = self.store.log_blocks();
        let mut rd = LogReader::new(cap);
        // Analysis.
        let (att, dpt, end) = self.recover_analysis(&mut rd, ckpt)?;
        self.now = self.now.max(rd.done_ns);
        if end == ckpt {
            return Err(Error::Recovery(format!(
                "the checkpoint at LSN {ckpt} named by the master record is missing from the log"
            )));
        }
        // The log continues at the next block boundary, in the new epoch (log.rs invariant 5).
        let restart = end.div_ceil(PAYLOAD) * PAYLOAD;
        let tail = dpt
            .values()
            .copied()
            .min()
            .unwrap_or(ckpt)
            .min(ckpt)
            .min(oldest_undo_lsn(att.values()).unwrap_or(ckpt));
        self.log = LogManager::new(cap, self.master.epoch, restart, tail);
        // Redo: repeat history from the oldest dirty page.
        self.recover_redo(&mut rd, &dpt, ckpt, end)?;
        self.now = self.now.max(rd.done_ns);
        // Undo the losers, newest change first across all of them.
        self.recover_undo(&att)?;
        self.force_log()?;
        Ok(())
    }

    /// Analysis: reads the log from the checkpoint to its end and returns the transaction
    /// table, the dirty page table (both merged with the checkpoint's) and the end of the last
    /// record. A step because it only reads the log; redo and undo work from its tables.
    #[allow(clippy::type_complexity)]
    fn recover_analysis(
        &mut self,
        rd: &mut LogReader,
        ckpt: Lsn,
    ) -> Result<(BTreeMap<TxnId, TxnEntry>, BTreeMap<PageId, Lsn>, Lsn)> {
        let mut att: BTreeMap<TxnId, TxnEntry> = BTreeMap::new();
        let mut dpt: BTreeMap<PageId, Lsn> = BTreeMap::new();
        let mut pos = ckpt;
        let mut end = ckpt;
        loop {
            match rd.record_at(&mut *self.store, self.now, pos)? {
                Found::Record(rec, next) => {
                    let lsn = pos;
                    if rec.txn != 0 {
                        let e = att.entry(rec.txn).or_insert(TxnEntry {
                            txn: rec.txn,
                            last_lsn: lsn,
                            undo_next: lsn,
                            first_lsn: lsn,
                            committed: false,
                        });
                        e.last_lsn = lsn;
                        match &rec.body {
                            Body::Update { .. } | Body::Redo(_) => e.undo_next = lsn,
                            Body::Clr { undo_next, .. } => e.undo_next = *undo_next,
                            Body::Commit => e.committed = true,
                            _ => {}
                        }
                        if rec.body == Body::End {
                            att.remove(&rec.txn);
                        }
                        self.next_txn = self.next_txn.max(rec.txn + 1);
                    }
                    for op in rec.ops() {
                        dpt.entry(op.pid()).or_insert(lsn);
                    }
                    if let Body::CkptEnd {
                        att: a,
                        dpt: d,
                        next_txn,
                    } = &rec.body
                    {
                        for t in a {
                            att.entry(t.txn).or_insert_with(|| t.clone());
                        }
                        for (p, l) in d {
                            let e = dpt.entry(*p).or_insert(*l);
                            *e = (*e).min(*l);
                        }
                        self.next_txn = self.next_txn.max(*next_txn);
                    }
                    end = next;
                    pos = next;
                }
                Found::Jump(p) => pos = p,
                Found::End => break,
            }
        }
        Ok((att, dpt, end))
    }

    /// Redo: repeats history from the oldest dirty page up to `end`, applying each record's ops
    /// to the pages that need them. A step because it only changes pages (through the pool),
    /// never the transaction table.
    fn recover_redo(
        &mut self,
        rd: &mut LogReader,
        dpt: &BTreeMap<PageId, Lsn>,
        ckpt: Lsn,
        end: Lsn,
    ) -> Result<()> {
        let mut pos = dpt.values().copied().min().unwrap_or(ckpt).min(ckpt);
        loop {
            match rd.record_at(&mut *self.store, self.now, pos)? {
                Found::Record(rec, next) => {
                    let lsn = pos;
                    // Whether a page needs this record is decided once, at the record's first op
                    // on it (invariant 4): applying that op sets the page LSN to `lsn`, so testing
                    // the page LSN again would skip the record's later ops on the same page (a
                    // root split sets two allocation bits in one space map: the second was lost).
                    let mut redo_here: Vec<(PageId, bool)> = Vec::new();
                    for op in rec.ops() {
                        let pid = op.pid();
                        if dpt.get(&pid).is_none_or(|&r| lsn < r) {
                            continue;
                        }
                        let (f, corrupt) = self.fix_lenient(pid)?;
                        let p = self.pool.page_mut(f);
                        if corrupt && !matches!(op, Op::PageImage { .. }) {
                            self.pool.unfix(f);
                            return Err(Error::Corrupt {
                                pid,
                                why: format!(
                                    "torn page with no page image to repair it (redo of LSN {lsn})"
                                ),
                            });
                        }
                        let needed = match redo_here.iter().find(|(q, _)| *q == pid) {
                            Some(&(_, needed)) => needed,
                            None => {
                                let needed = page::lsn(p) < lsn || corrupt;
                                redo_here.push((pid, needed));
                                needed
                            }
                        };
                        if needed {
                            let r = apply_op(p, op);
                            if r.is_ok() {
                                if corrupt {
                                    crate::page::put_u64(p, 8, 0);
                                }
                                page::set_lsn(p, lsn);
                                self.pool.mark_dirty(f, lsn);
                                self.stats.recovery_redone += 1;
                            }
                            self.pool.unfix(f);
                            r.map_err(|why| {
                                Error::Recovery(format!("redo of LSN {lsn} on page {pid}: {why}"))
                            })?;
                        } else {
                            self.pool.unfix(f);
                        }
                    }
                    pos = next;
                    if pos >= end {
                        break;
                    }
                }
                Found::Jump(p) => pos = p,
                Found::End => break,
            }
        }
        Ok(())
    }

    /// Undo: ends the winners and rolls the losers back, newest change first across all of
    /// them, logging CLRs. A step because it works from analysis's transaction table alone.
    fn recover_undo(&mut self, att: &BTreeMap<TxnId, TxnEntry>) -> Result<()> {
        for t in att.values() {
            self.txns.insert(
                t.txn,
                Txn {
                    first_lsn: t.first_lsn,
                    last_lsn: t.last_lsn,
                    undo_next: t.undo_next,
                    state: TxnState::Active,
                    deleted_keys: vec![],
                },
            );
        }
        let winners: Vec<TxnId> = att
            .values()
            .filter(|t| t.committed)
            .map(|t| t.txn)
            .collect();
        for w in winners {
            self.log_apply(w, Body::End)?;
            self.txns.remove(&w);
        }
        let mut todo: BTreeSet<(Lsn, TxnId)> =
            self.txns.iter().map(|(&id, t)| (t.undo_next, id)).collect();
        while let Some((lsn, txn)) = todo.pop_last() {
            if lsn == 0 {
                self.log_apply(txn, Body::End)?;
                self.txns.remove(&txn);
                continue;
            }
            let r = self.log.read(&mut *self.store, self.now, lsn);
            let (rec, t) = self.note(r)?;
            self.now = t;
            let next = match rec.body {
                Body::Update { undo, .. } => {
                    self.undo_one(txn, &undo, rec.prev_lsn)?;
                    self.stats.recovery_undone += 1;
                    rec.prev_lsn
                }
                Body::Clr { undo_next, .. } => undo_next,
                _ => rec.prev_lsn,
            };
            todo.insert((next, txn));
        }
        Ok(())
    }

    pub(super) fn load_catalog(&mut self) -> Result<()> {
        let rows = self.heap_scan(catalog::CATALOG_HEAD)?;
        let mut cat = Catalog {
            next_id: catalog::DEFAULT_TABLESPACE + 1,
            ..Catalog::default()
        };
        let mut entries = Vec::new();
        for (rid, b) in rows {
            entries.push((Entry::decode(&b)?, rid));
        }
        // Indexes after tables, so tables learn their indexes.
        entries.sort_by_key(|(e, _)| matches!(e, Entry::Index(_)));
        for (e, rid) in entries {
            cat.add(e, rid);
        }
        self.catalog = cat;
        // NoFTL regions: the store keeps its region table on flash; registering the catalog's
        // regions again is a no-op there and binds every object to its region.
        let regions: Vec<(String, Vec<(String, String)>)> = self
            .catalog
            .regions
            .values()
            .map(|r| (r.name.clone(), r.options.clone()))
            .collect();
        for (name, options) in regions {
            self.now = self.io(|s, t| s.create_region(t, &name, &options))?;
        }
        let objects: Vec<(ObjectId, ObjectId)> = self
            .catalog
            .tables
            .values()
            .map(|t| (t.id, t.tablespace))
            .chain(self.catalog.indexes.values().map(|i| {
                (
                    i.id,
                    self.catalog
                        .tables
                        .get(&i.table)
                        .map_or(catalog::DEFAULT_TABLESPACE, |t| t.tablespace),
                )
            }))
            .collect();
        for (id, ts) in objects {
            self.bind_region(id, ts)?;
        }
        Ok(())
    }

    /// Places an object's pages in its tablespace's region, if it names one.
    pub(super) fn bind_region(&mut self, object: ObjectId, ts: ObjectId) -> Result<()> {
        if let Some(r) = self.catalog.region_of_tablespace(ts).map(str::to_string) {
            self.store.bind_object_region(object, &r)?;
        }
        Ok(())
    }
}
