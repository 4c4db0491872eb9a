//! Where page contents and device state live: RAM, a file-backed image, or metadata only.
//!
//! The device owns the rules; a store only keeps bytes. The device answers reads of erased pages
//! itself (0xFF), so a store is asked only about pages that were programmed since their erase.
//!
//! Image file format (all integers little-endian), version 1:
//!
//! | offset                  | size              | content                                   |
//! |-------------------------|-------------------|-------------------------------------------|
//! | 0                       | 8                 | magic `NOFTLIMG`                          |
//! | 8                       | 4                 | format version (1)                        |
//! | 12                      | 4                 | length of the config TOML in bytes        |
//! | 16                      | 8                 | device clock (virtual ns) at last flush   |
//! | 24                      | 8                 | clean-shutdown flag (1 = flushed cleanly) |
//! | 64                      | config length     | the device config as TOML                 |
//! | HEADER = 64 KiB         | 32 x blocks       | block table (below)                       |
//! | after the block table   | 1 x pages         | page states (below)                       |
//! | next 4 KiB boundary     | oob x pages       | OOB bytes, page after page                |
//! | next 4 KiB boundary     | page x pages      | data bytes, page after page (sparse file) |
//!
//! Block table entry (32 bytes):
//!
//! | bytes  | field                                                                  |
//! |--------|------------------------------------------------------------------------|
//! | 0..4   | erase count                                                            |
//! | 4..12  | wear, in 10^-12 of rated life (each erase adds 10^12 / cycles of mode) |
//! | 12     | mode: 0 slc, 1 mlc, 2 tlc, 3 pslc                                      |
//! | 13     | state: 0 good, 1 factory bad, 2 grown bad, 3 needs erase               |
//! | 14..16 | next programmable page                                                 |
//! | 16..24 | virtual time of the first program since the last erase (ns)           |
//! | 24..32 | zero                                                                   |
//!
//! Page state (1 byte): bits 0..3 programs since erase (0 = erased), bit 7 unreadable (torn).

use std::fs::{File, OpenOptions};
use std::path::Path;

use memmap2::MmapMut;

use crate::config::{CellMode, DeviceConfig};
use crate::error::NandError;
use crate::geometry::{Geometry, Pbn, Ppn};

/// The state of one block, as the device tracks and the image persists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockMeta {
    pub erase_count: u32,
    /// Wear in 10^-12 of rated life: fine enough that every rated cycle below 10^6 is delivered.
    pub wear_ppt: u64,
    pub mode: CellMode,
    pub state: BlockState,
    pub next_page: u16,
    pub programmed_at_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockState {
    Good,
    FactoryBad,
    GrownBad,
    NeedsErase,
}

impl BlockMeta {
    pub const ENCODED_BYTES: usize = 32;

    pub fn encode(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[0..4].copy_from_slice(&self.erase_count.to_le_bytes());
        b[4..12].copy_from_slice(&self.wear_ppt.to_le_bytes());
        b[12] = match self.mode {
            CellMode::Slc => 0,
            CellMode::Mlc => 1,
            CellMode::Tlc => 2,
            CellMode::Pslc => 3,
        };
        b[13] = match self.state {
            BlockState::Good => 0,
            BlockState::FactoryBad => 1,
            BlockState::GrownBad => 2,
            BlockState::NeedsErase => 3,
        };
        b[14..16].copy_from_slice(&self.next_page.to_le_bytes());
        b[16..24].copy_from_slice(&self.programmed_at_ns.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Self, String> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut t = [0u8; 8];
            t.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(t)
        };
        let mode = match b[12] {
            0 => CellMode::Slc,
            1 => CellMode::Mlc,
            2 => CellMode::Tlc,
            3 => CellMode::Pslc,
            m => return Err(format!("unknown block mode byte {m}")),
        };
        let state = match b[13] {
            0 => BlockState::Good,
            1 => BlockState::FactoryBad,
            2 => BlockState::GrownBad,
            3 => BlockState::NeedsErase,
            s => return Err(format!("unknown block state byte {s}")),
        };
        Ok(BlockMeta {
            erase_count: u32_at(0),
            wear_ppt: u64_at(4),
            mode,
            state,
            next_page: u16::from_le_bytes([b[14], b[15]]),
            programmed_at_ns: u64_at(16),
        })
    }
}

/// Page state bits.
pub const PAGE_PROGRAMS_MASK: u8 = 0x0f;
pub const PAGE_TORN: u8 = 0x80;

/// A programmed page's bytes, when the store keeps them.
#[derive(Debug)]
pub struct PageView<'a> {
    pub data: Option<&'a [u8]>,
    pub oob: &'a [u8],
}

/// The seam between the device and where its bytes live.
pub trait Store: Send + std::fmt::Debug {
    fn kind(&self) -> &'static str;
    /// The bytes of a programmed page.
    fn page(&self, ppn: Ppn) -> PageView<'_>;
    /// Starts fetching `len` bytes of page `ppn`'s data from `offset` into the CPU's cache, for
    /// a read about to copy them: a hint with no effect on any result (a page whose bytes the
    /// store does not keep, or has not mapped, is skipped).
    fn prefetch(&self, _ppn: Ppn, _offset: usize, _len: usize) {}
    /// Programs bytes. With `fresh` the page was erased, and bytes outside the given ranges become
    /// 0xFF; otherwise the stored bytes in the ranges become `stored AND new`.
    fn program(
        &mut self,
        ppn: Ppn,
        fresh: bool,
        data_off: usize,
        data: &[u8],
        oob_off: usize,
        oob: &[u8],
    );
    /// Makes room for page `ppn` before the device changes any state for its program, so that
    /// a store that cannot hold it refuses the program cleanly (the RAM store's budget).
    fn reserve(&mut self, _ppn: Ppn) -> Result<(), NandError> {
        Ok(())
    }
    /// Maps and faults in all of the store's memory now (see `RamStore::prefault`); returns
    /// the bytes the store has mapped then. Stores that keep nothing of their own in anonymous
    /// memory map nothing (0).
    fn prefault(&mut self) -> Result<u64, NandError> {
        Ok(0)
    }
    fn save_block(&mut self, _pbn: Pbn, _meta: &BlockMeta) {}
    fn save_page_state(&mut self, _ppn: Ppn, _state: u8) {}
    fn save_clock(&mut self, _ns: u64, _clean: bool) {}
    fn flush(&mut self) -> Result<(), NandError> {
        Ok(())
    }
}

const CACHE_LINE_BYTES: usize = 64;
/// Cache lines at the head of a copy's source fetched ahead (`Store::prefetch`). The CPU's own
/// stream prefetcher follows a run of misses through the rest of the page; asking for every
/// line instead fills the core's miss buffers and stalls it at the prefetch until lines
/// arrive, which is the wait the prefetch is there to hide. Measured with `cargo bench -p nand
/// --bench read_vs_copy` (PERFORMANCE section 1, 2026-11-28): read/copy 1.45 without prefetch,
/// 1.24 with all 64 lines, 1.12-1.15 with 8 (4 to 16 come close, with more scatter).
const PREFETCH_LINES: usize = 8;

/// Asks the CPU to fetch the head of `bytes` into its caches now, so that the misses of a copy
/// from them overlap the work a read does before it copies (the device's rules, timing and
/// bit-error sampling) instead of following it. A hint: it never faults and changes no result.
#[inline]
pub(crate) fn prefetch_bytes(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(CACHE_LINE_BYTES).take(PREFETCH_LINES) {
        // SAFETY: a prefetch reads nothing architecturally and never faults; the pointer is
        // into a live slice anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast::<i8>(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

fn apply(dst: &mut [u8], fresh: bool, off: usize, src: &[u8]) {
    if fresh {
        // Erased bytes around the programmed range only: most programs cover the whole page,
        // and a fill before the copy doubled the memory traffic of every program.
        let end = off + src.len();
        dst[..off].fill(0xFF);
        dst[off..end].copy_from_slice(src);
        dst[end..].fill(0xFF);
    } else {
        for (d, s) in dst[off..off + src.len()].iter_mut().zip(src) {
            *d &= *s;
        }
    }
}

/// Contents in memory, in arenas of whole blocks allocated when one of their blocks is first
/// programmed. Arenas are anonymous mappings of about 32 MiB advised for transparent huge pages:
/// random reads over a large device then miss the TLB far less than with one allocation per
/// block, and untouched memory still costs nothing (the kernel maps it on first write).
#[derive(Debug)]
pub struct RamStore {
    page_bytes: usize,
    oob_bytes: usize,
    pages_per_block: usize,
    keep_data: bool,
    block_bytes: usize,
    blocks_per_arena: usize,
    arenas: Vec<Option<MmapMut>>,
    /// Bytes of the arenas mapped so far, and what the host had free when the store was made:
    /// arenas are mapped lazily and erased blocks keep theirs, so a large device written all
    /// over would otherwise grow until the kernel kills the process (`reserve` refuses first).
    mapped_bytes: u64,
    budget_bytes: Option<u64>,
}

const ARENA_BYTES: usize = 32 << 20;
/// Host memory left to everything else when the budget is taken (the process's own tables,
/// the page cache of other programs).
const BUDGET_MARGIN_BYTES: u64 = 512 << 20;

impl RamStore {
    pub fn new(g: &Geometry, keep_data: bool) -> Self {
        let page_bytes = g.page_size_bytes as usize;
        let oob_bytes = g.oob_size_bytes as usize;
        let pages_per_block = g.pages_per_block as usize;
        let block_bytes = pages_per_block * (if keep_data { page_bytes } else { 0 } + oob_bytes);
        let blocks_per_arena = (ARENA_BYTES / block_bytes).clamp(1, g.blocks() as usize);
        let arenas = (0..(g.blocks() as usize).div_ceil(blocks_per_arena))
            .map(|_| None)
            .collect();
        RamStore {
            page_bytes,
            oob_bytes,
            pages_per_block,
            keep_data,
            block_bytes,
            blocks_per_arena,
            arenas,
            mapped_bytes: 0,
            budget_bytes: crate::host_memory::available_bytes()
                .map(|b| b.saturating_sub(BUDGET_MARGIN_BYTES)),
        }
    }

    /// (arena, offset of the page's data, offset of its OOB) within the arena.
    #[inline]
    fn split(&self, ppn: Ppn) -> (usize, usize, usize) {
        let block = (ppn.0 / self.pages_per_block as u64) as usize;
        let page = (ppn.0 % self.pages_per_block as u64) as usize;
        let base = (block % self.blocks_per_arena) * self.block_bytes;
        let data_bytes = if self.keep_data { self.page_bytes } else { 0 };
        let data_at = base + page * data_bytes;
        let oob_at = base + self.pages_per_block * data_bytes + page * self.oob_bytes;
        (block / self.blocks_per_arena, data_at, oob_at)
    }

    /// Whether `more` new arenas fit the budget; `OutOfMemory` with the bytes they would bring
    /// the store to when not (`reserve` and `prefault` refuse before mapping anything).
    fn within_budget(&self, more: u64) -> Result<(), NandError> {
        let mapped_bytes =
            self.mapped_bytes + more * (self.blocks_per_arena * self.block_bytes) as u64;
        match self.budget_bytes.filter(|&b| mapped_bytes > b) {
            Some(available_bytes) => Err(NandError::OutOfMemory {
                mapped_bytes,
                available_bytes,
            }),
            None => Ok(()),
        }
    }

    fn arena(&mut self, i: usize) -> &mut MmapMut {
        let len = self.blocks_per_arena * self.block_bytes;
        self.arenas[i].get_or_insert_with(|| {
            self.mapped_bytes += len as u64;
            if let Some(map) = crate::host_memory::spare::take(len) {
                return map;
            }
            // An anonymous mapping failing means the machine is out of address space or memory:
            // there is no way to go on emulating, and no caller could act on an error.
            let map = MmapMut::map_anon(len)
                .unwrap_or_else(|e| panic!("cannot map {len} bytes of device memory: {e}"));
            #[cfg(target_os = "linux")]
            {
                // Advice only: without transparent huge pages the arena works the same, slower.
                let _ = map.advise(memmap2::Advice::HugePage);
            }
            map
        })
    }
}

impl Drop for RamStore {
    /// The arenas go to the process's spare ones (`host_memory::spare`), faulted in: the next device of
    /// this process (the next row of a comparison) takes them instead of waiting for the
    /// kernel to zero fresh memory, which cost a third of a 1 GiB comparison row's CPU.
    fn drop(&mut self) {
        for map in self.arenas.iter_mut().filter_map(Option::take) {
            crate::host_memory::spare::give(map);
        }
    }
}

impl Store for RamStore {
    fn reserve(&mut self, ppn: Ppn) -> Result<(), NandError> {
        let (a, _, _) = self.split(ppn);
        if self.arenas[a].is_some() {
            return Ok(());
        }
        self.within_budget(1)?;
        self.arena(a);
        Ok(())
    }

    /// Every arena mapped now and its pages faulted in writable (MADV_POPULATE_WRITE, or a
    /// write to each 4 KiB page where the kernel lacks it), refused before anything is mapped
    /// when the device does not fit the budget. Without it the first program into each 2 MiB
    /// of the device waits for the kernel to zero that memory: a server's first pass over the
    /// device runs at the kernel's zeroing speed, not the emulator's (PERFORMANCE section 4).
    fn prefault(&mut self) -> Result<u64, NandError> {
        self.within_budget(self.arenas.iter().filter(|a| a.is_none()).count() as u64)?;
        for i in 0..self.arenas.len() {
            let map = self.arena(i);
            #[cfg(target_os = "linux")]
            let populated = map.advise(memmap2::Advice::PopulateWrite).is_ok();
            #[cfg(not(target_os = "linux"))]
            let populated = false;
            if !populated {
                // Fresh anonymous memory reads as zero: writing a zero faults a page in
                // without changing what it holds.
                for at in (0..map.len()).step_by(4096) {
                    map[at] = 0;
                }
            }
        }
        Ok(self.mapped_bytes)
    }

    fn kind(&self) -> &'static str {
        if self.keep_data {
            "ram"
        } else {
            "meta"
        }
    }

    fn prefetch(&self, ppn: Ppn, offset: usize, len: usize) {
        if !self.keep_data {
            return;
        }
        let (a, d, _) = self.split(ppn);
        if let Some(buf) = self.arenas[a].as_deref() {
            prefetch_bytes(&buf[d + offset..d + offset + len]);
        }
    }

    fn page(&self, ppn: Ppn) -> PageView<'_> {
        let (a, d, o) = self.split(ppn);
        let buf = self.arenas[a]
            .as_deref()
            .expect("a programmed page's arena is mapped");
        PageView {
            data: if self.keep_data {
                Some(&buf[d..d + self.page_bytes])
            } else {
                None
            },
            oob: &buf[o..o + self.oob_bytes],
        }
    }

    fn program(
        &mut self,
        ppn: Ppn,
        fresh: bool,
        data_off: usize,
        data: &[u8],
        oob_off: usize,
        oob: &[u8],
    ) {
        let (a, d, o) = self.split(ppn);
        let (page_bytes, oob_bytes, keep) = (self.page_bytes, self.oob_bytes, self.keep_data);
        let buf = self.arena(a);
        if keep {
            apply(&mut buf[d..d + page_bytes], fresh, data_off, data);
        }
        apply(&mut buf[o..o + oob_bytes], fresh, oob_off, oob);
    }
}

const IMAGE_MAGIC: &[u8; 8] = b"NOFTLIMG";
const IMAGE_VERSION: u32 = 1;
const IMAGE_HEADER_BYTES: usize = 64 * 1024;

fn align4k(n: u64) -> u64 {
    n.div_ceil(4096) * 4096
}

/// The whole device state in one memory-mapped file (format in the module documentation).
#[derive(Debug)]
pub struct ImageStore {
    map: MmapMut,
    _file: File,
    page_bytes: usize,
    oob_bytes: usize,
    blocks_at: usize,
    states_at: usize,
    oob_at: usize,
    data_at: usize,
    /// A copy-on-write mapping (`open_private`): writes stay in this process's memory and
    /// never reach the file.
    private: bool,
}

/// Byte offsets of an image's areas (the module documentation's table), for tools and tests
/// that look at an image file directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageLayout {
    /// The OOB bytes of page `p` start at `oob_at + p x oob_size_bytes`.
    pub oob_at: u64,
    /// The data bytes of page `p` start at `data_at + p x page_size_bytes`.
    pub data_at: u64,
    /// The file's length.
    pub len: u64,
}

impl ImageLayout {
    pub fn of(g: &Geometry) -> ImageLayout {
        let (_, _, oob_at, data_at, len) = ImageStore::layout(g);
        ImageLayout {
            oob_at: oob_at as u64,
            data_at: data_at as u64,
            len,
        }
    }
}

/// What an image holds besides page bytes: enough to rebuild the device.
#[derive(Debug)]
pub struct ImageState {
    pub config: DeviceConfig,
    pub blocks: Vec<BlockMeta>,
    pub page_states: Vec<u8>,
    pub clock_ns: u64,
    pub clean: bool,
}

impl ImageStore {
    fn layout(g: &Geometry) -> (usize, usize, usize, usize, u64) {
        let blocks_at = IMAGE_HEADER_BYTES as u64;
        let states_at = blocks_at + u64::from(g.blocks()) * BlockMeta::ENCODED_BYTES as u64;
        let oob_at = align4k(states_at + g.pages());
        let data_at = align4k(oob_at + g.pages() * u64::from(g.oob_size_bytes));
        let len = data_at + g.pages() * u64::from(g.page_size_bytes);
        (
            blocks_at as usize,
            states_at as usize,
            oob_at as usize,
            data_at as usize,
            len,
        )
    }

    /// The store over a mapped image of geometry `g` (layout per the module documentation).
    fn over(map: MmapMut, file: File, g: &Geometry, private: bool) -> Self {
        let (blocks_at, states_at, oob_at, data_at, _) = Self::layout(g);
        ImageStore {
            map,
            _file: file,
            page_bytes: g.page_size_bytes as usize,
            oob_bytes: g.oob_size_bytes as usize,
            blocks_at,
            states_at,
            oob_at,
            data_at,
            private,
        }
    }

    fn io(path: &Path, what: &str, e: std::io::Error) -> NandError {
        NandError::Image(format!("{what} {}: {e}", path.display()))
    }

    /// Creates a new image for a device whose initial state is given.
    pub fn create(
        path: &Path,
        cfg: &DeviceConfig,
        blocks: &[BlockMeta],
    ) -> Result<Self, NandError> {
        let g = &cfg.geometry;
        let (_, _, _, _, len) = Self::layout(g);
        let config_text = toml::to_string(cfg)
            .map_err(|e| NandError::Image(format!("cannot encode config: {e}")))?;
        if 64 + config_text.len() > IMAGE_HEADER_BYTES {
            return Err(NandError::Image(
                "device config too large for the image header".into(),
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Self::io(path, "cannot create image", e))?;
        file.set_len(len)
            .map_err(|e| Self::io(path, "cannot size image", e))?;
        // SAFETY: the file is ours, opened read-write, sized above; no other mapping of it is made
        // by this process while the store lives.
        let map = unsafe { MmapMut::map_mut(&file) }
            .map_err(|e| Self::io(path, "cannot map image", e))?;
        let mut s = Self::over(map, file, g, false);
        s.map[0..8].copy_from_slice(IMAGE_MAGIC);
        s.map[8..12].copy_from_slice(&IMAGE_VERSION.to_le_bytes());
        s.map[12..16].copy_from_slice(&(config_text.len() as u32).to_le_bytes());
        s.map[64..64 + config_text.len()].copy_from_slice(config_text.as_bytes());
        for (i, m) in blocks.iter().enumerate() {
            s.save_block(Pbn(i as u32), m);
        }
        s.save_clock(0, true);
        Ok(s)
    }

    /// Opens an existing image, returning the store and the state it holds. With `private`
    /// the file is opened read-only and mapped copy-on-write: the device works as usual, but
    /// nothing it writes reaches the file (a check, or a probe before a mount that may be
    /// refused, must leave the image as it was).
    pub fn open(path: &Path, private: bool) -> Result<(Self, ImageState), NandError> {
        let file = OpenOptions::new()
            .read(true)
            .write(!private)
            .open(path)
            .map_err(|e| Self::io(path, "cannot open image", e))?;
        let file_len = file
            .metadata()
            .map_err(|e| Self::io(path, "cannot stat image", e))?
            .len();
        if file_len < IMAGE_HEADER_BYTES as u64 {
            return Err(NandError::Image(format!(
                "{} is too short to be a device image",
                path.display()
            )));
        }
        let map = if private {
            // SAFETY: as in `create`; a copy-on-write mapping is never written back to the file.
            unsafe { memmap2::MmapOptions::new().map_copy(&file) }
        } else {
            // SAFETY: as in `create`.
            unsafe { MmapMut::map_mut(&file) }
        }
        .map_err(|e| Self::io(path, "cannot map image", e))?;
        if &map[0..8] != IMAGE_MAGIC {
            return Err(NandError::Image(format!(
                "{} is not a noftl device image (bad magic)",
                path.display()
            )));
        }
        let version = u32::from_le_bytes([map[8], map[9], map[10], map[11]]);
        if version != IMAGE_VERSION {
            return Err(NandError::Image(format!(
                "image format version {version}, this build reads {IMAGE_VERSION}"
            )));
        }
        let config_len = u32::from_le_bytes([map[12], map[13], map[14], map[15]]) as usize;
        if 64 + config_len > IMAGE_HEADER_BYTES {
            return Err(NandError::Image(
                "corrupt image header (config length)".into(),
            ));
        }
        let text = std::str::from_utf8(&map[64..64 + config_len])
            .map_err(|_| NandError::Image("corrupt image config (not UTF-8)".into()))?;
        let config = DeviceConfig::from_toml(text, &[])
            .map_err(|e| NandError::Image(format!("image config: {e}")))?;
        let g = &config.geometry;
        let (blocks_at, states_at, _, _, len) = Self::layout(g);
        if file_len != len {
            return Err(NandError::Image(format!(
                "image is {file_len} bytes, its geometry needs {len}"
            )));
        }
        let mut clock = [0u8; 8];
        clock.copy_from_slice(&map[16..24]);
        let clean = map[24] == 1;
        let mut blocks = Vec::with_capacity(g.blocks() as usize);
        for i in 0..g.blocks() as usize {
            let at = blocks_at + i * BlockMeta::ENCODED_BYTES;
            blocks.push(
                BlockMeta::decode(&map[at..at + BlockMeta::ENCODED_BYTES])
                    .map_err(|e| NandError::Image(format!("block {i}: {e}")))?,
            );
        }
        let page_states = map[states_at..states_at + g.pages() as usize].to_vec();
        let store = Self::over(map, file, g, private);
        Ok((
            store,
            ImageState {
                config,
                blocks,
                page_states,
                clock_ns: u64::from_le_bytes(clock),
                clean,
            },
        ))
    }
}

impl Store for ImageStore {
    fn kind(&self) -> &'static str {
        "image"
    }

    fn prefetch(&self, ppn: Ppn, offset: usize, len: usize) {
        let d = self.data_at + ppn.0 as usize * self.page_bytes + offset;
        prefetch_bytes(&self.map[d..d + len]);
    }

    fn page(&self, ppn: Ppn) -> PageView<'_> {
        let p = ppn.0 as usize;
        let d = self.data_at + p * self.page_bytes;
        let o = self.oob_at + p * self.oob_bytes;
        PageView {
            data: Some(&self.map[d..d + self.page_bytes]),
            oob: &self.map[o..o + self.oob_bytes],
        }
    }

    fn program(
        &mut self,
        ppn: Ppn,
        fresh: bool,
        data_off: usize,
        data: &[u8],
        oob_off: usize,
        oob: &[u8],
    ) {
        let p = ppn.0 as usize;
        let d = self.data_at + p * self.page_bytes;
        let o = self.oob_at + p * self.oob_bytes;
        let (pb, ob) = (self.page_bytes, self.oob_bytes);
        apply(&mut self.map[d..d + pb], fresh, data_off, data);
        apply(&mut self.map[o..o + ob], fresh, oob_off, oob);
    }

    fn save_block(&mut self, pbn: Pbn, meta: &BlockMeta) {
        let at = self.blocks_at + pbn.0 as usize * BlockMeta::ENCODED_BYTES;
        self.map[at..at + BlockMeta::ENCODED_BYTES].copy_from_slice(&meta.encode());
    }

    fn save_page_state(&mut self, ppn: Ppn, state: u8) {
        self.map[self.states_at + ppn.0 as usize] = state;
    }

    fn save_clock(&mut self, ns: u64, clean: bool) {
        self.map[16..24].copy_from_slice(&ns.to_le_bytes());
        self.map[24] = u8::from(clean);
    }

    fn flush(&mut self) -> Result<(), NandError> {
        if self.private {
            return Ok(()); // nothing of a copy-on-write mapping goes to the file
        }
        self.map
            .flush()
            .map_err(|e| NandError::Image(format!("cannot flush image: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ram_store_past_its_budget_refuses_a_new_arena_and_keeps_the_old_ones() {
        let cfg = crate::DeviceConfig::preset("tiny", &["geometry.blocks_per_plane=512".into()])
            .expect("preset");
        let mut st = RamStore::new(&cfg.geometry, true);
        let arena_bytes = (st.blocks_per_arena * st.block_bytes) as u64;
        assert!(
            st.arenas.len() > 1,
            "the test needs a device of several arenas"
        );
        st.budget_bytes = Some(arena_bytes);
        assert_eq!(st.reserve(Ppn(0)), Ok(()));
        assert_eq!(st.reserve(Ppn(1)), Ok(()), "the same arena again");
        let far = Ppn((st.blocks_per_arena * st.pages_per_block) as u64);
        assert_eq!(
            st.reserve(far),
            Err(NandError::OutOfMemory {
                mapped_bytes: 2 * arena_bytes,
                available_bytes: arena_bytes
            })
        );
        assert!(
            st.arenas[1].is_none(),
            "nothing mapped for the refused page"
        );
    }

    #[test]
    fn prefault_maps_every_arena_or_refuses_before_mapping_any() {
        let cfg = crate::DeviceConfig::preset("tiny", &["geometry.blocks_per_plane=512".into()])
            .expect("preset");
        let mut st = RamStore::new(&cfg.geometry, true);
        let arena_bytes = (st.blocks_per_arena * st.block_bytes) as u64;
        let n = st.arenas.len() as u64;
        assert!(n > 1, "the test needs a device of several arenas");
        // Past the budget: refused whole, nothing mapped.
        st.budget_bytes = Some(arena_bytes);
        assert_eq!(
            st.prefault(),
            Err(NandError::OutOfMemory {
                mapped_bytes: n * arena_bytes,
                available_bytes: arena_bytes
            })
        );
        assert!(st.arenas.iter().all(Option::is_none));
        st.budget_bytes = None;
        assert_eq!(st.prefault(), Ok(n * arena_bytes));
        assert!(st.arenas.iter().all(Option::is_some));
        // Programs and reads work as on a lazily mapped store, and a second call maps nothing.
        let data = vec![0x5Au8; st.page_bytes];
        let last = Ppn(cfg.geometry.pages() - 1);
        st.program(last, true, 0, &data, 0, &[1, 2]);
        assert_eq!(st.page(last).data, Some(&data[..]));
        assert_eq!(st.prefault(), Ok(n * arena_bytes));
    }

    #[test]
    fn a_store_on_the_arenas_of_a_dropped_one_reads_only_what_it_programmed() {
        // Arenas of a dropped store are reused unchanged (`host_memory::spare`): a first program after an
        // erase must write every byte of the page, so nothing of the old store shows through.
        let cfg = crate::DeviceConfig::preset("tiny", &["geometry.blocks_per_plane=64".into()])
            .expect("preset");
        let g = &cfg.geometry;
        let mut old = RamStore::new(g, true);
        let zeros = vec![0u8; old.page_bytes];
        let oob_zeros = vec![0u8; old.oob_bytes];
        for p in 0..g.pages() {
            old.program(Ppn(p), true, 0, &zeros, 0, &oob_zeros);
        }
        // Whether this store gets `old`'s arenas depends on the other tests running beside it
        // (they share the process's spare ones), so only what it reads is asserted.
        drop(old);
        let mut st = RamStore::new(g, true);
        let part = vec![0x5Au8; 100];
        st.program(Ppn(3), true, 200, &part, 1, &[7]);
        let v = st.page(Ppn(3));
        let data = v.data.expect("data kept");
        assert!(data[..200].iter().all(|&b| b == 0xFF));
        assert_eq!(&data[200..300], &part[..]);
        assert!(data[300..].iter().all(|&b| b == 0xFF));
        assert_eq!(v.oob[1], 7);
        assert!(v.oob.iter().enumerate().all(|(i, &b)| i == 1 || b == 0xFF));
    }

    #[test]
    fn block_meta_round_trips_through_its_encoding() {
        let m = BlockMeta {
            erase_count: 123_456,
            wear_ppt: 999,
            mode: CellMode::Pslc,
            state: BlockState::NeedsErase,
            next_page: 77,
            programmed_at_ns: u64::MAX - 5,
        };
        assert_eq!(BlockMeta::decode(&m.encode()).unwrap(), m);
        let mut bad = m.encode();
        bad[13] = 9;
        assert!(BlockMeta::decode(&bad).is_err());
    }
}
