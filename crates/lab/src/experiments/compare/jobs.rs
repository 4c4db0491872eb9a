//! A comparison as independent jobs, one per row (store) of each scale, for an executor that
//! runs them elsewhere (the CLI's `--executor ray`: one Ray task per row), and the merge of
//! their outputs into the same results [`super::run`] hands over.
//!
//! Each row's job loads the scale's database and sizes its device on its own (the local run
//! loads it once and copies it onto every row): the load is deterministic from the spec, so
//! every job's copy holds the same bytes, and a row's windows depend on its store and the spec
//! only (module invariant 3). The merge checks that every row of a scale reports the same
//! device, profile and log device: rows that disagree ran different binaries or inputs.
//!
//! What runs on the local executor only: TPC-H (its rows run one after another, each checked
//! against native's answers) and `--results` (the windows' traces are not carried back).
//!
//! Invariant: for the same spec, `merge` of every job's `run_row` hands `on_scale` the same
//! results as `super::run` (the same `assemble`, from the same windows).

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::{
    assemble, checked_scale, finish, jobs_that_fit, prepare_scale, run_rows, scales, OnScale,
    RunOut, Shared, Spec, ROWS,
};

/// One row of one scale.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowJob {
    /// The scale's label under `--paper` (`sf48`, `tpcc-sf5`); None for a single scale.
    pub scale: Option<String>,
    /// The store (a name of `STORE_ROWS`).
    pub store: String,
}

/// What a row's job gives back.
#[derive(Debug, Serialize, Deserialize)]
pub struct RowOutput {
    pub shared: Shared,
    /// The row's measured windows, in order.
    pub runs: Vec<RunOut>,
}

/// The rows of `args`, every scale's in order, each with the RAM it takes (its device and the
/// loaded database, from the kit's estimate); refused, before any work, where the comparison
/// cannot run as independent rows.
pub fn rows(args: &Spec) -> anyhow::Result<Vec<(RowJob, u64)>> {
    if args.workload == "tpch" {
        bail!("compare --workload tpch runs on the local executor only: its rows run one after another, each checked against native's answers");
    }
    if args.results.is_some() {
        bail!("--results runs on the local executor only (the windows' traces stay where the rows ran)");
    }
    super::check(args)?;
    let mut out = Vec::new();
    for (label, one) in scales(args)? {
        let c = checked_scale(&one)?;
        for &r in &c.selected {
            let job = RowJob {
                scale: label.clone(),
                store: ROWS[r].0.to_string(),
            };
            out.push((job, c.row_memory_bytes));
        }
    }
    Ok(out)
}

/// The scale `job` belongs to, and its row's index in `ROWS`.
fn scale_of(args: &Spec, job: &RowJob) -> anyhow::Result<(Option<String>, Spec, usize)> {
    let (label, one) = scales(args)?
        .into_iter()
        .find(|(l, _)| *l == job.scale)
        .with_context(|| format!("the comparison has no scale {:?}", job.scale))?;
    let row = ROWS
        .iter()
        .position(|r| r.0 == job.store)
        .with_context(|| format!("no store '{}'", job.store))?;
    Ok((label, one, row))
}

/// Runs one row: its scale's database loaded and its device sized as the whole comparison's
/// are, then the row alone.
pub fn run_row(args: &Spec, job: &RowJob) -> anyhow::Result<RowOutput> {
    let (_, one, row) = scale_of(args, job)?;
    let c = checked_scale(&one)?;
    if !c.selected.contains(&row) {
        bail!(
            "store '{}' is not among the comparison's --stores",
            job.store
        );
    }
    let (rig, probe) = prepare_scale(&one, &c)?;
    jobs_that_fit(c.scale, rig.nand.geometry.capacity_bytes(), 0, 1, (None, 0))?;
    let mut results = run_rows(&one, &rig, &probe, &*c.w, &[row], 1, c.until_ns, None)?;
    let runs = results
        .pop()
        .flatten()
        .with_context(|| format!("{}: the row gave no windows", job.store))?;
    Ok(RowOutput {
        shared: Shared::of(&rig),
        runs,
    })
}

/// Merges the rows' outputs (any order) into each scale's result, handed to `on_scale` with
/// the checks of a local run (`--strict`).
pub fn merge(
    args: &Spec,
    outputs: Vec<(RowJob, RowOutput)>,
    on_scale: &mut OnScale<'_>,
) -> anyhow::Result<()> {
    let mut outputs: Vec<Option<(RowJob, RowOutput)>> = outputs.into_iter().map(Some).collect();
    for (label, one) in scales(args)? {
        let c = checked_scale(&one)?;
        let mut shared: Option<Shared> = None;
        let mut results = Vec::new();
        for &r in &c.selected {
            let want = RowJob {
                scale: label.clone(),
                store: ROWS[r].0.to_string(),
            };
            let (_, out) = outputs
                .iter_mut()
                .find(|o| o.as_ref().is_some_and(|(j, _)| *j == want))
                .and_then(Option::take)
                .with_context(|| format!("no output for {} of {label:?}", want.store))?;
            match &shared {
                None => shared = Some(out.shared),
                Some(s) if *s != out.shared => bail!(
                    "{} of {label:?} ran on another device, CPU profile or log device than native: the rows ran different binaries or inputs",
                    want.store
                ),
                Some(_) => {}
            }
            results.push(Some(out.runs));
        }
        let shared = shared.context("a scale without rows")?;
        let res = assemble(&one, &c, &shared, &results)?;
        finish(&one, label.as_deref(), &c, &res, on_scale)?;
    }
    if let Some((j, _)) = outputs.into_iter().flatten().next() {
        bail!("an output for a row the comparison does not have: {j:?}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_one_per_store_and_scale_and_tpch_is_refused() {
        let spec = Spec {
            scale: Some(1),
            stores: Some(vec!["native".into(), "page".into()]),
            ..Spec::default()
        };
        let r: Vec<RowJob> = rows(&spec).unwrap().into_iter().map(|(j, _)| j).collect();
        assert_eq!(
            r,
            [
                RowJob {
                    scale: None,
                    store: "native".into()
                },
                RowJob {
                    scale: None,
                    store: "page".into()
                }
            ]
        );
        let tpch = Spec {
            workload: "tpch".into(),
            ..Spec::default()
        };
        let e = rows(&tpch).unwrap_err().to_string();
        assert!(e.contains("local executor only"), "{e}");
        // A merge without every row's output is an error, not a table with a hole.
        let e = merge(&spec, vec![], &mut |_, _| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no output for native"), "{e}");
    }

    #[test]
    fn a_consistency_reads_back_as_written_and_an_unknown_status_is_refused() {
        use storage::measure::Consistency;
        let c = Consistency {
            status: "violated",
            die_busy_fraction_max: Some(1.000_000_000_000_2),
            channel_busy_fraction_max: None,
            little_law_ratio: Some(0.1 + 0.2),
            violations: vec!["die busy 1.0000000000002 of the window".into()],
        };
        let json = serde_json::to_string(&c).unwrap();
        let back: Consistency = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c, "bit for bit (float_roundtrip)");
        let e = serde_json::from_str::<Consistency>(&json.replace("violated\"", "maybe\""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("consistency status 'maybe'"), "{e}");
    }
}
