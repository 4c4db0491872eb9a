//! Throughput, GC migrations per second and free blocks over time from result directories'
//! `samples.csv`, one line per input (or per row of a comparison, its repeats in sequence).

use std::path::PathBuf;

use anyhow::{bail, Context};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::input::{csv_num, keyed, read_csv, result_file, series_name};
use crate::render::Draw;
use crate::style::{axis, colour, legend_strip, titled_with_legend, to_anyhow};

/// One line of a time series: per window, its end (s), throughput, GC migrations per second
/// and free blocks (None: no flash).
#[derive(Clone, Debug, PartialEq)]
pub struct TimeSeries {
    pub name: String,
    /// What the throughput counts: "transactions/s" (goodput) or "IOPS".
    pub unit: &'static str,
    pub points: Vec<(f64, f64, f64, Option<f64>)>,
}

pub(crate) fn load_timeseries(inputs: &[PathBuf]) -> anyhow::Result<Vec<TimeSeries>> {
    let mut out = Vec::new();
    for input in inputs {
        let path = result_file(input, "samples.csv", "run with --results DIR")?;
        let (h, rows) = read_csv(&path)?;
        let col = |name: &str| h.iter().position(|c| c == name);
        // Transactions: goodput; io: every request (BenchBase's throughput; before format 2
        // `iops`).
        let (rate, unit) = match (
            col("goodput_tps"),
            col("Throughput (requests/second)").or(col("iops")),
        ) {
            (Some(c), _) => (c, "transactions/s"),
            (None, Some(c)) => (c, "IOPS"),
            _ => bail!(
                "{}: no goodput_tps or Throughput (requests/second) column",
                path.display()
            ),
        };
        let need =
            |name: &str| col(name).with_context(|| format!("{}: no {name} column", path.display()));
        // A window's end: BenchBase's `Time (seconds)` is its start (before format 2, `time_s`
        // was its end).
        let (t, t_is_start) = match (col("Time (seconds)"), col("time_s")) {
            (Some(c), _) => (c, true),
            (None, Some(c)) => (c, false),
            _ => bail!("{}: no Time (seconds) column", path.display()),
        };
        let (w, gc, free) = (
            need("window_s")?,
            need("gc_migrations")?,
            need("free_blocks")?,
        );
        let repeat = col("repeat");
        for (name, rows) in keyed(&h, &rows, &series_name(input)) {
            let num = |r: &csv::StringRecord, i: usize| csv_num(&path, &r[i]);
            // A comparison's repeats follow each other on one time axis.
            let (mut offset, mut last_t, mut last_repeat) = (0.0, 0.0, None::<String>);
            let mut windows = Vec::new();
            for r in rows {
                let rep = repeat.map(|i| r[i].to_string());
                if rep != last_repeat {
                    offset = last_t;
                    last_repeat = rep;
                }
                let len = num(r, w)?;
                let time = offset + num(r, t)? + if t_is_start { len } else { 0.0 };
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
            .build_cartesian_2d(axis("time", 0.0, t_max)?, axis(label, 0.0, y_max)?)
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

impl Draw for [TimeSeries] {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        timeseries_on(root, self)
    }
}
