//! On-flash formats (byte tables in docs/lfs.md). Every block is one 4 KiB logical page; all
//! integers are little-endian; every metadata block ends in a CRC-32 of the bytes before it.
//!
//! Format version 2 (`LFS_VERSION`) put a checksum on everything a mount trusts: directory
//! entries carry their own CRC, the checkpoint a CRC over its NAT and SIT blocks' CRCs (so a
//! stale copy of one is caught, not only a damaged one), and with the superblock's
//! `FEATURE_DATA_CHECKSUMS` every block address in a node is paired with the CRC-32 of the
//! block's data (written in the node after the data: roll-forward and checkpoints make the
//! pair durable together). Version 3 (`LFS_VERSION`) made the checkpoint a pack of several
//! blocks (a header and continuation blocks listing the NAT and SIT block addresses), so that
//! the node ids, and the NAT, grow with the device instead of stopping at what one block lists.
//! Older images are refused with their version.

pub const BLOCK_BYTES: usize = ftl::LOGICAL_PAGE_BYTES;
pub const SB_MAGIC: u64 = 0x3153_464C_4654_4F4E; // "NOFTLFS1"
pub const CP_MAGIC: u64 = 0x3150_4B43_5346_4C4E; // "NLFSCKP1"
/// A checkpoint pack's continuation block.
pub const CP_CONT_MAGIC: u64 = 0x4350_4B43_5346_4C4E; // "NLFSCKPC"
/// The on-flash format this build writes and reads (see the module documentation).
pub const LFS_VERSION: u32 = 3;
/// Superblock feature bit: every data block's CRC-32 sits beside its address in the node.
pub const FEATURE_DATA_CHECKSUMS: u32 = 1;
/// Block addresses a direct node holds (without data checksums).
pub const NODE_ADDRS: usize = 1016;
/// Block addresses kept in the inode itself (small files need no direct node; without data
/// checksums).
pub const INODE_ADDRS: usize = 480;
/// Direct-node ids an inode holds: the largest file is
/// `INODE_ADDRS + INODE_NIDS * NODE_ADDRS` blocks (about 1.9 GiB; half with data checksums).
pub const INODE_NIDS: usize = 500;
pub const MAX_FILE_BLOCKS: u64 = (INODE_ADDRS + INODE_NIDS * NODE_ADDRS) as u64;

/// Where a node keeps block addresses: 4-byte addresses, or with data checksums 8-byte
/// (address, CRC-32 of the block) pairs in the same bytes (half as many).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slots {
    pub inode_addrs: usize,
    pub node_addrs: usize,
    /// Bytes per slot: 4, or 8 with the CRC.
    pub width: usize,
}

impl Slots {
    pub fn of(data_checksums: bool) -> Slots {
        if data_checksums {
            Slots {
                inode_addrs: INODE_ADDRS / 2,
                node_addrs: NODE_ADDRS / 2,
                width: 8,
            }
        } else {
            Slots {
                inode_addrs: INODE_ADDRS,
                node_addrs: NODE_ADDRS,
                width: 4,
            }
        }
    }
    pub fn checksums(&self) -> bool {
        self.width == 8
    }
    /// The largest file, in blocks.
    pub fn max_file_blocks(&self) -> u64 {
        (self.inode_addrs + INODE_NIDS * self.node_addrs) as u64
    }
    /// The node holding block `idx`'s address: 0 the inode, k + 1 direct node k.
    pub fn node_index(&self, idx: u64) -> u32 {
        if idx < self.inode_addrs as u64 {
            0
        } else {
            ((idx - self.inode_addrs as u64) / self.node_addrs as u64) as u32 + 1
        }
    }
    /// Direct nodes a file of `blocks` blocks uses.
    pub fn nodes_for(&self, blocks: u64) -> usize {
        blocks
            .saturating_sub(self.inode_addrs as u64)
            .div_ceil(self.node_addrs as u64) as usize
    }
    /// Byte offset of slot `k` of a node (`inode`: an inode's slots start at
    /// `INODE_ADDRS_AT`).
    pub fn at(&self, inode: bool, k: usize) -> usize {
        if inode {
            INODE_ADDRS_AT + self.width * k
        } else {
            self.width * k
        }
    }
    /// Reads slot `k`: (address, CRC; 0 without checksums).
    pub fn get(&self, b: &[u8], inode: bool, k: usize) -> (u32, u32) {
        let o = self.at(inode, k);
        let crc = if self.checksums() {
            u32_at(b, o + 4)
        } else {
            0
        };
        (u32_at(b, o), crc)
    }
    /// Writes slot `k`.
    pub fn put(&self, b: &mut [u8], inode: bool, k: usize, addr: u32, crc: u32) {
        let o = self.at(inode, k);
        put32(b, o, addr);
        if self.checksums() {
            put32(b, o + 4, crc);
        }
    }
}
/// Offset of the node footer (the last 32 bytes of a node block).
pub const FOOTER_AT: usize = BLOCK_BYTES - 32;
/// NAT entries per block (the last 4 bytes hold the CRC).
pub const NAT_PER_BLOCK: u32 = ((BLOCK_BYTES - 4) / 4) as u32;
pub const SIT_BYTES: usize = 16;
pub const SIT_PER_BLOCK: u32 = ((BLOCK_BYTES - 4) / SIT_BYTES) as u32;
/// Meta block addresses a checkpoint pack's header block lists (1,013).
pub const CP_MAX_META: usize = (BLOCK_BYTES - 4 - 40) / 4;
/// Meta block addresses each continuation block of a pack lists (1,017).
pub const CP_CONT_META: usize = (BLOCK_BYTES - 4 - 24) / 4;

/// Blocks of a checkpoint pack that lists `n_meta` meta blocks: the header, then as many
/// continuation blocks as the addresses beyond the header's need.
pub fn cp_blocks(n_meta: u64) -> u64 {
    1 + n_meta
        .saturating_sub(CP_MAX_META as u64)
        .div_ceil(CP_CONT_META as u64)
}
pub const DIRENT_BYTES: usize = 256;
pub const DIRENTS_PER_BLOCK: u32 = (BLOCK_BYTES / DIRENT_BYTES) as u32;
/// Name bytes of a directory entry (12..256: the first 12 hold the inode, the length and the
/// entry's CRC).
pub const NAME_MAX_BYTES: usize = DIRENT_BYTES - 12;

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

/// CRC-32 of a directory entry without its CRC field (bytes 8..12).
fn dirent_crc(e: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&e[..8]);
    h.update(&e[12..]);
    h.finalize()
}

/// Encodes directory entry `e`: `child` named `name`, or all zeros for a free slot.
///
/// | bytes | field |
/// |---|---|
/// | 0..4 | inode (0: free slot, all zeros) |
/// | 4 | name length (1..=244) |
/// | 5..8 | zero |
/// | 8..12 | CRC-32 of the entry without these 4 bytes |
/// | 12..256 | name, then zeros |
pub fn encode_dirent(e: &mut [u8], child: u32, name: &[u8]) {
    e.fill(0);
    if child == 0 {
        return;
    }
    put32(e, 0, child);
    e[4] = name.len() as u8;
    e[12..12 + name.len()].copy_from_slice(name);
    let c = dirent_crc(e);
    put32(e, 8, c);
}

/// Decodes directory entry `e`: `None` for a free slot, else (inode, name). An entry that
/// fails its CRC or holds what no entry may is an error.
pub fn decode_dirent(e: &[u8]) -> Result<Option<(u32, &[u8])>, &'static str> {
    if e.iter().all(|&x| x == 0) {
        return Ok(None);
    }
    if dirent_crc(e) != u32_at(e, 8) {
        return Err("fails its CRC");
    }
    let len = usize::from(e[4]);
    if u32_at(e, 0) == 0 || len == 0 || len > NAME_MAX_BYTES {
        return Err("names no inode or has a bad name length");
    }
    let name = &e[12..12 + len];
    if name.contains(&b'/') || name.contains(&0) || name == b"." || name == b".." {
        return Err("has a bad name");
    }
    Ok(Some((u32_at(e, 0), name)))
}

/// The CRC over the CRCs of a checkpoint's meta blocks (each block's last 4 bytes), in order:
/// the checkpoint keeps it, so that a NAT or SIT block that is intact but not the one the
/// checkpoint was written with (a stale copy) is found.
pub fn meta_crc(crcs: &[u32]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for c in crcs {
        h.update(&c.to_le_bytes());
    }
    h.finalize()
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
    /// Every data block's CRC-32 beside its address (`FEATURE_DATA_CHECKSUMS`).
    pub data_checksums: bool,
}

impl Superblock {
    /// Where a node keeps block addresses in this file system.
    pub fn slots(&self) -> Slots {
        Slots::of(self.data_checksums)
    }
    /// What a superblock may hold on a device of `capacity_pages`, checked before any of its
    /// numbers sizes a table (a CRC-valid superblock can still be wrong, or crafted): the table
    /// sizes are exactly what format derives from the node ids and segments, and the metadata
    /// (f2fs: the packs and both copies of every meta block; alfs: the meta log's segments and
    /// a pack within a checkpoint segment) fits before the end of the device.
    pub fn validate(&self, capacity_pages: u64) -> Result<(), String> {
        let sp = u64::from(self.seg_pages);
        let n_meta = u64::from(self.nat_blocks) + u64::from(self.sit_blocks);
        let k = cp_blocks(n_meta);
        let (meta_end, meta_segs) = match self.mode {
            Mode::F2fs => (1 + 2 * k + 2 * n_meta, 0),
            Mode::Alfs => (3 * sp, 2 * n_meta.div_ceil(sp.max(1)) + 1),
        };
        let checks = [
            (self.seg_pages >= 4, "segments of fewer than 4 pages"),
            (
                u64::from(self.segments) * sp <= capacity_pages,
                "more segments than the device holds",
            ),
            (
                self.main_seg0 < self.segments && u64::from(self.main_seg0) * sp >= meta_end,
                "the main area overlaps the metadata or is empty",
            ),
            (
                self.max_nids >= 2 && self.nat_blocks == self.max_nids.div_ceil(NAT_PER_BLOCK),
                "NAT blocks other than the node ids need",
            ),
            (
                self.sit_blocks == self.segments.div_ceil(SIT_PER_BLOCK),
                "SIT blocks other than the segments need",
            ),
            (
                self.mode == Mode::F2fs || k <= sp,
                "a checkpoint pack larger than a checkpoint segment",
            ),
            (
                meta_segs < u64::from(self.segments - self.main_seg0.min(self.segments)),
                "a meta log larger than the main area",
            ),
        ];
        match checks.iter().find(|(ok, _)| !ok) {
            Some((_, why)) => Err(format!(
                "the superblock does not describe a file system on this device: {why}"
            )),
            None => Ok(()),
        }
    }
    /// Blocks of each checkpoint pack (`cp_blocks` of the meta blocks).
    pub fn cp_blocks(&self) -> u32 {
        cp_blocks(u64::from(self.n_meta())) as u32
    }
    /// F2FS mode: the first block of the pack checkpoint `version` goes to (packs A and B
    /// after the superblock, used in turn).
    pub fn cp_pack_addr(&self, version: u64) -> u32 {
        1 + (version % 2) as u32 * self.cp_blocks()
    }
    pub fn n_meta(&self) -> u32 {
        self.nat_blocks + self.sit_blocks
    }
    /// F2FS mode: the two fixed copies of meta block `i` (NAT blocks first, then SIT blocks),
    /// after the superblock and the two checkpoint packs.
    pub fn meta_slot(&self, i: u32, copy: u32) -> u32 {
        1 + 2 * self.cp_blocks() + 2 * i + copy
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
        put32(b, 36, LFS_VERSION);
        let features = if self.data_checksums {
            FEATURE_DATA_CHECKSUMS
        } else {
            0
        };
        put32(b, 40, features);
        seal(b);
    }
    pub fn decode(b: &[u8]) -> Result<Superblock, String> {
        if u64_at(b, 0) != SB_MAGIC {
            return Err("no LFS superblock in block 0".into());
        }
        if !sealed(b) {
            return Err("the superblock fails its CRC".into());
        }
        // Version 1 left bytes 36..40 zero.
        let version = u32_at(b, 36).max(1);
        if version != LFS_VERSION {
            return Err(format!(
                "LFS format version {version}; this build reads version {LFS_VERSION} \
                 (checkpoint packs of several blocks; checksums on directory entries, NAT/SIT \
                 and optionally data){}",
                if version < LFS_VERSION {
                    ": copy the files off with the build that wrote the image"
                } else {
                    ""
                }
            ));
        }
        let features = u32_at(b, 40);
        if features & !FEATURE_DATA_CHECKSUMS != 0 {
            return Err(format!("unknown feature bits {features:#x}"));
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
            data_checksums: features & FEATURE_DATA_CHECKSUMS != 0,
        })
    }
}

/// A checkpoint pack: the root of everything durable. On flash it is `cp_blocks(n)` blocks
/// at consecutive addresses: a header block, then continuation blocks for the meta block
/// addresses beyond the header's 1,013 (byte tables in docs/lfs.md). A pack counts only whole:
/// every block sealed, with its magic, its index and the header's version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub version: u64,
    /// Where the node log continues: roll-forward starts reading here.
    pub rf_addr: u32,
    /// Application bytes written so far, all mounts.
    pub user_bytes: u64,
    /// Address of every meta block (NAT blocks, then SIT blocks).
    pub meta: Vec<u32>,
    /// `meta_crc` of those blocks as written.
    pub meta_crc: u32,
}

impl Checkpoint {
    /// Blocks of this checkpoint's pack.
    pub fn pack_blocks(&self) -> usize {
        cp_blocks(self.meta.len() as u64) as usize
    }
    /// Encodes the pack into `b` (`pack_blocks()` blocks: the header first).
    pub fn encode_pack(&self, b: &mut Vec<u8>) {
        let k = self.pack_blocks();
        b.clear();
        b.resize(k * BLOCK_BYTES, 0);
        let (head, rest) = b.split_at_mut(BLOCK_BYTES);
        put64(head, 0, CP_MAGIC);
        put64(head, 8, self.version);
        put32(head, 16, self.rf_addr);
        put32(head, 20, self.meta.len() as u32);
        put64(head, 24, self.user_bytes);
        put32(head, 32, self.meta_crc);
        put32(head, 36, k as u32);
        let first = self.meta.len().min(CP_MAX_META);
        for (i, &a) in self.meta[..first].iter().enumerate() {
            put32(head, 40 + 4 * i, a);
        }
        seal(head);
        let chunks = self.meta[first..].chunks(CP_CONT_META);
        for (j, (blk, addrs)) in rest.chunks_mut(BLOCK_BYTES).zip(chunks).enumerate() {
            put64(blk, 0, CP_CONT_MAGIC);
            put64(blk, 8, self.version);
            put32(blk, 16, j as u32 + 1);
            put32(blk, 20, addrs.len() as u32);
            for (i, &a) in addrs.iter().enumerate() {
                put32(blk, 24 + 4 * i, a);
            }
            seal(blk);
        }
    }
    /// The blocks of the pack whose header is `b`: `None` unless `b` is a whole, sealed
    /// header block naming a consistent block count.
    pub fn header_blocks(b: &[u8]) -> Option<usize> {
        let b = b.get(..BLOCK_BYTES)?; // the header of a whole pack
        if u64_at(b, 0) != CP_MAGIC || !sealed(b) {
            return None;
        }
        let n = u64::from(u32_at(b, 20));
        let k = u64::from(u32_at(b, 36));
        (k == cp_blocks(n)).then_some(k as usize)
    }
    /// Decodes a pack from its blocks in order: `None` unless the header is whole
    /// (`header_blocks`), `b` holds exactly its blocks, and every continuation block is sealed,
    /// carries its magic, its index, the header's version and the addresses it must hold. A
    /// pack torn by a power cut (some blocks new, some old or never written) is refused.
    pub fn decode_pack(b: &[u8]) -> Option<Checkpoint> {
        let k = Checkpoint::header_blocks(b)?;
        if b.len() != k * BLOCK_BYTES {
            return None;
        }
        let version = u64_at(b, 8);
        let n = u32_at(b, 20) as usize;
        let first = n.min(CP_MAX_META);
        let mut meta: Vec<u32> = (0..first).map(|i| u32_at(b, 40 + 4 * i)).collect();
        for (j, blk) in b[BLOCK_BYTES..].chunks(BLOCK_BYTES).enumerate() {
            let want = (n - meta.len()).min(CP_CONT_META);
            let ok = u64_at(blk, 0) == CP_CONT_MAGIC
                && sealed(blk)
                && u64_at(blk, 8) == version
                && u32_at(blk, 16) as usize == j + 1
                && u32_at(blk, 20) as usize == want;
            if !ok {
                return None;
            }
            meta.extend((0..want).map(|i| u32_at(blk, 24 + 4 * i)));
        }
        Some(Checkpoint {
            version,
            rf_addr: u32_at(b, 16),
            user_bytes: u64_at(b, 24),
            meta,
            meta_crc: u32_at(b, 32),
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
const _: () = assert!(24 + 4 * CP_CONT_META <= BLOCK_BYTES - 4);

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
            data_checksums: true,
        };
        sb.encode(&mut b);
        assert_eq!(Superblock::decode(&b), Ok(sb));
        assert_eq!(u32_at(&b, 36), LFS_VERSION);
        assert_eq!(u32_at(&b, 40), FEATURE_DATA_CHECKSUMS);
        b[13] ^= 1;
        assert!(Superblock::decode(&b).is_err());

        let cp = Checkpoint {
            version: 7,
            rf_addr: 1234,
            user_bytes: 99,
            meta: vec![5, 6, 7],
            meta_crc: 0xDEAD_BEEF,
        };
        let mut pack = Vec::new();
        cp.encode_pack(&mut pack);
        assert_eq!(pack.len(), BLOCK_BYTES, "3 meta blocks: a one-block pack");
        assert_eq!(Checkpoint::decode_pack(&pack), Some(cp));
        pack[44] ^= 1;
        assert_eq!(Checkpoint::decode_pack(&pack), None);

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

    /// Format 1 (before checksums) left bytes 36..44 zero: refused with its version, not as
    /// damage and not read as format 2.
    #[test]
    fn a_format_1_superblock_is_refused_naming_its_version() {
        let sb = Superblock {
            mode: Mode::F2fs,
            seg_pages: 512,
            segments: 125,
            main_seg0: 1,
            max_nids: 1023,
            nat_blocks: 1,
            sit_blocks: 1,
            data_checksums: false,
        };
        let mut b = vec![0u8; BLOCK_BYTES];
        sb.encode(&mut b);
        put32(&mut b, 36, 0);
        seal(&mut b);
        let e = Superblock::decode(&b).unwrap_err();
        assert!(
            e.contains("format version 1") && e.contains("reads version 3"),
            "{e}"
        );
    }

    /// A pack of three blocks (1,013 + 1,017 + 70 addresses) round-trips; a pack torn by a cut
    /// (a continuation from the pack's previous use, one never written, one damaged, one
    /// missing or extra) is refused as a whole.
    #[test]
    fn a_torn_multi_block_checkpoint_pack_is_refused() {
        let n = CP_MAX_META + CP_CONT_META + 70;
        assert_eq!(cp_blocks(n as u64), 3);
        assert_eq!((cp_blocks(0), cp_blocks(CP_MAX_META as u64)), (1, 1));
        assert_eq!(cp_blocks(CP_MAX_META as u64 + 1), 2);
        let cp = |version: u64| Checkpoint {
            version,
            rf_addr: 77,
            user_bytes: 5,
            meta: (0..n as u32).map(|i| 1000 + i + version as u32).collect(),
            meta_crc: 0x1234,
        };
        let (mut new, mut old) = (Vec::new(), Vec::new());
        cp(9).encode_pack(&mut new);
        cp(7).encode_pack(&mut old);
        assert_eq!(new.len(), 3 * BLOCK_BYTES);
        assert!(Checkpoint::decode_pack(&new) == Some(cp(9)));
        assert_eq!(Checkpoint::header_blocks(&new), Some(3));
        // The cut fell after the header: the continuations are the older pack's.
        let mut torn = new.clone();
        torn[BLOCK_BYTES..].copy_from_slice(&old[BLOCK_BYTES..]);
        assert!(Checkpoint::decode_pack(&torn).is_none());
        // Only the last continuation is old; or never written (AMF reads an erased page as 0).
        let mut torn = new.clone();
        torn[2 * BLOCK_BYTES..].copy_from_slice(&old[2 * BLOCK_BYTES..]);
        assert!(Checkpoint::decode_pack(&torn).is_none());
        torn[2 * BLOCK_BYTES..].fill(0);
        assert!(Checkpoint::decode_pack(&torn).is_none());
        // The cut fell before the header: old header, new continuations.
        let mut torn = old.clone();
        torn[BLOCK_BYTES..].copy_from_slice(&new[BLOCK_BYTES..]);
        assert!(Checkpoint::decode_pack(&torn).is_none());
        // Damage anywhere; blocks in the wrong order; too few or too many blocks.
        let mut bad = new.clone();
        bad[BLOCK_BYTES + 100] ^= 1;
        assert!(Checkpoint::decode_pack(&bad).is_none());
        let mut swapped = new.clone();
        swapped[BLOCK_BYTES..].rotate_left(BLOCK_BYTES);
        assert!(Checkpoint::decode_pack(&swapped).is_none());
        assert!(Checkpoint::decode_pack(&new[..2 * BLOCK_BYTES]).is_none());
        let mut long = new.clone();
        long.extend_from_slice(&new[BLOCK_BYTES..2 * BLOCK_BYTES]);
        assert!(Checkpoint::decode_pack(&long).is_none());
    }

    #[test]
    fn directory_entries_round_trip_and_every_byte_is_under_the_crc() {
        let mut e = [0u8; DIRENT_BYTES];
        encode_dirent(&mut e, 42, b"name");
        assert_eq!(decode_dirent(&e), Ok(Some((42, &b"name"[..]))));
        for i in 0..DIRENT_BYTES {
            let mut bad = e;
            bad[i] ^= 0x01;
            assert!(decode_dirent(&bad).is_err(), "flip in byte {i}");
        }
        let mut free = [0u8; DIRENT_BYTES];
        assert_eq!(decode_dirent(&free), Ok(None));
        free[200] = 1;
        assert!(decode_dirent(&free).is_err(), "a free slot is all zeros");
    }

    #[test]
    fn data_checksums_pair_each_address_with_its_crc() {
        let s = Slots::of(true);
        assert_eq!((s.inode_addrs, s.node_addrs), (240, 508));
        assert_eq!(s.max_file_blocks(), 240 + 500 * 508);
        assert!(s.at(true, s.inode_addrs) <= INODE_NIDS_AT);
        assert!(s.at(false, s.node_addrs) <= FOOTER_AT);
        let mut b = vec![0u8; BLOCK_BYTES];
        s.put(&mut b, false, 507, 9, 0xABCD);
        assert_eq!(s.get(&b, false, 507), (9, 0xABCD));
        assert_eq!(Slots::of(false).max_file_blocks(), MAX_FILE_BLOCKS);
    }
}
