//! `noftl io`: a fio-like workload in virtual time, on the raw flash (`--target raw`) or on any
//! block-device target (an FTL, or the plain memory disk). The experiment is
//! `lab::experiments::io`; this module parses its flags, draws its progress bar and prints it.
//!
//! The JSON output holds virtual-time figures only, so the same command gives byte-identical
//! JSON; wall-clock speed of the emulator goes to the human output.

use std::time::Instant;

use anyhow::Context;
use clap::Args;
use lab::experiments::io::{IoResult, Spec};

use super::common::parse_size;
use crate::targets::TargetArgs;

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
    /// Block targets: precondition as SNIA's SSS PTS does (a sequential fill, then random writes
    /// in rounds until steady: the last 5 rounds' IOPS and WAF within 20% range and 10% fit
    /// excursion of their mean, 25 rounds at most), then run and report the workload only.
    #[arg(long)]
    pub precondition: bool,
    /// Fail (after the report) when the run did not start in steady state.
    #[arg(long)]
    pub strict: bool,
    /// randrw: percentage of reads.
    #[arg(long, default_value_t = 50)]
    pub rwmixread: u32,
    /// Block targets, random patterns: where requests land, as fio's random_distribution:
    /// random (uniform) | zipf:THETA | pareto:H | normal:DEV (percent).
    #[arg(long, default_value = "random", value_parser = parse_distribution)]
    pub distribution: lab::distribution::Distribution,
    /// A fio job file: its one job's rw, bs, size, offset, iodepth, numjobs,
    /// random_distribution, rwmixread, runtime, ramp_time (the workload flags then come from
    /// it; examples/fio/). Unsupported options are refused by name.
    #[arg(long, value_name = "FILE.fio", conflicts_with_all = ["rw", "bs", "qd", "ops", "io_bytes", "rwmixread", "distribution"])]
    pub job: Option<std::path::PathBuf>,
    /// Replay a block I/O trace on a block target instead of generating requests: each request
    /// rounded out to 4 KiB pages, requests beyond the device folded onto it (counted).
    #[arg(long, value_name = "FILE", requires = "format", conflicts_with_all = ["job", "rw", "bs", "ops", "io_bytes", "rwmixread", "distribution"])]
    pub replay: Option<std::path::PathBuf>,
    /// --replay's format: blktrace (blktrace's binary events) | msr (MSR Cambridge CSV, SNIA
    /// IOTTA) | iolog (fio's iolog, version 2 or 3).
    #[arg(long, requires = "replay", value_parser = |s: &str| s.parse::<lab::trace::Format>())]
    pub format: Option<lab::trace::Format>,
    /// --replay: submit each request at its trace time (trace) or as fast as --qd allows (afap).
    #[arg(long, default_value = "trace", value_parser = |s: &str| s.parse::<lab::trace::Pace>())]
    pub replay_pace: lab::trace::Pace,
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

impl IoArgs {
    /// The experiment these flags ask for, without its result directory (`run` plans that after
    /// the request count is checked, so a refused run creates no directory).
    fn spec(&self) -> Spec {
        Spec {
            target: self.target.spec(),
            rw: self.rw.clone(),
            bs_bytes: self.bs,
            qd: self.qd,
            ops: self.ops,
            io_bytes: self.io_bytes,
            seed: self.seed,
            precondition: self.precondition,
            rwmixread_percent: self.rwmixread,
            clock: self.clock,
            results: None,
            distribution: self.distribution,
            ..Spec::default()
        }
    }
}

fn parse_distribution(s: &str) -> Result<lab::distribution::Distribution, String> {
    s.parse()
}

/// io's phases (a precondition, then the measured requests) as `lab::progress` phases, which
/// the CLI's drawer shows (`super::progress`).
#[derive(Default)]
struct Bar {
    total: u64,
    phase: Option<lab::progress::Phase>,
}

impl lab::experiments::io::Progress for Bar {
    fn begin(&mut self, total: u64) {
        self.total = total;
        self.phase = Some(lab::progress::phase("io", total, "requests"));
    }
    fn tick(&mut self, done: u64) {
        // Told every 4096 steps only: a step is one request, and a report takes a lock.
        if !done.is_multiple_of(4096) && done != self.total {
            return;
        }
        if let Some(p) = &self.phase {
            p.set_position(done);
        }
    }
    fn end(&mut self) {
        self.phase = None;
    }
}

pub fn run(args: IoArgs) -> anyhow::Result<()> {
    let mut spec = args.spec();
    if let Some(path) = &args.job {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the job file {}", path.display()))?;
        spec = lab::fio_job::parse(&text)
            .and_then(|j| j.apply_to(&spec))
            .with_context(|| format!("in the job file {}", path.display()))?;
    }
    if let (Some(path), Some(format)) = (&args.replay, args.format) {
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read the trace {}", path.display()))?;
        let trace = lab::trace::parse(format, &bytes)
            .with_context(|| format!("in the {format} trace {}", path.display()))?;
        spec.replay = Some(lab::trace::Replay {
            file: path.display().to_string(),
            format,
            trace,
            pace: args.replay_pace,
        });
    }
    spec.requests()?;
    super::common::check_outputs(
        &[
            ("--image", args.target.image.as_deref()),
            ("--job", args.job.as_deref()),
            ("--replay", args.replay.as_deref()),
            args.target.device.input(),
        ],
        &[args.json.as_deref()],
    )?;
    spec.results = args.results.plan()?;
    let wall = Instant::now();
    let result = if spec.replay.is_some() {
        lab::experiments::replay::run(&spec, &mut Bar::default())?
    } else {
        lab::experiments::io::run(&spec, &mut Bar::default())?
    };
    let wall_s = wall.elapsed().as_secs_f64();
    if super::common::emit_json(args.json.as_deref(), &result)? {
        print_human(&result, wall_s);
    }
    lab::steady::refuse_unsteady(args.strict, [("io", &result.steady_state)])
}

fn print_human(r: &IoResult, wall_s: f64) {
    println!(
        "{}{} on {} ({}), {} x {} B at QD {}{}, seed {}",
        r.rw,
        r.distribution
            .as_ref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default(),
        r.target,
        r.device,
        r.ops,
        r.bs,
        r.qd,
        if r.numjobs > 1 {
            format!(" x {} jobs", r.numjobs)
        } else {
            String::new()
        },
        r.seed
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
    super::common::print_steady(&r.steady_state);
    if wall_s > 0.0 {
        println!(
            "  emulator    {:.2} s wall clock, {:.0} requests/s",
            wall_s,
            r.ops as f64 / wall_s
        );
    }
}
