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
//!   Figures are drawn by `noftl plot`'s code, off the server's threads.
//! - Live data is sent as server-sent events (`GET /api/runs/ID/events`): every event of a run
//!   is kept, and a new subscriber first gets the ones sent before it, so two browsers watching
//!   one run see the same data. The first event, `plan`, names the run's series in the order
//!   of its rows (the page's legend keeps it: rows run in parallel and start in either order).
//!   The stream ends after `done` or `error`.
//! - The page and its chart library (uPlot, vendored in `assets/dashboard` with its licence)
//!   are compiled in: no CDN, nothing fetched at run time.
//! - Loopback only unless `--allow-remote`: runs take CPU and memory of this machine. Every
//!   request passes `guard` (its `Host` and `Origin` are this dashboard's; a change carries the
//!   start-up token and a JSON body), so no other web page starts, cancels or reads runs.
//! - At most `--max-runs` run at once; up to `--max-queued` more wait in a queue, in order, and
//!   the rest are refused (429). `POST /api/runs/ID/cancel` takes a run out of the queue, or
//!   stops a running one at its next live point (a window boundary; a run still loading stops
//!   after its load).
//! - Bad input is refused with 400 and a message naming the field (`request`), before
//!   anything runs; the bench's own checks (memory, device size) come back as an `error` event.
//! - `--dir` holds one result directory per run (`run-N`); those already there are listed as
//!   past runs at start-up. A run's id is taken, and its directory created (`create_dir`: one
//!   owner, even with another dashboard on the same `--dir`), under one lock with its entry in
//!   the list: 40 requests at once get 40 ids.

mod guard;
mod request;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use axum::extract::{DefaultBodyLimit, Path as UrlPath, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Args;
use serde_json::{json, Value};
use tokio::sync::broadcast;

use super::launch::{Job, Launcher};
use guard::{Guard, Refusal};
pub use request::RunRequest;
use request::{parse_with, series_order};

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
    /// Runs at once (1 to 16): each takes a core and its device's memory; more wait in a queue.
    #[arg(long, default_value_t = 2)]
    pub max_runs: u64,
    /// Runs waiting for a slot (0 to 256); more are refused until one ends or is cancelled.
    #[arg(long, default_value_t = 16)]
    pub max_queued: u64,
}

/// One run, live, waiting or past.
#[derive(Debug)]
struct Run {
    id: usize,
    request: Option<RunRequest>,
    command: String,
    dir: PathBuf,
    /// queued | running | cancelling | done | failed | cancelled
    status: &'static str,
    /// Every event sent so far: (name, JSON data).
    history: Vec<(String, String)>,
    tx: broadcast::Sender<(String, String)>,
    summary: Option<Value>,
    /// Set to stop the run at its next live point.
    cancel: Arc<AtomicBool>,
}

impl Run {
    /// Records and sends an event (the caller holds the state's lock: a subscriber gets each
    /// once).
    fn record(&mut self, name: &str, data: String) {
        self.history.push((name.to_string(), data.clone()));
        let _ = self.tx.send((name.to_string(), data));
    }
}

/// A run waiting for a slot, or about to take one.
#[derive(Debug)]
struct Pending {
    id: usize,
    cmd: Job,
    dir: PathBuf,
    speed: f64,
    cancel: Arc<AtomicBool>,
}

/// The runs, the number running and the queue, under one lock.
#[derive(Debug, Default)]
struct Runs {
    list: Vec<Run>,
    running: usize,
    queue: VecDeque<Pending>,
}

#[derive(Debug)]
struct App {
    runs: Mutex<Runs>,
    dir: PathBuf,
    /// The CLI's parser and dispatch (`cli::launcher()`).
    launch: Launcher,
    guard: Guard,
    max_runs: usize,
    max_queued: usize,
}

type Shared = Arc<App>;

/// What a cancelled run unwinds with, from its live hook.
struct Cancelled;

impl App {
    fn lock(&self) -> std::sync::MutexGuard<'_, Runs> {
        // A panic while holding it leaves plain data behind: the list stays usable.
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records and sends an event of run `id`.
    fn send(&self, id: usize, name: &str, data: String) {
        if let Some(r) = self.lock().list.iter_mut().find(|r| r.id == id) {
            r.record(name, data);
        }
    }

    fn finish(&self, id: usize, status: &'static str, summary: Option<Value>) {
        if let Some(r) = self.lock().list.iter_mut().find(|r| r.id == id) {
            r.status = status;
            r.summary = summary;
        }
    }

    /// A new run's id and its directory, created here and nowhere else: above every id listed
    /// and every `run-N` in `--dir` (a run of an earlier start that left no summary.json is
    /// not listed, but keeps its directory), and skipping any that another process has just
    /// taken. Called under the lock, with the entry pushed in the same critical section.
    fn new_run_dir(&self, runs: &Runs) -> std::io::Result<(usize, PathBuf)> {
        let listed = runs.list.iter().map(|r| r.id).max().unwrap_or(0);
        let on_disk = std::fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name();
                name.to_str()?.strip_prefix("run-")?.parse::<usize>().ok()
            })
            .max()
            .unwrap_or(0);
        let first = listed.max(on_disk) + 1;
        for id in first..first + 100 {
            let dir = self.dir.join(format!("run-{id}"));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok((id, dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other(
            "100 run directories in a row were taken by another process",
        ))
    }

    /// Takes `req` (checked) as a run: started now if a slot is free, else queued, else
    /// refused. Returns its id and status.
    fn admit(self: &Arc<Self>, req: RunRequest) -> Result<(usize, &'static str), Refusal> {
        let mut runs = self.lock();
        if runs.running >= self.max_runs && runs.queue.len() >= self.max_queued {
            return Err((
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "{} runs are running and {} waiting (--max-runs, --max-queued): cancel one or wait",
                    runs.running,
                    runs.queue.len()
                ),
            ));
        }
        let (id, dir) = self.new_run_dir(&runs).map_err(|e| {
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "cannot create a run directory in {}: {e}",
                    self.dir.display()
                ),
            )
        })?;
        let parsed = req.argv_with(&dir, &self.launch).and_then(|argv| {
            let cmd = parse_with(&argv, &self.launch)?;
            Ok((argv, cmd))
        });
        let (argv, cmd) = match parsed {
            Ok(x) => x,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err((StatusCode::BAD_REQUEST, e));
            }
        };
        let series = series_order(&req, &cmd, &self.launch);
        let (tx, _) = broadcast::channel(1024);
        let cancel = Arc::new(AtomicBool::new(false));
        let mut run = Run {
            id,
            request: Some(req.clone()),
            command: format!("noftl {}", argv.join(" ")),
            dir: dir.clone(),
            status: "queued",
            history: Vec::new(),
            tx,
            summary: None,
            cancel: Arc::clone(&cancel),
        };
        run.record("plan", json!({ "series": series }).to_string());
        let pending = Pending {
            id,
            cmd,
            dir,
            speed: req.speed,
            cancel,
        };
        if runs.running < self.max_runs {
            runs.running += 1;
            run.status = "running";
            runs.list.push(run);
            drop(runs);
            let app = Arc::clone(self);
            std::thread::spawn(move || drive(app, pending));
            return Ok((id, "running"));
        }
        run.record("status", json!({"phase": "queued"}).to_string());
        runs.list.push(run);
        runs.queue.push_back(pending);
        Ok((id, "queued"))
    }

    /// A run ended: its slot goes to the first run waiting, if any, which is returned marked
    /// running.
    fn next_in_queue(&self) -> Option<Pending> {
        let mut runs = self.lock();
        runs.running = runs.running.saturating_sub(1);
        let next = runs.queue.pop_front()?;
        runs.running += 1;
        if let Some(r) = runs.list.iter_mut().find(|r| r.id == next.id) {
            r.status = "running";
        }
        Some(next)
    }
}

/// The result directories already in `dir`, as past runs.
fn past_runs(dir: &Path) -> Vec<Run> {
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
        let Some(summary) = lab::results::find(&path, "summary.json")
            .and_then(|p| std::fs::read(p).ok())
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
            cancel: Arc::new(AtomicBool::new(false)),
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
    let max_runs = lab::limits::in_range(
        "--max-runs",
        args.max_runs,
        1,
        16,
        "each run takes a core and its device's memory",
    )? as usize;
    let max_queued = lab::limits::in_range(
        "--max-queued",
        args.max_queued,
        0,
        256,
        "runs waiting for a slot",
    )? as usize;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let addr = listener.local_addr()?;
        let app = Arc::new(App {
            runs: Mutex::new(Runs {
                list: past_runs(&args.dir),
                ..Runs::default()
            }),
            dir: args.dir.clone(),
            launch,
            guard: Guard::new(addr),
            max_runs,
            max_queued,
        });
        println!(
            "noftl dashboard: http://{addr}/ (token {}: scripts send it as {} to start or cancel runs)",
            app.guard.token(),
            guard::TOKEN_HEADER
        );
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
        .route("/api/runs/{id}/cancel", post(cancel_run))
        .route("/api/runs/{id}/events", get(events))
        .route("/api/runs/{id}/figure.svg", get(figure))
        // Every request, a path that does not exist too, passes the guard first.
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            check_request,
        ))
        // A form is a few hundred bytes.
        .layer(DefaultBodyLimit::max(64 << 10))
        .with_state(app)
}

async fn check_request(
    State(app): State<Shared>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match app.guard.admit(req.method(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err((status, msg)) => refuse(status, msg),
    }
}

/// The page, with this start's token for its own requests.
async fn page(State(app): State<Shared>) -> Html<String> {
    Html(
        include_str!("../../assets/dashboard/index.html")
            .replace("__NOFTL_TOKEN__", app.guard.token()),
    )
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
    let runs: Vec<Value> = app.lock().list.iter().map(run_json).collect();
    Json(json!({ "runs": runs }))
}

async fn one_run(State(app): State<Shared>, UrlPath(id): UrlPath<usize>) -> Response {
    let found = app.lock().list.iter().find(|r| r.id == id).map(run_json);
    match found {
        Some(v) => Json(v).into_response(),
        None => (StatusCode::NOT_FOUND, format!("no run {id}")).into_response(),
    }
}

fn refuse(status: StatusCode, msg: String) -> Response {
    (status, Json(json!({ "error": msg }))).into_response()
}

fn bad(msg: String) -> Response {
    refuse(StatusCode::BAD_REQUEST, msg)
}

async fn start_run(State(app): State<Shared>, body: axum::body::Bytes) -> Response {
    let req: RunRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad(format!("the form: {e}")),
    };
    // Checked before an id or a directory is taken: a bad request leaves nothing behind.
    if let Err(e) = req
        .argv_with(Path::new("run"), &app.launch)
        .and_then(|argv| parse_with(&argv, &app.launch))
    {
        return bad(e);
    }
    match app.admit(req) {
        Ok((id, status)) => (
            StatusCode::CREATED,
            Json(json!({ "id": id, "status": status })),
        )
            .into_response(),
        Err((status, msg)) => refuse(status, msg),
    }
}

/// Cancels run `id`: a queued one leaves the queue at once; a running one stops at its next
/// live point (202: `cancelling` until then).
async fn cancel_run(State(app): State<Shared>, UrlPath(id): UrlPath<usize>) -> Response {
    let mut guard = app.lock();
    let runs = &mut *guard;
    let Some(r) = runs.list.iter_mut().find(|r| r.id == id) else {
        return refuse(StatusCode::NOT_FOUND, format!("no run {id}"));
    };
    match r.status {
        "queued" => {
            runs.queue.retain(|p| p.id != id);
            r.status = "cancelled";
            let msg = json!({"error": "cancelled before it started", "cancelled": true});
            r.record("error", msg.to_string());
            (
                StatusCode::OK,
                Json(json!({"id": id, "status": "cancelled"})),
            )
                .into_response()
        }
        "running" | "cancelling" => {
            r.cancel.store(true, Ordering::SeqCst);
            r.status = "cancelling";
            (
                StatusCode::ACCEPTED,
                Json(json!({"id": id, "status": "cancelling"})),
            )
                .into_response()
        }
        ended => refuse(
            StatusCode::CONFLICT,
            format!("run {id} has already ended ({ended})"),
        ),
    }
}

/// Runs `first`, then each queued run its slot goes to, on this thread.
fn drive(app: Shared, first: Pending) {
    let mut next = Some(first);
    while let Some(p) = next {
        run_one(&app, p);
        next = app.next_in_queue();
    }
}

/// Waits until `due` after `t0`, in slices, returning early when `cancel` is set.
fn pace(t0: Instant, due: Duration, cancel: &AtomicBool) {
    while !cancel.load(Ordering::Relaxed) {
        let elapsed = t0.elapsed();
        if elapsed >= due {
            return;
        }
        std::thread::sleep((due - elapsed).min(Duration::from_millis(50)));
    }
}

/// The live hook of run `p`: each point paced to `p.speed` virtual seconds per wall second
/// (if not 0) and sent as a `sample` event. A cancelled run unwinds from here
/// (`resume_unwind`: no panic message), since the verbs have no stopping point of their own
/// and this is called at every window boundary; `run_one` catches it.
fn live_hook(app: &Shared, p: &Pending) -> lab::results::LiveHook {
    // Each series' first point's wall time: its pace starts there.
    let started: Mutex<HashMap<String, Instant>> = Mutex::new(HashMap::new());
    let (app, id, speed, cancel) = (Arc::clone(app), p.id, p.speed, Arc::clone(&p.cancel));
    Arc::new(move |point: lab::results::LivePoint| {
        if speed > 0.0 && !cancel.load(Ordering::Relaxed) {
            let t0 = started
                .lock()
                .map(|mut m| *m.entry(point.series.clone()).or_insert_with(Instant::now))
                .unwrap_or_else(|_| Instant::now());
            // Bounded by the request's checks; a wait that is no Duration is no wait.
            let due = Duration::try_from_secs_f64(point.t_s / speed).unwrap_or_default();
            pace(t0, due, &cancel);
        }
        if cancel.load(Ordering::Relaxed) {
            std::panic::resume_unwind(Box::new(Cancelled));
        }
        if let Ok(data) = serde_json::to_string(&point) {
            app.send(id, "sample", data);
        }
    })
}

/// Runs one CLI command on this thread (the verb's own worker threads get the live hook too),
/// then sends `done` with summary.json, or `error` (failed, or cancelled).
fn run_one(app: &Shared, p: Pending) {
    lab::results::set_live(Some(live_hook(app, &p)));
    let Pending {
        id,
        cmd,
        dir,
        cancel,
        ..
    } = p;
    app.send(
        id,
        "status",
        json!({"phase": "loading and running"}).to_string(),
    );
    // A run that panics ends with an `error` event too: a page never waits for nothing.
    let run = app.launch.run;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cmd)));
    lab::results::set_live(None);
    match r {
        Ok(Ok(())) => {
            let summary = lab::results::find(&dir, "summary.json")
                .and_then(|p| std::fs::read(p).ok())
                .and_then(|t| serde_json::from_slice::<Value>(&t).ok());
            // The status first: whoever sees `done` finds the run done in the list too.
            let data = summary.clone().unwrap_or(Value::Null).to_string();
            app.finish(id, "done", summary);
            app.send(id, "done", data);
        }
        // Cancelled: unwound from the hook, or (on a worker thread of the verb) through
        // whatever the verb made of that.
        _ if cancel.load(Ordering::SeqCst) => {
            app.finish(id, "cancelled", None);
            let msg = json!({"error": "cancelled", "cancelled": true});
            app.send(id, "error", msg.to_string());
        }
        Ok(Err(e)) => {
            app.finish(id, "failed", None);
            app.send(
                id,
                "error",
                json!({ "error": format!("{e:#}") }).to_string(),
            );
        }
        Err(_) => {
            app.finish(id, "failed", None);
            let msg = "the run panicked (see the dashboard's standard error)";
            app.send(id, "error", json!({ "error": msg }).to_string());
        }
    }
}

/// A comparison's figure from its summary.json, drawn by the `plot` crate (as `noftl plot`
/// draws it): IPA Table I for an `ipa compare`, IAA Fig. 11 for an `iaa compare`, NoFTL
/// Fig. 3 for a `compare`.
fn draw_figure(summary: &Value) -> anyhow::Result<String> {
    if summary["rows"][0].get("ipa_appends").is_some() {
        ::plot::table_i_of(summary).and_then(|t| ::plot::table_i(&t))
    } else if summary["rows"][0].get("free_space").is_some() {
        ::plot::iaa_of(summary).and_then(|d| ::plot::iaa(&d))
    } else {
        ::plot::bars_of(summary).and_then(|b| ::plot::figure3(&b))
    }
}

/// A finished run's figure, drawn on a blocking thread: a figure takes milliseconds, and never
/// one of the two threads that serve every page.
async fn figure(State(app): State<Shared>, UrlPath(id): UrlPath<usize>) -> Response {
    let summary = app
        .lock()
        .list
        .iter()
        .find(|r| r.id == id)
        .and_then(|r| r.summary.clone());
    let Some(summary) = summary else {
        return (StatusCode::NOT_FOUND, format!("no finished run {id}")).into_response();
    };
    let svg = tokio::task::spawn_blocking(move || draw_figure(&summary))
        .await
        .unwrap_or_else(|e| Err(anyhow::anyhow!("drawing failed: {e}")));
    match svg {
        Ok(svg) => ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response(),
        Err(e) => (StatusCode::NOT_FOUND, format!("run {id}: {e:#}")).into_response(),
    }
}

async fn events(State(app): State<Shared>, UrlPath(id): UrlPath<usize>) -> Response {
    // The history and the subscription are taken under one lock: nothing is missed or doubled.
    let got = app
        .lock()
        .list
        .iter()
        .find(|r| r.id == id)
        .map(|r| (r.history.clone(), r.tx.subscribe()));
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
