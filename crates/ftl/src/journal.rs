//! Durable trims, checkpoints, and the recovery scan shared by the page-mapped FTLs.
//!
//! Every data page carries its logical page and a sequence number in its OOB (`oob.rs`), so the
//! mapping can always be rebuilt by scanning the OOB of every page: for each logical page the
//! copy with the highest sequence number wins. Two things need more than that:
//!
//! * **Trims.** A trimmed page must not come back, but its older copies may still sit on flash.
//!   A trim therefore writes a *trim record* before it drops the mapping: a page whose OOB says
//!   kind = trim, key = first page, aux = page count, seq = a fresh sequence number. (The record
//!   needs no payload, so it works on every store.) A trim is durable when `trim` returns.
//! * **Compaction of trim records.** Trim records stay valid (GC moves them) until a
//!   *checkpoint* supersedes them: a bitmap of the logical pages mapped at the checkpoint's
//!   sequence number C, written over `checkpoint_pages` pages that all carry seq C. After the
//!   last page of a checkpoint is written, the previous checkpoint and every trim record are
//!   invalidated. A checkpoint is written when live trim records exceed
//!   `max(8, 2 x checkpoint_pages)`, so its cost is amortised over the trims it replaces.
//!
//! Checkpoint page payload (little-endian):
//!
//! | bytes    | field                                                            |
//! |----------|------------------------------------------------------------------|
//! | 0..8     | magic `NFTLCKPT`                                                 |
//! | 8..16    | checkpoint sequence number C (also in the OOB)                   |
//! | 16..20   | index of this page in the checkpoint                             |
//! | 20..24   | pages in the checkpoint                                          |
//! | 24..28   | bitmap bytes in this page                                        |
//! | 28..32   | CRC-32 of bytes 0..28 and the bitmap bytes                        |
//! | 32..     | bitmap: bit i of byte j of page k is logical page (k x B + 8j + i), 1 = mapped; B = 8 x (page bytes - 32) |
//!
//! Recovery (`scan`), for capacity U logical pages:
//! 1. Read the OOB of every programmed page of every block that is not factory-bad. Unreadable
//!    (torn, uncorrectable) pages are skipped: a torn page's write was never acknowledged.
//! 2. Per logical page keep the data copy with the highest sequence number; per translation page
//!    likewise.
//! 3. Choose the newest *complete* checkpoint (all its pages present with intact payloads). A
//!    logical page whose best copy is not newer than C and that the bitmap says was unmapped at
//!    C is unmapped.
//! 4. Apply every trim record newer than C in sequence order: a page in its range whose best copy
//!    is older than the record is unmapped.
//! 5. The next sequence number is one past the highest seen.
//!
//! **Map checkpoints** (the NoFTL store, which keeps no trim records): the whole forward map
//! (key -> flash page) and, per physical block, its incarnation, write pointer and stream at a
//! sequence number C (`Journal::write_map_checkpoint`, format there). `recover_mapped` reads page
//! 0 of every block, the checkpoint, and only the pages programmed after C, instead of every
//! page (its steps 1-5 and the proof that a scanned copy is never older than the checkpoint's
//! entry are at the function). Blocks are told apart by the incarnation that a space with
//! `stamp_incarnation` writes into every data page's OOB (oob.rs, space.rs invariant 8).
//!
//! Invariants:
//! 1. A trim record is programmed before the trimmed pages are invalidated (so before GC can
//!    erase them), and stays valid until a complete checkpoint newer than it exists.
//! 2. The previous checkpoint stays valid until every page of the next one is programmed.
//! 3. Data copies older than a live trim record or checkpoint never win over it (steps 3, 4);
//!    copies newer than both always win (a write after a trim is newer than the trim).
//! 4. On a metadata-only store checkpoint payloads do not survive, so recovery there falls back
//!    to older checkpoints or none; such stores keep no data to recover anyway.
//! 5. Invariant 2 holds for map checkpoints too, and pages of a checkpoint being written are
//!    followed through GC moves (`pending`) until it is complete. A checkpoint page whose
//!    header, CRC or layout does not check out makes its checkpoint incomplete: recovery takes
//!    the next older one, or reads everything.
//! 6. `recover_mapped` trusts a checkpoint entry only in a block whose page 0 bears the
//!    incarnation the checkpoint recorded, or that was retired (bad) at C and is bad still, and
//!    only below the write pointer recorded; every other programmed page is read but those of
//!    blocks retired at C (all older than C), so it rebuilds the same pages as a full scan for
//!    every key not freed after C (tests: storage/tests/native_checkpoint.rs,
//!    native_grown_bad.rs).

use nand::{Nand, NandError, Nanos, Pbn, Ppn, Purpose};

use crate::block_device::FtlError;
use crate::oob::{read_record, scan_blocks, unit_record, OobRecord, PageKind, PageOob, ScanExtent};
use crate::space::{unit_bytes, units_per_page, FlashSpace, LivePage, Move};

/// The location of unit `unit` of block `b` (space.rs, "Units": the flash page on pages of one
/// unit).
fn loc_in_block(g: &nand::Geometry, upp: u32, b: u32, unit: u32) -> Ppn {
    Ppn(g.first_page(Pbn(b)).0 * u64::from(upp) + u64::from(unit))
}

/// The unit records of a page whose OOB `read_record` classified as `found` (slot 0) into
/// `oob`: a damaged or unreadable page yields none (the buffer is stale after a failed read).
/// An iterator, not a collection: recovery calls this once per page read.
fn unit_records(
    found: PageOob,
    oob: &[u8],
    upp: u32,
) -> impl Iterator<Item = (u32, OobRecord)> + '_ {
    let slots = if matches!(found, PageOob::Record(_)) {
        upp
    } else {
        0
    };
    (0..slots).filter_map(move |slot| {
        let rec = if upp == 1 {
            found
        } else {
            unit_record(oob, slot)
        };
        match rec {
            PageOob::Record(r) => Some((slot, r)),
            PageOob::Erased | PageOob::Damaged => None,
        }
    })
}

/// Reads the unit at location `loc` (its data only) for recovery.
pub fn read_unit(
    nand: &mut Nand,
    at_ns: Nanos,
    loc: Ppn,
    data: &mut [u8],
) -> Result<Nanos, NandError> {
    let g = nand.geometry();
    let upp = u64::from(units_per_page(g));
    let slot = (loc.0 % upp) as usize;
    let page = Ppn(loc.0 / upp);
    if upp == 1 {
        return Ok(nand
            .read(at_ns, page, data, &mut [], Purpose::Recovery)?
            .done_ns);
    }
    Ok(nand
        .read_range(
            at_ns,
            page,
            (slot * data.len(), data),
            (0, &mut []),
            Purpose::Recovery,
        )?
        .done_ns)
}

/// Forward-map value of an unmapped logical page (the FTLs keep physical pages in a `u32`).
pub const UNMAPPED: u32 = u32::MAX;
const CP_MAGIC: &[u8; 8] = b"NFTLCKPT";
const CP_HEADER_BYTES: usize = 32;

/// The live trim records and checkpoint pages of one FTL, and its metadata stream.
#[derive(Debug)]
pub struct Journal {
    /// Live metadata pages: (kind, seq, location). Short: at most the checkpoint threshold
    /// plus one checkpoint.
    live: Vec<(PageKind, u64, Ppn)>,
    live_trims: usize,
    /// Pages of the checkpoint being written: GC may move them before it is complete.
    pending: Vec<Ppn>,
    cp_pages: u32,
    capacity: u64,
    stream: u8,
    page: Vec<u8>,
    moves: Vec<Move>,
    pub records_written: u64,
    pub checkpoints_written: u64,
    /// Pages of map checkpoints written (their cost).
    pub map_pages_written: u64,
}

impl Journal {
    pub fn new(capacity: u64, page_bytes: usize, stream: u8) -> Self {
        let bits = 8 * (page_bytes - CP_HEADER_BYTES) as u64;
        Journal {
            live: Vec::new(),
            live_trims: 0,
            pending: Vec::new(),
            cp_pages: capacity.div_ceil(bits).max(1) as u32,
            capacity,
            stream,
            page: vec![0; page_bytes],
            moves: Vec::new(),
            records_written: 0,
            checkpoints_written: 0,
            map_pages_written: 0,
        }
    }

    /// The journal as recovery found it.
    pub fn recovered(
        capacity: u64,
        page_bytes: usize,
        stream: u8,
        live: Vec<(PageKind, u64, Ppn)>,
    ) -> Self {
        let mut j = Journal::new(capacity, page_bytes, stream);
        j.live_trims = live.iter().filter(|l| l.0 == PageKind::Trim).count();
        j.live = live;
        j
    }

    pub fn checkpoint_pages(&self) -> u32 {
        self.cp_pages
    }
    pub fn live_pages(&self) -> impl Iterator<Item = (PageKind, u64, Ppn)> + '_ {
        self.live.iter().copied()
    }

    /// Takes the space's moves: its own are applied here, the others go to `other`.
    pub fn absorb(&mut self, space: &mut FlashSpace, other: &mut dyn FnMut(&Move)) {
        if !space.has_moves() {
            return;
        }
        space.take_moves(&mut self.moves);
        for m in &self.moves {
            if m.stream == self.stream {
                if let Some(l) = self.live.iter_mut().find(|l| l.2 == m.from) {
                    l.2 = m.to;
                } else if let Some(p) = self.pending.iter_mut().find(|p| **p == m.from) {
                    *p = m.to;
                } else {
                    debug_assert!(
                        false,
                        "move of a journal page {:?} that is not live",
                        m.from
                    );
                }
            } else {
                other(m);
            }
        }
    }

    /// Writes the trim record for `pages` pages from `lpn` (invariant 1: call before
    /// invalidating them). Returns when the record is on flash.
    pub fn record_trim(
        &mut self,
        space: &mut FlashSpace,
        at_ns: Nanos,
        lpn: u64,
        pages: u64,
        other: &mut dyn FnMut(&Move),
    ) -> Result<Nanos, FtlError> {
        self.page.fill(0);
        let seq = space.alloc_seq();
        let rec = OobRecord::new(PageKind::Trim, lpn, seq, pages);
        let (ppn, done) = space.write(at_ns, self.stream, &rec, &self.page, Purpose::Meta)?;
        self.absorb(space, other);
        self.live.push((PageKind::Trim, seq, ppn));
        self.live_trims += 1;
        self.records_written += 1;
        Ok(done)
    }

    /// True when enough trim records are live that a checkpoint should replace them.
    pub fn wants_checkpoint(&self) -> bool {
        self.live_trims > (2 * self.cp_pages as usize).max(8)
    }

    /// Writes a checkpoint of `mapped` (bit per logical page, 1 = mapped; see the payload
    /// table), then invalidates the superseded trim records and checkpoint (invariant 2).
    pub fn write_checkpoint(
        &mut self,
        space: &mut FlashSpace,
        at_ns: Nanos,
        mapped: &[u8],
        other: &mut dyn FnMut(&Move),
    ) -> Result<Nanos, FtlError> {
        debug_assert!(mapped.len() as u64 >= self.capacity.div_ceil(8));
        let seq = space.alloc_seq();
        let done = self.write_pages(
            space,
            at_ns,
            (PageKind::Checkpoint, CP_MAGIC),
            seq,
            self.cp_pages,
            mapped,
            other,
        )?;
        self.checkpoints_written += 1;
        Ok(done)
    }
}

/// What the recovery scan rebuilt.
#[derive(Debug)]
pub struct Recovered {
    /// Logical page -> physical page, `UNMAPPED` if none.
    pub map: Vec<u32>,
    /// Sequence number of each mapped page's winning copy (0 if unmapped, or if the entry came
    /// from a map checkpoint, whose OOB `recover_mapped` does not read).
    pub map_seq: Vec<u64>,
    /// The OOB `aux` field of each mapped page's winning copy (callers keep their own tags in
    /// it, e.g. the native store's stream), so that nobody reads those OOBs a second time; for
    /// an entry from a map checkpoint, its block's stream.
    pub map_aux: Vec<u64>,
    /// Per translation page: its newest copy (seq, location), seq 0 if none.
    pub tpages: Vec<(u64, Ppn)>,
    /// Live journal pages (for `Journal::recovered`).
    pub journal: Vec<(PageKind, u64, Ppn)>,
    pub next_seq: u64,
    /// Sequence number of the checkpoint used, if any.
    pub checkpoint_seq: Option<u64>,
    pub pages_scanned: u64,
    pub done_ns: Nanos,
}

/// Scans the device and rebuilds the mapping (steps 1-5 of the module documentation).
pub fn scan(
    nand: &mut Nand,
    at_ns: Nanos,
    capacity: u64,
    translation_pages: u64,
) -> Result<Recovered, FtlError> {
    let g = nand.geometry().clone();
    let mut map = vec![UNMAPPED; capacity as usize];
    let mut map_seq = vec![0u64; capacity as usize];
    let mut map_aux = vec![0u64; capacity as usize];
    let mut tpages = vec![(0u64, Ppn(0)); translation_pages as usize];
    let mut trims: Vec<(u64, u64, u64, Ppn)> = Vec::new();
    let mut cps: Vec<(u64, u32, u32, Ppn)> = Vec::new();
    let mut max_seq = 0u64;
    // Steps 1 and 2. Pages are written in order, so the scan stops at the first erased page.
    let upp = units_per_page(&g);
    let scanned = scan_blocks(nand, at_ns, ScanExtent::Programmed, &mut |b, s| {
        for (unit, rec) in s.records {
            let ppn = loc_in_block(&g, upp, b, unit);
            max_seq = max_seq.max(rec.seq);
            match rec.kind {
                PageKind::Data if rec.key < capacity => {
                    let k = rec.key as usize;
                    if rec.seq > map_seq[k] {
                        map[k] = ppn.0 as u32;
                        map_seq[k] = rec.seq;
                        map_aux[k] = rec.aux;
                    }
                }
                PageKind::Translation if rec.key < translation_pages => {
                    let k = rec.key as usize;
                    if rec.seq > tpages[k].0 {
                        tpages[k] = (rec.seq, ppn);
                    }
                }
                PageKind::Trim => trims.push((rec.seq, rec.key, rec.aux, ppn)),
                PageKind::Checkpoint => {
                    // A count beyond u32 is no checkpoint this code wrote: never complete.
                    cps.push((
                        rec.seq,
                        rec.key as u32,
                        u32::try_from(rec.aux).unwrap_or(0),
                        ppn,
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    })?;
    let mut done = scanned.done_ns;

    // Step 3: the newest complete checkpoint with intact payloads.
    let mut journal = Vec::new();
    let (found, cp_done) = newest_checkpoint(nand, at_ns, &mut cps, CP_MAGIC, |bitmap| {
        Some(bitmap.to_vec())
    })?;
    done = done.max(cp_done);
    let checkpoint_seq = found.map(|(seq, bitmap, pages)| {
        for lpn in 0..capacity as usize {
            let bit = bitmap
                .get(lpn / 8)
                .is_some_and(|b| b & (1 << (lpn % 8)) != 0);
            if map[lpn] != UNMAPPED && map_seq[lpn] <= seq && !bit {
                map[lpn] = UNMAPPED;
                map_seq[lpn] = 0;
            }
        }
        journal.extend(pages.iter().map(|&p| (PageKind::Checkpoint, seq, p)));
        seq
    });

    // Step 4: trim records newer than the checkpoint, in sequence order.
    let floor = checkpoint_seq.unwrap_or(0);
    trims.retain(|t| t.0 > floor);
    trims.sort_unstable_by_key(|t| (t.0, t.1));
    trims.dedup_by_key(|t| (t.0, t.1));
    for &(seq, start, count, ppn) in &trims {
        let end = start.saturating_add(count).min(capacity);
        for lpn in start.min(end)..end {
            let l = lpn as usize;
            if map[l] != UNMAPPED && map_seq[l] < seq {
                map[l] = UNMAPPED;
                map_seq[l] = 0;
            }
        }
        journal.push((PageKind::Trim, seq, ppn));
    }
    Ok(Recovered {
        map,
        map_seq,
        map_aux,
        tpages,
        journal,
        next_seq: max_seq + 1,
        checkpoint_seq,
        pages_scanned: scanned.pages_read,
        done_ns: done,
    })
}

impl Recovered {
    /// The pages a `FlashSpace::restore` needs: every mapped page, in the stream `stream_of` its
    /// OOB `aux` names, and every live journal page in `journal_stream`.
    pub fn live_pages(&self, stream_of: impl Fn(u64) -> u8, journal_stream: u8) -> Vec<LivePage> {
        let mut live = Vec::with_capacity(self.journal.len());
        for (key, (&p, (&seq, &aux))) in self
            .map
            .iter()
            .zip(self.map_seq.iter().zip(&self.map_aux))
            .enumerate()
        {
            if p != UNMAPPED {
                live.push(LivePage {
                    ppn: Ppn(u64::from(p)),
                    key: key as u64,
                    stream: stream_of(aux),
                    seq,
                });
            }
        }
        for &(_, seq, ppn) in &self.journal {
            live.push(LivePage {
                ppn,
                key: seq,
                stream: journal_stream,
                seq,
            });
        }
        live
    }
}

/// The content bytes of a checkpoint page with `magic`, if its header and CRC check out.
fn checkpoint_payload_of<'a>(
    page: &'a [u8],
    magic: &[u8; 8],
    seq: u64,
    index: u32,
    count: u32,
) -> Option<&'a [u8]> {
    if &page[0..8] != magic {
        return None;
    }
    let u32_at = |o: usize| u32::from_le_bytes([page[o], page[o + 1], page[o + 2], page[o + 3]]);
    let got_seq = u64::from_le_bytes(page[8..16].try_into().ok()?);
    let len = u32_at(24) as usize;
    if got_seq != seq
        || u32_at(16) != index
        || u32_at(20) != count
        || CP_HEADER_BYTES + len > page.len()
    {
        return None;
    }
    let bytes = &page[CP_HEADER_BYTES..CP_HEADER_BYTES + len];
    let mut h = crc32fast::Hasher::new();
    h.update(&page[0..28]);
    h.update(bytes);
    (h.finalize() == u32_at(28)).then_some(bytes)
}

/// A bitmap of mapped pages (1 bit per logical page) from a forward map.
pub fn mapped_bitmap(capacity: u64, mapped: impl Fn(u64) -> bool) -> Vec<u8> {
    let mut bits = vec![0u8; capacity.div_ceil(8) as usize];
    for lpn in 0..capacity {
        if mapped(lpn) {
            bits[(lpn / 8) as usize] |= 1 << (lpn % 8);
        }
    }
    bits
}

// ----- map checkpoints ------------------------------------------------------------------------

const MAP_MAGIC: &[u8; 8] = b"NFTLMAP1";
const MAP_HEADER_BYTES: usize = 16;
const MAP_BLOCK_BYTES: usize = 16;

/// What a map checkpoint keeps of one physical block (`FlashSpace::block_checkpoint`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockAtCheckpoint {
    /// The incarnation stamped in its data pages (oob.rs); 0: the checkpoint promises nothing
    /// about this block (free, bad, foreign), recovery reads it in full (unless `retired`).
    pub incarnation: u64,
    /// Pages handed out in it at C: pages at or past this were programmed after C.
    pub written: u32,
    pub stream: u8,
    /// Bad at C (a program or erase failed on it): never erased nor programmed again, so every
    /// page it holds was programmed before C, and none is newer than the checkpoint's entries.
    /// Recovery reads none of its pages and trusts the checkpoint's entries into it below
    /// `written` (pages a power cut kept it from moving off). Read in full, its stale copies
    /// would beat the checkpoint's entries (step 4 of `recover_mapped`) and come back.
    pub retired: bool,
}

/// Bytes of the logical content of a map checkpoint over `keys` keys and `blocks` blocks.
pub fn map_checkpoint_bytes(keys: u64, blocks: u32) -> u64 {
    MAP_HEADER_BYTES as u64 + u64::from(blocks) * MAP_BLOCK_BYTES as u64 + 4 * keys
}

/// Flash pages of a map checkpoint over `keys` keys and `blocks` blocks.
pub fn map_checkpoint_pages(keys: u64, blocks: u32, page_bytes: usize) -> u32 {
    let per_page = (page_bytes - CP_HEADER_BYTES) as u64;
    map_checkpoint_bytes(keys, blocks).div_ceil(per_page).max(1) as u32
}

/// The logical content of a map checkpoint (see `write_map_checkpoint` for the format).
pub fn encode_map_checkpoint(map: &[u32], blocks: &[BlockAtCheckpoint]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(map_checkpoint_bytes(map.len() as u64, blocks.len() as u32) as usize);
    out.extend_from_slice(&(map.len() as u64).to_le_bytes());
    out.extend_from_slice(&(blocks.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    for b in blocks {
        out.extend_from_slice(&b.incarnation.to_le_bytes());
        out.extend_from_slice(&b.written.to_le_bytes());
        out.extend_from_slice(&[b.stream, u8::from(b.retired), 0, 0]);
    }
    for &p in map {
        out.extend_from_slice(&p.to_le_bytes());
    }
    out
}

/// The map and blocks of a checkpoint's content, if it is one for `keys` keys and `blocks`
/// blocks (a checkpoint of another layout is no checkpoint of this store).
fn decode_map_checkpoint(
    bytes: &[u8],
    keys: u64,
    blocks: u32,
) -> Option<(Vec<u32>, Vec<BlockAtCheckpoint>)> {
    if bytes.len() as u64 != map_checkpoint_bytes(keys, blocks)
        || bytes[0..8] != keys.to_le_bytes()
        || bytes[8..12] != blocks.to_le_bytes()
    {
        return None;
    }
    let u32_at =
        |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
    let mut o = MAP_HEADER_BYTES;
    let mut bl = Vec::with_capacity(blocks as usize);
    for _ in 0..blocks {
        bl.push(BlockAtCheckpoint {
            incarnation: u64::from(u32_at(o)) | (u64::from(u32_at(o + 4)) << 32),
            written: u32_at(o + 8),
            stream: bytes[o + 12],
            retired: bytes[o + 13] == 1,
        });
        o += MAP_BLOCK_BYTES;
    }
    let map = (0..keys as usize).map(|k| u32_at(o + 4 * k)).collect();
    Some((map, bl))
}

impl Journal {
    /// Writes a map checkpoint at sequence number `seq` (issued by the caller when it took the
    /// snapshot `content`, from `encode_map_checkpoint`), then invalidates the checkpoint it
    /// supersedes (invariant 2: only once every page of this one is programmed).
    ///
    /// Pages (programmed as `Purpose::Mapping`): kind `MapCheckpoint`, OOB key = page index,
    /// aux = pages, seq = `seq`; payload:
    ///
    /// | bytes  | field                                                        |
    /// |--------|--------------------------------------------------------------|
    /// | 0..8   | magic `NFTLMAP1`                                             |
    /// | 8..16  | C = `seq`                                                    |
    /// | 16..20 | index of this page                                           |
    /// | 20..24 | pages in the checkpoint                                      |
    /// | 24..28 | content bytes in this page (n)                               |
    /// | 28..32 | CRC-32 of bytes 0..28 and the n content bytes                |
    /// | 32..   | bytes [index x (page bytes - 32), + n) of the content        |
    ///
    /// Content: keys u64 | blocks u32 | 0 u32 | per block: incarnation u64, written u32,
    /// stream u8, retired u8 (1: bad at C, `BlockAtCheckpoint::retired`), 2 zero bytes | per
    /// key: flash page u32 (`UNMAPPED` = u32::MAX).
    pub fn write_map_checkpoint(
        &mut self,
        space: &mut FlashSpace,
        at_ns: Nanos,
        seq: u64,
        content: &[u8],
        other: &mut dyn FnMut(&Move),
    ) -> Result<Nanos, FtlError> {
        let per_page = self.page.len() - CP_HEADER_BYTES;
        let count = content.len().div_ceil(per_page).max(1) as u32;
        let done = self.write_pages(
            space,
            at_ns,
            (PageKind::MapCheckpoint, MAP_MAGIC),
            seq,
            count,
            content,
            other,
        )?;
        self.checkpoints_written += 1;
        self.map_pages_written += u64::from(count);
        Ok(done)
    }
}

impl Journal {
    /// Writes `content` as the `count` pages of a checkpoint at `seq` (page i holds bytes
    /// [i x (page bytes - 32), + page bytes - 32) of it, fewer at the end), then invalidates the
    /// checkpoint and trim records it supersedes: only once every page of it is programmed
    /// (invariant 2). Its pages are followed through GC moves while it is written (`pending`).
    #[allow(clippy::too_many_arguments)] // one checkpoint write: where, when, what and who else moves
    fn write_pages(
        &mut self,
        space: &mut FlashSpace,
        at_ns: Nanos,
        (kind, magic): (PageKind, &[u8; 8]),
        seq: u64,
        count: u32,
        content: &[u8],
        other: &mut dyn FnMut(&Move),
    ) -> Result<Nanos, FtlError> {
        let per_page = self.page.len() - CP_HEADER_BYTES;
        let mut done = at_ns;
        // A map checkpoint persists the forward map, as DFTL's translation pages do: mapping
        // work, counted apart from the master records (meta) that share the NoFTL store's
        // metadata, so that the crash test's report tells a cut on one from a cut on the other.
        let purpose = if kind == PageKind::MapCheckpoint {
            Purpose::Mapping
        } else {
            Purpose::Meta
        };
        self.pending.clear();
        for index in 0..count {
            let from = (index as usize * per_page).min(content.len());
            let to = (from + per_page).min(content.len());
            fill_checkpoint_page(&mut self.page, magic, seq, index, count, &content[from..to]);
            let rec = OobRecord::new(kind, u64::from(index), seq, u64::from(count));
            let (ppn, t) = space.write(at_ns, self.stream, &rec, &self.page, purpose)?;
            self.pending.push(ppn);
            self.absorb(space, other);
            done = done.max(t);
        }
        // Only now is the new checkpoint complete: drop what it supersedes.
        for (_, _, ppn) in self.live.drain(..) {
            space.invalidate(ppn);
        }
        let written = std::mem::take(&mut self.pending);
        self.live
            .extend(written.into_iter().map(|p| (kind, seq, p)));
        self.live_trims = 0;
        Ok(done)
    }
}

/// The newest complete checkpoint with `magic` among `cps` (seq, page index, page count, where)
/// whose pages all read back intact and whose content `decode` accepts: its seq, decoded
/// content and pages, and when the reads completed. A newer checkpoint that is incomplete, has an
/// unreadable page (torn, uncorrectable: invariant 2 kept the previous one valid) or is refused
/// gives way to the next older one. A power loss is not unreadability: it ends the recovery.
#[allow(clippy::type_complexity)] // (seq, content, pages) of the one checkpoint found
fn newest_checkpoint<T>(
    nand: &mut Nand,
    at_ns: Nanos,
    cps: &mut Vec<(u64, u32, u32, Ppn)>,
    magic: &[u8; 8],
    mut decode: impl FnMut(&[u8]) -> Option<T>,
) -> Result<(Option<(u64, T, Vec<Ppn>)>, Nanos), FtlError> {
    cps.sort_unstable_by_key(|c| (std::cmp::Reverse(c.0), c.1));
    cps.dedup_by_key(|c| (c.0, c.1));
    let page_bytes = unit_bytes(nand.geometry());
    let mut data = vec![0u8; page_bytes];
    let mut done = at_ns;
    let mut i = 0;
    while i < cps.len() {
        let seq = cps[i].0;
        let end = cps[i..]
            .iter()
            .position(|c| c.0 != seq)
            .map_or(cps.len(), |p| i + p);
        let group = &cps[i..end];
        i = end;
        let count = group[0].2;
        let complete = group.len() as u32 == count
            && group
                .iter()
                .enumerate()
                .all(|(k, c)| c.1 == k as u32 && c.2 == count);
        if !complete {
            continue;
        }
        let mut content = Vec::with_capacity(count as usize * (page_bytes - CP_HEADER_BYTES));
        let mut intact = true;
        for c in group {
            match read_unit(nand, at_ns, c.3, &mut data) {
                Ok(d) => done = done.max(d),
                Err(e)
                    if e.is_media_error()
                        && !matches!(e, NandError::PowerLost | NandError::PoweredOff) =>
                {
                    intact = false;
                    break;
                }
                Err(e) => return Err(e.into()),
            }
            let Some(bytes) = checkpoint_payload_of(&data, magic, seq, c.1, count) else {
                intact = false;
                break;
            };
            content.extend_from_slice(bytes);
        }
        if intact {
            if let Some(t) = decode(&content) {
                return Ok((Some((seq, t, group.iter().map(|c| c.3).collect())), done));
            }
        }
    }
    Ok((None, done))
}

/// One checkpoint page: header (magic, seq, index, count, length, CRC) and `bytes`.
fn fill_checkpoint_page(
    page: &mut [u8],
    magic: &[u8; 8],
    seq: u64,
    index: u32,
    count: u32,
    bytes: &[u8],
) {
    page.fill(0);
    page[0..8].copy_from_slice(magic);
    page[8..16].copy_from_slice(&seq.to_le_bytes());
    page[16..20].copy_from_slice(&index.to_le_bytes());
    page[20..24].copy_from_slice(&count.to_le_bytes());
    page[24..28].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
    page[CP_HEADER_BYTES..CP_HEADER_BYTES + bytes.len()].copy_from_slice(bytes);
    let mut h = crc32fast::Hasher::new();
    h.update(&page[0..28]);
    h.update(bytes);
    let crc = h.finalize();
    page[28..32].copy_from_slice(&crc.to_le_bytes());
}

/// The map checkpoint `recover_mapped` chose: (C, map, blocks, pages).
type Chosen = (u64, Vec<u32>, Vec<BlockAtCheckpoint>, Vec<Ppn>);

/// What `read_pages0` found: (programmed pages, page 0's record, page 0's other units' records,
/// done).
type Pages0 = (
    Vec<u32>,
    Vec<Option<OobRecord>>,
    Vec<Option<OobRecord>>,
    Nanos,
);

/// Step 1 of `recover_mapped`, its first half: reads the OOB of page 0 of every programmed
/// block. Returns each block's programmed pages (0 for factory-bad and half-erased blocks),
/// page 0's record (slot 0), the records of page 0's other units (`upp - 1` per block) and
/// when the reads completed. A step because every later step decides from these.
fn read_pages0(
    nand: &mut Nand,
    at_ns: Nanos,
    g: &nand::Geometry,
    upp: u32,
    oob: &mut [u8],
    reads_done: &mut u64,
) -> Result<Pages0, FtlError> {
    let nblocks = g.blocks();
    let mut programmed = vec![0u32; nblocks as usize];
    let mut first: Vec<Option<OobRecord>> = vec![None; nblocks as usize];
    // Pages of several units: the records of page 0's other units (slot 0's is `first`).
    let mut page0_rest: Vec<Option<OobRecord>> = vec![None; nblocks as usize * (upp as usize - 1)];
    let mut page0_done = at_ns;
    for b in 0..nblocks {
        let info = nand.block_info(Pbn(b))?;
        let n = match info.state {
            nand::BlockState::FactoryBad | nand::BlockState::NeedsErase => 0,
            _ => info.next_page.min(g.pages_per_block),
        };
        programmed[b as usize] = n;
        if n == 0 {
            continue;
        }
        let (found, t) = read_record(nand, at_ns, g.ppn_in_block(Pbn(b), 0), oob)?;
        *reads_done += 1;
        page0_done = page0_done.max(t);
        if let PageOob::Record(r) = found {
            first[b as usize] = Some(r);
            for slot in 1..upp {
                if let PageOob::Record(r) = unit_record(oob, slot) {
                    page0_rest[b as usize * (upp as usize - 1) + slot as usize - 1] = Some(r);
                }
            }
        }
    }
    Ok((programmed, first, page0_rest, page0_done))
}

/// Step 4 of `recover_mapped`: merges the chosen checkpoint into the scanned map (with
/// `full`, only its unmapped keys that have no newer copy; else its entries into unchanged
/// blocks where nothing was scanned) and returns the checkpoint's pages as journal entries
/// and its seq. A step because it is the only place the checkpoint's content is used.
fn merge_map_checkpoint(
    chosen: Option<Chosen>,
    full: bool,
    (g, upp): (&nand::Geometry, u32),
    unchanged: &[bool],
    (map, map_seq, map_aux): (&mut [u32], &mut [u64], &mut [u64]),
    max_seq: &mut u64,
) -> (Vec<(PageKind, u64, Ppn)>, Option<u64>) {
    let mut journal = Vec::new();
    let mut checkpoint_seq = None;
    if let Some((seq, cmap, blocks, pages)) = chosen {
        *max_seq = (*max_seq).max(seq);
        for (k, &p) in cmap.iter().enumerate() {
            if full {
                // The reference: the checkpoint only says which keys were unmapped at C.
                if p == UNMAPPED && map[k] != UNMAPPED && map_seq[k] <= seq {
                    map[k] = UNMAPPED;
                    map_seq[k] = 0;
                }
                continue;
            }
            if p == UNMAPPED || u64::from(p) >= g.pages() * u64::from(upp) || map[k] != UNMAPPED {
                continue;
            }
            let ppn = Ppn(u64::from(p) / u64::from(upp));
            let b = g.block_of(ppn);
            let page = (ppn.0 - g.first_page(b).0) as u32;
            if unchanged[b.0 as usize] && page < blocks[b.0 as usize].written {
                map[k] = p;
                map_aux[k] = u64::from(blocks[b.0 as usize].stream);
            }
        }
        journal.extend(pages.into_iter().map(|p| (PageKind::MapCheckpoint, seq, p)));
        checkpoint_seq = Some(seq);
    }
    (journal, checkpoint_seq)
}

/// Step 3 of `recover_mapped`, what the chosen checkpoint vouches for, per block: whether it is
/// *unchanged* (its pages below the checkpoint's `written` are as they were at C) and whether it
/// is *frozen* (retired at C: nothing in it was programmed after C, so none of it is read; see
/// `BlockAtCheckpoint::retired`). Frozen blocks are unchanged. A step because the scan and the
/// merge both decide from these.
fn vouched_blocks(
    nand: &Nand,
    chosen: Option<&Chosen>,
    first: &[Option<OobRecord>],
) -> Result<(Vec<bool>, Vec<bool>), FtlError> {
    let n = first.len();
    let mut unchanged = vec![false; n];
    let mut frozen = vec![false; n];
    let Some(c) = chosen else {
        return Ok((unchanged, frozen));
    };
    for b in 0..n {
        let at_c = c.2[b];
        // A retired block stays bad, never erased again: one the chip calls good now is not
        // the block the checkpoint saw, and is read in full.
        frozen[b] =
            at_c.retired && nand.block_info(Pbn(b as u32))?.state == nand::BlockState::GrownBad;
        // Page 0 bearing the incarnation recorded at C: no erase since (space.rs invariant 8).
        unchanged[b] = frozen[b]
            || (at_c.incarnation != 0
                && first[b].is_some_and(|r| r.incarnation() == at_c.incarnation));
    }
    Ok((unchanged, frozen))
}

/// How `recover_mapped` treats blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryReads {
    /// Read only what changed since the newest complete map checkpoint (the point).
    SinceCheckpoint,
    /// Read every programmed page; the checkpoint only unmaps keys it says were unmapped at C
    /// and that have no newer copy (the reference the incremental recovery must agree with).
    Full,
}

/// Rebuilds key -> flash page of a store that writes only data pages (OOB kind data, no trims)
/// and map checkpoints (`Journal::write_map_checkpoint`) in a space with `stamp_incarnation`.
///
/// 1. Page-0 pass: the OOB of page 0 of every programmed block (factory-bad and half-erased
///    blocks hold nothing). A block whose page 0 is no data record (checkpoint pages, torn) is
///    read in full at once: that is how the checkpoints are found.
/// 2. The newest map checkpoint whose pages are all present with intact payloads (header,
///    CRC, layout); a damaged one is skipped for the next older, none means a full scan. Its
///    content is read (one page read per checkpoint page).
/// 3. A block is *unchanged* if the checkpoint gives it an incarnation (not 0) and page 0 bears
///    it: no erase since C (space.rs invariant 8), so its pages below `written` are as at C and
///    only pages from `written` on are read. A block the checkpoint says was *retired* (bad at
///    C) and that is bad still is unchanged too and read not at all: a bad block is never
///    erased nor programmed again, so all it holds was programmed before C (stale copies, or
///    the valid ones a cut kept from moving off, which the checkpoint's entries name). Every
///    other block is read in full (it was opened after C, or free at C); reads stop at the
///    chip's first erased page.
/// 4. The map: the checkpoint's entries that point into unchanged blocks, then every data
///    record read in step 3 (the *scanned* ones) where its seq is higher. A scanned copy beats a
///    checkpoint entry whatever their seqs: every scanned page was programmed after C (why a
///    block retired before C is not scanned: its pages are older), as a new write (seq > C) or
///    as a GC/WL copy of a page valid at that moment, i.e. of the key's
///    version at C or a newer one (GC copies only valid pages, and a key freed before C has no
///    valid copy until it is written again, with a seq > C). So scanned copies are never older
///    than the checkpoint's entry, and a key the checkpoint says was unmapped comes back only by
///    a write after C (invariant 2 of native.rs: frees before C stay freed).
/// 5. The next seq is one past the highest seen (C included).
///
/// Map entries from the checkpoint have seq 0 in `map_seq` (their OOB was not read) and the
/// block's stream as `map_aux`.
pub fn recover_mapped(
    nand: &mut Nand,
    at_ns: Nanos,
    capacity: u64,
    reads: RecoveryReads,
) -> Result<Recovered, FtlError> {
    let g = nand.geometry().clone();
    let nblocks = g.blocks();
    let upp = units_per_page(&g);
    let loc = |b: u32, unit: u32| loc_in_block(&g, upp, b, unit);
    let mut oob = vec![0xFFu8; g.oob_size_bytes as usize];
    let mut reads_done = 0u64;
    // Step 1.
    let (programmed, first, page0_rest, page0_done) =
        read_pages0(nand, at_ns, &g, upp, &mut oob, &mut reads_done)?;
    let mut meta_pages: Vec<(u32, u32, OobRecord)> = Vec::new();
    let page0_units = |b: u32| {
        let first = first[b as usize];
        let rest =
            &page0_rest[b as usize * (upp as usize - 1)..(b as usize + 1) * (upp as usize - 1)];
        std::iter::once(first)
            .chain(rest.iter().copied())
            .enumerate()
            .filter_map(|(slot, r)| r.map(|r| (slot as u32, r)))
            .collect::<Vec<_>>()
    };
    let mut done = page0_done;
    for b in 0..nblocks {
        let is_data = first[b as usize].is_some_and(|r| r.kind == PageKind::Data);
        if programmed[b as usize] == 0 || is_data {
            continue;
        }
        for (slot, r) in page0_units(b) {
            meta_pages.push((b, slot, r));
        }
        for page in 1..programmed[b as usize] {
            let (found, t) = read_record(nand, page0_done, g.ppn_in_block(Pbn(b), page), &mut oob)?;
            reads_done += 1;
            done = done.max(t);
            for (slot, r) in unit_records(found, &oob, upp) {
                meta_pages.push((b, page * upp + slot, r));
            }
        }
    }
    let mut max_seq = 0u64;
    for r in first.iter().flatten() {
        max_seq = max_seq.max(r.seq);
    }
    // Step 2.
    let mut cps: Vec<(u64, u32, u32, Ppn)> = meta_pages
        .iter()
        .filter(|m| m.2.kind == PageKind::MapCheckpoint)
        .map(|&(b, unit, r)| {
            (
                r.seq,
                r.key.min(u64::from(u32::MAX)) as u32,
                u32::try_from(r.aux).unwrap_or(0),
                loc(b, unit),
            )
        })
        .collect();
    for m in &meta_pages {
        max_seq = max_seq.max(m.2.seq);
    }
    let (found, cp_done) = newest_checkpoint(nand, done, &mut cps, MAP_MAGIC, |content| {
        decode_map_checkpoint(content, capacity, nblocks)
    })?;
    let chosen: Option<Chosen> = found.map(|(seq, (map, blocks), pages)| (seq, map, blocks, pages));
    done = cp_done;
    // Step 3.
    let full = reads == RecoveryReads::Full;
    let (unchanged, frozen) = vouched_blocks(nand, chosen.as_ref(), &first)?;
    // The reference reads everything: its newest copies win over a retired block's stale ones.
    let skip = |b: usize| !full && frozen[b];
    let mut map = vec![UNMAPPED; capacity as usize];
    let mut map_seq = vec![0u64; capacity as usize];
    let mut map_aux = vec![0u64; capacity as usize];
    let mut take = |ppn: Ppn, r: &OobRecord| {
        if r.kind == PageKind::Data && r.key < capacity {
            let k = r.key as usize;
            if r.seq > map_seq[k] {
                map[k] = ppn.0 as u32;
                map_seq[k] = r.seq;
                map_aux[k] = r.aux;
            }
        }
    };
    let mut scan_done = done;
    for b in 0..nblocks as usize {
        // Blocks without a data record on page 0 were read in step 1 (their records are in
        // `meta_pages`); a torn page 0 means the cut hit the block's first program.
        if !first[b].is_some_and(|r| r.kind == PageKind::Data) || skip(b) {
            continue;
        }
        let from = match &chosen {
            Some(c) if !full && unchanged[b] => c.2[b].written.max(1),
            _ => {
                for (slot, r) in page0_units(b as u32) {
                    max_seq = max_seq.max(r.seq);
                    take(loc(b as u32, slot), &r);
                }
                1
            }
        };
        for page in from..programmed[b] {
            let ppn = g.ppn_in_block(Pbn(b as u32), page);
            let (found, t) = read_record(nand, done, ppn, &mut oob)?;
            reads_done += 1;
            scan_done = scan_done.max(t);
            for (slot, r) in unit_records(found, &oob, upp) {
                max_seq = max_seq.max(r.seq);
                take(loc(b as u32, page * upp + slot), &r);
            }
        }
    }
    for &(b, unit, r) in &meta_pages {
        if !skip(b as usize) {
            take(loc(b, unit), &r);
        }
    }
    done = scan_done;
    // Step 4: the checkpoint's entries into unchanged blocks where nothing was scanned.
    let (journal, checkpoint_seq) = merge_map_checkpoint(
        chosen,
        full,
        (&g, upp),
        &unchanged,
        (&mut map, &mut map_seq, &mut map_aux),
        &mut max_seq,
    );
    Ok(Recovered {
        map,
        map_seq,
        map_aux,
        tpages: Vec::new(),
        journal,
        next_seq: max_seq + 1,
        checkpoint_seq,
        pages_scanned: reads_done,
        done_ns: done,
    })
}
