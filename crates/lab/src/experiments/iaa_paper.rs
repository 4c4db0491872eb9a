//! The IAA paper's model (`kits::iaa_paper`: rows read-modify-written at their LPA, free
//! deletes, no log, no index, no buffer pool) in the free-space sweep (`noftl iaa compare
//! --model paper`), and the ablation from it to the engine, one assumption at a time (`noftl
//! iaa ablation`; docs/iaa.md).
//!
//! A run: a fresh device and store (`iaa::build_store`, DB pages of `spec.page_size`); the
//! table sized so that it (and, under the index assumption, its index; under the log
//! assumption, the log) leaves `free` of the store's logical capacity unused, loaded in page
//! order; a warm-up until the host wrote `spec.warmup` device capacities; rounds of
//! `spec.round` until steady (`crate::steady`, at most `spec.max_rounds`); then the measured
//! window of `spec.duration` in virtual time, one query at a time, with the same counters,
//! figures and `consistency` check as the engine's rows (`iaa::base_row`).

use anyhow::bail;
use hdrhistogram::Histogram;
use kits::iaa::Scheme;
use kits::iaa_paper::{index_pages, Assumptions, PaperConfig, PaperEngine};
use serde::Serialize;
use storage::pagestore::LOG_BLOCK_BYTES;
use storage::PageStore;

use super::iaa::{base_row, build_store, relate, Model, Row, Spec};
use crate::measure::{consistency, per_txn, store_snapshot};
use crate::steady::{until_steady, Round, SteadyState, Writes};
use crate::units::parse_duration_ns;

/// Table pages that, with the index (if assumed) and the log (if assumed), leave `free` of
/// `capacity_bytes` unused.
fn table_pages(
    page_bytes: usize,
    row_bytes: usize,
    density: f64,
    capacity_bytes: u64,
    free: f64,
    log_bytes: u64,
    index: bool,
) -> u64 {
    let usable = capacity_bytes as f64 * (1.0 - free) - log_bytes as f64;
    let rows_per_page = (page_bytes / row_bytes) as f64 * density;
    let per_page = page_bytes as f64
        + if index {
            // The index's share per table page (`index_pages` rounds up by one leaf at most).
            rows_per_page * kits::iaa_paper::INDEX_ENTRY_BYTES as f64
        } else {
            0.0
        };
    let mut pages = (usable / per_page).floor().max(4.0) as u64;
    let rows = |p: u64| (p as f64 * rows_per_page) as u64;
    while index
        && pages > 4
        && (pages + index_pages(rows(pages), page_bytes)) as f64 * page_bytes as f64 > usable
    {
        pages -= 1;
    }
    pages
}

/// `iaa compare` for either model (`spec.model`): `iaa::run` with this module's run of the
/// paper's model (the seam `iaa::PaperRun`; this module builds on `iaa`, not the reverse).
pub fn run(
    spec: &Spec,
    plan: Option<&crate::results::Plan>,
    on_run_done: &(dyn Fn() + Sync),
) -> anyhow::Result<super::iaa::Sweep> {
    super::iaa::run(spec, plan, on_run_done, &|s, free, scheme| {
        run_one(s, free, scheme, Assumptions::default())
    })
}

/// One run of the paper model under `assume`.
pub fn run_one(spec: &Spec, free: f64, scheme: Scheme, assume: Assumptions) -> anyhow::Result<Row> {
    let (mut store, capacity_bytes) = build_store(spec)?;
    let s: &mut dyn PageStore = store.as_mut();
    let log_bytes = if assume.log_force {
        (s.log_blocks() + 2) * LOG_BLOCK_BYTES as u64
    } else {
        0
    };
    let cfg = PaperConfig {
        table_pages: table_pages(
            s.page_bytes(),
            spec.row_bytes,
            spec.density,
            capacity_bytes,
            free,
            log_bytes,
            assume.index,
        ),
        row_bytes: spec.row_bytes,
        weights: [spec.mix[0], spec.mix[1], spec.mix[2]],
        slack: 0.02,
        density: spec.density,
        scheme,
        victims: spec.victims,
        max_victims: spec.max_victims,
        seed: spec.seed,
        assume,
    };
    let (mut e, mut t) = PaperEngine::load(s, cfg, 0)?;
    // Warm-up: until the host wrote `warmup` device capacities (4 KiB units).
    let host_bytes = |s: &dyn PageStore| {
        s.device_report()
            .map_or(0, |r| r.host.writes * ftl::LOGICAL_PAGE_BYTES as u64)
    };
    let want = (spec.warmup * capacity_bytes as f64) as u64;
    let w0 = host_bytes(s);
    while host_bytes(s) - w0 < want {
        for _ in 0..1000 {
            t = e.query(s, t)?;
        }
    }
    let steady_state = paper_rounds(spec, &mut e, s, &mut t)?;
    // The measured window.
    let until = t + parse_duration_ns(&spec.duration)?;
    let stats0 = e.stats();
    let before = store_snapshot(s);
    let start = t;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    let mut queries = 0u64;
    while t < until {
        let done = e.query(s, t)?;
        hist.record(done.saturating_sub(t).max(1))?;
        t = done;
        queries += 1;
    }
    let after = store_snapshot(s);
    let elapsed_ns = t - start;
    let secs = elapsed_ns as f64 / 1e9;
    let c = consistency(&before, &after, elapsed_ns, 1, true, &hist);
    let mut p = per_txn(&before, &after, queries, secs);
    let st = diff(stats0, e.stats());
    p.log_forces = st.log_forces as f64 / queries.max(1) as f64;
    let units_per_page = (s.page_bytes() / ftl::LOGICAL_PAGE_BYTES) as f64;
    let aimed_units = st.aimed_page_writes as f64 * units_per_page / queries.max(1) as f64;
    let (check, problems) = if spec.check {
        let t = e.flush(s, t)?;
        let problems = e.check(s, t)?;
        (
            if problems.is_empty() {
                "passed"
            } else {
                "failed"
            },
            problems,
        )
    } else {
        ("skipped", vec![])
    };
    let mut row = base_row(spec, s, (free, scheme), queries, secs, &p, aimed_units, c);
    row.rows = e.rows();
    row.buffer_frames = assume.buffer_frames;
    row.iaa = storage::iaa::IaaStats {
        hinted_inserts: st.hinted_inserts,
        unhinted_inserts: st.unhinted_inserts,
        reused_inserts: st.appended_inserts,
        moved_updates: st.moved_updates,
        in_place_updates: st.in_place_updates,
        hint_refreshes: st.hint_epochs,
        hinted_writebacks: st.aimed_page_writes,
        ghosts_removed: 0,
        victim_pages_left_heap: st.victim_pages_left_table,
        victim_pages_left_other: st.victim_pages_left_other,
    };
    row.paper = Some(st);
    row.steady_state = steady_state;
    row.check = check;
    row.check_problems = problems;
    Ok(row)
}

/// The steady-state rounds after the warm-up (none with `max_rounds` 0): queries one at a time
/// from `*t` for `spec.round` of virtual time each; `*t` ends where the last round ended.
fn paper_rounds(
    spec: &Spec,
    e: &mut PaperEngine,
    s: &mut dyn PageStore,
    t: &mut u64,
) -> anyhow::Result<SteadyState> {
    if spec.max_rounds == 0 {
        return Ok(SteadyState::skipped(Writes::device_writes_of(s.nand())));
    }
    let round_ns = parse_duration_ns(&spec.round)?;
    let rounds = until_steady(spec.max_rounds, |_| {
        let (t0, w0, mut queries) = (*t, Writes::of(s.nand()), 0u64);
        while *t < t0 + round_ns {
            *t = e.query(s, *t)?;
            queries += 1;
        }
        Ok(Round {
            throughput: queries as f64 * 1e9 / (*t - t0) as f64,
            waf: Writes::of(s.nand()).since(&w0).waf(),
        })
    })?;
    Ok(SteadyState::of(&rounds, Writes::device_writes_of(s.nand())))
}

/// The counters of a window: `b - a`, field by field.
fn diff(
    a: kits::iaa_paper::PaperStats,
    b: kits::iaa_paper::PaperStats,
) -> kits::iaa_paper::PaperStats {
    // Counts differ; `victims_committed` is a level: the window's end.
    macro_rules! d {
        ($($f:ident),*) => {
            kits::iaa_paper::PaperStats {
                $($f: b.$f - a.$f,)*
                victims_committed: b.victims_committed,
            }
        };
    }
    d!(
        queries,
        inserts,
        deletes,
        updates,
        hinted_inserts,
        unhinted_inserts,
        appended_inserts,
        moved_updates,
        in_place_updates,
        page_reads,
        page_writes,
        aimed_page_writes,
        delete_page_writes,
        index_page_writes,
        log_forces,
        evictions_written,
        hint_epochs,
        victim_pages_left_table,
        victim_pages_left_other,
        victim_pages_left_full
    )
}

/// The ablation's steps, cumulative from the paper's model to the engine: each adds one thing
/// the engine has and the paper's model does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// The paper's model (IAA Fig. 9).
    Paper,
    /// + the engine's commitment: at most `storage::iaa::MAX_COMMITTED_VICTIMS` victims (the
    /// paper's SE is told the next block to be erased, however many the inserts need).
    Capped,
    /// + a Delete writes its row's page (the engine's delete changes the page on flash).
    DeleteWrites,
    /// + a log record and a log force per query (a commit per query).
    LogForce,
    /// + a unique index (Insert, Delete and a U2DI move change a leaf).
    Index,
    /// + a buffer pool of the engine's default size (2% of the table's pages, at least 256).
    BufferPool,
    /// + 4 KiB DB pages (the engine's default) on the same 16 KiB flash pages.
    SmallPages,
    /// The engine itself (`kits::iaa` on `storage::Engine`), one terminal, 4 KiB pages.
    Engine,
    /// The engine on the native store with index pages in streams of their own, so that its
    /// committed victims hold heap pages only (native only: `NativeConfig::index_streams`).
    EngineIndexStreams,
}

impl Step {
    pub const ALL: [Step; 9] = [
        Step::Paper,
        Step::Capped,
        Step::DeleteWrites,
        Step::LogForce,
        Step::Index,
        Step::BufferPool,
        Step::SmallPages,
        Step::Engine,
        Step::EngineIndexStreams,
    ];
    /// The steps that apply to `storage` (index streams are the native store's).
    pub fn on(storage: &str) -> Vec<Step> {
        Step::ALL
            .into_iter()
            .filter(|&s| s != Step::EngineIndexStreams || storage == "native")
            .collect()
    }
    pub fn label(self) -> &'static str {
        match self {
            Step::Paper => "paper (IAA Fig. 9)",
            Step::Capped => "+ at most 8 victims committed",
            Step::DeleteWrites => "+ Delete writes its page",
            Step::LogForce => "+ log force per query",
            Step::Index => "+ index maintenance",
            Step::BufferPool => "+ buffer pool (2%)",
            Step::SmallPages => "+ 4 KiB DB pages",
            Step::Engine => "engine (kits::iaa)",
            Step::EngineIndexStreams => "engine, index pages in streams of their own",
        }
    }
}

/// The ablation, as `noftl iaa ablation`'s flags give it: the paper model's spec (device,
/// store, window) and one free-space level.
#[derive(Debug, Clone)]
pub struct AblationSpec {
    pub base: Spec,
    pub free: f64,
}

/// One step's pair of runs (conventional, IAA+U2DI) with the ratios filled in.
#[derive(Debug, Serialize)]
pub struct AblationRow {
    pub step: Step,
    pub label: &'static str,
    pub conventional: Row,
    pub iaa_u2di: Row,
}

#[derive(Debug, Serialize)]
pub struct Ablation {
    pub workload: &'static str,
    pub storage: String,
    pub preset: String,
    pub set: Vec<String>,
    pub free_space: f64,
    pub duration: String,
    pub warmup: f64,
    pub seed: u64,
    pub steps: Vec<AblationRow>,
}

/// The spec and assumptions of `step` (cumulative).
fn step_spec(a: &AblationSpec, step: Step, table_pages_hint: u64) -> (Spec, Assumptions) {
    let mut spec = a.base.clone();
    // Every step on the same device, the engine's too (its own default geometry differs).
    spec.device = super::iaa::device(&a.base);
    let at = |s: Step| Step::ALL.iter().position(|&x| x == s);
    let reached = |s: Step| at(step) >= at(s);
    let frames = ((table_pages_hint as f64 * 0.02) as usize).max(256);
    let assume = Assumptions {
        delete_writes: reached(Step::DeleteWrites),
        log_force: reached(Step::LogForce),
        index: reached(Step::Index),
        buffer_frames: if reached(Step::BufferPool) { frames } else { 0 },
    };
    if reached(Step::Capped) {
        spec.max_victims = storage::iaa::MAX_COMMITTED_VICTIMS;
        spec.victims = spec.victims.min(spec.max_victims);
    }
    if reached(Step::SmallPages) {
        spec.page_size = ftl::LOGICAL_PAGE_BYTES;
    }
    if reached(Step::Engine) {
        spec.model = Model::Engine;
        spec.buffer_pages = None;
    }
    spec.index_streams = step == Step::EngineIndexStreams;
    (spec, assume)
}

/// Checks the ablation before any run.
pub fn check_ablation(a: &AblationSpec) -> anyhow::Result<()> {
    if a.base.model != Model::Paper {
        bail!("the ablation starts from the paper model");
    }
    let mut s = a.base.clone();
    s.free = vec![a.free];
    super::iaa::check(&s)?;
    super::iaa::check_device(&s)
}

/// Runs every step's pair over `base.jobs` threads; the rows in step order.
pub fn ablation(a: &AblationSpec, on_run_done: &(dyn Fn() + Sync)) -> anyhow::Result<Ablation> {
    check_ablation(a)?;
    // The buffer pool's size follows the table's pages at the flash page size (the engine's
    // rule: 2% of the table, at least 256 frames), known once the first store is built.
    let (probe, capacity) = build_store(&a.base)?;
    let pages_hint = table_pages(
        probe.page_bytes(),
        a.base.row_bytes,
        a.base.density,
        capacity,
        a.free,
        0,
        false,
    );
    drop(probe);
    let on = Step::on(&a.base.storage);
    let runs: Vec<(Step, Scheme)> = on
        .iter()
        .flat_map(|&s| [(s, Scheme::Conventional), (s, Scheme::IaaU2di)])
        .collect();
    let results = crate::runner::on_workers(a.base.jobs, runs.len(), &|i| {
        let (step, scheme) = runs[i];
        let (spec, assume) = step_spec(a, step, pages_hint);
        let r = if spec.model == Model::Engine {
            super::iaa::run_one(&spec, a.free, scheme, None)
        } else {
            run_one(&spec, a.free, scheme, assume)
        };
        on_run_done();
        r.map_err(|e| e.context(format!("step {}, {}", step.label(), scheme.name())))
    });
    let rows = results.into_iter().collect::<anyhow::Result<Vec<Row>>>()?;
    let mut steps = Vec::new();
    let mut it = rows.into_iter();
    for &step in &on {
        let (Some(c), Some(i)) = (it.next(), it.next()) else {
            bail!("a step lost its runs");
        };
        let mut pair = [c, i];
        relate(&mut pair);
        let [conventional, iaa_u2di] = pair;
        steps.push(AblationRow {
            step,
            label: step.label(),
            conventional,
            iaa_u2di,
        });
    }
    Ok(Ablation {
        workload: "iaa",
        storage: a.base.storage.clone(),
        preset: a.base.device.preset.clone(),
        set: super::iaa::device(&a.base).set,
        free_space: a.free,
        duration: a.base.duration.clone(),
        warmup: a.base.warmup,
        seed: a.base.seed,
        steps,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
    use super::*;

    /// The paper model at one small free-space level, in virtual time (a small `mlc16k`, 2 s
    /// windows): every run is consistent and its rows read back; IAA alone aims the inserts'
    /// share of the writes (f = Inserts / (Inserts + Updates) = 0.5 at 1:1:1, as the paper's
    /// model predicts); each IAA and U2DI scheme leaves GC fewer copies and the device less
    /// work per query than conventional, and runs faster. (Fig. 12's order, IAA+U2DI ahead of
    /// IAA alone, is not what this model gives: docs/iaa.md says why.)
    #[test]
    fn the_paper_model_orders_the_schemes_at_20_percent_free() {
        let mut spec = Spec::for_model(Model::Paper);
        spec.device.set = vec!["geometry.blocks_per_plane=16".into()];
        spec.duration = "2s".into();
        spec.warmup = 1.0;
        // The order, not the steady state, is this test's subject (rounds: the test below).
        spec.max_rounds = 0;
        spec.check = true;
        let mut rows: Vec<Row> = Scheme::ALL
            .iter()
            .map(|&s| run_one(&spec, 0.2, s, Assumptions::default()).unwrap())
            .collect();
        relate(&mut rows);
        for r in &rows {
            assert_eq!(r.check, "passed", "{}: {:?}", r.scheme, r.check_problems);
            assert!(r.consistency.is_ok(), "{}: {:?}", r.scheme, r.consistency);
            assert!(r.queries > 500, "{}: {} queries", r.scheme, r.queries);
        }
        let (conv, iaa) = (&rows[0], &rows[1]);
        assert!(
            (iaa.aimed_share - 0.5).abs() < 0.05,
            "f {}",
            iaa.aimed_share
        );
        assert!(
            conv.gc_copies_per_host_write > 1.0,
            "{}",
            conv.gc_copies_per_host_write
        );
        for r in &rows[1..] {
            assert!(
                r.gc_copies_per_host_write < conv.gc_copies_per_host_write / 2.0,
                "{}: copies {} against {}",
                r.scheme,
                r.gc_copies_per_host_write,
                conv.gc_copies_per_host_write
            );
            let x = r.relative;
            assert!(x.throughput.unwrap() > 1.0, "{}: {x:?}", r.scheme);
            assert!(
                x.energy.unwrap() < 0.8 && x.erases.unwrap() < 0.8,
                "{}: {x:?}",
                r.scheme
            );
        }
        // IAA Fig. 12: IAA and U2DI together ahead of each alone; and no page copies at all
        // (IAA Fig. 11: "no degradation"), every insert aimed at the next block to be erased.
        let (u2di, both) = (&rows[2], &rows[3]);
        assert!(
            both.throughput_qps > iaa.throughput_qps && both.throughput_qps > u2di.throughput_qps,
            "IAA+U2DI {} against IAA {} and U2DI {}",
            both.throughput_qps,
            iaa.throughput_qps,
            u2di.throughput_qps
        );
        assert!(both.gc_copies_per_host_write < 0.02, "{both:?}");
        assert!(
            (both.aimed_share - 1.0).abs() < 0.01,
            "f {}",
            both.aimed_share
        );
    }

    /// The ablation's steps are cumulative and each changes one thing: the commitment is the
    /// paper SE's (uncapped) only in the first step, the engine's from the second on; the
    /// engine's step runs the engine model.
    #[test]
    fn the_ablation_steps_add_one_assumption_each() {
        let a = AblationSpec {
            base: Spec::for_model(Model::Paper),
            free: 0.2,
        };
        let specs: Vec<(Spec, Assumptions)> = Step::ALL
            .iter()
            .map(|&s| step_spec(&a, s, 10_000))
            .collect();
        assert_eq!(specs[0].0.max_victims, u32::MAX);
        assert_eq!(specs[0].1, Assumptions::default());
        for (s, _) in &specs[1..] {
            assert_eq!(s.max_victims, storage::iaa::MAX_COMMITTED_VICTIMS);
        }
        assert_eq!(specs[1].1, Assumptions::default(), "the cap alone");
        assert!(specs[2].1.delete_writes && !specs[2].1.log_force);
        assert_eq!(specs[7].0.model, Model::Engine);
        assert!(!specs[7].0.index_streams);
        assert!(specs[8].0.model == Model::Engine && specs[8].0.index_streams);
        assert_eq!(Step::on("page").len(), 8, "index streams are native's");
        assert_eq!(Step::on("native").len(), 9);
    }

    /// The steady-state rule (`crate::steady`): rounds too few to fill its window are reported
    /// as not met, with the rounds run; none at all says so too.
    #[test]
    fn a_paper_run_too_short_to_be_steady_says_so() {
        let mut spec = Spec::for_model(Model::Paper);
        spec.device.set = vec!["geometry.blocks_per_plane=16".into()];
        spec.duration = "200ms".into();
        spec.warmup = 0.2;
        spec.round = "100ms".into();
        spec.max_rounds = 2;
        let r = run_one(&spec, 0.2, Scheme::Conventional, Assumptions::default()).unwrap();
        assert!(
            !r.steady_state.met && r.steady_state.rounds == 2,
            "{:?}",
            r.steady_state
        );
        assert!(
            r.steady_state.criterion.starts_with("SNIA"),
            "{:?}",
            r.steady_state
        );
        spec.max_rounds = 0;
        let r = run_one(&spec, 0.2, Scheme::Conventional, Assumptions::default()).unwrap();
        assert!(
            !r.steady_state.met && r.steady_state.rounds == 0,
            "{:?}",
            r.steady_state
        );
    }
}
