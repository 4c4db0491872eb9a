//! `noftl serve`: export an FTL as a Network Block Device. (Being built: see issue 3.)

use clap::Args;

#[derive(Debug, Args)]
pub struct ServeArgs {}

pub fn run(_args: ServeArgs) -> anyhow::Result<()> {
    anyhow::bail!("noftl serve is not built yet")
}
