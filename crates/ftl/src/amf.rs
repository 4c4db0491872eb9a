//! `amf`: Application-Managed Flash's block interface and its device-side FTL, AFTL (Lee et
//! al., FAST'16).
//!
//! The logical address space is a linear array of *segments*. A segment is one block from every
//! die (every channel and chip, the same way/bank; with one die per chip, as in the slides'
//! 8 ch x 4 way SSD, that is #channels x #chips blocks), so a segment holds
//! `dies x pages_per_block` pages. Consecutive pages of a segment go to consecutive dies (page
//! `o` of a segment lives on die `o % dies`, at page `o / dies` of that die's block), so a
//! multi-page write or read proceeds on all channels at once.
//!
//! The host (a log-structured file system such as ALFS) writes each segment append-only, in
//! address order: a write below the segment's write pointer (an overwrite) is refused with
//! `FtlError::Overwrite`; a write beyond it leaves a gap that reads as zeros and can never be
//! written. TRIM takes whole segments only (others are refused with `FtlError::Unsupported`) and
//! erases the segment's blocks, after which the segment can be written again. There is no
//! device-side garbage collection at all.
//!
//! AFTL keeps a *static* segment mapping per block: logical block `(segment s, die d)` lives in
//! block `s` of die `d` unless that block is bad, in which case a spare block of the same die
//! (the last `spare_blocks_per_die` blocks of every die) replaces it.
//!
//! On-flash metadata: only the OOB record of every page (`oob.rs`): kind (data or pad), key =
//! logical page, a global `seq`; no separate tables. The remap of a bad block is found again
//! because the bad block stays bad (and readable) and its spare holds pages naming its segment.
//!
//! Invariants:
//! 1. `map[s * dies + d]` is a block of die `d`: a good one, or a bad home block that is still
//!    readable and is replaced by a spare (its pages copied) before the next program into it;
//!    no two logical blocks share a physical block.
//! 2. Pages of segment `s` at offsets `>= wp[s]` are erased; a read there, or of a gap, pad or
//!    torn page below it, returns zeros.
//! 3. A write never changes a page below `wp[s]`; a refused request changes nothing.
//! 4. A segment trim erases every block of the segment before it returns; recovery that finds a
//!    block of a segment needing erase (an interrupted trim) erases the whole segment.
//! 5. Every write is on flash when it returns (no write cache), so `flush` only counts.
//! 6. Paired pages: AMF runs only where a cut program destroys nothing but its own page (SLC
//!    chips, or MLC/TLC with power-loss protection): its fixed placement leaves no page to pad
//!    an open word line with (`check_paired_pages`). A failed upper-page program (a media
//!    failure, which the capacitors do not prevent) tears the pages below it too: the remap
//!    copies them from the controller's copies (`Flash`, block/common.rs invariant 5).
//! 7. A bad home block is never erased, so its pages outlive a trim of its segment. Recovery
//!    reads them only while a good spare naming its logical block is a copy of it (the spare's
//!    oldest record no newer than the home's newest: an interrupted remap is finished from
//!    it); otherwise they are stale (trimmed since) and a clean spare stands in.

use nand::{Nand, NandError, Nanos, Purpose};
use serde::{Deserialize, Serialize};

use crate::block::common::{
    is_block_failure, scan_device, shared_block_device_methods, Flash, CYC_LOOKUP, CYC_REQUEST,
    CYC_UPDATE,
};
use crate::block_device::{check_range, check_request_of, BlockDevice, Counters, FtlError};
use crate::controller::{Controller, ControllerConfig};
use crate::oob::{BlockScan, OobRecord, PageKind, FLAG_COMMIT};

/// Options of AMF's AFTL.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AmfOptions {
    /// Spare blocks per die for bad-block remapping. Default (`None`): 2% of the die's blocks
    /// (NAND datasheets promise at least 98% valid blocks over the part's life, e.g. Micron
    /// MT29F16G08ABABA: NVB >= 4016 of 4096), or, if more, the factory-bad blocks of the worst
    /// die plus 1% for blocks that go bad in use; at least 1. The emulator draws factory-bad
    /// blocks at random, so at a 2% ratio about half the dies hold more than 2%, and a spare of
    /// exactly 2% would leave them without a block to remap to.
    pub spare_blocks_per_die: Option<u32>,
    pub controller: ControllerConfig,
}

impl AmfOptions {
    /// The spare blocks per die on `nand` (see `spare_blocks_per_die`). Factory-bad blocks
    /// never change, so neither does the capacity across restarts.
    pub fn spare_blocks_for(&self, nand: &Nand) -> u32 {
        self.spare_blocks_per_die.unwrap_or_else(|| {
            let geo = nand.geometry();
            let bpd = geo.blocks_per_die();
            let mut factory_bad = vec![0u32; geo.dies() as usize];
            for pbn in 0..geo.blocks() {
                let info = nand.block_info(nand::Pbn(pbn));
                if info.is_ok_and(|i| i.state == nand::BlockState::FactoryBad) {
                    factory_bad[geo.die_of_block(nand::Pbn(pbn)).0 as usize] += 1;
                }
            }
            let worst = factory_bad.into_iter().max().unwrap_or(0);
            (bpd * 2)
                .div_ceil(100)
                .max(worst + bpd.div_ceil(100))
                .max(1)
        })
    }
}

/// Application-Managed Flash (the AFTL behind AMF's block interface).
#[derive(Debug)]
pub struct Amf {
    f: Flash,
    ctrl: Controller,
    c: Counters,
    dies: u32,
    segments: u32,
    seg_pages: u64,
    /// Logical block (segment x dies + die) -> physical block.
    map: Vec<u32>,
    /// Per segment: offsets below are written (or skipped).
    wp: Vec<u32>,
    /// Erased good spare blocks per die, not yet standing in for a bad block.
    spares: Vec<Vec<u32>>,
    seq: u64,
    remaps: u64,
}

impl Amf {
    /// Formats `nand` and starts with every segment empty.
    pub fn new(nand: Nand, opts: &AmfOptions) -> Result<Self, FtlError> {
        Self::format(Flash::new(nand)?, opts)
    }

    /// `new` with logical pages of one whole flash page of any size (served in 4 KiB sectors
    /// by `crate::sectors::Sectors`).
    pub(crate) fn new_whole_pages(nand: Nand, opts: &AmfOptions) -> Result<Self, FtlError> {
        Self::format(Flash::whole_pages(nand)?, opts)
    }

    fn format(mut f: Flash, opts: &AmfOptions) -> Result<Self, FtlError> {
        check_paired_pages(&f)?;
        let now = f.nand.now_ns();
        f.format(now)?;
        let mut me = Self::empty(f, opts)?;
        for d in 0..me.dies {
            for s in 0..me.segments {
                let home = me.home(s, d);
                if me.f.is_bad(home) {
                    me.map[(s * me.dies + d) as usize] = me.take_spare(d)?;
                    me.remaps += 1;
                }
            }
        }
        me.c = Counters::new(&me.f.nand);
        Ok(me)
    }

    fn empty(f: Flash, opts: &AmfOptions) -> Result<Self, FtlError> {
        let dies = f.geo.dies();
        let bpd = f.geo.blocks_per_die();
        let spare = opts.spare_blocks_for(&f.nand);
        if spare >= bpd {
            return Err(FtlError::Config(format!(
                "{spare} spare blocks per die leave no segment in a die of {bpd} blocks"
            )));
        }
        let segments = bpd - spare;
        let mut me = Amf {
            ctrl: Controller::new(&opts.controller),
            c: Counters::new(&f.nand),
            dies,
            segments,
            seg_pages: u64::from(dies) * u64::from(f.ppb),
            map: Vec::with_capacity((segments * dies) as usize),
            wp: vec![0; segments as usize],
            spares: vec![Vec::new(); dies as usize],
            seq: 0,
            remaps: 0,
            f,
        };
        for s in 0..segments {
            for d in 0..dies {
                me.map.push(me.home(s, d));
            }
        }
        for d in 0..dies {
            // Spares are handed out lowest block first (pop from the back of a reversed list).
            for i in (segments..bpd).rev() {
                let pbn = d * bpd + i;
                if !me.f.is_bad(pbn) {
                    me.spares[d as usize].push(pbn);
                }
            }
        }
        Ok(me)
    }

    /// Rebuilds AFTL from what is on `nand` (after a power cut: `nand.power_on()` first).
    pub fn open(nand: Nand, opts: &AmfOptions) -> Result<Self, FtlError> {
        Self::recover(Flash::new(nand)?, opts)
    }

    /// `open` for logical pages of one whole flash page (`new_whole_pages`).
    pub(crate) fn open_whole_pages(nand: Nand, opts: &AmfOptions) -> Result<Self, FtlError> {
        Self::recover(Flash::whole_pages(nand)?, opts)
    }

    fn recover(f: Flash, opts: &AmfOptions) -> Result<Self, FtlError> {
        check_paired_pages(&f)?;
        let mut me = Self::empty(f, opts)?;
        let now = me.f.nand.now_ns();
        let (scan, t) = scan_device(&mut me.f, &mut me.ctrl, now)?;
        let bpd = me.f.geo.blocks_per_die();
        let capacity = me.capacity_pages();
        let mut dirty_segments = vec![false; me.segments as usize];
        // Which logical block each spare stands in for (the one its pages name).
        let mut claimed: Vec<Option<u32>> = vec![None; scan.len()];
        for (pbn, s) in scan.iter().enumerate() {
            for &(_, rec) in &s.records {
                me.seq = me.seq.max(rec.seq);
                if !matches!(rec.kind, PageKind::Data | PageKind::Pad) {
                    return Err(FtlError::Recovery(format!(
                        "block {pbn} holds a {:?} page (key {}); not an AMF device",
                        rec.kind, rec.key
                    )));
                }
                if rec.key >= capacity {
                    return Err(FtlError::Recovery(format!(
                        "block {pbn} holds logical page {}, beyond the {capacity} these options expose; open with the options it was formatted with",
                        rec.key
                    )));
                }
            }
            if (pbn as u32 % bpd) >= me.segments {
                claimed[pbn] = s.records.first().map(|&(_, r)| me.lb_of(r.key));
            }
        }
        for d in 0..me.dies {
            me.spares[d as usize].clear();
        }
        let seqs = |b: u32| {
            let r = &scan[b as usize].records;
            (
                r.iter().map(|(_, r)| r.seq).min(),
                r.iter().map(|(_, r)| r.seq).max(),
            )
        };
        // Logical blocks whose bad home holds only pages a trim dropped (invariant 7).
        let mut stale_home = Vec::new();
        for s in 0..me.segments {
            for d in 0..me.dies {
                let lb = s * me.dies + d;
                let home = me.home(s, d);
                let mut cur = home;
                let mut home_live = true;
                if me.f.is_bad(home) {
                    // The newest good spare that names this block.
                    let spare = (me.segments..bpd)
                        .map(|i| d * bpd + i)
                        .filter(|&p| claimed[p as usize] == Some(lb) && !me.f.is_bad(p))
                        .max_by_key(|&p| seqs(p).1);
                    // The bad home is live only while a spare is a (maybe partial) copy of it:
                    // the spare's oldest page is no newer than the home's newest. A spare
                    // written only after a trim, or none at all, leaves the home stale.
                    home_live = spare.is_some_and(|p| seqs(p).0 <= seqs(home).1);
                    if spare.is_none() && !scan[home as usize].records.is_empty() {
                        stale_home.push(lb);
                    }
                    cur = spare.unwrap_or(home);
                }
                me.map[lb as usize] = cur;
                let used = |b: &BlockScan| {
                    if b.next_free == 0 {
                        0
                    } else {
                        (b.next_free - 1) * me.dies + d + 1
                    }
                };
                let w = if home_live {
                    used(&scan[home as usize]).max(used(&scan[cur as usize]))
                } else {
                    used(&scan[cur as usize])
                };
                dirty_segments[s as usize] |= scan[cur as usize].needs_erase;
                me.wp[s as usize] = me.wp[s as usize].max(w);
            }
        }
        // Spares: those standing in for a block are taken; the rest are erased if need be.
        for d in 0..me.dies {
            for i in (me.segments..bpd).rev() {
                let pbn = d * bpd + i;
                let s = &scan[pbn as usize];
                if s.bad || me.map.contains(&pbn) {
                    continue;
                }
                if me.f.make_clean(t, pbn, s)? {
                    me.spares[d as usize].push(pbn);
                }
            }
        }
        for &lb in &stale_home {
            // Its stale pages must not be read again: a clean spare stands in for it.
            me.map[lb as usize] = me.take_spare(lb % me.dies)?;
            me.remaps += 1;
        }
        for s in 0..me.segments {
            for d in 0..me.dies {
                let lb = (s * me.dies + d) as usize;
                let home = me.home(s, d);
                let (lo, _) = seqs(me.map[lb]);
                let live = lo.is_some_and(|lo| Some(lo) <= seqs(home).1);
                if me.map[lb] != home && live {
                    // Finish moving what the bad block still holds (an interrupted remap).
                    let (cur, from) = (me.map[lb], scan[me.map[lb] as usize].next_free);
                    me.copy_block(t, home, cur, from, scan[home as usize].next_free)?;
                }
            }
            if dirty_segments[s as usize] {
                // Invariant 4: an interrupted trim is completed.
                me.erase_segment(t, s, Purpose::Recovery)?;
            }
        }
        me.c = Counters::new(&me.f.nand);
        Ok(me)
    }

    /// Pages per segment (the unit of TRIM).
    pub fn segment_pages(&self) -> u64 {
        self.seg_pages
    }

    pub fn segments(&self) -> u32 {
        self.segments
    }

    /// The write pointer of segment `s`: pages below it are written (or skipped).
    pub fn write_pointer(&self, s: u32) -> Option<u64> {
        self.wp.get(s as usize).map(|&w| u64::from(w))
    }

    /// Bad blocks replaced by spares so far (this instance).
    pub fn remaps(&self) -> u64 {
        self.remaps
    }

    /// Mapping-table bytes: one 4-byte physical block number per logical block.
    pub fn mapping_bytes(&self) -> u64 {
        4 * self.map.len() as u64
    }

    pub fn into_nand(self) -> Nand {
        self.f.nand
    }

    fn home(&self, s: u32, d: u32) -> u32 {
        d * self.f.geo.blocks_per_die() + s
    }

    fn lb_of(&self, lpn: u64) -> u32 {
        let (s, o) = (lpn / self.seg_pages, lpn % self.seg_pages);
        (s * u64::from(self.dies) + o % u64::from(self.dies)) as u32
    }

    /// Where logical page `lpn` lives: (segment, offset, physical page).
    fn locate(&self, lpn: u64) -> (u32, u32, nand::Ppn) {
        let (s, o) = ((lpn / self.seg_pages) as u32, (lpn % self.seg_pages) as u32);
        let (d, page) = (o % self.dies, o / self.dies);
        (
            s,
            o,
            self.f.ppn(self.map[(s * self.dies + d) as usize], page),
        )
    }

    fn take_spare(&mut self, die: u32) -> Result<u32, FtlError> {
        self.spares[die as usize]
            .pop()
            .ok_or(FtlError::NoSpace("a spare block for bad-block remapping"))
    }

    /// Copies the pages `from..to` of block `src` that hold a record to the same pages of `dst`.
    fn copy_block(
        &mut self,
        t: Nanos,
        src: u32,
        dst: u32,
        from: u32,
        to: u32,
    ) -> Result<Nanos, FtlError> {
        let mut done = t;
        for page in from..to {
            let mut buf = std::mem::take(&mut self.f.buf);
            let r = self
                .f
                .read_with_record(t, self.f.ppn(src, page), &mut buf, Purpose::Gc);
            self.f.buf = buf;
            if let (r, Some(rec)) = r? {
                done = done.max(
                    self.f
                        .program_buf(r, self.f.ppn(dst, page), &rec, Purpose::Gc)?,
                );
                self.c.gc.migrations += 1;
            }
        }
        Ok(done)
    }

    /// Replaces the bad block of logical block `lb` by a spare, moving its pages below `page`.
    fn remap(&mut self, t: Nanos, lb: u32, page: u32) -> Result<Nanos, FtlError> {
        let old = self.map[lb as usize];
        let new = self.take_spare(lb % self.dies)?;
        self.map[lb as usize] = new;
        self.remaps += 1;
        self.copy_block(t, old, new, 0, page)
    }

    fn erase_segment(&mut self, t: Nanos, s: u32, purpose: Purpose) -> Result<Nanos, FtlError> {
        let mut done = t;
        for d in 0..self.dies {
            let lb = s * self.dies + d;
            match self.f.erase(t, self.map[lb as usize], purpose) {
                Ok(e) => done = done.max(e),
                // The block went bad while erasing: a spare (already erased) takes its place.
                Err(e) if is_block_failure(&e) => {
                    self.map[lb as usize] = self.take_spare(d)?;
                    self.remaps += 1;
                }
                Err(e) => return Err(e),
            }
        }
        self.wp[s as usize] = 0;
        Ok(done)
    }

    fn program(
        &mut self,
        t: Nanos,
        lpn: u64,
        data: &[u8],
        kind: PageKind,
    ) -> Result<Nanos, FtlError> {
        let (s, o, ppn) = self.locate(lpn);
        self.seq += 1;
        let rec = OobRecord::new(kind, lpn, self.seq, 0).with_flags(FLAG_COMMIT);
        let purpose = if kind == PageKind::Data {
            Purpose::Host
        } else {
            Purpose::Gc
        };
        self.wp[s as usize] = o + 1;
        match self.f.program(t, ppn, data, &rec, purpose) {
            Err(FtlError::Flash(NandError::ProgramFailed(_) | NandError::BadBlock(_))) => {
                // The block went bad: move what it holds to a spare, then program there.
                let lb = self.lb_of(lpn);
                let r = self.remap(t, lb, o / self.dies)?;
                let (_, _, ppn) = self.locate(lpn);
                self.f.program(r, ppn, data, &rec, purpose)
            }
            r => r,
        }
    }
}

impl Amf {
    /// FLUSH's paired-page step (invariant 6): nothing to do, since AMF runs only where no
    /// program can destroy the pages below it (`check_paired_pages`).
    fn pair_word_lines(&mut self, t: Nanos) -> Result<Nanos, FtlError> {
        debug_assert!(!self.f.pairs_pages());
        Ok(t)
    }
}

/// Invariant 6: AMF places page `o` of a segment at a fixed page of a fixed block, so it has
/// no free page to pad an open word line with at FLUSH (a pad would take an offset the host
/// has yet to append). On MLC/TLC chips a cut upper-page program would then destroy flushed
/// pages below it; AMF needs SLC chips or power-loss protection there.
fn check_paired_pages(f: &Flash) -> Result<(), FtlError> {
    if f.pairs_pages() {
        return Err(FtlError::Config(format!(
            "AMF maps every page to a fixed place, so on {} chips it cannot pad a word line at FLUSH, and a power cut during an upper-page program would destroy flushed data; use a device with power-loss protection (--set plp=true) or SLC chips",
            f.mode
        )));
    }
    Ok(())
}

impl BlockDevice for Amf {
    fn name(&self) -> String {
        "amf".into()
    }

    fn capacity_pages(&self) -> u64 {
        u64::from(self.segments) * self.seg_pages
    }

    /// Below its segment's write pointer a page holds data or a gap (which reads as zeros, so
    /// `Some(true)` is the safe answer there); above it nothing.
    fn mapped(&self, lpn: u64) -> Option<bool> {
        if lpn >= self.capacity_pages() {
            return None;
        }
        let (s, o, _) = self.locate(lpn);
        Some(o < self.wp[s as usize])
    }

    fn read(&mut self, at_ns: Nanos, lpn: u64, buf: &mut [u8]) -> Result<Nanos, FtlError> {
        let pages = check_request_of(lpn, buf.len(), self.capacity_pages(), self.f.lp)?;
        let t = self.ctrl.charge(at_ns, CYC_REQUEST + CYC_LOOKUP * pages);
        let mut done = t;
        for (i, chunk) in buf.chunks_mut(self.f.lp).enumerate() {
            let l = lpn + i as u64;
            let (s, o, ppn) = self.locate(l);
            if o >= self.wp[s as usize] {
                chunk.fill(0);
                continue;
            }
            let (r, rec) = self.f.read_with_record(t, ppn, chunk, Purpose::Host)?;
            done = done.max(r);
            if !rec.is_some_and(|r| r.kind == PageKind::Data && r.key == l) {
                chunk.fill(0); // a gap, pad or torn page (invariant 2)
            }
        }
        self.c.host.reads += pages;
        Ok(done)
    }

    fn write(
        &mut self,
        at_ns: Nanos,
        lpn: u64,
        data: &[u8],
        _fua: bool,
    ) -> Result<Nanos, FtlError> {
        let pages = check_request_of(lpn, data.len(), self.capacity_pages(), self.f.lp)?;
        // Invariant 3: refuse before touching anything. Within a request pages ascend, so only
        // the first page of each segment can fall below its write pointer.
        let mut l = lpn;
        while l < lpn + pages {
            let (s, o, _) = self.locate(l);
            let wp = self.wp[s as usize];
            if o < wp {
                return Err(FtlError::Overwrite {
                    lpn: l,
                    why: format!(
                        "AMF segments are append-only: segment {s} (pages {}..{}) is written up to page {}; trim the whole segment before writing it again",
                        u64::from(s) * self.seg_pages,
                        (u64::from(s) + 1) * self.seg_pages,
                        u64::from(s) * self.seg_pages + u64::from(wp)
                    ),
                });
            }
            l = (u64::from(s) + 1) * self.seg_pages;
        }
        let t = self.ctrl.charge(at_ns, CYC_REQUEST + CYC_UPDATE * pages);
        let mut done = t;
        for (i, page) in data.chunks(self.f.lp).enumerate() {
            let l = lpn + i as u64;
            let (s, o, _) = self.locate(l);
            if self.f.strict {
                // MLC/TLC blocks take no gaps: fill skipped offsets with pad pages.
                let base = u64::from(s) * self.seg_pages;
                let zeros = std::mem::take(&mut self.f.zeros);
                let mut r = Ok(t);
                for gap in self.wp[s as usize]..o {
                    r = self.program(t, base + u64::from(gap), &zeros, PageKind::Pad);
                    if r.is_err() {
                        break;
                    }
                    done = done.max(*r.as_ref().unwrap_or(&t));
                }
                self.f.zeros = zeros;
                r?;
            }
            done = done.max(self.program(t, l, page, PageKind::Data)?);
            self.c.host.writes += 1;
        }
        Ok(done)
    }

    fn trim(&mut self, at_ns: Nanos, lpn: u64, pages: u64) -> Result<Nanos, FtlError> {
        check_range(lpn, pages, self.capacity_pages())?;
        if !lpn.is_multiple_of(self.seg_pages) || !pages.is_multiple_of(self.seg_pages) {
            return Err(FtlError::Unsupported(format!(
                "AMF trims whole segments only: a segment is {} pages ({} KiB) starting at a multiple of {}; pages {lpn}..{} are not whole segments",
                self.seg_pages,
                self.seg_pages * self.f.lp as u64 / 1024,
                self.seg_pages,
                lpn + pages
            )));
        }
        let t = self.ctrl.charge(at_ns, CYC_REQUEST);
        let mut done = t;
        for s in (lpn / self.seg_pages)..((lpn + pages) / self.seg_pages) {
            let t = self.ctrl.charge(t, CYC_LOOKUP * u64::from(self.dies));
            if self.wp[s as usize] > 0 {
                // Host-directed reclamation, not device GC: counted as host work.
                done = done.max(self.erase_segment(t, s as u32, Purpose::Host)?);
            }
        }
        self.c.host.trims += pages;
        Ok(done)
    }

    // flush (invariant 5: nothing is buffered), report, nand, nand_mut, into_nand.
    shared_block_device_methods!();
}

/// Mapping memory of AFTL: one 4-byte entry per block, as for a block-level FTL (AMF, FAST 2016:
/// 4 MB at 512 GB, 8 MB at 1 TB). See [`crate::block::mapping_bytes_for`].
pub fn mapping_bytes_for(capacity_bytes: u64, page_bytes: u64, pages_per_block: u64) -> u64 {
    crate::block::common::mapping_bytes_for(capacity_bytes, page_bytes, pages_per_block)
}
