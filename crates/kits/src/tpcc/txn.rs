//! The five TPC-C transaction profiles (clauses 2.4.2, 2.5.2, 2.6.2, 2.7.4, 2.8.2) and the
//! terminal that runs an input stream on the engine.
//!
//! Execution model: a terminal runs a whole transaction body (up to its commit request) in one
//! scheduler step, then waits for the group commit. Why: the bodies read and branch on what they
//! read (customer by last name, the oldest new order, the distinct items of the last 20 orders),
//! which a per-call state machine would have to spell out for every profile. Consequence: a lock
//! conflict cannot wait inside a step, so it rolls the transaction back and retries the same
//! input after a backoff of virtual time, `RETRY_BACKOFF_NS` doubling per retry of the same
//! input up to `RETRY_BACKOFF_MAX_NS` (counted in `retries`). The holder is always a transaction
//! waiting for its commit to become durable, so the retry succeeds once the force completes.
//! (Parking with the transaction open and retrying on every wake-up was tried: every retry's
//! rollback wakes every parked terminal, a herd of millions of retries.) With one terminal (the
//! comparison's default) there are no conflicts.
//!
//! Invariants:
//! 1. A New-Order whose last item id is unused (1% of inputs) reads every earlier item, finds
//!    the unused one and rolls back; it leaves no trace (engine abort undoes the district's
//!    D_NEXT_O_ID, the order, new-order, order-line and stock changes).
//! 2. Delivery delivers, for each district of the warehouse, its oldest undelivered order:
//!    deletes the new-order row, sets O_CARRIER_ID, sets OL_DELIVERY_D on its order lines, adds
//!    their amounts to the customer's C_BALANCE and increments C_DELIVERY_CNT; a district with
//!    no undelivered order is skipped (counted in `delivery_skipped`).
//! 3. A customer selected by last name is the one at position ceil(n / 2) of those with that
//!    name, in C_FIRST order (the index order).
//! 4. Money arithmetic is integer cents; the New-Order total (output only) rounds once.

use hdrhistogram::Histogram;
use storage::tuple::Value;
use storage::{Engine, Error, ObjectId, Result, Rid};

use super::col;
use super::config::{NurandConsts, TpccConfig};
use super::input::{CustomerBy, Input, InputGen, Kind};
use super::{timestamp_s, Handles};

/// Virtual time before a transaction rolled back by a lock conflict is retried.
pub const RETRY_BACKOFF_NS: u64 = 100_000;
/// The backoff's cap: a few log forces.
pub const RETRY_BACKOFF_MAX_NS: u64 = 3_200_000;

/// What a transaction body ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Ready to commit; for New-Order the order id it created.
    Commit { o_id: u32 },
    /// The New-Order rollback of invariant 1.
    RolledBack,
}

fn int(v: u32) -> Value {
    Value::Int(i64::from(v))
}

fn vi(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn not_found(what: &str) -> Error {
    Error::NotFound {
        kind: "row",
        name: what.to_string(),
    }
}

/// The one row of a unique key.
fn one(
    e: &mut Engine,
    txn: u64,
    idx: ObjectId,
    key: &[Value],
    upd: bool,
    what: &str,
) -> Result<Rid> {
    e.lookup(txn, idx, key, upd)?
        .first()
        .copied()
        .ok_or_else(|| not_found(what))
}

/// The record ids under a key prefix, in key order: an index scan bounded by the prefix (a table
/// S lock for phantom protection; rows are locked when they are read).
fn prefix(e: &mut Engine, txn: u64, idx: ObjectId, key: &[Value]) -> Result<Vec<Rid>> {
    Ok(
        e.scan_index(txn, idx, Some(key), Some(key), false, usize::MAX)?
            .into_iter()
            .map(|(_, r)| r)
            .collect(),
    )
}

fn read(e: &mut Engine, txn: u64, table: ObjectId, rid: Rid, upd: bool) -> Result<Vec<Value>> {
    let b = e
        .get_raw(txn, table, rid, upd)?
        .ok_or(Error::NoSuchRecord(rid))?;
    e.catalog()
        .tables
        .get(&table)
        .ok_or_else(|| not_found("table"))?
        .schema
        .decode(&b)
}

/// Selects the customer (invariant 3); returns its record id and row.
fn customer(
    e: &mut Engine,
    h: &Handles,
    txn: u64,
    w: u32,
    d: u32,
    by: &CustomerBy,
    upd: bool,
) -> Result<(Rid, Vec<Value>)> {
    let rid = match by {
        CustomerBy::Id(c) => one(
            e,
            txn,
            h.customer_pk,
            &[int(w), int(d), int(*c)],
            upd,
            "customer",
        )?,
        CustomerBy::LastName(name) => {
            let key = [int(w), int(d), Value::Str(name.clone())];
            let rids = prefix(e, txn, h.customer_name, &key)?;
            if rids.is_empty() {
                return Err(not_found(&format!(
                    "customer named {name} in district {w}/{d}"
                )));
            }
            rids[(rids.len() - 1) / 2]
        }
    };
    let row = read(e, txn, h.customer, rid, upd)?;
    Ok((rid, row))
}

/// Runs one transaction body inside `txn` (not committing it). For Delivery, `o_id` of the
/// outcome is the number of districts skipped.
pub fn execute(
    e: &mut Engine,
    h: &Handles,
    cfg: &TpccConfig,
    txn: u64,
    input: &Input,
) -> Result<Outcome> {
    match input {
        Input::NewOrder {
            w_id,
            d_id,
            c_id,
            lines,
            ..
        } => new_order(e, h, txn, *w_id, *d_id, *c_id, lines),
        Input::Payment {
            w_id,
            d_id,
            c_w_id,
            c_d_id,
            customer: by,
            amount_cents,
        } => payment(
            e,
            h,
            txn,
            (*w_id, *d_id),
            (*c_w_id, *c_d_id),
            by,
            *amount_cents,
        ),
        Input::OrderStatus {
            w_id,
            d_id,
            customer: by,
        } => order_status(e, h, txn, *w_id, *d_id, by),
        Input::Delivery { w_id, carrier_id } => {
            let skipped = delivery(e, h, cfg, txn, *w_id, *carrier_id)?;
            Ok(Outcome::Commit { o_id: skipped })
        }
        Input::StockLevel {
            w_id,
            d_id,
            threshold,
        } => stock_level(e, h, txn, *w_id, *d_id, *threshold),
    }
}

/// Payment (clause 2.5): adds the amount to the warehouse's and district's YTD, charges the
/// customer (C_DATA for bad credit) and inserts the history row. A step of `execute`, one
/// per transaction type, as `new_order` and `delivery`.
fn payment(
    e: &mut Engine,
    h: &Handles,
    txn: u64,
    (w_id, d_id): (u32, u32),
    (c_w_id, c_d_id): (u32, u32),
    by: &CustomerBy,
    amount_cents: i64,
) -> Result<Outcome> {
    let wr = one(e, txn, h.warehouse_pk, &[int(w_id)], true, "warehouse")?;
    e.add_to_column(txn, h.warehouse, wr, col::W_YTD, amount_cents)?;
    let w_name = read(e, txn, h.warehouse, wr, true)?[col::W_NAME]
        .as_str()
        .unwrap_or("")
        .trim_end()
        .to_string();
    let dr = one(
        e,
        txn,
        h.district_pk,
        &[int(w_id), int(d_id)],
        true,
        "district",
    )?;
    e.add_to_column(txn, h.district, dr, col::D_YTD, amount_cents)?;
    let d_name = read(e, txn, h.district, dr, true)?[col::D_NAME]
        .as_str()
        .unwrap_or("")
        .trim_end()
        .to_string();
    let (cr, mut c) = customer(e, h, txn, c_w_id, c_d_id, by, true)?;
    let c_id = vi(&c[col::C_ID]);
    c[col::C_BALANCE] = Value::Money(vi(&c[col::C_BALANCE]) - amount_cents);
    c[col::C_YTD_PAYMENT] = Value::Money(vi(&c[col::C_YTD_PAYMENT]) + amount_cents);
    c[col::C_PAYMENT_CNT] = Value::Int(vi(&c[col::C_PAYMENT_CNT]) + 1);
    if c[col::C_CREDIT].as_str() == Some("BC") {
        // Clause 2.5.2.2: prepend the payment to C_DATA, keep 500 characters (C_DATA is
        // CHAR(500), so the record keeps its size and is updated in place).
        let old = c[col::C_DATA].as_str().unwrap_or("");
        let mut s = format!(
            "{c_id} {c_d_id} {c_w_id} {d_id} {w_id} {}.{:02}|{old}",
            amount_cents / 100,
            amount_cents % 100
        );
        s.truncate(500);
        c[col::C_DATA] = Value::Str(s);
    }
    e.update(txn, h.customer, cr, &c)?;
    let mut h_data = format!("{w_name}    {d_name}");
    h_data.truncate(24);
    let row = [
        Value::Int(c_id),
        int(c_d_id),
        int(c_w_id),
        int(d_id),
        int(w_id),
        Value::Int(timestamp_s(e)),
        Value::Money(amount_cents),
        Value::Str(h_data),
    ];
    e.insert(txn, h.history, &row)?;
    Ok(Outcome::Commit { o_id: 0 })
}

/// Order-Status (clause 2.6): reads the customer, its latest order and that order's lines.
/// A step of `execute`, one per transaction type.
fn order_status(
    e: &mut Engine,
    h: &Handles,
    txn: u64,
    w_id: u32,
    d_id: u32,
    by: &CustomerBy,
) -> Result<Outcome> {
    let (_, c) = customer(e, h, txn, w_id, d_id, by, false)?;
    let c_id = vi(&c[col::C_ID]);
    let key = [int(w_id), int(d_id), Value::Int(c_id)];
    // The customer's latest order: the last entry of (w, d, c, o_id) in the index.
    if let Some((_, orid)) = e
        .scan_index(txn, h.orders_cust, Some(&key), Some(&key), true, 1)?
        .into_iter()
        .next()
    {
        let o = read(e, txn, h.orders, orid, false)?;
        let ols = prefix(
            e,
            txn,
            h.order_line_pk,
            &[int(w_id), int(d_id), o[col::O_ID].clone()],
        )?;
        for r in ols {
            read(e, txn, h.order_line, r, false)?;
        }
    }
    Ok(Outcome::Commit { o_id: 0 })
}

/// Stock-Level (clause 2.8): counts the items of the district's last 20 orders whose stock
/// is below `threshold`. A step of `execute`, one per transaction type.
fn stock_level(
    e: &mut Engine,
    h: &Handles,
    txn: u64,
    w_id: u32,
    d_id: u32,
    threshold: u32,
) -> Result<Outcome> {
    let dr = one(
        e,
        txn,
        h.district_pk,
        &[int(w_id), int(d_id)],
        false,
        "district",
    )?;
    let next = read(e, txn, h.district, dr, false)?[col::D_NEXT_O_ID]
        .as_i64()
        .unwrap_or(1);
    let lo = [int(w_id), int(d_id), Value::Int((next - 20).max(1))];
    let hi = [int(w_id), int(d_id), Value::Int(next - 1)];
    let mut items = std::collections::BTreeSet::new();
    for (_, r) in e.scan_index(
        txn,
        h.order_line_pk,
        Some(&lo),
        Some(&hi),
        false,
        usize::MAX,
    )? {
        items.insert(vi(&read(e, txn, h.order_line, r, false)?[col::OL_I_ID]));
    }
    let mut low = 0u32;
    for i in items {
        let sr = one(
            e,
            txn,
            h.stock_pk,
            &[int(w_id), Value::Int(i)],
            false,
            "stock",
        )?;
        if vi(&read(e, txn, h.stock, sr, false)?[col::S_QUANTITY]) < i64::from(threshold) {
            low += 1;
        }
    }
    let _ = low;
    Ok(Outcome::Commit { o_id: 0 })
}

fn new_order(
    e: &mut Engine,
    h: &Handles,
    txn: u64,
    w: u32,
    d: u32,
    c: u32,
    lines: &[super::input::OrderLineIn],
) -> Result<Outcome> {
    let wr = one(e, txn, h.warehouse_pk, &[int(w)], false, "warehouse")?;
    let w_tax = vi(&read(e, txn, h.warehouse, wr, false)?[col::W_TAX]);
    let dr = one(e, txn, h.district_pk, &[int(w), int(d)], true, "district")?;
    let dist = read(e, txn, h.district, dr, true)?;
    let d_tax = vi(&dist[col::D_TAX]);
    let o_id = e.add_to_column(txn, h.district, dr, col::D_NEXT_O_ID, 1)? - 1;
    let o_id =
        u32::try_from(o_id).map_err(|_| Error::Schema(format!("order id {o_id} out of range")))?;
    let cr = one(
        e,
        txn,
        h.customer_pk,
        &[int(w), int(d), int(c)],
        false,
        "customer",
    )?;
    let discount = vi(&read(e, txn, h.customer, cr, false)?[col::C_DISCOUNT]);
    let all_local = lines.iter().all(|l| l.supply_w_id == w);
    let now = timestamp_s(e);
    e.insert(
        txn,
        h.orders,
        &[
            int(o_id),
            int(d),
            int(w),
            int(c),
            Value::Int(now),
            int(0),
            int(lines.len() as u32),
            int(u32::from(all_local)),
        ],
    )?;
    e.insert(txn, h.new_order, &[int(o_id), int(d), int(w)])?;
    let mut total_cents = 0i64;
    for (n, l) in lines.iter().enumerate() {
        let Some(ir) = e
            .lookup(txn, h.item_pk, &[int(l.i_id)], false)?
            .first()
            .copied()
        else {
            // Clause 2.4.2.3: an unused item id rolls the whole transaction back.
            return Ok(Outcome::RolledBack);
        };
        let price = vi(&read(e, txn, h.item, ir, false)?[col::I_PRICE]);
        let sr = one(
            e,
            txn,
            h.stock_pk,
            &[int(l.supply_w_id), int(l.i_id)],
            true,
            "stock",
        )?;
        let mut s = read(e, txn, h.stock, sr, true)?;
        let q = vi(&s[col::S_QUANTITY]);
        let oq = i64::from(l.quantity);
        s[col::S_QUANTITY] = Value::Int(if q >= oq + 10 { q - oq } else { q - oq + 91 });
        s[col::S_YTD] = Value::Int(vi(&s[col::S_YTD]) + oq);
        s[col::S_ORDER_CNT] = Value::Int(vi(&s[col::S_ORDER_CNT]) + 1);
        if l.supply_w_id != w {
            s[col::S_REMOTE_CNT] = Value::Int(vi(&s[col::S_REMOTE_CNT]) + 1);
        }
        let dist_info = s[col::S_DIST_01 + (d as usize - 1) % 10].clone();
        e.update(txn, h.stock, sr, &s)?;
        let amount = oq * price;
        total_cents += amount;
        e.insert(
            txn,
            h.order_line,
            &[
                int(o_id),
                int(d),
                int(w),
                int(n as u32 + 1),
                int(l.i_id),
                int(l.supply_w_id),
                Value::Int(0),
                int(l.quantity),
                Value::Money(amount),
                dist_info,
            ],
        )?;
    }
    // Output only: total * (1 - discount) * (1 + w_tax + d_tax), rates in basis points.
    let _total = total_cents * (10_000 - discount) * (10_000 + w_tax + d_tax) / 100_000_000;
    Ok(Outcome::Commit { o_id })
}

/// Delivery (invariant 2); returns how many districts had nothing to deliver.
pub fn delivery(
    e: &mut Engine,
    h: &Handles,
    cfg: &TpccConfig,
    txn: u64,
    w: u32,
    carrier: u32,
) -> Result<u32> {
    let mut skipped = 0;
    let now = timestamp_s(e);
    for d in 1..=cfg.districts_per_warehouse {
        let key = [int(w), int(d)];
        let Some((_, nor)) = e
            .scan_index(txn, h.new_order_pk, Some(&key), Some(&key), false, 1)?
            .into_iter()
            .next()
        else {
            skipped += 1;
            continue;
        };
        let no = read(e, txn, h.new_order, nor, true)?;
        let o_id = no[0].clone();
        e.delete(txn, h.new_order, nor)?;
        let or = one(
            e,
            txn,
            h.orders_pk,
            &[int(w), int(d), o_id.clone()],
            true,
            "order",
        )?;
        let mut o = read(e, txn, h.orders, or, true)?;
        let c_id = o[col::O_C_ID].clone();
        o[col::O_CARRIER_ID] = int(carrier);
        e.update(txn, h.orders, or, &o)?;
        let mut sum = 0i64;
        for r in prefix(e, txn, h.order_line_pk, &[int(w), int(d), o_id.clone()])? {
            let mut ol = read(e, txn, h.order_line, r, true)?;
            sum += vi(&ol[col::OL_AMOUNT]);
            ol[col::OL_DELIVERY_D] = Value::Int(now);
            e.update(txn, h.order_line, r, &ol)?;
        }
        let cr = one(
            e,
            txn,
            h.customer_pk,
            &[int(w), int(d), c_id],
            true,
            "customer",
        )?;
        e.add_to_column(txn, h.customer, cr, col::C_BALANCE, sum)?;
        e.add_to_column(txn, h.customer, cr, col::C_DELIVERY_CNT, 1)?;
    }
    Ok(skipped)
}

/// A transaction this terminal saw acknowledged (or requested), for the crash test's model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    pub kind: Kind,
    pub w_id: u32,
    pub d_id: u32,
    /// New-Order: the order created (else 0).
    pub o_id: u32,
    pub ol_cnt: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Start,
    Committing,
}

/// Per-type counts of one terminal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Committed, by `Kind::index()`.
    pub committed: [u64; 5],
    /// New-Orders rolled back by their unused item (invariant 1).
    pub rolled_back: u64,
    /// Transactions rolled back by a lock conflict and retried.
    pub retries: u64,
    pub delivery_skipped: u64,
}

/// A TPC-C terminal: executes its input stream, one transaction per step.
#[derive(Debug)]
pub struct TpccTerminal {
    pub id: u32,
    h: Handles,
    cfg: TpccConfig,
    gen: InputGen,
    remaining: Option<u64>,
    input: Option<Input>,
    stage: Stage,
    txn: u64,
    started_ns: u64,
    pending: Option<Done>,
    /// The next backoff of the current input.
    backoff_ns: u64,
    pub counts: Counts,
    pub latency_ns: Histogram<u64>,
    /// Given a `Vec`: one `TxnEvent` per completed transaction (result files); kind:
    /// `Kind::index()`; a rolled-back New-Order: not committed.
    pub events: Option<Vec<storage::sched::TxnEvent>>,
    /// With `record`: every acknowledged commit, and the one whose commit is in flight.
    pub record: bool,
    pub acked: Vec<Done>,
    pub in_flight: Option<Done>,
}

impl TpccTerminal {
    /// `txns`: how many transactions to complete (commits plus New-Order rollbacks; None:
    /// until the scheduler stops). `run`: the run-time NURand constants.
    pub fn new(
        id: u32,
        h: Handles,
        cfg: TpccConfig,
        run: NurandConsts,
        seed: u64,
        txns: Option<u64>,
    ) -> Self {
        TpccTerminal {
            id,
            h,
            cfg,
            gen: InputGen::new(cfg, run, seed, id),
            remaining: txns,
            input: None,
            stage: Stage::Start,
            txn: 0,
            started_ns: 0,
            pending: None,
            backoff_ns: RETRY_BACKOFF_NS,
            counts: Counts::default(),
            latency_ns: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
            events: None,
            record: false,
            acked: Vec::new(),
            in_flight: None,
        }
    }

    pub fn committed(&self) -> u64 {
        self.counts.committed.iter().sum()
    }

    fn finish_one(&mut self, e: &Engine, kind: Kind, committed: bool) {
        if let Some(r) = self.remaining.as_mut() {
            *r = r.saturating_sub(1);
        }
        let _ = self.latency_ns.record((e.now() - self.started_ns).max(1));
        if let Some(ev) = self.events.as_mut() {
            ev.push(storage::sched::TxnEvent {
                start_ns: self.started_ns,
                latency_ns: (e.now() - self.started_ns).max(1),
                kind: kind.index() as u8,
                // The terminal's index, set when its events join the run's trace.
                worker: 0,
                committed,
            });
        }
        self.input = None;
        self.stage = Stage::Start;
    }

    fn attempt(&mut self, e: &mut Engine, input: &Input) -> Result<Step2> {
        self.txn = e.begin()?;
        let mut out = execute(e, &self.h, &self.cfg, self.txn, input)?;
        if let (Input::Delivery { .. }, Outcome::Commit { o_id: skipped }) = (input, out) {
            self.counts.delivery_skipped += u64::from(skipped);
            out = Outcome::Commit { o_id: 0 };
        }
        Ok(match out {
            Outcome::RolledBack => Step2::Rollback,
            Outcome::Commit { o_id } => {
                let (w_id, d_id, ol_cnt) = match input {
                    Input::NewOrder {
                        w_id, d_id, lines, ..
                    } => (*w_id, *d_id, lines.len() as u32),
                    Input::Payment { w_id, d_id, .. } => (*w_id, *d_id, 0),
                    _ => (0, 0, 0),
                };
                Step2::Commit(Done {
                    kind: input.kind(),
                    w_id,
                    d_id,
                    o_id,
                    ol_cnt,
                })
            }
        })
    }
}

/// After a run stopped by a deadline: forces the log and finishes the commits still waiting for
/// it, so that no transaction holds locks (a check can read everything). Call after taking the
/// run's figures: these commits fall outside the measured window.
pub fn settle(e: &mut Engine, terms: &mut [TpccTerminal]) -> Result<()> {
    // (A rolled-back conflict holds nothing: only commits in flight hold locks.)
    if terms.iter().any(|t| t.stage == Stage::Committing) {
        e.force_log()?;
        for t in terms.iter_mut().filter(|t| t.stage == Stage::Committing) {
            t.durable(e)?;
        }
    }
    Ok(())
}

enum Step2 {
    Commit(Done),
    Rollback,
}

use storage::sched::{Step, Terminal};

impl Terminal for TpccTerminal {
    fn step(&mut self, e: &mut Engine) -> Result<Step> {
        if self.stage == Stage::Committing {
            return Err(Error::Unsupported(
                "a committing terminal was stepped".into(),
            ));
        }
        let input = match self.input.take() {
            Some(i) => i,
            None => {
                if self.remaining == Some(0) {
                    return Ok(Step::Finished);
                }
                self.started_ns = e.now();
                self.backoff_ns = RETRY_BACKOFF_NS;
                self.gen.next_input()
            }
        };
        match self.attempt(e, &input) {
            Ok(Step2::Commit(done)) => {
                let lsn = e.commit_request(self.txn)?;
                self.pending = Some(done);
                if self.record {
                    self.in_flight = Some(done);
                }
                self.input = Some(input);
                self.stage = Stage::Committing;
                Ok(Step::WaitDurable(lsn))
            }
            Ok(Step2::Rollback) => {
                e.abort(self.txn)?;
                self.counts.rolled_back += 1;
                self.finish_one(e, input.kind(), false);
                Ok(Step::Ran)
            }
            Err(err)
                if err.is_retryable()
                    || matches!(err, Error::WouldBlock { .. } | Error::Deadlock { .. }) =>
            {
                // Roll back and retry the same input later (module doc: execution model).
                e.abort(self.txn)?;
                self.counts.retries += 1;
                let t = e.now() + self.backoff_ns;
                self.backoff_ns = (self.backoff_ns * 2).min(RETRY_BACKOFF_MAX_NS);
                e.set_now(t);
                self.input = Some(input);
                Ok(Step::Ran)
            }
            Err(err) => Err(err),
        }
    }

    fn durable(&mut self, e: &mut Engine) -> Result<()> {
        e.commit_finish(self.txn)?;
        let mut kind = Kind::NewOrder;
        if let Some(d) = self.pending.take() {
            self.counts.committed[d.kind.index()] += 1;
            kind = d.kind;
            if self.record {
                self.acked.push(d);
            }
        }
        self.in_flight = None;
        self.finish_one(e, kind, true);
        Ok(())
    }

    fn in_transaction(&self) -> bool {
        self.input.is_some()
    }
}
