//! `noftl reproduce <paper>`: a paper's figures re-run at the paper's set-up, and one fidelity
//! table: every cell with the paper's value, ours, the relative error, whether the cell was used
//! to fit a parameter the paper does not state (calibration) or is a prediction (held out), and
//! whether it lands within its tolerance. NoFTL (`noftl`), AMF's write-amplification
//! table with kernel file systems in a QEMU guest (`amf`, module `amf`) and DFS's application
//! speedups over kernel ext3 in the guest (`dfs`, module `dfs`); later issues add the others
//! under the same verb.
//!
//! NoFTL (`compare::paper` states the set-up and its sources): Fig. 3's TPC-B and TPC-C rows
//! (1, 5 and 10 GiB volumes), its TPC-H rows (SF 1 on 1.5 GiB), and Fig. 4 (fio's random 4 KiB
//! writes at QD 1 on the emulator), with the host CPU profile `paper-noftl` (crate::cpu,
//! `calibration`). Each run goes through `compare` or `io`, so every row carries its own
//! consistency check. `--quick` runs the same machinery at small scales for CI: its cells are
//! not the paper's set-up and are printed as such.
//!
//! Invariants:
//! 1. A cell's set is fixed by `calibration::CALIBRATION_CELLS`, never by how well it lands.
//! 2. A cell whose run broke a physical bound (consistency violated) is never within tolerance.
//! 3. The result depends on the spec only (virtual time).

pub mod amf;
pub mod calibration;
pub mod dfs;
mod fidelity;
mod guests;
pub mod jobs;
pub mod reasons;
mod runs;
mod schedule;
mod spec;

use serde::Serialize;

pub use fidelity::{Cell, CellSet};
pub use jobs::ReproduceResult;
pub use runs::{Fig4Run, OltpRun, StoreRun, TodayRun, TpchQueryRun, TpchRun, TODAY_CHIPS};
pub use spec::{Progress, Setup, Spec, PAPERS};

/// Runs the reproduction of `spec.paper` (noftl; amf and dfs have tables of their own,
/// `amf::run`, `dfs::run`) and
/// builds its fidelity table: its runs in this process, as many at once as fit the cores and
/// the memory (`schedule`; `jobs` says how they run elsewhere), merged.
pub fn run(spec: &Spec, progress: &mut Progress<'_>) -> anyhow::Result<ReproduceResult> {
    if spec.paper == "amf" || spec.paper == "dfs" {
        anyhow::bail!(
            "reproduce {} has a table of its own: call reproduce::{}::run",
            spec.paper,
            spec.paper
        );
    }
    let outputs = schedule::run_local(spec, jobs::runs(spec)?, progress)?;
    jobs::merge(spec, outputs)
}

/// One round of the calibration: the fit the runs used, and what they gave.
#[derive(Debug, Serialize)]
pub struct CalibrationRound {
    pub used: crate::cpu::PaperNoftlFit,
    pub inputs: calibration::Inputs,
    pub fitted: calibration::Fit,
}

/// At most this many rounds of the fixed point (module doc of `calibration`).
const MAX_ROUNDS: usize = 4;

/// `reproduce noftl --calibrate`: runs the calibration cells (native at TPC-B 48 and 200, TPC-C
/// 5 and 25, TPC-H SF 1; dftl-orig-15% for Q1) with the committed fit, fits, and repeats with
/// the new fit until it moves by less than 1% (at most `MAX_ROUNDS` rounds).
pub fn calibrate(
    spec: &Spec,
    progress: &mut Progress<'_>,
) -> anyhow::Result<Vec<CalibrationRound>> {
    if spec.quick {
        anyhow::bail!(
            "--calibrate fits the paper's cells: it runs at the paper's scales, not with --quick"
        );
    }
    let setup = runs::setup(spec)?;
    let dir = tempfile::tempdir()?;
    let mut used = crate::cpu::PAPER_NOFTL_FIT;
    let mut rounds: Vec<CalibrationRound> = Vec::new();
    for round in 1..=MAX_ROUNDS {
        let profile = dir.path().join(format!("round-{round}.toml"));
        std::fs::write(&profile, used.profile().to_toml()?)?;
        let s = Spec {
            cpu: profile.display().to_string(),
            ..spec.clone()
        };
        progress(&format!(
            "calibration round {round}: engine x{}, commit {} ns, query x{}, scan overlap {}",
            used.engine_scale, used.commit_ns, used.query_scale, used.dftl_orig_scan_overlap
        ));
        let oltp = runs::oltp_calibration(&s, &setup, progress)?;
        let tpch = runs::tpch_calibration(&s, &setup, progress)?;
        let inputs = runs::calibration_inputs(&used, &oltp, &tpch)?;
        let fitted = calibration::fit(&inputs)?;
        let next = fitted.fit;
        rounds.push(CalibrationRound {
            used,
            inputs,
            fitted,
        });
        let close = |a: f64, b: f64| (a - b).abs() <= 0.01 * a.abs().max(b.abs()).max(1e-9);
        if close(next.engine_scale, used.engine_scale)
            && close(next.commit_ns as f64, used.commit_ns as f64)
            && close(next.query_scale, used.query_scale)
            && next.dftl_orig_scan_overlap == used.dftl_orig_scan_overlap
        {
            break;
        }
        used = next;
    }
    Ok(rounds)
}
