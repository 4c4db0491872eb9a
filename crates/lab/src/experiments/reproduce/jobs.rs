//! A reproduction as independent runs (each a `compare` or an `io` of its own), for an executor
//! that runs them elsewhere (the CLI's `--executor ray`: one Ray task per run), and the pure
//! merge of their outputs into the fidelity table. `super::run` is these three in one process.
//!
//! No run needs another's output: the fidelity table compares each run with the paper, and the
//! profile's constants are the committed fit (`calibration`'s cells are labelled, not re-fitted,
//! by a reproduction). `--calibrate`'s rounds are a fixed point, each round's runs needing the
//! previous round's fit: it runs on the local executor only.
//!
//! Invariant: `merge(spec, runs(spec) each run by run_one)` is `super::run(spec)`, whatever the
//! order the outputs come in (the merge orders them as `runs` lists them).

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::cpu::CpuProfile;

use super::fidelity::{self, Cell, CellSet};
use super::runs::{self, Fig4Run, OltpRun, TodayRun, TpchRun, FIG4_TARGETS, TODAY_CHIPS};
use super::spec::{Progress, Setup, Spec, PAPERS};

/// Everything one reproduction ran, and its fidelity table.
#[derive(Debug, Serialize)]
pub struct ReproduceResult {
    pub paper: String,
    pub quick: bool,
    /// The set-up every run used (compare::paper's list, as the values run).
    pub setup: Setup,
    pub cpu: CpuProfile,
    pub cells: Vec<Cell>,
    /// Held-out cells within tolerance, of those judged.
    pub held_out_within: usize,
    pub held_out_judged: usize,
    pub oltp: Vec<OltpRun>,
    pub tpch: Option<TpchRun>,
    pub fig4: Vec<Fig4Run>,
    /// Beyond the paper: the OLTP rows on today's chips (with --today).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub today: Vec<TodayRun>,
}

/// One run of a reproduction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "run", rename_all = "lowercase")]
pub enum RunJob {
    /// Fig. 3, one OLTP row (every store).
    Oltp {
        workload: String,
        scale: u32,
        volume_bytes: u64,
    },
    /// Fig. 3's TPC-H rows (every store, one after another: each checked against native's
    /// answers).
    Tpch,
    /// Fig. 4 on one target.
    Fig4 { target: String },
    /// Beyond the paper: one OLTP row on one of today's chips.
    Today {
        chip: String,
        workload: String,
        scale: u32,
        volume_bytes: u64,
    },
}

/// What a run gives back.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "run", content = "result", rename_all = "lowercase")]
pub enum RunOutput {
    Oltp(OltpRun),
    Tpch(TpchRun),
    Fig4(Fig4Run),
    Today(OltpRun),
}

/// What every run and the merge read of the spec, checked before any run.
struct Checked {
    cpu: CpuProfile,
    setup: Setup,
}

fn checked(spec: &Spec) -> anyhow::Result<Checked> {
    if !PAPERS.contains(&spec.paper.as_str()) {
        bail!(
            "reproduce: no paper '{}' (the papers are {}; IPA and IAA come later)",
            spec.paper,
            PAPERS.join(", ")
        );
    }
    if let Some(o) = &spec.only {
        if !["oltp", "tpch", "fig4", "today"].contains(&o.as_str()) {
            bail!("--only takes oltp, tpch, fig4 or today, not '{o}'");
        }
    }
    // Refused before any run: the profile, the window.
    let cpu = CpuProfile::parse(&spec.cpu)?;
    let setup = runs::setup(spec)?;
    Ok(Checked { cpu, setup })
}

/// The runs of `spec`, in the table's order; bad input refused before any runs.
pub fn runs(spec: &Spec) -> anyhow::Result<Vec<RunJob>> {
    checked(spec)?;
    let want = |part: &str| match spec.only.as_deref() {
        None => part != "today" || spec.today,
        Some(o) => o == part,
    };
    let mut out = Vec::new();
    if want("oltp") {
        for (workload, scale, volume_bytes) in runs::oltp_scales(spec.quick) {
            out.push(RunJob::Oltp {
                workload: workload.into(),
                scale,
                volume_bytes,
            });
        }
    }
    if want("tpch") {
        out.push(RunJob::Tpch);
    }
    if want("fig4") {
        for target in FIG4_TARGETS {
            out.push(RunJob::Fig4 {
                target: target.into(),
            });
        }
    }
    if want("today") {
        for chip in TODAY_CHIPS {
            for (workload, scale, volume_bytes) in runs::today_scales(spec.quick) {
                out.push(RunJob::Today {
                    chip: chip.into(),
                    workload: workload.into(),
                    scale,
                    volume_bytes,
                });
            }
        }
    }
    Ok(out)
}

/// RAM a run takes: each emulated device keeps its flash in RAM (about the volume), and an OLTP
/// or TPC-H run keeps the loaded database beside it (at most the volume again); Fig. 4's device
/// alone. An estimate for a scheduler, not a limit.
pub fn memory_bytes(spec: &Spec, job: &RunJob) -> u64 {
    const GIB: u64 = 1 << 30;
    match job {
        RunJob::Oltp { volume_bytes, .. } => 2 * volume_bytes,
        RunJob::Today { volume_bytes, .. } => 2 * (*volume_bytes).max(GIB),
        RunJob::Tpch => 2 * runs::tpch_volume_bytes(spec.quick),
        RunJob::Fig4 { .. } => runs::fig4_device_bytes(spec.quick),
    }
}

/// Runs one of `runs(spec)` (another job is refused: a job is a run of this spec, not a
/// free-standing experiment).
pub fn run_one(
    spec: &Spec,
    job: &RunJob,
    progress: &mut Progress<'_>,
) -> anyhow::Result<RunOutput> {
    if !runs(spec)?.contains(job) {
        bail!("{job:?} is not a run of this reproduction");
    }
    let Checked { cpu, setup } = checked(spec)?;
    Ok(match job {
        RunJob::Oltp {
            workload,
            scale,
            volume_bytes,
        } => RunOutput::Oltp(runs::oltp_one(
            spec,
            &setup,
            (workload, *scale, *volume_bytes),
            progress,
        )?),
        RunJob::Tpch => RunOutput::Tpch(runs::tpch(spec, &setup, progress)?),
        RunJob::Fig4 { target } => RunOutput::Fig4(runs::fig4_one(spec, &cpu, target, progress)?),
        RunJob::Today {
            chip,
            workload,
            scale,
            volume_bytes,
        } => RunOutput::Today(runs::today_one(
            spec,
            &setup,
            chip,
            (workload, *scale, *volume_bytes),
            progress,
        )?),
    })
}

/// The reproduction's result from its runs' outputs, in any order: every run of `runs(spec)`
/// exactly once.
pub fn merge(spec: &Spec, outputs: Vec<(RunJob, RunOutput)>) -> anyhow::Result<ReproduceResult> {
    let Checked { cpu, setup } = checked(spec)?;
    let mut outputs: Vec<Option<(RunJob, RunOutput)>> = outputs.into_iter().map(Some).collect();
    let (mut oltp, mut tpch, mut fig4) = (Vec::new(), None, Vec::new());
    let mut today: Vec<TodayRun> = Vec::new();
    for job in runs(spec)? {
        let (_, out) = outputs
            .iter_mut()
            .find(|o| o.as_ref().is_some_and(|(j, _)| *j == job))
            .and_then(Option::take)
            .with_context(|| format!("no output for {job:?}"))?;
        match (&job, out) {
            (RunJob::Oltp { .. }, RunOutput::Oltp(r)) => oltp.push(r),
            (RunJob::Tpch, RunOutput::Tpch(r)) => tpch = Some(r),
            (RunJob::Fig4 { .. }, RunOutput::Fig4(r)) => fig4.push(r),
            (RunJob::Today { chip, .. }, RunOutput::Today(r)) => {
                match today.iter_mut().find(|t| t.preset == *chip) {
                    Some(t) => t.rows.push(r),
                    None => today.push(TodayRun {
                        preset: chip.clone(),
                        rows: vec![r],
                    }),
                }
            }
            (job, _) => bail!("the output for {job:?} is another run's"),
        }
    }
    if let Some((j, _)) = outputs.into_iter().flatten().next() {
        bail!("an output for a run the reproduction does not have: {j:?}");
    }
    let cells = fidelity::cells(spec.quick, &cpu.name, &oltp, tpch.as_ref(), &fig4);
    let judged: Vec<&Cell> = cells.iter().filter(|c| c.set == CellSet::HeldOut).collect();
    Ok(ReproduceResult {
        paper: spec.paper.clone(),
        quick: spec.quick,
        held_out_within: judged.iter().filter(|c| c.within).count(),
        held_out_judged: judged.len(),
        setup,
        cpu,
        cells,
        oltp,
        tpch,
        fig4,
        today,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick() -> Spec {
        Spec {
            quick: true,
            ..Spec::default()
        }
    }

    #[test]
    fn the_quick_reproduction_is_five_runs_in_the_tables_order() {
        let r = runs(&quick()).unwrap();
        let names: Vec<String> = r
            .iter()
            .map(|j| match j {
                RunJob::Oltp {
                    workload, scale, ..
                } => format!("{workload} {scale}"),
                RunJob::Tpch => "tpch".into(),
                RunJob::Fig4 { target } => target.clone(),
                RunJob::Today { chip, .. } => chip.clone(),
            })
            .collect();
        assert_eq!(names, ["tpcb 2", "tpcc 1", "tpch", "raw", "dftl-orig-2%"]);
        let today = Spec {
            today: true,
            ..quick()
        };
        assert_eq!(runs(&today).unwrap().len(), 5 + 2 * 2);
        // A job spec travels as JSON and comes back equal.
        for j in &r {
            let back: RunJob = serde_json::from_str(&serde_json::to_string(j).unwrap()).unwrap();
            assert_eq!(&back, j);
        }
    }

    #[test]
    fn a_job_that_is_not_a_run_of_the_spec_and_missing_outputs_are_refused() {
        let odd = RunJob::Oltp {
            workload: "tpcb".into(),
            scale: 99,
            volume_bytes: 1 << 20,
        };
        let e = run_one(&quick(), &odd, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a run of this reproduction"), "{e}");
        let e = merge(&quick(), vec![]).unwrap_err().to_string();
        assert!(e.contains("no output for"), "{e}");
        let bad = Spec {
            paper: "ipa".into(),
            ..quick()
        };
        assert!(runs(&bad)
            .unwrap_err()
            .to_string()
            .contains("no paper 'ipa'"));
    }
}
