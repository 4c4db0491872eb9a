//! `noftl dashboard` over HTTP (no browser: the browser test is issue 17's later part): it
//! listens on loopback only, serves its page and chart library, refuses bad input with a
//! message, runs a bench started from the API and streams its samples and result as
//! server-sent events, the same to every subscriber, ending with summary.json's figures.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

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
