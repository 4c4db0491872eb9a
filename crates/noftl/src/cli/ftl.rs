//! `noftl ftl memory`: the mapping memory each FTL needs in the controller at a capacity.

use clap::Subcommand;

use super::common::parse_size;
use super::device::human_bytes;

#[derive(Debug, Subcommand)]
pub enum FtlCommand {
    /// Mapping memory of each FTL at a capacity (4 KiB pages, 512 KiB blocks, 4-byte entries).
    Memory {
        /// Device capacity, e.g. 512GiB or 1TiB.
        #[arg(long, default_value = "512GiB", value_parser = parse_size)]
        capacity: u64,
        /// Flash page size (4, 8 or 16 KiB; blocks of 128 pages): the page-mapped FTLs map
        /// 4 KiB units inside larger pages, the block-mapped ones whole pages.
        #[arg(long, default_value = "4KiB", value_parser = parse_size)]
        page_size: u64,
        /// Write JSON to this file instead of a table ("-" or no value: standard output).
        #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
        json: Option<std::path::PathBuf>,
    },
}

pub fn run(c: FtlCommand) -> anyhow::Result<()> {
    match c {
        FtlCommand::Memory {
            capacity,
            page_size,
            json,
        } => {
            if capacity == 0 {
                anyhow::bail!("--capacity must be positive");
            }
            if !matches!(page_size, 4096 | 8192 | 16384) {
                anyhow::bail!("--page-size must be 4KiB, 8KiB or 16KiB (got {page_size} bytes)");
            }
            let mut rows = ftl::memory::table_for(capacity, page_size);
            // ALFS keeps its metadata tables in host memory instead (the AMF slides' TIMB).
            // Segment: one 512 KiB block of each of AMF's 8 channels x 4 ways (16 MiB).
            let seg_bytes = 32 * ftl::memory::BLOCK_BYTES;
            match lfs::host_table_bytes(capacity, seg_bytes) {
                Ok(bytes) => rows.push(ftl::memory::MemoryRow {
                    ftl: "alfs-host".into(),
                    bytes,
                    note: format!(
                        "host, not device: ALFS's NAT (1 node id per 2 pages) and SIT blocks, \
                         16 MiB segments (docs/lfs.md){}",
                        slides_timb(capacity)
                    ),
                }),
                // A geometry our format refuses has no row (and says why).
                Err(e) => eprintln!("noftl ftl memory: no alfs-host row: {e}"),
            }
            if json.is_some() && !super::common::emit_json(json.as_deref(), &rows)? {
                return Ok(());
            }
            println!(
                "mapping memory at {} with {} KiB flash pages",
                human_bytes(capacity),
                page_size / 1024
            );
            for r in rows {
                println!("  {:<10} {:>12}  {}", r.ftl, human_bytes(r.bytes), r.note);
            }
            Ok(())
        }
    }
}

/// The AMF slides' host memory for ALFS (TIMB) where they give it, to print beside ours.
fn slides_timb(capacity: u64) -> &'static str {
    match capacity {
        c if c == 512 << 30 => "; AMF slides' TIMB: 5.3 MB",
        c if c == 1 << 40 => "; AMF slides' TIMB: 10.8 MB",
        _ => "",
    }
}
