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
    /// The token it printed: starting and cancelling runs need it.
    token: String,
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &std::path::Path) -> Dashboard {
    start_with(dir, &[])
}

fn start_with(dir: &std::path::Path, flags: &[&str]) -> Dashboard {
    let mut child = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args(["dashboard", "--listen", "127.0.0.1:0", "--dir"])
        .arg(dir)
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    // The runs print the bench's human output: keep reading it.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    // "noftl dashboard: http://ADDR/ (token TOKEN: ...)"
    let rest = line
        .trim()
        .strip_prefix("noftl dashboard: http://")
        .unwrap_or_else(|| panic!("{line}"));
    let (url, rest) = rest.split_once(' ').unwrap_or_else(|| panic!("{line}"));
    let token = rest
        .strip_prefix("(token ")
        .and_then(|t| t.split(':').next())
        .unwrap_or_else(|| panic!("no token in {line}"))
        .to_string();
    let addr = url.trim_end_matches('/').to_string();
    Dashboard { child, addr, token }
}

/// One request as the dashboard's own page sends it (its Host, a JSON body, the token);
/// returns (status, body).
fn http(dash: &Dashboard, method: &str, path: &str, body: &str) -> (u16, String) {
    let headers = [
        ("Host", dash.addr.as_str()),
        ("Content-Type", "application/json"),
        ("X-Noftl-Token", dash.token.as_str()),
    ];
    raw_http(&dash.addr, method, path, &headers, body)
}

/// One HTTP/1.1 request with exactly `headers` (and the body's length); returns (status,
/// body). `Connection: close` ends the body.
fn raw_http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    write!(
        s,
        "{head}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
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
    let (status, page) = http(&dash, "GET", "/", "");
    assert_eq!(status, 200);
    assert!(page.contains("noftl dashboard") && page.contains("/uplot.js"));
    let (status, js) = http(&dash, "GET", "/uplot.js", "");
    assert_eq!(status, 200);
    assert!(
        js.contains("uPlot"),
        "the chart library is served from the binary"
    );

    let bad = r#"{"workload":"tpcb","storage":"native","scale":0,"terminals":2,"duration":"1s","preset":"noftl13"}"#;
    let (status, body) = http(&dash, "POST", "/api/runs", bad);
    assert_eq!(status, 400);
    assert!(body.contains("scale: 1 to"), "{body}");
    let (status, body) = http(&dash, "POST", "/api/runs", "{not json");
    assert_eq!(status, 400, "{body}");

    let good = r#"{"workload":"tpcb","storage":"native","scale":1,"terminals":2,"duration":"1s","preset":"noftl13","speed":0}"#;
    let (status, body) = http(&dash, "POST", "/api/runs", good);
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
        &std::fs::read_to_string(
            lab::results::find(&d.path().join(format!("runs/run-{id}")), "summary.json").unwrap(),
        )
        .unwrap(),
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
    let (status, list) = http(&dash, "GET", "/api/runs", "");
    assert_eq!(status, 200);
    assert!(list.contains("\"status\":\"done\""), "{list}");
    drop(dash);

    // A new dashboard on the same directory lists the run as a past one.
    let dash = start(&d.path().join("runs"));
    let (_, list) = http(&dash, "GET", "/api/runs", "");
    let v: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(v["runs"][0]["id"].as_u64(), Some(id));
    assert_eq!(
        v["runs"][0]["summary"]["committed"].as_u64(),
        Some(committed)
    );
}

/// The IAA scenario: the form's fields become `iaa compare`'s command line (its own checks
/// refuse bad ones with 400), each run of the sweep is a live series, and the result is the
/// run's summary.json, drawn as IAA Fig. 11.
#[test]
fn an_iaa_sweep_from_the_dashboard_streams_a_series_per_run() {
    let d = tempfile::tempdir().unwrap();
    let dash = start(&d.path().join("runs"));
    let req = |storage: &str, free: &str| {
        format!(
            r#"{{"scenario":"iaa","storage":"{storage}","schemes":["conventional","iaa+u2di"],"free":["{free}"],"warmup":"0","terminals":2,"duration":"200ms","preset":"noftl13","speed":0}}"#
        )
    };
    let (status, body) = http(&dash, "POST", "/api/runs", &req("fast", "40%"));
    assert_eq!(status, 400);
    assert!(body.contains("storage: page, dftl or native"), "{body}");
    let (status, body) = http(&dash, "POST", "/api/runs", &req("page", "95%"));
    assert_eq!(status, 400);
    assert!(body.contains("--free levels are between"), "{body}");

    let (status, body) = http(&dash, "POST", "/api/runs", &req("native", "40%"));
    assert_eq!(status, 201, "{body}");
    let id = serde_json::from_str::<serde_json::Value>(&body).unwrap()["id"]
        .as_u64()
        .unwrap();
    let ev = events(&dash.addr, id);
    let (name, data) = ev.last().unwrap();
    assert_eq!(name, "done", "{data}");
    let summary: serde_json::Value = serde_json::from_str(data).unwrap();
    let rows = summary["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{summary}");
    // The first event names the series in the rows' order, before any point: the page's
    // legend keeps it whichever run's first point comes first (both run at once).
    let (name, plan) = &ev[0];
    assert_eq!(name, "plan");
    let row_series: Vec<String> = rows
        .iter()
        .map(|r| format!("40% {}", r["scheme"].as_str().unwrap()))
        .collect();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(plan).unwrap()["series"],
        serde_json::json!(row_series)
    );
    for r in rows {
        let series = format!("40% {}", r["scheme"].as_str().unwrap());
        let commits: Vec<u64> = ev
            .iter()
            .filter(|(n, _)| n == "sample")
            .map(|(_, d)| serde_json::from_str::<serde_json::Value>(d).unwrap())
            .filter(|p| p["series"] == series.as_str())
            .map(|p| p["commits"].as_u64().unwrap())
            .collect();
        assert!(commits.len() >= 10, "{series}: {} points", commits.len());
        // The live commits over the window add up to the run's queries.
        let live = commits.last().unwrap() - commits.first().unwrap();
        let queries = r["queries"].as_u64().unwrap();
        assert!(
            live <= queries && queries - live <= 2,
            "{series}: {live} vs {queries}"
        );
    }
    let (status, svg) = http(&dash, "GET", &format!("/api/runs/{id}/figure.svg"), "");
    assert_eq!(status, 200, "{svg}");
    assert!(svg.contains("IAA Fig. 11") && svg.contains("iaa+u2di"));
}

#[test]
fn the_dashboard_refuses_a_non_loopback_address() {
    let (ok, _, err) = cli_support::noftl(&["dashboard", "--listen", "0.0.0.0:0"]);
    assert!(!ok);
    assert!(err.contains("--allow-remote"), "{err}");
}

/// A short bench: TPC-B at scale 1 on NoFTL.
const QUICK: &str = r#"{"workload":"tpcb","storage":"native","scale":1,"terminals":1,"duration":"200ms","preset":"noftl13","speed":0}"#;

/// A bench that would take about 2,000 s of wall time: 20 s of virtual time paced at 0.01
/// virtual seconds per second.
const SLOW: &str = r#"{"workload":"tpcb","storage":"native","scale":1,"terminals":1,"duration":"20s","preset":"noftl13","speed":0.01}"#;

fn runs_listed(dash: &Dashboard) -> Vec<serde_json::Value> {
    let (status, list) = http(dash, "GET", "/api/runs", "");
    assert_eq!(status, 200, "{list}");
    serde_json::from_str::<serde_json::Value>(&list).unwrap()["runs"]
        .as_array()
        .unwrap()
        .clone()
}

fn id_of(body: &str) -> u64 {
    serde_json::from_str::<serde_json::Value>(body).unwrap()["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no id in {body}"))
}

/// Issue 32: any web page could start runs (`POST /api/runs` with `Content-Type: text/plain`,
/// a foreign `Origin` and `Host` returned 201), and `Host` was not checked on reads (DNS
/// rebinding). Now only the dashboard's own page (its Host and Origin, the token it embeds,
/// a JSON body) starts runs, and other names read nothing.
#[test]
fn other_web_pages_cannot_start_runs_or_read_the_dashboard() {
    let d = tempfile::tempdir().unwrap();
    let dash = start(&d.path().join("runs"));
    let addr = dash.addr.as_str();
    let origin = format!("http://{addr}");
    let token = dash.token.as_str();
    let post = |headers: &[(&str, &str)]| raw_http(addr, "POST", "/api/runs", headers, QUICK);
    // The request of the finding, and each of its parts alone.
    for (headers, want) in [
        (
            vec![
                ("Host", "evil.example"),
                ("Origin", "http://evil.example"),
                ("Content-Type", "text/plain"),
            ],
            403,
        ),
        (
            vec![
                ("Host", addr),
                ("Origin", "http://evil.example"),
                ("Content-Type", "application/json"),
                ("X-Noftl-Token", token),
            ],
            403,
        ),
        (
            vec![
                ("Host", addr),
                ("Origin", origin.as_str()),
                ("Content-Type", "application/json"),
            ],
            403,
        ),
        (
            vec![
                ("Host", addr),
                ("Origin", origin.as_str()),
                ("Content-Type", "text/plain"),
                ("X-Noftl-Token", token),
            ],
            415,
        ),
    ] {
        let (status, body) = post(&headers);
        assert_eq!(status, want, "{headers:?}: {body}");
    }
    // A page on a rebound name reads nothing, not even the page (which holds the token).
    for path in ["/", "/api/runs", "/api/runs/1/events"] {
        let (status, body) = raw_http(addr, "GET", path, &[("Host", "rebound.example:80")], "");
        assert_eq!(status, 403, "{path}: {body}");
    }
    assert!(runs_listed(&dash).is_empty(), "nothing was started");
    // The dashboard's own page carries the token its form sends.
    let (status, page) = raw_http(addr, "GET", "/", &[("Host", addr)], "");
    assert_eq!(status, 200);
    assert!(page.contains(token), "the page embeds this start's token");
}

/// Issue 32: `"speed": 1e-300` was accepted and panicked the run's pacing; now it is refused
/// with the field's range, like every number of the form.
#[test]
fn a_speed_that_cannot_pace_a_run_is_refused_before_it_starts() {
    let d = tempfile::tempdir().unwrap();
    let dash = start(&d.path().join("runs"));
    let slow = QUICK.replace(r#""speed":0"#, r#""speed":1e-300"#);
    let (status, body) = http(&dash, "POST", "/api/runs", &slow);
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("speed: 0 (no pacing) or 0.01 to 1000"),
        "{body}"
    );
    assert!(runs_listed(&dash).is_empty());
}

/// Issue 32: there was no limit on concurrent runs and no cancel (8 long runs reached 7.4 GB
/// in 45 s). Now `--max-runs` run, `--max-queued` wait in order, the rest are refused (429);
/// a cancel takes a run out of the queue, or stops a running one (from the page too); its
/// slot goes to the next.
#[test]
fn runs_past_the_limit_wait_in_a_queue_or_are_refused_and_a_cancel_stops_them() {
    let d = tempfile::tempdir().unwrap();
    let dash = start_with(
        &d.path().join("runs"),
        &["--max-runs", "1", "--max-queued", "1"],
    );
    let (status, body) = http(&dash, "POST", "/api/runs", SLOW);
    assert_eq!(status, 201, "{body}");
    assert!(body.contains("\"running\""), "{body}");
    let slow = id_of(&body);
    let (status, body) = http(&dash, "POST", "/api/runs", QUICK);
    assert_eq!(status, 201, "{body}");
    assert!(body.contains("\"queued\""), "{body}");
    let queued = id_of(&body);
    let (status, body) = http(&dash, "POST", "/api/runs", QUICK);
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("--max-runs"), "{body}");

    let (status, body) = http(&dash, "POST", &format!("/api/runs/{queued}/cancel"), "{}");
    assert_eq!(status, 200, "{body}");
    let ev = events(&dash.addr, queued);
    assert!(ev.iter().all(|(n, _)| n != "sample"), "it never ran");
    assert!(ev.last().unwrap().1.contains("cancelled"), "{ev:?}");

    let t = std::time::Instant::now();
    let (status, body) = http(&dash, "POST", &format!("/api/runs/{slow}/cancel"), "{}");
    assert_eq!(status, 202, "{body}");
    let ev = events(&dash.addr, slow);
    let (name, data) = ev.last().unwrap();
    assert_eq!(name, "error", "{data}");
    assert!(data.contains("cancelled"), "{data}");
    assert!(
        t.elapsed().as_secs() < 100,
        "stopped long before its 2,000 s"
    );
    let (status, body) = http(&dash, "POST", &format!("/api/runs/{slow}/cancel"), "{}");
    assert_eq!(status, 409, "an ended run: {body}");
    for r in runs_listed(&dash) {
        assert_eq!(r["status"], "cancelled", "{r}");
    }

    // The slot is free again.
    let (status, body) = http(&dash, "POST", "/api/runs", QUICK);
    assert_eq!(status, 201, "{body}");
    let ev = events(&dash.addr, id_of(&body));
    assert_eq!(ev.last().unwrap().0, "done", "{ev:?}");
}

/// Issue 32: 40 POSTs at once produced 5 duplicate run ids sharing a directory, mixing their
/// events, `running` forever. Now every accepted run has an id and a directory of its own, and
/// each one ends.
#[test]
fn runs_started_at_once_get_ids_and_directories_of_their_own() {
    let d = tempfile::tempdir().unwrap();
    let runs = d.path().join("runs");
    let dash = start_with(&runs, &["--max-runs", "2", "--max-queued", "30"]);
    let answers: Vec<(u16, String)> = std::thread::scope(|s| {
        let posts: Vec<_> = (0..40)
            .map(|_| s.spawn(|| http(&dash, "POST", "/api/runs", QUICK)))
            .collect();
        posts.into_iter().map(|p| p.join().unwrap()).collect()
    });
    let mut ids: Vec<u64> = answers
        .iter()
        .filter(|(status, _)| *status == 201)
        .map(|(_, body)| id_of(body))
        .collect();
    assert_eq!(ids.len(), 32, "2 running and 30 queued: {answers:?}");
    assert!(
        answers.iter().all(|(s, _)| *s == 201 || *s == 429),
        "{answers:?}"
    );
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 32, "no id twice");
    for id in &ids {
        assert!(runs.join(format!("run-{id}")).is_dir(), "run-{id}");
    }
    // Leave two to run; every run ends, each with its own events.
    for id in &ids[2..] {
        let (status, body) = http(&dash, "POST", &format!("/api/runs/{id}/cancel"), "{}");
        assert!(status == 200 || status == 202 || status == 409, "{body}");
    }
    for id in &ids {
        let ev = events(&dash.addr, *id);
        let (name, _) = ev.last().unwrap();
        assert!(name == "done" || name == "error", "run {id}: {ev:?}");
        assert_eq!(
            ev.iter().filter(|(n, _)| n == "plan").count(),
            1,
            "run {id}"
        );
    }
    for r in runs_listed(&dash) {
        assert!(
            ["done", "cancelled"].contains(&r["status"].as_str().unwrap()),
            "{r}"
        );
    }
}

/// Issue 32: a result in `--dir` whose figure could not be drawn (a `stdev` of 1e200) froze
/// the dashboard: the figure's request hung at 100 % CPU on one of its two threads. Now the
/// figure is refused with the reason and the dashboard goes on serving.
#[test]
fn a_past_run_whose_figure_cannot_be_drawn_does_not_freeze_the_dashboard() {
    let d = tempfile::tempdir().unwrap();
    let runs = d.path().join("runs");
    std::fs::create_dir_all(runs.join("run-1")).unwrap();
    std::fs::write(
        runs.join("run-1/summary.json"),
        r#"{"workload":"tpcb","scale":1,"rows":[{"storage":"native","throughput_tps":100.0,"stdev":1e200},{"storage":"page","throughput_tps":50.0,"stdev":1.0}]}"#,
    )
    .unwrap();
    let dash = start(&runs);
    let t = std::time::Instant::now();
    for _ in 0..3 {
        let (status, body) = http(&dash, "GET", "/api/runs/1/figure.svg", "");
        assert_eq!(status, 404, "{body}");
        assert!(
            body.contains("1e200") || body.contains("too large"),
            "{body}"
        );
    }
    assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
    assert_eq!(runs_listed(&dash).len(), 1);
}

/// A number the page shows with `decimals` decimals equals `want` (to half a unit in the last
/// place: the page rounds with JavaScript's `toFixed`).
fn shown_equals(what: &str, got: &str, want: f64, decimals: i32) {
    let got: f64 = got
        .parse()
        .unwrap_or_else(|_| panic!("{what}: '{got}' is not a number"));
    let tol = 0.5 * 10f64.powi(-decimals) + want.abs() * 1e-12;
    assert!(
        (got - want).abs() <= tol,
        "{what}: the page shows {got}, summary.json has {want}"
    );
}

const LONG: std::time::Duration = std::time::Duration::from_secs(90);

/// Fills the form with `fields`, submits it, and waits for the run's result table: returns the
/// run's id and the most points the throughput chart had before the result came.
fn run_from_form(b: &mut cdp_support::Browser, fields: &[(&str, &str)]) -> (u64, u64) {
    for (field, value) in fields {
        b.eval(&format!(
            "{{ const e = document.querySelector('#form [name={field}]'); e.value = {}; \
               e.dispatchEvent(new Event('change')); }}",
            serde_json::Value::String((*value).into())
        ));
    }
    // The result of the run shown before stays until the page switches to the new one.
    let before = b.eval("$('title').textContent");
    b.eval("document.querySelector('#form button').click()");
    let state = "({ points: tpsPlot ? tpsPlot.data[0].length : 0, \
                    result: document.querySelector('#result th') !== null, \
                    error: $('error').textContent, title: $('title').textContent })";
    let deadline = std::time::Instant::now() + LONG;
    let mut live_points = 0;
    let end = loop {
        let s = b.eval(state);
        assert_eq!(s["error"], "", "the run failed: {s}");
        if s["title"] == before {
            assert!(
                std::time::Instant::now() < deadline,
                "the page did not switch to the new run: {s}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        }
        if s["result"] == true {
            break s;
        }
        live_points = live_points.max(s["points"].as_u64().unwrap());
        assert!(
            std::time::Instant::now() < deadline,
            "no result after {LONG:?}: {s}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let id = end["title"]
        .as_str()
        .unwrap()
        .strip_prefix("Run ")
        .unwrap()
        .parse()
        .unwrap();
    (id, live_points)
}

/// The result table's rows (header left out), cell texts.
fn result_table(b: &mut cdp_support::Browser) -> Vec<Vec<String>> {
    let rows = b.eval(
        "[...document.querySelectorAll('#result tr')].slice(1).map(tr => [...tr.cells].map(c => c.textContent))",
    );
    serde_json::from_value(rows).unwrap()
}

fn summary_of(runs: &std::path::Path, id: u64) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(
            lab::results::find(&runs.join(format!("run-{id}")), "summary.json").unwrap(),
        )
        .unwrap(),
    )
    .unwrap()
}

fn save_screenshot(b: &mut cdp_support::Browser, name: &str) {
    let png = b.screenshot_png();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG screenshot");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&out, &png).unwrap();
    let _ = std::io::stderr().write_all(format!("screenshot: {}\n", out.display()).as_bytes());
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

/// A comparison (`compare`, `ipa compare`) started from the form: one live series per row,
/// named by the rows' `key` field as `names` (in the rows' order); a table row per summary.json row, whose columns
/// `cols` (cell index, JSON pointer into the row, decimals shown) equal the row's figures; its
/// figure shown. Returns summary.json, with the run's `id` added.
fn comparison_from_form(
    b: &mut cdp_support::Browser,
    runs: &std::path::Path,
    fields: &[(&str, &str)],
    (key, names): (&str, &[&str]),
    cols: &[(usize, &str, i32)],
) -> serde_json::Value {
    let (id, live_points) = run_from_form(b, fields);
    assert!(live_points > 0, "the chart had points before the run ended");
    let mut summary = summary_of(runs, id);
    // Rows that run at once (`--jobs`) may start in either order on the wall clock; the legend
    // keeps the rows' order all the same (the run's `plan` event names them).
    let series = b.eval("tpsPlot.series.slice(1).map(s => s.label)");
    assert_eq!(
        series,
        serde_json::json!(names),
        "one live series per row, in row order"
    );
    let table = result_table(b);
    let rows = summary["rows"].as_array().unwrap();
    assert_eq!(table.len(), rows.len(), "{table:?}");
    for (shown, row) in table.iter().zip(rows) {
        assert_eq!(shown[0], row[key].as_str().unwrap());
        for &(i, pointer, decimals) in cols {
            shown_equals(
                pointer,
                &shown[i],
                f(row.pointer(pointer).unwrap()),
                decimals,
            );
        }
    }
    let fig = b.wait_for(
        "$('figure').complete && $('figure').naturalWidth",
        LONG,
        "the comparison's figure in the page",
    );
    assert!(fig.as_u64().unwrap() > 0);
    summary["id"] = serde_json::json!(id);
    summary
}

#[test]
fn in_a_browser_runs_started_from_the_form_show_live_points_and_their_results() {
    let Some(chromium) = cdp_support::find_chromium() else {
        // Written past the test harness's capture, so the skip shows in every log.
        let _ = std::io::stderr().write_all(
            b"SKIPPED: no chromium on the PATH (nor $NOFTL_CHROMIUM); scripts/install-test-deps.sh installs Debian's chromium\n",
        );
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let runs = d.path().join("runs");
    let dash = start(&runs);
    let mut b = cdp_support::Browser::start(&chromium, 1280, 1350);
    b.navigate(&format!("http://{}/", dash.addr));
    b.wait_for(
        "document.readyState === 'complete' && typeof uPlot === 'function'",
        LONG,
        "the page and its chart library",
    );

    // Bad input in the form (one the browser's own checks of number fields let through): the
    // server's message naming the field, nothing started.
    b.eval("document.querySelector('#form [name=duration]').value = 'soon'");
    b.eval("document.querySelector('#form button').click()");
    let msg = b.wait_for("$('error').textContent", LONG, "the form's error message");
    assert!(msg.as_str().unwrap().starts_with("duration: "), "{msg}");

    // A short bench, paced to 2 virtual seconds per second so that it is watched live.
    let (id, live_points) = run_from_form(
        &mut b,
        &[
            ("scenario", "bench"),
            ("workload", "tpcb"),
            ("storage", "native"),
            ("scale", "1"),
            ("terminals", "2"),
            ("duration", "2s"),
            ("preset", "noftl13"),
            ("speed", "2"),
        ],
    );
    assert!(live_points > 0, "the chart had points before the run ended");

    // The result table is the run's summary.json.
    let summary = summary_of(&runs, id);
    let table = result_table(&mut b);
    let lat = &summary["Latency Distribution"];
    for (key, want, decimals) in [
        ("throughput (committed tx/s)", &summary["throughput_tps"], 1),
        ("committed", &summary["committed"], 0),
        (
            "latency median (us)",
            &lat["Median Latency (microseconds)"],
            1,
        ),
        (
            "latency p99 (us)",
            &lat["99th Percentile Latency (microseconds)"],
            1,
        ),
        (
            "flash programs per txn",
            &summary["per_txn"]["flash_programs"],
            3,
        ),
        ("virtual seconds", &summary["virtual_seconds"], 3),
    ] {
        let row = table
            .iter()
            .find(|r| r[0] == key)
            .unwrap_or_else(|| panic!("no row '{key}' in the result table {table:?}"));
        shown_equals(key, &row[1], f(want), decimals);
    }
    assert!(f(&summary["committed"]) > 0.0, "{summary}");

    // The chart: a point per 20 ms window (but the first), and its throughput integrated over
    // time is the commits after the first window, so at most the run's and at least 90 % of it.
    let chart = b.eval("({ t: tpsPlot.data[0], tps: tpsPlot.data[1] })");
    let t: Vec<f64> = serde_json::from_value(chart["t"].clone()).unwrap();
    let tps: Vec<f64> = serde_json::from_value(chart["tps"].clone()).unwrap();
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
    // The device's last requests (NoFTL Fig. 7): flash operations with their die, purpose and
    // a latency of at least a flash read's.
    let requests: Vec<Vec<String>> = serde_json::from_value(b.eval(
        "[...document.querySelectorAll('#requests tr')].slice(1).map(tr => [...tr.cells].map(c => c.textContent))",
    ))
    .unwrap();
    assert!(!requests.is_empty(), "a request table");
    for r in &requests {
        assert_eq!(r[0], "native", "{r:?}");
        assert!(
            [
                "read",
                "program",
                "partial_program",
                "erase",
                "oob_read",
                "oob_write"
            ]
            .contains(&r[3].as_str()),
            "{r:?}"
        );
        assert!(r[2].parse::<u32>().is_ok(), "a die: {r:?}");
        let latency_us: f64 = r[5].parse().unwrap();
        assert!(latency_us > 0.0, "{r:?}");
    }
    save_screenshot(&mut b, "dashboard-bench.png");

    // A comparison: three stores, one live series each, then the comparison table and NoFTL
    // Fig. 3 as drawn by `noftl plot`. The fields not given keep the bench's values.
    let stores = ["native", "dftl-2%", "page"];
    let summary = comparison_from_form(
        &mut b,
        &runs,
        &[
            ("scenario", "compare"),
            ("stores", &stores.join(",")),
            ("repeat", "1"),
            ("warmup", "none"),
            ("duration", "2s"),
            ("speed", "4"),
        ],
        ("storage", &stores),
        &[(1, "/throughput_tps", 1), (5, "/per_txn/flash_programs", 3)],
    );
    for (shown, row) in result_table(&mut b)
        .iter()
        .zip(summary["rows"].as_array().unwrap())
    {
        if row["storage"] != "native" {
            shown_equals("slowdown", &shown[3], f(&row["slowdown"]), 2);
        }
    }
    let id = summary["id"].as_u64().unwrap();
    let (status, svg) = http(&dash, "GET", &format!("/api/runs/{id}/figure.svg"), "");
    assert_eq!(status, 200);
    for store in stores {
        assert!(svg.contains(store), "the figure names {store}");
    }
    save_screenshot(&mut b, "dashboard-compare.png");

    // IPA Table I's rows: baseline against IPA in regions, TATP on a small SLC device.
    let configs = ["baseline", "ipa-regions"];
    let summary = comparison_from_form(
        &mut b,
        &runs,
        &[
            ("scenario", "ipa"),
            ("workload", "tatp"),
            ("configs", &configs.join(",")),
            ("scale", "1500"),
            ("terminals", "1"),
            ("preset", "tiny"),
            ("warmup", "500ms"),
            ("duration", "1s"),
            ("speed", "4"),
        ],
        ("config", &configs),
        &[(1, "/append_percent", 1), (4, "/throughput_tps", 1)],
    );
    assert!(
        f(&summary["rows"][1]["append_percent"]) > 0.0,
        "IPA appends: {summary}"
    );
    save_screenshot(&mut b, "dashboard-ipa.png");

    // IAA's free-space sweep: a live series per run (free space and scheme), a table row per
    // summary.json row, and IAA Fig. 11.
    let (id, live_points) = run_from_form(
        &mut b,
        &[
            ("scenario", "iaa"),
            ("storage", "native"),
            ("schemes", "conventional,iaa+u2di"),
            ("free", "40%"),
            ("warmup", "0"),
            ("terminals", "2"),
            ("preset", "noftl13"),
            ("duration", "200ms"),
            ("speed", "1"),
        ],
    );
    assert!(live_points > 0, "the chart had points before the run ended");
    let summary = summary_of(&runs, id);
    let series = b.eval("tpsPlot.series.slice(1).map(s => s.label)");
    assert_eq!(
        series,
        serde_json::json!(["40% conventional", "40% iaa+u2di"]),
        "one live series per run"
    );
    let table = result_table(&mut b);
    let rows = summary["rows"].as_array().unwrap();
    assert_eq!(table.len(), rows.len(), "{table:?}");
    for (shown, row) in table.iter().zip(rows) {
        assert_eq!(shown[0], "40");
        assert_eq!(shown[1], row["scheme"].as_str().unwrap());
        shown_equals("throughput_qps", &shown[2], f(&row["throughput_qps"]), 1);
        shown_equals(
            "gc_copies_per_host_write",
            &shown[4],
            f(&row["gc_copies_per_host_write"]),
            3,
        );
    }
    let fig = b.wait_for(
        "$('figure').complete && $('figure').naturalWidth",
        LONG,
        "IAA Fig. 11 in the page",
    );
    assert!(fig.as_u64().unwrap() > 0);
    save_screenshot(&mut b, "dashboard-iaa.png");
}
