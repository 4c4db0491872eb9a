//! Closed-loop request drivers in virtual time, and the fio-like workload on the raw flash.
//!
//! `run_closed_loop` keeps `qd` requests outstanding: it starts `qd` at the start time and
//! submits the next one whenever the earliest outstanding one completes, at that completion
//! time. Requests are therefore submitted in time order, the order the timing model expects
//! (timing.rs, invariant 4), and the run is deterministic.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use hdrhistogram::Histogram;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::device::Nand;
use crate::error::NandError;
use crate::geometry::{DieId, Ppn};
use crate::stats::Purpose;
use crate::timing::Nanos;

/// What a closed-loop run measured.
#[derive(Debug, Clone)]
pub struct LoopResult {
    pub ops: u64,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    /// Request latencies (submit to completion), nanoseconds.
    pub latency_ns: Histogram<u64>,
}

impl LoopResult {
    pub fn elapsed_ns(&self) -> Nanos {
        self.end_ns - self.start_ns
    }
    pub fn ops_per_second(&self) -> f64 {
        if self.elapsed_ns() == 0 {
            return 0.0;
        }
        self.ops as f64 * 1e9 / self.elapsed_ns() as f64
    }
}

/// Runs `ops` requests with `qd` outstanding. `submit(i, slot, at_ns)` issues request `i` from
/// queue slot `slot` (0..qd, the slot that freed first) at `at_ns` and returns its completion
/// time. `progress(done)` is called after every request.
pub fn run_closed_loop<E>(
    start_ns: Nanos,
    qd: u32,
    ops: u64,
    submit: impl FnMut(u64, u32, Nanos) -> Result<Nanos, E>,
    progress: impl FnMut(u64),
) -> Result<LoopResult, E> {
    run_closed_loop_until(start_ns, qd, ops, None, submit, progress)
}

/// `run_closed_loop` that also stops submitting at `until_ns` (fio's `runtime`): a slot that
/// frees at or after it submits nothing more; the requests in flight complete. `ops` bounds the
/// count (`u64::MAX`: time alone).
pub fn run_closed_loop_until<E>(
    start_ns: Nanos,
    qd: u32,
    ops: u64,
    until_ns: Option<Nanos>,
    mut submit: impl FnMut(u64, u32, Nanos) -> Result<Nanos, E>,
    mut progress: impl FnMut(u64),
) -> Result<LoopResult, E> {
    assert!(qd >= 1, "queue depth must be at least 1");
    let mut latency_ns =
        Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
    // Free slots, by the time they become free; ties resolve by slot order (deterministic).
    let mut free: BinaryHeap<Reverse<(Nanos, u32)>> =
        (0..qd).map(|s| Reverse((start_ns, s))).collect();
    let mut end_ns = start_ns;
    let mut done = 0;
    while done < ops {
        let Reverse((at, slot)) = free.pop().expect("qd >= 1 slots");
        if until_ns.is_some_and(|u| at >= u) {
            break;
        }
        let t = submit(done, slot, at)?;
        debug_assert!(t >= at, "a request completes after it is submitted");
        let _ = latency_ns.record((t - at).clamp(1, 3_600_000_000_000));
        end_ns = end_ns.max(t);
        free.push(Reverse((t, slot)));
        done += 1;
        progress(done);
    }
    Ok(LoopResult {
        ops: done,
        start_ns,
        end_ns,
        latency_ns,
    })
}

/// Access patterns of the raw workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RawPattern {
    /// Pages in stripe order (die after die), from the start of the device.
    Read,
    /// Uniformly random pages.
    Randread,
    /// Programs in stripe order, each die filling its blocks in order and erasing ahead.
    Write,
}

impl std::str::FromStr for RawPattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "read" => Ok(RawPattern::Read),
            "randread" => Ok(RawPattern::Randread),
            "write" => Ok(RawPattern::Write),
            other => Err(format!(
                "the raw target runs read, randread or write, not '{other}'"
            )),
        }
    }
}

/// The fio-like workload on the native interface: each request is `pages_per_request` flash
/// pages issued at once, spread over dies.
#[derive(Debug)]
pub struct RawWorkload {
    pattern: RawPattern,
    pages_per_request: u32,
    rng: Xoshiro256PlusPlus,
    /// Next stripe position (one page on each die in turn).
    cursor: u64,
    data: Vec<u8>,
    scratch: Vec<u8>,
}

impl RawWorkload {
    pub fn new(
        nand: &Nand,
        pattern: RawPattern,
        request_bytes: u64,
        seed: u64,
    ) -> Result<Self, String> {
        let page = u64::from(nand.geometry().page_size_bytes);
        if request_bytes == 0 || !request_bytes.is_multiple_of(page) {
            return Err(format!(
                "--bs must be a positive multiple of the {page}-byte flash page"
            ));
        }
        let pages = request_bytes / page;
        if pages > u64::from(nand.geometry().dies()) * 64 {
            return Err("--bs is larger than 64 pages per die; use a smaller block size".into());
        }
        let mut data = vec![0u8; page as usize];
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        rng.fill_bytes(&mut data);
        Ok(RawWorkload {
            pattern,
            pages_per_request: pages as u32,
            rng,
            cursor: 0,
            data,
            scratch: vec![0; page as usize],
        })
    }

    /// The page at stripe position `pos`: die `pos % dies`, then block and page in that die.
    fn stripe_page(nand: &Nand, pos: u64) -> Ppn {
        let g = nand.geometry();
        let dies = u64::from(g.dies());
        let per_die_pages = u64::from(g.blocks_per_die()) * u64::from(g.pages_per_block);
        let die = (pos % dies) as u32;
        let in_die = (pos / dies) % per_die_pages;
        let block_in_die = (in_die / u64::from(g.pages_per_block)) as u32;
        let page = (in_die % u64::from(g.pages_per_block)) as u32;
        let pbn = g.block_on_die(
            DieId(die),
            block_in_die / g.blocks_per_plane,
            block_in_die % g.blocks_per_plane,
        );
        g.ppn_in_block(pbn, page)
    }

    /// Issues request `i` at `at_ns`; returns when its last page completes.
    pub fn submit(&mut self, nand: &mut Nand, at_ns: Nanos) -> Result<Nanos, NandError> {
        let mut done = at_ns;
        for _ in 0..self.pages_per_request {
            let ppn = match self.pattern {
                RawPattern::Randread => Ppn(self.rng.next_u64() % nand.geometry().pages()),
                _ => {
                    let p = Self::stripe_page(nand, self.cursor);
                    self.cursor += 1;
                    p
                }
            };
            done = done.max(self.one(nand, at_ns, ppn)?);
        }
        Ok(done)
    }

    fn one(&mut self, nand: &mut Nand, at_ns: Nanos, ppn: Ppn) -> Result<Nanos, NandError> {
        match self.pattern {
            RawPattern::Read | RawPattern::Randread => Ok(nand
                .read(at_ns, ppn, &mut self.scratch, &mut [], Purpose::Host)?
                .done_ns),
            RawPattern::Write => {
                let pbn = nand.geometry().block_of(ppn);
                let page = nand.geometry().page_in_block(ppn);
                if nand.is_bad(pbn) {
                    return Ok(at_ns); // a bad block is skipped, as any writer must
                }
                let info = nand.block_info(pbn)?;
                let mut at = at_ns;
                // Erase ahead: the first page of a block finds it erased, whatever it held before.
                if page == 0 && info.next_page != 0 {
                    let native = nand.config().cell.native;
                    at = nand.erase(at, pbn, native, Purpose::Host)?.done_ns;
                }
                if page >= info.usable_pages {
                    return Ok(at);
                }
                Ok(nand
                    .program(at, ppn, &self.data, &[], Purpose::Host)?
                    .done_ns)
            }
        }
    }
}
