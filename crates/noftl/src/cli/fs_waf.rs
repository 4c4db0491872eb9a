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
//!   population, `--tpcc-scale` warehouses, `--tpcc-txns` transactions of the mix).
//!   Both load row by row (`--load rows`), as when AMF's table was measured: the load's write
//!   stream is part of what the file systems see.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::cli::fs::{make_file, mount_on, FsWafArgs};

/// The FS-side and workload-side numbers of one run.
struct Run {
    app_bytes: u64,
    stats: Value,
}

fn free_bytes(dir: &Path) -> anyhow::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: statvfs on a valid NUL-terminated path into a zeroed struct we own.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        bail!(
            "statvfs {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
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

/// The engine's TPC-B or TPC-C (`bench` with these arguments) on a database file in the mount;
/// returns the bytes the engine wrote.
fn engine_on_file(root: &Path, bench_args: &str) -> anyhow::Result<u64> {
    let exe = std::env::current_exe().context("own executable")?;
    // The shell reaps the engine, so its own I/O counters then include the engine's.
    let script = format!(
        "\"$0\" bench {bench_args} --storage file --path \"$1\" >/dev/null && cat /proc/$$/io"
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg(&exe)
        .arg(root.join("db"))
        .output()
        .context("bash")?;
    if !out.status.success() {
        bail!(
            "noftl bench {bench_args}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
        .context("no wchar in /proc/PID/io")
}

/// The workloads `--workloads` names.
const WORKLOADS: [&str; 6] = [
    "seqwrite",
    "randwrite",
    "postmark-low",
    "postmark-high",
    "tpcb",
    "tpcc",
];

fn run_one(a: &FsWafArgs, fs: &str, target: &str, workload: &str) -> anyhow::Result<Run> {
    let m = mount_on(fs, target, &a.device, "none")?;
    let r = (|| -> anyhow::Result<u64> {
        if workload == "none" {
            return Ok(0);
        }
        let free = free_bytes(&m.root)?;
        let mib = ((free as f64 * a.fill) as u64 >> 20).max(1) as u32;
        let file = m.root.join("data.bin");
        match workload {
            "seqwrite" => {
                make_file(&file, mib, a.seed)?;
                let mut app = u64::from(mib) << 20;
                let passes = a.rounds.round().max(1.0) as u32;
                for p in 0..passes {
                    app += rewrite_sequential(&file, mib, a.seed + u64::from(p) + 1)?;
                }
                Ok(app)
            }
            "randwrite" => {
                make_file(&file, mib, a.seed)?;
                Ok((u64::from(mib) << 20) + fio_randwrite(&file, mib, a.rounds, a.seed)?)
            }
            "postmark-low" => postmark(
                &m.root,
                a.postmark_low_files,
                a.postmark_transactions,
                a.seed,
            ),
            "postmark-high" => postmark(
                &m.root,
                a.postmark_high_files,
                a.postmark_transactions,
                a.seed,
            ),
            "tpcb" => engine_on_file(
                &m.root,
                &format!(
                    "tpcb --scale {} --txns {} --seed {} --load rows",
                    a.tpcb_scale, a.tpcb_txns, a.seed
                ),
            ),
            "tpcc" => engine_on_file(
                &m.root,
                &format!(
                    "tpcc --scale {} --txns {} --seed {} --load rows",
                    a.tpcc_scale, a.tpcc_txns, a.seed
                ),
            ),
            other => bail!(
                "unknown workload '{other}' (seqwrite, randwrite, postmark-low, postmark-high, tpcb, tpcc)"
            ),
        }
    })();
    let stats = m.finish()?;
    Ok(Run {
        app_bytes: r?,
        stats,
    })
}

/// (host page writes, flash page programs) of a run's FTL.
fn writes_of(run: &Run) -> (u64, f64) {
    let ftl = &run.stats["ftl"];
    let host = ftl["host"]["writes"].as_u64().unwrap_or(0);
    (host, ftl["waf"].as_f64().unwrap_or(0.0) * host as f64)
}

fn row(fs: &str, target: &str, workload: &str, run: &Run, base: &Run) -> Value {
    let ftl = &run.stats["ftl"];
    let ((host, programs), (host0, programs0)) = (writes_of(run), writes_of(base));
    let host_pages = host.saturating_sub(host0);
    let fs_waf = (host_pages * 4096) as f64 / run.app_bytes.max(1) as f64;
    let ftl_waf = (programs - programs0) / host_pages.max(1) as f64;
    json!({
        "fs": fs, "target": target, "workload": workload,
        "app_bytes": run.app_bytes,
        "fs_pages_written": host_pages,
        "format_pages_written": host0,
        "fs_waf": fs_waf,
        "ftl_waf": ftl_waf,
        "total_waf": fs_waf * ftl_waf,
        "ftl_gc": ftl["gc"],
        "trims_pages": ftl["host"]["trims"],
        "lfs": run.stats.get("lfs"),
    })
}

pub fn run(a: FsWafArgs) -> anyhow::Result<()> {
    if !(a.fill.is_finite() && a.fill > 0.0 && a.fill < 0.95) {
        bail!("--fill {} is not in (0, 0.95)", a.fill);
    }
    if !(a.rounds.is_finite() && a.rounds > 0.0 && a.rounds <= 100.0) {
        bail!("--rounds {} is not in (0, 100]", a.rounds);
    }
    let mut configs = Vec::new();
    for c in &a.configs {
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
    if let Some(p) = &a.json {
        crate::output::check_writable(p)?;
    }
    // Refused before any mount is made and formatted.
    if let Some(w) = a
        .workloads
        .iter()
        .find(|w| !WORKLOADS.contains(&w.as_str()))
    {
        bail!("unknown workload '{w}' ({})", WORKLOADS.join(", "));
    }
    let mut rows = Vec::new();
    let mut bases = Vec::new();
    for (fs, target) in &configs {
        bases.push(
            run_one(&a, fs, target, "none").with_context(|| format!("{fs}:{target} format"))?,
        );
    }
    for w in &a.workloads {
        for ((fs, target), base) in configs.iter().zip(&bases) {
            let run = run_one(&a, fs, target, w).with_context(|| format!("{fs}:{target} {w}"))?;
            let r = row(fs, target, w, &run, base);
            eprintln!(
                "{fs}:{target} {w}: FS WAF {:.2}, FTL WAF {:.2}",
                r["fs_waf"].as_f64().unwrap_or(f64::NAN),
                r["ftl_waf"].as_f64().unwrap_or(f64::NAN)
            );
            rows.push(r);
        }
    }
    println!(
        "{:<14} {:<12} {:>9} {:>7} {:>7} {:>7} {:>10}",
        "config", "workload", "app MiB", "FS", "FTL", "total", "GC copies"
    );
    for r in &rows {
        println!(
            "{:<14} {:<12} {:>9.1} {:>7.2} {:>7.2} {:>7.2} {:>10}",
            format!(
                "{}:{}",
                r["fs"].as_str().unwrap_or(""),
                r["target"].as_str().unwrap_or("")
            ),
            r["workload"].as_str().unwrap_or(""),
            r["app_bytes"].as_f64().unwrap_or(0.0) / 1048576.0,
            r["fs_waf"].as_f64().unwrap_or(f64::NAN),
            r["ftl_waf"].as_f64().unwrap_or(f64::NAN),
            r["total_waf"].as_f64().unwrap_or(f64::NAN),
            r["ftl_gc"]["migrations"],
        );
    }
    if let Some(p) = &a.json {
        let doc = json!({ "results": rows });
        crate::output::write_atomic(
            p,
            format!("{}\n", serde_json::to_string_pretty(&doc)?).as_bytes(),
        )?;
    }
    Ok(())
}
