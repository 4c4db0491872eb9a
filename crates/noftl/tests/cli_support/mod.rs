//! Running the `noftl` binary from integration tests.
#![allow(dead_code)] // each test file uses its own subset

use std::process::Command;

/// Runs `noftl` with `args`: (success, stdout, stderr).
pub fn noftl(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args(args)
        .output()
        .expect("run noftl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `noftl` with `args`, which must succeed, and parses its standard output as JSON.
pub fn noftl_json(args: &[&str]) -> serde_json::Value {
    let (ok, out, err) = noftl(args);
    assert!(ok, "{args:?}: {err}");
    serde_json::from_str(&out).expect("JSON")
}
