//! The experiments run from their checked specs, each giving the JSON the CLI writes with
//! `--json` (the same serializer and the same bytes: `serde_json::to_string_pretty`), or a
//! [`Failure`] that says whether the input was bad (refused before any work by the lab's own
//! checks) or the run failed. Plain Rust: the Python layer (`python.rs`) only converts.

use lab::experiments::{bench, compare, crashtest, io};

use crate::args::{self, BadInput, Kwargs};

/// Why a call gave no result.
#[derive(Debug)]
pub enum Failure {
    /// Refused before any work (Python: `ValueError`).
    BadInput(String),
    /// The run itself failed (Python: `RuntimeError`), with the lab's message and its causes.
    Run(String),
}

impl From<BadInput> for Failure {
    fn from(b: BadInput) -> Self {
        Failure::BadInput(b.0)
    }
}

/// The lab's check refused the spec: bad input, with the lab's message and its causes.
fn refused(e: anyhow::Error) -> Failure {
    Failure::BadInput(format!("{e:#}"))
}

fn failed(e: anyhow::Error) -> Failure {
    Failure::Run(format!("{e:#}"))
}

fn json(value: &impl serde::Serialize) -> Result<String, Failure> {
    serde_json::to_string_pretty(value).map_err(|e| Failure::Run(e.to_string()))
}

/// A call checked and ready to run: the work is in `run`, which may take minutes, so that the
/// caller can release Python's lock around it and only around it.
pub type Ready = Box<dyn FnOnce() -> Result<Vec<String>, Failure> + Send>;

/// `compare(**kwargs)`: one JSON document per scale (one, unless `paper=True`).
pub fn compare(kwargs: &Kwargs) -> Result<Ready, Failure> {
    let spec = args::compare_spec(kwargs)?;
    compare::check(&spec).map_err(refused)?;
    Ok(Box::new(move || {
        let mut out = Vec::new();
        compare::run(&spec, &mut |_label, outcome| {
            let doc = match outcome {
                compare::Outcome::Stores(r) => serde_json::to_string_pretty(r)?,
                compare::Outcome::Tpch(r) => serde_json::to_string_pretty(r)?,
            };
            out.push(doc);
            Ok(())
        })
        .map_err(failed)?;
        Ok(out)
    }))
}

/// `bench(**kwargs)`: TPC-B or TATP, one JSON document.
pub fn bench(kwargs: &Kwargs) -> Result<Ready, Failure> {
    let (workload, spec) = args::bench_spec(kwargs)?;
    bench::check(&spec).map_err(refused)?;
    Ok(Box::new(move || {
        let doc = if workload == "tatp" {
            json(&bench::run_tatp(&spec).map_err(failed)?.result)?
        } else {
            json(&bench::run_tpcb(&spec).map_err(failed)?.result)?
        };
        Ok(vec![doc])
    }))
}

/// `io(**kwargs)`: one JSON document.
pub fn io(kwargs: &Kwargs) -> Result<Ready, Failure> {
    let spec = args::io_spec(kwargs)?;
    spec.requests().map_err(refused)?;
    lab::targets::check_name(&spec.target.target).map_err(refused)?;
    Ok(Box::new(move || {
        let r = io::run(&spec, &mut io::Quiet).map_err(failed)?;
        Ok(vec![json(&r)?])
    }))
}

/// `crashtest(**kwargs)`: one JSON document (the crash report).
pub fn crashtest(kwargs: &Kwargs) -> Result<Ready, Failure> {
    let spec = args::crashtest_spec(kwargs)?;
    let job = crashtest::prepare(&spec).map_err(refused)?;
    Ok(Box::new(move || {
        let r = job.run(&mut || {}).map_err(failed)?;
        Ok(vec![json(&r)?])
    }))
}
