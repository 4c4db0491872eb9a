//! Figures from the result files the experiment verbs write (never from a run's memory), as SVG
//! or PNG made with the `plotters` crate: what `noftl plot` writes and the dashboard shows. Text
//! is set in DejaVu Sans, compiled into the crate (`assets/fonts`): no system font is needed.
//!
//! Kinds:
//! - `figure3`: `noftl compare` JSON files (one per workload and scale): NoFTL Fig. 3 as grouped
//!   bars, one group per workload and scale, one bar per store, the bar the slowdown against
//!   `native` (native = 1) with the run-to-run standard deviation as an error bar and the factor
//!   written above it.
//! - `waf`: a sweep's `results.csv` (or its directory) of `noftl io` jobs: WAF against the
//!   spare factor on a logarithmic axis, one line per FTL and GC policy (colour = policy, line
//!   style and marker = FTL), with the analytic FIFO and random-victim curves (`ftl::theory`) in
//!   black; the legend beside the plot counts the jobs without a point (failed, timed out).
//! - `cdf`: result directories' `raw.csv` (`--results DIR --raw`, docs/results.md): the latency
//!   CDF on a logarithmic latency axis, one line per input (per row for a comparison: its
//!   store, configuration, or free space and scheme).
//! - `timeseries`: result directories' `samples.csv`: throughput (goodput, or IOPS), GC
//!   migrations per second and free blocks over time, one line per input (per row for a
//!   comparison, as for `cdf`; its repeats one after the other).
//! - `table-i`: one `noftl ipa compare --json` file: IPA Table I as bars in three panels (GC
//!   migrations and erases per host write, throughput with its standard deviation), one bar
//!   per configuration, each IPA bar (`ipa-X`) labelled with its change against its control
//!   row `X` (`regions` for `ipa-regions`, `global` for `ipa-global`) and against `baseline`.
//! - `iaa`: one `noftl iaa compare --json` file or result directory: IAA Fig. 11, against the
//!   device's free space one line per scheme: throughput relative to `conventional`, erases
//!   per 1000 queries (or GC copies per host write) and energy relative to `conventional`.
//!
//! `auto` picks the kind from the input: a result directory of `compare` (its `summary.json`
//! has `rows`) is Figure 3, a JSON file is Table I when its rows have `ipa_appends`, the IAA
//! sweep when they have `free_space`, else Figure 3, another result directory (`summary.json`)
//! a time series, a `raw.csv` a CDF, a `samples.csv` a time series, any other directory or
//! `.csv` a sweep (WAF). The command that made a figure is written into it (an SVG comment, a PNG
//! `tEXt` chunk "Comment"), so a figure found alone says how to remake it.
//!
//! Invariants: a figure is a function of its input files and the command written into it, so
//! the same files give the same bytes (the page is `style::SIZE`, 960 x 540 pixels, fonts are
//! embedded); an input of the wrong kind is refused with an error saying what was expected
//! (for a JSON result, the verb that writes the right one), never drawn as a figure of missing
//! values; a JSON kind (`table-i`, `iaa`) draws exactly one file. The crate reads files and returns bytes: where they are written is
//! the caller's (the CLI writes them atomically).
//!
//! Modules bottom-up: `style` (page size, palette, bars, markers, legend strip) and `input`
//! (JSON and CSV result files); `render` (the `Draw` seam, SVG and PNG encoding, the font);
//! one module per kind (`figure3`, `waf`, `cdf`, `timeseries`, `table_i`, `iaa`, `fidelity`: its data, how
//! it is read, how it is drawn); this file (the kind from an input, the command comment).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde_json::Value as Json;

mod input;
mod render;
mod style;

pub mod cdf;
pub mod fidelity;
pub mod figure3;
pub mod iaa;
pub mod table_i;
pub mod timeseries;
pub mod waf;

pub use cdf::{cdf_points, CdfSeries};
pub use fidelity::{fidelity, fidelity_of, FidelityData, FidelityPoint};
pub use figure3::{bars_of, figure3, Bar};
pub use iaa::{iaa, iaa_of, IaaData, IaaLine};
pub use table_i::{relative_change, table_i, table_i_of, IpaRow, TableI};
pub use timeseries::TimeSeries;
pub use waf::{waf, WafData, WafPoint};

use input::read_json;
use render::{render_png, render_svg, Draw};

/// The kinds of figure, as `--kind` names them (`auto` picks one from the input).
pub const KINDS: [&str; 7] = [
    "figure3",
    "waf",
    "cdf",
    "timeseries",
    "table-i",
    "iaa",
    "fidelity",
];

/// The output format, from `--out`'s extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    /// The format of the file `out` names: `.svg` or `.png`, else an error.
    pub fn of_path(out: &Path) -> anyhow::Result<Format> {
        match out.extension().and_then(|e| e.to_str()) {
            Some("svg") => Ok(Format::Svg),
            Some("png") => Ok(Format::Png),
            _ => bail!(
                "--out {}: SVG or PNG is written (name it .svg or .png)",
                out.display()
            ),
        }
    }
}

/// The kind `name` asks for (`auto`: the one `first_input` calls for), or an error listing the
/// kinds.
pub fn kind(name: &str, first_input: &Path) -> anyhow::Result<&'static str> {
    match name {
        "auto" => Ok(auto_kind(first_input)),
        k => match KINDS.iter().find(|&&known| known == k) {
            Some(known) => Ok(known),
            None => Err(unknown_kind(k)),
        },
    }
}

/// The figure of `kind` (one of `KINDS`) drawn from `inputs`, as the bytes of a `format` file
/// that names `command` as its maker (an SVG comment, a PNG `tEXt` chunk "Comment").
pub fn draw(
    inputs: &[PathBuf],
    kind: &str,
    format: Format,
    command: &str,
) -> anyhow::Result<Vec<u8>> {
    match kind {
        "figure3" => encode(&*figure3::load_compares(inputs)?, format, command),
        "waf" => encode(&waf::load_waf_points(inputs)?, format, command),
        "cdf" => encode(&*cdf::load_cdfs(inputs)?, format, command),
        "table-i" => encode(&one_json(inputs, table_i_of)?, format, command),
        "iaa" => encode(&one_json(inputs, iaa_of)?, format, command),
        "fidelity" => encode(&one_json(inputs, fidelity_of)?, format, command),
        "timeseries" => encode(&*timeseries::load_timeseries(inputs)?, format, command),
        other => Err(unknown_kind(other)),
    }
}

fn unknown_kind(k: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "unknown plot kind '{k}' (auto, figure3, waf, cdf, timeseries, table-i, iaa, fidelity)"
    )
}

/// `fig` as a file of `format` with `command` written into it.
fn encode<F: Draw + ?Sized>(fig: &F, format: Format, command: &str) -> anyhow::Result<Vec<u8>> {
    Ok(match format {
        Format::Svg => with_command_comment(&render_svg(fig)?, command).into_bytes(),
        Format::Png => render_png(fig, &format!("made by: {command}"))?,
    })
}

/// The kind `auto` picks for `input` (module doc).
fn auto_kind(input: &Path) -> &'static str {
    let summary = lab::results::find(input, "summary.json");
    if let Some(summary) = summary.filter(|_| input.is_dir()) {
        // A result directory: its summary.json tells the verb (an `ipa compare` directory is
        // IPA Table I, a `compare` directory NoFTL Fig. 3, a bench's or io's a time series).
        return match json_kind(&summary) {
            "figure3" if !has_rows(&summary) => "timeseries",
            k => k,
        };
    }
    let name = input.file_name().and_then(|n| n.to_str()).unwrap_or("");
    match name {
        _ if name.ends_with("raw.csv") => "cdf",
        _ if name.ends_with("samples.csv") => "timeseries",
        _ if input.is_dir() || name.ends_with(".csv") => "waf",
        _ => json_kind(input),
    }
}

fn has_rows(path: &Path) -> bool {
    read_json(path).is_ok_and(|v| v["rows"].is_array())
}

/// The kind of a verb's JSON result: the verbs' rows differ in their fields (`ipa compare`
/// rows count appends, `iaa compare` rows carry the free space of their point).
fn json_kind(path: &Path) -> &'static str {
    let v = read_json(path).ok();
    if v.as_ref().is_some_and(|v| v["cells"].is_array()) {
        return "fidelity";
    }
    let first_row = v.map(|v| v["rows"][0].clone());
    match first_row {
        Some(r) if r.get("ipa_appends").is_some() => "table-i",
        Some(r) if r.get("free_space").is_some() => "iaa",
        _ => "figure3",
    }
}

/// The figure of a kind drawn from exactly one JSON file (one run's table or sweep).
fn one_json<T>(inputs: &[PathBuf], of: fn(&Json) -> anyhow::Result<T>) -> anyhow::Result<T> {
    let [input] = inputs else {
        bail!("this kind draws one JSON file, not {}", inputs.len());
    };
    of(&read_json(input)?).with_context(|| format!("in {}", input.display()))
}

fn with_command_comment(svg: &str, command: &str) -> String {
    // "--" may not appear inside an XML comment.
    let safe = command.replace("--", "- -");
    match svg.find('>') {
        Some(i) => format!("{}\n<!-- made by: {safe} -->{}", &svg[..=i], &svg[i + 1..]),
        None => svg.to_string(),
    }
}
