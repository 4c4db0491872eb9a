//! Bulk loading for every kit: one transaction per `BATCH` rows, so that a load neither holds one
//! huge transaction in the log nor pays a commit per row, with progress reported after each
//! commit.

use storage::tuple::Value;
use storage::{Engine, ObjectId, Result};

/// Rows per load transaction.
pub(crate) const BATCH: u64 = 2000;

pub(crate) struct Batcher<'a, F: FnMut(u64)> {
    done: u64,
    txn: u64,
    progress: &'a mut F,
}

impl<'a, F: FnMut(u64)> Batcher<'a, F> {
    pub(crate) fn begin(e: &mut Engine, progress: &'a mut F) -> Result<Self> {
        Ok(Batcher {
            done: 0,
            txn: e.begin()?,
            progress,
        })
    }

    pub(crate) fn put(&mut self, e: &mut Engine, table: ObjectId, row: &[Value]) -> Result<()> {
        e.insert(self.txn, table, row)?;
        self.done += 1;
        if self.done.is_multiple_of(BATCH) {
            e.commit(self.txn)?;
            (self.progress)(self.done);
            self.txn = e.begin()?;
        }
        Ok(())
    }

    /// Commits the last batch and reports the total; returns the rows loaded.
    pub(crate) fn finish(self, e: &mut Engine) -> Result<u64> {
        e.commit(self.txn)?;
        (self.progress)(self.done);
        Ok(self.done)
    }
}
