//! TPC-H at SF 0.01: queries 1, 6, 12 and 14 on the engine give exactly the answers of an
//! independent evaluation over the generator's rows (`tpch::reference`: plain iterators, no
//! engine), with the
//! validation parameters and with drawn ones, on a RAM disk and on flash (the native store),
//! whatever the read-ahead; and read-ahead makes a scan on flash with several dies faster.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use kits::tpch::answer::{compare, QueryResult, Tolerance};
use kits::tpch::query::{self, ExecOptions, Params, QueryCpu};
use kits::tpch::{self, reference, Handles, TpchConfig};
use nand::{DeviceConfig, Nand};
use storage::{BlockPageStore, Engine, EngineConfig, NativeConfig, NativeStore, PageStore};

const SF: f64 = 0.01;

fn memdisk() -> Box<dyn PageStore> {
    Box::new(BlockPageStore::new(Box::new(ftl::MemDisk::new(1 << 14)), 4096, Some(1024)).unwrap())
}

/// Eight dies (2 channels x 2 chips x 2 planes), 16 MiB per plane.
fn native() -> Box<dyn PageStore> {
    let cfg = DeviceConfig::preset("tiny", &["geometry.blocks_per_plane=256".to_string()]).unwrap();
    Box::new(
        NativeStore::format(
            Nand::new(cfg).unwrap(),
            NativeConfig {
                log_blocks: Some(1024),
                spare_factor: 0.15,
                ..NativeConfig::default()
            },
        )
        .unwrap(),
    )
}

fn loaded(store: Box<dyn PageStore>, frames: usize) -> (Engine, Handles) {
    let mut e = Engine::create(
        store,
        EngineConfig {
            buffer_frames: frames,
            ..EngineConfig::default()
        },
    )
    .unwrap();
    let cfg = TpchConfig::new(SF).unwrap();
    let (h, st) = tpch::load(&mut e, cfg, |_| {}).unwrap();
    assert!(st.rows > 80_000, "{st:?}");
    // The size estimate that refuses a small device before loading is close to the truth.
    let (est, got) = (
        cfg.db_pages_estimate(4096) as f64,
        e.stats().pages_allocated as f64,
    );
    assert!(
        (0.9..1.15).contains(&(est / got)),
        "estimated {est} pages, {got} allocated"
    );
    (e, h)
}

fn reference(q: u32, p: &Params) -> QueryResult {
    reference::answer(SF, q, p).unwrap()
}

fn opts(read_ahead_pages: usize) -> ExecOptions {
    ExecOptions {
        read_ahead_pages,
        cpu: QueryCpu::default(),
    }
}

#[test]
fn the_four_queries_match_an_independent_evaluation_on_a_ram_disk() {
    let (mut e, h) = loaded(memdisk(), 256);
    assert!(e.check().unwrap().is_empty(), "{:?}", e.check());
    let params = [Params::validation(), Params::random(1), Params::random(2)];
    for p in &params {
        for q in query::QUERIES {
            let run = query::run(&mut e, &h, q, p, &opts(16)).unwrap();
            let want = reference(q, p);
            assert!(!want.rows.is_empty());
            if let Err(why) = compare(&want, &run.result, Tolerance::Exact) {
                panic!("Q{q} with {p:?}: {why}");
            }
            assert!(run.virtual_ns > 0);
        }
    }
}

#[test]
fn answers_do_not_depend_on_the_store_or_read_ahead_and_read_ahead_keeps_dies_busy() {
    let (mut e, h) = loaded(native(), 64);
    let p = Params::validation();
    let mut ns = Vec::new();
    for depth in [0, e.default_read_ahead()] {
        for q in [1, 14] {
            let run = query::run(&mut e, &h, q, &p, &opts(depth)).unwrap();
            compare(&reference(q, &p), &run.result, Tolerance::Exact).unwrap();
            if q == 1 {
                ns.push(run.virtual_ns);
                assert!(run.scans[0].pages > 500, "{:?}", run.scans);
            }
        }
    }
    // Q1 scans LINEITEM (far larger than the 64-frame pool): with reads in flight on all eight
    // dies it finishes well before the scan that reads one page at a time.
    assert!(
        (ns[1] as f64) < 0.6 * ns[0] as f64,
        "Q1 with read-ahead {} ns, without {} ns",
        ns[1],
        ns[0]
    );
}

#[test]
fn bad_parameters_and_unknown_queries_are_refused() {
    let (mut e, h) = loaded(memdisk(), 64);
    let mut p = Params::validation();
    p.q12_modes = ["MAIL".into(), "MAIL".into()];
    assert!(query::run(&mut e, &h, 12, &p, &opts(0)).is_err());
    let mut p = Params::validation();
    p.q1_delta_days = 500;
    assert!(query::run(&mut e, &h, 1, &p, &opts(0)).is_err());
    assert!(query::run(&mut e, &h, 3, &Params::validation(), &opts(0)).is_err());
    assert!(TpchConfig::new(0.0).is_err());
    assert!(TpchConfig::new(f64::NAN).is_err());
}
