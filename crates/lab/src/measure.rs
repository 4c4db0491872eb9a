//! What a measured window gave, from the counters around it: snapshots of the flash, the
//! FTL, the log and the busy time; figures per transaction; latencies; the buffer pool; the
//! window's self-check against physical bounds (`storage::measure`).

use hdrhistogram::Histogram;
use serde::Serialize;
use storage::measure::{self, Busy, Consistency};
use storage::{Engine, PageStore};

#[derive(Debug, Serialize)]
pub struct LatencyUs {
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Debug, Serialize, Default)]
pub struct PerTxn {
    pub flash_reads: f64,
    pub flash_programs: f64,
    pub flash_erases: f64,
    /// OOB-only reads and programs (dftl-orig: GC's status reads, invalidation marks).
    pub flash_oob_reads: f64,
    pub flash_oob_writes: f64,
    /// Pad programs (MLC/TLC paired-page safety), included in `flash_programs`.
    pub flash_pad_programs: f64,
    pub gc_migrations: f64,
    pub energy_joules: f64,
    pub host_page_reads: f64,
    pub host_page_writes: f64,
    pub log_forces: f64,
    /// Host CPU time of flash management that runs on the host (native, dftl-orig), us.
    pub host_cpu_us: f64,
    /// That time as a share of the run (host CPU us over elapsed us).
    pub host_cpu_share: f64,
}

#[derive(Debug, Serialize)]
pub struct Buffer {
    pub frames: usize,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub writebacks: u64,
}

/// Counters of the flash and the flash management below a page store, at one moment.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlashSnapshot {
    pub reads: u64,
    pub programs: u64,
    pub erases: u64,
    pub oob_reads: u64,
    pub oob_writes: u64,
    /// Pad pages that complete word lines on MLC/TLC (paired-page safety), part of `programs`.
    pub pad_programs: u64,
    pub joules: f64,
    pub gc_migrations: u64,
    pub host_cpu_us: f64,
    pub slc_cache: Option<ftl::block_device::SlcCacheReport>,
}

/// The counters of the flash and the flash management below `store` now.
pub fn flash(store: &dyn PageStore) -> FlashSnapshot {
    let mut s = store.nand().map_or_else(FlashSnapshot::default, |n| {
        let rep = n.report();
        FlashSnapshot {
            reads: rep.flash.reads,
            programs: rep.flash.programs + rep.flash.partial_programs,
            erases: rep.flash.erases,
            oob_reads: rep.flash.oob_reads,
            oob_writes: rep.flash.oob_writes,
            pad_programs: n.stats().flash_counts_for(nand::Purpose::Pad).programs,
            joules: rep.energy.total_joules,
            ..FlashSnapshot::default()
        }
    });
    if let Some(d) = store.device_report() {
        s.gc_migrations = d.gc.migrations;
        s.host_cpu_us = d.host_cpu_us;
        s.slc_cache = d.slc_cache;
    }
    s
}

/// The page FTL's pSLC write cache over a window (`--slc-cache`), if it runs one.
pub fn slc_cache(before: &Snapshot, after: &Snapshot) -> Option<ftl::block_device::SlcCacheReport> {
    after
        .0
        .slc_cache
        .map(|a| a.since(before.0.slc_cache.as_ref()))
}

pub fn latency_us(hist: &Histogram<u64>) -> LatencyUs {
    let us = |v: u64| v as f64 / 1000.0;
    LatencyUs {
        mean: hist.mean() / 1000.0,
        p50: us(hist.value_at_quantile(0.5)),
        p95: us(hist.value_at_quantile(0.95)),
        p99: us(hist.value_at_quantile(0.99)),
        max: us(hist.max()),
    }
}

pub type Snapshot = (
    FlashSnapshot,
    Option<ftl::HostCounts>,
    storage::log::LogStats,
    Busy,
);

pub fn snapshot(e: &Engine) -> Snapshot {
    let mut s = store_snapshot(e.store());
    s.2 = e.log_stats();
    s
}

/// The counters of a page store driven without an engine (no log of its own).
pub fn store_snapshot(store: &dyn PageStore) -> Snapshot {
    (
        flash(store),
        store.device_report().map(|r| r.host),
        storage::log::LogStats::default(),
        Busy::of(store),
    )
}

/// The window's self-check (storage::measure) from the snapshots around it, its length and the
/// latencies of the transactions it completed.
/// `for_duration`: the run was for a time (not for a number of transactions per terminal).
pub fn consistency(
    before: &Snapshot,
    after: &Snapshot,
    elapsed_ns: u64,
    terminals: u32,
    for_duration: bool,
    latency_ns: &Histogram<u64>,
) -> Consistency {
    measure::check(measure::Window {
        before: &before.3,
        after: &after.3,
        elapsed_ns,
        terminals,
        terminals_run_throughout: for_duration,
        txns: latency_ns.len(),
        latency_sum_ns: latency_ns.mean() * latency_ns.len() as f64,
    })
}

/// Device and host counters per transaction, as differences across a run of `secs` seconds.
pub fn per_txn(before: &Snapshot, after: &Snapshot, txns: u64, secs: f64) -> PerTxn {
    let per = |x: f64| if txns == 0 { 0.0 } else { x / txns as f64 };
    let (a, b) = (&after.0, &before.0);
    let host_cpu_us = a.host_cpu_us - b.host_cpu_us;
    let elapsed_us = secs * 1e6;
    PerTxn {
        flash_reads: per((a.reads - b.reads) as f64),
        flash_programs: per((a.programs - b.programs) as f64),
        flash_erases: per((a.erases - b.erases) as f64),
        flash_oob_reads: per((a.oob_reads - b.oob_reads) as f64),
        flash_oob_writes: per((a.oob_writes - b.oob_writes) as f64),
        flash_pad_programs: per((a.pad_programs - b.pad_programs) as f64),
        gc_migrations: per((a.gc_migrations - b.gc_migrations) as f64),
        energy_joules: per(a.joules - b.joules),
        host_cpu_us: per(host_cpu_us),
        host_cpu_share: if elapsed_us > 0.0 {
            host_cpu_us / elapsed_us
        } else {
            0.0
        },
        host_page_reads: per(after
            .1
            .zip(before.1)
            .map_or(0.0, |(a, b)| (a.reads - b.reads) as f64)),
        host_page_writes: per(after
            .1
            .zip(before.1)
            .map_or(0.0, |(a, b)| (a.writes - b.writes) as f64)),
        log_forces: per((after.2.forces - before.2.forces) as f64),
    }
}

/// Buffer pool counters as differences across the run.
pub fn buffer(
    frames: usize,
    before: &storage::buffer::BufferStats,
    after: &storage::buffer::BufferStats,
) -> Buffer {
    Buffer {
        frames,
        hits: after.hits - before.hits,
        misses: after.misses - before.misses,
        evictions: after.evictions - before.evictions,
        writebacks: after.writebacks - before.writebacks,
    }
}
