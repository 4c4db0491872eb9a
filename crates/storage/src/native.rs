//! `native`: the NoFTL page store. The engine maps its own pages to flash pages on a raw
//! [`Nand`], through the shared flash management of crate `ftl` ([`FlashSpace`] for allocation,
//! GC and wear levelling; `oob.rs` for the per-page record; `journal.rs` for the recovery scan
//! and the map checkpoints). No FTL, no block interface, no TRIM.
//!
//! Keys (the `u64` every 4 KiB unit names in its OOB record): 0 and 1 the master-record slots,
//! then one per log block, then `k` per DB page (`k` = DB page bytes / 4 KiB; key
//! `db_key0 + pid * k + i` is unit `i` of DB page `pid`). One forward map, key -> unit location
//! (flash page x units per page + slot; the flash page itself on 4 KiB pages), 4 bytes per key,
//! in host memory.
//!
//! Flash pages of several units (8 and 16 KiB pages; ftl `space.rs`, "Units"): a flash page is
//! programmed whole and once, so the store gathers units in host memory per region and stream
//! (`gathers`) and programs a stream's page when it is full, or partly filled at a durability
//! point: `force_log` programs the log's gather, `sync_pages` every gather. A unit that waits in
//! a gather is the engine's own memory, as a dirty buffer frame is: lost at a power cut unless a
//! durability point came first, which is exactly the page-store contract (pagestore.rs
//! invariants 1 and 2). Reads of a gathered unit are served from the gather; a rewrite replaces
//! it there without a program; a free drops it. Master records and the region table, durable
//! when their write returns, are programmed at once, one unit in a page. A DB page whose size
//! divides the flash page is never split between two programs, so it is atomic under power loss
//! (a cut program reads as torn as a whole) and the engine logs no full-page images for it.
//!
//! Streams (what the engine knows, used to keep data of one temperature together so that GC
//! finds blocks that are mostly invalid):
//! - `LOG`: log blocks, written once per lap of the circular log: whole blocks go invalid in
//!   order, so GC of the log costs (almost) no copies.
//! - `HOT`: DB pages rewritten within the last `hot_window` page writes (TPC-B's branch and
//!   teller pages, B-tree roots).
//! - `INDEX`: other B-tree and space-map pages; `DATA`: other heap pages.
//! - `COLD`: a DB page's first write in this session (the load; pages not rewritten since).
//! - `HOT_INDEX`, `COLD_INDEX` (only with `NativeConfig::index_streams`): B-tree and space-map
//!   pages that would go to `HOT` or `COLD`, so that no block mixes heap and index pages.
//!   Insert Address Assist then commits victims among heap-only blocks (`HOT`, `DATA`,
//!   `COLD`): a heap insert can empty a heap page, never an index page (docs/iaa.md). A store
//!   written with them and opened without puts their blocks back in `HOT` and `COLD`.
//! - `META`: master-record slots and the region table (unstriped); `JOURNAL`: map checkpoints
//!   (unstriped, programmed as `Purpose::Mapping`, so that flash statistics and the crash
//!   test's report tell them from the master records, `Purpose::Meta`).
//!
//! The stream of a page is in bits 0..8 of its OOB record's `aux` field (bits 8.. are its
//! block's incarnation, stamped by the space), so recovery restores the blocks to their streams.
//!
//! Writes are issued at the caller's time on the next die of their stream (the space stripes
//! consecutive pages over dies and channels), so a flusher batch runs on all dies at once.
//! On SLC a write is durable when its program completes: `sync_pages` and `force_log` have
//! nothing to wait for. On MLC/TLC a page on a lower page of a word line is durable only once
//! the word line is complete: `force_log`, `sync_pages` and `write_meta` complete the open word
//! lines with pad pages first (ftl space invariant 9).
//!
//! Freed pages (`page_freed`, called once the freeing log record is durable) are invalid at
//! once: no TRIM, no trim record. Their old copies may survive on flash until GC erases them;
//! a *map checkpoint* (`journal.rs` format: every key's flash page, every block's incarnation
//! and write pointer) makes the frees durable for recovery and bounds it: recovery reads the
//! checkpoint and what was written after it. One is written at a `sync_pages` once
//! `UPDATES_PER_CHECKPOINT_PAGE` flash programs (host writes and GC copies) and frees per
//! checkpoint page happened since the last, so it adds at most 1/32 to the programs whatever the
//! device size, and bounds what recovery reads past it. A page freed after the last
//! checkpoint may come back mapped after a power cut; the engine's space map (recovered from the
//! WAL) says it is free, the engine formats pages it allocates without reading them, and
//! `retain_allocated` (called by the engine after restart) invalidates such pages again.
//!
//! Host CPU costs (this mapping runs on the database server, not on a device controller): the
//! same instruction counts as the page FTL's (`ftl::options`), on the NoFTL paper's server CPU, an
//! Intel Xeon E5630 at 2.53 GHz. The maps (4 bytes per key forward, 8 per flash page reverse:
//! 3 MiB for the NoFTL paper's 1 GiB device) fit its 12 MiB L3 cache, so a random map access is an L3
//! hit, ~40 cycles on that Westmere core (Intel 64 and IA-32 Architectures Optimization
//! Reference Manual, Nehalem/Westmere cache latencies), not a 100 ns DRAM access:
//!
//! | operation           | cycles | accounting                             | ns at 2.53 GHz |
//! |---------------------|--------|----------------------------------------|----------------|
//! | lookup (read)       | 60     | 20 instructions + 1 L3 access          | 24             |
//! | update (write/free) | 200    | 40 instructions + 4 L3 accesses        | 79             |
//! | GC / WL page move   | 100    | 20 instructions + 2 L3 accesses        | 40             |
//! | victim selection    | 90     | 50 instructions + 1 L3 access          | 36             |
//!
//! Instructions are counted at one per cycle (conservative for an out-of-order core). The cost
//! is added to the caller's clock before its flash operations are issued (GC work after), so it
//! is part of the engine's CPU time in virtual time, and summed in `host_mapping_ns`.
//!
//! Invariants:
//! 1. `map[key] == p` (p != UNMAPPED) iff the space's reverse map says flash page p holds the
//!    valid copy of `key`; moves reported by the space are applied before the map is read again.
//! 2. A key is unmapped iff never written in this store's life or freed since its last write
//!    (a DB page by `page_freed`, a log block by `log_released`); after a power cut also a key
//!    freed before the newest complete map checkpoint, while a released log block may come back
//!    mapped (stale to the log reader, released again at restart: log.rs invariant 6).
//! 3. Every flash page written carries (key, sequence number, stream, block incarnation) in its
//!    OOB; sequence numbers grow with every write, GC copies keep theirs, so recovery (journal.rs
//!    `recover_mapped`: the checkpoint's entries into blocks not erased since, then "newest copy
//!    wins" among the pages programmed after it) rebuilds the map of invariant 1. A block
//!    retired (bad) at the checkpoint is never read: its pages are all older than it.
//! 4. A write returns after its last flash program completes (on pages of several units: when
//!    its units are gathered, or when the program of the page they completed completes); a DB
//!    page is atomic if its size divides the flash page, else only per flash page
//!    (`atomic_write_bytes` says so, and the engine logs full-page images for larger pages).
//! 5. Requests are checked (page, log block, slot in range) before anything changes.
//! 6. Regions (region.rs): slot 0 is the default region's space, slot r region r's; a DB page
//!    is written in the space of its object's region (objects in no region: slot 0, or the one
//!    region created with `DEFAULT=on`), the log in slot 0 or in the one region
//!    created with `LOG=on` (`log_slot`), everything else (master, journal, region table) in
//!    slot 0; a flash page is invalidated in the space owning its die; the
//!    device is in slot 0 between calls; one sequence (slot 0's) numbers every write.
//! 7. `region_used[r]` is the number of DB flash pages mapped on slot r's dies, and never exceeds
//!    `region_limit[r]` (a write that would pass it is refused before anything changes).
//! 8. A map checkpoint is a snapshot at a fresh sequence number C taken between two calls (no
//!    GC half done); the previous one stays valid until every page of it is programmed.
//! 9. A key is in at most one gather (`buffered` names it), a gather holds at most a flash
//!    page of units of one region and stream, and a gathered key reads from its gather (newer
//!    than its mapped copy, which stays valid until the gather is programmed). Gathered units
//!    get their sequence numbers when programmed, so they are newer than every checkpoint taken
//!    while they waited. A DB page's `k` units enter one gather together.
//! 10. The layout (`Layout`: which key is what, the region table's key last) is a function of
//!     the config and the device's factory-good blocks alone, so every open finds the same
//!     keys whatever grew bad since the format: a block retired after a failed program or
//!     erase costs spare room, never a key (issue 32: counting grown-bad blocks moved every key
//!     at the restart after a media error).
//!
//! One file (about 1,600 lines): it is one type, `NativeStore`, and invariants 1-10 tie its parts
//! together (the forward map, the gathers, the per-region spaces, the map checkpoints): every
//! write path and recovery update them in step, so its methods are kept where they can be read
//! against the invariants at once. The flash management it shares with the FTLs is in crate
//! `ftl` already.

use ftl::journal::{
    encode_map_checkpoint, map_checkpoint_pages, recover_mapped, BlockAtCheckpoint, Journal,
    RecoveryReads, UNMAPPED,
};
use ftl::oob::{OobRecord, PageKind as OobKind};
use ftl::{
    FlashSpace, FtlReport, GcCounts, GcPolicy, HostCounts, LivePage, Move, SpaceConfig, SpaceCounts,
};
use nand::{Nand, Nanos, OpKind, Ppn, Purpose};

use crate::error::{Error, Result};
use crate::pagestore::{
    keys_to_pages, PageKind, PageStore, VictimInfo, WriteHint, LOG_BLOCK_BYTES,
};
use crate::region::{decode_table, encode_table, RegionSpec};
use crate::{ObjectId, PageId};
use std::collections::HashMap;

/// A tiny device that region spaces hold while the real one is lent to another space.
fn standin() -> Result<Nand> {
    let o = [
        "geometry.channels=1".to_string(),
        "geometry.chips_per_channel=1".to_string(),
    ];
    let cfg = nand::DeviceConfig::preset("tiny", &o).map_err(|e| Error::Config(e.to_string()))?;
    Nand::new(cfg).map_err(|e| Error::Config(e.to_string()))
}

/// Write streams of the native store (see the module documentation).
pub const LOG: u8 = 0;
pub const HOT: u8 = 1;
pub const INDEX: u8 = 2;
pub const DATA: u8 = 3;
pub const COLD: u8 = 4;
pub const META: u8 = 5;
pub const JOURNAL: u8 = 6;
pub const HOT_INDEX: u8 = 7;
pub const COLD_INDEX: u8 = 8;
/// Streams without and with `NativeConfig::index_streams`.
const STREAMS: u8 = 7;
const STREAMS_WITH_INDEX: u8 = 9;
/// Striped page by page over all dies: every stream but the two small metadata ones.
const STRIPED: u64 = (1 << LOG) | (1 << HOT) | (1 << INDEX) | (1 << DATA) | (1 << COLD);
const STRIPED_WITH_INDEX: u64 = STRIPED | (1 << HOT_INDEX) | (1 << COLD_INDEX);
/// The DB page streams whose blocks hold heap pages only when index pages have streams of
/// their own: where Insert Address Assist commits its victims then.
const HEAP_STREAMS: u64 = (1 << HOT) | (1 << DATA) | (1 << COLD);

/// Flash programs (host writes and GC/WL copies) and frees between two map checkpoints, per page
/// of a checkpoint: a checkpoint then adds at most 1/32 to the flash programs (31.25 pages per
/// 1,000 programs, more per 1,000 host writes when GC copies), and recovery reads the OOB of at
/// most that many programs past it, whatever the write amplification.
pub const UPDATES_PER_CHECKPOINT_PAGE: u64 = 32;

/// Host clock of the NoFTL paper's server (Intel Xeon E5630), in cycles per microsecond (`ftl::host`).
pub const HOST_CYCLES_PER_US: u64 = ftl::host::CYCLES_PER_US;
const L3_ACCESS_CYCLES: u64 = ftl::host::L3_HIT_CYCLES;
pub const HOST_LOOKUP_CYCLES: u64 = 20 + L3_ACCESS_CYCLES;
pub const HOST_UPDATE_CYCLES: u64 = 40 + 4 * L3_ACCESS_CYCLES;
pub const HOST_MOVE_CYCLES: u64 = 20 + 2 * L3_ACCESS_CYCLES;
pub const HOST_VICTIM_CYCLES: u64 = 50 + L3_ACCESS_CYCLES;

/// Knobs of the native store.
#[derive(Clone, Debug, PartialEq)]
pub struct NativeConfig {
    /// DB page size: 1, 2 or 4 flash pages of 4 KiB.
    pub page_bytes: usize,
    /// Log blocks (4 KiB each); `None`: 1/8 of the logical space, at least 256 (the engine keeps
    /// 64 for rollbacks), at most 16,384 (64 MiB).
    pub log_blocks: Option<u64>,
    /// Over-provisioning as a spare factor (T - U) / T, as the FTLs count it.
    pub spare_factor: f64,
    pub gc: GcPolicy,
    pub seed: u64,
    /// Static wear levelling threshold (erase-count spread); 0 turns it off.
    pub wl_threshold: u32,
    /// A DB page rewritten within this many page writes goes to the hot stream; 0 picks
    /// 1/8 of the logical space.
    pub hot_window_writes: u64,
    /// B-tree and space-map pages in streams of their own (`HOT_INDEX`, `COLD_INDEX`), so that
    /// no block mixes heap and index pages, and Insert Address Assist commits victims among
    /// heap-only blocks. Costs an open block per die for each of the two streams.
    pub index_streams: bool,
}

impl Default for NativeConfig {
    fn default() -> Self {
        NativeConfig {
            page_bytes: 4096,
            log_blocks: None,
            spare_factor: 0.07,
            gc: GcPolicy::Greedy,
            seed: 1,
            wl_threshold: 1000,
            hot_window_writes: 0,
            index_streams: false,
        }
    }
}

impl NativeConfig {
    fn streams(&self) -> u8 {
        if self.index_streams {
            STREAMS_WITH_INDEX
        } else {
            STREAMS
        }
    }
    fn striped(&self) -> u64 {
        if self.index_streams {
            STRIPED_WITH_INDEX
        } else {
            STRIPED
        }
    }
    /// The stream a page recovered with `aux`'s stream is restored to: its own, or, for a
    /// page written with index streams and opened without them, `HOT` or `COLD`.
    fn restore_stream(&self, aux: u64) -> u8 {
        match aux as u8 {
            s if s < self.streams() => s,
            HOT_INDEX => HOT,
            COLD_INDEX => COLD,
            _ => self.streams() - 1,
        }
    }
    fn space_config(&self) -> SpaceConfig {
        self.region_space_config(self.gc, Vec::new(), None)
    }
    fn region_space_config(
        &self,
        gc: GcPolicy,
        dies: Vec<u32>,
        cell_mode: Option<nand::CellMode>,
    ) -> SpaceConfig {
        SpaceConfig {
            cell_mode,
            dies,
            streams: self.streams(),
            gc,
            seed: self.seed,
            reserve_blocks: 0,
            background_free_blocks: 0,
            wl_threshold: self.wl_threshold,
            striped: self.striped(),
            // Map checkpoints (journal.rs) tell unchanged blocks by page 0's stamp.
            stamp_incarnation: true,
            gc_reads_oob: false,
            plane_blocks: None,
        }
    }
}

/// Where the keys are: computed from the device and the config alone, so the same on reopen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    log_blocks: u64,
    db_key0: u64,
    db_pages: u64,
    /// Flash pages per DB page.
    k: u64,
    capacity: u64,
    /// Key of the region table (region.rs format), the last key.
    region_key: u64,
}

fn layout(nand: &Nand, cfg: &NativeConfig) -> Result<Layout> {
    let g = nand.geometry();
    let page_size = g.page_size_bytes as usize;
    if page_size < LOG_BLOCK_BYTES || !page_size.is_multiple_of(LOG_BLOCK_BYTES) {
        return Err(Error::Config(format!(
            "the native store maps {LOG_BLOCK_BYTES}-byte units onto flash pages of a whole number of them; the device has {page_size}-byte pages"
        )));
    }
    let upp = u64::from(ftl::space::units_per_page(g));
    if ![4096, 8192, 16384].contains(&cfg.page_bytes) {
        return Err(Error::Config(format!(
            "page size {} is not 4, 8 or 16 KiB",
            cfg.page_bytes
        )));
    }
    if !(cfg.spare_factor.is_finite() && (0.0..1.0).contains(&cfg.spare_factor)) {
        return Err(Error::Config(format!(
            "spare factor {} is not in [0, 1)",
            cfg.spare_factor
        )));
    }
    if g.pages() * upp >= u64::from(u32::MAX) {
        return Err(Error::Config(format!(
            "{} flash pages of {upp} units do not fit the 32-bit map entries",
            g.pages()
        )));
    }
    // The same logical capacity a page-mapped FTL would export (ftl::options): U = (1 - s) T,
    // T = (factory-good blocks - GC reserve) x pages per block, less room for open blocks.
    // Units per block: what the capacity is counted in (a key is one unit).
    let ppb = u64::from(nand.config().pages_in_mode(nand.config().cell.native)) * upp;
    // Factory-good, not "not bad now" (invariant 10): the layout must be the same at every
    // open (the keys depend on it), and blocks grow bad during the store's life (a failed
    // program or erase). Counting grown-bad blocks shrank `db_pages` at the restart after a
    // failed operation, so the region table's key (the last key) moved down onto the copy of
    // a DB page near the end, which a fully written store holds (zeros after ageing): the
    // restart failed with "corrupt region table"; and no map checkpoint decoded any more
    // (their key count no longer matched), so recovery fell back to a full scan. A grown-bad
    // block costs spare room instead, as in an FTL (issue 32).
    let good = (0..g.blocks())
        .filter(|&b| {
            nand.block_info(nand::Pbn(b))
                .is_ok_and(|i| i.state != nand::BlockState::FactoryBad)
        })
        .count() as u64;
    let reserve = u64::from(g.dies()) + 2;
    let t = good.saturating_sub(reserve) * ppb;
    let u = ((1.0 - cfg.spare_factor) * t as f64).floor() as u64;
    let open = (u64::from(cfg.striped().count_ones()) * u64::from(g.dies()) + 2 + 2) * ppb;
    let k = (cfg.page_bytes / LOG_BLOCK_BYTES) as u64;
    let log_blocks = cfg.log_blocks.unwrap_or((u / 8).clamp(256, 16384));
    if t < u + open || u < 2 + log_blocks + 16 * k || log_blocks < 16 {
        return Err(Error::Config(format!(
            "a device of {t} usable flash pages at spare factor {} has no room for open blocks on {} dies, a {log_blocks}-block log and a database",
            cfg.spare_factor,
            g.dies()
        )));
    }
    let db_pages = ((u - 2 - log_blocks) / k).min(u64::from(u32::MAX));
    Ok(Layout {
        log_blocks,
        db_key0: 2 + log_blocks,
        db_pages,
        k,
        capacity: 2 + log_blocks + db_pages * k + 1,
        region_key: 2 + log_blocks + db_pages * k,
    })
}

/// The NoFTL page store. See the module documentation.
pub struct NativeStore {
    /// Slot 0: the default region (the dies no other region holds); slot r: region `r - 1` of
    /// `regions`. Between calls the device is in slot 0 (`lend` moves it for one operation).
    spaces: Vec<FlashSpace>,
    regions: Vec<(RegionSpec, Vec<u32>)>,
    /// Per die: the slot that owns it.
    die_owner: Vec<u8>,
    /// Objects placed in a region (others are in the default one).
    object_region: HashMap<ObjectId, usize>,
    /// Per slot: DB flash pages mapped there, and how many it may hold (its MAX_SIZE and what
    /// its OP leaves usable, the smaller; slot 0: unlimited).
    region_used: Vec<u64>,
    region_limit: Vec<u64>,
    cfg: NativeConfig,
    lay: Layout,
    map: Vec<u32>,
    /// Per DB page: the page-write count at its last write (0: not written this session).
    last_write: Vec<u64>,
    page_writes: u64,
    hot_window: u64,
    journal: Journal,
    /// Flash pages programmed (host writes, GC and wear-levelling copies) and keys freed since
    /// the last map checkpoint.
    updates_since_checkpoint: u64,
    /// Pages of one map checkpoint.
    checkpoint_pages: u64,
    host: HostCounts,
    host_mapping_ps: u128,
    charged: SpaceCounts,
    /// Units (keys) per flash page: 1 on 4 KiB pages.
    upp: u32,
    /// On pages of several units: per slot and stream (index `slot * STREAMS_WITH_INDEX +
    /// stream`, whether or not index streams are on), the
    /// units gathered in host memory for the stream's next flash page (module documentation,
    /// "Flash pages of several units").
    gathers: Vec<Gather>,
    /// Which gather holds a key (invariant 9: at most one).
    buffered: HashMap<u64, u32>,
    /// The slot whose space takes log writes: 0, or the region created with `LOG=on`.
    log_slot: usize,
    /// The slot of objects bound to no region: 0, or the region created with `DEFAULT=on`.
    default_slot: usize,
    /// In-Place Appends programmed (`write_delta`).
    ipa_appends: u64,
}

/// Units gathered for one flash page of a stream, in arrival order.
#[derive(Debug, Default)]
struct Gather {
    keys: Vec<u64>,
    data: Vec<u8>,
}

impl std::fmt::Debug for NativeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeStore")
            .field("layout", &self.lay)
            .field("device", &self.spaces[0].nand().config().name)
            .finish()
    }
}

impl NativeStore {
    /// Formats `nand` (everything on it is lost) and returns an empty store.
    pub fn format(nand: Nand, cfg: NativeConfig) -> Result<NativeStore> {
        let lay = layout(&nand, &cfg)?;
        let at = nand.now_ns();
        let (space, _) = FlashSpace::format(nand, cfg.space_config(), at)?;
        Ok(Self::assemble(
            vec![space],
            Vec::new(),
            cfg,
            lay,
            vec![UNMAPPED; lay.capacity as usize],
            Journal::new(lay.capacity, LOG_BLOCK_BYTES, JOURNAL),
        ))
    }

    /// Rebuilds the store from what `nand` holds (after a power cut or a clean stop): the newest
    /// complete map checkpoint plus the OOB of what was written after it (journal.rs,
    /// `recover_mapped`), and gives the blocks back to their streams.
    pub fn open(nand: Nand, cfg: NativeConfig) -> Result<NativeStore> {
        Self::open_or_give_back(nand, cfg).map_err(|(e, _)| e)
    }

    /// `open` by a full OOB scan (the checkpoint only for frees): the reference recovery that
    /// `open` must agree with, for tests and measurements.
    pub fn open_full_scan(nand: Nand, cfg: NativeConfig) -> Result<NativeStore> {
        let mut slot = Some(nand);
        Self::open_from(&mut slot, cfg, RecoveryReads::Full)
    }

    /// `open`, but a failure gives the flash back with the error, so that the caller can
    /// power-cycle it and open again: the crash test cuts power a second time during this
    /// restart (kits `crash_native`), which a store that consumed the device cannot survive.
    ///
    /// The flash comes back from every failure: the layout check, the recovery reads
    /// (checkpoint and OOB), the region table read, and the spaces' restores (their erases of
    /// blocks a cut left half-erased and moves off grown-bad blocks; `FlashSpace::
    /// restore_or_give_back`). A store that opened gives its flash back by
    /// `PageStore::into_nand`, also after `Engine::open_or_give_back` failed on it.
    pub fn open_or_give_back(
        nand: Nand,
        cfg: NativeConfig,
    ) -> std::result::Result<NativeStore, (Error, Box<Nand>)> {
        let mut slot = Some(nand);
        Self::open_from(&mut slot, cfg, RecoveryReads::SinceCheckpoint).map_err(|e| {
            let Some(back) = slot else {
                unreachable!("every failure of open_from leaves the flash in its slot")
            };
            (e, Box::new(back))
        })
    }

    /// `open`'s work on the flash in `slot`, which stays there until the restore takes it.
    fn open_from(
        slot: &mut Option<Nand>,
        cfg: NativeConfig,
        reads: RecoveryReads,
    ) -> Result<NativeStore> {
        let nand = slot
            .as_mut()
            .ok_or_else(|| Error::Config("no flash to open".into()))?;
        let lay = layout(nand, &cfg)?;
        let at = nand.now_ns();
        let rec = recover_mapped(nand, at, lay.capacity, reads)?;
        // The stream of each winning copy is in its OOB `aux` (bits 0..8), which recovery already
        // read, or for entries taken from the checkpoint, the checkpoint's stream of the block.
        let live = rec.live_pages(|aux| cfg.restore_stream(aux), JOURNAL);
        // The region table says which dies belong to which region's space.
        let mut regions = Vec::new();
        let table_at = rec.map[lay.region_key as usize];
        if table_at != UNMAPPED {
            let mut page = vec![0u8; LOG_BLOCK_BYTES];
            ftl::journal::read_unit(nand, rec.done_ns, Ppn(u64::from(table_at)), &mut page)
                .map_err(ftl::FtlError::from)?;
            regions = decode_table(&page)?;
        }
        let g = nand.geometry().clone();
        let mut owner = vec![0u8; g.dies() as usize];
        for (i, (_, dies)) in regions.iter().enumerate() {
            for &d in dies {
                *owner.get_mut(d as usize).ok_or_else(|| {
                    Error::Recovery(format!("region die {d} beyond the device"))
                })? = (i + 1) as u8;
            }
        }
        let upp = u64::from(ftl::space::units_per_page(&g));
        let die_of = |p: &LivePage| {
            owner[g.die_of_block(g.block_of(Ppn(p.ppn.0 / upp))).0 as usize] as usize
        };
        let default_dies: Vec<u32> = if regions.is_empty() {
            Vec::new()
        } else {
            (0..g.dies()).filter(|&d| owner[d as usize] == 0).collect()
        };
        let live0: Vec<LivePage> = live.iter().filter(|p| die_of(p) == 0).copied().collect();
        // Stand-ins hold the space's place while a region's space restores from the one device;
        // made before the device leaves the slot, so that every failure from here on is a
        // restore's, which gives the device back to the slot.
        let standins: Vec<(Nand, Nand)> = regions
            .iter()
            .map(|_| Ok((standin()?, standin()?)))
            .collect::<Result<_>>()?;
        let nand = slot
            .take()
            .ok_or_else(|| Error::Config("no flash to open".into()))?;
        // A failed restore (a cut during its erases or moves) puts the flash back in the slot.
        let (mut space0, _) = FlashSpace::restore_or_give_back(
            nand,
            cfg.region_space_config(cfg.gc, default_dies, None),
            rec.done_ns,
            &live0,
            rec.next_seq,
        )
        .map_err(|(e, back)| {
            *slot = Some(*back);
            e
        })?;
        let mut spaces = Vec::new();
        for ((i, (spec, dies)), (held, given)) in regions.iter().enumerate().zip(standins) {
            let live_r: Vec<LivePage> = live
                .iter()
                .filter(|p| die_of(p) == i + 1)
                .copied()
                .collect();
            let real = space0.replace_nand(held);
            let (mut sp, _) = FlashSpace::restore_or_give_back(
                real,
                cfg.region_space_config(spec.gc, dies.clone(), spec.cell_mode),
                rec.done_ns,
                &live_r,
                rec.next_seq,
            )
            .map_err(|(e, back)| {
                *slot = Some(*back);
                e
            })?;
            space0.replace_nand(sp.replace_nand(given));
            spaces.push(sp);
        }
        spaces.insert(0, space0);
        let journal = Journal::recovered(lay.capacity, LOG_BLOCK_BYTES, JOURNAL, rec.journal);
        let mut s = Self::assemble(spaces, regions, cfg, lay, rec.map, journal);
        for r in 1..s.spaces.len() {
            s.lend(r);
            s.absorb(r);
            s.lend(r);
        }
        s.absorb(0); // pages moved off bad blocks during the restore
        Ok(s)
    }

    fn assemble(
        spaces: Vec<FlashSpace>,
        regions: Vec<(RegionSpec, Vec<u32>)>,
        cfg: NativeConfig,
        lay: Layout,
        map: Vec<u32>,
        journal: Journal,
    ) -> NativeStore {
        let hot_window = if cfg.hot_window_writes == 0 {
            (lay.capacity / 8).max(64)
        } else {
            cfg.hot_window_writes
        };
        let mut die_owner = vec![0u8; spaces[0].geometry().dies() as usize];
        for (i, (_, dies)) in regions.iter().enumerate() {
            for &d in dies {
                die_owner[d as usize] = (i + 1) as u8;
            }
        }
        let geo = spaces[0].geometry().clone();
        let bad: Vec<bool> = (0..geo.blocks())
            .map(|b| spaces[0].nand().is_bad(nand::Pbn(b)))
            .collect();
        let mut region_limit = vec![u64::MAX];
        region_limit.extend(regions.iter().zip(&spaces[1..]).map(|((spec, dies), sp)| {
            let units_per_block = u64::from(sp.pages_per_block()) * u64::from(sp.units_per_page());
            region_capacity_pages(
                &geo,
                &bad,
                units_per_block,
                spec,
                dies,
                lay.log_blocks,
                &cfg,
            )
        }));
        let log_slot = regions
            .iter()
            .position(|(spec, _)| spec.holds_log)
            .map_or(0, |i| i + 1);
        let default_slot = regions
            .iter()
            .position(|(spec, _)| spec.holds_default)
            .map_or(0, |i| i + 1);
        let upp = spaces[0].units_per_page();
        let mut region_used = vec![0u64; regions.len() + 1];
        for &p in &map[lay.db_key0 as usize..lay.region_key as usize] {
            if p != UNMAPPED {
                let page = Ppn(u64::from(p) / u64::from(upp));
                region_used[die_owner[geo.die_of_block(geo.block_of(page)).0 as usize] as usize] +=
                    1;
            }
        }
        NativeStore {
            charged: sum_counts(&spaces),
            spaces,
            regions,
            die_owner,
            object_region: HashMap::new(),
            region_used,
            region_limit,
            cfg,
            map,
            last_write: vec![0; lay.db_pages as usize],
            page_writes: 0,
            hot_window,
            checkpoint_pages: u64::from(map_checkpoint_pages(
                lay.capacity,
                geo.blocks(),
                LOG_BLOCK_BYTES,
            )),
            journal,
            updates_since_checkpoint: 0,
            host: HostCounts::default(),
            host_mapping_ps: 0,
            lay,
            upp,
            gathers: Vec::new(),
            buffered: HashMap::new(),
            log_slot,
            default_slot,
            ipa_appends: 0,
        }
    }

    /// The default region's space (the whole device when there are no regions).
    pub fn space(&self) -> &FlashSpace {
        &self.spaces[0]
    }
    /// A region's space and dies (its device is a stand-in between calls: ask `space()` for the
    /// geometry).
    pub fn region(&self, name: &str) -> Option<(&FlashSpace, &[u32])> {
        let i = self
            .regions
            .iter()
            .position(|(s, _)| s.name.eq_ignore_ascii_case(name))?;
        Some((&self.spaces[i + 1], &self.regions[i].1))
    }
    /// Region names and specs, in creation order.
    pub fn regions(&self) -> impl Iterator<Item = &RegionSpec> {
        self.regions.iter().map(|(s, _)| s)
    }

    /// Moves the device between slot 0 and slot `r` (call twice: lend, use, give back).
    fn lend(&mut self, r: usize) {
        if r != 0 {
            let (a, b) = self.spaces.split_at_mut(r);
            a[0].lend_nand(&mut b[0]);
        }
    }

    /// Creates a region (region.rs): chooses its chips, moves the default region's pages off
    /// them, formats them as the region's own space and writes the region table. Everything is
    /// checked before anything is written; an existing region of the same name and options is
    /// accepted as is (the engine registers its catalog's regions again after a restart).
    pub fn create_region(
        &mut self,
        at: Nanos,
        name: &str,
        options: &[(String, String)],
    ) -> Result<Nanos> {
        let spec = RegionSpec::parse(name, options)?;
        if self.region_exists(name, &spec)? {
            return Ok(at);
        }
        let g = self.spaces[0].geometry().clone();
        let taken: Vec<bool> = self.die_owner.iter().map(|&o| o != 0).collect();
        let dies = spec.choose_dies(&g, &taken)?;
        let dev = self.spaces[0].nand().config();
        self.check_region_modes(name, &spec, dev)?;
        // Units per block in the region's cell mode: what its capacity is counted in.
        let ppb = u64::from(dev.pages_in_mode(spec.cell_mode.unwrap_or(dev.cell.native)))
            * u64::from(self.upp);
        let bad: Vec<bool> = (0..g.blocks())
            .map(|b| self.spaces[0].nand().is_bad(nand::Pbn(b)))
            .collect();
        let usable_bytes =
            usable_pages(&g, &bad, ppb, &spec, &dies, &self.cfg) * LOG_BLOCK_BYTES as u64;
        self.check_region_capacity(name, &spec, dies.len(), usable_bytes)?;
        let mut table = self.regions.clone();
        table.push((spec.clone(), dies.clone()));
        let mut page = vec![0u8; LOG_BLOCK_BYTES];
        encode_table(&table, &mut page)?;
        // Checked; now the default space gives the dies up (it refuses before moving anything
        // if the rest of the device cannot take its pages).
        let t = self.spaces[0].release_dies(at, &dies)?;
        self.absorb(0);
        let real = self.spaces[0].replace_nand(standin()?);
        // A failure (a power cut while erasing) must give the device back to slot 0.
        let (mut sp, t2) = match FlashSpace::format_or_give_back(
            real,
            self.cfg
                .region_space_config(spec.gc, dies.clone(), spec.cell_mode),
            t,
        ) {
            Ok(x) => x,
            Err((e, nand)) => {
                self.spaces[0].replace_nand(*nand);
                return Err(e.into());
            }
        };
        self.spaces[0].replace_nand(sp.replace_nand(standin()?));
        self.spaces.push(sp);
        let slot = self.spaces.len() - 1;
        for &d in &dies {
            self.die_owner[d as usize] = slot as u8;
        }
        self.region_limit.push(region_capacity_pages(
            &g,
            &bad,
            ppb,
            &spec,
            &dies,
            self.lay.log_blocks,
            &self.cfg,
        ));
        self.region_used.push(0);
        if spec.holds_log {
            // Log writes go there from now on; what the log wrote before stays where it is
            // until the log's tail passes it.
            self.log_slot = slot;
        }
        if spec.holds_default {
            self.default_slot = slot;
        }
        self.regions = table;
        self.put(t2, self.lay.region_key, META, &page, Purpose::Meta, 0)
    }

    /// `create_region`'s first checks, against the regions there are: true when a region of
    /// this name and these options exists already (accepted as is), an error when the name is
    /// taken otherwise, the table is full, or DEFAULT=on / LOG=on is held by another region.
    /// A step because none of it needs the device.
    fn region_exists(&self, name: &str, spec: &RegionSpec) -> Result<bool> {
        if let Some((old, _)) = self
            .regions
            .iter()
            .find(|(s, _)| s.name.eq_ignore_ascii_case(name))
        {
            if old.options == spec.options {
                return Ok(true);
            }
            return Err(Error::AlreadyExists {
                kind: "region",
                name: name.into(),
            });
        }
        if self.regions.len() >= 254 {
            return Err(Error::Config("at most 254 regions".into()));
        }
        if let Some((other, _)) = self
            .regions
            .iter()
            .find(|(s, _)| s.holds_default && spec.holds_default)
        {
            return Err(Error::Config(format!(
                "region {name}: DEFAULT=on, but region {} holds the unplaced objects already",
                other.name
            )));
        }
        if let Some((other, _)) = self
            .regions
            .iter()
            .find(|(s, _)| s.holds_log && spec.holds_log)
        {
            return Err(Error::Config(format!(
                "region {name}: LOG=on, but region {} holds the log already",
                other.name
            )));
        }
        Ok(false)
    }

    /// `create_region`'s checks against the chips: CELL_MODE needs MLC or TLC chips, IPA_MODE
    /// and IPA_SCHEME need the programs per page and the page room they ask for. A step
    /// because it is the chips' cell type and NOP that decide, refused before anything is
    /// written.
    fn check_region_modes(
        &self,
        name: &str,
        spec: &RegionSpec,
        dev: &nand::DeviceConfig,
    ) -> Result<()> {
        if let Some(mode) = spec.cell_mode {
            if !dev.allows_mode(mode) {
                return Err(Error::Config(format!(
                    "region {name}: CELL_MODE={} needs MLC or TLC chips; the device's are {}",
                    mode.name(),
                    dev.cell.native.name()
                )));
            }
        }
        if let Some((mode, scheme)) = spec.ipa {
            // In-Place Appends: refused before anything is written when the chips cannot take
            // them (ipa.rs, docs/ipa.md "Modes").
            let cell = mode.cell_mode();
            let what = match mode {
                crate::region::IpaMode::Slc => "SLC",
                crate::region::IpaMode::Pslc => "pSLC",
            };
            if mode == crate::region::IpaMode::Slc && dev.cell.native != nand::CellMode::Slc {
                return Err(Error::Config(format!(
                    "region {name}: IPA_MODE=SLC needs SLC chips; the device's are {} (use IPA_MODE=pSLC)",
                    dev.cell.native.name()
                )));
            }
            let nop = dev.nop_limit(cell);
            if u32::from(scheme.appends) + 1 > u32::from(nop) {
                return Err(Error::Config(format!(
                    "region {name}: IPA_SCHEME {} needs {} programs per page (the page and its appends); {what} pages of this chip allow {nop} (cell.nop)",
                    scheme.label(),
                    u32::from(scheme.appends) + 1
                )));
            }
            if scheme.area_bytes() > self.cfg.page_bytes / 8 {
                return Err(Error::Config(format!(
                    "region {name}: IPA_SCHEME {} with {}-byte records takes {} bytes of each {}-byte DB page; at most an eighth may go to deltas (fewer appends, records or record bytes)",
                    scheme.label(),
                    scheme.record_bytes,
                    scheme.area_bytes(),
                    self.cfg.page_bytes
                )));
            }
        }
        Ok(())
    }

    /// `create_region`'s checks of the usable room on the chosen dies: MAX_SIZE must fit, and
    /// LOG=on needs the log and a quarter more. A step because both compare `usable_bytes`
    /// with what the region is asked to hold.
    fn check_region_capacity(
        &self,
        name: &str,
        spec: &RegionSpec,
        dies: usize,
        usable_bytes: u64,
    ) -> Result<()> {
        if let Some(max) = spec.max_size_bytes {
            if usable_bytes < max {
                return Err(Error::Config(format!(
                    "region {name}: MAX_SIZE {max} bytes does not fit on {} chips ({} dies) at OP {:.0}%: {usable_bytes} bytes usable",
                    spec.max_chips,
                    dies,
                    spec.spare_factor * 100.0
                )));
            }
        }
        if spec.holds_log {
            // The whole log may be live at once, and GC needs room beside it (little: the log
            // dies in the order it was written, so its blocks come free whole).
            let log_bytes = self.lay.log_blocks * LOG_BLOCK_BYTES as u64;
            if usable_bytes < log_bytes + log_bytes / 4 {
                return Err(Error::Config(format!(
                    "region {name}: LOG=on needs the {log_bytes}-byte log and a quarter more usable at its OP; {usable_bytes} bytes are (more MAX_CHIPS, or a smaller log)"
                )));
            }
        }
        Ok(())
    }

    /// Places `object`'s pages in region `region` from now on.
    pub fn bind_object(&mut self, object: ObjectId, region: &str) -> Result<()> {
        let i = self
            .regions
            .iter()
            .position(|(s, _)| s.name.eq_ignore_ascii_case(region))
            .ok_or_else(|| Error::NotFound {
                kind: "region",
                name: region.into(),
            })?;
        self.object_region.insert(object, i + 1);
        Ok(())
    }
    pub fn config(&self) -> &NativeConfig {
        &self.cfg
    }
    /// Gives the flash back (to cut power and reopen).
    pub fn into_nand_raw(self) -> Nand {
        self.spaces
            .into_iter()
            .next()
            .map(FlashSpace::into_nand)
            .unwrap_or_else(|| unreachable!("slot 0 always exists"))
    }
    /// Host CPU time spent on mapping, GC bookkeeping and wear levelling so far.
    pub fn host_mapping_ns(&self) -> u64 {
        (self.host_mapping_ps / 1000) as u64
    }
    /// Map checkpoints written so far.
    /// The slot an object's pages are written in (invariant 6).
    fn slot_of(&self, object: ObjectId) -> usize {
        self.object_region
            .get(&object)
            .copied()
            .unwrap_or(self.default_slot)
    }
    /// DB pages `object`'s region can still take (its limit less what it holds; the default
    /// region: the DB pages not written yet).
    pub fn room_pages(&self, object: ObjectId) -> u64 {
        let r = self.slot_of(object);
        let units = self.region_limit[r].saturating_sub(self.region_used[r]);
        (units / self.lay.k).min(self.lay.db_pages)
    }
    /// The share of the mapped DB units that lie in regions with In-Place Appends (what part of
    /// the database carries delta areas).
    pub fn ipa_share(&self) -> f64 {
        let total: u64 = self.region_used.iter().sum();
        let ipa: u64 = (1..self.spaces.len())
            .filter(|&r| self.regions[r - 1].0.ipa.is_some())
            .map(|r| self.region_used[r])
            .sum();
        if total == 0 {
            0.0
        } else {
            ipa as f64 / total as f64
        }
    }
    /// In-Place Appends programmed so far (ipa.rs).
    pub fn ipa_appends(&self) -> u64 {
        self.ipa_appends
    }
    pub fn checkpoints_written(&self) -> u64 {
        self.journal.checkpoints_written
    }
    /// Flash pages of map checkpoints written so far, and the pages of one checkpoint.
    pub fn checkpoint_pages_written(&self) -> (u64, u64) {
        (self.journal.map_pages_written, self.checkpoint_pages)
    }
    /// The flash page holding a DB page's first unit (tests).
    pub fn location(&self, pid: PageId) -> Option<Ppn> {
        let key = self.lay.db_key0 + u64::from(pid) * self.lay.k;
        self.map
            .get(key as usize)
            .copied()
            .filter(|&p| p != UNMAPPED)
            .map(|p| self.page_of(p))
    }
    /// The flash page of map entry (unit location) `loc`.
    fn page_of(&self, loc: u32) -> Ppn {
        Ppn(u64::from(loc) / u64::from(self.upp))
    }

    /// Charges `cycles` of host CPU work submitted at `at`; returns when it is done.
    fn host_cpu(&mut self, at: Nanos, cycles: u64) -> Nanos {
        let ps = u128::from(cycles) * 1_000_000 / u128::from(HOST_CYCLES_PER_US);
        self.host_mapping_ps += ps;
        at + (ps / 1000) as Nanos
    }

    /// Applies the space's moves to the map (invariant 1).
    fn absorb(&mut self, r: usize) {
        let map = &mut self.map;
        self.journal.absorb(&mut self.spaces[r], &mut |m: &Move| {
            let e = &mut map[m.key as usize];
            debug_assert_eq!(
                u64::from(*e),
                m.from.0,
                "moved page of key {} is not the mapped one",
                m.key
            );
            *e = m.to.0 as u32;
        });
    }

    /// A durability point on MLC/TLC (ftl space invariant 9b): completes the open word lines of
    /// slot 0's space (`all == false`: the log, master records, map checkpoints) or of every
    /// region's, so that nothing the engine relies on sits on an unpaired lower page. Nothing to
    /// do (and no time) on SLC and pSLC.
    fn pair(&mut self, at: Nanos, all: bool) -> Result<Nanos> {
        let mut done = at;
        let slots = if all { self.spaces.len() } else { 1 };
        for r in 0..slots {
            done = done.max(self.pair_slot(at, r)?);
        }
        Ok(done)
    }

    /// `pair` for slot `r` alone.
    fn pair_slot(&mut self, at: Nanos, r: usize) -> Result<Nanos> {
        self.lend(r);
        let res = self.spaces[r].pair_word_lines(at);
        self.lend(r);
        let done = res?;
        self.absorb(r);
        Ok(done.max(at))
    }

    /// Charges the GC and wear-levelling work the space did since the last call.
    fn charge_gc(&mut self, at: Nanos) -> Nanos {
        let now = sum_counts(&self.spaces);
        let c = self.charged;
        let moves = (now.gc_migrations + now.wl_migrations) - (c.gc_migrations + c.wl_migrations);
        let victims = (now.gc_victims + now.wl_erases) - (c.gc_victims + c.wl_erases);
        self.charged = now;
        // Copies are programs recovery would read past a checkpoint, like the host's writes.
        self.updates_since_checkpoint += moves;
        self.host_cpu(at, moves * HOST_MOVE_CYCLES + victims * HOST_VICTIM_CYCLES)
    }

    /// Writes one unit of `key` on `stream`. On 4 KiB pages, and for the master records and the
    /// region table (which must be on flash when their write returns), the unit is programmed
    /// at once and the call returns when the program completes. On larger pages it joins its
    /// stream's gather (invariant 9), which is programmed once it fills a page (the call that
    /// fills it returns when that program completes) or at the next durability point.
    fn put(
        &mut self,
        at: Nanos,
        key: u64,
        stream: u8,
        data: &[u8],
        purpose: Purpose,
        r: usize,
    ) -> Result<Nanos> {
        debug_assert_eq!(data.len(), LOG_BLOCK_BYTES);
        self.host.writes += 1;
        if self.upp == 1 || stream == META {
            return self.program(at, r, stream, &[key], data, purpose);
        }
        debug_assert_eq!(purpose, purpose_of(stream));
        let t = self.host_cpu(at, HOST_LOOKUP_CYCLES);
        let ub = LOG_BLOCK_BYTES;
        if let Some(&g) = self.buffered.get(&key) {
            // A rewrite before the page is programmed replaces the gathered unit: no program.
            let gather = &mut self.gathers[g as usize];
            let i = gather
                .keys
                .iter()
                .position(|&k| k == key)
                .unwrap_or_else(|| unreachable!("key {key} buffered in a gather without it"));
            gather.data[i * ub..(i + 1) * ub].copy_from_slice(data);
            return Ok(t);
        }
        let g = r * usize::from(STREAMS_WITH_INDEX) + usize::from(stream);
        if self.gathers.len() <= g {
            self.gathers.resize_with(g + 1, Gather::default);
        }
        if self.gathers[g].keys.len() >= self.upp as usize {
            // Full from a program that failed: programmed again first.
            self.flush_gather(t, g)?;
        }
        let gather = &mut self.gathers[g];
        gather.keys.push(key);
        gather.data.extend_from_slice(data);
        let full = gather.keys.len() == self.upp as usize;
        self.buffered.insert(key, g as u32);
        if full {
            return self.flush_gather(t, g);
        }
        Ok(t)
    }

    /// Programs gather `g` (if it holds anything) as one flash page, partly filled or not;
    /// returns when the program completes. On failure the units stay gathered.
    fn flush_gather(&mut self, at: Nanos, g: usize) -> Result<Nanos> {
        if self.gathers.get(g).is_none_or(|x| x.keys.is_empty()) {
            return Ok(at);
        }
        let mut gather = std::mem::take(&mut self.gathers[g]);
        let stream = (g % usize::from(STREAMS_WITH_INDEX)) as u8;
        let r = g / usize::from(STREAMS_WITH_INDEX);
        let res = self.program(
            at,
            r,
            stream,
            &gather.keys,
            &gather.data,
            purpose_of(stream),
        );
        if res.is_ok() {
            for k in &gather.keys {
                self.buffered.remove(k);
            }
            gather.keys.clear();
            gather.data.clear();
        }
        self.gathers[g] = gather;
        res
    }

    /// Programs the gathers of every slot and stream (`log_only`: slot 0's log); returns when
    /// the last program completes.
    fn flush_gathers(&mut self, at: Nanos, log_only: bool) -> Result<Nanos> {
        if log_only {
            return self.flush_gather(
                at,
                self.log_slot * usize::from(STREAMS_WITH_INDEX) + usize::from(LOG),
            );
        }
        let mut done = at;
        for g in 0..self.gathers.len() {
            done = done.max(self.flush_gather(at, g)?);
        }
        Ok(done)
    }

    /// Drops `key` from its gather, if it is in one (the key was freed).
    fn discard(&mut self, key: u64) {
        if let Some(g) = self.buffered.remove(&key) {
            let gather = &mut self.gathers[g as usize];
            let i = gather
                .keys
                .iter()
                .position(|&k| k == key)
                .unwrap_or_else(|| unreachable!("key {key} buffered in a gather without it"));
            let ub = LOG_BLOCK_BYTES;
            let last = gather.keys.len() - 1;
            gather.keys.swap_remove(i);
            gather.data.copy_within(last * ub..(last + 1) * ub, i * ub);
            gather.data.truncate(last * ub);
        }
    }

    /// Programs `keys` (one unit each, `data` their bytes in order) into one flash page of
    /// `stream` in slot `r`'s space and maps them; returns when the program completes.
    fn program(
        &mut self,
        at: Nanos,
        r: usize,
        stream: u8,
        keys: &[u64],
        data: &[u8],
        purpose: Purpose,
    ) -> Result<Nanos> {
        debug_assert!(!keys.is_empty() && keys.len() <= self.upp as usize);
        debug_assert_eq!(data.len(), keys.len() * LOG_BLOCK_BYTES);
        let t = self.host_cpu(at, HOST_UPDATE_CYCLES * keys.len() as u64);
        // One sequence for the whole store (slot 0's), so "newest copy wins" holds across
        // regions (a freed page may come back in another region).
        let w = if let [key] = keys {
            let seq = self.spaces[0].alloc_seq();
            let rec = OobRecord::new(OobKind::Data, *key, seq, u64::from(stream));
            self.lend(r);
            let w = self.spaces[r].write(t, stream, &rec, data, purpose);
            self.lend(r);
            w
        } else {
            let units: Vec<(OobRecord, &[u8])> = keys
                .iter()
                .zip(data.chunks_exact(LOG_BLOCK_BYTES))
                .map(|(&key, d)| {
                    let seq = self.spaces[0].alloc_seq();
                    (
                        OobRecord::new(OobKind::Data, key, seq, u64::from(stream)),
                        d,
                    )
                })
                .collect();
            self.lend(r);
            let w = self.spaces[r].write_units(t, stream, &units, purpose);
            self.lend(r);
            w
        };
        let (first, mut done) = w?;
        // Moves first: GC may have moved these keys' previous copies (invariant 1).
        self.absorb(r);
        let mut elsewhere = false;
        for (i, &key) in keys.iter().enumerate() {
            let loc = first.0 + i as u64;
            let old = std::mem::replace(&mut self.map[key as usize], loc as u32);
            if (self.lay.db_key0..self.lay.region_key).contains(&key) {
                self.region_used[r] += 1;
                if old != UNMAPPED {
                    let o = self.owner(Ppn(u64::from(old)));
                    self.region_used[o] -= 1;
                }
            }
            if old != UNMAPPED {
                elsewhere |= self.owner(Ppn(u64::from(old))) != r;
                self.invalidate(Ppn(u64::from(old)));
            }
            self.updates_since_checkpoint += 1;
        }
        if elsewhere {
            // An old copy's space cannot see that its replacement may sit on an unpaired lower
            // page of this one (space invariant 9a pins within one space only), so the
            // replacement is made safe before the old copy can be collected.
            self.lend(r);
            let res = self.spaces[r].pair_word_lines(done);
            self.lend(r);
            done = done.max(res?);
            self.absorb(r);
        }
        let gc_done = self.charge_gc(t);
        Ok(done.max(gc_done))
    }

    /// Reads one flash page of `key` (zeros if unmapped).
    fn get(&mut self, at: Nanos, key: u64, buf: &mut [u8], purpose: Purpose) -> Result<Nanos> {
        let t = self.host_cpu(at, HOST_LOOKUP_CYCLES);
        self.host.reads += 1;
        if let Some(&g) = self.buffered.get(&key) {
            // Gathered, not programmed yet: newer than any copy on flash (invariant 9).
            let gather = &self.gathers[g as usize];
            let i = gather
                .keys
                .iter()
                .position(|&k| k == key)
                .unwrap_or_else(|| unreachable!("key {key} buffered in a gather without it"));
            buf.copy_from_slice(&gather.data[i * LOG_BLOCK_BYTES..(i + 1) * LOG_BLOCK_BYTES]);
            return Ok(t);
        }
        match self.map[key as usize] {
            UNMAPPED => {
                buf.fill(0);
                Ok(t)
            }
            p => Ok(self.spaces[0].read(t, Ppn(u64::from(p)), buf, &mut [], purpose)?),
        }
    }

    /// How many of the `max` keys from `key` on are one flash read: mapped side by side in one
    /// flash page, none gathered (at least 1).
    fn run_at(&self, key: u64, max: usize) -> usize {
        let mapped = |k: u64| self.map[k as usize] != UNMAPPED && !self.buffered.contains_key(&k);
        if !mapped(key) {
            return 1;
        }
        let units = (key..key + max as u64)
            .take_while(|&k| mapped(k))
            .map(|k| u64::from(self.map[k as usize]));
        self.spaces[0].run_in_page(units)
    }

    /// `get` of the keys from `key` that `run_at` found side by side in one flash page: one
    /// array read for them all (`FlashSpace::read_units`), each key's lookup charged as `get`'s.
    fn get_run(&mut self, at: Nanos, key: u64, buf: &mut [u8]) -> Result<Nanos> {
        let n = buf.len() / LOG_BLOCK_BYTES;
        let mut t = at;
        for _ in 0..n {
            t = self.host_cpu(at, HOST_LOOKUP_CYCLES);
            self.host.reads += 1;
        }
        let first = Ppn(u64::from(self.map[key as usize]));
        Ok(self.spaces[0].read_units(t, first, buf, Purpose::Host)?)
    }

    fn check_pid(&self, pid: PageId) -> Result<u64> {
        if u64::from(pid) >= self.lay.db_pages {
            return Err(Error::Io(format!(
                "page {pid} is beyond the {} DB pages",
                self.lay.db_pages
            )));
        }
        Ok(self.lay.db_key0 + u64::from(pid) * self.lay.k)
    }
    fn check_log(&self, block: u64, bytes: usize) -> Result<u64> {
        let n = (bytes / LOG_BLOCK_BYTES) as u64;
        if !bytes.is_multiple_of(LOG_BLOCK_BYTES) || block + n > self.lay.log_blocks {
            return Err(Error::Io(format!(
                "log blocks {block}..{} are beyond the {}-block log",
                block + n,
                self.lay.log_blocks
            )));
        }
        Ok(2 + block)
    }

    /// The stream for a DB page write: hot if rewritten recently, else by what it holds.
    fn stream_for(&mut self, pid: PageId, hint: WriteHint) -> u8 {
        self.page_writes += 1;
        let last = std::mem::replace(&mut self.last_write[pid as usize], self.page_writes);
        let heap = matches!(hint.kind, PageKind::Heap | PageKind::Catalog);
        let by_kind = self.cfg.index_streams && !heap;
        if last == 0 {
            if by_kind {
                COLD_INDEX
            } else {
                COLD
            }
        } else if self.page_writes - last <= self.hot_window {
            if by_kind {
                HOT_INDEX
            } else {
                HOT
            }
        } else if heap {
            DATA
        } else {
            INDEX
        }
    }

    /// Writes a map checkpoint once `UPDATES_PER_CHECKPOINT_PAGE` programs and frees per
    /// checkpoint page happened since the last one.
    fn maybe_checkpoint(&mut self, at: Nanos) -> Result<Nanos> {
        if self.updates_since_checkpoint < UPDATES_PER_CHECKPOINT_PAGE * self.checkpoint_pages {
            return Ok(at);
        }
        self.write_map_checkpoint(at)
    }

    /// Writes a map checkpoint now (journal.rs format): every key's flash page and every
    /// block's incarnation, write pointer and stream, at a fresh sequence number C. Recovery then
    /// reads it and only what was written after it; the previous one stays valid until this
    /// one is complete. Returns when its last page is programmed.
    pub fn write_map_checkpoint(&mut self, at: Nanos) -> Result<Nanos> {
        let seq = self.spaces[0].alloc_seq();
        let g = self.spaces[0].geometry().clone();
        let blocks: Vec<BlockAtCheckpoint> = (0..g.blocks())
            .map(|b| {
                let slot = self.die_owner[g.die_of_block(nand::Pbn(b)).0 as usize] as usize;
                let (incarnation, written, stream, retired) =
                    self.spaces[slot].block_checkpoint(nand::Pbn(b));
                BlockAtCheckpoint {
                    incarnation,
                    written,
                    stream,
                    retired,
                }
            })
            .collect();
        let content = encode_map_checkpoint(&self.map, &blocks);
        // Copying the map out: about one cycle per 4-byte entry.
        let t = self.host_cpu(at, content.len() as u64 / 4);
        let map = &mut self.map;
        let done = self.journal.write_map_checkpoint(
            &mut self.spaces[0],
            t,
            seq,
            &content,
            &mut |m: &Move| {
                map[m.key as usize] = m.to.0 as u32;
            },
        )?;
        self.updates_since_checkpoint = 0;
        Ok(done.max(self.charge_gc(t)))
    }

    /// The slot whose space owns the die of unit location `loc`.
    fn owner(&self, loc: Ppn) -> usize {
        let g = self.spaces[0].geometry();
        let page = Ppn(loc.0 / u64::from(self.upp));
        self.die_owner[g.die_of_block(g.block_of(page)).0 as usize] as usize
    }

    /// Invalidates a flash page in the space that owns its die.
    fn invalidate(&mut self, ppn: Ppn) {
        let r = self.owner(ppn);
        self.spaces[r].invalidate(ppn);
    }

    fn free_keys(&mut self, at: Nanos, key0: u64) -> Nanos {
        let t = self.host_cpu(at, HOST_UPDATE_CYCLES * self.lay.k);
        for key in key0..key0 + self.lay.k {
            self.discard(key);
            let old = std::mem::replace(&mut self.map[key as usize], UNMAPPED);
            if old != UNMAPPED {
                let o = self.owner(Ppn(u64::from(old)));
                self.region_used[o] -= 1;
                self.invalidate(Ppn(u64::from(old)));
                self.updates_since_checkpoint += 1;
                self.host.trims += 1;
            }
        }
        t
    }
}

impl PageStore for NativeStore {
    fn name(&self) -> String {
        "native".into()
    }
    /// Insert Address Assist (iaa.rs): the default space commits its victims among the DB
    /// pages' streams (log, master and journal blocks empty themselves or are not the
    /// engine's to empty); with index streams, among the heap-only ones (a heap insert cannot
    /// empty an index page).
    fn gc_victims(
        &mut self,
        victims: u32,
        known_epoch: u64,
        out: &mut Vec<PageId>,
    ) -> Option<VictimInfo> {
        let victim_streams = if self.cfg.index_streams {
            HEAP_STREAMS
        } else {
            HEAP_STREAMS | (1 << INDEX)
        };
        let space = &mut self.spaces[0];
        let info = VictimInfo {
            epoch: space.commit_victims(victims, victim_streams),
            flash_page_bytes: space.geometry().page_size_bytes as usize,
        };
        if info.epoch != known_epoch {
            let mut keys = Vec::new();
            space.committed_keys(&mut keys);
            out.clear();
            keys_to_pages(&keys, self.lay.db_key0, self.lay.k, self.lay.db_pages, out);
        }
        Some(info)
    }
    fn page_bytes(&self) -> usize {
        self.cfg.page_bytes
    }
    fn db_pages(&self) -> u64 {
        self.lay.db_pages
    }
    fn log_blocks(&self) -> u64 {
        self.lay.log_blocks
    }
    fn atomic_write_bytes(&self) -> usize {
        // A DB page that fills a flash page, or shares one with whole others, is programmed by
        // one program (a gather never splits it: invariant 9), and a cut program reads as torn
        // as a whole (nand), so the engine needs no full-page images for it.
        let flash_page = self.upp as usize * LOG_BLOCK_BYTES;
        if flash_page.is_multiple_of(self.cfg.page_bytes) {
            self.cfg.page_bytes
        } else {
            LOG_BLOCK_BYTES
        }
    }

    fn ipa_scheme(&self, object: ObjectId) -> Option<crate::ipa::IpaScheme> {
        let r = self.slot_of(object);
        (r > 0)
            .then(|| self.regions[r - 1].0.ipa)
            .flatten()
            .map(|(_, scheme)| scheme)
    }

    fn write_delta(
        &mut self,
        at_ns: Nanos,
        pid: PageId,
        offset: usize,
        bytes: &[u8],
    ) -> Result<Option<Nanos>> {
        let key0 = self.check_pid(pid)?;
        let ub = LOG_BLOCK_BYTES;
        let in_unit = offset % ub;
        if bytes.is_empty()
            || offset + bytes.len() > self.cfg.page_bytes
            || in_unit + bytes.len() > ub
        {
            return Err(Error::Io(format!(
                "write_delta of {} bytes at {offset} of page {pid}: not inside one 4 KiB unit of the page",
                bytes.len()
            )));
        }
        let key = key0 + (offset / ub) as u64;
        if self.buffered.contains_key(&key) {
            // Its last write waits in a gather, not on flash: nothing to append to.
            return Ok(None);
        }
        let loc = self.map[key as usize];
        if loc == UNMAPPED {
            return Ok(None);
        }
        let ppn = self.page_of(loc);
        let r = self.owner(ppn);
        let Some((mode, _)) = (r > 0).then(|| self.regions[r - 1].0.ipa).flatten() else {
            // A page with a delta area outside an IPA region (its object was placed there
            // before a restart changed nothing, or a copy moved it): out of place it goes.
            return Ok(None);
        };
        let cell = mode.cell_mode();
        let nand = self.spaces[0].nand();
        if nand.page_programs(ppn) >= nand.config().nop_limit(cell) {
            // Every program this flash page allows is spent (pages of several DB pages share
            // the budget): the caller writes out of place.
            return Ok(None);
        }
        let t = self.host_cpu(at_ns, HOST_LOOKUP_CYCLES);
        let at = (loc % self.upp) as usize * ub + in_unit;
        let done = self.spaces[0]
            .nand_mut()
            .partial_program(t, ppn, at, bytes, 0, &[], Purpose::Host)
            .map_err(|e| Error::Io(format!("In-Place Append to page {pid}: {e}")))?;
        self.ipa_appends += 1;
        Ok(Some(done.done_ns))
    }

    fn read_page(&mut self, at_ns: Nanos, pid: PageId, buf: &mut [u8]) -> Result<Nanos> {
        let key0 = self.check_pid(pid)?;
        let units = buf.len() / LOG_BLOCK_BYTES;
        let mut done = at_ns;
        let mut i = 0;
        while i < units {
            let n = self.run_at(key0 + i as u64, units - i);
            let run = &mut buf[i * LOG_BLOCK_BYTES..(i + n) * LOG_BLOCK_BYTES];
            done = done.max(if n == 1 {
                self.get(at_ns, key0 + i as u64, run, Purpose::Host)?
            } else {
                self.get_run(at_ns, key0 + i as u64, run)?
            });
            i += n;
        }
        Ok(done)
    }

    fn write_page(
        &mut self,
        at_ns: Nanos,
        pid: PageId,
        data: &[u8],
        hint: WriteHint,
    ) -> Result<Nanos> {
        let key0 = self.check_pid(pid)?;
        if data.len() != self.cfg.page_bytes {
            return Err(Error::Io(format!(
                "write of {} bytes to a {}-byte page",
                data.len(),
                self.cfg.page_bytes
            )));
        }
        let r = self.slot_of(hint.object);
        // A region holds at most its limit of pages: refused before anything changes.
        let new_here = (key0..key0 + self.lay.k)
            .filter(|&k| {
                self.map[k as usize] == UNMAPPED
                    || self.owner(Ppn(u64::from(self.map[k as usize]))) != r
            })
            .count() as u64;
        if self.region_used[r] + new_here > self.region_limit[r] {
            return Err(Error::Io(format!(
                "region {} is full: {} of its {} pages (MAX_SIZE, or what its OP leaves usable) are taken",
                self.regions[r - 1].0.name,
                self.region_used[r],
                self.region_limit[r]
            )));
        }
        let stream = self.stream_for(pid, hint);
        let mut done = at_ns;
        for (i, chunk) in data.chunks_exact(LOG_BLOCK_BYTES).enumerate() {
            done = done.max(self.put(at_ns, key0 + i as u64, stream, chunk, Purpose::Host, r)?);
        }
        Ok(done)
    }

    fn sync_pages(&mut self, at_ns: Nanos) -> Result<Nanos> {
        // On SLC writes are durable when they return (invariant 4); on MLC/TLC the open word
        // lines are completed first. A checkpoint only bounds recovery and makes frees durable.
        // On pages of several units, the gathered units are programmed first.
        self.host.flushes += 1;
        let flushed = self.flush_gathers(at_ns, false)?;
        let t = self.pair(at_ns, true)?.max(flushed);
        let done = self.maybe_checkpoint(at_ns)?;
        Ok(t.max(self.pair(done, false)?))
    }

    fn read_log(&mut self, at_ns: Nanos, block: u64, buf: &mut [u8]) -> Result<Nanos> {
        let key0 = self.check_log(block, buf.len())?;
        let mut done = at_ns;
        for (i, chunk) in buf.chunks_exact_mut(LOG_BLOCK_BYTES).enumerate() {
            done = done.max(self.get(at_ns, key0 + i as u64, chunk, Purpose::Log)?);
        }
        Ok(done)
    }

    fn write_log(&mut self, at_ns: Nanos, block: u64, data: &[u8]) -> Result<Nanos> {
        let key0 = self.check_log(block, data.len())?;
        let mut done = at_ns;
        for (i, chunk) in data.chunks_exact(LOG_BLOCK_BYTES).enumerate() {
            let r = self.log_slot;
            done = done.max(self.put(at_ns, key0 + i as u64, LOG, chunk, Purpose::Log, r)?);
        }
        Ok(done)
    }

    fn force_log(&mut self, at_ns: Nanos) -> Result<Nanos> {
        // The log's gathered blocks are programmed (pages of several units), and on MLC/TLC
        // its last page is made safe from the next program (nothing to do in a pSLC region).
        let flushed = self.flush_gathers(at_ns, true)?;
        Ok(self.pair_slot(at_ns, self.log_slot)?.max(flushed))
    }

    /// Dead log blocks become invalid flash pages at once, with no flash operation, so GC never
    /// copies them (the NoFTL paper's "redundant functionality": the engine knows what is dead). Unlike
    /// page frees this needs no liveness checkpoint: a released block that comes back after a
    /// power cut is stale to the log reader (log.rs invariants 4 and 6), and the restart releases
    /// it again.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn log_released(&mut self, at_ns: Nanos, block: u64, n: u64) -> Result<Nanos> {
        let key0 = self.check_log(block, (n as usize) * LOG_BLOCK_BYTES)?;
        let t = self.host_cpu(at_ns, HOST_UPDATE_CYCLES * n);
        for key in key0..key0 + n {
            self.discard(key);
            let old = std::mem::replace(&mut self.map[key as usize], UNMAPPED);
            if old != UNMAPPED {
                self.invalidate(Ppn(u64::from(old)));
                self.host.trims += 1; // an invalidation without TRIM, as page frees count
            }
        }
        Ok(t)
    }

    fn read_meta(&mut self, at_ns: Nanos, slot: usize, buf: &mut [u8]) -> Result<Nanos> {
        if slot > 1 || buf.len() != LOG_BLOCK_BYTES {
            return Err(Error::Io(format!(
                "meta slot {slot} with {} bytes (slots 0 and 1, one block)",
                buf.len()
            )));
        }
        self.get(at_ns, slot as u64, buf, Purpose::Meta)
    }

    fn write_meta(&mut self, at_ns: Nanos, slot: usize, data: &[u8]) -> Result<Nanos> {
        if slot > 1 || data.len() != LOG_BLOCK_BYTES {
            return Err(Error::Io(format!(
                "meta slot {slot} with {} bytes (slots 0 and 1, one block)",
                data.len()
            )));
        }
        let done = self.put(at_ns, slot as u64, META, data, Purpose::Meta, 0)?;
        self.pair(done, false)
    }

    fn page_freed(&mut self, at_ns: Nanos, pid: PageId) -> Result<Nanos> {
        let key0 = self.check_pid(pid)?;
        self.last_write[pid as usize] = 0;
        Ok(self.free_keys(at_ns, key0))
    }

    fn retain_allocated(
        &mut self,
        at_ns: Nanos,
        allocated: &dyn Fn(PageId) -> bool,
    ) -> Result<Nanos> {
        let mut t = at_ns;
        for pid in 0..self.lay.db_pages as PageId {
            let key0 = self.lay.db_key0 + u64::from(pid) * self.lay.k;
            if self.map[key0 as usize] != UNMAPPED && !allocated(pid) {
                t = self.free_keys(t, key0);
            }
        }
        self.maybe_checkpoint(t)
    }

    fn device_report(&self) -> Option<FtlReport> {
        let c = sum_counts(&self.spaces);
        // Counted in bytes: a program writes a whole page of units, full or not.
        let programs = self.spaces[0].nand().stats().total(OpKind::Program) * u64::from(self.upp);
        Some(FtlReport {
            name: self.name(),
            host: self.host,
            gc: GcCounts {
                migrations: c.gc_migrations,
                erases: c.gc_erases,
                wl_migrations: c.wl_migrations,
                wl_erases: c.wl_erases,
            },
            waf: if self.host.writes == 0 {
                0.0
            } else {
                programs as f64 / self.host.writes as f64
            },
            mapping_bytes: self.map.len() as u64 * 4,
            cmt_hit_ratio: None,
            translation_reads: 0,
            translation_writes: 0,
            controller_busy_us: self.host_mapping_ps as f64 / 1e6,
            host_cpu_us: self.host_mapping_ps as f64 / 1e6,
            cache_scanned_entries: 0,
            cache_scanned_entries_beyond_l3: 0,
            cache_scan_footprint_bytes_max: 0,
            slc_cache: None,
            multi_plane_programs: c.multi_plane_programs,
        })
    }
    fn nand(&self) -> Option<&Nand> {
        Some(self.spaces[0].nand())
    }
    fn nand_mut(&mut self) -> Option<&mut Nand> {
        Some(self.spaces[0].nand_mut())
    }
    fn into_nand(self: Box<Self>) -> Option<Nand> {
        Some(self.into_nand_raw())
    }
    fn create_region(
        &mut self,
        at_ns: Nanos,
        name: &str,
        options: &[(String, String)],
    ) -> Result<Nanos> {
        NativeStore::create_region(self, at_ns, name, options)
    }
    fn bind_object_region(&mut self, object: ObjectId, region: &str) -> Result<()> {
        self.bind_object(object, region)
    }
}

/// The flash purpose of a stream's gathered writes.
fn purpose_of(stream: u8) -> Purpose {
    if stream == LOG {
        Purpose::Log
    } else {
        Purpose::Host
    }
}

fn sum_counts(spaces: &[FlashSpace]) -> SpaceCounts {
    let mut t = SpaceCounts::default();
    for c in spaces.iter().map(FlashSpace::counts) {
        t.gc_victims += c.gc_victims;
        t.gc_migrations += c.gc_migrations;
        t.gc_erases += c.gc_erases;
        t.wl_migrations += c.wl_migrations;
        t.wl_erases += c.wl_erases;
        t.retired_blocks += c.retired_blocks;
        t.pad_pages += c.pad_pages;
        t.multi_plane_programs += c.multi_plane_programs;
    }
    t
}

/// Pages a region's dies hold for data at its OP: their good blocks less its GC reserve (dies +
/// 2) and its open blocks (every stream on every die), times (1 - OP).
fn usable_pages(
    g: &nand::Geometry,
    bad: &[bool],
    ppb: u64,
    spec: &RegionSpec,
    dies: &[u32],
    cfg: &NativeConfig,
) -> u64 {
    let blocks = (0..g.blocks())
        .filter(|&b| dies.contains(&g.die_of_block(nand::Pbn(b)).0) && !bad[b as usize])
        .count() as u64;
    let overhead = overhead_blocks(cfg.striped(), dies.len() as u64);
    ((1.0 - spec.spare_factor) * (blocks.saturating_sub(overhead) * ppb) as f64) as u64
}

/// Blocks a region on `dies` dies keeps from its data (`usable_pages`): an open block per
/// stream and two more per die, a GC reserve block per die, and two; public so that a caller
/// sizing a region for a MAX_SIZE counts as the store does.
pub fn region_overhead_blocks(dies: u64) -> u64 {
    overhead_blocks(STRIPED, dies)
}

/// `region_overhead_blocks` with the striped streams `striped` (one more open block per die for
/// each index stream).
fn overhead_blocks(striped: u64, dies: u64) -> u64 {
    (u64::from(striped.count_ones()) + 2) * dies + dies + 2
}

/// The most DB units a region may hold: its usable units (less the log's, if it holds the log
/// of `log_blocks` units), capped by MAX_SIZE.
fn region_capacity_pages(
    g: &nand::Geometry,
    bad: &[bool],
    ppb: u64,
    spec: &RegionSpec,
    dies: &[u32],
    log_blocks: u64,
    cfg: &NativeConfig,
) -> u64 {
    let mut usable = usable_pages(g, bad, ppb, spec, dies, cfg);
    if spec.holds_log {
        usable = usable.saturating_sub(log_blocks);
    }
    spec.max_size_bytes
        .map_or(usable, |m| usable.min(m / LOG_BLOCK_BYTES as u64))
}
