//! Preconditioning a device without running transactions: the write-backs a workload makes,
//! counted per page (`count_page_writes`), and pages rewritten with the bytes they hold
//! (`rewrite_pages`), so that a store's flash reaches the state a long run leaves it in (its
//! blocks mixed, GC copying what it would copy) at the cost of a page read and a page write
//! each, not of the transactions that would have dirtied them. `lab`'s warm-up decides which
//! pages, and how many.
//!
//! A rewrite changes nothing the database can see: the page is read from the store and written
//! back byte for byte, with the write hint the buffer pool would give it. A page dirty in the
//! buffer pool keeps its newer image there, which the pool writes back as usual; the store only
//! gets another copy of what it already holds. So no log record, no checkpoint and no flush is
//! needed, and recovery after a rewrite finds the same database.
//!
//! Invariants:
//! 1. Only pages the space maps hold allocated are rewritten (a freed page's bytes are not the
//!    database's); the others are counted as skipped.
//! 2. A rewrite writes back exactly the bytes read (checked in debug builds against a second
//!    read), one page at a time (queue depth one), charging no host CPU.

use super::Engine;
use crate::error::{Error, Result};
use crate::page;
use crate::{ObjectId, PageId};

/// What `rewrite_pages` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rewrites {
    pub rewritten: u64,
    /// Pages not allocated when their turn came (invariant 1).
    pub skipped: u64,
}

impl Engine {
    /// Starts counting write-backs per DB page, from zero (`crate::buffer::PageWrites`).
    pub fn count_page_writes(&mut self) {
        self.pool.count_page_writes();
    }

    /// The write-backs counted since `count_page_writes`, which stops counting.
    pub fn take_page_writes(&mut self) -> Option<crate::buffer::PageWrites> {
        self.pool.take_page_writes()
    }

    /// The object of every allocated DB page (None for free pages), read from the store after
    /// the dirty pages are written back. Reads every allocated page once.
    pub fn page_objects(&mut self) -> Result<Vec<Option<ObjectId>>> {
        self.check_ok()?;
        let n = self.pool.dirty_count();
        self.flush_pages(n)?;
        let allocated = self.allocated_pages()?;
        let mut buf = vec![0u8; self.page_bytes()];
        let mut objects = vec![None; allocated.len()];
        for (pid, _) in allocated.iter().enumerate().filter(|(_, &a)| a) {
            self.now = self.io(|s, t| s.read_page(t, pid as PageId, &mut buf))?;
            objects[pid] = Some(page::object(&buf));
        }
        Ok(objects)
    }

    /// Rewrites each of `pids` that is allocated with the bytes the store holds for it (module
    /// doc), one after another from the engine's clock, which ends at the last write's
    /// completion. Needs no transaction open; refused on pages with In-Place Appends (their
    /// delta areas are folded only by the buffer pool's write-back).
    pub fn rewrite_pages(&mut self, pids: &[PageId]) -> Result<Rewrites> {
        self.check_ok()?;
        if !self.txns.is_empty() {
            return Err(Error::Unsupported(
                "rewrite_pages needs no transaction open (quiesce first)".into(),
            ));
        }
        let allocated = self.allocated_pages()?;
        let mut buf = vec![0u8; self.page_bytes()];
        let mut done = Rewrites::default();
        for &pid in pids {
            if !allocated.get(pid as usize).copied().unwrap_or(false) {
                done.skipped += 1;
                continue;
            }
            self.now = self.io(|s, t| s.read_page(t, pid, &mut buf))?;
            if self.store.ipa_scheme(page::object(&buf)).is_some() {
                return Err(Error::Unsupported(format!(
                    "page {pid} belongs to an object with In-Place Appends: rewrite_pages cannot fold its deltas"
                )));
            }
            let hint = crate::buffer::hint_of(&buf);
            self.now = self.io(|s, t| s.write_page(t, pid, &buf, hint))?;
            #[cfg(debug_assertions)]
            {
                let mut again = vec![0u8; buf.len()];
                self.now = self.io(|s, t| s.read_page(t, pid, &mut again))?;
                debug_assert!(again == buf, "invariant 2: page {pid} rewritten as read");
            }
            done.rewritten += 1;
        }
        self.now = self.io(|s, t| s.sync_pages(t))?;
        Ok(done)
    }
}
