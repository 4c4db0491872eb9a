//! The two loaders of TPC-B and TPC-C (`LoadMethod::Bulk` and `Rows`) give the same logical
//! database: the same rows in every table, the same entries in every index (keys and the rows
//! they point to; record ids differ, as the pages do), the same consistency-check results after
//! the load, and after a run on each. The bulk load's B+-trees are full, so the run also shows
//! that they take inserts and updates.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use std::collections::BTreeMap;

use kits::tpcb::{self, TpcbConfig, TpcbTerminal};
use kits::tpcc::{self, NurandConsts, TpccConfig, TpccTerminal};
use kits::LoadMethod;
use storage::sched::{run_virtual, VirtualOptions};
use storage::{Engine, Rid};

fn engine() -> Engine {
    support::engine_with_frames(256)
}

/// Per table: its rows, sorted; per index: (key without the record id, the row it points to),
/// sorted. Independent of the page layout.
type Logical = BTreeMap<String, Vec<Vec<u8>>>;

fn logical(e: &mut Engine, tables: &[&str], indexes: &[&str]) -> Logical {
    let mut out = Logical::new();
    let t = e.begin().unwrap();
    for &name in tables {
        let id = e.table(name).unwrap().id;
        let mut rows: Vec<Vec<u8>> = e
            .scan_table(t, id)
            .unwrap()
            .into_iter()
            .map(|(_, r)| r)
            .collect();
        rows.sort();
        out.insert(format!("table {name}"), rows);
    }
    for &name in indexes {
        let (id, unique) = {
            let i = e.index(name).unwrap();
            (i.id, i.unique)
        };
        let entries = e.scan_index(t, id, None, None, false, usize::MAX).unwrap();
        let mut pairs: Vec<Vec<u8>> = Vec::new();
        for (key, rid) in entries {
            // A non-unique index ends each key with its record id, which differs between loads.
            let key = if unique {
                key
            } else {
                key[..key.len() - Rid::encode(rid).len()].to_vec()
            };
            let row = e.peek_row(rid, |r| r.to_vec()).unwrap().unwrap();
            let mut pair = key;
            pair.extend_from_slice(&row);
            pairs.push(pair);
        }
        pairs.sort();
        out.insert(format!("index {name}"), pairs);
    }
    e.commit(t).unwrap();
    out
}

const TPCB_TABLES: [&str; 4] = ["branch", "teller", "account", "history"];
const TPCB_INDEXES: [&str; 3] = ["branch_pk", "teller_pk", "account_pk"];

#[test]
fn tpcb_bulk_and_row_loads_hold_the_same_rows_and_pass_the_same_checks() {
    let cfg = TpcbConfig {
        scale: 2,
        tellers_per_branch: 10,
        accounts_per_branch: 2000,
    };
    let mut out = Vec::new();
    for method in [LoadMethod::Rows, LoadMethod::Bulk] {
        let mut e = engine();
        let h = tpcb::load_using(&mut e, cfg, tpcb::DDL, method, |_| {}).unwrap();
        let rep = tpcb::check(&mut e, cfg).unwrap();
        assert!(rep.passed(), "{method}: {:?}", rep.problems);
        assert_eq!(e.check().unwrap(), Vec::<String>::new(), "{method}");
        let content = logical(&mut e, &TPCB_TABLES, &TPCB_INDEXES);
        let pages = e.stats().pages_allocated;
        // The same transactions on each: the check's sums must come out the same.
        let mut terms: Vec<TpcbTerminal> = (0..2)
            .map(|i| TpcbTerminal::new(i, h, cfg, 7, Some(100)))
            .collect();
        let start = e.now();
        run_virtual(&mut e, &mut terms, start, VirtualOptions::default()).unwrap();
        let after = tpcb::check(&mut e, cfg).unwrap();
        assert!(after.passed(), "{method} after a run: {:?}", after.problems);
        assert_eq!(after.history_rows, 200);
        assert_eq!(e.check().unwrap(), Vec::<String>::new(), "{method}");
        out.push((content, rep, after, pages));
    }
    let (bulk, rows) = (&out[1], &out[0]);
    assert_eq!(bulk.0, rows.0, "the same rows and index entries");
    assert_eq!(
        (bulk.1.branch_sum, bulk.1.account_sum, bulk.1.history_rows),
        (rows.1.branch_sum, rows.1.account_sum, rows.1.history_rows)
    );
    assert_eq!(
        (bulk.2.branch_sum, bulk.2.account_sum, bulk.2.history_sum),
        (rows.2.branch_sum, rows.2.account_sum, rows.2.history_sum),
        "the same transactions give the same sums"
    );
    assert!(
        bulk.3 <= rows.3,
        "bulk pages are full: {} pages against {} loaded row by row",
        bulk.3,
        rows.3
    );
}

const TPCC_TABLES: [&str; 9] = [
    "warehouse",
    "district",
    "customer",
    "history",
    "new_order",
    "orders",
    "order_line",
    "item",
    "stock",
];
const TPCC_INDEXES: [&str; 10] = [
    "warehouse_pk",
    "district_pk",
    "customer_pk",
    "customer_name",
    "new_order_pk",
    "orders_pk",
    "orders_cust",
    "order_line_pk",
    "item_pk",
    "stock_pk",
];

#[test]
fn tpcc_bulk_and_row_loads_hold_the_same_rows_and_pass_the_same_checks() {
    let c = TpccConfig::reduced(2, 1000, 60);
    let seed = 5;
    let mut out = Vec::new();
    for method in [LoadMethod::Rows, LoadMethod::Bulk] {
        let mut e = engine();
        let l = tpcc::load_using(&mut e, c, tpcc::DDL, seed, method, |_| {}).unwrap();
        let rep = tpcc::check(&mut e, c, true).unwrap();
        assert!(rep.passed(), "{method}: {:?}", rep.problems);
        assert_eq!(e.check().unwrap(), Vec::<String>::new(), "{method}");
        let content = logical(&mut e, &TPCC_TABLES, &TPCC_INDEXES);
        // A run after the load: New-Orders insert into the full trees, Payments update rows.
        let runc = NurandConsts::run_from(l.c_load, seed);
        let mut terms: Vec<TpccTerminal> = (0..2)
            .map(|i| TpccTerminal::new(i, l.h, c, runc, seed, Some(60)))
            .collect();
        let start = e.now();
        run_virtual(&mut e, &mut terms, start, VirtualOptions::default()).unwrap();
        let committed: u64 = terms.iter().map(|t| t.committed()).sum();
        let after = tpcc::check(&mut e, c, false).unwrap();
        assert!(after.passed(), "{method} after a run: {:?}", after.problems);
        assert_eq!(e.check().unwrap(), Vec::<String>::new(), "{method}");
        out.push((content, rep, after, committed));
    }
    let (rows, bulk) = (&out[0], &out[1]);
    assert_eq!(bulk.0, rows.0, "the same rows and index entries");
    assert_eq!(bulk.1, rows.1, "the same check report after the load");
    assert_eq!(
        (&bulk.2, bulk.3),
        (&rows.2, rows.3),
        "the same inputs give the same report after the run"
    );
}
