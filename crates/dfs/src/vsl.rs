//! The virtualized flash storage layer (VSL): a sparse virtual block space on a [`FlashSpace`],
//! with read, write, trim, atomic multi-block writes and crash-recoverable allocation (DFS's
//! four requirements of the flash layer). See `docs/dfs.md` for the formats and the proofs.
//!
//! A virtual block is one space unit (4 KiB; a whole flash page on 4 KiB-page devices, a slot of
//! a larger page otherwise). The virtual space has [`VIRTUAL_BLOCKS`] (2^44) blocks; the map
//! ([`SparseMap`]) grows with what is written. Flash holds at most [`Vsl::capacity_blocks`]
//! mapped blocks; a write that would map more fails with [`VslError::NoSpace`].
//!
//! Streams of the space: 0 data (striped over all dies), 1 metadata (trim records and map
//! checkpoints, one block at a time).
//!
//! Every write is a *group*: all its blocks carry one sequence number and, in their OOB `aux`,
//! the group's block count. The previous copies of the group's blocks stay valid in the space
//! (so GC cannot erase them) until the group's last page is programmed; only then is the map
//! switched and the old copies invalidated. Groups are issued one at a time. Recovery keeps a
//! group iff all its blocks are found or a later record exists (atomicity, invariant 3).
//!
//! Checksums (format 2): every data record's `aux` carries, above the group's block count
//! (bits 0..32), the CRC-32 of the block's 4 KiB (bits 32..64). The record is programmed in the
//! same page program as the data and is covered by the record's own CRC, so a block and its
//! checksum are written atomically and GC copies keep both. `read` checks every block it
//! returns (kind, key, checksum) and fails with [`VslError::Corrupt`] instead of returning
//! other bytes; checkpoint pages carry a CRC of the whole page. Recovery counts the units whose
//! OOB reads without error but holds no record ([`Vsl::damaged_units`]): no power cut explains
//! those (a torn page does not read), so the image was changed behind the chip's back and a
//! block may have lost its newest version; the file system decides whether to mount.
//!
//! Durability: an operation is durable when it returns (on MLC/TLC the open word lines are
//! completed with pads before returning, space invariant 9); `sync` is the explicit durability
//! point and only orders on SLC.
//!
//! Invariants (checked by [`Vsl::check`]):
//! 1. `map[v] == l` iff the space's reverse map says unit `l` holds the valid copy of key `v`
//!    in the data stream, outside a group in progress.
//! 2. `meta` holds exactly the valid metadata units: the newest complete checkpoint's pages and
//!    the trim records issued after it.
//! 3. Atomicity: after a power cut, recovery maps, for every block, the content of the newest
//!    group that completed (returned) or, for the one group in progress at the cut, either all
//!    of its blocks or none.
//! 4. Trim: a block trimmed by a trim that returned stays unmapped after any cut until written
//!    again (a trim record, or the checkpoint that replaced it, outlives every older copy).
//! 5. `map.mapped() <= capacity_blocks`.

use fnv::FnvHashMap;
use nand::{Nand, Nanos, Ppn, Purpose};

use ftl::block_device::FtlError;
use ftl::oob::{scan_blocks, OobRecord, PageKind, ScanExtent, OOB_RECORD_BYTES};
use ftl::space::{FlashSpace, LivePage, Move, SpaceConfig, SpaceCounts, UNIT_BYTES};

use crate::map::SparseMap;

/// Bytes of a virtual block.
pub const BLOCK_BYTES: usize = UNIT_BYTES;
/// Blocks of the virtual space (2^44 blocks of 4 KiB: 64 PiB).
pub const VIRTUAL_BLOCKS: u64 = 1 << 44;
/// Default bound of an atomic write, in blocks (4 MiB).
pub const DEFAULT_MAX_ATOMIC_BLOCKS: u32 = 1024;
/// Trim records kept before they are folded into a map checkpoint.
pub const TRIMS_PER_CHECKPOINT: u32 = 64;
/// Extents per checkpoint page: a 16-byte header, then 16-byte (start, blocks) pairs.
pub const CKPT_EXTENTS_PER_PAGE: usize = (BLOCK_BYTES - 16) / 16;
const CKPT_MAGIC: u32 = 0x3243_5356; // "VSC2": format 2, the CRC covers the whole page
/// The checkpoint magic of format 1 (before checksums), recognised only to refuse it clearly.
const CKPT_MAGIC_V1: u32 = 0x4B43_5356; // "VSCK"
/// Bits of a data record's `aux` below the block's CRC (the group's block count).
const AUX_CRC_SHIFT: u32 = 32;

const DATA: u8 = 0;
const META: u8 = 1;
const MAX_UNITS: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum VslError {
    #[error(
        "virtual blocks {start}..{end} are outside the virtual space of {VIRTUAL_BLOCKS} blocks"
    )]
    OutOfRange { start: u64, end: u64 },
    #[error("a buffer of {0} bytes is not a whole number of {BLOCK_BYTES}-byte blocks")]
    Misaligned(usize),
    #[error("an atomic write of {blocks} blocks exceeds the bound of {max} blocks")]
    TooLarge { blocks: u64, max: u32 },
    #[error("the extents of an atomic write overlap at block {0}")]
    Overlap(u64),
    #[error("no space: {mapped} of {capacity} blocks mapped, {wanted} more wanted")]
    NoSpace {
        mapped: u64,
        capacity: u64,
        wanted: u64,
    },
    #[error("invalid VSL configuration: {0}")]
    Config(String),
    #[error("recovery: {0}")]
    Recovery(String),
    /// A block read back is not what was written: the checksum in its OOB record does not
    /// match its bytes, or the record names another block (a corrupt image).
    #[error("virtual block {vbn} at flash unit {unit}: {what}")]
    Corrupt {
        vbn: u64,
        unit: u64,
        what: &'static str,
    },
    /// An image of another format version.
    #[error("{0}")]
    Version(String),
    #[error(transparent)]
    Ftl(#[from] FtlError),
}

impl VslError {
    /// A power loss (the fault plan's cut) ended the operation.
    pub fn is_power_loss(&self) -> bool {
        matches!(self, VslError::Ftl(FtlError::Flash(e)) if e.is_media_error())
            || matches!(
                self,
                VslError::Ftl(FtlError::Flash(
                    nand::NandError::PowerLost | nand::NandError::PoweredOff
                ))
            )
    }
}

/// Knobs of the VSL.
#[derive(Clone, Debug)]
pub struct VslConfig {
    /// Fraction of the flash kept unmapped (GC headroom).
    pub spare_fraction: f64,
    pub max_atomic_blocks: u32,
    pub seed: u64,
}

impl Default for VslConfig {
    fn default() -> Self {
        VslConfig {
            spare_fraction: 0.10,
            max_atomic_blocks: DEFAULT_MAX_ATOMIC_BLOCKS,
            seed: 1,
        }
    }
}

/// What a metadata unit holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Meta {
    Trim,
    Checkpoint,
}

/// Counters of VSL requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VslCounts {
    pub blocks_read: u64,
    pub blocks_written: u64,
    pub blocks_trimmed: u64,
    pub groups: u64,
    pub trim_records: u64,
    pub checkpoints: u64,
    pub syncs: u64,
}

/// What recovery found and did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RecoveryReport {
    pub records: u64,
    pub groups_dropped: u64,
    pub blocks_dropped: u64,
    pub checkpoint_seq: Option<u64>,
    pub trims_applied: u64,
    /// Units whose OOB read without error but held no record (see the module documentation).
    pub damaged_records: u64,
    pub done_ns: Nanos,
}

/// A block whose bytes on flash are not the ones written (`Vsl::scrub`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BadBlock {
    pub vbn: u64,
    pub unit: u64,
    pub what: &'static str,
}

/// The VSL. See the module documentation.
#[derive(Debug)]
pub struct Vsl {
    space: FlashSpace,
    map: SparseMap,
    meta: FnvHashMap<u64, (Meta, u64)>,
    trims_live: u32,
    capacity_blocks: u64,
    max_atomic: u32,
    /// The group in progress: (block, new location).
    pending: Vec<(u64, u64)>,
    moves: Vec<Move>,
    scratch: Vec<(u64, u32)>,
    zero: Vec<u8>,
    counts: VslCounts,
    /// Units found at recovery with a damaged OOB record (see the module documentation).
    damaged: Vec<u64>,
    /// A read's OOB buffer (no allocation per read).
    oob: Vec<u8>,
}

/// A data record's `aux`: the group's block count and the block's CRC-32.
fn data_aux(blocks: u64, crc: u32) -> u64 {
    blocks | (u64::from(crc) << AUX_CRC_SHIFT)
}

/// The group's block count in a data record's `aux`.
fn aux_blocks(aux: u64) -> u64 {
    aux & ((1 << AUX_CRC_SHIFT) - 1)
}

/// Checks a block read from unit `unit` against its OOB record `oob`: a data record of this
/// very block whose CRC matches the bytes.
fn verify(vbn: u64, unit: u64, data: &[u8], oob: &[u8]) -> Result<(), VslError> {
    let what = match OobRecord::decode(oob) {
        None => "its OOB record is damaged",
        Some(r) if r.kind != PageKind::Data || r.key != vbn => "its OOB record names another block",
        Some(r) if (r.aux >> AUX_CRC_SHIFT) as u32 != crc32fast::hash(data) => {
            "data fails its checksum"
        }
        Some(_) => return Ok(()),
    };
    Err(VslError::Corrupt { vbn, unit, what })
}

fn space_config(cfg: &VslConfig) -> SpaceConfig {
    SpaceConfig {
        streams: 2,
        seed: cfg.seed,
        striped: 1 << DATA,
        ..SpaceConfig::default()
    }
}

fn check_cfg(cfg: &VslConfig) -> Result<(), VslError> {
    if !(0.02..=0.9).contains(&cfg.spare_fraction) {
        return Err(VslError::Config(format!(
            "spare fraction {} outside 0.02..=0.9",
            cfg.spare_fraction
        )));
    }
    if cfg.max_atomic_blocks == 0 {
        return Err(VslError::Config("max_atomic_blocks is 0".into()));
    }
    Ok(())
}

impl Vsl {
    /// Formats `nand` (erases what it holds) and returns an empty VSL.
    pub fn format(nand: Nand, cfg: &VslConfig) -> Result<Vsl, VslError> {
        check_cfg(cfg)?;
        let at = nand.now_ns();
        let (space, _) = FlashSpace::format(nand, space_config(cfg), at)?;
        Self::assemble(space, SparseMap::new(), FnvHashMap::default(), 0, cfg)
    }

    fn assemble(
        space: FlashSpace,
        map: SparseMap,
        meta: FnvHashMap<u64, (Meta, u64)>,
        trims_live: u32,
        cfg: &VslConfig,
    ) -> Result<Vsl, VslError> {
        if space.unit_bytes() != BLOCK_BYTES || space.units_per_page() as usize > MAX_UNITS {
            return Err(VslError::Config(format!(
                "units of {} bytes, {} per page",
                space.unit_bytes(),
                space.units_per_page()
            )));
        }
        let total_units = space.geometry().pages() * u64::from(space.units_per_page());
        if total_units >= u64::from(crate::map::NONE) {
            return Err(VslError::Config(format!(
                "{total_units} flash units do not fit 32-bit locations"
            )));
        }
        let usable = space.usable_pages() as f64 * (1.0 - cfg.spare_fraction);
        // Headroom: one atomic group's old and new copies, and the metadata stream's blocks.
        let headroom =
            u64::from(cfg.max_atomic_blocks) + 4 * u64::from(space.pages_per_block()) + 64;
        let capacity_blocks = (usable as u64).saturating_sub(headroom);
        if capacity_blocks == 0 {
            return Err(VslError::Config(
                "the device is too small for the atomic-write bound".into(),
            ));
        }
        Ok(Vsl {
            space,
            map,
            meta,
            trims_live,
            capacity_blocks,
            max_atomic: cfg.max_atomic_blocks,
            pending: Vec::with_capacity(cfg.max_atomic_blocks as usize),
            moves: Vec::new(),
            scratch: Vec::new(),
            zero: vec![0; BLOCK_BYTES],
            counts: VslCounts::default(),
            damaged: Vec::new(),
            oob: Vec::new(),
        })
    }

    pub fn capacity_blocks(&self) -> u64 {
        self.capacity_blocks
    }
    pub fn mapped_blocks(&self) -> u64 {
        self.map.mapped()
    }
    pub fn max_atomic_blocks(&self) -> u32 {
        self.max_atomic
    }
    pub fn map(&self) -> &SparseMap {
        &self.map
    }
    pub fn counts(&self) -> VslCounts {
        self.counts
    }
    pub fn space_counts(&self) -> SpaceCounts {
        self.space.counts()
    }
    pub fn nand(&self) -> &Nand {
        self.space.nand()
    }
    pub fn nand_mut(&mut self) -> &mut Nand {
        self.space.nand_mut()
    }
    pub fn into_nand(self) -> Nand {
        self.space.into_nand()
    }
    pub fn now_ns(&self) -> Nanos {
        self.space.nand().now_ns()
    }
    pub fn is_mapped(&self, vbn: u64) -> bool {
        self.map.get(vbn).is_some()
    }

    fn check_range(start: u64, blocks: u64) -> Result<(), VslError> {
        match start.checked_add(blocks) {
            Some(end) if end <= VIRTUAL_BLOCKS => Ok(()),
            _ => Err(VslError::OutOfRange {
                start,
                end: start.saturating_add(blocks),
            }),
        }
    }

    fn blocks_of(len: usize) -> Result<u64, VslError> {
        if !len.is_multiple_of(BLOCK_BYTES) {
            return Err(VslError::Misaligned(len));
        }
        Ok((len / BLOCK_BYTES) as u64)
    }

    /// Applies the space's moves to the map, the group in progress and the metadata set.
    fn absorb(&mut self) {
        if !self.space.has_moves() {
            return;
        }
        self.space.take_moves(&mut self.moves);
        for m in &self.moves {
            if m.stream == META {
                let v = self.meta.remove(&m.from.0);
                debug_assert!(v.is_some(), "moved metadata unit {:?} unknown", m.from);
                if let Some(v) = v {
                    self.meta.insert(m.to.0, v);
                }
                continue;
            }
            if self.map.relocate(m.key, m.from.0 as u32, m.to.0 as u32) {
                continue;
            }
            let p = self
                .pending
                .iter_mut()
                .find(|(k, l)| *k == m.key && *l == m.from.0);
            debug_assert!(
                p.is_some(),
                "moved unit {:?} of block {} unknown",
                m.from,
                m.key
            );
            if let Some(p) = p {
                p.1 = m.to.0;
            }
        }
        self.moves.clear();
    }

    /// Reads `buf.len() / BLOCK_BYTES` blocks from `vbn`; unmapped blocks read as zeros. Every
    /// mapped block is checked against the checksum in its OOB record: a block that is not
    /// what was written fails with [`VslError::Corrupt`] (never other bytes).
    pub fn read(&mut self, at_ns: Nanos, vbn: u64, buf: &mut [u8]) -> Result<Nanos, VslError> {
        self.read_as(at_ns, vbn, buf, true)
    }

    /// `read` without the checks: for a look at what an image holds before deciding whether
    /// this build can read it (a superblock's version), never for data handed on.
    pub fn read_unverified(
        &mut self,
        at_ns: Nanos,
        vbn: u64,
        buf: &mut [u8],
    ) -> Result<Nanos, VslError> {
        self.read_as(at_ns, vbn, buf, false)
    }

    fn read_as(
        &mut self,
        at_ns: Nanos,
        vbn: u64,
        buf: &mut [u8],
        check: bool,
    ) -> Result<Nanos, VslError> {
        let n = Self::blocks_of(buf.len())?;
        Self::check_range(vbn, n)?;
        let mut end = at_ns;
        // The unit's record: a column read of its 32 bytes on pages of several units; the
        // whole OOB area (the chip's read unit) on pages of one.
        let oob_len = if self.space.units_per_page() == 1 {
            self.space.geometry().oob_size_bytes as usize
        } else {
            OOB_RECORD_BYTES
        };
        let mut oob = std::mem::take(&mut self.oob);
        oob.resize(oob_len, 0xFF);
        let r = self.read_units(at_ns, vbn, buf, &mut oob, check);
        self.oob = oob;
        end = end.max(r?);
        self.counts.blocks_read += n;
        Ok(end)
    }

    fn read_units(
        &mut self,
        at_ns: Nanos,
        vbn: u64,
        buf: &mut [u8],
        oob: &mut [u8],
        check: bool,
    ) -> Result<Nanos, VslError> {
        let mut end = at_ns;
        for (i, chunk) in buf.chunks_exact_mut(BLOCK_BYTES).enumerate() {
            let v = vbn + i as u64;
            match self.map.get(v) {
                None => chunk.fill(0),
                Some(loc) => {
                    let unit = u64::from(loc);
                    let t = self
                        .space
                        .read(at_ns, Ppn(unit), chunk, oob, Purpose::Host)?;
                    end = end.max(t);
                    if check {
                        verify(v, unit, chunk, oob)?;
                    }
                }
            }
        }
        Ok(end)
    }

    /// Reads every mapped block and checks it (as `read` does); returns the blocks that fail,
    /// and when the reads completed. For `fsck`.
    pub fn scrub(&mut self, at_ns: Nanos) -> Result<(Vec<BadBlock>, Nanos), VslError> {
        let mut bad = Vec::new();
        let mut end = at_ns;
        let mut buf = vec![0u8; BLOCK_BYTES];
        for (s, n) in self.map.extents() {
            for v in s..s + n {
                match self.read(at_ns, v, &mut buf) {
                    Ok(t) => end = end.max(t),
                    Err(VslError::Corrupt { vbn, unit, what }) => {
                        bad.push(BadBlock { vbn, unit, what })
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok((bad, end))
    }

    /// Units whose OOB record recovery found damaged (see the module documentation), in
    /// increasing order.
    pub fn damaged_units(&self) -> &[u64] {
        &self.damaged
    }

    /// Where unit `unit` lives: (flash block, page in the block, slot in the page).
    pub fn unit_place(&self, unit: u64) -> (u64, u32, u32) {
        let upp = u64::from(self.space.units_per_page());
        let page = unit / upp;
        let ppb = u64::from(self.space.pages_per_block());
        (page / ppb, (page % ppb) as u32, (unit % upp) as u32)
    }

    /// Writes `data` at `vbn`. Atomic if it spans at most `max_atomic_blocks`; a longer write
    /// is a sequence of atomic groups of that size.
    pub fn write(&mut self, at_ns: Nanos, vbn: u64, data: &[u8]) -> Result<Nanos, VslError> {
        let n = Self::blocks_of(data.len())?;
        Self::check_range(vbn, n)?;
        let step = self.max_atomic as usize * BLOCK_BYTES;
        let mut t = at_ns;
        for (i, chunk) in data.chunks(step).enumerate() {
            t = self.write_atomic(t, &[(vbn + (i * self.max_atomic as usize) as u64, chunk)])?;
        }
        Ok(t)
    }

    /// Writes every extent `(vbn, data)` as one group: after a power cut either all of them
    /// or none is visible (invariant 3). Extents must not overlap; at most `max_atomic_blocks`
    /// blocks in all.
    pub fn write_atomic(
        &mut self,
        at_ns: Nanos,
        extents: &[(u64, &[u8])],
    ) -> Result<Nanos, VslError> {
        let mut total = 0u64;
        let mut fresh = 0u64;
        for (i, (vbn, data)) in extents.iter().enumerate() {
            let n = Self::blocks_of(data.len())?;
            Self::check_range(*vbn, n)?;
            for (w, d) in &extents[..i] {
                let m = (d.len() / BLOCK_BYTES) as u64;
                if *vbn < w + m && *w < vbn + n {
                    return Err(VslError::Overlap((*vbn).max(*w)));
                }
            }
            total += n;
            if total > u64::from(self.max_atomic) {
                return Err(VslError::TooLarge {
                    blocks: total,
                    max: self.max_atomic,
                });
            }
            fresh += (0..n).filter(|b| self.map.get(vbn + b).is_none()).count() as u64;
        }
        if total == 0 {
            return Ok(at_ns);
        }
        if self.map.mapped() + fresh > self.capacity_blocks {
            return Err(VslError::NoSpace {
                mapped: self.map.mapped(),
                capacity: self.capacity_blocks,
                wanted: fresh,
            });
        }
        let seq = self.space.alloc_seq();
        let upp = self.space.units_per_page() as usize;
        self.pending.clear();
        let mut end = at_ns;
        let dummy = OobRecord::new(PageKind::Data, 0, 0, 0);
        let mut units: [(OobRecord, &[u8]); MAX_UNITS] = [(dummy, &[]); MAX_UNITS];
        let mut k = 0usize;
        let mut keys = [0u64; MAX_UNITS];
        let blocks = extents.iter().flat_map(|(vbn, data)| {
            data.chunks_exact(BLOCK_BYTES)
                .enumerate()
                .map(move |(i, c)| (vbn + i as u64, c))
        });
        let mut left = total;
        for (v, chunk) in blocks {
            let aux = data_aux(total, crc32fast::hash(chunk));
            units[k] = (OobRecord::new(PageKind::Data, v, seq, aux), chunk);
            keys[k] = v;
            k += 1;
            left -= 1;
            if k == upp || left == 0 {
                let (first, done) =
                    self.space
                        .write_units(at_ns, DATA, &units[..k], Purpose::Host)?;
                end = end.max(done);
                // Pending first, then the moves: GC may have moved old copies, this group's
                // earlier units, and (evacuating a block whose program failed) these ones.
                for (i, key) in keys[..k].iter().enumerate() {
                    self.pending.push((*key, first.0 + i as u64));
                }
                self.absorb();
                k = 0;
            }
        }
        // Every unit of the group is programmed: switch the map, drop the old copies.
        for i in 0..self.pending.len() {
            let (v, loc) = self.pending[i];
            if let Some(old) = self.map.set(v, loc as u32) {
                self.space.note_replacement(Ppn(loc));
                self.space.invalidate(Ppn(u64::from(old)));
            }
        }
        self.pending.clear();
        end = end.max(self.space.pair_word_lines(end)?);
        self.absorb();
        self.counts.groups += 1;
        self.counts.blocks_written += total;
        Ok(end)
    }

    /// Unmaps `blocks` blocks from `vbn` (durable when it returns, invariant 4).
    pub fn trim(&mut self, at_ns: Nanos, vbn: u64, blocks: u64) -> Result<Nanos, VslError> {
        Self::check_range(vbn, blocks)?;
        if !self.map.any_in(vbn, vbn + blocks) {
            return Ok(at_ns);
        }
        let seq = self.space.alloc_seq();
        let rec = OobRecord::new(PageKind::Trim, vbn, seq, blocks);
        let (loc, mut end) = self
            .space
            .write(at_ns, META, &rec, &self.zero, Purpose::Meta)?;
        // Known before the moves are applied: the space may have moved it already.
        self.meta.insert(loc.0, (Meta::Trim, seq));
        self.absorb();
        self.trims_live += 1;
        let mut found = std::mem::take(&mut self.scratch);
        self.map.mapped_in(vbn, vbn + blocks, &mut found);
        for &(v, _) in &found {
            if let Some(old) = self.map.remove(v) {
                self.space.invalidate(Ppn(u64::from(old)));
            }
        }
        self.counts.blocks_trimmed += found.len() as u64;
        self.counts.trim_records += 1;
        found.clear();
        self.scratch = found;
        if self.trims_live >= TRIMS_PER_CHECKPOINT {
            end = end.max(self.checkpoint(end)?);
        }
        end = end.max(self.space.pair_word_lines(end)?);
        self.absorb();
        Ok(end)
    }

    /// The durability point (fsync): completes open word lines on MLC/TLC.
    pub fn sync(&mut self, at_ns: Nanos) -> Result<Nanos, VslError> {
        self.counts.syncs += 1;
        let t = self.space.pair_word_lines(at_ns)?;
        self.absorb();
        Ok(t)
    }

    /// Idle-time garbage collection.
    pub fn background(&mut self, at_ns: Nanos, max_victims: u32) -> Result<Nanos, VslError> {
        let t = self.space.background_gc(at_ns, max_victims)?;
        self.absorb();
        Ok(t)
    }

    /// Writes a map checkpoint (the mapped extents) and retires the older checkpoint and every
    /// trim record (invariants 2 and 4).
    pub fn checkpoint(&mut self, at_ns: Nanos) -> Result<Nanos, VslError> {
        let extents = self.map.extents();
        let pages = extents.len().div_ceil(CKPT_EXTENTS_PER_PAGE).max(1);
        let seq = self.space.alloc_seq();
        let mut page = vec![0u8; BLOCK_BYTES];
        let mut end = at_ns;
        for p in 0..pages {
            let part = extents
                .get(p * CKPT_EXTENTS_PER_PAGE..)
                .map(|e| &e[..e.len().min(CKPT_EXTENTS_PER_PAGE)])
                .unwrap_or(&[]);
            encode_checkpoint_page(&mut page, part);
            let rec = OobRecord::new(PageKind::Checkpoint, p as u64, seq, pages as u64);
            let (loc, done) = self.space.write(at_ns, META, &rec, &page, Purpose::Meta)?;
            end = end.max(done);
            // Known before the moves are applied: GC may move this checkpoint's own pages.
            self.meta.insert(loc.0, (Meta::Checkpoint, seq));
            self.absorb();
        }
        // Complete: the older checkpoint and every trim record are retired.
        let old: Vec<u64> = self
            .meta
            .iter()
            .filter(|(_, &(_, s))| s != seq)
            .map(|(&l, _)| l)
            .collect();
        for loc in old {
            self.meta.remove(&loc);
            self.space.invalidate(Ppn(loc));
        }
        self.trims_live = 0;
        self.counts.checkpoints += 1;
        Ok(end)
    }

    /// Invariants 1, 2 (as far as the space tells) and 5, and the space's own.
    pub fn check(&self) -> Result<(), String> {
        self.map.check()?;
        self.space.check()?;
        if self.map.mapped() > self.capacity_blocks {
            return Err(format!(
                "{} blocks mapped, capacity {}",
                self.map.mapped(),
                self.capacity_blocks
            ));
        }
        for (v, loc) in self.map.extents().iter().flat_map(|&(s, n)| {
            (s..s + n).map(|v| (v, self.map.get(v).unwrap_or(crate::map::NONE)))
        }) {
            if self.space.key_at(Ppn(u64::from(loc))) != Some(v) {
                return Err(format!(
                    "block {v} maps to unit {loc}, which holds another key"
                ));
            }
        }
        for loc in self.meta.keys() {
            if self.space.key_at(Ppn(*loc)).is_none() {
                return Err(format!("metadata unit {loc} is not valid in the space"));
            }
        }
        Ok(())
    }

    /// Recovers the VSL from a device that holds its data (see `docs/dfs.md`, "Recovery").
    pub fn open(nand: Nand, cfg: &VslConfig) -> Result<(Vsl, RecoveryReport), VslError> {
        check_cfg(cfg)?;
        recover(nand, cfg)
    }
}

/// CRC-32 of a checkpoint page with its CRC field (bytes 8..12) left out: every other byte,
/// the zeros after the extents included, is under it.
fn checkpoint_crc(page: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&page[0..8]);
    h.update(&page[12..]);
    h.finalize()
}

fn encode_checkpoint_page(page: &mut [u8], extents: &[(u64, u64)]) {
    page.fill(0);
    page[0..4].copy_from_slice(&CKPT_MAGIC.to_le_bytes());
    page[4..8].copy_from_slice(&(extents.len() as u32).to_le_bytes());
    for (i, (s, n)) in extents.iter().enumerate() {
        let o = 16 + 16 * i;
        page[o..o + 8].copy_from_slice(&s.to_le_bytes());
        page[o + 8..o + 16].copy_from_slice(&n.to_le_bytes());
    }
    let crc = checkpoint_crc(page);
    page[8..12].copy_from_slice(&crc.to_le_bytes());
}

fn decode_checkpoint_page(page: &[u8], out: &mut Vec<(u64, u64)>) -> Result<(), VslError> {
    let u32_at = |o: usize| u32::from_le_bytes([page[o], page[o + 1], page[o + 2], page[o + 3]]);
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&page[o..o + 8]);
        u64::from_le_bytes(b)
    };
    let bad = |e: String| Err(VslError::Recovery(e));
    match u32_at(0) {
        CKPT_MAGIC => {}
        CKPT_MAGIC_V1 => {
            return Err(VslError::Version(
                "a map checkpoint of DFS format version 1 (before checksums): this build \
                 reads version 2; copy the files off with the build that wrote the image"
                    .into(),
            ))
        }
        _ => return bad("the page does not start with the checkpoint magic".into()),
    }
    if checkpoint_crc(page) != u32_at(8) {
        return bad("the page fails its CRC".into());
    }
    let n = u32_at(4) as usize;
    if n > CKPT_EXTENTS_PER_PAGE {
        return bad(format!("the page claims {n} extents"));
    }
    for i in 0..n {
        out.push((u64_at(16 + 16 * i), u64_at(24 + 16 * i)));
    }
    Ok(())
}

/// Reads unit `loc` of the device directly (before the space exists).
fn read_unit(nand: &mut Nand, at_ns: Nanos, loc: u64, buf: &mut [u8]) -> Result<Nanos, VslError> {
    let upp = u64::from(ftl::space::units_per_page(nand.geometry()));
    let page = Ppn(loc / upp);
    let slot = (loc % upp) as usize;
    Ok(nand
        .read_range(
            at_ns,
            page,
            (slot * BLOCK_BYTES, buf),
            (0, &mut []),
            Purpose::Recovery,
        )
        .map_err(FtlError::from)?
        .done_ns)
}

/// The newest checkpoint all of whose pages are there, as (seq, first index in `ckpts`,
/// pages), from the sorted, deduplicated checkpoint records (seq, page index, loc, pages). A
/// step of `recover` because it only reads the records.
fn newest_complete_checkpoint(ckpts: &[(u64, u64, u64, u64)]) -> Option<(u64, usize, usize)> {
    let mut ckpt: Option<(u64, usize, usize)> = None; // (seq, first index in ckpts, pages)
    let mut i = 0;
    while i < ckpts.len() {
        let s = ckpts[i].0;
        let j = i + ckpts[i..].iter().take_while(|r| r.0 == s).count();
        let total = ckpts[i].3;
        let complete =
            (j - i) as u64 == total && ckpts[i..j].iter().enumerate().all(|(k, r)| r.1 == k as u64);
        if complete {
            ckpt = Some((s, i, j - i));
        }
        i = j;
    }
    ckpt
}

/// A record found by the recovery scan: (seq, key, unit location, aux).
type Row = (u64, u64, u64, u64);

/// What the recovery scan found: the records by kind, the largest sequence numbers, the units
/// with a damaged record, and when the scan completed.
struct Scanned {
    data: Vec<Row>,
    trims: Vec<Row>,
    ckpts: Vec<Row>,
    /// One past the largest sequence number (pads included).
    max_any: u64,
    /// The largest sequence number of a data, trim or checkpoint record (recovery's E).
    max_evidence: u64,
    records: u64,
    damaged: Vec<u64>,
    done_ns: Nanos,
}

/// Reads the OOB of every programmed page (recovery's step 1). A step of `recover`.
fn scan(nand: &mut Nand) -> Result<Scanned, VslError> {
    let g = nand.geometry().clone();
    let upp = u64::from(ftl::space::units_per_page(&g));
    let units_per_block = u64::from(g.pages_per_block) * upp;
    let mut f = Scanned {
        data: Vec::new(),
        trims: Vec::new(),
        ckpts: Vec::new(),
        max_any: 0,
        max_evidence: 0,
        records: 0,
        damaged: Vec::new(),
        done_ns: 0,
    };
    let at = nand.now_ns();
    let done = scan_blocks(nand, at, ScanExtent::Programmed, &mut |b, s| {
        let first = u64::from(b) * units_per_block;
        f.damaged
            .extend(s.corrupt.iter().map(|&u| first + u64::from(u)));
        for (unit, r) in s.records {
            f.records += 1;
            let loc = first + u64::from(unit);
            f.max_any = f.max_any.max(r.seq + 1);
            let row = (r.seq, r.key, loc, r.aux);
            match r.kind {
                PageKind::Data => f.data.push(row),
                PageKind::Trim => f.trims.push(row),
                PageKind::Checkpoint => f.ckpts.push(row),
                PageKind::Pad => continue,
                other => {
                    return Err(FtlError::Recovery(format!(
                        "a {other:?} record at unit {loc}: not a VSL device"
                    )))
                }
            }
            f.max_evidence = f.max_evidence.max(r.seq);
        }
        Ok(())
    })?;
    f.done_ns = done.done_ns;
    Ok(f)
}

/// Rebuilds the VSL from a scan of the device: the records, the newest complete checkpoint,
/// the trims and committed data after it, then the space restored around the live pages.
fn recover(mut nand: Nand, cfg: &VslConfig) -> Result<(Vsl, RecoveryReport), VslError> {
    let Scanned {
        mut data,
        mut trims,
        mut ckpts,
        max_any,
        max_evidence,
        records,
        damaged,
        done_ns,
    } = scan(&mut nand)?;
    let mut t = done_ns;
    let mut rep = RecoveryReport {
        records,
        damaged_records: damaged.len() as u64,
        ..RecoveryReport::default()
    };
    // Copies of one version (GC) are interchangeable: one per (seq, key).
    let dedupe = |v: &mut Vec<Row>| {
        v.sort_unstable();
        v.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    };
    dedupe(&mut data);
    dedupe(&mut trims);
    dedupe(&mut ckpts);
    // The newest complete checkpoint.
    let ckpt = newest_complete_checkpoint(&ckpts);
    let mut mapped_at_ckpt: Vec<(u64, u64)> = Vec::new();
    let mut live: Vec<LivePage> = Vec::new();
    let mut meta = FnvHashMap::default();
    let ckpt_seq = match ckpt {
        Some((s, first, pages)) => {
            let mut page = vec![0u8; BLOCK_BYTES];
            for r in &ckpts[first..first + pages] {
                t = t.max(read_unit(&mut nand, t, r.2, &mut page)?);
                decode_checkpoint_page(&page, &mut mapped_at_ckpt).map_err(|e| match e {
                    VslError::Recovery(e) => VslError::Recovery(format!(
                        "map checkpoint {s}, page {} of {pages}, at flash unit {}: {e}",
                        r.1, r.2
                    )),
                    e => e,
                })?;
                live.push(LivePage {
                    ppn: Ppn(r.2),
                    key: r.1,
                    stream: META,
                    seq: s,
                });
                meta.insert(r.2, (Meta::Checkpoint, s));
            }
            rep.checkpoint_seq = Some(s);
            Some(s)
        }
        None => None,
    };
    let after_ckpt = |seq: u64| ckpt_seq.is_none_or(|c| seq > c);
    trims.retain(|r| after_ckpt(r.0));
    for r in &trims {
        live.push(LivePage {
            ppn: Ppn(r.2),
            key: r.1,
            stream: META,
            seq: r.0,
        });
        meta.insert(r.2, (Meta::Trim, r.0));
    }
    let trims_live = trims.len() as u32;
    rep.trims_applied = trims.len() as u64;
    let in_ckpt = |v: u64| {
        let i = mapped_at_ckpt.partition_point(|&(s, _)| s <= v);
        i > 0 && {
            let (s, n) = mapped_at_ckpt[i - 1];
            v < s + n
        }
    };
    // Newest committed version per block.
    let mut newest: FnvHashMap<u64, (u64, u64)> = FnvHashMap::default();
    let mut i = 0;
    while i < data.len() {
        let s = data[i].0;
        let j = i + data[i..].iter().take_while(|r| r.0 == s).count();
        let committed = (j - i) as u64 == aux_blocks(data[i].3) || s < max_evidence;
        if !committed {
            rep.groups_dropped += 1;
            rep.blocks_dropped += (j - i) as u64;
            i = j;
            continue;
        }
        for r in &data[i..j] {
            let (seq, v, loc, _) = *r;
            if !after_ckpt(seq) && !in_ckpt(v) {
                continue;
            }
            if trims
                .iter()
                .any(|&(ts, tv, _, tn)| ts > seq && v >= tv && v < tv + tn)
            {
                continue;
            }
            newest.insert(v, (seq, loc)); // sorted by seq: later wins
        }
        i = j;
    }
    let mut map = SparseMap::new();
    for (&v, &(seq, loc)) in &newest {
        map.set(v, loc as u32);
        live.push(LivePage {
            ppn: Ppn(loc),
            key: v,
            stream: DATA,
            seq,
        });
    }
    live.sort_unstable_by_key(|p| p.ppn.0);
    let (space, t2) = FlashSpace::restore(nand, space_config(cfg), t, &live, max_any)?;
    rep.done_ns = t.max(t2);
    let mut vsl = Vsl::assemble(space, map, meta, trims_live, cfg)?;
    vsl.damaged = damaged;
    vsl.absorb(); // units moved off bad blocks during the restore
    if vsl.map.mapped() > vsl.capacity_blocks {
        return Err(VslError::Recovery(format!(
            "{} blocks mapped on a device of {} (another configuration?)",
            vsl.map.mapped(),
            vsl.capacity_blocks
        )));
    }
    Ok((vsl, rep))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_pages_round_trip_and_every_byte_is_under_the_crc() {
        let mut page = vec![0u8; BLOCK_BYTES];
        let extents = [(5u64, 3u64), (1 << 40, 512)];
        encode_checkpoint_page(&mut page, &extents);
        let mut out = Vec::new();
        decode_checkpoint_page(&page, &mut out).unwrap();
        assert_eq!(out, extents);
        for i in (0..BLOCK_BYTES)
            .step_by(7)
            .chain([8, 9, 10, 11, BLOCK_BYTES - 1])
        {
            let mut bad = page.clone();
            bad[i] ^= 0x20;
            assert!(
                decode_checkpoint_page(&bad, &mut Vec::new()).is_err(),
                "flip in byte {i}"
            );
        }
    }

    #[test]
    fn a_format_1_checkpoint_is_refused_naming_its_version() {
        let mut page = vec![0u8; BLOCK_BYTES];
        page[0..4].copy_from_slice(&CKPT_MAGIC_V1.to_le_bytes());
        let e = decode_checkpoint_page(&page, &mut Vec::new()).unwrap_err();
        assert!(matches!(e, VslError::Version(_)), "{e}");
        assert!(e.to_string().contains("version 1"), "{e}");
    }

    #[test]
    fn a_block_is_checked_against_the_record_programmed_with_it() {
        let data = vec![7u8; BLOCK_BYTES];
        let mut oob = [0xFFu8; 64];
        let aux = data_aux(3, crc32fast::hash(&data));
        OobRecord::new(PageKind::Data, 42, 9, aux).encode_into(&mut oob);
        assert_eq!(aux_blocks(aux), 3);
        assert!(verify(42, 0, &data, &oob).is_ok());
        let mut other = data.clone();
        other[100] ^= 1;
        let e = verify(42, 5, &other, &oob).unwrap_err();
        assert!(e.to_string().contains("unit 5") && e.to_string().contains("checksum"));
        assert!(
            verify(43, 0, &data, &oob).is_err(),
            "another block's record"
        );
        oob[3] ^= 1;
        assert!(verify(42, 0, &data, &oob).is_err(), "a damaged record");
    }
}
