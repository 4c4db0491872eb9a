//! A reproduction's fidelity from one `noftl reproduce` result: every slowdown cell as a point,
//! the paper's value across, ours up, on the diagonal where they agree, with the tolerance band
//! around it; calibration cells and held-out cells apart.

use anyhow::{bail, Context};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value as Json;

use crate::input::{bounded, num};
use crate::render::{render_svg, Draw};
use crate::style::{axis, colour, legend_strip, titled_with_legend, to_anyhow};

/// One slowdown cell: its name, the paper's value, ours, and whether it was fitted.
#[derive(Clone, Debug, PartialEq)]
pub struct FidelityPoint {
    pub cell: String,
    pub paper: f64,
    pub ours: f64,
    pub calibration: bool,
    pub within: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FidelityData {
    pub title: String,
    pub tolerance: f64,
    pub points: Vec<FidelityPoint>,
}

/// The slowdown cells of `noftl reproduce --json` output (cells with a range or an order are
/// left out: they have no single paper value).
pub fn fidelity_of(v: &Json) -> anyhow::Result<FidelityData> {
    let cells = v["cells"]
        .as_array()
        .context("no `cells`: not a `noftl reproduce` result")?;
    let mut points = Vec::new();
    let mut tolerance: f64 = 0.0;
    for (i, c) in cells.iter().enumerate() {
        if c["metric"] != "slowdown" || !c["paper_high"].is_null() {
            continue;
        }
        let name = c["cell"]
            .as_str()
            .with_context(|| format!("cell {i}: no name"))?;
        let paper = bounded(name, num(c, "paper", name)?)?;
        let ours = bounded(name, num(c, "ours", name)?)?;
        if !(paper > 0.0 && ours >= 0.0) {
            bail!("cell {name}: a slowdown of {paper} (paper) or {ours} (ours) cannot be drawn");
        }
        tolerance = tolerance.max(num(c, "tolerance", name)?.clamp(0.0, 1.0));
        points.push(FidelityPoint {
            cell: name.to_string(),
            paper,
            ours,
            calibration: c["set"] == "calibration",
            within: c["within"] == true,
        });
    }
    if points.is_empty() {
        bail!("no slowdown cells to draw");
    }
    let paper = v["paper"].as_str().unwrap_or("?");
    let cpu = v["cpu"]["name"].as_str().unwrap_or("?");
    let within = points.iter().filter(|p| !p.calibration && p.within).count();
    let held = points.iter().filter(|p| !p.calibration).count();
    Ok(FidelityData {
        title: format!(
            "{paper}: slowdowns against the paper ({within} of {held} held-out within {:.0}%; CPU profile {cpu})",
            tolerance * 100.0
        ),
        tolerance,
        points,
    })
}

fn fidelity_on<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    d: &FidelityData,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let (plot, legend) = titled_with_legend(root, &d.title, 20, 200)?;
    let hi = d
        .points
        .iter()
        .map(|p| p.paper.max(p.ours))
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(axis("paper", 0.8, hi)?, axis("ours", 0.8, hi)?)
        .map_err(to_anyhow)?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(0xe2, 0xe2, 0xe2))
        .x_desc("the paper's slowdown against NoFTL")
        .y_desc("ours")
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(to_anyhow)?;
    // The tolerance band around agreement.
    let band = RGBColor(0xdd, 0xee, 0xdd);
    let steps: Vec<f64> = (0..=50)
        .map(|k| 0.8 + (hi - 0.8) * f64::from(k) / 50.0)
        .collect();
    let mut poly: Vec<(f64, f64)> = steps
        .iter()
        .map(|&x| (x, x * (1.0 + d.tolerance)))
        .collect();
    poly.extend(steps.iter().rev().map(|&x| (x, x * (1.0 - d.tolerance))));
    chart
        .draw_series(std::iter::once(Polygon::new(poly, band.filled())))
        .map_err(to_anyhow)?;
    chart
        .draw_series(LineSeries::new(
            vec![(0.8, 0.8), (hi, hi)],
            BLACK.stroke_width(1),
        ))
        .map_err(to_anyhow)?;
    for (k, calibration) in [(0, false), (1, true)] {
        let c = colour(k);
        chart
            .draw_series(
                d.points
                    .iter()
                    .filter(|p| p.calibration == calibration)
                    .map(|p| Circle::new((p.paper, p.ours), 4, c.filled())),
            )
            .map_err(to_anyhow)?;
    }
    legend_strip(
        &legend,
        ["held out (predicted)", "calibration (fitted)"].into_iter(),
        false,
        &[],
    )
}

impl Draw for FidelityData {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        fidelity_on(root, self)
    }
}

/// The figure as an SVG document.
pub fn fidelity(d: &FidelityData) -> anyhow::Result<String> {
    render_svg(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slowdown_cells_become_points_and_the_rest_is_left_out() {
        let v = serde_json::json!({"paper": "noftl", "cpu": {"name": "paper-noftl"}, "cells": [
            {"cell": "TPC-B 48 NoFTL", "metric": "tx/s", "paper": 462.0, "ours": 480.0, "set": "calibration", "within": true, "tolerance": 0.15},
            {"cell": "TPC-B 48 DFTL 2%", "metric": "slowdown", "paper": 1.67, "ours": 1.5, "set": "held-out", "within": true, "tolerance": 0.15},
            {"cell": "TPC-H Q1 DFTL 15%", "metric": "slowdown", "paper": 2.08, "ours": 2.4, "set": "calibration", "within": false, "tolerance": 0.15},
            {"cell": "TPC-B 500 DFTL 2%", "metric": "slowdown", "paper": 1.5, "paper_high": 3.7, "ours": 2.0, "set": "held-out", "within": true, "tolerance": 0.0}
        ]});
        let d = fidelity_of(&v).unwrap();
        assert_eq!(d.points.len(), 2);
        assert!(d.points[1].calibration && !d.points[0].calibration);
        assert!(
            d.title.contains("1 of 1 held-out within 15%"),
            "{}",
            d.title
        );
        assert!(fidelity(&d).unwrap().contains("<svg"));
        let bad = serde_json::json!({"cells": [{"cell": "x", "metric": "slowdown", "paper": 1e300, "ours": 1.0, "tolerance": 0.15}]});
        assert!(
            fidelity_of(&bad).is_err(),
            "an unbounded value is refused, not drawn"
        );
        assert!(fidelity_of(&serde_json::json!({"rows": []})).is_err());
    }
}
