//! Reading the result files: JSON results (a file or a result directory's summary.json) with
//! their rows, CSV files with a header, and the names of a result directory's lines.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde_json::Value as Json;

/// The name of a result directory's line: its store (`storage`) or target, else its name.
pub(crate) fn series_name(input: &Path) -> String {
    let dir = if input.is_dir() {
        input.to_path_buf()
    } else {
        input.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let from_summary = lab::results::find(&dir, "summary.json")
        .and_then(|p| std::fs::read(p).ok())
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
pub(crate) fn result_file(input: &Path, file: &str, hint: &str) -> anyhow::Result<PathBuf> {
    let path = if input.is_dir() {
        lab::results::find(input, file).unwrap_or_else(|| input.join(file))
    } else {
        input.to_path_buf()
    };
    if !path.is_file() {
        bail!("{}: no {file} ({hint})", input.display());
    }
    Ok(path)
}

/// Rows of a CSV file with a header, as (header, records).
pub(crate) fn read_csv(path: &Path) -> anyhow::Result<(csv::StringRecord, Vec<csv::StringRecord>)> {
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
pub(crate) fn keyed<'a>(
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

/// Reads and parses a JSON file, naming the file in the error.
/// A JSON file, or a result directory's summary.json.
pub(crate) fn read_json(path: &Path) -> anyhow::Result<Json> {
    let summary =
        lab::results::find(path, "summary.json").unwrap_or_else(|| path.join("summary.json"));
    let path = if path.is_dir() { &summary } else { path };
    let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// The `rows` of a JSON result, refused unless every row has `marker` (the field that tells
/// one verb's result from another's), so that a file of another kind gets an error naming
/// the verb that writes the right one instead of a figure of missing values.
pub(crate) fn rows_with<'a>(v: &'a Json, marker: &str, verb: &str) -> anyhow::Result<&'a [Json]> {
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

/// A number field of a result row (`bounded`), or an error naming the row and the field.
pub(crate) fn num(row: &Json, field: &str, row_name: &str) -> anyhow::Result<f64> {
    let v = row[field]
        .as_f64()
        .with_context(|| format!("row {row_name}: no number `{field}`"))?;
    bounded(&format!("row {row_name}: `{field}`"), v)
}

/// The largest magnitude of a number a figure is drawn from: no figure of these verbs comes
/// near it (a trillion transactions per second, microseconds or blocks), and every axis built
/// from such numbers can be drawn (`style::axis`).
pub(crate) const MAX_VALUE: f64 = 1e12;

/// `v`, the input `what`, if a figure can be drawn from it: finite and at most `MAX_VALUE` in
/// magnitude. Why: plotters steps through an axis in floating point, and a `stdev` of 1e200 in
/// a result file hung `noftl plot` (and the dashboard showing that result) at 100 % CPU.
pub(crate) fn bounded(what: &str, v: f64) -> anyhow::Result<f64> {
    if !v.is_finite() {
        bail!("{what} is {v}: a figure is drawn from finite numbers");
    }
    if v.abs() > MAX_VALUE {
        bail!("{what} is {v:e}: too large for a figure (at most {MAX_VALUE:e} in magnitude)");
    }
    Ok(v)
}

/// A CSV field parsed as a number and `bounded`, or an error naming the file and the text.
pub(crate) fn csv_num(path: &Path, text: &str) -> anyhow::Result<f64> {
    let v = text
        .parse::<f64>()
        .with_context(|| format!("{}: '{text}' is not a number", path.display()))?;
    bounded(&format!("{}: '{text}'", path.display()), v)
}
