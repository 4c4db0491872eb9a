//! Careless and hostile input to the CLI (issue 16): each test is named after the behaviour that
//! was broken and is fixed now.

mod cli_support;
use cli_support::noftl;

/// Item 5: `--set geometry.blocks_per_plane=4294967295` used to abort with "memory allocation of
/// 103079215080 bytes failed" (exit 134); now every verb refuses it with the memory it needs.
#[test]
fn absurd_geometry_is_refused_with_the_memory_it_needs_not_an_allocation_abort() {
    let set = "geometry.blocks_per_plane=4294967295";
    for args in [
        vec!["io", "--target", "page", "--set", set, "--ops", "10"],
        vec!["io", "--target", "dftl", "--set", set, "--ops", "10"],
        vec!["device", "show", "--set", set],
        vec![
            "bench",
            "tpcb",
            "--storage",
            "native",
            "--set",
            set,
            "--txns",
            "1",
        ],
        vec![
            "serve",
            "--target",
            "page",
            "--set",
            set,
            "--socket",
            "/nonexistent/s.sock",
        ],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_noftl"))
            .args(&args)
            .env("RUST_BACKTRACE", "1")
            .output()
            .expect("run noftl");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("needs about") && err.contains("is available"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("panicked") && !err.contains("backtrace"),
            "{err}"
        );
    }
}

/// Item 5: 4 billion terminals used to grow the process until the OOM killer came; now the run
/// is refused before loading, with the terminals' share of the memory in the message.
#[test]
fn too_many_terminals_are_refused_before_loading_not_oom_killed() {
    let (ok, _, err) = noftl(&["bench", "tpcb", "--terminals", "4000000000", "--txns", "1"]);
    assert!(!ok);
    assert!(err.contains("4000000000 terminals"), "{err}");
    let (ok, _, err) = noftl(&["bench", "tpcb", "--scale", "100000", "--txns", "1"]);
    assert!(!ok);
    assert!(err.contains("--scale"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Item 5: a request size or queue depth that would allocate terabytes is refused.
#[test]
fn huge_request_size_and_queue_depth_are_refused() {
    let (ok, _, err) = noftl(&[
        "io", "--target", "page", "--preset", "tiny", "--bs", "1T", "--ops", "1",
    ]);
    assert!(!ok && err.contains("--bs is at most"), "{err}");
    let (ok, _, err) = noftl(&[
        "io",
        "--target",
        "page",
        "--preset",
        "tiny",
        "--qd",
        "4294967295",
        "--ops",
        "1",
    ]);
    assert!(!ok && err.contains("--qd is at most"), "{err}");
}

/// Item 6: `--txns 0` and `crashtest --seeds 0` used to report success on nothing.
#[test]
fn zero_transactions_and_zero_seeds_are_refused_not_reported_as_success() {
    let (ok, _, err) = noftl(&["bench", "tpcb", "--txns", "0"]);
    assert!(
        !ok && err.contains("--txns must be at least 1, got 0"),
        "{err}"
    );
    let (ok, _, err) = noftl(&["bench", "tatp", "--txns", "0"]);
    assert!(!ok && err.contains("--txns must be at least 1"), "{err}");
    let (ok, _, err) = noftl(&["crashtest", "--seeds", "0"]);
    assert!(
        !ok && err.contains("--seeds must be at least 1, got 0"),
        "{err}"
    );
    let (ok, _, err) = noftl(&["crashtest", "--seeds", "1", "--txns", "0"]);
    assert!(!ok && err.contains("--txns must be at least 1"), "{err}");
    let (ok, _, err) = noftl(&["bench", "tpcb", "--txns", "1", "--buffer-pages", "0"]);
    assert!(
        !ok && err.contains("--buffer-pages must be at least"),
        "{err}"
    );
}
