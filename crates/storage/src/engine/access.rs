//! The engine's side of [`PageAccess`], the interface the access methods are written against:
//! each method forwards to the engine's own operation of the same name, so running an access
//! method through it fixes, logs and allocates exactly as before.

use crate::access::{Event, PageAccess};
use crate::btree::BTree;
use crate::buffer::{BufferPool, Fix};
use crate::error::Result;
use crate::ipa::IpaScheme;
use crate::log::{Body, Op};
use crate::pagestore::PageKind;
use crate::{Lsn, Nanos, ObjectId, PageId, TxnId};

use super::Engine;

impl PageAccess for Engine {
    fn fix(&mut self, pid: PageId, how: Fix) -> Result<usize> {
        Engine::fix(self, pid, how)
    }
    fn fix_ahead(&mut self, pid: PageId) -> Result<(usize, Nanos)> {
        let at = self.now();
        let r = self
            .pool
            .fix(&mut *self.store, &mut self.log, at, pid, Fix::Read);
        let (fr, _, ready) = self.note(r)?;
        // The read's host path runs now, on the scanning terminal; the read itself completes
        // at `ready`.
        self.settle_io_cpu();
        Ok((fr, ready))
    }
    fn now(&self) -> Nanos {
        Engine::now(self)
    }
    fn set_now(&mut self, t: Nanos) {
        Engine::set_now(self, t)
    }
    fn pool(&self) -> &BufferPool {
        &self.pool
    }
    fn pool_mut(&mut self) -> &mut BufferPool {
        &mut self.pool
    }
    fn log_apply(&mut self, txn: TxnId, body: Body) -> Result<Lsn> {
        Engine::log_apply(self, txn, body)
    }
    fn alloc_page(
        &mut self,
        object: ObjectId,
        kind: PageKind,
        taken: &[PageId],
    ) -> Result<(PageId, Op)> {
        Engine::alloc_page(self, object, kind, taken)
    }
    fn free_op(&mut self, pid: PageId) -> Result<Op> {
        Engine::free_op(self, pid)
    }
    fn page_bytes(&self) -> usize {
        Engine::page_bytes(self)
    }
    fn ipa_scheme(&self, object: ObjectId) -> Option<IpaScheme> {
        self.store.ipa_scheme(object)
    }
    fn db_pages(&self) -> u64 {
        self.store.db_pages()
    }
    fn count(&mut self, event: Event) {
        match event {
            Event::BTreeSplit => self.stats.btree_splits += 1,
            Event::BTreeMerge => self.stats.btree_merges += 1,
        }
    }
}

impl BTree for Engine {}
