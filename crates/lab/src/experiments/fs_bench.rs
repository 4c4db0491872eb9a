//! `noftl fs bench`: one driver for every file system on the emulated device, running real
//! programs in the mount (DFS in the spirit of its paper's measurements, "DFS Table 3" and the
//! IOPS-vs-threads figures).
//!
//! Each measurement point gets a fresh mount on a fresh device, so that the device statistics
//! it reports are its own (setup included: mkfs for ext4, fio's layout of its files):
//! - `dfs`: `noftl mount --fs dfs` (FUSE);
//! - `ext4`: the page FTL (or `--ext4-target`) exported by `noftl serve`, shown as a file by `nbdfuse`, formatted by
//!   `mkfs.ext4` and mounted by `fuse2fs` (as the NBD tests do): the same device, the same
//!   timing, a conventional file system over a block FTL.
//!
//! Workloads: fio (`psync`, O_DIRECT) random 4 KiB reads and writes at 1..32 threads; and four
//! applications run by this driver on files in the mount: `sort` (quicksort of 64-bit keys in a
//! memory-mapped file, then msync), `zipf` (a hash index probed with Zipf-distributed 4 KiB
//! reads), `vmupdate` (sequential rewrite of a large image file, then fsync) and `scan`
//! (sequential read of a large file after dropping it from the page cache).
//! CPU per I/O is the CPU time of the whole stack (fio's, and the file-system, FTL and FUSE
//! processes') over the I/Os done.

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context};
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::{json, Value};

use crate::device::DeviceSpec;
use crate::experiments::fs_mount::{fadvise_dontneed, make_file, mount_on, Mounted};
use crate::results::Plan;

/// What `noftl fs bench` runs: per file system, every fio workload at every thread count, then
/// every application, each on a fresh mount of a fresh device.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The noftl program whose `serve` and `mount` verbs serve the device (the CLI passes
    /// itself).
    pub noftl: PathBuf,
    /// File systems, in order: dfs, ext4, f2fs (on `ext4_target`'s FTL), alfs (on amf).
    pub fs: Vec<String>,
    /// The emulated device under every mount.
    pub device: DeviceSpec,
    /// fio thread counts (jobs), each in 1..=64.
    pub threads: Vec<u32>,
    /// fio workloads: randread, randwrite.
    pub rw: Vec<String>,
    /// Seconds per fio point, in 1..=3600.
    pub runtime_s: u32,
    /// MiB of fio files in all (split over the threads), in 1..=4096.
    pub fio_mib: u32,
    /// Applications: sort, zipf, vmupdate, scan (empty names are skipped).
    pub apps: Vec<String>,
    /// MiB of each application's file, in 1..=4096.
    pub app_mib: u32,
    /// Device timing: on the wall clock (real) or as fast as possible (none).
    pub clock: String,
    /// The store under ext4 and f2fs: a block FTL (any `noftl serve --store`: page, dftl, ...).
    pub ext4_target: String,
    /// Seed of the applications' data and access pattern (and fio's).
    pub seed: u64,
    /// fio points: rounds of fio (each `runtime_s`, on the same mount) before the measured run,
    /// until the steady-state rule holds on their IOPS (`crate::steady`; the mount's flash
    /// counters are read only when it ends, so WAF is not tracked), at most this many (0: none,
    /// and the row says it was not checked).
    pub max_rounds: u32,
    /// A result directory to write (summary.json, params.json, config.xml and fio's JSON of
    /// every fio point).
    pub results: Option<Plan>,
}

/// One measurement point: a fio point (`iops`, `ios`, `fs_cpu_s`) or an application
/// (`seconds`).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub fs: String,
    /// `fio-RW-4k` or the application's name.
    pub workload: String,
    /// fio jobs (1 for an application).
    pub threads: u32,
    /// fio: I/Os per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iops: Option<f64>,
    /// fio: I/Os done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ios: Option<u64>,
    /// CPU microseconds of the whole stack per I/O.
    pub cpu_us_per_io: f64,
    /// fio: CPU seconds of the serving processes at the end of the point.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs_cpu_s: Option<f64>,
    /// An application: its wall-clock seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// The device's flash counters over the whole mount (setup included): programs, reads,
    /// erases, bytes_programmed, die_utilization, as the stats file has them.
    pub flash: Value,
    /// Whether the point was measured in steady state (`crate::steady`); an application runs
    /// once on a fresh mount, without rounds.
    pub steady_state: crate::steady::SteadyState,
}

/// DFS against ext4 at one workload and thread count.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub workload: String,
    pub threads: u32,
    /// IOPS ratio DFS / ext4, or for an application the time ratio ext4 / DFS (a speedup);
    /// NaN (null in JSON) where a figure is missing.
    pub dfs_over_ext4: f64,
}

/// The points, and DFS over ext4 where both ran.
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    pub results: Vec<Row>,
    pub ratios: Vec<Ratio>,
}

impl Spec {
    /// Refuses sizes, durations and thread counts out of range before any mount.
    pub fn check(&self) -> anyhow::Result<()> {
        for t in &self.threads {
            crate::limits::in_range("--threads", u64::from(*t), 1, 64, "fio jobs")?;
        }
        crate::limits::in_range("--runtime-s", u64::from(self.runtime_s), 1, 3600, "seconds")?;
        crate::limits::in_range("--app-mib", u64::from(self.app_mib), 1, 4096, "MiB")?;
        crate::limits::in_range("--fio-mib", u64::from(self.fio_mib), 1, 4096, "MiB")?;
        Ok(())
    }
}

fn mount(fs: &str, a: &Spec) -> anyhow::Result<Mounted> {
    let target = if fs == "alfs" { "amf" } else { &a.ext4_target };
    mount_on(&a.noftl, fs, target, &a.device, &a.clock)
}

/// The flash counters of a stats file (`mount`'s "flash" or `serve`'s "nand").
fn flash_of(stats: &Value) -> Value {
    let r = if stats.get("flash").is_some() {
        &stats["flash"]
    } else {
        &stats["nand"]
    };
    json!({
        "programs": r["flash"]["programs"],
        "reads": r["flash"]["reads"],
        "erases": r["flash"]["erases"],
        "bytes_programmed": r["bytes_programmed"],
        "die_utilization": r["die_utilization"],
    })
}

/// One fio point: IOPS, CPU microseconds per I/O, I/Os, and fio's JSON document.
fn fio(m: &Mounted, a: &Spec, rw: &str, threads: u32) -> anyhow::Result<(f64, f64, u64, Value)> {
    let size_mib = (a.fio_mib / threads).max(1);
    let cpu0 = m.cpu_s();
    let out = Command::new("fio")
        .args([
            "--name=job",
            "--ioengine=psync",
            "--direct=1",
            "--bs=4k",
            "--group_reporting",
            "--time_based",
            "--output-format=json",
            // BenchBase's latency percentiles (result directories), besides fio's defaults'
            // median, 90th, 95th and 99th.
            "--percentile_list=25:50:75:90:95:99",
        ])
        .arg(format!("--directory={}", m.root.display()))
        .arg(format!("--rw={rw}"))
        .arg(format!("--numjobs={threads}"))
        .arg(format!("--size={size_mib}M"))
        .arg(format!("--runtime={}", a.runtime_s))
        .arg(format!("--randseed={}", a.seed))
        // fio ignores --randseed for the offsets while randrepeat is on (its default; see
        // fs_waf's fio_randwrite): off, `--seed` decides them, as the flag says.
        .arg("--randrepeat=0")
        .output()
        .context("fio")?;
    let cpu1 = m.cpu_s();
    if !out.status.success() {
        bail!(
            "fio {rw} x{threads}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text.find('{').unwrap_or(0);
    let v: Value = serde_json::from_str(&text[start..]).context("fio's JSON")?;
    let job = &v["jobs"][0];
    let side = if rw.contains("read") { "read" } else { "write" };
    let iops = job[side]["iops"].as_f64().unwrap_or(0.0);
    let ios = job[side]["total_ios"].as_u64().unwrap_or(0);
    let runtime_s = job[side]["runtime"].as_f64().unwrap_or(0.0) / 1e3;
    let fio_cpu = (job["usr_cpu"].as_f64().unwrap_or(0.0) + job["sys_cpu"].as_f64().unwrap_or(0.0))
        / 100.0
        * runtime_s
        * f64::from(threads);
    // fio's layout of its files ran before the timed phase: its CPU is in the fs processes'
    // delta too. Counted: all of it (an upper bound for the timed phase).
    let cpu_us = if ios > 0 {
        (cpu1 - cpu0 + fio_cpu) * 1e6 / ios as f64
    } else {
        0.0
    };
    Ok((iops, cpu_us, ios, v))
}

/// The applications `fs bench` runs (and `reproduce dfs` in a guest's kernel file system).
pub const APPS: [&str; 4] = ["sort", "zipf", "vmupdate", "scan"];

/// One application run in a directory by `run_app_in`: what `noftl fs app-workload` prints (the
/// guest side of `noftl reproduce dfs`, where the directory is a kernel file system).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct AppRun {
    pub app: String,
    /// The application's file (seeded random data, written, fsynced and dropped from the page
    /// cache before the application starts).
    pub file_bytes: u64,
    /// Bytes the application wrote to its file and made durable (msync, fsync): the file for
    /// sort and vmupdate, 0 for the readers zipf and scan. 0 with `setup_only`.
    pub app_bytes: u64,
    /// Its I/O-ish operations (4 KiB pages sorted, probes, pages rewritten or read).
    pub ops: u64,
    /// Only the file was made (a baseline: `reproduce dfs` subtracts it).
    pub setup_only: bool,
    /// Wall-clock seconds of the application alone (not the file's making).
    pub seconds: f64,
}

/// Makes application `app`'s file of `app_mib` MiB in `dir` and, unless `setup_only`, runs the
/// application on it.
pub fn run_app_in(
    dir: &Path,
    app: &str,
    app_mib: u32,
    seed: u64,
    setup_only: bool,
) -> anyhow::Result<AppRun> {
    if !APPS.contains(&app) {
        bail!("unknown application '{app}' ({})", APPS.join(", "));
    }
    crate::limits::in_range("--app-mib", u64::from(app_mib), 1, 4096, "MiB")?;
    let path = dir.join(format!("{app}.dat"));
    make_file(&path, app_mib, seed)?;
    let bytes = u64::from(app_mib) << 20;
    let t0 = Instant::now();
    let ops = if setup_only {
        0
    } else {
        app_on(&path, app, app_mib, seed)?
    };
    Ok(AppRun {
        app: app.to_string(),
        file_bytes: bytes,
        app_bytes: if !setup_only && matches!(app, "sort" | "vmupdate") {
            bytes
        } else {
            0
        },
        ops,
        setup_only,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Runs application `app` in the mount; returns (seconds, I/O-ish operations).
fn app(m: &Mounted, a: &Spec, app: &str) -> anyhow::Result<(f64, u64)> {
    let r = run_app_in(&m.root, app, a.app_mib, a.seed, false)?;
    Ok((r.seconds, r.ops))
}

/// Application `app` on its file `path` of `app_mib` MiB; returns its I/O-ish operations.
fn app_on(path: &Path, app: &str, app_mib: u32, seed: u64) -> anyhow::Result<u64> {
    let bytes = u64::from(app_mib) << 20;
    let ops = match app {
        "sort" => {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)?;
            // SAFETY: the file is ours alone for the run; nothing truncates it while mapped.
            let mut map = unsafe { memmap2::MmapMut::map_mut(&f)? };
            let (_, keys, _) = unsafe { map.align_to_mut::<u64>() };
            keys.sort_unstable();
            map.flush()?;
            bytes / 4096
        }
        "zipf" => {
            let f = std::fs::File::open(path)?;
            let n = (bytes / 4096) as usize;
            // Zipf (theta 0.99) over the records, by inverse CDF.
            let mut cdf = Vec::with_capacity(n);
            let mut s = 0.0;
            for i in 1..=n {
                s += 1.0 / (i as f64).powf(0.99);
                cdf.push(s);
            }
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x21BF);
            let mut buf = vec![0u8; 4096];
            let lookups = 4 * n as u64;
            for _ in 0..lookups {
                let u: f64 = rng.random::<f64>() * s;
                let k = cdf.partition_point(|&c| c < u).min(n - 1);
                // A hash index: record k lives in bucket hash(k).
                let bucket = (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) % n as u64;
                f.read_exact_at(&mut buf, bucket * 4096)?;
            }
            lookups
        }
        "vmupdate" => {
            let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x77);
            let mut buf = vec![0u8; 1 << 20];
            f.seek(SeekFrom::Start(0))?;
            for _ in 0..app_mib {
                rng.fill(&mut buf[..]);
                f.write_all(&buf)?;
            }
            f.sync_all()?;
            bytes / 4096
        }
        "scan" => {
            let mut f = std::fs::File::open(path)?;
            fadvise_dontneed(&f);
            let mut buf = vec![0u8; 1 << 20];
            let mut sum = 0u64;
            loop {
                let k = f.read(&mut buf)?;
                if k == 0 {
                    break;
                }
                sum = sum.wrapping_add(buf[..k].iter().map(|&b| u64::from(b)).sum::<u64>());
            }
            std::hint::black_box(sum);
            bytes / 4096
        }
        other => bail!("unknown application '{other}' ({})", APPS.join(", ")),
    };
    Ok(ops)
}

/// The fio points of file system `fs`: each workload at each thread count. With a result
/// directory, each point's index in `rows` and fio's JSON go to `fio_docs`.
fn fio_points(
    a: &Spec,
    fs: &str,
    rows: &mut Vec<Row>,
    fio_docs: &mut Vec<(usize, Value)>,
) -> anyhow::Result<()> {
    for rw in &a.rw {
        if rw != "randread" && rw != "randwrite" {
            bail!("--rw {rw}: randread or randwrite");
        }
        for &t in &a.threads {
            let m = mount(fs, a)?;
            let steady = fio_rounds(&m, a, rw, t);
            let r = steady.and_then(|s| Ok((s, fio(&m, a, rw, t)?)));
            let cpu = m.cpu_s();
            let stats = m.finish()?;
            let (steady_state, (iops, cpu_us, ios, doc)) = r?;
            eprintln!("{fs} {rw} x{t}: {iops:.0} IOPS, {cpu_us:.1} us CPU per I/O");
            if a.results.is_some() {
                fio_docs.push((rows.len(), doc));
            }
            rows.push(Row {
                fs: fs.to_string(),
                workload: format!("fio-{rw}-4k"),
                threads: t,
                iops: Some(iops),
                ios: Some(ios),
                cpu_us_per_io: cpu_us,
                fs_cpu_s: Some(cpu),
                seconds: None,
                flash: flash_of(&stats),
                steady_state,
            });
        }
    }
    Ok(())
}

/// fio rounds on the mount until their IOPS are steady or `a.max_rounds` (`crate::steady`).
fn fio_rounds(
    m: &Mounted,
    a: &Spec,
    rw: &str,
    threads: u32,
) -> anyhow::Result<crate::steady::SteadyState> {
    use crate::steady::{until_steady, Round, SteadyState};
    if a.max_rounds == 0 {
        return Ok(SteadyState::skipped(0.0));
    }
    let rounds = until_steady(a.max_rounds, |_| {
        let (iops, ..) = fio(m, a, rw, threads)?;
        Ok(Round {
            throughput: iops,
            waf: None,
        })
    })?;
    // The device's writes are in the mount's stats only when it ends: not known here.
    Ok(SteadyState::of(&rounds, f64::NAN))
}

/// The application rows of file system `fs`.
fn app_points(a: &Spec, fs: &str, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    for ap in a.apps.iter().filter(|s| !s.is_empty()) {
        let m = mount(fs, a)?;
        let cpu0 = m.cpu_s();
        let r = app(&m, a, ap);
        let cpu = m.cpu_s() - cpu0;
        let stats = m.finish()?;
        let (secs, ops) = r?;
        eprintln!("{fs} {ap}: {secs:.2} s");
        rows.push(Row {
            fs: fs.to_string(),
            workload: ap.to_string(),
            threads: 1,
            iops: None,
            ios: None,
            cpu_us_per_io: cpu * 1e6 / ops.max(1) as f64,
            fs_cpu_s: None,
            seconds: Some(secs),
            flash: flash_of(&stats),
            steady_state: crate::steady::SteadyState::skipped(f64::NAN),
        });
    }
    Ok(())
}

/// Runs every point of `spec` (progress on stderr, a line per point) and writes its result
/// directory, if any.
pub fn run(spec: &Spec) -> anyhow::Result<BenchResult> {
    spec.check()?;
    // The points run on the wall clock: the directory's timestamps are real, from the start.
    let plan = spec.results.clone().map(Plan::on_wall_clock);
    let mut rows = Vec::new();
    // With a result directory: per fio point, its row's index and fio's JSON.
    let mut fio_docs: Vec<(usize, Value)> = Vec::new();
    for fs in &spec.fs {
        fio_points(spec, fs, &mut rows, &mut fio_docs)?;
        app_points(spec, fs, &mut rows)?;
    }
    let ratios = ratios(&rows);
    let res = BenchResult {
        results: rows,
        ratios,
    };
    if let Some(p) = &plan {
        write_results(p, &serde_json::to_value(&res)?, &fio_docs)?;
    }
    Ok(res)
}

/// The result directory of `fs bench` (docs/results.md): `<base>.fio-FS-RW-4k-THREADS.json`
/// (fio's output of each fio point, as fio wrote it), params.json and summary.json: the JSON
/// result, its `results` array as `rows` (in every summary.json `results` describes the
/// directory), each fio point's row with BenchBase's names (from fio's figures), `terminals`
/// (its threads) and `fio_json` (its file). At the top, BenchBase's figures over the fio points
/// one after another; fio's percentiles of different points cannot be pooled, so the top
/// `Latency Distribution` is BenchBase's empty one (-1).
fn write_results(plan: &Plan, doc: &Value, fio_docs: &[(usize, Value)]) -> anyhow::Result<()> {
    use crate::results as r;
    let mut doc = doc.clone();
    if let Some(obj) = doc.as_object_mut() {
        let rows = obj.remove("results").unwrap_or_default();
        obj.insert("rows".into(), rows);
    }
    let mut files = Vec::new();
    let (mut ios, mut elapsed_ns) = (0u64, 0u64);
    for (i, fio) in fio_docs {
        let row = &mut doc["rows"][*i];
        let (fs, workload) = (
            row["fs"].as_str().unwrap_or("?").to_string(),
            row["workload"].as_str().unwrap_or("?").to_string(),
        );
        let side = if workload.contains("read") {
            "read"
        } else {
            "write"
        };
        let kind = format!(
            "fio-{fs}-{}-{}.json",
            workload.trim_start_matches("fio-"),
            row["threads"]
        );
        if let Some(obj) = row.as_object_mut() {
            if let Some(bb) = r::benchbase_of_fio(&fio["jobs"][0][side]) {
                ios += bb["Measured Requests"].as_u64().unwrap_or(0);
                elapsed_ns += bb["Elapsed Time (nanoseconds)"].as_u64().unwrap_or(0);
                obj.extend(bb);
            }
            obj.insert("terminals".into(), obj["threads"].clone());
            obj.insert(
                "fio_json".into(),
                json!(format!("{}.{kind}", plan.base("fs"))),
            );
        }
        files.push((kind, format!("{}\n", serde_json::to_string_pretty(fio)?)));
    }
    let mut top = r::benchbase(&[], elapsed_ns);
    let rate = if elapsed_ns > 0 {
        (ios as f64 * 1e12 / elapsed_ns as f64).round() / 1e3
    } else {
        0.0
    };
    top.insert("Measured Requests".into(), json!(ios));
    top.insert("Throughput (requests/second)".into(), json!(rate));
    top.insert("Goodput (requests/second)".into(), json!(rate));
    let c = r::Contents {
        bench: "fs",
        scalefactor: None,
        terminals: None,
        isolation: None,
        traces: &[],
        label_cols: &[],
        types: &[],
        unit: r::Unit::Io {
            bytes_per_request: 4096,
        },
        device: None,
    };
    let extra: Vec<(&str, String)> = files.iter().map(|(k, t)| (k.as_str(), t.clone())).collect();
    r::write_dir(plan, &doc, &c, Some(top), &extra)
}

/// DFS / ext4 per workload and thread count: IOPS ratio, or time ratio ext4 / DFS (speedup).
fn ratios(rows: &[Row]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for d in rows.iter().filter(|r| r.fs == "dfs") {
        if let Some(e) = rows
            .iter()
            .find(|r| r.fs == "ext4" && r.workload == d.workload && r.threads == d.threads)
        {
            let ratio = match (d.iops, e.iops) {
                (Some(x), Some(y)) if y > 0.0 => x / y,
                _ => match (d.seconds, e.seconds) {
                    (Some(x), Some(y)) if x > 0.0 => y / x,
                    _ => f64::NAN,
                },
            };
            out.push(Ratio {
                workload: d.workload.clone(),
                threads: d.threads,
                dfs_over_ext4: ratio,
            });
        }
    }
    out
}
