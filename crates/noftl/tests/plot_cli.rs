//! `noftl plot --kind table-i` and `--kind iaa` (docs/results.md): the figures of `ipa compare`
//! and `iaa compare` JSON hold one bar or line per row, the values the JSON gives and, for
//! IPA Table I, the relative changes; input of another kind is refused with a message.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cli_support;
use cli_support::{noftl, svg_elements, svg_rects, svg_texts};

use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The repository's docs/results directory.
fn results_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results")
}

/// Plots `input` with `kind` into DIR/out.svg: (success, SVG or empty, stderr).
fn plot(dir: &Path, input: &Path, kind: &str) -> (bool, String, String) {
    let out = dir.join("out.svg");
    let _ = std::fs::remove_file(&out);
    let (ok, _, err) = noftl(&[
        "plot",
        input.to_str().unwrap(),
        "--kind",
        kind,
        "--out",
        out.to_str().unwrap(),
    ]);
    (ok, std::fs::read_to_string(&out).unwrap_or_default(), err)
}

fn write_json(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

/// The bars of a figure: filled rectangles wider than a legend swatch.
fn bars(svg: &str) -> Vec<HashMap<String, String>> {
    svg_rects(svg)
        .into_iter()
        .filter(|r| r["fill"] != "#FFFFFF" && r["width"].parse::<f64>().unwrap() > 20.0)
        .collect()
}

fn height(r: &HashMap<String, String>) -> f64 {
    r["height"].parse().unwrap()
}

/// A small `ipa compare` result with round numbers, so that the changes are known by hand.
fn ipa_fixture() -> Value {
    let row = |config: &str, mig: f64, er: f64, tps: f64| {
        json!({"config": config, "host_reads": 10, "host_writes": 100, "ipa_appends": 0,
               "append_percent": 0.0, "gc_migrations": 0, "gc_erases": 0,
               "gc_migrations_per_host_write": mig, "gc_erases_per_host_write": er,
               "throughput_tps": tps, "stdev": 5.0, "space_overhead": 0.0})
    };
    json!({"workload": "tatp", "scale": 100, "scheme": "2x3", "repeat": 3, "rows": [
        row("baseline", 0.0, 0.04, 100.0),
        row("global", 0.2, 0.05, 120.0),
        row("ipa-global", 0.05, 0.02, 150.0),
    ], "not_run": [{"config": "regions", "why": "region is full"}]})
}

#[test]
fn ipa_table_i_has_a_bar_per_row_and_panel_and_the_changes() {
    let d = tempfile::tempdir().unwrap();
    let input = write_json(d.path(), "ipa.json", &ipa_fixture());
    let (ok, svg, err) = plot(d.path(), &input, "auto");
    assert!(ok, "{err}");
    assert!(err.contains("table-i"), "auto picks Table I: {err}");
    assert!(svg.contains("<!-- made by: "));
    let texts = svg_texts(&svg);
    for t in [
        "IPA Table I: TATP 100, scheme 2x3",
        "baseline",
        "global",
        "ipa-global",
        // GC migrations: 0.05 against 0.2, and a baseline without any (no ratio).
        "-75% vs global",
        "n/a vs baseline (0)",
        // GC erases: 0.02 against 0.05 and 0.04.
        "-60% vs global",
        "-50% vs baseline",
        // Throughput: 150 against 120 and 100.
        "+25% vs global",
        "+50% vs baseline",
        "150.0",
        "not run: regions",
        "error bars: stdev, 3 runs",
    ] {
        assert!(
            texts.iter().any(|x| x.starts_with(t)),
            "no {t} in {texts:?}"
        );
    }
    // Three panels of three bars; in the throughput panel (the last) heights follow tps.
    let b = bars(&svg);
    assert_eq!(b.len(), 9, "{b:?}");
    let tps = &b[6..];
    assert!((height(&tps[1]) / height(&tps[0]) - 1.2).abs() < 0.02);
    assert!((height(&tps[2]) / height(&tps[0]) - 1.5).abs() < 0.02);
    // The error bars: a vertical black path through the centre of each throughput bar.
    let verticals: Vec<Vec<String>> = svg_elements(&svg, "polyline")
        .into_iter()
        .filter(|p| p["stroke"] == "#000000")
        .map(|p| p["points"].split_whitespace().map(String::from).collect())
        .collect();
    for bar in tps {
        let centre = bar["x"].parse::<f64>().unwrap() + bar["width"].parse::<f64>().unwrap() / 2.0;
        let through = verticals.iter().any(|pts| {
            let xs: Vec<f64> = pts
                .iter()
                .map(|xy| xy.split(',').next().unwrap().parse().unwrap())
                .collect();
            xs.len() == 2 && xs[0] == xs[1] && (xs[0] - centre).abs() <= 1.0
        });
        assert!(through, "no error bar at x = {centre}");
    }
}

#[test]
fn ipa_table_i_of_the_repository_run_labels_every_ipa_row() {
    let d = tempfile::tempdir().unwrap();
    let input = results_dir().join("ipa-tatp.json");
    let v: Value = serde_json::from_slice(&std::fs::read(&input).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let (ok, svg, err) = plot(d.path(), &input, "table-i");
    assert!(ok, "{err}");
    assert_eq!(bars(&svg).len(), 3 * rows.len());
    let texts = svg_texts(&svg);
    let row = |c: &str| rows.iter().find(|r| r["config"] == c);
    for r in rows {
        let config = r["config"].as_str().unwrap();
        let Some(control) = config.strip_prefix("ipa-") else {
            continue;
        };
        for against in [control, "baseline"] {
            let Some(base) = row(against) else { continue };
            for f in ["gc_erases_per_host_write", "throughput_tps"] {
                let (new, old) = (r[f].as_f64().unwrap(), base[f].as_f64().unwrap());
                let p = (new / old - 1.0) * 100.0;
                let label = if p.abs() < 10.0 {
                    format!("{p:+.1}% vs {against}")
                } else {
                    format!("{p:+.0}% vs {against}")
                };
                assert!(texts.contains(&label), "{config} {f}: no {label}");
            }
        }
    }
}

#[test]
fn iaa_sweep_has_a_line_per_scheme_and_panel() {
    let d = tempfile::tempdir().unwrap();
    let input = results_dir().join("iaa-native.json");
    let v: Value = serde_json::from_slice(&std::fs::read(&input).unwrap()).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let mut schemes: Vec<&str> = Vec::new();
    let mut spaces: Vec<f64> = Vec::new();
    for r in rows {
        let s = r["scheme"].as_str().unwrap();
        if !schemes.contains(&s) {
            schemes.push(s);
        }
        let f = r["free_space"].as_f64().unwrap();
        if !spaces.contains(&f) {
            spaces.push(f);
        }
    }
    let (ok, svg, err) = plot(d.path(), &input, "auto");
    assert!(ok, "{err}");
    assert!(err.contains("iaa"), "auto picks the IAA sweep: {err}");
    let texts = svg_texts(&svg);
    for t in schemes.iter().copied().chain([
        "throughput vs conventional",
        "erases per 1000 queries",
        "energy vs conventional",
        "free space (%)",
    ]) {
        assert!(texts.iter().any(|x| x == t), "no {t} in {texts:?}");
    }
    // Data lines (2 px; legend samples are 3 px): three panels, a line per scheme, a point
    // per free space.
    let lines: Vec<HashMap<String, String>> = svg_elements(&svg, "polyline")
        .into_iter()
        .filter(|p| p["stroke-width"] == "2")
        .collect();
    assert_eq!(lines.len(), 3 * schemes.len());
    let points = |p: &HashMap<String, String>| -> Vec<(f64, f64)> {
        p["points"]
            .split_whitespace()
            .map(|xy| {
                let (x, y) = xy.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect()
    };
    for l in &lines {
        assert_eq!(points(l).len(), spaces.len());
    }
    // `conventional` is the reference of the relative panels: flat at 1 in each.
    let conv = schemes.iter().position(|s| *s == "conventional").unwrap();
    for panel in [0, 2] {
        let p = points(&lines[panel * schemes.len() + conv]);
        assert!(p.iter().all(|q| (q.1 - p[0].1).abs() < 1.0), "{p:?}");
    }
}

#[test]
fn plots_of_the_wrong_input_are_refused_with_a_reason() {
    let d = tempfile::tempdir().unwrap();
    let iaa = results_dir().join("iaa-native.json");
    let ipa = write_json(d.path(), "ipa.json", &ipa_fixture());
    let mut no_tps = ipa_fixture();
    no_tps["rows"][2]
        .as_object_mut()
        .unwrap()
        .remove("throughput_tps");
    let no_tps = write_json(d.path(), "no-tps.json", &no_tps);
    let no_conventional = write_json(
        d.path(),
        "iaa.json",
        &json!({"rows": [{"free_space": 0.1, "scheme": "iaa", "throughput_qps": 5.0}]}),
    );
    let not_json = d.path().join("x.json");
    std::fs::write(&not_json, "rows: none").unwrap();
    for (input, kind, says) in [
        (&iaa, "table-i", "not a `noftl ipa compare` result"),
        (&ipa, "iaa", "not a `noftl iaa compare` result"),
        (
            &no_tps,
            "table-i",
            "row ipa-global: no number `throughput_tps`",
        ),
        (
            &no_conventional,
            "iaa",
            "no `conventional` row at free space 0.1",
        ),
        (&not_json, "table-i", "is not JSON"),
    ] {
        let (ok, _, err) = plot(d.path(), input, kind);
        assert!(!ok, "{kind} {}", input.display());
        assert!(err.contains(says), "{kind}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// Runs `noftl plot` for at most 30 s: (success, stderr), or `None` if it was still drawing.
fn plot_briefly(args: &[&str]) -> Option<(bool, String)> {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_noftl"))
        .arg("plot")
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Issue 32: `noftl plot --out h.svg h.json` with a row whose `stdev` is 1e200 hung at 100 %
/// CPU. Now a number no axis can hold is refused with the row and field, at once.
#[test]
fn a_number_no_axis_can_hold_is_refused_instead_of_drawing_forever() {
    let d = tempfile::tempdir().unwrap();
    let mut compare = json!({
        "workload": "tpcb", "scale": 1,
        "rows": [
            {"storage": "native", "throughput_tps": 100.0, "stdev": 1e200},
            {"storage": "page", "throughput_tps": 50.0, "stdev": 1.0}
        ]
    });
    let h = write_json(d.path(), "h.json", &compare);
    let out = d.path().join("h.svg");
    let (ok, err) = plot_briefly(&["--out", out.to_str().unwrap(), h.to_str().unwrap()])
        .expect("refused, not drawn forever");
    assert!(!ok, "{err}");
    assert!(
        err.contains("row native: `stdev` is 1e200: too large for a figure"),
        "{err}"
    );
    assert!(!out.exists());
    compare["rows"][0]["stdev"] = json!(1.0);
    let h = write_json(d.path(), "h.json", &compare);
    let (ok, err) = plot_briefly(&["--out", out.to_str().unwrap(), h.to_str().unwrap()]).unwrap();
    assert!(ok, "{err}");
    // A latency CDF from a raw.csv with a latency that is not a finite number.
    let raw = d.path().join("raw.csv");
    std::fs::write(&raw, "time_s,type,latency_us\n0.1,read,5\n0.2,read,inf\n").unwrap();
    let (ok, err) = plot_briefly(&["--out", out.to_str().unwrap(), raw.to_str().unwrap()]).unwrap();
    assert!(!ok && err.contains("finite"), "{err}");
}

/// Issue 32 (the output rule): a figure never replaces one of its inputs.
#[test]
fn a_figure_is_never_written_over_its_input() {
    let d = tempfile::tempdir().unwrap();
    let v = json!({
        "workload": "tpcb", "scale": 1,
        "rows": [{"storage": "native", "throughput_tps": 100.0, "stdev": 1.0}]
    });
    let input = write_json(d.path(), "compare.svg", &v);
    let before = std::fs::read(&input).unwrap();
    let (ok, _, err) = noftl(&[
        "plot",
        "--kind",
        "figure3",
        "--out",
        input.to_str().unwrap(),
        input.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("same file as input"), "{err}");
    assert_eq!(std::fs::read(&input).unwrap(), before);
}
