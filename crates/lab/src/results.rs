//! Result directories (`--results DIR` on `bench`, `compare`, `ipa compare`, `iaa compare`,
//! `io` and `fs bench`): the run's JSON as `summary.json` with BenchBase's summary names added,
//! a windowed time series `samples.csv`, one row per transaction or request in `raw.csv` (with
//! `--raw`), for `io` a fio-shaped `fio.json` (`fs bench`: fio's own JSON per point, and no
//! series). Names and units: docs/results.md.
//!
//! How the data is gathered, without slowing the run: terminals (and `io`'s submit loop) append
//! one 24-byte event per finished transaction or request to a `Vec` (amortized growth, no other
//! allocation); the scheduler (`storage::sched::run_virtual_sampled`) or the submit loop takes a
//! `Mark` of the device's counters at every window boundary (one comparison per scheduled event
//! in between). Everything else (bucketing, percentiles, files) happens after the run.
//!
//! Invariants:
//! 1. Every event falls in exactly one window (by its end time), so the windows' counts sum to
//!    the run's; the counters' differences over the windows sum to the run's totals.
//! 2. The files are written through `output::write_atomic` (regular files only, no half files).
//! 3. In virtual time the files are a function of the command (no wall-clock figures in them).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{json, Map, Value};
use storage::sched::TxnEvent;

/// A result directory about to be written.
#[derive(Clone, Debug)]
pub struct Plan {
    pub dir: PathBuf,
    pub window_ns: u64,
    pub raw: bool,
}

impl Plan {
    /// The plan of a result directory `dir` with samples every `sample_window` (a duration such
    /// as 100ms or 1s), checked before any work: the directory is created and must take files.
    pub fn new(dir: &Path, sample_window: &str, raw: bool) -> anyhow::Result<Plan> {
        let window_ns =
            crate::units::parse_duration_ns(sample_window).context("--sample-window")?;
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the result directory {}", dir.display()))?;
        crate::output::check_writable(&dir.join("summary.json"))?;
        Ok(Plan {
            dir: dir.to_path_buf(),
            window_ns,
            raw,
        })
    }
}

/// The device's cumulative counters at one instant of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    pub t_ns: u64,
    pub flash_reads: u64,
    pub flash_programs: u64,
    pub flash_erases: u64,
    pub gc_migrations: u64,
    /// Erased good blocks on the flash (None: no flash below).
    pub free_blocks: Option<u64>,
}

/// Erased, good blocks: the flash's free space as the FTL (or the engine) sees it.
pub fn free_blocks(n: &nand::Nand) -> u64 {
    let blocks = n.geometry().blocks();
    (0..blocks)
        .filter(|&b| {
            n.block_info(nand::Pbn(b)).is_ok_and(|i| {
                i.state == nand::BlockState::Good && i.next_page == 0 && !n.is_bad(nand::Pbn(b))
            })
        })
        .count() as u64
}

/// A mark of the flash `n` (if any) at `t_ns`, with the flash management's GC migrations.
pub fn mark(t_ns: u64, n: Option<&nand::Nand>, gc_migrations: u64) -> Mark {
    match n {
        Some(n) => {
            let c = n.stats().flash_counts();
            Mark {
                t_ns,
                flash_reads: c.reads,
                flash_programs: c.programs + c.partial_programs,
                flash_erases: c.erases,
                gc_migrations,
                free_blocks: Some(free_blocks(n)),
            }
        }
        None => Mark {
            t_ns,
            gc_migrations,
            ..Mark::default()
        },
    }
}

/// A live point of a running bench, for the dashboard: the engine's and the device's cumulative
/// counters at a window boundary (`t_s` from the measured window's start), of the series
/// `series` (empty for a bench; `STORE` or `STORE #REPEAT` in a comparison, whose runs go on
/// worker threads).
#[derive(Clone, Debug, serde::Serialize)]
pub struct LivePoint {
    pub series: String,
    pub t_s: f64,
    pub commits: u64,
    pub aborts: u64,
    pub flash_reads: u64,
    pub flash_programs: u64,
    pub flash_erases: u64,
    pub gc_migrations: u64,
    pub free_blocks: Option<u64>,
    /// The device's last requests of the window (with `trace_recent` set on the device),
    /// oldest first: NoFTL Fig. 7's request table.
    pub requests: Vec<LiveRequest>,
}

/// One flash operation of a live point's window.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LiveRequest {
    /// Its completion, from the measured window's start.
    pub t_s: f64,
    pub die: u32,
    pub op: &'static str,
    pub purpose: &'static str,
    /// Submission to completion (queueing on its die included).
    pub latency_us: f64,
    pub status: String,
}

/// The device's recent operations after `after_seq` (a live point's requests), with times from
/// `t0_ns`; returns them and the last one's sequence number.
pub fn recent_requests(
    n: Option<&nand::Nand>,
    t0_ns: u64,
    after_seq: u64,
) -> (Vec<LiveRequest>, u64) {
    let mut last = after_seq;
    let out = n
        .map(|n| {
            n.recent_trace()
                .filter(|e| e.seq > after_seq)
                .map(|e| {
                    last = last.max(e.seq);
                    LiveRequest {
                        t_s: e.done_ns.saturating_sub(t0_ns) as f64 / 1e9,
                        die: e.die,
                        op: e.op.name(),
                        purpose: e.purpose.name(),
                        latency_us: e.done_ns.saturating_sub(e.submit_ns) as f64 / 1e3,
                        status: e.status.clone(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    (out, last)
}

/// The dashboard's receiver of live points. Shared (`Arc`, `Sync`) so that a verb running its
/// stores on worker threads (`compare`) hands it to each of them (`live_hook`, `set_live`).
pub type LiveHook = std::sync::Arc<dyn Fn(LivePoint) + Send + Sync>;

thread_local! {
    /// The dashboard's hook for runs on this thread and the series they are (none elsewhere:
    /// the CLI verbs pay nothing).
    static LIVE: std::cell::RefCell<Option<(LiveHook, String)>> =
        const { std::cell::RefCell::new(None) };
}

/// Sets (or clears) this thread's live hook; its points are of the series `""` until
/// `set_live_series`.
pub fn set_live(hook: Option<LiveHook>) {
    LIVE.with(|l| *l.borrow_mut() = hook.map(|h| (h, String::new())));
}

/// This thread's live hook, to set on a worker thread.
pub fn live_hook() -> Option<LiveHook> {
    LIVE.with(|l| l.borrow().as_ref().map(|(h, _)| std::sync::Arc::clone(h)))
}

/// Names the series of this thread's next live points (nothing without a hook).
pub fn set_live_series(series: &str) {
    LIVE.with(|l| {
        if let Some((_, s)) = l.borrow_mut().as_mut() {
            series.clone_into(s);
        }
    });
}

/// Calls this thread's live hook, if any, with the point `p` makes (its series set here).
pub fn live(p: impl FnOnce() -> LivePoint) {
    LIVE.with(|l| {
        if let Some((f, series)) = l.borrow().as_ref() {
            let mut point = p();
            point.series.clone_from(series);
            f(point);
        }
    });
}

/// A mark of a page store (the engine's storage).
pub fn mark_store(t_ns: u64, s: &dyn storage::PageStore) -> Mark {
    mark(
        t_ns,
        s.nand(),
        s.device_report().map_or(0, |r| r.gc.migrations),
    )
}

/// One measured run: its labels (compare: store and repeat), its marks (the first at the
/// run's start, the last at its end) and its events.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub labels: Vec<String>,
    pub marks: Vec<Mark>,
    pub events: Vec<TxnEvent>,
}

impl Trace {
    /// A measured run's trace: its marks and the events its terminals recorded (each
    /// terminal's `events`, taken), in terminal order.
    pub fn of_terminals(
        labels: Vec<String>,
        marks: Vec<Mark>,
        events: impl IntoIterator<Item = Option<Vec<TxnEvent>>>,
    ) -> Trace {
        Trace {
            labels,
            marks,
            events: events.into_iter().flatten().flatten().collect(),
        }
    }
    pub fn start_ns(&self) -> u64 {
        self.marks.first().map_or(0, |m| m.t_ns)
    }
    /// The last mark's time: the run's end (the scheduler marks it).
    pub fn end_ns(&self) -> u64 {
        self.marks.last().map_or(0, |m| m.t_ns)
    }
}

/// Marks and events of a loop that submits requests in time order (`noftl io`): `due` is the
/// one comparison per request; `mark_until` takes the marks of the boundaries passed.
#[derive(Debug)]
pub struct Recorder {
    window_ns: u64,
    next_ns: u64,
    pub trace: Trace,
}

impl Recorder {
    /// Starts at `first` (the mark at the run's start).
    pub fn new(window_ns: u64, first: Mark) -> Recorder {
        Recorder {
            window_ns: window_ns.max(1),
            next_ns: first.t_ns.saturating_add(window_ns.max(1)),
            trace: Trace {
                labels: Vec::new(),
                marks: vec![first],
                events: Vec::new(),
            },
        }
    }
    #[inline]
    pub fn due(&self, at_ns: u64) -> bool {
        at_ns >= self.next_ns
    }
    pub fn mark_until(&mut self, at_ns: u64, mut f: impl FnMut(u64) -> Mark) {
        while at_ns >= self.next_ns {
            self.trace.marks.push(f(self.next_ns));
            self.next_ns = self.next_ns.saturating_add(self.window_ns);
        }
    }
    #[inline]
    pub fn event(&mut self, start_ns: u64, done_ns: u64, kind: u8) {
        self.trace.events.push(TxnEvent {
            start_ns,
            latency_ns: done_ns.saturating_sub(start_ns).max(1),
            kind,
            committed: true,
        });
    }
    /// The final mark, at the run's end.
    pub fn finish(mut self, last: Mark) -> Trace {
        self.trace.marks.push(last);
        self.trace
    }
}

/// What the rows count: transactions (bench, compare) or requests (io).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Txn,
    Io { bytes_per_request: u64 },
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn r3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

/// `samples.csv` over the traces (invariant 1): one row per window of each trace.
pub fn samples_csv(traces: &[Trace], label_cols: &[&str], unit: Unit) -> String {
    let mut out = String::new();
    for c in label_cols {
        let _ = write!(out, "{c},");
    }
    out.push_str(match unit {
        Unit::Txn => "time_s,window_s,transactions,committed,throughput_tps,goodput_tps",
        Unit::Io { .. } => "time_s,window_s,requests,iops,mib_per_s",
    });
    out.push_str(",latency_p50_us,latency_p95_us,latency_p99_us,latency_max_us,flash_reads,flash_programs,flash_erases,gc_migrations,free_blocks\n");
    let mut scratch: Vec<u64> = Vec::new();
    for t in traces {
        let windows = t.marks.len().saturating_sub(1);
        if windows == 0 {
            continue;
        }
        // Bucket by end time: window k ends at marks[k + 1]; the last takes the rest.
        let mut buckets: Vec<Vec<(u64, bool)>> = vec![Vec::new(); windows];
        for e in &t.events {
            let end = e.end_ns();
            let k = t.marks[1..]
                .partition_point(|m| m.t_ns < end)
                .min(windows - 1);
            buckets[k].push((e.latency_ns, e.committed));
        }
        let start = t.start_ns();
        for (k, bucket) in buckets.iter().enumerate() {
            let (a, b) = (&t.marks[k], &t.marks[k + 1]);
            let secs = (b.t_ns - a.t_ns) as f64 / 1e9;
            let rate = |x: u64| if secs > 0.0 { x as f64 / secs } else { 0.0 };
            for l in &t.labels {
                let _ = write!(out, "{l},");
            }
            let n = bucket.len() as u64;
            let ok = bucket.iter().filter(|e| e.1).count() as u64;
            let _ = write!(out, "{},{},", (b.t_ns - start) as f64 / 1e9, secs);
            match unit {
                Unit::Txn => {
                    let _ = write!(out, "{n},{ok},{},{}", r3(rate(n)), r3(rate(ok)));
                }
                Unit::Io { bytes_per_request } => {
                    let _ = write!(
                        out,
                        "{n},{},{}",
                        r3(rate(n)),
                        r3(rate(n) * bytes_per_request as f64 / f64::from(1u32 << 20))
                    );
                }
            }
            scratch.clear();
            scratch.extend(bucket.iter().map(|e| e.0));
            scratch.sort_unstable();
            let _ = writeln!(
                out,
                ",{},{},{},{},{},{},{},{},{}",
                us(pct(&scratch, 0.5)),
                us(pct(&scratch, 0.95)),
                us(pct(&scratch, 0.99)),
                us(scratch.last().copied().unwrap_or(0)),
                b.flash_reads - a.flash_reads,
                b.flash_programs - a.flash_programs,
                b.flash_erases - a.flash_erases,
                b.gc_migrations.saturating_sub(a.gc_migrations),
                b.free_blocks.map_or(String::new(), |f| f.to_string()),
            );
        }
    }
    out
}

/// `raw.csv`: one row per event, `type` named by `types[kind]`, times relative to the trace's
/// start.
pub fn raw_csv(traces: &[Trace], label_cols: &[&str], types: &[&str], ok_word: &str) -> String {
    let mut out = String::new();
    for c in label_cols {
        let _ = write!(out, "{c},");
    }
    out.push_str("type,start_us,latency_us,outcome\n");
    for t in traces {
        let start = t.start_ns();
        for e in &t.events {
            for l in &t.labels {
                let _ = write!(out, "{l},");
            }
            let _ = writeln!(
                out,
                "{},{},{},{}",
                types.get(usize::from(e.kind)).copied().unwrap_or("?"),
                us(e.start_ns.saturating_sub(start)),
                us(e.latency_ns),
                if e.committed { ok_word } else { "rollback" }
            );
        }
    }
    out
}

/// Latencies of the events, sorted (ns).
pub fn sorted_latencies<'a>(events: impl Iterator<Item = &'a TxnEvent>) -> Vec<u64> {
    let mut v: Vec<u64> = events.map(|e| e.latency_ns).collect();
    v.sort_unstable();
    v
}

/// BenchBase's "Latency Distribution" object (microseconds) of sorted latencies in ns.
pub fn latency_distribution(sorted: &[u64]) -> Value {
    let mean = if sorted.is_empty() {
        0.0
    } else {
        sorted.iter().map(|&x| x as f64).sum::<f64>() / sorted.len() as f64
    };
    json!({
        "Minimum Latency (microseconds)": us(sorted.first().copied().unwrap_or(0)),
        "25th Percentile Latency (microseconds)": us(pct(sorted, 0.25)),
        "Median Latency (microseconds)": us(pct(sorted, 0.5)),
        "Average Latency (microseconds)": r3(mean / 1000.0),
        "75th Percentile Latency (microseconds)": us(pct(sorted, 0.75)),
        "90th Percentile Latency (microseconds)": us(pct(sorted, 0.9)),
        "95th Percentile Latency (microseconds)": us(pct(sorted, 0.95)),
        "99th Percentile Latency (microseconds)": us(pct(sorted, 0.99)),
        "Maximum Latency (microseconds)": us(sorted.last().copied().unwrap_or(0)),
    })
}

/// BenchBase's summary names for one run: throughput counts every finished transaction,
/// goodput the committed (successful) ones, over `seconds`.
pub fn benchbase(events: &[TxnEvent], seconds: f64) -> Map<String, Value> {
    let rate = |x: usize| {
        if seconds > 0.0 {
            r3(x as f64 / seconds)
        } else {
            0.0
        }
    };
    let mut m = Map::new();
    m.insert(
        "Throughput (requests/second)".into(),
        json!(rate(events.len())),
    );
    m.insert(
        "Goodput (requests/second)".into(),
        json!(rate(events.iter().filter(|e| e.committed).count())),
    );
    m.insert(
        "Latency Distribution".into(),
        latency_distribution(&sorted_latencies(events.iter())),
    );
    m
}

/// BenchBase's summary names for one direction (`read` or `write`) of a fio job's JSON (`fio
/// --output-format=json --percentile_list=25:50:75:90:95:99`): fio's IOPS as throughput and
/// goodput (fio counts completed I/Os only), its completion latencies (`clat_ns`, from fio's
/// log-linear histogram) in microseconds. `None` when the job has no such figures.
pub fn benchbase_of_fio(side: &Value) -> Option<Map<String, Value>> {
    let iops = side["iops"].as_f64()?;
    let clat = &side["clat_ns"];
    let p = |q: &str| {
        clat["percentile"][format!("{q}.000000")]
            .as_f64()
            .map(|ns| r3(ns / 1000.0))
    };
    let ns = |k: &str| clat[k].as_f64().map(|ns| r3(ns / 1000.0));
    let mut m = Map::new();
    m.insert("Throughput (requests/second)".into(), json!(r3(iops)));
    m.insert("Goodput (requests/second)".into(), json!(r3(iops)));
    m.insert(
        "Latency Distribution".into(),
        json!({
            "Minimum Latency (microseconds)": ns("min")?,
            "25th Percentile Latency (microseconds)": p("25")?,
            "Median Latency (microseconds)": p("50")?,
            "Average Latency (microseconds)": ns("mean")?,
            "75th Percentile Latency (microseconds)": p("75")?,
            "90th Percentile Latency (microseconds)": p("90")?,
            "95th Percentile Latency (microseconds)": p("95")?,
            "99th Percentile Latency (microseconds)": p("99")?,
            "Maximum Latency (microseconds)": ns("max")?,
        }),
    );
    Some(m)
}

/// Writes `summary.json`: `today` (the verb's JSON) with `extra` keys added at the top level.
pub fn write_summary(
    dir: &Path,
    today: &impl serde::Serialize,
    extra: Map<String, Value>,
) -> anyhow::Result<()> {
    let mut v = serde_json::to_value(today)?;
    if let Value::Object(o) = &mut v {
        o.extend(extra);
    }
    write(
        dir,
        "summary.json",
        &format!("{}\n", serde_json::to_string_pretty(&v)?),
    )
}

/// Writes `samples.csv` and, when the plan asks for it, `raw.csv` of a verb's transaction
/// traces, each row labeled with the trace's `labels` under the columns `label_cols`; `types`
/// names the kit's transaction types.
pub fn write_txn_series(
    plan: &Plan,
    traces: &[Trace],
    label_cols: &[&str],
    types: &[&str],
) -> anyhow::Result<()> {
    write(
        &plan.dir,
        "samples.csv",
        &samples_csv(traces, label_cols, Unit::Txn),
    )?;
    if plan.raw {
        write(
            &plan.dir,
            "raw.csv",
            &raw_csv(traces, label_cols, types, "commit"),
        )?;
    }
    Ok(())
}

/// Writes one file of the result directory (invariant 2).
pub fn write(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    crate::output::write_atomic(&dir.join(name), text.as_bytes())?;
    Ok(())
}

/// The summary keys every result directory's `summary.json` carries besides the verb's JSON.
pub fn common_keys(
    benchmark: &str,
    scalefactor: f64,
    terminals: u32,
    plan: &Plan,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("Benchmark Type".into(), json!(benchmark));
    m.insert("scalefactor".into(), json!(scalefactor));
    m.insert("terminals".into(), json!(terminals));
    m.insert(
        "results".into(),
        json!({
            "format": "noftl-results-1",
            "sample_window_s": plan.window_ns as f64 / 1e9,
            "files": if plan.raw { json!(["summary.json", "samples.csv", "raw.csv"]) } else { json!(["summary.json", "samples.csv"]) },
        }),
    );
    m
}

/// fio's percentiles of completion latency (`clat_ns.percentile`), as fio names them.
const FIO_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// One direction of a fio job (`read`, `write` or `trim`) from its requests' sorted latencies.
fn fio_direction(sorted: &[u64], bytes_per_request: u64, elapsed_ns: u64) -> Value {
    let n = sorted.len() as u64;
    let secs = elapsed_ns as f64 / 1e9;
    let io_bytes = n * bytes_per_request;
    let mean = if n == 0 {
        0.0
    } else {
        sorted.iter().map(|&x| x as f64).sum::<f64>() / n as f64
    };
    let var = if n > 1 {
        sorted
            .iter()
            .map(|&x| (x as f64 - mean).powi(2))
            .sum::<f64>()
            / (n - 1) as f64
    } else {
        0.0
    };
    let mut pcts = Map::new();
    for p in FIO_PERCENTILES {
        pcts.insert(format!("{p:.6}"), json!(pct(sorted, p / 100.0)));
    }
    let stats = |with_pcts: bool| {
        let mut m = json!({
            "min": sorted.first().copied().unwrap_or(0),
            "max": sorted.last().copied().unwrap_or(0),
            "mean": r3(mean),
            "stddev": r3(var.sqrt()),
            "N": n,
        });
        if with_pcts && n > 0 {
            m["percentile"] = Value::Object(pcts.clone());
        }
        m
    };
    let rate = |x: f64| if secs > 0.0 { r3(x / secs) } else { 0.0 };
    json!({
        "io_bytes": io_bytes,
        "io_kbytes": io_bytes / 1024,
        "bw_bytes": rate(io_bytes as f64).round() as u64,
        "bw": rate(io_bytes as f64 / 1024.0).round() as u64,
        "iops": rate(n as f64),
        "runtime": (elapsed_ns as f64 / 1e6).round() as u64,
        "total_ios": n,
        "short_ios": 0,
        "drop_ios": 0,
        // In this emulator a request is submitted when a queue slot frees: completion latency
        // and total latency are the same, submission latency is 0.
        "slat_ns": { "min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": n },
        "clat_ns": stats(true),
        "lat_ns": stats(false),
    })
}

/// A fio-shaped JSON document (`fio --output-format=json`'s layout, one job) of the requests
/// (`kind` 0 read, 1 write, 2 trim), with the verb's own JSON under `noftl`.
pub fn fio_json(
    events: &[TxnEvent],
    bytes_per_request: u64,
    elapsed_ns: u64,
    options: Value,
    noftl: Value,
) -> Value {
    let dir = |k: u8| {
        let sorted = sorted_latencies(events.iter().filter(|e| e.kind == k));
        fio_direction(&sorted, bytes_per_request, elapsed_ns)
    };
    json!({
        "fio version": concat!("noftl-", env!("CARGO_PKG_VERSION")),
        "global options": {},
        "jobs": [{
            "jobname": "noftl-io",
            "groupid": 0,
            "error": 0,
            "job options": options,
            "read": dir(0),
            "write": dir(1),
            "trim": dir(2),
            "job_runtime": (elapsed_ns as f64 / 1e6).round() as u64,
        }],
        "noftl": noftl,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(start: u64, lat: u64, ok: bool) -> TxnEvent {
        TxnEvent {
            start_ns: start,
            latency_ns: lat,
            kind: 0,
            committed: ok,
        }
    }

    #[test]
    fn every_event_lands_in_one_window() {
        let m = |t| Mark {
            t_ns: t,
            flash_programs: t / 10,
            ..Mark::default()
        };
        let t = Trace {
            labels: vec![],
            marks: vec![m(100), m(1_100), m(2_100), m(2_500)],
            events: vec![
                ev(100, 50, true),
                ev(150, 950, true),
                ev(1_100, 1, false),
                ev(2_000, 500, true),
            ],
        };
        let csv = samples_csv(&[t], &[], Unit::Txn);
        let rows: Vec<Vec<&str>> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect())
            .collect();
        assert_eq!(rows.len(), 3);
        let n: u64 = rows.iter().map(|r| r[2].parse::<u64>().unwrap()).sum();
        assert_eq!(n, 4);
        assert_eq!(
            rows[0][2], "2",
            "ends at 150 and 1100 are in the first window"
        );
        assert_eq!(rows[1][3], "0", "the rollback is not committed");
        let programs: u64 = rows.iter().map(|r| r[11].parse::<u64>().unwrap()).sum();
        assert_eq!(programs, 250 - 10);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(pct(&v, 0.5), 50);
        assert_eq!(pct(&v, 0.99), 99);
        assert_eq!(pct(&v, 1.0), 100);
        assert_eq!(pct(&[], 0.5), 0);
    }
}
