//! `noftl io --replay`: the shipped traces (examples/traces/, one per format, all of the same
//! 600 requests; scripts/make_traces.py) replay to the same figures in every format, on every
//! kind of block target; fio's own trace reader counts what ours counts; pacing by the trace's
//! times and as fast as possible differ as they should; bad input is refused before any work.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cli_support;
use cli_support::{noftl, noftl_json};

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const TRACES: [(&str, &str); 3] = [
    ("blktrace", "small.blktrace"),
    ("msr", "small.msr.csv"),
    ("iolog", "small.iolog"),
];

fn trace(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/traces")
        .join(file)
}

fn replay(format: &str, file: &str, extra: &[&str]) -> Value {
    let t = trace(file);
    let mut args = vec![
        "io",
        "--replay",
        t.to_str().unwrap(),
        "--format",
        format,
        "--preset",
        "tiny",
        "--set",
        "geometry.blocks_per_plane=128",
        "--json",
    ];
    args.extend(extra);
    noftl_json(&args)
}

/// The figures of a replay, without what names the file.
fn figures(mut v: Value) -> Value {
    let r = v["replay"].as_object_mut().unwrap();
    r.remove("file");
    r.remove("format");
    r.remove("skipped");
    v
}

#[test]
fn every_format_replays_the_same_requests_to_the_same_figures() {
    let runs: Vec<Value> = TRACES
        .iter()
        .map(|(f, file)| replay(f, file, &["--target", "page"]))
        .collect();
    let r = &runs[0]["replay"];
    assert_eq!(r["requests"], 600);
    assert_eq!(r["reads"], 409);
    assert_eq!(r["writes"], 191);
    assert_eq!(r["folded"], 2, "the two requests at 2 and 3 GiB");
    assert_eq!(
        r["peak_in_flight"].as_u64().unwrap(),
        runs[0]["qd"].as_u64().unwrap()
    );
    // blktrace: a process note plus each request's dispatch and completion are no request.
    assert_eq!(r["skipped"], 1 + 2 * 600);
    let first = figures(runs[0].clone());
    for (run, (f, _)) in runs.iter().zip(TRACES).skip(1) {
        assert_eq!(figures(run.clone()), first, "{f} against blktrace");
    }
    // At the trace's own pace the device keeps up: the run spans the trace.
    let span = r["trace_seconds"].as_f64().unwrap();
    let secs = runs[0]["virtual_seconds"].as_f64().unwrap();
    assert!(secs >= span && secs < span + 0.01, "{secs} vs {span}");
    // Every page the trace wrote reached the FTL.
    assert!(runs[0]["host"]["writes"].as_u64().unwrap() >= 191);
}

#[test]
fn as_fast_as_possible_is_faster_than_the_trace_and_every_target_replays() {
    let paced = replay("msr", "small.msr.csv", &["--target", "page"]);
    let afap = replay(
        "msr",
        "small.msr.csv",
        &["--target", "page", "--replay-pace", "afap", "--qd", "8"],
    );
    let (p, a) = (
        paced["virtual_seconds"].as_f64().unwrap(),
        afap["virtual_seconds"].as_f64().unwrap(),
    );
    assert!(a < p / 2.0, "afap {a} s against the trace's {p} s");
    assert_eq!(afap["replay"]["pace"], "afap");
    assert_eq!(afap["qd"], 8);
    for target in ["dftl", "memdisk", "block", "fast"] {
        let v = replay("iolog", "small.iolog", &["--target", target]);
        assert_eq!(v["ops"], 600, "{target}");
        assert_eq!(v["consistency"]["status"], "ok", "{target}: {v}");
    }
}

/// fio reads our blktrace and iolog files (`--read_iolog`, its own parsers) and counts the same
/// reads and writes as our replay.
#[test]
fn fio_reads_the_shipped_traces_as_we_do() {
    if !Command::new("fio")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("SKIPPED: no fio");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dev = d.path().join("dev");
    std::fs::File::create(&dev)
        .unwrap()
        .set_len(4 << 30)
        .unwrap();
    for (_, file) in TRACES.iter().filter(|(f, _)| *f != "msr") {
        let out = Command::new("fio")
            .args(["--name=r", "--ioengine=null", "--replay_no_stall=1"])
            .arg(format!("--read_iolog={}", trace(file).display()))
            .arg(format!("--replay_redirect={}", dev.display()))
            .arg("--output-format=json")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Value = serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
        let job = &v["jobs"][0];
        assert_eq!(job["read"]["total_ios"], 409, "{file}");
        assert_eq!(job["write"]["total_ios"], 191, "{file}");
    }
}

#[test]
fn bad_replays_are_refused_before_any_work() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.csv");
    std::fs::write(&bad, "128166372000000500,h,0,Erase,0,4096,1\n").unwrap();
    let (ok, _, err) = noftl(&["io", "--replay", bad.to_str().unwrap(), "--format", "msr"]);
    assert!(
        !ok && err.contains("line 1") && err.contains("bad.csv"),
        "{err}"
    );
    let t = trace("small.iolog");
    let t = t.to_str().unwrap();
    let (ok, _, err) = noftl(&["io", "--replay", t]);
    assert!(!ok && err.contains("--format"), "{err}");
    let (ok, _, err) = noftl(&["io", "--replay", t, "--format", "iolog", "--target", "raw"]);
    assert!(!ok && err.contains("block targets"), "{err}");
    let (ok, _, err) = noftl(&["io", "--replay", t, "--format", "iolog", "--rw", "read"]);
    assert!(!ok && err.contains("--rw"), "{err}");
    let (ok, _, err) = noftl(&["io", "--replay", t, "--format", "tar"]);
    assert!(!ok && err.contains("blktrace, msr, iolog"), "{err}");
}
