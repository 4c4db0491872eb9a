//! `noftl completions SHELL` and `noftl man`: shell completions and roff man pages, generated
//! from the command line's own clap definitions (so they cannot drift from `--help`). Those
//! definitions live above this module (`cli::Cli`): the caller hands them in as a
//! `clap::Command` (`Cli::command()`), so this module never names the top of the command line.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to write the completion script for (to standard output), e.g.
    /// `noftl completions bash > /etc/bash_completion.d/noftl`.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write one roff page per command into this directory (created if missing): noftl.1,
    /// noftl-bench.1, noftl-bench-tpcb.1, ... Without it, the top page goes to standard output.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Writes the completion script of `cmd` (the whole command line: `Cli::command()`).
pub fn completions(a: CompletionsArgs, mut cmd: clap::Command) -> anyhow::Result<()> {
    let name = cmd.get_name().to_string();
    clap_complete::generate(a.shell, &mut cmd, name, &mut std::io::stdout());
    Ok(())
}

/// Writes the man pages of `cmd` (the whole command line: `Cli::command()`).
pub fn man(a: ManArgs, cmd: clap::Command) -> anyhow::Result<()> {
    match a.out {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            // As `clap_mangen::generate_to` does, but each page through the output rule
            // (`lab::output`: regular files only, no link followed onto another file unjudged).
            let mut cmd = cmd.disable_help_subcommand(true);
            cmd.build();
            write_pages(cmd, &dir)?;
        }
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?,
    }
    Ok(())
}

/// The man page of `cmd` and of each of its visible subcommands, written into `dir`.
fn write_pages(cmd: clap::Command, dir: &std::path::Path) -> anyhow::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        write_pages(sub, dir)?;
    }
    let man = clap_mangen::Man::new(cmd);
    let mut page = Vec::new();
    man.render(&mut page)?;
    lab::output::write_atomic(&dir.join(man.get_filename()), &page)?;
    Ok(())
}
