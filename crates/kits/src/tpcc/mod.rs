//! TPC-C: nine tables, five transactions, the consistency conditions of clause 3.3.2.
//!
//! Module layout: `config` (the population's size, the home warehouse's choice, NURand and its
//! constants, last names: what the loader, the input generator and the transactions all draw
//! on; re-exported here), `load` (population, clause 4.3.3.1), `input` (the input generator: the
//! transaction mix and every parameter from a seed, kept apart from execution), `txn` (the five
//! transaction profiles of clauses 2.4-2.8 and the terminal), `check` (clause 3.3.2), `crash`
//! (the crash test on the NoFTL store).
//!
//! Representation (the engine has no NULLs and no decimals):
//! - money is integer cents (`MONEY`); tax and discount rates are integer basis points
//!   (1/10,000: W_TAX 0.1234 is 1234);
//! - dates are `BIGINT` seconds since 1970-01-01 (a fixed base date plus the virtual clock), and
//!   0 stands for NULL (O_CARRIER_ID 0 = NULL, OL_DELIVERY_D 0 = NULL);
//! - strings are fixed `CHAR(n)`, so every row has a fixed size and every update happens in
//!   place (heap records never move; C_DATA is CHAR(500) from the start, so the bad-credit
//!   Payment that prepends to it never grows the record).
//!
//! Invariants:
//! 1. `TpccConfig::spec(W)` is the specification's population (100,000 items, 10 districts,
//!    3,000 customers and orders per district, 900 new orders); anything smaller is a labelled
//!    reduced configuration (`reduced == true`), allowed only for tests.
//! 2. The run constant for C_LAST differs from the load constant by a delta in [65, 119] other
//!    than 96 and 112 (clause 2.1.6.1); `NurandConsts::run_from` guarantees it.
//! 3. Ids in the database are 1-based, as in the specification.

pub mod check;
mod config;
pub mod crash;
pub mod input;
pub mod load;
pub mod txn;

use storage::{Engine, ObjectId, Result};

pub use check::{check, CheckReport};
pub use config::{last_name, nurand, HomeWarehouse, NurandConsts, TpccConfig};
pub use input::{Input, InputGen, Kind};
pub use load::{load, load_using, load_with_ddl, reopened};
pub use txn::TpccTerminal;

pub const DDL: &str = "
CREATE TABLESPACE tpcc;
CREATE TABLE warehouse (w_id INT, w_name CHAR(10), w_street_1 CHAR(20), w_street_2 CHAR(20), w_city CHAR(20), w_state CHAR(2), w_zip CHAR(9), w_tax_bp INT, w_ytd MONEY) TABLESPACE tpcc;
CREATE TABLE district (d_id INT, d_w_id INT, d_name CHAR(10), d_street_1 CHAR(20), d_street_2 CHAR(20), d_city CHAR(20), d_state CHAR(2), d_zip CHAR(9), d_tax_bp INT, d_ytd MONEY, d_next_o_id INT) TABLESPACE tpcc;
CREATE TABLE customer (c_id INT, c_d_id INT, c_w_id INT, c_first CHAR(16), c_middle CHAR(2), c_last CHAR(16), c_street_1 CHAR(20), c_street_2 CHAR(20), c_city CHAR(20), c_state CHAR(2), c_zip CHAR(9), c_phone CHAR(16), c_since BIGINT, c_credit CHAR(2), c_credit_lim MONEY, c_discount_bp INT, c_balance MONEY, c_ytd_payment MONEY, c_payment_cnt INT, c_delivery_cnt INT, c_data CHAR(500)) TABLESPACE tpcc;
CREATE TABLE history (h_c_id INT, h_c_d_id INT, h_c_w_id INT, h_d_id INT, h_w_id INT, h_date BIGINT, h_amount MONEY, h_data CHAR(24)) TABLESPACE tpcc;
CREATE TABLE new_order (no_o_id INT, no_d_id INT, no_w_id INT) TABLESPACE tpcc;
CREATE TABLE orders (o_id INT, o_d_id INT, o_w_id INT, o_c_id INT, o_entry_d BIGINT, o_carrier_id INT, o_ol_cnt INT, o_all_local INT) TABLESPACE tpcc;
CREATE TABLE order_line (ol_o_id INT, ol_d_id INT, ol_w_id INT, ol_number INT, ol_i_id INT, ol_supply_w_id INT, ol_delivery_d BIGINT, ol_quantity INT, ol_amount MONEY, ol_dist_info CHAR(24)) TABLESPACE tpcc;
CREATE TABLE item (i_id INT, i_im_id INT, i_name CHAR(24), i_price MONEY, i_data CHAR(50)) TABLESPACE tpcc;
CREATE TABLE stock (s_i_id INT, s_w_id INT, s_quantity INT, s_dist_01 CHAR(24), s_dist_02 CHAR(24), s_dist_03 CHAR(24), s_dist_04 CHAR(24), s_dist_05 CHAR(24), s_dist_06 CHAR(24), s_dist_07 CHAR(24), s_dist_08 CHAR(24), s_dist_09 CHAR(24), s_dist_10 CHAR(24), s_ytd INT, s_order_cnt INT, s_remote_cnt INT, s_data CHAR(50)) TABLESPACE tpcc;
CREATE UNIQUE INDEX warehouse_pk ON warehouse (w_id);
CREATE UNIQUE INDEX district_pk ON district (d_w_id, d_id);
CREATE UNIQUE INDEX customer_pk ON customer (c_w_id, c_d_id, c_id);
CREATE INDEX customer_name ON customer (c_w_id, c_d_id, c_last, c_first);
CREATE UNIQUE INDEX new_order_pk ON new_order (no_w_id, no_d_id, no_o_id);
CREATE UNIQUE INDEX orders_pk ON orders (o_w_id, o_d_id, o_id);
CREATE UNIQUE INDEX orders_cust ON orders (o_w_id, o_d_id, o_c_id, o_id);
CREATE UNIQUE INDEX order_line_pk ON order_line (ol_w_id, ol_d_id, ol_o_id, ol_number);
CREATE UNIQUE INDEX item_pk ON item (i_id);
CREATE UNIQUE INDEX stock_pk ON stock (s_w_id, s_i_id);
";

/// Column numbers (schema order of `DDL`).
pub mod col {
    pub const W_TAX: usize = 7;
    pub const W_YTD: usize = 8;
    pub const W_NAME: usize = 1;
    pub const D_NAME: usize = 2;
    pub const D_TAX: usize = 8;
    pub const D_YTD: usize = 9;
    pub const D_NEXT_O_ID: usize = 10;
    pub const C_ID: usize = 0;
    pub const C_D_ID: usize = 1;
    pub const C_W_ID: usize = 2;
    pub const C_LAST: usize = 5;
    pub const C_CREDIT: usize = 13;
    pub const C_DISCOUNT: usize = 15;
    pub const C_BALANCE: usize = 16;
    pub const C_YTD_PAYMENT: usize = 17;
    pub const C_PAYMENT_CNT: usize = 18;
    pub const C_DELIVERY_CNT: usize = 19;
    pub const C_DATA: usize = 20;
    pub const H_C_ID: usize = 0;
    pub const H_C_D_ID: usize = 1;
    pub const H_C_W_ID: usize = 2;
    pub const H_D_ID: usize = 3;
    pub const H_W_ID: usize = 4;
    pub const H_AMOUNT: usize = 6;
    pub const O_ID: usize = 0;
    pub const O_D_ID: usize = 1;
    pub const O_W_ID: usize = 2;
    pub const O_C_ID: usize = 3;
    pub const O_CARRIER_ID: usize = 5;
    pub const O_OL_CNT: usize = 6;
    pub const OL_O_ID: usize = 0;
    pub const OL_D_ID: usize = 1;
    pub const OL_W_ID: usize = 2;
    pub const OL_I_ID: usize = 4;
    pub const OL_DELIVERY_D: usize = 6;
    pub const OL_AMOUNT: usize = 8;
    pub const I_PRICE: usize = 3;
    pub const S_QUANTITY: usize = 2;
    pub const S_DIST_01: usize = 3;
    pub const S_YTD: usize = 13;
    pub const S_ORDER_CNT: usize = 14;
    pub const S_REMOTE_CNT: usize = 15;
}

/// Table and index ids, looked up once.
#[derive(Clone, Copy, Debug)]
pub struct Handles {
    pub warehouse: ObjectId,
    pub district: ObjectId,
    pub customer: ObjectId,
    pub history: ObjectId,
    pub new_order: ObjectId,
    pub orders: ObjectId,
    pub order_line: ObjectId,
    pub item: ObjectId,
    pub stock: ObjectId,
    pub warehouse_pk: ObjectId,
    pub district_pk: ObjectId,
    pub customer_pk: ObjectId,
    pub customer_name: ObjectId,
    pub new_order_pk: ObjectId,
    pub orders_pk: ObjectId,
    pub orders_cust: ObjectId,
    pub order_line_pk: ObjectId,
    pub item_pk: ObjectId,
    pub stock_pk: ObjectId,
}

impl Handles {
    pub fn get(e: &Engine) -> Result<Handles> {
        Ok(Handles {
            warehouse: e.table("warehouse")?.id,
            district: e.table("district")?.id,
            customer: e.table("customer")?.id,
            history: e.table("history")?.id,
            new_order: e.table("new_order")?.id,
            orders: e.table("orders")?.id,
            order_line: e.table("order_line")?.id,
            item: e.table("item")?.id,
            stock: e.table("stock")?.id,
            warehouse_pk: e.index("warehouse_pk")?.id,
            district_pk: e.index("district_pk")?.id,
            customer_pk: e.index("customer_pk")?.id,
            customer_name: e.index("customer_name")?.id,
            new_order_pk: e.index("new_order_pk")?.id,
            orders_pk: e.index("orders_pk")?.id,
            orders_cust: e.index("orders_cust")?.id,
            order_line_pk: e.index("order_line_pk")?.id,
            item_pk: e.index("item_pk")?.id,
            stock_pk: e.index("stock_pk")?.id,
        })
    }
}

/// Seconds since 1970 of the virtual clock: a fixed base date (2026-01-01) plus virtual time,
/// so that dates are deterministic and never 0 (0 is NULL).
pub fn timestamp_s(e: &Engine) -> i64 {
    i64::from(storage::tuple::days_from_civil(2026, 1, 1)) * 86_400
        + (e.now() / 1_000_000_000) as i64
}
