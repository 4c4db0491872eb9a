//! `storage`: a transactional storage engine in the style of Shore-MT, on a page-store seam.
//!
//! Layers, bottom up (each module's doc block lists its invariants). A module imports only
//! modules on earlier lines (or earlier on its own line); `scripts/layers.py --crate storage`
//! checks that the imports have no circle.
//! - This file's types (`PageId`, `Lsn`, `TxnId`, `ObjectId`, `Rid`, `Nanos`) and [`error`].
//! - Page formats, byte code without I/O: [`page`] (the header: id, LSN, type, checksum),
//!   [`slotted`] (slotted pages), [`ipa`] (In-Place Appends: the delta area, its appends, diffs
//!   and reads), [`btree_node`] (B+-tree nodes: entries, search, redo ops, the node check).
//! - [`cpu`]: host CPU in virtual time: the cost per kind of work and its counters.
//! - [`tuple`], [`keyenc`]: typed rows with a schema; order-preserving index keys;
//!   [`catalog`]: the persistent catalog's entries.
//! - [`pagestore`]: the seam to storage. Reads and writes DB pages, appends and forces the log,
//!   keeps two master-record slots, answers the GC information channel (`VictimInfo`); every
//!   call takes a virtual submit time and returns its completion time. `BlockPageStore` places
//!   everything on any `ftl::BlockDevice`; [`region`] (NoFTL regions) and [`native`]
//!   (`NativeStore`, NoFTL) map DB pages, the log and the master record to flash pages
//!   themselves, on a raw `nand::Nand`; [`splitlog`]: DB pages on one store, the log on
//!   another (Shore-MT's log directory off the flash volume); [`measure`]: the measured
//!   window's self-check.
//! - [`ddl`]: the DDL parser (region options are checked by [`region`]).
//! - [`log`]: log records, the circular log on the page store, the log reader.
//! - [`buffer`]: frames, CLOCK eviction, pinning, the WAL rule, write-back, counters.
//! - [`access`]: the narrow interface the access methods work through (fix pages, log and
//!   apply changes, allocate pages), which the engine implements.
//! - [`heap`], [`btree`]: heap files of slotted pages; B+-trees; [`bulk`]: bulk loads (dense
//!   heap pages, trees built bottom-up); [`scan`]: sequential scans with read-ahead.
//! - [`iaa`]: Insert Address Assist and U2DI: their switches, counters and state.
//! - [`lock`]: strict two-phase locking with intention locks and deadlock detection.
//! - [`engine`]: transactions, logging of every page change, rollback, checkpoints, ARIES
//!   restart, DDL and the record API; its folder also holds its sides of the access methods
//!   (placement hooks, catalog lookups) and of IAA.
//! - [`sched`]: the virtual-time scheduler that runs terminals deterministically.
//! - [`shared`]: a device with several handles (the engine's and a crash test's);
//!   [`crashdisk`], [`filedev`]: block devices for crash testing and for plain files.
//!
//! See `docs/storage.md` for the formats as byte tables and the design.

pub mod access;
pub mod btree;
pub mod btree_node;
pub mod buffer;
pub mod bulk;
pub mod catalog;
pub mod cpu;
pub mod crashdisk;
pub mod ddl;
pub mod engine;
pub mod error;
pub mod filedev;
pub mod fxhash;
pub mod heap;
pub mod iaa;
pub mod ipa;
pub mod keyenc;
pub mod lock;
pub mod log;
pub mod measure;
pub mod native;
pub mod page;
pub mod pagestore;
pub mod region;
pub mod scan;
pub mod sched;
pub mod shared;
pub mod slotted;
pub mod splitlog;
pub mod tuple;

pub use buffer::PageOp;
pub use engine::{Engine, EngineConfig, ReplayPages, Replayed};
pub use error::{Error, Result};
pub use native::{NativeConfig, NativeStore};
pub use pagestore::{BlockPageStore, PageStore};

/// Virtual nanoseconds (the emulator's time unit).
pub type Nanos = nand::Nanos;
/// A DB page number in the page store's DB area. Page 0 is the first space-map page, so 0 also
/// serves as "no page" in page links.
pub type PageId = u32;
/// Log sequence number: the stream position of a log record's first byte. 0 means "none".
pub type Lsn = u64;
/// A transaction id (log records, locks, the engine's transaction table); 0 means "no
/// transaction" (redo-only records).
pub type TxnId = u64;
/// Identifier of a catalog object (tablespace, table, index).
pub type ObjectId = u32;

/// A record id: page and slot of a heap record. Stable for the record's life.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Rid {
    pub page: PageId,
    pub slot: u16,
}

impl Rid {
    pub const BYTES: usize = 6;
    pub fn encode(self) -> [u8; 6] {
        let mut b = [0u8; 6];
        b[..4].copy_from_slice(&self.page.to_be_bytes());
        b[4..].copy_from_slice(&self.slot.to_be_bytes());
        b
    }
    pub fn decode(b: &[u8]) -> Option<Rid> {
        if b.len() < 6 {
            return None;
        }
        Some(Rid {
            page: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            slot: u16::from_be_bytes([b[4], b[5]]),
        })
    }
}
