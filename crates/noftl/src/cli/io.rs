//! `noftl io`: a fio-like workload in virtual time, on the raw flash (`--target raw`) or on any
//! block-device target (an FTL, or the plain memory disk).
//!
//! Input generation is kept apart from execution: the request stream depends only on the
//! pattern, sizes and seed, and the closed-loop driver (nand::workload) decides when each request
//! is submitted. Only the measured phase is reported: with `--precondition` the device is first
//! filled sequentially, and the counters are taken as differences across the workload.
//!
//! The JSON output holds virtual-time figures only, so the same command gives byte-identical
//! JSON; wall-clock speed of the emulator goes to the human output.

use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use ftl::{BlockDevice, FtlReport, GcCounts, HostCounts, LOGICAL_PAGE_BYTES};
use indicatif::{ProgressBar, ProgressStyle};
use nand::workload::{run_closed_loop, LoopResult, RawPattern, RawWorkload};
use nand::{FlashCounts, LatencySummary, Nand, Nanos};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;
use storage::measure::{self, Busy, Consistency};

use super::common::parse_size;
use crate::targets::{self, TargetArgs};
use lab::limits::{self, MemoryPlan};

#[derive(Debug, Args)]
pub struct IoArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Access pattern: read | randread | write (raw and block targets); randwrite | randrw | trim
    /// (block targets). Default: randread on raw, randwrite on block targets.
    #[arg(long)]
    pub rw: Option<String>,
    /// Request size (a multiple of the flash page on raw, of 4 KiB on block targets).
    #[arg(long, default_value = "4k", value_parser = parse_size)]
    pub bs: u64,
    /// Requests kept outstanding.
    #[arg(long, default_value_t = 1)]
    pub qd: u32,
    /// Number of requests (default 100000 unless --io-bytes is given).
    #[arg(long, conflicts_with = "io_bytes")]
    pub ops: Option<u64>,
    /// Total bytes to transfer instead of a request count.
    #[arg(long, value_parser = parse_size)]
    pub io_bytes: Option<u64>,
    /// Seed of the request stream.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Block targets: fill the device sequentially first, then run and report the workload only.
    #[arg(long)]
    pub precondition: bool,
    /// randrw: percentage of reads.
    #[arg(long, default_value_t = 50)]
    pub rwmixread: u32,
    /// virtual (default): device time only; real: each request also takes its modelled time on
    /// the wall clock (QD 1), and the clock's error (actual minus modelled latency) is reported;
    /// none: no waiting, as virtual here.
    #[arg(long, default_value = "virtual", value_parser = super::clock::mode_parser("io", &super::clock::MODES))]
    pub clock: nand::ClockMode,
    /// Write the JSON result to this file ("-" or no value: standard output, instead of the
    /// human report).
    #[arg(long, num_args = 0..=1, default_missing_value = "-", value_name = "FILE|-")]
    pub json: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub results: crate::cli::common::ResultsArgs,
}

#[derive(Debug, Serialize)]
struct LatencyUs {
    mean: f64,
    p50: f64,
    p99: f64,
    max: f64,
}

#[derive(Debug, Serialize)]
struct FtlInfo {
    name: String,
    mapping_bytes: u64,
    cmt_hit_ratio: Option<f64>,
    translation_reads: u64,
    translation_writes: u64,
    controller_busy_us: f64,
    /// The part of `controller_busy_us` on the host's CPU (dftl-orig runs in the host's kernel).
    host_cpu_us: f64,
    /// Multi-plane programs (one page per plane of a die, one array time; docs/ftl.md).
    multi_plane_programs: u64,
}

/// The result of one run: the stable field names other tools read.
#[derive(Debug, Serialize)]
struct IoResult {
    target: String,
    device: String,
    rw: String,
    bs: u64,
    qd: u32,
    seed: u64,
    ops: u64,
    iops: f64,
    mib_per_s: f64,
    virtual_seconds: f64,
    latency_us: LatencyUs,
    flash: FlashCounts,
    /// Data reads and programs per page type (lower/middle/upper on MLC/TLC).
    by_page_type: Vec<nand::PageTypeCounts>,
    /// The run checked against physical bounds from its own counters (`storage::measure`).
    consistency: Consistency,
    energy_joules: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    clock_error_us: Option<LatencyUs>,
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<HostCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gc: Option<GcCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    waf: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ftl: Option<FtlInfo>,
    /// `--slc-cache`: the pSLC write cache over the measured window (`waf` includes its folds).
    #[serde(skip_serializing_if = "Option::is_none")]
    slc_cache: Option<ftl::block_device::SlcCacheReport>,
}

impl IoResult {
    /// The fields every target reports, from a measured closed-loop run.
    fn measured(
        args: &IoArgs,
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
            bs: args.bs,
            qd: args.qd,
            seed: args.seed,
            ops: l.ops,
            iops: l.ops_per_second(),
            mib_per_s: l.ops_per_second() * args.bs as f64 / f64::from(1 << 20),
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
        }
    }
}

/// Progress for runs that last longer than a second of wall-clock time.
struct Progress {
    total: u64,
    started: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    fn new(total: u64) -> Self {
        Progress {
            total,
            started: Instant::now(),
            bar: None,
        }
    }
    fn tick(&mut self, done: u64) {
        if !done.is_multiple_of(4096) && done != self.total {
            return;
        }
        if self.bar.is_none() && self.started.elapsed().as_secs_f64() > 1.0 {
            let bar = ProgressBar::new(self.total);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} requests ({eta})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }
    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
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

fn request_count(args: &IoArgs) -> anyhow::Result<u64> {
    let ops = match (args.ops, args.io_bytes) {
        (Some(n), _) => n,
        (None, Some(bytes)) => bytes.div_ceil(args.bs),
        (None, None) => 100_000,
    };
    if ops == 0 {
        bail!("--ops (or --io-bytes) must ask for at least one request");
    }
    limits::in_range(
        "--qd",
        u64::from(args.qd),
        1,
        MAX_QD,
        "requests in flight at once (NVMe's deepest queue is 65,536)",
    )?;
    limits::in_range(
        "--bs",
        args.bs,
        1,
        MAX_BS_BYTES,
        "bytes per request (a larger transfer is split into requests by the host anyway)",
    )?;
    // Each request in flight holds a buffer of --bs bytes.
    let mut plan = MemoryPlan::new();
    plan.device(&args.target.device.load()?).add(
        format!("{} request buffers of {} bytes", args.qd, args.bs),
        u64::from(args.qd).saturating_mul(args.bs),
    );
    plan.check("use a smaller --qd or --bs")?;
    Ok(ops)
}

pub fn run(args: IoArgs) -> anyhow::Result<()> {
    let ops = request_count(&args)?;
    let plan = args.results.plan()?;
    let wall = Instant::now();
    let mut rec = None;
    let result = if args.target.target == "raw" {
        run_raw(&args, ops, plan.as_ref(), &mut rec)?
    } else {
        run_block(&args, ops, plan.as_ref(), &mut rec)?
    };
    let wall_s = wall.elapsed().as_secs_f64();
    if let (Some(p), Some(trace)) = (&plan, rec) {
        write_results(p, &args, &result, &trace)?;
    }
    if super::common::emit_json(args.json.as_deref(), &result)? {
        print_human(&result, wall_s);
    }
    Ok(())
}

/// The result directory of `io` (lab::results): summary.json, fio.json, samples.csv and, with
/// --raw, raw.csv.
fn write_results(
    p: &lab::results::Plan,
    args: &IoArgs,
    res: &IoResult,
    trace: &lab::results::Trace,
) -> anyhow::Result<()> {
    use lab::results as r;
    use serde_json::json;
    let mut extra = serde_json::Map::new();
    extra.insert("Benchmark Type".into(), json!("io"));
    extra.insert("iodepth".into(), json!(args.qd));
    extra.extend(r::benchbase(&trace.events, res.virtual_seconds));
    extra.insert(
        "results".into(),
        json!({
            "format": "noftl-results-1",
            "sample_window_s": p.window_ns as f64 / 1e9,
            "files": if p.raw { json!(["summary.json", "fio.json", "samples.csv", "raw.csv"]) } else { json!(["summary.json", "fio.json", "samples.csv"]) },
        }),
    );
    r::write_summary(&p.dir, res, extra)?;
    let elapsed_ns = trace.marks.last().map_or(0, |m| m.t_ns) - trace.start_ns();
    let fio = r::fio_json(
        &trace.events,
        args.bs,
        elapsed_ns,
        json!({
            "rw": res.rw,
            "bs": args.bs.to_string(),
            "iodepth": args.qd.to_string(),
            "ioengine": format!("noftl-{}", res.target),
            "randseed": args.seed.to_string(),
        }),
        serde_json::to_value(res)?,
    );
    r::write(
        &p.dir,
        "fio.json",
        &format!("{}\n", serde_json::to_string_pretty(&fio)?),
    )?;
    let unit = r::Unit::Io {
        bytes_per_request: args.bs,
    };
    r::write(
        &p.dir,
        "samples.csv",
        &r::samples_csv(std::slice::from_ref(trace), &[], unit),
    )?;
    if p.raw {
        r::write(
            &p.dir,
            "raw.csv",
            &r::raw_csv(
                std::slice::from_ref(trace),
                &[],
                &["read", "write", "trim"],
                "ok",
            ),
        )?;
    }
    Ok(())
}

fn run_raw(
    args: &IoArgs,
    ops: u64,
    plan: Option<&lab::results::Plan>,
    rec_out: &mut Option<lab::results::Trace>,
) -> anyhow::Result<IoResult> {
    if args.target.image.is_some() {
        bail!("--image is for block targets; the raw target runs on a fresh device");
    }
    let rw = args.rw.clone().unwrap_or_else(|| "randread".into());
    let pattern: RawPattern = rw.parse().map_err(anyhow::Error::msg)?;
    let cfg = args.target.device.load()?;
    let mut nand = Nand::new(cfg)?;
    if args.precondition {
        // Program every page once (stripe order, all dies busy) so that reads return real data.
        let mut fill = RawWorkload::new(
            &nand,
            RawPattern::Write,
            u64::from(nand.geometry().page_size_bytes),
            args.seed ^ 0xF111,
        )
        .map_err(anyhow::Error::msg)?;
        let pages = nand.geometry().pages();
        let dies = nand.geometry().dies();
        let mut progress = Progress::new(pages);
        run_closed_loop(
            0,
            dies,
            pages,
            |_, at| fill.submit(&mut nand, at),
            |d| progress.tick(d),
        )
        .context("precondition failed")?;
        progress.finish();
        nand.reset_stats();
    }
    let mut w = RawWorkload::new(&nand, pattern, args.bs, args.seed).map_err(anyhow::Error::msg)?;
    let mut progress = Progress::new(ops);
    let start = nand.now_ns();
    let busy_before = Busy::of_nand(Some(&nand));
    let energy_before = nand.report().energy.total_joules;
    let mut clock_error_us = None;
    let kind = u8::from(matches!(pattern, RawPattern::Write));
    let mut rec = plan.map(|p| {
        lab::results::Recorder::new(p.window_ns, lab::results::mark(start, Some(&nand), 0))
    });
    let l = match args.clock {
        nand::ClockMode::Virtual | nand::ClockMode::None => run_closed_loop(
            start,
            args.qd,
            ops,
            |_, at| {
                if let Some(r) = rec.as_mut() {
                    if r.due(at) {
                        r.mark_until(at, |t| lab::results::mark(t, Some(&nand), 0));
                    }
                    let done = w.submit(&mut nand, at)?;
                    r.event(at, done, kind);
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
            if args.qd != 1 {
                bail!("--clock real runs at QD 1 here (one thread waits per request); use noftl serve for concurrency");
            }
            let (l, err) = run_real_time(&mut nand, &mut w, ops, &mut progress)?;
            clock_error_us = Some(err);
            l
        }
    };
    progress.finish();
    if let Some(r) = rec {
        *rec_out = Some(r.finish(lab::results::mark(l.end_ns, Some(&nand), 0)));
    }
    let report = nand.report();
    let mut r = IoResult::measured(
        args,
        "raw".into(),
        nand.config().name.clone(),
        rw,
        &l,
        report.flash,
        report.energy.total_joules - energy_before,
        check(args, &l, &busy_before, Some(&nand)),
    );
    r.by_page_type = report.by_page_type;
    r.clock_error_us = clock_error_us;
    Ok(r)
}

/// Runs QD-1 requests on the wall clock: each is submitted at the real clock's now and waited
/// for until its modelled completion. Returns the modelled latencies and the clock's error
/// (actual minus modelled latency) in microseconds.
fn run_real_time(
    nand: &mut Nand,
    w: &mut RawWorkload,
    ops: u64,
    progress: &mut Progress,
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
        |_, _| -> anyhow::Result<Nanos> {
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

/// The request stream for a block target: what each request does, from the seed alone.
struct BlockStream {
    pattern: BlockPattern,
    pages_per_request: u64,
    slots: u64,
    cursor: u64,
    rng: Xoshiro256PlusPlus,
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
            slot * s.pages_per_request
        };
        let rand = |s: &mut Self| (s.rng.next_u64() % s.slots) * s.pages_per_request;
        match self.pattern {
            BlockPattern::Read => Req::Read(seq(self)),
            BlockPattern::Write => Req::Write(seq(self)),
            BlockPattern::Randread => Req::Read(rand(self)),
            BlockPattern::Randwrite => Req::Write(rand(self)),
            BlockPattern::Trim => Req::Trim(rand(self)),
            BlockPattern::Randrw => {
                let read = (self.rng.next_u64() % 100) < u64::from(self.read_percent);
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

fn run_block(
    args: &IoArgs,
    ops: u64,
    plan: Option<&lab::results::Plan>,
    rec_out: &mut Option<lab::results::Trace>,
) -> anyhow::Result<IoResult> {
    let rw = args.rw.clone().unwrap_or_else(|| "randwrite".into());
    let pattern = BlockPattern::parse(&rw)?;
    if args.clock != nand::ClockMode::Virtual {
        bail!("block targets run in virtual time here; noftl serve --clock real runs them on the wall clock");
    }
    if args.bs == 0 || !args.bs.is_multiple_of(LOGICAL_PAGE_BYTES as u64) {
        bail!("--bs must be a positive multiple of {LOGICAL_PAGE_BYTES} bytes on block targets");
    }
    if args.rwmixread > 100 {
        bail!("--rwmixread is a percentage (0..=100)");
    }
    let mut dev = targets::build(&args.target)?;
    let pages_per_request = args.bs / LOGICAL_PAGE_BYTES as u64;
    let capacity = dev.capacity_pages();
    if pages_per_request > capacity {
        bail!(
            "--bs {} is larger than the device ({} pages)",
            args.bs,
            capacity
        );
    }
    let mut data = vec![0u8; args.bs as usize];
    Xoshiro256PlusPlus::seed_from_u64(args.seed ^ 0xDA7A).fill_bytes(&mut data);
    let mut buf = vec![0u8; args.bs as usize];
    let mut now = 0;
    if args.precondition {
        now = precondition(dev.as_mut(), &data)?;
    }
    let before = (
        dev.report(),
        flash_counts(dev.as_ref()),
        energy(dev.as_ref()),
        page_types(dev.as_ref()),
        Busy::of_nand(dev.nand()),
    );
    let mut stream = BlockStream {
        pattern,
        pages_per_request,
        slots: capacity / pages_per_request,
        cursor: 0,
        rng: Xoshiro256PlusPlus::seed_from_u64(args.seed),
        read_percent: args.rwmixread,
    };
    let mut progress = Progress::new(ops);
    let gc_of = |d: &dyn BlockDevice| d.report().gc.migrations;
    let mut rec = plan.map(|p| {
        lab::results::Recorder::new(
            p.window_ns,
            lab::results::mark(now, dev.nand(), gc_of(dev.as_ref())),
        )
    });
    let l = run_closed_loop(
        now,
        args.qd,
        ops,
        |_, at| -> Result<Nanos, ftl::FtlError> {
            if let Some(r) = rec.as_mut() {
                if r.due(at) {
                    r.mark_until(at, |t| {
                        lab::results::mark(t, dev.nand(), gc_of(dev.as_ref()))
                    });
                }
            }
            let (done, kind) = match stream.next() {
                Req::Read(lpn) => (dev.read(at, lpn, &mut buf)?, 0),
                Req::Write(lpn) => (dev.write(at, lpn, &data, false)?, 1),
                Req::Trim(lpn) => (dev.trim(at, lpn, pages_per_request)?, 2),
            };
            if let Some(r) = rec.as_mut() {
                r.event(at, done, kind);
            }
            Ok(done)
        },
        |d| progress.tick(d),
    )
    .with_context(|| format!("request to {} failed", dev.name()))?;
    progress.finish();
    if let Some(r) = rec {
        *rec_out = Some(r.finish(lab::results::mark(
            l.end_ns,
            dev.nand(),
            gc_of(dev.as_ref()),
        )));
    }
    let after = dev.report();
    let flash = flash_counts(dev.as_ref()).saturating_sub(&before.1);
    let mut r = block_result(
        args,
        rw,
        &l,
        &before.0,
        &after,
        flash,
        energy(dev.as_ref()) - before.2,
        check(args, &l, &before.4, dev.nand()),
        dev.as_ref(),
    );
    r.by_page_type = nand::PageTypeCounts::between(&before.3, &page_types(dev.as_ref()));
    Ok(r)
}

/// The run against the bounds of `storage::measure`: the dies and channels were busy at most
/// the window's length, and at most `--qd` requests were in flight on average (Little's law;
/// only the upper bound, since a run of a fixed count drains its queue at the end). The window
/// runs to the device's drain, not to the host's last completion: a write acknowledged from the
/// controller's write buffer is programmed after the host saw it complete, and its die time
/// belongs to the run.
fn check(args: &IoArgs, l: &LoopResult, before: &Busy, nand: Option<&Nand>) -> Consistency {
    let end_ns = nand.map_or(l.end_ns, |n| n.now_ns().max(l.end_ns));
    measure::check(measure::Window {
        before,
        after: &Busy::of_nand(nand),
        elapsed_ns: end_ns - l.start_ns,
        terminals: args.qd,
        terminals_run_throughout: false,
        txns: l.ops,
        latency_sum_ns: l.latency_ns.mean() * l.ops as f64,
    })
}

fn page_types(dev: &dyn BlockDevice) -> Vec<nand::PageTypeCounts> {
    dev.nand()
        .map(|n| n.stats().page_type_counts())
        .unwrap_or_default()
}

/// Fills every logical page once, sequentially, in large requests.
fn precondition(dev: &mut dyn BlockDevice, pattern: &[u8]) -> anyhow::Result<Nanos> {
    let chunk_pages = 64u64;
    let mut chunk = vec![0u8; chunk_pages as usize * LOGICAL_PAGE_BYTES];
    for piece in chunk.chunks_mut(pattern.len()) {
        piece.copy_from_slice(&pattern[..piece.len()]);
    }
    let capacity = dev.capacity_pages();
    let mut progress = Progress::new(capacity.div_ceil(chunk_pages));
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
    progress.finish();
    Ok(dev.flush(now)?)
}

fn flash_counts(dev: &dyn BlockDevice) -> FlashCounts {
    dev.nand()
        .map(|n| n.stats().flash_counts())
        .unwrap_or_default()
}

fn energy(dev: &dyn BlockDevice) -> f64 {
    dev.nand().map_or(0.0, |n| n.report().energy.total_joules)
}

#[allow(clippy::too_many_arguments)]
fn block_result(
    args: &IoArgs,
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
        args,
        args.target.target.clone(),
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

fn print_human(r: &IoResult, wall_s: f64) {
    println!(
        "{} on {} ({}), {} x {} B at QD {}, seed {}",
        r.rw, r.target, r.device, r.ops, r.bs, r.qd, r.seed
    );
    println!(
        "  throughput  {:.0} IOPS, {:.2} MiB/s over {:.6} s of device time",
        r.iops, r.mib_per_s, r.virtual_seconds
    );
    println!(
        "  latency us  mean {:.2}  p50 {:.2}  p99 {:.2}  max {:.2}",
        r.latency_us.mean, r.latency_us.p50, r.latency_us.p99, r.latency_us.max
    );
    let f = &r.flash;
    println!(
        "  flash       {} reads, {} programs, {} partial programs, {} erases, {} OOB reads, {} OOB writes",
        f.reads, f.programs, f.partial_programs, f.erases, f.oob_reads, f.oob_writes
    );
    if r.by_page_type
        .iter()
        .any(|t| t.page_type != nand::PageType::Slc)
    {
        for t in &r.by_page_type {
            let mean_us = |ns: u64, n: u64| {
                if n == 0 {
                    0.0
                } else {
                    ns as f64 / n as f64 / 1e3
                }
            };
            println!(
                "  {:<11} {} reads (tR {:.0} us), {} programs (tPROG {:.0} us)",
                format!("{:?} pages", t.page_type).to_lowercase(),
                t.reads,
                mean_us(t.read_array_ns, t.reads),
                t.programs,
                mean_us(t.program_array_ns, t.programs)
            );
        }
    }
    if let (Some(h), Some(g), Some(waf), Some(x)) = (&r.host, &r.gc, r.waf, &r.ftl) {
        println!(
            "  host        {} reads, {} writes, {} trims (pages)",
            h.reads, h.writes, h.trims
        );
        println!(
            "  gc          {} migrations, {} erases; WAF {waf:.3}",
            g.migrations, g.erases
        );
        println!(
            "  ftl         {}: mapping {} B, translation {} reads / {} writes{}, {} {:.1} us",
            x.name,
            x.mapping_bytes,
            x.translation_reads,
            x.translation_writes,
            x.cmt_hit_ratio
                .map(|h| format!(", CMT hit {:.1}%", h * 100.0))
                .unwrap_or_default(),
            if x.host_cpu_us > 0.0 {
                "host CPU"
            } else {
                "controller"
            },
            x.controller_busy_us
        );
        if x.multi_plane_programs > 0 {
            println!("  multi-plane {} programs", x.multi_plane_programs);
        }
    }
    if let Some(c) = &r.slc_cache {
        super::bench::print_slc_cache(c);
    }
    if let Some(e) = &r.clock_error_us {
        println!(
            "  real clock  actual - modelled latency: p50 {:.2} us, p99 {:.2} us, max {:.2} us",
            e.p50, e.p99, e.max
        );
    }
    println!("  energy      {:.6} J", r.energy_joules);
    super::bench::print_consistency(&r.consistency);
    if wall_s > 0.0 {
        println!(
            "  emulator    {:.2} s wall clock, {:.0} requests/s",
            wall_s,
            r.ops as f64 / wall_s
        );
    }
}
