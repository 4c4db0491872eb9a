//! The command line's surface: every argument and subcommand described, one spelling per idea
//! (`--json [FILE|-]`, `--store`, `--clock virtual|real|none`) on every verb, old spellings kept.

use std::collections::BTreeSet;

use clap::{CommandFactory, Parser};

use super::Cli;

fn walk(cmd: &clap::Command, path: &str, problems: &mut Vec<String>) {
    let mut longs = BTreeSet::new();
    for a in cmd.get_arguments() {
        let id = a.get_id().as_str();
        if id == "help" || id == "version" {
            continue;
        }
        let help = a.get_help().or(a.get_long_help()).map(|h| h.to_string());
        if help.as_deref().is_none_or(|h| h.trim().is_empty()) {
            problems.push(format!("{path}: argument {id} has no help"));
        }
        let names = a
            .get_long()
            .into_iter()
            .chain(a.get_all_aliases().into_iter().flatten());
        for l in names {
            if !longs.insert(l.to_string()) {
                problems.push(format!("{path}: --{l} is spelled twice"));
            }
        }
    }
    for s in cmd.get_subcommands() {
        let p = format!("{path} {}", s.get_name());
        if s.get_name() == "help" {
            continue;
        }
        let about = s.get_about().or(s.get_long_about()).map(|h| h.to_string());
        if about.as_deref().is_none_or(|h| h.trim().is_empty()) {
            problems.push(format!("{p}: subcommand has no description"));
        }
        walk(s, &p, problems);
    }
}

#[test]
fn the_command_tree_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn every_argument_and_subcommand_is_described() {
    let mut problems = vec![];
    walk(&Cli::command(), "noftl", &mut problems);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn parsed(args: &str) -> Result<String, String> {
    Cli::try_parse_from(std::iter::once("noftl").chain(args.split_whitespace()))
        .map(|c| format!("{:?}", c.command))
        .map_err(|e| e.to_string())
}

fn same(a: &str, b: &str) {
    let (x, y) = (parsed(a), parsed(b));
    assert!(x.is_ok(), "noftl {a}: {x:?}");
    assert_eq!(x, y, "noftl {a} and noftl {b} differ");
}

/// Every verb with JSON output, with the arguments it needs to parse.
const JSON_VERBS: &[&str] = &[
    "io",
    "crashtest",
    "fsck --image x.img",
    "device show",
    "ftl memory",
    "bench tpcb",
    "bench tatp",
    "bench tpcc",
    "bench tpch",
    "compare",
    "iaa compare",
    "ipa compare",
    "ipa advise",
    "fs waf",
    "fs bench",
];

#[test]
fn json_takes_an_optional_file_everywhere() {
    for v in JSON_VERBS {
        same(&format!("{v} --json"), &format!("{v} --json -"));
        let with_file = parsed(&format!("{v} --json out.json"));
        assert!(
            with_file.as_ref().is_ok_and(|d| d.contains("\"out.json\"")),
            "{v}: {with_file:?}"
        );
        assert!(
            parsed(v).is_ok_and(|d| !d.contains("\"-\"")),
            "{v} without --json"
        );
    }
}

/// (verb, its old spelling of the store, a value).
const STORE_VERBS: &[(&str, &str, &str)] = &[
    ("io", "--target", "dftl"),
    ("serve --socket s.sock", "--target", "dftl"),
    ("mount /mnt --fs f2fs", "--target", "dftl"),
    ("fsck --image x.img --fs f2fs", "--target", "dftl"),
    ("crashtest", "--storage", "page"),
    ("bench tpcb", "--storage", "native"),
    ("bench tatp", "--storage", "native"),
    ("bench tpcc", "--storage", "native"),
    ("bench tpch", "--storage", "native"),
    ("compare", "--stores", "native,page"),
    ("iaa compare", "--storage", "native"),
    ("ipa compare", "--configs", "baseline,ipa-global"),
    ("ipa advise", "--configs", "baseline"),
    ("fs waf", "--configs", "ext4:page,alfs:amf"),
    ("fs bench", "--ext4-target", "dftl"),
];

#[test]
fn store_is_one_spelling_and_the_old_ones_still_parse() {
    for (v, old, value) in STORE_VERBS {
        let new = format!("{v} --store {value}");
        same(&new, &format!("{v} {old} {value}"));
        let default = parsed(v);
        assert_ne!(parsed(&new), default, "{new}: the value was not taken");
    }
}

/// (verb, the clock modes it runs in, its default).
const CLOCK_VERBS: &[(&str, &[&str])] = &[
    ("io", &["virtual", "real", "none"]),
    ("serve --socket s.sock", &["real", "none"]),
    ("mount /mnt", &["real", "none"]),
    ("fs bench", &["real", "none"]),
    ("bench tpcb", &["virtual", "real"]),
    ("bench tatp", &["virtual", "real"]),
    ("bench tpcc", &["virtual"]),
];

#[test]
fn clock_is_parsed_the_same_way_everywhere() {
    for (v, supported) in CLOCK_VERBS {
        for mode in super::clock::MODES {
            let r = parsed(&format!("{v} --clock {mode}"));
            if supported.contains(&mode) {
                assert!(r.is_ok(), "{v} --clock {mode}: {r:?}");
            } else {
                let e = r.expect_err(&format!("{v} --clock {mode} must be refused"));
                let wanted = format!(
                    "does not run with --clock {mode}: it supports --clock {}",
                    supported.join("|")
                );
                assert!(e.contains(&wanted), "{v} --clock {mode}: {e}");
            }
        }
        let bad = parsed(&format!("{v} --clock sundial")).expect_err("an unknown clock");
        assert!(
            bad.contains("virtual") && bad.contains("real") && bad.contains("none"),
            "{v}: {bad}"
        );
    }
}
