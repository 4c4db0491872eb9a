//! Flash space management, written once for every user of the flash: the block-device FTLs
//! (`page`, `dftl`, ...) and the database engine that manages flash itself (NoFTL).
//!
//! Why one module of this size: allocation, GC, wear levelling, bad-block retirement, units and
//! paired-page pins all change the same block table, reverse map and free lists under the
//! invariants below; split apart, each piece would need the others' private state, and the
//! invariants would no longer be checkable in one place (`check`). The same holds for the IAA
//! victim commitment at the end of the file (it changes GC's choice and follows every block
//! leaving `Closed`), which is why it is no child module of its own.
//!
//! A [`FlashSpace`] owns the [`Nand`] and hands out physical pages. Callers name what they store
//! with a `u64` key (a logical page, a translation page, a database page id) and choose a write
//! *stream* per write, so that data of different temperature or kind lands in different blocks.
//! The space keeps, per physical page, the key of the valid data it holds (the reverse map) and
//! per block the count of valid pages; it garbage-collects and wear-levels on its own and reports
//! every page it moved as a [`Move`], so that the caller updates its own forward mapping.
//!
//! Allocation stripes each stream over all dies: consecutive pages of a stream go to consecutive
//! dies in channel-interleaved order (die 0 of channel 0, die 0 of channel 1, ..., die 1 of
//! channel 0, ...), so a burst of writes issued at one virtual time runs on all dies at once. On
//! MLC/TLC blocks the unit of striping is a word line (2 or 3 consecutive pages on one die, as a
//! controller programming whole word lines does), so that a burst leaves at most one word line
//! per stream incomplete (invariant 9's pads).
//! Each stream has one open block per die (per plane of each die on chips that take multi-plane
//! programs, invariant 10). A new block comes from the die's (plane's) free list, least worn
//! first (dynamic wear levelling); a die without free blocks borrows from the others.
//!
//! Garbage collection picks a victim among the closed (full) blocks of every stream with the
//! configured [`GcPolicy`], copies its valid pages to the frontier of the victim's own stream
//! (keeping their OOB, hence their sequence numbers) and erases it. With
//! `SpaceConfig::gc_reads_oob` it first reads the OOB of every page of the victim, as an FTL that
//! keeps page status in the OOB must (`dftl-orig`); the reverse map still decides what moves. Foreground GC runs when a
//! caller's write needs a new block and fewer than `reserve_blocks` free blocks remain; GC's own
//! copies may dip into that reserve, which is sized so that one victim can always be collected.
//! Background GC runs when the caller says it is idle ([`FlashSpace::background_gc`]).
//! Static wear levelling moves the data of the least-worn closed block (cold data) when the
//! erase-count spread passes `wl_threshold`, so that the block re-enters the free pool.
//!
//! Bad blocks: factory and grown bad blocks are never allocated. A program failure retires its
//! block (the write is retried elsewhere; the block's valid pages are moved off it, since bad
//! blocks stay readable); an erase failure retires the block.
//!
//! Invariants (checked by [`FlashSpace::check`] in tests, and by debug assertions):
//! 1. `rmap[p] != NO_KEY` iff page `p` holds the valid copy of some key; `blocks[b].valid` is the
//!    number of such pages in block `b`, and never exceeds `blocks[b].written`.
//! 2. Every good block is in exactly one state: free (erased, in its die's free list), open (the
//!    frontier of one stream on one die), closed (full, a GC candidate) or collecting (a victim
//!    being moved). Bad blocks are in none of these lists and are never programmed or erased;
//!    neither are `Foreign` blocks (dies outside `SpaceConfig::dies`, another region's).
//! 3. Pages of a block are handed out in increasing order, each once per erase (NAND rule).
//! 4. `free_count` is the number of free blocks; a caller's write never takes the last
//!    `reserve_blocks` of them without collecting first; GC and wear levelling may.
//! 5. Every page the space moved is reported as a `Move` (key, from, to) in the order moved;
//!    the caller drains them after each call before it trusts its forward map.
//! 6. Every flash operation is tagged with its purpose: the caller's for its writes and reads,
//!    `Gc` for collection, `WearLevel` for static wear levelling, `Recovery` during restore.
//! 7. Given the same device, config, seed and call sequence, results are identical.
//! 8. With `stamp_incarnation`, every data page programmed in block `b` (caller's write, GC,
//!    wear-levelling or evacuation copy) carries `incarnation(b)` = the block's erase count when
//!    it was opened + 1. Erase counts only grow (the device counts interrupted erases too, and
//!    the space reads them back at `restore`), so a block's incarnations never repeat, across
//!    restarts and across spaces sharing the device (regions): equal stamps mean not erased since.
//! 9. Paired pages (MLC, TLC: `bits` pages share a word line, and a program of an upper or
//!    middle page that is interrupted or fails destroys the pages below it on its word line):
//!    (a) no block is erased (GC, wear levelling) while a copy of its data, or a newer version
//!    of data it held, sits on an unpaired lower page: the only intact copy would then be the
//!    one an upper-page program can destroy. The space *pins* a block when it moves a page from
//!    it to an unpaired lower page (GC, wear levelling), or when a caller invalidates a page of
//!    it right after writing the replacement to one (the caller's last write); a pin names the
//!    word line that must be complete. Before the erase, each pin not yet satisfied by later
//!    programs is satisfied with `Pad` pages on that word line only.
//!    (b) [`FlashSpace::pair_word_lines`] does the same on demand: the callers' durability points
//!    (an FTL's FLUSH and FUA, NoFTL's log force, page sync and master-record write) call it
//!    before they acknowledge, so acknowledged data never sits on an unpaired lower page.
//!    SLC and pSLC blocks have one page per word line; there is nothing to pad. On a device
//!    with power-loss protection no program is ever cut: nothing is pinned or padded.
//! 10. Multi-plane programs (chips whose datasheet has them, `timing.multi_plane_program`, with
//!     two or more planes): the free lists and each stream's open blocks are kept per *lane*, a
//!     plane of a die (without them a lane is a die). A striped stream takes each page from the
//!     lane of its die that is furthest behind (lowest plane on ties) and moves to the next die
//!     when every plane has completed the word line, so the planes advance in step: page k on
//!     plane 0, page k on plane 1, then k + 1, ... [`FlashSpace::write_batch`] programs pages
//!     together only when every lane of the die holds an open block of that very die and plane
//!     standing at the same page (then page k of each, one program, one array time); taking
//!     those pages opens no block, so no collection runs between handing them out and
//!     programming them. Any other state (a plane behind after a retired block or a restore, a
//!     block borrowed from another plane or die) is written plane by plane, in each block's page
//!     order, until the planes meet again: correct by construction. `check` verifies that every
//!     free block is in its own lane's list and every open block sits in one lane of its stream.
//!
//! 11. Program failures on paired pages (MLC, TLC): a program of an upper or middle page that
//!     fails on the media tears the pages below it on its word line, which may hold acknowledged
//!     or moved data. The space keeps a copy of every page of a word line whose last page is not
//!     programmed yet (`lower_pages`, the controller's buffer); the failed block is retired and
//!     its valid pages moved off as after any failed program, a torn one from its copy. So a
//!     media failure loses nothing that the space holds valid. (Reads of such a page by the
//!     caller are served from the copy too, until it is moved.) The copies are RAM, so the
//!     move is made durable at once: the word lines it wrote to are completed with pads
//!     (`evacuate`), and a victim pinned to a retired block is not erased before that block is
//!     evacuated (`satisfy_pins`). A power cut after the failure then finds every valid page
//!     intact on flash; one that falls inside the move itself can still take a torn page's only
//!     copy, as on a controller without power-loss protection.
//!
//! Units: on flash pages larger than 4 KiB ([`UNIT_BYTES`]) a page holds `units_per_page`
//! units of 4 KiB, each a key of its own with its own OOB record (record `i` at OOB bytes
//! `32 i..32 i + 32`; an erased record is an empty slot). The space's locations (the `Ppn`
//! values it returns, takes, reports in moves and keeps in its reverse map) are then *unit
//! locations*, `flash page x units_per_page + slot`; with 4 KiB pages a location is the flash
//! page. Valid counts, GC victim choice and moves are per unit: GC packs the valid units of a
//! victim densely into new pages (a partly filled last page per victim, so that nothing of the
//! victim lives only in RAM when it is erased). Callers write whole pages of units
//! ([`FlashSpace::write_units`]); a single-unit write leaves the other slots empty.
//!
//! Cell mode: a space erases its blocks into one mode, the device's native one or, with
//! `SpaceConfig::cell_mode = Some(Pslc)` on MLC/TLC chips, pSLC (a NoFTL region's mode). Blocks
//! found erased in another mode are erased again (format, restore); a block holding data in
//! another mode cannot be taken over and is refused at restore.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use nand::{CellMode, DieId, Geometry, Nand, NandError, Nanos, Pbn, Ppn, Purpose};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::error::FtlError;
use crate::lower_pages::{self, LowerPageCopies};
use crate::oob::{check_oob_size, OobRecord, PageKind, OOB_RECORD_BYTES};
// The unit arithmetic sits below `oob` (`units.rs`); these are its old paths, which other
// crates name.
pub use crate::units::{unit_bytes, units_per_page, UNIT_BYTES};

/// Reverse-map value of a page that holds no valid data.
pub const NO_KEY: u64 = u64::MAX;

/// Lanes per die of a device (invariant 10): its planes when its chips take multi-plane
/// programs (`TimingConfig::multi_plane_program`), else 1.
pub fn lanes_per_die(dev: &nand::DeviceConfig) -> u32 {
    let planes = dev.geometry.planes_per_die;
    if dev.timing.multi_plane_program && planes > 1 {
        planes
    } else {
        1
    }
}

const NIL: u32 = u32::MAX;

/// How garbage collection chooses its victim among the closed blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum GcPolicy {
    /// Fewest valid pages (ties: the block that reached that count first).
    #[default]
    Greedy,
    /// Largest (1 - u) / 2u * age (Rosenblum & Ousterhout, LFS, SOSP 1991), u the valid
    /// fraction, age counted in blocks closed since this one closed.
    CostBenefit,
    /// The block closed longest ago (a circular log).
    Fifo,
    /// A uniformly random closed block, from the seeded generator.
    Random,
}

impl GcPolicy {
    pub fn name(self) -> &'static str {
        match self {
            GcPolicy::Greedy => "greedy",
            GcPolicy::CostBenefit => "cost-benefit",
            GcPolicy::Fifo => "fifo",
            GcPolicy::Random => "random",
        }
    }
}

impl std::str::FromStr for GcPolicy {
    type Err = FtlError;
    fn from_str(s: &str) -> Result<Self, FtlError> {
        match s.to_ascii_lowercase().as_str() {
            "greedy" => Ok(GcPolicy::Greedy),
            "cost-benefit" | "costbenefit" | "cb" => Ok(GcPolicy::CostBenefit),
            "fifo" => Ok(GcPolicy::Fifo),
            "random" => Ok(GcPolicy::Random),
            other => Err(FtlError::Config(format!(
                "unknown GC policy '{other}' (greedy, cost-benefit, fifo, random)"
            ))),
        }
    }
}

/// Knobs of a [`FlashSpace`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpaceConfig {
    /// Number of write frontiers (streams); callers number them `0..streams`.
    pub streams: u8,
    pub gc: GcPolicy,
    /// Seed of the random victim policy.
    pub seed: u64,
    /// Free blocks held back for GC; 0 picks the smallest safe value, dies + 2 (collecting one
    /// victim may open a new block on every die of its stream before the victim is erased).
    pub reserve_blocks: u32,
    /// Background GC collects until this many blocks are free; 0 means twice the reserve.
    pub background_free_blocks: u32,
    /// Static wear levelling starts when max - min erase count exceeds this; 0 turns it off.
    pub wl_threshold: u32,
    /// Bit `s` set: stream `s` stripes page by page over all dies. Clear: the stream fills one
    /// block at a time (moving to the next die per block), for small metadata streams whose
    /// writes come one at a time and that should not hold an open block on every die.
    pub striped: u64,
    /// The dies this space may use (NoFTL regions: each region is a space over its own dies);
    /// empty: every die. Blocks of other dies are `Foreign`: never erased, allocated or
    /// collected, so spaces over disjoint die sets can share one device (see `lend_nand`).
    #[serde(default)]
    pub dies: Vec<u32>,
    /// Stamp every data page programmed in a block with the block's incarnation (oob.rs: `aux`
    /// bits 8..64; the caller's bits 0..8 are kept), copies included, so that a map checkpoint
    /// (journal.rs) can tell from page 0 alone whether a block was erased since.
    #[serde(default)]
    pub stamp_incarnation: bool,
    /// Before moving a GC victim's valid pages, read the OOB of every page the victim has
    /// programmed (an OOB-only read each, at the device's OOB read latency), as an FTL that
    /// keeps page validity in the OOB must (`dftl-orig`); the reverse map still decides what
    /// moves, so a read that fails on the media changes nothing.
    #[serde(default)]
    pub gc_reads_oob: bool,
    /// The mode the space erases its blocks into: `None` the chip's native mode, or pSLC on an
    /// MLC/TLC chip (refused on SLC chips and for any other mode).
    #[serde(default)]
    pub cell_mode: Option<CellMode>,
    /// The blocks of each plane this space uses, by index within the plane, `[lo, hi)`; `None`:
    /// all. The others are `Foreign`, as with `dies`: the page FTL's pSLC write cache runs a
    /// space over the first blocks of every plane and its native space over the rest.
    #[serde(default)]
    pub plane_blocks: Option<(u32, u32)>,
}

/// Whether block `b` of `geo` lies in the plane-block range `range` (`SpaceConfig::plane_blocks`).
#[inline]
pub fn in_plane_blocks(geo: &Geometry, b: u32, range: Option<(u32, u32)>) -> bool {
    range.is_none_or(|(lo, hi)| {
        let i = (b % geo.blocks_per_die()) % geo.blocks_per_plane;
        (lo..hi).contains(&i)
    })
}

impl Default for SpaceConfig {
    fn default() -> Self {
        SpaceConfig {
            streams: 1,
            gc: GcPolicy::Greedy,
            seed: 1,
            reserve_blocks: 0,
            background_free_blocks: 0,
            wl_threshold: 0,
            striped: u64::MAX,
            dies: Vec::new(),
            stamp_incarnation: false,
            gc_reads_oob: false,
            cell_mode: None,
            plane_blocks: None,
        }
    }
}

/// A page moved by GC, wear levelling or bad-block retirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    pub key: u64,
    pub stream: u8,
    pub from: Ppn,
    pub to: Ppn,
    pub purpose: Purpose,
}

/// A valid page found by a recovery scan, handed to [`FlashSpace::restore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LivePage {
    pub ppn: Ppn,
    pub key: u64,
    pub stream: u8,
    pub seq: u64,
}

/// What the space did on its own behalf.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpaceCounts {
    pub gc_victims: u64,
    pub gc_migrations: u64,
    pub gc_erases: u64,
    pub wl_migrations: u64,
    pub wl_erases: u64,
    pub retired_blocks: u64,
    /// Free blocks taken into use (a stream's new open block, a wear-levelling destination).
    pub blocks_opened: u64,
    /// OOB-only reads of GC victims' pages (`SpaceConfig::gc_reads_oob`).
    pub gc_oob_reads: u64,
    /// Pad pages programmed to complete word lines (invariant 9): the cost of paired-page
    /// safety on MLC/TLC.
    #[serde(default)]
    pub pad_pages: u64,
    /// Multi-plane programs issued (one page on each of several planes of a die, invariant 10).
    #[serde(default)]
    pub multi_plane_programs: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockUse {
    Free,
    Open,
    Closed,
    Collecting,
    Bad,
    /// On a die outside the space's die set (`SpaceConfig::dies`).
    Foreign,
}

#[derive(Clone, Copy, Debug)]
struct Block {
    usage: BlockUse,
    stream: u8,
    /// Pages handed out since the last erase.
    written: u32,
    valid: u32,
    erase_count: u32,
    /// Order in which the block was closed (FIFO age, cost-benefit age).
    close_stamp: u64,
    /// Greedy bucket list links (closed blocks only).
    prev: u32,
    next: u32,
    /// Index in `closed` (closed blocks only).
    closed_pos: u32,
}

#[derive(Clone, Debug)]
struct Frontier {
    open: Vec<u32>,
    cursor: usize,
}

/// The flash, its blocks and their contents' validity. See the module documentation.
#[derive(Debug)]
pub struct FlashSpace {
    nand: Nand,
    geo: Geometry,
    ppb: u32,
    mode: CellMode,
    /// Pages per word line in `mode` (1 SLC/pSLC, 2 MLC, 3 TLC).
    wl_pages: u32,
    /// The device has power-loss protection (`DeviceConfig::plp`): no program is ever cut, so
    /// nothing needs pairing (invariant 9 holds with no pins and no pads).
    protected: bool,
    /// Lanes per die: the planes of a die when the chips take multi-plane programs
    /// (`TimingConfig::multi_plane_program`, invariant 10), else 1. A stream's open blocks and
    /// the free lists are kept per lane (lane = die x lanes + plane).
    lpd: u32,
    /// A multi-plane program's pages and OOB, one page per plane.
    mp_data: Vec<u8>,
    mp_oob: Vec<u8>,
    /// Units per flash page, and their bytes (module documentation, "Units").
    upp: u32,
    unit_bytes: usize,
    /// GC's packing buffer: the page being assembled from a victim's valid units, their OOB
    /// records, and (key, old location) of each.
    pack_data: Vec<u8>,
    pack_oob: Vec<u8>,
    pack: Vec<(u64, Ppn)>,
    /// A caller's page of several units, assembled by `write_units`.
    host_page: Vec<u8>,
    cfg: SpaceConfig,
    reserve: u32,
    bg_target: u32,
    blocks: Vec<Block>,
    rmap: Vec<u64>,
    free: Vec<BinaryHeap<Reverse<(u32, u32)>>>,
    free_count: u32,
    good_blocks: u32,
    die_order: Vec<u32>,
    frontiers: Vec<Frontier>,
    bucket_head: Vec<u32>,
    bucket_tail: Vec<u32>,
    closed: Vec<u32>,
    fifo: VecDeque<(u32, u64)>,
    close_counter: u64,
    rng: Xoshiro256PlusPlus,
    moves: Vec<Move>,
    seq: u64,
    counts: SpaceCounts,
    max_erase: u32,
    erases_since_wl_check: u32,
    to_evacuate: Vec<u32>,
    write_oob: Vec<u8>,
    mig_data: Vec<u8>,
    mig_oob: Vec<u8>,
    /// The data of a pad page (erased bytes) and its OOB record.
    pad_data: Vec<u8>,
    pad_oob: Vec<u8>,
    /// Per block, the word lines that must be complete before it is erased (invariant 9a);
    /// empty on SLC/pSLC spaces.
    pins: Vec<Vec<Pin>>,
    /// The word line of the caller's last write, when that write landed on an unpaired lower
    /// page: the page it invalidates next (the copy it replaced) pins its block.
    last_unpaired: Option<Pin>,
    /// Insert Address Assist: the GC victims committed to ahead of time ("Victim commitment" below).
    victims: VictimCommit,
    /// The copies of the pages of incomplete word lines (invariant 11, `lower_pages`).
    lower: LowerPageCopies,
}

/// Re-stamps the data record in `oob` (a page being copied) with its new block's incarnation
/// (invariant 8); other kinds and damaged records are left alone.
fn restamp(enabled: bool, incarnation: u64, oob: &mut [u8]) {
    if !enabled {
        return;
    }
    if let Some(r) = OobRecord::decode(oob) {
        if r.kind == PageKind::Data {
            r.with_incarnation(incarnation).encode_into(oob);
        }
    }
}

/// Erases between two checks of the erase-count spread (a scan of the closed blocks).
const WL_CHECK_EVERY_ERASES: u32 = 16;

/// A word line that must be complete before a pinned block may be erased (invariant 9a): block
/// `block`, while still in the incarnation with `erase_count`, must have `need_written` pages
/// programmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pin {
    block: u32,
    erase_count: u32,
    need_written: u32,
}

impl FlashSpace {
    /// Takes over a device and erases every good block that is not erased yet (a fresh device
    /// needs no erase). Returns the space and the time the formatting finished.
    pub fn format(
        nand: Nand,
        cfg: SpaceConfig,
        at_ns: Nanos,
    ) -> Result<(FlashSpace, Nanos), FtlError> {
        Self::format_or_give_back(nand, cfg, at_ns).map_err(|(e, _)| e)
    }

    /// `format`, but a failure (a power cut while erasing) gives the device back, for callers
    /// that share it (NoFTL regions format their dies on the store's one device).
    pub fn format_or_give_back(
        nand: Nand,
        cfg: SpaceConfig,
        at_ns: Nanos,
    ) -> Result<(FlashSpace, Nanos), (FtlError, Box<Nand>)> {
        if let Err(e) = Self::check_config(nand.config(), &cfg) {
            return Err((e, Box::new(nand)));
        }
        let mut s = Self::empty_checked(nand, cfg);
        match s.erase_all(at_ns) {
            Ok(t) => Ok((s, t)),
            Err(e) => Err((e, Box::new(s.nand))),
        }
    }

    fn erase_all(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        let s = self;
        let mut t = at_ns;
        for b in 0..s.geo.blocks() {
            let pbn = Pbn(b);
            if s.blocks[b as usize].usage == BlockUse::Foreign {
                continue;
            }
            if s.nand.is_bad(pbn) {
                s.blocks[b as usize].usage = BlockUse::Bad;
                continue;
            }
            let info = s.nand.block_info(pbn)?;
            s.blocks[b as usize].erase_count = info.erase_count;
            s.max_erase = s.max_erase.max(info.erase_count);
            if info.next_page > 0
                || info.state == nand::BlockState::NeedsErase
                || info.mode != s.mode
            {
                t = t.max(s.erase_to_free(at_ns, pbn, Purpose::Meta)?);
            } else {
                s.push_free(b);
            }
        }
        s.finish_setup()?;
        Ok(t)
    }

    /// Takes over a device that holds data, given the valid pages a recovery scan found (see
    /// `recovery.rs`). Blocks with programmed pages become closed GC candidates (their erased
    /// tail is not reused until they are collected), erased blocks become free, blocks a power
    /// cut left half-erased are erased, and valid pages on bad blocks are moved off them (the
    /// moves are reported as usual). `next_seq` is the first sequence number to issue.
    pub fn restore(
        nand: Nand,
        cfg: SpaceConfig,
        at_ns: Nanos,
        live: &[LivePage],
        next_seq: u64,
    ) -> Result<(FlashSpace, Nanos), FtlError> {
        Self::restore_or_give_back(nand, cfg, at_ns, live, next_seq).map_err(|(e, _)| e)
    }

    /// `restore`, but a failure (a power cut during its erases of half-erased blocks or its moves
    /// off bad blocks, or live pages that do not fit the configuration) gives the device back, so
    /// that a caller can power-cycle it and recover again (the crash tests' second cut).
    pub fn restore_or_give_back(
        nand: Nand,
        cfg: SpaceConfig,
        at_ns: Nanos,
        live: &[LivePage],
        next_seq: u64,
    ) -> Result<(FlashSpace, Nanos), (FtlError, Box<Nand>)> {
        if let Err(e) = Self::check_config(nand.config(), &cfg) {
            return Err((e, Box::new(nand)));
        }
        let mut s = Self::empty_checked(nand, cfg);
        s.seq = next_seq;
        match s.restore_blocks(at_ns, live) {
            Ok(t) => Ok((s, t)),
            Err(e) => Err((e, Box::new(s.nand))),
        }
    }

    fn restore_blocks(&mut self, at_ns: Nanos, live: &[LivePage]) -> Result<Nanos, FtlError> {
        let s = self;
        let mut t = at_ns;
        let mut stamps = vec![0u64; s.geo.blocks() as usize];
        for p in live {
            if p.ppn.0 >= s.rmap.len() as u64 {
                return Err(FtlError::Recovery(format!(
                    "location {:?} is beyond the device",
                    p.ppn
                )));
            }
            let b = s.geo.block_of(Ppn(p.ppn.0 / u64::from(s.upp))).0 as usize;
            if p.stream >= s.cfg.streams {
                return Err(FtlError::Recovery(format!(
                    "page {:?} claims stream {} of {}",
                    p.ppn, p.stream, s.cfg.streams
                )));
            }
            if s.rmap[p.ppn.0 as usize] != NO_KEY {
                return Err(FtlError::Recovery(format!(
                    "page {:?} claimed twice",
                    p.ppn
                )));
            }
            s.rmap[p.ppn.0 as usize] = p.key;
            let blk = &mut s.blocks[b];
            blk.valid += 1;
            blk.stream = p.stream;
            stamps[b] = stamps[b].max(p.seq);
        }
        let mut used: Vec<(u64, u32)> = Vec::new();
        for b in 0..s.geo.blocks() {
            let pbn = Pbn(b);
            if s.blocks[b as usize].usage == BlockUse::Foreign {
                if s.blocks[b as usize].valid > 0 {
                    return Err(FtlError::Recovery(format!(
                        "block {b} holds live pages but lies outside the space's dies"
                    )));
                }
                continue;
            }
            let info = s.nand.block_info(pbn)?;
            s.blocks[b as usize].erase_count = info.erase_count;
            s.max_erase = s.max_erase.max(info.erase_count);
            if s.nand.is_bad(pbn) {
                s.blocks[b as usize].usage = BlockUse::Bad;
                s.blocks[b as usize].written = info.next_page;
                if s.blocks[b as usize].valid > 0 {
                    s.to_evacuate.push(b);
                }
                continue;
            }
            if info.mode != s.mode && s.blocks[b as usize].valid > 0 {
                return Err(FtlError::Recovery(format!(
                    "block {b} holds live pages in {} mode; the space runs in {}",
                    info.mode.name(),
                    s.mode.name()
                )));
            }
            if info.state == nand::BlockState::NeedsErase || info.mode != s.mode {
                debug_assert_eq!(s.blocks[b as usize].valid, 0);
                t = t.max(s.erase_to_free(at_ns, pbn, Purpose::Recovery)?);
            } else if info.next_page == 0 {
                s.push_free(b);
            } else {
                s.blocks[b as usize].written = info.next_page;
                used.push((stamps[b as usize], b));
            }
        }
        // Oldest first, so that FIFO collection keeps the order the data was written in. A
        // partly written block with valid data becomes its stream's frontier on its die again
        // (its next page is erased: a torn page counts as written), so that the space the cut
        // left behind is not lost; for unstriped streams only one, where the cursor then points.
        used.sort_unstable();
        for (_, b) in used {
            let blk = s.blocks[b as usize];
            let die = s.geo.die_of_block(Pbn(b)).0 as usize;
            let st = blk.stream as usize;
            let striped = s.cfg.striped & (1u64 << st.min(63)) != 0;
            // An unstriped stream uses its die's first lane only (`next_lane`).
            let lane = if striped {
                s.lane_of_block(b)
            } else {
                die * s.lpd as usize
            };
            let free_frontier = if striped {
                s.frontiers[st].open[lane] == NIL
            } else {
                s.frontiers[st].open.iter().all(|&o| o == NIL)
            };
            if blk.valid > 0 && blk.written < s.ppb && free_frontier {
                s.blocks[b as usize].usage = BlockUse::Open;
                s.frontiers[st].open[lane] = b;
                if !striped {
                    s.frontiers[st].cursor = s
                        .die_order
                        .iter()
                        .position(|&d| d as usize == die)
                        .unwrap_or(0);
                }
            } else {
                s.close_block(b);
            }
        }
        s.finish_setup()?;
        s.evacuate(t)
    }

    /// What a space refuses, checked before the device is handed over.
    fn check_config(dev: &nand::DeviceConfig, cfg: &SpaceConfig) -> Result<(), FtlError> {
        let geo = &dev.geometry;
        check_oob_size(geo)?;
        let upp = units_per_page(geo) as usize;
        if upp > 1 && !(geo.page_size_bytes as usize).is_multiple_of(UNIT_BYTES) {
            return Err(FtlError::Config(format!(
                "{}-byte flash pages are no whole number of {UNIT_BYTES}-byte units",
                geo.page_size_bytes
            )));
        }
        if upp * OOB_RECORD_BYTES > geo.oob_size_bytes as usize {
            return Err(FtlError::Config(format!(
                "{}-byte pages hold {upp} units of {UNIT_BYTES} bytes, whose records need {} OOB bytes; the page has {}",
                geo.page_size_bytes,
                upp * OOB_RECORD_BYTES,
                geo.oob_size_bytes
            )));
        }
        if let Some(mode) = cfg.cell_mode {
            if mode != CellMode::Pslc || !dev.allows_mode(mode) {
                return Err(FtlError::Config(format!(
                    "a flash space runs in its chips' native mode ({}) or in pSLC on MLC/TLC chips, not in {}",
                    dev.cell.native.name(),
                    mode.name()
                )));
            }
        }
        if cfg.streams == 0 {
            return Err(FtlError::Config(
                "a flash space needs at least one stream".into(),
            ));
        }
        if let Some((lo, hi)) = cfg.plane_blocks {
            if lo >= hi || hi > geo.blocks_per_plane {
                return Err(FtlError::Config(format!(
                    "plane blocks {lo}..{hi} are no range within a plane's {} blocks",
                    geo.blocks_per_plane
                )));
            }
        }
        if let Some(d) = cfg.dies.iter().find(|&&d| d >= geo.dies()) {
            return Err(FtlError::Config(format!(
                "die {d} is beyond the device's {} dies",
                geo.dies()
            )));
        }
        Ok(())
    }

    fn empty_checked(nand: Nand, cfg: SpaceConfig) -> FlashSpace {
        let geo = nand.geometry().clone();
        let oob_len = geo.oob_size_bytes as usize;
        let mode = cfg.cell_mode.unwrap_or(nand.config().cell.native);
        let ppb = nand.config().pages_in_mode(mode);
        debug_assert!(
            ppb.is_multiple_of(mode.bits_per_cell()),
            "blocks hold whole word lines"
        );
        let dies = geo.dies();
        // Channel-interleaved die order: consecutive pages go to different channels first.
        let per_channel = geo.dies_per_channel();
        let mut die_order: Vec<u32> = (0..dies)
            .map(|k| (k % geo.channels) * per_channel + k / geo.channels)
            .collect();
        if !cfg.dies.is_empty() {
            die_order.retain(|d| cfg.dies.contains(d));
        }
        let own_dies = die_order.len() as u32;
        let lpd = lanes_per_die(nand.config());
        let reserve = if cfg.reserve_blocks == 0 {
            own_dies * lpd + 2
        } else {
            cfg.reserve_blocks
        };
        let bg_target = if cfg.background_free_blocks == 0 {
            2 * reserve
        } else {
            cfg.background_free_blocks.max(reserve)
        };
        let block = Block {
            usage: BlockUse::Free,
            stream: 0,
            written: 0,
            valid: 0,
            erase_count: 0,
            close_stamp: 0,
            prev: NIL,
            next: NIL,
            closed_pos: NIL,
        };
        FlashSpace {
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ 0x6C5F_5EED),
            frontiers: (0..cfg.streams)
                .map(|_| Frontier {
                    open: vec![NIL; (dies * lpd) as usize],
                    cursor: 0,
                })
                .collect(),
            blocks: (0..geo.blocks())
                .map(|b| {
                    let own = (cfg.dies.is_empty()
                        || cfg.dies.contains(&geo.die_of_block(Pbn(b)).0))
                        && in_plane_blocks(&geo, b, cfg.plane_blocks);
                    Block {
                        usage: if own {
                            BlockUse::Free
                        } else {
                            BlockUse::Foreign
                        },
                        ..block
                    }
                })
                .collect(),
            rmap: vec![NO_KEY; (geo.pages() * u64::from(units_per_page(&geo))) as usize],
            free: (0..dies * lpd).map(|_| BinaryHeap::new()).collect(),
            free_count: 0,
            good_blocks: 0,
            die_order,
            bucket_head: vec![NIL; (ppb * units_per_page(&geo)) as usize + 1],
            bucket_tail: vec![NIL; (ppb * units_per_page(&geo)) as usize + 1],
            closed: Vec::new(),
            fifo: VecDeque::new(),
            close_counter: 0,
            moves: Vec::new(),
            seq: 1,
            counts: SpaceCounts::default(),
            max_erase: 0,
            erases_since_wl_check: 0,
            to_evacuate: Vec::new(),
            write_oob: vec![0xFF; oob_len],
            mig_data: vec![0; geo.page_size_bytes as usize],
            mig_oob: vec![0xFF; oob_len],
            pad_data: vec![0xFF; geo.page_size_bytes as usize],
            pad_oob: vec![0xFF; oob_len],
            wl_pages: mode.bits_per_cell(),
            lpd,
            mp_data: if lpd > 1 {
                vec![0xFF; (lpd * geo.page_size_bytes) as usize]
            } else {
                Vec::new()
            },
            mp_oob: if lpd > 1 {
                vec![0xFF; lpd as usize * oob_len]
            } else {
                Vec::new()
            },
            protected: nand.config().plp,
            upp: units_per_page(&geo),
            unit_bytes: unit_bytes(&geo),
            pack_data: vec![0xFF; geo.page_size_bytes as usize],
            pack_oob: vec![0xFF; oob_len],
            pack: Vec::new(),
            host_page: if units_per_page(&geo) > 1 {
                vec![0xFF; geo.page_size_bytes as usize]
            } else {
                Vec::new()
            },
            pins: if mode.bits_per_cell() > 1 {
                vec![Vec::new(); geo.blocks() as usize]
            } else {
                Vec::new()
            },
            last_unpaired: None,
            victims: VictimCommit::default(),
            lower: LowerPageCopies::new(mode.bits_per_cell(), geo.pages_per_block),
            reserve,
            bg_target,
            mode,
            ppb,
            geo,
            cfg,
            nand,
        }
    }

    fn finish_setup(&mut self) -> Result<(), FtlError> {
        self.good_blocks = self
            .blocks
            .iter()
            .filter(|b| !matches!(b.usage, BlockUse::Bad | BlockUse::Foreign))
            .count() as u32;
        let streams_open = u32::from(self.cfg.streams) * self.die_order.len() as u32 * self.lpd;
        if self.good_blocks <= self.reserve + streams_open {
            return Err(FtlError::Config(format!(
                "{} good blocks cannot hold a GC reserve of {} blocks plus {} open blocks",
                self.good_blocks, self.reserve, streams_open
            )));
        }
        Ok(())
    }

    // ----- accessors -------------------------------------------------------------------------

    pub fn nand(&self) -> &Nand {
        &self.nand
    }
    pub fn nand_mut(&mut self) -> &mut Nand {
        &mut self.nand
    }
    pub fn into_nand(self) -> Nand {
        self.nand
    }
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }
    pub fn config(&self) -> &SpaceConfig {
        &self.cfg
    }
    /// Usable pages per block (in the blocks' cell mode).
    pub fn pages_per_block(&self) -> u32 {
        self.ppb
    }
    pub fn counts(&self) -> SpaceCounts {
        self.counts
    }
    pub fn free_blocks(&self) -> u32 {
        self.free_count
    }
    pub fn reserve_blocks(&self) -> u32 {
        self.reserve
    }
    pub fn good_blocks(&self) -> u32 {
        self.good_blocks
    }
    /// Physical pages (units, on pages of several units) not held back as GC reserve: `T` of
    /// the write-amplification models.
    pub fn usable_pages(&self) -> u64 {
        u64::from(self.good_blocks.saturating_sub(self.reserve))
            * u64::from(self.ppb)
            * u64::from(self.upp)
    }
    /// Units per flash page (module documentation, "Units").
    pub fn units_per_page(&self) -> u32 {
        self.upp
    }
    /// Bytes of a unit: what `write` and `read` take.
    pub fn unit_bytes(&self) -> usize {
        self.unit_bytes
    }
    /// The flash page of location `loc`.
    #[inline]
    pub fn page_of(&self, loc: Ppn) -> Ppn {
        Ppn(loc.0 / u64::from(self.upp))
    }
    /// The key whose valid copy page `ppn` holds, if any.
    pub fn key_at(&self, ppn: Ppn) -> Option<u64> {
        self.rmap
            .get(ppn.0 as usize)
            .copied()
            .filter(|&k| k != NO_KEY)
    }
    pub fn valid_pages(&self, pbn: Pbn) -> u32 {
        self.blocks[pbn.0 as usize].valid
    }
    pub fn block_use(&self, pbn: Pbn) -> BlockUse {
        self.blocks[pbn.0 as usize].usage
    }
    /// The incarnation stamped into block `b`'s pages (invariant 8), whatever its state.
    fn stamp_of(&self, b: u32) -> u64 {
        u64::from(self.blocks[b as usize].erase_count) + 1
    }
    /// What a map checkpoint keeps of block `pbn`: its incarnation (0 unless it is open,
    /// closed or being collected: a free, bad or foreign block promises nothing), the pages
    /// handed out in it since its erase, its stream, and whether it is retired (bad: never
    /// erased nor programmed again, so recovery must not take its stale pages for new ones;
    /// journal.rs `BlockAtCheckpoint::retired`).
    pub fn block_checkpoint(&self, pbn: Pbn) -> (u64, u32, u8, bool) {
        let blk = &self.blocks[pbn.0 as usize];
        match blk.usage {
            BlockUse::Open | BlockUse::Closed | BlockUse::Collecting => {
                (self.stamp_of(pbn.0), blk.written, blk.stream, false)
            }
            BlockUse::Bad => (0, blk.written, blk.stream, true),
            BlockUse::Free | BlockUse::Foreign => (0, 0, 0, false),
        }
    }
    /// The next sequence number that `alloc_seq` will return.
    pub fn peek_seq(&self) -> u64 {
        self.seq
    }
    /// Issues a sequence number (oob.rs invariant 2: one per logical write).
    #[inline]
    pub fn alloc_seq(&mut self) -> u64 {
        self.alloc_seqs(1)
    }
    /// Issues `n` consecutive sequence numbers; returns the first.
    #[inline]
    pub fn alloc_seqs(&mut self, n: u64) -> u64 {
        let s = self.seq;
        self.seq += n;
        s
    }

    /// Hands the moves made since the last call to the caller (swapping buffers: no allocation
    /// once both have grown).
    pub fn take_moves(&mut self, out: &mut Vec<Move>) {
        out.clear();
        std::mem::swap(&mut self.moves, out);
    }
    pub fn has_moves(&self) -> bool {
        !self.moves.is_empty()
    }

    // ----- caller operations -----------------------------------------------------------------

    /// Writes one unit of `stream` (a whole page on 4 KiB pages; else a page with this unit in
    /// slot 0 and the other slots empty) whose OOB record is `rec` (the caller sets key, kind and
    /// seq). Returns its location and the program's completion time. Invariant 4: may collect
    /// first.
    pub fn write(
        &mut self,
        at_ns: Nanos,
        stream: u8,
        rec: &OobRecord,
        data: &[u8],
        purpose: Purpose,
    ) -> Result<(Ppn, Nanos), FtlError> {
        self.write_units(at_ns, stream, &[(*rec, data)], purpose)
    }

    /// Writes up to `units_per_page` units into one flash page of `stream`: unit `i` (its record
    /// and `unit_bytes` of data) in slot `i`, later slots empty. Returns the location of unit 0
    /// (unit `i` is at that location + `i`) and the program's completion time. Invariant 4: may
    /// collect first.
    pub fn write_units(
        &mut self,
        at_ns: Nanos,
        stream: u8,
        units: &[(OobRecord, &[u8])],
        purpose: Purpose,
    ) -> Result<(Ppn, Nanos), FtlError> {
        self.check_units(stream, units)?;
        // One unit per page: program the caller's buffer itself (the hot path of 4 KiB pages).
        // Else the page is assembled in its own buffer: GC (which `alloc_page` may run) packs
        // its copies in `pack_data`.
        let whole = self.upp == 1;
        if !whole {
            self.host_page.fill(0xFF);
            for (i, (_, d)) in units.iter().enumerate() {
                self.host_page[i * self.unit_bytes..(i + 1) * self.unit_bytes].copy_from_slice(d);
            }
        }
        loop {
            let (ppn, t) = self.alloc_page(at_ns, stream, false)?;
            let b = self.geo.block_of(ppn).0;
            self.write_oob.fill(0xFF);
            for (i, (rec, _)) in units.iter().enumerate() {
                let r = if self.cfg.stamp_incarnation && rec.kind == PageKind::Data {
                    rec.with_incarnation(self.stamp_of(b))
                } else {
                    *rec
                };
                r.encode_into(
                    &mut self.write_oob[i * OOB_RECORD_BYTES..(i + 1) * OOB_RECORD_BYTES],
                );
            }
            let data: &[u8] = if whole { units[0].1 } else { &self.host_page };
            match self.nand.program(t, ppn, data, &self.write_oob, purpose) {
                Ok(done) => {
                    self.lower.programmed(ppn, data, &self.write_oob);
                    let first = Ppn(ppn.0 * u64::from(self.upp));
                    for (i, (rec, _)) in units.iter().enumerate() {
                        self.note_written(Ppn(first.0 + i as u64), rec.key);
                    }
                    self.last_unpaired = self.unpaired_word_line(b);
                    let mut end = done.done_ns;
                    if !self.to_evacuate.is_empty() {
                        end = end.max(self.evacuate(t)?);
                    }
                    return Ok((first, end));
                }
                Err(NandError::ProgramFailed(_)) => self.retire(self.geo.block_of(ppn)),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Planes a multi-plane program spans on this space's chips (invariant 10): the planes
    /// per die when the chips take multi-plane programs, else 1. Callers that can gather this
    /// many pages per call to [`FlashSpace::write_batch`] let the space program them together.
    pub fn multi_plane_width(&self) -> u32 {
        self.lpd
    }

    /// Writes several pages of `stream`, each as [`FlashSpace::write_units`] would (page `i`'s
    /// units in its slots). Where the stream's open blocks on the die it stripes to next stand
    /// at the same page in every plane (invariant 10), consecutive pages go there as one
    /// multi-plane program (one array time instead of one per plane); otherwise page by page.
    /// Returns the location of each page's unit 0 and when the last program completes.
    pub fn write_batch(
        &mut self,
        at_ns: Nanos,
        stream: u8,
        pages: &[&[(OobRecord, &[u8])]],
        purpose: Purpose,
    ) -> Result<(Vec<Ppn>, Nanos), FtlError> {
        let mut locs = Vec::with_capacity(pages.len());
        let mut end = at_ns;
        let mut i = 0;
        while i < pages.len() {
            let n = self.aligned_planes(stream, pages.len() - i);
            if n < 2 {
                let (loc, done) = self.write_units(at_ns, stream, pages[i], purpose)?;
                locs.push(loc);
                end = end.max(done);
                i += 1;
                continue;
            }
            end = end.max(self.program_planes(
                at_ns,
                stream,
                &pages[i..i + n],
                purpose,
                &mut locs,
            )?);
            i += n;
        }
        Ok((locs, end))
    }

    /// How many of the next `want` pages of `stream` can go out as one multi-plane program
    /// (invariant 10): every lane of the die the stream stripes to next has an open block on
    /// that die, in its own plane, at the same page, with room; then up to one page per plane.
    /// 0 otherwise. Taking these pages opens no block, so no collection can run between
    /// handing them out and programming them.
    fn aligned_planes(&self, stream: u8, want: usize) -> usize {
        let s = stream as usize;
        if self.lpd == 1 || want < 2 || self.cfg.striped & (1u64 << s.min(63)) == 0 {
            return 0;
        }
        let die = self.die_order[self.frontiers[s].cursor];
        let base = (die * self.lpd) as usize;
        let mut at = None;
        for p in 0..self.lpd as usize {
            let b = self.frontiers[s].open[base + p];
            if b == NIL
                || self.geo.die_of_block(Pbn(b)).0 != die
                || self.geo.plane_of_block(Pbn(b)) as usize != p
            {
                return 0;
            }
            let w = self.blocks[b as usize].written;
            if w >= self.ppb || *at.get_or_insert(w) != w {
                return 0;
            }
        }
        want.min(self.lpd as usize)
    }

    /// Programs `pages` (at most one per plane, `aligned_planes` said they fit) as one
    /// multi-plane program on the lanes of the die the stream stripes to next, planes 0, 1, ...
    /// A page whose program fails retires its block and is written again page by page.
    fn program_planes(
        &mut self,
        at_ns: Nanos,
        stream: u8,
        pages: &[&[(OobRecord, &[u8])]],
        purpose: Purpose,
        locs: &mut Vec<Ppn>,
    ) -> Result<Nanos, FtlError> {
        let s = stream as usize;
        let n = pages.len();
        for units in pages {
            self.check_units(stream, units)?;
        }
        let die = self.die_order[self.frontiers[s].cursor] as usize;
        let base = die * self.lpd as usize;
        let page_bytes = self.geo.page_size_bytes as usize;
        let oob_len = self.geo.oob_size_bytes as usize;
        // Hand out page w of each plane's open block, as `alloc_page` would one by one.
        let mut ppns = Vec::with_capacity(n);
        for p in 0..n {
            let b = self.frontiers[s].open[base + p];
            let w = self.blocks[b as usize].written;
            self.blocks[b as usize].written = w + 1;
            ppns.push(self.geo.ppn_in_block(Pbn(b), w));
        }
        if n == self.lpd as usize && self.completes_after(s, die) {
            let dies = self.die_order.len();
            let c = self.frontiers[s].cursor;
            self.frontiers[s].cursor = if c + 1 == dies { 0 } else { c + 1 };
        }
        self.mp_data[..n * page_bytes].fill(0xFF);
        self.mp_oob[..n * oob_len].fill(0xFF);
        for (p, units) in pages.iter().enumerate() {
            let b = self.geo.block_of(ppns[p]).0;
            let stamp = self.stamp_of(b);
            for (i, (rec, d)) in units.iter().enumerate() {
                let at = p * page_bytes + i * self.unit_bytes;
                self.mp_data[at..at + self.unit_bytes].copy_from_slice(d);
                let r = if self.cfg.stamp_incarnation && rec.kind == PageKind::Data {
                    rec.with_incarnation(stamp)
                } else {
                    *rec
                };
                let o = p * oob_len + i * OOB_RECORD_BYTES;
                r.encode_into(&mut self.mp_oob[o..o + OOB_RECORD_BYTES]);
            }
        }
        let list: Vec<(Ppn, &[u8], &[u8])> = (0..n)
            .map(|p| {
                (
                    ppns[p],
                    &self.mp_data[p * page_bytes..(p + 1) * page_bytes],
                    &self.mp_oob[p * oob_len..(p + 1) * oob_len],
                )
            })
            .collect();
        let (failed, mut end) = match self.nand.program_multi_plane(at_ns, &list, purpose) {
            Ok(done) => (None, done.done_ns),
            Err(NandError::ProgramFailed(f)) => (Some(f), at_ns),
            Err(e) => return Err(e.into()),
        };
        drop(list);
        self.counts.multi_plane_programs += 1;
        let from = locs.len();
        for (p, units) in pages.iter().enumerate() {
            let first = Ppn(ppns[p].0 * u64::from(self.upp));
            locs.push(first);
            if Some(ppns[p]) != failed {
                self.lower.programmed(
                    ppns[p],
                    &self.mp_data[p * page_bytes..(p + 1) * page_bytes],
                    &self.mp_oob[p * oob_len..(p + 1) * oob_len],
                );
                for (i, (rec, _)) in units.iter().enumerate() {
                    self.note_written(Ppn(first.0 + i as u64), rec.key);
                }
            }
        }
        self.last_unpaired = self.unpaired_word_line(self.geo.block_of(ppns[n - 1]).0);
        if let Some(p) = ppns.iter().position(|&x| Some(x) == failed) {
            // The block is bad now; the page goes elsewhere, as a failed single program's.
            self.retire(self.geo.block_of(ppns[p]));
            let (loc, done) = self.write_units(at_ns, stream, pages[p], purpose)?;
            locs[from + p] = loc;
            end = end.max(done);
        }
        if !self.to_evacuate.is_empty() {
            end = end.max(self.evacuate(at_ns)?);
        }
        Ok(end)
    }

    /// Whether, after the pages just handed out, every lane of `die` has completed its word
    /// line: the striping unit of a multi-plane die (`completes_word_line`).
    fn completes_after(&self, s: usize, die: usize) -> bool {
        let base = die * self.lpd as usize;
        (base..base + self.lpd as usize).all(|l| {
            let b = self.frontiers[s].open[l];
            b != NIL
                && self.blocks[b as usize]
                    .written
                    .is_multiple_of(self.wl_pages)
        })
    }

    /// What `write_units` refuses: a stream the space lacks, no units or more than a page's,
    /// a unit of the wrong size.
    fn check_units(&self, stream: u8, units: &[(OobRecord, &[u8])]) -> Result<(), FtlError> {
        if stream >= self.cfg.streams {
            return Err(FtlError::Config(format!(
                "stream {stream} of a space with {} streams",
                self.cfg.streams
            )));
        }
        if units.is_empty() || units.len() > self.upp as usize {
            return Err(FtlError::Config(format!(
                "a write of {} units into pages of {}",
                units.len(),
                self.upp
            )));
        }
        if let Some((_, d)) = units.iter().find(|(_, d)| d.len() != self.unit_bytes) {
            return Err(FtlError::Config(format!(
                "a unit of {} bytes; units are {} bytes",
                d.len(),
                self.unit_bytes
            )));
        }
        Ok(())
    }

    /// Reads a page (data, and OOB if `oob` is not empty) for the caller.
    pub fn read(
        &mut self,
        at_ns: Nanos,
        ppn: Ppn,
        data: &mut [u8],
        oob: &mut [u8],
        purpose: Purpose,
    ) -> Result<Nanos, FtlError> {
        if self.upp == 1 {
            let r = lower_pages::read(&mut self.nand, &self.lower, at_ns, ppn, data, oob, purpose);
            return Ok(r?.done_ns);
        }
        // A unit: its bytes and, if asked, its OOB record (a column read of part of the page).
        let slot = (ppn.0 % u64::from(self.upp)) as usize;
        let page = Ppn(ppn.0 / u64::from(self.upp));
        let oob_len = oob.len().min(OOB_RECORD_BYTES);
        Ok(lower_pages::read_range(
            &mut self.nand,
            &self.lower,
            at_ns,
            page,
            (slot * self.unit_bytes, data),
            (slot * OOB_RECORD_BYTES, &mut oob[..oob_len]),
            purpose,
        )?
        .done_ns)
    }

    /// Reads the units `first`, `first + 1`, ... that side by side fill `data`, all in one flash
    /// page: one array read (tR) and the bus for their bytes, as a controller senses a page once
    /// and takes its columns from the page register. Reading them unit by unit would charge a
    /// tR each, which no controller does for units of one page it reads together. The run is
    /// checked here, then read by [`FlashSpace::read`].
    pub fn read_units(
        &mut self,
        at_ns: Nanos,
        first: Ppn,
        data: &mut [u8],
        purpose: Purpose,
    ) -> Result<Nanos, FtlError> {
        let n = data.len() / self.unit_bytes;
        let upp = u64::from(self.upp);
        if n == 0
            || !data.len().is_multiple_of(self.unit_bytes)
            || first.0 / upp != (first.0 + n as u64 - 1) / upp
        {
            return Err(FtlError::Config(format!(
                "a read of {} bytes from unit {} is not whole units of one page ({} units of {} bytes)",
                data.len(),
                first.0,
                self.upp,
                self.unit_bytes
            )));
        }
        // `read`'s column read takes as many bytes of the page as `data` holds: the whole run.
        self.read(at_ns, first, data, &mut [], purpose)
    }

    /// How many of the units `units` (flash unit addresses, in order) continue the run that
    /// starts at `units[0]`: each the next unit of the same flash page (at least 1). The units
    /// of such a run are read by one [`FlashSpace::read_units`].
    pub fn run_in_page(&self, units: impl IntoIterator<Item = u64>) -> usize {
        let upp = u64::from(self.upp);
        let mut it = units.into_iter();
        let Some(first) = it.next() else { return 0 };
        1 + it
            .enumerate()
            .take_while(|&(k, u)| u == first + k as u64 + 1 && u / upp == first / upp)
            .count()
    }

    /// The next `invalidate` drops a copy replaced by the one at `new_loc` (invariant 9a: its
    /// block is pinned to `new_loc`'s word line if that is incomplete). For callers that do
    /// other writes between writing a replacement and invalidating what it replaces.
    pub fn note_replacement(&mut self, new_loc: Ppn) {
        if self.wl_pages > 1 {
            self.last_unpaired =
                self.unpaired_word_line(self.geo.block_of(self.page_of(new_loc)).0);
        }
    }

    /// Marks the valid page `ppn` invalid (its key was overwritten, trimmed or dropped).
    #[inline]
    pub fn invalidate(&mut self, ppn: Ppn) {
        let i = ppn.0 as usize;
        debug_assert!(
            self.rmap[i] != NO_KEY,
            "invalidating page {ppn:?} that holds nothing valid"
        );
        if self.rmap[i] == NO_KEY {
            return;
        }
        self.rmap[i] = NO_KEY;
        let b = self.geo.block_of(self.page_of(ppn)).0;
        if let Some(pin) = self.last_unpaired {
            self.pin(b, pin);
        }
        let closed = self.blocks[b as usize].usage == BlockUse::Closed;
        if closed {
            self.bucket_remove(b);
        }
        self.blocks[b as usize].valid -= 1;
        if closed {
            self.bucket_push(b);
        }
    }

    /// A caller's own program into page `ppn` (a partial program of a page the space handed out
    /// earlier, e.g. an OOB status mark) failed on the media: the block is bad now. Retires it
    /// and moves its valid pages off at once (as after a failed write); returns when that is done.
    pub fn retire_failed_block(&mut self, at_ns: Nanos, ppn: Ppn) -> Result<Nanos, FtlError> {
        let pbn = self.geo.block_of(ppn);
        if self.blocks[pbn.0 as usize].usage != BlockUse::Bad {
            self.retire(pbn);
        }
        self.evacuate(at_ns)
    }

    /// Idle-time collection: collects up to `max_victims` victims while fewer than the
    /// background target of blocks are free, then checks wear. Returns when the work is done.
    pub fn background_gc(&mut self, at_ns: Nanos, max_victims: u32) -> Result<Nanos, FtlError> {
        let mut t = at_ns;
        let mut n = 0;
        while self.free_count < self.bg_target && n < max_victims && !self.closed.is_empty() {
            t = self.gc_one(t, Purpose::Gc)?;
            n += 1;
        }
        t = self.maybe_wear_level(t)?;
        self.evacuate(t)
    }

    // ----- emptying a block for the caller (the page FTL's pSLC write cache) -------------------

    /// Takes the block closed longest ago out of the GC candidates, for the caller to empty
    /// (a pSLC write cache's fold, `page.rs`): the caller copies the valid units that
    /// [`FlashSpace::valid_units`] lists elsewhere, invalidates each, then calls
    /// [`FlashSpace::erase_emptied`]. `None` if no block is closed.
    pub fn take_oldest_closed(&mut self) -> Option<Pbn> {
        while let Some((b, stamp)) = self.fifo.pop_front() {
            let blk = &self.blocks[b as usize];
            if blk.usage == BlockUse::Closed && blk.close_stamp == stamp {
                self.leave_closed(b);
                return Some(Pbn(b));
            }
        }
        None
    }

    /// The valid units of block `pbn`: (location, key), in location order.
    pub fn valid_units(&self, pbn: Pbn) -> Vec<(Ppn, u64)> {
        let blk = &self.blocks[pbn.0 as usize];
        let first = self.geo.first_page(pbn).0 * u64::from(self.upp);
        let n = u64::from(blk.written) * u64::from(self.upp);
        (first..first + n)
            .filter_map(|loc| {
                let k = self.rmap[loc as usize];
                (k != NO_KEY).then_some((Ppn(loc), k))
            })
            .collect()
    }

    /// Erases block `pbn`, taken by `take_oldest_closed` and emptied by the caller, into the free
    /// pool. Returns when the erase is done.
    pub fn erase_emptied(
        &mut self,
        at_ns: Nanos,
        pbn: Pbn,
        purpose: Purpose,
    ) -> Result<Nanos, FtlError> {
        let blk = &self.blocks[pbn.0 as usize];
        if blk.usage != BlockUse::Collecting || blk.valid != 0 {
            return Err(FtlError::Config(format!(
                "block {} is not an emptied block ({:?}, {} valid units)",
                pbn.0, blk.usage, blk.valid
            )));
        }
        // A pSLC space has no pins; a native one satisfies them as before any erase.
        let t = self.satisfy_pins(at_ns, pbn.0)?;
        self.erase_to_free(t, pbn, purpose)
    }

    // ----- allocation ------------------------------------------------------------------------

    /// The next page of `stream`'s frontier, on the next die in striping order (and with
    /// multi-plane programs, on the die's plane that is furthest behind). A caller's write
    /// (`for_gc == false`) collects first when it needs a new block and the reserve is reached.
    fn alloc_page(
        &mut self,
        at_ns: Nanos,
        stream: u8,
        for_gc: bool,
    ) -> Result<(Ppn, Nanos), FtlError> {
        let s = stream as usize;
        let dies = self.die_order.len();
        let striped = self.cfg.striped & (1u64 << s.min(63)) != 0;
        let mut slot = self.frontiers[s].cursor;
        if striped && self.completes_word_line(s, self.die_order[slot] as usize) {
            self.frontiers[s].cursor = if slot + 1 == dies { 0 } else { slot + 1 };
        }
        let mut die = self.die_order[slot] as usize;
        let mut lane = self.next_lane(s, die, striped);
        if let Some(ppn) = self.take_from_open(s, lane) {
            return Ok((ppn, at_ns));
        }
        if !striped {
            // One block at a time: the next block goes to the next die.
            slot = if slot + 1 == dies { 0 } else { slot + 1 };
            self.frontiers[s].cursor = slot;
            die = self.die_order[slot] as usize;
            lane = self.next_lane(s, die, striped);
        }
        let mut t = at_ns;
        if !for_gc && self.free_count < self.reserve {
            t = self.foreground_gc(t)?;
            // Collection may have opened a block of this stream (on this die, or for an
            // unstriped stream, wherever its cursor is now).
            if !striped {
                die = self.die_order[self.frontiers[s].cursor] as usize;
            }
            lane = self.next_lane(s, die, striped);
            if let Some(ppn) = self.take_from_open(s, lane) {
                return Ok((ppn, t));
            }
        }
        if !striped && self.lpd > 1 {
            // An unstriped stream keeps one block in its die's first lane but takes it from
            // the plane with the most free blocks, so that the planes' free lists stay even and
            // the striped streams' planes can keep opening blocks in step (invariant 10).
            let base = die * self.lpd as usize;
            let fullest = (base..base + self.lpd as usize)
                .max_by_key(|&l| (self.free[l].len(), Reverse(l)))
                .unwrap_or(base);
            if let Some(b) = self.take_free(fullest) {
                return Ok(self.open_block(s, lane, b, stream, t));
            }
        }
        if striped && !for_gc && self.lpd > 1 && self.free[lane].is_empty() {
            // Keep the planes in step (invariant 10): erase an emptied block of this very plane
            // (nothing to copy) rather than borrow one of another plane, which could not pair
            // with its die's other planes for a whole block.
            if let Some(v) = self.emptied_block_in_lane(lane) {
                t = self.collect(t, v, Purpose::Gc)?;
            }
        }
        let Some(b) = self.take_free(lane) else {
            // No free block at all (GC dipped into the whole reserve): any open block of this
            // stream with room will do, on whatever die.
            for k in 0..dies {
                let d = self.die_order[k] as usize;
                for l in d * self.lpd as usize..(d + 1) * self.lpd as usize {
                    if let Some(ppn) = self.take_from_open(s, l) {
                        return Ok((ppn, t));
                    }
                }
            }
            return Err(FtlError::NoSpace(if for_gc {
                "garbage collection"
            } else {
                "a write"
            }));
        };
        Ok(self.open_block(s, lane, b, stream, t))
    }

    /// A closed block of `lane` without valid pages, among the first few of them (a bounded
    /// walk of greedy's bucket 0, kept for every policy), if any.
    fn emptied_block_in_lane(&self, lane: usize) -> Option<u32> {
        let mut b = self.bucket_head[0];
        for _ in 0..64 {
            if b == NIL {
                return None;
            }
            if self.lane_of_block(b) == lane {
                return Some(b);
            }
            b = self.blocks[b as usize].next;
        }
        None
    }

    /// Makes free block `b` the open block of (`s`, `lane`) and hands out its first page.
    fn open_block(&mut self, s: usize, lane: usize, b: u32, stream: u8, t: Nanos) -> (Ppn, Nanos) {
        let blk = &mut self.blocks[b as usize];
        debug_assert!(blk.usage == BlockUse::Free && blk.written == 0 && blk.valid == 0);
        blk.usage = BlockUse::Open;
        blk.stream = stream;
        blk.written = 1;
        self.frontiers[s].open[lane] = b;
        (self.geo.first_page(Pbn(b)), t)
    }

    /// The lane of block `b`: its die, or with multi-plane programs its plane of its die.
    #[inline]
    fn lane_of_block(&self, b: u32) -> usize {
        let die = self.geo.die_of_block(Pbn(b)).0 as usize;
        if self.lpd == 1 {
            die
        } else {
            die * self.lpd as usize + self.geo.plane_of_block(Pbn(b)) as usize
        }
    }

    /// Pages the open block of lane `l` of stream `s` has handed out; 0 when there is none or
    /// it is full (its successor starts at page 0).
    #[inline]
    fn lane_fill(&self, s: usize, l: usize) -> u32 {
        let b = self.frontiers[s].open[l];
        if b == NIL {
            return 0;
        }
        let w = self.blocks[b as usize].written;
        if w >= self.ppb {
            0
        } else {
            w
        }
    }

    /// The lane of `die` that stream `s` takes its next page from. With multi-plane programs a
    /// striped stream takes the plane whose open block is furthest behind (lowest plane on
    /// ties), so that the planes advance in step, page k on plane 0, page k on plane 1, ...,
    /// and a plane that fell behind (a retired block, a restore) catches up (invariant 10).
    /// Unstriped streams use the die's first lane.
    #[inline]
    fn next_lane(&self, s: usize, die: usize, striped: bool) -> usize {
        let base = die * self.lpd as usize;
        if self.lpd == 1 || !striped {
            return base;
        }
        (base..base + self.lpd as usize)
            .min_by_key(|&l| (self.lane_fill(s, l), l))
            .unwrap_or(base)
    }

    /// Whether the next page of stream `s` on `die` completes the die's striping unit, so that a
    /// striped stream moves on to the next die after it: the last page of a word line, and with
    /// multi-plane programs the last plane of that word line. Striping in whole word lines (one
    /// page on SLC/pSLC) is what keeps paired-page safety cheap: a burst of writes, or a
    /// victim's moves, leaves at most one word line of the stream incomplete instead of one per
    /// die, and each incomplete one costs a pad at the next durability point or erase
    /// (invariant 9).
    #[inline]
    fn completes_word_line(&self, s: usize, die: usize) -> bool {
        if self.lpd > 1 {
            let base = die * self.lpd as usize;
            let l = self.next_lane(s, die, true);
            let k = self.lane_fill(s, l) + 1;
            return k.is_multiple_of(self.wl_pages)
                && (base..base + self.lpd as usize).all(|o| o == l || self.lane_fill(s, o) >= k);
        }
        if self.wl_pages == 1 {
            return true;
        }
        let b = self.frontiers[s].open[die];
        b != NIL && {
            let written = self.blocks[b as usize].written;
            written < self.ppb && (written + 1).is_multiple_of(self.wl_pages)
        }
    }

    /// A page from the open block of (`s`, `lane`), closing the block when it is full.
    #[inline]
    fn take_from_open(&mut self, s: usize, lane: usize) -> Option<Ppn> {
        let b = self.frontiers[s].open[lane];
        if b == NIL {
            return None;
        }
        let written = self.blocks[b as usize].written;
        if written < self.ppb {
            self.blocks[b as usize].written = written + 1;
            return Some(self.geo.ppn_in_block(Pbn(b), written));
        }
        self.frontiers[s].open[lane] = NIL;
        self.close_block(b);
        None
    }

    /// The least-worn free block of `lane` (a die, or a plane of a die with multi-plane
    /// programs), else the least-worn free block of any lane.
    fn take_free(&mut self, lane: usize) -> Option<u32> {
        let d = if self.free[lane].is_empty() {
            (0..self.free.len())
                .filter(|&d| !self.free[d].is_empty())
                .min_by_key(|&d| self.free[d].peek().map(|r| r.0))?
        } else {
            lane
        };
        let Reverse((_, b)) = self.free[d].pop()?;
        self.free_count -= 1;
        self.counts.blocks_opened += 1;
        Some(b)
    }

    fn push_free(&mut self, b: u32) {
        let blk = &mut self.blocks[b as usize];
        blk.usage = BlockUse::Free;
        blk.written = 0;
        blk.valid = 0;
        let erase_count = blk.erase_count;
        let lane = self.lane_of_block(b);
        self.free[lane].push(Reverse((erase_count, b)));
        self.free_count += 1;
    }

    #[inline]
    fn note_written(&mut self, loc: Ppn, key: u64) {
        debug_assert!(key != NO_KEY, "key u64::MAX is reserved");
        debug_assert_eq!(self.rmap[loc.0 as usize], NO_KEY);
        self.rmap[loc.0 as usize] = key;
        let b = self.geo.block_of(self.page_of(loc)).0 as usize;
        self.blocks[b].valid += 1;
        debug_assert!(self.blocks[b].valid <= self.blocks[b].written * self.upp);
    }

    // ----- closed blocks: greedy buckets, FIFO queue, candidate list --------------------------

    fn close_block(&mut self, b: u32) {
        self.close_counter += 1;
        let stamp = self.close_counter;
        let blk = &mut self.blocks[b as usize];
        blk.usage = BlockUse::Closed;
        blk.close_stamp = stamp;
        blk.closed_pos = self.closed.len() as u32;
        self.closed.push(b);
        self.fifo.push_back((b, stamp));
        self.bucket_push(b);
    }

    /// Takes a closed block out of every candidate structure (the FIFO entry goes stale).
    fn leave_closed(&mut self, b: u32) {
        debug_assert_eq!(self.blocks[b as usize].usage, BlockUse::Closed);
        self.uncommit(b);
        self.bucket_remove(b);
        let pos = self.blocks[b as usize].closed_pos as usize;
        self.closed.swap_remove(pos);
        if pos < self.closed.len() {
            let moved = self.closed[pos];
            self.blocks[moved as usize].closed_pos = pos as u32;
        }
        let blk = &mut self.blocks[b as usize];
        blk.closed_pos = NIL;
        blk.usage = BlockUse::Collecting;
    }

    fn bucket_push(&mut self, b: u32) {
        let v = self.blocks[b as usize].valid as usize;
        let tail = self.bucket_tail[v];
        self.blocks[b as usize].prev = tail;
        self.blocks[b as usize].next = NIL;
        if tail == NIL {
            self.bucket_head[v] = b;
        } else {
            self.blocks[tail as usize].next = b;
        }
        self.bucket_tail[v] = b;
    }

    fn bucket_remove(&mut self, b: u32) {
        let v = self.blocks[b as usize].valid as usize;
        let Block { prev, next, .. } = self.blocks[b as usize];
        if prev == NIL {
            self.bucket_head[v] = next;
        } else {
            self.blocks[prev as usize].next = next;
        }
        if next == NIL {
            self.bucket_tail[v] = prev;
        } else {
            self.blocks[next as usize].prev = prev;
        }
        self.blocks[b as usize].prev = NIL;
        self.blocks[b as usize].next = NIL;
    }

    fn pick_victim(&mut self) -> Option<u32> {
        if self.closed.is_empty() {
            return None;
        }
        if let Some(b) = self.committed_victim() {
            return Some(b);
        }
        match self.cfg.gc {
            GcPolicy::Greedy => self.bucket_head.iter().copied().find(|&h| h != NIL),
            GcPolicy::Fifo => {
                while let Some((b, stamp)) = self.fifo.pop_front() {
                    let blk = &self.blocks[b as usize];
                    if blk.usage == BlockUse::Closed && blk.close_stamp == stamp {
                        return Some(b);
                    }
                }
                None
            }
            GcPolicy::Random => {
                let i = (self.rng.next_u64() % self.closed.len() as u64) as usize;
                Some(self.closed[i])
            }
            GcPolicy::CostBenefit => {
                let now = self.close_counter;
                let ppb = f64::from(self.ppb * self.upp);
                let mut best = (f64::NEG_INFINITY, NIL);
                for &b in &self.closed {
                    let blk = &self.blocks[b as usize];
                    let u = f64::from(blk.valid) / ppb;
                    let age = (now - blk.close_stamp + 1) as f64;
                    let score = if blk.valid == 0 {
                        f64::INFINITY
                    } else {
                        (1.0 - u) / (2.0 * u) * age
                    };
                    if score > best.0 {
                        best = (score, b);
                    }
                }
                Some(best.1)
            }
        }
    }

    // ----- garbage collection and wear levelling ----------------------------------------------

    /// Collects until the reserve is free again (invariant 4), then checks wear.
    fn foreground_gc(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        let mut t = at_ns;
        let mut fruitless = 0usize;
        while self.free_count < self.reserve {
            let before = self.free_count;
            t = self.gc_one(t, Purpose::Gc)?;
            if self.free_count > before {
                fruitless = 0;
            } else {
                // A victim with no invalid page gains nothing (random may pick one); a run of
                // them longer than the candidate list means the flash is full of valid data.
                fruitless += 1;
                if fruitless > self.closed.len() + 8 {
                    return Err(FtlError::NoSpace(
                        "garbage collection (every block is full of valid data)",
                    ));
                }
            }
        }
        self.maybe_wear_level(t)
    }

    /// Collects one victim: moves its valid pages, erases it. Returns when it is erased.
    fn gc_one(&mut self, at_ns: Nanos, purpose: Purpose) -> Result<Nanos, FtlError> {
        let victim = self.pick_victim().ok_or(FtlError::NoSpace(
            "garbage collection (no closed block to collect)",
        ))?;
        self.collect(at_ns, victim, purpose)
    }

    fn collect(&mut self, at_ns: Nanos, victim: u32, purpose: Purpose) -> Result<Nanos, FtlError> {
        self.leave_closed(victim);
        let t = if purpose == Purpose::WearLevel {
            self.migrate_cold(at_ns, victim)?
        } else {
            self.migrate_block(at_ns, victim, purpose)?
        };
        if purpose == Purpose::WearLevel {
            self.counts.wl_erases += 1;
        } else {
            self.counts.gc_victims += 1;
            self.counts.gc_erases += 1;
        }
        // Invariant 9a: the copies just made (and any newer version of what the victim held)
        // must not sit on an unpaired lower page once the victim's copy is erased.
        let t = self.satisfy_pins(t, victim)?;
        self.erase_to_free(t, Pbn(victim), purpose)
    }

    /// The word line block `b`'s last program left incomplete, if any (invariant 9a).
    #[inline]
    fn unpaired_word_line(&self, b: u32) -> Option<Pin> {
        if self.protected {
            return None;
        }
        let blk = &self.blocks[b as usize];
        let rest = blk.written % self.wl_pages;
        (rest != 0).then(|| Pin {
            block: b,
            erase_count: blk.erase_count,
            need_written: blk.written - rest + self.wl_pages,
        })
    }

    /// Pins block `b` to word line `pin` (one pin per destination block: the later word line).
    fn pin(&mut self, b: u32, pin: Pin) {
        let pins = &mut self.pins[b as usize];
        match pins.iter_mut().find(|p| p.block == pin.block) {
            Some(p) if p.erase_count == pin.erase_count => {
                p.need_written = p.need_written.max(pin.need_written)
            }
            Some(p) => *p = pin,
            None => pins.push(pin),
        }
    }

    /// Completes the word lines block `b` is pinned to that later programs have not completed
    /// yet (invariant 9a), then drops its pins. Returns when the pads are programmed.
    fn satisfy_pins(&mut self, at_ns: Nanos, b: u32) -> Result<Nanos, FtlError> {
        if self.wl_pages == 1 {
            return Ok(at_ns);
        }
        let pins = std::mem::take(&mut self.pins[b as usize]);
        let mut done = at_ns;
        // A destination retired since by a failed program (invariant 11) holds the copies
        // only in the controller's RAM (torn lower pages) until it is evacuated, and a
        // collection spree can run on long before that: move it off, durably, before `b`, the
        // other intact copy, is erased. Found by `crashtest --fault mixed` (a cut 250
        // operations after a failed GC program lost a commit that way).
        if !self.to_evacuate.is_empty()
            && pins
                .iter()
                .any(|p| self.blocks[p.block as usize].usage == BlockUse::Bad)
        {
            done = done.max(self.evacuate(at_ns)?);
        }
        for p in &pins {
            let blk = &self.blocks[p.block as usize];
            // Erased since (its data moved, pinned in turn), or retired: nothing to complete.
            if blk.erase_count != p.erase_count || blk.usage != BlockUse::Open {
                continue;
            }
            done = done.max(self.pad_block(at_ns, p.block, p.need_written)?);
        }
        Ok(done)
    }

    /// Programs `Pad` pages into open block `b` until it has `need_written` pages (within its
    /// current word line). A failed pad retires the block (its valid pages are moved, as after
    /// any failed program).
    fn pad_block(&mut self, at_ns: Nanos, b: u32, need_written: u32) -> Result<Nanos, FtlError> {
        let mut done = at_ns;
        while self.blocks[b as usize].usage == BlockUse::Open
            && self.blocks[b as usize].written < need_written
        {
            let written = self.blocks[b as usize].written;
            debug_assert!(written < self.ppb, "a word line never spans two blocks");
            let ppn = self.geo.ppn_in_block(Pbn(b), written);
            self.blocks[b as usize].written = written + 1;
            OobRecord::new(PageKind::Pad, 0, self.seq, 0).encode_into(&mut self.pad_oob);
            self.counts.pad_pages += 1;
            match self
                .nand
                .program(at_ns, ppn, &self.pad_data, &self.pad_oob, Purpose::Pad)
            {
                Ok(d) => {
                    self.lower.programmed(ppn, &self.pad_data, &self.pad_oob);
                    done = done.max(d.done_ns)
                }
                Err(NandError::ProgramFailed(_)) => {
                    self.retire(Pbn(b));
                    done = done.max(self.evacuate(at_ns)?);
                }
                Err(e) => return Err(e.into()),
            }
        }
        // The word line is complete: a striped stream whose cursor is on this die moves on, as
        // after a page of its own that completes one (`completes_word_line`), so that commits
        // that each write one page and pad it rotate over the dies as on SLC.
        let blk = self.blocks[b as usize];
        let s = blk.stream as usize;
        if done > at_ns
            && blk.usage == BlockUse::Open
            && self.cfg.striped & (1u64 << s.min(63)) != 0
        {
            let die = self.geo.die_of_block(Pbn(b)).0;
            let lane = self.lane_of_block(b);
            let f = &mut self.frontiers[s];
            if self.die_order[f.cursor] == die && f.open[lane] == b {
                f.cursor = if f.cursor + 1 == self.die_order.len() {
                    0
                } else {
                    f.cursor + 1
                };
            }
        }
        Ok(done)
    }

    /// Completes, with `Pad` pages, the last word line of every open block whose upper pages
    /// are not programmed yet (invariant 9). Returns when the pads are programmed (`at_ns` when
    /// there is nothing to pad, always on SLC and pSLC). A pad whose program fails retires its
    /// block (its valid pages are moved, as after any failed program).
    pub fn pair_word_lines(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        if self.wl_pages == 1 || self.protected {
            return Ok(at_ns);
        }
        let mut done = at_ns;
        for s in 0..self.frontiers.len() {
            for slot in 0..self.frontiers[s].open.len() {
                let b = self.frontiers[s].open[slot];
                if b == NIL {
                    continue;
                }
                if let Some(p) = self.unpaired_word_line(b) {
                    done = done.max(self.pad_block(at_ns, b, p.need_written)?);
                }
            }
        }
        self.last_unpaired = None;
        Ok(done)
    }

    /// Copies every valid page of block `b` to its stream's frontier, OOB included.
    fn migrate_block(&mut self, at_ns: Nanos, b: u32, purpose: Purpose) -> Result<Nanos, FtlError> {
        if self.upp > 1 {
            return self.migrate_units(at_ns, b, purpose);
        }
        let stream = self.blocks[b as usize].stream;
        let first = self.geo.first_page(Pbn(b)).0;
        let mut done = at_ns;
        let read_status = self.cfg.gc_reads_oob;
        for page in 0..self.blocks[b as usize].written {
            // An FTL that keeps validity in the OOB reads every page's status; ours knows.
            if self.blocks[b as usize].valid == 0 && !read_status {
                break;
            }
            let from = Ppn(first + u64::from(page));
            let issue = if read_status {
                self.read_status(at_ns, from, purpose)?
            } else {
                at_ns
            };
            let key = self.rmap[from.0 as usize];
            if key == NO_KEY {
                continue;
            }
            let r = self.read_for_move(issue, from, purpose)?;
            let to = loop {
                let (to, t) = self.alloc_page(r.done_ns, stream, true)?;
                let inc = self.stamp_of(self.geo.block_of(to).0);
                restamp(self.cfg.stamp_incarnation, inc, &mut self.mig_oob);
                match self
                    .nand
                    .program(t, to, &self.mig_data, &self.mig_oob, purpose)
                {
                    Ok(d) => {
                        self.lower.programmed(to, &self.mig_data, &self.mig_oob);
                        done = done.max(d.done_ns);
                        break to;
                    }
                    Err(NandError::ProgramFailed(_)) => self.retire(self.geo.block_of(to)),
                    Err(e) => return Err(e.into()),
                }
            };
            self.note_written(to, key);
            self.last_unpaired = None;
            self.invalidate(from);
            if self.wl_pages > 1 {
                if let Some(pin) = self.unpaired_word_line(self.geo.block_of(to).0) {
                    self.pin(b, pin);
                }
            }
            self.moves.push(Move {
                key,
                stream,
                from,
                to,
                purpose,
            });
            if purpose == Purpose::WearLevel {
                self.counts.wl_migrations += 1;
            } else {
                self.counts.gc_migrations += 1;
            }
        }
        debug_assert_eq!(self.blocks[b as usize].valid, 0);
        Ok(done)
    }

    /// `migrate_block` on pages of several units: reads each page of the victim that holds a
    /// valid unit once, packs the valid units (data and OOB record, re-stamped) into whole pages
    /// and programs each page when it is full, and the last, partly filled one at the end, so
    /// that every unit is on flash before the victim is erased.
    fn migrate_units(&mut self, at_ns: Nanos, b: u32, purpose: Purpose) -> Result<Nanos, FtlError> {
        let stream = self.blocks[b as usize].stream;
        let first = self.geo.first_page(Pbn(b)).0;
        let upp = u64::from(self.upp);
        let mut done = at_ns;
        let read_status = self.cfg.gc_reads_oob;
        debug_assert!(self.pack.is_empty());
        self.pack_data.fill(0xFF);
        self.pack_oob.fill(0xFF);
        for page in 0..self.blocks[b as usize].written {
            if self.blocks[b as usize].valid == 0 && !read_status {
                break;
            }
            let from = Ppn(first + u64::from(page));
            let issue = if read_status {
                self.read_status(at_ns, from, purpose)?
            } else {
                at_ns
            };
            let locs = from.0 * upp..(from.0 + 1) * upp;
            if self.rmap[locs.start as usize..locs.end as usize]
                .iter()
                .all(|&k| k == NO_KEY)
            {
                continue;
            }
            let r = self.read_for_move(issue, from, purpose)?;
            for loc in locs {
                let key = self.rmap[loc as usize];
                if key == NO_KEY {
                    continue;
                }
                let slot = (loc % upp) as usize;
                let i = self.pack.len();
                let ub = self.unit_bytes;
                self.pack_data[i * ub..(i + 1) * ub]
                    .copy_from_slice(&self.mig_data[slot * ub..(slot + 1) * ub]);
                self.pack_oob[i * OOB_RECORD_BYTES..(i + 1) * OOB_RECORD_BYTES].copy_from_slice(
                    &self.mig_oob[slot * OOB_RECORD_BYTES..(slot + 1) * OOB_RECORD_BYTES],
                );
                self.pack.push((key, Ppn(loc)));
                if self.pack.len() == self.upp as usize {
                    done = done.max(self.flush_pack(r.done_ns, stream, purpose)?);
                }
            }
        }
        if !self.pack.is_empty() {
            done = done.max(self.flush_pack(done, stream, purpose)?);
        }
        debug_assert_eq!(self.blocks[b as usize].valid, 0);
        Ok(done)
    }

    /// Programs the packed units into a page of `stream`'s frontier and moves their keys there.
    fn flush_pack(
        &mut self,
        at_ns: Nanos,
        stream: u8,
        purpose: Purpose,
    ) -> Result<Nanos, FtlError> {
        let n = self.pack.len();
        let (to, done) = loop {
            let (to, t) = self.alloc_page(at_ns, stream, true)?;
            let inc = self.stamp_of(self.geo.block_of(to).0);
            for i in 0..n {
                restamp(
                    self.cfg.stamp_incarnation,
                    inc,
                    &mut self.pack_oob[i * OOB_RECORD_BYTES..(i + 1) * OOB_RECORD_BYTES],
                );
            }
            match self
                .nand
                .program(t, to, &self.pack_data, &self.pack_oob, purpose)
            {
                Ok(d) => {
                    self.lower.programmed(to, &self.pack_data, &self.pack_oob);
                    break (to, d.done_ns);
                }
                Err(NandError::ProgramFailed(_)) => self.retire(self.geo.block_of(to)),
                Err(e) => return Err(e.into()),
            }
        };
        let to_block = self.geo.block_of(to).0;
        let pin = self.unpaired_word_line(to_block);
        let pack = std::mem::take(&mut self.pack);
        for (i, &(key, from)) in pack.iter().enumerate() {
            let to_loc = Ppn(to.0 * u64::from(self.upp) + i as u64);
            self.note_written(to_loc, key);
            self.last_unpaired = None;
            self.invalidate(from);
            if let Some(pin) = pin {
                let victim = self.geo.block_of(self.page_of(from)).0;
                self.pin(victim, pin);
            }
            self.moves.push(Move {
                key,
                stream,
                from,
                to: to_loc,
                purpose,
            });
            if purpose == Purpose::WearLevel {
                self.counts.wl_migrations += 1;
            } else {
                self.counts.gc_migrations += 1;
            }
        }
        self.pack = pack;
        self.pack.clear();
        self.pack_data.fill(0xFF);
        self.pack_oob.fill(0xFF);
        Ok(done)
    }

    /// Reads page `from` (data and OOB) into the migration buffers for a move; a page a failed
    /// paired program tore comes from its copy (invariant 11).
    fn read_for_move(
        &mut self,
        at_ns: Nanos,
        from: Ppn,
        purpose: Purpose,
    ) -> Result<nand::Done, NandError> {
        lower_pages::read(
            &mut self.nand,
            &self.lower,
            at_ns,
            from,
            &mut self.mig_data,
            &mut self.mig_oob,
            purpose,
        )
    }

    /// The OOB-only read of a GC victim's page (`SpaceConfig::gc_reads_oob`); returns when it is
    /// done. A media error (a torn page) is no error here: the reverse map decides what moves.
    fn read_status(&mut self, at_ns: Nanos, ppn: Ppn, purpose: Purpose) -> Result<Nanos, FtlError> {
        self.counts.gc_oob_reads += 1;
        match self.nand.read_oob(at_ns, ppn, &mut self.mig_oob, purpose) {
            Ok(d) => Ok(d.done_ns),
            Err(e @ (NandError::PowerLost | NandError::PoweredOff)) => Err(e.into()),
            Err(e) if e.is_media_error() => Ok(at_ns),
            Err(e) => Err(e.into()),
        }
    }

    /// Static wear levelling's copy: the cold block's valid pages go, in order, to the *most*
    /// worn free block (not to the stream's frontier, whose blocks are the least worn), so that
    /// cold data rests on worn blocks and the little-worn block joins the hot rotation. One
    /// destination suffices: a block never holds more valid pages than a block has.
    fn migrate_cold(&mut self, at_ns: Nanos, b: u32) -> Result<Nanos, FtlError> {
        if self.upp > 1 {
            // Units are repacked through the frontier (a simplification: cold units join the
            // stream's open blocks instead of resting on the most worn free block).
            return self.migrate_units(at_ns, b, Purpose::WearLevel);
        }
        let stream = self.blocks[b as usize].stream;
        let Some(dest) = self.take_most_worn_free() else {
            return self.migrate_block(at_ns, b, Purpose::WearLevel);
        };
        {
            let d = &mut self.blocks[dest as usize];
            d.usage = BlockUse::Open;
            d.stream = stream;
        }
        let first = self.geo.first_page(Pbn(b)).0;
        let mut done = at_ns;
        for page in 0..self.blocks[b as usize].written {
            let from = Ppn(first + u64::from(page));
            let key = self.rmap[from.0 as usize];
            if key == NO_KEY {
                continue;
            }
            let r = self.read_for_move(at_ns, from, Purpose::WearLevel)?;
            let inc = self.stamp_of(dest);
            restamp(self.cfg.stamp_incarnation, inc, &mut self.mig_oob);
            let written = self.blocks[dest as usize].written;
            let to = self.geo.ppn_in_block(Pbn(dest), written);
            self.blocks[dest as usize].written = written + 1;
            match self.nand.program(
                r.done_ns,
                to,
                &self.mig_data,
                &self.mig_oob,
                Purpose::WearLevel,
            ) {
                Ok(d) => {
                    self.lower.programmed(to, &self.mig_data, &self.mig_oob);
                    done = done.max(d.done_ns)
                }
                Err(NandError::ProgramFailed(_)) => {
                    // Rare: give up on the cold destination and finish through the frontier.
                    self.retire(Pbn(dest));
                    let t = self.evacuate(done)?;
                    return Ok(t.max(self.migrate_block(done, b, Purpose::WearLevel)?));
                }
                Err(e) => return Err(e.into()),
            }
            self.note_written(to, key);
            self.last_unpaired = None;
            self.invalidate(from);
            if self.wl_pages > 1 {
                if let Some(pin) = self.unpaired_word_line(dest) {
                    self.pin(b, pin);
                }
            }
            self.moves.push(Move {
                key,
                stream,
                from,
                to,
                purpose: Purpose::WearLevel,
            });
            self.counts.wl_migrations += 1;
        }
        self.close_block(dest);
        Ok(done)
    }

    /// Removes and returns the most worn free block (a scan: wear levelling is rare).
    fn take_most_worn_free(&mut self) -> Option<u32> {
        let (die, b) = self
            .free
            .iter()
            .enumerate()
            .flat_map(|(d, h)| h.iter().map(move |r| (d, r.0 .1)))
            .max_by_key(|&(_, b)| (self.blocks[b as usize].erase_count, std::cmp::Reverse(b)))?;
        self.free[die].retain(|r| r.0 .1 != b);
        self.free_count -= 1;
        self.counts.blocks_opened += 1;
        Some(b)
    }

    /// Erases block `pbn` into the free pool, or retires it if the erase fails.
    fn erase_to_free(
        &mut self,
        at_ns: Nanos,
        pbn: Pbn,
        purpose: Purpose,
    ) -> Result<Nanos, FtlError> {
        match self.nand.erase(at_ns, pbn, self.mode, purpose) {
            Ok(d) => {
                self.lower.erased(pbn);
                let blk = &mut self.blocks[pbn.0 as usize];
                blk.erase_count += 1;
                self.max_erase = self.max_erase.max(blk.erase_count);
                self.erases_since_wl_check += 1;
                self.push_free(pbn.0);
                Ok(d.done_ns)
            }
            Err(NandError::EraseFailed(_) | NandError::WornOut { .. }) => {
                let blk = &mut self.blocks[pbn.0 as usize];
                blk.usage = BlockUse::Bad;
                blk.written = 0;
                self.good_blocks -= 1;
                self.counts.retired_blocks += 1;
                Ok(at_ns)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A program failed in block `pbn`: the block is bad now. Takes it off its frontier; its
    /// valid pages are moved off by `evacuate` once the current operation is done.
    fn retire(&mut self, pbn: Pbn) {
        let b = pbn.0;
        let blk = self.blocks[b as usize];
        match blk.usage {
            BlockUse::Open => {
                let f = &mut self.frontiers[blk.stream as usize].open;
                if let Some(slot) = f.iter_mut().find(|x| **x == b) {
                    *slot = NIL;
                }
            }
            BlockUse::Closed => self.leave_closed(b),
            _ => {}
        }
        self.blocks[b as usize].usage = BlockUse::Bad;
        self.good_blocks -= 1;
        self.counts.retired_blocks += 1;
        if self.blocks[b as usize].valid > 0 {
            self.to_evacuate.push(b);
        }
    }

    /// Moves valid pages off retired blocks (their pages stay readable, a torn lower page from
    /// its copy), then completes the word lines the copies went to (invariant 11): a retired
    /// block is never erased, so its pins would never be satisfied, and after a failed paired
    /// program the copies are the only intact version of the torn pages. Until their word lines
    /// are complete a power cut can take them (the controller's DRAM copies go with the power),
    /// so the rescue is made durable at once, not at the next durability point.
    fn evacuate(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        let mut t = at_ns;
        while let Some(b) = self.to_evacuate.pop() {
            let moved = self.migrate_block(at_ns, b, Purpose::Gc)?;
            t = t.max(self.satisfy_pins(moved, b)?);
        }
        Ok(t)
    }

    /// Static wear levelling: if the erase-count spread passed the threshold, moves the data of
    /// the least-worn closed block (cold data) so that the block returns to the free pool.
    fn maybe_wear_level(&mut self, at_ns: Nanos) -> Result<Nanos, FtlError> {
        if self.cfg.wl_threshold == 0
            || self.erases_since_wl_check < WL_CHECK_EVERY_ERASES
            || self.free_count < self.reserve
        {
            return Ok(at_ns);
        }
        self.erases_since_wl_check = 0;
        let Some(&coldest) = self
            .closed
            .iter()
            .min_by_key(|&&b| (self.blocks[b as usize].erase_count, b))
        else {
            return Ok(at_ns);
        };
        if self.max_erase - self.blocks[coldest as usize].erase_count <= self.cfg.wl_threshold {
            return Ok(at_ns);
        }
        self.collect(at_ns, coldest, Purpose::WearLevel)
    }

    // ----- checking ----------------------------------------------------------------------------

    /// Recounts everything and checks invariants 1, 2 and 4. Costly: for tests.
    pub fn check(&self) -> Result<(), String> {
        let mut free = 0;
        for (b, blk) in self.blocks.iter().enumerate() {
            let upp = self.upp as usize;
            let first = self.geo.first_page(Pbn(b as u32)).0 as usize * upp;
            let valid = self.rmap[first..first + self.geo.pages_per_block as usize * upp]
                .iter()
                .filter(|&&k| k != NO_KEY)
                .count() as u32;
            if valid != blk.valid {
                return Err(format!(
                    "block {b}: valid count {} but {valid} valid pages",
                    blk.valid
                ));
            }
            if blk.valid > blk.written * self.upp {
                return Err(format!(
                    "block {b}: {} valid of {} written",
                    blk.valid, blk.written
                ));
            }
            match blk.usage {
                BlockUse::Free => {
                    free += 1;
                    if blk.written != 0 {
                        return Err(format!("free block {b} has {} pages written", blk.written));
                    }
                }
                BlockUse::Closed => {
                    if self.closed.get(blk.closed_pos as usize) != Some(&(b as u32)) {
                        return Err(format!("closed block {b} is not in the candidate list"));
                    }
                }
                BlockUse::Open => {
                    if !self.frontiers.iter().any(|f| f.open.contains(&(b as u32))) {
                        return Err(format!("open block {b} is no frontier"));
                    }
                }
                BlockUse::Collecting => return Err(format!("block {b} is left collecting")),
                BlockUse::Foreign => {
                    if blk.valid != 0 || blk.written != 0 {
                        return Err(format!("foreign block {b} is in use"));
                    }
                }
                BlockUse::Bad => {
                    if blk.valid != 0 && !self.to_evacuate.contains(&(b as u32)) {
                        return Err(format!("bad block {b} holds {} valid pages", blk.valid));
                    }
                }
            }
        }
        if free != self.free_count || self.free.iter().map(|h| h.len() as u32).sum::<u32>() != free
        {
            return Err(format!(
                "free count {} but {free} free blocks",
                self.free_count
            ));
        }
        // Invariant 10: free lists per lane; each open block in one lane of its own stream.
        for (lane, h) in self.free.iter().enumerate() {
            if let Some(r) = h.iter().find(|r| self.lane_of_block(r.0 .1) != lane) {
                return Err(format!("free block {} is in lane {lane}'s list", r.0 .1));
            }
        }
        let mut seen = vec![false; self.blocks.len()];
        for (st, f) in self.frontiers.iter().enumerate() {
            if f.open.len() != self.free.len() {
                return Err(format!("stream {st} has {} lanes", f.open.len()));
            }
            for &b in f.open.iter().filter(|&&b| b != NIL) {
                let blk = &self.blocks[b as usize];
                if blk.usage != BlockUse::Open || blk.stream as usize != st {
                    return Err(format!(
                        "block {b} in stream {st}'s lanes is {:?}",
                        blk.usage
                    ));
                }
                if std::mem::replace(&mut seen[b as usize], true) {
                    return Err(format!("block {b} is open in two lanes"));
                }
            }
        }
        Ok(())
    }

    /// Gives up `dies` (for a new NoFTL region over them): closes this space's open blocks
    /// there, moves every valid page off them (reported as `Gc` moves) and forgets their blocks,
    /// which become `Foreign` (not erased: the next owner formats them). Refused, before anything
    /// moves, if the remaining dies cannot take the pages plus open blocks and the GC reserve.
    pub fn release_dies(&mut self, at_ns: Nanos, dies: &[u32]) -> Result<Nanos, FtlError> {
        let on = |geo: &Geometry, b: u32| dies.contains(&geo.die_of_block(Pbn(b)).0);
        let keep: Vec<u32> = self
            .die_order
            .iter()
            .copied()
            .filter(|d| !dies.contains(d))
            .collect();
        if keep.is_empty() {
            return Err(FtlError::Config(
                "releasing these dies would leave the space none".into(),
            ));
        }
        let (mut valid, mut free_kept) = (0u64, 0u64);
        for b in 0..self.geo.blocks() {
            let blk = &self.blocks[b as usize];
            if on(&self.geo, b) {
                valid += u64::from(blk.valid);
            } else if blk.usage == BlockUse::Free {
                free_kept += 1;
            }
        }
        let reserve = if self.cfg.reserve_blocks == 0 {
            keep.len() as u32 * self.lpd + 2
        } else {
            self.cfg.reserve_blocks
        };
        let need = valid.div_ceil(u64::from(self.ppb * self.upp))
            + u64::from(self.cfg.streams) * keep.len() as u64 * u64::from(self.lpd)
            + u64::from(reserve);
        if free_kept < need {
            return Err(FtlError::NoSpace(
                "releasing dies (the remaining dies have too few free blocks)",
            ));
        }
        self.die_order = keep;
        for f in &mut self.frontiers {
            f.cursor = 0;
        }
        let mut t = at_ns;
        for b in 0..self.geo.blocks() {
            if !on(&self.geo, b) {
                continue;
            }
            match self.blocks[b as usize].usage {
                BlockUse::Open => {
                    let st = self.blocks[b as usize].stream as usize;
                    for o in self.frontiers[st].open.iter_mut().filter(|o| **o == b) {
                        *o = NIL;
                    }
                    self.close_block(b);
                    self.leave_closed(b);
                    t = t.max(self.migrate_block(at_ns, b, Purpose::Gc)?);
                }
                BlockUse::Closed => {
                    self.leave_closed(b);
                    t = t.max(self.migrate_block(at_ns, b, Purpose::Gc)?);
                }
                BlockUse::Free => self.free_count -= 1,
                _ => {}
            }
            let blk = &mut self.blocks[b as usize];
            debug_assert_eq!(blk.valid, 0);
            blk.usage = BlockUse::Foreign;
            blk.written = 0;
        }
        for &d in dies {
            for lane in d * self.lpd..(d + 1) * self.lpd {
                if let Some(h) = self.free.get_mut(lane as usize) {
                    h.clear();
                }
            }
        }
        self.reserve = reserve;
        self.bg_target = if self.cfg.background_free_blocks == 0 {
            2 * reserve
        } else {
            self.cfg.background_free_blocks.max(reserve)
        };
        let mut own = self.die_order.clone();
        own.sort_unstable();
        self.cfg.dies = own;
        self.good_blocks = self
            .blocks
            .iter()
            .filter(|b| !matches!(b.usage, BlockUse::Bad | BlockUse::Foreign))
            .count() as u32;
        Ok(t)
    }

    /// The dies this space allocates on, in striping order.
    pub fn dies(&self) -> &[u32] {
        &self.die_order
    }

    /// Swaps the devices of two spaces. Spaces over disjoint die sets of one device (NoFTL
    /// regions) take turns holding it: the caller hands the device to the space it is about to
    /// use; the other holds a stand-in it never touches while it is not in use. Why not a shared
    /// device: every operation here needs `&mut Nand`, and the spaces never run concurrently.
    pub fn lend_nand(&mut self, to: &mut FlashSpace) {
        std::mem::swap(&mut self.nand, &mut to.nand);
    }

    /// Replaces the device (a stand-in in, the real one out, or back); see `lend_nand`.
    pub fn replace_nand(&mut self, nand: Nand) -> Nand {
        std::mem::replace(&mut self.nand, nand)
    }

    /// The die a block lies on (for callers that place data themselves).
    pub fn die_of(&self, pbn: Pbn) -> DieId {
        self.geo.die_of_block(pbn)
    }
}

// ---------------------------------------------------------------------------------------------
// Victim commitment for Insert Address Assist (docs/iaa.md; Miyaji, Sun and Takeuchi, "IAA").
// Part of this module rather than a child file: it is `FlashSpace` itself (it reads the block
// table and the greedy buckets; GC asks it for the next victim and tells it which block left
// `Closed`), so a child file would import its parent while the parent imports it, a circle.
//
// A host that wants its writes to empty the next GC victim has to know that victim before GC
// reaches it, and the space must then keep its word. [`FlashSpace::commit_victims`] picks the
// next `n` victims in greedy order (fewest valid units first) among the closed blocks of the
// streams the caller names, and *freezes* them: GC collects committed victims before any other
// block (except a block with no valid unit at all, which costs nothing to collect and so
// cannot hurt the commitment), in the order committed. The commitment lasts until the block
// is collected (or taken by wear levelling); the window of a committed victim is therefore the
// host writes between its commitment and its collection. No other block changes that order.
//
// Commitment invariants:
// 1. Every committed block is `Closed` (a block leaves the list as it leaves `Closed`).
// 2. The epoch changes exactly when the committed list changes, so a caller that caches the
//    list's keys refreshes only then; between two changes, the valid keys of the committed
//    blocks only shrink (a closed block receives no new data).
// 3. Without a call to `commit_victims`, GC behaves exactly as before (nothing is committed).

/// The victims a space has committed to.
#[derive(Clone, Debug, Default)]
pub(crate) struct VictimCommit {
    /// Committed blocks, in the order GC will collect them.
    blocks: Vec<u32>,
    /// Bumped on every change of `blocks` (commitment invariant 2).
    epoch: u64,
}

impl FlashSpace {
    /// Commits to the next `n` GC victims among the closed blocks of the streams in
    /// `streams_mask` (bit `s`: stream `s`), topping the list up in greedy order; returns the
    /// epoch (commitment invariant 2). Cheap when the list is already full: no scan.
    pub fn commit_victims(&mut self, n: u32, streams_mask: u64) -> u64 {
        let n = n as usize;
        if self.victims.blocks.len() >= n {
            return self.victims.epoch;
        }
        // Greedy order: bucket v holds the closed blocks with v valid units, oldest first. A
        // block with no valid unit is skipped: GC takes it for free (`committed_victim`) and
        // it has nothing for the host to empty.
        'scan: for v in 1..self.bucket_head.len() {
            let mut b = self.bucket_head[v];
            while b != NIL {
                let blk = &self.blocks[b as usize];
                if streams_mask & (1u64 << blk.stream.min(63)) != 0
                    && !self.victims.blocks.contains(&b)
                {
                    self.victims.blocks.push(b);
                    self.victims.epoch += 1;
                    if self.victims.blocks.len() >= n {
                        break 'scan;
                    }
                }
                b = self.blocks[b as usize].next;
            }
        }
        self.victims.epoch
    }

    /// The committed victims, in the order GC will collect them.
    pub fn committed_victims(&self) -> &[u32] {
        &self.victims.blocks
    }

    /// The epoch of the committed list (commitment invariant 2).
    pub fn victim_epoch(&self) -> u64 {
        self.victims.epoch
    }

    /// Appends to `out` the keys still valid in the committed victims, victim by victim, in
    /// page order.
    pub fn committed_keys(&self, out: &mut Vec<u64>) {
        let upp = self.upp as usize;
        let ppb = self.geo.pages_per_block as usize;
        for &b in &self.victims.blocks {
            let first = self.geo.first_page(Pbn(b)).0 as usize * upp;
            out.extend(
                self.rmap[first..first + ppb * upp]
                    .iter()
                    .copied()
                    .filter(|&k| k != NO_KEY),
            );
        }
    }

    /// GC's choice when victims are committed: the first committed one, unless some closed
    /// block has no valid unit (free to collect). `None`: nothing committed, the policy decides.
    fn committed_victim(&self) -> Option<u32> {
        let &b = self.victims.blocks.first()?;
        debug_assert_eq!(
            self.blocks[b as usize].usage,
            BlockUse::Closed,
            "invariant 1: a committed victim is closed"
        );
        if self.bucket_head[0] != NIL {
            return Some(self.bucket_head[0]);
        }
        Some(b)
    }

    /// Block `b` leaves `Closed`: it leaves the commitment too (commitment invariant 1).
    fn uncommit(&mut self, b: u32) {
        if let Some(i) = self.victims.blocks.iter().position(|&c| c == b) {
            self.victims.blocks.remove(i);
            self.victims.epoch += 1;
        }
    }
}

#[cfg(test)]
mod victim_tests {
    use super::*;
    use crate::space::SpaceConfig;
    use nand::{Nand, Purpose};

    fn space() -> FlashSpace {
        let mut cfg = nand::DeviceConfig::preset("tiny", &[]).expect("tiny preset");
        cfg.seed = 3;
        let (s, _) = FlashSpace::format(
            Nand::new(cfg).unwrap(),
            SpaceConfig {
                streams: 1,
                ..SpaceConfig::default()
            },
            0,
        )
        .unwrap();
        s
    }

    /// A committed victim is the next one GC collects, and once the caller has rewritten every
    /// key it held, GC collects it without a copy.
    #[test]
    fn gc_collects_the_committed_victim_and_copies_nothing_when_it_was_emptied() {
        let mut s = space();
        let keys = s.usable_pages() * u64::from(s.units_per_page()) * 7 / 10;
        let data = vec![7u8; s.unit_bytes()];
        let mut map = vec![u64::MAX; keys as usize];
        let mut t = 0;
        let mut moves = Vec::new();
        let mut write = |s: &mut FlashSpace, k: u64, map: &mut Vec<u64>, t: &mut u64| {
            let rec = crate::oob::OobRecord::new(crate::oob::PageKind::Data, k, s.alloc_seq(), 0);
            let (p, done) = s.write(*t, 0, &rec, &data, Purpose::Host).unwrap();
            *t = done;
            moves.clear();
            s.take_moves(&mut moves);
            for m in &moves {
                map[m.key as usize] = m.to.0;
            }
            let old = std::mem::replace(&mut map[k as usize], p.0);
            if old != u64::MAX {
                s.invalidate(nand::Ppn(old));
            }
        };
        for k in 0..keys {
            write(&mut s, k, &mut map, &mut t);
        }
        // Random overwrites until GC has run for a while.
        let mut x = 12345u64;
        for _ in 0..keys * 2 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            write(&mut s, (x >> 33) % keys, &mut map, &mut t);
        }
        let epoch = s.commit_victims(1, 1);
        assert_eq!(s.commit_victims(1, 1), epoch, "a full list changes nothing");
        let victim = s.committed_victims()[0];
        let mut hinted = Vec::new();
        s.committed_keys(&mut hinted);
        assert_eq!(hinted.len() as u32, s.valid_pages(Pbn(victim)));
        let copies0 = s.counts().gc_migrations;
        for k in hinted {
            write(&mut s, k, &mut map, &mut t);
        }
        // Write until the victim is collected.
        let mut n = 0;
        while s.committed_victims().contains(&victim) {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            write(&mut s, (x >> 33) % keys, &mut map, &mut t);
            n += 1;
            assert!(n < keys * 4, "the committed victim is never collected");
        }
        assert_ne!(s.victim_epoch(), epoch);
        assert_eq!(s.block_use(Pbn(victim)), BlockUse::Free);
        // Other victims GC took meanwhile may have needed copies; this one needed none, so the
        // copies made are at most those of the blocks collected before it (none: it was first).
        assert_eq!(
            s.counts().gc_migrations,
            copies0,
            "the emptied victim needed no copy"
        );
        s.check().unwrap();
    }
}
