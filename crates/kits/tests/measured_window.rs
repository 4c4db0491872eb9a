//! The measured window (storage::sched::run_virtual, storage::measure) on small single-die
//! flash devices: each test reproduces one way a window used to miscount and shows that the
//! window now covers every flash operation counted in it and counts every commit requested in it.
//!
//! 1. A checkpoint run by a commit wrote back thousands of pages while its time was outside the
//!    window.
//! 2. A page-cleaner batch straddled the stop: its writes were counted, their time was not.
//! 3. A checkpoint stopped the terminal whose commit made it due (so whether one fell into a
//!    window decided a store's throughput); it now runs in the background.
//! 4. A log force in flight at the stop ended the window at its submission, not its completion,
//!    and the commits it covered were not counted.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use ftl::FtlOptions;
use kits::tpcb::{self, TpcbConfig, TpcbTerminal};
use nand::{DeviceConfig, Nand};
use storage::measure::{self, Busy, Consistency};
use storage::sched::{run_virtual, SchedStats, VirtualOptions};
use storage::{BlockPageStore, Engine, EngineConfig, NativeConfig, NativeStore, PageStore};

const CFG: TpcbConfig = TpcbConfig {
    scale: 1,
    tellers_per_branch: 10,
    accounts_per_branch: 20_000,
};

/// The NoFTL paper's emulator (one die, 64 x 4 KiB pages a block) with 96 blocks (24 MiB).
fn flash(seed: u64) -> Nand {
    let cfg = DeviceConfig::preset(
        "noftl13",
        &[
            "geometry.blocks_per_plane=96".to_string(),
            format!("seed={seed}"),
        ],
    )
    .unwrap();
    Nand::new(cfg).unwrap()
}

fn store(kind: &str, seed: u64) -> Box<dyn PageStore> {
    let nand = flash(seed);
    if kind == "native" {
        return Box::new(
            NativeStore::format(
                nand,
                NativeConfig {
                    log_blocks: Some(256),
                    spare_factor: 0.2,
                    seed,
                    ..NativeConfig::default()
                },
            )
            .unwrap(),
        );
    }
    let opts = FtlOptions {
        spare_factor: 0.2,
        seed,
        ..FtlOptions::default()
    };
    Box::new(BlockPageStore::new(ftl::build(kind, nand, &opts).unwrap(), 4096, Some(256)).unwrap())
}

struct Measured {
    stats: SchedStats,
    busy: (Busy, Busy),
    consistency: Consistency,
    checkpoints: u64,
    /// Commits still waiting for their force after the window (must be none).
    commits_left: u64,
    device_idle_ns: u64,
}

/// Loads TPC-B, then measures one window of `until_ns`.
fn measure_window(
    kind: &str,
    frames: usize,
    checkpoint_bytes: Option<u64>,
    terminals: u32,
    until_ns: u64,
) -> Measured {
    measure_window_with(
        kind,
        frames,
        checkpoint_bytes,
        terminals,
        until_ns,
        None,
        1_000_000,
    )
}

/// `measure_window`, the window ending at a checkpoint when `end_on_checkpoint_within_ns`.
fn measure_window_with(
    kind: &str,
    frames: usize,
    checkpoint_bytes: Option<u64>,
    terminals: u32,
    until_ns: u64,
    end_on_checkpoint_within_ns: Option<u64>,
    flusher_period_ns: u64,
) -> Measured {
    let mut e = Engine::create(
        store(kind, 7),
        EngineConfig {
            buffer_frames: frames,
            checkpoint_bytes,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let h = tpcb::load(&mut e, CFG, |_| {}).unwrap();
    e.checkpoint().unwrap();
    let busy0 = Busy::of(e.store());
    let ckpt0 = e.stats().checkpoints;
    let mut terms: Vec<TpcbTerminal> = (0..terminals)
        .map(|i| TpcbTerminal::new(i, h, CFG, 3, None))
        .collect();
    let start = e.now();
    let stats = run_virtual(
        &mut e,
        &mut terms,
        start,
        VirtualOptions {
            until_ns: Some(start + until_ns),
            end_on_checkpoint_within_ns,
            flusher_period_ns,
            ..VirtualOptions::default()
        },
    )
    .unwrap();
    let busy1 = Busy::of(e.store());
    let consistency = measure::check(measure::Window {
        before: &busy0,
        after: &busy1,
        elapsed_ns: stats.elapsed_ns(),
        terminals,
        terminals_run_throughout: true,
        txns: terms.iter().map(|t| t.latency_ns.len()).sum(),
        latency_sum_ns: terms
            .iter()
            .map(|t| t.latency_ns.mean() * t.latency_ns.len() as f64)
            .sum(),
    });
    let checkpoints = e.stats().checkpoints - ckpt0;
    let device_idle_ns = e.device_idle_ns();
    let (commits_left, _) = e.quiesce().unwrap();
    let rep = tpcb::check(&mut e, CFG).unwrap();
    assert!(rep.passed(), "{:?}", rep.problems);
    Measured {
        stats,
        busy: (busy0, busy1),
        consistency,
        checkpoints,
        commits_left,
        device_idle_ns,
    }
}

fn assert_window_covers_its_work(kind: &str, m: &Measured) {
    assert!(
        m.consistency.is_ok(),
        "{kind}: {:?} ({:?})",
        m.consistency.violations,
        m.consistency
    );
    assert!(m.consistency.die_busy_fraction_max.unwrap() <= 1.0);
    assert!(
        m.device_idle_ns <= m.stats.end_ns,
        "{kind}: the device works until {} after the window ended at {}",
        m.device_idle_ns,
        m.stats.end_ns
    );
    assert_eq!(
        m.commits_left, 0,
        "{kind}: a commit requested in the window was left unacknowledged"
    );
}

#[test]
fn a_checkpoint_that_writes_back_the_pool_is_inside_the_window() {
    for kind in ["page", "dftl", "native"] {
        // The pool holds the whole database, so only checkpoints write pages back; one is due
        // every 64 KiB of log.
        let m = measure_window(kind, 2_000, Some(64 << 10), 1, 2_000_000_000);
        assert!(m.checkpoints >= 2, "{kind}: {} checkpoints", m.checkpoints);
        assert_window_covers_its_work(kind, &m);
    }
}

#[test]
fn cleaner_writes_that_outlive_the_stop_are_inside_the_window() {
    for kind in ["page", "dftl", "native"] {
        // A small pool keeps the cleaner busy to the end; a short window stops it mid-way.
        let m = measure_window(kind, 64, None, 1, 300_000_000);
        assert!(m.stats.flusher_runs > 10, "{kind}: the cleaner ran");
        assert_window_covers_its_work(kind, &m);
    }
}

#[test]
fn a_checkpoint_does_not_stop_the_terminal() {
    for kind in ["page", "native"] {
        let m = measure_window(kind, 2_000, Some(64 << 10), 1, 2_000_000_000);
        assert!(m.checkpoints >= 2);
        // The terminal is in a transaction nearly all the time: the checkpoints' writes slow
        // its I/O (they share the die), they do not halt it.
        let little = m.consistency.little_law_ratio.unwrap();
        assert!(little > 0.95, "{kind}: Little's law ratio {little}");
    }
}

#[test]
fn commits_waiting_for_a_force_at_the_stop_are_acknowledged_inside_the_window() {
    for kind in ["page", "native"] {
        // Eight terminals share group-commit forces: some always wait for one at the stop.
        for until_ms in [50, 137, 400] {
            let m = measure_window(kind, 128, None, 8, until_ms * 1_000_000);
            assert!(m.stats.group_forces > 0);
            assert_window_covers_its_work(kind, &m);
        }
    }
}

#[test]
fn a_window_can_end_on_whole_checkpoint_cycles() {
    for kind in ["page", "native"] {
        // A checkpoint every 256 KiB of log: a window waits past its duration for the next.
        // Several durations, and background work looked for every 10 us: a terminal's last
        // step before the stop then always leaves background events behind it before the stop
        // (a stop with only background work left once skipped the wait).
        for until_ms in [20, 50, 100, 137, 250] {
            let until_ns = until_ms * 1_000_000;
            let m = measure_window_with(
                kind,
                2_000,
                Some(256 << 10),
                1,
                until_ns,
                Some(20_000_000_000),
                10_000,
            );
            assert!(
                m.stats.ended_on_checkpoint,
                "{kind} {until_ms} ms: the window found its checkpoint"
            );
            assert!(m.checkpoints >= 1 && m.stats.checkpoints == m.checkpoints);
            assert!(m.stats.elapsed_ns() >= until_ns);
            assert_window_covers_its_work(kind, &m);
        }
        // Without the option the same window stops at its duration.
        let plain = measure_window(kind, 2_000, Some(256 << 10), 1, 100_000_000);
        assert!(!plain.stats.ended_on_checkpoint);
    }
}

#[test]
fn a_window_cut_short_is_reported_violated() {
    let m = measure_window("page", 64, None, 1, 300_000_000);
    assert!(m.consistency.is_ok());
    let d = m.consistency.die_busy_fraction_max.unwrap();
    assert!(d > 0.8, "a single-die TPC-B keeps its die busy ({d})");
    // The same counters over the window a run that lost 40% of its time would report (as the
    // checkpoint inside a commit once made it).
    let wrong = measure::check(measure::Window {
        before: &m.busy.0,
        after: &m.busy.1,
        elapsed_ns: m.stats.elapsed_ns() * 6 / 10,
        terminals: 1,
        terminals_run_throughout: true,
        txns: 0,
        latency_sum_ns: 0.0,
    });
    assert_eq!(wrong.status, "violated", "{wrong:?}");
    assert!(
        wrong.violations[0].contains("die"),
        "{:?}",
        wrong.violations
    );
}
