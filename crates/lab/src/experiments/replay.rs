//! Trace replay (`noftl io --replay FILE --format blktrace|msr|iolog`): the requests of a block
//! I/O trace (`crate::trace`) sent to a block target in virtual time, at the trace's times
//! (`--replay-pace trace`: open loop, each request submitted when the trace says, whatever is
//! still in flight) or as fast as the queue allows (`afap`: closed loop at `--qd`, in the
//! trace's order).
//!
//! A request is rounded out to the 4 KiB logical pages it touches. A request beyond the
//! device's end (traces of disks larger than the emulated device) is folded onto it: its first
//! page modulo the device's pages, moved back so that it fits; the result counts them
//! (`folded`), so a replay that folds most of its requests says so.
//!
//! Invariants: requests are submitted in time order (the timing model's order); the result
//! holds virtual-time figures only, a function of the trace, the flags and the seed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use anyhow::{bail, Context};
use ftl::{BlockDevice, LOGICAL_PAGE_BYTES};
use nand::workload::{run_closed_loop, LoopResult};
use nand::Nanos;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::measure::Busy;

use super::io::{self, IoResult, Progress, Spec};
use crate::trace::{Op, Pace, ReplayInfo, Trace};

/// One request on the device: what, its first logical page, its pages, its time in the trace.
#[derive(Clone, Copy)]
struct Mapped {
    op: Op,
    lpn: u64,
    pages: u64,
    at_ns: u64,
}

/// The trace's requests on a device of `capacity` pages, and how many were folded.
fn map(trace: &Trace, capacity: u64) -> (Vec<Mapped>, u64) {
    let page = LOGICAL_PAGE_BYTES as u64;
    let mut folded = 0;
    let out = trace
        .requests
        .iter()
        .map(|r| {
            let first = r.offset_bytes / page;
            let last = (r.offset_bytes + r.len_bytes - 1) / page;
            let pages = (last - first + 1).min(capacity);
            let mut lpn = first;
            if first + pages > capacity {
                folded += 1;
                lpn = (first % capacity).min(capacity - pages);
            }
            Mapped {
                op: r.op,
                lpn,
                pages,
                at_ns: r.at_ns,
            }
        })
        .collect();
    (out, folded)
}

/// Replays `spec.replay` per `spec` (target, device, precondition, qd, seed of the written
/// data), after `Spec::requests`' checks.
pub fn run(spec: &Spec, progress: &mut dyn Progress) -> anyhow::Result<IoResult> {
    let Some(r) = &spec.replay else {
        bail!("no trace to replay");
    };
    spec.requests()?;
    let mut dev = crate::targets::build(&spec.target)?;
    let page = LOGICAL_PAGE_BYTES;
    let (reqs, folded) = map(&r.trace, dev.capacity_pages());
    let max_pages = reqs.iter().map(|m| m.pages).max().unwrap_or(1) as usize;
    let mut data = vec![0u8; max_pages * page];
    Xoshiro256PlusPlus::seed_from_u64(spec.seed ^ 0xDA7A).fill_bytes(&mut data);
    let mut buf = vec![0u8; max_pages * page];
    let mut now = 0;
    if spec.precondition {
        now = io::fill(dev.as_mut(), &data[..page], progress)?;
    }
    let before = (
        dev.report(),
        io::flash_counts(dev.as_ref()),
        io::energy(dev.as_ref()),
        io::page_types(dev.as_ref()),
        Busy::of_nand(dev.nand()),
    );
    let mut submit = |m: Mapped, at: Nanos| -> Result<Nanos, ftl::FtlError> {
        let n = m.pages as usize * page;
        match m.op {
            Op::Read => dev.read(at, m.lpn, &mut buf[..n]),
            Op::Write => dev.write(at, m.lpn, &data[..n], false),
            Op::Trim => dev.trim(at, m.lpn, m.pages),
        }
    };
    progress.begin(reqs.len() as u64);
    let (l, peak) = match r.pace {
        Pace::Afap => {
            let l = run_closed_loop(
                now,
                spec.qd,
                reqs.len() as u64,
                |i, _, at| submit(reqs[i as usize], at),
                |d| progress.tick(d),
            )?;
            (l, spec.qd)
        }
        Pace::Trace => open_loop(now, &reqs, &mut submit, progress)?,
    };
    progress.end();
    let after = dev.report();
    let flash = io::flash_counts(dev.as_ref()).saturating_sub(&before.1);
    let mut res = io::block_result(
        spec,
        "replay".into(),
        &l,
        &before.0,
        &after,
        flash,
        io::energy(dev.as_ref()) - before.2,
        io::check(peak, &l, &before.4, dev.nand()),
        dev.as_ref(),
    );
    res.by_page_type = nand::PageTypeCounts::between(&before.3, &io::page_types(dev.as_ref()));
    let bytes: u64 = reqs.iter().map(|m| m.pages * page as u64).sum();
    let count = |op| reqs.iter().filter(|m| m.op == op).count() as u64;
    let n = reqs.len() as u64;
    res.bs = bytes / n.max(1);
    res.qd = peak;
    res.mib_per_s = if l.elapsed_ns() > 0 {
        bytes as f64 / (l.elapsed_ns() as f64 / 1e9) / f64::from(1 << 20)
    } else {
        0.0
    };
    res.replay = Some(ReplayInfo {
        file: r.file.clone(),
        format: r.format.to_string(),
        pace: match r.pace {
            Pace::Trace => "trace",
            Pace::Afap => "afap",
        },
        requests: n,
        reads: count(Op::Read),
        writes: count(Op::Write),
        trims: count(Op::Trim),
        bytes,
        folded,
        skipped: r.trace.skipped,
        trace_seconds: reqs.last().map_or(0, |m| m.at_ns) as f64 / 1e9,
        peak_in_flight: peak,
    });
    Ok(res)
}

/// Submits each request at its trace time from `start`, whatever is in flight; returns the run
/// and the most requests in flight at once (for the consistency check's Little bound).
fn open_loop(
    start: Nanos,
    reqs: &[Mapped],
    submit: &mut dyn FnMut(Mapped, Nanos) -> Result<Nanos, ftl::FtlError>,
    progress: &mut dyn Progress,
) -> anyhow::Result<(LoopResult, u32)> {
    let mut latency_ns = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
        .context("latency histogram")?;
    let mut in_flight: BinaryHeap<Reverse<Nanos>> = BinaryHeap::new();
    let (mut end_ns, mut peak) = (start, 0usize);
    for (i, m) in reqs.iter().enumerate() {
        let at = start + m.at_ns;
        while in_flight.peek().is_some_and(|Reverse(t)| *t <= at) {
            in_flight.pop();
        }
        let done = submit(*m, at)?;
        let _ = latency_ns.record((done - at).clamp(1, 3_600_000_000_000));
        in_flight.push(Reverse(done));
        peak = peak.max(in_flight.len());
        end_ns = end_ns.max(done);
        progress.tick(i as u64 + 1);
    }
    Ok((
        LoopResult {
            ops: reqs.len() as u64,
            start_ns: start,
            end_ns,
            latency_ns,
        },
        u32::try_from(peak).unwrap_or(u32::MAX),
    ))
}
