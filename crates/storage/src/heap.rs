//! Heap files: a chain of slotted pages per table. The head page's `aux` field holds the tail
//! page (where inserts go) and `aux2` the page count.
//!
//! Invariants:
//! 1. Records never move: a record id (page, slot) is stable for the record's life.
//! 2. A deleted record stays as a ghost (bytes kept) until its deleter ends, so rollback can
//!    restore it in place; slots are reused only after they were freed, never while a ghost.
//! 3. Every page of the chain belongs to the table (`page::object`), and the tail is the last.
//! 4. A new tail page is linked (Redo record, not undone on rollback) before any record goes in.

use crate::access::PageAccess;
use crate::buffer::Fix;
use crate::error::{Error, Result};
use crate::log::{Body, Op, Undo};
use crate::page::{self, PageType};
use crate::pagestore::PageKind;
use crate::slotted;
use crate::{ObjectId, PageId, Rid, TxnId};

/// Heap files, written against [`PageAccess`]; the engine implements both (engine/heap.rs).
/// Where a new record goes is the engine's placement policy: the four required methods are its
/// hooks (Insert Address Assist and free-space reuse, iaa.rs, and the page store's hint).
pub(crate) trait Heap: PageAccess {
    /// A page of `object` with room for `len` bytes chosen by IAA or free-space reuse (iaa.rs
    /// placement rules 1 and 2), if any.
    fn iaa_place(&mut self, object: ObjectId, len: usize) -> Result<Option<PageId>>;
    /// The free-space map learns of `pid`'s current room.
    fn iaa_note_page(&mut self, object: ObjectId, pid: PageId) -> Result<()>;
    /// Does some table reuse free space (so deletes must tell the free-space map)?
    fn iaa_reuse_somewhere(&self) -> bool;
    /// The page store's choice among `candidates` for a new record of `object`.
    fn insert_hint(&mut self, object: ObjectId, candidates: &[PageId]) -> Option<PageId>;

    /// Creates an empty heap for `object`; returns its head page.
    fn heap_create(&mut self, object: ObjectId) -> Result<PageId> {
        let (pid, alloc) = self.alloc_page(object, PageKind::Heap, &[])?;
        let mut img = vec![0u8; self.page_bytes()];
        page::format(&mut img, pid, PageType::Heap, object, 0);
        if let Some(scheme) = self.ipa_scheme(object) {
            crate::ipa::reserve(&mut img, scheme);
        }
        slotted::init(&mut img);
        slotted::set_aux(&mut img, pid);
        slotted::set_aux2(&mut img, 1);
        self.log_apply(0, Body::Redo(vec![alloc, Op::image(pid, &img)]))?;
        Ok(pid)
    }

    /// Inserts a record; returns its id. Logged as an undoable update (undo: remove the slot).
    fn heap_insert(
        &mut self,
        txn: TxnId,
        object: ObjectId,
        head: PageId,
        rec: &[u8],
    ) -> Result<Rid> {
        let ipa_bytes = self.ipa_scheme(object).map_or(0, |s| s.area_bytes());
        let max = slotted::max_record(self.page_bytes()) - 64 - ipa_bytes;
        if rec.len() > max {
            return Err(Error::RecordTooLarge {
                bytes: rec.len(),
                max,
            });
        }
        let f = self.fix(head, Fix::Read)?;
        let tail = slotted::aux(self.pool().page(f));
        let count = slotted::aux2(self.pool().page(f));
        self.pool_mut().unfix(f);
        // Insert Address Assist and free-space reuse (iaa.rs placement rules 1 and 2), else the
        // page store may pick among pages with room (today: the tail).
        let placed = self.iaa_place(object, rec.len())?;
        let mut target = match placed {
            Some(pid) => pid,
            None => self.insert_hint(object, &[tail]).unwrap_or(tail),
        };
        let f = self.fix(target, Fix::Read)?;
        let room = slotted::fits(self.pool().page(f), rec.len(), true);
        self.pool_mut().unfix(f);
        if !room {
            let (pid, alloc) = self.alloc_page(object, PageKind::Heap, &[])?;
            let mut img = vec![0u8; self.page_bytes()];
            page::format(&mut img, pid, PageType::Heap, object, 0);
            if let Some(scheme) = self.ipa_scheme(object) {
                crate::ipa::reserve(&mut img, scheme);
            }
            slotted::init(&mut img);
            self.log_apply(
                0,
                Body::Redo(vec![
                    alloc,
                    Op::image(pid, &img),
                    Op::SetField {
                        pid: tail,
                        offset: 24,
                        value: pid,
                    },
                    Op::SetField {
                        pid: head,
                        offset: 40,
                        value: pid,
                    },
                    Op::SetField {
                        pid: head,
                        offset: 44,
                        value: count + 1,
                    },
                ]),
            )?;
            target = pid;
        }
        let f = self.fix(target, Fix::Read)?;
        let slot = slotted::first_free_slot(self.pool().page(f)) as u16;
        self.pool_mut().unfix(f);
        let rid = Rid { page: target, slot };
        self.log_apply(
            txn,
            Body::Update {
                op: Op::HeapInsert {
                    pid: target,
                    slot,
                    data: rec.to_vec(),
                },
                undo: Undo::HeapRemove { pid: target, slot },
            },
        )?;
        self.iaa_note_page(object, target)?;
        Ok(rid)
    }

    /// The live record at `rid`, if any.
    fn heap_get(&mut self, rid: Rid) -> Result<Option<Vec<u8>>> {
        if u64::from(rid.page) >= self.db_pages() {
            return Ok(None);
        }
        let f = self.fix(rid.page, Fix::Read)?;
        let p = self.pool().page(f);
        let r = if page::page_type(p) == PageType::Heap {
            slotted::get(p, rid.slot as usize).map(<[u8]>::to_vec)
        } else {
            None
        };
        self.pool_mut().unfix(f);
        Ok(r)
    }

    /// Runs `f` on the live record at `rid` without copying it.
    fn heap_with<T>(&mut self, rid: Rid, f: impl FnOnce(&[u8]) -> T) -> Result<Option<T>> {
        if u64::from(rid.page) >= self.db_pages() {
            return Ok(None);
        }
        let fr = self.fix(rid.page, Fix::Read)?;
        let p = self.pool().page(fr);
        let r = if page::page_type(p) == PageType::Heap {
            slotted::get(p, rid.slot as usize).map(f)
        } else {
            None
        };
        self.pool_mut().unfix(fr);
        Ok(r)
    }

    fn heap_update(&mut self, txn: TxnId, rid: Rid, old: &[u8], new: &[u8]) -> Result<()> {
        let f = self.fix(rid.page, Fix::Read)?;
        let ok = slotted::fits_replace(self.pool().page(f), rid.slot as usize, new.len());
        self.pool_mut().unfix(f);
        if !ok {
            return Err(Error::Unsupported(format!(
                "record {rid:?} grows beyond the room in its page (records do not move yet)"
            )));
        }
        self.log_apply(
            txn,
            Body::Update {
                op: Op::HeapUpdate {
                    pid: rid.page,
                    slot: rid.slot,
                    data: new.to_vec(),
                },
                undo: Undo::HeapRestore {
                    pid: rid.page,
                    slot: rid.slot,
                    old: old.to_vec(),
                },
            },
        )?;
        Ok(())
    }

    fn heap_delete(&mut self, txn: TxnId, rid: Rid) -> Result<()> {
        self.log_apply(
            txn,
            Body::Update {
                op: Op::HeapGhost {
                    pid: rid.page,
                    slot: rid.slot,
                    ghost: true,
                },
                undo: Undo::HeapUnghost {
                    pid: rid.page,
                    slot: rid.slot,
                },
            },
        )?;
        // The free-space map learns of the ghost (reusable once this deleter ends); only when
        // some table reuses space, so that other workloads pay no extra page fix.
        if self.iaa_reuse_somewhere() {
            let f = self.fix(rid.page, Fix::Read)?;
            let object = page::object(self.pool().page(f));
            self.pool_mut().unfix(f);
            self.iaa_note_page(object, rid.page)?;
        }
        Ok(())
    }

    /// Every live record of the heap, in chain order.
    fn heap_scan(&mut self, head: PageId) -> Result<Vec<(Rid, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut pid = head;
        let mut guard = 0u64;
        while pid != 0 {
            guard += 1;
            if guard > self.db_pages() {
                return Err(Error::Corrupt {
                    pid,
                    why: "heap chain has a cycle".into(),
                });
            }
            let f = self.fix(pid, Fix::Read)?;
            let p = self.pool().page(f);
            for s in 0..slotted::nslots(p) {
                if let Some(r) = slotted::get(p, s) {
                    out.push((
                        Rid {
                            page: pid,
                            slot: s as u16,
                        },
                        r.to_vec(),
                    ));
                }
            }
            let next = page::next(p);
            self.pool_mut().unfix(f);
            pid = next;
        }
        Ok(out)
    }
}
