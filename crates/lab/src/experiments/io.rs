//! The `io` experiment: a fio-like workload in virtual time, on the raw flash (target `raw`) or
//! on any block-device target (an FTL, or the plain memory disk).
//!
//! Input generation is kept apart from execution: the request stream depends only on the
//! pattern, sizes and seed, and the closed-loop driver (nand::workload) decides when each request
//! is submitted. Only the measured phase is reported: with `precondition` a block target is first
//! preconditioned as the SNIA SSS PTS describes (a sequential fill of the user capacity, then
//! random writes in rounds until the steady-state rule of `crate::steady` holds, or its cap),
//! and the counters are taken as differences across the workload.
//!
//! The JSON result holds virtual-time figures only, so the same spec gives byte-identical JSON;
//! wall-clock speed of the emulator is the caller's to measure (the CLI's human output).
//! Progress goes through the caller's [`Progress`], so this module draws nothing.

use anyhow::{bail, Context};
use ftl::{BlockDevice, FtlReport, GcCounts, HostCounts, LOGICAL_PAGE_BYTES};
use nand::workload::{run_closed_loop, run_closed_loop_until, LoopResult, RawPattern, RawWorkload};
use nand::{FlashCounts, LatencySummary, Nand, Nanos};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;
use storage::measure::{self, Busy, Consistency};

use crate::distribution::{Distribution, Sampler};
use crate::limits::{self, MemoryPlan};
use crate::steady::{self, Round, SteadyState, Writes};
use crate::targets::TargetSpec;

/// One `io` run (the CLI's `noftl io` flags).
#[derive(Debug, Clone)]
pub struct Spec {
    /// Where the requests go: `raw` (the flash itself) or a block target (an FTL of
    /// `ftl::options::KINDS`, or `memdisk`), on its device with its FTL knobs and image file.
    pub target: TargetSpec,
    /// Access pattern: read | randread | write (raw and block targets); randwrite | randrw | trim
    /// (block targets). None: randread on raw, randwrite on block targets.
    pub rw: Option<String>,
    /// Request size in bytes (a multiple of the flash page on raw, of 4 KiB on block targets).
    pub bs_bytes: u64,
    /// Requests kept outstanding (queue depth).
    pub qd: u32,
    /// Number of requests (None: `io_bytes / bs_bytes` rounded up, or 100,000 without either).
    pub ops: Option<u64>,
    /// Total bytes to transfer instead of a request count (`ops` wins when both are given).
    pub io_bytes: Option<u64>,
    /// Seed of the request stream.
    pub seed: u64,
    /// Block targets: fill the device sequentially, then random writes of `bs_bytes` at `qd` in
    /// rounds until steady (`crate::steady`), then run and report the workload only (raw:
    /// program every page once first).
    pub precondition: bool,
    /// randrw: percentage of reads (0..=100).
    pub rwmixread_percent: u32,
    /// Virtual or none: device time only. Real (raw target, QD 1): each request also takes its
    /// modelled time on the wall clock, and the clock's error is reported.
    pub clock: nand::ClockMode,
    /// Write a result directory (crate::results: summary.json, fio.json, samples.csv, ...);
    /// virtual time only.
    pub results: Option<crate::results::Plan>,
    /// Block targets, random patterns: where the requests land (fio's `random_distribution`).
    pub distribution: Distribution,
    /// Block targets: the region the requests cover starts here (fio's `offset`; a multiple of
    /// 4 KiB) ...
    pub offset_bytes: u64,
    /// ... and is this long (fio's `size`; None: to the device's end).
    pub region_bytes: Option<u64>,
    /// Block targets: independent request streams (fio's `numjobs`), each `qd` deep, job j
    /// seeded with `seed + j`, all on the same region (fio's clones).
    pub numjobs: u32,
    /// Stop submitting after this much virtual time of the measured phase (fio's `runtime`);
    /// with neither `ops` nor `io_bytes`, time alone ends the run (fio's `time_based`).
    pub runtime_ns: Option<u64>,
    /// Block targets: run the workload this long first, unmeasured (fio's `ramp_time`).
    pub ramp_ns: u64,
    /// A job file's name and options as written, for fio.json (None: the flags).
    pub job: Option<JobInfo>,
    /// Replay a block I/O trace instead of generating requests (run by `super::replay::run`).
    pub replay: Option<crate::trace::Replay>,
}

/// A fio job file's identity in the fio-shaped output: its job's name and its options, each as
/// the file gave it (`[global]` merged in).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobInfo {
    pub name: String,
    pub options: Vec<(String, String)>,
}

impl Default for Spec {
    /// The CLI's defaults: 100,000 random 4 KiB writes at QD 1 on the page FTL, seed 1.
    fn default() -> Self {
        Spec {
            target: TargetSpec {
                target: "page".to_string(),
                device: crate::device::DeviceSpec::default(),
                knobs: crate::targets::FtlKnobs::default(),
                image: None,
            },
            rw: None,
            bs_bytes: 4096,
            qd: 1,
            ops: None,
            io_bytes: None,
            seed: 1,
            precondition: false,
            rwmixread_percent: 50,
            clock: nand::ClockMode::Virtual,
            results: None,
            distribution: Distribution::Uniform,
            offset_bytes: 0,
            region_bytes: None,
            numjobs: 1,
            runtime_ns: None,
            ramp_ns: 0,
            job: None,
            replay: None,
        }
    }
}

/// What a run tells while it goes, for a progress bar: each phase (a precondition, then the
/// measured requests) begins with its number of steps, reports the steps done, and ends. `tick`
/// comes once per step, so an implementation should be cheap and may skip most of them.
pub trait Progress {
    /// A phase of `total` steps begins.
    fn begin(&mut self, total: u64);
    /// `done` of the phase's steps are done.
    fn tick(&mut self, done: u64);
    /// The phase has ended.
    fn end(&mut self);
}

/// No progress reports.
#[derive(Debug)]
pub struct Quiet;

impl Progress for Quiet {
    fn begin(&mut self, _total: u64) {}
    fn tick(&mut self, _done: u64) {}
    fn end(&mut self) {}
}

/// A latency distribution in microseconds.
#[derive(Debug, Serialize)]
pub struct LatencyUs {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// The FTL's own figures over the measured window (block targets).
#[derive(Debug, Serialize)]
pub struct FtlInfo {
    pub name: String,
    pub mapping_bytes: u64,
    pub cmt_hit_ratio: Option<f64>,
    pub translation_reads: u64,
    pub translation_writes: u64,
    pub controller_busy_us: f64,
    /// The part of `controller_busy_us` on the host's CPU (dftl-orig runs in the host's kernel).
    pub host_cpu_us: f64,
    /// Multi-plane programs (one page per plane of a die, one array time; docs/ftl.md).
    pub multi_plane_programs: u64,
}

/// The result of one run: the stable field names other tools read.
#[derive(Debug, Serialize)]
pub struct IoResult {
    pub target: String,
    pub device: String,
    pub rw: String,
    pub bs: u64,
    pub qd: u32,
    /// Request streams, each `qd` deep (fio's numjobs; written when more than one).
    #[serde(skip_serializing_if = "is_one")]
    pub numjobs: u32,
    /// Where random requests landed, when not uniformly (fio's random_distribution).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    pub seed: u64,
    pub ops: u64,
    pub iops: f64,
    pub mib_per_s: f64,
    pub virtual_seconds: f64,
    pub latency_us: LatencyUs,
    pub flash: FlashCounts,
    /// Data reads and programs per page type (lower/middle/upper on MLC/TLC).
    pub by_page_type: Vec<nand::PageTypeCounts>,
    /// The run checked against physical bounds from its own counters (`storage::measure`).
    pub consistency: Consistency,
    pub energy_joules: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_error_us: Option<LatencyUs>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gc: Option<GcCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waf: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ftl: Option<FtlInfo>,
    /// `--slc-cache`: the pSLC write cache over the measured window (`waf` includes its folds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slc_cache: Option<ftl::block_device::SlcCacheReport>,
    /// Whether the device was in steady state when the measured requests began (`crate::steady`).
    pub steady_state: SteadyState,
    /// Block targets with `precondition`: what the preconditioning did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precondition: Option<Preconditioned>,
    /// `--replay`: the trace and how it was replayed (`bs` is then the mean request size).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<crate::trace::ReplayInfo>,
}

/// The preconditioning of a block target (SSS PTS): the sequential fill, then the rounds.
#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct Preconditioned {
    /// Logical pages the sequential fill wrote (the user capacity).
    pub fill_pages: u64,
    /// Random writes of `bs` per round, and the rounds' throughput and WAF.
    pub round_requests: u64,
    pub rounds: Vec<crate::steady::Round>,
    /// Pages GC copied during the preconditioning (before the measured requests).
    pub gc_migrations: u64,
}

impl IoResult {
    /// The fields every target reports, from a measured closed-loop run.
    #[allow(clippy::too_many_arguments)]
    fn measured(
        spec: &Spec,
        target: String,
        device: String,
        rw: String,
        l: &LoopResult,
        flash: FlashCounts,
        energy_joules: f64,
        consistency: Consistency,
    ) -> Self {
        IoResult {
            target,
            device,
            rw,
            bs: spec.bs_bytes,
            qd: spec.qd,
            numjobs: spec.numjobs,
            distribution: (spec.distribution != Distribution::Uniform)
                .then(|| spec.distribution.to_string()),
            seed: spec.seed,
            ops: l.ops,
            iops: l.ops_per_second(),
            mib_per_s: l.ops_per_second() * spec.bs_bytes as f64 / f64::from(1 << 20),
            virtual_seconds: l.elapsed_ns() as f64 / 1e9,
            latency_us: summary(l),
            flash,
            by_page_type: Vec::new(),
            consistency,
            energy_joules,
            clock_error_us: None,
            host: None,
            gc: None,
            waf: None,
            ftl: None,
            slc_cache: None,
            steady_state: SteadyState::skipped(0.0),
            precondition: None,
            replay: None,
        }
    }
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn summary(l: &LoopResult) -> LatencyUs {
    let s = LatencySummary::from_ns_histogram(&l.latency_ns);
    LatencyUs {
        mean: s.mean,
        p50: s.p50,
        p99: s.p99,
        max: s.max,
    }
}

/// The deepest queue accepted (NVMe's largest queue).
const MAX_QD: u64 = 65_536;
/// The largest request accepted: 1 GiB (Linux splits block requests far below this).
const MAX_BS_BYTES: u64 = 1 << 30;

impl Spec {
    /// The number of requests the run makes, checked against the limits (queue depth, request
    /// size, the memory of the device and the request buffers) before any work.
    pub fn requests(&self) -> anyhow::Result<u64> {
        if let Some(r) = &self.replay {
            return self.replay_requests(r);
        }
        let ops = match (self.ops, self.io_bytes, self.runtime_ns) {
            (Some(n), _, _) => n,
            (None, Some(bytes), _) => bytes.div_ceil(self.bs_bytes.max(1)),
            // Time alone ends the run.
            (None, None, Some(_)) => u64::MAX,
            (None, None, None) => 100_000,
        };
        if ops == 0 {
            bail!("--ops (or --io-bytes) must ask for at least one request");
        }
        if self.runtime_ns == Some(0) {
            bail!("runtime must be longer than 0");
        }
        limits::in_range(
            "--qd",
            u64::from(self.qd),
            1,
            MAX_QD,
            "requests in flight at once (NVMe's deepest queue is 65,536)",
        )?;
        limits::in_range(
            "numjobs x iodepth",
            u64::from(self.qd) * u64::from(self.numjobs),
            1,
            MAX_QD,
            "requests in flight at once over every job (NVMe's deepest queue is 65,536)",
        )?;
        limits::in_range(
            "--bs",
            self.bs_bytes,
            1,
            MAX_BS_BYTES,
            "bytes per request (a larger transfer is split into requests by the host anyway)",
        )?;
        // Each request in flight holds a buffer of --bs bytes.
        let mut plan = MemoryPlan::new();
        let in_flight = u64::from(self.qd) * u64::from(self.numjobs);
        plan.device(&self.target.device.load()?).add(
            format!("{in_flight} request buffers of {} bytes", self.bs_bytes),
            in_flight.saturating_mul(self.bs_bytes),
        );
        plan.check("use a smaller --qd or --bs")?;
        Ok(ops)
    }
}

impl Spec {
    /// The number of requests of a replay, after the checks it needs before any work.
    fn replay_requests(&self, r: &crate::trace::Replay) -> anyhow::Result<u64> {
        if self.target.target == "raw" {
            bail!("--replay runs on block targets (an FTL or memdisk), not on the raw flash");
        }
        if self.results.is_some() {
            bail!(
                "--results with --replay is not supported yet: the result files assume one \
                 request size"
            );
        }
        if self.clock != nand::ClockMode::Virtual {
            bail!("--replay runs in virtual time");
        }
        limits::in_range(
            "--qd",
            u64::from(self.qd),
            1,
            MAX_QD,
            "requests in flight at once with --replay-pace afap",
        )?;
        Ok(r.trace.requests.len() as u64)
    }
}

/// Runs the workload of `spec` and, with `spec.results`, writes its result directory.
pub fn run(spec: &Spec, progress: &mut dyn Progress) -> anyhow::Result<IoResult> {
    let ops = spec.requests()?;
    let plan = spec.results.as_ref();
    let mut rec = None;
    if spec.replay.is_some() {
        bail!("a trace replays through experiments::replay::run");
    }
    let result = if spec.target.target == "raw" {
        run_raw(spec, ops, plan, &mut rec, progress)?
    } else {
        run_block(spec, ops, plan, &mut rec, progress)?
    };
    if let (Some(p), Some(trace)) = (plan, rec) {
        write_results(p, spec, &result, &trace)?;
    }
    Ok(result)
}

/// The result directory of `io` (crate::results): summary.json (with `iodepth`; BenchBase's
/// workers are the queue slots), fio.json, the per-window files and, with --raw, raw.csv.
fn write_results(
    p: &crate::results::Plan,
    spec: &Spec,
    res: &IoResult,
    trace: &crate::results::Trace,
) -> anyhow::Result<()> {
    use crate::results as r;
    use serde_json::json;
    let mut doc = serde_json::to_value(res)?;
    doc["iodepth"] = json!(spec.qd);
    let fio = r::fio_json(
        p,
        &trace.events,
        &r::FioJob {
            name: spec
                .job
                .as_ref()
                .map_or_else(|| "noftl-io".to_string(), |j| j.name.clone()),
            options: fio_options(spec, res),
            bytes_per_request: spec.bs_bytes,
            start_ns: trace.start_ns(),
            elapsed_ns: trace.end_ns() - trace.start_ns(),
            depth: spec.qd * spec.numjobs,
        },
        serde_json::to_value(res)?,
    );
    let top = r::benchbase(&trace.events, (res.virtual_seconds * 1e9).round() as u64);
    let c = r::Contents {
        bench: "io",
        scalefactor: None,
        terminals: Some(spec.qd * spec.numjobs),
        isolation: None,
        traces: std::slice::from_ref(trace),
        label_cols: &[],
        types: &["read", "write", "trim"],
        unit: r::Unit::Io {
            bytes_per_request: spec.bs_bytes,
        },
        device: spec
            .target
            .device
            .load()
            .ok()
            .and_then(|d| serde_json::to_value(d).ok()),
    };
    let fio = format!("{}\n", serde_json::to_string_pretty(&fio)?);
    r::write_dir(p, &doc, &c, Some(top), &[("fio.json", fio)])
}

/// fio.json's `job options`, strings as fio writes them: a job file's own options, else the
/// flags'; with `rw`, `iodepth` and `numjobs` always (fio-plot selects files by them) and
/// `ioengine` naming the target.
fn fio_options(spec: &Spec, res: &IoResult) -> serde_json::Value {
    let mut o = serde_json::Map::new();
    if let Some(j) = &spec.job {
        for (k, v) in &j.options {
            o.insert(k.clone(), v.clone().into());
        }
    } else {
        o.insert("bs".into(), spec.bs_bytes.to_string().into());
        o.insert("randseed".into(), spec.seed.to_string().into());
        if spec.distribution != Distribution::Uniform {
            o.insert(
                "random_distribution".into(),
                spec.distribution.to_string().into(),
            );
        }
    }
    // A job file's own spelling of its pattern (fio's `randtrim` is our `trim`) stays.
    o.entry("rw").or_insert_with(|| res.rw.clone().into());
    o.insert("iodepth".into(), spec.qd.to_string().into());
    o.insert("numjobs".into(), spec.numjobs.to_string().into());
    o.insert("ioengine".into(), format!("noftl-{}", res.target).into());
    serde_json::Value::Object(o)
}

/// The raw target: requests straight to the flash (after an optional fill of every page).
fn run_raw(
    spec: &Spec,
    ops: u64,
    plan: Option<&crate::results::Plan>,
    rec_out: &mut Option<crate::results::Trace>,
    progress: &mut dyn Progress,
) -> anyhow::Result<IoResult> {
    if spec.target.image.is_some() {
        bail!("--image is for block targets; the raw target runs on a fresh device");
    }
    if spec.distribution != Distribution::Uniform
        || spec.offset_bytes != 0
        || spec.region_bytes.is_some()
        || spec.numjobs != 1
        || spec.runtime_ns.is_some()
        || spec.ramp_ns != 0
    {
        bail!(
            "the raw target runs one uniform request stream over the whole flash: \
             --distribution and a job file's numjobs, offset, size, runtime and ramp_time are \
             for block targets"
        );
    }
    let rw = spec.rw.clone().unwrap_or_else(|| "randread".into());
    let pattern: RawPattern = rw.parse().map_err(anyhow::Error::msg)?;
    let cfg = spec.target.device.load()?;
    let mut nand = Nand::new(cfg)?;
    if spec.precondition {
        // Program every page once (stripe order, all dies busy) so that reads return real data.
        let mut fill = RawWorkload::new(
            &nand,
            RawPattern::Write,
            u64::from(nand.geometry().page_size_bytes),
            spec.seed ^ 0xF111,
        )
        .map_err(anyhow::Error::msg)?;
        let pages = nand.geometry().pages();
        let dies = nand.geometry().dies();
        progress.begin(pages);
        run_closed_loop(
            0,
            dies,
            pages,
            |_, _, at| fill.submit(&mut nand, at),
            |d| progress.tick(d),
        )
        .context("precondition failed")?;
        progress.end();
        nand.reset_stats();
    }
    let mut w =
        RawWorkload::new(&nand, pattern, spec.bs_bytes, spec.seed).map_err(anyhow::Error::msg)?;
    progress.begin(ops);
    let start = nand.now_ns();
    let busy_before = Busy::of_nand(Some(&nand));
    let energy_before = nand.report().energy.total_joules;
    let mut clock_error_us = None;
    let kind = u8::from(matches!(pattern, RawPattern::Write));
    let mut rec = plan.map(|p| {
        crate::results::Recorder::new(p.window_ns, crate::results::mark(start, Some(&nand), 0))
    });
    let l = match spec.clock {
        nand::ClockMode::Virtual | nand::ClockMode::None => run_closed_loop(
            start,
            spec.qd,
            ops,
            |_, slot, at| {
                if let Some(r) = rec.as_mut() {
                    if r.due(at) {
                        r.mark_until(at, |t| crate::results::mark(t, Some(&nand), 0));
                    }
                    let done = w.submit(&mut nand, at)?;
                    r.event(at, done, kind, slot);
                    return Ok(done);
                }
                w.submit(&mut nand, at)
            },
            |d| progress.tick(d),
        )
        .context("flash operation failed")?,
        nand::ClockMode::Real if plan.is_some() => {
            bail!("--results samples virtual time: it needs --clock virtual")
        }
        nand::ClockMode::Real => {
            if spec.qd != 1 {
                bail!("--clock real runs at QD 1 here (one thread waits per request); use noftl serve for concurrency");
            }
            let (l, err) = run_real_time(&mut nand, &mut w, ops, progress)?;
            clock_error_us = Some(err);
            l
        }
    };
    progress.end();
    if let Some(r) = rec {
        *rec_out = Some(r.finish(crate::results::mark(l.end_ns, Some(&nand), 0)));
    }
    let report = nand.report();
    let mut r = IoResult::measured(
        spec,
        "raw".into(),
        nand.config().name.clone(),
        rw,
        &l,
        report.flash,
        report.energy.total_joules - energy_before,
        check(spec.qd, &l, &busy_before, Some(&nand)),
    );
    r.by_page_type = report.by_page_type;
    r.clock_error_us = clock_error_us;
    r.steady_state = SteadyState::not_applicable(
        "raw flash: no flash management below the requests, nothing to settle",
        Writes::device_writes_of(Some(&nand)),
    );
    Ok(r)
}

/// Runs QD-1 requests on the wall clock: each is submitted at the real clock's now and waited
/// for until its modelled completion. Returns the modelled latencies and the clock's error
/// (actual minus modelled latency) in microseconds.
fn run_real_time(
    nand: &mut Nand,
    w: &mut RawWorkload,
    ops: u64,
    progress: &mut dyn Progress,
) -> anyhow::Result<(LoopResult, LatencyUs)> {
    let clock = nand::RealClock::new();
    // The device's virtual time must run on the wall clock: start it where the device stands.
    let offset = nand.now_ns();
    let mut error_ns = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)?;
    let mut negative = 0u64;
    let start = offset + clock.now_ns();
    let l = run_closed_loop(
        start,
        1,
        ops,
        |_, _, _| -> anyhow::Result<Nanos> {
            let at = offset + clock.now_ns();
            let done = w.submit(nand, at)?;
            clock.wait_until(done - offset);
            let actual = offset + clock.now_ns() - at;
            let modelled = done - at;
            match actual.checked_sub(modelled) {
                Some(e) => error_ns.record(e.max(1))?,
                None => negative += 1,
            }
            Ok(offset + clock.now_ns())
        },
        |d| progress.tick(d),
    )?;
    debug_assert_eq!(negative, 0, "wait_until never returns early");
    let us = |q: f64| error_ns.value_at_quantile(q) as f64 / 1000.0;
    Ok((
        l,
        LatencyUs {
            mean: error_ns.mean() / 1000.0,
            p50: us(0.5),
            p99: us(0.99),
            max: error_ns.max() as f64 / 1000.0,
        },
    ))
}

/// Block-device access patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockPattern {
    Read,
    Randread,
    Write,
    Randwrite,
    Randrw,
    Trim,
}

impl BlockPattern {
    fn parse(s: &str) -> anyhow::Result<Self> {
        Ok(match s {
            "read" => BlockPattern::Read,
            "randread" => BlockPattern::Randread,
            "write" => BlockPattern::Write,
            "randwrite" => BlockPattern::Randwrite,
            "randrw" => BlockPattern::Randrw,
            "trim" => BlockPattern::Trim,
            other => {
                bail!("unknown --rw '{other}' (read, randread, write, randwrite, randrw, trim)")
            }
        })
    }
}

/// The request stream of one job on a block target: what each request does, from the seed
/// alone, over the job's region.
struct BlockStream {
    pattern: BlockPattern,
    pages_per_request: u64,
    /// The region's first logical page.
    base_lpn: u64,
    /// Request-sized slots in the region.
    slots: u64,
    cursor: u64,
    sampler: Sampler,
    read_percent: u32,
}

#[derive(Clone, Copy)]
enum Req {
    Read(u64),
    Write(u64),
    Trim(u64),
}

impl BlockStream {
    fn next(&mut self) -> Req {
        let seq = |s: &mut Self| {
            let slot = s.cursor % s.slots;
            s.cursor += 1;
            s.base_lpn + slot * s.pages_per_request
        };
        let rand = |s: &mut Self| s.base_lpn + s.sampler.next_slot() * s.pages_per_request;
        match self.pattern {
            BlockPattern::Read => Req::Read(seq(self)),
            BlockPattern::Write => Req::Write(seq(self)),
            BlockPattern::Randread => Req::Read(rand(self)),
            BlockPattern::Randwrite => Req::Write(rand(self)),
            BlockPattern::Trim => Req::Trim(rand(self)),
            BlockPattern::Randrw => {
                let read = self.sampler.percent(self.read_percent);
                let lpn = rand(self);
                if read {
                    Req::Read(lpn)
                } else {
                    Req::Write(lpn)
                }
            }
        }
    }
}

/// The region of `spec` on a device of `capacity` logical pages: its first page and its pages.
fn region(spec: &Spec, capacity: u64) -> anyhow::Result<(u64, u64)> {
    let page = LOGICAL_PAGE_BYTES as u64;
    if !spec.offset_bytes.is_multiple_of(page) {
        bail!(
            "offset {} is not a multiple of {page} bytes",
            spec.offset_bytes
        );
    }
    let base = spec.offset_bytes / page;
    if base >= capacity {
        bail!(
            "offset {} is beyond the device ({} bytes)",
            spec.offset_bytes,
            capacity * page
        );
    }
    let pages = match spec.region_bytes {
        Some(b) => {
            if b == 0 || !b.is_multiple_of(page) {
                bail!("size {b} must be a positive multiple of {page} bytes");
            }
            if base + b / page > capacity {
                bail!(
                    "offset {} + size {b} runs past the device's end ({} bytes)",
                    spec.offset_bytes,
                    capacity * page
                );
            }
            b / page
        }
        None => capacity - base,
    };
    Ok((base, pages))
}

/// Issues one request to a block device at `at`: its completion and its kind (0 read, 1 write,
/// 2 trim).
fn issue(
    dev: &mut dyn BlockDevice,
    req: Req,
    at: Nanos,
    buf: &mut [u8],
    data: &[u8],
    pages_per_request: u64,
) -> Result<(Nanos, u8), ftl::FtlError> {
    Ok(match req {
        Req::Read(lpn) => (dev.read(at, lpn, buf)?, 0),
        Req::Write(lpn) => (dev.write(at, lpn, data, false)?, 1),
        Req::Trim(lpn) => (dev.trim(at, lpn, pages_per_request)?, 2),
    })
}

/// A block target (an FTL or the memory disk, `crate::targets`): the request stream of the
/// pattern and seed, after an optional sequential fill, its counters taken across the run.
fn run_block(
    spec: &Spec,
    ops: u64,
    plan: Option<&crate::results::Plan>,
    rec_out: &mut Option<crate::results::Trace>,
    progress: &mut dyn Progress,
) -> anyhow::Result<IoResult> {
    let rw = spec.rw.clone().unwrap_or_else(|| "randwrite".into());
    let pattern = BlockPattern::parse(&rw)?;
    if spec.clock != nand::ClockMode::Virtual {
        bail!("block targets run in virtual time here; noftl serve --clock real runs them on the wall clock");
    }
    if spec.bs_bytes == 0 || !spec.bs_bytes.is_multiple_of(LOGICAL_PAGE_BYTES as u64) {
        bail!("--bs must be a positive multiple of {LOGICAL_PAGE_BYTES} bytes on block targets");
    }
    if spec.rwmixread_percent > 100 {
        bail!("--rwmixread is a percentage (0..=100)");
    }
    let mut dev = crate::targets::build(&spec.target)?;
    let pages_per_request = spec.bs_bytes / LOGICAL_PAGE_BYTES as u64;
    let capacity = dev.capacity_pages();
    let (base_lpn, region_pages) = region(spec, capacity)?;
    if pages_per_request > region_pages {
        bail!(
            "--bs {} is larger than the region ({} pages)",
            spec.bs_bytes,
            region_pages
        );
    }
    let mut data = vec![0u8; spec.bs_bytes as usize];
    Xoshiro256PlusPlus::seed_from_u64(spec.seed ^ 0xDA7A).fill_bytes(&mut data);
    let mut buf = vec![0u8; spec.bs_bytes as usize];
    let mut now = 0;
    let mut preconditioned = None;
    let mut steady_state = SteadyState::skipped(0.0);
    if spec.precondition {
        let (end, p, s) = precondition(dev.as_mut(), spec, &data, progress)?;
        (now, preconditioned, steady_state) = (end, Some(p), s);
    }
    let slots = region_pages / pages_per_request;
    let mut streams: Vec<BlockStream> = (0..spec.numjobs)
        .map(|j| BlockStream {
            pattern,
            pages_per_request,
            base_lpn,
            slots,
            cursor: 0,
            sampler: Sampler::new(
                spec.distribution,
                slots,
                spec.seed.wrapping_add(u64::from(j)),
            ),
            read_percent: spec.rwmixread_percent,
        })
        .collect();
    // Queue slot s belongs to job s / qd.
    let depth = spec.qd * spec.numjobs;
    let job_of = |slot: u32| (slot / spec.qd) as usize;
    if spec.ramp_ns > 0 {
        // fio's ramp_time: the workload runs, unmeasured, then drains before the measured phase.
        let l = run_closed_loop_until(
            now,
            depth,
            u64::MAX,
            Some(now + spec.ramp_ns),
            |_, slot, at| {
                let req = streams[job_of(slot)].next();
                issue(dev.as_mut(), req, at, &mut buf, &data, pages_per_request).map(|r| r.0)
            },
            |_| {},
        )
        .with_context(|| format!("request to {} failed during ramp_time", dev.name()))?;
        now = l.end_ns;
    }
    let before = (
        dev.report(),
        flash_counts(dev.as_ref()),
        energy(dev.as_ref()),
        page_types(dev.as_ref()),
        Busy::of_nand(dev.nand()),
    );
    // Time alone ends the run (ops unbounded): no total to show.
    progress.begin(if ops == u64::MAX { 0 } else { ops });
    let gc_of = |d: &dyn BlockDevice| d.report().gc.migrations;
    let mut rec = plan.map(|p| {
        crate::results::Recorder::new(
            p.window_ns,
            crate::results::mark(now, dev.nand(), gc_of(dev.as_ref())),
        )
    });
    let l = run_closed_loop_until(
        now,
        depth,
        ops,
        spec.runtime_ns.map(|r| now + r),
        |_, slot, at| -> Result<Nanos, ftl::FtlError> {
            if let Some(r) = rec.as_mut() {
                if r.due(at) {
                    r.mark_until(at, |t| {
                        crate::results::mark(t, dev.nand(), gc_of(dev.as_ref()))
                    });
                }
            }
            let req = streams[job_of(slot)].next();
            let (done, kind) = issue(dev.as_mut(), req, at, &mut buf, &data, pages_per_request)?;
            if let Some(r) = rec.as_mut() {
                r.event(at, done, kind, slot);
            }
            Ok(done)
        },
        |d| progress.tick(d),
    )
    .with_context(|| format!("request to {} failed", dev.name()))?;
    progress.end();
    if let Some(r) = rec {
        *rec_out = Some(r.finish(crate::results::mark(
            l.end_ns,
            dev.nand(),
            gc_of(dev.as_ref()),
        )));
    }
    let after = dev.report();
    let flash = flash_counts(dev.as_ref()).saturating_sub(&before.1);
    let mut r = block_result(
        spec,
        rw,
        &l,
        &before.0,
        &after,
        flash,
        energy(dev.as_ref()) - before.2,
        check(spec.qd * spec.numjobs, &l, &before.4, dev.nand()),
        dev.as_ref(),
    );
    r.by_page_type = nand::PageTypeCounts::between(&before.3, &page_types(dev.as_ref()));
    r.steady_state = steady_state;
    r.precondition = preconditioned;
    Ok(r)
}

/// The run against the bounds of `storage::measure`: the dies and channels were busy at most
/// the window's length, and at most `in_flight` requests (`--qd`) were in flight on average (Little's law;
/// only the upper bound, since a run of a fixed count drains its queue at the end). The window
/// runs to the device's drain, not to the host's last completion: a write acknowledged from the
/// controller's write buffer is programmed after the host saw it complete, and its die time
/// belongs to the run.
pub(crate) fn check(
    in_flight: u32,
    l: &LoopResult,
    before: &Busy,
    nand: Option<&Nand>,
) -> Consistency {
    let end_ns = nand.map_or(l.end_ns, |n| n.now_ns().max(l.end_ns));
    measure::check(measure::Window {
        before,
        after: &Busy::of_nand(nand),
        elapsed_ns: end_ns - l.start_ns,
        terminals: in_flight,
        terminals_run_throughout: false,
        txns: l.ops,
        latency_sum_ns: l.latency_ns.mean() * l.ops as f64,
    })
}

pub(crate) fn page_types(dev: &dyn BlockDevice) -> Vec<nand::PageTypeCounts> {
    dev.nand()
        .map(|n| n.stats().page_type_counts())
        .unwrap_or_default()
}

/// Preconditioning as the SNIA SSS PTS describes it: the user capacity filled sequentially,
/// then random writes of the run's request size at its queue depth, in rounds of
/// `1 / PRECONDITION_ROUNDS_PER_CAPACITY` of the capacity, until the steady-state rule holds or
/// its cap (`crate::steady`). Returns the time it ended, what it did and the verdict.
fn precondition(
    dev: &mut dyn BlockDevice,
    spec: &Spec,
    data: &[u8],
    progress: &mut dyn Progress,
) -> anyhow::Result<(Nanos, Preconditioned, SteadyState)> {
    let mut now = fill(dev, data, progress)?;
    let pages_per_request = spec.bs_bytes / LOGICAL_PAGE_BYTES as u64;
    let slots = dev.capacity_pages() / pages_per_request;
    let round_requests = (slots / PRECONDITION_ROUNDS_PER_CAPACITY).max(1);
    let mut stream = BlockStream {
        pattern: BlockPattern::Randwrite,
        pages_per_request,
        base_lpn: 0,
        slots,
        cursor: 0,
        // SSS PTS preconditions with uniform random writes over the whole user capacity,
        // whatever the measured run's distribution and region.
        sampler: Sampler::new(
            crate::distribution::Distribution::Uniform,
            slots,
            spec.seed ^ PRECONDITION_SEED,
        ),
        read_percent: 0,
    };
    let gc0 = dev.report().gc.migrations;
    progress.begin(u64::from(steady::MAX_ROUNDS));
    let rounds = steady::until_steady(steady::MAX_ROUNDS, |k| {
        let w0 = Writes::of(dev.nand());
        let l = run_closed_loop(
            now,
            spec.qd,
            round_requests,
            |_, _, at| -> Result<Nanos, ftl::FtlError> {
                match stream.next() {
                    Req::Write(lpn) => dev.write(at, lpn, data, false),
                    _ => unreachable!("the preconditioning stream only writes"),
                }
            },
            |_| {},
        )
        .context("precondition write failed")?;
        now = l.end_ns;
        progress.tick(u64::from(k) + 1);
        Ok(Round {
            throughput: l.ops_per_second(),
            waf: Writes::of(dev.nand()).since(&w0).waf(),
        })
    })?;
    progress.end();
    let now = dev.flush(now)?;
    let steady_state = SteadyState::of(&rounds, Writes::device_writes_of(dev.nand()));
    let done = Preconditioned {
        fill_pages: dev.capacity_pages(),
        round_requests,
        rounds: rounds.samples,
        gc_migrations: dev.report().gc.migrations - gc0,
    };
    Ok((now, done, steady_state))
}

/// Rounds of random writes per user capacity in the preconditioning: 25 rounds (the cap) write
/// the capacity about three times over, and the five of the rule's window about 0.6 times, so
/// a greedy FTL's copies per write, which settle within one to two writes over after a
/// sequential fill, are judged over more than half a write over.
const PRECONDITION_ROUNDS_PER_CAPACITY: u64 = 8;
/// The preconditioning's requests draw other addresses than the measured run's.
const PRECONDITION_SEED: u64 = 0x0050_5245_434f_4e44;

/// Fills every logical page once, sequentially, in large requests (the first half of the
/// preconditioning; `--replay` uses it alone).
pub(crate) fn fill(
    dev: &mut dyn BlockDevice,
    pattern: &[u8],
    progress: &mut dyn Progress,
) -> anyhow::Result<Nanos> {
    let chunk_pages = 64u64;
    let mut chunk = vec![0u8; chunk_pages as usize * LOGICAL_PAGE_BYTES];
    for piece in chunk.chunks_mut(pattern.len()) {
        piece.copy_from_slice(&pattern[..piece.len()]);
    }
    let capacity = dev.capacity_pages();
    progress.begin(capacity.div_ceil(chunk_pages));
    let mut lpn = 0;
    let mut now = 0;
    let mut i = 0;
    while lpn < capacity {
        let n = chunk_pages.min(capacity - lpn);
        now = dev
            .write(now, lpn, &chunk[..n as usize * LOGICAL_PAGE_BYTES], false)
            .context("precondition write failed")?;
        lpn += n;
        i += 1;
        progress.tick(i);
    }
    progress.end();
    Ok(dev.flush(now)?)
}

pub(crate) fn flash_counts(dev: &dyn BlockDevice) -> FlashCounts {
    dev.nand()
        .map(|n| n.stats().flash_counts())
        .unwrap_or_default()
}

pub(crate) fn energy(dev: &dyn BlockDevice) -> f64 {
    dev.nand().map_or(0.0, |n| n.report().energy.total_joules)
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn block_result(
    spec: &Spec,
    rw: String,
    l: &LoopResult,
    before: &FtlReport,
    after: &FtlReport,
    flash: FlashCounts,
    energy_joules: f64,
    consistency: Consistency,
    dev: &dyn BlockDevice,
) -> IoResult {
    let host = HostCounts {
        reads: after.host.reads - before.host.reads,
        writes: after.host.writes - before.host.writes,
        trims: after.host.trims - before.host.trims,
        flushes: after.host.flushes - before.host.flushes,
    };
    let gc = GcCounts {
        migrations: after.gc.migrations - before.gc.migrations,
        erases: after.gc.erases - before.gc.erases,
        wl_migrations: after.gc.wl_migrations - before.gc.wl_migrations,
        wl_erases: after.gc.wl_erases - before.gc.wl_erases,
    };
    // Bytes programmed over bytes the host wrote: a program of a flash page of several 4 KiB
    // logical pages writes that many of them, full or not (ftl block_device.rs).
    let units = dev
        .nand()
        .map_or(1, |n| u64::from(ftl::space::units_per_page(n.geometry())));
    let waf = if host.writes == 0 {
        0.0
    } else {
        ((flash.programs + flash.partial_programs) * units) as f64 / host.writes as f64
    };
    let mut r = IoResult::measured(
        spec,
        spec.target.target.clone(),
        dev.nand()
            .map_or_else(|| "none".to_string(), |n| n.config().name.clone()),
        rw,
        l,
        flash,
        energy_joules,
        consistency,
    );
    r.host = Some(host);
    r.gc = Some(gc);
    r.waf = Some(waf);
    r.ftl = Some(FtlInfo {
        name: after.name.clone(),
        mapping_bytes: after.mapping_bytes,
        cmt_hit_ratio: after.cmt_hit_ratio,
        translation_reads: after.translation_reads - before.translation_reads,
        translation_writes: after.translation_writes - before.translation_writes,
        controller_busy_us: after.controller_busy_us - before.controller_busy_us,
        host_cpu_us: after.host_cpu_us - before.host_cpu_us,
        multi_plane_programs: after.multi_plane_programs - before.multi_plane_programs,
    });
    r.slc_cache = after.slc_cache.map(|a| a.since(before.slc_cache.as_ref()));
    r
}
