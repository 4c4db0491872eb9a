//! TPC-B on the engine: loading, virtual-time runs that are deterministic, the consistency check.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use kits::tpcb::{self, TpcbConfig, TpcbTerminal};
use storage::crashdisk::CrashDisk;
use storage::sched::{run_virtual, VirtualOptions};
use storage::{BlockPageStore, Engine, EngineConfig};

fn run(seed: u64, terminals: u32) -> (u64, u64, u64, i64) {
    let mut d = CrashDisk::new(8192);
    d.read_ns = 50_000;
    d.write_ns = 250_000;
    d.flush_ns = 10_000;
    let store = BlockPageStore::new(Box::new(d), 4096, Some(1024)).unwrap();
    let mut e = Engine::create(
        Box::new(store),
        EngineConfig {
            buffer_frames: 64,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let cfg = TpcbConfig {
        scale: 3,
        tellers_per_branch: 10,
        accounts_per_branch: 1000,
    };
    let h = tpcb::load(&mut e, cfg, |_| {}).unwrap();
    let mut terms: Vec<TpcbTerminal> = (0..terminals)
        .map(|i| TpcbTerminal::new(i, h, cfg, seed, Some(100)))
        .collect();
    let start = e.now();
    let st = run_virtual(&mut e, &mut terms, start, VirtualOptions::default()).unwrap();
    let committed: u64 = terms.iter().map(|t| t.committed).sum();
    assert_eq!(committed, u64::from(terminals) * 100);
    let rep = tpcb::check(&mut e, cfg).unwrap();
    assert!(rep.passed(), "{:?}", rep.problems);
    assert_eq!(rep.history_rows, committed);
    (
        committed,
        st.end_ns - st.start_ns,
        st.group_forces,
        rep.account_sum,
    )
}

#[test]
fn a_virtual_time_run_commits_everything_and_passes_the_check() {
    let (c, ns, forces, _) = run(1, 8);
    assert_eq!(c, 800);
    assert!(ns > 0);
    assert!(
        forces < c,
        "group commit shares forces ({forces} forces for {c} commits)"
    );
}

#[test]
fn the_same_seed_gives_the_same_run() {
    assert_eq!(run(42, 4), run(42, 4));
    assert_ne!(run(42, 4).3, run(43, 4).3);
}
