//! The page header shared by every DB page, and page checksums.
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | CRC-32 of bytes 4..page end less the delta area (0 with an all-zero page: never written) |
//! | 4 | 4 | page id |
//! | 8 | 8 | page LSN: LSN of the last log record applied to the page |
//! | 16 | 1 | page type ([`PageType`]) |
//! | 17 | 1 | In-Place Appends scheme: N (appends) in bits 4..8, M (records per append) in 0..4; 0 without |
//! | 18 | 2 | bytes reserved at the page end for delta records (In-Place Appends, `ipa`; 0 without) |
//! | 20 | 4 | owning object id |
//! | 24 | 4 | next page (heap chain, B-tree right sibling; 0: none) |
//! | 28 | 4 | previous page (B-tree left sibling; 0: none) |
//! | 32 | 16 | slotted-page header (see `slotted`) |
//!
//! Invariants:
//! 1. A page on storage either is all zeros (never written) or has a valid checksum and its own
//!    page id; anything else is a torn or corrupt page.
//! 2. The checksum is computed only when a page leaves the buffer pool, so in memory it is stale.
//!    It covers the base area only: the delta area is appended to on flash after the base was
//!    programmed, and checks each append by its own CRC (ipa.rs).
//! 3. The page LSN only grows.

use crate::error::{Error, Result};
use crate::{Lsn, ObjectId, PageId};

pub const HEADER_BYTES: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PageType {
    Unformatted = 0,
    SpaceMap = 1,
    Heap = 2,
    BTreeLeaf = 3,
    BTreeInner = 4,
}

impl PageType {
    pub fn from_u8(v: u8) -> Option<PageType> {
        Some(match v {
            0 => PageType::Unformatted,
            1 => PageType::SpaceMap,
            2 => PageType::Heap,
            3 => PageType::BTreeLeaf,
            4 => PageType::BTreeInner,
            _ => return None,
        })
    }
}

#[inline]
pub fn get_u16(p: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([p[off], p[off + 1]])
}
#[inline]
pub fn put_u16(p: &mut [u8], off: usize, v: u16) {
    p[off..off + 2].copy_from_slice(&v.to_le_bytes());
}
#[inline]
pub fn get_u32(p: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([p[off], p[off + 1], p[off + 2], p[off + 3]])
}
#[inline]
pub fn put_u32(p: &mut [u8], off: usize, v: u32) {
    p[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
#[inline]
pub fn get_u64(p: &[u8], off: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&p[off..off + 8]);
    u64::from_le_bytes(b)
}
#[inline]
pub fn put_u64(p: &mut [u8], off: usize, v: u64) {
    p[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

pub fn page_id(p: &[u8]) -> PageId {
    get_u32(p, 4)
}
pub fn lsn(p: &[u8]) -> Lsn {
    get_u64(p, 8)
}
pub fn set_lsn(p: &mut [u8], lsn: Lsn) {
    debug_assert!(lsn >= get_u64(p, 8), "page LSN only grows (invariant 3)");
    put_u64(p, 8, lsn);
}
pub fn page_type(p: &[u8]) -> PageType {
    PageType::from_u8(p[16]).unwrap_or(PageType::Unformatted)
}
pub fn object(p: &[u8]) -> ObjectId {
    get_u32(p, 20)
}
pub fn next(p: &[u8]) -> PageId {
    get_u32(p, 24)
}
pub fn set_next(p: &mut [u8], v: PageId) {
    put_u32(p, 24, v)
}
pub fn prev(p: &[u8]) -> PageId {
    get_u32(p, 28)
}
pub fn set_prev(p: &mut [u8], v: PageId) {
    put_u32(p, 28, v)
}
pub fn delta_area(p: &[u8]) -> usize {
    get_u16(p, 18) as usize
}
/// The IPA scheme byte (ipa.rs): N << 4 | M.
pub fn ipa_nm(p: &[u8]) -> u8 {
    p[17]
}
pub fn set_delta_area(p: &mut [u8], bytes: usize, nm: u8) {
    p[17] = nm;
    put_u16(p, 18, bytes as u16);
}

/// Clears the page and writes a fresh header (LSN is kept by the caller's log record).
pub fn format(p: &mut [u8], pid: PageId, ty: PageType, object: ObjectId, lsn: Lsn) {
    p.fill(0);
    put_u32(p, 4, pid);
    put_u64(p, 8, lsn);
    p[16] = ty as u8;
    put_u32(p, 20, object);
}

/// The checksum of the base area, or `None` when the header's delta area cannot be (a corrupt
/// page: at most half the page, as `slotted::check` demands too).
fn crc(p: &[u8]) -> Option<u32> {
    let delta = delta_area(p);
    if delta > p.len() / 2 {
        return None;
    }
    // Never 0, so that 0 keeps meaning "never written".
    Some(crc32fast::hash(&p[4..p.len() - delta]).max(1))
}

/// Seals a page before it goes to storage (invariant 2).
pub fn seal(p: &mut [u8]) {
    let c = crc(p).expect("the engine never makes a delta area over half a page");
    put_u32(p, 0, c);
}

/// Checks a page read from storage (invariant 1). Returns `Ok(false)` for a never-written page.
pub fn verify(p: &[u8], pid: PageId) -> Result<bool> {
    let stored = get_u32(p, 0);
    if stored == 0 {
        if p.iter().all(|&b| b == 0) {
            return Ok(false);
        }
        return Err(Error::Corrupt {
            pid,
            why: "no checksum on a non-empty page (torn write?)".into(),
        });
    }
    if crc(p) != Some(stored) {
        return Err(Error::Corrupt {
            pid,
            why: "checksum mismatch (torn or corrupt page)".into(),
        });
    }
    if page_id(p) != pid {
        return Err(Error::Corrupt {
            pid,
            why: format!("holds page {} instead", page_id(p)),
        });
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_pages_verify_and_damage_is_caught() {
        let mut p = vec![0u8; 4096];
        assert_eq!(verify(&p, 7), Ok(false));
        format(&mut p, 7, PageType::Heap, 3, 99);
        seal(&mut p);
        assert_eq!(verify(&p, 7), Ok(true));
        assert!(verify(&p, 8).is_err());
        p[1000] ^= 1;
        assert!(verify(&p, 7).is_err());
    }
}
