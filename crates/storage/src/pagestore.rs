//! The page-store seam: how the engine reaches storage.
//!
//! The engine reads and writes whole DB pages, appends and forces log blocks, and keeps a small
//! master record; every call carries the virtual time it is submitted at and returns the time it
//! completes. Engine logic stays above this line: a page store knows pages, log blocks and hints,
//! never records, transactions or B-trees.
//!
//! Room left for later page stores (issue 5 and the IPA/IAA seeds):
//! - NoFTL: `page_allocated` / `page_freed` tell the store which DB pages are live and which
//!   object (and page kind) each belongs to; every write carries a [`WriteHint`]. A native store
//!   maps DB pages to flash pages itself and needs no TRIM.
//! - In-Place Appends: `delta_area_bytes` says how many bytes at the end of a page the store
//!   reserves for delta records, and `write_delta` writes only changed bytes there. The block
//!   store reserves nothing and refuses `write_delta`.
//! - Insert Address Assist: `insert_hint` lets the heap ask where a new record should go.
//!
//! Invariants (every implementation):
//! 1. A DB page reads back as the last `write_page` of it that was followed by a completed
//!    `sync`, or as a later write; a page never written reads as zeros.
//! 2. A log block reads back as the last `write_log` of it once a later `force_log` completed.
//! 3. `write_meta` is durable when it returns (the master record has no separate sync).
//! 4. Writes of at most `atomic_write_bytes()` are atomic under power loss; larger DB pages may
//!    tear, and the engine guards them itself (page checksums, full-page images).
//! 5. Completion times are never earlier than submit times.
//! 6. `BlockPageStore` turns every durability point into the block contract's (ftl
//!    block_device.rs item 4): `sync_pages` and `force_log` FLUSH, `write_meta` writes with FUA
//!    and then FLUSHes. So 1-3 hold on a device with a volatile write cache (the crash disk) as
//!    on the FTLs, whose writes are on flash when they return and whose FLUSH only orders (or,
//!    DFTL, writes back cached mappings, which recovery does not need).

use ftl::{BlockDevice, FtlReport, LOGICAL_PAGE_BYTES};
use nand::{Nand, Nanos};

use crate::error::{Error, Result};
use crate::{ObjectId, PageId};

/// Size of a log block and of a master-record slot.
pub const LOG_BLOCK_BYTES: usize = 4096;

/// What a page holds, for placement decisions below the seam.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum PageKind {
    SpaceMap,
    Heap,
    BTreeLeaf,
    BTreeInner,
    Catalog,
}

/// Attached to every page write: who owns the page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteHint {
    pub object: ObjectId,
    pub kind: PageKind,
}

/// What the store's GC information channel answered ([`PageStore::gc_victims`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VictimInfo {
    /// Changes exactly when the committed victims change (ftl iaa.rs contract 2).
    pub epoch: u64,
    pub flash_page_bytes: usize,
}

/// The DB pages behind flash keys `keys`, where DB page `pid` owns keys
/// `key0 + pid * per_page .. key0 + (pid + 1) * per_page`: deduplicated, in the keys' order.
pub fn keys_to_pages(keys: &[u64], key0: u64, per_page: u64, db_pages: u64, out: &mut Vec<PageId>) {
    let mut seen = std::collections::HashSet::with_capacity(keys.len());
    for &k in keys {
        if k < key0 {
            continue;
        }
        let pid = (k - key0) / per_page.max(1);
        if pid < db_pages && seen.insert(pid) {
            out.push(pid as PageId);
        }
    }
}

/// The seam. See the module doc for the contract.
pub trait PageStore: Send {
    fn name(&self) -> String;
    /// DB page size in bytes (4, 8 or 16 KiB).
    fn page_bytes(&self) -> usize;
    /// Number of DB pages.
    fn db_pages(&self) -> u64;
    /// Number of log blocks of `LOG_BLOCK_BYTES`.
    fn log_blocks(&self) -> u64;
    /// Largest write that cannot tear under power loss.
    fn atomic_write_bytes(&self) -> usize;

    fn read_page(&mut self, at_ns: Nanos, pid: PageId, buf: &mut [u8]) -> Result<Nanos>;
    fn write_page(
        &mut self,
        at_ns: Nanos,
        pid: PageId,
        data: &[u8],
        hint: WriteHint,
    ) -> Result<Nanos>;
    /// Makes every page written so far durable.
    fn sync_pages(&mut self, at_ns: Nanos) -> Result<Nanos>;

    /// In-Place Appends (ipa.rs): the scheme of `object`'s pages, `None` for pages without a
    /// delta area. A store answers `Some` only where it can append (partial programs on SLC or
    /// pSLC blocks).
    fn ipa_scheme(&self, _object: ObjectId) -> Option<crate::ipa::IpaScheme> {
        None
    }
    /// In-Place Appends: programs `bytes` at byte `offset` of DB page `pid` as it is on flash,
    /// in place (a partial program of erased bytes of its delta area). `Ok(None)`: the page
    /// cannot take an append now (its last write still waits in host memory, or its flash page
    /// has had all the programs its chip allows); the caller writes the page out of place.
    fn write_delta(
        &mut self,
        _at_ns: Nanos,
        pid: PageId,
        _offset: usize,
        _bytes: &[u8],
    ) -> Result<Option<Nanos>> {
        Err(Error::Unsupported(format!(
            "{}: write_delta of page {pid} (no In-Place Appends on this store)",
            self.name()
        )))
    }

    fn read_log(&mut self, at_ns: Nanos, block: u64, buf: &mut [u8]) -> Result<Nanos>;
    /// Writes consecutive log blocks starting at `block` (`data` is a multiple of the block size).
    fn write_log(&mut self, at_ns: Nanos, block: u64, data: &[u8]) -> Result<Nanos>;
    /// Makes every log block written so far durable.
    fn force_log(&mut self, at_ns: Nanos) -> Result<Nanos>;
    /// NoFTL: log blocks `block..block + n` are dead (the log's tail passed them; log.rs
    /// invariant 6). A block store cannot tell its device without a TRIM, and a conventional
    /// engine issues none for its log, so the default does nothing.
    fn log_released(&mut self, at_ns: Nanos, _block: u64, _n: u64) -> Result<Nanos> {
        Ok(at_ns)
    }
    /// The concrete store, for inspection by tests and tools (`downcast_ref`).
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }

    /// Master-record slot 0 or 1 (`LOG_BLOCK_BYTES` each).
    fn read_meta(&mut self, at_ns: Nanos, slot: usize, buf: &mut [u8]) -> Result<Nanos>;
    fn write_meta(&mut self, at_ns: Nanos, slot: usize, data: &[u8]) -> Result<Nanos>;

    /// NoFTL: the engine allocated `pid` to `object`.
    fn page_allocated(&mut self, _pid: PageId, _hint: WriteHint) {}
    /// NoFTL: the engine freed `pid`; its content is dead.
    fn page_freed(&mut self, at_ns: Nanos, _pid: PageId) -> Result<Nanos> {
        Ok(at_ns)
    }
    /// Insert Address Assist: of the `candidates` with room, which page should take a new record
    /// of `object`? `None`: the heap's own choice.
    fn insert_hint(&mut self, _object: ObjectId, _candidates: &[PageId]) -> Option<PageId> {
        None
    }

    /// Insert Address Assist (iaa.rs, docs/iaa.md): the GC information channel of the flash
    /// below, if it has one. Commits to the next `victims` GC victims and answers the epoch and
    /// the flash page size; when the epoch differs from `known_epoch`, replaces `out` with the
    /// DB pages still valid in the committed victims. `None`: no channel (a plain device).
    fn gc_victims(
        &mut self,
        _victims: u32,
        _known_epoch: u64,
        _out: &mut Vec<PageId>,
    ) -> Option<VictimInfo> {
        None
    }

    /// NoFTL regions (region.rs): creates a region of the device's chips. Stores without
    /// regions refuse, before changing anything.
    fn create_region(
        &mut self,
        _at_ns: Nanos,
        name: &str,
        _options: &[(String, String)],
    ) -> Result<Nanos> {
        Err(Error::Unsupported(format!(
            "{}: CREATE REGION {name} needs the native page store (NoFTL)",
            self.name()
        )))
    }
    /// NoFTL regions: places `object`'s pages in `region` from now on.
    fn bind_object_region(&mut self, _object: ObjectId, region: &str) -> Result<()> {
        Err(Error::NotFound {
            kind: "region",
            name: region.into(),
        })
    }

    /// Statistics of the device below, if any.
    fn device_report(&self) -> Option<FtlReport> {
        None
    }
    fn nand(&self) -> Option<&Nand> {
        None
    }
    fn nand_mut(&mut self) -> Option<&mut Nand> {
        None
    }
    /// Gives the flash back (to cut power and recover from it), if the store has one.
    fn into_nand(self: Box<Self>) -> Option<Nand> {
        None
    }
    /// NoFTL: after a restart, the engine says which DB pages its space maps hold allocated, so
    /// that a store which could not make every free durable drops the pages freed since.
    fn retain_allocated(
        &mut self,
        at_ns: Nanos,
        _allocated: &dyn Fn(PageId) -> bool,
    ) -> Result<Nanos> {
        Ok(at_ns)
    }
}

/// Checks up front that the engine can run on the FTL `kind` of `ftl::build`. The engine
/// rewrites DB pages, log blocks (the log is circular) and the master record in place; AMF's
/// block interface refuses any write below a segment's write pointer (ftl amf.rs invariant 3),
/// so a run would fail at the first rewrite, deep inside it.
pub fn engine_runs_on(kind: &str) -> Result<()> {
    if kind == "amf" {
        return Err(Error::Config(
            "the storage engine cannot run on 'amf': it rewrites pages, log blocks and the master record in place, and AMF's segments are append-only (a log-structured host is needed, see issue 5); use page, dftl, fast or block".into(),
        ));
    }
    Ok(())
}

/// Where things live on a block device, in logical (4 KiB) pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockLayout {
    /// Logical pages 0 and 1: master-record slots.
    pub meta_lpn: u64,
    pub log_lpn: u64,
    pub log_blocks: u64,
    pub db_lpn: u64,
    pub db_pages: u64,
    pub lpns_per_page: u64,
}

impl BlockLayout {
    /// Lays out a device of `capacity_lpns` logical pages: two meta pages, then the log
    /// (`log_fraction` of the device, at least 64 blocks), then DB pages of `page_bytes`.
    pub fn new(capacity_lpns: u64, page_bytes: usize, log_blocks: u64) -> Result<Self> {
        if ![4096, 8192, 16384].contains(&page_bytes) {
            return Err(Error::Config(format!(
                "page size {page_bytes} is not 4, 8 or 16 KiB"
            )));
        }
        let lpns_per_page = (page_bytes / LOGICAL_PAGE_BYTES) as u64;
        let log_lpn = 2;
        let db_lpn = log_lpn + log_blocks;
        if capacity_lpns < db_lpn + 16 * lpns_per_page || log_blocks < 16 {
            return Err(Error::Config(format!(
                "a device of {capacity_lpns} pages is too small for a {log_blocks}-block log and a database"
            )));
        }
        let db_pages = ((capacity_lpns - db_lpn) / lpns_per_page).min(u64::from(u32::MAX));
        Ok(BlockLayout {
            meta_lpn: 0,
            log_lpn,
            log_blocks,
            db_lpn,
            db_pages,
            lpns_per_page,
        })
    }
}

/// The first page store: DB pages, log and master record on any block device.
pub struct BlockPageStore {
    dev: Box<dyn BlockDevice>,
    layout: BlockLayout,
    page_bytes: usize,
}

impl std::fmt::Debug for BlockPageStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockPageStore")
            .field("dev", &self.dev.name())
            .field("layout", &self.layout)
            .finish()
    }
}

impl BlockPageStore {
    /// `log_blocks`: size of the log area; `None` picks 1/8 of the device, at most 64 MiB.
    pub fn new(
        dev: Box<dyn BlockDevice>,
        page_bytes: usize,
        log_blocks: Option<u64>,
    ) -> Result<Self> {
        let cap = dev.capacity_pages();
        let log_blocks = log_blocks.unwrap_or_else(|| (cap / 8).clamp(16, 16384));
        let layout = BlockLayout::new(cap, page_bytes, log_blocks)?;
        Ok(BlockPageStore {
            dev,
            layout,
            page_bytes,
        })
    }
    pub fn layout(&self) -> BlockLayout {
        self.layout
    }
    pub fn device(&self) -> &dyn BlockDevice {
        &*self.dev
    }
    pub fn device_mut(&mut self) -> &mut dyn BlockDevice {
        &mut *self.dev
    }
    /// Gives the device back (to cut power, reopen, inspect).
    pub fn into_device(self) -> Box<dyn BlockDevice> {
        self.dev
    }
    fn check_pid(&self, pid: PageId) -> Result<u64> {
        if u64::from(pid) >= self.layout.db_pages {
            return Err(Error::Io(format!(
                "page {pid} is beyond the {} DB pages",
                self.layout.db_pages
            )));
        }
        Ok(self.layout.db_lpn + u64::from(pid) * self.layout.lpns_per_page)
    }
    fn check_log(&self, block: u64, bytes: usize) -> Result<u64> {
        let n = (bytes / LOG_BLOCK_BYTES) as u64;
        if !bytes.is_multiple_of(LOG_BLOCK_BYTES) || block + n > self.layout.log_blocks {
            return Err(Error::Io(format!(
                "log blocks {block}..{} are beyond the {}-block log",
                block + n,
                self.layout.log_blocks
            )));
        }
        Ok(self.layout.log_lpn + block)
    }
}

impl PageStore for BlockPageStore {
    fn name(&self) -> String {
        format!("block({})", self.dev.name())
    }
    fn page_bytes(&self) -> usize {
        self.page_bytes
    }
    fn db_pages(&self) -> u64 {
        self.layout.db_pages
    }
    fn log_blocks(&self) -> u64 {
        self.layout.log_blocks
    }
    fn atomic_write_bytes(&self) -> usize {
        LOGICAL_PAGE_BYTES
    }
    fn read_page(&mut self, at_ns: Nanos, pid: PageId, buf: &mut [u8]) -> Result<Nanos> {
        debug_assert_eq!(buf.len(), self.page_bytes);
        let lpn = self.check_pid(pid)?;
        Ok(self.dev.read(at_ns, lpn, buf)?)
    }
    fn write_page(
        &mut self,
        at_ns: Nanos,
        pid: PageId,
        data: &[u8],
        _hint: WriteHint,
    ) -> Result<Nanos> {
        debug_assert_eq!(data.len(), self.page_bytes);
        let lpn = self.check_pid(pid)?;
        Ok(self.dev.write(at_ns, lpn, data, false)?)
    }
    fn sync_pages(&mut self, at_ns: Nanos) -> Result<Nanos> {
        Ok(self.dev.flush(at_ns)?)
    }
    fn read_log(&mut self, at_ns: Nanos, block: u64, buf: &mut [u8]) -> Result<Nanos> {
        let lpn = self.check_log(block, buf.len())?;
        Ok(self.dev.read(at_ns, lpn, buf)?)
    }
    fn write_log(&mut self, at_ns: Nanos, block: u64, data: &[u8]) -> Result<Nanos> {
        let lpn = self.check_log(block, data.len())?;
        Ok(self.dev.write(at_ns, lpn, data, false)?)
    }
    fn force_log(&mut self, at_ns: Nanos) -> Result<Nanos> {
        Ok(self.dev.flush(at_ns)?)
    }
    fn read_meta(&mut self, at_ns: Nanos, slot: usize, buf: &mut [u8]) -> Result<Nanos> {
        assert!(
            slot < 2 && buf.len() == LOG_BLOCK_BYTES,
            "meta slot 0 or 1, one block"
        );
        Ok(self
            .dev
            .read(at_ns, self.layout.meta_lpn + slot as u64, buf)?)
    }
    fn write_meta(&mut self, at_ns: Nanos, slot: usize, data: &[u8]) -> Result<Nanos> {
        assert!(
            slot < 2 && data.len() == LOG_BLOCK_BYTES,
            "meta slot 0 or 1, one block"
        );
        let t = self
            .dev
            .write(at_ns, self.layout.meta_lpn + slot as u64, data, true)?;
        Ok(self.dev.flush(t)?)
    }
    fn page_freed(&mut self, at_ns: Nanos, pid: PageId) -> Result<Nanos> {
        // A block device learns of dead pages only through TRIM.
        let lpn = self.check_pid(pid)?;
        Ok(self.dev.trim(at_ns, lpn, self.layout.lpns_per_page)?)
    }
    fn gc_victims(
        &mut self,
        victims: u32,
        known_epoch: u64,
        out: &mut Vec<PageId>,
    ) -> Option<VictimInfo> {
        let lay = self.layout;
        let g = self.dev.gc_informed()?;
        let info = VictimInfo {
            epoch: g.commit_victims(victims),
            flash_page_bytes: g.flash_page_bytes(),
        };
        if info.epoch != known_epoch {
            let mut lpns = Vec::new();
            g.victim_lpns(&mut lpns);
            out.clear();
            keys_to_pages(&lpns, lay.db_lpn, lay.lpns_per_page, lay.db_pages, out);
        }
        Some(info)
    }
    fn device_report(&self) -> Option<FtlReport> {
        Some(self.dev.report())
    }
    fn nand(&self) -> Option<&Nand> {
        self.dev.nand()
    }
    fn nand_mut(&mut self) -> Option<&mut Nand> {
        self.dev.nand_mut()
    }
    fn into_nand(self: Box<Self>) -> Option<Nand> {
        self.dev.into_nand()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crashdisk::{CrashDisk, SharedCrashDisk};

    /// On a device whose writes are durable only after FLUSH or FUA (the crash disk's volatile
    /// cache), what the seam promises durable survives every power cut: synced pages
    /// (invariant 1), forced log blocks (2), the master record as soon as it is written (3).
    #[test]
    fn synced_pages_forced_log_and_the_master_survive_a_cut_on_a_device_with_a_write_cache() {
        let hint = WriteHint {
            object: 1,
            kind: PageKind::Heap,
        };
        for seed in 0..16 {
            let disk = SharedCrashDisk::new(CrashDisk::new(256));
            let mut s = BlockPageStore::new(Box::new(disk.clone()), 4096, Some(32)).unwrap();
            let (page, log, meta) = (vec![1u8; 4096], vec![2u8; 8192], vec![3u8; 4096]);
            s.write_page(0, 5, &page, hint).unwrap();
            s.sync_pages(0).unwrap();
            s.write_log(0, 7, &log).unwrap();
            s.force_log(0).unwrap();
            s.write_meta(0, 1, &meta).unwrap();
            // Unsynced: may or may not survive.
            s.write_page(0, 6, &page, hint).unwrap();
            disk.cut_power();
            let mut s =
                BlockPageStore::new(Box::new(disk.after_power_loss(seed)), 4096, Some(32)).unwrap();
            let mut b = vec![0u8; 4096];
            s.read_page(0, 5, &mut b).unwrap();
            assert_eq!(b, page, "seed {seed}: a synced page was lost");
            let mut l = vec![0u8; 8192];
            s.read_log(0, 7, &mut l).unwrap();
            assert_eq!(l, log, "seed {seed}: a forced log block was lost");
            s.read_meta(0, 1, &mut b).unwrap();
            assert_eq!(b, meta, "seed {seed}: the master record was lost");
        }
    }

    #[test]
    fn the_engine_is_refused_on_amf_only() {
        assert!(engine_runs_on("amf").is_err());
        for k in ["page", "dftl", "fast", "block", "memdisk", "file"] {
            assert!(engine_runs_on(k).is_ok(), "{k}");
        }
    }
}
