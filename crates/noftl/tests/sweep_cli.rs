//! `noftl sweep`: the local executor runs a plan's jobs into their directories and merges them;
//! a failing job is recorded and the sweep goes on; `--resume` runs only what is missing; the
//! Ray executor gives the same table (skipped, with the reason, where `ray` is not installed).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cli_support;

use std::path::Path;

use cli_support::{noftl, ray_or_skip};

fn smoke_plan() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sweeps/smoke.toml");
    root.to_str().unwrap().to_string()
}

fn csv_rows(path: &Path) -> Vec<Vec<String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(str::to_string).collect();
    let mut rows = vec![header];
    for rec in r.records() {
        rows.push(rec.unwrap().iter().map(str::to_string).collect());
    }
    rows
}

fn column(rows: &[Vec<String>], name: &str) -> Vec<String> {
    let i = rows[0].iter().position(|h| h == name).unwrap_or_else(|| {
        panic!("no column {name} in {:?}", rows[0]);
    });
    rows[1..].iter().map(|r| r[i].clone()).collect()
}

#[test]
fn the_smoke_plan_runs_every_job_and_merges_one_row_per_job() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    let (ok, _, err) = noftl(&[
        "sweep",
        &smoke_plan(),
        "--jobs",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let rows = csv_rows(&out.join("results.csv"));
    assert_eq!(rows.len(), 5, "{rows:?}");
    assert!(column(&rows, "status").iter().all(|s| s == "ok"));
    let mut targets = column(&rows, "param.target");
    targets.sort();
    assert_eq!(targets, ["dftl", "dftl", "page", "page"]);
    // Every job's measured WAF is there, and more spare means less amplification.
    let waf: Vec<f64> = column(&rows, "waf")
        .iter()
        .map(|w| w.parse().unwrap())
        .collect();
    assert!(waf.iter().all(|w| *w >= 1.0), "{waf:?}");

    // The merge alone reads the same files and writes the same table (invariant 3).
    let again = dir.path().join("again.csv");
    let (ok, _, err) = noftl(&[
        "sweep",
        "merge",
        out.to_str().unwrap(),
        "--csv",
        again.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_eq!(csv_rows(&again), rows);

    // A second sweep into the same directory is refused unless it resumes.
    let (ok, _, err) = noftl(&["sweep", &smoke_plan(), "--out", out.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("--resume"), "{err}");
    let (ok, _, err) = noftl(&[
        "sweep",
        &smoke_plan(),
        "--out",
        out.to_str().unwrap(),
        "--resume",
    ]);
    assert!(ok, "{err}");
    assert!(err.contains("4 of 4 jobs have results, 0 to run"), "{err}");
}

#[test]
fn a_failing_job_is_recorded_and_resume_runs_only_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    // bs 3000 parses but is refused when the job runs (not a multiple of 4 KiB).
    std::fs::write(
        &plan,
        r#"
        name = "fails"
        verb = "io"
        args = ["--preset", "tiny", "--target", "page", "--ops", "200"]
        [grid]
        "--bs" = ["4k", "3000"]
        "#,
    )
    .unwrap();
    let out = dir.path().join("o");
    let args = [
        "sweep",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let (ok, _, err) = noftl(&args);
    assert!(!ok, "a failed job makes the sweep fail");
    assert!(err.contains("1 of 2 jobs failed"), "{err}");
    let rows = csv_rows(&out.join("results.csv"));
    let mut status = column(&rows, "status");
    status.sort();
    assert_eq!(status, ["failed", "ok"]);

    // The failure's reason is kept with the job.
    let failed_dir = std::fs::read_dir(out.join("jobs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            std::fs::read_to_string(p.join("status.json"))
                .unwrap()
                .contains("\"failed\"")
        })
        .unwrap();
    let status: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(failed_dir.join("status.json")).unwrap())
            .unwrap();
    assert_ne!(status["exit_code"], 0);
    assert!(!status["error"].as_str().unwrap().is_empty());

    let mut resume = args.to_vec();
    resume.push("--resume");
    let (ok, _, err) = noftl(&resume);
    assert!(!ok);
    assert!(err.contains("1 of 2 jobs have results, 1 to run"), "{err}");
}

/// The status.json of every job of a sweep, by job id.
fn statuses(out: &Path) -> std::collections::BTreeMap<String, serde_json::Value> {
    std::fs::read_dir(out.join("jobs"))
        .unwrap()
        .filter_map(|e| {
            let dir = e.unwrap().path();
            let text = std::fs::read_to_string(dir.join("status.json")).ok()?;
            let id = dir.file_name().unwrap().to_str().unwrap().to_string();
            Some((id, serde_json::from_str(&text).unwrap()))
        })
        .collect()
}

#[test]
fn resume_leaves_finished_jobs_alone_and_reruns_an_interrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        r#"
        name = "resume"
        verb = "io"
        args = ["--preset", "tiny", "--ops", "200"]
        [grid]
        "--target" = ["page", "dftl"]
        "#,
    )
    .unwrap();
    let out = dir.path().join("o");
    let args = [
        "sweep",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let (ok, _, err) = noftl(&args);
    assert!(ok, "{err}");
    let first = statuses(&out);
    assert_eq!(first.len(), 2);
    // An interrupted sweep leaves the job in flight without its status.json (invariant 2).
    let (gone, kept) = {
        let mut ids = first.keys();
        (ids.next().unwrap().clone(), ids.next().unwrap().clone())
    };
    let kept_status = out.join("jobs").join(&kept).join("status.json");
    let kept_bytes = std::fs::read(&kept_status).unwrap();
    std::fs::remove_file(out.join("jobs").join(&gone).join("status.json")).unwrap();

    // The merge shows it as not run, with no metrics.
    let csv = dir.path().join("partial.csv");
    let (ok, _, err) = noftl(&[
        "sweep",
        "merge",
        out.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let rows = csv_rows(&csv);
    let job = column(&rows, "job");
    let status = column(&rows, "status");
    let waf = column(&rows, "waf");
    let g = job.iter().position(|j| *j == gone).unwrap();
    let k = job.iter().position(|j| *j == kept).unwrap();
    assert_eq!((status[g].as_str(), waf[g].as_str()), ("not run", ""));
    assert_eq!(status[k], "ok");
    assert!(!waf[k].is_empty());

    let mut resume = args.to_vec();
    resume.push("--resume");
    let (ok, _, err) = noftl(&resume);
    assert!(ok, "{err}");
    assert!(err.contains("1 of 2 jobs have results, 1 to run"), "{err}");
    assert_eq!(
        std::fs::read(&kept_status).unwrap(),
        kept_bytes,
        "a finished job is not run again"
    );
    assert_eq!(statuses(&out)[&gone]["status"], "ok");
    let rows = csv_rows(&out.join("results.csv"));
    assert!(column(&rows, "status").iter().all(|s| s == "ok"));
}

#[test]
fn a_job_past_its_timeout_is_killed_and_recorded_as_failed() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    // The plan's limit is generous; --timeout overrides it. 10^9 operations take far longer.
    std::fs::write(
        &plan,
        r#"
        name = "timeout"
        verb = "io"
        args = ["--preset", "tiny", "--target", "page"]
        timeout = "1h"
        [grid]
        "--ops" = ["200", "1000000000"]
        "#,
    )
    .unwrap();
    let out = dir.path().join("o");
    let started = std::time::Instant::now();
    let (ok, _, err) = noftl(&[
        "sweep",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--timeout",
        "2s",
    ]);
    assert!(!ok, "a timed-out job makes the sweep fail");
    assert!(err.contains("1 of 2 jobs failed"), "{err}");
    assert!(
        started.elapsed().as_secs() < 60,
        "the long job was not killed"
    );
    let st = statuses(&out);
    let (ok_jobs, failed): (Vec<_>, Vec<_>) = st.values().partition(|s| s["status"] == "ok");
    assert_eq!((ok_jobs.len(), failed.len()), (1, 1), "{st:?}");
    assert_eq!(failed[0]["error"], "timed out after 2 s (killed)");
    assert!(failed[0]["exit_code"].is_null());
    let wall = failed[0]["wall_seconds"].as_f64().unwrap();
    assert!((2.0..30.0).contains(&wall), "{wall}");
}

#[test]
fn a_plan_that_does_not_parse_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(&plan, "verb = \"io\"\nargs = [\"--targt\", \"page\"]\n").unwrap();
    let out = dir.path().join("o");
    let (ok, _, err) = noftl(&[
        "sweep",
        plan.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(err.contains("does not parse"), "{err}");
    assert!(!out.exists(), "nothing is created for a bad plan");
}

#[test]
fn the_ray_executor_gives_the_local_table() {
    let Some((_one, python)) = ray_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    let ray = dir.path().join("ray");
    let (ok, _, err) = noftl(&["sweep", &smoke_plan(), "--out", local.to_str().unwrap()]);
    assert!(ok, "{err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args(["sweep", &smoke_plan(), "--executor", "ray", "--out"])
        .arg(&ray)
        .env("NOFTL_PYTHON", &python)
        .env_remove("RAY_ADDRESS")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Same jobs, same results; only the wall time differs.
    let drop_wall = |rows: Vec<Vec<String>>| -> Vec<Vec<String>> {
        let i = rows[0].iter().position(|h| h == "wall_seconds").unwrap();
        rows.into_iter()
            .map(|mut r| {
                r.remove(i);
                r
            })
            .collect()
    };
    assert_eq!(
        drop_wall(csv_rows(&ray.join("results.csv"))),
        drop_wall(csv_rows(&local.join("results.csv")))
    );
}

#[test]
fn the_ray_executor_records_a_failed_and_a_timed_out_job_and_goes_on() {
    let Some((_one, python)) = ray_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    // bs 3000 is refused when the job runs; 10^9 operations outlast the timeout.
    std::fs::write(
        &plan,
        r#"
        name = "ray-fails"
        verb = "io"
        args = ["--preset", "tiny", "--target", "page"]
        timeout = "3s"
        [[cases]]
        label = "ok"
        "--ops" = "200"
        [[cases]]
        label = "refused"
        "--ops" = "200"
        "--bs" = "3000"
        [[cases]]
        label = "endless"
        "--ops" = "1000000000"
        "#,
    )
    .unwrap();
    let out = dir.path().join("o");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args([
            "sweep",
            plan.to_str().unwrap(),
            "--executor",
            "ray",
            "--out",
        ])
        .arg(&out)
        .env("NOFTL_PYTHON", &python)
        .env_remove("RAY_ADDRESS")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success(),
        "failed jobs make the sweep fail: {err}"
    );
    assert!(err.contains("2 of 3 jobs failed"), "{err}");
    let rows = csv_rows(&out.join("results.csv"));
    let by_label: std::collections::BTreeMap<String, String> = column(&rows, "label")
        .into_iter()
        .zip(column(&rows, "status"))
        .collect();
    assert_eq!(by_label["ok"], "ok");
    assert_eq!(by_label["refused"], "failed");
    assert_eq!(by_label["endless"], "failed");
    let st = statuses(&out);
    let errors: Vec<String> = st
        .values()
        .filter_map(|s| s["error"].as_str().map(str::to_string))
        .collect();
    assert!(
        errors.iter().any(|e| e == "timed out after 3 s (killed)"),
        "{errors:?}"
    );
    assert!(errors.iter().any(|e| e.contains("--bs")), "{errors:?}");
}

/// Runs `sh -c SCRIPT` (noftl as `$NOFTL`) for at most 30 s: (success, stderr), or `None` if it
/// was still running.
fn sh_briefly(script: &str) -> Option<(bool, String)> {
    let mut child = std::process::Command::new("sh")
        .args(["-c", script])
        .env("NOFTL", env!("CARGO_BIN_EXE_noftl"))
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Issue 32: `sweep PLAN --dry-run` on a 700-byte plan (7 flags x 10 values) grew past 8 GB and
/// aborted before its job limit was checked. Now the jobs are counted before anything is
/// expanded, and the plan is refused at once (here under a 2 GB address-space limit).
#[test]
fn a_plan_with_too_many_jobs_is_refused_before_it_is_expanded() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("big.toml");
    let mut text = String::from("verb = \"io\"\nargs = [\"--preset\", \"tiny\"]\n[grid]\n");
    for flag in [
        "--ops",
        "--qd",
        "--seed",
        "--bs",
        "--cache",
        "--op",
        "--controller-mhz",
    ] {
        let values: Vec<String> = (1..=10).map(|v| format!("\"{v}\"")).collect();
        text.push_str(&format!("\"{flag}\" = [{}]\n", values.join(", ")));
    }
    std::fs::write(&plan, &text).unwrap();
    assert!(text.len() < 1000, "{}", text.len());
    let script = format!(
        "ulimit -v 2000000; exec \"$NOFTL\" sweep '{}' --dry-run",
        plan.display()
    );
    let (ok, err) = sh_briefly(&script).expect("refused at once");
    assert!(!ok);
    assert!(
        err.contains("expands to 10000000 jobs") && err.contains("at most 100000"),
        "{err}"
    );
}

/// Issue 32: a plan could name `dashboard`, `mount` or `fsck`, whose jobs always fail (or never
/// end). Plans run experiment verbs only, refused before anything runs.
#[test]
fn a_plan_of_a_verb_that_is_not_an_experiment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("p.toml");
    for verb in ["dashboard", "mount", "fsck", "plot", "sweep", "serve"] {
        std::fs::write(&plan, format!("verb = \"{verb}\"\n")).unwrap();
        let (ok, _, err) = noftl(&["sweep", plan.to_str().unwrap(), "--dry-run"]);
        assert!(
            !ok && err.contains("cannot run in a sweep"),
            "{verb}: {err}"
        );
    }
}

/// A sweep's result directory as `sweep merge` reads it: one job with an ok status and a
/// result.
fn tiny_sweep(out: &Path) {
    std::fs::create_dir_all(out.join("jobs/a")).unwrap();
    std::fs::write(
        out.join("jobs.json"),
        r#"{"name":"t","jobs":[{"id":"a","label":"","params":{"op":"7%"},"argv":["io"],"json_on_stdout":true,"memory_bytes":1}]}"#,
    )
    .unwrap();
    std::fs::write(
        out.join("jobs/a/status.json"),
        r#"{"id":"a","status":"ok","exit_code":0,"wall_seconds":1.0,"error":null}"#,
    )
    .unwrap();
    std::fs::write(out.join("jobs/a/result.json"), r#"{"waf":2.5}"#).unwrap();
}

/// Issue 32: `sweep merge DIR --csv FIFO` hung, and `--csv SYMLINK` wrote over whatever the
/// link named. Now the table goes through the output rule: a FIFO is refused at once, a link
/// is resolved and its target judged: never one of the sweep's own files; a regular file
/// elsewhere is written and the link kept.
#[test]
fn sweep_merge_writes_its_table_through_the_output_rule() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    tiny_sweep(&out);
    let fifo = dir.path().join("fifo.csv");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let merge = |csv: &Path| {
        sh_briefly(&format!(
            "exec \"$NOFTL\" sweep merge '{}' --csv '{}'",
            out.display(),
            csv.display()
        ))
        .expect("merge ends")
    };
    let (ok, err) = merge(&fifo);
    assert!(!ok && err.contains("a FIFO"), "{err}");
    let jobs_json = std::fs::read(out.join("jobs.json")).unwrap();
    for (name, target) in [
        ("to-jobs.csv", out.join("jobs.json")),
        ("to-result.csv", out.join("jobs/a/result.json")),
    ] {
        let link = dir.path().join(name);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let (ok, err) = merge(&link);
        assert!(!ok && err.contains("same file as the sweep's"), "{err}");
    }
    assert_eq!(std::fs::read(out.join("jobs.json")).unwrap(), jobs_json);
    assert_eq!(
        std::fs::read_to_string(out.join("jobs/a/result.json")).unwrap(),
        r#"{"waf":2.5}"#
    );
    let table = dir.path().join("table.csv");
    std::fs::write(&table, "old").unwrap();
    let link = dir.path().join("link.csv");
    std::os::unix::fs::symlink(&table, &link).unwrap();
    let (ok, err) = merge(&link);
    assert!(ok, "{err}");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(column(&csv_rows(&table), "waf"), ["2.5"]);
}

/// Issue 32: `sweep --out` wrote among the files of a non-empty directory without a word. Now
/// such a directory is refused unless `--force` (an earlier sweep there: `--resume`).
#[test]
fn a_sweep_out_directory_that_holds_other_files_is_refused_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("results.csv"), "mine").unwrap();
    let plan = dir.path().join("p.toml");
    std::fs::write(
        &plan,
        "verb = \"io\"\nargs = [\"--target\", \"page\", \"--preset\", \"tiny\", \"--ops\", \"10\"]\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "sweep",
            plan.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        noftl(&args)
    };
    let (ok, _, err) = run(&[]);
    assert!(
        !ok && err.contains("is not empty") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("results.csv")).unwrap(),
        "mine"
    );
    assert!(!out.join("jobs.json").exists(), "nothing written");
    let (ok, _, err) = run(&["--resume"]);
    assert!(
        !ok && err.contains("is not empty"),
        "no sweep to resume: {err}"
    );
    let (ok, _, err) = run(&["--force"]);
    assert!(ok, "{err}");
    assert_eq!(
        column(&csv_rows(&out.join("results.csv")), "status"),
        ["ok"]
    );
}
