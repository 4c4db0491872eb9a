//! One run of one row: a fresh device of the row's config and seed, the store and its regions,
//! the engine, the load in the row's layout, a checkpoint, the warm-up, then the measured window
//! and the row's statistics from the counters at its ends.

use anyhow::bail;
use hdrhistogram::Histogram;
use kits::tatp::{self, TatpTerminal};
use kits::tpcb::{self, TpcbTerminal};
use kits::tpcc::{self, TpccTerminal};
use nand::{Nand, OpKind, Purpose};
use serde::Serialize;
use storage::ipa::IpaScheme;
use storage::measure::Consistency;
use storage::native::{NativeConfig, NativeStore};
use storage::{Engine, EngineConfig, PageStore};

use super::spec::{Setup, Spec, Workload};
use crate::measure::{consistency, snapshot};
use crate::runner::run_terminals;
use crate::steady::{SteadyState, Writes};

/// One row of IPA Table I: one run, or `repeat` runs (counts are the first run's; per-write
/// figures, the append share and throughput are the runs' means; the consistency is the first
/// violated one; the steady state holds only if it held in every run).
#[derive(Debug, Serialize, Clone)]
pub struct Row {
    pub config: String,
    /// Flash pages read and written for the engine (written: out of place plus appends).
    pub host_reads: u64,
    pub host_writes: u64,
    pub ipa_appends: u64,
    /// Share of host writes done as appends, percent.
    pub append_percent: f64,
    pub gc_migrations: u64,
    pub gc_erases: u64,
    pub gc_migrations_per_host_write: f64,
    pub gc_erases_per_host_write: f64,
    pub throughput_tps: f64,
    pub stdev: f64,
    /// Bytes of delta areas over the database's bytes.
    pub space_overhead: f64,
    /// Flash programs and erases of every purpose per transaction (wear).
    pub programs_per_txn: f64,
    pub erases_per_txn: f64,
    pub consistency: Consistency,
    /// The steady-state rule's verdict before the measured window (`crate::steady`).
    pub steady_state: SteadyState,
    /// Per region (the default one first) over the measured window: what explains its GC.
    pub regions: Vec<RegionCounts>,
    /// With a result directory: the measured window's marks and transactions.
    #[serde(skip)]
    pub trace: Option<crate::results::Trace>,
}

/// Counters of one window's ends.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    host_reads: u64,
    host_programs: u64,
    host_appends: u64,
    programs: u64,
    erases: u64,
    gc_migrations: u64,
    gc_erases: u64,
}

fn counts(store: &dyn PageStore) -> Counts {
    let mut c = Counts::default();
    if let Some(n) = store.nand() {
        let st = n.stats();
        c.host_reads = st.get(OpKind::Read, Purpose::Host);
        c.host_programs = st.get(OpKind::Program, Purpose::Host);
        c.host_appends = st.get(OpKind::PartialProgram, Purpose::Host);
        c.programs = st.total(OpKind::Program) + st.total(OpKind::PartialProgram);
        c.erases = st.total(OpKind::Erase);
        // Pages GC programmed, as IPA Table I counts migrations against host writes in flash
        // pages. The store's own `gc.migrations` counts 4 KiB units, four to a 16 KiB page:
        // against host writes in pages it read four times too high (the rows published before
        // 2026-11-28 did).
        c.gc_migrations =
            st.get(OpKind::Program, Purpose::Gc) + st.get(OpKind::PartialProgram, Purpose::Gc);
    }
    if let Some(r) = store.device_report() {
        c.gc_erases = r.gc.erases;
    }
    c
}

/// One run of row `config` with `seed`: with `profile`, the advisor's write profile of the
/// measured window is left there; with `sample_ns`, the row carries the window's trace.
pub(super) fn run_one(
    a: &Spec,
    st: &Setup,
    config: &str,
    seed: u64,
    mut profile: Option<&mut Vec<ObjectProfile>>,
    sample_ns: Option<u64>,
) -> anyhow::Result<Row> {
    // The delta area the row's pages carry: the advised rows use the advisor's scheme.
    let scheme = match (&st.advised, config) {
        (Some((_, advised)), "ipa-advised") => *advised,
        _ => st.scheme,
    };
    let store = format_store(a, st, config, seed)?;
    let e = engine_on(a, st, store)?;
    let ddl = layout_ddl(a, st, config)?;
    let w = load_and_measure(e, a, st, &ddl, seed, &mut profile, sample_ns)?;
    Ok(row_of(config, w, a, scheme, st.page_bytes))
}

/// A fresh NoFTL store on the row's device; the global rows put every object in one region of
/// all chips but one (which keeps the log and the store's metadata).
fn format_store(a: &Spec, st: &Setup, config: &str, seed: u64) -> anyhow::Result<NativeStore> {
    let mut cfg = st.dev.clone();
    cfg.seed = seed;
    let mut store = NativeStore::format(
        Nand::new(cfg)?,
        NativeConfig {
            page_bytes: st.page_bytes,
            spare_factor: a.op_fraction,
            seed,
            ..NativeConfig::default()
        },
    )?;
    if config.ends_with("global") {
        let mut opts = vec![
            ("MAX_CHIPS".to_string(), (st.chips - 1).to_string()),
            ("OP".to_string(), format!("{}%", st.op_percent)),
            ("DEFAULT".to_string(), "on".to_string()),
        ];
        // `global`, the control row: the same region with the same cells, without appends.
        let region_opts = match config {
            "global" if st.ipa_opts.contains("pSLC") => "CELL_MODE=pSLC",
            "global" => "",
            _ => st.ipa_opts.as_str(),
        };
        for kv in region_opts.split(',') {
            if let Some((k, v)) = kv.split_once('=') {
                opts.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let at = store.space().nand().now_ns();
        store.create_region(at, "rg_ipa_all", &opts)?;
    }
    Ok(store)
}

/// The engine on the store, its buffer pool sized from the database's estimate.
fn engine_on(a: &Spec, st: &Setup, store: NativeStore) -> anyhow::Result<Engine> {
    let need = st.workload.pages_estimate(st.page_bytes);
    let frames = a
        .buffer_pages
        .unwrap_or_else(|| ((need / 50) as usize).max(64));
    Ok(Engine::create(
        Box::new(store),
        EngineConfig {
            buffer_frames: frames,
            ..EngineConfig::default()
        },
    )?)
}

/// The kit's DDL with the row's layout: TATP's regions, the advisor's tables in an IPA region,
/// or the kit's own (baseline and the global rows, whose region is the default).
fn layout_ddl(a: &Spec, st: &Setup, config: &str) -> anyhow::Result<String> {
    let op_percent = st.op_percent;
    // The control rows (`regions`, `advised`) get the IPA rows' cells without appends.
    let control = if st.ipa_opts.contains("pSLC") {
        "CELL_MODE=pSLC"
    } else {
        ""
    };
    let kit_ddl = match st.workload {
        Workload::Tatp(_) => tatp::DDL,
        Workload::Tpcb(_) => tpcb::DDL,
        Workload::Tpcc(_) => tpcc::DDL,
    };
    // The DBA's MAX_SIZE, when the spec sizes the region by it.
    // The DBA's MAX_SIZE and GC policy, when the spec gives them.
    let sized = |extra: &str| {
        let mut opts: Vec<String> = a
            .region_max_size_bytes
            .map(|b| format!("MAX_SIZE={b}"))
            .into_iter()
            // The DDL's words have no '-': cost-benefit is spelled costbenefit there.
            .chain(
                a.region_gc
                    .as_ref()
                    .map(|g| format!("GC={}", g.replace('-', ""))),
            )
            .collect();
        if !extra.is_empty() {
            opts.push(extra.to_string());
        }
        opts.join(", ")
    };
    Ok(match config {
        "regions" => tatp::regions_ddl(st.region_chips, op_percent, &sized(control)),
        "ipa-regions" => tatp::regions_ddl(st.region_chips, op_percent, &sized(&st.ipa_opts)),
        "advised" | "ipa-advised" => {
            let Some((tables, scheme)) = &st.advised else {
                bail!("the advised layout needs the advisor's profile of the baseline first");
            };
            let extra = if config == "advised" {
                control.to_string()
            } else {
                format!(
                    "IPA_MODE={}, IPA_SCHEME={}, IPA_RECORD={}",
                    st.ipa_mode,
                    scheme.label(),
                    scheme.record_bytes
                )
            };
            let extra = if extra.is_empty() {
                extra
            } else {
                format!(", {extra}")
            };
            let names: Vec<&str> = tables.iter().map(String::as_str).collect();
            kits::place_tables(
                kit_ddl,
                &names,
                "rg_ipa",
                &format!(
                    "MAX_CHIPS={}, GC=greedy, OP={op_percent}%{extra}",
                    st.region_chips
                ),
            )?
        }
        _ => kit_ddl.to_string(),
    })
}

/// The workload loaded with `ddl`, its terminals made from `seed`, then `window`.
fn load_and_measure(
    mut e: Engine,
    a: &Spec,
    st: &Setup,
    ddl: &str,
    seed: u64,
    profile: &mut Option<&mut Vec<ObjectProfile>>,
    sample_ns: Option<u64>,
) -> anyhow::Result<Window> {
    match &st.workload {
        Workload::Tatp(tc) => {
            let h = tatp::load(&mut e, *tc, ddl, seed, |_| {})?;
            let terms: Vec<TatpTerminal> = (0..a.terminals)
                .map(|i| TatpTerminal::new(i, h, *tc, seed, None))
                .collect();
            let kit = Kit::<TatpTerminal> {
                done: TatpTerminal::succeeded,
                latency: |t| &t.latency_ns,
                events: |t| &mut t.events,
            };
            window(e, terms, kit, st, profile, sample_ns)
        }
        Workload::Tpcb(bc) => {
            let h = tpcb::load_with_ddl(&mut e, *bc, ddl, |_| {})?;
            let terms: Vec<TpcbTerminal> = (0..a.terminals)
                .map(|i| TpcbTerminal::new(i, h, *bc, seed, None))
                .collect();
            let kit = Kit::<TpcbTerminal> {
                done: |t| t.committed,
                latency: |t| &t.latency_ns,
                events: |t| &mut t.events,
            };
            window(e, terms, kit, st, profile, sample_ns)
        }
        Workload::Tpcc(cc) => {
            let loaded = tpcc::load_with_ddl(&mut e, *cc, ddl, seed, |_| {})?;
            let run_c = tpcc::NurandConsts::run_from(loaded.c_load, seed);
            let terms: Vec<TpccTerminal> = (0..a.terminals)
                .map(|i| TpccTerminal::new(i, loaded.h, *cc, run_c, seed, None))
                .collect();
            let kit = Kit::<TpccTerminal> {
                done: TpccTerminal::committed,
                latency: |t| &t.latency_ns,
                events: |t| &mut t.events,
            };
            window(e, terms, kit, st, profile, sample_ns)
        }
    }
}

/// The row's statistics from the counters at the window's ends.
fn row_of(config: &str, w: Window, a: &Spec, scheme: IpaScheme, page_bytes: usize) -> Row {
    let Window {
        tps: throughput,
        hist,
        before,
        after,
        c0,
        c1,
        share,
        elapsed_ns,
        regions,
        steady_state,
        trace,
    } = w;
    let host_writes = (c1.host_programs - c0.host_programs) + (c1.host_appends - c0.host_appends);
    let appends = c1.host_appends - c0.host_appends;
    let per_write = |x: u64| x as f64 / host_writes.max(1) as f64;
    let txns = hist.len().max(1) as f64;
    Row {
        config: config.to_string(),
        host_reads: c1.host_reads - c0.host_reads,
        host_writes,
        ipa_appends: appends,
        append_percent: 100.0 * per_write(appends),
        gc_migrations: c1.gc_migrations - c0.gc_migrations,
        gc_erases: c1.gc_erases - c0.gc_erases,
        gc_migrations_per_host_write: per_write(c1.gc_migrations - c0.gc_migrations),
        gc_erases_per_host_write: per_write(c1.gc_erases - c0.gc_erases),
        throughput_tps: throughput,
        stdev: 0.0,
        space_overhead: share * scheme.overhead(page_bytes),
        programs_per_txn: (c1.programs - c0.programs) as f64 / txns,
        erases_per_txn: (c1.erases - c0.erases) as f64 / txns,
        consistency: consistency(&before, &after, elapsed_ns, a.terminals, true, &hist),
        steady_state,
        regions,
        trace,
    }
}

/// What one measured window saw.
struct Window {
    tps: f64,
    hist: Histogram<u64>,
    before: crate::measure::Snapshot,
    after: crate::measure::Snapshot,
    c0: Counts,
    c1: Counts,
    share: f64,
    elapsed_ns: u64,
    regions: Vec<RegionCounts>,
    steady_state: SteadyState,
    trace: Option<crate::results::Trace>,
}

/// What `window` needs to know of a kit's terminals.
struct Kit<T> {
    /// Committed (TATP: successful) transactions so far.
    done: fn(&T) -> u64,
    latency: fn(&T) -> &Histogram<u64>,
    /// The terminal's per-transaction records (results::Trace), when asked for.
    events: fn(&mut T) -> &mut Option<Vec<storage::sched::TxnEvent>>,
}

/// A checkpoint after the load, the warm-up, the preconditioning and the steady-state rounds
/// (`crate::steady`), then the measured window (with the advisor's profile over it when asked):
/// the same for every workload.
fn window<T: storage::sched::Terminal + Send + 'static>(
    mut e: Engine,
    mut terms: Vec<T>,
    kit: Kit<T>,
    st: &Setup,
    profile: &mut Option<&mut Vec<ObjectProfile>>,
    sample_ns: Option<u64>,
) -> anyhow::Result<Window> {
    let Kit {
        done,
        latency,
        events,
    } = kit;
    e.checkpoint()?;
    let slice = |e: &mut Engine, terms: &mut [T], ns: u64| -> anyhow::Result<()> {
        let now = e.now();
        let opts = storage::sched::VirtualOptions {
            until_ns: Some(now + ns),
            ..storage::sched::VirtualOptions::default()
        };
        storage::sched::run_virtual_sampled(e, terms, now, opts, None)?;
        Ok(())
    };
    if st.warmup_ns > 0 {
        slice(&mut e, &mut terms, st.warmup_ns)?;
    }
    crate::runner::precondition_terminals(
        &mut e,
        &mut terms,
        st.precondition,
        st.round_ns,
        crate::steady::PRECONDITION_MAX_NS,
    )?;
    let total = |t: &[T]| t.iter().map(done).sum::<u64>();
    let steady_state = if st.max_rounds == 0 {
        SteadyState::skipped(Writes::device_writes_of(e.store().nand()))
    } else {
        let rounds =
            crate::runner::terminal_rounds(&mut e, &mut terms, st.round_ns, st.max_rounds, total)?;
        SteadyState::of(&rounds, Writes::device_writes_of(e.store().nand()))
    };
    if profile.is_some() {
        e.enable_write_profile();
    }
    let ok0 = total(&terms);
    let lat0 = merged(terms.iter().map(latency))?;
    let (before, c0, regions0, start) = (
        snapshot(&e),
        counts(e.store()),
        region_counts(e.store()),
        e.now(),
    );
    // Only the measured window's transactions are recorded (with a result directory).
    if sample_ns.is_some() {
        terms.iter_mut().for_each(|t| *events(t) = Some(Vec::new()));
    }
    let (e, mut terms, elapsed_ns, _, marks) =
        run_terminals(e, terms, start, Some(st.duration_ns), true, sample_ns)?;
    let trace = sample_ns.map(|_| {
        crate::results::Trace::of_terminals(
            Vec::new(),
            marks,
            terms.iter_mut().map(|t| events(t).take()),
        )
    });
    let ok1 = total(&terms);
    let mut hist = merged(terms.iter().map(latency))?;
    hist.subtract(&lat0)?;
    if let Some(p) = profile.as_mut() {
        **p = profile_of(&e);
    }
    Ok(Window {
        tps: (ok1 - ok0) as f64 / (elapsed_ns as f64 / 1e9),
        hist,
        before,
        after: snapshot(&e),
        c0,
        c1: counts(e.store()),
        regions: RegionCounts::between(&regions0, &region_counts(e.store())),
        share: ipa_share(&e),
        elapsed_ns,
        steady_state,
        trace,
    })
}

/// One region's flash over a measured window (the default region, which keeps the log and the
/// store's metadata, is `default`): how full it is and what its GC found in its victims. Counts
/// are in units of the space (16 KiB DB pages on 16 KiB flash pages: flash pages).
#[derive(Debug, Serialize, Clone, PartialEq)]
pub struct RegionCounts {
    pub name: String,
    /// `pSLC` or the chips' native mode.
    pub cells: &'static str,
    /// Units the region's good blocks hold (GC reserve included), and one block.
    pub capacity_units: u64,
    pub block_units: u64,
    /// Valid units at the window's end, and their share of `capacity_units`.
    pub valid_units: u64,
    pub fullness: f64,
    pub gc_victims: u64,
    pub gc_migrations: u64,
    pub gc_erases: u64,
    /// Valid units GC found per victim, over the units a block holds (greedy's victim validity).
    pub victim_validity: f64,
}

impl RegionCounts {
    /// The window's GC counts (`after` less `before`), fullness at its end.
    fn between(before: &[RegionCounts], after: &[RegionCounts]) -> Vec<RegionCounts> {
        after
            .iter()
            .map(|a| {
                let b = before.iter().find(|b| b.name == a.name);
                let d = |f: fn(&RegionCounts) -> u64| f(a) - b.map_or(0, f);
                let (victims, migrations) = (d(|r| r.gc_victims), d(|r| r.gc_migrations));
                RegionCounts {
                    gc_victims: victims,
                    gc_migrations: migrations,
                    gc_erases: d(|r| r.gc_erases),
                    victim_validity: if victims == 0 {
                        0.0
                    } else {
                        migrations as f64 / (victims * a.block_units.max(1)) as f64
                    },
                    ..a.clone()
                }
            })
            .collect()
    }
}

/// Every region's counters now (`victim_validity` is the window's: `between`).
fn region_counts(store: &dyn PageStore) -> Vec<RegionCounts> {
    let Some(s) = store.as_any().and_then(|s| s.downcast_ref::<NativeStore>()) else {
        return Vec::new();
    };
    let blocks = s.space().geometry().blocks();
    let of = |name: &str, space: &ftl::space::FlashSpace, pslc: bool| {
        let valid: u64 = (0..blocks)
            .filter(|&b| {
                !matches!(
                    space.block_use(nand::Pbn(b)),
                    ftl::space::BlockUse::Foreign | ftl::space::BlockUse::Bad
                )
            })
            .map(|b| u64::from(space.valid_pages(nand::Pbn(b))))
            .sum();
        let block_units = u64::from(space.pages_per_block()) * u64::from(space.units_per_page());
        let capacity = u64::from(space.good_blocks()) * block_units;
        let c = space.counts();
        RegionCounts {
            name: name.to_string(),
            cells: if pslc { "pSLC" } else { "native" },
            capacity_units: capacity,
            block_units,
            valid_units: valid,
            fullness: valid as f64 / capacity.max(1) as f64,
            gc_victims: c.gc_victims,
            gc_migrations: c.gc_migrations,
            gc_erases: c.gc_erases,
            victim_validity: 0.0,
        }
    };
    let mut out = vec![of("default", s.space(), false)];
    for spec in s.regions() {
        if let Some((space, _)) = s.region(&spec.name) {
            let pslc = spec.cell_mode == Some(nand::CellMode::Pslc);
            out.push(of(&spec.name, space, pslc));
        }
    }
    out
}

/// One object's write-backs in the advisor's baseline window.
#[derive(Debug, Clone, Serialize)]
pub struct ObjectProfile {
    pub name: String,
    pub kind: &'static str,
    pub writes: storage::buffer::ObjectWrites,
}

/// The buffer pool's write profile, named from the catalog.
fn profile_of(e: &Engine) -> Vec<ObjectProfile> {
    let cat = e.catalog();
    let name = |id: storage::ObjectId| -> (String, &'static str) {
        if let Some(t) = cat.tables.get(&id) {
            (t.name.clone(), "table")
        } else if let Some(i) = cat.indexes.get(&id) {
            (i.name.clone(), "index")
        } else {
            (format!("object {id}"), "system")
        }
    };
    e.write_profile()
        .map(|m| {
            m.iter()
                .map(|(&id, w)| {
                    let (name, kind) = name(id);
                    ObjectProfile {
                        name,
                        kind,
                        writes: w.clone(),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The share of the database's pages that carry a delta area.
fn ipa_share(e: &Engine) -> f64 {
    e.store()
        .as_any()
        .and_then(|s| s.downcast_ref::<NativeStore>())
        .map_or(0.0, NativeStore::ipa_share)
}

/// The terminals' latency histograms merged.
fn merged<'a>(hs: impl Iterator<Item = &'a Histogram<u64>>) -> anyhow::Result<Histogram<u64>> {
    let mut m = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    for h in hs {
        m.add(h)?;
    }
    Ok(m)
}
