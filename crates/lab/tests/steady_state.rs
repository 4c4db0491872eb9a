//! The steady-state rule as the verbs use it (`lab::steady`): `io --precondition` reaches GC
//! before its rounds end and reports the rule's verdict; a run too short to be steady says so.
//! Figures asserted are virtual-time ones.

use lab::device::DeviceSpec;
use lab::experiments::io::{self, Quiet};
use lab::targets::{FtlKnobs, TargetSpec};

fn io_spec(precondition: bool) -> io::Spec {
    io::Spec {
        target: TargetSpec {
            target: "page".into(),
            device: DeviceSpec {
                preset: "tiny".into(),
                config: None,
                set: Vec::new(),
            },
            knobs: FtlKnobs::default(),
            image: None,
        },
        ops: Some(2_000),
        precondition,
        ..io::Spec::default()
    }
}

#[test]
fn io_precondition_fills_then_writes_randomly_until_gc_is_steady() {
    let r = io::run(&io_spec(true), &mut Quiet).expect("io runs");
    let p = r.precondition.as_ref().expect("preconditioned");
    assert!(p.fill_pages > 0);
    assert!(
        p.gc_migrations > 0,
        "GC copied pages before the measured requests"
    );
    let s = &r.steady_state;
    assert!(s.rounds as usize >= lab::steady::WINDOW_ROUNDS);
    assert!(s.rounds <= lab::steady::MAX_ROUNDS);
    assert_eq!(s.rounds as usize, p.rounds.len());
    assert!(
        s.device_writes > 1.0,
        "the fill and the rounds wrote the device over"
    );
    // Every round after the first few copies: WAF above 1 in the rule's window.
    let last = p.rounds.last().and_then(|r| r.waf).expect("a flash below");
    assert!(last > 1.0, "WAF {last} in the last round");
    // The measured requests run in GC's regime from their start.
    assert!(r.gc.as_ref().is_some_and(|g| g.migrations > 0));
    assert_eq!(s.met, lab::steady::is_steady(&p.rounds));
}

#[test]
fn a_run_without_rounds_is_reported_not_steady() {
    let r = io::run(&io_spec(false), &mut Quiet).expect("io runs");
    assert!(!r.steady_state.met);
    assert_eq!(r.steady_state.rounds, 0);
    assert!(r.steady_state.warning().is_some());
    assert!(lab::steady::refuse_unsteady(true, [("io", &r.steady_state)]).is_err());
    assert!(lab::steady::refuse_unsteady(false, [("io", &r.steady_state)]).is_ok());
}

#[test]
fn ipa_rows_too_short_to_be_steady_say_so() {
    let spec = lab::experiments::ipa::Spec {
        workload: "tatp".into(),
        scale: Some(2_000),
        accounts_per_branch: 100_000,
        device: DeviceSpec {
            preset: "mlc16k".into(),
            config: None,
            // The comparison's default geometry (ipa::DEFAULT_GEOMETRY).
            set: Vec::new(),
        },
        page_size_bytes: None,
        op_fraction: 0.1,
        region_chips: 1,
        region_max_size_bytes: None,
        region_gc: None,
        scheme: "2x3".into(),
        record_bytes: 32,
        configs: Some(vec!["baseline".into()]),
        terminals: 1,
        warmup: "none".into(),
        precondition_device_writes: 0.0,
        round: "1s".into(),
        max_rounds: 3,
        duration: "1s".into(),
        repeat: 1,
        buffer_pages: None,
        seed: 1,
        regime: None,
    };
    let r = lab::experiments::ipa::run(&spec, None).expect("ipa compare runs");
    let row = &r.rows[0];
    assert!(
        !row.steady_state.met,
        "three rounds cannot fill a five-round window"
    );
    assert_eq!(row.steady_state.rounds, 3);
    let json = serde_json::to_value(row).expect("serialises");
    assert_eq!(json["steady_state"]["met"], false);
    assert!(json["steady_state"]["criterion"]
        .as_str()
        .is_some_and(|c| c.contains("SNIA")));
}
