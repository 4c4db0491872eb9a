//! The workload of the IAA paper (Miyaji, Sun and Takeuchi, "IAA"; docs/iaa.md): one table of
//! rows of a few hundred bytes (default 256 B), random Insert, Delete and Update queries with
//! configurable probabilities (default equal), each query its own transaction.
//!
//! The table is kept at a target row count, so that the device's free space (what the table,
//! its index and the log leave of the store's logical capacity) is the controlled variable: an
//! Insert drawn while the terminal's rows are above its share of the target by more than
//! `slack` becomes a Delete, and a Delete drawn below it an Insert.
//!
//! Rows: `id BIGINT` (unique index `iaa_pk`), `ver BIGINT` (bumped by each Update), `pad
//! CHAR(n)`; the pad is a function of (id, ver), so `check` can tell every row's content is the
//! one its last committed query wrote. Keys are partitioned over the terminals (terminal `i`
//! owns the keys equal to `i` modulo the terminal count), so terminals never conflict on a row.
//!
//! The schemes (`Scheme`) are the table's tablespace options: conventional (`REUSE=on`: free
//! space is reused by next fit, so the table keeps its size), IAA, U2DI, IAA+U2DI.

use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use storage::sched::{Step, Terminal};
use storage::tuple::Value;
use storage::{Engine, Error, ObjectId, Result};

use crate::batch::Batcher;
use crate::settle::{settle, Settled};

/// Which of IAA and U2DI a run turns on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Scheme {
    Conventional,
    Iaa,
    U2di,
    IaaU2di,
}

impl Scheme {
    pub const ALL: [Scheme; 4] = [
        Scheme::Conventional,
        Scheme::Iaa,
        Scheme::U2di,
        Scheme::IaaU2di,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Conventional => "conventional",
            Scheme::Iaa => "iaa",
            Scheme::U2di => "u2di",
            Scheme::IaaU2di => "iaa+u2di",
        }
    }
    fn options(self) -> &'static str {
        match self {
            Scheme::Conventional => "(REUSE=on)",
            Scheme::Iaa => "(IAA=on, U2DI=off)",
            Scheme::U2di => "(IAA=off, U2DI=on)",
            Scheme::IaaU2di => "(IAA=on, U2DI=on)",
        }
    }
}

impl std::str::FromStr for Scheme {
    type Err = Error;
    fn from_str(s: &str) -> Result<Scheme> {
        Scheme::ALL
            .into_iter()
            .find(|x| x.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                Error::Config(format!(
                    "unknown scheme '{s}' (conventional, iaa, u2di, iaa+u2di)"
                ))
            })
    }
}

/// The workload's knobs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IaaConfig {
    /// Rows kept in the table.
    pub rows: u64,
    /// Bytes of a row as stored (at least 24).
    pub row_bytes: usize,
    /// Relative weights of Insert, Delete and Update.
    pub weights: [u32; 3],
    /// How far (fraction of a terminal's share) the row count may drift from the target.
    pub slack: f64,
    /// Share of the loaded pages' record space the rows fill: the load leaves one hole every
    /// `hole_every` rows, spread over all pages, as a table in its steady state has them.
    pub density: f64,
    pub scheme: Scheme,
}

impl Default for IaaConfig {
    fn default() -> Self {
        IaaConfig {
            rows: 10_000,
            row_bytes: 256,
            weights: [1, 1, 1],
            slack: 0.02,
            density: 0.85,
            scheme: Scheme::IaaU2di,
        }
    }
}

/// Fixed bytes of a row before its pad: id and ver.
const HEAD_BYTES: usize = 16;

impl IaaConfig {
    pub fn check(&self) -> Result<()> {
        if self.row_bytes < HEAD_BYTES + 8 || self.row_bytes > 2048 {
            return Err(Error::Config(format!(
                "rows of {} bytes: between {} and 2048",
                self.row_bytes,
                HEAD_BYTES + 8
            )));
        }
        check_weights(&self.weights)?;
        if self.rows == 0 {
            return Err(Error::Config("the table needs at least one row".into()));
        }
        if !(0.05..=1.0).contains(&self.density) {
            return Err(Error::Config(format!(
                "density {} is not in [0.05, 1]",
                self.density
            )));
        }
        if !(0.0..1.0).contains(&self.slack) {
            return Err(Error::Config(format!(
                "slack {} is not in [0, 1)",
                self.slack
            )));
        }
        Ok(())
    }
    fn pad_bytes(&self) -> usize {
        self.row_bytes - HEAD_BYTES
    }
    /// One loaded id in `hole_every()` is deleted after the load (a hole).
    fn hole_every(&self) -> i64 {
        if self.density >= 0.995 {
            i64::MAX
        } else {
            ((1.0 / (1.0 - self.density)).round() as i64).max(2)
        }
    }
    /// Ids the load inserts: enough that `rows` remain after the holes are cut.
    fn loaded_ids(&self) -> i64 {
        let k = self.hole_every();
        if k == i64::MAX {
            return self.rows as i64;
        }
        // Per k ids, k - 1 remain.
        (self.rows as i64 * k + k - 2) / (k - 1)
    }
    /// The ids that remain after the load.
    fn initial_ids(&self) -> impl Iterator<Item = i64> + '_ {
        let k = self.hole_every();
        (0..self.loaded_ids()).filter(move |id| id % k != k - 1)
    }
}

/// The next query at `weights`, kept to the table's size (the device's free space is the
/// controlled variable): with `rows` of `target` rows, an Insert above the target by more than
/// `slack` of it (or into a `full` table) becomes a Delete, a Delete below it (or of an empty
/// table) an Insert, an Update of an empty table an Insert.
pub(crate) fn draw_query(
    rng: &mut Xoshiro256PlusPlus,
    weights: [u32; 3],
    (rows, target): (usize, usize),
    slack: f64,
    full: bool,
) -> Query {
    let x = rng.random_range(0..weights.iter().sum::<u32>());
    let q = if x < weights[0] {
        Query::Insert
    } else if x < weights[0] + weights[1] {
        Query::Delete
    } else {
        Query::Update
    };
    let band = ((target as f64 * slack).ceil() as usize).max(1);
    match q {
        Query::Insert if rows > target + band || full => Query::Delete,
        Query::Delete if rows + band < target || rows == 0 => Query::Insert,
        Query::Update if rows == 0 => Query::Insert,
        q => q,
    }
}

/// Refuses Insert, Delete and Update weights that are all 0 (no query could be drawn).
pub(crate) fn check_weights(weights: &[u32; 3]) -> Result<()> {
    if weights.iter().all(|&w| w == 0) {
        return Err(Error::Config(
            "the Insert, Delete and Update probabilities are all 0".into(),
        ));
    }
    Ok(())
}

/// Object ids of the workload's table and index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handles {
    pub table: ObjectId,
    pub pk: ObjectId,
}

impl Handles {
    pub fn get(e: &Engine) -> Result<Handles> {
        Ok(Handles {
            table: e.table("iaa_rows")?.id,
            pk: e.index("iaa_pk")?.id,
        })
    }
}

/// The pad of row (id, ver): letters from a hash of both, so that a stale or torn row shows.
fn pad(id: i64, ver: i64, n: usize) -> String {
    let mut x = (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (ver as u64).rotate_left(17);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

/// The row bytes of (id, ver) under `cfg`.
pub fn row(e: &Engine, h: Handles, cfg: &IaaConfig, id: i64, ver: i64) -> Result<Vec<u8>> {
    let schema = &e.catalog().tables[&h.table].schema;
    schema.encode(&[
        Value::Int(id),
        Value::Int(ver),
        Value::Str(pad(id, ver, cfg.pad_bytes())),
    ])
}

/// Creates the table in a tablespace with the scheme's options and loads `cfg.rows` rows
/// (ids 0..rows, version 0).
pub fn load(e: &mut Engine, cfg: &IaaConfig, mut progress: impl FnMut(u64)) -> Result<Handles> {
    cfg.check()?;
    let ddl = format!(
        "CREATE TABLESPACE iaa_ts {};
         CREATE TABLE iaa_rows (id BIGINT, ver BIGINT, pad CHAR({})) TABLESPACE iaa_ts;
         CREATE UNIQUE INDEX iaa_pk ON iaa_rows (id)",
        cfg.scheme.options(),
        cfg.pad_bytes()
    );
    let t = e.begin()?;
    e.execute_ddl(t, &ddl)?;
    e.commit(t)?;
    let h = Handles::get(e)?;
    let mut b = Batcher::begin(e, crate::LoadMethod::Rows, &mut progress)?;
    for id in 0..cfg.loaded_ids() {
        b.put(
            e,
            h.table,
            &[
                Value::Int(id),
                Value::Int(0),
                Value::Str(pad(id, 0, cfg.pad_bytes())),
            ],
        )?;
    }
    b.finish(e)?;
    // The holes: every `hole_every`-th row goes again, so that every page has room.
    let k = cfg.hole_every();
    if k != i64::MAX {
        let mut t = e.begin()?;
        for (n, id) in (0..cfg.loaded_ids())
            .filter(|id| id % k == k - 1)
            .enumerate()
        {
            let rid = *e
                .lookup(t, h.pk, &[Value::Int(id)], true)?
                .first()
                .ok_or_else(|| Error::NotFound {
                    kind: "row",
                    name: format!("loaded key {id}"),
                })?;
            e.delete(t, h.table, rid)?;
            if n % 500 == 499 {
                e.commit(t)?;
                t = e.begin()?;
            }
        }
        e.commit(t)?;
    }
    Ok(h)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Query {
    Insert,
    Delete,
    Update,
}

/// The names of the queries, indexed by a `TxnEvent`'s `kind` (result files' `type`).
pub const QUERY_TYPES: [&str; 3] = ["insert", "delete", "update"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Start,
    Run,
    Committing,
}

/// The change a query makes to the terminal's own view of its rows, applied at commit.
#[derive(Clone, Copy, Debug)]
enum Pending {
    Insert(i64),
    Delete(usize),
    Update(usize),
}

/// One terminal: its rows (key and version), its random stream, its counters.
#[derive(Debug)]
pub struct IaaTerminal {
    pub id: u32,
    terminals: u32,
    h: Handles,
    cfg: IaaConfig,
    /// (key, version) of the rows this terminal owns.
    rows: Vec<(i64, i64)>,
    next_key: i64,
    target: usize,
    rng: Xoshiro256PlusPlus,
    txn: u64,
    stage: Stage,
    query: Query,
    pending: Option<Pending>,
    started_ns: u64,
    remaining: Option<u64>,
    pub committed: u64,
    pub aborted: u64,
    pub counts: [u64; 3],
    pub latency_ns: Histogram<u64>,
    /// Given a `Vec`: one `TxnEvent` per acknowledged commit (result files), `kind` indexing
    /// `QUERY_TYPES`.
    pub events: Option<Vec<storage::sched::TxnEvent>>,
}

impl IaaTerminal {
    /// Terminal `id` of `terminals`, owning the loaded keys equal to `id` modulo `terminals`.
    pub fn new(
        id: u32,
        terminals: u32,
        h: Handles,
        cfg: IaaConfig,
        seed: u64,
        txns: Option<u64>,
    ) -> IaaTerminal {
        let t = i64::from(terminals.max(1));
        let rows: Vec<(i64, i64)> = cfg
            .initial_ids()
            .filter(|k| k % t == i64::from(id))
            .map(|k| (k, 0))
            .collect();
        let mut next_key = cfg.loaded_ids();
        while next_key % t != i64::from(id) {
            next_key += 1;
        }
        IaaTerminal {
            id,
            terminals: terminals.max(1),
            h,
            target: rows.len(),
            rows,
            next_key,
            cfg,
            rng: Xoshiro256PlusPlus::seed_from_u64(
                seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ u64::from(id),
            ),
            txn: 0,
            stage: Stage::Start,
            query: Query::Insert,
            pending: None,
            started_ns: 0,
            remaining: txns,
            committed: 0,
            aborted: 0,
            counts: [0; 3],
            latency_ns: Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                .expect("static histogram bounds"),
            events: None,
        }
    }

    /// The (key, version) of every row this terminal committed.
    pub fn rows(&self) -> &[(i64, i64)] {
        &self.rows
    }

    /// The query whose commit was requested and not acknowledged, if any: its key, and the
    /// version the key has if it survives (`None`: the row is gone). A crash may keep it or
    /// not; `rows` holds the state without it.
    pub fn in_flight(&self) -> Option<(i64, Option<i64>)> {
        if self.stage != Stage::Committing {
            return None;
        }
        match self.pending? {
            Pending::Insert(k) => Some((k, Some(0))),
            Pending::Delete(i) => Some((self.rows[i].0, None)),
            Pending::Update(i) => Some((self.rows[i].0, Some(self.rows[i].1 + 1))),
        }
    }

    /// Starts the next run from where this terminal stopped (warm-up, then the measured run).
    pub fn reset_counters(&mut self, txns: Option<u64>) {
        self.committed = 0;
        self.aborted = 0;
        self.counts = [0; 3];
        self.latency_ns.reset();
        self.remaining = txns;
    }

    fn draw(&mut self) -> Query {
        draw_query(
            &mut self.rng,
            self.cfg.weights,
            (self.rows.len(), self.target),
            self.cfg.slack,
            false,
        )
    }

    fn rid_of(&mut self, e: &mut Engine, key: i64) -> Result<storage::Rid> {
        let rids = e.lookup(self.txn, self.h.pk, &[Value::Int(key)], true)?;
        rids.first().copied().ok_or_else(|| Error::NotFound {
            kind: "row",
            name: format!("key {key} of iaa_rows"),
        })
    }

    fn run_query(&mut self, e: &mut Engine) -> Result<()> {
        match self.query {
            Query::Insert => {
                let key = self.next_key;
                let bytes = row(e, self.h, &self.cfg, key, 0)?;
                e.insert_raw(self.txn, self.h.table, &bytes)?;
                self.pending = Some(Pending::Insert(key));
            }
            Query::Delete => {
                let i = self.rng.random_range(0..self.rows.len());
                let rid = self.rid_of(e, self.rows[i].0)?;
                e.delete(self.txn, self.h.table, rid)?;
                self.pending = Some(Pending::Delete(i));
            }
            Query::Update => {
                let i = self.rng.random_range(0..self.rows.len());
                let (key, ver) = self.rows[i];
                let rid = self.rid_of(e, key)?;
                let bytes = row(e, self.h, &self.cfg, key, ver + 1)?;
                e.update_row(self.txn, self.h.table, rid, &bytes)?;
                self.pending = Some(Pending::Update(i));
            }
        }
        Ok(())
    }

    fn stage(&mut self, e: &mut Engine) -> Result<Step> {
        match self.stage {
            Stage::Start => {
                if self.remaining == Some(0) {
                    return Ok(Step::Finished);
                }
                self.query = self.draw();
                self.started_ns = e.now();
                self.txn = e.begin()?;
                self.stage = Stage::Run;
                Ok(Step::Ran)
            }
            Stage::Run => {
                self.run_query(e)?;
                let lsn = e.commit_request(self.txn)?;
                self.stage = Stage::Committing;
                Ok(Step::WaitDurable(lsn))
            }
            Stage::Committing => Err(Error::Unsupported(
                "a committing terminal was stepped".into(),
            )),
        }
    }
}

impl Terminal for IaaTerminal {
    fn step(&mut self, e: &mut Engine) -> Result<Step> {
        let step = self.stage(e);
        match settle(e, &mut self.txn, step)? {
            Settled::Step(s) => Ok(s),
            Settled::Retry => {
                self.aborted += 1;
                self.pending = None;
                self.stage = Stage::Run;
                Ok(Step::Ran)
            }
        }
    }

    fn durable(&mut self, e: &mut Engine) -> Result<()> {
        let acked_ns = e.now();
        e.commit_finish(self.txn)?;
        match self.pending.take() {
            Some(Pending::Insert(k)) => {
                self.rows.push((k, 0));
                self.next_key += i64::from(self.terminals);
                self.counts[0] += 1;
            }
            Some(Pending::Delete(i)) => {
                self.rows.swap_remove(i);
                self.counts[1] += 1;
            }
            Some(Pending::Update(i)) => {
                self.rows[i].1 += 1;
                self.counts[2] += 1;
            }
            None => {}
        }
        self.committed += 1;
        if let Some(r) = self.remaining.as_mut() {
            *r -= 1;
        }
        let latency_ns = acked_ns.saturating_sub(self.started_ns).max(1);
        let _ = self.latency_ns.record(latency_ns);
        if let Some(ev) = self.events.as_mut() {
            ev.push(storage::sched::TxnEvent {
                start_ns: self.started_ns,
                latency_ns,
                kind: self.query as u8,
                // The terminal's index, set when its events join the run's trace.
                worker: 0,
                committed: true,
            });
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
    pub rows: u64,
    pub problems: Vec<String>,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the table against `expected` (key, version) rows (no active transactions): the
/// table holds exactly those rows, each with the content of its version; the index maps every
/// key to its row's record id and holds nothing else; the engine's structures are sound.
pub fn check(e: &mut Engine, cfg: &IaaConfig, expected: &[(i64, i64)]) -> Result<CheckReport> {
    let h = Handles::get(e)?;
    let mut r = CheckReport::default();
    let schema = e.catalog().tables[&h.table].schema.clone();
    let t = e.begin()?;
    let rows = e.scan_table(t, h.table)?;
    let mut want: std::collections::HashMap<i64, i64> = expected.iter().copied().collect();
    if want.len() != expected.len() {
        r.problems.push("the expected rows repeat a key".into());
    }
    for (rid, bytes) in &rows {
        let vals = schema.decode(bytes)?;
        let (id, ver) = (
            vals[0].as_i64().unwrap_or(-1),
            vals[1].as_i64().unwrap_or(-1),
        );
        match want.remove(&id) {
            Some(v) if v == ver => {}
            Some(v) => r
                .problems
                .push(format!("row {id}: version {ver}, expected {v}")),
            None => r.problems.push(format!("row {id} should not exist")),
        }
        if bytes != &row(e, h, cfg, id, ver)? {
            r.problems
                .push(format!("row {id}: content is not version {ver}'s"));
        }
        let rids = e.lookup(t, h.pk, &[Value::Int(id)], false)?;
        if rids != vec![*rid] {
            r.problems.push(format!(
                "index entry of row {id}: {rids:?}, the row is at {rid:?}"
            ));
        }
    }
    for id in want.keys().take(10) {
        r.problems.push(format!("row {id} is missing"));
    }
    let entries = e.scan_index(t, h.pk, None, None, false, usize::MAX)?.len();
    if entries != rows.len() {
        r.problems.push(format!(
            "the index holds {entries} entries for {} rows",
            rows.len()
        ));
    }
    e.commit(t)?;
    r.rows = rows.len() as u64;
    r.problems.extend(e.check()?);
    Ok(r)
}
