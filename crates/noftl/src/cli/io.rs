pub fn run(_a: IoArgs) -> anyhow::Result<()> { Ok(()) }
#[derive(Debug, clap::Args)] pub struct IoArgs {}
