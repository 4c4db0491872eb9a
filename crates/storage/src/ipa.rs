//! In-Place Appends (IPA demo, ICDE 2017; IPA, SIGMOD 2017): a DB page of an IPA object keeps a
//! *delta area* at its end; a small change of the page is written as one *append* of delta
//! records into the next erased slot of that area, a partial program of the very same flash
//! page, instead of an out-of-place write of the whole page (docs/ipa.md).
//!
//! The scheme `[N x M]`: at most N appends per physical page between two out-of-place writes,
//! each holding at most M delta records. An append is one slot of the delta area, so the area
//! is N slots of `slot_bytes = SLOT_HEADER_BYTES + M x (RECORD_HEADER_BYTES + R)` bytes, R the
//! largest record a slot is sized for (`record_bytes`). The page header keeps N and M (byte 17:
//! N in the high nibble, M in the low one) and the area's size (bytes 18..20), so a page can be
//! read without its object's configuration, and redo reproduces the layout from the logged
//! format image.
//!
//! Delta area (at `page_bytes - area_bytes`; slot i at `i x slot_bytes` within it):
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | page LSN after this append |
//! | 8 | 2 | payload bytes P (the records that follow) |
//! | 10 | 1 | record count (0..=M) |
//! | 11 | 1 | 0 (reserved) |
//! | 12 | 4 | CRC-32 of bytes 0..12 and of the payload |
//! | 16 | P | records, each: offset u16, length u16, the bytes |
//! | 16 + P | .. | 0xFF (erased) to the end of the slot |
//!
//! A delta record covers bytes of the page's *base* area, `16..page_bytes - area_bytes`: the
//! checksum (0..4) is the base's own, the page id (4..8) never changes, and the LSN (8..16)
//! travels in the slot header. All little-endian.
//!
//! Invariants:
//! 1. A slot is erased (every byte 0xFF), valid (its CRC matches and its records lie in the
//!    base area), or torn (anything else: an append cut by a power loss). A page's state is its
//!    base (checksummed by `page::seal` over the base area only) with its valid slots applied in
//!    slot order; torn slots are skipped.
//! 2. Skipping a torn slot loses nothing: an append is issued only after the log is durable up
//!    to its LSN (WAL rule, buffer.rs invariant 3), so redo restores its changes; and the next
//!    append of the page is a diff against the state *without* the torn slot, so it carries the
//!    torn slot's changes again.
//! 3. Appends go to slots in order and never reuse a non-erased slot (an append can only turn
//!    1 bits into 0s); the next slot is the one after the last non-erased slot.
//! 4. An out-of-place write writes the whole page with an erased (0xFF) delta area: the deltas
//!    are folded into the base.

use crate::error::{Error, Result};
use crate::page;
use crate::{Lsn, PageId};

pub const SLOT_HEADER_BYTES: usize = 16;
pub const RECORD_HEADER_BYTES: usize = 4;
/// First byte a delta record may cover (see the module documentation).
pub const BASE_DIFF_FROM: usize = 16;

/// An IPA scheme `[N x M]` with its record size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct IpaScheme {
    /// N: appends per physical page between two out-of-place writes.
    pub appends: u8,
    /// M: delta records per append.
    pub records: u8,
    /// R: bytes a record of a full slot may carry (smaller records leave room for others).
    pub record_bytes: u16,
}

/// The largest N and M the page header can hold (a nibble each).
pub const MAX_APPENDS: u8 = 15;
pub const MAX_RECORDS: u8 = 15;
/// Records are sized in bytes of the base area; beyond this a change is better written out of
/// place.
pub const MAX_RECORD_BYTES: u16 = 1024;

impl IpaScheme {
    /// IPA Table I's scheme, [2 x 3], with records of up to 32 bytes (TATP's updates change
    /// one to eight bytes of a row; the measurement behind the choice is in docs/ipa.md).
    pub const TABLE_I: IpaScheme = IpaScheme {
        appends: 2,
        records: 3,
        record_bytes: 32,
    };

    /// Parses `NxM` (e.g. `2x3`) with `record_bytes` R.
    pub fn parse(text: &str, record_bytes: u16) -> std::result::Result<IpaScheme, String> {
        let bad = || format!("IPA scheme {text:?} is not NxM (e.g. 2x3: 2 appends of 3 records)");
        let (n, m) = text.trim().split_once(['x', 'X', '*']).ok_or_else(bad)?;
        let n: u8 = n.trim().parse().map_err(|_| bad())?;
        let m: u8 = m.trim().parse().map_err(|_| bad())?;
        let s = IpaScheme {
            appends: n,
            records: m,
            record_bytes,
        };
        s.check()?;
        Ok(s)
    }

    pub fn check(&self) -> std::result::Result<(), String> {
        if !(1..=MAX_APPENDS).contains(&self.appends) {
            return Err(format!(
                "IPA: N = {} appends per page; 1 to {MAX_APPENDS} (and fewer than the chip's NOP)",
                self.appends
            ));
        }
        if !(1..=MAX_RECORDS).contains(&self.records) {
            return Err(format!(
                "IPA: M = {} records per append; 1 to {MAX_RECORDS}",
                self.records
            ));
        }
        if !(1..=MAX_RECORD_BYTES).contains(&self.record_bytes) {
            return Err(format!(
                "IPA: records of {} bytes; 1 to {MAX_RECORD_BYTES}",
                self.record_bytes
            ));
        }
        Ok(())
    }

    pub fn slot_bytes(&self) -> usize {
        SLOT_HEADER_BYTES
            + usize::from(self.records) * (RECORD_HEADER_BYTES + usize::from(self.record_bytes))
    }
    pub fn area_bytes(&self) -> usize {
        usize::from(self.appends) * self.slot_bytes()
    }
    /// Fraction of a page of `page_bytes` the delta area takes (the space overhead).
    pub fn overhead(&self, page_bytes: usize) -> f64 {
        self.area_bytes() as f64 / page_bytes as f64
    }
    /// The scheme as written: `[2x3]`, R 32 B.
    pub fn label(&self) -> String {
        format!("{}x{}", self.appends, self.records)
    }
}

/// The IPA layout a page header records: (N, M, slot bytes), or `None` for a page without a
/// delta area.
pub fn layout_of(p: &[u8]) -> Option<(usize, usize, usize)> {
    let area = page::delta_area(p);
    let nm = page::ipa_nm(p);
    let (n, m) = (usize::from(nm >> 4), usize::from(nm & 15));
    if area == 0 || n == 0 || !area.is_multiple_of(n) {
        return None;
    }
    Some((n, m, area / n))
}

/// Reserves the delta area of `scheme` in a freshly formatted page (before `slotted::init`):
/// the header fields, and the area erased (0xFF).
pub fn reserve(p: &mut [u8], scheme: IpaScheme) {
    let area = scheme.area_bytes();
    assert!(
        area <= p.len() / 8,
        "a delta area of {area} bytes in a {}-byte page is refused when the region is created",
        p.len()
    );
    page::set_delta_area(p, area, (scheme.appends << 4) | scheme.records);
    let len = p.len();
    p[len - area..].fill(0xFF);
}

/// What a page's delta area holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AreaState {
    /// Slots that are not erased (valid or torn): the next append goes to this index.
    pub used: usize,
    pub valid: usize,
    pub torn: usize,
}

fn slot_crc(slot: &[u8], payload: usize) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&slot[..12]);
    h.update(&slot[SLOT_HEADER_BYTES..SLOT_HEADER_BYTES + payload]);
    h.finalize()
}

/// Applies the valid slots of a page just read (its base verified) in order, and sets the page
/// LSN to the last one's (invariant 1). A slot whose CRC matches but whose records break the
/// format can only come from a bug or a forged page: `Corrupt`.
pub fn apply(p: &mut [u8], pid: PageId) -> Result<AreaState> {
    let Some((n, m, slot_bytes)) = layout_of(p) else {
        return Ok(AreaState::default());
    };
    let base_end = p.len() - n * slot_bytes;
    let mut st = AreaState::default();
    for i in 0..n {
        let at = base_end + i * slot_bytes;
        let (base, area) = p.split_at_mut(at);
        let slot = &area[..slot_bytes];
        if slot.iter().all(|&b| b == 0xFF) {
            continue;
        }
        st.used = i + 1;
        let payload = usize::from(page::get_u16(slot, 8));
        let count = usize::from(slot[10]);
        let whole = SLOT_HEADER_BYTES + payload <= slot_bytes && count <= m && slot[11] == 0;
        if !whole || page::get_u32(slot, 12) != slot_crc(slot, payload) {
            st.torn += 1;
            continue;
        }
        let corrupt = |why: String| Error::Corrupt { pid, why };
        let mut off = SLOT_HEADER_BYTES;
        for _ in 0..count {
            if off + RECORD_HEADER_BYTES > SLOT_HEADER_BYTES + payload {
                return Err(corrupt(format!(
                    "delta slot {i}: records overrun the payload"
                )));
            }
            let at = usize::from(page::get_u16(slot, off));
            let len = usize::from(page::get_u16(slot, off + 2));
            off += RECORD_HEADER_BYTES;
            if at < BASE_DIFF_FROM || at + len > base_end || off + len > SLOT_HEADER_BYTES + payload
            {
                return Err(corrupt(format!(
                    "delta slot {i}: a record of {len} bytes at {at} outside the base area 16..{base_end}"
                )));
            }
            base[at..at + len].copy_from_slice(&slot[off..off + len]);
            off += len;
        }
        let lsn = page::get_u64(slot, 0);
        if lsn < page::lsn(base) {
            return Err(corrupt(format!(
                "delta slot {i}: LSN {lsn} below the page's {}",
                page::lsn(base)
            )));
        }
        page::put_u64(base, 8, lsn);
        st.valid += 1;
    }
    Ok(st)
}

/// The changed byte ranges of the base area between `old` and `new`, as (offset, length), with
/// ranges closer than a record header merged (one record is cheaper than two). `None` when the
/// change does not fit one append of `m` records in `budget` payload bytes: the page is then
/// written out of place. Compares 8 bytes at a time: a 16 KiB page costs ~2,000 word compares,
/// far below the cost of the flash program it may save (measured in docs/PERFORMANCE.md).
pub fn diff(
    old: &[u8],
    new: &[u8],
    base_end: usize,
    m: usize,
    budget: usize,
    out: &mut Vec<(u16, u16)>,
) -> Option<usize> {
    debug_assert_eq!(old.len(), new.len());
    out.clear();
    let mut payload = 0usize;
    let mut i = BASE_DIFF_FROM;
    while i < base_end {
        let w = 8.min(base_end - i);
        if old[i..i + w] == new[i..i + w] {
            i += w;
            continue;
        }
        // A difference in this word: find its exact start, then its end.
        let mut s = i;
        while old[s] == new[s] {
            s += 1;
        }
        let mut e = s + 1;
        let mut same = 0;
        while e < base_end && same < RECORD_HEADER_BYTES {
            if old[e] == new[e] {
                same += 1;
            } else {
                same = 0;
            }
            e += 1;
        }
        let e = e - same;
        if let Some(last) = out.last_mut() {
            let last_end = usize::from(last.0) + usize::from(last.1);
            if s - last_end < RECORD_HEADER_BYTES {
                payload += s - last_end + (e - s);
                last.1 = (e - usize::from(last.0)) as u16;
                if payload > budget {
                    return None;
                }
                i = e;
                continue;
            }
        }
        if out.len() == m {
            return None;
        }
        payload += RECORD_HEADER_BYTES + (e - s);
        if payload > budget {
            return None;
        }
        out.push((s as u16, (e - s) as u16));
        i = e;
    }
    Some(payload)
}

/// Encodes one append of `ranges` of `page` (its new state, LSN `lsn`) into `slot` (the slot's
/// bytes, `slot_bytes` long); the bytes past the payload stay erased.
pub fn encode_slot(page_now: &[u8], ranges: &[(u16, u16)], lsn: Lsn, slot: &mut [u8]) {
    slot.fill(0xFF);
    let mut off = SLOT_HEADER_BYTES;
    for &(at, len) in ranges {
        let (at, len) = (usize::from(at), usize::from(len));
        page::put_u16(slot, off, at as u16);
        page::put_u16(slot, off + 2, len as u16);
        slot[off + 4..off + 4 + len].copy_from_slice(&page_now[at..at + len]);
        off += RECORD_HEADER_BYTES + len;
    }
    let payload = off - SLOT_HEADER_BYTES;
    assert!(off <= slot.len(), "diff keeps the payload within the slot");
    page::put_u64(slot, 0, lsn);
    page::put_u16(slot, 8, payload as u16);
    slot[10] = ranges.len() as u8;
    slot[11] = 0;
    let crc = slot_crc(slot, payload);
    page::put_u32(slot, 12, crc);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::PageType;
    use proptest::prelude::*;

    const PB: usize = 4096;

    fn fresh(scheme: IpaScheme) -> Vec<u8> {
        let mut p = vec![0u8; PB];
        page::format(&mut p, 9, PageType::Heap, 3, 5);
        reserve(&mut p, scheme);
        crate::slotted::init(&mut p);
        p
    }

    /// The flash page as the model sees it: programs only clear bits (NAND rule).
    fn program(flash: &mut [u8], at: usize, bytes: &[u8]) {
        for (i, &b) in bytes.iter().enumerate() {
            assert_eq!(
                flash[at + i] & b,
                b,
                "an append never needs a 0 -> 1 bit (byte {})",
                at + i
            );
            flash[at + i] &= b;
        }
    }

    #[test]
    fn parse_and_sizes() {
        let s = IpaScheme::parse("2x3", 32).unwrap();
        assert_eq!(s, IpaScheme::TABLE_I);
        assert_eq!(s.slot_bytes(), 16 + 3 * 36);
        assert_eq!(s.area_bytes(), 2 * 124);
        assert!(IpaScheme::parse("0x3", 32).is_err());
        assert!(IpaScheme::parse("2x16", 32).is_err());
        assert!(IpaScheme::parse("two", 32).is_err());
    }

    #[test]
    fn a_torn_slot_is_skipped_and_the_next_carries_its_changes() {
        let s = IpaScheme::parse("3x3", 32).unwrap();
        let mut mem = fresh(s);
        page::seal(&mut mem);
        let mut flash = mem.clone();
        let base_end = PB - s.area_bytes();
        let mut ranges = Vec::new();
        let old = mem.clone();
        mem[100] = 7;
        page::set_lsn(&mut mem, 10);
        diff(&old, &mem, base_end, 3, s.slot_bytes() - 16, &mut ranges).unwrap();
        let mut slot = vec![0u8; s.slot_bytes()];
        encode_slot(&mem, &ranges, 10, &mut slot);
        // Torn: only some bits made it.
        let torn: Vec<u8> = slot.iter().map(|b| b | 0x0F).collect();
        program(&mut flash, base_end, &torn);
        let mut read = flash.clone();
        let st = apply(&mut read, 9).unwrap();
        assert_eq!((st.used, st.valid, st.torn), (1, 0, 1));
        assert_eq!(read[100], 0, "the torn change is not applied");
        // Redo makes the same change again; the next append is a diff against the read state.
        let mut again = read.clone();
        again[100] = 7;
        page::set_lsn(&mut again, 10);
        diff(&read, &again, base_end, 3, s.slot_bytes() - 16, &mut ranges).unwrap();
        encode_slot(&again, &ranges, 10, &mut slot);
        program(&mut flash, base_end + s.slot_bytes(), &slot);
        let mut read2 = flash.clone();
        let st = apply(&mut read2, 9).unwrap();
        assert_eq!((st.used, st.valid, st.torn), (2, 1, 1));
        assert_eq!(read2[100], 7);
        assert_eq!(page::lsn(&read2), 10);
        assert!(
            page::verify(&flash, 9).is_ok(),
            "the base checksum ignores the delta area"
        );
    }

    proptest! {
        /// After any mix of appends and out-of-place writes, a page read back (base plus its
        /// valid slots) equals the model page, and no append needs a 0 -> 1 bit.
        #[test]
        fn reads_equal_the_model_after_appends_and_rewrites(
            steps in proptest::collection::vec(
                proptest::collection::vec((20usize..3800, any::<u8>(), 1usize..12), 0..6), 1..30)
        ) {
            let s = IpaScheme::parse("2x3", 32).unwrap();
            let base_end = PB - s.area_bytes();
            let mut model = fresh(s);
            page::seal(&mut model);
            let mut flash = model.clone();
            let mut shadow = model.clone();
            let mut used = 0usize;
            let mut lsn = 5u64;
            let mut ranges = Vec::new();
            let mut slot = vec![0u8; s.slot_bytes()];
            for writes in steps {
                for (at, v, len) in writes {
                    let end = (at + len).min(base_end);
                    model[at..end].fill(v);
                }
                lsn += 1;
                page::set_lsn(&mut model, lsn);
                let fits = used < usize::from(s.appends)
                    && diff(&shadow, &model, base_end, 3, s.slot_bytes() - 16, &mut ranges).is_some();
                if fits {
                    encode_slot(&model, &ranges, lsn, &mut slot);
                    program(&mut flash, base_end + used * s.slot_bytes(), &slot);
                    used += 1;
                } else {
                    model[base_end..].fill(0xFF);
                    page::seal(&mut model);
                    flash = model.clone();
                    used = 0;
                }
                let mut read = flash.clone();
                prop_assert!(page::verify(&read, 9).is_ok(), "the base checksum ignores the delta area");
                let st = apply(&mut read, 9).unwrap();
                prop_assert_eq!(st.used, used);
                prop_assert_eq!(&read[4..base_end], &model[4..base_end]);
                shadow = read;
            }
        }
    }
}
