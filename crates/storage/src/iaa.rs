//! Insert Address Assist (IAA) and Update-to-Delete+Insert (U2DI): the engine's side of the
//! co-design of Miyaji, Sun and Takeuchi ("IAA" below; protocol and invariants in docs/iaa.md).
//!
//! The flash below (a device FTL through `ftl::GcInformed`, or the native store's own
//! `FlashSpace`) commits to its next GC victims and tells the engine which DB pages are still
//! valid in them ([`PageStore::gc_victims`]). With IAA on for a table, a heap insert goes to one
//! of those *hinted* pages that has room, rotating over them so that each gets one record per
//! round (IAA: "the target LPA is changed (LPA0 -> LPA1 -> LPA2 ...)"); the page is written back
//! when the inserting transaction commits, which invalidates its copy in the victim, so that GC
//! finds the victim empty. With U2DI on, an update becomes a delete plus an insert, so the row
//! moves into a hinted page (with IAA) and its old page is freed of it; the indexes follow the
//! move as ordinary logged B+-tree deletes and inserts of the same transaction.
//!
//! Placement rule (per table, switches from its tablespace's options `IAA`, `U2DI`, `REUSE`):
//! 1. IAA on: the next hinted page of the table, in rotation, whose free space (free-space map,
//!    checked on the page) takes the record; otherwise rule 2.
//! 2. `REUSE` on (implied by IAA and U2DI): the next page of the table with room after the
//!    last one used (next fit: a circular append point over the table's holes, the "appended to
//!    the last row" of IAA's conventional engine in a table whose size is kept constant).
//! 3. Otherwise the heap's tail (heap.rs), a new page when it is full.
//!
//! The free-space map is volatile: per table, the bytes a record may use on each heap page the
//! engine touched this session (free space plus ghosts of ended deleters). It is a hint only:
//! every choice is checked on the page itself before the record goes in, so a stale entry costs
//! a page fix, never a wrong placement. After a restart it refills as pages are touched.
//!
//! Invariants:
//! 1. A record placed by rule 1 or 2 fits in its page when placed (checked under the fix).
//! 2. A ghost is removed only when no transaction holds an X lock on its row (its deleter has
//!    ended, and a rolled-back delete would have unghosted it), by a redo-only record.
//! 3. U2DI leaves every index of the table mapping the row's keys to its new record id, within
//!    the updating transaction (rollback restores the old record id everywhere).
//! 4. IAA never changes which pages belong to the table: hinted pages of other objects, index
//!    pages, log and catalog pages are skipped.
//!
//! This module holds the switches, counters and state; the engine's code that runs the rules
//! (it needs the catalog, the lock table and the row API) is engine/iaa.rs.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::slotted;
use crate::{ObjectId, PageId};

// The GC information channel's answer is part of the page-store seam, below this module; the
// old paths `iaa::VictimInfo` and `iaa::keys_to_pages` stay valid.
pub use crate::pagestore::{keys_to_pages, VictimInfo};

/// The switches of a table (from its tablespace's options).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableIaa {
    pub iaa: bool,
    pub u2di: bool,
    /// Free-space reuse by next fit (rule 2); implied by the other two.
    pub reuse: bool,
}

/// Checks a tablespace option of this module: `on` or `off`.
pub fn check_option(key: &str, value: &str) -> std::result::Result<(), String> {
    match key {
        "IAA" | "U2DI" | "REUSE" => match value.to_ascii_lowercase().as_str() {
            "on" | "off" => Ok(()),
            _ => Err(format!("{key} is on or off, not '{value}'")),
        },
        _ => Ok(()),
    }
}

/// Counters of IAA and U2DI.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IaaStats {
    /// Inserts placed in a hinted page (rule 1).
    pub hinted_inserts: u64,
    /// Inserts of IAA tables that found no hinted page with room.
    pub unhinted_inserts: u64,
    /// Inserts placed by next fit (rule 2).
    pub reused_inserts: u64,
    /// Updates done as delete + insert (U2DI).
    pub moved_updates: u64,
    /// Updates of U2DI tables done in place (no hinted page with room, or already in one).
    pub in_place_updates: u64,
    /// Times the hinted pages were fetched from the store.
    pub hint_refreshes: u64,
    /// Hinted pages written back at commit.
    pub hinted_writebacks: u64,
    /// Ghosts removed to make room (invariant 2).
    pub ghosts_removed: u64,
    /// When the committed victims changed: DB pages still valid in the last list that were
    /// heap pages of IAA tables without a record placed (no room), and other DB pages
    /// (indexes, space maps, catalog, other tables), which heap inserts cannot empty.
    pub victim_pages_left_heap: u64,
    pub victim_pages_left_other: u64,
}

/// Most hinted pages examined for one record: bounds the cost of a placement when many hinted
/// pages are full (each examination may fix a page).
pub(crate) const MAX_PROBES: usize = 16;
/// At most this many victims are committed ahead when the hinted pages run out.
pub const MAX_COMMITTED_VICTIMS: u32 = 8;

/// The engine's IAA state (volatile).
#[derive(Debug)]
pub(crate) struct IaaState {
    pub(crate) victims: u32,
    pub(crate) max_victims: u32,
    pub(crate) epoch: Option<u64>,
    pub(crate) hinted: Vec<PageId>,
    pub(crate) used: HashSet<PageId>,
    /// The hinted pages of this epoch are all used or full: wait for the next epoch.
    pub(crate) exhausted: bool,
    /// Per table: heap page -> bytes a record may use there (free space + ghosts).
    pub(crate) fsm: HashMap<ObjectId, BTreeMap<PageId, u16>>,
    pub(crate) next_fit: HashMap<ObjectId, PageId>,
    /// Hinted pages that took a record since the last commit (written back at commit).
    pub(crate) dirty_hinted: Vec<PageId>,
    pub(crate) tables: HashMap<ObjectId, TableIaa>,
    /// U2DI's chosen page for the insert half of a move.
    pub(crate) forced: Option<PageId>,
    pub(crate) stats: IaaStats,
}

impl Default for IaaState {
    fn default() -> Self {
        IaaState {
            victims: ftl::iaa::DEFAULT_COMMITTED_VICTIMS,
            max_victims: MAX_COMMITTED_VICTIMS,
            epoch: None,
            hinted: Vec::new(),
            used: HashSet::new(),
            exhausted: false,
            fsm: HashMap::new(),
            next_fit: HashMap::new(),
            dirty_hinted: Vec::new(),
            tables: HashMap::new(),
            forced: None,
            stats: IaaStats::default(),
        }
    }
}

/// Bytes a record may use on heap page `p`: free space plus the ghosts' bytes (ghosts of ended
/// deleters can be removed; `purge_ghosts` finds out).
pub(crate) fn room(p: &[u8]) -> usize {
    let ghosts: usize = (0..slotted::nslots(p))
        .filter(|&i| slotted::is_ghost(p, i))
        .map(|i| slotted::slot(p, i).1)
        .sum();
    slotted::free_space(p) + ghosts
}
