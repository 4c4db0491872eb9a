//! `noftl dashboard` over HTTP and in a real browser. Over HTTP: it listens on loopback only,
//! serves its page and chart library, refuses bad input with a message, runs a bench started
//! from the API and streams its samples and result as server-sent events, the same to every
//! subscriber, ending with summary.json's figures. In headless Chromium (`cdp_support`): the
//! page's form starts a run, its chart fills with live points, and its result table shows the
//! run's summary.json; the page is saved as a screenshot (`target/tmp/dashboard.png`).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cdp_support;
mod cli_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

struct Dashboard {
    child: Child,
    addr: String,
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &std::path::Path) -> Dashboard {
    let mut child = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args(["dashboard", "--listen", "127.0.0.1:0", "--dir"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    // The runs print the bench's human output: keep reading it.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let addr = line
        .trim()
        .strip_prefix("noftl dashboard: http://")
        .unwrap_or_else(|| panic!("{line}"))
        .trim_end_matches('/')
        .to_string();
    Dashboard { child, addr }
}

/// One HTTP/1.1 request; returns (status, body). `Connection: close` ends the body.
fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status: u16 = out[9..12].parse().unwrap();
    let body = out.split_once("\r\n\r\n").map_or("", |x| x.1).to_string();
    (status, body)
}

/// The events of a run's stream, up to and including `done` or `error`: (name, data).
fn events(addr: &str, id: u64) -> Vec<(String, String)> {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /api/runs/{id}/events HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    let mut r = BufReader::new(s);
    let mut out = Vec::new();
    let mut name = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap() == 0 {
            break;
        }
        // Chunked transfer: the event lines come through unchanged between chunk sizes.
        let l = line.trim_end();
        if let Some(n) = l.strip_prefix("event: ") {
            name = n.to_string();
        } else if let Some(d) = l.strip_prefix("data: ") {
            out.push((name.clone(), d.to_string()));
            if name == "done" || name == "error" {
                break;
            }
        }
    }
    out
}

#[test]
fn a_run_started_from_the_dashboard_streams_its_samples_and_result() {
    let d = tempfile::tempdir().unwrap();
    let dash = start(&d.path().join("runs"));
    let (status, page) = http(&dash.addr, "GET", "/", "");
    assert_eq!(status, 200);
    assert!(page.contains("noftl dashboard") && page.contains("/uplot.js"));
    let (status, js) = http(&dash.addr, "GET", "/uplot.js", "");
    assert_eq!(status, 200);
    assert!(
        js.contains("uPlot"),
        "the chart library is served from the binary"
    );

    let bad = r#"{"workload":"tpcb","storage":"native","scale":0,"terminals":2,"duration":"1s","preset":"noftl13"}"#;
    let (status, body) = http(&dash.addr, "POST", "/api/runs", bad);
    assert_eq!(status, 400);
    assert!(body.contains("scale: 1 to"), "{body}");
    let (status, body) = http(&dash.addr, "POST", "/api/runs", "{not json");
    assert_eq!(status, 400, "{body}");

    let good = r#"{"workload":"tpcb","storage":"native","scale":1,"terminals":2,"duration":"1s","preset":"noftl13","speed":0}"#;
    let (status, body) = http(&dash.addr, "POST", "/api/runs", good);
    assert_eq!(status, 201, "{body}");
    let id = serde_json::from_str::<serde_json::Value>(&body).unwrap()["id"]
        .as_u64()
        .unwrap();
    let a = events(&dash.addr, id);
    let b = events(&dash.addr, id);
    assert_eq!(a, b, "two subscribers see the same events");
    let samples: Vec<serde_json::Value> = a
        .iter()
        .filter(|(n, _)| n == "sample")
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert!(
        samples.len() >= 50,
        "1 s in 10 ms windows: {}",
        samples.len()
    );
    let (name, data) = a.last().unwrap();
    assert_eq!(name, "done", "{data}");
    let summary: serde_json::Value = serde_json::from_str(data).unwrap();
    let on_disk: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.path().join(format!("runs/run-{id}/summary.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(summary, on_disk, "the result is the run's summary.json");
    // The live commits over the window add up to the result's.
    let first = samples.first().unwrap()["commits"].as_u64().unwrap();
    let last = samples.last().unwrap()["commits"].as_u64().unwrap();
    let committed = summary["committed"].as_u64().unwrap();
    assert!(
        last - first <= committed && committed - (last - first) <= 2,
        "{first}..{last} vs {committed}"
    );
    let (status, list) = http(&dash.addr, "GET", "/api/runs", "");
    assert_eq!(status, 200);
    assert!(list.contains("\"status\":\"done\""), "{list}");
    drop(dash);

    // A new dashboard on the same directory lists the run as a past one.
    let dash = start(&d.path().join("runs"));
    let (_, list) = http(&dash.addr, "GET", "/api/runs", "");
    let v: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(v["runs"][0]["id"].as_u64(), Some(id));
    assert_eq!(
        v["runs"][0]["summary"]["committed"].as_u64(),
        Some(committed)
    );
}

#[test]
fn the_dashboard_refuses_a_non_loopback_address() {
    let (ok, _, err) = cli_support::noftl(&["dashboard", "--listen", "0.0.0.0:0"]);
    assert!(!ok);
    assert!(err.contains("--allow-remote"), "{err}");
}

/// A number the page shows with `decimals` decimals equals `want` (to half a unit in the last
/// place: the page rounds with JavaScript's `toFixed`).
fn shown_equals(table: &[(String, String)], key: &str, want: f64, decimals: i32) {
    let (_, got) = table
        .iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no row '{key}' in the result table {table:?}"));
    let got: f64 = got
        .parse()
        .unwrap_or_else(|_| panic!("{key}: '{got}' is not a number"));
    let tol = 0.5 * 10f64.powi(-decimals) + want.abs() * 1e-12;
    assert!(
        (got - want).abs() <= tol,
        "{key}: the page shows {got}, summary.json has {want}"
    );
}

#[test]
fn in_a_browser_a_run_started_from_the_form_shows_live_points_and_its_result() {
    let Some(chromium) = cdp_support::find_chromium() else {
        // Written past the test harness's capture, so the skip shows in every log.
        let _ = std::io::stderr().write_all(
            b"SKIPPED: no chromium on the PATH (nor $NOFTL_CHROMIUM); scripts/install-test-deps.sh installs Debian's chromium\n",
        );
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let dash = start(&d.path().join("runs"));
    let mut b = cdp_support::Browser::start(&chromium, 1280, 1000);
    b.navigate(&format!("http://{}/", dash.addr));
    let long = std::time::Duration::from_secs(90);
    b.wait_for(
        "document.readyState === 'complete' && typeof uPlot === 'function'",
        long,
        "the page and its chart library",
    );

    // Bad input in the form (one the browser's own checks of number fields let through): the
    // server's message naming the field, nothing started.
    let set = |field: &str, value: &str| {
        format!(
            "document.querySelector('#form [name={field}]').value = {}",
            serde_json::Value::String(value.into())
        )
    };
    b.eval(&set("duration", "soon"));
    b.eval("document.querySelector('#form button').click()");
    let msg = b.wait_for("$('error').textContent", long, "the form's error message");
    assert!(msg.as_str().unwrap().starts_with("duration: "), "{msg}");

    // A short scenario, paced to 2 virtual seconds per second so that it is watched live.
    for (field, value) in [
        ("workload", "tpcb"),
        ("storage", "native"),
        ("scale", "1"),
        ("terminals", "2"),
        ("duration", "2s"),
        ("preset", "noftl13"),
        ("speed", "2"),
    ] {
        b.eval(&set(field, value));
    }
    b.eval("document.querySelector('#form button').click()");
    let state = "({ points: tpsPlot ? tpsPlot.data[0].length : 0, \
                    result: document.querySelector('#result th') !== null, \
                    error: $('error').textContent, title: $('title').textContent })";
    let deadline = std::time::Instant::now() + long;
    let mut live_points = 0;
    let end = loop {
        let s = b.eval(state);
        assert_eq!(s["error"], "", "the run failed: {s}");
        if s["result"] == true {
            break s;
        }
        live_points = live_points.max(s["points"].as_u64().unwrap());
        assert!(
            std::time::Instant::now() < deadline,
            "no result after {long:?}: {s}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(
        live_points > 0,
        "the chart had points before the run ended: {end}"
    );
    let id: u64 = end["title"]
        .as_str()
        .unwrap()
        .strip_prefix("Run ")
        .unwrap()
        .parse()
        .unwrap();

    // The result table is the run's summary.json.
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.path().join(format!("runs/run-{id}/summary.json"))).unwrap(),
    )
    .unwrap();
    let rows = b.eval(
        "[...document.querySelectorAll('#result tr')].slice(1).map(tr => [...tr.cells].map(c => c.textContent))",
    );
    let table: Vec<(String, String)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_str().unwrap().into(), r[1].as_str().unwrap().into()))
        .collect();
    let f = |v: &serde_json::Value| v.as_f64().unwrap();
    shown_equals(
        &table,
        "throughput (committed tx/s)",
        f(&summary["throughput_tps"]),
        1,
    );
    shown_equals(&table, "committed", f(&summary["committed"]), 0);
    let lat = &summary["Latency Distribution"];
    shown_equals(
        &table,
        "latency median (us)",
        f(&lat["Median Latency (microseconds)"]),
        1,
    );
    shown_equals(
        &table,
        "latency p99 (us)",
        f(&lat["99th Percentile Latency (microseconds)"]),
        1,
    );
    shown_equals(
        &table,
        "flash programs per txn",
        f(&summary["per_txn"]["flash_programs"]),
        3,
    );
    shown_equals(&table, "virtual seconds", f(&summary["virtual_seconds"]), 3);
    assert!(f(&summary["committed"]) > 0.0, "{summary}");

    // The chart: a point per 20 ms window (but the first), and its throughput integrated over
    // time is the commits after the first window, so at most the run's and at least 90 % of it.
    let chart = b.eval("({ t: tpsPlot.data[0], tps: tpsPlot.data[1] })");
    let t: Vec<f64> = chart["t"].as_array().unwrap().iter().map(f).collect();
    let tps: Vec<f64> = chart["tps"].as_array().unwrap().iter().map(f).collect();
    assert!(t.len() >= 50, "2 s in 20 ms windows: {} points", t.len());
    let commits: f64 = t
        .windows(2)
        .zip(&tps[1..])
        .map(|(w, x)| (w[1] - w[0]) * x)
        .sum();
    let committed = f(&summary["committed"]);
    assert!(
        commits <= committed + 0.5 && commits >= 0.9 * committed,
        "the chart's commits {commits} vs the run's {committed}"
    );

    let png = b.screenshot_png();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG screenshot");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    std::fs::write(&out, &png).unwrap();
    let _ = std::io::stderr().write_all(format!("screenshot: {}\n", out.display()).as_bytes());
}
