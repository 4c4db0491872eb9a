//! TPC-H at SF 0.01: queries 1, 6, 12 and 14 on the engine give exactly the answers of an
//! independent evaluation over the generator's rows (plain iterators, no engine), with the
//! validation parameters and with drawn ones, on a RAM disk and on flash (the native store),
//! whatever the read-ahead; and read-ahead makes a scan on flash with several dies faster.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::collections::BTreeMap;

use kits::tpch::answer::{compare, Cell, Kind, QueryResult, Tolerance};
use kits::tpch::query::{self, high_priority, ExecOptions, Params, QueryCpu};
use kits::tpch::{self, Handles, TpchConfig};
use nand::{DeviceConfig, Nand};
use storage::tuple::days_from_civil;
use storage::{BlockPageStore, Engine, EngineConfig, NativeConfig, NativeStore, PageStore};
use tpchgen::generators::{LineItem, LineItemGenerator, OrderGenerator, PartGenerator};

const SF: f64 = 0.01;

fn memdisk() -> Box<dyn PageStore> {
    Box::new(BlockPageStore::new(Box::new(ftl::MemDisk::new(1 << 14)), 4096, Some(1024)).unwrap())
}

/// Eight dies (2 channels x 2 chips x 2 planes), 16 MiB per plane.
fn native() -> Box<dyn PageStore> {
    let cfg =
        DeviceConfig::preset("tiny", &["geometry.blocks_per_plane=256".to_string()]).unwrap();
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
    let (h, st) = tpch::load(&mut e, TpchConfig::new(SF).unwrap(), |_| {}).unwrap();
    assert!(st.rows > 80_000, "{st:?}");
    (e, h)
}

// ---- the independent evaluation: the generator's typed rows, plain iterators ----

fn lineitems() -> Vec<LineItem<'static>> {
    LineItemGenerator::new(SF, 1, 1).iter().collect()
}
fn day(d: tpchgen::dates::TPCHDate) -> i32 {
    d.to_unix_epoch()
}

fn ref_q1(li: &[LineItem], p: &Params) -> QueryResult {
    let last = days_from_civil(1998, 12, 1) - p.q1_delta_days;
    let mut g: BTreeMap<(String, String), [i128; 6]> = BTreeMap::new();
    for l in li.iter().filter(|l| day(l.l_shipdate) <= last) {
        let a = g
            .entry((l.l_returnflag.to_string(), l.l_linestatus.to_string()))
            .or_default();
        let (pr, d, t) = (
            i128::from(l.l_extendedprice.0),
            i128::from(l.l_discount.0),
            i128::from(l.l_tax.0),
        );
        a[0] += i128::from(l.l_quantity) * 100;
        a[1] += pr;
        a[2] += pr * (100 - d);
        a[3] += pr * (100 - d) * (100 + t);
        a[4] += d;
        a[5] += 1;
    }
    let dec = |value, scale| Cell::Dec { value, scale };
    QueryResult {
        columns: vec![
            ("l_returnflag", Kind::Key),
            ("l_linestatus", Kind::Key),
            ("sum_qty", Kind::Sum),
            ("sum_base_price", Kind::Sum),
            ("sum_disc_price", Kind::Sum),
            ("sum_charge", Kind::Sum),
            ("avg_qty", Kind::Ratio),
            ("avg_price", Kind::Ratio),
            ("avg_disc", Kind::Ratio),
            ("count_order", Kind::Count),
        ],
        rows: g
            .into_iter()
            .map(|((rf, ls), a)| {
                let n = a[5] as f64;
                vec![
                    Cell::Str(rf),
                    Cell::Str(ls),
                    dec(a[0], 2),
                    dec(a[1], 2),
                    dec(a[2], 4),
                    dec(a[3], 6),
                    Cell::Num(a[0] as f64 / 100.0 / n),
                    Cell::Num(a[1] as f64 / 100.0 / n),
                    Cell::Num(a[4] as f64 / 100.0 / n),
                    Cell::Int(a[5] as i64),
                ]
            })
            .collect(),
    }
}

fn ref_q6(li: &[LineItem], p: &Params) -> QueryResult {
    let (from, to) = (
        days_from_civil(p.q6_year, 1, 1),
        days_from_civil(p.q6_year + 1, 1, 1),
    );
    let revenue: i128 = li
        .iter()
        .filter(|l| (from..to).contains(&day(l.l_shipdate)))
        .filter(|l| (p.q6_discount - 1..=p.q6_discount + 1).contains(&l.l_discount.0))
        .filter(|l| l.l_quantity < p.q6_quantity)
        .map(|l| i128::from(l.l_extendedprice.0) * i128::from(l.l_discount.0))
        .sum();
    QueryResult {
        columns: vec![("revenue", Kind::Sum)],
        rows: vec![vec![Cell::Dec {
            value: revenue,
            scale: 4,
        }]],
    }
}

fn ref_q12(li: &[LineItem], p: &Params) -> QueryResult {
    let orders: BTreeMap<i64, bool> = OrderGenerator::new(SF, 1, 1)
        .iter()
        .map(|o| (o.o_orderkey, high_priority(o.o_orderpriority.as_bytes())))
        .collect();
    let (from, to) = (
        days_from_civil(p.q12_year, 1, 1),
        days_from_civil(p.q12_year + 1, 1, 1),
    );
    let mut g: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for l in li {
        let ok = p.q12_modes.iter().any(|m| m == l.l_shipmode)
            && l.l_commitdate.to_unix_epoch() < l.l_receiptdate.to_unix_epoch()
            && l.l_shipdate.to_unix_epoch() < l.l_commitdate.to_unix_epoch()
            && (from..to).contains(&l.l_receiptdate.to_unix_epoch());
        if !ok {
            continue;
        }
        let Some(&high) = orders.get(&l.l_orderkey) else {
            continue;
        };
        let a = g.entry(l.l_shipmode.to_string()).or_default();
        if high {
            a.0 += 1;
        } else {
            a.1 += 1;
        }
    }
    QueryResult {
        columns: vec![
            ("l_shipmode", Kind::Key),
            ("high_line_count", Kind::Count),
            ("low_line_count", Kind::Count),
        ],
        rows: g
            .into_iter()
            .map(|(m, (h, l))| vec![Cell::Str(m), Cell::Int(h), Cell::Int(l)])
            .collect(),
    }
}

fn ref_q14(li: &[LineItem], p: &Params) -> QueryResult {
    let promo: BTreeMap<i64, bool> = PartGenerator::new(SF, 1, 1)
        .iter()
        .map(|x| (x.p_partkey, x.p_type.starts_with("PROMO")))
        .collect();
    let from = days_from_civil(p.q14_year, p.q14_month, 1);
    let to = query::first_of_month(p.q14_year, p.q14_month + 1);
    let (mut pr, mut total) = (0i128, 0i128);
    for l in li.iter().filter(|l| (from..to).contains(&day(l.l_shipdate))) {
        let rev = i128::from(l.l_extendedprice.0) * (100 - i128::from(l.l_discount.0));
        if let Some(&is_promo) = promo.get(&l.l_partkey) {
            total += rev;
            if is_promo {
                pr += rev;
            }
        }
    }
    QueryResult {
        columns: vec![("promo_revenue", Kind::Ratio)],
        rows: vec![vec![Cell::Num(100.0 * pr as f64 / total as f64)]],
    }
}

fn reference(li: &[LineItem], q: u32, p: &Params) -> QueryResult {
    match q {
        1 => ref_q1(li, p),
        6 => ref_q6(li, p),
        12 => ref_q12(li, p),
        14 => ref_q14(li, p),
        _ => unreachable!(),
    }
}

fn opts(read_ahead_pages: usize) -> ExecOptions {
    ExecOptions {
        read_ahead_pages,
        cpu: QueryCpu::default(),
    }
}

#[test]
fn the_four_queries_match_an_independent_evaluation_on_a_ram_disk() {
    let li = lineitems();
    let (mut e, h) = loaded(memdisk(), 256);
    assert!(e.check().unwrap().is_empty(), "{:?}", e.check());
    let params = [Params::validation(), Params::random(1), Params::random(2)];
    for p in &params {
        for q in query::QUERIES {
            let run = query::run(&mut e, &h, q, p, &opts(16)).unwrap();
            let want = reference(&li, q, p);
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
    let li = lineitems();
    let (mut e, h) = loaded(native(), 64);
    let p = Params::validation();
    let mut ns = Vec::new();
    for depth in [0, e.default_read_ahead()] {
        for q in [1, 14] {
            let run = query::run(&mut e, &h, q, &p, &opts(depth)).unwrap();
            compare(&reference(&li, q, &p), &run.result, Tolerance::Exact).unwrap();
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
