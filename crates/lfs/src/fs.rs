//! The log-structured file system (docs/lfs.md).
//!
//! Why one module of this size: the namespace, the logs, the cleaner and checkpointing all
//! update the same in-memory tables (files' block maps, NAT, SIT, the reverse map, the free and
//! prefree segments) under one set of invariants; split apart, each piece would need the
//! others' internals. The on-flash formats are apart, in `layout.rs`.
//!
//! Everything is kept in memory (files' block maps, directories, NAT, SIT, the reverse map of
//! the main area) and rebuilt at mount from the last checkpoint plus roll-forward. Durable
//! state changes only in three ways: a checkpoint (everything), an fsync (one file's data and
//! nodes, recovered by roll-forward), and writes that nothing durable references yet.

use std::collections::{BTreeMap, BTreeSet};

use fnv::FnvHashMap;
use ftl::{BlockDevice, FtlError};
use nand::Nanos;

use crate::layout::*;

#[derive(Debug, thiserror::Error)]
pub enum LfsError {
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
    Invalid(String),
    #[error("file too large (at most {MAX_FILE_BLOCKS} blocks, half with data checksums)")]
    TooLarge,
    #[error("no space left (segments or node ids)")]
    NoSpace,
    #[error("not an LFS image: {0}")]
    Format(String),
    #[error("corrupt file system: {0}")]
    Corrupt(String),
    /// A data block read back is not what was written (data checksums).
    #[error("inode {ino}, block {block} at address {addr}: data fails its checksum")]
    DataChecksum { ino: u32, block: u64, addr: u32 },
    #[error("device: {0}")]
    Device(#[from] FtlError),
}

impl LfsError {
    /// The errno a POSIX caller sees.
    pub fn errno(&self) -> i32 {
        match self {
            LfsError::NotFound => 2,
            LfsError::Exists => 17,
            LfsError::NotDir => 20,
            LfsError::IsDir => 21,
            LfsError::NotEmpty => 39,
            LfsError::NameTooLong => 36,
            LfsError::Invalid(_) => 22,
            LfsError::TooLarge => 27,
            LfsError::NoSpace => 28,
            _ => 5,
        }
    }
    /// A power loss (the emulator's cut) ended the operation.
    pub fn is_power_loss(&self) -> bool {
        matches!(self, LfsError::Device(FtlError::Flash(e)) if e.is_media_error()
            || matches!(e, nand::NandError::PowerLost | nand::NandError::PoweredOff))
    }
}

pub type LfsResult<T> = Result<T, LfsError>;

pub const ROOT_INO: u32 = 1;

/// Victim selection of the host cleaner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Cleaning {
    /// Fewest valid blocks.
    Greedy,
    /// Largest (1 - u) / 2u x age (LFS (SOSP 1991); F2FS's background policy).
    CostBenefit,
}

/// Format parameters.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub mode: Mode,
    /// Pages per segment (ALFS: the AMF segment).
    pub seg_pages: u32,
    /// Node ids (inodes + direct nodes); 0 picks one per 2 device pages (`table_sizes`).
    pub max_nids: u32,
    /// Keep every data block's CRC-32 beside its address (checked on every read; the largest
    /// file is then half as large). Recorded in the superblock.
    pub data_checksums: bool,
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

/// One entry of `readdir`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u32,
    pub mode: u32,
    pub name: Vec<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StatFs {
    pub block_bytes: u32,
    pub blocks: u64,
    pub blocks_free: u64,
    pub files: u64,
    pub files_free: u64,
    pub name_max: u32,
}

/// Pages the file system wrote, by purpose, and its other work (this instance).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Bytes applications asked to write.
    pub user_bytes: u64,
    pub data_pages: u64,
    pub node_pages: u64,
    /// NAT and SIT blocks.
    pub meta_pages: u64,
    pub checkpoint_pages: u64,
    /// Pages copied by the cleaner (data and node).
    pub cleaned_pages: u64,
    pub victims: u64,
    pub checkpoints: u64,
    pub fsyncs: u64,
    pub segments_trimmed: u64,
}

impl Stats {
    pub fn fs_pages(&self) -> u64 {
        self.data_pages + self.node_pages + self.meta_pages + self.checkpoint_pages
    }
    /// Bytes written to the block device / bytes applications wrote.
    pub fn fs_waf(&self) -> f64 {
        if self.user_bytes == 0 {
            0.0
        } else {
            (self.fs_pages() * BLOCK_BYTES as u64) as f64 / self.user_bytes as f64
        }
    }
}

/// What mount found.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct MountReport {
    pub checkpoint_version: u64,
    /// Checkpoint packs with a whole header but not every block whole and of its version (a
    /// power cut while the pack was written; alfs keeps a torn pack in its checkpoint segment
    /// until the segment is trimmed, so later mounts count it again): skipped.
    pub torn_checkpoints: u64,
    pub rolled_forward_nodes: u64,
    pub orphans_freed: u64,
    pub stray_nodes_dropped: u64,
}

/// Segment kinds (SIT `kind`, 0 free); logs are numbered `kind - 1`.
const HOT_DATA: u32 = 1; // directories
const WARM_DATA: u32 = 2; // files
const COLD_DATA: u32 = 3; // cleaned data
const NODE: u32 = 4;
const META: u32 = 5; // ALFS: NAT and SIT blocks
const LOGS: usize = 5;
const NONE: u32 = u32::MAX;
const NO_OWNER: u64 = u64::MAX;
const NODE_BIT: u64 = 1 << 31;
/// Dirty data blocks kept in memory before they go to the log (merges partial-block writes
/// and turns a file's dirty blocks into one sequential run).
const CACHE_BLOCKS: usize = 256;
/// Dirty nodes that force a checkpoint (bounds what a checkpoint writes).
const MAX_DIRTY_NODES: usize = 1024;
/// F2FS's periodic checkpoint (`cp_interval`, 60 s), on the device's virtual clock.
const CP_INTERVAL_NS: u64 = 60_000_000_000;

#[derive(Clone, Copy, Debug)]
struct Log {
    seg: u32,
    off: u32,
}

#[derive(Debug, Default)]
struct File {
    inode: Inode,
    /// Block index -> address (0: a hole).
    addrs: Vec<u32>,
    /// Block index -> CRC-32 of the block as written (data checksums; else 0), beside `addrs`.
    crcs: Vec<u32>,
    /// Direct nodes' nids.
    nids: Vec<u32>,
    /// Nodes to write: 0 the inode, k + 1 direct node k.
    dirty: BTreeSet<u32>,
    /// A namespace change (create, link, unlink, rename) not yet checkpointed: fsync then
    /// checkpoints, since roll-forward recovers file contents only.
    ns_dirty: bool,
    open: u32,
}

#[derive(Debug, Default)]
struct Dir {
    names: FnvHashMap<Vec<u8>, (u32, u32)>,
    free: BTreeSet<u32>,
    slots: u32,
}

/// The file system. See the module documentation and docs/lfs.md.
pub struct Lfs {
    dev: Box<dyn BlockDevice>,
    sb: Superblock,
    t: Nanos,
    /// The last durable checkpoint.
    cp: Checkpoint,
    /// Where nodes keep block addresses (and, with data checksums, their CRCs).
    slots: Slots,
    /// The CRC of each meta block as last written (its last 4 bytes), for the checkpoint's
    /// `meta_crc`.
    meta_crcs: Vec<u32>,
    files: FnvHashMap<u32, File>,
    dirs: FnvHashMap<u32, Dir>,
    nat: Vec<u32>,
    nat_dirty: BTreeSet<u32>,
    /// Direct node nid -> (inode, index).
    node_of: FnvHashMap<u32, (u32, u32)>,
    free_nids: BTreeSet<u32>,
    /// Freed since the last checkpoint: reusable after the next.
    pending_nids: Vec<u32>,
    sit: Vec<SitEntry>,
    sit_dirty: BTreeSet<u32>,
    free_segs: BTreeSet<u32>,
    /// Segments without valid blocks, free after the next checkpoint (the last durable one
    /// may still reference their blocks).
    prefree: BTreeSet<u32>,
    owner: Vec<u64>,
    logs: [Log; LOGS],
    /// Meta blocks referenced per segment (ALFS meta log).
    meta_refs: Vec<u32>,
    cache: BTreeMap<(u32, u64), Vec<u8>>,
    /// Cached blocks that have no address yet (space they will take).
    cache_new: u64,
    valid_total: u64,
    /// ALFS: (checkpoint segment, next page); the segment is trimmed before its page 0.
    cp_cursor: (u32, u32),
    /// Where the last durable checkpoint is.
    cp_addr: u32,
    last_cp_ns: Nanos,
    dirty_calls: u64,
    dirty_counted: usize,
    pub cleaning: Cleaning,
    stats: Stats,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Lfs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lfs")
            .field("device", &self.dev.name())
            .field("superblock", &self.sb)
            .field("checkpoint", &self.cp.version)
            .field("files", &self.files.len())
            .finish_non_exhaustive()
    }
}

/// Node ids, NAT blocks and SIT blocks of a `mode` format on `capacity_pages` with segments
/// of `seg_pages` (`max_nids` 0: one node id per 2 pages, the most that files holding data
/// can use, since each takes an inode and a data block at least), or why that geometry cannot
/// be formatted: block addresses are 32-bit, and the metadata must fit (f2fs: two packs and
/// two copies of every meta block before the main area; alfs: a checkpoint pack within a
/// checkpoint segment and the meta log's segments within the main area).
pub fn table_sizes(
    mode: Mode,
    capacity_pages: u64,
    seg_pages: u32,
    max_nids: u32,
) -> Result<(u32, u32, u32), String> {
    if capacity_pages > u64::from(u32::MAX) {
        return Err(format!(
            "{capacity_pages} pages: block addresses are 32-bit (fewer than 2^32 pages, 16 TiB)"
        ));
    }
    let sp = u64::from(seg_pages.max(1));
    let segments = capacity_pages / sp;
    let sit_blocks = segments.div_ceil(u64::from(SIT_PER_BLOCK));
    let n = if max_nids == 0 {
        (capacity_pages / 2).max(1024)
    } else {
        u64::from(max_nids)
    };
    let nat_blocks = n.div_ceil(u64::from(NAT_PER_BLOCK));
    let nids = nat_blocks * u64::from(NAT_PER_BLOCK);
    let n_meta = nat_blocks + sit_blocks;
    let k = cp_blocks(n_meta);
    let fits = match mode {
        Mode::F2fs => (1 + 2 * k + 2 * n_meta < capacity_pages)
            .then_some(())
            .ok_or(format!(
                "{n_meta} NAT and SIT blocks, twice, and two checkpoint packs of {k} blocks do not \
                 fit in {capacity_pages} pages"
            )),
        Mode::Alfs if k > sp => Err(format!(
            "a checkpoint pack of {k} blocks (for {n_meta} NAT and SIT blocks) exceeds a \
             checkpoint segment of {sp} pages; use larger segments or fewer node ids"
        )),
        Mode::Alfs => (3 + 2 * n_meta.div_ceil(sp) + 1 < segments)
            .then_some(())
            .ok_or(format!(
                "the meta log for {n_meta} NAT and SIT blocks does not fit in {segments} \
                 segments of {sp} pages"
            )),
    };
    fits?;
    match u32::try_from(nids) {
        Ok(nids) => Ok((nids, nat_blocks as u32, sit_blocks as u32)),
        Err(_) => Err(format!("{nids} node ids: node ids are 32-bit")),
    }
}

/// Host memory of the metadata tables ALFS keeps (its "TIMB": NAT and SIT blocks, as on
/// flash), for a device of `capacity_bytes` with segments of `seg_bytes`, with format's
/// default node ids: (ceil(ceil(pages / 2) / 1,023) + ceil(segments / 255)) x 4 KiB. An error
/// for a geometry format refuses.
pub fn host_table_bytes(capacity_bytes: u64, seg_bytes: u64) -> Result<u64, String> {
    let pages = capacity_bytes / BLOCK_BYTES as u64;
    let seg = u32::try_from((seg_bytes / BLOCK_BYTES as u64).max(1))
        .map_err(|_| format!("segments of {seg_bytes} bytes"))?;
    let (_, nat, sit) = table_sizes(Mode::Alfs, pages, seg, 0)?;
    Ok((u64::from(nat) + u64::from(sit)) * BLOCK_BYTES as u64)
}

fn enc_owner(id: u32, idx: u64) -> u64 {
    (u64::from(id) << 32) | idx
}

fn mode_is(mode: u32, kind: u32) -> bool {
    mode & S_IFMT == kind
}

impl Lfs {
    // ----- format and mount -----

    /// Formats `dev`: superblock, root directory, first checkpoint.
    pub fn format(dev: Box<dyn BlockDevice>, p: Params, now_ns: i64) -> LfsResult<Lfs> {
        let cap = dev.capacity_pages();
        if p.seg_pages < 4 {
            return Err(LfsError::Invalid(format!(
                "segments of {} pages are too small (at least 4)",
                p.seg_pages
            )));
        }
        // Refused before any table is sized from these numbers.
        let (max_nids, nat_blocks, sit_blocks) =
            table_sizes(p.mode, cap, p.seg_pages, p.max_nids).map_err(LfsError::Invalid)?;
        let segments = (cap / u64::from(p.seg_pages)) as u32; // < 2^32 pages: table_sizes
        let n_meta = nat_blocks + sit_blocks;
        let main_seg0 = match p.mode {
            Mode::F2fs => {
                (1 + 2 * cp_blocks(u64::from(n_meta)) as u32 + 2 * n_meta).div_ceil(p.seg_pages)
            }
            Mode::Alfs => 3,
        };
        let sb = Superblock {
            mode: p.mode,
            seg_pages: p.seg_pages,
            segments,
            main_seg0,
            max_nids,
            nat_blocks,
            sit_blocks,
            data_checksums: p.data_checksums,
        };
        let mut fs = Lfs::empty(dev, sb);
        if fs.user_blocks() < 4 * u64::from(p.seg_pages) {
            return Err(LfsError::Invalid(format!(
                "the device holds {segments} segments of {} pages: too few for the logs, the cleaner's reserve and files",
                p.seg_pages
            )));
        }
        let mut b = vec![0u8; BLOCK_BYTES];
        sb.encode(&mut b);
        fs.t = fs.dev.write(fs.t, 0, &b, true)?;
        fs.stats.meta_pages += 1;
        fs.free_segs = (main_seg0..segments).collect();
        fs.free_nids = (2..max_nids).collect();
        fs.nat_dirty = (0..nat_blocks).collect();
        fs.sit_dirty = (0..sit_blocks).collect();
        let root = Inode {
            mode: S_IFDIR | 0o755,
            nlink: 1,
            atime_ns: now_ns,
            mtime_ns: now_ns,
            ctime_ns: now_ns,
            parent: ROOT_INO,
            ..Inode::default()
        };
        fs.add_file(ROOT_INO, root);
        fs.dirs.insert(ROOT_INO, Dir::default());
        fs.checkpoint()?;
        Ok(fs)
    }

    fn empty(dev: Box<dyn BlockDevice>, sb: Superblock) -> Lfs {
        let cap = dev.capacity_pages() as usize;
        Lfs {
            dev,
            sb,
            t: 0,
            cp: Checkpoint {
                version: 0,
                rf_addr: 0,
                user_bytes: 0,
                meta: vec![0; sb.n_meta() as usize],
                meta_crc: 0,
            },
            slots: sb.slots(),
            meta_crcs: vec![0; sb.n_meta() as usize],
            files: FnvHashMap::default(),
            dirs: FnvHashMap::default(),
            nat: vec![0; sb.max_nids as usize],
            nat_dirty: BTreeSet::new(),
            node_of: FnvHashMap::default(),
            free_nids: BTreeSet::new(),
            pending_nids: Vec::new(),
            sit: vec![SitEntry::default(); sb.segments as usize],
            sit_dirty: BTreeSet::new(),
            free_segs: BTreeSet::new(),
            prefree: BTreeSet::new(),
            owner: vec![NO_OWNER; cap],
            logs: [Log { seg: NONE, off: 0 }; LOGS],
            meta_refs: vec![0; sb.segments as usize],
            cache: BTreeMap::new(),
            cache_new: 0,
            valid_total: 0,
            cp_cursor: (1, 0),
            cp_addr: 0,
            last_cp_ns: 0,
            dirty_calls: 0,
            dirty_counted: 0,
            cleaning: Cleaning::Greedy,
            stats: Stats::default(),
            buf: vec![0; BLOCK_BYTES],
        }
    }

    /// Mounts the file system on `dev`: the newest checkpoint, roll-forward of fsynced nodes,
    /// then the in-memory tables rebuilt from the nodes.
    pub fn mount(dev: Box<dyn BlockDevice>) -> LfsResult<(Lfs, MountReport)> {
        let mut b = vec![0u8; BLOCK_BYTES];
        let mut dev = dev;
        let t = dev.read(0, 0, &mut b)?;
        let sb = Superblock::decode(&b).map_err(LfsError::Format)?;
        sb.validate(dev.capacity_pages()).map_err(|e| {
            LfsError::Format(format!("{e} ({sb:?}, {} pages)", dev.capacity_pages()))
        })?;
        let mut fs = Lfs::empty(dev, sb);
        fs.t = t;
        let mut rep = MountReport::default();
        let (cp, cp_addr) = fs.newest_checkpoint(&mut rep)?;
        if cp.meta.len() != sb.n_meta() as usize {
            return Err(LfsError::Corrupt(format!(
                "the checkpoint lists {} meta blocks, the superblock {}",
                cp.meta.len(),
                sb.n_meta()
            )));
        }
        rep.checkpoint_version = cp.version;
        // ALFS: the next checkpoint goes to the other checkpoint segment (trimmed first), so
        // that no page below a segment's write pointer is written again.
        let seg = cp_addr / sb.seg_pages;
        fs.cp_cursor = (3 - seg.clamp(1, 2), 0);
        fs.cp_addr = cp_addr;
        fs.stats.user_bytes = 0;
        fs.load_meta(&cp)?;
        fs.cp = cp;
        // Roll-forward: the node log after the checkpoint, up to the last completed fsync.
        let mut chain = Vec::new();
        let mut a = fs.cp.rf_addr;
        let mut end = 0;
        while a != 0 && fs.in_main(a) && chain.len() < fs.owner.len() {
            fs.read_block(a)?;
            match Footer::decode(&fs.buf) {
                Some(f) if f.cp_version == fs.cp.version && f.nid < sb.max_nids => {
                    chain.push((f.nid, a));
                    if f.flags & FLAG_END != 0 {
                        end = chain.len();
                    }
                    a = f.next_addr;
                }
                _ => break,
            }
        }
        for &(nid, a) in &chain[..end] {
            fs.nat[nid as usize] = a;
        }
        rep.rolled_forward_nodes = end as u64;
        fs.rebuild(&mut rep)?;
        // Segments: valid counts from the nodes; kinds and ages from the SIT.
        for s in sb.main_seg0..sb.segments {
            let e = &mut fs.sit[s as usize];
            let valid = e.valid;
            if valid == 0 && fs.meta_refs[s as usize] == 0 {
                *e = SitEntry::default();
                fs.free_segs.insert(s);
            } else if fs.meta_refs[s as usize] > 0 {
                e.kind = META;
            } else if !(HOT_DATA..=NODE).contains(&e.kind) {
                e.kind = COLD_DATA;
            }
        }
        fs.free_nids = (2..sb.max_nids)
            .filter(|&n| fs.nat[n as usize] == 0)
            .collect();
        fs.sit_dirty = (0..sb.sit_blocks).collect();
        if sb.mode == Mode::Alfs {
            // Segments written after the checkpoint and not recovered: erase before reuse.
            let free: Vec<u32> = fs.free_segs.iter().copied().collect();
            for s in free {
                fs.trim_segment(s)?;
            }
        }
        if end > 0 || rep.orphans_freed > 0 || rep.stray_nodes_dropped > 0 {
            fs.checkpoint()?;
        }
        fs.stats = Stats::default();
        Ok((fs, rep))
    }

    /// The newest whole checkpoint pack and its address (f2fs: of packs A and B; alfs: of every
    /// pack in the two checkpoint segments). A pack whose header is whole but not every one of
    /// its blocks (a cut while it was written) is skipped and counted in `rep`.
    fn newest_checkpoint(&mut self, rep: &mut MountReport) -> LfsResult<(Checkpoint, u32)> {
        let sb = self.sb;
        let k = sb.cp_blocks();
        let (regions, step) = match sb.mode {
            Mode::F2fs => (vec![(1, 1 + k), (1 + k, 1 + 2 * k)], k),
            Mode::Alfs => (
                vec![
                    (sb.seg_pages, 2 * sb.seg_pages),
                    (2 * sb.seg_pages, 3 * sb.seg_pages),
                ],
                1,
            ),
        };
        let mut best: Option<(Checkpoint, u32)> = None;
        let mut pack = Vec::with_capacity(k as usize * BLOCK_BYTES);
        for (start, end) in regions {
            let mut a = start;
            while a < end {
                self.read_block(a)?;
                let whole = match Checkpoint::header_blocks(&self.buf) {
                    // A pack never crosses its region (alfs: a checkpoint segment).
                    Some(n) if n == k as usize && a + k <= end => {
                        pack.clear();
                        pack.extend_from_slice(&self.buf);
                        for j in 1..k {
                            self.read_block(a + j)?;
                            pack.extend_from_slice(&self.buf);
                        }
                        let c = Checkpoint::decode_pack(&pack);
                        rep.torn_checkpoints += u64::from(c.is_none());
                        c
                    }
                    // Not this file system's pack size, or past the region's end.
                    Some(_) | None => None,
                };
                match whole {
                    Some(c) => {
                        if best.as_ref().is_none_or(|(b, _)| c.version > b.version) {
                            best = Some((c, a));
                        }
                        a += k;
                    }
                    None => a += step,
                }
            }
        }
        best.ok_or_else(|| LfsError::Corrupt("no valid checkpoint".into()))
    }

    /// The NAT and SIT from the meta blocks checkpoint `cp` names, each checked against its own
    /// CRC and all of them against the checkpoint's `meta_crc` (a stale copy is intact too).
    fn load_meta(&mut self, cp: &Checkpoint) -> LfsResult<()> {
        let sb = self.sb;
        for (i, &a) in cp.meta.iter().enumerate() {
            let ok = match sb.mode {
                Mode::F2fs => a == sb.meta_slot(i as u32, 0) || a == sb.meta_slot(i as u32, 1),
                Mode::Alfs => self.in_main(a),
            };
            if !ok {
                return Err(LfsError::Corrupt(format!(
                    "checkpoint {}: meta block {i} at {a}, outside its place",
                    cp.version
                )));
            }
            self.read_block(a)?;
            if !sealed(&self.buf) {
                return Err(LfsError::Corrupt(format!(
                    "checkpoint {}: meta block {i} at {a} fails its CRC",
                    cp.version
                )));
            }
            self.meta_crcs[i] = u32_at(&self.buf, BLOCK_BYTES - 4);
            let i = i as u32;
            if i < sb.nat_blocks {
                for j in 0..NAT_PER_BLOCK {
                    let n = i * NAT_PER_BLOCK + j;
                    let a = u32_at(&self.buf, 4 * j as usize);
                    if n < sb.max_nids {
                        let ok = a == 0 || self.in_main(a);
                        self.nat[n as usize] = if ok { a } else { u32::MAX };
                    }
                }
            } else {
                let k = i - sb.nat_blocks;
                for j in 0..SIT_PER_BLOCK {
                    let s = k * SIT_PER_BLOCK + j;
                    if s < sb.segments {
                        self.sit[s as usize] =
                            SitEntry::decode(&self.buf[SIT_BYTES * j as usize..]);
                    }
                }
            }
            if sb.mode == Mode::Alfs {
                self.meta_refs[(a / sb.seg_pages) as usize] += 1;
            }
        }
        if meta_crc(&self.meta_crcs) != cp.meta_crc {
            return Err(LfsError::Corrupt(format!(
                "checkpoint {}: its NAT and SIT blocks (at {:?}) are intact but not the ones it \
                 was written with (a stale or replaced copy)",
                cp.version, cp.meta
            )));
        }
        if let Some(n) = self.nat.iter().position(|&a| a == u32::MAX) {
            return Err(LfsError::Corrupt(format!(
                "checkpoint {}: the NAT puts node {n} outside the device",
                cp.version
            )));
        }
        Ok(())
    }

    /// Whether address `a` lies in the main area (data, nodes, ALFS's meta log).
    fn in_main(&self, a: u32) -> bool {
        let sp = u64::from(self.sb.seg_pages);
        let a = u64::from(a);
        a >= u64::from(self.sb.main_seg0) * sp && a < u64::from(self.sb.segments) * sp
    }

    /// Reads every node the NAT names and rebuilds files, directories, the reverse map and
    /// the segments' valid counts.
    fn rebuild(&mut self, rep: &mut MountReport) -> LfsResult<()> {
        for e in &mut self.sit {
            e.valid = 0;
        }
        let (inodes, mut dnodes) = self.read_nodes()?;
        let sl = self.slots;
        for (ino, a, inode, (iaddrs, icrcs), inids) in inodes {
            self.claim_node(a, ino)?;
            let blocks = inode.size.div_ceil(BLOCK_BYTES as u64);
            let n_nodes = sl.nodes_for(blocks);
            let mut file = File {
                inode,
                ..File::default()
            };
            let (mut addrs, mut crcs) = (iaddrs, icrcs);
            for (k, &nid) in inids.iter().enumerate() {
                if nid == 0 {
                    continue;
                }
                let ok = k < n_nodes
                    && dnodes
                        .get(&nid)
                        .is_some_and(|d| d.1 == ino && d.2 == k as u32 + 1);
                if !ok {
                    return Err(LfsError::Corrupt(format!(
                        "inode {ino}'s direct node {k} (node {nid}) is missing or not its own"
                    )));
                }
                let Some((na, _, _, (daddrs, dcrcs))) = dnodes.remove(&nid) else {
                    continue;
                };
                self.claim_node(na, nid)?;
                self.node_of.insert(nid, (ino, k as u32 + 1));
                file.nids.resize(k + 1, 0);
                file.nids[k] = nid;
                let at = sl.inode_addrs + k * sl.node_addrs;
                addrs.resize(at + sl.node_addrs, 0);
                crcs.resize(at + sl.node_addrs, 0);
                addrs[at..].copy_from_slice(&daddrs);
                crcs[at..].copy_from_slice(&dcrcs);
            }
            addrs.truncate(blocks as usize);
            crcs.truncate(blocks as usize);
            for (idx, &da) in addrs.iter().enumerate() {
                if da != 0 {
                    if !self.in_main(da) || self.owner[da as usize] != NO_OWNER {
                        return Err(LfsError::Corrupt(format!(
                            "inode {ino} block {idx} at {da}: outside the main area or shared"
                        )));
                    }
                    self.claim(da, enc_owner(ino, idx as u64));
                }
            }
            file.addrs = addrs;
            file.crcs = crcs;
            self.files.insert(ino, file);
        }
        // Direct nodes no inode names (left by a truncate rolled forward): dropped.
        for (nid, _) in dnodes {
            self.nat[nid as usize] = 0;
            rep.stray_nodes_dropped += 1;
        }
        if !self.files.contains_key(&ROOT_INO) {
            return Err(LfsError::Corrupt("no root directory".into()));
        }
        let dirs: Vec<u32> = self
            .files
            .iter()
            .filter(|(_, f)| f.inode.is_dir())
            .map(|(&i, _)| i)
            .collect();
        for d in dirs {
            self.load_dir(d)?;
        }
        // Orphans: unlinked while open when the power went.
        let orphans: Vec<u32> = self
            .files
            .iter()
            .filter(|(_, f)| f.inode.nlink == 0)
            .map(|(&i, _)| i)
            .collect();
        for ino in orphans {
            self.free_inode(ino);
            rep.orphans_freed += 1;
        }
        Ok(())
    }

    /// Reads every node the NAT names (mount's step 4): the inodes as (number, address,
    /// attributes, (addresses, CRCs), direct nodes' ids) and the direct nodes by id as
    /// (address, inode, index, (addresses, CRCs)). Each node is checked: its CRC, its id, an
    /// inode's attributes (a CRC-valid inode still must, before its size sizes anything).
    #[allow(clippy::type_complexity)]
    fn read_nodes(
        &mut self,
    ) -> LfsResult<(
        Vec<(u32, u32, Inode, (Vec<u32>, Vec<u32>), Vec<u32>)>,
        FnvHashMap<u32, (u32, u32, u32, (Vec<u32>, Vec<u32>))>,
    )> {
        let sl = self.slots;
        let slots = |b: &[u8], inode: bool, n: usize| -> (Vec<u32>, Vec<u32>) {
            (0..n).map(|k| sl.get(b, inode, k)).unzip()
        };
        let mut inodes = Vec::new();
        let mut dnodes = FnvHashMap::default();
        for nid in 1..self.sb.max_nids {
            let a = self.nat[nid as usize];
            if a == 0 {
                continue;
            }
            self.read_block(a)?;
            let f = Footer::decode(&self.buf).ok_or_else(|| {
                LfsError::Corrupt(format!("node {nid} at block {a} fails its CRC"))
            })?;
            if f.nid != nid {
                return Err(LfsError::Corrupt(format!(
                    "block {a} holds node {}, the NAT says node {nid}",
                    f.nid
                )));
            }
            if f.index == 0 {
                let i = Inode::decode(&self.buf);
                self.check_inode(nid, &i)?;
                let nids = (0..INODE_NIDS)
                    .map(|k| u32_at(&self.buf, INODE_NIDS_AT + 4 * k))
                    .collect();
                inodes.push((nid, a, i, slots(&self.buf, true, sl.inode_addrs), nids));
            } else {
                let s = slots(&self.buf, false, sl.node_addrs);
                dnodes.insert(nid, (a, f.ino, f.index, s));
            }
        }
        Ok((inodes, dnodes))
    }

    /// What an inode may hold: a known type, a size this file system's files can have.
    fn check_inode(&self, ino: u32, i: &Inode) -> LfsResult<()> {
        let known = mode_is(i.mode, S_IFREG) || i.is_dir() || mode_is(i.mode, S_IFLNK);
        let max = self.slots.max_file_blocks() * BLOCK_BYTES as u64;
        if !known || i.size > max || i.parent >= self.sb.max_nids {
            return Err(LfsError::Corrupt(format!(
                "inode {ino}: mode {:o}, size {}, parent {}",
                i.mode, i.size, i.parent
            )));
        }
        Ok(())
    }

    /// Claims node block `a` for node `nid` (a block two NAT entries name is damage).
    fn claim_node(&mut self, a: u32, nid: u32) -> LfsResult<()> {
        if self.owner[a as usize] != NO_OWNER {
            return Err(LfsError::Corrupt(format!(
                "node {nid} at {a}: the block is another node's or data's too"
            )));
        }
        self.claim(a, enc_owner(nid, NODE_BIT));
        Ok(())
    }

    fn load_dir(&mut self, ino: u32) -> LfsResult<()> {
        let size = self.files[&ino].inode.size;
        let mut d = Dir {
            slots: (size / DIRENT_BYTES as u64) as u32,
            ..Dir::default()
        };
        let mut b = vec![0u8; BLOCK_BYTES];
        for blk in 0..size.div_ceil(BLOCK_BYTES as u64) {
            self.read_file_block(ino, blk, &mut b)?;
            for j in 0..DIRENTS_PER_BLOCK {
                let slot = blk as u32 * DIRENTS_PER_BLOCK + j;
                if slot >= d.slots {
                    break;
                }
                let e = &b[j as usize * DIRENT_BYTES..][..DIRENT_BYTES];
                let bad = |why: &str| {
                    LfsError::Corrupt(format!(
                        "directory {ino}, entry {slot} (block {blk}): {why}"
                    ))
                };
                let Some((child, name)) = decode_dirent(e).map_err(bad)? else {
                    d.free.insert(slot);
                    continue;
                };
                if !self.files.contains_key(&child) {
                    return Err(bad(&format!("names inode {child}, which is free")));
                }
                if d.names.insert(name.to_vec(), (slot, child)).is_some() {
                    return Err(bad("a second entry of that name"));
                }
            }
        }
        self.dirs.insert(ino, d);
        Ok(())
    }

    /// Gives the device back after a final checkpoint.
    pub fn unmount(mut self) -> LfsResult<Box<dyn BlockDevice>> {
        self.checkpoint()?;
        Ok(self.dev)
    }

    /// The device as it is (after a power cut: to recover from its flash).
    pub fn into_device(self) -> Box<dyn BlockDevice> {
        self.dev
    }

    pub fn device(&self) -> &dyn BlockDevice {
        &*self.dev
    }
    pub fn device_mut(&mut self) -> &mut dyn BlockDevice {
        &mut *self.dev
    }
    pub fn superblock(&self) -> Superblock {
        self.sb
    }
    pub fn stats(&self) -> Stats {
        self.stats
    }
    pub fn checkpoint_version(&self) -> u64 {
        self.cp.version
    }
    pub fn now_ns(&self) -> Nanos {
        self.t
    }
    /// The next request is submitted at `t` (no earlier than the last one completed).
    pub fn submit_at(&mut self, t: Nanos) {
        self.t = self.t.max(t);
    }
    /// Every block the durable state is read from: the superblock, the last checkpoint pack, the
    /// NAT and SIT blocks it names, every node the NAT names and every file's data blocks on
    /// flash (not the cache's). What a mount and the files depend on, for tools and tests that
    /// ask whether damage touched the file system.
    pub fn live_blocks(&self) -> Vec<u32> {
        let mut v = vec![0];
        v.extend(self.cp_addr..self.cp_addr + self.sb.cp_blocks());
        v.extend(&self.cp.meta);
        v.extend(self.nat.iter().copied().filter(|&a| a != 0));
        for f in self.files.values() {
            v.extend(f.addrs.iter().copied().filter(|&a| a != 0));
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Free segments (not counting those freed at the next checkpoint).
    pub fn free_segments(&self) -> usize {
        self.free_segs.len()
    }

    // ----- blocks and segments -----

    fn read_block(&mut self, a: u32) -> LfsResult<()> {
        let mut b = std::mem::take(&mut self.buf);
        let r = self.dev.read(self.t, u64::from(a), &mut b);
        self.buf = b;
        self.t = r?;
        Ok(())
    }

    fn claim(&mut self, a: u32, owner: u64) {
        self.owner[a as usize] = owner;
        self.sit[(a / self.sb.seg_pages) as usize].valid += 1;
        self.valid_total += 1;
    }

    fn invalidate(&mut self, a: u32) {
        if a == 0 {
            return;
        }
        debug_assert_ne!(self.owner[a as usize], NO_OWNER, "block {a} freed twice");
        self.owner[a as usize] = NO_OWNER;
        let s = a / self.sb.seg_pages;
        let e = &mut self.sit[s as usize];
        assert!(e.valid > 0, "segment {s}: more blocks freed than written");
        e.valid -= 1;
        self.valid_total -= 1;
        self.sit_dirty.insert(s / SIT_PER_BLOCK);
        if e.valid == 0 && !self.logs.iter().any(|l| l.seg == s) {
            self.prefree.insert(s);
        }
    }

    /// Hard reserve: segments the cleaner and a checkpoint may need (one per log, the meta
    /// log's compaction, and slack).
    fn hard_reserve(&self) -> u32 {
        LOGS as u32 + 3 + self.meta_segments()
    }
    fn gc_low(&self) -> u32 {
        self.hard_reserve() + 2
    }
    fn gc_high(&self) -> u32 {
        self.hard_reserve() + 4
    }

    /// Blocks (data and nodes) the file system lets applications fill: the main area less the
    /// cleaner's reserve and 5% over-provisioning (F2FS's default `overprovision_ratio`).
    fn user_blocks(&self) -> u64 {
        let main = self.sb.segments - self.sb.main_seg0;
        let op = (main / 20).max(2);
        // The logs' open segments and the ALFS meta log are not the cleaner's to use.
        let open = LOGS as u32 + self.meta_segments();
        u64::from(main.saturating_sub(self.gc_high() + open + op)) * u64::from(self.sb.seg_pages)
    }

    /// Segments the ALFS meta log may hold at once (two generations and the open one).
    fn meta_segments(&self) -> u32 {
        match self.sb.mode {
            Mode::F2fs => 0,
            Mode::Alfs => 2 * self.sb.n_meta().div_ceil(self.sb.seg_pages) + 1,
        }
    }

    fn open_segment(&mut self, log: usize) -> LfsResult<()> {
        let Some(s) = self.free_segs.pop_first() else {
            return Err(LfsError::NoSpace);
        };
        self.sit[s as usize] = SitEntry {
            valid: 0,
            kind: log as u32 + 1,
            mtime: self.cp.version,
        };
        self.sit_dirty.insert(s / SIT_PER_BLOCK);
        self.logs[log] = Log { seg: s, off: 0 };
        Ok(())
    }

    /// The next address of `log` (opening a segment if it has none); a log whose segment
    /// fills opens the next at once, so that its position is always known (the node log's
    /// roll-forward chain names it).
    fn alloc(&mut self, log: usize) -> LfsResult<u32> {
        if self.logs[log].seg == NONE {
            self.open_segment(log)?;
        }
        let l = self.logs[log];
        let a = l.seg * self.sb.seg_pages + l.off;
        self.logs[log].off += 1;
        if self.logs[log].off == self.sb.seg_pages {
            // Closed: if all it holds dies before it is claimed, the next checkpoint finds it.
            self.logs[log].seg = NONE;
            self.open_segment(log)?;
        }
        Ok(a)
    }

    fn log_position(&mut self, log: usize) -> LfsResult<u32> {
        if self.logs[log].seg == NONE {
            self.open_segment(log)?;
        }
        let l = self.logs[log];
        Ok(l.seg * self.sb.seg_pages + l.off)
    }

    /// Writes `self.buf` at the next address of `log`, owned by `owner`.
    fn append(&mut self, log: usize, owner: u64) -> LfsResult<u32> {
        let a = self.alloc(log)?;
        self.t = self.dev.write(self.t, u64::from(a), &self.buf, false)?;
        self.claim(a, owner);
        Ok(a)
    }

    fn trim_segment(&mut self, s: u32) -> LfsResult<()> {
        debug_assert!(!self.logs.iter().any(|l| l.seg == s));
        let sp = u64::from(self.sb.seg_pages);
        self.t = self.dev.trim(self.t, u64::from(s) * sp, sp)?;
        self.stats.segments_trimmed += 1;
        Ok(())
    }

    // ----- nodes -----

    fn add_file(&mut self, ino: u32, inode: Inode) {
        let mut f = File {
            inode,
            ..File::default()
        };
        f.dirty.insert(0);
        self.files.insert(ino, f);
    }

    fn alloc_nid(&mut self) -> LfsResult<u32> {
        self.free_nids.pop_first().ok_or(LfsError::NoSpace)
    }

    fn free_nid(&mut self, nid: u32) {
        let a = self.nat[nid as usize];
        self.invalidate(a);
        self.nat[nid as usize] = 0;
        self.nat_dirty.insert(nid / NAT_PER_BLOCK);
        self.node_of.remove(&nid);
        self.pending_nids.push(nid);
    }

    /// Encodes node `index` of `ino` into `self.buf` (footer excluded).
    fn encode_node(&mut self, ino: u32, index: u32) {
        let f = &self.files[&ino];
        let sl = self.slots;
        let b = &mut self.buf;
        b.fill(0);
        let slot = |i: usize| {
            let a = f.addrs.get(i).copied().unwrap_or(0);
            (a, if a == 0 { 0 } else { f.crcs[i] })
        };
        if index == 0 {
            f.inode.encode(b);
            for k in 0..sl.inode_addrs {
                let (a, c) = slot(k);
                sl.put(b, true, k, a, c);
            }
            for (k, &n) in f.nids.iter().enumerate() {
                put32(b, INODE_NIDS_AT + 4 * k, n);
            }
        } else {
            let base = sl.inode_addrs + (index as usize - 1) * sl.node_addrs;
            for k in 0..sl.node_addrs {
                let (a, c) = slot(base + k);
                sl.put(b, false, k, a, c);
            }
        }
    }

    /// Appends `self.buf` as node `nid` to the node log with `footer` (next address filled
    /// in) and points the NAT at it.
    fn append_node(&mut self, nid: u32, ino: u32, index: u32, flags: u32) -> LfsResult<u32> {
        let log = NODE as usize - 1;
        let a = self.alloc(log)?;
        let next = self.log_position(log)?;
        Footer {
            nid,
            ino,
            index,
            flags,
            cp_version: self.cp.version,
            next_addr: next,
        }
        .encode(&mut self.buf);
        self.t = self.dev.write(self.t, u64::from(a), &self.buf, false)?;
        self.claim(a, enc_owner(nid, NODE_BIT));
        let old = std::mem::replace(&mut self.nat[nid as usize], a);
        self.invalidate(old);
        self.nat_dirty.insert(nid / NAT_PER_BLOCK);
        Ok(a)
    }

    /// Writes the dirty nodes of `ino` (direct nodes first, the inode last).
    fn write_nodes(&mut self, ino: u32, flags: u32) -> LfsResult<()> {
        let Some(f) = self.files.get_mut(&ino) else {
            return Ok(());
        };
        let mut dirty = std::mem::take(&mut f.dirty);
        if flags != 0 {
            dirty.insert(0); // the inode carries the fsync's end mark
        }
        let mut order: Vec<u32> = dirty.iter().copied().filter(|&i| i != 0).collect();
        if dirty.contains(&0) {
            order.push(0);
        }
        let n = order.len();
        for (k, index) in order.into_iter().enumerate() {
            let nid = if index == 0 {
                ino
            } else {
                self.files[&ino].nids[index as usize - 1]
            };
            self.encode_node(ino, index);
            let fl = if k + 1 == n {
                flags
            } else {
                flags & FLAG_FSYNC
            };
            self.append_node(nid, ino, index, fl)?;
            self.stats.node_pages += 1;
        }
        Ok(())
    }

    /// An upper bound of the dirty nodes, counted exactly every 64 calls (counting walks every
    /// file); an operation dirties at most 4 nodes (a data write spans at most 2 direct
    /// nodes and the inode; a rename touches 3 inodes), so the bound grows by 4 per call.
    fn dirty_nodes_bound(&mut self) -> usize {
        if self.dirty_calls.is_multiple_of(64) {
            self.dirty_counted = self.files.values().map(|f| f.dirty.len()).sum();
        }
        self.dirty_calls += 1;
        self.dirty_counted + 4 * (self.dirty_calls % 64) as usize
    }

    // ----- data -----

    fn read_file_block(&mut self, ino: u32, blk: u64, out: &mut [u8]) -> LfsResult<()> {
        if let Some(c) = self.cache.get(&(ino, blk)) {
            out.copy_from_slice(c);
            return Ok(());
        }
        let a = self.files[&ino]
            .addrs
            .get(blk as usize)
            .copied()
            .unwrap_or(0);
        if a == 0 {
            out.fill(0);
        } else {
            self.t = self.dev.read(self.t, u64::from(a), out)?;
            if self.slots.checksums() && crc32fast::hash(out) != self.files[&ino].crcs[blk as usize]
            {
                return Err(LfsError::DataChecksum {
                    ino,
                    block: blk,
                    addr: a,
                });
            }
        }
        Ok(())
    }

    /// The cached block `blk` of `ino`, read in if need be (`whole`: about to be overwritten
    /// entirely, so not read).
    fn cached(&mut self, ino: u32, blk: u64, whole: bool) -> LfsResult<&mut Vec<u8>> {
        if !self.cache.contains_key(&(ino, blk)) {
            if blk >= self.slots.max_file_blocks() {
                return Err(LfsError::TooLarge);
            }
            let f = &self.files[&ino];
            let mapped = f.addrs.get(blk as usize).is_some_and(|&a| a != 0);
            if !mapped {
                // Space for a new block, and for the direct node that will map it.
                let need_node = u64::from(self.slots.node_index(blk) > f.nids.len() as u32);
                if self.valid_total + self.cache_new + 1 + need_node > self.user_blocks() {
                    return Err(LfsError::NoSpace);
                }
                self.cache_new += 1;
            }
            let mut b = vec![0u8; BLOCK_BYTES];
            if !whole {
                self.read_file_block(ino, blk, &mut b)?;
            }
            self.cache.insert((ino, blk), b);
        }
        Ok(self.cache.get_mut(&(ino, blk)).expect("just inserted"))
    }

    /// Writes cached blocks (of `only`, or all) to their logs: directories to the hot data
    /// log, files to the warm one.
    fn flush_data(&mut self, only: Option<u32>) -> LfsResult<()> {
        let keys: Vec<(u32, u64)> = match only {
            Some(ino) => self
                .cache
                .range((ino, 0)..=(ino, u64::MAX))
                .map(|(k, _)| *k)
                .collect(),
            None => self.cache.keys().copied().collect(),
        };
        for (ino, blk) in keys {
            let Some(data) = self.cache.remove(&(ino, blk)) else {
                continue;
            };
            let Some(f) = self.files.get(&ino) else {
                continue;
            };
            let old = f.addrs.get(blk as usize).copied().unwrap_or(0);
            if old == 0 {
                self.cache_new -= 1;
            }
            if blk >= f.inode.size.div_ceil(BLOCK_BYTES as u64) {
                continue; // truncated meanwhile
            }
            let log = if f.inode.is_dir() {
                HOT_DATA
            } else {
                WARM_DATA
            } as usize
                - 1;
            self.ensure_node(ino, blk)?;
            self.buf.copy_from_slice(&data);
            let a = self.append(log, enc_owner(ino, blk))?;
            self.stats.data_pages += 1;
            self.invalidate(old);
            // The CRC goes into the node that maps the block, written after it (fsync,
            // checkpoint): a node never names a block without the block's CRC.
            let crc = if self.slots.checksums() {
                crc32fast::hash(&data)
            } else {
                0
            };
            self.set_addr(ino, blk, a, crc);
        }
        Ok(())
    }

    /// Makes sure the direct node that maps block `blk` exists.
    fn ensure_node(&mut self, ino: u32, blk: u64) -> LfsResult<()> {
        let index = self.slots.node_index(blk);
        while self.files[&ino].nids.len() < index as usize {
            let nid = self.alloc_nid()?;
            let f = self.files.get_mut(&ino).expect("file");
            f.nids.push(nid);
            let k = f.nids.len() as u32;
            f.dirty.insert(k);
            f.dirty.insert(0);
            self.node_of.insert(nid, (ino, k));
        }
        Ok(())
    }

    fn set_addr(&mut self, ino: u32, blk: u64, a: u32, crc: u32) {
        let index = self.slots.node_index(blk);
        let f = self.files.get_mut(&ino).expect("file");
        if f.addrs.len() <= blk as usize {
            f.addrs.resize(blk as usize + 1, 0);
            f.crcs.resize(blk as usize + 1, 0);
        }
        f.addrs[blk as usize] = a;
        f.crcs[blk as usize] = crc;
        f.dirty.insert(index);
    }

    // ----- cleaning and checkpoints -----

    /// Before an operation that writes: cleans when free segments run low, then checkpoints
    /// (freeing the victims); also the periodic checkpoint.
    fn ensure_space(&mut self) -> LfsResult<()> {
        if self.cache.len() >= CACHE_BLOCKS {
            self.flush_data(None)?;
        }
        let free = self.free_segs.len() as u32;
        // What the cache and the dirty nodes will take when written.
        let pending =
            (self.cache.len() + self.dirty_nodes_bound()).div_ceil(self.sb.seg_pages as usize);
        if free >= self.gc_low() + pending as u32 {
            if self.dirty_nodes_bound() > MAX_DIRTY_NODES
                || self.t.saturating_sub(self.last_cp_ns) > CP_INTERVAL_NS
            {
                self.checkpoint()?;
            }
            return Ok(());
        }
        self.flush_data(None)?;
        // Clean until `gc_high` segments are free. Victims turn free only at a checkpoint, so
        // one is taken whenever the free segments near the hard reserve (F2FS's foreground GC
        // does the same).
        while (self.free_segs.len() as u32) < self.gc_high() {
            if (self.free_segs.len() as u32) <= self.hard_reserve() && !self.prefree.is_empty() {
                self.checkpoint()?;
                continue;
            }
            match self.victim() {
                Some(v) => self.clean(v)?,
                None if !self.prefree.is_empty() => self.checkpoint()?,
                None => break,
            }
        }
        self.checkpoint()?;
        if (self.free_segs.len() as u32) < self.hard_reserve() {
            return Err(LfsError::NoSpace);
        }
        Ok(())
    }

    fn victim(&self) -> Option<u32> {
        let sp = self.sb.seg_pages;
        let mut best: Option<(f64, u32)> = None;
        for s in self.sb.main_seg0..self.sb.segments {
            let e = &self.sit[s as usize];
            if !(HOT_DATA..=NODE).contains(&e.kind)
                || e.valid >= sp
                || self.prefree.contains(&s)
                || self.free_segs.contains(&s)
                || self.logs.iter().any(|l| l.seg == s)
            {
                continue;
            }
            let u = f64::from(e.valid) / f64::from(sp);
            let score = match self.cleaning {
                Cleaning::Greedy => -f64::from(e.valid),
                Cleaning::CostBenefit => {
                    let age = (self.cp.version.saturating_sub(e.mtime) + 1) as f64;
                    (1.0 - u) / (2.0 * u.max(1e-9)) * age
                }
            };
            if best.is_none_or(|(b, _)| score > b) {
                best = Some((score, s));
            }
        }
        best.map(|(_, s)| s)
    }

    /// Moves the valid blocks of segment `v` (data to the cold data log, nodes to the node
    /// log, both copied as they are on flash); `v` becomes prefree.
    fn clean(&mut self, v: u32) -> LfsResult<()> {
        let sp = self.sb.seg_pages;
        for a in v * sp..(v + 1) * sp {
            let o = self.owner[a as usize];
            if o == NO_OWNER {
                continue;
            }
            let (id, idx) = ((o >> 32) as u32, o & 0xFFFF_FFFF);
            self.read_block(a)?;
            if idx == NODE_BIT {
                let f = Footer::decode(&self.buf).ok_or_else(|| {
                    LfsError::Corrupt(format!("node block {a} fails its CRC while cleaning"))
                })?;
                debug_assert_eq!(f.nid, id);
                self.append_node(f.nid, f.ino, f.index, 0)?;
            } else {
                // Copied as it is on flash, so its CRC stays the one its node holds (a block
                // damaged on flash stays detectably damaged).
                let crc = self.files[&id].crcs[idx as usize];
                let n = self.append(COLD_DATA as usize - 1, o)?;
                self.invalidate(a);
                self.set_addr(id, idx, n, crc);
            }
            self.stats.cleaned_pages += 1;
        }
        self.stats.victims += 1;
        debug_assert_eq!(self.sit[v as usize].valid, 0);
        Ok(())
    }

    /// Writes everything dirty and a checkpoint block; then frees prefree segments (trimmed
    /// whole) and node ids freed since the last one.
    pub fn checkpoint(&mut self) -> LfsResult<()> {
        self.flush_data(None)?;
        let inos: Vec<u32> = self
            .files
            .iter()
            .filter(|(_, f)| !f.dirty.is_empty())
            .map(|(&i, _)| i)
            .collect();
        for ino in inos {
            self.write_nodes(ino, 0)?;
        }
        for f in self.files.values_mut() {
            f.ns_dirty = false;
        }
        let rf_addr = self.log_position(NODE as usize - 1)?;
        let n_meta = self.sb.n_meta();
        let mut meta = self.cp.meta.clone();
        let mut dirty: BTreeSet<u32> = self.nat_dirty.iter().copied().collect();
        dirty.extend(self.sit_dirty.iter().map(|&k| self.sb.nat_blocks + k));
        if self.sb.mode == Mode::Alfs {
            // Meta log compaction: when old meta segments pile up, rewrite every meta block so
            // that all older meta segments free at once.
            let in_use = (self.sb.main_seg0..self.sb.segments)
                .filter(|&s| self.meta_refs[s as usize] > 0)
                .count() as u32;
            if in_use > n_meta.div_ceil(self.sb.seg_pages) + 1 {
                dirty = (0..n_meta).collect();
            }
        }
        for &i in &dirty {
            self.encode_meta(i);
            self.meta_crcs[i as usize] = u32_at(&self.buf, BLOCK_BYTES - 4);
            let a = match self.sb.mode {
                Mode::F2fs => {
                    let copy = u32::from(meta[i as usize] == self.sb.meta_slot(i, 0));
                    let a = self.sb.meta_slot(i, copy);
                    self.t = self.dev.write(self.t, u64::from(a), &self.buf, false)?;
                    a
                }
                Mode::Alfs => {
                    let a = self.alloc(META as usize - 1)?;
                    self.t = self.dev.write(self.t, u64::from(a), &self.buf, false)?;
                    a
                }
            };
            meta[i as usize] = a;
            self.stats.meta_pages += 1;
        }
        self.t = self.dev.flush(self.t)?;
        let cp = Checkpoint {
            version: self.cp.version + 1,
            rf_addr,
            user_bytes: self.cp.user_bytes + self.stats.user_bytes,
            meta,
            meta_crc: meta_crc(&self.meta_crcs),
        };
        let mut pack = Vec::new();
        cp.encode_pack(&mut pack);
        let k = self.sb.cp_blocks();
        let a = match self.sb.mode {
            Mode::F2fs => self.sb.cp_pack_addr(cp.version),
            Mode::Alfs => {
                let sp = self.sb.seg_pages;
                if self.cp_cursor.1 + k > sp {
                    self.cp_cursor = (3 - self.cp_cursor.0, 0);
                }
                if self.cp_cursor.1 == 0 {
                    // The other checkpoint segment holds the newest checkpoint.
                    let sp64 = u64::from(sp);
                    self.t = self
                        .dev
                        .trim(self.t, u64::from(self.cp_cursor.0) * sp64, sp64)?;
                }
                let a = self.cp_cursor.0 * sp + self.cp_cursor.1;
                self.cp_cursor.1 += k;
                a
            }
        };
        // Header first, the last block with FUA, then a flush: the pack is durable only
        // whole, and a mount refuses it torn (`Checkpoint::decode_pack`).
        for (j, blk) in pack.chunks(BLOCK_BYTES).enumerate() {
            let fua = j + 1 == k as usize;
            self.t = self.dev.write(self.t, u64::from(a + j as u32), blk, fua)?;
        }
        self.t = self.dev.flush(self.t)?;
        self.cp_addr = a;
        self.stats.checkpoint_pages += u64::from(k);
        self.stats.checkpoints += 1;
        // Durable: what the old checkpoint held may go.
        if self.sb.mode == Mode::Alfs {
            for (&old, &new) in self.cp.meta.iter().zip(&cp.meta) {
                if old != new {
                    if old != 0 {
                        self.meta_refs[(old / self.sb.seg_pages) as usize] -= 1;
                    }
                    self.meta_refs[(new / self.sb.seg_pages) as usize] += 1;
                }
            }
            let meta_log = self.logs[META as usize - 1].seg;
            for s in self.sb.main_seg0..self.sb.segments {
                if self.sit[s as usize].kind == META
                    && self.meta_refs[s as usize] == 0
                    && s != meta_log
                {
                    self.prefree.insert(s);
                }
            }
        }
        // Closed segments whose blocks all died (invalidate() catches those that die later).
        for s in self.sb.main_seg0..self.sb.segments {
            let e = &self.sit[s as usize];
            if (HOT_DATA..=NODE).contains(&e.kind)
                && e.valid == 0
                && !self.logs.iter().any(|l| l.seg == s)
            {
                self.prefree.insert(s);
            }
        }
        self.cp = cp;
        self.nat_dirty.clear();
        self.sit_dirty.clear();
        let freed: Vec<u32> = std::mem::take(&mut self.prefree).into_iter().collect();
        for s in freed {
            self.trim_segment(s)?;
            self.sit[s as usize] = SitEntry::default();
            self.sit_dirty.insert(s / SIT_PER_BLOCK);
            self.free_segs.insert(s);
        }
        self.free_nids.extend(self.pending_nids.drain(..));
        self.last_cp_ns = self.t;
        self.dirty_calls = 0; // nothing is dirty now: recount from 0
        self.dirty_counted = 0;
        Ok(())
    }

    fn encode_meta(&mut self, i: u32) {
        let b = &mut self.buf;
        b.fill(0);
        if i < self.sb.nat_blocks {
            for j in 0..NAT_PER_BLOCK {
                put32(
                    b,
                    4 * j as usize,
                    self.nat[(i * NAT_PER_BLOCK + j) as usize],
                );
            }
        } else {
            let k = i - self.sb.nat_blocks;
            for j in 0..SIT_PER_BLOCK {
                let s = k * SIT_PER_BLOCK + j;
                if s < self.sb.segments {
                    self.sit[s as usize].encode(&mut b[SIT_BYTES * j as usize..]);
                }
            }
        }
        seal(b);
    }

    // ----- the namespace -----

    fn file(&self, ino: u32) -> LfsResult<&File> {
        self.files.get(&ino).ok_or(LfsError::NotFound)
    }

    pub fn getattr(&self, ino: u32) -> LfsResult<Inode> {
        Ok(self.file(ino)?.inode)
    }

    /// Blocks of a file that hold data.
    pub fn mapped_blocks_of(&self, ino: u32) -> u64 {
        self.files.get(&ino).map_or(0, |f| {
            let on_flash = f.addrs.iter().filter(|&&a| a != 0).count() as u64;
            let cached_new = self
                .cache
                .range((ino, 0)..=(ino, u64::MAX))
                .filter(|((_, b), _)| f.addrs.get(*b as usize).is_none_or(|&a| a == 0))
                .count() as u64;
            on_flash + cached_new
        })
    }

    fn dir(&self, ino: u32) -> LfsResult<&Dir> {
        if !self.file(ino)?.inode.is_dir() {
            return Err(LfsError::NotDir);
        }
        self.dirs.get(&ino).ok_or(LfsError::NotDir)
    }

    pub fn lookup(&mut self, parent: u32, name: &[u8]) -> LfsResult<(u32, Inode)> {
        let d = self.dir(parent)?;
        let ino = match name {
            b"." => parent,
            b".." => self.files[&parent].inode.parent,
            _ => d.names.get(name).ok_or(LfsError::NotFound)?.1,
        };
        Ok((ino, self.file(ino)?.inode))
    }

    pub fn readdir(&mut self, dir: u32, pos: u64, out: &mut Vec<(u64, DirEntry)>) -> LfsResult<()> {
        let d = self.dir(dir)?;
        out.clear();
        let me = self.files[&dir].inode;
        if pos == 0 {
            let e = DirEntry {
                ino: dir,
                mode: me.mode,
                name: b".".to_vec(),
            };
            out.push((1, e));
        }
        if pos <= 1 {
            let e = DirEntry {
                ino: me.parent,
                mode: S_IFDIR,
                name: b"..".to_vec(),
            };
            out.push((2, e));
        }
        let mut v: Vec<(u32, u32, &Vec<u8>)> = d
            .names
            .iter()
            .map(|(n, &(slot, ino))| (slot, ino, n))
            .filter(|(slot, _, _)| u64::from(*slot) + 2 >= pos)
            .collect();
        v.sort_unstable_by_key(|e| e.0);
        for (slot, ino, name) in v {
            let mode = self.files.get(&ino).map_or(0, |f| f.inode.mode);
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

    fn check_name(name: &[u8]) -> LfsResult<()> {
        if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
            return Err(LfsError::Invalid("bad file name".into()));
        }
        if name.len() > NAME_MAX_BYTES {
            return Err(LfsError::NameTooLong);
        }
        Ok(())
    }

    /// Writes directory slot `slot` of `dir` (entry `child`/`name`, or free with 0).
    fn put_dirent(&mut self, dir: u32, slot: u32, child: u32, name: &[u8]) -> LfsResult<()> {
        let blk = u64::from(slot / DIRENTS_PER_BLOCK);
        let off = (slot % DIRENTS_PER_BLOCK) as usize * DIRENT_BYTES;
        let end = (u64::from(slot) + 1) * DIRENT_BYTES as u64;
        let size = self.files[&dir].inode.size;
        let grows = end > size;
        let b = self.cached(dir, blk, grows && off == 0)?;
        encode_dirent(&mut b[off..off + DIRENT_BYTES], child, name);
        let f = self.files.get_mut(&dir).expect("dir");
        if grows {
            f.inode.size = end;
        }
        f.dirty.insert(0);
        f.ns_dirty = true;
        Ok(())
    }

    fn add_entry(&mut self, dir: u32, name: &[u8], child: u32) -> LfsResult<()> {
        let d = self.dirs.get_mut(&dir).expect("dir");
        let slot = match d.free.pop_first() {
            Some(s) => s,
            None => {
                d.slots += 1;
                d.slots - 1
            }
        };
        d.names.insert(name.to_vec(), (slot, child));
        self.put_dirent(dir, slot, child, name)
    }

    fn remove_entry(&mut self, dir: u32, name: &[u8]) -> LfsResult<u32> {
        let d = self.dirs.get_mut(&dir).expect("dir");
        let (slot, child) = d.names.remove(name).ok_or(LfsError::NotFound)?;
        d.free.insert(slot);
        self.put_dirent(dir, slot, 0, b"")?;
        Ok(child)
    }

    fn touch(&mut self, ino: u32, now_ns: i64) {
        if let Some(f) = self.files.get_mut(&ino) {
            f.inode.mtime_ns = now_ns;
            f.inode.ctime_ns = now_ns;
            f.dirty.insert(0);
        }
    }

    /// Creates a file, directory or (with `target`) symlink.
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        &mut self,
        parent: u32,
        name: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
        now_ns: i64,
        target: Option<&[u8]>,
    ) -> LfsResult<(u32, Inode)> {
        Self::check_name(name)?;
        if self.dir(parent)?.names.contains_key(name) {
            return Err(LfsError::Exists);
        }
        if target.is_some_and(|t| t.is_empty() || t.len() > BLOCK_BYTES) {
            return Err(LfsError::Invalid("symlink target of 1..4096 bytes".into()));
        }
        self.ensure_space()?;
        if self.valid_total + self.cache_new + 3 > self.user_blocks() {
            return Err(LfsError::NoSpace);
        }
        let ino = self.alloc_nid()?;
        let inode = Inode {
            mode,
            nlink: 1,
            uid,
            gid,
            size: 0,
            atime_ns: now_ns,
            mtime_ns: now_ns,
            ctime_ns: now_ns,
            parent,
        };
        self.add_file(ino, inode);
        self.files.get_mut(&ino).expect("new").ns_dirty = true;
        if inode.is_dir() {
            self.dirs.insert(ino, Dir::default());
        }
        if let Some(t) = target {
            self.write(ino, 0, t, now_ns)?;
        }
        self.add_entry(parent, name, ino)?;
        self.touch(parent, now_ns);
        Ok((ino, self.files[&ino].inode))
    }

    pub fn readlink(&mut self, ino: u32) -> LfsResult<Vec<u8>> {
        let f = self.file(ino)?;
        if !mode_is(f.inode.mode, S_IFLNK) {
            return Err(LfsError::Invalid("not a symlink".into()));
        }
        if f.inode.size > BLOCK_BYTES as u64 {
            return Err(LfsError::Corrupt(format!(
                "symlink {ino}: a target of {} bytes",
                f.inode.size
            )));
        }
        let mut v = vec![0u8; f.inode.size as usize];
        let n = self.read(ino, 0, &mut v)?;
        v.truncate(n);
        Ok(v)
    }

    pub fn link(&mut self, ino: u32, parent: u32, name: &[u8], now_ns: i64) -> LfsResult<Inode> {
        Self::check_name(name)?;
        if self.file(ino)?.inode.is_dir() {
            return Err(LfsError::IsDir);
        }
        if self.dir(parent)?.names.contains_key(name) {
            return Err(LfsError::Exists);
        }
        self.ensure_space()?;
        self.add_entry(parent, name, ino)?;
        let f = self.files.get_mut(&ino).expect("file");
        f.inode.nlink += 1;
        f.inode.ctime_ns = now_ns;
        f.dirty.insert(0);
        f.ns_dirty = true;
        self.touch(parent, now_ns);
        Ok(self.files[&ino].inode)
    }

    /// Frees an inode with no links and no opener: its blocks and nodes.
    fn free_inode(&mut self, ino: u32) {
        let keys: Vec<(u32, u64)> = self
            .cache
            .range((ino, 0)..=(ino, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        let Some(f) = self.files.remove(&ino) else {
            return;
        };
        for k in keys {
            self.cache.remove(&k);
            if f.addrs.get(k.1 as usize).is_none_or(|&a| a == 0) {
                self.cache_new -= 1;
            }
        }
        for &a in &f.addrs {
            self.invalidate(a);
        }
        for &nid in &f.nids {
            self.free_nid(nid);
        }
        self.free_nid(ino);
        self.dirs.remove(&ino);
    }

    pub fn remove(&mut self, parent: u32, name: &[u8], dir: bool, now_ns: i64) -> LfsResult<()> {
        let (child, ci) = self.lookup(parent, name)?;
        if name == b"." || name == b".." {
            return Err(LfsError::Invalid("cannot remove . or ..".into()));
        }
        if dir && !ci.is_dir() {
            return Err(LfsError::NotDir);
        }
        if !dir && ci.is_dir() {
            return Err(LfsError::IsDir);
        }
        if dir && !self.dirs[&child].names.is_empty() {
            return Err(LfsError::NotEmpty);
        }
        self.ensure_space()?;
        self.remove_entry(parent, name)?;
        self.touch(parent, now_ns);
        let f = self.files.get_mut(&child).expect("child");
        f.inode.nlink -= 1;
        f.inode.ctime_ns = now_ns;
        f.dirty.insert(0);
        f.ns_dirty = true;
        if f.inode.nlink == 0 && f.open == 0 {
            self.free_inode(child);
        }
        Ok(())
    }

    pub fn rename(
        &mut self,
        parent: u32,
        name: &[u8],
        new_parent: u32,
        new_name: &[u8],
        now_ns: i64,
    ) -> LfsResult<()> {
        Self::check_name(new_name)?;
        let (child, ci) = self.lookup(parent, name)?;
        self.dir(new_parent)?;
        if ci.is_dir() {
            // Not into its own subtree. Bounded: parents read from a damaged image may loop.
            let mut p = new_parent;
            for steps in 0.. {
                if p == child {
                    return Err(LfsError::Invalid("rename into own subtree".into()));
                }
                if p == ROOT_INO {
                    break;
                }
                if steps > self.files.len() {
                    return Err(LfsError::Corrupt(format!(
                        "directory {new_parent}'s parents loop"
                    )));
                }
                p = self.file(p)?.inode.parent;
            }
        }
        if let Some(&(_, old)) = self.dirs[&new_parent].names.get(new_name) {
            if old == child {
                return Ok(());
            }
            let oi = self.files[&old].inode;
            match (ci.is_dir(), oi.is_dir()) {
                (true, false) => return Err(LfsError::NotDir),
                (false, true) => return Err(LfsError::IsDir),
                (true, true) if !self.dirs[&old].names.is_empty() => {
                    return Err(LfsError::NotEmpty)
                }
                _ => {}
            }
            self.remove(new_parent, new_name, oi.is_dir(), now_ns)?;
        }
        self.ensure_space()?;
        self.remove_entry(parent, name)?;
        self.add_entry(new_parent, new_name, child)?;
        let f = self.files.get_mut(&child).expect("child");
        f.inode.parent = new_parent;
        f.inode.ctime_ns = now_ns;
        f.dirty.insert(0);
        f.ns_dirty = true;
        self.touch(parent, now_ns);
        self.touch(new_parent, now_ns);
        Ok(())
    }

    pub fn open_file(&mut self, ino: u32) -> LfsResult<()> {
        self.files.get_mut(&ino).ok_or(LfsError::NotFound)?.open += 1;
        Ok(())
    }

    pub fn release(&mut self, ino: u32) -> LfsResult<()> {
        let f = self.files.get_mut(&ino).ok_or(LfsError::NotFound)?;
        f.open = f.open.saturating_sub(1);
        if f.open == 0 && f.inode.nlink == 0 {
            self.free_inode(ino);
        }
        Ok(())
    }

    pub fn read(&mut self, ino: u32, off: u64, out: &mut [u8]) -> LfsResult<usize> {
        let f = self.file(ino)?;
        if f.inode.is_dir() {
            return Err(LfsError::IsDir);
        }
        let size = f.inode.size;
        if off >= size {
            return Ok(0);
        }
        let n = (size - off).min(out.len() as u64) as usize;
        let mut b = std::mem::take(&mut self.buf);
        let mut done = 0;
        let mut r = Ok(());
        while done < n {
            let pos = off + done as u64;
            let blk = pos / BLOCK_BYTES as u64;
            let o = (pos % BLOCK_BYTES as u64) as usize;
            let k = (BLOCK_BYTES - o).min(n - done);
            r = self.read_file_block(ino, blk, &mut b);
            if r.is_err() {
                break;
            }
            out[done..done + k].copy_from_slice(&b[o..o + k]);
            done += k;
        }
        self.buf = b;
        r?;
        Ok(n)
    }

    pub fn write(&mut self, ino: u32, off: u64, data: &[u8], now_ns: i64) -> LfsResult<usize> {
        if self.file(ino)?.inode.is_dir() {
            return Err(LfsError::IsDir);
        }
        let end = off
            .checked_add(data.len() as u64)
            .ok_or(LfsError::TooLarge)?;
        if end.div_ceil(BLOCK_BYTES as u64) > self.slots.max_file_blocks() {
            return Err(LfsError::TooLarge);
        }
        self.ensure_space()?;
        // Refuse before changing anything: blocks that will need new space, and new nodes.
        let first = off / BLOCK_BYTES as u64;
        let last = end.div_ceil(BLOCK_BYTES as u64);
        let f = &self.files[&ino];
        let new_blocks = (first..last)
            .filter(|&b| {
                f.addrs.get(b as usize).is_none_or(|&a| a == 0)
                    && !self.cache.contains_key(&(ino, b))
            })
            .count() as u64;
        let new_nodes =
            u64::from(self.slots.node_index(last.max(1) - 1)).saturating_sub(f.nids.len() as u64);
        if self.valid_total + self.cache_new + new_blocks + new_nodes > self.user_blocks() {
            return Err(LfsError::NoSpace);
        }
        let size = self.files[&ino].inode.size;
        let mut done = 0;
        while done < data.len() {
            let pos = off + done as u64;
            let blk = pos / BLOCK_BYTES as u64;
            let o = (pos % BLOCK_BYTES as u64) as usize;
            let k = (BLOCK_BYTES - o).min(data.len() - done);
            let whole = k == BLOCK_BYTES || (o == 0 && pos + k as u64 >= size);
            if self.cache.len() >= CACHE_BLOCKS {
                self.flush_data(None)?;
                self.ensure_space()?;
            }
            let b = self.cached(ino, blk, whole)?;
            b[o..o + k].copy_from_slice(&data[done..done + k]);
            done += k;
            let f = self.files.get_mut(&ino).expect("file");
            f.inode.size = f.inode.size.max(pos + k as u64);
        }
        self.stats.user_bytes += data.len() as u64;
        let f = self.files.get_mut(&ino).expect("file");
        f.inode.mtime_ns = now_ns;
        f.inode.ctime_ns = now_ns;
        f.dirty.insert(0);
        Ok(data.len())
    }

    fn truncate(&mut self, ino: u32, size: u64) -> LfsResult<()> {
        let old = self.files[&ino].inode.size;
        if size < old {
            let keep = size.div_ceil(BLOCK_BYTES as u64);
            // Zero the tail of the last block kept.
            let tail = (size % BLOCK_BYTES as u64) as usize;
            if tail != 0 {
                let b = self.cached(ino, keep - 1, false)?;
                b[tail..].fill(0);
            }
            let dropped: Vec<(u32, u64)> = self
                .cache
                .range((ino, keep)..=(ino, u64::MAX))
                .map(|(k, _)| *k)
                .collect();
            let f = self.files.get_mut(&ino).expect("file");
            for k in dropped {
                self.cache.remove(&k);
                if f.addrs.get(k.1 as usize).is_none_or(|&a| a == 0) {
                    self.cache_new -= 1;
                }
            }
            let cut = keep.min(f.addrs.len() as u64) as usize;
            let gone: Vec<u32> = f.addrs.drain(cut..).collect();
            f.crcs.truncate(cut);
            let nodes_keep = self.slots.nodes_for(keep);
            let nids: Vec<u32> = f.nids.drain(nodes_keep.min(f.nids.len())..).collect();
            f.dirty.retain(|&i| i as usize <= nodes_keep);
            if keep > 0 {
                f.dirty.insert(self.slots.node_index(keep - 1));
            }
            for a in gone {
                self.invalidate(a);
            }
            for nid in nids {
                self.free_nid(nid);
            }
        }
        let f = self.files.get_mut(&ino).expect("file");
        f.inode.size = size;
        f.dirty.insert(0);
        Ok(())
    }

    pub fn setattr(&mut self, ino: u32, a: SetAttr, now_ns: i64) -> LfsResult<Inode> {
        let i = self.file(ino)?.inode;
        if let Some(size) = a.size {
            if i.is_dir() {
                return Err(LfsError::IsDir);
            }
            if size.div_ceil(BLOCK_BYTES as u64) > self.slots.max_file_blocks() {
                return Err(LfsError::TooLarge);
            }
            self.ensure_space()?;
            self.truncate(ino, size)?;
        }
        let f = self.files.get_mut(&ino).expect("file");
        if let Some(m) = a.mode {
            f.inode.mode = (f.inode.mode & S_IFMT) | (m & 0o7777);
        }
        if let Some(u) = a.uid {
            f.inode.uid = u;
        }
        if let Some(g) = a.gid {
            f.inode.gid = g;
        }
        if let Some(t) = a.atime_ns {
            f.inode.atime_ns = t;
        }
        if let Some(t) = a.mtime_ns {
            f.inode.mtime_ns = t;
        }
        f.inode.ctime_ns = now_ns;
        f.dirty.insert(0);
        Ok(f.inode)
    }

    /// Makes `ino` durable: its data and nodes with the fsync mark (roll-forward recovers
    /// them); a file with a namespace change not yet checkpointed, or a directory, takes a
    /// checkpoint instead.
    pub fn fsync(&mut self, ino: u32) -> LfsResult<()> {
        let f = self.file(ino)?;
        let needs_cp = f.ns_dirty || f.inode.is_dir();
        self.stats.fsyncs += 1;
        if needs_cp {
            return self.checkpoint();
        }
        self.ensure_space()?;
        self.flush_data(Some(ino))?;
        self.write_nodes(ino, FLAG_FSYNC | FLAG_END)?;
        self.t = self.dev.flush(self.t)?;
        Ok(())
    }

    pub fn sync_all(&mut self) -> LfsResult<()> {
        self.checkpoint()
    }

    pub fn statfs(&self) -> StatFs {
        let cap = self.user_blocks();
        StatFs {
            block_bytes: BLOCK_BYTES as u32,
            blocks: cap,
            blocks_free: cap.saturating_sub(self.valid_total + self.cache_new),
            files: u64::from(self.sb.max_nids),
            files_free: self.free_nids.len() as u64,
            name_max: NAME_MAX_BYTES as u32,
        }
    }

    // ----- fsck -----

    /// Reads every data block on flash and checks it against the CRC its node holds (data
    /// checksums); adds the ones that fail to `p`.
    fn scrub(&mut self, p: &mut Vec<String>) -> LfsResult<()> {
        let blocks: Vec<(u32, u64)> = self
            .files
            .iter()
            .flat_map(|(&ino, f)| {
                (f.addrs.iter().enumerate())
                    .filter(|(_, &a)| a != 0)
                    .map(move |(k, _)| (ino, k as u64))
            })
            .filter(|k| !self.cache.contains_key(k))
            .collect();
        let mut b = vec![0u8; BLOCK_BYTES];
        for (ino, blk) in blocks {
            match self.read_file_block(ino, blk, &mut b) {
                Ok(()) => {}
                Err(e @ LfsError::DataChecksum { .. }) => p.push(e.to_string()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Checks the invariants of docs/lfs.md against memory and flash; returns the problems.
    pub fn fsck(&mut self) -> LfsResult<Vec<String>> {
        let mut p = Vec::new();
        // 1. Links: every entry names a live inode; nlink = entries naming it.
        let mut links: FnvHashMap<u32, u32> = FnvHashMap::default();
        for (&d, dir) in &self.dirs {
            for (name, &(_, c)) in &dir.names {
                *links.entry(c).or_default() += 1;
                match self.files.get(&c) {
                    None => p.push(format!(
                        "directory {d}: entry {:?} names free inode {c}",
                        String::from_utf8_lossy(name)
                    )),
                    Some(f) if f.inode.is_dir() && f.inode.parent != d => p.push(format!(
                        "directory {c}: parent {} but listed in {d}",
                        f.inode.parent
                    )),
                    _ => {}
                }
            }
        }
        for (&ino, f) in &self.files {
            let want = if ino == ROOT_INO {
                1
            } else {
                links.get(&ino).copied().unwrap_or(0)
            };
            if f.inode.nlink != want && !(f.open > 0 && f.inode.nlink == 0) {
                p.push(format!(
                    "inode {ino}: nlink {} but {want} entries",
                    f.inode.nlink
                ));
            }
        }
        // 2. Reverse map, valid counts and NAT agree with the files' maps.
        let mut valid = vec![0u32; self.sb.segments as usize];
        let mut total = 0u64;
        let mut check = |a: u32, owner: u64, what: &str, p: &mut Vec<String>| {
            if a == 0 {
                return;
            }
            total += 1;
            valid[(a / self.sb.seg_pages) as usize] += 1;
            if (a / self.sb.seg_pages) < self.sb.main_seg0 {
                p.push(format!("{what} at {a}: outside the main area"));
            } else if self.owner[a as usize] != owner {
                p.push(format!("{what} at {a}: the reverse map disagrees"));
            }
        };
        for (&ino, f) in &self.files {
            check(
                self.nat[ino as usize],
                enc_owner(ino, NODE_BIT),
                "inode",
                &mut p,
            );
            for &nid in &f.nids {
                check(
                    self.nat[nid as usize],
                    enc_owner(nid, NODE_BIT),
                    "node",
                    &mut p,
                );
            }
            let blocks = f.inode.size.div_ceil(BLOCK_BYTES as u64);
            for (i, &a) in f.addrs.iter().enumerate() {
                if a != 0 && i as u64 >= blocks {
                    p.push(format!("inode {ino}: block {i} mapped beyond its size"));
                }
                check(a, enc_owner(ino, i as u64), "data", &mut p);
            }
        }
        if total != self.valid_total {
            p.push(format!(
                "{} valid blocks counted, {total} found",
                self.valid_total
            ));
        }
        for s in 0..self.sb.segments {
            if self.sit[s as usize].valid != valid[s as usize] {
                p.push(format!(
                    "segment {s}: SIT says {} valid, {} found",
                    self.sit[s as usize].valid, valid[s as usize]
                ));
            }
            if self.free_segs.contains(&s)
                && (valid[s as usize] > 0 || self.meta_refs[s as usize] > 0)
            {
                p.push(format!("segment {s}: free but holds live blocks"));
            }
        }
        // 3. Every node on flash carries its own id (read back).
        let nodes: Vec<(u32, u32)> = (1..self.sb.max_nids)
            .filter(|&n| self.nat[n as usize] != 0)
            .map(|n| (n, self.nat[n as usize]))
            .collect();
        for (nid, a) in nodes {
            if !self.files.contains_key(&nid) && !self.node_of.contains_key(&nid) {
                p.push(format!("node {nid}: in the NAT but no file owns it"));
                continue;
            }
            self.read_block(a)?;
            if Footer::decode(&self.buf).is_none_or(|f| f.nid != nid) {
                p.push(format!("node {nid} at {a}: the block does not hold it"));
            }
        }
        // 5. Data checksums: every block on flash is the one its node names.
        if self.slots.checksums() {
            self.scrub(&mut p)?;
        }
        // 4. The tree: every directory reaches the root.
        for (&ino, f) in &self.files {
            if f.inode.is_dir() {
                let mut x = ino;
                let mut steps = 0;
                while x != ROOT_INO && steps <= self.files.len() {
                    x = self.files.get(&x).map_or(ROOT_INO, |g| g.inode.parent);
                    steps += 1;
                }
                if steps > self.files.len() {
                    p.push(format!("directory {ino}: its parents loop"));
                }
            }
        }
        Ok(p)
    }
}
