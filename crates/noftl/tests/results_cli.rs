//! Result directories (`--results DIR`, docs/results.md): the files of `bench`, `compare`,
//! `ipa compare`, `iaa compare` and `io` parse, and agree with each other and with the verb's JSON.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cli_support;
use cli_support::{noftl, svg_rects, svg_texts};

use std::collections::HashMap;
use std::path::Path;

/// A CSV file as its header and rows of fields.
fn csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    for r in &rows {
        assert_eq!(r.len(), header.len(), "{}: {r:?}", path.display());
    }
    (header, rows)
}

fn col(header: &[String], name: &str) -> usize {
    header
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
}

fn sum_u64(rows: &[Vec<String>], i: usize) -> u64 {
    rows.iter().map(|r| r[i].parse::<u64>().unwrap()).sum()
}

/// The file of `kind` in a result directory: BenchBase's `<bench>_<timestamp>.<kind>`, the one
/// such file there.
fn at(dir: &Path, kind: &str) -> std::path::PathBuf {
    let suffix = format!(".{kind}");
    let found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().ends_with(&suffix))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one *{suffix} in {}: {found:?}",
        dir.display()
    );
    found[0].clone()
}

/// The keys where summary.json holds BenchBase's value instead of the verb's (strings there).
const BENCHBASE_OVERRIDES: [&str; 2] = ["terminals", "scalefactor"];

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// What a verb run with `--json - --results DIR --sample-window WINDOW --raw` printed and wrote.
struct Written {
    today: serde_json::Value,
    s: serde_json::Value,
    samples: (Vec<String>, Vec<Vec<String>>),
    raw: (Vec<String>, Vec<Vec<String>>),
}

fn run_with_results(args: &[&str], dir: &Path, window: &str) -> Written {
    let dir_s = dir.to_str().unwrap();
    let tail = [
        "--json",
        "-",
        "--results",
        dir_s,
        "--sample-window",
        window,
        "--raw",
    ];
    let (ok, out, err) = noftl(&[args, &tail[..]].concat());
    assert!(ok, "{err}");
    Written {
        today: serde_json::from_str(&out).unwrap(),
        s: json(&at(dir, "summary.json")),
        samples: csv(&at(dir, "samples.csv")),
        raw: csv(&at(dir, "raw.csv")),
    }
}

#[test]
fn bench_results_agree_with_the_json() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("tpcb");
    let out = d.path().join("r.json");
    let (ok, _, err) = noftl(&[
        "bench",
        "tpcb",
        "--storage",
        "native",
        "--scale",
        "1",
        "--accounts-per-branch",
        "2000",
        "--terminals",
        "2",
        "--duration",
        "1s",
        "--json",
        out.to_str().unwrap(),
        "--results",
        dir.to_str().unwrap(),
        "--sample-window",
        "100ms",
        "--raw",
    ]);
    assert!(ok, "{err}");
    let s = json(&at(&dir, "summary.json"));
    // Today's JSON, field for field, plus BenchBase's names.
    let today = json(&out);
    for (k, v) in today.as_object().unwrap() {
        if !BENCHBASE_OVERRIDES.contains(&k.as_str()) {
            assert_eq!(&s[k], v, "summary.json keeps {k}");
        }
    }
    assert_eq!(s["Benchmark Type"], "tpcb");
    assert_eq!(s["terminals"], "2");
    assert_eq!(s["scalefactor"], "1");
    assert_eq!(s["isolation"], "TRANSACTION_SERIALIZABLE");
    assert_eq!(s["Final State"], "EXIT");
    assert_eq!(s["DBMS Type"], "NOFTL");
    assert_eq!(s["DBMS Version"], s["version"]);
    assert!(s["command"]
        .as_str()
        .unwrap()
        .starts_with("noftl bench tpcb --storage native"));
    // Virtual time from the fixed epoch: the run's timestamps are its virtual clock.
    assert_eq!(s["started_at"], "1970-01-01T00:00:00Z");
    let elapsed = s["Elapsed Time (nanoseconds)"].as_u64().unwrap();
    let start = s["Start timestamp (milliseconds)"].as_i64().unwrap();
    let now = s["Current Timestamp (milliseconds)"].as_i64().unwrap();
    assert_eq!(now - start, (elapsed / 1_000_000) as i64);
    assert_eq!(
        s["Measured Requests"].as_u64().unwrap(),
        s["committed"].as_u64().unwrap() + s["aborted"].as_u64().unwrap()
    );
    let committed = s["committed"].as_u64().unwrap();
    assert!(committed > 100, "{committed}");
    let goodput = s["Goodput (requests/second)"].as_f64().unwrap();
    let tps = s["throughput_tps"].as_f64().unwrap();
    assert!((goodput - tps).abs() / tps < 1e-3, "{goodput} vs {tps}");
    let dist = &s["Latency Distribution"];
    let p50 = dist["Median Latency (microseconds)"].as_f64().unwrap();
    let p99 = dist["99th Percentile Latency (microseconds)"]
        .as_f64()
        .unwrap();
    let max = dist["Maximum Latency (microseconds)"].as_f64().unwrap();
    assert!(0.0 < p50 && p50 <= p99 && p99 <= max);
    // The histogram's median (3 significant digits) and BenchBase's (whole microseconds) agree.
    assert!(
        dist.as_object().unwrap().values().all(|v| v.is_i64()),
        "{dist}"
    );
    let hist_p50 = s["latency_us"]["p50"].as_f64().unwrap();
    assert!((hist_p50 - p50).abs() / p50 < 0.01, "{hist_p50} vs {p50}");

    let (h, rows) = csv(&at(&dir, "samples.csv"));
    assert!(rows.len() >= 10, "1 s in 100 ms windows: {}", rows.len());
    assert_eq!(sum_u64(&rows, col(&h, "committed")), committed);
    let window_s: f64 = rows
        .iter()
        .map(|r| r[col(&h, "window_s")].parse::<f64>().unwrap())
        .sum();
    let secs = s["virtual_seconds"].as_f64().unwrap();
    assert!((window_s - secs).abs() < 1e-6, "{window_s} vs {secs}");
    // The windows' flash programs add up to the run's.
    let programs = sum_u64(&rows, col(&h, "flash_programs"));
    let per_txn = s["per_txn"]["flash_programs"].as_f64().unwrap();
    assert!(
        ((programs as f64) - per_txn * committed as f64).abs() < 1.0,
        "{programs} vs {per_txn} x {committed}"
    );
    let free = col(&h, "free_blocks");
    assert!(rows.iter().all(|r| r[free].parse::<u64>().is_ok()));

    let (h, raw) = csv(&at(&dir, "raw.csv"));
    assert_eq!(raw.len() as u64, committed);
    assert!(raw.iter().all(|r| r[col(&h, "Transaction Name")] == "tpcb"));
    assert!(raw
        .iter()
        .all(|r| r[col(&h, "Transaction Type Index")] == "1"));
    let workers: std::collections::BTreeSet<&str> = raw
        .iter()
        .map(|r| r[col(&h, "Worker Id (start number)")].as_str())
        .collect();
    assert_eq!(workers, ["0", "1"].into(), "the two terminals");
    assert!(raw.iter().all(|r| r[col(&h, "outcome")] == "commit"));
    let mean: f64 = raw
        .iter()
        .map(|r| r[col(&h, "latency_us")].parse::<f64>().unwrap())
        .sum::<f64>()
        / raw.len() as f64;
    let avg = dist["Average Latency (microseconds)"].as_f64().unwrap();
    assert!(
        (mean - avg).abs() < 1.0,
        "{mean} vs {avg} (truncated, as BenchBase's)"
    );
}

#[test]
fn tatp_and_tpcc_results_name_their_transaction_types() {
    let d = tempfile::tempdir().unwrap();
    for (workload, scale, extra) in [
        ("tatp", "2000", vec![]),
        ("tpcc", "1", vec!["--items", "1000", "--customers", "30"]),
    ] {
        let dir = d.path().join(workload);
        let mut args = vec![
            "bench",
            workload,
            "--storage",
            "native",
            "--scale",
            scale,
            "--terminals",
            "2",
            "--duration",
            "500ms",
            "--results",
            dir.to_str().unwrap(),
            "--raw",
        ];
        args.extend(extra);
        let (ok, _, err) = noftl(&args);
        assert!(ok, "{workload}: {err}");
        let s = json(&at(&dir, "summary.json"));
        let (h, rows) = csv(&at(&dir, "samples.csv"));
        let (rh, raw) = csv(&at(&dir, "raw.csv"));
        let committed = if workload == "tatp" {
            s["succeeded"].as_u64().unwrap()
        } else {
            s["committed"].as_u64().unwrap()
        };
        assert_eq!(
            sum_u64(&rows, col(&h, "committed")),
            committed,
            "{workload}"
        );
        let commits = raw
            .iter()
            .filter(|r| r[col(&rh, "outcome")] == "commit")
            .count() as u64;
        assert_eq!(commits, committed, "{workload}");
        assert_eq!(
            sum_u64(&rows, col(&h, "Requests")),
            raw.len() as u64,
            "{workload}"
        );
        let types: std::collections::BTreeSet<&str> = raw
            .iter()
            .map(|r| r[col(&rh, "Transaction Name")].as_str())
            .collect();
        assert!(types.len() >= 3, "{workload}: {types:?}");
        assert!(!types.contains("?"), "{workload}: {types:?}");
    }
}

#[test]
fn compare_results_have_a_series_per_store_and_repeat() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("cmp");
    let Written {
        today,
        s,
        samples: (h, rows),
        raw: (rh, raw),
    } = run_with_results(
        &[
            "compare",
            "--scale",
            "1",
            "--accounts-per-branch",
            "5000",
            "--repeat",
            "2",
            "--duration",
            "300ms",
            "--stores",
            "native,dftl-2%,page",
        ],
        &dir,
        "100ms",
    );
    assert_eq!(s["rows"].as_array().unwrap().len(), 3);
    let mut per_store: HashMap<String, u64> = HashMap::new();
    for r in &rows {
        *per_store.entry(r[col(&h, "storage")].clone()).or_default() +=
            r[col(&h, "committed")].parse::<u64>().unwrap();
    }
    for (i, row) in today["rows"].as_array().unwrap().iter().enumerate() {
        let name = row["storage"].as_str().unwrap();
        assert_eq!(s["rows"][i]["throughput_tps"], row["throughput_tps"]);
        // Committed transactions = the windows' throughput x their length, summed.
        let txns: f64 = row["windows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["throughput_tps"].as_f64().unwrap() * w["seconds"].as_f64().unwrap())
            .sum();
        let sampled = per_store[name];
        assert!(
            (sampled as f64 - txns).abs() <= 2.0,
            "{name}: {sampled} sampled vs {txns}"
        );
        let raw_n = raw
            .iter()
            .filter(|r| r[col(&rh, "storage")] == name)
            .count() as u64;
        assert_eq!(raw_n, sampled, "{name}");
        let goodput = s["rows"][i]["Goodput (requests/second)"].as_f64().unwrap();
        assert!(goodput > 0.0);
        let repeats: std::collections::BTreeSet<&str> = rows
            .iter()
            .filter(|r| r[col(&h, "storage")] == name)
            .map(|r| r[col(&h, "repeat")].as_str())
            .collect();
        assert_eq!(repeats.len(), 2, "{name}");
    }
}

#[test]
fn ipa_compare_results_have_a_series_per_row() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("ipa");
    let Written {
        today,
        s,
        samples: (h, rows),
        raw: (rh, raw),
    } = run_with_results(
        &[
            "ipa",
            "compare",
            "--preset",
            "tiny",
            "--set",
            "geometry.blocks_per_plane=64",
            "--scale",
            "1500",
            "--warmup",
            "500ms",
            "--duration",
            "1s",
            "--configs",
            "baseline,ipa-regions",
        ],
        &dir,
        "100ms",
    );
    assert_eq!(s["Benchmark Type"], "tatp");
    assert_eq!(s["scalefactor"], "1500");
    for (i, row) in today["rows"].as_array().unwrap().iter().enumerate() {
        let name = row["config"].as_str().unwrap();
        assert_eq!(s["rows"][i]["throughput_tps"], row["throughput_tps"]);
        assert_eq!(s["rows"][i]["ipa_appends"], row["ipa_appends"]);
        // The successful transactions over the measured window, as the verb counts them.
        let goodput = s["rows"][i]["Goodput (requests/second)"].as_f64().unwrap();
        let tps = row["throughput_tps"].as_f64().unwrap();
        assert!((goodput - tps).abs() < 0.01, "{name}: {goodput} vs {tps}");
        let mine: Vec<&Vec<String>> = rows
            .iter()
            .filter(|r| r[col(&h, "config")] == name)
            .collect();
        assert!(mine.len() >= 10, "1 s in 100 ms windows: {}", mine.len());
        let txns: u64 = mine
            .iter()
            .map(|r| r[col(&h, "Requests")].parse::<u64>().unwrap())
            .sum();
        let raw_n = raw.iter().filter(|r| r[col(&rh, "config")] == name).count() as u64;
        assert_eq!(raw_n, txns, "{name}: every transaction in one window");
    }
    // The directory plots as IPA Table I.
    let svg = d.path().join("t.svg");
    let (ok, _, err) = noftl(&[
        "plot",
        dir.to_str().unwrap(),
        "--out",
        svg.to_str().unwrap(),
    ]);
    assert!(ok && err.starts_with("table-i"), "{err}");
    let texts = svg_texts(&std::fs::read_to_string(&svg).unwrap());
    assert!(texts.iter().any(|t| t.contains("ipa-regions")), "{texts:?}");
    // `ipa advise` writes no result directory, and says so.
    let (ok, _, err) = noftl(&[
        "ipa",
        "advise",
        "--results",
        d.path().join("adv").to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("ipa advise"), "{err}");
}

#[test]
fn iaa_compare_results_have_a_series_per_run() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("iaa");
    let Written {
        today,
        s,
        samples: (h, rows),
        raw: (rh, raw),
    } = run_with_results(
        &[
            "iaa",
            "compare",
            "--free",
            "40%",
            "--schemes",
            "conventional,iaa+u2di",
            "--set",
            "geometry.blocks_per_plane=80",
            "--op",
            "12%",
            "--warmup",
            "0",
            "--duration",
            "200ms",
            "--terminals",
            "2",
        ],
        &dir,
        "50ms",
    );
    assert_eq!(s["Benchmark Type"], "iaa");
    assert_eq!(s["terminals"], "2");
    assert!(
        s["scalefactor"].is_null(),
        "the sweep's table size is per row"
    );
    assert_eq!(&h[h.len() - 2..], ["free_percent", "scheme"]);
    for r in &raw {
        assert!(
            ["insert", "delete", "update"].contains(&r[col(&rh, "Transaction Name")].as_str()),
            "{r:?}"
        );
    }
    for (i, row) in today["rows"].as_array().unwrap().iter().enumerate() {
        let scheme = row["scheme"].as_str().unwrap();
        let sr = &s["rows"][i];
        for k in ["throughput_qps", "queries", "rows", "relative", "iaa"] {
            assert_eq!(sr[k], row[k], "{scheme}: summary.json keeps {k}");
        }
        assert_eq!(sr["scalefactor"], row["rows"].to_string());
        let goodput = sr["Goodput (requests/second)"].as_f64().unwrap();
        let qps = row["throughput_qps"].as_f64().unwrap();
        assert!((goodput - qps).abs() < 0.01, "{scheme}: {goodput} vs {qps}");
        let mine: Vec<Vec<String>> = rows
            .iter()
            .filter(|r| r[col(&h, "scheme")] == scheme && r[col(&h, "free_percent")] == "40")
            .cloned()
            .collect();
        assert!(mine.len() >= 4, "200 ms in 50 ms windows: {}", mine.len());
        let queries = row["queries"].as_u64().unwrap();
        assert!(queries > 100, "{scheme}: {queries}");
        assert_eq!(sum_u64(&mine, col(&h, "committed")), queries, "{scheme}");
        let raw_n = raw
            .iter()
            .filter(|r| r[col(&rh, "scheme")] == scheme)
            .count() as u64;
        assert_eq!(raw_n, queries, "{scheme}: every query in raw.csv");
        assert!(sum_u64(&mine, col(&h, "flash_programs")) > 0, "{scheme}");
    }
    // The directory plots as IAA Fig. 11.
    let svg = d.path().join("f.svg");
    let (ok, _, err) = noftl(&[
        "plot",
        dir.to_str().unwrap(),
        "--out",
        svg.to_str().unwrap(),
    ]);
    assert!(ok && err.starts_with("iaa"), "{err}");
    let texts = svg_texts(&std::fs::read_to_string(&svg).unwrap());
    assert!(texts.iter().any(|t| t.contains("iaa+u2di")), "{texts:?}");
    // Its series and latencies: a line per run, named as the dashboard names them.
    for kind in ["timeseries", "cdf"] {
        let (ok, _, err) = noftl(&[
            "plot",
            dir.to_str().unwrap(),
            "--kind",
            kind,
            "--out",
            svg.to_str().unwrap(),
        ]);
        assert!(ok, "{kind}: {err}");
        let texts = svg_texts(&std::fs::read_to_string(&svg).unwrap());
        for run in ["40% conventional", "40% iaa+u2di"] {
            assert!(texts.iter().any(|t| t.contains(run)), "{kind}: {texts:?}");
        }
    }
}

#[test]
fn io_results_hold_a_fio_shaped_document() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("io");
    let (ok, out, err) = noftl(&[
        "io",
        "--target",
        "page",
        "--preset",
        "tiny",
        "--precondition",
        "--rw",
        "randrw",
        "--qd",
        "4",
        "--ops",
        "5000",
        "--json",
        "--results",
        dir.to_str().unwrap(),
        "--sample-window",
        "10ms",
        "--raw",
    ]);
    assert!(ok, "{err}");
    let today: serde_json::Value = serde_json::from_str(&out).unwrap();
    let fio = json(&at(&dir, "fio.json"));
    let job = &fio["jobs"][0];
    let reads = job["read"]["total_ios"].as_u64().unwrap();
    let writes = job["write"]["total_ios"].as_u64().unwrap();
    assert_eq!(reads + writes, 5000);
    assert_eq!(job["trim"]["total_ios"], 0);
    assert!(reads > 1000 && writes > 1000, "{reads} / {writes}");
    let iops = job["read"]["iops"].as_f64().unwrap() + job["write"]["iops"].as_f64().unwrap();
    let total = today["iops"].as_f64().unwrap();
    assert!((iops - total).abs() / total < 1e-3, "{iops} vs {total}");
    let bw = job["write"]["bw_bytes"].as_u64().unwrap() as f64;
    assert!((bw - job["write"]["iops"].as_f64().unwrap() * 4096.0).abs() < 2.0);
    let clat = &job["read"]["clat_ns"];
    let p50 = clat["percentile"]["50.000000"].as_u64().unwrap();
    let p99 = clat["percentile"]["99.000000"].as_u64().unwrap();
    assert!(clat["min"].as_u64().unwrap() <= p50 && p50 <= p99);
    assert!(p99 <= clat["max"].as_u64().unwrap());
    assert_eq!(fio["noftl"], today, "our JSON under noftl");

    let s = json(&at(&dir, "summary.json"));
    assert_eq!(s["ops"], 5000);
    let (h, rows) = csv(&at(&dir, "samples.csv"));
    assert!(rows.len() > 3, "{}", rows.len());
    assert_eq!(sum_u64(&rows, col(&h, "Requests")), 5000);
    assert_eq!(
        sum_u64(&rows, col(&h, "flash_programs")),
        today["flash"]["programs"].as_u64().unwrap()
            + today["flash"]["partial_programs"].as_u64().unwrap()
    );
    assert_eq!(
        sum_u64(&rows, col(&h, "gc_migrations")),
        today["gc"]["migrations"].as_u64().unwrap()
    );
    let (rh, raw) = csv(&at(&dir, "raw.csv"));
    assert_eq!(raw.len(), 5000);
    let raw_reads = raw
        .iter()
        .filter(|r| r[col(&rh, "Transaction Name")] == "read")
        .count() as u64;
    assert_eq!(raw_reads, reads);
    let slots: std::collections::BTreeSet<&str> = raw
        .iter()
        .map(|r| r[col(&rh, "Worker Id (start number)")].as_str())
        .collect();
    assert_eq!(slots, ["0", "1", "2", "3"].into(), "the four queue slots");
}

#[test]
fn results_are_refused_where_they_cannot_be_written() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let (ok, _, err) = noftl(&[
        "io",
        "--target",
        "raw",
        "--ops",
        "10",
        "--results",
        file.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(err.contains("result directory"), "{err}");
    let (ok, _, err) = noftl(&["io", "--target", "raw", "--ops", "10", "--raw"]);
    assert!(!ok, "--raw needs --results");
    assert!(err.contains("--results"), "{err}");
    let (ok, _, err) = noftl(&[
        "io",
        "--target",
        "raw",
        "--ops",
        "10",
        "--results",
        d.path().join("x").to_str().unwrap(),
        "--sample-window",
        "soon",
    ]);
    assert!(!ok);
    assert!(err.contains("--sample-window"), "{err}");
}

#[test]
fn a_compare_result_directory_plots_as_figure_3() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("fig3");
    let (ok, _, err) = noftl(&[
        "compare",
        "--scale",
        "1",
        "--accounts-per-branch",
        "5000",
        "--repeat",
        "2",
        "--duration",
        "300ms",
        "--stores",
        "native,dftl-2%,page",
        "--results",
        dir.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let s = json(&at(&dir, "summary.json"));
    let rows = s["rows"].as_array().unwrap();
    let out = d.path().join("fig3.svg");
    let (ok, _, err) = noftl(&[
        "plot",
        dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        err.contains("figure3"),
        "auto picks Figure 3 for a comparison: {err}"
    );
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(
        svg.contains("<!-- made by: "),
        "the command is in the figure"
    );
    let texts = svg_texts(&svg);
    assert!(texts.iter().any(|t| t == "TPC-B 1"), "{texts:?}");
    // Bars: the filled rectangles wider than a legend swatch, in the rows' order.
    let bars: Vec<HashMap<String, String>> = svg_rects(&svg)
        .into_iter()
        .filter(|r| {
            r["fill"] != "#FFFFFF"
                && r["fill"] != "none"
                && r["width"].parse::<f64>().unwrap() > 20.0
        })
        .collect();
    assert_eq!(bars.len(), rows.len(), "one bar per store");
    let height = |r: &HashMap<String, String>| r["height"].parse::<f64>().unwrap();
    let native_tps = rows[0]["throughput_tps"].as_f64().unwrap();
    assert_eq!(rows[0]["storage"], "native");
    for (row, bar) in rows.iter().zip(&bars) {
        let name = row["storage"].as_str().unwrap();
        let slowdown = native_tps / row["throughput_tps"].as_f64().unwrap();
        // The value label, and the legend entry.
        let label = format!("{slowdown:.2}x");
        assert!(texts.contains(&label), "{name}: no {label} in {texts:?}");
        assert!(texts.iter().any(|t| t == name), "{name} in the legend");
        // Bar heights are proportional to the slowdowns (pixels rounded: 1.5%).
        let ratio = height(bar) / height(&bars[0]);
        assert!(
            (ratio - slowdown).abs() / slowdown < 0.015,
            "{name}: bar {ratio:.3} vs slowdown {slowdown:.3}"
        );
        // The JSON's own slowdown column says the same.
        assert!((row["slowdown"].as_f64().unwrap() - slowdown).abs() < 1e-3);
    }
    // The same figure as PNG: a PNG with the command in a tEXt chunk.
    let png = d.path().join("fig3.png");
    let (ok, _, err) = noftl(&[
        "plot",
        dir.to_str().unwrap(),
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&bytes[37..41], b"tEXt");
    assert!(bytes.len() > 5_000);
}

#[test]
fn result_directories_plot_as_cdf_and_time_series() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("io");
    let (ok, _, err) = noftl(&[
        "io",
        "--target",
        "page",
        "--preset",
        "tiny",
        "--precondition",
        "--ops",
        "4000",
        "--results",
        dir.to_str().unwrap(),
        "--sample-window",
        "10ms",
        "--raw",
    ]);
    assert!(ok, "{err}");
    for (kind, file, words) in [
        (
            "cdf",
            "cdf.svg",
            [
                "Latency CDF",
                "latency (us, log scale)",
                "page (randwrite) (n = 4000)",
            ],
        ),
        ("auto", "ts.svg", ["IOPS", "GC migrations/s", "free blocks"]),
    ] {
        let out = d.path().join(file);
        let (ok, _, err) = noftl(&[
            "plot",
            dir.to_str().unwrap(),
            "--kind",
            kind,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(ok, "{kind}: {err}");
        let texts = svg_texts(&std::fs::read_to_string(&out).unwrap());
        for w in words {
            assert!(texts.iter().any(|t| t == w), "{kind}: no {w} in {texts:?}");
        }
    }
    let (ok, _, err) = noftl(&[
        "plot",
        dir.to_str().unwrap(),
        "--out",
        d.path().join("x.pdf").to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(err.contains(".svg or .png"), "{err}");
}

/// Issue 32: `--results DIR` wrote its files among those of a non-empty directory (replacing
/// the ones of the same names) without a word. Now such a directory is refused before the
/// run, unless `--force`.
#[test]
fn a_results_directory_that_holds_files_is_refused_unless_forced() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("res");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("summary.json"), b"{\"mine\": true}").unwrap();
    let args = |force: bool| {
        let mut a = vec![
            "io",
            "--target",
            "raw",
            "--preset",
            "tiny",
            "--ops",
            "10",
            "--results",
            dir.to_str().unwrap(),
        ];
        if force {
            a.push("--force");
        }
        a
    };
    let (ok, _, err) = noftl(&args(false));
    assert!(
        !ok && err.contains("is not empty") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dir.join("summary.json")).unwrap(),
        b"{\"mine\": true}"
    );
    let (ok, _, err) = noftl(&args(true));
    assert!(ok, "{err}");
    assert!(json(&at(&dir, "summary.json")).get("mine").is_none());
    // bench takes the same --force.
    let (ok, _, err) = noftl(&[
        "bench",
        "tpcb",
        "--preset",
        "tiny",
        "--accounts-per-branch",
        "1000",
        "--txns",
        "2",
        "--results",
        dir.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("is not empty"), "{err}");
}
