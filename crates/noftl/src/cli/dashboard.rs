//! `noftl dashboard`: a web page to start benchmark runs and watch them live (issue 17): bench
//! runs, comparisons of stores (NoFTL Fig. 3), of IPA's configurations (IPA Table I) and IAA's
//! free-space sweep (IAA Fig. 11), with live throughput, device statistics and recent flash
//! requests, then the result table and the comparison's figure.
//!
//! Design:
//! - One driver. A run is the CLI command line (`noftl bench ...`, `noftl compare ...`, `noftl
//!   ipa compare ...`, `noftl iaa compare ...`, each with `--results DIR`) parsed by the CLI's
//!   own parser and run by its own dispatch (`cli::run`) on a thread of this process. Both come
//!   from the top of the command line, handed in to `run` as a `launch::Launcher`
//!   (`cli::launcher()`: `parse`, `run`, and `iaa_compare` to read a parsed `iaa compare`), so
//!   this module never names `Cli` or `Command`. The scheduler's window marks reach the page
//!   through a hook (`results::set_live`, handed on to `compare`'s worker threads), so the
//!   dashboard shows the figures the CLI writes, and `summary.json` is the run's final result.
//!   Figures are drawn by `noftl plot`'s code.
//! - Live data is sent as server-sent events (`GET /api/runs/ID/events`): every event of a run
//!   is kept, and a new subscriber first gets the ones sent before it, so two browsers watching
//!   one run see the same data. The stream ends after `done` or `error`.
//! - The page and its chart library (uPlot, vendored in `assets/dashboard` with its licence)
//!   are compiled in: no CDN, nothing fetched at run time.
//! - Loopback only unless `--allow-remote`: runs take CPU and memory of this machine.
//! - Bad input is refused with 400 and a message naming the field (`RunRequest::argv`), before
//!   anything runs; the bench's own checks (memory, device size) come back as an `error` event.
//! - `--dir` holds one result directory per run (`run-N`); those already there are listed as
//!   past runs at start-up.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::broadcast;

use super::launch::{Job, Launcher};

#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// Address to listen on (loopback unless --allow-remote); port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Listen on a non-loopback address too.
    #[arg(long)]
    pub allow_remote: bool,
    /// Where the runs' result directories go (created if missing).
    #[arg(long, default_value = "dashboard-runs")]
    pub dir: PathBuf,
}

/// What the form asks for.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct RunRequest {
    /// `bench` (one store; the default), `compare` (several side by side, NoFTL Fig. 3),
    /// `ipa` (`ipa compare`: IPA Table I's configurations side by side) or `iaa` (`iaa
    /// compare`: IAA Fig. 11's schemes over free-space levels; no workload or scale).
    #[serde(default = "bench")]
    pub scenario: String,
    #[serde(default)]
    pub workload: String,
    /// bench: the store; iaa: page, dftl or native.
    #[serde(default)]
    pub storage: String,
    /// compare: the stores (compare's names; native among them).
    #[serde(default)]
    pub stores: Vec<String>,
    /// ipa: the configurations (`ipa compare`'s names).
    #[serde(default)]
    pub configs: Vec<String>,
    /// iaa: the schemes (`iaa compare`'s names).
    #[serde(default)]
    pub schemes: Vec<String>,
    /// iaa: the device's free-space levels, e.g. 10%.
    #[serde(default)]
    pub free: Vec<String>,
    /// compare, ipa: measured windows per store or configuration.
    #[serde(default = "one")]
    pub repeat: u32,
    /// compare: before each store's windows (none, auto or a virtual time); ipa: a virtual
    /// time; iaa: writes in device capacities (e.g. 0.5).
    #[serde(default = "none")]
    pub warmup: String,
    #[serde(default)]
    pub scale: u32,
    pub terminals: u32,
    /// Virtual run time, e.g. 10s.
    pub duration: String,
    pub preset: String,
    /// Virtual seconds shown per wall-clock second (0: as fast as the emulator runs).
    #[serde(default)]
    pub speed: f64,
}

fn bench() -> String {
    "bench".into()
}
fn one() -> u32 {
    1
}
fn none() -> String {
    "none".into()
}

/// Flash requests a live point carries at most (the last of its window; NoFTL Fig. 7's table).
const RECENT_REQUESTS: usize = 8;

const STORAGES: [&str; 8] = [
    "native",
    "page",
    "dftl",
    "dftl-orig",
    "fast",
    "block",
    "amf",
    "memdisk",
];

impl RunRequest {
    /// `argv_with` the CLI's own launcher (`cli::launcher()`), for the tests.
    #[cfg(test)]
    pub fn argv(&self, dir: &std::path::Path) -> Result<Vec<String>, String> {
        self.argv_with(dir, &super::launcher())
    }

    /// The CLI command line of this request (without the program name), or what is wrong with
    /// it; `iaa compare`'s own checks run on the command line parsed by `launch.parse`.
    pub fn argv_with(
        &self,
        dir: &std::path::Path,
        launch: &Launcher,
    ) -> Result<Vec<String>, String> {
        let mut argv = if self.scenario == "iaa" {
            self.iaa_argv()?
        } else {
            self.tpc_argv()?
        };
        if self.terminals == 0 || self.terminals > 64 {
            return Err(format!("terminals: 1 to 64, not {}", self.terminals));
        }
        let ns =
            lab::units::parse_duration_ns(&self.duration).map_err(|e| format!("duration: {e}"))?;
        if ns > 600_000_000_000 {
            return Err("duration: at most 600s of virtual time here".into());
        }
        if !nand::PRESETS.iter().any(|(n, _)| *n == self.preset) {
            let names: Vec<&str> = nand::PRESETS.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "preset: one of {}, not '{}'",
                names.join(", "),
                self.preset
            ));
        }
        if !(self.speed.is_finite() && (0.0..=1000.0).contains(&self.speed)) {
            return Err(format!("speed: 0 (no pacing) to 1000, not {}", self.speed));
        }
        // About a hundred points per run, at least 10 ms apart.
        let window_ms = (ns / 100 / 1_000_000).max(10);
        argv.extend(
            [
                "--terminals",
                &self.terminals.to_string(),
                "--duration",
                &self.duration,
                "--preset",
                &self.preset,
                // The device keeps its last operations for the page's request table.
                "--set",
                &format!("trace_recent={RECENT_REQUESTS}"),
                "--results",
                &dir.display().to_string(),
                "--sample-window",
                &format!("{window_ms}ms"),
            ]
            .map(String::from),
        );
        if self.scenario == "iaa" {
            // `iaa compare`'s own checks, with its messages, on the parsed command line.
            let parsed = parse_with(&argv, launch);
            if let Some(a) = parsed.as_ref().ok().and_then(launch.iaa_compare) {
                super::iaa::checked(a).map_err(|e| format!("{e:#}"))?;
                let runs = a.free.len()
                    * super::iaa::schemes(a)
                        .map_err(|e| format!("schemes: {e:#}"))?
                        .len();
                if runs > 20 {
                    return Err(format!("free x schemes: at most 20 runs here, not {runs}"));
                }
            }
        }
        Ok(argv)
    }

    /// `iaa compare`'s part of the command line.
    fn iaa_argv(&self) -> Result<Vec<String>, String> {
        if !["page", "dftl", "native"].contains(&self.storage.as_str()) {
            return Err(format!(
                "storage: page, dftl or native for IAA, not '{}'",
                self.storage
            ));
        }
        if self.schemes.is_empty() {
            return Err("schemes: one or more of conventional, iaa, u2di, iaa+u2di".into());
        }
        if self.free.is_empty() {
            return Err("free: one or more free-space levels, e.g. 10%,30%".into());
        }
        for f in &self.free {
            super::common::parse_percent(f).map_err(|e| format!("free: {e}"))?;
        }
        let warmup = if self.warmup == "none" {
            "0"
        } else {
            self.warmup.as_str()
        };
        warmup
            .parse::<f64>()
            .map_err(|_| format!("warmup: device capacities (e.g. 0.5) for IAA, not '{warmup}'"))?;
        Ok([
            "iaa",
            "compare",
            "--storage",
            &self.storage,
            "--schemes",
            &self.schemes.join(","),
            "--free",
            &self.free.join(","),
            "--warmup",
            warmup,
        ]
        .map(String::from)
        .to_vec())
    }

    /// The command line's part for the TPC scenarios (bench, compare, ipa), with the scale.
    fn tpc_argv(&self) -> Result<Vec<String>, String> {
        let (max_scale, what) = match self.workload.as_str() {
            "tpcb" => (64, "branches"),
            "tatp" => (500_000, "subscribers"),
            "tpcc" => (4, "warehouses"),
            other => return Err(format!("workload: tpcb, tatp or tpcc, not '{other}'")),
        };
        let mut argv: Vec<String> = match self.scenario.as_str() {
            "bench" => {
                if !STORAGES.contains(&self.storage.as_str()) {
                    return Err(format!(
                        "storage: one of {}, not '{}'",
                        STORAGES.join(", "),
                        self.storage
                    ));
                }
                ["bench", &self.workload, "--storage", &self.storage]
                    .map(String::from)
                    .to_vec()
            }
            "compare" => {
                // compare's own checks, with its messages.
                lab::experiments::compare::parse_stores(&self.stores)
                    .map_err(|e| format!("stores: {e}"))?;
                lab::experiments::compare::parse_warmup(&self.warmup)
                    .map_err(|e| format!("warmup: {e}"))?;
                self.check_repeat()?;
                [
                    "compare",
                    "--workload",
                    &self.workload,
                    "--stores",
                    &self.stores.join(","),
                    "--repeat",
                    &self.repeat.to_string(),
                    "--warmup",
                    &self.warmup,
                ]
                .map(String::from)
                .to_vec()
            }
            "ipa" => {
                if self.configs.is_empty() {
                    return Err(format!(
                        "configs: one or more of {}",
                        super::ipa::CONFIGS.join(", ")
                    ));
                }
                if let Some(c) = self
                    .configs
                    .iter()
                    .find(|c| !super::ipa::CONFIGS.contains(&c.as_str()))
                {
                    return Err(format!(
                        "configs: '{c}' is not one of {}",
                        super::ipa::CONFIGS.join(", ")
                    ));
                }
                let warmup = &self.warmup;
                lab::units::parse_duration_ns(warmup).map_err(|e| format!("warmup: {e}"))?;
                self.check_repeat()?;
                [
                    "ipa",
                    "compare",
                    "--workload",
                    &self.workload,
                    "--configs",
                    &self.configs.join(","),
                    "--repeat",
                    &self.repeat.to_string(),
                    "--warmup",
                    warmup,
                ]
                .map(String::from)
                .to_vec()
            }
            other => {
                return Err(format!(
                    "scenario: bench, compare, ipa or iaa, not '{other}'"
                ))
            }
        };
        if self.scale == 0 || self.scale > max_scale {
            return Err(format!(
                "scale: 1 to {max_scale} {what} here, not {}",
                self.scale
            ));
        }
        argv.extend(["--scale".to_string(), self.scale.to_string()]);
        Ok(argv)
    }

    fn check_repeat(&self) -> Result<(), String> {
        if self.repeat == 0 || self.repeat > 10 {
            return Err(format!("repeat: 1 to 10, not {}", self.repeat));
        }
        Ok(())
    }
}

/// A run's command line through the CLI's own parser (`launch.parse`).
fn parse_with(argv: &[String], launch: &Launcher) -> Result<Job, String> {
    (launch.parse)(argv).map_err(|e| e.to_string())
}

/// `parse_with` the CLI's own launcher (`cli::launcher()`), for the tests.
#[cfg(test)]
fn parse(argv: &[String]) -> Result<Job, String> {
    parse_with(argv, &super::launcher())
}

/// One run, live or past.
#[derive(Debug)]
struct Run {
    id: usize,
    request: Option<RunRequest>,
    command: String,
    dir: PathBuf,
    /// running | done | failed
    status: &'static str,
    /// Every event sent so far: (name, JSON data).
    history: Vec<(String, String)>,
    tx: broadcast::Sender<(String, String)>,
    summary: Option<Value>,
}

#[derive(Debug)]
struct App {
    runs: Mutex<Vec<Run>>,
    dir: PathBuf,
    /// The CLI's parser and dispatch (`cli::launcher()`).
    launch: Launcher,
}

type Shared = Arc<App>;

impl App {
    /// Records and sends an event of run `id` (under the lock: a subscriber gets each once).
    fn send(&self, id: usize, name: &str, data: String) {
        if let Ok(mut runs) = self.runs.lock() {
            if let Some(r) = runs.iter_mut().find(|r| r.id == id) {
                r.history.push((name.to_string(), data.clone()));
                let _ = r.tx.send((name.to_string(), data));
            }
        }
    }

    fn finish(&self, id: usize, status: &'static str, summary: Option<Value>) {
        if let Ok(mut runs) = self.runs.lock() {
            if let Some(r) = runs.iter_mut().find(|r| r.id == id) {
                r.status = status;
                r.summary = summary;
            }
        }
    }
}

/// The result directories already in `dir`, as past runs.
fn past_runs(dir: &std::path::Path) -> Vec<Run> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut found: Vec<(usize, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name.strip_prefix("run-")?.parse::<usize>().ok()?;
            Some((id, e.path()))
        })
        .collect();
    found.sort();
    for (id, path) in found {
        let Some(summary) = std::fs::read(path.join("summary.json"))
            .ok()
            .and_then(|t| serde_json::from_slice::<Value>(&t).ok())
        else {
            continue;
        };
        let (tx, _) = broadcast::channel(16);
        out.push(Run {
            id,
            request: None,
            command: String::new(),
            dir: path,
            status: "done",
            history: vec![("done".into(), summary.to_string())],
            tx,
            summary: Some(summary),
        });
    }
    out
}

/// Serves the dashboard; its runs are parsed and run by `launch` (`cli::launcher()`).
pub fn run(args: DashboardArgs, launch: Launcher) -> anyhow::Result<()> {
    if !args.listen.ip().is_loopback() && !args.allow_remote {
        bail!(
            "--listen {}: not a loopback address; the dashboard starts runs on this machine, so give --allow-remote to serve other hosts",
            args.listen
        );
    }
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let app = Arc::new(App {
        runs: Mutex::new(past_runs(&args.dir)),
        dir: args.dir.clone(),
        launch,
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let addr = listener.local_addr()?;
        println!("noftl dashboard: http://{addr}/");
        use std::io::Write as _;
        std::io::stdout().flush()?;
        axum::serve(listener, router(app)).await?;
        Ok(())
    })
}

fn router(app: Shared) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/uplot.js", get(uplot_js))
        .route("/uplot.css", get(uplot_css))
        .route("/api/runs", get(list_runs).post(start_run))
        .route("/api/runs/{id}", get(one_run))
        .route("/api/runs/{id}/events", get(events))
        .route("/api/runs/{id}/figure.svg", get(figure))
        .with_state(app)
}

async fn page() -> Html<&'static str> {
    Html(include_str!("../../assets/dashboard/index.html"))
}

async fn uplot_js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript")],
        include_str!("../../assets/dashboard/uPlot.iife.min.js"),
    )
        .into_response()
}

async fn uplot_css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css")],
        include_str!("../../assets/dashboard/uPlot.min.css"),
    )
        .into_response()
}

fn run_json(r: &Run) -> Value {
    json!({
        "id": r.id,
        "status": r.status,
        "request": r.request,
        "command": r.command,
        "dir": r.dir.display().to_string(),
        "summary": r.summary,
    })
}

async fn list_runs(State(app): State<Shared>) -> Json<Value> {
    let runs = app
        .runs
        .lock()
        .map(|r| r.iter().map(run_json).collect::<Vec<_>>());
    Json(json!({ "runs": runs.unwrap_or_default() }))
}

async fn one_run(State(app): State<Shared>, UrlPath(id): UrlPath<usize>) -> Response {
    let found = app
        .runs
        .lock()
        .ok()
        .and_then(|r| r.iter().find(|r| r.id == id).map(run_json));
    match found {
        Some(v) => Json(v).into_response(),
        None => (StatusCode::NOT_FOUND, format!("no run {id}")).into_response(),
    }
}

fn bad(msg: String) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({ "error": msg }))).into_response()
}

async fn start_run(State(app): State<Shared>, body: axum::body::Bytes) -> Response {
    let req: RunRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad(format!("the form: {e}")),
    };
    let id = app
        .runs
        .lock()
        .map(|r| r.iter().map(|x| x.id + 1).max().unwrap_or(1))
        .unwrap_or(1);
    let dir = app.dir.join(format!("run-{id}"));
    let argv = match req.argv_with(&dir, &app.launch) {
        Ok(a) => a,
        Err(e) => return bad(e),
    };
    let cmd = match parse_with(&argv, &app.launch) {
        Ok(c) => c,
        Err(e) => return bad(e),
    };
    let (tx, _) = broadcast::channel(1024);
    if let Ok(mut runs) = app.runs.lock() {
        runs.push(Run {
            id,
            request: Some(req.clone()),
            command: format!("noftl {}", argv.join(" ")),
            dir: dir.clone(),
            status: "running",
            history: Vec::new(),
            tx,
            summary: None,
        });
    }
    let worker = Arc::clone(&app);
    std::thread::spawn(move || drive(worker, id, cmd, dir, req.speed));
    (StatusCode::CREATED, Json(json!({ "id": id }))).into_response()
}

/// Runs one CLI command on this thread (the verb's own worker threads get the live hook too),
/// sending its window marks as `sample` events (each series paced to `speed` virtual seconds
/// per wall second, if not 0), then `done` with summary.json or `error`.
fn drive(app: Shared, id: usize, cmd: Job, dir: PathBuf, speed: f64) {
    // Each series' first point's wall time: its pace starts there.
    let started: Mutex<HashMap<String, Instant>> = Mutex::new(HashMap::new());
    let hook_app = Arc::clone(&app);
    lab::results::set_live(Some(Arc::new(move |p: lab::results::LivePoint| {
        if speed > 0.0 {
            let t0 = started
                .lock()
                .map(|mut m| *m.entry(p.series.clone()).or_insert_with(Instant::now))
                .unwrap_or_else(|_| Instant::now());
            let due = Duration::from_secs_f64(p.t_s / speed);
            let el = t0.elapsed();
            if due > el {
                std::thread::sleep(due - el);
            }
        }
        if let Ok(data) = serde_json::to_string(&p) {
            hook_app.send(id, "sample", data);
        }
    })));
    app.send(
        id,
        "status",
        json!({"phase": "loading and running"}).to_string(),
    );
    // A run that panics ends with an `error` event too: a page never waits for nothing.
    let run = app.launch.run;
    let r =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cmd))).unwrap_or_else(|_| {
            Err(anyhow::anyhow!(
                "the run panicked (see the dashboard's standard error)"
            ))
        });
    lab::results::set_live(None);
    match r {
        Ok(()) => {
            let summary = std::fs::read(dir.join("summary.json"))
                .ok()
                .and_then(|t| serde_json::from_slice::<Value>(&t).ok());
            // The status first: whoever sees `done` finds the run done in the list too.
            let data = summary.clone().unwrap_or(Value::Null).to_string();
            app.finish(id, "done", summary);
            app.send(id, "done", data);
        }
        Err(e) => {
            app.finish(id, "failed", None);
            app.send(
                id,
                "error",
                json!({ "error": format!("{e:#}") }).to_string(),
            );
        }
    }
}

/// A comparison's figure, drawn by the `plot` crate (as `noftl plot` draws it) from its
/// summary.json: IPA Table I for an `ipa compare`, IAA Fig. 11 for an `iaa compare`, NoFTL
/// Fig. 3 for a `compare`.
async fn figure(State(app): State<Shared>, UrlPath(id): UrlPath<usize>) -> Response {
    let summary = app.runs.lock().ok().and_then(|r| {
        r.iter()
            .find(|r| r.id == id)
            .and_then(|r| r.summary.clone())
    });
    let Some(summary) = summary else {
        return (StatusCode::NOT_FOUND, format!("no finished run {id}")).into_response();
    };
    let svg = if summary["rows"][0].get("ipa_appends").is_some() {
        ::plot::table_i_of(&summary).and_then(|t| ::plot::table_i(&t))
    } else if summary["rows"][0].get("free_space").is_some() {
        ::plot::iaa_of(&summary).and_then(|d| ::plot::iaa(&d))
    } else {
        ::plot::bars_of(&summary).and_then(|b| ::plot::figure3(&b))
    };
    match svg {
        Ok(svg) => ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response(),
        Err(e) => (StatusCode::NOT_FOUND, format!("run {id}: {e:#}")).into_response(),
    }
}

async fn events(State(app): State<Shared>, UrlPath(id): UrlPath<usize>) -> Response {
    // The history and the subscription are taken under one lock: nothing is missed or doubled.
    let got = app.runs.lock().ok().and_then(|runs| {
        runs.iter()
            .find(|r| r.id == id)
            .map(|r| (r.history.clone(), r.tx.subscribe()))
    });
    let Some((history, rx)) = got else {
        return (StatusCode::NOT_FOUND, format!("no run {id}")).into_response();
    };
    let ended = history.iter().any(|(n, _)| n == "done" || n == "error");
    let past = futures_util::stream::iter(history);
    let live = futures_util::stream::unfold((rx, ended), |(mut rx, ended)| async move {
        if ended {
            return None;
        }
        loop {
            match rx.recv().await {
                Ok((name, data)) => {
                    let end = name == "done" || name == "error";
                    return Some(((name, data), (rx, end)));
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    use futures_util::StreamExt as _;
    let stream = past.chain(live).map(|(name, data)| {
        Ok::<Event, std::convert::Infallible>(Event::default().event(name).data(data))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> RunRequest {
        RunRequest {
            scenario: "bench".into(),
            stores: Vec::new(),
            configs: Vec::new(),
            schemes: Vec::new(),
            free: Vec::new(),
            repeat: 1,
            warmup: "none".into(),
            workload: "tpcb".into(),
            storage: "native".into(),
            scale: 1,
            terminals: 2,
            duration: "2s".into(),
            preset: "noftl13".into(),
            speed: 0.0,
        }
    }

    #[test]
    fn an_iaa_request_becomes_iaa_compare_without_a_scale() {
        let iaa = RunRequest {
            scenario: "iaa".into(),
            workload: String::new(),
            scale: 0,
            schemes: vec!["conventional".into(), "iaa".into()],
            free: vec!["20%".into()],
            ..req()
        };
        let argv = iaa.argv(std::path::Path::new("d/run-2")).unwrap();
        assert_eq!(&argv[..2], ["iaa", "compare"]);
        assert!(argv.windows(2).any(|w| w == ["--warmup", "0"]), "none is 0");
        assert!(!argv.iter().any(|a| a == "--scale"));
        assert!(parse(&argv).is_ok());
        for (bad, word) in [
            (
                RunRequest {
                    warmup: "1s".into(),
                    ..iaa.clone()
                },
                "warmup: device capacities",
            ),
            (
                RunRequest {
                    schemes: vec!["lru".into()],
                    ..iaa.clone()
                },
                "schemes: ",
            ),
            (
                RunRequest {
                    free: vec!["ten".into()],
                    ..iaa.clone()
                },
                "free: ",
            ),
        ] {
            let e = bad.argv(std::path::Path::new("d")).unwrap_err();
            assert!(e.starts_with(word), "{e}");
        }
    }

    #[test]
    fn a_request_becomes_the_bench_command_line_or_a_message() {
        let argv = req().argv(std::path::Path::new("d/run-1")).unwrap();
        assert_eq!(&argv[..2], ["bench", "tpcb"]);
        assert!(argv.windows(2).any(|w| w == ["--results", "d/run-1"]));
        assert!(argv.windows(2).any(|w| w == ["--sample-window", "20ms"]));
        assert!(parse(&argv).is_ok());
        for (bad, word) in [
            (
                RunRequest {
                    workload: "tpch".into(),
                    ..req()
                },
                "workload",
            ),
            (
                RunRequest {
                    storage: "ssd".into(),
                    ..req()
                },
                "storage",
            ),
            (RunRequest { scale: 0, ..req() }, "scale"),
            (
                RunRequest {
                    terminals: 1000,
                    ..req()
                },
                "terminals",
            ),
            (
                RunRequest {
                    duration: "soon".into(),
                    ..req()
                },
                "duration",
            ),
            (
                RunRequest {
                    preset: "x".into(),
                    ..req()
                },
                "preset",
            ),
            (
                RunRequest {
                    speed: -1.0,
                    ..req()
                },
                "speed",
            ),
        ] {
            let e = bad.argv(std::path::Path::new("d")).unwrap_err();
            assert!(e.starts_with(word), "{e}");
        }
    }

    fn compare() -> RunRequest {
        RunRequest {
            scenario: "compare".into(),
            stores: vec!["native".into(), "dftl-2%".into()],
            ..req()
        }
    }

    #[test]
    fn a_comparison_becomes_the_compare_command_line_or_compares_own_message() {
        let argv = compare().argv(std::path::Path::new("d/run-2")).unwrap();
        assert_eq!(&argv[..1], ["compare"]);
        assert!(argv.windows(2).any(|w| w == ["--stores", "native,dftl-2%"]));
        assert!(argv.windows(2).any(|w| w == ["--warmup", "none"]));
        assert!(parse(&argv).is_ok(), "{argv:?}");
        let ipa = RunRequest {
            scenario: "ipa".into(),
            configs: vec!["baseline".into(), "ipa-regions".into()],
            warmup: "1s".into(),
            ..compare()
        };
        let argv = ipa.argv(std::path::Path::new("d/run-3")).unwrap();
        assert_eq!(&argv[..2], ["ipa", "compare"]);
        assert!(argv.windows(2).any(|w| w == ["--warmup", "1s"]), "{argv:?}");
        assert!(parse(&argv).is_ok(), "{argv:?}");
        for (bad, word) in [
            (
                RunRequest {
                    stores: vec!["dftl-2%".into()],
                    ..compare()
                },
                "stores: --stores must include native",
            ),
            (
                RunRequest {
                    stores: vec!["native".into(), "ssd".into()],
                    ..compare()
                },
                "stores: --stores: no store 'ssd'",
            ),
            (
                RunRequest {
                    warmup: "later".into(),
                    ..compare()
                },
                "warmup",
            ),
            (
                RunRequest {
                    repeat: 0,
                    ..compare()
                },
                "repeat",
            ),
            (
                RunRequest {
                    scenario: "ipa".into(),
                    configs: vec!["baseline".into(), "ipa-everything".into()],
                    ..compare()
                },
                "configs: 'ipa-everything'",
            ),
            (
                RunRequest {
                    scenario: "ipa".into(),
                    configs: vec!["baseline".into()],
                    warmup: "auto".into(),
                    ..compare()
                },
                "warmup",
            ),
            (
                RunRequest {
                    scenario: "sweep".into(),
                    ..compare()
                },
                "scenario",
            ),
        ] {
            let e = bad.argv(std::path::Path::new("d")).unwrap_err();
            assert!(e.starts_with(word), "{e}");
        }
    }
}
