//! `noftl fs waf`: write amplification at file-system and FTL level, the table of AMF (FAST
//! 2016; its slides' "write amplification" table): each configuration (a file system on a
//! block FTL: ext4 through NBD and fuse2fs, f2fs mode and alfs mode of `lfs` through FUSE) gets
//! a fresh mount on a fresh emulated device per workload (`fs bench`'s driver), and reports
//! - FS-level WAF: bytes the file system wrote to the block device (the FTL's host page
//!   writes x 4 KiB) / bytes the workload wrote;
//! - FTL-level WAF: flash page programs / host page writes (the FTL's own report);
//! - total: their product, flash bytes programmed per application byte.
//!
//! Formatting is not the workload's: a run of the same configuration with no workload (format,
//! mount, unmount) gives the baseline host writes and flash programs, subtracted from every
//! run's.
//!
//! Workloads (run by this driver in the mount, except fio):
//! - `seqwrite`: a file of `--fill` of the free space written sequentially in 1 MiB writes,
//!   then rewritten sequentially `--rounds` times, fsync after each pass;
//! - `randwrite`: the same file laid out, then fio 4 KiB uniformly random writes (psync,
//!   O_DIRECT, `--norandommap`) of `--rounds` times its size, fsync at the end;
//! - `postmark-low`, `-high`: Postmark's transaction mix (Katcher, NetApp TR3022) on small
//!   files of 500..10,000 bytes in 10 directories: `--postmark-*-files` files created, then
//!   `--postmark-transactions` transactions, each a create or delete and a read or append,
//!   then every file deleted (Postmark does not fsync);
//! - `tpcb` (the table's OLTP row): the project's engine, `noftl bench tpcb --storage file
//!   --path MOUNT/db`, loading and running TPC-B; each commit forces the log (an fsync). Its
//!   bytes written are the write(2) bytes of the process (`wchar` of `/proc/PID/io`, which the
//!   shell that waits for it accumulates);
//! - `tpcc` (the table's TPC-C row): the same with `noftl bench tpcc` (the specification's
//!   population, `--tpcc-scale` warehouses, `--tpcc-txns` transactions of the mix); both load
//!   row by row (`--load rows`), as when AMF's table was measured: the load's write stream is
//!   part of what the file systems see;
//! - `kv` (the table's non-transactional row): a Bitcask-like hash-partitioned log store with
//!   periodic syncs and compaction (`kv.rs` says what and why);
//! - `dfsio`, `terasort`, `wordcount` (the table's Hadoop rows): a large file written and
//!   read; an external sort of a file of 100-byte records into a second file, validated; a
//!   word count of a generated text through sorted spill files, validated (`hadoop.rs`).
//!
//! `--postmark real` runs the Postmark rows with the `postmark` program itself instead of the
//! built-in mix (the same files, sizes and transactions), as a cross-check of the driver.
//!
//! Every row carries `consistency` (`storage::measure::check_writes`): the run's raw counters
//! against the bounds of the write path (flash bytes programmed >= bytes the FTL received >=
//! bytes the file system counts as written; the file system's bytes >= the workload's where
//! the workload fsyncs and keeps all it writes). A violated row is printed as such and makes
//! the command fail after the JSON is written.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::{json, Value};

use storage::measure::{check_writes, Consistency, Writes};

use crate::device::DeviceSpec;
use crate::experiments::fs_mount::{make_file, mount_on};

/// The Postmark rows' driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Postmark {
    /// This driver's Postmark-like mix.
    Builtin,
    /// The `postmark` program (Debian package postmark) with the same file counts, sizes,
    /// transactions, 10 subdirectories and 4 KiB read and write blocks.
    Real,
}

impl Postmark {
    /// The name rows carry (`workload_info.postmark`) and `--postmark` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Postmark::Builtin => "builtin",
            Postmark::Real => "real",
        }
    }
}

/// What `noftl fs waf` runs: every configuration under every workload, each run on a fresh
/// mount of a fresh device.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The noftl program whose `serve`, `mount` and `bench` verbs serve the device and run the
    /// engine's rows (the CLI passes itself).
    pub noftl: PathBuf,
    /// Configurations as FS:TARGET (FS: ext4, f2fs, alfs, dfs; TARGET: an FTL of `noftl
    /// serve`, amf for alfs, none for dfs); a bare FS runs on the page FTL.
    pub configs: Vec<String>,
    /// The emulated device under every mount.
    pub device: DeviceSpec,
    /// Workloads, in order: seqwrite, randwrite, postmark-low, postmark-high, kv, tpcb, tpcc,
    /// dfsio, terasort.
    pub workloads: Vec<String>,
    /// seqwrite, randwrite and dfsio: the data set's share of the free space the mount reports,
    /// in (0, 0.95) (kv: its live data is half of it; terasort: its input a third).
    pub fill: f64,
    /// seqwrite and randwrite: bytes written after the data set is laid out, as a multiple of
    /// it, in (0, 100].
    pub rounds: f64,
    /// postmark-low: files at the start of the Postmark-like load.
    pub postmark_low_files: u32,
    /// postmark-high: files at the start of the Postmark-like load.
    pub postmark_high_files: u32,
    /// postmark-low and postmark-high: transactions after the files are created.
    pub postmark_transactions: u32,
    /// The Postmark rows' driver.
    pub postmark: Postmark,
    /// kv: operations of the mix after the load.
    pub kv_ops: u32,
    /// tpcb: the engine's TPC-B scale (branches).
    pub tpcb_scale: u32,
    /// tpcb: transactions to run.
    pub tpcb_txns: u32,
    /// tpcc: the engine's TPC-C scale (warehouses).
    pub tpcc_scale: u32,
    /// tpcc: transactions of the mix to run.
    pub tpcc_txns: u32,
    /// Seed of the data and the access pattern.
    pub seed: u64,
    /// Steady-state rounds for the workloads that repeat their work (`rounds::ROUND_WORKLOADS`):
    /// the mount's counters read at each round's mark, until the last five rounds are steady
    /// or this many have run. None: every workload is a whole run.
    pub max_rounds: Option<u32>,
}

/// One row of the table: a configuration under a workload. Pass-through fields are the
/// serving process's statistics as its stats file has them.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub fs: String,
    pub target: String,
    pub workload: String,
    /// Bytes the workload wrote.
    pub app_bytes: u64,
    /// Host page writes of the run less the format's (pages of 4 KiB).
    pub fs_pages_written: u64,
    /// Host page writes of formatting, mounting and unmounting alone (the baseline run).
    pub format_pages_written: u64,
    /// fs_pages_written x 4 KiB / app_bytes.
    pub fs_waf: f64,
    /// Flash page programs / host page writes, both less the format's.
    pub ftl_waf: f64,
    /// fs_waf x ftl_waf: flash bytes programmed per application byte.
    pub total_waf: f64,
    /// The FTL's garbage-collection report.
    pub ftl_gc: Value,
    /// Pages the host trimmed.
    pub trims_pages: Value,
    /// Flash bytes programmed in the whole run (formatting included).
    pub flash_bytes_programmed: Value,
    /// Bytes the file system counts as written to its device, where it keeps a count.
    pub fs_counted_bytes: Option<u64>,
    /// lfs's own report (f2fs and alfs).
    pub lfs: Option<Value>,
    /// What the workload itself reports (kv's keys and compactions, Postmark's driver).
    pub workload_info: Value,
    /// The run's write path against its physical bounds.
    pub consistency: Consistency,
    /// The steady-state rule (`crate::steady`): a row in rounds says whether its rounds
    /// settled; a whole run from a fresh mount says it was not checked, with how often the run
    /// wrote the device over (below 1: the FTL's GC may never have started).
    pub steady_state: crate::steady::SteadyState,
    /// A row in rounds (`Spec::max_rounds`): its measured window (the last five rounds), whose
    /// figures are the row's FS, FTL and total WAF, and every round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<rounds::Window>,
}

/// The table: one row per workload and configuration, workloads outermost.
#[derive(Debug, Clone, Serialize)]
pub struct WafResult {
    pub results: Vec<Row>,
}

impl WafResult {
    /// Rows that broke a physical bound of the write path: their figures are not results.
    pub fn violated(&self) -> usize {
        self.results
            .iter()
            .filter(|r| r.consistency.status != "ok")
            .count()
    }
}

mod hadoop;
mod kv;

use super::rounds::{self, in_rounds, Mark, Marker};

/// Bytes of a logical page: the unit of the FTLs' host counts.
const PAGE_BYTES: u64 = 4096;

/// The FS-side and workload-side numbers of one run.
struct Run {
    app_bytes: u64,
    /// What the workload itself reports (kv's keys and compactions, Postmark's driver).
    workload: Value,
    stats: Value,
    /// The counters at each round's mark (a run in rounds).
    marks: Vec<rounds::Snapshot>,
}

/// The counters of a mount's statistics (`noftl mount`'s for lfs and dfs, `noftl serve`'s
/// under ext4) at a mark, as this table counts them: the FS level is the FTL's host page writes.
fn snapshot_of(stats: &Value, mark: Mark) -> rounds::Snapshot {
    let ftl = &stats["ftl"];
    let host = ftl["host"]["writes"].as_u64().unwrap_or(0);
    let clock_ns = stats["device_time_ns"]
        .as_u64()
        .or_else(|| stats["nand"]["virtual_ns"].as_u64())
        .unwrap_or(0);
    rounds::Snapshot {
        round: mark.round,
        app_bytes: mark.app_bytes,
        fs_write_bytes: host * PAGE_BYTES,
        host_write_pages: host,
        flash_programs: (ftl["waf"].as_f64().unwrap_or(0.0) * host as f64).round() as u64,
        device_clock_us: clock_ns as f64 / 1e3,
    }
}

/// The measurer of a host row in rounds: the mount's counters at each mark.
struct MountMeasurer<'a> {
    mounted: &'a crate::experiments::fs_mount::Mounted,
    label: String,
    marks: Vec<rounds::Snapshot>,
    rule: rounds::Rule,
}

impl Marker for MountMeasurer<'_> {
    fn mark(&mut self, m: Mark) -> anyhow::Result<bool> {
        let stats = self.mounted.stats_now()?;
        self.marks.push(snapshot_of(&stats, m));
        rounds::note(&self.label, &self.marks);
        Ok(rounds::go_on(&self.marks, self.rule))
    }
}

fn free_bytes(dir: &Path) -> anyhow::Result<u64> {
    crate::scratch::free_bytes(dir).with_context(|| format!("statvfs {}", dir.display()))
}

fn rewrite_sequential(path: &Path, mib: u32, seed: u64) -> anyhow::Result<u64> {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..mib {
        rng.fill(&mut buf[..]);
        f.write_all(&buf)?;
    }
    f.sync_all()?;
    Ok(u64::from(mib) << 20)
}

fn fio_randwrite(path: &Path, mib: u32, rounds: f64, seed: u64) -> anyhow::Result<u64> {
    let io_mib = (f64::from(mib) * rounds).max(1.0) as u64;
    let out = Command::new("fio")
        .args([
            "--name=waf",
            "--ioengine=psync",
            "--direct=1",
            "--bs=4k",
            "--rw=randwrite",
            // Uniform random offsets (with repeats), not fio's default permutation per pass,
            // which overwrites every block once per pass and hides the GC cost.
            "--norandommap",
            "--end_fsync=1",
            "--output-format=json",
        ])
        .arg(format!("--filename={}", path.display()))
        .arg(format!("--size={mib}M"))
        .arg(format!("--io_size={io_mib}M"))
        .arg(format!("--randseed={seed}"))
        // fio (3.33) ignores --randseed for the offsets while randrepeat is on (its default):
        // every seed wrote the same sequence, so rounds rewrote the previous round's pages in
        // order and the FTL never copied. Off, the seed decides the sequence (the same seed,
        // the same offsets: measured 2026-11-28).
        .arg("--randrepeat=0")
        .output()
        .context("fio")?;
    if !out.status.success() {
        bail!("fio randwrite: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text.find('{').unwrap_or(0);
    let v: Value = serde_json::from_str(&text[start..]).context("fio's JSON")?;
    v["jobs"][0]["write"]["io_bytes"]
        .as_u64()
        .context("fio reported no bytes written")
}

/// Postmark's transaction mix on small files; returns the bytes written.
fn postmark(root: &Path, files: u32, transactions: u32, seed: u64) -> anyhow::Result<u64> {
    const DIRS: u32 = 10;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut buf = vec![0u8; 10_000];
    rng.fill(&mut buf[..]);
    let mut written = 0u64;
    for d in 0..DIRS {
        std::fs::create_dir(root.join(format!("s{d}")))?;
    }
    let path = |n: u32| root.join(format!("s{}/f{n}", n % DIRS));
    let mut live: Vec<u32> = Vec::new();
    let mut next = 0u32;
    let mut create = |rng: &mut rand_xoshiro::Xoshiro256PlusPlus,
                      live: &mut Vec<u32>,
                      written: &mut u64|
     -> anyhow::Result<()> {
        let size = rng.random_range(500..=10_000);
        std::fs::write(path(next), &buf[..size])?;
        *written += size as u64;
        live.push(next);
        next += 1;
        Ok(())
    };
    for _ in 0..files {
        create(&mut rng, &mut live, &mut written)?;
    }
    let mut rbuf = Vec::new();
    for _ in 0..transactions {
        if rng.random_bool(0.5) || live.is_empty() {
            create(&mut rng, &mut live, &mut written)?;
        } else {
            let i = rng.random_range(0..live.len());
            std::fs::remove_file(path(live.swap_remove(i)))?;
        }
        if live.is_empty() {
            continue;
        }
        let n = live[rng.random_range(0..live.len())];
        if rng.random_bool(0.5) {
            rbuf.clear();
            std::fs::File::open(path(n))?.read_to_end(&mut rbuf)?;
        } else {
            let size = rng.random_range(500..=10_000);
            let mut f = std::fs::OpenOptions::new().append(true).open(path(n))?;
            f.write_all(&[0x5a; 10_000][..size])?;
            written += size as u64;
        }
    }
    for n in live {
        std::fs::remove_file(path(n))?;
    }
    Ok(written)
}

/// The `postmark` program with the built-in mix's parameters; returns the bytes it wrote with
/// write(2) to its files: `wchar` of `/proc/PID/io` (the shell that reaps it accumulates it, as
/// for the engine) less its report, which goes to a file of its own. Postmark's own report
/// gives rates per second (terse) or megabytes to two decimals (verbose), not byte counts.
fn postmark_real(root: &Path, files: u32, transactions: u32, seed: u64) -> anyhow::Result<u64> {
    let cfg_dir = tempfile::tempdir().context("postmark's configuration directory")?;
    let cfg = cfg_dir.path().join("postmark.cfg");
    let report = cfg_dir.path().join("postmark.out");
    // Postmark's seed must be positive; 4 KiB blocks, as the built-in mix's whole-file writes
    // leave the page cache; buffered (stdio) I/O is Postmark's default.
    std::fs::write(
        &cfg,
        format!(
            "set location {}\nset number {files}\nset transactions {transactions}\n\
             set size 500 10000\nset subdirectories 10\nset read 4096\nset write 4096\n\
             set seed {}\nset report terse\nrun\nquit\n",
            root.display(),
            seed.max(1)
        ),
    )?;
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("postmark").is_file()));
    if !on_path {
        bail!("--postmark real needs the postmark program (Debian package postmark)");
    }
    let out = Command::new("bash")
        .arg("-c")
        .arg("postmark \"$0\" >\"$1\" && cat /proc/$$/io")
        .arg(&cfg)
        .arg(&report)
        .output()
        .context("bash")?;
    let printed = std::fs::read(&report).unwrap_or_default();
    if !out.status.success() {
        bail!(
            "postmark: {}{}",
            String::from_utf8_lossy(&printed),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let wchar = wchar_of(&String::from_utf8_lossy(&out.stdout))?;
    Ok(wchar.saturating_sub(printed.len() as u64))
}

/// `wchar` of a `/proc/PID/io` text.
fn wchar_of(io: &str) -> anyhow::Result<u64> {
    io.lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
        .context("no wchar in /proc/PID/io")
}

/// The engine's TPC-B or TPC-C (`noftl bench` with these arguments) on a database file in the
/// mount; returns the bytes the engine wrote.
fn engine_on_file(noftl: &Path, root: &Path, bench_args: &str) -> anyhow::Result<u64> {
    // The shell reaps the engine, so its own I/O counters then include the engine's.
    let script = format!(
        "\"$0\" bench {bench_args} --storage file --path \"$1\" >/dev/null && cat /proc/$$/io"
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg(noftl)
        .arg(root.join("db"))
        .output()
        .context("bash")?;
    if !out.status.success() {
        bail!(
            "noftl bench {bench_args}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    wchar_of(&String::from_utf8_lossy(&out.stdout))
}

/// The workloads `--workloads` names.
pub const WORKLOADS: [&str; 10] = [
    "seqwrite",
    "randwrite",
    "postmark-low",
    "postmark-high",
    "kv",
    "tpcb",
    "tpcc",
    "dfsio",
    "terasort",
    "wordcount",
];

/// Workloads that write every byte once to a file they fsync before deleting it (sequential
/// passes), so that the file system must write at least as much to the device (bound 7 of
/// `storage::measure`). The others may lose bytes to merging in a cache (random writes to one
/// block, files deleted before they were flushed).
pub(crate) fn app_bytes_reach_device(workload: &str) -> bool {
    matches!(workload, "seqwrite" | "dfsio" | "terasort" | "wordcount")
}

/// One mount of `fs` on `target` running `workload` (`none`: the baseline); `device_bytes`:
/// the device's capacity, against which rounds count device writes.
fn run_one(
    a: &Spec,
    (fs, target): (&str, &str),
    workload: &str,
    device_bytes: u64,
) -> anyhow::Result<Run> {
    let m = mount_on(&a.noftl, fs, target, &a.device, "none")?;
    let mut info = Value::Null;
    let mut measurer = a
        .max_rounds
        .filter(|_| rounds::ROUND_WORKLOADS.contains(&workload))
        .map(|max_rounds| MountMeasurer {
            mounted: &m,
            label: format!("fs waf: {fs}:{target} {workload}"),
            marks: Vec::new(),
            rule: rounds::Rule {
                max_rounds,
                device_bytes,
            },
        });
    let r = if workload == "none" {
        Ok(0)
    } else {
        run_workload(
            a,
            &m.root,
            workload,
            &mut info,
            measurer.as_mut().map(|x| x as &mut dyn Marker),
        )
    };
    let marks = measurer.map(|x| x.marks).unwrap_or_default();
    let stats = m.finish()?;
    Ok(Run {
        app_bytes: r?,
        workload: info,
        stats,
        marks,
    })
}

/// One workload run in a directory by `run_workload_in`: what `noftl fs waf-workload` prints
/// (the guest side of `noftl reproduce amf`, where the directory is a kernel file system).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct WorkloadRun {
    pub workload: String,
    /// Bytes the workload wrote.
    pub app_bytes: u64,
    /// What the workload reports of itself (as a row's `workload_info`).
    pub workload_info: Value,
    /// The free space the mount reported before the workload (`--fill` is a share of it).
    pub free_bytes_before: u64,
}

/// Runs one of `spec`'s workloads in the directory `root` (a mounted file system made by
/// someone else: a kernel file system in a guest), with the table's parameters and driver.
/// With `marker`, the workload runs in rounds (`rounds`: one of `rounds::ROUND_WORKLOADS`),
/// marking the end of its preconditioning and of every round until the marker says stop.
pub fn run_workload_in(
    spec: &Spec,
    root: &Path,
    workload: &str,
    marker: Option<&mut dyn Marker>,
) -> anyhow::Result<WorkloadRun> {
    spec.check()?;
    if !WORKLOADS.contains(&workload) {
        bail!("unknown workload '{workload}' ({})", WORKLOADS.join(", "));
    }
    if marker.is_some() && !rounds::ROUND_WORKLOADS.contains(&workload) {
        bail!(
            "{workload} runs whole, not in rounds (rounds: {})",
            rounds::ROUND_WORKLOADS.join(", ")
        );
    }
    let free_bytes_before = free_bytes(root)?;
    let mut info = Value::Null;
    let app_bytes = run_workload(spec, root, workload, &mut info, marker)?;
    Ok(WorkloadRun {
        workload: workload.to_string(),
        app_bytes,
        workload_info: info,
        free_bytes_before,
    })
}

/// randwrite in rounds: each round writes this share of the file at random offsets.
pub const RANDWRITE_ROUND_SHARE: f64 = 0.5;
/// kv in rounds: operations of the mix per round.
pub const KV_ROUND_OPS: u32 = 25_000;

/// Runs `workload` in the mount at `root`; returns the bytes it wrote and sets `info` to what
/// it reports of itself.
fn run_workload(
    a: &Spec,
    root: &Path,
    workload: &str,
    info: &mut Value,
    mut marker: Option<&mut dyn Marker>,
) -> anyhow::Result<u64> {
    let free = free_bytes(root)?;
    let mib = ((free as f64 * a.fill) as u64 >> 20).max(1) as u32;
    let file = root.join("data.bin");
    let postmark_in = |dir: &Path, files: u32, seed: u64| match a.postmark {
        Postmark::Real => postmark_real(dir, files, a.postmark_transactions, seed),
        Postmark::Builtin => postmark(dir, files, a.postmark_transactions, seed),
    };
    let postmark_of = |files: u32| postmark_in(root, files, a.seed);
    match workload {
        "seqwrite" => {
            make_file(&file, mib, a.seed)?;
            let app = u64::from(mib) << 20;
            if let Some(m) = marker.as_mut() {
                // A round is one pass over the file.
                return in_rounds(&mut **m, app, |k| {
                    rewrite_sequential(&file, mib, a.seed + u64::from(k))
                });
            }
            let mut app = app;
            let passes = a.rounds.round().max(1.0) as u32;
            for p in 0..passes {
                app += rewrite_sequential(&file, mib, a.seed + u64::from(p) + 1)?;
            }
            Ok(app)
        }
        "randwrite" => {
            make_file(&file, mib, a.seed)?;
            let app = u64::from(mib) << 20;
            if let Some(m) = marker.as_mut() {
                // Each round its own seed: the same seed would write the same offsets again.
                return in_rounds(&mut **m, app, |k| {
                    fio_randwrite(&file, mib, RANDWRITE_ROUND_SHARE, a.seed + u64::from(k))
                });
            }
            Ok(app + fio_randwrite(&file, mib, a.rounds, a.seed)?)
        }
        "postmark-low" => {
            *info = json!({ "postmark": a.postmark.as_str() });
            postmark_of(a.postmark_low_files)
        }
        "postmark-high" => {
            *info = json!({ "postmark": a.postmark.as_str() });
            let app = postmark_of(a.postmark_high_files)?;
            let Some(m) = marker.as_mut() else {
                return Ok(app);
            };
            // A round: Postmark again with its own seed, in a directory of its own that it
            // leaves empty and that is then removed (the built-in mix makes its subdirectories).
            in_rounds(&mut **m, app, |k| {
                let dir = root.join(format!("round{k}"));
                std::fs::create_dir(&dir)?;
                let written = postmark_in(&dir, a.postmark_high_files, a.seed + u64::from(k))?;
                std::fs::remove_dir_all(&dir)?;
                Ok(written)
            })
        }
        "kv" => {
            let live_bytes = (free as f64 * a.fill / 2.0) as u64;
            let k = match marker.as_mut() {
                Some(m) => kv::run(
                    &root.join("kv"),
                    live_bytes,
                    kv::Ops::Rounds(KV_ROUND_OPS, &mut **m),
                    a.seed,
                )?,
                None => kv::run(
                    &root.join("kv"),
                    live_bytes,
                    kv::Ops::Whole(a.kv_ops),
                    a.seed,
                )?,
            };
            *info = json!({
                "live_bytes_target": live_bytes,
                "keys_loaded": k.keys,
                "ops": a.kv_ops,
                "compactions": k.compactions,
            });
            Ok(k.written_bytes)
        }
        "dfsio" => {
            *info = json!({ "file_bytes": u64::from(mib) << 20 });
            hadoop::dfsio(root, mib, a.seed)
        }
        "terasort" => {
            let records = ((free as f64 * a.fill / 3.0) as u64 / hadoop::RECORD_BYTES as u64)
                .max(hadoop::RUNS);
            *info = json!({
                "records": records,
                "file_bytes": records * hadoop::RECORD_BYTES as u64,
                "runs": hadoop::RUNS,
            });
            hadoop::terasort(root, records, a.seed)
        }
        "wordcount" => {
            let input_bytes = (free as f64 * a.fill / 4.0) as u64;
            *info = json!({ "input_bytes_target": input_bytes, "splits": hadoop::SPLITS });
            hadoop::wordcount(root, input_bytes, a.seed)
        }
        "tpcb" | "tpcc" => {
            let (scale, txns) = if workload == "tpcb" {
                (a.tpcb_scale, a.tpcb_txns)
            } else {
                (a.tpcc_scale, a.tpcc_txns)
            };
            let load = format!(
                "{workload} --scale {scale} --txns {txns} --seed {} --load rows",
                a.seed
            );
            let app = engine_on_file(&a.noftl, root, &load)?;
            let Some(m) = marker.as_mut() else {
                return Ok(app);
            };
            // A round: the database reopened (recovered) and run again for as many
            // transactions, with new inputs (TPC-B reuses a file's database by itself; TPC-C's
            // load constants stay the load seed's).
            in_rounds(&mut **m, app, |k| {
                let round_seed = a.seed + u64::from(k);
                let again = if workload == "tpcb" {
                    format!("tpcb --scale {scale} --txns {txns} --seed {round_seed}")
                } else {
                    format!(
                        "tpcc --scale {scale} --txns {txns} --seed {} --run-seed {round_seed} \
                         --reuse",
                        a.seed
                    )
                };
                engine_on_file(&a.noftl, root, &again)
            })
        }
        other => bail!("unknown workload '{other}' ({})", WORKLOADS.join(", ")),
    }
}

/// (host page writes, flash page programs) of a run's FTL.
fn writes_of(run: &Run) -> (u64, f64) {
    let ftl = &run.stats["ftl"];
    let host = ftl["host"]["writes"].as_u64().unwrap_or(0);
    (host, ftl["waf"].as_f64().unwrap_or(0.0) * host as f64)
}

/// The flash report of a stats file: `mount`'s "flash", `serve`'s "nand".
fn flash_report(stats: &Value) -> &Value {
    if stats.get("flash").is_some_and(|f| !f.is_null()) {
        &stats["flash"]
    } else {
        &stats["nand"]
    }
}

/// The bytes the file system counts as written to its device, where it keeps a count: lfs's
/// pages by purpose; under ext4, the NBD export's write requests.
fn fs_counted_bytes(stats: &Value) -> Option<u64> {
    if let Some(st) = stats.get("lfs").filter(|v| v.is_object()) {
        let n = |k: &str| st[k].as_u64().unwrap_or(0);
        return Some(
            (n("data_pages") + n("node_pages") + n("meta_pages") + n("checkpoint_pages"))
                * PAGE_BYTES,
        );
    }
    stats["requests"]["bytes_written"].as_u64()
}

/// The bytes the file system received in write requests, where it counts them (lfs).
fn fs_received_bytes(stats: &Value) -> Option<u64> {
    stats.get("lfs")?.get("user_bytes")?.as_u64()
}

/// The run's write path against its physical bounds (`storage::measure::check_writes`).
fn consistency_of(workload: &str, run: &Run, fs_bytes: u64) -> Consistency {
    let (host, claimed) = writes_of(run);
    check_writes(Writes {
        app_bytes: run.app_bytes,
        fs_received_bytes: fs_received_bytes(&run.stats),
        app_bytes_reach_device: app_bytes_reach_device(workload),
        fs_bytes,
        host_bytes_total: host * PAGE_BYTES,
        fs_counted_bytes_total: fs_counted_bytes(&run.stats),
        ftl_claimed_bytes_total: (claimed * PAGE_BYTES as f64).round() as u64,
        flash_bytes_total: flash_report(&run.stats)["bytes_programmed"]
            .as_u64()
            .unwrap_or(0),
    })
}

fn row(
    fs: &str,
    target: &str,
    workload: &str,
    (run, base): (&Run, &Run),
    device_bytes: u64,
) -> anyhow::Result<Row> {
    let ftl = &run.stats["ftl"];
    let ((host, programs), (host0, programs0)) = (writes_of(run), writes_of(base));
    let host_pages = host.saturating_sub(host0);
    let consistency = consistency_of(workload, run, host_pages * PAGE_BYTES);
    let window = rounds::window(&run.marks, device_bytes)?;
    let (fs_waf, ftl_waf, steady_state) = match &window {
        Some(w) => (w.figures.fs_waf, w.figures.ftl_waf, w.steady_state.clone()),
        None => (
            (host_pages * PAGE_BYTES) as f64 / run.app_bytes.max(1) as f64,
            (programs - programs0) / host_pages.max(1) as f64,
            crate::steady::SteadyState::skipped(
                (host * PAGE_BYTES) as f64 / device_bytes.max(1) as f64,
            ),
        ),
    };
    Ok(Row {
        fs: fs.to_string(),
        target: target.to_string(),
        workload: workload.to_string(),
        app_bytes: run.app_bytes,
        fs_pages_written: host_pages,
        format_pages_written: host0,
        fs_waf,
        ftl_waf,
        total_waf: fs_waf * ftl_waf,
        ftl_gc: ftl["gc"].clone(),
        trims_pages: ftl["host"]["trims"].clone(),
        flash_bytes_programmed: flash_report(&run.stats)["bytes_programmed"].clone(),
        fs_counted_bytes: fs_counted_bytes(&run.stats),
        lfs: run.stats.get("lfs").cloned(),
        workload_info: run.workload.clone(),
        consistency,
        steady_state,
        window,
    })
}

/// The configurations of `spec`, as (file system, target), checked.
fn configs_of(spec: &Spec) -> anyhow::Result<Vec<(String, String)>> {
    let mut configs = Vec::new();
    for c in &spec.configs {
        let (fs, target) = c.split_once(':').unwrap_or((c.as_str(), "page"));
        match fs {
            "ext4" | "f2fs" | "dfs" => {}
            "alfs" if target == "amf" => {}
            "alfs" => bail!("{c}: alfs runs on amf only"),
            other => bail!("{c}: unknown file system '{other}' (ext4, f2fs, alfs, dfs)"),
        }
        if fs == "f2fs" && target == "amf" {
            bail!("{c}: f2fs updates metadata in place, which amf refuses (use alfs:amf)");
        }
        configs.push((fs.to_string(), target.to_string()));
    }
    Ok(configs)
}

impl Spec {
    /// Refuses a spec before any mount is made and formatted: `fill` and `rounds` out of
    /// range, an unknown or impossible configuration, an unknown workload.
    pub fn check(&self) -> anyhow::Result<()> {
        if !(self.fill.is_finite() && self.fill > 0.0 && self.fill < 0.95) {
            bail!("--fill {} is not in (0, 0.95)", self.fill);
        }
        if !(self.rounds.is_finite() && self.rounds > 0.0 && self.rounds <= 100.0) {
            bail!("--rounds {} is not in (0, 100]", self.rounds);
        }
        configs_of(self)?;
        if let Some(w) = self
            .workloads
            .iter()
            .find(|w| !WORKLOADS.contains(&w.as_str()))
        {
            bail!("unknown workload '{w}' ({})", WORKLOADS.join(", "));
        }
        Ok(())
    }
}

/// Runs the table: a baseline run (no workload) per configuration, then every workload on
/// every configuration. Progress goes to stderr, a line per row.
pub fn run(spec: &Spec) -> anyhow::Result<WafResult> {
    spec.check()?;
    let configs = configs_of(spec)?;
    let device_bytes = spec.device.load()?.geometry.capacity_bytes();
    let mut rows = Vec::new();
    let mut bases = Vec::new();
    for (fs, target) in &configs {
        bases.push(
            run_one(spec, (fs, target), "none", device_bytes)
                .with_context(|| format!("{fs}:{target} format"))?,
        );
    }
    for w in &spec.workloads {
        for ((fs, target), base) in configs.iter().zip(&bases) {
            let run = run_one(spec, (fs, target), w, device_bytes)
                .with_context(|| format!("{fs}:{target} {w}"))?;
            let r = row(fs, target, w, (&run, base), device_bytes)
                .with_context(|| format!("{fs}:{target} {w}"))?;
            eprintln!(
                "{fs}:{target} {w}: FS WAF {:.2}, FTL WAF {:.2}",
                nan_if_infinite(r.fs_waf),
                nan_if_infinite(r.ftl_waf)
            );
            rows.push(r);
        }
    }
    Ok(WafResult { results: rows })
}

/// A figure as the JSON has it when read back: a non-finite number is written as null, read
/// as NaN (the report prints what the JSON holds).
pub fn nan_if_infinite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        f64::NAN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row as the JSON has it.
    fn row(fs: &str, target: &str, workload: &str, run: &Run, base: &Run) -> Value {
        serde_json::to_value(super::row(fs, target, workload, (run, base), 1 << 30).unwrap())
            .unwrap()
    }

    /// A run's statistics as `noftl mount` writes them for lfs.
    fn lfs_run(app_bytes: u64, host_pages: u64, flash_pages: u64, lfs_pages: u64) -> Run {
        Run {
            app_bytes,
            workload: Value::Null,
            marks: Vec::new(),
            stats: json!({
                "lfs": { "data_pages": lfs_pages, "node_pages": 0, "meta_pages": 0,
                         "checkpoint_pages": 0, "user_bytes": app_bytes },
                "ftl": { "host": { "writes": host_pages, "trims": 0 },
                         "waf": flash_pages as f64 / host_pages as f64, "gc": {} },
                "flash": { "bytes_programmed": flash_pages * (PAGE_BYTES + 128) },
            }),
        }
    }

    #[test]
    fn rows_check_their_write_path_and_a_wrong_counter_is_violated() {
        let base = lfs_run(0, 10, 10, 10);
        let good = row(
            "alfs",
            "amf",
            "seqwrite",
            &lfs_run(1 << 22, 1034, 1034, 1034),
            &base,
        );
        assert_eq!(good["consistency"]["status"], "ok", "{good}");
        assert_eq!(good["ftl_waf"], 1.0);
        // The flash's count below the FTL's host writes: a page was stored without a program.
        let mut lost = lfs_run(1 << 22, 1034, 1034, 1034);
        lost.stats["flash"]["bytes_programmed"] = json!(1000 * (PAGE_BYTES + 128));
        let r = row("alfs", "amf", "seqwrite", &lost, &base);
        assert_eq!(r["consistency"]["status"], "violated", "{r}");
        // The file system counting more than the device received.
        let r = row(
            "f2fs",
            "page",
            "randwrite",
            &lfs_run(1 << 22, 1034, 1100, 1040),
            &base,
        );
        assert_eq!(r["consistency"]["status"], "violated", "{r}");
        // A sequential workload whose bytes did not all reach the device.
        let r = row(
            "f2fs",
            "page",
            "seqwrite",
            &lfs_run(1 << 23, 1034, 1100, 1034),
            &base,
        );
        assert_eq!(r["consistency"]["status"], "violated", "{r}");
        // A workload that counts fewer bytes than the file system received from it.
        let mut undercounted = lfs_run(1 << 22, 1034, 1034, 1034);
        undercounted.app_bytes = 1 << 20;
        let r = row("alfs", "amf", "postmark-low", &undercounted, &base);
        assert_eq!(r["consistency"]["status"], "violated", "{r}");
        // ... which a workload that deletes files before they are flushed may do.
        let r = row(
            "f2fs",
            "page",
            "postmark-low",
            &lfs_run(1 << 23, 1034, 1100, 1034),
            &base,
        );
        assert_eq!(r["consistency"]["status"], "ok", "{r}");
    }

    #[test]
    fn wchar_is_read_from_proc_io() {
        let io = "rchar: 611720\nwchar: 1267649\nsyscr: 1229\nsyscw: 2645\n";
        assert_eq!(wchar_of(io).unwrap(), 1_267_649);
        assert!(wchar_of("rchar: 1\n").is_err());
    }
}
