//! `noftl crashtest --storage native --ipa`: power cuts under In-Place Appends, some of them on
//! the appends themselves (torn delta slots), recovered from the flash alone and verified.

mod cli_support;
use cli_support::{noftl, noftl_json};

fn ipa_crashtest(workload: &str, seeds: &str) -> serde_json::Value {
    noftl_json(&[
        "crashtest",
        "--workload",
        workload,
        "--storage",
        "native",
        "--ipa",
        "MAX_CHIPS=2,IPA_MODE=SLC,IPA_SCHEME=3x2",
        "--set",
        "geometry.blocks_per_plane=16",
        "--seeds",
        seeds,
        "--json",
    ])
}

#[test]
fn tpcb_crashes_under_in_place_appends_lose_nothing_even_when_an_append_is_cut() {
    let v = ipa_crashtest("tpcb", "200");
    assert_eq!(v["verified"], 200, "{v}");
    let on_appends = v["faults_landed_on"]["partialprogram host"]
        .as_u64()
        .unwrap_or(0);
    assert!(on_appends > 0, "some cuts must land on appends: {v}");
}

#[test]
fn tpcc_crashes_under_in_place_appends_lose_nothing() {
    let v = ipa_crashtest("tpcc", "8");
    assert_eq!(v["verified"], 8, "{v}");
}

#[test]
fn ipa_options_are_checked_before_any_seed_runs() {
    for (args, why) in [
        (
            vec!["--storage", "page", "--ipa", "MAX_CHIPS=1,IPA_MODE=SLC"],
            "native store",
        ),
        (
            vec!["--storage", "native", "--ipa", "MAX_CHIPS=1"],
            "IPA_MODE",
        ),
        (
            vec!["--storage", "native", "--ipa", "MAX_CHIPS=1,IPA_MODE=pSLC"],
            "MLC or TLC",
        ),
    ] {
        let mut all = vec!["crashtest", "--workload", "tpcb", "--seeds", "1"];
        all.extend(args.iter().copied());
        let (ok, _, err) = noftl(&all);
        assert!(!ok && err.contains(why), "{args:?}: {err}");
    }
}
