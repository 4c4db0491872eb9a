//! NoFTL Fig. 3 from `noftl compare` results: grouped bars of each store's slowdown against
//! `native`, with error bars and the factor above each bar.

use std::path::PathBuf;

use anyhow::{bail, Context};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value as Json;

use crate::input::{bounded, read_json};
use crate::render::{render_svg, Draw};
use crate::style::{axis, bar_rect, colour, error_bar, label_above, to_anyhow};

/// One bar of Figure 3.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub group: String,
    pub store: String,
    pub slowdown: f64,
    /// Standard deviation of the slowdown, from the two stores' relative deviations.
    pub stdev: f64,
}

pub(crate) fn load_compares(inputs: &[PathBuf]) -> anyhow::Result<Vec<Bar>> {
    let mut bars = Vec::new();
    for input in inputs {
        // A result directory of `noftl compare --results` holds the JSON as summary.json.
        let path = &if input.is_dir() {
            lab::results::find(input, "summary.json").unwrap_or_else(|| input.join("summary.json"))
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
        let store = r["storage"].as_str().unwrap_or("?");
        let tps = r["throughput_tps"]
            .as_f64()
            .context("a row has no throughput_tps")?;
        Ok((
            bounded(&format!("row {store}: `throughput_tps`"), tps)?,
            bounded(
                &format!("row {store}: `stdev`"),
                r["stdev"].as_f64().unwrap_or(0.0),
            )?,
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
        let stdev = if store == "native" {
            n_sd / n_tps
        } else {
            slowdown * rel
        };
        bars.push(Bar {
            group: group.clone(),
            store: store.to_string(),
            slowdown: bounded(&format!("{store}: the slowdown"), slowdown)?,
            stdev: bounded(&format!("{store}: the slowdown's deviation"), stdev)?,
        });
    }
    Ok(bars)
}

/// NoFTL Fig. 3 as grouped bars (SVG; the dashboard's figure of a comparison).
pub fn figure3(bars: &[Bar]) -> anyhow::Result<String> {
    render_svg(bars)
}

fn figure3_on<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, bars: &[Bar]) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    // Bars made by a program rather than read by `bars_of` are bounded here.
    for b in bars {
        bounded(&format!("{}: the slowdown", b.store), b.slowdown)?;
        bounded(&format!("{}: the slowdown's deviation", b.store), b.stdev)?;
    }
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
            .build_cartesian_2d(axis("store", 0.0, x_max)?, axis("slowdown", 0.0, y_max)?)
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

impl Draw for [Bar] {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        figure3_on(root, self)
    }
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

    /// Issue 32: a `stdev` of 1e200 hung the drawing at 100 % CPU (plotters stepping through
    /// an axis it could not step through); now every number a figure is drawn from is bounded.
    #[test]
    fn a_number_no_axis_can_hold_is_refused_not_drawn_forever() {
        for (field, value) in [
            ("stdev", serde_json::json!(1e200)),
            ("throughput_tps", serde_json::json!(1e13)),
            ("stdev", serde_json::json!(-1e300)),
        ] {
            let mut v = compare_json();
            v["rows"][0][field] = value;
            let e = format!("{:#}", bars_of(&v).unwrap_err());
            assert!(e.contains("too large for a figure"), "{e}");
        }
        // A slowdown no axis holds, from a throughput next to 0.
        let mut v = compare_json();
        v["rows"][1]["throughput_tps"] = serde_json::json!(1e-9);
        assert!(bars_of(&v).is_err());
        // Bars made by a program rather than read: the axis refuses them.
        let bar = |stdev: f64| Bar {
            group: "g".into(),
            store: "native".into(),
            slowdown: 1.0,
            stdev,
        };
        for sd in [1e200, f64::NAN, f64::INFINITY] {
            assert!(figure3(&[bar(sd)]).is_err(), "{sd}");
        }
        assert!(figure3(&[bar(0.1)]).is_ok());
    }

    #[test]
    fn a_compare_without_native_is_refused() {
        let mut v = compare_json();
        v["rows"].as_array_mut().unwrap().remove(0);
        assert!(format!("{:#}", bars_of(&v).unwrap_err()).contains("native"));
    }
}
