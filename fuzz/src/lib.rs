//! Fuzz targets: every parser of user input and every decoder of what sits on flash, each a
//! function of arbitrary bytes that must return (an error is fine) without a panic, an
//! allocation abort or a hang.
//!
//! Why a crate of its own: the targets reach across the layers (nbd, storage, dfs, lfs, plot,
//! ftl, nand); none of those crates may import the others upward. The targets build on the
//! stable toolchain in the workspace; `tests/corpus.rs` replays every committed input
//! (`fuzz/corpus/TARGET/`, and `fuzz/regressions/TARGET/` for crashes found) and runs a short
//! seeded mutation of each in `cargo test`. Coverage-guided runs use AFL++ through cargo-afl
//! (`scripts/fuzz.sh`, the `afl` feature), which needs no special toolchain either.
//!
//! Targets that open a flash image (`ftl_flash`, `dfs_flash`, `native_flash`) program a small
//! device page by page from the input: each chunk names a block, an OOB record (kind, key,
//! sequence number: encoded with its CRC, so the decoders behind the record check are reached)
//! and the page's bytes. The device then holds what a hostile or damaged image could hold, and
//! the FTLs', DFS's and the native store's recovery must refuse it or mount it, never crash.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ftl::oob::{OobRecord, PageKind};
use ftl::{BlockDevice, FtlOptions, MemDisk};
use nand::{DeviceConfig, Nand, Pbn, Ppn, Purpose};

/// A fuzz target: a name (the corpus directory's) and the function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const TARGETS: &[Target] = &[
    ("nbd", nbd_session),
    ("nbd_options", nbd_options),
    ("ddl", ddl),
    ("device_toml", device_toml),
    ("oob_record", oob_record),
    ("region_table", region_table),
    ("log_record", log_record),
    ("catalog_entry", catalog_entry),
    ("lfs_meta", lfs_meta),
    ("plot", plot_readers),
    ("ftl_flash", ftl_flash),
    ("dfs_flash", dfs_flash),
    ("native_flash", native_flash),
];

/// The target named `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|t| t.0 == name).map(|t| t.1)
}

/// Inputs past this size are cut: every decoder bounds its own input, and larger inputs only
/// slow the fuzzer down.
const MAX_INPUT_BYTES: usize = 64 << 10;

fn cut(data: &[u8]) -> &[u8] {
    &data[..data.len().min(MAX_INPUT_BYTES)]
}

// ----- NBD -----------------------------------------------------------------------------------

/// An in-memory client: the input is everything it sends; what the server writes is dropped.
struct Client<'a>(&'a [u8]);

impl Read for Client<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl nbd::conn::TimedRead for Client<'_> {
    fn set_read_timeout(&mut self, _: Option<Duration>) -> std::io::Result<()> {
        Ok(())
    }
}

struct Sink;

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Open;
impl nbd::conn::Session for Open {}

/// A whole NBD session from the client's bytes: the handshake (options, export names, info
/// and meta-context requests) and the transmission phase (request headers, payloads, reads,
/// writes, trims, block status) on a 1 MiB RAM disk.
pub fn nbd_session(data: &[u8]) {
    let export = nbd::Export::new(Box::new(MemDisk::new(256)), nand::ClockMode::None);
    let timeouts = nbd::conn::Timeouts {
        accepted: Instant::now(),
        handshake: Duration::from_secs(3600),
        request: Duration::from_secs(3600),
    };
    let _ = nbd::conn::serve(&export, Client(cut(data)), Sink, &|| {}, &Open, &timeouts);
}

/// The NBD option and request decoders alone: a request header, then the rest as an info and
/// a meta-context request.
pub fn nbd_options(data: &[u8]) {
    use nbd::proto::{InfoRequest, MetaRequest, RequestHeader, REQUEST_HEADER_BYTES};
    if let Some(h) = data.get(..REQUEST_HEADER_BYTES) {
        let mut b = [0u8; REQUEST_HEADER_BYTES];
        b.copy_from_slice(h);
        if let Ok(r) = RequestHeader::decode(&b) {
            let _ = r.command();
            let _ = r.payload_bytes();
        }
    }
    let rest = data
        .get(REQUEST_HEADER_BYTES.min(data.len())..)
        .unwrap_or(&[]);
    for d in [data, rest] {
        if let Some(i) = InfoRequest::parse(d) {
            let _ = i.infos().count();
        }
        let _ = MetaRequest::parse(d);
    }
}

// ----- text inputs ---------------------------------------------------------------------------

/// CREATE TABLE / INDEX / REGION statements (the DDL of `noftl shell` and the benchmarks).
pub fn ddl(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(cut(data)) {
        let _ = storage::ddl::parse(s);
    }
}

/// A device TOML (`--config`), then the lines of the input as `--set` overrides on a preset.
pub fn device_toml(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(cut(data)) else {
        return;
    };
    if let Ok(cfg) = DeviceConfig::from_toml(s, &[]) {
        probe_config(&cfg);
    }
    let sets: Vec<String> = s.lines().take(16).map(str::to_string).collect();
    if let Ok(cfg) = DeviceConfig::preset("tiny", &sets) {
        probe_config(&cfg);
    }
}

/// What the tools ask of an accepted config before they build a device.
fn probe_config(cfg: &DeviceConfig) {
    let _ = cfg.validate();
    let _ = cfg.geometry.pages();
    let _ = cfg.pages_in_mode(cfg.cell.native);
}

/// The plot and result readers: the input as a JSON file, drawn as every figure kind.
pub fn plot_readers(data: &[u8]) {
    let data = cut(data);
    if serde_json::from_slice::<serde_json::Value>(data).is_err() {
        return;
    }
    let path = scratch_path("plot.json");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    for kind in plot::KINDS {
        let _ = plot::draw(std::slice::from_ref(&path), kind, plot::Format::Svg, "fuzz");
    }
}

fn scratch_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("noftl-fuzz-{}-{name}", std::process::id()))
}

// ----- on-flash records ----------------------------------------------------------------------

/// The OOB record of every FTL page, classified as recovery does.
/// The input as it is, and with its CRC made right, so that the checks behind it are reached.
pub fn oob_record(data: &[u8]) {
    let _ = OobRecord::classify(data);
    if data.len() >= ftl::oob::OOB_RECORD_BYTES {
        let mut b = data[..ftl::oob::OOB_RECORD_BYTES].to_vec();
        let crc = crc32fast::hash(&b[..28]);
        b[28..32].copy_from_slice(&crc.to_le_bytes());
        if let Some(r) = OobRecord::decode(&b) {
            let mut again = vec![0xFF; b.len()];
            r.encode_into(&mut again);
            assert_eq!(
                OobRecord::decode(&again),
                Some(r),
                "a record decodes as encoded"
            );
        }
    }
}

/// The native store's region table.
pub fn region_table(data: &[u8]) {
    let _ = storage::region::decode_table(cut(data));
}

/// The engine's log records.
pub fn log_record(data: &[u8]) {
    let _ = storage::log::LogRecord::decode(cut(data));
}

/// The engine's catalog entries.
pub fn catalog_entry(data: &[u8]) {
    let _ = storage::catalog::Entry::decode(cut(data));
}

/// ALFS metadata blocks: superblock, checkpoint pack (the input as a whole pack of any
/// length, and its first block), node footer, inode, SIT entries, directory entries, each
/// decoded from the input as a whole block.
pub fn lfs_meta(data: &[u8]) {
    use lfs::layout::{decode_dirent, Checkpoint, Footer, Inode, SitEntry, Superblock};
    use lfs::layout::{BLOCK_BYTES, DIRENT_BYTES, SIT_BYTES};
    let mut b = vec![0u8; BLOCK_BYTES];
    let n = data.len().min(BLOCK_BYTES);
    b[..n].copy_from_slice(&data[..n]);
    let _ = Superblock::decode(&b);
    let _ = Checkpoint::decode_pack(data);
    let _ = Checkpoint::decode_pack(&b);
    if let Ok(sb) = Superblock::decode(&b) {
        let _ = sb.validate(u64::from(u32::MAX));
    }
    let _ = Footer::decode(&b);
    let _ = Inode::decode(&b);
    for e in b.chunks_exact(SIT_BYTES) {
        let _ = SitEntry::decode(e);
    }
    for e in b.chunks_exact(DIRENT_BYTES) {
        let _ = decode_dirent(e);
    }
}

// ----- flash images --------------------------------------------------------------------------

/// A small SLC device: 2 channels x 2 chips x 2 planes x `blocks_per_plane` x 16 pages of 4 KiB.
fn small_nand_of(blocks_per_plane: u32) -> Option<Nand> {
    let sets = [
        format!("geometry.blocks_per_plane={blocks_per_plane}"),
        "reliability.factory_bad_block_ratio=0".into(),
        "reliability.rber_fresh=0".into(),
        "reliability.rber_at_endurance=0".into(),
    ];
    Nand::new(DeviceConfig::preset("tiny", &sets).ok()?).ok()
}

/// The device of the FTL and DFS targets (6 blocks per plane: 768 pages).
fn small_nand() -> Option<Nand> {
    small_nand_of(6)
}

/// The native store's device: its log needs the tiny preset's 16 blocks per plane.
pub fn native_device() -> Option<Nand> {
    small_nand_of(16)
}

/// Inputs of the flash targets may hold a few whole pages.
const MAX_FLASH_INPUT_BYTES: usize = 256 << 10;

/// Programs `nand` from the input, chunk by chunk: `[block, kind, key u32, seq u32, aux u8,
/// oob len u8, data len u16, oob bytes, data bytes]` (integers little-endian). The page is the
/// next free page of the block. Kinds 1-6 put an OOB record of that `PageKind` with its CRC
/// first in the OOB (then the OOB bytes after it), any other kind the OOB bytes alone; the
/// data bytes repeat to fill the page (a whole page's worth is the page exactly).
pub fn program_from(nand: &mut Nand, data: &[u8]) {
    let geo = nand.geometry().clone();
    let page_bytes = geo.page_size_bytes as usize;
    let oob_bytes = geo.oob_size_bytes as usize;
    let mut page = vec![0u8; page_bytes];
    let mut oob = vec![0xFFu8; oob_bytes];
    let mut next = vec![0u32; geo.blocks() as usize];
    let mut d = &data[..data.len().min(MAX_FLASH_INPUT_BYTES)];
    while d.len() >= CHUNK_HEADER_BYTES {
        let block = u32::from(d[0]) % geo.blocks();
        let kind = d[1];
        let key = u64::from(u32::from_le_bytes([d[2], d[3], d[4], d[5]]));
        let seq = u64::from(u32::from_le_bytes([d[6], d[7], d[8], d[9]]));
        let aux = u64::from(d[10]);
        let rest = &d[CHUNK_HEADER_BYTES..];
        let oob_len = usize::from(d[11]).min(rest.len());
        let data_len = usize::from(u16::from_le_bytes([d[12], d[13]])).min(rest.len() - oob_len);
        let (raw_oob, rest) = rest.split_at(oob_len);
        let fill = &rest[..data_len];
        d = &rest[data_len..];
        if next[block as usize] >= geo.pages_per_block {
            continue;
        }
        page.fill(0);
        if !fill.is_empty() {
            for (i, b) in page.iter_mut().enumerate() {
                *b = fill[i % fill.len()];
            }
        }
        oob.fill(0xFF);
        let at = match kind_of(kind) {
            Some(k) => {
                OobRecord::new(k, key, seq, aux).encode_into(&mut oob);
                ftl::oob::OOB_RECORD_BYTES
            }
            None => 0,
        };
        let n = raw_oob.len().min(oob_bytes.saturating_sub(at));
        oob[at..at + n].copy_from_slice(&raw_oob[..n]);
        let ppn = Ppn(geo.first_page(Pbn(block)).0 + u64::from(next[block as usize]));
        next[block as usize] += 1;
        let _ = nand.program(0, ppn, &page, &oob, Purpose::Host);
    }
}

/// Bytes of a chunk's header in [`program_from`]'s input.
pub const CHUNK_HEADER_BYTES: usize = 14;

/// The chunk of [`program_from`] that programs `data` and `oob` (raw, kind 0) into `block`.
pub fn raw_chunk(block: u8, oob: &[u8], data: &[u8]) -> Vec<u8> {
    let oob = &oob[..oob.len().min(255)];
    let data = &data[..data.len().min(u16::MAX as usize)];
    let mut c = vec![block, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, oob.len() as u8];
    c.extend_from_slice(&(data.len() as u16).to_le_bytes());
    c.extend_from_slice(oob);
    c.extend_from_slice(data);
    c
}

/// The device the flash targets program (`small_nand`), for the seed corpus.
pub fn flash_device() -> Option<Nand> {
    small_nand()
}

fn kind_of(k: u8) -> Option<PageKind> {
    Some(match k {
        1 => PageKind::Data,
        2 => PageKind::Translation,
        3 => PageKind::Trim,
        4 => PageKind::Checkpoint,
        5 => PageKind::Pad,
        6 => PageKind::MapCheckpoint,
        _ => return None,
    })
}

/// Every FTL's recovery (`ftl::open`) on a device programmed from the input: OOB records,
/// trim records, checkpoints and map checkpoints, translation pages. A device it accepts is
/// read through once.
pub fn ftl_flash(data: &[u8]) {
    let opts = FtlOptions {
        spare_factor: 0.3,
        ..FtlOptions::default()
    };
    for kind in ["page", "dftl", "block", "fast", "amf"] {
        let Some(mut nand) = small_nand() else {
            return;
        };
        program_from(&mut nand, data);
        if let Ok(mut dev) = ftl::open(kind, nand, &opts) {
            read_all(dev.as_mut());
        }
    }
}

fn read_all(dev: &mut dyn BlockDevice) {
    let mut buf = vec![0u8; ftl::LOGICAL_PAGE_BYTES];
    for lpn in 0..dev.capacity_pages() {
        let _ = dev.read(0, lpn, &mut buf);
    }
}

/// DFS's mount with its check (`fsck`) on a device programmed from the input: its VSL log
/// records, checkpoint pages, superblock, inodes and directory entries.
pub fn dfs_flash(data: &[u8]) {
    let Some(mut nand) = small_nand() else {
        return;
    };
    program_from(&mut nand, data);
    let _ = dfs::Dfs::open_checking(nand, &dfs_config());
}

/// The VSL settings of `dfs_flash` (an atomic-write bound the small device can hold).
pub fn dfs_config() -> dfs::VslConfig {
    dfs::VslConfig {
        max_atomic_blocks: 8,
        ..dfs::VslConfig::default()
    }
}

/// The native store's open (map checkpoints, region table, master record) on a device
/// programmed from the input.
pub fn native_flash(data: &[u8]) {
    let Some(mut nand) = native_device() else {
        return;
    };
    program_from(&mut nand, data);
    let _ = storage::NativeStore::open(nand, native_config());
}

/// The native store's settings on `native_device` (a 64-page log, as a small device holds).
pub fn native_config() -> storage::NativeConfig {
    storage::NativeConfig {
        log_blocks: Some(64),
        spare_factor: 0.3,
        ..storage::NativeConfig::default()
    }
}
