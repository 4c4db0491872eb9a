//! WAF curves from a sweep's `results.csv` of `noftl io` jobs, beside the analytic FIFO and
//! random-victim models of `ftl::theory`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::input::bounded;
use crate::render::{render_svg, Draw};
use crate::style::{axis, colour, log_axis, marker, to_anyhow, SIZE};

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

pub(crate) fn load_waf_points(inputs: &[PathBuf]) -> anyhow::Result<WafData> {
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
        let spare = lab::units::parse_percent(&rec[op]).map_err(anyhow::Error::msg)?;
        let text = |c: Option<usize>| c.map_or_else(String::new, |c| rec[c].to_string());
        let waf = bounded(
            &format!("{}: waf '{}'", path.display(), &rec[waf]),
            w.unwrap_or_default(),
        )?;
        out.points.push(WafPoint {
            ftl: text(target),
            gc: text(gc),
            spare,
            waf,
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
pub fn waf(data: &WafData) -> anyhow::Result<String> {
    render_svg(data)
}

/// The analytic curves, drawn in black: FIFO (a circular log) and random victim selection.
const MODELS: [Model; 2] = [
    (
        "FIFO (circular log)",
        ftl::theory::fifo_waf_at_spare,
        (7, 4),
    ),
    ("random victims", ftl::theory::random_waf_at_spare, (2, 3)),
];

/// Line style of the i-th FTL: solid, dashed, dotted.
fn dash(f: usize) -> Option<(i32, i32)> {
    match f % 3 {
        0 => None,
        1 => Some((9, 5)),
        _ => Some((2, 4)),
    }
}

/// The lines of a WAF plot: per (FTL, GC policy) index pair, its (spare %, WAF) points sorted
/// by spare factor.
type WafSeries = BTreeMap<(usize, usize), Vec<(f64, f64)>>;

/// The points grouped into lines by FTL (index into `ftls`) and policy (index into `gcs`).
fn waf_series(points: &[WafPoint], ftls: &[String], gcs: &[String]) -> WafSeries {
    let mut series = WafSeries::new();
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
    series
}

/// The ranges of a WAF plot: spare factor in % (a point of margin each side), WAF up to 1.3
/// times the highest point (at least 2).
#[derive(Clone, Copy, Debug)]
struct WafAxes {
    x_lo_percent: f64,
    x_hi_percent: f64,
    y_hi: f64,
}

impl WafAxes {
    fn of(points: &[WafPoint]) -> WafAxes {
        let x_lo = points.iter().map(|p| p.spare).fold(f64::MAX, f64::min);
        let x_hi = points.iter().map(|p| p.spare).fold(0.0f64, f64::max);
        WafAxes {
            x_lo_percent: (x_lo * 100.0 - 1.0).max(0.5),
            x_hi_percent: x_hi * 100.0 + 1.0,
            y_hi: points.iter().map(|p| p.waf).fold(2.0f64, f64::max) * 1.3,
        }
    }

    /// A model's curve across the x range (201 points), cut where it leaves the plot. The
    /// models hold for a spare factor strictly between 0 and 1 (they assert it); the range's
    /// margin reaches past 100 % when a point sits near it.
    fn curve(&self, f: fn(f64) -> f64) -> Vec<(f64, f64)> {
        let (lo, hi) = (self.x_lo_percent, self.x_hi_percent);
        (0..=200)
            .map(|i| lo + (hi - lo) * f64::from(i) / 200.0)
            .filter(|&x| x > 0.0 && x < 99.9)
            .map(|x| (x, f(x / 100.0)))
            .filter(|(_, y)| *y <= self.y_hi)
            .collect()
    }
}

fn waf_on<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, data: &WafData) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let points = &data.points;
    // Points made by a program rather than read by `waf_points` are bounded here.
    for p in points {
        bounded(&format!("{} {}: the WAF", p.ftl, p.gc), p.waf)?;
    }
    let ftls = ordered(points.iter().map(|p| p.ftl.as_str()), &["page"]);
    let gcs = ordered(points.iter().map(|p| p.gc.as_str()), &GC_ORDER);
    let series = waf_series(points, &ftls, &gcs);
    let axes = WafAxes::of(points);
    root.fill(&WHITE).map_err(to_anyhow)?;
    let body = root
        .titled(
            "Write amplification, uniform random 4 KiB writes",
            ("sans-serif", 24),
        )
        .map_err(to_anyhow)?;
    let (plot_area, legend) = body.split_horizontally(SIZE.0 - 230);
    waf_chart(&plot_area, axes, &series)?;
    waf_legend(&legend, &ftls, &gcs, data.missing)
}

/// The plot: its mesh, the models in black, then one line with markers per FTL and policy.
fn waf_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    axes: WafAxes,
    series: &WafSeries,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d(
            axis("spare factor", axes.x_lo_percent, axes.x_hi_percent)?,
            log_axis("WAF", 1.0, axes.y_hi)?.log_scale(),
        )
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
    for (_, f, (on, off)) in MODELS {
        chart
            .draw_series(DashedLineSeries::new(
                axes.curve(f),
                on,
                off,
                BLACK.stroke_width(1),
            ))
            .map_err(to_anyhow)?;
    }
    for (&(f, g), pts) in series {
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
    Ok(())
}

fn legend_font(size: u32) -> TextStyle<'static> {
    TextStyle::from(("sans-serif", size).into_font())
}

/// Where a legend entry's line sample goes when the entry's text starts at height `y`.
fn sample_at(y: i32) -> Vec<(i32, i32)> {
    vec![(14, y + 8), (50, y + 8)]
}

/// A legend section's heading at `y`, which moves below it.
fn legend_heading<DB: DrawingBackend>(
    legend: &DrawingArea<DB, Shift>,
    text: &str,
    y: &mut i32,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    legend
        .draw(&Text::new(text.to_string(), (10, *y), legend_font(16)))
        .map_err(to_anyhow)?;
    *y += 24;
    Ok(())
}

/// The legend, in the strip to the right, in pixels: the policies (colour) and FTLs (line and
/// marker) when the sweep varies them, the models, and how many jobs have no point.
fn waf_legend<DB: DrawingBackend>(
    legend: &DrawingArea<DB, Shift>,
    ftls: &[String],
    gcs: &[String],
    missing: usize,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let mut y = 40;
    if gcs.iter().any(|g| !g.is_empty()) {
        legend_heading(legend, "GC policy (colour)", &mut y)?;
        for (g, name) in gcs.iter().enumerate() {
            legend
                .draw(&PathElement::new(sample_at(y), colour(g).stroke_width(3)))
                .map_err(to_anyhow)?;
            legend
                .draw(&Text::new(name.clone(), (60, y), legend_font(15)))
                .map_err(to_anyhow)?;
            y += 22;
        }
        y += 12;
    }
    if ftls.iter().any(|f| !f.is_empty()) {
        legend_heading(legend, "FTL (line, marker)", &mut y)?;
        legend_ftls(legend, ftls, &mut y)?;
        y += 12;
    }
    legend_heading(legend, "Model (black)", &mut y)?;
    for (name, _, (on, off)) in MODELS {
        legend
            .draw(&DashedPathElement::new(
                sample_at(y),
                on,
                off,
                BLACK.stroke_width(1),
            ))
            .map_err(to_anyhow)?;
        legend
            .draw(&Text::new(name.to_string(), (60, y), legend_font(15)))
            .map_err(to_anyhow)?;
        y += 22;
    }
    if missing > 0 {
        y += 12;
        let jobs = if missing == 1 { "job" } else { "jobs" };
        for line in [
            format!("{missing} {jobs} without a result"),
            "(failed or timed out):".to_string(),
            "no point plotted".to_string(),
        ] {
            legend
                .draw(&Text::new(line, (10, y), legend_font(14)))
                .map_err(to_anyhow)?;
            y += 18;
        }
    }
    Ok(())
}

/// The FTL entries of the legend from `y` down: a grey line in the FTL's style with its marker.
fn legend_ftls<DB: DrawingBackend>(
    legend: &DrawingArea<DB, Shift>,
    ftls: &[String],
    y: &mut i32,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let grey = RGBColor(0x55, 0x55, 0x55);
    for (f, name) in ftls.iter().enumerate() {
        let style = grey.stroke_width(2);
        match dash(f) {
            None => legend.draw(&PathElement::new(sample_at(*y), style)),
            Some((on, off)) => legend.draw(&DashedPathElement::new(sample_at(*y), on, off, style)),
        }
        .map_err(to_anyhow)?;
        legend
            .draw(&marker(f, (32, *y + 8), grey))
            .map_err(to_anyhow)?;
        legend
            .draw(&Text::new(name.clone(), (60, *y), legend_font(15)))
            .map_err(to_anyhow)?;
        *y += 22;
    }
    Ok(())
}

impl Draw for WafData {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        waf_on(root, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The analytic curves assert a spare factor strictly between 0 and 1: a point at 99.5 %
    /// put the range's margin past 100 % and panicked; a spare factor past any axis is refused.
    #[test]
    fn spare_factors_at_the_ends_draw_and_absurd_ones_are_refused() {
        let data = |spare: f64, waf: f64| WafData {
            points: vec![WafPoint {
                ftl: "page".into(),
                gc: "greedy".into(),
                spare,
                waf,
            }],
            missing: 0,
        };
        for spare in [0.0, 0.005, 0.995, 1.0] {
            assert!(waf(&data(spare, 1.5)).is_ok(), "{spare}");
        }
        assert!(waf(&data(1e14, 2.0)).is_err());
        assert!(waf(&data(0.5, f64::NAN)).is_err());
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
