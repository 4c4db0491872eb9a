//! `block`: the block-level mapping FTL. Logical block `L` (pages `L * ppb .. (L + 1) * ppb`)
//! lives in one physical block, page `i` of `L` in page `i` of that block. A write to a page at
//! or beyond the block's next free page is programmed in place ("append"); any other write, and
//! a trim that leaves some pages of the block valid, rewrites the block into a fresh one, copying
//! the other valid pages (the classic read-modify-write merge), then erases the old block.
//!
//! On-flash metadata: only the OOB record of every page (`oob.rs`): kind (data or pad), the
//! commit flag, key = logical page, and in `seq` the *version* of the physical block (a global counter taken when the block is
//! allocated; every page of one physical incarnation carries the same version).
//!
//! Invariants:
//! 1. `map[L]` is the physical block of `L` or `NONE`; a physical block serves at most one `L`.
//! 2. Page `i` of a mapped block is valid (bit set in `valid`) iff it holds the newest data of
//!    logical page `L * ppb + i`; unmapped logical pages and invalid pages read as zeros.
//! 3. Pages of a block are programmed in increasing order: appends only at or beyond `next_free`.
//! 4. A merge programs its pages in order and sets the commit flag on its last page only; a page
//!    programmed into a fresh block or appended carries the commit flag itself. The old block is
//!    erased only after the merge's commit page is programmed.
//! 5. On flash, the newest committed version of `L` holds exactly the valid pages of `L` (a
//!    trim that invalidates a page rewrites or erases the block before it returns), so recovery
//!    (`open`) picks, per `L`, the committed block with the highest version and erases the rest.
//! 6. Every write is on flash when it returns (there is no write cache). On SLC `flush` only
//!    counts; on MLC/TLC a write is durable once FLUSH or FUA completes its word line with pads
//!    (common invariant 4), and a merge completes its target's last word line before it erases
//!    the old block, as recovery does before it erases superseded versions.
//! 7. A grown-bad block is never programmed or erased again; a committed version on one stays on
//!    flash for good, so its logical block always has a newer committed version on a good block
//!    once an operation returns (a trim that would empty it keeps a block with a zero page 0).
//!
//! Bad blocks: a failed program into the mapped block (append or fresh) turns into a merge that
//! reads the bad block's pages and programs them with the host's into a good block; a failed
//! merge target is abandoned (uncommitted, recovery ignores it) and the merge starts again;
//! `NoSpace` once no good block is left. Recovery never erases a bad block and merges away a
//! newest version found on one.

use std::collections::BTreeSet;

use nand::{Nand, Nanos, Purpose};
use serde::{Deserialize, Serialize};

use crate::block_device::{check_range, check_request_of, BlockDevice, Counters, FtlError};
use crate::controller::{Controller, ControllerConfig};

pub(crate) mod common;

use crate::oob::{OobRecord, PageKind, FLAG_COMMIT};
// `mapping_bytes_for` lives with the parts the block-mapped FTLs share (AMF's table is the
// same); this is its public path.
pub use common::mapping_bytes_for;
use common::{
    chunks, exposed_blocks, failed_program_block, is_block_failure, logical_blocks, scan_device,
    shared_block_device_methods, Bits, Flash, FreePool, PadRecord, CYC_LOOKUP, CYC_MERGE_PAGE,
    CYC_REQUEST, CYC_UPDATE, NONE,
};

/// Options of the block-level FTL.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockOptions {
    /// Fraction of physical blocks not exposed as capacity (merge targets, bad-block reserve).
    /// Default 0.07: the usual consumer-SSD over-provisioning (GiB sold as GB).
    pub spare_factor: f64,
    pub controller: ControllerConfig,
}

impl Default for BlockOptions {
    fn default() -> Self {
        BlockOptions {
            spare_factor: 0.07,
            controller: ControllerConfig::default(),
        }
    }
}

/// Fewest spare blocks that keep merges going: one merge target plus one block of slack.
const MIN_SPARE_BLOCKS: u32 = 2;

/// RAM state of one physical block.
#[derive(Clone, Copy, Debug, Default)]
struct Phys {
    next_free: u32,
    version: u64,
    /// The logical block this physical block serves (the key base of its pad records).
    lbn: u64,
}

/// The block-level mapping FTL.
#[derive(Debug)]
pub struct BlockFtl {
    f: Flash,
    ctrl: Controller,
    c: Counters,
    logical_blocks: u32,
    map: Vec<u32>,
    pb: Vec<Phys>,
    valid: Bits,
    free: FreePool,
    seq: u64,
    merges: u64,
    /// Logical blocks with a committed page in a grown-bad block. That block is never erased,
    /// so its stale version stays on flash for good; invariant 7 keeps it from ever winning.
    bad_lbns: BTreeSet<u64>,
}

/// `block`'s pad record: the block's logical page base and version (`seq`), `aux` unused.
fn pad(lpn_base: u64, version: u64) -> PadRecord {
    PadRecord {
        lpn_base,
        seq: version,
        aux: 0,
    }
}

impl BlockFtl {
    /// Formats `nand` (erases whatever it holds) and starts an empty device.
    pub fn new(nand: Nand, opts: &BlockOptions) -> Result<Self, FtlError> {
        Self::format(Flash::new(nand)?, opts)
    }

    /// `new` with logical pages of one whole flash page of any size (served in 4 KiB sectors
    /// by `crate::sectors::Sectors`).
    pub(crate) fn new_whole_pages(nand: Nand, opts: &BlockOptions) -> Result<Self, FtlError> {
        Self::format(Flash::whole_pages(nand)?, opts)
    }

    fn format(mut f: Flash, opts: &BlockOptions) -> Result<Self, FtlError> {
        let logical = logical_blocks(&f, opts.spare_factor, MIN_SPARE_BLOCKS)?;
        let now = f.nand.now_ns();
        f.format(now)?;
        let mut me = Self::empty(f, opts, logical);
        for pbn in 0..me.f.geo.blocks() {
            if !me.f.is_bad(pbn) {
                me.free.push(me.f.die_of(pbn), pbn);
            }
        }
        me.c = Counters::new(&me.f.nand);
        Ok(me)
    }

    fn empty(f: Flash, opts: &BlockOptions, logical: u32) -> Self {
        let blocks = f.geo.blocks();
        BlockFtl {
            ctrl: Controller::new(&opts.controller),
            c: Counters::new(&f.nand),
            logical_blocks: logical,
            map: vec![NONE; logical as usize],
            pb: vec![Phys::default(); blocks as usize],
            valid: Bits::new(f.geo.pages()),
            free: FreePool::new(f.geo.dies()),
            seq: 0,
            merges: 0,
            bad_lbns: BTreeSet::new(),
            f,
        }
    }

    /// Rebuilds the FTL from what is on `nand` (after a power cut: call `nand.power_on()` first).
    pub fn open(nand: Nand, opts: &BlockOptions) -> Result<Self, FtlError> {
        Self::recover(Flash::new(nand)?, opts)
    }

    /// `open` for logical pages of one whole flash page (`new_whole_pages`).
    pub(crate) fn open_whole_pages(nand: Nand, opts: &BlockOptions) -> Result<Self, FtlError> {
        Self::recover(Flash::whole_pages(nand)?, opts)
    }

    fn recover(mut f: Flash, opts: &BlockOptions) -> Result<Self, FtlError> {
        let logical = exposed_blocks(&f, opts.spare_factor)?;
        let mut ctrl = Controller::new(&opts.controller);
        let now = f.nand.now_ns();
        let (scan, t) = scan_device(&mut f, &mut ctrl, now)?;
        let ppb = u64::from(f.ppb);
        // Per logical block: (version, pbn) of the newest committed block (invariant 5).
        let mut best: Vec<(u64, u32)> = vec![(0, NONE); logical as usize];
        let mut max_seq = 0;
        for (pbn, s) in scan.iter().enumerate() {
            let Some(&(_, first)) = s.records.first() else {
                continue;
            };
            let lbn = first.key / ppb;
            let mut committed = false;
            for &(page, rec) in &s.records {
                let positional = matches!(rec.kind, PageKind::Data | PageKind::Pad);
                if rec.key / ppb != lbn
                    || rec.key % ppb != u64::from(page)
                    || rec.seq != first.seq
                    || !positional
                    || rec.log()
                {
                    return Err(FtlError::Recovery(format!(
                        "block {pbn} holds pages of another layout ({:?} of key {} at page {page}); not a block-FTL device",
                        rec.kind, rec.key
                    )));
                }
                committed |= rec.kind == PageKind::Data && rec.commit();
            }
            max_seq = max_seq.max(first.seq);
            if lbn >= u64::from(logical) {
                return Err(FtlError::Recovery(format!(
                    "block {pbn} holds logical block {lbn}, beyond the {logical} this spare factor exposes; open with the options it was formatted with"
                )));
            }
            if committed && (best[lbn as usize].1 == NONE || first.seq > best[lbn as usize].0) {
                best[lbn as usize] = (first.seq, pbn as u32);
            }
        }
        let mut me = Self::empty(f, opts, logical);
        me.ctrl = ctrl;
        me.seq = max_seq;
        for (lbn, &(version, pbn)) in best.iter().enumerate() {
            if pbn == NONE {
                continue;
            }
            me.map[lbn] = pbn;
            let s = &scan[pbn as usize];
            me.pb[pbn as usize] = Phys {
                next_free: s.next_free,
                version,
                lbn: lbn as u64,
            };
            me.f.note_scanned_block(pbn, s.next_free);
            for &(page, rec) in &s.records {
                if rec.kind == PageKind::Data {
                    me.valid.set(me.f.ppn(pbn, page).0);
                }
            }
        }
        // Invariant 6: a winner's last word line may hold the only copy of pages whose older
        // version is about to be erased (a cut between a merge's commit page and its pads).
        let t = me.pair_word_lines(t)?;
        for (pbn, s) in scan.iter().enumerate() {
            let pbn = pbn as u32;
            let mapped = s
                .records
                .first()
                .is_some_and(|(_, r)| best[(r.key / ppb) as usize].1 == pbn);
            if s.bad {
                // Grown bad: a readable source only, never erased (invariant 7).
                if let Some(&(_, r)) = s.records.iter().find(|(_, r)| r.commit()) {
                    me.bad_lbns.insert(r.key / ppb);
                }
                continue;
            }
            if mapped {
                continue;
            }
            // Superseded versions, uncommitted merges, torn pages, interrupted erases.
            if me.f.make_clean(t, pbn, s)? {
                me.free.push(me.f.die_of(pbn), pbn);
            }
        }
        // A logical block whose newest version is on a grown-bad block (a cut before its pages
        // were moved): move them now, so that nothing programs into it.
        for lbn in 0..logical {
            let pbn = me.map[lbn as usize];
            if pbn != NONE && me.f.is_bad(pbn) {
                me.merge(t, u64::from(lbn), None, None)?;
            }
        }
        me.c = Counters::new(&me.f.nand);
        Ok(me)
    }

    /// Merges done so far (each rewrote one block).
    pub fn merges(&self) -> u64 {
        self.merges
    }

    /// Mapping-table bytes: one 4-byte physical block number per logical block.
    pub fn mapping_bytes(&self) -> u64 {
        4 * u64::from(self.logical_blocks)
    }

    pub fn into_nand(self) -> Nand {
        self.f.nand
    }

    fn alloc(&mut self, lbn: u64) -> Result<u32, FtlError> {
        let pbn = self
            .free
            .pop((lbn % u64::from(self.f.geo.dies())) as u32)
            .ok_or(FtlError::NoSpace("a block merge"))?;
        self.seq += 1;
        self.pb[pbn as usize] = Phys {
            next_free: 0,
            version: self.seq,
            lbn,
        };
        Ok(pbn)
    }

    /// Programs host pages `off..` of `data` into `pbn` (fresh or append), each page committed.
    fn program_host(
        &mut self,
        t: Nanos,
        lbn: u64,
        pbn: u32,
        off: u32,
        data: &[u8],
    ) -> Result<Nanos, FtlError> {
        let ppb = u64::from(self.f.ppb);
        let version = self.pb[pbn as usize].version;
        let mut done = t;
        for (i, page_data) in data.chunks(self.f.lp).enumerate() {
            let page = off + i as u32;
            let lpn_base = lbn * ppb;
            let mut nf = self.pb[pbn as usize].next_free;
            let padded =
                self.f
                    .pad_to(t, pbn, &mut nf, page, pad(lpn_base, version), Purpose::Host);
            self.pb[pbn as usize].next_free = nf;
            done = done.max(padded?);
            let ppn = self.f.ppn(pbn, page);
            let rec = OobRecord::new(PageKind::Data, lpn_base + u64::from(page), version, 0)
                .with_flags(FLAG_COMMIT);
            done = done.max(self.f.program(t, ppn, page_data, &rec, Purpose::Host)?);
            self.valid.set(ppn.0);
        }
        Ok(done)
    }

    /// Rewrites logical block `lbn` into a fresh block: host pages `new` (offset, data) replace
    /// theirs, pages in `drop` (offset, count) are left out (trim), other valid pages are copied.
    fn merge(
        &mut self,
        t: Nanos,
        lbn: u64,
        new: Option<(u32, &[u8])>,
        drop: Option<(u32, u32)>,
    ) -> Result<Nanos, FtlError> {
        let ppb = self.f.ppb;
        let old = self.map[lbn as usize];
        let t = self.ctrl.charge(t, CYC_MERGE_PAGE * u64::from(ppb));
        let covers = |r: Option<(u32, u32)>, p: u32| r.is_some_and(|(o, n)| p >= o && p < o + n);
        let new_range = new.map(|(o, d)| (o, (d.len() / self.f.lp) as u32));
        let source = |me: &Self, p: u32| -> bool {
            covers(new_range, p) || (!covers(drop, p) && me.valid.get(me.f.ppn(old, p).0))
        };
        let last = (0..ppb).rev().find(|&p| source(self, p));
        if last.is_none() && self.bad_lbns.contains(&lbn) {
            // Invariant 7: unmapping would let the bad block's stale version win a recovery;
            // keep a committed version holding zeros instead.
            let zeros = vec![0u8; self.f.lp];
            return self.merge(t, lbn, Some((0, &zeros)), drop);
        }
        let mut done = t;
        if let Some(last) = last {
            let dst = self.alloc(lbn)?;
            for p in 0..=last {
                if !source(self, p) {
                    continue;
                }
                let step = self.merge_page(t, lbn, old, dst, p, last, new, new_range);
                match step {
                    Ok(d) => done = done.max(d),
                    Err(e) => {
                        // The target is uncommitted (its commit page is the last), so recovery
                        // ignores it; the old block still holds everything (invariant 4).
                        self.valid
                            .clear_range(self.f.geo.first_page(nand::Pbn(dst)).0, u64::from(ppb));
                        if failed_program_block(&e, &self.f.geo) == Some(dst) {
                            // The target went bad: never used again; merge into another block.
                            return self.merge(t, lbn, new, drop);
                        }
                        return Err(e);
                    }
                }
            }
            // Invariant 6: the copies on the target's last word line must be safe from its
            // next program before the old block, their only other copy, is erased.
            match self.complete_word_line(t, dst) {
                Ok(d) => done = done.max(d),
                Err(e) => {
                    self.valid
                        .clear_range(self.f.geo.first_page(nand::Pbn(dst)).0, u64::from(ppb));
                    if failed_program_block(&e, &self.f.geo) == Some(dst) {
                        // The committed target went bad under a pad: it stays on flash for
                        // good (invariant 7), and the merge starts again from the old block.
                        self.bad_lbns.insert(lbn);
                        return self.merge(t, lbn, new, drop);
                    }
                    return Err(e);
                }
            }
            self.map[lbn as usize] = dst;
        } else {
            self.map[lbn as usize] = NONE;
        }
        self.merges += u64::from(last.is_some());
        if self.f.is_bad(old) {
            // Its committed version stays on flash (invariant 7).
            self.bad_lbns.insert(lbn);
        }
        // The old block goes only now that the new one is committed (invariant 4). The host
        // request does not wait for this erase; later operations on the die queue behind it.
        self.valid
            .clear_range(self.f.geo.first_page(nand::Pbn(old)).0, u64::from(ppb));
        self.retire(done, old)?;
        Ok(done)
    }

    /// Programs page `p` of merge target `dst`: the host's page if `new` covers it, else a
    /// copy of the old block's page; the last page carries the commit flag (invariant 4).
    #[allow(clippy::too_many_arguments)]
    fn merge_page(
        &mut self,
        t: Nanos,
        lbn: u64,
        old: u32,
        dst: u32,
        p: u32,
        last: u32,
        new: Option<(u32, &[u8])>,
        new_range: Option<(u32, u32)>,
    ) -> Result<Nanos, FtlError> {
        let version = self.pb[dst as usize].version;
        let lpn_base = lbn * u64::from(self.f.ppb);
        let mut nf = self.pb[dst as usize].next_free;
        let padded = self
            .f
            .pad_to(t, dst, &mut nf, p, pad(lpn_base, version), Purpose::Gc);
        self.pb[dst as usize].next_free = nf;
        let mut done = padded?;
        let flags = if p == last { FLAG_COMMIT } else { 0 };
        let rec =
            OobRecord::new(PageKind::Data, lpn_base + u64::from(p), version, 0).with_flags(flags);
        let ppn = self.f.ppn(dst, p);
        match new {
            Some((o, d)) if new_range.is_some_and(|(o2, n)| p >= o2 && p < o2 + n) => {
                let at = (p - o) as usize * self.f.lp;
                done = done.max(self.f.program(
                    t,
                    ppn,
                    &d[at..at + self.f.lp],
                    &rec,
                    Purpose::Host,
                )?);
            }
            _ => {
                let r = self.f.read_buf(t, self.f.ppn(old, p), Purpose::Gc)?;
                done = done.max(self.f.program_buf(r, ppn, &rec, Purpose::Gc)?);
                self.c.gc.migrations += 1;
            }
        }
        self.valid.set(ppn.0);
        Ok(done)
    }

    /// Erases a block the FTL no longer needs and returns it to the pool (unless it went bad).
    fn retire(&mut self, at: Nanos, pbn: u32) -> Result<(), FtlError> {
        if self.f.is_bad(pbn) {
            return Ok(()); // grown bad: never erased again (invariant 7)
        }
        match self.f.erase(at, pbn, Purpose::Gc) {
            Ok(_) => {
                self.c.gc.erases += 1;
                self.free.push(self.f.die_of(pbn), pbn);
                Ok(())
            }
            Err(e) if is_block_failure(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn write_chunk(
        &mut self,
        t: Nanos,
        lbn: u64,
        off: u32,
        data: &[u8],
    ) -> Result<Nanos, FtlError> {
        let n = (data.len() / self.f.lp) as u64;
        let cur = self.map[lbn as usize];
        let t = self.ctrl.charge(t, CYC_UPDATE * n);
        let r = if cur == NONE {
            let dst = self.alloc(lbn)?;
            self.map[lbn as usize] = dst;
            self.program_host(t, lbn, dst, off, data)
        } else if off >= self.pb[cur as usize].next_free && !self.f.is_bad(cur) {
            self.program_host(t, lbn, cur, off, data)
        } else {
            return self.merge(t, lbn, Some((off, data)), None);
        };
        match r {
            // The mapped block went bad under the program: a merge moves its pages (it stays
            // readable) and the host pages into a good block, and retires it.
            Err(e) if failed_program_block(&e, &self.f.geo) == Some(self.map[lbn as usize]) => {
                self.merge(t, lbn, Some((off, data)), None)
            }
            r => r,
        }
    }

    /// Completes block `pbn`'s open word line with pads (common invariant 4).
    fn complete_word_line(&mut self, t: Nanos, pbn: u32) -> Result<Nanos, FtlError> {
        let p = &mut self.pb[pbn as usize];
        let lpn_base = p.lbn * u64::from(self.f.ppb);
        let mut nf = p.next_free;
        let r = self
            .f
            .complete_word_line(t, pbn, &mut nf, pad(lpn_base, p.version), Purpose::Pad);
        self.pb[pbn as usize].next_free = nf;
        r
    }

    /// Completes every open word line (invariant 6): FLUSH, FUA and recovery. A block that
    /// goes bad under its pad is merged away, as after a failed append.
    fn pair_word_lines(&mut self, t: Nanos) -> Result<Nanos, FtlError> {
        let mut done = t;
        for pbn in self.f.open_word_lines() {
            match self.complete_word_line(t, pbn) {
                Ok(d) => done = done.max(d),
                Err(e) if failed_program_block(&e, &self.f.geo) == Some(pbn) => {
                    let lbn = self.pb[pbn as usize].lbn;
                    if self.map[lbn as usize] == pbn {
                        done = done.max(self.merge(t, lbn, None, None)?);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn trim_chunk(&mut self, t: Nanos, lbn: u64, off: u32, n: u32) -> Result<Nanos, FtlError> {
        let cur = self.map[lbn as usize];
        if cur == NONE {
            return Ok(t);
        }
        let base = self.f.geo.first_page(nand::Pbn(cur)).0;
        if self.valid.count_range(base + u64::from(off), u64::from(n)) == 0 {
            return Ok(t);
        }
        // `merge` with nothing left to copy just erases the block and unmaps it.
        self.merge(t, lbn, None, Some((off, n)))
    }
}

impl BlockDevice for BlockFtl {
    fn name(&self) -> String {
        "block".into()
    }

    fn capacity_pages(&self) -> u64 {
        u64::from(self.logical_blocks) * u64::from(self.f.ppb)
    }

    fn read(&mut self, at_ns: Nanos, lpn: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        let pages = check_request_of(lpn, buf.len(), self.capacity_pages(), self.f.lp)?;
        let t = self.ctrl.charge(at_ns, CYC_REQUEST + CYC_LOOKUP * pages);
        let ppb = u64::from(self.f.ppb);
        let mut done = t;
        for (i, chunk) in buf.chunks_mut(self.f.lp).enumerate() {
            let l = lpn + i as u64;
            let pbn = self.map[(l / ppb) as usize];
            let ppn = if pbn == NONE {
                None
            } else {
                Some(self.f.ppn(pbn, (l % ppb) as u32))
            };
            match ppn {
                Some(ppn) if self.valid.get(ppn.0) => {
                    done = done.max(self.f.read(t, ppn, chunk, Purpose::Host)?)
                }
                _ => chunk.fill(0),
            }
        }
        self.c.host.reads += pages;
        Ok(done)
    }

    fn write(&mut self, at_ns: Nanos, lpn: u64, data: &[u8], fua: bool) -> Result<Nanos, FtlError> {
        let pages = check_request_of(lpn, data.len(), self.capacity_pages(), self.f.lp)?;
        let t = self.ctrl.charge(at_ns, CYC_REQUEST);
        let mut done = t;
        let mut at = 0;
        for (lbn, off, n) in chunks(lpn, pages, self.f.ppb) {
            let len = n as usize * self.f.lp;
            done = done.max(self.write_chunk(t, lbn, off, &data[at..at + len])?);
            at += len;
            self.c.host.writes += u64::from(n);
        }
        if fua {
            done = done.max(self.pair_word_lines(t)?);
        }
        Ok(done)
    }

    fn trim(&mut self, at_ns: Nanos, lpn: u64, pages: u64) -> Result<Nanos, FtlError> {
        check_range(lpn, pages, self.capacity_pages())?;
        let t = self.ctrl.charge(at_ns, CYC_REQUEST);
        let mut done = t;
        for (lbn, off, n) in chunks(lpn, pages, self.f.ppb) {
            let t = self.ctrl.charge(t, CYC_LOOKUP);
            done = done.max(self.trim_chunk(t, lbn, off, n)?);
        }
        self.c.host.trims += pages;
        Ok(done)
    }

    // flush (invariant 6: nothing is buffered; pads on MLC/TLC), report, nand, nand_mut,
    // into_nand.
    shared_block_device_methods!();
}
