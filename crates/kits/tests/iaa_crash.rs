//! The IAA workload's crash test (kits::crash_iaa) with IAA and U2DI on: every seed recovers to
//! the terminals' model, on the page FTL and on the native store, and the rounds do move rows
//! into the victims' pages before their cuts (U2DI, IAA).

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use kits::crash::{CrashOptions, Fault, FlashMedium, Medium};
use kits::crash_iaa::{crash_iaa_once, exercised};

fn sweep(o: &CrashOptions, seeds: std::ops::Range<u64>) {
    let mut bad = Vec::new();
    let mut hits = 0;
    for seed in seeds.clone() {
        let out = crash_iaa_once(seed, o).unwrap();
        hits += u64::from(out.fault_hit);
        if !out.verified() {
            bad.push(format!("seed {seed}: {:?}", out.violations));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
    assert!(
        hits * 10 >= (seeds.end - seeds.start) * 8,
        "only {hits} faults fell inside the workload"
    );
}

fn options(medium: Medium) -> CrashOptions {
    CrashOptions {
        medium,
        fault: Fault::PowerCut,
        terminals: 2,
        txns_per_terminal: 150,
        ..CrashOptions::default()
    }
}

/// The counters of `exercised` are global, so the stores run one after the other in one test.
/// The last runs the native store on 16 KiB flash pages with 16 KiB DB pages (the IAA paper's
/// page size).
#[test]
fn power_cuts_during_iaa_and_u2di_recover_on_the_page_ftl_and_native() {
    let native_16k = Medium::Native(kits::crash::NativeDevice {
        overrides: vec![
            "geometry.page_size_bytes=16384".into(),
            "geometry.oob_size_bytes=512".into(),
        ],
        ..Default::default()
    });
    for (medium, page_bytes, seeds) in [
        (
            Medium::Flash(FlashMedium::new("page").unwrap()),
            4096,
            0..12,
        ),
        (Medium::Native(Default::default()), 4096, 0..12),
        (native_16k, 16384, 0..8),
    ] {
        let (moved0, hinted0) = exercised();
        let name = format!("{} with {page_bytes}-byte pages", medium.name());
        let o = CrashOptions {
            page_bytes,
            ..options(medium)
        };
        sweep(&o, seeds);
        let (moved, hinted) = exercised();
        assert!(
            moved > moved0 && hinted > hinted0,
            "{name}: no row moved ({}) or went to a hinted page ({}) before the cuts",
            moved - moved0,
            hinted - hinted0
        );
    }
}
