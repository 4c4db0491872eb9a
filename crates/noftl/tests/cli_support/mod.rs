//! Running the `noftl` binary from integration tests.
#![allow(dead_code)] // each test file uses its own subset

use std::collections::HashMap;
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

/// The Python with `ray`: NOFTL_PYTHON, or the repository's .venv that the test command fills.
pub fn ray_python() -> Option<String> {
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    let candidates = std::env::var("NOFTL_PYTHON")
        .ok()
        .into_iter()
        .chain([venv.to_string_lossy().into_owned(), "python3".into()]);
    for py in candidates {
        let ok = std::process::Command::new(&py)
            .args(["-c", "import ray"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(py);
        }
    }
    None
}

/// One local Ray instance at a time in a test binary: the Ray tests hold this lock.
static RAY: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// For a test on a local Ray instance: the lock on it and the Python with `ray`; `None`, after
/// a SKIP line that says why, when `ray` is not installed.
pub fn ray_or_skip() -> Option<(std::sync::MutexGuard<'static, ()>, String)> {
    let one = RAY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(python) = ray_python() else {
        eprintln!("SKIP: the Python package `ray` is not installed (scripts/install-test-deps.sh installs it into .venv)");
        return None;
    };
    Some((one, python))
}

/// The attributes of every `<rect .../>` of an SVG document.
pub fn svg_rects(svg: &str) -> Vec<HashMap<String, String>> {
    svg_elements(svg, "rect")
}

/// The attributes of every empty element `<name .../>` of an SVG document.
pub fn svg_elements(svg: &str, name: &str) -> Vec<HashMap<String, String>> {
    svg.split(&format!("<{name} "))
        .skip(1)
        .map(|r| {
            let tag = &r[..r.find("/>").expect("an empty element ends in />")];
            tag.split('"')
                .collect::<Vec<_>>()
                .chunks(2)
                .filter(|kv| kv.len() == 2)
                .map(|kv| {
                    (
                        kv[0].trim().trim_end_matches('=').to_string(),
                        kv[1].to_string(),
                    )
                })
                .collect()
        })
        .collect()
}

/// The text of every `<text>` element of an SVG document.
pub fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text ")
        .skip(1)
        .map(|t| {
            let start = t.find('>').expect("a <text> tag ends") + 1;
            let body = &t[start..t.find("</text>").expect("a <text> element is closed")];
            body.trim().to_string()
        })
        .collect()
}
