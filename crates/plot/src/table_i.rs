//! IPA Table I from one `noftl ipa compare` result: three panels of bars, each IPA row labelled
//! with its change against its control row and against `baseline`.

use anyhow::Context;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value as Json;

use crate::input::{bounded, num, rows_with};
use crate::render::{render_svg, Draw};
use crate::style::{
    axis, bar_rect, colour, error_bar, label_above, legend_strip, titled_with_legend, to_anyhow,
};

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
            stdev: bounded(
                &format!("row {config}: `stdev`"),
                r["stdev"].as_f64().unwrap_or(0.0),
            )?,
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
    render_svg(t)
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
            .build_cartesian_2d(axis("configuration", 0.0, n)?, axis(desc, 0.0, y_max)?)
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

impl Draw for TableI {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        table_i_on(root, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
