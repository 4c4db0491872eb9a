//! The runs of NoFTL's reproduction: each through `compare` (Fig. 3) or `io` (Fig. 4), with
//! what the fidelity table and the calibration need kept from their results.

use serde::{Deserialize, Serialize};

use crate::cpu::CpuProfile;
use crate::device::DeviceSpec;
use crate::experiments::compare::{self, paper, LogDevice, Outcome};
use crate::experiments::io;
use crate::targets::{FtlKnobs, TargetSpec};

use super::spec::{Progress, Setup, Spec};

/// The stores of the reproduction: NoFTL, and the DFTL the paper measured at its three cache
/// sizes (`dftl-orig`, docs/ftl.md).
pub const STORES: [&str; 4] = ["native", "dftl-orig-2%", "dftl-orig-15%", "dftl-orig-35%"];

/// NoFTL's emulator, Fig. 5: 116 extra blocks on 4,096.
const SPARE: f64 = 116.0 / 4212.0;
/// Shore-MT's page size.
const PAGE_BYTES: usize = 8192;
/// The published configuration's buffer pool (bufpoolsize 10240 KB).
const BUFFER_BYTES: u64 = 10 << 20;
const GIB: u64 = 1 << 30;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoreRun {
    pub store: String,
    pub tps: f64,
    pub stdev: f64,
    pub slowdown: f64,
    pub consistency: String,
    pub latency_us: f64,
    pub host_cpu_us: f64,
    pub flash_reads: f64,
    pub flash_programs: f64,
    pub gc_migrations: f64,
    pub translation_reads: f64,
    pub translation_writes: f64,
    pub mapping_us: f64,
    /// The transaction's engine work priced at the profile `measured` (commits apart), and its
    /// commits: the calibration's inputs.
    pub measured_cpu_ns: f64,
    pub commits: f64,
    /// `dftl-orig`: scanned cache entries per transaction, and the share of them whose scans did
    /// not fit the host's L3.
    pub scanned_entries: f64,
    pub scanned_beyond_l3_share: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OltpRun {
    pub workload: String,
    pub scale: u32,
    pub volume_bytes: u64,
    pub db_bytes: u64,
    pub stores: Vec<StoreRun>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TpchQueryRun {
    pub store: String,
    pub query: u32,
    pub seconds: f64,
    pub stdev: f64,
    pub slowdown: f64,
    pub consistency: String,
    pub query_cpu_seconds: f64,
    pub engine_cpu_seconds: f64,
    pub mapping_seconds: f64,
    pub translation_reads: f64,
    pub cache_scanned_entries: f64,
    pub cache_scanned_beyond_l3_share: f64,
}

/// `part / whole`, 0 when there is no whole; four decimals.
fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        (part / whole * 1e4).round() / 1e4
    } else {
        0.0
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TpchRun {
    pub sf: f64,
    pub volume_bytes: u64,
    pub queries: Vec<TpchQueryRun>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fig4Run {
    /// raw (the emulator's block device without an FTL) or dftl-orig-2%.
    pub target: String,
    pub writes: u64,
    pub iops: f64,
    pub clat_p50_us: f64,
    pub clat_mean_us: f64,
    pub clat_max_us: f64,
    pub translation_reads_per_write: f64,
    pub translation_writes_per_write: f64,
    pub consistency: String,
}

pub fn setup(spec: &Spec) -> anyhow::Result<Setup> {
    let repeat = spec.repeat.unwrap_or(if spec.quick { 2 } else { 3 });
    crate::limits::in_range("--repeat", u64::from(repeat), 1, 100, "windows per store")?;
    let window = spec
        .duration
        .clone()
        .unwrap_or_else(|| if spec.quick { "5s" } else { "30s" }.into());
    crate::units::parse_duration_ns(&window).map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
    let warmup = spec.warmup.clone().unwrap_or_else(|| "auto".into());
    if !["auto", "precondition"].contains(&warmup.as_str()) {
        anyhow::bail!("--warmup takes auto or precondition (compare's two ways to two device writes), not '{warmup}'");
    }
    Ok(Setup {
        preset: "noftl13",
        spare_factor: (SPARE * 1e4).round() / 1e4,
        page_bytes: PAGE_BYTES,
        buffer_bytes: BUFFER_BYTES,
        log_device: "separate",
        terminals: 1,
        repeat,
        window,
        warmup,
        dftl: "dftl-orig (the DFTL the paper measured, docs/ftl.md)",
    })
}

/// The OLTP scales: (workload, scale, volume); `quick`'s are small and not the paper's.
pub fn oltp_scales(quick: bool) -> Vec<(&'static str, u32, u64)> {
    if quick {
        vec![("tpcb", 2, 64 << 20), ("tpcc", 1, 96 << 20)]
    } else {
        let mut v: Vec<_> = paper::FIG3_OLTP
            .iter()
            .map(|r| (r.workload, r.scale, r.volume_gib * GIB))
            .collect();
        v.extend(paper::TEN_GB_SCALES.iter().map(|&(w, s)| (w, s, 10 * GIB)));
        v
    }
}

/// Beyond the paper: the same rows on today's chips (16 KiB pages, MLC and TLC), with the
/// paper's set-up otherwise, against our DFTL and the page FTL (the published DFTL maps 4 KiB
/// pages one to one and does not run on 16 KiB pages).
pub const TODAY_CHIPS: [&str; 2] = ["mlc16k", "tlc16k"];
pub const TODAY_STORES: [&str; 5] = ["native", "dftl-2%", "dftl-15%", "dftl-35%", "page"];

/// A chip of today's, the OLTP rows at the paper's 1 GiB scales (or quick's).
#[derive(Clone, Debug, Serialize)]
pub struct TodayRun {
    pub preset: String,
    pub rows: Vec<OltpRun>,
}

/// Today's scales: the paper's 1 GiB rows (or quick's).
pub fn today_scales(quick: bool) -> Vec<(&'static str, u32, u64)> {
    oltp_scales(quick)
        .into_iter()
        .filter(|&(_, _, v)| quick || v == GIB)
        .collect()
}

/// One row of today's chips: `chip` at one of `today_scales`.
pub fn today_one(
    spec: &Spec,
    setup: &Setup,
    chip: &str,
    (workload, scale, volume): (&str, u32, u64),
    progress: &mut Progress<'_>,
) -> anyhow::Result<OltpRun> {
    progress(&format!(
        "today's chips: {workload} scale {scale} on {chip} ..."
    ));
    // Today's chips have large blocks (hundreds of KiB to MiB): no volume below the
    // paper's smallest holds every store's open blocks and GC reserve, so --quick runs
    // its small databases on 1 GiB too, with a short warm-up instead of two device
    // writes.
    let volume = volume.max(GIB);
    let mut cs = compare_spec(spec, setup, workload, volume);
    cs.scale = Some(scale);
    if spec.quick {
        cs.warmup = "5s".into();
    }
    cs.device.preset = chip.into();
    // Multi-plane programs where the chip has them (the presets leave them off).
    cs.device.set = vec!["timing.multi_plane_program=true".into()];
    cs.stores = Some(TODAY_STORES.iter().map(|s| s.to_string()).collect());
    run_oltp(&cs, volume)
}

/// `compare`'s spec for one of the reproduction's runs.
fn compare_spec(spec: &Spec, setup: &Setup, workload: &str, volume: u64) -> compare::Spec {
    compare::Spec {
        workload: workload.into(),
        repeat: setup.repeat,
        duration: Some(setup.window.clone()),
        warmup: setup.warmup.clone(),
        terminals: setup.terminals,
        op: SPARE,
        buffer: compare::BufferSize::Bytes(BUFFER_BYTES),
        page_bytes: PAGE_BYTES,
        flash_bytes: Some(volume),
        read_ahead_pages: Some(0),
        cpu: spec.cpu.clone(),
        log_device: LogDevice::Separate,
        device: DeviceSpec {
            preset: setup.preset.into(),
            ..DeviceSpec::default()
        },
        accounts_per_branch: if spec.quick { 20_000 } else { 100_000 },
        tpcc_reduced: spec.quick.then(|| vec![2_000, 300]),
        seed: 1,
        stores: Some(STORES.iter().map(|s| s.to_string()).collect()),
        jobs: spec.jobs,
        memory_cap_bytes: spec.memory_cap_bytes,
        // The rest as `noftl compare` without flags: no TPC-H scale, no log region, no
        // result directory, strict off.
        ..compare::Spec::default()
    }
}

fn store_run(r: &compare::Row, measured: &storage::cpu::CpuModel) -> StoreRun {
    let p = r.per_txn;
    let w = p.host_work;
    let priced = w.priced_without_commits_ns(measured);
    StoreRun {
        store: r.storage.clone(),
        tps: r.throughput_tps,
        stdev: r.stdev,
        slowdown: r.slowdown,
        consistency: r.consistency.status.into(),
        latency_us: p.latency_us,
        host_cpu_us: p.host_cpu_us,
        flash_reads: p.flash_reads,
        flash_programs: p.flash_programs,
        gc_migrations: p.gc_migrations,
        translation_reads: p.translation_reads,
        translation_writes: p.translation_writes,
        mapping_us: p.controller_us,
        measured_cpu_ns: (priced * 10.0).round() / 10.0,
        commits: w.commits,
        scanned_entries: p.scanned_entries,
        scanned_beyond_l3_share: share(p.scanned_entries_beyond_l3, p.scanned_entries),
    }
}

/// Runs one OLTP comparison and keeps what the table and the calibration need.
fn run_oltp(cs: &compare::Spec, volume: u64) -> anyhow::Result<OltpRun> {
    let measured = CpuProfile::measured().engine;
    let (workload, scale) = (cs.workload.clone(), cs.scale.unwrap_or(0));
    let mut got = None;
    compare::run(cs, &mut |_, o| {
        if let Outcome::Stores(res) = o {
            got = Some(OltpRun {
                workload: workload.clone(),
                scale,
                volume_bytes: volume,
                db_bytes: res.device.db_pages * res.device.page_bytes as u64,
                stores: res.rows.iter().map(|r| store_run(r, &measured)).collect(),
            });
        }
        Ok(())
    })?;
    got.ok_or_else(|| anyhow::anyhow!("{} {scale}: no result", cs.workload))
}

/// One row of Fig. 3's OLTP half: one of `oltp_scales`, every store.
pub fn oltp_one(
    spec: &Spec,
    setup: &Setup,
    (workload, scale, volume): (&str, u32, u64),
    progress: &mut Progress<'_>,
) -> anyhow::Result<OltpRun> {
    progress(&format!(
        "{workload} scale {scale} on {} GiB ...",
        volume as f64 / GIB as f64
    ));
    let mut cs = compare_spec(spec, setup, workload, volume);
    cs.scale = Some(scale);
    run_oltp(&cs, volume)
}

fn tpch_sf(quick: bool) -> f64 {
    if quick {
        0.01
    } else {
        1.0
    }
}

/// The TPC-H run's volume (quick's is small and not the paper's).
pub fn tpch_volume_bytes(quick: bool) -> u64 {
    if quick {
        64 << 20
    } else {
        paper::TPCH_VOLUME_BYTES
    }
}

pub fn tpch(spec: &Spec, setup: &Setup, progress: &mut Progress<'_>) -> anyhow::Result<TpchRun> {
    let (sf, volume) = (tpch_sf(spec.quick), tpch_volume_bytes(spec.quick));
    progress(&format!("tpch SF {sf} on {} MiB ...", volume >> 20));
    let mut cs = compare_spec(spec, setup, "tpch", volume);
    cs.sf = Some(sf);
    cs.repeat = 1;
    let mut got = None;
    compare::run(&cs, &mut |_, o| {
        if let Outcome::Tpch(res) = o {
            got = Some(tpch_run(res, sf, volume));
        }
        Ok(())
    })?;
    got.ok_or_else(|| anyhow::anyhow!("tpch: no result"))
}

/// Fig. 4's writes and the emulator's blocks per plane (quick's are fewer, not the paper's).
fn fig4_size(quick: bool) -> (u64, u32) {
    if quick {
        (4096, 264)
    } else {
        (paper::FIG4.writes, 4212)
    }
}

/// Fig. 4's device in RAM: the emulator's blocks of 64 pages of 4 KiB.
pub fn fig4_device_bytes(quick: bool) -> u64 {
    u64::from(fig4_size(quick).1) * 64 * 4096
}

/// Fig. 4's targets: the block device without an FTL, and the DFTL the paper measured.
pub const FIG4_TARGETS: [&str; 2] = ["raw", "dftl-orig-2%"];

/// Fig. 4: fio's random 4 KiB writes at QD 1 over 990 MB of NoFTL's 1 GiB emulator, on the
/// block device without an FTL (the job file's "raw block") and on the DFTL the paper measured
/// with 2% of the mappings cached (the caption's "DFTL"): one of `FIG4_TARGETS`.
pub fn fig4_one(
    spec: &Spec,
    cpu: &CpuProfile,
    target: &str,
    progress: &mut Progress<'_>,
) -> anyhow::Result<Fig4Run> {
    let (writes, blocks) = fig4_size(spec.quick);
    progress(&format!(
        "fig. 4: {writes} random 4 KiB writes at QD 1 on {target} ..."
    ));
    let device = DeviceSpec {
        preset: "noftl13".into(),
        config: None,
        set: vec![format!("geometry.blocks_per_plane={blocks}")],
    };
    let io_spec = io::Spec {
        target: TargetSpec {
            target: if target == "raw" { "raw" } else { "dftl-orig" }.into(),
            device,
            knobs: FtlKnobs {
                cache: 0.02,
                op: SPARE,
                dftl_orig_scan_overlap: cpu.host.dftl_orig_scan_overlap,
                ..FtlKnobs::default()
            },
            image: None,
        },
        // The raw flash takes its pages in order (NAND programs a block's pages in order);
        // on the emulator's latency-only block device the order changes no time.
        rw: Some(
            if target == "raw" {
                "write"
            } else {
                "randwrite"
            }
            .into(),
        ),
        bs_bytes: 4096,
        qd: 1,
        ops: Some(writes),
        ..io::Spec::default()
    };
    let r = io::run(&io_spec, &mut io::Quiet)?;
    let per = |x: Option<u64>| x.map_or(0.0, |v| v as f64 / writes as f64);
    Ok(Fig4Run {
        target: target.into(),
        writes,
        iops: r.iops,
        clat_p50_us: r.latency_us.p50,
        clat_mean_us: r.latency_us.mean,
        clat_max_us: r.latency_us.max,
        translation_reads_per_write: per(r.ftl.as_ref().map(|f| f.translation_reads)),
        translation_writes_per_write: per(r.ftl.as_ref().map(|f| f.translation_writes)),
        consistency: r.consistency.status.into(),
    })
}

/// The calibration's OLTP runs: native only, at the four legible scales.
pub fn oltp_calibration(
    spec: &Spec,
    setup: &Setup,
    progress: &mut Progress<'_>,
) -> anyhow::Result<Vec<OltpRun>> {
    let mut out = Vec::new();
    for r in paper::FIG3_OLTP {
        progress(&format!("{} scale {} (native) ...", r.workload, r.scale));
        let mut cs = compare_spec(spec, setup, r.workload, r.volume_gib * GIB);
        cs.scale = Some(r.scale);
        cs.stores = Some(vec!["native".into()]);
        out.push(run_oltp(&cs, r.volume_gib * GIB)?);
    }
    Ok(out)
}

/// The calibration's TPC-H run: native, and dftl-orig-15% for the scan cell.
pub fn tpch_calibration(
    spec: &Spec,
    setup: &Setup,
    progress: &mut Progress<'_>,
) -> anyhow::Result<TpchRun> {
    let mut run = None;
    progress("tpch SF 1 (native, dftl-orig-15%) ...");
    let mut cs = compare_spec(spec, setup, "tpch", paper::TPCH_VOLUME_BYTES);
    cs.sf = Some(1.0);
    cs.repeat = 1;
    cs.stores = Some(vec!["native".into(), "dftl-orig-15%".into()]);
    compare::run(&cs, &mut |_, o| {
        if let Outcome::Tpch(res) = o {
            run = Some(tpch_run(res, 1.0, paper::TPCH_VOLUME_BYTES));
        }
        Ok(())
    })?;
    run.ok_or_else(|| anyhow::anyhow!("tpch: no result"))
}

fn tpch_run(res: &compare::TpchCompareResult, sf: f64, volume: u64) -> TpchRun {
    let mut queries = Vec::new();
    for s in &res.rows {
        for q in &s.queries {
            queries.push(TpchQueryRun {
                store: s.storage.clone(),
                query: q.query,
                seconds: q.seconds,
                stdev: q.stdev,
                slowdown: q.slowdown,
                consistency: q.consistency.status.into(),
                query_cpu_seconds: q.query_cpu_seconds,
                engine_cpu_seconds: q.engine_cpu_seconds,
                mapping_seconds: q.mapping_seconds,
                translation_reads: q.translation_reads,
                cache_scanned_entries: q.cache_scanned_entries,
                cache_scanned_beyond_l3_share: share(
                    q.cache_scanned_entries_beyond_l3,
                    q.cache_scanned_entries,
                ),
            });
        }
    }
    TpchRun {
        sf,
        volume_bytes: volume,
        queries,
    }
}

/// The calibration's inputs from its runs (module doc of `calibration`).
pub fn calibration_inputs(
    used: &crate::cpu::PaperNoftlFit,
    oltp: &[OltpRun],
    tpch: &TpchRun,
) -> anyhow::Result<super::calibration::Inputs> {
    use super::calibration::{Inputs, OltpInput, ScanInput, TpchInput, CALIBRATION_CELLS};
    let name = |want: String| -> anyhow::Result<&'static str> {
        CALIBRATION_CELLS
            .iter()
            .copied()
            .find(|c| *c == want)
            .ok_or_else(|| anyhow::anyhow!("'{want}' is not a calibration cell"))
    };
    let mut o = Vec::new();
    for r in oltp {
        let p = paper::oltp_row(&r.workload, r.scale)
            .ok_or_else(|| anyhow::anyhow!("{} {}: no legible row", r.workload, r.scale))?;
        let n = r
            .stores
            .iter()
            .find(|s| s.store == "native")
            .ok_or_else(|| anyhow::anyhow!("{} {}: no native row", r.workload, r.scale))?;
        let wl = if r.workload == "tpcc" {
            "TPC-C"
        } else {
            "TPC-B"
        };
        o.push(OltpInput {
            cell: name(format!("{wl} {} NoFTL", r.scale))?,
            paper_ns: 1e9 / p.noftl_tps,
            ns: (1e9 / n.tps).round(),
            cpu_ns: (n.host_cpu_us * 1e3).round(),
            measured_cpu_ns: n.measured_cpu_ns,
            commits: n.commits,
        });
    }
    let q = |store: &str, query: u32| {
        tpch.queries
            .iter()
            .find(|x| x.store == store && x.query == query)
            .ok_or_else(|| anyhow::anyhow!("tpch: no {store} Q{query}"))
    };
    let mut t = Vec::new();
    for p in paper::FIG3_TPCH {
        let x = q("native", p.query)?;
        t.push(TpchInput {
            cell: name(format!("TPC-H Q{} NoFTL", p.query))?,
            paper_ns: p.noftl_s * 1e9,
            ns: (x.seconds * 1e9).round(),
            engine_cpu_ns: (x.engine_cpu_seconds * 1e9).round(),
            query_cpu_ns: (x.query_cpu_seconds * 1e9).round(),
            engine_scale: used.engine_scale,
            query_scale: used.query_scale,
        });
    }
    let d = q("dftl-orig-15%", 1)?;
    // What one scanned entry's record access cost, unoverlapped: 40 cycles for the scans whose
    // working set fit the L3, 210 for the others (ftl::host; ftl docs, "What a scan reads").
    let beyond = d.cache_scanned_beyond_l3_share;
    let access_cycles = (1.0 - beyond) * ftl::host::L3_HIT_CYCLES as f64
        + beyond * (ftl::host::L3_HIT_CYCLES + ftl::host::DRAM_EXTRA_CYCLES) as f64;
    Ok(Inputs {
        oltp: o,
        tpch: t,
        scan: ScanInput {
            cell: name("TPC-H Q1 DFTL 15%".into())?,
            paper_ns: paper::FIG3_TPCH[0].dftl[1].value * 1e9,
            ns: (d.seconds * 1e9).round(),
            engine_cpu_ns: (d.engine_cpu_seconds * 1e9).round(),
            query_cpu_ns: (d.query_cpu_seconds * 1e9).round(),
            engine_scale: used.engine_scale,
            query_scale: used.query_scale,
            scanned_entries: d.cache_scanned_entries,
            access_cycles,
            overlap: used.dftl_orig_scan_overlap,
        },
    })
}
