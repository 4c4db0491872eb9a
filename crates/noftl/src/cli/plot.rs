//! `noftl plot`: figures from the result files the other verbs write, as SVG or PNG (by
//! `--out`'s extension). The kinds, how `auto` picks one, and the drawing are the `plot`
//! crate's (crates/plot); this verb parses the flags, names the command that made the figure
//! and writes the file atomically.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Result files: `noftl compare` JSON or result directory (figure3), a sweep's directory or
    /// results.csv (waf), result directories or their raw.csv (cdf) or samples.csv (timeseries),
    /// one `noftl ipa compare --json` file (table-i) or `noftl iaa compare --json` file or result
    /// directory (iaa), one `noftl reproduce --json` file (fidelity: ours against the paper).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The file to write: FILE.svg or FILE.png.
    #[arg(long)]
    pub out: PathBuf,
    /// auto | figure3 | waf | cdf | timeseries | table-i | iaa | fidelity
    #[arg(long, default_value = "auto")]
    pub kind: String,
}

pub fn run(args: PlotArgs) -> anyhow::Result<()> {
    // The figure never replaces one of its inputs (the output rule).
    let inputs: Vec<_> = args
        .inputs
        .iter()
        .map(|p| ("input", Some(p.as_path())))
        .collect();
    super::common::check_outputs(&inputs, &[Some(&args.out)])?;
    let format = ::plot::Format::of_path(&args.out)?;
    let kind = ::plot::kind(&args.kind, &args.inputs[0])?;
    let bytes = ::plot::draw(&args.inputs, kind, format, &command_line())?;
    lab::output::write_atomic(&args.out, &bytes)?;
    eprintln!("{kind}: {}", args.out.display());
    Ok(())
}

/// This process's command line, the program by its file name: where a user's build happens to
/// lie says nothing to the figure's readers (and would put a private path into a published
/// file).
fn command_line() -> String {
    let command: Vec<String> = std::env::args()
        .enumerate()
        .map(|(i, a)| {
            if i == 0 {
                std::path::Path::new(&a)
                    .file_name()
                    .map_or(a.clone(), |n| n.to_string_lossy().into_owned())
            } else {
                a
            }
        })
        .collect();
    command.join(" ")
}
