//! The consistency conditions of TPC-C clause 3.3.2, all twelve, plus the engine's structural
//! check. NULL is 0 here (module doc of `tpcc`).
//!
//! 1. W_YTD = sum(D_YTD) of the warehouse's districts.
//! 2. D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) of the district.
//! 3. max(NO_O_ID) - min(NO_O_ID) + 1 = number of NEW-ORDER rows of the district.
//! 4. sum(O_OL_CNT) = number of ORDER-LINE rows of the district.
//! 5. O_CARRIER_ID is NULL exactly when the order has a NEW-ORDER row.
//! 6. O_OL_CNT = number of the order's ORDER-LINE rows.
//! 7. OL_DELIVERY_D is NULL exactly when its order's O_CARRIER_ID is NULL.
//! 8. W_YTD = sum(H_AMOUNT) of the warehouse's history rows.
//! 9. D_YTD = sum(H_AMOUNT) of the district's history rows.
//! 10. C_BALANCE = sum(OL_AMOUNT of the customer's delivered order lines) - sum(H_AMOUNT of the
//!     customer's history rows).
//! 11. count(ORDER) - count(NEW-ORDER) = the orders delivered at load (2,100) per district;
//!     holds only until the first Delivery, so it is checked only when asked
//!     (`before_delivery`), e.g. right after loading.
//! 12. C_BALANCE + C_YTD_PAYMENT = sum(OL_AMOUNT of the customer's delivered order lines).
//!
//! The check reads raw rows (no locks); run it with no transaction active.

use std::collections::HashMap;

use storage::tuple::Schema;
use storage::{Engine, ObjectId, Result};

use super::config::TpccConfig;
use super::{col, Handles};

/// What `check` found.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CheckReport {
    /// Condition numbers verified (11 only with `before_delivery`).
    pub conditions_checked: Vec<u32>,
    pub warehouses: u64,
    pub districts: u64,
    pub customers: u64,
    pub history: u64,
    pub orders: u64,
    pub new_orders: u64,
    pub order_lines: u64,
    pub items: u64,
    pub stock: u64,
    pub problems: Vec<String>,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

fn table(e: &mut Engine, t: ObjectId) -> Result<(Schema, Vec<Vec<u8>>)> {
    let schema =
        e.catalog()
            .tables
            .get(&t)
            .map(|x| x.schema.clone())
            .ok_or(storage::Error::NotFound {
                kind: "table",
                name: format!("#{t}"),
            })?;
    let txn = e.begin()?;
    let rows = e.scan_table(txn, t)?;
    e.commit(txn)?;
    Ok((schema, rows.into_iter().map(|(_, b)| b).collect()))
}

fn dkey(w: i64, d: i64) -> u64 {
    ((w as u64) << 8) | (d as u64 & 0xFF)
}
fn okey(w: i64, d: i64, x: i64) -> u64 {
    (dkey(w, d) << 32) | (x as u64 & 0xFFFF_FFFF)
}

struct Problems {
    list: Vec<String>,
    per_condition: std::collections::BTreeMap<u32, u32>,
}

impl Problems {
    /// At most 3 messages per condition, then a count.
    fn add(&mut self, cond: u32, msg: String) {
        let n = self.per_condition.entry(cond).or_default();
        *n += 1;
        if *n <= 3 {
            self.list.push(format!("condition {cond}: {msg}"));
        }
    }
}

/// Checks the twelve conditions (11 only with `before_delivery`) and the engine's structure.
pub fn check(e: &mut Engine, cfg: TpccConfig, before_delivery: bool) -> Result<CheckReport> {
    let h = Handles::get(e)?;
    let mut p = Problems {
        list: Vec::new(),
        per_condition: std::collections::BTreeMap::new(),
    };
    let mut r = CheckReport {
        conditions_checked: (1..=12).filter(|&c| c != 11 || before_delivery).collect(),
        ..CheckReport::default()
    };
    let (w_ytd, d_ytd, d_next) = check_warehouses_districts(e, &h, &mut p, &mut r)?;
    let (orders, sum_ol_cnt) = check_orders(e, &h, cfg, before_delivery, &d_next, &mut p, &mut r)?;
    let delivered = check_order_lines(e, &h, orders, &sum_ol_cnt, &mut p, &mut r)?;
    let h_c = check_history(e, &h, &w_ytd, &d_ytd, &mut p, &mut r)?;
    check_customers(e, &h, &delivered, &h_c, &mut p, &mut r)?;
    r.items = table(e, h.item)?.1.len() as u64;
    r.stock = table(e, h.stock)?.1.len() as u64;

    // Population that never changes.
    let w = u64::from(cfg.warehouses);
    if r.warehouses != w
        || r.districts != cfg.districts()
        || r.items != u64::from(cfg.items)
        || r.stock != w * u64::from(cfg.items)
        || r.customers != cfg.districts() * u64::from(cfg.customers_per_district)
    {
        p.list.push(format!("population: {} warehouses, {} districts, {} items, {} stock, {} customers differ from {cfg:?}", r.warehouses, r.districts, r.items, r.stock, r.customers));
    }
    for (c, n) in &p.per_condition {
        if *n > 3 {
            p.list
                .push(format!("condition {c}: {} more violations", n - 3));
        }
    }
    p.list.extend(e.check()?);
    r.problems = p.list;
    Ok(r)
}

/// A column as an integer, `i64::MIN` when it is not one (so it never matches a real value).
fn int(s: &Schema, b: &[u8], c: usize) -> i64 {
    s.get_i64(b, c).unwrap_or(i64::MIN)
}

/// W_YTD, D_YTD and D_NEXT_O_ID by key (kept for conditions 2, 8 and 9) and condition 1: a
/// step because the warehouse and district rows are read once, first.
#[allow(clippy::type_complexity)]
fn check_warehouses_districts(
    e: &mut Engine,
    h: &Handles,
    p: &mut Problems,
    r: &mut CheckReport,
) -> Result<(HashMap<i64, i64>, HashMap<u64, i64>, HashMap<u64, i64>)> {
    // Warehouses and districts.
    let (ws, wrows) = table(e, h.warehouse)?;
    let mut w_ytd: HashMap<i64, i64> = HashMap::new();
    for b in &wrows {
        w_ytd.insert(int(&ws, b, 0), int(&ws, b, col::W_YTD));
    }
    let (ds, drows) = table(e, h.district)?;
    let mut d_ytd: HashMap<u64, i64> = HashMap::new();
    let mut d_next: HashMap<u64, i64> = HashMap::new();
    let mut sum_d_ytd: HashMap<i64, i64> = HashMap::new();
    for b in &drows {
        let (d, w) = (int(&ds, b, 0), int(&ds, b, 1));
        d_ytd.insert(dkey(w, d), int(&ds, b, col::D_YTD));
        d_next.insert(dkey(w, d), int(&ds, b, col::D_NEXT_O_ID));
        *sum_d_ytd.entry(w).or_default() += int(&ds, b, col::D_YTD);
    }
    r.warehouses = wrows.len() as u64;
    r.districts = drows.len() as u64;
    for (w, y) in &w_ytd {
        let s = sum_d_ytd.get(w).copied().unwrap_or(0);
        if *y != s {
            p.add(1, format!("warehouse {w}: W_YTD {y}, sum of D_YTD {s}"));
        }
    }
    Ok((w_ytd, d_ytd, d_next))
}

/// Orders and new orders, conditions 2, 3, 11 and 5; returns the orders by key and
/// sum(O_OL_CNT) per district for the order-line step. A step because the order and
/// new-order rows are read (and dropped) here, before the much larger order-line table.
#[allow(clippy::type_complexity)]
fn check_orders(
    e: &mut Engine,
    h: &Handles,
    cfg: TpccConfig,
    before_delivery: bool,
    d_next: &HashMap<u64, i64>,
    p: &mut Problems,
    r: &mut CheckReport,
) -> Result<(HashMap<u64, (i64, i64, i64)>, HashMap<u64, i64>)> {
    // Orders, new orders, order lines.
    let (os, orows) = table(e, h.orders)?;
    // (w, d, o) -> (c_id, carrier, ol_cnt)
    let mut orders: HashMap<u64, (i64, i64, i64)> = HashMap::with_capacity(orows.len());
    let mut max_o: HashMap<u64, i64> = HashMap::new();
    let mut sum_ol_cnt: HashMap<u64, i64> = HashMap::new();
    let mut count_o: HashMap<u64, i64> = HashMap::new();
    for b in &orows {
        let (o, d, w) = (
            int(&os, b, col::O_ID),
            int(&os, b, col::O_D_ID),
            int(&os, b, col::O_W_ID),
        );
        orders.insert(
            okey(w, d, o),
            (
                int(&os, b, col::O_C_ID),
                int(&os, b, col::O_CARRIER_ID),
                int(&os, b, col::O_OL_CNT),
            ),
        );
        let m = max_o.entry(dkey(w, d)).or_insert(i64::MIN);
        *m = (*m).max(o);
        *sum_ol_cnt.entry(dkey(w, d)).or_default() += int(&os, b, col::O_OL_CNT);
        *count_o.entry(dkey(w, d)).or_default() += 1;
    }
    r.orders = orows.len() as u64;
    drop(orows);
    let (ns, nrows) = table(e, h.new_order)?;
    let mut no_minmax: HashMap<u64, (i64, i64, i64)> = HashMap::new();
    let mut has_no: std::collections::HashSet<u64> =
        std::collections::HashSet::with_capacity(nrows.len());
    for b in &nrows {
        let (o, d, w) = (int(&ns, b, 0), int(&ns, b, 1), int(&ns, b, 2));
        has_no.insert(okey(w, d, o));
        let x = no_minmax
            .entry(dkey(w, d))
            .or_insert((i64::MAX, i64::MIN, 0));
        x.0 = x.0.min(o);
        x.1 = x.1.max(o);
        x.2 += 1;
    }
    r.new_orders = nrows.len() as u64;
    drop(nrows);
    for (dk, next) in d_next {
        let (w, d) = (dk >> 8, dk & 0xFF);
        let mo = max_o.get(dk).copied();
        if mo != Some(next - 1) {
            p.add(
                2,
                format!(
                    "district {w}/{d}: D_NEXT_O_ID - 1 = {}, max(O_ID) {mo:?}",
                    next - 1
                ),
            );
        }
        if let Some(&(lo, hi, n)) = no_minmax.get(dk) {
            if hi != next - 1 {
                p.add(
                    2,
                    format!(
                        "district {w}/{d}: D_NEXT_O_ID - 1 = {}, max(NO_O_ID) {hi}",
                        next - 1
                    ),
                );
            }
            if hi - lo + 1 != n {
                p.add(
                    3,
                    format!("district {w}/{d}: new orders {lo}..={hi} but {n} rows"),
                );
            }
        }
        if before_delivery {
            let n_no = no_minmax.get(dk).map_or(0, |x| x.2);
            let n_o = count_o.get(dk).copied().unwrap_or(0);
            if n_o - n_no != i64::from(cfg.delivered_per_district()) {
                p.add(
                    11,
                    format!(
                        "district {w}/{d}: {n_o} orders - {n_no} new orders != {}",
                        cfg.delivered_per_district()
                    ),
                );
            }
        }
    }
    for (k, &(_, carrier, _)) in &orders {
        if (carrier == 0) != has_no.contains(k) {
            p.add(
                5,
                format!(
                    "order {k:#x}: carrier {carrier}, new-order row {}",
                    has_no.contains(k)
                ),
            );
        }
    }
    for k in &has_no {
        if !orders.contains_key(k) {
            p.add(5, format!("new-order row {k:#x} without an order"));
        }
    }
    drop(has_no);
    Ok((orders, sum_ol_cnt))
}

/// Order lines, conditions 6, 7 and 4; consumes the orders (dropped at the end, as before)
/// and returns each customer's delivered amount for conditions 10 and 12. A step because the
/// order-line table is the largest and is held only here.
fn check_order_lines(
    e: &mut Engine,
    h: &Handles,
    orders: HashMap<u64, (i64, i64, i64)>,
    sum_ol_cnt: &HashMap<u64, i64>,
    p: &mut Problems,
    r: &mut CheckReport,
) -> Result<HashMap<u64, i64>> {
    let (ls, lrows) = table(e, h.order_line)?;
    let mut ol_count: HashMap<u64, i64> = HashMap::with_capacity(orders.len());
    let mut ol_per_d: HashMap<u64, i64> = HashMap::new();
    // (w, d, c) -> delivered amount
    let mut delivered: HashMap<u64, i64> = HashMap::new();
    for b in &lrows {
        let (o, d, w) = (
            int(&ls, b, col::OL_O_ID),
            int(&ls, b, col::OL_D_ID),
            int(&ls, b, col::OL_W_ID),
        );
        let k = okey(w, d, o);
        *ol_count.entry(k).or_default() += 1;
        *ol_per_d.entry(dkey(w, d)).or_default() += 1;
        let dd = int(&ls, b, col::OL_DELIVERY_D);
        match orders.get(&k) {
            None => p.add(6, format!("order line of missing order {w}/{d}/{o}")),
            Some(&(c, carrier, _)) => {
                if (dd == 0) != (carrier == 0) {
                    p.add(
                        7,
                        format!("order {w}/{d}/{o}: OL_DELIVERY_D {dd}, O_CARRIER_ID {carrier}"),
                    );
                }
                if dd != 0 {
                    *delivered.entry(okey(w, d, c)).or_default() += int(&ls, b, col::OL_AMOUNT);
                }
            }
        }
    }
    r.order_lines = lrows.len() as u64;
    drop(lrows);
    for (dk, s) in sum_ol_cnt {
        let n = ol_per_d.get(dk).copied().unwrap_or(0);
        if *s != n {
            p.add(
                4,
                format!(
                    "district {}/{}: sum(O_OL_CNT) {s}, order lines {n}",
                    dk >> 8,
                    dk & 0xFF
                ),
            );
        }
    }
    for (k, &(_, _, cnt)) in &orders {
        let n = ol_count.get(k).copied().unwrap_or(0);
        if cnt != n {
            p.add(6, format!("order {k:#x}: O_OL_CNT {cnt}, order lines {n}"));
        }
    }
    drop(orders);
    Ok(delivered)
}

/// History, conditions 8 and 9; returns each customer's paid amount for conditions 10 and
/// 12. A step because the history rows are read once, here.
fn check_history(
    e: &mut Engine,
    h: &Handles,
    w_ytd: &HashMap<i64, i64>,
    d_ytd: &HashMap<u64, i64>,
    p: &mut Problems,
    r: &mut CheckReport,
) -> Result<HashMap<u64, i64>> {
    // History.
    let (hs, hrows) = table(e, h.history)?;
    let mut h_w: HashMap<i64, i64> = HashMap::new();
    let mut h_d: HashMap<u64, i64> = HashMap::new();
    let mut h_c: HashMap<u64, i64> = HashMap::new();
    for b in &hrows {
        let a = int(&hs, b, col::H_AMOUNT);
        *h_w.entry(int(&hs, b, col::H_W_ID)).or_default() += a;
        *h_d.entry(dkey(int(&hs, b, col::H_W_ID), int(&hs, b, col::H_D_ID)))
            .or_default() += a;
        *h_c.entry(okey(
            int(&hs, b, col::H_C_W_ID),
            int(&hs, b, col::H_C_D_ID),
            int(&hs, b, col::H_C_ID),
        ))
        .or_default() += a;
    }
    r.history = hrows.len() as u64;
    drop(hrows);
    for (w, y) in w_ytd {
        let s = h_w.get(w).copied().unwrap_or(0);
        if *y != s {
            p.add(8, format!("warehouse {w}: W_YTD {y}, sum of H_AMOUNT {s}"));
        }
    }
    for (dk, y) in d_ytd {
        let s = h_d.get(dk).copied().unwrap_or(0);
        if *y != s {
            p.add(
                9,
                format!(
                    "district {}/{}: D_YTD {y}, sum of H_AMOUNT {s}",
                    dk >> 8,
                    dk & 0xFF
                ),
            );
        }
    }
    Ok(h_c)
}

/// Customers, conditions 10 and 12 against the delivered and paid amounts: a step because
/// it is the last table that needs the earlier ones.
fn check_customers(
    e: &mut Engine,
    h: &Handles,
    delivered: &HashMap<u64, i64>,
    h_c: &HashMap<u64, i64>,
    p: &mut Problems,
    r: &mut CheckReport,
) -> Result<()> {
    // Customers.
    let (cs, crows) = table(e, h.customer)?;
    for b in &crows {
        let k = okey(
            int(&cs, b, col::C_W_ID),
            int(&cs, b, col::C_D_ID),
            int(&cs, b, col::C_ID),
        );
        let bal = int(&cs, b, col::C_BALANCE);
        let ytd = int(&cs, b, col::C_YTD_PAYMENT);
        let del = delivered.get(&k).copied().unwrap_or(0);
        let paid = h_c.get(&k).copied().unwrap_or(0);
        if bal != del - paid {
            p.add(
                10,
                format!("customer {k:#x}: C_BALANCE {bal}, delivered {del} - paid {paid}"),
            );
        }
        if bal + ytd != del {
            p.add(
                12,
                format!(
                    "customer {k:#x}: C_BALANCE {bal} + C_YTD_PAYMENT {ytd} != delivered {del}"
                ),
            );
        }
    }
    r.customers = crows.len() as u64;
    drop(crows);
    Ok(())
}
