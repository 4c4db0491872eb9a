//! The narrow interface the access methods (B+-trees, heap files, scans) work through: pages
//! in the buffer pool, logged page changes and page allocation. The engine implements it
//! (engine/mod.rs); the access methods are written against it, so they sit below the engine
//! instead of being `impl Engine` blocks that import it while it imports them.
//!
//! Every method is the engine's own operation under the same name (`fix`, `log_apply`,
//! `alloc_page`, ...), so an algorithm reads and charges time exactly as it did as an engine
//! method: the engine's implementation only forwards.

use crate::buffer::{BufferPool, Fix};
use crate::error::Result;
use crate::ipa::IpaScheme;
use crate::log::{Body, Op};
use crate::pagestore::PageKind;
use crate::{Lsn, Nanos, ObjectId, PageId, TxnId};

/// Structure changes the engine counts in its statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    BTreeSplit,
    BTreeMerge,
}

/// What an access method may ask of the engine below its own page format.
pub(crate) trait PageAccess {
    /// Fixes `pid` in the buffer pool (charging the CPU model's fix cost, advancing the clock to
    /// the read's completion); returns the frame. Unfix it through [`PageAccess::pool_mut`].
    fn fix(&mut self, pid: PageId, how: Fix) -> Result<usize>;
    /// Fixes `pid` for reading at the current time without charging CPU or advancing the clock
    /// (read-ahead); returns the frame and the time the read completes.
    fn fix_ahead(&mut self, pid: PageId) -> Result<(usize, Nanos)>;
    /// The engine's virtual clock, and moving it (the scan waits for reads ahead and charges its
    /// CPU time through it).
    fn now(&self) -> Nanos;
    fn set_now(&mut self, t: Nanos);
    fn pool(&self) -> &BufferPool;
    fn pool_mut(&mut self) -> &mut BufferPool;
    /// Appends a log record and applies its page ops (engine invariant 1); returns its LSN.
    fn log_apply(&mut self, txn: TxnId, body: Body) -> Result<Lsn>;
    /// A free page for `object` (skipping `taken`) and the op that marks it allocated.
    fn alloc_page(
        &mut self,
        object: ObjectId,
        kind: PageKind,
        taken: &[PageId],
    ) -> Result<(PageId, Op)>;
    /// The op that frees `pid`.
    fn free_op(&mut self, pid: PageId) -> Result<Op>;
    fn page_bytes(&self) -> usize;
    /// The store's In-Place Appends scheme for `object`'s pages, if any.
    fn ipa_scheme(&self, object: ObjectId) -> Option<IpaScheme>;
    /// DB pages in the page store.
    fn db_pages(&self) -> u64;
    /// Counts a structure change in the engine's statistics.
    fn count(&mut self, event: Event);
}
