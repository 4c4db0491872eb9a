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
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(c: FtlCommand) -> anyhow::Result<()> {
    match c {
        FtlCommand::Memory { capacity, json } => {
            if capacity == 0 {
                anyhow::bail!("--capacity must be positive");
            }
            let mut rows = ftl::memory::table(capacity);
            // ALFS keeps its metadata tables in host memory instead (the AMF slides' TIMB).
            // Segment: one 512 KiB block of each of AMF's 8 channels x 4 ways (16 MiB).
            let seg_bytes = 32 * ftl::memory::BLOCK_BYTES;
            rows.push(ftl::memory::MemoryRow {
                ftl: "alfs-host".into(),
                bytes: lfs::host_table_bytes(capacity, seg_bytes),
                note: "host, not device: ALFS's NAT and SIT blocks (docs/lfs.md), 16 MiB segments"
                    .into(),
            });
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
                return Ok(());
            }
            println!("mapping memory at {}", human_bytes(capacity));
            for r in rows {
                println!("  {:<10} {:>12}  {}", r.ftl, human_bytes(r.bytes), r.note);
            }
            Ok(())
        }
    }
}
