//! Runs the Python package's tests (`test_noftl.py`, pytest) with the repository's `.venv`,
//! where `scripts/install-test-deps.sh` builds the package. Without that environment (no
//! Python, or the package not built: `cargo test` alone) it skips with the reason printed.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_python_package_passes_its_tests() {
    let python = repo().join(".venv/bin/python");
    let ready = python.exists()
        && Command::new(&python)
            .args(["-c", "import noftl, pytest"])
            .current_dir(std::env::temp_dir())
            .output()
            .is_ok_and(|o| o.status.success());
    if !ready {
        eprintln!(
            "skipped: the Python package noftl or pytest is not installed in {} (./scripts/test builds it)",
            python.display()
        );
        return;
    }
    let tests = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests");
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(&tests)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run pytest");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "pytest failed:\n{text}");
    assert!(text.contains("passed"), "pytest ran no test:\n{text}");
}
