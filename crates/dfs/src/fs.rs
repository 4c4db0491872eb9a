//! DFS: a file system that delegates block allocation to the VSL (docs/dfs.md).
//!
//! Layout of the virtual space (blocks of 4 KiB, parameters chosen at format and kept in the
//! superblock):
//! - chunk 0: block 0 the superblock, blocks `1..1 + max_inodes / 16` the inode table (16
//!   inodes of 256 bytes per block; only written blocks take flash or map memory);
//! - chunks 1..: the small-file area: inode `i` owns `small_blocks` blocks at
//!   `chunk_blocks + i * small_blocks` (many small files per chunk, packed in shared map leaves);
//! - then one chunk per inode: inode `i`'s large-file chunk at `(large_chunk0 + i) *
//!   chunk_blocks`. A file whose size passes `small_blocks` blocks moves there once.
//!
//! So a file's blocks are `base + logical block`, where the base follows from the inode number
//! and its LARGE flag: there is no block bitmap, no free-space map and no extent tree; free
//! space is the VSL's business (trim returns it).
//!
//! Directories are files of fixed 256-byte entries (UFS-like, 16 per block). Every namespace
//! operation writes the directory blocks and inode blocks it changes as one VSL atomic group,
//! so it is all-or-nothing across a power cut. Data writes go to the VSL as groups that include
//! the inode block when the size changes. Every operation is durable when it returns (the VSL's
//! promise on SLC; on MLC/TLC its groups complete word lines); `fsync` writes the inode's
//! lazily kept timestamps and is the VSL's durability point.
//!
//! Invariants (checked by `fsck`):
//! 1. Every directory entry names an allocated inode; an allocated inode's `nlink` is the number
//!    of entries naming it (directories: 1, their entry in the parent); the root has nlink 1.
//! 2. No block of a file is mapped at or beyond its size rounded up to blocks; no block of a
//!    free inode is mapped; a small-area range is mapped only for a file without LARGE, a
//!    large chunk only for a file with it.
//! 3. Every directory's parent pointer names a directory holding an entry for it.

use fnv::FnvHashMap;
use std::collections::BTreeSet;

use nand::{Nand, Nanos};

use crate::vsl::{Vsl, VslConfig, VslError, BLOCK_BYTES, VIRTUAL_BLOCKS};

pub const INODE_BYTES: usize = 256;
pub const INODES_PER_BLOCK: u32 = (BLOCK_BYTES / INODE_BYTES) as u32;
pub const DIRENT_BYTES: usize = 256;
pub const DIRENTS_PER_BLOCK: u32 = (BLOCK_BYTES / DIRENT_BYTES) as u32;
/// Name bytes of a directory entry (bytes 12..256; the first 12 hold the inode, type, length
/// and the entry's CRC).
pub const NAME_MAX_BYTES: usize = DIRENT_BYTES - 12;
pub const ROOT_INO: u32 = 1;
const SB_MAGIC: u64 = 0x0031_5346_4456_4E44; // "DNVDFS1\0"
/// Format 2: a CRC on every structure (superblock, inodes, directory entries, the VSL's
/// checkpoint pages and, in each block's OOB record, its data). Format 1 had CRCs on the
/// superblock's and inodes' first 60 bytes only; it is refused with a clear error.
pub const SB_VERSION: u32 = 2;
const FLAG_LARGE: u32 = 1;

pub const S_IFMT: u32 = 0o170_000;
pub const S_IFREG: u32 = 0o100_000;
pub const S_IFDIR: u32 = 0o040_000;
pub const S_IFLNK: u32 = 0o120_000;

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("file exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    #[error("name longer than {NAME_MAX_BYTES} bytes")]
    NameTooLong,
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    #[error("file too large (the chunk size bounds a file)")]
    TooLarge,
    #[error("no space left (flash or inodes)")]
    NoSpace,
    #[error("not a DFS image: {0}")]
    Format(String),
    #[error("corrupt file system: {0}")]
    Corrupt(String),
    #[error(transparent)]
    Vsl(VslError),
}

impl From<VslError> for FsError {
    fn from(e: VslError) -> Self {
        match e {
            VslError::NoSpace { .. } => FsError::NoSpace,
            e => FsError::Vsl(e),
        }
    }
}

impl FsError {
    /// The errno a POSIX caller sees.
    pub fn errno(&self) -> i32 {
        match self {
            FsError::NotFound => 2,     // ENOENT
            FsError::Exists => 17,      // EEXIST
            FsError::NotDir => 20,      // ENOTDIR
            FsError::IsDir => 21,       // EISDIR
            FsError::NotEmpty => 39,    // ENOTEMPTY
            FsError::NameTooLong => 36, // ENAMETOOLONG
            FsError::Invalid(_) => 22,  // EINVAL
            FsError::TooLarge => 27,    // EFBIG
            FsError::NoSpace => 28,     // ENOSPC
            _ => 5,                     // EIO
        }
    }
    pub fn is_power_loss(&self) -> bool {
        matches!(self, FsError::Vsl(e) if e.is_power_loss())
    }
}

pub type FsResult<T> = Result<T, FsError>;

/// Format parameters (kept in the superblock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FormatParams {
    /// Blocks per allocation chunk (a power of two): the largest file.
    pub chunk_blocks: u64,
    pub max_inodes: u32,
    /// Blocks of a small file's slot in the shared small-file chunks.
    pub small_blocks: u32,
}

impl Default for FormatParams {
    fn default() -> Self {
        FormatParams {
            chunk_blocks: 1 << 22, // 16 GiB
            max_inodes: 1 << 20,
            small_blocks: 8, // 32 KiB
        }
    }
}

impl FormatParams {
    fn inode_blocks(&self) -> u64 {
        u64::from(self.max_inodes).div_ceil(u64::from(INODES_PER_BLOCK))
    }
    fn small_chunks(&self) -> u64 {
        (u64::from(self.max_inodes) * u64::from(self.small_blocks)).div_ceil(self.chunk_blocks)
    }
    fn large_chunk0(&self) -> u64 {
        1 + self.small_chunks()
    }
    pub fn validate(&self) -> FsResult<()> {
        if !self.chunk_blocks.is_power_of_two() || self.chunk_blocks < 64 {
            return Err(FsError::Invalid(
                "chunk blocks must be a power of two >= 64",
            ));
        }
        if self.max_inodes < 16 || self.small_blocks == 0 {
            return Err(FsError::Invalid(
                "at least 16 inodes and 1 block per small file",
            ));
        }
        if 1 + self.inode_blocks() > self.chunk_blocks
            || u64::from(self.small_blocks) > self.chunk_blocks
        {
            return Err(FsError::Invalid("the inode table must fit chunk 0"));
        }
        let end = (self.large_chunk0() + u64::from(self.max_inodes)).checked_mul(self.chunk_blocks);
        if end.is_none_or(|e| e > VIRTUAL_BLOCKS) {
            return Err(FsError::Invalid("chunks x inodes exceed the virtual space"));
        }
        Ok(())
    }
}

/// An inode in memory.
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
    pub flags: u32,
    pub parent: u32,
    pub generation: u32,
}

impl Inode {
    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }
    pub fn is_free(&self) -> bool {
        self.mode == 0
    }
    fn encode(&self, b: &mut [u8]) {
        b.fill(0);
        b[0..4].copy_from_slice(&self.mode.to_le_bytes());
        b[4..8].copy_from_slice(&self.nlink.to_le_bytes());
        b[8..12].copy_from_slice(&self.uid.to_le_bytes());
        b[12..16].copy_from_slice(&self.gid.to_le_bytes());
        b[16..24].copy_from_slice(&self.size.to_le_bytes());
        b[24..32].copy_from_slice(&self.atime_ns.to_le_bytes());
        b[32..40].copy_from_slice(&self.mtime_ns.to_le_bytes());
        b[40..48].copy_from_slice(&self.ctime_ns.to_le_bytes());
        b[48..52].copy_from_slice(&self.flags.to_le_bytes());
        b[52..56].copy_from_slice(&self.parent.to_le_bytes());
        b[56..60].copy_from_slice(&self.generation.to_le_bytes());
        let crc = crc_without(b, 60);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
    }
    fn decode(b: &[u8]) -> Result<Inode, String> {
        if b.iter().all(|&x| x == 0) {
            return Ok(Inode::default());
        }
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(x)
        };
        if crc_without(b, 60) != u32_at(60) {
            return Err("fails its CRC".into());
        }
        Ok(Inode {
            mode: u32_at(0),
            nlink: u32_at(4),
            uid: u32_at(8),
            gid: u32_at(12),
            size: u64_at(16),
            atime_ns: u64_at(24) as i64,
            mtime_ns: u64_at(32) as i64,
            ctime_ns: u64_at(40) as i64,
            flags: u32_at(48),
            parent: u32_at(52),
            generation: u32_at(56),
        })
    }
}

/// CRC-32 of `b` without its 4-byte CRC field at `at` (every other byte is under it: the
/// zeros after the fields too, so that no byte of a structure changes unseen).
fn crc_without(b: &[u8], at: usize) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&b[..at]);
    h.update(&b[at + 4..]);
    h.finalize()
}

/// Encodes directory entry `e` (all zeros for a free slot).
fn encode_dirent(e: &mut [u8], ino: u32, mode: u32, name: &[u8]) {
    e.fill(0);
    if ino == 0 {
        return;
    }
    e[0..4].copy_from_slice(&ino.to_le_bytes());
    e[4] = mode_type(mode);
    e[5] = name.len() as u8;
    e[12..12 + name.len()].copy_from_slice(name);
    let crc = crc_without(e, 8);
    e[8..12].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes directory entry `e`: `None` for a free slot, else (inode, name); an entry that fails
/// its CRC or holds what no entry may (a bad type, length or name) is an error.
fn decode_dirent(e: &[u8], max_inodes: u32) -> Result<Option<(u32, &[u8])>, &'static str> {
    if e.iter().all(|&x| x == 0) {
        return Ok(None);
    }
    if crc_without(e, 8) != u32::from_le_bytes([e[8], e[9], e[10], e[11]]) {
        return Err("fails its CRC");
    }
    let ino = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
    let len = usize::from(e[5]);
    if ino == 0 || ino >= max_inodes || !(1..=3).contains(&e[4]) {
        return Err("names no valid inode");
    }
    if len == 0 || len > NAME_MAX_BYTES {
        return Err("has a bad name length");
    }
    let name = &e[12..12 + len];
    if name.contains(&b'/') || name.contains(&0) || name == b"." || name == b".." {
        return Err("has a bad name");
    }
    Ok(Some((ino, name)))
}

/// A directory in memory: name -> (slot, inode), and the free slots.
#[derive(Debug, Default)]
struct Dir {
    names: FnvHashMap<Vec<u8>, (u32, u32)>,
    free: BTreeSet<u32>,
    slots: u32,
}

/// One entry of `readdir`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u32,
    pub mode: u32,
    pub name: Vec<u8>,
}

/// Attribute changes of `setattr`.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime_ns: Option<i64>,
    pub mtime_ns: Option<i64>,
}

/// File-system statistics (statfs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StatFs {
    pub block_bytes: u32,
    pub blocks: u64,
    pub blocks_free: u64,
    pub files: u64,
    pub files_free: u64,
    pub name_max: u32,
}

/// DFS over a VSL. See the module documentation.
#[derive(Debug)]
pub struct Dfs {
    vsl: Vsl,
    p: FormatParams,
    inodes: FnvHashMap<u32, Inode>,
    free_inodes: BTreeSet<u32>,
    next_fresh: u32,
    dirs: FnvHashMap<u32, Dir>,
    open_count: FnvHashMap<u32, u32>,
    /// Inodes whose timestamps changed without being written (fsync writes them).
    dirty: BTreeSet<u32>,
    t: Nanos,
    buf: Vec<u8>,
    blk: Vec<u8>,
    /// An inode block being written with a data write (no allocation per write).
    iblk: Vec<u8>,
    /// Encoded metadata blocks of the group being assembled: (vbn, bytes).
    group: Vec<(u64, Vec<u8>)>,
    /// Damage found by a checking open (`open_checking`), reported by `fsck`.
    damage: Vec<String>,
}

fn mode_type(mode: u32) -> u8 {
    match mode & S_IFMT {
        S_IFDIR => 2,
        S_IFLNK => 3,
        _ => 1,
    }
}

impl Dfs {
    /// Formats the device: a VSL, the superblock and the root directory.
    pub fn format(nand: Nand, vcfg: &VslConfig, p: FormatParams, now_ns: i64) -> FsResult<Dfs> {
        p.validate()?;
        let vsl = Vsl::format(nand, vcfg)?;
        let mut fs = Dfs::assemble(vsl, p);
        let mut sb = vec![0u8; BLOCK_BYTES];
        encode_superblock(&mut sb, &p);
        let root = Inode {
            mode: S_IFDIR | 0o755,
            nlink: 1,
            atime_ns: now_ns,
            mtime_ns: now_ns,
            ctime_ns: now_ns,
            parent: ROOT_INO,
            ..Inode::default()
        };
        fs.inodes.insert(ROOT_INO, root);
        fs.dirs.insert(ROOT_INO, Dir::default());
        fs.next_fresh = ROOT_INO + 1;
        fs.group.clear();
        fs.group.push((0, sb));
        fs.stage_inode(ROOT_INO);
        fs.commit()?;
        fs.t = fs.vsl.sync(fs.t)?;
        Ok(fs)
    }

    fn assemble(vsl: Vsl, p: FormatParams) -> Dfs {
        let t = vsl.now_ns();
        Dfs {
            vsl,
            p,
            inodes: FnvHashMap::default(),
            free_inodes: BTreeSet::new(),
            next_fresh: 1,
            dirs: FnvHashMap::default(),
            open_count: FnvHashMap::default(),
            dirty: BTreeSet::new(),
            t,
            buf: Vec::new(),
            blk: vec![0; BLOCK_BYTES],
            iblk: vec![0; BLOCK_BYTES],
            group: Vec::new(),
            damage: Vec::new(),
        }
    }

    /// Mounts a formatted device: recovers the VSL, reads the superblock and the inode table,
    /// and finishes what a power cut interrupted (frees orphans, trims blocks past a file's
    /// size or of free inodes: invariant 2). Refuses a damaged image: OOB records that fail
    /// their checks (a block may have lost its newest version), an inode that fails its CRC.
    pub fn open(nand: Nand, vcfg: &VslConfig) -> FsResult<(Dfs, MountReport)> {
        Self::open_as(nand, vcfg, false)
    }

    /// `open` for a check: damaged OOB records and inodes are noted (`damage`, listed first by
    /// `fsck`) instead of refusing the image; a damaged inode is left out (its entries then
    /// name a free inode and its blocks are stray).
    pub fn open_checking(nand: Nand, vcfg: &VslConfig) -> FsResult<(Dfs, MountReport)> {
        Self::open_as(nand, vcfg, true)
    }

    fn open_as(nand: Nand, vcfg: &VslConfig, checking: bool) -> FsResult<(Dfs, MountReport)> {
        let (mut vsl, rep) = Vsl::open(nand, vcfg)?;
        let mut sb = vec![0u8; BLOCK_BYTES];
        // The version first, unchecked: a format-1 image is refused as such, not as corrupt.
        vsl.read_unverified(rep.done_ns, 0, &mut sb)?;
        check_version(&sb).map_err(FsError::Format)?;
        let t = vsl
            .read(rep.done_ns, 0, &mut sb)
            .map_err(|e| FsError::Corrupt(format!("the superblock: {e}")))?;
        let p = decode_superblock(&sb).map_err(FsError::Format)?;
        p.validate()?;
        let mut fs = Dfs::assemble(vsl, p);
        fs.t = t;
        let mut report = MountReport {
            vsl: rep,
            ..MountReport::default()
        };
        let damaged: Vec<String> = (fs.vsl.damaged_units().iter())
            .map(|&u| fs.describe_unit(u))
            .collect();
        if !damaged.is_empty() && !checking {
            return Err(FsError::Corrupt(format!(
                "{} flash units hold a damaged OOB record ({}{}): a block may have lost its \
                 newest version; `noftl fsck` lists the damage",
                damaged.len(),
                damaged[..damaged.len().min(4)].join("; "),
                if damaged.len() > 4 { "; ..." } else { "" }
            )));
        }
        fs.damage.extend(
            damaged
                .into_iter()
                .map(|d| format!("{d}: the OOB record is damaged")),
        );
        let max_ino = fs.load_inode_table(checking)?;
        if !fs.inodes.get(&ROOT_INO).is_some_and(|i| i.is_dir()) {
            return Err(FsError::Corrupt("no root directory".into()));
        }
        fs.next_fresh = max_ino + 1;
        for i in 1..=max_ino {
            if !fs.inodes.contains_key(&i) {
                fs.free_inodes.insert(i);
            }
        }
        // Orphans: allocated, no link (unlinked while open, then the cut).
        let orphans: Vec<u32> = fs
            .inodes
            .iter()
            .filter(|(_, i)| i.nlink == 0)
            .map(|(&n, _)| n)
            .collect();
        for ino in orphans {
            fs.free_inode(ino)?;
            report.orphans_freed += 1;
        }
        // Blocks no file owns (a cut between an inode update and its trim).
        for (s, n) in fs.vsl.map().extents() {
            let mut v = s;
            while v < s + n {
                let (owner, end) = fs.owner_of(v);
                let end = end.min(s + n);
                if let Some((ino, base)) = owner {
                    let keep_to = match fs.inodes.get(&ino) {
                        Some(i) if fs.base_of(ino, i) == base => {
                            base + i.size.div_ceil(BLOCK_BYTES as u64)
                        }
                        _ => base,
                    };
                    if end > keep_to.max(v) {
                        let from = keep_to.max(v);
                        fs.t = fs.vsl.trim(fs.t, from, end - from)?;
                        report.blocks_trimmed += end - from;
                    }
                }
                v = end;
            }
        }
        Ok((fs, report))
    }

    /// Reads the inode table (the mapped blocks of its range); returns the largest inode
    /// number in use. An inode that fails its checks is an error, or with `checking` noted in
    /// `damage` and left out.
    fn load_inode_table(&mut self, checking: bool) -> FsResult<u32> {
        let mut found = Vec::new();
        self.vsl
            .map()
            .mapped_in(1, 1 + self.p.inode_blocks(), &mut found);
        let mut max_ino = 0;
        for (vbn, _) in found {
            match self.vsl.read(self.t, vbn, &mut self.blk) {
                Ok(t) => self.t = t,
                Err(e @ VslError::Corrupt { .. }) if checking => {
                    self.damage
                        .push(format!("inode table block {}: {e}", vbn - 1));
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
            for k in 0..INODES_PER_BLOCK {
                let ino = (vbn as u32 - 1) * INODES_PER_BLOCK + k;
                let o = k as usize * INODE_BYTES;
                let inode = Inode::decode(&self.blk[o..o + INODE_BYTES])
                    .and_then(|i| self.check_inode(ino, &i).map(|()| i));
                match inode {
                    Ok(i) if !i.is_free() && ino != 0 => {
                        self.inodes.insert(ino, i);
                        max_ino = max_ino.max(ino);
                    }
                    Ok(_) => {}
                    Err(e) if checking => self.damage.push(format!("inode {ino}: {e}")),
                    Err(e) => return Err(FsError::Corrupt(format!("inode {ino}: {e}"))),
                }
            }
        }
        Ok(max_ino)
    }

    /// What an inode may hold (a CRC-valid inode still must, before its fields size anything):
    /// a known type, known flags, a size its area holds, a parent inside the table.
    fn check_inode(&self, ino: u32, i: &Inode) -> Result<(), String> {
        if i.is_free() {
            return Ok(());
        }
        if ino >= self.p.max_inodes || ino == 0 {
            return Err(format!("beyond the table of {} inodes", self.p.max_inodes));
        }
        if !matches!(i.mode & S_IFMT, S_IFREG | S_IFDIR | S_IFLNK) || i.flags & !FLAG_LARGE != 0 {
            return Err(format!("mode {:o} flags {:#x}", i.mode, i.flags));
        }
        if i.size.div_ceil(BLOCK_BYTES as u64) > self.area_blocks(i) {
            return Err(format!("size {} beyond its area", i.size));
        }
        if i.parent >= self.p.max_inodes {
            return Err(format!("parent {} beyond the table", i.parent));
        }
        Ok(())
    }

    /// A flash unit for a message: its place on the chip.
    fn describe_unit(&self, unit: u64) -> String {
        let (b, p, slot) = self.vsl.unit_place(unit);
        format!("flash unit {unit} (block {b}, page {p}, slot {slot})")
    }

    /// A virtual block for a message: what it holds.
    fn describe_block(&self, v: u64) -> String {
        match self.owner_of(v) {
            (None, _) if v == 0 => "the superblock".into(),
            (None, _) => format!("inode table block {}", v - 1),
            (Some((ino, base)), _) => format!("inode {ino}'s block {}", v - base),
        }
    }

    /// Which file area block `v` is in: (inode, that area's base) and the area's end; `None`
    /// for the superblock and inode table.
    fn owner_of(&self, v: u64) -> (Option<(u32, u64)>, u64) {
        let c = self.p.chunk_blocks;
        if v < c {
            return (None, c);
        }
        let l0 = self.p.large_chunk0() * c;
        if v < l0 {
            let rel = v - c;
            let ino = (rel / u64::from(self.p.small_blocks)) as u32;
            let base = c + u64::from(ino) * u64::from(self.p.small_blocks);
            return (Some((ino, base)), base + u64::from(self.p.small_blocks));
        }
        let ino = ((v - l0) / c) as u32;
        let base = l0 + u64::from(ino) * c;
        (Some((ino, base)), base + c)
    }

    fn small_base(&self, ino: u32) -> u64 {
        self.p.chunk_blocks + u64::from(ino) * u64::from(self.p.small_blocks)
    }
    fn large_base(&self, ino: u32) -> u64 {
        (self.p.large_chunk0() + u64::from(ino)) * self.p.chunk_blocks
    }
    /// The virtual address of a file's block 0.
    pub fn base_of(&self, ino: u32, i: &Inode) -> u64 {
        if i.flags & FLAG_LARGE != 0 {
            self.large_base(ino)
        } else {
            self.small_base(ino)
        }
    }
    fn area_blocks(&self, i: &Inode) -> u64 {
        if i.flags & FLAG_LARGE != 0 {
            self.p.chunk_blocks
        } else {
            u64::from(self.p.small_blocks)
        }
    }

    /// Damage a checking open (`open_checking`) noted: damaged OOB records, inodes that fail
    /// their checks.
    pub fn damage(&self) -> &[String] {
        &self.damage
    }

    pub fn params(&self) -> FormatParams {
        self.p
    }
    pub fn vsl(&self) -> &Vsl {
        &self.vsl
    }
    pub fn vsl_mut(&mut self) -> &mut Vsl {
        &mut self.vsl
    }
    pub fn now_ns(&self) -> Nanos {
        self.t
    }
    /// Submits the next request at device time `t` (a wall clock mapped to device time),
    /// which may be before the previous request's completion: requests then overlap on the
    /// device as concurrent ones do (the dies keep their own busy times).
    pub fn submit_at(&mut self, t: Nanos) {
        self.t = t;
    }
    /// Unmounts: writes lazily kept timestamps and syncs; gives the device back.
    pub fn unmount(mut self) -> FsResult<Nand> {
        self.sync_all()?;
        Ok(self.vsl.into_nand())
    }
    pub fn into_nand(self) -> Nand {
        self.vsl.into_nand()
    }

    fn inode(&self, ino: u32) -> FsResult<Inode> {
        self.inodes.get(&ino).copied().ok_or(FsError::NotFound)
    }

    pub fn getattr(&self, ino: u32) -> FsResult<Inode> {
        self.inode(ino)
    }

    /// Adds inode `ino`'s block (as in memory now) to the group being assembled.
    fn stage_inode(&mut self, ino: u32) {
        let vbn = 1 + u64::from(ino / INODES_PER_BLOCK);
        let idx = match self.group.iter().position(|(v, _)| *v == vbn) {
            Some(i) => i,
            None => {
                self.group.push((vbn, vec![0; BLOCK_BYTES]));
                self.group.len() - 1
            }
        };
        let first = (vbn as u32 - 1) * INODES_PER_BLOCK;
        encode_inode_block(&self.inodes, vbn, &mut self.group[idx].1);
        for k in 0..INODES_PER_BLOCK {
            self.dirty.remove(&(first + k));
        }
    }

    /// Adds directory `dir`'s entry slot `slot` (as `ino`, `name`) to the group.
    fn stage_dirent(
        &mut self,
        dir: u32,
        slot: u32,
        ino: u32,
        mode: u32,
        name: &[u8],
    ) -> FsResult<()> {
        let di = self.inode(dir)?;
        let vbn = self.base_of(dir, &di) + u64::from(slot / DIRENTS_PER_BLOCK);
        let idx = match self.group.iter().position(|(v, _)| *v == vbn) {
            Some(i) => i,
            None => {
                let mut b = vec![0u8; BLOCK_BYTES];
                self.t = self.vsl.read(self.t, vbn, &mut b)?;
                self.group.push((vbn, b));
                self.group.len() - 1
            }
        };
        let o = (slot % DIRENTS_PER_BLOCK) as usize * DIRENT_BYTES;
        encode_dirent(&mut self.group[idx].1[o..o + DIRENT_BYTES], ino, mode, name);
        Ok(())
    }

    /// Writes the assembled group atomically.
    fn commit(&mut self) -> FsResult<()> {
        let ext: Vec<(u64, &[u8])> = self.group.iter().map(|(v, b)| (*v, b.as_slice())).collect();
        let r = self.vsl.write_atomic(self.t, &ext);
        drop(ext);
        self.group.clear();
        self.t = r?;
        Ok(())
    }

    fn load_dir(&mut self, ino: u32) -> FsResult<()> {
        if self.dirs.contains_key(&ino) {
            return Ok(());
        }
        let i = self.inode(ino)?;
        if !i.is_dir() {
            return Err(FsError::NotDir);
        }
        let base = self.base_of(ino, &i);
        // Bounded by the area (`check_inode`), so that a size read from flash sizes nothing
        // larger than the directory's chunk.
        let blocks = (i.size / BLOCK_BYTES as u64).min(self.area_blocks(&i));
        let mut d = Dir {
            slots: (blocks * u64::from(DIRENTS_PER_BLOCK)) as u32,
            ..Dir::default()
        };
        let mut b = vec![0u8; BLOCK_BYTES];
        for k in 0..blocks {
            self.t = self.vsl.read(self.t, base + k, &mut b)?;
            for s in 0..DIRENTS_PER_BLOCK {
                let o = s as usize * DIRENT_BYTES;
                let slot = k as u32 * DIRENTS_PER_BLOCK + s;
                match decode_dirent(&b[o..o + DIRENT_BYTES], self.p.max_inodes) {
                    Ok(None) => {
                        d.free.insert(slot);
                    }
                    Ok(Some((n, name))) => {
                        if d.names.insert(name.to_vec(), (slot, n)).is_some() {
                            return Err(FsError::Corrupt(format!(
                                "directory {ino}: two entries named {:?}",
                                String::from_utf8_lossy(name)
                            )));
                        }
                    }
                    Err(e) => {
                        return Err(FsError::Corrupt(format!(
                            "directory {ino}, entry {slot} (virtual block {}): {e}",
                            base + k
                        )))
                    }
                }
            }
        }
        self.dirs.insert(ino, d);
        Ok(())
    }

    fn check_name(name: &[u8]) -> FsResult<()> {
        if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
            return Err(FsError::Invalid("bad name"));
        }
        if name.len() > NAME_MAX_BYTES {
            return Err(FsError::NameTooLong);
        }
        Ok(())
    }

    pub fn lookup(&mut self, parent: u32, name: &[u8]) -> FsResult<(u32, Inode)> {
        if name == b"." {
            return Ok((parent, self.inode(parent)?));
        }
        if name == b".." {
            let p = self.inode(parent)?.parent;
            return Ok((p, self.inode(p)?));
        }
        self.load_dir(parent)?;
        let (_, ino) = *self.dirs[&parent]
            .names
            .get(name)
            .ok_or(FsError::NotFound)?;
        Ok((ino, self.inode(ino)?))
    }

    /// Entries of a directory from position `pos` (`.` and `..` first); each with the position
    /// of the next one.
    pub fn readdir(&mut self, dir: u32, pos: u64, out: &mut Vec<(u64, DirEntry)>) -> FsResult<()> {
        self.load_dir(dir)?;
        out.clear();
        let i = self.inode(dir)?;
        if pos == 0 {
            out.push((
                1,
                DirEntry {
                    ino: dir,
                    mode: i.mode,
                    name: b".".to_vec(),
                },
            ));
        }
        if pos <= 1 {
            let p = i.parent;
            let pm = self.inode(p)?.mode;
            out.push((
                2,
                DirEntry {
                    ino: p,
                    mode: pm,
                    name: b"..".to_vec(),
                },
            ));
        }
        let mut by_slot: Vec<(u32, u32, &Vec<u8>)> = self.dirs[&dir]
            .names
            .iter()
            .map(|(n, &(slot, ino))| (slot, ino, n))
            .filter(|(slot, _, _)| u64::from(*slot) + 2 >= pos)
            .collect();
        by_slot.sort_unstable_by_key(|e| e.0);
        for (slot, ino, name) in by_slot {
            let mode = self.inodes.get(&ino).map_or(0, |x| x.mode);
            out.push((
                u64::from(slot) + 3,
                DirEntry {
                    ino,
                    mode,
                    name: name.clone(),
                },
            ));
        }
        Ok(())
    }

    fn alloc_inode(&mut self) -> FsResult<u32> {
        if let Some(&i) = self.free_inodes.iter().next() {
            self.free_inodes.remove(&i);
            return Ok(i);
        }
        if self.next_fresh >= self.p.max_inodes {
            return Err(FsError::NoSpace);
        }
        self.next_fresh += 1;
        Ok(self.next_fresh - 1)
    }

    /// A free slot of `dir` (growing it by a block if none): (slot, whether the dir grew).
    fn dir_slot(&mut self, dir: u32) -> FsResult<u32> {
        let d = self.dirs.get_mut(&dir).ok_or(FsError::NotDir)?;
        if let Some(&s) = d.free.iter().next() {
            d.free.remove(&s);
            return Ok(s);
        }
        let slot = d.slots;
        d.slots += DIRENTS_PER_BLOCK;
        for s in slot + 1..slot + DIRENTS_PER_BLOCK {
            d.free.insert(s);
        }
        let new_size = u64::from(d.slots / DIRENTS_PER_BLOCK) * BLOCK_BYTES as u64;
        let mut di = self.inode(dir)?;
        if new_size.div_ceil(BLOCK_BYTES as u64) > self.area_blocks(&di) {
            self.migrate(dir, new_size)?;
            di = self.inode(dir)?;
        }
        di.size = new_size;
        self.inodes.insert(dir, di);
        // The new block is staged (zeroed) so the group writes it whole.
        let vbn = self.base_of(dir, &di) + u64::from(slot / DIRENTS_PER_BLOCK);
        self.group.push((vbn, vec![0; BLOCK_BYTES]));
        Ok(slot)
    }

    /// Creates a file, directory or symlink `name` in `parent`.
    #[allow(clippy::too_many_arguments)] // the POSIX create's own arguments, each one needed
    pub fn create(
        &mut self,
        parent: u32,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
        now_ns: i64,
        symlink_target: Option<&[u8]>,
    ) -> FsResult<(u32, Inode)> {
        Self::check_name(name)?;
        self.load_dir(parent)?;
        if self.dirs[&parent].names.contains_key(name) {
            return Err(FsError::Exists);
        }
        if let Some(t) = symlink_target {
            if t.len() > BLOCK_BYTES * self.p.small_blocks as usize {
                return Err(FsError::NameTooLong);
            }
        }
        let ino = self.alloc_inode()?;
        let fmt = match mode & S_IFMT {
            0 => S_IFREG,
            f => f,
        };
        let gen = self.inodes.get(&ino).map_or(0, |i| i.generation) + 1;
        let inode = Inode {
            mode: fmt | (mode & 0o7777),
            nlink: 1,
            uid,
            gid,
            size: symlink_target.map_or(0, |t| t.len() as u64),
            atime_ns: now_ns,
            mtime_ns: now_ns,
            ctime_ns: now_ns,
            flags: 0,
            parent,
            generation: gen,
        };
        self.group.clear();
        let slot = match self.dir_slot(parent) {
            Ok(s) => s,
            Err(e) => {
                self.group.clear();
                self.free_inodes.insert(ino);
                return Err(e);
            }
        };
        self.inodes.insert(ino, inode);
        let mut pi = self.inode(parent)?;
        pi.mtime_ns = now_ns;
        pi.ctime_ns = now_ns;
        self.inodes.insert(parent, pi);
        self.stage_dirent(parent, slot, ino, inode.mode, name)?;
        self.stage_inode(ino);
        self.stage_inode(parent);
        if let Some(t) = symlink_target {
            let mut b = vec![0u8; t.len().div_ceil(BLOCK_BYTES) * BLOCK_BYTES];
            b[..t.len()].copy_from_slice(t);
            self.group.push((self.small_base(ino), b));
        }
        if let Err(e) = self.commit() {
            // Not written: undo the memory state.
            self.inodes.remove(&ino);
            self.free_inodes.insert(ino);
            self.dirs.remove(&parent);
            self.reload_inode(parent)?;
            return Err(e);
        }
        if fmt == S_IFDIR {
            self.dirs.insert(ino, Dir::default());
        }
        self.dirs
            .get_mut(&parent)
            .ok_or(FsError::NotDir)?
            .names
            .insert(name.to_vec(), (slot, ino));
        Ok((ino, inode))
    }

    pub fn readlink(&mut self, ino: u32) -> FsResult<Vec<u8>> {
        let i = self.inode(ino)?;
        if i.mode & S_IFMT != S_IFLNK {
            return Err(FsError::Invalid("not a symlink"));
        }
        if i.size > BLOCK_BYTES as u64 * u64::from(self.p.small_blocks) {
            return Err(FsError::Corrupt(format!(
                "symlink {ino}: a target of {} bytes",
                i.size
            )));
        }
        let mut out = vec![0u8; i.size as usize];
        self.read(ino, 0, &mut out)?;
        Ok(out)
    }

    /// A hard link `name` in `parent` to `ino`.
    pub fn link(&mut self, ino: u32, parent: u32, name: &[u8], now_ns: i64) -> FsResult<Inode> {
        Self::check_name(name)?;
        let mut i = self.inode(ino)?;
        if i.is_dir() {
            return Err(FsError::IsDir);
        }
        self.load_dir(parent)?;
        if self.dirs[&parent].names.contains_key(name) {
            return Err(FsError::Exists);
        }
        self.group.clear();
        let slot = self.dir_slot(parent)?;
        i.nlink += 1;
        i.ctime_ns = now_ns;
        self.inodes.insert(ino, i);
        self.stage_dirent(parent, slot, ino, i.mode, name)?;
        self.stage_inode(ino);
        self.stage_inode(parent);
        if let Err(e) = self.commit() {
            self.dirs.remove(&parent);
            i.nlink -= 1;
            self.inodes.insert(ino, i);
            self.reload_inode(parent)?;
            return Err(e);
        }
        self.dirs
            .get_mut(&parent)
            .ok_or(FsError::NotDir)?
            .names
            .insert(name.to_vec(), (slot, ino));
        Ok(i)
    }

    /// Removes the entry `name` (a non-directory, or an empty directory with `dir`).
    pub fn remove(&mut self, parent: u32, name: &[u8], dir: bool, now_ns: i64) -> FsResult<()> {
        let (ino, i) = self.lookup(parent, name)?;
        if name == b"." || name == b".." {
            return Err(FsError::Invalid("cannot remove . or .."));
        }
        if dir != i.is_dir() {
            return Err(if dir { FsError::NotDir } else { FsError::IsDir });
        }
        if dir {
            self.load_dir(ino)?;
            if !self.dirs[&ino].names.is_empty() {
                return Err(FsError::NotEmpty);
            }
        }
        let slot = self.dirs[&parent].names[name].0;
        self.group.clear();
        self.stage_dirent(parent, slot, 0, 0, name)?;
        let mut pi = self.inode(parent)?;
        pi.mtime_ns = now_ns;
        pi.ctime_ns = now_ns;
        self.inodes.insert(parent, pi);
        self.stage_inode(parent);
        let free_now = self.unlink_inode(ino, now_ns);
        self.stage_inode(ino);
        self.commit_or_reload(&[parent, ino])?;
        if let Some(d) = self.dirs.get_mut(&parent) {
            d.names.remove(name);
            d.free.insert(slot);
        }
        if free_now {
            self.release_inode_space(ino)?;
        }
        Ok(())
    }

    /// Drops one link of `ino` in memory; true if the inode is now free (to trim after the
    /// commit).
    fn unlink_inode(&mut self, ino: u32, now_ns: i64) -> bool {
        let Some(mut i) = self.inodes.get(&ino).copied() else {
            return false;
        };
        i.nlink = i.nlink.saturating_sub(1);
        i.ctime_ns = now_ns;
        if i.is_dir() {
            i.nlink = 0;
        }
        let open = self.open_count.get(&ino).copied().unwrap_or(0) > 0;
        if i.nlink == 0 && !open {
            let gen = i.generation;
            self.inodes.remove(&ino);
            // Keep the generation in memory only through `free_inodes`' reuse below.
            let _ = gen;
            true
        } else {
            self.inodes.insert(ino, i);
            false
        }
    }

    /// After a failed commit, the memory state may be ahead of flash: reload what it touched.
    fn commit_or_reload(&mut self, touched: &[u32]) -> FsResult<()> {
        match self.commit() {
            Ok(()) => Ok(()),
            Err(e) => {
                for &n in touched {
                    self.dirs.remove(&n);
                    self.reload_inode(n)?;
                }
                Err(e)
            }
        }
    }

    fn reload_inode(&mut self, ino: u32) -> FsResult<()> {
        let vbn = 1 + u64::from(ino / INODES_PER_BLOCK);
        let mut b = vec![0u8; BLOCK_BYTES];
        self.t = self.vsl.read(self.t, vbn, &mut b)?;
        let o = (ino % INODES_PER_BLOCK) as usize * INODE_BYTES;
        let i = Inode::decode(&b[o..o + INODE_BYTES])
            .and_then(|i| self.check_inode(ino, &i).map(|()| i))
            .map_err(|e| FsError::Corrupt(format!("inode {ino}: {e}")))?;
        if i.is_free() {
            self.inodes.remove(&ino);
        } else {
            self.inodes.insert(ino, i);
        }
        Ok(())
    }

    /// Trims a freed inode's blocks and puts it on the free list.
    fn release_inode_space(&mut self, ino: u32) -> FsResult<()> {
        let s = self.small_base(ino);
        self.t = self.vsl.trim(self.t, s, u64::from(self.p.small_blocks))?;
        let l = self.large_base(ino);
        self.t = self.vsl.trim(self.t, l, self.p.chunk_blocks)?;
        self.dirs.remove(&ino);
        self.free_inodes.insert(ino);
        Ok(())
    }

    /// Frees an allocated inode (an orphan) on flash and trims its blocks.
    fn free_inode(&mut self, ino: u32) -> FsResult<()> {
        self.inodes.remove(&ino);
        self.group.clear();
        self.stage_inode(ino);
        self.commit()?;
        self.release_inode_space(ino)
    }

    pub fn open_file(&mut self, ino: u32) -> FsResult<()> {
        self.inode(ino)?;
        *self.open_count.entry(ino).or_insert(0) += 1;
        Ok(())
    }

    pub fn release(&mut self, ino: u32) -> FsResult<()> {
        let c = self.open_count.entry(ino).or_insert(0);
        *c = c.saturating_sub(1);
        if *c == 0 {
            self.open_count.remove(&ino);
            if self.inodes.get(&ino).is_some_and(|i| i.nlink == 0) {
                self.free_inode(ino)?;
            }
        }
        Ok(())
    }

    /// Renames `name` in `parent` to `new_name` in `new_parent`, replacing a target of the same
    /// kind (an empty directory for a directory): one atomic group.
    pub fn rename(
        &mut self,
        parent: u32,
        name: &[u8],
        new_parent: u32,
        new_name: &[u8],
        now_ns: i64,
    ) -> FsResult<()> {
        Self::check_name(new_name)?;
        let (ino, i) = self.lookup(parent, name)?;
        self.load_dir(new_parent)?;
        if i.is_dir() {
            // No directory into its own subtree. The walk is bounded: parents read from a
            // damaged image may loop.
            let mut p = new_parent;
            for steps in 0.. {
                if p == ino {
                    return Err(FsError::Invalid("a directory into its own subtree"));
                }
                if p == ROOT_INO {
                    break;
                }
                if steps > self.inodes.len() {
                    return Err(FsError::Corrupt(format!(
                        "directory {new_parent}'s parents loop"
                    )));
                }
                p = self.inode(p)?.parent;
            }
        }
        let target = self.dirs[&new_parent].names.get(new_name).copied();
        if let Some((_, t)) = target {
            if t == ino {
                return Ok(());
            }
            let ti = self.inode(t)?;
            if ti.is_dir() != i.is_dir() {
                return Err(if ti.is_dir() {
                    FsError::IsDir
                } else {
                    FsError::NotDir
                });
            }
            if ti.is_dir() {
                self.load_dir(t)?;
                if !self.dirs[&t].names.is_empty() {
                    return Err(FsError::NotEmpty);
                }
            }
        }
        let old_slot = self.dirs[&parent].names[name].0;
        self.group.clear();
        let (new_slot, grew) = match target {
            Some((s, _)) => (s, false),
            None => (self.dir_slot(new_parent)?, true),
        };
        let _ = grew;
        self.stage_dirent(parent, old_slot, 0, 0, name)?;
        self.stage_dirent(new_parent, new_slot, ino, i.mode, new_name)?;
        let mut mi = i;
        mi.ctime_ns = now_ns;
        mi.parent = if i.is_dir() { new_parent } else { mi.parent };
        self.inodes.insert(ino, mi);
        for d in [parent, new_parent] {
            let mut di = self.inode(d)?;
            di.mtime_ns = now_ns;
            di.ctime_ns = now_ns;
            self.inodes.insert(d, di);
            self.stage_inode(d);
        }
        self.stage_inode(ino);
        let mut freed = None;
        if let Some((_, t)) = target {
            if self.unlink_inode(t, now_ns) {
                freed = Some(t);
            }
            self.stage_inode(t);
        }
        let mut touched = vec![parent, new_parent, ino];
        if let Some((_, t)) = target {
            touched.push(t);
        }
        self.commit_or_reload(&touched)?;
        if let Some(d) = self.dirs.get_mut(&parent) {
            d.names.remove(name);
            d.free.insert(old_slot);
        }
        if let Some(d) = self.dirs.get_mut(&new_parent) {
            d.free.remove(&new_slot);
            d.names.insert(new_name.to_vec(), (new_slot, ino));
        }
        if let Some(t) = freed {
            self.release_inode_space(t)?;
        }
        Ok(())
    }

    /// Reads from `off` into `out`; returns the bytes read (short at end of file).
    pub fn read(&mut self, ino: u32, off: u64, out: &mut [u8]) -> FsResult<usize> {
        let i = self.inode(ino)?;
        if i.is_dir() {
            return Err(FsError::IsDir);
        }
        if off >= i.size {
            return Ok(0);
        }
        let n = (i.size - off).min(out.len() as u64) as usize;
        let base = self.base_of(ino, &i);
        let bb = BLOCK_BYTES as u64;
        let mut done = 0usize;
        while done < n {
            let pos = off + done as u64;
            let in_blk = (pos % bb) as usize;
            let take = (BLOCK_BYTES - in_blk).min(n - done);
            let vbn = base + pos / bb;
            if in_blk == 0 && take == BLOCK_BYTES {
                // Whole blocks straight into the caller's buffer.
                let whole = (n - done) / BLOCK_BYTES;
                self.t = self
                    .vsl
                    .read(self.t, vbn, &mut out[done..done + whole * BLOCK_BYTES])?;
                done += whole * BLOCK_BYTES;
                continue;
            }
            self.t = self.vsl.read(self.t, vbn, &mut self.blk)?;
            out[done..done + take].copy_from_slice(&self.blk[in_blk..in_blk + take]);
            done += take;
        }
        Ok(n)
    }

    /// Moves a small file to its large chunk (before it grows past its slot to `new_size`).
    fn migrate(&mut self, ino: u32, new_size: u64) -> FsResult<()> {
        let i = self.inode(ino)?;
        if new_size.div_ceil(BLOCK_BYTES as u64) > self.p.chunk_blocks {
            return Err(FsError::TooLarge);
        }
        if i.flags & FLAG_LARGE != 0 {
            return Ok(());
        }
        let small = self.small_base(ino);
        let large = self.large_base(ino);
        let blocks = i
            .size
            .div_ceil(BLOCK_BYTES as u64)
            .min(u64::from(self.p.small_blocks));
        // Leftovers of an interrupted earlier move.
        self.t = self.vsl.trim(self.t, large, self.p.chunk_blocks)?;
        let mut b = vec![0u8; blocks as usize * BLOCK_BYTES];
        self.t = self.vsl.read(self.t, small, &mut b)?;
        let saved = std::mem::take(&mut self.group);
        let mut ni = i;
        ni.flags |= FLAG_LARGE;
        self.inodes.insert(ino, ni);
        self.group.push((large, b));
        self.stage_inode(ino);
        let r = self.commit();
        self.group = saved;
        if let Err(e) = r {
            self.inodes.insert(ino, i);
            return Err(e);
        }
        self.t = self
            .vsl
            .trim(self.t, small, u64::from(self.p.small_blocks))?;
        // A staged block of the old location (a directory's) moves too.
        for (v, _) in self.group.iter_mut() {
            if *v >= small && *v < small + u64::from(self.p.small_blocks) {
                *v = *v - small + large;
            }
        }
        Ok(())
    }

    /// Writes `data` at `off`; returns the bytes written.
    pub fn write(&mut self, ino: u32, off: u64, data: &[u8], now_ns: i64) -> FsResult<usize> {
        let mut i = self.inode(ino)?;
        if i.is_dir() {
            return Err(FsError::IsDir);
        }
        if data.is_empty() {
            return Ok(0);
        }
        let end = off
            .checked_add(data.len() as u64)
            .ok_or(FsError::TooLarge)?;
        if end.div_ceil(BLOCK_BYTES as u64) > self.area_blocks(&i) {
            self.migrate(ino, end)?;
            i = self.inode(ino)?;
        }
        let bb = BLOCK_BYTES as u64;
        // Per group: up to the atomic bound less one block for the inode.
        let max_group = (u64::from(self.vsl.max_atomic_blocks()) - 1) * bb;
        let mut done = 0usize;
        while done < data.len() {
            let pos = off + done as u64;
            let first = pos / bb;
            let room = max_group - (pos % bb);
            let take = (data.len() - done).min(room as usize);
            let stop = pos + take as u64;
            let last = (stop - 1) / bb;
            let blocks = (last - first + 1) as usize;
            let base = self.base_of(ino, &i);
            self.buf.resize(blocks * BLOCK_BYTES, 0);
            let head = (pos % bb) as usize;
            let tail = (stop % bb) as usize;
            // Edge blocks partly written: read what is there (zeros past the size).
            if head != 0 || (blocks == 1 && tail != 0) {
                self.t = self
                    .vsl
                    .read(self.t, base + first, &mut self.buf[..BLOCK_BYTES])?;
                zero_past(&mut self.buf[..BLOCK_BYTES], first * bb, i.size);
            }
            if tail != 0 && (blocks > 1 || head == 0) {
                let o = (blocks - 1) * BLOCK_BYTES;
                self.t = self
                    .vsl
                    .read(self.t, base + last, &mut self.buf[o..o + BLOCK_BYTES])?;
                zero_past(&mut self.buf[o..o + BLOCK_BYTES], last * bb, i.size);
            }
            self.buf[head..head + take].copy_from_slice(&data[done..done + take]);
            let grows = stop > i.size;
            let old = i;
            i.mtime_ns = now_ns;
            i.ctime_ns = now_ns;
            if grows {
                i.size = stop;
            }
            self.inodes.insert(ino, i);
            let r = if grows {
                // Size and data in one group.
                let vbn = 1 + u64::from(ino / INODES_PER_BLOCK);
                encode_inode_block(&self.inodes, vbn, &mut self.iblk);
                for k in 0..INODES_PER_BLOCK {
                    self.dirty
                        .remove(&((vbn as u32 - 1) * INODES_PER_BLOCK + k));
                }
                self.vsl.write_atomic(
                    self.t,
                    &[(base + first, &self.buf[..]), (vbn, &self.iblk[..])],
                )
            } else {
                self.dirty.insert(ino);
                self.vsl
                    .write_atomic(self.t, &[(base + first, &self.buf[..])])
            };
            match r {
                Ok(t) => self.t = t,
                Err(e) => {
                    self.inodes.insert(ino, old);
                    return Err(e.into());
                }
            }
            done += take;
        }
        Ok(done)
    }

    /// Changes attributes; a size change truncates or extends (sparse).
    pub fn setattr(&mut self, ino: u32, a: SetAttr, now_ns: i64) -> FsResult<Inode> {
        let mut i = self.inode(ino)?;
        if let Some(size) = a.size {
            if i.is_dir() {
                return Err(FsError::IsDir);
            }
            self.truncate(ino, size, now_ns)?;
            i = self.inode(ino)?;
        }
        if let Some(m) = a.mode {
            i.mode = (i.mode & S_IFMT) | (m & 0o7777);
        }
        if let Some(u) = a.uid {
            i.uid = u;
        }
        if let Some(g) = a.gid {
            i.gid = g;
        }
        if let Some(t) = a.atime_ns {
            i.atime_ns = t;
        }
        if let Some(t) = a.mtime_ns {
            i.mtime_ns = t;
        }
        i.ctime_ns = now_ns;
        self.inodes.insert(ino, i);
        if a.mode.is_some() || a.uid.is_some() || a.gid.is_some() {
            self.group.clear();
            self.stage_inode(ino);
            self.commit_or_reload(&[ino])?;
        } else {
            self.dirty.insert(ino);
        }
        Ok(i)
    }

    fn truncate(&mut self, ino: u32, size: u64, now_ns: i64) -> FsResult<()> {
        let mut i = self.inode(ino)?;
        if size.div_ceil(BLOCK_BYTES as u64) > self.area_blocks(&i) {
            self.migrate(ino, size)?;
            i = self.inode(ino)?;
        }
        let bb = BLOCK_BYTES as u64;
        let base = self.base_of(ino, &i);
        let old = i;
        self.group.clear();
        if size < i.size && !size.is_multiple_of(bb) {
            // The new last block, its tail zeroed, with the inode.
            let mut b = vec![0u8; BLOCK_BYTES];
            self.t = self.vsl.read(self.t, base + size / bb, &mut b)?;
            b[(size % bb) as usize..].fill(0);
            self.group.push((base + size / bb, b));
        }
        if size > i.size && !i.size.is_multiple_of(bb) {
            // Growing: the old last block's tail must read as zeros.
            let mut b = vec![0u8; BLOCK_BYTES];
            self.t = self.vsl.read(self.t, base + i.size / bb, &mut b)?;
            b[(i.size % bb) as usize..].fill(0);
            self.group.push((base + i.size / bb, b));
        }
        i.size = size;
        i.mtime_ns = now_ns;
        i.ctime_ns = now_ns;
        self.inodes.insert(ino, i);
        self.stage_inode(ino);
        if let Err(e) = self.commit() {
            self.inodes.insert(ino, old);
            return Err(e);
        }
        let keep = size.div_ceil(bb);
        let area = self.area_blocks(&i);
        if keep < area {
            self.t = self.vsl.trim(self.t, base + keep, area - keep)?;
        }
        Ok(())
    }

    /// Writes the inode's lazily kept timestamps and makes everything durable.
    pub fn fsync(&mut self, ino: u32) -> FsResult<()> {
        if self.dirty.contains(&ino) && self.inodes.contains_key(&ino) {
            self.group.clear();
            self.stage_inode(ino);
            self.commit()?;
        }
        self.t = self.vsl.sync(self.t)?;
        Ok(())
    }

    /// Writes every dirty inode and syncs.
    pub fn sync_all(&mut self) -> FsResult<()> {
        while let Some(&ino) = self.dirty.iter().next() {
            self.dirty.remove(&ino);
            if self.inodes.contains_key(&ino) {
                self.group.clear();
                self.stage_inode(ino);
                self.commit()?;
            }
        }
        self.t = self.vsl.sync(self.t)?;
        Ok(())
    }

    pub fn statfs(&self) -> StatFs {
        let cap = self.vsl.capacity_blocks();
        StatFs {
            block_bytes: BLOCK_BYTES as u32,
            blocks: cap,
            blocks_free: cap.saturating_sub(self.vsl.mapped_blocks()),
            files: u64::from(self.p.max_inodes),
            files_free: u64::from(self.p.max_inodes) - self.inodes.len() as u64,
            name_max: NAME_MAX_BYTES as u32,
        }
    }

    /// Blocks of a file that hold data (the rest of its size reads as zeros).
    pub fn mapped_blocks_of(&self, ino: u32) -> FsResult<u64> {
        let i = self.inode(ino)?;
        let base = self.base_of(ino, &i);
        let mut v = Vec::new();
        self.vsl
            .map()
            .mapped_in(base, base + self.area_blocks(&i), &mut v);
        Ok(v.len() as u64)
    }

    /// Checks invariants 1-3 and the VSL's, and every mapped block against its checksum;
    /// returns the problems found, the damage a checking open noted first.
    pub fn fsck(&mut self) -> FsResult<Vec<String>> {
        let mut problems = self.damage.clone();
        if let Err(e) = self.vsl.check() {
            problems.push(format!("vsl: {e}"));
        }
        let (bad, t) = self.vsl.scrub(self.t)?;
        self.t = t;
        for b in bad {
            problems.push(format!(
                "virtual block {} ({}) at {}: {}",
                b.vbn,
                self.describe_block(b.vbn),
                self.describe_unit(b.unit),
                b.what
            ));
        }
        let mut links: FnvHashMap<u32, u32> = FnvHashMap::default();
        let dirs: Vec<u32> = self
            .inodes
            .iter()
            .filter(|(_, i)| i.is_dir())
            .map(|(&n, _)| n)
            .collect();
        for d in &dirs {
            self.dirs.remove(d);
            match self.load_dir(*d) {
                Ok(()) => {}
                Err(e @ (FsError::Corrupt(_) | FsError::Vsl(VslError::Corrupt { .. }))) => {
                    problems.push(format!("dir {d}: {e}"));
                    continue;
                }
                Err(e) => return Err(e),
            }
            for (name, &(_, ino)) in &self.dirs[d].names {
                match self.inodes.get(&ino) {
                    None => problems.push(format!(
                        "dir {d}: entry {:?} names free inode {ino}",
                        String::from_utf8_lossy(name)
                    )),
                    Some(i) => {
                        *links.entry(ino).or_insert(0) += 1;
                        if i.is_dir() && i.parent != *d {
                            problems
                                .push(format!("dir {ino}: parent {} but entry in {d}", i.parent));
                        }
                    }
                }
            }
        }
        for (&ino, i) in &self.inodes {
            let want = if ino == ROOT_INO {
                1
            } else {
                links.get(&ino).copied().unwrap_or(0)
            };
            let open = self.open_count.contains_key(&ino);
            if i.nlink != want && !(open && i.nlink == 0) {
                problems.push(format!("inode {ino}: nlink {} but {want} entries", i.nlink));
            }
        }
        for (s, n) in self.vsl.map().extents() {
            let mut v = s;
            while v < s + n {
                let (owner, end) = self.owner_of(v);
                let end = end.min(s + n);
                if let Some((ino, base)) = owner {
                    match self.inodes.get(&ino) {
                        None => {
                            problems.push(format!("blocks {v}..{end} mapped for free inode {ino}"))
                        }
                        Some(i) => {
                            let keep = base + i.size.div_ceil(BLOCK_BYTES as u64);
                            if self.base_of(ino, i) != base {
                                problems.push(format!(
                                    "inode {ino}: blocks {v}..{end} mapped in its other area"
                                ));
                            } else if end > keep {
                                problems.push(format!(
                                    "inode {ino}: blocks {}..{end} mapped past its size {}",
                                    keep.max(v),
                                    i.size
                                ));
                            }
                        }
                    }
                }
                v = end;
            }
        }
        Ok(problems)
    }
}

/// Encodes inode-table block `vbn` from the inodes in memory.
fn encode_inode_block(inodes: &FnvHashMap<u32, Inode>, vbn: u64, b: &mut [u8]) {
    let first = (vbn as u32 - 1) * INODES_PER_BLOCK;
    for k in 0..INODES_PER_BLOCK {
        let n = first + k;
        let o = k as usize * INODE_BYTES;
        match inodes.get(&n) {
            Some(i) if n != 0 => i.encode(&mut b[o..o + INODE_BYTES]),
            _ => b[o..o + INODE_BYTES].fill(0),
        }
    }
}

fn zero_past(block: &mut [u8], block_start: u64, size: u64) {
    if size <= block_start {
        block.fill(0);
    } else if size < block_start + block.len() as u64 {
        block[(size - block_start) as usize..].fill(0);
    }
}

/// What mounting found and repaired.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct MountReport {
    pub vsl: crate::vsl::RecoveryReport,
    pub orphans_freed: u64,
    pub blocks_trimmed: u64,
}

/// Refuses a superblock of another format version (before its CRC, whose place changed).
fn check_version(b: &[u8]) -> Result<(), String> {
    let mut m = [0u8; 8];
    m.copy_from_slice(&b[0..8]);
    if u64::from_le_bytes(m) != SB_MAGIC {
        return Err("no DFS superblock in block 0".into());
    }
    let v = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
    if v != SB_VERSION {
        return Err(format!(
            "DFS format version {v}; this build reads version {SB_VERSION} (checksums on \
             every structure){}",
            if v < SB_VERSION {
                ": copy the files off with the build that wrote the image"
            } else {
                ""
            }
        ));
    }
    Ok(())
}

fn encode_superblock(b: &mut [u8], p: &FormatParams) {
    b.fill(0);
    b[0..8].copy_from_slice(&SB_MAGIC.to_le_bytes());
    b[8..12].copy_from_slice(&SB_VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&(BLOCK_BYTES as u32).to_le_bytes());
    b[16..24].copy_from_slice(&p.chunk_blocks.to_le_bytes());
    b[24..28].copy_from_slice(&p.max_inodes.to_le_bytes());
    b[28..32].copy_from_slice(&p.small_blocks.to_le_bytes());
    b[32..36].copy_from_slice(&ROOT_INO.to_le_bytes());
    let crc = crc_without(b, SB_CRC_AT);
    b[SB_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
}

/// The superblock's CRC: the block's last 4 bytes, over all the others.
const SB_CRC_AT: usize = BLOCK_BYTES - 4;

fn decode_superblock(b: &[u8]) -> Result<FormatParams, String> {
    let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    check_version(b)?;
    if crc_without(b, SB_CRC_AT) != u32_at(SB_CRC_AT) {
        return Err("the superblock fails its CRC".into());
    }
    if u32_at(12) as usize != BLOCK_BYTES {
        return Err(format!("superblock block size {}", u32_at(12)));
    }
    let mut c = [0u8; 8];
    c.copy_from_slice(&b[16..24]);
    Ok(FormatParams {
        chunk_blocks: u64::from_le_bytes(c),
        max_inodes: u32_at(24),
        small_blocks: u32_at(28),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_of_an_inode_and_a_directory_entry_is_under_its_crc() {
        let i = Inode {
            mode: S_IFREG | 0o644,
            nlink: 1,
            size: 12345,
            parent: 1,
            ..Inode::default()
        };
        let mut b = [0u8; INODE_BYTES];
        i.encode(&mut b);
        assert_eq!(Inode::decode(&b), Ok(i));
        let mut e = [0u8; DIRENT_BYTES];
        encode_dirent(&mut e, 7, S_IFREG, b"name");
        assert_eq!(decode_dirent(&e, 16), Ok(Some((7, &b"name"[..]))));
        for k in 0..INODE_BYTES {
            let mut bad = b;
            bad[k] ^= 0x08;
            assert!(Inode::decode(&bad).is_err(), "inode byte {k}");
            let mut bad = e;
            bad[k] ^= 0x08;
            assert!(decode_dirent(&bad, 16).is_err(), "entry byte {k}");
        }
        let mut free = [0u8; DIRENT_BYTES];
        assert_eq!(decode_dirent(&free, 16), Ok(None));
        free[255] = 1;
        assert!(
            decode_dirent(&free, 16).is_err(),
            "a free slot is all zeros"
        );
    }

    #[test]
    fn every_byte_of_the_superblock_is_under_its_crc() {
        let p = FormatParams::default();
        let mut b = vec![0u8; BLOCK_BYTES];
        encode_superblock(&mut b, &p);
        assert_eq!(decode_superblock(&b), Ok(p));
        for k in (0..BLOCK_BYTES).step_by(13).chain([BLOCK_BYTES - 1]) {
            let mut bad = b.clone();
            bad[k] ^= 0x02;
            assert!(decode_superblock(&bad).is_err(), "superblock byte {k}");
        }
    }
}
