//! `noftl reproduce noftl --quick`: the whole reproduction's machinery at small scales, as CI
//! runs it. The cells are not the paper's set-up (the module says so); what is asserted is what
//! a user relies on: every published cell has a row, each row says whether it fitted a
//! parameter or is a prediction, which profile it ran with and whether its run checked out,
//! and the physics that holds at any scale (Fig. 4 on the raw block device is tPROG).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use lab::experiments::reproduce::{self, calibration::CALIBRATION_CELLS, CellSet};

#[test]
fn the_quick_reproduction_has_every_cell_labelled_and_checked() {
    let spec = reproduce::Spec {
        quick: true,
        repeat: Some(1),
        duration: Some("2s".into()),
        ..reproduce::Spec::default()
    };
    let mut lines = Vec::new();
    let res = reproduce::run(&spec, &mut |s| lines.push(s.to_string())).unwrap();
    assert!(res.quick);
    assert_eq!(res.cpu.name, "paper-noftl");
    assert!(!lines.is_empty(), "progress is told");
    // Fig. 3: 2 OLTP rows x (NoFTL + 3 DFTL), 4 queries x (NoFTL + 3 DFTL + order); Fig. 4: 2 x 2.
    assert_eq!(
        res.cells.len(),
        8 + 20 + 4,
        "{:#?}",
        res.cells.iter().map(|c| &c.cell).collect::<Vec<_>>()
    );
    for c in &res.cells {
        assert_eq!(c.cpu_profile, "paper-noftl", "{}", c.cell);
        assert_eq!(c.consistency, "ok", "{}: {}", c.cell, c.why);
        assert_eq!(
            c.set == CellSet::Calibration,
            CALIBRATION_CELLS.contains(&c.cell.as_str()),
            "{}: the set comes from the calibration list only",
            c.cell
        );
        assert!(c.ours.is_finite() && c.error.is_finite(), "{}", c.cell);
        assert!(
            !c.why.is_empty(),
            "{}: a row says what its counters were",
            c.cell
        );
    }
    // --quick runs one small scale per workload, standing for the paper's smallest row.
    for name in CALIBRATION_CELLS
        .into_iter()
        .filter(|n| !n.contains(" 200 ") && !n.contains(" 25 "))
    {
        assert!(
            res.cells.iter().any(|c| c.cell == name),
            "calibration cell {name} has a row"
        );
    }
    // The emulator's block device without an FTL completes a 4 KiB write in tPROG (250 us):
    // Fig. 4's 3,977 IOPS and 251 us within their tolerances at any size.
    for c in res.cells.iter().filter(|c| c.cell.contains("raw block")) {
        assert!(c.within, "{} {} against {}", c.cell, c.ours, c.paper);
    }
    assert_eq!(
        res.held_out_judged,
        res.cells
            .iter()
            .filter(|c| c.set == CellSet::HeldOut)
            .count()
    );
}

#[test]
fn unknown_papers_and_parts_are_refused_before_any_run() {
    let e = reproduce::run(
        &reproduce::Spec {
            paper: "nosuch".into(),
            ..reproduce::Spec::default()
        },
        &mut |_| panic!("nothing runs"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("the papers are noftl"), "{e}");
    let e = reproduce::run(
        &reproduce::Spec {
            only: Some("tpcz".into()),
            ..reproduce::Spec::default()
        },
        &mut |_| panic!("nothing runs"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--only takes oltp, tpch, fig4 or today"), "{e}");
    let e = reproduce::run(
        &reproduce::Spec {
            cpu: "fast".into(),
            quick: true,
            ..reproduce::Spec::default()
        },
        &mut |_| panic!("nothing runs"),
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("--cpu takes"), "{e:#}");
}

#[test]
fn the_table_does_not_depend_on_how_many_runs_go_at_once() {
    // The local scheduler (schedule.rs) runs as many of the reproduction's runs at once as fit
    // the cores and the memory: one slot runs them one after another.
    let spec = |jobs| reproduce::Spec {
        quick: true,
        repeat: Some(1),
        duration: Some("1s".into()),
        only: Some("oltp".into()),
        jobs,
        ..reproduce::Spec::default()
    };
    let one = reproduce::run(&spec(1), &mut |_| {}).unwrap();
    let two = reproduce::run(&spec(2), &mut |_| {}).unwrap();
    assert_eq!(
        serde_json::to_string(&one).unwrap(),
        serde_json::to_string(&two).unwrap()
    );
}
