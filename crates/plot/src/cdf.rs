//! Latency CDFs from result directories' `raw.csv`, one line per input (or per row of a
//! comparison).

use std::path::PathBuf;

use anyhow::{bail, Context};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::input::{csv_num, keyed, read_csv, result_file, series_name};
use crate::render::Draw;
use crate::style::{colour, log_axis, to_anyhow};

/// One line of a latency CDF: its name and its latencies in microseconds, sorted.
#[derive(Clone, Debug, PartialEq)]
pub struct CdfSeries {
    pub name: String,
    pub latencies_us: Vec<f64>,
}

pub(crate) fn load_cdfs(inputs: &[PathBuf]) -> anyhow::Result<Vec<CdfSeries>> {
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
                .map(|r| csv_num(&path, &r[lat]))
                .collect::<anyhow::Result<Vec<f64>>>()
                .context("a latency")?;
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
        .build_cartesian_2d(
            log_axis("latency", lo * 0.8, hi * 1.25)?.log_scale(),
            0.0..1.0,
        )
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

impl Draw for [CdfSeries] {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        cdf_on(root, self)
    }
}
