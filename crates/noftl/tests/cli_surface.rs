//! The command line's generated documentation: shell completions and man pages come out of the
//! binary, and each benchmark's `--help` describes its own flags.

use std::process::Command;

fn noftl(args: &[&str]) -> std::process::Output {
    let out = Command::new(env!("CARGO_BIN_EXE_noftl"))
        .args(args)
        .output()
        .expect("run noftl");
    assert!(
        out.status.success(),
        "noftl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(args: &[&str]) -> String {
    String::from_utf8(noftl(args).stdout).expect("utf-8")
}

/// A figure names the code that made it: the version, the commit (or "unknown" outside git)
/// and its date.
#[test]
fn version_names_the_commit_and_its_date() {
    let v = stdout(&["--version"]);
    let rest = v
        .trim()
        .strip_prefix(concat!("noftl ", env!("CARGO_PKG_VERSION"), " ("))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{v}"));
    let (commit, date) = rest.split_once(' ').unwrap_or_else(|| panic!("{v}"));
    let hex = commit.trim_end_matches("-modified");
    assert!(
        hex == "unknown" || (hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_hexdigit())),
        "{v}"
    );
    assert!(
        date == "unknown" || (date.len() == 10 && date.as_bytes()[4] == b'-'),
        "{v}"
    );
}

#[test]
fn completions_come_out_for_every_shell() {
    let bash = stdout(&["completions", "bash"]);
    assert!(bash.contains("noftl"), "{bash}");
    assert!(bash.contains("--store") && bash.contains("--clock"));
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        assert!(stdout(&["completions", shell]).contains("noftl"), "{shell}");
    }
}

#[test]
fn man_writes_a_page_per_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    noftl(&["man", "--out", dir.path().to_str().expect("utf-8 path")]);
    for page in [
        "noftl.1",
        "noftl-io.1",
        "noftl-bench.1",
        "noftl-bench-tpcb.1",
        "noftl-bench-tatp.1",
        "noftl-bench-tpcc.1",
        "noftl-bench-tpch.1",
        "noftl-ipa-compare.1",
        "noftl-iaa-compare.1",
        "noftl-fs-waf.1",
        "noftl-completions.1",
        "noftl-man.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page))
            .unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page} is not roff"
        );
    }
    let top = stdout(&["man"]);
    assert!(top.contains(".TH") && top.contains("noftl"));
}

/// The help line of one flag (the flag's line and its wrapped continuation).
fn flag_help(help: &str, flag: &str) -> String {
    let mut lines = help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(flag));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("{flag} not in:\n{help}"));
    let rest = lines.take_while(|l| !l.trim_start().starts_with('-'));
    std::iter::once(first)
        .chain(rest)
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn each_benchmark_describes_its_own_flags() {
    let tatp = stdout(&["bench", "tatp", "--help"]);
    let scale = flag_help(&tatp, "--scale");
    assert!(scale.contains("Subscribers"), "{scale}");
    assert!(!scale.to_lowercase().contains("branch"), "{scale}");
    let check = flag_help(&tatp, "--check");
    assert!(
        check.contains("TATP") && !check.contains("TPC-B"),
        "{check}"
    );
    let path = flag_help(&tatp, "--path");
    assert!(
        !path.contains("reused if it holds a TPC-B database"),
        "{path}"
    );

    let tpcc = stdout(&["bench", "tpcc", "--help"]);
    assert!(flag_help(&tpcc, "--scale").contains("Warehouses"));
    assert!(flag_help(&tpcc, "--check").contains("TPC-C"));

    let tpcb = stdout(&["bench", "tpcb", "--help"]);
    assert!(flag_help(&tpcb, "--scale").contains("Branches"));
}
