//! The write-ahead log: record formats, the circular log on the page store, and its reader.
//!
//! LSNs are positions in an unbounded stream of payload bytes; stream block `b` holds positions
//! `b * PAYLOAD .. (b + 1) * PAYLOAD` and lives in log block `b % log_blocks` of the page store.
//!
//! Log block (4096 bytes):
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | CRC-32 of bytes 4..4096 |
//! | 4 | 4 | magic `NLOG` |
//! | 8 | 8 | stream block number `b` |
//! | 16 | 4 | epoch (incremented at every open; see invariant 5) |
//! | 20 | 2 | payload bytes used |
//! | 22 | 2 | reserved |
//! | 24 | 4072 | payload |
//!
//! Record: `len u32 | crc u32 | txn u64 | prev_lsn u64 | kind u8 | body`, where `len` counts
//! the bytes after the crc and the crc covers them. Bodies are listed in docs/storage.md.
//!
//! Invariants:
//! 1. A block is written only once per epoch and never rewritten after a force: a force pads the
//!    rest of its last block, so a torn rewrite can never destroy durable records.
//! 2. `durable_lsn` is the end of the last record on stable storage; a commit is acknowledged only
//!    once `durable_lsn` passed its commit record.
//! 3. Stream blocks older than `tail_lsn` may be overwritten; `tail_lsn` never passes the oldest
//!    record recovery needs (checkpoint begin, oldest dirty page, oldest transaction that has not
//!    committed: a committed one is never undone, `oldest_undo_lsn`).
//! 4. The reader stops at the first block that is missing, torn or stale (wrong stream number)
//!    and at the first record whose crc fails, except as in 5.
//! 5. After a crash the log restarts at the next block boundary in a higher epoch; a record that
//!    cannot be completed inside its own epoch is followed by a jump to the next block if that
//!    block belongs to a higher epoch (the restart point), and the log ends otherwise.
//! 6. Blocks are reported dead to the store (`PageStore::log_released`) only once the tail has
//!    passed them, and never a device slot of the live window from the tail's block to the head's
//!    block; so a store may drop their content (NoFTL: invalidate without a flash operation), and a
//!    stale or missing copy of a released block is what invariant 4 already handles.
//! 7. A record reads back by LSN whole at any time (`LogManager::read`, rollbacks): from the
//!    buffer if it starts there, else from the device, with the blocks from `buf_start` on (not
//!    written yet: `spill` writes whole blocks only, and a record may span into them) served from
//!    the buffer.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::page::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};
use crate::pagestore::{PageStore, LOG_BLOCK_BYTES};
use crate::{Lsn, Nanos, ObjectId, PageId};

pub const BLOCK_HEADER: usize = 24;
pub const PAYLOAD: u64 = (LOG_BLOCK_BYTES - BLOCK_HEADER) as u64;
const MAGIC: u32 = u32::from_le_bytes(*b"NLOG");
/// The first LSN of a fresh log (stream block 1, so that LSN 0 means "none").
pub const FIRST_LSN: Lsn = PAYLOAD;

// Defined at the crate root (lock and engine use it too); `log::TxnId` stays valid.
pub use crate::TxnId;

/// A physiological page operation: redo applies it to one page (or one space-map bit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// The whole page, with the free gap between `lo` and `hi` bytes elided (zeros).
    PageImage {
        pid: PageId,
        lo: Vec<u8>,
        hi: Vec<u8>,
    },
    /// Sets or clears the allocation bit of `pid` in space-map page `map`.
    SetAlloc {
        map: PageId,
        pid: PageId,
        on: bool,
        object: ObjectId,
        kind: u8,
    },
    /// Sets a 32-bit header field (`page::next`, `prev`, slotted `aux`, `aux2`) by its offset.
    SetField {
        pid: PageId,
        offset: u16,
        value: u32,
    },
    HeapInsert {
        pid: PageId,
        slot: u16,
        data: Vec<u8>,
    },
    HeapRemove {
        pid: PageId,
        slot: u16,
    },
    HeapGhost {
        pid: PageId,
        slot: u16,
        ghost: bool,
    },
    HeapUpdate {
        pid: PageId,
        slot: u16,
        data: Vec<u8>,
    },
    BtInsert {
        pid: PageId,
        key: Vec<u8>,
        val: Vec<u8>,
    },
    BtDelete {
        pid: PageId,
        key: Vec<u8>,
    },
}

impl Op {
    /// The page this operation changes.
    pub fn pid(&self) -> PageId {
        match self {
            Op::SetAlloc { map, .. } => *map,
            Op::PageImage { pid, .. }
            | Op::SetField { pid, .. }
            | Op::HeapInsert { pid, .. }
            | Op::HeapRemove { pid, .. }
            | Op::HeapGhost { pid, .. }
            | Op::HeapUpdate { pid, .. }
            | Op::BtInsert { pid, .. }
            | Op::BtDelete { pid, .. } => *pid,
        }
    }
    /// A page image of `page`, gap elided.
    pub fn image(pid: PageId, page: &[u8]) -> Op {
        let (lo, hi) = crate::slotted::gap(page);
        Op::PageImage {
            pid,
            lo: page[..lo].to_vec(),
            hi: page[hi..].to_vec(),
        }
    }
}

/// How to undo an update (logical for indexes: the key may have moved to another page).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undo {
    HeapRemove {
        pid: PageId,
        slot: u16,
    },
    HeapUnghost {
        pid: PageId,
        slot: u16,
    },
    HeapRestore {
        pid: PageId,
        slot: u16,
        old: Vec<u8>,
    },
    /// Remove `key` from the B-tree rooted at `root`.
    IndexRemove {
        root: PageId,
        key: Vec<u8>,
    },
    /// Put `key -> val` back into the B-tree rooted at `root`.
    IndexPut {
        root: PageId,
        key: Vec<u8>,
        val: Vec<u8>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnEntry {
    pub txn: TxnId,
    pub last_lsn: Lsn,
    pub undo_next: Lsn,
    pub first_lsn: Lsn,
    pub committed: bool,
}

/// The oldest log record an undo may still need: the first record of the oldest transaction
/// that has not committed. A committed transaction (its commit record durable) is never undone,
/// so its records bind the log tail only through the dirty pages they changed (invariant 3).
pub fn oldest_undo_lsn<'a>(att: impl IntoIterator<Item = &'a TxnEntry>) -> Option<Lsn> {
    att.into_iter()
        .filter(|t| !t.committed)
        .map(|t| t.first_lsn)
        .min()
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// Redo-only changes applied atomically (structure modifications, allocation).
    Redo(Vec<Op>),
    Update {
        op: Op,
        undo: Undo,
    },
    /// Compensation: redo `ops`; undo continues at `undo_next`.
    Clr {
        ops: Vec<Op>,
        undo_next: Lsn,
    },
    Commit,
    Abort,
    End,
    CkptBegin,
    CkptEnd {
        att: Vec<TxnEntry>,
        dpt: Vec<(PageId, Lsn)>,
        next_txn: TxnId,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    pub txn: TxnId,
    pub prev_lsn: Lsn,
    pub body: Body,
}

impl LogRecord {
    pub fn ops(&self) -> &[Op] {
        match &self.body {
            Body::Redo(ops) | Body::Clr { ops, .. } => ops,
            Body::Update { op, .. } => std::slice::from_ref(op),
            _ => &[],
        }
    }
}

// ---- encoding ----

struct W(Vec<u8>);
impl W {
    fn u8(&mut self, v: u8) {
        self.0.push(v)
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes())
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes())
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u16(b.len() as u16);
        self.0.extend_from_slice(b)
    }
    fn op(&mut self, op: &Op) {
        match op {
            Op::PageImage { pid, lo, hi } => {
                self.u8(1);
                self.u32(*pid);
                self.bytes(lo);
                self.bytes(hi);
            }
            Op::SetAlloc {
                map,
                pid,
                on,
                object,
                kind,
            } => {
                self.u8(2);
                self.u32(*map);
                self.u32(*pid);
                self.u8(u8::from(*on));
                self.u32(*object);
                self.u8(*kind);
            }
            Op::SetField { pid, offset, value } => {
                self.u8(3);
                self.u32(*pid);
                self.u16(*offset);
                self.u32(*value);
            }
            Op::HeapInsert { pid, slot, data } => {
                self.u8(4);
                self.u32(*pid);
                self.u16(*slot);
                self.bytes(data);
            }
            Op::HeapRemove { pid, slot } => {
                self.u8(5);
                self.u32(*pid);
                self.u16(*slot);
            }
            Op::HeapGhost { pid, slot, ghost } => {
                self.u8(6);
                self.u32(*pid);
                self.u16(*slot);
                self.u8(u8::from(*ghost));
            }
            Op::HeapUpdate { pid, slot, data } => {
                self.u8(7);
                self.u32(*pid);
                self.u16(*slot);
                self.bytes(data);
            }
            Op::BtInsert { pid, key, val } => {
                self.u8(8);
                self.u32(*pid);
                self.bytes(key);
                self.bytes(val);
            }
            Op::BtDelete { pid, key } => {
                self.u8(9);
                self.u32(*pid);
                self.bytes(key);
            }
        }
    }
    fn undo(&mut self, u: &Undo) {
        match u {
            Undo::HeapRemove { pid, slot } => {
                self.u8(1);
                self.u32(*pid);
                self.u16(*slot);
            }
            Undo::HeapUnghost { pid, slot } => {
                self.u8(2);
                self.u32(*pid);
                self.u16(*slot);
            }
            Undo::HeapRestore { pid, slot, old } => {
                self.u8(3);
                self.u32(*pid);
                self.u16(*slot);
                self.bytes(old);
            }
            Undo::IndexRemove { root, key } => {
                self.u8(4);
                self.u32(*root);
                self.bytes(key);
            }
            Undo::IndexPut { root, key, val } => {
                self.u8(5);
                self.u32(*root);
                self.bytes(key);
                self.bytes(val);
            }
        }
    }
}

struct R<'a>(&'a [u8], usize);
impl R<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.0.get(self.1..self.1 + n)?;
        self.1 += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        let b = self.take(2)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.u16()? as usize;
        Some(self.take(n)?.to_vec())
    }
    fn op(&mut self) -> Option<Op> {
        Some(match self.u8()? {
            1 => Op::PageImage {
                pid: self.u32()?,
                lo: self.bytes()?,
                hi: self.bytes()?,
            },
            2 => Op::SetAlloc {
                map: self.u32()?,
                pid: self.u32()?,
                on: self.u8()? != 0,
                object: self.u32()?,
                kind: self.u8()?,
            },
            3 => Op::SetField {
                pid: self.u32()?,
                offset: self.u16()?,
                value: self.u32()?,
            },
            4 => Op::HeapInsert {
                pid: self.u32()?,
                slot: self.u16()?,
                data: self.bytes()?,
            },
            5 => Op::HeapRemove {
                pid: self.u32()?,
                slot: self.u16()?,
            },
            6 => Op::HeapGhost {
                pid: self.u32()?,
                slot: self.u16()?,
                ghost: self.u8()? != 0,
            },
            7 => Op::HeapUpdate {
                pid: self.u32()?,
                slot: self.u16()?,
                data: self.bytes()?,
            },
            8 => Op::BtInsert {
                pid: self.u32()?,
                key: self.bytes()?,
                val: self.bytes()?,
            },
            9 => Op::BtDelete {
                pid: self.u32()?,
                key: self.bytes()?,
            },
            _ => return None,
        })
    }
    fn undo(&mut self) -> Option<Undo> {
        Some(match self.u8()? {
            1 => Undo::HeapRemove {
                pid: self.u32()?,
                slot: self.u16()?,
            },
            2 => Undo::HeapUnghost {
                pid: self.u32()?,
                slot: self.u16()?,
            },
            3 => Undo::HeapRestore {
                pid: self.u32()?,
                slot: self.u16()?,
                old: self.bytes()?,
            },
            4 => Undo::IndexRemove {
                root: self.u32()?,
                key: self.bytes()?,
            },
            5 => Undo::IndexPut {
                root: self.u32()?,
                key: self.bytes()?,
                val: self.bytes()?,
            },
            _ => return None,
        })
    }
    fn ops(&mut self) -> Option<Vec<Op>> {
        let n = self.u16()?;
        (0..n).map(|_| self.op()).collect()
    }
}

impl LogRecord {
    /// The record as it goes into the stream (length and crc included).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64);
        self.encode_into(&mut b);
        b
    }

    /// Appends the record's bytes to `out` (the log buffer, or a caller's scratch): the hot path
    /// encodes every record straight into the log buffer instead of a fresh `Vec` per record.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let mut w = W(std::mem::take(out));
        w.u32(0);
        w.u32(0);
        w.u64(self.txn);
        w.u64(self.prev_lsn);
        match &self.body {
            Body::Redo(ops) => {
                w.u8(1);
                w.u16(ops.len() as u16);
                ops.iter().for_each(|o| w.op(o));
            }
            Body::Update { op, undo } => {
                w.u8(2);
                w.op(op);
                w.undo(undo);
            }
            Body::Clr { ops, undo_next } => {
                w.u8(3);
                w.u64(*undo_next);
                w.u16(ops.len() as u16);
                ops.iter().for_each(|o| w.op(o));
            }
            Body::Commit => w.u8(4),
            Body::Abort => w.u8(5),
            Body::End => w.u8(6),
            Body::CkptBegin => w.u8(7),
            Body::CkptEnd { att, dpt, next_txn } => {
                w.u8(8);
                w.u64(*next_txn);
                w.u32(att.len() as u32);
                for t in att {
                    w.u64(t.txn);
                    w.u64(t.last_lsn);
                    w.u64(t.undo_next);
                    w.u64(t.first_lsn);
                    w.u8(u8::from(t.committed));
                }
                w.u32(dpt.len() as u32);
                for (p, l) in dpt {
                    w.u32(*p);
                    w.u64(*l);
                }
            }
        }
        *out = w.0;
        let rec = &mut out[start..];
        let len = (rec.len() - 8) as u32;
        let crc = crc32fast::hash(&rec[8..]);
        put_u32(rec, 0, len);
        put_u32(rec, 4, crc);
    }

    /// Decodes the bytes after length and crc (already checked).
    pub fn decode(b: &[u8]) -> Option<LogRecord> {
        let mut r = R(b, 0);
        let txn = r.u64()?;
        let prev_lsn = r.u64()?;
        let body = match r.u8()? {
            1 => Body::Redo(r.ops()?),
            2 => Body::Update {
                op: r.op()?,
                undo: r.undo()?,
            },
            3 => {
                let undo_next = r.u64()?;
                Body::Clr {
                    ops: r.ops()?,
                    undo_next,
                }
            }
            4 => Body::Commit,
            5 => Body::Abort,
            6 => Body::End,
            7 => Body::CkptBegin,
            8 => {
                let next_txn = r.u64()?;
                let n = r.u32()? as usize;
                let mut att = Vec::with_capacity(n.min(4096));
                for _ in 0..n {
                    att.push(TxnEntry {
                        txn: r.u64()?,
                        last_lsn: r.u64()?,
                        undo_next: r.u64()?,
                        first_lsn: r.u64()?,
                        committed: r.u8()? != 0,
                    });
                }
                let n = r.u32()? as usize;
                let mut dpt = Vec::with_capacity(n.min(65536));
                for _ in 0..n {
                    dpt.push((r.u32()?, r.u64()?));
                }
                Body::CkptEnd { att, dpt, next_txn }
            }
            _ => return None,
        };
        (r.1 == b.len()).then_some(LogRecord {
            txn,
            prev_lsn,
            body,
        })
    }
}

// ---- the log manager ----

fn block_of(lsn: Lsn) -> u64 {
    lsn / PAYLOAD
}
fn block_start(b: u64) -> Lsn {
    b * PAYLOAD
}

/// Counters of the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LogStats {
    pub records: u64,
    pub bytes: u64,
    pub forces: u64,
    pub blocks_written: u64,
}

#[derive(Debug)]
pub struct LogManager {
    capacity_blocks: u64,
    epoch: u32,
    /// Where the next record goes.
    next_lsn: Lsn,
    /// Unwritten payload: stream bytes `buf_start .. next_lsn`; `buf_start` is block aligned
    /// or the middle of a block whose first part was written by `write_full_blocks`... never:
    /// only whole blocks are written early, so `buf_start` is always block aligned.
    buf: Vec<u8>,
    buf_start: Lsn,
    durable_lsn: Lsn,
    tail_lsn: Lsn,
    /// Absolute blocks below this were reported dead to the store (invariant 6).
    released_to: u64,
    pub stats: LogStats,
    /// Bytes kept in memory before full blocks are written without a force.
    spill_bytes: usize,
    /// Scratch for the block images of a write, kept so that a force does not allocate.
    images: Vec<u8>,
}

impl LogManager {
    /// A log that appends at `start_lsn` (block aligned) in `epoch`; everything before is durable.
    pub fn new(capacity_blocks: u64, epoch: u32, start_lsn: Lsn, tail_lsn: Lsn) -> LogManager {
        assert_eq!(
            start_lsn % PAYLOAD,
            0,
            "the log restarts at a block boundary"
        );
        LogManager {
            capacity_blocks,
            epoch,
            next_lsn: start_lsn,
            buf: Vec::with_capacity(1 << 16),
            buf_start: start_lsn,
            durable_lsn: start_lsn,
            tail_lsn: tail_lsn.min(start_lsn),
            // The live window is the tail's block to the head's: the device slots of the lap
            // before it hold dead blocks (of this or earlier epochs) not yet reported.
            released_to: (block_of(start_lsn) + 1).saturating_sub(capacity_blocks),
            stats: LogStats::default(),
            spill_bytes: 1 << 20,
            images: Vec::new(),
        }
    }
    pub fn next_lsn(&self) -> Lsn {
        self.next_lsn
    }
    pub fn durable_lsn(&self) -> Lsn {
        self.durable_lsn
    }
    pub fn tail_lsn(&self) -> Lsn {
        self.tail_lsn
    }
    pub fn epoch(&self) -> u32 {
        self.epoch
    }
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_blocks * PAYLOAD
    }
    /// Stream bytes held between the tail and the head.
    pub fn used_bytes(&self) -> u64 {
        self.next_lsn - self.tail_lsn
    }
    /// Advances the reusable point (invariant 3).
    pub fn set_tail(&mut self, lsn: Lsn) {
        if lsn > self.tail_lsn {
            self.tail_lsn = lsn.min(self.durable_lsn);
        }
    }
    /// Reports to the store the blocks the tail has passed since the last call (invariant 6), in
    /// at most two ranges of device blocks (split at the wrap). Returns the completion time.
    pub fn release_dead(&mut self, store: &mut dyn PageStore, at: Nanos) -> Result<Nanos> {
        let cap = self.capacity_blocks;
        let end = block_of(self.tail_lsn);
        let head = block_of(self.next_lsn);
        // A slot of the live window [end, head] is never released: start past head - cap.
        let mut b = self.released_to.max((head + 1).saturating_sub(cap));
        let mut done = at;
        while b < end {
            let dev = b % cap;
            let n = (end - b).min(cap - dev);
            debug_assert!(b + cap > head && b < end, "released block {b} is live");
            done = done.max(store.log_released(at, dev, n)?);
            b += n;
        }
        self.released_to = self.released_to.max(end);
        Ok(done)
    }
    /// Would `bytes` more fit (keeping `reserve` bytes free for rollbacks)?
    pub fn has_room(&self, bytes: usize, reserve: u64) -> bool {
        let end = self.next_lsn + bytes as u64;
        let blocks = block_of(end) + 1 - block_of(self.tail_lsn);
        blocks * PAYLOAD + reserve < self.capacity_blocks * PAYLOAD
    }

    /// Appends a record; returns its LSN. The caller checked room with `has_room`.
    pub fn append(&mut self, rec: &LogRecord) -> Result<Lsn> {
        // Encoded in place at the end of the buffer, taken back if it does not fit.
        let start = self.buf.len();
        rec.encode_into(&mut self.buf);
        let len_bytes = self.buf.len() - start;
        if !self.has_room(len_bytes, 0) {
            self.buf.truncate(start);
            return Err(Error::LogFull {
                used_bytes: self.used_bytes(),
                capacity_bytes: self.capacity_bytes(),
            });
        }
        let lsn = self.next_lsn;
        self.next_lsn += len_bytes as u64;
        self.stats.records += 1;
        self.stats.bytes += len_bytes as u64;
        Ok(lsn)
    }

    /// `append` of a record encoded by `LogRecord::encode_into` (the engine sizes a record
    /// before it makes room, so it encodes once and appends the bytes).
    pub fn append_encoded(&mut self, bytes: &[u8]) -> Result<Lsn> {
        if !self.has_room(bytes.len(), 0) {
            return Err(Error::LogFull {
                used_bytes: self.used_bytes(),
                capacity_bytes: self.capacity_bytes(),
            });
        }
        let lsn = self.next_lsn;
        self.buf.extend_from_slice(bytes);
        self.next_lsn += bytes.len() as u64;
        self.stats.records += 1;
        self.stats.bytes += bytes.len() as u64;
        Ok(lsn)
    }

    /// True when the buffer should be spilled (full blocks written without a force).
    pub fn wants_spill(&self) -> bool {
        self.buf.len() >= self.spill_bytes
    }

    /// Appends block `b`'s image to `out` (the caller's scratch: no allocation per block).
    fn block_image_into(&self, b: u64, payload: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + LOG_BLOCK_BYTES, 0);
        let img = &mut out[start..];
        put_u32(img, 4, MAGIC);
        put_u64(img, 8, b);
        put_u32(img, 16, self.epoch);
        put_u16(img, 20, payload.len() as u16);
        img[BLOCK_HEADER..BLOCK_HEADER + payload.len()].copy_from_slice(payload);
        let c = crc32fast::hash(&img[4..]);
        put_u32(img, 0, c);
    }

    /// Writes stream blocks `first..` from `payload` (consecutive), splitting at the wrap.
    fn write_blocks(
        &mut self,
        store: &mut dyn PageStore,
        at: Nanos,
        first: u64,
        payload: &[u8],
    ) -> Result<Nanos> {
        let mut done = at;
        let mut images = std::mem::take(&mut self.images);
        images.clear();
        let mut start_dev = first % self.capacity_blocks;
        for (i, chunk) in payload.chunks(PAYLOAD as usize).enumerate() {
            let b = first + i as u64;
            let dev = b % self.capacity_blocks;
            if dev == 0 && !images.is_empty() {
                done = done.max(store.write_log(at, start_dev, &images)?);
                images.clear();
                start_dev = 0;
            }
            self.block_image_into(b, chunk, &mut images);
            self.stats.blocks_written += 1;
        }
        let r = if images.is_empty() {
            Ok(done)
        } else {
            store.write_log(at, start_dev, &images).map(|t| done.max(t))
        };
        self.images = images;
        r
    }

    /// Writes the full blocks of the buffer without forcing (they become durable at the next
    /// force); keeps the partial last block in memory.
    pub fn spill(&mut self, store: &mut dyn PageStore, at: Nanos) -> Result<Nanos> {
        let full = (self.buf.len() as u64 / PAYLOAD) as usize * PAYLOAD as usize;
        if full == 0 {
            return Ok(at);
        }
        let payload: Vec<u8> = self.buf.drain(..full).collect();
        let t = self.write_blocks(store, at, block_of(self.buf_start), &payload)?;
        self.buf_start += full as u64;
        Ok(t)
    }

    /// Makes every appended record durable (group commit: one force covers all of them).
    /// Pads the last block (invariant 1).
    pub fn force(&mut self, store: &mut dyn PageStore, at: Nanos) -> Result<Nanos> {
        if self.durable_lsn >= self.next_lsn {
            return Ok(at);
        }
        let payload = std::mem::take(&mut self.buf);
        let t = self.write_blocks(store, at, block_of(self.buf_start), &payload)?;
        let t = store.force_log(t)?;
        self.stats.forces += 1;
        self.durable_lsn = self.next_lsn;
        // Pad: the next record starts a fresh block.
        if !self.next_lsn.is_multiple_of(PAYLOAD) {
            self.next_lsn = block_start(block_of(self.next_lsn) + 1);
        }
        self.buf_start = self.next_lsn;
        self.buf = payload;
        self.buf.clear();
        Ok(t)
    }

    /// Reads the record at `lsn`, from memory if it is not yet written.
    pub fn read(
        &self,
        store: &mut dyn PageStore,
        at: Nanos,
        lsn: Lsn,
    ) -> Result<(LogRecord, Nanos)> {
        if lsn >= self.buf_start && lsn < self.next_lsn {
            let off = (lsn - self.buf_start) as usize;
            let len = get_u32(&self.buf, off) as usize;
            let rec = LogRecord::decode(&self.buf[off + 8..off + 8 + len]).ok_or_else(|| {
                Error::LogCorrupt {
                    lsn,
                    why: "undecodable record in the log buffer".into(),
                }
            })?;
            return Ok((rec, at));
        }
        let mut rd = LogReader::new(self.capacity_blocks);
        if lsn < self.buf_start && !self.buf.is_empty() {
            // The record's head may sit in the last block spilled while its tail still waits
            // in the buffer (`spill` writes whole blocks only, records span blocks): the blocks
            // from `buf_start` on are read from memory, as the force would write them. Read
            // from the device instead, the continuation block is the previous lap's (or never
            // written) and the record reads as missing: a rollback then failed with "log is
            // corrupt" in a fault-free run (found by the mixed-fault crash campaign).
            rd.hold_unwritten(block_of(self.buf_start), self.epoch, &self.buf);
        }
        match rd.record_at(store, at, lsn)? {
            Found::Record(rec, _) => Ok((rec, rd.done_ns)),
            _ => Err(Error::LogCorrupt {
                lsn,
                why: "record is missing or damaged".into(),
            }),
        }
    }
}

// ---- the reader ----

#[derive(Clone, Debug)]
struct Block {
    epoch: u32,
    used: usize,
    payload: Vec<u8>,
}

/// What is found at a position.
#[derive(Debug)]
pub enum Found {
    /// A record and the position after it.
    Record(LogRecord, Lsn),
    /// Nothing more here; continue at this position.
    Jump(Lsn),
    End,
}

/// Reads the log back (recovery scan and random access by LSN).
#[derive(Debug)]
pub struct LogReader {
    capacity_blocks: u64,
    cache: HashMap<u64, Option<Block>>,
    /// Completion time of the reads so far.
    pub done_ns: Nanos,
    pub blocks_read: u64,
    /// Blocks `unwritten_from..` held in memory (`hold_unwritten`): the log buffer's.
    unwritten_from: u64,
    unwritten: Vec<Block>,
}

impl LogReader {
    pub fn new(capacity_blocks: u64) -> LogReader {
        LogReader {
            capacity_blocks,
            cache: HashMap::new(),
            done_ns: 0,
            blocks_read: 0,
            unwritten_from: u64::MAX,
            unwritten: Vec::new(),
        }
    }

    /// Serves blocks `first..` from `payload` (the log buffer: stream bytes from block `first`'s
    /// start, in `epoch`) instead of the device: they are not written yet. No device time.
    fn hold_unwritten(&mut self, first: u64, epoch: u32, payload: &[u8]) {
        self.unwritten_from = first;
        self.unwritten = payload
            .chunks(PAYLOAD as usize)
            .map(|chunk| Block {
                epoch,
                used: chunk.len(),
                payload: chunk.to_vec(),
            })
            .collect();
    }

    fn block(&mut self, store: &mut dyn PageStore, at: Nanos, b: u64) -> Result<Option<Block>> {
        if let Some(i) = b.checked_sub(self.unwritten_from) {
            if let Some(blk) = self.unwritten.get(i as usize) {
                return Ok(Some(blk.clone()));
            }
        }
        if let Some(blk) = self.cache.get(&b) {
            return Ok(blk.clone());
        }
        if self.cache.len() > 256 {
            self.cache.clear();
        }
        let mut img = vec![0u8; LOG_BLOCK_BYTES];
        let t = store.read_log(at.max(self.done_ns), b % self.capacity_blocks, &mut img)?;
        self.done_ns = self.done_ns.max(t);
        self.blocks_read += 1;
        let ok = get_u32(&img, 4) == MAGIC
            && get_u64(&img, 8) == b
            && get_u32(&img, 0) == crc32fast::hash(&img[4..])
            && (get_u16(&img, 20) as u64) <= PAYLOAD;
        let blk = ok.then(|| {
            let used = get_u16(&img, 20) as usize;
            Block {
                epoch: get_u32(&img, 16),
                used,
                payload: img[BLOCK_HEADER..BLOCK_HEADER + used].to_vec(),
            }
        });
        self.cache.insert(b, blk.clone());
        Ok(blk)
    }

    /// Reads the record at `pos` (invariants 4 and 5).
    pub fn record_at(&mut self, store: &mut dyn PageStore, at: Nanos, pos: Lsn) -> Result<Found> {
        let b0 = block_of(pos);
        let Some(first) = self.block(store, at, b0)? else {
            return Ok(Found::End);
        };
        let off = (pos % PAYLOAD) as usize;
        if off >= first.used {
            // Padding (or the end of a block written before a crash): the next block, if it
            // continues in this epoch or a later one.
            return self.jump(store, at, b0, first.epoch, true);
        }
        // Gather header then body across blocks of the same epoch.
        let mut bytes: Vec<u8> = Vec::new();
        let mut need = 8usize;
        let mut b = b0;
        let mut o = off;
        let mut blk = first.clone();
        loop {
            let take = (blk.used - o).min(need - bytes.len());
            bytes.extend_from_slice(&blk.payload[o..o + take]);
            if bytes.len() == 8 && need == 8 {
                let len = get_u32(&bytes, 0) as usize;
                if !(17..=1 << 24).contains(&len) {
                    return self.jump(store, at, b0, first.epoch, false);
                }
                need = 8 + len;
            }
            o += take;
            if bytes.len() == need {
                break;
            }
            if o < blk.used {
                continue;
            }
            // Continue into the next block: only across a full block, in the same epoch.
            if blk.used < PAYLOAD as usize {
                return self.jump(store, at, b0, first.epoch, false);
            }
            b += 1;
            match self.block(store, at, b)? {
                Some(nb) if nb.epoch == first.epoch => {
                    blk = nb;
                    o = 0;
                }
                _ => return self.jump(store, at, b0, first.epoch, false),
            }
        }
        if crc32fast::hash(&bytes[8..]) != get_u32(&bytes, 4) {
            return self.jump(store, at, b0, first.epoch, false);
        }
        match LogRecord::decode(&bytes[8..]) {
            Some(rec) => Ok(Found::Record(rec, pos + need as u64)),
            None => Err(Error::LogCorrupt {
                lsn: pos,
                why: "a record with a valid crc does not decode".into(),
            }),
        }
    }

    /// After block `b` ends (padding) or holds a broken record: continue at block `b + 1` if it
    /// is valid and in the same epoch (padding only) or a later epoch (a restart point).
    fn jump(
        &mut self,
        store: &mut dyn PageStore,
        at: Nanos,
        b: u64,
        epoch: u32,
        padding: bool,
    ) -> Result<Found> {
        match self.block(store, at, b + 1)? {
            Some(nb) if nb.epoch > epoch || (padding && nb.epoch == epoch) => {
                Ok(Found::Jump(block_start(b + 1)))
            }
            _ => Ok(Found::End),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crashdisk::CrashDisk;
    use crate::pagestore::BlockPageStore;

    fn store() -> BlockPageStore {
        BlockPageStore::new(Box::new(CrashDisk::new(256)), 4096, Some(32)).unwrap()
    }

    fn rec(i: u64, n: usize) -> LogRecord {
        LogRecord {
            txn: i,
            prev_lsn: i * 3,
            body: Body::Update {
                op: Op::HeapInsert {
                    pid: 5,
                    slot: i as u16,
                    data: vec![i as u8; n],
                },
                undo: Undo::HeapRemove { pid: 5, slot: 1 },
            },
        }
    }

    fn scan(store: &mut dyn PageStore, from: Lsn, cap: u64) -> Vec<(Lsn, LogRecord)> {
        let mut rd = LogReader::new(cap);
        let mut out = vec![];
        let mut pos = from;
        loop {
            match rd.record_at(store, 0, pos).unwrap() {
                Found::Record(r, next) => {
                    out.push((pos, r));
                    pos = next;
                }
                Found::Jump(p) => pos = p,
                Found::End => return out,
            }
        }
    }

    #[test]
    fn records_round_trip_through_forces_and_wrap() {
        let mut s = store();
        let mut log = LogManager::new(32, 1, FIRST_LSN, FIRST_LSN);
        let mut lsns = vec![];
        for i in 0..200u64 {
            lsns.push(log.append(&rec(i, 10 + (i as usize * 37) % 3000)).unwrap());
            if i % 7 == 0 {
                log.force(&mut s, 0).unwrap();
            }
            log.set_tail(lsns[lsns.len().saturating_sub(20)]);
        }
        log.force(&mut s, 0).unwrap();
        let first = lsns[180];
        let got = scan(&mut s, first, 32);
        assert_eq!(got.len(), 20);
        for (k, (lsn, r)) in got.iter().enumerate() {
            assert_eq!(*lsn, lsns[180 + k]);
            assert_eq!(*r, rec(180 + k as u64, 10 + ((180 + k) * 37) % 3000));
        }
        let (r, _) = log.read(&mut s, 0, lsns[190]).unwrap();
        assert_eq!(r, rec(190, 10 + (190 * 37) % 3000));
    }

    #[test]
    fn every_body_kind_round_trips() {
        let bodies = vec![
            Body::Redo(vec![
                Op::SetAlloc {
                    map: 0,
                    pid: 9,
                    on: true,
                    object: 3,
                    kind: 2,
                },
                Op::SetField {
                    pid: 9,
                    offset: 24,
                    value: 10,
                },
                Op::PageImage {
                    pid: 9,
                    lo: vec![1; 40],
                    hi: vec![2; 7],
                },
            ]),
            Body::Clr {
                ops: vec![
                    Op::BtDelete {
                        pid: 4,
                        key: vec![1, 2],
                    },
                    Op::HeapGhost {
                        pid: 1,
                        slot: 2,
                        ghost: false,
                    },
                ],
                undo_next: 77,
            },
            Body::Update {
                op: Op::BtInsert {
                    pid: 4,
                    key: vec![3],
                    val: vec![4; 6],
                },
                undo: Undo::IndexRemove {
                    root: 4,
                    key: vec![3],
                },
            },
            Body::Update {
                op: Op::HeapUpdate {
                    pid: 4,
                    slot: 3,
                    data: vec![5],
                },
                undo: Undo::HeapRestore {
                    pid: 4,
                    slot: 3,
                    old: vec![6],
                },
            },
            Body::Update {
                op: Op::BtDelete {
                    pid: 4,
                    key: vec![3],
                },
                undo: Undo::IndexPut {
                    root: 4,
                    key: vec![3],
                    val: vec![1],
                },
            },
            Body::Update {
                op: Op::HeapGhost {
                    pid: 4,
                    slot: 3,
                    ghost: true,
                },
                undo: Undo::HeapUnghost { pid: 4, slot: 3 },
            },
            Body::Update {
                op: Op::HeapRemove { pid: 4, slot: 3 },
                undo: Undo::HeapRemove { pid: 4, slot: 3 },
            },
            Body::Commit,
            Body::Abort,
            Body::End,
            Body::CkptBegin,
            Body::CkptEnd {
                att: vec![TxnEntry {
                    txn: 5,
                    last_lsn: 6,
                    undo_next: 7,
                    first_lsn: 8,
                    committed: true,
                }],
                dpt: vec![(3, 99)],
                next_txn: 12,
            },
        ];
        for body in bodies {
            let r = LogRecord {
                txn: 42,
                prev_lsn: 4242,
                body,
            };
            let b = r.encode();
            assert_eq!(LogRecord::decode(&b[8..]).as_ref(), Some(&r));
        }
    }

    /// A rollback reads records back by LSN before they are forced. A record whose first block
    /// was spilled (whole blocks only) while its tail waits in the buffer reads whole, the tail
    /// from memory: read from the device, the tail block is the previous lap's, and the record
    /// read as "missing or damaged" (a fault-free TPC-C run's rollback failed that way, once in
    /// about 700-1,500 seeds of the mixed-fault campaign).
    #[test]
    fn a_record_spilled_in_part_reads_back_whole_before_the_force() {
        let mut s = store();
        let mut log = LogManager::new(32, 1, FIRST_LSN, FIRST_LSN);
        // Laps of the 32-block log first, so that the blocks after the spill hold old data.
        for i in 0..40 {
            log.append(&rec(i, 3000)).unwrap();
            log.force(&mut s, 0).unwrap();
            log.set_tail(log.next_lsn());
        }
        let big = log.append(&rec(99, 6000)).unwrap();
        log.spill(&mut s, 0).unwrap(); // the record's first block written, its tail buffered
        let (got, _) = log.read(&mut s, 0, big).unwrap();
        assert_eq!(got, rec(99, 6000));
        log.force(&mut s, 0).unwrap();
        let (got, _) = log.read(&mut s, 0, big).unwrap();
        assert_eq!(got, rec(99, 6000));
    }

    #[test]
    fn a_restart_in_a_new_epoch_is_followed_and_stale_blocks_are_not() {
        let mut s = store();
        let mut log = LogManager::new(32, 1, FIRST_LSN, FIRST_LSN);
        // A big record spanning two blocks; only its first block reaches storage.
        let a = log.append(&rec(1, 100)).unwrap();
        log.force(&mut s, 0).unwrap();
        let big = log.append(&rec(2, 6000)).unwrap();
        log.spill(&mut s, 0).unwrap(); // first block of the big record written, not forced
        log.force(&mut s, 0).unwrap();
        // Pretend the second block was lost: overwrite it with zeros.
        let b2 = block_of(big) + 1;
        s.write_log(0, b2 % 32, &vec![0u8; LOG_BLOCK_BYTES])
            .unwrap();
        assert_eq!(scan(&mut s, a, 32).len(), 1);
        // Restart in epoch 2 at the block after the broken record's first block.
        let mut log2 = LogManager::new(32, 2, block_start(block_of(big) + 1), a);
        let c = log2.append(&rec(3, 50)).unwrap();
        log2.force(&mut s, 0).unwrap();
        let got: Vec<Lsn> = scan(&mut s, a, 32).into_iter().map(|(l, _)| l).collect();
        assert_eq!(got, vec![a, c]);
    }
}
