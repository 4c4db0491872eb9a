//! The reverse-mapping record every FTL page carries in its OOB (spare) area.
//!
//! Layout (32 bytes, little-endian; fits the smallest preset OOB, seed 000's 32 bytes). Bytes of
//! a larger OOB beyond these 32 are left erased (0xFF).
//!
//! | bytes  | field   | meaning                                                              |
//! |--------|---------|----------------------------------------------------------------------|
//! | 0..8   | key     | data: logical page; translation: translation page number; trim: first trimmed page; checkpoint: page index within the checkpoint |
//! | 8..16  | seq     | global sequence number of the write (GC copies keep the original's)   |
//! | 16     | kind    | 1 data, 2 translation, 3 trim record, 4 checkpoint                    |
//! | 17     | version | format version, 1                                                    |
//! | 18..20 | zero    | reserved                                                             |
//! | 20..24 | aux     | trim: pages trimmed; checkpoint: pages in the checkpoint; else 0      |
//! | 24..28 | zero    | reserved                                                             |
//! | 28..32 | crc     | CRC-32 (IEEE) of bytes 0..28                                         |
//!
//! Invariants:
//! 1. `decode(encode(r)) == Some(r)` for every record; an erased OOB (all 0xFF), a torn or
//!    otherwise damaged one decodes to `None` (kind and version are checked, then the CRC).
//! 2. A sequence number is issued once per logical write (data, translation page, trim record,
//!    checkpoint); copies made by garbage collection or wear levelling carry the original's
//!    number, so "newest sequence wins" picks the newest *version*, and copies of one version
//!    are interchangeable.

/// Bytes of the record; the smallest OOB the FTLs accept.
pub const OOB_RECORD_BYTES: usize = 32;
const VERSION: u8 = 1;

/// What a page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PageKind {
    Data = 1,
    Translation = 2,
    Trim = 3,
    Checkpoint = 4,
}

impl PageKind {
    fn from_u8(b: u8) -> Option<PageKind> {
        match b {
            1 => Some(PageKind::Data),
            2 => Some(PageKind::Translation),
            3 => Some(PageKind::Trim),
            4 => Some(PageKind::Checkpoint),
            _ => None,
        }
    }
}

/// One decoded OOB record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OobRecord {
    pub key: u64,
    pub seq: u64,
    pub kind: PageKind,
    pub aux: u32,
}

impl OobRecord {
    pub fn new(kind: PageKind, key: u64, seq: u64, aux: u32) -> Self {
        OobRecord { key, seq, kind, aux }
    }

    /// Writes the record into the first 32 bytes of `oob`; the rest is left erased.
    pub fn encode_into(&self, oob: &mut [u8]) {
        debug_assert!(oob.len() >= OOB_RECORD_BYTES);
        oob.fill(0xFF);
        oob[0..8].copy_from_slice(&self.key.to_le_bytes());
        oob[8..16].copy_from_slice(&self.seq.to_le_bytes());
        oob[16] = self.kind as u8;
        oob[17] = VERSION;
        oob[18..20].fill(0);
        oob[20..24].copy_from_slice(&self.aux.to_le_bytes());
        oob[24..28].fill(0);
        let crc = crc32fast::hash(&oob[0..28]);
        oob[28..32].copy_from_slice(&crc.to_le_bytes());
    }

    /// The record in `oob`, or `None` if it holds none (erased, damaged, foreign).
    pub fn decode(oob: &[u8]) -> Option<OobRecord> {
        if oob.len() < OOB_RECORD_BYTES || oob[17] != VERSION {
            return None;
        }
        let kind = PageKind::from_u8(oob[16])?;
        let crc = u32::from_le_bytes(oob[28..32].try_into().ok()?);
        if crc32fast::hash(&oob[0..28]) != crc {
            return None;
        }
        Some(OobRecord {
            key: u64::from_le_bytes(oob[0..8].try_into().ok()?),
            seq: u64::from_le_bytes(oob[8..16].try_into().ok()?),
            kind,
            aux: u32::from_le_bytes(oob[20..24].try_into().ok()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_detected() {
        let r = OobRecord::new(PageKind::Trim, 0x0102_0304_0506_0708, 99, 12);
        let mut oob = [0u8; 64];
        r.encode_into(&mut oob);
        assert!(oob[32..].iter().all(|&b| b == 0xFF));
        assert_eq!(OobRecord::decode(&oob), Some(r));
        assert_eq!(OobRecord::decode(&[0xFF; 32]), None);
        for i in 0..32 {
            let mut bad = oob;
            bad[i] ^= 0x10;
            assert_eq!(OobRecord::decode(&bad), None, "flip in byte {i}");
        }
    }
}
