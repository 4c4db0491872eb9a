//! The record and index API the benchmark kits call: catalog lookups by name, inserts,
//! reads, updates and deletes that keep every index in step, key lookups and index scans.

use std::ops::Bound;
use std::sync::Arc;

use crate::btree::BTree;
use crate::catalog::{Catalog, Index, Table};
use crate::error::{Error, Result};
use crate::heap::Heap;
use crate::keyenc;
use crate::lock::{LockMode, Resource};
use crate::tuple::{Schema, Value};
use crate::{ObjectId, Rid, TxnId};

use super::{CpuKind, Engine};

impl Engine {
    pub fn table(&self, name: &str) -> Result<&Table> {
        self.catalog
            .table_by_name(name)
            .ok_or_else(|| Error::NotFound {
                kind: "table",
                name: name.into(),
            })
    }
    pub fn index(&self, name: &str) -> Result<&Index> {
        self.catalog
            .index_by_name(name)
            .ok_or_else(|| Error::NotFound {
                kind: "index",
                name: name.into(),
            })
    }
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }
    fn table_by_id(&self, id: ObjectId) -> Result<Arc<Table>> {
        self.table_ref(id).cloned()
    }
    /// The table without a copy: the hot paths borrow the schema between their `&mut self`
    /// calls instead of cloning the table (its name and column names) per row.
    fn table_ref(&self, id: ObjectId) -> Result<&Arc<Table>> {
        self.catalog.tables.get(&id).ok_or_else(|| Error::NotFound {
            kind: "table",
            name: format!("#{id}"),
        })
    }
    fn index_by_id(&self, id: ObjectId) -> Result<&Index> {
        self.catalog
            .indexes
            .get(&id)
            .map(|i| &**i)
            .ok_or_else(|| Error::NotFound {
                kind: "index",
                name: format!("#{id}"),
            })
    }

    /// The index key of a row: the encoded columns, plus the record id for non-unique indexes.
    pub(super) fn index_key(
        &self,
        idx: &Index,
        schema: &Schema,
        row: &[u8],
        rid: Rid,
    ) -> Result<Vec<u8>> {
        let mut key = Vec::with_capacity(16);
        for &c in &idx.columns {
            let v = schema.decode_column(row, c)?;
            keyenc::encode_into(&mut key, schema.columns[c].ty, &v)?;
        }
        if !idx.unique {
            key.extend_from_slice(&rid.encode());
        }
        Ok(key)
    }

    /// Encodes a key prefix from values of the index's leading columns.
    pub fn key_of(&self, index: ObjectId, vals: &[Value]) -> Result<Vec<u8>> {
        let idx = self.index_by_id(index)?;
        let t = self
            .catalog
            .tables
            .get(&idx.table)
            .ok_or_else(|| Error::NotFound {
                kind: "table",
                name: format!("#{}", idx.table),
            })?;
        if vals.len() > idx.columns.len() {
            return Err(Error::Schema(format!(
                "{} key values for an index of {} columns",
                vals.len(),
                idx.columns.len()
            )));
        }
        let mut key = Vec::new();
        for (v, &c) in vals.iter().zip(&idx.columns) {
            keyenc::encode_into(&mut key, t.schema.columns[c].ty, v)?;
        }
        Ok(key)
    }

    // ---- records ----

    /// Inserts a row into every structure of the table; returns its record id.
    pub fn insert(&mut self, txn: TxnId, table: ObjectId, row: &[Value]) -> Result<Rid> {
        let bytes = self.table_ref(table)?.schema.encode(row)?;
        self.insert_raw(txn, table, &bytes)
    }

    pub fn insert_raw(&mut self, txn: TxnId, table: ObjectId, bytes: &[u8]) -> Result<Rid> {
        self.active(txn)?;
        self.cpu(CpuKind::Call, 1);
        let head = {
            let t = self.table_ref(table)?;
            t.schema.check(bytes)?;
            t.head
        };
        self.lock(txn, Resource::Table(table), LockMode::IX)?;
        let idxs: Vec<Arc<Index>> = self
            .table_ref(table)?
            .indexes
            .iter()
            .filter_map(|i| self.catalog.indexes.get(i).cloned())
            .collect();
        // Check unique keys before changing anything, so a conflict leaves no trace.
        for idx in idxs.iter().filter(|i| i.unique) {
            let schema = &self.table_ref(table)?.schema;
            let key = self.index_key(idx, schema, bytes, Rid { page: 0, slot: 0 })?;
            self.check_unique(txn, idx, &key)?;
        }
        let rid = self.heap_insert(txn, table, head, bytes)?;
        self.lock(txn, Resource::Row(table, rid), LockMode::X)?;
        for idx in &idxs {
            let schema = &self.table_ref(table)?.schema;
            let key = self.index_key(idx, schema, bytes, rid)?;
            self.bt_insert(txn, idx.root, &key, &rid.encode(), &idx.name)?;
        }
        Ok(rid)
    }

    fn check_unique(&mut self, txn: TxnId, idx: &Index, key: &[u8]) -> Result<()> {
        if let Some(other) = self.deleted_key_holder(idx.id, key) {
            if other != txn {
                self.locks.stats.waits += 1;
                return Err(Error::WouldBlock { holder: other });
            }
        }
        if let Some(v) = self.bt_get(idx.root, key)? {
            let rid = Rid::decode(&v).ok_or_else(|| Error::Corrupt {
                pid: idx.root,
                why: "bad record id in index".into(),
            })?;
            // An uncommitted insert by another transaction: wait for it to end.
            self.lock(txn, Resource::Row(idx.table, rid), LockMode::S)?;
            return Err(Error::DuplicateKey {
                index: idx.name.clone(),
            });
        }
        Ok(())
    }

    /// Reads a row (S lock; X with `for_update`).
    pub fn get_raw(
        &mut self,
        txn: TxnId,
        table: ObjectId,
        rid: Rid,
        for_update: bool,
    ) -> Result<Option<Vec<u8>>> {
        self.active(txn)?;
        self.cpu(CpuKind::Call, 1);
        self.lock(
            txn,
            Resource::Table(table),
            if for_update {
                LockMode::IX
            } else {
                LockMode::IS
            },
        )?;
        self.lock(
            txn,
            Resource::Row(table, rid),
            if for_update { LockMode::X } else { LockMode::S },
        )?;
        self.heap_get(rid)
    }

    pub fn get(&mut self, txn: TxnId, table: ObjectId, rid: Rid) -> Result<Option<Vec<Value>>> {
        let t = self.table_by_id(table)?;
        match self.get_raw(txn, table, rid, false)? {
            Some(b) => Ok(Some(t.schema.decode(&b)?)),
            None => Ok(None),
        }
    }

    /// Replaces a row, maintaining the indexes whose key changed.
    pub fn update_raw(&mut self, txn: TxnId, table: ObjectId, rid: Rid, new: &[u8]) -> Result<()> {
        self.active(txn)?;
        self.cpu(CpuKind::Call, 1);
        let t = self.table_by_id(table)?;
        t.schema.check(new)?;
        self.lock(txn, Resource::Table(table), LockMode::IX)?;
        self.lock(txn, Resource::Row(table, rid), LockMode::X)?;
        let old = self.heap_get(rid)?.ok_or(Error::NoSuchRecord(rid))?;
        let idxs: Vec<Arc<Index>> = t
            .indexes
            .iter()
            .filter_map(|i| self.catalog.indexes.get(i).cloned())
            .collect();
        let mut changed = Vec::new();
        for idx in &idxs {
            let ok = self.index_key(idx, &t.schema, &old, rid)?;
            let nk = self.index_key(idx, &t.schema, new, rid)?;
            if ok != nk {
                if idx.unique {
                    self.check_unique(txn, idx, &nk)?;
                }
                changed.push((idx.clone(), ok, nk));
            }
        }
        self.heap_update(txn, rid, &old, new)?;
        for (idx, ok, nk) in changed {
            self.bt_delete(txn, idx.root, &ok)?;
            if idx.unique {
                self.note_deleted_key(txn, idx.id, ok);
            }
            self.bt_insert(txn, idx.root, &nk, &rid.encode(), &idx.name)?;
        }
        Ok(())
    }

    pub fn update(&mut self, txn: TxnId, table: ObjectId, rid: Rid, row: &[Value]) -> Result<()> {
        let t = self.table_by_id(table)?;
        let b = t.schema.encode(row)?;
        self.update_raw(txn, table, rid, &b)
    }

    /// Adds `delta` to an integer column of a row in place and returns the new value (the
    /// TPC-B update, without decoding the row).
    pub fn add_to_column(
        &mut self,
        txn: TxnId,
        table: ObjectId,
        rid: Rid,
        col: usize,
        delta: i64,
    ) -> Result<i64> {
        self.active(txn)?;
        self.cpu(CpuKind::Call, 1);
        let indexed = self.table_ref(table)?.indexes.iter().any(|i| {
            self.catalog
                .indexes
                .get(i)
                .is_some_and(|x| x.columns.contains(&col))
        });
        if indexed {
            let t = self.table_by_id(table)?;
            let mut row = self
                .get_raw(txn, table, rid, true)?
                .ok_or(Error::NoSuchRecord(rid))?;
            let v = t
                .schema
                .get_i64(&row, col)
                .ok_or_else(|| Error::Schema("not an integer column".into()))?
                + delta;
            t.schema.set_i64(&mut row, col, v)?;
            self.update_raw(txn, table, rid, &row)?;
            return Ok(v);
        }
        self.lock(txn, Resource::Table(table), LockMode::IX)?;
        self.lock(txn, Resource::Row(table, rid), LockMode::X)?;
        let old = self.heap_get(rid)?.ok_or(Error::NoSuchRecord(rid))?;
        let mut new = old.clone();
        let schema = &self.table_ref(table)?.schema;
        let v = schema
            .get_i64(&old, col)
            .ok_or_else(|| Error::Schema("not an integer column".into()))?
            .checked_add(delta)
            .ok_or_else(|| Error::Schema("integer overflow".into()))?;
        schema.set_i64(&mut new, col, v)?;
        self.heap_update(txn, rid, &old, &new)?;
        Ok(v)
    }

    /// The transaction that deleted `key` from unique index `index` and has not ended, if any.
    /// The map is empty unless a unique key was deleted (TPC-B never does), so the common case
    /// costs no copy of the key.
    fn deleted_key_holder(&self, index: ObjectId, key: &[u8]) -> Option<TxnId> {
        if self.deleted_keys.is_empty() {
            return None;
        }
        self.deleted_keys.get(&(index, key.to_vec())).copied()
    }

    fn note_deleted_key(&mut self, txn: TxnId, index: ObjectId, key: Vec<u8>) {
        self.deleted_keys.insert((index, key.clone()), txn);
        if let Some(t) = self.txns.get_mut(&txn) {
            t.deleted_keys.push((index, key));
        }
    }

    pub fn delete(&mut self, txn: TxnId, table: ObjectId, rid: Rid) -> Result<()> {
        self.active(txn)?;
        self.cpu(CpuKind::Call, 1);
        let t = self.table_by_id(table)?;
        self.lock(txn, Resource::Table(table), LockMode::IX)?;
        self.lock(txn, Resource::Row(table, rid), LockMode::X)?;
        let old = self.heap_get(rid)?.ok_or(Error::NoSuchRecord(rid))?;
        let idxs: Vec<Arc<Index>> = t
            .indexes
            .iter()
            .filter_map(|i| self.catalog.indexes.get(i).cloned())
            .collect();
        for idx in &idxs {
            let key = self.index_key(idx, &t.schema, &old, rid)?;
            self.bt_delete(txn, idx.root, &key)?;
            if idx.unique {
                self.note_deleted_key(txn, idx.id, key);
            }
        }
        self.heap_delete(txn, rid)
    }

    /// Record ids whose index key starts with the encoded `vals` (S locks on them, X with
    /// `for_update`).
    pub fn lookup(
        &mut self,
        txn: TxnId,
        index: ObjectId,
        vals: &[Value],
        for_update: bool,
    ) -> Result<Vec<Rid>> {
        self.active(txn)?;
        self.cpu(CpuKind::Call, 1);
        // The fields used, copied: a clone of the index would copy its name per lookup.
        let (idx_id, idx_table, idx_root, idx_unique, idx_ncols) = {
            let i = self.index_by_id(index)?;
            (i.id, i.table, i.root, i.unique, i.columns.len())
        };
        let key = self.key_of(index, vals)?;
        self.lock(
            txn,
            Resource::Table(idx_table),
            if for_update {
                LockMode::IX
            } else {
                LockMode::IS
            },
        )?;
        let rids: Vec<Rid> = if idx_unique && vals.len() == idx_ncols {
            if let Some(other) = self.deleted_key_holder(idx_id, &key) {
                if other != txn {
                    return Err(Error::WouldBlock { holder: other });
                }
            }
            self.bt_get_with(idx_root, &key, Rid::decode)?
                .flatten()
                .into_iter()
                .collect()
        } else {
            // A prefix: lock the table S against phantoms.
            self.lock(
                txn,
                Resource::Table(idx_table),
                if for_update {
                    LockMode::SIX
                } else {
                    LockMode::S
                },
            )?;
            // Stop the walk where the prefix ends: every key under it sorts below its successor.
            let end = prefix_successor(&key);
            let hi = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
            let entries = self.bt_scan(idx_root, Bound::Included(&key), hi, false, usize::MAX)?;
            debug_assert!(entries.iter().all(|(k, _)| k.starts_with(&key)));
            entries
                .into_iter()
                .filter_map(|(_, v)| Rid::decode(&v))
                .collect()
        };
        for &rid in &rids {
            self.lock(
                txn,
                Resource::Row(idx_table, rid),
                if for_update { LockMode::X } else { LockMode::S },
            )?;
        }
        Ok(rids)
    }

    /// Index entries between two key prefixes (inclusive), ascending or descending, at most
    /// `limit`. Takes a table S lock (phantom protection).
    pub fn scan_index(
        &mut self,
        txn: TxnId,
        index: ObjectId,
        lo: Option<&[Value]>,
        hi: Option<&[Value]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Rid)>> {
        self.active(txn)?;
        self.cpu(CpuKind::Call, 1);
        let idx = self.index_by_id(index)?.clone();
        self.lock(txn, Resource::Table(idx.table), LockMode::S)?;
        let lo_k = lo.map(|v| self.key_of(index, v)).transpose()?;
        let hi_k = hi.map(|v| self.key_of(index, v)).transpose()?.map(|mut k| {
            k.extend_from_slice(&[0xFF; 8]);
            k
        });
        let lo_b = lo_k.as_deref().map_or(Bound::Unbounded, Bound::Included);
        let hi_b = hi_k.as_deref().map_or(Bound::Unbounded, Bound::Included);
        Ok(self
            .bt_scan(idx.root, lo_b, hi_b, reverse, limit)?
            .into_iter()
            .filter_map(|(k, v)| Rid::decode(&v).map(|r| (k, r)))
            .collect())
    }

    /// Every row of a table (table S lock).
    pub fn scan_table(&mut self, txn: TxnId, table: ObjectId) -> Result<Vec<(Rid, Vec<u8>)>> {
        self.active(txn)?;
        self.cpu(CpuKind::Call, 1);
        let t = self.table_by_id(table)?;
        self.lock(txn, Resource::Table(table), LockMode::S)?;
        self.heap_scan(t.head)
    }

    /// Runs `f` on a row's bytes without copying (no lock: for checks after the run).
    pub fn peek_row<T>(&mut self, rid: Rid, f: impl FnOnce(&[u8]) -> T) -> Result<Option<T>> {
        self.heap_with(rid, f)
    }
}

/// The smallest byte string greater than every string that starts with `prefix` (`None`: no
/// such string, the prefix is all 0xFF). Keys compare bytewise, so a prefix scan ends there.
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}

#[cfg(test)]
mod prefix_tests {
    use super::prefix_successor;

    #[test]
    fn a_prefix_successor_bounds_exactly_the_keys_under_the_prefix() {
        assert_eq!(prefix_successor(&[1, 2, 3]), Some(vec![1, 2, 4]));
        assert_eq!(prefix_successor(&[1, 0xFF, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF, 0xFF]), None);
        let end = prefix_successor(&[7, 0xFE]).unwrap();
        for under in [
            &[7u8, 0xFE][..],
            &[7, 0xFE, 0xFF, 0xFF, 0xFF],
            &[7, 0xFE, 0],
        ] {
            assert!(under < &end[..]);
        }
        assert!([7u8, 0xFF][..] >= end[..]);
    }
}
