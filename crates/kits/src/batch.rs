//! Loading for every kit, one of two ways (`LoadMethod`), with progress reported every `BATCH`
//! rows:
//! - `Rows`: one logged insert per row and index, one transaction per `BATCH` rows, so that a
//!   load neither holds one huge transaction in the log nor pays a commit per row;
//! - `Bulk`: `storage::bulk` per table (dense heap pages, B+-trees built bottom-up from the
//!   sorted keys, one redo record per page, a checkpoint at the end). Tables may be filled
//!   interleaved, as a generator produces their rows: each table has its own bulk load, opened at
//!   its first row and finished, in that order, by `finish`.
//!
//! Either way the same rows go into the same tables in the same order (a kit's generator does
//! not know which loader runs), so the logical content is the same; the page layout differs
//! (bulk: full heap pages and full B+-tree nodes; rows: full heap pages, B+-tree nodes that split
//! at half as keys arrive).

use storage::bulk::{BulkLoad, BulkOptions};
use storage::tuple::Value;
use storage::{Engine, ObjectId, Result};

use crate::LoadMethod;

/// Rows per load transaction (`Rows`) and per progress report.
pub(crate) const BATCH: u64 = 2000;

pub(crate) struct Batcher<'a, F: FnMut(u64)> {
    done: u64,
    /// `Rows`: the open load transaction.
    txn: Option<u64>,
    /// `Bulk`: the open bulk load of each table, in the order of their first rows.
    bulk: Vec<BulkLoad>,
    progress: &'a mut F,
}

impl<'a, F: FnMut(u64)> Batcher<'a, F> {
    pub(crate) fn begin(e: &mut Engine, method: LoadMethod, progress: &'a mut F) -> Result<Self> {
        let txn = match method {
            LoadMethod::Rows => Some(e.begin()?),
            LoadMethod::Bulk => None,
        };
        Ok(Batcher {
            done: 0,
            txn,
            bulk: Vec::new(),
            progress,
        })
    }

    pub(crate) fn put(&mut self, e: &mut Engine, table: ObjectId, row: &[Value]) -> Result<()> {
        match self.txn {
            Some(txn) => {
                e.insert(txn, table, row)?;
            }
            None => {
                let i = match self.bulk.iter().position(|b| b.table() == table) {
                    Some(i) => i,
                    None => {
                        self.bulk.push(e.bulk_begin(table, BulkOptions::default())?);
                        self.bulk.len() - 1
                    }
                };
                let b = &mut self.bulk[i];
                let bytes = b.schema().encode(row)?;
                e.bulk_insert(b, &bytes)?;
            }
        }
        self.done += 1;
        if self.done.is_multiple_of(BATCH) {
            if let Some(txn) = self.txn {
                e.commit(txn)?;
                self.txn = Some(e.begin()?);
            }
            (self.progress)(self.done);
        }
        Ok(())
    }

    /// Commits the last batch (`Rows`) or finishes every table's bulk load (`Bulk`: its indexes
    /// built, every page written back, a checkpoint), and reports the total; returns the rows
    /// loaded.
    pub(crate) fn finish(self, e: &mut Engine) -> Result<u64> {
        if let Some(txn) = self.txn {
            e.commit(txn)?;
        }
        for b in self.bulk {
            e.bulk_finish(b)?;
        }
        (self.progress)(self.done);
        Ok(self.done)
    }
}
