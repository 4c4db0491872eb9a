//! `noftl crashtest --storage native`: power cuts at random flash operations under the NoFTL page
//! store, recovered from the flash alone and verified.

use std::process::Command;

#[test]
fn crashtest_on_native_verifies_every_recovery() {
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args([
            "crashtest",
            "--workload",
            "tpcb",
            "--storage",
            "native",
            "--seeds",
            "8",
            "--json",
        ])
        .output()
        .expect("run noftl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["storage"], "native");
    assert_eq!(v["seeds"], 8);
    assert_eq!(v["verified"], 8, "{v}");
    assert!(
        v["faults_inside_workload"].as_u64().unwrap_or(0) > 0,
        "some cuts must land inside the workload: {v}"
    );
}

#[test]
fn crashtest_on_native_cuts_power_again_during_recovery_and_verifies() {
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args([
            "crashtest",
            "--workload",
            "tpcb",
            "--storage",
            "native",
            "--recovery-crash",
            "--seeds",
            "6",
            "--json",
        ])
        .output()
        .expect("run noftl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["verified"], 6, "{v}");
    assert!(
        v["recovery_cuts_inside_restart"].as_u64().unwrap_or(0) > 0,
        "some second cuts must land inside the restart: {v}"
    );
}

#[test]
fn crashtest_options_native_cannot_honour_are_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args([
            "crashtest",
            "--workload",
            "tpcb",
            "--storage",
            "native",
            "--torn",
            "--seeds",
            "1",
        ])
        .output()
        .expect("run noftl");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--torn is for the crash disk"));
}

#[test]
fn compare_paper_refuses_workloads_seed_000_gives_no_scales_for() {
    for args in [
        &["compare", "--paper", "--workload", "tatp"][..],
        &["compare", "--paper", "--scale", "3"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
            .args(args)
            .output()
            .expect("run noftl");
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--paper") || err.contains("cannot be used with"),
            "{args:?}: {err}"
        );
    }
}
