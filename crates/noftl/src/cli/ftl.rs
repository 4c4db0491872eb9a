//! `noftl ftl ...`: facts about the FTLs. (Being built: see issue 3.)

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum FtlCommand {
    /// Mapping memory of each FTL at a capacity.
    Memory,
}

pub fn run(_c: FtlCommand) -> anyhow::Result<()> {
    anyhow::bail!("noftl ftl memory is not built yet")
}
