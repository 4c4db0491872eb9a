//! The B+-tree node format: entries, the search within a node, the redo ops on one node and the
//! check of a node read from storage. Page-level code only (no buffer pool, no log), so that
//! `buffer` can check nodes it reads and `btree` (the tree algorithms, one floor up) and `bulk`
//! can build them, without either depending on the other's floor.
//!
//! Entry: `key length u16 | key | value`. Leaves hold `key -> value` (a record id), sorted by
//! key. Inner nodes hold `separator -> child` (a little-endian page id); their `aux` field is the
//! leftmost child, and a key `k` goes to the child of the last separator `<= k`. Invariant 1 of
//! [`crate::btree`] (keys strictly increase within a node) is what [`check_node`] checks.

use crate::page::{self, PageType};
use crate::slotted;
use crate::{ObjectId, PageId};

/// The largest key a B-tree accepts, per page size.
pub fn max_key_bytes(page_bytes: usize) -> usize {
    page_bytes / 16
}
pub(crate) const MAX_VAL: usize = 16;

pub fn entry(key: &[u8], val: &[u8]) -> Vec<u8> {
    let mut e = Vec::with_capacity(2 + key.len() + val.len());
    e.extend_from_slice(&(key.len() as u16).to_le_bytes());
    e.extend_from_slice(key);
    e.extend_from_slice(val);
    e
}
#[inline]
pub fn entry_key(e: &[u8]) -> &[u8] {
    let n = u16::from_le_bytes([e[0], e[1]]) as usize;
    &e[2..2 + n]
}
#[inline]
pub fn entry_val(e: &[u8]) -> &[u8] {
    let n = u16::from_le_bytes([e[0], e[1]]) as usize;
    &e[2 + n..]
}
#[inline]
pub(crate) fn key_at(p: &[u8], i: usize) -> &[u8] {
    let (off, len, _) = slotted::slot(p, i);
    entry_key(&p[off..off + len])
}
pub(crate) fn val_at(p: &[u8], i: usize) -> &[u8] {
    let (off, len, _) = slotted::slot(p, i);
    entry_val(&p[off..off + len])
}
pub(crate) fn child_val(v: &[u8]) -> PageId {
    u32::from_le_bytes([v[0], v[1], v[2], v[3]])
}

/// Checks a B-tree node read from storage (after `slotted::check`): every entry's key fits in
/// it, keys strictly increase (invariant 1 within the node), and an inner node's values are child
/// page ids. `entry_key`, `key_at` and `child_val` trust this on the hot path.
pub fn check_node(p: &[u8]) -> std::result::Result<(), String> {
    let inner = page::page_type(p) == PageType::BTreeInner;
    let mut prev: Option<&[u8]> = None;
    for i in 0..slotted::nslots(p) {
        let (off, len, _) = slotted::slot(p, i);
        if off == 0 {
            return Err(format!("entry {i} is a free slot"));
        }
        let e = &p[off..off + len];
        if len < 2 || 2 + usize::from(u16::from_le_bytes([e[0], e[1]])) > len {
            return Err(format!("entry {i}: key length beyond its {len}-byte entry"));
        }
        let (key, val) = (entry_key(e), entry_val(e));
        if inner && val.len() != 4 {
            return Err(format!("entry {i}: a {}-byte child pointer", val.len()));
        }
        if prev.is_some_and(|k| k >= key) {
            return Err(format!("entry {i}: keys out of order"));
        }
        prev = Some(key);
    }
    Ok(())
}

/// Binary search for `key` among the node's entries.
pub fn search(p: &[u8], key: &[u8]) -> std::result::Result<usize, usize> {
    let (mut lo, mut hi) = (0usize, slotted::nslots(p));
    while lo < hi {
        let mid = (lo + hi) / 2;
        match key_at(p, mid).cmp(key) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// Child position (0: `aux`, i: entry i-1) that covers `key` in an inner node.
pub(crate) fn child_pos(p: &[u8], key: &[u8]) -> usize {
    match search(p, key) {
        Ok(i) => i + 1,
        Err(i) => i,
    }
}
pub(crate) fn child_at(p: &[u8], pos: usize) -> PageId {
    if pos == 0 {
        slotted::aux(p)
    } else {
        child_val(val_at(p, pos - 1))
    }
}

/// Applies a B-tree redo op to a leaf or inner page.
pub fn apply_insert(p: &mut [u8], key: &[u8], val: &[u8]) -> std::result::Result<(), String> {
    match search(p, key) {
        Ok(_) => Err("key already present".into()),
        Err(i) => {
            let e = entry(key, val);
            if !slotted::fits(p, e.len(), true) {
                return Err("no room for the entry".into());
            }
            slotted::insert_at(p, i, &e);
            Ok(())
        }
    }
}
pub fn apply_delete(p: &mut [u8], key: &[u8]) -> std::result::Result<(), String> {
    match search(p, key) {
        Ok(i) => {
            slotted::remove_at(p, i);
            Ok(())
        }
        Err(_) => Err("key not present".into()),
    }
}

pub(crate) fn used_bytes(p: &[u8]) -> usize {
    slotted::end(p) - slotted::SLOTS_AT - slotted::free_space(p)
}
pub(crate) fn entries(p: &[u8]) -> Vec<Vec<u8>> {
    (0..slotted::nslots(p))
        .filter_map(|i| slotted::get(p, i).map(<[u8]>::to_vec))
        .collect()
}
#[allow(clippy::too_many_arguments)] // one image from all its header fields
pub(crate) fn build(
    (page_bytes, ipa): (usize, Option<crate::ipa::IpaScheme>),
    pid: PageId,
    leaf: bool,
    level: u16,
    object: ObjectId,
    es: &[Vec<u8>],
    aux: PageId,
    prev: PageId,
    next: PageId,
) -> Vec<u8> {
    let mut img = vec![0u8; page_bytes];
    page::format(
        &mut img,
        pid,
        if leaf {
            PageType::BTreeLeaf
        } else {
            PageType::BTreeInner
        },
        object,
        0,
    );
    if let Some(scheme) = ipa {
        crate::ipa::reserve(&mut img, scheme);
    }
    slotted::init(&mut img);
    slotted::set_level(&mut img, level);
    slotted::set_aux(&mut img, aux);
    page::set_prev(&mut img, prev);
    page::set_next(&mut img, next);
    for (i, e) in es.iter().enumerate() {
        slotted::insert_at(&mut img, i, e);
    }
    img
}
