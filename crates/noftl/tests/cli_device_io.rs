//! The `device` and `io` verbs as a user runs them: determinism, JSON fields, clear errors.

mod cli_support;
use cli_support::noftl;

#[test]
fn the_same_io_command_twice_gives_byte_identical_json() {
    let args = [
        "io", "--target", "raw", "--preset", "tiny", "--rw", "write", "--qd", "4", "--ops", "3000",
        "--json", "--seed", "7",
    ];
    let (ok1, a, e1) = noftl(&args);
    let (ok2, b, _) = noftl(&args);
    assert!(ok1 && ok2, "{e1}");
    assert_eq!(a, b);
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    for field in [
        "target",
        "ops",
        "iops",
        "mib_per_s",
        "virtual_seconds",
        "energy_joules",
    ] {
        assert!(v.get(field).is_some(), "missing {field} in {a}");
    }
    for field in ["mean", "p50", "p99", "max"] {
        assert!(
            v["latency_us"].get(field).is_some(),
            "missing latency_us.{field}"
        );
    }
    for field in [
        "reads",
        "programs",
        "partial_programs",
        "erases",
        "oob_reads",
        "oob_writes",
    ] {
        assert!(v["flash"].get(field).is_some(), "missing flash.{field}");
    }
    assert_eq!(v["flash"]["programs"], 3000);
    let (_, c, _) = noftl(&[
        "io", "--target", "raw", "--preset", "tiny", "--rw", "write", "--qd", "4", "--ops", "3000",
        "--json", "--seed", "8",
    ]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&c).unwrap()["flash"],
        v["flash"],
        "write pattern does not depend on the seed"
    );
}

#[test]
fn raw_reads_after_precondition_return_programmed_pages_at_the_modelled_latency() {
    let (ok, out, err) = noftl(&[
        "io",
        "--target",
        "raw",
        "--preset",
        "noftl13",
        "--set",
        "geometry.blocks_per_plane=64",
        "--precondition",
        "--ops",
        "1000",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["flash"]["reads"], 1000);
    assert_eq!(
        v["flash"]["programs"], 0,
        "the precondition is not part of the measured phase"
    );
    // noftl13: 50 us per read, one die: 20,000 IOPS at QD 1.
    assert!(
        (v["iops"].as_f64().unwrap() - 20_000.0).abs() < 1.0,
        "{out}"
    );
}

#[test]
fn device_show_prints_geometry_and_json() {
    let (ok, out, _) = noftl(&["device", "show"]);
    assert!(ok);
    assert!(
        out.contains("noftl13") && out.contains("4096 blocks") && out.contains("1.00 GiB"),
        "{out}"
    );
    let (ok, out, _) = noftl(&["device", "show", "--preset", "mlc16k", "--json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["config"]["cell"]["native"], "mlc");
    assert_eq!(v["dies"], 8);
}

#[test]
fn bad_input_is_refused_with_a_message_that_names_the_problem() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["device", "show", "--set", "geometry.channels=0"],
            "geometry.channels",
        ),
        (&["device", "show", "--preset", "nosuch"], "unknown preset"),
        (
            &["device", "show", "--set", "timing.read_us=fast"],
            "timing.read_us",
        ),
        (
            &[
                "io",
                "--target",
                "raw",
                "--preset",
                "tiny",
                "--rw",
                "randwrite",
            ],
            "raw target runs",
        ),
        (
            &["io", "--target", "raw", "--preset", "tiny", "--bs", "1000"],
            "multiple",
        ),
        (
            &["io", "--target", "raw", "--preset", "tiny", "--qd", "0"],
            "--qd",
        ),
        (
            &["io", "--target", "raw", "--preset", "tiny", "--bs", "4q"],
            "unit",
        ),
        (
            &["io", "--target", "nosuch", "--preset", "tiny"],
            "unknown target",
        ),
        (
            &["device", "show", "--config", "/nonexistent/dev.toml"],
            "cannot read",
        ),
    ];
    for (args, needle) in cases {
        let (ok, _, err) = noftl(args);
        assert!(!ok, "{args:?} should fail");
        assert!(
            err.contains(needle),
            "{args:?}: '{err}' should mention '{needle}'"
        );
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    }
}
