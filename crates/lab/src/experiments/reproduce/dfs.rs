//! `noftl reproduce dfs`: DFS's application table (DFS, FAST 2010, Table 3's applications:
//! DFS's speedup over ext3 for Quicksort, N-Gram (Zipf), VM-Update, TPC-H and KNNImpute) with
//! the real kernel ext3 as the baseline: ext4's driver in ext3 mode (`mkfs.ext3`, mounted as
//! ext3 with its ordered journal) in a QEMU guest (`experiments::vm`) on the page FTL exported
//! by `noftl serve`, beside DFS mounted with FUSE on the host (`noftl mount --fs dfs`), on the
//! same emulated device config, with the same application code and parameters (`fs bench`'s
//! applications, `fs_bench::run_app_in`: the guest runs this program's hidden `fs
//! app-workload` verb).
//!
//! What time is compared: the MODELLED DEVICE TIME of the application alone, never a wall
//! clock. Every row is two runs per file system on fresh devices (as `amf`'s kernel rows): a
//! baseline that makes (mkfs), mounts, writes the application's file (fsynced, dropped from the
//! page cache) and unmounts; and the same plus the application. The baseline's counters are
//! subtracted from the run's:
//! - `elapsed_us`: the device's modelled clock (the flash's virtual time at the end: under
//!   `--clock none` each request is submitted when the previous one completed, on both sides);
//! - `die_busy_us`: the dies' busy time, summed over the dies.
//!
//! Ours = ext3's elapsed / DFS's elapsed (a speedup, as the paper's). The paper's speedups are
//! of whole applications on a real host (CPU, page cache and device); ours are the device's
//! share only: an application whose time was CPU-bound in the paper cannot be expected to match,
//! and the `why` of every cell gives the counters that explain ours. Guest wall times under TCG
//! are recorded and never compared.
//!
//! KNNImpute has no analogue among the applications (the paper's program and data are not
//! available): its cell is listed as not run, with the reason, not invented.
//!
//! Invariants:
//! 1. A cell's value comes from device counters less its own baseline run's; nothing is scaled.
//! 2. A row whose counters break a bound (`check_side`, and for ext3 the write path's
//!    `storage::measure::check_writes`) gives a cell that is never within tolerance.
//!
//! Steady state: each side is one run of the application from a fresh device (no rounds), so
//! it says `steady_state.met = false` with how many times the run wrote the device over, as
//! `amf`'s rows do.

use anyhow::bail;
use serde::Serialize;
use serde_json::Value;

use storage::measure::Consistency;

use crate::device::DeviceSpec;
use crate::experiments::fs_bench::{self, AppRun};
use crate::experiments::fs_mount::mount_on;
use crate::experiments::vm::{self, DeviceCounters, Fs};
use crate::steady::SteadyState;

use super::fidelity::{cell, Cell};
use super::guests;
use super::spec::{Progress, Spec};

/// One row of the paper's application table: DFS's speedup over ext3.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct PaperRow {
    pub row: &'static str,
    /// The `fs bench` application that stands for it (None: no analogue here).
    pub app: Option<&'static str>,
    pub speedup: f64,
}

/// DFS (FAST 2010), Table 3's applications: speedup of DFS over ext3 (docs/dfs.md).
pub const PAPER: [PaperRow; 5] = [
    PaperRow {
        row: "Quicksort",
        app: Some("sort"),
        speedup: 1.54,
    },
    PaperRow {
        row: "N-Gram (Zipf)",
        app: Some("zipf"),
        speedup: 2.47,
    },
    PaperRow {
        row: "VM-Update",
        app: Some("vmupdate"),
        speedup: 1.07,
    },
    PaperRow {
        row: "TPC-H",
        app: Some("scan"),
        speedup: 1.22,
    },
    PaperRow {
        row: "KNNImpute",
        app: None,
        speedup: 1.22,
    },
];

/// The 15%, as for AMF's cells.
const TOLERANCE: f64 = 0.15;

/// The store under ext3: the page FTL (the paper's ext3 ran on the ioDrive's own FTL).
const EXT3_TARGET: &str = "page";

/// The set-up every run used.
#[derive(Clone, Debug, Serialize)]
pub struct DfsSetup {
    /// The emulated device (`--preset` and `--set`), the same under both file systems.
    pub device: Vec<String>,
    pub device_bytes: u64,
    pub apps: Vec<String>,
    pub app_mib: u32,
    pub seed: u64,
    pub ext3: &'static str,
    pub dfs: &'static str,
    pub kernel_version: String,
    pub accelerator: String,
    /// What time is compared, and what is not.
    pub time_note: &'static str,
}

/// The device counters of one run that the table uses (either side).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Dev {
    pub flash_programs: u64,
    pub flash_reads: u64,
    pub flash_erases: u64,
    pub flash_bytes_programmed: u64,
    /// The dies' busy time, summed over the dies.
    pub die_busy_us: f64,
    /// The device's modelled clock at the end.
    pub device_clock_us: f64,
}

impl Dev {
    fn of_server(d: &DeviceCounters) -> Dev {
        Dev {
            flash_programs: d.flash_programs,
            flash_reads: d.flash_reads,
            flash_erases: d.flash_erases,
            flash_bytes_programmed: d.flash_bytes_programmed,
            die_busy_us: d.die_busy_us,
            device_clock_us: d.device_clock_us,
        }
    }

    /// From a flash report (`nand`'s StatsReport, as `noftl mount` writes it under "flash").
    fn of_report(r: &Value, dies: u32) -> Dev {
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        let clock_us = n(&r["virtual_ns"]) as f64 / 1e3;
        let util = r["die_utilization"].as_f64().unwrap_or(0.0);
        Dev {
            flash_programs: n(&r["flash"]["programs"]),
            flash_reads: n(&r["flash"]["reads"]),
            flash_erases: n(&r["flash"]["erases"]),
            flash_bytes_programmed: n(&r["bytes_programmed"]),
            die_busy_us: util * f64::from(dies) * clock_us,
            device_clock_us: clock_us,
        }
    }
}

/// One file system's run of an application, less its baseline.
#[derive(Clone, Debug, Serialize)]
pub struct Side {
    /// "kernel ext3 on page" or "dfs".
    pub fs: String,
    pub app: AppRun,
    /// Modelled device time of the application: the run's clock less the baseline's.
    pub elapsed_us: f64,
    pub die_busy_us: f64,
    pub flash_programs: u64,
    pub flash_reads: u64,
    pub flash_erases: u64,
    /// ext3: NBD write and read payload of the run less the baseline's (None for DFS).
    pub host_write_bytes: Option<u64>,
    pub host_read_bytes: Option<u64>,
    pub baseline: Dev,
    pub run: Dev,
    pub consistency: Consistency,
    /// Not met: one run from a fresh device, no rounds (`device_writes`: the run's flash
    /// programs over the device's capacity).
    pub steady_state: SteadyState,
    /// ext3: the guest's seconds around the command (TCG's, not a result).
    pub guest_command_s: Option<f64>,
}

/// One application: ext3 and DFS, and the speedups.
#[derive(Clone, Debug, Serialize)]
pub struct AppRow {
    pub row: &'static str,
    pub app: String,
    pub ext3: Side,
    pub dfs: Side,
    /// ext3's modelled elapsed device time / DFS's: the cell's value.
    pub speedup_elapsed: f64,
    /// ext3's die busy time / DFS's (the same on a device the application keeps busy).
    pub speedup_die_busy: f64,
}

/// A row that did not run to the end, or has no analogue: its cell is missing.
#[derive(Debug, Serialize)]
pub struct MissingRow {
    pub row: String,
    pub app: Option<String>,
    pub reason: String,
}

#[derive(Debug, Serialize)]
pub struct DfsResult {
    pub paper: String,
    pub quick: bool,
    pub setup: DfsSetup,
    pub cells: Vec<Cell>,
    pub held_out_within: usize,
    pub held_out_judged: usize,
    pub rows: Vec<AppRow>,
    pub missing: Vec<MissingRow>,
}

/// The device and application scale of a run.
struct Scale {
    device: DeviceSpec,
    app_mib: u32,
    timeout_s: u64,
}

fn scale(quick: bool) -> Scale {
    // `fs bench`'s device for these applications (docs/PERFORMANCE.md section 9): the tiny
    // preset grown to 256 blocks per plane, 32 MiB files; --quick: 64 blocks per plane, 4 MiB.
    let blocks = if quick { 64 } else { 256 };
    Scale {
        device: DeviceSpec {
            set: vec![format!("geometry.blocks_per_plane={blocks}")],
            ..DeviceSpec::preset("tiny")
        },
        app_mib: if quick { 4 } else { 32 },
        timeout_s: if quick { 600 } else { 3600 },
    }
}

/// The applications `spec.only` names (comma-separated), else every one with an analogue;
/// checked.
pub fn apps_of(spec: &Spec) -> anyhow::Result<Vec<String>> {
    let known: Vec<&str> = PAPER.iter().filter_map(|r| r.app).collect();
    let names: Vec<String> = match spec.only.as_deref() {
        Some(o) => o.split(',').map(|s| s.trim().to_string()).collect(),
        None if spec.quick => vec!["vmupdate".into()],
        None => known.iter().map(|s| s.to_string()).collect(),
    };
    for n in &names {
        if !known.contains(&n.as_str()) {
            bail!(
                "reproduce dfs: --only takes the applications of the paper's rows ({}), not '{n}'",
                known.join(", ")
            );
        }
    }
    Ok(names)
}

/// The guest's command: this program's `fs app-workload` in the mounted ext3.
fn guest_command(spec: &Spec, sc: &Scale, app: &str, setup_only: bool) -> Vec<String> {
    let mut c: Vec<String> = vec![
        spec.noftl.display().to_string(),
        "fs".into(),
        "app-workload".into(),
        "--dir".into(),
        ".".into(),
        "--app".into(),
        app.into(),
        "--app-mib".into(),
        sc.app_mib.to_string(),
        "--seed".into(),
        SEED.to_string(),
    ];
    if setup_only {
        c.push("--setup-only".into());
    }
    c
}

/// `fs bench`'s default seed.
const SEED: u64 = 1;

/// Bounds every side's counters must keep (invariant 2): the dies were never busier than the
/// device's clock allows, an application that made its writes durable had them programmed, and
/// the scan (which reads its file after dropping it from the page cache) read every page from
/// flash.
fn check_side(app: &AppRun, (b, r): (&Dev, &Dev), dies: u32) -> Vec<String> {
    let mut v = Vec::new();
    for (what, d) in [("baseline", b), ("run", r)] {
        let cap = f64::from(dies) * d.device_clock_us;
        if d.die_busy_us > cap * (1.0 + 1e-6) + 1e-3 {
            v.push(format!(
                "the {what}'s dies were busy {:.0} us, more than {dies} dies x the clock's {:.0} us",
                d.die_busy_us, d.device_clock_us
            ));
        }
    }
    let programmed = r
        .flash_bytes_programmed
        .saturating_sub(b.flash_bytes_programmed);
    if programmed < app.app_bytes {
        v.push(format!(
            "the flash programmed {programmed} bytes in the run beyond the baseline, fewer than the {} the application made durable",
            app.app_bytes
        ));
    }
    let pages = app.file_bytes / 4096;
    let reads = r.flash_reads.saturating_sub(b.flash_reads);
    if app.app == "scan" && !app.setup_only && reads < pages {
        v.push(format!(
            "the scan read its {pages}-page file after dropping it from the page cache, yet the flash read only {reads} pages"
        ));
    }
    v
}

/// A side from its baseline and run counters, on a device of `device_bytes`.
fn side(
    fs: String,
    app: AppRun,
    (b, r): (Dev, Dev),
    violations: Vec<String>,
    device_bytes: u64,
) -> Side {
    let device_writes = r.flash_bytes_programmed as f64 / device_bytes.max(1) as f64;
    Side {
        fs,
        app,
        elapsed_us: r.device_clock_us - b.device_clock_us,
        die_busy_us: r.die_busy_us - b.die_busy_us,
        flash_programs: r.flash_programs.saturating_sub(b.flash_programs),
        flash_reads: r.flash_reads.saturating_sub(b.flash_reads),
        flash_erases: r.flash_erases.saturating_sub(b.flash_erases),
        host_write_bytes: None,
        host_read_bytes: None,
        baseline: b,
        run: r,
        consistency: Consistency::of_violations(violations),
        steady_state: SteadyState::skipped(device_writes),
        guest_command_s: None,
    }
}

/// The ext3 side: the two guest runs' server counters and the run's report.
fn ext3_side(
    (base, run): (&vm::VmResult, &vm::VmResult),
    app: AppRun,
    (dies, device_bytes): (u32, u64),
) -> Side {
    let (b, r) = (&base.device, &run.device);
    let (bd, rd) = (Dev::of_server(b), Dev::of_server(r));
    let mut violations = check_side(&app, (&bd, &rd), dies);
    let fs_bytes = r.host_write_bytes.saturating_sub(b.host_write_bytes);
    // The write path's bounds, as `amf`'s kernel rows check them.
    let w = guests::check_server_writes(app.app_bytes, app.app_bytes > 0, fs_bytes, r);
    violations.extend(w.violations);
    let mut s = side(
        format!("kernel ext3 on {EXT3_TARGET}"),
        app,
        (bd, rd),
        violations,
        device_bytes,
    );
    s.host_write_bytes = Some(fs_bytes);
    s.host_read_bytes = Some(r.host_read_bytes.saturating_sub(b.host_read_bytes));
    s.guest_command_s = Some(run.guest_timing.command_s);
    s
}

/// The application's report from a guest's standard output.
fn app_report(r: &vm::VmResult) -> anyhow::Result<AppRun> {
    serde_json::from_str::<AppRun>(r.guest_stdout.trim())
        .map_err(|e| anyhow::anyhow!("the guest's application report: {e}"))
}

/// The DFS side: two FUSE mounts on the host (clock none), the file only and the file with the
/// application.
fn dfs_side(
    spec: &Spec,
    sc: &Scale,
    app: &str,
    (dies, device_bytes): (u32, u64),
) -> anyhow::Result<Side> {
    let one = |setup_only: bool| -> anyhow::Result<(AppRun, Dev)> {
        let m = mount_on(&spec.noftl, "dfs", "", &sc.device, "none")?;
        let r = fs_bench::run_app_in(&m.root, app, sc.app_mib, SEED, setup_only);
        let stats = m.finish()?;
        Ok((r?, Dev::of_report(&stats["flash"], dies)))
    };
    let (_, b) = one(true)?;
    let (run, r) = one(false)?;
    let violations = check_side(&run, (&b, &r), dies);
    Ok(side("dfs".into(), run, (b, r), violations, device_bytes))
}

fn ratio(ext3: f64, dfs: f64) -> f64 {
    if dfs > 0.0 {
        ext3 / dfs
    } else {
        f64::NAN
    }
}

/// Runs the ext3 guests, the DFS mounts and the table.
pub fn run(spec: &Spec, progress: &mut Progress<'_>) -> anyhow::Result<DfsResult> {
    let apps = apps_of(spec)?;
    let sc = scale(spec.quick);
    let cfg = sc.device.load()?;
    let (device_bytes, dies) = (cfg.geometry.capacity_bytes(), cfg.geometry.dies());
    // Refused before any run: the program, QEMU and the kernel.
    let guests = guests::prepare("dfs", spec)?;
    let mut specs = Vec::new();
    for app in &apps {
        for setup_only in [true, false] {
            let what = format!("ext3 {app} {}", if setup_only { "baseline" } else { "run" });
            let command = guest_command(spec, &sc, app, setup_only);
            let vm = guests::vm_spec(
                spec,
                (&sc.device, sc.timeout_s),
                guests.accel,
                (Fs::Ext3, EXT3_TARGET),
                command,
            );
            specs.push((what, vm));
        }
    }
    progress(&format!(
        "{} guest runs (kernel {}, {} at once), then DFS's runs through FUSE",
        specs.len(),
        guests.kernel.version,
        spec.jobs
    ));
    let results = guests::run_all("dfs", spec.jobs, &specs);
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for (k, app) in apps.iter().enumerate() {
        let paper = PAPER
            .iter()
            .find(|p| p.app == Some(app.as_str()))
            .map_or("?", |p| p.row);
        let row = match (&results[2 * k], &results[2 * k + 1]) {
            (Ok(b), Ok(r)) => app_report(r).map(|a| ext3_side((b, r), a, (dies, device_bytes))),
            (Err(e), _) => Err(anyhow::anyhow!("ext3's baseline: {e:#}")),
            (_, Err(e)) => Err(anyhow::anyhow!("{e:#}")),
        }
        .and_then(|ext3| {
            progress(&format!("dfs {app}: two FUSE mounts on the host"));
            Ok((ext3, dfs_side(spec, &sc, app, (dies, device_bytes))?))
        });
        match row {
            Ok((ext3, dfs)) => rows.push(AppRow {
                row: paper,
                app: app.clone(),
                speedup_elapsed: ratio(ext3.elapsed_us, dfs.elapsed_us),
                speedup_die_busy: ratio(ext3.die_busy_us, dfs.die_busy_us),
                ext3,
                dfs,
            }),
            Err(e) => missing.push(MissingRow {
                row: paper.into(),
                app: Some(app.clone()),
                reason: format!("{e:#}"),
            }),
        }
    }
    if !spec.quick && spec.only.is_none() {
        for p in PAPER.iter().filter(|p| p.app.is_none()) {
            missing.push(MissingRow {
                row: p.row.into(),
                app: None,
                reason: "no analogue among the applications: the paper's KNNImpute program and its data are not available, and none is invented".into(),
            });
        }
    }
    let cells = table(&rows);
    Ok(DfsResult {
        paper: "dfs".into(),
        quick: spec.quick,
        setup: DfsSetup {
            device: sc.device.cli_args(),
            device_bytes,
            apps,
            app_mib: sc.app_mib,
            seed: SEED,
            ext3: "kernel ext3 (mkfs.ext3 -b 4096 -E nodiscard; ext4's driver mounting it as ext3, data=ordered) in a QEMU guest on the page FTL exported by noftl serve --clock none",
            dfs: "noftl mount --fs dfs --clock none on the host (FUSE), the same device config",
            kernel_version: guests.kernel.version.clone(),
            accelerator: guests.accelerator.clone(),
            time_note: "compared: the modelled device time of the application alone (the flash's virtual clock of the run less its baseline's: mkfs, mount, the application's file, unmount), requests one at a time on both sides; the paper's speedups are of whole runs on a real host (CPU and page cache included), ours are device time only; guest wall times (TCG) are not results",
        },
        held_out_within: cells.iter().filter(|c| c.within).count(),
        held_out_judged: cells.len(),
        cells,
        rows,
        missing,
    })
}

fn why(r: &AppRow) -> String {
    let s = |x: &Side| {
        format!(
            "{}: device {:.1} ms elapsed, dies busy {:.1} ms, {} programs, {} reads, {} erases{}",
            x.fs,
            x.elapsed_us / 1e3,
            x.die_busy_us / 1e3,
            x.flash_programs,
            x.flash_reads,
            x.flash_erases,
            match (x.host_write_bytes, x.host_read_bytes) {
                (Some(w), Some(rd)) => format!(
                    ", NBD {:.1} MiB written, {:.1} MiB read",
                    w as f64 / 1_048_576.0,
                    rd as f64 / 1_048_576.0
                ),
                _ => String::new(),
            }
        )
    };
    format!(
        "{} of a {} MiB file; {}; {}; die-busy ratio {:.2}",
        r.app,
        r.ext3.app.file_bytes >> 20,
        s(&r.ext3),
        s(&r.dfs),
        r.speedup_die_busy
    )
}

/// The fidelity table: per row run, the paper's speedup beside ours.
fn table(rows: &[AppRow]) -> Vec<Cell> {
    rows.iter()
        .filter_map(|r| {
            let p = PAPER.iter().find(|p| p.app == Some(r.app.as_str()))?;
            let status = if r.ext3.consistency.is_ok() && r.dfs.consistency.is_ok() {
                "ok"
            } else {
                "violated"
            };
            Some(cell(
                format!("{} (ours: {})", p.row, r.app),
                "speedup",
                p.speedup,
                r.speedup_elapsed,
                TOLERANCE,
                "dfs over kernel ext3 on page",
                status,
                "none (device time only)",
                why(r),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(programs: u64, reads: u64, clock_us: f64, busy_us: f64) -> Dev {
        Dev {
            flash_programs: programs,
            flash_reads: reads,
            flash_erases: 0,
            flash_bytes_programmed: programs * 4224,
            die_busy_us: busy_us,
            device_clock_us: clock_us,
        }
    }

    fn app(name: &str, app_bytes: u64) -> AppRun {
        AppRun {
            app: name.into(),
            file_bytes: 4 << 20,
            app_bytes,
            ops: 1024,
            setup_only: false,
            seconds: 0.1,
        }
    }

    /// A side is its run less its baseline; the speedup is ext3's device time over DFS's.
    #[test]
    fn a_row_is_the_run_less_its_baseline() {
        let e = side(
            "ext3".into(),
            app("vmupdate", 4 << 20),
            (
                dev(1000, 10, 300_000.0, 900_000.0),
                dev(3200, 40, 800_000.0, 2_000_000.0),
            ),
            vec![],
            64 << 20,
        );
        assert_eq!((e.flash_programs, e.flash_reads), (2200, 30));
        // One run from a fresh device: not steady, with how often it wrote the device over.
        assert!(!e.steady_state.met);
        let written = (3200 * 4224) as f64 / (64 << 20) as f64;
        assert!((e.steady_state.device_writes - written).abs() < 1e-12);
        assert!((e.elapsed_us - 500_000.0).abs() < 1e-9);
        assert!((ratio(e.elapsed_us, 250_000.0) - 2.0).abs() < 1e-12);
        assert!(ratio(1.0, 0.0).is_nan());
    }

    /// The bounds: busy dies beyond the clock, durable bytes not programmed, a scan that did
    /// not read its file from flash.
    #[test]
    fn the_checks_catch_counters_that_break_a_bound() {
        let b = dev(100, 0, 1000.0, 100.0);
        let ok = dev(1200, 0, 5000.0, 4000.0);
        assert!(check_side(&app("vmupdate", 4 << 20), (&b, &ok), 4).is_empty());
        let few = dev(500, 0, 5000.0, 4000.0);
        assert_eq!(
            check_side(&app("vmupdate", 4 << 20), (&b, &few), 4).len(),
            1
        );
        let busy = dev(1200, 0, 5000.0, 30_000.0);
        assert_eq!(
            check_side(&app("vmupdate", 4 << 20), (&b, &busy), 4).len(),
            1
        );
        let cached = dev(100, 10, 5000.0, 400.0);
        assert_eq!(check_side(&app("scan", 0), (&b, &cached), 4).len(), 1);
        let read = dev(100, 1024, 5000.0, 400.0);
        assert!(check_side(&app("scan", 0), (&b, &read), 4).is_empty());
        assert!(apps_of(&Spec {
            paper: "dfs".into(),
            only: Some("sort,knn".into()),
            ..Spec::default()
        })
        .is_err());
    }
}
