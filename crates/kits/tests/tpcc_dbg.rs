use kits::tpcc::crash::{crash_tpcc_native_once, TpccCrashOptions};
#[test]
fn dbg() {
    let o = TpccCrashOptions::default();
    for seed in 0..12 {
        let out = crash_tpcc_native_once(seed, &o).unwrap();
        eprintln!("seed {seed} hit {} acked {} at {} {:?} {:?}", out.fault_hit, out.acknowledged, out.fault_at_op, out.error_reported, out.violations);
    }
}
