//! `noftl sweep`: many runs of one verb over a grid of parameters, in parallel on this machine
//! (the local executor) or on a Ray cluster (`scripts/sweep_ray.py`), merged into one table.
//!
//! A *plan* (TOML, format in `docs/noftl.md` and `examples/sweeps/`) names a verb, fixed
//! arguments, a grid of flag values, optional explicit cases and seeds. The planner expands it
//! into jobs: cases x grid (cartesian, keys in sorted order) x seeds. Each job has
//! - its exact argument vector (the verb's own flags; the sweep adds only the JSON flag),
//! - a stable id: FNV-1a 64 of the argument vector joined by NUL bytes, in hex, so the same
//!   job has the same id in every sweep, on every machine, whatever the plan's order,
//! - its own directory `OUT/jobs/ID/`: `job.json` (id, label, parameters, command line),
//!   `result.json` (the verb's JSON result; `result-*.json` when the verb writes several),
//!   `stderr.txt`, and `status.json` written last (status, exit code, wall seconds, error).
//!
//! Every job's arguments are parsed with the CLI's own parser before any job starts, so a typo
//! in a plan costs nothing. The parser comes from the top of the command line, handed in as a
//! `launch::Launcher` (`cli::launcher()`) with what the sweep reads of a parsed job (its device
//! arguments): this module never names `Cli` or `Command`. Runs are deterministic from their
//! arguments (virtual time, seeded randomness), so a job whose `status.json` says `ok` never
//! needs to run again: `--resume` skips it. A failed job is recorded with its error and the sweep goes on; the exit status is
//! non-zero when any job failed.
//!
//! Wall time: a plan's `timeout` (or `--timeout`) bounds each job's wall time; a job still
//! running then is killed and recorded as failed ("timed out"), so one job that never ends (a
//! configuration the emulated FTL cannot make progress in) cannot stall the sweep.
//!
//! Memory: each job's estimate is the RAM its emulated device keeps (data and OOB of every flash
//! page: the dominant allocation of every verb) or the plan's `memory`; the local executor
//! starts a job only while the estimates of the running jobs fit in 90% of the memory available
//! at start, and always lets one job run.
//!
//! Invariants:
//! 1. Job ids are a function of the argument vector only; two jobs of one plan never share one
//!    (the planner refuses such a plan).
//! 2. `status.json` is written after every other file of its job, by rename, so a job with a
//!    `status.json` is complete, and an interrupted sweep leaves none for the job in flight.
//! 3. The merge reads only files, never a running sweep's memory: the table from `sweep merge`
//!    equals the one written at the end of the sweep.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::launch::Launcher;

/// The Ray driver, written next to the jobs when `--executor ray` runs.
const RAY_DRIVER: &str = include_str!("../../../../scripts/sweep_ray.py");
/// Placeholder for a job's result directory in its argument vector (where results are files).
const OUT_DIR: &str = "{out}";

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub command: Option<SweepCommand>,
    /// The plan (TOML): verb, arguments, grid, cases, seeds. See examples/sweeps/.
    #[arg(required = true)]
    pub plan: Option<PathBuf>,
    /// Jobs at once [default: the number of cores]; fewer when their memory does not fit.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// local (this machine) | ray (a Ray cluster: RAY_ADDRESS, or a local Ray instance; this
    /// noftl binary at the same path on every node, or NOFTL_BIN there: checked before any job).
    #[arg(long, default_value = "local")]
    pub executor: Executor,
    /// Result directory [default: sweep-NAME next to the current directory's files].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip jobs whose results exist (status ok) in --out.
    #[arg(long)]
    pub resume: bool,
    /// Write into an --out directory that is not empty (or holds an earlier sweep) anyway.
    #[arg(long)]
    pub force: bool,
    /// Print the jobs (id and command line) and run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Wall-time limit of each job (e.g. 10m, 90s), over the plan's `timeout`; a job still
    /// running then is killed and recorded as failed.
    #[arg(long)]
    pub timeout: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum SweepCommand {
    /// Merges a sweep's results into one table: one row per job, every parameter and every
    /// scalar metric of its result as columns.
    Merge {
        /// The sweep's result directory.
        dir: PathBuf,
        /// The CSV file to write [default: DIR/results.csv].
        #[arg(long)]
        csv: Option<PathBuf>,
    },
}

/// Where the jobs run (`--executor` of sweep, reproduce and compare: `executor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Executor {
    /// In this process (reproduce, compare) or in processes on this machine (sweep).
    Local,
    /// Ray: the cluster RAY_ADDRESS names, or a local Ray instance.
    Ray,
}

impl std::str::FromStr for Executor {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "local" => Ok(Executor::Local),
            "ray" => Ok(Executor::Ray),
            other => Err(format!("unknown executor '{other}' (local, ray)")),
        }
    }
}

/// A plan as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanFile {
    /// Names the default result directory.
    name: Option<String>,
    /// The verb and its sub-verb, as on the command line: "io", "bench tpcb", "compare".
    verb: String,
    #[serde(default)]
    args: Vec<String>,
    /// One job per seed (times the grid), passed with `seed_flag`.
    #[serde(default)]
    seeds: Vec<u64>,
    /// The flag that takes a seed [default: --seed; crashtest: --first-seed].
    seed_flag: Option<String>,
    /// Flag -> its alternatives; the jobs are the cartesian product.
    #[serde(default)]
    grid: BTreeMap<String, Vec<toml::Value>>,
    /// Explicit parameter sets (flag -> value; `label` names the case), each crossed with the grid.
    #[serde(default)]
    cases: Vec<BTreeMap<String, toml::Value>>,
    /// Per-job memory estimate (e.g. "8GiB") where the device size alone understates it.
    memory: Option<String>,
    /// Per-job wall-time limit (e.g. "10m"); a job still running then is killed (failed).
    timeout: Option<String>,
}

/// One job of a sweep.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Job {
    pub id: String,
    pub label: String,
    /// The parameters that vary, flag (without dashes) -> value as passed.
    pub params: BTreeMap<String, String>,
    /// The verb's arguments, `{out}` standing for the job's directory.
    pub argv: Vec<String>,
    /// Whether the result comes on standard output (verbs with a boolean `--json`).
    pub json_on_stdout: bool,
    pub memory_bytes: u64,
}

/// The expanded plan.
#[derive(Debug, Serialize, Deserialize)]
pub struct Plan {
    pub name: String,
    /// Wall-time limit of each job, seconds (the plan's `timeout`); not part of any job's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
    pub jobs: Vec<Job>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Status {
    id: String,
    status: String,
    exit_code: Option<i32>,
    wall_seconds: f64,
    error: Option<String>,
}

pub fn run(args: SweepArgs, launch: &Launcher) -> anyhow::Result<()> {
    if let Some(SweepCommand::Merge { dir, csv }) = &args.command {
        let csv = csv.clone().unwrap_or_else(|| dir.join("results.csv"));
        let rows = merge(dir, &csv)?;
        eprintln!("{rows} jobs merged into {}", csv.display());
        return Ok(());
    }
    let plan_path = args.plan.as_ref().context("a plan file is required")?;
    lab::output::protect("the plan", plan_path);
    let text = std::fs::read_to_string(plan_path)
        .with_context(|| format!("cannot read {}", plan_path.display()))?;
    let mut plan =
        expand_with(&text, launch).with_context(|| format!("in {}", plan_path.display()))?;
    if let Some(t) = &args.timeout {
        plan.timeout_seconds = Some(parse_timeout(t).context("--timeout")?);
    }
    if args.dry_run {
        for j in &plan.jobs {
            println!("{}  noftl {}", j.id, shell_words(&j.argv));
        }
        eprintln!("{} jobs", plan.jobs.len());
        return Ok(());
    }
    let jobs = match args.jobs {
        Some(0) => bail!("--jobs 0 runs nothing: give 1 or more"),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("sweep-{}", plan.name)));
    prepare_out(&out, &plan, args.resume, args.force)?;
    let todo: Vec<Job> = plan
        .jobs
        .iter()
        .filter(|j| !(args.resume && job_done(&out, &j.id)))
        .cloned()
        .collect();
    if todo.len() < plan.jobs.len() {
        eprintln!(
            "resume: {} of {} jobs have results, {} to run",
            plan.jobs.len() - todo.len(),
            plan.jobs.len(),
            todo.len()
        );
    }
    let started = Instant::now();
    match args.executor {
        Executor::Local => run_local(&out, &todo, jobs, plan.timeout_seconds)?,
        Executor::Ray => run_ray(&out, &todo, plan.timeout_seconds)?,
    }
    let csv = out.join("results.csv");
    merge(&out, &csv)?;
    let failed: Vec<&str> = plan
        .jobs
        .iter()
        .filter(|j| !job_done(&out, &j.id))
        .map(|j| j.id.as_str())
        .collect();
    eprintln!(
        "{} jobs in {:.1} s; table: {}",
        todo.len(),
        started.elapsed().as_secs_f64(),
        csv.display()
    );
    if !failed.is_empty() {
        bail!(
            "{} of {} jobs failed ({}); their errors are in {}/jobs/ID/status.json",
            failed.len(),
            plan.jobs.len(),
            failed.join(", "),
            out.display()
        );
    }
    Ok(())
}

/// `expand_with` the CLI's own launcher (`cli::launcher()`), for the tests.
#[cfg(test)]
pub fn expand(text: &str) -> anyhow::Result<Plan> {
    expand_with(text, &super::launcher())
}

/// Expands a plan's text into its jobs, each parsed by the CLI's parser, `launch.parse`
/// (invariant 1).
pub fn expand_with(text: &str, launch: &Launcher) -> anyhow::Result<Plan> {
    let file: PlanFile = toml::from_str(text).context("not a sweep plan")?;
    let verb: Vec<String> = file.verb.split_whitespace().map(str::to_string).collect();
    let Some(first) = verb.first() else {
        bail!("`verb` is empty ({})", EXPERIMENT_VERBS.join(", "));
    };
    let named = verb.join(" ");
    if !EXPERIMENT_VERBS.contains(&named.as_str()) {
        bail!(
            "`{named}` cannot run in a sweep: a plan runs an experiment, a verb that ends with a JSON result ({})",
            EXPERIMENT_VERBS.join(", ")
        );
    }
    if file.args.iter().any(|a| a == "--json") || file.grid.contains_key("--json") {
        bail!("leave `--json` out of the plan: the sweep adds it to collect each job's result");
    }
    let json_on_stdout = matches!(first.as_str(), "io" | "crashtest");
    let seed_flag = file.seed_flag.clone().unwrap_or_else(|| {
        if first == "crashtest" {
            "--first-seed".into()
        } else {
            "--seed".into()
        }
    });
    let timeout_seconds = file
        .timeout
        .as_deref()
        .map(parse_timeout)
        .transpose()
        .context("timeout")?;
    let memory_override = file
        .memory
        .as_deref()
        .map(super::common::parse_size)
        .transpose()
        .map_err(|e| anyhow::anyhow!("memory: {e}"))?;

    // cases x grid x seeds, each a list of (flag, value) in a fixed order.
    let cases: Vec<BTreeMap<String, toml::Value>> = if file.cases.is_empty() {
        vec![BTreeMap::new()]
    } else {
        file.cases.clone()
    };
    let grid: Vec<(&String, &Vec<toml::Value>)> = file.grid.iter().collect();
    if let Some((flag, _)) = grid.iter().find(|(_, values)| values.is_empty()) {
        bail!("grid `{flag}` has no values");
    }
    let seeds: Vec<Option<u64>> = if file.seeds.is_empty() {
        vec![None]
    } else {
        file.seeds.iter().copied().map(Some).collect()
    };
    // Counted before anything is expanded: 7 flags of 10 values in a 700-byte plan are 10^7
    // jobs, which grew past 8 GB before a count of the expanded list was ever compared.
    let count = job_count(cases.len(), &grid, seeds.len())?;
    let grid_points = grid.iter().map(|(_, v)| v.len()).product::<usize>();

    let mut jobs = Vec::with_capacity(count);
    let mut ids = HashSet::with_capacity(count);
    for case in &cases {
        let label = match case.get("label") {
            Some(toml::Value::String(s)) => s.clone(),
            Some(other) => bail!("case label {other} is not a string"),
            None => String::new(),
        };
        for point in (0..grid_points).map(|i| grid_point(&grid, i)) {
            for seed in &seeds {
                let mut params = BTreeMap::new();
                let mut argv = verb.clone();
                argv.extend(file.args.iter().cloned());
                let case_params = case.iter().filter(|(k, _)| k.as_str() != "label");
                for (flag, value) in case_params.chain(point.iter().copied()) {
                    push_param(&mut argv, &mut params, flag, value)?;
                }
                if let Some(s) = seed {
                    push_param(
                        &mut argv,
                        &mut params,
                        &seed_flag,
                        &toml::Value::Integer(*s as i64),
                    )?;
                }
                let memory_bytes = match memory_override {
                    Some(m) => m,
                    None => estimate_memory_bytes(&argv, launch)?,
                };
                let id = job_id(&argv);
                if !ids.insert(id.clone()) {
                    bail!(
                        "the plan has the same job twice: noftl {}",
                        shell_words(&argv)
                    );
                }
                if json_on_stdout {
                    argv.push("--json".into());
                } else {
                    argv.extend(["--json".into(), format!("{OUT_DIR}/result.json")]);
                }
                jobs.push(Job {
                    id,
                    label: label.clone(),
                    params,
                    argv,
                    json_on_stdout,
                    memory_bytes,
                });
            }
        }
    }
    let name = file.name.unwrap_or_else(|| verb.join("-"));
    if name.is_empty() || name.contains(['/', '\\']) {
        bail!("plan name '{name}' cannot name a directory");
    }
    Ok(Plan {
        name,
        timeout_seconds,
        jobs,
    })
}

/// The verbs a plan may run: the experiments, which end with a JSON result. Servers (`serve`,
/// `mount`, `dashboard`) never end by themselves, `fsck` checks an image rather than measuring,
/// and a sweep inside a sweep multiplies what the limit below bounds.
const EXPERIMENT_VERBS: [&str; 12] = [
    "io",
    "bench tpcb",
    "bench tatp",
    "bench tpcc",
    "bench tpch",
    "compare",
    "crashtest",
    "iaa compare",
    "ipa compare",
    "ipa advise",
    "fs bench",
    "fs waf",
];

/// The most jobs a plan may have: each is parsed and sized before any runs and kept in
/// jobs.json, about a kilobyte apiece, so a plan past this is better split.
const MAX_JOBS: usize = 100_000;

/// cases x grid points x seeds, refused past `MAX_JOBS` (or past what a `usize` counts).
fn job_count(
    cases: usize,
    grid: &[(&String, &Vec<toml::Value>)],
    seeds: usize,
) -> anyhow::Result<usize> {
    let count = grid
        .iter()
        .try_fold(cases, |n, (_, values)| n.checked_mul(values.len()))
        .and_then(|n| n.checked_mul(seeds));
    match count {
        Some(n) if n <= MAX_JOBS => Ok(n),
        Some(n) => bail!("the plan expands to {n} jobs (cases x grid values x seeds); split it (at most {MAX_JOBS})"),
        None => bail!("the plan expands to more jobs than can be counted (cases x grid values x seeds); split it (at most {MAX_JOBS})"),
    }
}

/// The `i`-th point of the grid (its first flag varying slowest): one value per flag.
fn grid_point<'a>(
    grid: &[(&'a String, &'a Vec<toml::Value>)],
    mut i: usize,
) -> Vec<(&'a String, &'a toml::Value)> {
    let mut point: Vec<(&String, &toml::Value)> = grid
        .iter()
        .rev()
        .map(|&(flag, values)| {
            let v = &values[i % values.len()];
            i /= values.len();
            (flag, v)
        })
        .collect();
    point.reverse();
    point
}

/// A job's wall-time limit in seconds, from "90s", "10m", "1h".
fn parse_timeout(s: &str) -> anyhow::Result<f64> {
    Ok(lab::units::parse_duration_ns(s)? as f64 / 1e9)
}

fn push_param(
    argv: &mut Vec<String>,
    params: &mut BTreeMap<String, String>,
    flag: &str,
    value: &toml::Value,
) -> anyhow::Result<()> {
    if !flag.starts_with("--") {
        bail!("parameter '{flag}' is not a long flag (write it as --{flag})");
    }
    let key = flag.trim_start_matches('-').to_string();
    let scalar = |v: &toml::Value| -> anyhow::Result<String> {
        Ok(match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            other => bail!("{flag} = {other}: expected a string or a number"),
        })
    };
    match value {
        toml::Value::Boolean(true) => {
            argv.push(flag.to_string());
            params.insert(key, "true".into());
        }
        toml::Value::Boolean(false) => {
            params.insert(key, "false".into());
        }
        toml::Value::Array(items) => {
            let mut shown = Vec::with_capacity(items.len());
            for item in items {
                let s = scalar(item)?;
                argv.extend([flag.to_string(), s.clone()]);
                shown.push(s);
            }
            params.insert(key, shown.join(";"));
        }
        v => {
            let s = scalar(v)?;
            argv.extend([flag.to_string(), s.clone()]);
            params.insert(key, s);
        }
    }
    Ok(())
}

/// FNV-1a 64 of the argument vector, NUL-separated (invariant 1).
fn job_id(argv: &[String]) -> String {
    let mut h = fnv::FnvHasher::default();
    for a in argv {
        h.write(a.as_bytes());
        h.write(&[0]);
    }
    format!("{:016x}", h.finish())
}

/// Parses a job's arguments with the CLI's parser (a bad plan fails before any job runs) and
/// estimates its memory: the RAM its emulated device keeps.
fn estimate_memory_bytes(argv: &[String], launch: &Launcher) -> anyhow::Result<u64> {
    let job = (launch.parse)(argv).map_err(|e| {
        anyhow::anyhow!(
            "job `noftl {}` does not parse:\n{}",
            shell_words(argv),
            e.render()
        )
    })?;
    let Some(device) = (launch.device)(&job) else {
        // Verbs that size their own devices (compare, crashtest): a floor; plans state more
        // with `memory` where a job needs it.
        return Ok(256 << 20);
    };
    let cfg = device
        .load()
        .with_context(|| format!("job `noftl {}`", shell_words(argv)))?;
    let g = &cfg.geometry;
    let per_page = u64::from(g.page_size_bytes) + u64::from(g.oob_size_bytes) + 16;
    Ok(g.pages().saturating_mul(per_page).max(64 << 20))
}

fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$;&|<>*?%".contains(c))
            {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn job_dir(out: &Path, id: &str) -> PathBuf {
    out.join("jobs").join(id)
}

fn job_done(out: &Path, id: &str) -> bool {
    std::fs::read(job_dir(out, id).join("status.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Status>(&b).ok())
        .is_some_and(|s| s.status == "ok")
}

/// Creates the result directory and writes the expanded plan; refuses to mix two sweeps'
/// results unless resuming, and to write among other files unless forced (the output rule).
fn prepare_out(out: &Path, plan: &Plan, resume: bool, force: bool) -> anyhow::Result<()> {
    let jobs_file = out.join("jobs.json");
    let earlier = jobs_file.exists();
    if earlier && !resume && !force {
        bail!(
            "{} holds an earlier sweep's results: add --resume to continue it, --force to run over it, or choose another --out",
            out.display()
        );
    }
    if !(earlier && resume) {
        lab::output::check_results_dir("--out", out, force)?;
    }
    std::fs::create_dir_all(out.join("jobs"))
        .with_context(|| format!("cannot create {}", out.display()))?;
    write_atomic(&jobs_file, &serde_json::to_vec_pretty(plan)?)?;
    Ok(())
}

fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    Ok(lab::output::write_atomic(path, bytes)?)
}

/// Runs `todo` with up to `jobs` children at once, within the memory budget.
fn run_local(
    out: &Path,
    todo: &[Job],
    jobs: usize,
    timeout_seconds: Option<f64>,
) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find the noftl binary")?;
    let budget = lab::limits::memory_budget_bytes().unwrap_or(u64::MAX);
    let queue = Mutex::new(todo.iter().collect::<VecDeque<&Job>>());
    // (memory of the running jobs, number running)
    let running = (Mutex::new((0u64, 0usize)), Condvar::new());
    let pb = lab::progress::phase("sweep", todo.len() as u64, "jobs");
    let started = std::time::Instant::now();
    let done = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..jobs.min(todo.len()).max(1) {
            s.spawn(|| loop {
                let Some(job) = queue.lock().expect("queue").pop_front() else {
                    return;
                };
                {
                    let (lock, cv) = &running;
                    let mut r = lock.lock().expect("budget");
                    while r.1 > 0 && r.0.saturating_add(job.memory_bytes) > budget {
                        r = cv.wait(r).expect("budget");
                    }
                    r.0 += job.memory_bytes;
                    r.1 += 1;
                }
                let status = run_job(&exe, out, job, timeout_seconds);
                {
                    let (lock, cv) = &running;
                    let mut r = lock.lock().expect("budget");
                    r.0 -= job.memory_bytes;
                    r.1 -= 1;
                    cv.notify_all();
                }
                let line = match status.error.as_deref() {
                    None => format!("job {} ok in {:.1} s", job.id, status.wall_seconds),
                    Some(e) => format!("job {} failed: {e}", job.id),
                };
                pb.inc(1);
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if !super::progress::drawing(false) {
                    // Not a terminal (a log file, CI): one line per job instead of the bar.
                    let elapsed = started.elapsed().as_secs_f64();
                    let eta = elapsed / n as f64 * (todo.len() as u64 - n) as f64;
                    lab::progress::note(&format!(
                        "[{n}/{}] {line} ({elapsed:.0} s elapsed, ETA {eta:.0} s)",
                        todo.len()
                    ));
                } else if status.status != "ok" {
                    lab::progress::note(&line);
                }
            });
        }
    });
    pb.finish_and_clear();
    Ok(())
}

/// How a job's child process ended.
enum Ended {
    /// It exited (the code; none when killed by a signal).
    Exited(Option<i32>),
    /// It ran past the timeout and was killed.
    TimedOut(f64),
}

/// Runs one job as a child process and records its status last (invariant 2).
fn run_job(exe: &Path, out: &Path, job: &Job, timeout_seconds: Option<f64>) -> Status {
    let dir = job_dir(out, &job.id);
    let started = Instant::now();
    let result = (|| -> anyhow::Result<Ended> {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("cannot clear {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir)?;
        let job_json = serde_json::to_vec_pretty(job)?;
        write_atomic(&dir.join("job.json"), &job_json)?;
        let dir_str = dir.to_str().context("result directory is not UTF-8")?;
        let argv: Vec<String> = job
            .argv
            .iter()
            .map(|a| a.replace(OUT_DIR, dir_str))
            .collect();
        let stdout_path = if job.json_on_stdout {
            dir.join("result.json.tmp")
        } else {
            dir.join("stdout.txt")
        };
        let mut child = Process::new(exe)
            .args(&argv)
            .stdin(Stdio::null())
            // Streams cannot be renamed into place: created new in the fresh job directory.
            .stdout(lab::output::create_fresh(&stdout_path)?)
            .stderr(lab::output::create_fresh(&dir.join("stderr.txt"))?)
            .spawn()
            .with_context(|| format!("cannot start {}", exe.display()))?;
        let exit = match timeout_seconds {
            None => child.wait()?,
            Some(limit) => loop {
                if let Some(exit) = child.try_wait()? {
                    break exit;
                }
                if started.elapsed().as_secs_f64() >= limit {
                    // Kill fails only if it has just exited; wait reaps it either way.
                    let _ = child.kill();
                    child.wait()?;
                    return Ok(Ended::TimedOut(limit));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            },
        };
        if exit.success() && job.json_on_stdout {
            std::fs::rename(&stdout_path, dir.join("result.json"))?;
        }
        Ok(Ended::Exited(exit.code()))
    })();
    let (status, exit_code, error) = match result {
        Ok(Ended::Exited(Some(0))) => ("ok", Some(0), None),
        Ok(Ended::Exited(code)) => {
            let err = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message (killed?)")
                .to_string();
            ("failed", code, Some(last))
        }
        Ok(Ended::TimedOut(limit)) => (
            "failed",
            None,
            Some(format!("timed out after {limit} s (killed)")),
        ),
        Err(e) => ("failed", None, Some(format!("{e:#}"))),
    };
    let st = Status {
        id: job.id.clone(),
        status: status.into(),
        exit_code,
        wall_seconds: started.elapsed().as_secs_f64(),
        error,
    };
    let bytes = serde_json::to_vec_pretty(&st).unwrap_or_default();
    if let Err(e) = write_atomic(&dir.join("status.json"), &bytes) {
        return Status {
            status: "failed".into(),
            error: Some(format!("{e:#}")),
            ..st
        };
    }
    st
}

/// The Python that has the package `ray` (NOFTL_PYTHON, else .venv/bin/python when there is
/// one, else python3), or the error every `--executor ray` gives without it: checked before any
/// work (`reproduce` and `compare` call it too).
pub(crate) fn ray_python() -> anyhow::Result<String> {
    let python = std::env::var("NOFTL_PYTHON").unwrap_or_else(|_| {
        if Path::new(".venv/bin/python").exists() {
            ".venv/bin/python".into()
        } else {
            "python3".into()
        }
    });
    let probe = Process::new(&python)
        .args(["-c", "import ray"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        bail!(
            "the Ray executor needs the Python package `ray` in {python}: \
             python3 -m venv .venv && .venv/bin/pip install ray (or set NOFTL_PYTHON)"
        );
    }
    Ok(python)
}

/// Hands the jobs to the Ray driver (Python, `ray` package), which runs each as a Ray task and
/// writes the same job directories as the local executor (`reproduce` and `compare` hand it
/// their runs and rows the same way). The driver first checks that every node of the cluster
/// has this binary, at its path or at NOFTL_BIN, and the same version.
pub(crate) fn run_ray(
    out: &Path,
    todo: &[Job],
    timeout_seconds: Option<f64>,
) -> anyhow::Result<()> {
    run_ray_with(&ray_python()?, out, todo, timeout_seconds)
}

/// `run_ray` with the Python `ray_python` found.
pub(crate) fn run_ray_with(
    python: &str,
    out: &Path,
    todo: &[Job],
    timeout_seconds: Option<f64>,
) -> anyhow::Result<()> {
    let driver = out.join("sweep_ray.py");
    write_atomic(&driver, RAY_DRIVER.as_bytes())?;
    let todo_file = out.join("todo.json");
    write_atomic(&todo_file, &serde_json::to_vec(todo)?)?;
    let exe = std::env::current_exe().context("cannot find the noftl binary")?;
    let status = Process::new(python)
        .arg(&driver)
        .arg(&todo_file)
        .arg(out)
        .arg(&exe)
        .arg(timeout_seconds.map_or_else(|| "none".to_string(), |t| t.to_string()))
        // Standard output is the verb's (`--json -`): whatever Ray prints goes to standard error.
        .stdout(Stdio::from(std::io::stderr()))
        .status()
        .with_context(|| format!("cannot start {python}"))?;
    if !status.success() {
        bail!("the Ray driver failed ({status}); see its output above");
    }
    Ok(())
}

/// Writes one CSV row per job of the sweep in `dir` (invariant 3). Returns the number of rows.
/// The CSV goes through the output rule: judged before anything is read, and never over one of
/// the files it is made of.
pub fn merge(dir: &Path, csv_path: &Path) -> anyhow::Result<usize> {
    lab::output::protect("the sweep's", &dir.join("jobs.json"));
    lab::output::check_writable(csv_path)?;
    let plan: Plan = serde_json::from_slice(
        &std::fs::read(dir.join("jobs.json"))
            .with_context(|| format!("{} is not a sweep's result directory", dir.display()))?,
    )
    .with_context(|| format!("in {}/jobs.json", dir.display()))?;
    let param_keys: Vec<String> = {
        let mut keys: Vec<String> = plan
            .jobs
            .iter()
            .flat_map(|j| j.params.keys().cloned())
            .collect();
        keys.sort();
        keys.dedup();
        keys
    };
    let mut metric_keys: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut rows: Vec<(Option<Status>, BTreeMap<String, String>)> = Vec::new();
    for job in &plan.jobs {
        let jd = job_dir(dir, &job.id);
        lab::output::protect("the sweep's", &jd.join("status.json"));
        let status: Option<Status> = std::fs::read(jd.join("status.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let mut metrics = BTreeMap::new();
        if status.as_ref().is_some_and(|s| s.status == "ok") {
            for (prefix, value) in result_files(&jd)? {
                let mut flat = Vec::new();
                flatten(&prefix, &value, &mut flat);
                for (k, v) in flat {
                    if seen.insert(k.clone()) {
                        metric_keys.push(k.clone());
                    }
                    metrics.insert(k, v);
                }
            }
        }
        rows.push((status, metrics));
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = vec![
        "job".to_string(),
        "label".into(),
        "status".into(),
        "wall_seconds".into(),
    ];
    header.extend(param_keys.iter().map(|k| format!("param.{k}")));
    header.extend(metric_keys.iter().cloned());
    w.write_record(&header)?;
    for (job, (status, metrics)) in plan.jobs.iter().zip(&rows) {
        let mut rec = vec![
            job.id.clone(),
            job.label.clone(),
            status
                .as_ref()
                .map_or("not run".into(), |s| s.status.clone()),
            status
                .as_ref()
                .map_or(String::new(), |s| format!("{:.3}", s.wall_seconds)),
        ];
        rec.extend(
            param_keys
                .iter()
                .map(|k| job.params.get(k).cloned().unwrap_or_default()),
        );
        rec.extend(
            metric_keys
                .iter()
                .map(|k| metrics.get(k).cloned().unwrap_or_default()),
        );
        w.write_record(&rec)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| anyhow::anyhow!("{}", e.error()))?;
    write_atomic(csv_path, &bytes)?;
    Ok(plan.jobs.len())
}

/// A job's result files: `result.json` (no prefix), or each `result-LABEL.json` (prefix LABEL).
fn result_files(jd: &Path) -> anyhow::Result<Vec<(String, Json)>> {
    let mut names: Vec<String> = std::fs::read_dir(jd)
        .with_context(|| format!("cannot read {}", jd.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("result") && n.ends_with(".json"))
        .collect();
    names.sort();
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        lab::output::protect("the sweep's", &jd.join(&n));
        let text = std::fs::read(jd.join(&n))?;
        let value: Json = serde_json::from_slice(&text)
            .with_context(|| format!("{}/{n} is not JSON", jd.display()))?;
        let prefix = n
            .trim_start_matches("result")
            .trim_end_matches(".json")
            .trim_start_matches('-')
            .to_string();
        out.push((prefix, value));
    }
    Ok(out)
}

/// Flattens a JSON value into (dotted key, scalar text). Objects nest with dots; an array of
/// objects keys each element by its name-like field (`storage`, `store`, `config`, `name`, `label`,
/// `workload`) or its index; arrays of scalars (histograms, per-die lists) are left out.
fn flatten(prefix: &str, v: &Json, out: &mut Vec<(String, String)>) {
    let join = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Json::Object(m) => {
            for (k, x) in m {
                flatten(&join(k), x, out);
            }
        }
        Json::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                if let Json::Object(m) = x {
                    let name = ["storage", "store", "config", "name", "label", "workload"]
                        .iter()
                        .find_map(|k| m.get(*k).and_then(Json::as_str))
                        .map_or_else(|| i.to_string(), str::to_string);
                    flatten(&join(&name), x, out);
                }
            }
        }
        Json::Null => {}
        Json::String(s) => out.push((prefix.to_string(), s.clone())),
        Json::Bool(b) => out.push((prefix.to_string(), b.to_string())),
        Json::Number(n) => out.push((prefix.to_string(), n.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = r#"
        name = "t"
        verb = "io"
        args = ["--preset", "tiny", "--ops", "100"]
        seeds = [1, 2]
        [grid]
        "--target" = ["page", "dftl"]
        "--op" = ["7%", "28%"]
    "#;

    #[test]
    fn a_grid_expands_to_the_cartesian_product_with_stable_ids() {
        let p = expand(PLAN).unwrap();
        assert_eq!(p.jobs.len(), 8);
        let again = expand(PLAN).unwrap();
        assert_eq!(p.jobs, again.jobs);
        // The id depends on the arguments only, not on where the job sits in the plan.
        let reordered = PLAN.replace(r#"["page", "dftl"]"#, r#"["dftl", "page"]"#);
        let r = expand(&reordered).unwrap();
        let ids: HashSet<_> = p.jobs.iter().map(|j| &j.id).collect();
        assert!(r.jobs.iter().all(|j| ids.contains(&j.id)));
        let j = &p.jobs[0];
        assert_eq!(j.params["seed"], "1");
        assert!(j.argv.ends_with(&["--json".to_string()]));
        assert_eq!(j.id.len(), 16);
    }

    #[test]
    fn job_ids_are_fnv1a_of_the_arguments_and_never_change() {
        // Pinned values, computed outside this code (FNV-1a 64 over the NUL-terminated
        // arguments): `--resume` and ids across machines and versions rely on them staying.
        let p = expand(PLAN).unwrap();
        let first = &p.jobs[0];
        let argv: Vec<&str> = first.argv.iter().map(String::as_str).collect();
        assert_eq!(
            argv,
            [
                "io", "--preset", "tiny", "--ops", "100", "--op", "7%", "--target", "page",
                "--seed", "1", "--json"
            ],
            "grid flags in sorted order, then the seed, then the sweep's --json"
        );
        assert_eq!(first.id, "5b4849456c7c8c64");
        let waf = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sweeps/waf.toml"),
        )
        .unwrap();
        let w = expand(&waf).unwrap();
        assert_eq!(w.jobs.len(), 56);
        assert_eq!(w.jobs[0].id, "863d55276b9ac228");
    }

    #[test]
    fn every_example_plan_expands_and_its_jobs_parse() {
        // The plans in examples/sweeps/ are documentation: a flag renamed in the CLI must not
        // leave one that fails (expand parses every job with the CLI's own parser).
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sweeps");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let plan = expand(&std::fs::read_to_string(&path).unwrap())
                    .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                assert!(!plan.jobs.is_empty(), "{}", path.display());
                seen += 1;
            }
        }
        assert!(seen >= 6, "{seen} plans in {}", dir.display());
    }

    #[test]
    fn a_timeout_is_parsed_from_the_plan_and_a_bad_one_refused() {
        let p = expand(&format!("timeout = \"90s\"\n{PLAN}")).unwrap();
        assert_eq!(p.timeout_seconds, Some(90.0));
        assert_eq!(expand(PLAN).unwrap().timeout_seconds, None);
        let err = format!(
            "{:#}",
            expand(&format!("timeout = \"soon\"\n{PLAN}")).unwrap_err()
        );
        assert!(
            err.contains("timeout") && err.contains("not a duration"),
            "{err}"
        );
    }

    #[test]
    fn cases_cross_the_grid_and_lists_repeat_a_flag() {
        let p = expand(
            r#"
            verb = "io"
            args = ["--preset", "tiny", "--ops", "10"]
            [[cases]]
            label = "small"
            "--set" = ["geometry.blocks_per_plane=32", "geometry.channels=1"]
            [[cases]]
            label = "big"
            "--set" = ["geometry.blocks_per_plane=64"]
            [grid]
            "--target" = ["page"]
            "#,
        )
        .unwrap();
        assert_eq!(p.jobs.len(), 2);
        assert_eq!(p.jobs[0].label, "small");
        assert_eq!(
            p.jobs[0].argv.iter().filter(|a| *a == "--set").count(),
            2,
            "{:?}",
            p.jobs[0].argv
        );
        assert_eq!(
            p.jobs[0].params["set"],
            "geometry.blocks_per_plane=32;geometry.channels=1"
        );
    }

    #[test]
    fn bad_plans_are_refused_before_anything_runs() {
        let bad = |t: &str| format!("{:#}", expand(t).unwrap_err());
        assert!(bad(r#"verb = "io"
            args = ["--no-such-flag"]"#)
        .contains("does not parse"));
        assert!(bad(r#"verb = "serve""#).contains("cannot run in a sweep"));
        assert!(bad(r#"verb = "io"
            args = ["--json"]"#)
        .contains("leave `--json` out"));
        assert!(bad(r#"verb = "io"
            [grid]
            "--target" = []"#)
        .contains("no values"));
        assert!(bad(r#"verb = "io"
            [grid]
            "target" = ["page"]"#)
        .contains("not a long flag"));
        assert!(bad(r#"verb = "io"
            seeds = [1, 1]"#)
        .contains("same job twice"));
        assert!(bad(r#"verbs = "io""#).contains("not a sweep plan"));
    }

    #[test]
    fn flatten_keys_rows_by_their_name() {
        let v: Json = serde_json::json!({
            "a": 1, "b": {"c": "x"}, "hist": [1, 2, 3],
            "rows": [{"store": "native", "tps": 2.5}, {"tps": 1}]
        });
        let mut out = Vec::new();
        flatten("", &v, &mut out);
        let m: BTreeMap<_, _> = out.into_iter().collect();
        assert_eq!(m["a"], "1");
        assert_eq!(m["b.c"], "x");
        assert_eq!(m["rows.native.tps"], "2.5");
        assert_eq!(m["rows.1.tps"], "1");
        assert!(!m.keys().any(|k| k.starts_with("hist")));
    }
}
