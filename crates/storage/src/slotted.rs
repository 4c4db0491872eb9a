//! Slotted pages: variable-length records addressed by slot number, used by heap and B-tree
//! pages alike.
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 32 | 2 | slot count |
//! | 34 | 2 | data start: lowest offset holding record bytes |
//! | 36 | 2 | garbage: bytes of dead records inside the data area |
//! | 38 | 2 | level (B-tree; 0 = leaf) |
//! | 40 | 4 | aux (B-tree inner: leftmost child; heap head: tail page) |
//! | 44 | 4 | aux2 (heap head: page count) |
//! | 48 | 4 per slot | slot array: record offset (u16, 0 = free slot), length (u16; bit 15 = ghost) |
//!
//! Records grow down from the page end (less the delta area), slots grow up.
//!
//! Invariants:
//! 1. `48 + 4 * slots <= data start <= end`; every live or ghost record lies in
//!    `data start .. end` and no two overlap.
//! 2. Free space = `data start - (48 + 4 * slots) + garbage`; compaction turns garbage into
//!    contiguous space and changes no slot number.
//! 3. The same sequence of calls on the same page bytes gives the same bytes (redo relies on it).

use crate::page::{delta_area, get_u16, get_u32, put_u16, put_u32};

pub const SLOTS_AT: usize = 48;
const GHOST: u16 = 0x8000;

pub fn end(p: &[u8]) -> usize {
    p.len() - delta_area(p)
}
pub fn init(p: &mut [u8]) {
    let e = end(p) as u16;
    put_u16(p, 32, 0);
    put_u16(p, 34, e);
    put_u16(p, 36, 0);
}
pub fn nslots(p: &[u8]) -> usize {
    get_u16(p, 32) as usize
}
fn data_start(p: &[u8]) -> usize {
    get_u16(p, 34) as usize
}
fn garbage(p: &[u8]) -> usize {
    get_u16(p, 36) as usize
}
pub fn level(p: &[u8]) -> u16 {
    get_u16(p, 38)
}
pub fn set_level(p: &mut [u8], v: u16) {
    put_u16(p, 38, v)
}
pub fn aux(p: &[u8]) -> u32 {
    get_u32(p, 40)
}
pub fn set_aux(p: &mut [u8], v: u32) {
    put_u32(p, 40, v)
}
pub fn aux2(p: &[u8]) -> u32 {
    get_u32(p, 44)
}
pub fn set_aux2(p: &mut [u8], v: u32) {
    put_u32(p, 44, v)
}

/// (offset, length, ghost) of slot `i`.
#[inline]
pub fn slot(p: &[u8], i: usize) -> (usize, usize, bool) {
    let at = SLOTS_AT + 4 * i;
    let len = get_u16(p, at + 2);
    (
        get_u16(p, at) as usize,
        (len & !GHOST) as usize,
        len & GHOST != 0,
    )
}
#[inline]
fn set_slot(p: &mut [u8], i: usize, off: usize, len: usize, ghost: bool) {
    let at = SLOTS_AT + 4 * i;
    put_u16(p, at, off as u16);
    put_u16(p, at + 2, len as u16 | if ghost { GHOST } else { 0 });
}

/// The live record in slot `i` (None: free, ghost or out of range).
#[inline]
pub fn get(p: &[u8], i: usize) -> Option<&[u8]> {
    if i >= nslots(p) {
        return None;
    }
    let (off, len, ghost) = slot(p, i);
    if off == 0 || ghost {
        return None;
    }
    Some(&p[off..off + len])
}
/// The record in slot `i` even if it is a ghost.
pub fn get_any(p: &[u8], i: usize) -> Option<&[u8]> {
    if i >= nslots(p) {
        return None;
    }
    let (off, len, _) = slot(p, i);
    (off != 0).then(|| &p[off..off + len])
}
pub fn is_ghost(p: &[u8], i: usize) -> bool {
    i < nslots(p) && slot(p, i).2 && slot(p, i).0 != 0
}

pub fn free_space(p: &[u8]) -> usize {
    data_start(p).saturating_sub(SLOTS_AT + 4 * nslots(p)) + garbage(p)
}
/// The largest record a fresh page of this size can take (with one slot).
pub fn max_record(page_bytes: usize) -> usize {
    page_bytes - SLOTS_AT - 4
}

/// Checks invariant 1 on page bytes read from storage, so that the accessors above, which
/// trust it on the hot path, never index out of the page. A page can pass its checksum and still
/// break it only through an engine bug or a deliberately forged page; either must surface as a
/// typed error, not a panic.
pub fn check(p: &[u8]) -> std::result::Result<(), String> {
    let delta = delta_area(p);
    if delta > p.len() / 2 {
        return Err(format!(
            "delta area of {delta} bytes in a {}-byte page",
            p.len()
        ));
    }
    let e = end(p);
    let n = nslots(p);
    let slots_end = SLOTS_AT + 4 * n;
    let start = data_start(p);
    if slots_end > start || start > e {
        return Err(format!(
            "{n} slots end at {slots_end}, data starts at {start}, page data ends at {e}"
        ));
    }
    let mut live = 0usize;
    for i in 0..n {
        let (off, len, _) = slot(p, i);
        if off == 0 {
            continue;
        }
        if off < start || off + len > e {
            return Err(format!(
                "slot {i}: record at {off}..{} outside the data area {start}..{e}",
                off + len
            ));
        }
        live += len;
    }
    if live + garbage(p) > e - start {
        return Err(format!(
            "{live} live and {} garbage bytes in a {}-byte data area",
            garbage(p),
            e - start
        ));
    }
    Ok(())
}

/// Rewrites records contiguously at the end (invariant 2).
pub fn compact(p: &mut [u8]) {
    let n = nslots(p);
    let e = end(p);
    let mut recs: Vec<(usize, Vec<u8>, usize, bool)> = Vec::with_capacity(n);
    for i in 0..n {
        let (off, len, ghost) = slot(p, i);
        if off != 0 {
            recs.push((i, p[off..off + len].to_vec(), len, ghost));
        }
    }
    let mut at = e;
    for (i, bytes, len, ghost) in recs {
        at -= len;
        p[at..at + len].copy_from_slice(&bytes);
        set_slot(p, i, at, len, ghost);
    }
    let lo = SLOTS_AT + 4 * n;
    p[lo..at].fill(0);
    put_u16(p, 34, at as u16);
    put_u16(p, 36, 0);
}

/// Reserves `len` contiguous bytes for a record, compacting if needed. The caller checked space.
fn alloc(p: &mut [u8], len: usize, extra_slots: usize) -> usize {
    let lo = SLOTS_AT + 4 * (nslots(p) + extra_slots);
    if data_start(p) < lo + len {
        compact(p);
    }
    let at = data_start(p) - len;
    assert!(
        at >= lo,
        "slotted alloc without room: checked by the caller"
    );
    put_u16(p, 34, at as u16);
    at
}

/// Room for a record of `len` bytes, with a new slot if `new_slot`.
pub fn fits(p: &[u8], len: usize, new_slot: bool) -> bool {
    free_space(p) >= len + if new_slot { 4 } else { 0 }
}

/// Inserts a record at slot position `i`, shifting later slots up (B-tree order).
pub fn insert_at(p: &mut [u8], i: usize, rec: &[u8]) {
    let n = nslots(p);
    assert!(i <= n && fits(p, rec.len(), true));
    let at = alloc(p, rec.len(), 1);
    p[at..at + rec.len()].copy_from_slice(rec);
    let s = SLOTS_AT + 4 * i;
    p.copy_within(s..SLOTS_AT + 4 * n, s + 4);
    put_u16(p, 32, (n + 1) as u16);
    set_slot(p, i, at, rec.len(), false);
}

/// Removes slot `i`, shifting later slots down (B-tree order).
pub fn remove_at(p: &mut [u8], i: usize) {
    let n = nslots(p);
    assert!(i < n);
    let (_, len, _) = slot(p, i);
    let s = SLOTS_AT + 4 * i;
    p.copy_within(s + 4..SLOTS_AT + 4 * n, s);
    put_u16(p, 32, (n - 1) as u16);
    p[SLOTS_AT + 4 * (n - 1)..SLOTS_AT + 4 * n].fill(0);
    put_u16(p, 36, (garbage(p) + len) as u16);
}

/// The slot a heap insert would use: the first free slot, else a new one.
pub fn first_free_slot(p: &[u8]) -> usize {
    (0..nslots(p))
        .find(|&i| slot(p, i).0 == 0)
        .unwrap_or(nslots(p))
}

/// Puts a record into slot `i` (heap), creating free slots up to it as needed.
pub fn put_at_slot(p: &mut [u8], i: usize, rec: &[u8]) {
    let n = nslots(p);
    let new_slots = (i + 1).saturating_sub(n);
    assert!(i >= n || slot(p, i).0 == 0, "slot {i} is occupied");
    assert!(free_space(p) >= rec.len() + 4 * new_slots);
    let at = alloc(p, rec.len(), new_slots);
    p[at..at + rec.len()].copy_from_slice(rec);
    if new_slots > 0 {
        for j in n..=i {
            set_slot(p, j, 0, 0, false);
        }
        put_u16(p, 32, (i + 1) as u16);
    }
    set_slot(p, i, at, rec.len(), false);
}

/// Frees slot `i` (heap); trailing free slots are dropped.
pub fn free_slot(p: &mut [u8], i: usize) {
    let (off, len, _) = slot(p, i);
    assert!(off != 0, "slot {i} is already free");
    put_u16(p, 36, (garbage(p) + len) as u16);
    set_slot(p, i, 0, 0, false);
    let mut n = nslots(p);
    while n > 0 && slot(p, n - 1).0 == 0 {
        n -= 1;
        set_slot(p, n, 0, 0, false);
        let z = SLOTS_AT + 4 * n;
        p[z..z + 4].fill(0);
    }
    put_u16(p, 32, n as u16);
}

pub fn set_ghost(p: &mut [u8], i: usize, ghost: bool) {
    let (off, len, _) = slot(p, i);
    assert!(off != 0);
    set_slot(p, i, off, len, ghost);
}

/// Can slot `i` take a record of `len` bytes in place of its current one?
pub fn fits_replace(p: &[u8], i: usize, len: usize) -> bool {
    let (_, old, _) = slot(p, i);
    len <= old || free_space(p) >= len
}

/// Replaces the record in slot `i` (keeps its ghost bit off).
pub fn replace(p: &mut [u8], i: usize, rec: &[u8]) {
    let (off, len, _) = slot(p, i);
    assert!(off != 0 && fits_replace(p, i, rec.len()));
    if rec.len() == len {
        p[off..off + len].copy_from_slice(rec);
        set_slot(p, i, off, len, false);
        return;
    }
    if rec.len() < len {
        // Shrink in place; the tail becomes garbage.
        p[off..off + rec.len()].copy_from_slice(rec);
        p[off + rec.len()..off + len].fill(0);
        put_u16(p, 36, (garbage(p) + len - rec.len()) as u16);
        set_slot(p, i, off, rec.len(), false);
        return;
    }
    put_u16(p, 36, (garbage(p) + len) as u16);
    set_slot(p, i, 0, 0, false);
    let at = alloc(p, rec.len(), 0);
    p[at..at + rec.len()].copy_from_slice(rec);
    set_slot(p, i, at, rec.len(), false);
}

/// The free gap of a page image, as `(lo, hi)`: bytes `lo..hi` are zeros that a page image in
/// the log may leave out. Slotted pages: between slot array and data; others: trailing zeros.
pub fn gap(p: &[u8]) -> (usize, usize) {
    use crate::page::{page_type, PageType};
    match page_type(p) {
        PageType::Heap | PageType::BTreeLeaf | PageType::BTreeInner => {
            let lo = SLOTS_AT + 4 * nslots(p);
            let hi = data_start(p).max(lo);
            // Garbage inside the data area is kept: only the untouched gap is zero for sure.
            if p[lo..hi].iter().all(|&b| b == 0) {
                (lo, hi)
            } else {
                (p.len(), p.len())
            }
        }
        _ => {
            let lo = p.len() - p.iter().rev().take_while(|&&b| b == 0).count();
            (lo, p.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::{format, PageType};

    fn page() -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        format(&mut p, 1, PageType::Heap, 1, 0);
        init(&mut p);
        p
    }

    #[test]
    fn inserts_removes_and_compaction_keep_slots() {
        let mut p = page();
        for i in 0..10 {
            insert_at(&mut p, i, &[i as u8; 100]);
        }
        remove_at(&mut p, 3);
        assert_eq!(nslots(&p), 9);
        assert_eq!(get(&p, 3).unwrap()[0], 4);
        let before = free_space(&p);
        compact(&mut p);
        assert_eq!(free_space(&p), before);
        for i in 0..9 {
            let want = if i < 3 { i } else { i + 1 } as u8;
            assert_eq!(get(&p, i).unwrap(), &vec![want; 100][..]);
        }
    }

    #[test]
    fn heap_slots_fill_until_full_and_replace_grows() {
        let mut p = page();
        let mut n = 0;
        while fits(&p, 200, true) {
            let s = first_free_slot(&p);
            put_at_slot(&mut p, s, &[n as u8; 200]);
            n += 1;
        }
        assert!(n >= 19);
        free_slot(&mut p, 2);
        free_slot(&mut p, 4);
        assert_eq!(first_free_slot(&p), 2);
        assert!(fits_replace(&p, 5, 500));
        replace(&mut p, 5, &[9u8; 500]);
        assert_eq!(get(&p, 5).unwrap().len(), 500);
        assert_eq!(get(&p, 6).unwrap()[0], 6);
        set_ghost(&mut p, 6, true);
        assert!(get(&p, 6).is_none() && get_any(&p, 6).is_some());
    }
}
