//! Real programs on a FUSE mount of each of the project's file systems (`noftl mount --fs dfs`,
//! `--fs f2fs` on the page FTL, `--fs alfs` on AMF): `cp -r`, `tar x`, `git init/commit`,
//! SQLite with `PRAGMA integrity_check`, fio with verify; then SIGTERM (a clean unmount with
//! statistics), `noftl fsck` clean, a remount from the image, and everything read back intact.
//! Skips with a printed reason only where FUSE or a tool cannot be had.

mod nbd_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nbd_support::{fuse_available, is_mounted, reap, require, skip};

const TOOLS: &[&str] = &[
    "fusermount3",
    "tar",
    "git",
    "sqlite3",
    "fio",
    "diff",
    "md5sum",
];
/// The tiny preset grown to 64 MiB.
const DEVICE: &[&str] = &["--preset", "tiny", "--set", "geometry.blocks_per_plane=128"];

/// A running `noftl mount`, stopped with SIGTERM.
struct Mounted {
    child: Child,
    dir: PathBuf,
}

impl Mounted {
    fn start(fs: &str, dir: &Path, image: &Path, stats: &Path) -> Mounted {
        let mut args: Vec<String> = vec!["mount".into(), "--fs".into(), fs.into()];
        args.push(dir.display().to_string());
        args.extend(DEVICE.iter().map(|s| s.to_string()));
        args.extend(["--image".into(), image.display().to_string()]);
        args.extend(["--stats-file".into(), stats.display().to_string()]);
        let child = Command::new(env!("CARGO_BIN_EXE_noftl"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("noftl mount starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !is_mounted(dir) {
            assert!(
                Instant::now() < deadline,
                "noftl mount did not mount {}",
                dir.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Mounted {
            child,
            dir: dir.to_path_buf(),
        }
    }

    fn stop(mut self) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        assert_eq!(rc, 0, "SIGTERM to noftl mount");
        let status = reap(&mut self.child, Duration::from_secs(30)).expect("noftl mount exits");
        assert!(status.success(), "noftl mount exited with {status}");
        assert!(!is_mounted(&self.dir), "still mounted after SIGTERM");
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if is_mounted(&self.dir) {
            let _ = Command::new("fusermount3")
                .arg("-u")
                .arg(&self.dir)
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sh(dir: &Path, script: &str) -> String {
    let out = Command::new("bash")
        .arg("-euo")
        .arg("pipefail")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .expect("bash runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "`{script}` failed:\n{text}");
    text
}

#[test]
fn real_programs_on_dfs_survive_a_remount() {
    real_programs_survive_a_remount("dfs");
}

#[test]
fn real_programs_on_f2fs_survive_a_remount() {
    real_programs_survive_a_remount("f2fs");
}

#[test]
fn real_programs_on_alfs_survive_a_remount() {
    real_programs_survive_a_remount("alfs");
}

#[allow(clippy::unwrap_used)] // a test's helper: a failed unwrap is a failed test
fn real_programs_survive_a_remount(fs: &str) {
    let Ok(()) = fuse_available(TOOLS).map_err(skip) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let mnt = work.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let image = work.path().join(format!("{fs}.img"));
    let stats = work.path().join("stats.json");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dfs");
    let tarball = work.path().join("src.tar");
    sh(
        work.path(),
        &format!("tar cf {} -C {} .", tarball.display(), src.display()),
    );

    let m = Mounted::start(fs, &mnt, &image, &stats);
    sh(
        &mnt,
        &format!(
            "cp -r {} copy && diff -r {} copy",
            src.display(),
            src.display()
        ),
    );
    sh(
        &mnt,
        &format!(
            "mkdir untar && tar xf {} -C untar && diff -r {} untar",
            tarball.display(),
            src.display()
        ),
    );
    sh(
        &mnt,
        "git init -q repo && cd repo && git config user.email t@example.com && \
         git config user.name t && cp -r ../copy/src . && git add -A && git commit -qm one && \
         echo more >> src/lib.rs && git commit -qam two && git fsck --strict",
    );
    let sql = sh(
        &mnt,
        "sqlite3 db.sqlite \"create table t(a integer primary key, b); \
         with recursive c(x) as (select 1 union all select x+1 from c where x<5000) \
         insert into t select x, hex(randomblob(40)) from c; \
         delete from t where a % 3 = 0; pragma integrity_check; select count(*) from t;\"",
    );
    assert!(sql.contains("ok") && sql.contains("3334"), "sqlite3: {sql}");
    sh(
        &mnt,
        "fio --name=v --filename=fio.dat --size=4M --bs=4k --rw=randwrite --ioengine=psync \
         --verify=crc32c --do_verify=1 --verify_state_save=0 --randseed=7 >/dev/null",
    );
    sh(&mnt, "mkdir -p a/b && ln -s ../db.sqlite a/link && ln fio.dat hard && mv a/b a/c && rmdir a/c && truncate -s 10M sparse && md5sum db.sqlite fio.dat sparse > ../sums");
    m.stop();
    let st = std::fs::read_to_string(&stats).expect("the statistics file");
    assert!(st.contains(&format!("\"fs\": \"{fs}\"")), "{st}");
    let v: serde_json::Value = serde_json::from_str(&st).unwrap();
    match fs {
        "dfs" => assert!(st.contains("blocks_written"), "{st}"),
        // Every page AMF programmed is one the file system wrote: no overwrite was refused
        // (the mount would have failed) and the device copied nothing.
        "alfs" => assert_eq!(v["ftl_waf"].as_f64(), Some(1.0), "{st}"),
        _ => assert!(v["fs_waf"].as_f64().is_some_and(|w| w > 0.0), "{st}"),
    }

    let fsck = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args(["fsck", "--fs", fs, "--image"])
        .arg(&image)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&fsck.stdout);
    assert!(
        fsck.status.success() && text.contains("clean"),
        "fsck: {text}"
    );

    let m = Mounted::start(fs, &mnt, &image, &stats);
    sh(
        &mnt,
        &format!(
            "diff -r {} copy && diff -r {} untar",
            src.display(),
            src.display()
        ),
    );
    sh(
        &mnt,
        "cd repo && git fsck --strict && test \"$(git log --oneline | wc -l)\" = 2",
    );
    let sql = sh(
        &mnt,
        "sqlite3 db.sqlite 'pragma integrity_check; select count(*) from t;'",
    );
    assert!(
        sql.contains("ok") && sql.contains("3334"),
        "sqlite3 after remount: {sql}"
    );
    sh(&mnt, "md5sum -c ../sums && test \"$(readlink a/link)\" = ../db.sqlite && test \"$(stat -c %h fio.dat)\" = 2 && test ! -e a/b");
    m.stop();
}

/// `noftl fs bench` end to end on DFS and on ext4 (page FTL through NBD), tiny settings: the
/// table and the JSON with every field the issue asks for, and the DFS/ext4 ratios.
#[test]
fn fs_bench_runs_both_file_systems() {
    let Ok(()) = fuse_available(TOOLS)
        .and_then(|()| require(&["nbdfuse", "fuse2fs", "mkfs.ext4"]))
        .map_err(skip)
    else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let json = work.path().join("fs.json");
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args([
            "fs",
            "bench",
            "--fs",
            "dfs,ext4",
            "--threads",
            "1,2",
            "--rw",
            "randwrite",
        ])
        .args([
            "--runtime-s",
            "1",
            "--fio-mib",
            "4",
            "--apps",
            "sort,scan",
            "--app-mib",
            "2",
        ])
        .args(["--clock", "none"])
        .args(DEVICE)
        .arg("--json")
        .arg(&json)
        .arg("--results")
        .arg(work.path().join("res"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "fs bench: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("DFS / ext4"), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * (2 + 2), "{v}");
    for r in rows {
        assert!(r["cpu_us_per_io"].as_f64().is_some(), "{r}");
        assert!(r["flash"]["programs"].as_u64().unwrap() > 0, "{r}");
        assert!(
            r["iops"].as_f64().is_some_and(|x| x > 0.0) || r["seconds"].as_f64().is_some(),
            "{r}"
        );
    }
    assert_eq!(v["ratios"].as_array().unwrap().len(), 4, "{v}");
    // The result directory (docs/results.md): the JSON's rows as `rows`, each fio point with
    // BenchBase's names from fio's own JSON, kept beside it.
    let res = work.path().join("res");
    let s: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(lab::results::find(&res, "summary.json").unwrap()).unwrap(),
    )
    .unwrap();
    assert_eq!(s["Benchmark Type"], "fs");
    assert_eq!(s["ratios"], v["ratios"]);
    let files = s["results"]["files"].as_array().unwrap();
    assert_eq!(
        files.len(),
        3 + 2 * 2,
        "summary.json, params.json, config.xml and four fio points: {s}"
    );
    for (r, today) in s["rows"].as_array().unwrap().iter().zip(rows) {
        assert_eq!(r["workload"], today["workload"]);
        assert_eq!(r["flash"], today["flash"]);
        let Some(name) = r["fio_json"].as_str() else {
            assert!(r["seconds"].as_f64().is_some(), "an application: {r}");
            continue;
        };
        assert!(files.iter().any(|f| f == name), "{name} in {files:?}");
        let fio: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(res.join(name)).unwrap()).unwrap();
        let w = &fio["jobs"][0]["write"];
        assert_eq!(r["terminals"], r["threads"]);
        let iops = r["Throughput (requests/second)"].as_f64().unwrap();
        assert!((iops - w["iops"].as_f64().unwrap()).abs() < 0.01, "{r}");
        let lat = &r["Latency Distribution"];
        let us = |k: &str| lat[k].as_f64().unwrap();
        assert_eq!(
            us("Median Latency (microseconds)"),
            // BenchBase's whole microseconds (lab::results::benchbase_of_fio).
            (w["clat_ns"]["percentile"]["50.000000"].as_f64().unwrap() / 1e3).round()
        );
        assert!(
            us("Minimum Latency (microseconds)") <= us("Median Latency (microseconds)")
                && us("Median Latency (microseconds)")
                    <= us("99th Percentile Latency (microseconds)")
                && us("99th Percentile Latency (microseconds)")
                    <= us("Maximum Latency (microseconds)"),
            "{lat}"
        );
    }
}

/// `noftl fs waf` end to end on the log-structured configurations, tiny settings: a row per
/// configuration and workload, and ALFS on AMF with no FTL amplification at all (every flash
/// program is a page the file system wrote).
#[test]
fn fs_waf_measures_both_levels() {
    let Ok(()) = fuse_available(TOOLS).map_err(skip) else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let json = work.path().join("waf.json");
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args(["fs", "waf", "--configs", "f2fs:page,f2fs:dftl,alfs:amf"])
        .args(["--workloads", "randwrite,postmark-low"])
        .args(["--fill", "0.3", "--rounds", "1"])
        .args([
            "--postmark-low-files",
            "100",
            "--postmark-transactions",
            "200",
        ])
        .args(DEVICE)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "fs waf: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["results"].as_array().unwrap();
    assert_eq!(rows.len(), 3 * 2, "{v}");
    for r in rows {
        // Below 1 is possible: Postmark deletes files whose blocks never left the cache.
        let fs_waf = r["fs_waf"].as_f64().unwrap();
        assert!(fs_waf > 0.3 && fs_waf < 5.0, "{r}");
        if r["fs"] == "alfs" {
            assert_eq!(r["ftl_waf"].as_f64(), Some(1.0), "{r}");
        } else {
            assert!(r["ftl_waf"].as_f64().unwrap() >= 1.0, "{r}");
        }
        assert_eq!(r["consistency"]["status"], "ok", "{r}");
    }
}

/// `fs waf --steady`: seqwrite in rounds on the host's FUSE mounts, the mount asked for its
/// counters at each mark (SIGUSR1); every pass over the file writes the same, so five rounds
/// are steady, and the row's figures are those five rounds'.
#[test]
fn fs_waf_steady_runs_rounds_until_steady() {
    let Ok(()) = fuse_available(&["fusermount3"]).map_err(skip) else {
        return;
    };
    let rows = fs_waf_rows(&[
        "--configs",
        "f2fs:page,alfs:amf",
        "--workloads",
        "seqwrite",
        "--fill",
        "0.2",
        "--steady",
    ]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for r in &rows {
        assert_eq!(r["consistency"]["status"], "ok", "{r}");
        let steady = &r["steady_state"];
        assert_eq!(steady["met"], true, "{r}");
        let rounds = r["window"]["rounds"].as_array().expect("the rounds");
        assert_eq!(
            rounds.len() as u64,
            steady["rounds"].as_u64().unwrap(),
            "{r}"
        );
        assert!(rounds.len() >= 5, "{r}");
        // Every round is one pass over the file; the window is the last five.
        let pass = rounds[0]["app_bytes"].as_u64().unwrap();
        assert!(pass >= 1 << 20, "{r}");
        assert!(
            rounds.iter().all(|x| x["app_bytes"].as_u64() == Some(pass)),
            "{r}"
        );
        assert_eq!(
            r["window"]["figures"]["app_bytes"].as_u64(),
            Some(5 * pass),
            "{r}"
        );
        assert!(
            r["window"]["figures"]["app_mib_per_device_s"]
                .as_f64()
                .unwrap()
                > 0.0,
            "{r}"
        );
        let fs_waf = r["fs_waf"].as_f64().unwrap();
        assert!(
            (0.9..1.5).contains(&fs_waf),
            "a pass writes its file and a little metadata: {r}"
        );
        if r["fs"] == "alfs" {
            assert_eq!(r["ftl_waf"].as_f64(), Some(1.0), "{r}");
        }
    }
}

/// Runs `noftl fs waf` with `args` on the small device; returns its rows.
fn fs_waf_rows(args: &[&str]) -> Vec<serde_json::Value> {
    let work = tempfile::tempdir().expect("a temporary directory");
    let json = work.path().join("waf.json");
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args(["fs", "waf"])
        .args(args)
        .args(DEVICE)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("noftl fs waf runs");
    assert!(
        out.status.success(),
        "fs waf: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&json).expect("fs waf wrote its JSON");
    let v: serde_json::Value = serde_json::from_str(&text).expect("fs waf's JSON parses");
    v["results"].as_array().expect("a results array").clone()
}

/// The key-value (non-transactional) and Hadoop-like workloads of `fs waf` run on a small
/// device in both lfs modes, with every row within its physical bounds; the Hadoop jobs, which
/// fsync all they write, write at least their own bytes (FS level >= 1; wordcount checks its
/// own counts).
#[test]
fn fs_waf_runs_the_key_value_and_hadoop_workloads() {
    let Ok(()) = fuse_available(&["fusermount3"]).map_err(skip) else {
        return;
    };
    let rows = fs_waf_rows(&[
        "--configs",
        "f2fs:page,alfs:amf",
        "--workloads",
        "kv,dfsio,terasort,wordcount",
        "--fill",
        "0.2",
        "--kv-ops",
        "3000",
    ]);
    assert_eq!(rows.len(), 2 * 4, "{rows:?}");
    for r in &rows {
        assert_eq!(r["consistency"]["status"], "ok", "{r}");
        let fs_waf = r["fs_waf"].as_f64().unwrap();
        match r["workload"].as_str().unwrap() {
            "kv" => {
                assert!(fs_waf > 0.5 && fs_waf < 10.0, "{r}");
                assert!(
                    r["workload_info"]["keys_loaded"].as_u64().unwrap() > 100,
                    "{r}"
                );
            }
            _ => assert!((1.0..1.2).contains(&fs_waf), "{r}"),
        }
        if r["fs"] == "alfs" {
            assert_eq!(r["ftl_waf"].as_f64(), Some(1.0), "{r}");
        }
    }
}

/// `--postmark real` runs the Postmark rows with the postmark program (skipped with a message
/// where it is not installed: Debian package postmark).
#[test]
fn fs_waf_runs_the_real_postmark() {
    let Ok(()) = fuse_available(&["fusermount3", "postmark"]).map_err(skip) else {
        return;
    };
    let rows = fs_waf_rows(&[
        "--configs",
        "alfs:amf",
        "--workloads",
        "postmark-low",
        "--postmark",
        "real",
        "--postmark-low-files",
        "100",
        "--postmark-transactions",
        "300",
    ]);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(r["workload_info"]["postmark"], "real", "{r}");
    assert_eq!(r["consistency"]["status"], "ok", "{r}");
    // 100 files and 300 transactions of 500..10,000-byte creates and appends.
    let app = r["app_bytes"].as_u64().unwrap();
    assert!(app > 100 * 500 && app < 400 * 10_000, "{r}");
    assert_eq!(r["ftl_waf"].as_f64(), Some(1.0), "{r}");
}
