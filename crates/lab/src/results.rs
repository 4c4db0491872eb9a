//! Result directories (`--results DIR` on `bench`, `compare`, `ipa compare`, `iaa compare`,
//! `io` and `fs bench`), in BenchBase's layout so that its readers take them unchanged: files
//! named `<bench>_<yyyy-MM-dd_HH-mm-ss>.<kind>` (`summary.json` with the run's JSON and every
//! key of BenchBase's summary, `samples.csv`, `results.csv`, `results.<Type>.csv`, `raw.csv`
//! with `--raw`, `params.json`; for `io` also `fio.json`, fio's JSON layout), BenchBase's
//! columns first and ours (flash counters, labels) after them. Names, units and the choices
//! where BenchBase's definitions and ours differ: docs/results.md.
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
//! 3. In virtual time the files are a function of the command (and of `SOURCE_DATE_EPOCH`): no
//!    wall-clock figure in them. BenchBase's wall-clock timestamps are the virtual clock read
//!    from a fixed epoch (`SOURCE_DATE_EPOCH` when set, else 1970-01-01T00:00:00Z) at which the
//!    command started; only `fs bench`, which runs on the wall clock, stamps the real time.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{bail, Context};
use serde_json::{json, Map, Value};
use storage::sched::TxnEvent;

/// The layout's name, in `summary.json`'s `results.format`.
pub const FORMAT: &str = "noftl-results-2";

static VERSION: OnceLock<String> = OnceLock::new();

thread_local! {
    /// The command line of the verb running on this thread (the dashboard runs one per thread).
    static COMMAND: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Records the program's version for every result directory of this process (the CLI's
/// `--version` string; the lab does not know the program above it).
pub fn set_version(version: &str) {
    let _ = VERSION.set(version.to_string());
}

/// Records the command line (without the program's name) of the verb this thread runs, as
/// `noftl ARGS`, each argument quoted for a POSIX shell where it needs it.
pub fn set_command<S: AsRef<str>>(args: &[S]) {
    let mut c = String::from("noftl");
    for a in args {
        c.push(' ');
        c.push_str(&shell_quote(a.as_ref()));
    }
    COMMAND.with(|x| *x.borrow_mut() = Some(c));
}

fn shell_quote(a: &str) -> String {
    let plain = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,%+@".contains(c));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

fn version() -> String {
    VERSION
        .get()
        .cloned()
        .unwrap_or_else(|| format!("lab {}", env!("CARGO_PKG_VERSION")))
}

fn command() -> Option<String> {
    COMMAND.with(|x| x.borrow().clone())
}

/// The epoch of a run's timestamps in ms, and where it came from: `SOURCE_DATE_EPOCH` (whole
/// seconds, the reproducible-builds convention), else the Unix epoch.
fn fixed_epoch() -> anyhow::Result<(i64, &'static str)> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => {
            let s: i64 = v.trim().parse().with_context(|| {
                format!("SOURCE_DATE_EPOCH must be whole seconds since 1970-01-01 UTC, not {v:?}")
            })?;
            if !(0..=253_402_300_799).contains(&s) {
                bail!("SOURCE_DATE_EPOCH {s} is outside 1970..9999");
            }
            Ok((s * 1000, "SOURCE_DATE_EPOCH"))
        }
        Err(_) => Ok((0, "unix-epoch")),
    }
}

/// A result directory about to be written.
#[derive(Clone, Debug)]
pub struct Plan {
    pub dir: PathBuf,
    pub window_ns: u64,
    pub raw: bool,
    /// The program's version (`set_version`).
    pub version: String,
    /// The command line (`set_command`), if the caller recorded one.
    pub command: Option<String>,
    /// When the command started, in ms since 1970 (UTC): the fixed epoch in virtual time.
    pub started_ms: i64,
    /// Where `started_ms` comes from: `unix-epoch`, `SOURCE_DATE_EPOCH` or `wall-clock`.
    pub epoch: &'static str,
}

impl Plan {
    /// The plan of a result directory `dir` with samples every `sample_window` (a duration such
    /// as 100ms or 1s), checked before any work: the directory is created and must take files.
    pub fn new(dir: &Path, sample_window: &str, raw: bool) -> anyhow::Result<Plan> {
        let window_ns =
            crate::units::parse_duration_ns(sample_window).context("--sample-window")?;
        let (started_ms, epoch) = fixed_epoch()?;
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the result directory {}", dir.display()))?;
        crate::output::check_writable(&dir.join("summary.json"))?;
        Ok(Plan {
            dir: dir.to_path_buf(),
            window_ns,
            raw,
            version: version(),
            command: command(),
            started_ms,
            epoch,
        })
    }

    /// The plan of a run on the wall clock (`fs bench`): its timestamps are real, from now
    /// (unless `SOURCE_DATE_EPOCH` fixes them).
    pub fn on_wall_clock(mut self) -> Plan {
        if self.epoch == "unix-epoch" {
            self.started_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            self.epoch = "wall-clock";
        }
        self
    }

    /// The files' common name: BenchBase's `<bench>_<yyyy-MM-dd_HH-mm-ss>` (UTC).
    pub fn base(&self, bench: &str) -> String {
        let t = civil(self.started_ms);
        format!(
            "{bench}_{:04}-{:02}-{:02}_{:02}-{:02}-{:02}",
            t.0, t.1, t.2, t.3, t.4, t.5
        )
    }

    /// `started_ms` in RFC 3339 (UTC, seconds).
    pub fn started_at(&self) -> String {
        let t = civil(self.started_ms);
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            t.0, t.1, t.2, t.3, t.4, t.5
        )
    }
}

/// (year, month, day, hour, minute, second) of ms since 1970 (UTC), by the days-to-civil
/// algorithm of the proleptic Gregorian calendar (H. Hinnant's, for days >= 0).
fn civil(ms: i64) -> (i64, i64, i64, i64, i64, i64) {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Where a result directory's file of `kind` (`summary.json`, `samples.csv`, `raw.csv`, ...)
/// is: the one named `*.<kind>` (BenchBase's layout; the last by name if there are several, the
/// latest timestamp), else `<kind>` itself (directories written before format 2).
pub fn find(dir: &Path, kind: &str) -> Option<PathBuf> {
    let suffix = format!(".{kind}");
    let mut named: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(&suffix) && n.len() > suffix.len())
        })
        .collect();
    named.sort();
    named
        .pop()
        .or_else(|| Some(dir.join(kind)).filter(|p| p.is_file()))
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
    /// terminal's `events`, taken), in terminal order, each with its terminal's index as its
    /// worker.
    pub fn of_terminals(
        labels: Vec<String>,
        marks: Vec<Mark>,
        events: impl IntoIterator<Item = Option<Vec<TxnEvent>>>,
    ) -> Trace {
        let mut all = Vec::new();
        for (worker, evs) in events.into_iter().enumerate() {
            let worker = u32::try_from(worker).unwrap_or(u32::MAX);
            all.extend(evs.into_iter().flatten().map(|e| TxnEvent { worker, ..e }));
        }
        Trace {
            labels,
            marks,
            events: all,
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
    /// A request of `kind` from queue slot `worker`, submitted at `start_ns`, done at `done_ns`.
    #[inline]
    pub fn event(&mut self, start_ns: u64, done_ns: u64, kind: u8, worker: u32) {
        self.trace.events.push(TxnEvent {
            start_ns,
            latency_ns: done_ns.saturating_sub(start_ns).max(1),
            worker,
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

/// A latency as BenchBase records it (`LatencyRecord`): whole microseconds, rounded.
fn bb_us(ns: u64) -> i64 {
    i64::try_from(ns.saturating_add(500) / 1000).unwrap_or(i64::MAX)
}

/// BenchBase's `DistributionStatistics` of latencies in whole microseconds: the count, the
/// values at its quantiles 0, .25, .5, .75, .9, .95, .99 and 1 (element `(int)(q * n)` of the
/// sorted values, clamped to the last; not interpolated), and the mean; -1 for each when there
/// are none (as BenchBase writes an empty window).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Dist {
    count: usize,
    at: [i64; 8],
    mean: f64,
}

const BB_QUANTILES: [f64; 8] = [0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0];

impl Dist {
    fn of(mut us: Vec<i64>) -> Dist {
        if us.is_empty() {
            return Dist {
                count: 0,
                at: [-1; 8],
                mean: -1.0,
            };
        }
        us.sort_unstable();
        let n = us.len();
        let mut at = [0; 8];
        for (a, q) in at.iter_mut().zip(BB_QUANTILES) {
            *a = us[((q * n as f64) as usize).min(n - 1)];
        }
        let mean = us.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        Dist { count: n, at, mean }
    }

    fn of_events<'a>(events: impl Iterator<Item = &'a TxnEvent>) -> Dist {
        Dist::of(events.map(|e| bb_us(e.latency_ns)).collect())
    }

    /// BenchBase's "Latency Distribution" object (`toMap`: integers, the mean truncated).
    fn to_map(self) -> Value {
        let a = self.at;
        json!({
            "Minimum Latency (microseconds)": a[0],
            "25th Percentile Latency (microseconds)": a[1],
            "Median Latency (microseconds)": a[2],
            "Average Latency (microseconds)": self.mean as i64,
            "75th Percentile Latency (microseconds)": a[3],
            "90th Percentile Latency (microseconds)": a[4],
            "95th Percentile Latency (microseconds)": a[5],
            "99th Percentile Latency (microseconds)": a[6],
            "Maximum Latency (microseconds)": a[7],
        })
    }
}

fn r3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

/// Seconds of `ns` as a CSV field: an integer when whole (BenchBase's `%d`), else a decimal.
fn secs_field(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000_000) {
        (ns / 1_000_000_000).to_string()
    } else {
        (ns as f64 / 1e9).to_string()
    }
}

/// Which of BenchBase's per-window files a series is written as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Series {
    /// `samples.csv` (`ResultWriter.writeSamples`): counts and latencies in whole microseconds.
    Samples,
    /// `results.csv` (`writeResults`): latencies in milliseconds, with `tp (req/s) scaled`.
    Results,
    /// `results.<Type>.csv`: `Results` of the transactions of one type (the kit's index), with
    /// no flash columns (flash operations have no transaction type).
    ResultsOf(u8),
}

const SAMPLES_COLUMNS: &str = "Time (seconds),Requests,Throughput (requests/second),Minimum Latency (microseconds),25th Percentile Latency (microseconds),Median Latency (microseconds),Average Latency (microseconds),75th Percentile Latency (microseconds),90th Percentile Latency (microseconds),95th Percentile Latency (microseconds),99th Percentile Latency (microseconds),Maximum Latency (microseconds)";

const RESULTS_COLUMNS: &str = "Time (seconds),Throughput (requests/second),Average Latency (millisecond),Minimum Latency (millisecond),25th Percentile Latency (millisecond),Median Latency (millisecond),75th Percentile Latency (millisecond),90th Percentile Latency (millisecond),95th Percentile Latency (millisecond),99th Percentile Latency (millisecond),Maximum Latency (millisecond),tp (req/s) scaled";

/// A per-window file over the traces (invariant 1): one row per window of each trace,
/// BenchBase's columns first, then `window_s`, ours (flash counters; not per type), `partial`
/// and the label columns.
pub fn series_csv(
    traces: &[Trace],
    label_cols: &[&str],
    unit: Unit,
    series: Series,
    window_ns: u64,
) -> String {
    let mut out = String::new();
    out.push_str(match series {
        Series::Samples => SAMPLES_COLUMNS,
        _ => RESULTS_COLUMNS,
    });
    out.push_str(",window_s");
    let flash = !matches!(series, Series::ResultsOf(_));
    if flash {
        out.push_str(match unit {
            Unit::Txn => ",committed,goodput_tps",
            Unit::Io { .. } => ",mib_per_s",
        });
        out.push_str(",flash_reads,flash_programs,flash_erases,gc_migrations,free_blocks");
    }
    out.push_str(",partial");
    for c in label_cols {
        let _ = write!(out, ",{c}");
    }
    out.push('\n');
    for t in traces {
        let windows = t.marks.len().saturating_sub(1);
        if windows == 0 {
            continue;
        }
        // Bucket by end time: window k ends at marks[k + 1]; the last takes the rest.
        let mut buckets: Vec<Vec<&TxnEvent>> = vec![Vec::new(); windows];
        for e in &t.events {
            if let Series::ResultsOf(kind) = series {
                if e.kind != kind {
                    continue;
                }
            }
            let end = e.end_ns();
            let k = t.marks[1..]
                .partition_point(|m| m.t_ns < end)
                .min(windows - 1);
            buckets[k].push(e);
        }
        let start = t.start_ns();
        for (k, bucket) in buckets.iter().enumerate() {
            let (a, b) = (&t.marks[k], &t.marks[k + 1]);
            let len_ns = b.t_ns - a.t_ns;
            let secs = len_ns as f64 / 1e9;
            let rate = |x: u64| if secs > 0.0 { r3(x as f64 / secs) } else { 0.0 };
            let n = bucket.len() as u64;
            let d = Dist::of_events(bucket.iter().copied());
            let time = secs_field(a.t_ns - start);
            let at = d.at;
            match series {
                Series::Samples => {
                    let _ = write!(
                        out,
                        "{time},{n},{:.3},{},{},{},{},{},{},{},{},{}",
                        rate(n),
                        at[0],
                        at[1],
                        at[2],
                        d.mean as i64,
                        at[3],
                        at[4],
                        at[5],
                        at[6],
                        at[7]
                    );
                }
                _ => {
                    let _ = write!(out, "{time},{:.3},{:.3}", rate(n), d.mean / 1e3);
                    for v in at {
                        let _ = write!(out, ",{:.3}", v as f64 / 1e3);
                    }
                    // Java's `%.3f` of 1e3 / 0: a window whose mean rounds to 0 us.
                    let scaled = 1e3 / d.mean;
                    if scaled.is_infinite() {
                        out.push_str(",Infinity");
                    } else {
                        let _ = write!(out, ",{scaled:.3}");
                    }
                }
            }
            let _ = write!(out, ",{secs}");
            if flash {
                match unit {
                    Unit::Txn => {
                        let ok = bucket.iter().filter(|e| e.committed).count() as u64;
                        let _ = write!(out, ",{ok},{}", rate(ok));
                    }
                    Unit::Io { bytes_per_request } => {
                        let mib = rate(n) * bytes_per_request as f64 / f64::from(1u32 << 20);
                        let _ = write!(out, ",{}", r3(mib));
                    }
                }
                let _ = write!(
                    out,
                    ",{},{},{},{},{}",
                    b.flash_reads - a.flash_reads,
                    b.flash_programs - a.flash_programs,
                    b.flash_erases - a.flash_erases,
                    b.gc_migrations.saturating_sub(a.gc_migrations),
                    b.free_blocks.map_or(String::new(), |f| f.to_string()),
                );
            }
            let _ = write!(out, ",{}", u8::from(len_ns < window_ns));
            for l in &t.labels {
                let _ = write!(out, ",{l}");
            }
            out.push('\n');
        }
    }
    out
}

/// `raw.csv` (`ResultWriter.writeRaw`): one row per event, BenchBase's columns (the type's
/// index from 1 and its name `types[kind]`, the start in seconds since 1970 on the run's
/// clock, the latency in whole microseconds, the worker, the phase 0), then ours: start and
/// latency in exact microseconds from the measured window's start, the outcome, the labels.
pub fn raw_csv(
    traces: &[Trace],
    label_cols: &[&str],
    types: &[&str],
    ok_word: &str,
    epoch_ms: i64,
) -> String {
    let mut out = String::from("Transaction Type Index,Transaction Name,Start Time (microseconds),Latency (microseconds),Worker Id (start number),Phase Id (index in config file),start_us,latency_us,outcome");
    for c in label_cols {
        let _ = write!(out, ",{c}");
    }
    out.push('\n');
    let epoch_us = epoch_ms.saturating_mul(1000);
    for t in traces {
        let start = t.start_ns();
        for e in &t.events {
            let at_us = epoch_us.saturating_add(bb_us(e.start_ns));
            let _ = write!(
                out,
                "{},{},{}.{:06},{},{},0,{},{},{}",
                u32::from(e.kind) + 1,
                types.get(usize::from(e.kind)).copied().unwrap_or("?"),
                at_us.div_euclid(1_000_000),
                at_us.rem_euclid(1_000_000),
                bb_us(e.latency_ns),
                e.worker,
                e.start_ns.saturating_sub(start) as f64 / 1e3,
                e.latency_ns as f64 / 1e3,
                if e.committed { ok_word } else { "rollback" }
            );
            for l in &t.labels {
                let _ = write!(out, ",{l}");
            }
            out.push('\n');
        }
    }
    out
}

/// BenchBase's figures of one measured run (or of several, pooled): `Measured Requests`,
/// `Elapsed Time (nanoseconds)`, the latency distribution, throughput (every finished
/// transaction or request) and goodput (the committed or successful ones) over `elapsed_ns`.
pub fn benchbase(events: &[TxnEvent], elapsed_ns: u64) -> Map<String, Value> {
    let rate = |x: usize| {
        if elapsed_ns > 0 {
            r3(x as f64 * 1e9 / elapsed_ns as f64)
        } else {
            0.0
        }
    };
    let mut m = Map::new();
    m.insert("Measured Requests".into(), json!(events.len()));
    m.insert("Elapsed Time (nanoseconds)".into(), json!(elapsed_ns));
    m.insert(
        "Latency Distribution".into(),
        Dist::of_events(events.iter()).to_map(),
    );
    m.insert(
        "Throughput (requests/second)".into(),
        json!(rate(events.len())),
    );
    m.insert(
        "Goodput (requests/second)".into(),
        json!(rate(events.iter().filter(|e| e.committed).count())),
    );
    m
}

/// The measured time of traces run one after another (each on its own device's clock).
pub fn elapsed_ns(traces: &[Trace]) -> u64 {
    traces.iter().map(|t| t.end_ns() - t.start_ns()).sum()
}

/// BenchBase's summary names for one direction (`read` or `write`) of a fio job's JSON (`fio
/// --output-format=json --percentile_list=25:50:75:90:95:99`): fio's IOPS as throughput and
/// goodput (fio counts completed I/Os only), its completion latencies (`clat_ns`, from fio's
/// log-linear histogram) in whole microseconds, its I/Os and runtime. `None` when the job has
/// no such figures.
pub fn benchbase_of_fio(side: &Value) -> Option<Map<String, Value>> {
    let iops = side["iops"].as_f64()?;
    let clat = &side["clat_ns"];
    let us = |ns: f64| (ns / 1000.0).round() as i64;
    let p = |q: &str| clat["percentile"][format!("{q}.000000")].as_f64().map(us);
    let ns = |k: &str| clat[k].as_f64().map(us);
    let mut m = Map::new();
    m.insert(
        "Measured Requests".into(),
        json!(side["total_ios"].as_u64()?),
    );
    m.insert(
        "Elapsed Time (nanoseconds)".into(),
        json!(side["runtime"].as_u64()? * 1_000_000),
    );
    m.insert(
        "Latency Distribution".into(),
        json!({
            "Minimum Latency (microseconds)": ns("min")?,
            "25th Percentile Latency (microseconds)": p("25")?,
            "Median Latency (microseconds)": p("50")?,
            "Average Latency (microseconds)": clat["mean"].as_f64().map(|x| (x / 1000.0) as i64)?,
            "75th Percentile Latency (microseconds)": p("75")?,
            "90th Percentile Latency (microseconds)": p("90")?,
            "95th Percentile Latency (microseconds)": p("95")?,
            "99th Percentile Latency (microseconds)": p("99")?,
            "Maximum Latency (microseconds)": ns("max")?,
        }),
    );
    m.insert("Throughput (requests/second)".into(), json!(r3(iops)));
    m.insert("Goodput (requests/second)".into(), json!(r3(iops)));
    Some(m)
}

/// What a result directory holds besides the verb's JSON: BenchBase's description of the run
/// (its `Benchmark Type`, `scalefactor`, `terminals`, `isolation`) and the measured runs.
#[derive(Clone, Debug)]
pub struct Contents<'a> {
    /// BenchBase's `Benchmark Type`, and the files' name.
    pub bench: &'a str,
    /// BenchBase's `scalefactor` (a string there; None: the run has no single one).
    pub scalefactor: Option<&'a str>,
    /// BenchBase's `terminals` (workers: terminals, or io's queue slots).
    pub terminals: Option<u32>,
    /// BenchBase's `isolation`: the engine's, None outside the engine.
    pub isolation: Option<&'a str>,
    /// The measured runs, one after another (their labels under `label_cols`).
    pub traces: &'a [Trace],
    pub label_cols: &'a [&'a str],
    /// The kit's transaction names, by `TxnEvent::kind`.
    pub types: &'a [&'a str],
    pub unit: Unit,
    /// The device configuration the command asked for, for `params.json`.
    pub device: Option<Value>,
}

/// The isolation of the engine's transactions in BenchBase's (JDBC's) name: strict two-phase
/// locking with table locks against phantoms (docs/storage.md) is serializable.
pub const ENGINE_ISOLATION: &str = "TRANSACTION_SERIALIZABLE";

/// The files of one result directory as they are written, by BenchBase's name.
struct Files<'a> {
    plan: &'a Plan,
    base: String,
    names: Vec<String>,
}

impl Files<'_> {
    fn write(&mut self, kind: &str, text: &str) -> anyhow::Result<()> {
        let name = format!("{}.{kind}", self.base);
        write(&self.plan.dir, &name, text)?;
        self.names.push(name);
        Ok(())
    }
}

/// Writes a verb's result directory: the per-window files and (with --raw) `raw.csv` of the
/// traces, `extra` files (`(kind, text)`: io's `fio.json`), `params.json`, and last
/// `summary.json`: `doc` (the verb's JSON) with BenchBase's summary keys (`top`, else over the
/// traces pooled) and ours (`version`, `command`, `started_at`, `results`) at the top level.
pub fn write_dir(
    plan: &Plan,
    doc: &impl serde::Serialize,
    c: &Contents,
    top: Option<Map<String, Value>>,
    extra: &[(&str, String)],
) -> anyhow::Result<()> {
    let mut f = Files {
        plan,
        base: plan.base(c.bench),
        names: Vec::new(),
    };
    if !c.traces.is_empty() {
        f.write(
            "samples.csv",
            &series_csv(
                c.traces,
                c.label_cols,
                c.unit,
                Series::Samples,
                plan.window_ns,
            ),
        )?;
        f.write(
            "results.csv",
            &series_csv(
                c.traces,
                c.label_cols,
                c.unit,
                Series::Results,
                plan.window_ns,
            ),
        )?;
        for (k, name) in c.types.iter().enumerate() {
            let k = u8::try_from(k).unwrap_or(u8::MAX);
            if c.traces
                .iter()
                .any(|t| t.events.iter().any(|e| e.kind == k))
            {
                let series = Series::ResultsOf(k);
                f.write(
                    &format!("results.{name}.csv"),
                    &series_csv(c.traces, c.label_cols, c.unit, series, plan.window_ns),
                )?;
            }
        }
        if plan.raw {
            let ok = if c.unit == Unit::Txn { "commit" } else { "ok" };
            f.write(
                "raw.csv",
                &raw_csv(c.traces, c.label_cols, c.types, ok, plan.started_ms),
            )?;
        }
    }
    for (kind, text) in extra {
        f.write(kind, text)?;
    }
    let provenance = json!({
        "version": plan.version,
        "command": plan.command,
        "started_at": plan.started_at(),
    });
    let mut params = provenance.clone();
    params["epoch"] = json!(plan.epoch);
    params["sample_window_s"] = json!(plan.window_ns as f64 / 1e9);
    params["raw"] = json!(plan.raw);
    if let Some(d) = &c.device {
        params["device"] = d.clone();
    }
    f.write(
        "params.json",
        &format!("{}\n", serde_json::to_string_pretty(&params)?),
    )?;
    let figures = top.unwrap_or_else(|| {
        let events: Vec<TxnEvent> = c
            .traces
            .iter()
            .flat_map(|t| t.events.iter().copied())
            .collect();
        benchbase(&events, elapsed_ns(c.traces))
    });
    let elapsed = figures["Elapsed Time (nanoseconds)"].as_u64().unwrap_or(0);
    f.write("config.xml", &config_xml(plan, c, elapsed))?;
    let summary_name = format!("{}.summary.json", f.base);
    f.names.push(summary_name.clone());
    let mut v = serde_json::to_value(doc)?;
    let Value::Object(o) = &mut v else {
        bail!("a result's JSON is an object");
    };
    o.extend(summary_keys(plan, c, figures));
    if let Value::Object(p) = provenance {
        o.extend(p);
    }
    o.insert(
        "results".into(),
        json!({
            "format": FORMAT,
            "sample_window_s": plan.window_ns as f64 / 1e9,
            "epoch": plan.epoch,
            "files": f.names,
        }),
    );
    write(
        &plan.dir,
        &summary_name,
        &format!("{}\n", serde_json::to_string_pretty(&v)?),
    )
}

/// The run's configuration as BenchBase records it (`<base>.config.xml`: its experiment file,
/// which BenchBase's own checks read for `works/work/time`): the summary's `isolation`,
/// `scalefactor` and `terminals`, one work phase of the measured time in whole seconds (run
/// as fast as possible: `unlimited`), and the command line that stands for the rest.
fn config_xml(plan: &Plan, c: &Contents, elapsed_ns: u64) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut x = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n<parameters>\n",
    );
    let mut el = |name: &str, v: Option<String>| {
        if let Some(v) = v {
            let _ = writeln!(x, "    <{name}>{}</{name}>", esc(&v));
        }
    };
    el("noftl_version", Some(plan.version.clone()));
    el("noftl_command", plan.command.clone());
    el("isolation", c.isolation.map(str::to_string));
    el("scalefactor", c.scalefactor.map(str::to_string));
    el("terminals", c.terminals.map(|t| t.to_string()));
    let _ = write!(
        x,
        "    <works>\n        <work>\n            <time>{}</time>\n            <rate>unlimited</rate>\n        </work>\n    </works>\n</parameters>\n",
        elapsed_ns / 1_000_000_000
    );
    x
}

/// BenchBase's summary keys (`ResultWriter.writeSummary`) with BenchBase's types: timestamps
/// from the run's epoch on its clock (the first trace's start, plus the measured time).
fn summary_keys(plan: &Plan, c: &Contents, figures: Map<String, Value>) -> Map<String, Value> {
    let first_ns = c.traces.first().map_or(0, Trace::start_ns);
    let start_ms = plan.started_ms + i64::try_from(first_ns / 1_000_000).unwrap_or(0);
    let elapsed = figures["Elapsed Time (nanoseconds)"].as_u64().unwrap_or(0);
    let mut m = Map::new();
    m.insert("Start timestamp (milliseconds)".into(), json!(start_ms));
    m.insert(
        "Current Timestamp (milliseconds)".into(),
        json!(start_ms + i64::try_from(elapsed / 1_000_000).unwrap_or(0)),
    );
    m.insert("DBMS Type".into(), json!("NOFTL"));
    m.insert("DBMS Version".into(), json!(plan.version));
    m.insert("Benchmark Type".into(), json!(c.bench));
    m.insert("Final State".into(), json!("EXIT"));
    m.insert("isolation".into(), json!(c.isolation));
    m.insert("scalefactor".into(), json!(c.scalefactor));
    m.insert(
        "terminals".into(),
        json!(c.terminals.map(|t| t.to_string())),
    );
    m.extend(figures);
    m
}

/// Writes one file of the result directory (invariant 2).
pub fn write(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    crate::output::write_atomic(&dir.join(name), text.as_bytes())?;
    Ok(())
}

/// Latencies of the events, sorted (ns).
pub fn sorted_latencies<'a>(events: impl Iterator<Item = &'a TxnEvent>) -> Vec<u64> {
    let mut v: Vec<u64> = events.map(|e| e.latency_ns).collect();
    v.sort_unstable();
    v
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// fio's percentiles of completion latency (`clat_ns.percentile`), as fio names them.
const FIO_PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// fio's latency histogram (stat.h): values below 2^7 exactly, above in groups of 64 buckets per
/// power of two, 29 groups; a bucket is named by the mean of its range (`plat_idx_to_val`).
const FIO_PLAT_BITS: u32 = 6;
const FIO_PLAT_VAL: u64 = 1 << FIO_PLAT_BITS;
const FIO_PLAT_NR: u64 = 29 * FIO_PLAT_VAL;

fn fio_plat_idx(ns: u64) -> u64 {
    let msb = if ns == 0 {
        0
    } else {
        63 - u64::from(ns.leading_zeros())
    };
    if msb <= u64::from(FIO_PLAT_BITS) {
        return ns;
    }
    let error_bits = msb - u64::from(FIO_PLAT_BITS);
    let base = (error_bits + 1) << FIO_PLAT_BITS;
    let offset = (FIO_PLAT_VAL - 1) & (ns >> error_bits);
    (base + offset).min(FIO_PLAT_NR - 1)
}

fn fio_plat_val(idx: u64) -> u64 {
    if idx < (FIO_PLAT_VAL << 1) {
        return idx;
    }
    let error_bits = (idx >> FIO_PLAT_BITS) - 1;
    let base = 1u64 << (error_bits + u64::from(FIO_PLAT_BITS));
    let k = idx % FIO_PLAT_VAL;
    base + ((k as f64 + 0.5) * (1u64 << error_bits) as f64) as u64
}

/// fio's interval for bandwidth and IOPS samples (`bw_avg_time`, `iops_avg_time`: 500 ms).
const FIO_AVG_NS: u64 = 500_000_000;

/// `min`, `max`, `mean`, sample standard deviation and count of per-interval figures, as fio
/// reports its bandwidth and IOPS samples (all 0 without a whole interval).
fn fio_samples(per_interval: &[f64]) -> (u64, u64, f64, f64, usize) {
    let n = per_interval.len();
    if n == 0 {
        return (0, 0, 0.0, 0.0, 0);
    }
    let mean = per_interval.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        per_interval.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    let min = per_interval.iter().copied().fold(f64::INFINITY, f64::min);
    let max = per_interval.iter().copied().fold(0.0, f64::max);
    (min as u64, max as u64, r3(mean), r3(var.sqrt()), n)
}

/// `min`, `max`, `mean`, `stddev`, `N` of sorted latencies (ns).
fn fio_lat(sorted: &[u64]) -> Value {
    let n = sorted.len() as u64;
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
    json!({
        "min": sorted.first().copied().unwrap_or(0),
        "max": sorted.last().copied().unwrap_or(0),
        "mean": r3(mean),
        "stddev": r3(var.sqrt()),
        "N": n,
    })
}

/// One direction of a fio job (`read`, `write` or `trim`) from its requests (`start_ns` the
/// measured window's start).
fn fio_direction(
    events: &[&TxnEvent],
    bytes_per_request: u64,
    start_ns: u64,
    elapsed_ns: u64,
) -> Value {
    let sorted = sorted_latencies(events.iter().copied());
    let n = sorted.len() as u64;
    let secs = elapsed_ns as f64 / 1e9;
    let io_bytes = n * bytes_per_request;
    let rate = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
    let mut clat = fio_lat(&sorted);
    if n > 0 {
        let mut pcts = Map::new();
        for p in FIO_PERCENTILES {
            pcts.insert(format!("{p:.6}"), json!(pct(&sorted, p / 100.0)));
        }
        clat["percentile"] = Value::Object(pcts);
        // json+'s histogram: fio's bucket value -> requests (fio_jsonplus_clat2csv reads it).
        let mut bins: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
        for &ns in &sorted {
            *bins.entry(fio_plat_val(fio_plat_idx(ns))).or_default() += 1;
        }
        clat["bins"] = Value::Object(
            bins.iter()
                .map(|(v, c)| (v.to_string(), json!(c)))
                .collect(),
        );
    }
    // Bandwidth and IOPS per whole 500 ms interval of the measured window, by completion.
    let intervals = (elapsed_ns / FIO_AVG_NS) as usize;
    let mut ios = vec![0u64; intervals];
    for e in events {
        let k = (e.end_ns().saturating_sub(start_ns) / FIO_AVG_NS) as usize;
        if k < intervals {
            ios[k] += 1;
        }
    }
    let per_s = 1e9 / FIO_AVG_NS as f64;
    let bw: Vec<f64> = ios
        .iter()
        .map(|&k| (k * bytes_per_request) as f64 / 1024.0 * per_s)
        .collect();
    let iops: Vec<f64> = ios.iter().map(|&k| k as f64 * per_s).collect();
    let (bmin, bmax, bmean, bdev, bn) = fio_samples(if n > 0 { &bw } else { &[] });
    let (imin, imax, imean, idev, inn) = fio_samples(if n > 0 { &iops } else { &[] });
    let bw_bytes = rate(io_bytes as f64).round() as u64;
    json!({
        "io_bytes": io_bytes,
        "io_kbytes": io_bytes / 1024,
        "bw_bytes": bw_bytes,
        "bw": bw_bytes / 1024,
        "iops": r3(rate(n as f64)),
        "runtime": (elapsed_ns as f64 / 1e6).round() as u64,
        "total_ios": n,
        "short_ios": 0,
        "drop_ios": 0,
        // In this emulator a request is submitted when a queue slot frees: completion latency
        // and total latency are the same, submission latency is 0.
        "slat_ns": { "min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0 },
        "clat_ns": clat,
        "lat_ns": fio_lat(&sorted),
        "bw_min": bmin,
        "bw_max": bmax,
        // One job: the whole group's bandwidth.
        "bw_agg": if bn > 0 { 100.0 } else { 0.0 },
        "bw_mean": bmean,
        "bw_dev": bdev,
        "bw_samples": bn,
        "iops_min": imin,
        "iops_max": imax,
        "iops_mean": imean,
        "iops_stddev": idev,
        "iops_samples": inn,
    })
}

/// fio's distribution of a figure over its buckets, in percent of `total` (`stat_calc_dist`).
fn fio_dist(names: &[&str], counts: &[u64], total: u64) -> Value {
    Value::Object(
        names
            .iter()
            .zip(counts)
            .map(|(n, &c)| {
                let p = if total == 0 {
                    0.0
                } else {
                    (c as f64 * 1e8 / total as f64).round() / 1e6
                };
                ((*n).to_string(), json!(p))
            })
            .collect(),
    )
}

/// The queue depth each request found when it was submitted, itself included (fio's
/// `cur_depth` at submission), by fio's `iodepth_level` buckets 1, 2, 4, ... 32, >= 64.
fn fio_depths(events: &[TxnEvent]) -> [u64; 7] {
    let mut starts: Vec<u64> = events.iter().map(|e| e.start_ns).collect();
    let mut ends: Vec<u64> = events.iter().map(TxnEvent::end_ns).collect();
    starts.sort_unstable();
    ends.sort_unstable();
    let mut out = [0u64; 7];
    for (i, &s) in starts.iter().enumerate() {
        // Started at or before s (those at the same instant count in order) minus ended by s.
        let depth = (i + 1).saturating_sub(ends.partition_point(|&e| e <= s)) as u64;
        let k = match depth {
            0 | 1 => 0,
            2..=3 => 1,
            4..=7 => 2,
            8..=15 => 3,
            16..=31 => 4,
            32..=63 => 5,
            _ => 6,
        };
        out[k] += 1;
    }
    out
}

/// fio's latency buckets (`io_u_mark_latency`): under 1 us by ns, under 1 ms by us, then by ms;
/// each bucket named by its upper bound.
fn fio_latency_buckets(events: &[TxnEvent]) -> ([u64; 10], [u64; 10], [u64; 12]) {
    const EDGES: [u64; 10] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];
    let (mut n, mut u, mut m) = ([0u64; 10], [0u64; 10], [0u64; 12]);
    let bucket = |v: u64| EDGES.iter().position(|&e| v < e).unwrap_or(EDGES.len() - 1);
    for e in events {
        let ns = e.latency_ns;
        if ns < 1_000 {
            n[bucket(ns)] += 1;
        } else if ns < 1_000_000 {
            u[bucket(ns / 1_000)] += 1;
        } else {
            let ms = ns / 1_000_000;
            m[if ms >= 2000 {
                11
            } else if ms >= 1000 {
                10
            } else {
                bucket(ms)
            }] += 1;
        }
    }
    (n, u, m)
}

/// C's `ctime` of ms since 1970 (UTC), without the newline: fio's `time`.
fn ctime(ms: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, mo, d, h, mi, s) = civil(ms);
    let weekday = DAYS[ms.div_euclid(86_400_000).rem_euclid(7) as usize];
    format!(
        "{weekday} {} {d:2} {h:02}:{mi:02}:{s:02} {y}",
        MONTHS[(mo - 1) as usize]
    )
}

/// What fio.json says about the job besides its requests.
#[derive(Clone, Debug)]
pub struct FioJob {
    /// The job's name (`noftl-io`, or a job file's section).
    pub name: String,
    /// `job options`, as strings like fio's.
    pub options: Value,
    pub bytes_per_request: u64,
    /// The measured window: its start on the run's clock and its length.
    pub start_ns: u64,
    pub elapsed_ns: u64,
    /// Requests kept outstanding (iodepth x numjobs).
    pub depth: u32,
}

/// A fio-shaped JSON document (`fio --output-format=json+`'s layout, every key fio 3.33 writes
/// for a job, its jobs reported as one group) of the requests (`kind` 0 read, 1 write, 2 trim),
/// with the verb's own JSON under `noftl`; timestamps on the plan's clock (invariant 3).
pub fn fio_json(plan: &Plan, events: &[TxnEvent], job: &FioJob, noftl: Value) -> Value {
    let dir = |k: u8| {
        let evs: Vec<&TxnEvent> = events.iter().filter(|e| e.kind == k).collect();
        fio_direction(&evs, job.bytes_per_request, job.start_ns, job.elapsed_ns)
    };
    let total = events.len() as u64;
    let (lat_n, lat_u, lat_m) = fio_latency_buckets(events);
    let edges = [
        "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000",
    ];
    let ms_edges = [
        "2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000",
    ];
    // Requests go one per submission and complete one at a time: fio's bucket "4" (1 to 4).
    let one_at_a_time = [0, total, 0, 0, 0, 0, 0];
    let submit_names = ["0", "4", "8", "16", "32", "64", ">=64"];
    let at_ms = plan.started_ms + i64::try_from(job.start_ns / 1_000_000).unwrap_or(0);
    let runtime_ms = (job.elapsed_ns as f64 / 1e6).round() as u64;
    json!({
        "fio version": format!("noftl-{}", plan.version),
        "timestamp": at_ms.div_euclid(1000),
        "timestamp_ms": at_ms,
        "time": ctime(at_ms),
        "global options": {},
        "jobs": [{
            "jobname": job.name,
            "groupid": 0,
            "error": 0,
            "eta": 0,
            "elapsed": runtime_ms.div_ceil(1000),
            "job options": job.options,
            "read": dir(0),
            "write": dir(1),
            "trim": dir(2),
            "sync": {
                "total_ios": 0,
                "lat_ns": { "min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0 },
            },
            "job_runtime": runtime_ms,
            // No host CPU is modelled for the submitting process.
            "usr_cpu": 0.0,
            "sys_cpu": 0.0,
            "ctx": 0,
            "majf": 0,
            "minf": 0,
            "iodepth_level": fio_dist(&["1", "2", "4", "8", "16", "32", ">=64"], &fio_depths(events), total),
            "iodepth_submit": fio_dist(&submit_names, &one_at_a_time, total),
            "iodepth_complete": fio_dist(&submit_names, &one_at_a_time, total),
            "latency_ns": fio_dist(&edges, &lat_n, total),
            "latency_us": fio_dist(&edges, &lat_u, total),
            "latency_ms": fio_dist(&ms_edges, &lat_m, total),
            "latency_depth": job.depth,
            "latency_target": 0,
            "latency_percentile": 100.0,
            "latency_window": 0,
        }],
        "disk_util": [],
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
            worker: 0,
            kind: 0,
            committed: ok,
        }
    }

    fn window_trace() -> Trace {
        let m = |t| Mark {
            t_ns: t,
            flash_programs: t / 10,
            ..Mark::default()
        };
        Trace {
            labels: vec![],
            marks: vec![m(100), m(1_100), m(2_100), m(2_500)],
            events: vec![
                ev(100, 50, true),
                ev(150, 950, true),
                ev(1_100, 1, false),
                ev(2_000, 500, true),
            ],
        }
    }

    fn rows(csv: &str) -> (Vec<&str>, Vec<Vec<&str>>) {
        let mut lines = csv.lines();
        let h = lines.next().unwrap().split(',').collect();
        (h, lines.map(|l| l.split(',').collect()).collect())
    }

    #[test]
    fn every_event_lands_in_one_window() {
        let csv = series_csv(&[window_trace()], &[], Unit::Txn, Series::Samples, 1_000);
        let (h, rows) = rows(&csv);
        let col = |name: &str| h.iter().position(|c| *c == name).unwrap();
        assert_eq!(rows.len(), 3);
        let n: u64 = rows
            .iter()
            .map(|r| r[col("Requests")].parse::<u64>().unwrap())
            .sum();
        assert_eq!(n, 4);
        assert_eq!(
            rows[0][col("Requests")],
            "2",
            "ends at 150 and 1100 are in the first window"
        );
        assert_eq!(
            rows[1][col("committed")],
            "0",
            "the rollback is not committed"
        );
        let programs: u64 = rows
            .iter()
            .map(|r| r[col("flash_programs")].parse::<u64>().unwrap())
            .sum();
        assert_eq!(programs, 250 - 10);
        let partial: Vec<&str> = rows.iter().map(|r| r[col("partial")]).collect();
        assert_eq!(partial, ["0", "0", "1"], "only the last window is short");
        assert_eq!(
            rows[1][col("Minimum Latency (microseconds)")],
            "0",
            "1 ns rounds to 0 us"
        );
    }

    #[test]
    fn benchbase_columns_come_first() {
        let t = [window_trace()];
        let s = series_csv(&t, &["storage"], Unit::Txn, Series::Samples, 1_000);
        assert!(s.starts_with(SAMPLES_COLUMNS), "{s}");
        let r = series_csv(&t, &[], Unit::Txn, Series::Results, 1_000);
        assert!(r.starts_with(RESULTS_COLUMNS), "{r}");
        let one = series_csv(&t, &[], Unit::Txn, Series::ResultsOf(0), 1_000);
        assert!(!one.contains("flash_reads"), "no flash columns per type");
        let raw = raw_csv(&t, &[], &["tpcb"], "commit", 1_000);
        let (h, rows) = rows(&raw);
        assert_eq!(h[..2], ["Transaction Type Index", "Transaction Name"]);
        assert_eq!(rows[0][..6], ["1", "tpcb", "1.000000", "0", "0", "0"]);
    }

    #[test]
    fn distribution_picks_as_benchbase_does() {
        // DistributionStatistics: element (int)(q * n) of the sorted values, not nearest rank.
        let d = Dist::of((1..=10).collect());
        assert_eq!(d.at, [1, 3, 6, 8, 10, 10, 10, 10]);
        assert_eq!(d.mean, 5.5);
        assert_eq!(Dist::of(vec![]).at, [-1; 8]);
        assert_eq!(bb_us(1_499), 1);
        assert_eq!(bb_us(1_500), 2);
    }

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(civil(0), (1970, 1, 1, 0, 0, 0));
        // 2000-02-29T12:34:56Z, a leap day.
        assert_eq!(civil(951_827_696_000), (2000, 2, 29, 12, 34, 56));
        assert_eq!(civil(1_767_225_599_000), (2025, 12, 31, 23, 59, 59));
        assert_eq!(secs_field(2_000_000_000), "2");
        assert_eq!(secs_field(100_000_000), "0.1");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("--set=x.y=1"), "--set=x.y=1");
    }

    #[test]
    fn fio_buckets_are_fios() {
        // A bucket value of fio 3.33's json+ output (45824 ns) maps to itself.
        assert_eq!(fio_plat_val(fio_plat_idx(45_824)), 45_824);
        assert_eq!(fio_plat_idx(45_824), 665);
        assert_eq!(fio_plat_val(fio_plat_idx(100)), 100, "exact below 128");
        for ns in [1_000u64, 123_456, 9_876_543_210] {
            let v = fio_plat_val(fio_plat_idx(ns));
            assert!(
                (v as f64 - ns as f64).abs() / ns as f64 <= 1.0 / 64.0,
                "{ns}: {v}"
            );
        }
        assert_eq!(ctime(0), "Thu Jan  1 00:00:00 1970");
        assert_eq!(ctime(1_795_830_046_830), "Sat Nov 28 01:40:46 2026");
        let ev = |s, l| TxnEvent {
            start_ns: s,
            latency_ns: l,
            worker: 0,
            kind: 1,
            committed: true,
        };
        // Two in flight, then one alone.
        assert_eq!(fio_depths(&[ev(0, 10), ev(0, 10), ev(20, 5)])[..2], [2, 1]);
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
