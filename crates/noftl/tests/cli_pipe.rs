//! A reader that goes away early (`noftl ... | head`) ends the program quietly, as with any Unix
//! tool, instead of a panic on the broken pipe (a panic on ordinary use is a bug).

use std::process::{Command, Stdio};

#[test]
fn a_closed_pipe_ends_the_output_without_a_panic() {
    // Completion scripts are tens of kilobytes: more than a pipe buffer, so the writer meets
    // the closed pipe.
    let mut child = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("noftl starts");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("noftl ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked"),
        "a closed pipe made noftl panic: {stderr}"
    );
}
