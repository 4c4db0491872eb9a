//! The engine's side of heap files (heap.rs): its placement policy as the heap's hooks, each
//! forwarding to the engine's IAA and free-space-reuse methods (iaa.rs) or to the page store.

use crate::error::Result;
use crate::heap::Heap;
use crate::{ObjectId, PageId};

use super::Engine;

impl Heap for Engine {
    fn iaa_place(&mut self, object: ObjectId, len: usize) -> Result<Option<PageId>> {
        Engine::iaa_place(self, object, len)
    }
    fn iaa_note_page(&mut self, object: ObjectId, pid: PageId) -> Result<()> {
        Engine::iaa_note_page(self, object, pid)
    }
    fn iaa_reuse_somewhere(&self) -> bool {
        Engine::iaa_reuse_somewhere(self)
    }
    fn insert_hint(&mut self, object: ObjectId, candidates: &[PageId]) -> Option<PageId> {
        self.store.insert_hint(object, candidates)
    }
}
