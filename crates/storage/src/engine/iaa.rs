//! The engine's side of Insert Address Assist and U2DI (iaa.rs: the rules, the switches, the
//! counters and the state): placement, the free-space map, ghost removal to make room, the
//! update that moves a row, and the write-back of hinted pages at commit.

use crate::buffer::Fix;
use crate::error::Result;
use crate::iaa::{room, IaaStats, TableIaa, MAX_COMMITTED_VICTIMS, MAX_PROBES};
use crate::log::{Body, Op};
use crate::page::{self, PageType};
use crate::slotted;
use crate::{ObjectId, PageId, Rid, TxnId};

use super::Engine;

impl Engine {
    /// The IAA switches of `table` (its tablespace's options).
    pub fn iaa_flags(&mut self, table: ObjectId) -> TableIaa {
        if let Some(f) = self.iaa.tables.get(&table) {
            return *f;
        }
        let on = |opts: &[(String, String)], k: &str| {
            opts.iter()
                .any(|(key, v)| key == k && v.eq_ignore_ascii_case("on"))
        };
        let f = self
            .catalog
            .tables
            .get(&table)
            .and_then(|t| self.catalog.tablespaces.get(&t.tablespace))
            .map(|ts| {
                let (iaa, u2di) = (on(&ts.options, "IAA"), on(&ts.options, "U2DI"));
                TableIaa {
                    iaa,
                    u2di,
                    reuse: iaa || u2di || on(&ts.options, "REUSE"),
                }
            })
            .unwrap_or_default();
        self.iaa.tables.insert(table, f);
        f
    }

    /// Has any table seen so far the free-space map on (rule 2)?
    pub(crate) fn iaa_reuse_somewhere(&self) -> bool {
        self.iaa.tables.values().any(|f| f.reuse)
    }

    pub fn iaa_stats(&self) -> IaaStats {
        self.iaa.stats
    }

    /// Victims committed ahead at first, and at most (each 1..=MAX_COMMITTED_VICTIMS; the
    /// defaults are ftl's and MAX_COMMITTED_VICTIMS).
    pub fn set_iaa_victims(&mut self, first: u32, max: u32) {
        self.iaa.max_victims = max.clamp(1, MAX_COMMITTED_VICTIMS);
        self.iaa.victims = first.clamp(1, self.iaa.max_victims);
    }

    /// Notes the room on heap page `pid` of `object` after a change (free-space map).
    pub(crate) fn iaa_note(&mut self, object: ObjectId, pid: PageId, p_room: usize) {
        if self.iaa.tables.get(&object).is_some_and(|f| f.reuse) {
            self.iaa
                .fsm
                .entry(object)
                .or_default()
                .insert(pid, p_room.min(u16::MAX as usize) as u16);
        }
    }

    /// Notes heap page `pid` as it is now (fixes it).
    pub(crate) fn iaa_note_page(&mut self, object: ObjectId, pid: PageId) -> Result<()> {
        if !self.iaa_flags(object).reuse {
            return Ok(());
        }
        let f = self.fix(pid, Fix::Read)?;
        let r = room(self.pool.page(f));
        self.pool.unfix(f);
        self.iaa_note(object, pid, r);
        Ok(())
    }

    /// Fetches the pages valid in the committed victims now. The list of one epoch only
    /// shrinks (pages rewritten since leave it), so it is fetched afresh for every placement
    /// (a scan of the victims' reverse map, no flash operation): a page rewritten since the
    /// last fetch no longer needs a record. A new epoch (other victims) starts a new round.
    fn iaa_refresh(&mut self) {
        let mut pages = Vec::new();
        let Some(info) = self
            .store
            .gc_victims(self.iaa.victims, u64::MAX, &mut pages)
        else {
            return;
        };
        if Some(info.epoch) != self.iaa.epoch {
            for pid in &self.iaa.hinted {
                if self.iaa.used.contains(pid) || pages.contains(pid) {
                    continue;
                }
                if self.iaa.fsm.values().any(|m| m.contains_key(pid)) {
                    self.iaa.stats.victim_pages_left_heap += 1;
                } else {
                    self.iaa.stats.victim_pages_left_other += 1;
                }
            }
        }
        self.iaa.hinted = pages;
        if Some(info.epoch) != self.iaa.epoch {
            self.iaa.stats.hint_refreshes += 1;
            self.iaa.epoch = Some(info.epoch);
            self.iaa.used.clear();
            self.iaa.exhausted = false;
        }
    }

    /// Is `pid` among the hinted pages of the current epoch not yet given a record?
    fn iaa_is_hinted(&self, pid: PageId) -> bool {
        !self.iaa.used.contains(&pid) && self.iaa.hinted.contains(&pid)
    }

    /// Rule 1: a hinted page of `object` that takes `len` bytes now (checked on the page,
    /// invariant 1), in rotation; `None` if there is none.
    pub(crate) fn iaa_hinted_page(
        &mut self,
        object: ObjectId,
        len: usize,
    ) -> Result<Option<PageId>> {
        self.iaa_refresh();
        if self.iaa.exhausted && self.iaa.victims < self.iaa.max_victims {
            // Every hinted page had its record: commit one more victim (its pages are the next
            // ones GC needs empty) rather than fall back to placements that help no victim.
            self.iaa.victims += 1;
            self.iaa_refresh();
        }
        if self.iaa.hinted.is_empty() {
            self.iaa.exhausted = true;
        }
        if self.iaa.exhausted {
            return Ok(None);
        }
        // Rotation (IAA: "LPA0 -> LPA1 -> LPA2 ..."): the hinted pages in the victims' order,
        // each taking one record per round (`used`), so records spread over all of them.
        let n = self.iaa.hinted.len();
        let mut probes = 0;
        let mut scanned = 0;
        while scanned < n && probes < MAX_PROBES {
            let pid = self.iaa.hinted[scanned];
            scanned += 1;
            if self.iaa.used.contains(&pid) {
                continue;
            }
            // Only pages the free-space map knows as this table's, with room by its estimate.
            let est = self.iaa.fsm.get(&object).and_then(|m| m.get(&pid)).copied();
            match est {
                Some(r) if usize::from(r) >= len + 4 => {}
                _ => continue,
            }
            probes += 1;
            if self.iaa_make_room(object, pid, len)? {
                self.iaa.used.insert(pid);
                return Ok(Some(pid));
            }
        }
        if scanned >= n {
            self.iaa.exhausted = true;
        }
        Ok(None)
    }

    /// Does heap page `pid` of `object` take `len` bytes (with a new slot), after removing the
    /// ghosts of ended deleters if that is what it takes (invariant 2)? Updates the map.
    fn iaa_make_room(&mut self, object: ObjectId, pid: PageId, len: usize) -> Result<bool> {
        let f = self.fix(pid, Fix::Read)?;
        let p = self.pool.page(f);
        if page::page_type(p) != PageType::Heap || page::object(p) != object {
            self.pool.unfix(f);
            if let Some(m) = self.iaa.fsm.get_mut(&object) {
                m.remove(&pid);
            }
            return Ok(false);
        }
        if slotted::fits(p, len, true) {
            self.pool.unfix(f);
            return Ok(true);
        }
        let dead: Vec<u16> = (0..slotted::nslots(p))
            .filter(|&i| slotted::is_ghost(p, i))
            .map(|i| i as u16)
            .collect();
        self.pool.unfix(f);
        let ops: Vec<Op> = dead
            .into_iter()
            .filter(|&slot| {
                !self
                    .locks
                    .is_x_locked(crate::lock::Resource::Row(object, Rid { page: pid, slot }))
            })
            .map(|slot| Op::HeapRemove { pid, slot })
            .collect();
        if !ops.is_empty() {
            self.iaa.stats.ghosts_removed += ops.len() as u64;
            self.log_apply(0, Body::Redo(ops))?;
        }
        let f = self.fix(pid, Fix::Read)?;
        let p = self.pool.page(f);
        let (ok, r) = (slotted::fits(p, len, true), room(p));
        self.pool.unfix(f);
        self.iaa_note(object, pid, r);
        Ok(ok)
    }

    /// Rule 2: the next page of `object` after the last one used that takes `len` bytes.
    pub(crate) fn iaa_next_fit(&mut self, object: ObjectId, len: usize) -> Result<Option<PageId>> {
        let from = self.iaa.next_fit.get(&object).copied().unwrap_or(0);
        let candidates: Vec<PageId> = match self.iaa.fsm.get(&object) {
            None => return Ok(None),
            Some(m) => m
                .range(from..)
                .chain(m.range(..from))
                .filter(|(_, &r)| usize::from(r) >= len + 4)
                .map(|(&p, _)| p)
                .take(MAX_PROBES)
                .collect(),
        };
        for pid in candidates {
            if self.iaa_make_room(object, pid, len)? {
                self.iaa.next_fit.insert(object, pid);
                return Ok(Some(pid));
            }
        }
        Ok(None)
    }

    /// The heap's placement hook: where a record of `len` bytes of `object` goes, if IAA or
    /// reuse choose (rules 1 and 2); `None`: the tail (rule 3).
    pub(crate) fn iaa_place(&mut self, object: ObjectId, len: usize) -> Result<Option<PageId>> {
        if let Some(pid) = self.iaa.forced.take() {
            return Ok(Some(pid));
        }
        let f = self.iaa_flags(object);
        if f.iaa {
            if let Some(pid) = self.iaa_hinted_page(object, len)? {
                self.iaa.stats.hinted_inserts += 1;
                self.iaa.dirty_hinted.push(pid);
                return Ok(Some(pid));
            }
            self.iaa.stats.unhinted_inserts += 1;
        }
        if f.reuse {
            if let Some(pid) = self.iaa_next_fit(object, len)? {
                self.iaa.stats.reused_inserts += 1;
                return Ok(Some(pid));
            }
        }
        Ok(None)
    }

    /// Updates a row; with U2DI on for the table, as a delete plus an insert (the row moves,
    /// and its record id with it: the returned one). With IAA too, the row moves only into a
    /// hinted page with room, and stays when it already is in one (its page's write then
    /// invalidates the victim's copy anyway) or when there is none (a move would then only
    /// cost writes). Indexes follow the move (invariant 3).
    pub fn update_row(&mut self, txn: TxnId, table: ObjectId, rid: Rid, new: &[u8]) -> Result<Rid> {
        let f = self.iaa_flags(table);
        if !f.u2di {
            self.update_raw(txn, table, rid, new)?;
            return Ok(rid);
        }
        if f.iaa {
            self.iaa_refresh();
            let target = if self.iaa_is_hinted(rid.page) {
                None
            } else {
                self.iaa_hinted_page(table, new.len())?
            };
            match target {
                Some(pid) if pid != rid.page => {
                    // Locks and the old row first: a refused delete leaves no forced target.
                    self.delete(txn, table, rid)?;
                    self.iaa.forced = Some(pid);
                    let r = self.insert_raw(txn, table, new);
                    self.iaa.forced = None;
                    let r = r?;
                    self.iaa.stats.moved_updates += 1;
                    self.iaa.stats.hinted_inserts += 1;
                    self.iaa.dirty_hinted.push(pid);
                    return Ok(r);
                }
                _ => {
                    self.iaa.stats.in_place_updates += 1;
                    self.update_raw(txn, table, rid, new)?;
                    if self.iaa_is_hinted(rid.page) {
                        self.iaa.used.insert(rid.page);
                        self.iaa.dirty_hinted.push(rid.page);
                    }
                    return Ok(rid);
                }
            }
        }
        self.delete(txn, table, rid)?;
        let r = self.insert_raw(txn, table, new)?;
        self.iaa.stats.moved_updates += 1;
        Ok(r)
    }

    /// After a commit: writes back the hinted pages that took records, so that their copies in
    /// the committed victims are invalid before GC reaches them. The writes are issued at the
    /// engine's clock and not waited for (as the page cleaner's): the committing terminal does
    /// not wait, the device's dies do the work, and the measured window drains them.
    pub(crate) fn iaa_after_commit(&mut self) -> Result<()> {
        if self.iaa.dirty_hinted.is_empty() {
            return Ok(());
        }
        let pages = std::mem::take(&mut self.iaa.dirty_hinted);
        let now = self.now();
        for pid in pages {
            let r = self
                .pool
                .write_if_dirty(&mut *self.store, &mut self.log, now, pid);
            if self.note(r)?.is_some() {
                self.iaa.stats.hinted_writebacks += 1;
            }
        }
        self.settle_io_cpu();
        Ok(())
    }
}
