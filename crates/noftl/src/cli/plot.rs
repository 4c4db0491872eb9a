//! `noftl plot`: figures from the result files the other verbs write (never from a run's
//! memory), as SVG or PNG (by `--out`'s extension) made with the `plotters` crate. Text is set
//! in DejaVu Sans, compiled into the binary (`assets/fonts`): no system font is needed.
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
//!   device's free space one line per scheme: throughput relative to `conventional`, erases per 1000 queries (or GC
//!   copies per host write) and energy relative to `conventional`.
//!
//! `auto` picks the kind from the input: a result directory of `compare` (its `summary.json`
//! has `rows`) is Figure 3, a JSON file is Table I when its rows have `ipa_appends`, the IAA
//! sweep when they have `free_space`, else Figure 3, another result directory (`summary.json`) a time
//! series, a `raw.csv` a CDF, a `samples.csv` a time series, any other directory or `.csv` a
//! sweep (WAF). The command that made a figure is written into it (an SVG comment, a PNG
//! `tEXt` chunk "Comment"), so a figure found alone says how to remake it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value as Json;

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Result files: `noftl compare` JSON or result directory (figure3), a sweep's directory or
    /// results.csv (waf), result directories or their raw.csv (cdf) or samples.csv (timeseries),
    /// one `noftl ipa compare --json` file (table-i) or `noftl iaa compare --json` file or result
    /// directory (iaa).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The file to write: FILE.svg or FILE.png.
    #[arg(long)]
    pub out: PathBuf,
    /// auto | figure3 | waf | cdf | timeseries | table-i | iaa
    #[arg(long, default_value = "auto")]
    pub kind: String,
}

/// The output format, from `--out`'s extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Svg,
    Png,
}

/// A figure's data, ready to draw.
#[derive(Debug)]
enum Figure {
    Figure3(Vec<Bar>),
    Waf(WafData),
    Cdf(Vec<CdfSeries>),
    Timeseries(Vec<TimeSeries>),
    TableI(TableI),
    Iaa(IaaData),
}

/// DejaVu Sans (assets/fonts, its licence beside it), registered once as "sans-serif": the
/// only family the figures use, so that neither format needs a system font.
fn register_font() -> anyhow::Result<()> {
    static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
    static DONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    if !ok {
        bail!("the embedded font cannot be read");
    }
    Ok(())
}

fn draw_on<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, fig: &Figure) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    match fig {
        Figure::Figure3(b) => figure3_on(root, b),
        Figure::Waf(w) => waf_on(root, w),
        Figure::Cdf(c) => cdf_on(root, c),
        Figure::Timeseries(t) => timeseries_on(root, t),
        Figure::TableI(t) => table_i_on(root, t),
        Figure::Iaa(d) => iaa_on(root, d),
    }
}

/// The figure as an SVG document.
fn render_svg(fig: &Figure) -> anyhow::Result<String> {
    register_font()?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        draw_on(&root, fig)?;
        root.present().map_err(to_anyhow)?;
    }
    Ok(svg)
}

/// The figure as PNG bytes (RGB, `SIZE`), with `comment` in a `tEXt` chunk.
fn render_png(fig: &Figure, comment: &str) -> anyhow::Result<Vec<u8>> {
    register_font()?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("figure.png");
    {
        let root = BitMapBackend::new(&path, SIZE).into_drawing_area();
        draw_on(&root, fig)?;
        root.present().map_err(to_anyhow)?;
    }
    let png = std::fs::read(&path)?;
    Ok(png_with_text(&png, "Comment", comment))
}

/// CRC-32 (ISO-HDLC, PNG's) of `bytes`.
fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// `png` with a `tEXt` chunk (`key`, Latin-1 `text`) after its IHDR (which ends at byte 33).
fn png_with_text(png: &[u8], key: &str, text: &str) -> Vec<u8> {
    const IHDR_END: usize = 8 + 4 + 4 + 13 + 4;
    if png.len() < IHDR_END || &png[12..16] != b"IHDR" {
        return png.to_vec();
    }
    let mut data = Vec::new();
    data.extend_from_slice(b"tEXt");
    data.extend_from_slice(key.as_bytes());
    data.push(0);
    data.extend(
        text.chars()
            .map(|c| if (c as u32) < 256 { c as u8 } else { b'?' }),
    );
    let mut out = Vec::with_capacity(png.len() + data.len() + 8);
    out.extend_from_slice(&png[..IHDR_END]);
    out.extend_from_slice(&((data.len() - 4) as u32).to_be_bytes());
    out.extend_from_slice(&data);
    out.extend_from_slice(&crc32(&data).to_be_bytes());
    out.extend_from_slice(&png[IHDR_END..]);
    out
}

/// The kind `auto` picks for `input` (module doc).
fn auto_kind(input: &Path) -> &'static str {
    let summary = input.join("summary.json");
    if input.is_dir() && summary.is_file() {
        // A result directory: its summary.json tells the verb (an `ipa compare` directory is
        // IPA Table I, a `compare` directory NoFTL Fig. 3, a bench's or io's a time series).
        return match json_kind(&summary) {
            "figure3" if !has_rows(&summary) => "timeseries",
            k => k,
        };
    }
    let name = input.file_name().and_then(|n| n.to_str()).unwrap_or("");
    match name {
        "raw.csv" => "cdf",
        "samples.csv" => "timeseries",
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
    let first_row = read_json(path).ok().map(|v| v["rows"][0].clone());
    match first_row {
        Some(r) if r.get("ipa_appends").is_some() => "table-i",
        Some(r) if r.get("free_space").is_some() => "iaa",
        _ => "figure3",
    }
}

/// Width and height in pixels: readable at a paper's column width when scaled down.
const SIZE: (u32, u32) = (960, 540);

pub fn run(args: PlotArgs) -> anyhow::Result<()> {
    lab::output::check_writable(&args.out)?;
    let format = match args.out.extension().and_then(|e| e.to_str()) {
        Some("svg") => Format::Svg,
        Some("png") => Format::Png,
        _ => bail!(
            "--out {}: SVG or PNG is written (name it .svg or .png)",
            args.out.display()
        ),
    };
    let kind = match args.kind.as_str() {
        "auto" => auto_kind(&args.inputs[0]),
        k @ ("figure3" | "waf" | "cdf" | "timeseries" | "table-i" | "iaa") => k,
        other => {
            bail!("unknown plot kind '{other}' (auto, figure3, waf, cdf, timeseries, table-i, iaa)")
        }
    };
    let fig = match kind {
        "figure3" => Figure::Figure3(load_compares(&args.inputs)?),
        "waf" => Figure::Waf(load_waf_points(&args.inputs)?),
        "cdf" => Figure::Cdf(load_cdfs(&args.inputs)?),
        "table-i" => Figure::TableI(one_json(&args.inputs, table_i_of)?),
        "iaa" => Figure::Iaa(one_json(&args.inputs, iaa_of)?),
        _ => Figure::Timeseries(load_timeseries(&args.inputs)?),
    };
    // The program by its file name: where a user's build happens to lie says nothing to the
    // figure's readers (and would put a private path into a published file).
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
    let command = command.join(" ");
    let bytes = match format {
        Format::Svg => with_command_comment(&render_svg(&fig)?, &command).into_bytes(),
        Format::Png => render_png(&fig, &format!("made by: {command}"))?,
    };
    lab::output::write_atomic(&args.out, &bytes)?;
    eprintln!("{kind}: {}", args.out.display());
    Ok(())
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

/// One bar of Figure 3.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub group: String,
    pub store: String,
    pub slowdown: f64,
    /// Standard deviation of the slowdown, from the two stores' relative deviations.
    pub stdev: f64,
}

fn load_compares(inputs: &[PathBuf]) -> anyhow::Result<Vec<Bar>> {
    let mut bars = Vec::new();
    for input in inputs {
        // A result directory of `noftl compare --results` holds the JSON as summary.json.
        let path = &if input.is_dir() {
            input.join("summary.json")
        } else {
            input.clone()
        };
        let v = read_json(path)?;
        bars.extend(bars_of(&v).with_context(|| format!("in {}", path.display()))?);
    }
    if bars.is_empty() {
        bail!("no compare rows in the inputs");
    }
    Ok(bars)
}

/// The bars of one `noftl compare` result.
pub fn bars_of(v: &Json) -> anyhow::Result<Vec<Bar>> {
    let workload = v["workload"]
        .as_str()
        .context("not a `noftl compare` result: no `workload`")?;
    let scale = v["scale"].as_u64().context("no `scale`")?;
    let rows = v["rows"].as_array().context("no `rows`")?;
    let tps_of = |r: &Json| -> anyhow::Result<(f64, f64)> {
        Ok((
            r["throughput_tps"]
                .as_f64()
                .context("a row has no throughput_tps")?,
            r["stdev"].as_f64().unwrap_or(0.0),
        ))
    };
    let native = rows
        .iter()
        .find(|r| r["storage"] == "native")
        .context("no `native` row: Fig. 3's slowdowns are against it")?;
    let (n_tps, n_sd) = tps_of(native)?;
    if n_tps <= 0.0 {
        bail!("native throughput {n_tps} is not positive");
    }
    let group = format!("{} {scale}", workload.to_uppercase().replace("TPC", "TPC-"));
    let mut bars = Vec::with_capacity(rows.len());
    for r in rows {
        let store = r["storage"].as_str().context("a row has no storage")?;
        let (tps, sd) = tps_of(r)?;
        if tps <= 0.0 {
            bail!("{store}: throughput {tps} is not positive");
        }
        let slowdown = n_tps / tps;
        let rel = ((n_sd / n_tps).powi(2) + (sd / tps).powi(2)).sqrt();
        bars.push(Bar {
            group: group.clone(),
            store: store.to_string(),
            slowdown,
            stdev: if store == "native" {
                n_sd / n_tps
            } else {
                slowdown * rel
            },
        });
    }
    Ok(bars)
}

/// A palette that stays distinct in grey print: stores keep their colour across groups.
fn colour(i: usize) -> RGBColor {
    const C: [RGBColor; 8] = [
        RGBColor(0x1b, 0x9e, 0x77),
        RGBColor(0xd9, 0x5f, 0x02),
        RGBColor(0x75, 0x70, 0xb3),
        RGBColor(0xe7, 0x29, 0x8a),
        RGBColor(0x66, 0xa6, 0x1e),
        RGBColor(0xe6, 0xab, 0x02),
        RGBColor(0xa6, 0x76, 0x1d),
        RGBColor(0x66, 0x66, 0x66),
    ];
    C[i % C.len()]
}

fn to_anyhow<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing: {e}")
}

/// NoFTL Fig. 3 as grouped bars (SVG; the dashboard's figure of a comparison).
pub fn figure3(bars: &[Bar]) -> anyhow::Result<String> {
    render_svg(&Figure::Figure3(bars.to_vec()))
}

fn figure3_on<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, bars: &[Bar]) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let mut groups: Vec<String> = Vec::new();
    let mut stores: Vec<String> = Vec::new();
    for b in bars {
        if !groups.contains(&b.group) {
            groups.push(b.group.clone());
        }
        if !stores.contains(&b.store) {
            stores.push(b.store.clone());
        }
    }
    let y_max = bars
        .iter()
        .map(|b| b.slowdown + b.stdev)
        .fold(1.0f64, f64::max)
        * 1.15;
    let slots = stores.len() as f64 + 1.0; // one empty slot between groups
    let x_max = groups.len() as f64 * slots;
    {
        root.fill(&WHITE).map_err(to_anyhow)?;
        let mut chart = ChartBuilder::on(root)
            .caption("Slowdown against NoFTL (native = 1)", ("sans-serif", 24))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(to_anyhow)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .x_labels(0)
            .y_desc("slowdown (x)")
            .draw()
            .map_err(to_anyhow)?;
        // Group names under the axis, centred on their bars, in pixel coordinates.
        for (g, name) in groups.iter().enumerate() {
            let centre = g as f64 * slots + (slots - 1.0) / 2.0;
            let (px, py) = chart.backend_coord(&(centre, 0.0));
            root.draw(&Text::new(
                name.clone(),
                (px, py + 12),
                TextStyle::from(("sans-serif", 16).into_font())
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))
            .map_err(to_anyhow)?;
        }
        for (si, store) in stores.iter().enumerate() {
            let c = colour(si);
            let mine: Vec<(f64, &Bar)> = bars
                .iter()
                .filter(|b| &b.store == store)
                .map(|b| {
                    let g = groups.iter().position(|x| x == &b.group).unwrap_or(0);
                    (g as f64 * slots + si as f64, b)
                })
                .collect();
            chart
                .draw_series(mine.iter().map(|(x, b)| bar_rect(*x, b.slowdown, c)))
                .map_err(to_anyhow)?
                .label(store.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], c.filled()));
            chart
                .draw_series(mine.iter().map(|(x, b)| error_bar(*x, b.slowdown, b.stdev)))
                .map_err(to_anyhow)?;
            chart
                .draw_series(mine.iter().map(|(x, b)| {
                    label_above(
                        format!("{:.2}x", b.slowdown),
                        (*x + 0.5, b.slowdown + b.stdev + y_max * 0.01),
                        13,
                    )
                }))
                .map_err(to_anyhow)?;
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.9))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(to_anyhow)?;
    }
    Ok(())
}

/// One measured WAF point of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct WafPoint {
    /// The FTL (`param.target`; empty when the sweep does not vary it).
    pub ftl: String,
    /// The GC policy (`param.gc`; empty when the sweep does not vary it).
    pub gc: String,
    pub spare: f64,
    pub waf: f64,
}

/// The WAF points of a sweep, and how many of its jobs have none (failed, timed out, not run).
#[derive(Clone, Debug, Default)]
pub struct WafData {
    pub points: Vec<WafPoint>,
    pub missing: usize,
}

fn load_waf_points(inputs: &[PathBuf]) -> anyhow::Result<WafData> {
    let mut data = WafData::default();
    for input in inputs {
        let csv_path = if input.is_dir() {
            input.join("results.csv")
        } else {
            input.clone()
        };
        let d = waf_points(&csv_path)?;
        data.points.extend(d.points);
        data.missing += d.missing;
    }
    if data.points.is_empty() {
        bail!("no WAF points (jobs with status ok, a `waf` and a `param.op` column) in the inputs");
    }
    Ok(data)
}

fn waf_points(path: &Path) -> anyhow::Result<WafData> {
    let mut r =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let h = r.headers()?.clone();
    let col = |name: &str| h.iter().position(|x| x == name);
    let (Some(op), Some(waf)) = (col("param.op"), col("waf")) else {
        bail!(
            "{}: a WAF plot needs the columns param.op and waf (a sweep of `noftl io` over --op)",
            path.display()
        );
    };
    let status = col("status");
    let (target, gc) = (col("param.target"), col("param.gc"));
    let mut out = WafData::default();
    for rec in r.records() {
        let rec = rec?;
        let w = rec[waf].parse::<f64>();
        if status.is_some_and(|s| &rec[s] != "ok") || w.is_err() {
            out.missing += 1;
            continue;
        }
        let spare = super::common::parse_percent(&rec[op]).map_err(anyhow::Error::msg)?;
        let text = |c: Option<usize>| c.map_or_else(String::new, |c| rec[c].to_string());
        out.points.push(WafPoint {
            ftl: text(target),
            gc: text(gc),
            spare,
            waf: w.unwrap_or_default(),
        });
    }
    Ok(out)
}

/// An analytic curve: its name, WAF at a spare factor, and its dash (on, off pixels).
type Model = (&'static str, fn(f64) -> f64, (i32, i32));

/// The GC policies in the order the legend lists them (any other after them, as met).
const GC_ORDER: [&str; 4] = ["greedy", "cost-benefit", "fifo", "random"];

/// Distinct values in order of first appearance, those in `first` ahead in its order.
fn ordered<'a>(values: impl Iterator<Item = &'a str>, first: &[&str]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for v in values {
        if !seen.iter().any(|s| s == v) {
            seen.push(v.to_string());
        }
    }
    let rank = |v: &String| first.iter().position(|f| f == v).unwrap_or(first.len());
    seen.sort_by_key(rank); // stable: the others keep their order
    seen
}

/// WAF against spare factor on a logarithmic WAF axis (measured values span 1.5 to hundreds):
/// colour = GC policy, line style and marker = FTL, the analytic curves in black. The legend
/// sits beside the plot and says how many jobs have no point.
#[cfg(test)]
pub fn waf(data: &WafData) -> anyhow::Result<String> {
    render_svg(&Figure::Waf(data.clone()))
}

fn waf_on<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, data: &WafData) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let points = &data.points;
    let ftls = ordered(points.iter().map(|p| p.ftl.as_str()), &["page"]);
    let gcs = ordered(points.iter().map(|p| p.gc.as_str()), &GC_ORDER);
    let mut series: BTreeMap<(usize, usize), Vec<(f64, f64)>> = BTreeMap::new();
    for p in points {
        let f = ftls.iter().position(|x| *x == p.ftl).unwrap_or(0);
        let g = gcs.iter().position(|x| *x == p.gc).unwrap_or(0);
        series
            .entry((f, g))
            .or_default()
            .push((p.spare * 100.0, p.waf));
    }
    for v in series.values_mut() {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let x_lo = points.iter().map(|p| p.spare).fold(f64::MAX, f64::min);
    let x_hi = points.iter().map(|p| p.spare).fold(0.0f64, f64::max);
    let (x_lo, x_hi) = ((x_lo * 100.0 - 1.0).max(0.5), x_hi * 100.0 + 1.0);
    let y_hi = points.iter().map(|p| p.waf).fold(2.0f64, f64::max) * 1.3;
    let curve = |f: fn(f64) -> f64| -> Vec<(f64, f64)> {
        (0..=200)
            .map(|i| x_lo + (x_hi - x_lo) * f64::from(i) / 200.0)
            .map(|x| (x, f(x / 100.0)))
            .filter(|(_, y)| *y <= y_hi)
            .collect()
    };
    // Line style of the i-th FTL: solid, dashed, dotted.
    let dash = |f: usize| -> Option<(i32, i32)> {
        match f % 3 {
            0 => None,
            1 => Some((9, 5)),
            _ => Some((2, 4)),
        }
    };
    let models: [Model; 2] = [
        (
            "FIFO (circular log)",
            ftl::theory::fifo_waf_at_spare,
            (7, 4),
        ),
        ("random victims", ftl::theory::random_waf_at_spare, (2, 3)),
    ];
    {
        root.fill(&WHITE).map_err(to_anyhow)?;
        let body = root
            .titled(
                "Write amplification, uniform random 4 KiB writes",
                ("sans-serif", 24),
            )
            .map_err(to_anyhow)?;
        let (plot_area, legend) = body.split_horizontally(SIZE.0 - 230);
        let mut chart = ChartBuilder::on(&plot_area)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(x_lo..x_hi, (1.0..y_hi).log_scale())
            .map_err(to_anyhow)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(0xe2, 0xe2, 0xe2))
            .x_desc("spare factor (%)")
            .y_desc("WAF (log scale)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            // Every 1, 2 and 5 of a decade labelled; the other key points only as grid lines.
            .y_labels(30)
            .y_label_formatter(&|y| {
                let decade = 10f64.powf(y.log10().floor());
                let lead = (y / decade).round();
                if [1.0, 2.0, 5.0].contains(&lead) && (y / decade - lead).abs() < 1e-6 {
                    format!("{y:.0}")
                } else {
                    String::new()
                }
            })
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 16))
            .draw()
            .map_err(to_anyhow)?;
        for (_, f, (on, off)) in models {
            chart
                .draw_series(DashedLineSeries::new(
                    curve(f),
                    on,
                    off,
                    BLACK.stroke_width(1),
                ))
                .map_err(to_anyhow)?;
        }
        for (&(f, g), pts) in &series {
            let style = colour(g).stroke_width(2);
            match dash(f) {
                None => chart.draw_series(LineSeries::new(pts.iter().copied(), style)),
                Some((on, off)) => {
                    chart.draw_series(DashedLineSeries::new(pts.iter().copied(), on, off, style))
                }
            }
            .map_err(to_anyhow)?;
            let c = colour(g);
            chart
                .draw_series(pts.iter().map(|&p| marker(f, p, c)))
                .map_err(to_anyhow)?;
        }

        // The legend, in the strip to the right, in pixels.
        let font = |size: u32| TextStyle::from(("sans-serif", size).into_font());
        let mut y = 40;
        let heading = |text: &str, y: &mut i32| -> anyhow::Result<()> {
            legend
                .draw(&Text::new(text.to_string(), (10, *y), font(16)))
                .map_err(to_anyhow)?;
            *y += 24;
            Ok(())
        };
        let sample_at = |y: i32| vec![(14, y + 8), (50, y + 8)];
        if gcs.iter().any(|g| !g.is_empty()) {
            heading("GC policy (colour)", &mut y)?;
            for (g, name) in gcs.iter().enumerate() {
                legend
                    .draw(&PathElement::new(sample_at(y), colour(g).stroke_width(3)))
                    .map_err(to_anyhow)?;
                legend
                    .draw(&Text::new(name.clone(), (60, y), font(15)))
                    .map_err(to_anyhow)?;
                y += 22;
            }
            y += 12;
        }
        if ftls.iter().any(|f| !f.is_empty()) {
            heading("FTL (line, marker)", &mut y)?;
            let grey = RGBColor(0x55, 0x55, 0x55);
            for (f, name) in ftls.iter().enumerate() {
                let style = grey.stroke_width(2);
                match dash(f) {
                    None => legend.draw(&PathElement::new(sample_at(y), style)),
                    Some((on, off)) => {
                        legend.draw(&DashedPathElement::new(sample_at(y), on, off, style))
                    }
                }
                .map_err(to_anyhow)?;
                legend
                    .draw(&marker(f, (32, y + 8), grey))
                    .map_err(to_anyhow)?;
                legend
                    .draw(&Text::new(name.clone(), (60, y), font(15)))
                    .map_err(to_anyhow)?;
                y += 22;
            }
            y += 12;
        }
        heading("Model (black)", &mut y)?;
        for (name, _, (on, off)) in models {
            legend
                .draw(&DashedPathElement::new(
                    sample_at(y),
                    on,
                    off,
                    BLACK.stroke_width(1),
                ))
                .map_err(to_anyhow)?;
            legend
                .draw(&Text::new(name.to_string(), (60, y), font(15)))
                .map_err(to_anyhow)?;
            y += 22;
        }
        if data.missing > 0 {
            y += 12;
            let jobs = if data.missing == 1 { "job" } else { "jobs" };
            for line in [
                format!("{} {jobs} without a result", data.missing),
                "(failed or timed out):".to_string(),
                "no point plotted".to_string(),
            ] {
                legend
                    .draw(&Text::new(line, (10, y), font(14)))
                    .map_err(to_anyhow)?;
                y += 18;
            }
        }
    }
    Ok(())
}

/// One line of a latency CDF: its name and its latencies in microseconds, sorted.
#[derive(Clone, Debug, PartialEq)]
pub struct CdfSeries {
    pub name: String,
    pub latencies_us: Vec<f64>,
}

/// The name of a result directory's line: its store (`storage`) or target, else its name.
fn series_name(input: &Path) -> String {
    let dir = if input.is_dir() {
        input.to_path_buf()
    } else {
        input.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let from_summary = std::fs::read(dir.join("summary.json"))
        .ok()
        .and_then(|t| serde_json::from_slice::<Json>(&t).ok())
        .and_then(|v| {
            v["storage"].as_str().or(v["target"].as_str()).map(|s| {
                match v["workload"].as_str().or(v["rw"].as_str()) {
                    Some(w) => format!("{s} ({w})"),
                    None => s.to_string(),
                }
            })
        });
    from_summary.unwrap_or_else(|| {
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| input.display().to_string())
    })
}

/// `file` of a result directory, or the input itself when it is that file.
fn result_file(input: &Path, file: &str, hint: &str) -> anyhow::Result<PathBuf> {
    let path = if input.is_dir() {
        input.join(file)
    } else {
        input.to_path_buf()
    };
    if !path.is_file() {
        bail!("{}: no {file} ({hint})", input.display());
    }
    Ok(path)
}

/// Rows of a CSV file with a header, as (header, records).
fn read_csv(path: &Path) -> anyhow::Result<(csv::StringRecord, Vec<csv::StringRecord>)> {
    let mut r =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let h = r.headers()?.clone();
    let rows = r
        .records()
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("in {}", path.display()))?;
    Ok((h, rows))
}

/// The label columns of a comparison's samples.csv and raw.csv (docs/results.md) that name its
/// lines: `compare`'s `storage`, `ipa compare`'s `config`, `iaa compare`'s `free_percent` and
/// `scheme` (a `repeat` is not a line of its own: repeats follow each other).
const LINE_LABELS: [&str; 4] = ["storage", "config", "free_percent", "scheme"];

/// Lines keyed by the file's label columns (`LINE_LABELS`; a comparison), else one line.
fn keyed<'a>(
    h: &csv::StringRecord,
    rows: &'a [csv::StringRecord],
    one: &str,
) -> Vec<(String, Vec<&'a csv::StringRecord>)> {
    let mut out: Vec<(String, Vec<&csv::StringRecord>)> = Vec::new();
    let labels: Vec<(usize, &str)> = h
        .iter()
        .enumerate()
        .filter(|(_, c)| LINE_LABELS.contains(c))
        .collect();
    for r in rows {
        let name = if labels.is_empty() {
            one.to_string()
        } else {
            // As the dashboard names a sweep's series: "40% iaa+u2di".
            let parts: Vec<String> = labels
                .iter()
                .map(|&(i, c)| match c {
                    "free_percent" => format!("{}%", &r[i]),
                    _ => r[i].to_string(),
                })
                .collect();
            parts.join(" ")
        };
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(r),
            None => out.push((name, vec![r])),
        }
    }
    out
}

fn load_cdfs(inputs: &[PathBuf]) -> anyhow::Result<Vec<CdfSeries>> {
    let mut out = Vec::new();
    for input in inputs {
        let path = result_file(input, "raw.csv", "run with --results DIR --raw")?;
        let (h, rows) = read_csv(&path)?;
        let lat = h
            .iter()
            .position(|c| c == "latency_us")
            .with_context(|| format!("{}: no latency_us column", path.display()))?;
        for (name, rows) in keyed(&h, &rows, &series_name(input)) {
            let mut v = rows
                .iter()
                .map(|r| r[lat].parse::<f64>())
                .collect::<Result<Vec<f64>, _>>()
                .with_context(|| format!("{}: a latency is not a number", path.display()))?;
            v.sort_by(f64::total_cmp);
            if !v.is_empty() {
                out.push(CdfSeries {
                    name,
                    latencies_us: v,
                });
            }
        }
    }
    if out.is_empty() {
        bail!("no latencies in the inputs");
    }
    Ok(out)
}

/// Up to `n + 1` points of a sorted sample's CDF: (value, fraction at or below it).
pub fn cdf_points(sorted: &[f64], n: usize) -> Vec<(f64, f64)> {
    let len = sorted.len();
    if len == 0 {
        return Vec::new();
    }
    let steps = n.min(len - 1).max(1);
    let mut pts: Vec<(f64, f64)> = (0..=steps)
        .map(|i| {
            let idx = (len - 1) * i / steps;
            (sorted[idx], (idx + 1) as f64 / len as f64)
        })
        .collect();
    pts.dedup();
    pts
}

fn cdf_on<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    series: &[CdfSeries],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let lo = series
        .iter()
        .filter_map(|s| s.latencies_us.first())
        .fold(f64::MAX, |a, &b| a.min(b))
        .max(1e-3);
    let hi = series
        .iter()
        .filter_map(|s| s.latencies_us.last())
        .fold(lo * 10.0, |a, &b| a.max(b));
    root.fill(&WHITE).map_err(to_anyhow)?;
    let mut chart = ChartBuilder::on(root)
        .caption("Latency CDF", ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d((lo * 0.8..hi * 1.25).log_scale(), 0.0..1.0)
        .map_err(to_anyhow)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(0xe2, 0xe2, 0xe2))
        .x_desc("latency (us, log scale)")
        .y_desc("fraction at or below")
        .x_label_formatter(&|x| format!("{x}"))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(to_anyhow)?;
    for (i, s) in series.iter().enumerate() {
        let c = colour(i);
        let n = s.latencies_us.len();
        chart
            .draw_series(LineSeries::new(
                cdf_points(&s.latencies_us, 1000),
                c.stroke_width(2),
            ))
            .map_err(to_anyhow)?
            .label(format!("{} (n = {n})", s.name))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(to_anyhow)?;
    Ok(())
}

/// One line of a time series: per window, its end (s), throughput, GC migrations per second
/// and free blocks (None: no flash).
#[derive(Clone, Debug, PartialEq)]
pub struct TimeSeries {
    pub name: String,
    /// What the throughput counts: "transactions/s" (goodput) or "IOPS".
    pub unit: &'static str,
    pub points: Vec<(f64, f64, f64, Option<f64>)>,
}

fn load_timeseries(inputs: &[PathBuf]) -> anyhow::Result<Vec<TimeSeries>> {
    let mut out = Vec::new();
    for input in inputs {
        let path = result_file(input, "samples.csv", "run with --results DIR")?;
        let (h, rows) = read_csv(&path)?;
        let col = |name: &str| h.iter().position(|c| c == name);
        let (rate, unit) = match (col("goodput_tps"), col("iops")) {
            (Some(c), _) => (c, "transactions/s"),
            (None, Some(c)) => (c, "IOPS"),
            _ => bail!("{}: no goodput_tps or iops column", path.display()),
        };
        let need =
            |name: &str| col(name).with_context(|| format!("{}: no {name} column", path.display()));
        let (t, w, gc, free) = (
            need("time_s")?,
            need("window_s")?,
            need("gc_migrations")?,
            need("free_blocks")?,
        );
        let repeat = col("repeat");
        for (name, rows) in keyed(&h, &rows, &series_name(input)) {
            let num = |r: &csv::StringRecord, i: usize| -> anyhow::Result<f64> {
                r[i].parse::<f64>()
                    .with_context(|| format!("{}: '{}' is not a number", path.display(), &r[i]))
            };
            // A comparison's repeats follow each other on one time axis.
            let (mut offset, mut last_t, mut last_repeat) = (0.0, 0.0, None::<String>);
            let mut windows = Vec::new();
            for r in rows {
                let rep = repeat.map(|i| r[i].to_string());
                if rep != last_repeat {
                    offset = last_t;
                    last_repeat = rep;
                }
                let (time, len) = (offset + num(r, t)?, num(r, w)?);
                last_t = time;
                let free_blocks = if r[free].is_empty() {
                    None
                } else {
                    Some(num(r, free)?)
                };
                windows.push((time, len, num(r, rate)?, num(r, gc)?, free_blocks));
            }
            // A window much shorter than the others (a run's last) gives rates of a few
            // transactions: left out of the rate panels' lines, not of the data.
            let mut lens: Vec<f64> = windows.iter().map(|x| x.1).collect();
            lens.sort_by(f64::total_cmp);
            let typical = lens.get(lens.len() / 2).copied().unwrap_or(0.0);
            let points = windows
                .iter()
                .filter(|x| x.1 >= typical * 0.5)
                .map(|&(time, len, r, g, f)| (time, r, if len > 0.0 { g / len } else { 0.0 }, f))
                .collect();
            out.push(TimeSeries { name, unit, points });
        }
    }
    if out.iter().all(|s| s.points.is_empty()) {
        bail!("no samples in the inputs");
    }
    Ok(out)
}

fn timeseries_on<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    series: &[TimeSeries],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let t_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let unit = series.first().map_or("transactions/s", |s| s.unit);
    let (plots, legend) =
        titled_with_legend(root, "Throughput and garbage collection over time", 24, 170)?;
    let panels = plots.split_evenly((3, 1));
    type Pick = fn(&(f64, f64, f64, Option<f64>)) -> Option<f64>;
    let picks: [(&str, Pick); 3] = [
        (unit, |p| Some(p.1)),
        ("GC migrations/s", |p| Some(p.2)),
        ("free blocks", |p| p.3),
    ];
    for (k, (panel, (label, pick))) in panels.iter().zip(picks).enumerate() {
        let y_max = series
            .iter()
            .flat_map(|s| s.points.iter().filter_map(pick))
            .fold(0.0f64, f64::max)
            .max(1.0)
            * 1.1;
        let mut chart = ChartBuilder::on(panel)
            .margin(8)
            .x_label_area_size(if k == 2 { 36 } else { 20 })
            .y_label_area_size(72)
            .build_cartesian_2d(0.0..t_max, 0.0..y_max)
            .map_err(to_anyhow)?;
        let y_fmt = |y: &f64| {
            if y_max < 10.0 {
                format!("{y:.1}")
            } else {
                format!("{y:.0}")
            }
        };
        let mut mesh = chart.configure_mesh();
        mesh.light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(0xe2, 0xe2, 0xe2))
            .y_desc(label)
            .y_labels(5)
            .y_label_formatter(&y_fmt)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14));
        if k == 2 {
            mesh.x_desc("time (s, virtual)");
        }
        mesh.draw().map_err(to_anyhow)?;
        for (i, s) in series.iter().enumerate() {
            let c = colour(i);
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter_map(|p| pick(p).map(|y| (p.0, y)))
                .collect();
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                .map_err(to_anyhow)?;
        }
    }
    legend_strip(&legend, series.iter().map(|s| s.name.as_str()), false, &[])
}

/// The marker of the i-th FTL at `at`: filled circle, open triangle, cross.
fn marker<DB, C>(f: usize, at: C, c: RGBColor) -> DynElement<'static, DB, C>
where
    DB: DrawingBackend,
    C: Clone + 'static,
{
    match f % 3 {
        0 => Circle::new(at, 4, c.filled()).into_dyn(),
        1 => TriangleMarker::new(at, 6, c.stroke_width(2)).into_dyn(),
        _ => Cross::new(at, 5, c.stroke_width(2)).into_dyn(),
    }
}

/// Reads and parses a JSON file, naming the file in the error.
/// A JSON file, or a result directory's summary.json.
fn read_json(path: &Path) -> anyhow::Result<Json> {
    let summary = path.join("summary.json");
    let path = if path.is_dir() { &summary } else { path };
    let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// The `rows` of a JSON result, refused unless every row has `marker` (the field that tells
/// one verb's result from another's), so that a file of another kind gets an error naming
/// the verb that writes the right one instead of a figure of missing values.
fn rows_with<'a>(v: &'a Json, marker: &str, verb: &str) -> anyhow::Result<&'a [Json]> {
    let rows = v["rows"]
        .as_array()
        .with_context(|| format!("not a `{verb}` result: no `rows`"))?;
    if rows.is_empty() {
        bail!("`{verb}` result without rows: nothing to plot");
    }
    if let Some(i) = rows.iter().position(|r| r.get(marker).is_none()) {
        bail!("not a `{verb}` result: row {i} has no `{marker}`");
    }
    Ok(rows)
}

/// A number field of a result row, or an error naming the row and the field.
fn num(row: &Json, field: &str, row_name: &str) -> anyhow::Result<f64> {
    row[field]
        .as_f64()
        .with_context(|| format!("row {row_name}: no number `{field}`"))
}

/// One row (configuration) of IPA Table I.
#[derive(Clone, Debug, PartialEq)]
pub struct IpaRow {
    pub config: String,
    pub migrations_per_write: f64,
    pub erases_per_write: f64,
    pub tps: f64,
    pub stdev: f64,
}

/// IPA Table I of one `noftl ipa compare` result.
#[derive(Clone, Debug, PartialEq)]
pub struct TableI {
    pub title: String,
    pub rows: Vec<IpaRow>,
    /// Configurations the run reported as not run, with why (they get no bar).
    pub not_run: Vec<(String, String)>,
    /// Runs per row (`repeat`), when the file says: with one, the stdev is 0 and no error
    /// bar shows, which the legend then says.
    pub repeat: Option<u64>,
}

/// IPA Table I from `noftl ipa compare --json` output.
pub fn table_i_of(v: &Json) -> anyhow::Result<TableI> {
    const VERB: &str = "noftl ipa compare";
    let rows = rows_with(v, "ipa_appends", VERB)?;
    let mut out = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let config = r["config"]
            .as_str()
            .with_context(|| format!("row {i}: no `config`"))?;
        let n = |f: &str| num(r, f, config);
        out.push(IpaRow {
            config: config.to_string(),
            migrations_per_write: n("gc_migrations_per_host_write")?,
            erases_per_write: n("gc_erases_per_host_write")?,
            tps: n("throughput_tps")?,
            // A single run has no deviation; the field is still written (0).
            stdev: r["stdev"].as_f64().unwrap_or(0.0),
        });
    }
    let not_run = v["not_run"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    let s = |k: &str| x[k].as_str().unwrap_or("?").to_string();
                    (s("config"), s("why"))
                })
                .collect()
        })
        .unwrap_or_default();
    let workload = v["workload"].as_str().unwrap_or("?");
    let mut title = format!(
        "IPA Table I: {}",
        workload.to_uppercase().replace("TPC", "TPC-")
    );
    if let Some(s) = v["scale"].as_u64() {
        title += &format!(" {s}");
    }
    for (key, what) in [("scheme", "scheme"), ("ipa_mode", "mode")] {
        if let Some(s) = v[key].as_str() {
            title += &format!(", {what} {s}");
        }
    }
    Ok(TableI {
        title,
        rows: out,
        not_run,
        repeat: v["repeat"].as_u64(),
    })
}

/// The relative change from `old` to `new` as a signed percentage; `None` when `old` is 0
/// (no ratio exists: the label says so rather than print an infinity).
pub fn relative_change(new: f64, old: f64) -> Option<f64> {
    (old != 0.0).then(|| (new / old - 1.0) * 100.0)
}

/// "-96% vs regions": one decimal below 10% so that small gains do not round to 0.
fn change_label(new: f64, old: f64, against: &str) -> String {
    match relative_change(new, old) {
        Some(p) if p.abs() < 10.0 => format!("{p:+.1}% vs {against}"),
        Some(p) => format!("{p:+.0}% vs {against}"),
        None => format!("n/a vs {against} (0)"),
    }
}

/// The labels of an IPA row's bar (`ipa-X`): its change against its control row `X` (the same
/// layout without appends) and against `baseline`, each when that row is present. Other
/// rows: none.
fn ipa_labels(rows: &[IpaRow], row: &IpaRow, value: fn(&IpaRow) -> f64) -> Vec<String> {
    let Some(control) = row.config.strip_prefix("ipa-") else {
        return Vec::new();
    };
    [control, "baseline"]
        .iter()
        .filter_map(|c| rows.iter().find(|r| r.config == *c))
        .map(|r| change_label(value(row), value(r), &r.config))
        .collect()
}

/// IPA Table I as an SVG document.
/// IPA Table I (SVG; also the dashboard's figure of an `ipa compare`).
pub fn table_i(t: &TableI) -> anyhow::Result<String> {
    render_svg(&Figure::TableI(t.clone()))
}

/// The filled bar of slot `x` (0.1 to 0.9 of the slot) up to `y`.
fn bar_rect(x: f64, y: f64, c: RGBColor) -> Rectangle<(f64, f64)> {
    Rectangle::new([(x + 0.1, 0.0), (x + 0.9, y)], c.filled())
}

/// The error bar of slot `x`: `y` plus and minus `sd`.
fn error_bar(x: f64, y: f64, sd: f64) -> PathElement<(f64, f64)> {
    PathElement::new(vec![(x + 0.5, y - sd), (x + 0.5, y + sd)], BLACK)
}

/// Centred text whose bottom sits at `at`.
fn label_above<C>(text: String, at: C, size: u32) -> Text<'static, C, String> {
    Text::new(
        text,
        at,
        TextStyle::from(("sans-serif", size).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom)),
    )
}

/// A plot area and its legend strip.
type Split<DB> = (DrawingArea<DB, Shift>, DrawingArea<DB, Shift>);

/// A white page with `title` on top, split into the plot area and a strip of `legend_px` at
/// the right for the legend: the lines keep the whole width of the plot area.
fn titled_with_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    size: u32,
    legend_px: u32,
) -> anyhow::Result<Split<DB>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(to_anyhow)?;
    let body = root
        .titled(title, ("sans-serif", size))
        .map_err(to_anyhow)?;
    Ok(body.split_horizontally(SIZE.0 - legend_px))
}

/// A legend in its own strip: a swatch in the i-th `colour` and the name per entry (the
/// order the series were drawn in), then notes below.
fn legend_strip<'a, DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    names: impl Iterator<Item = &'a str>,
    bar_swatch: bool,
    notes: &[String],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let font = TextStyle::from(("sans-serif", 14).into_font());
    let mut y = 20;
    for (i, name) in names.enumerate() {
        let c = colour(i);
        if bar_swatch {
            area.draw(&Rectangle::new([(6, y + 2), (24, y + 14)], c.filled()))
        } else {
            area.draw(&PathElement::new(
                vec![(6, y + 8), (30, y + 8)],
                c.stroke_width(3),
            ))
        }
        .map_err(to_anyhow)?;
        area.draw(&Text::new(name.to_string(), (38, y), font.clone()))
            .map_err(to_anyhow)?;
        y += 22;
    }
    y += 12;
    for line in notes {
        area.draw(&Text::new(line.clone(), (6, y), font.clone()))
            .map_err(to_anyhow)?;
        y += 18;
    }
    Ok(())
}

fn table_i_on<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, t: &TableI) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let (plots, legend) = titled_with_legend(root, &t.title, 22, 190)?;
    let panels = plots.split_evenly((3, 1));
    type Value = fn(&IpaRow) -> f64;
    // Axis name, value, whether it has an error bar, decimals of its value labels.
    let metrics: [(&str, Value, bool, usize); 3] = [
        ("GC migr./host write", |r| r.migrations_per_write, false, 3),
        ("GC erases/host write", |r| r.erases_per_write, false, 3),
        ("transactions/s", |r| r.tps, true, 1),
    ];
    let n = t.rows.len() as f64;
    for (panel, (desc, value, with_sd, decimals)) in panels.iter().zip(metrics) {
        let sd = |r: &IpaRow| if with_sd { r.stdev } else { 0.0 };
        // Head room above the tallest bar for two label lines.
        let y_max = t
            .rows
            .iter()
            .map(|r| value(r) + sd(r))
            .fold(0.0f64, f64::max)
            .max(1e-9)
            * 1.55;
        let mut chart = ChartBuilder::on(panel)
            .margin(6)
            .x_label_area_size(4)
            .y_label_area_size(72)
            .build_cartesian_2d(0.0..n, 0.0..y_max)
            .map_err(to_anyhow)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(0xe2, 0xe2, 0xe2))
            .x_labels(0)
            .y_labels(4)
            .y_desc(desc)
            .y_label_formatter(&|y| format!("{y:.*}", decimals.saturating_sub(1)))
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 13))
            .draw()
            .map_err(to_anyhow)?;
        let slots = t.rows.iter().enumerate().map(|(i, r)| (i as f64, r));
        chart
            .draw_series(
                slots
                    .clone()
                    .map(|(x, r)| bar_rect(x, value(r), colour(x as usize))),
            )
            .map_err(to_anyhow)?;
        if with_sd {
            chart
                .draw_series(slots.clone().map(|(x, r)| error_bar(x, value(r), r.stdev)))
                .map_err(to_anyhow)?;
        }
        // The value, and for IPA rows the changes, one line each above the bar.
        let line = y_max * 0.11;
        for (x, r) in slots {
            let mut lines = vec![format!("{:.*}", decimals, value(r))];
            lines.extend(ipa_labels(&t.rows, r, value));
            let top = value(r) + sd(r) + y_max * 0.01;
            for (k, text) in lines.into_iter().rev().enumerate() {
                chart
                    .draw_series(std::iter::once(label_above(
                        text,
                        (x + 0.5, top + line * k as f64),
                        11,
                    )))
                    .map_err(to_anyhow)?;
            }
        }
    }
    let mut notes = vec![
        "IPA bars: change vs".to_string(),
        "their control row and".to_string(),
        "vs baseline".to_string(),
        match t.repeat {
            Some(n) => format!("error bars: stdev, {n} runs"),
            None => "error bars: stdev".to_string(),
        },
    ];
    for (config, _) in &t.not_run {
        notes.push(format!("not run: {config}"));
    }
    let names = t.rows.iter().map(|r| r.config.as_str());
    legend_strip(&legend, names, true, &notes)
}

/// One line of the IAA free-space sweep: a scheme's points (free space in %, value) per panel.
#[derive(Clone, Debug, PartialEq)]
pub struct IaaLine {
    pub scheme: String,
    pub panels: Vec<Vec<(f64, f64)>>,
}

/// IAA Fig. 11 from one `noftl iaa compare` result: the panels' axis names and the lines.
#[derive(Clone, Debug, PartialEq)]
pub struct IaaData {
    pub title: String,
    pub panels: Vec<&'static str>,
    pub lines: Vec<IaaLine>,
}

/// A panel of IAA Fig. 11: its axis name, the row field, and whether it is divided by the
/// `conventional` row's value at the same free space.
type IaaPanel = (&'static str, &'static str, bool);

/// IAA Fig. 11 from `noftl iaa compare --json` output. Throughput is drawn relative to the
/// `conventional` scheme at each free space (computed from `throughput_qps`, not the JSON's
/// rounded `relative`); the second panel is erases per 1000 queries, or GC copies per host
/// write when a file has no erase count; energy relative to conventional when present.
pub fn iaa_of(v: &Json) -> anyhow::Result<IaaData> {
    const VERB: &str = "noftl iaa compare";
    let rows = rows_with(v, "free_space", VERB)?;
    let has = |f: &str| rows.iter().all(|r| r[f].is_number());
    let mut panels: Vec<IaaPanel> = vec![("throughput vs conventional", "throughput_qps", true)];
    if has("erases_per_kquery") {
        panels.push(("erases per 1000 queries", "erases_per_kquery", false));
    } else if has("gc_copies_per_host_write") {
        panels.push((
            "GC copies per host write",
            "gc_copies_per_host_write",
            false,
        ));
    }
    if has("energy_joules_per_query") {
        panels.push(("energy vs conventional", "energy_joules_per_query", true));
    }
    let mut lines: Vec<IaaLine> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let scheme = r["scheme"]
            .as_str()
            .with_context(|| format!("row {i}: no `scheme`"))?;
        let name = format!("{i} ({scheme})");
        let fs = num(r, "free_space", &name)?;
        let mut values = Vec::with_capacity(panels.len());
        for &(_, field, relative) in &panels {
            let mut y = num(r, field, &name)?;
            if relative {
                let conv = rows
                    .iter()
                    .find(|c| c["scheme"] == "conventional" && c["free_space"].as_f64() == Some(fs))
                    .with_context(|| {
                        format!("no `conventional` row at free space {fs}: {field} is drawn relative to it")
                    })?;
                let base = num(conv, field, "conventional")?;
                if base <= 0.0 {
                    bail!("conventional {field} at free space {fs} is {base}: no ratio");
                }
                y /= base;
            }
            values.push((fs * 100.0, y));
        }
        let line = match lines.iter_mut().position(|l| l.scheme == scheme) {
            Some(k) => &mut lines[k],
            None => {
                lines.push(IaaLine {
                    scheme: scheme.to_string(),
                    panels: vec![Vec::new(); panels.len()],
                });
                lines.last_mut().context("just pushed")?
            }
        };
        for (p, pt) in line.panels.iter_mut().zip(values) {
            p.push(pt);
        }
    }
    for l in &mut lines {
        for p in &mut l.panels {
            p.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
    }
    let storage = v["storage"].as_str().unwrap_or("?");
    Ok(IaaData {
        title: format!("IAA Fig. 11: free-space sweep, {storage} storage"),
        panels: panels.iter().map(|p| p.0).collect(),
        lines,
    })
}

/// IAA Fig. 11 as an SVG document (also the dashboard's figure of an `iaa compare`).
pub fn iaa(d: &IaaData) -> anyhow::Result<String> {
    render_svg(&Figure::Iaa(d.clone()))
}

fn iaa_on<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, d: &IaaData) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let (plots, legend) = titled_with_legend(root, &d.title, 22, 150)?;
    let panels = plots.split_evenly((1, d.panels.len()));
    let all = || d.lines.iter().flat_map(|l| l.panels.iter());
    let x_lo = all().flatten().map(|p| p.0).fold(f64::MAX, f64::min);
    let x_hi = all().flatten().map(|p| p.0).fold(f64::MIN, f64::max);
    let pad = ((x_hi - x_lo) * 0.05).max(1.0);
    for (k, (panel, desc)) in panels.iter().zip(&d.panels).enumerate() {
        let ys = || d.lines.iter().flat_map(|l| l.panels[k].iter().map(|p| p.1));
        let (lo, hi) = (ys().fold(f64::MAX, f64::min), ys().fold(f64::MIN, f64::max));
        let pad_y = ((hi - lo) * 0.1).max(hi.abs() * 0.02).max(1e-9);
        let mut chart = ChartBuilder::on(panel)
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(x_lo - pad..x_hi + pad, (lo - pad_y).max(0.0)..hi + pad_y)
            .map_err(to_anyhow)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(0xe2, 0xe2, 0xe2))
            .x_desc("free space (%)")
            .y_desc(*desc)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 14))
            .draw()
            .map_err(to_anyhow)?;
        for (i, l) in d.lines.iter().enumerate() {
            let c = colour(i);
            chart
                .draw_series(LineSeries::new(l.panels[k].clone(), c.stroke_width(2)))
                .map_err(to_anyhow)?;
            chart
                .draw_series(l.panels[k].iter().map(|&p| Circle::new(p, 3, c.filled())))
                .map_err(to_anyhow)?;
        }
    }
    legend_strip(
        &legend,
        d.lines.iter().map(|l| l.scheme.as_str()),
        false,
        &[],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compare_json() -> Json {
        serde_json::json!({
            "workload": "tpcb", "scale": 48,
            "rows": [
                {"storage": "native", "throughput_tps": 700.0, "stdev": 21.0},
                {"storage": "dftl-2%", "throughput_tps": 152.5, "stdev": 3.0},
                {"storage": "page", "throughput_tps": 443.0, "stdev": 10.0}
            ]
        })
    }

    #[test]
    fn figure3_bars_are_slowdowns_against_native() {
        let bars = bars_of(&compare_json()).unwrap();
        assert_eq!(bars.len(), 3);
        assert_eq!(bars[0].slowdown, 1.0);
        assert!((bars[1].slowdown - 700.0 / 152.5).abs() < 1e-12);
        assert_eq!(bars[0].group, "TPC-B 48");
        let svg = figure3(&bars).unwrap();
        // One label per bar with its factor, and the stores in the legend.
        for b in &bars {
            assert!(svg.contains(&format!("{:.2}x", b.slowdown)), "{}", b.store);
            assert!(svg.contains(&b.store));
        }
        assert!(svg.contains("TPC-B 48"));
    }

    #[test]
    fn a_compare_without_native_is_refused() {
        let mut v = compare_json();
        v["rows"].as_array_mut().unwrap().remove(0);
        assert!(format!("{:#}", bars_of(&v).unwrap_err()).contains("native"));
    }

    #[test]
    fn waf_plot_names_every_ftl_and_policy_and_the_models() {
        let pts: Vec<WafPoint> = [
            ("page", "greedy", 0.1, 4.8),
            ("page", "greedy", 0.2, 2.6),
            ("dftl", "fifo", 0.2, 180.0),
        ]
        .iter()
        .map(|&(f, g, x, y)| WafPoint {
            ftl: f.into(),
            gc: g.into(),
            spare: x,
            waf: y,
        })
        .collect();
        let svg = waf(&WafData {
            points: pts,
            missing: 0,
        })
        .unwrap();
        for name in [
            "page",
            "dftl",
            "greedy",
            "fifo",
            "FIFO (circular log)",
            "random victims",
        ] {
            assert!(svg.contains(name), "{name}");
        }
        assert!(!svg.contains("without a result"));
    }

    #[test]
    fn table_i_labels_ipa_rows_only_and_says_when_there_is_no_ratio() {
        let row = |config: &str, mig: f64, tps: f64| {
            serde_json::json!({"config": config, "ipa_appends": 1,
                "gc_migrations_per_host_write": mig, "gc_erases_per_host_write": 0.1,
                "throughput_tps": tps, "stdev": 1.0})
        };
        let v = serde_json::json!({"workload": "tpcb", "scale": 8, "rows": [
            row("baseline", 0.0, 100.0), row("global", 0.5, 200.0), row("ipa-global", 0.1, 205.0)
        ]});
        let t = table_i_of(&v).unwrap();
        assert_eq!(t.title, "IPA Table I: TPC-B 8");
        assert!(ipa_labels(&t.rows, &t.rows[1], |r| r.tps).is_empty());
        assert_eq!(
            ipa_labels(&t.rows, &t.rows[2], |r| r.tps),
            ["+2.5% vs global", "+105% vs baseline"]
        );
        assert_eq!(
            ipa_labels(&t.rows, &t.rows[2], |r| r.migrations_per_write),
            ["-80% vs global", "n/a vs baseline (0)"]
        );
        let svg = table_i(&t).unwrap();
        assert!(svg.contains("+105% vs baseline"));
    }

    #[test]
    fn iaa_throughput_is_relative_to_conventional_at_the_same_free_space() {
        let row = |fs: f64, scheme: &str, qps: f64| {
            serde_json::json!({"free_space": fs, "scheme": scheme, "throughput_qps": qps,
                "gc_copies_per_host_write": 0.5})
        };
        let v = serde_json::json!({"storage": "native", "rows": [
            row(0.2, "conventional", 200.0), row(0.1, "conventional", 100.0),
            row(0.1, "iaa", 110.0), row(0.2, "iaa", 250.0)
        ]});
        let d = iaa_of(&v).unwrap();
        assert_eq!(
            d.panels,
            ["throughput vs conventional", "GC copies per host write"]
        );
        assert_eq!(d.lines[1].scheme, "iaa");
        // Sorted by free space, each point divided by its own free space's conventional row.
        let iaa_tps = &d.lines[1].panels[0];
        assert_eq!(iaa_tps[0].0, 10.0);
        assert!((iaa_tps[0].1 - 1.1).abs() < 1e-12 && (iaa_tps[1].1 - 1.25).abs() < 1e-12);
        assert!(iaa(&d).unwrap().contains("GC copies per host write"));
    }

    #[test]
    fn a_waf_plot_says_how_many_jobs_have_no_point() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("results.csv");
        std::fs::write(
            &csv,
            "job,label,status,wall_seconds,param.gc,param.op,param.target,waf\n\
             a,,ok,1.0,greedy,10%,page,4.74\n\
             b,,failed,300.0,fifo,10%,dftl,\n\
             c,,ok,2.0,greedy,20%,page,2.53\n",
        )
        .unwrap();
        let data = load_waf_points(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(data.points.len(), 2);
        assert_eq!(data.missing, 1);
        assert_eq!(data.points[0].ftl, "page");
        assert_eq!(data.points[0].gc, "greedy");
        let svg = waf(&data).unwrap();
        assert!(svg.contains("1 job without a result"));
    }
}
