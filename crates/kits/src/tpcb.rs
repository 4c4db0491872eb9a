//! TPC-B: branches, tellers, accounts and history, and the one transaction.
//!
//! Schema (every row at least 100 bytes, history at least 50, as the specification asks):
//!
//! | table | columns | row bytes |
//! |---|---|---|
//! | branch | b_id INT, b_balance MONEY, b_filler CHAR(88) | 100 |
//! | teller | t_id INT, t_b_id INT, t_balance MONEY, t_filler CHAR(84) | 100 |
//! | account | a_id INT, a_b_id INT, a_balance MONEY, a_filler CHAR(84) | 100 |
//! | history | h_t_id INT, h_b_id INT, h_a_id INT, h_delta MONEY, h_time BIGINT, h_seq BIGINT, h_filler CHAR(22) | 58 |
//!
//! Money is integer cents. `h_seq` identifies the transaction (terminal and sequence number),
//! which is what the crash test uses to match recovered history against acknowledged commits.
//!
//! The transaction: pick a teller uniformly; its branch is the home branch; the account comes
//! from the home branch with probability 85%, else from another branch (uniformly); the delta is
//! uniform in [-999,999, +999,999] cents. Update the account, the teller and the branch by the
//! delta, insert a history row, commit.
//!
//! Invariants checked by `check`: (1) the sums of account, teller and branch balances and of
//! history deltas are equal; (2) per branch, its balance equals the sum of its tellers'
//! balances and of the history deltas recorded for it; (3) the engine's structural check passes.

use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::sched::{Step, Terminal};

use crate::batch::Batcher;
use crate::settle::{settle, Settled};
use crate::LoadMethod;
use storage::tuple::Value;
use storage::{Engine, Error, ObjectId, Result, Rid};

pub const DDL: &str = "
CREATE TABLESPACE tpcb;
CREATE TABLE branch (b_id INT, b_balance MONEY, b_filler CHAR(88)) TABLESPACE tpcb;
CREATE TABLE teller (t_id INT, t_b_id INT, t_balance MONEY, t_filler CHAR(84)) TABLESPACE tpcb;
CREATE TABLE account (a_id INT, a_b_id INT, a_balance MONEY, a_filler CHAR(84)) TABLESPACE tpcb;
CREATE TABLE history (h_t_id INT, h_b_id INT, h_a_id INT, h_delta MONEY, h_time BIGINT, h_seq BIGINT, h_filler CHAR(22)) TABLESPACE tpcb;
CREATE UNIQUE INDEX branch_pk ON branch (b_id);
CREATE UNIQUE INDEX teller_pk ON teller (t_id);
CREATE UNIQUE INDEX account_pk ON account (a_id);
";

/// Size of the database. `scale` branches; the specification's 10 tellers and 100,000 accounts
/// per branch unless a test asks for fewer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TpcbConfig {
    pub scale: u32,
    pub tellers_per_branch: u32,
    pub accounts_per_branch: u32,
}

impl TpcbConfig {
    pub fn spec(scale: u32) -> Self {
        TpcbConfig {
            scale,
            tellers_per_branch: 10,
            accounts_per_branch: 100_000,
        }
    }
    pub fn tellers(&self) -> u32 {
        self.scale * self.tellers_per_branch
    }
    pub fn accounts(&self) -> u32 {
        self.scale * self.accounts_per_branch
    }
    /// Rows loaded (for progress).
    pub fn rows(&self) -> u64 {
        u64::from(self.scale) + u64::from(self.tellers()) + u64::from(self.accounts())
    }
    /// DB pages the loaded database takes, estimated before loading (to refuse a device too
    /// small up front, and to size the default buffer pool): 141 bytes of page space per row,
    /// heap and index together, as measured by loading scale 4 on 4 KiB pages (13,733 pages for
    /// 400,044 rows, 2026-11-23), plus the catalog's pages.
    pub fn db_pages_estimate(&self, page_bytes: usize) -> u64 {
        crate::pages_for(self.rows(), 141, page_bytes)
    }
}

/// Table and index ids, looked up once.
#[derive(Clone, Copy, Debug)]
pub struct Handles {
    pub branch: ObjectId,
    pub teller: ObjectId,
    pub account: ObjectId,
    pub history: ObjectId,
    pub branch_pk: ObjectId,
    pub teller_pk: ObjectId,
    pub account_pk: ObjectId,
}

impl Handles {
    pub fn get(e: &Engine) -> Result<Handles> {
        Ok(Handles {
            branch: e.table("branch")?.id,
            teller: e.table("teller")?.id,
            account: e.table("account")?.id,
            history: e.table("history")?.id,
            branch_pk: e.index("branch_pk")?.id,
            teller_pk: e.index("teller_pk")?.id,
            account_pk: e.index("account_pk")?.id,
        })
    }
}

fn filler(n: usize) -> Value {
    Value::Str("x".repeat(n))
}

/// Creates the schema and loads the rows (balances 0) row by row, committing every 2,000 rows.
/// `progress(rows_done)` is called after each batch.
pub fn load(e: &mut Engine, cfg: TpcbConfig, progress: impl FnMut(u64)) -> Result<Handles> {
    load_with_ddl(e, cfg, DDL, progress)
}

/// `load` with the schema `ddl`: `DDL`, or it with tables placed in regions
/// (`crate::place_tables`).
pub fn load_with_ddl(
    e: &mut Engine,
    cfg: TpcbConfig,
    ddl: &str,
    progress: impl FnMut(u64),
) -> Result<Handles> {
    load_using(e, cfg, ddl, LoadMethod::Rows, progress)
}

/// `load_with_ddl` by `method`: the same rows in the same order either way (batch.rs); `Bulk`
/// ends with a checkpoint.
pub fn load_using(
    e: &mut Engine,
    cfg: TpcbConfig,
    ddl: &str,
    method: LoadMethod,
    mut progress: impl FnMut(u64),
) -> Result<Handles> {
    if cfg.scale == 0 || cfg.tellers_per_branch == 0 || cfg.accounts_per_branch == 0 {
        return Err(Error::Config(
            "TPC-B needs at least one branch, teller and account".into(),
        ));
    }
    let t = e.begin()?;
    e.execute_ddl(t, ddl)?;
    e.commit(t)?;
    let h = Handles::get(e)?;
    let mut b = Batcher::begin(e, method, &mut progress)?;
    for br in 0..cfg.scale {
        b.put(
            e,
            h.branch,
            &[Value::Int(i64::from(br)), Value::Money(0), filler(88)],
        )?;
    }
    for tl in 0..cfg.tellers() {
        b.put(
            e,
            h.teller,
            &[
                Value::Int(i64::from(tl)),
                Value::Int(i64::from(tl / cfg.tellers_per_branch)),
                Value::Money(0),
                filler(84),
            ],
        )?;
    }
    for a in 0..cfg.accounts() {
        b.put(
            e,
            h.account,
            &[
                Value::Int(i64::from(a)),
                Value::Int(i64::from(a / cfg.accounts_per_branch)),
                Value::Money(0),
                filler(84),
            ],
        )?;
    }
    let done = b.finish(e)?;
    debug_assert_eq!(done, cfg.rows());
    Ok(h)
}

/// One transaction's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Input {
    pub account: u32,
    pub teller: u32,
    pub branch: u32,
    pub delta_cents: i64,
}

/// The input generator: the transaction stream of one terminal, from its seed alone.
#[derive(Debug, Clone)]
pub struct InputGen {
    cfg: TpcbConfig,
    rng: Xoshiro256PlusPlus,
}

impl InputGen {
    pub fn new(cfg: TpcbConfig, seed: u64, terminal: u32) -> Self {
        let s = seed ^ (u64::from(terminal) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        InputGen {
            cfg,
            rng: Xoshiro256PlusPlus::seed_from_u64(s),
        }
    }
    pub fn next_input(&mut self) -> Input {
        let c = self.cfg;
        let teller = self.rng.random_range(0..c.tellers());
        let branch = teller / c.tellers_per_branch;
        let acct_branch = if c.scale > 1 && self.rng.random_range(0..100) >= 85 {
            // A remote branch: any branch but the home one.
            let other = self.rng.random_range(0..c.scale - 1);
            if other >= branch {
                other + 1
            } else {
                other
            }
        } else {
            branch
        };
        let account =
            acct_branch * c.accounts_per_branch + self.rng.random_range(0..c.accounts_per_branch);
        let delta_cents = self.rng.random_range(-999_999i64..=999_999);
        Input {
            account,
            teller,
            branch,
            delta_cents,
        }
    }
}

/// A commit this terminal saw acknowledged (or requested), for the crash test's model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    pub seq: i64,
    pub input: Input,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Start,
    Account,
    Teller,
    Branch,
    History,
    Committing,
}

/// A TPC-B terminal: executes its input stream step by step.
#[derive(Debug)]
pub struct TpcbTerminal {
    pub id: u32,
    h: Handles,
    gen: InputGen,
    remaining: Option<u64>,
    input: Input,
    stage: Stage,
    txn: u64,
    started_ns: u64,
    seq: i64,
    pub committed: u64,
    pub aborted: u64,
    pub latency_ns: Histogram<u64>,
    /// Given a `Vec`: one `TxnEvent` per acknowledged commit (result files), kind 0.
    pub events: Option<Vec<storage::sched::TxnEvent>>,
    /// With `record`: every acknowledged commit, and the one whose commit is in flight.
    pub record: bool,
    pub acked: Vec<Done>,
    pub in_flight: Option<Done>,
}

impl TpcbTerminal {
    /// `txns`: how many transactions to commit (None: until the scheduler stops).
    pub fn new(id: u32, h: Handles, cfg: TpcbConfig, seed: u64, txns: Option<u64>) -> Self {
        TpcbTerminal {
            id,
            h,
            gen: InputGen::new(cfg, seed, id),
            remaining: txns,
            input: Input {
                account: 0,
                teller: 0,
                branch: 0,
                delta_cents: 0,
            },
            stage: Stage::Start,
            txn: 0,
            started_ns: 0,
            seq: 0,
            committed: 0,
            aborted: 0,
            latency_ns: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
            events: None,
            record: false,
            acked: Vec::new(),
            in_flight: None,
        }
    }

    fn seq_id(&self) -> i64 {
        (i64::from(self.id) << 40) | self.seq
    }

    fn update(
        &mut self,
        e: &mut Engine,
        table: ObjectId,
        index: ObjectId,
        key: u32,
        col: usize,
    ) -> Result<()> {
        let rids: Vec<Rid> = e.lookup(self.txn, index, &[Value::Int(i64::from(key))], true)?;
        let rid = *rids.first().ok_or_else(|| Error::NotFound {
            kind: "row",
            name: format!("key {key} of table #{table}"),
        })?;
        e.add_to_column(self.txn, table, rid, col, self.input.delta_cents)?;
        Ok(())
    }

    fn run_stage(&mut self, e: &mut Engine) -> Result<Step> {
        match self.stage {
            Stage::Start => {
                if self.remaining == Some(0) {
                    return Ok(Step::Finished);
                }
                self.input = self.gen.next_input();
                self.started_ns = e.now();
                self.seq += 1;
                self.txn = e.begin()?;
                self.stage = Stage::Account;
                Ok(Step::Ran)
            }
            Stage::Account | Stage::Teller | Stage::Branch => {
                // (table, index, key, balance column, next stage)
                let (t, i, k, col, next) = match self.stage {
                    Stage::Account => (
                        self.h.account,
                        self.h.account_pk,
                        self.input.account,
                        2,
                        Stage::Teller,
                    ),
                    Stage::Teller => (
                        self.h.teller,
                        self.h.teller_pk,
                        self.input.teller,
                        2,
                        Stage::Branch,
                    ),
                    _ => (
                        self.h.branch,
                        self.h.branch_pk,
                        self.input.branch,
                        1,
                        Stage::History,
                    ),
                };
                self.update(e, t, i, k, col)?;
                self.stage = next;
                Ok(Step::Ran)
            }
            Stage::History => {
                let inp = self.input;
                let row = [
                    Value::Int(i64::from(inp.teller)),
                    Value::Int(i64::from(inp.branch)),
                    Value::Int(i64::from(inp.account)),
                    Value::Money(inp.delta_cents),
                    Value::Int(e.now() as i64),
                    Value::Int(self.seq_id()),
                    filler(22),
                ];
                e.insert(self.txn, self.h.history, &row)?;
                let lsn = e.commit_request(self.txn)?;
                if self.record {
                    self.in_flight = Some(Done {
                        seq: self.seq_id(),
                        input: inp,
                    });
                }
                self.stage = Stage::Committing;
                Ok(Step::WaitDurable(lsn))
            }
            Stage::Committing => Err(Error::Unsupported(
                "a committing terminal was stepped".into(),
            )),
        }
    }
}

impl Terminal for TpcbTerminal {
    fn step(&mut self, e: &mut Engine) -> Result<Step> {
        let step = self.run_stage(e);
        match settle(e, &mut self.txn, step)? {
            Settled::Step(s) => Ok(s),
            Settled::Retry => {
                self.aborted += 1;
                self.seq += 1;
                self.stage = Stage::Account;
                Ok(Step::Ran)
            }
        }
    }

    fn durable(&mut self, e: &mut Engine) -> Result<()> {
        // The latency ends at the acknowledgement, when the commit is durable: not after
        // `commit_finish`, whose own I/O (a checkpoint) would count a device's virtual time
        // into a real-clock run's wall-clock latency.
        let acked_ns = e.now();
        e.commit_finish(self.txn)?;
        self.committed += 1;
        if let Some(r) = self.remaining.as_mut() {
            *r -= 1;
        }
        let _ = self
            .latency_ns
            .record(acked_ns.saturating_sub(self.started_ns).max(1));
        if let Some(ev) = self.events.as_mut() {
            ev.push(storage::sched::TxnEvent {
                start_ns: self.started_ns,
                latency_ns: acked_ns.saturating_sub(self.started_ns).max(1),
                kind: 0,
                // The terminal's index, set when its events join the run's trace.
                worker: 0,
                committed: true,
            });
        }
        if let Some(d) = self.in_flight.take() {
            self.acked.push(d);
        }
        self.stage = Stage::Start;
        Ok(())
    }

    fn in_transaction(&self) -> bool {
        self.stage != Stage::Start
    }
}

/// What `check` found.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CheckReport {
    pub branch_sum: i64,
    pub teller_sum: i64,
    pub account_sum: i64,
    pub history_sum: i64,
    pub history_rows: u64,
    pub problems: Vec<String>,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Reads a whole table's rows (no locks: run with no active transactions).
pub fn rows(e: &mut Engine, table: ObjectId) -> Result<Vec<Vec<Value>>> {
    let schema = e.catalog().tables[&table].schema.clone();
    let t = e.begin()?;
    let rows = e.scan_table(t, table)?;
    e.commit(t)?;
    rows.into_iter().map(|(_, b)| schema.decode(&b)).collect()
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(i64::MIN)
}

/// The TPC-B consistency check (invariants in the module doc).
pub fn check(e: &mut Engine, cfg: TpcbConfig) -> Result<CheckReport> {
    let h = Handles::get(e)?;
    let mut r = CheckReport::default();
    let branches = rows(e, h.branch)?;
    let tellers = rows(e, h.teller)?;
    let accounts = rows(e, h.account)?;
    let history = rows(e, h.history)?;
    if branches.len() != cfg.scale as usize
        || tellers.len() != cfg.tellers() as usize
        || accounts.len() != cfg.accounts() as usize
    {
        r.problems.push(format!(
            "row counts {}/{}/{} differ from the scale's {}/{}/{}",
            branches.len(),
            tellers.len(),
            accounts.len(),
            cfg.scale,
            cfg.tellers(),
            cfg.accounts()
        ));
    }
    r.branch_sum = branches.iter().map(|b| int(&b[1])).sum();
    r.teller_sum = tellers.iter().map(|t| int(&t[2])).sum();
    r.account_sum = accounts.iter().map(|a| int(&a[2])).sum();
    r.history_sum = history.iter().map(|x| int(&x[3])).sum();
    r.history_rows = history.len() as u64;
    if !(r.branch_sum == r.teller_sum
        && r.teller_sum == r.account_sum
        && r.account_sum == r.history_sum)
    {
        r.problems.push(format!(
            "sums differ: branches {}, tellers {}, accounts {}, history {}",
            r.branch_sum, r.teller_sum, r.account_sum, r.history_sum
        ));
    }
    let mut per_branch = vec![(0i64, 0i64); cfg.scale as usize];
    for t in &tellers {
        if let Some(x) = per_branch.get_mut(int(&t[1]) as usize) {
            x.0 += int(&t[2]);
        }
    }
    for x in &history {
        if let Some(p) = per_branch.get_mut(int(&x[1]) as usize) {
            p.1 += int(&x[3]);
        }
    }
    for b in &branches {
        let id = int(&b[0]) as usize;
        if let Some(&(tsum, hsum)) = per_branch.get(id) {
            if int(&b[1]) != tsum || tsum != hsum {
                r.problems.push(format!(
                    "branch {id}: balance {}, its tellers {tsum}, its history {hsum}",
                    int(&b[1])
                ));
            }
        }
    }
    for p in e.check()? {
        r.problems.push(p);
    }
    Ok(r)
}
