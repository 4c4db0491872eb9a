//! The timing model: latency of one operation, die parallelism, channel saturation, determinism.
#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use nand::workload::{run_closed_loop, RawPattern, RawWorkload};
use nand::Nand;

/// Runs `ops` requests of the raw workload at queue depth `qd`; returns (ops/s, mean latency s).
fn run(n: &mut Nand, pattern: RawPattern, qd: u32, ops: u64) -> (f64, f64) {
    let mut w = RawWorkload::new(n, pattern, u64::from(n.geometry().page_size_bytes), 7).unwrap();
    let start = n.now_ns();
    let r = run_closed_loop(start, qd, ops, |_, _, at| w.submit(n, at), |_| {}).unwrap();
    (r.ops_per_second(), r.latency_ns.mean() / 1e9)
}

// tiny: 35 ns command cycles, 4096 B at 200 MT/s = 20,480 ns on the bus, tR 25 us, tPROG 200 us.
const READ_NS: f64 = 35.0 + 25_000.0 + 20_480.0;

#[test]
fn a_read_takes_command_array_and_transfer_time() {
    let mut n = dev("tiny", &[]);
    let mut d = page(&n, 0);
    let done = n.read(1_000, nand::Ppn(0), &mut d, &mut [], H).unwrap();
    assert_eq!(done.done_ns - 1_000, READ_NS as u64);
    let done = n.program(0, nand::Ppn(0), &d, &[], H).unwrap();
    // The die is busy until the read ends, so the program starts then.
    assert_eq!(done.start_ns, 1_000 + READ_NS as u64);
}

#[test]
fn one_die_at_qd1_iops_times_latency_is_one() {
    let mut n = dev(
        "tiny",
        &["geometry.channels=1", "geometry.chips_per_channel=1"],
    );
    let (iops, lat) = run(&mut n, RawPattern::Randread, 1, 2_000);
    assert!(
        (iops * lat - 1.0).abs() < 1e-3,
        "iops {iops} x latency {lat} = {}",
        iops * lat
    );
    // The latency histogram keeps 3 significant digits.
    assert!(
        (lat * 1e9 / READ_NS - 1.0).abs() < 1e-3,
        "latency {} ns",
        lat * 1e9
    );
    let (iops, lat) = run(&mut n, RawPattern::Write, 1, 200);
    assert!((iops * lat - 1.0).abs() < 1e-3, "writes: {}", iops * lat);
}

#[test]
fn n_dies_on_their_own_channels_at_qd_n_give_n_times_one_die() {
    let one = run(
        &mut dev(
            "tiny",
            &["geometry.channels=1", "geometry.chips_per_channel=1"],
        ),
        RawPattern::Read,
        1,
        4_000,
    )
    .0;
    for dies in [2u32, 4, 8] {
        let set = format!("geometry.channels={dies}");
        let mut n = dev("tiny", &[&set, "geometry.chips_per_channel=1"]);
        let many = run(&mut n, RawPattern::Read, dies, 4_000).0;
        let ratio = many / one;
        assert!(
            (ratio / f64::from(dies) - 1.0).abs() < 0.02,
            "{dies} dies: {ratio:.3}x one die"
        );
    }
}

#[test]
fn programs_on_dies_sharing_a_channel_overlap_their_array_time() {
    // Programs hold the bus for 20.5 us and the die for 220.5 us: 4 dies on one channel nearly 4x.
    let one = run(
        &mut dev(
            "tiny",
            &["geometry.channels=1", "geometry.chips_per_channel=1"],
        ),
        RawPattern::Write,
        1,
        400,
    )
    .0;
    let four = run(
        &mut dev(
            "tiny",
            &["geometry.channels=1", "geometry.chips_per_channel=4"],
        ),
        RawPattern::Write,
        4,
        1_600,
    )
    .0;
    let ratio = four / one;
    assert!(ratio > 3.8 && ratio <= 4.0 + 1e-9, "{ratio:.3}");
}

#[test]
fn a_shared_channel_saturates_at_its_transfer_rate() {
    // 8 dies on one channel reading: each read moves 4096 B over the bus, 20,480 ns at 200 MT/s.
    let mut n = dev(
        "tiny",
        &["geometry.channels=1", "geometry.chips_per_channel=8"],
    );
    let (iops, _) = run(&mut n, RawPattern::Read, 32, 20_000);
    let bus_limit = 1e9 / 20_480.0;
    assert!(
        iops <= bus_limit * (1.0 + 1e-9),
        "{iops} above the bus limit {bus_limit}"
    );
    assert!(
        iops > bus_limit * 0.98,
        "{iops} well below the bus limit {bus_limit}"
    );
    let mib_per_s = iops * 4096.0 / (1 << 20) as f64;
    assert!(
        (mib_per_s - 200e6 / (1 << 20) as f64).abs() / mib_per_s < 0.02,
        "{mib_per_s} MiB/s vs 200 MT/s"
    );
}

#[test]
fn the_same_calls_give_the_same_times_counters_and_energy() {
    let report = |seed: &str| {
        let mut n = dev("tiny", &[seed, "reliability.rber_fresh=1e-4"]);
        run(&mut n, RawPattern::Write, 3, 300);
        run(&mut n, RawPattern::Randread, 5, 3_000);
        n.report()
    };
    let a = report("seed=5");
    assert_eq!(a, report("seed=5"));
    assert!(a.ecc.corrected_bits > 0);
    assert_ne!(
        a.ecc,
        report("seed=6").ecc,
        "the seed drives the bit errors"
    );
}

#[test]
fn energy_is_current_times_voltage_times_time_and_idle_dies_draw_standby() {
    let mut n = dev(
        "tiny",
        &["geometry.channels=1", "geometry.chips_per_channel=1"],
    );
    let mut d = page(&n, 0);
    n.read(0, nand::Ppn(0), &mut d, &mut [], H).unwrap();
    let r = n.report();
    // 3.3 V x 25 mA x (25 us array + 20.515 us bus).
    let expected = 3.3 * 0.025 * (25_000.0 + 20_515.0) * 1e-9;
    assert!(
        (r.energy.active_joules - expected).abs() < 1e-12,
        "{} vs {expected}",
        r.energy.active_joules
    );
    assert_eq!(
        r.energy.idle_joules, 0.0,
        "the only die was busy the whole time"
    );
    let mut two = dev(
        "tiny",
        &["geometry.channels=1", "geometry.chips_per_channel=2"],
    );
    two.read(0, nand::Ppn(0), &mut d, &mut [], H).unwrap();
    let idle = 3.3 * 10e-6 * READ_NS * 1e-9;
    assert!((two.report().energy.idle_joules - idle).abs() < 1e-15);
}

#[test]
fn the_recent_trace_keeps_the_last_operations_oldest_first() {
    let mut n = dev("tiny", &["trace_recent=4"]);
    run(&mut n, RawPattern::Read, 2, 10);
    let seqs: Vec<u64> = n.recent_trace().map(|e| e.seq).collect();
    assert_eq!(seqs.len(), 4, "bounded by trace_recent");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    run(&mut n, RawPattern::Read, 2, 3);
    let again: Vec<u64> = n.recent_trace().map(|e| e.seq).collect();
    assert_eq!(again.len(), 4);
    assert!(
        again[0] > seqs[3] - 4 && again.windows(2).all(|w| w[1] == w[0] + 1),
        "{again:?}"
    );
    assert!(n
        .recent_trace()
        .all(|e| e.status == "ok" && e.start_ns < e.done_ns));
    assert!(
        n.trace().is_empty(),
        "the first-N trace is off unless asked for"
    );
}

#[test]
fn the_trace_records_each_operation_with_its_times() {
    let mut n = dev("tiny", &["trace_entries=3"]);
    run(&mut n, RawPattern::Read, 2, 10);
    let t = n.trace();
    assert_eq!(t.len(), 3, "bounded by trace_entries");
    assert_eq!(t[0].seq, 1);
    assert!(t
        .iter()
        .all(|e| e.submit_ns <= e.start_ns && e.start_ns < e.done_ns && e.status == "ok"));
}
