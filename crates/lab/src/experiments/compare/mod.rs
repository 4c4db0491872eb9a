//! `noftl compare`: NoFTL Fig. 3. The same workload, seed and device on the NoFTL page
//! store (`native`), on DFTL with 2%, 15% and 35% of the mappings cached, and on the page FTL;
//! throughput with its standard deviation over repeats, slowdown against NoFTL, then the
//! per-transaction device statistics that explain it.
//!
//! The device: the NoFTL paper's emulator (`noftl13`: one chip, 64 x 4 KiB pages per block, tR 50 us,
//! tPROG 250 us, tBERS 700 us) with as many blocks as the database needs. "Flash volume equals
//! DB size" (NoFTL, VLDB 2013, section 3), plus the emulator's extra blocks of Figure 5 (116 on top of
//! 4,096: a spare factor of 116 / 4,212 = 2.75%) as over-provisioning, plus the fixed blocks
//! every store needs to work (its GC reserve and its open blocks), which the NoFTL paper does not
//! count. Every store gets the same device and the same logical space (meta, log, DB pages),
//! so the same database occupies the same fraction of the flash under each.
//!
//! The database size is measured, not guessed: the workload is loaded once on a RAM disk and
//! its allocated pages counted; the device holds that plus 10% and 256 pages of growth (the
//! history table grows during the run). That loaded database is then copied page by page onto
//! every row's store (`Engine::copy_to`): every row starts from the same bytes, at the cost of one
//! write per page instead of a load. TPC-B and TPC-C load in bulk unless `--load rows` (the
//! row-by-row load every comparison before 2026-11-27 used; the JSON's `load` says which ran):
//! the same rows either way, in a smaller database with full B+-tree nodes when in bulk.
//!
//! The NoFTL paper ran Shore-MT with one thread (Figure 6: "Threads: (1)"), so one terminal by
//! default. The buffer pool is 2% of the database pages (`--buffer`; at least 256 frames), the
//! same for every store. Runs are in virtual time: the same command and seed give byte-identical JSON.
//!
//! Warm-up: right after the copy the device still has all its free blocks, so the first writes
//! cost no garbage collection and every store looks faster than it is in steady state. Before
//! measuring, each row therefore runs the same workload (other inputs, the same on every row)
//! until the store has written the device over twice with pages for the engine (`--warmup
//! auto`; `WARMUP_DEVICE_WRITES` says why twice, and why the same on every row), as SNIA's
//! solid-state performance test preconditions a drive. `--warmup precondition` writes most of
//! those two device writes by replaying the workload's own page I/O instead (precondition.rs,
//! where its validation says when it is not faithful). A criterion on the free space alone is not enough on NoFTL: the dead
//! log is reclaimed without copies, so GC of data blocks starts only once the data writes alone
//! have used up the free space. `--warmup 30s` runs a fixed virtual time instead, `--warmup
//! none` skips it.
//!
//! Windows: a row's repeats are consecutive measured windows of its one steady-state run (batch
//! means), window k drawing the inputs of seed + k (storage::sched::run_virtual says how a
//! window starts and ends; storage::measure checks it).
//!
//! Invariants:
//! 1. Every row runs the same workload inputs (seed + window index) on a copy of the same loaded
//!    database, on a device of the same geometry and logical layout; only the store differs.
//! 2. Only the measured windows are counted: device counters are differences across each; the
//!    warm-up is before them.
//! 3. The JSON depends on the arguments only (virtual time, seeded inputs, results ordered by
//!    row however the worker threads interleave).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::bail;
use serde::{Deserialize, Serialize};
use storage::measure::{self, Busy, Consistency};
use storage::sched::VirtualOptions;
use storage::Engine;

use crate::workload::{run_window, Loaded, Workload};

/// The NoFTL paper's scales (Figure 3: 1 GB, 5 GB and 10 GB of flash).
const PAPER_SCALES_TPCB: [u32; 3] = [48, 200, 500];
const PAPER_SCALES_TPCC: [u32; 3] = [5, 25, 50];

/// --paper's default window (--duration).
const PAPER_WINDOW: &str = "30s";
const PAPER_STORES: &str =
    "native,dftl-2%,dftl-15%,dftl-35%,page,dftl-orig-2%,dftl-orig-15%,dftl-orig-35%";

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct PerTxn {
    pub flash_reads: f64,
    pub flash_programs: f64,
    pub flash_erases: f64,
    pub gc_migrations: f64,
    pub translation_reads: f64,
    pub translation_writes: f64,
    /// Mapping work: the device controller's (FTLs, 400 MHz) or the host's (native), us.
    pub controller_us: f64,
    pub energy_joules: f64,
    pub latency_us: f64,
    /// Host CPU the profile charged (terminals and the page cleaner), us.
    pub host_cpu_us: f64,
    /// The host work it was charged for.
    pub host_work: HostWork,
    /// `dftl-orig`: cache entries its min-age scans visited, and of those the entries of scans
    /// whose working set did not fit the host's L3 (ftl docs, `dftl-orig`, "What a scan reads").
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub scanned_entries: f64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub scanned_entries_beyond_l3: f64,
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

/// The engine's work per transaction, by kind (storage::cpu::CpuCounts over the window).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct HostWork {
    pub calls: f64,
    pub fixes: f64,
    pub records: f64,
    pub locks: f64,
    pub commits: f64,
    pub page_reads: f64,
    pub page_writes: f64,
}

impl HostWork {
    fn per_txn(c: &storage::cpu::CpuCounts, n: f64) -> Self {
        HostWork {
            calls: c.calls as f64 / n,
            fixes: c.fixes as f64 / n,
            records: c.records as f64 / n,
            locks: c.locks as f64 / n,
            commits: c.commits as f64 / n,
            page_reads: c.page_reads as f64 / n,
            page_writes: c.page_writes as f64 / n,
        }
    }
    /// How much of `kind` a transaction did.
    pub fn of(&self, kind: storage::cpu::CpuKind) -> f64 {
        use storage::cpu::CpuKind as K;
        match kind {
            K::Call => self.calls,
            K::Fix => self.fixes,
            K::Record => self.records,
            K::Lock => self.locks,
            K::Commit => self.commits,
            K::PageRead => self.page_reads,
            K::PageWrite => self.page_writes,
        }
    }
    /// The transaction's work priced at `model`, commits left out (the calibration prices
    /// them on their own).
    pub fn priced_without_commits_ns(&self, model: &storage::cpu::CpuModel) -> f64 {
        storage::cpu::CpuKind::ALL
            .iter()
            .filter(|&&k| k != storage::cpu::CpuKind::Commit)
            .map(|&k| self.of(k) * model.ns_of(k) as f64)
            .sum()
    }
    fn rounded(&self) -> Self {
        HostWork {
            calls: r4(self.calls),
            fixes: r4(self.fixes),
            records: r4(self.records),
            locks: r4(self.locks),
            commits: r4(self.commits),
            page_reads: r4(self.page_reads),
            page_writes: r4(self.page_writes),
        }
    }
    fn add_scaled(&mut self, o: &HostWork, k: f64) {
        self.calls += o.calls * k;
        self.fixes += o.fixes * k;
        self.records += o.records * k;
        self.locks += o.locks * k;
        self.commits += o.commits * k;
        self.page_reads += o.page_reads * k;
        self.page_writes += o.page_writes * k;
    }
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub storage: String,
    pub throughput_tps: f64,
    /// TPC-C: completed New-Orders per minute (mean over repeats).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notpm: Option<f64>,
    pub stdev: f64,
    pub slowdown: f64,
    pub runs_tps: Vec<f64>,
    /// Virtual seconds of warm-up before the measured windows.
    pub warmup_seconds: f64,
    /// The warm-up's host writes over the device's pages.
    pub warmup_device_writes: f64,
    /// Mean length of the measured windows (at least --duration; they end at the first
    /// checkpoint after it, on a drained device).
    pub window_seconds: f64,
    /// Mean checkpoints per window, and how many windows found no checkpoint to end on.
    pub window_checkpoints: f64,
    pub windows_without_checkpoint: u32,
    pub per_txn: PerTxn,
    /// The windows' self-check over all repeats (storage::measure).
    pub consistency: Consistency,
    /// The steady-state rule over the measured windows (`steady_over_windows`; needs
    /// `--repeat 5` or more).
    pub steady_state: crate::steady::SteadyState,
    /// Each window, in order (consecutive windows of one run: a trend across them shows).
    pub windows: Vec<WindowRow>,
}

#[derive(Debug, Serialize)]
pub struct WindowRow {
    pub throughput_tps: f64,
    pub seconds: f64,
    pub checkpoints: u64,
    pub per_txn: PerTxn,
}

impl PerTxn {
    /// Four decimals (energy nine), so that the JSON carries no float noise.
    fn rounded(&self) -> PerTxn {
        PerTxn {
            flash_reads: r4(self.flash_reads),
            flash_programs: r4(self.flash_programs),
            flash_erases: r4(self.flash_erases),
            gc_migrations: r4(self.gc_migrations),
            translation_reads: r4(self.translation_reads),
            translation_writes: r4(self.translation_writes),
            controller_us: r4(self.controller_us),
            energy_joules: (self.energy_joules * 1e9).round() / 1e9,
            latency_us: r4(self.latency_us),
            host_cpu_us: r4(self.host_cpu_us),
            host_work: self.host_work.rounded(),
            scanned_entries: r4(self.scanned_entries),
            scanned_entries_beyond_l3: r4(self.scanned_entries_beyond_l3),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct CompareResult {
    pub workload: String,
    pub scale: u32,
    pub repeat: u32,
    pub seed: u64,
    pub terminals: u32,
    pub virtual_seconds: f64,
    /// auto, none or a virtual time (module doc: warm-up).
    pub warmup: String,
    /// TPC-C: fixed or random (--home-warehouse).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub home_warehouse: Option<kits::tpcc::HomeWarehouse>,
    /// How the database was loaded: bulk or rows (--load).
    pub load: kits::LoadMethod,
    /// The host CPU profile every row ran with (crate::cpu).
    pub cpu: crate::cpu::CpuProfile,
    /// Where the log lived (--log-device).
    pub log_device: LogDevice,
    pub device: Device,
    pub rows: Vec<Row>,
}

pub mod jobs;
pub mod paper;
mod precondition;
mod rig;
mod tpch;

pub use paper::paper_line;

/// The rows a comparison can run, in its order (`parse_stores` indexes them): the dashboard's legend.
pub use rig::ROWS as STORE_ROWS;
pub(crate) use rig::{
    build_store, counters, mean_stdev, r4, size_rig, thread_cpu_s, units_per_page, Counters,
    Device, Probe, Rig, DEFAULT_STORES, ROWS, WARMUP_DEVICE_WRITES, WARMUP_MAX_NS,
    WARMUP_MAX_TXNS_PER_DEVICE_PAGE, WARMUP_SEED, WARMUP_SLICE_NS,
};
pub use rig::{parse_stores, parse_warmup, BufferSize, LogDevice, Spec, Warmup};
pub use tpch::TpchCompareResult;

/// The scheduler's options for a window of `until_ns` from `start`: it ends at the first
/// checkpoint after `until_ns` (whole checkpoint cycles, the window's start being right after
/// one), waiting for one at most `WINDOW_CHECKPOINT_WAIT` times its length.
pub(crate) fn window_options(start: u64, until_ns: u64) -> VirtualOptions {
    VirtualOptions {
        until_ns: Some(start + until_ns),
        end_on_checkpoint_within_ns: Some(until_ns.saturating_mul(WINDOW_CHECKPOINT_WAIT)),
        ..VirtualOptions::default()
    }
}

/// A warm-up slice: `until_ns` from `start`, wherever the checkpoints are.
fn slice_options(start: u64, until_ns: u64) -> VirtualOptions {
    VirtualOptions {
        until_ns: Some(start + until_ns),
        ..VirtualOptions::default()
    }
}

/// How many window lengths a window may go on past its duration to end on a checkpoint.
const WINDOW_CHECKPOINT_WAIT: u64 = 30;

/// One measured run. It travels as JSON from a distributed row (`RowOutput`), without its trace
/// (`--results` runs on the local executor only).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunOut {
    /// Virtual time the warm-up before it took.
    pub warmup_s: f64,
    /// Host writes of the warm-up over the device's pages.
    pub warmup_writes: f64,
    pub tps: f64,
    /// TPC-C only.
    pub notpm: f64,
    /// The measured window's length (at least --duration: it ends on a drained device).
    pub window_s: f64,
    /// Checkpoints in the window, and whether it ended on one (else it gave up waiting).
    pub checkpoints: u64,
    pub ended_on_checkpoint: bool,
    pub per: PerTxn,
    pub consistency: Consistency,
    /// With --results: the window's marks and transactions.
    #[serde(skip)]
    pub trace: Option<crate::results::Trace>,
    /// The window as a round of the steady-state rule (`crate::steady`): its throughput and
    /// WAF; and how often the host had written the device over when it began.
    pub round: crate::steady::Round,
    pub device_writes: f64,
}

/// One row: the store is built, loaded and warmed up once, then measured `repeat` times in
/// consecutive windows of the same steady-state run (batch means: window k draws the inputs of
/// seed + k, the same on every row). `progress` is told each window's throughput.
#[allow(clippy::too_many_arguments)]
fn run_row(
    rig: &Rig,
    probe: &Probe,
    row: usize,
    w: &dyn Workload,
    terminals: u32,
    seed: u64,
    repeat: u32,
    until_ns: u64,
    sample_ns: Option<u64>,
    progress: &(dyn Fn(u32, &RunOut) + Sync),
) -> anyhow::Result<Vec<RunOut>> {
    let name = ROWS[row].0;
    let wall = std::time::Instant::now();
    let cpu0 = thread_cpu_s();
    let mut e = probe.copy_onto(rig, row)?;
    let loaded = &probe.loaded;
    let load_s = wall.elapsed().as_secs_f64();
    let copy_cpu_s = thread_cpu_s() - cpu0;
    let (warmup_ns, warmup_writes) = warm_up(rig, probe, &mut e, w, terminals)?;
    crate::progress::note(&format!(
        "{name}: copied in {load_s:.1} s wall ({copy_cpu_s:.1} s CPU), warmed up in {:.1} s wall ({:.1} s CPU; {:.1} s virtual, the device written over {warmup_writes:.2} times)",
        wall.elapsed().as_secs_f64() - load_s,
        thread_cpu_s() - cpu0 - copy_cpu_s,
        warmup_ns as f64 / 1e9
    ));
    let (wall1, cpu1) = (std::time::Instant::now(), thread_cpu_s());
    let mut outs = Vec::new();
    for k in 0..repeat {
        // The dashboard's live points (if it runs this comparison): one series per window.
        crate::results::set_live_series(&if repeat > 1 {
            format!("{name} #{}", k + 1)
        } else {
            name.to_string()
        });
        let out = measure_window(
            &mut e,
            loaded,
            w,
            terminals,
            seed.wrapping_add(u64::from(k)),
            until_ns,
            (warmup_ns, warmup_writes),
            sample_ns,
        )?;
        progress(k, &out);
        outs.push(out);
        // A window stops at a time: end what it left open before the next one starts.
        e.quiesce()?;
    }
    crate::progress::note(&format!(
        "{name}: {repeat} window(s) in {:.1} s wall ({:.1} s CPU)",
        wall1.elapsed().as_secs_f64(),
        thread_cpu_s() - cpu1
    ));
    Ok(outs)
}

/// The steady-state rule over a row's measured windows: they are its rounds (consecutive
/// windows of one run after the warm-up, which preconditioned the device), as SSS PTS's
/// Measurement Window is its last five rounds; fewer than five windows (`--repeat`) cannot
/// meet it. Extra rounds before the windows were not run: TPC-C's database grows with every
/// transaction, and the device is sized for the database, the warm-up and the windows.
fn steady_over_windows(runs: &[RunOut]) -> crate::steady::SteadyState {
    let samples: Vec<crate::steady::Round> = runs.iter().map(|o| o.round).collect();
    let rounds = crate::steady::Rounds {
        met: crate::steady::is_steady(&samples),
        samples,
    };
    crate::steady::SteadyState::of(&rounds, runs.first().map_or(0.0, |o| o.device_writes))
}

/// One measured window on a warmed-up engine.
#[allow(clippy::too_many_arguments)]
fn measure_window(
    e: &mut Engine,
    loaded: &Loaded,
    w: &dyn Workload,
    terminals: u32,
    seed: u64,
    until_ns: u64,
    (warmup_ns, warmup_writes): (u64, f64),
    sample_ns: Option<u64>,
) -> anyhow::Result<RunOut> {
    let before = counters(e.store());
    let writes0 = crate::steady::Writes::of(e.store().nand());
    let device_writes = crate::steady::Writes::device_writes_of(e.store().nand());
    let cpu0 = e.cpu_counts();
    let busy0 = Busy::of(e.store());
    let start = e.now();
    let ran = run_window(
        w,
        e,
        loaded,
        terminals,
        seed,
        start,
        window_options(start, until_ns),
        sample_ns,
    )?;
    let after = counters(e.store());
    let cpu = e.cpu_counts().since(&cpu0);
    let elapsed_ns = ran.end_ns - ran.start_ns;
    let consistency = measure::check(measure::Window {
        before: &busy0,
        after: &Busy::of(e.store()),
        elapsed_ns,
        terminals,
        terminals_run_throughout: true,
        txns: ran.latency_txns,
        latency_sum_ns: ran.latency_sum_ns,
    });
    let n = ran.counted.max(1) as f64;
    let secs = elapsed_ns as f64 / 1e9;
    let per_second = |x: u64| if secs > 0.0 { x as f64 / secs } else { 0.0 };
    Ok(RunOut {
        warmup_s: warmup_ns as f64 / 1e9,
        warmup_writes,
        tps: per_second(ran.counted),
        notpm: per_second(ran.new_orders) * 60.0,
        window_s: secs,
        checkpoints: ran.checkpoints,
        ended_on_checkpoint: ran.ended_on_checkpoint,
        trace: ran.trace,
        round: crate::steady::Round {
            throughput: per_second(ran.counted),
            waf: crate::steady::Writes::of(e.store().nand())
                .since(&writes0)
                .waf(),
        },
        device_writes,
        per: PerTxn {
            flash_reads: (after.reads - before.reads) as f64 / n,
            flash_programs: (after.programs - before.programs) as f64 / n,
            flash_erases: (after.erases - before.erases) as f64 / n,
            gc_migrations: (after.gc - before.gc) as f64 / n,
            translation_reads: (after.tr - before.tr) as f64 / n,
            translation_writes: (after.tw - before.tw) as f64 / n,
            controller_us: (after.ctrl_us - before.ctrl_us) / n,
            energy_joules: (after.joules - before.joules) / n,
            latency_us: ran.latency_sum_ns / ran.latency_txns.max(1) as f64 / 1000.0,
            host_cpu_us: cpu.charged_ns as f64 / n / 1000.0,
            host_work: HostWork::per_txn(&cpu, n),
            scanned_entries: (after.scanned - before.scanned) as f64 / n,
            scanned_entries_beyond_l3: (after.scanned_beyond_l3 - before.scanned_beyond_l3) as f64
                / n,
        },
        consistency,
    })
}

/// Runs the workload before the measured run (module doc: warm-up); returns its virtual length.
fn warm_up(
    rig: &Rig,
    probe: &Probe,
    e: &mut Engine,
    w: &dyn Workload,
    terminals: u32,
) -> anyhow::Result<(u64, f64)> {
    let start = e.now();
    let loaded = &probe.loaded;
    let g = &rig.nand.geometry;
    let device_pages = u64::from(g.blocks()) * u64::from(g.pages_per_block) * units_per_page(g);
    let host0 = host_writes(&counters(e.store()));
    let target = |share: f64| host0 + (device_pages as f64 * share) as u64;
    let mut slices = Slices {
        start,
        slice: 0,
        txns: 0,
        max_txns: device_pages * WARMUP_MAX_TXNS_PER_DEVICE_PAGE,
    };
    match rig.warmup {
        Warmup::None => return Ok((0, 0.0)),
        Warmup::VirtualNs(ns) => {
            run_window(
                w,
                e,
                loaded,
                terminals,
                WARMUP_SEED,
                start,
                slice_options(start, ns),
                None,
            )?;
            e.quiesce()?;
        }
        Warmup::Auto => {
            slices.run(e, w, loaded, terminals, target(WARMUP_DEVICE_WRITES as f64))?;
        }
        Warmup::Precondition => {
            let objects = probe.objects.as_deref().ok_or_else(|| {
                anyhow::anyhow!(
                    "--warmup precondition: the loaded database's page objects were not read"
                )
            })?;
            e.count_page_io();
            slices.run(
                e,
                w,
                loaded,
                terminals,
                target(precondition::SAMPLE_DEVICE_WRITES),
            )?;
            let sample = e.take_page_io().unwrap_or_default();
            if let Some(mut replay) = precondition::Replay::new(&sample, objects, WARMUP_SEED)? {
                let until = target(WARMUP_DEVICE_WRITES as f64 - precondition::TAIL_DEVICE_WRITES);
                let mut ops = Vec::with_capacity(precondition::REPLAY_BATCH);
                let mut recent = storage::ReplayPages::new(rig.frames);
                let mut done = storage::Replayed::default();
                while host_writes(&counters(e.store())) < until {
                    replay.draw(precondition::REPLAY_BATCH, &mut ops);
                    let d = e.replay_page_io(&ops, &mut recent)?;
                    done.reads += d.reads;
                    done.writes += d.writes;
                    done.writes_read_first += d.writes_read_first;
                    done.skipped += d.skipped;
                    if done.writes == 0 && replay.passes() > 0 {
                        bail!("--warmup precondition: a whole pass over the sample wrote no page (none of its pages is allocated any more)");
                    }
                }
                let (moved, over) = replay.moved();
                crate::progress::note(&format!(
                    "precondition: sampled {} reads and {} write-backs ({} transactions); replayed them {} times ({} background pages moved over {over} each time): {} reads, {} writes ({} read first), {} skipped",
                    sample.total_reads(),
                    sample.total_writes(),
                    slices.txns,
                    replay.passes(),
                    moved,
                    done.reads,
                    done.writes,
                    done.writes_read_first,
                    done.skipped
                ));
            }
            slices.run(e, w, loaded, terminals, target(WARMUP_DEVICE_WRITES as f64))?;
        }
    }
    e.checkpoint()?;
    let written = host_writes(&counters(e.store())) - host0;
    Ok((e.now() - start, written as f64 / device_pages as f64))
}

/// The auto warm-up's slices of the workload, each drawing other inputs (the same on every row,
/// never a measured run's), bounded in work and virtual time over the whole warm-up.
struct Slices {
    start: u64,
    slice: u64,
    txns: u64,
    max_txns: u64,
}

impl Slices {
    /// Runs slices until the store's host writes reach `until` (or a bound is hit).
    fn run(
        &mut self,
        e: &mut Engine,
        w: &dyn Workload,
        loaded: &Loaded,
        terminals: u32,
        until: u64,
    ) -> anyhow::Result<()> {
        while host_writes(&counters(e.store())) < until
            && self.txns < self.max_txns
            && e.now() - self.start < WARMUP_MAX_NS
        {
            let now = e.now();
            let ran = run_window(
                w,
                e,
                loaded,
                terminals,
                WARMUP_SEED.wrapping_add(self.slice),
                now,
                slice_options(now, WARMUP_SLICE_NS),
                None,
            )?;
            self.txns += ran.latency_txns;
            // The slice stopped mid-transaction: end those before the next terminals start.
            e.quiesce()?;
            self.slice += 1;
        }
        Ok(())
    }
}

/// 4 KiB units the store wrote for the engine (DB pages, log, metadata): every program that is
/// not a GC or wear-levelling copy or a DFTL translation page, counted in units (a program
/// writes a page of them, full or not; GC counts the units it moves; a translation page takes
/// a whole flash page).
fn host_writes(c: &Counters) -> u64 {
    let upp = c.units_per_page.max(1);
    (c.programs * upp).saturating_sub(c.gc + c.tw * upp)
}

fn average(runs: &[RunOut]) -> PerTxn {
    let n = runs.len().max(1) as f64;
    let mut p = PerTxn::default();
    for r in runs {
        let q = r.per;
        p.flash_reads += q.flash_reads / n;
        p.flash_programs += q.flash_programs / n;
        p.flash_erases += q.flash_erases / n;
        p.gc_migrations += q.gc_migrations / n;
        p.translation_reads += q.translation_reads / n;
        p.translation_writes += q.translation_writes / n;
        p.controller_us += q.controller_us / n;
        p.energy_joules += q.energy_joules / n;
        p.latency_us += q.latency_us / n;
        p.host_cpu_us += q.host_cpu_us / n;
        p.scanned_entries += q.scanned_entries / n;
        p.scanned_entries_beyond_l3 += q.scanned_entries_beyond_l3 / n;
        p.host_work.add_scaled(&q.host_work, 1.0 / n);
    }
    p
}

/// What one scale of a comparison gave, handed to the caller before the strict check.
#[derive(Debug)]
pub enum Outcome<'a> {
    /// The transactional workloads (TPC-B, TATP, TPC-C): throughput per store.
    Stores(&'a CompareResult),
    /// TPC-H: seconds per query per store.
    Tpch(&'a TpchCompareResult),
}

/// Called after each scale with its label (`sf48`, or `tpcc-sf5` with `--workload all`, under
/// `paper`; None otherwise) and its result: the CLI writes the JSON and prints the table.
pub type OnScale<'a> = dyn FnMut(Option<&str>, Outcome<'_>) -> anyhow::Result<()> + 'a;

/// The scales `args` asks for, each as a spec of its own with its label (`sf48`, or
/// `tpcc-sf5` with `--workload all`, under `paper`; None otherwise). TPC-H is not planned here
/// (`tpch::run`).
fn scales(args: &Spec) -> anyhow::Result<Vec<(Option<String>, Spec)>> {
    if args.sf.is_some() {
        bail!("--sf is TPC-H's scale factor (--workload tpch)");
    }
    if !args.paper {
        if args.workload == "all" {
            bail!("--workload all is for --paper (the paper's six scales, TPC-B and TPC-C)");
        }
        return Ok(vec![(None, args.clone())]);
    }
    let plan: Vec<(&str, u32)> = match args.workload.as_str() {
        "tpcb" => PAPER_SCALES_TPCB.iter().map(|&s| ("tpcb", s)).collect(),
        "tpcc" => PAPER_SCALES_TPCC.iter().map(|&s| ("tpcc", s)).collect(),
        "all" => PAPER_SCALES_TPCB
            .iter()
            .map(|&s| ("tpcb", s))
            .chain(PAPER_SCALES_TPCC.iter().map(|&s| ("tpcc", s)))
            .collect(),
        other => bail!(
            "--paper runs the NoFTL paper's scales, which it gives for tpcb and tpcc (or all: both), not '{other}'"
        ),
    };
    Ok(plan
        .into_iter()
        .map(|(workload, scale)| {
            let mut one = args.clone();
            one.workload = workload.into();
            if workload != "tpcc" {
                // --workload all: --home-warehouse is for its TPC-C scales.
                one.home_warehouse = None;
            }
            one.scale = Some(scale);
            one.paper = false;
            if one.stores.is_none() {
                one.stores = Some(PAPER_STORES.split(',').map(String::from).collect());
            }
            one.duration = one.duration.or(Some(PAPER_WINDOW.into()));
            let label = if args.workload == "all" {
                format!("{workload}-sf{scale}")
            } else {
                format!("sf{scale}")
            };
            one.results = args.results.as_ref().map(|d| d.join(&label));
            (Some(label), one)
        })
        .collect())
}

/// Every check of `args` that needs no work (no load, no device, no file written): what
/// [`run`] refuses before its first load, so that a caller (the Python package) can tell bad
/// input from a run that failed. TPC-H's are in its run.
pub fn check(args: &Spec) -> anyhow::Result<()> {
    if args.workload == "tpch" {
        return Ok(());
    }
    crate::units::parse_duration_ns(&args.sample_window)
        .map_err(|e| anyhow::anyhow!("--sample-window: {e}"))?;
    for (_, one) in scales(args)? {
        checked_scale(&one)?;
    }
    Ok(())
}

/// Runs the comparison `args` describes, one scale at a time (the paper's scales with
/// `paper`), calling `on_scale` with each scale's result.
pub fn run(args: &Spec, on_scale: &mut OnScale<'_>) -> anyhow::Result<()> {
    if args.workload == "tpch" {
        return tpch::run(args, &mut |r| on_scale(None, Outcome::Tpch(r)));
    }
    let scales = scales(args)?;
    let wall = std::time::Instant::now();
    for (label, one) in &scales {
        let t = std::time::Instant::now();
        run_scale(one, label.as_deref(), on_scale)?;
        if label.is_some() {
            eprintln!(
                "{} scale {}: {:.1} min wall ({:.1} min so far)",
                one.workload,
                one.scale.unwrap_or_default(),
                t.elapsed().as_secs_f64() / 60.0,
                wall.elapsed().as_secs_f64() / 60.0
            );
        }
    }
    Ok(())
}

/// How many rows can run at once: each holds a device of `device_bytes` in RAM, beside the
/// loaded database's `probe_bytes`. Fewer than asked (down to one, said on standard error) when
/// that many do not fit in 90% of the available memory; an error when not even one does.
/// `cap`: the most the rows and the loaded database may take beside other work of the process
/// (`Spec::memory_cap_bytes`), counting the database (`cap_probe_bytes`) even when it is
/// resident already.
fn jobs_that_fit(
    scale: u32,
    device_bytes: u64,
    probe_bytes: u64,
    jobs: usize,
    (cap, cap_probe_bytes): (Option<u64>, u64),
) -> anyhow::Result<usize> {
    let capped = |j: usize| match cap {
        Some(c) => (1..=j)
            .rev()
            .find(|&k| cap_probe_bytes + device_bytes * k as u64 <= c)
            .unwrap_or(1),
        None => j,
    };
    let jobs = capped(jobs);
    let Some(avail) = crate::limits::available_memory_bytes() else {
        return Ok(jobs);
    };
    let budget = avail / 10 * 9;
    let need = |j: usize| probe_bytes + device_bytes * j as u64;
    let fit = (1..=jobs).rev().find(|&j| need(j) <= budget);
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    match fit {
        Some(j) if j == jobs => Ok(j),
        Some(j) => {
            eprintln!(
                "note: scale {scale}: {jobs} devices of {:.1} GiB do not fit in {:.1} GiB of available memory: running {j} at a time",
                gib(device_bytes),
                gib(avail)
            );
            Ok(j)
        }
        None => bail!(
            "scale {scale} needs about {:.1} GiB of RAM (a device of {:.1} GiB and the loaded database of {:.1} GiB), and {:.1} GiB is available: use a larger machine",
            gib(need(1)),
            gib(device_bytes),
            gib(probe_bytes),
            gib(avail)
        ),
    }
}

/// Runs every selected row (`jobs` at a time, each on its own copy of the loaded database) and
/// returns their windows in the order of `selected`; the first row that fails fails the scale.
#[allow(clippy::too_many_arguments)]
fn run_rows(
    args: &Spec,
    rig: &Rig,
    probe: &Probe,
    w: &dyn Workload,
    selected: &[usize],
    jobs: usize,
    until_ns: u64,
    sample_ns: Option<u64>,
) -> anyhow::Result<Vec<Option<Vec<RunOut>>>> {
    let results: Mutex<Vec<Option<Vec<RunOut>>>> = Mutex::new(vec![None; selected.len()]);
    let next = AtomicUsize::new(0);
    let failed: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let done = AtomicUsize::new(0);
    let windows = selected.len() * args.repeat as usize;
    // One phase for every row's windows (progress invariant 2): the threads count into it.
    let bar = crate::progress::phase("compare", windows as u64, "windows");
    let live = crate::results::live_hook();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                crate::results::set_live(live.clone());
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= selected.len() {
                    break;
                }
                let row = selected[i];
                let progress = |k: u32, out: &RunOut| {
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    bar.inc(1);
                    crate::progress::note(&format!(
                        "[{n}/{windows}] {} repeat {}: {:.1} tx/s{}",
                        ROWS[row].0,
                        k + 1,
                        out.tps,
                        if out.consistency.is_ok() {
                            ""
                        } else {
                            " (consistency: violated)"
                        }
                    ));
                };
                match run_row(
                    rig,
                    probe,
                    row,
                    w,
                    args.terminals,
                    args.seed,
                    args.repeat,
                    until_ns,
                    sample_ns,
                    &progress,
                ) {
                    Ok(outs) => {
                        if let Ok(mut r) = results.lock() {
                            r[i] = Some(outs);
                        }
                    }
                    Err(e) => {
                        if let Ok(mut f) = failed.lock() {
                            f.get_or_insert(e.context(ROWS[row].0));
                        }
                        break;
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(e);
    }
    let results = results
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a worker panicked"))?;
    Ok(results)
}

/// A store's row of the table from its measured windows (`native_tps`: the native row's mean,
/// for the slowdown; the native row is first when selected).
fn row_of(name: &str, runs: &[RunOut], native_tps: f64, notpm: Option<f64>) -> Row {
    let tps: Vec<f64> = runs.iter().map(|o| o.tps).collect();
    let (m, sd) = mean_stdev(&tps);
    let p = average(runs);
    Row {
        storage: name.into(),
        throughput_tps: r4(m),
        notpm,
        stdev: r4(sd),
        slowdown: r4(if m > 0.0 { native_tps / m } else { 0.0 }),
        runs_tps: tps.iter().map(|&x| r4(x)).collect(),
        warmup_seconds: r4(runs.iter().map(|o| o.warmup_s).sum::<f64>() / runs.len().max(1) as f64),
        warmup_device_writes: r4(runs.first().map_or(0.0, |o| o.warmup_writes)),
        window_seconds: r4(runs.iter().map(|o| o.window_s).sum::<f64>() / runs.len().max(1) as f64),
        window_checkpoints: r4(
            runs.iter().map(|o| o.checkpoints as f64).sum::<f64>() / runs.len().max(1) as f64
        ),
        windows_without_checkpoint: runs.iter().filter(|o| !o.ended_on_checkpoint).count() as u32,
        consistency: Consistency::merge(
            runs.iter()
                .enumerate()
                .map(|(k, o)| (format!("repeat {}", k + 1), &o.consistency)),
        ),
        steady_state: steady_over_windows(runs),
        per_txn: p.rounded(),
        windows: runs
            .iter()
            .map(|o| WindowRow {
                throughput_tps: r4(o.tps),
                seconds: r4(o.window_s),
                checkpoints: o.checkpoints,
                per_txn: o.per.rounded(),
            })
            .collect(),
    }
}

/// The device's flash pages must hold whole 4 KiB DB pages, and `dftl-orig` (published for 4 KiB
/// pages) runs only on 4 KiB pages: refused before the long load.
fn refuse_page_size(args: &Spec, selected: &[usize]) -> anyhow::Result<()> {
    let page_size = args.device.load()?.geometry.page_size_bytes as usize;
    if page_size != 4096 {
        if !page_size.is_multiple_of(4096) {
            bail!("compare maps 4 KiB DB pages onto flash pages of a whole number of them; the device has {page_size}-byte pages");
        }
        if let Some(&i) = selected.iter().find(|&&i| ROWS[i].1 == Some("dftl-orig")) {
            bail!(
                "{} maps 4 KiB pages one to one onto flash pages, as published; on {page_size}-byte pages leave it out of --stores (native, dftl-N% and page map 4 KiB units inside larger pages)",
                ROWS[i].0
            );
        }
    }
    Ok(())
}

/// A scale's spec, checked before any work: its workload, the counts, durations, stores and
/// page size, and whether the loaded database would fit in memory (from the kit's estimate).
struct Checked {
    w: Box<dyn Workload>,
    scale: u32,
    until_ns: u64,
    selected: Vec<usize>,
    /// RAM one row takes, from the kit's estimate: its device and the loaded database.
    row_memory_bytes: u64,
}

fn checked_scale(args: &Spec) -> anyhow::Result<Checked> {
    if !matches!(args.workload.as_str(), "tpcb" | "tatp" | "tpcc") {
        bail!(
            "compare runs --workload tpcb, tatp or tpcc, not '{}'",
            args.workload
        );
    }
    let tpcc_reduced = match args.tpcc_reduced.as_deref() {
        Some(&[items, customers]) => Some((items, customers)),
        Some(other) => bail!(
            "--tpcc-reduced takes two numbers (items, customers per district), not {}",
            other.len()
        ),
        None => None,
    };
    let (w, scale) = crate::workloads::make(
        &args.workload,
        &crate::workload::Params {
            scale: args.scale,
            seed: args.seed,
            accounts_per_branch: args.accounts_per_branch,
            tpcc_reduced,
            home_warehouse: args.home_warehouse.clone(),
        },
    )?;
    w.load_method(args.load)?;
    if scale == 0 || args.repeat == 0 || args.terminals == 0 || args.accounts_per_branch == 0 {
        bail!("--scale, --repeat, --terminals and --accounts-per-branch must be at least 1");
    }
    let until_ns = crate::units::parse_duration_ns(args.duration.as_deref().unwrap_or("10s"))?;
    parse_warmup(&args.warmup)?; // refused before the long load, not after it
    let stores: Vec<String> = match &args.stores {
        Some(s) => s.clone(),
        None => DEFAULT_STORES.split(',').map(String::from).collect(),
    };
    let selected = parse_stores(&stores)?;
    refuse_page_size(args, &selected)?;
    // Refused before the long load, from the kit's estimate of the database's size.
    let est_pages = w.db_pages_estimate();
    let device_bytes = ((est_pages + est_pages / 8) as f64 * 4096.0 / (1.0 - args.op)) as u64;
    let probe_ram_bytes = match crate::scratch::place(rig::probe_estimate_bytes(&*w)) {
        crate::scratch::Place::Ram(_) => est_pages * 4096,
        crate::scratch::Place::Disk(_) => 0,
    };
    jobs_that_fit(scale, device_bytes, probe_ram_bytes, 1, (None, 0))?;
    Ok(Checked {
        w,
        scale,
        until_ns,
        selected,
        row_memory_bytes: device_bytes + est_pages * 4096,
    })
}

fn run_scale(args: &Spec, label: Option<&str>, on_scale: &mut OnScale<'_>) -> anyhow::Result<()> {
    let checked = checked_scale(args)?;
    let plan = args
        .results
        .as_deref()
        .map(|dir| crate::results::Plan::new(dir, &args.sample_window, args.raw))
        .transpose()?;
    let (rig, probe) = prepare_scale(args, &checked)?;
    let g = &rig.nand.geometry;
    // Every device keeps its data in RAM, and so may the loaded database they are copied from
    // (checked before the load, from the kit's estimate; `crate::scratch`). If it is in RAM it
    // is resident by now, so available memory already excludes it, but a cap counts it.
    let jobs = jobs_that_fit(
        checked.scale,
        g.capacity_bytes(),
        0,
        args.jobs.clamp(1, checked.selected.len()),
        (args.memory_cap_bytes, probe.ram_bytes),
    )?;
    let results = run_rows(
        args,
        &rig,
        &probe,
        &*checked.w,
        &checked.selected,
        jobs,
        checked.until_ns,
        plan.as_ref().map(|p| p.window_ns),
    )?;
    let res = assemble(args, &checked, &Shared::of(&rig), &results)?;
    if let Some(p) = &plan {
        let w = &*checked.w;
        write_results(
            p,
            &res,
            w,
            checked.scale,
            args.terminals,
            &checked.selected,
            &results,
        )?;
    }
    finish(args, label, &checked, &res, on_scale)
}

/// A scale's device, sized for its database, and the loaded database every row is copied
/// from (what each distributed row also does on its own: `jobs::run_row`).
fn prepare_scale(args: &Spec, c: &Checked) -> anyhow::Result<(Rig, Probe)> {
    let w = &*c.w;
    if let (Some([items, customers]), "tpcc") =
        (args.tpcc_reduced.as_deref(), args.workload.as_str())
    {
        eprintln!("note: REDUCED TPC-C population ({items} items, {customers} customers per district): not the specification's");
    }
    w.load_method(args.load)?;
    eprintln!(
        "measuring the database of {} scale {} ...",
        w.label(),
        c.scale
    );
    let (rig, probe) = size_rig(args, w)?;
    if c.selected.contains(&0) && rig.log_region.is_some() {
        // The log's region must fit the sized device: refused before the copies and warm-ups.
        drop(build_store(&rig, 0)?);
    }
    let g = &rig.nand.geometry;
    eprintln!(
        "device: {} with {} blocks ({:.1} MiB), {} DB pages + {}-block log, spare factor {:.2}%, {} buffer frames",
        rig.nand.name,
        g.blocks(),
        g.capacity_bytes() as f64 / (1 << 20) as f64,
        rig.db_pages,
        rig.log_blocks,
        rig.spare * 100.0,
        rig.frames
    );
    Ok((rig, probe))
}

/// What every row of a scale shares from its rig: the part of the result that is not a row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Shared {
    pub cpu: crate::cpu::CpuProfile,
    pub log_device: LogDevice,
    pub device: Device,
}

impl Shared {
    fn of(rig: &Rig) -> Shared {
        Shared {
            cpu: rig.cpu.clone(),
            log_device: rig.log_device,
            device: Device::of(rig),
        }
    }
}

/// A scale's result from its rows' measured windows (`results`, in the order of
/// `c.selected`), however they ran: in this process, or one row per task (`jobs`).
fn assemble(
    args: &Spec,
    c: &Checked,
    shared: &Shared,
    results: &[Option<Vec<RunOut>>],
) -> anyhow::Result<CompareResult> {
    let w = &*c.w;
    let mut rows = Vec::new();
    let mut native_tps = 0.0;
    for &r in &c.selected {
        let name = ROWS[r].0;
        let runs: Vec<RunOut> = c
            .selected
            .iter()
            .zip(results)
            .filter(|(row, _)| **row == r)
            .find_map(|(_, o)| o.clone())
            .unwrap_or_default();
        let (m, _) = mean_stdev(&runs.iter().map(|o| o.tps).collect::<Vec<_>>());
        let notpm = w
            .counts_new_orders()
            .then(|| r4(runs.iter().map(|o| o.notpm).sum::<f64>() / runs.len().max(1) as f64));
        if r == 0 {
            native_tps = m;
        }
        rows.push(row_of(name, &runs, native_tps, notpm));
    }
    Ok(CompareResult {
        workload: args.workload.clone(),
        scale: c.scale,
        repeat: args.repeat,
        seed: args.seed,
        terminals: args.terminals,
        virtual_seconds: c.until_ns as f64 / 1e9,
        warmup: args.warmup.clone(),
        home_warehouse: w.home_warehouse(),
        load: w.load_method(args.load)?,
        cpu: shared.cpu.clone(),
        log_device: shared.log_device,
        device: shared.device.clone(),
        rows,
    })
}

/// Hands a scale's result to the caller, then the checks that fail a strict comparison.
fn finish(
    args: &Spec,
    label: Option<&str>,
    c: &Checked,
    res: &CompareResult,
    on_scale: &mut OnScale<'_>,
) -> anyhow::Result<()> {
    on_scale(label, Outcome::Stores(res))?;
    refuse_violations(res, c.w.label(), args.strict)?;
    crate::steady::refuse_unsteady(
        args.strict,
        res.rows
            .iter()
            .map(|r| (r.storage.as_str(), &r.steady_state)),
    )
}

/// Warns about the rows whose measured windows broke a physical bound (their figures are not
/// results), and fails with `strict`.
fn refuse_violations(res: &CompareResult, label: &str, strict: bool) -> anyhow::Result<()> {
    let violated: Vec<&str> = res
        .rows
        .iter()
        .filter(|r| !r.consistency.is_ok())
        .map(|r| r.storage.as_str())
        .collect();
    if !violated.is_empty() {
        eprintln!(
            "warning: {} scale {}: the measured windows of {} break a physical bound (consistency: violated); their figures are not results",
            label,
            res.scale,
            violated.join(", ")
        );
        if strict {
            bail!(
                "--strict: {} row(s) violated their consistency check",
                violated.len()
            );
        }
    }
    Ok(())
}

/// The result directory of a comparison (crate::results): summary.json is the JSON with
/// BenchBase's names added at the top (over every row's measured windows, one after another)
/// and per row (over the row's measured windows); the per-window files and raw.csv have a row
/// per window or transaction of every store and repeat.
fn write_results(
    plan: &crate::results::Plan,
    res: &CompareResult,
    w: &dyn Workload,
    scale: u32,
    terminals: u32,
    selected: &[usize],
    results: &[Option<Vec<RunOut>>],
) -> anyhow::Result<()> {
    use crate::results as r;
    let mut v = serde_json::to_value(res)?;
    let mut traces = Vec::new();
    for (i, &row) in selected.iter().enumerate() {
        let runs = results.get(i).and_then(|o| o.as_ref());
        let mut events = Vec::new();
        let mut secs = 0.0;
        for (k, o) in runs.into_iter().flatten().enumerate() {
            secs += o.window_s;
            if let Some(t) = &o.trace {
                events.extend_from_slice(&t.events);
                let mut t = t.clone();
                t.labels = vec![ROWS[row].0.to_string(), (k + 1).to_string()];
                traces.push(t);
            }
        }
        if let Some(obj) = v["rows"].get_mut(i).and_then(|x| x.as_object_mut()) {
            obj.extend(r::benchbase(&events, (secs * 1e9).round() as u64));
        }
    }
    let types = w.txn_types();
    let scale = scale.to_string();
    let c = r::Contents {
        bench: w.name(),
        scalefactor: Some(&scale),
        terminals: Some(terminals),
        isolation: Some(r::ENGINE_ISOLATION),
        traces: &traces,
        label_cols: &["storage", "repeat"],
        types: &types,
        unit: r::Unit::Txn,
        device: None,
    };
    r::write_dir(plan, &v, &c, None, &[])
}
