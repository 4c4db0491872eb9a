//! On-flash formats (byte tables in docs/lfs.md). Every block is one 4 KiB logical page; all
//! integers are little-endian; every metadata block ends in a CRC-32 of the bytes before it.

pub const BLOCK_BYTES: usize = ftl::LOGICAL_PAGE_BYTES;
pub const SB_MAGIC: u64 = 0x3153_464C_4654_4F4E; // "NOFTLFS1"
pub const CP_MAGIC: u64 = 0x3150_4B43_5346_4C4E; // "NLFSCKP1"
/// Block addresses a direct node holds.
pub const NODE_ADDRS: usize = 1016;
/// Block addresses kept in the inode itself (small files need no direct node).
pub const INODE_ADDRS: usize = 480;
/// Direct-node ids an inode holds: the largest file is
/// `INODE_ADDRS + INODE_NIDS * NODE_ADDRS` blocks (about 1.9 GiB).
pub const INODE_NIDS: usize = 500;
pub const MAX_FILE_BLOCKS: u64 = (INODE_ADDRS + INODE_NIDS * NODE_ADDRS) as u64;
/// Offset of the node footer (the last 32 bytes of a node block).
pub const FOOTER_AT: usize = BLOCK_BYTES - 32;
/// NAT entries per block (the last 4 bytes hold the CRC).
pub const NAT_PER_BLOCK: u32 = ((BLOCK_BYTES - 4) / 4) as u32;
pub const SIT_BYTES: usize = 16;
pub const SIT_PER_BLOCK: u32 = ((BLOCK_BYTES - 4) / SIT_BYTES) as u32;
/// Meta blocks one checkpoint block can list.
pub const CP_MAX_META: usize = (BLOCK_BYTES - 4 - 40) / 4;
pub const DIRENT_BYTES: usize = 256;
pub const DIRENTS_PER_BLOCK: u32 = (BLOCK_BYTES / DIRENT_BYTES) as u32;
pub const NAME_MAX_BYTES: usize = DIRENT_BYTES - 8;

/// Node footer flag: written by fsync (roll-forward recovers it).
pub const FLAG_FSYNC: u32 = 1;
/// Node footer flag: the last node of one fsync (roll-forward applies up to the last of these).
pub const FLAG_END: u32 = 2;

pub fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
pub fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(x)
}
pub fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
pub fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}
/// Seals a metadata block: CRC-32 of bytes `0..len-4` into its last 4 bytes.
pub fn seal(b: &mut [u8]) {
    let n = b.len();
    let c = crc32fast::hash(&b[..n - 4]);
    put32(b, n - 4, c);
}
pub fn sealed(b: &[u8]) -> bool {
    let n = b.len();
    crc32fast::hash(&b[..n - 4]) == u32_at(b, n - 4)
}

/// The two modes: where metadata goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Mode {
    /// F2FS: checkpoint packs, NAT and SIT at fixed addresses, rewritten in place.
    F2fs,
    /// ALFS: no block is ever written twice between trims; NAT/SIT go to a meta log and
    /// checkpoints to two checkpoint segments used in turn.
    Alfs,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::F2fs => "f2fs",
            Mode::Alfs => "alfs",
        }
    }
    fn code(self) -> u32 {
        match self {
            Mode::F2fs => 1,
            Mode::Alfs => 2,
        }
    }
}

/// The superblock (block 0, written once at format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub mode: Mode,
    pub seg_pages: u32,
    /// Segments on the device (block 0 is the first page of segment 0).
    pub segments: u32,
    /// First segment of the main area (data, node and, in ALFS, meta logs).
    pub main_seg0: u32,
    pub max_nids: u32,
    pub nat_blocks: u32,
    pub sit_blocks: u32,
}

impl Superblock {
    pub fn n_meta(&self) -> u32 {
        self.nat_blocks + self.sit_blocks
    }
    /// F2FS mode: the two fixed copies of meta block `i` (NAT blocks first, then SIT blocks),
    /// after the superblock and the two checkpoint packs.
    pub fn meta_slot(&self, i: u32, copy: u32) -> u32 {
        3 + 2 * i + copy
    }
    pub fn encode(&self, b: &mut [u8]) {
        b.fill(0);
        put64(b, 0, SB_MAGIC);
        put32(b, 8, self.mode.code());
        put32(b, 12, self.seg_pages);
        put32(b, 16, self.segments);
        put32(b, 20, self.main_seg0);
        put32(b, 24, self.max_nids);
        put32(b, 28, self.nat_blocks);
        put32(b, 32, self.sit_blocks);
        seal(b);
    }
    pub fn decode(b: &[u8]) -> Result<Superblock, String> {
        if u64_at(b, 0) != SB_MAGIC {
            return Err("no LFS superblock in block 0".into());
        }
        if !sealed(b) {
            return Err("the superblock fails its CRC".into());
        }
        let mode = match u32_at(b, 8) {
            1 => Mode::F2fs,
            2 => Mode::Alfs,
            m => return Err(format!("unknown mode {m}")),
        };
        Ok(Superblock {
            mode,
            seg_pages: u32_at(b, 12),
            segments: u32_at(b, 16),
            main_seg0: u32_at(b, 20),
            max_nids: u32_at(b, 24),
            nat_blocks: u32_at(b, 28),
            sit_blocks: u32_at(b, 32),
        })
    }
}

/// A checkpoint block: the root of everything durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub version: u64,
    /// Where the node log continues: roll-forward starts reading here.
    pub rf_addr: u32,
    /// Application bytes written so far, all mounts.
    pub user_bytes: u64,
    /// Address of every meta block (NAT blocks, then SIT blocks).
    pub meta: Vec<u32>,
}

impl Checkpoint {
    pub fn encode(&self, b: &mut [u8]) {
        assert!(
            self.meta.len() <= CP_MAX_META,
            "checkpoint lists too many meta blocks"
        );
        b.fill(0);
        put64(b, 0, CP_MAGIC);
        put64(b, 8, self.version);
        put32(b, 16, self.rf_addr);
        put32(b, 20, self.meta.len() as u32);
        put64(b, 24, self.user_bytes); // 32..40 reserved (0)
        for (i, &a) in self.meta.iter().enumerate() {
            put32(b, 40 + 4 * i, a);
        }
        seal(b);
    }
    /// `None` for anything but a whole, sealed checkpoint block.
    pub fn decode(b: &[u8]) -> Option<Checkpoint> {
        if u64_at(b, 0) != CP_MAGIC || !sealed(b) {
            return None;
        }
        let n = u32_at(b, 20) as usize;
        if n > CP_MAX_META {
            return None;
        }
        Some(Checkpoint {
            version: u64_at(b, 8),
            rf_addr: u32_at(b, 16),
            user_bytes: u64_at(b, 24),
            meta: (0..n).map(|i| u32_at(b, 40 + 4 * i)).collect(),
        })
    }
}

/// The footer of a node block (inode or direct node).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    pub nid: u32,
    /// The inode the node belongs to (= `nid` for an inode).
    pub ino: u32,
    /// 0 for the inode, k + 1 for the inode's k-th direct node.
    pub index: u32,
    pub flags: u32,
    /// Version of the checkpoint the node was written after.
    pub cp_version: u64,
    /// Where the node log's next block goes (the roll-forward chain).
    pub next_addr: u32,
}

impl Footer {
    pub fn encode(&self, b: &mut [u8]) {
        let f = &mut b[FOOTER_AT..];
        put32(f, 0, self.nid);
        put32(f, 4, self.ino);
        put32(f, 8, self.index);
        put32(f, 12, self.flags);
        put64(f, 16, self.cp_version);
        put32(f, 24, self.next_addr);
        seal(b);
    }
    pub fn decode(b: &[u8]) -> Option<Footer> {
        if !sealed(b) || b.iter().all(|&x| x == 0) {
            return None;
        }
        let f = &b[FOOTER_AT..];
        Some(Footer {
            nid: u32_at(f, 0),
            ino: u32_at(f, 4),
            index: u32_at(f, 8),
            flags: u32_at(f, 12),
            cp_version: u64_at(f, 16),
            next_addr: u32_at(f, 24),
        })
    }
}

/// An inode's attributes (the first 64 bytes of an inode block).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inode {
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub parent: u32,
}

pub const S_IFMT: u32 = 0o170_000;
pub const S_IFREG: u32 = 0o100_000;
pub const S_IFDIR: u32 = 0o040_000;
pub const S_IFLNK: u32 = 0o120_000;

impl Inode {
    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }
    pub fn encode(&self, b: &mut [u8]) {
        put32(b, 0, self.mode);
        put32(b, 4, self.nlink);
        put32(b, 8, self.uid);
        put32(b, 12, self.gid);
        put64(b, 16, self.size);
        put64(b, 24, self.atime_ns as u64);
        put64(b, 32, self.mtime_ns as u64);
        put64(b, 40, self.ctime_ns as u64);
        put32(b, 48, self.parent);
    }
    pub fn decode(b: &[u8]) -> Inode {
        Inode {
            mode: u32_at(b, 0),
            nlink: u32_at(b, 4),
            uid: u32_at(b, 8),
            gid: u32_at(b, 12),
            size: u64_at(b, 16),
            atime_ns: u64_at(b, 24) as i64,
            mtime_ns: u64_at(b, 32) as i64,
            ctime_ns: u64_at(b, 40) as i64,
            parent: u32_at(b, 48),
        }
    }
}

/// Byte offsets inside an inode block.
pub const INODE_ADDRS_AT: usize = 64;
pub const INODE_NIDS_AT: usize = INODE_ADDRS_AT + 4 * INODE_ADDRS;
const _: () = assert!(INODE_NIDS_AT + 4 * INODE_NIDS <= FOOTER_AT);
const _: () = assert!(4 * NODE_ADDRS <= FOOTER_AT);
const _: () = assert!(40 + 4 * CP_MAX_META <= BLOCK_BYTES - 4);

/// A segment's SIT entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SitEntry {
    pub valid: u32,
    /// `SegKind` code (0 free).
    pub kind: u32,
    /// Checkpoint version when the segment was last written (its age for cost-benefit).
    pub mtime: u64,
}

impl SitEntry {
    pub fn encode(&self, b: &mut [u8]) {
        put32(b, 0, self.valid);
        put32(b, 4, self.kind);
        put64(b, 8, self.mtime);
    }
    pub fn decode(b: &[u8]) -> SitEntry {
        SitEntry {
            valid: u32_at(b, 0),
            kind: u32_at(b, 4),
            mtime: u64_at(b, 8),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_blocks_round_trip_and_refuse_damage() {
        let mut b = vec![0u8; BLOCK_BYTES];
        let sb = Superblock {
            mode: Mode::Alfs,
            seg_pages: 512,
            segments: 125,
            main_seg0: 3,
            max_nids: 2046,
            nat_blocks: 2,
            sit_blocks: 1,
        };
        sb.encode(&mut b);
        assert_eq!(Superblock::decode(&b), Ok(sb));
        b[13] ^= 1;
        assert!(Superblock::decode(&b).is_err());

        let cp = Checkpoint {
            version: 7,
            rf_addr: 1234,
            user_bytes: 99,
            meta: vec![5, 6, 7],
        };
        cp.encode(&mut b);
        assert_eq!(Checkpoint::decode(&b), Some(cp));
        b[44] ^= 1;
        assert_eq!(Checkpoint::decode(&b), None);

        let f = Footer {
            nid: 3,
            ino: 3,
            index: 0,
            flags: FLAG_FSYNC | FLAG_END,
            cp_version: 7,
            next_addr: 4000,
        };
        b.fill(0);
        f.encode(&mut b);
        assert_eq!(Footer::decode(&b), Some(f));
        b[0] ^= 1; // the body is under the CRC too
        assert_eq!(Footer::decode(&b), None);
        assert_eq!(Footer::decode(&[0u8; BLOCK_BYTES]), None);
    }
}
