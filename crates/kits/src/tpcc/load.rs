//! The TPC-C loader: the population of clause 4.3.3.1, seeded.
//!
//! Invariants:
//! 1. Per warehouse: one warehouse row (W_YTD 300,000.00 at full size), `items` stock rows, 10
//!    districts (D_YTD 30,000.00, D_NEXT_O_ID = orders + 1), per district `customers` customers (C_BALANCE
//!    -10.00, C_YTD_PAYMENT 10.00, C_PAYMENT_CNT 1, 10% bad credit) each with one history row
//!    (H_AMOUNT 10.00), `orders` orders whose customers are a random permutation, 5-15 order
//!    lines each, and the last `new_orders` orders undelivered (new-order row, no carrier,
//!    order lines with OL_DELIVERY_D NULL and a random amount); delivered order lines have
//!    amount 0.00. Items are shared (`items` rows, 10% with "ORIGINAL" in I_DATA).
//! 2. Customer c_id <= 1,000 is named from c_id - 1, the others from NURand(255, 0, 999) with
//!    the load constant (clause 4.3.2.3).
//! 3. The loader commits every `batch::BATCH` rows and reports progress after each commit.

use rand::seq::SliceRandom;
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::tuple::Value;
use storage::{Engine, Error, ObjectId, Result};

use crate::batch::Batcher;
use crate::LoadMethod;

use super::config::{last_name, nurand, rng_for, NurandConsts, TpccConfig};
use super::{timestamp_s, Handles, DDL};

/// What the loader produced: the handles and the load-time NURand constants (the run
/// constants are derived from them).
#[derive(Clone, Copy, Debug)]
pub struct Loaded {
    pub h: Handles,
    pub c_load: NurandConsts,
}

fn astr(r: &mut impl Rng, lo: usize, hi: usize) -> String {
    const A: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let n = r.random_range(lo..=hi);
    (0..n)
        .map(|_| A[r.random_range(0..A.len())] as char)
        .collect()
}

fn nstr(r: &mut impl Rng, n: usize) -> String {
    (0..n)
        .map(|_| char::from(b'0' + r.random_range(0..10u8)))
        .collect()
}

/// I_DATA / S_DATA: 26-50 characters, 10% with "ORIGINAL" at a random position.
fn data_original(r: &mut impl Rng) -> String {
    let mut s = astr(r, 26, 50);
    if r.random_range(0..10) == 0 {
        let at = r.random_range(0..=s.len() - 8);
        s.replace_range(at..at + 8, "ORIGINAL");
    }
    s
}

fn address(r: &mut impl Rng) -> [Value; 5] {
    [
        Value::Str(astr(r, 10, 20)),
        Value::Str(astr(r, 10, 20)),
        Value::Str(astr(r, 10, 20)),
        Value::Str(astr(r, 2, 2).to_uppercase()),
        Value::Str(format!("{}11111", nstr(r, 4))),
    ]
}

fn int(v: u32) -> Value {
    Value::Int(i64::from(v))
}

/// Creates the schema and loads the population row by row (invariants in the module doc).
/// `progress(rows_done)` is called after each batch; the total is about `cfg.rows_estimate()`.
pub fn load(
    e: &mut Engine,
    cfg: TpccConfig,
    seed: u64,
    progress: impl FnMut(u64),
) -> Result<Loaded> {
    load_with_ddl(e, cfg, DDL, seed, progress)
}

/// `load` with the schema `ddl`: `DDL`, or it with tables placed in regions
/// (`crate::place_tables`).
pub fn load_with_ddl(
    e: &mut Engine,
    cfg: TpccConfig,
    ddl: &str,
    seed: u64,
    progress: impl FnMut(u64),
) -> Result<Loaded> {
    load_using(e, cfg, ddl, seed, LoadMethod::Rows, progress)
}

/// `load_with_ddl` by `method`: the same rows in the same order either way (batch.rs; the
/// generator draws from one random stream, so the order is what makes the rows the same);
/// `Bulk` keeps one bulk load per table open and ends with a checkpoint.
pub fn load_using(
    e: &mut Engine,
    cfg: TpccConfig,
    ddl: &str,
    seed: u64,
    method: LoadMethod,
    mut progress: impl FnMut(u64),
) -> Result<Loaded> {
    cfg.validate()?;
    let t = e.begin()?;
    e.execute_ddl(t, ddl)?;
    e.commit(t)?;
    let h = Handles::get(e)?;
    let c_load = NurandConsts::load(seed);
    let mut r = rng_for(seed, u64::MAX - 2);
    let now = timestamp_s(e);
    // 300,000.00 and 30,000.00 in the specification: the loaded history (10.00 per customer),
    // so that conditions 8 and 9 also hold for a reduced population.
    let d_ytd_cents = i64::from(cfg.customers_per_district) * 1000;
    let w_ytd_cents = d_ytd_cents * i64::from(cfg.districts_per_warehouse);
    let mut b = Batcher::begin(e, method, &mut progress)?;
    load_items(e, &mut b, &h, &cfg, &mut r)?;
    for w in 1..=cfg.warehouses {
        load_warehouse(e, &mut b, &h, &cfg, &mut r, w, w_ytd_cents)?;
        for d in 1..=cfg.districts_per_warehouse {
            load_district(e, &mut b, &h, &cfg, &mut r, (w, d), d_ytd_cents)?;
            load_customers(e, &mut b, &h, &cfg, &mut r, (w, d), now, c_load)?;
            load_orders(e, &mut b, &h, &cfg, &mut r, (w, d), now)?;
        }
    }
    b.finish(e)?;
    Ok(Loaded { h, c_load })
}

/// The handles and load constants of a TPC-C database loaded earlier (by `load_using` with
/// `seed`) and opened again, after its population is checked against `cfg` by key: the last
/// warehouse, item and customer of `cfg` must exist and the next ones must not, so that a run
/// with other flags than the load's is refused instead of drawing keys the database lacks.
/// The load's NURand constant cannot be read back from the rows: it is derived from `seed`
/// again, which must be the load's.
pub fn reopened(e: &mut Engine, cfg: TpccConfig, seed: u64) -> Result<Loaded> {
    cfg.validate()?;
    let h = Handles::get(e)?;
    let t = e.begin()?;
    let probes: [(&str, ObjectId, Vec<Value>, Vec<Value>); 3] = [
        (
            "warehouses (--scale)",
            h.warehouse_pk,
            vec![int(cfg.warehouses)],
            vec![int(cfg.warehouses + 1)],
        ),
        (
            "items (--items)",
            h.item_pk,
            vec![int(cfg.items)],
            vec![int(cfg.items + 1)],
        ),
        (
            "customers per district (--customers)",
            h.customer_pk,
            vec![int(1), int(1), int(cfg.customers_per_district)],
            vec![int(1), int(1), int(cfg.customers_per_district + 1)],
        ),
    ];
    for (what, index, last, next) in probes {
        let has_last = !e.lookup(t, index, &last, false)?.is_empty();
        let has_next = !e.lookup(t, index, &next, false)?.is_empty();
        if !has_last || has_next {
            e.abort(t)?;
            return Err(Error::Schema(format!(
                "the TPC-C database opened again was not loaded with these {what}: give the \
                 load's flags"
            )));
        }
    }
    e.commit(t)?;
    Ok(Loaded {
        h,
        c_load: NurandConsts::load(seed),
    })
}

/// The ITEM rows: a step because they come first, before any warehouse (the row order is
/// what makes the rows the same, see `load_using`).
fn load_items<F: FnMut(u64)>(
    e: &mut Engine,
    b: &mut Batcher<'_, F>,
    h: &Handles,
    cfg: &TpccConfig,
    r: &mut Xoshiro256PlusPlus,
) -> Result<()> {
    for i in 1..=cfg.items {
        let row = [
            int(i),
            int(r.random_range(1..=10_000)),
            Value::Str(astr(r, 14, 24)),
            Value::Money(r.random_range(100..=10_000)),
            Value::Str(data_original(r)),
        ];
        b.put(e, h.item, &row)?;
    }
    Ok(())
}

/// Warehouse `w`'s row, then its STOCK rows: a step because each warehouse starts with
/// them, before its districts.
fn load_warehouse<F: FnMut(u64)>(
    e: &mut Engine,
    b: &mut Batcher<'_, F>,
    h: &Handles,
    cfg: &TpccConfig,
    r: &mut Xoshiro256PlusPlus,
    w: u32,
    w_ytd_cents: i64,
) -> Result<()> {
    let [s1, s2, city, st, zip] = address(r);
    let row = [
        int(w),
        Value::Str(astr(r, 6, 10)),
        s1,
        s2,
        city,
        st,
        zip,
        int(r.random_range(0..=2000)),
        Value::Money(w_ytd_cents),
    ];
    b.put(e, h.warehouse, &row)?;
    for i in 1..=cfg.items {
        let mut row = vec![int(i), int(w), int(r.random_range(10..=100))];
        for _ in 0..10 {
            row.push(Value::Str(astr(r, 24, 24)));
        }
        row.extend([int(0), int(0), int(0), Value::Str(data_original(r))]);
        b.put(e, h.stock, &row)?;
    }
    Ok(())
}

/// District `d` of warehouse `w`'s row: a step because each district starts with it,
/// before its customers and orders.
fn load_district<F: FnMut(u64)>(
    e: &mut Engine,
    b: &mut Batcher<'_, F>,
    h: &Handles,
    cfg: &TpccConfig,
    r: &mut Xoshiro256PlusPlus,
    (w, d): (u32, u32),
    d_ytd_cents: i64,
) -> Result<()> {
    let [s1, s2, city, st, zip] = address(r);
    let row = [
        int(d),
        int(w),
        Value::Str(astr(r, 6, 10)),
        s1,
        s2,
        city,
        st,
        zip,
        int(r.random_range(0..=2000)),
        Value::Money(d_ytd_cents),
        int(cfg.orders_per_district + 1),
    ];
    b.put(e, h.district, &row)?;
    Ok(())
}

/// The district's customers, each followed by its one history row: a step because the
/// customers come after the district row and before its orders.
#[allow(clippy::too_many_arguments)]
fn load_customers<F: FnMut(u64)>(
    e: &mut Engine,
    b: &mut Batcher<'_, F>,
    h: &Handles,
    cfg: &TpccConfig,
    r: &mut Xoshiro256PlusPlus,
    (w, d): (u32, u32),
    now: i64,
    c_load: NurandConsts,
) -> Result<()> {
    for c in 1..=cfg.customers_per_district {
        let last = if c <= 1000 {
            last_name(c - 1)
        } else {
            last_name(nurand(r, 255, 0, 999, c_load.c_last))
        };
        let [s1, s2, city, st, zip] = address(r);
        let credit = if r.random_range(0..10) == 0 {
            "BC"
        } else {
            "GC"
        };
        let row = [
            int(c),
            int(d),
            int(w),
            Value::Str(astr(r, 8, 16)),
            Value::Str("OE".into()),
            Value::Str(last),
            s1,
            s2,
            city,
            st,
            zip,
            Value::Str(nstr(r, 16)),
            Value::Int(now),
            Value::Str(credit.into()),
            Value::Money(5_000_000),
            int(r.random_range(0..=5000)),
            Value::Money(-1000),
            Value::Money(1000),
            int(1),
            int(0),
            Value::Str(astr(r, 300, 500)),
        ];
        b.put(e, h.customer, &row)?;
        let hist = [
            int(c),
            int(d),
            int(w),
            int(d),
            int(w),
            Value::Int(now),
            Value::Money(1000),
            Value::Str(astr(r, 12, 24)),
        ];
        b.put(e, h.history, &hist)?;
    }
    Ok(())
}

/// The district's orders (customers in a random permutation), each with its order lines
/// and, if undelivered, its new-order row: a step because they close the district.
fn load_orders<F: FnMut(u64)>(
    e: &mut Engine,
    b: &mut Batcher<'_, F>,
    h: &Handles,
    cfg: &TpccConfig,
    r: &mut Xoshiro256PlusPlus,
    (w, d): (u32, u32),
    now: i64,
) -> Result<()> {
    let mut perm: Vec<u32> = (1..=cfg.customers_per_district).collect();
    perm.shuffle(r);
    let first_new = cfg.delivered_per_district() + 1;
    for o in 1..=cfg.orders_per_district {
        let delivered = o < first_new;
        let ol_cnt = r.random_range(5..=15u32);
        let carrier = if delivered { r.random_range(1..=10) } else { 0 };
        let row = [
            int(o),
            int(d),
            int(w),
            int(perm[(o - 1) as usize]),
            Value::Int(now),
            int(carrier),
            int(ol_cnt),
            int(1),
        ];
        b.put(e, h.orders, &row)?;
        for n in 1..=ol_cnt {
            let amount = if delivered {
                0
            } else {
                r.random_range(1..=999_999)
            };
            let row = [
                int(o),
                int(d),
                int(w),
                int(n),
                int(r.random_range(1..=cfg.items)),
                int(w),
                Value::Int(if delivered { now } else { 0 }),
                int(5),
                Value::Money(amount),
                Value::Str(astr(r, 24, 24)),
            ];
            b.put(e, h.order_line, &row)?;
        }
        if !delivered {
            b.put(e, h.new_order, &[int(o), int(d), int(w)])?;
        }
    }
    Ok(())
}
