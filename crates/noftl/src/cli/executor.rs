//! `--executor local|ray` for the verbs whose work is independent jobs: `sweep` (its plan's
//! jobs), `reproduce` (its runs) and `compare` (its rows). The jobs and the merge of their
//! outputs are the experiment's (`lab::experiments::reproduce::jobs`, `compare::jobs`); this
//! module only carries them to Ray and back.
//!
//! On Ray, each job is one task of the sweep's driver (`scripts/sweep_ray.py`, started by
//! `sweep::run_ray`), which runs this binary on a worker as `noftl run-job SPEC --out FILE`
//! (a hidden verb): SPEC is the verb's whole command line and the job, as JSON; FILE the job's
//! output, as JSON, that the driver brings back. The worker parses the command line with the
//! CLI's own parser (so a job is a run of the very spec the user gave), runs its one job and
//! writes the output; the verb merges the outputs as the local executor does, into the same
//! result.
//!
//! The binary: the driver checks, before any job, that every node of the cluster has an
//! executable noftl at this binary's path (or at NOFTL_BIN on the node) with this binary's
//! version, and fails with the nodes that do not. Files the command line names (a `--cpu`
//! profile, a `--config`) must be at the same paths on the nodes.
//!
//! Invariant: an output is read back exactly as written (serde_json with float_roundtrip), so
//! the merged result is byte for byte the local executor's.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::sweep;

pub use super::sweep::Executor;

thread_local! {
    /// The command line this thread runs (without the program name): what a job's worker parses.
    static ARGV: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// Records the command line this thread runs (main, and the in-process runs of the dashboard).
pub fn set_argv(argv: &[String]) {
    ARGV.with(|a| *a.borrow_mut() = argv.to_vec());
}

/// A job as its worker gets it.
#[derive(Debug, Serialize, Deserialize)]
pub struct JobSpec {
    /// The verb's whole command line, as the user gave it (without the program name).
    pub argv: Vec<String>,
    /// The experiment's job (`RunJob`, `RowJob`).
    pub job: Json,
}

/// `noftl run-job`: one job of a `reproduce` or `compare` run on Ray (not run by hand).
#[derive(Debug, Args)]
pub struct RunJobArgs {
    /// The job, as JSON: {"argv": [the verb's command line], "job": {...}}.
    pub spec: String,
    /// Where the job's output goes (JSON).
    #[arg(long)]
    pub out: PathBuf,
}

impl RunJobArgs {
    pub fn job_spec(&self) -> anyhow::Result<JobSpec> {
        serde_json::from_str(&self.spec).context("run-job: the job spec is not JSON of a job")
    }

    /// Writes the job's output.
    pub fn write(&self, output: &impl Serialize) -> anyhow::Result<()> {
        let bytes = serde_json::to_vec(output)?;
        std::fs::write(&self.out, bytes)
            .with_context(|| format!("cannot write {}", self.out.display()))
    }
}

/// One job to run on Ray: the experiment's job, a label for the progress lines, the RAM it
/// takes (Ray's `memory` resource).
pub struct RayJob<J> {
    pub job: J,
    pub label: String,
    pub memory_bytes: u64,
}

/// Runs `jobs` as Ray tasks (the sweep's driver) and returns each job's output, in the order
/// of `jobs`. A job that failed fails the whole with its standard error.
pub fn run_on_ray<J: Serialize + Clone, O: DeserializeOwned>(
    verb: &str,
    jobs: &[RayJob<J>],
) -> anyhow::Result<Vec<(J, O)>> {
    let python = sweep::ray_python()?;
    let argv = ARGV.with(|a| a.borrow().clone());
    if argv.is_empty() {
        bail!("{verb} --executor ray: no command line recorded for the jobs (a bug)");
    }
    let dir = tempfile::Builder::new().prefix("noftl-ray-").tempdir()?;
    std::fs::create_dir_all(dir.path().join("jobs"))?;
    let mut todo = Vec::with_capacity(jobs.len());
    for (i, j) in jobs.iter().enumerate() {
        let spec = JobSpec {
            argv: argv.clone(),
            job: serde_json::to_value(&j.job)?,
        };
        todo.push(sweep::Job {
            id: format!("{i:03}"),
            label: j.label.clone(),
            params: Default::default(),
            argv: vec![
                "run-job".into(),
                serde_json::to_string(&spec)?,
                "--out".into(),
                "{out}/result.json".into(),
            ],
            json_on_stdout: false,
            memory_bytes: j.memory_bytes,
        });
    }
    eprintln!("{verb}: {} jobs on Ray ...", todo.len());
    sweep::run_ray_with(&python, dir.path(), &todo, None)?;
    collect(verb, dir.path(), jobs, &todo)
}

/// Each job's output from its directory (`sweep`'s layout: `jobs/ID/status.json`,
/// `result.json`, `stderr.txt`); the first failed job is the error, with its standard error.
fn collect<J: Clone, O: DeserializeOwned>(
    verb: &str,
    dir: &Path,
    jobs: &[RayJob<J>],
    todo: &[sweep::Job],
) -> anyhow::Result<Vec<(J, O)>> {
    let mut out = Vec::with_capacity(jobs.len());
    for (j, t) in jobs.iter().zip(todo) {
        let jd = dir.join("jobs").join(&t.id);
        let status: Json = std::fs::read(jd.join("status.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Json::Null);
        if status["status"] != "ok" {
            let stderr = std::fs::read_to_string(jd.join("stderr.txt")).unwrap_or_default();
            let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
            let tail = lines[lines.len().saturating_sub(20)..].join("\n  ");
            bail!(
                "{verb} --executor ray: {} failed ({}); its standard error:\n  {}",
                j.label,
                status["error"].as_str().unwrap_or("it did not run"),
                if tail.is_empty() { "(empty)" } else { &tail }
            );
        }
        let bytes = std::fs::read(jd.join("result.json"))
            .with_context(|| format!("{}: no output", j.label))?;
        let o: O = serde_json::from_slice(&bytes)
            .with_context(|| format!("{}: the output is not the job's", j.label))?;
        out.push((j.job.clone(), o));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_executor_is_refused_by_name() {
        assert_eq!("ray".parse::<Executor>(), Ok(Executor::Ray));
        let e = "slurm".parse::<Executor>().unwrap_err();
        assert!(e.contains("unknown executor 'slurm' (local, ray)"), "{e}");
    }

    #[test]
    fn a_failed_job_is_reported_with_its_standard_error() {
        let dir = tempfile::tempdir().unwrap();
        let jd = dir.path().join("jobs/000");
        std::fs::create_dir_all(&jd).unwrap();
        std::fs::write(
            jd.join("stderr.txt"),
            "loading ...\nerror: the device is full\n",
        )
        .unwrap();
        std::fs::write(
            jd.join("status.json"),
            r#"{"id": "000", "status": "failed", "exit_code": 1, "wall_seconds": 1.0, "error": "error: the device is full"}"#,
        )
        .unwrap();
        let jobs = [RayJob {
            job: 7u32,
            label: "tpcb scale 2".into(),
            memory_bytes: 1,
        }];
        let todo = [sweep::Job {
            id: "000".into(),
            label: "tpcb scale 2".into(),
            params: Default::default(),
            argv: vec![],
            json_on_stdout: false,
            memory_bytes: 1,
        }];
        let e = collect::<u32, u32>("reproduce", dir.path(), &jobs, &todo)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tpcb scale 2 failed"), "{e}");
        assert!(
            e.contains("loading ...") && e.contains("the device is full"),
            "{e}"
        );
        // A job that left nothing (its worker lost) is a failure too, not a missing row.
        std::fs::remove_file(jd.join("status.json")).unwrap();
        let e = collect::<u32, u32>("reproduce", dir.path(), &jobs, &todo)
            .unwrap_err()
            .to_string();
        assert!(e.contains("it did not run"), "{e}");
    }
}
