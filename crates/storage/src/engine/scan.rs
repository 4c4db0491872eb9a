//! The engine's side of sequential scans (scan.rs): the read-ahead depth for the flash below,
//! and `scan_rows`, which finds a table's heap chain in the catalog and runs the scan on it.

use crate::error::{Error, Result};
use crate::scan::{ScanOptions, ScanStats};
use crate::ObjectId;

use super::Engine;

impl Engine {
    /// The read-ahead depth that keeps every die of the flash below busy: two reads per die
    /// (one in service, one queued), or 64 on a store that does not show its flash.
    pub fn default_read_ahead(&self) -> usize {
        self.store
            .nand()
            .map_or(64, |n| 2 * n.geometry().dies() as usize)
    }

    /// Calls `f` on every live record of `table`, in chain order (invariant 1). `f` returns the
    /// virtual CPU time its own work on the row took (beyond `cpu_ns_per_row`), charged with the
    /// page's rows.
    pub fn scan_rows(
        &mut self,
        table: ObjectId,
        opts: ScanOptions,
        f: impl FnMut(&[u8]) -> u64,
    ) -> Result<ScanStats> {
        let head = self
            .catalog
            .tables
            .get(&table)
            .map(|t| t.head)
            .ok_or_else(|| Error::NotFound {
                kind: "table",
                name: format!("#{table}"),
            })?;
        crate::scan::rows(self, table, head, opts, f)
    }
}
