//! The presets against the figures they were taken from, in virtual time.
//!
//! `amf-slides` (presets/amf-slides.toml): tR and tPROG were derived from the AMF slides'
//! random-read and random-write IOPS (the calibration set: each divided over the 32 dies, less a
//! page on the bus); the sequential figures are held out. All four are run here through the
//! same paths a user takes (`io` on the raw flash for reads, on the page FTL for writes, fresh
//! device: no GC), at a queue depth that keeps every die busy, and must land within 10%.

use lab::device::DeviceSpec;
use lab::experiments::io::{self, Quiet};
use lab::targets::{FtlKnobs, TargetSpec};

/// One `io` run on the preset: `rw` on `target`, QD 256, `ops` requests of 4 KiB.
fn run(target: &str, rw: &str, ops: u64) -> io::IoResult {
    let spec = io::Spec {
        target: TargetSpec {
            target: target.into(),
            device: DeviceSpec {
                preset: "amf-slides".into(),
                config: None,
                set: Vec::new(),
            },
            knobs: FtlKnobs::default(),
            image: None,
        },
        rw: Some(rw.into()),
        qd: 256,
        ops: Some(ops),
        ..io::Spec::default()
    };
    let r = io::run(&spec, &mut Quiet).expect("io runs on amf-slides");
    // Every figure within the physical bounds of its own counters.
    assert_eq!(
        r.consistency.status, "ok",
        "{rw} on {target}: {:?}",
        r.consistency
    );
    r
}

#[test]
fn amf_slides_preset_gives_the_slides_raw_performance() {
    let mb_s = |r: &io::IoResult| r.iops * 4096.0 / 1e6;
    let cells = [
        (
            "RR IOPS",
            "calibration",
            240_000.0,
            run("raw", "randread", 100_000).iops,
        ),
        (
            "RW IOPS",
            "calibration",
            67_000.0,
            run("page", "randwrite", 50_000).iops,
        ),
        (
            "SR MB/s",
            "held out",
            930.0,
            mb_s(&run("raw", "read", 100_000)),
        ),
        (
            "SW MB/s",
            "held out",
            260.0,
            mb_s(&run("page", "write", 50_000)),
        ),
    ];
    for (name, set, slides, ours) in cells {
        let error = ours / slides - 1.0;
        println!(
            "{name:<8} {set:<12} slides {slides:>9.0} ours {ours:>9.0} ({:+.1}%)",
            error * 100.0
        );
        assert!(
            error.abs() <= 0.10,
            "{name}: {ours:.0} against the slides' {slides}"
        );
    }
}
