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
            let rows = ftl::memory::table(capacity);
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
