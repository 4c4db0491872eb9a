//! The controller's write buffer of the page-mapped FTLs on flash pages larger than a logical
//! page (8 and 16 KiB pages of 4 KiB logical pages; `space.rs`, "Units").
//!
//! A flash page can only be programmed whole and once, so 4 KiB writes are gathered in DRAM
//! until a page's worth has come (then the page is programmed at once), or until FLUSH or FUA
//! asks for durability (then the partly filled page is programmed with empty slots). A write is
//! acknowledged when its data is in the buffer: like a real SSD without power-loss protection,
//! an acknowledged but unflushed write may be lost at power loss; a flushed one never is
//! (`block_device.rs` contract item 4).
//!
//! Space: the buffer holds `capacity_pages` flash pages: the one being gathered plus the pages
//! whose programs have not completed (a controller keeps a page's data until its program
//! succeeds, to program it elsewhere if it fails). A write that starts a new page when every
//! slot is taken waits for the earliest program to complete: back-pressure in virtual time.
//! While a page's program is in flight its data is in DRAM, so a read of one of its units is
//! answered from there, as a controller answers a read that hits its write cache; waiting for
//! the die would charge the rest of the program (up to an MLC upper page's tPROG) to a read the
//! controller has the bytes for.
//!
//! Invariants:
//! 1. A logical page is in the gathered page at most once: a rewrite before the page is
//!    programmed replaces its data in place (it costs no flash program).
//! 2. A read of a logical page in the gathered page returns the buffered data (newer than any
//!    copy on flash).
//! 3. Slots in use at time t: the gathered pages (if any) plus programs completing after t;
//!    never more than `capacity_pages`.
//! 4. A held page is the data of the flash page at its location, programmed from the buffer
//!    and completing after the read's time: a location is programmed once per erase, and a
//!    block cannot be erased while one of its programs is in flight, so the bytes are the
//!    flash page's. The caller asks by the location it maps the logical page to, so a unit
//!    rewritten, trimmed or moved by GC since is not served from here.
//!
//! Multi-plane programs (space invariant 10): on chips that take them the buffer gathers one
//! page per plane (`batch_pages`) before it programs, and hands them to the space together
//! (`FlashSpace::write_batch`), which programs them with one array time where the planes'
//! open blocks stand at the same page.

use nand::{Nanos, Ppn, Purpose};

use crate::block_device::FtlError;
use crate::oob::{OobRecord, PageKind};
use crate::options::FtlOptions;
use crate::space::FlashSpace;

/// The write buffer of a page-mapped FTL on `space`, if its pages hold several logical pages
/// (`page` and `dftl` both size theirs here).
pub(crate) fn write_buffer(space: &FlashSpace, opts: &FtlOptions) -> Option<WriteBuffer> {
    let units = space.units_per_page() as usize;
    (units > 1).then(|| {
        // Default: two pages per lane (a die, or each plane of a die with multi-plane
        // programs), so that the buffered programs keep every die busy.
        let pages = if opts.write_buffer_pages == 0 {
            2 * space.geometry().dies() as usize * space.multi_plane_width() as usize
        } else {
            opts.write_buffer_pages as usize
        };
        // One page per plane per program where the chips take multi-plane programs.
        let batch = (space.multi_plane_width() as usize).min(pages);
        WriteBuffer::new(units, space.unit_bytes(), pages, batch)
    })
}

/// The gathered page and the programs in flight. See the module documentation.
#[derive(Debug)]
pub(crate) struct WriteBuffer {
    /// Units gathered before a program: units per page x `batch_pages`.
    units: usize,
    /// Units per flash page.
    page_units: usize,
    batch_pages: usize,
    unit_bytes: usize,
    capacity_pages: usize,
    /// Logical pages gathered, in arrival order; unit `i`'s data is `data[i]`.
    lpns: Vec<u64>,
    data: Vec<u8>,
    /// Programmed pages still holding a slot (invariant 3): completion, where the page's units
    /// went, and its data in `held_data` (slot `i` at `i * page_units * unit_bytes`).
    inflight: Vec<Held>,
    held_data: Vec<u8>,
    /// Writes absorbed by a rewrite of a gathered page (invariant 1).
    pub coalesced: u64,
}

impl WriteBuffer {
    pub fn new(
        units: usize,
        unit_bytes: usize,
        capacity_pages: usize,
        batch_pages: usize,
    ) -> WriteBuffer {
        debug_assert!(units > 1 && batch_pages >= 1 && capacity_pages >= batch_pages);
        let page_units = units;
        let units = units * batch_pages;
        WriteBuffer {
            units,
            page_units,
            batch_pages,
            unit_bytes,
            capacity_pages,
            lpns: Vec::with_capacity(units),
            data: vec![0; units * unit_bytes],
            inflight: Vec::with_capacity(capacity_pages),
            held_data: vec![0; capacity_pages * page_units * unit_bytes],
            coalesced: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.lpns.is_empty()
    }

    /// Logical pages gathered.
    pub fn len(&self) -> usize {
        self.lpns.len()
    }

    fn slot_of(&self, lpn: u64) -> Option<usize> {
        self.lpns.iter().position(|&l| l == lpn)
    }

    /// Buffers `data` for `lpn` at `at_ns`. Returns when it is in the buffer (later than
    /// `at_ns` only when a new page must wait for a slot) and whether the gathered page is full
    /// now (the caller programs it: `take`).
    pub fn put(&mut self, at_ns: Nanos, lpn: u64, data: &[u8]) -> (Nanos, bool) {
        debug_assert_eq!(data.len(), self.unit_bytes);
        if let Some(i) = self.slot_of(lpn) {
            self.data[i * self.unit_bytes..(i + 1) * self.unit_bytes].copy_from_slice(data);
            self.coalesced += 1;
            return (at_ns, false);
        }
        let mut t = at_ns;
        if self.lpns.is_empty() {
            t = self.admit(at_ns);
        }
        let i = self.lpns.len();
        self.lpns.push(lpn);
        self.data[i * self.unit_bytes..(i + 1) * self.unit_bytes].copy_from_slice(data);
        (t, self.lpns.len() == self.units)
    }

    /// When a new page may start gathering at `at_ns` (invariant 3).
    fn admit(&mut self, at_ns: Nanos) -> Nanos {
        self.inflight.retain(|h| h.done_ns > at_ns);
        // The gathered pages take `batch_pages` slots; while they are not free, wait for the
        // earliest program to complete.
        let mut t = at_ns;
        while self.inflight.len() + self.batch_pages > self.capacity_pages {
            let (i, _) = self
                .inflight
                .iter()
                .enumerate()
                .min_by_key(|(_, h)| h.done_ns)
                .expect("slots in use");
            t = t.max(self.inflight.swap_remove(i).done_ns);
        }
        t
    }

    /// Whether `lpn` is in the gathered page.
    pub fn holds(&self, lpn: u64) -> bool {
        self.slot_of(lpn).is_some()
    }

    /// Copies the buffered data of `lpn` into `out`, if it is buffered (invariant 2).
    pub fn read(&self, lpn: u64, out: &mut [u8]) -> bool {
        match self.slot_of(lpn) {
            Some(i) => {
                out.copy_from_slice(&self.data[i * self.unit_bytes..(i + 1) * self.unit_bytes]);
                true
            }
            None => false,
        }
    }

    /// Copies the unit at `loc` into `out` if its page's program, from this buffer, is still in
    /// flight at `at_ns` (invariant 4): the controller still holds the bytes.
    pub fn read_held(&self, loc: Ppn, at_ns: Nanos, out: &mut [u8]) -> bool {
        let Some(h) = self.inflight.iter().find(|h| {
            h.done_ns > at_ns && (h.first.0..h.first.0 + u64::from(h.units)).contains(&loc.0)
        }) else {
            return false;
        };
        let at = (h.slot * self.page_units + (loc.0 - h.first.0) as usize) * self.unit_bytes;
        out.copy_from_slice(&self.held_data[at..at + self.unit_bytes]);
        true
    }

    /// Drops the gathered logical pages in `lpn..lpn + pages` (a trim); returns how many.
    pub fn discard(&mut self, lpn: u64, pages: u64) -> usize {
        let mut dropped = 0;
        let mut i = 0;
        while i < self.lpns.len() {
            if (lpn..lpn + pages).contains(&self.lpns[i]) {
                let last = self.lpns.len() - 1;
                self.lpns.swap(i, last);
                let ub = self.unit_bytes;
                self.data.copy_within(last * ub..(last + 1) * ub, i * ub);
                self.lpns.pop();
                dropped += 1;
            } else {
                i += 1;
            }
        }
        dropped
    }

    /// The gathered page: its logical pages and their data (`unit_bytes` each, in order).
    pub fn gathered(&self) -> (&[u64], &[u8]) {
        (&self.lpns, &self.data[..self.lpns.len() * self.unit_bytes])
    }

    /// The gathered pages were programmed at `firsts` (the location of each page's first unit),
    /// completing at `done_ns`: each keeps a slot, and its data, until then.
    pub fn programmed(&mut self, firsts: &[Ppn], done_ns: Nanos) {
        let pages = self.lpns.len().div_ceil(self.page_units);
        debug_assert_eq!(pages, firsts.len());
        let page_bytes = self.page_units * self.unit_bytes;
        for (p, &first) in firsts.iter().enumerate() {
            // A free slot: `admit` made room for the gathered pages before they gathered.
            let slot = (0..self.capacity_pages)
                .find(|s| self.inflight.iter().all(|h| h.slot != *s))
                .expect("admit keeps a slot per gathered page");
            // Units `first..first + units` hold gathered units p * page_units.. in order.
            let units = self.lpns.len().min((p + 1) * self.page_units) - p * self.page_units;
            let from = &self.data[p * page_bytes..p * page_bytes + units * self.unit_bytes];
            self.held_data[slot * page_bytes..slot * page_bytes + from.len()].copy_from_slice(from);
            self.inflight.push(Held {
                done_ns,
                first,
                units: units as u32,
                slot,
            });
        }
        self.lpns.clear();
    }
}

/// Copies into `out` the unit an FTL maps to `mapped` (its map entry: a unit location, or
/// `journal::UNMAPPED`) if `wb` still holds it because its program is in flight at `at_ns`
/// (invariant 4); the page FTL and DFTL read such units from here rather than from the die.
pub(crate) fn read_in_flight(
    wb: Option<&WriteBuffer>,
    mapped: u32,
    at_ns: Nanos,
    out: &mut [u8],
) -> bool {
    mapped != crate::journal::UNMAPPED
        && wb.is_some_and(|wb| wb.read_held(Ppn(u64::from(mapped)), at_ns, out))
}

/// A programmed page whose program is in flight (invariants 3 and 4).
#[derive(Clone, Copy, Debug)]
struct Held {
    done_ns: Nanos,
    /// The location of the page's first unit, and how many units it holds from there.
    first: Ppn,
    units: u32,
    /// Its data's place in `held_data`.
    slot: usize,
}

/// What a drain programmed: the logical pages, each one's unit location, and when the
/// programs complete.
pub(crate) type Programmed = (Vec<u64>, Vec<Ppn>, Nanos);

/// Programs the gathered pages of `wb` (if any) into `stream` of `space` at `at_ns`, each unit
/// with a fresh sequence number of `space`. Returns their logical pages, each one's unit
/// location and the programs' completion; the caller maps them.
pub(crate) fn program_gathered(
    wb: &mut WriteBuffer,
    space: &mut FlashSpace,
    stream: u8,
    at_ns: Nanos,
) -> Result<Option<Programmed>, FtlError> {
    let first_seq = space.alloc_seqs(wb.len() as u64);
    program_gathered_into(wb, space, stream, at_ns, 0, first_seq)
}

/// `program_gathered` with the records' `aux`, unit `i` numbered `first_seq + i` from numbers
/// the caller took (a pSLC write cache's space takes them from the FTL's native space: one
/// counter).
pub(crate) fn program_gathered_into(
    wb: &mut WriteBuffer,
    space: &mut FlashSpace,
    stream: u8,
    at_ns: Nanos,
    aux: u64,
    first_seq: u64,
) -> Result<Option<Programmed>, FtlError> {
    if wb.is_empty() {
        return Ok(None);
    }
    let ub = wb.unit_bytes;
    let (lpns, data) = wb.gathered();
    let units: Vec<(OobRecord, &[u8])> = lpns
        .iter()
        .enumerate()
        .map(|(i, &l)| {
            (
                OobRecord::new(PageKind::Data, l, first_seq + i as u64, aux),
                &data[i * ub..(i + 1) * ub],
            )
        })
        .collect();
    let lpns = lpns.to_vec();
    let pages: Vec<&[(OobRecord, &[u8])]> = units.chunks(wb.page_units).collect();
    let (firsts, done) = if pages.len() == 1 {
        let (first, done) = space.write_units(at_ns, stream, pages[0], Purpose::Host)?;
        (vec![first], done)
    } else {
        space.write_batch(at_ns, stream, &pages, Purpose::Host)?
    };
    // Unit i of the gathered units is slot i % page_units of page i / page_units.
    let locs = (0..lpns.len())
        .map(|i| Ppn(firsts[i / wb.page_units].0 + (i % wb.page_units) as u64))
        .collect();
    wb.programmed(&firsts, done);
    Ok(Some((lpns, locs, done)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_coalesce_reads_see_the_buffer_and_a_full_buffer_waits_for_a_program() {
        let mut b = WriteBuffer::new(4, 8, 2, 1);
        let (t, full) = b.put(10, 7, &[1; 8]);
        assert_eq!((t, full), (10, false));
        let (_, full) = b.put(11, 7, &[2; 8]);
        assert!(!full);
        assert_eq!(b.coalesced, 1);
        let mut out = [0u8; 8];
        assert!(b.read(7, &mut out));
        assert_eq!(out, [2; 8]);
        assert!(!b.read(8, &mut out));
        for l in 8..11 {
            b.put(12, l, &[l as u8; 8]);
        }
        assert_eq!(b.gathered().0, &[7, 8, 9, 10]);
        b.programmed(&[Ppn(40)], 1000);
        // Invariant 4: while the program is in flight, its units are read from the buffer.
        assert!(b.read_held(Ppn(42), 999, &mut out));
        assert_eq!(out, [9; 8]);
        assert!(
            !b.read_held(Ppn(42), 1000, &mut out),
            "complete: read the flash"
        );
        assert!(!b.read_held(Ppn(44), 999, &mut out), "another page");
        // One page in flight, one gathering: the second page starts at once...
        assert_eq!(b.put(20, 1, &[0; 8]).0, 20);
        for l in 2..5 {
            b.put(20, l, &[l as u8 + 100; 8]);
        }
        b.programmed(&[Ppn(80)], 2000);
        assert!(b.read_held(Ppn(83), 1500, &mut out));
        assert_eq!(out, [104; 8]);
        assert!(b.read_held(Ppn(40), 500, &mut out));
        assert_eq!(out, [2; 8]);
        // ...the third waits for the first program to complete.
        assert_eq!(b.put(30, 9, &[0; 8]).0, 1000);
        assert!(
            !b.read_held(Ppn(40), 500, &mut out),
            "its slot was given to the third"
        );
        assert_eq!(b.discard(9, 1), 1);
        assert!(b.is_empty());
    }
}
