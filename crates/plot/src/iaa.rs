//! IAA Fig. 11 from one `noftl iaa compare` result: against the free space, one line per
//! scheme in each panel (throughput and energy relative to `conventional`, erases or GC copies).

use anyhow::{bail, Context};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value as Json;

use crate::input::{bounded, num, rows_with};
use crate::render::{render_svg, Draw};
use crate::style::{axis, colour, legend_strip, titled_with_legend, to_anyhow};

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
                y = bounded(
                    &format!("row {name}: {field} against conventional"),
                    y / base,
                )?;
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
    render_svg(d)
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
            .build_cartesian_2d(
                axis("free space", x_lo - pad, x_hi + pad)?,
                axis(desc, (lo - pad_y).max(0.0), hi + pad_y)?,
            )
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

impl Draw for IaaData {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        iaa_on(root, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
