//! `fast`: the hybrid log-block FTL FAST (Lee et al., "A log buffer-based flash translation
//! layer using fully-associative sector translation", ACM TECS 6(3), 2007).
//!
//! Data blocks are block-mapped (page `i` of logical block `L` at page `i` of `L`'s data block).
//! Updates go to log blocks, which are page-mapped:
//! - one sequential-write (SW) log block, owned by one logical block, filled in offset order from
//!   offset 0. When it is full it replaces its data block (switch merge); when a new sequential
//!   run starts elsewhere, its missing pages are copied in first (partial merge);
//! - `rw_log_blocks` random-write (RW) log blocks shared by all logical blocks (fully
//!   associative), filled one at a time. When all are full, the oldest is reclaimed: every
//!   logical block with a valid page in it is rewritten into a fresh data block from its newest
//!   copies (full merge), and the log block is erased.
//!
//! A write to a page that its data block has not programmed yet (at or beyond the block's next
//! free page, with no newer copy in a log) goes straight into the data block, as FAST does for
//! first writes; so a sequential fill costs no merges.
//!
//! Trims are page-precise in RAM and made durable by a trim record (a page in the current RW log
//! block, `Purpose::Mapping`) naming the discarded range and a sequence number.
//!
//! On-flash metadata: the OOB record of every page (`oob.rs`): kind (data, trim or pad), the log
//! flag (RW log page), key = logical page, a per-page `seq` (global, strictly increasing), and
//! `aux` = the version of the physical block (its allocation sequence number; trim records: the
//! page count).
//!
//! Invariants:
//! 1. Each logical page has at most one *newest* copy: in the RAM log map (SW, RW, or a recovery
//!    leftover block) or else as a valid page of its data block; only the newest copy has its
//!    `valid` bit set. On flash, it is the readable copy with the highest `seq` not covered by a
//!    trim record with a higher `seq`.
//! 2. At most one SW log block and at most `rw_log_blocks` RW log blocks exist (recovery may
//!    find more RW blocks if the option shrank; they are reclaimed first); each logical block has
//!    at most one data block.
//! 3. A block is erased only when none of its pages is a newest copy (copies are programmed
//!    first, with higher `seq`), and an RW block holding trim records only after every block that
//!    may hold an older copy of a trimmed page has been rewritten; RW blocks are reclaimed oldest
//!    first, so an RW block older than a trim record is always gone before it.
//! 4. A program happens before the RAM maps point at it; a failed program changes no map.
//! 5. Every write and trim is on flash when it returns (no write cache). On SLC `flush` only
//!    counts; on MLC/TLC a write or trim is durable once FLUSH or FUA completes its word line
//!    with pads (common invariant 4), and every merge completes its target's last word line
//!    before it erases a source, as recovery does before its clean-ups. A pad in an SW log can
//!    cover an offset whose newest copy is still in the data block: closing that log is then a
//!    full merge, not a partial one.
//! 6. A grown-bad block is never programmed or erased again; it keeps its records for good, so
//!    every logical page with a record in one has, once an operation returns, a newest copy on a
//!    good block with a higher `seq` (a trim of such a page writes zeros instead of unmapping
//!    it). Its pages are read only as sources, to move them off it.
//!
//! Bad blocks: a failed program (host page, pad, trim record or merge copy) retires its block:
//! its newest copies are moved by full merges of their logical blocks (a failed merge target
//! becomes an extra block and the merge starts again), then the write is retried elsewhere;
//! `NoSpace` once no good block is left. Recovery gives grown-bad blocks no role (no data block,
//! no log), moves any newest copy still on one, and restores invariant 6.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::BuildHasherDefault;

use nand::{Nand, Nanos, Pbn, Purpose};
use serde::{Deserialize, Serialize};

use crate::block::common::{
    chunks, exposed_blocks, failed_program_block, is_block_failure, logical_blocks, scan_device,
    shared_block_device_methods, Bits, Flash, FreePool, PadRecord, CYC_HASH, CYC_LOOKUP,
    CYC_MERGE_PAGE, CYC_REQUEST, CYC_UPDATE, NONE,
};
use crate::block_device::{check_range, check_request_of, BlockDevice, Counters, FtlError};
use crate::controller::{Controller, ControllerConfig};
use crate::oob::{BlockScan, OobRecord, PageKind, FLAG_LOG};

/// Options of FAST.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FastOptions {
    /// Fraction of physical blocks not exposed as capacity: it holds the log blocks, merge
    /// targets and the bad-block reserve. Default 0.07 (usual consumer-SSD over-provisioning).
    pub spare_factor: f64,
    /// Random-write log blocks. Default (`None`): 3% of the physical blocks, at least 2, a log
    /// buffer of a few percent of capacity as hybrid-FTL evaluations commonly size it.
    pub rw_log_blocks: Option<u32>,
    pub controller: ControllerConfig,
}

impl Default for FastOptions {
    fn default() -> Self {
        FastOptions {
            spare_factor: 0.07,
            rw_log_blocks: None,
            controller: ControllerConfig::default(),
        }
    }
}

impl FastOptions {
    /// The number of RW log blocks for a device of `blocks` physical blocks.
    pub fn rw_log_blocks_for(&self, blocks: u32) -> u32 {
        self.rw_log_blocks
            .unwrap_or_else(|| ((f64::from(blocks) * 0.03).round() as u32).max(2))
    }
}

/// Merges by kind (FAST's three).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeCounts {
    pub switch: u64,
    pub partial: u64,
    pub full: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Role {
    #[default]
    Free,
    Data,
    Sw,
    Rw,
    /// A second positional block of a logical block (found by recovery, or a merge target or
    /// SW log whose program failed); merged away at once.
    Extra,
    /// Grown bad: never programmed or erased again; its pages are read only as merge sources.
    Bad,
}

#[derive(Clone, Copy, Debug, Default)]
struct Phys {
    next_free: u32,
    version: u64,
    role: Role,
    lbn: u64,
    /// Newest copies in this block that the log map points at (RW and leftover blocks).
    logged: u32,
}

const NO_LPN: u64 = u64::MAX;

/// How a merge target's last word line was completed (`Fast::seal_merge_target`).
enum Sealed {
    /// Padded; the pads are done at this time.
    Done(Nanos),
    /// A pad failed and the logical block was merged again elsewhere, done at this time.
    Remerged(Nanos),
}

/// One RW log block: which logical page each page holds, and its trim records.
#[derive(Clone, Debug)]
struct RwLog {
    pbn: u32,
    lpns: Vec<u64>,
    /// (first page, pages, seq) of each trim record in this block.
    trims: Vec<(u64, u64, u64)>,
}

type FixedHasher = BuildHasherDefault<DefaultHasher>;

/// The FAST hybrid FTL.
#[derive(Debug)]
pub struct Fast {
    f: Flash,
    ctrl: Controller,
    c: Counters,
    logical_blocks: u32,
    rw_max: usize,
    data: Vec<u32>,
    pb: Vec<Phys>,
    valid: Bits,
    /// Newest copies that live outside their data block (invariant 1). A fixed hasher keeps
    /// runs deterministic; the map is never iterated.
    log_map: HashMap<u64, u64, FixedHasher>,
    rw: VecDeque<RwLog>,
    sw: Option<u32>,
    extras: Vec<u32>,
    free: FreePool,
    seq: u64,
    rw_die: u32,
    merges: MergeCounts,
    /// Logical pages with a record in a grown-bad block. Such a block is never erased, so its
    /// stale records stay on flash for good; invariant 6 keeps them from ever winning.
    bad_lpns: BTreeSet<u64>,
}

impl Fast {
    /// Formats `nand` and starts an empty device.
    pub fn new(nand: Nand, opts: &FastOptions) -> Result<Self, FtlError> {
        Self::format(Flash::new(nand)?, opts)
    }

    /// `new` with logical pages of one whole flash page of any size (served in 4 KiB sectors
    /// by `crate::sectors::Sectors`).
    pub(crate) fn new_whole_pages(nand: Nand, opts: &FastOptions) -> Result<Self, FtlError> {
        Self::format(Flash::whole_pages(nand)?, opts)
    }

    fn format(mut f: Flash, opts: &FastOptions) -> Result<Self, FtlError> {
        let rw = opts.rw_log_blocks_for(f.geo.blocks());
        if rw == 0 {
            return Err(FtlError::Config(
                "FAST needs at least one RW log block".into(),
            ));
        }
        // Spare: the RW logs, the SW log, one merge target, one block of slack.
        let logical = logical_blocks(&f, opts.spare_factor, rw + 3)?;
        let now = f.nand.now_ns();
        f.format(now)?;
        let mut me = Self::empty(f, opts, logical, rw);
        for pbn in 0..me.f.geo.blocks() {
            if !me.f.is_bad(pbn) {
                me.free.push(me.f.die_of(pbn), pbn);
            }
        }
        Ok(me)
    }

    fn empty(f: Flash, opts: &FastOptions, logical: u32, rw: u32) -> Self {
        let blocks = f.geo.blocks();
        Fast {
            ctrl: Controller::new(&opts.controller),
            c: Counters::new(&f.nand),
            logical_blocks: logical,
            rw_max: rw as usize,
            data: vec![NONE; logical as usize],
            pb: vec![Phys::default(); blocks as usize],
            valid: Bits::new(f.geo.pages()),
            log_map: HashMap::default(),
            rw: VecDeque::new(),
            sw: None,
            extras: Vec::new(),
            free: FreePool::new(f.geo.dies()),
            seq: 0,
            rw_die: 0,
            merges: MergeCounts::default(),
            bad_lpns: BTreeSet::new(),
            f,
        }
    }

    /// Rebuilds FAST from what is on `nand` (after a power cut: `nand.power_on()` first).
    pub fn open(nand: Nand, opts: &FastOptions) -> Result<Self, FtlError> {
        Self::recover(Flash::new(nand)?, opts)
    }

    /// `open` for logical pages of one whole flash page (`new_whole_pages`).
    pub(crate) fn open_whole_pages(nand: Nand, opts: &FastOptions) -> Result<Self, FtlError> {
        Self::recover(Flash::whole_pages(nand)?, opts)
    }

    /// Rebuilds FAST from a scan of every block: the newest copies, the blocks' roles, the RW
    /// logs and the mapping, then the clean-ups a power cut may have left undone.
    fn recover(f: Flash, opts: &FastOptions) -> Result<Self, FtlError> {
        let rw = opts.rw_log_blocks_for(f.geo.blocks()).max(1);
        let logical = exposed_blocks(&f, opts.spare_factor)?;
        let mut me = Self::empty(f, opts, logical, rw);
        let now = me.f.nand.now_ns();
        let (scan, t) = scan_device(&mut me.f, &mut me.ctrl, now)?;
        let ppb = u64::from(me.f.ppb);
        let capacity = u64::from(logical) * ppb;

        // Newest copy of every logical page (invariant 1), then trims.
        let best = me.newest_copies(&scan, capacity)?;
        // Roles: RW logs (oldest first by their first sequence number), positional blocks.
        let (mut rw_found, dirty) = me.assign_roles(&scan, ppb)?;
        rw_found.sort_unstable();
        for &(_, pbn) in &rw_found {
            me.pb[pbn as usize].role = Role::Rw;
            let mut log = RwLog {
                pbn,
                lpns: vec![NO_LPN; me.f.ppb as usize],
                trims: Vec::new(),
            };
            for &(page, rec) in &scan[pbn as usize].records {
                match rec.kind {
                    PageKind::Data => log.lpns[page as usize] = rec.key,
                    PageKind::Trim => log.trims.push((rec.key, rec.aux, rec.seq)),
                    _ => {} // pads; other kinds were refused above
                }
            }
            me.rw.push_back(log);
        }
        for (lpn, &(seq, ppn)) in best.iter().enumerate() {
            if seq == 0 {
                continue;
            }
            me.valid.set(ppn);
            let pbn = me.f.geo.block_of(nand::Ppn(ppn)).0;
            if me.pb[pbn as usize].role != Role::Data {
                me.log_map.insert(lpn as u64, ppn);
                me.pb[pbn as usize].logged += 1;
            }
        }
        // Invariant 5: a kept block's last word line may hold the only copy of pages whose
        // older copies the clean-ups below erase (a cut between a merge's copies and its pads).
        for (pbn, s) in scan.iter().enumerate() {
            if !s.records.is_empty() && !s.bad {
                me.f.note_scanned_block(pbn as u32, s.next_free);
            }
        }
        let t = me.pair_word_lines(t)?;
        // Clean-ups, each safe against another power cut (invariant 3): erase blocks holding
        // nothing we need, then merge away the extra positional blocks.
        for pbn in dirty {
            me.retire_at(t, pbn, Purpose::Recovery)?;
        }
        while let Some(&extra) = me.extras.first() {
            let lbn = me.pb[extra as usize].lbn;
            me.full_merge(t, lbn)?;
        }
        // Finish moving newest copies off grown-bad blocks (a cut during an evacuation), then
        // restore invariant 6 for their trimmed pages.
        let ppb32 = me.f.ppb;
        let mut lbns: Vec<u64> = me
            .bad_lpns
            .iter()
            .filter(|&&l| {
                me.newest(l).is_some_and(|ppn| {
                    me.pb[me.f.geo.block_of(nand::Ppn(ppn)).0 as usize].role == Role::Bad
                })
            })
            .map(|&l| l / u64::from(ppb32))
            .collect();
        lbns.dedup();
        for lbn in lbns {
            me.full_merge(t, lbn)?;
        }
        me.tombstones(t)?;
        me.c = Counters::new(&me.f.nand);
        Ok(me)
    }

    /// `recover`'s first step: the newest copy (seq, ppn) of every logical page (invariant 1),
    /// seq 0 where there is none or a later trim covers it; also raises `seq` past everything
    /// seen. A step because it only reads the scan, whatever the blocks' roles.
    fn newest_copies(
        &mut self,
        scan: &[BlockScan],
        capacity: u64,
    ) -> Result<Vec<(u64, u64)>, FtlError> {
        let mut best: Vec<(u64, u64)> = vec![(0, 0); capacity as usize];
        let mut trims = Vec::new();
        for (pbn, s) in scan.iter().enumerate() {
            for &(page, rec) in &s.records {
                self.seq = self.seq.max(rec.seq);
                match rec.kind {
                    PageKind::Data => {
                        if rec.key >= capacity {
                            return Err(FtlError::Recovery(format!(
                                "block {pbn} holds logical page {}, beyond the {capacity} these options expose; open with the options it was formatted with",
                                rec.key
                            )));
                        }
                        self.seq = self.seq.max(rec.aux);
                        if rec.seq > best[rec.key as usize].0 {
                            best[rec.key as usize] = (rec.seq, self.f.ppn(pbn as u32, page).0);
                        }
                    }
                    PageKind::Trim => trims.push((rec.key, rec.aux, rec.seq)),
                    PageKind::Pad => {}
                    PageKind::Translation | PageKind::Checkpoint | PageKind::MapCheckpoint => {
                        return Err(not_fast(pbn, rec))
                    }
                }
            }
        }
        for &(start, count, seq) in &trims {
            for lpn in start.min(capacity)..start.saturating_add(count).min(capacity) {
                if best[lpn as usize].0 < seq {
                    best[lpn as usize].0 = 0;
                }
            }
        }
        Ok(best)
    }

    /// `recover`'s second step: each scanned block's role (free, dirty, grown bad, RW log,
    /// data or extra positional block); returns the RW logs (first seq, block) and the dirty
    /// blocks, for the steps that rebuild and erase them. A step because roles are decided
    /// per block, from its records alone.
    #[allow(clippy::type_complexity)]
    fn assign_roles(
        &mut self,
        scan: &[BlockScan],
        ppb: u64,
    ) -> Result<(Vec<(u64, u32)>, Vec<u32>), FtlError> {
        let mut rw_found: Vec<(u64, u32)> = Vec::new();
        let mut dirty = Vec::new();
        for (pbn, s) in scan.iter().enumerate() {
            let pbn = pbn as u32;
            let Some(&(_, first)) = s.records.first() else {
                if !s.bad && !s.is_clean() {
                    dirty.push(pbn);
                } else if s.is_clean() {
                    self.free.push(self.f.die_of(pbn), pbn);
                }
                continue;
            };
            if s.bad {
                // Grown bad (invariant 6): a readable source only, never a data block or log.
                self.pb[pbn as usize].role = Role::Bad;
                for &(_, r) in s.records.iter().filter(|(_, r)| r.kind == PageKind::Data) {
                    self.bad_lpns.insert(r.key);
                }
                continue;
            }
            self.pb[pbn as usize].next_free = s.next_free;
            if s.records.iter().any(|(_, r)| r.log()) {
                rw_found.push((s.records.iter().map(|(_, r)| r.seq).min().unwrap_or(0), pbn));
                continue;
            }
            let lbn = first.key / ppb;
            if s.records.iter().any(|&(page, r)| {
                r.key / ppb != lbn || r.key % ppb != u64::from(page) || r.aux != first.aux
            }) {
                return Err(FtlError::Recovery(format!(
                    "block {pbn} mixes logical blocks; not a FAST device"
                )));
            }
            let p = &mut self.pb[pbn as usize];
            p.lbn = lbn;
            p.version = first.aux;
            let d = self.data[lbn as usize];
            if d == NONE {
                p.role = Role::Data;
                self.data[lbn as usize] = pbn;
            } else {
                // Keep the older block as the data block; the newer is merged away below.
                let (keep, extra) = if self.pb[d as usize].version < first.aux {
                    (d, pbn)
                } else {
                    (pbn, d)
                };
                self.pb[keep as usize].role = Role::Data;
                self.pb[extra as usize].role = Role::Extra;
                self.data[lbn as usize] = keep;
                self.extras.push(extra);
            }
        }
        Ok((rw_found, dirty))
    }

    pub fn merges(&self) -> MergeCounts {
        self.merges
    }

    /// Mapping-table bytes: a 4-byte block number per logical block (data-block map) plus a
    /// 4-byte physical page number per page of every log block (RW and SW).
    pub fn mapping_bytes(&self) -> u64 {
        4 * u64::from(self.logical_blocks) + 4 * (self.rw_max as u64 + 1) * u64::from(self.f.ppb)
    }

    pub fn into_nand(self) -> Nand {
        self.f.nand
    }

    fn lbn_of(&self, lpn: u64) -> (u64, u32) {
        let ppb = u64::from(self.f.ppb);
        (lpn / ppb, (lpn % ppb) as u32)
    }

    /// The newest copy of `lpn` (invariant 1).
    fn newest(&self, lpn: u64) -> Option<u64> {
        if let Some(&ppn) = self.log_map.get(&lpn) {
            return Some(ppn);
        }
        let (lbn, off) = self.lbn_of(lpn);
        let d = self.data[lbn as usize];
        if d == NONE {
            return None;
        }
        let ppn = self.f.ppn(d, off).0;
        self.valid.get(ppn).then_some(ppn)
    }

    /// Forgets the newest copy of `lpn` (it was superseded, copied, or trimmed).
    fn invalidate(&mut self, lpn: u64) {
        if let Some(ppn) = self.log_map.remove(&lpn) {
            self.valid.clear(ppn);
            let pbn = self.f.geo.block_of(nand::Ppn(ppn)).0;
            let p = &mut self.pb[pbn as usize];
            p.logged = p.logged.saturating_sub(1);
        } else if let Some(ppn) = self.newest(lpn) {
            self.valid.clear(ppn);
        }
    }

    fn alloc(&mut self, prefer_die: u32, role: Role, lbn: u64) -> Result<u32, FtlError> {
        let pbn = self
            .free
            .pop(prefer_die)
            .ok_or(FtlError::NoSpace("a FAST log or merge block"))?;
        self.seq += 1;
        self.pb[pbn as usize] = Phys {
            next_free: 0,
            version: self.seq,
            role,
            lbn,
            logged: 0,
        };
        Ok(pbn)
    }

    fn die_for(&self, lbn: u64) -> u32 {
        (lbn % u64::from(self.f.geo.dies())) as u32
    }

    /// Programs `data` as logical page `lpn` at page `page` of `pbn` (padding skipped pages on
    /// MLC/TLC), with a fresh sequence number.
    #[allow(clippy::too_many_arguments)]
    fn program_page(
        &mut self,
        t: Nanos,
        pbn: u32,
        page: u32,
        lpn: u64,
        data: Option<&[u8]>,
        flags: u8,
        purpose: Purpose,
    ) -> Result<(Nanos, u64), FtlError> {
        let version = self.pb[pbn as usize].version;
        let mut nf = self.pb[pbn as usize].next_free;
        let lpn_base = lpn.wrapping_sub(u64::from(page)); // only positional pads use it
        let padded = self
            .f
            .pad_to(t, pbn, &mut nf, page, self.pad(lpn_base, version), purpose);
        self.pb[pbn as usize].next_free = nf;
        let mut done = padded?;
        self.seq += 1;
        let rec = OobRecord::new(PageKind::Data, lpn, self.seq, version).with_flags(flags);
        let ppn = self.f.ppn(pbn, page);
        done = done.max(match data {
            Some(d) => self.f.program(t, ppn, d, &rec, purpose)?,
            None => self.f.program_buf(t, ppn, &rec, purpose)?,
        });
        Ok((done, ppn.0))
    }

    /// Copies the newest copy `src` of `lpn` to page `page` of `dst` (a merge step).
    fn copy_page(
        &mut self,
        t: Nanos,
        src: u64,
        dst: u32,
        page: u32,
        lpn: u64,
    ) -> Result<Nanos, FtlError> {
        let r = self.f.read_buf(t, nand::Ppn(src), Purpose::Gc)?;
        let (done, ppn) = self.program_page(r, dst, page, lpn, None, 0, Purpose::Gc)?;
        self.invalidate(lpn);
        self.valid.set(ppn);
        self.c.gc.migrations += 1;
        Ok(done)
    }

    /// Erases a block nobody needs and returns it to the pool (unless it went bad).
    fn retire_at(&mut self, at: Nanos, pbn: u32, purpose: Purpose) -> Result<(), FtlError> {
        self.valid
            .clear_range(self.f.geo.first_page(Pbn(pbn)).0, u64::from(self.f.ppb));
        self.pb[pbn as usize] = Phys::default();
        if self.f.is_bad(pbn) {
            // Grown bad: never erased again (it keeps its records; invariant 6).
            self.pb[pbn as usize].role = Role::Bad;
            return Ok(());
        }
        match self.f.erase(at, pbn, purpose) {
            Ok(_) => {
                if purpose == Purpose::Gc {
                    self.c.gc.erases += 1;
                }
                self.free.push(self.f.die_of(pbn), pbn);
                Ok(())
            }
            Err(e) if is_block_failure(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Full merge: rewrites logical block `lbn` from its newest copies into a fresh data block,
    /// then erases its old data block, its SW log (if it owns it) and any leftover blocks.
    fn full_merge(&mut self, t: Nanos, lbn: u64) -> Result<Nanos, FtlError> {
        let ppb = self.f.ppb;
        let t = self.ctrl.charge(t, CYC_MERGE_PAGE * u64::from(ppb));
        let base = lbn * u64::from(ppb);
        let mut done = t;
        let any = (0..ppb).any(|p| self.newest(base + u64::from(p)).is_some());
        let old = self.data[lbn as usize];
        if any {
            let dst = self.alloc(self.die_for(lbn), Role::Data, lbn)?;
            for p in 0..ppb {
                if let Some(src) = self.newest(base + u64::from(p)) {
                    match self.copy_page(t, src, dst, p, base + u64::from(p)) {
                        Ok(d) => done = done.max(d),
                        Err(e) => {
                            // The copies made so far are newest copies: keep them findable
                            // (invariant 1) in `dst`, now an extra block of `lbn`.
                            self.abandon(dst);
                            if failed_program_block(&e, &self.f.geo).is_some() {
                                // `dst` went bad: merge again into another block.
                                return self.full_merge(t, lbn);
                            }
                            return Err(e);
                        }
                    }
                }
            }
            match self.seal_merge_target(t, dst, lbn)? {
                Sealed::Done(d) => done = done.max(d),
                Sealed::Remerged(d) => return Ok(d),
            }
            self.data[lbn as usize] = dst;
            self.merges.full += 1;
        } else {
            self.data[lbn as usize] = NONE;
        }
        if old != NONE {
            self.retire_at(done, old, Purpose::Gc)?;
        }
        if let Some(s) = self.sw.filter(|&s| self.pb[s as usize].lbn == lbn) {
            self.sw = None;
            self.retire_at(done, s, Purpose::Gc)?;
        }
        while let Some(i) = self
            .extras
            .iter()
            .position(|&e| self.pb[e as usize].lbn == lbn)
        {
            let e = self.extras.swap_remove(i);
            self.retire_at(done, e, Purpose::Gc)?;
        }
        Ok(done)
    }

    /// Closes the SW log block: switch merge if it is full, else partial merge (copy the pages
    /// it lacks); either way it becomes its logical block's data block.
    fn close_sw(&mut self, t: Nanos) -> Result<Nanos, FtlError> {
        let Some(s) = self.sw.take() else {
            return Ok(t);
        };
        let ppb = self.f.ppb;
        let lbn = self.pb[s as usize].lbn;
        let base = lbn * u64::from(ppb);
        let k = self.pb[s as usize].next_free;
        let old = self.data[lbn as usize];
        if old != NONE && (0..k).any(|p| self.valid.get(self.f.ppn(old, p).0)) {
            // Pads (invariant 5) took offsets whose newest copy is still in the data block:
            // `s` cannot take them, so the logical block is rewritten whole.
            self.abandon(s);
            return self.full_merge(t, lbn);
        }
        let t = self.ctrl.charge(t, CYC_MERGE_PAGE * u64::from(ppb));
        let mut done = t;
        if k < ppb {
            for p in k..ppb {
                if let Some(src) = self.newest(base + u64::from(p)) {
                    match self.copy_page(t, src, s, p, base + u64::from(p)) {
                        Ok(d) => done = done.max(d),
                        Err(e) => {
                            // As in `full_merge`: the SW block becomes an extra block, whose
                            // copies stay newest until a full merge moves them.
                            self.abandon(s);
                            if failed_program_block(&e, &self.f.geo).is_some() {
                                return self.full_merge(t, lbn);
                            }
                            return Err(e);
                        }
                    }
                }
            }
            match self.seal_merge_target(t, s, lbn)? {
                Sealed::Done(d) => done = done.max(d),
                Sealed::Remerged(d) => return Ok(d),
            }
            self.merges.partial += 1;
        } else {
            self.merges.switch += 1;
        }
        // The SW pages that are still newest stop being log copies: they are data pages now.
        for p in 0..k {
            let lpn = base + u64::from(p);
            let ppn = self.f.ppn(s, p).0;
            if self.log_map.get(&lpn) == Some(&ppn) {
                self.log_map.remove(&lpn);
            }
        }
        let p = &mut self.pb[s as usize];
        p.role = Role::Data;
        p.logged = 0;
        self.data[lbn as usize] = s;
        if old != NONE {
            debug_assert_eq!(
                self.valid
                    .count_range(self.f.geo.first_page(Pbn(old)).0, u64::from(ppb)),
                0,
                "old data block still valid"
            );
            self.retire_at(done, old, Purpose::Gc)?;
        }
        Ok(done)
    }

    /// Reclaims the oldest RW log block (invariant 3).
    fn reclaim_rw(&mut self, t: Nanos) -> Result<Nanos, FtlError> {
        let Some(victim) = self.rw.front().cloned() else {
            return Ok(t);
        };
        let ppb = u64::from(self.f.ppb);
        let mut lbns: Vec<u64> = Vec::new();
        for (page, &lpn) in victim.lpns.iter().enumerate() {
            if lpn != NO_LPN
                && self.valid.get(self.f.ppn(victim.pbn, page as u32).0)
                && !lbns.contains(&(lpn / ppb))
            {
                lbns.push(lpn / ppb);
            }
        }
        // The merges of different logical blocks are independent: issue them all at `t`.
        let mut done = t;
        for lbn in lbns {
            done = done.max(self.full_merge(t, lbn)?);
        }
        for &(start, count, seq) in &victim.trims {
            let end = start
                .saturating_add(count)
                .min(u64::from(self.logical_blocks) * ppb);
            let mut lbn = start / ppb;
            while lbn * ppb < end {
                let lo = if lbn == start / ppb {
                    (start % ppb) as u32
                } else {
                    0
                };
                let d = self.data[lbn as usize];
                let stale = |p: &Phys| p.version < seq && p.next_free > lo;
                let mut needs = d != NONE && stale(&self.pb[d as usize]);
                if let Some(s) = self.sw.filter(|&s| self.pb[s as usize].lbn == lbn) {
                    needs |= stale(&self.pb[s as usize]);
                }
                if needs {
                    done = done.max(self.full_merge(t, lbn)?);
                }
                lbn += 1;
            }
        }
        debug_assert_eq!(
            self.pb[victim.pbn as usize].logged, 0,
            "victim still holds newest copies"
        );
        self.rw.pop_front();
        self.retire_at(done, victim.pbn, Purpose::Gc)?;
        Ok(done)
    }

    /// The RW log page the next log write goes to: (time it may start, block, page).
    fn rw_slot(&mut self, t: Nanos) -> Result<(Nanos, u32, u32), FtlError> {
        if let Some(back) = self.rw.back() {
            let nf = self.pb[back.pbn as usize].next_free;
            if nf < self.f.ppb && !self.f.is_bad(back.pbn) {
                return Ok((t, back.pbn, nf));
            }
        }
        let mut t = t;
        while self.rw.len() >= self.rw_max {
            t = self.reclaim_rw(t)?;
        }
        // Successive RW blocks rotate over the dies.
        self.rw_die = (self.rw_die + 1) % self.f.geo.dies();
        let pbn = self.alloc(self.rw_die, Role::Rw, 0)?;
        self.rw.push_back(RwLog {
            pbn,
            lpns: vec![NO_LPN; self.f.ppb as usize],
            trims: Vec::new(),
        });
        Ok((t, pbn, 0))
    }

    /// Writes one logical page; a failed program retires its block (its pages are moved off it)
    /// and the write is retried on another block, until the spare runs out (`NoSpace`).
    fn write_page(&mut self, t: Nanos, lpn: u64, data: &[u8]) -> Result<Nanos, FtlError> {
        let mut t = t;
        for _ in 0..self.f.geo.blocks() {
            match self.write_page_once(t, lpn, data) {
                Err(e) => match failed_program_block(&e, &self.f.geo) {
                    Some(pbn) => t = self.evacuate(t, pbn)?,
                    None => return Err(e),
                },
                ok => return ok,
            }
        }
        Err(FtlError::NoSpace("a good block for a FAST write"))
    }

    /// Makes positional block `pbn` (data block, SW log or extra) an extra block of its logical
    /// block: its newest copies move into the log map (invariant 1) so that the next full merge
    /// copies them and retires it. A grown-bad block's pages are remembered (invariant 6).
    fn abandon(&mut self, pbn: u32) {
        let lbn = self.pb[pbn as usize].lbn;
        let base = lbn * u64::from(self.f.ppb);
        if self.data[lbn as usize] == pbn {
            self.data[lbn as usize] = NONE;
        }
        if self.sw == Some(pbn) {
            self.sw = None;
        }
        let bad = self.f.is_bad(pbn);
        for p in 0..self.f.ppb {
            let (lpn, ppn) = (base + u64::from(p), self.f.ppn(pbn, p).0);
            if bad && p < self.pb[pbn as usize].next_free {
                self.bad_lpns.insert(lpn);
            }
            if self.valid.get(ppn) && self.log_map.get(&lpn) != Some(&ppn) {
                self.log_map.insert(lpn, ppn);
                self.pb[pbn as usize].logged += 1;
            }
        }
        self.pb[pbn as usize].role = Role::Extra;
        if !self.extras.contains(&pbn) {
            self.extras.push(pbn);
        }
    }

    /// FAST's pad record: `seq` the current sequence number, `aux` the block's version.
    fn pad(&self, lpn_base: u64, version: u64) -> PadRecord {
        PadRecord {
            lpn_base,
            seq: self.seq,
            aux: version,
        }
    }

    /// Completes block `pbn`'s open word line with pads (common invariant 4), each with the
    /// record recovery expects of its role (positional in data and SW blocks).
    fn complete_word_line(&mut self, t: Nanos, pbn: u32) -> Result<Nanos, FtlError> {
        let p = self.pb[pbn as usize];
        let lpn_base = match p.role {
            Role::Data | Role::Sw | Role::Extra => p.lbn * u64::from(self.f.ppb),
            Role::Rw | Role::Free | Role::Bad => 0,
        };
        let mut nf = p.next_free;
        let r =
            self.f
                .complete_word_line(t, pbn, &mut nf, self.pad(lpn_base, p.version), Purpose::Pad);
        self.pb[pbn as usize].next_free = nf;
        r
    }

    /// Completes merge target `dst` of logical block `lbn` (full or partial merge): the copies
    /// on its last word line must be safe from its next program before their sources are
    /// erased (invariant 5). If a pad fails, `dst` becomes an extra block, as after a failed
    /// copy, and the logical block is merged again elsewhere.
    fn seal_merge_target(&mut self, t: Nanos, dst: u32, lbn: u64) -> Result<Sealed, FtlError> {
        match self.complete_word_line(t, dst) {
            Ok(d) => Ok(Sealed::Done(d)),
            Err(e) => {
                self.abandon(dst);
                if failed_program_block(&e, &self.f.geo).is_some() {
                    return Ok(Sealed::Remerged(self.full_merge(t, lbn)?));
                }
                Err(e)
            }
        }
    }

    /// Completes every open word line (invariant 5): FLUSH, FUA and recovery. A block that
    /// goes bad under its pad is evacuated, as after a failed host program.
    fn pair_word_lines(&mut self, t: Nanos) -> Result<Nanos, FtlError> {
        let mut done = t;
        for pbn in self.f.open_word_lines() {
            match self.complete_word_line(t, pbn) {
                Ok(d) => done = done.max(d),
                Err(e) if failed_program_block(&e, &self.f.geo) == Some(pbn) => {
                    done = done.max(self.evacuate(t, pbn)?);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// Block `pbn` failed a program: moves its newest copies to good blocks (full merges of
    /// the logical blocks they belong to), drops it from its role, then restores invariant 6.
    fn evacuate(&mut self, t: Nanos, pbn: u32) -> Result<Nanos, FtlError> {
        let mut done = t;
        match self.pb[pbn as usize].role {
            Role::Data | Role::Sw | Role::Extra => {
                let lbn = self.pb[pbn as usize].lbn;
                self.abandon(pbn);
                done = self.full_merge(t, lbn)?;
            }
            Role::Rw => {
                let ppb = u64::from(self.f.ppb);
                let Some(i) = self.rw.iter().position(|l| l.pbn == pbn) else {
                    return Ok(t);
                };
                let mut lbns: Vec<u64> = Vec::new();
                for (page, &lpn) in self.rw[i].lpns.clone().iter().enumerate() {
                    if lpn == NO_LPN {
                        continue;
                    }
                    self.bad_lpns.insert(lpn);
                    if self.valid.get(self.f.ppn(pbn, page as u32).0)
                        && !lbns.contains(&(lpn / ppb))
                    {
                        lbns.push(lpn / ppb);
                    }
                }
                for lbn in lbns {
                    done = done.max(self.full_merge(t, lbn)?);
                }
                // Its trim records stay on flash for good (it is never erased), which is
                // harmless: every newer copy has a higher `seq`.
                self.rw.remove(i);
                self.retire_at(done, pbn, Purpose::Gc)?;
            }
            Role::Free | Role::Bad => {}
        }
        if self.f.is_bad(pbn) {
            self.pb[pbn as usize].role = Role::Bad;
        }
        self.tombstones(done)
    }

    /// Invariant 6: a logical page with a stale record in a grown-bad block and no newest copy
    /// (trimmed) gets a page of zeros, so that no power cut can bring the stale record back
    /// once the trim record is reclaimed.
    fn tombstones(&mut self, t: Nanos) -> Result<Nanos, FtlError> {
        let need: Vec<u64> = self
            .bad_lpns
            .iter()
            .copied()
            .filter(|&l| self.newest(l).is_none())
            .collect();
        let zeros = vec![0u8; self.f.lp];
        let mut done = t;
        for lpn in need {
            done = done.max(self.write_page(t, lpn, &zeros)?);
        }
        Ok(done)
    }

    /// Writes one logical page (FAST's write path).
    fn write_page_once(&mut self, t: Nanos, lpn: u64, data: &[u8]) -> Result<Nanos, FtlError> {
        let (lbn, off) = self.lbn_of(lpn);
        let t = self.ctrl.charge(t, CYC_HASH + CYC_UPDATE);
        let d = self.data[lbn as usize];
        // First write of the page into its data block (or a fresh data block).
        let logged = self.log_map.contains_key(&lpn);
        if !logged && (d == NONE || (off >= self.pb[d as usize].next_free && !self.f.is_bad(d))) {
            let d = if d == NONE {
                let d = self.alloc(self.die_for(lbn), Role::Data, lbn)?;
                self.data[lbn as usize] = d;
                d
            } else {
                d
            };
            let (done, ppn) = self.program_page(t, d, off, lpn, Some(data), 0, Purpose::Host)?;
            self.valid.set(ppn);
            return Ok(done);
        }
        let sw_owner = self
            .sw
            .map(|s| (s, self.pb[s as usize].lbn, self.pb[s as usize].next_free));
        let (t, pbn, page, flags) = if off == 0 {
            // A new sequential run: the current SW log is merged, a new one starts.
            let t = self.close_sw(t)?;
            let s = self.alloc(self.die_for(lbn), Role::Sw, lbn)?;
            self.sw = Some(s);
            (t, s, 0, 0)
        } else if let Some((s, _, nf)) =
            sw_owner.filter(|&(_, owner, nf)| owner == lbn && off == nf)
        {
            (t, s, nf, 0)
        } else {
            let (t, pbn, page) = self.rw_slot(t)?;
            (t, pbn, page, FLAG_LOG)
        };
        let (done, ppn) = self.program_page(t, pbn, page, lpn, Some(data), flags, Purpose::Host)?;
        self.invalidate(lpn);
        self.valid.set(ppn);
        self.log_map.insert(lpn, ppn);
        self.pb[pbn as usize].logged += 1;
        if flags == FLAG_LOG {
            if let Some(back) = self.rw.back_mut() {
                back.lpns[page as usize] = lpn;
            }
        } else if self.pb[pbn as usize].next_free == self.f.ppb {
            // A full SW log is switched in at once, freeing the old data block.
            return Ok(done.max(self.close_sw(done)?));
        }
        Ok(done)
    }
}

impl BlockDevice for Fast {
    fn name(&self) -> String {
        "fast".into()
    }

    fn capacity_pages(&self) -> u64 {
        u64::from(self.logical_blocks) * u64::from(self.f.ppb)
    }

    fn read(&mut self, at_ns: Nanos, lpn: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        let pages = check_request_of(lpn, buf.len(), self.capacity_pages(), self.f.lp)?;
        let t = self
            .ctrl
            .charge(at_ns, CYC_REQUEST + (CYC_HASH + CYC_LOOKUP) * pages);
        let mut done = t;
        for (i, chunk) in buf.chunks_mut(self.f.lp).enumerate() {
            match self.newest(lpn + i as u64) {
                Some(ppn) => {
                    done = done.max(self.f.read(t, nand::Ppn(ppn), chunk, Purpose::Host)?)
                }
                None => chunk.fill(0),
            }
        }
        self.c.host.reads += pages;
        Ok(done)
    }

    fn write(&mut self, at_ns: Nanos, lpn: u64, data: &[u8], fua: bool) -> Result<Nanos, FtlError> {
        check_request_of(lpn, data.len(), self.capacity_pages(), self.f.lp)?;
        let t = self.ctrl.charge(at_ns, CYC_REQUEST);
        let mut done = t;
        for (i, page) in data.chunks(self.f.lp).enumerate() {
            done = done.max(self.write_page(t, lpn + i as u64, page)?);
            self.c.host.writes += 1;
        }
        if fua {
            done = done.max(self.pair_word_lines(t)?);
        }
        Ok(done)
    }

    fn trim(&mut self, at_ns: Nanos, lpn: u64, pages: u64) -> Result<Nanos, FtlError> {
        check_range(lpn, pages, self.capacity_pages())?;
        let mut t = self.ctrl.charge(at_ns, CYC_REQUEST);
        let mut any = false;
        let mut zero = Vec::new();
        for (lbn, off, n) in chunks(lpn, pages, self.f.ppb) {
            t = self.ctrl.charge(t, CYC_HASH * u64::from(n));
            for p in off..off + n {
                let l = lbn * u64::from(self.f.ppb) + u64::from(p);
                if self.newest(l).is_some() {
                    if self.bad_lpns.contains(&l) {
                        zero.push(l); // invariant 6: overwritten with zeros, not unmapped
                    } else {
                        self.invalidate(l);
                        any = true;
                    }
                }
            }
        }
        let zeros = vec![0u8; self.f.lp];
        for l in zero {
            t = t.max(self.write_page(t, l, &zeros)?);
        }
        self.c.host.trims += pages;
        if !any {
            // Nothing newest was discarded, so no older copy can come back either.
            return Ok(t);
        }
        for _ in 0..self.f.geo.blocks() {
            match self.trim_record(t, lpn, pages) {
                Err(e) => match failed_program_block(&e, &self.f.geo) {
                    // The RW block went bad: move its pages off it, log the record elsewhere.
                    Some(pbn) => t = self.evacuate(t, pbn)?,
                    None => return Err(e),
                },
                ok => return ok,
            }
        }
        Err(FtlError::NoSpace("a good block for a FAST trim record"))
    }

    // flush (invariant 5: nothing is buffered; pads on MLC/TLC), report, nand, nand_mut,
    // into_nand.
    shared_block_device_methods!();
}

impl Fast {
    /// Programs the trim record of `pages` pages from `lpn` into the current RW log block.
    fn trim_record(&mut self, t: Nanos, lpn: u64, pages: u64) -> Result<Nanos, FtlError> {
        let (t, pbn, page) = self.rw_slot(t)?;
        self.seq += 1;
        let rec = OobRecord::new(PageKind::Trim, lpn, self.seq, pages).with_flags(FLAG_LOG);
        let ppn = self.f.ppn(pbn, page);
        let mut nf = self.pb[pbn as usize].next_free;
        let version = self.pb[pbn as usize].version;
        let padded = self.f.pad_to(
            t,
            pbn,
            &mut nf,
            page,
            self.pad(0, version),
            Purpose::Mapping,
        );
        self.pb[pbn as usize].next_free = nf;
        padded?;
        let zeros = std::mem::take(&mut self.f.zeros);
        let r = self.f.program(t, ppn, &zeros, &rec, Purpose::Mapping);
        self.f.zeros = zeros;
        let done = r?;
        if let Some(back) = self.rw.back_mut() {
            back.trims.push((lpn, pages, self.seq));
        }
        Ok(done)
    }
}

/// The error for a record no FAST device writes.
fn not_fast(pbn: usize, rec: OobRecord) -> FtlError {
    FtlError::Recovery(format!(
        "block {pbn} holds a {:?} page (key {}); not a FAST device",
        rec.kind, rec.key
    ))
}

/// Mapping memory of a hybrid (log-block) FTL for `capacity_bytes`: a 4-byte entry per block
/// (data-block map) plus a 4-byte entry per page of the log blocks, which make up `log_share` of
/// the capacity. AMF's 96 MB at 512 GB is reproduced by `log_share` = [`AMF_HYBRID_LOG_SHARE`].
pub fn mapping_bytes_for(
    capacity_bytes: u64,
    page_bytes: u64,
    pages_per_block: u64,
    log_share: f64,
) -> u64 {
    let blocks = capacity_bytes.div_ceil(page_bytes * pages_per_block);
    let log_pages = (capacity_bytes as f64 / page_bytes as f64 * log_share).round() as u64;
    4 * blocks + 4 * log_pages
}

/// The log-block share that reproduces AMF's hybrid FTL figure at 512 GiB (4 KiB pages,
/// 128-page blocks): 4 MiB block map + 4 B x 23/128 of 128 Mi pages (92 MiB) = 96 MiB.
pub const AMF_HYBRID_LOG_SHARE: f64 = 23.0 / 128.0;
