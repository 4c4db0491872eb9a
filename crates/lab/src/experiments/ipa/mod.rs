//! IPA Table I (the IPA demo, ICDE 2017; docs/ipa.md), `noftl ipa compare`: the same OLTP
//! workload on the NoFTL store without In-Place Appends and with them, globally (every object in
//! one IPA region) and selectively (the objects with small, frequent updates in an IPA region),
//! in steady state, with the statistics the table reports: host reads and writes in flash
//! pages, the share of writes done as appends, GC page migrations and erases per host write,
//! throughput, and the space the delta areas take. And the IPA advisor, `noftl ipa advise`: a
//! profiled baseline run and, per object, what each page write-back changed (`advisor`).
//!
//! Each row runs on a fresh device of the same config and seed: format, regions, load, a
//! checkpoint, a warm-up (`Spec::warmup` of virtual time, so that GC works in its steady state),
//! then the measured window (`Spec::duration`) with the scheduler, snapshots and `consistency`
//! object of `noftl bench`. Control rows (`regions`, `global`) place the same objects in the
//! same regions with the same cells (pSLC on MLC/TLC chips) and no appends, so that what pSLC
//! alone does is not credited to IPA.
//!
//! Files, bottom up: `spec` (the spec and the checks every row shares), `row` (one run of one
//! row), `advisor` (the advisor's rule on a write profile), this file (the rows of a comparison,
//! its result directory, the advice).

mod advisor;
mod row;
mod spec;

use anyhow::Context;
use kits::{tatp, tpcc};
use serde::Serialize;

pub use advisor::Advice;
pub use row::{ObjectProfile, Row};
pub use spec::{
    table_i, table_i_regime, Spec, CONFIGS, DBA_ROOM_FOR_GC, DEFAULT_GEOMETRY,
    TABLE_I_REGIME_SUBSCRIBERS, TABLE_I_SUBSCRIBERS, TATP_HOT_BYTES_PER_SUBSCRIBER,
};

use advisor::recommend;
use row::run_one;
use spec::{setup, Setup};

/// IPA Table I: the rows that ran and the ones that could not.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The paper's regime (`--paper`), in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regime: Option<String>,
    pub workload: String,
    pub scale: u32,
    pub preset: String,
    pub page_bytes: usize,
    pub scheme: String,
    pub record_bytes: u16,
    pub ipa_mode: &'static str,
    pub region_chips: u32,
    /// The regions layout's MAX_SIZE (the DBA's sizing), if the region was sized by it.
    pub region_max_size_bytes: Option<u64>,
    pub warmup_s: f64,
    /// The steady-state rule's set-up (`crate::steady`): preconditioning in device writes,
    /// the round's virtual length, the cap on rounds.
    pub precondition_device_writes: f64,
    pub round_s: f64,
    pub max_rounds: u32,
    pub duration_s: f64,
    pub repeat: u32,
    pub rows: Vec<Row>,
    /// Rows whose layout does not fit the device (e.g. every object in pSLC).
    pub not_run: Vec<NotRun>,
    /// The advised rows' layout: the tables the advisor gives IPA, and its scheme.
    pub advised_tables: Vec<String>,
    pub advised_scheme: Option<String>,
}

/// `noftl ipa compare --paper` (docs/ipa.md, "Table I in steady state"): Table I's layout
/// where it fits (`table_i`: its rows by `config` are this report's), and Table I's regime
/// (`table_i_regime`: the baseline there, and why the layout does not run there).
#[derive(Debug, Serialize)]
pub struct PaperReport {
    #[serde(flatten)]
    pub fits: Report,
    pub at_table_i_regime: Report,
}

/// Runs both comparisons of `PaperReport` with `seed` and `terminals` (`plan`: the first's
/// result directory).
pub fn paper(
    seed: u64,
    terminals: u32,
    plan: Option<&crate::results::Plan>,
) -> anyhow::Result<PaperReport> {
    let (fits, regime) = (table_i(seed, terminals), table_i_regime(seed, terminals));
    // Both are checked before either loads.
    check(&fits)?;
    check(&regime)?;
    Ok(PaperReport {
        fits: run(&fits, plan)?,
        at_table_i_regime: run(&regime, None)?,
    })
}

/// A row that did not run, and why.
#[derive(Debug, Serialize)]
pub struct NotRun {
    pub config: String,
    pub why: String,
}

/// The checks `run` and `advise` make before any row loads (device, scheme, workload, rows,
/// durations, region chips). A caller that creates a result directory calls this first, so that
/// a spec refused leaves no directory behind.
pub fn check(a: &Spec) -> anyhow::Result<()> {
    setup(a).map(|_| ())
}

/// Runs the comparison: every row of `a.configs`, `a.repeat` times each, and with `plan` writes
/// its result directory (docs/results.md).
pub fn run(a: &Spec, plan: Option<&crate::results::Plan>) -> anyhow::Result<Report> {
    let mut st = setup(a)?;
    let sample_ns = plan.map(|p| p.window_ns);
    if st.configs.iter().any(|c| c.ends_with("advised")) {
        // The advisor's layout, from a profiled run of the baseline (the same run `ipa advise`
        // makes), before the rows that use it.
        let mut profile = Vec::new();
        run_one(a, &st, "baseline", a.seed, Some(&mut profile), None)
            .context("ipa compare, the advisor's baseline run")?;
        let rec = recommend(&profile, st.nop)?;
        let tables: Vec<String> = rec.tables().iter().map(|t| t.to_string()).collect();
        st.advised = Some((tables, rec.scheme));
    }
    let mut rows = Vec::new();
    // Per row, its runs' traces (with a result directory).
    let mut traces: Vec<Vec<crate::results::Trace>> = Vec::new();
    let mut not_run = Vec::new();
    for config in &st.configs {
        if let (Some(why), true) = (&st.region_unfit, config.ends_with("regions")) {
            not_run.push(NotRun {
                config: config.clone(),
                why: why.clone(),
            });
            continue;
        }
        if config.ends_with("advised") && st.advised.as_ref().is_some_and(|a| a.0.is_empty()) {
            not_run.push(NotRun {
                config: config.clone(),
                why: "the advisor gives no table IPA".into(),
            });
            continue;
        }
        match run_config(a, &st, config, sample_ns)? {
            Ok((row, runs)) => {
                traces.push(runs);
                rows.push(row);
            }
            Err(n) => not_run.push(n),
        }
    }
    let report = report(a, &st, rows, not_run);
    if let Some(p) = plan {
        write_results(p, a, &report, &traces)?;
    }
    Ok(report)
}

/// The `a.repeat` runs of one row: the row (the first run's figures, the runs' mean throughput
/// and its standard deviation) and the runs' traces, or why the row could not run.
#[allow(clippy::type_complexity)]
fn run_config(
    a: &Spec,
    st: &Setup,
    config: &str,
    sample_ns: Option<u64>,
) -> anyhow::Result<Result<(Row, Vec<crate::results::Trace>), NotRun>> {
    let mut runs: Vec<(Row, f64)> = Vec::new();
    for k in 0..a.repeat {
        let seed = a.seed + u64::from(k);
        // The dashboard's live points (if it runs this comparison): one series per run.
        crate::results::set_live_series(&if a.repeat > 1 {
            format!("{config} #{}", k + 1)
        } else {
            config.to_string()
        });
        match run_one(a, st, config, seed, None, sample_ns) {
            Ok(mut row) => {
                if let Some(t) = row.trace.as_mut() {
                    t.labels = vec![config.to_string(), (k + 1).to_string()];
                }
                let tps = row.throughput_tps;
                runs.push((row, tps));
            }
            // A layout whose region cannot hold its objects (pSLC halves the chips'
            // capacity) is a result of its own: reported, and the other rows go on.
            Err(e) if format!("{e:#}").contains("is full") => {
                return Ok(Err(NotRun {
                    config: config.to_string(),
                    why: format!("{e:#}"),
                }));
            }
            Err(e) => return Err(e.context(format!("ipa compare, row {config}, seed {seed}"))),
        }
    }
    let n = runs.len() as f64;
    let mean_of = |f: fn(&Row) -> f64| runs.iter().map(|r| f(&r.0)).sum::<f64>() / n;
    let mean = mean_of(|r| r.throughput_tps);
    let var = runs.iter().map(|r| (r.1 - mean).powi(2)).sum::<f64>() / n;
    // The row: the first run's counts, the runs' means of the per-write figures and throughput.
    let mut row = runs[0].0.clone();
    row.throughput_tps = mean;
    row.stdev = var.sqrt();
    row.gc_migrations_per_host_write = mean_of(|r| r.gc_migrations_per_host_write);
    row.gc_erases_per_host_write = mean_of(|r| r.gc_erases_per_host_write);
    row.append_percent = mean_of(|r| r.append_percent);
    let steady: Vec<_> = runs.iter().map(|r| r.0.steady_state.clone()).collect();
    if let Some(s) = crate::steady::SteadyState::all(&steady) {
        row.steady_state = s;
    }
    if let Some(bad) = runs.iter().find(|r| r.0.consistency.status != "ok") {
        row.consistency = bad.0.consistency.clone();
    }
    row.trace = None;
    let traces = runs.into_iter().filter_map(|r| r.0.trace).collect();
    Ok(Ok((row, traces)))
}

fn report(a: &Spec, st: &Setup, rows: Vec<Row>, not_run: Vec<NotRun>) -> Report {
    Report {
        regime: a.regime.clone(),
        workload: a.workload.clone(),
        scale: st.workload.scale(),
        preset: a.device.preset.clone(),
        page_bytes: st.page_bytes,
        scheme: st.scheme.label(),
        record_bytes: st.scheme.record_bytes,
        ipa_mode: st.ipa_mode,
        region_chips: st.region_chips,
        region_max_size_bytes: a.region_max_size_bytes,
        warmup_s: st.warmup_ns as f64 / 1e9,
        precondition_device_writes: st.precondition,
        round_s: st.round_ns as f64 / 1e9,
        max_rounds: st.max_rounds,
        duration_s: st.duration_ns as f64 / 1e9,
        repeat: a.repeat,
        rows,
        not_run,
        advised_tables: st.advised.as_ref().map(|a| a.0.clone()).unwrap_or_default(),
        advised_scheme: st
            .advised
            .as_ref()
            .map(|a| format!("{}/{}B", a.1.label(), a.1.record_bytes)),
    }
}

/// The result directory of `ipa compare` (docs/results.md): summary.json (the JSON result with
/// BenchBase's names at the top, over every run, and per row), the per-window files and raw.csv
/// with a row per window or transaction of every row (`config`) and run (`repeat`).
fn write_results(
    plan: &crate::results::Plan,
    a: &Spec,
    report: &Report,
    traces: &[Vec<crate::results::Trace>],
) -> anyhow::Result<()> {
    use crate::results as r;
    let mut v = serde_json::to_value(report)?;
    for (i, runs) in traces.iter().enumerate() {
        let events: Vec<storage::sched::TxnEvent> =
            runs.iter().flat_map(|t| t.events.iter().copied()).collect();
        if let Some(obj) = v["rows"].get_mut(i).and_then(|x| x.as_object_mut()) {
            obj.extend(r::benchbase(&events, r::elapsed_ns(runs)));
        }
    }
    let all: Vec<r::Trace> = traces.iter().flatten().cloned().collect();
    let types: Vec<&str> = match a.workload.as_str() {
        "tatp" => tatp::TXN_TYPES.iter().map(|t| t.name()).collect(),
        "tpcc" => tpcc::input::Kind::ALL.iter().map(|k| k.name()).collect(),
        _ => vec!["tpcb"],
    };
    let scale = report.scale.to_string();
    let c = r::Contents {
        bench: &a.workload,
        scalefactor: Some(&scale),
        terminals: Some(a.terminals),
        isolation: Some(r::ENGINE_ISOLATION),
        traces: &all,
        label_cols: &["config", "repeat"],
        types: &types,
        unit: r::Unit::Txn,
        device: None,
    };
    r::write_dir(plan, &v, &c, None, &[])
}

/// The advisor's recommendation: the baseline's objects, the scheme, the expected appends and
/// the DDL of the IPA region.
#[derive(Debug, Serialize)]
pub struct AdviseReport {
    pub workload: String,
    pub scale: u32,
    pub preset: String,
    pub page_bytes: usize,
    pub window_s: f64,
    /// The recommended scheme: N appends of M records of R bytes.
    pub scheme: String,
    pub record_bytes: usize,
    pub ipa_mode: &'static str,
    /// Expected share of page writes done as appends in the recommended layout (an estimate:
    /// each object's fit share times N / (N + 1), the share of appends when every write fits).
    pub expected_append_percent: f64,
    /// The delta area's share of each page of a recommended object.
    pub space_overhead_per_page: f64,
    pub objects: Vec<Advice>,
    pub ddl: Vec<String>,
    /// Page write-backs in the baseline's window (the human report's; not in the JSON).
    #[serde(skip)]
    pub total_writebacks: u64,
}

/// The advisor (`advisor`'s rule) on a profiled run of the baseline with `a.seed`.
pub fn advise(a: &Spec) -> anyhow::Result<AdviseReport> {
    let st = setup(a)?;
    let mut profile = Vec::new();
    run_one(a, &st, "baseline", a.seed, Some(&mut profile), None)
        .context("ipa advise, baseline")?;
    let rec = recommend(&profile, st.nop)?;
    let (scheme, objects, expected, total) = (rec.scheme, rec.objects, rec.expected, rec.total);
    let chosen: Vec<&str> = objects
        .iter()
        .filter(|o| o.ipa)
        .map(|o| o.name.as_str())
        .collect();

    let mut ddl = Vec::new();
    if !chosen.is_empty() {
        ddl.push(format!(
            "CREATE REGION rg_ipa (MAX_CHIPS={}, IPA_MODE={}, IPA_SCHEME={}, IPA_RECORD={});",
            st.region_chips,
            st.ipa_mode,
            scheme.label(),
            scheme.record_bytes
        ));
        ddl.push("CREATE TABLESPACE ts_ipa (REGION=rg_ipa);".into());
        ddl.push(format!(
            "-- create these objects in TABLESPACE ts_ipa: {}",
            chosen.join(", ")
        ));
    }
    Ok(AdviseReport {
        workload: a.workload.clone(),
        scale: st.workload.scale(),
        preset: a.device.preset.clone(),
        page_bytes: st.page_bytes,
        window_s: st.duration_ns as f64 / 1e9,
        scheme: scheme.label(),
        record_bytes: usize::from(scheme.record_bytes),
        ipa_mode: st.ipa_mode,
        expected_append_percent: 100.0 * expected,
        space_overhead_per_page: scheme.overhead(st.page_bytes),
        objects,
        ddl,
        total_writebacks: total,
    })
}
