//! Preconditioning a device without running transactions: the reads and write-backs a workload
//! makes, recorded in order (`count_page_io`), and page operations replayed
//! on the store (`replay_page_io`: pages read, and pages written back with the bytes they hold),
//! so that a store reaches the state a long run leaves it in (its blocks mixed, GC copying what
//! it would copy, a mapping cache holding what the workload looks up) at the cost of the page
//! operations, not of the transactions that would have made them. `lab`'s warm-up decides which
//! pages, and how many.
//!
//! A replay changes nothing the database can see: the page is read from the store and written
//! back byte for byte, with the write hint the buffer pool would give it. A page dirty in the
//! buffer pool keeps its newer image there, which the pool writes back as usual; the store only
//! gets another copy of what it already holds. So no log record, no checkpoint and no flush is
//! needed, and recovery after a replay finds the same database.
//!
//! Invariants:
//! 1. Only pages the space maps hold allocated are read or rewritten (a freed page's bytes are
//!    not the database's); operations on the others are counted as skipped.
//! 2. A write writes back exactly the bytes the store holds (read by the replay, now or as one of
//!    its recent reads: nothing but a replay runs between them; checked in debug builds against a
//!    second read). Operations run one at a time (queue depth one) and charge no host CPU.

use std::collections::{HashMap, VecDeque};

use super::Engine;
use crate::buffer::PageOp;
use crate::error::{Error, Result};
use crate::page;
use crate::{ObjectId, PageId};

/// What `replay_page_io` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    pub reads: u64,
    pub writes: u64,
    /// Writes whose page was not among the replay's recent reads, so it was read first.
    pub writes_read_first: u64,
    /// Operations on pages not allocated when their turn came (invariant 1).
    pub skipped: u64,
}

/// What a replay keeps between its batches, valid while nothing but the replay runs: the pages
/// it read last, with their bytes (a write of one of them needs no read, as a write-back of a
/// page the pool holds needs none; FIFO, as many pages as the pool has frames), and which pages
/// are allocated (read from the space maps once, not per batch).
#[derive(Debug)]
pub struct ReplayPages {
    pages: HashMap<PageId, Box<[u8]>>,
    order: VecDeque<PageId>,
    capacity: usize,
    allocated: Option<Vec<bool>>,
}

impl ReplayPages {
    pub fn new(capacity: usize) -> ReplayPages {
        ReplayPages {
            pages: HashMap::with_capacity(capacity),
            order: VecDeque::with_capacity(capacity),
            capacity: capacity.max(1),
            allocated: None,
        }
    }

    fn keep(&mut self, pid: PageId, bytes: &[u8]) {
        if let Some(b) = self.pages.get_mut(&pid) {
            b.copy_from_slice(bytes);
            return;
        }
        let slot = if self.order.len() >= self.capacity {
            let old = self
                .order
                .pop_front()
                .expect("a full FIFO has a first page");
            self.pages.remove(&old)
        } else {
            None
        };
        let mut b = slot.unwrap_or_else(|| vec![0u8; bytes.len()].into_boxed_slice());
        b.copy_from_slice(bytes);
        self.pages.insert(pid, b);
        self.order.push_back(pid);
    }
}

impl Engine {
    /// Starts counting the pool's reads and write-backs per DB page, from zero
    /// (`crate::buffer::PageIo`).
    pub fn count_page_io(&mut self) {
        self.pool.count_page_io();
    }

    /// The reads and write-backs counted since `count_page_io`, which stops counting.
    pub fn take_page_io(&mut self) -> Option<crate::buffer::PageIo> {
        self.pool.take_page_io()
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

    /// Runs `ops` on the pages that are allocated (module doc): a read reads the page from the
    /// store and keeps its bytes in `recent`; a write writes the page's bytes back, reading them
    /// first if `recent` lacks them. One operation after another from the engine's clock, which
    /// ends at the last one's completion. Needs no transaction open; refused on pages with
    /// In-Place Appends (their delta areas are folded only by the buffer pool's write-back).
    pub fn replay_page_io(&mut self, ops: &[PageOp], recent: &mut ReplayPages) -> Result<Replayed> {
        self.check_ok()?;
        if !self.txns.is_empty() {
            return Err(Error::Unsupported(
                "replay_page_io needs no transaction open (quiesce first)".into(),
            ));
        }
        let allocated = match recent.allocated.take() {
            Some(a) => a,
            None => self.allocated_pages()?,
        };
        let mut buf = vec![0u8; self.page_bytes()];
        let mut done = Replayed::default();
        for &op in ops {
            let pid = op.pid();
            if !allocated.get(pid as usize).copied().unwrap_or(false) {
                done.skipped += 1;
                continue;
            }
            if let PageOp::Read(_) = op {
                self.now = self.io(|s, t| s.read_page(t, pid, &mut buf))?;
                recent.keep(pid, &buf);
                done.reads += 1;
                continue;
            }
            match recent.pages.get(&pid) {
                Some(b) => buf.copy_from_slice(b),
                None => {
                    self.now = self.io(|s, t| s.read_page(t, pid, &mut buf))?;
                    recent.keep(pid, &buf);
                    done.writes_read_first += 1;
                }
            }
            if self.store.ipa_scheme(page::object(&buf)).is_some() {
                return Err(Error::Unsupported(format!(
                    "page {pid} belongs to an object with In-Place Appends: a replay cannot fold its deltas"
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
            done.writes += 1;
        }
        recent.allocated = Some(allocated);
        self.now = self.io(|s, t| s.sync_pages(t))?;
        Ok(done)
    }
}
