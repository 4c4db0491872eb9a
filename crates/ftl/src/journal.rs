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
//! Invariants:
//! 1. A trim record is programmed before the trimmed pages are invalidated (so before GC can
//!    erase them), and stays valid until a complete checkpoint newer than it exists.
//! 2. The previous checkpoint stays valid until every page of the next one is programmed.
//! 3. Data copies older than a live trim record or checkpoint never win over it (steps 3, 4);
//!    copies newer than both always win (a write after a trim is newer than the trim).
//! 4. On a metadata-only store checkpoint payloads do not survive, so recovery there falls back
//!    to older checkpoints or none; such stores keep no data to recover anyway.

use nand::{Nand, NandError, Nanos, Pbn, Ppn, Purpose};

use crate::block_device::FtlError;
use crate::oob::{scan_blocks, OobRecord, PageKind, ScanExtent};
use crate::space::{FlashSpace, LivePage, Move};

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
    cp_pages: u32,
    capacity: u64,
    stream: u8,
    page: Vec<u8>,
    moves: Vec<Move>,
    pub records_written: u64,
    pub checkpoints_written: u64,
}

impl Journal {
    pub fn new(capacity: u64, page_bytes: usize, stream: u8) -> Self {
        let bits = 8 * (page_bytes - CP_HEADER_BYTES) as u64;
        Journal {
            live: Vec::new(),
            live_trims: 0,
            cp_pages: capacity.div_ceil(bits).max(1) as u32,
            capacity,
            stream,
            page: vec![0; page_bytes],
            moves: Vec::new(),
            records_written: 0,
            checkpoints_written: 0,
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
        let per_page = self.page.len() - CP_HEADER_BYTES;
        let mut done = at_ns;
        let mut written = Vec::with_capacity(self.cp_pages as usize);
        for index in 0..self.cp_pages {
            let from = (index as usize * per_page).min(mapped.len());
            let to = (from + per_page).min(mapped.len());
            let bytes = &mapped[from..to];
            self.page.fill(0);
            self.page[0..8].copy_from_slice(CP_MAGIC);
            self.page[8..16].copy_from_slice(&seq.to_le_bytes());
            self.page[16..20].copy_from_slice(&index.to_le_bytes());
            self.page[20..24].copy_from_slice(&self.cp_pages.to_le_bytes());
            self.page[24..28].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
            self.page[CP_HEADER_BYTES..CP_HEADER_BYTES + bytes.len()].copy_from_slice(bytes);
            let mut h = crc32fast::Hasher::new();
            h.update(&self.page[0..28]);
            h.update(bytes);
            let crc = h.finalize();
            self.page[28..32].copy_from_slice(&crc.to_le_bytes());
            let rec = OobRecord::new(
                PageKind::Checkpoint,
                u64::from(index),
                seq,
                u64::from(self.cp_pages),
            );
            let (ppn, t) = space.write(at_ns, self.stream, &rec, &self.page, Purpose::Meta)?;
            self.absorb(space, other);
            written.push(ppn);
            done = done.max(t);
        }
        // Only now is the new checkpoint complete: drop what it supersedes.
        for (_, _, ppn) in self.live.drain(..) {
            space.invalidate(ppn);
        }
        self.live
            .extend(written.into_iter().map(|p| (PageKind::Checkpoint, seq, p)));
        self.live_trims = 0;
        self.checkpoints_written += 1;
        Ok(done)
    }
}

/// What the recovery scan rebuilt.
#[derive(Debug)]
pub struct Recovered {
    /// Logical page -> physical page, `UNMAPPED` if none.
    pub map: Vec<u32>,
    /// Sequence number of each mapped page's winning copy (0 if unmapped).
    pub map_seq: Vec<u64>,
    /// The OOB `aux` field of each mapped page's winning copy (callers keep their own tags in
    /// it, e.g. the native store's stream), so that nobody reads those OOBs a second time.
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
    let scanned = scan_blocks(nand, at_ns, ScanExtent::Programmed, &mut |b, s| {
        for (page, rec) in s.records {
            let ppn = g.ppn_in_block(Pbn(b), page);
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
    cps.sort_unstable_by_key(|c| (std::cmp::Reverse(c.0), c.1));
    cps.dedup_by_key(|c| (c.0, c.1));
    let mut journal = Vec::new();
    let mut checkpoint_seq = None;
    let mut data = vec![0u8; g.page_size_bytes as usize];
    let per_page = g.page_size_bytes as usize - CP_HEADER_BYTES;
    let mut i = 0;
    while i < cps.len() {
        let seq = cps[i].0;
        let group_end = cps[i..]
            .iter()
            .position(|c| c.0 != seq)
            .map_or(cps.len(), |p| i + p);
        let group = &cps[i..group_end];
        let count = group[0].2;
        let complete = group.len() as u32 == count
            && group
                .iter()
                .enumerate()
                .all(|(k, c)| c.1 == k as u32 && c.2 == count);
        if complete {
            let mut bitmap = vec![0u8; count as usize * per_page];
            let mut intact = true;
            for c in group {
                match nand.read(at_ns, c.3, &mut data, &mut [], Purpose::Recovery) {
                    Ok(d) => done = done.max(d.done_ns),
                    Err(NandError::Torn(_) | NandError::Uncorrectable { .. }) => {
                        intact = false;
                        break;
                    }
                    Err(e) => return Err(e.into()),
                }
                let Some(bytes) = checkpoint_payload(&data, seq, c.1, count) else {
                    intact = false;
                    break;
                };
                let off = c.1 as usize * per_page;
                bitmap[off..off + bytes.len()].copy_from_slice(bytes);
            }
            if intact {
                for lpn in 0..capacity as usize {
                    let bit = bitmap
                        .get(lpn / 8)
                        .is_some_and(|b| b & (1 << (lpn % 8)) != 0);
                    if map[lpn] != UNMAPPED && map_seq[lpn] <= seq && !bit {
                        map[lpn] = UNMAPPED;
                        map_seq[lpn] = 0;
                    }
                }
                journal.extend(group.iter().map(|c| (PageKind::Checkpoint, seq, c.3)));
                checkpoint_seq = Some(seq);
                break;
            }
        }
        i = group_end;
    }

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

/// The bitmap bytes of checkpoint page `index` of `count`, if its header and CRC check out.
fn checkpoint_payload(page: &[u8], seq: u64, index: u32, count: u32) -> Option<&[u8]> {
    if &page[0..8] != CP_MAGIC {
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
