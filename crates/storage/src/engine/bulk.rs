//! The engine's side of bulk loads (bulk.rs): the catalog lookups before a load and the
//! write-back and checkpoint that end it (bulk.rs's recovery rule); the pages in between are
//! bulk.rs's, written through the engine's `PageAccess`.

use crate::bulk::{check_options, Bulk, BulkLoad, BulkOptions, BulkStats};
use crate::error::{Error, Result};
use crate::{ObjectId, Rid};

use super::Engine;

impl Bulk for Engine {}

impl Engine {
    /// Starts a bulk load of the empty table `table` (bulk.rs invariant 1).
    pub fn bulk_begin(&mut self, table: ObjectId, opts: BulkOptions) -> Result<BulkLoad> {
        check_options(opts)?;
        let t = self
            .catalog
            .tables
            .get(&table)
            .map(|t| crate::catalog::Table::clone(t))
            .ok_or_else(|| Error::NotFound {
                kind: "table",
                name: format!("#{table}"),
            })?;
        // Looked up here, checked by bulk_start in this order (the lookups change nothing).
        let indexes = t
            .indexes
            .iter()
            .map(|id| {
                self.catalog
                    .indexes
                    .get(id)
                    .map(|i| crate::catalog::Index::clone(i))
                    .ok_or_else(|| Error::NotFound {
                        kind: "index",
                        name: format!("#{id}"),
                    })
            })
            .collect();
        self.bulk_start(table, t, indexes, opts)
    }

    /// Adds one encoded row (it must match the table's schema); returns its record id.
    pub fn bulk_insert(&mut self, b: &mut BulkLoad, row: &[u8]) -> Result<Rid> {
        self.bulk_add(b, row)
    }

    /// Writes the last heap page, builds the indexes, writes every page back and checkpoints.
    pub fn bulk_finish(&mut self, b: BulkLoad) -> Result<BulkStats> {
        let stats = self.bulk_write_rest(b)?;
        let dirty = self.pool.dirty_count();
        self.flush_pages(dirty)?;
        self.checkpoint()?;
        Ok(stats)
    }
}
