//! `noftl ipa compare`: IPA Table I's rows on a small SLC device, their statistics, and refusals.

mod cli_support;
use cli_support::{noftl, noftl_json};

/// `noftl ipa VERB` on a small SLC device (tiny, 64 blocks per plane), TATP with 1,500
/// subscribers, preconditioning to half a device write, 1 s steady-state rounds and a window
/// of `window`, as JSON.
fn small_tatp(verb: &str, window: &str) -> serde_json::Value {
    noftl_json(&[
        "ipa",
        verb,
        "--preset",
        "tiny",
        "--set",
        "geometry.blocks_per_plane=64",
        "--scale",
        "1500",
        "--precondition",
        "0.5",
        "--round",
        "1s",
        "--duration",
        window,
        "--json",
        "-",
    ])
}

#[test]
fn ipa_compare_reports_appends_only_where_ipa_is_on_and_checks_its_windows() {
    let v = small_tatp("compare", "1s");
    assert_eq!(v["workload"], "tatp");
    assert_eq!(
        v["ipa_mode"], "SLC",
        "SLC chips append in their native mode: {v}"
    );
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["config"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "baseline",
            "regions",
            "ipa-regions",
            "advised",
            "ipa-advised",
            "global",
            "ipa-global"
        ]
    );
    let advised: Vec<&str> = v["advised_tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(advised.contains(&"subscriber"), "{v}");
    for r in rows {
        let appends = r["ipa_appends"].as_u64().unwrap();
        let writes = r["host_writes"].as_u64().unwrap();
        assert!(appends <= writes, "{r}");
        if r["config"].as_str().unwrap().starts_with("ipa") {
            assert!(appends > 0, "IPA rows append: {r}");
            assert!(r["space_overhead"].as_f64().unwrap() > 0.0, "{r}");
        } else {
            assert_eq!(appends, 0, "no appends without IPA: {r}");
        }
        assert_eq!(r["consistency"]["status"], "ok", "{r}");
        // The steady-state rule ran before the window: at least the five rounds of its window
        // unless it gave up at the cap, and the device written over at least half a time.
        let s = &r["steady_state"];
        assert!(s["criterion"].as_str().unwrap().contains("SNIA"), "{s}");
        let rounds = s["rounds"].as_u64().unwrap();
        assert!(rounds >= 5 || s["met"] == false, "{s}");
        assert!(s["device_writes"].as_f64().unwrap() >= 0.5, "{s}");
        assert!(r["throughput_tps"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn ipa_compare_refuses_what_it_cannot_run_before_loading() {
    for (args, why) in [
        (vec!["--workload", "tpch"], "tatp, tpcb or tpcc"),
        (
            vec!["--workload", "tpcb", "--configs", "ipa-regions"],
            "TATP's",
        ),
        (vec!["--scheme", "9x9"], "cell.nop"),
        (vec!["--scheme", "2y3"], "not NxM"),
        (vec!["--region-chips", "4"], "keeps at least one"),
        (vec!["--configs", "fancy"], "not one of"),
    ] {
        let mut all = vec!["ipa", "compare", "--scale", "100", "--duration", "1s"];
        all.extend(args.iter().copied());
        let (ok, _, err) = noftl(&all);
        assert!(!ok && err.contains(why), "{args:?}: {err}");
    }
}

#[test]
fn ipa_advise_recommends_the_tables_with_small_frequent_updates() {
    let v = small_tatp("advise", "2s");
    let objects = v["objects"].as_array().unwrap();
    let sub = objects.iter().find(|o| o["name"] == "subscriber").unwrap();
    assert_eq!(
        sub["ipa"], true,
        "TATP's Subscriber updates change a few bytes: {sub}"
    );
    assert!(sub["fit_percent"].as_f64().unwrap() > 50.0, "{sub}");
    let ddl = v["ddl"].as_array().unwrap();
    assert!(
        ddl[0]
            .as_str()
            .unwrap()
            .starts_with("CREATE REGION rg_ipa ("),
        "{v}"
    );
    assert!(ddl[0].as_str().unwrap().contains("IPA_MODE=SLC"), "{v}");
    let share: f64 = objects
        .iter()
        .map(|o| o["share_percent"].as_f64().unwrap())
        .sum();
    assert!(
        (share - 100.0).abs() < 0.01,
        "shares add up to all write-backs: {share}"
    );
}
