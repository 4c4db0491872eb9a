//! `noftl reproduce amf`: AMF's write-amplification table (AMF, FAST 2016, and its lab slides:
//! "write amplification" at file-system and FTL level) with the real Linux file systems as the
//! baselines: kernel ext4 and kernel F2FS, made and mounted in a QEMU guest (`experiments::vm`)
//! on the emulated SSD exported through NBD, on the page FTL and on DFTL; ALFS on AMF and our
//! own `lfs` in `f2fs` mode (FUSE on the host, `experiments::fs_waf`) beside them.
//!
//! Every kernel row is two guest boots on fresh devices: a no-op command (make, mount, unmount:
//! the baseline) and the workload, run in the mounted file system by this program's hidden
//! `fs waf-workload` verb (the `fs waf` driver, the same code and parameters as the host rows;
//! fio is the host's, run in the guest). The baseline's counters are subtracted from the run's:
//! - FS level: bytes the file system wrote to the export (NBD write payload) / bytes the
//!   workload wrote;
//! - FTL level: flash page programs / pages the FTL was asked to write (payload and zeroing
//!   requests),
//!
//! as the slides split them. Guest wall times are TCG's (software CPU emulation), not results:
//! only the server's counters and modelled device time are.
//!
//! The fidelity table shares `fidelity::cell` (and `Cell`) with NoFTL's: every slide value
//! beside ours, the relative error, within 15% or the counters that say why (`why`). The
//! kernel F2FS rows are also set against our `f2fs` mode (`f2fs_model`: within 10% or not).
//!
//! Steady state: the rows of the workloads that repeat their work (seqwrite, randwrite, kv:
//! `rounds::ROUND_WORKLOADS`) run in rounds, kernel and host rows alike: the workload lays out
//! its data set, then marks each round (in a guest on its second serial port, inside one
//! boot; on the host to `fs waf`'s measurer), the host reads the server's counters at each
//! mark, and the rounds go on until the last five are steady by the runner's rule
//! (`crate::steady`: SNIA SSS PTS 2.1.24 on throughput and FTL WAF) or the cap. Those rows'
//! figures are the last five rounds' (`window`), with every round and its throughput in
//! modelled device time. The other rows (Postmark, the engine's, the Hadoop jobs) are whole
//! runs from a fresh device: they say
//! `steady_state.met = false` with how many times the run wrote the device over
//! (`device_writes`; above 1 the FTL had to collect garbage, and `gc_migrations` says whether
//! it copied).
//!
//! Invariants:
//! 1. A cell's value comes from the server's counters less its own baseline run's; nothing is
//!    scaled or fitted (no calibration cells).
//! 2. A row whose counters break a bound of the write path (`storage::measure::check_writes`)
//!    gives cells that are never within tolerance.

use anyhow::bail;
use serde::Serialize;

use storage::measure::Consistency;

use crate::device::DeviceSpec;
use crate::experiments::fs_waf::{self, WorkloadRun};
use crate::experiments::rounds::{self, Snapshot, Window};

use super::reasons::{self, Facts, Level, LfsPages};
use crate::experiments::vm::{self, DeviceCounters, Fs};
use crate::steady::SteadyState;

use super::fidelity::{cell, Cell};
use super::guests;
use super::spec::{Progress, Spec};

/// One row of the slides' table: the slides' figures for a workload (FTL level for EXT4, FS and
/// FTL level for F2FS, FS level for AMF, whose FTL level is 1.00 by design).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SlidesRow {
    /// The slides' name of the row.
    pub row: &'static str,
    /// The `fs waf` workload that stands for it.
    pub workload: &'static str,
    pub ext4_page_ftl: f64,
    pub ext4_dftl_ftl: f64,
    /// (FS, FTL).
    pub f2fs_page: (f64, f64),
    pub f2fs_dftl: (f64, f64),
    pub amf_fs: f64,
}

/// The AMF slides' write-amplification table (docs/PERFORMANCE.md section 13 sets it beside
/// `fs waf`'s rows).
pub const SLIDES: [SlidesRow; 10] = [
    slides(
        "FIO (SW)",
        "seqwrite",
        [1.00, 1.00, 1.00, 1.00, 1.00, 1.00, 1.00],
    ),
    slides(
        "FIO (RW)",
        "randwrite",
        [1.41, 1.45, 1.35, 1.82, 1.34, 2.18, 1.38],
    ),
    slides(
        "Postmark (L)",
        "postmark-low",
        [1.00, 1.00, 1.00, 1.00, 1.00, 1.00, 1.00],
    ),
    slides(
        "Postmark (H)",
        "postmark-high",
        [1.12, 1.35, 1.17, 2.23, 1.18, 2.89, 1.16],
    ),
    slides(
        "Non-Trans",
        "kv",
        [1.97, 2.00, 1.58, 2.90, 1.59, 2.97, 1.59],
    ),
    slides("OLTP", "tpcb", [1.45, 1.46, 1.23, 1.78, 1.23, 1.79, 1.24]),
    slides("TPC-C", "tpcc", [2.33, 2.21, 1.81, 2.80, 1.82, 5.45, 1.87]),
    slides("DFSIO", "dfsio", [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
    slides("TeraSort", "terasort", [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
    slides(
        "WordCount",
        "wordcount",
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
    ),
];

/// A row from the slides' seven numbers, in the slides' column order.
const fn slides(row: &'static str, workload: &'static str, v: [f64; 7]) -> SlidesRow {
    SlidesRow {
        row,
        workload,
        ext4_page_ftl: v[0],
        ext4_dftl_ftl: v[1],
        f2fs_page: (v[2], v[3]),
        f2fs_dftl: (v[4], v[5]),
        amf_fs: v[6],
    }
}

/// The rows run when `--only` names none: every row of the slides (`fs waf`'s workloads).
pub const DEFAULT_WORKLOADS: [&str; 10] = fs_waf::WORKLOADS;

/// The kernel configurations: file system on FTL.
const KERNEL: [(Fs, &str); 4] = [
    (Fs::Ext4, "page"),
    (Fs::Ext4, "dftl"),
    (Fs::F2fs, "page"),
    (Fs::F2fs, "dftl"),
];
/// The host configurations (`fs waf`): our f2fs mode beside kernel F2FS, and ALFS on AMF.
const HOST: [&str; 3] = ["f2fs:page", "f2fs:dftl", "alfs:amf"];

/// The set-up every run used.
#[derive(Clone, Debug, Serialize)]
pub struct AmfSetup {
    /// The emulated device (`--preset` and `--set`), the same under every configuration.
    pub device: Vec<String>,
    pub device_bytes: u64,
    /// The TPC-C rows' device (kernel and host rows alike, each with its own baseline): twice
    /// the others, since the one-warehouse database does not fit in the 149 MiB kernel F2FS
    /// leaves free on the smaller one.
    pub tpcc_device: Vec<String>,
    pub tpcc_device_bytes: u64,
    /// What the scale is against the slides' device.
    pub scale_note: &'static str,
    pub workloads: Vec<String>,
    /// seqwrite, randwrite: the file's share of the free space, and the bytes written after it
    /// as a multiple of it (`fs waf`'s `--fill`, `--rounds`).
    pub fill: f64,
    pub rounds: f64,
    pub seed: u64,
    pub kernel_version: String,
    pub accelerator: String,
    pub timing_note: &'static str,
}

/// A kernel file system's run of one workload, less its baseline (make, mount, unmount).
#[derive(Clone, Debug, Serialize)]
pub struct KernelRow {
    pub fs: Fs,
    pub target: String,
    pub workload: String,
    pub app_bytes: u64,
    pub workload_info: serde_json::Value,
    /// NBD write payload of the run less the baseline's.
    pub fs_write_bytes: u64,
    /// The FTL's host page writes (payload and zeroing) less the baseline's.
    pub host_write_pages: u64,
    pub flash_programs: u64,
    pub gc_migrations: u64,
    pub flash_erases: u64,
    pub fs_waf: f64,
    pub ftl_waf: f64,
    pub total_waf: f64,
    /// Modelled device time of the run less the baseline's: the dies' busy time, summed.
    pub die_busy_us: f64,
    pub baseline: DeviceCounters,
    pub run: DeviceCounters,
    pub consistency: Consistency,
    pub steady_state: SteadyState,
    /// A row run in rounds: its measured window (the last five rounds), whose figures are the
    /// row's FS, FTL and total WAF, and every round. None: a whole run, less its baseline.
    pub window: Option<Window>,
    /// Guest seconds around the command (TCG's, not a result).
    pub guest_command_s: f64,
}

/// Kernel F2FS against our `f2fs` mode on one workload and FTL.
#[derive(Clone, Debug, Serialize)]
pub struct ModelPair {
    pub workload: String,
    pub target: String,
    pub kernel_fs_waf: f64,
    pub ours_fs_waf: f64,
    pub kernel_ftl_waf: f64,
    pub ours_ftl_waf: f64,
    /// ours / kernel - 1.
    pub fs_difference: f64,
    pub ftl_difference: f64,
    /// Both levels within `MODEL_TOLERANCE`.
    pub within: bool,
    /// Why the pair differs beyond `MODEL_TOLERANCE`, from both rows' counters
    /// (`reasons::model_reason`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Kernel F2FS and our model of it: the 10%.
pub const MODEL_TOLERANCE: f64 = 0.10;
/// Slides' cells: the 15%.
const TOLERANCE: f64 = 0.15;

#[derive(Debug, Serialize)]
pub struct AmfResult {
    pub paper: String,
    pub quick: bool,
    pub setup: AmfSetup,
    pub cells: Vec<Cell>,
    pub held_out_within: usize,
    pub held_out_judged: usize,
    pub kernel: Vec<KernelRow>,
    /// `fs waf`'s rows for our f2fs mode and ALFS on AMF.
    pub host: Vec<fs_waf::Row>,
    pub f2fs_model: Vec<ModelPair>,
    /// Rows that did not run to the end, with the error: their cells are missing.
    pub failed: Vec<FailedRow>,
}

/// A row that failed.
#[derive(Debug, Serialize)]
pub struct FailedRow {
    pub config: String,
    pub workload: String,
    pub error: String,
}

/// The device and workload scales of a run.
struct Scale {
    device: DeviceSpec,
    /// The TPC-C rows' device: twice the others, because the one-warehouse database does not
    /// fit in the free space kernel F2FS leaves on 256 MiB (149 MiB).
    tpcc_device: DeviceSpec,
    fill: f64,
    rounds: f64,
    /// The cap on steady-state rounds of the rows that run in rounds.
    max_rounds: u32,
    timeout_s: u64,
}

fn scale(quick: bool) -> Scale {
    // The `fs waf` device (docs/PERFORMANCE.md section 13): the tiny preset grown to 256 MiB of
    // SLC, 128 pages of 4 KiB per block as on the slides' device; --quick: 128 MiB (alfs
    // does not fit 64 MiB: its checkpoint segments, meta log and cleaning reserve).
    let blocks = if quick { 32 } else { 64 };
    let device = |blocks: u32| DeviceSpec {
        set: vec![
            format!("geometry.blocks_per_plane={blocks}"),
            "geometry.pages_per_block=128".into(),
        ],
        ..DeviceSpec::preset("tiny")
    };
    Scale {
        device: device(blocks),
        tpcc_device: device(2 * blocks),
        fill: if quick { 0.5 } else { 0.75 },
        rounds: if quick { 0.25 } else { 2.0 },
        // --quick checks the protocol with two rounds, not steady state.
        max_rounds: if quick { 2 } else { crate::steady::MAX_ROUNDS },
        timeout_s: if quick { 600 } else { 3 * 3600 },
    }
}

/// The `fs waf` spec of these rows (host rows, and the guest's workload parameters).
fn waf_spec(spec: &Spec, sc: &Scale, workloads: &[String]) -> fs_waf::Spec {
    fs_waf::Spec {
        noftl: spec.noftl.clone(),
        configs: HOST.iter().map(|c| c.to_string()).collect(),
        device: sc.device.clone(),
        workloads: workloads.to_vec(),
        fill: sc.fill,
        rounds: sc.rounds,
        // `fs waf`'s defaults (crates/noftl/src/cli/fs_waf.rs).
        postmark_low_files: 1000,
        postmark_high_files: 10_000,
        postmark_transactions: 20_000,
        postmark: fs_waf::Postmark::Builtin,
        kv_ops: 100_000,
        tpcb_scale: 1,
        tpcb_txns: 20_000,
        tpcc_scale: 1,
        tpcc_txns: 2_000,
        seed: 1,
        max_rounds: Some(sc.max_rounds),
    }
}

/// Whether a workload's kernel rows run in rounds.
fn in_rounds(workload: &str) -> bool {
    rounds::ROUND_WORKLOADS.contains(&workload)
}

/// The guest's second serial port, where the workload marks its rounds.
const ROUNDS_TTY: &str = "/dev/ttyS1";

/// The guest's command: this program's `fs waf-workload` in the mounted file system.
fn guest_command(w: &fs_waf::Spec, workload: &str) -> Vec<String> {
    let mut c: Vec<String> = vec![
        w.noftl.display().to_string(),
        "fs".into(),
        "waf-workload".into(),
        "--dir".into(),
        ".".into(),
        "--workloads".into(),
        workload.into(),
    ];
    for (flag, v) in [
        ("--fill", w.fill.to_string()),
        ("--rounds", w.rounds.to_string()),
        ("--postmark-low-files", w.postmark_low_files.to_string()),
        ("--postmark-high-files", w.postmark_high_files.to_string()),
        (
            "--postmark-transactions",
            w.postmark_transactions.to_string(),
        ),
        ("--kv-ops", w.kv_ops.to_string()),
        ("--tpcb-scale", w.tpcb_scale.to_string()),
        ("--tpcb-txns", w.tpcb_txns.to_string()),
        ("--tpcc-scale", w.tpcc_scale.to_string()),
        ("--tpcc-txns", w.tpcc_txns.to_string()),
        ("--seed", w.seed.to_string()),
    ] {
        c.extend([flag.to_string(), v]);
    }
    if in_rounds(workload) {
        c.extend(["--rounds-tty".to_string(), ROUNDS_TTY.to_string()]);
    }
    c
}

fn migrations(d: &DeviceCounters) -> u64 {
    d.gc_migrations.as_u64().unwrap_or(0)
}

/// The row of a run less its baseline; a run in rounds (`marks`: the counters at each mark)
/// takes its figures from its window.
fn kernel_row(
    (fs, target, workload): (Fs, &str, &str),
    (b, r): (&DeviceCounters, &DeviceCounters),
    guest_command_s: f64,
    (w, marks): (&WorkloadRun, &[Snapshot]),
    device_bytes: u64,
) -> anyhow::Result<KernelRow> {
    let fs_write_bytes = r.host_write_bytes.saturating_sub(b.host_write_bytes);
    let host_write_pages = r.host_write_pages.saturating_sub(b.host_write_pages);
    let flash_programs = r.flash_programs.saturating_sub(b.flash_programs);
    let window = rounds::window(marks, device_bytes)?;
    if in_rounds(workload) && window.is_none() {
        bail!(
            "{workload} ran in rounds but the host saw no round end ({} marks)",
            marks.len()
        );
    }
    let (fs_waf, ftl_waf) = match &window {
        Some(win) => (win.figures.fs_waf, win.figures.ftl_waf),
        None => (
            fs_write_bytes as f64 / w.app_bytes.max(1) as f64,
            flash_programs as f64 / host_write_pages.max(1) as f64,
        ),
    };
    let page = ftl::LOGICAL_PAGE_BYTES as u64;
    let consistency = guests::check_server_writes(
        w.app_bytes,
        fs_waf::app_bytes_reach_device(workload),
        fs_write_bytes,
        r,
    );
    let steady_state = match &window {
        Some(win) => win.steady_state.clone(),
        None => {
            SteadyState::skipped((r.host_write_pages * page) as f64 / device_bytes.max(1) as f64)
        }
    };
    Ok(KernelRow {
        fs,
        target: target.to_string(),
        workload: workload.to_string(),
        app_bytes: w.app_bytes,
        workload_info: w.workload_info.clone(),
        fs_write_bytes,
        host_write_pages,
        flash_programs,
        gc_migrations: migrations(r).saturating_sub(migrations(b)),
        flash_erases: r.flash_erases.saturating_sub(b.flash_erases),
        fs_waf,
        ftl_waf,
        total_waf: fs_waf * ftl_waf,
        die_busy_us: r.die_busy_us - b.die_busy_us,
        baseline: b.clone(),
        run: r.clone(),
        consistency,
        steady_state,
        window,
        guest_command_s,
    })
}

/// What one guest job is: a configuration's baseline on a device, or a workload on it (with
/// the index of its baseline's job).
struct Job {
    fs: Fs,
    target: &'static str,
    workload: Option<String>,
    /// On the TPC-C rows' larger device (`Scale::tpcc_device`).
    large: bool,
    baseline: usize,
}

/// The guest jobs: per configuration, a baseline on each device its workloads use, then the
/// workloads.
fn jobs_of(workloads: &[String]) -> Vec<Job> {
    let mut jobs: Vec<Job> = Vec::new();
    for (fs, target) in KERNEL {
        let mut baselines = [None, None];
        for w in workloads {
            let large = Scale::large(w);
            let baseline = match baselines[usize::from(large)] {
                Some(b) => b,
                None => {
                    jobs.push(Job {
                        fs,
                        target,
                        workload: None,
                        large,
                        baseline: jobs.len(),
                    });
                    baselines[usize::from(large)] = Some(jobs.len() - 1);
                    jobs.len() - 1
                }
            };
            jobs.push(Job {
                fs,
                target,
                workload: Some(w.clone()),
                large,
                baseline,
            });
        }
    }
    jobs
}

impl Scale {
    /// Whether `workload` runs on the larger device.
    fn large(workload: &str) -> bool {
        workload == "tpcc"
    }

    fn device_of(&self, large: bool) -> &DeviceSpec {
        if large {
            &self.tpcc_device
        } else {
            &self.device
        }
    }
}

/// The workloads `spec.only` names (comma-separated), else the default rows; checked.
pub fn workloads_of(spec: &Spec) -> anyhow::Result<Vec<String>> {
    let names: Vec<String> = match spec.only.as_deref() {
        Some(o) => o.split(',').map(|s| s.trim().to_string()).collect(),
        None if spec.quick => vec!["randwrite".into()],
        None => DEFAULT_WORKLOADS.iter().map(|s| s.to_string()).collect(),
    };
    for n in &names {
        if !SLIDES.iter().any(|r| r.workload == n) {
            bail!(
                "reproduce amf: --only takes workloads of the slides' rows ({}), not '{n}'",
                SLIDES.map(|r| r.workload).join(", ")
            );
        }
    }
    Ok(names)
}

/// Runs the kernel rows, the host rows and the fidelity table.
pub fn run(spec: &Spec, progress: &mut Progress<'_>) -> anyhow::Result<AmfResult> {
    let workloads = workloads_of(spec)?;
    let sc = scale(spec.quick);
    let wspec = waf_spec(spec, &sc, &workloads);
    wspec.check()?;
    let device_bytes = sc.device.load()?.geometry.capacity_bytes();
    let tpcc_device_bytes = sc.tpcc_device.load()?.geometry.capacity_bytes();
    let bytes_of = |large: bool| {
        if large {
            tpcc_device_bytes
        } else {
            device_bytes
        }
    };
    // Refused before any run: the program, QEMU and the kernel.
    let guests = guests::prepare("amf", spec)?;
    let kernel = &guests.kernel;

    let jobs = jobs_of(&workloads);
    progress(&format!(
        "{} guest runs (kernel {}, {} jobs at once), then the host rows",
        jobs.len(),
        kernel.version,
        spec.jobs
    ));
    let specs: Vec<(String, vm::Spec)> = jobs
        .iter()
        .map(|j| {
            let command = match &j.workload {
                Some(w) => guest_command(&wspec, w),
                None => vec!["true".to_string()],
            };
            let rounds = j.workload.as_deref().is_some_and(in_rounds);
            let what = format!(
                "{}:{} {}{}",
                j.fs.name(),
                j.target,
                j.workload.as_deref().unwrap_or("baseline"),
                if j.large { " (large device)" } else { "" }
            );
            let vm = guests::vm_spec(
                spec,
                (sc.device_of(j.large), sc.timeout_s),
                guests.accel,
                (j.fs, j.target),
                command,
            );
            let vm = vm::Spec {
                max_rounds: rounds.then_some(sc.max_rounds),
                label: format!("reproduce amf: {what}"),
                ..vm
            };
            (what, vm)
        })
        .collect();
    let results = guests::run_all("amf", spec.jobs, &specs);
    // A row that fails (a guest's command, a mount) is recorded and the others go on.
    let mut failed = Vec::new();
    let mut kernel_rows = Vec::new();
    for (j, run) in jobs.iter().zip(&results) {
        let Some(w) = &j.workload else {
            continue;
        };
        let (fs, target) = (j.fs, j.target);
        let row = match (&results[j.baseline], run) {
            (Ok(base), Ok(run)) => serde_json::from_str::<WorkloadRun>(run.guest_stdout.trim())
                .map_err(|e| anyhow::anyhow!("the guest's workload report: {e}"))
                .and_then(|wr| {
                    kernel_row(
                        (fs, target, w),
                        (&base.device, &run.device),
                        run.guest_timing.command_s,
                        (&wr, &run.rounds),
                        bytes_of(j.large),
                    )
                }),
            (Err(e), _) => Err(anyhow::anyhow!("its baseline: {e:#}")),
            (_, Err(e)) => Err(anyhow::anyhow!("{e:#}")),
        };
        match row {
            Ok(r) => kernel_rows.push(r),
            Err(e) => failed.push(FailedRow {
                config: format!("kernel {}:{target}", fs.name()),
                workload: w.clone(),
                error: format!("{e:#}"),
            }),
        }
    }
    progress("host rows: our f2fs mode (page, dftl) and alfs on amf, through FUSE");
    let mut host = Vec::new();
    for w in &workloads {
        let one = fs_waf::Spec {
            workloads: vec![w.clone()],
            device: sc.device_of(Scale::large(w)).clone(),
            ..wspec.clone()
        };
        match fs_waf::run(&one) {
            Ok(r) => host.extend(r.results),
            Err(e) => failed.push(FailedRow {
                config: format!("ours {}", HOST.join(", ")),
                workload: w.clone(),
                error: format!("{e:#}"),
            }),
        }
    }
    let f2fs_model = model_pairs(&kernel_rows, &host);
    let cells = table(&workloads, &kernel_rows, &host);
    Ok(AmfResult {
        paper: "amf".into(),
        quick: spec.quick,
        setup: AmfSetup {
            device: sc.device.cli_args(),
            device_bytes,
            tpcc_device: sc.tpcc_device.cli_args(),
            tpcc_device_bytes,
            scale_note: "the slides' device has 8 channels x 4 ways and 128 pages of 4 KiB per block; ours keeps the block (128 x 4 KiB) and is scaled to 256 MiB (128 MiB with --quick; the TPC-C rows twice that) on 2 x 2 x 2 dies x planes, so that a guest run writes the device over several times",
            workloads,
            fill: sc.fill,
            rounds: sc.rounds,
            seed: wspec.seed,
            kernel_version: kernel.version.clone(),
            accelerator: guests.accelerator.clone(),
            timing_note: "guest wall times are the accelerator's (TCG: software CPU emulation), not results; only the server's counters and modelled device time are",
        },
        held_out_within: cells.iter().filter(|c| c.within).count(),
        held_out_judged: cells.len(),
        cells,
        kernel: kernel_rows,
        host,
        f2fs_model,
        failed,
    })
}

fn rel(ours: f64, other: f64) -> f64 {
    if other != 0.0 {
        ours / other - 1.0
    } else {
        0.0
    }
}

fn model_pairs(kernel: &[KernelRow], host: &[fs_waf::Row]) -> Vec<ModelPair> {
    let mut out = Vec::new();
    for k in kernel.iter().filter(|k| k.fs == Fs::F2fs) {
        let Some(h) = host
            .iter()
            .find(|h| h.fs == "f2fs" && h.target == k.target && h.workload == k.workload)
        else {
            continue;
        };
        let (fs_d, ftl_d) = (rel(h.fs_waf, k.fs_waf), rel(h.ftl_waf, k.ftl_waf));
        out.push(ModelPair {
            workload: k.workload.clone(),
            target: k.target.clone(),
            kernel_fs_waf: k.fs_waf,
            ours_fs_waf: h.fs_waf,
            kernel_ftl_waf: k.ftl_waf,
            ours_ftl_waf: h.ftl_waf,
            fs_difference: fs_d,
            ftl_difference: ftl_d,
            within: fs_d.abs() <= MODEL_TOLERANCE && ftl_d.abs() <= MODEL_TOLERANCE,
            reason: reasons::model_reason(&facts_kernel(k), &facts_host(h), MODEL_TOLERANCE),
        });
    }
    out
}

fn why_kernel(k: &KernelRow) -> String {
    let mib = |b: u64| b as f64 / 1_048_576.0;
    let rounds = match &k.window {
        Some(w) => format!(
            "; rounds: {} ({}), the last {} measured: app {:.1} MiB, FS {:.1} MiB, FTL host pages {}, flash programs {}, {:.2} MiB/s of modelled device time; ",
            w.rounds.len(),
            if w.steady_state.met { "steady" } else { "not steady at the cap" },
            w.rounds.len().min(crate::steady::WINDOW_ROUNDS),
            mib(w.figures.app_bytes),
            mib(w.figures.fs_write_bytes),
            w.figures.host_write_pages,
            w.figures.flash_programs,
            w.figures.app_mib_per_device_s
        ),
        None => "; a whole run: ".to_string(),
    };
    format!(
        "kernel {} in the guest{rounds}in all: app {:.1} MiB, the FS wrote {:.1} MiB to the export ({} NBD writes, {} flushes, {} trims in the run; mkfs and mount {:.1} MiB subtracted), FTL host pages {}, flash programs {}, GC migrations {}, erases {}, the device written over {:.2}x by the window's start (a whole run: by its end)",
        k.fs.name(),
        mib(k.app_bytes),
        mib(k.fs_write_bytes),
        k.run.write_requests,
        k.run.flush_requests,
        k.run.trim_requests,
        mib(k.baseline.host_write_bytes),
        k.host_write_pages,
        k.flash_programs,
        k.gc_migrations,
        k.flash_erases,
        k.steady_state.device_writes
    )
}

fn why_host(h: &fs_waf::Row) -> String {
    let lfs = h.lfs.as_ref();
    let n = |k: &str| lfs.and_then(|l| l[k].as_u64()).unwrap_or(0);
    format!(
        "our {} (lfs through FUSE on the host): app {:.1} MiB, FS pages {} (data {}, node {}, meta {}, checkpoint {}), host cleaning {} pages copied from {} victims; FTL GC {}",
        h.fs,
        h.app_bytes as f64 / 1_048_576.0,
        h.fs_pages_written,
        n("data_pages"),
        n("node_pages"),
        n("meta_pages"),
        n("checkpoint_pages"),
        n("cleaned_pages"),
        n("victims"),
        h.ftl_gc
    )
}

/// How a row's figures were measured, for a reason's sentence.
fn regime(window: Option<&Window>) -> String {
    match window {
        Some(w) if w.steady_state.met => format!("{} rounds, steady", w.rounds.len()),
        Some(w) => format!("{} rounds, not steady at the cap", w.rounds.len()),
        None => "a whole run".into(),
    }
}

/// (application bytes, bytes the file system wrote, the FTL's host pages, flash programs): the
/// window's where the row ran in rounds, else `whole` (the whole run's).
fn counts_of(window: Option<&Window>, whole: [u64; 4]) -> [u64; 4] {
    window.map_or(whole, |w| {
        [
            w.figures.app_bytes,
            w.figures.fs_write_bytes,
            w.figures.host_write_pages,
            w.figures.flash_programs,
        ]
    })
}

/// What a kernel row's counters say, for `reasons`: its window's where it ran in rounds.
fn facts_kernel(k: &KernelRow) -> Facts {
    let [app_bytes, fs_write_bytes, host, programs] = counts_of(
        k.window.as_ref(),
        [
            k.app_bytes,
            k.fs_write_bytes,
            k.host_write_pages,
            k.flash_programs,
        ],
    );
    Facts {
        fs: format!("kernel {}", k.fs.name()),
        lfs: None,
        app_bytes,
        fs_write_bytes,
        fs_waf: k.fs_waf,
        ftl_waf: k.ftl_waf,
        host_write_pages: host,
        extra_programs: programs.saturating_sub(host),
        trims: k.run.trim_requests,
        flushes: k.run.flush_requests,
        device_writes: k.steady_state.device_writes,
        steady: k.steady_state.met,
        regime: regime(k.window.as_ref()),
    }
}

/// What a host row's counters say, for `reasons`.
fn facts_host(h: &fs_waf::Row) -> Facts {
    let n = |k: &str| h.lfs.as_ref().and_then(|l| l[k].as_u64()).unwrap_or(0);
    let [app_bytes, fs_write_bytes, host, programs] = counts_of(
        h.window.as_ref(),
        [
            h.app_bytes,
            h.fs_pages_written * 4096,
            h.fs_pages_written,
            (h.ftl_waf * h.fs_pages_written as f64).round() as u64,
        ],
    );
    Facts {
        fs: format!("our {}", h.fs),
        lfs: h.lfs.as_ref().map(|_| LfsPages {
            data: n("data_pages"),
            node: n("node_pages"),
            meta: n("meta_pages"),
            checkpoint: n("checkpoint_pages"),
            cleaned: n("cleaned_pages"),
        }),
        app_bytes,
        fs_write_bytes,
        fs_waf: h.fs_waf,
        ftl_waf: h.ftl_waf,
        host_write_pages: host,
        extra_programs: programs.saturating_sub(host),
        trims: h.trims_pages.as_u64().unwrap_or(0),
        flushes: 0,
        device_writes: h.steady_state.device_writes,
        steady: h.steady_state.met,
        regime: regime(h.window.as_ref()),
    }
}

/// The fidelity table: per row, the slides' seven cells beside ours.
fn table(workloads: &[String], kernel: &[KernelRow], host: &[fs_waf::Row]) -> Vec<Cell> {
    let mut out = Vec::new();
    for w in workloads {
        let Some(s) = SLIDES.iter().find(|s| s.workload == w) else {
            continue;
        };
        let k = |fs: Fs, t: &str| {
            kernel
                .iter()
                .find(|r| r.fs == fs && r.target == t && &r.workload == w)
        };
        let mut push = |name: String,
                        (paper, ours, level): (f64, f64, Level),
                        store: String,
                        cons: &str,
                        (why, facts): (String, &Facts)| {
            let mut c = cell(
                name, "WAF", paper, ours, TOLERANCE, &store, cons, "none", why,
            );
            c.reason = reasons::reason(level, paper, ours, TOLERANCE, facts);
            out.push(c);
        };
        for (t, label, paper) in [
            ("page", "page", s.ext4_page_ftl),
            ("dftl", "DFTL", s.ext4_dftl_ftl),
        ] {
            if let Some(r) = k(Fs::Ext4, t) {
                push(
                    format!("{} EXT4+{label} FTL", s.row),
                    (paper, r.ftl_waf, Level::Ftl),
                    format!("kernel ext4 on {t}"),
                    r.consistency.status,
                    (why_kernel(r), &facts_kernel(r)),
                );
            }
        }
        for (t, label, (fs_p, ftl_p)) in
            [("page", "page", s.f2fs_page), ("dftl", "DFTL", s.f2fs_dftl)]
        {
            if let Some(r) = k(Fs::F2fs, t) {
                let store = format!("kernel f2fs on {t}");
                let facts = facts_kernel(r);
                push(
                    format!("{} F2FS+{label} FS", s.row),
                    (fs_p, r.fs_waf, Level::Fs),
                    store.clone(),
                    r.consistency.status,
                    (why_kernel(r), &facts),
                );
                push(
                    format!("{} F2FS+{label} FTL", s.row),
                    (ftl_p, r.ftl_waf, Level::Ftl),
                    store,
                    r.consistency.status,
                    (why_kernel(r), &facts),
                );
            }
        }
        if let Some(h) = host.iter().find(|h| h.fs == "alfs" && &h.workload == w) {
            push(
                format!("{} AMF (ALFS) FS", s.row),
                (s.amf_fs, h.fs_waf, Level::Fs),
                "alfs on amf".into(),
                h.consistency.status,
                (why_host(h), &facts_host(h)),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(bytes: u64, pages: u64, programs: u64, migrations: u64) -> DeviceCounters {
        DeviceCounters {
            host_write_bytes: bytes,
            host_read_bytes: 0,
            write_requests: 1,
            read_requests: 0,
            flush_requests: 0,
            trim_requests: 0,
            write_zeroes_requests: 0,
            host_write_pages: pages,
            flash_programs: programs,
            flash_reads: 0,
            flash_erases: 0,
            flash_bytes_programmed: programs * 4224,
            gc_migrations: serde_json::json!(migrations),
            waf: serde_json::json!(programs as f64 / pages as f64),
            die_busy_us: 0.0,
            device_clock_us: 0.0,
            die_utilization: 0.0,
        }
    }

    fn workload(app_bytes: u64) -> WorkloadRun {
        WorkloadRun {
            workload: "randwrite".into(),
            app_bytes,
            workload_info: serde_json::Value::Null,
            free_bytes_before: 0,
        }
    }

    /// Marks of a run in rounds: preconditioning then `n` equal rounds of 16 MiB written by
    /// the application, 20 MiB by the file system (5,120 pages), 7,168 flash programs, 1 s.
    fn marks(n: u32) -> Vec<Snapshot> {
        (0..=n)
            .map(|k| {
                let k64 = u64::from(k);
                Snapshot {
                    round: k,
                    app_bytes: (100 + 16 * k64) << 20,
                    fs_write_bytes: (110 + 20 * k64) << 20,
                    host_write_pages: 28_160 + 5_120 * k64,
                    flash_programs: 28_160 + 7_168 * k64,
                    device_clock_us: 1e6 * f64::from(k),
                }
            })
            .collect()
    }

    /// The baseline (mkfs, mount, unmount) is subtracted from both levels.
    #[test]
    fn a_row_is_the_run_less_its_baseline() {
        let base = counters(10 << 20, 2560, 2560, 0);
        let run = counters(110 << 20, 28160, 38400, 9000);
        let w = workload(80 << 20);
        let r = kernel_row(
            (Fs::Ext4, "page", "postmark-low"),
            (&base, &run),
            1.0,
            (&w, &[]),
            256 << 20,
        )
        .unwrap();
        assert!(r.window.is_none(), "Postmark's low row is a whole run");
        assert_eq!(r.fs_write_bytes, 100 << 20);
        assert!((r.fs_waf - 1.25).abs() < 1e-12);
        assert_eq!((r.host_write_pages, r.flash_programs), (25600, 35840));
        assert!((r.ftl_waf - 1.4).abs() < 1e-12);
        assert_eq!(r.gc_migrations, 9000);
        assert_eq!(r.consistency.status, "ok");
        assert!((r.steady_state.device_writes - 110.0 / 256.0).abs() < 1e-9);
        // A flash that programmed fewer pages than it was sent breaks a bound.
        let bad = DeviceCounters {
            flash_bytes_programmed: 1000,
            ..run.clone()
        };
        let r = kernel_row(
            (Fs::Ext4, "page", "postmark-low"),
            (&base, &bad),
            1.0,
            (&w, &[]),
            256 << 20,
        )
        .unwrap();
        assert_eq!(r.consistency.status, "violated");
    }

    /// A row in rounds takes its figures from its last five rounds, not from the whole run
    /// less its baseline; one that never marked a round is refused.
    #[test]
    fn a_row_in_rounds_is_its_window() {
        let base = counters(10 << 20, 2560, 2560, 0);
        let run = counters(250 << 20, 64_000, 80_000, 9000);
        let w = workload(200 << 20);
        let r = kernel_row(
            (Fs::Ext4, "page", "randwrite"),
            (&base, &run),
            1.0,
            (&w, &marks(7)),
            100 << 20,
        )
        .unwrap();
        let win = r.window.as_ref().unwrap();
        assert_eq!(win.rounds.len(), 7);
        assert_eq!(
            win.figures.app_bytes,
            5 * (16 << 20),
            "the last five rounds"
        );
        assert!((r.fs_waf - 1.25).abs() < 1e-12);
        assert!((r.ftl_waf - 1.4).abs() < 1e-12);
        assert!(r.steady_state.met);
        assert_eq!(r.steady_state.rounds, 7);
        // The window starts after mark 2: 28,160 + 2 x 5,120 pages written by then (the device
        // of 100 MiB written over at mark 0, so every round counts for the steady state).
        let at_start = (28_160 + 2 * 5_120) as f64 * 4096.0 / f64::from(100u32 << 20);
        assert!((r.steady_state.device_writes - at_start).abs() < 1e-9);
        assert!((win.figures.app_mib_per_device_s - 16.0).abs() < 1e-9);
        assert!(kernel_row(
            (Fs::Ext4, "page", "randwrite"),
            (&base, &run),
            1.0,
            (&w, &marks(0)),
            256 << 20,
        )
        .is_err());
    }

    /// A baseline per configuration and device: TPC-C on its larger device has its own.
    #[test]
    fn every_workload_has_the_baseline_of_its_device() {
        let w: Vec<String> = ["randwrite", "tpcc", "kv"].map(String::from).to_vec();
        let jobs = jobs_of(&w);
        assert_eq!(
            jobs.len(),
            KERNEL.len() * 5,
            "two baselines and three workloads each"
        );
        for j in &jobs {
            let b = &jobs[j.baseline];
            assert!(b.workload.is_none());
            assert_eq!((b.fs, b.target, b.large), (j.fs, j.target, j.large));
            if let Some(w) = &j.workload {
                assert_eq!(j.large, w == "tpcc", "{w}");
            }
        }
        let only: Vec<String> = vec!["kv".into()];
        assert_eq!(jobs_of(&only).len(), KERNEL.len() * 2);
    }

    /// Cells: the slides' seven per row, within only with a clean check (invariant 2).
    #[test]
    fn the_table_has_the_slides_cells_of_each_row() {
        let base = counters(10 << 20, 2560, 2560, 0);
        let run = counters(110 << 20, 28160, 38400, 9000);
        let rows: Vec<KernelRow> = KERNEL
            .iter()
            .map(|(fs, t)| {
                kernel_row(
                    (*fs, t, "randwrite"),
                    (&base, &run),
                    1.0,
                    (&workload(80 << 20), &marks(5)),
                    256 << 20,
                )
                .unwrap()
            })
            .collect();
        let cells = table(&["randwrite".to_string()], &rows, &[]);
        assert_eq!(cells.len(), 6, "no ALFS row given: its cell is left out");
        assert_eq!(cells[0].cell, "FIO (RW) EXT4+page FTL");
        assert_eq!(cells[0].paper, 1.41);
        assert!((cells[0].ours - 1.4).abs() < 1e-9);
        assert!(cells[0].within);
        assert_eq!(cells[3].cell, "FIO (RW) F2FS+page FTL");
        assert!(!cells[3].within, "1.40 against 1.82");
        assert!(workloads_of(&Spec {
            only: Some("randwrite,nosuch".into()),
            ..Spec::default()
        })
        .is_err());
    }
}
