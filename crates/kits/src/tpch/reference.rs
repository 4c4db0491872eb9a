//! An independent evaluation of queries 1, 6, 12 and 14: plain iterators over the generator's
//! typed rows (no engine, no row format, no storage), in ordered maps, to check the engine's
//! answers at any scale factor (`bench tpch --check`, and the tests at SF 0.01). It streams the
//! rows (LINEITEM once per query; ORDERS or PART held as a key map for the joins), so it runs at
//! SF 1 in the memory of a small map.

use std::collections::BTreeMap;

use storage::tuple::days_from_civil;
use tpchgen::generators::{LineItem, LineItemGenerator, OrderGenerator, PartGenerator};

use super::answer::{Cell, QueryResult};
use super::query::{columns, first_of_month, high_priority, Params};

fn lineitems(sf: f64) -> impl Iterator<Item = LineItem<'static>> {
    LineItemGenerator::new(sf, 1, 1).iter()
}
fn day(d: tpchgen::dates::TPCHDate) -> i32 {
    d.to_unix_epoch()
}

fn q1(sf: f64, p: &Params) -> QueryResult {
    let li = lineitems(sf);
    let last = days_from_civil(1998, 12, 1) - p.q1_delta_days;
    let mut g: BTreeMap<(String, String), [i128; 6]> = BTreeMap::new();
    for l in li.filter(|l| day(l.l_shipdate) <= last) {
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
        columns: columns(1),
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

fn q6(sf: f64, p: &Params) -> QueryResult {
    let li = lineitems(sf);
    let (from, to) = (
        days_from_civil(p.q6_year, 1, 1),
        days_from_civil(p.q6_year + 1, 1, 1),
    );
    let revenue: i128 = li
        .filter(|l| (from..to).contains(&day(l.l_shipdate)))
        .filter(|l| (p.q6_discount - 1..=p.q6_discount + 1).contains(&l.l_discount.0))
        .filter(|l| l.l_quantity < p.q6_quantity)
        .map(|l| i128::from(l.l_extendedprice.0) * i128::from(l.l_discount.0))
        .sum();
    QueryResult {
        columns: columns(6),
        rows: vec![vec![Cell::Dec {
            value: revenue,
            scale: 4,
        }]],
    }
}

fn q12(sf: f64, p: &Params) -> QueryResult {
    let orders: BTreeMap<i64, bool> = OrderGenerator::new(sf, 1, 1)
        .iter()
        .map(|o| (o.o_orderkey, high_priority(o.o_orderpriority.as_bytes())))
        .collect();
    let (from, to) = (
        days_from_civil(p.q12_year, 1, 1),
        days_from_civil(p.q12_year + 1, 1, 1),
    );
    let mut g: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for l in lineitems(sf) {
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
        columns: columns(12),
        rows: g
            .into_iter()
            .map(|(m, (h, l))| vec![Cell::Str(m), Cell::Int(h), Cell::Int(l)])
            .collect(),
    }
}

fn q14(sf: f64, p: &Params) -> QueryResult {
    let promo: BTreeMap<i64, bool> = PartGenerator::new(sf, 1, 1)
        .iter()
        .map(|x| (x.p_partkey, x.p_type.starts_with("PROMO")))
        .collect();
    let from = days_from_civil(p.q14_year, p.q14_month, 1);
    let to = first_of_month(p.q14_year, p.q14_month + 1);
    let (mut pr, mut total) = (0i128, 0i128);
    for l in lineitems(sf).filter(|l| (from..to).contains(&day(l.l_shipdate))) {
        let rev = i128::from(l.l_extendedprice.0) * (100 - i128::from(l.l_discount.0));
        if let Some(&is_promo) = promo.get(&l.l_partkey) {
            total += rev;
            if is_promo {
                pr += rev;
            }
        }
    }
    QueryResult {
        columns: columns(14),
        rows: vec![vec![Cell::Num(100.0 * pr as f64 / total as f64)]],
    }
}

/// The answer of query `q` (1, 6, 12 or 14) over the generator's rows at scale factor `sf`.
pub fn answer(sf: f64, q: u32, p: &Params) -> Option<QueryResult> {
    Some(match q {
        1 => q1(sf, p),
        6 => q6(sf, p),
        12 => q12(sf, p),
        14 => q14(sf, p),
        _ => return None,
    })
}
